//! Delay statistics of one measured flow, sized to what the flow needs.
//!
//! Buckets are HDR-histogram buckets at 3 significant digits (values below
//! 2048 ns exact; above, 1024 sub-buckets per power of two, so a bucket is
//! at most 1/1024 of its value wide), but only the buckets a flow has used
//! are stored, as a sorted list. A flow of constant delay costs one bucket,
//! a jittery one a few hundred; a dense histogram covering 1 ns to 100 s
//! cost 227 KB per flow whatever it held, which made 100 000 simulated
//! flows need 23 GB.
//!
//! Quantiles are read as an HDR histogram reads them (the highest value of
//! the bucket holding the rank), then clamped to the exact minimum and
//! maximum, so a summary always has min ≤ p50 ≤ p99 ≤ p99.9 ≤ max with
//! min, max and mean exact.

/// Sub-buckets per power of two (3 significant digits), as a shift.
const SUB_BITS: u32 = 11;
const HALF: u32 = SUB_BITS - 1;

/// The bucket of `v`: (power-of-two shift, sub-bucket) packed in a u32.
fn key(v: u64) -> u32 {
    let e = (63 - (v | ((1 << SUB_BITS) - 1)).leading_zeros()) - HALF;
    let sub = (v >> e) as u32;
    (e << SUB_BITS) | sub
}

fn lowest(k: u32) -> u64 {
    let (e, sub) = (k >> SUB_BITS, (k & ((1 << SUB_BITS) - 1)) as u64);
    sub << e
}

fn highest(k: u32) -> u64 {
    let e = k >> SUB_BITS;
    lowest(k).saturating_add((1u64 << e) - 1)
}

/// Delays (or any non-negative values) of one flow.
#[derive(Clone, Debug, Default)]
pub struct DelayHist {
    /// Used bucket keys, ascending, and their counts.
    keys: Vec<u32>,
    counts: Vec<u64>,
    /// Index of the bucket recorded last (consecutive delays of a flow are
    /// usually close: most records touch it again).
    last: usize,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

/// Summary of a [`DelayHist`]; all zero when nothing was recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DelaySummary {
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl DelayHist {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn record(&mut self, v: u64) {
        self.record_n(v, 1);
    }

    pub fn record_n(&mut self, v: u64, count: u64) {
        if count == 0 {
            return;
        }
        self.add_bucket(key(v), count);
        self.note(v, v, v as u128 * count as u128, count);
    }

    /// Add everything `other` recorded (min, max and mean stay exact).
    pub fn merge(&mut self, other: &DelayHist) {
        if other.n == 0 {
            return;
        }
        for (k, c) in other.keys.iter().zip(&other.counts) {
            self.add_bucket(*k, *c);
        }
        self.note(other.min, other.max, other.sum, other.n);
    }

    fn add_bucket(&mut self, k: u32, count: u64) {
        let i = if self.keys.get(self.last) == Some(&k) {
            self.last
        } else {
            match self.keys.binary_search(&k) {
                Ok(i) => i,
                Err(i) => {
                    self.keys.insert(i, k);
                    self.counts.insert(i, 0);
                    i
                }
            }
        };
        self.counts[i] += count;
        self.last = i;
    }

    fn note(&mut self, min: u64, max: u64, sum: u128, n: u64) {
        if self.n == 0 {
            (self.min, self.max) = (min, max);
        } else {
            self.min = self.min.min(min);
            self.max = self.max.max(max);
        }
        self.n += n;
        self.sum += sum;
    }

    pub fn len(&self) -> u64 {
        self.n
    }
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    pub fn min(&self) -> u64 {
        self.min
    }
    pub fn max(&self) -> u64 {
        self.max
    }
    /// Exact mean of the recorded values (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }
    /// Values recorded at or below `v`, to the buckets' precision (the
    /// bucket holding `v` counts whole): cumulative histogram buckets.
    pub fn count_at_most(&self, v: u64) -> u64 {
        self.keys
            .iter()
            .zip(&self.counts)
            .take_while(|(k, _)| lowest(**k) <= v)
            .map(|(_, c)| c)
            .sum()
    }
    /// Buckets in use (what the flow costs: 12 bytes each).
    pub fn buckets_used(&self) -> usize {
        self.keys.len()
    }

    /// The value at quantile `q` (0..=1): the highest value of the bucket
    /// holding rank ⌈q·n⌉ (the lowest for q = 0), clamped to [min, max].
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let q = q.clamp(0.0, 1.0);
        let rank = ((q * self.n as f64).ceil() as u64).max(1);
        let mut acc = 0u64;
        for (k, c) in self.keys.iter().zip(&self.counts) {
            acc += c;
            if acc >= rank {
                let v = if q == 0.0 { lowest(*k) } else { highest(*k) };
                return v.clamp(self.min, self.max);
            }
        }
        self.max
    }

    pub fn summary(&self) -> DelaySummary {
        if self.n == 0 {
            return DelaySummary::default();
        }
        DelaySummary {
            min: self.min,
            mean: self.sum as f64 / self.n as f64,
            p50: self.quantile(0.5),
            p99: self.quantile(0.99),
            p999: self.quantile(0.999),
            max: self.max,
        }
    }

    /// (highest value of the bucket, count) of every bucket in use,
    /// ascending: for plots.
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.keys
            .iter()
            .zip(&self.counts)
            .map(|(k, c)| (highest(*k), *c))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_hdr_three_digit_buckets() {
        for v in [
            0u64,
            1,
            2047,
            2048,
            2049,
            4095,
            4096,
            16_348_123,
            100_000_000_000,
            u64::MAX,
        ] {
            let k = key(v);
            assert!(lowest(k) <= v && v <= highest(k), "{v}");
            // Relative width at most 1/1024.
            assert!(
                (highest(k) - lowest(k)) as f64 <= (v as f64 / 1024.0).max(0.0),
                "{v}"
            );
        }
        // Neighbouring buckets tile the line without gaps.
        for v in [2047u64, 4095, highest(key(1 << 30))] {
            assert_eq!(highest(key(v)), v);
            assert_eq!(v + 1, lowest(key(v + 1)));
        }
    }

    /// The case: a flow whose every delay lies in one wide bucket
    /// reported p99 above max; now quantiles stay inside [min, max].
    #[test]
    fn quantiles_are_ordered_and_inside_min_max() {
        let mut h = DelayHist::new();
        for d in [16_333_000u64, 16_341_000, 16_348_000, 16_344_000] {
            h.record(d);
        }
        let s = h.summary();
        assert_eq!((s.min, s.max), (16_333_000, 16_348_000));
        assert!(
            s.min <= s.p50 && s.p50 <= s.p99 && s.p99 <= s.p999 && s.p999 <= s.max,
            "{s:?}"
        );
        assert_eq!(s.mean, 16_341_500.0);
        assert_eq!(DelayHist::new().summary(), DelaySummary::default());
    }

    #[test]
    fn quantiles_match_ranks() {
        let mut h = DelayHist::new();
        for v in 1..=1000u64 {
            h.record(v);
        }
        assert_eq!(
            (h.quantile(0.5), h.quantile(0.99), h.quantile(0.0)),
            (500, 990, 1)
        );
        assert_eq!(h.buckets_used(), 1000);
        let mut g = DelayHist::new();
        for _ in 0..1_000_000 {
            g.record(12_000_000);
        }
        assert_eq!(g.buckets_used(), 1);
        assert_eq!(g.summary().p99, 12_000_000);
        let mut a = DelayHist::new();
        a.record(5);
        a.record(3_000_001);
        let mut b = DelayHist::new();
        b.record(7);
        b.merge(&a);
        assert_eq!(
            (b.len(), b.min(), b.max(), b.summary().mean),
            (3, 5, 3_000_001, 1_000_004.3333333334)
        );
    }
}
