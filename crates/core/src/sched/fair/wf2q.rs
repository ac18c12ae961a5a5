//! WF²Q+ (Bennett & Zhang, "Hierarchical Packet Fair Queueing
//! Algorithms", SIGCOMM 1996, §3): worst-case fair weighted fair queueing.
//!
//! Each backlogged flow i has a virtual start Sᵢ and finish Fᵢ = Sᵢ + L/wᵢ
//! for its head packet: Sᵢ = max(Fᵢ, V) when the flow becomes backlogged,
//! Sᵢ = Fᵢ (previous) when its next packet reaches the head. Only
//! *eligible* flows (Sᵢ ≤ V) may be served — that is what stops a
//! heavy-weight flow from running ahead of its GPS service — and among
//! them the smallest Fᵢ wins. The system virtual time needs no GPS
//! emulation: after serving W bytes, V ← max(V + W/Σw, min_{i backlogged} Sᵢ).
//!
//! Σw is over flows that are backlogged or went idle with Fᵢ > V (their
//! share is still "owed" in the fluid reference; they leave Σw when V
//! passes Fᵢ), as in the dummynet/FreeBSD WF²Q+. Tags are integers in the
//! same nano-bits-per-unit-weight as [`super::Wfq`]; cost is O(log n) per
//! packet (heaps of eligible flows by F, ineligible ones by S, idle ones by
//! F). With many flows the eligible and pending heaps are radix heaps
//! ([`super::heap::TagQueue`], same exact order): pending start tags only
//! grow (a flow is pending only with S > V), and the few eligible finish
//! tags below the last one served wait in a side heap.

use super::conf::{FairConf, QueueInfo};
use super::heap::{KeyHeap, TagQueue, Tagged};
use super::queues::Queues;
use super::{div_rem, VT_PER_BYTE};
use crate::packet::Packet;
use crate::sched::{Dropped, QueueStats, Scheduler};
use crate::time::Instant;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// Not backlogged and not counted in Σw.
    #[default]
    Idle,
    /// Has packets; in `eligible` or `pending`.
    Active,
    /// No packets but Fᵢ > V: still counted in Σw, entry in `idle`.
    Remembered,
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Wf2qFlow {
    start: u128,
    finish: u128,
    phase: Phase,
}

/// WF²Q+. See the module documentation.
pub struct Wf2q {
    q: Queues<u64, Wf2qFlow>,
    v: u128,
    wsum: u64,
    /// Active flows with S ≤ V, keyed by F.
    eligible: TagQueue,
    /// Active flows with S > V, keyed by S.
    pending: TagQueue,
    /// Remembered flows keyed by F; `seq` holds the slot generation.
    idle: KeyHeap,
    seq: u64,
    stats: QueueStats,
}

impl Wf2q {
    pub fn new(conf: FairConf) -> Result<Self, String> {
        conf.validate("wf2q", "weight")?;
        Ok(Wf2q {
            q: Queues::new(&conf),
            v: 0,
            wsum: 0,
            eligible: TagQueue::new(),
            pending: TagQueue::new(),
            idle: KeyHeap::new(),
            seq: 0,
            stats: QueueStats::default(),
        })
    }

    /// System virtual time, nano-bits per unit weight.
    pub fn virtual_time(&self) -> u128 {
        self.v
    }
    /// The same scheduler on heaps only (the reference for its radix
    /// queues in tests).
    #[cfg(test)]
    pub(crate) fn heap_only(&mut self) {
        self.eligible.heap_only();
        self.pending.heap_only();
    }
    pub fn queue(&self, key: u32) -> Option<QueueInfo> {
        self.q.info(key)
    }
    pub fn flows(&self) -> usize {
        self.q.active()
    }
    /// Bytes of scheduler state per active flow, queued packets excluded
    /// (slot, index entry, one heap entry).
    pub fn bytes_per_flow() -> usize {
        Queues::<u64, Wf2qFlow>::bytes_per_queue() + KeyHeap::ENTRY_BYTES
    }

    /// Files an active flow under eligible or pending by its start tag.
    fn schedule(&mut self, i: u32, seq: u64) {
        let st = self.q.slots[i as usize].st;
        if st.start <= self.v {
            self.eligible.push(Tagged::new(st.finish, seq, i));
        } else {
            self.pending.push(Tagged::new(st.start, seq, i));
        }
    }
}

impl Scheduler for Wf2q {
    fn enqueue(&mut self, pkt: Packet, _now: Instant) -> Result<(), Dropped> {
        let (i, pkt) = self.q.admit(pkt, &mut self.stats)?;
        let cost = self.q.cost(&pkt) as u128 * VT_PER_BYTE;
        let seq = self.seq;
        self.seq += 1;
        let s = &mut self.q.slots[i as usize];
        let newly_backlogged = s.fifo.is_empty();
        if newly_backlogged {
            if s.st.phase == Phase::Idle {
                self.wsum += s.weight as u64;
            }
            s.st.start = s.st.finish.max(self.v);
            s.st.finish = s.st.start + div_rem(cost, s.weight as u64).0;
            s.st.phase = Phase::Active;
        }
        self.q.push(i, pkt, seq, &mut self.stats);
        if newly_backlogged {
            self.schedule(i, seq);
        }
        Ok(())
    }

    fn dequeue(&mut self, _now: Instant) -> Option<Packet> {
        if self.q.len == 0 {
            return None;
        }
        // V ≥ min start over backlogged flows, so someone is eligible.
        if self.eligible.is_empty() {
            if let Some(p) = self.pending.peek() {
                self.v = self.v.max(p.tag());
            }
        }
        while let Some(p) = self.pending.peek() {
            if p.tag() > self.v {
                break;
            }
            self.pending.pop();
            let f = self.q.slots[p.slot as usize].st.finish;
            self.eligible.push(Tagged::new(f, p.low() as u64, p.slot));
        }
        let e = self.eligible.pop()?;
        let i = e.slot;
        let (pkt, _) = self.q.pop(i, &mut self.stats)?;
        let cost = self.q.cost(&pkt) as u128 * VT_PER_BYTE;
        self.v += div_rem(cost, self.wsum.max(1)).0;

        // Flows idle with F ≤ V have had their fluid share: drop them from Σw.
        while let Some(x) = self.idle.peek() {
            if x.tag() > self.v {
                break;
            }
            self.idle.pop();
            let s = &mut self.q.slots[x.slot as usize];
            if s.gen == x.low() && s.st.phase == Phase::Remembered && s.st.finish == x.tag() {
                s.st.phase = Phase::Idle;
                self.wsum -= s.weight as u64;
                self.q.release(x.slot);
            }
        }

        let s = &mut self.q.slots[i as usize];
        match s.fifo.front() {
            Some((next, seq)) => {
                let seq = *seq;
                let cost = (next.len() as u64 + self.q.overhead as u64) as u128 * VT_PER_BYTE;
                s.st.start = s.st.finish;
                s.st.finish = s.st.start + div_rem(cost, s.weight as u64).0;
                self.schedule(i, seq);
            }
            None if s.st.finish > self.v => {
                s.st.phase = Phase::Remembered;
                self.idle.push(Tagged::new(s.st.finish, s.gen as u64, i));
            }
            None => {
                s.st.phase = Phase::Idle;
                self.wsum -= s.weight as u64;
                self.q.release(i);
            }
        }
        Some(pkt)
    }

    /// The head `dequeue` would send, decided without moving V or any
    /// flow: V as dequeue would raise it (to the smallest start if nobody
    /// is eligible), then the smallest (F, arrival) among the eligible
    /// flows and the pending ones that this V makes eligible.
    fn peek(&self, _now: Instant) -> Option<&Packet> {
        if self.q.len == 0 {
            return None;
        }
        let mut v = self.v;
        if self.eligible.is_empty() {
            if let Some(p) = self.pending.peek() {
                v = v.max(p.tag());
            }
        }
        let mut best = self.eligible.peek();
        self.pending.for_each_up_to(v, |p| {
            let f = self.q.slots[p.slot as usize].st.finish;
            let e = Tagged::new(f, p.low() as u64, p.slot);
            if best.is_none_or(|b| e.key() < b.key()) {
                best = Some(e);
            }
        });
        let i = best?.slot;
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
        "wf2q"
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::pkt;
    use super::*;
    use crate::sched::{QueueConf, Wfq};

    fn conf() -> FairConf {
        // Bennett & Zhang's example: flow 0 has half the link (w=10 of 20),
        // flows 1..=10 a twentieth each.
        let mut q = vec![(0u16, QueueConf::new(10, 100, 100_000))];
        q.extend((1..=10).map(|k| (k, QueueConf::new(1, 100, 100_000))));
        FairConf::classes(q)
    }
    fn load(s: &mut dyn Scheduler) {
        let t = Instant(0);
        for uid in 0..10 {
            s.enqueue(pkt(uid, 0, 100), t).unwrap();
        }
        for k in 1..=10u16 {
            s.enqueue(pkt(9 + k as u64, k, 100), t).unwrap();
        }
    }
    fn flows_in_order(s: &mut dyn Scheduler) -> Vec<u16> {
        std::iter::from_fn(|| s.dequeue(Instant(0)))
            .map(|p| p.meta.class)
            .collect()
    }

    #[test]
    fn golden_worst_case_fair_interleaving() {
        // WF²Q+ only serves flow 0 when its next packet has started under
        // GPS (S ≤ V), so it alternates with the small flows.
        let mut s = Wf2q::new(conf()).unwrap();
        load(&mut s);
        let want: Vec<u16> = (1..=10).flat_map(|k| [0, k]).collect();
        assert_eq!(flows_in_order(&mut s), want);
        // WFQ on the same input sends flow 0's ten packets back to back:
        // they all finish under GPS no later than the small flows' ones.
        let mut w = Wfq::new(conf(), 1_000_000_000).unwrap();
        load(&mut w);
        let want: Vec<u16> = vec![0; 10].into_iter().chain(1..=10).collect();
        assert_eq!(flows_in_order(&mut w), want);
    }

    #[test]
    fn virtual_time_jumps_to_min_start() {
        // One flow, w=1: V grows by 100 per 100-byte packet; once V reaches
        // the idle flow's F it is forgotten and a new flow starts at V.
        let mut s = Wf2q::new(FairConf::per_flow(QueueConf::new(1, 10, 10_000))).unwrap();
        s.enqueue(pkt(1, 3, 100), Instant(0)).unwrap();
        s.enqueue(pkt(2, 3, 100), Instant(0)).unwrap();
        assert_eq!(s.dequeue(Instant(0)).unwrap().meta.uid, 1);
        assert_eq!(s.virtual_time(), 100 * VT_PER_BYTE);
        assert_eq!(s.dequeue(Instant(0)).unwrap().meta.uid, 2);
        assert_eq!(s.virtual_time(), 200 * VT_PER_BYTE);
        // F = 200 = V: the flow's share is used up, its state is freed.
        assert_eq!(s.flows(), 0);
        s.enqueue(pkt(3, 4, 50), Instant(0)).unwrap();
        assert_eq!(s.dequeue(Instant(0)).unwrap().meta.uid, 3);
        assert_eq!(s.virtual_time(), 250 * VT_PER_BYTE);
    }

    #[test]
    fn remembered_flow_cannot_jump_the_queue() {
        // A (w=1) sends 1 packet and goes idle with F=100 while B (w=1) is
        // backlogged; A's weight stays in Σw until V passes 100, and when A
        // returns it starts at its old F, not at V.
        let c = FairConf::classes(vec![
            (0, QueueConf::new(1, 10, 10_000)),
            (1, QueueConf::new(1, 10, 10_000)),
        ]);
        let mut s = Wf2q::new(c).unwrap();
        let t = Instant(0);
        s.enqueue(pkt(1, 0, 100), t).unwrap();
        for uid in 2..6 {
            s.enqueue(pkt(uid, 1, 100), t).unwrap();
        }
        assert_eq!(s.dequeue(t).unwrap().meta.uid, 1); // A: F=100, V=50
        assert_eq!(s.virtual_time(), 50 * VT_PER_BYTE);
        s.enqueue(pkt(6, 0, 100), t).unwrap(); // A: S=100, F=200
        assert_eq!(s.dequeue(t).unwrap().meta.uid, 2); // B: F=100, V=100
        assert_eq!(s.virtual_time(), 100 * VT_PER_BYTE);
        // Both eligible with F=200 (A: S=100 from its remembered F, not
        // V); the tie goes to the packet that arrived first, B's uid 3.
        // Then A (F=200) before B's S=200 packets.
        let rest: Vec<u64> = std::iter::from_fn(|| s.dequeue(t)).map(|p| p.meta.uid).collect();
        assert_eq!(rest, vec![3, 6, 4, 5]);
    }
}
