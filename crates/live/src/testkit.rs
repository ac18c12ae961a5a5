//! What every live test needs, whichever crate it is in: skip with a
//! visible reason when not root, find the repository's scenarios, and
//! leave nothing behind however a test ends (namespaces of a prefix,
//! child processes) — RAII guards, so a failed assertion cleans up too.
//! Used by the integration tests of `qosnet-live` and `qosnet-cli`; no
//! production code depends on it.

use std::path::PathBuf;
use std::process::Child;

use crate::{lab, netns};

/// `true` when the test may create namespaces; otherwise says why it is
/// skipped (`needs` names what it needs) and returns `false`.
pub fn root_for(needs: &str) -> bool {
    if netns::is_root() {
        return true;
    }
    // Straight to the stderr handle: libtest captures eprintln! of
    // passing tests, and a skip must be visible.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED: needs root ({needs})");
    false
}

/// [`root_for`] namespaces and AF_PACKET, what most live tests need.
pub fn root() -> bool {
    root_for("network namespaces, AF_PACKET")
}

/// The repository's root (scenarios/, docs/).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether a program is on the PATH (iperf3, irtt, ...).
pub use crate::labtools::have;

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
