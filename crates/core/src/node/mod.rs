//! Nodes: every box on a qosnet network — router, host, layer-2 switch,
//! RETHER station, STSDR load balancer or forwarder — is a sans-IO state
//! machine behind one trait, [`Node`], in the shape of quinn-proto's
//! `Connection`: inputs through `handle_*`, outputs through `poll_*`.
//!
//! ```text
//!   driver (simulator or live runtime)            node
//!   ─────────────────────────────────────         ──────────────────────────
//!   frame arrives on port p          ──▶  handle_frame(now, p, frame, meta)
//!   an application sends             ──▶  handle_send(now, pkt)
//!   the node's deadline passed       ──▶  handle_timeout(now)
//!   medium finished a frame          ──▶  handle_tx_done(now, p, status)
//!                                    ◀──  poll_transmit(now) -> Transmit
//!                                    ◀──  poll_event() -> Event
//!   sleep until                      ◀──  poll_timeout(now)
//! ```
//!
//! Timers live in `handle_timeout` (ARP retries, shaper releases, token
//! timers), never in `poll_transmit`, which only hands out frames. A
//! driver therefore runs `handle_timeout`, then drains `poll_transmit` and
//! `poll_event`, then sleeps until `poll_timeout`.
//!
//! Ports are full or half duplex ([`Duplex`]). On a full-duplex
//! (point-to-point) port the node's own transmitter paces frames at the
//! link's rate and says when each one's last bit leaves
//! ([`Transmit::tx_end`]); on a half-duplex port (a shared CSMA/CD
//! segment) the node hands one frame at a time to its NIC and hears back
//! through [`Node::handle_tx_done`] when the medium sent it — after how many
//! collisions — or gave up, as a real NIC's transmit-complete interrupt
//! does. Nothing a node is handed can make it panic; every frame it is
//! given ends in a counter.
//!
//! The driver owns what real hardware adds: links and media, clocks, and
//! the CPU that takes time to process frames ([`cpu::Cpu`], one model put
//! in front of any node by either driver).

pub mod cpu;
mod tx;

pub use tx::{TxTally, EXCESSIVE_COLLISIONS};

use std::any::Any;

use crate::packet::{Meta, Packet};
use crate::time::Instant;

/// A frame leaving a node.
#[derive(Debug)]
pub struct Transmit {
    pub port: u16,
    pub pkt: Packet,
    /// Full-duplex port: when the frame's last bit leaves the node (its
    /// transmitter is busy until then). Half-duplex port: `None` — the
    /// medium decides when the frame goes, and the node learns the outcome
    /// from [`Node::handle_tx_done`].
    pub tx_end: Option<Instant>,
}

/// How a half-duplex transmission ended (IEEE 802.3 §4.2.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxStatus {
    /// The frame went out whole after this many collisions.
    Sent { collisions: u32 },
    /// The NIC gave up after its last attempt (16 by default): excessive
    /// collisions. The frame is lost.
    ExcessiveCollisions,
}

/// How a port reaches its medium.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Duplex {
    /// Point-to-point link: the node's transmitter paces frames itself.
    #[default]
    Full,
    /// Shared segment: one frame at a time to the NIC, which defers, backs
    /// off and retries; the node waits for [`Node::handle_tx_done`].
    Half,
}

/// What a node holds, has lost and has made, for the driver's conservation
/// ledger (every traffic packet generated or copied is delivered, dropped
/// somewhere, or still inside the network). Frames a node makes for
/// itself (ARP, ICMP, TDP padding, protocol control frames) are not
/// traffic and not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Traffic packets inside the node: queues, hold buffers, shapers.
    pub held: u64,
    /// Traffic packets the node dropped, for any reason.
    pub dropped: u64,
    /// Extra copies of traffic packets the node made (a switch flooding a
    /// frame to several ports sends copies beyond the one it received).
    pub created: u64,
}

/// One port as results report it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortReport {
    pub name: String,
    /// Frames received on the port (every frame handed in, kept or not).
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub tx_pkts: u64,
    /// Frame bytes sent (no FCS, preamble or IFG).
    pub tx_bytes: u64,
    /// Link time used, in bytes, counting FCS, preamble and IFG.
    pub tx_wire_bytes: u64,
    /// The output discipline's short name ("fifo", "tdp", ...).
    pub scheduler: String,
    /// Packets queued at the port now.
    pub queued: u64,
    /// Non-zero output drops by reason.
    pub drops: Vec<(String, u64)>,
    /// The output discipline's own counters.
    pub counters: Vec<(String, u64)>,
    /// How received frames were classified, where the node says more than
    /// `rx_pkts` (a router: `not_for_us`, `non_ip`, `arp_rx`, `malformed`).
    pub rx_counters: Vec<(String, u64)>,
}

/// Something a node tells its driver besides frames.
#[derive(Debug)]
pub enum Event {
    /// A packet for the node's own applications (a host's sinks), received
    /// on `port`.
    Deliver { port: u16, pkt: Packet },
}

/// A node's structured results beyond its counters (a RETHER station's
/// per-session figures): a small JSON-like tree, so the core stays free
/// of serialisation crates and a driver can render it as it likes
/// (results.json: `nodes[].details`).
#[derive(Clone, Debug, PartialEq)]
pub enum Detail {
    U64(u64),
    F64(f64),
    Str(String),
    List(Vec<Detail>),
    Map(Vec<(String, Detail)>),
}

/// A network node as a sans-IO state machine (see the module docs).
///
/// Times are the node's own clock: a driver with per-node clocks converts
/// between its time and the node's.
pub trait Node: Send {
    /// The node's name (the scenario's).
    fn name(&self) -> &str;
    /// Number of ports; frames name ports `0..port_count()`.
    fn port_count(&self) -> usize;
    /// A whole frame (no FCS) arrived on `port`. `meta.arrival`, when not
    /// zero, is when the NIC received it (earlier than `now` when the
    /// frame waited in a ring or for a CPU).
    fn handle_frame(&mut self, now: Instant, port: u16, frame: Vec<u8>, meta: Meta);
    /// An application on this node sends a complete frame (a traffic
    /// source). Nodes without applications count and drop it.
    fn handle_send(&mut self, now: Instant, pkt: Packet);
    /// Run every timer due at or before `now`.
    fn handle_timeout(&mut self, now: Instant);
    /// The medium finished (or gave up on) the frame last handed out on
    /// half-duplex `port`. Never called for full-duplex ports.
    fn handle_tx_done(&mut self, _now: Instant, _port: u16, _status: TxStatus) {}
    /// The next frame to put on a port at `now`, if any.
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit>;
    /// When the node next has work (a timer, or a frame a port may send):
    /// at or before `now` means now; `None` means not until new input.
    fn poll_timeout(&self, now: Instant) -> Option<Instant>;
    /// The next event for the driver, if any.
    fn poll_event(&mut self) -> Option<Event> {
        None
    }
    /// Node-wide counters by name, for results.
    fn counters(&self) -> Vec<(String, u64)>;
    /// One port's counters and output discipline, for results.
    fn port_report(&self, port: u16) -> PortReport;
    /// Traffic held and dropped (see [`Ledger`]).
    fn ledger(&self) -> Ledger;
    /// Structured results beyond the counters, if the node has any.
    fn details(&self) -> Option<Detail> {
        None
    }
    /// The host IP stack this node is the network interface of, if it is
    /// one (an end system's NIC, such as a RETHER station): the host's
    /// frames come in through [`Node::handle_send`] and frames for the
    /// host leave as [`Event::Deliver`]. A live driver connects such a
    /// node to the machine's own stack through a TAP device with this
    /// MAC and MTU; the simulator's flows use the same two calls.
    fn host_link(&self) -> Option<HostLink> {
        None
    }
    /// The concrete node, for kind-specific APIs (a RETHER station's
    /// sessions, a router's tables) and tests.
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// The host-facing side of a node that is an end system's interface
/// ([`Node::host_link`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostLink {
    /// The host's MAC address (the node delivers frames sent to it).
    pub mac: crate::wire::MacAddr,
    /// The largest IP packet the host may hand over in one frame.
    pub mtu: usize,
}

/// Run a node's timers and collect what it transmits at `now` — the inner
/// step of every driver, and handy in tests.
pub fn step(node: &mut dyn Node, now: Instant) -> Vec<Transmit> {
    node.handle_timeout(now);
    std::iter::from_fn(|| node.poll_transmit(now)).collect()
}
