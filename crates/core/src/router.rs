//! The router pipeline: input processing, forwarding, output ports, and the
//! control plane a real IPv4 router needs on an Ethernet (ARP, ICMP).
//!
//! Follows the three modules of the ICC 2006 TDP paper (§II-D): *input*
//! (validation, classification, TDP stamp decoding or edge shaping),
//! *forwarding* (route lookup on destination and TTL, TTL decrement,
//! checksum), and *output* (a [`Scheduler`] per port and a transmitter that
//! serialises frames at the link's capacity). Sans-IO: a driver feeds frames
//! with [`Router::handle_frame`], takes frames to put on links with
//! [`Router::poll_transmit`], and sleeps until [`Router::poll_at`].
//!
//! Around the pipeline, what RFC 1812 asks of a router on Ethernet:
//! - **ARP** (RFC 826): requests for a port's own address are answered;
//!   next hops without a static MAC ([`PortConfig::peer_mac`]) are resolved
//!   by broadcasting requests, holding a bounded number of packets per next
//!   hop meanwhile ([`ArpConfig`]), retrying, and dropping (counted) on
//!   timeout. Senders are learned by RFC 826's merge rule.
//! - **ICMP** (RFC 792): echo requests to any own address are answered;
//!   packets whose TTL runs out draw a time exceeded, packets without a
//!   route a net unreachable, both rate-limited (RFC 1812 §4.3.2.8) and
//!   never about ICMP errors, fragments or non-unicast addresses (§4.3.2.7).
//! - Packets received as link-layer broadcast, to non-unicast destinations
//!   or from martian sources are not forwarded (§5.3.4, §5.3.7).
//!
//! Frames the router originates (ARP, ICMP) go through the port schedulers
//! as best effort, so they are paced and scheduled like everything else,
//! and a TDP wheel keeps them out of reserved time. Nothing from the wire
//! can make this code panic: every frame ends in exactly one counter
//! (see the `every_frame_is_counted` property test).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::Ipv4Addr;

use crate::arp::{self, Arp, ArpConfig, ARP_REPLY, ARP_REQUEST};
use crate::icmp;
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
    /// MAC of the other end of a point-to-point link, if known statically
    /// (the simulator); `None` resolves next hops by ARP (live).
    pub peer_mac: Option<MacAddr>,
    /// The other end is a TDP router: decode stamps from it.
    pub tdp_peer: bool,
}

impl PortConfig {
    /// Whether `ip` is on this port's subnet.
    pub fn on_link(&self, ip: Ipv4Addr) -> bool {
        let m = crate::route::mask(self.prefix_len);
        u32::from(ip) & m == u32::from(self.ip) & m
    }
}

/// Per-port counters. Every received frame ends in exactly one of
/// `not_for_us`, `non_ip`, `malformed`, `arp_rx`, or the router-wide
/// counters of IPv4 packets.
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
    /// Well-formed ARP packets received.
    pub arp_rx: u64,
}

/// Packets waiting for a next hop's MAC.
struct Held {
    pkt: Packet,
    info: Ipv4Info,
    upstream_tf: Option<u64>,
    /// Originated by the router (not counted as received traffic).
    local: bool,
}

struct Pending {
    held: VecDeque<Held>,
    tries: u32,
    next_at: Instant,
}

pub struct Port {
    pub cfg: PortConfig,
    sched: Box<dyn Scheduler>,
    busy_until: Instant,
    decoder: StampDecoder,
    neighbors: HashMap<Ipv4Addr, MacAddr>,
    /// Unresolved next hops (ordered, so timeouts replay deterministically).
    pending: BTreeMap<Ipv4Addr, Pending>,
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
            pending: BTreeMap::new(),
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
    /// The MAC of a neighbour on this port, learned or static.
    pub fn neighbor(&self, ip: Ipv4Addr) -> Option<MacAddr> {
        self.neighbors.get(&ip).copied().or(self.cfg.peer_mac)
    }
    /// Packets held for unresolved next hops on this port.
    pub fn arp_held(&self) -> usize {
        self.pending.values().map(|p| p.held.len()).sum()
    }
    fn ready_at(&self, now: Instant) -> Option<Instant> {
        self.sched.poll_at(now).map(|t| t.max(self.busy_until))
    }
    /// Offer a frame the router originated; refusals are counted by the
    /// scheduler like any other.
    fn send_ctrl(&mut self, now: Instant, data: Vec<u8>) {
        let meta = Meta {
            arrival: now,
            ..Meta::default()
        };
        let _: Result<(), Dropped> = self.sched.enqueue(Packet::new(data, meta), now);
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
    /// Classify (and meter, mark) a frame about to leave by `out_port`.
    fn classify(&mut self, now: Instant, pkt: &mut Packet, info: &Ipv4Info, out_port: u16) -> Verdict;
    /// A held (shaped) frame whose time has come, with its output port.
    fn poll_release(&mut self, _now: Instant) -> Option<(u16, Packet)> {
        None
    }
    /// When a held frame is next due.
    fn poll_at(&self) -> Option<Instant> {
        None
    }
    /// Frames held (shaping queues).
    fn held(&self) -> usize {
        0
    }
    /// Named counters for results (per rule, per profile, ...).
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// What a [`Classifier`] decided about a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Forward it (possibly re-marked).
    Pass,
    /// Drop it; counted under the reason.
    Drop(DropReason),
    /// The classifier keeps it (a shaping queue) and releases it later
    /// through [`Classifier::poll_release`].
    Held,
}

/// ICMP behaviour of a router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IcmpConfig {
    /// Answer echo requests to own addresses.
    pub echo: bool,
    /// Send time exceeded / net unreachable errors.
    pub errors: bool,
    /// Errors per second, sustained (RFC 1812 §4.3.2.8 rate limiting).
    pub errors_per_sec: u32,
    /// Errors that may go out back to back.
    pub burst: u32,
}

impl Default for IcmpConfig {
    fn default() -> Self {
        IcmpConfig {
            echo: true,
            errors: true,
            errors_per_sec: 100,
            burst: 20,
        }
    }
}

/// Token bucket in nanoseconds of credit: one error costs `1 s / rate`.
#[derive(Clone, Copy, Debug, Default)]
struct Limiter {
    credit: u64,
    last: Option<Instant>,
}

impl Limiter {
    fn allow(&mut self, now: Instant, cfg: &IcmpConfig) -> bool {
        if cfg.errors_per_sec == 0 {
            return false;
        }
        let cost = 1_000_000_000 / cfg.errors_per_sec as u64;
        let cap = cost.saturating_mul(cfg.burst.max(1) as u64);
        let since = match self.last {
            Some(l) => now.saturating_since(l).as_nanos(),
            None => cap,
        };
        self.last = Some(now.max(self.last.unwrap_or(now)));
        self.credit = self.credit.saturating_add(since).min(cap);
        if self.credit >= cost {
            self.credit -= cost;
            true
        } else {
            false
        }
    }
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
    /// Received packets dropped because their next hop's MAC could not be
    /// resolved (ARP timeout or hold queue full).
    pub unresolved: u64,
    malformed: HashMap<&'static str, u64>,
    drops: HashMap<&'static str, u64>,
    /// Control plane: `arp_*` and `icmp_*` counters by name.
    control: BTreeMap<&'static str, u64>,
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
    /// ARP and ICMP counters (`arp_requests_rx`, `icmp_echo_replies`, ...).
    pub fn control(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.control.iter().map(|(k, v)| (*k, *v))
    }
    /// One control counter, zero if never incremented.
    pub fn control_count(&self, name: &str) -> u64 {
        self.control.get(name).copied().unwrap_or(0)
    }
    fn drop(&mut self, r: DropReason) {
        self.drop_named(r.name());
    }
    fn drop_named(&mut self, name: &'static str) {
        *self.drops.entry(name).or_default() += 1;
    }
    fn bad(&mut self, m: Malformed) {
        *self.malformed.entry(m.name()).or_default() += 1;
    }
    fn ctl(&mut self, name: &'static str, n: u64) {
        *self.control.entry(name).or_default() += n;
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
    arp: ArpConfig,
    icmp: IcmpConfig,
    limiter: Limiter,
    ident: u16,
    catch_up: Duration,
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
            arp: ArpConfig::default(),
            icmp: IcmpConfig::default(),
            limiter: Limiter::default(),
            ident: 0,
            catch_up: Duration::ZERO,
        }
    }
    /// Let each port's transmitter catch up on time its driver lost: a
    /// frame that was eligible (arrived, or its TDP time frame began)
    /// before the transmitter went idle starts when the transmitter went
    /// idle, as it would from a NIC's hardware queue, rather than when the
    /// driver got round to polling — by at most `max`. A live driver's late
    /// wake-ups would otherwise cost link time for good, and a link loaded
    /// to 99.8 % (the ICC 2006 testbed) would fall behind without bound.
    /// TDP stamps follow the transmitter's timeline: a frame that started
    /// in TF `t` on it carries `t`'s stamp even if the driver dequeued it
    /// in TF `t + 1`, so one late wake-up does not shift the frame's TF at
    /// every later hop. Zero (the default, and the simulator's setting,
    /// whose wake-ups are exact) starts every frame at `now`.
    pub fn set_transmit_catch_up(&mut self, max: Duration) {
        self.catch_up = max;
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
    pub fn set_arp_config(&mut self, c: ArpConfig) {
        self.arp = c;
    }
    pub fn set_icmp_config(&mut self, c: IcmpConfig) {
        self.icmp = c;
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

    fn next_ident(&mut self) -> u16 {
        self.ident = self.ident.wrapping_add(1);
        self.ident
    }

    /// Input: a frame received on `port` at `now`. A driver that knows
    /// when the frame really arrived (a NIC or kernel receive timestamp,
    /// earlier than `now` when frames waited in a ring) passes it in
    /// `meta.arrival`: TDP stamps are decoded against that time, so a late
    /// driver does not mistake a frame's TF. Zero means `now`.
    pub fn handle_frame(&mut self, now: Instant, port: u16, data: Vec<u8>, mut meta: Meta) {
        let rx_time = if meta.arrival > Instant::ZERO && meta.arrival <= now {
            meta.arrival
        } else {
            now
        };
        let Some(p) = self.ports.get_mut(port as usize) else {
            self.counters.ctl("rx_bad_port", 1);
            return;
        };
        p.counters.rx_pkts += 1;
        p.counters.rx_bytes += data.len() as u64;
        let mut link_broadcast = false;
        if let Some(dst) = wire::eth_dst(&data) {
            if dst == MacAddr::BROADCAST {
                link_broadcast = true;
            } else if dst != p.cfg.mac {
                p.counters.not_for_us += 1;
                return;
            }
        }
        if wire::ethertype(&data) == Some(wire::ETHERTYPE_ARP) {
            match arp::parse_arp(&data) {
                Ok(a) => {
                    p.counters.arp_rx += 1;
                    self.handle_arp(now, port, a);
                }
                Err(m) => {
                    p.counters.malformed += 1;
                    self.counters.bad(m);
                }
            }
            return;
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
        // Per-flow disciplines (WFQ, DRR) key on the 5-tuple.
        meta.flow = FlowKey::from(&info).hash32();
        let mut pkt = Packet::new(data, meta);

        // TDP input processing (§III-B): decode the upstream TF from the
        // stamp, or clear forged stamps from asynchronous neighbours.
        let tdp_peer = p.cfg.tdp_peer;
        let in_ip = p.cfg.ip;
        let mut upstream_tf = None;
        if let Some(tdp) = &self.tdp {
            if is_tdp_tos(info.tos) {
                if tdp_peer {
                    upstream_tf = Some(p.decoder.handle_stamp(&tdp.ctr, rx_time, info.tos));
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
            } else if info.proto == wire::IPPROTO_ICMP {
                self.handle_icmp_local(now, &pkt.data, &info);
            }
            return;
        }
        // RFC 1812 §5.3.4: a packet sent to the link-layer broadcast address
        // is not forwarded unless it is an IP broadcast meant for us.
        if link_broadcast {
            self.counters.drop_named("link_broadcast");
            return;
        }
        // §5.3.7: never forward to or from addresses that cannot be.
        if !icmp::is_unicast(info.dst) {
            self.counters.drop_named("bad_dst");
            return;
        }
        if !icmp::is_unicast(info.src) {
            self.counters.drop_named("martian_src");
            return;
        }

        if info.ttl <= 1 {
            self.counters.drop(DropReason::TtlExpired);
            self.icmp_error(
                now,
                &pkt.data,
                &info,
                in_ip,
                icmp::ICMP_TIME_EXCEEDED,
                icmp::CODE_TTL_EXCEEDED,
            );
            return;
        }
        let Some(route) = self.routes.lookup(info.dst, info.ttl).copied() else {
            self.counters.drop(DropReason::NoRoute);
            self.icmp_error(
                now,
                &pkt.data,
                &info,
                in_ip,
                icmp::ICMP_DEST_UNREACHABLE,
                icmp::CODE_NET_UNREACHABLE,
            );
            return;
        };
        let out = route.port;
        let Some(op) = self.ports.get(out as usize) else {
            self.counters.drop(DropReason::NoRoute);
            return;
        };
        let next_hop = route.gateway.unwrap_or(info.dst);
        let src_mac = op.cfg.mac;
        let dst_mac = op.neighbor(next_hop);
        wire::decrement_ttl(&mut pkt.data);
        wire::set_eth_addrs(&mut pkt.data, src_mac, dst_mac.unwrap_or_default());
        match dst_mac {
            Some(_) => self.output(now, out, pkt, &info, upstream_tf),
            None => self.hold(
                now,
                out,
                next_hop,
                Held {
                    pkt,
                    info,
                    upstream_tf,
                    local: false,
                },
            ),
        }
    }

    /// Classification, TDP forwarding or edge shaping, and the output
    /// scheduler, for a frame whose addresses are final.
    fn output(&mut self, now: Instant, out: u16, mut pkt: Packet, info: &Ipv4Info, upstream_tf: Option<u64>) {
        if let Some(c) = self.classifier.as_mut() {
            match c.classify(now, &mut pkt, info, out) {
                Verdict::Pass => {}
                Verdict::Drop(r) => {
                    self.counters.drop(r);
                    return;
                }
                Verdict::Held => {
                    self.counters.shaped += 1;
                    return;
                }
            }
        }

        if let Some(tdp) = self.tdp.as_mut() {
            if let Some(u) = upstream_tf {
                let key = FlowKey::from(info);
                let d = tdp.d_flow.get(&key).copied().unwrap_or(tdp.d);
                pkt.meta.tdp_tf = Some(u + d as u64);
            } else {
                match tdp.shaper.handle_packet(now, pkt, info) {
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

    /// Keep a packet until `next_hop` on port `out` is resolved, asking for
    /// it if nobody has yet.
    fn hold(&mut self, now: Instant, out: u16, next_hop: Ipv4Addr, h: Held) {
        let limit = self.arp.hold_packets;
        let Some(p) = self.ports.get_mut(out as usize) else {
            return;
        };
        let fresh = !p.pending.contains_key(&next_hop);
        let e = p.pending.entry(next_hop).or_insert_with(|| Pending {
            held: VecDeque::new(),
            tries: 0,
            next_at: now,
        });
        if e.held.len() >= limit {
            self.counters.ctl("arp_hold_overflow", 1);
            if !h.local {
                self.counters.unresolved += 1;
            }
        } else {
            e.held.push_back(h);
            self.counters.ctl("arp_held", 1);
        }
        if fresh {
            self.send_arp_request(now, out, next_hop);
        }
    }

    /// Start resolving `ip` on `port` now (if it is not resolved or being
    /// resolved), so the first packets to it need not wait. Live drivers
    /// call this for each port's link peer at start.
    pub fn resolve(&mut self, now: Instant, port: u16, ip: Ipv4Addr) {
        let Some(p) = self.ports.get_mut(port as usize) else {
            return;
        };
        if p.neighbors.contains_key(&ip) || p.pending.contains_key(&ip) {
            return;
        }
        p.pending.insert(
            ip,
            Pending {
                held: VecDeque::new(),
                tries: 0,
                next_at: now,
            },
        );
        self.send_arp_request(now, port, ip);
    }

    fn send_arp_request(&mut self, now: Instant, port: u16, ip: Ipv4Addr) {
        let retry = self.arp.retry;
        let Some(p) = self.ports.get_mut(port as usize) else {
            return;
        };
        let Some(e) = p.pending.get_mut(&ip) else {
            return;
        };
        e.tries += 1;
        e.next_at = now + retry;
        let req = Arp {
            oper: ARP_REQUEST,
            sha: p.cfg.mac,
            spa: p.cfg.ip,
            tha: MacAddr::default(),
            tpa: ip,
        };
        let frame = arp::build_arp(p.cfg.mac, MacAddr::BROADCAST, &req);
        p.send_ctrl(now, frame);
        self.counters.ctl("arp_requests_tx", 1);
    }

    /// RFC 826 reception: merge the sender into the table if it is there,
    /// add it if the packet is for us, answer requests for our address, and
    /// release packets that were waiting for the sender.
    fn handle_arp(&mut self, now: Instant, port: u16, a: Arp) {
        let Some(p) = self.ports.get_mut(port as usize) else {
            return;
        };
        let for_us = a.tpa == p.cfg.ip;
        let sender_ok = a.spa != Ipv4Addr::UNSPECIFIED && p.cfg.on_link(a.spa) && a.spa != p.cfg.ip;
        let known = p.neighbors.contains_key(&a.spa);
        if sender_ok && (known || for_us || p.pending.contains_key(&a.spa)) {
            p.neighbors.insert(a.spa, a.sha);
        }
        let mut ctl: Vec<&'static str> = Vec::with_capacity(2);
        if a.oper == ARP_REQUEST {
            ctl.push("arp_requests_rx");
            if for_us {
                let rep = Arp {
                    oper: ARP_REPLY,
                    sha: p.cfg.mac,
                    spa: p.cfg.ip,
                    tha: a.sha,
                    tpa: a.spa,
                };
                let frame = arp::build_arp(p.cfg.mac, a.sha, &rep);
                p.send_ctrl(now, frame);
                ctl.push("arp_replies_tx");
            }
        } else {
            ctl.push("arp_replies_rx");
        }
        if !for_us {
            ctl.push("arp_not_for_us");
        }
        let released = match (p.neighbors.get(&a.spa).copied(), sender_ok) {
            (Some(mac), true) => p.pending.remove(&a.spa).map(|e| (mac, e)),
            _ => None,
        };
        for c in ctl {
            self.counters.ctl(c, 1);
        }
        if let Some((mac, e)) = released {
            self.counters.ctl("arp_resolved", 1);
            self.release(now, port, mac, e.held);
        }
    }

    fn release(&mut self, now: Instant, port: u16, mac: MacAddr, held: VecDeque<Held>) {
        for mut h in held {
            if let Some(d) = h.pkt.data.get_mut(0..6) {
                d.copy_from_slice(&mac.0);
            }
            if h.local {
                self.enqueue(port, h.pkt, now);
            } else {
                self.output(now, port, h.pkt, &h.info, h.upstream_tf);
            }
        }
    }

    /// Retry or give up on next hops whose timer ran out.
    fn arp_timeouts(&mut self, now: Instant) {
        for port in 0..self.ports.len() {
            let due: Vec<Ipv4Addr> = self.ports[port]
                .pending
                .iter()
                .filter(|(_, e)| e.next_at <= now)
                .map(|(ip, _)| *ip)
                .collect();
            for ip in due {
                let tries = self.ports[port].pending.get(&ip).map_or(0, |e| e.tries);
                if tries < self.arp.max_tries {
                    self.send_arp_request(now, port as u16, ip);
                    continue;
                }
                let Some(e) = self.ports[port].pending.remove(&ip) else {
                    continue;
                };
                self.counters.ctl("arp_timeouts", 1);
                let n = e.held.len() as u64;
                let local = e.held.iter().filter(|h| h.local).count() as u64;
                self.counters.ctl("arp_dropped", n);
                self.counters.unresolved += n - local;
            }
        }
    }

    /// ICMP addressed to the router: answer echo requests.
    fn handle_icmp_local(&mut self, now: Instant, data: &[u8], info: &Ipv4Info) {
        self.counters.ctl("icmp_rx", 1);
        if !self.icmp.echo {
            return;
        }
        let ident = self.next_ident();
        if let Some(reply) = icmp::echo_reply(data, info, ident) {
            self.counters.ctl("icmp_echo_requests_rx", 1);
            self.counters.ctl("icmp_echo_replies_tx", 1);
            self.originate(now, reply, info.src);
        }
    }

    /// An ICMP error about `data` from `src`, if allowed and within rate.
    fn icmp_error(&mut self, now: Instant, data: &[u8], info: &Ipv4Info, src: Ipv4Addr, typ: u8, code: u8) {
        if !self.icmp.errors {
            return;
        }
        let ident = self.ident.wrapping_add(1);
        let Some(msg) = icmp::error(data, info, src, typ, code, ident) else {
            self.counters.ctl("icmp_errors_suppressed", 1);
            return;
        };
        if !self.limiter.allow(now, &self.icmp) {
            self.counters.ctl("icmp_ratelimited", 1);
            return;
        }
        self.ident = ident;
        self.counters.ctl(
            if typ == icmp::ICMP_TIME_EXCEEDED {
                "icmp_time_exceeded_tx"
            } else {
                "icmp_unreachable_tx"
            },
            1,
        );
        self.originate(now, msg, info.src);
    }

    /// Send a packet the router made (zero MACs) to `dst`: straight out of
    /// the port whose subnet holds `dst`, else by the route table.
    fn originate(&mut self, now: Instant, mut data: Vec<u8>, dst: Ipv4Addr) {
        let (port, next_hop) = match self.ports.iter().position(|p| p.cfg.on_link(dst)) {
            Some(i) => (i as u16, dst),
            None => match self.routes.lookup(dst, icmp::ORIGIN_TTL) {
                Some(r) => (r.port, r.gateway.unwrap_or(dst)),
                None => {
                    self.counters.ctl("originated_no_route", 1);
                    return;
                }
            },
        };
        let Some(p) = self.ports.get(port as usize) else {
            return;
        };
        self.counters.ctl("originated", 1);
        let mac = p.neighbor(next_hop);
        wire::set_eth_addrs(&mut data, p.cfg.mac, mac.unwrap_or_default());
        match mac {
            Some(_) => self.enqueue(port, Packet::new(data, Meta::default()), now),
            None => {
                let Ok(info) = wire::parse_ipv4(&data) else {
                    return;
                };
                let pkt = Packet::new(data, Meta::default());
                self.hold(
                    now,
                    port,
                    next_hop,
                    Held {
                        pkt,
                        info,
                        upstream_tf: None,
                        local: true,
                    },
                );
            }
        }
    }

    /// Output: the next frame to put on a link at `now`, with its port.
    /// The port's transmitter is then busy for the frame's wire time.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(u16, Packet)> {
        if self.ports.iter().any(|p| !p.pending.is_empty()) {
            self.arp_timeouts(now);
        }
        if let Some(c) = self.classifier.as_mut() {
            while let Some((port, pkt)) = c.poll_release(now) {
                if let Some(p) = self.ports.get_mut(port as usize) {
                    let _ = p.sched.enqueue(pkt, now);
                }
            }
        }
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
            if let Some(mut pkt) = p.sched.dequeue(now) {
                if pkt.meta.padding {
                    // Padding is addressed from the static plan; a next hop
                    // learned by ARP since takes precedence.
                    if let Some(b) = pkt.data.get(wire::ETH_HDR + 16..wire::ETH_HDR + 20) {
                        let ip = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
                        if let Some(mac) = p.neighbors.get(&ip) {
                            pkt.data[0..6].copy_from_slice(&mac.0);
                        }
                    }
                }
                let wire = p.cfg.framing.wire_bytes(pkt.len());
                let mut start = now;
                if self.catch_up > Duration::ZERO {
                    let mut eligible = pkt.meta.arrival;
                    if let (Some(tf), Some(tdp)) = (pkt.meta.tdp_tf, self.tdp.as_ref()) {
                        eligible = eligible.max(tdp.ctr.tf_start(tf));
                    }
                    start = now.min(p.busy_until.max(eligible)).max(now - self.catch_up);
                    // The stamp names the TF of transmission: with a
                    // back-dated start, that is the TF the frame really
                    // started in on the link's timeline, not the one the
                    // driver got to it in (the wheel stamped the latter).
                    if let (true, Some(tdp)) = (p.cfg.tdp_peer, self.tdp.as_ref()) {
                        let tos = pkt.data.get(wire::ETH_HDR + 1).copied();
                        if tos.is_some_and(is_tdp_tos)
                            && wire::ethertype(&pkt.data) == Some(wire::ETHERTYPE_IPV4)
                            && tdp.ctr.tf_at(start) != tdp.ctr.tf_at(now)
                        {
                            wire::set_tos(&mut pkt.data, tdp.ctr.stamp(tdp.ctr.tf_at(start)));
                            self.counters.ctl("tdp_restamped", 1);
                        }
                    }
                }
                p.busy_until = start + Duration::for_bytes(wire, p.cfg.rate_bps);
                p.counters.tx_pkts += 1;
                p.counters.tx_bytes += pkt.len() as u64;
                p.counters.tx_wire_bytes += wire;
                self.next_port = (i + 1) % n;
                return Some((i as u16, pkt));
            }
        }
        None
    }

    /// Packets held inside the router outside port queues (edge shaper,
    /// packets of the traffic waiting for ARP).
    pub fn held(&self) -> usize {
        let arp: usize = self
            .ports
            .iter()
            .flat_map(|p| p.pending.values())
            .flat_map(|e| e.held.iter())
            .filter(|h| !h.local)
            .count();
        self.tdp.as_ref().map(|t| t.shaper.len()).unwrap_or(0)
            + self.classifier.as_ref().map(|c| c.held()).unwrap_or(0)
            + arp
    }

    /// Protocol counters beyond [`RouterCounters`]: TDP stamp decoding per
    /// port, ARP and ICMP, by name.
    /// Every router-wide counter by name, as results report them:
    /// forwarding counters, drops (`drop_<reason>`), malformed frames
    /// (`malformed_<reason>`) and the protocol counters of
    /// [`extra_counters`](Self::extra_counters).
    pub fn named_counters(&self) -> Vec<(String, u64)> {
        let c = &self.counters;
        let mut v: Vec<(String, u64)> = [
            ("forwarded", c.forwarded),
            ("local_rx", c.local_rx),
            ("padding_rx", c.padding_rx),
            ("tdp_rx", c.tdp_rx),
            ("shaped", c.shaped),
            ("stamp_cleared", c.stamp_cleared),
            ("unresolved", c.unresolved),
        ]
        .into_iter()
        .map(|(k, n)| (k.to_string(), n))
        .collect();
        v.extend(c.drops().map(|(k, n)| (format!("drop_{k}"), n)));
        v.extend(c.malformed().map(|(k, n)| (format!("malformed_{k}"), n)));
        v.extend(self.extra_counters());
        v
    }

    pub fn extra_counters(&self) -> Vec<(String, u64)> {
        let mut v = self.classifier.as_ref().map(|c| c.counters()).unwrap_or_default();
        if self.tdp.is_some() {
            for p in &self.ports {
                let s = p.decoder.stats();
                if s.packets > 0 {
                    v.push((format!("{}.stamp_resyncs", p.cfg.name), s.resyncs));
                }
            }
        }
        for (k, n) in self.counters.control() {
            v.push((k.to_string(), n));
        }
        v
    }

    /// When the router next has work: a frame to transmit, a release, or an
    /// ARP retry.
    pub fn poll_at(&self, now: Instant) -> Option<Instant> {
        let ports = self.ports.iter().filter_map(|p| p.ready_at(now)).min();
        let arp = self
            .ports
            .iter()
            .flat_map(|p| p.pending.values().map(|e| e.next_at))
            .min();
        let shaper = self.tdp.as_ref().and_then(|t| t.shaper.poll_at());
        let held = self.classifier.as_ref().and_then(|c| c.poll_at());
        [ports, arp, shaper, held].into_iter().flatten().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::Route;
    use crate::sched::Fifo;
    use crate::wire::UdpSpec;
    use proptest::prelude::*;

    const R_MAC0: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const R_MAC1: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
    const H1_MAC: MacAddr = MacAddr([2, 0, 0, 0, 1, 1]);
    const H2_MAC: MacAddr = MacAddr([2, 0, 0, 0, 2, 1]);

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    /// h1 (10.0.1.1) — port 0 (10.0.1.254) R port 1 (10.0.2.254) — h2
    /// (10.0.2.1), no static MACs: everything by ARP.
    fn router() -> Router {
        let mut r = Router::new("R");
        for (i, (mac, addr)) in [(R_MAC0, "10.0.1.254"), (R_MAC1, "10.0.2.254")]
            .into_iter()
            .enumerate()
        {
            r.add_port(
                PortConfig {
                    name: format!("p{i}"),
                    mac,
                    ip: ip(addr),
                    prefix_len: 24,
                    rate_bps: 1_000_000_000,
                    framing: Framing::default(),
                    peer_mac: None,
                    tdp_peer: false,
                },
                Box::new(Fifo::new(1000, 1 << 20)),
            );
        }
        r.routes.add(Route::new(ip("10.0.1.0"), 24, 0)).unwrap();
        r.routes.add(Route::new(ip("10.0.2.0"), 24, 1)).unwrap();
        r.routes
            .add(Route::new(ip("10.9.0.0"), 16, 1).via(ip("10.0.2.1")))
            .unwrap();
        r
    }

    fn udp(dst: &str, ttl: u8) -> Vec<u8> {
        wire::build_udp(
            &UdpSpec {
                src_mac: H1_MAC,
                dst_mac: R_MAC0,
                src: ip("10.0.1.1"),
                dst: ip(dst),
                sport: 1000,
                dport: 2000,
                tos: 0,
                ttl,
                ident: 1,
            },
            100,
            b"data",
        )
    }

    fn drain(r: &mut Router, now: Instant) -> Vec<(u16, Vec<u8>)> {
        let mut v = Vec::new();
        let mut t = now;
        while let Some(at) = r.poll_at(t) {
            if at > now + Duration::from_millis(1) {
                break;
            }
            t = t.max(at);
            while let Some((p, pkt)) = r.poll_transmit(t) {
                v.push((p, pkt.data));
            }
            if r.poll_at(t).is_some_and(|a| a <= t) {
                t += Duration(1);
            }
        }
        v
    }

    fn arp_frame(oper: u16, sha: MacAddr, spa: &str, tha: MacAddr, tpa: &str, dst: MacAddr) -> Vec<u8> {
        arp::build_arp(
            sha,
            dst,
            &Arp {
                oper,
                sha,
                spa: ip(spa),
                tha,
                tpa: ip(tpa),
            },
        )
    }

    #[test]
    fn answers_arp_for_its_own_address_only() {
        let mut r = router();
        let t = Instant(1_000);
        let q = arp_frame(
            ARP_REQUEST,
            H1_MAC,
            "10.0.1.1",
            MacAddr::default(),
            "10.0.1.254",
            MacAddr::BROADCAST,
        );
        r.handle_frame(t, 0, q, Meta::default());
        let out = drain(&mut r, t);
        assert_eq!(out.len(), 1);
        let (port, f) = &out[0];
        assert_eq!(*port, 0);
        let a = arp::parse_arp(f).unwrap();
        assert_eq!(
            (a.oper, a.sha, a.spa, a.tha, a.tpa),
            (ARP_REPLY, R_MAC0, ip("10.0.1.254"), H1_MAC, ip("10.0.1.1"))
        );
        assert_eq!(wire::eth_dst(f), Some(H1_MAC));
        // The requester was learned (RFC 826: the request was for us).
        assert_eq!(r.ports()[0].neighbor(ip("10.0.1.1")), Some(H1_MAC));
        // A request for another address (or the other port's) is ignored.
        let q = arp_frame(
            ARP_REQUEST,
            H1_MAC,
            "10.0.1.1",
            MacAddr::default(),
            "10.0.2.254",
            MacAddr::BROADCAST,
        );
        r.handle_frame(t, 0, q, Meta::default());
        assert!(drain(&mut r, t).is_empty());
        assert_eq!(r.counters.control_count("arp_requests_rx"), 2);
        assert_eq!(r.counters.control_count("arp_replies_tx"), 1);
        assert_eq!(r.counters.control_count("arp_not_for_us"), 1);
    }

    #[test]
    fn resolves_next_hop_holds_and_releases_in_order() {
        let mut r = router();
        let t = Instant(1_000_000);
        for i in 0..3 {
            r.handle_frame(t + Duration(i), 0, udp("10.0.2.1", 64), Meta::default());
        }
        assert_eq!(r.held(), 3);
        let out = drain(&mut r, t);
        assert_eq!(out.len(), 1, "one request for three packets");
        let a = arp::parse_arp(&out[0].1).unwrap();
        assert_eq!(
            (out[0].0, a.oper, a.tpa, a.spa),
            (1, ARP_REQUEST, ip("10.0.2.1"), ip("10.0.2.254"))
        );
        assert_eq!(wire::eth_dst(&out[0].1), Some(MacAddr::BROADCAST));
        let rep = arp_frame(ARP_REPLY, H2_MAC, "10.0.2.1", R_MAC1, "10.0.2.254", R_MAC1);
        r.handle_frame(t + Duration::from_micros(50), 1, rep, Meta::default());
        let out = drain(&mut r, t + Duration::from_micros(50));
        assert_eq!(out.len(), 3);
        for (p, f) in &out {
            assert_eq!(*p, 1);
            assert_eq!(wire::eth_dst(f), Some(H2_MAC));
            assert_eq!(wire::eth_src(f), Some(R_MAC1));
            assert_eq!(wire::parse_ipv4(f).unwrap().ttl, 63);
        }
        assert_eq!(r.counters.forwarded, 3);
        assert_eq!(r.held(), 0);
        // Resolved: the next packet goes at once. Via a gateway, too.
        r.handle_frame(
            t + Duration::from_micros(60),
            0,
            udp("10.9.3.3", 64),
            Meta::default(),
        );
        let out = drain(&mut r, t + Duration::from_micros(60));
        assert_eq!(out.len(), 1);
        assert_eq!(wire::eth_dst(&out[0].1), Some(H2_MAC));
    }

    #[test]
    fn unanswered_arp_retries_then_drops_and_counts() {
        let mut r = router();
        r.set_arp_config(ArpConfig {
            hold_packets: 2,
            retry: Duration::from_millis(100),
            max_tries: 3,
        });
        let t = Instant(5_000_000_000);
        for _ in 0..5 {
            r.handle_frame(t, 0, udp("10.0.2.7", 64), Meta::default());
        }
        assert_eq!(r.held(), 2);
        assert_eq!(r.counters.unresolved, 3);
        assert_eq!(r.counters.control_count("arp_hold_overflow"), 3);
        let mut requests = 0;
        let mut now = t;
        while let Some(at) = r.poll_at(now) {
            now = at.max(now);
            while let Some((_, p)) = r.poll_transmit(now) {
                requests += arp::parse_arp(&p.data).is_ok() as u32;
            }
            if now > t + Duration::from_secs(2) {
                break;
            }
        }
        assert_eq!(requests, 3);
        assert_eq!(r.counters.control_count("arp_timeouts"), 1);
        assert_eq!(r.counters.unresolved, 5);
        assert_eq!(r.held(), 0);
        assert_eq!(r.poll_at(now), None, "nothing left to do");
    }

    fn echo_request(dst: &str, ttl: u8) -> Vec<u8> {
        let mut msg = vec![
            icmp::ICMP_ECHO_REQUEST,
            0,
            0,
            0,
            0,
            1,
            0,
            1,
            b'p',
            b'i',
            b'n',
            b'g',
        ];
        let c = wire::checksum(&msg);
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        let mut f = icmp::build_ipv4(ip("10.0.1.1"), ip(dst), wire::IPPROTO_ICMP, ttl, 1, &msg);
        wire::set_eth_addrs(&mut f, H1_MAC, R_MAC0);
        f
    }

    #[test]
    fn answers_ping_on_every_own_address() {
        let mut r = router();
        r.port_mut(0).unwrap().add_neighbor(ip("10.0.1.1"), H1_MAC);
        let t = Instant(1);
        for dst in ["10.0.1.254", "10.0.2.254"] {
            r.handle_frame(t, 0, echo_request(dst, 64), Meta::default());
            let out = drain(&mut r, t);
            assert_eq!(out.len(), 1, "{dst}");
            let (p, f) = &out[0];
            let i = wire::parse_ipv4(f).unwrap();
            assert_eq!(
                (*p, i.src, i.dst, i.proto),
                (0, ip(dst), ip("10.0.1.1"), wire::IPPROTO_ICMP)
            );
            assert_eq!(f[i.l4_offset()], icmp::ICMP_ECHO_REPLY);
            assert_eq!(wire::eth_dst(f), Some(H1_MAC));
        }
        assert_eq!(r.counters.control_count("icmp_echo_replies_tx"), 2);
        assert_eq!(r.counters.local_rx, 2);
    }

    #[test]
    fn ttl_expiry_sends_rate_limited_time_exceeded() {
        let mut r = router();
        r.port_mut(0).unwrap().add_neighbor(ip("10.0.1.1"), H1_MAC);
        r.set_icmp_config(IcmpConfig {
            errors_per_sec: 10,
            burst: 2,
            ..IcmpConfig::default()
        });
        let t = Instant(10_000_000_000);
        for _ in 0..5 {
            r.handle_frame(t, 0, udp("10.0.2.1", 1), Meta::default());
        }
        let out = drain(&mut r, t);
        assert_eq!(out.len(), 2, "burst of two, then limited");
        let i = wire::parse_ipv4(&out[0].1).unwrap();
        assert_eq!((i.src, i.dst), (ip("10.0.1.254"), ip("10.0.1.1")));
        assert_eq!(out[0].1[i.l4_offset()], icmp::ICMP_TIME_EXCEEDED);
        assert_eq!(r.counters.control_count("icmp_ratelimited"), 3);
        // 100 ms later one more token.
        r.handle_frame(
            t + Duration::from_millis(100),
            0,
            udp("10.0.2.1", 1),
            Meta::default(),
        );
        assert_eq!(drain(&mut r, t + Duration::from_millis(100)).len(), 1);
        let ttl = r
            .counters
            .drops()
            .find(|(k, _)| *k == "ttl_expired")
            .map(|(_, v)| v);
        assert_eq!(ttl, Some(6));
        // No route: net unreachable.
        r.handle_frame(
            t + Duration::from_secs(1),
            0,
            udp("192.0.2.1", 9),
            Meta::default(),
        );
        let out = drain(&mut r, t + Duration::from_secs(1));
        let i = wire::parse_ipv4(&out[0].1).unwrap();
        assert_eq!(out[0].1[i.l4_offset()], icmp::ICMP_DEST_UNREACHABLE);
    }

    #[test]
    fn link_broadcast_and_martians_are_not_forwarded() {
        let mut r = router();
        let mut f = udp("10.0.2.1", 64);
        wire::set_eth_addrs(&mut f, H1_MAC, MacAddr::BROADCAST);
        r.handle_frame(Instant(1), 0, f, Meta::default());
        let mut f = udp("224.0.0.5", 64);
        wire::set_eth_addrs(&mut f, H1_MAC, R_MAC0);
        r.handle_frame(Instant(1), 0, f, Meta::default());
        let names: BTreeMap<_, _> = r.counters.drops().collect();
        assert_eq!(names.get("link_broadcast"), Some(&1));
        assert_eq!(names.get("bad_dst"), Some(&1));
        assert!(drain(&mut r, Instant(1)).is_empty());
    }

    /// Received frames accounted for: every frame in exactly one counter.
    fn accounted(r: &Router) -> (u64, u64) {
        let rx: u64 = r.ports().iter().map(|p| p.counters.rx_pkts).sum();
        let port_level: u64 = r
            .ports()
            .iter()
            .map(|p| p.counters.not_for_us + p.counters.non_ip + p.counters.malformed + p.counters.arp_rx)
            .sum();
        let c = &r.counters;
        let ip_level = c.local_rx
            + c.forwarded
            + c.shaped
            + c.drops.values().sum::<u64>()
            + c.unresolved
            + r.held() as u64;
        (rx, port_level + ip_level)
    }

    fn valid_frames() -> Vec<Vec<u8>> {
        vec![
            udp("10.0.2.1", 64),
            udp("10.9.1.1", 2),
            udp("10.0.1.254", 64),
            echo_request("10.0.2.254", 64),
            udp("10.0.2.1", 1),
            arp_frame(
                ARP_REQUEST,
                H1_MAC,
                "10.0.1.1",
                MacAddr::default(),
                "10.0.1.254",
                MacAddr::BROADCAST,
            ),
            arp_frame(ARP_REPLY, H2_MAC, "10.0.2.1", R_MAC1, "10.0.2.254", R_MAC1),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Random bytes and mutated valid frames never panic the router, and
        /// every received frame lands in exactly one counter.
        #[test]
        fn every_frame_is_counted(
            frames in prop::collection::vec(
                (0usize..7, prop::collection::vec((any::<u16>(), any::<u8>()), 0..6),
                 0usize..120, prop::collection::vec(any::<u8>(), 0..200), any::<bool>(), 0u16..3),
                1..40),
        ) {
            let mut r = router();
            let mut now = Instant(1_000_000_000);
            let valid = valid_frames();
            for (k, muts, cut, junk, raw, port) in frames {
                let f = if raw {
                    junk
                } else {
                    let mut f = valid[k].clone();
                    for (at, v) in muts {
                        let n = f.len();
                        f[at as usize % n] = v;
                    }
                    if cut > 0 && cut < f.len() {
                        f.truncate(f.len() - cut);
                    }
                    f
                };
                r.handle_frame(now, port, f, Meta::default());
                now += Duration::from_micros(37);
                while r.poll_transmit(now).is_some() {}
                // Port 2 does not exist: counted as rx_bad_port, not on a port.
                let (rx, acc) = accounted(&r);
                prop_assert_eq!(rx, acc);
            }
            // Let every ARP timer run out: the held packets become drops.
            now += Duration::from_secs(5);
            while r.poll_transmit(now).is_some() {}
            now += Duration::from_secs(5);
            while r.poll_transmit(now).is_some() {}
            let (rx, acc) = accounted(&r);
            prop_assert_eq!(rx, acc);
        }
    }
}
