//! Live tests of the experiments: their measurements through qosnet
//! routers in network-namespace labs. They need root (namespaces, veth,
//! AF_PACKET): ignored otherwise; a missing external judge
//! (ping) skips its part with a message. Every lab gets its own prefix and
//! is removed on the way out, also when the test fails (a [`Guard`]), and
//! the test checks nothing is left.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use qosnet_core::time::Duration;
use qosnet_experiments::degeb::lab::{self, T1Options, T4Options};
use qosnet_experiments::report::lateness_text;
use qosnet_lab::labrun::LiveOptions;
use qosnet_lab::testkit::{leftovers, missing, require_root, tool, Guard};

fn prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("qnx{}x{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn opts(prefix: &str) -> LiveOptions {
    LiveOptions {
        prefix: prefix.into(),
        timer_noise: false,
        ..LiveOptions::default()
    }
}

fn degeb(name: &str, sets: &[&str]) -> qosnet_scenario::Scenario {
    let path = format!(
        "{}/../../scenarios/diffserv-degeb/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    qosnet_scenario::load_file(&path, &sets).unwrap()
}

/// DEGEB (seed 004) live, shortened (`qosnet reproduce diffserv --live`
/// runs all of it). T1/T3 for AF11 and EF through the t1-edge lab, each
/// offered at the 100 Mb/s line rate for 1.5 s (iperf3 with the DSCP set
/// when installed, else qosnet's generator): the bandwidth received is
/// within 10 % of the class's shaped total (76 and 10 Mb/s; from below
/// only when the router did not stall in the run), and the TOS
/// bytes at the destination are AF11's ladder {0x28, 0x30, 0x38} out of
/// profile, 0x28 alone in profile, and EF's 0xb8. T4, one point: 128-byte
/// pings through 3 routers while 120 Mb/s of best effort congests the
/// backbone: EF's mean RTT is well below BE's (an order of magnitude).
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn degeb_diffserv_live() {
    require_root();
    let stop = Arc::new(AtomicBool::new(false));
    let p = prefix();
    let _g = Guard(p.clone());
    let o = T1Options {
        duration: Duration::from_millis(1500),
        ..T1Options::default()
    };
    if !o.iperf3 {
        missing("`iperf3` not installed (.ci/run installs it)");
        eprintln!("NOTE: iperf3 not installed; T1 runs on qosnet's own generator and sink");
    }
    let t1 = lab::t1_lab(
        &degeb("t1-edge", &[]),
        &opts(&p),
        stop.clone(),
        &[0x28, 0xb8],
        &o,
        |_, _| {},
    )
    .unwrap();
    assert!(leftovers(&p).is_empty());
    for (c, x) in ["AF11", "EF"].iter().zip(&t1.points) {
        println!(
            "{c}: {} {:.2} Mb/s, {:.1}% lost, out {:?}, in {:?}",
            x.tool,
            x.throughput_bps / 1e6,
            x.loss_pct,
            x.tos_out,
            x.tos_in
        );
    }
    println!("T1 router timer lateness {}", lateness_text(&t1.driver.lateness));
    let keys = |m: &std::collections::BTreeMap<u8, u64>| m.keys().copied().collect::<Vec<u8>>();
    let (af11, ef) = (&t1.points[0], &t1.points[1]);
    // The shaper never lets a class exceed its total; whether the router
    // keeps up with 100 Mb/s of offered load depends on this machine, so the
    // tight lower bound is asserted only when the router's own timer
    // lateness (measured in this run) shows no stall. A stalled run still
    // has to carry half the shaped rate.
    let l = &t1.driver.lateness;
    let quiet = l.p999_ns < 100_000 && l.max_ns < 2_000_000;
    let low = if quiet { 0.9 } else { 0.5 };
    if !quiet {
        qosnet_lab::testkit::relaxed(
            "throughput within 10 % from below (50 % checked)",
            &format!("router lateness p99.9 {} ns, max {} ns", l.p999_ns, l.max_ns),
        );
        println!("NOTE: router stalled (lateness above); lower bound relaxed to {low}x shaped");
    }
    for (x, shaped) in [(af11, 76e6), (ef, 10e6)] {
        // What the sender got out in this run (fixed-size packets): a
        // sender the machine starves offers less than line rate, and no
        // router carries more than it is offered.
        let offered = if x.received > 0 {
            x.throughput_bps * x.sent as f64 / x.received as f64
        } else {
            f64::INFINITY
        };
        if offered < shaped {
            qosnet_lab::testkit::relaxed(
                "throughput against the shaped rate (against the offered checked)",
                &format!(
                    "the sender offered {:.1} Mb/s of {:.0}",
                    offered / 1e6,
                    shaped / 1e6
                ),
            );
            println!(
                "NOTE: the sender offered {:.1} Mb/s, below the shaped {:.0}: lower bound on that",
                offered / 1e6,
                shaped / 1e6
            );
        }
        assert!(
            x.throughput_bps < 1.1 * shaped && x.throughput_bps > low * shaped.min(offered),
            "{:.2} Mb/s vs shaped {:.0}, offered {:.1}: {x:?}",
            x.throughput_bps / 1e6,
            shaped / 1e6,
            offered / 1e6
        );
    }
    assert_eq!(keys(&af11.tos_out), vec![0x28, 0x30, 0x38], "{af11:?}");
    assert_eq!(keys(&af11.tos_in), vec![0x28], "{af11:?}");
    assert!(af11.in_received > 0 && af11.tos_out_packets > 1000);
    assert_eq!(keys(&ef.tos_out), vec![0xb8], "{ef:?}");

    if !tool("ping") {
        return;
    }
    let p = prefix();
    let _g = Guard(p.clone());
    let sc = degeb(
        "t4-latency",
        &["flow.*.path=[\"Ei\", \"C1\", \"Ee\"]", "flow.*.echo=false"],
    );
    let mut o = T4Options::from_scenario(&sc, Duration::from_millis(1500)).unwrap();
    o.idle = false;
    o.probes.retain(|x| x.name == "ef128" || x.name == "be128");
    let t4 = lab::t4_lab(&sc, &opts(&p), stop, &o).unwrap();
    assert!(leftovers(&p).is_empty());
    println!("{:?}", t4.congested);
    println!(
        "T4 router timer lateness {}; bulk {:.1} Mb/s sent, {:.1} delivered",
        lateness_text(&t4.driver.lateness),
        t4.bulk_sent_bps / 1e6,
        t4.bulk_rx_bps / 1e6
    );
    let (ef, be) = (&t4.congested[0], &t4.congested[1]);
    assert!(ef.received > 0 && be.received > 0, "{ef:?} {be:?}");
    // A router stall of S adds about S²/3 s to EF's mean of ~30 pings
    // (those queued behind it wait S/2 on average): well below BE's holds
    // while the router kept time; below it, always.
    let late = t4.driver.lateness.max_ns;
    if late < 20_000_000 {
        assert!(
            ef.avg_ms * 10.0 < be.avg_ms,
            "EF {} ms not well below BE {} ms",
            ef.avg_ms,
            be.avg_ms
        );
    } else {
        qosnet_lab::testkit::relaxed(
            "EF mean RTT 10x below BE's (below checked)",
            &format!("the router was {late} ns late"),
        );
        eprintln!(
            "NOTE: the router was {late} ns late: EF's mean RTT only checked below BE's, not 10× below"
        );
        assert!(
            ef.avg_ms < be.avg_ms,
            "EF {} ms not below BE {} ms",
            ef.avg_ms,
            be.avg_ms
        );
    }
}
