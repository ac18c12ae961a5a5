//! The validated scenario: names resolved to indices, units parsed,
//! defaults applied. Everything a driver (sim or live) needs, nothing it
//! must check again.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use qosnet_core::route::Ipv4Prefix;
use qosnet_core::{Duration, Framing};

pub use crate::raw::PaperCell;
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
    /// Broadcast domains and their subnets, in order of their first link.
    pub domains: Vec<Domain>,
    pub routes: Vec<StaticRoute>,
    pub diffserv: DiffServParams,
    pub taprio: Option<TaprioParams>,
    pub htb: Option<HtbParams>,
    /// `[stsdr]`: the distributed router its `stsdr-*` nodes make up.
    pub stsdr: Option<StsdrParams>,
    /// `[rether]`: protocol parameters of the scenario's RETHER stations.
    pub rether: Option<RetherParams>,
    /// `[[fault]] kind = "kill"`: nodes failing during the run, in time
    /// order (simulator).
    pub kills: Vec<NodeKill>,
    /// `[[fault]] kind = "stall"`: nodes frozen for a while (simulator).
    pub stalls: Vec<NodeStall>,
    pub paper: Option<Paper>,
    /// What loading accepted but a user should hear about (a flow that
    /// starts after the run ends, an on/off pattern without off time...),
    /// each with its place in the file. `qosnet check` and `qosnet sim`
    /// print them.
    pub warnings: Vec<ScenarioWarning>,
}

/// A node failing during the run: from `at` it stops receiving, sending
/// and timing out, and what it held is lost; at `restart`, if any, it
/// boots again with the state it was configured with (a reboot, not a
/// thaw), as a real router that lost power does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeKill {
    pub node: usize,
    pub at: Duration,
    pub restart: Option<Duration>,
}

/// Nodes stalled together (`[[fault]] kind = "stall"`): from `at`, for
/// `len`, again every `every` (if any) while a stall would start before
/// `until`. A stalled node does nothing — no input handling, no timers, no
/// new transmissions — and the frames reaching it wait in its NIC (bounded)
/// until the stall ends; nothing it holds is lost by the stall itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStall {
    pub nodes: Vec<usize>,
    pub at: Duration,
    pub len: Duration,
    pub every: Option<Duration>,
    /// The end of the repeats (the run's duration if not given).
    pub until: Duration,
}

impl NodeStall {
    /// The stalls' (start, end) times, in order.
    pub fn windows(&self) -> Vec<(Duration, Duration)> {
        let (at, len) = (self.at.as_nanos(), self.len.as_nanos());
        match self.every {
            None => vec![(self.at, Duration(at + len))],
            Some(p) => (at..self.until.as_nanos().max(at + 1))
                .step_by(p.as_nanos().max(1) as usize)
                .map(|t| (Duration(t), Duration(t + len)))
                .collect(),
        }
    }
}

/// A scenario value accepted with a word of warning, with its place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioWarning {
    /// The file, or `--set KEY=VALUE` when the value came from one.
    pub file: String,
    /// 1-based line and column; 0 when the warning has no place in a file.
    pub line: usize,
    pub col: usize,
    pub msg: String,
}

impl std::fmt::Display for ScenarioWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "{}:{}:{}: warning: {}",
                self.file, self.line, self.col, self.msg
            )
        } else {
            write!(f, "{}: warning: {}", self.file, self.msg)
        }
    }
}

/// `[htb]`, validated. Leaves are PHB classes (ids 0..=6: NC, EF, AF1..AF4,
/// BE); inner classes get ids from 100 on.
#[derive(Clone, Debug)]
pub struct HtbParams {
    /// (id, parent id, rate, ceil, prio, burst bytes) per class.
    pub classes: Vec<HtbClassSpec>,
    /// Leaf for PHB classes without their own leaf.
    pub default: Option<u16>,
}

#[derive(Clone, Debug)]
pub struct HtbClassSpec {
    pub name: String,
    pub id: u16,
    pub parent: Option<u16>,
    pub rate_bps: u64,
    pub ceil_bps: u64,
    pub prio: u8,
    pub burst: Option<u32>,
}

/// `[rether]`, validated: the parameters every `kind = "rether"` station
/// of the scenario shares (docs/scenario-format.md, seed 002).
#[derive(Clone, Debug)]
pub struct RetherParams {
    /// `false`: stations stay in CSMA/CD and RT flows go as ordinary
    /// traffic (Table 1's baseline).
    pub enabled: bool,
    /// Token rotation time.
    pub trt: Duration,
    /// Time per cycle set aside for NRT traffic (eq. 3); `None`: eq. 6
    /// with X = 1 and a 5 % NRT share.
    pub t_nrt: Option<Duration>,
    /// Eq. 7's per-packet (a) and per-message (b) overheads.
    pub a: Duration,
    pub b: Duration,
    /// Token processing and passing overhead (Table 2), besides the two
    /// token copies the copy costs charge.
    pub t_token: Duration,
    /// Copy of a packet between memory and the NIC (§5.2, Table 3):
    /// per packet, and per byte (`copy_per_byte` is the time per byte).
    pub copy_per_packet: Duration,
    pub copy_per_byte: Duration,
    pub nrt_policy: qosnet_core::rether::NrtPolicy,
    /// A unit arriving later than this after its expected time is late.
    pub late_threshold: Duration,
    /// Send and receive buffers per session.
    pub buffers: usize,
    /// §4.3's staggered acknowledgements (zero: the paper's measurements).
    pub ack_stagger: Duration,
    /// Slack on every failure timer (§2.4's acknowledgement timer, the
    /// lost-token silence): what a station may be late by without being
    /// declared dead — the driver's scheduling latency live.
    pub ack_margin: Duration,
    /// Stations boot in CSMA mode (`true`) or by joining (§2.4).
    pub boot_csma: bool,
    /// `[[rether.fault]]`: (station node, failure).
    pub faults: Vec<(usize, qosnet_core::rether::app::Fault)>,
}

impl RetherParams {
    /// The stations' cost model on a segment of `rate_bps` and `framing`
    /// with `members` stations: eq. 7's a and b, the copy costs, and
    /// t_token plus Table 2's two token copies (NIC to memory at the
    /// receiver, memory to NIC at the sender) of a token frame carrying
    /// the segment's node table, when copy costs are given.
    pub fn timing(
        &self,
        rate_bps: u64,
        framing: Framing,
        members: usize,
    ) -> qosnet_core::rether::TimingModel {
        use qosnet_core::rether::wire::{NODE_ENTRY, TOKEN_FIXED};
        let mut m = qosnet_core::rether::TimingModel {
            rate_bps,
            per_packet: self.a,
            per_message: self.b,
            t_token: self.t_token,
            framing,
            copy_per_packet: self.copy_per_packet,
            copy_per_byte: self.copy_per_byte,
        };
        let token = qosnet_core::wire::ETH_HDR + TOKEN_FIXED + NODE_ENTRY * members;
        m.t_token += m.copy_time(token) + m.copy_time(token);
        m
    }
    /// The T_NRT a station of a segment with `members` stations and timing
    /// `m` runs with: the scenario's `t_nrt`, else eq. 6's minimum (X = 1,
    /// 5 % NRT) but at least one maximum-size NRT visit.
    pub fn station_t_nrt(&self, m: &qosnet_core::rether::TimingModel, members: usize) -> Duration {
        use qosnet_core::rether::{timing, NrtPolicy};
        self.t_nrt.unwrap_or_else(|| {
            let eq6 = timing::paper_t_nrt_min(members as u64, m.t_token, 1, 5, self.trt);
            eq6.max(m.nrt_visit_max(NrtPolicy::OnePacket).unwrap_or(Duration::ZERO))
        })
    }
}

/// `[taprio]`, validated: the cycle starts at `base_time`; each entry opens
/// the gates of a set of PHB classes (bit c = class c: 0 NC, 1 EF,
/// 2..5 AF1..AF4, 6 BE) for its duration.
#[derive(Clone, Debug)]
pub struct TaprioParams {
    pub base_time: Duration,
    pub entries: Vec<(Duration, u32)>,
}

/// `[diffserv]`, validated. Rates in bit/s, bursts in bytes.
#[derive(Clone, Debug)]
pub struct DiffServParams {
    /// EF rate limit per port; `None` = 30% of the port's link.
    pub ef_rate_bps: Option<u64>,
    pub ef_burst: u64,
    pub af_weights: [u32; 4],
    pub be_weight: u32,
    pub wred: bool,
    /// DSCP → PHB name overrides ("EF", "AF1".."AF4", "BE", "NC").
    pub phb_overrides: Vec<(u8, String)>,
    pub profiles: Vec<DsProfileSpec>,
    pub rules: Vec<DsRuleSpec>,
}

impl Default for DiffServParams {
    fn default() -> Self {
        DiffServParams {
            ef_rate_bps: None,
            ef_burst: 15_000,
            af_weights: [4, 3, 2, 1],
            be_weight: 1,
            wred: true,
            phb_overrides: Vec::new(),
            profiles: Vec::new(),
            rules: Vec::new(),
        }
    }
}

#[derive(Clone, Debug)]
pub enum DsKind {
    Mark(u8),
    /// (DSCP, rate bit/s, burst bytes) per step, AFx1 → AFx2 → AFx3.
    Ladder(Vec<(u8, u64, u64)>),
    Tcm {
        two_rate: bool,
        cir_bps: u64,
        cbs: u64,
        ebs: u64,
        pir_bps: u64,
        pbs: u64,
        aware: bool,
        green: u8,
        yellow: Option<u8>,
        red: Option<u8>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DsExceed {
    Drop,
    Remark(u8),
    Shape(usize),
    Pass,
}

#[derive(Clone, Debug)]
pub struct DsProfileSpec {
    pub name: String,
    pub kind: DsKind,
    pub exceed: DsExceed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrSpec {
    /// A prefix, host bits cleared.
    Prefix(Ipv4Prefix),
    /// A node's address (a host's only interface).
    Node(usize),
}

#[derive(Clone, Debug)]
pub struct DsRuleSpec {
    pub name: String,
    /// Routers applying the rule (edge routers).
    pub nodes: Vec<usize>,
    pub profile: usize,
    pub src: Option<AddrSpec>,
    pub dst: Option<AddrSpec>,
    pub proto: Option<u8>,
    pub sport: Option<(u16, u16)>,
    pub dport: Option<(u16, u16)>,
    pub dscp: Option<Vec<u8>>,
    /// Only packets arriving from this neighbour.
    pub in_node: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct TdpParams {
    pub tf: Duration,
    pub tfs_per_tc: u32,
    pub tcs_per_sc: u32,
    pub padding: bool,
    pub max_lag: u32,
    /// TFs a reserved packet may leave a port towards a TDP peer after its
    /// forwarding TF ended before it is dropped (`late_limit`; `None`: no
    /// limit).
    pub late_limit: Option<u32>,
    pub shaper_queue: usize,
    /// How long an edge shaper may hold a packet (`shaper_max_hold`;
    /// `None`: no bound).
    pub shaper_max_hold: Option<Duration>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedKind {
    Fifo,
    Tdp,
    Prio,
    /// DiffServ PHBs: NC and rate-limited EF strict priority, AF1–AF4 and
    /// BE weighted fair, WRED by drop precedence (RFC 2597/3246).
    DiffServ,
    /// Per-flow (5-tuple) fair queueing with equal weights.
    Wfq,
    Wf2q,
    Drr,
    /// IEEE 802.1Qbv time-aware shaper over the PHB classes (`[taprio]`).
    Taprio,
    /// Hierarchical link sharing with borrowing over the PHB classes (`[htb]`).
    Htb,
}

impl SchedKind {
    pub const NAMES: &'static str = "fifo, prio, tdp, diffserv, wfq, wf2q, drr, taprio, htb";
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "fifo" => SchedKind::Fifo,
            "tdp" => SchedKind::Tdp,
            "prio" => SchedKind::Prio,
            "diffserv" => SchedKind::DiffServ,
            "wfq" => SchedKind::Wfq,
            "wf2q" => SchedKind::Wf2q,
            "drr" => SchedKind::Drr,
            "taprio" => SchedKind::Taprio,
            "htb" => SchedKind::Htb,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            SchedKind::Fifo => "fifo",
            SchedKind::Tdp => "tdp",
            SchedKind::Prio => "prio",
            SchedKind::DiffServ => "diffserv",
            SchedKind::Wfq => "wfq",
            SchedKind::Wf2q => "wf2q",
            SchedKind::Drr => "drr",
            SchedKind::Taprio => "taprio",
            SchedKind::Htb => "htb",
        }
    }
}

/// Per-packet processing time of a node's CPU (the core's model, which
/// the simulator puts in front of routers; live routers take the time they
/// take unless asked to emulate it).
pub use qosnet_core::node::cpu::ProcDist;

#[derive(Clone, Debug)]
pub struct RouterSpec {
    pub scheduler: SchedKind,
    pub processing: ProcDist,
    pub queue_packets: usize,
    pub queue_bytes: usize,
    pub input_queue: usize,
    pub tdp_delay: u32,
    /// A TDP router's interrupt-service latency per TF (`tf_irq_latency`,
    /// `qosnet_core::tdp::TfLag`); `None`: TFs begin on the reference.
    pub tf_irq_latency: Option<ProcDist>,
    /// Per interface, the time the router takes before it starts the next
    /// interface's TF (`tf_port_service`): port k begins k times later.
    pub tf_port_service: Duration,
    pub clock_offset_ns: i64,
    pub clock_drift_ppm: f64,
}

#[derive(Clone, Debug)]
pub enum NodeKind {
    Router(RouterSpec),
    Host(HostSpec),
    /// A store-and-forward layer-2 switch (MAC learning, 802.1Q VLANs).
    Switch(SwitchSpec),
    /// A shared half-duplex Ethernet segment (CSMA/CD bus): its links are
    /// the stations' drop cables, their `delay` each station's position.
    Segment(SegmentSpec),
    /// `kind = "stsdr-balancer"`: a load balancer of the STSDR (seed 003):
    /// owns the router's external address, hashes flows to forwarders.
    StsdrBalancer(StsdrNodeSpec),
    /// `kind = "stsdr-forwarder"`: a forwarder FE_i of the STSDR; FE ids
    /// follow the order of these nodes in the file.
    StsdrForwarder(StsdrNodeSpec),
    /// A host whose NIC runs RETHER (seed 002) on a shared segment: its
    /// ordinary flows ride the station's NRT turns, its `rt` flows are
    /// real-time sessions.
    Rether(RetherNodeSpec),
    /// `kind = "rether-bridge"`: a bridge between RETHER segments (seed
    /// 002 §2.5): one RETHER station per segment it is on, relaying the
    /// real-time sub-connections of sessions that cross it and the
    /// ordinary frames of the hosts behind it. A layer-2 device: the
    /// segments it joins are one IP subnet.
    RetherBridge(RetherNodeSpec),
}

/// A balancer's or forwarder's own settings: the PC's per-frame CPU time
/// and input queue (every frame it receives, DS frames included, waits
/// for it, as in a Click/Linux PC).
#[derive(Clone, Debug)]
pub struct StsdrNodeSpec {
    pub processing: ProcDist,
    pub input_queue: usize,
}

/// `[stsdr]`, validated: what every forwarder and balancer of the one
/// logical router share (Khan, Sahoo & Manjunath §IV–V).
#[derive(Clone, Debug)]
pub struct StsdrParams {
    /// S-DS, M-DS (l), L-DS (l) or no WFQ.
    pub variant: qosnet_core::stsdr::Variant,
    /// T_br: the wait after the master's DS frame.
    pub t_br: Duration,
    pub costs: qosnet_core::stsdr::PhaseCosts,
    /// w_k: K = `weights.len()`.
    pub weights: Vec<u32>,
    /// Packets per Q_ijk.
    pub queue_limit: usize,
    /// OL_1..OL_N: the next-hop nodes, each on its own T-switch port.
    pub outlinks: Vec<usize>,
    /// The internal VLAN of DS frames.
    pub vlan: u16,
    pub tie: qosnet_core::stsdr::TieBreak,
    pub proposer: qosnet_core::stsdr::Proposer,
    /// What L-DS ranks a burst by.
    pub lds_rank: qosnet_core::stsdr::LazyRank,
    /// Extra wait after each round (switch latency, safety).
    pub cycle_guard: Duration,
    /// Payload bytes a DS frame may use (1500; jumbo 9000).
    pub mtu: usize,
    /// Forwarder silence before it is dropped / master silence before an
    /// election (`None`: eight worst-case cycles).
    pub fe_timeout: Option<Duration>,
    pub master_timeout: Option<Duration>,
    /// Balancers' liveness timeout (forwarder silent this long: re-hash).
    pub balancer_timeout: Duration,
    /// No-WFQ forwarders' heartbeat interval (DS frames with no state, so
    /// balancers and peers know they are alive; 0: none).
    pub heartbeat: Duration,
    /// CPU time a balancer or forwarder spends on each DS frame it
    /// receives (`None`: its `processing`, as any frame).
    pub ds_processing: Option<Duration>,
    /// Fault injection: each forwarder loses each DS frame it receives
    /// with this probability (0: none).
    pub ds_loss: f64,
}

/// `kind = "rether"`: a station's id on its segment (lower ids win
/// initiator races, §2.2.2).
#[derive(Clone, Debug)]
pub struct RetherNodeSpec {
    pub id: u16,
}

/// `kind = "switch"`: a managed layer-2 switch (IEEE 802.1D/802.1Q).
#[derive(Clone, Debug)]
pub struct SwitchSpec {
    /// Fabric latency: a frame may leave no earlier than this after it
    /// arrived whole (store and forward).
    pub latency: Duration,
    /// Output queue limit per port.
    pub queue_packets: usize,
    pub queue_bytes: usize,
    /// Forwarding database entries.
    pub fdb_size: usize,
    /// MAC aging time.
    pub aging: Duration,
    /// Largest payload (after the header and VLAN tag) a port takes: 1500,
    /// or up to 9216 for jumbo frames (an STSDR `mtu` above 1500 needs it).
    pub mtu: usize,
}

impl SwitchSpec {
    /// The longest frame (no FCS) a port may queue at `mtu`.
    pub fn max_frame(mtu: usize) -> usize {
        qosnet_core::wire::ETH_HDR + 4 + mtu
    }
}

impl Default for SwitchSpec {
    fn default() -> Self {
        SwitchSpec {
            latency: Duration::ZERO,
            queue_packets: 1000,
            queue_bytes: 1 << 20,
            fdb_size: 8192,
            aging: Duration::from_secs(300),
            mtu: 1500,
        }
    }
}

/// `[[segment]]`: a shared Ethernet bus (IEEE 802.3 half duplex).
#[derive(Clone, Debug)]
pub struct SegmentSpec {
    pub capacity_bps: u64,
    pub framing: Framing,
    /// End-to-end propagation delay of the bus.
    pub propagation: Duration,
    /// Slot time in bit times (512 at 10 and 100 Mb/s; 4096 at 1 Gb/s,
    /// half duplex with carrier extension).
    pub slot_bits: u32,
    pub jam_bits: u32,
    /// Transmission attempts before a frame is dropped.
    pub attempt_limit: u32,
    /// Backoff exponent cap.
    pub backoff_limit: u32,
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
    /// An IP router (forwards between its ports' subnets).
    pub fn is_router(&self) -> bool {
        matches!(self.kind, NodeKind::Router(_))
    }
    /// An STSDR load balancer: hosts in its broadcast domain send to it.
    pub fn is_balancer(&self) -> bool {
        matches!(self.kind, NodeKind::StsdrBalancer(_))
    }
    /// A node of an STSDR (balancer or forwarder): its switch port is a
    /// trunk that also carries the internal VLAN of DS frames.
    pub fn is_stsdr(&self) -> bool {
        matches!(
            self.kind,
            NodeKind::StsdrBalancer(_) | NodeKind::StsdrForwarder(_)
        )
    }
    /// A layer-2 device (switch or shared segment): transparent to IP, it
    /// joins the ports linked to it into one broadcast domain per VLAN.
    pub fn is_l2(&self) -> bool {
        matches!(
            self.kind,
            NodeKind::Switch(_) | NodeKind::Segment(_) | NodeKind::RetherBridge(_)
        )
    }
    /// A medium rather than a device (a shared segment): its ports are the
    /// stations' drop cables, whose traffic the stations report.
    pub fn is_medium(&self) -> bool {
        matches!(self.kind, NodeKind::Segment(_))
    }
    /// An IP end system (a host, or a host on a RETHER station): it sends
    /// and receives flows.
    pub fn is_host(&self) -> bool {
        matches!(self.kind, NodeKind::Host(_) | NodeKind::Rether(_))
    }
    /// An end system whose IP stack is the driver's own (the simulator's
    /// host model; a namespace's kernel live), not a node the builder
    /// registry builds. A RETHER station is a host too, but a built node
    /// that carries its host's stack ([`qosnet_core::node::Node::host_link`]).
    pub fn is_stack_host(&self) -> bool {
        matches!(self.kind, NodeKind::Host(_))
    }
    /// A RETHER station.
    pub fn is_rether(&self) -> bool {
        matches!(self.kind, NodeKind::Rether(_))
    }
    /// A bridge between RETHER segments (§2.5).
    pub fn is_rether_bridge(&self) -> bool {
        matches!(self.kind, NodeKind::RetherBridge(_))
    }
    /// The RETHER station id of a station or a bridge (a bridge has the
    /// same id on every segment it joins).
    pub fn rether_id(&self) -> Option<u16> {
        match &self.kind {
            NodeKind::Rether(s) | NodeKind::RetherBridge(s) => Some(s.id),
            _ => None,
        }
    }
    pub fn router(&self) -> Option<&RouterSpec> {
        match &self.kind {
            NodeKind::Router(r) => Some(r),
            _ => None,
        }
    }
    /// The node's clock against true time (sim): offset in ns, drift in ppm.
    pub fn clock(&self) -> (i64, f64) {
        match &self.kind {
            NodeKind::Router(r) => (r.clock_offset_ns, r.clock_drift_ppm),
            NodeKind::Host(h) => (h.clock_offset_ns, h.clock_drift_ppm),
            _ => (0, 0.0),
        }
    }
    /// The CPU in front of the node (sim): per-frame processing time and
    /// input queue limit, for kinds that model one.
    pub fn cpu(&self) -> Option<(ProcDist, usize)> {
        match &self.kind {
            NodeKind::Router(r) => Some((r.processing, r.input_queue)),
            NodeKind::StsdrBalancer(s) | NodeKind::StsdrForwarder(s) => Some((s.processing, s.input_queue)),
            _ => None,
        }
    }
    /// The kind's name as scenario files spell it.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            NodeKind::Router(_) => "router",
            NodeKind::Host(_) => "host",
            NodeKind::Switch(_) => "switch",
            NodeKind::Segment(_) => "segment",
            NodeKind::StsdrBalancer(_) => "stsdr-balancer",
            NodeKind::StsdrForwarder(_) => "stsdr-forwarder",
            NodeKind::Rether(_) => "rether",
            NodeKind::RetherBridge(_) => "rether-bridge",
        }
    }
}

/// A broadcast domain: IP ports that reach each other without a router —
/// the two ends of a point-to-point link, or every port behind the same
/// switches (per VLAN) or on the same segment — and its subnet.
#[derive(Clone, Debug)]
pub struct Domain {
    pub prefix: Ipv4Addr,
    pub prefix_len: u8,
    /// IP ports in the domain: (node, link, address), in link order.
    pub members: Vec<(usize, usize, Ipv4Addr)>,
    /// The VLAN on switches (1 when untagged or without switches).
    pub vlan: u16,
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
    /// The ends' addresses (unspecified at a switch or segment end).
    pub a_ip: Ipv4Addr,
    pub b_ip: Ipv4Addr,
    /// Access VLAN at a switch end (1 if none given).
    pub vlan: u16,
    /// The broadcast domain the link's IP ends belong to (`None` for a
    /// link between two layer-2 devices).
    pub domain: Option<usize>,
}

/// A flow's packet sizes and send pattern: the one definition the
/// simulator's sources and the live generator share.
pub use qosnet_core::traffic::{Pattern, SizeDist};

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
    /// The destination echoes each packet; delays are round-trip times.
    pub echo: bool,
    /// A RETHER real-time session (`rt = true`): each packet is one unit
    /// of a session reserving its size per period.
    pub rt: bool,
}

impl Flow {
    pub fn pps(&self) -> f64 {
        self.rate.pps(self.size.mean())
    }
}

#[derive(Clone, Debug)]
pub struct StaticRoute {
    pub node: usize,
    /// The destinations, host bits cleared.
    pub dst: Ipv4Prefix,
    pub via: usize,
    pub ttl: Option<(u8, u8)>,
}

impl Scenario {
    /// The CPU time of a control frame (an STSDR DS frame) at node `i`,
    /// if the scenario gives it one of its own (`[stsdr] ds_processing`).
    pub fn control_processing(&self, i: usize) -> Option<ProcDist> {
        let node = self.nodes.get(i)?;
        matches!(
            node.kind,
            NodeKind::StsdrBalancer(_) | NodeKind::StsdrForwarder(_)
        )
        .then_some(())
        .and(self.stsdr.as_ref()?.ds_processing)
        .map(ProcDist::Fixed)
    }
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }
}

/// `[paper]`, validated: what a paper reports for this scenario.
#[derive(Clone, Debug, Default)]
pub struct Paper {
    /// Where the numbers come from (paper, table, column).
    pub source: String,
    /// The per-flow column's metric (`"jitter"`) and unit; empty without one.
    pub metric: String,
    pub unit: String,
    /// The per-flow column: row name (flow, class) → number.
    pub values: BTreeMap<String, f64>,
    pub tables: Vec<PaperTable>,
}

impl Paper {
    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<&PaperTable> {
        self.tables.iter().find(|t| t.name == name)
    }
}

/// One of the paper's tables: every row has one cell per column, and its
/// first cell, a text, is the row's key (unique in the table).
#[derive(Clone, Debug)]
pub struct PaperTable {
    pub name: String,
    /// The paper's caption (empty when not given).
    pub title: String,
    pub columns: Vec<String>,
    /// One unit per column (empty strings for none); empty if not given.
    pub units: Vec<String>,
    pub rows: Vec<Vec<PaperCell>>,
}

impl PaperCell {
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            PaperCell::Number(v) => Some(*v),
            PaperCell::Text(_) => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PaperCell::Text(s) => Some(s),
            PaperCell::Number(_) => None,
        }
    }
}

impl std::fmt::Display for PaperCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PaperCell::Number(v) => write!(f, "{v}"),
            PaperCell::Text(s) => f.write_str(s),
        }
    }
}

impl PaperTable {
    /// Row keys, in the paper's order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.rows
            .iter()
            .filter_map(|r| r.first().and_then(PaperCell::as_str))
    }
    /// Index of the column named `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
    /// The row whose key is `key`.
    pub fn row(&self, key: &str) -> Option<&[PaperCell]> {
        self.rows
            .iter()
            .find(|r| r.first().and_then(PaperCell::as_str) == Some(key))
            .map(|r| r.as_slice())
    }
    /// The cell in row `key`, column `column`.
    pub fn get(&self, key: &str, column: &str) -> Option<&PaperCell> {
        let c = self.column(column)?;
        self.row(key)?.get(c)
    }
}
