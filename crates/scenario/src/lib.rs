//! Scenario files for qosnet: one TOML file describes a topology, its
//! routers and schedulers, its flows and its run, and drives both the
//! simulator and the live lab. See docs/scenario-format.md for every key.

#![forbid(unsafe_code)]

pub mod build;
mod ds;
pub mod dsbuild;
pub mod load;
pub mod model;
pub mod raw;
pub mod results;
pub mod rethertopo;
pub mod sizetrace;
pub mod stall;
pub mod tdpplan;
pub mod topo;
pub mod units;

pub use load::{load_file, load_str, ScenarioError, SetBase};
pub use model::*;
