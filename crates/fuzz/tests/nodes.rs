//! Structured, in-process fuzzing of the router input path:
//! every node the `node` fuzz target feeds (TDP routers with their CTR and
//! plan, DiffServ edge and core routers, taprio, HTB, FIFO, switches,
//! CSMA/CD stations, RETHER stations, STSDR balancers and forwarders) gets
//! mutated and random frames on random ports, then its timers,
//! transmissions and events are drained (`qosnet_fuzz::feed`). No input may
//! panic, and one frame may not make a node emit an unbounded burst.
//!
//! The complement of the coverage-guided AFL++ targets (`scripts/fuzz`):
//! mutations of real frames (the seed corpus `fuzz/corpus/frame/`, taken
//! from `qosnet sim --pcap` of the shipped scenarios) reach deep states at
//! once. Short in the normal test run (`QOSNET_FUZZ_CASES`, default 300
//! cases per target); long runs:
//!
//! `QOSNET_FUZZ_CASES=1000000 cargo test --release -p qosnet-fuzz --test nodes`
//!
//! A failing case is shrunk by proptest and stored in
//! `crates/fuzz/proptest-regressions/`, which replays it on every run.

use proptest::prelude::*;
use qosnet_core::Instant;
use qosnet_fuzz::{feed, nodes};

fn cases() -> u32 {
    std::env::var("QOSNET_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// The committed seed frames (fuzz/corpus/frame/).
fn seeds() -> Vec<Vec<u8>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/frame");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("seed corpus")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    let mut v: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(v.len() >= 10, "seed corpus has {} frames", v.len());
    v.extend(qosnet_fuzz::arp_frames());
    v
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
