//! TAP devices: a [`Device`] whose far side is this host's own kernel IP
//! stack. A node that owns a TAP interface receives every frame the
//! kernel sends out of it (ARP, IP from ordinary sockets: ping, iperf3,
//! TCP) and whatever the node sends on it the kernel receives as if from
//! a wire. RETHER stations use this to carry their host's ordinary TCP/IP
//! traffic through the token protocol, unchanged and unaware.
//!
//! The TAP is created with `IFF_TAP | IFF_NO_PI` (plain Ethernet frames,
//! no packet-info header) on `/dev/net/tun`, non-blocking. Creating one
//! needs CAP_NET_ADMIN; the interface lives in the namespace the process
//! is in when it opens it ([`Tap::open_in`] enters one for the call).
//! Frames longer than the buffer are counted as truncated, never delivered
//! cut short.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use qosnet_core::time::Instant;

use crate::clock;
use crate::device::{Device, DeviceStats};
use crate::{netns, sys};

const TUNSETIFF: u64 = 0x4004_54ca;
const IFF_TAP: i16 = 0x0002;
const IFF_NO_PI: i16 = 0x1000;
/// Largest frame read: a jumbo frame with a VLAN tag.
const BUF: usize = 9216 + 18;

/// A TAP interface opened by this process.
pub struct Tap {
    file: File,
    name: String,
    buf: Vec<u8>,
    stats: DeviceStats,
}

impl Tap {
    /// Create (or attach to) the TAP interface `name` in the current
    /// namespace. The interface is down until someone sets it up.
    pub fn open(name: &str) -> io::Result<Tap> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("interface name `{name}` must be 1 to 15 bytes"),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")?;
        let mut req = sys::IfReq::new(name)?;
        req.set_short(IFF_TAP | IFF_NO_PI);
        sys::ioctl_ifreq(file.as_fd(), TUNSETIFF, &mut req)?;
        Ok(Tap {
            file,
            name: name.to_string(),
            buf: vec![0; BUF],
            stats: DeviceStats::default(),
        })
    }

    /// Create the TAP in network namespace `ns` (the descriptor keeps
    /// working from any namespace afterwards).
    pub fn open_in(ns: &str, name: &str) -> io::Result<Tap> {
        netns::run_in(ns, || Tap::open(name))?
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Device for Tap {
    fn recv_batch(&mut self, max: usize, mut f: impl FnMut(&[u8], Instant)) -> io::Result<usize> {
        let mut n = 0;
        while n < max {
            match self.file.read(&mut self.buf) {
                Ok(0) => break,
                Ok(len) if len >= BUF => {
                    self.stats.rx_truncated += 1;
                }
                Ok(len) => {
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += len as u64;
                    f(&self.buf[..len], clock::now());
                    n += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return if n > 0 { Ok(n) } else { Err(e) },
            }
        }
        Ok(n)
    }
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        match self.file.write(frame) {
            Ok(n) if n == frame.len() => {
                self.stats.tx_frames += 1;
                self.stats.tx_bytes += frame.len() as u64;
                Ok(())
            }
            // A TAP write takes a frame whole or not at all; anything
            // else is an error, never a frame sent cut short.
            Ok(_) => {
                self.stats.tx_errors += 1;
                Err(io::Error::other("short write to TAP"))
            }
            Err(e) => {
                match e.kind() {
                    io::ErrorKind::WouldBlock => self.stats.tx_busy += 1,
                    io::ErrorKind::InvalidInput => self.stats.tx_invalid += 1,
                    _ => self.stats.tx_errors += 1,
                }
                Err(e)
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
    fn stats(&mut self) -> DeviceStats {
        self.stats
    }
}
