//! Memory shared with the kernel: the AF_PACKET rings, the AF_XDP UMEM and
//! rings. A [`SharedMap`] owns one mapping and hands out only
//! bounds-checked accesses to it: the words both sides hand slots over
//! with are atomics, the rest is read and written as bytes and integers
//! at offsets checked against the mapping's length, so ring code above
//! is safe Rust and a bad offset from the wire or the kernel is a counted
//! error there, never a read outside the mapping.
//!
//! Who may touch which byte at which time is the ring protocols' business
//! (`afpacket`, `xdp`): a slot is read or written only after the atomic
//! status or index that gives it to this side was loaded with Acquire,
//! and handed back with a Release store.

use std::io;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

use rustix::mm::{MapFlags, ProtFlags};

/// One read-write mapping, unmapped on drop.
#[derive(Debug)]
pub struct SharedMap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone; moving it to another
// thread moves that ownership. It is not Sync: writes take `&mut self`,
// but reads through `&self` on two threads at once are not excluded from
// racing with them, so it is not shared.
unsafe impl Send for SharedMap {}

impl SharedMap {
    /// Map `len` bytes of `fd` at `offset` (a packet or XDP socket's
    /// rings), `MAP_SHARED` plus `flags`.
    pub fn of_fd(fd: BorrowedFd<'_>, len: usize, offset: u64, flags: MapFlags) -> io::Result<SharedMap> {
        // SAFETY: a new mapping at an address the kernel picks (null
        // hint), so no existing memory is replaced; the result is owned
        // by the SharedMap, which unmaps exactly it.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | flags,
                fd,
                offset,
            )
        }?;
        Ok(SharedMap::own(p, len))
    }

    /// A private anonymous mapping of `len` zero bytes (the AF_XDP UMEM),
    /// populated at once.
    pub fn anonymous(len: usize) -> io::Result<SharedMap> {
        // SAFETY: as in `of_fd`: a new mapping, owned by the result.
        let p = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::POPULATE,
            )
        }?;
        Ok(SharedMap::own(p, len))
    }

    fn own(p: *mut std::ffi::c_void, len: usize) -> SharedMap {
        SharedMap {
            ptr: NonNull::new(p as *mut u8).expect("mmap never returns null on success"),
            len,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapping's address (for `XDP_UMEM_REG`, which names it).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Panics unless `[off, off + n)` lies inside the mapping and `off` is
    /// aligned to `align`: callers compute offsets from the ring geometry
    /// and check anything that came from outside before.
    #[inline]
    fn check(&self, off: usize, n: usize, align: usize) -> *mut u8 {
        assert!(
            off.checked_add(n).is_some_and(|e| e <= self.len) && off.is_multiple_of(align),
            "offset {off}+{n} outside a {}-byte mapping or misaligned",
            self.len
        );
        // SAFETY: off + n <= len: inside the mapping.
        unsafe { self.ptr.as_ptr().add(off) }
    }

    /// The u32 at `off` (4-byte aligned) as an atomic: the status and
    /// index words the kernel and this process hand slots over with.
    #[inline]
    pub fn atomic_u32(&self, off: usize) -> &AtomicU32 {
        let p = self.check(off, 4, 4);
        // SAFETY: an aligned u32 inside the mapping, which outlives the
        // reference (it borrows self); the kernel accesses these words
        // atomically too.
        unsafe { &*(p as *const AtomicU32) }
    }

    /// The bytes `[off, off + n)`.
    #[inline]
    pub fn bytes(&self, off: usize, n: usize) -> &[u8] {
        let p = self.check(off, n, 1);
        // SAFETY: inside the mapping (checked), which outlives the slice;
        // the ring protocol gives the slot to this side meanwhile.
        unsafe { std::slice::from_raw_parts(p, n) }
    }

    /// Copy `data` to `off`.
    #[inline]
    pub fn write_bytes(&mut self, off: usize, data: &[u8]) {
        let p = self.check(off, data.len(), 1);
        // SAFETY: inside the mapping (checked); `data` is another object.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) }
    }

    #[inline]
    pub fn read_u8(&self, off: usize) -> u8 {
        self.bytes(off, 1)[0]
    }

    #[inline]
    pub fn read_u16(&self, off: usize) -> u16 {
        u16::from_ne_bytes(self.bytes(off, 2).try_into().expect("2 bytes"))
    }

    #[inline]
    pub fn read_u32(&self, off: usize) -> u32 {
        u32::from_ne_bytes(self.bytes(off, 4).try_into().expect("4 bytes"))
    }

    #[inline]
    pub fn read_u64(&self, off: usize) -> u64 {
        u64::from_ne_bytes(self.bytes(off, 8).try_into().expect("8 bytes"))
    }

    #[inline]
    pub fn write_u32(&mut self, off: usize, v: u32) {
        self.write_bytes(off, &v.to_ne_bytes());
    }

    #[inline]
    pub fn write_u64(&mut self, off: usize, v: u64) {
        self.write_bytes(off, &v.to_ne_bytes());
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region this value mapped; every
        // reference into it borrowed `self`, so none outlives it.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr() as *mut std::ffi::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn accesses_are_bounds_checked() {
        let mut m = SharedMap::anonymous(4096).unwrap();
        m.write_u64(8, 0x0102_0304_0506_0708);
        assert_eq!(m.read_u64(8), 0x0102_0304_0506_0708);
        assert_eq!(m.read_u32(8), 0x0506_0708);
        m.atomic_u32(4092).store(7, Ordering::Release);
        assert_eq!(m.read_u32(4092), 7);
        assert!(std::panic::catch_unwind(|| m.bytes(4090, 7).len()).is_err());
        assert!(std::panic::catch_unwind(|| m.atomic_u32(2).load(Ordering::Relaxed)).is_err());
        assert!(std::panic::catch_unwind(|| m.bytes(usize::MAX, 2).len()).is_err());
    }
}
