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
