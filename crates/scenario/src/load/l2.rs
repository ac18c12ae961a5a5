//! Layer-2 topology: every switch has a port, no segment has more
//! stations than the simulator's medium takes, and switches, segments and
//! RETHER bridges form no loop.
//!
//! qosnet runs no spanning tree (802.1D STP/RSTP): a frame flooded into a
//! loop of learning bridges circles it forever (a broadcast storm, and
//! duplicate deliveries at every host on it). Real networks break such a
//! loop by blocking a port; a scenario must not have one. VLANs do not
//! separate a loop here: links between switches are trunks carrying every
//! VLAN, and a switch's link to a segment is an access port of VLAN 1, so
//! any cycle of layer-2 links is a loop in VLAN 1.

use std::collections::VecDeque;
use std::ops::Range;

use super::{Ctx, ScenarioError};
use crate::model::*;
use crate::raw;

pub(super) fn check(cx: &Ctx, f: &raw::File, nodes: &[Node], links: &[Link]) -> Result<(), ScenarioError> {
    let node_span = |i: usize| -> Range<usize> {
        f.nodes
            .iter()
            .map(|n| &n.get_ref().name)
            .chain(f.segments.iter().map(|s| &s.get_ref().name))
            .find(|n| n.get_ref() == &nodes[i].name)
            .map(|n| n.span())
            .unwrap_or_else(|| f.scenario.span())
    };
    let degree = |i: usize| links.iter().filter(|l| l.a == i || l.b == i).count();
    for (i, n) in nodes.iter().enumerate() {
        match n.kind {
            NodeKind::Switch(_) if degree(i) == 0 => return Err(cx.err(
                node_span(i),
                format!("switch `{}` has no links", n.name),
                "link it to the nodes it should switch ([[link]] a = \"NAME\", b = \"host\"), or remove it",
            )),
            NodeKind::Segment(_) if degree(i) > super::limits::MAX_SEGMENT_STATIONS => {
                return Err(cx.err(
                    node_span(i),
                    format!("segment `{}` has {} stations and links", n.name, degree(i)),
                    format!(
                        "a segment takes at most {} (IEEE 802.3 allows 1024 per collision domain): split it",
                        super::limits::MAX_SEGMENT_STATIONS
                    ),
                ))
            }
            _ => {}
        }
    }
    if let Some((cycle, closing)) = find_cycle(nodes, links) {
        let names: Vec<&str> = cycle.iter().map(|&(n, _)| nodes[n].name.as_str()).collect();
        let via: Vec<&str> = cycle.iter().map(|&(_, l)| links[l].name.as_str()).collect();
        // A typed [[link]] (the first f.links.len() links) points at its
        // table; a segment's drop cable at the segment.
        let span = match f.links.get(closing) {
            Some(l) => l.get_ref().a.span(),
            None => node_span(links[closing].b),
        };
        return Err(cx.err(
            span,
            format!(
                "layer-2 loop: {} -> {} (links {}): a flooded frame would circle it forever, and every host on it would receive duplicates",
                names.join(" -> "),
                names[0],
                via.join(", ")
            ),
            "qosnet runs no spanning tree (STP): remove one of these links, or put a router between two of these devices; VLANs do not break it (links between switches are trunks carrying every VLAN)",
        ));
    }
    Ok(())
}

/// A cycle of layer-2 links, if any: (node, link to the next node) in
/// order round the cycle, and the link that closed it.
fn find_cycle(nodes: &[Node], links: &[Link]) -> Option<(Vec<(usize, usize)>, usize)> {
    let mut root: Vec<usize> = (0..nodes.len()).collect();
    fn find(root: &mut [usize], mut x: usize) -> usize {
        while root[x] != x {
            root[x] = root[root[x]];
            x = root[x];
        }
        x
    }
    // The spanning forest so far: per node, (neighbour, link).
    let mut adj: Vec<Vec<(usize, usize)>> = vec![Vec::new(); nodes.len()];
    for (k, l) in links.iter().enumerate() {
        if !(nodes[l.a].is_l2() && nodes[l.b].is_l2()) {
            continue;
        }
        let (ra, rb) = (find(&mut root, l.a), find(&mut root, l.b));
        if ra != rb {
            root[ra] = rb;
            adj[l.a].push((l.b, k));
            adj[l.b].push((l.a, k));
            continue;
        }
        // l.a and l.b are already joined: the forest path from b to a,
        // then this link back to b, is the cycle.
        let mut prev: Vec<Option<(usize, usize)>> = vec![None; nodes.len()];
        let mut q = VecDeque::from([l.b]);
        let mut seen = vec![false; nodes.len()];
        seen[l.b] = true;
        while let Some(x) = q.pop_front() {
            for &(y, e) in &adj[x] {
                if !seen[y] {
                    seen[y] = true;
                    prev[y] = Some((x, e));
                    q.push_back(y);
                }
            }
        }
        // Walk back from a to b: a's predecessor chain.
        let mut path = Vec::new();
        let mut x = l.a;
        while let Some((p, e)) = prev[x] {
            path.push((p, e));
            x = p;
        }
        // path holds (node, link to the next node towards a) from a's
        // side; reverse it so it runs b -> ... -> a, then a -> b by `k`.
        path.reverse();
        path.push((l.a, k));
        return Some((path, k));
    }
    None
}
