//! Raw Ethernet ports on AF_PACKET sockets: the main [`Device`] of live mode.
//!
//! A router port must receive every frame on its interface in batches, with
//! a timestamp, without a system call per frame, and send frames past the
//! interface's qdisc (qosnet paces and schedules output itself). AF_PACKET
//! gives that with:
//! - a memory-mapped receive ring, `PACKET_RX_RING` with **TPACKET_V2**.
//!   V3 was considered and rejected: V3 hands frames to userspace a *block*
//!   at a time, and a partly filled block is only released when its retire
//!   timer fires (1 ms granularity at best), which would add up to a
//!   millisecond of delay to every frame — more than a TDP time frame. V2
//!   releases each frame as soon as it is written;
//! - `PACKET_QDISC_BYPASS` on transmit, with either plain `send(2)` per frame
//!   or a memory-mapped `PACKET_TX_RING` flushed by one `send(2)` per batch
//!   ([`TxMode`]; `send` is the default, see its docs for the measurement);
//! - `PACKET_IGNORE_OUTGOING` plus a per-frame `PACKET_OUTGOING` check, so
//!   frames this host sends on the interface are not taken as received;
//! - promiscuous membership, so a real NIC hands over frames for any MAC
//!   (veth delivers everything anyway).
//!
//! Nothing from the wire can make this code panic or read outside the ring:
//! slot offsets are checked before use, and every anomaly is a counter in
//! [`DeviceStats`].

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use qosnet_core::time::Instant;
use qosnet_core::wire::{MacAddr, ETH_HDR};

use crate::device::{Device, DeviceStats};
use crate::{iface, netns};

/// How an [`AfPacket`] transmits.
///
/// Measured through one veth pair on the project's 2-core machine, 60-byte
/// frames, release build, one sending and one receiving thread
/// (`afpacket::tests::throughput`, ignored by default), frames per second:
///
/// | mode | one frame per flush | 64 frames per flush |
/// |------|--------------------:|--------------------:|
/// | `Send` | ~465 k | ~465 k |
/// | `Ring` | ~440 k | ~590 k (+25 %; ×2 on a machine busy with builds) |
///
/// On veth the receive side runs inside the sender's system call, so a
/// system call per frame is only part of the cost. `Send` is the default:
/// it reports each frame's fate at once (ENOBUFS, EMSGSIZE) and is as fast
/// when frames leave one at a time, as they do from a pacing scheduler.
/// `Ring` wins when a driver sends bursts and flushes once per burst
/// (forwarding benchmarks); the kernel's transmit errors then surface once
/// per flush, not per frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TxMode {
    /// One `send(2)` per frame.
    #[default]
    Send,
    /// Frames are copied into a memory-mapped `PACKET_TX_RING`; `flush`
    /// (or a full ring) sends them all with one system call.
    Ring,
}

/// Ring geometry and socket options of an [`AfPacket`].
#[derive(Clone, Copy, Debug)]
pub struct AfPacketConfig {
    /// Receive ring slots (rounded up to a whole block).
    pub rx_frames: usize,
    /// Transmit ring slots (with [`TxMode::Ring`]).
    pub tx_frames: usize,
    /// Slot size; 0 picks the smallest power of two ≥ 2048 that holds an
    /// MTU-sized frame with a VLAN tag and the ring headers.
    pub frame_size: usize,
    pub tx_mode: TxMode,
    pub promisc: bool,
    pub qdisc_bypass: bool,
    /// Drop every frame arriving on the interface right after this socket
    /// (and any other AF_PACKET tap) got it, before the namespace's IP
    /// stack parses it: a tcx ingress program held by a BPF link that
    /// lives as long as the socket ([`crate::xdp::attach_tc_ingress_drop`]
    /// says why it helps). For ports whose frames belong to a qosnet node
    /// alone (a lab's router namespaces); never for a host port whose
    /// kernel must still answer ARP, nor on a machine's own NIC. Needs
    /// Linux ≥ 6.6 (tcx); where the kernel refuses, the port works as
    /// before and [`AfPacket::stack_drop`] says why.
    pub stack_drop: bool,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        AfPacketConfig {
            rx_frames: 2048,
            tx_frames: 512,
            frame_size: 0,
            tx_mode: TxMode::Send,
            promisc: true,
            qdisc_bypass: true,
            stack_drop: false,
        }
    }
}

// ---- kernel ABI (linux/if_packet.h), spelled out to keep it visible ----

const ETH_P_ALL: u16 = 0x0003;
const TPACKET_V2: libc::c_int = 1;
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_TX_RING: libc::c_int = 13;
const PACKET_LOSS: libc::c_int = 14;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_MR_PROMISC: libc::c_ushort = 1;
const PACKET_OUTGOING: u8 = 4;

const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1 << 0;
const TP_STATUS_COPY: u32 = 1 << 1;
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1 << 0;
const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;

#[repr(C)]
struct TpacketReq {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
}

#[repr(C)]
struct Tpacket2Hdr {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_sec: u32,
    tp_nsec: u32,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
    tp_padding: [u8; 4],
}

#[repr(C)]
struct TpacketStats {
    tp_packets: u32,
    tp_drops: u32,
}

#[repr(C)]
struct PacketMreq {
    mr_ifindex: libc::c_int,
    mr_type: libc::c_ushort,
    mr_alen: libc::c_ushort,
    mr_address: [u8; 8],
}

/// TPACKET_ALIGN(sizeof(struct tpacket2_hdr)): where the sockaddr_ll of an
/// RX slot starts, and where TX frame data starts.
const HDR_ALIGNED: usize = 32;
/// Offset of sll_pkttype inside struct sockaddr_ll.
const SLL_PKTTYPE_OFF: usize = 10;
/// Worst-case offset of frame data in an RX slot: TPACKET_ALIGN(32 + 20 +
/// 16) − 14, rounded up generously.
const RX_DATA_OFF_MAX: usize = 96;
const BLOCK_SIZE: usize = 1 << 16;

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, opt: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live T of the size we pass.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn ctx(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Transmit ring state.
struct TxRing {
    /// Offset of the ring inside the mapping.
    base: usize,
    frames: usize,
    idx: usize,
    /// Frames written since the last flush.
    pending: usize,
}

/// An AF_PACKET port bound to one interface.
pub struct AfPacket {
    fd: OwnedFd,
    ifname: String,
    ifindex: u32,
    mac: MacAddr,
    mtu: u32,
    map: NonNull<u8>,
    map_len: usize,
    frame_size: usize,
    rx_frames: usize,
    rx_idx: usize,
    tx: Option<TxRing>,
    /// For frames whose stripped VLAN tag is put back.
    scratch: Vec<u8>,
    stats: DeviceStats,
    /// The tcx drop program's link ([`AfPacketConfig::stack_drop`]), or
    /// why there is none though it was asked for.
    stack_link: Result<Option<OwnedFd>, String>,
}

// SAFETY: the mapping is owned by this value alone and only touched through
// `&mut self`; moving it to another thread moves that ownership.
unsafe impl Send for AfPacket {}

impl AfPacket {
    /// Open a port on `ifname` in the calling thread's network namespace.
    pub fn open(ifname: &str, cfg: &AfPacketConfig) -> io::Result<AfPacket> {
        let ifindex = iface::index(ifname)?;
        let mac = iface::mac(ifname)?;
        let mtu = iface::mtu(ifname)?;

        // SAFETY: plain socket(2); checked below. Protocol 0: the socket
        // receives nothing until bind() names the interface and protocol,
        // so no frame of another interface slips into the ring.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if raw < 0 {
            return Err(ctx(io::Error::last_os_error(), "socket(AF_PACKET)"));
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sol = libc::SOL_PACKET;
        setsockopt(&fd, sol, PACKET_VERSION, &TPACKET_V2).map_err(|e| ctx(e, "TPACKET_V2"))?;
        // Kernels before 4.20 lack it; the per-frame check still filters.
        let _ = setsockopt(&fd, sol, PACKET_IGNORE_OUTGOING, &1 as &libc::c_int);
        if cfg.qdisc_bypass {
            setsockopt(&fd, sol, PACKET_QDISC_BYPASS, &1 as &libc::c_int)
                .map_err(|e| ctx(e, "PACKET_QDISC_BYPASS"))?;
        }

        let frame_size = if cfg.frame_size > 0 {
            cfg.frame_size
        } else {
            (mtu as usize + ETH_HDR + 4 + RX_DATA_OFF_MAX)
                .next_power_of_two()
                .max(2048)
        };
        if frame_size % 16 != 0 || !frame_size.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame_size must be a power of two",
            ));
        }
        // Blocks hold whole slots, so slot i sits at i * frame_size.
        let block = BLOCK_SIZE.max(frame_size);
        let per_block = block / frame_size;
        let req = |frames: usize| {
            let blocks = frames.max(1).div_ceil(per_block);
            TpacketReq {
                tp_block_size: block as u32,
                tp_block_nr: blocks as u32,
                tp_frame_size: frame_size as u32,
                tp_frame_nr: (blocks * per_block) as u32,
            }
        };
        if cfg.tx_mode == TxMode::Ring {
            // Skip frames the kernel rejects instead of stalling the ring on
            // them; send() validates lengths first, so this is a backstop.
            // (Must precede any ring: the kernel refuses it afterwards.)
            setsockopt(&fd, sol, PACKET_LOSS, &1 as &libc::c_int).map_err(|e| ctx(e, "PACKET_LOSS"))?;
        }
        let rx_req = req(cfg.rx_frames);
        setsockopt(&fd, sol, PACKET_RX_RING, &rx_req).map_err(|e| ctx(e, "PACKET_RX_RING"))?;
        let rx_frames = rx_req.tp_frame_nr as usize;
        let rx_len = rx_frames * frame_size;
        let mut tx = None;
        let mut map_len = rx_len;
        if cfg.tx_mode == TxMode::Ring {
            let tx_req = req(cfg.tx_frames);
            setsockopt(&fd, sol, PACKET_TX_RING, &tx_req).map_err(|e| ctx(e, "PACKET_TX_RING"))?;
            let frames = tx_req.tp_frame_nr as usize;
            tx = Some(TxRing {
                base: rx_len,
                frames,
                idx: 0,
                pending: 0,
            });
            map_len += frames * frame_size;
        }
        // SAFETY: maps the rings the kernel just allocated for this socket
        // (RX first, then TX, as packet_mmap lays them out); checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                fd.as_raw_fd(),
                0,
            )
        };
        // MAP_LOCKED can fail under a low RLIMIT_MEMLOCK; unlocked pages
        // work too, just with a risk of page faults.
        let p = if p == libc::MAP_FAILED {
            // SAFETY: as above, without MAP_LOCKED.
            unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            }
        } else {
            p
        };
        if p == libc::MAP_FAILED {
            return Err(ctx(io::Error::last_os_error(), "mmap packet ring"));
        }
        let map = NonNull::new(p as *mut u8).expect("mmap never returns null on success");
        let mut dev = AfPacket {
            fd,
            ifname: ifname.to_string(),
            ifindex,
            mac,
            mtu,
            map,
            map_len,
            frame_size,
            rx_frames,
            rx_idx: 0,
            tx,
            scratch: Vec::with_capacity(frame_size + 4),
            stats: DeviceStats::default(),
            stack_link: Ok(None),
        };

        // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: binds our socket to a correctly sized sockaddr_ll.
        let r = unsafe {
            libc::bind(
                dev.fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(ctx(io::Error::last_os_error(), &format!("bind to {ifname}")));
        }
        if cfg.promisc {
            let mreq = PacketMreq {
                mr_ifindex: ifindex as i32,
                mr_type: PACKET_MR_PROMISC,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            // The membership ends with the socket: no promiscuous interface
            // is left behind after a crash.
            setsockopt(&dev.fd, sol, PACKET_ADD_MEMBERSHIP, &mreq).map_err(|e| ctx(e, "promiscuous mode"))?;
        }
        if cfg.stack_drop {
            // After bind: the tap is in place before the stack stops seeing
            // frames, so none falls between the two.
            dev.stack_link = crate::xdp::attach_tc_ingress_drop(ifindex)
                .map(Some)
                .map_err(|e| e.to_string());
        }
        dev.stats = DeviceStats::default();
        Ok(dev)
    }

    /// Open a port on `ifname` inside network namespace `netns`; the
    /// calling thread returns to its own namespace afterwards.
    pub fn open_in(netns: &str, ifname: &str, cfg: &AfPacketConfig) -> io::Result<AfPacket> {
        netns::run_in(netns, || AfPacket::open(ifname, cfg))?
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
    pub fn mac(&self) -> MacAddr {
        self.mac
    }
    pub fn mtu(&self) -> u32 {
        self.mtu
    }
    /// Slots in the receive ring.
    pub fn rx_ring_frames(&self) -> usize {
        self.rx_frames
    }
    /// With [`AfPacketConfig::stack_drop`]: `Ok(true)` when the kernel's
    /// IP stack no longer sees the interface's frames, `Err(reason)` when
    /// the drop program could not be attached. `Ok(false)`: not asked for.
    pub fn stack_drop(&self) -> Result<bool, &str> {
        match &self.stack_link {
            Ok(l) => Ok(l.is_some()),
            Err(e) => Err(e),
        }
    }

    fn slot(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset + self.frame_size <= self.map_len);
        // SAFETY: offset + frame_size stays inside the mapping (callers
        // pass i * frame_size for i below the ring's slot count).
        unsafe { self.map.as_ptr().add(offset) }
    }

    fn status(slot: *mut u8) -> &'static AtomicU32 {
        // SAFETY: tp_status is the first, 4-byte-aligned u32 of every slot;
        // the kernel and we hand the slot back and forth through it, so it
        // is accessed atomically. The mapping outlives every use (&self).
        unsafe { &*(slot as *const AtomicU32) }
    }

    /// Frames that fit a TX slot / the interface.
    fn tx_len_ok(&self, len: usize) -> bool {
        len >= ETH_HDR && len <= self.mtu as usize + ETH_HDR + 4
    }

    fn count_send_error(&mut self, e: &io::Error) {
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) => self.stats.tx_busy += 1,
            Some(libc::EMSGSIZE) | Some(libc::EINVAL) => self.stats.tx_invalid += 1,
            _ => self.stats.tx_errors += 1,
        }
    }

    fn send_now(&mut self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: sends `frame.len()` bytes from a live slice on our bound
        // socket; MSG_DONTWAIT keeps it non-blocking.
        let r = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            self.count_send_error(&e);
            return Err(normalise_busy(e));
        }
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        Ok(())
    }

    fn send_ring(&mut self, frame: &[u8]) -> io::Result<()> {
        let (base, frames, idx) = match &self.tx {
            Some(t) => (t.base, t.frames, t.idx),
            None => unreachable!("send_ring without a TX ring"),
        };
        let slot = self.slot(base + idx * self.frame_size);
        let st = Self::status(slot);
        let mut s = st.load(Ordering::Acquire);
        if s != TP_STATUS_AVAILABLE && s != TP_STATUS_WRONG_FORMAT {
            // The kernel still owns the slot: push what is queued, look again.
            let _ = self.flush();
            s = st.load(Ordering::Acquire);
            if s != TP_STATUS_AVAILABLE && s != TP_STATUS_WRONG_FORMAT {
                self.stats.tx_busy += 1;
                return Err(io::Error::from(io::ErrorKind::WouldBlock));
            }
        }
        if s == TP_STATUS_WRONG_FORMAT {
            self.stats.tx_invalid += 1;
        }
        // SAFETY: the slot is ours (status AVAILABLE); header and data stay
        // inside it because frame.len() <= frame_size - HDR_ALIGNED.
        unsafe {
            let hdr = slot as *mut Tpacket2Hdr;
            (*hdr).tp_len = frame.len() as u32;
            (*hdr).tp_snaplen = frame.len() as u32;
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(HDR_ALIGNED), frame.len());
        }
        st.store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        let t = self.tx.as_mut().expect("checked above");
        t.idx = (idx + 1) % frames;
        t.pending += 1;
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        if t.pending >= frames / 2 {
            // Half a ring queued: send rather than let the ring fill.
            return self.flush();
        }
        Ok(())
    }
}

/// EAGAIN and ENOBUFS both mean "full right now" to a caller.
fn normalise_busy(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) => io::Error::new(io::ErrorKind::WouldBlock, e.to_string()),
        _ => e,
    }
}

impl Device for AfPacket {
    fn recv_batch(&mut self, max: usize, mut f: impl FnMut(&[u8], Instant)) -> io::Result<usize> {
        let mut n = 0;
        while n < max {
            let slot = self.slot(self.rx_idx * self.frame_size);
            let st = Self::status(slot);
            let s = st.load(Ordering::Acquire);
            if s & TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: the kernel handed the slot to us (TP_STATUS_USER,
            // acquire-ordered); it does not write it until we hand it back.
            let hdr = unsafe { &*(slot as *const Tpacket2Hdr) };
            // SAFETY: sll_pkttype lies within the slot's sockaddr_ll.
            let pkttype = unsafe { *slot.add(HDR_ALIGNED + SLL_PKTTYPE_OFF) };
            let (mac_off, snap, len) = (hdr.tp_mac as usize, hdr.tp_snaplen as usize, hdr.tp_len);
            let t = Instant(hdr.tp_sec as u64 * 1_000_000_000 + hdr.tp_nsec as u64);
            if pkttype == PACKET_OUTGOING {
                self.stats.rx_outgoing += 1;
            } else if mac_off < HDR_ALIGNED || mac_off + snap > self.frame_size {
                self.stats.rx_bad_slot += 1;
            } else if (snap as u32) < len || s & TP_STATUS_COPY != 0 {
                self.stats.rx_truncated += 1;
            } else {
                // SAFETY: [mac_off, mac_off + snap) was checked to lie
                // inside the slot, which we own until the status store.
                let frame = unsafe { std::slice::from_raw_parts(slot.add(mac_off), snap) };
                self.stats.rx_frames += 1;
                self.stats.rx_bytes += snap as u64;
                if s & TP_STATUS_CSUMNOTREADY != 0 {
                    self.stats.rx_csum_partial += 1;
                }
                if s & TP_STATUS_VLAN_VALID != 0 && snap >= 12 {
                    // The kernel moved the 802.1Q tag to the header; put it
                    // back so the frame is what was on the wire.
                    let tpid = if s & TP_STATUS_VLAN_TPID_VALID != 0 {
                        hdr.tp_vlan_tpid
                    } else {
                        0x8100
                    };
                    self.stats.rx_vlan_restored += 1;
                    self.scratch.clear();
                    self.scratch.extend_from_slice(&frame[..12]);
                    self.scratch.extend_from_slice(&tpid.to_be_bytes());
                    self.scratch.extend_from_slice(&hdr.tp_vlan_tci.to_be_bytes());
                    self.scratch.extend_from_slice(&frame[12..]);
                    f(&self.scratch, t);
                } else {
                    f(frame, t);
                }
            }
            st.store(TP_STATUS_KERNEL, Ordering::Release);
            self.rx_idx = (self.rx_idx + 1) % self.rx_frames;
            n += 1;
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        if !self.tx_len_ok(frame.len()) || frame.len() > self.frame_size - HDR_ALIGNED {
            self.stats.tx_invalid += 1;
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "frame of {} bytes does not fit {} (MTU {})",
                    frame.len(),
                    self.ifname,
                    self.mtu
                ),
            ));
        }
        if self.tx.is_some() {
            self.send_ring(frame)
        } else {
            self.send_now(frame)
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        let Some(t) = self.tx.as_mut() else {
            return Ok(());
        };
        if t.pending == 0 {
            return Ok(());
        }
        t.pending = 0;
        // SAFETY: a zero-length send on our socket: the kernel transmits
        // every TX slot marked SEND_REQUEST.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if r < 0 {
            let e = io::Error::last_os_error();
            self.count_send_error(&e);
            return Err(normalise_busy(e));
        }
        Ok(())
    }

    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn stats(&mut self) -> DeviceStats {
        let mut st = TpacketStats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<TpacketStats>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `st`. Reading
        // PACKET_STATISTICS resets the kernel's counters, hence the sum.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                PACKET_STATISTICS,
                &mut st as *mut TpacketStats as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 {
            self.stats.rx_kernel_drops += st.tp_drops as u64;
        }
        self.stats
    }
}

impl Drop for AfPacket {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mapped in `open`; no reference
        // into it outlives `self`.
        unsafe { libc::munmap(self.map.as_ptr() as *mut libc::c_void, self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::wait_readable;
    use crate::testutil::{drain, require_root, seq_of, test_frame, test_prefix, two_hosts};
    use qosnet_core::time::Duration;

    fn one_way(mode: TxMode) {
        let prefix = test_prefix();
        let lab = two_hosts(&prefix, ("", ""));
        let pa = lab.port("a", "b").unwrap().clone();
        let pb = lab.port("b", "a").unwrap().clone();
        let cfg = AfPacketConfig {
            tx_mode: mode,
            ..Default::default()
        };
        let mut tx = AfPacket::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
        let mut rx = AfPacket::open_in(&pb.netns, &pb.ifname, &cfg).unwrap();
        assert_eq!(tx.mac(), pa.mac);
        assert_eq!(rx.mtu(), 1500);
        const N: usize = 5000;
        const CHUNK: usize = 250;
        let before = crate::clock::realtime_now();
        let mut got = Vec::new();
        for c in 0..N / CHUNK {
            for i in 0..CHUNK {
                let seq = (c * CHUNK + i) as u32;
                let len = 60 + (seq as usize * 7) % 1455; // 60..=1514
                tx.send(&test_frame(pa.mac, pb.mac, seq, len)).unwrap();
            }
            tx.flush().unwrap();
            drain(&mut rx, (c + 1) * CHUNK, &mut got);
        }
        assert_eq!(got.len(), N, "received {} of {N} frames", got.len());
        for (i, (seq, f)) in got.iter().enumerate() {
            assert_eq!(*seq as usize, i, "out of order");
            let len = 60 + (i * 7) % 1455;
            assert_eq!(f, &test_frame(pa.mac, pb.mac, *seq, len), "frame {i} corrupted");
        }
        let ts = tx.stats();
        assert_eq!(ts.tx_frames, N as u64);
        assert_eq!((ts.tx_busy, ts.tx_errors, ts.tx_invalid), (0, 0, 0));
        let rs = rx.stats();
        assert!(rs.rx_frames >= N as u64);
        assert_eq!(rs.rx_kernel_drops, 0);
        // Our own transmissions never show up as received on the sender.
        let mut echoed = 0;
        tx.recv_batch(usize::MAX, |f, _| echoed += seq_of(f).is_some() as usize)
            .unwrap();
        assert_eq!(echoed, 0);
        // Receive timestamps are CLOCK_REALTIME.
        let mut stamp = Instant::ZERO;
        tx.send(&test_frame(pa.mac, pb.mac, 1, 64)).unwrap();
        tx.flush().unwrap();
        wait_readable(&[rx.fd()], Some(Duration::from_secs(1))).unwrap();
        rx.recv_batch(1, |_, t| stamp = t).unwrap();
        let after = crate::clock::realtime_now();
        assert!(
            stamp >= before && stamp <= after,
            "{stamp:?} not in [{before:?}, {after:?}]"
        );
        drop((tx, rx));
        lab.down().unwrap();
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn frames_cross_a_veth_pair_with_send() {
        require_root!();
        one_way(TxMode::Send);
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn frames_cross_a_veth_pair_with_tx_ring() {
        require_root!();
        one_way(TxMode::Ring);
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn garbage_is_counted_not_fatal() {
        use rand::{Rng, SeedableRng};
        require_root!();
        let prefix = test_prefix();
        let lab = two_hosts(&prefix, ("", ""));
        let pa = lab.port("a", "b").unwrap().clone();
        let pb = lab.port("b", "a").unwrap().clone();
        let cfg = AfPacketConfig::default();
        let mut tx = AfPacket::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
        let mut rx = AfPacket::open_in(&pb.netns, &pb.ifname, &cfg).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut sent = 0u64;
        let mut refused = 0u64;
        let mut seen = 0u64;
        let mut bytes_ok = true;
        for burst in 0..20 {
            for _ in 0..100 {
                // Random lengths including runts and over-MTU frames.
                let len = rng.gen_range(0..1600);
                let mut f: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                if len >= 14 && burst % 2 == 0 {
                    // Half the bursts look like IPv4 with garbage inside.
                    f[12] = 0x08;
                    f[13] = 0x00;
                }
                match tx.send(&f) {
                    Ok(()) => sent += 1,
                    Err(_) => refused += 1,
                }
            }
            let t0 = std::time::Instant::now();
            while seen < sent && t0.elapsed() < std::time::Duration::from_secs(1) {
                let n = rx
                    .recv_batch(usize::MAX, |f, _| {
                        seen += 1;
                        bytes_ok &= f.len() >= 14 && f.len() <= 1518;
                    })
                    .unwrap();
                if n == 0 {
                    wait_readable(&[rx.fd()], Some(Duration::from_millis(10))).unwrap();
                }
            }
        }
        let ts = tx.stats();
        assert!(sent > 1000 && refused > 50, "sent {sent} refused {refused}");
        assert_eq!(ts.tx_frames, sent);
        assert_eq!(ts.tx_invalid + ts.tx_busy + ts.tx_errors, refused);
        assert!(bytes_ok);
        // Kernel-generated frames cannot appear (IPv6 off, no addresses), so
        // every accepted garbage frame arrived and nothing else did.
        assert_eq!(seen, sent);
        assert_eq!(rx.stats().rx_frames, sent);
        drop((tx, rx));
        lab.down().unwrap();
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn host_frames_arrive_with_finished_checksums() {
        use qosnet_core::wire::{self, IPPROTO_UDP};
        require_root!();
        let prefix = test_prefix();
        let lab = two_hosts(&prefix, ("198.18.0.1/24", "198.18.0.2/24"));
        let pb = lab.port("b", "a").unwrap().clone();
        let mut rx = AfPacket::open_in(&pb.netns, &pb.ifname, &Default::default()).unwrap();
        let sock = netns::run_in(&lab.netns("a").unwrap(), || {
            std::net::UdpSocket::bind("198.18.0.1:4000")
        })
        .unwrap()
        .unwrap();
        // The kernel ARPs first; nothing listens at b, which is fine.
        for _ in 0..3 {
            sock.send_to(&[0x5a; 333], "198.18.0.2:4001").unwrap();
        }
        let mut udp_ok = 0;
        let t0 = std::time::Instant::now();
        while udp_ok < 3 && t0.elapsed() < std::time::Duration::from_secs(2) {
            wait_readable(&[rx.fd()], Some(Duration::from_millis(50))).unwrap();
            rx.recv_batch(64, |f, _| {
                let Ok(ip) = wire::parse_ipv4(f) else { return };
                if ip.proto != IPPROTO_UDP {
                    return;
                }
                // Pseudo-header + UDP segment must sum to 0xffff: the
                // checksum was finished by the sender, not left to offload.
                let seg = &f[ip.l4_offset()..wire::ETH_HDR + ip.total_len];
                let mut acc = wire::ones_sum(0, &ip.src.octets());
                acc = wire::ones_sum(acc, &ip.dst.octets());
                acc = wire::ones_sum(acc, &[0, IPPROTO_UDP]);
                acc = wire::ones_sum(acc, &(seg.len() as u16).to_be_bytes());
                assert_eq!(wire::ones_sum(acc, seg), 0xffff, "bad UDP checksum");
                udp_ok += 1;
            })
            .unwrap();
        }
        assert_eq!(udp_ok, 3);
        assert_eq!(rx.stats().rx_csum_partial, 0);
        drop(rx);
        lab.down().unwrap();
    }

    /// With `stack_drop`, the socket still gets every frame while the
    /// namespace's kernel sees none (it answers no ARP, so a ping from the
    /// peer fails); once the socket is closed the link and its program are
    /// gone and the same ping is answered.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn stack_drop_hides_frames_from_the_kernel_only_while_open() {
        require_root!();
        let prefix = test_prefix();
        let _guard = crate::testutil::PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("198.18.0.1/24", "198.18.0.2/24"));
        let pb = lab.port("b", "a").unwrap().clone();
        let cfg = AfPacketConfig {
            stack_drop: true,
            ..Default::default()
        };
        let mut rx = AfPacket::open_in(&pb.netns, &pb.ifname, &cfg).unwrap();
        match rx.stack_drop() {
            Ok(on) => assert!(on),
            Err(e) => {
                // tcx needs Linux >= 6.6: say so rather than fail.
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "SKIPPED stack_drop: {e}");
                drop(rx);
                lab.down().unwrap();
                return;
            }
        }
        let ping = |lab: &crate::lab::Lab| {
            // A failing command is an Err of `exec`.
            lab.exec("a", &["ping", "-c", "1", "-W", "1", "198.18.0.2"])
                .is_ok_and(|o| o.status.success())
        };
        assert!(!ping(&lab), "b's kernel answered while the socket was open");
        let mut arp = 0;
        rx.recv_batch(usize::MAX, |f, _| {
            arp += (f.len() > 14 && f[12..14] == [0x08, 0x06]) as usize
        })
        .unwrap();
        assert!(arp >= 1, "the socket did not get a's ARP request");
        drop(rx);
        // The kernel releases a closed link in deferred work: a few tries.
        assert!(
            (0..5).any(|_| ping(&lab)),
            "b's kernel still blind after the socket closed"
        );
        lab.down().unwrap();
    }

    /// Throughput of one veth pair: one thread sends 64-byte frames as fast
    /// as it can for a second, another receives. Prints pps for both
    /// transmit modes. `cargo test --release -p qosnet-live -- --ignored
    /// manual_throughput --nocapture`.
    #[test]
    #[ignore = "benchmark (needs root); run explicitly with --ignored --nocapture"]
    fn manual_throughput() {
        require_root!();
        let runs = [
            (TxMode::Send, 1),
            (TxMode::Ring, 1),
            (TxMode::Send, 64),
            (TxMode::Ring, 64),
        ];
        for (mode, batch) in runs.into_iter().chain(runs) {
            let prefix = test_prefix();
            let lab = two_hosts(&prefix, ("", ""));
            let pa = lab.port("a", "b").unwrap().clone();
            let pb = lab.port("b", "a").unwrap().clone();
            let cfg = AfPacketConfig {
                tx_mode: mode,
                rx_frames: 8192,
                ..Default::default()
            };
            let mut tx = AfPacket::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
            let mut rx = AfPacket::open_in(&pb.netns, &pb.ifname, &cfg).unwrap();
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let stop2 = stop.clone();
            let receiver = std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop2.load(Ordering::Relaxed) {
                    let k = rx.recv_batch(512, |_, _| n += 1).unwrap();
                    if k == 0 {
                        wait_readable(&[rx.fd()], Some(Duration::from_millis(1))).unwrap();
                    }
                }
                rx.recv_batch(usize::MAX, |_, _| n += 1).unwrap();
                (n, rx.stats())
            });
            let frame = test_frame(pa.mac, pb.mac, 0, 60);
            let t0 = std::time::Instant::now();
            let mut busy = 0u64;
            while t0.elapsed() < std::time::Duration::from_secs(1) {
                for _ in 0..batch {
                    if tx.send(&frame).is_err() {
                        busy += 1;
                    }
                }
                let _ = tx.flush();
            }
            let secs = t0.elapsed().as_secs_f64();
            std::thread::sleep(std::time::Duration::from_millis(50));
            stop.store(true, Ordering::Relaxed);
            let (n, rs) = receiver.join().unwrap();
            let ts = tx.stats();
            println!(
                "{mode:?} batch {batch}: sent {:.0} pps, received {:.0} pps, busy {busy}, rx ring drops {}, \
                 lost in veth {}",
                ts.tx_frames as f64 / secs,
                n as f64 / secs,
                rs.rx_kernel_drops,
                ts.tx_frames.saturating_sub(n + rs.rx_kernel_drops),
            );
            drop(tx);
            lab.down().unwrap();
        }
    }
}
