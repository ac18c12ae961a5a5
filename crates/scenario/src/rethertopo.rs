//! The shape of a RETHER network of several segments (seed 002 §2.5):
//! which segments each station and bridge is on, who shares a segment
//! (a token's members), and the path of a real-time session that crosses
//! bridges, decomposed into one sub-connection per segment ("a real-time
//! connection among nodes on different segments is decomposed into
//! multiple real-time sub-connections, each of which corresponds to one
//! of the segments").
//!
//! Segments are the vertices and bridges the edges of a graph the loader
//! requires to be a forest (bridges run no spanning tree: a loop would
//! circulate broadcasts for ever), so paths are unique.

use std::collections::VecDeque;

use crate::model::{Link, Node, NodeKind};

/// Segments per node, worked out once from the links.
#[derive(Clone, Debug, Default)]
pub struct RetherTopo {
    /// Per node: the segments (node indices) it is on, in link order.
    pub segs: Vec<Vec<usize>>,
}

/// One sub-connection of a session: on `segment`, from `sender` to
/// `receiver` (stations or bridges, node indices).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub segment: usize,
    pub sender: usize,
    pub receiver: usize,
}

impl RetherTopo {
    pub fn new(nodes: &[Node], links: &[Link]) -> Self {
        let mut segs = vec![Vec::new(); nodes.len()];
        for l in links {
            for (me, other) in [(l.a, l.b), (l.b, l.a)] {
                if nodes[me].rether_id().is_some() && matches!(nodes[other].kind, NodeKind::Segment(_)) {
                    segs[me].push(other);
                }
            }
        }
        RetherTopo { segs }
    }

    /// The RETHER stations and bridges on segment `s`, in node order: the
    /// members of its token (§2.2.2's N).
    pub fn members(&self, s: usize) -> Vec<usize> {
        (0..self.segs.len())
            .filter(|&n| self.segs[n].contains(&s))
            .collect()
    }

    /// Bridges on segment `s`.
    fn bridges_on<'a>(&'a self, nodes: &'a [Node], s: usize) -> impl Iterator<Item = usize> + 'a {
        self.members(s)
            .into_iter()
            .filter(move |&n| nodes[n].is_rether_bridge())
    }

    /// The sub-connections of a session from station `a` to station `b`,
    /// in order; `None` when no chain of bridges joins their segments.
    pub fn hops(&self, nodes: &[Node], a: usize, b: usize) -> Option<Vec<Hop>> {
        let (&sa, &sb) = (self.segs[a].first()?, self.segs[b].first()?);
        // Breadth-first over segments; `via[s]` = (previous segment, bridge).
        let mut via: Vec<Option<(usize, usize)>> = vec![None; nodes.len()];
        let mut seen = vec![false; nodes.len()];
        seen[sa] = true;
        let mut q = VecDeque::from([sa]);
        while let Some(s) = q.pop_front() {
            if s == sb {
                break;
            }
            for br in self.bridges_on(nodes, s) {
                for &t in &self.segs[br] {
                    if !seen[t] {
                        seen[t] = true;
                        via[t] = Some((s, br));
                        q.push_back(t);
                    }
                }
            }
        }
        if !seen[sb] {
            return None;
        }
        // Walk back from b's segment, then reverse.
        let mut out = Vec::new();
        let (mut s, mut receiver) = (sb, b);
        while let Some((prev, br)) = via[s] {
            out.push(Hop {
                segment: s,
                sender: br,
                receiver,
            });
            receiver = br;
            s = prev;
        }
        out.push(Hop {
            segment: sa,
            sender: a,
            receiver,
        });
        out.reverse();
        Some(out)
    }

    /// The stations and bridges bridge `br` reaches through its port on
    /// segment `s`: everything on `s` and beyond the other bridges of
    /// `s`, never back through `br`.
    pub fn side(&self, nodes: &[Node], br: usize, s: usize) -> Vec<usize> {
        let mut seen_seg = vec![false; nodes.len()];
        seen_seg[s] = true;
        let mut q = VecDeque::from([s]);
        let mut out = Vec::new();
        while let Some(t) = q.pop_front() {
            for m in self.members(t) {
                if m == br || out.contains(&m) {
                    continue;
                }
                out.push(m);
                for &u in &self.segs[m] {
                    if !seen_seg[u] {
                        seen_seg[u] = true;
                        q.push_back(u);
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// A loop of bridges, if any: (bridge, segment) closing it.
    pub fn find_loop(&self, nodes: &[Node]) -> Option<(usize, usize)> {
        let mut root: Vec<usize> = (0..nodes.len()).collect();
        fn find(r: &mut [usize], mut x: usize) -> usize {
            while r[x] != x {
                r[x] = r[r[x]];
                x = r[x];
            }
            x
        }
        for (br, segs) in self.segs.iter().enumerate() {
            if !nodes[br].is_rether_bridge() {
                continue;
            }
            let Some(&first) = segs.first() else { continue };
            for &s in &segs[1..] {
                let (x, y) = (find(&mut root, first), find(&mut root, s));
                if x == y {
                    return Some((br, s));
                }
                root[x] = y;
            }
        }
        None
    }
}

/// The `[[node]]` and `[[segment]]` tables of a chain of `segs` RETHER
/// segments (10 Mb/s, 5 µs) of two stations each, `sK_1` and `sK_2` on
/// segment `segK`, joined by bridges `brK` between `segK` and `segK+1`
/// (§2.5). Experiments and tests add `[scenario]`, `[rether]` and flows.
pub fn chain_toml(segs: usize) -> String {
    let mut t = String::new();
    for s in 0..segs {
        for k in 1..=2 {
            t += &format!("[[node]]\nname = \"s{s}_{k}\"\nkind = \"rether\"\n");
        }
        if s + 1 < segs {
            t += &format!("[[node]]\nname = \"br{s}\"\nkind = \"rether-bridge\"\n");
        }
    }
    for s in 0..segs {
        let mut members = vec![format!("\"s{s}_1\""), format!("\"s{s}_2\"")];
        if s > 0 {
            members.push(format!("\"br{}\"", s - 1));
        }
        if s + 1 < segs {
            members.push(format!("\"br{s}\""));
        }
        t += &format!(
            "[[segment]]\nname = \"seg{s}\"\nnodes = [{}]\ncapacity = \"10Mb/s\"\npropagation = \"5us\"\n",
            members.join(", ")
        );
    }
    t
}
