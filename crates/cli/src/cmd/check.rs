//! `qosnet check`: validate a scenario and show its network — every
//! node's ports and routes, each flow's hop-by-hop trace, the TDP
//! reservation plan.

use anyhow::{anyhow, Result};

use crate::args::ScenarioArgs;

pub fn run(a: ScenarioArgs) -> Result<()> {
    let sc = a.load()?;
    let net = qosnet_scenario::topo::Network::build(&sc).map_err(|e| anyhow!("{}: {e}", sc.source))?;
    outln!(
        "scenario {}: {} nodes, {} links, {} flows",
        sc.name,
        sc.nodes.len(),
        sc.links.len(),
        sc.flows.len()
    );
    for (i, n) in sc.nodes.iter().enumerate() {
        outln!("node {} ({})", n.name, n.kind_name());
        for f in &net.nodes[i].ifaces {
            // Layer-2 ports (a switch's, a segment's) have no address.
            let addr = if f.ip.is_unspecified() {
                String::new()
            } else {
                format!(" {}/{}", f.ip, f.prefix_len)
            };
            outln!("  port{addr} mac {} -> {}", f.mac, sc.nodes[f.peer].name);
        }
        for r in net.nodes[i].routes.iter() {
            outln!("  route {r}");
        }
    }
    for (fi, f) in sc.flows.iter().enumerate() {
        let hops: Vec<String> = net.hops[fi]
            .iter()
            .map(|h| sc.nodes[h.node].name.clone())
            .collect();
        outln!(
            "flow {}: {:.1} pps, {} router hops: {}",
            f.name,
            f.pps(),
            hops.len(),
            hops.join(" ")
        );
    }
    if sc.tdp.is_some() {
        let plan = qosnet_scenario::tdpplan::plan(&sc, &net).map_err(|e| anyhow!("{}: {e}", sc.source))?;
        outln!("{}", plan.describe(&sc, &net));
    }
    outln!("ok");
    Ok(())
}
