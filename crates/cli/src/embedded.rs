//! Scenarios compiled into the binary, so `qosnet sim` and
//! `qosnet reproduce` work from any directory on a fresh machine.

pub struct Embedded {
    pub path: &'static str,
    pub text: &'static str,
}

macro_rules! emb {
    ($p:literal) => {
        Embedded {
            path: $p,
            text: include_str!(concat!("../../../", $p)),
        }
    };
}

pub const TDP_ICC2006: [Embedded; 4] = [
    emb!("scenarios/tdp-icc2006/fifo-1002.toml"),
    emb!("scenarios/tdp-icc2006/tdp-1002.toml"),
    emb!("scenarios/tdp-icc2006/fifo-482.toml"),
    emb!("scenarios/tdp-icc2006/tdp-482.toml"),
];

pub const DEGEB: [Embedded; 2] = [
    emb!("scenarios/diffserv-degeb/t1-edge.toml"),
    emb!("scenarios/diffserv-degeb/t4-latency.toml"),
];

/// The default scenario: the ICC 2006 TDP testbed, 1002-byte packets.
pub fn default_scenario() -> &'static Embedded {
    &TDP_ICC2006[1]
}

pub fn find(path: &str) -> Option<&'static Embedded> {
    TDP_ICC2006
        .iter()
        .chain(DEGEB.iter())
        .find(|e| e.path == path || path.ends_with(e.path))
}
