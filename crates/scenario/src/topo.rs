//! The network a scenario describes, worked out: each node's interfaces
//! (one per link, in link order), addresses and MACs, every router's route
//! table, and each flow's hop-by-hop trace through those tables.
//!
//! Routes are generated, not typed: hosts and link subnets are reached by
//! shortest path (hop count, ties to the lower node index); a flow's `path`
//! adds /32 routes to its destination; a ring path walked `loops` times
//! adds one exact-TTL route per visit (ICC 2006 §IV-B), so routers route on
//! destination and TTL as the paper's did. `[[route]]` entries come last
//! and must not collide.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use qosnet_core::route::{Route, RouteTable};
use qosnet_core::wire::MacAddr;

use crate::model::Scenario;

#[derive(Clone, Debug)]
pub struct Iface {
    pub link: usize,
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    pub mac: MacAddr,
    pub peer: usize,
    pub peer_port: usize,
    pub peer_ip: Ipv4Addr,
    pub peer_mac: MacAddr,
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

#[derive(Clone, Debug)]
pub struct Network {
    pub nodes: Vec<NodeNet>,
    /// Per flow, the router hops from source host to destination host.
    pub hops: Vec<Vec<Hop>>,
}

impl Network {
    /// The IP address of a host (its only interface).
    pub fn host_ip(&self, node: usize) -> Ipv4Addr {
        self.nodes[node].ifaces[0].ip
    }
    pub fn build(sc: &Scenario) -> Result<Network, String> {
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
            });
        }
        let is_router = |i: usize| sc.nodes[i].is_router();
        let port_to =
            |nodes: &Vec<NodeNet>, a: usize, b: usize| nodes[a].ifaces.iter().position(|f| f.peer == b);

        // Next hop from every router toward every node: BFS over routers.
        let mut next = vec![vec![None::<usize>; n]; n];
        for dst in 0..n {
            let mut dist = vec![usize::MAX; n];
            let mut q = VecDeque::new();
            dist[dst] = 0;
            q.push_back(dst);
            while let Some(u) = q.pop_front() {
                if u != dst && !is_router(u) {
                    continue;
                }
                let mut nb: Vec<usize> = nodes[u].ifaces.iter().map(|f| f.peer).collect();
                nb.sort();
                for v in nb {
                    if dist[v] == usize::MAX && is_router(v) {
                        dist[v] = dist[u] + 1;
                        next[v][dst] = Some(u);
                        q.push_back(v);
                    }
                }
            }
        }
        let add = |nodes: &mut Vec<NodeNet>, at: usize, r: Route| -> Result<(), String> {
            nodes[at]
                .routes
                .add(r)
                .map_err(|e| format!("router {}: {e}", sc.nodes[at].name))
        };
        // Connected subnets and shortest-path routes to every link subnet.
        for r in (0..n).filter(|&i| is_router(i)) {
            for (li, l) in sc.links.iter().enumerate() {
                let port = if l.a == r || l.b == r {
                    nodes[r].ifaces.iter().position(|f| f.link == li)
                } else {
                    // Toward the nearer end of the link.
                    let end = if next[r][l.a].is_some() { l.a } else { l.b };
                    next[r][end].and_then(|h| port_to(&nodes, r, h))
                };
                if let Some(p) = port {
                    let mut rt = Route::new(l.prefix, l.prefix_len, p as u16);
                    if l.a != r && l.b != r {
                        rt = rt.via(nodes[r].ifaces[p].peer_ip);
                    }
                    add(&mut nodes, r, rt)?;
                }
            }
        }
        // Flow paths.
        for f in &sc.flows {
            if f.path.is_empty() {
                continue;
            }
            let dst = nodes[f.to].ifaces[0].ip;
            let to_router = nodes[f.to].ifaces[0].peer;
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
                    let p = port_to(&nodes, at, nh).ok_or("ring path is not connected")?;
                    let rt = Route::new(dst, 32, p as u16).with_ttl(ttl, ttl);
                    add(&mut nodes, at, rt).map_err(|e| format!("flow {}: {e}", f.name))?;
                }
            } else {
                for (j, &at) in f.path.iter().enumerate() {
                    let nh = f.path.get(j + 1).copied().unwrap_or(f.to);
                    debug_assert!(j + 1 < f.path.len() || at == to_router);
                    let p = port_to(&nodes, at, nh).ok_or("path is not connected")?;
                    let rt = Route::new(dst, 32, p as u16);
                    // Two flows to one host along the same path share routes.
                    match nodes[at].routes.lookup(dst, f.ttl) {
                        Some(o) if o.len == 32 && o.port == p as u16 => {}
                        _ => add(&mut nodes, at, rt).map_err(|e| {
                            format!("flow {}: {e} (flows to one host need the same path, or ring paths with loops)", f.name)
                        })?,
                    }
                }
            }
        }
        for s in &sc.routes {
            let p = port_to(&nodes, s.node, s.via).ok_or("static route via a non-neighbour")?;
            let mut rt = Route::new(s.prefix, s.len, p as u16).via(nodes[s.node].ifaces[p].peer_ip);
            if let Some((lo, hi)) = s.ttl {
                rt = rt.with_ttl(lo, hi);
            }
            add(&mut nodes, s.node, rt)?;
        }

        // Trace each flow through the tables.
        let mut hops = Vec::new();
        for f in &sc.flows {
            let dst = nodes[f.to].ifaces[0].ip;
            let mut at = nodes[f.from].ifaces[0].peer;
            let mut ttl = f.ttl;
            let mut trace = Vec::new();
            loop {
                if ttl <= 1 {
                    return Err(format!(
                        "flow {}: TTL runs out at router {} (routing loop?)",
                        f.name, sc.nodes[at].name
                    ));
                }
                let Some(r) = nodes[at].routes.lookup(dst, ttl) else {
                    return Err(format!(
                        "flow {}: router {} has no route to {dst} (TTL {ttl})",
                        f.name, sc.nodes[at].name
                    ));
                };
                let port = r.port as usize;
                trace.push(Hop { node: at, port, ttl });
                let peer = nodes[at].ifaces[port].peer;
                if peer == f.to {
                    break;
                }
                if !is_router(peer) {
                    return Err(format!(
                        "flow {}: routed to host {} instead of {}",
                        f.name, sc.nodes[peer].name, sc.nodes[f.to].name
                    ));
                }
                at = peer;
                ttl -= 1;
            }
            hops.push(trace);
        }
        Ok(Network { nodes, hops })
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
}
