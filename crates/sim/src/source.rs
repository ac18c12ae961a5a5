//! Traffic sources of simulated hosts: a flow's [`Schedule`] (CBR with a
//! start phase, Poisson, on/off) and sizes (fixed or IMIX) from
//! `qosnet_core::traffic` — the same code the live generator runs. Each
//! packet is a real UDP frame carrying a
//! [`Probe`](qosnet_core::probe::Probe) with its send time.

use qosnet_core::node::cpu::Draw;
use qosnet_core::traffic::Schedule;
use qosnet_core::Duration;
use qosnet_scenario::{Pattern, SizeDist};

pub struct Source {
    pub flow: u32,
    pub size: SizeDist,
    pub start: Duration,
    pub stop: Duration,
    pub seq: u64,
    schedule: Schedule,
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
            size,
            start,
            stop,
            seq: 0,
            schedule: Schedule::new(pattern, pps, start),
        }
    }

    /// Time of the current emission (ns since start of run).
    pub fn next_ns(&self) -> u64 {
        self.schedule.time_ns()
    }

    /// IP size of the next packet.
    pub fn size(&self, d: &mut dyn Draw) -> usize {
        self.size.sample(d)
    }

    /// Advance to the following emission; `None` once past `stop`.
    pub fn advance(&mut self, d: &mut dyn Draw) -> Option<u64> {
        let t = self.schedule.advance(d);
        (t < self.stop.as_nanos()).then_some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Patterns are tested in `qosnet_core::traffic`; here, the stop.
    struct Half;
    impl Draw for Half {
        fn uniform_u64(&mut self, lo: u64, _hi: u64) -> u64 {
            lo
        }
        fn unit_f64(&mut self) -> f64 {
            0.5
        }
    }

    #[test]
    fn cbr_starts_at_its_phase_and_stops_before_stop() {
        let mut s = Source::new(
            0,
            Pattern::Cbr,
            SizeDist::Fixed(100),
            800.0,
            Duration::from_micros(250),
            Duration::from_millis(10),
        );
        let mut t = vec![s.next_ns()];
        while let Some(x) = s.advance(&mut Half) {
            t.push(x);
        }
        assert_eq!(t[0], 250_000);
        assert!(t.windows(2).all(|w| w[1] - w[0] == 1_250_000), "{t:?}");
        assert_eq!(*t.last().unwrap(), 250_000 + 7 * 1_250_000);
        assert_eq!(s.size(&mut Half), 100);
    }
}
