//! Distributed WFQ on the Switched Two-stage Distributed Router (Khan,
//! Sahoo & Manjunath, seed 003): Tables I–V, paper beside qosnet.
//! Throughput (Tables II–IV) comes from the whole simulator — balancers,
//! forwarders and the T-switch as scenario nodes, DS frames on the switch,
//! per-frame CPU time on the forwarders; fairness (Tables I and V) from the
//! scheduling-level comparison `qosnet_core::stsdr::fairness` (distributed
//! vs qosnet's exact centralised WFQ vs the GPS fluid), which runs the
//! paper's 10⁶ rounds in seconds. Live (`--live`, `live.rs`): L-DS
//! against no WFQ on a lab where every node is its own process.

mod live;
mod sim;
mod trace;

use crate::{Embedded, Experiment};

pub(crate) static SCENARIOS: &[Embedded] = &[
    embed!("scenarios/stsdr/sds.toml"),
    embed!("scenarios/stsdr/mds.toml"),
    embed!("scenarios/stsdr/lds.toml"),
    embed!("scenarios/stsdr/nowfq.toml"),
    embed!("scenarios/stsdr/live.toml"),
    embed!("scenarios/stsdr/live-nowfq.toml"),
    embed!("scenarios/stsdr/kill.toml"),
    embed!("scenarios/stsdr/lds-bulk.toml"),
    embed!("scenarios/stsdr/live-bulk.toml"),
];

pub static EXPERIMENT: Experiment = Experiment {
    names: &["stsdr", "dwfq"],
    description:
        "Distributed WFQ on the STSDR (seed 003): Tables I-V, S-DS/M-DS/L-DS vs no WFQ, fairness vs GPS",
    scenarios: SCENARIOS,
    sim: sim::run,
    // The live run prints its tables; its verdicts are not computed yet.
    live: Some(|o| live::run(o).map(|()| crate::Verdicts::default())),
    stall: false,
};
