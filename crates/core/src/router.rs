//! The router pipeline: input processing, forwarding, output ports.
//!
//! Follows the three modules of the ICC 2006 TDP paper (§II-D): *input*
//! (validation, classification, TDP stamp decoding or edge shaping),
//! *forwarding* (route lookup on destination and TTL, TTL decrement,
//! checksum), and *output* (a [`Scheduler`] per port and a transmitter that
//! serialises frames at the link's capacity). Sans-IO: a driver feeds frames
//! with [`Router::handle_frame`], takes frames to put on links with
//! [`Router::poll_transmit`], and sleeps until [`Router::poll_at`].

use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::packet::{Framing, Meta, Packet};
use crate::route::RouteTable;
use crate::sched::{DropReason, Dropped, Scheduler};
use crate::tdp::{is_tdp_tos, Ctr, EdgeShaper, FlowKey, ShapeOutcome, StampDecoder};
use crate::time::{Duration, Instant};
use crate::wire::{self, Ipv4Info, MacAddr, Malformed};

/// Static description of one router interface.
#[derive(Clone, Debug)]
pub struct PortConfig {
    pub name: String,
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    /// Link capacity in bit/s; the transmitter paces frames at this rate.
    pub rate_bps: u64,
    pub framing: Framing,
    /// MAC of the other end of a point-to-point link, if known statically.
    pub peer_mac: Option<MacAddr>,
    /// The other end is a TDP router: decode stamps from it.
    pub tdp_peer: bool,
}

/// Per-port counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    /// Bytes of link time used, including FCS, preamble and IFG.
    pub tx_wire_bytes: u64,
    pub malformed: u64,
    pub not_for_us: u64,
    pub non_ip: u64,
}

pub struct Port {
    pub cfg: PortConfig,
    sched: Box<dyn Scheduler>,
    busy_until: Instant,
    decoder: StampDecoder,
    neighbors: HashMap<Ipv4Addr, MacAddr>,
    pub counters: PortCounters,
}

impl Port {
    pub fn new(cfg: PortConfig, sched: Box<dyn Scheduler>) -> Self {
        Port {
            cfg,
            sched,
            busy_until: Instant::ZERO,
            decoder: StampDecoder::default(),
            neighbors: HashMap::new(),
            counters: PortCounters::default(),
        }
    }
    pub fn scheduler(&self) -> &dyn Scheduler {
        self.sched.as_ref()
    }
    pub fn decoder(&self) -> &StampDecoder {
        &self.decoder
    }
    /// When the transmitter finishes the frame it is sending.
    pub fn busy_until(&self) -> Instant {
        self.busy_until
    }
    pub fn add_neighbor(&mut self, ip: Ipv4Addr, mac: MacAddr) {
        self.neighbors.insert(ip, mac);
    }
    fn ready_at(&self, now: Instant) -> Option<Instant> {
        self.sched.poll_at(now).map(|t| t.max(self.busy_until))
    }
}

/// TDP settings of a router (ICC 2006 §II-B).
pub struct TdpNode {
    pub ctr: Ctr,
    /// Immediate forwarding: the forwarding delay of this node, in TFs.
    pub d: u32,
    /// Non-immediate forwarding: per-flow forwarding delays override `d`.
    pub d_flow: HashMap<FlowKey, u32>,
    /// Edge shaping of asynchronous flows into their reserved TFs.
    pub shaper: EdgeShaper,
    /// How many TFs a stamp may lag the local clock before the decoder
    /// resynchronises from the clock.
    pub max_lag: u32,
}

/// Hook for multi-field classification, metering and marking at input
/// (DiffServ edge) or DSCP → class mapping (DiffServ core). It may rewrite
/// the frame (re-mark) and set `meta.class`, `meta.flow`, `meta.color`.
pub trait Classifier: Send {
    fn classify(&mut self, now: Instant, pkt: &mut Packet, info: &Ipv4Info) -> Result<(), DropReason>;
}

/// Router-wide counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouterCounters {
    pub forwarded: u64,
    pub local_rx: u64,
    pub padding_rx: u64,
    pub tdp_rx: u64,
    pub shaped: u64,
    /// Packets that arrived with a TDP-looking DS byte on an interface not
    /// facing a TDP router, re-marked to 0 so hosts cannot forge stamps.
    pub stamp_cleared: u64,
    pub unresolved: u64,
    malformed: HashMap<&'static str, u64>,
    drops: HashMap<&'static str, u64>,
}

impl RouterCounters {
    pub fn malformed(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.malformed.iter().map(|(k, v)| (*k, *v))
    }
    /// Drops that happened before the output schedulers (routing, TTL,
    /// classification, shaping). Output queue drops are in each port's
    /// scheduler stats.
    pub fn drops(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.drops.iter().map(|(k, v)| (*k, *v))
    }
    pub fn total_drops(&self) -> u64 {
        self.drops.values().sum::<u64>() + self.malformed.values().sum::<u64>()
    }
    fn drop(&mut self, r: DropReason) {
        *self.drops.entry(r.name()).or_default() += 1;
    }
    fn bad(&mut self, m: Malformed) {
        *self.malformed.entry(m.name()).or_default() += 1;
    }
}

pub struct Router {
    pub name: String,
    ports: Vec<Port>,
    pub routes: RouteTable,
    tdp: Option<TdpNode>,
    classifier: Option<Box<dyn Classifier>>,
    pub counters: RouterCounters,
    next_port: usize,
}

impl Router {
    pub fn new(name: impl Into<String>) -> Self {
        Router {
            name: name.into(),
            ports: Vec::new(),
            routes: RouteTable::new(),
            tdp: None,
            classifier: None,
            counters: RouterCounters::default(),
            next_port: 0,
        }
    }
    /// Add an interface; returns its index.
    pub fn add_port(&mut self, cfg: PortConfig, sched: Box<dyn Scheduler>) -> u16 {
        self.ports.push(Port::new(cfg, sched));
        (self.ports.len() - 1) as u16
    }
    pub fn set_tdp(&mut self, tdp: TdpNode) {
        for p in &mut self.ports {
            p.decoder = StampDecoder::with_max_lag(tdp.max_lag as u64);
        }
        self.tdp = Some(tdp);
    }
    pub fn tdp(&self) -> Option<&TdpNode> {
        self.tdp.as_ref()
    }
    pub fn set_classifier(&mut self, c: Box<dyn Classifier>) {
        self.classifier = Some(c);
    }
    pub fn ports(&self) -> &[Port] {
        &self.ports
    }
    pub fn port_mut(&mut self, i: u16) -> Option<&mut Port> {
        self.ports.get_mut(i as usize)
    }

    fn is_local(&self, ip: Ipv4Addr) -> bool {
        self.ports.iter().any(|p| p.cfg.ip == ip)
    }

    /// Input: a frame received on `port` at `now`.
    pub fn handle_frame(&mut self, now: Instant, port: u16, data: Vec<u8>, mut meta: Meta) {
        let Some(p) = self.ports.get_mut(port as usize) else {
            return;
        };
        p.counters.rx_pkts += 1;
        p.counters.rx_bytes += data.len() as u64;
        if let Some(dst) = wire::eth_dst(&data) {
            if dst != p.cfg.mac && dst != MacAddr::BROADCAST {
                p.counters.not_for_us += 1;
                return;
            }
        }
        let info = match wire::parse_ipv4(&data) {
            Ok(i) => i,
            Err(Malformed::NotIpv4) => {
                p.counters.non_ip += 1;
                return;
            }
            Err(m) => {
                p.counters.malformed += 1;
                self.counters.bad(m);
                return;
            }
        };
        meta.arrival = now;
        meta.in_port = port;
        meta.tdp_tf = None;
        let mut pkt = Packet::new(data, meta);

        // TDP input processing (§III-B): decode the upstream TF from the
        // stamp, or clear forged stamps from asynchronous neighbours.
        let tdp_peer = p.cfg.tdp_peer;
        let mut upstream_tf = None;
        if let Some(tdp) = &self.tdp {
            if is_tdp_tos(info.tos) {
                if tdp_peer {
                    upstream_tf = Some(p.decoder.handle_stamp(&tdp.ctr, now, info.tos));
                    self.counters.tdp_rx += 1;
                } else {
                    wire::set_tos(&mut pkt.data, 0);
                    self.counters.stamp_cleared += 1;
                }
            }
        }

        if self.is_local(info.dst) {
            self.counters.local_rx += 1;
            if info.proto == wire::IPPROTO_UDP && info.dport == 9 {
                self.counters.padding_rx += 1;
            }
            return;
        }

        if info.ttl <= 1 {
            self.counters.drop(DropReason::TtlExpired);
            return;
        }
        let Some(route) = self.routes.lookup(info.dst, info.ttl).copied() else {
            self.counters.drop(DropReason::NoRoute);
            return;
        };
        let out = route.port;
        let Some(op) = self.ports.get(out as usize) else {
            self.counters.drop(DropReason::NoRoute);
            return;
        };
        let next_hop = route.gateway.unwrap_or(info.dst);
        let Some(dst_mac) = op.neighbors.get(&next_hop).copied().or(op.cfg.peer_mac) else {
            self.counters.unresolved += 1;
            return;
        };
        let src_mac = op.cfg.mac;
        wire::decrement_ttl(&mut pkt.data);
        wire::set_eth_addrs(&mut pkt.data, src_mac, dst_mac);

        if let Some(c) = self.classifier.as_mut() {
            if let Err(r) = c.classify(now, &mut pkt, &info) {
                self.counters.drop(r);
                return;
            }
        }

        if let Some(tdp) = self.tdp.as_mut() {
            if let Some(u) = upstream_tf {
                let key = FlowKey::from(&info);
                let d = tdp.d_flow.get(&key).copied().unwrap_or(tdp.d);
                pkt.meta.tdp_tf = Some(u + d as u64);
            } else {
                match tdp.shaper.handle_packet(now, pkt, &info) {
                    Ok(ShapeOutcome::Shaped { .. }) => {
                        self.counters.shaped += 1;
                        return;
                    }
                    Ok(ShapeOutcome::NotShaped(p)) => pkt = p,
                    Err(d) => {
                        self.counters.drop(d.reason);
                        return;
                    }
                }
            }
        }
        self.counters.forwarded += 1;
        self.enqueue(out, pkt, now);
    }

    fn enqueue(&mut self, out: u16, pkt: Packet, now: Instant) {
        if let Some(p) = self.ports.get_mut(out as usize) {
            // Refusals are counted in the scheduler's own stats.
            let _: Result<(), Dropped> = p.sched.enqueue(pkt, now);
        }
    }

    /// Output: the next frame to put on a link at `now`, with its port.
    /// The port's transmitter is then busy for the frame's wire time.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(u16, Packet)> {
        if let Some(tdp) = self.tdp.as_mut() {
            while let Some((port, pkt)) = tdp.shaper.poll_release(now) {
                if let Some(p) = self.ports.get_mut(port as usize) {
                    let _ = p.sched.enqueue(pkt, now);
                }
            }
        }
        let n = self.ports.len();
        for k in 0..n {
            let i = (self.next_port + k) % n;
            let p = &mut self.ports[i];
            if p.busy_until > now || p.sched.poll_at(now).is_none_or(|t| t > now) {
                continue;
            }
            if let Some(pkt) = p.sched.dequeue(now) {
                let wire = p.cfg.framing.wire_bytes(pkt.len());
                p.busy_until = now + Duration::for_bytes(wire, p.cfg.rate_bps);
                p.counters.tx_pkts += 1;
                p.counters.tx_bytes += pkt.len() as u64;
                p.counters.tx_wire_bytes += wire;
                self.next_port = (i + 1) % n;
                return Some((i as u16, pkt));
            }
        }
        None
    }

    /// Packets held inside the router outside port queues (edge shaper).
    pub fn held(&self) -> usize {
        self.tdp.as_ref().map(|t| t.shaper.len()).unwrap_or(0)
    }

    /// Protocol counters beyond [`RouterCounters`]: TDP stamp decoding per
    /// port, shaper and wheel statistics, by name.
    pub fn extra_counters(&self) -> Vec<(String, u64)> {
        let mut v = Vec::new();
        if self.tdp.is_some() {
            for p in &self.ports {
                let s = p.decoder.stats();
                if s.packets > 0 {
                    v.push((format!("{}.stamp_resyncs", p.cfg.name), s.resyncs));
                }
            }
        }
        v
    }

    /// When the router next has work: a frame to transmit or a release.
    pub fn poll_at(&self, now: Instant) -> Option<Instant> {
        let ports = self.ports.iter().filter_map(|p| p.ready_at(now)).min();
        let shaper = self.tdp.as_ref().and_then(|t| t.shaper.poll_at());
        match (ports, shaper) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
