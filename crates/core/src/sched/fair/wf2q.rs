//! WF²Q+ (Bennett & Zhang, "Hierarchical Packet Fair Queueing
//! Algorithms", SIGCOMM 1996, §3): worst-case fair weighted fair queueing.
//!
//! Each backlogged flow i has a virtual start Sᵢ and finish Fᵢ = Sᵢ + L/wᵢ
//! for its head packet: Sᵢ = max(Fᵢ, V) when the flow becomes backlogged,
//! Sᵢ = Fᵢ (previous) when its next packet reaches the head. Only
//! *eligible* flows (Sᵢ ≤ V) may be served — that is what stops a
//! heavy-weight flow from running ahead of its GPS service — and among
//! them the smallest Fᵢ wins. The system virtual time needs no GPS
//! emulation: V(t + τ) = max(V(t) + W(t, t+τ)/Σw, min_{i backlogged} Sᵢ),
//! where W(t, t+τ) is the work the link did in between. W is counted as
//! it is done, at the link rate: a flow arriving while a packet is on the
//! wire starts at V as of that instant, not as of the packet's end (which
//! would put it up to L_max/Σw behind, and break the bound below).
//!
//! Σw is the paper's Σ of all sessions' rates: the weights of every
//! configured queue, backlogged or not, so flow i's guaranteed rate is
//! rᵢ = wᵢ/Σw · C. Then WF²Q+ keeps WF²Q's delay bound (Bennett & Zhang
//! §3), in per-packet form: packet k of flow i leaves by its
//! guaranteed-rate clock GRCᵢᵏ = max(aᵢᵏ, GRCᵢᵏ⁻¹) + Lᵢᵏ/rᵢ plus L_max/C.
//! It does *not* keep WF²Q's bound against GPS itself (Bennett & Zhang,
//! INFOCOM 1996, Theorem 1: departure ≤ GPS finish + L_max/C): V grows at
//! C/Σw over all queues, so a flow that had the link to itself while the
//! others were idle is held back by its guaranteed rate, where GPS would
//! not charge it (see the tests). Queues created on demand (per-flow, or
//! an unknown class given the default) exist only while they matter, so
//! they count in Σw while backlogged or idle with Fᵢ > V (they leave Σw
//! once V passes Fᵢ), as in the dummynet/FreeBSD WF²Q+; the paper's bound
//! assumes a fixed set of sessions and is not claimed for them.
//!
//! Tags are integers in the same nano-bits-per-unit-weight as
//! [`super::Wfq`]; cost is O(log n) per packet (heaps of eligible flows by
//! F, ineligible ones by S, idle ones by F). With many flows the eligible
//! and pending heaps are radix heaps ([`super::heap::TagQueue`], same
//! exact order): pending start tags only grow (a flow is pending only with
//! S > V), and the few eligible finish tags below the last one served wait
//! in a side heap.

use super::conf::{FairConf, QueueInfo};
use super::heap::{KeyHeap, TagQueue, Tagged};
use super::queues::Queues;
use super::{div_rem, VT_PER_BYTE};
use crate::config::ConfigError;
use crate::packet::Packet;
use crate::sched::{Dropped, QueueStats, Scheduler};
use crate::time::Instant;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    /// Not backlogged (and, for an on-demand queue, not counted in Σw).
    #[default]
    Idle,
    /// Has packets; in `eligible` or `pending`.
    Active,
    /// On-demand queue with no packets but Fᵢ > V: still counted in Σw,
    /// entry in `idle`.
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
    rate_bps: u64,
    v: u128,
    /// Σw: configured queues always, on-demand ones while active or
    /// remembered.
    wsum: u64,
    /// The packet on the wire: work (nano-bits) of it not yet counted in
    /// V, and the instant up to which the rest was counted.
    sending_left: u128,
    sending_since: Instant,
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
    /// WF²Q+ on a link of `rate_bps` bit/s: the rate at which the driver
    /// sends what it dequeues, so V can count work as it is done.
    pub fn new(conf: FairConf, rate_bps: u64) -> Result<Self, ConfigError> {
        conf.validate("wf2q", "weight")?;
        if rate_bps == 0 {
            return Err(ConfigError::zero("wf2q", "link rate (bit/s)"));
        }
        Ok(Wf2q {
            q: Queues::new(&conf),
            rate_bps,
            v: 0,
            wsum: conf.queues.iter().map(|(_, c)| c.weight as u64).sum(),
            sending_left: 0,
            sending_since: Instant::ZERO,
            eligible: TagQueue::new(),
            pending: TagQueue::new(),
            idle: KeyHeap::new(),
            seq: 0,
            stats: QueueStats::default(),
        })
    }

    /// System virtual time, nano-bits per unit weight, as of the last
    /// enqueue or dequeue.
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

    /// V + W/Σw for `work` nano-bits of service.
    fn v_after(&self, work: u128) -> u128 {
        match self.wsum {
            0 => self.v, // nobody holds a share: nothing to account
            w => self.v + div_rem(work, w).0,
        }
    }

    /// Counts the work the link has done on the packet on the wire up to
    /// `now` into V; `None`: the packet is done (the link asks for the
    /// next one).
    fn count_work(&mut self, now: Option<Instant>) {
        let work = match now {
            Some(t) => {
                let dt = t.saturating_since(self.sending_since).as_nanos() as u128;
                self.sending_since = self.sending_since.max(t);
                (dt * self.rate_bps as u128).min(self.sending_left)
            }
            None => self.sending_left,
        };
        self.v = self.v_after(work);
        self.sending_left -= work;
    }

    /// V(t) = max(V + W/Σw, min S): when no backlogged flow has started
    /// (nobody eligible), V jumps to the smallest start tag. Not while a
    /// packet is on the wire: its flow's head is that packet, started.
    fn catch_up(&mut self) {
        if self.eligible.is_empty() && self.sending_left == 0 {
            if let Some(p) = self.pending.peek() {
                self.v = self.v.max(p.tag());
            }
        }
        self.forget_idle();
    }

    /// Flows idle with F ≤ V have had their share: drop them from Σw.
    fn forget_idle(&mut self) {
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
    }
}

impl Scheduler for Wf2q {
    fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped> {
        self.count_work(Some(now));
        self.catch_up();
        let (i, pkt) = self.q.admit(pkt, &mut self.stats)?;
        let cost = self.q.cost(&pkt) as u128 * VT_PER_BYTE;
        let seq = self.seq;
        self.seq += 1;
        let s = &mut self.q.slots[i as usize];
        let newly_backlogged = s.fifo.is_empty();
        if newly_backlogged {
            if s.st.phase == Phase::Idle && !s.permanent {
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

    fn dequeue(&mut self, now: Instant) -> Option<Packet> {
        // Asked for the next packet: the one on the wire is done.
        self.count_work(None);
        if self.q.len == 0 {
            return None;
        }
        // V ≥ min start over backlogged flows, so someone is eligible.
        self.catch_up();
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
        self.sending_left = self.q.cost(&pkt) as u128 * VT_PER_BYTE;
        self.sending_since = now;

        let s = &mut self.q.slots[i as usize];
        match s.fifo.front() {
            Some((next, seq)) => {
                let seq = *seq;
                let cost = (next.len() as u64 + self.q.overhead as u64) as u128 * VT_PER_BYTE;
                s.st.start = s.st.finish;
                s.st.finish = s.st.start + div_rem(cost, s.weight as u64).0;
                self.schedule(i, seq);
            }
            // A configured queue keeps its share of Σw and its F.
            None if s.permanent => s.st.phase = Phase::Idle,
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
    /// flow: V as dequeue would count it (the packet on the wire done,
    /// then raised to the smallest start if nobody is eligible), then the
    /// smallest (F, arrival) among the eligible flows and the pending ones
    /// that this V makes eligible.
    fn peek(&self, _now: Instant) -> Option<&Packet> {
        if self.q.len == 0 {
            return None;
        }
        let mut v = self.v_after(self.sending_left);
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
    use super::super::gps::{self, Arrival, Q};
    use super::super::testkit::{classes, pkt, ONE_BYTE_PER_NS};
    use super::*;
    use crate::sched::{QueueConf, Wfq};
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;

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
    fn wf2q(c: FairConf) -> Wf2q {
        Wf2q::new(c, ONE_BYTE_PER_NS).unwrap()
    }
    fn per_flow() -> FairConf {
        FairConf::per_flow(QueueConf::new(1, 10, 10_000))
    }

    #[test]
    fn golden_worst_case_fair_interleaving() {
        // WF²Q+ only serves flow 0 when its next packet has started under
        // GPS (S ≤ V), so it alternates with the small flows.
        let mut s = wf2q(conf());
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
    fn refuses_a_zero_rate() {
        assert!(Wf2q::new(per_flow(), 0)
            .err()
            .unwrap()
            .to_string()
            .contains("rate"));
    }

    #[test]
    fn virtual_time_jumps_to_min_start() {
        // Two configured queues of w=1: Σw = 2 though only queue 0 sends,
        // so V grows by 50 per 100-byte packet, and jumps to the next
        // packet's start (100) when nobody is eligible.
        let mut s = wf2q(classes(&[1, 1]));
        s.enqueue(pkt(1, 0, 100), Instant(0)).unwrap();
        s.enqueue(pkt(2, 0, 100), Instant(0)).unwrap();
        assert_eq!(s.dequeue(Instant(0)).unwrap().meta.uid, 1);
        assert_eq!(s.dequeue(Instant(100)).unwrap().meta.uid, 2);
        assert_eq!(s.virtual_time(), 100 * VT_PER_BYTE);
        assert!(s.dequeue(Instant(200)).is_none());
        assert_eq!(s.virtual_time(), 150 * VT_PER_BYTE);
    }

    #[test]
    fn virtual_time_counts_work_as_it_is_done() {
        // Flow 3 (w=1) sends 100 bytes from t=0 at 1 byte/ns; flow 4
        // arrives at t=40, when V = 40 (not 100, the end of the packet on
        // the wire): S = 40, F = 140, before flow 3's next packet (S = 100,
        // F = 200), as under GPS. Counting the whole packet at dequeue
        // gave flow 4 S = 100 and sent it after flow 3's.
        let mut s = wf2q(per_flow());
        s.enqueue(pkt(1, 3, 100), Instant(0)).unwrap();
        s.enqueue(pkt(2, 3, 100), Instant(0)).unwrap();
        assert_eq!(s.dequeue(Instant(0)).unwrap().meta.uid, 1);
        assert_eq!(s.virtual_time(), 0);
        s.enqueue(pkt(3, 4, 100), Instant(40)).unwrap();
        assert_eq!(s.virtual_time(), 40 * VT_PER_BYTE);
        // The last 60 bytes at Σw = 2: V = 70.
        assert_eq!(s.dequeue(Instant(100)).unwrap().meta.uid, 3);
        assert_eq!(s.virtual_time(), 70 * VT_PER_BYTE);
        assert_eq!(s.dequeue(Instant(200)).unwrap().meta.uid, 2);
        assert_eq!(s.virtual_time(), 120 * VT_PER_BYTE);
    }

    #[test]
    fn on_demand_flows_are_forgotten_once_served() {
        // One per-flow queue, w=1: Σw = 1 while it is known; once V reaches
        // its F it leaves Σw and its state is freed.
        let mut s = wf2q(per_flow());
        s.enqueue(pkt(1, 3, 100), Instant(0)).unwrap();
        assert_eq!(s.dequeue(Instant(0)).unwrap().meta.uid, 1);
        assert!(s.dequeue(Instant(100)).is_none());
        s.enqueue(pkt(2, 4, 50), Instant(100)).unwrap();
        assert_eq!(s.flows(), 1);
        assert_eq!(s.dequeue(Instant(100)).unwrap().meta.uid, 2);
        assert_eq!(s.virtual_time(), 100 * VT_PER_BYTE);
    }

    #[test]
    fn remembered_flow_cannot_jump_the_queue() {
        // Per-flow A (w=1) sends 1 packet and goes idle with F=100 while B
        // (w=1) is backlogged; A's weight stays in Σw until V passes 100,
        // and when A returns it starts at its old F, not at V.
        let mut s = wf2q(per_flow());
        s.enqueue(pkt(1, 0, 100), Instant(0)).unwrap();
        for uid in 2..6 {
            s.enqueue(pkt(uid, 1, 100), Instant(0)).unwrap();
        }
        assert_eq!(s.dequeue(Instant(0)).unwrap().meta.uid, 1); // A: F=100
        s.enqueue(pkt(6, 0, 100), Instant(50)).unwrap(); // A: S=100, F=200
        assert_eq!(s.virtual_time(), 25 * VT_PER_BYTE); // 50 bytes at Σw=2
        assert_eq!(s.dequeue(Instant(100)).unwrap().meta.uid, 2); // B: F=100
        assert_eq!(s.virtual_time(), 50 * VT_PER_BYTE);
        // At V=100 both are eligible with F=200 (A: S=100 from its
        // remembered F, not V); the tie goes to the packet that arrived
        // first, B's uid 3. Then A (F=200) before B's S=200 packets.
        let rest: Vec<u64> = (2..6)
            .map_while(|k| s.dequeue(Instant(k * 100)))
            .map(|p| p.meta.uid)
            .collect();
        assert_eq!(rest, vec![3, 6, 4, 5]);
    }

    // ---- Delay bounds against exact fluid references -----------------

    /// WF²Q+'s delay bound in per-packet form: packet k of flow i leaves
    /// by GRCᵢᵏ + L_max/C, GRCᵢᵏ = max(aᵢᵏ, GRCᵢᵏ⁻¹) + Lᵢᵏ/rᵢ, with
    /// rᵢ = wᵢ/Σw · C over every configured queue (Bennett & Zhang,
    /// SIGCOMM 1996 §3: WF²Q+ has WF²Q's delay bound, σᵢ/rᵢ + L_max/C for
    /// a (σᵢ, rᵢ) leaky bucket; the guaranteed-rate form is Goyal, Lam &
    /// Vin's, NOSSDAV 1995). C = 1 byte/ns.
    fn grc(w: &[u32], arrivals: &[Arrival]) -> Vec<Q> {
        let wsum: i128 = w.iter().map(|&w| w as i128).sum();
        let mut clock = vec![Q::int(0); w.len()];
        arrivals
            .iter()
            .map(|&(at, f, len)| {
                let a = Q::int(at as i128);
                let from = if clock[f].le(a) { a } else { clock[f] };
                clock[f] = from.add(Q::new(len as i128 * wsum, w[f] as i128));
                clock[f]
            })
            .collect()
    }

    /// Checks WF²Q+ on `arrivals` against its guaranteed-rate clock +
    /// L_max/C, with queue conf `c` whose flows 0.. have weights `w`.
    fn check_grc(c: FairConf, w: &[u32], arrivals: &[Arrival]) -> gps::Run {
        let lmax = arrivals.iter().map(|a| a.2).max().unwrap() as i128;
        let mut s = wf2q(c);
        let r = gps::run(&mut s, w, arrivals, |_, _, _| {});
        let bound = grc(w, arrivals);
        for (id, &d) in r.depart.iter().enumerate() {
            assert!(
                Q::int(d as i128).le(bound[id].add(Q::int(lmax))),
                "wf2q: packet {id} {:?} left at {d} > GRC {} + L_max {lmax}",
                arrivals[id],
                bound[id].f()
            );
        }
        r
    }

    /// Runs WF²Q+ and WFQ on `arrivals` over classes of weights `w` and
    /// checks each against its own bound: WF²Q+ against its
    /// guaranteed-rate clock plus L_max/C, WFQ against its GPS finish plus
    /// L_max/C (Parekh & Gallager, ToN 1993, Theorem 1). Returns WF²Q+'s
    /// run.
    fn check_bounds(w: &[u32], arrivals: &[Arrival]) -> gps::Run {
        let lmax = arrivals.iter().map(|a| a.2).max().unwrap() as i128;
        let r = check_grc(classes(w), w, arrivals);
        let mut q = Wfq::new(classes(w), ONE_BYTE_PER_NS).unwrap();
        let late = gps::late(&gps::run(&mut q, w, arrivals, |_, _, _| {}), lmax);
        assert!(late.is_empty(), "wfq: late against GPS + L_max: {late:?}");
        r
    }

    #[test]
    fn guaranteed_rate_bound_hand_cases() {
        // Counting a packet's whole work into V when it starts put a flow
        // arriving meanwhile (flow 0, at t=20 and t=120) up to L/Σw too
        // late: in both, flow 0's second packet left at 400 > GRC 286.7
        // + L_max 100.
        check_bounds(&[3, 1], &[(0, 1, 100), (0, 1, 100), (20, 0, 100), (20, 0, 100)]);
        check_bounds(
            &[3, 1],
            &[(100, 1, 100), (100, 1, 100), (120, 0, 50), (220, 0, 50)],
        );
        check_bounds(
            &[3, 2, 1],
            &[(100, 2, 100), (120, 0, 50), (120, 1, 100), (220, 0, 10)],
        );
    }

    #[test]
    fn wf2q_plus_is_not_bounded_by_gps_finish() {
        // The real WF²Q / WF²Q+ difference. Flow 0 (w=2 of 5) has the link
        // alone from t=0 to 100; GPS serves it at the full rate, WF²Q+'s V
        // grows at C/Σw = 1/5 per byte, so at t=100 flow 0's second packet
        // starts at S = 50 > V = 20 and waits behind flows 1 and 2. It
        // leaves at 350; GPS finishes it at 225 (+ L_max = 325), its
        // guaranteed-rate clock at 375 (+ L_max = 475).
        let w = [2, 2, 1];
        let arrivals = [(0, 0, 100), (100, 1, 100), (100, 0, 50), (100, 2, 100)];
        let r = check_bounds(&w, &arrivals);
        assert_eq!(r.depart, vec![100, 200, 350, 300]);
        assert_eq!(r.gps[2].f(), 225.0);
        assert_eq!(gps::late(&r, 100).len(), 1);
    }

    /// Arrivals at random times, flows and sizes, near full load, from
    /// a seeded generator.
    fn random_arrivals(seed: u64, flows: usize, n: usize) -> Vec<Arrival> {
        let mut x = seed | 1;
        let raw: Vec<(u64, usize, u64)> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (
                    x % 1_200,
                    ((x >> 20) % flows as u64) as usize,
                    40 + (x >> 40) % 1_461,
                )
            })
            .collect();
        gps::arrivals(&raw, flows)
    }

    #[test]
    fn five_flows_within_their_bounds() {
        // The setting: five equal flows on one bottleneck, 9 300
        // packets of 40..1 500 bytes arriving at about the link rate.
        // Per-flow queues too (how scenarios use wf2q): there the paper's
        // bound is not proven (the set of flows changes), but it holds in
        // these runs, against the same rates C/5.
        let flows = || FairConf::per_flow(QueueConf::new(1, 10_000, 10_000_000));
        for seed in 1..=31 {
            let arrivals = random_arrivals(seed, 5, 300);
            check_bounds(&[1; 5], &arrivals);
            check_grc(flows(), &[1; 5], &arrivals);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 300,
            rng_seed: RngSeed::Fixed(25),
            ..ProptestConfig::default()
        })]

        /// Random weights and arrivals on one link: WF²Q+ within its
        /// guaranteed-rate bound, WFQ within GPS + L_max/C.
        #[test]
        fn departures_within_proven_bounds(
            w in prop::collection::vec(1u32..=5, 2..=5),
            raw in prop::collection::vec((0u64..=300, 0usize..5, 1u64..=1_500), 1..80),
        ) {
            check_bounds(&w, &gps::arrivals(&raw, w.len()));
        }
    }
}
