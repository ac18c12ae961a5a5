//! Building the simulated network from a scenario: one core `Router` per
//! router node with a scheduler per port, hosts with their sources, the
//! wiring between ports, and — for TDP scenarios — the reservation plan,
//! stamp decoders, edge shapers and TDP wheels.

use std::collections::BTreeMap;

use qosnet_core::sched::Fifo;
use qosnet_scenario::build::{build_router, tdp_setup, BuildOpts};
use qosnet_scenario::topo::Network;
use qosnet_scenario::{NodeKind, Scenario};

use crate::sim::{Clock, HostNode, NodeState, RouterNode, Sim, Wiring};
use crate::source::Source;

/// Build the port scheduler a router spec asks for (shared with live mode:
/// [`qosnet_scenario::build::make_scheduler`]).
pub use qosnet_scenario::build::make_scheduler;

pub(crate) fn build(sc: Scenario, net: Network) -> Result<Sim, String> {
    let mut extra = BTreeMap::new();
    let (ctr, plan) = tdp_setup(&sc, &net)?;
    if let Some(p) = &plan {
        extra.insert("tdp_plan".to_string(), p.summary_json(&sc, &net));
    }
    let opts = BuildOpts {
        static_peer_macs: true,
        flow_src: Vec::new(),
    };

    let mut nodes = Vec::new();
    let mut wiring: Wiring = Vec::new();
    for (i, node) in sc.nodes.iter().enumerate() {
        let nn = &net.nodes[i];
        wiring.push(
            nn.ifaces
                .iter()
                .map(|f| (f.peer as u32, f.peer_port as u16, sc.links[f.link].delay))
                .collect(),
        );
        match &node.kind {
            NodeKind::Router(spec) => {
                let r = build_router(&sc, &net, ctr.as_ref(), plan.as_ref(), i, &opts)?;
                nodes.push(NodeState::Router(Box::new(RouterNode {
                    r,
                    clock: Clock {
                        offset_ns: spec.clock_offset_ns,
                        drift_ppm: spec.clock_drift_ppm,
                    },
                    proc: spec.processing,
                    cpu_q: Default::default(),
                    cpu_busy: false,
                    cpu_limit: spec.input_queue,
                    input_drops: 0,
                })));
            }
            NodeKind::Host(hs) => {
                let f = &nn.ifaces[0];
                let link = &sc.links[f.link];
                let end = sc.duration;
                let sources = sc
                    .flows
                    .iter()
                    .filter(|fl| fl.from == i)
                    .map(|fl| {
                        let stop = fl.stop.map(|s| s.min(end)).unwrap_or(end);
                        Source::new(
                            fl.id,
                            fl.pattern.clone(),
                            fl.size.clone(),
                            fl.pps(),
                            fl.start,
                            stop,
                        )
                    })
                    .collect();
                nodes.push(NodeState::Host(Box::new(HostNode {
                    clock: Clock {
                        offset_ns: hs.clock_offset_ns,
                        drift_ppm: hs.clock_drift_ppm,
                    },
                    ip: f.ip,
                    mac: f.mac,
                    peer_mac: f.peer_mac,
                    nic: Fifo::new(10_000, 16 << 20),
                    rate_bps: link.capacity_bps,
                    framing: link.framing,
                    busy_until: Default::default(),
                    sources,
                    tx_pkts: 0,
                    tx_bytes: 0,
                    tx_wire: 0,
                    misdelivered: 0,
                })));
            }
        }
    }
    Ok(Sim::assemble(sc, net, nodes, wiring, extra))
}
