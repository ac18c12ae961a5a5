//! Interface ioctls: index, MAC, MTU and offload switches.
//!
//! These act on the network namespace of the *calling thread* (an ioctl goes
//! through a socket, and a socket lives in the namespace it was opened in),
//! so wrap calls in [`crate::netns::run_in`] to reach a lab interface.
//! Offloads are switched with the legacy `SIOCETHTOOL` commands that the
//! `ethtool` binary also uses, so the lab needs no ethtool package.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use qosnet_core::wire::MacAddr;

use crate::sys;

/// Longest interface name Linux accepts (IFNAMSIZ − 1).
pub const IFNAME_MAX: usize = 15;

/// The offloads that make AF_PACKET see something other than wire frames:
/// (get, set) ethtool commands. Checksum offload leaves UDP checksums
/// unfinished in frames a host sends, which a userspace router would forward
/// broken; TSO/GSO hand it 64 KiB super-frames; GRO merges frames on receive.
pub const OFFLOADS: &[(&str, u32, u32)] = &[
    ("rx-checksum", 0x14, 0x15),    // ETHTOOL_GRXCSUM / SRXCSUM
    ("tx-checksum", 0x16, 0x17),    // ETHTOOL_GTXCSUM / STXCSUM
    ("scatter-gather", 0x18, 0x19), // ETHTOOL_GSG / SSG
    ("tso", 0x1e, 0x1f),            // ETHTOOL_GTSO / STSO
    ("gso", 0x23, 0x24),            // ETHTOOL_GGSO / SGSO
    ("gro", 0x2b, 0x2c),            // ETHTOOL_GGRO / SGRO
];

/// A datagram socket used only as a handle for interface ioctls.
fn ctl_socket() -> io::Result<OwnedFd> {
    use rustix::net::{socket_with, AddressFamily, SocketFlags, SocketType};
    Ok(socket_with(
        AddressFamily::INET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// The error of request `what` on `ifname`, with both named.
fn ctx(e: io::Error, what: &str, ifname: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what} on {ifname}: {e}"))
}

fn ioctl(fd: &OwnedFd, req: u64, ifname: &str, what: &str) -> io::Result<sys::IfReq> {
    let mut ifr = sys::IfReq::new(ifname)?;
    sys::ioctl_ifreq(fd.as_fd(), req, &mut ifr).map_err(|e| ctx(e, what, ifname))?;
    Ok(ifr)
}

fn ethtool(fd: &OwnedFd, ifname: &str, cmd: u32, data: u32) -> io::Result<u32> {
    sys::ethtool_value(fd.as_fd(), ifname, cmd, data).map_err(|e| ctx(e, "SIOCETHTOOL", ifname))
}

/// Interface index in the calling thread's namespace.
pub fn index(ifname: &str) -> io::Result<u32> {
    let fd = ctl_socket()?;
    rustix::net::netdevice::name_to_index(&fd, ifname).map_err(|e| ctx(e.into(), "SIOCGIFINDEX", ifname))
}

/// Hardware address of an interface.
pub fn mac(ifname: &str) -> io::Result<MacAddr> {
    let fd = ctl_socket()?;
    let ifr = ioctl(&fd, libc::SIOCGIFHWADDR, ifname, "SIOCGIFHWADDR")?;
    Ok(MacAddr(ifr.hwaddr()))
}

/// MTU of an interface (IP bytes, without the Ethernet header).
pub fn mtu(ifname: &str) -> io::Result<u32> {
    let fd = ctl_socket()?;
    let ifr = ioctl(&fd, libc::SIOCGIFMTU, ifname, "SIOCGIFMTU")?;
    Ok(ifr.int() as u32)
}

/// Switch every offload in [`OFFLOADS`] off. Offloads a driver cannot
/// change (EOPNOTSUPP) are skipped: they are then fixed, usually off.
pub fn disable_offloads(ifname: &str) -> io::Result<()> {
    let fd = ctl_socket()?;
    for &(_, _, set) in OFFLOADS {
        match ethtool(&fd, ifname, set, 0) {
            Ok(_) => {}
            // `ioctl` rewraps the error with context: match on the kind.
            Err(e)
                if e.kind() == io::ErrorKind::Unsupported || e.raw_os_error() == Some(libc::EOPNOTSUPP) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Current state of each offload in [`OFFLOADS`]: (name, enabled).
pub fn offloads(ifname: &str) -> io::Result<Vec<(&'static str, bool)>> {
    let fd = ctl_socket()?;
    OFFLOADS
        .iter()
        .map(|&(name, get, _)| Ok((name, ethtool(&fd, ifname, get, 0)? != 0)))
        .collect()
}

/// Switch generic receive offload on or off. On veth, GRO on gives the
/// receiving end a NAPI instance (otherwise only XDP does), which the
/// forwarding benchmark runs threaded to measure its CPU time.
pub fn set_gro(ifname: &str, on: bool) -> io::Result<()> {
    let fd = ctl_socket()?;
    ethtool(&fd, ifname, 0x2c, on as u32).map(|_| ()) // ETHTOOL_SGRO
}
