//! Helpers shared by the tests that need root and namespaces.

use std::sync::atomic::{AtomicU32, Ordering};

/// A namespace prefix unique to this process and call, `qnt{pid}n{k}`, so
/// tests running in parallel (and other runs) never share namespaces.
pub fn test_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("qnt{}n{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Return early, saying why, when the test cannot create namespaces.
macro_rules! require_root {
    () => {
        if !$crate::netns::is_root() {
            // Straight to the stderr handle: libtest captures eprintln! of
            // passing tests, and a skip must be visible.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {}:{}: needs root (network namespaces, veth, AF_PACKET)",
                module_path!(),
                line!()
            );
            return;
        }
    };
}
pub(crate) use require_root;

/// The shared namespace guard ([`crate::testkit::Guard`]).
pub use crate::testkit::Guard as PrefixGuard;
