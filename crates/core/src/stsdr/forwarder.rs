//! An STSDR forwarder (FE_i): routing, the N × K class queues Q_ijk, and
//! the three-phase distributed WFQ cycle (Khan, Sahoo & Manjunath §IV,
//! Algorithm 1), as a sans-IO [`Node`] with one port to the T-switch.
//!
//! **Forwarding** (§I, Fig. 1): a frame from a load balancer is validated
//! (RFC 1812 checks as in [`crate::router`]), routed — the route's `port`
//! names the outgoing link OL_j, whose next-hop router is reached through
//! the switch — its TTL decremented with an incremental checksum update,
//! classified (DSCP → class table, or a custom classifier) and appended to
//! Q_ijk, bounded and counted, with an arrival stamp on this forwarder's
//! own clock. Next hops are resolved by ARP (RFC 826) unless configured.
//!
//! **The cycle** ([`Variant::Sds`], §IV):
//! 1. *Phase 1.* The master snapshots its queues, broadcasts DS_master
//!    (after `costs.ds_build`) and waits T_br after its frame; a slave that
//!    hears the master (or, if the master's frame was lost, another slave
//!    of a newer cycle — §IV-A) snapshots, answers with its own DS and
//!    waits T_br after the frame it heard. The snapshot is this forwarder's
//!    entry in the shared [`View`]; other forwarders' entries come from
//!    their DS frames. A forwarder not heard this cycle keeps its stale
//!    entry (§IV-A: "reuse stale information"); one silent for
//!    `fe_timeout` is dropped from the matching until heard again.
//! 2. *Phases 2 and 3* run after `costs.phase1 + phase2 + phase3` of CPU
//!    time: [`Dwfq::round`] on the view gives the matching; a matched
//!    forwarder sends its pick P_ij, and every forwarder updates every V_j.
//! 3. The round is over when the longest matched transmission would be
//!    done: each forwarder knows every pick's length and every link's rate
//!    (configuration), so it computes the time the last bit leaves the
//!    slowest path — its own port at `rate_bps`, then the switch's port to
//!    OL_j, store and forward (`round_time`). The master then starts
//!    the next cycle (after `cycle_guard`).
//!
//! [`Variant::Mds`] runs up to l rounds per exchange on l-deep state,
//! each round after `phase2 + phase3` of CPU time; [`Variant::Lds`] sends
//! a burst from the matched queue (the DS length field then carries the
//! burst's bytes, so every forwarder charges it exactly); [`Variant::NoWfq`]
//! sends every packet as soon as it is queued, oldest first (the paper's
//! throughput baseline), and broadcasts heartbeats so load balancers can
//! tell it is alive.
//!
//! **Robustness beyond the paper** (documented in `docs/stsdr-design.md`):
//! the master's DS carries the clock offsets S_jk − V_j, which slaves
//! adopt, so clocks that diverged after a lost frame agree again one cycle
//! later; DS frames carry the cycle number, so a late frame is counted
//! (`ds_late`) rather than mistaken for a fresh one; the master is the
//! lowest live FE id — a slave that has not heard the master for
//! `master_timeout` declares it dead and the lowest id it still believes
//! alive takes over, and a master that hears a master frame from a lower
//! id steps down. Every event is a counter.

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use super::sched::{
    Decision, Dwfq, Entry, FeState, LazyRank, Proposer, RoundKey, TieBreak, View, VirtualClocks,
};
use super::wire::{self as ds, Expect, Header, Vlan};
use super::{Dims, Rx};
use crate::arp::{self, Arp, ArpConfig, ARP_REPLY, ARP_REQUEST};
use crate::icmp;
use crate::node::{Ledger, Node, PortReport, Transmit};
use crate::packet::{Framing, Meta, Packet};
use crate::route::RouteTable;
use crate::tdp::FlowKey;
use crate::time::{Duration, Instant};
use crate::wire::{self, Ipv4Info, MacAddr, ETH_HDR};

/// An outgoing link: the switch port towards a next-hop router.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutLink {
    pub name: String,
    /// The next-hop router every packet for this link is sent to.
    pub next_hop: Ipv4Addr,
    /// Its MAC, if known statically (the simulator); else resolved by ARP.
    pub mac: Option<MacAddr>,
    /// The link's rate, bit/s: how long the switch takes to send a frame.
    pub rate_bps: u64,
}

/// What goes in a DS frame and what a matched forwarder sends (§V).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Variant {
    /// S-DS: the head of each queue; one packet per matched forwarder.
    #[default]
    Sds,
    /// M-DS: the first `slots` packets of each queue, and up to `slots`
    /// matching rounds per exchange (Table III).
    Mds { slots: u16 },
    /// L-DS: the matched queue sends up to `packets` packets, stopping
    /// once their lengths reach `packets`·64 bytes (Table IV).
    Lds { packets: u16 },
    /// No WFQ: forward as soon as processed (the throughput baseline).
    NoWfq,
}

impl Variant {
    pub fn name(&self) -> &'static str {
        match self {
            Variant::Sds => "stsdr-sds",
            Variant::Mds { .. } => "stsdr-mds",
            Variant::Lds { .. } => "stsdr-lds",
            Variant::NoWfq => "stsdr-nowfq",
        }
    }
    /// l: slots per queue in a DS frame (0 for heartbeats).
    pub fn slots(&self) -> usize {
        match *self {
            Variant::Sds | Variant::Lds { .. } => 1,
            Variant::Mds { slots } => slots as usize,
            Variant::NoWfq => 0,
        }
    }
    /// Matching rounds per DS exchange.
    pub fn rounds(&self) -> usize {
        match *self {
            Variant::Mds { slots } => slots as usize,
            _ => 1,
        }
    }
}

/// CPU time of the cycle's phases, which delay the forwarder's decisions
/// (§V-A measured phase 1 ≈ 105 µs, phase 2 ≈ 600 ns, phase 3 ≈ 450 ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseCosts {
    /// From the cycle's trigger (master: cycle start; slave: hearing the
    /// master) to the DS frame leaving: assembling it.
    pub ds_build: Duration,
    /// Phase 1 work after the T_br wait (decoding the collected state):
    /// phase 1's wall time is `ds_build` + T_br + this at the master.
    pub phase1: Duration,
    /// Phase 2: per-FE WFQ and the preference lists (each round).
    pub phase2: Duration,
    /// Phase 3: stable matching (each round).
    pub phase3: Duration,
}

impl PhaseCosts {
    /// The paper's phase 2 and 3 costs; phase 1's 105 µs includes its T_br
    /// wait, so only the part above T_br belongs in `phase1`.
    pub fn paper(t_br: Duration) -> Self {
        PhaseCosts {
            ds_build: Duration::ZERO,
            phase1: Duration::from_micros(105) - t_br,
            phase2: Duration::from_nanos(600),
            phase3: Duration::from_nanos(450),
        }
    }
}

/// Configuration of one forwarder.
#[derive(Clone, Debug)]
pub struct ForwarderConfig {
    pub name: String,
    /// This forwarder's FE id, `0..forwarders` (the 2-byte id of §IV-A).
    pub id: u16,
    /// M.
    pub forwarders: u16,
    pub mac: MacAddr,
    /// Own address on the switch subnet, the ARP sender address;
    /// 0.0.0.0 sends RFC 5227-style probes (not the router's external
    /// address, which belongs to the load balancer).
    pub ip: Ipv4Addr,
    /// Rate of this forwarder's port to the switch, bit/s.
    pub rate_bps: u64,
    pub framing: Framing,
    /// The N outgoing links, in OL index order.
    pub outlinks: Vec<OutLink>,
    /// w_k, one per class: K = `weights.len()`.
    pub weights: Vec<u32>,
    /// DSCP → class (64 entries), unless a custom classifier is set.
    pub dscp_class: Vec<u16>,
    /// Packets per Q_ijk (10 000 in the paper).
    pub queue_limit: usize,
    pub variant: Variant,
    pub tie: TieBreak,
    pub proposer: Proposer,
    /// What L-DS ranks a burst by (the head packet, the paper's rule, or
    /// the class's start tag).
    pub lds_rank: LazyRank,
    /// T_br: the wait after the master's frame (§IV-A, Table II).
    pub t_br: Duration,
    pub costs: PhaseCosts,
    /// Extra wait after the longest transmission before the master starts
    /// the next cycle (switch latency, safety).
    pub cycle_guard: Duration,
    /// Extra wait after a cycle that sent nothing.
    pub idle_gap: Duration,
    /// A forwarder silent this long is dropped from the matching;
    /// `None`: 8 worst-case cycles (at least 1 ms).
    pub fe_timeout: Option<Duration>,
    /// A slave that has not heard the master this long starts an
    /// election; `None`: 8 worst-case cycles (at least 1 ms).
    pub master_timeout: Option<Duration>,
    /// The internal VLAN DS frames are tagged with (`None`: untagged).
    pub vlan: Option<Vlan>,
    /// Payload bytes a DS frame may use (1500, or a jumbo MTU).
    pub mtu: usize,
    /// Resolution of the 4-byte arrival stamps.
    pub stamp_unit: Duration,
    /// No-WFQ mode: interval between heartbeat DS frames (0: none).
    pub heartbeat: Duration,
    pub arp: ArpConfig,
    /// Fault injection: the probability (0..=1) that this forwarder loses
    /// a DS frame it receives (counted `ds_loss_injected`), drawn from a
    /// stream seeded by `loss_seed` and the FE id, so every run replays.
    /// §IV-A's lost broadcasts, for the DS-loss-vs-fairness sweep; each
    /// receiver loses independently, so views really diverge.
    pub ds_loss: f64,
    pub loss_seed: u64,
}

impl ForwarderConfig {
    /// Defaults: 1 Gb/s, S-DS, equal weights, T_br = 72 µs (the paper's
    /// setting for Tables I, III and IV), no CPU costs, 10 000 packets per
    /// queue, DS frames in VLAN 4000, 100 ns stamps, DSCP class selector
    /// (precedence) → class, capped at K − 1.
    pub fn new(
        name: impl Into<String>,
        id: u16,
        forwarders: u16,
        mac: MacAddr,
        outlinks: Vec<OutLink>,
        classes: usize,
    ) -> Self {
        let top = classes.saturating_sub(1) as u16;
        ForwarderConfig {
            name: name.into(),
            id,
            forwarders,
            mac,
            ip: Ipv4Addr::UNSPECIFIED,
            rate_bps: 1_000_000_000,
            framing: Framing::default(),
            outlinks,
            weights: vec![1; classes],
            dscp_class: (0..64u16).map(|d| (d >> 3).min(top)).collect(),
            queue_limit: 10_000,
            variant: Variant::Sds,
            tie: TieBreak::Deterministic,
            proposer: Proposer::Forwarders,
            lds_rank: LazyRank::Head,
            t_br: Duration::from_micros(72),
            costs: PhaseCosts::default(),
            cycle_guard: Duration::ZERO,
            idle_gap: Duration::ZERO,
            fe_timeout: None,
            master_timeout: None,
            vlan: Some(Vlan::new(4000)),
            mtu: ds::MTU,
            stamp_unit: Duration::from_nanos(100),
            heartbeat: Duration::from_millis(1),
            arp: ArpConfig::default(),
            ds_loss: 0.0,
            loss_seed: 0,
        }
    }
    pub fn dims(&self) -> Dims {
        Dims::new(self.forwarders as usize, self.outlinks.len(), self.weights.len())
    }
    /// Largest frame a packet may be (MTU plus Ethernet and VLAN headers).
    fn max_frame(&self) -> u64 {
        self.mtu as u64 + ETH_HDR as u64 + 4
    }
    /// L-DS byte budget: l·64.
    fn burst_budget(&self) -> u64 {
        match self.variant {
            Variant::Lds { packets } => packets as u64 * 64,
            _ => 0,
        }
    }
    /// The longest a cycle can take: T_br, every CPU cost, and each round's
    /// largest transmission on the slowest link.
    pub fn max_cycle(&self) -> Duration {
        let rounds = self.variant.rounds() as u64;
        let unit = match self.variant {
            Variant::Lds { .. } => self.burst_budget() + self.max_frame(),
            _ => self.max_frame(),
        };
        let slowest = self
            .outlinks
            .iter()
            .map(|o| o.rate_bps)
            .min()
            .unwrap_or(1)
            .min(self.rate_bps);
        let per_round = Duration::for_bytes(2 * (unit + 24 * (unit / 60 + 1)), slowest);
        let c = self.costs;
        let mut t = self.t_br + c.ds_build + c.phase1 + self.cycle_guard + self.idle_gap;
        for _ in 0..rounds {
            t += per_round + c.phase2 + c.phase3;
        }
        t
    }
    fn timeout(&self, set: Option<Duration>) -> Duration {
        set.unwrap_or_else(|| Duration(self.max_cycle().0.saturating_mul(8)).max(Duration::from_millis(1)))
    }
    /// Checks everything [`Forwarder::new`] relies on.
    pub fn validate(&self) -> Result<(), String> {
        let d = self.dims();
        d.validate()?;
        let what = format!("forwarder {}", self.name);
        if !(0.0..=1.0).contains(&self.ds_loss) {
            return Err(format!(
                "{what}: ds_loss {} is not a probability in 0..=1",
                self.ds_loss
            ));
        }
        if self.id >= self.forwarders {
            return Err(format!(
                "{what}: id {} is not below M = {}",
                self.id, self.forwarders
            ));
        }
        if self.rate_bps == 0 {
            return Err(format!("{what}: port rate must be > 0 bit/s"));
        }
        if let Some(o) = self.outlinks.iter().find(|o| o.rate_bps == 0) {
            return Err(format!("{what}: outgoing link {} has rate 0", o.name));
        }
        if self.dscp_class.len() != 64 {
            return Err(format!(
                "{what}: the DSCP table needs 64 entries, not {}",
                self.dscp_class.len()
            ));
        }
        if let Some(dscp) = self.dscp_class.iter().position(|c| *c as usize >= d.classes) {
            return Err(format!("{what}: DSCP {dscp} maps to a class ≥ K = {}", d.classes));
        }
        if self.queue_limit == 0 {
            return Err(format!("{what}: queue limit must be > 0"));
        }
        if self.stamp_unit == Duration::ZERO {
            return Err(format!("{what}: stamp unit must be > 0"));
        }
        if let Some(v) = self.vlan {
            v.validate()?;
        }
        if self.mtu < 68 || self.mtu > 65_000 {
            return Err(format!("{what}: MTU {} is not in 68..=65000", self.mtu));
        }
        let fit = ds::max_slots(d.outlinks, d.classes, self.mtu);
        match self.variant {
            Variant::Mds { slots: 0 } => return Err(format!("{what}: M-DS needs l ≥ 1")),
            Variant::Lds { packets: 0 } => return Err(format!("{what}: L-DS needs l ≥ 1")),
            Variant::Lds { .. } if self.burst_budget() + self.max_frame() > u16::MAX as u64 => {
                return Err(format!(
                    "{what}: an L-DS burst of l·64 bytes plus one frame must fit the 2-byte length field"
                ))
            }
            Variant::NoWfq => {}
            v if v.slots() > fit => {
                return Err(format!(
                "{what}: {} slots per queue do not fit a {}-byte DS frame (at most {fit} for N = {}, K = {})",
                v.slots(),
                self.mtu,
                d.outlinks,
                d.classes
            ))
            }
            _ => {}
        }
        if self.variant != Variant::NoWfq {
            let floor = Duration(self.max_cycle().0.saturating_mul(2));
            for (name, t) in [
                ("fe_timeout", self.fe_timeout),
                ("master_timeout", self.master_timeout),
            ] {
                if let Some(t) = t.filter(|t| *t < floor) {
                    return Err(format!(
                        "{what}: {name} {t} is shorter than two worst-case cycles ({floor}): live forwarders would be declared dead"
                    ));
                }
            }
        }
        VirtualClocks::new(1, self.weights.clone()).map(|_| ())
    }
}

/// Per-queue counters of Q_ijk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    pub enq_pkts: u64,
    pub sent_pkts: u64,
    pub sent_bytes: u64,
    pub drops: u64,
}

/// One round as this forwarder computed it (kept when a log is enabled
/// with [`Forwarder::set_round_log`]): what every copy must agree on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundRecord {
    pub cycle: u32,
    pub round: u16,
    /// When this forwarder decided.
    pub at: Instant,
    /// Z: the link each forwarder is matched to.
    pub matching: Vec<Option<usize>>,
    /// (FE, OL, class, entry) of every matched pick.
    pub picks: Vec<(usize, usize, usize, Entry)>,
}

/// A custom classifier: the class of a validated IPv4 frame.
pub type Classify = Box<dyn FnMut(&Ipv4Info, &[u8]) -> u16 + Send>;

struct Queued {
    pkt: Packet,
    stamp: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Between cycles.
    Idle,
    /// Phase 1: DS frames are being collected until `deadline`.
    Exchange { deadline: Instant },
    /// Phases 2 and 3 (after phase 1's tail for round 0) until `at`.
    Compute { at: Instant, round: u16 },
    /// Round `round`'s transmissions are done at `until`.
    Transmit { until: Instant, round: u16 },
}

#[derive(Clone, Copy, Debug)]
struct ArpPending {
    tries: u32,
    next_at: Instant,
}

/// An STSDR forwarder (see the module docs).
pub struct Forwarder {
    cfg: ForwarderConfig,
    /// The fault injector's random stream (splitmix64 state).
    loss_rng: u64,
    /// Traffic copies (a flooding switch's) for other stations, filtered.
    filtered_traffic: u64,
    dims: Dims,
    pub routes: RouteTable,
    classifier: Option<Classify>,
    dwfq: Dwfq,
    fe_timeout: Duration,
    master_timeout: Duration,
    queues: Vec<VecDeque<Queued>>,
    /// L-DS: packets of each queue's burst as reported in the last DS.
    burst: Vec<usize>,
    stats: Vec<ClassStats>,
    view: View,
    busy_until: Instant,
    /// Control frames (DS, ARP) and when each may leave.
    ctrl: VecDeque<(Instant, Vec<u8>)>,
    /// Data frames the matching sent this round, with their queue.
    txq: VecDeque<(usize, Packet)>,
    ol_mac: Vec<Option<MacAddr>>,
    arp_pending: Vec<Option<ArpPending>>,
    started: bool,
    master: usize,
    cycle: u32,
    /// The master that opened the current cycle: a cycle is (master,
    /// number), so a revived master reusing a number is not taken for it.
    cycle_from: usize,
    phase: Phase,
    /// Master: when the next cycle starts.
    next_cycle_at: Option<Instant>,
    /// The current cycle sent nothing so far.
    cycle_idle: bool,
    master_heard_at: Instant,
    last_heard: Vec<Instant>,
    alive: Vec<bool>,
    heard: Vec<bool>,
    next_heartbeat: Instant,
    last_decision: Option<Decision>,
    log: VecDeque<RoundRecord>,
    log_cap: usize,
    counters: BTreeMap<&'static str, u64>,
    drops: BTreeMap<&'static str, u64>,
    tx_pkts: u64,
    tx_bytes: u64,
    tx_wire_bytes: u64,
}

const CTRL_LIMIT: usize = 64;

/// `a` is a later cycle than `b` (RFC 1982 serial-number order).
fn newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl Forwarder {
    /// A forwarder with its routes (`Route::port` is the outgoing link
    /// index j; see the module docs).
    pub fn new(cfg: ForwarderConfig, routes: RouteTable) -> Result<Self, String> {
        cfg.validate()?;
        if let Some(r) = routes.iter().find(|r| r.port as usize >= cfg.outlinks.len()) {
            return Err(format!(
                "forwarder {}: route {r} names outgoing link {} of {}",
                cfg.name,
                r.port,
                cfg.outlinks.len()
            ));
        }
        let dims = cfg.dims();
        let m = dims.forwarders;
        Ok(Forwarder {
            filtered_traffic: 0,
            dwfq: {
                let mut d = Dwfq::new(dims, cfg.weights.clone(), cfg.tie, cfg.proposer)?;
                d.set_lazy(matches!(cfg.variant, Variant::Lds { .. }));
                d.set_lazy_rank(cfg.lds_rank);
                d
            },
            fe_timeout: cfg.timeout(cfg.fe_timeout),
            master_timeout: cfg.timeout(cfg.master_timeout),
            queues: (0..dims.queues()).map(|_| VecDeque::new()).collect(),
            burst: vec![0; dims.queues()],
            stats: vec![ClassStats::default(); dims.queues()],
            view: View::new(dims),
            busy_until: Instant::ZERO,
            ctrl: VecDeque::new(),
            txq: VecDeque::new(),
            ol_mac: cfg.outlinks.iter().map(|o| o.mac).collect(),
            arp_pending: vec![None; dims.outlinks],
            started: false,
            master: 0,
            cycle: 0,
            cycle_from: 0,
            phase: Phase::Idle,
            next_cycle_at: None,
            cycle_idle: true,
            master_heard_at: Instant::ZERO,
            last_heard: vec![Instant::ZERO; m],
            alive: vec![true; m],
            heard: vec![false; m],
            next_heartbeat: Instant::ZERO,
            loss_rng: cfg.loss_seed ^ (cfg.id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            last_decision: None,
            log: VecDeque::new(),
            log_cap: 0,
            counters: BTreeMap::new(),
            drops: BTreeMap::new(),
            tx_pkts: 0,
            tx_bytes: 0,
            tx_wire_bytes: 0,
            routes,
            classifier: None,
            dims,
            cfg,
        })
    }

    pub fn config(&self) -> &ForwarderConfig {
        &self.cfg
    }
    pub fn id(&self) -> usize {
        self.cfg.id as usize
    }
    /// Replace the DSCP table by a custom classifier (a class ≥ K is
    /// dropped and counted as `bad_class`).
    pub fn set_classifier(&mut self, c: Classify) {
        self.classifier = Some(c);
    }
    /// Keep the last `cap` rounds (0: none) for [`rounds`](Self::rounds).
    pub fn set_round_log(&mut self, cap: usize) {
        self.log_cap = cap;
        while self.log.len() > cap {
            self.log.pop_front();
        }
    }
    pub fn rounds(&self) -> &VecDeque<RoundRecord> {
        &self.log
    }
    pub fn last_decision(&self) -> Option<&Decision> {
        self.last_decision.as_ref()
    }
    pub fn view(&self) -> &View {
        &self.view
    }
    pub fn clocks(&self) -> &VirtualClocks {
        self.dwfq.clocks()
    }
    pub fn is_master(&self) -> bool {
        self.master == self.id()
    }
    /// The FE this forwarder takes for master.
    pub fn master(&self) -> usize {
        self.master
    }
    pub fn cycle(&self) -> u32 {
        self.cycle
    }
    /// Which forwarders this one believes alive (itself included).
    pub fn alive(&self) -> &[bool] {
        &self.alive
    }
    /// The effective (fe, master) timeouts.
    pub fn timeouts(&self) -> (Duration, Duration) {
        (self.fe_timeout, self.master_timeout)
    }
    /// Packets in Q_{i,ol,class}.
    pub fn queue_len(&self, ol: usize, class: usize) -> usize {
        self.qi(ol, class).map_or(0, |q| self.queues[q].len())
    }
    pub fn class_stats(&self, ol: usize, class: usize) -> ClassStats {
        self.qi(ol, class)
            .map_or_else(ClassStats::default, |q| self.stats[q])
    }
    /// A counter by name (see [`Node::counters`]), 0 if never incremented.
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }
    /// Data packets dropped for `reason`.
    pub fn dropped(&self, reason: &str) -> u64 {
        self.drops.get(reason).copied().unwrap_or(0)
    }
    /// Data packets dropped, by reason.
    pub fn drops(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.drops.iter().map(|(k, v)| (*k, *v))
    }
    /// Packets held in class queues and the transmit queue.
    pub fn held(&self) -> usize {
        self.queues.iter().map(|q| q.len()).sum::<usize>() + self.txq.len()
    }

    fn qi(&self, ol: usize, class: usize) -> Option<usize> {
        (ol < self.dims.outlinks && class < self.dims.classes).then_some(ol * self.dims.classes + class)
    }
    /// One Bernoulli(ds_loss) draw (splitmix64, Steele et al. 2014).
    fn draw_loss(&mut self) -> bool {
        self.loss_rng = self.loss_rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.loss_rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 11) as f64 / (1u64 << 53) as f64) < self.cfg.ds_loss
    }

    fn bump(&mut self, name: &'static str) {
        self.add(name, 1);
    }
    fn add(&mut self, name: &'static str, n: u64) {
        *self.counters.entry(name).or_default() += n;
    }
    fn drop_pkt(&mut self, reason: &'static str) {
        *self.drops.entry(reason).or_default() += 1;
    }
    fn stamp(&self, t: Instant) -> u32 {
        (t.0 / self.cfg.stamp_unit.0.max(1)) as u32
    }
    fn wfq_mode(&self) -> bool {
        self.cfg.variant != Variant::NoWfq
    }
    fn expect(&self) -> Expect {
        Expect {
            vid: self.cfg.vlan.map(|v| v.vid),
            dims: Some(self.dims),
        }
    }

    // ----- start-up, timers -------------------------------------------

    fn start(&mut self, now: Instant) {
        if self.started {
            return;
        }
        self.started = true;
        self.master_heard_at = now;
        self.last_heard.iter_mut().for_each(|t| *t = now);
        self.next_heartbeat = now;
        if self.wfq_mode() && self.is_master() {
            self.next_cycle_at = Some(now);
        }
        for j in 0..self.dims.outlinks {
            if self.ol_mac[j].is_none() {
                self.arp_request(now, j);
            }
        }
    }

    /// Every timer due at `now`, in time order, each handled at its own
    /// time (a late driver does not shift the cycle).
    fn run_timers(&mut self, now: Instant) {
        self.start(now);
        // Every handler moves its timer forward; the bound only guards
        // against a bug turning into a hang.
        for _ in 0..100_000 {
            let Some((at, what)) = self.next_timer() else {
                return;
            };
            if at > now {
                return;
            }
            match what {
                Timer::Phase => self.phase_timer(at),
                Timer::Cycle => {
                    self.next_cycle_at = None;
                    self.start_cycle_master(at);
                }
                Timer::MasterSilent => self.master_silent(at),
                Timer::Arp => self.arp_timers(at),
                Timer::Heartbeat => self.heartbeat(at),
            }
        }
        self.bump("timer_loop_guard");
    }

    fn next_timer(&self) -> Option<(Instant, Timer)> {
        let phase = match self.phase {
            Phase::Idle => None,
            Phase::Exchange { deadline } => Some(deadline),
            Phase::Compute { at, .. } => Some(at),
            Phase::Transmit { until, .. } => Some(until),
        };
        let silent =
            (self.wfq_mode() && !self.is_master()).then(|| self.master_heard_at + self.master_timeout);
        let arp = self.arp_pending.iter().flatten().map(|p| p.next_at).min();
        let hb = (!self.wfq_mode() && self.cfg.heartbeat > Duration::ZERO).then_some(self.next_heartbeat);
        [
            (phase, Timer::Phase),
            (self.next_cycle_at, Timer::Cycle),
            (silent, Timer::MasterSilent),
            (arp, Timer::Arp),
            (hb, Timer::Heartbeat),
        ]
        .into_iter()
        .filter_map(|(t, w)| t.map(|t| (t, w)))
        .min_by_key(|(t, w)| (*t, *w as u8))
    }

    // ----- phase 1 --------------------------------------------------------

    /// This forwarder's queues as its DS frame reports them, and (L-DS) the
    /// bursts behind each entry. Links whose next hop is unresolved are
    /// reported empty: their packets cannot be addressed yet.
    fn snapshot(&mut self, now: Instant) -> FeState {
        let mut st = FeState::new(self.dims, self.stamp(now));
        let k = self.dims.classes;
        let budget = self.cfg.burst_budget();
        // Entries are charged in link bytes (frame, FCS, preamble, IFG):
        // WFQ shares link time, as qosnet's centralised WFQ does, and every
        // forwarder can then time a round exactly from the DS state.
        let framing = self.cfg.framing;
        for (q, queue) in self.queues.iter().enumerate() {
            let j = q / k;
            self.burst[q] = 0;
            if self.ol_mac[j].is_none() {
                continue;
            }
            match self.cfg.variant {
                Variant::Lds { packets } => {
                    // The paper's budget (l packets or l·64 bytes) counts
                    // frame bytes; the entry charges the burst's link bytes.
                    let (mut n, mut bytes, mut link) = (0usize, 0u64, 0u64);
                    for p in queue.iter().take(packets as usize) {
                        let w = framing.wire_bytes(p.pkt.len());
                        if bytes >= budget || link + w > u16::MAX as u64 {
                            break;
                        }
                        bytes += p.pkt.len() as u64;
                        link += w;
                        n += 1;
                    }
                    if let Some(h) = queue.front() {
                        self.burst[q] = n;
                        // The head's own length too: phase 2 ranks the
                        // burst as S-DS would rank its first packet.
                        let head = framing.wire_bytes(h.pkt.len()) as u32;
                        st.push(j, q % k, Entry::burst(h.stamp, link as u32, head));
                    }
                }
                v => {
                    for p in queue.iter().take(v.slots()) {
                        st.push(
                            j,
                            q % k,
                            Entry::packet(p.stamp, framing.wire_bytes(p.pkt.len()) as u32),
                        );
                    }
                }
            }
        }
        st
    }

    /// Snapshot, put it in the view, and broadcast it (after `ds_build`).
    /// Returns when the frame leaves.
    fn send_ds(&mut self, now: Instant, master: bool) -> Instant {
        let st = self.snapshot(now);
        let mut flags = if master { ds::flags::MASTER } else { 0 };
        if matches!(self.cfg.variant, Variant::Lds { .. }) {
            flags |= ds::flags::LAZY;
        }
        let h = Header {
            fe: self.cfg.id,
            flags,
            cycle: self.cycle,
            stamp_ref: st.stamp_ref,
            outlinks: self.dims.outlinks as u8,
            classes: self.dims.classes as u8,
            slots: self.cfg.variant.slots() as u16,
        };
        let offsets = master.then(|| self.dwfq.clocks().offsets());
        let frame = ds::encode(&h, &st, offsets.as_deref(), self.cfg.mac, self.cfg.vlan);
        self.view.set(self.id(), Some(st));
        let at = now + self.cfg.costs.ds_build;
        self.push_ctrl(at, frame);
        self.bump("ds_tx");
        at
    }

    fn push_ctrl(&mut self, at: Instant, frame: Vec<u8>) {
        if self.ctrl.len() >= CTRL_LIMIT {
            self.bump("ctrl_queue_full");
            return;
        }
        self.ctrl.push_back((at, frame));
    }

    fn begin_exchange(&mut self) {
        self.heard.iter_mut().for_each(|h| *h = false);
        let me = self.id();
        self.heard[me] = true;
        self.cycle_idle = true;
        self.bump("cycles");
    }

    fn start_cycle_master(&mut self, now: Instant) {
        if !self.is_master() || self.phase != Phase::Idle {
            return;
        }
        self.cycle = self.cycle.wrapping_add(1);
        self.cycle_from = self.id();
        self.begin_exchange();
        let sent = self.send_ds(now, true);
        self.bump("cycles_started");
        self.phase = Phase::Exchange {
            deadline: sent + self.cfg.t_br,
        };
    }

    /// A new cycle begins while this forwarder is still in the last one (it
    /// joined late, from another slave's frame, or its clock runs slow):
    /// run what is left of it now. The others counted this forwarder's
    /// picks as sent; sending them late keeps every view and clock right,
    /// where dropping the decision would not.
    fn finish_cycle_now(&mut self, now: Instant) {
        if self.phase == Phase::Idle {
            return;
        }
        self.bump("cycle_overrun");
        for _ in 0..=2 * self.cfg.variant.rounds() + 2 {
            if self.phase == Phase::Idle {
                return;
            }
            self.phase_timer(now);
        }
        self.phase = Phase::Idle;
    }

    /// A slave joins cycle `cycle` of master `from`, triggered at `rx` by a
    /// frame it heard.
    fn join_cycle(&mut self, now: Instant, rx: Instant, cycle: u32, from: usize) {
        self.finish_cycle_now(now);
        self.cycle = cycle;
        self.cycle_from = from;
        self.begin_exchange();
        self.send_ds(now, false);
        self.phase = Phase::Exchange {
            deadline: rx + self.cfg.t_br,
        };
    }

    /// End of phase 1: reuse stale state of silent forwarders, drop those
    /// silent too long.
    fn end_exchange(&mut self, now: Instant) {
        for m in 0..self.dims.forwarders {
            if self.heard[m] || !self.alive[m] {
                continue;
            }
            if now.saturating_since(self.last_heard[m]) >= self.fe_timeout {
                self.alive[m] = false;
                self.view.set(m, None);
                self.bump("fe_declared_dead");
            } else if self.view.get(m).is_some() {
                self.bump("ds_stale_reused");
            } else {
                self.bump("ds_missing");
            }
        }
    }

    fn phase_timer(&mut self, at: Instant) {
        match self.phase {
            Phase::Idle => {}
            Phase::Exchange { .. } => {
                self.end_exchange(at);
                let c = self.cfg.costs;
                self.phase = Phase::Compute {
                    at: at + c.phase1 + c.phase2 + c.phase3,
                    round: 0,
                };
            }
            Phase::Compute { round, .. } => self.decide(at, round),
            Phase::Transmit { round, .. } => {
                let more = (round as usize + 1) < self.cfg.variant.rounds() && !self.view.is_empty();
                if more {
                    let c = self.cfg.costs;
                    self.phase = Phase::Compute {
                        at: at + c.phase2 + c.phase3,
                        round: round + 1,
                    };
                } else {
                    self.end_cycle(at);
                }
            }
        }
    }

    fn end_cycle(&mut self, at: Instant) {
        self.phase = Phase::Idle;
        if self.is_master() {
            let gap = if self.cycle_idle {
                self.cfg.idle_gap
            } else {
                Duration::ZERO
            };
            self.next_cycle_at = Some(at + self.cfg.cycle_guard + gap);
        }
    }

    // ----- phases 2 and 3 -------------------------------------------------

    fn decide(&mut self, at: Instant, round: u16) {
        let key = RoundKey {
            cycle: self.cycle,
            round,
        };
        let d = self.dwfq.round(&mut self.view, key);
        self.bump("rounds");
        if self.log_cap > 0 {
            if self.log.len() >= self.log_cap {
                self.log.pop_front();
            }
            self.log.push_back(RoundRecord {
                cycle: self.cycle,
                round,
                at,
                matching: d.matching.clone(),
                picks: d.matched().map(|p| (p.fe, p.ol, p.class, p.entry)).collect(),
            });
        }
        if d.size() == 0 {
            self.last_decision = Some(d);
            self.end_cycle(at);
            return;
        }
        self.cycle_idle = false;
        if let Some(p) = d.matched_pick(self.id()).copied() {
            self.send_pick(p.ol, p.class, p.entry);
        }
        let until = at + self.round_time(&d);
        self.last_decision = Some(d);
        self.phase = Phase::Transmit { until, round };
    }

    /// Move the decided packet (or burst) from Q_ijk to the transmit queue.
    fn send_pick(&mut self, ol: usize, class: usize, e: Entry) {
        let Some(q) = self.qi(ol, class) else {
            return;
        };
        let n = match self.cfg.variant {
            Variant::Lds { .. } => self.burst[q],
            _ => 1,
        };
        let head_ok = self.queues[q].front().is_some_and(|h| h.stamp == e.stamp);
        let framing = self.cfg.framing;
        let bytes: u64 = self.queues[q]
            .iter()
            .take(n)
            .map(|p| framing.wire_bytes(p.pkt.len()))
            .sum();
        if !head_ok || n == 0 || bytes != e.len as u64 {
            // Cannot happen while the queue's head only leaves through the
            // matching; counted rather than sending the wrong packets.
            self.bump("view_mismatch");
            return;
        }
        let Some(mac) = self.ol_mac[ol] else {
            self.bump("view_mismatch");
            return;
        };
        for _ in 0..n {
            if let Some(mut qd) = self.queues[q].pop_front() {
                if let Some(d) = qd.pkt.data.get_mut(0..6) {
                    d.copy_from_slice(&mac.0);
                }
                self.txq.push_back((q, qd.pkt));
            }
        }
        self.add("matched_pkts", n as u64);
        self.bump("matched");
    }

    /// How long after the decision the last bit of the round's longest
    /// transmission leaves the switch: each pick crosses this forwarder's
    /// port and then OL_j, store and forward. For a burst of total wire
    /// size S whose largest frame is s, with per-byte times α (port) and β
    /// (link), the last bit leaves by max(α, β)·S + min(α, β)·s.
    fn round_time(&self, d: &Decision) -> Duration {
        let lazy = matches!(self.cfg.variant, Variant::Lds { .. });
        let largest_frame = self.cfg.framing.wire_bytes(self.cfg.max_frame() as usize);
        d.matched()
            .map(|p| {
                // Entries are in link bytes (`snapshot`): a packet's, or an
                // L-DS burst's total, whose largest frame is at most the
                // largest frame allowed.
                let total = p.entry.len as u64;
                let largest = if lazy { total.min(largest_frame) } else { total };
                let ol_rate = self
                    .cfg
                    .outlinks
                    .get(p.ol)
                    .map_or(self.cfg.rate_bps, |o| o.rate_bps);
                let (fast, slow) = if ol_rate < self.cfg.rate_bps {
                    (self.cfg.rate_bps, ol_rate)
                } else {
                    (ol_rate, self.cfg.rate_bps)
                };
                Duration::for_bytes(total, slow) + Duration::for_bytes(largest, fast)
            })
            .max()
            .unwrap_or(Duration::ZERO)
    }

    // ----- DS reception, liveness, election -------------------------------

    fn heard_from(&mut self, m: usize, now: Instant) {
        self.last_heard[m] = now;
        if !self.alive[m] {
            self.alive[m] = true;
            self.bump("fe_revived");
        }
    }

    fn handle_ds(&mut self, now: Instant, rx: Instant, frame: &[u8]) {
        let dsf = match ds::parse(frame, &self.expect()) {
            Ok(d) => d,
            Err(e) => {
                self.bump("rx_ds_refused");
                *self.counters.entry(e.counter()).or_default() += 1;
                return;
            }
        };
        let h = dsf.header;
        let m = h.fe as usize;
        if m == self.id() {
            self.bump("rx_ds_own");
            return;
        }
        self.bump("rx_ds");
        self.heard_from(m, now);
        if !self.wfq_mode() {
            return; // no-WFQ forwarders only keep liveness
        }
        let lazy = h.flags & ds::flags::LAZY != 0;
        if h.is_heartbeat()
            || h.slots as usize != self.cfg.variant.slots()
            || lazy != matches!(self.cfg.variant, Variant::Lds { .. })
        {
            self.bump("ds_variant_mismatch");
            return;
        }
        if h.is_master() {
            self.handle_master_ds(now, rx, m, dsf);
        } else {
            self.handle_slave_ds(now, rx, m, dsf);
        }
    }

    fn handle_master_ds(&mut self, now: Instant, rx: Instant, m: usize, d: ds::Ds) {
        if self.is_master() {
            if m > self.id() {
                // Ours wins; that forwarder steps down when it hears us.
                self.bump("ds_foreign_master_ignored");
                return;
            }
            self.bump("stepped_down");
            self.next_cycle_at = None;
        } else if m != self.master && self.alive[self.master] && m > self.master {
            self.bump("ds_foreign_master_ignored");
            return;
        }
        self.master = m;
        self.master_heard_at = now;
        let cycle = d.header.cycle;
        if (m, cycle) == (self.cycle_from, self.cycle) {
            if !matches!(self.phase, Phase::Exchange { .. }) {
                // This cycle's phase 1 is over here (we answered a slave,
                // and the master's frame came after our T_br).
                self.bump("ds_out_of_cycle");
                return;
            }
        } else {
            self.join_cycle(now, rx, cycle, m);
        }
        self.heard[m] = true;
        self.view.set(m, Some(d.state));
        if let Some(o) = d.offsets {
            if self.dwfq.clocks_mut().adopt(&o) {
                self.bump("clocks_adopted");
            }
        }
    }

    fn handle_slave_ds(&mut self, now: Instant, rx: Instant, m: usize, d: ds::Ds) {
        let cycle = d.header.cycle;
        match self.phase {
            Phase::Exchange { .. } if cycle == self.cycle => {}
            _ if !self.is_master() && newer(cycle, self.cycle) => {
                // §IV-A: a slave that hears another slave before the master
                // answers anyway.
                self.bump("answered_without_master");
                let from = self.master;
                self.join_cycle(now, rx, cycle, from);
            }
            _ => {
                // Late for its cycle, or of a cycle we are not in.
                self.bump("ds_out_of_cycle");
                return;
            }
        }
        self.heard[m] = true;
        self.view.set(m, Some(d.state));
    }

    /// The master has been silent for `master_timeout`: declare it dead; the
    /// lowest id still believed alive is the new master.
    fn master_silent(&mut self, at: Instant) {
        let old = self.master;
        if old != self.id() && self.alive[old] {
            self.alive[old] = false;
            self.view.set(old, None);
            self.bump("master_lost");
        }
        let new = (0..self.dims.forwarders)
            .find(|m| self.alive[*m])
            .unwrap_or(self.id());
        self.master = new;
        self.master_heard_at = at;
        if new == self.id() {
            self.bump("elections_won");
            self.finish_cycle_now(at);
            self.next_cycle_at = Some(at);
        }
    }

    fn heartbeat(&mut self, at: Instant) {
        self.next_heartbeat = at + self.cfg.heartbeat;
        let h = Header {
            fe: self.cfg.id,
            flags: ds::flags::HEARTBEAT,
            cycle: 0,
            stamp_ref: self.stamp(at),
            outlinks: self.dims.outlinks as u8,
            classes: self.dims.classes as u8,
            slots: 0,
        };
        let st = FeState::new(self.dims, h.stamp_ref);
        let f = ds::encode(&h, &st, None, self.cfg.mac, self.cfg.vlan);
        self.push_ctrl(at, f);
        self.bump("heartbeats_tx");
    }

    // ----- ARP --------------------------------------------------------------

    fn arp_request(&mut self, now: Instant, j: usize) {
        let Some(o) = self.cfg.outlinks.get(j) else {
            return;
        };
        let req = Arp {
            oper: ARP_REQUEST,
            sha: self.cfg.mac,
            spa: self.cfg.ip,
            tha: MacAddr::default(),
            tpa: o.next_hop,
        };
        let f = arp::build_arp(self.cfg.mac, MacAddr::BROADCAST, &req);
        let tries = self.arp_pending[j].map_or(0, |p| p.tries) + 1;
        self.arp_pending[j] = Some(ArpPending {
            tries,
            next_at: now + self.cfg.arp.retry,
        });
        self.push_ctrl(now, f);
        self.bump("arp_requests_tx");
    }

    fn arp_timers(&mut self, now: Instant) {
        for j in 0..self.dims.outlinks {
            let Some(p) = self.arp_pending[j].filter(|p| p.next_at <= now) else {
                continue;
            };
            if p.tries < self.cfg.arp.max_tries {
                self.arp_request(now, j);
                continue;
            }
            // Unresolved: what waits for this link is dropped (it is never
            // in a DS snapshot, so no view refers to it).
            self.arp_pending[j] = None;
            self.bump("arp_timeouts");
            for c in 0..self.dims.classes {
                let q = j * self.dims.classes + c;
                let n = self.queues[q].len() as u64;
                self.queues[q].clear();
                self.stats[q].drops += n;
                *self.drops.entry("unresolved").or_default() += n;
            }
        }
    }

    fn handle_arp(&mut self, now: Instant, a: Arp) {
        let mut learned = false;
        for j in 0..self.dims.outlinks {
            if self.cfg.outlinks[j].next_hop == a.spa && a.spa != Ipv4Addr::UNSPECIFIED {
                if self.ol_mac[j] != Some(a.sha) {
                    self.ol_mac[j] = Some(a.sha);
                    self.bump("arp_resolved");
                }
                self.arp_pending[j] = None;
                learned = true;
            }
        }
        let for_us = self.cfg.ip != Ipv4Addr::UNSPECIFIED && a.tpa == self.cfg.ip;
        if a.oper == ARP_REQUEST {
            self.bump("arp_requests_rx");
            if for_us {
                let rep = Arp {
                    oper: ARP_REPLY,
                    sha: self.cfg.mac,
                    spa: self.cfg.ip,
                    tha: a.sha,
                    tpa: a.spa,
                };
                let f = arp::build_arp(self.cfg.mac, a.sha, &rep);
                self.push_ctrl(now, f);
                self.bump("arp_replies_tx");
            }
        } else {
            self.bump("arp_replies_rx");
        }
        if !for_us && !learned {
            self.bump("arp_not_for_us");
        }
    }

    // ----- forwarding -------------------------------------------------------

    fn handle_data(&mut self, now: Instant, rx: Instant, mut data: Vec<u8>, mut meta: Meta, broadcast: bool) {
        let info = match wire::parse_ipv4(&data) {
            Ok(i) => i,
            Err(wire::Malformed::NotIpv4) => {
                self.bump("rx_non_ip");
                return;
            }
            Err(m) => {
                self.bump("rx_malformed");
                *self.counters.entry(malformed_name(m)).or_default() += 1;
                return;
            }
        };
        self.bump("rx_data");
        if data.len() as u64 > self.cfg.max_frame() {
            // Longer than the MTU: its length would not fit a DS slot.
            self.drop_pkt("too_big");
            return;
        }
        if self.cfg.ip != Ipv4Addr::UNSPECIFIED && info.dst == self.cfg.ip {
            self.drop_pkt("local"); // forwarders run no applications
            return;
        }
        if broadcast {
            self.drop_pkt("link_broadcast");
            return;
        }
        if !icmp::is_unicast(info.dst) {
            self.drop_pkt("bad_dst");
            return;
        }
        if !icmp::is_unicast(info.src) {
            self.drop_pkt("martian_src");
            return;
        }
        if info.ttl <= 1 {
            self.drop_pkt("ttl_expired");
            return;
        }
        let Some(route) = self.routes.lookup_cached(info.dst, info.ttl).copied() else {
            self.drop_pkt("no_route");
            return;
        };
        let j = route.port as usize;
        let class = match self.classifier.as_mut() {
            Some(c) => c(&info, &data) as usize,
            None => self
                .cfg
                .dscp_class
                .get(info.dscp() as usize)
                .copied()
                .unwrap_or(0) as usize,
        };
        let Some(q) = self.qi(j, class) else {
            self.drop_pkt(if j >= self.dims.outlinks {
                "no_outlink"
            } else {
                "bad_class"
            });
            return;
        };
        if self.queues[q].len() >= self.cfg.queue_limit {
            self.stats[q].drops += 1;
            self.drop_pkt("queue_full");
            return;
        }
        wire::decrement_ttl(&mut data);
        wire::set_eth_addrs(&mut data, self.cfg.mac, self.ol_mac[j].unwrap_or_default());
        meta.arrival = rx;
        meta.in_port = 0;
        meta.class = class as u16;
        meta.flow = FlowKey::from(&info).hash32();
        let stamp = self.stamp(rx);
        self.queues[q].push_back(Queued {
            pkt: Packet::new(data, meta),
            stamp,
        });
        self.stats[q].enq_pkts += 1;
        self.bump("forwarded");
        if self.ol_mac[j].is_none() && self.arp_pending[j].is_none() {
            self.arp_request(now, j);
        }
    }

    /// No-WFQ: the oldest head of line among links that can be addressed.
    fn oldest_ready(&self) -> Option<usize> {
        let k = self.dims.classes;
        (0..self.queues.len())
            .filter(|q| self.ol_mac[q / k].is_some())
            .filter_map(|q| self.queues[q].front().map(|p| (p.pkt.meta.arrival, q)))
            .min()
            .map(|(_, q)| q)
    }

    fn transmit(&mut self, now: Instant) -> Option<Transmit> {
        if !self.started || self.busy_until > now {
            return None;
        }
        let pkt = if let Some(i) = self.ctrl.iter().position(|(at, _)| *at <= now) {
            let (_, f) = self.ctrl.remove(i)?;
            self.bump("tx_ctrl");
            Packet::new(f, Meta::default())
        } else if let Some((q, p)) = self.txq.pop_front() {
            self.note_sent(q, &p);
            p
        } else if !self.wfq_mode() {
            let q = self.oldest_ready()?;
            let mut qd = self.queues[q].pop_front()?;
            let mac = self.ol_mac[q / self.dims.classes].unwrap_or_default();
            if let Some(d) = qd.pkt.data.get_mut(0..6) {
                d.copy_from_slice(&mac.0);
            }
            self.note_sent(q, &qd.pkt);
            qd.pkt
        } else {
            return None;
        };
        let wire_len = self.cfg.framing.wire_bytes(pkt.len());
        self.tx_pkts += 1;
        self.tx_bytes += pkt.len() as u64;
        self.tx_wire_bytes += wire_len;
        self.busy_until = now + Duration::for_bytes(wire_len, self.cfg.rate_bps);
        Some(Transmit {
            port: 0,
            pkt,
            tx_end: Some(self.busy_until),
        })
    }

    fn note_sent(&mut self, q: usize, p: &Packet) {
        if let Some(s) = self.stats.get_mut(q) {
            s.sent_pkts += 1;
            s.sent_bytes += p.len() as u64;
        }
        self.bump("tx_data");
    }

    fn next_work(&self, now: Instant) -> Option<Instant> {
        if !self.started {
            return Some(now);
        }
        let timer = self.next_timer().map(|(t, _)| t);
        let free = self.busy_until.max(now);
        let ctrl = self.ctrl.iter().map(|(at, _)| (*at).max(free)).min();
        let data =
            (!self.txq.is_empty() || (!self.wfq_mode() && self.oldest_ready().is_some())).then_some(free);
        [timer, ctrl, data].into_iter().flatten().min()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Timer {
    Phase,
    Cycle,
    MasterSilent,
    Arp,
    Heartbeat,
}

fn malformed_name(m: wire::Malformed) -> &'static str {
    match m {
        wire::Malformed::Truncated => "malformed_truncated",
        wire::Malformed::NotIpv4 => "malformed_not_ipv4",
        wire::Malformed::BadVersion => "malformed_bad_version",
        wire::Malformed::BadIhl => "malformed_bad_ihl",
        wire::Malformed::BadTotalLength => "malformed_bad_total_length",
        wire::Malformed::BadChecksum => "malformed_bad_checksum",
        wire::Malformed::Fragment => "malformed_fragment",
        wire::Malformed::BadArp => "malformed_bad_arp",
    }
}

impl Node for Forwarder {
    fn name(&self) -> &str {
        &self.cfg.name
    }
    fn port_count(&self) -> usize {
        1
    }
    /// Every frame ends in exactly one `rx_*` counter (`rx_data` then in
    /// `forwarded` or one `drop_*`).
    fn handle_frame(&mut self, now: Instant, port: u16, frame: Vec<u8>, meta: Meta) {
        self.run_timers(now);
        self.bump("rx_frames");
        if port != 0 {
            self.bump("rx_bad_port");
            return;
        }
        let rx = if meta.arrival > Instant::ZERO && meta.arrival <= now {
            meta.arrival
        } else {
            now
        };
        match super::classify(&frame, self.cfg.mac) {
            Rx::Ds if self.cfg.ds_loss > 0.0 && self.draw_loss() => self.bump("ds_loss_injected"),
            Rx::Ds => self.handle_ds(now, rx, &frame),
            Rx::NotForUs => {
                self.bump("rx_not_for_us");
                self.filtered_traffic += u64::from(meta.uid != 0);
            }
            Rx::Arp(Ok(a)) => {
                self.bump("rx_arp");
                self.handle_arp(now, a);
            }
            Rx::Arp(Err(m)) => {
                self.bump("rx_malformed");
                *self.counters.entry(malformed_name(m)).or_default() += 1;
            }
            Rx::Data { broadcast } => self.handle_data(now, rx, frame, meta, broadcast),
        }
    }
    /// A forwarder has no applications: counted as `drop_no_app`.
    fn handle_send(&mut self, _now: Instant, _pkt: Packet) {
        self.drop_pkt("no_app");
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.run_timers(now);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.transmit(now)
    }
    fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        self.next_work(now)
    }
    fn counters(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self.counters.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        v.extend(self.drops.iter().map(|(k, n)| (format!("drop_{k}"), *n)));
        v.push(("is_master".into(), self.is_master() as u64));
        v.push(("alive".into(), self.alive.iter().filter(|a| **a).count() as u64));
        v
    }
    fn port_report(&self, port: u16) -> PortReport {
        if port != 0 {
            return PortReport::default();
        }
        let k = self.dims.classes;
        let mut counters = Vec::new();
        for (q, s) in self.stats.iter().enumerate() {
            let p = format!("ol{}.class{}", q / k, q % k);
            counters.push((format!("{p}.enq_pkts"), s.enq_pkts));
            counters.push((format!("{p}.sent_pkts"), s.sent_pkts));
            counters.push((format!("{p}.sent_bytes"), s.sent_bytes));
            counters.push((format!("{p}.drops"), s.drops));
        }
        PortReport {
            name: format!("{}-sw", self.cfg.name),
            rx_pkts: self.counter("rx_frames"),
            tx_pkts: self.tx_pkts,
            tx_bytes: self.tx_bytes,
            tx_wire_bytes: self.tx_wire_bytes,
            scheduler: self.cfg.variant.name().to_string(),
            queued: self.held() as u64,
            drops: self.drops.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            counters,
            ..PortReport::default()
        }
    }
    fn ledger(&self) -> Ledger {
        Ledger {
            held: self.held() as u64,
            dropped: self.drops.values().sum::<u64>() + self.filtered_traffic,
            created: 0,
        }
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::route::Route;
    use crate::stsdr::testbed::{self, fe_mac, lb_mac, ol_mac, packet, Bench};
    use proptest::prelude::*;

    fn ms(x: u64) -> Instant {
        Instant(x * 1_000_000)
    }

    /// `per_queue` packets of `len` IP bytes in every Q_ijk, sent straight
    /// to each forwarder at `at`.
    fn preload(b: &mut Bench, at: Instant, m: usize, n: usize, k: usize, per_queue: usize, len: usize) {
        for i in 0..m {
            for j in 0..n {
                for c in 0..k {
                    for s in 0..per_queue {
                        let sport = (i * 1000 + j * 100 + c * 10 + s) as u16;
                        b.inject(at, packet(fe_mac(i), j, c, sport, len));
                    }
                }
            }
        }
    }

    /// Every round decided by all of `fes` was decided identically.
    fn assert_agree(b: &Bench, fes: &[usize]) -> usize {
        let logs: Vec<BTreeMap<(u32, u16), &RoundRecord>> = fes
            .iter()
            .map(|i| {
                b.fe(*i)
                    .rounds()
                    .iter()
                    .map(|r| ((r.cycle, r.round), r))
                    .collect()
            })
            .collect();
        let mut compared = 0;
        for (key, r0) in &logs[0] {
            if logs.iter().all(|l| l.contains_key(key)) {
                for l in &logs[1..] {
                    assert_eq!(l[key].matching, r0.matching, "round {key:?}");
                    assert_eq!(l[key].picks, r0.picks, "round {key:?}");
                }
                compared += 1;
            }
        }
        compared
    }

    /// Every packet injected is delivered, dropped by a node, held by a
    /// node, on the wire, or was sent to a dead node.
    fn assert_conserved(b: &Bench) {
        let (held, dropped) = b.ledger();
        assert_eq!(
            b.injected,
            b.delivered() + held + dropped + b.in_flight() + b.dead_letters,
            "delivered {} held {held} dropped {dropped} in flight {} dead letters {}",
            b.delivered(),
            b.in_flight(),
            b.dead_letters
        );
    }

    #[test]
    fn forwards_with_ttl_checksum_class_and_counts_drops() {
        let ol = OutLink {
            name: "ol0".into(),
            next_hop: testbed::ol_ip(0),
            mac: Some(ol_mac(0)),
            rate_bps: 1_000_000_000,
        };
        let mut c = ForwarderConfig::new("fe", 0, 1, fe_mac(0), vec![ol], 2);
        c.queue_limit = 2;
        let mut routes = RouteTable::new();
        routes
            .add(Route::new(Ipv4Addr::new(10, 100, 0, 0), 16, 0))
            .unwrap();
        let mut f = Forwarder::new(c, routes).unwrap();
        let t = Instant(1_000);
        for class in [1, 1, 1] {
            f.handle_frame(t, 0, packet(fe_mac(0), 0, class, 7, 100), Meta::default());
        }
        f.handle_frame(t, 0, packet(fe_mac(0), 1, 0, 7, 100), Meta::default()); // no route
        let mut ttl1 = packet(fe_mac(0), 0, 0, 7, 100);
        wire::set_ttl(&mut ttl1, 1);
        f.handle_frame(t, 0, ttl1, Meta::default());
        f.handle_frame(t, 0, packet(fe_mac(1), 0, 0, 7, 100), Meta::default()); // other MAC
        assert_eq!(f.queue_len(0, 1), 2);
        assert_eq!(f.dropped("queue_full"), 1);
        assert_eq!(f.dropped("no_route"), 1);
        assert_eq!(f.dropped("ttl_expired"), 1);
        assert_eq!(f.counter("rx_not_for_us"), 1);
        // The lone forwarder is master: one cycle sends one packet.
        let mut out = Vec::new();
        let mut now = t;
        while out.iter().filter(|x: &&Transmit| !ds::is_ds(&x.pkt.data)).count() < 2 && now < ms(1) {
            now = f.poll_timeout(now).unwrap_or(ms(1)).max(now);
            out.extend(crate::node::step(&mut f, now));
        }
        let data: Vec<_> = out.iter().filter(|x| !ds::is_ds(&x.pkt.data)).collect();
        assert_eq!(data.len(), 2, "one packet per cycle, two cycles");
        let fr = &data[0].pkt.data;
        let info = wire::parse_ipv4(fr).unwrap();
        assert_eq!(info.ttl, 63, "TTL decremented, checksum still valid");
        assert_eq!(wire::eth_dst(fr), Some(ol_mac(0)));
        assert_eq!(wire::eth_src(fr), Some(fe_mac(0)));
        assert_eq!(data[0].pkt.meta.class, 1);
        assert_eq!(f.class_stats(0, 1).sent_pkts, 2);
        // T_br after its own DS frame, the master decides.
        assert!(out.iter().any(|x| ds::is_ds(&x.pkt.data)));
    }

    #[test]
    fn sds_uses_every_link_every_cycle_without_contention() {
        let (m, n, k) = (3, 3, 3);
        let mut b = testbed::stsdr(m, n, k, Duration::from_micros(5), 1, |_| {});
        preload(&mut b, Instant(0), m, n, k, 40, 46);
        b.run_until(ms(3));
        let agreed = assert_agree(&b, &[0, 1, 2]);
        assert!(agreed > 20, "{agreed} rounds compared");
        for r in b.fe(0).rounds().iter().filter(|r| r.cycle > 1) {
            assert_eq!(r.matching.iter().flatten().count(), m.min(n), "cycle {}", r.cycle);
        }
        for s in &b.sinks {
            assert_eq!(s.contended, 0, "the matching arbitrates the links");
        }
        // S-DS throughput is one packet per link per cycle; a cycle is T_br
        // after the master's frame plus the round's store-and-forward time
        // of a 60-byte frame (84 bytes of link time) twice.
        let round = Duration::for_bytes(84, 1_000_000_000) + Duration::for_bytes(84, 1_000_000_000);
        let cycle = b.fe(0).config().t_br + round;
        let cycles = b.fe(0).counter("cycles_started");
        let expect = ms(3).0 / cycle.0;
        assert!(cycles.abs_diff(expect) <= 1, "{cycles} cycles, expected {expect}");
        for s in &b.sinks {
            assert!(
                (s.rx.len() as u64).abs_diff(cycles) <= 2,
                "{} vs {cycles}",
                s.rx.len()
            );
        }
        assert_conserved(&b);
    }

    /// The phase costs delay every decision: an S-DS cycle is ds_build +
    /// T_br + phase 1 + 2 + 3 + the round's transmission (+ guard), and an
    /// M-DS round after the first adds phase 2 + 3 each time.
    #[test]
    fn phase_costs_lengthen_the_cycle() {
        let (m, n, k) = (2, 2, 1);
        let costs = PhaseCosts {
            ds_build: Duration::from_micros(3),
            phase1: Duration::from_micros(20),
            phase2: Duration::from_nanos(600),
            phase3: Duration::from_nanos(450),
        };
        let guard = Duration::from_micros(2);
        let round = Duration::for_bytes(84, 1_000_000_000) + Duration::for_bytes(84, 1_000_000_000);
        let cycles = |v: Variant| {
            let mut b = testbed::stsdr(m, n, k, Duration::from_micros(5), 12, |c| {
                c.costs = costs;
                c.cycle_guard = guard;
                c.variant = v;
            });
            preload(&mut b, Instant(0), m, n, k, 400, 46);
            b.run_until(ms(5));
            assert_agree(&b, &[0, 1]);
            b.fe(0).counter("cycles_started")
        };
        let t_br = Duration::from_micros(72);
        let sds = costs.ds_build + t_br + costs.phase1 + costs.phase2 + costs.phase3 + round + guard;
        assert!(cycles(Variant::Sds).abs_diff(ms(5).0 / sds.0) <= 1);
        let l = 10u64;
        let mds = Duration(sds.0 + (l - 1) * (round + costs.phase2 + costs.phase3).0);
        assert!(cycles(Variant::Mds { slots: l as u16 }).abs_diff(ms(5).0 / mds.0) <= 1);
        assert_eq!(PhaseCosts::paper(t_br).phase1, Duration::from_micros(33));
    }

    /// Table I in small, through the nodes: one link, three forwarders,
    /// three equal classes of 64-byte packets: after every round the classes
    /// have sent within one packet of each other.
    #[test]
    fn sds_equal_classes_share_one_link_within_a_packet() {
        let (m, n, k) = (3, 1, 3);
        let mut b = testbed::stsdr(m, n, k, Duration::from_micros(5), 2, |c| {
            c.tie = TieBreak::Random { seed: 9 };
        });
        preload(&mut b, Instant(0), m, n, k, 60, 46);
        b.run_until(ms(12));
        let sink = &b.sinks[0];
        assert!(sink.rx.len() > 150);
        let mut per = [0u64; 3];
        for (_, f) in &sink.rx {
            per[(wire::parse_ipv4(f).unwrap().dscp() >> 3) as usize] += 1;
            let (lo, hi) = (per.iter().min().unwrap(), per.iter().max().unwrap());
            assert!(hi - lo <= 1, "{per:?}");
        }
        assert_eq!(sink.per_class(3), per.to_vec());
        assert_agree(&b, &[0, 1, 2]);
    }

    #[test]
    fn lost_ds_frames_reuse_stale_state_and_lose_no_packet() {
        let (m, n, k) = (3, 2, 2);
        let mut b = testbed::stsdr(m, n, k, Duration::from_micros(5), 3, |c| {
            c.tie = TieBreak::Random { seed: 1 };
        });
        b.ds_loss = 0.15;
        for s in 0..600u16 {
            let at = Instant(s as u64 * 20_000);
            b.inject(
                at,
                packet(
                    lb_mac(),
                    (s % 2) as usize,
                    (s / 2 % 2) as usize,
                    s,
                    46 + (s as usize * 37) % 1000,
                ),
            );
        }
        b.run_until(ms(40));
        assert!(b.ds_lost > 0);
        let stale: u64 = (0..m).map(|i| b.fe(i).counter("ds_stale_reused")).sum();
        assert!(stale > 0, "stale state was reused");
        let adopted: u64 = (1..m).map(|i| b.fe(i).counter("clocks_adopted")).sum();
        assert!(adopted > 0);
        assert_eq!(
            b.delivered(),
            600,
            "DS loss costs time and fairness, never packets"
        );
        assert_conserved(&b);
    }

    #[test]
    fn slave_that_missed_the_master_answers_another_slave() {
        let (m, n, k) = (3, 2, 1);
        let mut b = testbed::stsdr(m, n, k, Duration::from_micros(5), 4, |_| {});
        let mut seen = 0;
        b.drop_if = Some(Box::new(move |_, from, to, f: &[u8]| {
            let master = ds::is_ds(f) && ds::parse_header(f, &Expect::default()).is_ok_and(|h| h.is_master());
            if master && from == 0 && to == 2 {
                seen += 1;
                return seen == 5;
            }
            false
        }));
        preload(&mut b, Instant(0), m, n, k, 20, 46);
        b.run_until(ms(2));
        let f2 = b.fe(2);
        assert_eq!(f2.counter("answered_without_master"), 1);
        // It waited T_br from a later frame than the others, so the next
        // master frame found it still deciding: it finished the old cycle
        // at once rather than dropping a decision the others counted.
        assert!(f2.counter("cycle_overrun") <= 1);
        assert_eq!(f2.cycle(), b.fe(0).cycle());
        assert_agree(&b, &[0, 1]);
        // It decided that one cycle on the master's stale state; every
        // other round agrees.
        let differ = f2
            .rounds()
            .iter()
            .filter(|r| {
                let r0 = b
                    .fe(0)
                    .rounds()
                    .iter()
                    .find(|x| (x.cycle, x.round) == (r.cycle, r.round));
                r0.is_some_and(|r0| r0.matching != r.matching || r0.picks != r.picks)
            })
            .count();
        assert!(differ <= 1, "{differ} rounds differ");
        assert_conserved(&b);
    }

    #[test]
    fn master_failure_elects_the_lowest_live_forwarder_and_it_steps_down_on_return() {
        let (m, n, k) = (3, 2, 2);
        let mut b = testbed::stsdr(m, n, k, Duration::from_micros(5), 5, |_| {});
        let mut s = 0u16;
        let mut traffic = |b: &mut Bench, from: u64, to: u64| {
            for t in (from..to).step_by(50_000) {
                s += 1;
                b.inject(
                    Instant(t),
                    packet(lb_mac(), (s % 2) as usize, (s % 2) as usize, s % 64, 100),
                );
            }
        };
        traffic(&mut b, 0, ms(2).0);
        b.run_until(ms(2));
        assert!(b.fe(0).is_master() && b.fe(1).master() == 0);
        b.down[0] = true; // kill -9 the master
        traffic(&mut b, ms(2).0, ms(12).0);
        b.run_until(ms(12));
        assert!(b.fe(1).is_master(), "FE1 is the lowest live id");
        assert_eq!(b.fe(2).master(), 1);
        assert_eq!(b.fe(1).counter("elections_won"), 1);
        assert_eq!(b.fe(2).counter("elections_won"), 0);
        assert!(!b.fe(1).alive()[0] && !b.fe(2).alive()[0]);
        assert!(b.fe(1).counter("cycles_started") > 50, "cycles resumed");
        assert!(!b.lb(m).alive()[0], "the balancer moved FE0's flows");
        assert!(b.lb(m).counter("rehashed") > 0);
        assert_agree(&b, &[1, 2]);
        let before = b.delivered();
        // FE0 comes back, still believing it is master: FE1 steps down.
        b.down[0] = false;
        traffic(&mut b, ms(12).0, ms(16).0);
        b.run_until(ms(20));
        assert_eq!(b.fe(1).counter("stepped_down"), 1);
        assert!(b.fe(0).is_master() && b.fe(1).master() == 0 && b.fe(2).master() == 0);
        assert!(b.fe(1).alive()[0] && b.lb(m).alive()[0]);
        assert!(b.delivered() > before);
        assert_conserved(&b);
    }

    #[test]
    fn dead_forwarder_is_dropped_from_the_matching() {
        let (m, n, k) = (3, 3, 1);
        let mut b = testbed::stsdr(m, n, k, Duration::from_micros(5), 6, |_| {});
        preload(&mut b, Instant(0), m, n, k, 200, 46);
        b.run_until(ms(1));
        b.down[2] = true;
        b.run_until(ms(6));
        for i in [0, 1] {
            assert_eq!(b.fe(i).counter("fe_declared_dead"), 1);
            assert!(!b.fe(i).alive()[2] && b.fe(i).view().get(2).is_none());
            let last = b.fe(i).last_decision().unwrap();
            assert_eq!(last.matching[2], None);
            assert_eq!(last.size(), 2, "the two live forwarders still use two links");
        }
        assert_agree(&b, &[0, 1]);
        assert_conserved(&b);
    }

    #[test]
    fn variants_carry_more_per_cycle_and_order_as_in_the_paper() {
        let (m, n, k) = (3, 3, 3);
        let run = |v: Variant| {
            let mut b = testbed::stsdr(m, n, k, Duration::from_micros(5), 7, |c| c.variant = v);
            preload(&mut b, Instant(0), m, n, k, 120, 46);
            b.run_until(ms(4));
            assert_conserved(&b);
            if v != Variant::NoWfq {
                assert_agree(&b, &[0, 1, 2]);
            }
            b
        };
        let sds = run(Variant::Sds);
        let mds = run(Variant::Mds { slots: 25 });
        let lds = run(Variant::Lds { packets: 25 });
        let none = run(Variant::NoWfq);
        // M-DS: up to l rounds per exchange, one DS frame per forwarder each.
        let f = mds.fe(0);
        assert!(
            f.counter("rounds") > 20 * f.counter("cycles"),
            "{} rounds",
            f.counter("rounds")
        );
        // L-DS: the matched queue sends l packets of 60-byte frames (the
        // l·64 budget is not reached), charged their link bytes (+ 24 each).
        for r in lds.fe(0).rounds().iter().filter(|r| r.cycle > 1 && r.cycle < 5) {
            for p in &r.picks {
                assert_eq!(p.3.len, 25 * (60 + 24), "a burst of 25 60-byte frames");
            }
        }
        let (s, md, l, nw) = (
            sds.delivered(),
            mds.delivered(),
            lds.delivered(),
            none.delivered(),
        );
        assert!(
            nw > l && l > md && md > s,
            "no-WFQ {nw} > L-DS {l} > M-DS {md} > S-DS {s}"
        );
        assert_eq!(none.fe(0).counter("cycles"), 0);
        assert!(none.fe(0).counter("heartbeats_tx") >= 4);
    }

    #[test]
    fn next_hops_resolved_by_arp_and_unresolved_ones_time_out() {
        let (m, n, k) = (2, 2, 1);
        let mut b = testbed::stsdr(m, n, k, Duration::from_micros(5), 8, |c| {
            for o in &mut c.outlinks {
                o.mac = None;
            }
            c.outlinks[1].next_hop = Ipv4Addr::new(10, 9, 9, 9); // nobody answers
            c.arp.retry = Duration::from_millis(1);
        });
        preload(&mut b, Instant(0), m, n, k, 10, 46);
        b.run_until(ms(10));
        for i in 0..m {
            let f = b.fe(i);
            assert_eq!(f.counter("arp_resolved"), 1);
            assert_eq!(f.counter("arp_timeouts"), 1);
            assert_eq!(f.dropped("unresolved"), 10);
        }
        assert_eq!(b.sinks[0].rx.len(), 20);
        assert!(b.sinks[0]
            .rx
            .iter()
            .all(|(_, f)| wire::eth_dst(f) == Some(ol_mac(0))));
        assert_conserved(&b);
    }

    #[test]
    fn config_is_checked() {
        let ol = |r| OutLink {
            name: "o".into(),
            next_hop: Ipv4Addr::new(10, 0, 0, 1),
            mac: None,
            rate_bps: r,
        };
        let ok = ForwarderConfig::new("f", 0, 3, fe_mac(0), vec![ol(1_000_000_000); 3], 3);
        assert!(ok.validate().is_ok());
        let bad = |f: &dyn Fn(&mut ForwarderConfig)| {
            let mut c = ok.clone();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(&|c| c.id = 3).contains("not below"));
        assert!(bad(&|c| c.variant = Variant::Mds { slots: 27 }).contains("do not fit"));
        assert!(ok.clone().validate().is_ok());
        let mut jumbo = ok.clone();
        jumbo.mtu = ds::JUMBO_MTU;
        jumbo.variant = Variant::Mds { slots: 165 };
        assert!(jumbo.validate().is_ok());
        assert!(bad(&|c| c.variant = Variant::Lds { packets: 1010 }).contains("2-byte length"));
        assert!(bad(&|c| c.fe_timeout = Some(Duration::from_micros(100))).contains("shorter than two"));
        assert!(bad(&|c| c.outlinks[1].rate_bps = 0).contains("rate 0"));
        assert!(bad(&|c| c.dscp_class[5] = 3).contains("DSCP 5"));
        assert!(bad(&|c| c.weights[0] = 0).contains("weight 0"));
        let mut routes = RouteTable::new();
        routes.add(Route::new(Ipv4Addr::new(10, 0, 0, 0), 8, 3)).unwrap();
        assert!(Forwarder::new(ok, routes)
            .err()
            .unwrap()
            .contains("outgoing link 3"));
    }

    fn terminal_rx(f: &Forwarder) -> u64 {
        [
            "rx_bad_port",
            "rx_ds",
            "rx_ds_own",
            "rx_ds_refused",
            "rx_not_for_us",
            "rx_arp",
            "rx_malformed",
            "rx_non_ip",
            "rx_data",
        ]
        .iter()
        .map(|n| f.counter(n))
        .sum()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Junk and mutated frames never panic a forwarder; every frame
        /// lands in exactly one rx counter, every data packet is forwarded
        /// or dropped with a reason, every forwarded one is sent, held or
        /// dropped as unresolved.
        #[test]
        fn every_frame_is_counted(
            frames in prop::collection::vec(
                (0usize..4, prop::collection::vec(any::<u8>(), 0..120), any::<u16>(), any::<u8>(), 0u16..2), 1..60),
        ) {
            let mut b = testbed::stsdr(2, 2, 2, Duration::from_micros(3), 11, |_| {});
            let mut now = Instant(0);
            for (kind, junk, x, y, port) in frames {
                let mut f = match kind {
                    0 => junk,
                    1 => packet(fe_mac(0), (x % 3) as usize, (x % 4) as usize, x, 46 + x as usize % 300),
                    2 => {
                        let st = FeState::new(Dims::new(2, 2, 2), 0);
                        let h = ds::Header { fe: x % 3, flags: (x as u8) & ds::flags::MASTER, cycle: x as u32,
                            stamp_ref: 0, outlinks: 2, classes: 2, slots: 1 };
                        ds::encode(&h, &st, None, fe_mac(1), None)
                    }
                    _ => arp::build_arp(ol_mac(0), MacAddr::BROADCAST, &Arp { oper: ARP_REPLY, sha: ol_mac(0),
                        spa: testbed::ol_ip(0), tha: fe_mac(0), tpa: Ipv4Addr::UNSPECIFIED }),
                };
                if kind != 0 && x % 3 == 0 && !f.is_empty() {
                    let n = f.len();
                    f[y as usize % n] ^= y | 1;
                }
                b.nodes[0].handle_frame(now, port, f, Meta::default());
                now += Duration::from_micros(7);
                b.run_until(now);
            }
            b.run_until(now + Duration::from_millis(5));
            let f = b.fe(0);
            prop_assert_eq!(f.counter("rx_frames"), terminal_rx(f));
            let pre_queue: u64 = f.drops().filter(|(r, _)| *r != "unresolved").map(|(_, n)| n).sum();
            prop_assert_eq!(f.counter("rx_data"), f.counter("forwarded") + pre_queue);
            prop_assert_eq!(f.counter("forwarded"), f.counter("tx_data") + f.held() as u64 + f.dropped("unresolved"));
        }

    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Random traffic through the balancer, random DS loss and a
        /// forwarder killed and revived: every packet is delivered, dropped
        /// with a reason or still held, and forwarders that heard the same
        /// DS frames agree on every round.
        #[test]
        fn conservation_under_loss_and_failure(
            seed in any::<u64>(), loss in 0.0f64..0.2, victim in 0usize..3,
            kill_at in 1u64..4, lds in any::<bool>(),
        ) {
            let variant = if lds { Variant::Lds { packets: 8 } } else { Variant::Mds { slots: 4 } };
            let mut b = testbed::stsdr(3, 2, 2, Duration::from_micros(4), seed, |c| {
                c.variant = variant;
                c.tie = TieBreak::Random { seed };
            });
            b.ds_loss = loss;
            for s in 0..300u64 {
                let x = s.wrapping_mul(seed | 1);
                b.inject(Instant(s * 20_000), packet(lb_mac(), (x % 2) as usize, (x / 2 % 2) as usize,
                    (x % 97) as u16, 46 + (x % 1400) as usize));
            }
            b.run_until(ms(kill_at));
            b.down[victim] = true;
            b.run_until(ms(kill_at + 4));
            b.down[victim] = false;
            b.run_until(ms(30));
            let (held, dropped) = b.ledger();
            prop_assert_eq!(b.injected, b.delivered() + held + dropped + b.in_flight() + b.dead_letters);
            // Everything that reached a forwarder left it again.
            prop_assert_eq!(held + b.in_flight(), 0);
            prop_assert_eq!(dropped, 0);
        }
    }
}
