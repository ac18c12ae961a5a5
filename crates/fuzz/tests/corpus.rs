//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`, the seeds
//! AFL++ starts from) and every input a fuzzer ever found to crash or hang
//! qosnet (`fuzz/regressions/<target>/`) through the targets, on every
//! `cargo test`: a fixed bug stays fixed without the fuzzer installed.

use std::path::Path;

const FUZZ: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz");

fn replay(dir: &str) -> usize {
    let mut n = 0;
    for (target, run) in qosnet_fuzz::TARGETS {
        let d = Path::new(FUZZ).join(dir).join(target);
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut files: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files.iter().filter(|f| f.is_file()) {
            let data = std::fs::read(f).unwrap();
            // A panic names the input, so it can be run alone:
            // `fuzz/target/release/<target> < FILE` after `scripts/fuzz --build`.
            let r = std::panic::catch_unwind(|| run(&data));
            assert!(r.is_ok(), "{target}: {} panicked", f.display());
            n += 1;
        }
    }
    n
}

#[test]
fn seed_corpus_runs_clean() {
    let n = replay("corpus");
    assert!(n >= 100, "the seed corpus has only {n} inputs");
}

#[test]
fn regressions_stay_fixed() {
    replay("regressions");
}

/// The `node` target reaches every kind of node the scenarios build.
#[test]
fn node_target_covers_every_kind() {
    let kinds = qosnet_fuzz::node_kinds();
    for k in [
        "router",
        "switch",
        "rether",
        "rether-bridge",
        "stsdr-balancer",
        "stsdr-forwarder",
    ] {
        assert!(kinds.contains(&k), "no {k} among {kinds:?}");
    }
    assert!(
        qosnet_fuzz::node_count() >= 30,
        "only {} nodes",
        qosnet_fuzz::node_count()
    );
}

/// The bound in `feed` does fire: a node that emits without end is caught
/// (an invariant check that cannot fire would make every fuzz run pass).
#[test]
fn feed_catches_an_unbounded_burst() {
    use qosnet_core::node::{Ledger, Node, PortReport, Transmit};
    use qosnet_core::{Instant, Meta, Packet};
    struct Flood;
    impl Node for Flood {
        fn name(&self) -> &str {
            "flood"
        }
        fn port_count(&self) -> usize {
            1
        }
        fn handle_frame(&mut self, _: Instant, _: u16, _: Vec<u8>, _: Meta) {}
        fn handle_send(&mut self, _: Instant, _: Packet) {}
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_transmit(&mut self, _: Instant) -> Option<Transmit> {
            Some(Transmit {
                port: 0,
                pkt: Packet::new(vec![0; 60], Meta::default()),
                tx_end: None,
            })
        }
        fn poll_timeout(&self, _: Instant) -> Option<Instant> {
            None
        }
        fn counters(&self) -> Vec<(String, u64)> {
            Vec::new()
        }
        fn port_report(&self, _: u16) -> PortReport {
            PortReport::default()
        }
        fn ledger(&self) -> Ledger {
            Ledger::default()
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    }
    let r = std::panic::catch_unwind(|| {
        let mut now = Instant(0);
        qosnet_fuzz::feed(&mut Flood, &mut now, 0, vec![0; 60], 1);
    });
    assert!(r.is_err(), "an unbounded burst went unnoticed");
}

/// A node with its own clock (a timer always 1 µs ahead, as an STSDR
/// forwarder's cycle) takes all 64 steps of every frame, so the `node`
/// target's step budget (MAX_STEPS) is what ends a long input of it; a
/// quiet node takes one step per frame.
#[test]
fn feed_counts_timer_steps() {
    use qosnet_core::node::{Ledger, Node, PortReport, Transmit};
    use qosnet_core::{Duration, Instant, Meta, Packet};
    struct Ticker(bool);
    impl Node for Ticker {
        fn name(&self) -> &str {
            "ticker"
        }
        fn port_count(&self) -> usize {
            1
        }
        fn handle_frame(&mut self, _: Instant, _: u16, _: Vec<u8>, _: Meta) {}
        fn handle_send(&mut self, _: Instant, _: Packet) {}
        fn handle_timeout(&mut self, _: Instant) {}
        fn poll_transmit(&mut self, _: Instant) -> Option<Transmit> {
            None
        }
        fn poll_timeout(&self, now: Instant) -> Option<Instant> {
            self.0.then(|| now + Duration::from_micros(1))
        }
        fn counters(&self) -> Vec<(String, u64)> {
            Vec::new()
        }
        fn port_report(&self, _: u16) -> PortReport {
            PortReport::default()
        }
        fn ledger(&self) -> Ledger {
            Ledger::default()
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
            self
        }
    }
    let mut now = Instant(0);
    assert_eq!(
        qosnet_fuzz::feed(&mut Ticker(true), &mut now, 0, vec![0; 60], 1),
        64
    );
    assert_eq!(now, Instant(0) + Duration::from_micros(64));
    assert_eq!(
        qosnet_fuzz::feed(&mut Ticker(false), &mut now, 0, vec![0; 60], 2),
        1
    );
    const { assert!(qosnet_fuzz::MAX_STEPS / 64 < qosnet_fuzz::MAX_FRAMES) };
}

/// The config-file targets' seeds that are not named `bad-*` parse, so
/// AFL starts from inputs that reach past the parser (the `bad-*` ones
/// from its refusals).
#[test]
fn config_file_seeds_parse_unless_bad() {
    use qosnet_experiments::sweep::Manifest;
    use qosnet_lab::placement::Placement;
    use qosnet_live::node::NodeConfig;
    type Parse = fn(&str) -> Result<(), String>;
    let parses: [(&str, Parse); 3] = [
        ("manifest", |t| {
            toml::from_str::<Manifest>(t)
                .map_err(|e| e.to_string())
                .and_then(|m| m.check().map_err(|e| e.to_string()))
        }),
        ("placement", |t| Placement::parse(t, "p.toml").map(|_| ())),
        ("nodecfg", |t| {
            NodeConfig::parse(t, "n.toml", Path::new("/cfg")).map(|_| ())
        }),
    ];
    for (target, parse) in parses {
        let d = Path::new(FUZZ).join("corpus").join(target);
        let (mut good, mut bad) = (0, 0);
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let r = parse(&std::fs::read_to_string(e.path()).unwrap());
            if name.starts_with("bad-") {
                assert!(r.is_err(), "{target}/{name} parses");
                bad += 1;
            } else {
                r.unwrap_or_else(|e| panic!("{target}/{name}: {e}"));
                good += 1;
            }
        }
        assert!(good >= 3 && bad >= 3, "{target}: {good} good and {bad} bad seeds");
    }
}
