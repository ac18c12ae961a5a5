//! Media: what carries frames between node ports in the simulator.
//!
//! Each node port is attached to one medium ([`Attach`]). The engine hands
//! a medium every frame a node transmits; the medium decides when (and
//! whether) it reaches which ports. Nodes never see media: they see
//! frames arrive, and — on half-duplex ports — transmissions complete.
//!
//! - [`link`]: one direction of a full-duplex point-to-point link
//!   (capacity is the sending node's transmitter; the link adds
//!   propagation delay).
//! - [`segment`]: a shared half-duplex Ethernet segment (CSMA/CD bus,
//!   IEEE 802.3 clause 4): the medium itself paces frames, senses carrier
//!   per station, detects collisions, jams and backs off, and reports
//!   each frame's outcome back to its sender's half-duplex port.

pub mod link;
pub mod segment;

use qosnet_core::node::{Ledger, Node, PortReport, Transmit};
use qosnet_core::{Instant, Meta, Packet};

/// What a node port is attached to.
#[derive(Clone, Debug)]
pub enum Attach {
    /// A full-duplex point-to-point link.
    Link(link::Channel),
    /// Station `station` of shared segment `seg` (the engine's media list).
    Segment { seg: u32, station: u16 },
}

/// The node a scenario's segment is in the engine's node list: a medium is
/// not a node, but scenario files name segments as nodes (for `--set`,
/// results and links), so their slot holds this, which does nothing.
pub struct MediumNode {
    name: String,
    ports: usize,
}

impl MediumNode {
    pub fn new(name: impl Into<String>, ports: usize) -> Self {
        MediumNode {
            name: name.into(),
            ports,
        }
    }
}

impl Node for MediumNode {
    fn name(&self) -> &str {
        &self.name
    }
    fn port_count(&self) -> usize {
        self.ports
    }
    fn handle_frame(&mut self, _now: Instant, _port: u16, _frame: Vec<u8>, _meta: Meta) {}
    fn handle_send(&mut self, _now: Instant, _pkt: Packet) {}
    fn handle_timeout(&mut self, _now: Instant) {}
    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        None
    }
    fn poll_timeout(&self, _now: Instant) -> Option<Instant> {
        None
    }
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    fn port_report(&self, _port: u16) -> PortReport {
        PortReport::default()
    }
    fn ledger(&self) -> Ledger {
        Ledger::default()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}
