//! `[[route]]` (static routes, with TTL ranges), `[taprio]` (IEEE 802.1Qbv
//! gate control list) and `[htb]` (link-sharing class tree).

use std::collections::HashMap;

use qosnet_core::Duration;

use super::limits::{MAX_RUN, MAX_TF};
use super::{Ctx, Names, ScenarioError};
use crate::model::*;
use crate::raw;
use crate::units::parse_duration;
use qosnet_core::route::Ipv4Prefix;

/// Whether two nodes have IP ports in one broadcast domain.
fn domains_adjacent(links: &[Link], a: usize, b: usize) -> bool {
    let doms = |n: usize| {
        links
            .iter()
            .filter_map(move |l| if l.a == n || l.b == n { l.domain } else { None })
    };
    doms(a).any(|d| doms(b).any(|e| e == d))
}

pub(super) fn routes(
    cx: &Ctx,
    f: &raw::File,
    names: &Names,
    nodes: &[Node],
    links: &[Link],
) -> Result<Vec<StaticRoute>, ScenarioError> {
    let mut routes = Vec::new();
    for r in &f.routes {
        let r = r.get_ref();
        let node = names.lookup(cx, &r.node, "route node")?;
        let via = names.lookup(cx, &r.via, "route next hop")?;
        let adjacent = links
            .iter()
            .any(|l| (l.a == node && l.b == via) || (l.a == via && l.b == node))
            || domains_adjacent(links, node, via);
        if !adjacent {
            return Err(cx.err(
                r.via.span(),
                format!(
                    "`{}` is not a neighbour of `{}`",
                    nodes[via].name, nodes[node].name
                ),
                "via names a node linked to the route's node",
            ));
        }
        let dst = Ipv4Prefix::parse_cidr(r.prefix.get_ref())
            .map(|p| p.network())
            .map_err(|e| cx.err(r.prefix.span(), e.to_string(), "e.g. prefix = \"10.0.3.0/24\""))?;
        let ttl = match &r.ttl {
            None => None,
            Some(t) => match t.get_ref().as_slice() {
                [lo, hi] if 0 <= *lo && lo <= hi && *hi <= 255 => Some((*lo as u8, *hi as u8)),
                _ => {
                    return Err(cx.err(
                        t.span(),
                        "ttl must be [low, high] within 0..=255",
                        "e.g. ttl = [45, 255]",
                    ))
                }
            },
        };
        routes.push(StaticRoute { node, dst, via, ttl });
    }

    Ok(routes)
}

pub(super) fn taprio(cx: &Ctx, f: &raw::File, nodes: &[Node]) -> Result<Option<TaprioParams>, ScenarioError> {
    let taprio = match &f.taprio {
        None => None,
        Some(t) => {
            let tr = t.get_ref();
            let base_time = match &tr.base_time {
                Some(b) => cx.dur_max(b, MAX_RUN, "base_time", "the first cycle starts within the run")?,
                None => Duration::ZERO,
            };
            let sp = tr.entries.span();
            let mut entries = Vec::new();
            for e in tr.entries.get_ref() {
                let d = parse_duration(&e.duration)
                    .map_err(|m| cx.err(sp.clone(), m, "e.g. duration = \"250us\""))?;
                let d = cx.check_max(
                    d,
                    sp.clone(),
                    MAX_TF,
                    "a gate entry's duration",
                    "802.1Qbv cycles last microseconds to milliseconds",
                )?;
                if d == Duration::ZERO {
                    return Err(cx.err(
                        sp.clone(),
                        "a gate entry of zero duration",
                        "give every entry a positive duration",
                    ));
                }
                let mut mask = 0u32;
                for c in &e.open {
                    let bit = match c.as_str() {
                        "NC" => 0,
                        "EF" => 1,
                        "AF1" => 2,
                        "AF2" => 3,
                        "AF3" => 4,
                        "AF4" => 5,
                        "BE" => 6,
                        other => {
                            return Err(cx.err(
                                sp.clone(),
                                format!("unknown class `{other}` in a gate entry"),
                                "classes: NC, EF, AF1, AF2, AF3, AF4, BE",
                            ))
                        }
                    };
                    mask |= 1 << bit;
                }
                entries.push((d, mask));
            }
            if entries.is_empty() {
                return Err(cx.err(sp, "[taprio] has no entries", "entries = [{ duration = \"250us\", open = [\"EF\"] }, { duration = \"750us\", open = [\"AF1\", \"BE\"] }]"));
            }
            Some(TaprioParams { base_time, entries })
        }
    };
    if taprio.is_none() {
        if let Some((i, _)) = nodes
            .iter()
            .enumerate()
            .find(|(_, n)| n.router().is_some_and(|r| r.scheduler == SchedKind::Taprio))
        {
            let sp = f.nodes[i].get_ref().name.span();
            return Err(cx.err(
                sp,
                format!(
                    "router `{}` uses scheduler \"taprio\" but there is no [taprio] section",
                    nodes[i].name
                ),
                "add [taprio] with a gate control list",
            ));
        }
    }

    Ok(taprio)
}

pub(super) fn htb(
    cx: &Ctx,
    f: &raw::File,
    nodes: &[Node],
    links: &[Link],
) -> Result<Option<HtbParams>, ScenarioError> {
    let htb = match &f.htb {
        None => None,
        Some(h) => Some(htb_tree(cx, h.get_ref(), links)?),
    };
    if htb.is_none() {
        if let Some((i, _)) = nodes
            .iter()
            .enumerate()
            .find(|(_, n)| n.router().is_some_and(|r| r.scheduler == SchedKind::Htb))
        {
            let sp = f.nodes[i].get_ref().name.span();
            return Err(cx.err(
                sp,
                format!(
                    "router `{}` uses scheduler \"htb\" but there is no [htb] section",
                    nodes[i].name
                ),
                "add [htb] with a class tree",
            ));
        }
    }

    Ok(htb)
}

const PHB_CLASSES: [&str; 7] = ["NC", "EF", "AF1", "AF2", "AF3", "AF4", "BE"];

/// `[htb]`: leaves named after PHB classes, inner classes any other name;
/// parents before children; ceil >= rate; rates within the links.
fn htb_tree(cx: &Ctx, h: &raw::Htb, links: &[Link]) -> Result<HtbParams, ScenarioError> {
    let sp = h.classes.span();
    let max_cap = links.iter().map(|l| l.capacity_bps).max().unwrap_or(u64::MAX);
    let mut ids: HashMap<String, u16> = HashMap::new();
    let mut classes = Vec::new();
    let mut inner = 100u16;
    for c in h.classes.get_ref() {
        if ids.contains_key(&c.name) {
            return Err(cx.err(
                sp,
                format!("duplicate htb class `{}`", c.name),
                "give every class a unique name",
            ));
        }
        let id = match PHB_CLASSES.iter().position(|n| *n == c.name) {
            Some(p) => p as u16,
            None => {
                inner += 1;
                inner
            }
        };
        let parent = match &c.parent {
            None => None,
            Some(p) => Some(*ids.get(p).ok_or_else(|| {
                cx.err(
                    sp.clone(),
                    format!("htb class `{}`: parent `{p}` is not defined before it", c.name),
                    "list parents before their children",
                )
            })?),
        };
        let rate_bps = cx.rate(&c.rate, sp.clone())?;
        let ceil_bps = match &c.ceil {
            Some(v) => cx.rate(v, sp.clone())?,
            None => rate_bps,
        };
        if ceil_bps < rate_bps {
            return Err(cx.err(
                sp,
                format!("htb class `{}`: ceil below rate", c.name),
                "ceil >= rate",
            ));
        }
        if ceil_bps > max_cap {
            return Err(cx.err(
                sp,
                format!(
                    "htb class `{}`: ceil {} is above link capacity",
                    c.name,
                    c.ceil.as_deref().unwrap_or(&c.rate)
                ),
                "a class cannot send faster than the link",
            ));
        }
        let prio = match c.prio {
            None => 0,
            Some(p) if (0..=7).contains(&p) => p as u8,
            Some(p) => {
                return Err(cx.err(
                    sp,
                    format!("htb class `{}`: prio {p} out of range", c.name),
                    "prio is 0 (first) to 7",
                ))
            }
        };
        let burst = match c.burst {
            None => None,
            Some(b) if (64..=1 << 30).contains(&b) => Some(b as u32),
            Some(b) => {
                return Err(cx.err(
                    sp,
                    format!("htb class `{}`: burst {b} B out of range", c.name),
                    "64 bytes to 1 GiB",
                ))
            }
        };
        ids.insert(c.name.clone(), id);
        classes.push(HtbClassSpec {
            name: c.name.clone(),
            id,
            parent,
            rate_bps,
            ceil_bps,
            prio,
            burst,
        });
    }
    for c in &classes {
        let has_children = classes.iter().any(|x| x.parent == Some(c.id));
        if c.id < 100 && has_children {
            return Err(cx.err(
                sp,
                format!("htb class `{}` is a PHB class (a leaf) but has children", c.name),
                "name inner classes anything but NC, EF, AF1..AF4, BE",
            ));
        }
        if c.id >= 100 && !has_children {
            return Err(cx.err(
                sp,
                format!("htb class `{}` has no children and is not a PHB class", c.name),
                "leaves are named NC, EF, AF1, AF2, AF3, AF4 or BE",
            ));
        }
    }
    let default = match &h.default {
        Some(d) => Some(*ids.get(d.get_ref()).filter(|id| **id < 100).ok_or_else(|| {
            cx.err(
                d.span(),
                format!("default `{}` is not a leaf of the tree", d.get_ref()),
                "name a PHB class leaf, e.g. default = \"BE\"",
            )
        })?),
        None => ids.get("BE").copied(),
    };
    Ok(HtbParams { classes, default })
}
