//! The CPU in front of a node: a bounded input queue served one frame at a
//! time, each for a processing time drawn from a distribution.
//!
//! This is what made the ICC 2006 testbed's FIFO routers jittery (PC
//! routers whose forwarding time varied with interrupts and bus
//! contention), and what the STSDR forwarders' per-phase costs are. The
//! same model serves both drivers: the simulator puts it in front of any
//! node that has a `processing` setting; the live runtime can put it in
//! front of a node to make a fast machine behave like a slower one.
//!
//! Sans-IO like everything in core: the driver supplies the randomness
//! ([`Draw`]) so that a simulation's single seeded stream replays bit for
//! bit, and polls [`Cpu::poll_timeout`] for when the frame in service is
//! done.

use std::collections::VecDeque;

use crate::packet::Meta;
use crate::time::{Duration, Instant};

/// A per-frame processing time distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ProcDist {
    Fixed(Duration),
    /// Uniform between the two bounds, inclusive.
    Uniform(Duration, Duration),
    /// `base` plus an exponential with mean `mean`.
    Exp {
        base: Duration,
        mean: Duration,
    },
}

/// Uniform random numbers, supplied by the driver.
pub trait Draw {
    /// Uniform in `lo..=hi` (`hi >= lo`).
    fn uniform_u64(&mut self, lo: u64, hi: u64) -> u64;
    /// Uniform in `[f64::EPSILON, 1)`: never zero, so `ln` is finite.
    fn unit_f64(&mut self) -> f64;
}

impl ProcDist {
    pub fn sample(&self, d: &mut dyn Draw) -> Duration {
        match *self {
            ProcDist::Fixed(x) => x,
            ProcDist::Uniform(lo, hi) => Duration(d.uniform_u64(lo.0, hi.0.max(lo.0))),
            ProcDist::Exp { base, mean } => {
                let u = d.unit_f64();
                base + Duration((-u.ln() * mean.0 as f64) as u64)
            }
        }
    }
    /// The mean processing time.
    pub fn mean(&self) -> Duration {
        match *self {
            ProcDist::Fixed(x) => x,
            ProcDist::Uniform(lo, hi) => Duration((lo.0 + hi.0.max(lo.0)) / 2),
            ProcDist::Exp { base, mean } => base + mean,
        }
    }
}

/// A frame waiting for, or in, service.
#[derive(Debug)]
struct Job {
    port: u16,
    frame: Vec<u8>,
    meta: Meta,
}

/// The input queue and processor of one node.
#[derive(Debug)]
pub struct Cpu {
    dist: ProcDist,
    limit: usize,
    queue: VecDeque<Job>,
    /// Frames tagged with an 802.1Q priority of 6 or 7 (internetwork and
    /// network control, IEEE 802.1Q Table I-2): a NIC steers them to their
    /// own receive queue and the driver serves it first, so control
    /// traffic (the STSDR's DS frames) does not wait behind a data
    /// backlog. Bounded by `limit` on its own.
    urgent: VecDeque<Job>,
    /// Whether the frame in service is the head of `urgent`.
    serving_urgent: bool,
    /// Processing time of an `urgent` frame, if not `dist`'s: a control
    /// frame is read and stored, not routed and queued.
    control: Option<ProcDist>,
    /// When the frame in service is done, while busy.
    done_at: Option<Instant>,
    /// Frames refused because the input queue was full.
    pub drops: u64,
    /// Frames processed.
    pub served: u64,
}

impl Cpu {
    /// A CPU with at most `limit` frames waiting (including the one in
    /// service).
    pub fn new(dist: ProcDist, limit: usize) -> Self {
        Cpu {
            dist,
            limit,
            queue: VecDeque::new(),
            urgent: VecDeque::new(),
            serving_urgent: false,
            control: None,
            done_at: None,
            drops: 0,
            served: 0,
        }
    }
    pub fn dist(&self) -> ProcDist {
        self.dist
    }
    /// Control frames (802.1Q priority 6–7) take `control` each instead
    /// of the forwarding time (`None`: the same as data).
    pub fn with_control(mut self, control: Option<ProcDist>) -> Self {
        self.control = control;
        self
    }
    fn sample(&self, urgent: bool, d: &mut dyn Draw) -> Duration {
        match self.control {
            Some(c) if urgent => c.sample(d),
            _ => self.dist.sample(d),
        }
    }
    /// Frames waiting or in service.
    pub fn len(&self) -> usize {
        self.queue.len() + self.urgent.len()
    }
    /// Traffic frames (with a uid) waiting or in service: the driver's
    /// conservation ledger counts only these.
    pub fn traffic_len(&self) -> usize {
        self.queue
            .iter()
            .chain(&self.urgent)
            .filter(|j| j.meta.uid != 0)
            .count()
    }
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.urgent.is_empty()
    }
    /// A frame arrives at `now`. Returns `false` (counted in
    /// [`drops`](Self::drops)) if the input queue is full. An idle CPU
    /// starts on it at once.
    pub fn handle_frame(
        &mut self,
        now: Instant,
        port: u16,
        frame: Vec<u8>,
        meta: Meta,
        d: &mut dyn Draw,
    ) -> bool {
        let urgent = is_control(&frame);
        let lane = if urgent { &mut self.urgent } else { &mut self.queue };
        if lane.len() >= self.limit {
            self.drops += 1;
            return false;
        }
        lane.push_back(Job { port, frame, meta });
        if self.done_at.is_none() {
            self.serving_urgent = urgent;
            self.done_at = Some(now + self.sample(urgent, d));
        }
        true
    }
    /// Serve at once a frame arriving at an idle CPU whose processing time
    /// for it is zero: its processing would end the instant it began, so
    /// the caller hands `frame` to its node in the same step (counted
    /// served, no draw) instead of queueing it and collecting it from
    /// [`poll_done`](Self::poll_done). Returns `false`, and does nothing,
    /// otherwise: busy, a zero-length input queue, or a non-zero
    /// processing time for this frame's class (a control frame's own
    /// time, [`with_control`](Self::with_control), counts: a balancer
    /// that forwards data in no time still takes its time to read a DS
    /// frame).
    #[inline]
    pub fn serve_now(&mut self, frame: &[u8]) -> bool {
        let zero = ProcDist::Fixed(Duration::ZERO);
        let dist = match self.control {
            Some(c) if is_control(frame) => c,
            _ => self.dist,
        };
        if self.done_at.is_none() && self.limit > 0 && dist == zero {
            self.served += 1;
            true
        } else {
            false
        }
    }
    /// When the frame in service is done.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.done_at
    }
    /// The frame whose processing finished at or before `now`, if any; the
    /// next one starts when it finished (not when the driver got here), so
    /// a late driver does not slow the emulated CPU down.
    pub fn poll_done(&mut self, now: Instant, d: &mut dyn Draw) -> Option<(u16, Vec<u8>, Meta)> {
        let t = self.done_at.filter(|t| *t <= now)?;
        let job = if self.serving_urgent {
            self.urgent.pop_front()?
        } else {
            self.queue.pop_front()?
        };
        self.served += 1;
        self.serving_urgent = !self.urgent.is_empty();
        self.done_at = (!self.is_empty()).then(|| t + self.sample(self.serving_urgent, d));
        Some((job.port, job.frame, job.meta))
    }
}

/// A frame with an 802.1Q tag of priority 6 or 7.
fn is_control(frame: &[u8]) -> bool {
    frame.len() >= 16 && frame[12] == 0x81 && frame[13] == 0x00 && frame[14] >> 5 >= 6
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic draws: `uniform_u64` returns the low bound plus a
    /// counter, `unit_f64` a fixed value.
    struct Seq(u64);
    impl Draw for Seq {
        fn uniform_u64(&mut self, lo: u64, hi: u64) -> u64 {
            self.0 += 1;
            (lo + self.0).min(hi)
        }
        fn unit_f64(&mut self) -> f64 {
            0.5
        }
    }

    #[test]
    fn control_priority_frames_overtake_a_data_backlog() {
        let mut c = Cpu::new(ProcDist::Fixed(Duration(10)), 2);
        let mut d = Seq(0);
        let mut tagged = vec![0u8; 60];
        tagged[12] = 0x81;
        tagged[14] = 7 << 5;
        let mut low = tagged.clone();
        low[14] = 5 << 5;
        assert!(c.handle_frame(Instant(0), 0, vec![1; 60], Meta::default(), &mut d));
        assert!(c.handle_frame(Instant(1), 0, low.clone(), Meta::default(), &mut d));
        // The data lane is full; the control lane has its own room.
        assert!(!c.handle_frame(Instant(2), 0, vec![2; 60], Meta::default(), &mut d));
        assert!(c.handle_frame(Instant(3), 0, tagged.clone(), Meta::default(), &mut d));
        // The frame in service finishes; the control frame goes next.
        assert_eq!(c.poll_done(Instant(10), &mut d).unwrap().1, vec![1; 60]);
        assert_eq!(c.poll_done(Instant(20), &mut d).unwrap().1, tagged);
        assert_eq!(c.poll_done(Instant(30), &mut d).unwrap().1, low);
        assert!(c.is_empty());
    }

    #[test]
    fn control_frames_take_their_own_time() {
        let mut c =
            Cpu::new(ProcDist::Fixed(Duration(10)), 4).with_control(Some(ProcDist::Fixed(Duration(2))));
        let mut d = Seq(0);
        let mut tagged = vec![0u8; 60];
        tagged[12] = 0x81;
        tagged[14] = 7 << 5;
        assert!(c.handle_frame(Instant(0), 0, tagged.clone(), Meta::default(), &mut d));
        assert!(c.handle_frame(Instant(0), 0, vec![1; 60], Meta::default(), &mut d));
        assert!(c.handle_frame(Instant(1), 0, tagged.clone(), Meta::default(), &mut d));
        assert_eq!(c.poll_timeout(), Some(Instant(2)));
        assert_eq!(c.poll_done(Instant(2), &mut d).unwrap().1, tagged);
        // The second control frame overtakes the data frame, 2 units.
        assert_eq!(c.poll_timeout(), Some(Instant(4)));
        assert_eq!(c.poll_done(Instant(4), &mut d).unwrap().1, tagged);
        assert_eq!(c.poll_timeout(), Some(Instant(14)));
    }

    #[test]
    fn serves_in_order_one_at_a_time_and_bounds_the_queue() {
        let mut c = Cpu::new(ProcDist::Fixed(Duration(10)), 2);
        let mut d = Seq(0);
        assert!(c.handle_frame(Instant(100), 0, vec![1], Meta::default(), &mut d));
        assert!(c.handle_frame(Instant(101), 1, vec![2], Meta::default(), &mut d));
        assert!(!c.handle_frame(Instant(102), 0, vec![3], Meta::default(), &mut d));
        assert_eq!(c.drops, 1);
        assert_eq!(c.poll_timeout(), Some(Instant(110)));
        assert!(c.poll_done(Instant(109), &mut d).is_none());
        // A late driver: the second frame started when the first finished.
        let (p, f, _) = c.poll_done(Instant(125), &mut d).unwrap();
        assert_eq!((p, f), (0, vec![1]));
        assert_eq!(c.poll_timeout(), Some(Instant(120)));
        let (p, f, _) = c.poll_done(Instant(125), &mut d).unwrap();
        assert_eq!((p, f), (1, vec![2]));
        assert_eq!((c.poll_timeout(), c.served, c.len()), (None, 2, 0));
    }

    #[test]
    fn serve_now_only_when_idle_and_instant() {
        let mut d = Seq(0);
        let data = [1u8; 60];
        let mut c = Cpu::new(ProcDist::Fixed(Duration::ZERO), 2);
        assert!(c.serve_now(&data));
        assert_eq!((c.served, c.len(), c.poll_timeout()), (1, 0, None));
        // Busy (a frame in service, even a zero-time one): not at once.
        assert!(c.handle_frame(Instant(5), 0, vec![1], Meta::default(), &mut d));
        assert!(!c.serve_now(&data));
        assert!(c.poll_done(Instant(5), &mut d).is_some());
        assert!(c.serve_now(&data));
        assert_eq!(c.served, 3);
        let mut slow = Cpu::new(ProcDist::Fixed(Duration(1)), 2);
        assert!(!slow.serve_now(&data));
        let mut closed = Cpu::new(ProcDist::Fixed(Duration::ZERO), 0);
        assert!(
            !closed.serve_now(&data),
            "a zero-length input queue refuses every frame"
        );
        assert_eq!(slow.served + closed.served, 0);
    }

    #[test]
    fn serve_now_uses_the_frames_own_processing_time() {
        let mut tagged = vec![0u8; 60];
        tagged[12] = 0x81;
        tagged[14] = 7 << 5;
        let data = [1u8; 60];
        // Data forwarded in zero time, control frames read in 2 units:
        // only the data frame skips the queue.
        let mut c =
            Cpu::new(ProcDist::Fixed(Duration::ZERO), 4).with_control(Some(ProcDist::Fixed(Duration(2))));
        assert!(!c.serve_now(&tagged));
        assert!(c.serve_now(&data));
        // And the other way round.
        let mut c =
            Cpu::new(ProcDist::Fixed(Duration(2)), 4).with_control(Some(ProcDist::Fixed(Duration::ZERO)));
        assert!(c.serve_now(&tagged));
        assert!(!c.serve_now(&data));
        assert_eq!(c.served, 1);
    }

    #[test]
    fn distributions() {
        let mut d = Seq(0);
        let u = ProcDist::Uniform(Duration(5), Duration(3));
        assert_eq!(u.sample(&mut d), Duration(5), "inverted bounds clamp");
        let e = ProcDist::Exp {
            base: Duration(100),
            mean: Duration(1000),
        };
        assert_eq!(e.sample(&mut d), Duration(100 + 693));
        assert_eq!(e.mean(), Duration(1100));
    }
}
