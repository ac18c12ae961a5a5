//! The one home of `unsafe` in qosnet (cf. smoltcp's `phy/sys`, quinn's
//! `quinn-udp`): the system calls that neither rustix nor socket2 wraps,
//! and the memory qosnet shares with the kernel ([`mmap::SharedMap`]).
//! Everything else in the workspace is safe Rust (`forbid(unsafe_code)`
//! in every other crate, `deny(unsafe_code)` in the rest of this one).
//!
//! Each function here is safe to call: it takes only values whose
//! validity it can check or that the kernel checks (descriptors, lengths,
//! plain-data structs it builds itself), and every `unsafe` block says
//! why it is sound in a `SAFETY` comment. What rustix or socket2 can do
//! is done with them, outside this module.

pub mod bpf;
pub mod mmap;

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::process::Command;

/// `setsockopt(fd, level, opt, val, val.len())`: the option's value as
/// the bytes of its C struct (callers lay their structs out with
/// `to_ne_bytes`, so no struct of theirs needs to be plain data here).
pub fn setsockopt(fd: BorrowedFd<'_>, level: i32, opt: i32, val: &[u8]) -> io::Result<()> {
    // SAFETY: `val` is a live buffer of the length passed; the kernel only
    // reads it during the call.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            val.as_ptr() as *const libc::c_void,
            val.len() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `setsockopt` of a C int.
pub fn setsockopt_int(fd: BorrowedFd<'_>, level: i32, opt: i32, val: i32) -> io::Result<()> {
    setsockopt(fd, level, opt, &val.to_ne_bytes())
}

/// `getsockopt(fd, level, opt)` into `buf`; returns the length the kernel
/// wrote.
pub fn getsockopt(fd: BorrowedFd<'_>, level: i32, opt: i32, buf: &mut [u8]) -> io::Result<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf`, a live
    // buffer of that length.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(len as usize)
    }
}

/// `bind(fd, sockaddr_ll { AF_PACKET, protocol, ifindex })`: an AF_PACKET
/// socket bound to one interface (rustix has no link-layer address).
pub fn bind_packet(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: a live sockaddr_ll of the size passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

// ---- interface ioctls (netdevice(7), ethtool) ----

/// `struct ifreq`: a 16-byte name and a 24-byte union on 64-bit Linux.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IfReq {
    pub name: [u8; 16],
    pub data: [u8; 24],
}

impl IfReq {
    /// An ifreq for `ifname` (1 to 15 bytes, no NUL).
    pub fn new(ifname: &str) -> io::Result<IfReq> {
        let b = ifname.as_bytes();
        if b.is_empty() || b.len() > 15 || b.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad interface name {ifname:?}"),
            ));
        }
        let mut name = [0u8; 16];
        name[..b.len()].copy_from_slice(b);
        Ok(IfReq { name, data: [0; 24] })
    }

    /// The union read as a C int (SIOCGIFINDEX, SIOCGIFMTU).
    pub fn int(&self) -> i32 {
        i32::from_ne_bytes(self.data[..4].try_into().expect("4 bytes"))
    }

    /// The union set as a C short (`ifr_flags`, TUNSETIFF).
    pub fn set_short(&mut self, v: i16) {
        self.data[..2].copy_from_slice(&v.to_ne_bytes());
    }

    /// The union read as a `struct sockaddr`'s `sa_data` (SIOCGIFHWADDR).
    pub fn hwaddr(&self) -> [u8; 6] {
        self.data[2..8].try_into().expect("6 bytes")
    }
}

/// An ioctl on a struct ifreq that carries no pointer (SIOCGIFINDEX,
/// SIOCGIFHWADDR, SIOCGIFMTU, TUNSETIFF).
pub fn ioctl_ifreq(fd: BorrowedFd<'_>, req: u64, ifr: &mut IfReq) -> io::Result<()> {
    // SAFETY: `ifr` is a live struct ifreq of the kernel's size; the
    // requests allowed here read and write only inside it.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, ifr as *mut IfReq) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `struct ethtool_value` from <linux/ethtool.h>.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

const SIOCETHTOOL: u64 = 0x8946;

/// A legacy `SIOCETHTOOL` get or set of one value (`ethtool_value`) on
/// `ifname`; returns the value the kernel left.
pub fn ethtool_value(fd: BorrowedFd<'_>, ifname: &str, cmd: u32, data: u32) -> io::Result<u32> {
    let mut v = EthtoolValue { cmd, data };
    let ifr = IfReq::new(ifname)?;
    // struct ifreq with ifr_data pointing to `v`.
    #[repr(C)]
    struct IfReqPtr {
        name: [u8; 16],
        data: *mut EthtoolValue,
        _pad: [u8; 16],
    }
    let mut req = IfReqPtr {
        name: ifr.name,
        data: &mut v,
        _pad: [0; 16],
    };
    // SAFETY: `req` is a live struct ifreq whose ifr_data points to `v`,
    // a live ethtool_value, both outliving the call; ETHTOOL_G*/S* value
    // commands read and write only that struct.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReqPtr) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v.data)
    }
}

// ---- waiting on descriptors ----

/// A C timespec of a core duration.
fn timespec(d: qosnet_core::time::Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: (d.as_nanos() / 1_000_000_000).min(i64::MAX as u64) as libc::time_t,
        tv_nsec: (d.as_nanos() % 1_000_000_000) as libc::c_long,
    }
}

/// `ppoll` for readability of `fds`, with a nanosecond timeout (`None`:
/// forever). Returns how many are readable. Takes raw descriptors (a
/// memory device has -1, which ppoll ignores), which rustix's borrowed
/// ones cannot be.
pub fn ppoll_readable(fds: &[RawFd], timeout: Option<qosnet_core::time::Duration>) -> io::Result<usize> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = timeout.map(timespec);
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfds` and `ts` live across the call and the count matches;
    // a bad descriptor number only sets POLLNVAL.
    let r = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Register raw descriptor `fd` for readability with epoll set `ep`,
/// tagged `data` (a bad number fails with EBADF).
pub fn epoll_add(ep: BorrowedFd<'_>, fd: RawFd, data: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: data,
    };
    // SAFETY: `ev` is a live epoll_event; the kernel copies it.
    if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The epoll events buffer [`epoll_pwait2`] fills.
pub type EpollEvent = libc::epoll_event;

/// An empty [`EpollEvent`].
pub fn epoll_event() -> EpollEvent {
    libc::epoll_event { events: 0, u64: 0 }
}

/// `epoll_pwait2(ep, events, timeout, NULL)`: a wait with a nanosecond
/// timeout (Linux ≥ 5.11; ENOSYS before). rustix rounds to milliseconds
/// unless the whole workspace assumes Linux 5.11.
pub fn epoll_pwait2(
    ep: BorrowedFd<'_>,
    events: &mut [EpollEvent],
    timeout: qosnet_core::time::Duration,
) -> io::Result<usize> {
    let ts = timespec(timeout);
    // SAFETY: epoll_pwait2(epfd, events, maxevents, timeout, NULL, 0):
    // `events` holds `len` entries and `ts` lives across the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait2,
            ep.as_raw_fd(),
            events.as_mut_ptr(),
            events.len() as libc::c_int,
            &ts as *const libc::timespec,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

// ---- scheduling and processes ----

/// The calling thread's scheduling policy and priority.
pub fn sched_get() -> io::Result<(i32, i32)> {
    let mut policy = 0;
    // SAFETY: sched_param is plain data; all-zero is a valid value.
    let mut p: libc::sched_param = unsafe { std::mem::zeroed() };
    // SAFETY: pthread_getschedparam on the calling thread, writing into
    // two live locals.
    let r = unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut p) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok((policy, p.sched_priority))
}

/// Set the calling thread's scheduling policy and priority.
pub fn sched_set(policy: i32, prio: i32) -> io::Result<()> {
    let p = libc::sched_param { sched_priority: prio };
    // SAFETY: pthread_setschedparam on the calling thread, reading a live
    // local.
    let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), policy, &p) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// `sched_setscheduler(pid, policy, prio)` for another thread (a kernel
/// thread the benchmark places); rustix has no sched_setscheduler.
pub fn sched_set_pid(pid: i32, policy: i32, prio: i32) -> io::Result<()> {
    let p = libc::sched_param { sched_priority: prio };
    // SAFETY: reads one live sched_param; acts on a pid only.
    if unsafe { libc::sched_setscheduler(pid, policy, &p) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Make `cmd`'s child receive `signal` when this process dies
/// (`PR_SET_PDEATHSIG` between fork and exec).
pub fn die_with_parent(cmd: &mut Command, signal: rustix::process::Signal) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: it makes one prctl(2)
    // system call (rustix, no allocation, no lock).
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(signal))?;
            Ok(())
        });
    }
}

// ---- UDP receive with metadata ----

/// What [`recv_udp_meta`] read besides the payload.
#[derive(Clone, Copy, Debug, Default)]
pub struct UdpMeta {
    /// SCM_TIMESTAMPNS: the kernel's receive time (CLOCK_REALTIME ns).
    pub rx_ns: Option<u64>,
    /// IP_TOS of the datagram.
    pub tos: Option<u8>,
    /// SO_RXQ_OVFL: the socket's cumulative drop count.
    pub drops: Option<u32>,
}

/// One non-blocking `recvmsg` into `buf` with its control messages
/// (SCM_TIMESTAMPNS, IP_TOS, SO_RXQ_OVFL: rustix parses none of them).
pub fn recv_udp_meta(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, UdpMeta)> {
    // Room for SCM_TIMESTAMPNS, IP_TOS and SO_RXQ_OVFL messages.
    let mut cbuf = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is a valid starting value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: the iovec and the control buffer live across the call and
    // their lengths are given in msg.
    let r = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut meta = UdpMeta::default();
    // SAFETY: the CMSG_* macros walk the control buffer the kernel
    // filled, bounded by msg_controllen; each payload read matches the
    // type the kernel documents for that message, unaligned-safe.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let (lvl, ty) = ((*c).cmsg_level, (*c).cmsg_type);
            let data = libc::CMSG_DATA(c);
            if lvl == libc::SOL_SOCKET && ty == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(data as *const libc::timespec);
                meta.rx_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            } else if lvl == libc::IPPROTO_IP && ty == libc::IP_TOS {
                meta.tos = Some(*data);
            } else if lvl == libc::SOL_SOCKET && ty == libc::SO_RXQ_OVFL {
                meta.drops = Some(std::ptr::read_unaligned(data as *const u32));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((r as usize, meta))
}

/// A NUL-terminated copy of `s` for a system call.
pub fn cstring(s: &str) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(s)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("NUL in {s:?}")))
}

/// The license string BPF programs are loaded under.
pub const GPL: &CStr = c"GPL";
