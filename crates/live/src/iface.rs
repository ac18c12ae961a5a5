//! Interface ioctls: index, MAC, MTU and offload switches.
//!
//! These act on the network namespace of the *calling thread* (an ioctl goes
//! through a socket, and a socket lives in the namespace it was opened in),
//! so wrap calls in [`crate::netns::run_in`] to reach a lab interface.
//! Offloads are switched with the legacy `SIOCETHTOOL` commands that the
//! `ethtool` binary also uses, so the lab needs no ethtool package.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use qosnet_core::wire::MacAddr;

/// Longest interface name Linux accepts (IFNAMSIZ − 1).
pub const IFNAME_MAX: usize = 15;

// struct ifreq: a 16-byte name and a 24-byte union on 64-bit Linux.
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: IfReqData,
}

#[repr(C)]
union IfReqData {
    ptr: *mut libc::c_void,
    int: libc::c_int,
    hwaddr: libc::sockaddr,
    _pad: [u8; 24],
}

impl IfReq {
    fn new(ifname: &str) -> io::Result<IfReq> {
        let b = ifname.as_bytes();
        if b.is_empty() || b.len() > IFNAME_MAX || b.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad interface name {ifname:?}"),
            ));
        }
        let mut name = [0u8; 16];
        name[..b.len()].copy_from_slice(b);
        Ok(IfReq {
            name,
            data: IfReqData { _pad: [0; 24] },
        })
    }
}

// struct ethtool_value from <linux/ethtool.h>.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;

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
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ioctl(fd: &OwnedFd, req: libc::c_ulong, ifr: &mut IfReq, what: &str) -> io::Result<()> {
    // SAFETY: `ifr` is a properly sized struct ifreq that lives across the
    // call; any pointer inside it points to memory that also outlives it.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, ifr as *mut IfReq) };
    if r < 0 {
        let e = io::Error::last_os_error();
        let name = String::from_utf8_lossy(&ifr.name);
        return Err(io::Error::new(
            e.kind(),
            format!("{what} on {}: {e}", name.trim_end_matches('\0')),
        ));
    }
    Ok(())
}

fn ethtool(fd: &OwnedFd, ifname: &str, cmd: u32, data: u32) -> io::Result<u32> {
    let mut v = EthtoolValue { cmd, data };
    let mut ifr = IfReq::new(ifname)?;
    ifr.data.ptr = &mut v as *mut EthtoolValue as *mut libc::c_void;
    ioctl(fd, SIOCETHTOOL, &mut ifr, "SIOCETHTOOL")?;
    Ok(v.data)
}

/// Interface index in the calling thread's namespace.
pub fn index(ifname: &str) -> io::Result<u32> {
    let fd = ctl_socket()?;
    let mut ifr = IfReq::new(ifname)?;
    ioctl(&fd, libc::SIOCGIFINDEX as _, &mut ifr, "SIOCGIFINDEX")?;
    // SAFETY: SIOCGIFINDEX filled the int member of the union.
    Ok(unsafe { ifr.data.int } as u32)
}

/// Hardware address of an interface.
pub fn mac(ifname: &str) -> io::Result<MacAddr> {
    let fd = ctl_socket()?;
    let mut ifr = IfReq::new(ifname)?;
    ioctl(&fd, libc::SIOCGIFHWADDR as _, &mut ifr, "SIOCGIFHWADDR")?;
    // SAFETY: SIOCGIFHWADDR filled the sockaddr member of the union.
    let sa = unsafe { ifr.data.hwaddr };
    let mut m = [0u8; 6];
    for (d, s) in m.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(MacAddr(m))
}

/// MTU of an interface (IP bytes, without the Ethernet header).
pub fn mtu(ifname: &str) -> io::Result<u32> {
    let fd = ctl_socket()?;
    let mut ifr = IfReq::new(ifname)?;
    ioctl(&fd, libc::SIOCGIFMTU as _, &mut ifr, "SIOCGIFMTU")?;
    // SAFETY: SIOCGIFMTU filled the int member of the union.
    Ok(unsafe { ifr.data.int } as u32)
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
