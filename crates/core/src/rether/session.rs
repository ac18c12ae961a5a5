//! Real-time sessions (§3.1 procedural interface, §3.2 implementation):
//! the sender's send buffers and the fragments of the unit it sends at
//! each RT visit, and the receiver's reassembly and receive buffers.
//!
//! A *unit* is what the application hands over per TRT (a video frame);
//! it goes out as RETHER data frames carrying the unit number and the
//! fragment number and count (§3.2: "individual Ethernet packets belonging
//! to one RT session carry sequence numbers to aid reassembly"). Nothing
//! is retransmitted: a unit missing fragments is handed up as incomplete,
//! and a newer unit overwrites an unread receive buffer (§3.1
//! `retherRecv`: "overwriting its contents if it still has valid data,
//! thereby giving priority to newer data").

use std::collections::VecDeque;
use std::fmt;

use crate::time::{Duration, Instant};

use super::cycle::AdmitError;
use super::timing::rt_fragments;
use super::wire::{RtData, RT_PAYLOAD_MAX};
use super::{SessionId, StationId};

/// Where a sending session is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendState {
    /// Opened, admission not asked yet (or asked and refused).
    Opened,
    /// Admission asked; decided at the next token visit.
    Pending,
    /// In the token's RT set; sends from `start_cycle` on.
    Admitted { start_cycle: u32 },
    /// The last admission request was refused.
    Refused(AdmitError),
    /// Close asked; the session leaves the RT set at the next token visit.
    Closing,
    /// Removed from the RT set by someone else: this node was declared
    /// dead, or a token regenerated from an older copy does not carry it.
    Revoked,
}

/// Sender-side figures of one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendStats {
    pub units_queued: u64,
    pub units_sent: u64,
    /// Frames the NIC sent.
    pub frames_sent: u64,
    /// Payload bytes in frames the NIC sent.
    pub bytes_sent: u64,
    /// Frames the NIC gave up on (excessive collisions), and their bytes.
    pub frames_failed: u64,
    pub bytes_failed: u64,
    /// Units still queued when the session closed or was revoked.
    pub units_unsent: u64,
    /// RT visits of this session, and those with nothing to send.
    pub rt_visits: u64,
    pub idle_visits: u64,
    /// RT visits whose sending outlasted the slot.
    pub slot_overruns: u64,
}

/// A sending session.
#[derive(Debug)]
pub struct TxSession {
    pub id: SessionId,
    pub receiver: StationId,
    pub bytes_per_trt: u32,
    /// THT_RT of eq. 1 for the reservation, with this station's costs.
    pub tht: Duration,
    pub state: SendState,
    bufs: VecDeque<Vec<u8>>,
    cap: usize,
    next_unit: u32,
    pub stats: SendStats,
}

/// Why `send` refused a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// Every send buffer holds a unit not sent yet (non-blocking send).
    BuffersFull,
    /// A unit larger than the reservation per TRT.
    TooLarge {
        len: usize,
        max: u32,
    },
    Empty,
    UnknownSession,
    /// The session is closing or was revoked.
    Closed,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::BuffersFull => write!(f, "all send buffers full"),
            SendError::TooLarge { len, max } => {
                write!(
                    f,
                    "unit of {len} bytes exceeds the reservation of {max} bytes per TRT"
                )
            }
            SendError::Empty => write!(f, "empty unit"),
            SendError::UnknownSession => write!(f, "unknown session"),
            SendError::Closed => write!(f, "session closed"),
        }
    }
}

impl TxSession {
    pub fn new(
        id: SessionId,
        receiver: StationId,
        bytes_per_trt: u32,
        tht: Duration,
        buffers: usize,
    ) -> Self {
        TxSession {
            id,
            receiver,
            bytes_per_trt,
            tht,
            state: SendState::Opened,
            bufs: VecDeque::with_capacity(buffers),
            cap: buffers,
            next_unit: 0,
            stats: SendStats::default(),
        }
    }

    /// Queue a unit into a free send buffer (non-blocking `retherSend`).
    pub fn send(&mut self, unit: Vec<u8>) -> Result<(), SendError> {
        if matches!(self.state, SendState::Closing | SendState::Revoked) {
            return Err(SendError::Closed);
        }
        if unit.is_empty() {
            return Err(SendError::Empty);
        }
        if unit.len() > self.bytes_per_trt as usize {
            return Err(SendError::TooLarge {
                len: unit.len(),
                max: self.bytes_per_trt,
            });
        }
        if self.bufs.len() >= self.cap {
            return Err(SendError::BuffersFull);
        }
        self.bufs.push_back(unit);
        self.stats.units_queued += 1;
        Ok(())
    }

    pub fn free_buffers(&self) -> usize {
        self.cap - self.bufs.len()
    }
    pub fn queued_units(&self) -> usize {
        self.bufs.len()
    }

    /// The units for this RT visit: every queued unit, oldest first,
    /// that fits with the others in the reservation's bytes per TRT (a
    /// session reserving k units per TRT sends k per visit; a single
    /// unit always fits, `send` refuses larger ones).
    pub fn take_units(&mut self) -> Vec<OutUnit> {
        let mut out: Vec<OutUnit> = Vec::new();
        let mut used = 0usize;
        while let Some(len) = self.bufs.front().map(Vec::len) {
            if !out.is_empty() && used + len > self.bytes_per_trt as usize {
                break;
            }
            used += len;
            match self.take_unit() {
                Some(u) => out.push(u),
                None => break,
            }
        }
        out
    }

    /// The unit for this RT visit, if the application left one.
    pub fn take_unit(&mut self) -> Option<OutUnit> {
        let data = self.bufs.pop_front()?;
        let unit = self.next_unit;
        self.next_unit = self.next_unit.wrapping_add(1);
        self.stats.units_sent += 1;
        Some(OutUnit {
            session: self.id,
            receiver: self.receiver,
            unit,
            frag_count: rt_fragments(data.len() as u32) as u16,
            data,
            next: 0,
        })
    }

    /// Throw away what was never sent (close, revocation).
    pub fn drop_queued(&mut self) {
        self.stats.units_unsent += self.bufs.len() as u64;
        self.bufs.clear();
    }
}

/// A unit being sent, fragment by fragment, during one RT visit.
#[derive(Debug)]
pub struct OutUnit {
    pub session: SessionId,
    pub receiver: StationId,
    pub unit: u32,
    pub data: Vec<u8>,
    pub frag_count: u16,
    next: u16,
}

impl OutUnit {
    /// The next fragment to send, or `None` when all went.
    pub fn fragment(&self) -> Option<RtData<'_>> {
        if self.next >= self.frag_count {
            return None;
        }
        let off = self.next as usize * RT_PAYLOAD_MAX;
        let end = (off + RT_PAYLOAD_MAX).min(self.data.len());
        Some(RtData {
            sender: self.session.sender,
            session_num: self.session.num,
            receiver: self.receiver,
            unit: self.unit,
            frag: self.next,
            frag_count: self.frag_count,
            unit_len: self.data.len() as u32,
            offset: off as u32,
            payload: self.data.get(off..end).unwrap_or(&[]),
        })
    }
    pub fn advance(&mut self) {
        self.next = self.next.saturating_add(1);
    }
}

/// A received unit, as `retherRecv` hands it to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxUnit {
    pub number: u32,
    /// The unit's bytes; where fragments are missing, zeros.
    pub data: Vec<u8>,
    pub complete: bool,
    /// Fragment numbers that never arrived.
    pub missing: Vec<u16>,
    pub bytes_missing: u32,
}

/// Receiver-side figures of one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvStats {
    /// Fragments accepted into reassembly, and their payload bytes.
    pub frames_rx: u64,
    pub bytes_rx: u64,
    /// Fragments refused: already had it, older than the last unit, or
    /// disagreeing with the unit's length or count — and their bytes.
    pub frames_duplicate: u64,
    pub frames_stale: u64,
    pub frames_inconsistent: u64,
    pub bytes_rejected: u64,
    pub units_complete: u64,
    pub units_incomplete: u64,
    /// Units (and their received bytes) overwritten before being read.
    pub units_overwritten: u64,
    pub bytes_overwritten: u64,
    pub units_read: u64,
    /// Received bytes of the units read.
    pub bytes_read: u64,
}

#[derive(Debug)]
struct Reassembly {
    unit: u32,
    unit_len: u32,
    frag_count: u16,
    got: Vec<bool>,
    n_got: u16,
    bytes_got: u32,
    data: Vec<u8>,
    deadline: Instant,
}

/// A receiving session.
#[derive(Debug)]
pub struct RxSession {
    pub id: SessionId,
    bufs: VecDeque<(RxUnit, u32)>,
    cap: usize,
    cur: Option<Reassembly>,
    last_unit: Option<u32>,
    pub stats: RecvStats,
}

/// What became of a fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragOutcome {
    Accepted,
    /// Accepted and completed (or displaced) units: this many are ready.
    Ready(u32),
    Duplicate,
    Stale,
    Inconsistent,
}

/// Serial-number comparison (RFC 1982 style) of unit numbers.
fn newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl RxSession {
    pub fn new(id: SessionId, buffers: usize) -> Self {
        RxSession {
            id,
            bufs: VecDeque::with_capacity(buffers),
            cap: buffers,
            cur: None,
            last_unit: None,
            stats: RecvStats::default(),
        }
    }

    /// A fragment of this session arrived at `now`. A unit not complete
    /// one `wait` later is handed up incomplete.
    pub fn handle_fragment(
        &mut self,
        now: Instant,
        d: &RtData<'_>,
        wait: Duration,
        max_unit: u32,
    ) -> FragOutcome {
        let len = d.payload.len() as u64;
        if d.unit_len > max_unit {
            self.stats.frames_inconsistent += 1;
            self.stats.bytes_rejected += len;
            return FragOutcome::Inconsistent;
        }
        if self.last_unit.is_some_and(|l| !newer(d.unit, l)) {
            self.stats.frames_stale += 1;
            self.stats.bytes_rejected += len;
            return FragOutcome::Stale;
        }
        let mut ready = 0;
        if let Some(r) = &self.cur {
            if r.unit == d.unit {
                if r.unit_len != d.unit_len || r.frag_count != d.frag_count {
                    self.stats.frames_inconsistent += 1;
                    self.stats.bytes_rejected += len;
                    return FragOutcome::Inconsistent;
                }
            } else if newer(d.unit, r.unit) {
                // The sender moved on: what we have of the older unit is
                // all there will be.
                self.finalize();
                ready += 1;
            } else {
                self.stats.frames_stale += 1;
                self.stats.bytes_rejected += len;
                return FragOutcome::Stale;
            }
        }
        let r = self.cur.get_or_insert_with(|| Reassembly {
            unit: d.unit,
            unit_len: d.unit_len,
            frag_count: d.frag_count,
            got: vec![false; d.frag_count as usize],
            n_got: 0,
            bytes_got: 0,
            data: vec![0; d.unit_len as usize],
            deadline: now + wait,
        });
        let i = d.frag as usize;
        if r.got.get(i).copied().unwrap_or(true) {
            self.stats.frames_duplicate += 1;
            self.stats.bytes_rejected += len;
            return if ready > 0 {
                FragOutcome::Ready(ready)
            } else {
                FragOutcome::Duplicate
            };
        }
        let off = d.offset as usize;
        // The parser checked offset + len <= unit_len, and unit_len matches.
        if let Some(dst) = r.data.get_mut(off..off + d.payload.len()) {
            dst.copy_from_slice(d.payload);
        }
        r.got[i] = true;
        r.n_got += 1;
        r.bytes_got = r.bytes_got.saturating_add(d.payload.len() as u32);
        self.stats.frames_rx += 1;
        self.stats.bytes_rx += len;
        if r.n_got == r.frag_count {
            self.finalize();
            ready += 1;
        }
        if ready > 0 {
            FragOutcome::Ready(ready)
        } else {
            FragOutcome::Accepted
        }
    }

    /// Hand the unit under reassembly to the receive buffers, overwriting
    /// the oldest unread one if all are full.
    fn finalize(&mut self) -> bool {
        let Some(r) = self.cur.take() else {
            return false;
        };
        let complete = r.n_got == r.frag_count;
        if complete {
            self.stats.units_complete += 1;
        } else {
            self.stats.units_incomplete += 1;
        }
        let missing: Vec<u16> = (0..r.frag_count).filter(|&i| !r.got[i as usize]).collect();
        let unit = RxUnit {
            number: r.unit,
            data: r.data,
            complete,
            missing,
            bytes_missing: r.unit_len.saturating_sub(r.bytes_got),
        };
        if self.bufs.len() >= self.cap {
            if let Some((_, bytes)) = self.bufs.pop_front() {
                self.stats.units_overwritten += 1;
                self.stats.bytes_overwritten += bytes as u64;
            }
        }
        self.last_unit = Some(r.unit);
        self.bufs.push_back((unit, r.bytes_got));
        true
    }

    /// The sender passed the token on: its RT visit is over, so the unit
    /// under reassembly will get no more fragments.
    pub fn handle_sender_done(&mut self) -> bool {
        self.finalize()
    }

    /// Give up on a unit whose wait ran out.
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        if self.cur.as_ref().is_some_and(|r| r.deadline <= now) {
            return self.finalize();
        }
        false
    }
    pub fn deadline(&self) -> Option<Instant> {
        self.cur.as_ref().map(|r| r.deadline)
    }

    /// Take the oldest unread unit (non-blocking `retherRecv`).
    pub fn recv(&mut self) -> Option<RxUnit> {
        let (u, bytes) = self.bufs.pop_front()?;
        self.stats.units_read += 1;
        self.stats.bytes_read += bytes as u64;
        Some(u)
    }
    pub fn ready_units(&self) -> usize {
        self.bufs.len()
    }
    /// Received bytes held: in unread units and in reassembly (ledger).
    pub fn bytes_held(&self) -> u64 {
        self.bufs.iter().map(|(_, b)| *b as u64).sum::<u64>()
            + self.cur.as_ref().map_or(0, |r| r.bytes_got as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> SessionId {
        SessionId { sender: 1, num: 0 }
    }

    /// Fragments of one unit as the sender makes them.
    fn fragments(unit: u32, data: &[u8]) -> Vec<(u16, u16, u32, Vec<u8>)> {
        let mut s = TxSession::new(id(), 2, 100_000, Duration(1), 4);
        s.next_unit = unit;
        s.send(data.to_vec()).unwrap();
        let mut u = s.take_unit().unwrap();
        let mut v = Vec::new();
        while let Some(f) = u.fragment() {
            v.push((f.frag, f.frag_count, f.offset, f.payload.to_vec()));
            u.advance();
        }
        v
    }

    fn feed(rx: &mut RxSession, unit: u32, len: u32, f: &(u16, u16, u32, Vec<u8>)) -> FragOutcome {
        let d = RtData {
            sender: 1,
            session_num: 0,
            receiver: 2,
            unit,
            frag: f.0,
            frag_count: f.1,
            unit_len: len,
            offset: f.2,
            payload: &f.3,
        };
        rx.handle_fragment(Instant(0), &d, Duration::from_millis(33), 1 << 20)
    }

    #[test]
    fn send_buffers_refuse_when_full_or_too_large() {
        let mut s = TxSession::new(id(), 2, 6250, Duration(1), 2);
        assert_eq!(
            s.send(vec![0; 6251]),
            Err(SendError::TooLarge { len: 6251, max: 6250 })
        );
        assert_eq!(s.send(Vec::new()), Err(SendError::Empty));
        s.send(vec![1; 6250]).unwrap();
        s.send(vec![2; 10]).unwrap();
        assert_eq!(s.send(vec![3; 10]), Err(SendError::BuffersFull));
        let u = s.take_unit().unwrap();
        assert_eq!((u.unit, u.frag_count), (0, 5));
        assert_eq!(s.free_buffers(), 1);
    }

    #[test]
    fn units_reassemble_in_any_order() {
        let data: Vec<u8> = (0..6250u32).map(|i| i as u8).collect();
        let mut fr = fragments(7, &data);
        fr.reverse();
        let mut rx = RxSession::new(id(), 2);
        for (k, f) in fr.iter().enumerate() {
            let o = feed(&mut rx, 7, 6250, f);
            assert_eq!(
                o,
                if k == 4 {
                    FragOutcome::Ready(1)
                } else {
                    FragOutcome::Accepted
                }
            );
        }
        let u = rx.recv().unwrap();
        assert!(u.complete);
        assert_eq!(u.data, data);
        assert_eq!(rx.stats.bytes_rx, 6250);
        assert_eq!(rx.stats.bytes_read, 6250);
    }

    #[test]
    fn a_lost_fragment_makes_the_unit_incomplete() {
        let data = vec![9u8; 4000];
        let fr = fragments(3, &data);
        let mut rx = RxSession::new(id(), 4);
        feed(&mut rx, 3, 4000, &fr[0]);
        feed(&mut rx, 3, 4000, &fr[2]);
        // The sender's token pass ends its visit.
        assert!(rx.handle_sender_done());
        let u = rx.recv().unwrap();
        assert!(!u.complete);
        assert_eq!(u.missing, vec![1]);
        assert_eq!(u.bytes_missing, 1474);
        assert_eq!(&u.data[1474..2948], &[0u8; 1474][..]);
        // Late fragments of that unit are stale now.
        assert_eq!(feed(&mut rx, 3, 4000, &fr[1]), FragOutcome::Stale);
    }

    #[test]
    fn a_newer_unit_displaces_the_one_in_reassembly_and_overwrites_unread() {
        let mut rx = RxSession::new(id(), 1);
        let a = fragments(0, &[1u8; 3000]);
        let b = fragments(1, &[2u8; 3000]);
        let c = fragments(2, &[3u8; 100]);
        feed(&mut rx, 0, 3000, &a[0]);
        assert_eq!(feed(&mut rx, 1, 3000, &b[0]), FragOutcome::Ready(1));
        assert_eq!(rx.stats.units_incomplete, 1);
        feed(&mut rx, 1, 3000, &b[1]);
        feed(&mut rx, 1, 3000, &b[2]);
        // Unit 1 complete: it overwrote unread unit 0 (one buffer).
        assert_eq!(rx.stats.units_overwritten, 1);
        assert_eq!(rx.stats.bytes_overwritten, 1474);
        assert_eq!(feed(&mut rx, 2, 100, &c[0]), FragOutcome::Ready(1));
        let u = rx.recv().unwrap();
        assert_eq!((u.number, u.complete), (2, true));
        assert!(rx.recv().is_none());
        // Ledger: every accepted byte was read, overwritten or is held.
        let s = rx.stats;
        assert_eq!(s.bytes_rx, s.bytes_read + s.bytes_overwritten + rx.bytes_held());
    }

    #[test]
    fn duplicates_and_inconsistent_fragments_are_counted() {
        let mut rx = RxSession::new(id(), 2);
        let a = fragments(0, &[1u8; 3000]);
        feed(&mut rx, 0, 3000, &a[0]);
        assert_eq!(feed(&mut rx, 0, 3000, &a[0]), FragOutcome::Duplicate);
        assert_eq!(feed(&mut rx, 0, 2999, &a[1]), FragOutcome::Inconsistent);
        assert_eq!(rx.stats.bytes_rejected, 2 * 1474);
        let d = RtData {
            sender: 1,
            session_num: 0,
            receiver: 2,
            unit: 9,
            frag: 0,
            frag_count: 1,
            unit_len: 2 << 20,
            offset: 0,
            payload: &[0; 4],
        };
        assert_eq!(
            rx.handle_fragment(Instant(0), &d, Duration(1), 1 << 20),
            FragOutcome::Inconsistent
        );
    }

    #[test]
    fn the_wait_backstop_finalizes() {
        let mut rx = RxSession::new(id(), 2);
        let a = fragments(0, &[1u8; 3000]);
        feed(&mut rx, 0, 3000, &a[0]);
        assert_eq!(rx.deadline(), Some(Instant(33_000_000)));
        assert!(!rx.handle_timeout(Instant(32_999_999)));
        assert!(rx.handle_timeout(Instant(33_000_000)));
        assert!(!rx.recv().unwrap().complete);
    }

    #[test]
    fn unit_numbers_wrap() {
        assert!(newer(0, u32::MAX));
        assert!(!newer(u32::MAX, 0));
    }
}
