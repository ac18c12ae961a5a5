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

use std::collections::VecDeque;

use qosnet_core::probe::Probe;
use qosnet_core::router::Router;
use qosnet_core::sched::{DropReason, Fifo, Scheduler};
use qosnet_core::wire::{self, MacAddr, UdpSpec};
use qosnet_core::{Duration, Framing, Instant, Meta, Packet};
use qosnet_scenario::results::{EngineResult, LinkResult, NodeResult, Results};
use qosnet_scenario::topo::Network;
use qosnet_scenario::{ProcTime, Scenario};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::build;
use crate::engine::{Ev, EventQueue};
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

pub(crate) struct RouterNode {
    pub r: Router,
    pub clock: Clock,
    pub proc: ProcTime,
    pub cpu_q: VecDeque<(u16, Packet)>,
    pub cpu_busy: bool,
    pub cpu_limit: usize,
    pub input_drops: u64,
}

pub(crate) struct HostNode {
    /// Sources are scheduled on this clock.
    pub clock: Clock,
    pub ip: std::net::Ipv4Addr,
    pub mac: MacAddr,
    pub peer_mac: MacAddr,
    pub nic: Fifo,
    pub rate_bps: u64,
    pub framing: Framing,
    pub busy_until: Instant,
    pub sources: Vec<Source>,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    pub tx_wire: u64,
    pub misdelivered: u64,
}

pub(crate) enum NodeState {
    Router(Box<RouterNode>),
    Host(Box<HostNode>),
}

/// Where each port's frames go: (peer node, peer port, propagation delay).
/// Per node, per port: (tx packets, tx frame bytes, tx wire bytes, IP bytes).
type Counters = Vec<Vec<(u64, u64, u64)>>;

pub(crate) type Wiring = Vec<Vec<(u32, u16, Duration)>>;

pub struct Sim {
    pub(crate) sc: Scenario,
    pub(crate) net: Network,
    pub(crate) nodes: Vec<NodeState>,
    pub(crate) wiring: Wiring,
    wake_at: Vec<Option<Instant>>,
    q: EventQueue,
    now: Instant,
    rng: StdRng,
    pub(crate) flows: Vec<FlowStat>,
    /// UDP 5-tuple parts per flow: (src ip, dst ip, sport, dport, ttl, dscp).
    pub(crate) flow_hdr: Vec<(std::net::Ipv4Addr, std::net::Ipv4Addr, u16, u16, u8, u8)>,
    events: u64,
    uid: u64,
    generated: u64,
    stalls: u64,
    snap_start: Option<Counters>,
    snap_end: Option<Counters>,
    pub(crate) extra: std::collections::BTreeMap<String, serde_json::Value>,
    progress: bool,
    /// Per node, per port: a pcap capture of what the port transmits.
    pcap: Vec<Vec<Option<Capture>>>,
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
        nodes: Vec<NodeState>,
        wiring: Wiring,
        extra: std::collections::BTreeMap<String, serde_json::Value>,
    ) -> Sim {
        let n = nodes.len();
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
                (
                    net.host_ip(f.from),
                    net.host_ip(f.to),
                    f.sport,
                    f.dport,
                    f.ttl,
                    f.dscp,
                )
            })
            .collect();
        let rng = StdRng::seed_from_u64(sc.seed);
        Sim {
            sc,
            net,
            nodes,
            wiring,
            wake_at: vec![None; n],
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
            pcap: Vec::new(),
        }
    }

    /// Capture every frame the named directed links (`"R1->R2"`; all links
    /// if `links` is empty) transmit into `DIR/<from>-<to>.pcap`, stamped
    /// with the virtual time of its first bit (nanosecond pcap). Returns the
    /// files opened.
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

    pub fn scenario(&self) -> &Scenario {
        &self.sc
    }

    /// Run the scenario to the end and return its results.
    pub fn run(&mut self) -> Results {
        let wall = std::time::Instant::now();
        for (i, n) in self.nodes.iter().enumerate() {
            if let NodeState::Host(h) = n {
                for (s, src) in h.sources.iter().enumerate() {
                    if src.start < src.stop {
                        let at = h.clock.global(Instant(src.start.as_nanos()));
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
        }
        for i in 0..self.nodes.len() {
            self.service(i);
        }
        let warmup = Instant(self.sc.warmup.as_nanos());
        let end = Instant(self.sc.duration.as_nanos());
        let hard_end = end + self.sc.drain;
        let mut next_report = 1.0;
        while let Some(t) = self.q.peek_time() {
            if self.snap_start.is_none() && t >= warmup {
                self.snap_start = Some(self.port_counters());
            }
            if self.snap_end.is_none() && t >= end {
                self.snap_end = Some(self.port_counters());
            }
            if t > hard_end || (t > end && self.events & 0x3ff == 0 && self.in_flight() == 0) {
                break;
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

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { node, port, pkt } => self.arrive(node as usize, port, pkt),
            Ev::Wake { node } => {
                let i = node as usize;
                if self.wake_at[i] == Some(self.now) {
                    self.wake_at[i] = None;
                    self.service(i);
                }
            }
            Ev::CpuDone { node } => {
                let i = node as usize;
                let now = self.now;
                let mut next = None;
                if let NodeState::Router(r) = &mut self.nodes[i] {
                    if let Some((port, pkt)) = r.cpu_q.pop_front() {
                        let local = r.clock.local(now);
                        r.r.handle_frame(local, port, pkt.data, pkt.meta);
                    }
                    r.cpu_busy = false;
                    if !r.cpu_q.is_empty() {
                        r.cpu_busy = true;
                        next = Some(sample(r.proc, &mut self.rng));
                    }
                }
                if let Some(d) = next {
                    self.q.push(now + d, Ev::CpuDone { node });
                }
                self.service(i);
            }
            Ev::Emit { node, source } => self.emit(node as usize, source as usize),
        }
    }

    fn arrive(&mut self, i: usize, port: u16, pkt: Packet) {
        let now = self.now;
        match &mut self.nodes[i] {
            NodeState::Router(r) => {
                if r.cpu_q.len() >= r.cpu_limit {
                    r.input_drops += 1;
                    return;
                }
                // The NIC's receive time: the router decodes TDP stamps
                // against it, however long the frame then waits for the CPU.
                let mut pkt = pkt;
                pkt.meta.arrival = r.clock.local(now);
                r.cpu_q.push_back((port, pkt));
                if !r.cpu_busy {
                    r.cpu_busy = true;
                    let d = sample(r.proc, &mut self.rng);
                    self.q.push(now + d, Ev::CpuDone { node: i as u32 });
                }
            }
            NodeState::Host(h) => {
                let Ok(info) = wire::parse_ipv4(&pkt.data) else {
                    h.misdelivered += 1;
                    return;
                };
                let probe = Probe::decode(wire::udp_payload(&pkt.data, &info));
                match probe {
                    Some(p) if info.dst == h.ip && (p.flow as usize) < self.flows.len() => {
                        let f = p.flow as usize;
                        if self.sc.flows[f].echo && self.sc.flows[f].to == i {
                            // Echo request: send it back with its DS byte,
                            // as a ping responder or iperf's peer would.
                            let mut data = pkt.data;
                            wire::reflect_udp(&mut data, &info, h.mac, h.peer_mac);
                            wire::set_ttl(&mut data, 64);
                            let _ = h.nic.enqueue(Packet::new(data, pkt.meta), now);
                            self.service(i);
                            return;
                        }
                        self.flows[f].total_received += 1;
                        if now.as_nanos() >= self.sc.warmup.as_nanos()
                            && now.as_nanos() < self.sc.duration.as_nanos()
                        {
                            self.flows[f].arrived_in_window(info.total_len);
                        }
                        if p.tx_ns >= self.sc.warmup.as_nanos() && p.tx_ns < self.sc.duration.as_nanos() {
                            self.flows[f].record(p.seq, now.as_nanos() - p.tx_ns, info.tos);
                        }
                    }
                    _ => h.misdelivered += 1,
                }
            }
        }
    }

    fn emit(&mut self, i: usize, s: usize) {
        let now = self.now;
        let NodeState::Host(h) = &mut self.nodes[i] else {
            return;
        };
        let src = &mut h.sources[s];
        let flow = src.flow as usize;
        let size = src.size(&mut self.rng);
        let seq = src.seq;
        src.seq += 1;
        let next = src.advance(&mut self.rng);
        let (sip, dip, sport, dport, ttl, dscp) = self.flow_hdr[flow];
        let probe = Probe {
            flow: flow as u32,
            seq,
            tx_ns: now.as_nanos(),
        };
        let spec = UdpSpec {
            src_mac: h.mac,
            dst_mac: h.peer_mac,
            src: sip,
            dst: dip,
            sport,
            dport,
            tos: dscp << 2,
            ttl,
            ident: seq as u16,
        };
        let data = wire::build_udp(&spec, size, &probe.encode());
        self.uid += 1;
        self.generated += 1;
        let meta = Meta {
            uid: self.uid,
            ..Meta::default()
        };
        if now.as_nanos() >= self.sc.warmup.as_nanos() && now.as_nanos() < self.sc.duration.as_nanos() {
            self.flows[flow].sent += 1;
        }
        let _ = h.nic.enqueue(Packet::new(data, meta), now);
        if let Some(t) = next {
            let at = h.clock.global(Instant(t)).max(now);
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

    /// Let node `i` transmit what it can now, then arm its next wake-up.
    fn service(&mut self, i: usize) {
        let now = self.now;
        let next = match &mut self.nodes[i] {
            NodeState::Router(r) => {
                let local = r.clock.local(now);
                while let Some((port, pkt)) = r.r.poll_transmit(local) {
                    let done = r.clock.global(r.r.ports()[port as usize].busy_until());
                    let (peer, pport, delay) = self.wiring[i][port as usize];
                    capture(&mut self.pcap, i, port as usize, now, &pkt);
                    self.q.push(
                        done + delay,
                        Ev::Arrive {
                            node: peer,
                            port: pport,
                            pkt,
                        },
                    );
                }
                r.r.poll_at(local).map(|t| r.clock.global(t))
            }
            NodeState::Host(h) => {
                if h.busy_until <= now {
                    if let Some(pkt) = h.nic.dequeue(now) {
                        let wire = h.framing.wire_bytes(pkt.len());
                        h.busy_until = now + Duration::for_bytes(wire, h.rate_bps);
                        h.tx_pkts += 1;
                        h.tx_bytes += pkt.len() as u64;
                        h.tx_wire += wire;
                        let (peer, pport, delay) = self.wiring[i][0];
                        capture(&mut self.pcap, i, 0, now, &pkt);
                        self.q.push(
                            h.busy_until + delay,
                            Ev::Arrive {
                                node: peer,
                                port: pport,
                                pkt,
                            },
                        );
                    }
                }
                (!h.nic.is_empty()).then_some(h.busy_until)
            }
        };
        if let Some(mut t) = next {
            if t <= now {
                // A scheduler said "ready" but released nothing; poll again a
                // nanosecond later rather than spin. Counted: it is a bug.
                self.stalls += 1;
                t = now + Duration(1);
            }
            if self.wake_at[i].is_none_or(|w| t < w || w < now) {
                self.wake_at[i] = Some(t);
                self.q.push(t, Ev::Wake { node: i as u32 });
            }
        }
    }

    /// Packets inside the network: in flight on links, in CPU and NIC queues,
    /// in schedulers and shapers.
    pub fn in_flight(&self) -> usize {
        let mut n = self.q.frames_in_flight();
        for node in &self.nodes {
            match node {
                NodeState::Router(r) => {
                    n += r.cpu_q.len();
                    n += r.r.ports().iter().map(|p| p.scheduler().len()).sum::<usize>();
                    n += r.r.held();
                }
                NodeState::Host(h) => n += h.nic.len(),
            }
        }
        n
    }

    /// Conservation ledger: (generated, delivered to hosts, dropped, in flight).
    /// Padding frames are router-generated and consumed by routers; they are
    /// excluded on both sides.
    pub fn ledger(&self) -> (u64, u64, u64, u64) {
        let mut dropped = 0;
        let mut delivered = 0;
        for node in &self.nodes {
            match node {
                NodeState::Router(r) => {
                    dropped += r.input_drops + r.r.counters.total_drops();
                    dropped +=
                        r.r.ports()
                            .iter()
                            .map(|p| p.scheduler().stats().total_drops())
                            .sum::<u64>();
                    dropped += r.r.counters.unresolved;
                }
                NodeState::Host(h) => dropped += h.nic.stats().total_drops() + h.misdelivered,
            }
        }
        for f in &self.flows {
            delivered += f.total_received;
        }
        (self.generated, delivered, dropped, self.in_flight() as u64)
    }

    fn port_counters(&self) -> Counters {
        self.nodes
            .iter()
            .map(|n| match n {
                NodeState::Router(r) => {
                    r.r.ports()
                        .iter()
                        .map(|p| (p.counters.tx_pkts, p.counters.tx_bytes, p.counters.tx_wire_bytes))
                        .collect()
                }
                NodeState::Host(h) => vec![(h.tx_pkts, h.tx_bytes, h.tx_wire)],
            })
            .collect()
    }

    fn results(&self, wall_s: f64) -> Results {
        let interval = (self.sc.duration - self.sc.warmup).as_secs_f64();
        let (a, b) = (self.snap_start.as_ref(), self.snap_end.as_ref());
        let mut links = Vec::new();
        let mut nodes = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let name = &self.sc.nodes[i].name;
            for (p, iface) in self.net.nodes[i].ifaces.iter().enumerate() {
                let (p0, b0, w0) = a.map(|c| c[i][p]).unwrap_or_default();
                let (p1, b1, w1) = b.map(|c| c[i][p]).unwrap_or_default();
                let cap = self.sc.links[iface.link].capacity_bps;
                // IP bytes: frame bytes minus the Ethernet header per packet.
                let ip_bytes = (b1 - b0).saturating_sub(14 * (p1 - p0));
                let mut lr = LinkResult {
                    name: format!("{}->{}", name, self.sc.nodes[iface.peer].name),
                    capacity_bps: cap,
                    packets: p1 - p0,
                    bytes: b1 - b0,
                    utilization: (w1 - w0) as f64 * 8.0 / (cap as f64 * interval),
                    load_bps: ip_bytes as f64 * 8.0 / interval,
                    ..LinkResult::default()
                };
                match node {
                    NodeState::Router(r) => {
                        let sch = r.r.ports()[p].scheduler();
                        lr.scheduler = sch.kind().to_string();
                        lr.counters = sch.counters().into_iter().collect();
                        lr.queued_at_end = sch.len() as u64;
                        for (k, v) in sch.stats().drop_counts() {
                            lr.drops += v;
                            lr.drops_by_reason.insert(k.to_string(), v);
                        }
                    }
                    NodeState::Host(h) => {
                        lr.scheduler = "fifo".into();
                        lr.queued_at_end = h.nic.len() as u64;
                        lr.drops = h.nic.stats().total_drops();
                        if lr.drops > 0 {
                            lr.drops_by_reason
                                .insert(DropReason::QueueFull.name().into(), lr.drops);
                        }
                    }
                }
                links.push(lr);
            }
            let mut counters = std::collections::BTreeMap::new();
            match node {
                NodeState::Router(r) => {
                    counters.extend(r.r.named_counters());
                    counters.insert("input_queue_drops".into(), r.input_drops);
                }
                NodeState::Host(h) => {
                    counters.insert("sent".into(), h.tx_pkts);
                    counters.insert("misdelivered".into(), h.misdelivered);
                }
            }
            nodes.push(NodeResult {
                name: name.clone(),
                counters,
            });
        }
        let sim_s = self.now.as_secs_f64();
        let mut extra = self.extra.clone();
        extra.insert("engine_stalls".into(), self.stalls.into());
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

fn sample(p: ProcTime, rng: &mut StdRng) -> Duration {
    match p {
        ProcTime::Fixed(d) => d,
        ProcTime::Uniform(lo, hi) => Duration(rng.gen_range(lo.as_nanos()..=hi.as_nanos())),
        ProcTime::Exp { base, mean } => {
            let u: f64 = rng.gen_range(f64::EPSILON..1.0);
            base + Duration((-u.ln() * mean.as_nanos() as f64) as u64)
        }
    }
}
