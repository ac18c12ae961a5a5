//! Time-aware shaper (IEEE 802.1Qbv, "taprio" in Linux): a gate control
//! list opens and closes each traffic class's queue on a repeating cycle.
//! Among the open classes the lowest class number is served first (strict
//! priority, as our [`Prio`](super::Prio)); a frame only starts if its
//! last bit leaves before its gate closes — the guard band that keeps
//! scheduled traffic's windows free, which is what TSN users rely on and
//! what the TDP wheel does for time frames (ICC 2006 §II-B).
//!
//! The cycle is anchored at `base_time`: entry `k` of the list is open from
//! `base + n·cycle + Σ_{j<k} d_j` for `d_k`, for every `n`.

use std::collections::VecDeque;

use super::{DropReason, Dropped, QueueStats, Scheduler};
use crate::packet::{Framing, Packet};
use crate::time::{Duration, Instant};

/// One gate control list entry: for `duration`, classes whose bit is set
/// in `open` may transmit (bit `c` = class `c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateEntry {
    pub duration: Duration,
    pub open: u32,
}

/// A traffic class's FIFO (taprio's children are FIFOs here, so the
/// guard band can look at the head frame's size before committing).
struct ClassQ {
    q: VecDeque<Packet>,
    bytes: usize,
    limit_pkts: usize,
    limit_bytes: usize,
}

pub struct Taprio {
    classes: Vec<ClassQ>,
    gcl: Vec<GateEntry>,
    cycle: u64,
    base: Instant,
    rate_bps: u64,
    framing: Framing,
    stats: QueueStats,
    /// Frames held back by a closed gate or the guard band (counted once
    /// per frame and wake-up, for reports).
    pub gate_waits: u64,
}

impl Taprio {
    /// `n_classes` FIFOs of `limit_pkts`/`limit_bytes` each; a packet goes
    /// to class `meta.class` (clamped to the last class). Refuses an empty
    /// list, zero durations, and gate bits for classes that do not exist.
    pub fn new(
        n_classes: usize,
        limit_pkts: usize,
        limit_bytes: usize,
        gcl: Vec<GateEntry>,
        base: Instant,
        rate_bps: u64,
        framing: Framing,
    ) -> Result<Self, String> {
        if n_classes == 0 || n_classes > 32 {
            return Err("taprio needs 1 to 32 traffic classes".into());
        }
        let classes: Vec<ClassQ> = (0..n_classes)
            .map(|_| ClassQ {
                q: VecDeque::new(),
                bytes: 0,
                limit_pkts,
                limit_bytes,
            })
            .collect();
        if gcl.is_empty() {
            return Err("taprio needs at least one gate control list entry".into());
        }
        if let Some((k, _)) = gcl.iter().enumerate().find(|(_, e)| e.duration == Duration::ZERO) {
            return Err(format!("taprio entry {k} has a zero duration"));
        }
        let all = if classes.len() == 32 {
            u32::MAX
        } else {
            (1u32 << classes.len()) - 1
        };
        if let Some((k, e)) = gcl.iter().enumerate().find(|(_, e)| e.open & !all != 0) {
            return Err(format!(
                "taprio entry {k} opens gates {:#x} but there are only {} classes",
                e.open,
                classes.len()
            ));
        }
        if rate_bps == 0 {
            return Err("taprio needs the link rate".into());
        }
        let cycle = gcl.iter().map(|e| e.duration.as_nanos()).sum();
        Ok(Taprio {
            classes,
            gcl,
            cycle,
            base,
            rate_bps,
            framing,
            stats: QueueStats::default(),
            gate_waits: 0,
        })
    }

    pub fn cycle(&self) -> Duration {
        Duration(self.cycle)
    }

    /// The entry in force at `now`: (index, start, end).
    fn entry_at(&self, now: Instant) -> (usize, Instant, Instant) {
        let since = now.as_nanos().saturating_sub(self.base.as_nanos());
        let cycle_start = now.as_nanos() - since % self.cycle;
        let mut t = cycle_start;
        for (k, e) in self.gcl.iter().enumerate() {
            let end = t + e.duration.as_nanos();
            if now.as_nanos() < end {
                return (k, Instant(t), Instant(end));
            }
            t = end;
        }
        // Unreachable when durations sum to the cycle; answer the last entry.
        let k = self.gcl.len() - 1;
        (k, Instant(t - self.gcl[k].duration.as_nanos()), Instant(t))
    }

    /// When class `c`'s gate is next open at or after `t`, and until when
    /// it stays open (merging consecutive entries). `None` if never.
    fn window(&self, c: usize, t: Instant) -> Option<(Instant, Instant)> {
        let bit = 1u32 << c;
        if self.gcl.iter().all(|e| e.open & bit == 0) {
            return None;
        }
        let (mut k, _, mut end) = self.entry_at(t);
        let mut start = t;
        // Find the first entry (from t on) with the gate open.
        let mut steps = 0;
        while self.gcl[k].open & bit == 0 {
            start = end;
            k = (k + 1) % self.gcl.len();
            end += self.gcl[k].duration;
            steps += 1;
            if steps > self.gcl.len() {
                return None;
            }
        }
        // Extend across following entries that keep it open (a gate open
        // in every entry stays open for good).
        let mut n = 0;
        loop {
            let next = (k + 1) % self.gcl.len();
            if self.gcl[next].open & bit == 0 {
                break;
            }
            n += 1;
            if n >= self.gcl.len() {
                return Some((start, Instant::MAX));
            }
            k = next;
            end += self.gcl[k].duration;
        }
        Some((start, end))
    }

    /// The class whose head goes at `now`: the lowest open class whose head
    /// fits before its gate closes. Also how many open classes with a
    /// frame were passed over for the guard band (`gate_waits`).
    fn next_class(&self, now: Instant) -> (Option<usize>, u64) {
        let (k, _, _) = self.entry_at(now);
        let open = self.gcl[k].open;
        let mut waits = 0;
        for c in 0..self.classes.len() {
            if open & (1 << c) == 0 {
                continue;
            }
            let Some(head) = self.classes[c].q.front().map(|p| p.len()) else {
                continue;
            };
            if self.fits(c, now, head) != Some(now) {
                // Gate open but the frame would overrun its close.
                waits += 1;
                continue;
            }
            return (Some(c), waits);
        }
        (None, waits)
    }

    fn fits(&self, c: usize, now: Instant, len: usize) -> Option<Instant> {
        let tx = Duration::for_bytes(self.framing.wire_bytes(len), self.rate_bps);
        let (start, end) = self.window(c, now)?;
        if start <= now && now + tx <= end {
            return Some(now);
        }
        // Too late in this window (guard band) or gate shut: the next
        // window long enough for the frame.
        let mut t = if start > now { start } else { end };
        for _ in 0..=2 * self.gcl.len() {
            let (s, e) = self.window(c, t)?;
            if e.as_nanos().saturating_sub(s.as_nanos()) >= tx.as_nanos() {
                return Some(s);
            }
            t = e;
        }
        None
    }
}

impl Scheduler for Taprio {
    fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped> {
        let c = (pkt.meta.class as usize).min(self.classes.len() - 1);
        let len = pkt.len();
        let q = &self.classes[c];
        // Full, or a gate that never opens long enough for the frame (it
        // would wait forever): refuse now, counted.
        if q.q.len() >= q.limit_pkts || q.bytes + len > q.limit_bytes || self.fits(c, now, len).is_none() {
            self.stats.on_drop(DropReason::QueueFull);
            return Err(Dropped {
                pkt,
                reason: DropReason::QueueFull,
            });
        }
        let q = &mut self.classes[c];
        q.bytes += len;
        q.q.push_back(pkt);
        self.stats.on_enqueue(len);
        Ok(())
    }

    fn dequeue(&mut self, now: Instant) -> Option<Packet> {
        let (class, waits) = self.next_class(now);
        self.gate_waits += waits;
        let q = &mut self.classes[class?];
        let p = q.q.pop_front()?;
        q.bytes -= p.len();
        self.stats.on_dequeue(p.len());
        Some(p)
    }

    fn peek(&self, now: Instant) -> Option<&Packet> {
        let (class, _) = self.next_class(now);
        self.classes[class?].q.front()
    }

    fn poll_at(&self, now: Instant) -> Option<Instant> {
        let mut best: Option<Instant> = None;
        for (c, q) in self.classes.iter().enumerate() {
            let Some(head) = q.q.front() else { continue };
            if let Some(at) = self.fits(c, now, head.len()) {
                best = Some(best.map_or(at, |b| b.min(at)));
            }
        }
        best
    }
    fn len(&self) -> usize {
        self.classes.iter().map(|c| c.q.len()).sum()
    }
    fn bytes(&self) -> usize {
        self.classes.iter().map(|c| c.bytes).sum()
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "taprio"
    }
    fn counters(&self) -> Vec<(String, u64)> {
        vec![("gate_waits".into(), self.gate_waits)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Meta;

    fn pkt(uid: u64, class: u16, len: usize) -> Packet {
        Packet::new(
            vec![0; len],
            Meta {
                uid,
                class,
                ..Meta::default()
            },
        )
    }

    /// 100 Mb/s, cycle 1 ms: class 0 alone for 200 us, then class 1 for 800 us.
    fn two_windows() -> Taprio {
        let gcl = vec![
            GateEntry {
                duration: Duration::from_micros(200),
                open: 0b01,
            },
            GateEntry {
                duration: Duration::from_micros(800),
                open: 0b10,
            },
        ];
        Taprio::new(2, 100, 1 << 20, gcl, Instant(0), 100_000_000, Framing::default()).unwrap()
    }

    #[test]
    fn gates_and_guard_band() {
        let mut t = two_windows();
        // Class 1 at t = 0: its gate opens at 200 us.
        t.enqueue(pkt(1, 1, 1000), Instant(0)).unwrap();
        assert!(t.dequeue(Instant(0)).is_none());
        assert_eq!(t.poll_at(Instant(0)), Some(Instant(200_000)));
        assert_eq!(t.dequeue(Instant(200_000)).unwrap().meta.uid, 1);
        // Class 0 at 150 us: a 1000-byte frame (81.92 us on the wire)
        // would overrun the window ending at 200 us: it waits for the next
        // cycle's window at 1 ms.
        t.enqueue(pkt(2, 0, 1000), Instant(150_000)).unwrap();
        assert!(t.dequeue(Instant(150_000)).is_none());
        assert_eq!(t.poll_at(Instant(150_000)), Some(Instant(1_000_000)));
        assert_eq!(t.dequeue(Instant(1_000_000)).unwrap().meta.uid, 2);
        assert!(t.gate_waits > 0);
        assert_eq!(t.stats().deq_pkts, 2);
    }

    #[test]
    fn open_classes_in_priority_order() {
        let gcl = vec![GateEntry {
            duration: Duration::from_micros(100),
            open: 0b11,
        }];
        let mut t = Taprio::new(2, 10, 1 << 20, gcl, Instant(0), 1_000_000_000, Framing::default()).unwrap();
        t.enqueue(pkt(1, 1, 100), Instant(0)).unwrap();
        t.enqueue(pkt(2, 0, 100), Instant(0)).unwrap();
        t.enqueue(pkt(3, 7, 100), Instant(0)).unwrap(); // clamped to class 1
        let order: Vec<u64> = std::iter::from_fn(|| t.dequeue(Instant(10)))
            .map(|p| p.meta.uid)
            .collect();
        assert_eq!(order, vec![2, 1, 3]);
        // Always open: poll_at says now.
        t.enqueue(pkt(4, 1, 100), Instant(20)).unwrap();
        assert_eq!(t.poll_at(Instant(20)), Some(Instant(20)));
    }

    #[test]
    fn bad_lists_and_impossible_frames_are_refused() {
        let ok = |gcl: Vec<GateEntry>| {
            Taprio::new(2, 10, 1 << 20, gcl, Instant(0), 100_000_000, Framing::default())
        };
        assert!(ok(vec![]).is_err());
        assert!(ok(vec![GateEntry {
            duration: Duration::ZERO,
            open: 1
        }])
        .is_err());
        let e = ok(vec![GateEntry {
            duration: Duration(1000),
            open: 0b100,
        }])
        .err()
        .unwrap();
        assert!(e.contains("only 2 classes"), "{e}");
        // Class 1 never opens: its frames are refused, not held forever.
        let mut t = ok(vec![GateEntry {
            duration: Duration::from_micros(100),
            open: 0b01,
        }])
        .unwrap();
        let e = t.enqueue(pkt(1, 1, 100), Instant(0)).unwrap_err();
        assert_eq!(e.reason, DropReason::QueueFull);
        // A frame longer than any window is refused too.
        let mut t = ok(vec![
            GateEntry {
                duration: Duration::from_micros(10),
                open: 0b01,
            },
            GateEntry {
                duration: Duration::from_micros(90),
                open: 0b10,
            },
        ])
        .unwrap();
        assert!(t.enqueue(pkt(2, 0, 1500), Instant(0)).is_err());
        assert_eq!(t.stats().total_drops(), 1);
    }

    #[test]
    fn backlogged_class_fills_its_window_but_never_overruns_it() {
        // Best effort (class 6) backlogged with 1514-byte frames (123.04 us
        // each at 100 Mb/s) may use only 800 us of every 1 ms: 6 frames.
        let gcl = vec![
            GateEntry {
                duration: Duration::from_micros(200),
                open: 0b11,
            },
            GateEntry {
                duration: Duration::from_micros(800),
                open: 0b111_1100,
            },
        ];
        let mut t = Taprio::new(7, 500, 1 << 20, gcl, Instant(0), 100_000_000, Framing::default()).unwrap();
        for i in 0..400 {
            t.enqueue(pkt(i, 6, 1514), Instant(0)).unwrap();
        }
        let mut now = Instant(0);
        let mut starts = Vec::new();
        while now < Instant(20_000_000) {
            if let Some(p) = t.dequeue(now) {
                starts.push(now);
                now += Duration::for_bytes(Framing::default().wire_bytes(p.len()), 100_000_000);
                continue;
            }
            let next = t.poll_at(now).expect("backlog left");
            assert!(next > now, "poll_at {next:?} not after {now:?} with nothing sent");
            now = next;
        }
        assert_eq!(starts.len(), 20 * 6);
        for s in starts {
            let phase = s.as_nanos() % 1_000_000;
            assert!(
                phase >= 200_000 && phase + 123_040 <= 1_000_000,
                "frame at phase {phase} ns"
            );
        }
    }

    #[test]
    fn windows_recur_every_cycle() {
        let t = two_windows();
        for n in 0..5u64 {
            let base = n * 1_000_000;
            assert_eq!(
                t.window(0, Instant(base + 50_000)),
                Some((Instant(base + 50_000), Instant(base + 200_000)))
            );
            assert_eq!(
                t.window(1, Instant(base + 50_000)),
                Some((Instant(base + 200_000), Instant(base + 1_000_000)))
            );
        }
    }
}
