//! Random early detection, Floyd & Jacobson, "Random Early Detection
//! Gateways for Congestion Avoidance" (IEEE/ACM ToN 1993), §4 and Fig. 2;
//! and weighted RED (WRED) with one (min_th, max_th, max_p) profile per
//! drop precedence, as RFC 2597 §4.2 asks of an AF queue: packets of
//! higher drop precedence (yellow, red) are dropped earlier than green.
//!
//! A FIFO that, on each arrival, updates the average queue size
//! avg ← (1 − w_q)·avg + w_q·q (or decays it by (1 − w_q)^m after an idle
//! period long enough to send m packets), then, for the packet's colour:
//! below min_th accepts; between the thresholds drops with
//! p_a = p_b / (1 − count·p_b), p_b = max_p·(avg − min_th)/(max_th − min_th),
//! where count is packets since the last drop — spreading drops evenly;
//! at or above max_th drops. Sizes are in bytes.
//!
//! Everything is integer and replayable: w_q = 2^−wq_log, avg in 1/65536
//! bytes, probabilities in 1/2³², and randomness from a seeded
//! [`SplitMix64`]; no OS randomness.

use crate::config::ConfigError;
use std::collections::VecDeque;

use super::{DropReason, Dropped, QueueStats, Scheduler};
use crate::packet::{Color, Packet};
use crate::time::Instant;

/// SplitMix64 (Steele, Lea & Flood 2014; Vigna's public-domain version):
/// a tiny, fast, well-mixed generator for deterministic simulation.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Drop profile of one colour (drop precedence).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedProfile {
    /// Average queue (bytes) where early drops start.
    pub min_th: u32,
    /// Average queue (bytes) from which every packet is dropped.
    pub max_th: u32,
    /// Drop probability reached just below `max_th`, in (0, 1].
    pub max_p: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RedConf {
    /// Hard (tail-drop) limits.
    pub limit_pkts: usize,
    pub limit_bytes: usize,
    /// w_q = 2^−wq_log; Floyd–Jacobson suggest w_q = 0.002 (≈ 2^−9).
    pub wq_log: u8,
    /// Link rate and typical packet size, to turn idle time into the
    /// number m of packets the link could have sent (idle decay).
    pub link_bps: u64,
    pub avpkt: u32,
    /// Profiles for green, yellow and red packets (`meta.color`).
    pub profiles: [RedProfile; 3],
    pub seed: u64,
}

impl RedConf {
    /// Plain RED: one profile for every colour.
    pub fn red(limit_pkts: usize, limit_bytes: usize, p: RedProfile, link_bps: u64) -> Self {
        Self::wred(limit_pkts, limit_bytes, [p; 3], link_bps)
    }
    /// WRED: profiles for green, yellow, red.
    pub fn wred(limit_pkts: usize, limit_bytes: usize, p: [RedProfile; 3], link_bps: u64) -> Self {
        RedConf {
            limit_pkts,
            limit_bytes,
            wq_log: 9,
            link_bps,
            avpkt: 1_000,
            profiles: p,
            seed: 1,
        }
    }
}

const AVG_SHIFT: u32 = 16;
const ONE_Q32: u128 = 1 << 32;

fn colour_index(c: Color) -> usize {
    match c {
        Color::Green => 0,
        Color::Yellow => 1,
        Color::Red => 2,
    }
}

/// RED / WRED queue. See the module documentation.
pub struct Red {
    conf: RedConf,
    /// max_p of each profile in 1/2³².
    max_p_q32: [u64; 3],
    q: VecDeque<Packet>,
    bytes: usize,
    /// Average queue in 1/2^16 bytes.
    avg: u64,
    /// Packets since the last drop per colour; −1 = below min_th.
    count: [i64; 3],
    /// When the queue last went empty.
    idle_since: Option<Instant>,
    rng: SplitMix64,
    early: [u64; 3],
    forced: [u64; 3],
    stats: QueueStats,
}

impl Red {
    pub fn new(conf: RedConf) -> Result<Self, ConfigError> {
        if conf.limit_pkts == 0 || conf.limit_bytes == 0 {
            return Err(ConfigError::zero("red", "packet and byte limits"));
        }
        if conf.wq_log > 31 {
            return Err(ConfigError::range(
                "red",
                "wq_log",
                conf.wq_log,
                "at most 31 (w_q = 2^-wq_log)",
            ));
        }
        if conf.link_bps == 0 || conf.avpkt == 0 {
            return Err(ConfigError::zero("red", "link rate and avpkt"));
        }
        let mut max_p_q32 = [0; 3];
        for (i, p) in conf.profiles.iter().enumerate() {
            let name = ["green", "yellow", "red"][i];
            if p.min_th >= p.max_th {
                return Err(ConfigError::conflict(
                    "red",
                    format!(
                        "{name} profile needs min_th < max_th ({} >= {})",
                        p.min_th, p.max_th
                    ),
                ));
            }
            if !(p.max_p > 0.0 && p.max_p <= 1.0) {
                return Err(ConfigError::range(
                    "red",
                    format!("{name} profile max_p"),
                    p.max_p,
                    "in (0, 1]",
                ));
            }
            max_p_q32[i] = (p.max_p * ONE_Q32 as f64).round() as u64;
        }
        Ok(Red {
            rng: SplitMix64::new(conf.seed),
            conf,
            max_p_q32,
            q: VecDeque::new(),
            bytes: 0,
            avg: 0,
            count: [-1; 3],
            idle_since: None,
            early: [0; 3],
            forced: [0; 3],
            stats: QueueStats::default(),
        })
    }

    /// Average queue size in whole bytes.
    pub fn avg_bytes(&self) -> u64 {
        self.avg >> AVG_SHIFT
    }
    /// Early (probabilistic) drops of colour `c`.
    pub fn early_drops(&self, c: Color) -> u64 {
        self.early[colour_index(c)]
    }
    /// Forced drops (avg ≥ max_th) of colour `c`.
    pub fn forced_drops(&self, c: Color) -> u64 {
        self.forced[colour_index(c)]
    }

    /// The average-queue update done on every arrival (Fig. 2).
    fn update_avg(&mut self, now: Instant) {
        if self.q.is_empty() {
            if let Some(t0) = self.idle_since {
                // Idle: as if m packets had been sent at q = 0.
                let idle = now.saturating_since(t0).as_nanos() as u128;
                let m = idle * self.conf.link_bps as u128 / (8_000_000_000 * self.conf.avpkt as u128);
                let keep = ONE_Q32 - (ONE_Q32 >> self.conf.wq_log);
                self.avg = ((self.avg as u128 * pow_q32(keep, m)) >> 32) as u64;
            }
        } else {
            let q = (self.bytes as i128) << AVG_SHIFT;
            let avg = self.avg as i128;
            self.avg = (avg + ((q - avg) >> self.conf.wq_log)) as u64;
        }
    }

    /// Early-drop test for colour `c` with avg between the thresholds.
    /// `count` is the number of packets accepted since the last drop (§7),
    /// so the gap between drops is uniform on 1..=1/p_b. (Fig. 2 read
    /// literally increments count before using it, which would make it
    /// 1..1/p_b − 1 after the first drop.)
    fn early_drop(&mut self, c: usize) -> bool {
        let p = self.conf.profiles[c];
        let (min, max) = ((p.min_th as u128) << AVG_SHIFT, (p.max_th as u128) << AVG_SHIFT);
        let pb = self.max_p_q32[c] as u128 * (self.avg as u128 - min) / (max - min);
        let n = self.count[c].max(0);
        let cp = n as u128 * pb;
        // Drop iff U < p_b / (1 − count·p_b), U uniform in [0, 1); always
        // once count·p_b ≥ 1.
        let drop = cp >= ONE_Q32 || {
            let u = (self.rng.next_u64() >> 32) as u128;
            u * (ONE_Q32 - cp) < pb << 32
        };
        self.count[c] = if drop { 0 } else { n + 1 };
        drop
    }
}

/// x^e for x in 1/2³² fixed point (x ≤ 1), by squaring.
fn pow_q32(mut x: u128, mut e: u128) -> u128 {
    let mut r = ONE_Q32;
    while e > 0 && r > 0 {
        if e & 1 == 1 {
            r = (r * x) >> 32;
        }
        x = (x * x) >> 32;
        e >>= 1;
    }
    r
}

impl Scheduler for Red {
    fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped> {
        self.update_avg(now);
        let c = colour_index(pkt.meta.color);
        let p = self.conf.profiles[c];
        let reason = if self.avg < (p.min_th as u64) << AVG_SHIFT {
            self.count[c] = -1;
            None
        } else if self.avg < (p.max_th as u64) << AVG_SHIFT {
            self.early_drop(c).then(|| {
                self.early[c] += 1;
                DropReason::Aqm
            })
        } else {
            self.count[c] = 0;
            self.forced[c] += 1;
            Some(DropReason::Aqm)
        };
        let reason = reason.or_else(|| {
            (self.q.len() >= self.conf.limit_pkts || self.bytes + pkt.len() > self.conf.limit_bytes)
                .then_some(DropReason::QueueFull)
        });
        if let Some(reason) = reason {
            self.stats.on_drop(reason);
            return Err(Dropped { pkt, reason });
        }
        self.bytes += pkt.len();
        self.stats.on_enqueue(pkt.len());
        self.q.push_back(pkt);
        Ok(())
    }

    fn dequeue(&mut self, now: Instant) -> Option<Packet> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len();
        self.stats.on_dequeue(p.len());
        if self.q.is_empty() {
            self.idle_since = Some(now);
        }
        Some(p)
    }

    fn peek(&self, _now: Instant) -> Option<&Packet> {
        self.q.front()
    }

    fn poll_at(&self, now: Instant) -> Option<Instant> {
        (!self.q.is_empty()).then_some(now)
    }
    fn quiet_when_empty(&self) -> bool {
        true
    }
    fn uses_flow_id(&self) -> bool {
        false
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "red"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Meta;

    fn pkt(uid: u64, len: usize, color: Color) -> Packet {
        Packet::new(
            vec![0; len],
            Meta {
                uid,
                color,
                ..Meta::default()
            },
        )
    }
    fn prof(min_th: u32, max_th: u32, max_p: f64) -> RedProfile {
        RedProfile {
            min_th,
            max_th,
            max_p,
        }
    }
    const GBIT: u64 = 1_000_000_000;

    #[test]
    fn splitmix64_reference_vector() {
        // First outputs for seed 1234567 of Vigna's splitmix64.c.
        let mut r = SplitMix64::new(1_234_567);
        let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(
            got,
            vec![
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423
            ]
        );
    }

    #[test]
    fn refuses_bad_profiles() {
        let e = |c: RedConf| Red::new(c).err().unwrap().to_string();
        assert!(e(RedConf::red(10, 10_000, prof(500, 500, 0.1), GBIT)).contains("min_th < max_th"));
        assert!(e(RedConf::red(10, 10_000, prof(100, 500, 0.0), GBIT)).contains("max_p"));
        assert!(e(RedConf::red(10, 10_000, prof(100, 500, 1.5), GBIT)).contains("max_p"));
        assert!(e(RedConf::red(0, 10_000, prof(100, 500, 0.1), GBIT)).contains("limit"));
        assert!(e(RedConf {
            wq_log: 40,
            ..RedConf::red(1, 1, prof(1, 2, 0.1), GBIT)
        })
        .contains("wq_log"));
    }

    #[test]
    fn average_is_exact_ewma() {
        // w_q = 1/2; 100-byte packets, never dequeued, thresholds far away.
        let mut c = RedConf::red(100, 100_000, prof(50_000, 60_000, 0.1), GBIT);
        c.wq_log = 1;
        let mut r = Red::new(c).unwrap();
        let t = Instant(0);
        let mut want = 0u64; // avg computed on arrival from q before it
        for i in 0..6 {
            r.enqueue(pkt(i, 100, Color::Green), t).unwrap();
            assert_eq!(r.avg_bytes(), want, "after arrival {i}");
            // next arrival sees q = 100·(i+1)
            want = (want * 65_536 + ((100 * (i + 1)) * 65_536 - want * 65_536) / 2) / 65_536;
        }
    }

    #[test]
    fn idle_time_decays_the_average() {
        // w_q = 1/2, avpkt 1000 B at 8 Gbit/s: one packet time = 1 µs.
        let mut c = RedConf::red(100, 1_000_000, prof(500_000, 600_000, 0.1), 8 * GBIT);
        c.wq_log = 1;
        let mut r = Red::new(c).unwrap();
        for i in 0..4 {
            r.enqueue(pkt(i, 1_000, Color::Green), Instant(0)).unwrap();
        }
        // avg: 0, 500, 1250, 2125 bytes.
        assert_eq!(r.avg_bytes(), 2_125);
        while r.dequeue(Instant(10_000)).is_some() {}
        // 3 µs idle = 3 packet times: avg · (1/2)³.
        r.enqueue(pkt(9, 1_000, Color::Green), Instant(13_000)).unwrap();
        assert_eq!(r.avg_bytes(), 265); // 2125 / 8 = 265.6
    }

    /// Holds the instantaneous queue (w_q = 1) at `level` bytes and offers
    /// `n` packets of colour `c`; returns which were dropped.
    fn drops_at(r: &mut Red, level: usize, n: usize, c: Color) -> Vec<bool> {
        let mut out = vec![];
        for i in 0..n {
            while r.bytes() < level {
                r.enqueue(pkt(0, 100, Color::Green), Instant(0)).unwrap();
            }
            out.push(r.enqueue(pkt(i as u64, 100, c), Instant(0)).is_err());
            while r.bytes() > level {
                r.dequeue(Instant(0));
            }
        }
        out
    }

    #[test]
    fn drops_spread_evenly_by_count() {
        // avg half-way between the thresholds: p_b = max_p/2 = 0.05, so the
        // gap between drops is uniform on 1..=20 (Floyd–Jacobson §7),
        // drop rate 2/21 and never more than 20 packets between drops.
        let mut c = RedConf::red(10_000, 10_000_000, prof(10_000, 30_000, 0.1), GBIT);
        c.wq_log = 0;
        c.profiles[0] = prof(500_000, 1_000_000, 0.1); // filler never dropped
        let mut r = Red::new(c).unwrap();
        let d = drops_at(&mut r, 20_000, 20_000, Color::Yellow);
        let n = d.iter().filter(|&&x| x).count() as f64;
        let rate = n / d.len() as f64;
        assert!((rate - 2.0 / 21.0).abs() < 0.005, "drop rate {rate}");
        let mut gap = 0;
        for &x in &d {
            gap += 1;
            if x {
                assert!(gap <= 20, "gap {gap}");
                gap = 0;
            }
        }
        assert_eq!(r.early_drops(Color::Yellow), n as u64);
        assert_eq!(r.stats().drops(DropReason::Aqm), n as u64);
    }

    #[test]
    fn wred_drops_by_precedence() {
        // RFC 2597: at the same average, red is dropped before yellow
        // before green.
        let mut c = RedConf::wred(
            10_000,
            10_000_000,
            [
                prof(30_000, 60_000, 0.1),
                prof(15_000, 30_000, 0.2),
                prof(5_000, 15_000, 0.5),
            ],
            GBIT,
        );
        c.wq_log = 0;
        let mut r = Red::new(c).unwrap();
        let count = |v: Vec<bool>| v.iter().filter(|&&x| x).count();
        assert_eq!(count(drops_at(&mut r, 20_000, 1_000, Color::Green)), 0);
        let y = count(drops_at(&mut r, 20_000, 1_000, Color::Yellow));
        assert!(y > 50 && y < 400, "yellow drops {y}");
        assert_eq!(count(drops_at(&mut r, 20_000, 1_000, Color::Red)), 1_000);
        assert_eq!(r.forced_drops(Color::Red), 1_000);
    }

    #[test]
    fn tail_limit_and_replay() {
        let c = RedConf::red(3, 1_000_000, prof(1_000_000, 2_000_000, 0.1), GBIT);
        let mut r = Red::new(c).unwrap();
        for i in 0..3 {
            r.enqueue(pkt(i, 100, Color::Green), Instant(0)).unwrap();
        }
        let e = r.enqueue(pkt(3, 100, Color::Green), Instant(0)).unwrap_err();
        assert_eq!(e.reason, DropReason::QueueFull);
        // Same seed, same drops; another seed, other drops.
        let run = |seed| {
            let mut c = RedConf::red(10_000, 10_000_000, prof(10_000, 30_000, 0.1), GBIT);
            c.wq_log = 0;
            c.seed = seed;
            c.profiles[0] = prof(500_000, 1_000_000, 0.1);
            drops_at(&mut Red::new(c).unwrap(), 20_000, 2_000, Color::Yellow)
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
