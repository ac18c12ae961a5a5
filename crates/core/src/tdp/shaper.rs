//! Edge shaping of asynchronous traffic into reserved TFs (ICC 2006 §II-C,
//! §II-D, §III-B).
//!
//! At the ingress of a TDP domain packets of reserved flows arrive at
//! arbitrary times. The edge router classifies them (exact 5-tuple here),
//! gives each the next TF reserved to its flow at the output, and — as the
//! testbed did with Dummynet pipes — stores it until one TF before that TF,
//! then hands it to the output port's wheel. This removes the jitter the
//! packet picked up in the asynchronous network and polices the flow: a
//! flow sending faster than its reservation only fills its bounded queue.
//!
//! A reservation sized exactly to its CBR flow (the ICC 2006 testbed fills
//! every ring-link TF) has no slack: one packet that arrives after its
//! slot's cut-off takes the flow's next slot, every later packet the slot
//! after its own, and the flow keeps one period of extra delay for good.
//! [`EdgeShaper::set_max_hold`] bounds how long the shaper may hold a packet — the role of
//! IEEE 802.1Qcr's MaxResidenceTime in asynchronous traffic shaping — so
//! such a flow can lose one packet (counted, [`DropReason::ShaperHold`])
//! and get its phase back. The bound cannot tell that case from a flow
//! whose arrivals sit within their jitter of a slot's cut-off (each
//! crossing then costs a packet), so it is off by default.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use super::ctr::Ctr;
use crate::flow::FlowKey;
use crate::packet::Packet;
use crate::sched::{DropReason, Dropped};
use crate::time::{Duration, Instant};
use crate::wire::Ipv4Info;

/// What [`EdgeShaper::handle_packet`] did with a packet.
#[derive(Debug, PartialEq, Eq)]
pub enum ShapeOutcome {
    /// Held for the reserved absolute TF `tf`; released one TF before it.
    Shaped {
        /// Forwarding TF assigned at this router's output.
        tf: u64,
    },
    /// No reserved flow matches: the caller forwards it as it would anyway
    /// (usually best effort).
    NotShaped(Packet),
}

/// Counters of an [`EdgeShaper`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShaperStats {
    /// Packets of reserved flows accepted and held.
    pub shaped: u64,
    /// Packets released to their output port.
    pub released: u64,
    /// Packets matching no reserved flow.
    pub not_shaped: u64,
    /// Packets dropped because their flow's queue was full.
    pub dropped_full: u64,
    /// Packets dropped because they would wait longer than the bound of
    /// [`EdgeShaper::set_max_hold`].
    pub dropped_hold: u64,
}

struct Flow {
    out_port: u16,
    /// Reserved TF positions inside the TC, sorted, distinct.
    slots: Vec<u32>,
    lead: u32,
    last: Option<u64>,
    queue: VecDeque<(u64, Packet)>,
}

impl Flow {
    /// First reserved absolute TF at or after `from`.
    fn next_slot(&self, ctr: &Ctr, from: u64) -> u64 {
        let (tc, pos) = (ctr.tc_of(from), ctr.tf_in_tc(from));
        match self.slots.iter().find(|&&s| s >= pos) {
            Some(&s) => ctr.tc_start_tf(tc) + s as u64,
            None => ctr
                .tc_start_tf(tc.saturating_add(1))
                .saturating_add(self.slots[0] as u64),
        }
    }
}

/// Shapes packets of reserved flows into their TFs at a TDP edge router.
pub struct EdgeShaper {
    ctr: Ctr,
    limit: usize,
    max_hold: Option<Duration>,
    flows: Vec<Flow>,
    index: HashMap<FlowKey, usize>,
    /// One entry per held packet: (assigned TF, arrival sequence, flow).
    /// Per flow the assigned TFs grow, so popping this heap always finds the
    /// head of that flow's queue.
    pending: BinaryHeap<Reverse<(u64, u64, usize)>>,
    seq: u64,
    stats: ShaperStats,
}

impl EdgeShaper {
    /// A shaper on the CTR `ctr` holding at most `limit_pkts` packets per
    /// flow.
    pub fn new(ctr: Ctr, limit_pkts: usize) -> Self {
        EdgeShaper {
            ctr,
            limit: limit_pkts,
            max_hold: None,
            flows: Vec::new(),
            index: HashMap::new(),
            pending: BinaryHeap::new(),
            seq: 0,
            stats: ShaperStats::default(),
        }
    }

    /// Bound how long a packet may be held, from its arrival to the start
    /// of its reserved TF; `None` (the default, the paper's rule): a packet
    /// waits for its flow's next free slot however far away.
    pub fn set_max_hold(&mut self, m: Option<Duration>) {
        self.max_hold = m;
    }

    /// Reserve flow `key` to leave through `out_port` in the TFs `slots`
    /// (positions inside the TC at this router's output, one packet each per
    /// TC). A packet gets a TF at least `lead_tfs` after the one it arrives
    /// in, which covers the processing between this shaper and the wheel.
    pub fn add_flow(
        &mut self,
        key: FlowKey,
        out_port: u16,
        mut slots: Vec<u32>,
        lead_tfs: u32,
    ) -> Result<(), String> {
        if self.index.contains_key(&key) {
            return Err(format!("shaper: flow {key:?} is already reserved"));
        }
        if slots.is_empty() {
            return Err(format!("shaper: flow {key:?} has no reserved TF"));
        }
        let n_tf = self.ctr.tfs_per_tc();
        if let Some(bad) = slots.iter().find(|&&s| s >= n_tf) {
            return Err(format!(
                "shaper: flow {key:?} reserves TF {bad}, but a TC has only {n_tf} TFs"
            ));
        }
        slots.sort_unstable();
        slots.dedup();
        self.index.insert(key, self.flows.len());
        self.flows.push(Flow {
            out_port,
            slots,
            lead: lead_tfs,
            last: None,
            queue: VecDeque::new(),
        });
        Ok(())
    }

    /// Number of reserved flows.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Packets held, over all flows.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no packet is held.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Counters.
    pub fn stats(&self) -> &ShaperStats {
        &self.stats
    }

    /// Classify a packet arriving at `now` (its parsed header is `info`)
    /// and, if it belongs to a reserved flow, hold it for the first reserved
    /// TF at or after both `tf_at(now) + lead` and the flow's previous
    /// assignment + 1. A full flow queue drops it ([`DropReason::ShaperFull`]),
    /// and so does a hold beyond [`set_max_hold`](Self::set_max_hold)
    /// ([`DropReason::ShaperHold`]).
    pub fn handle_packet(
        &mut self,
        now: Instant,
        pkt: Packet,
        info: &Ipv4Info,
    ) -> Result<ShapeOutcome, Dropped> {
        let Some(&fi) = self.index.get(&FlowKey::from(info)) else {
            self.stats.not_shaped += 1;
            return Ok(ShapeOutcome::NotShaped(pkt));
        };
        let ctr = self.ctr;
        let flow = &mut self.flows[fi];
        if flow.queue.len() >= self.limit {
            self.stats.dropped_full += 1;
            return Err(Dropped {
                pkt,
                reason: DropReason::ShaperFull,
            });
        }
        let earliest = ctr.tf_at(now).saturating_add(flow.lead as u64);
        let from = flow.last.map_or(earliest, |l| earliest.max(l.saturating_add(1)));
        let tf = flow.next_slot(&ctr, from);
        if self.max_hold.is_some_and(|d| ctr.tf_start(tf) > now + d) {
            self.stats.dropped_hold += 1;
            return Err(Dropped {
                pkt,
                reason: DropReason::ShaperHold,
            });
        }
        flow.last = Some(tf);
        flow.queue.push_back((tf, pkt));
        self.seq += 1;
        self.pending.push(Reverse((tf, self.seq, fi)));
        self.stats.shaped += 1;
        Ok(ShapeOutcome::Shaped { tf })
    }

    /// When a held packet for TF `tf` may go to the output port: at the
    /// start of TF `tf - 1`, so it is in the wheel before its TF begins.
    fn release_at(&self, tf: u64) -> Instant {
        self.ctr.tf_start(tf.saturating_sub(1))
    }

    /// The next packet due at `now`, with its output port and
    /// `meta.tdp_tf` set to its reserved TF. Call until `None`.
    pub fn poll_release(&mut self, now: Instant) -> Option<(u16, Packet)> {
        let &Reverse((tf, _, fi)) = self.pending.peek()?;
        if self.release_at(tf) > now {
            return None;
        }
        self.pending.pop();
        let flow = &mut self.flows[fi];
        let (held_tf, mut pkt) = flow.queue.pop_front()?;
        debug_assert_eq!(held_tf, tf);
        pkt.meta.tdp_tf = Some(held_tf);
        self.stats.released += 1;
        Some((flow.out_port, pkt))
    }

    /// When [`poll_release`](Self::poll_release) next has a packet, if any
    /// is held.
    pub fn poll_at(&self) -> Option<Instant> {
        self.pending
            .peek()
            .map(|&Reverse((tf, _, _))| self.release_at(tf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    use crate::packet::{Framing, Meta};
    use crate::sched::{Fifo, Scheduler};
    use crate::tdp::{StampMode, TdpWheel};
    use crate::time::Duration;
    use crate::wire::{build_udp, parse_ipv4, MacAddr, UdpSpec};

    const TF: u64 = 100_000;

    fn ctr() -> Ctr {
        Ctr::new(Duration(TF), 10, 4).unwrap()
    }
    fn tf(n: u64) -> Instant {
        ctr().tf_start(n)
    }

    fn pkt(uid: u64, sport: u16) -> (Packet, Ipv4Info) {
        let spec = UdpSpec {
            src_mac: MacAddr::local(1),
            dst_mac: MacAddr::local(2),
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 9, 9),
            sport,
            dport: 6000,
            tos: 0,
            ttl: 64,
            ident: uid as u16,
        };
        let data = build_udp(&spec, 200, &[]);
        let info = parse_ipv4(&data).unwrap();
        let meta = Meta {
            uid,
            ..Meta::default()
        };
        (Packet::new(data, meta), info)
    }

    fn key(sport: u16) -> FlowKey {
        FlowKey::from(&pkt(0, sport).1)
    }

    fn shaped(s: &mut EdgeShaper, now: Instant, uid: u64, sport: u16) -> Option<u64> {
        let (p, i) = pkt(uid, sport);
        match s.handle_packet(now, p, &i) {
            Ok(ShapeOutcome::Shaped { tf }) => Some(tf),
            _ => None,
        }
    }

    #[test]
    fn add_flow_validates() {
        let mut s = EdgeShaper::new(ctr(), 8);
        assert!(s
            .add_flow(key(1), 0, vec![], 1)
            .unwrap_err()
            .contains("no reserved"));
        assert!(s
            .add_flow(key(1), 0, vec![3, 10], 1)
            .unwrap_err()
            .contains("only 10 TFs"));
        assert!(s.add_flow(key(1), 0, vec![7, 2, 7], 1).is_ok());
        assert!(s.add_flow(key(1), 0, vec![1], 1).unwrap_err().contains("already"));
        assert_eq!(s.flows(), 1);
    }

    #[test]
    fn packets_take_successive_reserved_tfs_and_leave_one_tf_early() {
        let mut s = EdgeShaper::new(ctr(), 8);
        s.add_flow(key(1), 3, vec![7, 2], 1).unwrap();
        // A burst of three in TF 0: TFs 2 and 7 of this TC, 2 of the next.
        let now = tf(0) + Duration(500);
        let got: Vec<_> = (1..=3).map(|u| shaped(&mut s, now, u, 1)).collect();
        assert_eq!(got, vec![Some(2), Some(7), Some(12)]);
        assert_eq!(s.poll_at(), Some(tf(1)));
        assert!(s.poll_release(tf(1) - Duration(1)).is_none());
        let (port, p) = s.poll_release(tf(1)).unwrap();
        assert_eq!((port, p.meta.uid, p.meta.tdp_tf), (3, 1, Some(2)));
        assert!(s.poll_release(tf(1)).is_none());
        assert_eq!(s.poll_at(), Some(tf(6)));
        // Released late, everything due comes out in TF order.
        let out: Vec<_> = std::iter::from_fn(|| s.poll_release(tf(20))).collect();
        assert_eq!(
            out.iter().map(|(_, p)| p.meta.tdp_tf).collect::<Vec<_>>(),
            [Some(7), Some(12)]
        );
        assert_eq!(s.poll_at(), None);
        // Idle for a while: the lead, not the old assignment, decides.
        assert_eq!(shaped(&mut s, tf(25) + Duration(1), 4, 1), Some(27));
        // Lead 5 from TF 23: TF 28 at the earliest, so TF 27 is skipped.
        let mut s = EdgeShaper::new(ctr(), 8);
        s.add_flow(key(1), 3, vec![2, 7], 5).unwrap();
        assert_eq!(shaped(&mut s, tf(23), 1, 1), Some(32));
        let st = *s.stats();
        assert_eq!((st.shaped, st.released), (1, 0));
    }

    #[test]
    fn unreserved_and_excess_packets() {
        let mut s = EdgeShaper::new(ctr(), 2);
        s.add_flow(key(1), 0, vec![5], 1).unwrap();
        let (p, i) = pkt(9, 99);
        match s.handle_packet(tf(0), p, &i) {
            Ok(ShapeOutcome::NotShaped(p)) => assert_eq!(p.meta.uid, 9),
            other => panic!("{other:?}"),
        }
        assert_eq!(shaped(&mut s, tf(0), 1, 1), Some(5));
        assert_eq!(shaped(&mut s, tf(0), 2, 1), Some(15));
        let (p, i) = pkt(3, 1);
        let d = s.handle_packet(tf(0), p, &i).unwrap_err();
        assert_eq!((d.reason, d.pkt.meta.uid), (DropReason::ShaperFull, 3));
        // The drop did not consume a reservation.
        s.poll_release(tf(4)).unwrap();
        assert_eq!(shaped(&mut s, tf(4), 4, 1), Some(25));
        let st = *s.stats();
        assert_eq!(
            (st.shaped, st.not_shaped, st.dropped_full, st.released),
            (3, 1, 1, 1)
        );
        assert_eq!(s.len(), 2);
    }

    /// A CBR flow sending exactly its reservation (slots 2 and 7 of 10, one
    /// packet every 5 TFs); the packet sent at TF 5 arrives late, in TF 7.
    /// Unbounded, every later packet takes the slot after its own for good;
    /// with a bound of 5.5 TFs (on time, a packet waits 1.5) the one packet
    /// whose slot was taken is dropped and the flow is back in phase.
    #[test]
    fn max_hold_gives_a_late_cbr_flow_its_phase_back() {
        let arrivals = [0u64, 7, 10, 15, 20];
        let run = |m: Option<Duration>| {
            let mut s = EdgeShaper::new(ctr(), 64);
            s.set_max_hold(m);
            s.add_flow(key(1), 0, vec![2, 7], 1).unwrap();
            let got: Vec<_> = arrivals
                .iter()
                .enumerate()
                .map(|(u, &a)| shaped(&mut s, tf(a) + Duration(TF / 2), u as u64, 1))
                .collect();
            (got, s.stats().dropped_hold, s.len())
        };
        assert_eq!(
            run(None),
            (vec![Some(2), Some(12), Some(17), Some(22), Some(27)], 0, 5)
        );
        assert_eq!(
            run(Some(Duration(TF * 11 / 2))),
            (vec![Some(2), Some(12), None, Some(17), Some(22)], 1, 4)
        );
    }

    #[test]
    fn flows_are_released_in_tf_order() {
        let mut s = EdgeShaper::new(ctr(), 8);
        s.add_flow(key(1), 1, vec![6], 1).unwrap();
        s.add_flow(key(2), 2, vec![3, 8], 1).unwrap();
        shaped(&mut s, tf(0), 1, 1); // TF 6
        shaped(&mut s, tf(0), 2, 2); // TF 3
        shaped(&mut s, tf(0), 3, 2); // TF 8
        let out: Vec<_> = std::iter::from_fn(|| s.poll_release(tf(9)))
            .map(|(port, p)| (port, p.meta.uid, p.meta.tdp_tf.unwrap()))
            .collect();
        assert_eq!(out, vec![(2, 2, 3), (1, 1, 6), (2, 3, 8)]);
    }

    /// Shaper and wheel together: packets arriving with asynchronous jitter
    /// leave the edge exactly in the flow's reserved TFs.
    #[test]
    fn shaper_feeds_the_wheel_without_jitter() {
        let c = ctr();
        let mut s = EdgeShaper::new(c, 64);
        s.add_flow(key(1), 0, vec![1, 6], 1).unwrap();
        let be = Box::new(Fifo::new(16, 1 << 20));
        let mut w = TdpWheel::new(c, 2, 100_000_000, Framing::default(), be, StampMode::Tdp, None).unwrap();
        // Two packets per TC on average, arriving anywhere in their half-TC.
        let arrivals: Vec<Instant> = (0..20u64)
            .map(|k| Instant(k * 5 * TF + (k * 7_919 * 31) % (4 * TF)))
            .collect();
        let mut sent = vec![];
        let mut next = 0;
        let mut now = Instant::ZERO;
        while now < tf(120) {
            while next < arrivals.len() && arrivals[next] <= now {
                let (p, i) = pkt(next as u64, 1);
                s.handle_packet(arrivals[next], p, &i).unwrap();
                next += 1;
            }
            while let Some((_, p)) = s.poll_release(now) {
                w.enqueue(p, now).unwrap();
            }
            while let Some(p) = w.dequeue(now) {
                sent.push((c.tf_at(now), p));
            }
            now += Duration(1_000);
        }
        assert_eq!(sent.len(), arrivals.len());
        for (t, p) in &sent {
            assert!(matches!(c.tf_in_tc(*t), 1 | 6), "sent in TF {t}");
            assert_eq!(Some(*t), p.meta.tdp_tf);
        }
        assert_eq!(w.stats().total_drops(), 0);
    }
}
