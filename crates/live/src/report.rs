//! What a run of the live driver reports about itself: the loop's own
//! counters ([`LoopStats`]), each port's device counters
//! ([`PortReport`]) and the whole run's figures ([`DriverReport`]). Data
//! only, shared by the driver that fills them and the metrics and
//! results that show them (so neither depends on the other for them).

use serde::{Deserialize, Serialize};

use qosnet_io::clock::LatenessSummary;
use qosnet_io::device::DeviceStats;

/// Counters of the loop itself.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct LoopStats {
    pub iterations: u64,
    /// Times the driver slept in ppoll.
    pub sleeps: u64,
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// Deadlines served (each recorded in the lateness histogram).
    pub deadlines: u64,
    /// Deadlines served more than one spin margin late.
    pub deadlines_missed: u64,
}

/// Per-port device counters, for results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PortReport {
    /// The node's name (a router's, for the ICC 2006 labs).
    pub router: String,
    pub port: String,
    pub device: DeviceStats,
    pub tx_refused: u64,
    pub rx_errors: u64,
}

/// What a run of the driver measured about itself.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DriverReport {
    pub wall_s: f64,
    pub stats: LoopStats,
    /// How late each node deadline (`poll_timeout`) was served.
    pub lateness: LatenessSummary,
    /// Kernel receive timestamp to `handle_frame`.
    pub rx_lag: LatenessSummary,
    pub ports: Vec<PortReport>,
    /// How the driver thread was placed and scheduled (pinning,
    /// SCHED_FIFO), or why not.
    #[serde(default)]
    pub sched: Vec<String>,
    /// CPU time the driver thread used inside `run` (user + system,
    /// CLOCK_THREAD_CPUTIME_ID): against `wall_s`, how busy it was.
    #[serde(default)]
    pub cpu_s: f64,
}
