//! A RETHER station with its host's applications, as one [`Node`]: what a
//! scenario's `kind = "rether"` node is, in any driver.
//!
//! [`RetherStation`] is the NIC-level protocol (§2) with the session
//! interface of §3.1. This node puts on top of it what the paper's hosts
//! ran: the video applications of §4 (one real-time session per RT flow,
//! §3.1's open / admit / send / receive / close, driven by the flow's
//! packets) and the host's ordinary IP traffic, which rides the station's
//! NRT turns untouched (§3: RETHER is transparent to TCP/IP).
//!
//! - **RT flows.** A packet of an RT flow handed in by a traffic source is
//!   one *unit* of its session: the whole IP packet (up to 9000 bytes, the
//!   6400-byte video frames of Table 1) goes into a send buffer and leaves
//!   at the session's next RT visit, fragmented into RETHER data frames;
//!   the receiving node hands the reassembled packet up as an ordinary
//!   [`Event::Deliver`], so the driver's flow statistics see RT flows like
//!   any other. The session is admitted when the flow's first packet
//!   arrives (§2.3: at the next token visit; the first request switches a
//!   CSMA segment to RETHER mode) and closed at the flow's stop time.
//! - **Disabled RETHER** (the Table 1 baseline): RT packets go as
//!   ordinary traffic on CSMA/CD, IP-fragmented to the MTU as a host's
//!   stack would (RFC 791), and reassembled at the receiver.
//! - **Lateness** (§1, Table 1): a unit is late when it arrives more than
//!   the threshold (2 ms) after its expected arrival. Units of a periodic
//!   stream are expected one period apart, so unit k is expected at
//!   `phase + k·period`, `phase` being the stream's best (earliest)
//!   arrival phase in the measurement window. A session of k units per
//!   TRT receives them in one burst per RT visit, up to TRT − period after
//!   their own expected times by design: under RETHER the threshold
//!   counts from there.
//! - **What it reports** ([`Node::details`]): per session, units sent,
//!   received, late, refused, and the interval between its RT visits
//!   (which RETHER promises to be one TRT); per station, the interval
//!   between its NRT visits (the paper's NRT access delay, §4.1), the
//!   mode-switch times (Figure 4) and its token counters.

use std::any::Any;
use std::collections::{BTreeMap, VecDeque};

use crate::node::{Detail, Event, Ledger, Node, PortReport, Transmit, TxStatus};
use crate::packet::{Meta, Packet};
use crate::probe::Probe;
use crate::time::{Duration, Instant};
use crate::wire as eth;

use super::station::{ModeKind, RetherStation, SessionEvent, VisitKind};
use super::{SessionId, StationId};

/// One RT flow (a session) as the node sees it.
#[derive(Clone, Debug)]
pub struct RtFlow {
    /// The scenario flow id (the probe's `flow`).
    pub flow: u32,
    pub name: String,
    /// The session id, agreed by sender and receiver beforehand (§3.1:
    /// the receiver opens with "the unique Id of the corresponding
    /// sender").
    pub session: SessionId,
    pub receiver: StationId,
    /// Reservation in bytes per TRT.
    pub bytes_per_trt: u32,
    /// The stream's unit period (1 / frames per second).
    pub period_ns: f64,
    /// When the application closes the session.
    pub stop: Option<Instant>,
}

/// A failure injected at a station (§2.4 and beyond: what the paper's
/// fault tolerance and qosnet's token regeneration must survive).
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub at: Instant,
    pub kind: FaultKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum FaultKind {
    /// The station stops dead at `at` (`holding`: at the first moment
    /// from `at` on that it holds the token), and with `restart` boots
    /// again then, joining the segment (§2.4's node join). Its sessions
    /// die with it.
    Crash { holding: bool, restart: Option<Instant> },
    /// The next `count` token frames passing the token to this station
    /// from `at` on are lost before it receives them.
    DropTokens { count: u32 },
    /// ... arrive damaged (a bad version byte).
    CorruptTokens { count: u32 },
    /// The next `count` token frames this station sends from `at` on
    /// (passes and retransmissions) are lost on the wire: its NIC reports
    /// them sent, nobody receives them. The sender's acknowledgement timer
    /// must notice (§2.4).
    LoseSentTokens { count: u32 },
    /// ... go out on the wire with a damaged version byte, so that every
    /// other station's parser refuses and counts them
    /// (`malformed_bad_version`) and the sender must retransmit.
    CorruptSentTokens { count: u32 },
}

/// The applications of a RETHER host.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// RT flows this node sends.
    pub send: Vec<RtFlow>,
    /// RT flows this node receives.
    pub recv: Vec<RtFlow>,
    /// `false`: RT flows go as ordinary traffic on CSMA/CD (no sessions).
    pub rether: bool,
    /// A unit arriving later than this after its expected time is late.
    pub late_threshold: Duration,
    /// Send and receive buffers per session (§3.1's double buffering and
    /// more).
    pub buffers: usize,
    /// IP MTU of the segment, for fragmenting RT packets sent as ordinary
    /// traffic.
    pub mtu: usize,
    /// Statistics count from here (the scenario's warm-up).
    pub window_start: Instant,
    /// ... to here (the end of the scenario's measurement).
    pub window_end: Instant,
    /// Failures to inject, in any order.
    pub faults: Vec<Fault>,
    /// The host's own interface ([`Node::host_link`]): its MAC, which the
    /// station delivers frames to (put it in the station's `host_macs`),
    /// and the IP MTU offered to the host — up to a session unit's size,
    /// so a video frame reaches the station whole. Ordinary packets
    /// larger than the segment's `mtu` are carried as IP fragments and
    /// reassembled by the receiving station before its host sees them.
    pub host: Option<crate::node::HostLink>,
}

/// Running min/mean/max/std of a series of durations.
#[derive(Clone, Copy, Debug, Default)]
struct Series {
    n: u64,
    min: u64,
    max: u64,
    sum: f64,
    sumsq: f64,
}

impl Series {
    fn add(&mut self, v: u64) {
        if self.n == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.n += 1;
        self.sum += v as f64;
        self.sumsq += (v as f64) * (v as f64);
    }
    fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }
    fn std(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let m = self.mean();
        (self.sumsq / self.n as f64 - m * m).max(0.0).sqrt()
    }
    fn detail(&self) -> Detail {
        Detail::Map(vec![
            ("count".into(), Detail::U64(self.n)),
            ("min_ns".into(), Detail::U64(self.min)),
            ("mean_ns".into(), Detail::F64(self.mean().round())),
            ("max_ns".into(), Detail::U64(self.max)),
            ("std_ns".into(), Detail::F64(self.std().round())),
        ])
    }
}

/// A token-hop series for results: count, min, p50, p99, max (ns).
fn hop_detail(h: &super::station::HopSamples) -> Detail {
    let u = Detail::U64;
    let (n, min, p50, p99, max) = h.summary().unwrap_or_default();
    Detail::Map(vec![
        ("count".into(), u(n as u64)),
        ("min_ns".into(), u(min as u64)),
        ("p50_ns".into(), u(p50 as u64)),
        ("p99_ns".into(), u(p99 as u64)),
        ("max_ns".into(), u(max as u64)),
    ])
}

/// Sender side of one RT flow.
#[derive(Default)]
struct TxApp {
    units_generated: u64,
    units_queued: u64,
    /// Units refused because every send buffer was full.
    units_buffers_full: u64,
    /// Units of a session refused admission or revoked.
    units_refused: u64,
    admitted_at: Option<Instant>,
    refused: Option<String>,
    closed: bool,
    revoked: u64,
    last_visit: Option<Instant>,
    visit_interval: Series,
}

/// Receiver side of one RT flow.
#[derive(Default)]
struct RxApp {
    units_complete: u64,
    units_incomplete: u64,
    /// (sequence, arrival ns) of units generated in the window.
    arrivals: Vec<(u64, u64)>,
}

/// Arrivals kept per flow at most (a 30 unit/s stream for 9 hours).
const MAX_ARRIVALS: usize = 1 << 20;
/// IP datagrams in reassembly at most.
const MAX_REASSEMBLY: usize = 64;

/// An IP datagram being reassembled (RFC 791), keyed by (src, dst, ident).
/// Fragments kept per packet being reassembled (a 64 KiB packet in
/// 8-byte fragments would need 8192).
const MAX_FRAGMENTS: usize = 8192;

struct Reasm {
    key: ([u8; 4], [u8; 4], u16),
    /// (offset, payload bytes) of the fragments received.
    parts: Vec<(usize, Vec<u8>)>,
    /// Total payload length, once the last fragment arrived.
    total: Option<usize>,
    /// Ethernet + IP header of the first fragment.
    head: Option<Vec<u8>>,
    meta: Meta,
}

/// A RETHER station and its host's applications (see the module docs).
pub struct RetherHost {
    st: RetherStation,
    cfg: AppConfig,
    tx: BTreeMap<u32, TxApp>,
    rx: BTreeMap<u32, RxApp>,
    /// Session → flow id (sent and received sessions).
    flow_of: BTreeMap<SessionId, u32>,
    events: VecDeque<Event>,
    nrt_visit_interval: Series,
    last_nrt_visit: Option<Instant>,
    switch_times: Vec<u64>,
    to_rether_at: Vec<u64>,
    to_csma_at: Vec<u64>,
    reasm: VecDeque<Reasm>,
    reasm_evicted: u64,
    /// Reassemblies dropped for inconsistent fragments.
    reasm_bad: u64,
    /// Fragments thrown away (duplicates, evicted or bad reassemblies).
    frags_discarded: u64,
    /// Fragments merged back into their packet (all but one per packet).
    frags_merged: u64,
    /// Traffic lost with crashed stations: what their queues held at the
    /// crash, what reached them while down, and the drops of the station
    /// a restart replaced.
    crash_lost: u64,
    fragments_sent: u64,
    /// RT packets larger than the MTU with RETHER disabled, sent in pieces.
    packets_fragmented: u64,
    units_delivered: u64,
    units_dropped: u64,
    bad_units: u64,
    /// The configuration to boot again with after a crash.
    boot_cfg: super::station::StationConfig,
    /// Crashed: deaf and mute until the restart, if any.
    down: Option<Option<Instant>>,
    /// The NIC holds a frame (port 0 is half duplex).
    nic_busy: bool,
    /// The NIC still holds a frame handed over before the crash.
    nic_busy_at_crash: bool,
    /// Per fault: done.
    fault_done: Vec<bool>,
    crashes: u64,
    restarts: u64,
    tokens_dropped: u64,
    tokens_corrupted: u64,
    sent_tokens_lost: u64,
    sent_tokens_corrupted: u64,
    frames_while_down: u64,
    /// Sessions the host's applications opened through the station's
    /// control interface (`qosnet rether`), not scenario flows.
    ext_tx: BTreeMap<SessionId, ExtTx>,
    ext_rx: BTreeMap<SessionId, ExtRx>,
}

/// RT visits kept per control-interface session (a minute of 10 ms
/// cycles); older ones are counted in `visits_dropped`.
pub const EXT_VISITS: usize = 6000;
/// Received units kept per control-interface session until read.
pub const EXT_UNITS: usize = 1024;

/// One RT visit of a control-interface session: its cycle, when its slot
/// began, and the bytes the station sent in it (0: nothing was queued).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtVisit {
    /// Running number of the visit in this session (from 0).
    pub seq: u64,
    pub cycle: u32,
    pub at: Instant,
    pub bytes: u32,
}

/// Where a control-interface sending session stands, from the station's
/// session events.
#[derive(Clone, Debug, Default)]
pub struct ExtTx {
    pub admitted_at: Option<Instant>,
    pub start_cycle: Option<u32>,
    /// The last refusal (eq. 3's figures, or a full token).
    pub refused: Option<super::cycle::AdmitError>,
    pub closed: bool,
    pub revoked: u64,
    visits: VecDeque<ExtVisit>,
    next_visit: u64,
    pub visits_dropped: u64,
}

impl ExtTx {
    /// The number the session's next RT visit will have.
    pub fn next_visit(&self) -> u64 {
        self.next_visit
    }
}

/// A control-interface receiving session: units not read yet.
#[derive(Clone, Debug, Default)]
pub struct ExtRx {
    units: VecDeque<(Instant, super::RxUnit)>,
    /// Units thrown away because nobody read them in time.
    pub units_dropped: u64,
}

impl RetherHost {
    /// Wrap `st`, opening the sessions of `cfg` (senders open in flow
    /// order, so the session numbers agree with the receivers').
    pub fn new(mut st: RetherStation, cfg: AppConfig) -> Result<Self, String> {
        let mut flow_of = BTreeMap::new();
        let mut tx = BTreeMap::new();
        let mut rx = BTreeMap::new();
        if cfg.rether {
            for f in &cfg.send {
                let id = st
                    .open_sender(f.receiver, f.bytes_per_trt, cfg.buffers)
                    .map_err(|e| format!("flow {}: opening its session: {e}", f.name))?;
                if id != f.session {
                    return Err(format!(
                        "flow {}: session opened as {id}, expected {}",
                        f.name, f.session
                    ));
                }
                flow_of.insert(id, f.flow);
            }
            for f in &cfg.recv {
                st.open_receiver(f.session, cfg.buffers)
                    .map_err(|e| format!("flow {}: opening its receiver: {e}", f.name))?;
                flow_of.insert(f.session, f.flow);
            }
        }
        for f in &cfg.send {
            tx.insert(f.flow, TxApp::default());
        }
        for f in &cfg.recv {
            rx.insert(f.flow, RxApp::default());
        }
        let n_faults = cfg.faults.len();
        Ok(RetherHost {
            boot_cfg: st.config().clone(),
            down: None,
            nic_busy: false,
            nic_busy_at_crash: false,
            fault_done: vec![false; n_faults],
            crashes: 0,
            restarts: 0,
            tokens_dropped: 0,
            tokens_corrupted: 0,
            sent_tokens_lost: 0,
            sent_tokens_corrupted: 0,
            frames_while_down: 0,
            st,
            cfg,
            tx,
            rx,
            flow_of,
            events: VecDeque::new(),
            nrt_visit_interval: Series::default(),
            last_nrt_visit: None,
            switch_times: Vec::new(),
            to_rether_at: Vec::new(),
            to_csma_at: Vec::new(),
            reasm: VecDeque::new(),
            reasm_evicted: 0,
            reasm_bad: 0,
            frags_discarded: 0,
            frags_merged: 0,
            crash_lost: 0,
            fragments_sent: 0,
            packets_fragmented: 0,
            units_delivered: 0,
            units_dropped: 0,
            bad_units: 0,
            ext_tx: BTreeMap::new(),
            ext_rx: BTreeMap::new(),
        })
    }

    // ----- the control interface's sessions (§3.1, for `qosnet rether`) ---

    /// `retherOpenRTsession` for a sender, on behalf of an application
    /// outside the scenario: a session to `receiver` of `bytes_per_trt`
    /// per TRT, not yet asking for admission.
    pub fn ext_open_sender(
        &mut self,
        receiver: StationId,
        bytes_per_trt: u32,
        buffers: usize,
    ) -> Result<SessionId, super::SessionError> {
        let id = self.st.open_sender(receiver, bytes_per_trt, buffers)?;
        self.ext_tx.insert(id, ExtTx::default());
        Ok(id)
    }

    /// `retherOpenRTsession` for a receiver of `session`.
    pub fn ext_open_receiver(
        &mut self,
        session: SessionId,
        buffers: usize,
    ) -> Result<(), super::SessionError> {
        if self.flow_of.contains_key(&session) {
            return Err(super::SessionError::AlreadyOpen);
        }
        self.st.open_receiver(session, buffers)?;
        self.ext_rx.insert(session, ExtRx::default());
        Ok(())
    }

    fn ext_sender(&self, session: SessionId) -> Result<(), super::SessionError> {
        if self.ext_tx.contains_key(&session) {
            Ok(())
        } else if self.flow_of.contains_key(&session) {
            // A scenario flow's session belongs to its flow.
            Err(super::SessionError::NotSender)
        } else {
            Err(super::SessionError::UnknownSession)
        }
    }

    /// `retherAdmit` of a control-interface session (decided at the next
    /// token visit: see [`ext_tx`](Self::ext_tx)).
    pub fn ext_admit(&mut self, now: Instant, session: SessionId) -> Result<(), super::SessionError> {
        self.ext_sender(session)?;
        if let Some(t) = self.ext_tx.get_mut(&session) {
            t.refused = None;
        }
        let r = self.st.admit(now, session);
        self.pump(now);
        r
    }

    /// Non-blocking `retherSend` of one unit on a control-interface session.
    pub fn ext_send(
        &mut self,
        now: Instant,
        session: SessionId,
        unit: Vec<u8>,
    ) -> Result<(), super::SendError> {
        if self.ext_sender(session).is_err() {
            return Err(super::SendError::UnknownSession);
        }
        let r = self.st.send(session, unit);
        self.pump(now);
        r
    }

    /// Up to `max` received units of a control-interface session, oldest
    /// first, with when each was handed up.
    pub fn ext_recv(&mut self, session: SessionId, max: usize) -> Option<Vec<(Instant, super::RxUnit)>> {
        let r = self.ext_rx.get_mut(&session)?;
        let n = max.min(r.units.len());
        Some(r.units.drain(..n).collect())
    }

    /// `retherCloseRTsession` of a control-interface session (either side).
    pub fn ext_close(&mut self, now: Instant, session: SessionId) -> Result<(), super::SessionError> {
        if self.ext_rx.remove(&session).is_some() {
            return self.st.close(now, session);
        }
        self.ext_sender(session)?;
        let r = self.st.close(now, session);
        self.pump(now);
        r
    }

    /// A control-interface sending session's state.
    pub fn ext_tx(&self, session: SessionId) -> Option<&ExtTx> {
        self.ext_tx.get(&session)
    }
    /// A control-interface receiving session's state.
    pub fn ext_rx(&self, session: SessionId) -> Option<&ExtRx> {
        self.ext_rx.get(&session)
    }
    /// The control-interface sessions: (sending, receiving).
    pub fn ext_sessions(&self) -> (Vec<SessionId>, Vec<SessionId>) {
        (
            self.ext_tx.keys().copied().collect(),
            self.ext_rx.keys().copied().collect(),
        )
    }
    /// RT visits of a control-interface session numbered `from` on (the
    /// ones still kept).
    pub fn ext_visits(&self, session: SessionId, from: u64) -> Vec<ExtVisit> {
        self.ext_tx
            .get(&session)
            .map(|t| t.visits.iter().filter(|v| v.seq >= from).copied().collect())
            .unwrap_or_default()
    }
    /// The session of a scenario flow, by flow name (a `qosnet rether`
    /// status shows them beside its own).
    pub fn flow_sessions(&self) -> Vec<(String, SessionId, bool)> {
        let tx = self.cfg.send.iter().map(|f| (f.name.clone(), f.session, true));
        let rx = self.cfg.recv.iter().map(|f| (f.name.clone(), f.session, false));
        tx.chain(rx).collect()
    }
    /// Whether the station crashed by an injected fault and is down.
    pub fn is_down(&self) -> bool {
        self.down.is_some()
    }
    /// Inject a failure from now on (a live station's fault options).
    pub fn add_fault(&mut self, f: Fault) {
        self.cfg.faults.push(f);
        self.fault_done.push(false);
    }

    pub fn station(&self) -> &RetherStation {
        &self.st
    }
    pub fn station_mut(&mut self) -> &mut RetherStation {
        &mut self.st
    }

    fn in_window(&self, t: Instant) -> bool {
        t >= self.cfg.window_start && t < self.cfg.window_end
    }

    fn send_flow(&self, flow: u32) -> Option<&RtFlow> {
        self.cfg.send.iter().find(|f| f.flow == flow)
    }

    /// Everything the station produced for the applications since the
    /// last call: session events, received units, visits, delivered frames.
    fn pump(&mut self, now: Instant) {
        while let Some(e) = self.st.poll_session_event() {
            match e {
                SessionEvent::Admitted { session, start_cycle } => {
                    if let Some(x) = self.ext_tx.get_mut(&session) {
                        x.admitted_at = Some(now);
                        x.start_cycle = Some(start_cycle);
                        x.refused = None;
                    }
                    if let Some(t) = self.flow_of.get(&session).and_then(|f| self.tx.get_mut(f)) {
                        t.admitted_at = Some(now);
                    }
                }
                SessionEvent::Refused { session, reason } => {
                    if let Some(x) = self.ext_tx.get_mut(&session) {
                        x.refused = Some(reason);
                    }
                    if let Some(t) = self.flow_of.get(&session).and_then(|f| self.tx.get_mut(f)) {
                        t.refused = Some(match reason {
                            super::cycle::AdmitError::Refused(r) => r.to_string(),
                            super::cycle::AdmitError::TokenFull => "token full".into(),
                        });
                    }
                }
                SessionEvent::Closed { session, .. } => {
                    if let Some(x) = self.ext_tx.get_mut(&session) {
                        x.closed = true;
                    }
                    if let Some(t) = self.flow_of.get(&session).and_then(|f| self.tx.get_mut(f)) {
                        t.closed = true;
                    }
                }
                SessionEvent::Revoked { session } => {
                    if let Some(x) = self.ext_tx.get_mut(&session) {
                        x.revoked += 1;
                        x.admitted_at = None;
                    }
                    if let Some(t) = self.flow_of.get(&session).and_then(|f| self.tx.get_mut(f)) {
                        t.revoked += 1;
                    }
                }
                SessionEvent::UnitReady { session } if self.ext_rx.contains_key(&session) => {
                    while let Some(u) = self.st.recv(session) {
                        if let Some(r) = self.ext_rx.get_mut(&session) {
                            if r.units.len() >= EXT_UNITS {
                                r.units.pop_front();
                                r.units_dropped += 1;
                            }
                            r.units.push_back((now, u));
                        }
                    }
                }
                SessionEvent::UnitReady { session } => {
                    while let Some(u) = self.st.recv(session) {
                        if u.complete {
                            self.unit_up(now, u.data, Meta::default());
                        } else {
                            if let Some(r) = self.flow_of.get(&session).and_then(|f| self.rx.get_mut(f)) {
                                r.units_incomplete += 1;
                            }
                            self.units_dropped += 1;
                        }
                    }
                }
                SessionEvent::ModeChanged { mode, at } => match mode {
                    ModeKind::Rether => self.to_rether_at.push(at.as_nanos()),
                    ModeKind::Csma => self.to_csma_at.push(at.as_nanos()),
                    _ => {}
                },
                SessionEvent::TokenCreated { switch_time, .. } => {
                    self.switch_times.push(switch_time.as_nanos())
                }
                SessionEvent::BufferFree { .. } => {}
            }
        }
        for v in self.st.take_visits() {
            match v.kind {
                VisitKind::Rt { session, bytes } => {
                    if let Some(x) = self.ext_tx.get_mut(&session) {
                        if x.visits.len() >= EXT_VISITS {
                            x.visits.pop_front();
                            x.visits_dropped += 1;
                        }
                        x.visits.push_back(ExtVisit {
                            seq: x.next_visit,
                            cycle: v.cycle,
                            at: v.at,
                            bytes,
                        });
                        x.next_visit += 1;
                    }
                    let win = self.in_window(v.at);
                    if let Some(t) = self.flow_of.get(&session).and_then(|f| self.tx.get_mut(f)) {
                        if let (Some(last), true) = (t.last_visit, win) {
                            t.visit_interval
                                .add(v.at.as_nanos().saturating_sub(last.as_nanos()));
                        }
                        t.last_visit = Some(v.at);
                    }
                }
                VisitKind::Nrt { .. } | VisitKind::NrtIdle => {
                    if let (Some(last), true) = (self.last_nrt_visit, self.in_window(v.at)) {
                        self.nrt_visit_interval
                            .add(v.at.as_nanos().saturating_sub(last.as_nanos()));
                    }
                    self.last_nrt_visit = Some(v.at);
                }
                _ => {}
            }
        }
        // The intervals between NRT visits are meaningful within RETHER
        // mode only: a switch to CSMA ends the series.
        if self.st.mode() != ModeKind::Rether {
            self.last_nrt_visit = None;
            for t in self.tx.values_mut() {
                t.last_visit = None;
            }
        }
        while let Some(ev) = self.st.poll_event() {
            match ev {
                Event::Deliver { port, pkt } => self.frame_up(now, port, pkt),
            }
        }
    }

    /// A frame the station delivered: reassemble IP fragments, record RT
    /// flows' arrivals, pass everything up.
    fn frame_up(&mut self, now: Instant, port: u16, pkt: Packet) {
        let frame = pkt.data;
        let is_frag = eth::parse_ipv4(&frame).is_ok() && {
            let fo = u16::from_be_bytes([frame[eth::ETH_HDR + 6], frame[eth::ETH_HDR + 7]]);
            fo & 0x3fff != 0
        };
        if !is_frag {
            self.note_arrival(now, &frame);
            self.events.push_back(Event::Deliver {
                port,
                pkt: Packet::new(frame, pkt.meta),
            });
            return;
        }
        if let Some(whole) = self.reassemble(&frame, pkt.meta) {
            self.note_arrival(now, &whole.data);
            self.events.push_back(Event::Deliver { port, pkt: whole });
        }
    }

    /// A complete RT unit: the sender's IP packet, up to the host.
    fn unit_up(&mut self, now: Instant, data: Vec<u8>, meta: Meta) {
        if eth::parse_ipv4(&data).is_err() {
            self.bad_units += 1;
            return;
        }
        self.units_delivered += 1;
        self.note_arrival(now, &data);
        self.events.push_back(Event::Deliver {
            port: 0,
            pkt: Packet::new(data, meta),
        });
    }

    fn note_arrival(&mut self, now: Instant, frame: &[u8]) {
        let Ok(info) = eth::parse_ipv4(frame) else {
            return;
        };
        let Some(p) = Probe::decode(eth::udp_payload(frame, &info)) else {
            return;
        };
        let (ws, we) = (self.cfg.window_start.as_nanos(), self.cfg.window_end.as_nanos());
        if let Some(r) = self.rx.get_mut(&p.flow) {
            r.units_complete += 1;
            if p.tx_ns >= ws && p.tx_ns < we && r.arrivals.len() < MAX_ARRIVALS {
                r.arrivals.push((p.seq, now.as_nanos()));
            }
        }
    }

    fn reassemble(&mut self, frame: &[u8], meta: Meta) -> Option<Packet> {
        let ip = &frame[eth::ETH_HDR..];
        let ihl = ((ip[0] & 0x0f) as usize) * 4;
        let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        if ihl < 20 || total < ihl || total > ip.len() {
            self.bad_units += 1;
            self.frags_discarded += 1;
            return None;
        }
        let fo = u16::from_be_bytes([ip[6], ip[7]]);
        let more = fo & 0x2000 != 0;
        let off = ((fo & 0x1fff) as usize) * 8;
        let key = (
            [ip[12], ip[13], ip[14], ip[15]],
            [ip[16], ip[17], ip[18], ip[19]],
            u16::from_be_bytes([ip[4], ip[5]]),
        );
        let idx = match self.reasm.iter().position(|r| r.key == key) {
            Some(i) => i,
            None => {
                if self.reasm.len() >= MAX_REASSEMBLY {
                    if let Some(old) = self.reasm.pop_front() {
                        self.frags_discarded += old.parts.len() as u64;
                    }
                    self.reasm_evicted += 1;
                }
                self.reasm.push_back(Reasm {
                    key,
                    parts: Vec::new(),
                    total: None,
                    head: None,
                    meta,
                });
                self.reasm.len() - 1
            }
        };
        let r = &mut self.reasm[idx];
        let payload = ip[ihl..total].to_vec();
        if !more {
            r.total = Some(off + payload.len());
        }
        if off == 0 {
            r.head = Some(frame[..eth::ETH_HDR + ihl].to_vec());
        }
        // Bounded: a sender cannot grow one reassembly without limit.
        if !r.parts.iter().any(|(o, _)| *o == off) && r.parts.len() < MAX_FRAGMENTS {
            r.parts.push((off, payload));
        } else {
            self.frags_discarded += 1;
        }
        let need = r.total?;
        // A piece past the end the last fragment declared, or a packet
        // that would not fit IPv4's 16-bit length: inconsistent
        // fragments (crafted or corrupt). Dropped whole, counted.
        if r.parts.iter().any(|(o, _)| *o >= need && need > 0) || ihl + need > 65_535 {
            if let Some(bad) = self.reasm.remove(idx) {
                self.frags_discarded += bad.parts.len() as u64;
            }
            self.reasm_bad += 1;
            return None;
        }
        r.parts.sort_by_key(|(o, _)| *o);
        let mut have = 0;
        for (o, p) in &r.parts {
            if *o > have {
                return None;
            }
            have = have.max(o + p.len());
        }
        if have < need || r.head.is_none() {
            return None;
        }
        let r = self.reasm.remove(idx)?;
        // n fragments became one packet again.
        self.frags_merged += r.parts.len().saturating_sub(1) as u64;
        let mut out = r.head.unwrap_or_default();
        let hl = out.len() - eth::ETH_HDR;
        let mut body = vec![0u8; need];
        for (o, p) in &r.parts {
            let end = (o + p.len()).min(need);
            if let (Some(dst), Some(src)) = (body.get_mut(*o..end), p.get(..end.saturating_sub(*o))) {
                dst.copy_from_slice(src);
            }
        }
        out.extend_from_slice(&body);
        let ip = &mut out[eth::ETH_HDR..];
        let len = (hl + need) as u16;
        ip[2..4].copy_from_slice(&len.to_be_bytes());
        ip[6] = 0;
        ip[7] = 0;
        ip[10] = 0;
        ip[11] = 0;
        let c = eth::checksum(&ip[..hl]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        Some(Packet::new(out, r.meta))
    }

    /// An RT packet sent as ordinary traffic: in MTU-sized IP fragments.
    fn send_fragmented(&mut self, now: Instant, pkt: Packet) {
        let f = &pkt.data;
        let ok = eth::parse_ipv4(f).is_ok();
        let ip_len = f.len().saturating_sub(eth::ETH_HDR);
        if !ok || ip_len <= self.cfg.mtu {
            self.st.handle_send(now, pkt);
            return;
        }
        let ihl = ((f[eth::ETH_HDR] & 0x0f) as usize) * 4;
        let total = u16::from_be_bytes([f[eth::ETH_HDR + 2], f[eth::ETH_HDR + 3]]) as usize;
        let body = &f[eth::ETH_HDR + ihl..eth::ETH_HDR + total.min(ip_len)];
        let step = ((self.cfg.mtu - ihl) / 8) * 8;
        self.packets_fragmented += 1;
        let mut off = 0;
        while off < body.len() {
            let end = (off + step).min(body.len());
            let mut out = f[..eth::ETH_HDR + ihl].to_vec();
            out.extend_from_slice(&body[off..end]);
            let ip = &mut out[eth::ETH_HDR..];
            ip[2..4].copy_from_slice(&((ihl + end - off) as u16).to_be_bytes());
            let more = if end < body.len() { 0x2000 } else { 0 };
            ip[6..8].copy_from_slice(&((more | (off / 8)) as u16).to_be_bytes());
            ip[10] = 0;
            ip[11] = 0;
            let c = eth::checksum(&ip[..ihl]);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            self.fragments_sent += 1;
            self.st.handle_send(now, Packet::new(out, pkt.meta));
            off = end;
        }
    }

    /// Crash or restart as the faults say; `true` while the station is down.
    fn faults(&mut self, now: Instant) -> bool {
        if let Some(restart) = self.down {
            match restart {
                Some(t) if t <= now => {
                    let mut c = self.boot_cfg.clone();
                    c.boot = super::station::Boot::Join;
                    if let Ok(st) = RetherStation::new(c) {
                        // Its queues were counted lost at the crash.
                        self.crash_lost += self.st.ledger().dropped;
                        self.st = st;
                        self.down = None;
                        self.restarts += 1;
                        self.last_nrt_visit = None;
                    }
                }
                _ => return true,
            }
        }
        for i in 0..self.cfg.faults.len() {
            if self.fault_done[i] || self.cfg.faults[i].at > now {
                continue;
            }
            if let FaultKind::Crash { holding, restart } = self.cfg.faults[i].kind {
                if holding && !self.st.holds_token() {
                    continue;
                }
                self.fault_done[i] = true;
                self.crashes += 1;
                self.crash_lost += self.st.ledger().held;
                self.down = Some(restart);
                // A frame already in the NIC still goes out (software
                // cannot recall it); its completion is swallowed.
                self.nic_busy_at_crash = self.nic_busy;
                for t in self.tx.values_mut() {
                    t.closed = true;
                    t.last_visit = None;
                }
                return true;
            }
        }
        false
    }

    /// A token frame about to reach the station: lost or damaged by a
    /// fault? `None`: lost.
    fn token_fault(&mut self, now: Instant, mut frame: Vec<u8>) -> Option<Vec<u8>> {
        // Every token frame is multicast; a fault takes the ones passing
        // the token to this station.
        let me = self.st.id();
        let is_token = super::wire::is_rether(&frame)
            && matches!(super::wire::parse(&frame), Ok(super::wire::Frame::Token(t)) if t.to == me);
        if !is_token {
            return Some(frame);
        }
        for f in self.cfg.faults.iter_mut() {
            if f.at > now {
                continue;
            }
            match &mut f.kind {
                FaultKind::DropTokens { count } if *count > 0 => {
                    *count -= 1;
                    self.tokens_dropped += 1;
                    return None;
                }
                FaultKind::CorruptTokens { count } if *count > 0 => {
                    *count -= 1;
                    self.tokens_corrupted += 1;
                    if frame.len() > eth::ETH_HDR {
                        frame[eth::ETH_HDR] ^= 0xEE;
                    }
                    return Some(frame);
                }
                _ => {}
            }
        }
        Some(frame)
    }

    /// A token frame this station is about to send: lost on the wire
    /// (`true`) or damaged in place by a fault?
    fn sent_token_fault(&mut self, now: Instant, frame: &mut [u8]) -> bool {
        let is_token = super::wire::is_rether(frame)
            && frame.get(eth::ETH_HDR + 1) == Some(&(super::wire::FrameType::Token as u8));
        if !is_token {
            return false;
        }
        for f in self.cfg.faults.iter_mut() {
            if f.at > now {
                continue;
            }
            match &mut f.kind {
                FaultKind::LoseSentTokens { count } if *count > 0 => {
                    *count -= 1;
                    self.sent_tokens_lost += 1;
                    return true;
                }
                FaultKind::CorruptSentTokens { count } if *count > 0 => {
                    *count -= 1;
                    self.sent_tokens_corrupted += 1;
                    // The version byte: a refusal every parser names.
                    frame[eth::ETH_HDR] ^= 0xEE;
                    return false;
                }
                _ => {}
            }
        }
        false
    }

    /// Close sessions whose flow stopped.
    fn close_due(&mut self, now: Instant) {
        if !self.cfg.rether {
            return;
        }
        let due: Vec<SessionId> = self
            .cfg
            .send
            .iter()
            .filter(|f| f.stop.is_some_and(|s| s <= now))
            .filter(|f| self.tx.get(&f.flow).is_some_and(|t| !t.closed))
            .map(|f| f.session)
            .collect();
        for s in due {
            if let Some(t) = self.flow_of.get(&s).and_then(|f| self.tx.get_mut(f)) {
                t.closed = true;
            }
            let _ = self.st.close(now, s);
        }
    }

    fn late(&self, f: &RtFlow, r: &RxApp) -> (u64, u64, f64) {
        let phase = |&(seq, at): &(u64, u64)| at as f64 - seq as f64 * f.period_ns;
        let Some(best) = r.arrivals.iter().map(phase).reduce(f64::min) else {
            return (0, 0, 0.0);
        };
        // A session of several units per TRT gets them in one burst per
        // RT visit: up to TRT − period after their own expected times by
        // design, so lateness counts from beyond that.
        let burst = if self.cfg.rether {
            (self.st.config().trt.as_nanos() as f64 - f.period_ns).max(0.0)
        } else {
            0.0
        };
        let th = self.cfg.late_threshold.as_nanos() as f64 + burst;
        let mut late = 0;
        let mut worst: f64 = 0.0;
        for a in &r.arrivals {
            let d = phase(a) - best;
            worst = worst.max(d);
            if d > th {
                late += 1;
            }
        }
        (r.arrivals.len() as u64, late, worst)
    }
}

impl Node for RetherHost {
    fn name(&self) -> &str {
        self.st.name()
    }
    fn port_count(&self) -> usize {
        self.st.port_count()
    }
    fn handle_frame(&mut self, now: Instant, port: u16, frame: Vec<u8>, meta: Meta) {
        if self.faults(now) {
            self.frames_while_down += 1;
            if meta.uid != 0 {
                self.crash_lost += 1;
            }
            return;
        }
        let Some(frame) = self.token_fault(now, frame) else {
            return;
        };
        self.st.handle_frame(now, port, frame, meta);
        self.pump(now);
    }
    fn handle_send(&mut self, now: Instant, pkt: Packet) {
        if self.faults(now) {
            self.units_dropped += 1;
            return;
        }
        let probe = eth::parse_ipv4(&pkt.data)
            .ok()
            .and_then(|info| Probe::decode(eth::udp_payload(&pkt.data, &info)));
        let flow = probe.map(|p| p.flow).filter(|f| self.tx.contains_key(f));
        let Some(flow) = flow else {
            // Ordinary traffic; a host whose link MTU exceeds the
            // segment's has its larger packets fragmented here.
            if self.cfg.host.is_some_and(|h| h.mtu > self.cfg.mtu) {
                self.send_fragmented(now, pkt);
            } else {
                self.st.handle_send(now, pkt);
            }
            self.pump(now);
            return;
        };
        if let Some(t) = self.tx.get_mut(&flow) {
            t.units_generated += 1;
        }
        if !self.cfg.rether {
            self.send_fragmented(now, pkt);
            self.pump(now);
            return;
        }
        let Some(session) = self.send_flow(flow).map(|f| f.session) else {
            return;
        };
        use super::session::SendState;
        match self.st.session_state(session) {
            Some(SendState::Opened) => {
                let _ = self.st.admit(now, session);
            }
            Some(SendState::Refused(_) | SendState::Revoked) | None => {
                if let Some(t) = self.tx.get_mut(&flow) {
                    t.units_refused += 1;
                }
                self.units_dropped += 1;
                self.pump(now);
                return;
            }
            _ => {}
        }
        match self.st.send(session, pkt.data) {
            Ok(()) => {
                if let Some(t) = self.tx.get_mut(&flow) {
                    t.units_queued += 1;
                }
            }
            Err(_) => {
                if let Some(t) = self.tx.get_mut(&flow) {
                    t.units_buffers_full += 1;
                }
                self.units_dropped += 1;
            }
        }
        self.pump(now);
    }
    fn handle_timeout(&mut self, now: Instant) {
        if self.faults(now) {
            return;
        }
        self.close_due(now);
        self.st.handle_timeout(now);
        self.pump(now);
    }
    fn handle_tx_done(&mut self, now: Instant, port: u16, status: TxStatus) {
        if port == 0 {
            self.nic_busy = false;
        }
        if port == 0 && std::mem::take(&mut self.nic_busy_at_crash) {
            // The completion of a frame handed over before the crash: the
            // station it belonged to is gone.
            return;
        }
        if self.down.is_some() {
            return;
        }
        self.st.handle_tx_done(now, port, status);
        self.pump(now);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if self.down.is_some() || self.nic_busy_at_crash {
            return None;
        }
        let mut t = self.st.poll_transmit(now);
        while let Some(x) = t.as_mut().filter(|x| x.port == 0) {
            if !self.sent_token_fault(now, &mut x.pkt.data) {
                break;
            }
            // Lost on the wire: the NIC sent it (at once, as far as the
            // station can tell) and nobody heard it.
            self.st.handle_tx_done(now, 0, TxStatus::Sent { collisions: 0 });
            t = self.st.poll_transmit(now);
        }
        if t.as_ref().is_some_and(|t| t.port == 0) {
            self.nic_busy = true;
        }
        self.pump(now);
        t
    }
    fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        if let Some(restart) = self.down {
            return restart;
        }
        // A fault waiting for its time (or, crash-holding, for the token).
        let fault = self
            .cfg
            .faults
            .iter()
            .zip(&self.fault_done)
            .filter(|(f, done)| !**done && matches!(f.kind, FaultKind::Crash { .. }))
            .map(|(f, _)| f.at.max(now))
            .min();
        let close = if self.cfg.rether {
            self.cfg
                .send
                .iter()
                .filter(|f| self.tx.get(&f.flow).is_some_and(|t| !t.closed))
                .filter_map(|f| f.stop)
                .min()
        } else {
            None
        };
        let holding_wait = self.cfg.faults.iter().zip(&self.fault_done).any(|(f, done)| {
            !*done && matches!(f.kind, FaultKind::Crash { holding: true, .. }) && f.at <= now
        });
        // Waiting to crash while holding the token: the station's own
        // timers and frames wake it at the moments that can change that.
        let fault = if holding_wait { None } else { fault };
        [self.st.poll_timeout(now), close, fault]
            .into_iter()
            .flatten()
            .min()
    }
    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
    fn host_link(&self) -> Option<crate::node::HostLink> {
        self.cfg.host
    }
    fn counters(&self) -> Vec<(String, u64)> {
        let mut v = self.st.counters();
        for (k, n) in [
            ("app_units_delivered", self.units_delivered),
            ("app_units_dropped", self.units_dropped),
            ("app_bad_units", self.bad_units),
            ("ip_packets_fragmented", self.packets_fragmented),
            ("ip_fragments_sent", self.fragments_sent),
            ("ip_reassembly_evicted", self.reasm_evicted),
            ("ip_reassembly_bad", self.reasm_bad),
            ("fault_crashes", self.crashes),
            ("fault_restarts", self.restarts),
            ("fault_tokens_dropped", self.tokens_dropped),
            ("fault_tokens_corrupted", self.tokens_corrupted),
            ("fault_sent_tokens_lost", self.sent_tokens_lost),
            ("fault_sent_tokens_corrupted", self.sent_tokens_corrupted),
            ("fault_frames_while_down", self.frames_while_down),
        ] {
            if n > 0 {
                v.push((k.to_string(), n));
            }
        }
        v
    }
    fn port_report(&self, port: u16) -> PortReport {
        self.st.port_report(port)
    }
    fn ledger(&self) -> Ledger {
        // IP fragmentation makes packets (the fragments beyond the first)
        // and reassembly merges them back: the ledger counts fragments as
        // the packets they are on the wire.
        let mut l = self.st.ledger();
        if self.down.is_some() {
            // A dead station holds nothing: its queues were lost (counted
            // in `crash_lost` at the crash).
            l.held = 0;
        }
        l.dropped += self.units_dropped + self.frags_discarded + self.frags_merged + self.crash_lost;
        l.created += self.fragments_sent.saturating_sub(self.packets_fragmented);
        l.held += self.reasm.iter().map(|r| r.parts.len() as u64).sum::<u64>();
        l
    }
    fn details(&self) -> Option<Detail> {
        let u = Detail::U64;
        let mut sessions = Vec::new();
        for f in &self.cfg.send {
            let Some(t) = self.tx.get(&f.flow) else {
                continue;
            };
            let stats = self.st.send_stats(f.session).unwrap_or_default();
            let mut m = vec![
                ("flow".into(), Detail::Str(f.name.clone())),
                ("role".into(), Detail::Str("sender".into())),
                ("session".into(), Detail::Str(f.session.to_string())),
                ("bytes_per_trt".into(), u(f.bytes_per_trt as u64)),
                ("units_generated".into(), u(t.units_generated)),
                ("units_queued".into(), u(t.units_queued)),
                ("units_sent".into(), u(stats.units_sent)),
                ("frames_sent".into(), u(stats.frames_sent)),
                ("bytes_sent".into(), u(stats.bytes_sent)),
                ("units_buffers_full".into(), u(t.units_buffers_full)),
                ("units_refused".into(), u(t.units_refused)),
                ("rt_visits".into(), u(stats.rt_visits)),
                ("idle_visits".into(), u(stats.idle_visits)),
                ("slot_overruns".into(), u(stats.slot_overruns)),
                ("revoked".into(), u(t.revoked)),
                ("rt_visit_interval".into(), t.visit_interval.detail()),
            ];
            if let Some(a) = t.admitted_at {
                m.push(("admitted_at_ns".into(), u(a.as_nanos())));
            }
            if let Some(r) = &t.refused {
                m.push(("refused".into(), Detail::Str(r.clone())));
            }
            sessions.push(Detail::Map(m));
        }
        for f in &self.cfg.recv {
            let Some(r) = self.rx.get(&f.flow) else {
                continue;
            };
            let (n, late, worst) = self.late(f, r);
            let stats = self.st.recv_stats(f.session).unwrap_or_default();
            sessions.push(Detail::Map(vec![
                ("flow".into(), Detail::Str(f.name.clone())),
                ("role".into(), Detail::Str("receiver".into())),
                ("session".into(), Detail::Str(f.session.to_string())),
                ("units_received".into(), u(r.units_complete)),
                ("units_incomplete".into(), u(r.units_incomplete)),
                ("frames_received".into(), u(stats.frames_rx)),
                ("units_in_window".into(), u(n)),
                ("late_units".into(), u(late)),
                (
                    "late_percent".into(),
                    Detail::F64(if n == 0 {
                        0.0
                    } else {
                        (late as f64 * 10000.0 / n as f64).round() / 100.0
                    }),
                ),
                ("max_lateness_ns".into(), u(worst.round() as u64)),
            ]));
        }
        let times = |v: &[u64]| Detail::List(v.iter().map(|&t| u(t)).collect());
        Some(Detail::Map(vec![
            ("station_id".into(), u(self.st.id() as u64)),
            (
                "rether".into(),
                Detail::Str(if self.cfg.rether { "on" } else { "off" }.into()),
            ),
            ("sessions".into(), Detail::List(sessions)),
            ("nrt_visit_interval".into(), self.nrt_visit_interval.detail()),
            ("token_hop_local".into(), hop_detail(self.st.hop_local())),
            ("token_hop_wire".into(), hop_detail(self.st.hop_wire())),
            ("switch_times_ns".into(), times(&self.switch_times)),
            ("to_rether_at_ns".into(), times(&self.to_rether_at)),
            ("to_csma_at_ns".into(), times(&self.to_csma_at)),
        ]))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
