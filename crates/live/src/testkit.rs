//! What every live test needs, whichever crate it is in: a loud failure
//! when a root test runs without root, a tool that CI must have, a claim
//! relaxed for measured noise written where `scripts/test` counts it,
//! the repository's scenarios, and nothing left behind however a test
//! ends (namespaces of a prefix, child processes) — RAII guards, so a
//! failed assertion cleans up too. Used by the integration tests of
//! `qosnet-live` and `qosnet-cli`; no production code depends on it.
//!
//! A test that needs root is `#[ignore = "needs root: ..."]`, so a
//! non-root `cargo test` reports it as ignored rather than as passed
//! having checked nothing; `scripts/test` adds `--include-ignored` when
//! run as root. Such a test still starts with [`require_root`], which
//! fails it when `--include-ignored` runs it without root.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Child;

use crate::{lab, netns};

/// What most live tests need root for.
pub const ROOT_NEEDS: &str = "network namespaces, veth, AF_PACKET";

/// Fails the test unless this process is root ([`require_root_for`]
/// namespaces, veth and AF_PACKET).
pub fn require_root() {
    require_root_for(ROOT_NEEDS);
}

/// Fails the test, saying what it needs root for, unless this process is
/// root: it was asked for by name or `--include-ignored`, and passing
/// without checking anything would hide that.
pub fn require_root_for(needs: &str) {
    assert!(
        netns::is_root(),
        "needs root ({needs}): run it as root, or without --include-ignored \
         so that it is reported as ignored"
    );
}

/// Whether this run is CI's (`CI=true`, as CI services and `.ci/run` set).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Whether the part of a test that needs `bin` may run. A missing tool
/// skips that part with a `SKIPPED` line, except under CI ([`in_ci`]),
/// where it fails the test: CI installs its tools (`.ci/run`), and a skip
/// there would hide a missing install step.
pub fn tool(bin: &str) -> bool {
    if have(bin) {
        return true;
    }
    missing(&format!("`{bin}` not installed (.ci/run installs it)"));
    false
}

/// A prerequisite is missing ([`tool`]): under CI the test fails saying
/// `what`; elsewhere a `SKIPPED` line says it.
pub fn missing(what: &str) {
    missing_in(in_ci(), what);
}

fn missing_in(ci: bool, what: &str) {
    assert!(!ci, "CI=true and {what}: CI must install it");
    // Straight to the stderr handle: libtest captures eprintln! of
    // passing tests, and a skip must be visible.
    let _ = writeln!(std::io::stderr(), "SKIPPED {}: {what}", test_name());
}

/// Records a claim this test did not check because of measured noise:
/// one line, `TEST: WHAT not checked (NOISE)`, appended to the file
/// named by `QOSNET_RELAXED_LOG` when it is set (`scripts/test` sets it
/// and counts the lines). The caller prints its own `NOTE` too.
pub fn relaxed(what: &str, noise: &str) {
    if let Some(path) = std::env::var_os("QOSNET_RELAXED_LOG") {
        append_relaxed(&PathBuf::from(path), &test_name(), what, noise);
    }
}

fn append_relaxed(log: &std::path::Path, test: &str, what: &str, noise: &str) {
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
fn test_name() -> String {
    let t = std::thread::current();
    match t.name() {
        Some(n) if n != "main" => n.to_string(),
        _ => std::env::args().next().unwrap_or_default(),
    }
}

/// The repository's root (scenarios/, docs/).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether a program is on the PATH (iperf3, irtt, ...).
pub use crate::labtools::have;

/// Lines of a command's output, read until `done` holds for what was
/// read so far or the output ends; all of it.
pub fn read_until(r: &mut impl std::io::BufRead, done: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    while !done(&text) {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap() == 0 {
            break;
        }
        text += &l;
    }
    text
}

/// `qosnet lab up`'s output until it lists `node` (it lists the nodes
/// last, so the last one listed means the lab is up).
pub fn read_until_listed(r: &mut impl std::io::BufRead, node: &str) -> String {
    let want = format!("{node} ");
    read_until(r, |t| t.lines().any(|l| l.trim_start().starts_with(&want)))
}

/// The running `qosnet node` processes of lab `prefix` (their configs
/// are in its run directories, `qosnet-PREFIX-*`): (pid, command line).
pub fn node_processes(prefix: &str) -> Vec<(u32, String)> {
    let out = std::process::Command::new("pgrep")
        .args(["-af", "qosnet node --config"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&format!("qosnet-{prefix}-")))
        .filter_map(|l| {
            let (pid, cmd) = l.split_once(' ')?;
            Some((pid.parse().ok()?, cmd.to_string()))
        })
        .collect()
}

/// The namespaces of `prefix` that still exist.
pub fn leftovers(prefix: &str) -> Vec<String> {
    let p = format!("{prefix}-");
    netns::list()
        .expect("listing network namespaces")
        .into_iter()
        .filter(|n| n.starts_with(&p))
        .collect()
}

/// Removes every namespace of a prefix when dropped, even on panic, so a
/// test that fails half-way (or detaches or forgets a lab on purpose)
/// leaves nothing behind.
pub struct Guard(pub String);
impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = lab::cleanup(&self.0) {
            eprintln!("test cleanup of {}: {e}", self.0);
        }
    }
}

/// SIGKILLs a child by pid when dropped (a failed assertion must not
/// leave a router spinning: it would starve every later live test).
/// SIGKILL of `lab up` takes its node processes with it: they are
/// spawned with PDEATHSIG.
pub struct Kill(pub u32);
impl Drop for Kill {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid; harmless if reaped.
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

/// Kills and reaps an owned child when dropped.
pub struct Reap(pub Child);
impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `.rs` file under `dir`.
    fn rust_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// The tests of the workspace ignored for a reason other than root.
    fn ignored_not_for_root(src: &str) -> Vec<String> {
        let lines: Vec<&str> = src.lines().map(str::trim).collect();
        let mut bad = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if !l.starts_with("#[ignore") || l.starts_with("#[ignore = \"needs root") {
                continue;
            }
            let f = lines[i..].iter().find(|l| l.starts_with("fn ")).unwrap_or(&"");
            if !f.starts_with("fn manual_") {
                bad.push(format!("{l} {f}"));
            }
        }
        bad
    }

    /// `scripts/test` runs as root with `--include-ignored --skip
    /// manual_`: a test ignored for another reason than root (a benchmark,
    /// a helper run by another test) must be named `manual_*`, or CI runs
    /// it.
    #[test]
    fn only_root_tests_are_ignored_unless_named_manual() {
        let mut files = Vec::new();
        rust_files(&repo().join("crates"), &mut files);
        assert!(files.len() > 50, "{} files", files.len());
        let bad: Vec<String> = files
            .iter()
            .flat_map(|p| {
                let src = std::fs::read_to_string(p).unwrap();
                ignored_not_for_root(&src)
                    .into_iter()
                    .map(move |b| format!("{}: {b}", p.display()))
            })
            .collect();
        assert!(bad.is_empty(), "{bad:#?}");
    }

    #[test]
    fn an_ignore_for_another_reason_is_caught() {
        let src = "#[test]\n#[ignore = \"slow\"]\nfn table1() {}\n";
        assert_eq!(ignored_not_for_root(src).len(), 1);
        let ok = "#[ignore = \"slow\"]\nfn manual_table1() {}\n#[ignore = \"needs root: x\"]\nfn t() {}";
        assert!(ignored_not_for_root(ok).is_empty());
    }

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
        assert_eq!(test_name(), "testkit::tests::the_test_name_is_the_threads");
    }

    #[test]
    #[should_panic(expected = "CI=true and `x` not installed")]
    fn a_missing_tool_fails_under_ci() {
        missing_in(true, "`x` not installed");
    }

    #[test]
    fn a_missing_tool_skips_elsewhere() {
        missing_in(false, "`x` not installed");
    }
}
