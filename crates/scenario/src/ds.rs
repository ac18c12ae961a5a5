//! Validation of `[diffserv]` (seed 004; RFC 2475 traffic conditioning):
//! PHB scheduler settings, DSCP → PHB overrides, traffic profiles (mark,
//! AF ladder, srTCM/trTCM) and multi-field rules. Every refusal names the
//! profile or rule and points at its line.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use crate::load::{Ctx, ScenarioError};
use crate::model::*;
use crate::raw::{self, S};
use qosnet_core::route::Ipv4Prefix;

pub(crate) fn diffserv(
    cx: &Ctx,
    d: &raw::DiffServ,
    names: &HashMap<String, usize>,
    nodes: &[Node],
    links: &[Link],
) -> Result<DiffServParams, ScenarioError> {
    let mut p = DiffServParams::default();
    let max_cap = links.iter().map(|l| l.capacity_bps).max().unwrap_or(u64::MAX);
    if let Some(r) = &d.ef_rate {
        let v = cx.rate(r.get_ref(), r.span())?;
        if v > max_cap {
            return Err(cx.err(
                r.span(),
                format!("ef_rate {} is above every link's capacity", r.get_ref()),
                "EF must be a fraction of the link (RFC 3246)",
            ));
        }
        p.ef_rate_bps = Some(v);
    }
    if let Some(b) = &d.ef_burst {
        p.ef_burst = cx.int(b, 64, 1 << 30, "ef_burst")?;
    }
    if let Some(w) = &d.af_weights {
        let v = w.get_ref();
        if v.len() != 4 || v.iter().any(|x| *x <= 0 || *x > 1_000_000) {
            return Err(cx.err(
                w.span(),
                "af_weights needs four positive weights (AF1..AF4)",
                "e.g. af_weights = [4, 3, 2, 1]; a weight of zero would starve a class",
            ));
        }
        p.af_weights = [v[0] as u32, v[1] as u32, v[2] as u32, v[3] as u32];
    }
    if let Some(b) = &d.be_weight {
        p.be_weight = cx.int(b, 1, 1_000_000, "be_weight")?;
    }
    if let Some(w) = d.wred {
        p.wred = w;
    }
    if let Some(m) = &d.phb {
        for (k, v) in m.get_ref() {
            let code = cx.dscp(k, m.span())?;
            if !["EF", "AF1", "AF2", "AF3", "AF4", "BE", "NC"].contains(&v.as_str()) {
                return Err(cx.err(
                    m.span(),
                    format!("unknown PHB `{v}` for {k}"),
                    "PHBs: EF, AF1, AF2, AF3, AF4, BE, NC",
                ));
            }
            p.phb_overrides.push((code, v.clone()));
        }
    }
    let mut pnames: HashMap<String, usize> = HashMap::new();
    for pr in &d.profiles {
        let span = pr.span();
        let pr = pr.get_ref();
        let name = pr.name.get_ref().clone();
        if pnames.insert(name.clone(), p.profiles.len()).is_some() {
            return Err(cx.err(
                pr.name.span(),
                format!("duplicate profile `{name}`"),
                "give every profile a unique name",
            ));
        }
        let kind = profile_kind(cx, pr, &name, span, max_cap)?;
        let exceed = match pr.exceed.as_ref().map(|e| (e.get_ref().as_str(), e.span())) {
            None | Some(("drop", _)) => DsExceed::Drop,
            Some(("pass", _)) => DsExceed::Pass,
            Some(("shape", _)) => DsExceed::Shape(match &pr.shape_queue {
                Some(q) => cx.int(q, 1, 1 << 20, "shape_queue")?,
                None => 100,
            }),
            Some(("remark", sp)) => {
                let d = pr.exceed_dscp.as_ref().ok_or_else(|| {
                    cx.err(
                        sp.clone(),
                        "exceed = \"remark\" needs exceed_dscp",
                        "e.g. exceed_dscp = \"BE\"",
                    )
                })?;
                DsExceed::Remark(cx.dscp(d.get_ref(), d.span())?)
            }
            Some((e, sp)) => {
                return Err(cx.err(
                    sp,
                    format!("unknown exceed action `{e}`"),
                    "use \"drop\", \"remark\", \"shape\" or \"pass\"",
                ))
            }
        };
        p.profiles.push(DsProfileSpec { name, kind, exceed });
    }
    let mut rnames = HashSet::new();
    for r in &d.rules {
        let r = r.get_ref();
        let name = r.name.get_ref().clone();
        if !rnames.insert(name.clone()) {
            return Err(cx.err(
                r.name.span(),
                format!("duplicate rule `{name}`"),
                "give every rule a unique name",
            ));
        }
        let profile = *pnames.get(r.profile.get_ref()).ok_or_else(|| {
            cx.err(
                r.profile.span(),
                format!("rule `{name}`: no profile named `{}`", r.profile.get_ref()),
                "define it with [[diffserv.profile]]",
            )
        })?;
        p.rules.push(rule(cx, r, name, profile, names, nodes)?);
    }
    Ok(p)
}

/// The deepest token bucket accepted: 1 GiB.
const MAX_BURST: i64 = 1 << 30;

fn profile_kind(
    cx: &Ctx,
    pr: &raw::DsProfile,
    name: &str,
    span: Range<usize>,
    max_cap: u64,
) -> Result<DsKind, ScenarioError> {
    let kinds = [pr.mark.is_some(), pr.ladder.is_some(), pr.tcm.is_some()]
        .iter()
        .filter(|b| **b)
        .count();
    if kinds != 1 {
        return Err(cx.err(
            span,
            format!("profile `{name}` needs exactly one of mark, ladder, tcm"),
            "mark = \"EF\"; ladder = [{ dscp = \"AF11\", rate = \"30Mb/s\", burst = 30000 }, ...]; or tcm = { kind = \"sr\", ... }",
        ));
    }
    if let Some(m) = &pr.mark {
        return Ok(DsKind::Mark(cx.dscp(m.get_ref(), m.span())?));
    }
    if let Some(l) = &pr.ladder {
        let mut steps = Vec::new();
        for st in l.get_ref() {
            let r = cx.rate(&st.rate, l.span())?;
            if r > max_cap {
                return Err(cx.err(
                    l.span(),
                    format!(
                        "profile `{name}`: step {} rate {} is above link capacity",
                        st.dscp, st.rate
                    ),
                    "a profile cannot admit more than the link carries",
                ));
            }
            if st.burst < 64 || st.burst > MAX_BURST {
                return Err(cx.err(
                    l.span(),
                    format!(
                        "profile `{name}`: burst {} B for {} is out of range",
                        st.burst, st.dscp
                    ),
                    "a burst holds at least one packet (64 B) and at most 1 GiB, e.g. burst = 15000",
                ));
            }
            steps.push((cx.dscp(&st.dscp, l.span())?, r, st.burst as u64));
        }
        if steps.is_empty() {
            return Err(cx.err(
                l.span(),
                format!("profile `{name}` has an empty ladder"),
                "list at least one step",
            ));
        }
        return Ok(DsKind::Ladder(steps));
    }
    let t = pr
        .tcm
        .as_ref()
        .ok_or_else(|| cx.err(span.clone(), "missing tcm", ""))?;
    let ts = t.span();
    let t = t.get_ref();
    let two = match t.kind.as_str() {
        "sr" => false,
        "tr" => true,
        k => {
            return Err(cx.err(
                ts,
                format!("unknown tcm kind `{k}`"),
                "kind = \"sr\" (RFC 2697) or \"tr\" (RFC 2698)",
            ))
        }
    };
    let colour = |c: &str| -> Result<Option<u8>, ScenarioError> {
        if c == "drop" {
            Ok(None)
        } else {
            cx.dscp(c, ts.clone()).map(Some)
        }
    };
    let green = colour(&t.green)?
        .ok_or_else(|| cx.err(ts.clone(), "green packets cannot be dropped", "green = a DSCP"))?;
    let cir_bps = cx.rate(&t.cir, ts.clone())?;
    if t.cbs < 64 {
        return Err(cx.err(ts, "cbs must hold at least one packet", "e.g. cbs = 15000"));
    }
    for (k, v) in [("cbs", Some(t.cbs)), ("ebs", t.ebs), ("pbs", t.pbs)] {
        if v.is_some_and(|v| !(0..=MAX_BURST).contains(&v)) {
            return Err(cx.err(
                ts,
                format!("profile `{name}`: {k} = {} is out of range", v.unwrap_or(0)),
                format!("bursts are 0 to {MAX_BURST} bytes (1 GiB)"),
            ));
        }
    }
    let (pir_bps, pbs, ebs) = if two {
        let pir = t
            .pir
            .as_ref()
            .ok_or_else(|| cx.err(ts.clone(), "trTCM needs pir and pbs", "RFC 2698: pir >= cir"))?;
        let pir_bps = cx.rate(pir, ts.clone())?;
        if pir_bps < cir_bps {
            return Err(cx.err(ts, "pir is below cir", "RFC 2698 requires PIR >= CIR"));
        }
        (pir_bps, t.pbs.unwrap_or(t.cbs).max(0) as u64, 0)
    } else {
        (0, 0, t.ebs.unwrap_or(t.cbs).max(0) as u64)
    };
    Ok(DsKind::Tcm {
        two_rate: two,
        cir_bps,
        cbs: t.cbs as u64,
        ebs,
        pir_bps,
        pbs,
        aware: t.aware,
        green,
        yellow: colour(&t.yellow)?,
        red: colour(&t.red)?,
    })
}

fn rule(
    cx: &Ctx,
    r: &raw::DsRule,
    name: String,
    profile: usize,
    names: &HashMap<String, usize>,
    nodes: &[Node],
) -> Result<DsRuleSpec, ScenarioError> {
    let node_of = |v: &str, sp: Range<usize>| -> Result<usize, ScenarioError> {
        names.get(v).copied().ok_or_else(|| {
            cx.err(
                sp,
                format!("rule `{name}`: `{v}` is not a node"),
                "name a node of the scenario",
            )
        })
    };
    let mut rn = Vec::new();
    match &r.nodes {
        Some(ns) => {
            for n in ns.get_ref() {
                let i = node_of(n, ns.span())?;
                if !nodes[i].is_router() {
                    return Err(cx.err(
                        ns.span(),
                        format!("rule `{name}`: `{n}` is a host"),
                        "rules run on routers",
                    ));
                }
                rn.push(i);
            }
        }
        None => rn.extend((0..nodes.len()).filter(|&i| nodes[i].is_router())),
    }
    let addr = |v: &Option<S<String>>| -> Result<Option<AddrSpec>, ScenarioError> {
        let Some(v) = v else { return Ok(None) };
        if v.get_ref().contains('/') {
            let p = Ipv4Prefix::parse_cidr(v.get_ref())
                .map(|p| p.network())
                .map_err(|e| {
                    cx.err(
                        v.span(),
                        e.to_string(),
                        "a prefix such as \"10.0.3.0/24\" or a node name",
                    )
                })?;
            Ok(Some(AddrSpec::Prefix(p)))
        } else {
            Ok(Some(AddrSpec::Node(node_of(v.get_ref(), v.span())?)))
        }
    };
    let ports = |v: &Option<S<raw::PortSpec>>| -> Result<Option<(u16, u16)>, ScenarioError> {
        let Some(v) = v else { return Ok(None) };
        let (lo, hi) = match v.get_ref() {
            raw::PortSpec::One(p) => (*p, *p),
            raw::PortSpec::Range(r) if r.len() == 2 => (r[0], r[1]),
            raw::PortSpec::Range(_) => {
                return Err(cx.err(
                    v.span(),
                    "a port range is [low, high]",
                    "e.g. dport = [5000, 5100]",
                ))
            }
        };
        if !(0..=65535).contains(&lo) || !(0..=65535).contains(&hi) || lo > hi {
            return Err(cx.err(
                v.span(),
                format!("rule `{name}`: port range {lo}..{hi} is empty or out of range"),
                "ports are 0..65535, low <= high",
            ));
        }
        Ok(Some((lo as u16, hi as u16)))
    };
    let proto = match &r.proto {
        None => None,
        Some(v) => Some(match v.get_ref() {
            raw::ProtoSpec::Name(n) if n == "udp" => 17,
            raw::ProtoSpec::Name(n) if n == "tcp" => 6,
            raw::ProtoSpec::Name(n) if n == "icmp" => 1,
            raw::ProtoSpec::Number(n) if (0..=255).contains(n) => *n as u8,
            _ => {
                return Err(cx.err(
                    v.span(),
                    "unknown protocol",
                    "use \"udp\", \"tcp\", \"icmp\" or a number 0..255",
                ))
            }
        }),
    };
    let dscp = match &r.dscp {
        None => None,
        Some(v) => Some(
            v.get_ref()
                .items()
                .iter()
                .map(|x| cx.dscp(x, v.span()))
                .collect::<Result<Vec<u8>, _>>()?,
        ),
    };
    let in_node = match &r.in_ {
        None => None,
        Some(v) => Some(node_of(v.get_ref(), v.span())?),
    };
    Ok(DsRuleSpec {
        name: name.clone(),
        nodes: rn,
        profile,
        src: addr(&r.src)?,
        dst: addr(&r.dst)?,
        proto,
        sport: ports(&r.sport)?,
        dport: ports(&r.dport)?,
        dscp,
        in_node,
    })
}
