//! Fair queueing: schedulers that share a link among queues in
//! proportion to weights, one queue per class or per flow.
//!
//! - [`Wfq`] — packet-by-packet GPS (Parekh & Gallager 1993), with an
//!   exact fluid GPS reference.
//! - [`Wf2q`] — WF²Q+ (Bennett & Zhang 1996), worst-case fair.
//! - [`Drr`] — deficit round robin (Shreedhar & Varghese 1995), O(1).
//!
//! What they share lives beside them: the configuration and reports
//! (`conf`: [`FairConf`], [`QueueConf`], [`QueueKey`], [`QueueInfo`]),
//! the table of queues (`queues`: key index, slots, admission and limits)
//! and the priority queues of virtual-time tags (`heap`: the 4-ary
//! [`Tagged`](heap::Tagged) heap, the radix heap and the GPS queue), plus
//! the virtual-time unit below.

mod conf;
mod drr;
#[cfg(test)]
mod gps;
mod heap;
mod queues;
mod wf2q;
mod wfq;

pub use conf::{FairConf, QueueConf, QueueInfo, QueueKey};
pub use drr::Drr;
pub use wf2q::Wf2q;
pub use wfq::Wfq;

/// Virtual-time units per byte of service at unit weight (nano-bits).
pub const VT_PER_BYTE: u128 = 8_000_000_000;

/// `a / b` and `a % b`, on 64-bit hardware division when `a` fits (the
/// common case: a packet's cost, a few µs of link work), else on `u128`.
#[inline]
pub(crate) fn div_rem(a: u128, b: u64) -> (u128, u128) {
    if a >> 64 == 0 {
        let (a, b) = (a as u64, b);
        ((a / b) as u128, (a % b) as u128)
    } else {
        (a / b as u128, a % b as u128)
    }
}

/// Helpers shared by the fair schedulers' tests.
#[cfg(test)]
pub(crate) mod testkit {
    use super::{FairConf, QueueConf};
    use crate::packet::{Meta, Packet};

    /// 8 Gbit/s: one byte per ns, so times are byte counts.
    pub const ONE_BYTE_PER_NS: u64 = 8_000_000_000;

    /// One queue of weight 1 with room to spare.
    pub fn big() -> QueueConf {
        QueueConf::new(1, 10_000, 10_000_000)
    }
    /// Class-based queues 0, 1, … with weights `w` and room to spare.
    pub fn classes(w: &[u32]) -> FairConf {
        FairConf::classes(
            w.iter()
                .enumerate()
                .map(|(i, &w)| (i as u16, QueueConf { weight: w, ..big() }))
                .collect(),
        )
    }

    /// A packet of `len` bytes with `uid`, in class and flow `key`.
    pub fn pkt(uid: u64, key: u16, len: usize) -> Packet {
        Packet::new(
            vec![0; len],
            Meta {
                uid,
                class: key,
                flow: key as u32,
                ..Meta::default()
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::{big, classes, pkt, ONE_BYTE_PER_NS};
    use super::*;
    use crate::packet::Packet;
    use crate::sched::{DropReason, Scheduler};
    use crate::time::Instant;
    use proptest::prelude::*;

    #[test]
    fn constructor_refuses_bad_configs() {
        use crate::config::Fault;
        let e = |c: FairConf| Wfq::new(c, ONE_BYTE_PER_NS).err().unwrap();
        let zero = |x: crate::ConfigError, what: &str| matches!(&x.fault, Fault::Zero(p) if p.contains(what));
        assert!(zero(e(classes(&[1, 0])), "weight"));
        assert!(matches!(e(FairConf::classes(vec![])).fault, Fault::Missing(_)));
        let twice = e(FairConf::classes(vec![(1, big()), (1, big())]));
        assert_eq!(twice.to_string(), "wfq: queue 1 is given twice");
        assert!(zero(e(FairConf::per_flow(QueueConf::new(1, 0, 10))), "limits"));
        assert!(zero(Wfq::new(classes(&[1]), 0).err().unwrap(), "link rate"));
        assert!(zero(Drr::new(classes(&[0])).err().unwrap(), "quantum"));
        assert!(zero(
            Wf2q::new(classes(&[2, 0]), ONE_BYTE_PER_NS).err().unwrap(),
            "weight"
        ));
    }

    fn fair(kind: usize, w: &[u32], limit_pkts: usize) -> Box<dyn Scheduler> {
        let conf = FairConf::classes(
            w.iter()
                .enumerate()
                .map(|(i, &w)| (i as u16, QueueConf::new(w, limit_pkts, limit_pkts * 1_500)))
                .collect(),
        );
        match kind {
            0 => Box::new(Wfq::new(conf, 1_000_000_000).unwrap()),
            1 => Box::new(Wf2q::new(conf, 1_000_000_000).unwrap()),
            _ => {
                // DRR quantum in bytes: weight × max packet.
                let mut conf = conf;
                for q in &mut conf.queues {
                    q.1.weight *= 1_500;
                }
                Box::new(Drr::new(conf).unwrap())
            }
        }
    }

    /// WFQ or WF²Q+ over `flows` per-flow queues, heap-only if `reference`.
    fn many(kind: usize, reference: bool) -> Box<dyn Scheduler> {
        let conf = FairConf::per_flow(QueueConf::new(1, 8, 8 * 1_500));
        match kind {
            0 => {
                let mut s = Wfq::new(conf, 1_000_000_000).unwrap();
                if reference {
                    s.heap_only();
                }
                Box::new(s)
            }
            _ => {
                let mut s = Wf2q::new(conf, 1_000_000_000).unwrap();
                if reference {
                    s.heap_only();
                }
                Box::new(s)
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(6))]

        /// With thousands of flows (the radix queues' regime) WFQ and
        /// WF²Q+ send exactly what their heap-only selves send, packet by
        /// packet: mixed sizes and weights-1 flows arriving in bursts and
        /// trickles, so finish tags go below the last one served too.
        #[test]
        fn many_flows_same_departures_as_heap_only(kind in 0usize..2, seed in any::<u64>()) {
            let (mut s, mut r) = (many(kind, false), many(kind, true));
            let mut x = seed | 1;
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut now = 0u64;
            // Flows with queued packets: must reach the radix regime.
            let (mut queued, mut backlogged, mut peak) = (vec![0u32; 9_000], 0usize, 0usize);
            for uid in 0..40_000u64 {
                let v = rnd();
                // Mostly arrivals while the queues fill, then mostly departures.
                let arrive = (v % 100) < if uid < 20_000 { 85 } else { 35 };
                if arrive {
                    let flow = if v % 7 == 0 { (v >> 20) % 50 } else { (v >> 20) % 9_000 } as u32;
                    let len = 40 + ((v >> 40) % 1_460) as usize;
                    let meta = crate::packet::Meta { uid, flow, ..Default::default() };
                    let a = s.enqueue(Packet::new(vec![0; len], meta), Instant(now)).is_ok();
                    let b = r.enqueue(Packet::new(vec![0; len], meta), Instant(now)).is_ok();
                    prop_assert_eq!(a, b);
                    if a {
                        queued[flow as usize] += 1;
                        backlogged += (queued[flow as usize] == 1) as usize;
                        peak = peak.max(backlogged);
                    }
                    now += (v >> 8) % 400;
                } else {
                    let a = s.dequeue(Instant(now)).map(|p| (p.meta.uid, p.meta.flow));
                    let b = r.dequeue(Instant(now)).map(|p| (p.meta.uid, p.meta.flow));
                    prop_assert_eq!(a, b);
                    if let Some((_, f)) = a {
                        queued[f as usize] -= 1;
                        backlogged -= (queued[f as usize] == 0) as usize;
                    }
                    now += 8 * 1_000;
                }
            }
            prop_assert!(peak > 4_096, "only {} flows backlogged at once", peak);
            loop {
                let a = s.dequeue(Instant(now)).map(|p| p.meta.uid);
                prop_assert_eq!(a, r.dequeue(Instant(now)).map(|p| p.meta.uid));
                if a.is_none() {
                    break;
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]

        /// Every offered packet is either dequeued exactly once or refused
        /// and counted; the scheduler never idles while it holds packets;
        /// each flow's packets leave in arrival order.
        #[test]
        fn conservation_and_work_conservation(
            kind in 0usize..3,
            w in prop::collection::vec(1u32..=4, 1..=5),
            ops in prop::collection::vec((0u8..3, 0u16..6, 1usize..=1_500), 1..300),
        ) {
            let mut s = fair(kind, &w, 4);
            let mut now = 0u64;
            let (mut offered, mut refused) = (0u64, 0u64);
            let mut out: Vec<Packet> = Vec::new();
            for (uid, &(op, key, len)) in ops.iter().enumerate() {
                now += 100;
                if op < 2 {
                    offered += 1;
                    match s.enqueue(pkt(uid as u64, key, len), Instant(now)) {
                        Ok(()) => {}
                        Err(d) => {
                            prop_assert_eq!(d.reason, DropReason::QueueFull);
                            refused += 1;
                        }
                    }
                } else {
                    let held = s.len();
                    prop_assert_eq!(s.poll_at(Instant(now)).is_some(), held > 0);
                    match s.dequeue(Instant(now)) {
                        Some(p) => out.push(p),
                        None => prop_assert_eq!(held, 0, "idle while backlogged"),
                    }
                }
            }
            while let Some(p) = s.dequeue(Instant(now)) {
                out.push(p);
            }
            prop_assert_eq!(s.len(), 0);
            prop_assert_eq!(s.bytes(), 0);
            prop_assert_eq!(out.len() as u64 + refused, offered);
            let st = s.stats();
            prop_assert_eq!(st.enq_pkts, out.len() as u64);
            prop_assert_eq!(st.deq_pkts, out.len() as u64);
            prop_assert_eq!(st.total_drops(), refused);
            prop_assert_eq!(st.enq_bytes, st.deq_bytes);
            for k in 0..6u16 {
                let uids: Vec<u64> = out.iter().filter(|p| p.meta.class == k).map(|p| p.meta.uid).collect();
                prop_assert!(uids.windows(2).all(|x| x[0] < x[1]), "flow {} reordered", k);
            }
        }

        /// Continuously backlogged flows share the link in proportion to
        /// their weights, to within n·L_max bytes at every instant
        /// (DRR: within one quantum plus n·L_max).
        #[test]
        fn weights_respected_when_backlogged(
            kind in 0usize..3,
            w in prop::collection::vec(1u32..=4, 2..=4),
            seed in any::<u64>(),
        ) {
            let n = w.len();
            let mut s = fair(kind, &w, 100);
            let mut x = seed | 1;
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                64 + (x % 1_437) as usize
            };
            let mut uid = 0u64;
            let mut now = 0u64;
            for f in 0..n {
                for _ in 0..3 {
                    s.enqueue(pkt(uid, f as u16, rnd()), Instant(now)).unwrap();
                    uid += 1;
                }
            }
            let wsum: u32 = w.iter().sum();
            let lmax = 1_500.0;
            let bound = if kind == 2 { 4.0 * 1_500.0 + n as f64 * lmax } else { n as f64 * lmax };
            let mut sent = vec![0f64; n];
            for _ in 0..3_000 {
                let p = s.dequeue(Instant(now)).unwrap();
                let f = p.meta.class as usize;
                sent[f] += p.len() as f64;
                // 1 Gbit/s: the link is busy for len·8 ns.
                now += p.len() as u64 * 8;
                s.enqueue(pkt(uid, f as u16, rnd()), Instant(now)).unwrap();
                uid += 1;
                let total: f64 = sent.iter().sum();
                for i in 0..n {
                    let fair = total * w[i] as f64 / wsum as f64;
                    prop_assert!((sent[i] - fair).abs() <= bound,
                        "kind {} flow {} sent {} fair {} bound {}", kind, i, sent[i], fair, bound);
                }
            }
        }
    }
}
