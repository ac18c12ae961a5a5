//! Building the simulated network from a scenario: one core `Router` per
//! router node with a scheduler per port, hosts with their sources, the
//! wiring between ports, and — for TDP scenarios — the reservation plan,
//! stamp decoders, edge shapers and TDP wheels.

use std::collections::BTreeMap;

use qosnet_core::router::{PortConfig, Router, TdpNode};
use qosnet_core::sched::{Fifo, Prio, Scheduler};
use qosnet_core::tdp::{Ctr, EdgeShaper, FlowKey, PaddingSpec, StampMode, TdpWheel};
use qosnet_core::wire::IPPROTO_UDP;
use qosnet_scenario::tdpplan::{self, TdpPlan};
use qosnet_scenario::topo::Network;
use qosnet_scenario::{NodeKind, RouterSpec, Scenario, SchedKind};

use crate::sim::{Clock, HostNode, NodeState, RouterNode, Sim, Wiring};
use crate::source::Source;

/// Build the port scheduler a router spec asks for.
pub fn make_scheduler(
    spec: &RouterSpec,
    tdp: Option<(&Ctr, u32, bool, Option<PaddingSpec>)>,
    rate_bps: u64,
    framing: qosnet_core::Framing,
) -> Result<Box<dyn Scheduler>, String> {
    let fifo = || Box::new(Fifo::new(spec.queue_packets, spec.queue_bytes)) as Box<dyn Scheduler>;
    Ok(match (spec.scheduler, tdp) {
        (SchedKind::Tdp, Some((ctr, d_max, tdp_peer, padding))) => {
            let stamping = if tdp_peer {
                StampMode::Tdp
            } else {
                StampMode::Rewrite(0)
            };
            Box::new(TdpWheel::new(
                *ctr,
                d_max,
                rate_bps,
                framing,
                fifo(),
                stamping,
                padding,
            )?)
        }
        (SchedKind::Prio, _) => Box::new(Prio::new(vec![fifo(), fifo()])),
        _ => fifo(),
    })
}

pub(crate) fn build(sc: Scenario, net: Network) -> Result<Sim, String> {
    let mut extra = BTreeMap::new();
    let ctr = match &sc.tdp {
        Some(t) => Some(Ctr::new(t.tf, t.tfs_per_tc, t.tcs_per_sc)?),
        None => None,
    };
    let is_tdp = |i: usize| matches!(sc.nodes[i].router(), Some(r) if r.scheduler == SchedKind::Tdp);
    let plan: Option<TdpPlan> = match &ctr {
        Some(_) if (0..sc.nodes.len()).any(is_tdp) => {
            let p = tdpplan::plan(&sc, &net)?;
            extra.insert("tdp_plan".to_string(), p.summary_json(&sc, &net));
            Some(p)
        }
        _ => None,
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
                let mut r = Router::new(node.name.clone());
                let tdp_here = is_tdp(i) && ctr.is_some();
                let d_max = plan.as_ref().map(|p| p.d_max[i]).unwrap_or(spec.tdp_delay);
                for f in &nn.ifaces {
                    let link = &sc.links[f.link];
                    let tdp_peer = tdp_here && is_tdp(f.peer);
                    let padding =
                        (tdp_peer && sc.tdp.as_ref().is_some_and(|t| t.padding)).then_some(PaddingSpec {
                            src_mac: f.mac,
                            dst_mac: f.peer_mac,
                            src_ip: f.ip,
                            dst_ip: f.peer_ip,
                        });
                    let tdp_arg = if tdp_here {
                        ctr.as_ref().map(|c| (c, d_max, tdp_peer, padding))
                    } else {
                        None
                    };
                    let sched = make_scheduler(spec, tdp_arg, link.capacity_bps, link.framing)
                        .map_err(|e| format!("router {}: {e}", node.name))?;
                    r.add_port(
                        PortConfig {
                            name: format!("{}-{}", node.name, sc.nodes[f.peer].name),
                            mac: f.mac,
                            ip: f.ip,
                            prefix_len: f.prefix_len,
                            rate_bps: link.capacity_bps,
                            framing: link.framing,
                            peer_mac: Some(f.peer_mac),
                            tdp_peer,
                        },
                        sched,
                    );
                }
                for rt in nn.routes.iter() {
                    r.routes.add(*rt)?;
                }
                if let (true, Some(ctr), Some(plan)) = (tdp_here, &ctr, &plan) {
                    let t = sc.tdp.as_ref().ok_or("tdp section missing")?;
                    let mut shaper = EdgeShaper::new(*ctr, t.shaper_queue);
                    let mut d_flow = std::collections::HashMap::new();
                    for (fi, f) in sc.flows.iter().enumerate() {
                        let Some(slots) = &plan.slots[fi] else {
                            continue;
                        };
                        let key = FlowKey {
                            src: net.host_ip(f.from),
                            dst: net.host_ip(f.to),
                            proto: IPPROTO_UDP,
                            sport: f.sport,
                            dport: f.dport,
                        };
                        let first = net.hops[fi][0];
                        if first.node == i {
                            shaper.add_flow(key, first.port as u16, slots.clone(), 1)?;
                        }
                        if let Some(d) = f.tdp_delay {
                            d_flow.insert(key, d);
                        }
                    }
                    r.set_tdp(TdpNode {
                        ctr: *ctr,
                        d: spec.tdp_delay,
                        d_flow,
                        shaper,
                        max_lag: t.max_lag,
                    });
                }
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
