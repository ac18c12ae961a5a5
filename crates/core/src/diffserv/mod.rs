//! DiffServ edge and core routers (seed 004: Lai, "Differentiated Service
//! Capable Embedded Network Gateway and Experimental Backbone Network
//! Design", DEGEB).
//!
//! The architecture is RFC 2475's: at the edge of a DS domain, packets are
//! classified (§2.3.1), metered against a traffic profile and marked,
//! re-marked, shaped or dropped (§2.3.3); inside the domain, core routers
//! only read the DSCP (RFC 2474 §3) and give the packet the per-hop
//! behaviour it selects: EF (RFC 3246), AF1–AF4 with three drop
//! precedences (RFC 2597), best effort, and network control (RFC 4594).
//! The paper's edge router (DSER, §2.1) and core router (DSCR, §2.1) are
//! one type here, [`DsClassifier`]: with rules it is an edge, without
//! rules a core. Its output scheduler is [`DsSched`].
//!
//! - [`dscp`]: codepoint names and the DSCP → PHB map.
//! - [`classify`]: multi-field / BA rules, first match wins.
//! - [`condition`]: profiles — marker, the AF ladder of Tables 4-1 and 4-3
//!   (§4.1, §4.3), srTCM (RFC 2697), trTCM (RFC 2698) — with drop,
//!   re-mark, shape or pass for out-of-profile packets.
//! - [`sched`]: NC and rate-limited EF strict priority over WF²Q+ among
//!   AF1–AF4 and BE, WRED by drop precedence inside each AF class.

pub mod classify;
pub mod condition;
pub mod dscp;
pub mod sched;

pub use classify::{Match, MfClassifier, Rule};
pub use condition::{Action, Conditioner, Exceed, Profile, ProfileCounters, ProfileKind, Step, Tcm};
pub use dscp::{
    dscp_name, parse_dscp, parse_phb, Phb, PhbMap, CLASS_AF1, CLASS_AF2, CLASS_AF3, CLASS_AF4, CLASS_BE,
    CLASS_EF, CLASS_NC,
};
pub use sched::{DsSched, DsSchedConf};

use crate::packet::Packet;
use crate::router::{Classifier, Verdict};
use crate::time::Instant;
use crate::wire::{Ipv4Info, ETH_HDR};

/// The DS byte's DSCP as it is in the frame now (after any re-marking).
fn frame_dscp(data: &[u8]) -> Option<u8> {
    data.get(ETH_HDR + 1).map(|tos| tos >> 2)
}

/// A DiffServ node's input stage: MF classification and conditioning at an
/// edge, then — edge or core — the BA step: `meta.class` and `meta.color`
/// from the PHB of the packet's (possibly new) DSCP, for [`DsSched`].
pub struct DsClassifier {
    mf: MfClassifier,
    cond: Conditioner,
    phb: PhbMap,
    /// Profile index of each rule.
    rule_profile: Vec<usize>,
    matched: Vec<u64>,
    unmatched: u64,
    /// Packets forwarded (now or after shaping) per output DSCP.
    dscp_out: [u64; 64],
}

impl DsClassifier {
    /// An edge router conditioning `rules`' traffic with `profiles`
    /// (`rule.profile` indexes `profiles`), or with no rules a core router.
    /// Every refusal names the rule or profile.
    pub fn new(rules: Vec<Rule>, profiles: Vec<Profile>, phb: PhbMap) -> Result<Self, String> {
        for r in &rules {
            if r.profile >= profiles.len() {
                return Err(format!(
                    "rule `{}` refers to profile #{} but only {} profile(s) are defined",
                    r.name,
                    r.profile,
                    profiles.len()
                ));
            }
        }
        let rule_profile = rules.iter().map(|r| r.profile).collect();
        let n = rules.len();
        Ok(DsClassifier {
            mf: MfClassifier::new(rules)?,
            cond: Conditioner::new(profiles)?,
            phb,
            rule_profile,
            matched: vec![0; n],
            unmatched: 0,
            dscp_out: [0; 64],
        })
    }

    /// A core router (DSCR): DSCP → PHB only.
    pub fn core(phb: PhbMap) -> Self {
        DsClassifier {
            mf: MfClassifier::new(Vec::new()).unwrap_or_else(|_| unreachable!("no rules, no conflicts")),
            cond: Conditioner::new(Vec::new()).unwrap_or_else(|_| unreachable!("no profiles")),
            phb,
            rule_profile: Vec::new(),
            matched: Vec::new(),
            unmatched: 0,
            dscp_out: [0; 64],
        }
    }

    pub fn phb(&self) -> &PhbMap {
        &self.phb
    }
    pub fn rules(&self) -> &[Rule] {
        self.mf.rules()
    }
    pub fn profiles(&self) -> &[Profile] {
        self.cond.profiles()
    }
    pub fn profile_counters(&self, profile: usize) -> Option<&ProfileCounters> {
        self.cond.counters(profile)
    }
    /// Packets that matched rule `i`.
    pub fn rule_matched(&self, i: usize) -> u64 {
        self.matched.get(i).copied().unwrap_or(0)
    }
    /// Packets forwarded with DSCP `d`.
    pub fn dscp_out(&self, d: u8) -> u64 {
        self.dscp_out.get(d as usize).copied().unwrap_or(0)
    }

    /// The BA step every forwarded packet takes (RFC 2475 §2.3.1): class
    /// and drop-precedence colour from the PHB of the DSCP in the frame.
    fn finish(&mut self, pkt: &mut Packet) {
        let d = frame_dscp(&pkt.data).unwrap_or(0);
        let phb = self.phb.get(d);
        pkt.meta.class = phb.class();
        pkt.meta.color = phb.color();
        self.dscp_out[d as usize & 63] += 1;
    }
}

impl Classifier for DsClassifier {
    fn classify(&mut self, now: Instant, pkt: &mut Packet, info: &Ipv4Info, out_port: u16) -> Verdict {
        if let Some(r) = self.mf.classify(info, pkt.meta.in_port) {
            self.matched[r] += 1;
            match self
                .cond
                .condition(now, self.rule_profile[r], pkt, info, out_port, &self.phb)
            {
                Action::Dropped(reason) => return Verdict::Drop(reason),
                Action::Shaped => return Verdict::Held,
                Action::Passed | Action::Remarked => {}
            }
        } else if !self.mf.is_empty() {
            self.unmatched += 1;
        }
        self.finish(pkt);
        Verdict::Pass
    }

    fn poll_release(&mut self, now: Instant) -> Option<(u16, Packet)> {
        let (_, port, mut pkt) = self.cond.poll_release(now)?;
        self.finish(&mut pkt);
        Some((port, pkt))
    }

    fn poll_at(&self) -> Option<Instant> {
        self.cond.poll_at()
    }

    fn held(&self) -> usize {
        self.cond.held()
    }

    /// `rule.<name>.matched`, `unmatched` (edges only),
    /// `profile.<name>.{passed,remarked,shaped,dropped}` and
    /// `dscp_out.<NAME>` for every DSCP forwarded at least once.
    fn counters(&self) -> Vec<(String, u64)> {
        let mut v = Vec::new();
        for (r, n) in self.mf.rules().iter().zip(&self.matched) {
            v.push((format!("rule.{}.matched", r.name), *n));
        }
        if !self.mf.is_empty() {
            v.push(("unmatched".into(), self.unmatched));
        }
        for (i, p) in self.cond.profiles().iter().enumerate() {
            let c = self.cond.counters(i).copied().unwrap_or_default();
            for (what, n) in [
                ("passed", c.passed),
                ("remarked", c.remarked),
                ("shaped", c.shaped),
                ("dropped", c.dropped),
            ] {
                v.push((format!("profile.{}.{what}", p.name), n));
            }
        }
        for (d, n) in self.dscp_out.iter().enumerate() {
            if *n > 0 {
                v.push((format!("dscp_out.{}", dscp_name(d as u8)), *n));
            }
        }
        v
    }
}

#[cfg(test)]
pub(crate) mod testkit {
    use std::net::Ipv4Addr;

    use crate::packet::{Meta, Packet};
    use crate::wire::{self, Ipv4Info, MacAddr, UdpSpec};

    /// A UDP frame whose IP packet is `ip_len` bytes, with DSCP `dscp`.
    pub fn frame(dscp: u8, ip_len: usize) -> (Packet, Ipv4Info) {
        let data = wire::build_udp(
            &UdpSpec {
                src_mac: MacAddr::local(1),
                dst_mac: MacAddr::local(2),
                src: Ipv4Addr::new(10, 0, 1, 1),
                dst: Ipv4Addr::new(10, 0, 2, 1),
                sport: 5001,
                dport: 5001,
                tos: dscp << 2,
                ttl: 64,
                ident: 1,
            },
            ip_len,
            &[],
        );
        let info = wire::parse_ipv4(&data).unwrap_or_else(|e| panic!("test frame: {e:?}"));
        (Packet::new(data, Meta::default()), info)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::dscp::{af, BE, EF};
    use super::testkit::frame;
    use super::*;
    use crate::packet::Color;
    use crate::sched::DropReason;
    use crate::time::Duration;
    use crate::wire;

    const MBIT: u64 = 1_000_000;
    /// Bucket depth of every step: 10 packets of 1500 bytes.
    const BURST: u64 = 15_000;

    fn step(dscp: u8, mbit: u64) -> Step {
        Step {
            dscp,
            rate_bps: mbit * MBIT,
            burst: BURST,
        }
    }

    /// The DSER of Table 4-1: a ladder per AF class with the paper's limits
    /// (AFx1 + AFx2 + AFx3 steps add up to the AFx1 row), EF 10 Mb/s, BE
    /// 30 Mb/s, all policed (dropped) above that. One BA rule per class.
    fn table_4_1(exceed: Exceed) -> DsClassifier {
        let ladders: [(&str, Vec<Step>); 5] = [
            ("ef", vec![step(EF, 10)]),
            (
                "af1",
                vec![step(af(1, 1), 30), step(af(1, 2), 25), step(af(1, 3), 21)],
            ),
            (
                "af2",
                vec![step(af(2, 1), 20), step(af(2, 2), 15), step(af(2, 3), 11)],
            ),
            (
                "af3",
                vec![step(af(3, 1), 10), step(af(3, 2), 5), step(af(3, 3), 1)],
            ),
            ("be", vec![step(BE, 30)]),
        ];
        let mut rules = vec![];
        let mut profiles = vec![];
        for (i, (name, steps)) in ladders.into_iter().enumerate() {
            rules.push(Rule {
                name: name.into(),
                m: Match {
                    dscp: Some(steps.iter().map(|s| s.dscp).collect()),
                    ..Match::default()
                },
                profile: i,
            });
            profiles.push(Profile {
                name: name.into(),
                kind: ProfileKind::Ladder(steps),
                exceed,
            });
        }
        DsClassifier::new(rules, profiles, PhbMap::default()).unwrap()
    }

    /// Offer `dscp` as CBR of 1000-byte IP packets at `mbit` for 1 s of
    /// virtual time (releasing shaped packets as they come due); returns
    /// forwarded IP bits per output DSCP name and the classifier.
    fn offer(mut c: DsClassifier, dscp: u8, mbit: u64) -> (BTreeMap<String, u64>, u64, DsClassifier) {
        let gap = Duration::for_bytes(1000, mbit * MBIT);
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        let mut lost = 0;
        let record = |p: &Packet, out: &mut BTreeMap<String, u64>| {
            let i = wire::parse_ipv4(&p.data).unwrap();
            let phb = PhbMap::default().get(i.dscp());
            assert_eq!((p.meta.class, p.meta.color), (phb.class(), phb.color()));
            *out.entry(dscp_name(i.dscp())).or_default() += i.total_len as u64 * 8;
        };
        let mut t = Instant(0);
        while t < Instant(1_000_000_000) {
            while let Some(at) = c.poll_at().filter(|a| *a <= t) {
                while let Some((_, p)) = c.poll_release(at) {
                    record(&p, &mut out);
                }
                if c.poll_at() == Some(at) {
                    break;
                }
            }
            let (mut p, i) = frame(dscp, 1000);
            match c.classify(t, &mut p, &i, 1) {
                Verdict::Pass => record(&p, &mut out),
                Verdict::Drop(_) => lost += 1,
                Verdict::Held => {}
            }
            t += gap;
        }
        (out, lost, c)
    }

    fn names(m: &BTreeMap<String, u64>) -> Vec<&str> {
        m.keys().map(|s| s.as_str()).collect()
    }
    fn total_mbit(m: &BTreeMap<String, u64>) -> f64 {
        m.values().sum::<u64>() as f64 / 1e6
    }

    /// Table 4-1 (Lai, DEGEB §4.1) with one class at a time offered at
    /// 100 Mb/s: measured bandwidth within a few per cent of the shaped
    /// limit, and Table 4-3's out-of-profile DSCP sets.
    #[test]
    fn golden_table_4_1_and_4_3_out_of_profile() {
        let cases: [(u8, f64, &[&str]); 11] = [
            (EF, 10.0, &["EF"]),
            (af(1, 1), 76.0, &["AF11", "AF12", "AF13"]),
            (af(1, 2), 46.0, &["AF12", "AF13"]),
            (af(1, 3), 21.0, &["AF13"]),
            (af(2, 1), 46.0, &["AF21", "AF22", "AF23"]),
            (af(2, 2), 26.0, &["AF22", "AF23"]),
            (af(2, 3), 11.0, &["AF23"]),
            (af(3, 1), 16.0, &["AF31", "AF32", "AF33"]),
            (af(3, 2), 6.0, &["AF32", "AF33"]),
            (af(3, 3), 1.0, &["AF33"]),
            (BE, 30.0, &["BE"]),
        ];
        for (d, shaped, want) in cases {
            let (out, lost, c) = offer(table_4_1(Exceed::Drop), d, 100);
            let got = total_mbit(&out);
            // The limit plus at most one burst per step (15 kB = 0.12 Mb).
            assert!(
                got >= shaped * 0.995 && got <= shaped + 0.4,
                "{}: {got} Mb/s",
                dscp_name(d)
            );
            assert_eq!(names(&out), want, "{}", dscp_name(d));
            // Loss as in the paper's last column: 1 − shaped/100.
            let loss = lost as f64 / 12_500.0;
            assert!(
                (loss - (1.0 - shaped / 100.0)).abs() < 0.01,
                "{}: loss {loss}",
                dscp_name(d)
            );
            let k: BTreeMap<String, u64> = c.counters().into_iter().collect();
            assert_eq!(k["unmatched"], 0);
        }
    }

    /// Table 4-3, in-profile column: traffic under its profile keeps its
    /// DSCP and loses nothing.
    #[test]
    fn golden_table_4_3_in_profile_keeps_dscp() {
        for (d, mbit) in [
            (EF, 9),
            (af(1, 1), 29),
            (af(1, 2), 24),
            (af(2, 3), 10),
            (af(3, 3), 1),
            (BE, 29),
        ] {
            let (out, lost, _) = offer(table_4_1(Exceed::Drop), d, mbit);
            assert_eq!(names(&out), [dscp_name(d)], "{}", dscp_name(d));
            assert_eq!(lost, 0);
        }
    }

    #[test]
    fn counters_name_rules_profiles_and_output_dscps() {
        let (_, lost, c) = offer(table_4_1(Exceed::Drop), af(1, 1), 100);
        let k: BTreeMap<String, u64> = c.counters().into_iter().collect();
        assert_eq!(k["rule.af1.matched"], 12_500);
        assert_eq!(k["rule.ef.matched"], 0);
        assert_eq!(k["profile.af1.dropped"], lost);
        assert_eq!(k["profile.af1.passed"] + k["profile.af1.remarked"] + lost, 12_500);
        assert_eq!(k["profile.af1.passed"], k["dscp_out.AF11"]);
        assert_eq!(k["profile.af1.remarked"], k["dscp_out.AF12"] + k["dscp_out.AF13"]);
        assert_eq!(k["profile.af1.shaped"], 0);
        assert!(!k.contains_key("dscp_out.EF"), "only DSCPs seen");
        assert_eq!(c.rule_matched(1), 12_500);
        assert_eq!(c.dscp_out(af(1, 1)), k["dscp_out.AF11"]);
    }

    #[test]
    fn shaping_delays_instead_of_dropping() {
        // Same ladder, shaped with a large queue: offered 80 Mb/s for 1 s
        // against AF11's 76 Mb/s. Over that second only the queue's
        // backlog is held, nothing is lost; afterwards the backlog drains
        // at AF11's rate as AF11.
        let shape = Exceed::Shape { limit_pkts: 1_000 };
        let (out, lost, mut c) = offer(table_4_1(shape), af(1, 1), 80);
        assert_eq!(lost, 0);
        assert!((total_mbit(&out) - 76.0).abs() < 0.5, "{}", total_mbit(&out));
        let held = c.held() as u64;
        // 4 Mb/s too much for 1 s, less the bursts: ~480 packets held.
        assert!((440..=500).contains(&held), "{held}");
        let k: BTreeMap<String, u64> = c.counters().into_iter().collect();
        assert_eq!(
            k["profile.af1.shaped"],
            held + (k["dscp_out.AF11"] - k["profile.af1.passed"])
        );
        let mut last = None;
        let mut n = 0;
        while let Some(at) = c.poll_at() {
            while let Some((port, p)) = c.poll_release(at) {
                assert_eq!(port, 1);
                assert_eq!(wire::parse_ipv4(&p.data).unwrap().dscp(), af(1, 1));
                if let Some(l) = last {
                    // 1000 B at 30 Mb/s: 266 666.7 ns apart, to the ns.
                    assert!((266_666..=266_667).contains(&(at.0 - l)), "{}", at.0 - l);
                }
                last = Some(at.0);
                n += 1;
            }
        }
        assert_eq!(n, held);
        assert_eq!(c.held(), 0);
    }

    #[test]
    fn core_router_maps_dscp_to_class_and_colour() {
        let mut phb = PhbMap::default();
        phb.set_named("CS5", "EF").unwrap();
        let mut c = DsClassifier::core(phb);
        for (d, class, colour) in [
            (EF, CLASS_EF, Color::Green),
            (40, CLASS_EF, Color::Green),
            (af(4, 2), CLASS_AF4, Color::Yellow),
            (af(2, 3), CLASS_AF2, Color::Red),
            (48, CLASS_NC, Color::Green),
            (13, CLASS_BE, Color::Green),
        ] {
            let (mut p, i) = frame(d, 200);
            p.meta.class = 99;
            p.meta.color = Color::Red;
            let before = p.data.clone();
            assert_eq!(c.classify(Instant(0), &mut p, &i, 0), Verdict::Pass);
            assert_eq!((p.meta.class, p.meta.color), (class, colour), "{d}");
            assert_eq!(p.data, before, "a core router never re-marks");
        }
        let k = c.counters();
        assert!(k.iter().all(|(n, _)| n.starts_with("dscp_out.")), "{k:?}");
        assert_eq!(k.len(), 6);
    }

    #[test]
    fn edge_marks_by_multi_field_rule_and_core_follows() {
        // Edge: UDP to port 5004 from 10.0.1.0/24 is voice → EF; everything
        // else from there is re-marked BE (untrusted DSCPs cleared).
        let rules = vec![
            Rule {
                name: "voice".into(),
                m: Match {
                    src: Some(("10.0.1.0".parse().unwrap(), 24)),
                    proto: Some(17),
                    dport: Some((5004, 5004)),
                    ..Match::default()
                },
                profile: 0,
            },
            Rule {
                name: "rest".into(),
                m: Match {
                    src: Some(("10.0.1.0".parse().unwrap(), 24)),
                    ..Match::default()
                },
                profile: 1,
            },
        ];
        let profiles = vec![
            Profile {
                name: "ef".into(),
                kind: ProfileKind::Mark(EF),
                exceed: Exceed::Drop,
            },
            Profile {
                name: "clear".into(),
                kind: ProfileKind::Mark(BE),
                exceed: Exceed::Drop,
            },
        ];
        let mut edge = DsClassifier::new(rules, profiles, PhbMap::default()).unwrap();
        let (mut p, i) = frame(af(1, 1), 200); // dport 5001: "rest"
        edge.classify(Instant(0), &mut p, &i, 0);
        assert_eq!(
            (wire::parse_ipv4(&p.data).unwrap().dscp(), p.meta.class),
            (BE, CLASS_BE)
        );
        let (mut p, _) = frame(0, 200);
        p.data[14 + 20 + 2..14 + 20 + 4].copy_from_slice(&5004u16.to_be_bytes());
        let i = wire::parse_ipv4(&p.data).unwrap();
        edge.classify(Instant(0), &mut p, &i, 0);
        let i2 = wire::parse_ipv4(&p.data).unwrap();
        assert_eq!((i2.dscp(), p.meta.class), (EF, CLASS_EF));
        let mut core = DsClassifier::core(PhbMap::default());
        assert_eq!(core.classify(Instant(1), &mut p, &i2, 0), Verdict::Pass);
        assert_eq!(p.meta.class, CLASS_EF);
    }

    #[test]
    fn constructor_checks_profile_indices_and_passes_on_errors() {
        let r = Rule {
            name: "r".into(),
            m: Match::default(),
            profile: 2,
        };
        let e = DsClassifier::new(vec![r], vec![], PhbMap::default())
            .err()
            .unwrap();
        assert!(e.contains("rule `r` refers to profile #2"), "{e}");
        let p = Profile {
            name: "bad".into(),
            kind: ProfileKind::Ladder(vec![]),
            exceed: Exceed::Drop,
        };
        let e = DsClassifier::new(vec![], vec![p], PhbMap::default())
            .err()
            .unwrap();
        assert!(e.contains("`bad`"), "{e}");
    }

    #[test]
    fn policed_and_shaper_full_verdicts() {
        let mk = |exceed| {
            DsClassifier::new(
                vec![Rule {
                    name: "all".into(),
                    m: Match::default(),
                    profile: 0,
                }],
                vec![Profile {
                    name: "p".into(),
                    kind: ProfileKind::Ladder(vec![Step {
                        dscp: EF,
                        rate_bps: 8_000,
                        burst: 1_000,
                    }]),
                    exceed,
                }],
                PhbMap::default(),
            )
            .unwrap()
        };
        let mut c = mk(Exceed::Drop);
        let v: Vec<Verdict> = (0..2)
            .map(|_| {
                let (mut p, i) = frame(0, 1000);
                c.classify(Instant(0), &mut p, &i, 0)
            })
            .collect();
        assert_eq!(v, [Verdict::Pass, Verdict::Drop(DropReason::Policed)]);
        let mut c = mk(Exceed::Shape { limit_pkts: 1 });
        let v: Vec<Verdict> = (0..3)
            .map(|_| {
                let (mut p, i) = frame(0, 1000);
                c.classify(Instant(0), &mut p, &i, 3)
            })
            .collect();
        assert_eq!(
            v,
            [
                Verdict::Pass,
                Verdict::Held,
                Verdict::Drop(DropReason::ShaperFull)
            ]
        );
        assert_eq!(c.held(), 1);
        assert_eq!(c.poll_at(), Some(Instant(1_000_000_000)));
        assert!(c.poll_release(Instant(999_999_999)).is_none());
        let (port, p) = c.poll_release(Instant(1_000_000_000)).unwrap();
        assert_eq!((port, p.meta.class), (3, CLASS_EF));
        assert_eq!(c.poll_at(), None);
    }
}
