//! The router pipeline: input processing, forwarding, output ports, and the
//! control plane a real IPv4 router needs on an Ethernet (ARP, ICMP).
//!
//! Follows the three modules of the ICC 2006 TDP paper (§II-D): *input*
//! (validation, classification, TDP stamp decoding or edge shaping),
//! *forwarding* (route lookup on destination and TTL, TTL decrement,
//! checksum), and *output* (a [`Scheduler`] per port and a transmitter that
//! serialises frames at the link's capacity). Sans-IO: a driver feeds frames
//! with [`Router::handle_frame`], runs its timers with
//! [`Node::handle_timeout`], takes frames to put on links with
//! [`Node::poll_transmit`], and sleeps until [`Node::poll_timeout`] — the
//! [`Node`] contract every qosnet node follows.
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
//!
//! One concern per file: this one has the [`Router`] and its pipeline
//! (input → forwarding → output) and the [`Node`] contract; `port` the
//! interfaces and their transmitter; `neighbor` ARP; `icmp` echo, errors
//! and their rate limit; `tdp` stamp decoding and forwarding TFs;
//! `counters` what is counted and how it is named.

use std::net::Ipv4Addr;

use crate::arp::{self, ArpConfig};
use crate::flow::FlowKey;
use crate::icmp::{
    is_unicast, CODE_NET_UNREACHABLE, CODE_TTL_EXCEEDED, ICMP_DEST_UNREACHABLE, ICMP_TIME_EXCEEDED,
};
use crate::node::{Ledger, Node, PortReport, Transmit, TxStatus};
use crate::packet::{Meta, Packet};
use crate::route::RouteTable;
use crate::sched::{DropReason, Dropped, Scheduler};
use crate::time::{Duration, Instant};
use crate::wire::{self, Ipv4Info, MacAddr, Malformed};

mod counters;
mod icmp;
mod neighbor;
mod port;
mod tdp;
#[cfg(test)]
mod testkit;

pub use counters::RouterCounters;
pub use icmp::IcmpConfig;
pub use port::{Port, PortConfig, PortCounters};
pub use tdp::TdpNode;

use icmp::Limiter;
use neighbor::Held;

/// The earlier of two optional times (the one there is, if only one).
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
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

/// Per port, a lower bound on when its transmitter may next send:
/// `Instant::MAX` only while it is waiting for its NIC or its queue is
/// quiet (`Port::tx_at`), its `busy_until` or earlier otherwise. The
/// transmitter scan and the next-work scan run after every event in the
/// simulator; this dense copy lets them pass a busy or quiet port without
/// touching it. Whatever may wake a port (an enqueue, a NIC's completion)
/// sets its entry from the port again, and outside access (`port_mut`) to
/// zero, which makes the next scan ask the port.
struct TxHints {
    at: Vec<Instant>,
    /// A lower bound on every entry: every [`TxHints::set`] lowers it to
    /// the value written, and [`TxHints::settle`] (after a transmitter
    /// scan) raises it to the entries' minimum. The scan that ends each
    /// event's transmit loop (the one that finds nothing more to send) is
    /// then one comparison while no port can send before it.
    lb: Instant,
}

impl TxHints {
    fn new() -> Self {
        TxHints {
            at: Vec::new(),
            lb: Instant::ZERO,
        }
    }
    /// A new port: asked at the next scan.
    fn push(&mut self) {
        self.at.push(Instant::ZERO);
        self.lb = Instant::ZERO;
    }
    /// Set port `i`'s hint, keeping `lb` a lower bound.
    fn set(&mut self, i: usize, t: Instant) {
        if let Some(e) = self.at.get_mut(i) {
            *e = t;
            self.lb = self.lb.min(t);
        }
    }
    /// The bound made tight again, after a scan.
    fn settle(&mut self) {
        self.lb = self.at.iter().copied().min().unwrap_or(Instant::MAX);
    }
}

pub struct Router {
    pub name: String,
    ports: Vec<Port>,
    tx_at: TxHints,
    /// Some port may be resolving a next hop (ARP): set whenever one
    /// starts, cleared by a scan that finds none, so the timers and the
    /// next-work scan after every event skip the ports' ARP state while
    /// nothing is being resolved (always, on static links).
    arp_maybe: bool,
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
    /// Whether a port's discipline reads `meta.flow` (then every forwarded
    /// frame's 5-tuple is hashed into it).
    hash_flows: bool,
    /// Neighbours to resolve at the first timeout (see [`Router::resolve_on_start`]).
    start_resolve: Vec<(u16, Ipv4Addr)>,
    /// Ports to announce on at the first timeout (see [`Router::announce_on_start`]).
    start_announce: Vec<u16>,
}

impl Router {
    pub fn new(name: impl Into<String>) -> Self {
        Router {
            name: name.into(),
            ports: Vec::new(),
            tx_at: TxHints::new(),
            arp_maybe: false,
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
            hash_flows: false,
            start_resolve: Vec::new(),
            start_announce: Vec::new(),
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
        self.hash_flows |= sched.uses_flow_id();
        self.ports.push(Port::new(cfg, sched));
        self.tx_at.push();
        (self.ports.len() - 1) as u16
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
        self.tx_at.set(i as usize, Instant::ZERO);
        self.ports.get_mut(i as usize)
    }

    /// Port `i` may have work its `tx_at` entry does not show (a frame was
    /// enqueued, its NIC finished): the next scan asks it.
    fn wake_port(&mut self, i: u16) {
        if let Some(p) = self.ports.get(i as usize) {
            self.tx_at.set(i as usize, p.tx_at());
        }
    }

    fn is_local(&self, ip: Ipv4Addr) -> bool {
        self.ports.iter().any(|p| p.cfg.ip == ip)
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
                if meta.uid != 0 {
                    p.counters.traffic_not_for_us += 1;
                }
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
        // Per-flow disciplines (WFQ, DRR) key on the 5-tuple; without
        // one, no hash (zero: the frame has no flow id here).
        meta.flow = if self.hash_flows {
            FlowKey::from(&info).hash32()
        } else {
            0
        };
        let mut pkt = Packet::new(data, meta);
        // TDP input processing (§III-B): decode the upstream TF from the
        // stamp, or clear forged stamps from asynchronous neighbours.
        let in_ip = p.cfg.ip;
        let upstream_tf = self.tdp_input(port, rx_time, &info, &mut pkt);

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
        if !is_unicast(info.dst) {
            self.counters.drop_named("bad_dst");
            return;
        }
        if !is_unicast(info.src) {
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
                ICMP_TIME_EXCEEDED,
                CODE_TTL_EXCEEDED,
            );
            return;
        }
        let Some(route) = self.routes.lookup_cached(info.dst, info.ttl).copied() else {
            self.counters.drop(DropReason::NoRoute);
            self.icmp_error(
                now,
                &pkt.data,
                &info,
                in_ip,
                ICMP_DEST_UNREACHABLE,
                CODE_NET_UNREACHABLE,
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

        let Some(pkt) = self.tdp_forward(now, pkt, info, upstream_tf) else {
            return;
        };
        self.counters.forwarded += 1;
        self.enqueue(out, pkt, now);
    }

    fn enqueue(&mut self, out: u16, pkt: Packet, now: Instant) {
        if let Some(p) = self.ports.get_mut(out as usize) {
            // Refusals are counted in the scheduler's own stats.
            let _: Result<(), Dropped> = p.enqueue(pkt, now);
            self.wake_port(out);
        }
    }

    /// Timers: start-up ARP requests, ARP retries and timeouts, and frames
    /// whose shaping time has come (DiffServ shaper, TDP edge shaper) moved
    /// to their port's scheduler.
    fn timers(&mut self, now: Instant) {
        if !self.start_resolve.is_empty() || !self.start_announce.is_empty() {
            self.start_up(now);
        }
        if self.arp_maybe {
            if self.ports.iter().any(|p| p.nbr.resolving()) {
                self.arp_timeouts(now);
            } else {
                self.arp_maybe = false;
            }
        }
        if let Some(c) = self.classifier.as_mut() {
            while let Some((port, pkt)) = c.poll_release(now) {
                if let Some(p) = self.ports.get_mut(port as usize) {
                    let _ = p.enqueue(pkt, now);
                    self.tx_at.set(port as usize, p.tx_at());
                }
            }
        }
        self.tdp_release(now);
    }

    /// The first timeout: start-up ARP requests and announcements.
    fn start_up(&mut self, now: Instant) {
        for (port, ip) in std::mem::take(&mut self.start_resolve) {
            self.resolve(now, port, ip);
        }
        for port in std::mem::take(&mut self.start_announce) {
            if let Some(p) = self.ports.get_mut(port as usize) {
                let f = crate::arp::announcement(p.cfg.mac, p.cfg.ip);
                p.send_ctrl(now, f);
                self.wake_port(port);
                self.counters.ctl("arp_announcements_tx", 1);
            }
        }
    }

    /// Output: the next frame to put on a link at `now`, with its port,
    /// taking the ports in turn so none is starved when several are ready.
    fn transmit(&mut self, now: Instant) -> Option<Transmit> {
        if self.tx_at.lb > now {
            return None;
        }
        let n = self.ports.len();
        let mut i = self.next_port;
        for _ in 0..n {
            if i >= n {
                i = 0;
            }
            // A busy or quiet transmitter is the common case: skip it
            // without touching the port (this loop runs after every event
            // in the simulator).
            if self.tx_at.at[i] > now {
                i += 1;
                continue;
            }
            let p = &mut self.ports[i];
            let sent = p.transmit(now, self.catch_up, self.tdp.as_ref());
            self.tx_at.set(i, p.tx_at());
            let Some(sent) = sent else {
                i += 1;
                continue;
            };
            self.next_port = (i + 1) % n;
            self.tx_at.settle();
            return Some(Transmit {
                port: i as u16,
                pkt: sent.pkt,
                tx_end: sent.tx_end,
            });
        }
        self.tx_at.settle();
        None
    }

    /// Packets held inside the router outside port queues (edge shaper,
    /// packets of the traffic waiting for ARP).
    pub fn held(&self) -> usize {
        let arp: usize = self.ports.iter().map(|p| p.nbr.held_traffic()).sum();
        self.tdp.as_ref().map(|t| t.shaper.len()).unwrap_or(0)
            + self.classifier.as_ref().map(|c| c.held()).unwrap_or(0)
            + arp
    }

    /// When the router next has work: a frame to transmit, a release, or an
    /// ARP retry.
    fn next_work(&self, now: Instant) -> Option<Instant> {
        if !self.start_resolve.is_empty() || !self.start_announce.is_empty() {
            return Some(now);
        }
        // One pass over the ports (this runs after every event the router
        // sees in the simulator).
        let mut next: Option<Instant> = None;
        if self.tx_at.lb != Instant::MAX {
            for (p, &at) in self.ports.iter().zip(&self.tx_at.at) {
                if at != Instant::MAX {
                    next = earliest(next, p.ready_at(now));
                }
            }
        }
        if self.arp_maybe {
            for p in &self.ports {
                next = earliest(next, p.nbr.next_retry());
            }
        }
        if let Some(t) = &self.tdp {
            next = earliest(next, t.shaper.poll_at());
        }
        if let Some(c) = &self.classifier {
            next = earliest(next, c.poll_at());
        }
        next
    }
}

impl Node for Router {
    fn name(&self) -> &str {
        &self.name
    }
    fn port_count(&self) -> usize {
        self.ports.len()
    }
    fn handle_frame(&mut self, now: Instant, port: u16, frame: Vec<u8>, meta: Meta) {
        Router::handle_frame(self, now, port, frame, meta);
    }
    /// A router has no applications: frames handed to it are dropped and
    /// counted (`drop_no_app`).
    fn handle_send(&mut self, _now: Instant, _pkt: Packet) {
        self.counters.drop_named("no_app");
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.timers(now);
    }
    fn handle_tx_done(&mut self, now: Instant, port: u16, status: TxStatus) {
        if let Some(p) = self.ports.get_mut(port as usize) {
            p.tx_pending = false;
            p.busy_until = p.busy_until.max(now);
            p.counters.tx.done(status);
            self.wake_port(port);
            if status == TxStatus::ExcessiveCollisions {
                self.counters.ctl("tx_excessive_collisions", 1);
            }
        }
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.transmit(now)
    }
    fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        self.next_work(now)
    }
    fn counters(&self) -> Vec<(String, u64)> {
        self.named_counters()
    }
    fn port_report(&self, port: u16) -> PortReport {
        let Some(p) = self.ports.get(port as usize) else {
            return PortReport::default();
        };
        let s = p.scheduler();
        PortReport {
            name: p.cfg.name.clone(),
            rx_pkts: p.counters.rx_pkts,
            rx_bytes: p.counters.rx_bytes,
            tx_pkts: p.counters.tx.pkts,
            tx_bytes: p.counters.tx.bytes,
            tx_wire_bytes: p.counters.tx.wire_bytes,
            scheduler: s.kind().to_string(),
            queued: s.len() as u64,
            drops: s
                .stats()
                .drop_counts()
                .map(|(k, n)| (k.to_string(), n))
                .chain(p.counters.tx.drop_entry())
                .collect(),
            counters: s.counters(),
            rx_counters: [
                ("not_for_us", p.counters.not_for_us),
                ("non_ip", p.counters.non_ip),
                ("arp_rx", p.counters.arp_rx),
                ("malformed", p.counters.malformed),
            ]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (k.to_string(), n))
            .collect(),
        }
    }
    fn ledger(&self) -> Ledger {
        let queued: usize = self.ports.iter().map(|p| p.scheduler().len()).sum();
        let sched_drops: u64 = self
            .ports
            .iter()
            .map(|p| p.scheduler().stats().total_drops())
            .sum();
        let filtered: u64 = self.ports.iter().map(|p| p.counters.traffic_not_for_us).sum();
        Ledger {
            held: (queued + self.held()) as u64,
            dropped: self.counters.total_drops() + sched_drops + self.counters.unresolved + filtered,
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

    use super::testkit::*;
    use super::*;
    use crate::arp::{ARP_REPLY, ARP_REQUEST};
    use proptest::prelude::*;

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

    /// The 5-tuple hash is computed only for a router some port of which
    /// queues per flow, and then it is the flow's `FlowKey` hash.
    #[test]
    fn flow_id_is_hashed_only_where_a_discipline_reads_it() {
        use crate::sched::{FairConf, Fifo, Prio, QueueConf, Wfq};
        let flow_out = |sched: Box<dyn Scheduler>| {
            let mut r = Router::new("R");
            for (i, (mac, addr, sched)) in [
                (
                    R_MAC0,
                    "10.0.1.254",
                    Box::new(Fifo::new(10, 1 << 16)) as Box<dyn Scheduler>,
                ),
                (R_MAC1, "10.0.2.254", sched),
            ]
            .into_iter()
            .enumerate()
            {
                let cfg = PortConfig {
                    name: format!("p{i}"),
                    mac,
                    ip: ip(addr),
                    prefix_len: 24,
                    rate_bps: 1_000_000_000,
                    framing: crate::packet::Framing::default(),
                    peer_mac: Some(H2_MAC),
                    tdp_peer: false,
                    duplex: crate::node::Duplex::Full,
                };
                r.add_port(cfg, sched);
            }
            r.routes
                .add(crate::route::Route::new(ip("10.0.2.0"), 24, 1))
                .unwrap();
            let f = udp("10.0.2.1", 64);
            let want = FlowKey::from(&wire::parse_ipv4(&f).unwrap()).hash32();
            r.handle_frame(Instant(1), 0, f, Meta::default());
            let sent = crate::node::step(&mut r, Instant(1));
            assert_eq!(sent.len(), 1, "the frame is forwarded at once");
            (sent[0].pkt.meta.flow, want)
        };
        let (got, _) = flow_out(Box::new(Fifo::new(10, 1 << 16)));
        assert_eq!(got, 0, "FIFO ports only: no hash");
        let (got, _) = flow_out(Box::new(Prio::new(vec![Box::new(Fifo::new(10, 1 << 16))])));
        assert_eq!(got, 0, "priority over FIFOs: no hash");
        let wfq = Wfq::new(FairConf::per_flow(QueueConf::new(1, 10, 1 << 16)), 1_000_000_000).unwrap();
        let (got, want) = flow_out(Box::new(wfq));
        assert_ne!(want, 0);
        assert_eq!(got, want, "per-flow WFQ on the way out: the 5-tuple's hash");
        let wfq = Wfq::new(FairConf::per_flow(QueueConf::new(1, 10, 1 << 16)), 1_000_000_000).unwrap();
        let (got, want) = flow_out(Box::new(Prio::new(vec![Box::new(wfq)])));
        assert_eq!(got, want, "per-flow WFQ inside a priority band: hashed");
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
                crate::node::step(&mut r, now);
                // Port 2 does not exist: counted as rx_bad_port, not on a port.
                let (rx, acc) = accounted(&r);
                prop_assert_eq!(rx, acc);
            }
            // Let every ARP timer run out: the held packets become drops.
            now += Duration::from_secs(5);
            crate::node::step(&mut r, now);
            now += Duration::from_secs(5);
            crate::node::step(&mut r, now);
            let (rx, acc) = accounted(&r);
            prop_assert_eq!(rx, acc);
        }
    }
}
