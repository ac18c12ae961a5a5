//! AF_XDP ports: a [`Device`] on an XDP socket (Linux ≥ 5.4; kernel docs
//! `networking/af_xdp.rst`), the faster alternative to
//! [`crate::afpacket`] that issue 11 asks for.
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
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use qosnet_core::time::Instant;
use qosnet_core::wire::{MacAddr, ETH_HDR};

use crate::device::{Device, DeviceStats};
use crate::{clock, iface, netns};

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

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
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

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BpfInsn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

impl BpfInsn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
        BpfInsn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }
}

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

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// `bpf(cmd, attr, sizeof attr)`, returning a new descriptor.
fn bpf_fd<T>(cmd: libc::c_long, attr: &mut T, what: &str) -> io::Result<OwnedFd> {
    bpf_fd_raw(cmd, attr).map_err(|e| ctx(e, what))
}

/// [`bpf_fd`] with the bare OS error (its errno kept for the caller).
fn bpf_fd_raw<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a live, fully initialised repr(C) prefix of `union
    // bpf_attr`; the kernel reads (and for logs writes through pointers we
    // set up) at most `size_of::<T>()` bytes of it and treats the rest of
    // the union as zero.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor (O_CLOEXEC) we alone own.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// A request to load `insns` (which must outlive the load call) as a
/// program of `prog_type` for `attach`, under the GPL the kernel helpers
/// the programs call require.
fn prog_attr(prog_type: u32, insns: &[BpfInsn], name: &str, attach: u32) -> ProgLoadAttr {
    ProgLoadAttr {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: c"GPL".as_ptr() as u64,
        prog_name: name16(name),
        expected_attach_type: attach,
        ..Default::default()
    }
}

fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, b) in n.iter_mut().zip(s.bytes().take(15)) {
        *d = b;
    }
    n
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
        let mut m = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: XSKMAP_ENTRIES,
            map_name: name16("qosnet_xsks"),
            ..Default::default()
        };
        let map = bpf_fd(BPF_MAP_CREATE, &mut m, "creating the XSKMAP")?;
        let prog = load_program(map.as_raw_fd(), pass_arp)?;
        let try_link = |flags: u32| {
            let mut l = LinkCreateAttr {
                prog_fd: prog.as_raw_fd() as u32,
                target_ifindex: ifindex,
                attach_type: BPF_XDP,
                flags,
            };
            bpf_fd_raw(BPF_LINK_CREATE, &mut l)
        };
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
        let key = queue;
        let val = xsk as u32;
        let mut a = MapElemAttr {
            map_fd: self.map.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            value: &val as *const u32 as u64,
            ..Default::default()
        };
        // SAFETY: `a` is a valid BPF_MAP_UPDATE_ELEM attr whose key and
        // value pointers point to live u32s for the duration of the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_UPDATE_ELEM,
                &mut a as *mut MapElemAttr,
                std::mem::size_of::<MapElemAttr>(),
            )
        };
        if r < 0 {
            return Err(ctx(io::Error::last_os_error(), "adding the socket to the XSKMAP"));
        }
        Ok(())
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
    let mut p = prog_attr(BPF_PROG_TYPE_SCHED_CLS, &insns, "qosnet_stkdrop", BPF_TCX_INGRESS);
    let prog = bpf_fd(BPF_PROG_LOAD, &mut p, "loading the tc ingress drop program")?;
    let mut l = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_TCX_INGRESS,
        flags: 0,
    };
    // The link holds the program; `prog` may close.
    bpf_fd(BPF_LINK_CREATE, &mut l, "attaching at tcx ingress")
}

fn load_program(map_fd: RawFd, pass_arp: bool) -> io::Result<OwnedFd> {
    let insns = redirect_program(map_fd, pass_arp);
    let mut p = prog_attr(BPF_PROG_TYPE_XDP, &insns, "qosnet_xsk", BPF_XDP);
    match bpf_fd(BPF_PROG_LOAD, &mut p, "loading the XDP program") {
        Ok(fd) => Ok(fd),
        Err(e) => {
            // Again with the verifier's log, to say why.
            let mut log = vec![0u8; 16384];
            p.log_level = 1;
            p.log_size = log.len() as u32;
            p.log_buf = log.as_mut_ptr() as u64;
            let r = bpf_fd(BPF_PROG_LOAD, &mut p, "loading the XDP program");
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
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
        let out = std::process::Command::new("ip")
            .args(["link", "set", "dev", ifname, flag, "off"])
            .stdin(std::process::Stdio::null())
            .output()?;
        removed |= out.status.success();
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
/// namespace), if any: `ip -d link show` prints `prog/xdp id N`.
fn attached_prog(ifname: &str) -> io::Result<Option<u32>> {
    let out = std::process::Command::new("ip")
        .args(["-d", "link", "show", "dev", ifname])
        .stdin(std::process::Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ip link show {ifname}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(parse_prog_id(&String::from_utf8_lossy(&out.stdout)))
}

/// `prog/xdp id 42` (or `prog/xdpgeneric id 42`, ...) in `ip -d link`
/// output → 42.
fn parse_prog_id(text: &str) -> Option<u32> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w.starts_with("prog/xdp") && words.next() == Some("id") {
            return words.next()?.parse().ok();
        }
    }
    None
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

/// One single-producer/single-consumer ring shared with the kernel: `D`
/// is its descriptor (a u64 UMEM address for the fill and completion
/// rings, an `xdp_desc` for RX and TX). Indices run freely and wrap at
/// 2³²; a slot is `index & mask`.
struct Ring<D: Copy> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<D>,
    mask: u32,
    /// Our side's index (producer for fill/TX, consumer for RX/completion).
    local: u32,
    /// The other side's index as last read.
    cached: u32,
    /// The mapping to unmap on drop (None: memory owned elsewhere, tests).
    map: Option<(NonNull<u8>, usize)>,
}

impl<D: Copy> Ring<D> {
    /// A ring over `base` laid out per `off`, `size` descriptors.
    ///
    /// # Safety
    /// `base` must point to a mapping that holds the ring at the offsets
    /// given and lives as long as the ring (or is owned by it via `map`).
    unsafe fn new(base: NonNull<u8>, off: &libc::xdp_ring_offset, size: u32, map: Option<usize>) -> Ring<D> {
        let at = |o: u64| NonNull::new_unchecked(base.as_ptr().add(o as usize));
        Ring {
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            descs: at(off.desc).cast(),
            mask: size - 1,
            local: 0,
            cached: 0,
            map: map.map(|len| (base, len)),
        }
    }

    fn size(&self) -> u32 {
        self.mask + 1
    }

    fn atomic(p: NonNull<AtomicU32>) -> &'static AtomicU32 {
        // SAFETY: the index words are 4-byte aligned u32s inside the ring's
        // mapping, shared with the kernel and therefore accessed atomically;
        // the mapping outlives every use (references never escape `self`'s
        // methods).
        unsafe { p.as_ref() }
    }

    fn needs_wakeup(&self) -> bool {
        Self::atomic(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    fn slot(&self, idx: u32) -> *mut D {
        // SAFETY: idx & mask < size: inside the descriptor array.
        unsafe { self.descs.as_ptr().add((idx & self.mask) as usize) }
    }

    // -- producer side (fill, TX) --

    /// Free slots for producing, refreshing the consumer index only when
    /// fewer than `want` are known to be free.
    fn free(&mut self, want: u32) -> u32 {
        let free = self.size() - self.local.wrapping_sub(self.cached);
        if free >= want {
            return free;
        }
        self.cached = Self::atomic(self.consumer).load(Ordering::Acquire);
        self.size() - self.local.wrapping_sub(self.cached)
    }

    /// Write `d` at the next producer slot (the caller checked `free`).
    fn push(&mut self, d: D) {
        // SAFETY: the slot lies between the consumer and producer indices
        // plus free space: the kernel does not read it until we publish.
        unsafe { self.slot(self.local).write(d) };
        self.local = self.local.wrapping_add(1);
    }

    /// Publish produced descriptors to the kernel.
    fn publish(&self) {
        Self::atomic(self.producer).store(self.local, Ordering::Release);
    }

    /// Produced but not yet consumed by the kernel.
    fn outstanding(&mut self) -> u32 {
        self.cached = Self::atomic(self.consumer).load(Ordering::Acquire);
        self.local.wrapping_sub(self.cached)
    }

    // -- consumer side (RX, completion) --

    /// Descriptors ready to consume, up to `max`.
    fn ready(&mut self, max: u32) -> u32 {
        let mut n = self.cached.wrapping_sub(self.local);
        if n == 0 {
            self.cached = Self::atomic(self.producer).load(Ordering::Acquire);
            n = self.cached.wrapping_sub(self.local);
        }
        // A kernel index more than a ring ahead is impossible; never trust
        // it past the ring's size.
        n.min(self.size()).min(max)
    }

    /// The descriptor `i` places after our consumer index.
    fn peek(&self, i: u32) -> D {
        // SAFETY: the kernel published this slot (i < ready()) with a
        // release store we acquired; it does not rewrite it before we
        // release it.
        unsafe { self.slot(self.local.wrapping_add(i)).read() }
    }

    /// Hand `n` consumed descriptors back to the kernel.
    fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        Self::atomic(self.consumer).store(self.local, Ordering::Release);
    }
}

impl<D: Copy> Drop for Ring<D> {
    fn drop(&mut self) {
        if let Some((p, len)) = self.map {
            // SAFETY: unmaps exactly the region mapped for this ring; no
            // reference into it outlives the ring.
            unsafe { libc::munmap(p.as_ptr() as *mut libc::c_void, len) };
        }
    }
}

/// The UMEM mapping.
struct Umem {
    base: NonNull<u8>,
    len: usize,
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: unmaps the UMEM mapped in `AfXdp::open`, after the socket
        // (which pins it) was closed: fields drop after `AfXdp::drop`, and
        // `umem` is declared after `fd`.
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// An AF_XDP port bound to one queue of one interface.
pub struct AfXdp {
    // Field order is drop order: rings unmapped, then the socket closed,
    // then the program detached, then the UMEM unmapped.
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    fd: OwnedFd,
    attach: XdpAttach,
    umem: Umem,
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
    /// The kernel's XDP_STATISTICS at the last read (cumulative).
    kstats: libc::xdp_statistics,
}

// SAFETY: the mappings are owned by this value alone and touched only
// through `&mut self`; moving it to another thread moves that ownership.
unsafe impl Send for AfXdp {}

fn sockopt<T>(fd: &OwnedFd, opt: libc::c_int, val: &T, what: &str) -> io::Result<()> {
    // SAFETY: `val` points to a live T of the size we pass.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(ctx(io::Error::last_os_error(), what))
    } else {
        Ok(())
    }
}

fn map_ring(fd: &OwnedFd, len: usize, pgoff: u64, what: &str) -> io::Result<NonNull<u8>> {
    // SAFETY: maps a ring the kernel allocated for this socket at its
    // documented page offset; the result is checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd.as_raw_fd(),
            pgoff as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(ctx(io::Error::last_os_error(), what));
    }
    Ok(NonNull::new(p as *mut u8).expect("mmap never returns null on success"))
}

/// Map one of the socket's rings and wrap it in a [`Ring`] that owns the
/// mapping.
fn mapped_ring<D: Copy>(
    fd: &OwnedFd,
    off: &libc::xdp_ring_offset,
    size: u32,
    len: usize,
    pgoff: u64,
    what: &str,
) -> io::Result<Ring<D>> {
    let base = map_ring(fd, len, pgoff, what)?;
    // SAFETY: `base` maps `len` bytes of this very ring, laid out at the
    // offsets the kernel reported (XDP_MMAP_OFFSETS) with `size`
    // descriptors of type D; the Ring owns the mapping and unmaps it.
    Ok(unsafe { Ring::new(base, off, size, Some(len)) })
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
        let umem_len = chunks as usize * cfg.frame_size as usize;
        // SAFETY: a fresh private anonymous mapping; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(ctx(io::Error::last_os_error(), "mmap UMEM"));
        }
        let umem = Umem {
            base: NonNull::new(p as *mut u8).expect("mmap never returns null on success"),
            len: umem_len,
        };

        // SAFETY: plain socket(2); checked below.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(ctx(io::Error::last_os_error(), "socket(AF_XDP)"));
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let reg = libc::xdp_umem_reg {
            addr: umem.base.as_ptr() as u64,
            len: umem_len as u64,
            chunk_size: cfg.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        sockopt(&fd, libc::XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        sockopt(&fd, libc::XDP_UMEM_FILL_RING, &ring, "XDP_UMEM_FILL_RING")?;
        sockopt(
            &fd,
            libc::XDP_UMEM_COMPLETION_RING,
            &ring,
            "XDP_UMEM_COMPLETION_RING",
        )?;
        sockopt(&fd, libc::XDP_RX_RING, &ring, "XDP_RX_RING")?;
        sockopt(&fd, libc::XDP_TX_RING, &ring, "XDP_TX_RING")?;

        // SAFETY: plain data; zeroed is a valid value.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `off`.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                &mut off as *mut libc::xdp_mmap_offsets as *mut libc::c_void,
                &mut len,
            )
        };
        if r < 0 {
            return Err(ctx(io::Error::last_os_error(), "XDP_MMAP_OFFSETS"));
        }
        if len as usize != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(io::Error::other(
                "XDP_MMAP_OFFSETS: pre-5.4 kernel layout (no ring flags)",
            ));
        }
        let dlen = std::mem::size_of::<libc::xdp_desc>() as u64;
        let ring_len = |o: &libc::xdp_ring_offset, d: u64| (o.desc + ring as u64 * d) as usize;
        let (rx_len, tx_len) = (ring_len(&off.rx, dlen), ring_len(&off.tx, dlen));
        let (fr_len, cr_len) = (ring_len(&off.fr, 8), ring_len(&off.cr, 8));
        // Each ring is owned by its Ring from the moment it is mapped, so
        // an error below unmaps what was mapped.
        let rx = mapped_ring(
            &fd,
            &off.rx,
            ring,
            rx_len,
            libc::XDP_PGOFF_RX_RING as u64,
            "mmap RX ring",
        )?;
        let tx = mapped_ring(
            &fd,
            &off.tx,
            ring,
            tx_len,
            libc::XDP_PGOFF_TX_RING as u64,
            "mmap TX ring",
        )?;
        let fill = mapped_ring(
            &fd,
            &off.fr,
            ring,
            fr_len,
            libc::XDP_UMEM_PGOFF_FILL_RING,
            "mmap fill ring",
        )?;
        let comp = mapped_ring(
            &fd,
            &off.cr,
            ring,
            cr_len,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            "mmap completion ring",
        )?;

        let attach =
            XdpAttach::attach(ifname, ifindex, cfg.attach, cfg.pass_arp, &mut notes).map_err(|e| {
                if notes.is_empty() {
                    e
                } else {
                    io::Error::new(e.kind(), format!("{e} ({})", notes.join("; ")))
                }
            })?;

        let bind = |flags: u16| {
            let sxdp = libc::sockaddr_xdp {
                sxdp_family: libc::AF_XDP as u16,
                sxdp_flags: flags | libc::XDP_USE_NEED_WAKEUP,
                sxdp_ifindex: ifindex,
                sxdp_queue_id: cfg.queue,
                sxdp_shared_umem_fd: 0,
            };
            // SAFETY: binds our socket to a correctly sized sockaddr_xdp.
            let r = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    &sxdp as *const libc::sockaddr_xdp as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // A socket closed just before may still hold the queue: the kernel
        // releases its buffer pool in deferred work after close(2). Wait
        // for it (bounded: 1 s) rather than fail a quick reopen.
        let bind = |flags: u16| {
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
        let mut zero_copy = false;
        if cfg.zero_copy {
            match bind(libc::XDP_ZEROCOPY) {
                Ok(()) => zero_copy = true,
                Err(e) => notes.push(format!("{ifname}: zero-copy refused ({e}); using copy mode")),
            }
        }
        if !zero_copy {
            bind(libc::XDP_COPY)
                .map_err(|e| ctx(e, &format!("binding AF_XDP to {ifname} queue {}", cfg.queue)))?;
        }
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
            // SAFETY: plain data; zeroed is a valid value.
            kstats: unsafe { std::mem::zeroed() },
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

    fn umem_bytes(&self, addr: u64, len: usize) -> Option<*mut u8> {
        let end = addr.checked_add(len as u64)?;
        if end > self.umem.len as u64 {
            return None;
        }
        // SAFETY: [addr, addr + len) was checked to lie inside the UMEM.
        Some(unsafe { self.umem.base.as_ptr().add(addr as usize) })
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
            // SAFETY: a zero-length sendto on our socket: the kernel sends
            // the TX ring's published descriptors.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            let now_left = self.tx.outstanding();
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // More to send, or the device queue is busy: try again
                    // while the kernel is still taking frames.
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => {
                        if now_left >= left {
                            break;
                        }
                    }
                    _ => {
                        self.stats.tx_errors += 1;
                        return Err(e);
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
        // SAFETY: plain data; zeroed is a valid value.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `st`.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut st as *mut libc::xdp_statistics as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 {
            self.kstats = st;
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
                // SAFETY: a zero-length, non-blocking recvfrom on our
                // socket: wakes the driver to take fill descriptors.
                unsafe {
                    libc::recvfrom(
                        self.fd.as_raw_fd(),
                        std::ptr::null_mut(),
                        0,
                        libc::MSG_DONTWAIT,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
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
            match self.umem_bytes(d.addr, len) {
                Some(p) if len <= max_len && d.addr + len as u64 <= chunk + self.frame_size as u64 => {
                    // SAFETY: the kernel handed this chunk to us through the
                    // RX ring; [addr, addr + len) lies inside it (checked),
                    // and nobody writes it until it is back in the fill ring.
                    let frame = unsafe { std::slice::from_raw_parts(p, len) };
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += len as u64;
                    f(frame, t);
                }
                Some(_) => self.stats.rx_truncated += 1,
                None => self.stats.rx_bad_slot += 1,
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
        let p = self
            .umem_bytes(addr, frame.len())
            .expect("free-list chunks lie inside the UMEM");
        // SAFETY: the chunk is on our free list (not in flight), and the
        // frame fits it (length checked against frame_size above).
        unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), p, frame.len()) };
        self.tx.push(libc::xdp_desc {
            addr,
            len: frame.len() as u32,
            options: 0,
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
    fn bpf_attr_layouts_match_the_uapi() {
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 44);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 16);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(name16("qosnet_xsks_and_more")[15], 0);
    }

    #[test]
    fn prog_ids_parse_from_ip_link_output() {
        let t = "3: eth0@if2: <BROADCAST> mtu 1500 xdp qdisc noqueue\n    link/ether 02:00 \n    prog/xdp id 42 name qosnet_xsk tag abc jited";
        assert_eq!(parse_prog_id(t), Some(42));
        assert_eq!(parse_prog_id("prog/xdpgeneric id 7 "), Some(7));
        assert_eq!(parse_prog_id("3: eth0: <UP> mtu 1500 qdisc noqueue"), None);
        assert_eq!(parse_prog_id("prog/xdp id"), None);
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

    /// A ring over plain memory, laid out as the kernel does: producer,
    /// consumer, flags, then descriptors.
    fn mem_ring(mem: &mut [u64], size: u32) -> Ring<u64> {
        let off = libc::xdp_ring_offset {
            producer: 0,
            consumer: 8,
            flags: 16,
            desc: 24,
        };
        assert!(mem.len() >= 3 + size as usize);
        let base = NonNull::new(mem.as_mut_ptr() as *mut u8).unwrap();
        // SAFETY: `mem` holds the ring and outlives it in each test.
        unsafe { Ring::new(base, &off, size, None) }
    }

    #[test]
    fn rings_wrap_and_never_overrun() {
        let mut mem = vec![0u64; 3 + 8];
        let mut prod = mem_ring(&mut mem, 8);
        // A second view of the same memory plays the kernel's consumer.
        let mut cons = mem_ring(&mut mem, 8);
        // Start near the 2^32 wrap of the free-running indices.
        let start = u32::MAX - 5;
        Ring::<u64>::atomic(prod.producer).store(start, Ordering::Relaxed);
        Ring::<u64>::atomic(prod.consumer).store(start, Ordering::Relaxed);
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
        Ring::<u64>::atomic(cons.producer).store(cons.local.wrapping_add(1000), Ordering::Relaxed);
        cons.cached = cons.local;
        assert_eq!(cons.ready(u32::MAX), 8);
        drop((prod, cons));
    }

    // ---- with root: two veth ends in private namespaces ----

    use crate::afpacket::{AfPacket, AfPacketConfig};

    use crate::testutil::{drain, require_root, test_frame, two_hosts, PrefixGuard};

    /// Return early, saying why, when this kernel has no AF_XDP sockets.
    macro_rules! require_af_xdp {
        () => {
            // SAFETY: plain socket(2), closed at once.
            let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
            if fd < 0 {
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED {}:{}: no AF_XDP sockets here: {}",
                    module_path!(),
                    line!(),
                    io::Error::last_os_error()
                );
                return;
            }
            // SAFETY: `fd` is ours and open.
            unsafe { libc::close(fd) };
        };
    }

    /// `qxd{pid}n{k}`: this module's namespaces, unique per call.
    fn prefix() -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        format!("qxd{}n{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
    }

    fn len_of(seq: usize) -> usize {
        60 + (seq * 7) % 1455 // 60..=1514
    }

    /// Frames AF_XDP → AF_XDP and AF_PACKET → AF_XDP across a veth pair,
    /// every length from 60 to 1514, in order and intact; zero-copy asked
    /// for on veth falls back with a reason; no XDP program is left on
    /// either interface afterwards.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn frames_cross_a_veth_pair_and_nothing_is_left_attached() {
        require_root!();
        require_af_xdp!();
        let prefix = prefix();
        let _guard = PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("", ""));
        let pa = lab.port("a", "b").unwrap().clone();
        let pb = lab.port("b", "a").unwrap().clone();
        let cfg = XdpConfig {
            ring: 256,
            zero_copy: true,
            ..Default::default()
        };
        let mut tx = AfXdp::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
        let mut rx = AfXdp::open_in(&pb.netns, &pb.ifname, &cfg).unwrap();
        eprintln!("tx: {}\nrx: {}", tx.mode(), rx.mode());
        assert_eq!(tx.mac(), pa.mac);
        // veth has no zero-copy: the fallback happened and says why.
        assert!(
            !rx.is_zero_copy() && rx.mode().contains("zero-copy refused"),
            "{}",
            rx.mode()
        );
        assert!(xdp_attached_in(&pb.netns, &pb.ifname).unwrap().is_some());

        // More frames than the rings hold, in chunks: chunks and
        // descriptors must be recycled many times over.
        const N: usize = 3000;
        const CHUNK: usize = 100;
        let mut got = Vec::new();
        for c in 0..N / CHUNK {
            for i in 0..CHUNK {
                let seq = (c * CHUNK + i) as u32;
                tx.send(&test_frame(pa.mac, pb.mac, seq, len_of(seq as usize)))
                    .unwrap();
            }
            tx.flush().unwrap();
            drain(&mut rx, (c + 1) * CHUNK, &mut got);
        }
        assert_eq!(got.len(), N, "received {} of {N} frames", got.len());
        for (i, (seq, f)) in got.iter().enumerate() {
            assert_eq!(*seq as usize, i, "out of order");
            assert_eq!(
                f,
                &test_frame(pa.mac, pb.mac, *seq, len_of(i)),
                "frame {i} corrupted"
            );
        }
        let ts = tx.stats();
        assert_eq!(ts.tx_frames, N as u64);
        assert_eq!((ts.tx_busy, ts.tx_errors, ts.tx_invalid), (0, 0, 0));
        let rs = rx.stats();
        assert_eq!(rs.rx_frames, N as u64);
        assert_eq!((rs.rx_kernel_drops, rs.rx_bad_slot, rs.rx_truncated), (0, 0, 0));
        // Oversized and runt frames are refused and counted.
        assert!(tx.send(&[0u8; 1600]).is_err());
        assert!(tx.send(&[0u8; 10]).is_err());
        assert_eq!(tx.stats().tx_invalid, 2);

        // An AF_PACKET sender on the other end reaches the XDP socket too.
        drop(tx);
        assert_eq!(xdp_attached_in(&pa.netns, &pa.ifname).unwrap(), None);
        let mut ptx = AfPacket::open_in(&pa.netns, &pa.ifname, &AfPacketConfig::default()).unwrap();
        let mut got = Vec::new();
        for c in 0..5 {
            for seq in c * 100..(c + 1) * 100 {
                ptx.send(&test_frame(pa.mac, pb.mac, seq, len_of(seq as usize)))
                    .unwrap();
            }
            drain(&mut rx, (c as usize + 1) * 100, &mut got);
        }
        assert_eq!(got.len(), 500);
        assert!(got.iter().enumerate().all(|(i, (s, _))| *s as usize == i));

        drop(rx);
        assert_eq!(
            xdp_attached_in(&pb.netns, &pb.ifname).unwrap(),
            None,
            "program left attached"
        );
        drop(ptx);
        lab.down().unwrap();
    }

    /// An interface whose XDP hook another live process holds (here a
    /// first qosnet socket, through its XDP link) is refused with a clear
    /// error, the holder's program is not touched, and once the holder is
    /// gone the interface is free again.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn a_second_socket_on_a_busy_interface_fails_cleanly() {
        require_root!();
        require_af_xdp!();
        let prefix = prefix();
        let _guard = PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("", ""));
        let pa = lab.port("a", "b").unwrap().clone();
        let cfg = XdpConfig {
            ring: 64,
            ..Default::default()
        };
        let first = AfXdp::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
        let second = AfXdp::open_in(&pa.netns, &pa.ifname, &cfg);
        let err = second.err().expect("the hook is taken");
        assert!(err.to_string().contains("attaching XDP"), "{err}");
        // The first one is untouched.
        assert!(xdp_attached_in(&pa.netns, &pa.ifname).unwrap().is_some());
        drop(first);
        assert_eq!(xdp_attached_in(&pa.netns, &pa.ifname).unwrap(), None);
        let again = AfXdp::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
        drop(again);
        lab.down().unwrap();
    }

    /// A bpffs mounted on a fresh directory, unmounted and removed on drop.
    struct BpfFs(std::path::PathBuf);

    impl BpfFs {
        fn mount() -> BpfFs {
            let dir = tempfile::Builder::new()
                .prefix("qxd-bpffs-")
                .tempdir()
                .unwrap()
                .keep();
            let st = std::process::Command::new("mount")
                .args(["-t", "bpf", "bpf"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(st.success(), "mounting bpffs on {}", dir.display());
            BpfFs(dir)
        }
    }

    impl Drop for BpfFs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    #[repr(C)]
    #[derive(Default)]
    struct ObjPinAttr {
        pathname: u64,
        bpf_fd: u32,
        file_flags: u32,
    }

    /// A program attached through netlink by another tool (here `ip link
    /// set xdpgeneric pinned`, the way xdp-loader or `ip` leave one behind:
    /// it outlives its loader) is found at open, removed with a note, and
    /// the port works; nothing is left afterwards.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn a_leftover_netlink_program_is_removed_at_open() {
        require_root!();
        require_af_xdp!();
        let prefix = prefix();
        let _guard = PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("", ""));
        let pb = lab.port("b", "a").unwrap().clone();
        let fs = BpfFs::mount();
        {
            let mut m = MapCreateAttr {
                map_type: BPF_MAP_TYPE_XSKMAP,
                key_size: 4,
                value_size: 4,
                max_entries: 4,
                ..Default::default()
            };
            let map = bpf_fd(BPF_MAP_CREATE, &mut m, "map").unwrap();
            let prog = load_program(map.as_raw_fd(), false).unwrap();
            let path = std::ffi::CString::new(fs.0.join("left").to_str().unwrap()).unwrap();
            let mut pin = ObjPinAttr {
                pathname: path.as_ptr() as u64,
                bpf_fd: prog.as_raw_fd() as u32,
                file_flags: 0,
            };
            // SAFETY: a valid BPF_OBJ_PIN attr; the path outlives the call.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    6,
                    &mut pin as *mut ObjPinAttr,
                    std::mem::size_of::<ObjPinAttr>(),
                )
            };
            assert!(r == 0, "BPF_OBJ_PIN: {}", io::Error::last_os_error());
            let out = std::process::Command::new("ip")
                .args([
                    "-n",
                    &pb.netns,
                    "link",
                    "set",
                    "dev",
                    &pb.ifname,
                    "xdpgeneric",
                    "pinned",
                ])
                .arg(fs.0.join("left"))
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        // Our descriptors are closed: the netlink attachment stays.
        let left = xdp_attached_in(&pb.netns, &pb.ifname).unwrap();
        assert!(left.is_some());
        let dev = AfXdp::open_in(
            &pb.netns,
            &pb.ifname,
            &XdpConfig {
                ring: 64,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(
            dev.mode()
                .contains(&format!("removed a leftover XDP program (id {})", left.unwrap())),
            "{}",
            dev.mode()
        );
        assert_ne!(xdp_attached_in(&pb.netns, &pb.ifname).unwrap(), left);
        drop(dev);
        assert_eq!(xdp_attached_in(&pb.netns, &pb.ifname).unwrap(), None);
        drop(fs);
        lab.down().unwrap();
    }

    /// With `pass_arp`, the host's kernel still answers ARP while the
    /// socket takes everything else: a ping from the peer resolves the
    /// address (the kernel replied) and its echo request reaches the socket.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn pass_arp_leaves_arp_to_the_kernel() {
        require_root!();
        require_af_xdp!();
        let prefix = prefix();
        let _guard = PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("198.18.0.1/24", "198.18.0.2/24"));
        let pb = lab.port("b", "a").unwrap().clone();
        let mut rx = AfXdp::open_in(
            &pb.netns,
            &pb.ifname,
            &XdpConfig {
                ring: 64,
                pass_arp: true,
                ..Default::default()
            },
        )
        .unwrap();
        // One ping, 1 s deadline: no reply (the socket took the request).
        let _ = lab.exec("a", &["ping", "-c", "1", "-W", "1", "198.18.0.2"]);
        let mut echo = 0;
        let mut arp = 0;
        rx.recv_batch(64, |f, _| {
            if f.len() > 23 && f[12..14] == [0x08, 0x00] && f[23] == 1 {
                echo += 1;
            }
            if f.len() > 14 && f[12..14] == [0x08, 0x06] {
                arp += 1;
            }
        })
        .unwrap();
        assert_eq!(
            (echo, arp),
            (1, 0),
            "the socket gets the echo request, not the ARP"
        );
        let neigh = lab.exec("a", &["ip", "neigh", "show", "198.18.0.2"]).unwrap();
        let text = String::from_utf8_lossy(&neigh.stdout);
        assert!(
            text.contains(&pb.mac.to_string()),
            "a did not learn b's MAC: {text}"
        );
        drop(rx);
        lab.down().unwrap();
    }
}
