//! The [`Device`] trait: a frame-level network port that a live driver
//! polls, whatever is behind it — an AF_PACKET socket on a NIC or veth
//! ([`crate::afpacket`]), an AF_XDP socket ([`crate::xdp`]; the per-port
//! choice is [`crate::netdev`]), a TAP device that exchanges frames with this
//! host's own kernel IP stack ([`crate::tap`]), or memory ([`MemDevice`],
//! for tests). Any node runs on any device (cf. smoltcp's `phy::Device`).

use std::io;
use std::os::fd::RawFd;

use qosnet_core::time::{Duration, Instant};
use serde::Serialize;

use crate::{clock, sys};

/// A frame-level network port that a driver polls.
///
/// `recv_batch` takes a closure rather than returning frames so the frame
/// can be borrowed straight from the receive ring: no copy, no allocation.
pub trait Device {
    /// Hand up to `max` waiting frames to `f` with their receive time (the
    /// kernel's timestamp, CLOCK_REALTIME). Never blocks; returns how many
    /// frames were handed over.
    fn recv_batch(&mut self, max: usize, f: impl FnMut(&[u8], Instant)) -> io::Result<usize>;
    /// Queue or send one Ethernet frame (no FCS). `WouldBlock` means the
    /// interface or ring is full right now: the frame was not sent and the
    /// caller may retry or drop it (it is counted as `tx_busy` either way).
    fn send(&mut self, frame: &[u8]) -> io::Result<()>;
    /// Push queued frames to the interface (no-op when `send` already did).
    fn flush(&mut self) -> io::Result<()>;
    /// A descriptor that polls readable when frames are waiting.
    fn fd(&self) -> RawFd;
    /// Counters so far (refreshes the kernel's drop count).
    fn stats(&mut self) -> DeviceStats;
}

/// Every way a port can lose or refuse a frame, plus the totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DeviceStats {
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Frames the kernel dropped because the receive ring was full.
    pub rx_kernel_drops: u64,
    /// Frames longer than a ring slot, not delivered.
    pub rx_truncated: u64,
    /// Frames this host sent on the interface, seen and skipped.
    pub rx_outgoing: u64,
    /// Ring slots with impossible offsets (never seen; guards the reads).
    pub rx_bad_slot: u64,
    /// Frames whose VLAN tag the kernel had stripped and we put back.
    pub rx_vlan_restored: u64,
    /// Frames delivered with an unfinished L4 checksum (the sender's
    /// checksum offload is on: forwarded as is, its receiver will drop it).
    /// The lab switches offloads off; this counter catches set-ups that
    /// did not.
    pub rx_csum_partial: u64,
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Sends refused because the interface or ring was full.
    pub tx_busy: u64,
    /// Frames too short or too long for the interface.
    pub tx_invalid: u64,
    /// Any other transmit error.
    pub tx_errors: u64,
}

/// Wait until one of `fds` is readable or `timeout` passes (`None`: wait
/// indefinitely). Returns how many are readable; EINTR counts as zero.
pub fn wait_readable(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<usize> {
    match sys::ppoll_readable(fds, timeout) {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        r => r,
    }
}

/// Waits, like [`wait_readable`], on a set of descriptors fixed for its
/// life, through epoll: the set is registered once, and a wait costs what
/// is ready, not what is registered. `ppoll` polls every descriptor on
/// every call (`fdget`, `sock_poll`, `packet_poll` and its ring lookup per
/// port): about 13 % of the live router thread running the four routers
/// of the ICC 2006 Table II testbed (~16 ports), which sleeps until shortly
/// before each of its many deadlines. The timeout has nanosecond
/// resolution (`epoll_pwait2`, Linux ≥ 5.11); where epoll or
/// `epoll_pwait2` is missing, it falls back to `ppoll`.
pub struct Waiter {
    ep: Option<std::os::fd::OwnedFd>,
    fds: Vec<RawFd>,
    events: Vec<sys::EpollEvent>,
}

impl Waiter {
    pub fn new(fds: &[RawFd]) -> Waiter {
        Waiter {
            ep: Self::register(fds),
            fds: fds.to_vec(),
            events: vec![sys::epoll_event(); fds.len().max(1)],
        }
    }

    fn register(fds: &[RawFd]) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        let ep = rustix::event::epoll::create(rustix::event::epoll::CreateFlags::CLOEXEC).ok()?;
        for (i, &fd) in fds.iter().enumerate() {
            // The descriptors are the caller's devices', which outlive the
            // waiter.
            sys::epoll_add(ep.as_fd(), fd, i as u64).ok()?;
        }
        Some(ep)
    }

    /// Whether waits go through epoll (else `ppoll`).
    pub fn is_epoll(&self) -> bool {
        self.ep.is_some()
    }

    /// Wait until a descriptor is readable or `timeout` passes. Returns
    /// how many are readable; EINTR counts as zero.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<usize> {
        use std::os::fd::AsFd;
        let Some(ep) = &self.ep else {
            return wait_readable(&self.fds, Some(timeout));
        };
        match sys::epoll_pwait2(ep.as_fd(), &mut self.events, timeout) {
            Ok(n) => Ok(n),
            Err(e) => match e.raw_os_error() {
                Some(libc::EINTR) => Ok(0),
                Some(libc::ENOSYS) => {
                    self.ep = None;
                    wait_readable(&self.fds, Some(timeout))
                }
                _ => Err(e),
            },
        }
    }
}

/// An in-memory device for tests and examples: frames sent on one end of a
/// [`mem_pair`] arrive at the other, stamped with the time they were sent
/// (a wire of no length: the stamp does not depend on when the reader
/// gets round to polling).
pub struct MemDevice {
    rx: Queue,
    tx: Queue,
    stats: DeviceStats,
}

type Queue = std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<(Instant, Vec<u8>)>>>;

/// Two connected in-memory devices.
pub fn mem_pair() -> (MemDevice, MemDevice) {
    let a: Queue = Default::default();
    let b: Queue = Default::default();
    (
        MemDevice {
            rx: a.clone(),
            tx: b.clone(),
            stats: DeviceStats::default(),
        },
        MemDevice {
            rx: b,
            tx: a,
            stats: DeviceStats::default(),
        },
    )
}

impl Device for MemDevice {
    fn recv_batch(&mut self, max: usize, mut f: impl FnMut(&[u8], Instant)) -> io::Result<usize> {
        let mut n = 0;
        while n < max {
            let Some((t, fr)) = self.rx.lock().unwrap_or_else(|p| p.into_inner()).pop_front() else {
                break;
            };
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += fr.len() as u64;
            f(&fr, t);
            n += 1;
        }
        Ok(n)
    }
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        self.tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back((clock::now(), frame.to_vec()));
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn fd(&self) -> std::os::fd::RawFd {
        -1
    }
    fn stats(&mut self) -> DeviceStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiter times out with nothing readable, after about its timeout
    /// (not the millisecond-rounded one of `epoll_wait`), and returns at
    /// once when a registered descriptor becomes readable.
    #[test]
    fn waiter_times_out_and_wakes_on_data() {
        use std::os::fd::AsRawFd;
        let (r, w) =
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK)
                .unwrap();
        let mut waiter = Waiter::new(&[r.as_raw_fd()]);
        assert!(waiter.is_epoll());
        let t0 = std::time::Instant::now();
        assert_eq!(waiter.wait(Duration::from_micros(300)).unwrap(), 0);
        let took = t0.elapsed();
        assert!(took >= std::time::Duration::from_micros(300), "{took:?}");
        assert_eq!(rustix::io::write(&w, b"x").unwrap(), 1);
        assert_eq!(waiter.wait(Duration::from_secs(5)).unwrap(), 1);
        // Level-triggered: still readable until read.
        assert_eq!(waiter.wait(Duration::from_secs(5)).unwrap(), 1);
        drop(waiter);
    }
}
