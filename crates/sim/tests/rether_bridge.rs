//! RETHER across bridges (seed 002 §2.5) in the whole simulator: chains
//! of segments joined by `rether-bridge` nodes, a real-time session from
//! the first segment to the last decomposed into one sub-connection per
//! segment, ordinary traffic bridged on the NRT turns.
//!
//! What must hold on any chain: every unit arrives, within one TRT of
//! wait per segment crossed (plus its transmission times), no unit is
//! late at the far end, every sub-connection is visited exactly once per
//! TRT on its own segment, ordinary frames cross without loss, and the
//! conservation ledger balances.

use proptest::prelude::*;
use qosnet_scenario::load_str;
use qosnet_scenario::results::Results;
use qosnet_sim::Sim;

const TRT_NS: f64 = 33_333_333.0;

/// `segs` segments in a chain (2 stations each, bridges between), an RT
/// stream of `bytes` per frame from the first segment to the last, a
/// local RT stream on the first segment, NRT UDP across.
fn chain(segs: usize, bytes: u32, nrt_kbps: u32, seed: u64) -> String {
    let mut t = format!(
        "[scenario]\nname = \"chain\"\nduration = \"2s\"\nwarmup = \"300ms\"\nseed = {seed}\n\n[rether]\ntrt = \"33.333333ms\"\n\n"
    );
    t += &qosnet_scenario::rethertopo::chain_toml(segs);
    let last = segs - 1;
    t += &format!(
        "[[flow]]\nname = \"far\"\nfrom = \"s0_1\"\nto = \"s{last}_2\"\nrt = true\nsize = {bytes}\nrate = \"30pps\"\nstart = \"10ms\"\n"
    );
    t += "[[flow]]\nname = \"near\"\nfrom = \"s0_2\"\nto = \"s0_1\"\nrt = true\nsize = 3000\nrate = \"30pps\"\nstart = \"15ms\"\n";
    t += &format!(
        "[[flow]]\nname = \"nrt\"\nfrom = \"s0_2\"\nto = \"s{last}_1\"\nsize = 800\nrate = \"{nrt_kbps}kb/s\"\npattern = \"poisson\"\n"
    );
    t
}

fn run(text: &str) -> (Results, (u64, u64, u64, u64)) {
    let sc = load_str("t.toml", text, &[]).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut sim = Sim::new(sc).unwrap_or_else(|e| panic!("{e}"));
    let r = sim.run();
    (r, sim.ledger())
}

/// Every sending sub-connection's details, bridges' ports included.
fn senders(r: &Results) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for n in &r.nodes {
        let Some(d) = &n.details else { continue };
        let mut stations = vec![d.clone()];
        if let Some(ports) = d["ports"].as_array() {
            stations = ports.iter().map(|p| p["station"].clone()).collect();
        }
        for st in stations {
            for s in st["sessions"].as_array().into_iter().flatten() {
                if s["role"] == "sender" {
                    out.push(s.clone());
                }
            }
        }
    }
    out
}

fn check_chain(segs: usize, bytes: u32, nrt_kbps: u32, seed: u64) {
    let (r, (generated, delivered, dropped, in_flight)) = run(&chain(segs, bytes, nrt_kbps, seed));
    let flow = |n: &str| r.flows.iter().find(|f| f.name == n).unwrap();
    let far = flow("far");
    assert!(far.sent > 40, "{segs} segments: far sent {}", far.sent);
    assert_eq!(far.received, far.sent, "{segs} segments: far lost units");
    // One TRT of wait per segment at most, plus each segment's
    // transmission of the unit (fragments and per-frame overheads at
    // 10 Mb/s: under 10 ms for a 6.4 KB frame with the paper's costs).
    let bound = segs as f64 * (TRT_NS + 10e6);
    assert!(
        (far.delay_ns.max as f64) <= bound,
        "{segs} segments: max delay {} ns over {bound} ns",
        far.delay_ns.max
    );
    assert_eq!(flow("near").received, flow("near").sent);
    let nrt = flow("nrt");
    assert_eq!(
        nrt.received, nrt.sent,
        "{segs} segments: NRT frames lost across bridges"
    );
    // Every sub-connection: one visit per TRT on its segment, all units sent.
    let subs = senders(&r);
    assert_eq!(
        subs.len(),
        segs + 1,
        "{segs} segments: one sub-connection per segment + near"
    );
    for s in &subs {
        let iv = &s["rt_visit_interval"];
        let (min, max) = (iv["min_ns"].as_f64().unwrap(), iv["max_ns"].as_f64().unwrap());
        assert!(
            (min - TRT_NS).abs() < 1e3 && (max - TRT_NS).abs() < 1e3,
            "{segs} segments: {s} visited {min}..{max} ns apart"
        );
        assert!(s.get("admitted_at_ns").is_some(), "{s}");
    }
    // Far end: nothing late.
    let far_rx = r
        .nodes
        .iter()
        .find(|n| n.name == format!("s{}_2", segs - 1))
        .and_then(|n| n.details.as_ref()?["sessions"].as_array())
        .and_then(|v| v.iter().find(|s| s["role"] == "receiver" && s["flow"] == "far"))
        .unwrap()
        .clone();
    assert_eq!(far_rx["late_units"], 0, "{far_rx}");
    assert_eq!(generated, delivered + dropped + in_flight, "ledger");
}

#[test]
fn a_session_across_two_bridges_arrives_whole_and_on_time() {
    check_chain(3, 6400, 200, 1);
}

#[test]
fn the_shipped_bridged_scenario_loads_and_runs() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/rether/bridged.toml"
    ))
    .unwrap();
    let (r, _) = run(&text);
    let b1 = r.nodes.iter().find(|n| n.name == "b1").unwrap();
    assert!(b1.counters.get("bridge_rt_relayed").copied().unwrap_or(0) > 50);
    assert!(b1.counters.get("bridge_nrt_relayed").copied().unwrap_or(0) > 20);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]
    #[test]
    fn any_chain_keeps_every_reservation(segs in 1usize..=4, bytes in 500u32..=6400, nrt in 50u32..=400, seed in 1u64..1000) {
        check_chain(segs, bytes, nrt, seed);
    }
}

fn load_err(text: &str) -> String {
    match load_str("t.toml", text, &[]) {
        Ok(_) => panic!("loaded:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bridges_in_a_loop_are_refused() {
    let mut t = chain(3, 1000, 100, 1);
    // A third bridge joining seg0 to seg2 closes a loop.
    t = t.replacen(
        "[[segment]]",
        "[[node]]\nname = \"brx\"\nkind = \"rether-bridge\"\n[[segment]]",
        1,
    );
    t = t.replace(
        "nodes = [\"s0_1\", \"s0_2\", \"br0\"]",
        "nodes = [\"s0_1\", \"s0_2\", \"br0\", \"brx\"]",
    );
    t = t.replace(
        "nodes = [\"s2_1\", \"s2_2\", \"br1\"]",
        "nodes = [\"s2_1\", \"s2_2\", \"br1\", \"brx\"]",
    );
    let e = load_err(&t);
    assert!(e.contains("loop") && e.contains("t.toml:"), "{e}");
}

#[test]
fn a_bridge_on_one_segment_and_a_station_on_two_are_refused() {
    let t = chain(2, 1000, 100, 1).replace(
        "nodes = [\"s1_1\", \"s1_2\", \"br0\"]",
        "nodes = [\"s1_1\", \"s1_2\"]",
    );
    let e = load_err(&t);
    assert!(e.contains("bridge `br0` is on 1 segment"), "{e}");
    let t = chain(2, 1000, 100, 1).replace(
        "nodes = [\"s1_1\", \"s1_2\", \"br0\"]",
        "nodes = [\"s1_1\", \"s1_2\", \"br0\", \"s0_1\"]",
    );
    let e = load_err(&t);
    assert!(e.contains("s0_1") && e.contains("already on segment"), "{e}");
}

#[test]
fn a_link_to_a_bridge_is_refused() {
    let t = chain(2, 1000, 100, 1) + "[[link]]\na = \"br0\"\nb = \"s0_1\"\ncapacity = \"10Mb/s\"\n";
    let e = load_err(&t);
    assert!(e.contains("RETHER bridge"), "{e}");
}

/// Every shipped RETHER scenario balances the conservation ledger: the
/// copies a bus makes of each frame end at the stations that ignore them,
/// RT units count as held until their last fragment is on the wire.
#[test]
fn shipped_rether_scenarios_balance_their_ledgers() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/rether");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let (_, (generated, delivered, dropped, in_flight)) = run(&std::fs::read_to_string(&p).unwrap());
        assert_eq!(generated, delivered + dropped + in_flight, "{}", p.display());
        n += 1;
    }
    assert!(n >= 5, "{n} scenarios");
}
