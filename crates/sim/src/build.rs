//! Building the simulated network from a scenario: one core `Router` per
//! router node with a scheduler per port, hosts with their sources, the
//! wiring between ports, and — for TDP scenarios — the reservation plan,
//! stamp decoders, edge shapers and TDP wheels.

use std::collections::BTreeMap;

use qosnet_core::node::cpu::Cpu;
use qosnet_core::node::Node;
use qosnet_core::Duration;
use qosnet_scenario::build::{build_node, BuildOpts, Setup};
use qosnet_scenario::topo::Network;
use qosnet_scenario::{NodeKind, Scenario};

use crate::host::Host;
use crate::media::segment::{Segment, SegmentConfig};
use crate::media::{link::Channel, Attach, MediumNode};
use crate::sim::{Clock, Medium, Sim, Slot};
use crate::source::Source;

/// Build the port scheduler a router spec asks for (shared with live mode:
/// [`qosnet_scenario::build::make_scheduler`]).
pub use qosnet_scenario::build::make_scheduler;

pub(crate) fn build(sc: Scenario, net: Network) -> Result<Sim, String> {
    let mut extra = BTreeMap::new();
    let setup = Setup::new(&sc, &net)?;
    if let Some(p) = &setup.plan {
        extra.insert("tdp_plan".to_string(), p.summary_json(&sc, &net));
    }
    let opts = BuildOpts {
        static_peer_macs: true,
        ..BuildOpts::default()
    };

    // Shared segments first: ports on them attach to the medium.
    let mut media = Vec::new();
    let mut seg_of = vec![None; sc.nodes.len()];
    for (i, node) in sc.nodes.iter().enumerate() {
        let NodeKind::Segment(spec) = &node.kind else {
            continue;
        };
        let ifaces = &net.nodes[i].ifaces;
        let cfg = SegmentConfig {
            rate_bps: spec.capacity_bps,
            framing: spec.framing,
            // Each drop cable's delay is its station's place on the bus.
            positions_ns: ifaces.iter().map(|f| sc.links[f.link].delay.as_nanos()).collect(),
            slot_bits: spec.slot_bits,
            jam_bits: spec.jam_bits,
            attempt_limit: spec.attempt_limit,
            backoff_limit: spec.backoff_limit,
            // The segment's own stream, so adding a segment does not change
            // the draws of everything else.
            seed: sc.seed ^ (0x5e67_0000 + i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        };
        let seg = Segment::new(cfg).map_err(|e| format!("segment {}: {e}", node.name))?;
        let stations = ifaces
            .iter()
            .map(|f| (f.peer as u32, f.peer_port as u16))
            .collect();
        seg_of[i] = Some(media.len() as u32);
        media.push(Medium::new(seg, node.name.clone(), stations));
    }

    let mut slots = Vec::new();
    let mut attach = Vec::new();
    for i in 0..sc.nodes.len() {
        let nn = &net.nodes[i];
        attach.push(
            nn.ifaces
                .iter()
                .enumerate()
                .map(|(k, f)| match (seg_of[f.peer], seg_of[i]) {
                    (Some(seg), _) => Attach::Segment {
                        seg,
                        station: f.peer_port as u16,
                    },
                    // The segment's own ports: its stations (never used).
                    (None, Some(seg)) => Attach::Segment {
                        seg,
                        station: k as u16,
                    },
                    (None, None) => {
                        let l = &sc.links[f.link];
                        Attach::Link(Channel {
                            peer: f.peer as u32,
                            peer_port: f.peer_port as u16,
                            delay: l.delay,
                            gap: Duration::for_bytes(l.framing.ifg as u64, l.capacity_bps),
                        })
                    }
                })
                .collect(),
        );
        let end = sc.duration;
        let sources: Vec<Source> = sc
            .flows
            .iter()
            .filter(|fl| fl.from == i)
            .map(|fl| {
                let stop = fl.stop.map(|s| s.min(end)).unwrap_or(end);
                Source::new(fl.id, fl.pattern, fl.size.clone(), fl.pps(), fl.start, stop)
            })
            .collect();
        let (n, clock, cpu, source_clock) = make_node(&sc, &net, &setup, &opts, i)?;
        let slot = Slot::new(n, clock, cpu).with_sources(sources, source_clock);
        slots.push(slot);
    }
    Ok(Sim::assemble(sc, net, slots, attach, media, extra))
}

/// What node `i` is in the simulator, as it boots: the node, its clock,
/// its CPU and the clock its traffic sources run on. Called again when a
/// killed node restarts (`[[fault]] restart`): a reboot starts from the
/// configuration, not from the state it died in.
type Booted = (Box<dyn Node>, Clock, Option<Cpu>, Clock);

pub(crate) fn make_node(
    sc: &Scenario,
    net: &Network,
    setup: &Setup,
    opts: &BuildOpts,
    i: usize,
) -> Result<Booted, String> {
    let node = &sc.nodes[i];
    let nn = &net.nodes[i];
    Ok(match &node.kind {
        NodeKind::Segment(_) => (
            Box::new(MediumNode::new(node.name.clone(), nn.ifaces.len())),
            Clock::default(),
            None,
            Clock::default(),
        ),
        NodeKind::Host(hs) => {
            let f = &nn.ifaces[0];
            let link = &sc.links[f.link];
            let echo = sc.flows.iter().map(|fl| fl.echo && fl.to == i).collect();
            let mut host = Host::new(
                node.name.clone(),
                f.ip,
                f.mac,
                f.peer_mac,
                link.capacity_bps,
                link.framing,
                echo,
            );
            if f.domain.is_some_and(|d| !net.domains[d].is_point_to_point()) {
                host = host.announce_on_start();
            }
            if sc.nodes[f.peer].is_medium() {
                host = host.half_duplex();
            }
            // The NIC runs on true time; the host's clock drives its
            // traffic generators only.
            (
                Box::new(host),
                Clock::default(),
                None,
                Clock {
                    offset_ns: hs.clock_offset_ns,
                    drift_ppm: hs.clock_drift_ppm,
                },
            )
        }
        _ => {
            let n = build_node(sc, net, setup, i, opts)?.ok_or_else(|| {
                format!(
                    "node {}: no simulated node of kind {}",
                    node.name,
                    node.kind_name()
                )
            })?;
            let (offset_ns, drift_ppm) = node.clock();
            let cpu = node
                .cpu()
                .map(|(dist, limit)| Cpu::new(dist, limit).with_control(sc.control_processing(i)));
            (n, Clock { offset_ns, drift_ppm }, cpu, Clock::default())
        }
    })
}

/// Node `i` booting again after a kill: its node and CPU, fresh.
pub(crate) fn reboot(sc: &Scenario, net: &Network, i: usize) -> Result<(Box<dyn Node>, Option<Cpu>), String> {
    let setup = Setup::new(sc, net)?;
    let opts = BuildOpts {
        static_peer_macs: true,
        ..BuildOpts::default()
    };
    make_node(sc, net, &setup, &opts, i).map(|(n, _, cpu, _)| (n, cpu))
}
