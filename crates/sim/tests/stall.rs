//! `[[fault]] kind = "stall"`: a stalled node does nothing for a while —
//! the frames reaching it wait in its NIC's ring and leave after the
//! stall, late but not lost (up to the ring's size) — and on the ICC 2006
//! TDP testbed stalls of all four routers (the live lab's `--stall`, one
//! thread running them all) lose packets, the same ones for the same seed.

use qosnet_scenario::load_str;
use qosnet_scenario::results::Results;
use qosnet_sim::Sim;

const CHAIN: &str = r#"
[scenario]
name = "stall"
duration = "400ms"
warmup = "0s"

[defaults.link]
capacity = "100Mb/s"
delay = "1us"

[[node]]
name = "R1"
kind = "router"
[[node]]
name = "R2"
kind = "router"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"

[[link]]
a = "h1"
b = "R1"
[[link]]
a = "R1"
b = "R2"
[[link]]
a = "R2"
b = "h2"

[[flow]]
name = "f"
from = "h1"
to = "h2"
size = 500
rate = "2500pps"
"#;

fn run(text: &str) -> (Results, (u64, u64, u64, u64)) {
    let sc = load_str("stall.toml", text, &[]).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut sim = Sim::new(sc).unwrap_or_else(|e| panic!("{e}"));
    let r = sim.run();
    (r, sim.ledger())
}

fn counter(r: &Results, node: &str, key: &str) -> u64 {
    let n = r.nodes.iter().find(|n| n.name == node).expect("node");
    n.counters.get(key).copied().unwrap_or(0)
}

#[test]
fn a_stalled_routers_frames_leave_after_the_stall() {
    let (base, _) = run(CHAIN);
    let f = &base.flows[0];
    assert_eq!(f.lost, 0);
    assert!(f.delay_ns.max < 200_000, "unstalled max delay {}", f.delay_ns.max);
    let text =
        format!("{CHAIN}\n[[fault]]\nkind = \"stall\"\nnode = \"R1\"\nat = \"100ms\"\nfor = \"5ms\"\n");
    let (r, (generated, delivered, dropped, in_flight)) = run(&text);
    let f = &r.flows[0];
    // Nothing lost: the 12 or 13 packets that reached R1 in the stall
    // waited in its ring and left after it, the first one 5 ms late.
    assert_eq!(f.lost, 0, "{f:?}");
    assert_eq!(f.received, f.sent);
    assert!(
        (4_900_000..5_300_000).contains(&f.delay_ns.max),
        "max delay {} ns: not the 5 ms stall",
        f.delay_ns.max
    );
    assert_eq!(counter(&r, "R1", "stalls"), 1);
    let held = counter(&r, "R1", "stall_ring_held");
    assert!((12..=13).contains(&held), "held {held}");
    assert_eq!(counter(&r, "R1", "stall_ring_drops"), 0);
    assert_eq!(counter(&r, "R2", "stalls"), 0);
    assert_eq!(generated, delivered + dropped + in_flight);
    assert_eq!(dropped, 0);
}

#[test]
fn a_full_ring_drops_and_the_ledger_counts_them() {
    // 2500 pps for 600 ms: 1500 arrivals, 1000 fit in the ring.
    let text =
        format!("{CHAIN}\n[[fault]]\nkind = \"stall\"\nnodes = [\"R1\"]\nat = \"10ms\"\nfor = \"600ms\"\n");
    let text = text.replace("duration = \"400ms\"", "duration = \"800ms\"");
    let (r, (generated, delivered, dropped, in_flight)) = run(&text);
    let drops = counter(&r, "R1", "stall_ring_drops");
    assert!((495..=505).contains(&drops), "ring drops {drops}");
    assert_eq!(counter(&r, "R1", "stall_ring_held_max"), 1000);
    assert_eq!(r.flows[0].lost, drops);
    assert_eq!(dropped, drops);
    assert_eq!(generated, delivered + dropped + in_flight);
}

fn tdp482_stalled(seed: u64) -> Results {
    let path = format!(
        "{}/../../scenarios/tdp-icc2006/tdp-482.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).expect("tdp-482.toml");
    let text = format!(
        "{text}\n[[fault]]\nkind = \"stall\"\nnodes = [\"R1\", \"R2\", \"R3\", \"R4\"]\nat = \"250ms\"\nfor = \"1ms\"\nevery = \"500ms\"\n"
    );
    let sets = [
        "scenario.duration=2s".to_string(),
        format!("scenario.seed={seed}"),
    ];
    let sc = load_str("tdp-482-stall.toml", &text, &sets).unwrap_or_else(|e| panic!("{e}"));
    Sim::new(sc).unwrap_or_else(|e| panic!("{e}")).run()
}

/// Per link: its name and its drops by reason.
type LinkDrops = Vec<(String, Vec<(String, u64)>)>;

/// What a run lost and dropped, per flow and per link and reason.
fn losses(r: &Results) -> (Vec<u64>, LinkDrops) {
    let flows = r.flows.iter().map(|f| f.lost).collect();
    let links = r
        .links
        .iter()
        .map(|l| (l.name.clone(), l.drops_by_reason.clone().into_iter().collect()))
        .collect();
    (flows, links)
}

#[test]
fn tdp_testbed_stalls_lose_packets_deterministically() {
    let a = tdp482_stalled(1);
    let lost: u64 = a.flows.iter().map(|f| f.lost).sum();
    assert!(lost > 0, "1 ms stalls of all four routers lost nothing");
    for n in ["R1", "R2", "R3", "R4"] {
        // 250, 750, 1250, 1750 ms.
        assert_eq!(counter(&a, n, "stalls"), 4, "{n}");
    }
    let b = tdp482_stalled(1);
    assert_eq!(losses(&a), losses(&b), "same seed, different losses");
    assert_eq!(a.engine.events, b.engine.events);
}
