//! Test support: an exact fluid GPS server (Parekh & Gallager, IEEE/ACM
//! ToN 1993, §II) in rational arithmetic, and a driver that runs a fair
//! scheduler on a link beside it, so tests can hold every packet's
//! departure against its GPS finish time.
//!
//! The fluid system is simulated event by event: between events the set
//! B(t) of backlogged flows is fixed and flow i ∈ B(t) is served at
//! r·wᵢ/Σ_{B(t)} w, so virtual time is piecewise linear; an event is an
//! arrival or the end of some flow's head packet. Rationals keep it exact:
//! a bound checked against it can only fail by a real excess.

use std::collections::VecDeque;

use super::testkit::pkt;
use crate::sched::Scheduler;
use crate::time::Instant;

/// An exact rational: numerator, denominator > 0, reduced.
#[derive(Clone, Copy, Debug)]
pub struct Q(pub i128, pub i128);

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

impl Q {
    pub fn new(n: i128, d: i128) -> Q {
        let g = gcd(n, d) * d.signum();
        Q(n / g, d / g)
    }
    pub fn int(n: i128) -> Q {
        Q(n, 1)
    }
    pub fn add(self, o: Q) -> Q {
        Q::new(self.0 * o.1 + o.0 * self.1, self.1 * o.1)
    }
    pub fn sub(self, o: Q) -> Q {
        Q::new(self.0 * o.1 - o.0 * self.1, self.1 * o.1)
    }
    pub fn mul(self, o: Q) -> Q {
        Q::new(self.0 * o.0, self.1 * o.1)
    }
    pub fn div(self, o: Q) -> Q {
        Q::new(self.0 * o.1, self.1 * o.0)
    }
    pub fn le(self, o: Q) -> bool {
        self.0 * o.1 <= o.0 * self.1
    }
    pub fn min(self, o: Q) -> Q {
        if self.le(o) {
            self
        } else {
            o
        }
    }
    /// As a float, for messages.
    pub fn f(self) -> f64 {
        self.0 as f64 / self.1 as f64
    }
}

/// The fluid GPS server of rate 1 byte/ns.
pub struct Fluid {
    w: Vec<i128>,
    t: Q,
    /// Bytes of each flow served so far.
    pub served: Vec<Q>,
    arrived: Vec<i128>,
    /// Per flow: cumulative bytes at which each queued packet ends.
    ends: Vec<VecDeque<(i128, usize)>>,
    /// GPS finish time of each packet, once known.
    pub finish: Vec<Option<Q>>,
}

impl Fluid {
    pub fn new(w: &[u32], packets: usize) -> Self {
        Fluid {
            w: w.iter().map(|&w| w as i128).collect(),
            t: Q::int(0),
            served: vec![Q::int(0); w.len()],
            arrived: vec![0; w.len()],
            ends: vec![VecDeque::new(); w.len()],
            finish: vec![None; packets],
        }
    }
    /// Packet `id` of `len` bytes joins flow `f` now.
    pub fn arrive(&mut self, f: usize, len: i128, id: usize) {
        self.arrived[f] += len;
        self.ends[f].push_back((self.arrived[f], id));
    }
    /// Runs the fluid system to time `to`.
    pub fn advance(&mut self, to: Q) {
        loop {
            let busy: Vec<usize> = (0..self.w.len()).filter(|&i| !self.ends[i].is_empty()).collect();
            let wsum: i128 = busy.iter().map(|&i| self.w[i]).sum();
            if wsum == 0 {
                if self.t.le(to) {
                    self.t = to;
                }
                return;
            }
            // Up to `to` or the first head packet to end, whichever first.
            let mut step = to.sub(self.t);
            for &i in &busy {
                let left = Q::int(self.ends[i][0].0).sub(self.served[i]);
                step = step.min(left.mul(Q::int(wsum)).div(Q::int(self.w[i])));
            }
            for &i in &busy {
                self.served[i] = self.served[i].add(step.mul(Q::new(self.w[i], wsum)));
            }
            self.t = self.t.add(step);
            let mut popped = false;
            for &i in &busy {
                while let Some(&(end, id)) = self.ends[i].front() {
                    if !Q::int(end).le(self.served[i]) {
                        break;
                    }
                    self.finish[id] = Some(self.t);
                    self.ends[i].pop_front();
                    popped = true;
                }
            }
            if !popped && to.le(self.t) {
                return;
            }
        }
    }
    /// Runs until every packet has finished.
    pub fn drain(&mut self) {
        self.advance(Q::int(i128::MAX / (1 << 80)));
    }
}

/// Per packet: arrival time (ns), flow, length (bytes).
pub type Arrival = (u64, usize, u64);

/// What a run on the link gave, per packet (indexed as the arrivals).
pub struct Run {
    /// Departure time: the last bit on the wire (ns).
    pub depart: Vec<u64>,
    /// GPS finish time (ns).
    pub gps: Vec<Q>,
}

/// Runs `s` (class-based, classes 0.. with weights `w`) on a work-
/// conserving link of 1 byte/ns fed with `arrivals` (sorted by time), and
/// the fluid GPS server beside it. `each` sees the fluid system and the
/// bytes each flow has had from the packet system just before every
/// dequeue.
pub fn run(
    s: &mut dyn Scheduler,
    w: &[u32],
    arrivals: &[Arrival],
    mut each: impl FnMut(u64, &Fluid, &[i128]),
) -> Run {
    let n = arrivals.len();
    let mut fluid = Fluid::new(w, n);
    let mut pk_served = vec![0i128; w.len()];
    let mut depart = vec![0u64; n];
    let (mut i, mut link_free) = (0, 0u64);
    loop {
        let t = if !s.is_empty() {
            link_free
        } else if i < n {
            arrivals[i].0.max(link_free)
        } else {
            break;
        };
        while i < n && arrivals[i].0 <= t {
            let (at, f, len) = arrivals[i];
            fluid.advance(Q::int(at as i128));
            fluid.arrive(f, len as i128, i);
            s.enqueue(pkt(i as u64, f as u16, len as usize), Instant(at))
                .unwrap();
            i += 1;
        }
        fluid.advance(Q::int(t as i128));
        each(t, &fluid, &pk_served);
        let p = s.dequeue(Instant(t)).expect("work conserving");
        pk_served[p.meta.class as usize] += p.len() as i128;
        link_free = t + p.len() as u64;
        depart[p.meta.uid as usize] = link_free;
    }
    fluid.drain();
    let gps = fluid
        .finish
        .iter()
        .map(|f| f.expect("GPS finished every packet"))
        .collect();
    Run { depart, gps }
}

/// Packets (id, departure, GPS finish) that left later than GPS finish +
/// `slack` ns.
pub fn late(r: &Run, slack: i128) -> Vec<(usize, u64, Q)> {
    (0..r.depart.len())
        .filter(|&id| !Q::int(r.depart[id] as i128).le(r.gps[id].add(Q::int(slack))))
        .map(|id| (id, r.depart[id], r.gps[id]))
        .collect()
}

/// Arrivals from (gap, flow, len) triples: times accumulate the gaps,
/// flows are taken modulo `flows`.
pub fn arrivals(raw: &[(u64, usize, u64)], flows: usize) -> Vec<Arrival> {
    let mut t = 0;
    raw.iter()
        .map(|&(gap, f, len)| {
            t += gap;
            (t, f % flows, len)
        })
        .collect()
}
