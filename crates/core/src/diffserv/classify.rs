//! Multi-field (MF) and behaviour-aggregate classification of a DS edge
//! router.
//!
//! - RFC 2475 §2.3.1: a BA classifier selects on the DSCP only; an MF
//!   classifier on "a combination of one or more header fields, such as
//!   source address, destination address, DS field, protocol ID, source
//!   port and destination port numbers, and other information such as
//!   incoming interface". [`Match`] has exactly those fields, so one rule
//!   type covers both (a rule with only `dscp` is a BA rule).
//! - Lai, DEGEB (seed 004) §2.1: the edge router (DSER) does "MF or DSCP
//!   classification" of ingress traffic before conditioning it.
//!
//! Rules are tried in order and the first match wins, like an ACL or the
//! Linux u32 filter chain. A linear scan over a few hundred rules costs a
//! few hundred cheap integer comparisons per packet, well below the
//! per-packet budget of a software router, so no decision tree is built;
//! rules are compiled to masks and ranges once, in [`MfClassifier::new`].
//!
//! Configuration mistakes that can be detected statically are refused,
//! naming the rules involved: a rule that an earlier rule covers entirely can never match
//! (*shadowed*), and two rules with identical matches but different
//! profiles are *contradictory*. Partial overlaps are legal — "this host's
//! video first, then the rest of its subnet" is the normal way to write
//! rules when the first match wins.

use std::net::Ipv4Addr;

use crate::route::mask;
use crate::wire::Ipv4Info;

/// What a rule selects. `None` matches anything; port ranges are
/// inclusive. Ports are as [`Ipv4Info`] reports them: 0 for packets that
/// are not UDP/TCP first fragments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    /// Source prefix (address, length 0..=32).
    pub src: Option<(Ipv4Addr, u8)>,
    /// Destination prefix.
    pub dst: Option<(Ipv4Addr, u8)>,
    /// IP protocol number.
    pub proto: Option<u8>,
    pub sport: Option<(u16, u16)>,
    pub dport: Option<(u16, u16)>,
    /// Any of these DSCPs (behaviour-aggregate match).
    pub dscp: Option<Vec<u8>>,
    /// Input port index on the router.
    pub in_port: Option<u16>,
}

/// A classification rule: packets matching `m` are conditioned by the
/// profile with index `profile`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub name: String,
    pub m: Match,
    pub profile: usize,
}

/// `a` (None = any) accepts everything `b` does.
fn exact<T: PartialEq>(a: Option<T>, b: Option<T>) -> bool {
    a.is_none() || a == b
}

/// A [`Match`] compiled to masks and ranges; "any" is the full range, so
/// `None` and e.g. `0.0.0.0/0` compare equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Compiled {
    src: (u32, u32),
    dst: (u32, u32),
    proto: Option<u8>,
    sport: (u16, u16),
    dport: (u16, u16),
    /// Bit d set: DSCP d matches.
    dscp: u64,
    in_port: Option<u16>,
}

fn prefix(p: Option<(Ipv4Addr, u8)>, what: &str, rule: &str) -> Result<(u32, u32), String> {
    match p {
        None => Ok((0, 0)),
        Some((_, len)) if len > 32 => Err(format!("rule `{rule}`: {what} prefix length /{len} is above 32")),
        // Host bits are ignored (10.0.0.1/24 means 10.0.0.0/24), as most
        // router configurations do.
        Some((a, len)) => {
            let m = mask(len);
            Ok((u32::from(a) & m, m))
        }
    }
}

fn ports(p: Option<(u16, u16)>, what: &str, rule: &str) -> Result<(u16, u16), String> {
    match p {
        None => Ok((0, u16::MAX)),
        Some((lo, hi)) if lo > hi => Err(format!(
            "rule `{rule}`: {what} range {lo}..{hi} is empty (low > high)"
        )),
        Some(r) => Ok(r),
    }
}

impl Compiled {
    fn new(m: &Match, rule: &str) -> Result<Self, String> {
        let dscp = match &m.dscp {
            None => u64::MAX,
            Some(v) if v.is_empty() => {
                return Err(format!("rule `{rule}`: an empty DSCP list can never match"));
            }
            Some(v) => {
                let mut bits = 0u64;
                for &d in v {
                    if d > 63 {
                        return Err(format!("rule `{rule}`: DSCP {d} is above 63"));
                    }
                    bits |= 1 << d;
                }
                bits
            }
        };
        Ok(Compiled {
            src: prefix(m.src, "source", rule)?,
            dst: prefix(m.dst, "destination", rule)?,
            proto: m.proto,
            sport: ports(m.sport, "source port", rule)?,
            dport: ports(m.dport, "destination port", rule)?,
            dscp,
            in_port: m.in_port,
        })
    }

    #[inline]
    fn matches(&self, info: &Ipv4Info, in_port: u16) -> bool {
        u32::from(info.src) & self.src.1 == self.src.0
            && u32::from(info.dst) & self.dst.1 == self.dst.0
            && self.proto.is_none_or(|p| p == info.proto)
            && (self.sport.0..=self.sport.1).contains(&info.sport)
            && (self.dport.0..=self.dport.1).contains(&info.dport)
            && self.dscp >> info.dscp() & 1 == 1
            && self.in_port.is_none_or(|p| p == in_port)
    }

    /// Every packet `o` matches, `self` matches too.
    fn covers(&self, o: &Compiled) -> bool {
        // A prefix covers another if it is no longer and contains it.
        let pfx = |a: (u32, u32), b: (u32, u32)| a.1 & b.1 == a.1 && b.0 & a.1 == a.0;
        let range = |a: (u16, u16), b: (u16, u16)| a.0 <= b.0 && b.1 <= a.1;
        pfx(self.src, o.src)
            && pfx(self.dst, o.dst)
            && exact(self.proto, o.proto)
            && range(self.sport, o.sport)
            && range(self.dport, o.dport)
            && o.dscp & !self.dscp == 0
            && exact(self.in_port, o.in_port)
    }
}

/// First-match multi-field classifier. See the module documentation.
#[derive(Clone, Debug)]
pub struct MfClassifier {
    rules: Vec<Rule>,
    compiled: Vec<Compiled>,
}

impl MfClassifier {
    /// Compile and check `rules`: names must be unique and non-empty,
    /// prefixes at most /32, port ranges non-empty, DSCP lists non-empty
    /// and ≤ 63; no rule may be shadowed by an earlier one, nor contradict
    /// one (identical match, different profile). O(n²) in the number of
    /// rules, once.
    pub fn new(rules: Vec<Rule>) -> Result<Self, String> {
        let mut compiled: Vec<Compiled> = Vec::with_capacity(rules.len());
        for (j, r) in rules.iter().enumerate() {
            if r.name.is_empty() {
                return Err(format!("rule #{j} has no name"));
            }
            if let Some(i) = rules[..j].iter().position(|o| o.name == r.name) {
                return Err(format!("rule `{}` is defined twice (#{i} and #{j})", r.name));
            }
            let c = Compiled::new(&r.m, &r.name)?;
            // Contradictions first: an identical match is also covered, but
            // "contradicts" is the more useful message.
            for (i, e) in compiled.iter().enumerate() {
                if *e == c && rules[i].profile != r.profile {
                    return Err(format!(
                        "rule `{}` contradicts rule `{}`: they match the same packets but map them \
                         to different profiles (#{} and #{})",
                        r.name, rules[i].name, r.profile, rules[i].profile
                    ));
                }
            }
            if let Some(i) = compiled.iter().position(|e| e.covers(&c)) {
                return Err(format!(
                    "rule `{}` can never match: the earlier rule `{}` matches every packet it does \
                     (first match wins; put the more specific rule first)",
                    r.name, rules[i].name
                ));
            }
            compiled.push(c);
        }
        Ok(MfClassifier { rules, compiled })
    }

    /// Index of the first rule matching a packet that arrived on
    /// `in_port`, or `None`.
    pub fn classify(&self, info: &Ipv4Info, in_port: u16) -> Option<usize> {
        self.compiled.iter().position(|c| c.matches(info, in_port))
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
    pub fn len(&self) -> usize {
        self.rules.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::IPPROTO_UDP;
    use proptest::prelude::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }
    fn info(src: &str, dst: &str, proto: u8, sport: u16, dport: u16, dscp: u8) -> Ipv4Info {
        Ipv4Info {
            ihl: 20,
            total_len: 100,
            tos: dscp << 2,
            ttl: 64,
            proto,
            src: ip(src),
            dst: ip(dst),
            sport,
            dport,
        }
    }
    fn rule(name: &str, m: Match, profile: usize) -> Rule {
        Rule {
            name: name.into(),
            m,
            profile,
        }
    }

    #[test]
    fn first_match_wins_on_every_field() {
        let rules = vec![
            rule(
                "video",
                Match {
                    src: Some((ip("10.0.1.5"), 32)),
                    proto: Some(IPPROTO_UDP),
                    dport: Some((5000, 5100)),
                    ..Match::default()
                },
                0,
            ),
            rule(
                "af1",
                Match {
                    dscp: Some(vec![10, 12, 14]),
                    in_port: Some(1),
                    ..Match::default()
                },
                1,
            ),
            rule(
                "subnet",
                Match {
                    src: Some((ip("10.0.1.0"), 24)),
                    dst: Some((ip("10.0.2.0"), 24)),
                    sport: Some((1000, 1000)),
                    ..Match::default()
                },
                2,
            ),
        ];
        let c = MfClassifier::new(rules).unwrap();
        assert_eq!(
            c.classify(&info("10.0.1.5", "10.0.2.1", 17, 1000, 5050, 0), 0),
            Some(0)
        );
        assert_eq!(
            c.classify(&info("10.0.1.5", "10.0.2.1", 6, 1000, 5050, 0), 0),
            Some(2)
        );
        assert_eq!(
            c.classify(&info("10.0.1.5", "10.0.2.1", 17, 1000, 5101, 0), 0),
            Some(2)
        );
        assert_eq!(
            c.classify(&info("10.0.1.5", "10.0.2.1", 17, 1000, 5101, 12), 1),
            Some(1)
        );
        assert_eq!(
            c.classify(&info("10.0.1.5", "10.0.2.1", 17, 1000, 5101, 12), 2),
            Some(2)
        );
        assert_eq!(
            c.classify(&info("10.0.1.5", "10.0.3.1", 17, 1000, 5101, 0), 0),
            None
        );
        assert_eq!(
            c.classify(&info("10.0.1.5", "10.0.2.1", 17, 999, 5101, 0), 0),
            None
        );
    }

    #[test]
    fn shadowed_rule_is_refused_naming_both() {
        let wide = rule(
            "all-udp",
            Match {
                proto: Some(17),
                ..Match::default()
            },
            0,
        );
        let narrow = rule(
            "voice",
            Match {
                proto: Some(17),
                dport: Some((5060, 5061)),
                src: Some((ip("10.1.0.0"), 16)),
                ..Match::default()
            },
            1,
        );
        let e = MfClassifier::new(vec![wide.clone(), narrow.clone()]).unwrap_err();
        assert!(
            e.contains("`voice` can never match") && e.contains("`all-udp`"),
            "{e}"
        );
        // Specific first is fine.
        MfClassifier::new(vec![narrow, wide]).unwrap();
        // "any" written as a /0 prefix or a full port range shadows too.
        let e = MfClassifier::new(vec![
            rule(
                "any",
                Match {
                    src: Some((ip("0.0.0.0"), 0)),
                    dport: Some((0, 65535)),
                    ..Match::default()
                },
                0,
            ),
            rule("later", Match::default(), 0),
        ])
        .unwrap_err();
        assert!(e.contains("`later`") && e.contains("`any`"), "{e}");
        // DSCP subsets are covered by supersets.
        let e = MfClassifier::new(vec![
            rule(
                "af1x",
                Match {
                    dscp: Some(vec![10, 12, 14]),
                    ..Match::default()
                },
                0,
            ),
            rule(
                "af12",
                Match {
                    dscp: Some(vec![12]),
                    ..Match::default()
                },
                1,
            ),
        ])
        .unwrap_err();
        assert!(e.contains("`af12` can never match"), "{e}");
    }

    #[test]
    fn contradiction_and_bad_fields_are_refused() {
        let m = Match {
            dst: Some((ip("10.0.2.7"), 24)),
            ..Match::default()
        };
        let same = Match {
            dst: Some((ip("10.0.2.0"), 24)),
            ..Match::default()
        };
        let e = MfClassifier::new(vec![rule("a", m.clone(), 0), rule("b", same, 1)]).unwrap_err();
        assert!(e.contains("`b` contradicts rule `a`"), "{e}");
        let e = MfClassifier::new(vec![rule("a", m.clone(), 0), rule("b", m.clone(), 0)]).unwrap_err();
        assert!(e.contains("`b` can never match"), "{e}");
        let bad = |m: Match| MfClassifier::new(vec![rule("r1", m, 0)]).unwrap_err();
        assert!(bad(Match {
            dport: Some((10, 9)),
            ..Match::default()
        })
        .contains("`r1`: destination port range 10..9 is empty"));
        assert!(bad(Match {
            src: Some((ip("1.2.3.4"), 33)),
            ..Match::default()
        })
        .contains("/33"));
        assert!(bad(Match {
            dscp: Some(vec![]),
            ..Match::default()
        })
        .contains("empty DSCP"));
        assert!(bad(Match {
            dscp: Some(vec![64]),
            ..Match::default()
        })
        .contains("64"));
        let e = MfClassifier::new(vec![rule("x", m.clone(), 0), rule("x", Match::default(), 0)]).unwrap_err();
        assert!(e.contains("defined twice"), "{e}");
    }

    #[test]
    fn hundreds_of_disjoint_rules_are_accepted() {
        let rules: Vec<Rule> = (0..500u32)
            .map(|i| {
                rule(
                    &format!("host{i}"),
                    Match {
                        src: Some((Ipv4Addr::from(0x0a00_0000 + i), 32)),
                        ..Match::default()
                    },
                    i as usize % 3,
                )
            })
            .collect();
        let c = MfClassifier::new(rules).unwrap();
        assert_eq!(
            c.classify(&info("10.0.1.243", "1.1.1.1", 17, 1, 1, 0), 0),
            Some(499)
        );
    }

    fn arb_match() -> impl Strategy<Value = Match> {
        let pfx = prop::option::of((0u32..16, prop::sample::select(vec![0u8, 8, 24, 30, 32])))
            .prop_map(|o| o.map(|(a, l)| (Ipv4Addr::from(0x0a00_0000 | a), l)));
        let range = prop::option::of((0u16..8, 0u16..8)).prop_map(|o| o.map(|(a, b)| (a.min(b), a.max(b))));
        (
            pfx.clone(),
            pfx,
            prop::option::of(prop::sample::select(vec![6u8, 17])),
            range.clone(),
            range,
            prop::option::of(prop::collection::vec(0u8..4, 1..3)),
            prop::option::of(0u16..2),
        )
            .prop_map(|(src, dst, proto, sport, dport, dscp, in_port)| Match {
                src,
                dst,
                proto,
                sport,
                dport,
                dscp,
                in_port,
            })
    }

    proptest! {
        /// `covers` is sound: when a rule set is refused as shadowed, the
        /// shadowed rule really never wins on sampled packets; when
        /// accepted, classification equals a naive first-match scan.
        #[test]
        fn classify_equals_naive_scan(ms in prop::collection::vec(arb_match(), 1..6),
                                      pkts in prop::collection::vec((0u32..16, 0u32..16, any::<bool>(),
                                          0u16..8, 0u16..8, 0u8..4, 0u16..2), 1..40)) {
            let rules: Vec<Rule> = ms.iter().enumerate().map(|(i, m)| rule(&format!("r{i}"), m.clone(), i)).collect();
            let naive: Vec<Compiled> = ms.iter().map(|m| Compiled::new(m, "x").unwrap()).collect();
            let res = MfClassifier::new(rules);
            for (s, d, udp, sp, dp, dscp, port) in pkts {
                let mut i = info("0.0.0.0", "0.0.0.0", if udp { 17 } else { 6 }, sp, dp, dscp);
                i.src = Ipv4Addr::from(0x0a00_0000 | s);
                i.dst = Ipv4Addr::from(0x0a00_0000 | d);
                let want = naive.iter().position(|c| c.matches(&i, port));
                match &res {
                    Ok(c) => prop_assert_eq!(c.classify(&i, port), want),
                    Err(_) => {
                        // The refused set's rules can only lose to earlier
                        // ones; nothing to compare beyond not panicking.
                    }
                }
            }
            // Soundness of `covers`: whenever a covers b, every sampled packet
            // matching b matches a.
            for a in &naive {
                for b in &naive {
                    if a.covers(b) {
                        for s in 0..16u32 {
                            let mut i = info("0.0.0.0", "0.0.0.0", b.proto.unwrap_or(17), b.sport.0, b.dport.1, b.dscp.trailing_zeros() as u8);
                            i.src = Ipv4Addr::from(b.src.0 | ((0x0a00_0000 | s) & !b.src.1));
                            i.dst = Ipv4Addr::from(b.dst.0 | ((0x0a00_0000 | s) & !b.dst.1));
                            let port = b.in_port.unwrap_or(0);
                            if b.matches(&i, port) {
                                prop_assert!(a.matches(&i, port));
                            }
                        }
                    }
                }
            }
        }
    }
}
