//! The scenario file as written: serde structs mirroring the TOML, with
//! spans kept on every value a later check may need to point at.
//! Unknown keys are errors (`deny_unknown_fields`), never silently ignored.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

pub type S<T> = Spanned<T>;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub scenario: S<Header>,
    #[serde(default)]
    pub defaults: Defaults,
    pub tdp: Option<S<Tdp>>,
    #[serde(default, rename = "node")]
    pub nodes: Vec<S<Node>>,
    #[serde(default, rename = "link")]
    pub links: Vec<S<Link>>,
    #[serde(default, rename = "flow")]
    pub flows: Vec<S<Flow>>,
    #[serde(default, rename = "route")]
    pub routes: Vec<S<RouteEntry>>,
    #[serde(default, rename = "segment")]
    pub segments: Vec<S<Segment>>,
    // Not spanned: `[[diffserv.rule]]` alone makes `diffserv` an implicit
    // table, which a span cannot be taken of (a cryptic serde error).
    pub diffserv: Option<DiffServ>,
    pub taprio: Option<S<Taprio>>,
    pub htb: Option<S<Htb>>,
    pub stsdr: Option<S<Stsdr>>,
    pub rether: Option<S<Rether>>,
    /// `[[fault]]`: node failures during the run (any node: `kind =
    /// "kill"`; RETHER stations also take the `[[rether.fault]]` kinds).
    #[serde(default, rename = "fault")]
    pub faults: Vec<S<Fault>>,
    pub paper: Option<S<Paper>>,
}

/// `[stsdr]`: the distributed router made of the `stsdr-*` nodes (seed 003).
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Stsdr {
    /// "sds", "mds", "lds" or "nowfq".
    pub variant: Option<S<String>>,
    /// l of M-DS (slots per queue) and L-DS (packets per burst).
    pub l: Option<S<i64>>,
    pub t_br: Option<S<String>>,
    pub weights: Option<S<Vec<i64>>>,
    pub classes: Option<S<i64>>,
    pub queue_limit: Option<S<i64>>,
    pub outlinks: S<Vec<S<String>>>,
    pub vlan: Option<S<i64>>,
    /// "deterministic" or "random".
    pub tie: Option<S<String>>,
    /// "forwarders" or "outlinks".
    pub proposer: Option<S<String>>,
    /// L-DS ranking: "head" or "start".
    pub lds_rank: Option<S<String>>,
    pub cycle_guard: Option<S<String>>,
    pub mtu: Option<S<i64>>,
    pub fe_timeout: Option<S<String>>,
    pub master_timeout: Option<S<String>>,
    pub balancer_timeout: Option<S<String>>,
    pub heartbeat: Option<S<String>>,
    pub ds_processing: Option<S<String>>,
    pub ds_loss: Option<S<f64>>,
    pub costs: Option<S<StsdrCosts>>,
}

/// `costs = { ... }`: CPU time of the cycle's phases.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct StsdrCosts {
    /// "paper": phase 1 = 105 µs in all (T_br included), 600 ns, 450 ns.
    pub preset: Option<S<String>>,
    pub ds_build: Option<S<String>>,
    pub phase1: Option<S<String>>,
    pub phase2: Option<S<String>>,
    pub phase3: Option<S<String>>,
}

/// `[rether]`: parameters shared by the scenario's RETHER stations.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct Rether {
    pub enabled: Option<S<bool>>,
    pub trt: Option<S<String>>,
    pub t_nrt: Option<S<String>>,
    pub a: Option<S<String>>,
    pub b: Option<S<String>>,
    pub t_token: Option<S<String>>,
    pub copy_per_packet: Option<S<String>>,
    pub copy_per_byte: Option<S<String>>,
    pub nrt_policy: Option<S<SizeSpec>>,
    pub late_threshold: Option<S<String>>,
    pub buffers: Option<S<i64>>,
    pub ack_stagger: Option<S<String>>,
    pub ack_margin: Option<S<String>>,
    pub boot: Option<S<String>>,
    pub fault: Option<Vec<S<Fault>>>,
}

/// `[[fault]]` and `[[rether.fault]]`: a failure injected at a node.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// The node the fault happens at; `kind = "stall"` also takes `nodes`.
    pub node: Option<S<String>>,
    /// `kind = "stall"`: nodes stalled together (one CPU running them all).
    pub nodes: Option<S<Vec<String>>>,
    pub at: S<String>,
    pub kind: S<String>,
    pub restart: Option<S<String>>,
    pub count: Option<S<i64>>,
    /// `kind = "stall"`: how long each stall lasts.
    #[serde(rename = "for")]
    pub for_: Option<S<String>>,
    /// `kind = "stall"`: the period of repeated stalls.
    pub every: Option<S<String>>,
    /// `kind = "stall"`: no repeated stall starts at or after this.
    pub until: Option<S<String>>,
}

/// `[htb]`: the class tree of `scheduler = "htb"` ports.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Htb {
    pub classes: S<Vec<HtbClass>>,
    pub default: Option<S<String>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct HtbClass {
    pub name: String,
    pub parent: Option<String>,
    pub rate: String,
    pub ceil: Option<String>,
    pub prio: Option<i64>,
    pub burst: Option<i64>,
}

/// `[taprio]`: the gate control list of `scheduler = "taprio"` ports
/// (IEEE 802.1Qbv).
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Taprio {
    pub base_time: Option<S<String>>,
    pub entries: S<Vec<TaprioEntry>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct TaprioEntry {
    pub duration: String,
    pub open: Vec<String>,
}

/// `[diffserv]`: PHB scheduler settings, DSCP → PHB overrides, traffic
/// profiles and multi-field rules of edge routers (seed 004, RFC 2475).
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct DiffServ {
    pub ef_rate: Option<S<String>>,
    pub ef_burst: Option<S<i64>>,
    pub af_weights: Option<S<Vec<i64>>>,
    pub be_weight: Option<S<i64>>,
    pub wred: Option<bool>,
    pub phb: Option<S<BTreeMap<String, String>>>,
    #[serde(default, rename = "profile")]
    pub profiles: Vec<S<DsProfile>>,
    #[serde(default, rename = "rule")]
    pub rules: Vec<S<DsRule>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct DsProfile {
    pub name: S<String>,
    pub mark: Option<S<String>>,
    pub ladder: Option<S<Vec<DsStep>>>,
    pub tcm: Option<S<DsTcm>>,
    pub exceed: Option<S<String>>,
    pub exceed_dscp: Option<S<String>>,
    pub shape_queue: Option<S<i64>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct DsStep {
    pub dscp: String,
    pub rate: String,
    pub burst: i64,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct DsTcm {
    pub kind: String,
    pub cir: String,
    pub cbs: i64,
    pub ebs: Option<i64>,
    pub pir: Option<String>,
    pub pbs: Option<i64>,
    #[serde(default)]
    pub aware: bool,
    pub green: String,
    pub yellow: String,
    pub red: String,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn items(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// A whole number, or a word such as "none" (the loader checks which).
#[derive(Debug, Clone)]
pub enum CountOrNone {
    Count(i64),
    Word(String),
}

impl<'de> Deserialize<'de> for CountOrNone {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = CountOrNone;
            // What serde's "invalid type: ..., expected ..." names.
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a whole number or \"none\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<CountOrNone, E> {
                Ok(CountOrNone::Count(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<CountOrNone, E> {
                Ok(CountOrNone::Count(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<CountOrNone, E> {
                Ok(CountOrNone::Word(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum PortSpec {
    One(i64),
    Range(Vec<i64>),
}

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum ProtoSpec {
    Name(String),
    Number(i64),
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct DsRule {
    pub name: S<String>,
    pub nodes: Option<S<Vec<String>>>,
    pub profile: S<String>,
    pub src: Option<S<String>>,
    pub dst: Option<S<String>>,
    pub proto: Option<S<ProtoSpec>>,
    pub sport: Option<S<PortSpec>>,
    pub dport: Option<S<PortSpec>>,
    pub dscp: Option<S<OneOrMany>>,
    #[serde(rename = "in")]
    pub in_: Option<S<String>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub name: S<String>,
    #[serde(default)]
    pub description: String,
    pub duration: S<String>,
    #[serde(default)]
    pub warmup: Option<S<String>>,
    #[serde(default)]
    pub drain: Option<S<String>>,
    #[serde(default)]
    pub seed: Option<u64>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    #[serde(default)]
    pub router: RouterOpts,
    #[serde(default)]
    pub link: LinkOpts,
    #[serde(default)]
    pub flow: FlowOpts,
}

#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct RouterOpts {
    pub scheduler: Option<S<String>>,
    pub processing: Option<S<Processing>>,
    pub queue_packets: Option<S<i64>>,
    pub queue_bytes: Option<S<i64>>,
    pub input_queue: Option<S<i64>>,
    /// TDP forwarding delay in TFs (immediate forwarding).
    pub tdp_delay: Option<S<i64>>,
    /// How late a TDP router serves each TF's interrupt.
    pub tf_irq_latency: Option<S<Processing>>,
    /// The time a TDP router takes per interface when it starts a TF's
    /// transmissions one interface after another.
    pub tf_port_service: Option<S<String>>,
    pub clock_offset: Option<S<String>>,
    pub clock_drift_ppm: Option<S<f64>>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum Processing {
    Fixed(String),
    Dist(ProcDist),
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ProcDist {
    pub dist: String,
    pub min: Option<String>,
    pub max: Option<String>,
    pub mean: Option<String>,
    pub base: Option<String>,
}

#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct LinkOpts {
    pub capacity: Option<S<String>>,
    pub delay: Option<S<String>>,
    pub fcs: Option<S<i64>>,
    pub preamble: Option<S<i64>>,
    pub ifg: Option<S<i64>>,
}

#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct FlowOpts {
    pub size: Option<S<SizeSpec>>,
    pub rate: Option<S<String>>,
    pub pattern: Option<S<String>>,
    pub on: Option<S<String>>,
    pub off: Option<S<String>>,
    pub start: Option<S<String>>,
    pub stop: Option<S<String>>,
    pub ttl: Option<S<i64>>,
    pub dscp: Option<S<DscpSpec>>,
    pub tdp: Option<S<bool>>,
    pub echo: Option<S<bool>>,
    /// Default path for flows that give none.
    pub path: Option<S<Vec<S<String>>>>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum SizeSpec {
    Bytes(i64),
    Named(String),
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Tdp {
    pub tf: S<String>,
    pub tfs_per_tc: S<i64>,
    #[serde(default)]
    pub tcs_per_sc: Option<S<i64>>,
    #[serde(default)]
    pub padding: Option<bool>,
    #[serde(default)]
    pub max_lag: Option<S<i64>>,
    #[serde(default)]
    pub late_limit: Option<S<CountOrNone>>,
    #[serde(default)]
    pub shaper_queue: Option<S<i64>>,
    #[serde(default)]
    pub shaper_max_hold: Option<S<String>>,
}

// `[[node]]`, `[[link]]` and `[[flow]]` repeat the keys of their
// `[defaults.*]` tables instead of `#[serde(flatten)]`-ing them: serde
// cannot combine `flatten` with `deny_unknown_fields`, and unknown keys
// must stay errors. Each `opts()` merges an entry over its defaults.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: S<String>,
    pub kind: S<String>,
    pub scheduler: Option<S<String>>,
    pub processing: Option<S<Processing>>,
    pub queue_packets: Option<S<i64>>,
    pub queue_bytes: Option<S<i64>>,
    pub input_queue: Option<S<i64>>,
    pub tdp_delay: Option<S<i64>>,
    pub tf_irq_latency: Option<S<Processing>>,
    pub tf_port_service: Option<S<String>>,
    pub clock_offset: Option<S<String>>,
    pub clock_drift_ppm: Option<S<f64>>,
    /// Settings of a `kind = "switch"` node.
    pub switch: Option<S<SwitchOpts>>,
    /// A `kind = "rether"` station's id on its segment.
    pub station_id: Option<S<i64>>,
}

/// `switch = { ... }` of a switch node.
#[derive(Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct SwitchOpts {
    pub latency: Option<S<String>>,
    pub queue_packets: Option<S<i64>>,
    pub queue_bytes: Option<S<i64>>,
    pub fdb_size: Option<S<i64>>,
    pub aging: Option<S<String>>,
    pub mtu: Option<S<i64>>,
}

/// `[[segment]]`: a shared Ethernet bus and the stations on it.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Segment {
    pub name: S<String>,
    pub nodes: S<Vec<S<String>>>,
    pub capacity: Option<S<String>>,
    /// End-to-end propagation delay.
    pub propagation: Option<S<String>>,
    /// Each station's distance from one end, as propagation time.
    pub positions: Option<S<Vec<String>>>,
    pub subnet: Option<S<String>>,
    pub slot_bits: Option<S<i64>>,
    pub jam_bits: Option<S<i64>>,
    pub attempt_limit: Option<S<i64>>,
    pub backoff_limit: Option<S<i64>>,
    pub fcs: Option<S<i64>>,
    pub preamble: Option<S<i64>>,
    pub ifg: Option<S<i64>>,
}

impl Node {
    /// This node's settings over the file's defaults.
    pub fn opts(&self, d: &RouterOpts) -> RouterOpts {
        RouterOpts {
            scheduler: self.scheduler.clone().or(d.scheduler.clone()),
            processing: self.processing.clone().or(d.processing.clone()),
            queue_packets: self.queue_packets.clone().or(d.queue_packets.clone()),
            queue_bytes: self.queue_bytes.clone().or(d.queue_bytes.clone()),
            input_queue: self.input_queue.clone().or(d.input_queue.clone()),
            tdp_delay: self.tdp_delay.clone().or(d.tdp_delay.clone()),
            tf_irq_latency: self.tf_irq_latency.clone().or(d.tf_irq_latency.clone()),
            tf_port_service: self.tf_port_service.clone().or(d.tf_port_service.clone()),
            clock_offset: self.clock_offset.clone().or(d.clock_offset.clone()),
            clock_drift_ppm: self.clock_drift_ppm.clone().or(d.clock_drift_ppm.clone()),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Link {
    pub a: S<String>,
    pub b: S<String>,
    pub name: Option<S<String>>,
    pub subnet: Option<S<String>>,
    /// Access VLAN at the switch end.
    pub vlan: Option<S<i64>>,
    pub capacity: Option<S<String>>,
    pub delay: Option<S<String>>,
    pub fcs: Option<S<i64>>,
    pub preamble: Option<S<i64>>,
    pub ifg: Option<S<i64>>,
}

impl Link {
    pub fn opts(&self, d: &LinkOpts) -> LinkOpts {
        LinkOpts {
            capacity: self.capacity.clone().or(d.capacity.clone()),
            delay: self.delay.clone().or(d.delay.clone()),
            fcs: self.fcs.clone().or(d.fcs.clone()),
            preamble: self.preamble.clone().or(d.preamble.clone()),
            ifg: self.ifg.clone().or(d.ifg.clone()),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    pub name: S<String>,
    pub from: S<String>,
    pub to: S<String>,
    pub path: Option<S<Vec<S<String>>>>,
    pub loops: Option<S<i64>>,
    pub sport: Option<S<i64>>,
    pub dport: Option<S<i64>>,
    /// Non-immediate forwarding: this flow's own TDP forwarding delay.
    pub tdp_delay: Option<S<i64>>,
    /// Reserved TFs within the TC at the first hop, typed by hand.
    pub slots: Option<S<Vec<i64>>>,
    pub size: Option<S<SizeSpec>>,
    pub rate: Option<S<String>>,
    pub pattern: Option<S<String>>,
    pub on: Option<S<String>>,
    pub off: Option<S<String>>,
    pub start: Option<S<String>>,
    pub stop: Option<S<String>>,
    pub ttl: Option<S<i64>>,
    pub dscp: Option<S<DscpSpec>>,
    pub tdp: Option<S<bool>>,
    /// The destination echoes every packet back: delays are round trips.
    pub echo: Option<S<bool>>,
    /// A RETHER real-time session between two stations.
    pub rt: Option<S<bool>>,
}

/// One `[[flow]]` table parsed on its own (see `load::split`).
#[derive(Deserialize, Debug)]
pub struct FlowTable {
    #[serde(default)]
    pub flow: Vec<S<Flow>>,
}

fn shift<T>(s: S<T>, by: usize) -> S<T> {
    let r = s.span();
    S::new(r.start + by..r.end + by, s.into_inner())
}

fn shift_opt<T>(s: Option<S<T>>, by: usize) -> Option<S<T>> {
    s.map(|s| shift(s, by))
}

impl Flow {
    /// The flow with every span moved `by` bytes on: parsed from a piece
    /// of the file, it now points into the whole file.
    pub fn shifted(self, by: usize) -> Flow {
        Flow {
            name: shift(self.name, by),
            from: shift(self.from, by),
            to: shift(self.to, by),
            path: self.path.map(|p| {
                let r = p.span();
                let v = p.into_inner().into_iter().map(|x| shift(x, by)).collect();
                S::new(r.start + by..r.end + by, v)
            }),
            loops: shift_opt(self.loops, by),
            sport: shift_opt(self.sport, by),
            dport: shift_opt(self.dport, by),
            tdp_delay: shift_opt(self.tdp_delay, by),
            slots: shift_opt(self.slots, by),
            size: shift_opt(self.size, by),
            rate: shift_opt(self.rate, by),
            pattern: shift_opt(self.pattern, by),
            on: shift_opt(self.on, by),
            off: shift_opt(self.off, by),
            start: shift_opt(self.start, by),
            stop: shift_opt(self.stop, by),
            ttl: shift_opt(self.ttl, by),
            dscp: shift_opt(self.dscp, by),
            tdp: shift_opt(self.tdp, by),
            echo: shift_opt(self.echo, by),
            rt: shift_opt(self.rt, by),
        }
    }
}

#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum DscpSpec {
    Number(i64),
    Name(String),
}

impl Flow {
    pub fn opts(&self, d: &FlowOpts) -> FlowOpts {
        FlowOpts {
            size: self.size.clone().or(d.size.clone()),
            rate: self.rate.clone().or(d.rate.clone()),
            pattern: self.pattern.clone().or(d.pattern.clone()),
            on: self.on.clone().or(d.on.clone()),
            off: self.off.clone().or(d.off.clone()),
            start: self.start.clone().or(d.start.clone()),
            stop: self.stop.clone().or(d.stop.clone()),
            ttl: self.ttl.clone().or(d.ttl.clone()),
            dscp: self.dscp.clone().or(d.dscp.clone()),
            tdp: self.tdp.clone().or(d.tdp.clone()),
            echo: self.echo.clone().or(d.echo.clone()),
            path: self.path.clone().or(d.path.clone()),
        }
    }
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RouteEntry {
    pub node: S<String>,
    pub prefix: S<String>,
    pub via: S<String>,
    pub ttl: Option<S<Vec<i64>>>,
}

/// `[paper]`: numbers a paper reports for this scenario, printed beside
/// qosnet's: one per-flow column (`metric`, `unit`, `values`), whole
/// tables of several columns (`[[paper.table]]`), or both.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Paper {
    pub source: String,
    pub metric: Option<S<String>>,
    pub unit: Option<S<String>>,
    pub values: Option<S<BTreeMap<String, f64>>>,
    #[serde(default, rename = "table")]
    pub tables: Vec<S<PaperTable>>,
}

/// `[[paper.table]]`: one of the paper's tables, rows of cells under named
/// columns; a row's first cell is its key.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct PaperTable {
    pub name: S<String>,
    pub title: Option<String>,
    pub columns: S<Vec<String>>,
    pub units: Option<S<Vec<String>>>,
    pub rows: Vec<S<Vec<PaperCell>>>,
}

/// A table cell: a number, or text where the paper gives text (TOS byte
/// sets, approximate claims such as "~7 ms").
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(untagged)]
pub enum PaperCell {
    Number(f64),
    Text(String),
}
