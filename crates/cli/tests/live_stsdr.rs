//! The STSDR (seed 003, Khan, Sahoo & Manjunath) live, as root (ignored
//! otherwise): `scenarios/stsdr/live.toml` with every load
//! balancer, forwarder and the T-switch its own `qosnet node` process in
//! its own namespace, DS frames as raw Ethernet over AF_PACKET, the
//! scenario's flows from the generators' kernels to sinks behind the
//! outgoing links.
//!
//! What a loaded 2-core VM guarantees, and so what is asserted: delivery
//! (every flow, and all but a few per cent overall when no process stalled
//! for long), the DS cycle running on every forwarder (counters), and after
//! a `kill -9` of a forwarder or of the master, that the balancers re-hash,
//! the survivors drop the dead one or elect a new master, and every flow —
//! also those the dead forwarder carried — keeps being delivered. The
//! load is a quarter of the forwarders' (emulated) capacity, so nothing
//! is lost by design. Throughput is `qosnet reproduce stsdr --live`'s.
//!
//! Each test uses its own namespace prefix (`qs{pid}{k}`); the lab is
//! removed by `labrun::run` on every path, a [`Guard`] removes the prefix
//! also on a failed assertion, and the node processes die with the lab
//! (`Procs`'s drop, and PDEATHSIG). Tests run one at a time.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use qosnet_core::time::Duration;
use qosnet_io::netns;
use qosnet_lab::labrun::{self, LiveOptions, NodeProcesses};
use qosnet_lab::testkit::{repo, require_root, Guard};
use qosnet_scenario::results::Results;

static SERIAL: Mutex<()> = Mutex::new(());

/// 20 packets/s per flow (288 flows: 5.8 kpps against the forwarders'
/// 3 × 3.7 kpps of emulated CPU), 3 s, measured from 0.5 s: ~50 packets
/// a flow.
const SETS: [&str; 2] = ["defaults.flow.rate=20pps", "scenario.duration=3s"];

fn run_live(tag: &str, kills: &[(&str, Duration)]) -> Results {
    let prefix = format!("qs{}{tag}", std::process::id() % 100_000);
    let _g = Guard(prefix.clone());
    let path = repo().join("scenarios/stsdr/live.toml");
    let sets: Vec<String> = SETS.iter().map(|s| s.to_string()).collect();
    let sc = qosnet_scenario::load_file(path.to_str().unwrap(), &sets).unwrap();
    let o = LiveOptions {
        prefix: prefix.clone(),
        emulate_cpu: true,
        processes: Some(NodeProcesses {
            exe: env!("CARGO_BIN_EXE_qosnet").into(),
            scenario: path,
            sets,
        }),
        kills: kills.iter().map(|(n, t)| (n.to_string(), *t)).collect(),
        ..LiveOptions::default()
    };
    let run = labrun::run(&sc, &o, Arc::new(AtomicBool::new(false))).unwrap();
    let left: Vec<String> = netns::list()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    run.results
}

fn counter(r: &Results, node: &str, k: &str) -> u64 {
    r.nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.counters.get(k).copied())
        .unwrap_or(0)
}

/// The worst lateness of any node process's timers, in ns.
fn worst_lateness(r: &Results) -> u64 {
    r.extra
        .get("timer_lateness")
        .and_then(|v| v.get("max_ns"))
        .and_then(|v| v.as_u64())
        .unwrap_or(u64::MAX)
}

/// Whether the state the nodes ended in (live forwarders, who is master)
/// is the protocol's alone: a node process late by 100 ms or more may have
/// missed the 300 ms timeouts near the end (a live forwarder declared
/// down, a second election), so that state is then not checked.
fn punctual(r: &Results) -> bool {
    let worst = worst_lateness(r);
    if worst < 100_000_000 {
        return true;
    }
    qosnet_lab::testkit::relaxed(
        "end state (live forwarders, master)",
        &format!("a node process was {worst} ns late"),
    );
    eprintln!("NOTE: end state (live forwarders, master) not checked: a node process was {worst} ns late");
    false
}

fn print_flows(r: &Results) {
    eprintln!("  node timers late by up to {} ns", worst_lateness(r));
    for f in &r.flows {
        eprintln!("  {:<14} sent {:>4} received {:>4}", f.name, f.sent, f.received);
    }
    for n in &r.nodes {
        eprintln!("  {} {:?}", n.name, n.counters);
    }
}

/// After a `kill -9` of a forwarder, the flows' floor, or why it is not
/// checked. The floor holds when the only outage is the kill's own
/// (detection, re-hashing, for the master the election). A node process
/// that stalls past the 300 ms timeouts makes the balancers declare a
/// *live* forwarder down as well and re-hash its flows away and back:
/// measured in the same run as more `fe_down` at a balancer than the kill
/// explains (`downs`), or as a node process's timers late by 100 ms.
fn kill_delivery(r: &Results, frac: f64, total: f64, downs: u64) {
    let spurious = ["lb1", "lb2"]
        .iter()
        .map(|lb| counter(r, lb, "fe_down").saturating_sub(downs))
        .max()
        .unwrap_or(0);
    let worst = worst_lateness(r);
    if spurious == 0 && worst < 100_000_000 {
        every_flow_delivered(r, frac);
        // The flows the kill cost packets, together: ~40 % if none came
        // back after the kill (it falls 1 s into the 2.5 s window).
        let (sent, recv) = r
            .flows
            .iter()
            .filter(|f| f.received < f.sent)
            .fold((0u64, 0u64), |a, f| (a.0 + f.sent, a.1 + f.received));
        assert!(
            recv as f64 >= total * sent as f64,
            "the flows that lost packets received {recv} of {sent} (< {:.0} %)",
            100.0 * total
        );
        return;
    }
    qosnet_lab::testkit::relaxed(
        &format!("every flow >= {:.0} % after the kill", 100.0 * frac),
        &format!("{spurious} spurious down declarations, node timers late by up to {worst} ns"),
    );
    eprintln!(
        "NOTE: every flow >= {:.0} % after the kill not checked: {spurious} more forwarder(s) declared down than the kill explains, node timers late by up to {worst} ns",
        100.0 * frac
    );
    let recv: u64 = r.flows.iter().map(|f| f.received).sum();
    assert!(recv > 0, "nothing delivered");
}

/// Every flow delivered at least `frac` of what it sent in the window.
fn every_flow_delivered(r: &Results, frac: f64) {
    for f in &r.flows {
        assert!(f.sent > 20, "{}: generator sent only {}", f.name, f.sent);
        assert!(
            f.received as f64 >= frac * f.sent as f64,
            "{}: received {} of {} (< {:.0} %)",
            f.name,
            f.received,
            f.sent,
            100.0 * frac
        );
    }
}

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn stsdr_lds_live_delivers_and_runs_ds_cycles() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run_live("a", &[]);
    print_flows(&r);
    assert_eq!(r.mode, "live");
    // Delivery: every flow, through the balancers and forwarders.
    every_flow_delivered(&r, 0.5);
    let (sent, recv): (u64, u64) = r
        .flows
        .iter()
        .fold((0, 0), |a, f| (a.0 + f.sent, a.1 + f.received));
    let worst = worst_lateness(&r);
    if worst < 100_000_000 {
        assert!(
            recv * 100 >= sent * 95,
            "received {recv} of {sent} although no node process was late by 100 ms"
        );
    } else {
        qosnet_lab::testkit::relaxed(
            "the overall delivery bound",
            &format!("a node process was {worst} ns late"),
        );
        eprintln!("NOTE: overall delivery {recv}/{sent} not bounded: a node process was {worst} ns late");
    }
    // The balancers spread flows over all three forwarders and hear
    // their DS frames.
    for lb in ["lb1", "lb2"] {
        for fe in 0..3 {
            assert!(
                counter(&r, lb, &format!("to_fe{fe}")) > 0,
                "{lb} sent nothing to FE {fe}"
            );
        }
        assert!(counter(&r, lb, "rx_ds") > 0, "{lb} heard no DS frame");
    }
    let punctual = punctual(&r);
    if punctual {
        for lb in ["lb1", "lb2"] {
            assert_eq!(counter(&r, lb, "alive"), 3, "{lb} does not see 3 live forwarders");
        }
        // FE 0 (fe1) is the master.
        assert_eq!(counter(&r, "fe1", "is_master"), 1);
    }
    // The DS cycle runs everywhere: everyone broadcasts one DS frame per
    // cycle and hears the others'.
    let master_cycles = counter(&r, "fe1", "cycles_started");
    assert!(
        master_cycles > 100,
        "master started only {master_cycles} cycles in 3 s"
    );
    for fe in ["fe1", "fe2", "fe3"] {
        let c = counter(&r, fe, "cycles");
        assert!(c > 100, "{fe}: only {c} DS cycles");
        assert!(counter(&r, fe, "ds_tx") >= c, "{fe}: fewer DS frames than cycles");
        assert!(
            counter(&r, fe, "rx_ds") > c,
            "{fe}: heard fewer DS frames than cycles"
        );
        assert!(counter(&r, fe, "matched_pkts") > 0, "{fe}: never matched");
    }
    for fe in ["fe2", "fe3"] {
        if punctual {
            assert_eq!(counter(&r, fe, "is_master"), 0, "{fe} is master too");
        }
        assert!(
            counter(&r, fe, "clocks_adopted") > 0,
            "{fe} never adopted the master's clocks"
        );
    }
}

/// `kill -9` of fe3 (a slave) 1.5 s into the traffic: the balancers stop
/// hashing flows to it and the survivors drop it from the matching. The
/// flows it carried lose at most the detection time (balancer_timeout
/// 300 ms) of the 2.5 s window; without re-hashing they would lose 40 %.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn stsdr_live_forwarder_kill_rehashes() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run_live("b", &[("fe3", Duration::from_millis(1500))]);
    print_flows(&r);
    let killed = r.extra.get("killed").expect("extra.killed");
    assert_eq!(killed[0]["node"], "fe3");
    assert!(
        r.nodes.iter().all(|n| n.name != "fe3"),
        "a SIGKILLed node has no report"
    );
    let punctual = punctual(&r);
    for lb in ["lb1", "lb2"] {
        assert!(counter(&r, lb, "fe_down") >= 1, "{lb} never saw fe3 go down");
        assert!(counter(&r, lb, "rehashed") > 0, "{lb} re-hashed nothing");
        if punctual {
            assert_eq!(counter(&r, lb, "alive"), 2, "{lb}: live forwarders at the end");
        }
    }
    for fe in ["fe1", "fe2"] {
        assert!(counter(&r, fe, "fe_declared_dead") >= 1, "{fe} never dropped fe3");
        assert!(counter(&r, fe, "cycles") > 100, "{fe} stopped cycling");
    }
    if punctual {
        assert_eq!(counter(&r, "fe1", "is_master"), 1, "fe1 stays master");
    }
    kill_delivery(&r, 0.6, 0.6, 1);
}

/// `kill -9` of the master fe1: fe2 (the lowest live id) is elected, fe3
/// follows it, the balancers re-hash fe1's flows, and every flow keeps
/// being delivered.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn stsdr_live_master_kill_elects() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = run_live("c", &[("fe1", Duration::from_millis(1500))]);
    print_flows(&r);
    assert!(counter(&r, "fe2", "elections_won") >= 1, "fe2 never took over");
    assert!(
        counter(&r, "fe3", "master_lost") >= 1,
        "fe3 never noticed the master's death"
    );
    let punctual = punctual(&r);
    if punctual {
        assert_eq!(counter(&r, "fe2", "is_master"), 1, "fe2 is master at the end");
        assert_eq!(counter(&r, "fe3", "is_master"), 0, "fe3 is not master");
    }
    for lb in ["lb1", "lb2"] {
        assert!(counter(&r, lb, "rehashed") > 0, "{lb} re-hashed nothing");
        if punctual {
            assert_eq!(counter(&r, lb, "alive"), 2, "{lb}: live forwarders at the end");
        }
    }
    // With the master gone no DS cycle runs until the election ends, so
    // the balancers may declare all three forwarders down (fe_down 3),
    // and the flows fe1 carried lose up to ~0.9 s of the 2.5 s window
    // (one CI run: 103 flows lost packets, 84.7 % of theirs
    // delivered, the unluckiest 27 of 48, 56 %). Per flow the floor is
    // what is left after such an outage; together, what shows they came
    // back (40 % if they had not).
    kill_delivery(&r, 0.3, 0.6, 3);
}
