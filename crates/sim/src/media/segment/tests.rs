//! Unit tests of the segment against hand-worked IEEE 802.3 timelines.
//! At 10 Mb/s one bit is 100 ns: preamble 6.4 µs, jam 3.2 µs, IFG 9.6 µs
//! (part 1 6.4 µs), slot 51.2 µs; a 1514-byte frame occupies
//! (1514 + 4 + 8)·8 bits = 1220.8 µs, a minimum frame (64 + 8)·8 = 57.6 µs.

use super::*;

const F1514: u64 = 1_220_800;
const FMIN: u64 = 57_600;
const IFG: u64 = 9_600;
const PRE: u64 = 6_400;
const JAM: u64 = 3_200;

fn seg10(positions: &[u64]) -> Segment {
    Segment::new(SegmentConfig::ethernet(10_000_000, positions.to_vec())).unwrap()
}

fn pkt(uid: u64, len: usize) -> Packet {
    Packet::new(
        vec![0u8; len],
        Meta {
            uid,
            ..Meta::default()
        },
    )
}
use qosnet_core::Meta;

/// Run every event up to `until`, returning the outputs.
fn run(seg: &mut Segment, until: u64) -> Vec<SegOutput> {
    let mut out = Vec::new();
    while let Some(t) = seg.poll_timeout() {
        if t.0 > until {
            break;
        }
        seg.handle_timeout(t);
        out.extend(std::iter::from_fn(|| seg.poll_output()));
    }
    out
}

fn traces(seg: &mut Segment) -> Vec<Trace> {
    std::iter::from_fn(|| seg.poll_trace()).collect()
}

fn done_at(out: &[SegOutput], station: usize) -> Vec<(TxStatus, u64)> {
    out.iter()
        .filter_map(|o| match o {
            SegOutput::TxDone {
                station: s,
                status,
                at,
                ..
            } if *s == station => Some((*status, at.0)),
            _ => None,
        })
        .collect()
}

fn delivered(out: &[SegOutput]) -> Vec<(usize, u64, u64)> {
    out.iter()
        .filter_map(|o| match o {
            SegOutput::Deliver { station, pkt, at } => Some((*station, pkt.meta.uid, at.0)),
            _ => None,
        })
        .collect()
}

#[test]
fn wire_times_follow_framing_and_carrier_extension() {
    let s = seg10(&[0]);
    assert_eq!(s.frame_time(1514).0, F1514);
    assert_eq!(s.frame_time(20).0, FMIN, "runts are padded to 64 bytes");
    assert_eq!(
        (s.slot_time().0, s.ifg().0, s.jam_time().0, s.preamble_time().0),
        (51_200, IFG, JAM, PRE)
    );
    let fast = Segment::new(SegmentConfig::ethernet(100_000_000, vec![0])).unwrap();
    assert_eq!(fast.frame_time(60).0, 5_760);
    let giga = Segment::new(SegmentConfig::ethernet(1_000_000_000, vec![0])).unwrap();
    // 1000 Mb/s half duplex: slot 4096 bits, short frames carrier-extended
    // to 512 bytes, plus 8 bytes of preamble.
    assert_eq!(giga.slot_time().0, 4_096);
    assert_eq!(giga.frame_time(60).0, (512 + 8) * 8);
    assert_eq!(giga.frame_time(1514).0, (1518 + 8) * 8);
}

#[test]
fn lone_station_sends_back_to_back_at_line_rate() {
    let mut s = seg10(&[0, 1_000]);
    s.enable_trace(1_000);
    let t0 = 1_000;
    s.handle_send(Instant(t0), 0, pkt(1, 1514)).unwrap();
    let mut out = Vec::new();
    let mut next = 2;
    // Hand the next frame the instant the NIC is done, ten times.
    while let Some(t) = s.poll_timeout() {
        s.handle_timeout(t);
        let new: Vec<_> = std::iter::from_fn(|| s.poll_output()).collect();
        for o in &new {
            if let SegOutput::TxDone { station: 0, at, .. } = o {
                if next <= 10 {
                    s.handle_send(*at, 0, pkt(next, 1514)).unwrap();
                    next += 1;
                }
            }
        }
        out.extend(new);
    }
    let done = done_at(&out, 0);
    assert_eq!(done.len(), 10);
    for (k, (status, at)) in done.iter().enumerate() {
        let k = k as u64;
        assert_eq!(*status, TxStatus::Sent { collisions: 0 });
        // Frame k ends after k+1 frames and k gaps.
        assert_eq!(*at, t0 + (k + 1) * F1514 + k * IFG);
    }
    let starts: Vec<u64> = traces(&mut s)
        .iter()
        .filter(|t| matches!(t.kind, TraceKind::Start { .. }))
        .map(|t| t.at.0)
        .collect();
    assert_eq!(starts[0], t0, "an idle bus is taken at once");
    assert!(starts.windows(2).all(|w| w[1] - w[0] == F1514 + IFG));
    // Station 1 gets every frame one propagation delay after its end;
    // the sender never hears itself.
    let d = delivered(&out);
    assert_eq!(d.len(), 10);
    for (k, (st, uid, at)) in d.iter().enumerate() {
        assert_eq!((*st, *uid, *at), (1, k as u64 + 1, done[k].1 + 1_000));
    }
    let c = &s.stats().stations[0];
    assert_eq!(
        (c.attempts, c.frames_sent, c.collisions, c.deferrals, c.bytes_sent),
        (10, 10, 0, 0, 15_140)
    );
    assert_eq!(s.stats().busy_ns, 10 * F1514);
    assert_eq!(s.stats().collision_ns, 0);
    assert_eq!(s.in_flight(), 0);
}

#[test]
fn station_waits_out_the_gap_after_carrier_it_saw() {
    // Station 1 sits 1 µs from station 0; station 0's frame leaves station
    // 1 at F + 1000. A frame handed to 1 within the following IFG goes at
    // F + 1000 + IFG; one handed after that goes at once.
    let mut s = seg10(&[0, 1_000]);
    s.enable_trace(100);
    s.handle_send(Instant(0), 0, pkt(1, 1514)).unwrap();
    run(&mut s, F1514 + 1_000 + 4_000);
    s.handle_send(Instant(F1514 + 1_000 + 4_000), 1, pkt(2, 60))
        .unwrap();
    let out = run(&mut s, u64::MAX);
    assert_eq!(
        done_at(&out, 1),
        vec![(TxStatus::Sent { collisions: 0 }, F1514 + 1_000 + IFG + FMIN)]
    );
    assert_eq!(
        s.stats().stations[1].deferrals,
        1,
        "it waited for another station's gap"
    );

    let mut s = seg10(&[0, 1_000]);
    s.handle_send(Instant(0), 0, pkt(1, 1514)).unwrap();
    let late = F1514 + 1_000 + IFG + 1;
    run(&mut s, late);
    s.handle_send(Instant(late), 1, pkt(2, 60)).unwrap();
    let out = run(&mut s, u64::MAX);
    assert_eq!(
        done_at(&out, 1),
        vec![(TxStatus::Sent { collisions: 0 }, late + FMIN)]
    );
    assert_eq!(s.stats().stations[1].deferrals, 0);
}

#[test]
fn stations_starting_within_the_propagation_delay_collide() {
    // 10 µs apart; A at 0, B at 5 µs (A's signal reaches B at 10 µs).
    let d = 10_000;
    let mut s = seg10(&[0, d]);
    s.enable_trace(1_000);
    s.handle_send(Instant(0), 0, pkt(1, 1514)).unwrap();
    run(&mut s, 5_000);
    s.handle_send(Instant(5_000), 1, pkt(2, 1514)).unwrap();
    let out = run(&mut s, u64::MAX);
    let tr = traces(&mut s);
    let first = |st: usize, f: &dyn Fn(&TraceKind) -> bool| {
        tr.iter().find(|t| t.station == st && f(&t.kind)).unwrap().at.0
    };
    let coll = |k: &TraceKind| matches!(k, TraceKind::Collision { .. });
    let end = |k: &TraceKind| matches!(k, TraceKind::End { aborted: true });
    // B hears A at 10 µs, still in its preamble: it completes the preamble
    // (6.4 µs after its start) and jams 3.2 µs.
    assert_eq!(first(1, &coll), d);
    assert_eq!(first(1, &end), 5_000 + PRE + JAM);
    // A hears B at 5 + 10 µs and jams at once.
    assert_eq!(first(0, &coll), 5_000 + d);
    assert_eq!(first(0, &end), 5_000 + d + JAM);
    // Each backs off r·slot after its first collision, r in {0, 1}.
    for st in 0..2 {
        let b = tr
            .iter()
            .find(|t| t.station == st && matches!(t.kind, TraceKind::Backoff { .. }))
            .unwrap();
        let TraceKind::Backoff { slots, until } = b.kind else {
            unreachable!()
        };
        assert!(slots < 2);
        assert_eq!(until.0, first(st, &end) + slots * 51_200);
    }
    // Both frames get through in the end, after at least one collision,
    // and each station saw the other's fragment(s), never delivered.
    for st in 0..2 {
        let done = done_at(&out, st);
        assert_eq!(done.len(), 1);
        assert!(matches!(done[0].0, TxStatus::Sent { collisions } if collisions >= 1));
        let c = &s.stats().stations[st];
        assert!(c.collisions >= 1 && c.fragments_seen >= 1);
        assert_eq!(c.attempts, c.collisions + 1);
    }
    let d = delivered(&out);
    assert_eq!(d.len(), 2);
    assert!(d.contains(&(1, 1, done_at(&out, 0)[0].1 + 10_000)));
    assert!(s.stats().collision_ns > 0);
}

#[test]
fn station_that_heard_the_carrier_defers() {
    let d = 10_000;
    let mut s = seg10(&[0, d]);
    s.handle_send(Instant(0), 0, pkt(1, 1514)).unwrap();
    run(&mut s, 15_000);
    s.handle_send(Instant(15_000), 1, pkt(2, 1514)).unwrap();
    let out = run(&mut s, u64::MAX);
    // B waits for A's carrier to leave it, then the gap, then sends.
    assert_eq!(
        done_at(&out, 1),
        vec![(TxStatus::Sent { collisions: 0 }, F1514 + d + IFG + F1514)]
    );
    let c = &s.stats().stations[1];
    assert_eq!((c.deferrals, c.collisions), (1, 0));
    assert_eq!(delivered(&out).len(), 2);
}

#[test]
fn stations_waiting_on_the_same_frame_all_collide_at_its_end() {
    // 1-persistence with the two-part gap: B and C both defer to A; B is
    // nearer and starts first, but its signal reaches C exactly when C's
    // gap ends, in part 2 where carrier is ignored: they collide instead
    // of the nearest station always winning.
    let mut s = seg10(&[0, 1_000, 2_000]);
    s.enable_trace(1_000);
    s.handle_send(Instant(0), 0, pkt(1, 1514)).unwrap();
    run(&mut s, 100_000);
    s.handle_send(Instant(100_000), 1, pkt(2, 60)).unwrap();
    s.handle_send(Instant(100_000), 2, pkt(3, 60)).unwrap();
    run(&mut s, F1514 + 100_000);
    let tr = traces(&mut s);
    let starts: Vec<(usize, u64)> = tr
        .iter()
        .filter(|t| matches!(t.kind, TraceKind::Start { attempt: 1 }) && t.station > 0)
        .map(|t| (t.station, t.at.0))
        .collect();
    assert_eq!(starts, vec![(1, F1514 + 1_000 + IFG), (2, F1514 + 2_000 + IFG)]);
    assert_eq!(s.stats().stations[1].collisions, 1);
    assert_eq!(s.stats().stations[2].collisions, 1);
    assert_eq!(
        (s.stats().stations[1].deferrals, s.stats().stations[2].deferrals),
        (1, 1)
    );
}

#[test]
fn colocated_stations_starting_together_collide() {
    let mut s = seg10(&[500, 500]);
    s.handle_send(Instant(0), 0, pkt(1, 60)).unwrap();
    s.handle_send(Instant(0), 1, pkt(2, 60)).unwrap();
    run(&mut s, 1);
    assert_eq!(
        (s.stats().stations[0].collisions, s.stats().stations[1].collisions),
        (1, 1)
    );
}

#[test]
fn sixteen_attempts_then_excessive_collisions() {
    // Backoff limit 0: every backoff is zero slots, so two stations retry
    // in lock step and collide on every attempt.
    let cfg = SegmentConfig {
        backoff_limit: 0,
        ..SegmentConfig::ethernet(10_000_000, vec![0, 1_000])
    };
    let mut s = Segment::new(cfg).unwrap();
    s.enable_trace(10_000);
    s.handle_send(Instant(0), 0, pkt(1, 1514)).unwrap();
    s.handle_send(Instant(0), 1, pkt(2, 1514)).unwrap();
    let out = run(&mut s, u64::MAX);
    let tr = traces(&mut s);
    for st in 0..2 {
        let done = done_at(&out, st);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].0, TxStatus::ExcessiveCollisions);
        let c = &s.stats().stations[st];
        assert_eq!(
            (c.attempts, c.collisions, c.excessive_collisions, c.frames_sent),
            (16, 16, 1, 0)
        );
        assert_eq!(c.fragments_seen, 16);
        let attempts: Vec<u32> = traces_of(&tr, st);
        assert_eq!(attempts, (1..=16).collect::<Vec<_>>());
    }
    assert!(delivered(&out).is_empty());
    assert_eq!(s.in_flight(), 0);
    // The NIC is free again.
    assert!(s.handle_send(Instant(10_000_000), 0, pkt(3, 60)).is_ok());
}

fn traces_of(tr: &[Trace], station: usize) -> Vec<u32> {
    tr.iter()
        .filter(|t| t.station == station)
        .filter_map(|t| match t.kind {
            TraceKind::Start { attempt } => Some(attempt),
            _ => None,
        })
        .collect()
}

#[test]
fn a_second_frame_is_refused_not_queued() {
    let mut s = seg10(&[0, 100]);
    s.handle_send(Instant(0), 0, pkt(1, 60)).unwrap();
    let r = s.handle_send(Instant(10), 0, pkt(2, 60)).unwrap_err();
    assert_eq!((r.reason, r.pkt.meta.uid), (RefuseReason::NicBusy, 2));
    let r = s.handle_send(Instant(10), 7, pkt(3, 60)).unwrap_err();
    assert_eq!(r.reason, RefuseReason::NoSuchStation);
    assert_eq!(
        (s.stats().stations[0].refused, s.stats().refused_no_station),
        (1, 1)
    );
    assert_eq!(s.stats().stations[0].handed, 1);
    assert_eq!(s.in_flight(), 1);
    let out = run(&mut s, u64::MAX);
    assert_eq!(done_at(&out, 0).len(), 1);
    // Only the accepted frame was sent.
    assert_eq!(delivered(&out), vec![(1, 1, FMIN + 100)]);
    assert!(s.handle_send(Instant(FMIN), 0, pkt(4, 60)).is_ok());
}

#[test]
fn frame_overlapped_beyond_the_colliding_station_is_lost_there_only() {
    // A bus longer than the slot allows: A at 0, B at 30 µs, C at 60 µs,
    // D at 80 µs. A sends a minimum frame at 0; C starts at 59 µs, just
    // before A's signal reaches it (A has already finished sending), and
    // aborts. C's fragment reaches A only after A finished: A reports success, B (which C's signal
    // reaches after A's frame passed) receives the frame, D (which gets
    // C's fragment during A's frame) does not.
    let mut s = seg10(&[0, 30_000, 60_000, 80_000]);
    s.handle_send(Instant(0), 0, pkt(1, 60)).unwrap();
    let mut out = run(&mut s, 59_000);
    s.handle_send(Instant(59_000), 2, pkt(2, 60)).unwrap();
    out.extend(run(&mut s, 150_000));
    assert_eq!(done_at(&out, 0), vec![(TxStatus::Sent { collisions: 0 }, FMIN)]);
    let got: Vec<(usize, u64)> = delivered(&out)
        .iter()
        .filter(|d| d.1 == 1)
        .map(|d| (d.0, d.2))
        .collect();
    assert_eq!(got, vec![(1, FMIN + 30_000)]);
    assert_eq!(
        s.stats().stations[3].fragments_seen,
        2,
        "A's overlapped frame and C's fragment"
    );
    assert_eq!(s.stats().stations[2].collisions, 1);
}

#[test]
fn collision_after_the_slot_is_late() {
    // 100 µs between A and B: B starts before A's signal arrives; A hears
    // B long after its first slot.
    let mut s = seg10(&[0, 100_000]);
    s.handle_send(Instant(0), 0, pkt(1, 1514)).unwrap();
    run(&mut s, 99_000);
    s.handle_send(Instant(99_000), 1, pkt(2, 1514)).unwrap();
    run(&mut s, 300_000);
    let (a, b) = (&s.stats().stations[0], &s.stats().stations[1]);
    assert_eq!((a.collisions, a.late_collisions), (1, 1));
    assert_eq!((b.collisions, b.late_collisions), (1, 0));
}

#[test]
fn backoff_draws_stay_in_the_truncated_window() {
    // Eight stations, saturated with minimum frames: many collisions.
    let mut s = Segment::new(SegmentConfig {
        seed: 9,
        ..SegmentConfig::ethernet(10_000_000, vec![0; 8])
    })
    .unwrap();
    s.enable_trace(1 << 20);
    let mut uid = 0;
    for st in 0..8 {
        uid += 1;
        s.handle_send(Instant(0), st, pkt(uid, 60)).unwrap();
    }
    let mut last_coll = [0u32; 8];
    let mut seen = std::collections::BTreeMap::<u32, Vec<u64>>::new();
    while let Some(t) = s.poll_timeout() {
        if t.0 > 500_000_000 {
            break;
        }
        s.handle_timeout(t);
        while let Some(o) = s.poll_output() {
            if let SegOutput::TxDone { station, at, .. } = o {
                uid += 1;
                s.handle_send(at, station, pkt(uid, 60)).unwrap();
            }
        }
        for tr in traces(&mut s) {
            match tr.kind {
                TraceKind::Collision { collisions, .. } => last_coll[tr.station] = collisions,
                TraceKind::Backoff { slots, .. } => {
                    let n = last_coll[tr.station];
                    assert!(slots < 1 << n.min(10), "r = {slots} after collision {n}");
                    seen.entry(n).or_default().push(slots);
                }
                _ => {}
            }
        }
    }
    assert_eq!(s.stats().trace_dropped, 0);
    // The windows are used whole: after the first and second collisions
    // both ends of the window are drawn.
    for n in 1..=2u32 {
        let v = &seen[&n];
        assert!(
            v.contains(&0) && v.contains(&((1 << n) - 1)),
            "n = {n}: {} draws",
            v.len()
        );
    }
}

#[test]
fn same_seed_same_history() {
    let go = || {
        let mut s = Segment::new(SegmentConfig {
            seed: 5,
            ..SegmentConfig::ethernet(10_000_000, vec![0, 700, 1_900])
        })
        .unwrap();
        s.enable_trace(1 << 16);
        for st in 0..3 {
            s.handle_send(Instant(st as u64 * 300), st, pkt(st as u64, 100))
                .unwrap();
        }
        let out = run(&mut s, u64::MAX);
        (format!("{out:?}"), traces(&mut s), s.stats().clone())
    };
    assert_eq!(go(), go());
}

#[test]
fn bad_configurations_are_refused() {
    let ok = SegmentConfig::ethernet(10_000_000, vec![0, 100]);
    let bad = |f: &dyn Fn(&mut SegmentConfig)| {
        let mut c = ok.clone();
        f(&mut c);
        Segment::new(c).err()
    };
    assert!(Segment::new(ok.clone()).is_ok());
    assert!(bad(&|c| c.positions_ns.clear()).unwrap().contains("no stations"));
    assert!(bad(&|c| c.rate_bps = 0).is_some());
    assert!(bad(&|c| c.slot_bits = 0).is_some());
    assert!(bad(&|c| c.jam_bits = 0).is_some());
    assert!(bad(&|c| c.attempt_limit = 0).is_some());
    assert!(bad(&|c| c.backoff_limit = 31).is_some());
    assert!(bad(&|c| c.positions_ns[1] = MAX_POSITION_NS + 1).is_some());
    assert!(bad(&|c| c.positions_ns = vec![0; MAX_STATIONS + 1]).is_some());
}

#[test]
fn time_going_backwards_is_clamped() {
    let mut s = seg10(&[0, 100]);
    s.handle_send(Instant(1_000), 0, pkt(1, 60)).unwrap();
    s.handle_timeout(Instant(1_000));
    // A stale `now` is read as the segment's current time.
    s.handle_timeout(Instant(10));
    let out = run(&mut s, u64::MAX);
    assert_eq!(
        done_at(&out, 0),
        vec![(TxStatus::Sent { collisions: 0 }, 1_000 + FMIN)]
    );
}

#[test]
fn a_signal_is_sensed_only_after_the_instant_it_arrives() {
    // B decides to send at the very nanosecond A's first bit reaches it:
    // carrier sense has not asserted yet, so B sends and both collide.
    let mut s = seg10(&[0, 1_000]);
    s.handle_send(Instant(0), 0, pkt(1, 60)).unwrap();
    run(&mut s, 999);
    s.handle_send(Instant(1_000), 1, pkt(2, 60)).unwrap();
    run(&mut s, 1_000);
    assert_eq!(
        (s.stats().stations[0].collisions, s.stats().stations[1].collisions),
        (0, 1)
    );
    run(&mut s, 2_000);
    assert_eq!(s.stats().stations[0].collisions, 1);
    // One nanosecond later it would have deferred.
    let mut s = seg10(&[0, 1_000]);
    s.handle_send(Instant(0), 0, pkt(1, 60)).unwrap();
    run(&mut s, 1_000);
    s.handle_send(Instant(1_001), 1, pkt(2, 60)).unwrap();
    let out = run(&mut s, u64::MAX);
    assert_eq!(s.stats().stations[1].collisions, 0);
    assert_eq!(
        done_at(&out, 1),
        vec![(TxStatus::Sent { collisions: 0 }, FMIN + 1_000 + IFG + FMIN)]
    );
}
