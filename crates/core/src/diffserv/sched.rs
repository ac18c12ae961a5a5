//! The PHB output scheduler of a DiffServ port.
//!
//! - RFC 3246 §2: EF departs at least at a configured rate regardless of
//!   other traffic, which strict priority gives; §2.3 and RFC 2474 §4.2.2.2
//!   warn that a PHB with priority must be rate-limited so it cannot
//!   starve the others. EF here is strict priority *while it conforms to a
//!   token bucket* (`ef_rate_bps`, `ef_burst`); beyond it, EF waits behind
//!   the AF/BE classes but is still sent when they are idle, so the link
//!   never idles with packets queued (work-conserving). Optionally
//!   ([`DsSched::with_ef_hard_limit`]) EF beyond the rate is held even on
//!   an idle link, and [`Scheduler::poll_at`] says when its tokens come.
//! - RFC 2597 §2, §4: four AF classes, each its own queue with a
//!   forwarding share, and inside a class three drop precedences that
//!   active queue management must discard in order, dp3 first. Here the
//!   classes share the rest of the link by WF²Q+ (Bennett & Zhang 1996)
//!   with `af_weights`, best effort takes part with `be_weight`, and each
//!   AF queue is WRED ([`crate::sched::Red`]) with staggered per-colour
//!   profiles (colour = drop precedence, from `meta.color`).
//! - RFC 4594 §3.1: network control (CS6/CS7 in the default
//!   [`super::PhbMap`]) is served first, unlimited: routing must get
//!   through a congested link. Frames a router originates carry class 0
//!   (`Meta::default()`), so its own ARP and ICMP go there too.
//! - Lai, DEGEB (seed 004) §2.1, §4.4 (Fig. 4): the core router's PHBs;
//!   EF latency stays low (≈ 7 ms against ≈ 80 ms for BE) under BE
//!   congestion because EF is served first.
//!
//! Classes come from `meta.class` as set by [`super::DsClassifier`]
//! (`CLASS_NC` 0, `CLASS_EF` 1, `CLASS_AF1..4` 2..5, `CLASS_BE` 6; higher
//! values are treated as BE). Byte counts are frame bytes (`Packet::len`),
//! what the port transmits, so `ef_rate_bps` is a share of the link.

use std::collections::VecDeque;

use super::dscp::{CLASSES, CLASS_AF1, CLASS_BE, CLASS_EF, CLASS_NC};
use crate::meter::TokenBucket;
use crate::packet::{Color, Packet};
use crate::sched::{DropReason, Dropped, Fifo, QueueStats, Red, RedConf, RedProfile, Scheduler, VT_PER_BYTE};
use crate::time::{Duration, Instant};

/// Smallest queue for WRED: 1/16 of it holds a 1514-byte frame.
const WRED_MIN_QUEUE: usize = 16 * 1514;

/// Settings of a [`DsSched`]. Rates in bit/s, sizes in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DsSchedConf {
    /// Capacity of the port (for WRED's idle-time decay and validation).
    pub link_bps: u64,
    /// EF token bucket: EF has priority while it conforms to this rate.
    pub ef_rate_bps: u64,
    pub ef_burst: u64,
    /// WF²Q+ weights of AF1..AF4.
    pub af_weights: [u32; 4],
    pub be_weight: u32,
    /// Tail-drop limits of every class queue.
    pub queue_pkts: usize,
    pub queue_bytes: usize,
    /// WRED by drop precedence in the AF queues (else tail drop).
    pub wred: bool,
}

impl DsSchedConf {
    /// Defaults for a port of `link_bps`:
    /// - EF limited to 30 % of the link with a 15 000-byte burst (ten
    ///   full-size frames): the usual "EF ≤ about a third" engineering rule
    ///   for voice (e.g. RFC 4594 §2.3's caution about EF), and the same
    ///   default the scenario format uses;
    /// - AF weights 4:3:2:1 and BE 1, so AF1 > AF2 > AF3 > AF4 > … as in
    ///   the paper's Table 4-1, and BE is never starved;
    /// - queues of at most 1000 packets (Linux' default txqueuelen) and
    ///   50 ms of the link's bytes (at least 64 KiB);
    /// - WRED on.
    pub fn new(link_bps: u64) -> Self {
        DsSchedConf {
            link_bps,
            ef_rate_bps: link_bps / 10 * 3,
            ef_burst: 15_000,
            af_weights: [4, 3, 2, 1],
            be_weight: 1,
            queue_pkts: 1_000,
            queue_bytes: ((link_bps / 8 / 20) as usize).max(64 * 1024),
            wred: true,
        }
    }

    /// WRED profiles for green, yellow, red in an AF queue of `queue_bytes`
    /// (RFC 2597 §4.2: dp3 dropped before dp2 before dp1). The ranges are
    /// staggered, not overlapping: red is early-dropped from 1/16 of the
    /// queue and always above 1/8; yellow from 1/8, always above 1/4;
    /// green only from 3/8 to 3/4. So by the time a green packet can be
    /// dropped at all, every red and yellow arrival already is, and the
    /// gap between 1/4 and 3/8 keeps EWMA wobble around yellow's forced
    /// threshold from touching green.
    pub fn wred_profiles(&self) -> [RedProfile; 3] {
        let q = self.queue_bytes.min(u32::MAX as usize) as u32;
        [
            RedProfile {
                min_th: q / 8 * 3,
                max_th: q / 4 * 3,
                max_p: 0.05,
            },
            RedProfile {
                min_th: q / 8,
                max_th: q / 4,
                max_p: 0.1,
            },
            RedProfile {
                min_th: q / 16,
                max_th: q / 8,
                max_p: 0.2,
            },
        ]
    }

    fn validate(&self) -> Result<(), String> {
        let e = |m: String| Err(format!("diffserv scheduler: {m}"));
        if self.link_bps == 0 {
            return e("link rate is 0".into());
        }
        if self.ef_rate_bps == 0 {
            return e("EF rate is 0 (EF would never have priority)".into());
        }
        if self.ef_rate_bps > self.link_bps {
            return e(format!(
                "EF rate {} bit/s is above the link's {} bit/s (RFC 3246: EF must be a fraction of the link)",
                self.ef_rate_bps, self.link_bps
            ));
        }
        if self.ef_burst == 0 {
            return e("EF burst is 0 bytes".into());
        }
        for (i, w) in self.af_weights.iter().enumerate() {
            if *w == 0 {
                return e(format!("AF{} weight is 0 (the class would starve)", i + 1));
            }
        }
        if self.be_weight == 0 {
            return e("BE weight is 0 (best effort would starve)".into());
        }
        if self.queue_pkts == 0 || self.queue_bytes == 0 {
            return e("queue limits must be > 0".into());
        }
        if self.wred && self.queue_bytes < WRED_MIN_QUEUE {
            return e(format!(
                "AF WRED needs queue_bytes >= {WRED_MIN_QUEUE} (its lowest threshold, 1/16 of the queue, \
                 must hold a full-size frame); got {}",
                self.queue_bytes
            ));
        }
        Ok(())
    }
}

/// A class queue inside the WF²Q+ part, with the state of its head packet.
struct FairClass {
    q: Box<dyn Scheduler>,
    /// Lengths of the queued packets in order: WF²Q+ needs each head's
    /// length for its finish tag when it reaches the head.
    lens: VecDeque<usize>,
    weight: u32,
    /// Virtual start and finish of the head packet (or of the last packet
    /// sent, while idle).
    start: u128,
    finish: u128,
}

/// NC > rate-limited EF > WF²Q+(AF1..AF4, BE). See the module
/// documentation.
pub struct DsSched {
    conf: DsSchedConf,
    nc: Fifo,
    ef: Fifo,
    ef_tb: TokenBucket,
    ef_hard: bool,
    /// AF1..AF4, BE.
    fair: Vec<FairClass>,
    fair_len: usize,
    /// WF²Q+ system virtual time, nano-bits per unit weight.
    v: u128,
    wsum: u128,
    cstats: [QueueStats; CLASSES],
    colour_drops: [[u64; 3]; CLASSES],
    stats: QueueStats,
}

fn colour_index(c: Color) -> usize {
    match c {
        Color::Green => 0,
        Color::Yellow => 1,
        Color::Red => 2,
    }
}

/// `len` bytes in virtual time of a share `w`.
fn vt(len: usize, w: u128) -> u128 {
    len as u128 * VT_PER_BYTE / w
}

impl DsSched {
    pub fn new(conf: DsSchedConf) -> Result<Self, String> {
        conf.validate()?;
        let ef_tb = TokenBucket::new(conf.ef_rate_bps, conf.ef_burst)
            .map_err(|e| format!("diffserv scheduler: EF {e}"))?;
        let mut fair = Vec::with_capacity(5);
        for (i, &weight) in conf.af_weights.iter().chain([&conf.be_weight]).enumerate() {
            let q: Box<dyn Scheduler> = if conf.wred && i < 4 {
                let mut rc = RedConf::wred(
                    conf.queue_pkts,
                    conf.queue_bytes,
                    conf.wred_profiles(),
                    conf.link_bps,
                );
                // A fixed seed per class: runs replay exactly.
                rc.seed = 0x0af0 + i as u64;
                Box::new(Red::new(rc).map_err(|e| format!("diffserv scheduler: AF{} WRED: {e}", i + 1))?)
            } else {
                Box::new(Fifo::new(conf.queue_pkts, conf.queue_bytes))
            };
            fair.push(FairClass {
                q,
                lens: VecDeque::new(),
                weight,
                start: 0,
                finish: 0,
            });
        }
        let wsum = fair.iter().map(|f| f.weight as u128).sum();
        Ok(DsSched {
            nc: Fifo::new(conf.queue_pkts, conf.queue_bytes),
            ef: Fifo::new(conf.queue_pkts, conf.queue_bytes),
            ef_tb,
            ef_hard: false,
            fair,
            fair_len: 0,
            v: 0,
            wsum,
            cstats: Default::default(),
            colour_drops: [[0; 3]; CLASSES],
            stats: QueueStats::default(),
            conf,
        })
    }

    /// Hold EF beyond its rate even when the link is otherwise idle (a
    /// non-work-conserving EF shaper); `poll_at` then returns when the
    /// head's tokens arrive. EF frames larger than `ef_burst` could never
    /// conform and are dropped as [`DropReason::Policed`] in this mode.
    pub fn with_ef_hard_limit(mut self, on: bool) -> Self {
        self.ef_hard = on;
        self
    }

    pub fn conf(&self) -> &DsSchedConf {
        &self.conf
    }

    /// Counters of one class (`CLASS_NC..=CLASS_BE`; higher = BE).
    pub fn class_stats(&self, class: u16) -> &QueueStats {
        &self.cstats[class.min(CLASS_BE) as usize]
    }

    /// Packets queued in a class.
    pub fn class_len(&self, class: u16) -> usize {
        match class.min(CLASS_BE) {
            CLASS_NC => self.nc.len(),
            CLASS_EF => self.ef.len(),
            c => self.fair[(c - CLASS_AF1) as usize].lens.len(),
        }
    }

    /// Drops (any reason) of packets of colour `c` in a class.
    pub fn colour_drops(&self, class: u16, c: Color) -> u64 {
        self.colour_drops[class.min(CLASS_BE) as usize][colour_index(c)]
    }

    fn refuse(&mut self, class: usize, d: Dropped) -> Result<(), Dropped> {
        self.stats.on_drop(d.reason);
        self.cstats[class].on_drop(d.reason);
        self.colour_drops[class][colour_index(d.pkt.meta.color)] += 1;
        Err(d)
    }

    /// Which fair class to serve: among backlogged classes whose head has
    /// started in virtual time (S ≤ V: WF²Q+ eligibility), the smallest
    /// finish tag; ties to the lower class (AF1 before BE).
    /// Also the virtual time to serve it at (V is only moved by dequeue).
    fn pick_fair(&self) -> Option<(usize, u128)> {
        let min_s = self
            .fair
            .iter()
            .filter(|f| !f.lens.is_empty())
            .map(|f| f.start)
            .min()?;
        // V ← max(V, min S): the system virtual time never lags every
        // backlogged class (Bennett & Zhang's V(t) definition).
        let v = self.v.max(min_s);
        self.fair
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.lens.is_empty() && f.start <= v)
            .min_by_key(|(i, f)| (f.finish, *i))
            .map(|(i, _)| (i, v))
    }

    /// Whether an EF frame of `len` bytes is within the EF rate at `now`
    /// (what the token bucket's `conform` would say, without taking).
    fn ef_conforms(&self, now: Instant, len: usize) -> bool {
        self.ef_tb.time_to_conform(now, len as u32) == Some(Duration::ZERO)
    }

    fn dequeue_fair(&mut self, now: Instant) -> Option<Packet> {
        let (k, v) = self.pick_fair()?;
        self.v = v;
        let f = &mut self.fair[k];
        let Some(pkt) = f.q.dequeue(now) else {
            // Cannot happen with FIFO children; resynchronise rather than spin.
            self.fair_len -= f.lens.len();
            f.lens.clear();
            return None;
        };
        let len = f.lens.pop_front().unwrap_or(pkt.len());
        self.fair_len -= 1;
        if let Some(&next) = f.lens.front() {
            f.start = f.finish;
            f.finish = f.start + vt(next, f.weight as u128);
        }
        // Work W = len bytes at the whole fair share: V += W / Σw.
        self.v += vt(len, self.wsum);
        Some(pkt)
    }

    fn sent(&mut self, class: u16, pkt: Packet) -> Option<Packet> {
        self.stats.on_dequeue(pkt.len());
        self.cstats[class as usize].on_dequeue(pkt.len());
        Some(pkt)
    }
}

impl Scheduler for DsSched {
    fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped> {
        let class = pkt.meta.class.min(CLASS_BE);
        let ci = class as usize;
        let len = pkt.len();
        let res = match class {
            CLASS_NC => self.nc.enqueue(pkt, now),
            CLASS_EF => {
                if self.ef_hard && len as u64 > self.conf.ef_burst {
                    Err(Dropped {
                        pkt,
                        reason: DropReason::Policed,
                    })
                } else {
                    self.ef.enqueue(pkt, now)
                }
            }
            _ => {
                let k = (class - CLASS_AF1) as usize;
                let r = self.fair[k].q.enqueue(pkt, now);
                if r.is_ok() {
                    let f = &mut self.fair[k];
                    f.lens.push_back(len);
                    if f.lens.len() == 1 {
                        // Newly backlogged: S = max(F, V), F = S + L/w.
                        f.start = f.finish.max(self.v);
                        f.finish = f.start + vt(len, f.weight as u128);
                    }
                    self.fair_len += 1;
                }
                r
            }
        };
        match res {
            Ok(()) => {
                self.stats.on_enqueue(len);
                self.cstats[ci].on_enqueue(len);
                Ok(())
            }
            Err(d) => self.refuse(ci, d),
        }
    }

    fn dequeue(&mut self, now: Instant) -> Option<Packet> {
        if let Some(p) = self.nc.dequeue(now) {
            return self.sent(CLASS_NC, p);
        }
        let ef_head = self.ef.peek(now).map(|p| p.len() as u32);
        if let Some(len) = ef_head {
            if self.ef_tb.conform(now, len) {
                let p = self.ef.dequeue(now)?;
                return self.sent(CLASS_EF, p);
            }
        }
        if self.fair_len > 0 {
            if let Some(p) = self.dequeue_fair(now) {
                let class = p.meta.class.min(CLASS_BE);
                return self.sent(class, p);
            }
        }
        // EF over its rate: only on an otherwise idle link, and without
        // taking tokens — it uses capacity nobody else wanted, so it should
        // not cost EF its priority later.
        if let Some(len) = ef_head {
            if !self.ef_hard || self.ef_tb.time_to_conform(now, len).is_none() {
                let p = self.ef.dequeue(now)?;
                return self.sent(CLASS_EF, p);
            }
        }
        None
    }

    /// Decided as `dequeue` decides, without taking EF tokens or moving
    /// the WF²Q+ virtual time.
    fn peek(&self, now: Instant) -> Option<&Packet> {
        if let Some(p) = self.nc.peek(now) {
            return Some(p);
        }
        let ef_head = self.ef.peek(now);
        if let Some(p) = ef_head.filter(|p| self.ef_conforms(now, p.len())) {
            return Some(p);
        }
        if self.fair_len > 0 {
            if let Some(p) = self.pick_fair().and_then(|(k, _)| self.fair[k].q.peek(now)) {
                return Some(p);
            }
        }
        let p = ef_head?;
        (!self.ef_hard || self.ef_tb.time_to_conform(now, p.len() as u32).is_none()).then_some(p)
    }

    fn poll_at(&self, now: Instant) -> Option<Instant> {
        if !self.nc.is_empty() || self.fair_len > 0 {
            return Some(now);
        }
        let len = self.ef.peek(now)?.len() as u32;
        if !self.ef_hard {
            return Some(now);
        }
        Some(self.ef_tb.time_to_conform(now, len).map_or(now, |d| now + d))
    }

    fn len(&self) -> usize {
        self.nc.len() + self.ef.len() + self.fair_len
    }
    fn bytes(&self) -> usize {
        self.nc.bytes() + self.ef.bytes() + self.fair.iter().map(|f| f.q.bytes()).sum::<usize>()
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "diffserv"
    }
    /// Per PHB class: packets and bytes sent, drops by reason, WRED drops
    /// by colour (non-zero ones only).
    fn counters(&self) -> Vec<(String, u64)> {
        const NAMES: [&str; 7] = ["NC", "EF", "AF1", "AF2", "AF3", "AF4", "BE"];
        let mut v = Vec::new();
        for (ci, name) in NAMES.iter().enumerate() {
            let st = &self.cstats[ci];
            v.push((format!("{name}.sent"), st.deq_pkts));
            v.push((format!("{name}.sent_bytes"), st.deq_bytes));
            v.extend(st.drop_counts().map(|(r, n)| (format!("{name}.drop_{r}"), n)));
            for (k, c) in ["green", "yellow", "red"].iter().enumerate() {
                let n = self.colour_drops[ci][k];
                if n > 0 {
                    v.push((format!("{name}.dropped_{c}"), n));
                }
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::super::dscp::{CLASS_AF2, CLASS_AF3, CLASS_AF4};
    use super::*;
    use crate::packet::Meta;
    use crate::time::Duration;
    use proptest::prelude::*;

    const MBIT: u64 = 1_000_000;

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
    fn coloured(uid: u64, class: u16, len: usize, color: Color) -> Packet {
        let mut p = pkt(uid, class, len);
        p.meta.color = color;
        p
    }

    #[test]
    fn refuses_bad_configs() {
        let e = |f: &dyn Fn(&mut DsSchedConf)| {
            let mut c = DsSchedConf::new(100 * MBIT);
            f(&mut c);
            DsSched::new(c).err().unwrap()
        };
        assert!(e(&|c| c.ef_rate_bps = 200 * MBIT).contains("above the link"));
        assert!(e(&|c| c.ef_rate_bps = 0).contains("EF rate is 0"));
        assert!(e(&|c| c.af_weights[2] = 0).contains("AF3 weight is 0"));
        assert!(e(&|c| c.be_weight = 0).contains("BE weight"));
        assert!(e(&|c| c.queue_bytes = 0).contains("limits"));
        assert!(e(&|c| c.link_bps = 0).contains("link rate"));
        assert!(e(&|c| c.ef_burst = 0).contains("burst"));
        // WRED needs room for its thresholds.
        assert!(e(&|c| c.queue_bytes = 10).contains("WRED needs queue_bytes >= 24224"));
        let mut c = DsSchedConf::new(100 * MBIT);
        c.queue_bytes = 10;
        c.wred = false;
        assert!(DsSched::new(c).is_ok());
    }

    #[test]
    fn defaults_are_documented_values() {
        let c = DsSchedConf::new(100 * MBIT);
        assert_eq!((c.ef_rate_bps, c.ef_burst), (30 * MBIT, 15_000));
        assert_eq!((c.af_weights, c.be_weight), ([4, 3, 2, 1], 1));
        assert_eq!((c.queue_pkts, c.queue_bytes, c.wred), (1_000, 625_000, true));
        assert_eq!(DsSchedConf::new(MBIT).queue_bytes, 65_536);
        let [g, y, r] = c.wred_profiles();
        assert!(r.max_th <= y.min_th && y.max_th < g.min_th);
    }

    #[test]
    fn golden_order_nc_then_ef_then_weighted() {
        let mut c = DsSchedConf::new(100 * MBIT);
        c.af_weights = [2, 1, 1, 1];
        let mut s = DsSched::new(c).unwrap();
        let t = Instant(0);
        // AF1 ×4 and AF2 ×2 (1000 B), then EF, then NC arrive.
        for uid in 1..=4 {
            s.enqueue(pkt(uid, CLASS_AF1, 1000), t).unwrap();
        }
        for uid in 5..=6 {
            s.enqueue(pkt(uid, CLASS_AF2, 1000), t).unwrap();
        }
        s.enqueue(pkt(7, CLASS_EF, 1000), t).unwrap();
        s.enqueue(pkt(8, CLASS_NC, 100), t).unwrap();
        let order: Vec<u64> = std::iter::from_fn(|| s.dequeue(t)).map(|p| p.meta.uid).collect();
        // WF²Q+ with weights 2:1 and Σw = 6: F(AF1) = 0.5, 1.0, 1.5, 2.0
        // (in 1000 B per unit weight), F(AF2) = 1, 2; eligibility holds
        // AF1's second packet (S = 0.5) until V reaches it.
        assert_eq!(order, vec![8, 7, 1, 5, 2, 3, 6, 4]);
        assert_eq!(s.len(), 0);
        assert_eq!(s.class_stats(CLASS_AF1).deq_pkts, 4);
        assert_eq!(s.stats().deq_pkts, 8);
    }

    /// Drive a link of `link` bit/s for `secs`, topping every class in
    /// `offered` up to two queued packets of `len` bytes; bits sent per
    /// class.
    fn saturate(s: &mut DsSched, link: u64, offered: &[u16], len: usize, secs: f64) -> [u64; CLASSES] {
        let mut sent = [0u64; CLASSES];
        let mut t = Instant(0);
        let end = Instant(0) + Duration::from_secs_f64(secs);
        let mut uid = 0;
        while t < end {
            for &c in offered {
                while s.class_len(c) < 2 {
                    uid += 1;
                    s.enqueue(pkt(uid, c, len), t).unwrap();
                }
            }
            match s.dequeue(t) {
                Some(p) => {
                    sent[p.meta.class as usize] += p.len() as u64 * 8;
                    t += Duration::for_bytes(p.len() as u64, link);
                }
                None => t = s.poll_at(t).unwrap(),
            }
        }
        sent
    }

    #[test]
    fn ef_has_priority_but_not_beyond_its_rate_when_others_are_backlogged() {
        let link = 100 * MBIT;
        let mut c = DsSchedConf::new(link);
        c.ef_rate_bps = 10 * MBIT;
        let mut s = DsSched::new(c).unwrap();
        let sent = saturate(&mut s, link, &[CLASS_EF, CLASS_AF1, CLASS_BE], 1000, 1.0);
        let ef = sent[CLASS_EF as usize] as f64 / 1e6;
        // 10 Mb/s plus the 15 kB burst (0.12 Mb), within a packet.
        assert!((10.0..=10.2).contains(&ef), "EF {ef} Mb/s");
        // The rest is split AF1:BE = 4:1.
        let (af1, be) = (sent[CLASS_AF1 as usize] as f64, sent[CLASS_BE as usize] as f64);
        assert!((af1 / be - 4.0).abs() < 0.01, "{af1} / {be}");
    }

    #[test]
    fn ef_alone_uses_the_whole_link_unless_hard_limited() {
        let link = 100 * MBIT;
        let mut c = DsSchedConf::new(link);
        c.ef_rate_bps = 10 * MBIT;
        let mut s = DsSched::new(c.clone()).unwrap();
        let sent = saturate(&mut s, link, &[CLASS_EF], 1000, 0.1);
        assert!(sent[CLASS_EF as usize] as f64 / 1e6 > 9.99, "work-conserving");
        let mut s = DsSched::new(c).unwrap().with_ef_hard_limit(true);
        let sent = saturate(&mut s, link, &[CLASS_EF], 1000, 1.0);
        let ef = sent[CLASS_EF as usize] as f64 / 1e6;
        assert!((10.0..=10.2).contains(&ef), "EF {ef} Mb/s");
        // poll_at is the instant the head's tokens are in.
        let t = Instant(2_000_000_000);
        let mut s = DsSched::new(DsSchedConf {
            ef_rate_bps: 8 * MBIT,
            ef_burst: 2_000,
            ..DsSchedConf::new(link)
        })
        .unwrap()
        .with_ef_hard_limit(true);
        for uid in 0..3 {
            s.enqueue(pkt(uid, CLASS_EF, 1000), t).unwrap();
        }
        assert!(s.dequeue(t).is_some() && s.dequeue(t).is_some());
        assert!(s.dequeue(t).is_none());
        assert_eq!(s.poll_at(t), Some(t + Duration::from_millis(1)));
        assert!(s.dequeue(t + Duration(999_999)).is_none());
        assert!(s.dequeue(t + Duration::from_millis(1)).is_some());
        assert_eq!(s.poll_at(t), None);
        // Too big to ever conform: refused, not stuck.
        let d = s.enqueue(pkt(9, CLASS_EF, 2_001), t).unwrap_err();
        assert_eq!(d.reason, DropReason::Policed);
        assert_eq!(s.class_stats(CLASS_EF).drops(DropReason::Policed), 1);
    }

    #[test]
    fn af_weights_are_respected() {
        let link = 100 * MBIT;
        let mut s = DsSched::new(DsSchedConf::new(link)).unwrap();
        let all = [CLASS_AF1, CLASS_AF2, CLASS_AF3, CLASS_AF4, CLASS_BE];
        // Mixed sizes: shares are in bytes, not packets.
        let sent = saturate(&mut s, link, &all, 700, 0.5);
        let total: u64 = all.iter().map(|c| sent[*c as usize]).sum();
        for (c, w) in all.iter().zip([4.0, 3.0, 2.0, 1.0, 1.0]) {
            let share = sent[*c as usize] as f64 / total as f64;
            assert!((share - w / 11.0).abs() < 0.002, "class {c}: {share}");
        }
        // An idle class's share goes to the others in proportion.
        let mut s = DsSched::new(DsSchedConf::new(link)).unwrap();
        let sent = saturate(&mut s, link, &[CLASS_AF2, CLASS_AF4], 1500, 0.5);
        let r = sent[CLASS_AF2 as usize] as f64 / sent[CLASS_AF4 as usize] as f64;
        assert!((r - 3.0).abs() < 0.02, "{r}");
        assert!((sent[CLASS_AF2 as usize] + sent[CLASS_AF4 as usize]) as f64 > 0.499 * link as f64);
    }

    #[test]
    fn wred_drops_red_then_yellow_before_green() {
        // Offer 2 packets per packet time into AF1, colours G, Y, R in
        // turn: half must go. Red goes first, then yellow; green never.
        let link = 100 * MBIT;
        let mut s = DsSched::new(DsSchedConf::new(link)).unwrap();
        let tx = Duration::for_bytes(1000, link);
        let mut t = Instant(0);
        let colours = [Color::Green, Color::Yellow, Color::Red];
        let mut uid = 0;
        for _ in 0..40_000 {
            for _ in 0..2 {
                uid += 1;
                let _ = s.enqueue(coloured(uid, CLASS_AF1, 1000, colours[uid as usize % 3]), t);
            }
            s.dequeue(t);
            t += tx;
        }
        let d = |c| s.colour_drops(CLASS_AF1, c);
        let (g, y, r) = (d(Color::Green), d(Color::Yellow), d(Color::Red));
        assert_eq!(g, 0, "green dropped ({g}, {y}, {r})");
        assert!(r > y && y > 0, "({g}, {y}, {r})");
        let st = s.class_stats(CLASS_AF1);
        assert_eq!(st.drops(DropReason::Aqm), y + r);
        assert_eq!(st.drops(DropReason::QueueFull), 0);
        // Without WRED the same load is tail-dropped without regard to colour.
        let mut c = DsSchedConf::new(link);
        c.wred = false;
        let mut s = DsSched::new(c).unwrap();
        let mut t = Instant(0);
        let mut uid = 0;
        for _ in 0..10_000 {
            for _ in 0..2 {
                uid += 1;
                let _ = s.enqueue(coloured(uid, CLASS_AF1, 1000, colours[uid as usize % 3]), t);
            }
            s.dequeue(t);
            t += tx;
        }
        assert!(s.colour_drops(CLASS_AF1, Color::Green) > 1_000);
        assert_eq!(s.class_stats(CLASS_AF1).drops(DropReason::Aqm), 0);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Enq(u16, u8, usize),
        Deq,
        Wait(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u16..9, 0u8..3, 60usize..1515).prop_map(|(c, k, l)| Op::Enq(c, k, l)),
            3 => Just(Op::Deq),
            1 => (0u64..2_000_000).prop_map(Op::Wait),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Conservation: every packet offered is dequeued exactly once or
        /// refused and counted, per class and in total; the scheduler
        /// never stalls with packets queued.
        #[test]
        fn every_packet_is_sent_or_counted_dropped(
            ops in prop::collection::vec(op(), 1..400),
            wred in any::<bool>(),
            hard in any::<bool>(),
        ) {
            let mut c = DsSchedConf::new(10 * MBIT);
            c.ef_rate_bps = MBIT;
            c.ef_burst = 1_600;
            c.queue_pkts = 12;
            c.queue_bytes = 30_000;
            c.wred = wred;
            let mut s = DsSched::new(c).unwrap().with_ef_hard_limit(hard);
            let mut t = Instant(0);
            let mut offered = [0u64; CLASSES];
            let mut out: Vec<u64> = vec![];
            let mut dropped: Vec<u64> = vec![];
            let colours = [Color::Green, Color::Yellow, Color::Red];
            for (uid, o) in ops.into_iter().enumerate() {
                match o {
                    Op::Enq(class, k, len) => {
                        offered[class.min(CLASS_BE) as usize] += 1;
                        if let Err(d) = s.enqueue(coloured(uid as u64, class, len, colours[k as usize]), t) {
                            prop_assert_eq!(d.pkt.meta.uid, uid as u64);
                            dropped.push(uid as u64);
                        }
                    }
                    Op::Deq => {
                        let ready = s.poll_at(t).is_some_and(|a| a <= t);
                        let p = s.dequeue(t);
                        prop_assert_eq!(ready, p.is_some(), "poll_at agrees with dequeue");
                        out.extend(p.map(|p| p.meta.uid));
                    }
                    Op::Wait(ns) => t += Duration(ns),
                }
            }
            // Drain, following poll_at: it must always lead somewhere.
            while let Some(at) = s.poll_at(t) {
                prop_assert!(at >= t);
                t = at;
                let p = s.dequeue(t);
                prop_assert!(p.is_some(), "poll_at promised a packet at {:?}", t);
                out.extend(p.map(|p| p.meta.uid));
            }
            prop_assert_eq!(s.len(), 0);
            prop_assert_eq!(s.bytes(), 0);
            let mut all: Vec<u64> = out.iter().chain(&dropped).copied().collect();
            all.sort_unstable();
            let n = all.len();
            all.dedup();
            prop_assert_eq!(all.len(), n, "no packet twice");
            prop_assert_eq!(n as u64, offered.iter().sum::<u64>());
            let st = s.stats();
            prop_assert_eq!(st.enq_pkts, st.deq_pkts);
            prop_assert_eq!(st.total_drops(), dropped.len() as u64);
            for (c, off) in offered.iter().enumerate() {
                let cs = s.class_stats(c as u16);
                prop_assert_eq!(cs.enq_pkts + cs.total_drops(), *off);
                prop_assert_eq!(cs.enq_pkts, cs.deq_pkts);
            }
        }
    }
}
