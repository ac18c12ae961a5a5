//! Two Rate Three Color Marker, RFC 2698 §3 (Heinanen & Guérin 1999).
//!
//! Two independent buckets: P (peak, rate PIR, depth PBS) and C
//! (committed, rate CIR, depth CBS), both initially full and each refilled
//! only up to its own depth. A packet of B bytes is red if P holds fewer
//! than B tokens; else yellow if C does, taking B from P; else green,
//! taking B from both. Colour-aware mode never promotes: a red packet stays
//! red, a yellow one at best yellow.

use super::{earned, Bucket, Meter, UNITS_PER_BYTE};
use crate::config::ConfigError;
use crate::packet::Color;
use crate::time::Instant;

#[derive(Clone, Debug)]
pub struct TrTcm {
    pir_bps: u64,
    cir_bps: u64,
    p: Bucket,
    c: Bucket,
    last: Instant,
}

impl TrTcm {
    /// Rates in bit/s (RFC 2698 states them in bytes of IP packets per
    /// second: multiply by 8), bursts in bytes. RFC 2698 §2: PIR ≥ CIR and
    /// PBS, CBS > 0.
    pub fn new(pir_bps: u64, pbs: u64, cir_bps: u64, cbs: u64) -> Result<Self, ConfigError> {
        if pir_bps < cir_bps {
            return Err(ConfigError::conflict(
                "trTCM",
                format!("PIR ({pir_bps} bit/s) must be >= CIR ({cir_bps} bit/s) (RFC 2698 §2)"),
            ));
        }
        if pbs == 0 || cbs == 0 {
            return Err(ConfigError::zero(
                "trTCM",
                "PBS and CBS, both (bytes, RFC 2698 §2)",
            ));
        }
        Ok(TrTcm {
            pir_bps,
            cir_bps,
            p: Bucket::full(pbs),
            c: Bucket::full(cbs),
            last: Instant::ZERO,
        })
    }

    fn refill(&mut self, now: Instant) {
        if now > self.last {
            self.p.fill(earned(self.pir_bps, self.last, now));
            self.c.fill(earned(self.cir_bps, self.last, now));
            self.last = now;
        }
    }

    /// Whole bytes in the peak bucket at `now` (Tp(t)).
    pub fn tp(&self, now: Instant) -> u64 {
        let mut p = self.p.clone();
        p.fill(earned(self.pir_bps, self.last, now));
        p.bytes()
    }
    /// Whole bytes in the committed bucket at `now` (Tc(t)).
    pub fn tc(&self, now: Instant) -> u64 {
        let mut c = self.c.clone();
        c.fill(earned(self.cir_bps, self.last, now));
        c.bytes()
    }
    pub fn pbs(&self) -> u64 {
        (self.p.cap / UNITS_PER_BYTE) as u64
    }
    pub fn cbs(&self) -> u64 {
        (self.c.cap / UNITS_PER_BYTE) as u64
    }
}

impl Meter for TrTcm {
    fn meter(&mut self, now: Instant, bytes: u32, pre: Option<Color>) -> Color {
        self.refill(now);
        // Colour-blind is colour-aware with every packet pre-coloured green.
        let pre = pre.unwrap_or(Color::Green);
        if pre == Color::Red || !self.p.has(bytes) {
            Color::Red
        } else if pre == Color::Yellow || !self.c.has(bytes) {
            self.p.take(bytes);
            Color::Yellow
        } else {
            self.p.take(bytes);
            self.c.take(bytes);
            Color::Green
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    // PIR 2000 B/s (2 tokens/ms), PBS 2000; CIR 1000 B/s (1 token/ms), CBS 1000.
    fn m() -> TrTcm {
        TrTcm::new(16_000, 2_000, 8_000, 1_000).unwrap()
    }

    #[test]
    fn refuses_bad_profiles() {
        assert!(
            matches!(TrTcm::new(8_000, 1, 16_000, 1).unwrap_err().fault, crate::Fault::Conflict(s) if s.contains("PIR"))
        );
        assert!(TrTcm::new(8_000, 0, 8_000, 1)
            .unwrap_err()
            .to_string()
            .contains("PBS"));
        assert!(TrTcm::new(8_000, 1, 8_000, 0)
            .unwrap_err()
            .to_string()
            .contains("CBS"));
    }

    #[test]
    fn colour_blind_sequence_exact_tokens() {
        let mut s = m();
        let t0 = Instant(0);
        assert_eq!((s.tp(t0), s.tc(t0)), (2_000, 1_000));
        assert_eq!(s.meter(t0, 800, None), Color::Green);
        assert_eq!((s.tp(t0), s.tc(t0)), (1_200, 200));
        // Exceeds CIR, not PIR: yellow, only P is decremented.
        assert_eq!(s.meter(t0, 800, None), Color::Yellow);
        assert_eq!((s.tp(t0), s.tc(t0)), (400, 200));
        // Exceeds PIR: red, nothing decremented.
        assert_eq!(s.meter(t0, 800, None), Color::Red);
        assert_eq!((s.tp(t0), s.tc(t0)), (400, 200));
        assert_eq!(s.meter(t0, 300, None), Color::Yellow);
        assert_eq!(s.meter(t0, 100, None), Color::Green);
        assert_eq!((s.tp(t0), s.tc(t0)), (0, 100));
        // Each bucket refills at its own rate, capped at its own depth.
        let t = Instant(100 * MS);
        assert_eq!((s.tp(t), s.tc(t)), (200, 200));
        let t = Instant(950 * MS);
        assert_eq!((s.tp(t), s.tc(t)), (1_900, 1_000));
    }

    #[test]
    fn colour_aware_never_promotes() {
        let mut s = m();
        let t0 = Instant(0);
        assert_eq!(s.meter(t0, 500, Some(Color::Yellow)), Color::Yellow);
        assert_eq!((s.tp(t0), s.tc(t0)), (1_500, 1_000));
        assert_eq!(s.meter(t0, 500, Some(Color::Red)), Color::Red);
        assert_eq!((s.tp(t0), s.tc(t0)), (1_500, 1_000));
        assert_eq!(s.meter(t0, 1_000, Some(Color::Green)), Color::Green);
        assert_eq!(s.meter(t0, 400, Some(Color::Green)), Color::Yellow);
        // Pre-green above PIR is red.
        assert_eq!(s.meter(t0, 200, Some(Color::Green)), Color::Red);
        assert_eq!((s.tp(t0), s.tc(t0)), (100, 0));
    }

    #[test]
    fn aware_with_green_equals_blind() {
        let (mut a, mut b) = (m(), m());
        let mut x: u64 = 99;
        for i in 0..2_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = Instant(i * 311_000);
            let len = 64 + (x % 1_437) as u32;
            assert_eq!(a.meter(t, len, None), b.meter(t, len, Some(Color::Green)));
        }
    }
}
