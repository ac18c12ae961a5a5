//! Virtual and real time as integer nanoseconds.
//!
//! The core never reads a clock: drivers (the simulator, the live runtime)
//! hand it an [`Instant`]. Integer nanoseconds keep arithmetic exact, so
//! TF boundaries, token-bucket refills and virtual times replay bit for bit.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// A point in time, in nanoseconds since the driver's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    pub const MAX: Instant = Instant(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Time since `earlier`, zero if `earlier` is later (never underflows).
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const MAX: Duration = Duration(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    pub const fn from_micros(us: u64) -> Self {
        Duration(us * 1_000)
    }
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Self {
        Duration(s * 1_000_000_000)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    pub fn from_secs_f64(s: f64) -> Self {
        Duration((s * 1e9).round().max(0.0) as u64)
    }
    /// Time to serialise `bytes` at `bits_per_sec`, rounded up so a
    /// transmitter never claims a frame finished before its last bit.
    #[inline]
    pub fn for_bytes(bytes: u64, bits_per_sec: u64) -> Self {
        if bits_per_sec == 0 {
            return Duration::MAX;
        }
        // 64-bit division when the product fits (frames up to 2 GB): the
        // 128-bit one is a library call, on every transmitted frame.
        if let Some(bits) = bytes.checked_mul(8 * 1_000_000_000) {
            return Duration(bits.div_ceil(bits_per_sec));
        }
        let bits = bytes as u128 * 8 * 1_000_000_000;
        Duration(bits.div_ceil(bits_per_sec as u128).min(u64::MAX as u128) as u64)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d.0))
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, o: Instant) -> Duration {
        self.saturating_since(o)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, o: Duration) -> Duration {
        Duration(self.0.saturating_add(o.0))
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, o: Duration) {
        *self = *self + o;
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, o: Duration) -> Duration {
        Duration(self.0.saturating_sub(o.0))
    }
}
impl SubAssign for Duration {
    fn sub_assign(&mut self, o: Duration) {
        *self = *self - o;
    }
}

impl fmt::Display for Duration {
    /// Human form with the largest unit that keeps the value ≥ 1.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns >= 1_000_000_000 {
            write!(f, "{}s", ns as f64 / 1e9)
        } else if ns >= 1_000_000 {
            write!(f, "{}ms", ns as f64 / 1e6)
        } else if ns >= 1_000 {
            write!(f, "{}us", ns as f64 / 1e3)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_time_rounds_up() {
        // 1040 wire bytes at 100 Mb/s = 83.2 µs exactly.
        assert_eq!(Duration::for_bytes(1040, 100_000_000), Duration(83_200));
        // 1 byte at 3 b/s = 8/3 s, rounded up to the next ns.
        assert_eq!(Duration::for_bytes(1, 3).0, 2_666_666_667);
        assert_eq!(Duration::for_bytes(1, 0), Duration::MAX);
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant(5) - Instant(9), Duration(0));
        assert_eq!(Instant(u64::MAX) + Duration(1), Instant::MAX);
        assert_eq!(Duration(3) - Duration(5), Duration(0));
    }

    #[test]
    fn display_picks_unit() {
        assert_eq!(Duration::from_micros(250).to_string(), "250us");
        assert_eq!(Duration::from_millis(3).to_string(), "3ms");
        assert_eq!(Duration(12).to_string(), "12ns");
    }
}
