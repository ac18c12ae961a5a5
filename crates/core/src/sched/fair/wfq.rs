//! Weighted fair queueing as packet-by-packet GPS (PGPS), Parekh &
//! Gallager, "A Generalized Processor Sharing Approach to Flow Control in
//! Integrated Services Networks: The Single-Node Case" (IEEE/ACM ToN 1993),
//! §III; the same algorithm as Demers, Keshav & Shenker's WFQ.
//!
//! The scheduler emulates the fluid GPS server *exactly*: it tracks the
//! set B(t) of flows backlogged in the fluid system and advances the GPS
//! virtual time piecewise, dV/dt = r / Σ_{i∈B(t)} wᵢ, with an event each time
//! a flow's fluid backlog runs out (§III-A, eq. for V(t)). A packet of L
//! bytes arriving at `a` gets finish tag F = max(F_prev, V(a)) + L/w, and
//! the link always sends the queued packet with the smallest F — the packet
//! that would finish first under GPS. Then (Theorems 1 and 2) every packet
//! leaves at most L_max/r after it would under GPS, and no flow's service
//! lags its GPS service by more than L_max bytes.
//!
//! Arithmetic is integer. Virtual time is in *nano-bits per unit weight*
//! (`u128`): the link does exactly `rate_bps × Δt_ns` nano-bits of work in
//! Δt, so V advances by work / Σw and a packet's tag grows by
//! `L·8·10⁹ / w`. The only rounding is the floor in these two divisions
//! (< 1 unit, i.e. < 10⁻⁹ bit per unit weight, and work left over by the
//! floor is carried, not lost), far below any real tie.
//!
//! Cost: O(log n) per packet amortised with heaps — one of flows ordered
//! by head-of-line finish tag for the packet system, one of
//! GPS-backlogged flows ordered by (a lower bound of) their last finish tag
//! for the fluid system, re-keyed lazily when V reaches a stale key. With
//! many flows both are radix heaps, whose moves are appends to vectors
//! rather than a cache miss per heap level: the fluid side's keys never go
//! below V ([`GpsQueue`]); the packet side's are mostly monotone and the
//! exceptions wait in a side heap ([`TagQueue`]), so the order is exact.

use super::conf::{FairConf, QueueInfo};
use super::heap::{GpsQueue, KeyHeap, TagQueue, Tagged};
use super::queues::Queues;
use super::{div_rem, VT_PER_BYTE};
use crate::config::ConfigError;
use crate::packet::Packet;
use crate::sched::{Dropped, QueueStats, Scheduler};
use crate::time::Instant;

/// Per-flow state of the GPS emulation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WfqFlow {
    /// Finish tag of the flow's last arrived packet (its GPS backlog ends
    /// when V reaches it).
    last_finish: u128,
    /// In B(t): backlogged in the fluid system.
    in_gps: bool,
}

/// PGPS / WFQ. See the module documentation.
pub struct Wfq {
    q: Queues<(u128, u64), WfqFlow>,
    rate_bps: u64,
    /// GPS virtual time V(t_v), nano-bits per unit weight.
    v: u128,
    t_v: Instant,
    /// Work (nano-bits) done since t_v that the floor in V += work/Σw
    /// has not turned into virtual time yet.
    work_carry: u128,
    /// Σ wᵢ over B(t).
    gps_weight: u64,
    /// One entry per flow in B(t), keyed by a finish tag ≤ its last one
    /// (ties broken by slot while few; in no particular order when many).
    gps: GpsQueue,
    /// One entry per flow with queued packets, keyed by head finish tag.
    ready: TagQueue,
    seq: u64,
    stats: QueueStats,
}

impl Wfq {
    /// WFQ on a link of `rate_bps` bit/s. The GPS reference runs at this
    /// rate, so it should be the rate the driver actually dequeues at.
    pub fn new(conf: FairConf, rate_bps: u64) -> Result<Self, ConfigError> {
        conf.validate("wfq", "weight")?;
        if rate_bps == 0 {
            return Err(ConfigError::zero("wfq", "link rate (bit/s)"));
        }
        Ok(Wfq {
            q: Queues::new(&conf),
            rate_bps,
            v: 0,
            t_v: Instant::ZERO,
            work_carry: 0,
            gps_weight: 0,
            gps: GpsQueue::new(),
            ready: TagQueue::with_prefetch(),
            seq: 0,
            stats: QueueStats::default(),
        })
    }

    /// GPS virtual time as last advanced, in nano-bits per unit weight
    /// ([`VT_PER_BYTE`] per byte).
    pub fn virtual_time(&self) -> u128 {
        self.v
    }
    /// The same scheduler on heaps only (the reference for its radix
    /// queues in tests).
    #[cfg(test)]
    pub(crate) fn heap_only(&mut self) {
        self.ready.heap_only();
    }
    /// Counters of the queue for `key` (class or flow id), if it exists.
    pub fn queue(&self, key: u32) -> Option<QueueInfo> {
        self.q.info(key)
    }
    /// Number of queues (flows) the scheduler holds state for.
    pub fn flows(&self) -> usize {
        self.q.active()
    }
    /// Bytes of scheduler state per active flow, queued packets excluded.
    pub fn bytes_per_flow() -> usize {
        Queues::<(u128, u64), WfqFlow>::bytes_per_queue() + 2 * KeyHeap::ENTRY_BYTES
    }

    /// Runs the fluid GPS system from `t_v` to `now`: V grows at
    /// r/Σ_{B} w, and each time it reaches a flow's last finish tag that
    /// flow leaves B(t) and the slope changes.
    fn advance(&mut self, now: Instant) {
        if now <= self.t_v {
            return;
        }
        let dt = now.saturating_since(self.t_v).as_nanos() as u128;
        self.t_v = now;
        if self.gps_weight == 0 {
            self.work_carry = 0;
            return;
        }
        let mut work = (dt * self.rate_bps as u128).saturating_add(self.work_carry);
        self.work_carry = 0;
        while let Some(top) = self.gps.peek() {
            let need = top
                .tag()
                .saturating_sub(self.v)
                .saturating_mul(self.gps_weight as u128);
            if work < need {
                let (dv, carry) = div_rem(work, self.gps_weight);
                self.v += dv;
                self.work_carry = carry;
                return;
            }
            work -= need;
            self.v = self.v.max(top.tag());
            let i = top.slot;
            let s = &mut self.q.slots[i as usize];
            if s.st.last_finish > top.tag() {
                // Stale key: more packets arrived since; re-key in place
                // (one sift), no change of slope.
                let _old = self.gps.replace_top(Tagged::new(s.st.last_finish, i as u64, i));
                debug_assert_eq!(_old, top);
                continue;
            }
            let _old = self.gps.pop();
            debug_assert_eq!(_old, Some(top));
            // The flow's fluid backlog is exhausted: it leaves B(t).
            s.st.in_gps = false;
            self.gps_weight -= s.weight as u64;
            if s.fifo.is_empty() {
                self.q.release(i);
            }
            if self.gps_weight == 0 {
                return; // fluid system idle: the rest of dt was idle time
            }
        }
    }
}

impl Scheduler for Wfq {
    fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped> {
        self.advance(now);
        let (i, pkt) = self.q.admit(pkt, &mut self.stats)?;
        let cost = self.q.cost(&pkt) as u128 * VT_PER_BYTE;
        let s = &mut self.q.slots[i as usize];
        let start = s.st.last_finish.max(self.v);
        let finish = start + div_rem(cost, s.weight as u64).0;
        s.st.last_finish = finish;
        if !s.st.in_gps {
            s.st.in_gps = true;
            self.gps_weight += s.weight as u64;
            self.gps.push(Tagged::new(finish, i as u64, i), self.v);
        }
        let seq = self.seq;
        self.seq += 1;
        if s.fifo.is_empty() {
            self.ready.push(Tagged::new(finish, seq, i));
        }
        self.q.push(i, pkt, (finish, seq), &mut self.stats);
        Ok(())
    }

    fn dequeue(&mut self, now: Instant) -> Option<Packet> {
        self.advance(now);
        let i = self.ready.peek()?.slot;
        let (pkt, _) = self.q.pop(i, &mut self.stats)?;
        let s = &self.q.slots[i as usize];
        match s.fifo.front() {
            // Same flow's next packet replaces it at the top: one sift.
            Some(&(_, (f, seq))) => {
                self.ready.replace_top(Tagged::new(f, seq, i));
            }
            None => {
                self.ready.pop();
                if !s.st.in_gps {
                    self.q.release(i);
                }
            }
        }
        Some(pkt)
    }

    /// The queued packet with the smallest finish tag. Exact without
    /// running the fluid system to `now`: that moves V and B(t), never the
    /// tags of queued packets, which fix the order at arrival.
    fn peek(&self, _now: Instant) -> Option<&Packet> {
        let i = self.ready.peek()?.slot;
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
        "wfq"
    }
}

#[cfg(test)]
mod tests {
    use super::super::gps::{self, Arrival, Q};
    use super::super::testkit::{classes, pkt, ONE_BYTE_PER_NS};
    use super::*;
    use crate::sched::{DropReason, FairConf, QueueConf};
    use proptest::prelude::*;

    #[test]
    fn golden_simultaneous_arrivals() {
        // A (w=1) and B (w=2), two 100-byte packets each at t=0. Tags in
        // bytes per weight: A 100, 200; B 50, 100. B1 first; A1 and B2 tie
        // at 100 and arrival order breaks the tie.
        let mut w = Wfq::new(classes(&[1, 2]), ONE_BYTE_PER_NS).unwrap();
        let t = Instant(0);
        for (uid, k) in [(1, 0), (2, 0), (3, 1), (4, 1)] {
            w.enqueue(pkt(uid, k, 100), t).unwrap();
        }
        let order: Vec<u64> = std::iter::from_fn(|| w.dequeue(t)).map(|p| p.meta.uid).collect();
        assert_eq!(order, vec![3, 1, 4, 2]);
    }

    #[test]
    fn golden_gps_virtual_time_changes_slope() {
        // A (w=1): 2×120 B, B (w=3): 60 B at t=0; C (w=1): 50 B at t=100.
        // GPS: Σw=4 until B's fluid backlog ends at V=20 (t=80), then Σw=1,
        // so V(100)=40 and C's tag is 90 < A2's 240.
        let mut w = Wfq::new(classes(&[1, 3, 1]), ONE_BYTE_PER_NS).unwrap();
        w.enqueue(pkt(1, 0, 120), Instant(0)).unwrap();
        w.enqueue(pkt(2, 0, 120), Instant(0)).unwrap();
        w.enqueue(pkt(3, 1, 60), Instant(0)).unwrap();
        assert_eq!(w.dequeue(Instant(0)).unwrap().meta.uid, 3); // F=20, sent 0..60
        assert_eq!(w.dequeue(Instant(60)).unwrap().meta.uid, 1); // F=120, 60..180
        w.enqueue(pkt(4, 2, 50), Instant(100)).unwrap();
        assert_eq!(w.virtual_time(), 40 * VT_PER_BYTE);
        assert_eq!(w.dequeue(Instant(180)).unwrap().meta.uid, 4); // F=90
        assert_eq!(w.dequeue(Instant(230)).unwrap().meta.uid, 2); // F=240
        assert!(w.dequeue(Instant(350)).is_none());
        // Everything has left GPS too by t=350 (A's backlog ends at V=240).
        assert_eq!(w.virtual_time(), 240 * VT_PER_BYTE);
    }

    #[test]
    fn late_arrival_is_not_penalised_like_scfq() {
        // A (w=1) 3×100 at t=0; B (w=1) 100 at t=150: V(150)=150 (only A in
        // B(t)), so F_B = 250 < F_A3 = 300: B goes before A3.
        let mut w = Wfq::new(classes(&[1, 1]), ONE_BYTE_PER_NS).unwrap();
        for uid in 1..=3 {
            w.enqueue(pkt(uid, 0, 100), Instant(0)).unwrap();
        }
        assert_eq!(w.dequeue(Instant(0)).unwrap().meta.uid, 1);
        assert_eq!(w.dequeue(Instant(100)).unwrap().meta.uid, 2);
        w.enqueue(pkt(4, 1, 100), Instant(150)).unwrap();
        assert_eq!(w.virtual_time(), 150 * VT_PER_BYTE);
        assert_eq!(w.dequeue(Instant(200)).unwrap().meta.uid, 4);
        assert_eq!(w.dequeue(Instant(300)).unwrap().meta.uid, 3);
    }

    #[test]
    fn per_flow_state_is_created_and_forgotten() {
        let mut w = Wfq::new(FairConf::per_flow(QueueConf::new(1, 2, 1_000)), ONE_BYTE_PER_NS).unwrap();
        for f in 0..100u16 {
            w.enqueue(pkt(f as u64, f, 100), Instant(0)).unwrap();
        }
        assert_eq!(w.flows(), 100);
        // Per-flow packet limit 2.
        w.enqueue(pkt(1000, 7, 10), Instant(0)).unwrap();
        let e = w.enqueue(pkt(1001, 7, 10), Instant(0)).unwrap_err();
        assert_eq!(e.reason, DropReason::QueueFull);
        assert_eq!(w.queue(7).unwrap().drops, 1);
        let mut t = Instant(0);
        while let Some(p) = w.dequeue(t) {
            t += crate::time::Duration(p.len() as u64);
        }
        // Once GPS has served everything too, no state is left.
        w.dequeue(t);
        assert_eq!(w.flows(), 0);
        assert_eq!(w.stats().deq_pkts, 101);
    }

    #[test]
    fn unknown_class_without_default_is_refused() {
        let mut w = Wfq::new(classes(&[1]), ONE_BYTE_PER_NS).unwrap();
        let e = w.enqueue(pkt(1, 5, 100), Instant(0)).unwrap_err();
        assert_eq!(e.reason, DropReason::QueueFull);
        assert_eq!(w.stats().drops(DropReason::QueueFull), 1);
        let mut w = Wfq::new(
            FairConf {
                default: Some(QueueConf::new(2, 10, 10_000)),
                ..classes(&[1])
            },
            ONE_BYTE_PER_NS,
        )
        .unwrap();
        w.enqueue(pkt(1, 5, 100), Instant(0)).unwrap();
        assert_eq!(w.queue(5).unwrap().weight, 2);
    }

    #[test]
    fn total_limits_bound_all_flows() {
        let conf = FairConf::per_flow(QueueConf::new(1, 10, 10_000)).with_total_limits(3, 1_000_000);
        let mut w = Wfq::new(conf, ONE_BYTE_PER_NS).unwrap();
        for f in 0..3 {
            w.enqueue(pkt(f, f as u16, 100), Instant(0)).unwrap();
        }
        assert!(w.enqueue(pkt(9, 9, 100), Instant(0)).is_err());
        assert_eq!(w.flows(), 3);
    }

    /// Runs PGPS on a 1 byte/ns link and the fluid GPS side by side and
    /// checks Parekh–Gallager: service lag ≤ L_max (Theorem 2) and
    /// departure ≤ GPS finish + L_max/r (Theorem 1).
    fn check_against_gps(w: &[u32], arrivals: &[Arrival]) {
        let lmax = arrivals.iter().map(|a| a.2).max().unwrap() as i128;
        let mut wfq = Wfq::new(classes(w), ONE_BYTE_PER_NS).unwrap();
        let r = gps::run(&mut wfq, w, arrivals, |t, fluid, pk_served| {
            for (j, &p) in pk_served.iter().enumerate() {
                let lag = fluid.served[j].sub(Q::int(p));
                assert!(
                    lag.le(Q::int(lmax)),
                    "flow {j} lags GPS by {lag:?} > {lmax} at t={t}"
                );
            }
        });
        let late = gps::late(&r, lmax);
        assert!(late.is_empty(), "left after GPS finish + L_max {lmax}: {late:?}");
    }

    #[test]
    fn gps_reference_hand_case() {
        check_against_gps(&[1, 3, 1], &[(0, 0, 120), (0, 0, 120), (0, 1, 60), (100, 2, 50)]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn pgps_tracks_gps_within_one_max_packet(
            w in prop::collection::vec(1u32..=5, 2..=4),
            raw in prop::collection::vec((0u64..=150, 0usize..4, 1u64..=120), 1..60),
        ) {
            check_against_gps(&w, &gps::arrivals(&raw, w.len()));
        }
    }
}
