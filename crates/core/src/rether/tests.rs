//! Scenario and property tests of RETHER stations on the test bus
//! (`harness.rs`): the paper's mechanisms end to end, failures, and the
//! acceptance properties.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::harness::{Bus, FaultAction};
use super::station::{Ctr, ModeKind, SessionEvent, VisitKind};
use super::wire::FrameType;
use super::{NrtPolicy, SendState, SessionId, StationId};
use crate::time::{Duration, Instant};
use crate::wire::MacAddr;

fn ms(n: u64) -> Instant {
    Instant(n * 1_000_000)
}

/// RT visits of `s`, in order.
fn rt_visits(bus: &Bus, s: SessionId) -> Vec<Instant> {
    bus.visits()
        .into_iter()
        .filter(|(_, v)| matches!(v.kind, VisitKind::Rt { session, .. } if session == s))
        .map(|(_, v)| v.at)
        .collect()
}

/// Open `from` → `to` with `bytes` per TRT on both ends, feed it.
fn open(bus: &mut Bus, from: StationId, to: StationId, bytes: u32) -> SessionId {
    let s = bus.st(from).open_sender(to, bytes, 2).unwrap();
    bus.st(to).open_receiver(s, 4).unwrap();
    bus.slots[Bus::idx(from)].feed = true;
    s
}

#[test]
fn one_session_switches_to_rether_and_is_visited_every_trt() {
    let n = 4;
    let mut bus = Bus::new(n, 1, |id| Bus::config(id, n));
    let s = open(&mut bus, 1, 2, 6250);
    assert_eq!(
        bus.admit_and_wait(1, s, Duration::from_millis(100)),
        SendState::Admitted { start_cycle: 1 }
    );
    // Every other station acknowledged, after which station 1 made the token.
    assert_eq!(bus.frames(FrameType::SwitchAck).len(), n - 1);
    assert_eq!(bus.st(1).counter(Ctr::TokensCreated), 1);
    bus.run_until(ms(1000));
    for id in 1..=n as StationId {
        assert_eq!(bus.st(id).mode(), ModeKind::Rether, "station {id}");
    }
    let trt = bus.st(1).config().trt;
    let v = rt_visits(&bus, s);
    assert!(v.len() >= 28, "{} visits", v.len());
    for w in v.windows(2) {
        assert_eq!(w[1] - w[0], trt, "RT visit interval");
    }
    // Every unit arrived whole, in order, within the RT visit that sent it.
    let got = &bus.slots[Bus::idx(2)].got;
    assert!(got.len() >= 27);
    let tht = bus.slots[0].st.config().timing.tht_rt(6250);
    for (k, g) in got.iter().enumerate() {
        assert!(g.complete && g.bytes == 6250 && g.session == s);
        assert_eq!(g.number, k as u32);
        assert!(g.at > v[k] && g.at - v[k] <= tht, "unit {k} at {:?}", g.at);
    }
    assert_eq!(bus.max_holders, 1);
}

/// Switch-acknowledgement frames on the wire as (sender, initiator).
fn acks(bus: &Bus) -> Vec<(StationId, StationId)> {
    bus.frames(FrameType::SwitchAck)
        .iter()
        .filter_map(|r| match r.parsed() {
            Some(super::wire::Frame::SwitchAck(a)) => Some((a.sender, a.initiator)),
            _ => None,
        })
        .collect()
}

#[test]
fn multiple_initiators_only_the_smallest_id_completes() {
    // §2.2.2's example: Node 1 and Node 3 are initiators and Node 3's
    // switch message is on the wire first. Everybody but Node 1
    // acknowledges Node 3; then Node 1's message goes out, all nodes,
    // Node 3 included, acknowledge it, and Node 1 completes the switch.
    let n = 5;
    let mut bus = Bus::new(n, 7, |id| Bus::config(id, n));
    let s3 = open(&mut bus, 3, 4, 3000);
    let s1 = open(&mut bus, 1, 2, 3000);
    bus.run_until(ms(10));
    bus.st(3).admit(ms(10), s3).unwrap();
    bus.at(ms(10), |_| {});
    bus.run_until(ms(10));
    // 20 µs later, while Node 3's message is still on the wire (67 µs),
    // Node 1 becomes an initiator too: its message reaches its NIC and can
    // no longer be withdrawn.
    let t1 = ms(10) + Duration::from_micros(20);
    bus.at(t1, move |b| b.st(1).admit(t1, s1).unwrap());
    bus.run_until(ms(200));
    let a = acks(&bus);
    let for3: BTreeSet<StationId> = a.iter().filter(|x| x.1 == 3).map(|x| x.0).collect();
    let for1: BTreeSet<StationId> = a.iter().filter(|x| x.1 == 1).map(|x| x.0).collect();
    assert_eq!(for3, [2, 4, 5].into(), "all but Node 1 acknowledge Node 3");
    assert_eq!(for1, [2, 3, 4, 5].into(), "everybody acknowledges Node 1");
    assert_eq!(bus.st(1).counter(Ctr::TokensCreated), 1);
    assert_eq!(bus.st(3).counter(Ctr::TokensCreated), 0);
    assert_eq!(bus.st(3).counter(Ctr::InitiatorYielded), 1);
    assert!(
        bus.st(1).counter(Ctr::SwitchIgnored) >= 1,
        "Node 1 ignored Node 3"
    );
    // Node 3's request is decided when the token visits it.
    assert!(matches!(
        bus.st(3).session_state(s3),
        Some(SendState::Admitted { .. })
    ));
    assert!(matches!(
        bus.st(1).session_state(s1),
        Some(SendState::Admitted { .. })
    ));
    assert_eq!(bus.max_holders, 1);
}

#[test]
fn initiator_declares_silent_nodes_dead_after_retries() {
    let n = 4;
    let mut bus = Bus::new(n, 3, |id| Bus::config(id, n));
    bus.crash(4);
    let s = open(&mut bus, 1, 2, 3000);
    let t0 = bus.now;
    assert!(matches!(
        bus.admit_and_wait(1, s, Duration::from_millis(200)),
        SendState::Admitted { .. }
    ));
    let cfg = bus.st(1).config().clone();
    let st = bus.st(1);
    assert_eq!(st.counter(Ctr::SwitchRetries), cfg.switch_retries as u64);
    assert_eq!(st.counter(Ctr::SwitchNonResponders), 1);
    // The switch took the retries: (retries + 1) acknowledgement timeouts.
    let created = bus.slots[0]
        .events
        .iter()
        .find_map(|(_, e)| match e {
            SessionEvent::TokenCreated { switch_time, .. } => Some(*switch_time),
            _ => None,
        })
        .unwrap();
    assert!(created >= Duration(cfg.switch_ack_timeout.0 * (cfg.switch_retries as u64 + 1)));
    assert!(bus.now - t0 >= created);
    bus.run_until(ms(500));
    // Node 4 is on the dead list and never visited.
    let t = bus.st(2).token().unwrap().clone();
    assert!(t.nodes.iter().any(|e| e.id == 4 && !e.alive));
    assert!(bus.tokens().iter().all(|(_, t)| t.to != 4));
    assert!(bus.visits().iter().all(|(id, _)| *id != 4));
}

#[test]
fn figure2_visit_sequence_on_the_bus() {
    // Figure 2: eleven nodes, RT set {1, 3, 6}, every node backlogged with
    // 1000-byte frames, one packet per NRT visit. TRT leaves room for six
    // and a half NRT visits after the RT visits, so each cycle serves six
    // nodes and refuses the seventh, which goes first next cycle.
    let n = 11;
    let m = super::TimingModel::paper_1995();
    let h = m.tht_nrt([1000]);
    let rt = m.tht_rt(6250);
    let trt = Duration(3 * rt.0 + 6 * h.0 + h.0 / 2);
    let mut bus = Bus::new(n, 11, |id| {
        let mut c = Bus::config(id, n);
        c.trt = trt;
        c.t_nrt = Duration::from_millis(3);
        c
    });
    let mut sessions = Vec::new();
    for (from, to) in [(1, 2), (3, 4), (6, 5)] {
        let s = open(&mut bus, from, to, 6250);
        assert!(matches!(
            bus.admit_and_wait(from, s, Duration::from_millis(500)),
            SendState::Admitted { .. }
        ));
        sessions.push(s);
    }
    for i in 0..n {
        bus.slots[i].nrt_backlog = 2;
        bus.slots[i].nrt_len = 1000;
    }
    // Let every station's application fill its queue.
    let t = bus.now;
    bus.at(t, |_| {});
    bus.run_until(bus.now + Duration(trt.0 * 30));
    // Visits as the paper lists them: RT and NRT visits (a refused NRT
    // visit is a visit), cycle starts left out.
    let seq: Vec<(StationId, VisitKind)> = bus
        .visits()
        .into_iter()
        .filter(|(_, v)| !matches!(v.kind, VisitKind::CycleStart { .. }))
        .map(|(id, v)| (id, v.kind))
        .collect();
    let want: Vec<StationId> = vec![1, 3, 6, 1, 2, 3, 4, 5, 6, 7, 1, 3, 6, 7, 8, 9, 10, 11, 1, 2];
    // Find a cycle whose NRT round starts at node 1, after the warm-up.
    let start = (10..seq.len() - 20)
        .find(|&i| {
            matches!(seq[i].1, VisitKind::Rt { session, .. } if session == sessions[0])
                && seq[i + 3].0 == 1
                && matches!(seq[i + 3].1, VisitKind::Nrt { .. })
        })
        .expect("a cycle whose NRT round starts at node 1");
    let got: Vec<StationId> = seq[start..start + 20].iter().map(|x| x.0).collect();
    assert_eq!(got, want);
    assert!(
        matches!(seq[start + 9].1, VisitKind::NrtRefused),
        "node 7 is refused"
    );
    assert!(
        matches!(seq[start + 19].1, VisitKind::NrtRefused),
        "node 2 is refused"
    );
}

#[test]
fn a_node_with_two_sessions_is_visited_twice_per_cycle() {
    let n = 3;
    let mut bus = Bus::new(n, 5, |id| Bus::config(id, n));
    let a = open(&mut bus, 1, 2, 4000);
    let b = open(&mut bus, 1, 3, 2000);
    bus.admit_and_wait(1, a, Duration::from_millis(100));
    bus.admit_and_wait(1, b, Duration::from_millis(100));
    bus.run_until(bus.now + Duration::from_millis(600));
    let trt = bus.st(1).config().trt;
    for s in [a, b] {
        let v = rt_visits(&bus, s);
        assert!(v.len() > 10);
        assert!(v.windows(2).all(|w| w[1] - w[0] == trt));
    }
    // The second visit starts one THT_RT after the first.
    let (va, vb) = (rt_visits(&bus, a), rt_visits(&bus, b));
    let tht_a = bus.st(1).config().timing.tht_rt(4000);
    assert_eq!(vb[vb.len() - 1] - va[va.len() - 1], tht_a);
    assert!(bus.slots[1].got.iter().all(|g| g.complete && g.bytes == 4000));
    assert!(bus.slots[2].got.iter().all(|g| g.complete && g.bytes == 2000));
}

#[test]
fn admission_refusal_names_the_figures_and_the_last_close_switches_back() {
    let n = 3;
    let mut bus = Bus::new(n, 9, |id| Bus::config(id, n));
    let cfg = bus.st(1).config().clone();
    // 40 KB per TRT cannot fit in 33.33 ms at 10 Mb/s.
    let big = open(&mut bus, 1, 2, 40_000);
    let st = bus.admit_and_wait(1, big, Duration::from_millis(200));
    let SendState::Refused(super::cycle::AdmitError::Refused(r)) = st else {
        panic!("{st:?}");
    };
    assert_eq!(r.reserved, Duration::ZERO);
    assert_eq!(r.requested, cfg.timing.tht_rt(40_000));
    assert_eq!((r.t_nrt, r.trt), (cfg.t_nrt, cfg.trt));
    assert!(r.to_string().contains("eq. 3"));
    // Nothing admitted: the initiator destroyed the token at once.
    bus.run_until(bus.now + Duration::from_millis(20));
    assert_eq!(
        bus.frames(FrameType::SwitchToCsma).len(),
        cfg.csma_repeats as usize
    );
    for id in 1..=3 {
        assert_eq!(bus.st(id).mode(), ModeKind::Csma);
    }
    // A session that fits, then one that no longer does.
    let now = bus.now;
    bus.st(1).close(now, big).unwrap();
    let s1 = open(&mut bus, 1, 2, 20_000);
    bus.admit_and_wait(1, s1, Duration::from_millis(200));
    let s2 = open(&mut bus, 2, 3, 12_000);
    let st = bus.admit_and_wait(2, s2, Duration::from_millis(200));
    let SendState::Refused(super::cycle::AdmitError::Refused(r)) = st else {
        panic!("{st:?}");
    };
    assert_eq!(r.reserved, cfg.timing.tht_rt(20_000));
    assert_eq!(bus.st(2).mode(), ModeKind::Rether);
    // A smaller one fits and starts in the cycle after its admission.
    let now = bus.now;
    bus.st(2).close(now, s2).unwrap();
    let s3 = open(&mut bus, 2, 3, 2_000);
    let SendState::Admitted { start_cycle } = bus.admit_and_wait(2, s3, Duration::from_millis(200)) else {
        panic!()
    };
    bus.run_until(bus.now + Duration::from_millis(200));
    let first = bus
        .visits()
        .into_iter()
        .find(|(_, v)| matches!(v.kind, VisitKind::Rt { session, .. } if session == s3))
        .unwrap();
    assert_eq!(first.1.cycle, start_cycle);
    // Close both: removed at the next visit; the last one destroys the token.
    let now = bus.now;
    bus.st(2).close(now, s3).unwrap();
    bus.run_until(now + Duration::from_millis(100));
    assert_eq!(bus.st(2).mode(), ModeKind::Rether);
    assert!(bus
        .st(1)
        .token()
        .unwrap()
        .sessions
        .iter()
        .all(|e| e.session != s3));
    let now = bus.now;
    bus.st(1).close(now, s1).unwrap();
    bus.run_until(now + Duration::from_millis(100));
    for id in 1..=3 {
        assert_eq!(bus.st(id).mode(), ModeKind::Csma, "station {id}");
    }
    assert!(bus.slots[0]
        .events
        .iter()
        .any(|(_, e)| matches!(e, SessionEvent::Closed { session, .. } if *session == s1)));
    assert_eq!(bus.max_holders, 1);
}

/// Largest gap between consecutive token frames on the wire in [from, to).
fn max_token_gap(bus: &Bus, from: Instant, to: Instant) -> Duration {
    let t: Vec<Instant> = bus
        .tokens()
        .into_iter()
        .map(|(at, _)| at)
        .filter(|&at| at >= from && at < to)
        .collect();
    t.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(Duration::ZERO)
}

fn total(bus: &mut Bus, c: Ctr) -> u64 {
    (1..=bus.slots.len() as StationId)
        .map(|id| bus.st(id).counter(c))
        .sum()
}

/// The failure-detection bound of §2.4 with retransmissions: the longest
/// acknowledgement timer, once per try, plus frame times.
fn detection_bound(cfg: &super::StationConfig) -> Duration {
    let hold = super::timing::max_hold(cfg.trt, cfg.t_nrt, cfg.ack_margin);
    Duration(hold.0 * (cfg.pass_retries as u64 + 1)) + Duration::from_millis(5)
}

/// After `settle`, every RT visit interval of `s` is exactly TRT.
fn intervals_settle(bus: &Bus, s: SessionId, settle: Instant, trt: Duration) {
    let v: Vec<Instant> = rt_visits(bus, s).into_iter().filter(|&t| t >= settle).collect();
    assert!(v.len() >= 5, "{s}: {} visits after {:?}", v.len(), settle);
    for w in v.windows(2) {
        assert_eq!(w[1] - w[0], trt, "{s} at {:?}", w[0]);
    }
}

#[test]
fn dead_nrt_successor_goes_on_the_dead_list() {
    let n = 5;
    let mut bus = Bus::new(n, 21, |id| Bus::config(id, n));
    let s = open(&mut bus, 1, 2, 6250);
    bus.admit_and_wait(1, s, Duration::from_millis(100));
    bus.run_until(ms(300));
    bus.crash(4);
    bus.run_until(ms(1200));
    let cfg = bus.st(1).config().clone();
    assert_eq!(total(&mut bus, Ctr::SuccessorsDead), 1);
    let last = bus.tokens().last().unwrap().1.clone();
    assert!(last.nodes.iter().any(|e| e.id == 4 && !e.alive));
    let dead_at = bus
        .tokens()
        .into_iter()
        .find(|(_, t)| t.nodes.iter().any(|e| e.id == 4 && !e.alive))
        .unwrap()
        .0;
    assert!(dead_at - ms(300) <= detection_bound(&cfg), "{:?}", dead_at);
    assert!(bus
        .tokens()
        .iter()
        .filter(|(at, _)| *at > dead_at)
        .all(|(_, t)| t.to != 4));
    assert!(max_token_gap(&bus, ms(300), ms(1200)) <= detection_bound(&cfg));
    intervals_settle(&bus, s, dead_at + cfg.trt + cfg.trt, cfg.trt);
    assert_eq!(bus.max_holders, 1);
}

#[test]
fn rt_sender_crashing_while_holding_the_token_loses_its_reservation_only() {
    let n = 4;
    let mut bus = Bus::new(n, 22, |id| Bus::config(id, n));
    let a = open(&mut bus, 1, 2, 6250);
    let b = open(&mut bus, 3, 4, 6250);
    bus.admit_and_wait(1, a, Duration::from_millis(100));
    bus.admit_and_wait(3, b, Duration::from_millis(200));
    bus.run_until(ms(300));
    bus.run_until_cond(Duration::from_micros(50), Duration::from_millis(100), |b| {
        b.st(3).holds_token()
    });
    let crash = bus.now;
    bus.crash(3);
    bus.run_until(crash + Duration::from_millis(800));
    let cfg = bus.st(1).config().clone();
    assert_eq!(total(&mut bus, Ctr::SuccessorsDead), 1);
    assert_eq!(
        total(&mut bus, Ctr::TokenRegenerations),
        0,
        "the acknowledgement timer handled it"
    );
    let t = bus.st(1).token().unwrap().clone();
    assert!(
        t.sessions.iter().all(|e| e.session != b),
        "its reservation is gone"
    );
    assert!(t.sessions.iter().any(|e| e.session == a), "the other one stays");
    assert!(max_token_gap(&bus, crash, bus.now) <= detection_bound(&cfg));
    intervals_settle(&bus, a, crash + detection_bound(&cfg) + cfg.trt, cfg.trt);
    assert_eq!(bus.max_holders, 1);
}

#[test]
fn a_lost_token_frame_is_retransmitted_and_nobody_is_declared_dead() {
    let n = 4;
    let mut bus = Bus::new(n, 23, |id| Bus::config(id, n));
    let s = open(&mut bus, 1, 2, 6250);
    bus.admit_and_wait(1, s, Duration::from_millis(100));
    bus.run_until(ms(300));
    bus.fault(1, FaultAction::Drop, |f| {
        f.from == 2 && f.kind() == Some(FrameType::Token)
    });
    bus.run_until(ms(1000));
    let cfg = bus.st(1).config().clone();
    assert_eq!(total(&mut bus, Ctr::TokenRetransmits), 1);
    assert_eq!(total(&mut bus, Ctr::SuccessorsDead), 0);
    assert_eq!(total(&mut bus, Ctr::TokenRegenerations), 0);
    let t = bus.st(1).token().unwrap().clone();
    assert!(t.nodes.iter().all(|e| e.alive));
    assert_eq!(bus.max_holders, 1);
    intervals_settle(&bus, s, ms(300) + detection_bound(&cfg), cfg.trt);
}

#[test]
fn a_corrupted_token_frame_is_counted_and_retransmitted() {
    let n = 4;
    let mut bus = Bus::new(n, 24, |id| Bus::config(id, n));
    let s = open(&mut bus, 1, 2, 6250);
    bus.admit_and_wait(1, s, Duration::from_millis(100));
    bus.run_until(ms(300));
    bus.fault(1, FaultAction::Corrupt, |f| {
        f.from == 3 && f.kind() == Some(FrameType::Token)
    });
    bus.run_until(ms(1000));
    let bad: u64 = (1..=4)
        .map(|id| bus.st(id).malformed(super::wire::WireError::BadVersion))
        .sum();
    assert_eq!(bad, 3, "every other station refused it, by reason");
    assert_eq!(total(&mut bus, Ctr::TokenRetransmits), 1);
    assert_eq!(total(&mut bus, Ctr::SuccessorsDead), 0);
    assert_eq!(bus.max_holders, 1);
    let cfg = bus.st(1).config().clone();
    intervals_settle(&bus, s, ms(300) + detection_bound(&cfg), cfg.trt);
}

#[test]
fn a_crashed_node_rejoins_and_a_new_node_joins_during_a_cycle() {
    // Stations 1-3 know each other; 4 is not a configured member and boots
    // later; 3 crashes, is declared dead, and reboots.
    let n = 4;
    let mut bus = Bus::new(n, 25, |id| {
        let mut c = Bus::config(id, n);
        if id <= 3 {
            c.members = vec![1, 2, 3];
        }
        c
    });
    bus.crash(4);
    let s = open(&mut bus, 1, 2, 6250);
    bus.admit_and_wait(1, s, Duration::from_millis(100));
    bus.run_until(ms(200));
    bus.crash(3);
    bus.run_until(ms(700));
    assert!(bus
        .st(1)
        .token()
        .unwrap()
        .nodes
        .iter()
        .any(|e| e.id == 3 && !e.alive));
    let mut c3 = Bus::config(3, n);
    c3.members = vec![1, 2, 3];
    c3.boot = super::Boot::Join;
    bus.at(ms(710), move |b| b.restart(c3));
    let mut c4 = Bus::config(4, n);
    c4.boot = super::Boot::Join;
    bus.at(ms(725), move |b| b.restart(c4));
    bus.run_until(ms(1200));
    let t = bus.st(1).token().unwrap().clone();
    for id in [3, 4] {
        assert!(
            t.nodes.iter().any(|e| e.id == id && e.alive),
            "{id} back: {:?}",
            t.nodes
        );
        assert_eq!(bus.st(id).mode(), ModeKind::Rether);
        assert!(
            bus.slots[Bus::idx(id)].visits.iter().any(|v| v.at > ms(725)),
            "{id} visited again"
        );
    }
    assert!(total(&mut bus, Ctr::JoinsApplied) >= 2);
    assert_eq!(bus.max_holders, 1);
}

#[test]
fn a_booting_node_that_hears_no_token_assumes_csma() {
    let n = 3;
    let mut bus = Bus::new(n, 26, |id| Bus::config(id, n));
    let mut c = Bus::config(2, n);
    c.boot = super::Boot::Join;
    let wait = c.join_wait();
    bus.at(ms(10), move |b| b.restart(c));
    bus.run_until(ms(10) + wait - Duration::from_millis(1));
    assert_eq!(bus.st(2).mode(), ModeKind::Joining);
    bus.run_until(ms(10) + wait + Duration::from_millis(1));
    assert_eq!(bus.st(2).mode(), ModeKind::Csma);
    assert_eq!(bus.st(2).counter(Ctr::JoinTimeouts), 1);
    assert_eq!(bus.frames(FrameType::Join).len(), 1);
}

#[test]
fn a_lost_token_is_regenerated_exactly_once_within_the_bound() {
    // Beyond the paper: the holder and the predecessor watching it crash
    // together, so no acknowledgement timer is left to notice. The
    // silence watchdog of the lowest-ranked live station regenerates the
    // token from its copy, reservations preserved.
    let n = 6;
    let mut bus = Bus::new(n, 27, |id| Bus::config(id, n));
    let a = open(&mut bus, 1, 2, 6250);
    let b = open(&mut bus, 5, 6, 6250);
    bus.admit_and_wait(1, a, Duration::from_millis(100));
    bus.admit_and_wait(5, b, Duration::from_millis(200));
    bus.slots[Bus::idx(3)].nrt_backlog = 1;
    bus.run_until(ms(300));
    // Wait for 3's NRT visit, watched by 2.
    bus.run_until_cond(Duration::from_micros(20), Duration::from_millis(200), |b| {
        b.st(3).holds_token() && b.st(2).monitoring() == Some(3)
    });
    let crash = bus.now;
    let last_before = bus.tokens().last().unwrap().0;
    bus.crash(3);
    bus.crash(2);
    bus.run_until(crash + Duration::from_millis(1500));
    assert_eq!(total(&mut bus, Ctr::TokenRegenerations), 1, "exactly one");
    let cfg = bus.st(1).config().clone();
    // Station 1 ranks first (3, the silent holder, is left out).
    assert_eq!(bus.st(1).counter(Ctr::TokenRegenerations), 1);
    // The new lineage's first frame: the regenerating station's
    // announcement (it keeps the token for its own RT visit first).
    let old_epoch = bus
        .tokens()
        .iter()
        .rfind(|(at, _)| *at < crash)
        .unwrap()
        .1
        .id
        .epoch;
    let first_after = bus
        .log
        .iter()
        .find(|r| {
            r.end > crash
                && match r.parsed() {
                    Some(super::wire::Frame::Token(t)) => t.id.epoch > old_epoch,
                    Some(super::wire::Frame::TokenAck(a)) => a.stamp.id.epoch > old_epoch,
                    _ => false,
                }
        })
        .unwrap()
        .end;
    let bound = super::timing::regeneration_bound(cfg.trt, cfg.t_nrt, cfg.ack_margin, cfg.claim_stagger, 0);
    let wire = cfg.timing.wire_time(60);
    assert!(
        first_after - last_before <= bound + wire,
        "regenerated after {} > {}",
        first_after - last_before,
        bound
    );
    // Not before the silence timeout either: no false alarm.
    assert!(first_after - last_before >= cfg.silence_timeout());
    let first_token = bus.tokens().into_iter().find(|(at, _)| *at > crash).unwrap();
    assert!(first_token.1.flags & super::wire::FLAG_REGENERATED != 0);
    // Reservations preserved: 5's session survives (1's too: 1 is alive).
    let t = bus.st(4).token().unwrap().clone();
    assert!(t.sessions.iter().any(|e| e.session == b));
    assert!(t.sessions.iter().any(|e| e.session == a));
    assert!(t.nodes.iter().any(|e| e.id == 2 && !e.alive));
    assert!(t.nodes.iter().any(|e| e.id == 3 && !e.alive));
    assert_eq!(bus.max_holders, 1);
    let settle = first_after + Duration(detection_bound(&cfg).0 * 2) + cfg.trt;
    intervals_settle(&bus, b, settle, cfg.trt);
}

#[test]
fn a_false_death_makes_a_duplicate_that_dies() {
    // Station 2 stops hearing station 3 for a while: it retransmits, hears
    // no acknowledgement and declares 3 dead, sending a new-epoch token
    // while 3's old-epoch one is still going round. The newer epoch wins
    // everywhere, the old one is dropped, and 3, seeing itself dead,
    // joins again.
    let n = 4;
    let mut bus = Bus::new(n, 28, |id| Bus::config(id, n));
    let s = open(&mut bus, 1, 2, 6250);
    bus.admit_and_wait(1, s, Duration::from_millis(100));
    bus.run_until(ms(300));
    let (t0, t1) = (ms(300), ms(500));
    bus.fault(u32::MAX, FaultAction::DropAt(vec![Bus::idx(2)]), move |f| {
        f.from == Bus::idx(3) && f.start >= t0 && f.start < t1
    });
    bus.run_until(ms(1500));
    assert!(bus.st(2).counter(Ctr::SuccessorsDead) >= 1);
    assert!(total(&mut bus, Ctr::DuplicateTokensDropped) + total(&mut bus, Ctr::StaleTokensIgnored) >= 1);
    // Long after the fault, one token lineage only and one holder.
    let settle = t1 + Duration::from_millis(300);
    let ids: BTreeSet<(u32, StationId)> = bus
        .tokens()
        .into_iter()
        .filter(|(at, _)| *at > settle)
        .map(|(_, t)| (t.id.epoch, t.id.origin))
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(bus.double_holders.iter().all(|&t| t < settle));
    let t = bus.st(1).token().unwrap().clone();
    assert!(t.nodes.iter().all(|e| e.alive), "3 joined again: {:?}", t.nodes);
    let cfg = bus.st(1).config().clone();
    intervals_settle(&bus, s, settle, cfg.trt);
}

/// An Ethernet/IPv4-typed frame of `len` bytes from station `from` to `to`.
fn nrt_frame(from: StationId, to: StationId, len: usize, uid: u64) -> crate::packet::Packet {
    let mut d = vec![0u8; len];
    d[0..6].copy_from_slice(&MacAddr::local(to as u32).0);
    d[6..12].copy_from_slice(&MacAddr::local(from as u32).0);
    d[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    crate::packet::Packet::new(
        d,
        crate::packet::Meta {
            uid,
            ..Default::default()
        },
    )
}

#[test]
fn nrt_traffic_is_transparent_and_goes_only_in_its_turn() {
    let n = 3;
    let mut bus = Bus::new(n, 31, |id| {
        let mut c = Bus::config(id, n);
        c.nrt_queue_packets = 20;
        c
    });
    // CSMA mode: frames go at once and come up at the destination.
    for k in 0..5 {
        let p = nrt_frame(1, 2, 200, 1000 + k);
        let now = bus.now;
        crate::node::Node::handle_send(bus.st(1), now, p);
    }
    bus.at(ms(1), |_| {});
    bus.run_until(ms(5));
    let up: Vec<u64> = bus.slots[1].nrt_out.iter().map(|x| x.1).collect();
    assert_eq!(up, vec![1000, 1001, 1002, 1003, 1004]);
    // RETHER mode: backlogged NRT traffic rides NRT visits only.
    let s = open(&mut bus, 1, 3, 6250);
    bus.admit_and_wait(1, s, Duration::from_millis(100));
    let switched = bus.now;
    for i in 0..n {
        bus.slots[i].nrt_backlog = 3;
        bus.slots[i].nrt_len = 800;
    }
    bus.at(switched, |_| {});
    bus.run_until(switched + Duration::from_millis(500));
    let visits = bus.visits();
    let mut checked = 0;
    for r in bus
        .log
        .iter()
        .filter(|r| r.start > switched && !super::wire::is_rether(&r.data))
    {
        let last = visits.iter().rfind(|(_, v)| v.at <= r.start).unwrap();
        assert_eq!(
            last.0 as usize,
            r.from + 1,
            "NRT frame outside its sender's visit"
        );
        assert!(matches!(last.1.kind, VisitKind::Nrt { .. }));
        checked += 1;
    }
    assert!(checked > 30, "{checked}");
    // Overload: the bounded queue drops and counts.
    for k in 0..50 {
        let now = bus.now;
        crate::node::Node::handle_send(bus.st(2), now, nrt_frame(2, 3, 200, 5000 + k));
    }
    assert!(bus.st(2).counter(Ctr::NrtQueueDrops) >= 30);
    // Ledger: every NRT frame handed to station 1 is delivered, queued or dropped.
    bus.run_until(bus.now + Duration::from_millis(100));
    for i in 0..n {
        bus.slots[i].nrt_backlog = 0;
    }
    bus.run_until(bus.now + Duration::from_millis(500));
    let delivered_from_1 = bus.slots[1].nrt_out.len() as u64;
    let st1 = bus.st(1);
    let l = crate::node::Node::ledger(st1);
    // The ledger also ends the copies of other stations' frames that
    // station 1 heard on the bus and ignored (every harness frame is
    // traffic, uid ≠ 0), and holds the RT units of its session: the NRT
    // part is what remains.
    let ignored = st1.counter(Ctr::NrtNotForUs) + st1.counter(Ctr::OwnFramesIgnored);
    let nrt_held = st1.nrt_queued() as u64;
    assert!(l.held >= nrt_held);
    assert_eq!(
        bus.slots[0].nrt_in + 5,
        delivered_from_1 + nrt_held + l.dropped - ignored
    );
}

#[test]
fn host_port_relays_the_hosts_frames_untouched() {
    let n = 2;
    let mut bus = Bus::new(n, 32, |id| {
        let mut c = Bus::config(id, n);
        c.host_port = true;
        c
    });
    assert_eq!(crate::node::Node::port_count(bus.st(1)), 2);
    let p = nrt_frame(1, 2, 300, 7);
    let data = p.data.clone();
    let now = bus.now;
    crate::node::Node::handle_frame(bus.st(1), now, 1, p.data, p.meta);
    // The host may not speak RETHER on the segment.
    let mut fake = vec![0u8; 60];
    fake[12..14].copy_from_slice(&super::wire::ETHERTYPE_RETHER.to_be_bytes());
    crate::node::Node::handle_frame(bus.st(1), now, 1, fake, Default::default());
    bus.at(ms(1), |_| {});
    bus.run_until(ms(5));
    assert_eq!(bus.slots[1].host_out.len(), 1);
    assert_eq!(bus.slots[1].host_out[0].data, data);
    assert_eq!(bus.st(1).counter(Ctr::RetherFromHostRefused), 1);
    assert_eq!(bus.st(1).counter(Ctr::HostRx), 2);
    let r = crate::node::Node::port_report(bus.st(2), 1);
    assert_eq!(r.tx_pkts, 1);
    // Control frames never reach the host.
    let s = open(&mut bus, 1, 2, 3000);
    bus.admit_and_wait(1, s, Duration::from_millis(100));
    bus.run_until(bus.now + Duration::from_millis(100));
    assert!(bus.slots[1]
        .host_out
        .iter()
        .all(|p| !super::wire::is_rether(&p.data)));
}

#[test]
fn nrt_policies_bound_frames_per_visit() {
    for policy in [NrtPolicy::OnePacket, NrtPolicy::AtMost(3), NrtPolicy::AsManyAsFit] {
        let n = 3;
        let mut bus = Bus::new(n, 33, |id| {
            let mut c = Bus::config(id, n);
            c.nrt_policy = policy;
            c
        });
        let s = open(&mut bus, 1, 3, 6250);
        bus.admit_and_wait(1, s, Duration::from_millis(100));
        bus.slots[1].nrt_backlog = 40;
        bus.slots[1].nrt_len = 1514;
        let t = bus.now;
        bus.at(t, |_| {});
        bus.run_until(t + Duration::from_millis(400));
        let most = bus.slots[1]
            .visits
            .iter()
            .filter_map(|v| match v.kind {
                VisitKind::Nrt { frames } => Some(frames),
                _ => None,
            })
            .max()
            .unwrap();
        match policy {
            NrtPolicy::OnePacket => assert_eq!(most, 1),
            NrtPolicy::AtMost(k) => assert_eq!(most, k),
            // 26.5 ms left after the RT visit: 11 frames of 2.27 ms fit.
            NrtPolicy::AsManyAsFit => assert!(most >= 10, "{most}"),
        }
        let trt = bus.st(1).config().trt;
        intervals_settle(&bus, s, t + trt, trt);
    }
}

/// One failure injected into a property-test run.
#[derive(Clone, Debug)]
enum Failure {
    None,
    /// Crash station `id % n + 1` at this time.
    Crash {
        id: u16,
        at_ms: u64,
    },
    /// Drop / corrupt the first token frame on the wire after this time.
    DropToken {
        at_ms: u64,
    },
    CorruptToken {
        at_ms: u64,
    },
    /// Drop the first RT data frame after this time.
    DropRt {
        at_ms: u64,
    },
}

impl Failure {
    fn at(&self) -> Option<Instant> {
        match *self {
            Failure::None => None,
            Failure::Crash { at_ms, .. }
            | Failure::DropToken { at_ms }
            | Failure::CorruptToken { at_ms }
            | Failure::DropRt { at_ms } => Some(ms(at_ms)),
        }
    }
}

fn failure() -> impl Strategy<Value = Failure> {
    prop_oneof![
        Just(Failure::None),
        (any::<u16>(), 350u64..750).prop_map(|(id, at_ms)| Failure::Crash { id, at_ms }),
        (350u64..750).prop_map(|at_ms| Failure::DropToken { at_ms }),
        (350u64..750).prop_map(|at_ms| Failure::CorruptToken { at_ms }),
        (350u64..750).prop_map(|at_ms| Failure::DropRt { at_ms }),
    ]
}

fn policy() -> impl Strategy<Value = NrtPolicy> {
    prop_oneof![
        Just(NrtPolicy::OnePacket),
        Just(NrtPolicy::AsManyAsFit),
        (1u32..=4).prop_map(NrtPolicy::AtMost),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// The acceptance properties over random segments, reservations, NRT
    /// loads and single failures.
    #[test]
    fn rether_keeps_its_promises(
        n in 3usize..=8,
        sess in proptest::collection::vec((any::<u16>(), any::<u16>(), 500u32..=9000), 1..=4),
        loads in proptest::collection::vec((0usize..=3, 60usize..=1514), 8),
        policy in policy(),
        fail in failure(),
        seed in any::<u64>(),
    ) {
        let mut bus = Bus::new(n, seed, |id| {
            let mut c = Bus::config(id, n);
            c.nrt_policy = policy;
            c
        });
        let cfg = bus.st(1).config().clone();
        let trt = cfg.trt;
        for (i, &(backlog, len)) in loads.iter().take(n).enumerate() {
            bus.slots[i].nrt_backlog = backlog;
            bus.slots[i].nrt_len = len;
        }
        // Sessions, all asking for admission at the same moment (several
        // initiators, admission races at the token).
        let mut opened: Vec<(SessionId, StationId, u32)> = Vec::new();
        for &(a, b, bytes) in &sess {
            let from = (a as usize % n) as StationId + 1;
            let to = ((from as usize + b as usize % (n - 1)) % n) as StationId + 1;
            prop_assert_ne!(from, to);
            let s = open(&mut bus, from, to, bytes);
            opened.push((s, to, bytes));
        }
        let list = opened.clone();
        bus.at(ms(1), move |b| {
            for (s, _, _) in &list {
                b.st(s.sender).admit(ms(1), *s).unwrap();
            }
        });
        match fail.clone() {
            Failure::None => {}
            Failure::Crash { id, at_ms } => {
                let id = (id as usize % n) as StationId + 1;
                bus.at(ms(at_ms), move |b| b.crash(id));
            }
            Failure::DropToken { at_ms } => bus.fault(1, FaultAction::Drop, move |f| {
                f.start >= ms(at_ms) && f.kind() == Some(FrameType::Token)
            }),
            Failure::CorruptToken { at_ms } => bus.fault(1, FaultAction::Corrupt, move |f| {
                f.start >= ms(at_ms) && f.kind() == Some(FrameType::Token)
            }),
            Failure::DropRt { at_ms } => bus.fault(1, FaultAction::Drop, move |f| {
                f.start >= ms(at_ms) && f.kind() == Some(FrameType::RtData)
            }),
        }
        let end = ms(1500);
        bus.run_until(end);

        // The failure's window: detection, recovery, and the cycles they slip.
        let window = fail.at().map(|t| (t - trt, t + Duration(detection_bound(&cfg).0 * 2) + trt + trt + trt));
        let in_window = |a: Instant, b: Instant| window.is_some_and(|(w0, w1)| b >= w0 && a <= w1);

        // Admission never overbooks (eq. 3) in any token on the wire.
        for (_, t) in bus.tokens() {
            let reserved = super::cycle::reserved(&t);
            prop_assert!(reserved + t.t_nrt <= t.trt, "overbooked: {reserved} + {} > {}", t.t_nrt, t.trt);
        }
        // Exactly one token at any instant, even across the failure.
        prop_assert!(bus.max_holders <= 1, "two holders at {:?}", bus.double_holders);

        // Every admitted session gets its reservation every TRT.
        let up = |b: &Bus, id: StationId| b.slots[Bus::idx(id)].up;
        let mut live_sessions = 0;
        for &(s, _to, bytes) in &opened {
            let st = bus.st(s.sender).session_state(s);
            if !matches!(st, Some(SendState::Admitted { .. })) || !up(&bus, s.sender) {
                continue;
            }
            live_sessions += 1;
            let v: Vec<(Instant, u32)> = bus
                .visits()
                .into_iter()
                .filter_map(|(_, v)| match v.kind {
                    VisitKind::Rt { session, bytes } if session == s => Some((v.at, bytes)),
                    _ => None,
                })
                .collect();
            // The session ran (the real claim is the interval check below):
            // 1.5 s of 50-ms-class TRTs, less the switch to RETHER mode, the
            // cycle it starts in and the failure's window (a case with 8
            // stations had 19).
            prop_assert!(v.len() >= 10, "{s}: {} visits", v.len());
            for w in v.windows(2) {
                if !in_window(w[0].0, w[1].0) {
                    prop_assert_eq!(w[1].0 - w[0].0, trt, "{} at {:?}", s, w[0].0);
                }
                prop_assert_eq!(w[1].1, bytes, "a full unit every visit");
            }
        }
        // The token lives while sessions do, and is gone when none is left.
        let ups: Vec<StationId> = (1..=n as StationId).filter(|&id| up(&bus, id)).collect();
        if live_sessions > 0 {
            let recent = bus.tokens().iter().filter(|(at, _)| *at > end - Duration::from_millis(150)).count();
            prop_assert!(recent > 0, "token lost for good");
            for &id in &ups {
                prop_assert_eq!(bus.st(id).mode(), ModeKind::Rether, "station {}", id);
            }
        } else {
            for &id in &ups {
                prop_assert_eq!(bus.st(id).mode(), ModeKind::Csma, "station {}", id);
            }
        }

        // No NRT starvation beyond the eq. 5 bound.
        let bound = super::timing::nrt_access_bound(
            n as u64,
            cfg.t_nrt,
            cfg.timing.nrt_visit_max(policy),
            trt,
        );
        for &id in &ups {
            if bus.slots[Bus::idx(id)].nrt_backlog == 0 {
                continue;
            }
            let sends: Vec<Instant> = bus.slots[Bus::idx(id)]
                .visits
                .iter()
                .filter(|v| matches!(v.kind, VisitKind::Nrt { frames } if frames > 0))
                .map(|v| v.at)
                .collect();
            for w in sends.windows(2) {
                if !in_window(w[0], w[1]) {
                    prop_assert!(w[1] - w[0] <= bound, "station {} waited {} > {}", id, w[1] - w[0], bound);
                }
            }
        }

        // The session byte ledger balances: sent = received + rejected +
        // lost on the medium (faults, crashed receivers); every received
        // byte was read, overwritten or is still held.
        let mut sent = 0;
        let mut accounted = bus.rt_bytes_lost;
        for &(s, to, _) in &opened {
            let tx = bus.slots[Bus::idx(s.sender)].st.send_stats(s);
            let tx = tx.or_else(|| {
                bus.slots[Bus::idx(s.sender)].events.iter().find_map(|(_, e)| match e {
                    SessionEvent::Closed { session, stats } if *session == s => Some(*stats),
                    _ => None,
                })
            });
            sent += tx.map_or(0, |t| t.bytes_sent);
            let r = bus.slots[Bus::idx(to)].st.recv_stats(s).unwrap();
            accounted += r.bytes_rx + r.bytes_rejected;
            let held = bus.slots[Bus::idx(to)].st.recv_bytes_held(s).unwrap();
            prop_assert_eq!(r.bytes_rx, r.bytes_read + r.bytes_overwritten + held);
            // Units the application got are whole unless a frame was lost.
            if matches!(fail, Failure::None) {
                prop_assert!(bus.slots[Bus::idx(to)].got.iter().filter(|g| g.session == s).all(|g| g.complete));
            }
        }
        prop_assert_eq!(sent, accounted);

        // Bookkeeping that must never move.
        for id in 1..=n as StationId {
            let st = bus.st(id);
            prop_assert_eq!(st.counter(Ctr::RunLimit), 0);
            prop_assert_eq!(st.counter(Ctr::SpuriousTxDone), 0);
            prop_assert_eq!(st.counter(Ctr::TokenMisrouted), 0);
            if !matches!(fail, Failure::CorruptToken { .. }) {
                for e in super::wire::WireError::ALL {
                    prop_assert_eq!(st.malformed(e), 0, "{}", e);
                }
            }
        }
    }
}

#[test]
fn staggered_acknowledgements_do_not_collide() {
    // §4.3: acknowledgements sent at once collide; waiting a time
    // proportional to the node's rank avoids it.
    let n = 8;
    let collisions = |stagger: Duration| {
        let mut bus = Bus::new(n, 41, |id| {
            let mut c = Bus::config(id, n);
            c.ack_stagger = stagger;
            c
        });
        let s = open(&mut bus, 1, 2, 3000);
        bus.admit_and_wait(1, s, Duration::from_millis(300));
        assert_eq!(acks(&bus).len(), n - 1);
        bus.collisions
    };
    assert!(collisions(Duration::ZERO) > 0);
    assert_eq!(collisions(Duration::from_micros(100)), 0);
}

#[test]
fn a_lost_switch_to_csma_heals() {
    let n = 3;
    let mut bus = Bus::new(n, 42, |id| Bus::config(id, n));
    let s = open(&mut bus, 1, 2, 3000);
    bus.admit_and_wait(1, s, Duration::from_millis(100));
    bus.run_until(ms(200));
    // One copy lost for everybody: the second one does it.
    bus.fault(1, FaultAction::Drop, |f| {
        f.kind() == Some(FrameType::SwitchToCsma)
    });
    let now = bus.now;
    bus.st(1).close(now, s).unwrap();
    bus.run_until(ms(300));
    for id in 1..=3 {
        assert_eq!(bus.st(id).mode(), ModeKind::Csma);
    }
    // Every copy lost at station 3: it still believes in the token. Its
    // acknowledgement timer (if it passed the token to the destroyer) or
    // its silence watchdog brings the token back to the destroyer, who
    // knows it is gone and says so again.
    let s = open(&mut bus, 1, 2, 3000);
    bus.admit_and_wait(1, s, Duration::from_millis(100));
    bus.run_until(ms(500));
    bus.fault(u32::MAX, FaultAction::DropAt(vec![Bus::idx(3)]), |f| {
        f.kind() == Some(FrameType::SwitchToCsma)
    });
    let now = bus.now;
    bus.st(1).close(now, s).unwrap();
    bus.run_until(ms(520));
    assert_eq!(bus.st(3).mode(), ModeKind::Rether);
    assert_eq!(bus.st(1).mode(), ModeKind::Csma);
    bus.faults.clear();
    let cfg = bus.st(3).config().clone();
    bus.run_until(ms(520) + cfg.silence_timeout() + cfg.trt);
    for id in 1..=3 {
        assert_eq!(bus.st(id).mode(), ModeKind::Csma, "station {id}");
    }
    assert!(bus.st(1).counter(Ctr::SwitchToCsmaSent) > 2 * cfg.csma_repeats as u64);
    assert_eq!(bus.max_holders, 1);
}

#[test]
fn one_hop_without_a_bus() {
    // What the benchmark measures: a token for an NRT visit arrives, the
    // idle visit charges t_token, the pass goes to the next live node with
    // the next sequence number, and the acknowledgement timer starts.
    use super::wire::{self as rw, Frame, NodeEntry, RtEntry, Token, TokenId, GROUP_MAC, NRT_PHASE};
    use crate::node::{Node, TxStatus};
    let trt = Duration(33_333_333);
    let t = Token {
        sender: 1,
        to: 2,
        id: TokenId { epoch: 1, origin: 1 },
        seq: 10,
        cycle: 1,
        residual: trt,
        trt,
        t_nrt: Duration::from_millis(3),
        flags: 0,
        rt_next: NRT_PHASE,
        nrt_resume: 1,
        nodes: (1..=4).map(|id| NodeEntry { id, alive: true }).collect(),
        sessions: vec![RtEntry {
            session: SessionId { sender: 1, num: 0 },
            receiver: 3,
            bytes_per_trt: 1000,
            tht: Duration::from_millis(2),
            start_cycle: 0,
        }],
    };
    let mut cfg = Bus::config(2, 4);
    cfg.trace_visits = 0;
    let mut st = super::RetherStation::new(cfg).unwrap();
    let frame = rw::build(MacAddr::local(1), GROUP_MAC, &Frame::Token(t)).unwrap();
    st.handle_frame(ms(1), 0, frame, Default::default());
    assert_eq!(
        st.mode(),
        ModeKind::Rether,
        "a token heard in CSMA mode is adopted"
    );
    let tx = st.poll_transmit(ms(1)).unwrap();
    let Ok(Frame::Token(out)) = rw::parse(&tx.pkt.data) else {
        panic!("not a token")
    };
    assert_eq!((out.sender, out.to, out.seq), (2, 3, 11));
    assert_eq!(out.residual, trt - st.config().timing.t_token);
    assert_eq!(tx.tx_end, None, "half duplex");
    st.handle_tx_done(ms(1), 0, TxStatus::Sent { collisions: 0 });
    assert_eq!(st.monitoring(), Some(3));
    assert_eq!(st.counter(Ctr::NrtVisitsIdle), 1);
    assert_eq!(
        st.poll_timeout(ms(1)),
        Some(ms(1) + out.residual + st.config().ack_margin)
    );
}

#[test]
fn a_station_left_without_a_token_revokes_its_sessions() {
    use super::wire::{self as rw, Frame, SwitchToCsma};
    let n = 3;
    let mut bus = Bus::new(n, 43, |id| Bus::config(id, n));
    let s = open(&mut bus, 2, 3, 3000);
    bus.admit_and_wait(2, s, Duration::from_millis(100));
    bus.run_until(ms(200));
    // Station 2 hears the token destroyed (its entry lost elsewhere).
    let id = bus.st(2).token().unwrap().id;
    let f = rw::build(
        MacAddr::local(1),
        MacAddr::BROADCAST,
        &Frame::SwitchToCsma(SwitchToCsma { sender: 1, id }),
    )
    .unwrap();
    let now = bus.now;
    crate::node::Node::handle_frame(bus.st(2), now, 0, f, Default::default());
    assert_eq!(bus.st(2).mode(), ModeKind::Csma);
    assert_eq!(bus.st(2).session_state(s), Some(SendState::Revoked));
    let st = bus.st(2);
    let mut revoked = false;
    while let Some(e) = st.poll_session_event() {
        revoked |= e == SessionEvent::Revoked { session: s };
    }
    assert!(revoked);
    // It can ask again: a new switch.
    bus.st(2).admit(now, s).unwrap();
    assert_eq!(bus.st(2).mode(), ModeKind::Initiating);
}

/// A token announcing another TRT than the segment's is dropped and
/// counted, not adopted: one announcing 2^63 ns (found by the node fuzz
/// target) made a lone holder spin through millions of idle NRT visits to
/// itself at one instant. The same token with the segment's TRT is
/// adopted.
#[test]
fn a_token_with_a_foreign_trt_is_dropped() {
    use super::station::RetherStation;
    use super::wire::{self as rw, Frame, NodeEntry, Token, TokenId, GROUP_MAC, NRT_PHASE};
    use crate::node::Node;
    use crate::packet::Meta;
    let cfg = Bus::config(2, 3);
    let trt = cfg.trt;
    let token = |trt: Duration| Token {
        sender: 1,
        to: 2,
        id: TokenId { epoch: 1, origin: 1 },
        seq: 1,
        cycle: 1,
        residual: trt,
        trt,
        t_nrt: Duration::ZERO,
        flags: 0,
        rt_next: NRT_PHASE,
        nrt_resume: 1,
        nodes: (1..=3).map(|id| NodeEntry { id, alive: true }).collect(),
        sessions: Vec::new(),
    };
    for (t, foreign) in [(Duration(1 << 63), true), (trt + trt, true), (trt, false)] {
        let mut st = RetherStation::new(cfg.clone()).unwrap();
        let f = rw::build(MacAddr::local(1), GROUP_MAC, &Frame::Token(token(t))).unwrap();
        st.handle_frame(ms(1), 0, f, Meta::default());
        st.handle_timeout(ms(1));
        assert_eq!(
            st.counter(Ctr::ForeignTrtTokensDropped),
            foreign as u64,
            "trt {t:?}"
        );
        assert_eq!(st.counter(Ctr::TokenAdopted), !foreign as u64, "trt {t:?}");
        assert!(
            st.counter(Ctr::TokenVisits) < 1000,
            "trt {t:?}: {} visits",
            st.counter(Ctr::TokenVisits)
        );
        assert_eq!(st.counter(Ctr::RunLimit), 0, "trt {t:?}");
    }
}

/// Session errors reach people (`qosnet rether`, the control socket) as
/// sentences, not as variant names ("BadBuffers" was what a user saw).
#[test]
fn session_errors_read_as_sentences() {
    use super::station::SessionError as E;
    for e in [
        E::UnknownSession,
        E::NotSender,
        E::BadReceiver,
        E::BadReservation,
        E::BadBuffers,
        E::TooManySessions,
        E::AlreadyOpen,
    ] {
        let shown = e.to_string();
        assert_ne!(shown, format!("{e:?}"));
        assert!(shown.contains(' '), "{shown}");
    }
    assert!(E::BadBuffers.to_string().contains("1 to"));
}
