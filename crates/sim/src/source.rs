//! Traffic sources of simulated hosts: CBR with a start phase, Poisson,
//! on/off; fixed sizes or an IMIX mix. Each packet is a real UDP frame
//! carrying a [`Probe`](qosnet_core::probe::Probe) with its send time.

use qosnet_core::Duration;
use qosnet_scenario::{Pattern, SizeDist};
use rand::rngs::StdRng;
use rand::Rng;
use rand_distr::{Distribution, Exp};

pub struct Source {
    pub flow: u32,
    pub pattern: Pattern,
    pub size: SizeDist,
    /// Mean inter-packet gap in ns (f64 so CBR phases don't drift).
    pub gap_ns: f64,
    pub start: Duration,
    pub stop: Duration,
    pub seq: u64,
    /// Emission number for CBR/on-off schedules.
    k: u64,
    /// Time of the next emission (ns since start of run).
    pub next_ns: f64,
}

impl Source {
    pub fn new(
        flow: u32,
        pattern: Pattern,
        size: SizeDist,
        pps: f64,
        start: Duration,
        stop: Duration,
    ) -> Self {
        Source {
            flow,
            pattern,
            size,
            gap_ns: 1e9 / pps,
            start,
            stop,
            seq: 0,
            k: 0,
            next_ns: start.as_nanos() as f64,
        }
    }

    /// IP size of the next packet.
    pub fn size(&self, rng: &mut StdRng) -> usize {
        match self.size {
            SizeDist::Fixed(b) => b as usize,
            SizeDist::Imix => match rng.gen_range(0..12) {
                0..=6 => 40,
                7..=10 => 576,
                _ => 1500,
            },
        }
    }

    /// Advance to the following emission; `None` once past `stop`.
    pub fn advance(&mut self, rng: &mut StdRng) -> Option<u64> {
        self.k += 1;
        let start = self.start.as_nanos() as f64;
        self.next_ns = match &self.pattern {
            Pattern::Cbr => start + self.k as f64 * self.gap_ns,
            Pattern::Poisson => {
                let e = Exp::new(1.0 / self.gap_ns)
                    .map(|d| d.sample(rng))
                    .unwrap_or(self.gap_ns);
                self.next_ns + e
            }
            Pattern::OnOff { on, off } => {
                // Packets at CBR spacing inside each on period.
                let (on, off) = (on.as_nanos() as f64, off.as_nanos() as f64);
                let mut t = self.next_ns + self.gap_ns;
                let period = on + off;
                if period > 0.0 {
                    let phase = (t - start) % period;
                    if phase >= on {
                        t += period - phase;
                    }
                }
                t
            }
        };
        let t = self.next_ns.round() as u64;
        (t < self.stop.as_nanos()).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn times(src: &mut Source, rng: &mut StdRng) -> Vec<u64> {
        let mut v = vec![src.next_ns.round() as u64];
        while let Some(t) = src.advance(rng) {
            v.push(t);
        }
        v
    }

    #[test]
    fn cbr_has_exact_phase_and_period() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut s = Source::new(
            0,
            Pattern::Cbr,
            SizeDist::Fixed(100),
            800.0,
            Duration::from_micros(250),
            Duration::from_millis(10),
        );
        let t = times(&mut s, &mut rng);
        assert_eq!(t[0], 250_000);
        assert!(t.windows(2).all(|w| w[1] - w[0] == 1_250_000), "{t:?}");
        assert_eq!(*t.last().unwrap(), 250_000 + 7 * 1_250_000);
    }

    #[test]
    fn poisson_mean_rate() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut s = Source::new(
            0,
            Pattern::Poisson,
            SizeDist::Fixed(100),
            10_000.0,
            Duration::ZERO,
            Duration::from_secs(2),
        );
        let n = times(&mut s, &mut rng).len() as f64;
        assert!(
            (n - 20_000.0).abs() < 20_000.0 * 0.03,
            "{n} packets in 2 s at 10 kpps"
        );
    }

    #[test]
    fn onoff_sends_only_in_on_periods() {
        let mut rng = StdRng::seed_from_u64(1);
        let p = Pattern::OnOff {
            on: Duration::from_millis(1),
            off: Duration::from_millis(3),
        };
        let mut s = Source::new(
            0,
            p,
            SizeDist::Fixed(100),
            10_000.0,
            Duration::ZERO,
            Duration::from_millis(40),
        );
        let t = times(&mut s, &mut rng);
        assert!(t.iter().all(|x| x % 4_000_000 < 1_000_000), "{t:?}");
        assert_eq!(t.len(), 10 * 10);
    }

    #[test]
    fn imix_mix() {
        let mut rng = StdRng::seed_from_u64(3);
        let s = Source::new(
            0,
            Pattern::Cbr,
            SizeDist::Imix,
            1.0,
            Duration::ZERO,
            Duration::from_secs(1),
        );
        let sizes: Vec<usize> = (0..12_000).map(|_| s.size(&mut rng)).collect();
        let big = sizes.iter().filter(|&&x| x == 1500).count() as f64 / 12_000.0;
        let small = sizes.iter().filter(|&&x| x == 40).count() as f64 / 12_000.0;
        assert!((big - 1.0 / 12.0).abs() < 0.01 && (small - 7.0 / 12.0).abs() < 0.02);
    }
}
