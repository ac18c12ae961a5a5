//! The network a scenario describes, worked out: each node's interfaces
//! (one per link, in link order), addresses and MACs, every router's route
//! table, and each flow's hop-by-hop trace through those tables.
//!
//! Routes are generated, not typed, and kept to what a router of a real
//! network carries, so tables stay small and building them stays linear in
//! the network's size: connected subnets; on a stub router (one router
//! neighbour) a default route toward it; on every other router a
//! shortest-path route (hop count, ties to the lower node index) to every
//! subnet with a host in it, and to the router-only (transit) subnets of
//! its router neighbours — farther transit subnets are hidden, as RFC 6860
//! hides transit-only networks. A flow's `path` adds /32 routes to its
//! destination; a ring path walked `loops` times adds one exact-TTL route
//! per visit (ICC 2006 §IV-B), so routers route on destination and TTL as
//! the paper's did. `[[route]]` entries come last and must not collide.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use qosnet_core::route::{Route, RouteTable};
use qosnet_core::wire::MacAddr;

use crate::model::Scenario;

/// One port of a node: the link it is on and, for IP nodes, its address.
#[derive(Clone, Debug)]
pub struct Iface {
    pub link: usize,
    /// The port's address; unspecified on a switch's or segment's port.
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    pub mac: MacAddr,
    /// The node at the link's other end (a switch or segment for a port on
    /// a shared domain).
    pub peer: usize,
    pub peer_port: usize,
    /// The other end's address and MAC (unspecified at a layer-2 end).
    pub peer_ip: Ipv4Addr,
    pub peer_mac: MacAddr,
    /// The broadcast domain of an IP port.
    pub domain: Option<usize>,
}

/// An IP port in a broadcast domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    pub node: usize,
    pub port: usize,
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
}

#[derive(Clone, Debug)]
pub struct DomainNet {
    pub prefix: Ipv4Addr,
    pub prefix_len: u8,
    pub members: Vec<Member>,
}

impl DomainNet {
    /// Whether the domain is one point-to-point link (two IP ends).
    pub fn is_point_to_point(&self) -> bool {
        self.members.len() == 2
    }
    pub fn member(&self, node: usize) -> Option<&Member> {
        self.members.iter().find(|m| m.node == node)
    }
    pub fn by_ip(&self, ip: Ipv4Addr) -> Option<&Member> {
        self.members.iter().find(|m| m.ip == ip)
    }
}

#[derive(Clone, Debug)]
pub struct NodeNet {
    pub ifaces: Vec<Iface>,
    pub routes: RouteTable,
}

/// One router visit of a flow: the router, the port it leaves by, and the
/// TTL the packet arrived with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub node: usize,
    pub port: usize,
    pub ttl: u8,
}

/// What a network-building error comes from, for the loader to point at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Culprit {
    /// `sc.flows[i]`.
    Flow(usize),
    /// `sc.routes[i]` (a `[[route]]`).
    Route(usize),
    /// `sc.nodes[i]`.
    Node(usize),
}

/// A network that cannot be built: the message, a hint, and its cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetError {
    pub culprit: Culprit,
    pub msg: String,
    pub hint: String,
}

impl NetError {
    fn new(culprit: Culprit, msg: String, hint: &str) -> Self {
        NetError {
            culprit,
            msg,
            hint: hint.to_string(),
        }
    }
}

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

/// Connected components of the IP nodes (through domains, over any node).
fn components(sc: &Scenario, domains: &[DomainNet], nodes: &[NodeNet]) -> Vec<usize> {
    let n = sc.nodes.len();
    let mut comp = vec![usize::MAX; n];
    let mut stack = Vec::new();
    for s in 0..n {
        if comp[s] != usize::MAX {
            continue;
        }
        comp[s] = s;
        stack.push(s);
        while let Some(u) = stack.pop() {
            for f in &nodes[u].ifaces {
                let Some(d) = f.domain else { continue };
                for m in &domains[d].members {
                    if comp[m.node] == usize::MAX {
                        comp[m.node] = s;
                        stack.push(m.node);
                    }
                }
            }
        }
    }
    comp
}

#[derive(Clone, Debug)]
pub struct Network {
    pub nodes: Vec<NodeNet>,
    pub domains: Vec<DomainNet>,
    /// Per flow, the router hops from source host to destination host
    /// (none when both hosts share a broadcast domain).
    pub hops: Vec<Vec<Hop>>,
}

impl Network {
    /// The IP address of a host (its only interface).
    pub fn host_ip(&self, node: usize) -> Ipv4Addr {
        self.nodes[node].ifaces[0].ip
    }
    /// A host's default gateway: an STSDR load balancer if its domain has
    /// any (hosts are spread over them in domain order, as the paper's two
    /// generators each feed one balancer), else the first router.
    pub fn gateway(&self, sc: &Scenario, host: usize) -> Option<&Member> {
        let d = self.nodes[host].ifaces.first()?.domain?;
        let members = &self.domains[d].members;
        let lbs: Vec<&Member> = members
            .iter()
            .filter(|m| sc.nodes[m.node].is_balancer())
            .collect();
        if !lbs.is_empty() {
            let hosts_before = members
                .iter()
                .take_while(|m| m.node != host)
                .filter(|m| sc.nodes[m.node].is_host())
                .count();
            return Some(lbs[hosts_before % lbs.len()]);
        }
        members.iter().find(|m| sc.nodes[m.node].is_router())
    }
    /// The MAC a host puts on frames to `dst`: `dst`'s own if they share a
    /// domain, else its gateway's.
    pub fn first_hop_mac(&self, sc: &Scenario, host: usize, dst: Ipv4Addr) -> MacAddr {
        let Some(f) = self.nodes[host].ifaces.first() else {
            return MacAddr::BROADCAST;
        };
        let Some(d) = f.domain else {
            return f.peer_mac;
        };
        // A flow back to the host itself (a ring) leaves through the gateway.
        // Next hops of an STSDR share its T-switch with the senders but sit
        // behind the router (§I: the switch carries every external link):
        // a domain with a load balancer sends everything through it.
        let behind_stsdr = self.domains[d]
            .members
            .iter()
            .any(|m| sc.nodes[m.node].is_balancer());
        if let Some(m) = self.domains[d]
            .by_ip(dst)
            .filter(|m| m.node != host && !behind_stsdr)
        {
            return m.mac;
        }
        self.gateway(sc, host).map(|m| m.mac).unwrap_or(f.peer_mac)
    }

    /// Work out the network of `sc`; a failure is a message.
    pub fn build(sc: &Scenario) -> Result<Network, String> {
        Self::build_checked(sc).map_err(|e| e.msg)
    }

    /// Work out the network of `sc`; a failure names the flow, static
    /// route or router it comes from, so the loader can point at its line.
    pub fn build_checked(sc: &Scenario) -> Result<Network, NetError> {
        let n = sc.nodes.len();
        let mut nodes: Vec<NodeNet> = (0..n)
            .map(|_| NodeNet {
                ifaces: Vec::new(),
                routes: RouteTable::new(),
            })
            .collect();
        let mut mac_id = 0u32;
        for (li, l) in sc.links.iter().enumerate() {
            let (pa, pb) = (nodes[l.a].ifaces.len(), nodes[l.b].ifaces.len());
            mac_id += 2;
            let (ma, mb) = (MacAddr::local(mac_id - 1), MacAddr::local(mac_id));
            nodes[l.a].ifaces.push(Iface {
                link: li,
                ip: l.a_ip,
                prefix_len: l.prefix_len,
                mac: ma,
                peer: l.b,
                peer_port: pb,
                peer_ip: l.b_ip,
                peer_mac: mb,
                domain: l.domain.filter(|_| !sc.nodes[l.a].is_l2()),
            });
            nodes[l.b].ifaces.push(Iface {
                link: li,
                ip: l.b_ip,
                prefix_len: l.prefix_len,
                mac: mb,
                peer: l.a,
                peer_port: pa,
                peer_ip: l.a_ip,
                peer_mac: ma,
                domain: l.domain.filter(|_| !sc.nodes[l.b].is_l2()),
            });
        }
        let domains: Vec<DomainNet> = sc
            .domains
            .iter()
            .map(|d| DomainNet {
                prefix: d.prefix,
                prefix_len: d.prefix_len,
                members: d
                    .members
                    .iter()
                    .map(|&(node, link, ip)| {
                        let port = nodes[node]
                            .ifaces
                            .iter()
                            .position(|f| f.link == link)
                            .unwrap_or(0);
                        Member {
                            node,
                            port,
                            ip,
                            mac: nodes[node].ifaces[port].mac,
                        }
                    })
                    .collect(),
            })
            .collect();
        let is_router = |i: usize| sc.nodes[i].is_router();
        let node_err = |at: usize, e: String| {
            NetError::new(
                Culprit::Node(at),
                format!("router {}: {e}", sc.nodes[at].name),
                "",
            )
        };
        // The port of `a` on a domain shared with `b`, and `b`'s address there.
        let hop_to = |nodes: &Vec<NodeNet>, a: usize, b: usize| -> Option<(usize, Ipv4Addr)> {
            nodes[a].ifaces.iter().enumerate().find_map(|(p, f)| {
                let m = domains[f.domain?].member(b)?;
                Some((p, m.ip))
            })
        };
        // Router neighbours of each IP node: the routers in its domains, sorted.
        let neighbours: Vec<Vec<usize>> = (0..n)
            .map(|u| {
                if sc.nodes[u].is_l2() {
                    return Vec::new();
                }
                let mut v: Vec<usize> = nodes[u]
                    .ifaces
                    .iter()
                    .filter_map(|f| f.domain)
                    .flat_map(|d| domains[d].members.iter().map(|m| m.node))
                    .filter(|&m| m != u && is_router(m))
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            })
            .collect();
        let adjacent = |a: usize, b: usize| neighbours[a].binary_search(&b).is_ok();
        // A stub router has exactly one router neighbour: everything it
        // does not reach on its own ports goes there.
        let stub = |r: usize| neighbours[r].len() == 1;
        let has_host: Vec<bool> = domains
            .iter()
            .map(|d| d.members.iter().any(|m| sc.nodes[m.node].is_host()))
            .collect();

        // 1. Connected routes (one per domain, on the router's first port in it).
        for r in (0..n).filter(|&i| is_router(i)) {
            let mut seen: Vec<usize> = nodes[r].ifaces.iter().filter_map(|f| f.domain).collect();
            seen.sort_unstable();
            seen.dedup();
            for d in seen {
                let port = domains[d].member(r).map(|m| m.port).unwrap_or(0);
                let dn = &domains[d];
                nodes[r]
                    .routes
                    .add(Route::new(dn.prefix, dn.prefix_len, port as u16))
                    .map_err(|e| node_err(r, e))?;
            }
        }
        // 2. A default route on every stub router, toward its neighbour.
        for r in (0..n).filter(|&i| is_router(i) && stub(i)) {
            let u = neighbours[r][0];
            if let Some((p, gw)) = hop_to(&nodes, r, u) {
                nodes[r]
                    .routes
                    .add(Route::new(Ipv4Addr::UNSPECIFIED, 0, p as u16).via(gw))
                    .map_err(|e| node_err(r, e))?;
            }
        }
        // 3. Every other router: a shortest-path route (hop count, ties to
        // the lower node index) to every domain with a host in it. The
        // search starts from the domain's first member, as routes were
        // always computed; members it cannot reach are tried in turn.
        let mut dist = vec![u32::MAX; n];
        let mut next = vec![usize::MAX; n];
        let mut touched: Vec<usize> = Vec::new();
        let mut q = VecDeque::new();
        for (di, d) in domains.iter().enumerate() {
            if !has_host[di] {
                continue;
            }
            for &v in &touched {
                dist[v] = u32::MAX;
                next[v] = usize::MAX;
            }
            touched.clear();
            for m in &d.members {
                if dist[m.node] != u32::MAX {
                    continue;
                }
                // Breadth-first from this member over routers.
                let root = m.node;
                let mut order: Vec<usize> = Vec::new();
                dist[root] = 0;
                touched.push(root);
                q.push_back(root);
                while let Some(u) = q.pop_front() {
                    if u != root && !is_router(u) {
                        continue;
                    }
                    for &v in &neighbours[u] {
                        if dist[v] == u32::MAX {
                            dist[v] = dist[u] + 1;
                            next[v] = u;
                            touched.push(v);
                            order.push(v);
                            q.push_back(v);
                        }
                    }
                }
                for r in order {
                    if stub(r) || d.member(r).is_some() {
                        continue;
                    }
                    if let Some((p, gw)) = hop_to(&nodes, r, next[r]) {
                        nodes[r]
                            .routes
                            .add(Route::new(d.prefix, d.prefix_len, p as u16).via(gw))
                            .map_err(|e| node_err(r, e))?;
                    }
                }
            }
        }
        // 4. Every other router: routes to the router-only (transit)
        // subnets of its router neighbours, toward the subnet's first
        // member — directly if it is a neighbour, else through the first
        // common neighbour in that member's order (the shortest path).
        for r in (0..n).filter(|&i| is_router(i) && !stub(i)) {
            let mut done: Vec<usize> = nodes[r].ifaces.iter().filter_map(|f| f.domain).collect();
            for &u in &neighbours[r] {
                let theirs: Vec<usize> = nodes[u].ifaces.iter().filter_map(|f| f.domain).collect();
                for di in theirs {
                    if has_host[di] || done.contains(&di) {
                        continue;
                    }
                    done.push(di);
                    let d = &domains[di];
                    let Some(m0) = d.members.first().map(|m| m.node) else {
                        continue;
                    };
                    let via = if adjacent(r, m0) {
                        Some(m0)
                    } else {
                        neighbours[m0].iter().copied().find(|&x| adjacent(r, x))
                    };
                    let Some((p, gw)) = via.and_then(|v| hop_to(&nodes, r, v)) else {
                        continue;
                    };
                    nodes[r]
                        .routes
                        .add(Route::new(d.prefix, d.prefix_len, p as u16).via(gw))
                        .map_err(|e| node_err(r, e))?;
                }
            }
        }
        // Flow paths.
        for (fi, f) in sc.flows.iter().enumerate() {
            if f.path.is_empty() {
                continue;
            }
            let ferr = |e: String, hint: &str| {
                NetError::new(Culprit::Flow(fi), format!("flow {}: {e}", f.name), hint)
            };
            let dst = nodes[f.to].ifaces[0].ip;
            if f.ring {
                let k = f.path.len();
                let visits = f.loops as usize * k + 1;
                for j in 0..visits {
                    let at = f.path[j % k];
                    let ttl = f.ttl - j as u8;
                    let nh = if j + 1 == visits {
                        f.to
                    } else {
                        f.path[(j + 1) % k]
                    };
                    let (p, gw) = hop_to(&nodes, at, nh).ok_or_else(|| {
                        ferr(
                            "ring path is not connected".into(),
                            "link consecutive routers of the path",
                        )
                    })?;
                    let mut rt = Route::new(dst, 32, p as u16).with_ttl(ttl, ttl);
                    if nh != f.to {
                        rt = rt.via(gw);
                    }
                    nodes[at].routes.add(rt).map_err(|e| {
                        ferr(
                            format!("router {}: {e}", sc.nodes[at].name),
                            "two ring flows to one host need TTLs that do not overlap",
                        )
                    })?;
                }
            } else {
                for (j, &at) in f.path.iter().enumerate() {
                    let nh = f.path.get(j + 1).copied().unwrap_or(f.to);
                    let (p, gw) = hop_to(&nodes, at, nh).ok_or_else(|| {
                        ferr(
                            "path is not connected".into(),
                            "link consecutive routers of the path",
                        )
                    })?;
                    let mut rt = Route::new(dst, 32, p as u16);
                    if nh != f.to {
                        rt = rt.via(gw);
                    }
                    // Two flows to one host along the same path share routes.
                    match nodes[at].routes.lookup(dst, f.ttl) {
                        Some(o) if o.dst.len == 32 && o.port == p as u16 => {}
                        _ => nodes[at].routes.add(rt).map_err(|e| {
                            ferr(
                                format!("router {}: {e}", sc.nodes[at].name),
                                "flows to one host need the same path, or ring paths with loops",
                            )
                        })?,
                    }
                }
            }
        }
        let mut static_at: Vec<(usize, Route, usize)> = Vec::new();
        for (si, s) in sc.routes.iter().enumerate() {
            let rerr = |e: String, hint: &str| NetError::new(Culprit::Route(si), e, hint);
            let (p, gw) = hop_to(&nodes, s.node, s.via).ok_or_else(|| {
                rerr(
                    format!(
                        "static route via `{}`, which is not a neighbour",
                        sc.nodes[s.via].name
                    ),
                    "via names a router in one of the node's broadcast domains",
                )
            })?;
            let mut rt = Route::new(s.dst.addr, s.dst.len, p as u16).via(gw);
            if let Some((lo, hi)) = s.ttl {
                rt = rt.with_ttl(lo, hi);
            }
            nodes[s.node].routes.add(rt).map_err(|e| {
                rerr(
                    format!("router {}: {e}", sc.nodes[s.node].name),
                    "a [[route]] may not repeat a generated route (connected, shortest-path, default or a flow's path); `qosnet check` lists them",
                )
            })?;
            static_at.push((s.node, rt, si));
        }

        // Trace each flow through the tables.
        let mut comp: Option<Vec<usize>> = None;
        let mut hops = Vec::with_capacity(sc.flows.len());
        for (fi, f) in sc.flows.iter().enumerate() {
            let ferr = |e: String, hint: &str| {
                NetError::new(Culprit::Flow(fi), format!("flow {}: {e}", f.name), hint)
            };
            let dst = nodes[f.to].ifaces[0].ip;
            let src_dom = nodes[f.from].ifaces[0].domain;
            if f.from != f.to && src_dom.is_some() && src_dom == nodes[f.to].ifaces[0].domain {
                hops.push(Vec::new());
                continue;
            }
            let Some(gw) = src_dom.and_then(|d| domains[d].members.iter().find(|m| is_router(m.node))) else {
                return Err(ferr(
                    format!(
                        "host {} has no router in its broadcast domain to send through",
                        sc.nodes[f.from].name
                    ),
                    "link a router to the host's switch or segment",
                ));
            };
            let mut at = gw.node;
            let mut ttl = f.ttl;
            let mut trace: Vec<Hop> = Vec::new();
            let mut used: Vec<Route> = Vec::new();
            loop {
                let Some(r) = nodes[at].routes.lookup(dst, ttl).copied() else {
                    // Say why: disconnected, or a gap the tables leave.
                    let comp = comp.get_or_insert_with(|| components(sc, &domains, &nodes));
                    if comp[f.from] != comp[f.to] {
                        return Err(ferr(
                            format!(
                                "`{}` cannot reach `{}`: no chain of links joins them",
                                sc.nodes[f.from].name, sc.nodes[f.to].name
                            ),
                            "link the two parts of the network, or change from/to",
                        ));
                    }
                    return Err(ferr(
                        format!(
                            "router {} has no route to {} ({dst}) for TTL {ttl}",
                            sc.nodes[at].name, sc.nodes[f.to].name
                        ),
                        "the only routes there have TTL ranges (from [[route]] or a ring path) that leave this TTL out",
                    ));
                };
                // A route already used at this router, and not chosen by
                // TTL: the packet would go round the same way until its TTL
                // runs out.
                if let Some(k) = trace.iter().position(|h| h.node == at) {
                    if used[k] == r && r.ttl == (0, 255) {
                        let mut cycle: Vec<&str> = trace[k..]
                            .iter()
                            .map(|h| sc.nodes[h.node].name.as_str())
                            .collect();
                        cycle.push(&sc.nodes[at].name);
                        let culprit = trace[k..].iter().zip(&used[k..]).find_map(|(h, rt)| {
                            static_at
                                .iter()
                                .find(|s| s.0 == h.node && s.1 == *rt)
                                .map(|s| s.2)
                        });
                        let msg = format!("flow {}: routing loop {}", f.name, cycle.join(" -> "));
                        return Err(match culprit {
                            Some(si) => NetError::new(
                                Culprit::Route(si),
                                format!("{msg}, made by this route"),
                                "a [[route]] sends the flow back where it came from; point it the other way or remove it",
                            ),
                            None => NetError::new(Culprit::Flow(fi), msg, "check the routes that `qosnet check` prints"),
                        });
                    }
                }
                if ttl <= 1 {
                    return Err(ferr(
                        format!(
                            "TTL {} runs out at router {} after {} router hops, before reaching {}",
                            f.ttl,
                            sc.nodes[at].name,
                            trace.len(),
                            sc.nodes[f.to].name
                        ),
                        if f.ttl < 255 {
                            "raise the flow's ttl (at most 255) or shorten its path"
                        } else {
                            "the path is longer than any IP packet can travel (255 hops): shorten it"
                        },
                    ));
                }
                let port = r.port as usize;
                trace.push(Hop { node: at, port, ttl });
                used.push(r);
                let f_out = &nodes[at].ifaces[port];
                let target = r.gateway.unwrap_or(dst);
                let peer = match f_out.domain.and_then(|d| domains[d].by_ip(target)) {
                    Some(m) => m.node,
                    None => {
                        return Err(ferr(
                            format!(
                                "router {} sends toward {target}, which is not on its port {}",
                                sc.nodes[at].name, f_out.ip
                            ),
                            "a route's next hop must be an address on the port's subnet",
                        ))
                    }
                };
                if peer == f.to {
                    break;
                }
                if !is_router(peer) {
                    return Err(ferr(
                        format!(
                            "routed to host {} instead of {}",
                            sc.nodes[peer].name, sc.nodes[f.to].name
                        ),
                        "check the routes that `qosnet check` prints",
                    ));
                }
                at = peer;
                ttl -= 1;
            }
            hops.push(trace);
        }
        Ok(Network { nodes, domains, hops })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_str;

    const RING: &str = r#"
[scenario]
name = "ring"
duration = "1s"
[defaults.link]
capacity = "100Mb/s"
[[node]]
name = "A"
kind = "router"
[[node]]
name = "B"
kind = "router"
[[node]]
name = "C"
kind = "router"
[[node]]
name = "h"
kind = "host"
[[link]]
a = "A"
b = "B"
[[link]]
a = "B"
b = "C"
[[link]]
a = "C"
b = "A"
[[link]]
a = "h"
b = "A"
[[flow]]
name = "loop"
from = "h"
to = "h"
path = ["A", "B", "C"]
loops = 3
size = 100
rate = "1kpps"
ttl = 20
"#;

    #[test]
    fn ring_loops_follow_ttl_routes() {
        let sc = load_str("ring", RING, &[]).unwrap();
        let net = Network::build(&sc).unwrap();
        let names: Vec<&str> = net.hops[0]
            .iter()
            .map(|h| sc.nodes[h.node].name.as_str())
            .collect();
        assert_eq!(names, ["A", "B", "C", "A", "B", "C", "A", "B", "C", "A"]);
        let ttls: Vec<u8> = net.hops[0].iter().map(|h| h.ttl).collect();
        assert_eq!(ttls, (11..=20).rev().collect::<Vec<u8>>());
        // The last visit leaves towards the host.
        let last = net.hops[0].last().unwrap();
        assert_eq!(
            net.nodes[last.node].ifaces[last.port].peer,
            sc.node_index("h").unwrap()
        );
        // Every router reaches every link subnet.
        for r in 0..3 {
            for l in &sc.links {
                assert!(net.nodes[r].routes.lookup(l.a_ip, 64).is_some());
            }
        }
    }

    #[test]
    fn unroutable_flows_are_refused() {
        let t = RING.replace("ttl = 20", "ttl = 10");
        let e = load_str("ring", &t, &[]).unwrap_err();
        assert!(e.msg.contains("TTL"), "{e}");
    }

    const SWITCHED: &str = r#"
[scenario]
name = "lan"
duration = "1s"
[defaults.link]
capacity = "1Gb/s"
[[node]]
name = "R"
kind = "router"
[[node]]
name = "SW"
kind = "switch"
switch = { latency = "2us", queue_packets = 50 }
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"
[[node]]
name = "h3"
kind = "host"
[[node]]
name = "s1"
kind = "host"
[[node]]
name = "s2"
kind = "host"
[[link]]
a = "R"
b = "SW"
[[link]]
a = "h1"
b = "SW"
[[link]]
a = "h2"
b = "SW"
vlan = 20
[[link]]
a = "R"
b = "h3"
[[segment]]
name = "bus"
nodes = ["R", "s1", "s2"]
capacity = "10Mb/s"
propagation = "4us"
[[flow]]
name = "local"
from = "h1"
to = "h3"
size = 100
rate = "1kpps"
[[flow]]
name = "onbus"
from = "s1"
to = "s2"
size = 100
rate = "1kpps"
[[flow]]
name = "far"
from = "s2"
to = "h1"
size = 100
rate = "1kpps"
"#;

    #[test]
    fn switches_and_segments_make_broadcast_domains() {
        let sc = load_str("lan", SWITCHED, &[]).unwrap();
        let net = Network::build(&sc).unwrap();
        let idx = |n: &str| sc.node_index(n).unwrap();
        // R, h1 behind SW in VLAN 1 share a subnet; h2 (VLAN 20) is alone.
        let d = net.nodes[idx("h1")].ifaces[0].domain.unwrap();
        let dom = &net.domains[d];
        let names: Vec<&str> = dom
            .members
            .iter()
            .map(|m| sc.nodes[m.node].name.as_str())
            .collect();
        assert_eq!(names, ["R", "h1"]);
        assert_eq!(dom.members[0].ip, "10.0.0.1".parse::<Ipv4Addr>().unwrap());
        assert_eq!(dom.members[1].ip, "10.0.0.2".parse::<Ipv4Addr>().unwrap());
        let d2 = net.nodes[idx("h2")].ifaces[0].domain.unwrap();
        assert_ne!(d, d2);
        assert_eq!(net.domains[d2].members.len(), 1);
        // The switch's own ports have no address.
        assert!(net.nodes[idx("SW")]
            .ifaces
            .iter()
            .all(|f| f.ip.is_unspecified() && f.domain.is_none()));
        // The bus: R, s1, s2 in one /24 with consecutive addresses; the
        // drop cables' delays are the stations' positions (evenly spaced).
        let bus = sc.node_index("bus").unwrap();
        let b = net.nodes[idx("s1")].ifaces[0].domain.unwrap();
        let ips: Vec<String> = net.domains[b].members.iter().map(|m| m.ip.to_string()).collect();
        assert_eq!(ips.len(), 3);
        let delays: Vec<u64> = sc
            .links
            .iter()
            .filter(|l| l.b == bus)
            .map(|l| l.delay.as_nanos())
            .collect();
        assert_eq!(delays, [0, 2_000, 4_000]);
        // Hops: h1 -> h3 through R; s1 -> s2 directly on the bus; s2 -> h1
        // through R, which reaches h1 without a gateway (on-link).
        let hop_names = |fi: usize| -> Vec<&str> {
            net.hops[fi]
                .iter()
                .map(|h| sc.nodes[h.node].name.as_str())
                .collect()
        };
        assert_eq!(hop_names(0), ["R"]);
        assert!(hop_names(1).is_empty());
        assert_eq!(hop_names(2), ["R"]);
        // First-hop MACs: a host sends to its gateway, or straight to a
        // neighbour on its own domain.
        let s2_ip = net.host_ip(idx("s2"));
        let s2_mac = net.nodes[idx("s2")].ifaces[0].mac;
        assert_eq!(net.first_hop_mac(&sc, idx("s1"), s2_ip), s2_mac);
        let r_mac_on_bus = net.domains[b].member(idx("R")).unwrap().mac;
        assert_eq!(
            net.first_hop_mac(&sc, idx("s1"), net.host_ip(idx("h1"))),
            r_mac_on_bus
        );
    }
}
