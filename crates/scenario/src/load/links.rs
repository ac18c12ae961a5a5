//! `[[link]]` and `[[segment]]`, then the broadcast domains they make and
//! every IP port's address.
//!
//! A link between two IP nodes (routers, hosts) is a domain of its own, a
//! point-to-point subnet (`.1` for `a`, `.2` for `b`), as before switches
//! existed. Links to a layer-2 device join the IP port to the device's
//! domain: a switch's ports in the same access VLAN (links between
//! switches are trunks carrying every VLAN), or every station of a shared
//! segment. Each domain gets one subnet — the one a link or segment in it
//! names, else `10.x.y.0/24` from its first link's index — and its IP
//! ports get consecutive addresses in link order.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::ops::Range;

use qosnet_core::{Duration, Framing};

use super::limits::{MAX_LINK_DELAY, MAX_PROPAGATION};
use super::{Ctx, Names, ScenarioError};
use crate::model::*;
use crate::raw::{self, S};
use qosnet_core::route::Ipv4Prefix;

/// A `[[segment]]` turned into a node, with what its drop links need.
pub(super) struct SegmentInfo {
    pub node: usize,
    /// (station, its name's span, position on the bus).
    pub stations: Vec<(usize, Range<usize>, Duration)>,
    pub subnet: Option<S<String>>,
}

/// Standard Ethernet framing with a table's overrides.
fn framing(
    cx: &Ctx,
    fcs: &Option<S<i64>>,
    preamble: &Option<S<i64>>,
    ifg: &Option<S<i64>>,
) -> Result<Framing, ScenarioError> {
    let fr = Framing::default();
    let get = |v: &Option<S<i64>>, what: &str, d: u32| -> Result<u32, ScenarioError> {
        v.as_ref()
            .map(|v| cx.int(v, 0, 64, what))
            .transpose()
            .map(|x| x.unwrap_or(d))
    };
    Ok(Framing {
        fcs: get(fcs, "fcs", fr.fcs)?,
        preamble: get(preamble, "preamble", fr.preamble)?,
        ifg: get(ifg, "ifg", fr.ifg)?,
    })
}

/// Add a node of kind `Segment` for every `[[segment]]`.
pub(super) fn segment_nodes(
    cx: &Ctx,
    f: &raw::File,
    names: &mut Names,
    nodes: &mut Vec<Node>,
) -> Result<Vec<SegmentInfo>, ScenarioError> {
    let mut out = Vec::new();
    let mut on_segment: HashMap<usize, String> = HashMap::new();
    for sg in &f.segments {
        let s = sg.get_ref();
        let name = s.name.get_ref().clone();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(cx.err(
                s.name.span(),
                format!("segment name `{name}` is not allowed"),
                "use letters, digits and _ only",
            ));
        }
        if names.0.contains_key(&name) {
            return Err(cx.err(
                s.name.span(),
                format!("`{name}` is already a node name"),
                "give the segment a name of its own",
            ));
        }
        let capacity_bps = match &s.capacity {
            Some(c) => cx.capacity(c)?,
            None => 10_000_000,
        };
        // 10BASE5: 500 m of coax at 0.77 c is about 2.2 us end to end.
        let propagation = match &s.propagation {
            Some(p) => cx.dur_max(
                p,
                MAX_PROPAGATION,
                "propagation",
                "a shared segment spans at most a few kilometres (802.3 collision domains far less)",
            )?,
            None => Duration::from_nanos(2_165),
        };
        // Gigabit half duplex extends the slot to 4096 bit times (802.3z).
        let default_slot = if capacity_bps >= 1_000_000_000 { 4096 } else { 512 };
        let spec = SegmentSpec {
            capacity_bps,
            framing: framing(cx, &s.fcs, &s.preamble, &s.ifg)?,
            propagation,
            slot_bits: s
                .slot_bits
                .as_ref()
                .map(|v| cx.int(v, 8, 1 << 16, "slot_bits"))
                .transpose()?
                .unwrap_or(default_slot),
            jam_bits: s
                .jam_bits
                .as_ref()
                // A collision must be signalled: at least one bit of jam.
                .map(|v| cx.int(v, 1, 1024, "jam_bits"))
                .transpose()?
                .unwrap_or(32),
            attempt_limit: s
                .attempt_limit
                .as_ref()
                .map(|v| cx.int(v, 1, 1024, "attempt_limit"))
                .transpose()?
                .unwrap_or(16),
            backoff_limit: s
                .backoff_limit
                .as_ref()
                .map(|v| cx.int(v, 0, 16, "backoff_limit"))
                .transpose()?
                .unwrap_or(10),
        };
        let list = s.nodes.get_ref();
        if list.len() < 2 {
            return Err(cx.err(
                s.nodes.span(),
                format!("segment `{name}` has {} stations", list.len()),
                "a shared segment joins at least two nodes",
            ));
        }
        let positions: Vec<Duration> = match &s.positions {
            Some(p) => {
                if p.get_ref().len() != list.len() {
                    return Err(cx.err(
                        p.span(),
                        format!("{} positions for {} stations", p.get_ref().len(), list.len()),
                        "give one position (propagation time from one end of the bus) per station",
                    ));
                }
                let mut v = Vec::new();
                for x in p.get_ref() {
                    let d = crate::units::parse_duration(x)
                        .map_err(|e| cx.err(p.span(), e, "e.g. positions = [\"0us\", \"1.1us\"]"))?;
                    if d > propagation {
                        return Err(cx.err(
                            p.span(),
                            format!("position {d} is beyond the bus's propagation delay {propagation}"),
                            "positions run from 0 to the segment's propagation",
                        ));
                    }
                    v.push(d);
                }
                v
            }
            // Evenly spaced from one end to the other, in the order listed.
            None => (0..list.len())
                .map(|k| Duration(propagation.as_nanos() * k as u64 / (list.len() as u64 - 1)))
                .collect(),
        };
        let mut stations = Vec::new();
        let mut seen = HashSet::new();
        for (k, v) in list.iter().enumerate() {
            let n = names.lookup(cx, v, "segment station")?;
            if nodes[n].is_l2() && !nodes[n].is_rether_bridge() {
                return Err(cx.err(
                    v.span(),
                    format!("`{}` is a {}", nodes[n].name, nodes[n].kind_name()),
                    "a segment's stations are routers, hosts and RETHER bridges; link a switch to it with [[link]]",
                ));
            }
            if !seen.insert(n) {
                return Err(cx.err(
                    v.span(),
                    format!("`{}` is listed twice", nodes[n].name),
                    "list each station once",
                ));
            }
            if let Some(other) = on_segment.insert(n, name.clone()) {
                // A RETHER bridge joins segments (§2.5): on several by design.
                if nodes[n].is_host() {
                    return Err(cx.err(
                        v.span(),
                        format!("host `{}` is already on segment `{other}`", nodes[n].name),
                        "a host has one interface",
                    ));
                }
            }
            stations.push((n, v.span(), positions[k]));
        }
        let node = nodes.len();
        names.0.insert(name.clone(), node);
        nodes.push(Node {
            name,
            kind: NodeKind::Segment(spec),
        });
        out.push(SegmentInfo {
            node,
            stations,
            subnet: s.subnet.clone(),
        });
    }
    Ok(out)
}

/// Union–find over link ends and layer-2 (device, VLAN) groups.
struct Uf(Vec<usize>);

impl Uf {
    fn find(&mut self, x: usize) -> usize {
        let mut r = x;
        while self.0[r] != r {
            r = self.0[r];
        }
        let mut y = x;
        while self.0[y] != r {
            let n = self.0[y];
            self.0[y] = r;
            y = n;
        }
        r
    }
    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.0[a.max(b)] = a.min(b);
        }
    }
}

/// Every link (typed and segment drops), then the broadcast domains with
/// their subnets and each IP end's address.
pub(super) fn links(
    cx: &Ctx,
    f: &raw::File,
    names: &Names,
    nodes: &[Node],
    segments: &[SegmentInfo],
) -> Result<(Vec<Link>, Vec<Domain>), ScenarioError> {
    let mut links = Vec::new();
    // Per link: the span to point errors at, and the subnet it names.
    let mut spans: Vec<Range<usize>> = Vec::new();
    let mut subnets: Vec<Option<S<String>>> = Vec::new();
    let mut pairs = HashSet::new();
    let mut degree = vec![0usize; nodes.len()];
    for l in &f.links {
        let span = l.span();
        let l = l.get_ref();
        let a = names.lookup(cx, &l.a, "link end")?;
        let b = names.lookup(cx, &l.b, "link end")?;
        if a == b {
            return Err(cx.err(
                span,
                format!("link joins `{}` to itself", nodes[a].name),
                "a link needs two different nodes",
            ));
        }
        if let Some(&n) = [a, b].iter().find(|&&n| nodes[n].is_rether_bridge()) {
            return Err(cx.err(
                span,
                format!("`{}` is a RETHER bridge", nodes[n].name),
                "a RETHER bridge joins segments: list it in each [[segment]]'s nodes",
            ));
        }
        if !pairs.insert((a.min(b), a.max(b))) {
            return Err(cx.err(
                span,
                format!("second link between `{}` and `{}`", nodes[a].name, nodes[b].name),
                "qosnet supports one link per node pair",
            ));
        }
        if nodes[a].is_host() && nodes[b].is_host() {
            return Err(cx.err(
                span,
                "a link between two hosts",
                "connect hosts to routers or switches",
            ));
        }
        for n in [a, b] {
            if matches!(nodes[n].kind, NodeKind::Segment(_)) && !(nodes[a].is_l2() && nodes[b].is_l2()) {
                return Err(cx.err(
                    span,
                    format!("`{}` is a segment", nodes[n].name),
                    "stations join a segment through its nodes = [...] list",
                ));
            }
        }
        let switch_end = [a, b]
            .iter()
            .any(|&n| matches!(nodes[n].kind, NodeKind::Switch(_)));
        let vlan = match &l.vlan {
            None => 1,
            Some(v) if !switch_end || (nodes[a].is_l2() && nodes[b].is_l2()) => {
                return Err(cx.err(
                    v.span(),
                    "`vlan` on a link without exactly one switch end",
                    "vlan sets the access VLAN of a switch port facing a router or host; links between switches carry every VLAN",
                ))
            }
            Some(v) => cx.int(v, 1, 4094, "vlan")?,
        };
        degree[a] += 1;
        degree[b] += 1;
        let o = l.opts(&f.defaults.link);
        let capacity_bps = match &o.capacity {
            Some(c) => cx.capacity(c)?,
            None => {
                return Err(cx.err(
                    span,
                    "link has no capacity",
                    "set capacity = \"100Mb/s\" on the link or in [defaults.link]",
                ))
            }
        };
        let delay = match &o.delay {
            Some(d) => cx.dur_max(
                d,
                MAX_LINK_DELAY,
                "delay",
                "light crosses the Earth in 0.07s and reaches the Moon in 1.3s",
            )?,
            None => Duration::ZERO,
        };
        let name = match &l.name {
            Some(n) => n.get_ref().clone(),
            None => format!("{}-{}", nodes[a].name, nodes[b].name),
        };
        links.push(Link {
            name,
            a,
            b,
            capacity_bps,
            delay,
            framing: framing(cx, &o.fcs, &o.preamble, &o.ifg)?,
            prefix: Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
            a_ip: Ipv4Addr::UNSPECIFIED,
            b_ip: Ipv4Addr::UNSPECIFIED,
            vlan,
            domain: None,
        });
        spans.push(span);
        subnets.push(l.subnet.clone());
    }
    // Each station's drop cable to its segment: the segment's rate, the
    // station's position as the link delay.
    for sg in segments {
        let NodeKind::Segment(spec) = &nodes[sg.node].kind else {
            continue;
        };
        for (st, sp, pos) in &sg.stations {
            degree[*st] += 1;
            degree[sg.node] += 1;
            links.push(Link {
                name: format!("{}-{}", nodes[*st].name, nodes[sg.node].name),
                a: *st,
                b: sg.node,
                capacity_bps: spec.capacity_bps,
                delay: *pos,
                framing: spec.framing,
                prefix: Ipv4Addr::UNSPECIFIED,
                prefix_len: 0,
                a_ip: Ipv4Addr::UNSPECIFIED,
                b_ip: Ipv4Addr::UNSPECIFIED,
                vlan: 1,
                domain: None,
            });
            spans.push(sp.clone());
            subnets.push(sg.subnet.clone());
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        if n.is_host() && degree[i] != 1 {
            let span = f
                .nodes
                .iter()
                .find(|x| x.get_ref().name.get_ref() == &n.name)
                .map(|x| x.get_ref().name.span())
                .unwrap_or(0..0);
            return Err(cx.err(
                span,
                format!("host `{}` has {} links", n.name, degree[i]),
                "a host has exactly one link, to a router or a switch, or sits on one segment",
            ));
        }
    }
    let domains = domains(cx, nodes, &mut links, &spans, &subnets)?;
    Ok((links, domains))
}

/// Group IP link ends into broadcast domains and address them.
fn domains(
    cx: &Ctx,
    nodes: &[Node],
    links: &mut [Link],
    spans: &[Range<usize>],
    subnets: &[Option<S<String>>],
) -> Result<Vec<Domain>, ScenarioError> {
    // Items: 2 per link (its a and b ends), then one per (L2 device, VLAN).
    let vlans: BTreeSet<u16> = links.iter().map(|l| l.vlan).collect();
    let mut group: HashMap<(usize, u16), usize> = HashMap::new();
    let base = 2 * links.len();
    for (n, node) in nodes.iter().enumerate() {
        match node.kind {
            NodeKind::Switch(_) => {
                for &v in &vlans {
                    let k = base + group.len();
                    group.insert((n, v), k);
                }
            }
            NodeKind::Segment(_) | NodeKind::RetherBridge(_) => {
                let k = base + group.len();
                group.insert((n, 1), k);
            }
            _ => {}
        }
    }
    let mut uf = Uf((0..base + group.len()).collect());
    let l2_group = |n: usize, vlan: u16| -> Option<usize> {
        match nodes[n].kind {
            NodeKind::Segment(_) | NodeKind::RetherBridge(_) => group.get(&(n, 1)).copied(),
            _ => group.get(&(n, vlan)).copied(),
        }
    };
    for (i, l) in links.iter().enumerate() {
        let (ea, eb) = (2 * i, 2 * i + 1);
        match (nodes[l.a].is_l2(), nodes[l.b].is_l2()) {
            (false, false) => uf.union(ea, eb),
            (false, true) => {
                if let Some(g) = l2_group(l.b, l.vlan) {
                    uf.union(ea, g);
                }
            }
            (true, false) => {
                if let Some(g) = l2_group(l.a, l.vlan) {
                    uf.union(eb, g);
                }
            }
            (true, true) => {
                // A trunk between switches, or a segment on a switch port
                // (its access VLAN).
                let seg_a = matches!(nodes[l.a].kind, NodeKind::Segment(_));
                let seg_b = matches!(nodes[l.b].kind, NodeKind::Segment(_));
                for &v in &vlans {
                    if (seg_a || seg_b) && v != l.vlan {
                        continue;
                    }
                    if let (Some(x), Some(y)) = (l2_group(l.a, v), l2_group(l.b, v)) {
                        uf.union(x, y);
                    }
                }
            }
        }
    }
    // Domains in order of their first IP end (link order, a before b).
    let mut ids: HashMap<usize, usize> = HashMap::new();
    let mut members: Vec<Vec<(usize, usize, bool)>> = Vec::new(); // (node, link, is_a)
    for (i, l) in links.iter().enumerate() {
        for (end, node, is_a) in [(2 * i, l.a, true), (2 * i + 1, l.b, false)] {
            if nodes[node].is_l2() {
                continue;
            }
            let root = uf.find(end);
            let d = *ids.entry(root).or_insert_with(|| {
                members.push(Vec::new());
                members.len() - 1
            });
            members[d].push((node, i, is_a));
        }
    }
    let mut out = Vec::new();
    // Subnets taken so far: first address → (last address, domain). CIDR
    // blocks are nested or disjoint, so a new block overlaps one iff the
    // block starting at or before it reaches it, or one starts inside it.
    let mut taken: std::collections::BTreeMap<u32, (u32, usize)> = Default::default();
    for (d, m) in members.iter().enumerate() {
        let first = m.iter().map(|x| x.1).min().unwrap_or(0);
        // The subnet a link (or segment) of the domain names; all must agree.
        let mut named: Option<(Ipv4Addr, u8, Range<usize>)> = None;
        for &(_, li, _) in m {
            if let Some(s) = &subnets[li] {
                let Ipv4Prefix { addr: p, len } = Ipv4Prefix::parse_cidr(s.get_ref())
                    .map(|p| p.network())
                    .map_err(|e| cx.err(s.span(), e.to_string(), "e.g. subnet = \"10.0.12.0/24\""))?;
                match &named {
                    Some((q, ql, _)) if (*q, *ql) != (p, len) => {
                        return Err(cx.err(
                            s.span(),
                            format!(
                                "subnet {p}/{len} differs from {q}/{ql}, named for the same broadcast domain"
                            ),
                            "links joined by switches (or a segment) share one subnet: name it once or the same everywhere",
                        ));
                    }
                    Some(_) => {}
                    None => named = Some((p, len, s.span())),
                }
            }
        }
        let (prefix, prefix_len, sp) = match named {
            Some(x) => x,
            None => (
                Ipv4Addr::new(10, (first >> 8) as u8, (first & 0xff) as u8, 0),
                24,
                spans[first].clone(),
            ),
        };
        let hosts_fit = if prefix_len >= 31 {
            0
        } else {
            (1u64 << (32 - prefix_len)) - 2
        };
        if (m.len() as u64) > hosts_fit {
            let hint = if m.len() == 2 {
                "use a /30 or larger".to_string()
            } else {
                format!("the domain has {} IP ports: use a larger subnet", m.len())
            };
            return Err(cx.err(sp, "subnet too small for its addresses", hint));
        }
        let mask = qosnet_core::route::mask(prefix_len);
        let net = u32::from(prefix) & mask;
        let last = net | !mask;
        let before = taken
            .range(..=net)
            .next_back()
            .filter(|(_, (end, _))| *end >= net);
        let inside = taken.range(net..=last).next();
        if let Some((_, &(_, other))) = before.or(inside) {
            let o = &out[other];
            let Domain {
                prefix: op,
                prefix_len: ol,
                ..
            } = o;
            return Err(cx.err(
                sp,
                format!("subnet {prefix}/{prefix_len} overlaps {op}/{ol} of another broadcast domain"),
                "give every link (or switched domain) a subnet of its own",
            ));
        }
        taken.insert(net, (last, d));
        let mut addrs = Vec::new();
        for (k, &(node, li, is_a)) in m.iter().enumerate() {
            let ip = Ipv4Addr::from(net + 1 + k as u32);
            let l = &mut links[li];
            l.prefix = prefix;
            l.prefix_len = prefix_len;
            l.domain = Some(d);
            if is_a {
                l.a_ip = ip;
            } else {
                l.b_ip = ip;
            }
            addrs.push((node, li, ip));
        }
        let vlan = m.iter().map(|&(_, li, _)| links[li].vlan).next().unwrap_or(1);
        out.push(Domain {
            prefix,
            prefix_len,
            members: addrs,
            vlan,
        });
    }
    Ok(out)
}
