//! Single Rate Three Color Marker, RFC 2697 §3 (Heinanen & Guérin 1999).
//!
//! Two buckets share one rate: C (committed, depth CBS) and E (excess,
//! depth EBS), both initially full. Tokens arrive at CIR and go to C while
//! it is below CBS, otherwise to E while it is below EBS, otherwise are
//! lost (§3.1). A packet of B bytes is green if C holds B tokens, else
//! yellow if E does, else red; only the bucket that passes it is
//! decremented (§3.2). Colour-aware mode (§3.2) never promotes a packet:
//! only a green packet may take C tokens, only green or yellow may take E.

use super::{earned, Bucket, Meter, UNITS_PER_BYTE};
use crate::config::ConfigError;
use crate::packet::Color;
use crate::time::Instant;

#[derive(Clone, Debug)]
pub struct SrTcm {
    cir_bps: u64,
    c: Bucket,
    e: Bucket,
    last: Instant,
}

impl SrTcm {
    /// `cir_bps` in bit/s (RFC 2697 states CIR in bytes of IP packets per
    /// second: multiply by 8); `cbs`, `ebs` in bytes, at least one > 0
    /// (§2). Both buckets start full.
    pub fn new(cir_bps: u64, cbs: u64, ebs: u64) -> Result<Self, ConfigError> {
        if cbs == 0 && ebs == 0 {
            return Err(ConfigError::zero(
                "srTCM",
                "at least one of CBS and EBS (RFC 2697 §2)",
            ));
        }
        Ok(SrTcm {
            cir_bps,
            c: Bucket::full(cbs),
            e: Bucket::full(ebs),
            last: Instant::ZERO,
        })
    }

    /// Tokens in (C, E) after refilling to `now`: C first, overflow to E
    /// (the §3.1 update rule, applied to all tokens earned since `last`).
    fn at(&self, now: Instant) -> (Bucket, Bucket) {
        let (mut c, mut e) = (self.c.clone(), self.e.clone());
        let spill = c.fill(earned(self.cir_bps, self.last, now));
        e.fill(spill);
        (c, e)
    }

    fn refill(&mut self, now: Instant) {
        if now > self.last {
            let spill = self.c.fill(earned(self.cir_bps, self.last, now));
            self.e.fill(spill);
            self.last = now;
        }
    }

    /// Whole bytes in the committed bucket at `now` (Tc(t)).
    pub fn tc(&self, now: Instant) -> u64 {
        self.at(now).0.bytes()
    }
    /// Whole bytes in the excess bucket at `now` (Te(t)).
    pub fn te(&self, now: Instant) -> u64 {
        self.at(now).1.bytes()
    }
    pub fn cbs(&self) -> u64 {
        (self.c.cap / UNITS_PER_BYTE) as u64
    }
    pub fn ebs(&self) -> u64 {
        (self.e.cap / UNITS_PER_BYTE) as u64
    }
}

impl Meter for SrTcm {
    fn meter(&mut self, now: Instant, bytes: u32, pre: Option<Color>) -> Color {
        self.refill(now);
        // Colour-blind is colour-aware with every packet pre-coloured green.
        let pre = pre.unwrap_or(Color::Green);
        if pre == Color::Green && self.c.take(bytes) {
            Color::Green
        } else if pre != Color::Red && self.e.take(bytes) {
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    // CIR 1000 bytes/s = 8000 bit/s: one token per ms, as in the RFC's
    // "incremented by one CIR times per second".
    fn m(cbs: u64, ebs: u64) -> SrTcm {
        SrTcm::new(8_000, cbs, ebs).unwrap()
    }

    #[test]
    fn refuses_both_bursts_zero() {
        assert!(SrTcm::new(8_000, 0, 0)
            .unwrap_err()
            .to_string()
            .contains("RFC 2697"));
        assert!(SrTcm::new(8_000, 0, 10).is_ok());
    }

    #[test]
    fn buckets_initially_full() {
        let s = m(1_000, 2_000);
        assert_eq!((s.tc(Instant(0)), s.te(Instant(0))), (1_000, 2_000));
    }

    #[test]
    fn colour_blind_sequence_exact_tokens() {
        let mut s = m(1_000, 2_000);
        let t0 = Instant(0);
        assert_eq!(s.meter(t0, 800, None), Color::Green);
        assert_eq!((s.tc(t0), s.te(t0)), (200, 2_000));
        assert_eq!(s.meter(t0, 800, None), Color::Yellow);
        assert_eq!(s.meter(t0, 800, None), Color::Yellow);
        assert_eq!((s.tc(t0), s.te(t0)), (200, 400));
        // Red: neither bucket is decremented.
        assert_eq!(s.meter(t0, 800, None), Color::Red);
        assert_eq!((s.tc(t0), s.te(t0)), (200, 400));
        // 600 ms = 600 tokens, all into C (below CBS).
        let t = Instant(600 * MS);
        assert_eq!((s.tc(t), s.te(t)), (800, 400));
        assert_eq!(s.meter(t, 800, None), Color::Green);
        assert_eq!((s.tc(t), s.te(t)), (0, 400));
    }

    #[test]
    fn tokens_go_to_e_only_when_c_is_full() {
        let mut s = m(1_000, 2_000);
        let t0 = Instant(0);
        assert_eq!(s.meter(t0, 1_000, None), Color::Green);
        assert_eq!(s.meter(t0, 2_000, None), Color::Yellow);
        assert_eq!((s.tc(t0), s.te(t0)), (0, 0));
        // 1500 tokens: the first 1000 fill C, the next 500 go to E.
        let t = Instant(1_500 * MS);
        assert_eq!((s.tc(t), s.te(t)), (1_000, 500));
        assert_eq!(s.meter(t, 1_200, None), Color::Red);
        assert_eq!(s.meter(t, 500, None), Color::Green);
        assert_eq!((s.tc(t), s.te(t)), (500, 500));
        // Both full: further tokens are lost.
        let t = Instant(100_000 * MS);
        assert_eq!((s.tc(t), s.te(t)), (1_000, 2_000));
    }

    #[test]
    fn whole_tokens_only() {
        let mut s = m(1_000, 0);
        assert_eq!(s.meter(Instant(0), 1_000, None), Color::Green);
        // 999.999 ms: 999 whole tokens, a 1000-byte packet is red.
        let t = Instant(1_000 * MS - 1);
        assert_eq!(s.tc(t), 999);
        assert_eq!(s.meter(t, 1_000, None), Color::Red);
        assert_eq!(s.meter(Instant(1_000 * MS), 1_000, None), Color::Green);
    }

    #[test]
    fn colour_aware_never_promotes() {
        let mut s = m(1_000, 2_000);
        let t0 = Instant(0);
        // Yellow with a full C bucket stays yellow and takes E tokens only.
        assert_eq!(s.meter(t0, 100, Some(Color::Yellow)), Color::Yellow);
        assert_eq!((s.tc(t0), s.te(t0)), (1_000, 1_900));
        // Red stays red and takes nothing.
        assert_eq!(s.meter(t0, 100, Some(Color::Red)), Color::Red);
        assert_eq!((s.tc(t0), s.te(t0)), (1_000, 1_900));
        // Green within CBS is green; beyond CBS falls to yellow via E.
        assert_eq!(s.meter(t0, 1_000, Some(Color::Green)), Color::Green);
        assert_eq!(s.meter(t0, 1_000, Some(Color::Green)), Color::Yellow);
        assert_eq!((s.tc(t0), s.te(t0)), (0, 900));
        // Yellow beyond EBS is red.
        assert_eq!(s.meter(t0, 901, Some(Color::Yellow)), Color::Red);
    }

    #[test]
    fn aware_with_green_equals_blind() {
        let mut a = m(1_500, 3_000);
        let mut b = m(1_500, 3_000);
        let mut x: u64 = 7;
        for i in 0..2_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = Instant(i * 137_000);
            let len = 64 + (x % 1_437) as u32;
            assert_eq!(a.meter(t, len, None), b.meter(t, len, Some(Color::Green)));
        }
    }
}
