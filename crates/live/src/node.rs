//! One node of a scenario on real interfaces.
//!
//! Whatever its kind (router, switch, ...), a scenario node becomes a
//! sans-IO node from the scenario crate's builder registry
//! ([`qosnet_scenario::build::build_node`]), and this module puts it on
//! AF_PACKET or AF_XDP ports ([`qosnet_io::netdev`], chosen per port) with what live mode adds: transmit catch-up for late
//! wake-ups, ARP warm-up of point-to-point peers, wire and CPU emulation.
//! Labs use it for every qosnet node they host, in one process or one
//! process per node (`qosnet node`), and `qosnet node --config FILE` uses
//! it for a node on a real machine's NICs.
//!
//! A node that is an end system's interface ([`qosnet_core::node::Node::host_link`]:
//! a RETHER station) gets a TAP device [`HOST_TAP`] in its namespace that
//! carries the host's own IP stack — the scenario's address of the node on
//! it, the node's host MAC and MTU — so ping, iperf3 and TCP of that
//! namespace run through the node unchanged. The node's ports get `arp
//! off`: the kernel must not answer for the host's address on the port the
//! node owns.
//!
//! A node process reports what it did as a [`NodeReport`] (JSON): its
//! counters, each port's counters, and snapshots of the port counters at
//! the instants it was asked to mark (the end of a warm-up, the end of a
//! run), so a lab can compute link loads over its measurement window from
//! reports of separate processes as from its own driver.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use qosnet_core::node::cpu::Cpu;
use qosnet_core::router::Router;
use qosnet_core::time::{Duration, Instant};
use qosnet_scenario::build::{build_node, BuildOpts, Setup};
use qosnet_scenario::topo::Network;
use qosnet_scenario::Scenario;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::driver::{Driver, DriverConfig, DriverReport, NodeHost};
use qosnet_io::afpacket::AfPacketConfig;
use qosnet_io::device::Device;
use qosnet_io::netdev::{DeviceKind, NetDevice, PortDevices};

/// How a node is put on its ports.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    pub afpacket: AfPacketConfig,
    /// Which ports are AF_XDP (default: none).
    pub devices: PortDevices,
    /// Emulate each link's rate and delay (veth has neither).
    pub emulate_wire: bool,
    /// Emulate the scenario's per-frame processing time.
    pub emulate_cpu: bool,
    /// Answer with the interfaces' own MACs (real NICs), not the
    /// scenario's (labs give their veths the scenario's MACs).
    pub nic_macs: bool,
    /// Longest transmit catch-up after a late wake-up (see
    /// [`Router::set_transmit_catch_up`]).
    pub catch_up: Duration,
    /// Seed of the CPU model's processing times.
    pub seed: u64,
    /// Publish metrics snapshots here (`qosnet node --metrics`).
    pub metrics: Option<std::sync::Arc<crate::metrics::MetricsHub>>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            afpacket: AfPacketConfig::default(),
            devices: PortDevices::default(),
            emulate_wire: false,
            emulate_cpu: false,
            nic_macs: false,
            catch_up: Duration::from_millis(5),
            seed: 1,
            metrics: None,
        }
    }
}

/// Where node port `k` is: an interface, in a namespace or the current one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortPlace {
    pub ifname: String,
    pub netns: Option<String>,
}

/// Build scenario node `i` and open its ports (`places[k]` for port `k`).
pub fn open(
    sc: &Scenario,
    net: &Network,
    setup: &Setup,
    i: usize,
    build: &BuildOpts,
    places: &[PortPlace],
    o: &OpenOptions,
) -> Result<NodeHost<NetDevice>, String> {
    let name = &sc.nodes[i].name;
    let mut node = build_node(sc, net, setup, i, build)?
        .ok_or_else(|| format!("node {name} is a {}, not a qosnet node", sc.nodes[i].kind_name()))?;
    let ifaces = &net.nodes[i].ifaces;
    if places.len() != ifaces.len() {
        return Err(format!(
            "node {name} has {} ports but {} interfaces were given",
            ifaces.len(),
            places.len()
        ));
    }
    let mut devs = Vec::new();
    for (k, (f, p)) in ifaces.iter().zip(places).enumerate() {
        let peer = &sc.nodes[f.peer].name;
        let kind = o.devices.kind_for(name, peer);
        let (dev, how) = NetDevice::open(p.netns.as_deref(), &p.ifname, kind, &o.afpacket, &o.devices.xdp)
            .map_err(|e| format!("node {name}: opening {}: {e}", p.ifname))?;
        let drop_refused = matches!(&dev, NetDevice::Packet(d) if d.stack_drop().is_err());
        if !o.devices.all_af_packet()
            || (kind == DeviceKind::AfXdp) != (dev.kind() == DeviceKind::AfXdp)
            || drop_refused
        {
            eprintln!("node {name} port {k} ({} towards {peer}): {how}", p.ifname);
        }
        if let Some(r) = node.as_any_mut().downcast_mut::<Router>() {
            if o.nic_macs {
                if let Some(port) = r.port_mut(k as u16) {
                    port.cfg.mac = dev.mac();
                }
            }
            // A point-to-point peer is known at once; neighbours on a
            // shared domain are resolved when traffic needs them.
            if !f.peer_ip.is_unspecified() {
                r.resolve_on_start(k as u16, f.peer_ip);
            }
        }
        devs.push(dev);
    }
    if let Some(r) = node.as_any_mut().downcast_mut::<Router>() {
        r.set_transmit_catch_up(o.catch_up);
    }
    let stack = match node.host_link() {
        Some(hl) => Some(open_host_tap(name, &net.nodes[i], hl, places)?),
        None => None,
    };
    let mut h = NodeHost::new(node, devs);
    if let Some(tap) = stack {
        h = h.with_stack(Box::new(tap));
    }
    // A port on a shared segment (a Linux bridge, which has no rate):
    // the NIC is busy for the frame's wire time at the segment's rate.
    for (k, f) in ifaces.iter().enumerate() {
        if sc.nodes[f.peer].is_medium() {
            let l = &sc.links[f.link];
            if let Some(slot) = h.half_duplex.get_mut(k) {
                *slot = Some((l.capacity_bps, l.framing));
            }
        }
    }
    if o.emulate_wire {
        // veth has no rate: emulate the scenario's wires.
        h.wire = Some(
            ifaces
                .iter()
                .map(|f| {
                    let l = &sc.links[f.link];
                    (l.delay, Duration::for_bytes(l.framing.ifg as u64, l.capacity_bps))
                })
                .collect(),
        );
    }
    if o.emulate_cpu {
        if let Some((processing, queue)) = sc.nodes[i].cpu() {
            h = h.with_cpu(
                Cpu::new(processing, queue).with_control(sc.control_processing(i)),
                o.seed,
            );
        }
    }
    Ok(h)
}

/// The TAP interface of a node's host stack (one per namespace).
pub const HOST_TAP: &str = "host0";

/// Create and configure the host stack TAP of a node whose ports are
/// `places` (in their namespace): the node's scenario address, the host's
/// MAC and MTU, up; the ports' ARP off.
fn open_host_tap(
    name: &str,
    node: &qosnet_scenario::topo::NodeNet,
    hl: qosnet_core::node::HostLink,
    places: &[PortPlace],
) -> Result<qosnet_io::tap::Tap, String> {
    let f = node
        .ifaces
        .first()
        .ok_or_else(|| format!("node {name}: a host link needs a port"))?;
    let ns = places.first().and_then(|p| p.netns.clone());
    let tap = match &ns {
        Some(ns) => qosnet_io::tap::Tap::open_in(ns, HOST_TAP),
        None => qosnet_io::tap::Tap::open(HOST_TAP),
    }
    .map_err(|e| {
        format!("node {name}: creating TAP {HOST_TAP}: {e} (needs CAP_NET_ADMIN and /dev/net/tun)")
    })?;
    let ipc = |args: &[&str]| -> Result<(), String> {
        let mut v: Vec<&str> = Vec::new();
        if let Some(ns) = &ns {
            v.extend(["-n", ns.as_str()]);
        }
        v.extend(args);
        qosnet_io::iproute::ip(&v)
            .map(|_| ())
            .map_err(|e| format!("node {name}: {e}"))
    };
    let mac = hl.mac.to_string();
    let mtu = hl.mtu.to_string();
    ipc(&["link", "set", "dev", HOST_TAP, "address", &mac, "mtu", &mtu])?;
    let addr = format!("{}/{}", f.ip, f.prefix_len);
    ipc(&["addr", "replace", &addr, "dev", HOST_TAP])?;
    ipc(&["link", "set", "dev", HOST_TAP, "up"])?;
    for p in places {
        ipc(&["link", "set", "dev", &p.ifname, "arp", "off"])?;
    }
    Ok(tap)
}

/// One port's counters at a mark: tx packets, tx frame bytes, tx wire
/// bytes, rx packets, rx bytes.
pub type PortSnap = (u64, u64, u64, u64, u64);

/// What a node did, for results: kept by labs for the nodes they host and
/// written as JSON by `qosnet node --report FILE`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeReport {
    pub name: String,
    pub kind: String,
    /// Node-wide counters (as in results.json's `nodes[].counters`).
    pub counters: BTreeMap<String, u64>,
    pub ports: Vec<PortStat>,
    /// Port counters at each mark, in mark order.
    pub snapshots: Vec<Vec<PortSnap>>,
    /// Frames the CPU model dropped (input queue full), if emulated.
    pub cpu_drops: Option<u64>,
    /// The node's structured results (results.json `nodes[].details`).
    #[serde(default)]
    pub details: Option<serde_json::Value>,
}

/// One port of a [`NodeReport`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PortStat {
    pub name: String,
    pub scheduler: String,
    pub queued: u64,
    pub drops: BTreeMap<String, u64>,
    pub counters: BTreeMap<String, u64>,
    pub tx_refused: u64,
    pub rx_errors: u64,
    /// How the node classified what it received (router: `not_for_us`, ...).
    pub rx_counters: BTreeMap<String, u64>,
}

/// The port counters of a hosted node now.
pub fn snapshot<D: Device>(h: &NodeHost<D>) -> Vec<PortSnap> {
    (0..h.node.port_count())
        .map(|p| {
            let r = h.node.port_report(p as u16);
            (r.tx_pkts, r.tx_bytes, r.tx_wire_bytes, r.rx_pkts, r.rx_bytes)
        })
        .collect()
}

/// A hosted node's report (snapshots are the caller's).
pub fn report<D: Device>(h: &NodeHost<D>, kind: &str) -> NodeReport {
    let n = &h.node;
    let ports = (0..n.port_count())
        .map(|p| {
            let r = n.port_report(p as u16);
            PortStat {
                name: r.name,
                scheduler: r.scheduler,
                queued: r.queued,
                drops: r.drops.into_iter().collect(),
                counters: r.counters.into_iter().collect(),
                tx_refused: h.tx_refused.get(p).copied().unwrap_or(0),
                rx_errors: h.rx_errors.get(p).copied().unwrap_or(0),
                rx_counters: r.rx_counters.into_iter().collect(),
            }
        })
        .collect();
    let mut counters: BTreeMap<String, u64> = n.counters().into_iter().collect();
    if h.stack.is_some() {
        let c = h.stack_counts;
        for (k, v) in [
            ("host_stack_from_host", c.from_host),
            ("host_stack_to_host", c.to_host),
            ("host_stack_to_host_refused", c.to_host_refused),
            ("host_stack_read_errors", c.read_errors),
        ] {
            counters.insert(k.into(), v);
        }
    }
    NodeReport {
        name: n.name().to_string(),
        kind: kind.to_string(),
        counters,
        ports,
        snapshots: Vec::new(),
        cpu_drops: h.cpu.as_ref().map(|c| c.drops),
        details: n.details().as_ref().map(qosnet_scenario::results::detail_json),
    }
}

/// `qosnet node --config FILE` (and `qosnet router --config FILE`): which
/// node of which scenario this process is, and where its ports are.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub scenario: PathBuf,
    pub node: String,
    /// Scenario neighbour (or the switch or segment a port is on) → local
    /// interface.
    pub ports: BTreeMap<String, String>,
    pub netns: Option<String>,
    pub sets: Vec<String>,
    pub emulate_wire: bool,
    pub emulate_cpu: bool,
    /// Write the [`NodeReport`] (with the driver's report) here on exit.
    pub report: Option<PathBuf>,
    /// Create this file once the node's ports are open (a lab waits for it).
    pub ready: Option<PathBuf>,
    /// Per flow, the source address its sender really uses where that is
    /// not its host's (a lab's split hosts; see `BuildOpts::flow_src`).
    pub flow_src: Vec<Option<std::net::Ipv4Addr>>,
    /// `device = "af_xdp"`: every port's device (default AF_PACKET).
    pub device: Option<DeviceKind>,
    /// `[devices] NEIGHBOUR = "af_xdp"`: one port's device.
    pub devices: BTreeMap<String, DeviceKind>,
    /// `xdp_zero_copy = true`: AF_XDP ports ask for zero-copy.
    pub xdp_zero_copy: bool,
    /// `xdp_attach = "native" | "generic"`: where the XDP program runs.
    pub xdp_attach: Option<qosnet_io::xdp::AttachMode>,
    /// CLOCK_REALTIME instants at which to snapshot port counters.
    pub marks: Vec<Instant>,
    /// Stop at this CLOCK_REALTIME instant, if given.
    pub until: Option<Instant>,
    /// The CLOCK_REALTIME instant scenario time 0 stands for (a lab's
    /// start of traffic); the node's start if not given.
    pub epoch: Option<Instant>,
    /// A RETHER station's control socket (`qosnet rether`; see
    /// [`crate::rethctl`]).
    pub control: Option<PathBuf>,
    /// Fault injection: a RETHER station aborts while it holds the token
    /// after this many token visits ([`crate::rethctl::CrashHoldingToken`]).
    pub crash_holding_token_after: Option<u64>,
}

/// A node config file as written (docs/router-config.md): the keys and
/// their TOML types; [`NodeConfig::parse`] checks the values. Labs write
/// it with a `toml::Table` (`labrun::spawn_nodes`), `lab export` as text
/// (`containerlab::export`): both are these keys.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    scenario: Option<Spanned<String>>,
    node: Option<Spanned<String>>,
    #[serde(default)]
    ports: BTreeMap<String, Spanned<String>>,
    netns: Option<Spanned<String>>,
    #[serde(default)]
    set: Vec<String>,
    #[serde(default)]
    emulate_wire: bool,
    #[serde(default)]
    emulate_cpu: bool,
    report: Option<Spanned<String>>,
    ready: Option<Spanned<String>>,
    control: Option<Spanned<String>>,
    #[serde(default)]
    marks: Vec<Spanned<i64>>,
    until: Option<Spanned<i64>>,
    epoch: Option<Spanned<i64>>,
    #[serde(default)]
    flow_src: Vec<Spanned<String>>,
    crash_holding_token_after: Option<Spanned<i64>>,
    device: Option<Spanned<String>>,
    #[serde(default)]
    devices: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    xdp_zero_copy: bool,
    xdp_attach: Option<Spanned<String>>,
}

/// `path:line` of a byte offset of `text`, for messages.
fn place(path: &str, text: &str, offset: usize) -> String {
    let line = text[..offset.min(text.len())].matches('\n').count() + 1;
    format!("{path}:{line}")
}

impl NodeConfig {
    /// Read a node config file (TOML; docs/router-config.md). Paths in it
    /// are relative to the file.
    pub fn from_file(path: &Path) -> Result<NodeConfig, String> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {shown}: {e}"))?;
        NodeConfig::parse(&text, &shown, path.parent().unwrap_or(Path::new(".")))
    }

    /// Parse node config text; `path` names it in messages
    /// (`path:line: ...`), relative paths in it are taken from `dir`.
    /// Unknown keys, wrong types and values the node would only trip
    /// over later (an interface name Linux refuses, a port named twice, a
    /// netns that is not a plain name) are refused here.
    pub fn parse(text: &str, path: &str, dir: &Path) -> Result<NodeConfig, String> {
        let f: FileConfig = toml::from_str(text).map_err(|e| {
            let at = e.span().map_or(path.to_string(), |s| place(path, text, s.start));
            let what =
                qosnet_scenario::load::toml_message(e.message(), text, e.span().map_or(0, |s| s.start));
            format!("{at}: {what}")
        })?;
        let at = |s: &Spanned<String>| place(path, text, s.span().start);
        let required = |v: Option<Spanned<String>>, key: &str, form: &str| {
            let v = v.ok_or_else(|| format!("{path}: `{key} = {form}` is required"))?;
            if v.get_ref().trim().is_empty() {
                return Err(format!("{}: `{key}` is empty; give {form}", at(&v)));
            }
            Ok(v.into_inner())
        };
        let scenario = required(f.scenario, "scenario", "\"FILE\"")?;
        let node = required(f.node, "node", "\"NAME\"")?;
        // A path names a file this process writes or reads: relative to
        // the config's directory, or absolute.
        let file = |v: Option<Spanned<String>>, key: &str| -> Result<Option<PathBuf>, String> {
            let Some(v) = v else { return Ok(None) };
            if v.get_ref().is_empty() || v.get_ref().contains('\0') {
                return Err(format!("{}: `{key}` must be a file path", at(&v)));
            }
            Ok(Some(dir.join(v.get_ref())))
        };
        let netns = f
            .netns
            .map(|n| {
                qosnet_io::names::check_netns(n.get_ref())
                    .map(|_| n.get_ref().clone())
                    .map_err(|e| format!("{}: {e}", at(&n)))
            })
            .transpose()?;
        let ports = ports(&f.ports, &at)?;
        let device = f
            .device
            .map(|d| d.get_ref().parse().map_err(|e| format!("{}: {e}", at(&d))))
            .transpose()?;
        let mut devices = BTreeMap::new();
        for (k, d) in &f.devices {
            if !ports.contains_key(k) {
                return Err(format!(
                    "{}: devices.{k} names no port of [ports] (add `{k} = \"IFNAME\"` there or drop it here)",
                    at(d)
                ));
            }
            let kind = d
                .get_ref()
                .parse::<DeviceKind>()
                .map_err(|e| format!("{}: devices.{k}: {e}", at(d)))?;
            devices.insert(k.clone(), kind);
        }
        let xdp_attach = f
            .xdp_attach
            .map(|a| a.get_ref().parse().map_err(|e| format!("{}: {e}", at(&a))))
            .transpose()?;
        // CLOCK_REALTIME nanoseconds (labs write these for their nodes).
        let ns = |v: &Spanned<i64>, key: &str| -> Result<Instant, String> {
            u64::try_from(*v.get_ref()).map(Instant).map_err(|_| {
                format!(
                    "{}: `{key}` takes CLOCK_REALTIME nanoseconds (>= 0), not {}",
                    place(path, text, v.span().start),
                    v.get_ref()
                )
            })
        };
        let marks = f.marks.iter().map(|m| ns(m, "marks")).collect::<Result<_, _>>()?;
        let until = f.until.as_ref().map(|u| ns(u, "until")).transpose()?;
        let epoch = f.epoch.as_ref().map(|e| ns(e, "epoch")).transpose()?;
        // "" for a flow whose sender is its host.
        let flow_src = f
            .flow_src
            .iter()
            .map(|a| match a.get_ref().as_str() {
                "" => Ok(None),
                s => s
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("{}: flow_src `{s}` is not an IPv4 address (or \"\")", at(a))),
            })
            .collect::<Result<_, _>>()?;
        let crash_holding_token_after = f
            .crash_holding_token_after
            .map(|n| {
                u64::try_from(*n.get_ref())
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| {
                        format!(
                            "{}: `crash_holding_token_after` takes a count of token visits (>= 1), not {}",
                            place(path, text, n.span().start),
                            n.get_ref()
                        )
                    })
            })
            .transpose()?;
        Ok(NodeConfig {
            control: file(f.control, "control")?,
            crash_holding_token_after,
            scenario: dir.join(scenario),
            node,
            ports,
            netns,
            sets: f.set,
            emulate_wire: f.emulate_wire,
            emulate_cpu: f.emulate_cpu,
            report: file(f.report, "report")?,
            ready: file(f.ready, "ready")?,
            flow_src,
            device,
            devices,
            xdp_zero_copy: f.xdp_zero_copy,
            xdp_attach,
            marks,
            until,
            epoch,
        })
    }
    /// The places of node `i`'s ports from `[ports]`: every port's peer
    /// (neighbour, switch or segment) must be named, and nothing else.
    pub fn places(&self, sc: &Scenario, net: &Network, i: usize) -> Result<Vec<PortPlace>, String> {
        let mut out = Vec::new();
        for f in &net.nodes[i].ifaces {
            let peer = &sc.nodes[f.peer].name;
            let ifname = self.ports.get(peer).ok_or_else(|| {
                format!(
                    "[ports] lacks `{peer} = \"IFNAME\"` (the port of {} towards {peer})",
                    self.node
                )
            })?;
            out.push(PortPlace {
                ifname: ifname.clone(),
                netns: self.netns.clone(),
            });
        }
        for extra in self.devices.keys() {
            if !self.ports.contains_key(extra) {
                return Err(format!("[devices] names {extra}, which is not in [ports]"));
            }
        }
        for extra in self.ports.keys() {
            if !net.nodes[i]
                .ifaces
                .iter()
                .any(|f| &sc.nodes[f.peer].name == extra)
            {
                return Err(format!(
                    "[ports] names {extra}, which is not a neighbour of {}",
                    self.node
                ));
            }
        }
        Ok(out)
    }
}

/// `[ports]`: every interface a name Linux accepts, and no interface
/// given to two neighbours (one port each).
fn ports(
    given: &BTreeMap<String, Spanned<String>>,
    at: &impl Fn(&Spanned<String>) -> String,
) -> Result<BTreeMap<String, String>, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (peer, ifname) in given {
        qosnet_io::names::check_ifname(ifname.get_ref())
            .map_err(|e| format!("{}: ports.{peer}: {e}", at(ifname)))?;
        if let Some((other, _)) = out.iter().find(|(_, i)| *i == ifname.get_ref()) {
            return Err(format!(
                "{}: ports.{peer} and ports.{other} are both {}: each neighbour needs its own interface",
                at(ifname),
                ifname.get_ref()
            ));
        }
        out.insert(peer.clone(), ifname.get_ref().clone());
    }
    Ok(out)
}

/// Everything a node process writes on exit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeRun {
    pub node: NodeReport,
    pub driver: DriverReport,
}

/// Run one node as configured until `stop` returns true (or `cfg.until`);
/// returns its report and the driver's.
pub fn run(
    cfg: &NodeConfig,
    driver: DriverConfig,
    o: &OpenOptions,
    stop: impl Fn() -> bool,
    on_ready: impl FnOnce(&NodeHost<NetDevice>),
) -> Result<(NodeReport, DriverReport), String> {
    let path = cfg.scenario.to_string_lossy();
    let sc = qosnet_scenario::load_file(&path, &cfg.sets).map_err(|e| e.to_string())?;
    let net = Network::build(&sc).map_err(|e| format!("{}: {e}", sc.source))?;
    let i = sc
        .node_index(&cfg.node)
        .ok_or_else(|| format!("{}: no node named {}", sc.source, cfg.node))?;
    let setup = Setup::new(&sc, &net)?;
    let places = cfg.places(&sc, &net, i)?;
    let mut devices = o.devices.clone();
    devices.apply_node_config(&cfg.node, cfg.device, &cfg.devices);
    devices.xdp.zero_copy |= cfg.xdp_zero_copy;
    if let Some(a) = cfg.xdp_attach {
        devices.xdp.attach = a;
    }
    let o = OpenOptions {
        devices,
        emulate_wire: cfg.emulate_wire || o.emulate_wire,
        emulate_cpu: cfg.emulate_cpu || o.emulate_cpu,
        seed: sc.seed.wrapping_add(i as u64),
        ..o.clone()
    };
    let build = BuildOpts {
        static_peer_macs: false,
        flow_src: cfg.flow_src.clone(),
        epoch: cfg.epoch.unwrap_or_else(qosnet_io::clock::now),
    };
    let h = open(&sc, &net, &setup, i, &build, &places, &o)?;
    // Listening before the node says it is ready, so a lab's tools find
    // the socket as soon as the lab is up.
    let control = if let Some(p) = &cfg.control {
        let names = sc
            .nodes
            .iter()
            .filter_map(|n| match &n.kind {
                qosnet_scenario::NodeKind::Rether(r) => Some((n.name.clone(), r.id)),
                _ => None,
            })
            .collect();
        Some(crate::rethctl::ControlServer::start(p, names)?)
    } else {
        None
    };
    on_ready(&h);
    if let Some(r) = &cfg.ready {
        qosnet_io::rundir::replace(r, b"").map_err(|e| format!("ready file: {e}"))?;
    }
    let kind = sc.nodes[i].kind_name();
    let mut d = Driver::new(vec![h], driver);
    if let Some(c) = control {
        d.add_service(Box::new(c));
    }
    if let Some(n) = cfg.crash_holding_token_after {
        d.add_service(Box::new(crate::rethctl::CrashHoldingToken::new(n)));
    }
    d.set_marks(cfg.marks.clone());
    if let Some(hub) = &o.metrics {
        d.set_publish(hub.clone());
    }
    let mut snaps = Vec::new();
    d.run(stop, cfg.until, |_, d| {
        if let Some(h) = d.hosts.first() {
            snaps.push(snapshot(h));
        }
    });
    let dr = d.report();
    let mut rep = d.hosts.first().map(|h| report(h, kind)).unwrap_or_default();
    rep.snapshots = snaps;
    if let Some(p) = &cfg.report {
        let run = NodeRun {
            node: rep.clone(),
            driver: dr.clone(),
        };
        let text = serde_json::to_string_pretty(&run).map_err(|e| e.to_string())?;
        // Written whole then renamed, so a reader never sees half a
        // report; a new file of a random name, never through a link.
        qosnet_io::rundir::replace(p, text.as_bytes()).map_err(|e| format!("report: {e}"))?;
    }
    Ok((rep, dr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<NodeConfig, String> {
        NodeConfig::parse(text, "n.toml", Path::new("/cfg"))
    }

    #[test]
    fn devices_are_read_per_port_and_checked() {
        let c = config(
            "scenario = \"s.toml\"\nnode = \"R1\"\ndevice = \"af_xdp\"\n\
             [ports]\nR2 = \"eth0\"\nh1 = \"eth1\"\n[devices]\nR2 = \"af_packet\"\n",
        )
        .unwrap();
        assert_eq!(c.device, Some(DeviceKind::AfXdp));
        assert_eq!(c.devices.get("R2"), Some(&DeviceKind::AfPacket));
        assert!(!c.xdp_zero_copy && c.xdp_attach.is_none());
        let mut d = PortDevices::default();
        d.apply_node_config(&c.node, c.device, &c.devices);
        assert_eq!(d.kind_for("R1", "h1"), DeviceKind::AfXdp);
        assert_eq!(d.kind_for("R1", "R2"), DeviceKind::AfPacket);

        let bad = config("scenario = \"s.toml\"\nnode = \"R1\"\ndevice = \"dpdk\"\n").unwrap_err();
        assert!(
            bad.starts_with("n.toml:3:") && bad.contains("device `dpdk`"),
            "{bad}"
        );
        let c = config("scenario = \"s.toml\"\nnode = \"R1\"\nxdp_zero_copy = true\nxdp_attach = \"skb\"\n")
            .unwrap();
        assert!(c.xdp_zero_copy);
        assert_eq!(c.xdp_attach, Some(qosnet_io::xdp::AttachMode::Generic));
        let bad = config("scenario = \"s.toml\"\nnode = \"R1\"\n[ports]\nR2 = \"e0\"\n[devices]\nR2 = 3\n")
            .unwrap_err();
        assert!(bad.starts_with("n.toml:6:") && bad.contains("string"), "{bad}");
    }

    /// Every value the node would trip over later is refused when the
    /// file is read, with its line.
    #[test]
    fn bad_values_are_refused_with_their_line() {
        let head = "scenario = \"s.toml\"\nnode = \"R1\"\n";
        let refused = |body: &str, line: usize, what: &str| {
            let e = config(&format!("{head}{body}")).unwrap_err();
            assert!(
                e.starts_with(&format!("n.toml:{line}:")) && e.contains(what),
                "{body:?}: {e}"
            );
        };
        refused("colour = 1\n", 3, "unknown field `colour`");
        refused("emulate_wire = 1\n", 3, "boolean");
        refused("set = \"a=b\"\n", 3, "sequence");
        for bad in ["../eth0", "a/b", "", "sixteen-bytes-12", "eth0:1"] {
            refused(&format!("[ports]\nR2 = {bad:?}\n"), 4, "ports.R2: interface name");
        }
        refused("[ports]\nR2 = \"eth0\"\nR3 = \"eth0\"\n", 5, "are both eth0");
        for bad in ["../x", "a/b", "/run/netns/x", ""] {
            refused(&format!("netns = {bad:?}\n"), 3, "netns name");
        }
        refused("marks = [1, -5]\n", 3, "CLOCK_REALTIME nanoseconds");
        refused("until = -1\n", 3, "CLOCK_REALTIME nanoseconds");
        refused("crash_holding_token_after = 0\n", 3, "count of token visits");
        refused("flow_src = [\"\", \"10.0.0.300\"]\n", 3, "not an IPv4 address");
        refused("report = \"\"\n", 3, "file path");
        refused("[devices]\nR9 = \"af_xdp\"\n", 4, "devices.R9 names no port");
        refused("xdp_attach = \"turbo\"\n", 3, "XDP attach mode");
        let e = config("node = \"R1\"\n").unwrap_err();
        assert!(e.contains("n.toml: `scenario = \"FILE\"` is required"), "{e}");
        let e = config("scenario = \"s.toml\"\nnode = \" \"\n").unwrap_err();
        assert!(e.starts_with("n.toml:2:") && e.contains("`node` is empty"), "{e}");
    }

    /// The file a lab writes for each node process (every key, as
    /// `labrun::spawn_nodes` builds it with a `toml::Table`) reads back
    /// as written; relative paths are the config directory's.
    #[test]
    fn lab_written_configs_read_back() {
        let mut cfg = toml::Table::new();
        cfg.insert("scenario".into(), "/tmp/x/scenario.toml".into());
        cfg.insert("node".into(), "R1".into());
        cfg.insert("netns".into(), "qn-R1".into());
        let mut ports = toml::Table::new();
        ports.insert("h1".into(), "R1-h1".into());
        ports.insert("R2".into(), "R1-R2".into());
        cfg.insert("ports".into(), ports.into());
        let mut devs = toml::Table::new();
        devs.insert("h1".into(), DeviceKind::AfXdp.name().into());
        devs.insert("R2".into(), DeviceKind::AfPacket.name().into());
        cfg.insert("devices".into(), devs.into());
        cfg.insert("xdp_zero_copy".into(), true.into());
        cfg.insert(
            "xdp_attach".into(),
            qosnet_io::xdp::AttachMode::Native.name().into(),
        );
        cfg.insert("set".into(), vec![toml::Value::from("flow.f1.size=100")].into());
        cfg.insert("emulate_wire".into(), false.into());
        cfg.insert("emulate_cpu".into(), true.into());
        cfg.insert("report".into(), "R1.report.json".into());
        let srcs: Vec<toml::Value> = vec!["".into(), "10.0.0.3".into()];
        cfg.insert("flow_src".into(), srcs.into());
        cfg.insert("ready".into(), "/tmp/x/R1.ready".into());
        let marks: Vec<toml::Value> = vec![5i64.into(), 7i64.into()];
        cfg.insert("marks".into(), marks.into());
        cfg.insert("until".into(), 9i64.into());
        cfg.insert("epoch".into(), 3i64.into());
        cfg.insert("control".into(), "R1.ctl".into());
        cfg.insert("crash_holding_token_after".into(), 500i64.into());
        let c = config(&toml::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(c.scenario, Path::new("/tmp/x/scenario.toml"));
        assert_eq!((c.node.as_str(), c.netns.as_deref()), ("R1", Some("qn-R1")));
        assert_eq!(c.ports["R2"], "R1-R2");
        assert_eq!(c.devices["h1"], DeviceKind::AfXdp);
        assert!(c.xdp_zero_copy && c.emulate_cpu && !c.emulate_wire);
        assert_eq!(c.xdp_attach, Some(qosnet_io::xdp::AttachMode::Native));
        assert_eq!(c.sets, ["flow.f1.size=100"]);
        assert_eq!(c.report.as_deref(), Some(Path::new("/cfg/R1.report.json")));
        assert_eq!(c.flow_src, [None, Some("10.0.0.3".parse().unwrap())]);
        assert_eq!(c.marks, [Instant(5), Instant(7)]);
        assert_eq!((c.until, c.epoch), (Some(Instant(9)), Some(Instant(3))));
        assert_eq!(c.control.as_deref(), Some(Path::new("/cfg/R1.ctl")));
        assert_eq!(c.crash_holding_token_after, Some(500));
    }
}
