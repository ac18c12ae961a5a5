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

use qosnet_scenario::results::Results;

use crate::plot::Curve;
use crate::{Embedded, Experiment};

/// Figure 7's curves (simulation vs implementation, `live.toml`): per
/// station (by id), the NRT delay — the mean time between its NRT token
/// visits (§4.1) — in qosnet sim and, given, qosnet live.
pub(crate) fn figure7_curves(sim: &Results, live: Option<&Results>) -> Vec<Curve> {
    let points = |r: &Results| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = r
            .nodes
            .iter()
            .filter_map(|n| {
                let d = n.details.as_ref()?;
                let id = d["station_id"].as_f64()?;
                let mean = d["nrt_visit_interval"]["mean_ns"].as_f64()?;
                (d["nrt_visit_interval"]["count"].as_u64()? > 0).then_some((id, mean / 1e6))
            })
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let mut c = vec![("qosnet sim".to_string(), points(sim))];
    if let Some(l) = live {
        c.push(("qosnet live".to_string(), points(l)));
    }
    c
}

/// Figure 7's title and axes.
pub(crate) const FIGURE7: (&str, &str, &str) = (
    "Figure 7: NRT delay, simulation vs implementation (live.toml: TRT 10 ms, 1 RT session, 1 Mb/s NRT)",
    "station id",
    "NRT delay: mean time between NRT visits (ms)",
);

pub(crate) static SCENARIOS: &[Embedded] = &[
    embed!("scenarios/rether/table1-csma.toml"),
    embed!("scenarios/rether/two-mpeg.toml"),
    embed!("scenarios/rether/live.toml"),
];

pub static EXPERIMENT: Experiment = Experiment {
    names: &["rether", "rether-1995"],
    description: "RETHER (seed 002): Table 1 (late frames, CSMA/CD vs RETHER), Table 2, Figures 4-6, 8, 9",
    scenarios: SCENARIOS,
    // Until this experiment computes its verdicts (crate::verdict).
    sim: |o| sim::run(o).map(|()| crate::Verdicts::default()),
    live: Some(|o| live::run(o).map(|()| crate::Verdicts::default())),
    stall: false,
};
