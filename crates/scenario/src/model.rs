//! The validated scenario: names resolved to indices, units parsed,
//! defaults applied. Everything a driver (sim or live) needs, nothing it
//! must check again.

use std::net::Ipv4Addr;

use qosnet_core::{Duration, Framing};

use crate::raw::Paper;
use crate::units::Rate;

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// Where the scenario came from (file path or "<embedded ...>").
    pub source: String,
    pub duration: Duration,
    pub warmup: Duration,
    /// Extra time after sources stop for packets in flight to arrive.
    pub drain: Duration,
    pub seed: u64,
    pub tdp: Option<TdpParams>,
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
    pub flows: Vec<Flow>,
    pub routes: Vec<StaticRoute>,
    pub paper: Option<Paper>,
}

#[derive(Clone, Debug)]
pub struct TdpParams {
    pub tf: Duration,
    pub tfs_per_tc: u32,
    pub tcs_per_sc: u32,
    pub padding: bool,
    pub max_lag: u32,
    pub shaper_queue: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedKind {
    Fifo,
    Tdp,
    Prio,
}

impl SchedKind {
    pub const NAMES: &'static str = "fifo, prio, tdp";
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "fifo" => SchedKind::Fifo,
            "tdp" => SchedKind::Tdp,
            "prio" => SchedKind::Prio,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            SchedKind::Fifo => "fifo",
            SchedKind::Tdp => "tdp",
            SchedKind::Prio => "prio",
        }
    }
}

/// Per-packet processing time of a router's CPU (sim only; live routers
/// take the time they take).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ProcTime {
    Fixed(Duration),
    Uniform(Duration, Duration),
    /// `base` plus an exponential with the given mean.
    Exp {
        base: Duration,
        mean: Duration,
    },
}

#[derive(Clone, Debug)]
pub struct RouterSpec {
    pub scheduler: SchedKind,
    pub processing: ProcTime,
    pub queue_packets: usize,
    pub queue_bytes: usize,
    pub input_queue: usize,
    pub tdp_delay: u32,
    pub clock_offset_ns: i64,
    pub clock_drift_ppm: f64,
}

#[derive(Clone, Debug)]
pub enum NodeKind {
    Router(RouterSpec),
    Host(HostSpec),
}

/// A host's clock relative to true time (sim): its traffic sources run on
/// it, so a drifting host sends CBR at a period slightly off the routers'
/// time frames, as a traffic generator not locked to the CTR does.
#[derive(Clone, Debug, Default)]
pub struct HostSpec {
    pub clock_offset_ns: i64,
    pub clock_drift_ppm: f64,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub kind: NodeKind,
}

impl Node {
    pub fn is_router(&self) -> bool {
        matches!(self.kind, NodeKind::Router(_))
    }
    pub fn router(&self) -> Option<&RouterSpec> {
        match &self.kind {
            NodeKind::Router(r) => Some(r),
            NodeKind::Host(_) => None,
        }
    }
}

/// A full-duplex point-to-point link: two channels, a→b and b→a.
#[derive(Clone, Debug)]
pub struct Link {
    pub name: String,
    pub a: usize,
    pub b: usize,
    pub capacity_bps: u64,
    pub delay: Duration,
    pub framing: Framing,
    pub prefix: Ipv4Addr,
    pub prefix_len: u8,
    pub a_ip: Ipv4Addr,
    pub b_ip: Ipv4Addr,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    Fixed(u32),
    /// Simple IMIX: 7 × 40 B (here 46 B minimum IP for a 64-byte frame
    /// is not enforced), 4 × 576 B, 1 × 1500 B (IP bytes).
    Imix,
}

impl SizeDist {
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(b) => *b as f64,
            SizeDist::Imix => (7.0 * 40.0 + 4.0 * 576.0 + 1500.0) / 12.0,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    Cbr,
    Poisson,
    OnOff { on: Duration, off: Duration },
}

#[derive(Clone, Debug)]
pub struct Flow {
    pub name: String,
    pub id: u32,
    pub from: usize,
    pub to: usize,
    /// Routers visited, in order; with `loops`, a ring walked `loops` times.
    pub path: Vec<usize>,
    pub loops: u32,
    pub ring: bool,
    pub size: SizeDist,
    pub rate: Rate,
    pub pattern: Pattern,
    pub start: Duration,
    pub stop: Option<Duration>,
    pub ttl: u8,
    pub dscp: u8,
    pub sport: u16,
    pub dport: u16,
    pub tdp: bool,
    pub tdp_delay: Option<u32>,
    pub slots: Option<Vec<u32>>,
}

impl Flow {
    pub fn pps(&self) -> f64 {
        self.rate.pps(self.size.mean())
    }
}

#[derive(Clone, Debug)]
pub struct StaticRoute {
    pub node: usize,
    pub prefix: Ipv4Addr,
    pub len: u8,
    pub via: usize,
    pub ttl: Option<(u8, u8)>,
}

impl Scenario {
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }
}
