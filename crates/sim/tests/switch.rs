//! Switches in the simulator: store-and-forward through the core's switch
//! node, learning (flooding only until the destination is known), VLAN
//! isolation, output-port contention that really drops, and the
//! conservation ledger with flooded copies counted.

use proptest::prelude::*;
use qosnet_scenario::load_str;
use qosnet_sim::Sim;

/// R with h4 on a link; switch SW with R, h1, h2 in VLAN 1 and h3 alone in
/// VLAN 20.
fn lan(extra: &str) -> String {
    format!(
        r#"
[scenario]
name = "lan"
duration = "1s"
warmup = "100ms"
[defaults.link]
capacity = "100Mb/s"
delay = "1us"
[[node]]
name = "R"
kind = "router"
[[node]]
name = "SW"
kind = "switch"
switch = {{ latency = "3us", queue_packets = 30 }}
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"
[[node]]
name = "h3"
kind = "host"
[[node]]
name = "h4"
kind = "host"
[[link]]
a = "R"
b = "SW"
[[link]]
a = "h1"
b = "SW"
[[link]]
a = "h2"
b = "SW"
[[link]]
a = "h3"
b = "SW"
vlan = 20
[[link]]
a = "R"
b = "h4"
{extra}
"#
    )
}

fn run(text: &str) -> (qosnet_scenario::results::Results, (u64, u64, u64, u64)) {
    let sc = load_str("lan", text, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Sim::new(sc).unwrap_or_else(|e| panic!("{e}"));
    let r = sim.run();
    (r, sim.ledger())
}

fn counter(r: &qosnet_scenario::results::Results, node: &str, key: &str) -> u64 {
    r.nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.counters.get(key).copied())
        .unwrap_or(0)
}

#[test]
fn switched_lan_forwards_learns_and_isolates_vlans() {
    let flows = r#"
[[flow]]
name = "within"
from = "h1"
to = "h2"
size = 500
rate = "1000pps"
[[flow]]
name = "reply"
from = "h2"
to = "h1"
size = 500
rate = "1000pps"
start = "1ms"
[[flow]]
name = "across"
from = "h1"
to = "h4"
size = 1000
rate = "2000pps"
"#;
    let (r, (generated, delivered, dropped, in_flight)) = run(&lan(flows));
    for f in &r.flows {
        assert!(f.sent > 800, "{f:?}");
        assert_eq!((f.received, f.lost), (f.sent, 0), "{f:?}");
    }
    // Flooding stops once both hosts were heard: a handful of copies at
    // the start, not one per packet.
    let flooded = counter(&r, "SW", "flood_copies");
    assert!((1..10).contains(&flooded), "flood copies {flooded}");
    assert!(counter(&r, "SW", "learned") >= 3);
    // VLAN 20 never saw VLAN 1 traffic, flooded or not.
    let h3 = r.link("SW->h3").unwrap();
    assert_eq!(h3.packets, 0, "{h3:?}");
    // Store and forward: 1 us wire + the switch's 3 us latency on top of
    // serialisation (preamble, frame and FCS; the gap follows), twice
    // (host -> switch -> host).
    let within = r.flow("within").unwrap();
    let ser = (8 + 500 + 14 + 4) * 80; // 100 Mb/s: 80 ns a byte
    assert!(
        within.delay_ns.min >= 2 * ser + 2_000 + 3_000,
        "{:?}",
        within.delay_ns
    );
    assert_eq!(generated, delivered + dropped + in_flight);
}

#[test]
fn output_contention_drops_at_the_switch_port() {
    // h1 and h2 each offer 80 Mb/s to h4 behind R: the switch's port to R
    // (100 Mb/s) must drop the excess, counted.
    let flows = r#"
[[flow]]
name = "a"
from = "h1"
to = "h4"
size = 1000
rate = "80Mb/s"
[[flow]]
name = "b"
from = "h2"
to = "h4"
size = 1000
rate = "80Mb/s"
"#;
    let (r, (generated, delivered, dropped, in_flight)) = run(&lan(flows));
    let port = r.link("SW->R").unwrap();
    assert!(port.drops > 0, "{port:?}");
    assert_eq!(port.drops_by_reason.get("queue_full"), Some(&port.drops));
    // The port runs at its line rate (frames + overhead) while congested.
    assert!(
        port.utilization > 0.98 && port.utilization <= 1.0 + 1e-9,
        "{port:?}"
    );
    let got: u64 = r.flows.iter().map(|f| f.received).sum();
    let sent: u64 = r.flows.iter().map(|f| f.sent).sum();
    assert!(got < sent);
    assert_eq!(generated, delivered + dropped + in_flight);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// Every packet generated (or copied by flooding) is delivered, counted
    /// as dropped, or still in the network, whatever the flows.
    #[test]
    fn switched_conservation(flows in prop::collection::vec((0usize..3, 0usize..3, 64u32..1500, 100u32..30_000), 1..5)) {
        let hosts = ["h1", "h2", "h4"];
        let mut text = String::new();
        for (k, (a, b, size, pps)) in flows.iter().enumerate() {
            if a == b {
                continue;
            }
            text += &format!(
                "[[flow]]\nname = \"f{k}\"\nfrom = \"{}\"\nto = \"{}\"\nsize = {size}\nrate = \"{pps}pps\"\npattern = \"poisson\"\n",
                hosts[*a], hosts[*b]
            );
        }
        prop_assume!(!text.is_empty());
        let (r, (generated, delivered, dropped, in_flight)) = run(&lan(&text));
        prop_assert_eq!(generated, delivered + dropped + in_flight);
        prop_assert_eq!(r.extra["engine_stalls"].as_u64(), Some(0));
    }
}
