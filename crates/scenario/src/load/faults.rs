//! `[[fault]]`: node failures during a run. `kind = "kill"` fails any node
//! but a segment (the simulator stops it dead and, with `restart`, boots it
//! again); the RETHER kinds (`crash`, `crash-holding`, `drop-token`,
//! `corrupt-token`, `lose-sent-token`, `corrupt-sent-token`) are the station's own failure model and go to
//! `[rether]` (`rether.rs`), so `[[fault]]` is the one syntax for both and
//! `[[rether.fault]]` stays as its older spelling. STSDR forwarder and
//! master failures (seed 003 §IV-A, "leader election ... may be adopted")
//! are what the kill kind was built for. `kind = "stall"` freezes nodes
//! for a while and lets them run on (a router's CPU taken from it, as the
//! live lab's `--stall` does); it is the one kind that takes several nodes.

use super::{Ctx, Names, ScenarioError};
use crate::model::*;
use crate::raw;
use qosnet_core::Duration;

/// The kind that fails a node from outside (the engine), not the node's
/// own failure model.
pub(super) const KILL: &str = "kill";
/// The kind that freezes nodes for a while (a CPU taken by something
/// else: an interrupt storm, a higher-priority task), then lets them run on.
pub(super) const STALL: &str = "stall";
/// The kinds the engine injects; the others are RETHER stations' own.
pub(super) const ENGINE_KINDS: [&str; 2] = [KILL, STALL];
/// How many stalls (periods times nodes) a scenario may ask for: a bound
/// on the schedule the simulator builds.
pub(crate) const MAX_STALLS: u64 = 1_000_000;

/// The single `node` of a fault entry: every kind but `stall` names one
/// node, and the stall-only keys are refused on them.
pub(super) fn one_node<'a>(cx: &Ctx, fl: &'a raw::Fault) -> Result<&'a toml::Spanned<String>, ScenarioError> {
    let only_stall = [
        ("nodes", fl.nodes.as_ref().map(|v| v.span())),
        ("for", fl.for_.as_ref().map(|v| v.span())),
        ("every", fl.every.as_ref().map(|v| v.span())),
        ("until", fl.until.as_ref().map(|v| v.span())),
    ];
    if let Some((k, Some(sp))) = only_stall.into_iter().find(|(_, sp)| sp.is_some()) {
        return Err(cx.err(
            sp,
            format!("`{k}` does not apply to kind = \"{}\"", fl.kind.get_ref()),
            "nodes, for, every and until go with kind = \"stall\"",
        ));
    }
    fl.node.as_ref().ok_or_else(|| {
        cx.err(
            fl.kind.span(),
            format!("a kind = \"{}\" fault names no `node`", fl.kind.get_ref()),
            "add node = \"NAME\": the node the fault happens at",
        )
    })
}

/// A fault's `at`: a duration before the end of the run (`within` is the
/// hint of both errors).
fn start_at(cx: &Ctx, fl: &raw::Fault, duration: Duration, within: &str) -> Result<Duration, ScenarioError> {
    let at = cx.dur_max(&fl.at, super::limits::MAX_RUN, "at", within)?;
    if at >= duration {
        return Err(cx.err(
            fl.at.span(),
            format!("at = {} is not within the run ({duration})", fl.at.get_ref()),
            within,
        ));
    }
    Ok(at)
}

/// `count` belongs to the RETHER token faults, not to `kind`.
fn no_count(cx: &Ctx, fl: &raw::Fault, kind: &str) -> Result<(), ScenarioError> {
    match &fl.count {
        Some(c) => Err(cx.err(
            c.span(),
            format!("`count` does not apply to kind = \"{kind}\""),
            "count goes with the RETHER token faults",
        )),
        None => Ok(()),
    }
}

/// Every `kind = "stall"` fault of `[[fault]]`, validated: the nodes it
/// freezes, when, for how long and how often.
pub(super) fn stalls(
    cx: &Ctx,
    f: &raw::File,
    names: &Names,
    nodes: &[Node],
    duration: Duration,
) -> Result<Vec<NodeStall>, ScenarioError> {
    let mut out = Vec::new();
    let mut total: u64 = 0;
    let within = "a stall starts within the run: before the scenario's duration";
    for s in &f.faults {
        let fl = s.get_ref();
        if fl.kind.get_ref() != STALL {
            continue;
        }
        if let Some(r) = &fl.restart {
            return Err(cx.err(
                r.span(),
                "`restart` does not apply to kind = \"stall\"",
                "a stalled node runs on by itself after `for`; restart goes with kind = \"kill\"",
            ));
        }
        no_count(cx, fl, STALL)?;
        // The nodes: `node`, `nodes`, or both (their union, each once).
        let mut idx: Vec<usize> = Vec::new();
        if let Some(n) = &fl.node {
            idx.push(names.lookup(cx, n, "fault node")?);
        }
        if let Some(list) = &fl.nodes {
            if list.get_ref().is_empty() {
                return Err(cx.err(
                    list.span(),
                    "`nodes` is empty",
                    "list the nodes stalled together, e.g. nodes = [\"R1\", \"R2\"]",
                ));
            }
            for name in list.get_ref() {
                let v = toml::Spanned::new(list.span(), name.clone());
                let n = names.lookup(cx, &v, "fault node")?;
                if idx.contains(&n) {
                    return Err(cx.err(
                        list.span(),
                        format!("`{name}` is listed twice"),
                        "name each stalled node once (node and nodes together count as one list)",
                    ));
                }
                idx.push(n);
            }
        }
        if idx.is_empty() {
            return Err(cx.err(
                fl.kind.span(),
                "a kind = \"stall\" fault names no node",
                "add node = \"NAME\" or nodes = [\"A\", \"B\"] (nodes sharing one CPU)",
            ));
        }
        for &n in &idx {
            if nodes[n].is_medium() {
                return Err(cx.err(
                    fl.node.as_ref().map_or_else(|| fl.kind.span(), |v| v.span()),
                    format!("`{}` is a segment, a cable: it cannot stall", nodes[n].name),
                    "stall the stations on it instead",
                ));
            }
        }
        let at = start_at(cx, fl, duration, within)?;
        let Some(for_) = &fl.for_ else {
            return Err(cx.err(
                fl.kind.span(),
                "a kind = \"stall\" fault has no `for`",
                "add for = \"1ms\": how long each stall lasts",
            ));
        };
        let len = cx.dur_max(
            for_,
            super::limits::MAX_RUN,
            "for",
            "a stall lasts less than a run",
        )?;
        if len == Duration::ZERO {
            return Err(cx.err(
                for_.span(),
                "for = 0: a stall of no time",
                "give each stall a length, e.g. for = \"1ms\"",
            ));
        }
        let every = match &fl.every {
            None => None,
            Some(e) => {
                let p = cx.dur_max(e, super::limits::MAX_RUN, "every", "the period is within a run")?;
                if p <= len {
                    return Err(cx.err(
                        e.span(),
                        format!("every = {} is not longer than for = {}", e.get_ref(), for_.get_ref()),
                        "stalls repeat after the node ran again: every > for (one long stall: leave every out)",
                    ));
                }
                Some(p)
            }
        };
        let until = match &fl.until {
            None => duration,
            Some(u) => {
                if every.is_none() {
                    return Err(cx.err(
                        u.span(),
                        "`until` without `every`",
                        "until ends repeated stalls; add every = \"500ms\" or leave until out",
                    ));
                }
                let t = cx.dur_max(u, super::limits::MAX_RUN, "until", within)?;
                if t <= at {
                    return Err(cx.err(
                        u.span(),
                        "until is not after at",
                        "repeated stalls start at `at` and end before `until`",
                    ));
                }
                t.min(duration)
            }
        };
        let count = match every {
            None => 1,
            Some(p) => (until.as_nanos() - at.as_nanos()).div_ceil(p.as_nanos()),
        };
        total = total.saturating_add(count.saturating_mul(idx.len() as u64));
        if total > MAX_STALLS {
            return Err(cx.err(
                fl.every.as_ref().map_or_else(|| fl.at.span(), |v| v.span()),
                format!("the stall faults ask for {total} stalls, more than {MAX_STALLS}"),
                "stall less often (a longer every) or for a shorter while (until)",
            ));
        }
        out.push(NodeStall {
            nodes: idx,
            at,
            len,
            every,
            until,
        });
    }
    Ok(out)
}

/// Every `kind = "kill"` fault of `[[fault]]` and `[[rether.fault]]`,
/// validated, in time order.
pub(super) fn kills(
    cx: &Ctx,
    f: &raw::File,
    names: &Names,
    nodes: &[Node],
    duration: Duration,
) -> Result<Vec<NodeKill>, ScenarioError> {
    let rether = f.rether.as_ref().and_then(|r| r.get_ref().fault.as_ref());
    let all = f.faults.iter().chain(rether.into_iter().flatten());
    // (kill, span of the whole entry) for the overlap check.
    let mut v: Vec<(NodeKill, std::ops::Range<usize>)> = Vec::new();
    let within = "a fault happens within the run: before the scenario's duration";
    for s in all {
        let fl = s.get_ref();
        if fl.kind.get_ref() != KILL {
            continue;
        }
        let node = one_node(cx, fl)?;
        let n = names.lookup(cx, node, "fault node")?;
        if nodes[n].is_medium() {
            return Err(cx.err(
                node.span(),
                format!("`{}` is a segment, a cable: it cannot be killed", nodes[n].name),
                "kill the stations on it instead",
            ));
        }
        no_count(cx, fl, KILL)?;
        let at = start_at(cx, fl, duration, within)?;
        let restart = match &fl.restart {
            None => None,
            Some(r) => {
                let t = cx.dur_max(r, super::limits::MAX_RUN, "restart", within)?;
                if t <= at {
                    return Err(cx.err(
                        r.span(),
                        "restart is not after at",
                        "a node boots again after it failed",
                    ));
                }
                if t >= duration {
                    return Err(cx.err(
                        r.span(),
                        format!("restart = {} is not within the run ({duration})", r.get_ref()),
                        "leave restart out for a node that stays down",
                    ));
                }
                Some(t)
            }
        };
        v.push((NodeKill { node: n, at, restart }, s.span()));
    }
    v.sort_by_key(|(k, _)| (k.node, k.at));
    for w in v.windows(2) {
        let (a, b) = (&w[0].0, &w[1].0);
        if a.node == b.node && a.restart.is_none_or(|r| r > b.at) {
            return Err(cx.err(
                w[1].1.clone(),
                format!("`{}` is already down at {}", nodes[b.node].name, b.at),
                "a node is killed again only after its restart",
            ));
        }
    }
    let mut out: Vec<NodeKill> = v.into_iter().map(|(k, _)| k).collect();
    out.sort_by_key(|k| (k.at, k.node));
    Ok(out)
}

/// A station or node is down from a crash or a kill until its restart (or
/// the end of the run): a second crash or kill in that time would act on
/// a node that is not running, and the simulator would silently ignore
/// or misorder it. Refused at the later entry, naming the earlier one.
/// Runs after `kills` and the RETHER faults have been validated.
pub(super) fn no_overlapping_downs(cx: &Ctx, f: &raw::File, names: &Names) -> Result<(), ScenarioError> {
    let rether = f.rether.as_ref().and_then(|r| r.get_ref().fault.as_ref());
    // (node, at, restart, kind, span of its `at`)
    let mut downs = Vec::new();
    for s in f.faults.iter().chain(rether.into_iter().flatten()) {
        let fl = s.get_ref();
        let kind = fl.kind.get_ref().as_str();
        if !matches!(kind, KILL | "crash" | "crash-holding") {
            continue;
        }
        let Some(node) = &fl.node else { continue };
        let n = names.lookup(cx, node, "fault node")?;
        let t = |v: &str| crate::units::parse_duration(v).unwrap_or(Duration::ZERO);
        let at = t(fl.at.get_ref());
        let restart = fl.restart.as_ref().map(|r| t(r.get_ref()));
        downs.push((n, at, restart, kind, fl.at.span()));
    }
    downs.sort_by_key(|d| (d.0, d.1));
    for w in downs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if a.0 != b.0 || a.2.is_some_and(|r| r <= b.1) {
            continue;
        }
        let until = match a.2 {
            Some(r) => format!("until its restart at {r}"),
            None => "for the rest of the run (no restart)".into(),
        };
        let name = names
            .0
            .iter()
            .find(|(_, &i)| i == b.0)
            .map(|(k, _)| k.as_str())
            .unwrap_or("?");
        return Err(cx.err(
            b.4.clone(),
            format!(
                "`{name}` is already down at {}: the kind = \"{}\" fault at {} keeps it down {until}",
                b.1, a.3, a.1
            ),
            "a node fails again only after it restarted: move this fault after the restart, or give the earlier one a restart before it",
        ));
    }
    Ok(())
}
