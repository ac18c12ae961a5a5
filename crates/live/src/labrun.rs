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

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use qosnet_core::time::{Duration, Instant};
use qosnet_scenario::build::{tdp_setup, BuildOpts, Setup};
use qosnet_scenario::results::{DelayStats, EngineResult, FlowResult, LinkResult, NodeResult, Results};
use qosnet_scenario::topo::Network;
use qosnet_scenario::Scenario;
use serde::Serialize;

use crate::afpacket::{AfPacket, AfPacketConfig};
use crate::clock::{self, LatenessSummary};
use crate::driver::{Driver, DriverConfig, DriverReport, NodeHost};
use crate::lab::{ip, Ipv4Net, Lab, LabError, LabLink, LabNode, LabSpec, NodeKind};
use crate::netns;
use crate::node::{self, NodeReport, OpenOptions, PortPlace, PortSnap};
use crate::traffic::{self, GenConfig, GenReport, Sink, SinkCounters};

/// Suffix of the sender namespace of a host whose flows loop back to it.
pub const SENDER_SUFFIX: &str = "_tx";

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
    /// Builder options for the routers of this layout.
    pub fn build_opts(&self) -> BuildOpts {
        BuildOpts {
            static_peer_macs: false,
            flow_src: self.flow_src.iter().map(|(_, a)| Some(*a)).collect(),
        }
    }
}

/// Map a scenario and its network onto a lab description.
pub fn layout(sc: &Scenario, net: &Network, prefix: &str) -> Result<LiveLayout, String> {
    if let Some(n) = sc.nodes.iter().find(|n| n.is_rether()) {
        return Err(format!(
            "node {}: RETHER stations run in sim only so far (live needs one qosnet process per station on a TAP); use `qosnet sim`",
            n.name
        ));
    }
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
            .filter(|f| f.from == f.to)
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
            (!looping.contains(&node)).then_some(Ipv4Net {
                addr: a,
                prefix_len: l.prefix_len,
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
    // Hosts behind a switch or on a segment reach the world through their
    // broadcast domain's first router (a host linked to a router directly
    // gets that router as its default gateway from the lab itself).
    for (i, n) in sc.nodes.iter().enumerate() {
        let Some(f) = net.nodes[i].ifaces.first() else {
            continue;
        };
        if !n.is_host() || !sc.nodes[f.peer].is_l2() {
            continue;
        }
        if let Some(gw) = net.gateway(sc, i) {
            spec.routes.push(crate::lab::LabRoute {
                node: n.name.clone(),
                dst: Ipv4Net {
                    addr: Ipv4Addr::UNSPECIFIED,
                    prefix_len: 0,
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
                            dst: Ipv4Net {
                                addr: m.ip,
                                prefix_len: 32,
                            },
                            via: gw.ip,
                        });
                    }
                }
            }
        }
    }
    let mut splits = Vec::new();
    let mut sender_of = BTreeMap::new();
    for &h in &looping {
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

/// Set up what [`Lab::up`] does not: the bridges and addresses of split
/// hosts.
pub fn post_up(lab: &Lab, layout: &LiveLayout) -> Result<(), LabError> {
    for s in &layout.splits {
        let ns = lab.spec().netns_name(&s.host);
        let sns = lab.spec().netns_name(&s.sender);
        let ports: Vec<String> = lab.ports(&s.host).iter().map(|p| p.ifname.clone()).collect();
        ip(&["-n", &ns, "link", "add", "br0", "type", "bridge"])?;
        for p in &ports {
            ip(&["-n", &ns, "link", "set", p, "master", "br0"])?;
        }
        ip(&["-n", &ns, "addr", "add", &s.host_addr, "dev", "br0"])?;
        ip(&["-n", &ns, "link", "set", "br0", "up"])?;
        netns::run_in(&ns, || crate::iface::disable_offloads("br0"))
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
) -> Result<(Vec<NodeHost<AfPacket>>, Vec<usize>), String> {
    let setup = Setup::new(sc, net)?;
    let mut hosts = Vec::new();
    let mut index = Vec::new();
    for (i, n) in sc.nodes.iter().enumerate() {
        if !hosted_here(sc, i) {
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
/// builder registry builds (routers, switches — the same code as in the
/// simulator); hosts are kernel stacks in namespaces, segments Linux
/// bridges. A new node kind needs no change here.
fn hosted_here(sc: &Scenario, i: usize) -> bool {
    !sc.nodes[i].is_host() && !sc.nodes[i].is_medium()
}

/// Settings of a live run.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    pub prefix: String,
    pub driver: DriverConfig,
    pub afpacket: AfPacketConfig,
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
    pub metrics: Option<Arc<crate::metrics::MetricsHub>>,
    /// Node failures: `kill -9` of these nodes' processes this long after
    /// traffic starts (needs [`LiveOptions::processes`]), e.g. an STSDR
    /// forwarder or its master, to see the others re-hash and elect.
    pub kills: Vec<(String, Duration)>,
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
            afpacket: AfPacketConfig::default(),
            timer_noise: true,
            verbose: false,
            emulate_cpu: false,
            emulate_wire: true,
            processes: None,
            metrics: None,
            kills: Vec::new(),
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
    thread: Option<std::thread::JoinHandle<(Driver<AfPacket>, Vec<Snapshot>)>>,
    /// One process per node instead of the thread.
    procs: Option<Procs>,
}

/// The node processes of a lab and where they write their reports.
struct Procs {
    /// (scenario node index, node name, process).
    children: Vec<(usize, String, std::process::Child)>,
    dir: std::path::PathBuf,
}

/// Per flow id: the delay histogram buckets and the sink's report.
type SinkFlows = BTreeMap<u32, (Vec<(u64, u64)>, traffic::FlowReport)>;

/// Port counters of every hosted node at a mark, in driver order.
pub type Snapshot = Vec<Vec<PortSnap>>;

fn snapshot(d: &Driver<AfPacket>) -> Snapshot {
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
        let net = Network::build(sc)?;
        let layout = layout(sc, &net, &opts.prefix)?;
        let lab = Lab::up(&layout.spec).map_err(|e| e.to_string())?;
        post_up(&lab, &layout).map_err(|e| e.to_string())?;
        if let Some(np) = &opts.processes {
            if opts.metrics.is_some() {
                return Err("--metrics serves the routers of this process; with --processes each node is its own process: give each `qosnet node` its own --metrics".into());
            }
            let (index, procs) = spawn_nodes(sc, &net, &lab, &layout.build_opts(), opts, np, &marks, until)?;
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
        let (hosts, index) = open_nodes(sc, &net, &lab, &layout.build_opts(), opts)?;
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
    pub fn stop(&mut self) -> Option<(Driver<AfPacket>, Vec<Snapshot>)> {
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
    let dir = std::env::temp_dir().join(format!("qosnet-{}-{}", lab.spec().prefix, std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let scenario =
        std::fs::canonicalize(&np.scenario).map_err(|e| format!("{}: {e}", np.scenario.display()))?;
    let mut procs = Procs {
        children: Vec::new(),
        dir: dir.clone(),
    };
    let mut index = Vec::new();
    for (i, n) in sc.nodes.iter().enumerate() {
        if !hosted_here(sc, i) {
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
        let path = dir.join(format!("{}.toml", n.name));
        let text = toml::to_string(&cfg).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        let mut cmd = std::process::Command::new(&np.exe);
        cmd.arg("node").arg("--config").arg(&path);
        if let Some(n) = opts.driver.nice {
            cmd.arg("--nice").arg(n.to_string());
        }
        // A node must not outlive its lab: if `qosnet lab` dies (even by
        // SIGKILL), the kernel sends the node SIGTERM.
        // SAFETY: prctl(2) is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
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
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        let mut reports = Vec::new();
        let mut missing = Vec::new();
        let mut driver: Option<DriverReport> = None;
        for (i, name, c) in self.children.iter_mut() {
            let _ = c.wait();
            let path = self.dir.join(format!("{name}.report.json"));
            match std::fs::read_to_string(&path)
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
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Two node processes' driver reports as one: every port, summed loop
/// counters, the worse lateness and receive lag.
fn merge_driver(mut a: DriverReport, b: DriverReport) -> DriverReport {
    a.wall_s = a.wall_s.max(b.wall_s);
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
    let (size, pattern) = (f.size, f.pattern);
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
    // Start of traffic: a whole UTC second, at least 1.5 s away, so the lab,
    // the routers and ARP are ready.
    let sec = 1_000_000_000;
    // Node processes need longer on a loaded machine: each loads the
    // scenario and opens its ports (seen: over 3 s for six processes
    // with the load average at 15, and the traffic then started before
    // the nodes ran).
    let lead = match &opts.processes {
        Some(_) => {
            3 + sc
                .nodes
                .iter()
                .enumerate()
                .filter(|&(i, _)| hosted_here(sc, i))
                .count() as u64
        }
        None => 3,
    };
    let t0 = Instant((clock::now().0 / sec + lead) * sec);
    let end = t0 + sc.duration;
    let drain = sc.drain.max(Duration::from_millis(100));
    say(&format!("building lab {}-* ...", opts.prefix));
    let mut live = LiveLab::start(
        sc,
        opts,
        stop.clone(),
        vec![t0 + sc.warmup, end],
        Some(end + drain + Duration::from_millis(50)),
    )?;
    let net = live.net.clone();
    if clock::now() + Duration::from_millis(300) > t0 {
        return Err(format!(
            "the lab took {:.1} s to come up, past the start of traffic it was given; the machine is too loaded, retry",
            clock::now().saturating_since(t0 - Duration::from_secs(lead)).as_secs_f64()
        ));
    }
    let mut kills = Vec::new();
    for (name, at) in &opts.kills {
        let pid = live.node_pid(name).ok_or_else(|| {
            format!("cannot kill node {name}: it is not a node process of this lab (kills need --processes)")
        })?;
        kills.push((t0 + *at, name.clone(), pid, *at));
    }
    kills.sort();
    // Warm-up datagrams: hosts resolve their gateways.
    std::thread::sleep(std::time::Duration::from_millis(50));
    for (fi, (node, src)) in live.layout.flow_src.iter().enumerate() {
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
    for s in &live.layout.splits {
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
    let mut sink_keys: Vec<(usize, u16)> = sc.flows.iter().map(|f| (f.to, f.dport)).collect();
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
        let stop = stop.clone();
        sink_threads.push(std::thread::spawn(move || {
            let r = sink.run_until(end + drain, &stop);
            (sink, r)
        }));
    }
    // Generators, each on a thread inside its namespace.
    let mut gen_threads = Vec::new();
    for (fi, (node, src)) in live.layout.flow_src.iter().enumerate() {
        let ns = live.lab().netns(node).ok_or("no generator namespace")?;
        let cfg = gen_config(sc, fi, &net, *src, t0);
        let stop = stop.clone();
        gen_threads.push(std::thread::spawn(move || {
            netns::run_in(&ns, || traffic::run_gen(&cfg, &stop))
                .and_then(|r| r)
                .map_err(|e| e.to_string())
        }));
    }
    say(&format!(
        "traffic from {} for {} s (+{} drain), {} flows",
        t0.as_nanos() / sec,
        sc.duration.as_secs_f64(),
        drain,
        sc.flows.len()
    ));
    let mut killed = Vec::new();
    for (at, name, pid, after) in kills {
        while clock::now() < at && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // SAFETY: kill(2) on a child of this process (reaped by `Procs`).
        let r = unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        say(&format!("kill -9 {name} (pid {pid}) at +{after}"));
        killed.push(serde_json::json!({
            "node": name,
            "pid": pid,
            "at_s": after.as_secs_f64(),
            "late_ns": clock::now().saturating_since(at).as_nanos(),
            "ok": r == 0,
        }));
    }
    let gens: Vec<Result<GenReport, String>> = gen_threads
        .into_iter()
        .map(|t| {
            t.join()
                .unwrap_or_else(|_| Err("generator thread panicked".into()))
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
    let NodeReports {
        reports,
        driver: dr,
        missing,
    } = live.stop_reports()?;
    let gens: Vec<GenReport> = gens.into_iter().collect::<Result<_, _>>()?;
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
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|&i| sc.nodes[i].name.as_str()).collect();
        results.extra.insert("nodes_without_report".into(), js(&names));
    }
    if !killed.is_empty() {
        results.extra.insert("killed".into(), js(&killed));
    }
    let buckets = sc
        .flows
        .iter()
        .enumerate()
        .map(|(fi, f)| {
            (
                f.name.clone(),
                flows_stats
                    .get(&(fi as u32))
                    .map(|(b, _)| b.clone())
                    .unwrap_or_default(),
            )
        })
        .collect();
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

#[allow(clippy::too_many_arguments)]
fn results(
    sc: &Scenario,
    net: &Network,
    layout: &LiveLayout,
    reports: &[(usize, NodeReport)],
    dr: &DriverReport,
    gens: &[GenReport],
    flows: &SinkFlows,
    sinks: &[SinkCounters],
    noise: Option<clock::TimerNoise>,
) -> Results {
    let interval = (sc.duration - sc.warmup).as_secs_f64().max(1e-9);
    let flow_results = sc
        .flows
        .iter()
        .enumerate()
        .map(|(fi, f)| {
            let sent = gens.get(fi).map_or(0, |g| g.sent_measured);
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
                fr.delay_ns = DelayStats {
                    min: r.delay_ns.min,
                    mean: r.delay_ns.mean,
                    p50: r.delay_ns.p50,
                    p99: r.delay_ns.p99,
                    p999: r.delay_ns.p999,
                    max: r.delay_ns.max,
                };
                fr.jitter_ns = r.jitter_ns;
                fr.throughput_bps = r.received_ip_bytes as f64 * 8.0 / interval;
            }
            fr
        })
        .collect();
    let mut links = Vec::new();
    let mut nodes = Vec::new();
    for (i, rep) in reports {
        let i = *i;
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
        nodes.push(NodeResult {
            name: n.name.clone(),
            counters,
            details: None,
        });
    }
    for (i, n) in sc.nodes.iter().enumerate() {
        if !n.is_host() {
            continue;
        }
        let mut counters = BTreeMap::new();
        let from: Vec<usize> = (0..sc.flows.len()).filter(|&fi| sc.flows[fi].from == i).collect();
        let sent: u64 = from.iter().filter_map(|&fi| gens.get(fi)).map(|g| g.sent).sum();
        let errs: u64 = from
            .iter()
            .filter_map(|&fi| gens.get(fi))
            .map(|g| g.send_errors)
            .sum();
        counters.insert("sent".into(), sent);
        counters.insert("send_errors".into(), errs);
        nodes.push(NodeResult {
            name: n.name.clone(),
            counters,
            details: None,
        });
    }
    let sink_total = sinks.iter().fold(SinkCounters::default(), |mut a, s| {
        a.datagrams += s.datagrams;
        a.not_probe += s.not_probe;
        a.bad_seq += s.bad_seq;
        a.socket_drops += s.socket_drops;
        a.no_kernel_timestamp += s.no_kernel_timestamp;
        a.outside_window += s.outside_window;
        a
    });
    let mut extra = BTreeMap::new();
    if let Ok((_, Some(plan))) = tdp_setup(sc, net) {
        extra.insert("tdp_plan".to_string(), plan.summary_json(sc, net));
    }
    extra.insert("timer_lateness".into(), js(&dr.lateness));
    extra.insert("rx_lag".into(), js(&dr.rx_lag));
    extra.insert("driver".into(), js(&dr.stats));
    extra.insert("sinks".into(), js(&sink_total));
    let gl: BTreeMap<String, LatenessSummary> = sc
        .flows
        .iter()
        .zip(gens)
        .map(|(f, g)| (f.name.clone(), g.lateness))
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

fn js<T: Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}
