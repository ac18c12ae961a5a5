//! Scenario files run live: the lab a scenario maps to, qosnet routers on
//! it, the scenario's flows as real UDP traffic, and results in the same
//! schema as the simulator's.
//!
//! **The mapping.** Every scenario node becomes a namespace
//! `{prefix}-{node}` ([`crate::lab`]); every scenario link a veth pair with
//! the MACs the scenario's [`Network`] gives its ports (both number them
//! 1, 2 for link 0, 3, 4 for link 1, ...). Hosts get their scenario
//! address in the kernel and a default route via their router; router
//! ports get no kernel address — qosnet answers ARP and ping for them —
//! and the kernel in router namespaces does not forward. All routers run
//! in one [`Driver`] thread of this process, each port an AF_PACKET socket
//! opened inside its router's namespace.
//!
//! **Hosts whose flows come back to them** (the TDP testbed's flows loop
//! round a ring and leave where they entered): a kernel sends a datagram
//! addressed to one of its own addresses through loopback, never onto the
//! wire. Such a host is split in two namespaces on one Ethernet segment: a
//! Linux bridge `br0` in the host's namespace joins the router's veth and a
//! veth to a *sender* namespace `{prefix}-{host}_tx`. The host namespace
//! keeps the scenario address (on `br0`) and runs the sinks; the sender
//! namespace gets the next free address of the link's subnet (`.3` of the
//! default /24, configured as a /32 with an on-link default route via the
//! router, so even traffic to its own host goes through the router) and
//! runs the generators of every flow from that host. The
//! routers' edge shapers key those flows on the sender's address
//! ([`BuildOpts::flow_src`]); routes depend on the destination only, so
//! nothing else changes. The router sees both namespaces behind one port,
//! as it would see two hosts on a switch.
//!
//! **Labs split across machines** ([`LiveOptions::placement`], a placement
//! file of [`crate::placement`]): each machine builds only its nodes'
//! namespaces (a split host's sender goes with its host), links that cross
//! machines become VXLAN tunnels ([`crate::lab`]), and it runs only its own
//! qosnet nodes, the generators of flows whose source is here and the
//! sinks of flows whose sink is here. Its results list every flow, but
//! fill in only what was measured here — `extra.placement.flows` says,
//! per flow, `source`, `sink` or `both` — so each machine's results.json is
//! honest on its own, and [`crate::placement::merge`] (`qosnet lab merge`)
//! joins them: sent from the source's machine, the rest from the sink's.
//! All machines must start traffic at the same instant
//! ([`LiveOptions::start_at`]); one-way delays across machines are only as
//! good as the machines' clock synchronisation (PTP or NTP).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use qosnet_core::route::Ipv4Prefix;
use qosnet_core::time::{Duration, Instant};
use qosnet_scenario::build::{tdp_setup, BuildOpts, Setup};
use qosnet_scenario::results::{EngineResult, FlowResult, LinkResult, NodeResult, Results};
use qosnet_scenario::topo::Network;
use qosnet_scenario::Scenario;
use serde::Serialize;

use crate::lab::{ip, Lab, LabError, LabLink, LabNode, LabSpec, NodeKind};
use crate::placement::{Placement, MEASURED_BOTH, MEASURED_SINK, MEASURED_SOURCE};
use crate::traffic::{self, GenConfig, GenReport, Sink, SinkCounters};
use qosnet_io::afpacket::{AfPacket, AfPacketConfig};
use qosnet_io::clock::{self, LatenessSummary};
use qosnet_io::netdev::{NetDevice, PortDevices};
use qosnet_io::netns;
use qosnet_live::driver::{Driver, DriverConfig, DriverReport, NodeHost};
use qosnet_live::node::{self, NodeReport, OpenOptions, PortPlace, PortSnap};

/// Suffix of the sender namespace of a host whose flows loop back to it
/// (the lab's, which removes these namespaces with the lab's own).
pub use crate::lab::SENDER_SUFFIX;

/// A host split into a receiving and a sending namespace.
#[derive(Clone, Debug, Serialize)]
pub struct Split {
    /// Scenario host (its namespace keeps the address and runs the sinks).
    pub host: String,
    /// Lab node of the sender namespace.
    pub sender: String,
    pub host_addr: String,
    pub sender_addr: String,
    pub gateway: Ipv4Addr,
}

/// How a scenario maps onto a lab.
#[derive(Clone, Debug)]
pub struct LiveLayout {
    pub spec: LabSpec,
    pub splits: Vec<Split>,
    /// Per flow: the lab node its generator runs in and its source address.
    pub flow_src: Vec<(String, Ipv4Addr)>,
}

impl LiveLayout {
    /// Builder options for the nodes of this layout, scenario time 0
    /// being `epoch` (CLOCK_REALTIME).
    pub fn build_opts(&self, epoch: Instant) -> BuildOpts {
        BuildOpts {
            static_peer_macs: false,
            flow_src: self.flow_src.iter().map(|(_, a)| Some(*a)).collect(),
            epoch,
        }
    }
}

/// Map a scenario and its network onto a lab description, for the hosts'
/// kernel generators.
pub fn layout(sc: &Scenario, net: &Network, prefix: &str) -> Result<LiveLayout, String> {
    layout_for(sc, net, prefix, TrafficSource::Kernel)
}

/// The hosts a tester drives: every flow's source and destination. Each
/// must sit on a point-to-point link to a qosnet node, whose port is then
/// the host's first hop (the tester writes frames with that MAC).
pub fn tester_hosts(sc: &Scenario, net: &Network) -> Result<Vec<usize>, String> {
    let mut v: Vec<usize> = sc.flows.iter().flat_map(|f| [f.from, f.to]).collect();
    v.sort();
    v.dedup();
    for &h in &v {
        let n = &net.nodes[h];
        let ok = n.ifaces.len() == 1
            && hosted_here(sc, n.ifaces[0].peer)
            && n.ifaces[0]
                .domain
                .is_none_or(|d| net.domains[d].is_point_to_point());
        if !ok {
            return Err(format!(
                "host {}: the traffic tester drives hosts with one link to a router; use --traffic kernel",
                sc.nodes[h].name
            ));
        }
    }
    Ok(v)
}

/// [`layout`] for a traffic source. With the tester, hosts are not split
/// (the tester writes frames from a host to itself onto the wire itself)
/// and the hosts it drives get no kernel address, so their kernels
/// neither answer ARP (the tester does) nor send ICMP errors for the
/// flows' datagrams.
pub fn layout_for(
    sc: &Scenario,
    net: &Network,
    prefix: &str,
    traffic: TrafficSource,
) -> Result<LiveLayout, String> {
    let tested = match traffic {
        TrafficSource::Tester => tester_hosts(sc, net)?,
        TrafficSource::Kernel => Vec::new(),
    };
    if let Some(f) = sc.flows.iter().find(|f| f.echo) {
        return Err(format!(
            "flow {}: echo flows (round trips) are not supported live yet; use irtt in a `qosnet lab up` lab",
            f.name
        ));
    }
    let mut spec = LabSpec::new(prefix);
    let looping: Vec<usize> = {
        let mut v: Vec<usize> = sc
            .flows
            .iter()
            .filter(|f| f.from == f.to && traffic == TrafficSource::Kernel)
            .map(|f| f.from)
            .collect();
        v.sort();
        v.dedup();
        v
    };
    for (i, n) in sc.nodes.iter().enumerate() {
        // qosnet nodes (routers, switches) own their ports without kernel
        // addresses; segments are Linux bridges; hosts are kernel stacks.
        let kind = if hosted_here(sc, i) {
            NodeKind::Router
        } else if n.is_l2() {
            NodeKind::Bridge
        } else {
            NodeKind::Host
        };
        spec.nodes.push(LabNode {
            name: n.name.clone(),
            kind,
        });
    }
    for (li, l) in sc.links.iter().enumerate() {
        let addr = |node: usize, a: Ipv4Addr| {
            // A split host's address lives on its bridge, not the veth.
            (!looping.contains(&node) && !tested.contains(&node)).then_some(Ipv4Prefix {
                addr: a,
                len: l.prefix_len,
            })
        };
        let mut link = LabLink::new(
            &sc.nodes[l.a].name,
            addr(l.a, l.a_ip),
            &sc.nodes[l.b].name,
            addr(l.b, l.b_ip),
        );
        link.mtu = 1500;
        spec.links.push(link);
        debug_assert_eq!(li + 1, spec.links.len());
    }
    host_routes(sc, net, &mut spec);
    let (splits, sender_of) = split_hosts(sc, net, &looping, &mut spec)?;
    let flow_src = sc
        .flows
        .iter()
        .map(|f| match sender_of.get(&f.from) {
            Some((s, a)) => (s.clone(), *a),
            None => (sc.nodes[f.from].name.clone(), net.host_ip(f.from)),
        })
        .collect();
    spec.validate().map_err(|e| e.to_string())?;
    Ok(LiveLayout {
        spec,
        splits,
        flow_src,
    })
}

/// Hosts behind a switch or on a segment reach the world through their
/// broadcast domain's first router (a host linked to a router directly
/// gets that router as its default gateway from the lab itself).
fn host_routes(sc: &Scenario, net: &Network, spec: &mut LabSpec) {
    // gets that router as its default gateway from the lab itself).
    for (i, n) in sc.nodes.iter().enumerate() {
        let Some(f) = net.nodes[i].ifaces.first() else {
            continue;
        };
        // (A qosnet node carrying its host's stack — a RETHER station —
        // puts the host's address on its own TAP; no kernel route here.)
        if !n.is_host() || hosted_here(sc, i) || !sc.nodes[f.peer].is_l2() {
            continue;
        }
        if let Some(gw) = net.gateway(sc, i) {
            spec.routes.push(crate::lab::LabRoute {
                node: n.name.clone(),
                dst: Ipv4Prefix {
                    addr: Ipv4Addr::UNSPECIFIED,
                    len: 0,
                },
                via: gw.ip,
            });
            // An STSDR's T-switch carries the router's outgoing links (§I
            // of Khan, Sahoo & Manjunath): the next hops share the
            // senders' subnet but sit behind the router. The simulated
            // hosts send everything through their balancer
            // (`Network::first_hop_mac`); a kernel would take the
            // connected route and bypass the router, so the other hosts
            // of the domain get /32 routes via the balancer. The
            // balancers and forwarders stay on-link (ARP for the gateway).
            if let Some(d) = f.domain.filter(|_| sc.nodes[gw.node].is_balancer()) {
                for m in &net.domains[d].members {
                    if m.node != i && sc.nodes[m.node].is_host() {
                        spec.routes.push(crate::lab::LabRoute {
                            node: n.name.clone(),
                            dst: Ipv4Prefix { addr: m.ip, len: 32 },
                            via: gw.ip,
                        });
                    }
                }
            }
        }
    }
}

/// The sender namespaces of hosts whose flows loop back to them (a
/// second address of the host's subnet, joined to the host by a link of
/// their own; [`post_up`] bridges them): the splits, and per such host its
/// sender's (namespace, address).
#[allow(clippy::type_complexity)]
fn split_hosts(
    sc: &Scenario,
    net: &Network,
    looping: &[usize],
    spec: &mut LabSpec,
) -> Result<(Vec<Split>, BTreeMap<usize, (String, Ipv4Addr)>), String> {
    let mut splits = Vec::new();
    let mut sender_of = BTreeMap::new();
    for &h in looping {
        let host = &sc.nodes[h].name;
        let sender = format!("{host}{SENDER_SUFFIX}");
        if sc.node_index(&sender).is_some() {
            return Err(format!(
                "host {host} needs a sender namespace {sender}, but a node has that name"
            ));
        }
        let f = &net.nodes[h].ifaces[0];
        if f.prefix_len > 29 {
            return Err(format!(
                "host {host} sends flows to itself: live mode gives it a sender namespace with a \
                 second address of its link's subnet, which needs a /29 or larger (it is /{})",
                f.prefix_len
            ));
        }
        let base = u32::from(f.ip) & qosnet_core::route::mask(f.prefix_len);
        let sender_ip = (1..)
            .map(|k| Ipv4Addr::from(base + k))
            .find(|a| *a != f.ip && *a != f.peer_ip)
            .unwrap_or(f.ip);
        spec.nodes.push(LabNode {
            name: sender.clone(),
            kind: NodeKind::Host,
        });
        spec.links.push(LabLink::new(host, None, &sender, None));
        sender_of.insert(h, (sender.clone(), sender_ip));
        splits.push(Split {
            host: host.clone(),
            sender,
            host_addr: format!("{}/{}", f.ip, f.prefix_len),
            sender_addr: format!("{}/{}", sender_ip, f.prefix_len),
            gateway: f.peer_ip,
        });
    }
    Ok((splits, sender_of))
}

/// Set up what [`Lab::up`] does not: the bridges and addresses of split
/// hosts.
pub fn post_up(lab: &Lab, layout: &LiveLayout) -> Result<(), LabError> {
    for s in layout.splits.iter().filter(|s| lab.spec().is_local(&s.host)) {
        let ns = lab.spec().netns_name(&s.host);
        let sns = lab.spec().netns_name(&s.sender);
        let ports: Vec<String> = lab.ports(&s.host).iter().map(|p| p.ifname.clone()).collect();
        ip(&["-n", &ns, "link", "add", "br0", "type", "bridge"])?;
        for p in &ports {
            ip(&["-n", &ns, "link", "set", p, "master", "br0"])?;
        }
        ip(&["-n", &ns, "addr", "add", &s.host_addr, "dev", "br0"])?;
        ip(&["-n", &ns, "link", "set", "br0", "up"])?;
        netns::run_in(&ns, || qosnet_io::iface::disable_offloads("br0"))
            .and_then(|r| r)
            .map_err(|e| LabError::Io {
                context: format!("offloads of br0 in {ns}"),
                source: e,
            })?;
        let gw = s.gateway.to_string();
        ip(&["-n", &ns, "route", "add", "default", "via", &gw, "dev", "br0"])?;
        let sp = lab
            .port(&s.sender, &s.host)
            .map(|p| p.ifname.clone())
            .ok_or_else(|| LabError::Invalid(format!("no link between {} and {}", s.sender, s.host)))?;
        // A /32 and an on-link default route: with the subnet's connected
        // route the sender would reach its own host straight across the
        // bridge instead of through the router.
        let a32 = format!("{}/32", s.sender_addr.split('/').next().unwrap_or(""));
        ip(&["-n", &sns, "addr", "add", &a32, "dev", &sp])?;
        ip(&[
            "-n", &sns, "route", "add", "default", "via", &gw, "dev", &sp, "onlink",
        ])?;
    }
    Ok(())
}

/// The scenario's qosnet nodes (routers, switches, ...: every node the
/// builder registry builds) on AF_PACKET ports of a lab (or of anything
/// laid out like one): node `i`'s port `k` is the lab port of scenario
/// link `net.nodes[i].ifaces[k].link` at node `i`. Returns the hosted
/// nodes and, for each, its scenario node index.
pub fn open_nodes(
    sc: &Scenario,
    net: &Network,
    lab: &Lab,
    opts: &BuildOpts,
    live: &LiveOptions,
) -> Result<(Vec<NodeHost<NetDevice>>, Vec<usize>), String> {
    let setup = Setup::new(sc, net)?;
    let mut hosts = Vec::new();
    let mut index = Vec::new();
    for (i, n) in sc.nodes.iter().enumerate() {
        if !hosted_here(sc, i) || !lab.spec().is_local(&n.name) {
            continue;
        }
        let mut places = Vec::new();
        for f in &net.nodes[i].ifaces {
            let p = lab
                .all_ports()
                .iter()
                .find(|p| p.link == f.link && p.node == n.name)
                .ok_or_else(|| format!("lab has no port of {} on link {}", n.name, f.link))?;
            if p.mac != f.mac {
                return Err(format!(
                    "lab port {} has MAC {}, scenario says {}",
                    p.ifname, p.mac, f.mac
                ));
            }
            places.push(PortPlace {
                ifname: p.ifname.clone(),
                netns: Some(p.netns.clone()),
            });
        }
        let o = OpenOptions {
            afpacket: live.afpacket,
            devices: live.devices.clone(),
            emulate_wire: live.emulate_wire,
            emulate_cpu: live.emulate_cpu,
            seed: sc.seed.wrapping_add(i as u64),
            ..OpenOptions::default()
        };
        hosts.push(node::open(sc, net, &setup, i, opts, &places, &o)?);
        index.push(i);
    }
    Ok((hosts, index))
}

/// Whether scenario node `i` runs as a qosnet node: every kind the
/// builder registry builds (routers, switches, RETHER stations — the same
/// code as in the simulator); hosts are kernel stacks in namespaces,
/// segments Linux bridges. A new node kind needs no change here. A built
/// node that is a host's interface (a RETHER station) also carries that
/// host's kernel stack, on a TAP in its namespace ([`qosnet_live::node`]).
fn hosted_here(sc: &Scenario, i: usize) -> bool {
    !sc.nodes[i].is_stack_host() && !sc.nodes[i].is_medium()
}

/// Settings of a live run.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    pub prefix: String,
    pub driver: DriverConfig,
    pub afpacket: AfPacketConfig,
    /// Which router ports are AF_XDP ([`qosnet_io::netdev`]; default none).
    pub devices: PortDevices,
    /// Measure the machine's timer noise before the run (0.3 s).
    pub timer_noise: bool,
    /// Progress messages on stderr.
    pub verbose: bool,
    /// Emulate each router's scenario `processing` time before input
    /// ([`qosnet_core::node::cpu::Cpu`]).
    pub emulate_cpu: bool,
    /// Deliver each frame when its last bit would leave a real link of the
    /// scenario's capacity, plus the link's delay (store and forward, as
    /// in the simulator); off, frames leave paced but at once.
    pub emulate_wire: bool,
    /// Run every qosnet node as its own process (`qosnet node`), so that
    /// killing one is a real node failure for the others; `None` runs
    /// them all on one thread of this process.
    pub processes: Option<NodeProcesses>,
    /// Publish the routers' metrics snapshots here (`lab run/up --metrics`).
    pub metrics: Option<Arc<qosnet_live::metrics::MetricsHub>>,
    /// Build and run only one machine's part of a lab split across
    /// machines.
    pub placement: Option<PlacedOn>,
    /// When traffic starts (`lab run`); `None`: a whole second about 3 s
    /// after the lab is built, or with a placement the next whole
    /// 10 seconds at least 5 s away (so machines started a few seconds
    /// apart agree; give every machine the same `--start-at` to be sure).
    pub start_at: Option<Instant>,
    /// Who sends the scenario's flows and measures them.
    pub traffic: TrafficSource,
    /// With the tester: pin the router thread and the tester to separate
    /// cores, run both SCHED_FIFO and lock the process's memory
    /// ([`qosnet_io::rt`]); each step that the machine refuses is reported.
    pub realtime: bool,
    /// The CLOCK_REALTIME instant scenario time 0 stands for (the start
    /// of traffic); `None`: when the lab starts.
    pub epoch: Option<Instant>,
    /// Node failures: `kill -9` of these nodes' processes this long after
    /// traffic starts (needs [`LiveOptions::processes`]), e.g. an STSDR
    /// forwarder or its master, to see the others re-hash and elect.
    pub kills: Vec<(String, Duration)>,
    /// Fault injection in RETHER station processes: (station, N) aborts
    /// the station while it holds the token after its Nth token visit
    /// (`qosnet node`'s `crash_holding_token_after`).
    pub crash_holding_token: Vec<(String, u64)>,
    /// Injected CPU stalls on the router thread's core while the traffic
    /// runs ([`qosnet_io::rt::StallSpec`]).
    pub stalls: Option<qosnet_io::rt::StallSpec>,
}

/// A placement and the machine this process plays.
#[derive(Clone, Debug)]
pub struct PlacedOn {
    pub placement: Placement,
    pub machine: String,
}

impl PlacedOn {
    /// Restrict `layout` to this machine's part: check the placement
    /// against the scenario, then tunnels for the crossing links.
    pub fn apply(&self, sc: &Scenario, layout: &mut LiveLayout) -> Result<(), String> {
        let names: Vec<&str> = sc.nodes.iter().map(|n| n.name.as_str()).collect();
        self.placement.check(&names)?;
        let senders: BTreeMap<String, String> = layout
            .splits
            .iter()
            .map(|s| (s.sender.clone(), s.host.clone()))
            .collect();
        let owner = |n: &str| senders.get(n).cloned().unwrap_or_else(|| n.to_string());
        let part = self
            .placement
            .part(&layout.spec, &self.machine, &sc.name, owner)?;
        layout.spec.part = Some(part);
        layout.spec.validate().map_err(|e| e.to_string())
    }
}

/// The driver's and the tester's spin margin under SCHED_FIFO.
pub const RT_SPIN: Duration = Duration::from_micros(20);

/// Who sends a live run's flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TrafficSource {
    /// UDP generators and sinks on the hosts' kernel stacks
    /// ([`crate::traffic`]), one thread per flow and per sink.
    #[default]
    Kernel,
    /// One tester thread owning the hosts' interfaces ([`crate::tester`]):
    /// exact send times on the CTR, kernel receive timestamps.
    Tester,
}

impl TrafficSource {
    /// The default for a scenario: the tester for TDP testbeds (scenarios
    /// with a `[tdp]` section, whose time frames a late source misses, as
    /// the paper's RouterTester drove them), the hosts' kernels otherwise.
    pub fn auto(sc: &Scenario) -> TrafficSource {
        if sc.tdp.is_some() {
            TrafficSource::Tester
        } else {
            TrafficSource::Kernel
        }
    }
}

impl std::str::FromStr for TrafficSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "kernel" => Ok(TrafficSource::Kernel),
            "tester" => Ok(TrafficSource::Tester),
            _ => Err(format!("traffic source `{s}`: use `tester` or `kernel`")),
        }
    }
}

/// How to start one process per node: the `qosnet` binary and the
/// scenario file with the `--set` overrides this run uses (each process
/// loads the scenario itself, as a node on its own machine would).
#[derive(Clone, Debug)]
pub struct NodeProcesses {
    pub exe: std::path::PathBuf,
    pub scenario: std::path::PathBuf,
    pub sets: Vec<String>,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            prefix: crate::lab::DEFAULT_PREFIX.into(),
            // The routers' thread outranks the lab's traffic threads.
            driver: DriverConfig {
                nice: Some(-15),
                ..DriverConfig::default()
            },
            // A lab's node namespaces have no IP stack of their own to
            // feed: their frames are the node's alone (QOSNET_STACK_DROP=0
            // lets the namespace's kernel see them again, for comparison).
            afpacket: AfPacketConfig {
                stack_drop: std::env::var_os("QOSNET_STACK_DROP").is_none_or(|v| v != "0"),
                ..AfPacketConfig::default()
            },
            devices: PortDevices::default(),
            timer_noise: true,
            verbose: false,
            emulate_cpu: false,
            emulate_wire: true,
            processes: None,
            metrics: None,
            placement: None,
            start_at: None,
            traffic: TrafficSource::Kernel,
            realtime: true,
            epoch: None,
            kills: Vec::new(),
            crash_holding_token: Vec::new(),
            stalls: None,
        }
    }
}

/// What a live run produced.
pub struct LiveRun {
    pub results: Results,
    /// Per flow, the delay histogram as (ns, count) pairs.
    pub buckets: Vec<(String, Vec<(u64, u64)>)>,
    pub driver: DriverReport,
}

/// Lab, routers and driver thread, up and running until dropped or
/// [`LiveLab::stop`]. Dropping removes the lab.
pub struct LiveLab {
    lab: Option<Lab>,
    pub layout: LiveLayout,
    pub net: Network,
    /// Scenario node index of each hosted node, in driver order.
    pub index: Vec<usize>,
    halt: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(Driver<NetDevice>, Vec<Snapshot>)>>,
    /// One process per node instead of the thread.
    procs: Option<Procs>,
}

/// The node processes of a lab and where they write their reports.
struct Procs {
    /// (scenario node index, node name, process).
    children: Vec<(usize, String, std::process::Child)>,
    /// The lab's private run directory (qosnet_io::rundir): node configs,
    /// reports, ready files, control sockets. Removed when dropped.
    dir: qosnet_io::rundir::RunDir,
}

/// Per flow id: the delay histogram buckets and the sink's report.
type SinkFlows = BTreeMap<u32, (Vec<(u64, u64)>, traffic::FlowReport)>;

/// Port counters of every hosted node at a mark, in driver order.
pub type Snapshot = Vec<Vec<PortSnap>>;

fn snapshot(d: &Driver<NetDevice>) -> Snapshot {
    d.hosts.iter().map(node::snapshot).collect()
}

impl LiveLab {
    /// Build the lab of `sc`, open its routers and start the driver thread;
    /// `marks` are instants at which router counters are snapshotted;
    /// the driver stops at `until`, on [`LiveLab::stop`] or when `stop` is set.
    pub fn start(
        sc: &Scenario,
        opts: &LiveOptions,
        stop: Arc<AtomicBool>,
        marks: Vec<Instant>,
        until: Option<Instant>,
    ) -> Result<LiveLab, String> {
        let epoch = opts.epoch.unwrap_or_else(clock::now);
        Self::start_timed(sc, opts, stop, move |_| (epoch, marks, until))
    }

    /// [`start`](Self::start) with the epoch (scenario time 0), the marks
    /// and the end chosen by `times` once the lab is up, just before the
    /// nodes start (`times` may open
    /// its own sockets on the lab first): a run whose
    /// traffic starts at a fixed time cannot then find the lab still being
    /// built (under load that takes seconds).
    pub fn start_timed(
        sc: &Scenario,
        opts: &LiveOptions,
        stop: Arc<AtomicBool>,
        times: impl FnOnce(&Lab) -> (Instant, Vec<Instant>, Option<Instant>),
    ) -> Result<LiveLab, String> {
        let net = Network::build(sc)?;
        let mut layout = layout_for(sc, &net, &opts.prefix, opts.traffic)?;
        if let Some(p) = &opts.placement {
            p.apply(sc, &mut layout)?;
        }
        let lab = Lab::up(&layout.spec).map_err(|e| e.to_string())?;
        post_up(&lab, &layout).map_err(|e| e.to_string())?;
        // `times` gives the instant scenario time 0 stands for (nodes with
        // timed behaviour — RETHER session closes and faults — are built
        // against it), the counter marks and the end.
        let (epoch, marks, until) = times(&lab);
        let build = layout.build_opts(epoch);
        if let Some(np) = &opts.processes {
            if opts.metrics.is_some() {
                return Err("--metrics serves the routers of this process; with --processes each node is its own process: give each `qosnet node` its own --metrics".into());
            }
            let (index, procs) = spawn_nodes(sc, &net, &lab, &build, opts, np, &marks, until)?;
            return Ok(LiveLab {
                lab: Some(lab),
                layout,
                net,
                index,
                halt: Arc::new(AtomicBool::new(false)),
                thread: None,
                procs: Some(procs),
            });
        }
        let (hosts, index) = open_nodes(sc, &net, &lab, &build, opts)?;
        let mut driver = Driver::new(hosts, opts.driver);
        driver.set_marks(marks);
        if let Some(hub) = &opts.metrics {
            driver.set_publish(hub.clone());
        }
        let halt = Arc::new(AtomicBool::new(false));
        let h2 = halt.clone();
        let thread = std::thread::Builder::new()
            .name("qosnet-routers".into())
            .spawn(move || {
                let mut snaps = Vec::new();
                let both = || stop.load(Ordering::Relaxed) || h2.load(Ordering::Relaxed);
                driver.run(both, until, |_, d| snaps.push(snapshot(d)));
                (driver, snaps)
            })
            .map_err(|e| format!("starting the router thread: {e}"))?;
        Ok(LiveLab {
            lab: Some(lab),
            layout,
            net,
            index,
            halt,
            thread: Some(thread),
            procs: None,
        })
    }

    /// Stop the routers; returns the driver (routers and devices) and the
    /// counter snapshots (`None` if already stopped, or when the nodes run
    /// as processes: see [`LiveLab::stop_reports`]).
    pub fn stop(&mut self) -> Option<(Driver<NetDevice>, Vec<Snapshot>)> {
        self.halt.store(true, Ordering::SeqCst);
        if let Some(p) = self.procs.take() {
            p.stop();
        }
        self.thread.take().and_then(|t| t.join().ok())
    }

    /// Stop the nodes, however they run, and collect what each did: per
    /// node (scenario index) its report, and the driver's report (merged
    /// over the node processes: every port, the worst lateness). A node
    /// process that died (killed) has no report; it is left out and named
    /// in `missing`.
    pub fn stop_reports(&mut self) -> Result<NodeReports, String> {
        self.halt.store(true, Ordering::SeqCst);
        if let Some(p) = self.procs.take() {
            return Ok(p.stop());
        }
        let (mut driver, snaps) = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .ok_or("router thread panicked")?;
        let dr = driver.report();
        let reports = driver
            .hosts
            .iter()
            .zip(&self.index)
            .enumerate()
            .map(|(k, (h, &i))| {
                let mut r = node::report(h, h.router().map_or("node", |_| "router"));
                r.snapshots = snaps
                    .iter()
                    .map(|s| s.get(k).cloned().unwrap_or_default())
                    .collect();
                (i, r)
            })
            .collect();
        Ok(NodeReports {
            reports,
            driver: dr,
            missing: Vec::new(),
        })
    }

    /// The lab (present until [`LiveLab::finish`]).
    pub fn lab(&self) -> &Lab {
        self.lab.as_ref().expect("lab present until finish")
    }

    /// Stop the routers and remove the lab, reporting cleanup errors.
    pub fn finish(mut self) -> Result<(), LabError> {
        self.stop();
        match self.lab.take() {
            Some(l) => l.down(),
            None => Ok(()),
        }
    }

    /// Keep the routers running until `stop` is set (`qosnet lab up`).
    pub fn wait(&mut self, stop: &AtomicBool) -> Option<DriverReport> {
        while !stop.load(Ordering::Relaxed)
            && (self.thread.as_ref().is_some_and(|t| !t.is_finished()) || self.procs.is_some())
        {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        self.stop_reports().ok().map(|r| r.driver)
    }

    /// The process id of the node process running scenario node `name`
    /// (process mode only), e.g. to kill it.
    pub fn node_pid(&self, name: &str) -> Option<u32> {
        self.procs
            .as_ref()?
            .children
            .iter()
            .find(|(_, n, _)| n == name)
            .map(|(_, _, c)| c.id())
    }
}

impl Drop for LiveLab {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the nodes of a lab did.
pub struct NodeReports {
    /// (scenario node index, report) of every node that reported.
    pub reports: Vec<(usize, NodeReport)>,
    pub driver: DriverReport,
    /// Nodes whose process died without a report.
    pub missing: Vec<usize>,
}

/// Start `qosnet node` for each qosnet node of the lab: one config file
/// per node (scenario, node, namespace, ports, marks, end, report path) in
/// a fresh directory, one child per config. Each child opens its ports
/// in its node's namespace and runs until SIGTERM or `until`.
#[allow(clippy::too_many_arguments)]
fn spawn_nodes(
    sc: &Scenario,
    net: &Network,
    lab: &Lab,
    build: &BuildOpts,
    opts: &LiveOptions,
    np: &NodeProcesses,
    marks: &[Instant],
    until: Option<Instant>,
) -> Result<(Vec<usize>, Procs), String> {
    // New, 0700 and ours, never a predictable path in a shared directory:
    // root writes configs here that root's node processes then act on.
    let dir =
        qosnet_io::rundir::RunDir::create(&lab.spec().prefix).map_err(|e| format!("run directory: {e}"))?;
    let scenario =
        std::fs::canonicalize(&np.scenario).map_err(|e| format!("{}: {e}", np.scenario.display()))?;
    let mut procs = Procs {
        children: Vec::new(),
        dir,
    };
    let dir = procs.dir.path().to_path_buf();
    let mut index = Vec::new();
    for (i, n) in sc.nodes.iter().enumerate() {
        if !hosted_here(sc, i) || !lab.spec().is_local(&n.name) {
            continue;
        }
        let mut cfg = toml::Table::new();
        cfg.insert("scenario".into(), scenario.to_string_lossy().into_owned().into());
        cfg.insert("node".into(), n.name.clone().into());
        cfg.insert("netns".into(), lab.spec().netns_name(&n.name).into());
        let mut ports = toml::Table::new();
        for f in &net.nodes[i].ifaces {
            let p = lab
                .all_ports()
                .iter()
                .find(|p| p.link == f.link && p.node == n.name)
                .ok_or_else(|| format!("lab has no port of {} on link {}", n.name, f.link))?;
            ports.insert(sc.nodes[f.peer].name.clone(), p.ifname.clone().into());
        }
        let peers: Vec<String> = ports.keys().cloned().collect();
        opts.devices.write_node_keys(&n.name, &peers, &mut cfg);
        cfg.insert("ports".into(), ports.into());
        let sets: Vec<toml::Value> = np.sets.iter().map(|s| s.clone().into()).collect();
        cfg.insert("set".into(), sets.into());
        cfg.insert("emulate_wire".into(), opts.emulate_wire.into());
        cfg.insert("emulate_cpu".into(), opts.emulate_cpu.into());
        let report = dir.join(format!("{}.report.json", n.name));
        cfg.insert("report".into(), report.to_string_lossy().into_owned().into());
        let srcs: Vec<toml::Value> = build
            .flow_src
            .iter()
            .map(|a| a.map(|a| a.to_string()).unwrap_or_default().into())
            .collect();
        cfg.insert("flow_src".into(), srcs.into());
        let ready = dir.join(format!("{}.ready", n.name));
        cfg.insert("ready".into(), ready.to_string_lossy().into_owned().into());
        let ms: Vec<toml::Value> = marks.iter().map(|m| (m.as_nanos() as i64).into()).collect();
        cfg.insert("marks".into(), ms.into());
        if let Some(u) = until {
            cfg.insert("until".into(), (u.as_nanos() as i64).into());
        }
        cfg.insert("epoch".into(), (build.epoch.as_nanos() as i64).into());
        if n.is_rether() {
            // `qosnet rether --lab PREFIX --station NAME` finds it here.
            let ctl = dir.join(format!("{}.ctl", n.name));
            cfg.insert("control".into(), ctl.to_string_lossy().into_owned().into());
        }
        if let Some((_, k)) = opts.crash_holding_token.iter().find(|(s, _)| *s == n.name) {
            cfg.insert("crash_holding_token_after".into(), (*k as i64).into());
        }
        let text = toml::to_string(&cfg).map_err(|e| e.to_string())?;
        let path = procs
            .dir
            .write_new(&format!("{}.toml", n.name), text.as_bytes())
            .map_err(|e| e.to_string())?;
        let mut cmd = std::process::Command::new(&np.exe);
        cmd.arg("node").arg("--config").arg(&path);
        if let Some(n) = opts.driver.nice {
            cmd.arg("--nice").arg(n.to_string());
        }
        // A node must not outlive its lab: if `qosnet lab` dies (even by
        // SIGKILL), the kernel sends the node SIGTERM.
        qosnet_io::process::die_with_parent(&mut cmd, qosnet_io::process::Signal::TERM);
        let child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {} node: {e}", np.exe.display()))?;
        procs.children.push((i, n.name.clone(), child));
        index.push(i);
    }
    // Each child announces that its ports are open by creating
    // `NODE.ready`; one that exits first failed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for (_, name, c) in procs.children.iter_mut() {
        let ready = dir.join(format!("{name}.ready"));
        while !ready.exists() {
            if let Ok(Some(st)) = c.try_wait() {
                return Err(format!("node process {name} exited at start ({st})"));
            }
            if std::time::Instant::now() > deadline {
                return Err(format!("node process {name} did not open its ports within 10 s"));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    Ok((index, procs))
}

impl Procs {
    /// SIGTERM every child still running, wait for all, read the reports.
    fn stop(mut self) -> NodeReports {
        for (_, _, c) in &self.children {
            let _ = qosnet_io::process::kill(c.id(), qosnet_io::process::Signal::TERM);
        }
        let mut reports = Vec::new();
        let mut missing = Vec::new();
        let mut driver: Option<DriverReport> = None;
        for (i, name, c) in self.children.iter_mut() {
            let _ = c.wait();
            let path = self.dir.join(&format!("{name}.report.json"));
            match qosnet_io::rundir::read_trusted(&path)
                .ok()
                .and_then(|t| serde_json::from_str::<node::NodeRun>(&t).ok())
            {
                Some(run) => {
                    driver = Some(match driver.take() {
                        None => run.driver,
                        Some(acc) => merge_driver(acc, run.driver),
                    });
                    reports.push((*i, run.node));
                }
                None => missing.push(*i),
            }
        }
        self.children.clear();
        NodeReports {
            reports,
            driver: driver.unwrap_or_default(),
            missing,
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for (_, _, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // self.dir removes itself.
    }
}

/// Two node processes' driver reports as one: every port, summed loop
/// counters, the worse lateness and receive lag.
fn merge_driver(mut a: DriverReport, b: DriverReport) -> DriverReport {
    a.wall_s = a.wall_s.max(b.wall_s);
    a.cpu_s += b.cpu_s;
    a.stats.iterations += b.stats.iterations;
    a.stats.sleeps += b.stats.sleeps;
    a.stats.rx_frames += b.stats.rx_frames;
    a.stats.tx_frames += b.stats.tx_frames;
    a.stats.deadlines += b.stats.deadlines;
    a.stats.deadlines_missed += b.stats.deadlines_missed;
    if b.lateness.max_ns > a.lateness.max_ns {
        a.lateness = b.lateness;
    }
    if b.rx_lag.max_ns > a.rx_lag.max_ns {
        a.rx_lag = b.rx_lag;
    }
    a.ports.extend(b.ports);
    a
}

/// Send one datagram from `node` to `to`:9 (discard), so the host's kernel
/// resolves its gateway (and the router learns the host) before measured
/// traffic starts.
fn warm_arp(lab: &Lab, node: &str, from: Ipv4Addr, to: Ipv4Addr) -> Result<(), String> {
    let ns = lab.netns(node).ok_or("no such node")?;
    netns::run_in(&ns, || {
        let s = std::net::UdpSocket::bind(SocketAddrV4::new(from, 0))?;
        s.send_to(b"qosnet arp warm-up", SocketAddrV4::new(to, 9))
            .map(|_| ())
    })
    .and_then(|r| r)
    .map_err(|e| format!("warm-up datagram from {node}: {e}"))
}

fn gen_config(sc: &Scenario, fi: usize, net: &Network, src: Ipv4Addr, t0: Instant) -> GenConfig {
    let f = &sc.flows[fi];
    let dst = SocketAddrV4::new(net.host_ip(f.to), f.dport);
    // One definition of sizes and patterns (qosnet_core::traffic) for
    // the simulator and the generator.
    let (size, pattern) = (f.size.clone(), f.pattern);
    let start = t0 + f.start;
    let stop = t0 + f.stop.map_or(sc.duration, |s| s.min(sc.duration));
    GenConfig {
        dst,
        bind: Some(SocketAddrV4::new(src, f.sport)),
        flow: fi as u32,
        pattern,
        rate: traffic::Rate::Pps(f.pps()),
        size,
        dscp: f.dscp,
        ttl: Some(f.ttl),
        start: Some(start),
        duration: Some(stop.saturating_since(start)),
        count: None,
        seed: sc.seed.wrapping_add(fi as u64),
        measure: Some((t0 + sc.warmup, t0 + sc.duration)),
        // The routers need the cores more than the senders need precision
        // (send times are measured, not assumed).
        spin: Duration::from_micros(20),
    }
}

/// Where a run's threads go: with the tester, the router thread and the
/// tester on cores of their own, SCHED_FIFO, memory locked, the RT
/// throttle lifted (each refusal is reported, not fatal).
struct Realtime {
    /// The run's options with the router thread's placement set.
    opts: LiveOptions,
    /// What was applied or refused, in words, for the results.
    notes: Vec<String>,
    tester_cpu: Option<usize>,
    tester_fifo: Option<i32>,
    /// Whether memory was locked (the run unlocks it at the end).
    locked: bool,
    /// Lives to the end of the run; restores the kernel's budget on drop.
    throttle: Option<qosnet_io::rt::RtThrottleLifted>,
}

impl Realtime {
    fn set_up(opts: &LiveOptions) -> Realtime {
        let mut rt = Realtime {
            opts: opts.clone(),
            notes: Vec::new(),
            tester_cpu: None,
            tester_fifo: None,
            locked: false,
            throttle: None,
        };
        if opts.traffic == TrafficSource::Tester && opts.realtime {
            let pl = qosnet_io::rt::placement();
            rt.notes.extend(pl.note.clone());
            rt.opts.driver.cpu = pl.router_cpu;
            rt.opts.driver.realtime = Some(qosnet_io::rt::ROUTER_PRIO);
            // Under SCHED_FIFO a sleeping driver wakes within microseconds;
            // spinning 100 µs before deadlines that come every few µs (wire
            // emulation at full load) is a busy loop, which the kernel's RT
            // throttling stops for 50 ms of every second.
            if opts.driver.spin == clock::DEFAULT_SPIN {
                rt.opts.driver.spin = RT_SPIN;
            }
            rt.tester_cpu = pl.tester_cpu;
            rt.tester_fifo = Some(qosnet_io::rt::TESTER_PRIO);
            match qosnet_io::rt::lock_memory() {
                Ok(()) => {
                    rt.locked = true;
                    rt.notes.push("memory locked (mlockall)".into());
                }
                Err(e) => rt.notes.push(format!("memory not locked: mlockall: {e}")),
            }
            // Busy-polling under SCHED_FIFO with no budget would hold its core
            // against the kernel's own work there: keep the throttle then.
            if opts.driver.busy_poll {
                rt.notes.push("RT throttling kept (--busy-poll)".into());
            } else {
                match qosnet_io::rt::RtThrottleLifted::lift() {
                    Ok(Some(g)) => {
                        rt.notes.push(format!(
                            "RT throttling lifted for the run (was {} us per period)",
                            g.old()
                        ));
                        rt.throttle = Some(g);
                    }
                    Ok(None) => rt.notes.push("RT throttling already off".into()),
                    Err(e) => rt.notes.push(format!("RT throttling kept: {e}")),
                }
            }
            rt.notes
                .extend(pl.router_cpu.and_then(qosnet_io::rt::fair_server_note));
            if opts.processes.is_some() {
                rt.notes.push(
                    "node processes: not pinned, not SCHED_FIFO (only the in-process router thread is)"
                        .into(),
                );
            }
        } else if opts.traffic == TrafficSource::Tester {
            rt.notes.push("real-time placement off (--no-realtime)".into());
        }
        rt
    }
}

/// What a run adds to its results beyond the flows and nodes: nodes that
/// sent no report, the placement, the real-time notes, the tester's
/// counters, the traffic source, kills and stalls.
struct RunExtras<'a> {
    missing: &'a [usize],
    t0: Instant,
    rt_notes: Vec<String>,
    tester: Option<&'a crate::tester::TesterReport>,
    killed: Vec<serde_json::Value>,
    stalled: Option<serde_json::Value>,
}

impl RunExtras<'_> {
    fn add_to(
        self,
        results: &mut Results,
        sc: &Scenario,
        live: &LiveLab,
        opts: &LiveOptions,
        dr: &DriverReport,
    ) {
        if !self.missing.is_empty() {
            let names: Vec<&str> = self.missing.iter().map(|&i| sc.nodes[i].name.as_str()).collect();
            results.extra.insert("nodes_without_report".into(), js(&names));
        }
        if let Some(p) = &opts.placement {
            results
                .extra
                .insert("placement".into(), placement_extra(sc, live, p, self.t0));
        }
        let mut placement = self.rt_notes;
        placement.extend(dr.sched.iter().cloned());
        if let Some(t) = self.tester {
            placement.extend(t.sched.iter().cloned());
            let ports: BTreeMap<&str, &qosnet_io::device::DeviceStats> =
                t.ports.iter().map(|(h, d)| (h.as_str(), d)).collect();
            results.extra.insert(
                "tester".into(),
                serde_json::json!({
                    "send_lateness": t.send_lateness,
                    "counters": t.counters,
                    "ports": ports,
                }),
            );
        }
        results.extra.insert(
            "traffic".into(),
            js(&match opts.traffic {
                TrafficSource::Kernel => "kernel generators",
                TrafficSource::Tester => "tester",
            }),
        );
        if !placement.is_empty() {
            results.extra.insert("realtime".into(), js(&placement));
        }
        if !self.killed.is_empty() {
            results.extra.insert("killed".into(), js(&self.killed));
        }
        if let Some(s) = self.stalled {
            results.extra.insert("stalls".into(), s);
        }
    }
}

/// When traffic starts: given (`--start-at`, the same on every machine
/// of a split lab), or the next whole 10 s at least 5 s away with a
/// placement (so machines started a few seconds apart agree), or a whole
/// UTC second at least 2 s (plus a second per node process) after `now`,
/// so the nodes and ARP are ready.
fn traffic_start(sc: &Scenario, opts: &LiveOptions, now: Instant) -> Instant {
    let sec = 1_000_000_000;
    // The routers' rings are opened after this choice (2 s), and node
    // processes each load the scenario and open their ports (seen: over
    // 3 s for six processes at load average 15).
    let lead = match &opts.processes {
        Some(_) => (0..sc.nodes.len()).filter(|&i| hosted_here(sc, i)).count() as u64,
        None => 0,
    };
    match (opts.start_at, &opts.placement) {
        (Some(t), _) => t,
        (None, None) => Instant(((now + Duration::from_secs(2 + lead)).0 / sec + 1) * sec),
        (None, Some(_)) => Instant(((now.0 + 5 * sec) / (10 * sec) + 1) * 10 * sec),
    }
}

/// Per flow, its delay histogram's (ns, count) pairs (empty for a flow
/// nothing of arrived).
fn flow_buckets(sc: &Scenario, flows: &SinkFlows) -> Vec<(String, Vec<(u64, u64)>)> {
    sc.flows
        .iter()
        .enumerate()
        .map(|(fi, f)| {
            let b = flows.get(&(fi as u32)).map(|(b, _)| b.clone());
            (f.name.clone(), b.unwrap_or_default())
        })
        .collect()
}

/// Options a run refuses before building anything.
fn check_start(opts: &LiveOptions) -> Result<(), String> {
    if opts.placement.is_some() && opts.traffic == TrafficSource::Tester {
        return Err("the tester drives every host from one process: a lab split across machines runs with --traffic kernel".into());
    }
    if let Some(t) = opts.start_at {
        let now = clock::now();
        if t < now + Duration::from_millis(1500) {
            return Err(format!(
                "start time {} s (UTC) is less than 1.5 s away (now {:.1}): the lab would not be ready",
                t.as_nanos() / 1_000_000_000,
                now.as_nanos() as f64 / 1e9
            ));
        }
    }
    Ok(())
}

/// Run `sc` live: lab, routers, flows, results; the lab is removed before
/// returning, also on error. `stop` (e.g. set by Ctrl-C) ends the run early.
pub fn run(sc: &Scenario, opts: &LiveOptions, stop: Arc<AtomicBool>) -> Result<LiveRun, String> {
    let say = |m: &str| {
        if opts.verbose {
            eprintln!("{m}");
        }
    };
    let noise = opts.timer_noise.then(|| {
        say("measuring this machine's timer noise (0.3 s)...");
        clock::measure_timer_noise(std::time::Duration::from_millis(300))
    });
    check_start(opts)?;
    let drain = sc.drain.max(Duration::from_millis(100));
    let Realtime {
        opts: opts_rt,
        notes: rt_notes,
        tester_cpu,
        tester_fifo,
        locked,
        throttle: rt_throttle,
    } = Realtime::set_up(opts);
    for n in &rt_notes {
        say(n);
    }
    let opts = &opts_rt;
    say(&format!("building lab {}-* ...", opts.prefix));
    // Start of traffic: a whole UTC second at least 2 s (plus a second per
    // node process) after the lab is up, so the nodes and ARP are ready.
    let t0_cell = std::cell::Cell::new(Instant::ZERO);
    // The tester's ports open before t0 is chosen: under load, opening and
    // locking five receive rings took seconds, and a tester that starts
    // after t0 sends its backlog at once (seen: every packet 1.2 s late).
    let tester_ports = std::cell::RefCell::new(None);
    let mut live = LiveLab::start_timed(sc, opts, stop.clone(), |lab| {
        if opts.traffic == TrafficSource::Tester {
            *tester_ports.borrow_mut() = Some(open_tester_ports(sc, lab));
        }
        let t0 = traffic_start(sc, opts, clock::now());
        t0_cell.set(t0);
        let end = t0 + sc.duration;
        (
            opts.epoch.unwrap_or(t0),
            vec![t0 + sc.warmup, end],
            Some(end + drain + Duration::from_millis(50)),
        )
    })?;
    let t0 = t0_cell.get();
    let net = live.net.clone();
    if clock::now() + Duration::from_millis(300) > t0 {
        return Err(format!(
            "the lab came up {:.1} s after the start of traffic it was given; the machine is too loaded, retry",
            clock::now().saturating_since(t0).as_secs_f64()
        ));
    }
    // Node failures (`--kill NODE@T`): SIGKILL at t0 + T, from a thread
    // of their own while the traffic runs.
    let killer = spawn_killer(node_kills(sc, opts, &live, t0)?, stop.clone(), opts.verbose);
    // Injected stalls on the router thread's core (CPU 0 when it is not
    // pinned: the kernel's own CPU work lands there first).
    let staller = opts.stalls.map(|spec| {
        use qosnet_io::rt::StallRun;
        let stop = stop.clone();
        let cpu = opts.driver.cpu.unwrap_or(0);
        let until = t0 + sc.duration;
        std::thread::spawn(move || spec.run(cpu, t0, until, &stop))
    });
    let (gens, flows_stats, sink_counters, tester) = match opts.traffic {
        TrafficSource::Kernel => {
            let (g, f, c) = kernel_traffic(sc, &live, t0, drain, &stop, &say)?;
            (g, f, c, None)
        }
        TrafficSource::Tester => {
            let ports = tester_ports
                .into_inner()
                .ok_or("tester ports were not opened")??;
            let placed = (tester_cpu, tester_fifo);
            let (g, f, t) = tester_traffic(sc, &live, ports, t0, drain, placed, &stop, &say)?;
            (g.into_iter().map(Some).collect(), f, Vec::new(), Some(t))
        }
    };
    let killed = killer.join().map_err(|_| "kill thread panicked")?;
    let stalled = match staller {
        Some(h) => Some(h.join().map_err(|_| "stall thread panicked")?),
        None => None,
    };
    let NodeReports {
        reports,
        driver: dr,
        missing,
    } = live.stop_reports()?;
    let interrupted = stop.load(Ordering::Relaxed);
    let mut results = results(
        sc,
        &net,
        &live.layout,
        &reports,
        &dr,
        &gens,
        &flows_stats,
        &sink_counters,
        noise,
    );
    let extras = RunExtras {
        missing: &missing,
        t0,
        rt_notes,
        tester: tester.as_ref(),
        killed,
        stalled,
    };
    extras.add_to(&mut results, sc, &live, opts, &dr);
    if locked {
        qosnet_io::rt::unlock_memory();
    }
    drop(rt_throttle);
    let buckets = flow_buckets(sc, &flows_stats);
    live.finish().map_err(|e| e.to_string())?;
    if interrupted {
        return Err("interrupted; lab removed".into());
    }
    Ok(LiveRun {
        results,
        buckets,
        driver: dr,
    })
}

/// The SIGKILLs a run makes (`--kill NODE@T` and the scenario's kill
/// faults): (when, node, pid, offset from t0), in time order.
fn node_kills(
    sc: &Scenario,
    opts: &LiveOptions,
    live: &LiveLab,
    t0: Instant,
) -> Result<Vec<(Instant, String, u32, Duration)>, String> {
    let mut kills = Vec::new();
    // The scenario's `[[fault]] kind = "kill"` are the same SIGKILL; a
    // restart would need the lab to start a node process again mid-run,
    // which it does not (the simulator reboots nodes).
    let mut wanted = opts.kills.clone();
    for k in &sc.kills {
        let name = &sc.nodes[k.node].name;
        if k.restart.is_some() {
            return Err(format!(
                "[[fault]] at {name} has a restart: live labs kill node processes but do not restart them; run it with `qosnet sim`, or drop restart"
            ));
        }
        wanted.push((name.clone(), k.at));
    }
    for (name, at) in &wanted {
        let pid = live.node_pid(name).ok_or_else(|| {
            format!("cannot kill node {name}: it is not a node process of this lab (kills need --processes)")
        })?;
        kills.push((t0 + *at, name.clone(), pid, *at));
    }
    kills.sort();
    Ok(kills)
}

/// A thread that sends each SIGKILL of `kills` at its time (or stops with
/// `stop`) and returns what it did, for the results.
fn spawn_killer(
    kills: Vec<(Instant, String, u32, Duration)>,
    stop: Arc<AtomicBool>,
    verbose: bool,
) -> std::thread::JoinHandle<Vec<serde_json::Value>> {
    std::thread::spawn(move || {
        let mut killed = Vec::new();
        for (at, name, pid, after) in kills {
            while clock::now() < at && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            // A child of this process (reaped by `Procs`).
            let r = qosnet_io::process::kill(pid, qosnet_io::process::Signal::KILL);
            if verbose {
                eprintln!("kill -9 {name} (pid {pid}) at +{after}");
            }
            killed.push(serde_json::json!({
                "node": name,
                "pid": pid,
                "at_s": after.as_secs_f64(),
                "late_ns": clock::now().saturating_since(at).as_nanos(),
                "ok": r.is_ok(),
            }));
        }
        killed
    })
}

/// The hosts' kernels send and receive the flows: ARP warm-up, one sink
/// per (destination, port), one generator thread per flow.
fn kernel_traffic(
    sc: &Scenario,
    live: &LiveLab,
    t0: Instant,
    drain: Duration,
    stop: &Arc<AtomicBool>,
    say: &dyn Fn(&str),
) -> Result<KernelTraffic, String> {
    let sec = 1_000_000_000;
    let end = t0 + sc.duration;
    let net = live.net.clone();
    // Warm-up datagrams: hosts resolve their gateways.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let here = |node: &str| live.layout.spec.is_local(node);
    for (fi, (node, src)) in live.layout.flow_src.iter().enumerate() {
        if !here(node) {
            continue;
        }
        let f = &sc.flows[fi];
        // The first hop: the link's router, the domain's gateway, or the
        // destination itself on a shared domain.
        let first = &net.nodes[f.from].ifaces[0];
        let gw = if !first.peer_ip.is_unspecified() {
            first.peer_ip
        } else if first.domain.is_some() && first.domain == net.nodes[f.to].ifaces[0].domain {
            net.host_ip(f.to)
        } else {
            match net.gateway(sc, f.from) {
                Some(m) => m.ip,
                None => continue,
            }
        };
        warm_arp(live.lab(), node, *src, gw)?;
    }
    for s in live.layout.splits.iter().filter(|s| here(&s.host)) {
        let hip: Ipv4Addr = s
            .host_addr
            .split('/')
            .next()
            .unwrap_or("")
            .parse()
            .map_err(|_| "bad address")?;
        warm_arp(live.lab(), &s.host, hip, s.gateway)?;
    }

    // Sinks: one per (destination host, port).
    let mut sink_keys: Vec<(usize, u16)> = sc
        .flows
        .iter()
        .filter(|f| here(&sc.nodes[f.to].name))
        .map(|f| (f.to, f.dport))
        .collect();
    sink_keys.sort();
    sink_keys.dedup();
    let mut sink_threads = Vec::new();
    for (to, port) in sink_keys {
        let ns = live.lab().netns(&sc.nodes[to].name).ok_or("no sink namespace")?;
        let addr = SocketAddrV4::new(net.host_ip(to), port);
        let mut sink = netns::run_in(&ns, || Sink::bind(addr))
            .and_then(|r| r)
            .map_err(|e| format!("sink {addr} in {ns}: {e}"))?;
        sink.set_window(t0 + sc.warmup, end);
        // Only the scenario's flows to this (host, port): a datagram that
        // names another flow is counted, never given a table entry.
        sink.expect_flows(
            sc.flows
                .iter()
                .enumerate()
                .filter(|(_, f)| f.to == to && f.dport == port)
                .map(|(i, _)| i as u32),
        );
        let stop = stop.clone();
        sink_threads.push(std::thread::spawn(move || {
            let r = sink.run_until(end + drain, &stop);
            (sink, r)
        }));
    }
    // Generators, each on a thread inside its namespace.
    let mut gen_threads = Vec::new();
    for (fi, (node, src)) in live.layout.flow_src.iter().enumerate() {
        if !here(node) {
            // Measured on the machine of its source.
            gen_threads.push(None);
            continue;
        }
        let ns = live.lab().netns(node).ok_or("no generator namespace")?;
        let cfg = gen_config(sc, fi, &net, *src, t0);
        let stop = stop.clone();
        gen_threads.push(Some(std::thread::spawn(move || {
            netns::run_in(&ns, || traffic::run_gen(&cfg, &stop))
                .and_then(|r| r)
                .map_err(|e| e.to_string())
        })));
    }
    say(&format!(
        "traffic from {} for {} s (+{} drain), {} flows",
        t0.as_nanos() / sec,
        sc.duration.as_secs_f64(),
        drain,
        sc.flows.len()
    ));
    let gens: Vec<Option<Result<GenReport, String>>> = gen_threads
        .into_iter()
        .map(|t| {
            t.map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("generator thread panicked".into()))
            })
        })
        .collect();
    let mut flows_stats: SinkFlows = BTreeMap::new();
    let mut sink_counters = Vec::new();
    for t in sink_threads {
        let (sink, r) = t.join().map_err(|_| "sink thread panicked")?;
        r.map_err(|e| format!("sink: {e}"))?;
        sink_counters.push(sink.counters());
        for (id, fs) in sink.flows() {
            flows_stats.insert(*id, (fs.buckets(), fs.report(None)));
        }
    }
    let gens: Vec<Option<GenReport>> = gens
        .into_iter()
        .map(|g| g.transpose())
        .collect::<Result<_, _>>()?;
    Ok((gens, flows_stats, sink_counters))
}

/// What the hosts' kernels measured: per flow its generator's report
/// (`None` when its source is on another machine), the sinks' flows and
/// counters.
type KernelTraffic = (Vec<Option<GenReport>>, SinkFlows, Vec<SinkCounters>);

/// The hosts a tester drives and its ports on their interfaces.
type TesterPorts = (Vec<usize>, Vec<(crate::tester::PortSpec, AfPacket)>);

/// Open the tester's AF_PACKET port on each driven host's interface.
fn open_tester_ports(sc: &Scenario, lab: &Lab) -> Result<TesterPorts, String> {
    let net = Network::build(sc)?;
    let hosts = tester_hosts(sc, &net)?;
    let mut ports = Vec::new();
    for &h in &hosts {
        let name = &sc.nodes[h].name;
        let f = &net.nodes[h].ifaces[0];
        let lp = lab
            .ports(name)
            .first()
            .cloned()
            .ok_or_else(|| format!("lab has no port of host {name}"))?;
        let cfg = AfPacketConfig {
            // Receive only: a small ring (a few ms of the tester's load).
            rx_frames: 4096,
            ..AfPacketConfig::default()
        };
        let dev = AfPacket::open_in(&lp.netns, &lp.ifname, &cfg)
            .map_err(|e| format!("tester port {} in {}: {e}", lp.ifname, lp.netns))?;
        ports.push((
            crate::tester::PortSpec {
                host: name.clone(),
                ip: f.ip,
                mac: f.mac,
                gw_ip: f.peer_ip,
                gw_mac: f.peer_mac,
            },
            dev,
        ));
    }
    Ok((hosts, ports))
}

/// The tester sends and receives the flows ([`crate::tester`]) on ports
/// opened by [`open_tester_ports`]: it announces the hosts to their
/// routers and runs on its own thread until the end of the drain.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn tester_traffic(
    sc: &Scenario,
    live: &LiveLab,
    (hosts, ports): TesterPorts,
    t0: Instant,
    drain: Duration,
    (cpu, fifo): (Option<usize>, Option<i32>),
    stop: &Arc<AtomicBool>,
    say: &dyn Fn(&str),
) -> Result<(Vec<GenReport>, SinkFlows, crate::tester::TesterReport), String> {
    use crate::tester::{FlowSpec, Tester, TesterConfig};
    let net = &live.net;
    let flows = sc
        .flows
        .iter()
        .enumerate()
        .map(|(fi, f)| {
            let (offset, drift) = sc.nodes[f.from].clock();
            FlowSpec {
                flow: fi as u32,
                port: hosts.iter().position(|&h| h == f.from).unwrap_or(0),
                dst: net.host_ip(f.to),
                sport: f.sport,
                dport: f.dport,
                dscp: f.dscp,
                ttl: f.ttl,
                size: f.size.clone(),
                pattern: f.pattern,
                pps: f.pps(),
                start: f.start,
                stop: f.stop.map_or(sc.duration, |s| s.min(sc.duration)),
                clock_offset_ns: offset,
                clock_drift_ppm: drift,
                seed: sc.seed.wrapping_add(fi as u64),
            }
        })
        .collect();
    let end = t0 + sc.duration;
    let cfg = TesterConfig {
        t0,
        until: end + drain,
        window: (t0 + sc.warmup, end),
        spin: if fifo.is_some() {
            RT_SPIN
        } else {
            clock::DEFAULT_SPIN
        },
        cpu,
        fifo,
    };
    let mut tester = Tester::new(ports, flows, cfg)?;
    // The routers learn the hosts now, well before t0.
    std::thread::sleep(std::time::Duration::from_millis(50));
    tester.announce();
    say(&format!(
        "tester: {} flows from {} host ports, {} s (+{} drain)",
        sc.flows.len(),
        hosts.len(),
        sc.duration.as_secs_f64(),
        drain
    ));
    let stop2 = stop.clone();
    let rep = std::thread::Builder::new()
        .name("qosnet-tester".into())
        .spawn(move || tester.run(&stop2))
        .map_err(|e| format!("starting the tester thread: {e}"))?
        .join()
        .map_err(|_| "tester thread panicked")?;
    let mut flows_stats: SinkFlows = BTreeMap::new();
    for (fi, fs) in rep.flows.iter().enumerate() {
        let sent = rep.gens.get(fi).map(|g| g.sent_measured);
        flows_stats.insert(fi as u32, (fs.buckets(), fs.report(sent)));
    }
    Ok((rep.gens.clone(), flows_stats, rep))
}

#[allow(clippy::too_many_arguments)]
fn results(
    sc: &Scenario,
    net: &Network,
    layout: &LiveLayout,
    reports: &[(usize, NodeReport)],
    dr: &DriverReport,
    gens: &[Option<GenReport>],
    flows: &SinkFlows,
    sinks: &[SinkCounters],
    noise: Option<clock::TimerNoise>,
) -> Results {
    let interval = (sc.duration - sc.warmup).as_secs_f64().max(1e-9);
    let flow_results = flow_results(sc, layout, gens, flows, interval);
    let mut links = Vec::new();
    let mut nodes = Vec::new();
    for (i, rep) in reports {
        let n = &sc.nodes[*i];
        port_links(sc, net, *i, rep, interval, &mut links);
        nodes.push(NodeResult {
            name: n.name.clone(),
            counters: node_counters(n, rep, dr),
            details: rep.details.clone(),
        });
    }
    host_results(sc, layout, gens, &mut nodes);
    let extra = live_extra(sc, net, layout, reports, dr, gens, flows, sinks, noise);
    let events = dr.stats.rx_frames + dr.stats.tx_frames;
    Results {
        scenario: sc.name.clone(),
        source: sc.source.clone(),
        mode: "live".into(),
        seed: sc.seed,
        duration_s: sc.duration.as_secs_f64(),
        warmup_s: sc.warmup.as_secs_f64(),
        flows: flow_results,
        links,
        nodes,
        engine: EngineResult {
            events,
            wall_s: dr.wall_s,
            sim_s: sc.duration.as_secs_f64(),
            events_per_wall_s: events as f64 / dr.wall_s.max(1e-9),
            sim_s_per_wall_s: 1.0,
            peak_event_queue: 0,
        },
        extra,
    }
}

/// Per flow: sent as measured by its generator, received, lost, delay,
/// jitter and throughput as its sink measured them.
fn flow_results(
    sc: &Scenario,
    layout: &LiveLayout,
    gens: &[Option<GenReport>],
    flows: &SinkFlows,
    interval: f64,
) -> Vec<FlowResult> {
    sc.flows
        .iter()
        .enumerate()
        .map(|(fi, f)| {
            let gen = gens.get(fi).and_then(|g| g.as_ref());
            let sent = gen.map_or(0, |g| g.sent_measured);
            let mut fr = FlowResult {
                name: f.name.clone(),
                sent,
                lost: sent,
                ..FlowResult::default()
            };
            if let Some((_, r)) = flows.get(&(fi as u32)) {
                fr.received = r.received;
                fr.lost = sent.saturating_sub(r.received);
                fr.reordered = r.reordered;
                fr.delay_ns = r.delay_ns;
                fr.jitter_ns = r.jitter_ns;
                fr.throughput_bps = r.received_ip_bytes as f64 * 8.0 / interval;
            }
            if !layout.spec.is_local(&sc.nodes[f.to].name) {
                // The sink is on another machine: nothing is known lost here.
                fr.lost = 0;
            }
            fr
        })
        .collect()
}

/// The links out of node `i` (and, for a link to a host or a bridge,
/// the link into it), from its report's counter snapshots.
fn port_links(
    sc: &Scenario,
    net: &Network,
    i: usize,
    rep: &NodeReport,
    interval: f64,
    links: &mut Vec<LinkResult>,
) {
    let n = &sc.nodes[i];
    let snap = |m: usize, p: usize| -> PortSnap {
        rep.snapshots
            .get(m)
            .and_then(|v| v.get(p))
            .copied()
            .unwrap_or_default()
    };
    for (p, iface) in net.nodes[i].ifaces.iter().enumerate() {
        let (p0, b0, w0, rp0, rb0) = snap(0, p);
        let (p1, b1, w1, rp1, rb1) = snap(1, p);
        let cap = sc.links[iface.link].capacity_bps;
        let port = rep.ports.get(p).cloned().unwrap_or_default();
        let mut lr = LinkResult {
            name: format!("{}->{}", n.name, sc.nodes[iface.peer].name),
            capacity_bps: cap,
            packets: p1 - p0,
            bytes: b1 - b0,
            utilization: (w1 - w0) as f64 * 8.0 / (cap as f64 * interval),
            load_bps: (b1 - b0).saturating_sub(14 * (p1 - p0)) as f64 * 8.0 / interval,
            scheduler: port.scheduler.clone(),
            queued_at_end: port.queued,
            counters: port.counters.clone(),
            ..LinkResult::default()
        };
        for (k, v) in &port.drops {
            lr.drops += v;
            lr.drops_by_reason.insert(k.clone(), *v);
        }
        if port.tx_refused > 0 {
            lr.drops += port.tx_refused;
            lr.drops_by_reason
                .insert("device_tx_refused".into(), port.tx_refused);
        }
        links.push(lr);
        // The far end of a link to a host (or a bridge): what this node
        // received on it (wire bytes assume frames of at least 60 bytes).
        if !hosted_here(sc, iface.peer) {
            let fr = sc.links[iface.link].framing;
            let (pk, by) = (rp1 - rp0, rb1 - rb0);
            let wire = by + pk * (fr.fcs + fr.preamble + fr.ifg) as u64;
            links.push(LinkResult {
                name: format!("{}->{}", sc.nodes[iface.peer].name, n.name),
                capacity_bps: cap,
                packets: pk,
                bytes: by,
                utilization: wire as f64 * 8.0 / (cap as f64 * interval),
                load_bps: by.saturating_sub(14 * pk) as f64 * 8.0 / interval,
                scheduler: "kernel".into(),
                ..LinkResult::default()
            });
        }
    }
}

/// A node's counters: its own, its CPU model's drops, its ports' receive
/// classes and device errors.
fn node_counters(
    n: &qosnet_scenario::model::Node,
    rep: &NodeReport,
    dr: &DriverReport,
) -> BTreeMap<String, u64> {
    let mut counters = rep.counters.clone();
    if let Some(d) = rep.cpu_drops {
        counters.insert("input_queue_drops".into(), d);
    }
    for port in &rep.ports {
        let rx = port.rx_counters.iter().map(|(k, v)| (k.as_str(), *v));
        for (k, v) in rx.chain([("tx_refused", port.tx_refused), ("rx_errors", port.rx_errors)]) {
            if v > 0 {
                counters.insert(format!("{}.{k}", port.name), v);
            }
        }
    }
    for pr in dr.ports.iter().filter(|pr| pr.router == n.name) {
        let d = &pr.device;
        for (k, v) in [
            ("dev_rx_kernel_drops", d.rx_kernel_drops),
            ("dev_rx_truncated", d.rx_truncated),
            ("dev_rx_bad_slot", d.rx_bad_slot),
            ("dev_rx_csum_partial", d.rx_csum_partial),
            ("dev_tx_busy", d.tx_busy),
            ("dev_tx_invalid", d.tx_invalid),
            ("dev_tx_errors", d.tx_errors),
        ] {
            if v > 0 {
                counters.insert(format!("{}.{k}", pr.port), v);
            }
        }
    }
    counters
}

/// Each local host's generators' counts (joined to its node's entry when
/// its interface is a qosnet node).
fn host_results(sc: &Scenario, layout: &LiveLayout, gens: &[Option<GenReport>], nodes: &mut Vec<NodeResult>) {
    for (i, n) in sc.nodes.iter().enumerate() {
        if !n.is_host() || !layout.spec.is_local(&n.name) {
            continue;
        }
        let mut counters = BTreeMap::new();
        // A host whose interface is a qosnet node (a RETHER station)
        // already has its node's entry: its senders' counters join it.
        let own = nodes.iter().position(|r| r.name == n.name);
        let from: Vec<usize> = (0..sc.flows.len()).filter(|&fi| sc.flows[fi].from == i).collect();
        let gen = |fi: usize| gens.get(fi).and_then(|g| g.as_ref());
        let sent: u64 = from.iter().filter_map(|&fi| gen(fi)).map(|g| g.sent).sum();
        let errs: u64 = from.iter().filter_map(|&fi| gen(fi)).map(|g| g.send_errors).sum();
        counters.insert("sent".into(), sent);
        counters.insert("send_errors".into(), errs);
        match own {
            Some(k) => nodes[k].counters.extend(counters),
            None => nodes.push(NodeResult {
                name: n.name.clone(),
                counters,
                details: None,
            }),
        }
    }
}

/// The sinks' counters, summed.
fn sink_total(sinks: &[SinkCounters]) -> SinkCounters {
    sinks.iter().fold(SinkCounters::default(), |mut a, s| {
        a.datagrams += s.datagrams;
        a.not_probe += s.not_probe;
        a.bad_seq += s.bad_seq;
        a.socket_drops += s.socket_drops;
        a.no_kernel_timestamp += s.no_kernel_timestamp;
        a.outside_window += s.outside_window;
        a
    })
}

/// `extra` of a live run's results: the TDP plan and delay spreads, the
/// driver's and generators' lateness, the sinks, the timer noise.
#[allow(clippy::too_many_arguments)]
fn live_extra(
    sc: &Scenario,
    net: &Network,
    layout: &LiveLayout,
    reports: &[(usize, NodeReport)],
    dr: &DriverReport,
    gens: &[Option<GenReport>],
    flows: &SinkFlows,
    sinks: &[SinkCounters],
    noise: Option<clock::TimerNoise>,
) -> BTreeMap<String, serde_json::Value> {
    let mut extra = BTreeMap::new();
    if let Ok((_, Some(plan))) = tdp_setup(sc, net) {
        extra.insert("tdp_plan".to_string(), plan.summary_json(sc, net));
    }
    if let Some(tdp) = &sc.tdp {
        // The paper's jitter (max − min), the spread without the rarest
        // 0.2 %, and the share of packets inside 2 TFs, per flow.
        let window = Duration(2 * tdp.tf.as_nanos());
        let sp: BTreeMap<&str, crate::tester::Spread> = sc
            .flows
            .iter()
            .enumerate()
            .map(|(fi, f)| {
                let s = flows.get(&(fi as u32)).map_or_else(
                    || crate::tester::spread(&[], 0, 0, window),
                    |(b, r)| crate::tester::spread(b, r.delay_ns.min, r.delay_ns.max, window),
                );
                (f.name.as_str(), s)
            })
            .collect();
        extra.insert("delay_spread".into(), js(&sp));
    }
    extra.insert("timer_lateness".into(), js(&dr.lateness));
    extra.insert("rx_lag".into(), js(&dr.rx_lag));
    extra.insert("driver".into(), js(&dr.stats));
    extra.insert("router_thread_cpu_s".into(), js(&dr.cpu_s));
    extra.insert("sinks".into(), js(&sink_total(sinks)));
    let gl: BTreeMap<String, LatenessSummary> = sc
        .flows
        .iter()
        .zip(gens)
        .filter_map(|(f, g)| g.as_ref().map(|g| (f.name.clone(), g.lateness)))
        .collect();
    extra.insert("generator_lateness".into(), js(&gl));
    if let Some(n) = noise {
        extra.insert("timer_noise".into(), js(&n));
    }
    extra.insert(
        "emulated_processing".into(),
        serde_json::Value::Bool(reports.iter().any(|(_, r)| r.cpu_drops.is_some())),
    );
    if !layout.splits.is_empty() {
        extra.insert("split_hosts".into(), js(&layout.splits));
    }
    extra
}

/// `extra.placement` of one machine's results: the machine, its nodes, its
/// tunnels, the common start of traffic, and per flow what was measured
/// here (flows that neither start nor end here are left out).
fn placement_extra(sc: &Scenario, live: &LiveLab, p: &PlacedOn, t0: Instant) -> serde_json::Value {
    let spec = &live.layout.spec;
    let mut flows = BTreeMap::new();
    for (fi, f) in sc.flows.iter().enumerate() {
        let src = spec.is_local(&live.layout.flow_src[fi].0);
        let dst = spec.is_local(&sc.nodes[f.to].name);
        let role = match (src, dst) {
            (true, true) => MEASURED_BOTH,
            (true, false) => MEASURED_SOURCE,
            (false, true) => MEASURED_SINK,
            (false, false) => continue,
        };
        flows.insert(f.name.clone(), role);
    }
    let nodes: Vec<&str> = sc
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .filter(|n| spec.is_local(n))
        .collect();
    serde_json::json!({
        "file": p.placement.path,
        "machine": p.machine,
        "nodes": nodes,
        "tunnels": live.lab().tunnels(),
        "start_unix_ns": t0.as_nanos(),
        "flows": flows,
    })
}

fn js<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}
