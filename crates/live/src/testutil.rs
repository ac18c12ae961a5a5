//! Helpers shared by the tests that need root and namespaces.

use std::sync::atomic::{AtomicU32, Ordering};

/// A namespace prefix unique to this process and call, `qnt{pid}n{k}`, so
/// tests running in parallel (and other runs) never share namespaces.
pub fn test_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("qnt{}n{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Fails the test unless root ([`crate::testkit::require_root`]); the
/// test is also `#[ignore = "needs root: ..."]`.
macro_rules! require_root {
    () => {
        $crate::testkit::require_root()
    };
}
pub(crate) use require_root;

/// The shared namespace guard ([`crate::testkit::Guard`]).
pub use crate::testkit::Guard as PrefixGuard;

/// Two hosts `a` and `b` joined by one veth pair, with the interface
/// addresses `addrs` (`""`: none).
pub fn two_hosts(prefix: &str, addrs: (&str, &str)) -> crate::lab::Lab {
    use crate::lab::{Lab, LabSpec, NodeKind};
    Lab::up(
        &LabSpec::new(prefix)
            .node("a", NodeKind::Host)
            .node("b", NodeKind::Host)
            .link("a", addrs.0, "b", addrs.1),
    )
    .unwrap()
}

/// EtherType of the device tests' frames (IEEE 802 local experimental).
pub const TEST_ETHERTYPE: u16 = 0x88b5;

/// A test frame of `len` bytes (at least 18) numbered `seq`, with a
/// payload that differs per sequence number, so a corrupted or
/// misplaced frame shows.
pub fn test_frame(
    src: qosnet_core::wire::MacAddr,
    dst: qosnet_core::wire::MacAddr,
    seq: u32,
    len: usize,
) -> Vec<u8> {
    let mut f = vec![0u8; len.max(qosnet_core::wire::ETH_HDR + 4)];
    f[0..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(i) as u8;
    }
    f
}

/// The sequence number of a [`test_frame`], `None` for any other frame.
pub fn seq_of(f: &[u8]) -> Option<u32> {
    if f.len() >= 18 && f[12..14] == TEST_ETHERTYPE.to_be_bytes() {
        Some(u32::from_be_bytes(f[14..18].try_into().ok()?))
    } else {
        None
    }
}

/// Receive test frames on `rx` until `want` arrived or 2 s pass.
pub fn drain(rx: &mut impl crate::device::Device, want: usize, got: &mut Vec<(u32, Vec<u8>)>) {
    let t0 = std::time::Instant::now();
    while got.len() < want && t0.elapsed() < std::time::Duration::from_secs(2) {
        let n = rx
            .recv_batch(256, |f, _| {
                if let Some(s) = seq_of(f) {
                    got.push((s, f.to_vec()));
                }
            })
            .unwrap();
        if n == 0 {
            crate::device::wait_readable(&[rx.fd()], Some(qosnet_core::time::Duration::from_millis(10)))
                .unwrap();
        }
    }
}
