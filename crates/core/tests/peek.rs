//! `Scheduler::peek` against `dequeue`, for every scheduler kind in the
//! crate: whatever was enqueued when, `peek(now)` shows a packet exactly
//! when `dequeue(now)` returns one, and it is the same packet. Disciplines
//! whose dequeue decides by changing state (DRR deficit rounds, WF²Q+
//! eligibility, HTB borrowing and round robin, DiffServ's EF token bucket,
//! the TDP wheel turning and padding) are covered in states where that
//! matters: small DRR quanta, HTB classes throttled and borrowing, an EF
//! bucket running dry, TF boundaries crossed between operations.
//!
//! And `Scheduler::poll_at`'s promise the router's ports rely on to ask
//! less often: a future answer holds until it is reached, as long as
//! nothing is enqueued or dequeued in between.

use proptest::prelude::*;
use qosnet_core::diffserv::{DsSched, DsSchedConf};
use qosnet_core::sched::{
    Drr, FairConf, Fifo, GateEntry, Htb, HtbClass, HtbConf, Prio, QueueConf, Red, RedConf, RedProfile,
    Scheduler, Taprio, Wf2q, Wfq,
};
use qosnet_core::tdp::{Ctr, PaddingPolicy, PaddingSpec, StampMode, TdpWheel};
use qosnet_core::wire::MacAddr;
use qosnet_core::{Color, Duration, Framing, Instant, Meta, Packet};

const KINDS: usize = 17;
const MBIT: u64 = 1_000_000;

fn ctr() -> Ctr {
    Ctr::new(Duration::from_micros(100), 10, 2).unwrap()
}

fn htb() -> Htb {
    // Root 20 Mbit/s over leaves that must borrow, one capped below its
    // share: throttled classes and borrowing levels change within
    // milliseconds of 1500-byte packets.
    let classes = vec![
        HtbClass::new(1, None, 20 * MBIT, 20 * MBIT).bursts(3_000, 3_000),
        HtbClass::new(2, Some(1), 5 * MBIT, 20 * MBIT).bursts(1_600, 3_000),
        HtbClass::new(3, Some(1), 5 * MBIT, 10 * MBIT)
            .bursts(1_600, 1_600)
            .prio(1),
        HtbClass::new(4, Some(1), 2 * MBIT, 2 * MBIT)
            .bursts(1_600, 1_600)
            .quantum(1_000),
    ];
    Htb::new(HtbConf {
        classes,
        default_class: Some(4),
        overhead: 24,
    })
    .unwrap()
}

fn classes(weights: &[u32], limit: usize) -> FairConf {
    FairConf::classes(
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| (i as u16, QueueConf::new(w, limit, limit * 1_500)))
            .collect(),
    )
}

fn wheel(policy: PaddingPolicy, strict: bool, be: Box<dyn Scheduler>) -> TdpWheel {
    let pad = PaddingSpec {
        src_mac: MacAddr::local(1),
        dst_mac: MacAddr::local(2),
        src_ip: "10.0.0.1".parse().unwrap(),
        dst_ip: "10.0.0.2".parse().unwrap(),
    };
    TdpWheel::new(
        ctr(),
        2,
        1_000 * MBIT,
        Framing::default(),
        be,
        StampMode::Tdp,
        Some(pad),
    )
    .unwrap()
    .with_padding_policy(policy)
    .with_strict_guard(strict)
}

fn make(kind: usize) -> Box<dyn Scheduler> {
    let red = RedProfile {
        min_th: 3_000,
        max_th: 12_000,
        max_p: 0.2,
    };
    match kind {
        0 => Box::new(Fifo::new(8, 8 * 1_500)),
        1 => Box::new(Red::new(RedConf::red(16, 24_000, red, 100 * MBIT)).unwrap()),
        2 => Box::new(Prio::new(vec![
            Box::new(
                Htb::new(HtbConf {
                    classes: vec![HtbClass::new(0, None, 2 * MBIT, 2 * MBIT).bursts(1_600, 1_600)],
                    default_class: Some(0),
                    overhead: 0,
                })
                .unwrap(),
            ),
            Box::new(Fifo::new(8, 12_000)),
            Box::new(Drr::new(classes(&[300, 900, 1_500], 8)).unwrap()),
        ])),
        3 => Box::new(htb()),
        4 => Box::new(
            Taprio::new(
                3,
                8,
                12_000,
                vec![
                    GateEntry {
                        duration: Duration::from_micros(30),
                        open: 0b001,
                    },
                    GateEntry {
                        duration: Duration::from_micros(50),
                        open: 0b110,
                    },
                    GateEntry {
                        duration: Duration::from_micros(20),
                        open: 0b111,
                    },
                ],
                Instant(0),
                1_000 * MBIT,
                Framing::default(),
            )
            .unwrap(),
        ),
        5 => Box::new(Wfq::new(classes(&[1, 2, 3, 5], 8), 100 * MBIT).unwrap()),
        6 => Box::new(Wfq::new(FairConf::per_flow(QueueConf::new(1, 4, 6_000)), 100 * MBIT).unwrap()),
        7 => Box::new(Wf2q::new(classes(&[1, 2, 3, 5], 8), 100 * MBIT).unwrap()),
        8 => Box::new(Wf2q::new(FairConf::per_flow(QueueConf::new(2, 4, 6_000)), 100 * MBIT).unwrap()),
        // Quanta far below the packet sizes: several rounds per packet.
        9 => Box::new(Drr::new(classes(&[100, 250, 60, 700], 8)).unwrap()),
        10 => {
            Box::new(Drr::new(FairConf::per_flow(QueueConf::new(1_500, 4, 6_000)).with_overhead(24)).unwrap())
        }
        11 => Box::new(DsSched::new(DsSchedConf::new(100 * MBIT)).unwrap()),
        12 => {
            let mut c = DsSchedConf::new(100 * MBIT);
            c.ef_rate_bps = 2 * MBIT;
            c.ef_burst = 3_000;
            Box::new(DsSched::new(c).unwrap().with_ef_hard_limit(true))
        }
        // Late limits: packets not taken in time are shed at a TF boundary.
        13 => Box::new(
            wheel(PaddingPolicy::WhenIdle, false, Box::new(Fifo::new(8, 12_000))).with_late_limit(Some(0)),
        ),
        14 => Box::new(wheel(
            PaddingPolicy::WhenUnstamped,
            true,
            Box::new(Drr::new(classes(&[200, 500], 8)).unwrap()),
        )),
        15 => Box::new(wheel(PaddingPolicy::WhenIdle, true, Box::new(htb())).with_late_limit(Some(1))),
        _ => Box::new(Prio::new(vec![
            Box::new(wheel(
                PaddingPolicy::WhenIdle,
                false,
                Box::new(Fifo::new(4, 6_000)),
            )),
            Box::new(Wf2q::new(classes(&[1, 4], 8), 100 * MBIT).unwrap()),
        ])),
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// After `gap` ns, offer a packet.
    Enqueue {
        gap: u64,
        class: u16,
        flow: u32,
        len: usize,
        color: u8,
        /// TFs ahead of the current one for a reserved packet (0..=3, one
        /// beyond the wheels' reach); 4 and 5 for best effort.
        tf_ahead: u64,
    },
    /// After `gap` ns, peek and dequeue.
    Take { gap: u64 },
    /// After `gap` ns, only peek.
    Peek { gap: u64 },
}

fn gap() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..2_000, 0u64..150_000, 0u64..3_000_000]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (gap(), 0u16..8, 0u32..6, 60usize..=1_500, 0u8..3, 0u64..6).prop_map(
            |(gap, class, flow, len, color, tf_ahead)| Op::Enqueue { gap, class, flow, len, color, tf_ahead }
        ),
        4 => gap().prop_map(|gap| Op::Take { gap }),
        1 => gap().prop_map(|gap| Op::Peek { gap }),
    ]
}

/// Time and packet numbering of one run of operations.
struct Clock {
    now: Instant,
    uid: u64,
    ctr: Ctr,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            now: Instant(1_000_000),
            uid: 0,
            ctr: ctr(),
        }
    }
}

impl Clock {
    /// Moves time on by `op`'s gap and, for an enqueue, offers its packet;
    /// returns the new time (taking and peeking are the caller's).
    fn step(&mut self, s: &mut dyn Scheduler, op: &Op) -> Instant {
        let (Op::Enqueue { gap, .. } | Op::Take { gap } | Op::Peek { gap }) = *op;
        self.now += Duration(gap);
        if let Op::Enqueue {
            class,
            flow,
            len,
            color,
            tf_ahead,
            ..
        } = *op
        {
            self.uid += 1;
            let meta = Meta {
                uid: self.uid,
                arrival: self.now,
                class,
                flow,
                color: [Color::Green, Color::Yellow, Color::Red][color as usize],
                tdp_tf: (tf_ahead < 4).then(|| self.ctr.tf_at(self.now) + tf_ahead),
                ..Meta::default()
            };
            let _ = s.enqueue(Packet::new(vec![0; len], meta), self.now);
        }
        self.now
    }
}

/// What identifies a packet: its uid (padding frames have none, 0), whether
/// it is padding, and its length.
fn id(p: &Packet) -> (u64, bool, usize) {
    (p.meta.uid, p.meta.padding, p.len())
}

/// Peeks and dequeues at `now`; they must agree. Returns whether a packet
/// came out.
fn take(s: &mut dyn Scheduler, now: Instant) -> Result<bool, TestCaseError> {
    let seen = s.peek(now).map(id);
    let got = s.dequeue(now).map(|p| id(&p));
    prop_assert_eq!(seen, got, "{} at {:?}", s.kind(), now);
    Ok(got.is_some())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn peek_shows_what_dequeue_returns(
        kind in 0..KINDS,
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let mut s = make(kind);
        let mut clock = Clock::default();
        for op in ops {
            let now = clock.step(s.as_mut(), &op);
            match op {
                Op::Enqueue { .. } => {}
                Op::Take { .. } => {
                    take(s.as_mut(), now)?;
                }
                Op::Peek { .. } => {
                    let _ = s.peek(now);
                }
            }
        }
        drain(s.as_mut(), clock.now, take)?;
    }
}

/// Empties `s`, waking when it says and stepping on when it holds a frame
/// back (a guard band, a gate); `take_at` takes a frame at a time and says
/// whether one came out.
fn drain(
    s: &mut dyn Scheduler,
    mut now: Instant,
    mut take_at: impl FnMut(&mut dyn Scheduler, Instant) -> Result<bool, TestCaseError>,
) -> Result<(), TestCaseError> {
    for _ in 0..400 {
        if s.is_empty() {
            break;
        }
        if let Some(at) = s.poll_at(now) {
            now = now.max(at);
        }
        if !take_at(s, now)? {
            now += Duration::from_micros(7);
        }
    }
    Ok(())
}

/// `poll_at(now)` answered `w`: if that is in the future (or never), every
/// time before it must get the same answer while the state is unchanged.
fn future_answer_holds(s: &dyn Scheduler, now: Instant) -> Result<(), TestCaseError> {
    let w = s.poll_at(now);
    let probes: Vec<Instant> = match w {
        Some(w) if w <= now => return Ok(()),
        Some(w) => vec![
            now + Duration(1),
            Instant(now.0 + (w.0 - now.0) / 2),
            Instant(w.0 - 1),
        ],
        None => vec![
            now + Duration(1),
            now + Duration::from_micros(150),
            now + Duration::from_millis(40),
        ],
    };
    for t in probes.into_iter().filter(|&t| t >= now) {
        prop_assert_eq!(s.poll_at(t), w, "{} asked at {:?} and at {:?}", s.kind(), now, t);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn a_future_poll_at_answer_holds_until_it_is_reached(
        kind in 0..KINDS,
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let mut s = make(kind);
        let mut clock = Clock::default();
        for op in ops {
            let now = clock.step(s.as_mut(), &op);
            if matches!(op, Op::Take { .. }) {
                let _ = s.dequeue(now);
            }
            future_answer_holds(s.as_ref(), now)?;
        }
        drain(s.as_mut(), clock.now, |s, now| {
            let out = s.dequeue(now).is_some();
            future_answer_holds(s, now)?;
            Ok(out)
        })?;
    }
}
