//! Shared segments in whole scenarios: hosts and a router on a 10 Mb/s
//! CSMA/CD bus, driven by the engine like any medium — deliveries, the
//! NICs' transmit-done, collisions under load, and the conservation ledger
//! with the bus's copies (every other station hears a frame) counted.

use proptest::prelude::*;
use qosnet_scenario::load_str;
use qosnet_scenario::results::Results;
use qosnet_sim::Sim;

/// Stations s1..s{n} and router R on a bus; h behind R on a link.
fn bus(n: usize, flows: &str) -> String {
    let mut s = String::from(
        r#"
[scenario]
name = "bus"
duration = "2s"
warmup = "200ms"
[defaults.link]
capacity = "100Mb/s"
[[node]]
name = "R"
kind = "router"
[[node]]
name = "h"
kind = "host"
[[link]]
a = "R"
b = "h"
"#,
    );
    let mut names = vec!["\"R\"".to_string()];
    for k in 1..=n {
        s += &format!("[[node]]\nname = \"s{k}\"\nkind = \"host\"\n");
        names.push(format!("\"s{k}\""));
    }
    s += &format!(
        "[[segment]]\nname = \"bus\"\nnodes = [{}]\ncapacity = \"10Mb/s\"\npropagation = \"5us\"\n",
        names.join(", ")
    );
    s + flows
}

fn run(text: &str) -> (Results, (u64, u64, u64, u64)) {
    let sc = load_str("bus", text, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Sim::new(sc).unwrap_or_else(|e| panic!("{e}"));
    let r = sim.run();
    (r, sim.ledger())
}

fn seg(r: &Results) -> &serde_json::Value {
    &r.extra["segments"]["bus"]
}

#[test]
fn light_load_arrives_whole_on_and_across_the_bus() {
    let flows = r#"
[[flow]]
name = "on"
from = "s1"
to = "s2"
size = 500
rate = "100pps"
[[flow]]
name = "out"
from = "s2"
to = "h"
size = 1000
rate = "100pps"
[[flow]]
name = "in"
from = "h"
to = "s3"
size = 200
rate = "100pps"
"#;
    let (r, (generated, delivered, dropped, in_flight)) = run(&bus(3, flows));
    for f in &r.flows {
        assert!(f.sent >= 179, "{f:?}");
        assert_eq!((f.received, f.lost), (f.sent, 0), "{f:?}");
    }
    // A 500-byte packet is 538 bytes on the wire plus the 12-byte gap:
    // at 10 Mb/s it cannot arrive sooner than 430.4 us after it left.
    let on = r.flow("on").unwrap();
    assert!(on.delay_ns.min >= 430_400, "{:?}", on.delay_ns);
    assert!(seg(&r)["utilization"].as_f64().unwrap() > 0.0);
    assert_eq!(generated, delivered + dropped + in_flight);
}

#[test]
fn saturated_stations_collide_and_share_the_bus() {
    // Four stations each offer 5 Mb/s of 1500-byte packets to h: 20 Mb/s
    // into a 10 Mb/s bus. The bus carries at most its rate, collisions
    // happen, each station gets a share, and nothing goes unaccounted.
    let mut flows = String::new();
    for k in 1..=4 {
        flows += &format!(
            "[[flow]]\nname = \"f{k}\"\nfrom = \"s{k}\"\nto = \"h\"\nsize = 1500\nrate = \"5Mb/s\"\npattern = \"poisson\"\n"
        );
    }
    let (r, (generated, delivered, dropped, in_flight)) = run(&bus(4, &flows));
    let total: f64 = r.flows.iter().map(|f| f.throughput_bps).sum();
    assert!(total < 10e6 && total > 8e6, "aggregate {total} b/s");
    let collisions: u64 = seg(&r)["stations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["collisions"].as_u64().unwrap())
        .sum();
    assert!(collisions > 100, "{collisions} collisions");
    // Short-term unfairness (the capture effect) is real CSMA/CD: over two
    // seconds every station gets through, with Jain's index well above
    // the 1/4 of one station taking all.
    let x: Vec<f64> = r.flows.iter().map(|f| f.throughput_bps).collect();
    let jain = x.iter().sum::<f64>().powi(2) / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>());
    assert!(x.iter().all(|&v| v > 0.25e6), "{x:?}");
    assert!(jain > 0.7, "Jain {jain} over {x:?}");
    assert_eq!(generated, delivered + dropped + in_flight);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

    /// Conservation over random loads on a bus, collisions and give-ups
    /// included: every packet is delivered, counted as dropped (by a node
    /// or lost to excessive collisions) or still inside.
    #[test]
    fn bus_conservation(n in 2usize..6, flows in prop::collection::vec((0usize..6, 64u32..1500, 50u32..3_000), 1..6)) {
        let mut text = String::new();
        for (k, (from, size, pps)) in flows.iter().enumerate() {
            let from = from % n + 1;
            // Even flows leave the bus through R; odd ones go to the next
            // station along.
            let to = if k % 2 == 0 { "h".to_string() } else { format!("s{}", from % n + 1) };
            if to == format!("s{from}") {
                continue;
            }
            text += &format!(
                "[[flow]]\nname = \"f{k}\"\nfrom = \"s{from}\"\nto = \"{to}\"\nsize = {size}\nrate = \"{pps}pps\"\npattern = \"poisson\"\n"
            );
        }
        prop_assume!(!text.is_empty());
        let (r, (generated, delivered, dropped, in_flight)) = run(&bus(n, &text));
        prop_assert_eq!(generated, delivered + dropped + in_flight);
        prop_assert_eq!(r.extra["engine_stalls"].as_u64(), Some(0));
    }
}

/// The shipped saturation scenario: eight stations offering 5 Mb/s each
/// to a ninth on one 10 Mb/s bus.
fn saturation() -> Sim {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/ethernet/saturation.toml"
    );
    let sc = qosnet_scenario::load_file(path, &[]).unwrap_or_else(|e| panic!("{e}"));
    Sim::new(sc).unwrap_or_else(|e| panic!("{e}"))
}

fn station_stat(r: &Results, k: usize, key: &str) -> u64 {
    seg(r)["stations"][k][key].as_u64().unwrap()
}

/// IEEE 802.3 §4.2.3.2.5: a frame abandoned after 16 attempts was never
/// received. It is a drop (`excessive_collisions`), not a sent packet: the
/// stations' counts are the frames that crossed, and their utilizations
/// cannot add up to more than the bus.
#[test]
fn a_saturated_bus_counts_only_frames_that_crossed() {
    let dir = tempfile::tempdir().unwrap();
    let mut sim = saturation();
    sim.enable_pcap(dir.path(), &[]).unwrap();
    let r = sim.run();
    let stations: Vec<_> = r.links.iter().filter(|l| l.name.ends_with("->bus")).collect();
    assert_eq!(stations.len(), 9);
    let util: f64 = stations.iter().map(|l| l.utilization).sum();
    assert!(util <= 1.0, "stations' utilizations sum to {util}");
    let (mut sent, mut abandoned) = (0, 0);
    for (k, l) in stations.iter().enumerate() {
        let name = l.name.trim_end_matches("->bus");
        let node = r.nodes.iter().find(|n| n.name == name).unwrap();
        let whole = station_stat(&r, k, "frames_sent");
        let excessive = station_stat(&r, k, "excessive_collisions");
        assert_eq!(node.counters["sent"], whole, "{name}: counted vs sent whole");
        let dropped = l
            .drops_by_reason
            .get("excessive_collisions")
            .copied()
            .unwrap_or(0);
        assert_eq!(dropped, excessive, "{name}: abandoned frames are drops");
        let file = dir.path().join(format!("{name}-bus.pcap"));
        let mut rd = pcap_file::pcap::PcapReader::new(std::fs::File::open(file).unwrap()).unwrap();
        let mut frames = 0;
        while let Some(p) = rd.next_packet() {
            p.unwrap();
            frames += 1;
        }
        assert_eq!(frames, whole, "{name}: the pcap holds the frames sent whole");
        sent += whole;
        abandoned += excessive;
    }
    // Every frame sent whole reached s9 (which sends none of its own).
    assert_eq!(station_stat(&r, 8, "frames_received"), sent);
    assert!(abandoned > 0, "the load gives up on some frames");
}
