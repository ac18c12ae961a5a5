//! Least privilege once the sockets are open (docs/security.md).
//!
//! A node process needs root (or CAP_NET_RAW, CAP_NET_ADMIN and
//! CAP_SYS_ADMIN for setns) only to open its ports: an AF_PACKET or
//! AF_XDP socket keeps working without the capability that opened it. What
//! follows (parsing every frame from the wire, serving metrics to the
//! network, answering its control socket) needs none. So each thread
//! that handles outside input drops, for itself, every capability it
//! will not use again: the effective, permitted and inheritable sets, the
//! ambient set and the bounding set, and sets `no_new_privs` so that
//! nothing it could exec would gain any back.
//!
//! Capabilities belong to threads (capset(2) changes the caller's only),
//! so this is done on each such thread, and threads created afterwards by
//! a thread that dropped inherit its sets. The uid stays 0: the files a
//! node writes (its report, in a 0700 directory of root's) are root's own,
//! which needs no capability.

use rustix::thread::{CapabilitySet, CapabilitySets};

/// What a thread kept after [`drop_thread_privileges`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kept {
    pub effective: u64,
    pub permitted: u64,
    pub no_new_privs: bool,
}

/// The capabilities a thread may still need after its sockets are open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// SCHED_FIFO and negative nice values (the driver thread sets them
    /// itself, once, when it starts; keep only when that comes later).
    SysNice,
    /// mlock beyond RLIMIT_MEMLOCK.
    IpcLock,
}

impl Need {
    fn set(self) -> CapabilitySet {
        match self {
            Need::SysNice => CapabilitySet::SYS_NICE,
            Need::IpcLock => CapabilitySet::IPC_LOCK,
        }
    }
}

/// The highest capability number this kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
        .min(63)
}

/// Drop every capability of the calling thread except `keep`, and set
/// `no_new_privs`. A thread that has no capabilities (qosnet run by an
/// ordinary user) has nothing to drop: that is not an error. Returns
/// what the thread still has.
pub fn drop_thread_privileges(keep: &[Need]) -> Result<Kept, String> {
    let keep = keep.iter().fold(CapabilitySet::empty(), |a, n| a | n.set());
    rustix::thread::set_no_new_privs(true).map_err(|e| format!("no_new_privs: {e}"))?;
    let have = rustix::thread::capabilities(None).map_err(|e| format!("reading capabilities: {e}"))?;
    // The bounding set first: dropping from it needs CAP_SETPCAP, which
    // goes with the permitted set below.
    if have.effective.contains(CapabilitySet::SETPCAP) {
        for n in 0..=last_cap() {
            let c = CapabilitySet::from_bits_retain(1 << n);
            if !keep.contains(c) {
                let _ = rustix::thread::remove_capability_from_bounding_set(c);
            }
        }
    }
    let _ = rustix::thread::clear_ambient_capability_set();
    let want = CapabilitySets {
        effective: have.permitted & keep,
        permitted: have.permitted & keep,
        inheritable: CapabilitySet::empty(),
    };
    if want != have {
        rustix::thread::set_capabilities(None, want).map_err(|e| format!("dropping capabilities: {e}"))?;
    }
    kept()
}

/// The calling thread's capabilities and `no_new_privs`.
pub fn kept() -> Result<Kept, String> {
    let c = rustix::thread::capabilities(None).map_err(|e| format!("reading capabilities: {e}"))?;
    Ok(Kept {
        effective: c.effective.bits(),
        permitted: c.permitted.bits(),
        no_new_privs: rustix::thread::no_new_privs().unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a thread of its own (capabilities are per thread, and the test
    /// harness's others must keep theirs): after the drop it has none but
    /// what it kept, cannot open a raw socket, and cannot get the
    /// capability back.
    #[test]
    fn a_thread_that_dropped_cannot_open_raw_sockets() {
        let root = crate::rundir::euid() == 0;
        let r = std::thread::spawn(|| {
            let k = drop_thread_privileges(&[Need::SysNice]).unwrap();
            let raw = std::net::UdpSocket::bind("127.0.0.1:0").is_ok()
                && rustix::net::socket(
                    rustix::net::AddressFamily::PACKET,
                    rustix::net::SocketType::RAW,
                    None,
                )
                .is_ok();
            let back = rustix::thread::set_capabilities(
                None,
                CapabilitySets {
                    effective: CapabilitySet::NET_RAW,
                    permitted: CapabilitySet::NET_RAW,
                    inheritable: CapabilitySet::empty(),
                },
            )
            .is_ok();
            (k, raw, back)
        })
        .join()
        .unwrap();
        let (k, raw, back) = r;
        assert!(k.no_new_privs);
        assert_eq!(k.effective & !CapabilitySet::SYS_NICE.bits(), 0, "{k:?}");
        assert!(!raw, "a raw socket was opened after the drop");
        assert!(!back, "a dropped capability came back");
        if root {
            assert_eq!(k.effective, CapabilitySet::SYS_NICE.bits(), "{k:?}");
            // This thread, which did not drop, still can.
            assert!(rustix::net::socket(
                rustix::net::AddressFamily::PACKET,
                rustix::net::SocketType::RAW,
                None
            )
            .is_ok());
        }
    }
}
