//! Deficit round robin, Shreedhar & Varghese, "Efficient Fair Queueing
//! Using Deficit Round Robin" (SIGCOMM 1995, IEEE/ACM ToN 1996), §3.
//!
//! Backlogged queues sit in a round-robin list. When a queue's turn comes
//! its deficit counter grows by its quantum Qᵢ and it sends head packets
//! while the head fits in the deficit; the remainder carries to its next
//! turn, and an emptied queue loses it (deficit reset to 0), so an idle
//! queue cannot hoard credit. Each backlogged queue gets Qᵢ/ΣQ of the link
//! to within one maximum packet; work per packet is O(1) when every
//! Qᵢ ≥ the maximum packet size (smaller quanta are accepted, they only
//! cost extra rounds).

use crate::config::ConfigError;
use std::collections::VecDeque;

use super::conf::{FairConf, QueueInfo};
use super::queues::Queues;
use crate::packet::Packet;
use crate::sched::{Dropped, QueueStats, Scheduler};
use crate::time::Instant;

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DrrFlow {
    deficit: u64,
}

/// DRR. Each queue's [`super::QueueConf::weight`] is its quantum in bytes.
pub struct Drr {
    q: Queues<(), DrrFlow>,
    /// Backlogged queues in round-robin order; the front one is served.
    active: VecDeque<u32>,
    /// The front queue has had its quantum for the current turn.
    turn_started: bool,
    stats: QueueStats,
}

impl Drr {
    pub fn new(conf: FairConf) -> Result<Self, ConfigError> {
        conf.validate("drr", "quantum")?;
        Ok(Drr {
            q: Queues::new(&conf),
            active: VecDeque::new(),
            turn_started: false,
            stats: QueueStats::default(),
        })
    }
    pub fn queue(&self, key: u32) -> Option<QueueInfo> {
        self.q.info(key)
    }
    pub fn flows(&self) -> usize {
        self.q.active()
    }
    /// Deficit counter of the queue for `key`.
    pub fn deficit(&self, key: u32) -> Option<u64> {
        self.q.slot_of(key).map(|i| self.q.slots[i as usize].st.deficit)
    }
    /// Bytes of scheduler state per active flow, queued packets excluded
    /// (slot, index entry, round-robin list entry).
    pub fn bytes_per_flow() -> usize {
        Queues::<(), DrrFlow>::bytes_per_queue() + std::mem::size_of::<u32>()
    }
}

impl Scheduler for Drr {
    fn enqueue(&mut self, pkt: Packet, _now: Instant) -> Result<(), Dropped> {
        let (i, pkt) = self.q.admit(pkt, &mut self.stats)?;
        if self.q.slots[i as usize].fifo.is_empty() {
            self.active.push_back(i);
        }
        self.q.push(i, pkt, (), &mut self.stats);
        Ok(())
    }

    fn dequeue(&mut self, _now: Instant) -> Option<Packet> {
        loop {
            let i = *self.active.front()?;
            let overhead = self.q.overhead as u64;
            let s = &mut self.q.slots[i as usize];
            if !self.turn_started {
                s.st.deficit += s.weight as u64;
                self.turn_started = true;
            }
            let cost = s.fifo.front().map_or(0, |(p, _)| p.len() as u64 + overhead);
            if cost <= s.st.deficit {
                s.st.deficit -= cost;
                let (pkt, ()) = self.q.pop(i, &mut self.stats)?;
                let s = &mut self.q.slots[i as usize];
                if s.fifo.is_empty() {
                    s.st.deficit = 0;
                    self.active.pop_front();
                    self.turn_started = false;
                    self.q.release(i);
                }
                return Some(pkt);
            }
            // Head does not fit: keep the deficit, next queue's turn.
            self.active.rotate_left(1);
            self.turn_started = false;
        }
    }

    /// The head `dequeue` would send, found by counting rounds instead of
    /// running them: the queue at position p of the round-robin list, with
    /// deficit D, quantum Q and head cost c, is visited once per round and
    /// gets Q each visit (the front queue not on the visit in progress, if
    /// its turn has started), so it first fits after r = ⌈(c − D − Q)/Q⌉
    /// further rounds; the smallest (r, p) is served. O(1) when the front
    /// queue's head fits, O(active queues) otherwise; nothing changes.
    fn peek(&self, _now: Instant) -> Option<&Packet> {
        let overhead = self.q.overhead as u64;
        let mut best: Option<(u64, u32)> = None;
        for (pos, &i) in self.active.iter().enumerate() {
            let s = &self.q.slots[i as usize];
            let cost = s.fifo.front().map_or(0, |(p, _)| p.len() as u64 + overhead);
            let quantum = s.weight as u64;
            let first = s.st.deficit + if pos == 0 && self.turn_started { 0 } else { quantum };
            let rounds = cost.saturating_sub(first).div_ceil(quantum);
            if best.is_none_or(|(r, _)| rounds < r) {
                best = Some((rounds, i));
                if rounds == 0 {
                    break;
                }
            }
        }
        let i = best?.1;
        self.q.slots[i as usize].fifo.front().map(|(p, _)| p)
    }

    fn poll_at(&self, now: Instant) -> Option<Instant> {
        (self.q.len > 0).then_some(now)
    }
    fn quiet_when_empty(&self) -> bool {
        true
    }
    fn len(&self) -> usize {
        self.q.len
    }
    fn bytes(&self) -> usize {
        self.q.bytes
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "drr"
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::pkt;
    use super::*;
    use crate::sched::QueueConf;

    #[test]
    fn golden_shreedhar_varghese_rounds() {
        // Quanta A=500, B=300 bytes; A: 3×400, B: 4×200.
        // Round 1: A 500 → A1 (100 left); B 300 → B1 (100 left).
        // Round 2: A 600 → A2 (200);      B 400 → B2, B3 (0).
        // Round 3: A 700 → A3, empty;     B 300 → B4, empty.
        let c = FairConf::classes(vec![
            (0, QueueConf::new(500, 10, 10_000)),
            (1, QueueConf::new(300, 10, 10_000)),
        ]);
        let mut d = Drr::new(c).unwrap();
        let t = Instant(0);
        for uid in 1..=3 {
            d.enqueue(pkt(uid, 0, 400), t).unwrap();
        }
        for uid in 4..=7 {
            d.enqueue(pkt(uid, 1, 200), t).unwrap();
        }
        let mut order = vec![];
        for _ in 0..3 {
            order.push(d.dequeue(t).unwrap().meta.uid);
        }
        // After A2 the carried deficits are visible.
        assert_eq!((d.deficit(0), d.deficit(1)), (Some(200), Some(100)));
        order.extend(std::iter::from_fn(|| d.dequeue(t)).map(|p| p.meta.uid));
        assert_eq!(order, vec![1, 4, 2, 5, 6, 3, 7]);
        // Emptied queues lose their deficit.
        assert_eq!((d.deficit(0), d.deficit(1)), (Some(0), Some(0)));
    }

    #[test]
    fn small_quantum_still_sends_large_packets() {
        let mut d = Drr::new(FairConf::per_flow(QueueConf::new(100, 10, 10_000))).unwrap();
        let t = Instant(0);
        d.enqueue(pkt(1, 1, 1_000), t).unwrap();
        d.enqueue(pkt(2, 2, 150), t).unwrap();
        // Flow 2 needs 2 turns, flow 1 ten: flow 2 goes first.
        let order: Vec<u64> = std::iter::from_fn(|| d.dequeue(t)).map(|p| p.meta.uid).collect();
        assert_eq!(order, vec![2, 1]);
        assert_eq!(d.flows(), 0);
    }

    #[test]
    fn overhead_is_charged() {
        // Quantum 124 with 24 bytes of overhead: exactly one 100-byte
        // packet per turn, so the two flows alternate.
        let c = FairConf::classes(vec![
            (0, QueueConf::new(124, 10, 10_000)),
            (1, QueueConf::new(124, 10, 10_000)),
        ])
        .with_overhead(24);
        let mut d = Drr::new(c).unwrap();
        let t = Instant(0);
        for uid in 0..6 {
            d.enqueue(pkt(uid, (uid / 3) as u16, 100), t).unwrap();
        }
        let order: Vec<u64> = std::iter::from_fn(|| d.dequeue(t)).map(|p| p.meta.uid).collect();
        assert_eq!(order, vec![0, 3, 1, 4, 2, 5]);
    }
}
