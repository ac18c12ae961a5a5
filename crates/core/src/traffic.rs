//! What a traffic source sends and when: arrival patterns (CBR with a
//! phase, Poisson, on/off) and IP packet sizes (fixed, IMIX, a trace of
//! sizes such as a user's capture), as plain
//! arithmetic over a [`Draw`] supplied by the driver.
//!
//! One implementation serves the simulator's sources and the live UDP
//! generator, so a scenario's flow emits the same schedule in both (same
//! seed and same draws give the same send times). Poisson gaps are drawn
//! by inverse transform, −ln U · mean, with U in (0, 1).

use crate::node::cpu::Draw;
use crate::time::Duration;

/// When packets leave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// Constant bit rate: packet k at `start + k / pps` exactly (computed
    /// from k, so phases never drift).
    Cbr,
    /// Exponential gaps with mean `1 / pps`.
    Poisson,
    /// CBR spacing during `on`, silence during `off`, repeating from the
    /// flow's start. A zero period is plain CBR (the loader refuses it).
    OnOff { on: Duration, off: Duration },
}

/// IP packet sizes.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    /// Every packet this many IP bytes.
    Fixed(u32),
    /// Simple IMIX: 7 : 4 : 1 of 40, 576 and 1500 IP bytes.
    Imix,
    /// The empirical distribution of a trace of IP sizes (a capture's,
    /// `size = "pcap:FILE"`): each packet's size drawn uniformly from the
    /// trace, so a flow has the capture's size mix (not its order). Never
    /// empty (the loader refuses empty traces).
    Trace(std::sync::Arc<[u16]>),
}

/// The simple IMIX mix: (IP bytes, weight out of 12).
pub const IMIX: [(u32, u64); 3] = [(40, 7), (576, 4), (1500, 1)];

impl SizeDist {
    /// Mean IP size (what a bit rate converts to packets per second with).
    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(b) => *b as f64,
            SizeDist::Imix => IMIX.iter().map(|&(b, w)| b as f64 * w as f64).sum::<f64>() / 12.0,
            SizeDist::Trace(t) => t.iter().map(|&b| b as f64).sum::<f64>() / t.len().max(1) as f64,
        }
    }
    /// Largest packet the distribution draws (for reservations).
    pub fn max(&self) -> u32 {
        match self {
            SizeDist::Fixed(b) => *b,
            SizeDist::Imix => 1500,
            SizeDist::Trace(t) => t.iter().copied().max().unwrap_or(0) as u32,
        }
    }
    /// Smallest packet the distribution draws.
    pub fn min(&self) -> u32 {
        match self {
            SizeDist::Fixed(b) => *b,
            SizeDist::Imix => 40,
            SizeDist::Trace(t) => t.iter().copied().min().unwrap_or(0) as u32,
        }
    }
    /// IP size of one packet.
    pub fn sample(&self, d: &mut dyn Draw) -> usize {
        match self {
            SizeDist::Fixed(b) => *b as usize,
            SizeDist::Imix => {
                let mut r = d.uniform_u64(0, 11);
                for &(b, w) in &IMIX {
                    if r < w {
                        return b as usize;
                    }
                    r -= w;
                }
                unreachable!("IMIX weights sum to 12")
            }
            SizeDist::Trace(t) if t.is_empty() => 0,
            SizeDist::Trace(t) => t[d.uniform_u64(0, t.len() as u64 - 1) as usize] as usize,
        }
    }
}

/// Send times of one flow, in nanoseconds from an origin of the driver's
/// choosing (the simulator: start of run; live: the flow's start).
#[derive(Clone, Debug)]
pub struct Schedule {
    pattern: Pattern,
    /// Mean gap in ns, f64 so CBR phases never drift.
    gap_ns: f64,
    start_ns: f64,
    /// Emissions so far.
    k: u64,
    next_ns: f64,
}

impl Schedule {
    /// First packet at `start`; `pps` packets per second on average (0:
    /// never more than the first).
    pub fn new(pattern: Pattern, pps: f64, start: Duration) -> Self {
        let start_ns = start.as_nanos() as f64;
        Schedule {
            pattern,
            gap_ns: if pps > 0.0 { 1e9 / pps } else { f64::INFINITY },
            start_ns,
            k: 0,
            next_ns: start_ns,
        }
    }
    /// Send time of the current packet, rounded to the nanosecond.
    pub fn time_ns(&self) -> u64 {
        self.next_ns.round().min(u64::MAX as f64) as u64
    }
    /// Mean gap between packets.
    pub fn mean_gap_ns(&self) -> f64 {
        self.gap_ns
    }
    /// Move to the next packet and return its send time.
    pub fn advance(&mut self, d: &mut dyn Draw) -> u64 {
        self.k += 1;
        self.next_ns = match self.pattern {
            Pattern::Cbr => self.start_ns + self.k as f64 * self.gap_ns,
            Pattern::Poisson => self.next_ns - d.unit_f64().ln() * self.gap_ns,
            Pattern::OnOff { on, off } => {
                let (on, off) = (on.as_nanos() as f64, off.as_nanos() as f64);
                let mut t = self.next_ns + self.gap_ns;
                let period = on + off;
                if period > 0.0 {
                    let phase = (t - self.start_ns) % period;
                    if phase >= on {
                        t += period - phase;
                    }
                }
                t
            }
        };
        self.time_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 as a test draw.
    struct Mix(u64);
    impl Mix {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }
    impl Draw for Mix {
        fn uniform_u64(&mut self, lo: u64, hi: u64) -> u64 {
            lo + self.next() % (hi - lo + 1)
        }
        fn unit_f64(&mut self) -> f64 {
            ((self.next() >> 11) as f64 / (1u64 << 53) as f64).max(f64::EPSILON)
        }
    }

    #[test]
    fn a_trace_is_drawn_in_its_own_proportions() {
        let t = SizeDist::Trace(vec![100u16, 100, 100, 1500].into());
        assert_eq!((t.min(), t.max(), t.mean()), (100, 1500, 450.0));
        let mut d = Mix(3);
        let n = 40_000;
        let big = (0..n).filter(|_| t.sample(&mut d) == 1500).count();
        // A quarter, within 2 % (sd of the share ~0.2 %).
        assert!((big as f64 / n as f64 - 0.25).abs() < 0.02, "{big}");
    }

    #[test]
    fn cbr_is_exact_from_its_phase() {
        let mut s = Schedule::new(Pattern::Cbr, 800.0, Duration::from_micros(250));
        let mut d = Mix(1);
        assert_eq!(s.time_ns(), 250_000);
        let t: Vec<u64> = (0..1000).map(|_| s.advance(&mut d)).collect();
        assert_eq!(t[999], 250_000 + 1000 * 1_250_000);
        assert!(t.windows(2).all(|w| w[1] - w[0] == 1_250_000));
    }

    #[test]
    fn poisson_mean_and_variance_are_exponential() {
        let mut s = Schedule::new(Pattern::Poisson, 10_000.0, Duration::ZERO);
        let mut d = Mix(7);
        let n = 200_000;
        let mut last = 0u64;
        let (mut sum, mut sq) = (0.0, 0.0);
        for _ in 0..n {
            let t = s.advance(&mut d);
            let g = (t - last) as f64;
            last = t;
            sum += g;
            sq += g * g;
        }
        let mean = sum / n as f64;
        let var = sq / n as f64 - mean * mean;
        // Exp(mean 100 us): sd = mean; 200 000 draws give ~0.3 % error.
        assert!((mean / 100_000.0 - 1.0).abs() < 0.01, "{mean}");
        assert!((var.sqrt() / mean - 1.0).abs() < 0.02, "{var}");
    }

    #[test]
    fn on_off_is_silent_in_off_periods() {
        let on = Duration::from_millis(2);
        let off = Duration::from_millis(3);
        let mut s = Schedule::new(Pattern::OnOff { on, off }, 1000.0, Duration::from_millis(1));
        let mut d = Mix(3);
        let mut t = vec![s.time_ns()];
        t.extend((0..20).map(|_| s.advance(&mut d)));
        for x in &t {
            let phase = (x - 1_000_000) % 5_000_000;
            assert!(phase < 2_000_000, "{x} in an off period");
        }
        assert_eq!(&t[..4], &[1_000_000, 2_000_000, 6_000_000, 7_000_000]);
    }

    #[test]
    fn imix_draws_its_mix() {
        let mut d = Mix(5);
        let mut n = std::collections::BTreeMap::new();
        for _ in 0..120_000 {
            *n.entry(SizeDist::Imix.sample(&mut d)).or_insert(0u64) += 1;
        }
        for (b, w) in IMIX {
            let f = n[&(b as usize)] as f64 / 120_000.0;
            assert!((f - w as f64 / 12.0).abs() < 0.01, "{b}: {f}");
        }
        assert!((SizeDist::Imix.mean() - 340.333).abs() < 0.01);
        assert_eq!((SizeDist::Imix.min(), SizeDist::Imix.max()), (40, 1500));
    }
}
