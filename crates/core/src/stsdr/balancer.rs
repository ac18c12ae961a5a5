//! An STSDR load balancer (Khan, Sahoo & Manjunath §I, Fig. 1): the first
//! stage of the router, as a sans-IO [`Node`] with one port to the T-switch.
//!
//! It owns the router's external addresses: it answers ARP (RFC 826) for
//! them with its own MAC, so next-hop routers send the router's traffic to
//! it. Each IPv4 frame is given to a forwarder chosen by the flow's
//! 5-tuple, so all packets of a flow go to one forwarder (§I: "all packets
//! from a traffic flow are directed to the same forwarder through
//! mechanisms such as hashing"), and sent back into the switch with the
//! forwarder's MAC as destination. The IP packet is not touched: the
//! forwarder does the router's one TTL decrement.
//!
//! The choice is rendezvous (highest-random-weight) hashing over the live
//! forwarders (Thaler & Ravishankar, IEEE/ACM ToN 1998): when a forwarder
//! fails only its flows move, each to the live forwarder that scores next
//! highest, and they come back when it does — a modulo hash would move
//! almost every flow. Liveness is learned from the DS frames the
//! forwarders broadcast in the internal VLAN (the balancer is a member:
//! every STSDR node is), a forwarder silent for `timeout` being dead
//! ([`Liveness::Heard`]); or it is set by configuration and management
//! ([`Liveness::Static`], [`Balancer::set_alive`]). Forwarders in no-WFQ
//! mode send heartbeats for this.

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

use super::wire as ds;
use super::Rx;
use crate::arp::{self, Arp, ARP_REPLY, ARP_REQUEST};
use crate::node::{Ledger, Node, PortReport, Transmit};
use crate::packet::{Framing, Meta, Packet};
use crate::tdp::FlowKey;
use crate::time::{Duration, Instant};
use crate::wire::{self, MacAddr};

/// How the balancer knows which forwarders are alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// As configured, changed only by [`Balancer::set_alive`].
    Static,
    /// A forwarder is alive while its DS frames (or heartbeats) are heard;
    /// silent for `timeout`, it is dead. All are alive at start.
    Heard { timeout: Duration },
}

#[derive(Clone, Debug)]
pub struct BalancerConfig {
    pub name: String,
    pub mac: MacAddr,
    /// The router's external addresses this balancer answers ARP for.
    pub ips: Vec<Ipv4Addr>,
    pub rate_bps: u64,
    pub framing: Framing,
    /// The forwarders' MACs, index = FE id.
    pub forwarders: Vec<MacAddr>,
    pub liveness: Liveness,
    /// The internal VLAN of DS frames (frames tagged otherwise are refused).
    pub vid: Option<u16>,
    /// Frames waiting for the port.
    pub queue_limit: usize,
}

impl BalancerConfig {
    /// Defaults: 1 Gb/s, liveness heard with a 10 ms timeout, VLAN 4000,
    /// 10 000 frames of output queue.
    pub fn new(name: impl Into<String>, mac: MacAddr, ips: Vec<Ipv4Addr>, forwarders: Vec<MacAddr>) -> Self {
        BalancerConfig {
            name: name.into(),
            mac,
            ips,
            rate_bps: 1_000_000_000,
            framing: Framing::default(),
            forwarders,
            liveness: Liveness::Heard {
                timeout: Duration::from_millis(10),
            },
            vid: Some(4000),
            queue_limit: 10_000,
        }
    }
    pub fn validate(&self) -> Result<(), String> {
        let what = format!("balancer {}", self.name);
        if self.forwarders.is_empty() {
            return Err(format!("{what}: no forwarders"));
        }
        if self.forwarders.len() > u16::MAX as usize {
            return Err(format!("{what}: at most 65535 forwarders"));
        }
        if self.rate_bps == 0 {
            return Err(format!("{what}: port rate must be > 0 bit/s"));
        }
        if self.queue_limit == 0 {
            return Err(format!("{what}: queue limit must be > 0"));
        }
        if let Liveness::Heard { timeout } = self.liveness {
            if timeout == Duration::ZERO {
                return Err(format!("{what}: liveness timeout must be > 0"));
            }
        }
        Ok(())
    }
}

/// The load balancer (see the module docs).
pub struct Balancer {
    cfg: BalancerConfig,
    /// Traffic copies (a flooding switch's) for other stations, filtered.
    filtered_traffic: u64,
    out: VecDeque<Packet>,
    busy_until: Instant,
    alive: Vec<bool>,
    last_heard: Vec<Instant>,
    started: bool,
    per_fe: Vec<u64>,
    counters: BTreeMap<&'static str, u64>,
    drops: BTreeMap<&'static str, u64>,
    tx_pkts: u64,
    tx_bytes: u64,
    tx_wire_bytes: u64,
}

/// SplitMix64's finaliser: a well-mixed score for (flow, forwarder).
fn mix(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The rendezvous score of forwarder `fe` for a flow.
fn score(flow: u32, fe: usize) -> u64 {
    mix(((flow as u64) << 32) ^ fe as u64)
}

impl Balancer {
    pub fn new(cfg: BalancerConfig) -> Result<Self, String> {
        cfg.validate()?;
        let m = cfg.forwarders.len();
        Ok(Balancer {
            filtered_traffic: 0,
            out: VecDeque::new(),
            busy_until: Instant::ZERO,
            alive: vec![true; m],
            last_heard: vec![Instant::ZERO; m],
            started: false,
            per_fe: vec![0; m],
            counters: BTreeMap::new(),
            drops: BTreeMap::new(),
            tx_pkts: 0,
            tx_bytes: 0,
            tx_wire_bytes: 0,
            cfg,
        })
    }
    pub fn config(&self) -> &BalancerConfig {
        &self.cfg
    }
    /// Mark a forwarder alive or dead (configuration, management; with
    /// [`Liveness::Heard`] the next frame heard or silence overrides it).
    pub fn set_alive(&mut self, fe: usize, alive: bool) {
        if let Some(a) = self.alive.get_mut(fe) {
            if *a != alive {
                *a = alive;
                self.bump(if alive { "fe_up" } else { "fe_down" });
            }
        }
    }
    pub fn alive(&self) -> &[bool] {
        &self.alive
    }
    /// The forwarder a flow goes to now: the live one with the highest
    /// rendezvous score.
    pub fn pick(&self, flow: &FlowKey) -> Option<usize> {
        let h = flow.hash32();
        (0..self.alive.len())
            .filter(|i| self.alive[*i])
            .max_by_key(|i| (score(h, *i), std::cmp::Reverse(*i)))
    }
    /// The forwarder a flow goes to when all are alive.
    fn home(&self, h: u32) -> usize {
        (0..self.alive.len())
            .max_by_key(|i| (score(h, *i), std::cmp::Reverse(*i)))
            .unwrap_or(0)
    }
    /// Packets sent to each forwarder.
    pub fn per_forwarder(&self) -> &[u64] {
        &self.per_fe
    }
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }
    pub fn dropped(&self, reason: &str) -> u64 {
        self.drops.get(reason).copied().unwrap_or(0)
    }

    fn bump(&mut self, name: &'static str) {
        *self.counters.entry(name).or_default() += 1;
    }
    fn drop_pkt(&mut self, reason: &'static str) {
        *self.drops.entry(reason).or_default() += 1;
    }
    fn start(&mut self, now: Instant) {
        if !self.started {
            self.started = true;
            self.last_heard.iter_mut().for_each(|t| *t = now);
        }
    }
    fn timeout(&self) -> Option<Duration> {
        match self.cfg.liveness {
            Liveness::Heard { timeout } => Some(timeout),
            Liveness::Static => None,
        }
    }
    /// The next forwarder to fall silent, if liveness is heard.
    fn next_expiry(&self) -> Option<Instant> {
        let t = self.timeout()?;
        (0..self.alive.len())
            .filter(|i| self.alive[*i])
            .map(|i| self.last_heard[i] + t)
            .min()
    }
    fn expire(&mut self, now: Instant) {
        let Some(t) = self.timeout() else {
            return;
        };
        for i in 0..self.alive.len() {
            if self.alive[i] && now.saturating_since(self.last_heard[i]) >= t {
                self.alive[i] = false;
                self.bump("fe_down");
            }
        }
    }

    fn handle_ds(&mut self, now: Instant, f: &[u8]) {
        let exp = ds::Expect {
            vid: self.cfg.vid,
            dims: None,
        };
        match ds::parse_header(f, &exp) {
            Ok(h) if (h.fe as usize) < self.alive.len() => {
                self.bump("rx_ds");
                let i = h.fe as usize;
                self.last_heard[i] = now;
                if self.timeout().is_some() && !self.alive[i] {
                    self.alive[i] = true;
                    self.bump("fe_up");
                }
            }
            Ok(_) => self.bump("rx_ds_unknown_fe"),
            Err(e) => {
                self.bump("rx_ds_refused");
                *self.counters.entry(e.counter()).or_default() += 1;
            }
        }
    }

    fn handle_arp(&mut self, a: Arp) {
        if a.oper == ARP_REQUEST && self.cfg.ips.contains(&a.tpa) {
            let rep = Arp {
                oper: ARP_REPLY,
                sha: self.cfg.mac,
                spa: a.tpa,
                tha: a.sha,
                tpa: a.spa,
            };
            self.out.push_back(Packet::new(
                arp::build_arp(self.cfg.mac, a.sha, &rep),
                Meta::default(),
            ));
            self.bump("arp_replies_tx");
        } else {
            self.bump("arp_not_for_us");
        }
    }

    fn handle_ip(&mut self, mut data: Vec<u8>, meta: Meta, broadcast: bool) {
        let info = match wire::parse_ipv4(&data) {
            Ok(i) => i,
            Err(wire::Malformed::NotIpv4) => {
                self.bump("rx_non_ip");
                return;
            }
            Err(_) => {
                self.bump("rx_malformed");
                return;
            }
        };
        self.bump("rx_data");
        if broadcast {
            self.drop_pkt("link_broadcast");
            return;
        }
        if self.cfg.ips.contains(&info.dst) {
            self.drop_pkt("local"); // no applications on a balancer
            return;
        }
        let key = FlowKey::from(&info);
        let Some(fe) = self.pick(&key) else {
            self.drop_pkt("no_forwarder");
            return;
        };
        if self.out.len() >= self.cfg.queue_limit {
            self.drop_pkt("queue_full");
            return;
        }
        if fe != self.home(key.hash32()) {
            self.bump("rehashed");
        }
        wire::set_eth_addrs(&mut data, self.cfg.mac, self.cfg.forwarders[fe]);
        self.out.push_back(Packet::new(data, meta));
        self.per_fe[fe] += 1;
        self.bump("balanced");
    }
}

impl Node for Balancer {
    fn name(&self) -> &str {
        &self.cfg.name
    }
    fn port_count(&self) -> usize {
        1
    }
    /// Every frame ends in exactly one `rx_*` counter.
    fn handle_frame(&mut self, now: Instant, port: u16, frame: Vec<u8>, mut meta: Meta) {
        self.start(now);
        self.expire(now);
        self.bump("rx_frames");
        if port != 0 {
            self.bump("rx_bad_port");
            return;
        }
        match super::classify(&frame, self.cfg.mac) {
            Rx::Ds => self.handle_ds(now, &frame),
            Rx::NotForUs => {
                self.bump("rx_not_for_us");
                self.filtered_traffic += u64::from(meta.uid != 0);
            }
            Rx::Arp(Ok(a)) => {
                self.bump("rx_arp");
                self.handle_arp(a);
            }
            Rx::Arp(Err(_)) => self.bump("rx_malformed"),
            Rx::Data { broadcast } => {
                meta.arrival = now;
                meta.in_port = 0;
                self.handle_ip(frame, meta, broadcast);
            }
        }
    }
    fn handle_send(&mut self, _now: Instant, _pkt: Packet) {
        self.drop_pkt("no_app");
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.start(now);
        self.expire(now);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if self.busy_until > now {
            return None;
        }
        let pkt = self.out.pop_front()?;
        let w = self.cfg.framing.wire_bytes(pkt.len());
        self.tx_pkts += 1;
        self.tx_bytes += pkt.len() as u64;
        self.tx_wire_bytes += w;
        self.busy_until = now + Duration::for_bytes(w, self.cfg.rate_bps);
        Some(Transmit {
            port: 0,
            pkt,
            tx_end: Some(self.busy_until),
        })
    }
    fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        if !self.started {
            return Some(now);
        }
        let tx = (!self.out.is_empty()).then(|| self.busy_until.max(now));
        [tx, self.next_expiry()].into_iter().flatten().min()
    }
    fn counters(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self.counters.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        v.extend(self.drops.iter().map(|(k, n)| (format!("drop_{k}"), *n)));
        v.extend(
            self.per_fe
                .iter()
                .enumerate()
                .map(|(i, n)| (format!("to_fe{i}"), *n)),
        );
        v.push(("alive".into(), self.alive.iter().filter(|a| **a).count() as u64));
        v
    }
    fn port_report(&self, port: u16) -> PortReport {
        if port != 0 {
            return PortReport::default();
        }
        PortReport {
            name: format!("{}-sw", self.cfg.name),
            rx_pkts: self.counter("rx_frames"),
            tx_pkts: self.tx_pkts,
            tx_bytes: self.tx_bytes,
            tx_wire_bytes: self.tx_wire_bytes,
            scheduler: "fifo".into(),
            queued: self.out.len() as u64,
            drops: self.drops.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            counters: Vec::new(),
            ..PortReport::default()
        }
    }
    fn ledger(&self) -> Ledger {
        let ctrl = self
            .out
            .iter()
            .filter(|p| wire::ethertype(&p.data) == Some(wire::ETHERTYPE_ARP))
            .count();
        Ledger {
            held: (self.out.len() - ctrl) as u64,
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
    use super::*;
    use crate::stsdr::sched::FeState;
    use crate::stsdr::Dims;
    use crate::wire::UdpSpec;
    use proptest::prelude::*;

    const LB: MacAddr = MacAddr([2, 0, 0, 0, 0xb, 1]);
    const EXT: MacAddr = MacAddr([2, 0, 0, 0, 0xe, 1]);

    fn fe_mac(i: usize) -> MacAddr {
        MacAddr([2, 0, 0, 0, 0xf, i as u8])
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn lb(liveness: Liveness) -> Balancer {
        let mut c = BalancerConfig::new("lb", LB, vec![ip("192.0.2.1")], (0..4).map(fe_mac).collect());
        c.liveness = liveness;
        Balancer::new(c).unwrap()
    }

    fn udp(sport: u16) -> Vec<u8> {
        wire::build_udp(
            &UdpSpec {
                src_mac: EXT,
                dst_mac: LB,
                src: ip("198.51.100.7"),
                dst: ip("203.0.113.9"),
                sport,
                dport: 9,
                tos: 0,
                ttl: 64,
                ident: 1,
            },
            64,
            &[],
        )
    }

    /// Everything the balancer sends from `now` on, at its port's pace.
    fn drain(b: &mut Balancer, now: Instant) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        while let Some(t) = b.poll_timeout(now).filter(|_| !b.out.is_empty()) {
            match b.poll_transmit(t) {
                Some(tx) => v.push(tx.pkt.data),
                None => break,
            }
        }
        v
    }

    fn ds_frame(fe: u16) -> Vec<u8> {
        let h = ds::Header {
            fe,
            flags: ds::flags::HEARTBEAT,
            cycle: 0,
            stamp_ref: 0,
            outlinks: 1,
            classes: 1,
            slots: 0,
        };
        ds::encode(
            &h,
            &FeState::new(Dims::new(4, 1, 1), 0),
            None,
            fe_mac(fe as usize),
            Some(ds::Vlan::new(4000)),
        )
    }

    #[test]
    fn answers_arp_for_the_router_address_only() {
        let mut b = lb(Liveness::Static);
        let req = |tpa: &str| {
            arp::build_arp(
                EXT,
                MacAddr::BROADCAST,
                &Arp {
                    oper: ARP_REQUEST,
                    sha: EXT,
                    spa: ip("192.0.2.2"),
                    tha: MacAddr::default(),
                    tpa: ip(tpa),
                },
            )
        };
        b.handle_frame(Instant(1), 0, req("192.0.2.1"), Meta::default());
        b.handle_frame(Instant(1), 0, req("192.0.2.3"), Meta::default());
        let out = drain(&mut b, Instant(1));
        assert_eq!(out.len(), 1);
        let a = arp::parse_arp(&out[0]).unwrap();
        assert_eq!(
            (a.oper, a.sha, a.spa, a.tha),
            (ARP_REPLY, LB, ip("192.0.2.1"), EXT)
        );
        assert_eq!(b.counter("arp_not_for_us"), 1);
    }

    #[test]
    fn flows_stick_to_one_forwarder_and_move_only_when_it_dies() {
        let mut b = lb(Liveness::Static);
        let t = Instant(10);
        let mut home = Vec::new();
        for sport in 0..400u16 {
            b.handle_frame(t, 0, udp(sport), Meta::default());
            b.handle_frame(t, 0, udp(sport), Meta::default());
            let out = drain(&mut b, t);
            assert_eq!(out.len(), 2);
            assert_eq!(
                wire::eth_dst(&out[0]),
                wire::eth_dst(&out[1]),
                "one flow, one forwarder"
            );
            assert_eq!(&out[0][14..], &udp(sport)[14..], "IP packet untouched");
            let fe = (0..4)
                .find(|i| wire::eth_dst(&out[0]) == Some(fe_mac(*i)))
                .unwrap();
            home.push(fe);
        }
        // Every forwarder gets a fair part of 400 flows.
        for i in 0..4 {
            assert!(b.per_forwarder()[i] >= 2 * 60, "{:?}", b.per_forwarder());
        }
        b.set_alive(2, false);
        for sport in 0..400u16 {
            b.handle_frame(t, 0, udp(sport), Meta::default());
            let out = drain(&mut b, t);
            let fe = (0..4)
                .find(|i| wire::eth_dst(&out[0]) == Some(fe_mac(*i)))
                .unwrap();
            assert_ne!(fe, 2);
            if home[sport as usize] != 2 {
                assert_eq!(fe, home[sport as usize], "flows of live forwarders stay");
            }
        }
        let moved = home.iter().filter(|h| **h == 2).count() as u64;
        assert_eq!(b.counter("rehashed"), moved);
        assert_eq!(b.counter("fe_down"), 1);
    }

    #[test]
    fn liveness_from_ds_frames() {
        let mut b = lb(Liveness::Heard {
            timeout: Duration::from_millis(1),
        });
        b.handle_timeout(Instant(0));
        for fe in [0u16, 1, 3] {
            b.handle_frame(Instant(900_000), 0, ds_frame(fe), Meta::default());
        }
        assert_eq!(b.poll_timeout(Instant(900_000)), Some(Instant(1_000_000)));
        b.handle_timeout(Instant(1_000_000));
        assert_eq!(b.alive(), &[true, true, false, true]);
        b.handle_frame(Instant(1_500_000), 0, ds_frame(2), Meta::default());
        assert_eq!(b.alive(), &[true, true, true, true]);
        assert_eq!((b.counter("fe_down"), b.counter("fe_up")), (1, 1));
        // A DS frame from another VLAN or an unknown FE changes nothing.
        let mut f = ds_frame(2);
        f[15] = 0x01;
        b.handle_frame(Instant(1_600_000), 0, f, Meta::default());
        b.handle_frame(Instant(1_600_000), 0, ds_frame(9), Meta::default());
        assert_eq!(b.counter("ds_refused_wrong_vlan"), 1);
        assert_eq!(b.counter("rx_ds_unknown_fe"), 1);
        // All dead: packets are dropped and counted.
        b.handle_timeout(Instant(10_000_000));
        b.handle_frame(Instant(10_000_000), 0, udp(1), Meta::default());
        assert_eq!(b.dropped("no_forwarder"), 1);
    }

    proptest! {
        /// Any bytes: no panic, each frame in exactly one rx counter, and
        /// every IPv4 packet balanced or dropped with a reason.
        #[test]
        fn every_frame_is_counted(frames in prop::collection::vec(
            (prop::collection::vec(any::<u8>(), 0..120), 0usize..4, any::<u16>(), any::<u8>()), 1..60)) {
            let mut b = lb(Liveness::Heard { timeout: Duration::from_micros(50) });
            let mut now = Instant(0);
            for (junk, kind, x, y) in frames {
                let mut f = match kind {
                    0 => junk,
                    1 => udp(x),
                    2 => ds_frame(x % 6),
                    _ => arp::build_arp(EXT, MacAddr::BROADCAST, &Arp { oper: ARP_REQUEST, sha: EXT,
                        spa: ip("192.0.2.2"), tha: MacAddr::default(), tpa: ip("192.0.2.1") }),
                };
                if !f.is_empty() && kind != 0 {
                    let n = f.len();
                    f[x as usize % n] = y;
                }
                b.handle_frame(now, 0, f, Meta::default());
                drain(&mut b, now);
                now += Duration::from_micros(20);
                b.handle_timeout(now);
            }
            let c = |n: &str| b.counter(n);
            let rx = c("rx_frames");
            let sorted = c("rx_ds") + c("rx_ds_unknown_fe") + c("rx_ds_refused") + c("rx_not_for_us")
                + c("rx_arp") + c("rx_malformed") + c("rx_non_ip") + c("rx_data");
            prop_assert_eq!(rx, sorted);
            let fates = c("balanced") + b.drops.values().sum::<u64>();
            prop_assert_eq!(c("rx_data"), fates);
        }
    }
}
