//! Shared Ethernet (IEEE 802.3 half duplex, CSMA/CD) against textbook
//! theory — the medium RETHER runs on, checked on its own: the capture
//! effect's backoff races (Ramakrishnan & Yang 1994: the station that won
//! the last collision wins the next race with probability 5/8), and N
//! saturated stations' efficiency and fairness against the Metcalfe–Boggs
//! model (Metcalfe & Boggs 1976; Boggs, Mogul & Kent 1988). The medium is
//! `qosnet_sim::media::segment`: the textbook measurements drive it
//! directly; its scenario (eight saturated hosts) runs it inside the whole
//! simulator, which must agree with the medium alone.

mod sim;

use crate::{Embedded, Experiment};

pub(crate) static SCENARIOS: &[Embedded] = &[embed!("scenarios/ethernet/saturation.toml")];

pub static EXPERIMENT: Experiment = Experiment {
    names: &["ethernet", "csma"],
    description:
        "Shared Ethernet, textbook: capture effect (5/8) and N saturated stations vs Metcalfe-Boggs, 64 and 1518 B",
    scenarios: SCENARIOS,
    sim: sim::run,
    live: None,
    stall: false,
};
