//! A shared Ethernet segment: a half-duplex CSMA/CD bus as a sans-IO
//! medium (IEEE 802.3 clause 4: 1-persistent CSMA/CD with truncated binary
//! exponential backoff; the MAC pseudocode of §4.2.8, parameters of §4.4.2).
//!
//! Unlike ns-3's `CsmaChannel`, whose idle/busy state is seen by every
//! device at once (so it never collides), every station here senses the bus
//! **at its own position**: a signal sent by station `s` over `[t0, t1)` is
//! present at station `j` over `[t0 + d, t1 + d)`, `d = |pos_s − pos_j|`.
//! Two stations that start within the propagation delay of each other
//! therefore both transmit, both see the other's signal arrive, jam and
//! back off, as on a real coaxial cable or repeater hub.
//!
//! # The MAC, per station (one NIC each)
//! - **One frame at a time.** A node hands its NIC a frame
//!   ([`Segment::handle_send`]) and waits for [`SegOutput::TxDone`]; a frame
//!   handed while the NIC still holds one is refused ([`Refused`]) and
//!   counted (`refused`), never queued.
//! - **Deference** (§4.2.3.2.1, the `Deference` process of §4.2.8). A
//!   station defers while it senses carrier (another station's signal, or
//!   its own transmission). When carrier drops it times the inter-frame
//!   gap (IFG, 96 bit times from [`Framing::ifg`]) in two parts: during
//!   part 1 (the first 2/3, 64 bits) carrier restarts the deferral; during
//!   part 2 carrier is ignored and a waiting frame goes at the end of the
//!   gap whatever the bus does (1-persistence: every deferring station
//!   transmits, so those that waited on the same frame collide and resolve
//!   by backoff instead of the nearest one always winning). After its own
//!   transmission a station times part 1 without restarting, as §4.2.8
//!   says.
//! - **Collision detection and jam** (§4.2.3.2.4). A transmitting station
//!   that senses any other signal detects a collision: it finishes the
//!   preamble if it was still sending it, sends a 32-bit jam
//!   ([`SegmentConfig::jam_bits`]) and stops, so a collision fragment is at
//!   least 96 bits long. A collision detected more than one slot after the
//!   preamble is also counted as *late* (it happens only on a bus longer
//!   than the slot allows); it is retried like any other.
//! - **Backoff** (§4.2.3.2.5). After the n-th collision of a frame the
//!   station waits `r` slot times, `r` uniform in `[0, 2^min(n, backoff_limit))`,
//!   counted from the end of its jam, and then defers as above. After
//!   `attempt_limit` (16) attempts it gives up:
//!   [`TxStatus::ExcessiveCollisions`]. A frame sent whole resets the
//!   count, so the winner of a collision starts its next frame at
//!   `n = 0` against a loser at `n ≥ 1` — the *capture effect* (Ramakrishnan
//!   & Yang 1994) emerges without being modelled.
//! - **Frame length on the wire**: preamble and SFD, the frame padded to 60
//!   bytes, FCS ([`Framing`]); frames shorter than one slot are
//!   carrier-extended to it (§4.2.3.4). With the 512-bit slot of 10 and
//!   100 Mb/s the 64-byte minimum frame already fills the slot; at 1000
//!   Mb/s half duplex the slot is 4096 bits (§4.4.2, 1000BASE-X/T carrier
//!   extension) and [`SegmentConfig::ethernet`] chooses it, so short
//!   frames occupy 512 bytes. Frame bursting (§4.2.3.2.6) is not modelled.
//!   The IFG is a gap, not part of the frame.
//!
//! # Reception
//! A station receives a frame iff its sender finished it without aborting
//! and no other signal — including the receiver's own transmission, as a
//! half-duplex transceiver cannot hear while it talks — was present at
//! the receiver during the frame's reception there. Everything else is a
//! collision fragment, counted (`fragments_seen`) and never delivered.
//! Frames are delivered to **every** other station, whatever their
//! destination address, as NICs in promiscuous mode would see them: the
//! node decides whether the MAC address is its own (a real NIC's address
//! filter is the node's business, and RETHER stations do watch traffic not
//! addressed to them). The sender does not receive its own frame. A frame
//! is delivered when its last bit arrives (store and forward).
//!
//! # Time and determinism
//! Integer nanoseconds; bit times round up (`Duration::for_bytes`
//! style), exact at 10, 100 and 1000 Mb/s. Backoff draws come from the
//! segment's own `StdRng` seeded from [`SegmentConfig::seed`]: the same
//! inputs give the same outputs. Events at the same nanosecond run in a
//! fixed order:
//! 1. signals ending at a station (a sender's last bit, a signal leaving a
//!    receiver) — so intervals that only touch, `[a, b)` then `[b, c)`, do
//!    not overlap;
//! 2. station timers (inter-frame gap phases, backoff expiry);
//! 3. transmission starts;
//! 4. signals arriving at a station (carrier rises, collisions detected).
//!
//! So a station deciding to send at the very nanosecond another signal
//! reaches it does not yet sense that signal — carrier sense takes time to
//! assert in a real transceiver — and sends into it: it collides, and
//! detects the collision at once. This matters: two stations that back off
//! the same number of slots after a collision start exactly one
//! propagation delay apart (their jams ended one delay apart), and must
//! collide again, as the backoff analysis (and the capture effect's 5/8)
//! assumes. Stations at the same position starting at the same instant
//! collide for the same reason. Within a class, lower station index first,
//! then order of scheduling. A frame handed at `t` is considered after
//! the segment's own events before `t` and together with its starts at
//! `t` (it starts when [`Segment::handle_timeout`] next runs at `t`, which
//! [`Segment::poll_timeout`] asks for).
//!
//! # Counters
//! [`SegmentStats`]: per station attempts, collisions (late ones too),
//! deferrals (frames whose first attempt waited for another station's
//! carrier or gap: the MIB's `FramesWithDeferredTransmissions`), frames
//! and bytes sent, excessive-collision drops, refused sends, fragments
//! seen and frames received; bus-wide busy time (some station
//! transmitting), collision time (some station sending an attempt that
//! ended in a collision), time of successful frames, and utilisation.
//!
//! [`saturation`] measures N saturated stations against the Metcalfe–Boggs
//! efficiency model.

pub mod saturation;
#[cfg(test)]
mod tests;

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use qosnet_core::node::TxStatus;
use qosnet_core::wire::ETH_MIN_NO_FCS;
use qosnet_core::{Duration, Framing, Instant, Packet};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Most stations a segment accepts (IEEE 802.3 allows 1024 per collision
/// domain).
pub const MAX_STATIONS: usize = qosnet_scenario::load::limits::MAX_SEGMENT_STATIONS;
/// Farthest a station may sit from the bus end, ns (a segment far beyond
/// any Ethernet; keeps every sum of times far from overflow).
pub const MAX_POSITION_NS: u64 = 1_000_000_000;
/// Largest accepted `backoff_limit` (the window is `2^backoff_limit` slots).
pub const MAX_BACKOFF_LIMIT: u32 = 30;

/// How a segment is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentConfig {
    /// Line rate, bit/s (10, 100 or 1000 Mb/s on real Ethernet; any
    /// positive rate is accepted).
    pub rate_bps: u64,
    /// Preamble, FCS and inter-frame gap, bytes (8, 4, 12 on Ethernet).
    pub framing: Framing,
    /// Where each station sits: signal propagation time from one end of the
    /// bus to it, ns. The delay between stations `i` and `j` is
    /// `|pos_i − pos_j|`; a station's index in this list is its number.
    pub positions_ns: Vec<u64>,
    /// Slot time in bit times: the backoff unit, the late-collision
    /// threshold and the carrier-extension length (512 at 10/100 Mb/s,
    /// 4096 at 1000 Mb/s half duplex).
    pub slot_bits: u32,
    /// Jam length after a collision is detected, bit times (32).
    pub jam_bits: u32,
    /// Transmission attempts before a frame is given up (16).
    pub attempt_limit: u32,
    /// The backoff window stops doubling after this many collisions (10).
    /// 0 makes every backoff zero (pure 1-persistent retries; tests use it).
    pub backoff_limit: u32,
    /// Seed of the segment's own random stream (backoff draws).
    pub seed: u64,
}

impl SegmentConfig {
    /// IEEE 802.3 parameters at `rate_bps` for stations at `positions_ns`:
    /// Ethernet framing, 32-bit jam, 16 attempts, backoff limit 10, slot
    /// 512 bit times below 1 Gb/s and 4096 (carrier extension) from 1 Gb/s.
    pub fn ethernet(rate_bps: u64, positions_ns: Vec<u64>) -> Self {
        SegmentConfig {
            rate_bps,
            framing: Framing::default(),
            positions_ns,
            slot_bits: if rate_bps >= 1_000_000_000 { 4096 } else { 512 },
            jam_bits: 32,
            attempt_limit: 16,
            backoff_limit: 10,
            seed: 1,
        }
    }
}

/// What a segment tells its driver.
#[derive(Debug, PartialEq, Eq)]
pub enum SegOutput {
    /// Station `station` received `pkt` whole; its last bit arrived at `at`.
    Deliver {
        station: usize,
        pkt: Packet,
        at: Instant,
    },
    /// The station's NIC finished with its frame (sent after n collisions,
    /// or gave up) at `at`; it takes a new frame from then on. `started`:
    /// when the last attempt's first bit went out (for a frame sent, when
    /// its real transmission began).
    TxDone {
        station: usize,
        status: TxStatus,
        at: Instant,
        started: Instant,
    },
}

/// Why [`Segment::handle_send`] refused a frame (the frame comes back).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    pub reason: RefuseReason,
    pub pkt: Packet,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefuseReason {
    /// No station with that index on this segment.
    NoSuchStation,
    /// The station's NIC still holds a frame (wait for `TxDone`).
    NicBusy,
}

/// One station's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StationStats {
    /// Frames the NIC accepted.
    pub handed: u64,
    /// Frames refused because the NIC held one.
    pub refused: u64,
    /// Transmissions started (first attempts and retries).
    pub attempts: u64,
    /// Transmissions aborted by a collision.
    pub collisions: u64,
    /// Of those, detected more than one slot after the preamble.
    pub late_collisions: u64,
    /// Frames whose first attempt waited for another station's carrier
    /// or the gap after it.
    pub deferrals: u64,
    /// Frames sent whole.
    pub frames_sent: u64,
    /// Their bytes, as handed (no FCS, padding or preamble).
    pub bytes_sent: u64,
    /// Frames given up after `attempt_limit` attempts.
    pub excessive_collisions: u64,
    /// Frames received whole.
    pub frames_received: u64,
    /// Signals of other stations that reached this one aborted or overlapped
    /// by another signal: collision fragments, never delivered.
    pub fragments_seen: u64,
}

/// Counters of the whole segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentStats {
    pub stations: Vec<StationStats>,
    /// Frames refused because their station index does not exist.
    pub refused_no_station: u64,
    /// Time some station was transmitting, ns (union over senders).
    pub busy_ns: u64,
    /// Time some station was sending an attempt that ended in a collision
    /// (preamble, partial frame and jam), ns.
    pub collision_ns: u64,
    /// Sum of the wire times of frames sent whole, ns.
    pub good_ns: u64,
    /// Time of the last input handled, ns (the span utilisation refers to).
    pub elapsed_ns: u64,
    /// Trace records lost because the trace buffer was full.
    pub trace_dropped: u64,
}

impl SegmentStats {
    /// Fraction of the time since the epoch that some station transmitted.
    /// Transmissions still on the wire are counted once they end.
    pub fn utilisation(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.busy_ns as f64 / self.elapsed_ns as f64
        }
    }
}

/// One step of a station's MAC, for tests, tracing and debugging
/// ([`Segment::enable_trace`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trace {
    pub at: Instant,
    pub station: usize,
    /// `meta.uid` of the frame concerned.
    pub uid: u64,
    pub kind: TraceKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// The station starts sending (attempt 1, 2, ...).
    Start { attempt: u32 },
    /// It detected a collision (the frame's `collisions`-th) and jams.
    Collision { collisions: u32, late: bool },
    /// Its signal's last bit left: the whole frame, or the jam after a
    /// collision (`aborted`).
    End { aborted: bool },
    /// It backs off `slots` slot times, until `until`.
    Backoff { slots: u64, until: Instant },
}

/// Where a station's deference process is (§4.2.8 `Deference`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Defer {
    /// Not deferring: a ready frame may go now.
    Idle,
    /// Carrier present; `was_tx`: the station's own signal was part of it.
    Carrier { was_tx: bool },
    /// Part 1 of the gap; restarted by carrier unless `was_tx`.
    Gap1 { was_tx: bool },
    /// Part 2 of the gap: carrier ignored, a ready frame goes at its end.
    Gap2 { was_tx: bool },
}

struct Station {
    pos: u64,
    /// The NIC's one frame buffer.
    nic: Option<Packet>,
    /// Collisions of the frame in `nic`.
    collisions: u32,
    /// The station's own signal while it transmits (slot in the signal slab).
    tx: Option<usize>,
    /// A backoff is running (its end event carries `backoff_gen`).
    backing_off: bool,
    backoff_gen: u64,
    defer: Defer,
    gap_gen: u64,
    /// Signals present at this station now (slots), own included.
    present: Vec<usize>,
    /// The current frame's deferral has been counted.
    deferral_counted: bool,
}

impl Station {
    fn ready(&self) -> bool {
        self.nic.is_some() && self.tx.is_none() && !self.backing_off
    }
}

/// One transmission on the wire: a frame, or a fragment and its jam.
struct Signal {
    live: bool,
    serial: u64,
    station: usize,
    uid: u64,
    start: Instant,
    /// When the sender stops (moved earlier or later by a collision).
    end: Instant,
    /// The sender has stopped: `end` is final.
    ended: bool,
    aborted: bool,
    /// The frame, once sent whole, for delivery.
    pkt: Option<Packet>,
    /// Station `j` saw another signal during this one: bit `j`.
    overlapped: Vec<u64>,
    /// Stations the signal has not yet left.
    remaining: usize,
    /// Stations that received the frame whole so far.
    delivered: u32,
}

impl Signal {
    fn overlapped_at(&self, j: usize) -> bool {
        self.overlapped[j / 64] & (1 << (j % 64)) != 0
    }
    fn mark_overlapped(&mut self, j: usize) {
        self.overlapped[j / 64] |= 1 << (j % 64);
    }
}

/// Start of a signal, kept in start order until it ends, to measure the
/// union of busy and of colliding transmission intervals exactly.
struct Span {
    serial: u64,
    start: Instant,
    end: Option<(Instant, bool)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EvKind {
    /// The sender's last bit (frame or jam) leaves.
    TxEnd { slot: usize, serial: u64 },
    /// A signal's last bit passes a receiver.
    Depart { slot: usize, serial: u64 },
    /// A signal's first bit reaches a receiver.
    Arrive { slot: usize, serial: u64 },
    /// A deference gap phase ends.
    Gap { gen: u64 },
    /// A backoff ends.
    BackoffEnd { gen: u64 },
    /// The station may start sending; `committed`: the end of IFG part 2.
    Start { committed: bool },
}

impl EvKind {
    /// Order of events at the same nanosecond (see the module docs).
    fn class(&self) -> u8 {
        match self {
            EvKind::TxEnd { .. } | EvKind::Depart { .. } => 0,
            EvKind::Gap { .. } | EvKind::BackoffEnd { .. } => 1,
            EvKind::Start { .. } => 2,
            EvKind::Arrive { .. } => 3,
        }
    }
}

#[derive(Debug)]
struct Event {
    at: Instant,
    class: u8,
    station: usize,
    seq: u64,
    kind: EvKind,
}

impl Event {
    fn key(&self) -> (Instant, u8, usize, u64) {
        (self.at, self.class, self.station, self.seq)
    }
}
impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key().cmp(&o.key())
    }
}

/// Bit times, ns, derived once from the configuration.
#[derive(Clone, Copy, Debug)]
struct Times {
    preamble: Duration,
    jam: Duration,
    slot: Duration,
    ifg: Duration,
    ifg1: Duration,
    ifg2: Duration,
}

/// A shared Ethernet segment (see the module docs).
pub struct Segment {
    cfg: SegmentConfig,
    times: Times,
    stations: Vec<Station>,
    signals: Vec<Signal>,
    free: Vec<usize>,
    events: BinaryHeap<Reverse<Event>>,
    seq: u64,
    serial: u64,
    now: Instant,
    rng: StdRng,
    outputs: VecDeque<SegOutput>,
    spans: VecDeque<Span>,
    busy_until: Instant,
    coll_until: Instant,
    stats: SegmentStats,
    trace: Option<VecDeque<Trace>>,
    trace_cap: usize,
    traffic_copies: u64,
    traffic_unreceived: u64,
}

impl Segment {
    /// A segment, or what is wrong with the configuration.
    pub fn new(cfg: SegmentConfig) -> Result<Segment, String> {
        let n = cfg.positions_ns.len();
        if n == 0 {
            return Err("segment: no stations (positions_ns is empty)".into());
        }
        if n > MAX_STATIONS {
            return Err(format!("segment: {n} stations, at most {MAX_STATIONS}"));
        }
        if cfg.rate_bps == 0 {
            return Err("segment: rate_bps must be positive".into());
        }
        if let Some(p) = cfg.positions_ns.iter().find(|&&p| p > MAX_POSITION_NS) {
            return Err(format!("segment: position {p} ns beyond {MAX_POSITION_NS} ns"));
        }
        if cfg.slot_bits == 0 {
            return Err("segment: slot_bits must be positive".into());
        }
        if cfg.jam_bits == 0 {
            return Err("segment: jam_bits must be positive (a collision must be signalled)".into());
        }
        if cfg.attempt_limit == 0 {
            return Err("segment: attempt_limit must be at least 1".into());
        }
        if cfg.backoff_limit > MAX_BACKOFF_LIMIT {
            return Err(format!(
                "segment: backoff_limit {} above {MAX_BACKOFF_LIMIT} (802.3 uses 10)",
                cfg.backoff_limit
            ));
        }
        let bits = |b: u64| bit_time(b, cfg.rate_bps);
        let ifg_bits = cfg.framing.ifg as u64 * 8;
        // IFG part 1 is two thirds of the gap (§4.2.3.2.1: "up to 2/3").
        let ifg1_bits = ifg_bits * 2 / 3;
        let times = Times {
            preamble: bits(cfg.framing.preamble as u64 * 8),
            jam: bits(cfg.jam_bits as u64),
            slot: bits(cfg.slot_bits as u64),
            ifg: bits(ifg_bits),
            ifg1: bits(ifg1_bits),
            ifg2: bits(ifg_bits) - bits(ifg1_bits),
        };
        let stations = cfg
            .positions_ns
            .iter()
            .map(|&pos| Station {
                pos,
                nic: None,
                collisions: 0,
                tx: None,
                backing_off: false,
                backoff_gen: 0,
                defer: Defer::Idle,
                gap_gen: 0,
                present: Vec::new(),
                deferral_counted: false,
            })
            .collect();
        let stats = SegmentStats {
            stations: vec![StationStats::default(); n],
            ..Default::default()
        };
        Ok(Segment {
            rng: StdRng::seed_from_u64(cfg.seed),
            cfg,
            times,
            stations,
            signals: Vec::new(),
            free: Vec::new(),
            events: BinaryHeap::new(),
            seq: 0,
            serial: 0,
            now: Instant::ZERO,
            outputs: VecDeque::new(),
            spans: VecDeque::new(),
            busy_until: Instant::ZERO,
            coll_until: Instant::ZERO,
            stats,
            trace: None,
            trace_cap: 0,
            traffic_copies: 0,
            traffic_unreceived: 0,
        })
    }

    pub fn config(&self) -> &SegmentConfig {
        &self.cfg
    }
    pub fn station_count(&self) -> usize {
        self.stations.len()
    }
    /// One slot time.
    pub fn slot_time(&self) -> Duration {
        self.times.slot
    }
    /// The inter-frame gap.
    pub fn ifg(&self) -> Duration {
        self.times.ifg
    }
    /// The jam after a collision.
    pub fn jam_time(&self) -> Duration {
        self.times.jam
    }
    /// Preamble and start-of-frame delimiter.
    pub fn preamble_time(&self) -> Duration {
        self.times.preamble
    }
    /// Propagation delay between stations `i` and `j` (`None` if either
    /// does not exist).
    pub fn delay(&self, i: usize, j: usize) -> Option<Duration> {
        Some(Duration(
            self.stations.get(i)?.pos.abs_diff(self.stations.get(j)?.pos),
        ))
    }
    /// How long a frame of `frame_len` bytes (no FCS) occupies the bus:
    /// preamble, padded frame and FCS, carrier extension to one slot.
    pub fn frame_time(&self, frame_len: usize) -> Duration {
        let fr = &self.cfg.framing;
        let frame_bits = ((frame_len.max(ETH_MIN_NO_FCS) as u64) + fr.fcs as u64) * 8;
        let bits = frame_bits.max(self.cfg.slot_bits as u64) + fr.preamble as u64 * 8;
        bit_time(bits, self.cfg.rate_bps)
    }

    /// Record MAC steps ([`Trace`]) from now on, keeping at most `capacity`
    /// undrained records; more are dropped and counted (`trace_dropped`).
    pub fn enable_trace(&mut self, capacity: usize) {
        self.trace = Some(VecDeque::new());
        self.trace_cap = capacity;
    }
    /// The oldest trace record not yet taken.
    pub fn poll_trace(&mut self) -> Option<Trace> {
        self.trace.as_mut()?.pop_front()
    }

    /// Station `station`'s node hands its NIC one frame at `now`. Refused
    /// (and counted) if the NIC still holds a frame or there is no such
    /// station. The frame starts, or defers, when
    /// [`handle_timeout`](Self::handle_timeout) runs at `now`.
    pub fn handle_send(&mut self, now: Instant, station: usize, pkt: Packet) -> Result<(), Refused> {
        let now = now.max(self.now);
        self.advance(now, false);
        let Some(st) = self.stations.get_mut(station) else {
            self.stats.refused_no_station += 1;
            return Err(Refused {
                reason: RefuseReason::NoSuchStation,
                pkt,
            });
        };
        if st.nic.is_some() {
            self.stats.stations[station].refused += 1;
            return Err(Refused {
                reason: RefuseReason::NicBusy,
                pkt,
            });
        }
        st.nic = Some(pkt);
        st.collisions = 0;
        st.deferral_counted = false;
        self.stats.stations[station].handed += 1;
        self.push(now, station, EvKind::Start { committed: false });
        Ok(())
    }

    /// Run everything due at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = now.max(self.now);
        self.advance(now, true);
    }

    /// When the segment next has something to do.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.events.peek().map(|Reverse(e)| e.at)
    }

    /// The next output of what the segment did up to the last `handle_*`
    /// time, in time order. Drain it after every `handle_*` call.
    pub fn poll_output(&mut self) -> Option<SegOutput> {
        self.outputs.pop_front()
    }

    pub fn stats(&self) -> &SegmentStats {
        &self.stats
    }

    /// Frames the segment holds: in NIC buffers (handed, no `TxDone` yet)
    /// plus frames sent whole whose last bit has not reached every station.
    /// Frames inside the medium: in NIC buffers or still propagating.
    pub fn in_flight(&self) -> usize {
        self.nic_held() + self.signals.iter().filter(|s| s.live && s.pkt.is_some()).count()
    }

    /// Traffic frames (uid ≠ 0) the conservation ledger counts as inside
    /// the medium: in NIC buffers, or sent whole and not yet received by
    /// any station. Once one station has a frame it is there; what reaches
    /// the others later are copies ([`Segment::traffic_copies`]). Control
    /// frames (a RETHER token, ARP) are nobody's traffic.
    pub fn unreceived_in_flight(&self) -> usize {
        let traffic = |p: &Packet| p.meta.uid != 0;
        self.stations
            .iter()
            .filter(|s| s.nic.as_ref().is_some_and(traffic))
            .count()
            + self
                .signals
                .iter()
                .filter(|s| s.live && s.pkt.as_ref().is_some_and(traffic) && s.delivered == 0)
                .count()
    }

    /// Copies of traffic frames (uid ≠ 0) the medium delivered beyond the
    /// first station to receive each: what broadcast on a bus creates.
    pub fn traffic_copies(&self) -> u64 {
        self.traffic_copies
    }

    /// Traffic frames sent whole that no station received intact.
    pub fn traffic_unreceived(&self) -> u64 {
        self.traffic_unreceived
    }

    /// Frames in NIC buffers: handed and not yet finished with `TxDone`.
    pub fn nic_held(&self) -> usize {
        self.stations.iter().filter(|s| s.nic.is_some()).count()
    }

    // ---- event loop ----

    fn push(&mut self, at: Instant, station: usize, kind: EvKind) {
        self.seq += 1;
        self.events.push(Reverse(Event {
            at,
            class: kind.class(),
            station,
            seq: self.seq,
            kind,
        }));
    }

    /// Process events before `now` (and at `now` if `inclusive`).
    fn advance(&mut self, now: Instant, inclusive: bool) {
        while let Some(Reverse(top)) = self.events.peek() {
            if top.at > now || (!inclusive && top.at == now) {
                break;
            }
            let Some(Reverse(ev)) = self.events.pop() else {
                break;
            };
            self.now = ev.at;
            match ev.kind {
                EvKind::TxEnd { slot, serial } => self.on_tx_end(ev.at, slot, serial),
                EvKind::Depart { slot, serial } => self.on_depart(ev.at, ev.station, slot, serial),
                EvKind::Arrive { slot, serial } => self.on_arrive(ev.at, ev.station, slot, serial),
                EvKind::Gap { gen } => self.on_gap_end(ev.at, ev.station, gen),
                EvKind::BackoffEnd { gen } => self.on_backoff_end(ev.at, ev.station, gen),
                EvKind::Start { committed } => self.try_start(ev.at, ev.station, committed),
            }
        }
        self.now = self.now.max(now);
        self.stats.elapsed_ns = self.now.0;
    }

    fn trace(&mut self, at: Instant, station: usize, uid: u64, kind: TraceKind) {
        if let Some(t) = self.trace.as_mut() {
            if t.len() < self.trace_cap {
                t.push_back(Trace {
                    at,
                    station,
                    uid,
                    kind,
                });
            } else {
                self.stats.trace_dropped += 1;
            }
        }
    }

    fn signal(&self, slot: usize, serial: u64) -> Option<&Signal> {
        self.signals.get(slot).filter(|s| s.live && s.serial == serial)
    }

    // ---- MAC ----

    fn try_start(&mut self, now: Instant, s: usize, committed: bool) {
        let st = &self.stations[s];
        if !st.ready() {
            return;
        }
        if !(committed || st.defer == Defer::Idle) {
            // Waiting for carrier or a gap; the gap's end starts the frame.
            let others = !matches!(
                st.defer,
                Defer::Gap1 { was_tx: true } | Defer::Gap2 { was_tx: true }
            );
            if st.collisions == 0 && !st.deferral_counted && others {
                self.stations[s].deferral_counted = true;
                self.stats.stations[s].deferrals += 1;
            }
            return;
        }
        self.start_tx(now, s);
    }

    fn start_tx(&mut self, now: Instant, s: usize) {
        let n = self.stations.len();
        let Some(pkt) = self.stations[s].nic.as_ref() else {
            return;
        };
        let (uid, end) = (pkt.meta.uid, now + self.frame_time(pkt.len()));
        self.serial += 1;
        let serial = self.serial;
        let sig = Signal {
            live: true,
            serial,
            station: s,
            uid,
            start: now,
            end,
            ended: false,
            aborted: false,
            pkt: None,
            overlapped: Vec::new(),
            remaining: n,
            delivered: 0,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                let mut words = std::mem::take(&mut self.signals[slot].overlapped);
                words.clear();
                words.resize(n.div_ceil(64), 0);
                self.signals[slot] = Signal {
                    overlapped: words,
                    ..sig
                };
                slot
            }
            None => {
                self.signals.push(Signal {
                    overlapped: vec![0; n.div_ceil(64)],
                    ..sig
                });
                self.signals.len() - 1
            }
        };
        let st = &mut self.stations[s];
        st.tx = Some(slot);
        let attempt = st.collisions + 1;
        self.stats.stations[s].attempts += 1;
        self.spans.push_back(Span {
            serial,
            start: now,
            end: None,
        });
        self.trace(now, s, uid, TraceKind::Start { attempt });
        self.push(end, s, EvKind::TxEnd { slot, serial });
        let pos = self.stations[s].pos;
        for j in 0..n {
            if j != s {
                let at = now + Duration(pos.abs_diff(self.stations[j].pos));
                self.push(at, j, EvKind::Arrive { slot, serial });
            }
        }
        // The station hears its own signal at once.
        self.on_arrive(now, s, slot, serial);
    }

    fn on_arrive(&mut self, now: Instant, j: usize, slot: usize, serial: u64) {
        let Some(sig) = self.signal(slot, serial) else {
            return;
        };
        let own = sig.station == j;
        let st = &mut self.stations[j];
        if !st.present.is_empty() {
            // Overlap at j: every signal here now, and the newcomer, is
            // a fragment for j.
            for &p in &st.present {
                self.signals[p].mark_overlapped(j);
            }
            self.signals[slot].mark_overlapped(j);
        }
        st.present.push(slot);
        // Deference: carrier rises.
        if own {
            st.defer = Defer::Carrier { was_tx: true };
            st.gap_gen += 1;
        } else {
            match st.defer {
                Defer::Idle => st.defer = Defer::Carrier { was_tx: false },
                Defer::Gap1 { was_tx: false } => {
                    st.defer = Defer::Carrier { was_tx: false };
                    st.gap_gen += 1;
                }
                // Already deferring, or in the part of the gap that ignores
                // carrier (the gap's end looks at the carrier again).
                Defer::Carrier { .. } | Defer::Gap1 { was_tx: true } | Defer::Gap2 { .. } => {}
            }
        }
        // Collision detection: the station sends and hears another signal.
        if let Some(tx) = st.tx {
            if st.present.len() >= 2 && !self.signals[tx].aborted {
                self.detect_collision(now, j, tx);
            }
        }
    }

    fn detect_collision(&mut self, now: Instant, s: usize, tx: usize) {
        let (start, uid, serial) = {
            let sig = &self.signals[tx];
            (sig.start, sig.uid, sig.serial)
        };
        let st = &mut self.stations[s];
        st.collisions += 1;
        let collisions = st.collisions;
        let late = now > start + self.times.preamble + self.times.slot;
        let c = &mut self.stats.stations[s];
        c.collisions += 1;
        if late {
            c.late_collisions += 1;
        }
        // The preamble is always completed, then the jam is sent.
        let end = now.max(start + self.times.preamble) + self.times.jam;
        let sig = &mut self.signals[tx];
        sig.aborted = true;
        sig.end = end;
        self.trace(now, s, uid, TraceKind::Collision { collisions, late });
        self.push(end, s, EvKind::TxEnd { slot: tx, serial });
    }

    fn on_tx_end(&mut self, now: Instant, slot: usize, serial: u64) {
        let Some(sig) = self.signal(slot, serial) else {
            return;
        };
        if sig.ended || sig.end != now {
            return; // superseded by a collision's earlier or later end
        }
        let (s, uid, aborted, start) = (sig.station, sig.uid, sig.aborted, sig.start);
        self.signals[slot].ended = true;
        self.stations[s].tx = None;
        self.trace(now, s, uid, TraceKind::End { aborted });
        self.close_span(serial, now, aborted);
        if aborted {
            let st = &mut self.stations[s];
            if st.collisions >= self.cfg.attempt_limit {
                st.nic = None;
                st.collisions = 0;
                self.stats.stations[s].excessive_collisions += 1;
                self.outputs.push_back(SegOutput::TxDone {
                    station: s,
                    status: TxStatus::ExcessiveCollisions,
                    at: now,
                    started: start,
                });
            } else {
                let k = st.collisions.min(self.cfg.backoff_limit);
                let slots = self.rng.gen_range(0..1u64 << k);
                let until = now + Duration(self.times.slot.0.saturating_mul(slots));
                st.backing_off = true;
                st.backoff_gen += 1;
                let gen = st.backoff_gen;
                self.trace(now, s, uid, TraceKind::Backoff { slots, until });
                self.push(until, s, EvKind::BackoffEnd { gen });
            }
        } else {
            let st = &mut self.stations[s];
            let collisions = st.collisions;
            st.collisions = 0;
            if let Some(pkt) = st.nic.take() {
                let c = &mut self.stats.stations[s];
                c.frames_sent += 1;
                c.bytes_sent += pkt.len() as u64;
                self.stats.good_ns += (now - start).0;
                self.signals[slot].pkt = Some(pkt);
            }
            self.outputs.push_back(SegOutput::TxDone {
                station: s,
                status: TxStatus::Sent { collisions },
                at: now,
                started: start,
            });
        }
        // The signal leaves its sender now and every other station later.
        let pos = self.stations[s].pos;
        for j in 0..self.stations.len() {
            if j != s {
                let at = now + Duration(pos.abs_diff(self.stations[j].pos));
                self.push(at, j, EvKind::Depart { slot, serial });
            }
        }
        self.on_depart(now, s, slot, serial);
    }

    fn on_depart(&mut self, now: Instant, j: usize, slot: usize, serial: u64) {
        let Some(sig) = self.signal(slot, serial) else {
            return;
        };
        let sender = sig.station;
        let intact = !sig.aborted && !sig.overlapped_at(j);
        let st = &mut self.stations[j];
        if let Some(i) = st.present.iter().position(|&p| p == slot) {
            st.present.swap_remove(i);
        }
        if st.present.is_empty() {
            // Carrier drops: time the gap.
            if let Defer::Carrier { was_tx } = st.defer {
                st.defer = Defer::Gap1 { was_tx };
                st.gap_gen += 1;
                let gen = st.gap_gen;
                self.push(now + self.times.ifg1, j, EvKind::Gap { gen });
            }
        }
        if sender != j {
            if intact {
                // The last station the frame reaches takes it; the others
                // get copies.
                let sig = &mut self.signals[slot];
                let pkt = if sig.remaining == 1 {
                    sig.pkt.take()
                } else {
                    sig.pkt.clone()
                };
                if let Some(pkt) = pkt {
                    // The first station to receive the frame has the
                    // original; every later one a copy the medium made.
                    if sig.delivered > 0 && pkt.meta.uid != 0 {
                        self.traffic_copies += 1;
                    }
                    sig.delivered += 1;
                    self.stats.stations[j].frames_received += 1;
                    self.outputs.push_back(SegOutput::Deliver {
                        station: j,
                        pkt,
                        at: now,
                    });
                }
            } else {
                self.stats.stations[j].fragments_seen += 1;
            }
        }
        let sig = &mut self.signals[slot];
        sig.remaining -= 1;
        if sig.remaining == 0 {
            // Sent whole, but no station received it intact (a late
            // collision at every receiver): the frame is lost here.
            if sig.delivered == 0 && sig.pkt.is_some() && sig.uid != 0 {
                self.traffic_unreceived += 1;
            }
            sig.live = false;
            sig.pkt = None;
            self.free.push(slot);
        }
    }

    fn on_gap_end(&mut self, now: Instant, s: usize, gen: u64) {
        let st = &mut self.stations[s];
        if gen != st.gap_gen {
            return;
        }
        match st.defer {
            Defer::Gap1 { was_tx } => {
                st.defer = Defer::Gap2 { was_tx };
                st.gap_gen += 1;
                let gen = st.gap_gen;
                self.push(now + self.times.ifg2, s, EvKind::Gap { gen });
            }
            Defer::Gap2 { .. } => {
                st.defer = if st.present.is_empty() {
                    Defer::Idle
                } else {
                    Defer::Carrier { was_tx: false }
                };
                if st.ready() {
                    self.push(now, s, EvKind::Start { committed: true });
                }
            }
            Defer::Idle | Defer::Carrier { .. } => {}
        }
    }

    fn on_backoff_end(&mut self, now: Instant, s: usize, gen: u64) {
        let st = &mut self.stations[s];
        if gen != st.backoff_gen || !st.backing_off {
            return;
        }
        st.backing_off = false;
        if st.defer == Defer::Idle {
            self.push(now, s, EvKind::Start { committed: false });
        }
        // Otherwise the end of the gap starts the frame.
    }

    /// A signal ended: fold the spans that are complete, in start order,
    /// into the busy and collision unions.
    fn close_span(&mut self, serial: u64, end: Instant, aborted: bool) {
        if let Some(sp) = self.spans.iter_mut().find(|sp| sp.serial == serial) {
            sp.end = Some((end, aborted));
        }
        while let Some(Span {
            start,
            end: Some((end, aborted)),
            ..
        }) = self.spans.front()
        {
            let (start, end, aborted) = (*start, *end, *aborted);
            self.spans.pop_front();
            let from = start.max(self.busy_until);
            if end > from {
                self.stats.busy_ns += (end - from).0;
                self.busy_until = end;
            }
            if aborted {
                let from = start.max(self.coll_until);
                if end > from {
                    self.stats.collision_ns += (end - from).0;
                    self.coll_until = end;
                }
            }
        }
    }
}

/// Time of `bits` at `rate_bps`, rounded up to whole ns.
fn bit_time(bits: u64, rate_bps: u64) -> Duration {
    let ns = (bits as u128 * 1_000_000_000).div_ceil(rate_bps as u128);
    Duration(ns.min(u64::MAX as u128) as u64)
}
