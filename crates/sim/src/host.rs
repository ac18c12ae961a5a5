//! A simulated end host: one interface, a NIC queue in front of a
//! transmitter paced at the link's rate, and the receiving side of the
//! measurement traffic — probe packets for its applications go up to the
//! driver's sinks ([`Event::Deliver`]); echo flows are reflected back to
//! their sender with their DS byte, as a ping responder or iperf's peer
//! would. What a host sends comes from traffic sources the driver attaches
//! to it ([`Node::handle_send`]).
//!
//! In live mode a scenario host is a network namespace with the kernel's
//! own IP stack; this node is the simulator's stand-in for it.

use std::any::Any;
use std::net::Ipv4Addr;

use qosnet_core::node::{Duplex, Event, Ledger, Node, PortReport, Transmit, TxStatus, TxTally};
use qosnet_core::probe::Probe;
use qosnet_core::sched::{DropReason, Fifo, Scheduler};
use qosnet_core::wire::{self, MacAddr};
use qosnet_core::{Duration, Framing, Instant, Meta, Packet};

pub struct Host {
    name: String,
    ip: Ipv4Addr,
    mac: MacAddr,
    /// The host's link peer (where replies go if a frame names no sender).
    peer_mac: MacAddr,
    nic: Fifo,
    rate_bps: u64,
    framing: Framing,
    busy_until: Instant,
    /// Per scenario flow id: whether this host echoes it.
    echo: Vec<bool>,
    events: std::collections::VecDeque<Event>,
    rx_pkts: u64,
    rx_bytes: u64,
    /// Frames sent, counted when they crossed ([`TxTally`]).
    tx: TxTally,
    /// Frames that were not measurement traffic for this host.
    misdelivered: u64,
    /// Frames for another station's MAC (flooded by a switch), dropped by
    /// the NIC's filter.
    not_for_us: u64,
    /// Frames that are not traffic (ARP, protocol frames), seen and ignored.
    control_rx: u64,
    /// Send a gratuitous ARP at the first timeout (a shared domain).
    announce: bool,
    /// On a shared segment: one frame at a time to the NIC.
    duplex: Duplex,
    /// Half duplex: the NIC holds a frame until `handle_tx_done`.
    tx_pending: bool,
}

/// Packets a host's NIC queue holds at most (and bytes).
pub const NIC_PACKETS: usize = 10_000;
pub const NIC_BYTES: usize = 16 << 20;

impl Host {
    /// A host with address `ip`/`mac` on a link of `rate_bps` whose far
    /// end is `peer_mac`; `echo[f]` says whether it reflects flow `f`.
    pub fn new(
        name: impl Into<String>,
        ip: Ipv4Addr,
        mac: MacAddr,
        peer_mac: MacAddr,
        rate_bps: u64,
        framing: Framing,
        echo: Vec<bool>,
    ) -> Self {
        Host {
            name: name.into(),
            ip,
            mac,
            peer_mac,
            nic: Fifo::new(NIC_PACKETS, NIC_BYTES),
            rate_bps,
            framing,
            busy_until: Instant::ZERO,
            echo,
            events: Default::default(),
            rx_pkts: 0,
            rx_bytes: 0,
            tx: TxTally::default(),
            misdelivered: 0,
            not_for_us: 0,
            control_rx: 0,
            announce: false,
            duplex: Duplex::Full,
            tx_pending: false,
        }
    }
}

impl Host {
    /// Announce the host with a gratuitous ARP when the simulation starts
    /// (on a shared domain, so switches learn where it is).
    pub fn announce_on_start(mut self) -> Self {
        self.announce = true;
        self
    }
    /// A host on a shared segment: its NIC sends when the medium lets it.
    pub fn half_duplex(mut self) -> Self {
        self.duplex = Duplex::Half;
        self
    }
}

impl Node for Host {
    fn name(&self) -> &str {
        &self.name
    }
    fn port_count(&self) -> usize {
        1
    }
    fn handle_frame(&mut self, now: Instant, port: u16, frame: Vec<u8>, meta: Meta) {
        self.rx_pkts += 1;
        self.rx_bytes += frame.len() as u64;
        // Frames that are not traffic (ARP: the simulated host knows its
        // neighbours' MACs from the scenario) are seen and ignored.
        if meta.uid == 0 {
            self.control_rx += 1;
            return;
        }
        // The NIC's address filter: a switch flooding unknown unicast sends
        // hosts frames for other stations; they never reach the stack.
        if let Some(dst) = wire::eth_dst(&frame) {
            if dst != self.mac && !dst.is_group() {
                self.not_for_us += 1;
                return;
            }
        }
        let Ok(info) = wire::parse_ipv4(&frame) else {
            self.misdelivered += 1;
            return;
        };
        let probe = Probe::decode_any(wire::udp_payload(&frame, &info));
        match probe {
            Some(p) if info.dst == self.ip && (p.flow() as usize) < self.echo.len() => {
                if self.echo[p.flow() as usize] {
                    // Echo request: send it back with its DS byte.
                    // Back to the frame's last hop (its router, or the
                    // sender itself on a shared domain).
                    let back = wire::eth_src(&frame).unwrap_or(self.peer_mac);
                    let mut data = frame;
                    wire::reflect_udp(&mut data, &info, self.mac, back);
                    wire::set_ttl(&mut data, 64);
                    let _ = self.nic.enqueue(Packet::new(data, meta), now);
                    return;
                }
                self.events.push_back(Event::Deliver {
                    port,
                    pkt: Packet::new(frame, meta),
                });
            }
            _ => self.misdelivered += 1,
        }
    }
    fn handle_send(&mut self, now: Instant, pkt: Packet) {
        // A full NIC queue refuses; the refusal is counted in its stats.
        let _ = self.nic.enqueue(pkt, now);
    }
    fn handle_timeout(&mut self, now: Instant) {
        if std::mem::take(&mut self.announce) {
            let f = qosnet_core::arp::announcement(self.mac, self.ip);
            let _ = self.nic.enqueue(Packet::new(f, Meta::default()), now);
        }
    }
    fn handle_tx_done(&mut self, _now: Instant, _port: u16, status: TxStatus) {
        self.tx_pending = false;
        self.tx.done(status);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if self.busy_until > now || self.tx_pending {
            return None;
        }
        let pkt = self.nic.dequeue(now)?;
        let wire = self.framing.wire_bytes(pkt.len());
        self.tx.handed(self.duplex, pkt.len() as u64, wire);
        let tx_end = match self.duplex {
            Duplex::Full => {
                self.busy_until = now + Duration::for_bytes(wire, self.rate_bps);
                Some(self.busy_until)
            }
            Duplex::Half => {
                self.tx_pending = true;
                None
            }
        };
        Some(Transmit { port: 0, pkt, tx_end })
    }
    fn poll_timeout(&self, _now: Instant) -> Option<Instant> {
        (!self.nic.is_empty() && !self.tx_pending).then_some(self.busy_until)
    }
    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
    fn counters(&self) -> Vec<(String, u64)> {
        vec![
            ("sent".into(), self.tx.pkts),
            ("misdelivered".into(), self.misdelivered),
        ]
        .into_iter()
        // Reported only when it happened: results of scenarios without
        // switches stay as they were.
        .chain((self.not_for_us > 0).then(|| ("not_for_us".to_string(), self.not_for_us)))
        .chain((self.control_rx > 0).then(|| ("control_rx".to_string(), self.control_rx)))
        .chain(
            self.tx
                .drop_entry()
                .map(|(_, n)| ("tx_excessive_collisions".to_string(), n)),
        )
        .collect()
    }
    fn port_report(&self, _port: u16) -> PortReport {
        let drops = self.nic.stats().total_drops();
        PortReport {
            name: format!("{}-nic", self.name),
            rx_pkts: self.rx_pkts,
            rx_bytes: self.rx_bytes,
            tx_pkts: self.tx.pkts,
            tx_bytes: self.tx.bytes,
            tx_wire_bytes: self.tx.wire_bytes,
            scheduler: "fifo".into(),
            queued: self.nic.len() as u64,
            drops: (drops > 0)
                .then(|| (DropReason::QueueFull.name().into(), drops))
                .into_iter()
                .chain(self.tx.drop_entry())
                .collect(),
            counters: Vec::new(),
            rx_counters: Vec::new(),
        }
    }
    fn ledger(&self) -> Ledger {
        Ledger {
            held: self.nic.len() as u64,
            dropped: self.nic.stats().total_drops() + self.misdelivered + self.not_for_us,
            created: 0,
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
