//! The simulator: builds routers and hosts from a scenario and runs them
//! in virtual time.
//!
//! Routers are the core's sans-IO [`Router`]s, driven exactly as the live
//! runtime drives them: `handle_frame` on input, `poll_transmit` for
//! output, `poll_at` for the next wake-up. What the simulator adds is what
//! real hardware adds: links (capacity via each port's transmitter,
//! propagation delay), a per-router CPU that takes time to process each
//! packet (a bounded input queue served one packet at a time), and per-node
//! clocks with offset and drift relative to true time.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use qosnet_core::node::cpu::{Cpu, Draw};
use qosnet_core::node::{Event, Node, TxStatus};
use qosnet_core::probe::{Probe, IP_UDP_HDR, PROBE_LEN};
use qosnet_core::wire::{self, UdpSpec};
use qosnet_core::{Duration, Instant, Meta, Packet};
use qosnet_scenario::results::{detail_json, EngineResult, LinkResult, NodeResult, Results};
use qosnet_scenario::topo::Network;
use qosnet_scenario::Scenario;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::build;
use crate::engine::{Ev, EventQueue};
use crate::media::segment::{SegOutput, Segment};
use crate::media::Attach;
use crate::sink::FlowStat;
use crate::source::Source;

/// A node's clock relative to true (simulation) time: offset plus drift.
#[derive(Clone, Copy, Debug, Default)]
pub struct Clock {
    pub offset_ns: i64,
    pub drift_ppm: f64,
}

impl Clock {
    pub fn local(&self, g: Instant) -> Instant {
        if self.offset_ns == 0 && self.drift_ppm == 0.0 {
            return g;
        }
        let drift = (g.as_nanos() as f64 * self.drift_ppm * 1e-6) as i64;
        Instant((g.as_nanos() as i64 + self.offset_ns + drift).max(0) as u64)
    }
    pub fn global(&self, l: Instant) -> Instant {
        if self.offset_ns == 0 && self.drift_ppm == 0.0 {
            return l;
        }
        let x = (l.as_nanos() as i64 - self.offset_ns) as f64 / (1.0 + self.drift_ppm * 1e-6);
        Instant(x.max(0.0).ceil() as u64)
    }
}

/// One node as the engine holds it: the sans-IO node, what the simulated
/// hardware adds around it (its clock, its CPU), and the engine's own
/// bookkeeping. Nothing here depends on what kind of node it is.
pub(crate) struct Slot {
    pub node: Box<dyn Node>,
    /// The node's clock (TDP routers' CTR runs on it).
    pub clock: Clock,
    /// Input queue and processing time in front of the node, if modelled.
    pub cpu: Option<Cpu>,
    /// Traffic sources attached to the node (its applications).
    pub sources: Vec<Source>,
    /// The clock the sources are scheduled on: a traffic generator's
    /// oscillator, which need not be the node's (a host's NIC runs on true
    /// time; its generator drifts, as a RouterTester port not locked to
    /// the CTR does).
    pub source_clock: Clock,
    /// The node's pending wake-up, if one is scheduled.
    wake_at: Option<Instant>,
    /// Killed (`[[fault]] kind = "kill"`) and not restarted: it receives,
    /// sends and times out nothing.
    down: bool,
    /// The CpuDone event the CPU of a killed node still has queued: it
    /// belongs to that CPU, not to the one a restart brings.
    stale_cpu_done: Option<Instant>,
    /// What the node's earlier lives did (before restarts) and lost.
    past: Past,
    /// Stalls (`[[fault]] kind = "stall"`) in progress: the node does
    /// nothing while this is above 0 (overlapping stalls nest).
    stall_depth: u32,
    /// Frames that reached the node while it was stalled, with their
    /// receive time already in `meta.arrival`: its NIC's receive ring,
    /// handed to the node when the stall ends.
    stall_ring: VecDeque<(u16, Packet)>,
    /// A CPU completion fell inside a stall: it is taken when it ends.
    stall_cpu_due: bool,
    /// Stalls begun, frames held in the ring over all stalls, the most it
    /// held at once, and frames the full ring refused (traffic ones are
    /// the ledger's dropped).
    stall_stats: StallStats,
}

/// The frames a NIC's receive ring holds while its node is stalled: a
/// Linux NIC's default ring (`ethtool -g`: 256 to 4096; veth's backlog is
/// `netdev_max_backlog`, 1000). Arrivals beyond it are dropped, counted.
const STALL_RING: usize = 1000;

#[derive(Clone, Copy, Debug, Default)]
struct StallStats {
    stalls: u64,
    held: u64,
    held_max: u64,
    ring_drops: u64,
    ring_traffic_drops: u64,
}

/// A killed node's accounts: what its earlier lives counted (so a reboot
/// does not reset the run's counters) and the traffic the kill lost.
#[derive(Clone, Debug, Default)]
struct Past {
    /// Per port (tx packets, tx frame bytes, tx wire bytes) of earlier lives.
    ports: Vec<(u64, u64, u64)>,
    /// Ledger of earlier lives: copies created, frames dropped (CPU
    /// input-queue drops included).
    created: u64,
    dropped: u64,
    /// Traffic held (queues, CPU input queue) when the node was killed.
    lost_held: u64,
    /// Traffic that reached the node while it was down.
    lost_arriving: u64,
    kills: u64,
    restarts: u64,
}

impl Slot {
    pub fn new(node: Box<dyn Node>, clock: Clock, cpu: Option<Cpu>) -> Self {
        Slot {
            node,
            clock,
            cpu,
            sources: Vec::new(),
            source_clock: Clock::default(),
            wake_at: None,
            down: false,
            stale_cpu_done: None,
            past: Past::default(),
            stall_depth: 0,
            stall_ring: VecDeque::new(),
            stall_cpu_due: false,
            stall_stats: StallStats::default(),
        }
    }
    /// Attach traffic sources scheduled on `clock`.
    pub fn with_sources(mut self, sources: Vec<Source>, clock: Clock) -> Self {
        self.sources = sources;
        self.source_clock = clock;
        self
    }
}

/// A shared segment as the engine holds it: the medium, which node port
/// each of its stations is, and the conservation ledger of the traffic it
/// carries (a frame sent whole reaches every other station: copies).
pub(crate) struct Medium {
    pub seg: Segment,
    pub name: String,
    /// Station `k` is (node, port).
    pub stations: Vec<(u32, u16)>,
    wake_at: Option<Instant>,
    /// Per station: the frame its NIC holds is traffic.
    nic_traffic: Vec<bool>,
    /// Traffic frames given up after excessive collisions, or refused.
    traffic_lost: u64,
    /// Per station, on a captured port: the frame its NIC holds, written
    /// to the capture only once it crossed the bus whole (a frame given
    /// up after excessive collisions, IEEE 802.3 §4.2.3.2.5, was never
    /// received and is not in the pcap).
    to_capture: Vec<Option<Packet>>,
}

impl Medium {
    pub fn new(seg: Segment, name: String, stations: Vec<(u32, u16)>) -> Self {
        let n = stations.len();
        Medium {
            seg,
            name,
            stations,
            wake_at: None,
            nic_traffic: vec![false; n],
            traffic_lost: 0,
            to_capture: vec![None; n],
        }
    }
}

/// The engine's random stream as the core's [`Draw`]: one seeded stream
/// for the whole run, drawn in event order, so a seed replays bit for bit.
struct RngDraw<'a>(&'a mut StdRng);

impl Draw for RngDraw<'_> {
    fn uniform_u64(&mut self, lo: u64, hi: u64) -> u64 {
        self.0.gen_range(lo..=hi)
    }
    fn unit_f64(&mut self) -> f64 {
        self.0.gen_range(f64::EPSILON..1.0)
    }
}

/// Per node, per port: (tx packets, tx frame bytes, tx wire bytes).
type Counters = Vec<Vec<(u64, u64, u64)>>;

pub struct Sim {
    pub(crate) sc: Scenario,
    pub(crate) net: Network,
    pub(crate) slots: Vec<Slot>,
    /// Per node, per port: the medium the port is attached to.
    pub(crate) attach: Vec<Vec<Attach>>,
    /// Shared segments.
    pub(crate) media: Vec<Medium>,
    q: EventQueue,
    now: Instant,
    rng: StdRng,
    pub(crate) flows: Vec<FlowStat>,
    /// Per flow, the headers of its packets (all but the IP ident, which
    /// is the sequence number).
    pub(crate) flow_hdr: Vec<UdpSpec>,
    events: u64,
    uid: u64,
    generated: u64,
    stalls: u64,
    snap_start: Option<Counters>,
    snap_end: Option<Counters>,
    pub(crate) extra: BTreeMap<String, serde_json::Value>,
    progress: bool,
    /// Set from outside (Ctrl-C) to end the run early; results then cover
    /// the simulated time reached.
    stop: Option<Arc<AtomicBool>>,
    interrupted: bool,
    /// Per node, per port: a pcap capture of what the port transmits.
    pcap: Vec<Vec<Option<Capture>>>,
    /// `[[fault]] kind = "kill"` as a schedule: (time, node, restart?),
    /// in time order, and the next one due.
    kills: Vec<(Instant, usize, bool)>,
    next_kill: usize,
    /// What each kill and restart did, for results (`extra.kills`).
    kill_log: Vec<serde_json::Value>,
    /// `[[fault]] kind = "stall"` as a schedule: (time, node, end?), in
    /// time order (at one instant ends before begins), and the next one due.
    stall_sched: Vec<(Instant, usize, bool)>,
    next_stall: usize,
}

type Capture = pcap_file::pcap::PcapWriter<std::io::BufWriter<std::fs::File>>;

/// Write `pkt` to the capture of (node, port), if any, stamped `at`. A
/// failed write (full disk) stops that capture, never the simulation.
fn capture(pcap: &mut [Vec<Option<Capture>>], node: usize, port: usize, at: Instant, pkt: &Packet) {
    if let Some(slot) = pcap.get_mut(node).and_then(|r| r.get_mut(port)) {
        if let Some(w) = slot {
            let p = pcap_file::pcap::PcapPacket::new(
                std::time::Duration::from_nanos(at.as_nanos()),
                pkt.len() as u32,
                &pkt.data,
            );
            if w.write_packet(&p).is_err() {
                *slot = None;
            }
        }
    }
}

/// Whether (node, port) is captured.
fn captured(pcap: &[Vec<Option<Capture>>], node: usize, port: usize) -> bool {
    pcap.get(node)
        .and_then(|r| r.get(port))
        .is_some_and(Option::is_some)
}

/// Schedule medium `m`'s next wake-up if it is earlier than the one
/// already scheduled.
fn arm_medium(med: &mut Medium, q: &mut EventQueue, now: Instant, m: usize) {
    if let Some(t) = med.seg.poll_timeout() {
        let t = t.max(now);
        if med.wake_at.is_none_or(|w| t < w || w < now) {
            med.wake_at = Some(t);
            q.push(t, Ev::Medium { seg: m as u32 });
        }
    }
}

impl Sim {
    /// Build a simulation of `sc`. Fails with a message if the scenario's
    /// network cannot be built (routing, TDP reservations).
    pub fn new(sc: Scenario) -> Result<Sim, String> {
        let net = Network::build(&sc)?;
        build::build(sc, net)
    }

    pub(crate) fn assemble(
        sc: Scenario,
        net: Network,
        slots: Vec<Slot>,
        attach: Vec<Vec<Attach>>,
        media: Vec<Medium>,
        extra: BTreeMap<String, serde_json::Value>,
    ) -> Sim {
        let flows = sc
            .flows
            .iter()
            .map(|f| {
                let mut s = FlowStat::new(f.name.clone());
                s.rtt = f.echo;
                s
            })
            .collect();
        let flow_hdr = sc
            .flows
            .iter()
            .map(|f| {
                let src = &net.nodes[f.from].ifaces[0];
                let dst = net.host_ip(f.to);
                UdpSpec {
                    src_mac: src.mac,
                    dst_mac: net.first_hop_mac(&sc, f.from, dst),
                    src: net.host_ip(f.from),
                    dst,
                    sport: f.sport,
                    dport: f.dport,
                    tos: f.dscp << 2,
                    ttl: f.ttl,
                    ident: 0,
                }
            })
            .collect();
        let rng = StdRng::seed_from_u64(sc.seed);
        let mut kills: Vec<(Instant, usize, bool)> = Vec::new();
        for k in &sc.kills {
            kills.push((Instant(k.at.as_nanos()), k.node, false));
            if let Some(r) = k.restart {
                kills.push((Instant(r.as_nanos()), k.node, true));
            }
        }
        // A restart at the same time as a kill of the same node (allowed
        // at load) comes first: the node boots and dies.
        kills.sort_by_key(|&(t, n, up)| (t, !up, n));
        let mut stall_sched: Vec<(Instant, usize, bool)> = Vec::new();
        for st in &sc.stalls {
            for (b, e) in st.windows() {
                for &n in &st.nodes {
                    stall_sched.push((Instant(b.as_nanos()), n, false));
                    stall_sched.push((Instant(e.as_nanos()), n, true));
                }
            }
        }
        // A stall that ends as the next begins lets the node run between
        // them (it takes what its ring held) before it freezes again.
        stall_sched.sort_by_key(|&(t, n, end)| (t, !end, n));
        Sim {
            sc,
            net,
            slots,
            attach,
            media,
            q: EventQueue::default(),
            now: Instant::ZERO,
            rng,
            flows,
            flow_hdr,
            events: 0,
            uid: 0,
            generated: 0,
            stalls: 0,
            snap_start: None,
            snap_end: None,
            extra,
            progress: false,
            stop: None,
            interrupted: false,
            pcap: Vec::new(),
            kills,
            next_kill: 0,
            kill_log: Vec::new(),
            stall_sched,
            next_stall: 0,
        }
    }

    /// Capture every frame the named directed links (`"R1->R2"`; all links
    /// if `links` is empty) transmit into `DIR/<from>-<to>.pcap`, stamped
    /// with the virtual time of its first bit (nanosecond pcap). A frame on
    /// a shared segment is written once the bus carried it whole, stamped
    /// when its successful attempt began; one given up after excessive
    /// collisions is not written. Returns the files opened.
    pub fn enable_pcap(&mut self, dir: &std::path::Path, links: &[String]) -> Result<Vec<String>, String> {
        use pcap_file::pcap::{PcapHeader, PcapWriter};
        use pcap_file::TsResolution;
        let mut known = Vec::new();
        for (i, nn) in self.net.nodes.iter().enumerate() {
            for f in &nn.ifaces {
                known.push(format!(
                    "{}->{}",
                    self.sc.nodes[i].name, self.sc.nodes[f.peer].name
                ));
            }
        }
        if let Some(bad) = links.iter().find(|l| !known.contains(l)) {
            return Err(format!(
                "--pcap-link {bad}: no such link; links are {}",
                known.join(", ")
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let mut opened = Vec::new();
        self.pcap = Vec::new();
        for (i, nn) in self.net.nodes.iter().enumerate() {
            let mut row = Vec::new();
            for f in &nn.ifaces {
                let (a, b) = (&self.sc.nodes[i].name, &self.sc.nodes[f.peer].name);
                if !links.is_empty() && !links.contains(&format!("{a}->{b}")) {
                    row.push(None);
                    continue;
                }
                let path = dir.join(format!("{a}-{b}.pcap"));
                let file =
                    std::fs::File::create(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
                let header = PcapHeader {
                    ts_resolution: TsResolution::NanoSecond,
                    ..Default::default()
                };
                let w = PcapWriter::with_header(std::io::BufWriter::new(file), header)
                    .map_err(|e| format!("writing {}: {e}", path.display()))?;
                row.push(Some(w));
                opened.push(path.display().to_string());
            }
            self.pcap.push(row);
        }
        Ok(opened)
    }

    /// Print progress to stderr on long runs.
    pub fn set_progress(&mut self, on: bool) {
        self.progress = on;
    }

    /// A flag that ends the run when set (the CLI sets it on Ctrl-C): the
    /// engine checks it every 1024 events, stops, and returns results for
    /// the simulated time reached, marked `extra.interrupted_at_s`.
    pub fn set_stop(&mut self, stop: Arc<AtomicBool>) {
        self.stop = Some(stop);
    }

    /// The last run was ended by the stop flag.
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    pub fn scenario(&self) -> &Scenario {
        &self.sc
    }

    /// Run the scenario to the end and return its results.
    pub fn run(&mut self) -> Results {
        let wall = std::time::Instant::now();
        for (i, slot) in self.slots.iter().enumerate() {
            for (s, src) in slot.sources.iter().enumerate() {
                if src.start < src.stop {
                    let at = slot.source_clock.global(Instant(src.start.as_nanos()));
                    self.q.push(
                        at,
                        Ev::Emit {
                            node: i as u32,
                            source: s as u32,
                        },
                    );
                }
            }
        }
        for i in 0..self.slots.len() {
            self.service(i);
        }
        let warmup = Instant(self.sc.warmup.as_nanos());
        let end = Instant(self.sc.duration.as_nanos());
        let hard_end = end + self.sc.drain;
        let mut next_report = 1.0;
        // The next kill, restart or stall boundary, if any: kept here and
        // recomputed only when one is taken, so an ordinary event pays one
        // comparison for faults.
        let mut fault_at = self.next_fault_at();
        loop {
            let t = match (self.q.peek_time(), fault_at) {
                (Some(q), Some(f)) => q.min(f),
                (Some(t), None) | (None, Some(t)) => t,
                (None, None) => break,
            };
            if self.snap_start.is_none() && t >= warmup {
                self.snap_start = Some(self.port_counters());
            }
            if self.snap_end.is_none() && t >= end {
                self.snap_end = Some(self.port_counters());
            }
            if t > hard_end || (t > end && self.events & 0x3ff == 0 && self.in_flight() == 0) {
                break;
            }
            if self.events & 0x3ff == 0 && self.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
                self.interrupted = true;
                break;
            }
            if fault_at == Some(t) {
                if self.kills.get(self.next_kill).map(|k| k.0) == Some(t) {
                    // Node failures and restarts come before the events of
                    // their instant: a node killed at t sees nothing at t.
                    let (at, node, up) = self.kills[self.next_kill];
                    self.next_kill += 1;
                    self.now = at;
                    if up {
                        self.restart(node);
                    } else {
                        self.kill(node);
                    }
                } else {
                    // Like kills, stalls begin and end before the events of
                    // their instant (after kills at the same instant).
                    let (at, node, end) = self.stall_sched[self.next_stall];
                    self.next_stall += 1;
                    self.now = at;
                    if end {
                        self.stall_end(node);
                    } else {
                        self.stall_begin(node);
                    }
                }
                fault_at = self.next_fault_at();
                continue;
            }
            let Some((t, ev)) = self.q.pop() else { break };
            self.now = t;
            self.events += 1;
            self.dispatch(ev);
            if self.progress && self.events & 0xffff == 0 {
                let w = wall.elapsed().as_secs_f64();
                if w > next_report {
                    next_report = w + 0.5;
                    eprint!(
                        "\r  simulated {:.2} s of {:.2} s ({:.0}%), {} events, {:.1} s wall",
                        t.as_secs_f64(),
                        end.as_secs_f64(),
                        100.0 * t.as_secs_f64() / end.as_secs_f64(),
                        self.events,
                        w
                    );
                }
            }
        }
        if self.progress && next_report > 1.0 {
            eprintln!();
        }
        if self.snap_start.is_none() {
            self.snap_start = Some(self.port_counters());
        }
        if self.snap_end.is_none() {
            self.snap_end = Some(self.port_counters());
        }
        // Close captures (flushes their buffers).
        self.pcap.clear();
        self.results(wall.elapsed().as_secs_f64())
    }

    /// When the next kill, restart or stall boundary is due, if any.
    fn next_fault_at(&self) -> Option<Instant> {
        let kill = self.kills.get(self.next_kill).map(|k| k.0);
        let stall = self.stall_sched.get(self.next_stall).map(|k| k.0);
        match (kill, stall) {
            (Some(k), Some(s)) => Some(k.min(s)),
            (k, s) => k.or(s),
        }
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { node, port, pkt } => self.arrive(node as usize, port, pkt, true, false),
            Ev::Wake { node } => {
                let i = node as usize;
                if self.slots[i].wake_at == Some(self.now) {
                    self.slots[i].wake_at = None;
                    self.service(i);
                }
            }
            Ev::CpuDone { node } => {
                let slot = &mut self.slots[node as usize];
                if slot.stale_cpu_done == Some(self.now) {
                    // The dead CPU's completion; a restarted node's own
                    // was scheduled after it.
                    slot.stale_cpu_done = None;
                } else if slot.stall_depth > 0 {
                    // The CPU is the node's: it finishes nothing while
                    // stalled.
                    slot.stall_cpu_due = true;
                } else if !slot.down {
                    self.cpu_done(node as usize);
                }
            }
            Ev::Emit { node, source } => self.emit(node as usize, source as usize),
            Ev::Medium { seg } => {
                let m = seg as usize;
                if self.media[m].wake_at == Some(self.now) {
                    self.media[m].wake_at = None;
                    self.service_medium(m);
                }
            }
        }
    }

    /// Let segment `m` run to now: deliver what reached stations whole,
    /// tell senders what became of their frames, then arm its next wake-up.
    fn service_medium(&mut self, m: usize) {
        let now = self.now;
        let med = &mut self.media[m];
        med.seg.handle_timeout(now);
        let outs: Vec<SegOutput> = std::iter::from_fn(|| med.seg.poll_output()).collect();
        for out in outs {
            match out {
                SegOutput::Deliver { station, pkt, .. } => {
                    let Some(&(node, port)) = self.media[m].stations.get(station) else {
                        continue;
                    };
                    self.arrive(node as usize, port, pkt, false, false);
                }
                SegOutput::TxDone {
                    station,
                    status,
                    started,
                    ..
                } => {
                    let med = &mut self.media[m];
                    let Some(&(node, port)) = med.stations.get(station) else {
                        continue;
                    };
                    let held = med.to_capture.get_mut(station).and_then(Option::take);
                    if let (Some(pkt), TxStatus::Sent { .. }) = (held, status) {
                        capture(&mut self.pcap, node as usize, port as usize, started, &pkt);
                    }
                    if std::mem::take(&mut med.nic_traffic[station])
                        && status == TxStatus::ExcessiveCollisions
                    {
                        med.traffic_lost += 1;
                    }
                    let slot = &mut self.slots[node as usize];
                    if slot.down {
                        continue;
                    }
                    let local = slot.clock.local(now);
                    slot.node.handle_tx_done(local, port, status);
                    self.service(node as usize);
                }
            }
        }
        self.arm_medium(m);
    }

    /// Node `i`'s CPU finished the frame in service: the node gets it.
    fn cpu_done(&mut self, i: usize) {
        let now = self.now;
        let slot = &mut self.slots[i];
        let local = slot.clock.local(now);
        let done = match slot.cpu.as_mut() {
            Some(cpu) => cpu.poll_done(now, &mut RngDraw(&mut self.rng)),
            None => None,
        };
        if let Some((port, frame, meta)) = done {
            slot.node.handle_frame(local, port, frame, meta);
        }
        if let Some(t) = slot.cpu.as_ref().and_then(|c| c.poll_timeout()) {
            // After a stall the next completion may be due already.
            self.q.push(t.max(now), Ev::CpuDone { node: i as u32 });
        }
        self.service(i);
    }

    /// Whether an event scheduled now, after everything already queued,
    /// may run at once instead: it would be the very next event taken (no
    /// other event is queued for now), and the run loop would not stop
    /// before it (its checks run every 1024 events; here they would not).
    /// Running it at once is then the same run, minus a push and a pop.
    fn next_is_now(&self) -> bool {
        self.events & 0x3ff != 0 && self.q.peek_time().is_none_or(|t| t > self.now)
    }

    /// Schedule segment `m`'s next wake-up if it is earlier than the one
    /// already scheduled.
    fn arm_medium(&mut self, m: usize) {
        arm_medium(&mut self.media[m], &mut self.q, self.now, m);
    }

    /// A frame's last bit reached port `port` of node `i`: into the node's
    /// CPU queue if it has one, else straight to the node (also when the
    /// CPU is idle and takes no time for it). `alone`: this is all the
    /// current event does, so a CPU completion drawn as zero may run at
    /// once when nothing else is due now (see [`Sim::next_is_now`]).
    /// `stamped`: the frame waited in the ring of a stalled node and
    /// carries its receive time already.
    fn arrive(&mut self, i: usize, port: u16, mut pkt: Packet, alone: bool, stamped: bool) {
        let now = self.now;
        let slot = &mut self.slots[i];
        if slot.down {
            if pkt.meta.uid != 0 {
                slot.past.lost_arriving += 1;
            }
            return;
        }
        let local = slot.clock.local(now);
        // The NIC's receive time: nodes decode time-dependent fields (TDP
        // stamps) against it, however long the frame then waits for the
        // CPU or for a stall to end (the kernel stamps a frame as it
        // arrives, whatever the thread that reads it is doing).
        if !stamped {
            pkt.meta.arrival = local;
        }
        if slot.stall_depth > 0 {
            let st = &mut slot.stall_stats;
            if slot.stall_ring.len() >= STALL_RING {
                st.ring_drops += 1;
                st.ring_traffic_drops += (pkt.meta.uid != 0) as u64;
            } else {
                slot.stall_ring.push_back((port, pkt));
                st.held += 1;
                st.held_max = st.held_max.max(slot.stall_ring.len() as u64);
            }
            return;
        }
        if slot.cpu.as_mut().is_some_and(|c| c.serve_now(&pkt.data)) {
            // An idle zero-time CPU stage: the frame's processing ends
            // as it arrives, so the node gets it in this event rather
            // than in a CpuDone queued behind every other event of this
            // nanosecond (a fifth of all events on the ICC 2006
            // testbed with processing 0). The frame thus reaches the node
            // before the same-nanosecond events scheduled after its
            // arrival: a different order of simultaneous events, as valid
            // for a stage that takes no time (ns-3's model of the testbed,
            // which has no CPU stage, also queues a frame as it arrives;
            // its other same-nanosecond orders still differ from ours).
            // Counted as the CpuDone event it stands for: the run loop's
            // every-1024-events checks (the end of the drain, the stop
            // flag) then fall where they did.
            self.events += 1;
            slot.node.handle_frame(local, port, pkt.data, pkt.meta);
            self.service(i);
            return;
        }
        let slot = &mut self.slots[i];
        match slot.cpu.as_mut() {
            Some(cpu) => {
                let idle = cpu.poll_timeout().is_none();
                if cpu.handle_frame(now, port, pkt.data, pkt.meta, &mut RngDraw(&mut self.rng)) && idle {
                    if let Some(t) = cpu.poll_timeout() {
                        if alone && t == now && self.next_is_now() {
                            // The CpuDone event this would schedule, run
                            // as the next event (and counted as one).
                            self.events += 1;
                            self.cpu_done(i);
                        } else {
                            self.q.push(t, Ev::CpuDone { node: i as u32 });
                        }
                    }
                }
            }
            None => {
                slot.node.handle_frame(local, port, pkt.data, pkt.meta);
                self.service(i);
            }
        }
    }

    /// A traffic source attached to node `i` sends its next packet.
    fn emit(&mut self, i: usize, s: usize) {
        let now = self.now;
        let slot = &mut self.slots[i];
        if slot.down {
            // A dead host's applications send nothing; their schedule
            // runs on, so they resume on time after a restart.
            let src = &mut slot.sources[s];
            if let Some(t) = src.advance(&mut RngDraw(&mut self.rng)) {
                let at = slot.source_clock.global(Instant(t)).max(now);
                self.q.push(
                    at,
                    Ev::Emit {
                        node: i as u32,
                        source: s as u32,
                    },
                );
            }
            return;
        }
        let src = &mut slot.sources[s];
        let flow = src.flow as usize;
        let size = src.size(&mut RngDraw(&mut self.rng));
        let seq = src.seq;
        src.seq += 1;
        let next = src.advance(&mut RngDraw(&mut self.rng));
        let probe = Probe {
            flow: flow as u32,
            seq,
            tx_ns: now.as_nanos(),
        };
        let spec = UdpSpec {
            ident: seq as u16,
            ..self.flow_hdr[flow]
        };
        // The probe in the layout the payload's size calls for (compact
        // for IP 40-51); sizes too small for any are refused at load.
        let mut payload = [0u8; PROBE_LEN];
        let room = size.saturating_sub(IP_UDP_HDR).min(PROBE_LEN);
        let _ = probe.write_into(&mut payload[..room]);
        let data = wire::build_udp(&spec, size, &payload[..room]);
        self.uid += 1;
        self.generated += 1;
        let meta = Meta {
            uid: self.uid,
            ..Meta::default()
        };
        if now.as_nanos() >= self.sc.warmup.as_nanos() && now.as_nanos() < self.sc.duration.as_nanos() {
            self.flows[flow].sent += 1;
        }
        let local = slot.clock.local(now);
        slot.node.handle_send(local, Packet::new(data, meta));
        if let Some(t) = next {
            let at = slot.source_clock.global(Instant(t)).max(now);
            self.q.push(
                at,
                Ev::Emit {
                    node: i as u32,
                    source: s as u32,
                },
            );
        }
        self.service(i);
    }

    /// Measurement traffic delivered to node `i`'s applications.
    fn deliver(&mut self, pkt: &Packet) {
        let now = self.now;
        let Ok(info) = wire::parse_ipv4(&pkt.data) else {
            return;
        };
        let Some(d) = Probe::decode_any(wire::udp_payload(&pkt.data, &info)) else {
            return;
        };
        let Some(f) = self.flows.get_mut(d.flow() as usize) else {
            return;
        };
        // A compact probe's sequence number and send time are restored
        // against the flow's highest sequence number and the arrival time
        // (exact: the sim's delays are bounded far below ±549 s).
        let p = d.resolve(f.top_seq(), now.as_nanos());
        if !f.saw(p.seq) {
            // A copy of a packet that already arrived: counted as such.
            return;
        }
        let (warmup, end) = (self.sc.warmup.as_nanos(), self.sc.duration.as_nanos());
        if now.as_nanos() >= warmup && now.as_nanos() < end {
            f.arrived_in_window(info.total_len);
        }
        if p.tx_ns >= warmup && p.tx_ns < end {
            f.record(p.seq, now.as_nanos().saturating_sub(p.tx_ns), info.tos);
        }
    }

    /// Let node `i` run its timers, transmit what it can now and hand up
    /// what it delivered, then arm its next wake-up.
    ///
    /// This runs after nearly every event: the fields it uses are borrowed
    /// once (the node's slot, its ports' media, the queue) rather than
    /// indexed again for each call into the node.
    fn service(&mut self, i: usize) {
        let Sim {
            slots,
            attach,
            media,
            q,
            pcap,
            now,
            ..
        } = self;
        let now = *now;
        let Some(slot) = slots.get_mut(i) else {
            return;
        };
        if slot.down || slot.stall_depth > 0 {
            return;
        }
        let local = slot.clock.local(now);
        slot.node.handle_timeout(local);
        let ports = attach.get(i).map_or(&[][..], |a| &a[..]);
        while let Some(tx) = slot.node.poll_transmit(local) {
            let port = tx.port as usize;
            // A shared segment's frame is captured when it crossed (see
            // `Medium::to_capture`); a link's as its first bit leaves.
            let on_segment = matches!(ports.get(port), Some(Attach::Segment { .. }));
            if !on_segment && !pcap.is_empty() {
                capture(pcap, i, port, now, &tx.pkt);
            }
            let keep = on_segment && captured(pcap, i, port);
            let kept = keep.then(|| tx.pkt.clone());
            let tx_end = tx.tx_end.map(|t| slot.clock.global(t)).unwrap_or(now);
            match ports.get(port) {
                Some(Attach::Link(ch)) => q.push(
                    ch.arrival(tx_end),
                    Ev::Arrive {
                        node: ch.peer,
                        port: ch.peer_port,
                        pkt: tx.pkt,
                    },
                ),
                Some(&Attach::Segment { seg, station }) => {
                    let m = seg as usize;
                    let traffic = tx.pkt.meta.uid != 0;
                    let Some(med) = media.get_mut(m) else {
                        continue;
                    };
                    match med.seg.handle_send(now, station as usize, tx.pkt) {
                        Ok(()) => {
                            if let Some(f) = med.nic_traffic.get_mut(station as usize) {
                                *f = traffic;
                            }
                            if let Some(c) = med.to_capture.get_mut(station as usize) {
                                *c = kept;
                            }
                        }
                        // A node handed a second frame before its NIC was
                        // done (a node bug): counted by the segment, lost.
                        Err(_) if traffic => med.traffic_lost += 1,
                        Err(_) => {}
                    }
                    arm_medium(med, q, now, m);
                }
                // A port attached to nothing: the frame is lost on the
                // floor, as from an unplugged NIC.
                None => {}
            }
        }
        while let Some(ev) = self.slots[i].node.poll_event() {
            match ev {
                Event::Deliver { pkt, .. } => self.deliver(&pkt),
            }
        }
        let slot = &mut self.slots[i];
        if slot.wake_at == Some(now) {
            // A wake-up the node asked for at this nanosecond is still
            // queued, and this call did what it would do (the node's
            // state changes only in events that end here). Its event,
            // taken later in this nanosecond, then finds `wake_at` moved
            // and skips the node: a fifth of the wake-ups on the ICC 2006
            // testbed, where an arrival and a transmitter's end often
            // fall in the same nanosecond. The next wake-up is queued
            // now rather than by that event, earlier among the events of
            // its own time.
            slot.wake_at = None;
        }
        let next = slot.node.poll_timeout(local).map(|t| slot.clock.global(t));
        if let Some(mut t) = next {
            if t <= now {
                // A node said "ready" but did nothing; poll again a
                // nanosecond later rather than spin. Counted: it is a bug.
                self.stalls += 1;
                t = now + Duration(1);
            }
            if slot.wake_at.is_none_or(|w| t < w || w < now) {
                slot.wake_at = Some(t);
                self.q.push(t, Ev::Wake { node: i as u32 });
            }
        }
    }

    /// Node `i` stalls (`[[fault]] kind = "stall"`): until its stall ends
    /// it handles no input, runs no timer and starts no transmission (a
    /// frame already on the wire finishes: its arrival is queued); what
    /// reaches it waits in its NIC's ring ([`STALL_RING`] frames).
    fn stall_begin(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        slot.stall_depth += 1;
        if slot.stall_depth == 1 {
            slot.stall_stats.stalls += 1;
        }
    }

    /// Node `i`'s stall ends: it takes the frames its ring held, in order
    /// and with their receive times, and the CPU completion that fell in
    /// the stall, then runs its timers and transmitters as after any
    /// event.
    fn stall_end(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        slot.stall_depth = slot.stall_depth.saturating_sub(1);
        if slot.stall_depth > 0 {
            return;
        }
        let ring = std::mem::take(&mut slot.stall_ring);
        let cpu_due = std::mem::take(&mut slot.stall_cpu_due);
        if cpu_due && !slot.down {
            self.cpu_done(i);
        }
        for (port, pkt) in ring {
            self.arrive(i, port, pkt, false, true);
        }
        self.service(i);
    }

    /// Node `i` fails (`[[fault]] kind = "kill"`): from now on it receives,
    /// sends and times out nothing. The traffic it holds — its queues and
    /// its CPU's input queue — is lost, and counted so (the ledger's
    /// dropped), as is every frame that reaches it while it is down. Its
    /// counters stay as they were at the kill (results show them).
    fn kill(&mut self, i: usize) {
        let now = self.now;
        let slot = &mut self.slots[i];
        if slot.down {
            return;
        }
        let ring = std::mem::take(&mut slot.stall_ring);
        let held = slot.node.ledger().held
            + slot.cpu.as_ref().map_or(0, |c| c.traffic_len() as u64)
            + ring.iter().filter(|(_, p)| p.meta.uid != 0).count() as u64;
        slot.down = true;
        slot.stall_cpu_due = false;
        slot.wake_at = None;
        slot.stale_cpu_done = slot.cpu.as_ref().and_then(|c| c.poll_timeout());
        slot.past.lost_held += held;
        slot.past.kills += 1;
        let counters: BTreeMap<String, u64> = slot.node.counters().into_iter().collect();
        self.kill_log.push(serde_json::json!({
            "node": self.sc.nodes[i].name,
            "at_s": now.as_secs_f64(),
            "event": "kill",
            "lost_held": held,
            "counters": counters,
        }));
    }

    /// Node `i` boots again: a fresh node from the scenario's
    /// configuration, with a fresh CPU. What the dead one counted is
    /// carried into the run's totals (ports, ledger), so link results
    /// and the packet ledger cover both lives.
    fn restart(&mut self, i: usize) {
        if !self.slots[i].down {
            return;
        }
        let booted = build::reboot(&self.sc, &self.net, i);
        let name = self.sc.nodes[i].name.clone();
        let (node, cpu) = match booted {
            Ok(b) => b,
            Err(e) => {
                // Built at load, so this does not happen; if it did, the
                // node stays down and the results say why.
                self.kill_log.push(serde_json::json!({
                    "node": name, "at_s": self.now.as_secs_f64(), "event": "restart failed", "error": e,
                }));
                return;
            }
        };
        let slot = &mut self.slots[i];
        let old_ports: Vec<(u64, u64, u64)> = (0..slot.node.port_count())
            .map(|p| {
                let r = slot.node.port_report(p as u16);
                (r.tx_pkts, r.tx_bytes, r.tx_wire_bytes)
            })
            .collect();
        if slot.past.ports.len() < old_ports.len() {
            slot.past.ports.resize(old_ports.len(), (0, 0, 0));
        }
        for (b, o) in slot.past.ports.iter_mut().zip(old_ports) {
            *b = (b.0 + o.0, b.1 + o.1, b.2 + o.2);
        }
        let l = slot.node.ledger();
        slot.past.created += l.created;
        slot.past.dropped += l.dropped + slot.cpu.as_ref().map_or(0, |c| c.drops);
        slot.past.restarts += 1;
        slot.node = node;
        slot.cpu = cpu;
        slot.down = false;
        self.kill_log.push(serde_json::json!({
            "node": name, "at_s": self.now.as_secs_f64(), "event": "restart",
        }));
        self.service(i);
    }

    /// Packets inside the network: in flight on media, in CPU queues, and
    /// held by nodes (queues, shapers, hold buffers). Only traffic counts
    /// (frames with a uid): control frames (ARP, DS frames) are made and
    /// consumed by nodes, like padding.
    pub fn in_flight(&self) -> usize {
        let mut n = self.q.frames_in_flight();
        // A dead node's frames were counted lost when it died.
        for s in self.slots.iter().filter(|s| !s.down) {
            n += s.cpu.as_ref().map_or(0, |c| c.traffic_len());
            n += s.node.ledger().held as usize;
            n += s.stall_ring.iter().filter(|(_, p)| p.meta.uid != 0).count();
        }
        for m in &self.media {
            n += m.seg.in_flight();
        }
        n
    }

    /// Conservation ledger: (generated, delivered to hosts, dropped, in flight).
    /// Generated counts the sources' packets and the copies nodes made of
    /// them (a switch flooding). Padding frames are router-generated and
    /// consumed by routers; they are excluded on both sides.
    pub fn ledger(&self) -> (u64, u64, u64, u64) {
        // A frame sent whole on a segment reaches every other station:
        // the copies beyond the first station's are created by the medium
        // (counted as they arrive, so a run that stops while a frame is
        // still propagating balances).
        let created: u64 = self
            .slots
            .iter()
            .map(|s| s.node.ledger().created + s.past.created)
            .sum::<u64>()
            + self.media.iter().map(|m| m.seg.traffic_copies()).sum::<u64>();
        let dropped = self
            .slots
            .iter()
            .map(|s| {
                s.cpu.as_ref().map_or(0, |c| c.drops)
                    + s.node.ledger().dropped
                    + s.past.dropped
                    + s.past.lost_held
                    + s.past.lost_arriving
                    + s.stall_stats.ring_traffic_drops
            })
            .sum::<u64>()
            + self
                .media
                .iter()
                .map(|m| m.traffic_lost + m.seg.traffic_unreceived())
                .sum::<u64>();
        let delivered = self.flows.iter().map(|f| f.total_received).sum();
        let in_flight = self.in_flight() as u64
            - self
                .media
                .iter()
                .map(|m| (m.seg.in_flight() - m.seg.unreceived_in_flight()) as u64)
                .sum::<u64>();
        (self.generated + created, delivered, dropped, in_flight)
    }

    fn port_counters(&self) -> Counters {
        self.slots
            .iter()
            .map(|s| {
                (0..s.node.port_count())
                    .map(|p| {
                        let r = s.node.port_report(p as u16);
                        let b = s.past.ports.get(p).copied().unwrap_or_default();
                        (r.tx_pkts + b.0, r.tx_bytes + b.1, r.tx_wire_bytes + b.2)
                    })
                    .collect()
            })
            .collect()
    }

    fn results(&self, wall_s: f64) -> Results {
        // An interrupted run measured up to where it stopped.
        let interval = if self.interrupted {
            let end = Duration(self.now.as_nanos().min(self.sc.duration.as_nanos()));
            Duration(end.as_nanos().saturating_sub(self.sc.warmup.as_nanos())).as_secs_f64()
        } else {
            (self.sc.duration - self.sc.warmup).as_secs_f64()
        };
        let (a, b) = (self.snap_start.as_ref(), self.snap_end.as_ref());
        let mut links = Vec::new();
        let mut nodes = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let name = &self.sc.nodes[i].name;
            // A segment's own "ports" are its stations' drop cables: the
            // stations report what they sent; the bus has its own section.
            let ports = if self.sc.nodes[i].is_medium() {
                &[][..]
            } else {
                &self.net.nodes[i].ifaces[..]
            };
            for (p, iface) in ports.iter().enumerate() {
                let (p0, b0, w0) = a.map(|c| c[i][p]).unwrap_or_default();
                let (p1, b1, w1) = b.map(|c| c[i][p]).unwrap_or_default();
                let cap = self.sc.links[iface.link].capacity_bps;
                // IP bytes: frame bytes minus the Ethernet header per packet.
                let ip_bytes = (b1 - b0).saturating_sub(14 * (p1 - p0));
                let rep = slot.node.port_report(p as u16);
                links.push(LinkResult {
                    name: format!("{}->{}", name, self.sc.nodes[iface.peer].name),
                    capacity_bps: cap,
                    packets: p1 - p0,
                    bytes: b1 - b0,
                    utilization: (w1 - w0) as f64 * 8.0 / (cap as f64 * interval),
                    load_bps: ip_bytes as f64 * 8.0 / interval,
                    scheduler: rep.scheduler,
                    counters: rep.counters.into_iter().collect(),
                    queued_at_end: rep.queued,
                    drops: rep.drops.iter().map(|(_, n)| n).sum(),
                    drops_by_reason: rep.drops.into_iter().collect(),
                });
            }
            let mut counters: BTreeMap<String, u64> = slot.node.counters().into_iter().collect();
            if let Some(c) = &slot.cpu {
                counters.insert("input_queue_drops".into(), c.drops);
            }
            if slot.past.kills > 0 {
                let p = &slot.past;
                counters.insert("killed".into(), p.kills);
                counters.insert("restarted".into(), p.restarts);
                counters.insert("lost_held_at_kill".into(), p.lost_held);
                counters.insert("lost_arriving_while_down".into(), p.lost_arriving);
                counters.insert("down_at_end".into(), slot.down as u64);
            }
            if slot.stall_stats.stalls > 0 {
                let st = &slot.stall_stats;
                counters.insert("stalls".into(), st.stalls);
                counters.insert("stall_ring_held".into(), st.held);
                counters.insert("stall_ring_held_max".into(), st.held_max);
                counters.insert("stall_ring_drops".into(), st.ring_drops);
            }
            nodes.push(NodeResult {
                name: name.clone(),
                counters,
                details: slot.node.details().as_ref().map(detail_json),
            });
        }
        let sim_s = self.now.as_secs_f64();
        let mut extra = self.extra.clone();
        extra.insert("engine_stalls".into(), self.stalls.into());
        if !self.kill_log.is_empty() {
            extra.insert("kills".into(), self.kill_log.clone().into());
        }
        if self.interrupted {
            extra.insert("interrupted_at_s".into(), self.now.as_secs_f64().into());
        }
        if !self.media.is_empty() {
            let segs: serde_json::Map<String, serde_json::Value> = self
                .media
                .iter()
                .map(|m| (m.name.clone(), segment_json(m)))
                .collect();
            extra.insert("segments".into(), segs.into());
        }
        Results {
            scenario: self.sc.name.clone(),
            source: self.sc.source.clone(),
            mode: "sim".into(),
            seed: self.sc.seed,
            duration_s: self.sc.duration.as_secs_f64(),
            warmup_s: self.sc.warmup.as_secs_f64(),
            flows: self.flows.iter().map(|f| f.result(interval)).collect(),
            links,
            nodes,
            engine: EngineResult {
                events: self.events,
                wall_s,
                sim_s,
                events_per_wall_s: self.events as f64 / wall_s.max(1e-9),
                sim_s_per_wall_s: sim_s / wall_s.max(1e-9),
                peak_event_queue: self.q.peak as u64,
            },
            extra,
        }
    }

    /// Delay histogram of a flow, for plots.
    pub fn delay_buckets(&self, flow: usize) -> Vec<(u64, u64)> {
        self.flows[flow].buckets()
    }
}

/// A segment's counters for results: bus utilisation and collision time,
/// and per station what its NIC did.
fn segment_json(m: &Medium) -> serde_json::Value {
    let st = m.seg.stats();
    let stations: Vec<serde_json::Value> = st
        .stations
        .iter()
        .enumerate()
        .map(|(k, s)| {
            serde_json::json!({
                "station": k,
                "frames_sent": s.frames_sent,
                "bytes_sent": s.bytes_sent,
                "attempts": s.attempts,
                "collisions": s.collisions,
                "late_collisions": s.late_collisions,
                "deferrals": s.deferrals,
                "excessive_collisions": s.excessive_collisions,
                "frames_received": s.frames_received,
                "fragments_seen": s.fragments_seen,
                "refused": s.refused,
            })
        })
        .collect();
    serde_json::json!({
        "utilization": st.utilisation(),
        "busy_ns": st.busy_ns,
        "collision_ns": st.collision_ns,
        "good_ns": st.good_ns,
        "stations": stations,
    })
}
