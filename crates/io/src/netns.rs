//! Entering a named network namespace from one thread.
//!
//! A socket belongs to the network namespace it was created in, for its
//! whole life, whatever namespace its user later runs in. So one process can
//! host several routers — each with AF_PACKET ports in its own namespace —
//! by moving a thread into a namespace with `setns(2)`, opening the sockets
//! and moving back. `setns` with `CLONE_NEWNET` acts on the calling thread
//! only, which is why the guard is neither `Send` nor `Sync`: it must restore
//! the namespace of the thread that entered.
//!
//! Namespaces are the ones `ip netns add NAME` creates: bind mounts under
//! `/var/run/netns/NAME`.

use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// Where iproute2 keeps named network namespaces.
pub const NETNS_RUN_DIR: &str = "/var/run/netns";

/// Path of the bind mount that names a namespace.
pub fn path(name: &str) -> PathBuf {
    Path::new(NETNS_RUN_DIR).join(name)
}

/// True if a namespace of that name exists.
pub fn exists(name: &str) -> bool {
    path(name).exists()
}

/// Names of all named network namespaces, sorted. An absent run directory
/// means none (iproute2 creates it on the first `ip netns add`).
pub fn list() -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    let rd = match std::fs::read_dir(NETNS_RUN_DIR) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(e),
    };
    for ent in rd {
        if let Some(n) = ent?.file_name().to_str() {
            names.push(n.to_string());
        }
    }
    names.sort();
    Ok(names)
}

fn setns(f: &File) -> io::Result<()> {
    use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
    // Only the calling thread's namespace changes.
    Ok(move_into_link_name_space(
        f.as_fd(),
        Some(LinkNameSpaceType::Network),
    )?)
}

/// While alive, the current thread is in another network namespace;
/// dropping it moves the thread back to where it was.
pub struct NetnsGuard {
    orig: File,
    // setns acts per thread: the guard must be dropped on the thread that
    // made it, so it is neither Send nor Sync.
    _not_send: PhantomData<*const ()>,
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns(&self.orig) {
            // A thread left in the wrong namespace would open later sockets
            // in a lab namespace without anyone noticing; failing loudly is
            // the only safe choice. (setns back to a namespace we were in
            // only fails if the process lost CAP_SYS_ADMIN meanwhile.)
            panic!("cannot return to the original network namespace: {e}");
        }
    }
}

/// Move the calling thread into namespace `name` until the guard drops.
pub fn enter(name: &str) -> io::Result<NetnsGuard> {
    // /proc/thread-self, not /proc/self: the latter is the main thread's
    // namespace, which need not be this thread's.
    let orig = File::open("/proc/thread-self/ns/net")?;
    let target = File::open(path(name))
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {name:?}: {e}")))?;
    setns(&target)?;
    Ok(NetnsGuard {
        orig,
        _not_send: PhantomData,
    })
}

/// Run `f` with the calling thread inside namespace `name`; sockets `f`
/// opens stay in that namespace after the thread returns.
pub fn run_in<T>(name: &str, f: impl FnOnce() -> T) -> io::Result<T> {
    let _g = enter(name)?;
    Ok(f())
}

/// Write a sysctl of a namespace (`key` as in `sysctl`, e.g.
/// `net.ipv4.ip_forward`). /proc/sys/net shows the namespace of the thread
/// that opens the file, so this needs no `ip netns exec` and no sysctl
/// binary. Interface names in keys must not contain dots (ours never do).
pub fn write_sysctl(name: &str, key: &str, value: &str) -> io::Result<()> {
    let p = Path::new("/proc/sys").join(key.replace('.', "/"));
    run_in(name, || std::fs::write(&p, value))?
        .map_err(|e| io::Error::new(e.kind(), format!("sysctl {key} in {name}: {e}")))
}

/// Read a sysctl of a namespace, trimmed.
pub fn read_sysctl(name: &str, key: &str) -> io::Result<String> {
    let p = Path::new("/proc/sys").join(key.replace('.', "/"));
    let s = run_in(name, || std::fs::read_to_string(&p))??;
    Ok(s.trim().to_string())
}

/// Process ids (thread-group leaders) whose network namespace is `name`,
/// found by comparing `/proc/PID/ns/net` with the named namespace's inode,
/// as `ip netns pids` does. The calling process is never listed.
pub fn pids(name: &str) -> io::Result<Vec<u32>> {
    use std::os::unix::fs::MetadataExt;
    let target = std::fs::metadata(path(name))?;
    let me = std::process::id();
    let mut out = Vec::new();
    for ent in std::fs::read_dir("/proc")? {
        let Ok(ent) = ent else { continue };
        let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Processes vanish while we scan; that is not an error.
        if let Ok(m) = std::fs::metadata(format!("/proc/{pid}/ns/net")) {
            if m.ino() == target.ino() && m.dev() == target.dev() {
                out.push(pid);
            }
        }
    }
    Ok(out)
}

/// Whether the caller may create namespaces (root or CAP_SYS_ADMIN).
/// Effective uid 0 is the practical test: tests skip when it is false.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
