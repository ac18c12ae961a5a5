//! A bench for STSDR node tests: an ideal broadcast medium standing in for
//! the T-switch (every frame reaches its receivers `latency` after its last
//! bit left the sender; broadcasts reach every node), per-receiver loss of
//! DS frames, nodes that can be killed and revived, and one sink per
//! outgoing link that models the switch's output port to the next hop
//! (frames wait for the link; waiting is counted as contention) and
//! answers ARP for the next hop's address.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;

use super::balancer::{Balancer, BalancerConfig, Liveness};
use super::forwarder::{Forwarder, ForwarderConfig, OutLink};
use super::wire as ds;
use crate::arp::{self, Arp, ARP_REPLY, ARP_REQUEST};
use crate::node::Node;
use crate::packet::{Framing, Meta};
use crate::route::{Route, RouteTable};
use crate::sched::SplitMix64;
use crate::time::{Duration, Instant};
use crate::wire::{self, MacAddr, UdpSpec};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Dst {
    Node(usize),
    Sink(usize),
}

/// The switch port towards one outgoing link's next hop.
pub struct OlSink {
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub rate_bps: u64,
    busy: Instant,
    /// (when the last bit left on the link, frame) per frame received.
    pub rx: Vec<(Instant, Vec<u8>)>,
    /// Frames that found the link busy.
    pub contended: u64,
}

impl OlSink {
    /// Frames received per class (DSCP precedence).
    pub fn per_class(&self, k: usize) -> Vec<u64> {
        let mut v = vec![0; k];
        for (_, f) in &self.rx {
            if let Ok(i) = wire::parse_ipv4(f) {
                if let Some(x) = v.get_mut((i.dscp() >> 3) as usize) {
                    *x += 1;
                }
            }
        }
        v
    }
}

type Rule = Box<dyn FnMut(Instant, usize, usize, &[u8]) -> bool>;
/// A frame on the wire: (arrival, sequence, receiver, traffic uid, bytes).
type InFlight = Reverse<(Instant, u64, Dst, u64, Vec<u8>)>;

pub struct Bench {
    pub now: Instant,
    pub nodes: Vec<Box<dyn Node>>,
    macs: Vec<MacAddr>,
    pub down: Vec<bool>,
    pub sinks: Vec<OlSink>,
    pub latency: Duration,
    /// Probability a DS frame is lost on its way to each receiver.
    pub ds_loss: f64,
    /// Drop a frame (time, from node, to node, bytes) if it returns true.
    pub drop_if: Option<Rule>,
    rng: SplitMix64,
    inflight: BinaryHeap<InFlight>,
    seq: u64,
    uid: u64,
    pub ds_lost: u64,
    pub injected: u64,
    pub unknown_dst: u64,
    /// Traffic frames that reached a dead node (lost, as on a real switch).
    pub dead_letters: u64,
    framing: Framing,
}

impl Bench {
    pub fn new(latency: Duration, seed: u64) -> Self {
        Bench {
            now: Instant::ZERO,
            nodes: Vec::new(),
            macs: Vec::new(),
            down: Vec::new(),
            sinks: Vec::new(),
            latency,
            ds_loss: 0.0,
            drop_if: None,
            rng: SplitMix64::new(seed),
            inflight: BinaryHeap::new(),
            seq: 0,
            uid: 0,
            ds_lost: 0,
            injected: 0,
            unknown_dst: 0,
            dead_letters: 0,
            framing: Framing::default(),
        }
    }
    pub fn add(&mut self, node: Box<dyn Node>, mac: MacAddr) -> usize {
        self.nodes.push(node);
        self.macs.push(mac);
        self.down.push(false);
        self.nodes.len() - 1
    }
    pub fn add_sink(&mut self, mac: MacAddr, ip: Ipv4Addr, rate_bps: u64) -> usize {
        self.sinks.push(OlSink {
            mac,
            ip,
            rate_bps,
            busy: Instant::ZERO,
            rx: Vec::new(),
            contended: 0,
        });
        self.sinks.len() - 1
    }
    pub fn fe(&self, i: usize) -> &Forwarder {
        self.nodes[i].as_any().downcast_ref().expect("a forwarder")
    }
    pub fn lb(&self, i: usize) -> &Balancer {
        self.nodes[i].as_any().downcast_ref().expect("a balancer")
    }
    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn push(&mut self, at: Instant, dst: Dst, uid: u64, f: Vec<u8>) {
        self.seq += 1;
        self.inflight.push(Reverse((at, self.seq, dst, uid, f)));
    }
    /// A frame from outside (an upstream router) reaching the switch at `at`.
    pub fn inject(&mut self, at: Instant, frame: Vec<u8>) {
        self.uid += 1;
        self.injected += 1;
        let dst = wire::eth_dst(&frame);
        match self.macs.iter().position(|m| Some(*m) == dst) {
            Some(i) => self.push(at, Dst::Node(i), self.uid, frame),
            None => self.unknown_dst += 1,
        }
    }
    fn route(&mut self, from: usize, end: Instant, uid: u64, f: Vec<u8>) {
        let at = end + self.latency;
        let dst = wire::eth_dst(&f);
        if dst == Some(MacAddr::BROADCAST) {
            let is_ds = ds::is_ds(&f);
            for to in 0..self.nodes.len() {
                if to == from {
                    continue;
                }
                let lost = (is_ds && self.ds_loss > 0.0 && self.unit() < self.ds_loss)
                    || self.drop_if.as_mut().is_some_and(|r| r(end, from, to, &f));
                if lost {
                    self.ds_lost += is_ds as u64;
                    continue;
                }
                self.push(at, Dst::Node(to), uid, f.clone());
            }
            if !is_ds && wire::ethertype(&f) == Some(wire::ETHERTYPE_ARP) {
                for s in 0..self.sinks.len() {
                    self.push(at, Dst::Sink(s), uid, f.clone());
                }
            }
            return;
        }
        if let Some(to) = self.macs.iter().position(|m| Some(*m) == dst) {
            if !self.drop_if.as_mut().is_some_and(|r| r(end, from, to, &f)) {
                self.push(at, Dst::Node(to), uid, f);
            }
        } else if let Some(s) = self.sinks.iter().position(|s| Some(s.mac) == dst) {
            self.push(at, Dst::Sink(s), uid, f);
        } else {
            self.unknown_dst += 1;
        }
    }
    fn deliver(&mut self, at: Instant, dst: Dst, uid: u64, f: Vec<u8>) {
        match dst {
            Dst::Node(i) => {
                if self.down[i] {
                    self.dead_letters += (uid > 0) as u64;
                } else {
                    let meta = Meta {
                        uid,
                        arrival: at,
                        ..Meta::default()
                    };
                    self.nodes[i].handle_frame(self.now, 0, f, meta);
                }
            }
            Dst::Sink(s) => {
                if let Ok(a) = arp::parse_arp(&f) {
                    let sk = &self.sinks[s];
                    if a.oper == ARP_REQUEST && a.tpa == sk.ip {
                        let rep = Arp {
                            oper: ARP_REPLY,
                            sha: sk.mac,
                            spa: sk.ip,
                            tha: a.sha,
                            tpa: a.spa,
                        };
                        let frame = arp::build_arp(sk.mac, a.sha, &rep);
                        if let Some(to) = self.macs.iter().position(|m| *m == a.sha) {
                            self.push(at + self.latency, Dst::Node(to), 0, frame);
                        }
                    }
                    return;
                }
                let w = self.framing.wire_bytes(f.len());
                let sk = &mut self.sinks[s];
                if at < sk.busy {
                    sk.contended += 1;
                }
                let start = at.max(sk.busy);
                sk.busy = start + Duration::for_bytes(w, sk.rate_bps);
                sk.rx.push((sk.busy, f));
            }
        }
    }
    /// Run every event up to and including `end`.
    pub fn run_until(&mut self, end: Instant) {
        let mut same = 0u32;
        loop {
            let t_node = (0..self.nodes.len())
                .filter(|i| !self.down[*i])
                .filter_map(|i| self.nodes[i].poll_timeout(self.now))
                .min();
            let t_msg = self.inflight.peek().map(|r| r.0 .0);
            let Some(t) = [t_node, t_msg].into_iter().flatten().min() else {
                break;
            };
            if t > end {
                break;
            }
            let t = t.max(self.now);
            same = if t == self.now { same + 1 } else { 0 };
            assert!(same < 10_000, "no progress at {t:?}");
            self.now = t;
            while let Some(Reverse((at, _, _, _, _))) = self.inflight.peek() {
                if *at > t {
                    break;
                }
                let Some(Reverse((at, _, dst, uid, f))) = self.inflight.pop() else {
                    break;
                };
                self.deliver(at, dst, uid, f);
            }
            for i in 0..self.nodes.len() {
                if self.down[i] {
                    continue;
                }
                if self.nodes[i].poll_timeout(t).is_some_and(|x| x <= t) {
                    self.nodes[i].handle_timeout(t);
                }
                while let Some(tx) = self.nodes[i].poll_transmit(t) {
                    let end = tx.tx_end.unwrap_or(t);
                    self.route(i, end, tx.pkt.meta.uid, tx.pkt.data);
                }
            }
        }
        self.now = self.now.max(end);
    }
    /// Traffic frames on the wire.
    pub fn in_flight(&self) -> u64 {
        self.inflight.iter().filter(|r| r.0 .3 > 0).count() as u64
    }
    /// Data frames that reached an outgoing link.
    pub fn delivered(&self) -> u64 {
        self.sinks.iter().map(|s| s.rx.len() as u64).sum()
    }
    /// Traffic held and dropped by live and dead nodes alike.
    pub fn ledger(&self) -> (u64, u64) {
        self.nodes.iter().fold((0, 0), |(h, d), n| {
            let l = n.ledger();
            (h + l.held, d + l.dropped)
        })
    }
}

/// MACs and addresses of the standard bench.
pub fn fe_mac(i: usize) -> MacAddr {
    MacAddr::local(0x100 + i as u32)
}
pub fn lb_mac() -> MacAddr {
    MacAddr::local(0x200)
}
pub fn ol_mac(j: usize) -> MacAddr {
    MacAddr::local(0x300 + j as u32)
}
pub fn ol_ip(j: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, j as u8, 1)
}
pub fn ext_mac() -> MacAddr {
    MacAddr::local(0x400)
}

/// An STSDR of `m` forwarders (nodes `0..m`), one load balancer (node
/// `m`), `n` outgoing links at 1 Gb/s, `k` classes; destinations
/// 10.(100 + j).0.0/16 leave by OL_j. `tune` adjusts each forwarder's
/// configuration (static next-hop MACs unless it clears them).
pub fn stsdr(
    m: usize,
    n: usize,
    k: usize,
    latency: Duration,
    seed: u64,
    tune: impl Fn(&mut ForwarderConfig),
) -> Bench {
    let mut b = Bench::new(latency, seed);
    let outlinks: Vec<OutLink> = (0..n)
        .map(|j| OutLink {
            name: format!("ol{j}"),
            next_hop: ol_ip(j),
            mac: Some(ol_mac(j)),
            rate_bps: 1_000_000_000,
        })
        .collect();
    for i in 0..m {
        let mut c = ForwarderConfig::new(
            format!("fe{i}"),
            i as u16,
            m as u16,
            fe_mac(i),
            outlinks.clone(),
            k,
        );
        tune(&mut c);
        let mut routes = RouteTable::new();
        for j in 0..n {
            routes
                .add(Route::new(Ipv4Addr::new(10, 100 + j as u8, 0, 0), 16, j as u16).via(ol_ip(j)))
                .unwrap();
        }
        let mut f = Forwarder::new(c, routes).unwrap();
        f.set_round_log(1 << 16);
        b.add(Box::new(f), fe_mac(i));
    }
    let mut lc = BalancerConfig::new(
        "lb",
        lb_mac(),
        vec![Ipv4Addr::new(192, 0, 2, 1)],
        (0..m).map(fe_mac).collect(),
    );
    lc.liveness = Liveness::Heard {
        timeout: Duration::from_millis(2),
    };
    b.add(Box::new(Balancer::new(lc).unwrap()), lb_mac());
    for j in 0..n {
        b.add_sink(ol_mac(j), ol_ip(j), 1_000_000_000);
    }
    b
}

/// A UDP frame for OL `ol`, class `class` (DSCP class selector), flow
/// `sport`, `len` bytes of IP packet, addressed to `dst_mac`.
pub fn packet(dst_mac: MacAddr, ol: usize, class: usize, sport: u16, len: usize) -> Vec<u8> {
    wire::build_udp(
        &UdpSpec {
            src_mac: ext_mac(),
            dst_mac,
            src: Ipv4Addr::new(198, 51, 100, 1),
            dst: Ipv4Addr::new(10, 100 + ol as u8, (sport >> 8) as u8, sport as u8),
            sport,
            dport: 9,
            tos: (class as u8) << 5,
            ttl: 64,
            ident: sport,
        },
        len,
        &[],
    )
}
