//! Core routers from a scenario: one [`Router`] per router node, with a
//! scheduler per port, its route table and — for TDP scenarios — the
//! reservation plan's edge shapers, per-flow forwarding delays and TDP
//! wheels. The simulator and the live runtime both build their routers
//! here, so a scenario means the same router in both modes; they differ
//! only in [`BuildOpts`].

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use qosnet_core::flow::FlowKey;
use qosnet_core::node::{Duplex, Node};
use qosnet_core::rether::app::{AppConfig, RetherHost, RtFlow};
use qosnet_core::route::{Route, RouteTable};
use qosnet_core::router::{PortConfig, Router, TdpNode};
use qosnet_core::sched::{Fifo, Scheduler};
use qosnet_core::stsdr::wire::Vlan;
use qosnet_core::stsdr::{Balancer, BalancerConfig, Forwarder, ForwarderConfig, Liveness, OutLink};
use qosnet_core::switch::{Switch, SwitchConfig, SwitchPortConfig, VlanMode};
use qosnet_core::tdp::{Ctr, EdgeShaper, PaddingSpec, StampMode, TdpWheel, TfLag};
use qosnet_core::wire::IPPROTO_UDP;
use qosnet_core::{Duration, Framing, Instant};

use crate::model::{NodeKind, RouterSpec, Scenario, SchedKind, StsdrParams, SwitchSpec};
use crate::rethertopo::RetherTopo;
use crate::tdpplan::{self, TdpPlan};
use crate::topo::Network;

/// How the two drivers differ when building the same router.
#[derive(Clone, Debug, Default)]
pub struct BuildOpts {
    /// Give each port its link peer's MAC (the simulator, where nothing
    /// answers ARP); `false` leaves next hops to ARP (live).
    pub static_peer_macs: bool,
    /// Per flow (scenario order), the source address its sender really
    /// uses, where that is not the source host's address (live: the sender
    /// namespace of a host whose flows loop back to itself). Edge shapers
    /// and per-flow TDP delays key on it.
    pub flow_src: Vec<Option<Ipv4Addr>>,
    /// The instant scenario time 0 stands for in the node's clock: zero in
    /// the simulator, the run's start (CLOCK_REALTIME) live. Nodes that
    /// act at scenario times (a RETHER host's session close, its
    /// measurement window, injected faults) add it.
    pub epoch: Instant,
}

/// What building nodes needs from the whole scenario, worked out once.
pub struct Setup {
    pub ctr: Option<Ctr>,
    pub plan: Option<TdpPlan>,
}

impl Setup {
    pub fn new(sc: &Scenario, net: &Network) -> Result<Setup, String> {
        let (ctr, plan) = tdp_setup(sc, net)?;
        Ok(Setup { ctr, plan })
    }
}

/// The builder registry: the sans-IO node that scenario node `i` is, the
/// same for every driver. `None` for the kinds a driver provides itself:
/// hosts (the simulator's own host; a namespace's kernel stack live) and
/// segments (a medium in the simulator; a Linux bridge live). Adding a
/// node kind means a line here, its module, and its scenario schema.
pub fn build_node(
    sc: &Scenario,
    net: &Network,
    setup: &Setup,
    i: usize,
    opts: &BuildOpts,
) -> Result<Option<Box<dyn Node>>, String> {
    Ok(match &sc.nodes[i].kind {
        NodeKind::Router(_) => Some(Box::new(build_router(
            sc,
            net,
            setup.ctr.as_ref(),
            setup.plan.as_ref(),
            i,
            opts,
        )?)),
        NodeKind::Host(_) | NodeKind::Segment(_) => None,
        NodeKind::Switch(spec) => Some(Box::new(build_switch(sc, net, i, spec)?)),
        NodeKind::StsdrForwarder(_) => Some(Box::new(build_forwarder(sc, net, i, opts)?)),
        NodeKind::StsdrBalancer(_) => Some(Box::new(build_balancer(sc, net, i)?)),
        NodeKind::Rether(_) => Some(Box::new(build_rether(sc, net, i, opts.epoch)?)),
        NodeKind::RetherBridge(_) => Some(Box::new(build_rether_bridge(sc, net, i, opts.epoch)?)),
    })
}

/// The `[stsdr]` of a scenario with STSDR nodes.
fn stsdr_params(sc: &Scenario) -> Result<&StsdrParams, String> {
    sc.stsdr
        .as_ref()
        .ok_or_else(|| "STSDR nodes need an [stsdr] table".to_string())
}

/// The STSDR's forwarders, in FE id order (their order in the file).
pub fn stsdr_forwarders(sc: &Scenario) -> Vec<usize> {
    (0..sc.nodes.len())
        .filter(|&i| matches!(sc.nodes[i].kind, NodeKind::StsdrForwarder(_)))
        .collect()
}

/// The forwarder FE_id of node `i`: one port to the T-switch, the
/// outgoing links' next hops found in its broadcast domain, a /32 route
/// per next-hop address to its OL index (`Route::port` names the OL).
pub fn build_forwarder(
    sc: &Scenario,
    net: &Network,
    i: usize,
    opts: &BuildOpts,
) -> Result<Forwarder, String> {
    let p = stsdr_params(sc)?;
    let fes = stsdr_forwarders(sc);
    let id = fes.iter().position(|&x| x == i).ok_or("not a forwarder")?;
    let name = &sc.nodes[i].name;
    let f = net.nodes[i]
        .ifaces
        .first()
        .ok_or_else(|| format!("forwarder {name} has no link"))?;
    let link = &sc.links[f.link];
    let dom = f
        .domain
        .map(|d| &net.domains[d])
        .ok_or_else(|| format!("forwarder {name} is on no IP subnet"))?;
    let mut outlinks = Vec::new();
    let mut routes = RouteTable::new();
    for (j, &n) in p.outlinks.iter().enumerate() {
        let m = dom.member(n).ok_or_else(|| {
            format!(
                "outgoing link {} is not in forwarder {name}'s broadcast domain",
                sc.nodes[n].name
            )
        })?;
        let rate_bps = net.nodes[n]
            .ifaces
            .get(m.port)
            .map(|x| sc.links[x.link].capacity_bps)
            .unwrap_or(link.capacity_bps);
        outlinks.push(OutLink {
            name: sc.nodes[n].name.clone(),
            next_hop: m.ip,
            mac: opts.static_peer_macs.then_some(m.mac),
            rate_bps,
        });
        // The next hop's own addresses; a router next hop's hosts beyond
        // it need routes the scenario does not generate for an STSDR.
        for x in &net.nodes[n].ifaces {
            if !x.ip.is_unspecified() {
                routes.add(Route::new(x.ip, 32, j as u16).via(m.ip))?;
            }
        }
    }
    let mut cfg = ForwarderConfig::new(
        name.clone(),
        id as u16,
        fes.len() as u16,
        f.mac,
        outlinks,
        p.weights.len(),
    );
    cfg.ip = f.ip;
    cfg.rate_bps = link.capacity_bps;
    cfg.framing = link.framing;
    cfg.weights = p.weights.clone();
    cfg.queue_limit = p.queue_limit;
    cfg.variant = p.variant;
    cfg.tie = p.tie;
    cfg.proposer = p.proposer;
    cfg.lds_rank = p.lds_rank;
    cfg.t_br = p.t_br;
    cfg.costs = p.costs;
    cfg.cycle_guard = p.cycle_guard;
    cfg.fe_timeout = p.fe_timeout;
    cfg.master_timeout = p.master_timeout;
    cfg.vlan = Some(Vlan::new(p.vlan));
    cfg.mtu = p.mtu;
    cfg.heartbeat = p.heartbeat;
    cfg.ds_loss = p.ds_loss;
    cfg.loss_seed = sc.seed;
    Forwarder::new(cfg, routes)
}

/// A load balancer: the router's external address is its own address on
/// the T-switch subnet; flows are hashed over every forwarder.
pub fn build_balancer(sc: &Scenario, net: &Network, i: usize) -> Result<Balancer, String> {
    let p = stsdr_params(sc)?;
    let name = &sc.nodes[i].name;
    let f = net.nodes[i]
        .ifaces
        .first()
        .ok_or_else(|| format!("balancer {name} has no link"))?;
    let link = &sc.links[f.link];
    let macs = stsdr_forwarders(sc)
        .into_iter()
        .map(|fe| {
            net.nodes[fe]
                .ifaces
                .first()
                .map(|x| x.mac)
                .ok_or_else(|| format!("forwarder {} has no link", sc.nodes[fe].name))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut cfg = BalancerConfig::new(name.clone(), f.mac, vec![f.ip], macs);
    cfg.rate_bps = link.capacity_bps;
    cfg.framing = link.framing;
    cfg.liveness = Liveness::Heard {
        timeout: p.balancer_timeout,
    };
    cfg.vid = Some(p.vlan);
    Balancer::new(cfg)
}

/// The RETHER station of node `i` with its host's applications: the
/// members of its segment's token (§2.2.2's N) are the stations and
/// bridges on that segment, the protocol parameters are `[rether]`'s, and
/// each `rt` flow is a session whose number its sender and receiver agree
/// on (the k-th sub-connection a station sends on a segment is its
/// session k there, in flow order; a flow crossing bridges is one
/// sub-connection per segment, §2.5).
pub fn build_rether(sc: &Scenario, net: &Network, i: usize, epoch: Instant) -> Result<RetherHost, String> {
    let node = &sc.nodes[i];
    if !node.is_rether() {
        return Err(format!("node {} is not a RETHER station", node.name));
    }
    let topo = RetherTopo::new(&sc.nodes, &sc.links);
    let faults = sc
        .rether
        .as_ref()
        .map(|p| {
            p.faults
                .iter()
                .filter(|(n, _)| *n == i)
                .map(|(_, f)| shift_fault(f, epoch))
                .collect()
        })
        .unwrap_or_default();
    let port = rether_port(sc, net, &topo, i, 0, epoch, faults)?;
    Ok(port.0)
}

/// A RETHER bridge (§2.5): one station per segment it joins, relaying the
/// sub-connections of the `rt` flows that cross it.
pub fn build_rether_bridge(
    sc: &Scenario,
    net: &Network,
    i: usize,
    epoch: Instant,
) -> Result<qosnet_core::rether::bridge::RetherBridge, String> {
    use qosnet_core::rether::bridge::{Admission, BridgePort, RetherBridge};
    let topo = RetherTopo::new(&sc.nodes, &sc.links);
    let mut ports = Vec::new();
    let mut relay = BTreeMap::new();
    let mut admit = Vec::new();
    for (k, f) in net.nodes[i].ifaces.iter().enumerate() {
        let (host, sends) = rether_port(sc, net, &topo, i, k, epoch, Vec::new())?;
        for (fl, session) in sends {
            relay.insert(sc.flows[fl].id, k as u16);
            admit.push(Admission {
                at: epoch + sc.flows[fl].start,
                port: k as u16,
                session,
            });
        }
        let reach = macs_behind(sc, net, &topo, i, |g| g.peer == f.peer);
        ports.push(BridgePort { host, reach });
    }
    RetherBridge::new(sc.nodes[i].name.clone(), ports, relay, admit)
}

/// The MACs (each station's port and its host's) of every RETHER station
/// reached from bridge `i` through its ports that `port` selects: what a
/// bridge port forwards to (§2.5). One answer for both users, the
/// bridge's forwarding table and each of its stations' `host_macs`.
fn macs_behind(
    sc: &Scenario,
    net: &Network,
    topo: &RetherTopo,
    i: usize,
    port: impl Fn(&crate::topo::Iface) -> bool,
) -> Vec<qosnet_core::wire::MacAddr> {
    net.nodes[i]
        .ifaces
        .iter()
        .filter(|g| port(g))
        .flat_map(|g| topo.side(&sc.nodes, i, g.peer))
        .filter(|&m| sc.nodes[m].is_rether())
        .filter_map(|m| net.nodes[m].ifaces.first().map(|g| g.mac))
        .flat_map(|mac| [mac, host_mac(mac)])
        .collect()
}

/// The station of node `i` on its port `port` (a station's only one, or
/// one of a bridge's), with the sessions it sends and receives there.
/// Also returns (flow index, session) of the sub-connections it sends.
#[allow(clippy::type_complexity)]
fn rether_port(
    sc: &Scenario,
    net: &Network,
    topo: &RetherTopo,
    i: usize,
    port: usize,
    epoch: Instant,
    faults: Vec<qosnet_core::rether::app::Fault>,
) -> Result<(RetherHost, Vec<(usize, qosnet_core::rether::SessionId)>), String> {
    use qosnet_core::rether::{Boot, RetherStation, SessionId, StationConfig};
    let node = &sc.nodes[i];
    let my_id = node
        .rether_id()
        .ok_or_else(|| format!("node {} is not a RETHER station", node.name))?;
    let p = sc.rether.as_ref().ok_or("[rether] parameters missing")?;
    let f = net.nodes[i]
        .ifaces
        .get(port)
        .ok_or_else(|| format!("RETHER station {} has no port {port}", node.name))?;
    let seg_node = f.peer;
    let NodeKind::Segment(seg) = &sc.nodes[seg_node].kind else {
        return Err(format!("RETHER station {} is not on a segment", node.name));
    };
    let bridge = node.is_rether_bridge();
    let name = if bridge {
        format!("{}.{}", node.name, sc.nodes[seg_node].name)
    } else {
        node.name.clone()
    };
    // A member's id and its MAC on this segment.
    let on_seg = |n: usize| -> Option<(u16, qosnet_core::wire::MacAddr)> {
        let id = sc.nodes[n].rether_id()?;
        let g = net.nodes[n].ifaces.iter().find(|g| g.peer == seg_node)?;
        Some((id, g.mac))
    };
    let members_n = topo.members(seg_node);
    let members: Vec<u16> = members_n.iter().filter_map(|&n| on_seg(n).map(|x| x.0)).collect();
    let peer_macs = members_n
        .iter()
        .filter(|&&n| n != i)
        .filter_map(|&n| on_seg(n))
        .collect();
    let mut cfg = StationConfig::new(name, my_id, f.mac, members.clone());
    cfg.peer_macs = peer_macs;
    let host = host_mac(f.mac);
    cfg.host_macs = if bridge {
        // Frames for every station behind the bridge's other ports.
        macs_behind(sc, net, topo, i, |g| g.peer != seg_node)
    } else {
        vec![host]
    };
    cfg.timing = p.timing(seg.capacity_bps, seg.framing, members.len());
    cfg.trt = p.trt;
    cfg.t_nrt = p.station_t_nrt(&cfg.timing, members.len());
    cfg.nrt_policy = p.nrt_policy;
    cfg.ack_stagger = p.ack_stagger;
    cfg.ack_margin = p.ack_margin;
    cfg.boot = if p.boot_csma { Boot::Csma } else { Boot::Join };
    // Visits are drained after every call, so a short trace suffices.
    cfg.trace_visits = 1024;
    let st = RetherStation::new(cfg).map_err(|e| e.to_string())?;
    let mut send = Vec::new();
    let mut recv = Vec::new();
    let mut sends = Vec::new();
    // Session numbers per (sender, segment), in flow order.
    let mut per_sender: HashMap<(usize, usize), u16> = HashMap::new();
    for (fi, fl) in sc.flows.iter().enumerate().filter(|(_, fl)| fl.rt) {
        let hops = topo.hops(&sc.nodes, fl.from, fl.to).ok_or_else(|| {
            format!(
                "rt flow {}: no chain of RETHER bridges joins {}'s segment to {}'s",
                fl.name, sc.nodes[fl.from].name, sc.nodes[fl.to].name
            )
        })?;
        let pps = fl.pps();
        if pps.is_nan() || pps <= 0.0 {
            return Err(format!("rt flow {}: needs a positive rate", fl.name));
        }
        // A unit is the whole frame the host hands over (Ethernet header
        // and IP packet); the reservation covers the units one TRT brings.
        let unit = (14 + fl.size.mean().round() as u64).max(60);
        let per_trt = (pps * p.trt.as_secs_f64() - 1e-6).ceil().max(1.0) as u64;
        let bytes_per_trt = u32::try_from(unit * per_trt)
            .map_err(|_| format!("rt flow {}: reservation too large", fl.name))?;
        for (k, h) in hops.into_iter().enumerate() {
            let num = per_sender.entry((h.sender, h.segment)).or_insert(0);
            let session = SessionId {
                sender: sc.nodes[h.sender]
                    .rether_id()
                    .ok_or_else(|| format!("rt flow {}: sender is not a station", fl.name))?,
                num: *num,
            };
            *num += 1;
            if h.segment != seg_node || (h.sender != i && h.receiver != i) {
                continue;
            }
            let rf = RtFlow {
                flow: fl.id,
                name: fl.name.clone(),
                session,
                receiver: sc.nodes[h.receiver]
                    .rether_id()
                    .ok_or_else(|| format!("rt flow {}: receiver is not a station", fl.name))?,
                bytes_per_trt,
                period_ns: 1e9 / pps,
                // A bridge closes its onward sub-connection only once what
                // the sender sent before it stopped has come through: each
                // segment before it takes at most one TRT.
                stop: fl
                    .stop
                    .map(|s| epoch + s + Duration(p.trt.as_nanos() * (k as u64 + u64::from(k > 0)))),
            };
            if h.sender == i {
                sends.push((fi, session));
                send.push(rf);
            } else {
                recv.push(rf);
            }
        }
    }
    let app = AppConfig {
        send,
        recv,
        rether: p.enabled,
        late_threshold: p.late_threshold,
        buffers: p.buffers,
        mtu: 1500,
        window_start: epoch + sc.warmup,
        window_end: epoch + sc.duration,
        faults,
        host: Some(qosnet_core::node::HostLink {
            mac: if bridge { f.mac } else { host },
            mtu: HOST_MTU,
        }),
    };
    let h = RetherHost::new(st, app).map_err(|e| format!("RETHER station {}: {e}", node.name))?;
    Ok((h, sends))
}

/// The IP MTU a RETHER station offers its host: a jumbo frame, so RT
/// units (video frames up to 9000 bytes) reach the station whole; the
/// station fragments larger ordinary packets to the segment's 1500.
pub const HOST_MTU: usize = 9000;

/// The MAC of the host behind a RETHER station whose port has `station`:
/// the same address with bit 2 of the first byte flipped, kept unicast
/// and locally administered. Distinct from the station's own, so that
/// live, where the station's port is a kernel interface too, the kernel
/// never takes the host's frames off that interface (they arrive there
/// for another host and are dropped; the station hands them over).
pub fn host_mac(station: qosnet_core::wire::MacAddr) -> qosnet_core::wire::MacAddr {
    let mut m = station.0;
    m[0] = ((m[0] ^ 0x04) | 0x02) & 0xfe;
    qosnet_core::wire::MacAddr(m)
}

fn shift_fault(f: &qosnet_core::rether::app::Fault, epoch: Instant) -> qosnet_core::rether::app::Fault {
    use qosnet_core::rether::app::{Fault, FaultKind};
    let kind = match &f.kind {
        FaultKind::Crash { holding, restart } => FaultKind::Crash {
            holding: *holding,
            restart: restart.map(|r| Instant(r.as_nanos() + epoch.as_nanos())),
        },
        k => k.clone(),
    };
    Fault {
        at: Instant(f.at.as_nanos() + epoch.as_nanos()),
        kind,
    }
}

/// How a port reaches its link: half duplex on a shared segment.
fn duplex_to(sc: &Scenario, peer: usize) -> Duplex {
    match sc.nodes[peer].kind {
        NodeKind::Segment(_) => Duplex::Half,
        _ => Duplex::Full,
    }
}

/// The switch of node `i`: a port per link, access ports in their link's
/// VLAN, trunks (every VLAN of the scenario, VLAN 1 untagged) to other
/// switches.
pub fn build_switch(sc: &Scenario, net: &Network, i: usize, spec: &SwitchSpec) -> Result<Switch, String> {
    let name = &sc.nodes[i].name;
    let vlans: std::collections::BTreeSet<u16> = sc.links.iter().map(|l| l.vlan).collect();
    let mut cfg = SwitchConfig::new(name.clone());
    cfg.forwarding_latency = spec.latency;
    cfg.fdb_capacity = spec.fdb_size;
    cfg.aging_time = spec.aging;
    cfg.mtu = spec.mtu;
    for f in &net.nodes[i].ifaces {
        let link = &sc.links[f.link];
        let vlan = match sc.nodes[f.peer].kind {
            NodeKind::Switch(_) => VlanMode::Trunk {
                native: Some(1),
                allowed: vlans
                    .iter()
                    .copied()
                    .chain(sc.stsdr.as_ref().map(|p| p.vlan))
                    .collect(),
            },
            // An STSDR node's port: its data untagged in the link's VLAN,
            // DS frames tagged in the internal VLAN (§IV-A).
            NodeKind::StsdrBalancer(_) | NodeKind::StsdrForwarder(_) => VlanMode::Trunk {
                native: Some(link.vlan),
                allowed: sc.stsdr.as_ref().map(|p| vec![p.vlan]).unwrap_or_default(),
            },
            _ => VlanMode::Access(link.vlan),
        };
        let mut p = SwitchPortConfig::new(
            format!("{}-{}", name, sc.nodes[f.peer].name),
            link.capacity_bps,
            vlan,
        );
        p.framing = link.framing;
        p.duplex = duplex_to(sc, f.peer);
        p.queue_packets = spec.queue_packets;
        p.queue_bytes = spec.queue_bytes;
        cfg.ports.push(p);
    }
    Switch::new(cfg)
}

/// The scenario's CTR and TDP reservation plan, if any router uses TDP.
pub fn tdp_setup(sc: &Scenario, net: &Network) -> Result<(Option<Ctr>, Option<TdpPlan>), String> {
    let ctr = match &sc.tdp {
        Some(t) => Some(Ctr::new(t.tf, t.tfs_per_tc, t.tcs_per_sc)?),
        None => None,
    };
    let plan = match &ctr {
        Some(_) if (0..sc.nodes.len()).any(|i| is_tdp(sc, i)) => Some(tdpplan::plan(sc, net)?),
        _ => None,
    };
    Ok((ctr, plan))
}

/// Whether node `i` is a TDP router.
pub fn is_tdp(sc: &Scenario, i: usize) -> bool {
    matches!(sc.nodes[i].router(), Some(r) if r.scheduler == SchedKind::Tdp)
}

/// A TDP port's settings beyond the router spec.
pub struct TdpPort<'a> {
    pub ctr: &'a Ctr,
    /// Largest forwarding delay through this port (wheel size - 1).
    pub d_max: u32,
    /// The peer is a TDP router: stamp, pad, and shed packets past
    /// `late_limit`.
    pub tdp_peer: bool,
    pub padding: Option<PaddingSpec>,
    pub late_limit: Option<u32>,
    /// The peer decoders' clock window (`[tdp] max_lag`): how far back the
    /// wheel bridges TFs that went by without a stamp.
    pub peer_window: u32,
}

/// Build the port scheduler a router spec asks for.
pub fn make_scheduler(
    spec: &RouterSpec,
    tdp: Option<TdpPort>,
    rate_bps: u64,
    framing: Framing,
) -> Result<Box<dyn Scheduler>, String> {
    let fifo = || Box::new(Fifo::new(spec.queue_packets, spec.queue_bytes)) as Box<dyn Scheduler>;
    Ok(match (spec.scheduler, tdp) {
        (SchedKind::Tdp, Some(t)) => {
            // Towards a host the TDP domain ends: a late packet has no
            // next node's slot to miss, so it is sent however late.
            let (stamping, late_limit) = if t.tdp_peer {
                (StampMode::Tdp, t.late_limit)
            } else {
                (StampMode::Rewrite(0), None)
            };
            Box::new(
                TdpWheel::new(*t.ctr, t.d_max, rate_bps, framing, fifo(), stamping, t.padding)?
                    .with_late_limit(late_limit)
                    .with_peer_window(t.peer_window),
            )
        }
        _ => fifo(),
    })
}

/// The router of node `i` (which must be a router), its ports in the
/// order of `net.nodes[i].ifaces`.
pub fn build_router(
    sc: &Scenario,
    net: &Network,
    ctr: Option<&Ctr>,
    plan: Option<&TdpPlan>,
    i: usize,
    opts: &BuildOpts,
) -> Result<Router, String> {
    let node = &sc.nodes[i];
    let spec = node
        .router()
        .ok_or_else(|| format!("node {} is not a router", node.name))?;
    let nn = &net.nodes[i];
    let mut r = Router::new(node.name.clone());
    let tdp_here = is_tdp(sc, i) && ctr.is_some();
    let d_max = plan.map(|p| p.d_max[i]).unwrap_or(spec.tdp_delay);
    // Where routers begin TFs late by varying amounts, a peer may send in
    // a TF this router has not begun yet: one more queue holds that TF's
    // packets instead of refusing them as too early.
    let lagged = sc.nodes.iter().any(|n| {
        n.router()
            .is_some_and(|r| r.tf_irq_latency.is_some() || r.tf_port_service > Duration::ZERO)
    });
    let d_max = d_max + lagged as u32;
    // The router's own view of the CTR, late by its interrupt service,
    // and each interface's, later by its place in the sequential service.
    let lag = |k: u64| {
        spec.tf_irq_latency.map(|dist| TfLag {
            seed: sc.seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            dist,
            extra: Duration(spec.tf_port_service.0.saturating_mul(k)),
        })
    };
    let router_ctr = ctr.map(|c| c.with_lag(lag(0)));
    let port_ctrs: Vec<Option<Ctr>> = (0..nn.ifaces.len() as u64)
        .map(|k| ctr.map(|c| c.with_lag(lag(k))))
        .collect();
    for (k, f) in nn.ifaces.iter().enumerate() {
        let link = &sc.links[f.link];
        let tdp_peer = tdp_here && is_tdp(sc, f.peer);
        let padding = (tdp_peer && sc.tdp.as_ref().is_some_and(|t| t.padding)).then_some(PaddingSpec {
            src_mac: f.mac,
            dst_mac: f.peer_mac,
            src_ip: f.ip,
            dst_ip: f.peer_ip,
        });
        let tdp_arg = if tdp_here {
            port_ctrs[k].as_ref().map(|c| TdpPort {
                ctr: c,
                d_max,
                tdp_peer,
                padding,
                late_limit: sc.tdp.as_ref().and_then(|t| t.late_limit),
                peer_window: sc.tdp.as_ref().map_or(4, |t| t.max_lag),
            })
        } else {
            None
        };
        let point_to_point = f.domain.is_none_or(|d| net.domains[d].is_point_to_point());
        let sched = match crate::dsbuild::scheduler(sc, spec, link.capacity_bps, link.framing)? {
            Some(s) => s,
            None => make_scheduler(spec, tdp_arg, link.capacity_bps, link.framing)
                .map_err(|e| format!("router {}: {e}", node.name))?,
        };
        r.add_port(
            PortConfig {
                name: format!("{}-{}", node.name, sc.nodes[f.peer].name),
                mac: f.mac,
                ip: f.ip,
                prefix_len: f.prefix_len,
                rate_bps: link.capacity_bps,
                framing: link.framing,
                // On a point-to-point link the peer is the only neighbour;
                // on a shared domain the neighbours are added below.
                peer_mac: (opts.static_peer_macs && point_to_point).then_some(f.peer_mac),
                tdp_peer,
                duplex: duplex_to(sc, f.peer),
            },
            sched,
        );
    }
    // On a shared domain (switches, a segment) the router announces
    // itself when it starts, and in the simulator, where nothing else
    // answers ARP, it knows its neighbours' MACs from the start.
    for (p, f) in nn.ifaces.iter().enumerate() {
        let Some(d) = f.domain.map(|d| &net.domains[d]) else {
            continue;
        };
        if d.is_point_to_point() {
            continue;
        }
        r.announce_on_start(p as u16);
        if !opts.static_peer_macs {
            continue;
        }
        if let Some(port) = r.port_mut(p as u16) {
            for m in d.members.iter().filter(|m| m.node != i) {
                port.add_neighbor(m.ip, m.mac);
            }
        }
    }
    for rt in nn.routes.iter() {
        // Generated flow routes name only the output port. On a
        // point-to-point link a destination off the port's subnet is
        // reached through the link's peer: make it the gateway, so ARP
        // resolves the peer router rather than the far destination.
        let mut rt = *rt;
        if let (None, Some(f)) = (rt.gateway, nn.ifaces.get(rt.port as usize)) {
            let m = qosnet_core::route::mask(f.prefix_len);
            if u32::from(rt.dst.addr) & m != u32::from(f.ip) & m {
                rt = rt.via(f.peer_ip);
            }
        }
        r.routes.add(rt)?;
    }
    if let Some(c) = crate::dsbuild::classifier(sc, net, i)? {
        r.set_classifier(Box::new(c));
    }
    if let (true, Some(ctr), Some(plan)) = (tdp_here, router_ctr.as_ref(), plan) {
        let t = sc.tdp.as_ref().ok_or("tdp section missing")?;
        let mut shaper = EdgeShaper::new(*ctr, t.shaper_queue);
        shaper.set_max_hold(t.shaper_max_hold);
        let mut d_flow = HashMap::new();
        for (fi, f) in sc.flows.iter().enumerate() {
            let Some(slots) = &plan.slots[fi] else {
                continue;
            };
            let src = opts
                .flow_src
                .get(fi)
                .copied()
                .flatten()
                .unwrap_or_else(|| net.host_ip(f.from));
            let key = FlowKey {
                src,
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
    Ok(r)
}
