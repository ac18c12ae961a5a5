//! Traffic meters for DiffServ traffic conditioning (RFC 2475 §2.3.3.1):
//! a single-rate token bucket, the single rate three colour marker
//! (srTCM, RFC 2697) and the two rate three colour marker (trTCM, RFC 2698).
//!
//! Meters are sans-IO: the caller hands in `now` with every packet and the
//! buckets are refilled lazily for the time elapsed since the last call.
//! Tokens are kept exactly as integers in *nano-bits* (1 byte = 8·10⁹
//! units), so a rate in bit/s adds exactly `rate × Δt_ns` units and no
//! rounding ever accumulates; RFC 2697/2698 count tokens in whole bytes,
//! which is the floor of this value.

mod srtcm;
mod token_bucket;
mod trtcm;

pub use srtcm::SrTcm;
pub use token_bucket::TokenBucket;
pub use trtcm::TrTcm;

use crate::packet::Color;
use crate::time::Instant;

/// Token units per byte: tokens are nano-bits so that `rate_bps × Δt_ns`
/// is exact.
pub const UNITS_PER_BYTE: u128 = 8_000_000_000;

/// A meter: measures a packet of `bytes` arriving at `now` against the
/// profile and returns its colour.
///
/// `pre = None` meters colour-blind; `Some(c)` meters colour-aware with the
/// packet's pre-colour `c` (RFC 2697/2698 §3: a colour-aware meter never
/// improves a packet's colour).
pub trait Meter {
    fn meter(&mut self, now: Instant, bytes: u32, pre: Option<Color>) -> Color;
}

/// One token bucket of capacity `cap` units, refilled lazily. Shared by the
/// meters; not public because callers reason in bytes, not units.
#[derive(Clone, Debug)]
pub(crate) struct Bucket {
    /// Current tokens, in units (nano-bits); `0 ..= cap`.
    pub tokens: u128,
    pub cap: u128,
}

impl Bucket {
    /// A bucket of `burst_bytes`, initially full (RFC 2697/2698 §3:
    /// "the token buckets ... are initially full").
    pub fn full(burst_bytes: u64) -> Self {
        let cap = burst_bytes as u128 * UNITS_PER_BYTE;
        Bucket { tokens: cap, cap }
    }
    /// Adds `units`, returning the part that did not fit (overflow).
    pub fn fill(&mut self, units: u128) -> u128 {
        let room = self.cap - self.tokens;
        if units <= room {
            self.tokens += units;
            0
        } else {
            self.tokens = self.cap;
            units - room
        }
    }
    /// Takes `bytes` worth of tokens if the bucket holds at least that many
    /// (the RFCs' `T(t) - B >= 0` test).
    pub fn take(&mut self, bytes: u32) -> bool {
        let need = bytes as u128 * UNITS_PER_BYTE;
        if self.tokens >= need {
            self.tokens -= need;
            true
        } else {
            false
        }
    }
    pub fn has(&self, bytes: u32) -> bool {
        self.tokens >= bytes as u128 * UNITS_PER_BYTE
    }
    /// Whole bytes of tokens (RFC token count).
    pub fn bytes(&self) -> u64 {
        (self.tokens / UNITS_PER_BYTE) as u64
    }
}

/// Units earned at `rate_bps` between `last` and `now`; time that runs
/// backwards earns nothing. `u64 × u64` always fits in `u128`.
pub(crate) fn earned(rate_bps: u64, last: Instant, now: Instant) -> u128 {
    now.saturating_since(last).as_nanos() as u128 * rate_bps as u128
}
