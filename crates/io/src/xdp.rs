//! AF_XDP ports: a [`Device`] on an XDP socket (Linux ≥ 5.4; kernel docs
//! `networking/af_xdp.rst`), the faster alternative to
//! [`crate::afpacket`] for ports that need more packets per second.
//!
//! An XDP socket receives the frames that an XDP program on its interface
//! redirects to it, and sends frames it writes into shared memory:
//! - the **UMEM**: one anonymous mapping cut into `frame_size` chunks,
//!   registered with the socket. Half the chunks belong to receiving (they
//!   circulate fill ring → kernel → RX ring → [`AfXdp::recv_batch`] → fill
//!   ring), half to sending (free list → TX ring → kernel → completion
//!   ring → free list). Frames are handed up borrowed from their chunk: no
//!   copy and no allocation on receive;
//! - four single-producer/single-consumer **rings** mapped from the
//!   socket, each a power of two of descriptors with a producer and a
//!   consumer index. Every index a ring hands over is checked against the
//!   UMEM before it is used; anything out of range is counted, never read;
//! - the **XDP program**, written here by hand as five eBPF instructions
//!   (no C toolchain, no libbpf): read the frame's `rx_queue_index` from
//!   the `xdp_md` context, `bpf_redirect_map` into an XSKMAP at that key,
//!   and `XDP_PASS` when no socket sits there. It is loaded with the raw
//!   `bpf(2)` system call and attached with `BPF_LINK_CREATE`: a BPF link
//!   lives exactly as long as its file descriptor, so the program leaves
//!   the interface when the [`AfXdp`] is dropped **and** when the process
//!   exits, panics or is killed with SIGKILL — no XDP program is ever left
//!   behind by qosnet. Programs left by other tools (attached through
//!   netlink, which outlive their loader) are found and removed at open,
//!   with a printed note.
//!
//! **Modes.** Native (driver) XDP is tried first and generic (SKB) XDP is
//! the fallback; copy mode is the default bind, zero-copy is attempted when
//! [`XdpConfig::zero_copy`] asks for it and falls back to copy with the
//! kernel's reason ([`AfXdp::mode`] says what was obtained and why). veth
//! has native XDP but no zero-copy: on the lab's veths an `AfXdp` runs
//! native XDP in copy mode.
//!
//! **need_wakeup.** Bound with `XDP_USE_NEED_WAKEUP`, the kernel says in
//! each ring's flags whether it must be woken: the TX ring is kicked with a
//! zero-length `sendto` only when its flag is set (always, in copy mode),
//! and the fill ring with a `recvfrom` only when its flag is set.
//!
//! **Receive time.** AF_XDP carries no kernel timestamp; frames of one
//! batch carry the CLOCK_REALTIME instant at which the batch was taken
//! from the ring (after the kernel put them there: never early).

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::mm::MapFlags;
use rustix::net::xdp::{SocketAddrXdp, SocketAddrXdpFlags, XdpRingOffset, XdpUmemReg, XdpUmemRegFlags};

use qosnet_core::time::Instant;
use qosnet_core::wire::{MacAddr, ETH_HDR};

use crate::device::{Device, DeviceStats};
use crate::sys::bpf::{self, BpfInsn};
use crate::sys::mmap::SharedMap;
use crate::{clock, iface, iproute, netns};

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttachMode {
    /// Native (driver) XDP, generic XDP when the driver refuses.
    #[default]
    Auto,
    /// Native only: fail when the driver has no XDP.
    Native,
    /// Generic (SKB) XDP: works on every interface, slowest.
    Generic,
}

impl AttachMode {
    pub fn name(self) -> &'static str {
        match self {
            AttachMode::Auto => "auto",
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        }
    }
}

impl std::str::FromStr for AttachMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(AttachMode::Auto),
            "native" | "drv" => Ok(AttachMode::Native),
            "generic" | "skb" => Ok(AttachMode::Generic),
            _ => Err(format!("XDP attach mode `{s}`: use auto, native or generic")),
        }
    }
}

/// UMEM and ring geometry of an [`AfXdp`].
#[derive(Clone, Copy, Debug)]
pub struct XdpConfig {
    /// Descriptors per ring (a power of two). The UMEM holds twice as many
    /// chunks: one ring's worth for receiving, one for sending.
    pub ring: u32,
    /// UMEM chunk size: 2048 or 4096 (the kernel also needs 256 bytes of
    /// headroom per chunk in copy mode, so 2048 holds 1792-byte frames).
    pub frame_size: u32,
    /// Ask for zero-copy; copy mode (with the reason printed) when the
    /// driver cannot.
    pub zero_copy: bool,
    pub attach: AttachMode,
    /// The interface queue to bind (veth: 0).
    pub queue: u32,
    /// Leave ARP to the kernel (a host port whose own stack must keep
    /// answering ARP); a router port takes everything (qosnet answers ARP).
    pub pass_arp: bool,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            ring: 2048,
            frame_size: 2048,
            zero_copy: false,
            attach: AttachMode::Auto,
            queue: 0,
            pass_arp: false,
        }
    }
}

impl XdpConfig {
    fn check(&self) -> io::Result<()> {
        let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        if !self.ring.is_power_of_two() || !(64..=65536).contains(&self.ring) {
            return bad(format!(
                "XDP ring size {} must be a power of two in 64..=65536",
                self.ring
            ));
        }
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return bad(format!("XDP frame size {} must be 2048 or 4096", self.frame_size));
        }
        Ok(())
    }
}

// ---- eBPF (linux/bpf.h), spelled out to keep the ABI visible ----

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type` BPF_XDP.
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `bpf_redirect_map(map, key, flags)`: helper 51.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const XDP_PASS: i32 = 2;
/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
/// `offsetof(struct xdp_md, data)` and `data_end`.
const XDP_MD_DATA: i16 = 0;
const XDP_MD_DATA_END: i16 = 4;
/// XSKMAP entries: queues an interface may have that we could bind.
const XSKMAP_ENTRIES: u32 = 64;

// Opcodes: class | size/op | mode/source.
const BPF_LDX_MEM_W: u8 = 0x01 | 0x60; // BPF_LDX | BPF_MEM | BPF_W
const BPF_LD_IMM_DW: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW
const BPF_ALU64_MOV_K: u8 = 0x07 | 0xb0; // BPF_ALU64 | BPF_MOV | BPF_K
const BPF_JMP_CALL: u8 = 0x05 | 0x80;
const BPF_JMP_EXIT: u8 = 0x05 | 0x90;
const BPF_LDX_MEM_H: u8 = 0x01 | 0x60 | 0x08; // BPF_LDX | BPF_MEM | BPF_H
const BPF_ALU64_MOV_X: u8 = 0x07 | 0xb0 | 0x08; // BPF_ALU64 | BPF_MOV | BPF_X
const BPF_ALU64_ADD_K: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
const BPF_JMP_JGT_X: u8 = 0x05 | 0x20 | 0x08; // BPF_JMP | BPF_JGT | BPF_X
const BPF_JMP_JEQ_K: u8 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K

/// The redirect program for an XSKMAP whose descriptor is `map_fd`:
///
/// ```text
/// r2 = *(u32 *)(r1 + 16)      ; ctx->rx_queue_index
/// r1 = map_fd ll              ; the XSKMAP (two slots: a 64-bit load)
/// r3 = XDP_PASS               ; the action when no socket is at r2
/// call bpf_redirect_map
/// exit                        ; r0: XDP_REDIRECT or XDP_PASS
/// ```
///
/// With `pass_arp`, ARP frames (and runts) go to the kernel first, so a
/// host's own stack keeps answering ARP while the socket takes the rest:
///
/// ```text
/// r2 = ctx->data; r3 = ctx->data_end
/// r4 = r2 + 14; if r4 > r3 goto pass          ; the verifier's bounds check
/// r4 = *(u16 *)(r2 + 12); if r4 == ARP goto pass
/// ... the redirect above ...
/// pass: r0 = XDP_PASS; exit
/// ```
fn redirect_program(map_fd: RawFd, pass_arp: bool) -> Vec<BpfInsn> {
    let mut p = Vec::new();
    if pass_arp {
        // EtherType 0x0806 as a native-endian load of its two wire bytes.
        let arp = i32::from(u16::from_ne_bytes([0x08, 0x06]));
        p.extend([
            BpfInsn::new(BPF_LDX_MEM_W, 2, 1, XDP_MD_DATA, 0),
            BpfInsn::new(BPF_LDX_MEM_W, 3, 1, XDP_MD_DATA_END, 0),
            BpfInsn::new(BPF_ALU64_MOV_X, 4, 2, 0, 0),
            BpfInsn::new(BPF_ALU64_ADD_K, 4, 0, 0, ETH_HDR as i32),
            BpfInsn::new(BPF_JMP_JGT_X, 4, 3, 8, 0),
            BpfInsn::new(BPF_LDX_MEM_H, 4, 2, 12, 0),
            BpfInsn::new(BPF_JMP_JEQ_K, 4, 0, 6, arp),
        ]);
    }
    p.extend([
        BpfInsn::new(BPF_LDX_MEM_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        BpfInsn::new(BPF_LD_IMM_DW, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        BpfInsn::new(0, 0, 0, 0, 0),
        BpfInsn::new(BPF_ALU64_MOV_K, 3, 0, 0, XDP_PASS),
        BpfInsn::new(BPF_JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        BpfInsn::new(BPF_JMP_EXIT, 0, 0, 0, 0),
    ]);
    if pass_arp {
        p.extend([
            BpfInsn::new(BPF_ALU64_MOV_K, 0, 0, 0, XDP_PASS),
            BpfInsn::new(BPF_JMP_EXIT, 0, 0, 0, 0),
        ]);
    }
    p
}

/// The XDP program on one interface and its XSKMAP. Dropping it closes the
/// link, which detaches the program (the kernel does the same when the
/// process dies).
struct XdpAttach {
    // Declared first: dropped (detached) before the map and program.
    _link: OwnedFd,
    map: OwnedFd,
    _prog: OwnedFd,
    /// "native" or "generic".
    mode: &'static str,
}

impl XdpAttach {
    /// Load the redirect program and attach it to `ifindex` (in the calling
    /// thread's namespace). `notes` collects the fallbacks taken.
    fn attach(
        ifname: &str,
        ifindex: u32,
        mode: AttachMode,
        pass_arp: bool,
        notes: &mut Vec<String>,
    ) -> io::Result<XdpAttach> {
        let map = xsk_map(XSKMAP_ENTRIES)?;
        let prog = load_program(map.as_raw_fd(), pass_arp)?;
        let try_link = |flags: u32| bpf::link_create(prog.as_fd(), ifindex, BPF_XDP, flags);
        let what = format!("attaching XDP to {ifname}");
        let attempt = |flags: u32,
                       name: &'static str,
                       notes: &mut Vec<String>|
         -> io::Result<(OwnedFd, &'static str)> {
            match try_link(flags) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) || e.raw_os_error() == Some(libc::EEXIST) => {
                    // Something else holds the interface's XDP hook.
                    if remove_leftover(ifname, notes)? {
                        try_link(flags).map(|l| (l, name)).map_err(|e| ctx(e, &what))
                    } else {
                        Err(ctx(e, &what))
                    }
                }
                r => r.map(|l| (l, name)).map_err(|e| ctx(e, &what)),
            }
        };
        let (link, mode) = match mode {
            AttachMode::Native => attempt(XDP_FLAGS_DRV_MODE, "native", notes)?,
            AttachMode::Generic => attempt(XDP_FLAGS_SKB_MODE, "generic", notes)?,
            AttachMode::Auto => match attempt(XDP_FLAGS_DRV_MODE, "native", notes) {
                Ok(x) => x,
                Err(e) => {
                    notes.push(format!("{ifname}: native XDP refused ({e}); using generic XDP"));
                    attempt(XDP_FLAGS_SKB_MODE, "generic", notes)?
                }
            },
        };
        Ok(XdpAttach {
            _link: link,
            map,
            _prog: prog,
            mode,
        })
    }

    /// Put the socket `xsk` at key `queue` of the map.
    fn insert(&self, queue: u32, xsk: RawFd) -> io::Result<()> {
        bpf::map_update(self.map.as_fd(), queue, xsk as u32)
            .map_err(|e| ctx(e, "adding the socket to the XSKMAP"))
    }
}

const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
/// `enum bpf_attach_type` BPF_TCX_INGRESS (Linux ≥ 6.6).
const BPF_TCX_INGRESS: u32 = 46;
/// `TC_ACT_SHOT`: drop the skb.
const TC_ACT_SHOT: i32 = 2;

/// Attach `r0 = TC_ACT_SHOT; exit` at tcx ingress of `ifindex` (in the
/// calling thread's namespace) and return the BPF link: the program stays
/// exactly as long as the descriptor, like the XDP link above.
///
/// Why: a frame arriving on an interface is handed to the AF_PACKET taps
/// (`ptype_all`) *before* tc ingress, and to the IP stack after it
/// (`__netif_receive_skb_core`). A router port's AF_PACKET socket
/// ([`crate::afpacket::AfPacketConfig::stack_drop`]) therefore still gets
/// every frame, while the namespace's own IP stack — which has no address
/// and does not forward, but still parses every frame and looks up a route
/// for it (`ip_rcv`, `ip_route_input_slow`) before dropping it — never
/// sees them. On veth that work runs in the sender's softirq, i.e. in the
/// live router thread when the routers feed each other.
pub(crate) fn attach_tc_ingress_drop(ifindex: u32) -> io::Result<OwnedFd> {
    let insns = [
        BpfInsn::new(BPF_ALU64_MOV_K, 0, 0, 0, TC_ACT_SHOT),
        BpfInsn::new(BPF_JMP_EXIT, 0, 0, 0, 0),
    ];
    let prog = bpf::prog_load(
        BPF_PROG_TYPE_SCHED_CLS,
        &insns,
        "qosnet_stkdrop",
        BPF_TCX_INGRESS,
        None,
    )
    .map_err(|e| ctx(e, "loading the tc ingress drop program"))?;
    // The link holds the program; `prog` may close.
    bpf::link_create(prog.as_fd(), ifindex, BPF_TCX_INGRESS, 0)
        .map_err(|e| ctx(e, "attaching at tcx ingress"))
}

/// An XSKMAP of `entries` queues (4-byte keys and values).
pub fn xsk_map(entries: u32) -> io::Result<OwnedFd> {
    bpf::map_create(BPF_MAP_TYPE_XSKMAP, entries, "qosnet_xsks").map_err(|e| ctx(e, "creating the XSKMAP"))
}

/// Load the redirect program ([`redirect_program`]) for the XSKMAP
/// `map_fd`; on failure the error carries the verifier's log.
pub fn load_program(map_fd: RawFd, pass_arp: bool) -> io::Result<OwnedFd> {
    let insns = redirect_program(map_fd, pass_arp);
    let load = |log| bpf::prog_load(BPF_PROG_TYPE_XDP, &insns, "qosnet_xsk", BPF_XDP, log);
    match load(None) {
        Ok(fd) => Ok(fd),
        Err(e) => {
            // Again with the verifier's log, to say why.
            let mut log = vec![0u8; 16384];
            let r = load(Some(&mut log));
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
            let e = ctx(e, "loading the XDP program");
            r.map_err(|_| io::Error::new(e.kind(), format!("{e}; verifier: {text}")))
        }
    }
}

/// Remove an XDP program that another tool attached to `ifname` through
/// netlink (an XDP link of a live process cannot be removed this way and
/// is left alone). Returns whether one was removed.
fn remove_leftover(ifname: &str, notes: &mut Vec<String>) -> io::Result<bool> {
    let Some(id) = attached_prog(ifname)? else {
        return Ok(false);
    };
    let mut removed = false;
    for flag in ["xdp", "xdpgeneric", "xdpdrv"] {
        removed |= iproute::ip(&["link", "set", "dev", ifname, flag, "off"]).is_ok();
    }
    let gone = attached_prog(ifname)?.is_none();
    if gone && removed {
        notes.push(format!("{ifname}: removed a leftover XDP program (id {id})"));
        Ok(true)
    } else {
        notes.push(format!(
            "{ifname}: XDP program id {id} is attached by a live process (an XDP link); not touched"
        ));
        Ok(false)
    }
}

/// The id of the XDP program on `ifname` (in the calling thread's
/// namespace), if any, from `ip -j -d link show`.
fn attached_prog(ifname: &str) -> io::Result<Option<u32>> {
    let links = iproute::ip_json(&["-d", "link", "show", "dev", ifname])?;
    Ok(links
        .as_array()
        .and_then(|l| l.first())
        .and_then(iproute::xdp_prog_id))
}

/// Whether an XDP program is attached to `ifname` in namespace `netns`
/// (for tests and diagnostics).
pub fn xdp_attached_in(netns: &str, ifname: &str) -> io::Result<Option<u32>> {
    netns::run_in(netns, || attached_prog(ifname))?
}

fn ctx(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

// ---- rings ----

/// A descriptor of a ring, as it sits in the ring's memory.
trait Desc: Copy {
    const SIZE: usize;
    fn read(m: &SharedMap, off: usize) -> Self;
    fn write(self, m: &mut SharedMap, off: usize);
}

/// Fill and completion rings: a UMEM address.
impl Desc for u64 {
    const SIZE: usize = 8;
    fn read(m: &SharedMap, off: usize) -> u64 {
        m.read_u64(off)
    }
    fn write(self, m: &mut SharedMap, off: usize) {
        m.write_u64(off, self)
    }
}

/// RX and TX rings: `struct xdp_desc { __u64 addr; __u32 len; __u32
/// options; }` (options always 0 here: no multi-buffer frames).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameDesc {
    addr: u64,
    len: u32,
}

impl Desc for FrameDesc {
    const SIZE: usize = 16;
    fn read(m: &SharedMap, off: usize) -> FrameDesc {
        FrameDesc {
            addr: m.read_u64(off),
            len: m.read_u32(off + 8),
        }
    }
    fn write(self, m: &mut SharedMap, off: usize) {
        m.write_u64(off, self.addr);
        m.write_u32(off + 8, self.len);
        m.write_u32(off + 12, 0);
    }
}

/// One single-producer/single-consumer ring shared with the kernel: `D`
/// is its descriptor. Indices run freely and wrap at 2³²; a slot is
/// `index & mask`. The ring owns its mapping.
struct Ring<D: Desc> {
    map: SharedMap,
    /// Offsets of the producer, consumer and flags words and of the
    /// descriptor array inside the mapping.
    producer: usize,
    consumer: usize,
    flags: usize,
    descs: usize,
    mask: u32,
    /// Our side's index (producer for fill/TX, consumer for RX/completion).
    local: u32,
    /// The other side's index as last read.
    cached: u32,
    _desc: std::marker::PhantomData<D>,
}

impl<D: Desc> Ring<D> {
    /// A ring of `size` descriptors laid out in `map` per `off`.
    fn new(map: SharedMap, off: &XdpRingOffset, size: u32) -> io::Result<Ring<D>> {
        let flags = off
            .flags
            .ok_or_else(|| io::Error::other("XDP_MMAP_OFFSETS: pre-5.4 kernel layout (no ring flags)"))?;
        let end = off.desc as usize + size as usize * D::SIZE;
        let words = [off.producer, off.consumer, flags];
        if end > map.len() || words.iter().any(|&w| w as usize + 4 > map.len() || w % 4 != 0) {
            return Err(io::Error::other(format!(
                "XDP ring offsets {off:?} do not fit a {}-byte mapping",
                map.len()
            )));
        }
        Ok(Ring {
            map,
            producer: off.producer as usize,
            consumer: off.consumer as usize,
            flags: flags as usize,
            descs: off.desc as usize,
            mask: size - 1,
            local: 0,
            cached: 0,
            _desc: std::marker::PhantomData,
        })
    }

    fn size(&self) -> u32 {
        self.mask + 1
    }

    /// An index word, shared with the kernel and therefore atomic.
    fn word(&self, off: usize) -> &AtomicU32 {
        self.map.atomic_u32(off)
    }

    fn needs_wakeup(&self) -> bool {
        self.word(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    fn slot(&self, idx: u32) -> usize {
        self.descs + (idx & self.mask) as usize * D::SIZE
    }

    // -- producer side (fill, TX) --

    /// Free slots for producing, refreshing the consumer index only when
    /// fewer than `want` are known to be free.
    fn free(&mut self, want: u32) -> u32 {
        let free = self.size() - self.local.wrapping_sub(self.cached);
        if free >= want {
            return free;
        }
        self.cached = self.word(self.consumer).load(Ordering::Acquire);
        self.size() - self.local.wrapping_sub(self.cached)
    }

    /// Write `d` at the next producer slot (the caller checked `free`):
    /// the kernel does not read it until we publish.
    fn push(&mut self, d: D) {
        let off = self.slot(self.local);
        d.write(&mut self.map, off);
        self.local = self.local.wrapping_add(1);
    }

    /// Publish produced descriptors to the kernel.
    fn publish(&self) {
        self.word(self.producer).store(self.local, Ordering::Release);
    }

    /// Produced but not yet consumed by the kernel.
    fn outstanding(&mut self) -> u32 {
        self.cached = self.word(self.consumer).load(Ordering::Acquire);
        self.local.wrapping_sub(self.cached)
    }

    // -- consumer side (RX, completion) --

    /// Descriptors ready to consume, up to `max`.
    fn ready(&mut self, max: u32) -> u32 {
        let mut n = self.cached.wrapping_sub(self.local);
        if n == 0 {
            self.cached = self.word(self.producer).load(Ordering::Acquire);
            n = self.cached.wrapping_sub(self.local);
        }
        // A kernel index more than a ring ahead is impossible; never trust
        // it past the ring's size.
        n.min(self.size()).min(max)
    }

    /// The descriptor `i` places after our consumer index: the kernel
    /// published it (i < ready()) with a release store we acquired, and
    /// does not rewrite it before we release it.
    fn peek(&self, i: u32) -> D {
        D::read(&self.map, self.slot(self.local.wrapping_add(i)))
    }

    /// Hand `n` consumed descriptors back to the kernel.
    fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.word(self.consumer).store(self.local, Ordering::Release);
    }
}

/// The kernel's XDP_STATISTICS at the last read (cumulative since bind).
#[derive(Clone, Copy, Debug, Default)]
struct KernelStats {
    rx_dropped: u64,
    rx_ring_full: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
}

/// An AF_XDP port bound to one queue of one interface.
pub struct AfXdp {
    // Field order is drop order: rings unmapped, then the socket closed,
    // then the program detached, then the UMEM unmapped (the socket pins
    // it until closed).
    rx: Ring<FrameDesc>,
    tx: Ring<FrameDesc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    fd: OwnedFd,
    attach: XdpAttach,
    umem: SharedMap,
    ifname: String,
    ifindex: u32,
    mac: MacAddr,
    mtu: u32,
    frame_size: u32,
    /// Chunks below this address receive; the rest send.
    rx_chunks: u32,
    /// UMEM addresses of the sending chunks not in flight.
    tx_free: Vec<u64>,
    /// TX descriptors published since the last kick.
    tx_pending: u32,
    zero_copy: bool,
    mode: String,
    stats: DeviceStats,
    kstats: KernelStats,
}

fn sockopt(r: rustix::io::Result<()>, what: &str) -> io::Result<()> {
    r.map_err(|e| ctx(e.into(), what))
}

/// Map one of the socket's rings at its documented page offset and wrap
/// it in a [`Ring`] that owns the mapping.
fn mapped_ring<D: Desc>(
    fd: &OwnedFd,
    off: &XdpRingOffset,
    size: u32,
    pgoff: u64,
    what: &str,
) -> io::Result<Ring<D>> {
    let len = off.desc as usize + size as usize * D::SIZE;
    let map = SharedMap::of_fd(fd.as_fd(), len, pgoff, MapFlags::POPULATE).map_err(|e| ctx(e, what))?;
    Ring::new(map, off, size)
}

/// The four rings of an XDP socket whose UMEM and ring sizes are set.
type Rings = (Ring<FrameDesc>, Ring<FrameDesc>, Ring<u64>, Ring<u64>);

/// Set up the UMEM and rings of `fd`: register `umem` in `frame_size`
/// chunks, size all four rings to `ring` and map them. Each ring is owned
/// by its [`Ring`] from the moment it is mapped, so an error unmaps what
/// was mapped.
fn umem_and_rings(fd: &OwnedFd, umem: &SharedMap, frame_size: u32, ring: u32) -> io::Result<Rings> {
    use rustix::net::sockopt as so;
    let reg = XdpUmemReg {
        addr: umem.addr(),
        len: umem.len() as u64,
        chunk_size: frame_size,
        headroom: 0,
        flags: XdpUmemRegFlags::empty(),
        tx_metadata_len: 0,
    };
    sockopt(so::set_xdp_umem_reg(fd, reg), "XDP_UMEM_REG")?;
    sockopt(so::set_xdp_umem_fill_ring_size(fd, ring), "XDP_UMEM_FILL_RING")?;
    sockopt(
        so::set_xdp_umem_completion_ring_size(fd, ring),
        "XDP_UMEM_COMPLETION_RING",
    )?;
    sockopt(so::set_xdp_rx_ring_size(fd, ring), "XDP_RX_RING")?;
    sockopt(so::set_xdp_tx_ring_size(fd, ring), "XDP_TX_RING")?;
    let off = so::xdp_mmap_offsets(fd).map_err(|e| ctx(e.into(), "XDP_MMAP_OFFSETS"))?;
    let rx = mapped_ring(fd, &off.rx, ring, libc::XDP_PGOFF_RX_RING as u64, "mmap RX ring")?;
    let tx = mapped_ring(fd, &off.tx, ring, libc::XDP_PGOFF_TX_RING as u64, "mmap TX ring")?;
    let fill = mapped_ring(
        fd,
        &off.fr,
        ring,
        libc::XDP_UMEM_PGOFF_FILL_RING,
        "mmap fill ring",
    )?;
    let comp = mapped_ring(
        fd,
        &off.cr,
        ring,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        "mmap completion ring",
    )?;
    Ok((rx, tx, fill, comp))
}

/// Bind `fd` to `ifindex` queue `queue`: zero-copy when asked and the
/// driver can, else copy mode. Returns whether zero-copy was obtained.
fn bind_queue(
    fd: &OwnedFd,
    ifname: &str,
    ifindex: u32,
    queue: u32,
    zero_copy: bool,
    notes: &mut Vec<String>,
) -> io::Result<bool> {
    let bind = |flags: SocketAddrXdpFlags| {
        let addr = SocketAddrXdp::new(flags | SocketAddrXdpFlags::XDP_USE_NEED_WAKEUP, ifindex, queue);
        rustix::net::bind(fd, &addr).map_err(io::Error::from)
    };
    // A socket closed just before may still hold the queue: the kernel
    // releases its buffer pool in deferred work after close(2). Wait for
    // it (bounded: 1 s) rather than fail a quick reopen.
    let bind = |flags: SocketAddrXdpFlags| {
        let mut r = bind(flags);
        for _ in 0..50 {
            match &r {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    r = bind(flags);
                }
                _ => break,
            }
        }
        r
    };
    if zero_copy {
        match bind(SocketAddrXdpFlags::XDP_ZEROCOPY) {
            Ok(()) => return Ok(true),
            Err(e) => notes.push(format!("{ifname}: zero-copy refused ({e}); using copy mode")),
        }
    }
    bind(SocketAddrXdpFlags::XDP_COPY)
        .map_err(|e| ctx(e, &format!("binding AF_XDP to {ifname} queue {queue}")))?;
    Ok(false)
}

impl AfXdp {
    /// Open a port on `ifname` in the calling thread's network namespace.
    pub fn open(ifname: &str, cfg: &XdpConfig) -> io::Result<AfXdp> {
        cfg.check()?;
        let ifindex = iface::index(ifname)?;
        let mac = iface::mac(ifname)?;
        let mtu = iface::mtu(ifname)?;
        let mut notes = Vec::new();
        // Copy mode puts XDP_PACKET_HEADROOM (256) before each frame.
        if mtu as usize + ETH_HDR + 4 + 256 > cfg.frame_size as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{ifname}: MTU {mtu} does not fit a {}-byte UMEM chunk; use frame_size 4096",
                    cfg.frame_size
                ),
            ));
        }
        let ring = cfg.ring;
        let chunks = 2 * ring;
        let umem = SharedMap::anonymous(chunks as usize * cfg.frame_size as usize)
            .map_err(|e| ctx(e, "mmap UMEM"))?;
        let fd = rustix::net::socket_with(
            rustix::net::AddressFamily::XDP,
            rustix::net::SocketType::RAW,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| ctx(e.into(), "socket(AF_XDP)"))?;
        let (rx, tx, fill, comp) = umem_and_rings(&fd, &umem, cfg.frame_size, ring)?;
        let attach =
            XdpAttach::attach(ifname, ifindex, cfg.attach, cfg.pass_arp, &mut notes).map_err(|e| {
                if notes.is_empty() {
                    e
                } else {
                    io::Error::new(e.kind(), format!("{e} ({})", notes.join("; ")))
                }
            })?;
        let zero_copy = bind_queue(&fd, ifname, ifindex, cfg.queue, cfg.zero_copy, &mut notes)?;
        attach.insert(cfg.queue, fd.as_raw_fd())?;
        let mode = format!(
            "af_xdp {} XDP, {}{}",
            attach.mode,
            if zero_copy { "zero-copy" } else { "copy mode" },
            if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join("; "))
            }
        );
        let mut dev = AfXdp {
            rx,
            tx,
            fill,
            comp,
            fd,
            attach,
            umem,
            ifname: ifname.to_string(),
            ifindex,
            mac,
            mtu,
            frame_size: cfg.frame_size,
            rx_chunks: ring,
            tx_free: (ring..chunks)
                .rev()
                .map(|c| c as u64 * cfg.frame_size as u64)
                .collect(),
            tx_pending: 0,
            zero_copy,
            mode,
            stats: DeviceStats::default(),
            kstats: KernelStats::default(),
        };
        // Every receiving chunk starts in the fill ring.
        for c in 0..ring {
            dev.fill.push(c as u64 * cfg.frame_size as u64);
        }
        dev.fill.publish();
        Ok(dev)
    }

    /// Open a port on `ifname` inside network namespace `netns`; the
    /// calling thread returns to its own namespace afterwards.
    pub fn open_in(netns: &str, ifname: &str, cfg: &XdpConfig) -> io::Result<AfXdp> {
        netns::run_in(netns, || AfXdp::open(ifname, cfg))?
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
    /// What was obtained: `af_xdp native XDP, copy mode`, with the reasons
    /// of any fallback.
    pub fn mode(&self) -> &str {
        &self.mode
    }
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }
    /// Where the XDP program runs: `native` or `generic`.
    pub fn xdp_mode(&self) -> &'static str {
        self.attach.mode
    }

    /// Whether `[addr, addr + len)` lies inside the UMEM.
    fn in_umem(&self, addr: u64, len: usize) -> bool {
        addr.checked_add(len as u64)
            .is_some_and(|end| end <= self.umem.len() as u64)
    }

    /// Chunk base of a UMEM address (aligned chunk mode).
    fn chunk_of(&self, addr: u64) -> u64 {
        addr & !(self.frame_size as u64 - 1)
    }

    /// Take finished transmissions back onto the free list.
    fn reclaim(&mut self) {
        let n = self.comp.ready(u32::MAX);
        for i in 0..n {
            let a = self.chunk_of(self.comp.peek(i));
            let c = a / self.frame_size as u64;
            // Only chunks of the sending half, and never more of them than
            // exist: a bad address is counted, not used.
            if c >= self.rx_chunks as u64
                && c < 2 * self.rx_chunks as u64
                && self.tx_free.len() < self.rx_chunks as usize
            {
                self.tx_free.push(a);
            } else {
                self.stats.tx_errors += 1;
            }
        }
        if n > 0 {
            self.comp.release(n);
        }
    }

    /// Wake the kernel to send what the TX ring holds. In copy mode one
    /// call sends a bounded batch (32 frames on Linux 6.x) and answers
    /// EAGAIN when more is left, so it is repeated while the kernel makes
    /// progress.
    fn kick_tx(&mut self) -> io::Result<()> {
        if self.tx_pending == 0 {
            return Ok(());
        }
        let mut left = self.tx.outstanding();
        // Bounded: each round sends at least one frame or stops.
        for _ in 0..=self.tx.size() {
            if left == 0 || !self.tx.needs_wakeup() {
                break;
            }
            // A zero-length send on our socket: the kernel sends the TX
            // ring's published descriptors.
            let r = rustix::net::send(&self.fd, &[], rustix::net::SendFlags::DONTWAIT);
            let now_left = self.tx.outstanding();
            if let Err(e) = r {
                match e {
                    // More to send, or the device queue is busy: try again
                    // while the kernel is still taking frames.
                    rustix::io::Errno::AGAIN | rustix::io::Errno::BUSY | rustix::io::Errno::NOBUFS => {
                        if now_left >= left {
                            break;
                        }
                    }
                    _ => {
                        self.stats.tx_errors += 1;
                        return Err(e.into());
                    }
                }
            }
            left = now_left;
        }
        self.tx_pending = left;
        Ok(())
    }

    /// Read the kernel's XDP_STATISTICS (cumulative since bind).
    fn read_kernel_stats(&mut self) {
        if let Ok(st) = rustix::net::sockopt::xdp_statistics(&self.fd) {
            self.kstats = KernelStats {
                rx_dropped: st.rx_dropped,
                rx_ring_full: st.rx_ring_full.unwrap_or(0),
                rx_invalid_descs: st.rx_invalid_descs,
                tx_invalid_descs: st.tx_invalid_descs,
            };
        }
    }
}

impl Device for AfXdp {
    fn recv_batch(&mut self, max: usize, mut f: impl FnMut(&[u8], Instant)) -> io::Result<usize> {
        if self.tx_pending > 0 {
            // Frames a flush left in the TX ring (the device was busy):
            // the driver polls here every step, flushes only after sends.
            let _ = self.kick_tx();
        }
        let n = self.rx.ready(max.min(u32::MAX as usize) as u32);
        if n == 0 {
            if self.fill.needs_wakeup() {
                // A zero-length, non-blocking receive on our socket wakes
                // the driver to take fill descriptors.
                let _ = rustix::net::recv(&self.fd, &mut [0u8; 0][..], rustix::net::RecvFlags::DONTWAIT);
            }
            return Ok(0);
        }
        let t = clock::now();
        // The fill ring holds every receiving chunk, so it has room for
        // each chunk this batch returns.
        let room = self.fill.free(n);
        let mut given = 0;
        for i in 0..n {
            let d = self.rx.peek(i);
            let len = d.len as usize;
            let max_len = self.mtu as usize + ETH_HDR + 4;
            let chunk = self.chunk_of(d.addr);
            if !self.in_umem(d.addr, len) {
                self.stats.rx_bad_slot += 1;
            } else if len <= max_len && d.addr + len as u64 <= chunk + self.frame_size as u64 {
                // The kernel handed this chunk to us through the RX ring;
                // nobody writes it until it is back in the fill ring.
                let frame = self.umem.bytes(d.addr as usize, len);
                self.stats.rx_frames += 1;
                self.stats.rx_bytes += len as u64;
                f(frame, t);
            } else {
                self.stats.rx_truncated += 1;
            }
            if chunk < self.rx_chunks as u64 * self.frame_size as u64 && given < room {
                self.fill.push(chunk);
                given += 1;
            } else {
                // Not one of ours to recycle (never seen): lost to the ring.
                self.stats.rx_bad_slot += 1;
            }
        }
        self.rx.release(n);
        self.fill.publish();
        Ok(n as usize)
    }

    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        let max_len = (self.mtu as usize + ETH_HDR + 4).min(self.frame_size as usize);
        if frame.len() < ETH_HDR || frame.len() > max_len {
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
        if self.tx_free.is_empty() || self.tx.free(1) == 0 {
            self.reclaim();
            if self.tx_free.is_empty() || self.tx.free(1) == 0 {
                // Push what is queued and look once more.
                let _ = self.kick_tx();
                self.reclaim();
                if self.tx_free.is_empty() || self.tx.free(1) == 0 {
                    self.stats.tx_busy += 1;
                    return Err(io::Error::from(io::ErrorKind::WouldBlock));
                }
            }
        }
        let addr = self.tx_free.pop().expect("checked non-empty");
        // The chunk is on our free list (not in flight), and the frame
        // fits it (length checked against frame_size above).
        self.umem.write_bytes(addr as usize, frame);
        self.tx.push(FrameDesc {
            addr,
            len: frame.len() as u32,
        });
        self.tx.publish();
        self.tx_pending += 1;
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += frame.len() as u64;
        if self.tx_pending >= self.tx.size() / 4 {
            // A quarter of the ring queued: send rather than let it fill.
            return self.flush();
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = self.kick_tx();
        self.reclaim();
        r
    }

    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn stats(&mut self) -> DeviceStats {
        self.read_kernel_stats();
        let k = &self.kstats;
        let mut s = self.stats;
        // Frames the kernel could not put in the RX ring (full, or no fill
        // chunk) or dropped as invalid.
        s.rx_kernel_drops = k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs;
        s.tx_invalid += k.tx_invalid_descs;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_program_encodes_as_the_kernel_expects() {
        let p = redirect_program(7, false);
        assert_eq!(p.len(), 6);
        // ldxw r2, [r1+16]
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x61, 0x12, 16));
        // lddw r1, map_fd (pseudo map fd in src_reg), second half zero
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0x18, 0x11, 7));
        assert_eq!(p[2], BpfInsn::new(0, 0, 0, 0, 0));
        // mov64 r3, XDP_PASS; call 51; exit
        assert_eq!((p[3].code, p[3].regs, p[3].imm), (0xb7, 0x03, 2));
        assert_eq!((p[4].code, p[4].imm), (0x85, 51));
        assert_eq!(p[5].code, 0x95);
        assert_eq!(std::mem::size_of::<BpfInsn>(), 8);

        // With the ARP pass: both jumps land on `r0 = XDP_PASS; exit`.
        let q = redirect_program(7, true);
        assert_eq!(q.len(), 15);
        let pass = q.len() - 2;
        for (i, insn) in q.iter().enumerate() {
            if insn.code == BPF_JMP_JGT_X || insn.code == BPF_JMP_JEQ_K {
                assert_eq!(i + 1 + insn.off as usize, pass, "jump at {i}");
            }
        }
        assert_eq!((q[pass].code, q[pass].regs, q[pass].imm), (0xb7, 0x00, 2));
        assert_eq!(q[pass + 1].code, 0x95);
        assert_eq!(&q[7..13], &p[..]);
        // The bounds check precedes the EtherType load (the verifier's rule).
        assert_eq!((q[4].code, q[5].code, q[5].off), (0x2d, 0x69, 12));
    }

    #[test]
    fn config_is_checked() {
        assert!(XdpConfig::default().check().is_ok());
        for bad in [
            XdpConfig {
                ring: 1000,
                ..Default::default()
            },
            XdpConfig {
                ring: 32,
                ..Default::default()
            },
            XdpConfig {
                frame_size: 3000,
                ..Default::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert_eq!("skb".parse::<AttachMode>(), Ok(AttachMode::Generic));
        assert!("fast".parse::<AttachMode>().is_err());
    }

    /// Two views of one ring in shared memory (a memfd mapped twice),
    /// laid out as the kernel does: producer, consumer, flags, then
    /// descriptors. One plays this process, the other the kernel.
    fn mem_rings(size: u32) -> (Ring<u64>, Ring<u64>) {
        use rustix::fs::{ftruncate, memfd_create, MemfdFlags};
        let fd = memfd_create("ring", MemfdFlags::CLOEXEC).unwrap();
        ftruncate(&fd, 4096).unwrap();
        let off = XdpRingOffset {
            producer: 0,
            consumer: 8,
            flags: Some(16),
            desc: 24,
        };
        let view = || SharedMap::of_fd(fd.as_fd(), 4096, 0, MapFlags::empty()).unwrap();
        (
            Ring::new(view(), &off, size).unwrap(),
            Ring::new(view(), &off, size).unwrap(),
        )
    }

    #[test]
    fn rings_wrap_and_never_overrun() {
        let (mut prod, mut cons) = mem_rings(8);
        // Start near the 2^32 wrap of the free-running indices.
        let start = u32::MAX - 5;
        prod.word(prod.producer).store(start, Ordering::Relaxed);
        prod.word(prod.consumer).store(start, Ordering::Relaxed);
        prod.local = start;
        prod.cached = start;
        cons.local = start;
        cons.cached = start;
        let mut next = 0u64;
        let mut expect = 0u64;
        for round in 0..50u32 {
            let free = prod.free(8);
            assert!(free <= 8);
            for _ in 0..free.min(1 + round % 8) {
                prod.push(next);
                next += 1;
            }
            prod.publish();
            let n = cons.ready(1 + round % 5);
            for i in 0..n {
                assert_eq!(cons.peek(i), expect);
                expect += 1;
            }
            cons.release(n);
            assert!(prod.outstanding() <= 8);
        }
        assert!(expect > 40, "only {expect} went through");
        // A kernel index claiming more than a ring is never trusted.
        cons.word(cons.producer)
            .store(cons.local.wrapping_add(1000), Ordering::Relaxed);
        cons.cached = cons.local;
        assert_eq!(cons.ready(u32::MAX), 8);
        drop((prod, cons));
    }
}
