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

use crate::lab;
use qosnet_io::netns;

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

/// Records a claim this test did not check because of measured noise
/// (counted by `scripts/test`; [`qosnet_io::noise`]).
pub use qosnet_io::noise::relaxed;
use qosnet_io::noise::test_name;

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
        // Our own child's pid; harmless if reaped.
        let _ = qosnet_io::process::kill(self.0, qosnet_io::process::Signal::KILL);
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

/// A namespace prefix unique to this process and call, `qnt{pid}n{k}`, so
/// tests running in parallel (and other runs) never share namespaces.
pub fn test_prefix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("qnt{}n{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// The namespace guard under the name device tests use.
pub use Guard as PrefixGuard;

/// Two hosts `a` and `b` joined by one veth pair, with the interface
/// addresses `addrs` (`""`: none).
pub fn two_hosts(prefix: &str, addrs: (&str, &str)) -> lab::Lab {
    use lab::{Lab, LabSpec, NodeKind};
    Lab::up(
        &LabSpec::new(prefix)
            .node("a", NodeKind::Host)
            .node("b", NodeKind::Host)
            .link("a", addrs.0, "b", addrs.1),
    )
    .unwrap()
}

/// EtherType of the device tests' frames (IEEE 802 local experimental).
pub const TEST_ETHERTYPE: u16 = 0x88b5;

/// A test frame of `len` bytes (at least 18) numbered `seq`, with a
/// payload that differs per sequence number, so a corrupted or
/// misplaced frame shows.
pub fn test_frame(
    src: qosnet_core::wire::MacAddr,
    dst: qosnet_core::wire::MacAddr,
    seq: u32,
    len: usize,
) -> Vec<u8> {
    let mut f = vec![0u8; len.max(qosnet_core::wire::ETH_HDR + 4)];
    f[0..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(i) as u8;
    }
    f
}

/// The sequence number of a [`test_frame`], `None` for any other frame.
pub fn seq_of(f: &[u8]) -> Option<u32> {
    if f.len() >= 18 && f[12..14] == TEST_ETHERTYPE.to_be_bytes() {
        Some(u32::from_be_bytes(f[14..18].try_into().ok()?))
    } else {
        None
    }
}

/// Receive test frames on `rx` until `want` arrived or 2 s pass.
pub fn drain(rx: &mut impl qosnet_io::device::Device, want: usize, got: &mut Vec<(u32, Vec<u8>)>) {
    let t0 = std::time::Instant::now();
    while got.len() < want && t0.elapsed() < std::time::Duration::from_secs(2) {
        let n = rx
            .recv_batch(256, |f, _| {
                if let Some(s) = seq_of(f) {
                    got.push((s, f.to_vec()));
                }
            })
            .unwrap();
        if n == 0 {
            qosnet_io::device::wait_readable(&[rx.fd()], Some(qosnet_core::time::Duration::from_millis(10)))
                .unwrap();
        }
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
    #[should_panic(expected = "CI=true and `x` not installed")]
    fn a_missing_tool_fails_under_ci() {
        missing_in(true, "`x` not installed");
    }

    #[test]
    fn a_missing_tool_skips_elsewhere() {
        missing_in(false, "`x` not installed");
    }
}
