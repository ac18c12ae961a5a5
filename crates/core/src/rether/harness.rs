//! A small test bus for RETHER stations: an ideal shared segment that
//! delivers each frame to every other station at the end of its wire time,
//! with carrier sense (a station that finds the medium busy defers until it
//! goes idle — 1-persistent, as IEEE 802.3 §4.2.3.2.1) and collisions
//! when two stations start in the same instant (truncated binary
//! exponential backoff, 16 attempts). Fault injection: drop or corrupt
//! chosen frames for everyone or for some receivers, crash and restart
//! stations. An application layer keeps send buffers full, drains receive
//! buffers and keeps NRT queues backlogged, and everything is recorded for
//! the assertions.
//!
//! This is a test double for the real segment model, not a medium model.

use std::collections::BTreeMap;

use crate::node::{Event, Node, TxStatus};
use crate::packet::{Framing, Meta, Packet};
use crate::time::{Duration, Instant};
use crate::wire::{MacAddr, ETH_HDR};

use super::station::{RetherStation, SessionEvent, StationConfig, Visit};
use super::wire::{self as rw, Frame, FrameType};
use super::{SessionId, StationId};

/// IEEE 802.3 slot time: 512 bit times.
const SLOT_BITS: u64 = 512;

pub enum Ev {
    Wake(usize),
    Arbitrate,
    TxEnd {
        from: usize,
        frame: Vec<u8>,
        uid: u64,
        attempts: u32,
    },
    TxFailed {
        from: usize,
    },
    Action(usize),
}

pub enum FaultAction {
    /// Nobody receives the frame.
    Drop,
    /// These stations (indices) do not receive it.
    DropAt(Vec<usize>),
    /// The frame arrives with its version byte damaged (a corruption the
    /// FCS missed; a real NIC drops FCS failures, which is `Drop`).
    Corrupt,
}

/// A frame on the wire, for fault matchers and the log.
pub struct WireFrame<'a> {
    pub from: usize,
    pub start: Instant,
    pub data: &'a [u8],
}

impl WireFrame<'_> {
    pub fn parsed(&self) -> Option<Frame<'_>> {
        rw::parse(self.data).ok()
    }
    pub fn kind(&self) -> Option<FrameType> {
        self.parsed().map(|f| f.kind())
    }
}

type Matcher = Box<dyn FnMut(&WireFrame<'_>) -> bool>;
type Action = Box<dyn FnOnce(&mut Bus)>;

pub struct Fault {
    pub matcher: Matcher,
    pub action: FaultAction,
    /// How many matching frames it applies to.
    pub remaining: u32,
}

/// One frame that went out whole.
#[derive(Clone, Debug)]
pub struct LogRec {
    pub from: usize,
    pub start: Instant,
    pub end: Instant,
    pub data: Vec<u8>,
    /// Whether a fault dropped it for everyone.
    pub dropped: bool,
}

impl LogRec {
    pub fn parsed(&self) -> Option<Frame<'_>> {
        rw::parse(&self.data).ok()
    }
    pub fn token(&self) -> Option<rw::Token> {
        match self.parsed()? {
            Frame::Token(t) => Some(t),
            _ => None,
        }
    }
}

/// A received unit, as the application saw it.
#[derive(Clone, Debug)]
pub struct Got {
    pub at: Instant,
    pub session: SessionId,
    pub number: u32,
    pub complete: bool,
    pub bytes: usize,
}

pub struct Slot {
    pub st: RetherStation,
    pub up: bool,
    wake: Option<Instant>,
    /// Keep NRT queue at this many frames (0: no NRT load).
    pub nrt_backlog: usize,
    pub nrt_len: usize,
    /// Keep send buffers of open sessions full.
    pub feed: bool,
    pub events: Vec<(Instant, SessionEvent)>,
    pub visits: Vec<Visit>,
    pub got: Vec<Got>,
    /// NRT frames handed to the station / delivered up by it, by uid.
    pub nrt_in: u64,
    pub nrt_out: Vec<(Instant, u64)>,
    /// When each of this station's NRT frames went on the wire (from the log).
    pub host_out: Vec<Packet>,
}

struct Pending {
    from: usize,
    frame: Vec<u8>,
    uid: u64,
    attempts: u32,
    next_try: Instant,
}

pub struct Bus {
    pub now: Instant,
    events: BTreeMap<(Instant, u64), Ev>,
    seq: u64,
    pub slots: Vec<Slot>,
    pub rate_bps: u64,
    framing: Framing,
    busy_until: Instant,
    pending: Vec<Pending>,
    rng: u64,
    pub faults: Vec<Fault>,
    pub log: Vec<LogRec>,
    pub collisions: u64,
    actions: Vec<Option<Action>>,
    /// RT payload bytes the bus dropped (faults), for the byte ledger.
    pub rt_bytes_lost: u64,
    /// Most stations holding the token at one instant, and when two did.
    pub max_holders: usize,
    pub double_holders: Vec<Instant>,
    next_uid: u64,
    same_instant: u64,
}

impl Bus {
    /// `n` stations with ids 1..=n, configured by `cfg(id)`.
    pub fn new(n: usize, seed: u64, mut cfg: impl FnMut(StationId) -> StationConfig) -> Self {
        let mut slots = Vec::new();
        for i in 0..n {
            let c = cfg(i as StationId + 1);
            slots.push(Slot::new(RetherStation::new(c).expect("valid config")));
        }
        let rate = slots
            .first()
            .map_or(10_000_000, |s| s.st.config().timing.rate_bps);
        let mut b = Bus {
            now: Instant::ZERO,
            events: BTreeMap::new(),
            seq: 0,
            slots,
            rate_bps: rate,
            framing: Framing::default(),
            busy_until: Instant::ZERO,
            pending: Vec::new(),
            rng: seed | 1,
            faults: Vec::new(),
            log: Vec::new(),
            collisions: 0,
            actions: Vec::new(),
            rt_bytes_lost: 0,
            max_holders: 0,
            double_holders: Vec::new(),
            next_uid: 1,
            same_instant: 0,
        };
        for i in 0..n {
            b.service(i);
        }
        b
    }

    /// Station ids 1..=n with `members` = all of them, booting in CSMA mode.
    pub fn config(id: StationId, n: usize) -> StationConfig {
        let members = (1..=n as StationId).collect();
        let mut c = StationConfig::new(format!("s{id}"), id, MacAddr::local(id as u32), members);
        c.boot = super::Boot::Csma;
        c.trace_visits = 1 << 20;
        c
    }

    pub fn idx(id: StationId) -> usize {
        id as usize - 1
    }
    pub fn st(&mut self, id: StationId) -> &mut RetherStation {
        &mut self.slots[Self::idx(id)].st
    }

    fn push(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        self.events.insert((at, self.seq), ev);
    }

    fn rand(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Run `f` on the bus at `at`.
    pub fn at(&mut self, at: Instant, f: impl FnOnce(&mut Bus) + 'static) {
        self.actions.push(Some(Box::new(f)));
        let i = self.actions.len() - 1;
        self.push(at, Ev::Action(i));
    }

    pub fn crash(&mut self, id: StationId) {
        let i = Self::idx(id);
        self.slots[i].up = false;
        self.pending.retain(|p| p.from != i);
    }

    /// Replace a station by a freshly booted one.
    pub fn restart(&mut self, cfg: StationConfig) {
        let i = Self::idx(cfg.id);
        let mut s = Slot::new(RetherStation::new(cfg).expect("valid config"));
        s.nrt_backlog = self.slots[i].nrt_backlog;
        s.nrt_len = self.slots[i].nrt_len;
        s.feed = self.slots[i].feed;
        self.slots[i] = s;
        self.service(i);
    }

    pub fn fault(
        &mut self,
        remaining: u32,
        action: FaultAction,
        m: impl FnMut(&WireFrame<'_>) -> bool + 'static,
    ) {
        self.faults.push(Fault {
            matcher: Box::new(m),
            action,
            remaining,
        });
    }

    /// Process events up to and including `until`.
    pub fn run_until(&mut self, until: Instant) {
        while let Some((&(t, s), _)) = self.events.iter().next() {
            if t > until {
                break;
            }
            let ev = self.events.remove(&(t, s)).expect("present");
            if t > self.now {
                self.check_holders();
                self.now = t;
                self.same_instant = 0;
            } else {
                self.same_instant += 1;
                assert!(self.same_instant < 200_000, "events spin at {:?}", self.now);
            }
            self.handle(ev);
        }
        self.check_holders();
        self.now = self.now.max(until);
    }

    fn check_holders(&mut self) {
        let n = self.slots.iter().filter(|s| s.up && s.st.holds_token()).count();
        self.max_holders = self.max_holders.max(n);
        if n > 1 {
            self.double_holders.push(self.now);
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Wake(i) => {
                if self.slots[i].wake != Some(self.now) {
                    return;
                }
                self.slots[i].wake = None;
                if self.slots[i].up {
                    let now = self.now;
                    self.slots[i].st.handle_timeout(now);
                    self.service(i);
                }
            }
            Ev::Arbitrate => self.arbitrate(),
            Ev::TxEnd {
                from,
                frame,
                uid,
                attempts,
            } => self.tx_end(from, frame, uid, attempts),
            Ev::TxFailed { from } => {
                if self.slots[from].up {
                    let now = self.now;
                    self.slots[from]
                        .st
                        .handle_tx_done(now, 0, TxStatus::ExcessiveCollisions);
                    self.service(from);
                }
            }
            Ev::Action(i) => {
                if let Some(f) = self.actions[i].take() {
                    f(self);
                }
                for j in 0..self.slots.len() {
                    self.service(j);
                }
            }
        }
    }

    fn wire_time(&self, len: usize) -> Duration {
        Duration::for_bytes(self.framing.wire_bytes(len), self.rate_bps)
    }

    fn arbitrate(&mut self) {
        let now = self.now;
        let ready: Vec<usize> = (0..self.pending.len())
            .filter(|&k| self.pending[k].next_try <= now)
            .collect();
        if ready.is_empty() {
            return;
        }
        if self.busy_until > now {
            let b = self.busy_until;
            for &k in &ready {
                self.pending[k].next_try = b;
            }
            self.push(b, Ev::Arbitrate);
            return;
        }
        if ready.len() == 1 {
            let p = self.pending.remove(ready[0]);
            let end = now + self.wire_time(p.frame.len());
            self.busy_until = end;
            self.push(
                end,
                Ev::TxEnd {
                    from: p.from,
                    frame: p.frame,
                    uid: p.uid,
                    attempts: p.attempts,
                },
            );
            return;
        }
        // Collision: everyone jams for a slot and backs off.
        self.collisions += 1;
        let slot = Duration::for_bytes(SLOT_BITS / 8, self.rate_bps);
        self.busy_until = now + slot;
        let mut failed = Vec::new();
        for &k in &ready {
            self.pending[k].attempts += 1;
            let a = self.pending[k].attempts;
            if a >= 16 {
                failed.push(k);
                continue;
            }
            let r = self.rand() % (1u64 << a.min(10));
            let t = self.busy_until + Duration(slot.0 * r);
            self.pending[k].next_try = t;
            self.push(t, Ev::Arbitrate);
        }
        for k in failed.into_iter().rev() {
            let p = self.pending.remove(k);
            let t = self.busy_until;
            self.push(t, Ev::TxFailed { from: p.from });
        }
    }

    fn tx_end(&mut self, from: usize, frame: Vec<u8>, uid: u64, attempts: u32) {
        let now = self.now;
        let start = now - self.wire_time(frame.len());
        // A station that crashed mid-frame leaves a runt no NIC accepts
        // (and its sender never learnt it was sent: not in any ledger).
        let runt = !self.slots[from].up;
        let mut drop_all = false;
        let mut drop_at: Vec<usize> = Vec::new();
        let mut corrupt = false;
        {
            let wf = WireFrame {
                from,
                start,
                data: &frame,
            };
            for f in self.faults.iter_mut() {
                if f.remaining == 0 || !(f.matcher)(&wf) {
                    continue;
                }
                f.remaining -= 1;
                match &f.action {
                    FaultAction::Drop => drop_all = true,
                    FaultAction::DropAt(v) => drop_at.extend(v),
                    FaultAction::Corrupt => corrupt = true,
                }
            }
        }
        if runt {
        } else if drop_all {
            if let Ok(Frame::RtData(d)) = rw::parse(&frame) {
                self.rt_bytes_lost += d.payload.len() as u64;
            }
        } else if let Ok(Frame::RtData(d)) = rw::parse(&frame) {
            let rx = d.receiver as usize;
            let down = self.slots.get(rx.wrapping_sub(1)).is_none_or(|s| !s.up);
            if rx >= 1 && (drop_at.contains(&(rx - 1)) || corrupt || down) {
                self.rt_bytes_lost += d.payload.len() as u64;
            }
        }
        self.log.push(LogRec {
            from,
            start,
            end: now,
            data: frame.clone(),
            dropped: drop_all || runt,
        });
        let drop_all = drop_all || runt;
        let mut data = frame;
        if corrupt && data.len() > ETH_HDR {
            data[ETH_HDR] ^= 0xEE;
        }
        if !drop_all {
            for j in 0..self.slots.len() {
                if j == from || !self.slots[j].up || drop_at.contains(&j) {
                    continue;
                }
                let meta = Meta {
                    uid,
                    arrival: now,
                    ..Meta::default()
                };
                self.slots[j].st.handle_frame(now, 0, data.clone(), meta);
                self.service(j);
            }
        }
        if self.slots[from].up {
            self.slots[from]
                .st
                .handle_tx_done(now, 0, TxStatus::Sent { collisions: attempts });
            self.service(from);
        }
    }

    /// Collect a station's outputs, run its application, schedule its wake-up.
    fn service(&mut self, i: usize) {
        if !self.slots[i].up {
            return;
        }
        let now = self.now;
        // Application: NRT backlog, full send buffers.
        let n = self.slots.len();
        let s = &mut self.slots[i];
        if s.nrt_backlog > 0 {
            while s.st.nrt_queued() < s.nrt_backlog {
                let dst = MacAddr::local(((i + 1) % n) as u32 + 1);
                let mut data = vec![0u8; s.nrt_len.max(ETH_HDR)];
                data[0..6].copy_from_slice(&dst.0);
                data[6..12].copy_from_slice(&MacAddr::local(i as u32 + 1).0);
                data[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
                let meta = Meta {
                    uid: self.next_uid,
                    arrival: now,
                    ..Meta::default()
                };
                self.next_uid += 1;
                s.nrt_in += 1;
                s.st.handle_send(now, Packet::new(data, meta));
            }
        }
        if s.feed {
            for (sid, _) in s.st.sessions() {
                let len = s.st.reservation(sid).unwrap_or(0) as usize;
                while len > 0 && s.st.free_buffers(sid).unwrap_or(0) > 0 {
                    if s.st.send(sid, vec![0xA5; len]).is_err() {
                        break;
                    }
                }
            }
        }
        // Outputs.
        while let Some(tx) = s.st.poll_transmit(now) {
            if tx.port == 0 {
                self.pending.push(Pending {
                    from: i,
                    uid: tx.pkt.meta.uid,
                    frame: tx.pkt.data,
                    attempts: 0,
                    next_try: now,
                });
                self.seq += 1;
                self.events.insert((now, self.seq), Ev::Arbitrate);
            } else {
                s.host_out.push(tx.pkt);
            }
        }
        let s = &mut self.slots[i];
        while let Some(e) = s.st.poll_event() {
            let Event::Deliver { pkt, .. } = e;
            s.nrt_out.push((now, pkt.meta.uid));
        }
        while let Some(e) = s.st.poll_session_event() {
            if let SessionEvent::UnitReady { session } = e {
                while let Some(u) = s.st.recv(session) {
                    s.got.push(Got {
                        at: now,
                        session,
                        number: u.number,
                        complete: u.complete,
                        bytes: u.data.len() - u.bytes_missing as usize,
                    });
                }
            }
            s.events.push((now, e));
        }
        s.visits.extend(s.st.take_visits());
        if let Some(t) = s.st.poll_timeout(now) {
            let t = t.max(now);
            if s.wake.is_none_or(|w| t < w || w < now) {
                s.wake = Some(t);
                self.push(t, Ev::Wake(i));
            }
        }
    }

    /// Every visit of every station, in time order, with the station id.
    pub fn visits(&self) -> Vec<(StationId, Visit)> {
        let mut v: Vec<(StationId, Visit)> = self
            .slots
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.visits.iter().map(move |v| (i as StationId + 1, *v)))
            .collect();
        v.sort_by_key(|(_, v)| v.at);
        v
    }

    /// Token frames that went out (not dropped), in order.
    pub fn tokens(&self) -> Vec<(Instant, rw::Token)> {
        self.log
            .iter()
            .filter(|r| !r.dropped)
            .filter_map(|r| r.token().map(|t| (r.end, t)))
            .collect()
    }

    /// The frames of `kind` that went out.
    pub fn frames(&self, kind: FrameType) -> Vec<&LogRec> {
        self.log
            .iter()
            .filter(|r| r.parsed().is_some_and(|f| f.kind() == kind))
            .collect()
    }

    /// Run in steps of `step` until `cond` holds; panics after `limit`.
    pub fn run_until_cond(
        &mut self,
        step: Duration,
        limit: Duration,
        mut cond: impl FnMut(&mut Bus) -> bool,
    ) {
        let end = self.now + limit;
        while !cond(self) {
            assert!(self.now < end, "condition not reached by {:?}", end);
            let t = self.now + step;
            self.run_until(t);
        }
    }

    /// Admit an open session and run until it is decided; panics if it is
    /// not decided within `limit`.
    pub fn admit_and_wait(&mut self, id: StationId, s: SessionId, limit: Duration) -> super::SendState {
        let now = self.now;
        self.st(id).admit(now, s).expect("admit");
        for i in 0..self.slots.len() {
            self.service(i);
        }
        let end = self.now + limit;
        while self.now < end {
            let t = self.now + Duration::from_millis(1);
            self.run_until(t);
            match self.st(id).session_state(s) {
                Some(super::SendState::Pending) => {}
                Some(st) => return st,
                None => panic!("session vanished"),
            }
        }
        panic!("admission of {s} not decided within {limit}");
    }
}

impl Slot {
    fn new(st: RetherStation) -> Self {
        Slot {
            st,
            up: true,
            wake: None,
            nrt_backlog: 0,
            nrt_len: 1000,
            feed: false,
            events: Vec::new(),
            visits: Vec::new(),
            got: Vec::new(),
            nrt_in: 0,
            nrt_out: Vec::new(),
            host_out: Vec::new(),
        }
    }
}
