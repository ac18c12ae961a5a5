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
use qosnet_scenario::build::{build_router, tdp_setup, BuildOpts};
use qosnet_scenario::results::{DelayStats, EngineResult, FlowResult, LinkResult, NodeResult, Results};
use qosnet_scenario::topo::Network;
use qosnet_scenario::{Pattern, ProcTime, Scenario, SizeDist};
use serde::Serialize;

use crate::afpacket::{AfPacket, AfPacketConfig};
use crate::clock::{self, LatenessSummary};
use crate::lab::{ip, Ipv4Net, Lab, LabError, LabLink, LabNode, LabSpec, NodeKind};
use crate::netns;
use crate::router_loop::{CpuModel, Driver, DriverConfig, DriverReport, ProcDist, RouterHost};
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
    for n in &sc.nodes {
        let kind = if n.is_router() {
            NodeKind::Router
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

/// The scenario's routers on AF_PACKET ports of a lab (or of anything
/// laid out like one): router `i`'s port `k` is the lab port of scenario
/// link `net.nodes[i].ifaces[k].link` at node `i`.
pub fn open_routers(
    sc: &Scenario,
    net: &Network,
    lab: &Lab,
    opts: &BuildOpts,
    live: &LiveOptions,
) -> Result<Vec<RouterHost<AfPacket>>, String> {
    let af = &live.afpacket;
    let (ctr, plan) = tdp_setup(sc, net)?;
    let mut hosts = Vec::new();
    for (i, n) in sc.nodes.iter().enumerate() {
        if !n.is_router() {
            continue;
        }
        let mut router = build_router(sc, net, ctr.as_ref(), plan.as_ref(), i, opts)?;
        router.set_transmit_catch_up(Duration::from_millis(5));
        let mut devs = Vec::new();
        let mut resolve = Vec::new();
        for (k, f) in net.nodes[i].ifaces.iter().enumerate() {
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
            let dev = AfPacket::open_in(&p.netns, &p.ifname, af)
                .map_err(|e| format!("opening {} in {}: {e}", p.ifname, p.netns))?;
            devs.push(dev);
            resolve.push((k as u16, f.peer_ip));
        }
        let mut h = RouterHost::new(router, devs);
        h.resolve = resolve;
        if live.emulate_wire {
            // veth has no rate: emulate the scenario's wires.
            h.wire = Some(
                net.nodes[i]
                    .ifaces
                    .iter()
                    .map(|f| sc.links[f.link].delay)
                    .collect(),
            );
        }
        if live.emulate_cpu {
            if let Some(spec) = n.router() {
                let dist = match spec.processing {
                    ProcTime::Fixed(d) => ProcDist::Fixed(d),
                    ProcTime::Uniform(a, b) => ProcDist::Uniform(a, b),
                    ProcTime::Exp { base, mean } => ProcDist::Exp { base, mean },
                };
                h.cpu = Some(CpuModel::new(
                    dist,
                    spec.input_queue,
                    sc.seed.wrapping_add(i as u64),
                ));
            }
        }
        hosts.push(h);
    }
    Ok(hosts)
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
    /// ([`crate::router_loop::CpuModel`]).
    pub emulate_cpu: bool,
    /// Deliver each frame when its last bit would leave a real link of the
    /// scenario's capacity, plus the link's delay (store and forward, as
    /// in the simulator); off, frames leave paced but at once.
    pub emulate_wire: bool,
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
    halt: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(Driver<AfPacket>, Vec<Snapshot>)>>,
}

/// Port counters of every router at a mark: per router, per port
/// (tx packets, tx bytes, tx wire bytes, rx packets, rx bytes).
/// Per flow id: the delay histogram buckets and the sink's report.
type SinkFlows = BTreeMap<u32, (Vec<(u64, u64)>, traffic::FlowReport)>;

pub type Snapshot = Vec<Vec<(u64, u64, u64, u64, u64)>>;

fn snapshot(d: &Driver<AfPacket>) -> Snapshot {
    d.hosts
        .iter()
        .map(|h| {
            h.router
                .ports()
                .iter()
                .map(|p| {
                    let c = &p.counters;
                    (c.tx_pkts, c.tx_bytes, c.tx_wire_bytes, c.rx_pkts, c.rx_bytes)
                })
                .collect()
        })
        .collect()
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
        let hosts = open_routers(sc, &net, &lab, &layout.build_opts(), opts)?;
        let mut driver = Driver::new(hosts, opts.driver);
        driver.set_marks(marks);
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
            halt,
            thread: Some(thread),
        })
    }

    /// Stop the routers; returns the driver (routers and devices) and the
    /// counter snapshots (`None` if already stopped).
    pub fn stop(&mut self) -> Option<(Driver<AfPacket>, Vec<Snapshot>)> {
        self.halt.store(true, Ordering::SeqCst);
        self.thread.take().and_then(|t| t.join().ok())
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
        while !stop.load(Ordering::Relaxed) && self.thread.as_ref().is_some_and(|t| !t.is_finished()) {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        self.stop().map(|(mut d, _)| d.report())
    }
}

impl Drop for LiveLab {
    fn drop(&mut self) {
        self.stop();
    }
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
    let size = match f.size {
        SizeDist::Fixed(b) => traffic::SizeDist::Fixed(b),
        SizeDist::Imix => traffic::SizeDist::Imix,
    };
    let pattern = match f.pattern {
        Pattern::Cbr => traffic::Pattern::Cbr,
        Pattern::Poisson => traffic::Pattern::Poisson,
        Pattern::OnOff { on, off } => traffic::Pattern::OnOff { on, off },
    };
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
    let t0 = Instant((clock::now().0 / sec + 3) * sec);
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
    // Warm-up datagrams: hosts resolve their gateways.
    std::thread::sleep(std::time::Duration::from_millis(50));
    for (fi, (node, src)) in live.layout.flow_src.iter().enumerate() {
        let gw = net.nodes[sc.flows[fi].from].ifaces[0].peer_ip;
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
    let (mut driver, snaps) = live.stop().ok_or("router thread panicked")?;
    let dr = driver.report();
    let gens: Vec<GenReport> = gens.into_iter().collect::<Result<_, _>>()?;
    let interrupted = stop.load(Ordering::Relaxed);
    let results = results(
        sc,
        &net,
        &live.layout,
        &driver,
        &dr,
        &snaps,
        &gens,
        &flows_stats,
        &sink_counters,
        noise,
    );
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
    drop(driver);
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
    driver: &Driver<AfPacket>,
    dr: &DriverReport,
    snaps: &[Snapshot],
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
    let zero =
        |h: usize, p: usize, s: &Snapshot| s.get(h).and_then(|v| v.get(p)).copied().unwrap_or_default();
    let empty = Snapshot::new();
    let (a, b) = (snaps.first().unwrap_or(&empty), snaps.get(1).unwrap_or(&empty));
    let mut links = Vec::new();
    let mut nodes = Vec::new();
    let mut ri = 0;
    let mut port_reports = dr.ports.iter();
    for (i, n) in sc.nodes.iter().enumerate() {
        if !n.is_router() {
            continue;
        }
        let h = &driver.hosts[ri];
        for (p, iface) in net.nodes[i].ifaces.iter().enumerate() {
            let (p0, b0, w0, rp0, rb0) = zero(ri, p, a);
            let (p1, b1, w1, rp1, rb1) = zero(ri, p, b);
            let cap = sc.links[iface.link].capacity_bps;
            let port = &h.router.ports()[p];
            let sch = port.scheduler();
            let mut lr = LinkResult {
                name: format!("{}->{}", n.name, sc.nodes[iface.peer].name),
                capacity_bps: cap,
                packets: p1 - p0,
                bytes: b1 - b0,
                utilization: (w1 - w0) as f64 * 8.0 / (cap as f64 * interval),
                load_bps: (b1 - b0).saturating_sub(14 * (p1 - p0)) as f64 * 8.0 / interval,
                scheduler: sch.kind().to_string(),
                queued_at_end: sch.len() as u64,
                counters: sch.counters().into_iter().collect(),
                ..LinkResult::default()
            };
            for (k, v) in sch.stats().drop_counts() {
                lr.drops += v;
                lr.drops_by_reason.insert(k.to_string(), v);
            }
            if let Some(pr) = port_reports.next() {
                if pr.tx_refused > 0 {
                    lr.drops += pr.tx_refused;
                    lr.drops_by_reason
                        .insert("device_tx_refused".into(), pr.tx_refused);
                }
            }
            links.push(lr);
            // The host end of a host link: what the router received on it
            // (wire bytes assume frames of at least 60 bytes).
            if !sc.nodes[iface.peer].is_router() {
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
        let mut counters: BTreeMap<String, u64> = h.router.named_counters().into_iter().collect();
        if let Some(c) = &h.cpu {
            counters.insert("input_queue_drops".into(), c.drops);
        }
        for (p, port) in h.router.ports().iter().enumerate() {
            let pc = &port.counters;
            for (k, v) in [
                ("not_for_us", pc.not_for_us),
                ("non_ip", pc.non_ip),
                ("arp_rx", pc.arp_rx),
                ("tx_refused", h.tx_refused[p]),
                ("rx_errors", h.rx_errors[p]),
            ] {
                if v > 0 {
                    counters.insert(format!("{}.{k}", port.cfg.name), v);
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
        });
        ri += 1;
    }
    for (i, n) in sc.nodes.iter().enumerate() {
        if n.is_router() {
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
        serde_json::Value::Bool(driver.hosts.iter().any(|h| h.cpu.is_some())),
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
