//! The result schema shared by `qosnet sim` and live runs, so their runs
//! compare side by side (docs/results.md documents every field).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, Serialize, Deserialize, Default, PartialEq)]
#[serde(default)]
pub struct DelayStats {
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// A delay histogram's summary (quantiles clamped to the exact min and
/// max, see `qosnet_core::stats`) as the schema's `delay_ns`: the one
/// conversion the simulator's and the live sinks share.
impl From<qosnet_core::stats::DelaySummary> for DelayStats {
    fn from(s: qosnet_core::stats::DelaySummary) -> Self {
        DelayStats {
            min: s.min,
            mean: s.mean,
            p50: s.p50,
            p99: s.p99,
            p999: s.p999,
            max: s.max,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct FlowResult {
    pub name: String,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub reordered: u64,
    /// Arrivals of a packet (same flow, same sequence number) that had
    /// already arrived: copies, never counted in `received`.
    pub duplicates: u64,
    pub delay_ns: DelayStats,
    /// max − min one-way delay (the TDP paper's definition of jitter).
    pub jitter_ns: u64,
    /// Received IP bits per second over the measurement interval.
    pub throughput_bps: f64,
    /// What `delay_ns` measures: `"one-way"`, or `"rtt"` for echo flows.
    pub delay_kind: String,
    /// Packets received per TOS/DS byte (hex, e.g. "0x28"): re-marking
    /// and TDP stamps as the receiver saw them.
    pub tos_received: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct LinkResult {
    /// Directed channel name, `FROM->TO`.
    pub name: String,
    pub capacity_bps: u64,
    pub packets: u64,
    /// Frame bytes sent (no FCS/preamble/IFG).
    pub bytes: u64,
    pub drops: u64,
    pub drops_by_reason: BTreeMap<String, u64>,
    /// Share of link time used, counting FCS, preamble and inter-frame gap.
    pub utilization: f64,
    /// IP-level load in bit/s (the paper's "Mb/s on a link").
    pub load_bps: f64,
    pub scheduler: String,
    /// Packets still queued at the port when the run ended.
    pub queued_at_end: u64,
    /// The scheduler's own counters over the whole run: per class for
    /// `diffserv` (`EF.sent`, `AF1.drop_aqm`, `AF1.dropped_red`, ...), TDP
    /// wheel events for `tdp` (`tdp_sent`, `padding_sent`, `overrun`, ...).
    pub counters: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct NodeResult {
    pub name: String,
    pub counters: BTreeMap<String, u64>,
    /// The node's structured results, for kinds that have them (a RETHER
    /// station's sessions, NRT access delay, mode switches); absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

/// A node's [`Detail`](qosnet_core::node::Detail) tree as JSON.
pub fn detail_json(d: &qosnet_core::node::Detail) -> serde_json::Value {
    use qosnet_core::node::Detail;
    match d {
        Detail::U64(v) => (*v).into(),
        Detail::F64(v) => serde_json::Number::from_f64(*v).map_or(serde_json::Value::Null, Into::into),
        Detail::Str(s) => s.clone().into(),
        Detail::List(v) => v.iter().map(detail_json).collect::<Vec<_>>().into(),
        Detail::Map(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), detail_json(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct EngineResult {
    pub events: u64,
    pub wall_s: f64,
    pub sim_s: f64,
    pub events_per_wall_s: f64,
    pub sim_s_per_wall_s: f64,
    pub peak_event_queue: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Results {
    pub scenario: String,
    pub source: String,
    pub mode: String,
    pub seed: u64,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub flows: Vec<FlowResult>,
    pub links: Vec<LinkResult>,
    pub nodes: Vec<NodeResult>,
    pub engine: EngineResult,
    /// Extra sections (TDP plan summary, timer lateness in live runs, ...).
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl Results {
    pub fn flow(&self, name: &str) -> Option<&FlowResult> {
        self.flows.iter().find(|f| f.name == name)
    }
    pub fn link(&self, name: &str) -> Option<&LinkResult> {
        self.links.iter().find(|l| l.name == name)
    }
}
