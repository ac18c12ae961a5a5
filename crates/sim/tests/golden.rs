//! Every shipped scenario (every `scenarios/*/*.toml`), pinned: the
//! simulator gives the same results
//! (same seed, same numbers) as when its golden file was written. A
//! refactor of the engine, the nodes or the media must leave them
//! unchanged; a change that is meant to alter results regenerates them
//! with `QOSNET_BLESS=1 cargo test --release -p qosnet-sim --test golden`
//! and says why in its commit.
//!
//! Compared: the whole results.json except `engine` (wall-clock figures
//! and event counts, which describe the simulator rather than the network)
//! and `source` (the path the file was loaded from).

use std::path::PathBuf;

use qosnet_scenario::load_file;
use qosnet_sim::Sim;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenarios() -> Vec<PathBuf> {
    let mut v = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("scenarios"))
        .expect("scenarios/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            // Router configs for `qosnet router` and sweep manifests for
            // `qosnet sweep` and placement files for `lab run --placement`
            // are not scenarios.
            if name.ends_with(".toml")
                && !name.ends_with(".router.toml")
                && !name.ends_with(".sweep.toml")
                && !name.ends_with(".placement.toml")
            {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

fn golden_name(p: &std::path::Path) -> String {
    let dir = p
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|d| d.to_str())
        .unwrap_or("x");
    let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("x");
    format!("{dir}-{stem}.json")
}

fn pinned(p: &std::path::Path) -> serde_json::Value {
    let sc = load_file(p.to_str().unwrap_or_default(), &[]).unwrap_or_else(|e| panic!("{e}"));
    let r = Sim::new(sc)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .run();
    let mut v = serde_json::to_value(&r).expect("results serialise");
    if let Some(o) = v.as_object_mut() {
        o.remove("engine");
        o.remove("source");
    }
    v
}

#[test]
fn shipped_scenarios_give_pinned_results() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let bless = std::env::var_os("QOSNET_BLESS").is_some();
    let list = scenarios();
    assert!(list.len() >= 9, "found only {} shipped scenarios", list.len());
    let mut failed = Vec::new();
    for p in &list {
        let got = pinned(p);
        let file = dir.join(golden_name(p));
        if bless {
            std::fs::create_dir_all(&dir).expect("golden dir");
            let text = serde_json::to_string_pretty(&got).expect("json") + "\n";
            std::fs::write(&file, text).expect("write golden");
            continue;
        }
        // Compared as text: floats are printed exactly (shortest round
        // trip), while parsing them back need not be.
        let got = serde_json::to_string_pretty(&got).expect("json") + "\n";
        let want = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) => panic!("{}: {e} (QOSNET_BLESS=1 writes it)", file.display()),
        };
        if got != want {
            // Keep what this run gave beside the target dir, to diff.
            let actual = root().join("target/golden-actual").join(golden_name(p));
            let _ = std::fs::create_dir_all(actual.parent().expect("parent"));
            let _ = std::fs::write(&actual, &got);
            failed.push(format!(
                "{} differs from {} (this run's results: {})",
                p.display(),
                file.display(),
                actual.display()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
