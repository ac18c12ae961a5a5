//! In-process fuzzing of the router input path (issue 10): every node kind
//! the scenarios build (TDP routers with their CTR and plan, DiffServ edge
//! and core routers, taprio, FIFO, switches) gets mutated and random frames
//! on random ports, then its timers, transmissions and events are drained.
//! No input may panic, and one frame may not make a node emit an unbounded
//! burst.
//!
//! Coverage-guided fuzzers (cargo-afl, honggfuzz, cargo-fuzz) need tools
//! this project's machines do not have (an AFL++ toolchain, a nightly
//! compiler for libFuzzer), so these targets are proptest properties over
//! the same entry points: seeded from real frames (the committed corpus
//! `tests/fuzz-seeds/frames.hex`, captured with `qosnet sim --pcap` from the
//! shipped scenarios) and mutated (byte flips, truncation, extension,
//! splices). The normal test run is short (`QOSNET_FUZZ_CASES`, default
//! 300 cases per target, a few seconds); long runs:
//!
//! `QOSNET_FUZZ_CASES=1000000 cargo test --release -p qosnet-sim --test fuzz_nodes`
//!
//! A failing case is shrunk by proptest and stored in
//! `tests/fuzz_nodes.proptest-regressions`, which replays it on every run.

use proptest::prelude::*;
use qosnet_core::node::{Node, TxStatus};
use qosnet_core::{Instant, Meta};
use qosnet_scenario::build::{build_node, BuildOpts, Setup};
use qosnet_scenario::load_file;
use qosnet_scenario::topo::Network;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn cases() -> u32 {
    std::env::var("QOSNET_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// The committed seed frames.
fn seeds() -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fuzz-seeds/frames.hex"
    ))
    .expect("seed corpus");
    let mut v: Vec<Vec<u8>> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            (0..l.len() / 2)
                .map(|i| u8::from_str_radix(&l[2 * i..2 * i + 2], 16).expect("hex"))
                .collect()
        })
        .collect();
    assert!(v.len() >= 10, "seed corpus has {} frames", v.len());
    // ARP for the routers' addresses, so ARP and ICMP paths are reached.
    for sc in scenarios() {
        let net = Network::build(&sc).unwrap();
        for n in &net.nodes {
            for f in &n.ifaces {
                v.push(qosnet_core::arp::announcement(f.mac, f.ip));
            }
        }
    }
    v
}

fn scenarios() -> Vec<qosnet_scenario::Scenario> {
    [
        "scenarios/tdp-icc2006/tdp-1002.toml",
        "scenarios/tdp-icc2006/fifo-482.toml",
        "scenarios/diffserv-degeb/t1-edge.toml",
        "scenarios/diffserv-degeb/t4-latency.toml",
        "scenarios/examples/taprio.toml",
        "scenarios/examples/htb.toml",
        "scenarios/ethernet/saturation.toml",
        "scenarios/live/line.toml",
    ]
    .iter()
    .map(|p| load_file(&format!("{ROOT}/{p}"), &[]).expect(p))
    .collect()
}

/// Every node the builder registry makes for the scenarios.
fn nodes() -> Vec<Box<dyn Node>> {
    let mut out = Vec::new();
    for sc in scenarios() {
        let net = Network::build(&sc).unwrap();
        let setup = Setup::new(&sc, &net).unwrap();
        let opts = BuildOpts {
            static_peer_macs: true,
            ..BuildOpts::default()
        };
        for i in 0..sc.nodes.len() {
            if let Some(n) = build_node(&sc, &net, &setup, i, &opts).unwrap() {
                out.push(n);
            }
        }
    }
    out
}

#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Truncate(usize),
    Extend(Vec<u8>),
    Splice(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => prop::collection::vec(any::<u8>(), 1..64).prop_map(Mutation::Extend),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(s, at)| Mutation::Splice(s, at)),
    ]
}

fn mutate(seeds: &[Vec<u8>], seed: usize, ms: &[Mutation]) -> Vec<u8> {
    let mut f = seeds[seed % seeds.len()].clone();
    for m in ms {
        match m {
            Mutation::Set(i, b) if !f.is_empty() => {
                let n = f.len();
                f[i % n] = *b;
            }
            Mutation::Set(..) => {}
            Mutation::Truncate(n) => f.truncate(n % (f.len() + 1)),
            Mutation::Extend(b) => f.extend_from_slice(b),
            Mutation::Splice(s, at) => {
                // Another seed's bytes over this one's, from `at`.
                let o = &seeds[s % seeds.len()];
                let at = at % (f.len() + 1);
                let k = (o.len()).min(f.len() - at);
                f[at..at + k].copy_from_slice(&o[..k]);
            }
        }
    }
    f
}

/// Feed one frame and let the node run: its wake-ups up to 50 ms later,
/// every transmission (acknowledged as sent), every event.
fn feed(n: &mut dyn Node, now: &mut Instant, port: u16, frame: Vec<u8>, uid: u64) {
    let ports = n.port_count().max(1) as u16;
    let meta = Meta {
        uid,
        arrival: *now,
        ..Meta::default()
    };
    n.handle_frame(*now, port % ports, frame, meta);
    let until = *now + qosnet_core::Duration::from_millis(50);
    let mut sent = 0u32;
    for _ in 0..64 {
        n.handle_timeout(*now);
        while let Some(tx) = n.poll_transmit(*now) {
            sent += 1;
            assert!(
                sent < 100_000,
                "{}: one frame caused {sent} transmissions",
                n.name()
            );
            let at = tx.tx_end.unwrap_or(*now);
            n.handle_tx_done(at, tx.port, TxStatus::Sent { collisions: 0 });
        }
        while n.poll_event().is_some() {}
        match n.poll_timeout(*now) {
            Some(t) if t > *now && t <= until => *now = t,
            Some(t) if t <= *now => *now += qosnet_core::Duration(1),
            _ => break,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: Some(Box::new(
        proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"))), .. ProptestConfig::default() })]

    /// Mutated real frames into every node kind.
    #[test]
    fn mutated_frames_never_panic(
        inputs in prop::collection::vec((any::<usize>(), prop::collection::vec(mutation(), 0..6), any::<u16>(), any::<bool>()), 1..8),
        start_ns in 0u64..1_000_000_000,
    ) {
        let seeds = seeds();
        for mut n in nodes() {
            let mut now = Instant(start_ns);
            for (k, (seed, ms, port, traffic)) in inputs.iter().enumerate() {
                let f = mutate(&seeds, *seed, ms);
                feed(n.as_mut(), &mut now, *port, f, if *traffic { k as u64 + 1 } else { 0 });
            }
        }
    }

    /// Random bytes of any length (including empty and runts).
    #[test]
    fn random_frames_never_panic(frames in prop::collection::vec((prop::collection::vec(any::<u8>(), 0..1600), any::<u16>()), 1..6)) {
        for mut n in nodes() {
            let mut now = Instant(1_000);
            for (k, (f, port)) in frames.iter().enumerate() {
                feed(n.as_mut(), &mut now, *port, f.clone(), k as u64 + 1);
            }
        }
    }
}
