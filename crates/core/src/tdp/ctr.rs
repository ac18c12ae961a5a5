//! The common time reference (CTR) of Time-Driven Priority (ICC 2006 §II-A,
//! §III-A) and the 2-bit compressed TF/TC stamp carried in the DS byte
//! (§III-B).
//!
//! Time is cut into time frames (TF) of `T_f`; TFs are grouped into time
//! cycles (TC), TCs into super cycles (SC). TF numbers here are *absolute*:
//! `tf = now / T_f` counted from the driver's epoch, so every router that
//! shares the epoch (the simulator's zero, or the start of a UTC second in
//! live mode) agrees on them without exchanging anything.
//!
//! A router sees each TF begin when it serves the CTR's interrupt, not at
//! the instant the GPS card raised it: the testbed's kernel kept the TF
//! and TC numbers in two variables the interrupt handler updated (§III-A),
//! and then served its interfaces one after another, so each link's
//! transmission began later by a varying amount (§III-D: interrupt
//! servicing and bus acquisition). [`Ctr::with_lag`] models that: TF `n`
//! begins at `n·T_f + lag(n)`, the lag drawn per TF from a distribution
//! by a hash of the TF number, so a simulation replays bit for bit and
//! every user of one router's CTR sees the same TF boundaries.

use crate::config::ConfigError;
use crate::node::cpu::{Draw, ProcDist};
use crate::time::{Duration, Instant};

/// DS bits set in every TDP packet (paper §III-B): marks the packet as TDP.
pub const TDP_MARK: u8 = 0x0c;
/// DS bit set in packets transmitted during odd TFs.
pub const TDP_TF_BIT: u8 = 0x10;
/// DS bit that toggles every TC (set in odd TCs).
pub const TDP_TC_BIT: u8 = 0x20;
/// Mask selecting the TDP mark from a DS byte (ignores the two stamp bits).
const TDP_MARK_MASK: u8 = 0xcf;

/// The common time reference: TF length, TFs per TC, TCs per super cycle.
///
/// Paper numbers: Fig. 1 uses `T_f` = 250 µs, 100 TFs/TC, 40 TCs/SC; the
/// testbed (§IV-A) uses 250 µs and 60 TFs/TC.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ctr {
    tf: Duration,
    tfs_per_tc: u32,
    tcs_per_sc: u32,
    lag: Option<TfLag>,
}

/// How late a router begins each TF (module docs): `extra` plus a draw of
/// `dist`, at most one TF less a nanosecond, so TFs stay in order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TfLag {
    /// Which router: routers draw their lags independently.
    pub seed: u64,
    /// The interrupt-service latency of one TF.
    pub dist: ProcDist,
    /// A fixed part: this interface's place in the sequential service of
    /// the router's interfaces.
    pub extra: Duration,
}

/// A few draws from one TF's hash (SplitMix64, Steele et al. 2014).
struct TfDraw(u64);

impl TfDraw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Draw for TfDraw {
    fn uniform_u64(&mut self, lo: u64, hi: u64) -> u64 {
        match (hi - lo).checked_add(1) {
            Some(n) => lo + self.next() % n,
            None => self.next(),
        }
    }
    fn unit_f64(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

impl Ctr {
    /// A CTR with TFs of `tf`, `tfs_per_tc` TFs per TC and `tcs_per_sc` TCs
    /// per super cycle. All three must be non-zero.
    pub fn new(tf: Duration, tfs_per_tc: u32, tcs_per_sc: u32) -> Result<Ctr, ConfigError> {
        if tf.as_nanos() == 0 {
            return Err(ConfigError::zero("CTR", "the time frame length (ns)"));
        }
        if tfs_per_tc == 0 {
            return Err(ConfigError::zero("CTR", "the time frames per time cycle"));
        }
        if tcs_per_sc == 0 {
            return Err(ConfigError::zero("CTR", "the time cycles per super cycle"));
        }
        Ok(Ctr {
            tf,
            tfs_per_tc,
            tcs_per_sc,
            lag: None,
        })
    }

    /// This CTR as a router serving its interrupt late by `lag` sees it
    /// (module docs); `None`: TFs begin exactly on the reference.
    pub fn with_lag(mut self, lag: Option<TfLag>) -> Ctr {
        self.lag = lag;
        self
    }

    /// The lag this CTR was given, if any.
    pub fn lag(&self) -> Option<&TfLag> {
        self.lag.as_ref()
    }

    /// How late TF `tf` begins on this CTR.
    pub fn lag_of(&self, tf: u64) -> Duration {
        let Some(l) = self.lag else {
            return Duration::ZERO;
        };
        let mut d = TfDraw(l.seed ^ tf.wrapping_mul(0xd1b5_4a32_d192_ed03));
        let x = l.extra.0.saturating_add(l.dist.sample(&mut d).0);
        Duration(x.min(self.tf.0 - 1))
    }

    /// Length of one TF (`T_f`).
    pub fn tf_len(&self) -> Duration {
        self.tf
    }
    /// TFs per TC (`n_TF`).
    pub fn tfs_per_tc(&self) -> u32 {
        self.tfs_per_tc
    }
    /// TCs per super cycle.
    pub fn tcs_per_sc(&self) -> u32 {
        self.tcs_per_sc
    }
    /// Length of one TC.
    pub fn tc_len(&self) -> Duration {
        Duration(self.tf.0.saturating_mul(self.tfs_per_tc as u64))
    }

    /// Absolute TF number containing `now`.
    pub fn tf_at(&self, now: Instant) -> u64 {
        let t = now.0 / self.tf.0;
        if t > 0 && now < self.tf_start(t) {
            t - 1
        } else {
            t
        }
    }
    /// When absolute TF `tf` begins (saturates at [`Instant::MAX`]).
    pub fn tf_start(&self, tf: u64) -> Instant {
        let at = tf.saturating_mul(self.tf.0);
        Instant(at.saturating_add(self.lag_of(tf).0))
    }
    /// When absolute TF `tf` ends, i.e. the start of `tf + 1`.
    pub fn tf_end(&self, tf: u64) -> Instant {
        self.tf_start(tf.saturating_add(1))
    }
    /// Position of `tf` inside its TC, `0..tfs_per_tc`.
    pub fn tf_in_tc(&self, tf: u64) -> u32 {
        (tf % self.tfs_per_tc as u64) as u32
    }
    /// Absolute TC number containing `tf`.
    pub fn tc_of(&self, tf: u64) -> u64 {
        tf / self.tfs_per_tc as u64
    }
    /// First absolute TF of absolute TC `tc`.
    pub fn tc_start_tf(&self, tc: u64) -> u64 {
        tc.saturating_mul(self.tfs_per_tc as u64)
    }
    /// Position of the TC containing `tf` inside its super cycle.
    pub fn tc_in_sc(&self, tf: u64) -> u32 {
        (self.tc_of(tf) % self.tcs_per_sc as u64) as u32
    }
    /// Absolute super-cycle number containing `tf`.
    pub fn sc_of(&self, tf: u64) -> u64 {
        self.tc_of(tf) / self.tcs_per_sc as u64
    }

    /// The whole DS byte stamped on a TDP packet transmitted in TF `tf`:
    /// 0x0c, 0x1c, 0x2c or 0x3c (paper §III-B).
    ///
    /// The TF bit is the parity of the *absolute* TF number, not of the TF
    /// position inside the TC: with an odd `tfs_per_tc` the position wraps
    /// from even to even and the bit would not flip at the TC boundary,
    /// breaking the alternating-bit protocol. The absolute parity flips at
    /// every TF boundary whatever the TC length.
    pub fn stamp(&self, tf: u64) -> u8 {
        TDP_MARK | (((tf & 1) as u8) << 4) | (((self.tc_of(tf) & 1) as u8) << 5)
    }
}

/// Whether a DS byte carries a TDP stamp (0x0c, 0x1c, 0x2c or 0x3c; the
/// ECN bits must be clear, as TDP uses the whole byte).
pub fn is_tdp_tos(tos: u8) -> bool {
    tos & TDP_MARK_MASK == TDP_MARK
}

/// The (TF parity, TC parity) bits of a TDP DS byte.
pub fn stamp_bits(tos: u8) -> (u64, u64) {
    (((tos & TDP_TF_BIT) >> 4) as u64, ((tos & TDP_TC_BIT) >> 5) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Fault;

    fn testbed() -> Ctr {
        Ctr::new(Duration::from_micros(250), 60, 40).unwrap()
    }

    #[test]
    fn rejects_zero_values() {
        let zero = |e: ConfigError| match e.fault {
            Fault::Zero(p) => p,
            f => panic!("{f:?}"),
        };
        assert!(zero(Ctr::new(Duration(0), 60, 40).unwrap_err()).contains("time frame length"));
        assert!(zero(Ctr::new(Duration(1), 0, 40).unwrap_err()).contains("per time cycle"));
        assert!(zero(Ctr::new(Duration(1), 60, 0).unwrap_err()).contains("per super cycle"));
    }

    #[test]
    fn time_maps_to_frames_cycles_and_super_cycles() {
        let c = testbed();
        assert_eq!(c.tf_len(), Duration::from_micros(250));
        assert_eq!(c.tc_len(), Duration::from_millis(15));
        assert_eq!(c.tf_at(Instant(249_999)), 0);
        assert_eq!(c.tf_at(Instant(250_000)), 1);
        assert_eq!(c.tf_start(4000), Instant(1_000_000_000));
        assert_eq!(c.tf_end(3), Instant(1_000_000));
        let tf = 60 * 40 * 3 + 60 * 7 + 17;
        assert_eq!(c.tf_in_tc(tf), 17);
        assert_eq!(c.tc_of(tf), 40 * 3 + 7);
        assert_eq!(c.tc_in_sc(tf), 7);
        assert_eq!(c.sc_of(tf), 3);
        assert_eq!(c.tc_start_tf(2), 120);
        assert_eq!(c.tf_start(u64::MAX), Instant::MAX);
    }

    #[test]
    fn stamps_are_the_four_paper_codepoints() {
        let c = testbed();
        assert_eq!(c.stamp(0), 0x0c);
        assert_eq!(c.stamp(1), 0x1c);
        assert_eq!(c.stamp(60), 0x2c);
        assert_eq!(c.stamp(61), 0x3c);
        assert_eq!(c.stamp(120), 0x0c);
        for tf in 0..500 {
            let s = c.stamp(tf);
            assert!(is_tdp_tos(s));
            assert_eq!(stamp_bits(s), (tf & 1, c.tc_of(tf) & 1));
        }
        for tos in [0x00, 0x0d, 0x0e, 0x08, 0x04, 0xb8, 0x4c, 0x8c] {
            assert!(!is_tdp_tos(tos), "{tos:#x}");
        }
    }

    #[test]
    fn a_lagged_ctr_begins_each_tf_late_by_its_own_draw() {
        let lag = TfLag {
            seed: 7,
            dist: ProcDist::Uniform(Duration::from_micros(10), Duration::from_micros(50)),
            extra: Duration::from_micros(5),
        };
        let c = testbed().with_lag(Some(lag));
        let mut seen = std::collections::BTreeSet::new();
        for tf in 1..2000u64 {
            let l = c.lag_of(tf);
            assert!((15_000..=55_000).contains(&l.0), "{l:?}");
            seen.insert(l.0 / 10_000);
            let start = c.tf_start(tf);
            assert_eq!(start, Instant(tf * 250_000 + l.0));
            // The TF begins at its lagged start, not before; the one
            // before lasts until then.
            assert_eq!(c.tf_at(start), tf);
            assert_eq!(c.tf_at(Instant(start.0 - 1)), tf - 1);
            assert_eq!(c.tf_end(tf - 1), start);
        }
        // Draws spread over the range and replay: the same seed, the same
        // lags; another router's seed, others.
        assert!(seen.len() >= 4, "{seen:?}");
        assert_eq!(c.lag_of(123), testbed().with_lag(Some(lag)).lag_of(123));
        let other = testbed().with_lag(Some(TfLag { seed: 8, ..lag }));
        assert!((0..50).any(|tf| other.lag_of(tf) != c.lag_of(tf)));
        // A lag is capped below one TF, so TFs keep their order.
        let huge = TfLag {
            dist: ProcDist::Fixed(Duration::from_millis(1)),
            ..lag
        };
        assert_eq!(testbed().with_lag(Some(huge)).lag_of(3), Duration(249_999));
        assert_eq!(testbed().lag_of(3), Duration::ZERO);
    }

    #[test]
    fn tf_bit_alternates_with_odd_cycle_length() {
        // 3 TFs per TC: positions go 0,1,2,0 — the absolute parity still
        // flips at the TC boundary.
        let c = Ctr::new(Duration(10), 3, 2).unwrap();
        let bits: Vec<u8> = (0..8).map(|t| c.stamp(t) & TDP_TF_BIT).collect();
        for w in bits.windows(2) {
            assert_ne!(w[0], w[1]);
        }
        let tc: Vec<u8> = (0..8).map(|t| c.stamp(t) & TDP_TC_BIT).collect();
        assert_eq!(tc, vec![0, 0, 0, 0x20, 0x20, 0x20, 0, 0]);
    }
}
