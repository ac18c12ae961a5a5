//! Claims a test did not check because of noise it measured (a stall,
//! CPU pressure on this shared machine): each is written where
//! `scripts/test` counts and prints it, so a relaxed claim is a number in
//! the result, not a NOTE buried in the output. Here, below every crate
//! whose tests measure time (the clocks here, the runtime's driver, the
//! labs), so each can record one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Records a claim this test did not check because of measured noise:
/// one line, `TEST: WHAT not checked (NOISE)`, appended to the file
/// named by `QOSNET_RELAXED_LOG` when it is set (`scripts/test` sets it
/// and counts the lines). The caller prints its own `NOTE` too.
pub fn relaxed(what: &str, noise: &str) {
    if let Some(path) = std::env::var_os("QOSNET_RELAXED_LOG") {
        append_relaxed(&PathBuf::from(path), &test_name(), what, noise);
    }
}

fn append_relaxed(log: &Path, test: &str, what: &str, noise: &str) {
    let line = format!("{test}: {what} not checked ({noise})\n");
    // One write of one line in append mode: lines of tests running in
    // parallel do not interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("QOSNET_RELAXED_LOG={}: {e}", log.display());
    }
}

/// The running test's name: libtest names each test's thread after it.
pub fn test_name() -> String {
    let t = std::thread::current();
    match t.name() {
        Some(n) if n != "main" => n.to_string(),
        _ => std::env::args().next().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relaxed_claims_are_appended_to_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("relaxed");
        append_relaxed(&log, "t1", "a claim", "a stall of 1 ns");
        append_relaxed(&log, "t2", "another", "2 ns");
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            text,
            "t1: a claim not checked (a stall of 1 ns)\nt2: another not checked (2 ns)\n"
        );
    }

    #[test]
    fn the_test_name_is_the_threads() {
        assert_eq!(test_name(), "noise::tests::the_test_name_is_the_threads");
    }
}
