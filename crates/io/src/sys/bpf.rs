//! The `bpf(2)` commands qosnet uses (linux/bpf.h), spelled out to keep
//! the ABI visible: create an XSKMAP, put a socket in it, load a program,
//! attach it with a BPF link, pin an object (tests). Neither rustix nor
//! socket2 wraps `bpf(2)`; each function builds its `union bpf_attr`
//! prefix itself, so every pointer the kernel follows is one it made.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_OBJ_PIN: libc::c_long = 6;
const BPF_LINK_CREATE: libc::c_long = 28;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BpfInsn {
    pub code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

impl BpfInsn {
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
        BpfInsn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }
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

#[repr(C)]
#[derive(Default)]
struct ObjPinAttr {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
}

/// A kernel object name: at most 15 bytes and a NUL.
pub fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, b) in n.iter_mut().zip(s.bytes().take(15)) {
        *d = b;
    }
    n
}

/// The attr types this module passes: repr(C) prefixes of `union
/// bpf_attr` made of integers (pointers as u64 it set itself).
trait Attr {}
impl Attr for MapCreateAttr {}
impl Attr for MapElemAttr {}
impl Attr for ProgLoadAttr {}
impl Attr for LinkCreateAttr {}
impl Attr for ObjPinAttr {}

/// `bpf(cmd, attr, sizeof attr)`.
fn bpf<T: Attr>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, fully initialised repr(C) prefix of `union
    // bpf_attr`, built in this module: every pointer in it points to
    // memory that outlives the call (see each caller). The kernel reads
    // (and for logs writes through those pointers) at most
    // `size_of::<T>()` bytes of it and treats the rest of the union as zero.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// [`bpf`] for a command that returns a new descriptor.
fn bpf_fd<T: Attr>(cmd: libc::c_long, attr: &mut T) -> io::Result<OwnedFd> {
    let r = bpf(cmd, attr)?;
    // SAFETY: the kernel returned a new descriptor (O_CLOEXEC) we alone own.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// `BPF_MAP_CREATE` of a map with 4-byte keys and values.
pub fn map_create(map_type: u32, max_entries: u32, name: &str) -> io::Result<OwnedFd> {
    let mut m = MapCreateAttr {
        map_type,
        key_size: 4,
        value_size: 4,
        max_entries,
        map_name: name16(name),
        ..Default::default()
    };
    bpf_fd(BPF_MAP_CREATE, &mut m)
}

/// `BPF_MAP_UPDATE_ELEM`: `map[key] = value` (4-byte key and value).
pub fn map_update(map: BorrowedFd<'_>, key: u32, value: u32) -> io::Result<()> {
    // The attr points at these two locals, alive across the call.
    let mut a = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// `BPF_PROG_LOAD` of `insns` as a program of `prog_type` for `attach`,
/// under the GPL (the kernel helpers the programs call require it). With
/// `log`, the verifier writes its log there (NUL-terminated).
pub fn prog_load(
    prog_type: u32,
    insns: &[BpfInsn],
    name: &str,
    attach: u32,
    log: Option<&mut [u8]>,
) -> io::Result<OwnedFd> {
    const GPL: &CStr = c"GPL";
    // The attr points into `insns`, the static license and `log`, all
    // alive across the call.
    let mut p = ProgLoadAttr {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: GPL.as_ptr() as u64,
        prog_name: name16(name),
        expected_attach_type: attach,
        ..Default::default()
    };
    if let Some(log) = log {
        p.log_level = 1;
        p.log_size = log.len() as u32;
        p.log_buf = log.as_mut_ptr() as u64;
    }
    bpf_fd(BPF_PROG_LOAD, &mut p)
}

/// `BPF_LINK_CREATE`: attach `prog` to `ifindex` at `attach_type`; the
/// program stays exactly as long as the returned link descriptor. The
/// error keeps its errno (EBUSY, EEXIST: the hook is taken).
pub fn link_create(prog: BorrowedFd<'_>, ifindex: u32, attach_type: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut l = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type,
        flags,
    };
    bpf_fd(BPF_LINK_CREATE, &mut l)
}

/// `BPF_OBJ_PIN`: pin `fd` at `path` in a bpffs (tests leave a program
/// attached through netlink this way).
pub fn obj_pin(fd: BorrowedFd<'_>, path: &CStr) -> io::Result<()> {
    // The attr points at `path`, alive across the call.
    let mut a = ObjPinAttr {
        pathname: path.as_ptr() as u64,
        bpf_fd: fd.as_raw_fd() as u32,
        file_flags: 0,
    };
    bpf(BPF_OBJ_PIN, &mut a).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpf_attr_layouts_match_the_uapi() {
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 44);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 16);
        assert_eq!(std::mem::size_of::<ObjPinAttr>(), 16);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::size_of::<BpfInsn>(), 8);
        assert_eq!(name16("qosnet_xsks_and_more")[15], 0);
    }
}
