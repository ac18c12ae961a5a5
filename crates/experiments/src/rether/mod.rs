//! RETHER (Venkatramani & Chiueh, seed 002): a software timed-token
//! protocol over shared Ethernet. `qosnet reproduce rether` runs, in the
//! simulator, Table 1 (late video frames on CSMA/CD, then under RETHER),
//! Table 2 (token passing overhead, qosnet's model beside the paper's),
//! and Figures 4, 5, 6, 8 and 9 (switch time, NRT delay against session
//! size, number of sessions and network size, fast and slow hardware),
//! and §2.5's bridged segments (delay against segments crossed).
//! The paper's numbers are the `[paper]` tables of its scenarios.
//! `--live` runs Figure 7 (qosnet sim beside qosnet live) and Table 2 with
//! qosnet's live per-hop token times ([`live`]).

mod live;
mod sim;

use crate::{Embedded, Experiment};

pub(crate) static SCENARIOS: &[Embedded] = &[
    embed!("scenarios/rether/table1-csma.toml"),
    embed!("scenarios/rether/two-mpeg.toml"),
    embed!("scenarios/rether/live.toml"),
];

pub static EXPERIMENT: Experiment = Experiment {
    names: &["rether", "rether-1995"],
    description: "RETHER (seed 002): Table 1 (late frames, CSMA/CD vs RETHER), Table 2, Figures 4-6, 8, 9",
    scenarios: SCENARIOS,
    sim: sim::run,
    live: Some(live::run),
};
