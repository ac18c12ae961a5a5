//! A bridge between RETHER segments (seed 002 §2.5, "Extension to
//! Multi-Segment Ethernet"), as one [`Node`].
//!
//! The paper decomposes a real-time connection between stations on
//! different segments "into multiple real-time sub-connections, each of
//! which corresponds to one of the segments", and asks the intermediate
//! bridges to "observe the real-time schedules associated with each of the
//! segments to which they are connected", buffering what arrives on one
//! segment's schedule until the next segment's schedule lets it go. That
//! is this node:
//!
//! - **One RETHER station per port**, each a full member of its own
//!   segment's token ring ([`RetherHost`]: the protocol of §2 with its
//!   failure handling, sessions of §3). The segments' tokens are
//!   independent; nothing here couples their cycles.
//! - **Real-time relay.** A unit (the whole IP packet) completed by the
//!   receiving sub-session on port `p` is handed at once to the sending
//!   sub-session of the same flow on the next segment, where it waits in
//!   the session's send buffers (bounded, overflow counted) for that
//!   session's next RT visit. Each segment adds at most one TRT of wait,
//!   so a session crossing `h` bridges is delivered within about
//!   `(h + 1) · TRT` plus transmission times — the paper's reason the
//!   number of hops is bounded.
//! - **Parallel set-up.** The bridge asks for admission of its onward
//!   sub-sessions when the flow starts, not when its first unit arrives,
//!   so every segment switches to RETHER mode at the same time (§2.5:
//!   "the connection setup time ... is roughly the maximum of the mode
//!   switch time associated with each segment").
//! - **Ordinary traffic** is bridged at layer 2: a frame a port's station
//!   delivers (it delivers frames for the stations behind the bridge) goes
//!   to the port that reaches its destination MAC, on that segment's NRT
//!   turns; broadcasts go to every other port. Frames for nobody behind
//!   another port are dropped and counted. The reach of each port is
//!   fixed by the scenario (no learning: the segments are a tree the
//!   loader checked, so there is no loop to learn around).

use std::any::Any;
use std::collections::BTreeMap;

use crate::node::{Detail, Event, Ledger, Node, PortReport, Transmit, TxStatus};
use crate::packet::{Meta, Packet};
use crate::probe::Probe;
use crate::time::Instant;
use crate::wire::{self as eth, MacAddr};

use super::app::RetherHost;
use super::SessionId;

/// One port of a bridge: the segment's station and what it reaches.
pub struct BridgePort {
    /// The station (and its relay applications) on this segment.
    pub host: RetherHost,
    /// The MACs of the stations reached through this port.
    pub reach: Vec<MacAddr>,
}

/// An onward sub-session to admit when its flow starts.
#[derive(Clone, Copy, Debug)]
pub struct Admission {
    pub at: Instant,
    pub port: u16,
    pub session: SessionId,
}

/// A RETHER bridge (see the module docs).
pub struct RetherBridge {
    name: String,
    ports: Vec<BridgePort>,
    /// RT flow id → the port whose sub-session carries it onward.
    relay: BTreeMap<u32, u16>,
    /// Admissions still to ask for, earliest last.
    admit: Vec<Admission>,
    rt_relayed: u64,
    nrt_relayed: u64,
    flooded: u64,
    /// Copies made by flooding beyond the one frame received.
    flood_copies: u64,
    /// Frames for a MAC no port reaches (or one behind the port they
    /// came from).
    unknown_dst: u64,
    /// Frames its (absent) applications sent: a bridge has none.
    app_refused: u64,
    admit_failed: u64,
}

impl RetherBridge {
    /// A bridge of `ports` (port k of the node is port 0 of station k);
    /// `relay` maps each RT flow that crosses it to its onward port.
    pub fn new(
        name: String,
        ports: Vec<BridgePort>,
        relay: BTreeMap<u32, u16>,
        mut admit: Vec<Admission>,
    ) -> Result<Self, String> {
        if ports.len() < 2 {
            return Err(format!("RETHER bridge {name} needs two or more ports"));
        }
        if let Some((f, &p)) = relay.iter().find(|(_, &p)| p as usize >= ports.len()) {
            return Err(format!(
                "RETHER bridge {name}: flow {f} relayed to port {p}, which it lacks"
            ));
        }
        admit.sort_by_key(|a| std::cmp::Reverse(a.at));
        Ok(RetherBridge {
            name,
            ports,
            relay,
            admit,
            rt_relayed: 0,
            nrt_relayed: 0,
            flooded: 0,
            flood_copies: 0,
            unknown_dst: 0,
            app_refused: 0,
            admit_failed: 0,
        })
    }

    /// The station on port `p`.
    pub fn port_host(&self, p: usize) -> Option<&RetherHost> {
        self.ports.get(p).map(|b| &b.host)
    }

    /// Relay everything the stations delivered, until quiet.
    fn relay_events(&mut self, now: Instant) {
        loop {
            let mut moved = false;
            for p in 0..self.ports.len() {
                while let Some(Event::Deliver { pkt, .. }) = self.ports[p].host.poll_event() {
                    moved = true;
                    self.forward(now, p as u16, pkt);
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn forward(&mut self, now: Instant, from: u16, pkt: Packet) {
        let flow = eth::parse_ipv4(&pkt.data)
            .ok()
            .and_then(|info| Probe::decode(eth::udp_payload(&pkt.data, &info)))
            .map(|p| p.flow);
        if let Some(&q) = flow.and_then(|f| self.relay.get(&f)) {
            if q != from {
                self.rt_relayed += 1;
                self.ports[q as usize].host.handle_send(now, pkt);
                return;
            }
        }
        let Some(dst) = pkt
            .data
            .get(..6)
            .map(|d| MacAddr([d[0], d[1], d[2], d[3], d[4], d[5]]))
        else {
            self.unknown_dst += 1;
            return;
        };
        if dst.0[0] & 1 == 1 {
            self.flooded += 1;
            let others: Vec<usize> = (0..self.ports.len()).filter(|&q| q != from as usize).collect();
            self.flood_copies += others.len().saturating_sub(1) as u64;
            for q in others {
                self.ports[q]
                    .host
                    .handle_send(now, Packet::new(pkt.data.clone(), pkt.meta));
            }
            return;
        }
        match self.ports.iter().position(|b| b.reach.contains(&dst)) {
            Some(q) if q != from as usize => {
                self.nrt_relayed += 1;
                self.ports[q].host.handle_send(now, pkt);
            }
            _ => self.unknown_dst += 1,
        }
    }

    fn admit_due(&mut self, now: Instant) {
        while self.admit.last().is_some_and(|a| a.at <= now) {
            let Some(a) = self.admit.pop() else { break };
            if let Some(b) = self.ports.get_mut(a.port as usize) {
                if b.host.station_mut().admit(now, a.session).is_err() {
                    self.admit_failed += 1;
                }
            }
        }
    }
}

impl Node for RetherBridge {
    fn name(&self) -> &str {
        &self.name
    }
    fn port_count(&self) -> usize {
        self.ports.len()
    }
    fn handle_frame(&mut self, now: Instant, port: u16, frame: Vec<u8>, meta: Meta) {
        let Some(b) = self.ports.get_mut(port as usize) else {
            return;
        };
        b.host.handle_frame(now, 0, frame, meta);
        self.relay_events(now);
    }
    fn handle_send(&mut self, _now: Instant, _pkt: Packet) {
        self.app_refused += 1;
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.admit_due(now);
        for b in &mut self.ports {
            b.host.handle_timeout(now);
        }
        self.relay_events(now);
    }
    fn handle_tx_done(&mut self, now: Instant, port: u16, status: TxStatus) {
        if let Some(b) = self.ports.get_mut(port as usize) {
            b.host.handle_tx_done(now, 0, status);
        }
        self.relay_events(now);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        for p in 0..self.ports.len() {
            let t = self.ports[p].host.poll_transmit(now);
            self.relay_events(now);
            if let Some(mut t) = t {
                t.port = p as u16;
                return Some(t);
            }
        }
        None
    }
    fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        self.ports
            .iter()
            .filter_map(|b| b.host.poll_timeout(now))
            .chain(self.admit.last().map(|a| a.at))
            .min()
    }
    fn counters(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = [
            ("bridge_rt_relayed", self.rt_relayed),
            ("bridge_nrt_relayed", self.nrt_relayed),
            ("bridge_flooded", self.flooded),
            ("bridge_unknown_dst", self.unknown_dst),
            ("bridge_app_refused", self.app_refused),
            ("bridge_admit_failed", self.admit_failed),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| (k.to_string(), n))
        .collect();
        for (p, b) in self.ports.iter().enumerate() {
            v.extend(
                b.host
                    .counters()
                    .into_iter()
                    .map(|(k, n)| (format!("port{p}_{k}"), n)),
            );
        }
        v
    }
    fn port_report(&self, port: u16) -> PortReport {
        self.ports
            .get(port as usize)
            .map(|b| b.host.port_report(0))
            .unwrap_or_default()
    }
    fn ledger(&self) -> Ledger {
        let mut l = Ledger {
            dropped: self.unknown_dst + self.app_refused,
            created: self.flood_copies,
            ..Ledger::default()
        };
        for b in &self.ports {
            let x = b.host.ledger();
            l.held += x.held;
            l.dropped += x.dropped;
            l.created += x.created;
        }
        l
    }
    fn details(&self) -> Option<Detail> {
        let u = Detail::U64;
        let ports = self
            .ports
            .iter()
            .enumerate()
            .map(|(p, b)| {
                Detail::Map(vec![
                    ("port".into(), u(p as u64)),
                    (
                        "station".into(),
                        b.host.details().unwrap_or(Detail::Map(Vec::new())),
                    ),
                ])
            })
            .collect();
        Some(Detail::Map(vec![
            ("bridge".into(), Detail::Str(self.name.clone())),
            ("rt_relayed".into(), u(self.rt_relayed)),
            ("nrt_relayed".into(), u(self.nrt_relayed)),
            ("flooded".into(), u(self.flooded)),
            ("unknown_dst".into(), u(self.unknown_dst)),
            ("ports".into(), Detail::List(ports)),
        ]))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
