//! Traffic conditioning at a DS edge: metering, marking, re-marking,
//! policing and shaping.
//!
//! - RFC 2475 §2.3.3: a traffic conditioner has meters, markers, shapers
//!   and droppers; packets "in profile" pass, "out of profile" ones are
//!   re-marked, delayed or dropped according to the traffic conditioning
//!   agreement.
//! - RFC 2597 §3: an AF domain may re-mark out-of-profile packets to a
//!   higher drop precedence of the same class instead of dropping them.
//! - RFC 2697 (srTCM) and RFC 2698 (trTCM): three-colour meters, whose
//!   colours a marker turns into drop precedences; colour-aware mode takes
//!   the packet's colour from its current DSCP.
//! - Lai, DEGEB (seed 004) §2.1 and §4.1: the edge router (DSER) polices,
//!   shapes or drops ingress traffic and (re-)marks it; Table 4-1's AF
//!   limits are *cascaded*: traffic over AFx1's profile is re-marked AFx2,
//!   over that AFx3, over that dropped, so "the bandwidth limits … are
//!   additive, with bandwidth limit contribution from their
//!   lower-precedence classes" (AF11 76 = 30 + 25 + 21 Mb/s; AF12 46 =
//!   25 + 21; AF13 21). Table 4-3 shows the DSCPs that result: in profile
//!   a packet keeps its DSCP; out of profile AF11 leaves as AF11, AF12 or
//!   AF13. [`ProfileKind::Ladder`] is that cascade.
//!
//! Meters count the bytes of the IP packet (`total_len`), as RFC 2697 and
//! 2698 define CIR and the buckets, so a profile's rate does not depend on
//! the link layer. Everything is sans-IO: buckets are refilled from the
//! `now` each call is given, and shaped packets are released by
//! [`Conditioner::poll_release`] at times announced by
//! [`Conditioner::poll_at`].

use std::collections::VecDeque;

use super::dscp::{dscp_name, PhbMap};
use crate::meter::{Meter, SrTcm, TokenBucket, TrTcm};
use crate::packet::{Color, Packet};
use crate::sched::DropReason;
use crate::time::{Duration, Instant};
use crate::wire::{self, Ipv4Info};

/// One rung of a cascaded (ladder) profile: up to `rate_bps` (bit/s of IP
/// packets) with `burst` bytes of bucket leave marked `dscp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub dscp: u8,
    pub rate_bps: u64,
    pub burst: u64,
}

/// A three-colour meter's parameters; rates in bit/s, bursts in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tcm {
    /// RFC 2697 single rate three colour marker.
    Sr { cir_bps: u64, cbs: u64, ebs: u64 },
    /// RFC 2698 two rate three colour marker.
    Tr {
        pir_bps: u64,
        pbs: u64,
        cir_bps: u64,
        cbs: u64,
    },
}

/// How a profile meters and marks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileKind {
    /// Set the DSCP; no meter (RFC 2475 §2.3.3.2 marker).
    Mark(u8),
    /// The cascade of Table 4-1: a packet starts at the step whose DSCP is
    /// its current DSCP (else step 0) and leaves with the DSCP of the first
    /// step at or after that whose bucket has room; if none has, the
    /// profile's [`Exceed`] action applies.
    Ladder(Vec<Step>),
    /// srTCM / trTCM colour → DSCP. `yellow`/`red` `None`: the packet is
    /// out of profile and gets the [`Exceed`] action (drop, by default).
    /// Colour-aware meters take the pre-colour from the drop precedence of
    /// the packet's current DSCP (through the node's [`PhbMap`]).
    Tcm {
        tcm: Tcm,
        color_aware: bool,
        green: u8,
        yellow: Option<u8>,
        red: Option<u8>,
    },
}

/// What happens to a packet that is out of profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceed {
    /// Police: drop ([`DropReason::Policed`]).
    Drop,
    /// Re-mark to this DSCP and forward.
    Remark(u8),
    /// Delay in a FIFO of at most `limit_pkts` packets until the packet's
    /// entry step has tokens (ladders only); overflow is dropped
    /// ([`DropReason::ShaperFull`]).
    Shape { limit_pkts: usize },
    /// Forward unchanged.
    Pass,
}

/// A named traffic profile (RFC 2475 §2.3.2 "traffic profile" plus the
/// conditioning actions for in- and out-of-profile packets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    pub kind: ProfileKind,
    pub exceed: Exceed,
}

/// What conditioning did to one packet. Every packet conditioned by a
/// profile ends in exactly one of these, and the profile's counters are
/// the tally of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Forwarded now with its DSCP unchanged.
    Passed,
    /// Forwarded now with a new DSCP.
    Remarked,
    /// Taken into a shaping queue; comes back through `poll_release`.
    Shaped,
    Dropped(DropReason),
}

/// Per-profile counters: `passed + remarked + shaped + dropped` is the
/// number of packets conditioned; `released` of the shaped ones have left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProfileCounters {
    pub passed: u64,
    pub remarked: u64,
    pub shaped: u64,
    pub dropped: u64,
    pub released: u64,
}

/// A packet in a shaping queue.
struct Held {
    pkt: Packet,
    out_port: u16,
    /// Ladder step whose bucket releases it and whose DSCP it leaves with.
    entry: usize,
    bytes: u32,
}

struct Shaper {
    q: VecDeque<Held>,
    limit: usize,
    /// Held packets per entry step. A step with held packets is reserved
    /// for them: new arrivals skip its bucket, so packets of one entry
    /// DSCP leave in arrival order instead of newcomers taking the tokens
    /// the queue is waiting for.
    per_step: Vec<usize>,
    /// Not later than when the head can be released (it can only be
    /// later, if other traffic takes the tokens first, which
    /// `poll_release` notices and corrects).
    due: Instant,
}

enum State {
    Mark,
    Ladder {
        buckets: Vec<TokenBucket>,
        shaper: Option<Shaper>,
    },
    Sr(SrTcm),
    Tr(TrTcm),
}

/// The meters, markers and shapers of a set of profiles.
pub struct Conditioner {
    profiles: Vec<Profile>,
    state: Vec<State>,
    counters: Vec<ProfileCounters>,
    held: usize,
}

fn check_dscp(p: &str, what: &str, d: u8) -> Result<(), String> {
    if d > 63 {
        return Err(format!("profile `{p}`: {what} DSCP {d} is above 63"));
    }
    Ok(())
}

fn validate(p: &Profile) -> Result<State, String> {
    let n = p.name.as_str();
    if n.is_empty() {
        return Err("a profile has no name".into());
    }
    let metered_shape = |kind: &str| {
        if let Exceed::Shape { .. } = p.exceed {
            return Err(format!(
                "profile `{n}`: exceed = shape needs a ladder (a {kind} has no token bucket to wait for)"
            ));
        }
        Ok(())
    };
    match p.exceed {
        Exceed::Remark(d) => check_dscp(n, "exceed", d)?,
        Exceed::Shape { limit_pkts: 0 } => {
            return Err(format!(
                "profile `{n}`: a shaping queue of 0 packets would drop everything"
            ));
        }
        _ => {}
    }
    Ok(match &p.kind {
        ProfileKind::Mark(d) => {
            check_dscp(n, "mark", *d)?;
            metered_shape("marker")?;
            State::Mark
        }
        ProfileKind::Ladder(steps) => {
            if steps.is_empty() {
                return Err(format!("profile `{n}`: a ladder needs at least one step"));
            }
            let mut buckets = Vec::with_capacity(steps.len());
            for (i, s) in steps.iter().enumerate() {
                let sn = dscp_name(s.dscp);
                check_dscp(n, "step", s.dscp)?;
                if s.rate_bps == 0 {
                    return Err(format!("profile `{n}`: step {sn} has rate 0 (must be > 0 bit/s)"));
                }
                if s.burst == 0 {
                    return Err(format!(
                        "profile `{n}`: step {sn} has burst 0 (must be > 0 bytes)"
                    ));
                }
                if steps[..i].iter().any(|o| o.dscp == s.dscp) {
                    return Err(format!(
                        "profile `{n}`: DSCP {sn} appears twice in the ladder (a packet's entry step would be ambiguous)"
                    ));
                }
                buckets
                    .push(TokenBucket::new(s.rate_bps, s.burst).map_err(|e| format!("profile `{n}`: {e}"))?);
            }
            let shaper = match p.exceed {
                Exceed::Shape { limit_pkts } => Some(Shaper {
                    q: VecDeque::new(),
                    limit: limit_pkts,
                    per_step: vec![0; steps.len()],
                    due: Instant::ZERO,
                }),
                _ => None,
            };
            State::Ladder { buckets, shaper }
        }
        ProfileKind::Tcm {
            tcm,
            green,
            yellow,
            red,
            ..
        } => {
            check_dscp(n, "green", *green)?;
            for (what, d) in [("yellow", yellow), ("red", red)] {
                if let Some(d) = d {
                    check_dscp(n, what, *d)?;
                }
            }
            metered_shape("three-colour meter")?;
            let wrap = |e: crate::config::ConfigError| format!("profile `{n}`: {e}");
            match *tcm {
                Tcm::Sr { cir_bps, cbs, ebs } => {
                    if cir_bps == 0 || cbs == 0 {
                        return Err(format!("profile `{n}`: srTCM needs CIR > 0 and CBS > 0"));
                    }
                    State::Sr(SrTcm::new(cir_bps, cbs, ebs).map_err(wrap)?)
                }
                Tcm::Tr {
                    pir_bps,
                    pbs,
                    cir_bps,
                    cbs,
                } => {
                    if cir_bps == 0 {
                        return Err(format!("profile `{n}`: trTCM needs CIR > 0"));
                    }
                    State::Tr(TrTcm::new(pir_bps, pbs, cir_bps, cbs).map_err(wrap)?)
                }
            }
        }
    })
}

/// Set the DSCP to `d`: [`Action::Passed`] if it already was `d`.
fn mark(pkt: &mut Packet, cur: u8, d: u8) -> Action {
    if d == cur {
        Action::Passed
    } else {
        wire::set_dscp(&mut pkt.data, d);
        Action::Remarked
    }
}

impl Conditioner {
    /// Check and instantiate `profiles` (names unique; rates, bursts and
    /// DSCPs valid; `Shape` only on ladders). Buckets start full (RFC 2697
    /// and 2698 §3).
    pub fn new(profiles: Vec<Profile>) -> Result<Self, String> {
        let mut state = Vec::with_capacity(profiles.len());
        for (i, p) in profiles.iter().enumerate() {
            if profiles[..i].iter().any(|o| o.name == p.name) {
                return Err(format!("profile `{}` is defined twice", p.name));
            }
            state.push(validate(p)?);
        }
        Ok(Conditioner {
            counters: vec![ProfileCounters::default(); profiles.len()],
            profiles,
            state,
            held: 0,
        })
    }

    pub fn profiles(&self) -> &[Profile] {
        &self.profiles
    }
    pub fn counters(&self, profile: usize) -> Option<&ProfileCounters> {
        self.counters.get(profile)
    }
    /// Packets in shaping queues.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Condition a packet by profile `p`, rewriting its DSCP in place. On
    /// [`Action::Shaped`] the frame's bytes are moved into the shaping
    /// queue (`pkt.data` is left empty) and come back from
    /// [`poll_release`](Self::poll_release) with `out_port`. An unknown
    /// profile index passes the packet untouched.
    pub fn condition(
        &mut self,
        now: Instant,
        p: usize,
        pkt: &mut Packet,
        info: &Ipv4Info,
        out_port: u16,
        phb: &PhbMap,
    ) -> Action {
        let (Some(prof), Some(st)) = (self.profiles.get(p), self.state.get_mut(p)) else {
            return Action::Passed;
        };
        let cur = info.dscp();
        let bytes = info.total_len as u32;
        let out_of_profile = |pkt: &mut Packet| match prof.exceed {
            Exceed::Drop => Action::Dropped(DropReason::Policed),
            Exceed::Remark(d) => mark(pkt, cur, d),
            Exceed::Pass | Exceed::Shape { .. } => Action::Passed,
        };
        let act = match st {
            State::Mark => match prof.kind {
                ProfileKind::Mark(d) => mark(pkt, cur, d),
                _ => Action::Passed,
            },
            State::Ladder { buckets, shaper } => {
                let ProfileKind::Ladder(steps) = &prof.kind else {
                    return Action::Passed;
                };
                let entry = steps.iter().position(|s| s.dscp == cur).unwrap_or(0);
                let reserved = |s: usize| shaper.as_ref().is_some_and(|sh| sh.per_step[s] > 0);
                let hit = (entry..steps.len()).find(|&s| !reserved(s) && buckets[s].conform(now, bytes));
                match (hit, shaper) {
                    (Some(s), _) => mark(pkt, cur, steps[s].dscp),
                    (None, Some(sh)) => {
                        let ttc = buckets[entry].time_to_conform(now, bytes);
                        match ttc {
                            // Larger than the entry bucket: it would wait forever.
                            None => Action::Dropped(DropReason::Policed),
                            Some(_) if sh.q.len() >= sh.limit => Action::Dropped(DropReason::ShaperFull),
                            Some(ttc) => {
                                if sh.q.is_empty() {
                                    sh.due = now + ttc;
                                }
                                sh.per_step[entry] += 1;
                                let data = std::mem::take(&mut pkt.data);
                                sh.q.push_back(Held {
                                    pkt: Packet::new(data, pkt.meta),
                                    out_port,
                                    entry,
                                    bytes,
                                });
                                self.held += 1;
                                Action::Shaped
                            }
                        }
                    }
                    (None, None) => out_of_profile(pkt),
                }
            }
            State::Sr(_) | State::Tr(_) => {
                let ProfileKind::Tcm {
                    color_aware,
                    green,
                    yellow,
                    red,
                    ..
                } = prof.kind
                else {
                    return Action::Passed;
                };
                let pre = color_aware.then(|| phb.get(cur).color());
                let colour = match st {
                    State::Sr(m) => m.meter(now, bytes, pre),
                    State::Tr(m) => m.meter(now, bytes, pre),
                    _ => Color::Green,
                };
                let to = match colour {
                    Color::Green => Some(green),
                    Color::Yellow => yellow,
                    Color::Red => red,
                };
                match to {
                    Some(d) => mark(pkt, cur, d),
                    None => out_of_profile(pkt),
                }
            }
        };
        let c = &mut self.counters[p];
        match act {
            Action::Passed => c.passed += 1,
            Action::Remarked => c.remarked += 1,
            Action::Shaped => c.shaped += 1,
            Action::Dropped(_) => c.dropped += 1,
        }
        act
    }

    /// A shaped packet whose entry step has tokens at `now`, marked with
    /// that step's DSCP: `(profile, out_port, packet)`. Call until `None`.
    /// Profiles are scanned in order, so ties replay deterministically.
    pub fn poll_release(&mut self, now: Instant) -> Option<(usize, u16, Packet)> {
        for (p, st) in self.state.iter_mut().enumerate() {
            let State::Ladder {
                buckets,
                shaper: Some(sh),
            } = st
            else {
                continue;
            };
            let Some(h) = sh.q.front() else { continue };
            if sh.due > now {
                continue;
            }
            let (entry, bytes) = (h.entry, h.bytes);
            if !buckets[entry].conform(now, bytes) {
                // Someone else took the tokens: wait again.
                sh.due = now
                    + buckets[entry]
                        .time_to_conform(now, bytes)
                        .unwrap_or(Duration::MAX);
                continue;
            }
            let Some(mut h) = sh.q.pop_front() else { continue };
            sh.per_step[entry] -= 1;
            if let Some(n) = sh.q.front() {
                sh.due = now
                    + buckets[n.entry]
                        .time_to_conform(now, n.bytes)
                        .unwrap_or(Duration::MAX);
            }
            if let ProfileKind::Ladder(steps) = &self.profiles[p].kind {
                wire::set_dscp(&mut h.pkt.data, steps[entry].dscp);
            }
            self.held -= 1;
            self.counters[p].released += 1;
            return Some((p, h.out_port, h.pkt));
        }
        None
    }

    /// When the next shaped packet is due, if any is held.
    pub fn poll_at(&self) -> Option<Instant> {
        self.state
            .iter()
            .filter_map(|st| match st {
                State::Ladder { shaper: Some(sh), .. } if !sh.q.is_empty() => Some(sh.due),
                _ => None,
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::super::dscp::{af, EF};
    use super::super::testkit::frame;
    use super::*;

    const MBIT: u64 = 1_000_000;

    fn ladder(name: &str, steps: &[(u8, u64)], exceed: Exceed) -> Profile {
        Profile {
            name: name.into(),
            kind: ProfileKind::Ladder(
                steps
                    .iter()
                    .map(|&(dscp, mbit)| Step {
                        dscp,
                        rate_bps: mbit * MBIT,
                        burst: 3_000,
                    })
                    .collect(),
            ),
            exceed,
        }
    }

    fn dscp_of(p: &Packet) -> u8 {
        wire::parse_ipv4(&p.data).unwrap().dscp()
    }

    #[test]
    fn refuses_bad_profiles_naming_them() {
        let e = |p: Profile| Conditioner::new(vec![p]).err().unwrap();
        let l = |steps: Vec<Step>, exceed| Profile {
            name: "gold".into(),
            kind: ProfileKind::Ladder(steps),
            exceed,
        };
        let st = |dscp, rate_bps, burst| Step {
            dscp,
            rate_bps,
            burst,
        };
        assert!(e(l(vec![], Exceed::Drop)).contains("`gold`: a ladder needs"));
        assert!(e(l(vec![st(10, 0, 100)], Exceed::Drop)).contains("AF11 has rate 0"));
        assert!(e(l(vec![st(10, 1, 0)], Exceed::Drop)).contains("burst 0"));
        assert!(e(l(vec![st(10, 1, 1), st(10, 1, 1)], Exceed::Drop)).contains("twice"));
        assert!(e(l(vec![st(64, 1, 1)], Exceed::Drop)).contains("above 63"));
        assert!(e(l(vec![st(10, 1, 1)], Exceed::Remark(99))).contains("exceed DSCP 99"));
        assert!(e(l(vec![st(10, 1, 1)], Exceed::Shape { limit_pkts: 0 })).contains("0 packets"));
        let tcm = |tcm, exceed| Profile {
            name: "t".into(),
            kind: ProfileKind::Tcm {
                tcm,
                color_aware: false,
                green: 10,
                yellow: Some(12),
                red: None,
            },
            exceed,
        };
        let sr = Tcm::Sr {
            cir_bps: 1,
            cbs: 1,
            ebs: 0,
        };
        assert!(e(tcm(sr, Exceed::Shape { limit_pkts: 5 })).contains("needs a ladder"));
        assert!(e(tcm(
            Tcm::Sr {
                cir_bps: 0,
                cbs: 1,
                ebs: 1
            },
            Exceed::Drop
        ))
        .contains("CIR > 0"));
        assert!(e(tcm(
            Tcm::Tr {
                pir_bps: 1,
                pbs: 1,
                cir_bps: 2,
                cbs: 1
            },
            Exceed::Drop
        ))
        .contains("PIR"));
        let mark = Profile {
            name: "m".into(),
            kind: ProfileKind::Mark(46),
            exceed: Exceed::Drop,
        };
        assert!(Conditioner::new(vec![mark.clone(), mark])
            .err()
            .unwrap()
            .contains("`m` is defined twice"));
    }

    #[test]
    fn ladder_cascades_from_the_entry_step() {
        // 3000-byte buckets, 1000-byte packets, all at t = 0: each step
        // passes three packets, in ladder order, then the exceed action.
        let mut c = Conditioner::new(vec![ladder(
            "af1",
            &[(af(1, 1), 1), (af(1, 2), 1), (af(1, 3), 1)],
            Exceed::Drop,
        )])
        .unwrap();
        let phb = PhbMap::default();
        let t = Instant(0);
        let mut out = vec![];
        for _ in 0..10 {
            let (mut p, i) = frame(af(1, 1), 1000);
            match c.condition(t, 0, &mut p, &i, 0, &phb) {
                Action::Dropped(r) => out.push(r.name().to_string()),
                _ => out.push(dscp_name(dscp_of(&p))),
            }
        }
        assert_eq!(
            out,
            ["AF11", "AF11", "AF11", "AF12", "AF12", "AF12", "AF13", "AF13", "AF13", "policed"]
        );
        assert_eq!(
            *c.counters(0).unwrap(),
            ProfileCounters {
                passed: 3,
                remarked: 6,
                dropped: 1,
                ..Default::default()
            }
        );
        // AF13 traffic starts at the last step, which is empty now; AF12
        // too, and AF11's own bucket is never used by them.
        let mut c = Conditioner::new(vec![ladder(
            "af1",
            &[(af(1, 1), 1), (af(1, 2), 1), (af(1, 3), 1)],
            Exceed::Remark(0),
        )])
        .unwrap();
        let mut out = vec![];
        for d in [af(1, 3); 4].into_iter().chain([af(1, 2); 4]) {
            let (mut p, i) = frame(d, 1000);
            c.condition(t, 0, &mut p, &i, 0, &phb);
            out.push(dscp_name(dscp_of(&p)));
        }
        assert_eq!(out, ["AF13", "AF13", "AF13", "BE", "AF12", "AF12", "AF12", "BE"]);
        // Traffic whose DSCP is not on the ladder (BE, EF) enters at step 0.
        let (mut p, i) = frame(EF, 1000);
        assert_eq!(c.condition(t, 0, &mut p, &i, 0, &phb), Action::Remarked);
        assert_eq!(dscp_of(&p), af(1, 1));
    }

    #[test]
    fn exceed_pass_and_remark_keep_the_checksum_valid() {
        let mut c = Conditioner::new(vec![
            ladder("p", &[(af(2, 1), 1)], Exceed::Pass),
            ladder("r", &[(af(2, 1), 1)], Exceed::Remark(af(2, 3))),
        ])
        .unwrap();
        let phb = PhbMap::default();
        for (prof, want) in [(0, af(2, 2)), (1, af(2, 3))] {
            for k in 0..4 {
                let (mut p, i) = frame(af(2, 2), 1000);
                let a = c.condition(Instant(0), prof, &mut p, &i, 0, &phb);
                // Every frame still parses: the header checksum was updated.
                let got = dscp_of(&p);
                if k < 3 {
                    assert_eq!((a, got), (Action::Remarked, af(2, 1)));
                } else {
                    assert_eq!(got, want);
                }
            }
        }
    }

    fn tcm(tcm: Tcm, aware: bool) -> Conditioner {
        Conditioner::new(vec![Profile {
            name: "tcm".into(),
            kind: ProfileKind::Tcm {
                tcm,
                color_aware: aware,
                green: af(1, 1),
                yellow: Some(af(1, 2)),
                red: None,
            },
            exceed: Exceed::Drop,
        }])
        .unwrap()
    }

    #[test]
    fn srtcm_colours_become_dscps() {
        // RFC 2697: CBS 2000, EBS 1000, both full at t = 0, no refill in
        // between: 2 green, 1 yellow, then red = drop.
        let mut c = tcm(
            Tcm::Sr {
                cir_bps: 8_000,
                cbs: 2_000,
                ebs: 1_000,
            },
            false,
        );
        let phb = PhbMap::default();
        let mut out = vec![];
        for _ in 0..4 {
            let (mut p, i) = frame(0, 1000);
            match c.condition(Instant(0), 0, &mut p, &i, 0, &phb) {
                Action::Dropped(r) => out.push(r.name().to_string()),
                _ => out.push(dscp_name(dscp_of(&p))),
            }
        }
        assert_eq!(out, ["AF11", "AF11", "AF12", "policed"]);
    }

    #[test]
    fn trtcm_colour_aware_takes_pre_colour_from_the_dscp() {
        let tr = Tcm::Tr {
            pir_bps: 16_000,
            pbs: 4_000,
            cir_bps: 8_000,
            cbs: 2_000,
        };
        let phb = PhbMap::default();
        let run = |c: &mut Conditioner, d: u8| {
            let (mut p, i) = frame(d, 1000);
            match c.condition(Instant(0), 0, &mut p, &i, 0, &phb) {
                Action::Dropped(_) => "drop".to_string(),
                _ => dscp_name(dscp_of(&p)),
            }
        };
        // Aware: an AF12 (yellow) packet stays yellow though C has room;
        // an AF13 (red) one is red: dropped.
        let mut c = tcm(tr, true);
        assert_eq!(run(&mut c, af(1, 2)), "AF12");
        assert_eq!(run(&mut c, af(1, 3)), "drop");
        assert_eq!(run(&mut c, af(1, 1)), "AF11");
        // Blind: the same AF12 packet is green.
        let mut c = tcm(tr, false);
        assert_eq!(run(&mut c, af(1, 2)), "AF11");
        assert_eq!(run(&mut c, af(1, 3)), "AF11");
        assert_eq!(run(&mut c, af(1, 3)), "AF12");
        assert_eq!(run(&mut c, af(1, 3)), "AF12");
        assert_eq!(run(&mut c, af(1, 3)), "drop");
    }

    #[test]
    fn shaping_delays_in_order_and_releases_at_the_token_rate() {
        // 8 Mb/s entry step with a 3000 B bucket; 1000 B packets need
        // 1 ms of tokens each. A burst of 20 at t = 0: 3 pass, 17 wait.
        let mut c = Conditioner::new(vec![ladder(
            "s",
            &[(af(1, 1), 8)],
            Exceed::Shape { limit_pkts: 17 },
        )])
        .unwrap();
        let phb = PhbMap::default();
        let t0 = Instant(1_000_000_000);
        let mut passed = 0;
        for uid in 0..20u64 {
            let (mut p, i) = frame(af(1, 2), 1000);
            p.meta.uid = uid;
            match c.condition(t0, 0, &mut p, &i, 7, &phb) {
                Action::Remarked => passed += 1,
                Action::Shaped => assert!(p.data.is_empty()),
                a => panic!("{a:?}"),
            }
        }
        assert_eq!((passed, c.held()), (3, 17));
        // One more overflows the 17-packet queue.
        let (mut p, i) = frame(af(1, 1), 1000);
        assert_eq!(
            c.condition(t0, 0, &mut p, &i, 7, &phb),
            Action::Dropped(DropReason::ShaperFull)
        );
        // A packet bigger than the bucket could never leave: policed.
        let (mut p, i) = frame(af(1, 1), 3_001);
        assert_eq!(
            c.condition(t0, 0, &mut p, &i, 7, &phb),
            Action::Dropped(DropReason::Policed)
        );
        assert!(c.poll_release(t0).is_none());
        let mut times = vec![];
        let mut uids = vec![];
        while let Some(now) = c.poll_at() {
            while let Some((prof, port, p)) = c.poll_release(now) {
                assert_eq!((prof, port, dscp_of(&p)), (0, 7, af(1, 1)));
                times.push(now.0 - t0.0);
                uids.push(p.meta.uid);
            }
        }
        assert_eq!(uids, (3..20).collect::<Vec<u64>>(), "FIFO order");
        let want: Vec<u64> = (1..=17).map(|k| k * 1_000_000).collect();
        assert_eq!(times, want, "one packet per ms, exactly");
        let k = c.counters(0).unwrap();
        assert_eq!((k.remarked, k.shaped, k.dropped, k.released), (3, 17, 2, 17));
        assert_eq!(c.held(), 0);
    }

    #[test]
    fn held_packets_reserve_their_step_against_newcomers() {
        // Two-step ladder, shaping: while AF11 packets wait for step 0,
        // newcomers may use step 1 (leaving as AF12) but not step 0.
        let mut c = Conditioner::new(vec![ladder(
            "s",
            &[(af(1, 1), 8), (af(1, 2), 8)],
            Exceed::Shape { limit_pkts: 100 },
        )])
        .unwrap();
        let phb = PhbMap::default();
        let t0 = Instant(0);
        for _ in 0..7 {
            let (mut p, i) = frame(af(1, 1), 1000);
            c.condition(t0, 0, &mut p, &i, 0, &phb);
        }
        assert_eq!(c.held(), 1);
        // 1 ms later step 0 has 1000 B: the held packet gets it, not the
        // newcomer, which takes step 1 (also refilled) instead.
        let t1 = Instant(1_000_000);
        let (mut p, i) = frame(af(1, 1), 1000);
        assert_eq!(c.condition(t1, 0, &mut p, &i, 0, &phb), Action::Remarked);
        assert_eq!(dscp_of(&p), af(1, 2));
        let (_, _, r) = c.poll_release(t1).unwrap();
        assert_eq!(dscp_of(&r), af(1, 1));
    }
}
