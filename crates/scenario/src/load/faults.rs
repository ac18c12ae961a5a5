//! `[[fault]]`: node failures during a run. `kind = "kill"` fails any node
//! but a segment (the simulator stops it dead and, with `restart`, boots it
//! again); the RETHER kinds (`crash`, `crash-holding`, `drop-token`,
//! `corrupt-token`, `lose-sent-token`, `corrupt-sent-token`) are the station's own failure model and go to
//! `[rether]` (`rether.rs`), so `[[fault]]` is the one syntax for both and
//! `[[rether.fault]]` stays as its older spelling. STSDR forwarder and
//! master failures (seed 003 §IV-A, "leader election ... may be adopted")
//! are what the kill kind was built for.

use super::{Ctx, Names, ScenarioError};
use crate::model::*;
use crate::raw;
use qosnet_core::Duration;

/// The kind that fails a node from outside (the engine), not the node's
/// own failure model.
pub(super) const KILL: &str = "kill";

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
        let n = names.lookup(cx, &fl.node, "fault node")?;
        if nodes[n].is_medium() {
            return Err(cx.err(
                fl.node.span(),
                format!("`{}` is a segment, a cable: it cannot be killed", nodes[n].name),
                "kill the stations on it instead",
            ));
        }
        if let Some(c) = &fl.count {
            return Err(cx.err(
                c.span(),
                "`count` does not apply to kind = \"kill\"",
                "count goes with the RETHER token faults",
            ));
        }
        let at = cx.dur_max(&fl.at, super::limits::MAX_RUN, "at", within)?;
        if at >= duration {
            return Err(cx.err(
                fl.at.span(),
                format!("at = {} is not within the run ({duration})", fl.at.get_ref()),
                within,
            ));
        }
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
