//! In-process fuzzing of scenario loading and `--set` parsing.
//! Seeds are the shipped scenarios and the committed corpus of bad files
//! (`tests/corpus/`); inputs are their texts mutated line- and byte-wise
//! (lines dropped, repeated or taken from another file; bytes replaced;
//! numbers replaced by extreme ones) with random `--set` overrides. For
//! every input: no panic; an error names the file at a line that exists,
//! or the `--set` argument; and `check` and `sim` agree (what loads, the
//! simulator builds).
//!
//! The structured complement of the coverage-guided AFL++ targets
//! (`crates/fuzz`, `scripts/fuzz`): these proptest properties reach deep
//! states by construction; short in the normal test run
//! (`QOSNET_FUZZ_CASES`, default 200) and long on request:
//!
//! `QOSNET_FUZZ_CASES=1000000 cargo test --release -p qosnet-scenario --test fuzz_load`

use std::path::PathBuf;

use proptest::prelude::*;
use qosnet_scenario::{load_str, tdpplan, topo::Network, SetBase};

fn cases() -> u32 {
    std::env::var("QOSNET_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn seeds() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut v = Vec::new();
    for dir in [
        root.join("tests/corpus"),
        root.join("../../scenarios/tdp-icc2006"),
        root.join("../../scenarios/diffserv-degeb"),
        root.join("../../scenarios/examples"),
        root.join("../../scenarios/ethernet"),
        root.join("../../scenarios/live"),
    ] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        v.extend(files.iter().map(|p| std::fs::read_to_string(p).unwrap()));
    }
    assert!(v.len() >= 30, "{} seeds", v.len());
    v
}

const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "1e308",
    "1e-308",
    "nan",
    "inf",
    "18446744073709551616",
    "\"\"",
    "\"1e15Gb/s\"",
    "\"0s\"",
    "\"-5ms\"",
    "\"1e12s\"",
    "\"10MB/s\"",
    "\"imix\"",
    "28",
    "39",
    "40",
    "65536",
    "[]",
    "{}",
    "\"\\u0000\"",
    "\"../x\"",
    "true",
];

const KEYS: &[&str] = &[
    "scenario.duration",
    "scenario.warmup",
    "scenario.name",
    "scenario.seed",
    "flow.*.size",
    "flow.*.rate",
    "flow.*.pattern",
    "flow.*.start",
    "flow.*.stop",
    "node.*.scheduler",
    "node.R*.queue_packets",
    "node.*.clock_offset",
    "node.*.processing",
    "link.*.capacity",
    "link.*.delay",
    "tdp.tf",
    "defaults.link.capacity",
    "a.b",
    "flow.nope.size",
    "node..x",
    "=",
];

#[derive(Clone, Debug)]
enum Edit {
    DropLine(usize),
    RepeatLine(usize),
    ForeignLine(usize, usize),
    Byte(usize, u8),
    Number(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::DropLine),
        any::<usize>().prop_map(Edit::RepeatLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::ForeignLine(a, b)),
        (any::<usize>(), 0x20u8..0x7f).prop_map(|(a, b)| Edit::Byte(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Number(a, b)),
    ]
}

fn apply(seeds: &[String], seed: usize, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = seeds[seed % seeds.len()].lines().map(String::from).collect();
    for e in edits {
        if lines.is_empty() {
            break;
        }
        let n = lines.len();
        match e {
            Edit::DropLine(i) => {
                lines.remove(i % n);
            }
            Edit::RepeatLine(i) => {
                let l = lines[i % n].clone();
                lines.insert(i % n, l);
            }
            Edit::ForeignLine(s, i) => {
                let other: Vec<&str> = seeds[s % seeds.len()].lines().collect();
                if !other.is_empty() {
                    lines[i % n] = other[i % other.len()].to_string();
                }
            }
            Edit::Byte(i, b) => {
                let l = &mut lines[i % n];
                if !l.is_empty() {
                    let at = (i / n) % l.len();
                    if l.is_char_boundary(at) && l.is_char_boundary(at + 1) {
                        l.replace_range(at..at + 1, &(*b as char).to_string());
                    }
                }
            }
            Edit::Number(i, x) => {
                // The value of a `key = value` line becomes an extreme one.
                let l = &mut lines[i % n];
                if let Some(eq) = l.find(" = ") {
                    l.truncate(eq + 3);
                    l.push_str(EXTREMES[x % EXTREMES.len()]);
                }
            }
        }
    }
    lines.join("\n") + "\n"
}

/// `--set` arguments from index pairs: a key of `KEYS`, a value of `EXTREMES`.
fn set_args(pairs: &[(usize, usize)]) -> Vec<String> {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", KEYS[k % KEYS.len()], EXTREMES[v % EXTREMES.len()]))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), .. ProptestConfig::default() })]

    #[test]
    fn mutated_scenarios_load_or_fail_cleanly(
        seed in any::<usize>(),
        edits in prop::collection::vec(edit(), 0..6),
        sets in prop::collection::vec((any::<usize>(), any::<usize>()), 0..3),
    ) {
        let seeds = seeds();
        let text = apply(&seeds, seed, &edits);
        let sets = set_args(&sets);
        let lines = text.lines().count();
        match load_str("fuzz.toml", &text, &sets) {
            Err(e) => {
                if e.file == "fuzz.toml" {
                    prop_assert!(e.line <= lines + 1, "{e}: line past the end of a {lines}-line file");
                } else {
                    prop_assert!(e.file.starts_with("--set "), "{e}");
                }
                prop_assert!(!e.msg.is_empty());
            }
            Ok(sc) => {
                // check == sim: what loads, builds.
                let net = Network::build(&sc);
                prop_assert!(net.is_ok(), "loaded but no network: {:?}", net.err());
                if sc.tdp.is_some() {
                    let plan = tdpplan::plan(&sc, net.as_ref().unwrap());
                    prop_assert!(plan.is_ok(), "loaded but no TDP plan: {:?}", plan.err());
                }
                let sim = qosnet_sim::Sim::new(sc);
                prop_assert!(sim.is_ok(), "loaded but the simulator refused: {:?}", sim.err());
            }
        }
    }

    /// A file parsed once (`SetBase`, what the `set` AFL target uses)
    /// loads with any `--set` list exactly as `load_str` does, errors
    /// included.
    #[test]
    fn set_base_loads_as_load_str(
        seed in any::<usize>(),
        edits in prop::collection::vec(edit(), 0..3),
        sets in prop::collection::vec((any::<usize>(), any::<usize>()), 0..3),
    ) {
        let seeds = seeds();
        let text = apply(&seeds, seed, &edits);
        let sets = set_args(&sets);
        let base = SetBase::new("fuzz.toml", &text);
        for _ in 0..2 {
            let (a, b) = (load_str("fuzz.toml", &text, &sets), base.load(&sets));
            prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
        }
    }

    /// `--set` strings of any shape.
    #[test]
    fn any_set_string_fails_cleanly(s in "[a-z*.=\\[\\]\"0-9 _-]{0,40}") {
        let seeds = seeds();
        let text = &seeds[seeds.len() - 1];
        if let Err(e) = load_str("fuzz.toml", text, std::slice::from_ref(&s)) {
            prop_assert!(e.file == "fuzz.toml" || e.file.starts_with("--set "), "{e}");
            if e.file == "fuzz.toml" {
                prop_assert!(e.line <= text.lines().count() + 1, "{e}");
            }
        }
    }
}
