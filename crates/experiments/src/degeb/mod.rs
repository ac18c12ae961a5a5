//! DEGEB, the DiffServ edge and core routers of seed 004: Table 4-1 (an
//! edge router's policed bandwidth and loss per class under a 100 Mb/s CBR
//! offer), Table 4-3 (TOS bytes sent and received, in and out of profile)
//! and Figure 4 (round-trip time of EF and BE through 3, 4 and 5 routers,
//! with and without best-effort congestion, 64 to 1500-byte packets). The
//! paper's numbers are the `[paper]` tables of the two scenarios
//! ([`paper`]); the live measurements in labs are in [`lab`].

pub mod lab;
mod live;
mod paper;
mod sim;

use crate::{Embedded, Experiment};

/// T1/T3 (Tables 4-1, 4-3), then T4 (Figure 4).
pub(crate) static SCENARIOS: &[Embedded] = &[
    embed!("scenarios/diffserv-degeb/t1-edge.toml"),
    embed!("scenarios/diffserv-degeb/t4-latency.toml"),
];

pub static EXPERIMENT: Experiment = Experiment {
    names: &["degeb", "diffserv"],
    description:
        "DiffServ DEGEB (seed 004): Tables 4-1 and 4-3 (edge policing, re-marking), Figure 4 (EF vs BE RTT)",
    scenarios: SCENARIOS,
    sim: sim::run,
    // The live run prints its tables; its verdicts are not computed yet.
    live: Some(|o| live::run(o).map(|()| crate::Verdicts::default())),
    stall: false,
};

/// T4's paths through 3, 4 and 5 routers (`--set flow.*.path=...`).
const PATHS: [(&str, &str); 3] = [
    ("3", "[\"Ei\", \"C1\", \"Ee\"]"),
    ("4", "[\"Ei\", \"C1\", \"C2\", \"Ee\"]"),
    ("5", "[\"Ei\", \"C1\", \"C2\", \"C3\", \"Ee\"]"),
];

/// T4's probe sizes (IP bytes): its probe flows are `ef{size}`, `be{size}`.
const SIZES: [u32; 6] = [64, 128, 256, 512, 1024, 1500];
