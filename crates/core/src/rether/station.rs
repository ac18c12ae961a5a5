//! The RETHER station: Figure 1's modes and transitions as a sans-IO
//! [`Node`], with the token cycle of §2.2.3, admission at the token
//! (§2.3), failure handling and joins (§2.4), the session interface of
//! §3.1 and transparent NRT traffic (§3).
//!
//! Port 0 faces the segment and is half duplex: the station hands its NIC
//! one frame at a time and learns from [`Node::handle_tx_done`] that the
//! NIC's buffer drained — what §2.2.2 waits for before acknowledging a
//! switch, since software cannot recall a frame the NIC holds. With
//! [`StationConfig::host_port`], port 1 faces the host's own stack (a TAP
//! device in live mode): frames from it are the host's NRT traffic and
//! frames for the host go out on it. Without it, NRT traffic comes from
//! [`Node::handle_send`] and goes up as [`Event::Deliver`].
//!
//! **Keeping real time in step with the token's accounting.** The token's
//! ResidualTime is a soft clock charged with THT estimates (eq. 1, 2), not
//! with measured time. Two rules make the real interval between RT visits
//! one TRT, whatever the hardware's speed relative to the estimates:
//! 1. the first RT node starts a cycle no earlier than one TRT after it
//!    started the previous one (it holds the token until then);
//! 2. an RT visit lasts exactly its THT_RT: the holder passes the token
//!    so that its last bit arrives THT_RT after the visit began (waiting if
//!    it sent less than reserved, or nothing).
//!
//! With both, the k-th RT visit of every cycle starts Σ_{j<k} THT_RT_j
//! after the cycle's start, so each session is visited every TRT exactly
//! (up to medium latency jitter). NRT visits pass on as soon as they are
//! done; the time they leave unused in the accounting is idle time before
//! the next cycle. See `docs/rether-design.md`.
//!
//! **Beyond the paper: lost tokens.** §2.4's acknowledgement timer
//! handles a dead successor; qosnet first retransmits the token (a lost or
//! corrupted frame must not kill a live node — a successor that already
//! had it answers with a token acknowledgement) and declares the successor
//! dead only after [`StationConfig::pass_retries`]. Every station keeps
//! the newest token it heard; if no token frame is heard for longer than
//! any legitimate holding or recovery time ([`timing::silence_timeout`]),
//! the lowest-ranked live station (the silent holder excluded) regenerates
//! it from its copy in a new epoch. Every token carries (epoch, origin,
//! hop sequence); a station that hears a newer token than the one it holds
//! drops its own, so at most one survives.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use crate::node::{Duplex, Event, Ledger, Node, PortReport, Transmit, TxStatus, TxTally};
use crate::packet::{Meta, Packet};
use crate::time::{Duration, Instant};
use crate::wire::{self as eth, MacAddr};

use super::cycle::{self, AdmitError, Grant, Purpose};
use super::session::{FragOutcome, OutUnit, RxSession, RxUnit, SendError, SendState, SendStats, TxSession};
use super::timing::{self, TimingModel, MAX_FRAME};
use super::wire::{
    self as rw, Frame, Join, RtData, RtEntry, Stamp, SwitchAck, SwitchToCsma, SwitchToRether, Token,
    TokenAck, TokenId, WireError, FLAG_CYCLE_END, FLAG_REGENERATED, GROUP_MAC, MAX_NODES, NRT_PHASE,
};
use super::{NrtPolicy, SessionId, StationId, NO_STATION};

/// How a station starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Boot {
    /// §2.4: broadcast a join and listen for a token; assume CSMA mode if
    /// none is heard within [`StationConfig::join_wait`].
    #[default]
    Join,
    /// Start in CSMA mode at once (a whole segment booting together).
    Csma,
}

/// A station's parameters.
#[derive(Clone, Debug)]
pub struct StationConfig {
    pub name: String,
    pub id: StationId,
    pub mac: MacAddr,
    /// Every station on the segment, this one included: the N of §2.2.2
    /// whose acknowledgements an initiator waits for. Stations heard
    /// later (joins) are added.
    pub members: Vec<StationId>,
    /// MAC addresses of other stations known in advance; the others are
    /// learned from their control frames. RT data to a receiver whose MAC
    /// is unknown goes to the RETHER group address.
    pub peer_macs: Vec<(StationId, MacAddr)>,
    /// Bandwidth, eq. 7 overheads and t_token.
    pub timing: TimingModel,
    /// Token rotation time: the period of RT traffic.
    pub trt: Duration,
    /// Time per cycle set aside for NRT traffic (eq. 3). At least one
    /// maximum-size NRT visit, so NRT traffic cannot starve.
    pub t_nrt: Duration,
    pub nrt_policy: NrtPolicy,
    /// NRT queue limits (packets, bytes); beyond them frames are dropped
    /// and counted.
    pub nrt_queue_packets: usize,
    pub nrt_queue_bytes: usize,
    /// Port 1 faces the host's stack (live: a TAP device).
    pub host_port: bool,
    /// The host port's rate, for pacing frames to the host.
    pub host_rate_bps: u64,
    /// Unicast MACs delivered to the host besides the station's own. With
    /// a host port and an empty list, every unicast frame goes up (the
    /// host's stack filters, as behind a bridge port).
    pub host_macs: Vec<MacAddr>,
    pub host_queue_packets: usize,
    /// How long an initiator waits for acknowledgements, and how often it
    /// retries before declaring the silent nodes dead (§2.2.2).
    pub switch_ack_timeout: Duration,
    pub switch_retries: u32,
    /// §4.3's proposed optimisation: each node delays its acknowledgement
    /// by its rank times this, so acknowledgements do not collide. Zero
    /// (the paper's measurements) by default.
    pub ack_stagger: Duration,
    /// Slack on every failure timer for overruns (collisions with a join
    /// broadcast) and driver latency.
    pub ack_margin: Duration,
    /// Token retransmissions before a silent successor is declared dead.
    pub pass_retries: u32,
    /// Gap between successive stations' claims to regenerate a lost token;
    /// longer than a maximum frame, so a claim is heard before the next.
    pub claim_stagger: Duration,
    /// Copies of Switch-to-CSMA sent, so that one lost frame does not
    /// leave a station in RETHER mode.
    pub csma_repeats: u32,
    pub boot: Boot,
    /// Largest unit a receiver reassembles (bounds its memory).
    pub max_unit_bytes: u32,
    /// Most sessions open at once, and send/receive buffers per session.
    pub max_sessions: usize,
    pub max_buffers: usize,
    /// Visits kept for [`RetherStation::take_visits`] (0: none).
    pub trace_visits: usize,
    /// Pending driver and session events kept at most.
    pub max_events: usize,
}

impl StationConfig {
    /// The paper's 1995 station on a 10 Mb/s segment: TRT 33.33 ms (30
    /// frames/s video, §4.1), T_NRT from eq. 6 with X = 1 and 5 % NRT
    /// share (at least one maximum-size NRT packet), one packet per NRT
    /// visit (the prototype's policy).
    pub fn new(name: impl Into<String>, id: StationId, mac: MacAddr, members: Vec<StationId>) -> Self {
        let timing = TimingModel::paper_1995();
        let trt = Duration(33_333_333);
        let n = members.len().max(1) as u64;
        let eq6 = timing::paper_t_nrt_min(n, timing.t_token, 1, 5, trt);
        let one = timing
            .nrt_visit_max(NrtPolicy::OnePacket)
            .unwrap_or(Duration::ZERO);
        StationConfig {
            name: name.into(),
            id,
            mac,
            members,
            peer_macs: Vec::new(),
            timing,
            trt,
            t_nrt: eq6.max(one),
            nrt_policy: NrtPolicy::OnePacket,
            nrt_queue_packets: 1000,
            nrt_queue_bytes: 2 << 20,
            host_port: false,
            host_rate_bps: 1_000_000_000,
            host_macs: Vec::new(),
            host_queue_packets: 1000,
            switch_ack_timeout: Duration::from_millis(10),
            switch_retries: 3,
            ack_stagger: Duration::ZERO,
            ack_margin: Duration::from_millis(2),
            pass_retries: 2,
            claim_stagger: Duration::from_millis(2),
            csma_repeats: 2,
            boot: Boot::Join,
            max_unit_bytes: 1 << 20,
            max_sessions: 64,
            max_buffers: 64,
            trace_visits: 0,
            max_events: 4096,
        }
    }

    /// Refuse parameters the protocol cannot keep its promises with.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let e = |m: String| Err(ConfigError(format!("station {}: {m}", self.name)));
        if self.id == NO_STATION {
            return e("id 65535 is reserved".into());
        }
        if self.members.contains(&NO_STATION) {
            return e("member id 65535 is reserved".into());
        }
        if self.members.len() > MAX_NODES {
            return e(format!(
                "{} members; a token carries at most {MAX_NODES}",
                self.members.len()
            ));
        }
        let m = &self.timing;
        if m.rate_bps == 0 {
            return e("bandwidth must be positive".into());
        }
        if self.trt == Duration::ZERO || self.t_nrt >= self.trt {
            return e(format!("need 0 < T_NRT ({}) < TRT ({})", self.t_nrt, self.trt));
        }
        let min_token = m.wire_time(rw::TOKEN_FIXED + eth::ETH_HDR);
        if m.t_token < min_token {
            return e(format!(
                "t_token {} is shorter than a token frame's wire time {}",
                m.t_token, min_token
            ));
        }
        let one = m.nrt_visit_max(NrtPolicy::OnePacket).unwrap_or(Duration::ZERO);
        if self.t_nrt < one {
            return e(format!(
                "T_NRT {} is below one maximum-size NRT visit ({}): NRT traffic could starve",
                self.t_nrt, one
            ));
        }
        if self.claim_stagger <= m.wire_time(MAX_FRAME) {
            return e(format!(
                "claim_stagger {} must exceed a maximum frame's wire time {}",
                self.claim_stagger,
                m.wire_time(MAX_FRAME)
            ));
        }
        if self.ack_margin == Duration::ZERO || self.switch_ack_timeout == Duration::ZERO {
            return e("ack_margin and switch_ack_timeout must be positive".into());
        }
        if self.nrt_queue_packets == 0 || self.nrt_queue_bytes < MAX_FRAME || self.host_queue_packets == 0 {
            return e("queues must hold at least one maximum-size frame".into());
        }
        if self.host_port && self.host_rate_bps == 0 {
            return e("host port rate must be positive".into());
        }
        if self.max_buffers == 0 || self.max_sessions == 0 || self.max_events == 0 {
            return e("max_buffers, max_sessions and max_events must be positive".into());
        }
        Ok(())
    }

    /// How long a token may go unheard before it is declared lost
    /// ([`timing::silence_timeout`]); also how long a joining node listens
    /// before it assumes CSMA mode.
    pub fn silence_timeout(&self) -> Duration {
        timing::silence_timeout(self.trt, self.t_nrt, self.ack_margin)
    }
    /// §2.4: a booting node that hears no token in this long assumes CSMA
    /// mode. Every token frame is multicast, so hearing one — not being
    /// visited — is what tells it the segment is in RETHER mode.
    pub fn join_wait(&self) -> Duration {
        self.silence_timeout()
    }
    /// How long a node that acknowledged a switch waits for the token: the
    /// initiator's retries, then one silence timeout.
    pub fn first_token_wait(&self) -> Duration {
        Duration(
            self.switch_ack_timeout
                .0
                .saturating_mul(self.switch_retries as u64),
        ) + self.last_switch_wait()
            + self.silence_timeout()
    }
    /// How long an initiator waits after its last switch message before
    /// it declares the silent stations dead: long enough for a NIC that
    /// was deep in backoff when the message came to send what it held and
    /// then the acknowledgement. Declared dead sooner, such a station's
    /// late CSMA frame, acknowledgement and join fell into the first
    /// token cycles and delayed an admitted session's visit by 0.7 ms (a
    /// property test found it).
    pub fn last_switch_wait(&self) -> Duration {
        self.switch_ack_timeout
            .max(self.timing.nic_hold_max() + self.ack_margin)
    }
}

/// A refused configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

/// Why a session call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionError {
    UnknownSession,
    /// Only the sending station admits or sends.
    NotSender,
    /// The receiver id is this station or reserved.
    BadReceiver,
    BadReservation,
    /// Zero buffers or more than [`StationConfig::max_buffers`].
    BadBuffers,
    TooManySessions,
    AlreadyOpen,
    /// Not possible in this state (admitting an admitted session, ...).
    WrongState(SendState),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::UnknownSession => write!(f, "no such session at this station"),
            SessionError::NotSender => write!(f, "only the sending station admits or sends on a session"),
            SessionError::BadReceiver => write!(f, "the receiver is this station or a reserved id"),
            SessionError::BadReservation => {
                write!(f, "the reservation must be at least one byte per token cycle")
            }
            SessionError::BadBuffers => write!(f, "a session has 1 to the station's max_buffers buffers"),
            SessionError::TooManySessions => write!(f, "this station has as many sessions open as it may"),
            SessionError::AlreadyOpen => write!(f, "the session is already open"),
            SessionError::WrongState(s) => write!(f, "not possible while the session is {s:?}"),
        }
    }
}

/// What a station tells the application side besides frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    /// Admission decided at the token: sends from `start_cycle`.
    Admitted { session: SessionId, start_cycle: u32 },
    /// Admission refused, with eq. 3's figures.
    Refused { session: SessionId, reason: AdmitError },
    /// The session left the RT set (close completed at the token).
    Closed { session: SessionId, stats: SendStats },
    /// An admitted session is no longer in the token (this node was
    /// declared dead, or a regenerated token predates the admission).
    Revoked { session: SessionId },
    /// A send buffer was emptied at an RT visit.
    BufferFree { session: SessionId },
    /// A unit (complete or not) is ready for `recv`.
    UnitReady { session: SessionId },
    /// The station's mode changed.
    ModeChanged { mode: ModeKind, at: Instant },
    /// This station completed a switch to RETHER mode and created the
    /// token, `switch_time` after it became an initiator (Figure 4).
    TokenCreated { at: Instant, switch_time: Duration },
}

/// The mode of Figure 1 a station is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeKind {
    Csma,
    /// Booting: listening for a token (§2.4).
    Joining,
    /// Broadcast Switch-to-RETHER, collecting acknowledgements.
    Initiating,
    /// Acknowledged a switch, waiting for the token.
    Switching,
    Rether,
}

/// One token visit, for tracing (RT visit jitter, Figure 2's sequence).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Visit {
    /// When the visit began (for an RT visit: its slot's start).
    pub at: Instant,
    pub cycle: u32,
    pub kind: VisitKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VisitKind {
    /// This station, the first RT node, starts a cycle at `at` after
    /// holding the token for `gate_wait` (rule 1 of the module docs).
    CycleStart {
        gate_wait: Duration,
    },
    Rt {
        session: SessionId,
        bytes: u32,
    },
    Nrt {
        frames: u32,
    },
    NrtIdle,
    /// Not enough time left: the token went back to the first RT node.
    NrtRefused,
}

macro_rules! counters {
    ($($v:ident => $n:literal,)*) => {
        /// The station's counters (see [`RetherStation::counter`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Ctr { $($v,)* }
        impl Ctr {
            pub const ALL: &'static [Ctr] = &[$(Ctr::$v,)*];
            pub fn name(self) -> &'static str {
                match self { $(Ctr::$v => $n,)* }
            }
        }
    };
}

counters! {
    ModeToRether => "mode_to_rether",
    ModeToCsma => "mode_to_csma",
    Initiations => "initiations",
    SwitchRetries => "switch_retries",
    InitiatorWithdrawn => "initiator_withdrawn",
    InitiatorYielded => "initiator_yielded",
    InitiatorAbandoned => "initiator_abandoned",
    SwitchIgnored => "switch_ignored",
    SwitchAcksSent => "switch_acks_sent",
    SwitchAcksReceived => "switch_acks_received",
    SwitchNonResponders => "switch_nonresponders_dead",
    SwitchAbandoned => "switch_abandoned",
    TokensCreated => "tokens_created",
    TokenReceived => "token_received",
    TokenVisits => "token_visits",
    CycleStarts => "cycle_starts",
    GateWaits => "gate_waits",
    RtVisits => "rt_visits",
    RtVisitsIdle => "rt_visits_idle",
    RtSlotOverruns => "rt_slot_overruns",
    NrtVisits => "nrt_visits",
    NrtVisitsIdle => "nrt_visits_idle",
    NrtRefusals => "nrt_refusals",
    TokenPasses => "token_passes",
    TokenWireOverTToken => "token_wire_over_t_token",
    TokenMisrouted => "token_misrouted",
    TokenShown => "token_shown_alone",
    AckTimeouts => "ack_timeouts",
    TokenRetransmits => "token_retransmits",
    SuccessorsDead => "successors_declared_dead",
    MonitorReleased => "monitor_released",
    TokenAcksSent => "token_acks_sent",
    TokenAcksReceived => "token_acks_received",
    TokenRegenerations => "token_regenerations",
    DuplicateTokensDropped => "duplicate_tokens_dropped",
    StaleTokensIgnored => "stale_tokens_ignored",
    ForeignTrtTokensDropped => "foreign_trt_tokens_dropped",
    TokenAdopted => "token_adopted",
    TokensDestroyed => "tokens_destroyed",
    SwitchToCsmaSent => "switch_to_csma_sent",
    SwitchToCsmaReceived => "switch_to_csma_received",
    StaleCsmaIgnored => "stale_switch_to_csma_ignored",
    JoinsSent => "joins_sent",
    JoinsHeard => "joins_heard",
    JoinsApplied => "joins_applied",
    JoinTimeouts => "join_timeouts_to_csma",
    NodeTableFull => "node_table_full",
    AdmissionRequests => "admission_requests",
    AdmissionAccepts => "admission_accepts",
    AdmissionRefusals => "admission_refusals",
    SessionsClosed => "sessions_closed",
    SessionsRevoked => "sessions_revoked",
    StaleEntriesRemoved => "stale_entries_removed",
    RtFramesSent => "rt_frames_sent",
    RtBytesSent => "rt_bytes_sent",
    RtFramesFailed => "rt_frames_tx_failed",
    RtFramesRx => "rt_frames_rx",
    RtNoSession => "rt_rx_no_session",
    RtNotForUs => "rt_rx_not_for_us",
    RtRejected => "rt_rx_rejected",
    RtUnitsReady => "rt_units_ready",
    NrtQueued => "nrt_queued",
    NrtQueueDrops => "nrt_queue_drops",
    NrtSent => "nrt_sent",
    NrtTxFailed => "nrt_tx_failed",
    NrtDelivered => "nrt_delivered",
    NrtNotForUs => "nrt_not_for_us",
    HostRx => "host_rx",
    HostTx => "host_tx",
    HostQueueDrops => "host_queue_drops",
    RetherFromHostRefused => "rether_from_host_refused",
    ControlRx => "control_rx",
    ControlNotForUs => "control_not_for_us",
    ControlTxFailed => "control_tx_failed",
    CtrlQueueDrops => "control_queue_drops",
    OwnFramesIgnored => "own_frames_ignored",
    RxBadPort => "rx_bad_port",
    SpuriousTxDone => "spurious_tx_done",
    EventsDropped => "events_dropped",
    VisitTraceOverflow => "visit_trace_overflow",
    MembersFull => "members_full",
    RunLimit => "run_limit_hit",
}

/// Control and visit frames waiting for the NIC at most.
const SEG_QUEUE: usize = 64;

/// What the NIC holds, to know what its transmit-done finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutKind {
    Switch,
    SwitchAck,
    Join,
    Ctrl,
    TokenPass(Stamp),
    TokenRetransmit(Stamp),
    RtFrag { session: SessionId, bytes: u32 },
    NrtVisit,
    NrtCsma,
}

struct Outgoing {
    pkt: Packet,
    kind: OutKind,
}

struct Init {
    seq: u32,
    expect: BTreeSet<StationId>,
    acks: BTreeSet<StationId>,
    tries: u32,
    /// Armed when the Switch-to-RETHER left the NIC.
    deadline: Option<Instant>,
    /// The switch message reached the NIC: it can no longer be withdrawn.
    in_nic: bool,
    started: Instant,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum AckState {
    Due(Instant),
    Queued,
    Sent,
}

struct Acked {
    initiator: StationId,
    seq: u32,
    ack: AckState,
    wait_until: Option<Instant>,
}

enum Mode {
    Csma,
    Joining { until: Option<Instant> },
    Initiating(Init),
    Acked(Acked),
    Rether,
}

/// What the holder of the token does next.
enum Step {
    /// Begin a visit for the cursor's purpose at `at` (a cycle gate, the
    /// end of an own RT slot before an own next visit, or now).
    Visit { at: Instant },
    /// Sending the visit's RT units, first one first (as many as the
    /// reservation's bytes per TRT hold); the next visit is due at
    /// `next_at`.
    Rt {
        units: VecDeque<OutUnit>,
        next_at: Instant,
    },
    /// Sending `left` more NRT frames.
    Nrt { left: usize },
    /// Hold the token until `at`, then pass it.
    PassAt { at: Instant },
    /// The pass is with the NIC.
    Passing { frame: Vec<u8> },
}

struct Holding {
    token: Token,
    step: Step,
    /// A visit frame is queued or in the NIC.
    frame_out: bool,
    /// Received from a predecessor that has not heard us pass it on: if we
    /// keep it for a visit of our own, say so (a token acknowledgement).
    owe_ack: bool,
}

struct Monitor {
    frame: Vec<u8>,
    stamp: Stamp,
    successor: StationId,
    token: Token,
    /// `None` while a retransmission is with the NIC.
    deadline: Option<Instant>,
    tries: u32,
}

/// The newest token this station knows.
struct View {
    token: Token,
    /// Last time a frame of this token (or this station's own pass) was
    /// on the wire.
    heard_at: Instant,
    /// Whether this station is live in `token`, and its claim rank,
    /// taken once here ([`cycle::standing`]): the watchdog asks for the
    /// rank after every event, and the token in a view never changes (a
    /// new token is a new view).
    listed_alive: bool,
    claim_rank: Option<u64>,
}

impl View {
    fn new(token: Token, heard_at: Instant, me: StationId) -> View {
        let (listed_alive, claim_rank) = cycle::standing(&token, me);
        View {
            token,
            heard_at,
            listed_alive,
            claim_rank,
        }
    }
}

/// A RETHER station (see the module docs).
pub struct RetherStation {
    cfg: StationConfig,
    mode: Mode,
    nic: Option<OutKind>,
    seg_q: VecDeque<Outgoing>,
    nrt_q: VecDeque<Packet>,
    nrt_bytes: usize,
    host_q: VecDeque<Packet>,
    host_busy_until: Instant,
    known: BTreeMap<StationId, Option<MacAddr>>,
    pending_joins: BTreeSet<StationId>,
    view: Option<View>,
    max_epoch: u32,
    holding: Option<Holding>,
    /// Traffic frames (uid ≠ 0) heard and not kept: for the ledger.
    traffic_ignored: u64,
    monitor: Option<Monitor>,
    last_join_sent: Option<Instant>,
    switch_seq: u32,
    tx: BTreeMap<u16, TxSession>,
    next_num: u16,
    rx: BTreeMap<SessionId, RxSession>,
    last_rt_visit: BTreeMap<SessionId, Instant>,
    events: VecDeque<Event>,
    session_events: VecDeque<SessionEvent>,
    visits: VecDeque<Visit>,
    ctr: Vec<u64>,
    malformed: [u64; WireError::ALL.len()],
    /// The segment port's frames, counted when the NIC sent them.
    seg_tx: TxTally,
    host_tx_pkts: u64,
    host_tx_bytes: u64,
    host_tx_wire: u64,
    /// Start (token frame arrival) of an idle NRT visit whose pass has
    /// not left yet.
    idle_hop_from: Option<Instant>,
    /// Token passing time inside this station (Table 2's overhead): from
    /// the arrival of a token it has nothing to send on (an idle NRT
    /// visit) to the pass handed to the NIC.
    hop_local: HopSamples,
    /// The last token frame heard on the segment (its addressee, arrival,
    /// stamp, and whether it handed an NRT turn), and the frames heard
    /// since.
    last_token_heard: Option<(StationId, Instant, Stamp, bool)>,
    frames_since_token: u32,
    /// Token passing time on the wire, seen by this station: between a
    /// token frame handing another station an NRT turn and that station's
    /// pass, with no frame between (an idle visit), by the kernel's
    /// receive timestamps.
    hop_wire: HopSamples,
}

/// Samples of a time (ns), for min / percentiles / max.
#[derive(Clone, Debug, Default)]
pub struct HopSamples {
    samples: Vec<u32>,
    /// Samples beyond the kept ones (counted, not kept).
    pub overflow: u64,
}

/// Samples kept per series (the rest are counted in `overflow`).
const HOP_SAMPLES: usize = 1 << 16;

impl HopSamples {
    fn add(&mut self, d: Duration) {
        if self.samples.len() < HOP_SAMPLES {
            self.samples.push(d.as_nanos().min(u32::MAX as u64) as u32);
        } else {
            self.overflow += 1;
        }
    }
    /// The samples kept, in arrival order.
    pub fn samples(&self) -> &[u32] {
        &self.samples
    }
    /// (count, min, p50, p99, max) in ns; `None` without samples.
    pub fn summary(&self) -> Option<(usize, u32, u32, u32, u32)> {
        let mut v = self.samples.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
        Some((v.len(), v[0], q(0.5), q(0.99), v[v.len() - 1]))
    }
}

impl RetherStation {
    pub fn new(cfg: StationConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let mut known: BTreeMap<StationId, Option<MacAddr>> =
            cfg.members.iter().map(|&id| (id, None)).collect();
        known.insert(cfg.id, Some(cfg.mac));
        for &(id, mac) in &cfg.peer_macs {
            if id != NO_STATION {
                known.insert(id, Some(mac));
            }
        }
        let mut st = RetherStation {
            mode: Mode::Csma,
            nic: None,
            seg_q: VecDeque::new(),
            nrt_q: VecDeque::new(),
            nrt_bytes: 0,
            host_q: VecDeque::new(),
            host_busy_until: Instant::ZERO,
            known,
            pending_joins: BTreeSet::new(),
            view: None,
            max_epoch: 0,
            holding: None,
            traffic_ignored: 0,
            monitor: None,
            last_join_sent: None,
            switch_seq: 0,
            tx: BTreeMap::new(),
            next_num: 0,
            rx: BTreeMap::new(),
            last_rt_visit: BTreeMap::new(),
            events: VecDeque::new(),
            session_events: VecDeque::new(),
            visits: VecDeque::new(),
            ctr: vec![0; Ctr::ALL.len()],
            malformed: [0; WireError::ALL.len()],
            seg_tx: TxTally::default(),
            host_tx_pkts: 0,
            host_tx_bytes: 0,
            host_tx_wire: 0,
            idle_hop_from: None,
            hop_local: HopSamples::default(),
            last_token_heard: None,
            frames_since_token: 0,
            hop_wire: HopSamples::default(),
            cfg,
        };
        if st.cfg.boot == Boot::Join {
            st.mode = Mode::Joining { until: None };
            st.queue_join(Instant::ZERO);
        }
        Ok(st)
    }

    // ----- accessors ---------------------------------------------------

    pub fn config(&self) -> &StationConfig {
        &self.cfg
    }
    pub fn id(&self) -> StationId {
        self.cfg.id
    }
    pub fn mode(&self) -> ModeKind {
        match self.mode {
            Mode::Csma => ModeKind::Csma,
            Mode::Joining { .. } => ModeKind::Joining,
            Mode::Initiating(_) => ModeKind::Initiating,
            Mode::Acked(_) => ModeKind::Switching,
            Mode::Rether => ModeKind::Rether,
        }
    }
    /// Whether this station holds the token now (a pass with the NIC does
    /// not count: the token is on its way).
    pub fn holds_token(&self) -> bool {
        self.holding
            .as_ref()
            .is_some_and(|h| !matches!(h.step, Step::Passing { .. }))
    }
    /// The newest token this station has heard, held or passed.
    pub fn token(&self) -> Option<&Token> {
        self.view.as_ref().map(|v| &v.token)
    }
    /// Whether this station watches a successor (§2.4's acknowledgement timer).
    pub fn monitoring(&self) -> Option<StationId> {
        self.monitor.as_ref().map(|m| m.successor)
    }
    pub fn counter(&self, c: Ctr) -> u64 {
        self.ctr[c as usize]
    }
    /// Control frames refused, by reason.
    pub fn malformed(&self, e: WireError) -> u64 {
        self.malformed[e.index()]
    }
    /// NRT frames waiting for the token.
    pub fn nrt_queued(&self) -> usize {
        self.nrt_q.len()
    }
    /// Visits recorded since the last call (needs `trace_visits`).
    /// Token passing time inside this station (idle NRT visits: token
    /// frame arrival to the pass handed to the NIC).
    pub fn hop_local(&self) -> &HopSamples {
        &self.hop_local
    }
    /// Token passing time on the wire as this station heard it (idle NRT
    /// visits of the others: token to the next token frame).
    pub fn hop_wire(&self) -> &HopSamples {
        &self.hop_wire
    }
    pub fn take_visits(&mut self) -> Vec<Visit> {
        self.visits.drain(..).collect()
    }
    /// When the session's last RT visit began.
    pub fn last_rt_visit(&self, s: SessionId) -> Option<Instant> {
        self.last_rt_visit.get(&s).copied()
    }

    fn inc(&mut self, c: Ctr) {
        self.ctr[c as usize] += 1;
    }
    fn add(&mut self, c: Ctr, n: u64) {
        self.ctr[c as usize] += n;
    }
    fn session_event(&mut self, e: SessionEvent) {
        if self.session_events.len() >= self.cfg.max_events {
            self.session_events.pop_front();
            self.inc(Ctr::EventsDropped);
        }
        self.session_events.push_back(e);
    }
    fn trace(&mut self, at: Instant, cycle: u32, kind: VisitKind) {
        if self.cfg.trace_visits == 0 {
            return;
        }
        if self.visits.len() >= self.cfg.trace_visits {
            self.visits.pop_front();
            self.inc(Ctr::VisitTraceOverflow);
        }
        self.visits.push_back(Visit { at, cycle, kind });
    }

    // ----- session API (§3.1) --------------------------------------------

    /// `retherOpenRTsession` for a sender: a session to `receiver`
    /// reserving `bytes_per_trt` per TRT, with `buffers` send buffers.
    /// Returns the session id the receiver opens with.
    pub fn open_sender(
        &mut self,
        receiver: StationId,
        bytes_per_trt: u32,
        buffers: usize,
    ) -> Result<SessionId, SessionError> {
        if receiver == NO_STATION || receiver == self.cfg.id {
            return Err(SessionError::BadReceiver);
        }
        if bytes_per_trt == 0 {
            return Err(SessionError::BadReservation);
        }
        if buffers == 0 || buffers > self.cfg.max_buffers {
            return Err(SessionError::BadBuffers);
        }
        if self.tx.len() + self.rx.len() >= self.cfg.max_sessions {
            return Err(SessionError::TooManySessions);
        }
        let mut num = self.next_num;
        while self.tx.contains_key(&num) {
            num = num.wrapping_add(1);
        }
        self.next_num = num.wrapping_add(1);
        let id = SessionId {
            sender: self.cfg.id,
            num,
        };
        let tht = self.cfg.timing.tht_rt(bytes_per_trt);
        self.tx
            .insert(num, TxSession::new(id, receiver, bytes_per_trt, tht, buffers));
        Ok(id)
    }

    /// `retherOpenRTsession` for a receiver of `session`.
    pub fn open_receiver(&mut self, session: SessionId, buffers: usize) -> Result<(), SessionError> {
        if session.sender == NO_STATION || session.sender == self.cfg.id {
            return Err(SessionError::BadReceiver);
        }
        if buffers == 0 || buffers > self.cfg.max_buffers {
            return Err(SessionError::BadBuffers);
        }
        if self.rx.contains_key(&session) {
            return Err(SessionError::AlreadyOpen);
        }
        if self.tx.len() + self.rx.len() >= self.cfg.max_sessions {
            return Err(SessionError::TooManySessions);
        }
        self.rx.insert(session, RxSession::new(session, buffers));
        Ok(())
    }

    /// `retherAdmit`: ask for admission, decided when the token next
    /// visits this station (`SessionEvent::Admitted`/`Refused`, or
    /// [`session_state`](Self::session_state)). The first request on a
    /// CSMA segment makes this station an initiator.
    pub fn admit(&mut self, now: Instant, session: SessionId) -> Result<(), SessionError> {
        let s = self.sender_mut(session)?;
        match s.state {
            SendState::Opened | SendState::Refused(_) | SendState::Revoked => s.state = SendState::Pending,
            st => return Err(SessionError::WrongState(st)),
        }
        self.inc(Ctr::AdmissionRequests);
        if matches!(self.mode, Mode::Csma) {
            self.initiate(now);
        }
        Ok(())
    }

    /// Where a sending session stands.
    pub fn session_state(&self, session: SessionId) -> Option<SendState> {
        (session.sender == self.cfg.id)
            .then(|| self.tx.get(&session.num).map(|s| s.state))
            .flatten()
    }

    /// Non-blocking `retherSend`: queue one unit (at most the reservation)
    /// for the next RT visit.
    pub fn send(&mut self, session: SessionId, unit: Vec<u8>) -> Result<(), SendError> {
        match self.sender_mut(session) {
            Ok(s) => s.send(unit),
            Err(_) => Err(SendError::UnknownSession),
        }
    }

    /// Non-blocking `retherRecv`: the oldest unread unit, complete or not.
    pub fn recv(&mut self, session: SessionId) -> Option<RxUnit> {
        self.rx.get_mut(&session)?.recv()
    }

    /// `retherCloseRTsession`. An admitted session leaves the RT set at
    /// the next token visit (`SessionEvent::Closed`); others close now.
    /// Units not yet sent are dropped (counted in the session's stats).
    pub fn close(&mut self, _now: Instant, session: SessionId) -> Result<(), SessionError> {
        if session.sender != self.cfg.id {
            return self
                .rx
                .remove(&session)
                .map(|_| ())
                .ok_or(SessionError::UnknownSession);
        }
        let s = self.sender_mut(session)?;
        match s.state {
            SendState::Admitted { .. } => {
                s.state = SendState::Closing;
                Ok(())
            }
            SendState::Closing => Err(SessionError::WrongState(SendState::Closing)),
            _ => {
                if let Some(mut s) = self.tx.remove(&session.num) {
                    s.drop_queued();
                    self.inc(Ctr::SessionsClosed);
                    self.session_event(SessionEvent::Closed {
                        session,
                        stats: s.stats,
                    });
                }
                Ok(())
            }
        }
    }

    pub fn send_stats(&self, session: SessionId) -> Option<SendStats> {
        (session.sender == self.cfg.id)
            .then(|| self.tx.get(&session.num).map(|s| s.stats))
            .flatten()
    }
    pub fn recv_stats(&self, session: SessionId) -> Option<super::session::RecvStats> {
        self.rx.get(&session).map(|s| s.stats)
    }
    /// Received bytes held in a receiver's buffers and reassembly.
    pub fn recv_bytes_held(&self, session: SessionId) -> Option<u64> {
        self.rx.get(&session).map(|s| s.bytes_held())
    }
    /// A sending session's reservation, bytes per TRT.
    pub fn reservation(&self, session: SessionId) -> Option<u32> {
        (session.sender == self.cfg.id)
            .then(|| self.tx.get(&session.num).map(|s| s.bytes_per_trt))
            .flatten()
    }
    pub fn free_buffers(&self, session: SessionId) -> Option<usize> {
        (session.sender == self.cfg.id)
            .then(|| self.tx.get(&session.num).map(|s| s.free_buffers()))
            .flatten()
    }
    pub fn ready_units(&self, session: SessionId) -> Option<usize> {
        self.rx.get(&session).map(|s| s.ready_units())
    }
    /// Sending sessions of this station and their states.
    pub fn sessions(&self) -> Vec<(SessionId, SendState)> {
        self.tx.values().map(|s| (s.id, s.state)).collect()
    }
    pub fn poll_session_event(&mut self) -> Option<SessionEvent> {
        self.session_events.pop_front()
    }

    fn sender_mut(&mut self, session: SessionId) -> Result<&mut TxSession, SessionError> {
        if session.sender != self.cfg.id {
            return Err(SessionError::NotSender);
        }
        self.tx.get_mut(&session.num).ok_or(SessionError::UnknownSession)
    }

    // ----- frames out ------------------------------------------------------

    fn frame(&self, dst: MacAddr, f: &Frame<'_>) -> Option<Vec<u8>> {
        rw::build(self.cfg.mac, dst, f).ok()
    }

    fn push_seg(&mut self, data: Vec<u8>, kind: OutKind, now: Instant) {
        if self.seg_q.len() >= SEG_QUEUE {
            self.inc(Ctr::CtrlQueueDrops);
            return;
        }
        let meta = Meta {
            arrival: now,
            ..Meta::default()
        };
        self.seg_q.push_back(Outgoing {
            pkt: Packet::new(data, meta),
            kind,
        });
    }

    fn queue_join(&mut self, now: Instant) {
        if let Some(f) = self.frame(MacAddr::BROADCAST, &Frame::Join(Join { sender: self.cfg.id })) {
            self.push_seg(f, OutKind::Join, now);
            self.last_join_sent = Some(now);
            self.inc(Ctr::JoinsSent);
        }
    }

    fn queue_token_ack(&mut self, now: Instant, stamp: Stamp) {
        let a = TokenAck {
            sender: self.cfg.id,
            stamp,
        };
        if let Some(f) = self.frame(GROUP_MAC, &Frame::TokenAck(a)) {
            self.push_seg(f, OutKind::Ctrl, now);
            self.inc(Ctr::TokenAcksSent);
        }
    }

    fn learn(&mut self, id: StationId, mac: Option<MacAddr>) {
        if let Some(e) = self.known.get_mut(&id) {
            if mac.is_some() {
                *e = mac;
            }
        } else if self.known.len() < MAX_NODES {
            self.known.insert(id, mac);
        } else {
            self.inc(Ctr::MembersFull);
        }
    }

    fn set_mode(&mut self, now: Instant, mode: Mode) {
        let before = self.mode();
        self.mode = mode;
        let after = self.mode();
        if before != after {
            match after {
                ModeKind::Rether => self.inc(Ctr::ModeToRether),
                ModeKind::Csma => self.inc(Ctr::ModeToCsma),
                _ => {}
            }
            self.session_event(SessionEvent::ModeChanged { mode: after, at: now });
        }
        if after == ModeKind::Csma {
            self.holding = None;
            self.monitor = None;
            // No token, no reservation: admitted sessions are revoked and
            // closes are complete.
            let ids: Vec<(u16, SendState)> = self.tx.values().map(|s| (s.id.num, s.state)).collect();
            for (num, state) in ids {
                let session = SessionId {
                    sender: self.cfg.id,
                    num,
                };
                match state {
                    SendState::Admitted { .. } => {
                        if let Some(s) = self.tx.get_mut(&num) {
                            s.state = SendState::Revoked;
                            s.drop_queued();
                        }
                        self.inc(Ctr::SessionsRevoked);
                        self.session_event(SessionEvent::Revoked { session });
                    }
                    SendState::Closing => {
                        if let Some(mut s) = self.tx.remove(&num) {
                            s.drop_queued();
                            self.inc(Ctr::SessionsClosed);
                            self.session_event(SessionEvent::Closed {
                                session,
                                stats: s.stats,
                            });
                        }
                    }
                    _ => {}
                }
            }
            // Requests that were waiting for a token that is gone start a
            // switch of their own.
            if self.tx.values().any(|s| s.state == SendState::Pending) {
                self.initiate(now);
            }
        }
    }

    // ----- switching (§2.2.2) -----------------------------------------------

    fn initiate(&mut self, now: Instant) {
        if !matches!(self.mode, Mode::Csma) {
            return;
        }
        self.switch_seq = self.switch_seq.wrapping_add(1);
        let expect: BTreeSet<StationId> = self.known.keys().copied().filter(|&k| k != self.cfg.id).collect();
        self.mode = Mode::Initiating(Init {
            seq: self.switch_seq,
            expect,
            acks: BTreeSet::new(),
            tries: 0,
            deadline: None,
            in_nic: false,
            started: now,
        });
        self.session_event(SessionEvent::ModeChanged {
            mode: ModeKind::Initiating,
            at: now,
        });
        self.inc(Ctr::Initiations);
        self.queue_switch(now);
    }

    fn queue_switch(&mut self, now: Instant) {
        let Mode::Initiating(init) = &self.mode else {
            return;
        };
        let s = SwitchToRether {
            sender: self.cfg.id,
            switch_seq: init.seq,
            acked: init.acks.iter().copied().take(MAX_NODES).collect(),
        };
        if let Some(f) = self.frame(MacAddr::BROADCAST, &Frame::SwitchToRether(s)) {
            self.push_seg(f, OutKind::Switch, now);
        }
    }

    /// Acknowledge initiator `i` once the NIC has drained (the ack queues
    /// behind whatever the NIC holds; no NRT frame is handed to the NIC
    /// outside CSMA mode), after the optional stagger.
    fn ack_switch(&mut self, now: Instant, i: StationId, seq: u32) {
        let rank = self
            .known
            .keys()
            .filter(|&&k| k != i)
            .position(|&k| k == self.cfg.id)
            .unwrap_or(0) as u64;
        let due = now + Duration(self.cfg.ack_stagger.0.saturating_mul(rank));
        let from_csma = !matches!(self.mode, Mode::Acked(_));
        self.mode = Mode::Acked(Acked {
            initiator: i,
            seq,
            ack: AckState::Due(due),
            wait_until: None,
        });
        if from_csma {
            self.session_event(SessionEvent::ModeChanged {
                mode: ModeKind::Switching,
                at: now,
            });
        }
        self.ack_timers(now);
    }

    fn ack_timers(&mut self, now: Instant) {
        let Mode::Acked(a) = &mut self.mode else {
            return;
        };
        if let AckState::Due(t) = a.ack {
            if t <= now {
                a.ack = AckState::Queued;
                let f = SwitchAck {
                    sender: self.cfg.id,
                    initiator: a.initiator,
                    switch_seq: a.seq,
                };
                if let Some(b) = self.frame(GROUP_MAC, &Frame::SwitchAck(f)) {
                    self.push_seg(b, OutKind::SwitchAck, now);
                    self.inc(Ctr::SwitchAcksSent);
                }
            }
        }
    }

    fn on_switch(&mut self, now: Instant, s: &SwitchToRether) {
        enum Act {
            Ignore,
            Ack,
            Withdraw,
            Yield,
        }
        let me = self.cfg.id;
        let act = match &self.mode {
            Mode::Rether => Act::Ignore,
            Mode::Csma | Mode::Joining { .. } => Act::Ack,
            // Our own switch message is still ours to take back.
            Mode::Initiating(init) if !init.in_nic => Act::Withdraw,
            // §2.2.2: the smaller id has priority.
            Mode::Initiating(_) if s.sender < me => Act::Yield,
            Mode::Initiating(_) => Act::Ignore,
            // A smaller initiator, or a retry of ours that lacks our ack.
            Mode::Acked(a)
                if s.sender < a.initiator
                    || (s.sender == a.initiator && a.ack == AckState::Sent && !s.acked.contains(&me)) =>
            {
                Act::Ack
            }
            Mode::Acked(_) => Act::Ignore,
        };
        match act {
            Act::Ignore => self.inc(Ctr::SwitchIgnored),
            Act::Ack => self.ack_switch(now, s.sender, s.switch_seq),
            Act::Withdraw => {
                self.seg_q.retain(|o| o.kind != OutKind::Switch);
                self.inc(Ctr::InitiatorWithdrawn);
                self.ack_switch(now, s.sender, s.switch_seq);
            }
            Act::Yield => {
                self.inc(Ctr::InitiatorYielded);
                self.ack_switch(now, s.sender, s.switch_seq);
            }
        }
    }

    fn on_switch_ack(&mut self, now: Instant, a: SwitchAck) {
        let me = self.cfg.id;
        let Mode::Initiating(init) = &mut self.mode else {
            return;
        };
        if a.initiator != me || a.switch_seq != init.seq {
            return;
        }
        init.acks.insert(a.sender);
        init.expect.insert(a.sender);
        self.inc(Ctr::SwitchAcksReceived);
        self.try_complete_switch(now);
    }

    fn try_complete_switch(&mut self, now: Instant) {
        let Mode::Initiating(init) = &self.mode else {
            return;
        };
        // Acknowledgements only come after our message went out, so with
        // all of them in, a retry still queued is withdrawn; one already
        // with the NIC finishes first (our NIC must be drained too).
        if !init.expect.is_subset(&init.acks) || self.nic == Some(OutKind::Switch) {
            return;
        }
        self.seg_q.retain(|o| o.kind != OutKind::Switch);
        self.create_token(now, BTreeSet::new());
    }

    fn init_timeout(&mut self, now: Instant) {
        let Mode::Initiating(init) = &mut self.mode else {
            return;
        };
        if init.deadline.is_none_or(|d| d > now) {
            return;
        }
        if init.tries < self.cfg.switch_retries {
            init.tries += 1;
            init.deadline = None;
            self.inc(Ctr::SwitchRetries);
            self.queue_switch(now);
        } else {
            let dead: BTreeSet<StationId> = init.expect.difference(&init.acks).copied().collect();
            self.add(Ctr::SwitchNonResponders, dead.len() as u64);
            self.create_token(now, dead);
        }
    }

    /// All acknowledgements are in (or the retries are over): create the
    /// token, the silent nodes on its dead list.
    fn create_token(&mut self, now: Instant, dead: BTreeSet<StationId>) {
        let Mode::Initiating(init) = &self.mode else {
            return;
        };
        let started = init.started;
        let me = self.cfg.id;
        self.max_epoch = self.max_epoch.wrapping_add(1);
        let nodes = self
            .known
            .keys()
            .take(MAX_NODES)
            .map(|&id| rw::NodeEntry {
                id,
                alive: !dead.contains(&id),
            })
            .collect();
        let token = Token {
            sender: me,
            to: me,
            id: TokenId {
                epoch: self.max_epoch,
                origin: me,
            },
            seq: 0,
            cycle: 0,
            residual: self.cfg.trt,
            trt: self.cfg.trt,
            t_nrt: self.cfg.t_nrt,
            flags: FLAG_CYCLE_END,
            rt_next: NRT_PHASE,
            nrt_resume: me,
            nodes,
            sessions: Vec::new(),
        };
        self.inc(Ctr::TokensCreated);
        self.session_event(SessionEvent::TokenCreated {
            at: now,
            switch_time: now - started,
        });
        self.set_mode(now, Mode::Rether);
        self.view = Some(View::new(token.clone(), now, self.cfg.id));
        self.holding = Some(Holding {
            token,
            step: Step::Visit { at: now },
            frame_out: false,
            owe_ack: false,
        });
        self.run_token(now);
    }

    // ----- receiving control frames -------------------------------------------

    fn on_token(&mut self, now: Instant, arrival: Instant, t: Token) {
        let me = self.cfg.id;
        // The TRT is the segment's (one `[rether] trt` for every station):
        // a token carrying another is not this segment's. Adopting it
        // would also trust its cycle budget: a token announcing a TRT of
        // 2^63 ns let a lone holder make 6.7 M idle NRT visits to itself
        // at one instant (the run_token guard hit 67 times for one frame;
        // found by the node fuzz target).
        if t.trt != self.cfg.trt {
            self.inc(Ctr::ForeignTrtTokensDropped);
            return;
        }
        let stamp = t.stamp();
        // The wire's token passing time: the previous frame handed `t`'s
        // sender an NRT turn, and nothing came between (an idle visit;
        // the count includes this frame).
        if let Some((to, at, prev, nrt)) = self.last_token_heard {
            if to == t.sender && nrt && prev < stamp && self.frames_since_token <= 1 {
                self.hop_wire.add(arrival.saturating_since(at));
            }
        }
        let nrt_turn = t.rt_next == NRT_PHASE && t.flags & FLAG_CYCLE_END == 0;
        self.last_token_heard = Some((t.to, arrival, stamp, nrt_turn));
        self.frames_since_token = 0;
        self.max_epoch = self.max_epoch.max(t.id.epoch);
        if let Some(v) = &mut self.view {
            let vs = v.token.stamp();
            if stamp <= vs {
                if t.id == v.token.id && matches!(self.mode, Mode::Csma) {
                    // A token we know was destroyed (its Switch-to-CSMA was
                    // lost where this frame comes from): say so again.
                    if t.to == me {
                        self.queue_csma(now, t.id);
                    }
                } else if t.id == v.token.id {
                    // Our lineage: a retransmission by a predecessor that
                    // missed a pass (layer-1 recovery in progress), or a
                    // repeat. The token is alive.
                    v.heard_at = now;
                    if t.to == me {
                        self.queue_token_ack(now, stamp);
                    }
                } else {
                    self.inc(Ctr::StaleTokensIgnored);
                }
                return;
            }
        }
        // A newer token than any we know.
        if let Some(h) = &self.holding {
            if h.token.stamp() < stamp {
                self.holding = None;
                self.inc(Ctr::DuplicateTokensDropped);
            }
        }
        if self.monitor.as_ref().is_some_and(|m| m.stamp < stamp) {
            // The piggybacked acknowledgement (§2.4): the token moved on.
            self.monitor = None;
            self.inc(Ctr::MonitorReleased);
        }
        self.pending_joins.retain(|&j| !cycle::is_alive(&t, j));
        let sender = t.sender;
        let to = t.to;
        let view = View::new(t, now, me);
        let listed_alive = view.listed_alive;
        // Only the addressee keeps a second copy: every station hears
        // every token, so a clone here was one more allocation and node
        // table copy per station per hop.
        let held = (to == me && listed_alive).then(|| view.token.clone());
        self.view = Some(view);
        match self.mode {
            Mode::Rether => {}
            Mode::Csma => {
                self.inc(Ctr::TokenAdopted);
                self.set_mode(now, Mode::Rether);
            }
            Mode::Initiating(_) => {
                self.inc(Ctr::InitiatorAbandoned);
                self.set_mode(now, Mode::Rether);
            }
            Mode::Joining { .. } | Mode::Acked(_) => self.set_mode(now, Mode::Rether),
        }
        if !listed_alive
            && self
                .last_join_sent
                .is_none_or(|t0| now.saturating_since(t0) >= self.cfg.trt)
        {
            // Dead-listed or unknown in a live segment: ask to be taken back.
            self.queue_join(now);
        }
        // The sender's visit is over: its units are complete or never will be.
        let done: Vec<SessionId> = self.rx.keys().copied().filter(|s| s.sender == sender).collect();
        for s in done {
            if self.rx.get_mut(&s).is_some_and(|r| r.handle_sender_done()) {
                self.unit_ready(s);
            }
        }
        if let Some(t) = held {
            self.inc(Ctr::TokenReceived);
            self.holding = Some(Holding {
                token: t,
                step: Step::Visit { at: arrival },
                frame_out: false,
                owe_ack: true,
            });
            self.run_token(now);
        }
    }

    fn on_token_ack(&mut self, now: Instant, a: TokenAck) {
        if let Some(v) = &mut self.view {
            // Our lineage, or a newer one announced by the station that
            // just regenerated or reconfigured it: the token is alive.
            if v.token.id == a.stamp.id || a.stamp > v.token.stamp() {
                v.heard_at = now;
            }
        }
        let hold = self
            .view
            .as_ref()
            .map(|v| timing::max_hold(v.token.trt, v.token.t_nrt, self.cfg.ack_margin));
        if let (Some(m), Some(hold)) = (self.monitor.as_mut(), hold) {
            if m.successor == a.sender && m.stamp.id == a.stamp.id && a.stamp.seq >= m.stamp.seq {
                // The successor has (or had) it and is alive: keep watching
                // for as long as any holder may keep a token.
                if m.deadline.is_some() {
                    m.deadline = Some(now + hold);
                }
                self.inc(Ctr::TokenAcksReceived);
            }
        }
    }

    fn on_csma(&mut self, now: Instant, s: SwitchToCsma) {
        self.max_epoch = self.max_epoch.max(s.id.epoch);
        if let Some(v) = &self.view {
            let theirs = Stamp {
                id: s.id,
                seq: u32::MAX,
            };
            let ours = Stamp {
                id: v.token.id,
                seq: 0,
            };
            if theirs < ours && !matches!(self.mode, Mode::Acked(_) | Mode::Initiating(_)) {
                self.inc(Ctr::StaleCsmaIgnored);
                return;
            }
        }
        if matches!(self.mode, Mode::Csma) {
            return;
        }
        self.inc(Ctr::SwitchToCsmaReceived);
        self.set_mode(now, Mode::Csma);
    }

    fn on_join(&mut self, _now: Instant, j: Join) {
        self.inc(Ctr::JoinsHeard);
        if matches!(self.mode, Mode::Rether) {
            if self.pending_joins.len() < MAX_NODES {
                self.pending_joins.insert(j.sender);
            } else {
                self.inc(Ctr::NodeTableFull);
            }
        }
    }

    fn on_rt_data(&mut self, now: Instant, d: RtData<'_>) {
        if d.receiver != self.cfg.id {
            self.inc(Ctr::RtNotForUs);
            return;
        }
        let wait = self.view.as_ref().map_or(self.cfg.trt, |v| v.token.trt);
        let max_unit = self.cfg.max_unit_bytes;
        let s = d.session();
        let Some(r) = self.rx.get_mut(&s) else {
            self.inc(Ctr::RtNoSession);
            return;
        };
        match r.handle_fragment(now, &d, wait, max_unit) {
            FragOutcome::Accepted => self.inc(Ctr::RtFramesRx),
            FragOutcome::Ready(n) => {
                self.inc(Ctr::RtFramesRx);
                for _ in 0..n {
                    self.unit_ready(s);
                }
            }
            FragOutcome::Duplicate | FragOutcome::Stale | FragOutcome::Inconsistent => {
                self.inc(Ctr::RtRejected)
            }
        }
    }

    fn unit_ready(&mut self, s: SessionId) {
        self.inc(Ctr::RtUnitsReady);
        self.session_event(SessionEvent::UnitReady { session: s });
    }

    // ----- the token (§2.2.3, §2.3) -------------------------------------------

    /// Drive the held token as far as it goes at `now`: visits, sends one
    /// frame at a time, slot waits and the pass.
    fn run_token(&mut self, now: Instant) {
        // Local visits charge the accounting, so this ends; the bound is a
        // guard against a bug spinning the driver.
        for _ in 0..100_000 {
            let Some(h) = self.holding.as_mut() else {
                return;
            };
            match &mut h.step {
                Step::Visit { at } => {
                    if *at > now {
                        return;
                    }
                    let start = *at;
                    self.visit(now, start);
                }
                Step::Rt { units, next_at } => {
                    if h.frame_out {
                        return;
                    }
                    let next_at = *next_at;
                    while units.front().is_some_and(|u| u.fragment().is_none()) {
                        units.pop_front();
                    }
                    if let Some(u) = units.front_mut() {
                        if let Some(frag) = u.fragment() {
                            let bytes = frag.payload.len() as u32;
                            let session = u.session;
                            let dst = self
                                .known
                                .get(&u.receiver)
                                .copied()
                                .flatten()
                                .unwrap_or(GROUP_MAC);
                            let f = rw::build(self.cfg.mac, dst, &Frame::RtData(frag)).ok();
                            u.advance();
                            h.frame_out = true;
                            match f {
                                Some(f) => self.push_seg(f, OutKind::RtFrag { session, bytes }, now),
                                None => h.frame_out = false,
                            }
                            continue;
                        }
                    }
                    if next_at < now {
                        self.inc(Ctr::RtSlotOverruns);
                        if let Some(s) = self.current_rt_session() {
                            if let Some(t) = self.tx.get_mut(&s.num) {
                                t.stats.slot_overruns += 1;
                            }
                        }
                    }
                    self.route(now, Some(next_at));
                }
                Step::Nrt { left } => {
                    if h.frame_out {
                        return;
                    }
                    if *left > 0 {
                        *left -= 1;
                        if let Some(p) = self.nrt_q.pop_front() {
                            self.nrt_bytes -= p.len();
                            h.frame_out = true;
                            self.seg_q.push_back(Outgoing {
                                pkt: p,
                                kind: OutKind::NrtVisit,
                            });
                        }
                        continue;
                    }
                    self.route(now, None);
                }
                Step::PassAt { at } => {
                    if *at > now {
                        return;
                    }
                    self.pass(now);
                }
                Step::Passing { .. } => return,
            }
        }
        self.inc(Ctr::RunLimit);
    }

    fn current_rt_session(&self) -> Option<SessionId> {
        match &self.holding.as_ref()?.step {
            Step::Rt { units, .. } => units.front().map(|u| u.session),
            _ => None,
        }
    }

    /// Begin a visit at `start` for the purpose the cursor names.
    fn visit(&mut self, now: Instant, start: Instant) {
        let me = self.cfg.id;
        let Some(mut h) = self.holding.take() else {
            return;
        };
        if !self.housekeeping(now, &mut h.token) {
            return; // token destroyed
        }
        self.inc(Ctr::TokenVisits);
        let t = &mut h.token;
        match cycle::purpose(t) {
            Purpose::CycleStart => {
                if cycle::head(t) != Some(me) {
                    // Our leading session just closed: the new first RT
                    // node starts the cycle.
                    if let Some(hd) = cycle::head(t) {
                        t.to = hd;
                    }
                    h.step = Step::PassAt { at: now };
                    self.holding = Some(h);
                    return;
                }
                // Rule 1: no earlier than one TRT after the previous start.
                let anchor = t
                    .sessions
                    .first()
                    .and_then(|e| self.last_rt_visit.get(&e.session))
                    .copied();
                let gate = anchor.map(|a| a + t.trt).filter(|&g| g > start).unwrap_or(start);
                cycle::begin_cycle(t);
                let c = t.cycle;
                self.inc(Ctr::CycleStarts);
                if cycle::alive(t) == [me] {
                    // Alone in the token, it never goes on the wire: show it
                    // once a cycle, so stations still in CSMA mode (their
                    // acknowledgements lost) hear it and join.
                    let mut shown = t.clone();
                    shown.sender = me;
                    if let Some(f) = self.frame(GROUP_MAC, &Frame::Token(shown)) {
                        self.push_seg(f, OutKind::Ctrl, now);
                        self.inc(Ctr::TokenShown);
                    }
                }
                if gate > start {
                    self.inc(Ctr::GateWaits);
                }
                self.trace(
                    gate,
                    c,
                    VisitKind::CycleStart {
                        gate_wait: gate - start,
                    },
                );
                h.step = if t.to == me {
                    Step::Visit { at: gate }
                } else {
                    Step::PassAt { at: gate }
                };
            }
            Purpose::Rt(i) => {
                let Some(e) = t.sessions.get(i).copied() else {
                    self.inc(Ctr::TokenMisrouted);
                    settle_nrt(t);
                    h.step = Step::PassAt { at: now };
                    self.holding = Some(h);
                    return;
                };
                if e.session.sender != me {
                    self.inc(Ctr::TokenMisrouted);
                    t.to = e.session.sender;
                    h.step = Step::PassAt { at: now };
                    self.holding = Some(h);
                    return;
                }
                self.inc(Ctr::RtVisits);
                self.last_rt_visit.insert(e.session, start);
                t.residual -= e.tht;
                let c = t.cycle;
                cycle::after_rt(t, i);
                let units: VecDeque<OutUnit> = self
                    .tx
                    .get_mut(&e.session.num)
                    .map(|s| {
                        s.stats.rt_visits += 1;
                        let u = s.take_units();
                        if u.is_empty() {
                            s.stats.idle_visits += 1;
                        }
                        u.into()
                    })
                    .unwrap_or_default();
                let bytes = units.iter().map(|u| u.data.len() as u32).sum();
                if !units.is_empty() {
                    self.session_event(SessionEvent::BufferFree { session: e.session });
                } else {
                    self.inc(Ctr::RtVisitsIdle);
                }
                self.trace(
                    start,
                    c,
                    VisitKind::Rt {
                        session: e.session,
                        bytes,
                    },
                );
                // Rule 2: the next visit begins THT_RT after this one did.
                h.step = Step::Rt {
                    units,
                    next_at: start + e.tht,
                };
            }
            Purpose::Nrt => {
                let grant = cycle::nrt_grant(
                    &self.cfg.timing,
                    self.cfg.nrt_policy,
                    t.residual,
                    self.nrt_q.iter().map(|p| p.len()),
                );
                let c = t.cycle;
                match grant {
                    Grant::Send { frames, cost } => {
                        self.inc(Ctr::NrtVisits);
                        t.residual -= cost;
                        cycle::after_nrt(t, me);
                        self.trace(
                            start,
                            c,
                            VisitKind::Nrt {
                                frames: frames as u32,
                            },
                        );
                        h.step = Step::Nrt { left: frames };
                    }
                    Grant::Idle { cost } => {
                        self.inc(Ctr::NrtVisits);
                        self.inc(Ctr::NrtVisitsIdle);
                        t.residual -= cost;
                        cycle::after_nrt(t, me);
                        self.trace(start, c, VisitKind::NrtIdle);
                        self.idle_hop_from = Some(start);
                        self.holding = Some(h);
                        self.route(now, None);
                        return;
                    }
                    Grant::Refuse => {
                        self.inc(Ctr::NrtRefusals);
                        self.trace(start, c, VisitKind::NrtRefused);
                        let id = t.id;
                        if !cycle::end_cycle(t, me) {
                            self.destroy(now, id);
                            return;
                        }
                        self.holding = Some(h);
                        self.route(now, None);
                        return;
                    }
                }
            }
        }
        self.holding = Some(h);
    }

    /// The visit is over: hand the token to whoever the cursor names —
    /// locally, or by a pass timed so that it arrives at `next_at`.
    fn route(&mut self, now: Instant, next_at: Option<Instant>) {
        let me = self.cfg.id;
        let wire = self
            .holding
            .as_ref()
            .map(|h| self.cfg.timing.wire_time(h.token.frame_len()));
        let Some(h) = self.holding.as_mut() else {
            return;
        };
        h.frame_out = false;
        if h.token.to == me {
            // An own next visit keeps its planned start even if the driver
            // woke late, so the schedule does not drift.
            h.step = Step::Visit {
                at: next_at.unwrap_or(now),
            };
            if std::mem::take(&mut h.owe_ack) {
                // No pass for the predecessor to hear for a while.
                let stamp = h.token.stamp();
                self.queue_token_ack(now, stamp);
            }
        } else {
            let at = match (next_at, wire) {
                (Some(n), Some(w)) => (n - w).max(now),
                _ => now,
            };
            h.step = Step::PassAt { at };
        }
    }

    /// Send the token to `token.to` (multicast, so the predecessor hears
    /// it: the piggybacked acknowledgement of §2.4).
    fn pass(&mut self, now: Instant) {
        let me = self.cfg.id;
        let mac = self.cfg.mac;
        let t_token = self.cfg.timing.t_token;
        let Some(h) = self.holding.as_mut() else {
            return;
        };
        h.token.sender = me;
        h.token.seq = h.token.seq.wrapping_add(1);
        let stamp = h.token.stamp();
        let Ok(frame) = rw::build(mac, GROUP_MAC, &Frame::Token(h.token.clone())) else {
            // Entries are only added when they fit (admission, joins).
            self.holding = None;
            self.malformed[WireError::TooLarge.index()] += 1;
            return;
        };
        h.step = Step::Passing { frame: frame.clone() };
        h.frame_out = true;
        let token = h.token.clone();
        if self.cfg.timing.wire_time(frame.len()) > t_token {
            self.inc(Ctr::TokenWireOverTToken);
        }
        self.inc(Ctr::TokenPasses);
        self.view = Some(View::new(token, now, self.cfg.id));
        self.push_seg(frame, OutKind::TokenPass(stamp), now);
    }

    /// Start a monitor on the successor once the pass left the NIC.
    fn passed(&mut self, now: Instant, stamp: Stamp) {
        let Some(h) = self.holding.as_ref() else {
            return;
        };
        if h.token.stamp() != stamp || !matches!(h.step, Step::Passing { .. }) {
            return;
        }
        let Some(h) = self.holding.take() else {
            return;
        };
        let Step::Passing { frame } = h.step else {
            return;
        };
        if let Some(v) = &mut self.view {
            v.heard_at = now;
        }
        let deadline = now + self.ack_timeout(&h.token);
        self.monitor = Some(Monitor {
            frame,
            stamp,
            successor: h.token.to,
            token: h.token,
            deadline: Some(deadline),
            tries: 0,
        });
    }

    fn ack_timeout(&self, t: &Token) -> Duration {
        timing::ack_timeout(
            t.residual,
            t.cycle_end(),
            t.trt,
            cycle::head_slots(t),
            self.cfg.ack_margin,
        )
    }

    /// §2.4: the successor did not pass the token on in time.
    fn monitor_timeout(&mut self, now: Instant) {
        let Some(m) = self.monitor.as_mut() else {
            return;
        };
        if m.deadline.is_none_or(|d| d > now) {
            return;
        }
        self.ctr[Ctr::AckTimeouts as usize] += 1;
        if m.tries < self.cfg.pass_retries {
            // A lost or corrupted token frame must not kill a live node:
            // send the same frame again first.
            m.tries += 1;
            m.deadline = None;
            let (frame, stamp) = (m.frame.clone(), m.stamp);
            self.inc(Ctr::TokenRetransmits);
            self.push_seg(frame, OutKind::TokenRetransmit(stamp), now);
            return;
        }
        let Some(m) = self.monitor.take() else {
            return;
        };
        self.inc(Ctr::SuccessorsDead);
        let mut t = m.token;
        // A reconfiguration is a new epoch: should the "dead" node be alive
        // after all, its token is older than ours everywhere and dies.
        self.max_epoch = self.max_epoch.wrapping_add(1);
        t.id = TokenId {
            epoch: self.max_epoch,
            origin: self.cfg.id,
        };
        let id = t.id;
        match cycle::reroute_after_death(&mut t, m.successor) {
            None => self.destroy(now, id),
            Some(to) => {
                let step = if to == self.cfg.id {
                    self.announce(now, t.stamp());
                    Step::Visit { at: now }
                } else {
                    Step::PassAt { at: now }
                };
                self.view = Some(View::new(t.clone(), now, self.cfg.id));
                self.holding = Some(Holding {
                    token: t,
                    step,
                    frame_out: false,
                    owe_ack: false,
                });
                self.run_token(now);
            }
        }
    }

    /// The token-silence watchdog (beyond the paper): when it fires, the
    /// token is lost and the lowest-ranked live station regenerates it.
    fn claim_at(&self) -> Option<Instant> {
        // A holder, or a predecessor whose acknowledgement timer is running
        // (§2.4 recovery under way), does not claim.
        if !matches!(self.mode, Mode::Rether) || self.holding.is_some() || self.monitor.is_some() {
            return None;
        }
        let v = self.view.as_ref()?;
        let rank = v.claim_rank?;
        let silence = timing::silence_timeout(v.token.trt, v.token.t_nrt, self.cfg.ack_margin);
        Some(v.heard_at + silence + Duration(self.cfg.claim_stagger.0.saturating_mul(rank)))
    }

    fn regenerate(&mut self, now: Instant) {
        let Some(v) = self.view.as_ref() else {
            return;
        };
        let mut t = v.token.clone();
        self.max_epoch = self.max_epoch.wrapping_add(1);
        t.id = TokenId {
            epoch: self.max_epoch,
            origin: self.cfg.id,
        };
        t.flags |= FLAG_CYCLE_END | FLAG_REGENERATED;
        t.rt_next = NRT_PHASE;
        cycle::mark_alive(&mut t, self.cfg.id);
        self.monitor = None;
        self.inc(Ctr::TokenRegenerations);
        let Some(head) = cycle::head(&t) else {
            let id = t.id;
            self.destroy(now, id);
            return;
        };
        t.to = head;
        let step = if head == self.cfg.id {
            self.announce(now, t.stamp());
            Step::Visit { at: now }
        } else {
            Step::PassAt { at: now }
        };
        self.view = Some(View::new(t.clone(), now, self.cfg.id));
        self.holding = Some(Holding {
            token: t,
            step,
            frame_out: false,
            owe_ack: false,
        });
        self.run_token(now);
    }

    /// A new lineage this station keeps for its own visits first goes on
    /// the wire as a token acknowledgement, so that the other stations'
    /// silence watchdogs restart now rather than claim it a second time.
    fn announce(&mut self, now: Instant, stamp: Stamp) {
        self.queue_token_ack(now, stamp);
    }

    /// What a holder does with the token at every visit, whatever its
    /// purpose: take joining nodes back (§2.4), reconcile its own entries,
    /// remove closed sessions and decide pending admissions (§2.3). The
    /// holder that leaves the RT set empty destroys the token (§2.2.4).
    /// Returns `false` if it did.
    fn housekeeping(&mut self, now: Instant, t: &mut Token) -> bool {
        let me = self.cfg.id;
        for j in std::mem::take(&mut self.pending_joins) {
            if cycle::is_alive(t, j) {
                continue;
            }
            if cycle::mark_alive(t, j) {
                self.inc(Ctr::JoinsApplied);
            } else {
                self.inc(Ctr::NodeTableFull);
            }
        }
        if !cycle::is_alive(t, me) && !cycle::mark_alive(t, me) {
            self.inc(Ctr::NodeTableFull);
        }
        // Entries of ours we do not have (we rebooted, or closed and the
        // removal was lost with a token) go; sessions of ours the token
        // lost are revoked.
        let tx = &self.tx;
        let stale = cycle::remove_sessions(t, |e| {
            e.session.sender == me
                && !tx
                    .get(&e.session.num)
                    .is_some_and(|s| matches!(s.state, SendState::Admitted { .. } | SendState::Closing))
        });
        self.add(Ctr::StaleEntriesRemoved, stale.len() as u64);
        let revoked: Vec<u16> = self
            .tx
            .values()
            .filter(|s| matches!(s.state, SendState::Admitted { .. }))
            .filter(|s| !t.sessions.iter().any(|e| e.session == s.id))
            .map(|s| s.id.num)
            .collect();
        for num in revoked {
            if let Some(s) = self.tx.get_mut(&num) {
                s.state = SendState::Revoked;
                s.drop_queued();
                let session = s.id;
                self.inc(Ctr::SessionsRevoked);
                self.session_event(SessionEvent::Revoked { session });
            }
        }
        // Closes.
        let closing: Vec<u16> = self
            .tx
            .values()
            .filter(|s| s.state == SendState::Closing)
            .map(|s| s.id.num)
            .collect();
        for num in closing {
            let session = SessionId { sender: me, num };
            cycle::remove_sessions(t, |e| e.session == session);
            if let Some(mut s) = self.tx.remove(&num) {
                s.drop_queued();
                self.inc(Ctr::SessionsClosed);
                self.session_event(SessionEvent::Closed {
                    session,
                    stats: s.stats,
                });
            }
        }
        // Admissions, in session order.
        let pending: Vec<u16> = self
            .tx
            .values()
            .filter(|s| s.state == SendState::Pending)
            .map(|s| s.id.num)
            .collect();
        for num in pending {
            let Some(s) = self.tx.get_mut(&num) else {
                continue;
            };
            let entry = RtEntry {
                session: s.id,
                receiver: s.receiver,
                bytes_per_trt: s.bytes_per_trt,
                tht: s.tht,
                start_cycle: 0,
            };
            let session = s.id;
            match cycle::admit(t, entry) {
                Ok(()) => {
                    let start_cycle = t.cycle.wrapping_add(1);
                    s.state = SendState::Admitted { start_cycle };
                    self.inc(Ctr::AdmissionAccepts);
                    self.session_event(SessionEvent::Admitted { session, start_cycle });
                }
                Err(reason) => {
                    s.state = SendState::Refused(reason);
                    self.inc(Ctr::AdmissionRefusals);
                    self.session_event(SessionEvent::Refused { session, reason });
                }
            }
        }
        if t.sessions.is_empty() {
            let id = t.id;
            self.destroy(now, id);
            return false;
        }
        true
    }

    /// §2.2.4: destroy the token and switch the segment back to CSMA/CD.
    fn destroy(&mut self, now: Instant, id: TokenId) {
        self.holding = None;
        self.monitor = None;
        self.inc(Ctr::TokensDestroyed);
        for _ in 0..self.cfg.csma_repeats.max(1) {
            self.queue_csma(now, id);
        }
        self.set_mode(now, Mode::Csma);
    }

    fn queue_csma(&mut self, now: Instant, id: TokenId) {
        let s = SwitchToCsma {
            sender: self.cfg.id,
            id,
        };
        if let Some(f) = self.frame(MacAddr::BROADCAST, &Frame::SwitchToCsma(s)) {
            self.push_seg(f, OutKind::Ctrl, now);
            self.inc(Ctr::SwitchToCsmaSent);
        }
    }

    // ----- NRT traffic --------------------------------------------------------

    fn enqueue_nrt(&mut self, pkt: Packet) {
        if rw::is_rether(&pkt.data) {
            // Only the station speaks RETHER on the segment.
            self.inc(Ctr::RetherFromHostRefused);
            return;
        }
        if self.nrt_q.len() >= self.cfg.nrt_queue_packets
            || self.nrt_bytes + pkt.len() > self.cfg.nrt_queue_bytes
        {
            self.inc(Ctr::NrtQueueDrops);
            return;
        }
        self.nrt_bytes += pkt.len();
        self.nrt_q.push_back(pkt);
        self.inc(Ctr::NrtQueued);
    }

    fn for_host(&self, dst: MacAddr) -> bool {
        if dst == self.cfg.mac || self.cfg.host_macs.contains(&dst) {
            return true;
        }
        if dst.0[0] & 1 == 1 {
            return dst != GROUP_MAC;
        }
        self.cfg.host_port && self.cfg.host_macs.is_empty()
    }

    fn deliver(&mut self, frame: Vec<u8>, meta: Meta) {
        self.inc(Ctr::NrtDelivered);
        let pkt = Packet::new(frame, meta);
        if self.cfg.host_port {
            if self.host_q.len() >= self.cfg.host_queue_packets {
                self.inc(Ctr::HostQueueDrops);
            } else {
                self.host_q.push_back(pkt);
            }
        } else {
            if self.events.len() >= self.cfg.max_events {
                self.events.pop_front();
                self.inc(Ctr::EventsDropped);
            }
            self.events.push_back(Event::Deliver { port: 0, pkt });
        }
    }

    // ----- timers -------------------------------------------------------------

    fn timers(&mut self, now: Instant) {
        let due: Vec<SessionId> = self
            .rx
            .iter()
            .filter(|(_, r)| r.deadline().is_some_and(|d| d <= now))
            .map(|(k, _)| *k)
            .collect();
        for s in due {
            if self.rx.get_mut(&s).is_some_and(|r| r.handle_timeout(now)) {
                self.unit_ready(s);
            }
        }
        match &self.mode {
            Mode::Joining { until: Some(t) } if *t <= now => {
                self.inc(Ctr::JoinTimeouts);
                self.set_mode(now, Mode::Csma);
            }
            Mode::Initiating(_) => self.init_timeout(now),
            Mode::Acked(a) => {
                if a.wait_until.is_some_and(|t| t <= now) {
                    self.inc(Ctr::SwitchAbandoned);
                    self.set_mode(now, Mode::Csma);
                } else {
                    self.ack_timers(now);
                }
            }
            _ => {}
        }
        self.monitor_timeout(now);
        if self.claim_at().is_some_and(|t| t <= now) {
            self.regenerate(now);
        }
        self.run_token(now);
    }

    fn next_timer(&self, now: Instant) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |y| y.min(x)));
            }
        };
        if self.nic.is_none()
            && (!self.seg_q.is_empty() || (matches!(self.mode, Mode::Csma) && !self.nrt_q.is_empty()))
        {
            at(Some(now));
        }
        if self.cfg.host_port && !self.host_q.is_empty() {
            at(Some(self.host_busy_until));
        }
        if let Some(h) = &self.holding {
            match h.step {
                Step::Visit { at: x } | Step::PassAt { at: x } => at(Some(x)),
                _ => {}
            }
        }
        at(self.monitor.as_ref().and_then(|m| m.deadline));
        match &self.mode {
            Mode::Joining { until } => at(*until),
            Mode::Initiating(i) => at(i.deadline),
            Mode::Acked(a) => {
                if let AckState::Due(x) = a.ack {
                    at(Some(x));
                }
                at(a.wait_until);
            }
            Mode::Rether => at(self.claim_at()),
            Mode::Csma => {}
        }
        for r in self.rx.values() {
            at(r.deadline());
        }
        t
    }
}

/// Re-point a token whose cursor was past its RT set at the NRT phase.
fn settle_nrt(t: &mut Token) {
    t.rt_next = NRT_PHASE;
    if let Some(n) = cycle::rr_at_or_after(t, t.nrt_resume) {
        t.to = n;
    }
}

impl Node for RetherStation {
    fn name(&self) -> &str {
        &self.cfg.name
    }
    fn port_count(&self) -> usize {
        if self.cfg.host_port {
            2
        } else {
            1
        }
    }

    fn handle_frame(&mut self, now: Instant, port: u16, frame: Vec<u8>, meta: Meta) {
        if port == 1 && self.cfg.host_port {
            self.inc(Ctr::HostRx);
            self.enqueue_nrt(Packet::new(frame, meta));
            return;
        }
        if port != 0 {
            self.inc(Ctr::RxBadPort);
            return;
        }
        let arrival = if meta.arrival > Instant::ZERO && meta.arrival <= now {
            meta.arrival
        } else {
            now
        };
        let dst = eth::eth_dst(&frame).unwrap_or_default();
        let src = eth::eth_src(&frame);
        // Any frame but a token's ends an idle hop on the wire (the
        // token parser resets the count).
        self.frames_since_token = self.frames_since_token.saturating_add(1);
        if !rw::is_rether(&frame) {
            let echo = src.is_some_and(|m| m == self.cfg.mac || self.cfg.host_macs.contains(&m));
            if frame.len() < eth::ETH_HDR {
                self.malformed[WireError::Truncated.index()] += 1;
            } else if echo {
                // Our own traffic coming back (a driver or bridge echo).
                self.inc(Ctr::OwnFramesIgnored);
            } else if self.for_host(dst) {
                self.deliver(frame, meta);
                return;
            } else {
                self.inc(Ctr::NrtNotForUs);
            }
            // A traffic frame this station does not keep: on a bus, the
            // copy every other station hears (the ledger's `created` on
            // the medium's side) ends here.
            if meta.uid != 0 {
                self.traffic_ignored += 1;
            }
            return;
        }
        if dst != self.cfg.mac && dst != GROUP_MAC && dst != MacAddr::BROADCAST {
            self.inc(Ctr::ControlNotForUs);
            return;
        }
        let f = match rw::parse(&frame) {
            Ok(f) => f,
            Err(e) => {
                self.malformed[e.index()] += 1;
                return;
            }
        };
        if f.sender() == self.cfg.id {
            self.inc(Ctr::OwnFramesIgnored);
            return;
        }
        self.inc(Ctr::ControlRx);
        self.learn(f.sender(), src);
        match f {
            Frame::SwitchToRether(s) => self.on_switch(now, &s),
            Frame::SwitchAck(a) => self.on_switch_ack(now, a),
            Frame::Token(t) => self.on_token(now, arrival, t),
            Frame::TokenAck(a) => self.on_token_ack(now, a),
            Frame::SwitchToCsma(s) => self.on_csma(now, s),
            Frame::Join(j) => self.on_join(now, j),
            Frame::RtData(d) => self.on_rt_data(now, d),
        }
        self.run_token(now);
    }

    fn handle_send(&mut self, _now: Instant, pkt: Packet) {
        self.enqueue_nrt(pkt);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.timers(now);
    }

    fn handle_tx_done(&mut self, now: Instant, port: u16, status: TxStatus) {
        if port != 0 {
            self.inc(Ctr::SpuriousTxDone);
            return;
        }
        let Some(kind) = self.nic.take() else {
            self.inc(Ctr::SpuriousTxDone);
            return;
        };
        self.seg_tx.done(status);
        let sent = matches!(status, TxStatus::Sent { .. });
        match kind {
            OutKind::RtFrag { session, bytes } => {
                if let Some(s) = (session.sender == self.cfg.id)
                    .then(|| self.tx.get_mut(&session.num))
                    .flatten()
                {
                    if sent {
                        s.stats.frames_sent += 1;
                        s.stats.bytes_sent += bytes as u64;
                    } else {
                        s.stats.frames_failed += 1;
                        s.stats.bytes_failed += bytes as u64;
                    }
                }
                if sent {
                    self.inc(Ctr::RtFramesSent);
                    self.add(Ctr::RtBytesSent, bytes as u64);
                } else {
                    self.inc(Ctr::RtFramesFailed);
                }
                self.visit_frame_done();
            }
            OutKind::NrtVisit => {
                self.inc(if sent { Ctr::NrtSent } else { Ctr::NrtTxFailed });
                self.visit_frame_done();
            }
            OutKind::NrtCsma => self.inc(if sent { Ctr::NrtSent } else { Ctr::NrtTxFailed }),
            OutKind::TokenPass(stamp) => {
                // Even a pass the NIC gave up on starts the monitor: its
                // timer retransmits, as for a lost frame.
                if !sent {
                    self.inc(Ctr::ControlTxFailed);
                }
                self.passed(now, stamp);
            }
            OutKind::TokenRetransmit(stamp) => {
                let timeout = self.monitor.as_ref().map(|m| self.ack_timeout(&m.token));
                if let (Some(m), Some(d)) = (self.monitor.as_mut(), timeout) {
                    if m.stamp == stamp {
                        m.deadline = Some(now + d);
                    }
                }
                if let Some(v) = &mut self.view {
                    if v.token.id == stamp.id {
                        v.heard_at = now;
                    }
                }
            }
            OutKind::Switch => {
                if sent {
                    if let Mode::Initiating(init) = &mut self.mode {
                        let wait = if init.tries >= self.cfg.switch_retries {
                            self.cfg.last_switch_wait()
                        } else {
                            self.cfg.switch_ack_timeout
                        };
                        init.deadline = Some(now + wait);
                    }
                    self.try_complete_switch(now);
                } else {
                    // The NIC gave up (a saturated CSMA segment): the message
                    // never went out, so it is no try; send it again.
                    self.inc(Ctr::ControlTxFailed);
                    self.queue_switch(now);
                }
            }
            OutKind::SwitchAck => {
                let wait = self.cfg.first_token_wait();
                if let Mode::Acked(a) = &mut self.mode {
                    a.ack = AckState::Sent;
                    a.wait_until = Some(now + wait);
                }
                if !sent {
                    self.inc(Ctr::ControlTxFailed);
                }
            }
            OutKind::Join => {
                let wait = self.cfg.join_wait();
                if let Mode::Joining { until } = &mut self.mode {
                    *until = Some(now + wait);
                }
                if !sent {
                    self.inc(Ctr::ControlTxFailed);
                }
            }
            OutKind::Ctrl => {
                if !sent {
                    self.inc(Ctr::ControlTxFailed);
                }
            }
        }
        self.run_token(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if self.nic.is_none() {
            let out = match self.seg_q.pop_front() {
                Some(o) => Some(o),
                None if matches!(self.mode, Mode::Csma) => self.nrt_q.pop_front().map(|p| {
                    self.nrt_bytes -= p.len();
                    Outgoing {
                        pkt: p,
                        kind: OutKind::NrtCsma,
                    }
                }),
                None => None,
            };
            if let Some(o) = out {
                if matches!(o.kind, OutKind::TokenPass(_)) {
                    if let Some(t0) = self.idle_hop_from.take() {
                        self.hop_local.add(now.saturating_since(t0));
                    }
                } else {
                    self.idle_hop_from = None;
                }
                if o.kind == OutKind::Switch {
                    if let Mode::Initiating(init) = &mut self.mode {
                        init.in_nic = true;
                    }
                }
                self.nic = Some(o.kind);
                let wire = self.cfg.timing.framing.wire_bytes(o.pkt.len());
                self.seg_tx.handed(Duplex::Half, o.pkt.len() as u64, wire);
                return Some(Transmit {
                    port: 0,
                    pkt: o.pkt,
                    tx_end: None,
                });
            }
        }
        if self.cfg.host_port && self.host_busy_until <= now {
            if let Some(p) = self.host_q.pop_front() {
                let wire = self.cfg.timing.framing.wire_bytes(p.len());
                self.host_busy_until = now + Duration::for_bytes(wire, self.cfg.host_rate_bps);
                self.host_tx_pkts += 1;
                self.host_tx_bytes += p.len() as u64;
                self.host_tx_wire += wire;
                self.inc(Ctr::HostTx);
                return Some(Transmit {
                    port: 1,
                    pkt: p,
                    tx_end: Some(self.host_busy_until),
                });
            }
        }
        None
    }

    fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        self.next_timer(now)
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = Ctr::ALL
            .iter()
            .filter(|c| self.ctr[**c as usize] > 0)
            .map(|c| (c.name().to_string(), self.ctr[*c as usize]))
            .collect();
        for e in WireError::ALL {
            let n = self.malformed[e.index()];
            if n > 0 {
                v.push((format!("malformed_{}", e.name()), n));
            }
        }
        v
    }

    fn port_report(&self, port: u16) -> PortReport {
        match port {
            0 => {
                let drops = self.counter(Ctr::NrtQueueDrops);
                PortReport {
                    name: format!("{}-seg", self.cfg.name),
                    tx_pkts: self.seg_tx.pkts,
                    tx_bytes: self.seg_tx.bytes,
                    tx_wire_bytes: self.seg_tx.wire_bytes,
                    scheduler: "rether".into(),
                    queued: self.nrt_q.len() as u64,
                    drops: (drops > 0)
                        .then(|| ("nrt_queue_full".into(), drops))
                        .into_iter()
                        .chain(self.seg_tx.drop_entry())
                        .collect(),
                    counters: [Ctr::TokenPasses, Ctr::RtVisits, Ctr::NrtVisits, Ctr::CycleStarts]
                        .iter()
                        .map(|c| (c.name().to_string(), self.counter(*c)))
                        .collect(),
                    ..PortReport::default()
                }
            }
            1 if self.cfg.host_port => {
                let drops = self.counter(Ctr::HostQueueDrops);
                PortReport {
                    name: format!("{}-host", self.cfg.name),
                    tx_pkts: self.host_tx_pkts,
                    tx_bytes: self.host_tx_bytes,
                    tx_wire_bytes: self.host_tx_wire,
                    scheduler: "fifo".into(),
                    queued: self.host_q.len() as u64,
                    drops: if drops > 0 {
                        vec![("host_queue_full".into(), drops)]
                    } else {
                        Vec::new()
                    },
                    counters: Vec::new(),
                    ..PortReport::default()
                }
            }
            _ => PortReport::default(),
        }
    }

    fn ledger(&self) -> Ledger {
        // RT units count as held from the application's send until their
        // last fragment is on the wire: a run does not end (nor a ledger
        // balance) with units still waiting for their session's turn.
        let rt_sending = match self.holding.as_ref().map(|h| &h.step) {
            Some(Step::Rt { units, .. }) => units.iter().filter(|u| u.fragment().is_some()).count(),
            _ => 0,
        };
        let rt_queued: usize = self.tx.values().map(|t| t.queued_units()).sum();
        Ledger {
            held: (self.nrt_q.len() + self.host_q.len() + rt_queued + rt_sending) as u64,
            // A frame given up after 16 collisions (`nrt_tx_failed`) was
            // lost by the medium, which counts it: not again here.
            dropped: self.counter(Ctr::NrtQueueDrops)
                + self.counter(Ctr::HostQueueDrops)
                + self.counter(Ctr::RetherFromHostRefused)
                + self.traffic_ignored,
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

impl RetherStation {
    fn visit_frame_done(&mut self) {
        if let Some(h) = self.holding.as_mut() {
            h.frame_out = false;
        }
    }

    /// How a driver must attach each port: the segment (0) half duplex,
    /// the host port (1) full duplex.
    pub fn port_duplex(port: u16) -> Duplex {
        if port == 0 {
            Duplex::Half
        } else {
            Duplex::Full
        }
    }
}
