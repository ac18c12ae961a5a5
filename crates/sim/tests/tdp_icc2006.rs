//! The ICC 2006 TDP testbed, shortened: the paper's claims hold.
//! TDP: zero loss, every flow's jitter below 2·T_f, link loads as stated
//! (§IV-B). FIFO: jitter clearly above TDP's (§IV-C: "an order of
//! magnitude"). Runs are 2 s instead of 10 min; the claims are per packet.

use qosnet_scenario::load_file;
use qosnet_scenario::results::Results;
use qosnet_sim::Sim;

const TF_NS: u64 = 250_000;

fn run(name: &str, sets: &[&str]) -> Results {
    let path = format!(
        "{}/../../scenarios/tdp-icc2006/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut s: Vec<String> = vec!["scenario.duration=2s".into()];
    s.extend(sets.iter().map(|x| x.to_string()));
    let sc = load_file(&path, &s).unwrap_or_else(|e| panic!("{e}"));
    Sim::new(sc).unwrap_or_else(|e| panic!("{e}")).run()
}

fn mbps(r: &Results, link: &str) -> f64 {
    r.link(link).unwrap_or_else(|| panic!("no link {link}")).load_bps / 1e6
}

fn check_tdp(r: &Results) {
    for f in &r.flows {
        assert!(f.sent > 600, "{}: only {} packets sent", f.name, f.sent);
        assert_eq!(f.lost, 0, "{}: TDP lost packets", f.name);
        assert_eq!(f.received, f.sent, "{}", f.name);
        assert!(
            f.jitter_ns < 2 * TF_NS,
            "{}: TDP jitter {} ns not below 2 TF",
            f.name,
            f.jitter_ns
        );
    }
    for l in &r.links {
        assert_eq!(l.drops, 0, "{}: drops {:?}", l.name, l.drops_by_reason);
    }
    assert_eq!(r.extra["engine_stalls"], 0);
}

/// FIFO's jitter is well above TDP's on every flow. The paper's "an order
/// of magnitude" (5× at least in its tables) is `qosnet reproduce tdp`'s
/// verdict, computed there: with the routers' TF interrupt latency
/// modelled, qosnet's FIFO/TDP ratio is 2.7–4×, because qosnet's FIFO
/// jitter is below the paper's (docs/paper-tdp.md).
fn check_fifo_above(fifo: &Results, tdp: &Results) {
    for (f, t) in fifo.flows.iter().zip(&tdp.flows) {
        assert_eq!(f.lost, 0, "{}: FIFO lost packets", f.name);
        assert!(
            f.jitter_ns > 2 * t.jitter_ns.max(TF_NS / 10),
            "{}: FIFO jitter {} ns not clearly above TDP jitter {} ns",
            f.name,
            f.jitter_ns,
            t.jitter_ns
        );
    }
}

#[test]
fn scenario_1002_tdp_and_fifo() {
    let tdp = run("tdp-1002", &[]);
    check_tdp(&tdp);
    // §IV-B: 96 Mb/s on the ring links, 32 Mb/s on R1->R3 and R2->R4.
    for l in ["R1->R2", "R2->R3", "R3->R4", "R4->R1"] {
        assert!((mbps(&tdp, l) - 96.0).abs() < 1.0, "{l}: {} Mb/s", mbps(&tdp, l));
        let u = tdp.link(l).map(|x| x.utilization).unwrap_or(0.0);
        assert!(u <= 1.0 && u > 0.99, "{l}: utilisation {u}");
    }
    for l in ["R1->R3", "R2->R4"] {
        assert!((mbps(&tdp, l) - 32.0).abs() < 0.5, "{l}: {} Mb/s", mbps(&tdp, l));
    }
    let fifo = run("fifo-1002", &[]);
    check_fifo_above(&fifo, &tdp);
}

#[test]
fn scenario_482_tdp_and_fifo() {
    let tdp = run("tdp-482", &[]);
    check_tdp(&tdp);
    // §IV-B: 96 Mb/s on ring links counted in frame bytes, 32 and 48 Mb/s
    // on R1->R3 and R2->R4 (docs/paper-tdp.md explains the units).
    let frame_mbps = |l: &str| {
        let x = tdp.link(l).unwrap();
        (x.bytes + 4 * x.packets) as f64 * 8.0 / (tdp.duration_s - tdp.warmup_s) / 1e6
    };
    for l in ["R1->R2", "R2->R3", "R3->R4", "R4->R1"] {
        assert!((frame_mbps(l) - 96.0).abs() < 1.0, "{l}: {} Mb/s", frame_mbps(l));
    }
    assert!((frame_mbps("R1->R3") - 32.0).abs() < 0.5);
    assert!((frame_mbps("R2->R4") - 48.0).abs() < 0.5);
    let fifo = run("fifo-482", &[]);
    check_fifo_above(&fifo, &tdp);
}

#[test]
fn tdp_padding_keeps_idle_links_stamped() {
    let r = run("tdp-1002", &["scenario.duration=500ms"]);
    // R2->R1 carries no reserved traffic: padding every TF keeps R1's decoder in step.
    let r1 = r.nodes.iter().find(|n| n.name == "R1").unwrap();
    assert!(r1.counters["padding_rx"] > 1500, "{:?}", r1.counters);
    assert_eq!(r1.counters["R1-R2.stamp_resyncs"], 0);
    let r = run("tdp-1002", &["scenario.duration=500ms", "tdp.padding=false"]);
    let r1 = r.nodes.iter().find(|n| n.name == "R1").unwrap();
    assert_eq!(r1.counters["padding_rx"], 0);
}

#[test]
fn tdp_tolerates_small_clock_offsets() {
    // A router whose CTR is 20 us off still meets the bound (the paper's
    // footnote 2: a certain synchronisation error is tolerated).
    let r = run(
        "tdp-1002",
        &["node.R2.clock_offset=20us", "node.R4.clock_offset=-15us"],
    );
    check_tdp(&r);
}

#[test]
fn too_small_forwarding_delay_is_visible() {
    // With 300 us of propagation, d = 1 leaves no time for a packet to
    // reach the next router before its forwarding TF (rule (i) of §II-B
    // violated): within `late_limit` the late packets are sent late and
    // counted (`late_enq`); with no late packet allowed they are dropped
    // and counted as `tf_late`.
    let sets = [
        "defaults.router.tdp_delay=1",
        "defaults.link.delay=300us",
        "scenario.duration=300ms",
    ];
    let r = run("tdp-1002", &sets);
    let late_enq: u64 = r
        .links
        .iter()
        .map(|l| l.counters.get("late_enq").copied().unwrap_or(0))
        .sum();
    assert!(late_enq > 0, "expected late_enq with d = 1");
    let mut strict = sets.to_vec();
    strict.push("tdp.late_limit=0");
    let r = run("tdp-1002", &strict);
    let late: u64 = r
        .links
        .iter()
        .map(|l| l.drops_by_reason.get("tf_late").copied().unwrap_or(0))
        .sum();
    assert!(late > 0, "expected tf_late drops with d = 1 and late_limit = 0");
}

#[test]
fn non_immediate_forwarding_per_flow_delay() {
    // f123 uses its own forwarding delay of 4 TFs at every router
    // (non-immediate forwarding, §II-B); the plan and the wheels follow.
    // (5 would put all of f123's loops in the same TF modulo its 5-TF
    // period, which the planner rightly refuses.)
    let base = run("tdp-1002", &["scenario.duration=1s"]);
    let r = run("tdp-1002", &["scenario.duration=1s", "flow.f123.tdp_delay=4"]);
    check_tdp(&r);
    let (b, n) = (base.flow("f123").unwrap(), r.flow("f123").unwrap());
    // 15 router-to-router hops and the exit hop of f123 take one TF longer
    // each (4 vs 3); the edge wait may differ by less than a period.
    let extra = n.delay_ns.min as i64 - b.delay_ns.min as i64;
    let expect = 16 * TF_NS as i64;
    assert!(
        (extra - expect).abs() < 5 * TF_NS as i64,
        "extra delay {extra} ns, expected about {expect}"
    );
}

#[test]
fn hand_typed_overbooking_is_refused() {
    let path = format!(
        "{}/../../scenarios/tdp-icc2006/tdp-1002.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    // Pinned by hand: R1->R2 in TF 9 would carry f1234 (slot 9), f123
    // (slot 9), f123's second loop (slot 0 + 3 hops x 3 TFs) and f412
    // (slot 6 + 1 hop x 3 TFs): four 1040-byte frames, one more than a
    // 250 us TF at 100 Mb/s holds.
    let sets: Vec<String> = vec![
        "flow.f1234.slots=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]".into(),
        "flow.f123.slots=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]".into(),
        "flow.f412.slots=[6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]".into(),
    ];
    // Refused at load (so `qosnet check` refuses it as `sim` does), naming
    // the --set argument of the flow that does not fit.
    let e = load_file(&path, &sets).expect_err("overbooked plan must be refused");
    assert!(e.file.starts_with("--set flow."), "{e}");
    let e = e.to_string();
    assert!(
        e.contains("overbooked") && e.contains("->") && e.contains(" B"),
        "{e}"
    );
}
