//! Queueing disciplines (cf. Linux `Qdisc_ops`, minus netlink).
//!
//! A [`Scheduler`] is a sans-IO state machine: it is handed packets and the
//! time, and answers which packet to send next. Non-work-conserving
//! disciplines (TDP, shapers) say through [`Scheduler::poll_at`] when they
//! will next have something to send; [`Scheduler::peek`] shows the packet
//! that would go next without sending it (head-of-line state, e.g. for a
//! distributed scheduler to advertise). Schedulers compose: a child of
//! [`Prio`] is any `Box<dyn Scheduler>`, so hierarchies such as
//! EF priority over WFQ(AF1..AF4) over BE are built from parts.

mod fair;
mod fifo;
mod htb;
mod prio;
mod red;
mod taprio;

pub use fair::{Drr, FairConf, QueueConf, QueueInfo, QueueKey, Wf2q, Wfq, VT_PER_BYTE};
pub use fifo::Fifo;
pub use htb::{Htb, HtbClass, HtbClassInfo, HtbConf};
pub use prio::Prio;
pub use red::{Red, RedConf, RedProfile, SplitMix64};
pub use taprio::{GateEntry, Taprio};

use crate::packet::Packet;
use crate::time::Instant;

/// Why a packet was dropped. Every reason is a named counter in results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Tail drop: queue packet or byte limit reached.
    QueueFull,
    /// TDP: the queue of the packet's forwarding TF already holds T_f·C bits.
    TfOverflow,
    /// TDP: forwarding TF already started or passed when the packet arrived.
    TfLate,
    /// TDP: forwarding TF beyond the last queue of the wheel.
    TfTooEarly,
    /// Dropped by a policer or meter action.
    Policed,
    /// Early drop by active queue management (RED/WRED).
    Aqm,
    /// Router could not route the packet.
    NoRoute,
    /// TTL expired in transit.
    TtlExpired,
    /// Frame failed validation on input.
    Malformed,
    /// Shaping queue full.
    ShaperFull,
    /// Input (CPU) queue of a router full.
    InputFull,
    /// A TDP edge shaper would hold the packet longer than its
    /// `shaper_max_hold` (the flow lost its slot to lateness).
    ShaperHold,
    /// TDP: still queued more than the port's late limit after its
    /// forwarding TF ended (a stalled router); too late for the next node.
    TfStale,
}

impl DropReason {
    pub const ALL: [DropReason; 13] = [
        DropReason::QueueFull,
        DropReason::TfOverflow,
        DropReason::TfLate,
        DropReason::TfTooEarly,
        DropReason::Policed,
        DropReason::Aqm,
        DropReason::NoRoute,
        DropReason::TtlExpired,
        DropReason::Malformed,
        DropReason::ShaperFull,
        DropReason::InputFull,
        DropReason::ShaperHold,
        DropReason::TfStale,
    ];
    pub fn name(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::TfOverflow => "tf_overflow",
            DropReason::TfLate => "tf_late",
            DropReason::TfTooEarly => "tf_too_early",
            DropReason::Policed => "policed",
            DropReason::Aqm => "aqm",
            DropReason::NoRoute => "no_route",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::Malformed => "malformed",
            DropReason::ShaperFull => "shaper_full",
            DropReason::InputFull => "input_full",
            DropReason::ShaperHold => "shaper_hold",
            DropReason::TfStale => "tf_stale",
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// A rejected packet, handed back so the caller can count and account it.
#[derive(Debug)]
pub struct Dropped {
    pub pkt: Packet,
    pub reason: DropReason,
}

/// Per-queue counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub enq_pkts: u64,
    pub enq_bytes: u64,
    pub deq_pkts: u64,
    pub deq_bytes: u64,
    drops: [u64; DropReason::ALL.len()],
}

impl QueueStats {
    pub fn on_enqueue(&mut self, bytes: usize) {
        self.enq_pkts += 1;
        self.enq_bytes += bytes as u64;
    }
    pub fn on_dequeue(&mut self, bytes: usize) {
        self.deq_pkts += 1;
        self.deq_bytes += bytes as u64;
    }
    pub fn on_drop(&mut self, reason: DropReason) {
        self.drops[reason.index()] += 1;
    }
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
    /// Non-zero drop counters by name.
    pub fn drop_counts(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|r| (r.name(), self.drops(*r)))
            .filter(|(_, n)| *n > 0)
    }
    /// Add another queue's counters (for aggregates over children).
    pub fn merge(&mut self, o: &QueueStats) {
        self.enq_pkts += o.enq_pkts;
        self.enq_bytes += o.enq_bytes;
        self.deq_pkts += o.deq_pkts;
        self.deq_bytes += o.deq_bytes;
        for (a, b) in self.drops.iter_mut().zip(o.drops.iter()) {
            *a += b;
        }
    }
}

/// A queueing discipline.
pub trait Scheduler: Send {
    /// Offer a packet. On refusal the packet comes back with the reason,
    /// already counted in this scheduler's stats.
    fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped>;
    /// The next packet to transmit at `now`, if the discipline releases one.
    fn dequeue(&mut self, now: Instant) -> Option<Packet>;
    /// The packet [`dequeue`](Self::dequeue) would return at `now`, left
    /// in place (cf. Linux `Qdisc_ops.peek`): `Some` exactly when
    /// `dequeue(now)` would return a packet, and then that packet, as long
    /// as nothing is enqueued in between. It answers from `&self`: every
    /// discipline whose dequeue changes state to decide (DRR's deficit
    /// rounds, WF²Q+'s eligibility, HTB's borrowing, a token bucket's
    /// refill) computes the same decision without changing it. Frames a
    /// discipline finishes on the way out (the TDP wheel's stamps and
    /// padding) say so on their implementation.
    fn peek(&self, now: Instant) -> Option<&Packet>;
    /// When [`dequeue`](Self::dequeue) may next return a packet: `Some(now)`
    /// or earlier if one is ready, a later instant for a timed release
    /// (TF boundary, token refill), `None` if nothing is pending.
    ///
    /// An answer later than `now` (or `None`) holds until it is reached:
    /// asked again at any `t` before it, with nothing enqueued or dequeued
    /// in between, the discipline gives the same answer (router ports rely
    /// on it to ask once per change; `tests/peek.rs` checks every kind).
    fn poll_at(&self, now: Instant) -> Option<Instant>;
    /// Whether, once [`poll_at`](Self::poll_at) has said `None`, it keeps
    /// saying so until the next [`enqueue`](Self::enqueue): true of the
    /// work-conserving queues, not of disciplines that make frames of
    /// their own in time (the TDP wheel's padding) or gate by a clock.
    /// Drivers may then skip polling an empty queue (the router does,
    /// after every event in the simulator). False unless a discipline
    /// promises it.
    fn quiet_when_empty(&self) -> bool {
        false
    }
    /// Whether the discipline reads `meta.flow`, the 5-tuple hash a router
    /// computes for every frame it forwards (per-flow queueing). A router
    /// none of whose ports' disciplines reads it skips the hash: on the
    /// ICC 2006 FIFO testbed it was a twentieth of a forwarded frame's cost.
    /// True unless a discipline promises otherwise.
    fn uses_flow_id(&self) -> bool {
        true
    }
    /// Packets held.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes held.
    fn bytes(&self) -> usize;
    fn stats(&self) -> &QueueStats;
    /// Short name for reports ("fifo", "tdp", "wfq", ...).
    fn kind(&self) -> &'static str;
    /// Counters beyond [`QueueStats`] by name — per class, per window,
    /// per protocol event — for results. Empty by default.
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}
