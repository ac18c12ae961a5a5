//! `qosnet check` and `qosnet sim` refuse the same files: every validation
//! a driver runs happens at load, so no scenario passes `check` and then
//! fails to build in `sim`. Run on a corpus of bad files (each once passed
//! `check` or reached the simulator, see the comment at its top) and on
//! every shipped scenario.

use std::path::{Path, PathBuf};

use qosnet_scenario::{load_file, tdpplan, topo::Network};
use qosnet_sim::Sim;

/// What `qosnet check FILE` does before it prints "ok".
fn check_path(p: &str) -> Result<(), String> {
    let sc = load_file(p, &[]).map_err(|e| e.to_string())?;
    let net = Network::build(&sc)?;
    if sc.tdp.is_some() {
        tdpplan::plan(&sc, &net)?;
    }
    Ok(())
}

/// What `qosnet sim FILE` does before it runs.
fn sim_path(p: &str) -> Result<(), String> {
    let sc = load_file(p, &[]).map_err(|e| e.to_string())?;
    Sim::new(sc).map(|_| ())
}

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| {
        let n = p.to_string_lossy();
        n.ends_with(".toml") && !n.ends_with(".router.toml") && !n.ends_with(".placement.toml")
    });
    v.sort();
    v
}

#[test]
fn check_and_sim_agree_on_a_corpus_of_bad_files() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let corpus = toml_files(&root.join("tests/corpus"));
    assert!(corpus.len() >= 20, "corpus has {} files", corpus.len());
    for p in &corpus {
        let ps = p.to_str().unwrap_or_default();
        let (c, s) = (check_path(ps), sim_path(ps));
        assert_eq!(c, s, "{ps}: check and sim disagree");
        let bad = p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("bad-"));
        if bad {
            // Refused at load, at a line of the file, with a hint.
            let e = load_file(ps, &[]).expect_err(ps);
            assert!(e.line > 0 && !e.hint.is_empty(), "{ps}: {e}");
            assert!(e.file == ps, "{ps}: {e}");
        } else {
            assert!(c.is_ok(), "{ps}: {c:?}");
        }
    }
}

#[test]
fn check_and_sim_agree_on_the_shipped_scenarios() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut n = 0;
    for dir in ["tdp-icc2006", "diffserv-degeb", "examples", "live"] {
        for p in toml_files(&root.join(dir)) {
            let ps = p.to_str().unwrap_or_default();
            assert_eq!(check_path(ps), Ok(()), "{ps}");
            assert_eq!(sim_path(ps), Ok(()), "{ps}");
            assert!(load_file(ps, &[]).unwrap().warnings.is_empty(), "{ps}");
            n += 1;
        }
    }
    assert!(n >= 9);
}
