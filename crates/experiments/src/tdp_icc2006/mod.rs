//! The ICC 2006 TDP router testbed (seeds 000/001, §IV): four routers in
//! full mesh at 100 Mb/s, five CBR flows looping round their rings, FIFO
//! against Time-Driven Priority, 1002- and 482-byte packets. Tables I and
//! II (end-to-end jitter per flow) and the link loads of §IV-B; the
//! paper's numbers are the `[paper]` tables of the four scenarios.

mod live;
mod sim;
mod verdicts;

use crate::{Embedded, Experiment};

/// FIFO and TDP for 1002-byte packets (Table I), then for 482-byte ones
/// (Table II).
pub(crate) static SCENARIOS: &[Embedded] = &[
    embed!("scenarios/tdp-icc2006/fifo-1002.toml"),
    embed!("scenarios/tdp-icc2006/tdp-1002.toml"),
    embed!("scenarios/tdp-icc2006/fifo-482.toml"),
    embed!("scenarios/tdp-icc2006/tdp-482.toml"),
];

pub static EXPERIMENT: Experiment = Experiment {
    names: &["tdp-icc2006", "tdp"],
    description: "TDP router, ICC 2006 (seeds 000/001): Tables I and II, FIFO vs TDP jitter, link loads",
    scenarios: SCENARIOS,
    sim: sim::run,
    live: Some(live::run),
    stall: true,
};

/// The tables: title, artefact, the FIFO and the TDP scenario (indices
/// into [`SCENARIOS`]), packet size.
const TABLES: [(&str, &str, usize, usize, u32); 2] = [
    (
        "Table I: end-to-end delay jitter, 1002-byte IP packets",
        "Table I",
        0,
        1,
        1002,
    ),
    (
        "Table II: end-to-end delay jitter, 482-byte IP packets",
        "Table II",
        2,
        3,
        482,
    ),
];

pub(crate) fn default_scenario() -> &'static Embedded {
    &SCENARIOS[1]
}

/// The paper's per-flow jitter column of a scenario, in ms (its `[paper]`
/// values).
fn paper_jitter(sc: &qosnet_scenario::Scenario) -> std::collections::BTreeMap<String, f64> {
    sc.paper.as_ref().map(|p| p.values.clone()).unwrap_or_default()
}
