//! Single-rate token bucket (RFC 2475 §2.3.3.1 "token bucket" profile;
//! RFC 2698 §1 calls its one-rate, one-burst case the simplest meter): a
//! packet conforms if the bucket of depth CBS, refilled at CIR, holds at
//! least its size in tokens, which it then takes.
//!
//! Also the building block of policers and shapers: [`TokenBucket::time_to_conform`]
//! says when a packet would conform, for `poll_at`-style wake-ups.

use super::{earned, Bucket, Meter, UNITS_PER_BYTE};
use crate::config::ConfigError;
use crate::packet::Color;
use crate::time::{Duration, Instant};

/// Token bucket with rate `cir_bps` (bit/s) and depth `cbs` (bytes),
/// initially full.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    cir_bps: u64,
    b: Bucket,
    last: Instant,
}

impl TokenBucket {
    /// `cir_bps` in bit/s (0 = a bucket that is never refilled), `cbs` in
    /// bytes, must be positive or nothing would ever conform.
    pub fn new(cir_bps: u64, cbs: u64) -> Result<Self, ConfigError> {
        if cbs == 0 {
            return Err(ConfigError::zero("token bucket", "CBS (burst, bytes)"));
        }
        Ok(TokenBucket {
            cir_bps,
            b: Bucket::full(cbs),
            last: Instant::ZERO,
        })
    }

    pub fn cir_bps(&self) -> u64 {
        self.cir_bps
    }
    pub fn cbs(&self) -> u64 {
        (self.b.cap / UNITS_PER_BYTE) as u64
    }

    fn refill(&mut self, now: Instant) {
        if now > self.last {
            self.b.fill(earned(self.cir_bps, self.last, now));
            self.last = now;
        }
    }

    /// Meters `bytes` at `now`: true (conform) takes the tokens, false
    /// (exceed) leaves the bucket untouched.
    pub fn conform(&mut self, now: Instant, bytes: u32) -> bool {
        self.refill(now);
        self.b.take(bytes)
    }

    /// Tokens in units (nano-bits) at `now`, without changing state.
    fn units_at(&self, now: Instant) -> u128 {
        let add = earned(self.cir_bps, self.last, now);
        self.b.tokens.saturating_add(add).min(self.b.cap)
    }

    /// Whole bytes of tokens the bucket holds at `now`.
    pub fn tokens(&self, now: Instant) -> u64 {
        (self.units_at(now) / UNITS_PER_BYTE) as u64
    }

    /// How long from `now` until a packet of `bytes` would conform: zero if
    /// it does now, `None` if it never can (larger than CBS, or no refill).
    pub fn time_to_conform(&self, now: Instant, bytes: u32) -> Option<Duration> {
        let need = bytes as u128 * UNITS_PER_BYTE;
        if need > self.b.cap {
            return None;
        }
        let have = self.units_at(now);
        if have >= need {
            return Some(Duration::ZERO);
        }
        if self.cir_bps == 0 {
            return None;
        }
        // Round up: the packet conforms only once the last nano-bit is in.
        let ns = (need - have).div_ceil(self.cir_bps as u128);
        Some(Duration(ns.min(u64::MAX as u128) as u64))
    }
}

impl Meter for TokenBucket {
    /// Two colours: green if conforming, red if exceeding. Colour-aware: a
    /// packet already yellow or red keeps its colour and takes no tokens,
    /// so a lower-precedence packet cannot use up the committed bucket.
    fn meter(&mut self, now: Instant, bytes: u32, pre: Option<Color>) -> Color {
        match pre {
            Some(c @ (Color::Yellow | Color::Red)) => {
                self.refill(now);
                c
            }
            _ => {
                if self.conform(now, bytes) {
                    Color::Green
                } else {
                    Color::Red
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn refuses_zero_burst() {
        assert!(TokenBucket::new(1_000, 0)
            .unwrap_err()
            .to_string()
            .contains("CBS"));
    }

    #[test]
    fn initially_full_then_refills_at_rate() {
        // 8 kbit/s = 1000 B/s = 1 byte per ms; CBS 1500.
        let mut tb = TokenBucket::new(8_000, 1_500).unwrap();
        assert_eq!(tb.tokens(Instant(0)), 1_500);
        assert!(tb.conform(Instant(0), 1_000));
        assert_eq!(tb.tokens(Instant(0)), 500);
        assert!(!tb.conform(Instant(0), 501)); // exceed leaves tokens alone
        assert_eq!(tb.tokens(Instant(0)), 500);
        // 0.5 ms later: half a byte more, still 500 whole bytes.
        assert_eq!(tb.tokens(Instant(MS / 2)), 500);
        assert!(!tb.conform(Instant(MS / 2), 501));
        assert!(tb.conform(Instant(MS), 501));
        assert_eq!(tb.tokens(Instant(MS)), 0);
        // Never above CBS, however long the idle time.
        assert_eq!(tb.tokens(Instant(10_000 * MS)), 1_500);
    }

    #[test]
    fn time_to_conform_is_exact_and_rounded_up() {
        let mut tb = TokenBucket::new(8_000, 1_500).unwrap();
        assert!(tb.conform(Instant(0), 1_500));
        assert_eq!(tb.time_to_conform(Instant(0), 100), Some(Duration(100 * MS)));
        // 3 bit/s: one byte takes 8/3 s, rounded up to whole ns.
        let mut slow = TokenBucket::new(3, 1).unwrap();
        assert!(slow.conform(Instant(0), 1));
        let d = slow.time_to_conform(Instant(0), 1).unwrap();
        assert_eq!(d, Duration(2_666_666_667));
        assert!(!slow.conform(Instant(d.0 - 1), 1));
        assert!(slow.conform(Instant(d.0), 1));
        assert_eq!(slow.time_to_conform(Instant(0), 2), None); // > CBS
    }

    #[test]
    fn colour_aware_keeps_yellow_and_red_without_taking_tokens() {
        let mut tb = TokenBucket::new(8_000, 1_000).unwrap();
        let t = Instant(0);
        assert_eq!(tb.meter(t, 500, Some(Color::Yellow)), Color::Yellow);
        assert_eq!(tb.meter(t, 500, Some(Color::Red)), Color::Red);
        assert_eq!(tb.tokens(t), 1_000);
        assert_eq!(tb.meter(t, 600, Some(Color::Green)), Color::Green);
        assert_eq!(tb.meter(t, 600, None), Color::Red);
        assert_eq!(tb.meter(t, 400, None), Color::Green);
    }

    #[test]
    fn time_going_backwards_earns_nothing() {
        let mut tb = TokenBucket::new(8_000, 1_000).unwrap();
        assert!(tb.conform(Instant(5 * MS), 1_000));
        assert!(!tb.conform(Instant(MS), 1));
        assert!(tb.conform(Instant(6 * MS), 1));
    }
}
