//! A network-namespace lab built from a plain description.
//!
//! [`Lab::up`] turns a [`LabSpec`] into one network namespace per node,
//! named `{prefix}-{node}`, joined by veth pairs. Everything is done with the
//! `ip` command (iproute2) — each step is a command a person could type, its
//! exit status is checked and its stderr lands in the error — plus a few
//! sysctl writes and ethtool ioctls done from a thread inside the namespace.
//!
//! What a lab sets up, and why:
//! - veth pairs are created directly inside their namespaces (never in the
//!   root namespace), so their names only have to be unique per node and a
//!   crash leaves nothing behind in the root namespace;
//! - deterministic MACs ([`MacAddr::local`] of the port number), so frames
//!   in captures read the same on every run;
//! - addresses only where the kernel must own them: host ends and
//!   [`NodeKind::KernelRouter`] ends. A [`NodeKind::Router`] (qosnet's
//!   userspace router) keeps its addresses in the spec: were they configured
//!   in the kernel, the kernel would answer ARP and ping beside qosnet;
//! - `ip_forward=0` in router namespaces, so the kernel does not also forward
//!   (1 only for `KernelRouter`, the baseline for benchmarks);
//! - rp_filter off (asymmetric routes through qosnet are legitimate);
//! - IPv6 off, so router solicitations and MLD reports do not appear on the
//!   wires and in the routers' counters;
//! - checksum, segmentation and receive offloads off, so AF_PACKET sees the
//!   frames the wire would carry (see [`qosnet_io::iface::OFFLOADS`]);
//! - a default route on each host via the router at the other end of its
//!   first link to a router, plus any routes the spec lists.
//!
//! A lab can be one machine's part of a lab split across machines
//! ([`LabSpec::part`], built from a placement file by
//! [`crate::placement`]): only the local nodes get namespaces, links with
//! both ends local stay veth pairs, and a link with one end local becomes a
//! Linux VXLAN tunnel (RFC 7348): the VXLAN device is created in the
//! namespace that holds the machine's underlay (its UDP socket lives
//! there, and stays there), then moved into the node's namespace under the
//! name the veth end would have had, with the same MAC. A tunnelled link's
//! MTU is the spec's, lowered to the underlay's MTU minus the 50 bytes of
//! VXLAN encapsulation when the underlay is too small for it.
//!
//! [`Lab::down`] and `Drop` delete the namespaces (which deletes the veths)
//! after ending processes still running in them; [`cleanup`] removes the
//! leftovers of a crashed run by prefix; [`install_signal_cleanup`] makes
//! SIGINT/SIGTERM/SIGHUP remove every live lab of the process.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use qosnet_core::route::Ipv4Prefix;
use qosnet_core::wire::MacAddr;

use qosnet_io::{iface, netns};

/// Prefix used when a description does not give one.
pub const DEFAULT_PREFIX: &str = "qn";

/// Suffix of the sender namespace a lab gives a host whose flows loop
/// back to it (`{host}_tx`; [`crate::labrun`] lays them out): a lab's
/// namespaces are its nodes' and these.
pub const SENDER_SUFFIX: &str = "_tx";

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("invalid lab description: {0}")]
    Invalid(String),
    #[error("namespace {0} already exists (a previous run left it? `qosnet lab down` removes leftovers)")]
    Exists(String),
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let context = context.into();
    move |source| LabError::Io { context, source }
}

/// `a.b.c.d/len` (a bare address means `/32`) from a lab description,
/// as core's one prefix type.
pub fn parse_net(s: &str) -> Result<Ipv4Prefix, LabError> {
    s.parse()
        .map_err(|_| LabError::Invalid(format!("bad IPv4 prefix {s:?} (want a.b.c.d/len)")))
}

/// What runs in a node's namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// An end system: the kernel's own UDP/IP stack, addresses configured,
    /// default route via its router.
    Host,
    /// qosnet's userspace router on AF_PACKET ports: no kernel addresses,
    /// kernel forwarding off.
    Router,
    /// The Linux kernel forwarding (addresses configured, `ip_forward=1`):
    /// the baseline that benchmarks compare qosnet against.
    KernelRouter,
    /// A Linux bridge (`br0`) joining every port of the node: a shared
    /// segment (whose stations then share a learning bridge rather than a
    /// bus: there are no collisions between veths), or a plain switch. No
    /// VLANs: the kernels qosnet is tested on lack bridge VLAN filtering
    /// (`CONFIG_BRIDGE_VLAN_FILTERING`), so switches with VLANs run as
    /// qosnet's own switch node on AF_PACKET ports instead.
    Bridge,
}

impl NodeKind {
    pub fn is_router(self) -> bool {
        matches!(self, NodeKind::Router | NodeKind::KernelRouter)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabNode {
    pub name: String,
    pub kind: NodeKind,
}

/// A point-to-point link: one veth pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabLink {
    pub a: String,
    pub b: String,
    pub a_addr: Option<Ipv4Prefix>,
    pub b_addr: Option<Ipv4Prefix>,
    /// IP MTU of both ends.
    pub mtu: u32,
    /// Transmit queue length of both ends (matters once a qdisc is attached;
    /// veth defaults to none).
    pub txqueuelen: u32,
}

impl LabLink {
    /// A link with MTU 1500 and txqueuelen 1000.
    pub fn new(a: &str, a_addr: Option<Ipv4Prefix>, b: &str, b_addr: Option<Ipv4Prefix>) -> Self {
        LabLink {
            a: a.into(),
            b: b.into(),
            a_addr,
            b_addr,
            mtu: 1500,
            txqueuelen: 1000,
        }
    }
}

/// A static route in one node's namespace (hosts and kernel routers only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabRoute {
    pub node: String,
    pub dst: Ipv4Prefix,
    pub via: Ipv4Addr,
}

/// A lab as plain data; the scenario loader maps scenario files onto it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabSpec {
    /// Namespace names are `{prefix}-{node}`: letters, digits and `_` only,
    /// so one prefix can never be the start of another followed by `-`.
    pub prefix: String,
    pub nodes: Vec<LabNode>,
    pub links: Vec<LabLink>,
    pub routes: Vec<LabRoute>,
    /// This machine's part of a lab split across machines; `None`: the
    /// whole lab is here.
    pub part: Option<LabPart>,
}

/// The part of a lab one machine builds: its nodes, and a VXLAN tunnel for
/// every link with exactly one end here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabPart {
    /// Name of this machine (for messages).
    pub machine: String,
    /// Nodes built on this machine.
    pub local: BTreeSet<String>,
    /// Namespace holding the machine's underlay (where VXLAN devices are
    /// created and their UDP sockets live); `None` is the namespace of this
    /// process — the host's own network on a real machine.
    pub underlay_netns: Option<String>,
    /// Per link index: its tunnel.
    pub tunnels: BTreeMap<usize, Tunnel>,
}

/// One VXLAN tunnel: a link whose ends are on different machines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tunnel {
    /// VXLAN network identifier, 1..2^24: the same on both machines.
    pub vni: u32,
    /// This machine's underlay address.
    pub local: Ipv4Addr,
    /// The other machine's underlay address.
    pub remote: Ipv4Addr,
    /// Underlay interface; `None`: the one the route to `remote` uses.
    pub dev: Option<String>,
    /// UDP destination port (4789, IANA's VXLAN port).
    pub dstport: u16,
}

/// Bytes VXLAN adds in front of the inner Ethernet frame on an IPv4
/// underlay: outer IPv4 (20) + UDP (8) + VXLAN (8) + inner Ethernet (14)
/// (RFC 7348 §5), so the inner IP MTU is the underlay's minus 50.
pub const VXLAN_OVERHEAD: u32 = 50;

impl LabPart {
    /// Whether `node` is built here.
    pub fn is_local(&self, node: &str) -> bool {
        self.local.contains(node)
    }
}

impl Default for LabSpec {
    fn default() -> Self {
        LabSpec::new(DEFAULT_PREFIX)
    }
}

impl LabSpec {
    pub fn new(prefix: &str) -> Self {
        LabSpec {
            prefix: prefix.into(),
            nodes: Vec::new(),
            links: Vec::new(),
            routes: Vec::new(),
            part: None,
        }
    }
    /// Add a node (builder style).
    pub fn node(mut self, name: &str, kind: NodeKind) -> Self {
        self.nodes.push(LabNode {
            name: name.into(),
            kind,
        });
        self
    }
    /// Add a link with MTU 1500; addresses as `a.b.c.d/len`, or `""` for
    /// none. Meant for literals in code and tests: it panics on a malformed
    /// address. Input from files goes through [`Ipv4Prefix::from_str`] and
    /// [`LabLink::new`] instead, which report errors.
    pub fn link(mut self, a: &str, a_addr: &str, b: &str, b_addr: &str) -> Self {
        let parse = |s: &str| -> Option<Ipv4Prefix> {
            (!s.is_empty()).then(|| s.parse().unwrap_or_else(|e| panic!("{e}")))
        };
        self.links.push(LabLink::new(a, parse(a_addr), b, parse(b_addr)));
        self
    }
    /// Add a static route.
    pub fn route(mut self, node: &str, dst: Ipv4Prefix, via: Ipv4Addr) -> Self {
        self.routes.push(LabRoute {
            node: node.into(),
            dst,
            via,
        });
        self
    }

    pub fn netns_name(&self, node: &str) -> String {
        format!("{}-{}", self.prefix, node)
    }

    fn kind_of(&self, node: &str) -> Option<NodeKind> {
        self.nodes.iter().find(|n| n.name == node).map(|n| n.kind)
    }

    /// Whether `node` is built on this machine (always, without a part).
    pub fn is_local(&self, node: &str) -> bool {
        self.part.as_ref().is_none_or(|p| p.is_local(node))
    }

    /// Check names, references and sizes without touching the system.
    pub fn validate(&self) -> Result<(), LabError> {
        let inv = |m: String| Err(LabError::Invalid(m));
        validate_prefix(&self.prefix)?;
        let mut seen = HashSet::new();
        for n in &self.nodes {
            let ok_chars = n
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if n.name.is_empty() || n.name.len() > 32 || !ok_chars {
                return inv(format!(
                    "node name {:?}: 1–32 letters, digits, '_' or '-'",
                    n.name
                ));
            }
            if !seen.insert(n.name.as_str()) {
                return inv(format!("node {:?} listed twice", n.name));
            }
        }
        for (i, l) in self.links.iter().enumerate() {
            for end in [&l.a, &l.b] {
                if self.kind_of(end).is_none() {
                    return inv(format!("link {i} names unknown node {end:?}"));
                }
            }
            if l.a == l.b {
                return inv(format!("link {i} joins {:?} to itself", l.a));
            }
            if !(68..=65535).contains(&l.mtu) {
                return inv(format!("link {i}: MTU {} outside 68..=65535", l.mtu));
            }
        }
        if let Some(part) = &self.part {
            for n in &part.local {
                if self.kind_of(n).is_none() {
                    return inv(format!("machine {}: unknown node {n:?}", part.machine));
                }
            }
            let mut vnis = HashMap::new();
            for (i, l) in self.links.iter().enumerate() {
                let crossing = part.is_local(&l.a) != part.is_local(&l.b);
                match (crossing, part.tunnels.get(&i)) {
                    (true, None) => {
                        return inv(format!(
                            "link {i} ({}–{}) crosses machines but has no tunnel",
                            l.a, l.b
                        ))
                    }
                    (false, Some(_)) => {
                        return inv(format!(
                            "link {i} ({}–{}) has a tunnel but does not cross machines",
                            l.a, l.b
                        ))
                    }
                    _ => {}
                }
                if let Some(t) = part.tunnels.get(&i) {
                    if t.vni == 0 || t.vni >= 1 << 24 {
                        return inv(format!("link {i}: VNI {} outside 1..16777215", t.vni));
                    }
                    if let Some(j) = vnis.insert(t.vni, i) {
                        return inv(format!("links {j} and {i} both have VNI {}", t.vni));
                    }
                }
            }
        }
        for r in &self.routes {
            match self.kind_of(&r.node) {
                None => return inv(format!("route on unknown node {:?}", r.node)),
                Some(NodeKind::Router) => {
                    return inv(format!(
                        "route on {:?}: qosnet routers take routes from their own config, not the kernel",
                        r.node
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

fn validate_prefix(prefix: &str) -> Result<(), LabError> {
    if prefix.is_empty()
        || prefix.len() > 16
        || !prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(LabError::Invalid(format!(
            "prefix {prefix:?}: 1–16 letters, digits or '_' (no '-')"
        )));
    }
    Ok(())
}

/// One end of a link, as created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub node: String,
    pub netns: String,
    pub ifname: String,
    pub mac: MacAddr,
    /// The address from the spec (configured in the kernel only on hosts and
    /// kernel routers).
    pub addr: Option<Ipv4Prefix>,
    pub mtu: u32,
    pub peer_node: String,
    pub peer_ifname: String,
    pub peer_mac: MacAddr,
    pub peer_addr: Option<Ipv4Prefix>,
    /// Index of the link in the spec.
    pub link: usize,
}

/// Deterministic interface names: `{node}-{peer}`, shortened to 15
/// characters, with a numeric suffix when two links of a node would
/// collide (parallel links, or names equal after shortening).
fn iface_names(spec: &LabSpec) -> Vec<(String, String)> {
    let mut taken: HashMap<&str, HashSet<String>> = HashMap::new();
    let pick = |node: &str, peer: &str, taken: &mut HashMap<&str, HashSet<String>>| {
        let mut base = format!("{node}-{peer}");
        if base.len() > iface::IFNAME_MAX {
            let n: String = node.chars().take(7).collect();
            let p: String = peer.chars().take(iface::IFNAME_MAX - 1 - n.len()).collect();
            base = format!("{n}-{p}");
        }
        let set = taken.get_mut(node).expect("every node has a set");
        let mut name = base.clone();
        let mut k = 1;
        while set.contains(&name) {
            let suffix = k.to_string();
            let keep = base.len().min(iface::IFNAME_MAX - suffix.len());
            name = format!("{}{suffix}", &base[..keep]);
            k += 1;
        }
        set.insert(name.clone());
        name
    };
    for n in &spec.nodes {
        taken.insert(&n.name, HashSet::new());
    }
    for l in &spec.links {
        taken.entry(&l.a).or_default();
        taken.entry(&l.b).or_default();
    }
    spec.links
        .iter()
        .map(|l| (pick(&l.a, &l.b, &mut taken), pick(&l.b, &l.a, &mut taken)))
        .collect()
}

/// The ports a spec yields: names from [`iface_names`], MACs
/// [`MacAddr::local`] of the port number (1, 2 for link 0; 3, 4 for link 1;
/// ...), so a lab's ports can be computed again without asking the kernel.
fn plan_ports(spec: &LabSpec) -> Vec<Port> {
    let mut out = Vec::with_capacity(2 * spec.links.len());
    for (i, (l, (a_if, b_if))) in spec.links.iter().zip(iface_names(spec)).enumerate() {
        let a_mac = MacAddr::local(2 * i as u32 + 1);
        let b_mac = MacAddr::local(2 * i as u32 + 2);
        out.push(Port {
            node: l.a.clone(),
            netns: spec.netns_name(&l.a),
            ifname: a_if.clone(),
            mac: a_mac,
            addr: l.a_addr,
            mtu: l.mtu,
            peer_node: l.b.clone(),
            peer_ifname: b_if.clone(),
            peer_mac: b_mac,
            peer_addr: l.b_addr,
            link: i,
        });
        out.push(Port {
            node: l.b.clone(),
            netns: spec.netns_name(&l.b),
            ifname: b_if,
            mac: b_mac,
            addr: l.b_addr,
            mtu: l.mtu,
            peer_node: l.a.clone(),
            peer_ifname: a_if,
            peer_mac: a_mac,
            peer_addr: l.a_addr,
            link: i,
        });
    }
    out
}

/// Every namespace of every live lab of this process, for the signal
/// handler (which cannot reach the `Lab` values themselves).
fn registry() -> &'static Mutex<BTreeMap<u64, Vec<String>>> {
    static R: OnceLock<Mutex<BTreeMap<u64, Vec<String>>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// Registry key of a new lab value.
fn next_id() -> u64 {
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

fn register(id: u64, ns: &str) {
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    r.entry(id).or_default().push(ns.to_string());
}

/// A lab that exists until [`Lab::down`] or drop.
#[derive(Debug)]
pub struct Lab {
    spec: LabSpec,
    id: u64,
    namespaces: Vec<String>,
    ports: Vec<Port>,
    /// The VXLAN ends of this machine's part, in link order.
    tunnels: Vec<TunnelInfo>,
    is_up: bool,
}

/// A VXLAN end as created: what results and `lab up` report.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TunnelInfo {
    /// Index of the link in the spec.
    pub link: usize,
    pub node: String,
    pub ifname: String,
    pub peer_node: String,
    pub vni: u32,
    pub local: Ipv4Addr,
    pub remote: Ipv4Addr,
    pub dstport: u16,
    /// Underlay interface the tunnel is bound to.
    pub dev: String,
    /// Its MTU.
    pub underlay_mtu: u32,
    /// IP MTU of the tunnelled link: the spec's, or the underlay's minus
    /// [`VXLAN_OVERHEAD`] if that is smaller.
    pub mtu: u32,
}

/// `ip ARGS`, in namespace `ns` when given.
fn ip_in(ns: Option<&str>, args: &[&str]) -> Result<String, LabError> {
    match ns {
        Some(ns) => {
            let mut v = vec!["-n", ns];
            v.extend_from_slice(args);
            ip(&v)
        }
        None => ip(args),
    }
}

/// The interface the route to `remote` leaves by, in `ns`.
fn route_dev(ns: Option<&str>, remote: Ipv4Addr) -> Result<String, LabError> {
    let out = ip_in(ns, &["-o", "route", "get", &remote.to_string()])?;
    let mut words = out.split_whitespace();
    while let Some(w) = words.next() {
        if w == "dev" {
            if let Some(d) = words.next() {
                return Ok(d.to_string());
            }
        }
    }
    Err(LabError::Invalid(format!(
        "no underlay route to {remote}{} (`ip route get {remote}` names no device)",
        ns.map(|n| format!(" in namespace {n}")).unwrap_or_default()
    )))
}

/// MTU of interface `dev` in `ns`.
fn link_mtu(ns: Option<&str>, dev: &str) -> Result<u32, LabError> {
    let out = ip_in(ns, &["-o", "link", "show", "dev", dev])?;
    let mut words = out.split_whitespace();
    while let Some(w) = words.next() {
        if w == "mtu" {
            if let Some(m) = words.next().and_then(|m| m.parse().ok()) {
                return Ok(m);
            }
        }
    }
    Err(LabError::Invalid(format!(
        "cannot read the MTU of {dev} from `ip link show`"
    )))
}

/// Create the VXLAN end of link `i` for port `p`: in the underlay
/// namespace (where its UDP socket stays), then moved into the node's
/// namespace under the port's name.
fn add_tunnel(
    p: &Port,
    i: usize,
    t: &Tunnel,
    underlay: Option<&str>,
    l: &LabLink,
) -> Result<TunnelInfo, LabError> {
    let dev = match &t.dev {
        Some(d) => d.clone(),
        None => route_dev(underlay, t.remote)?,
    };
    let underlay_mtu = link_mtu(underlay, &dev)?;
    let mtu = l.mtu.min(underlay_mtu.saturating_sub(VXLAN_OVERHEAD));
    if mtu < 68 {
        return Err(LabError::Invalid(format!(
            "link {i} ({}–{}): underlay {dev} has MTU {underlay_mtu}, too small for VXLAN (needs at least {})",
            l.a,
            l.b,
            68 + VXLAN_OVERHEAD
        )));
    }
    // A temporary name in the underlay namespace: unique there, as VNIs
    // are (the kernel refuses a second device with the same VNI and port).
    let tmp = format!("vx{}", t.vni);
    let (mac, mtu_s, qlen) = (p.mac.to_string(), mtu.to_string(), l.txqueuelen.to_string());
    let (vni, local, remote, port) = (
        t.vni.to_string(),
        t.local.to_string(),
        t.remote.to_string(),
        t.dstport.to_string(),
    );
    #[rustfmt::skip]
    let r = ip_in(underlay, &[
        "link", "add", &tmp, "address", &mac, "mtu", &mtu_s, "txqueuelen", &qlen,
        "type", "vxlan", "id", &vni, "local", &local, "remote", &remote,
        "dstport", &port, "dev", &dev,
    ]);
    if let Err(e) = r {
        let text = e.to_string();
        if text.contains("VNI") || text.contains("exists") {
            return Err(LabError::Invalid(format!(
                "VNI collision: link {i} ({}–{}) needs VNI {} on UDP port {}, but this machine already has a VXLAN device with it \
                 (another lab running? `vni_base` in the placement file moves this lab's VNIs): {text}",
                l.a, l.b, t.vni, t.dstport
            )));
        }
        return Err(e);
    }
    if let Err(e) = ip_in(
        underlay,
        &["link", "set", &tmp, "netns", &p.netns, "name", &p.ifname],
    ) {
        let _ = ip_in(underlay, &["link", "del", &tmp]);
        return Err(e);
    }
    Ok(TunnelInfo {
        link: i,
        node: p.node.clone(),
        ifname: p.ifname.clone(),
        peer_node: p.peer_node.clone(),
        vni: t.vni,
        local: t.local,
        remote: t.remote,
        dstport: t.dstport,
        dev,
        underlay_mtu,
        mtu,
    })
}

/// Run `ip ARGS`, failing with its stderr if it exits non-zero.
pub fn ip(args: &[&str]) -> Result<String, LabError> {
    Ok(qosnet_io::iproute::ip(args)?)
}

impl From<qosnet_io::iproute::IpError> for LabError {
    fn from(e: qosnet_io::iproute::IpError) -> LabError {
        use qosnet_io::iproute::IpError;
        match e {
            IpError::Failed { cmd, status, stderr } => LabError::Command { cmd, status, stderr },
            IpError::Spawn { cmd, source } => LabError::Io {
                context: format!("running `{cmd}`"),
                source,
            },
            IpError::Json { cmd, source } => LabError::Invalid(format!("`{cmd}`: {source}")),
        }
    }
}

fn check(out: Output, shown: &str) -> Result<Output, LabError> {
    if out.status.success() {
        Ok(out)
    } else {
        Err(LabError::Command {
            cmd: shown.to_string(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

impl Lab {
    /// Build the lab. On any error, whatever was already created is removed
    /// before the error is returned.
    pub fn up(spec: &LabSpec) -> Result<Lab, LabError> {
        spec.validate()?;
        let mut lab = Lab {
            spec: spec.clone(),
            id: next_id(),
            namespaces: Vec::new(),
            ports: Vec::new(),
            tunnels: Vec::new(),
            is_up: true,
        };
        // On error `lab` drops here and tears down what exists so far.
        lab.build()?;
        Ok(lab)
    }

    fn build(&mut self) -> Result<(), LabError> {
        let spec = self.spec.clone();
        let local: Vec<&LabNode> = spec.nodes.iter().filter(|n| spec.is_local(&n.name)).collect();
        // Refuse to adopt namespaces we did not create: they may belong to
        // another run that is still going.
        for n in &local {
            let ns = spec.netns_name(&n.name);
            if netns::exists(&ns) {
                return Err(LabError::Exists(ns));
            }
        }
        self.add_namespaces(&spec, &local)?;
        self.add_links(&spec)?;
        self.bridges()?;
        self.add_routes(&spec, &local)
    }

    /// A namespace per local node, with loopback up and its sysctls set.
    fn add_namespaces(&mut self, spec: &LabSpec, local: &[&LabNode]) -> Result<(), LabError> {
        for n in local {
            let ns = spec.netns_name(&n.name);
            // Registered first: a signal arriving between the two steps
            // must not leave an unregistered namespace behind.
            self.namespaces.push(ns.clone());
            register(self.id, &ns);
            if let Err(e) = ip(&["netns", "add", &ns]) {
                // Not ours after all (another run may have just made it):
                // forget it so the teardown of this failed `up` spares it.
                self.namespaces.pop();
                if let Some(v) = registry()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_mut(&self.id)
                {
                    v.retain(|n| *n != ns);
                }
                return Err(e);
            }
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            // Defaults first, so interfaces created later inherit them.
            let forward = if n.kind == NodeKind::KernelRouter {
                "1"
            } else {
                "0"
            };
            for (k, v) in [
                ("net.ipv6.conf.all.disable_ipv6", "1"),
                ("net.ipv6.conf.default.disable_ipv6", "1"),
                ("net.ipv4.conf.all.rp_filter", "0"),
                ("net.ipv4.conf.default.rp_filter", "0"),
                ("net.ipv4.ip_forward", forward),
            ] {
                netns::write_sysctl(&ns, k, v).map_err(io_err(format!("in {ns}")))?;
            }
        }
        Ok(())
    }

    /// Each link's veth pair (or, for a link with one end on another
    /// machine, its VXLAN tunnel), addressed and up.
    fn add_links(&mut self, spec: &LabSpec) -> Result<(), LabError> {
        // Ports come in pairs, a end then b end, in link order.
        let planned = plan_ports(spec);
        for (i, (l, pair)) in spec.links.iter().zip(planned.chunks(2)).enumerate() {
            let (a, b) = (&pair[0], &pair[1]);
            let (mtu, qlen) = (l.mtu.to_string(), l.txqueuelen.to_string());
            let here: Vec<Port> = match (spec.is_local(&a.node), spec.is_local(&b.node)) {
                (true, true) => {
                    let (a_mac, b_mac) = (a.mac.to_string(), b.mac.to_string());
                    #[rustfmt::skip]
                    ip(&[
                        "link", "add", &a.ifname, "address", &a_mac, "mtu", &mtu,
                        "txqueuelen", &qlen, "netns", &a.netns,
                        "type", "veth", "peer", "name", &b.ifname, "address", &b_mac,
                        "mtu", &mtu, "txqueuelen", &qlen, "netns", &b.netns,
                    ])?;
                    pair.to_vec()
                }
                (false, false) => continue,
                (a_here, _) => {
                    let mut p = if a_here { a.clone() } else { b.clone() };
                    let part = spec.part.as_ref().expect("remote ends only exist in a part");
                    let t = part
                        .tunnels
                        .get(&i)
                        .expect("validated: crossing links have tunnels");
                    let info = add_tunnel(&p, i, t, part.underlay_netns.as_deref(), l)?;
                    p.mtu = info.mtu;
                    self.tunnels.push(info);
                    vec![p]
                }
            };
            for p in &here {
                iface_setup(&p.netns, &p.ifname)?;
                let kernel_owns = spec.kind_of(&p.node) != Some(NodeKind::Router);
                if let (Some(a), true) = (p.addr, kernel_owns) {
                    ip(&["-n", &p.netns, "addr", "add", &a.to_string(), "dev", &p.ifname])?;
                }
                ip(&["-n", &p.netns, "link", "set", &p.ifname, "up"])?;
            }
            self.ports.extend(here);
        }
        Ok(())
    }

    /// The spec's routes, and a default route for each host via the router
    /// at the other end of its first link to one.
    fn add_routes(&self, spec: &LabSpec, local: &[&LabNode]) -> Result<(), LabError> {
        for r in spec.routes.iter().filter(|r| spec.is_local(&r.node)) {
            let ns = spec.netns_name(&r.node);
            ip(&[
                "-n",
                &ns,
                "route",
                "add",
                &route_dst(r.dst),
                "via",
                &r.via.to_string(),
            ])?;
        }
        for n in local.iter().filter(|n| n.kind == NodeKind::Host) {
            let has_default = spec.routes.iter().any(|r| r.node == n.name && r.dst.len == 0);
            if has_default {
                continue;
            }
            let via = self.ports.iter().find(|p| {
                p.node == n.name
                    && p.addr.is_some()
                    && spec.kind_of(&p.peer_node).is_some_and(NodeKind::is_router)
            });
            if let Some(Some(gw)) = via.map(|p| p.peer_addr) {
                let p = via.expect("checked above");
                ip(&[
                    "-n",
                    &p.netns,
                    "route",
                    "add",
                    "default",
                    "via",
                    &gw.addr.to_string(),
                    "dev",
                    &p.ifname,
                ])?;
            }
        }
        Ok(())
    }

    /// Join each [`NodeKind::Bridge`] node's ports with a Linux bridge.
    /// Spanning tree stays off (scenario topologies are trees) and so does
    /// multicast snooping (broadcast and multicast reach every port, as on
    /// a plain hub or switch).
    fn bridges(&mut self) -> Result<(), LabError> {
        let spec = self.spec.clone();
        let bridges = spec
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Bridge && spec.is_local(&n.name));
        for n in bridges {
            let ns = spec.netns_name(&n.name);
            #[rustfmt::skip]
            ip(&[
                "-n", &ns, "link", "add", "br0", "type", "bridge",
                "stp_state", "0", "mcast_snooping", "0",
            ])?;
            for p in self.ports.iter().filter(|p| p.node == n.name) {
                ip(&["-n", &ns, "link", "set", &p.ifname, "master", "br0"])?;
            }
            ip(&["-n", &ns, "link", "set", "br0", "up"])?;
        }
        Ok(())
    }

    /// Take charge of a lab that a previous process built from the same
    /// spec and left running ([`Lab::detach`]): `qosnet lab exec` and
    /// `qosnet lab down FILE` use it. Checks that every namespace and
    /// interface is there; builds nothing. Dropping the result removes the
    /// lab, so detach it again to leave it running.
    pub fn attach(spec: &LabSpec) -> Result<Lab, LabError> {
        spec.validate()?;
        for n in spec.nodes.iter().filter(|n| spec.is_local(&n.name)) {
            let ns = spec.netns_name(&n.name);
            if !netns::exists(&ns) {
                return Err(LabError::Invalid(format!(
                    "namespace {ns} does not exist (is the lab up?)"
                )));
            }
        }
        let mut ports = plan_ports(spec);
        ports.retain(|p| spec.is_local(&p.node));
        for p in &mut ports {
            netns::run_in(&p.netns, || iface::index(&p.ifname))
                .and_then(|r| r)
                .map_err(io_err(format!("lab {} not as described", spec.prefix)))?;
            if !spec.is_local(&p.peer_node) {
                // A tunnel's MTU may have been lowered for the underlay.
                p.mtu = netns::run_in(&p.netns, || iface::mtu(&p.ifname))
                    .and_then(|r| r)
                    .map_err(io_err(format!("MTU of {} in {}", p.ifname, p.netns)))?;
            }
        }
        let lab = Lab {
            spec: spec.clone(),
            id: next_id(),
            namespaces: spec
                .nodes
                .iter()
                .filter(|n| spec.is_local(&n.name))
                .map(|n| spec.netns_name(&n.name))
                .collect(),
            ports,
            tunnels: Vec::new(),
            is_up: true,
        };
        for ns in &lab.namespaces {
            register(lab.id, ns);
        }
        Ok(lab)
    }

    /// Leave the lab running after this value is gone (`qosnet lab up`);
    /// [`cleanup`] with the prefix, or [`Lab::attach`] then
    /// [`Lab::down`], removes it later. Returns the namespace names.
    pub fn detach(mut self) -> Vec<String> {
        self.is_up = false;
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
        std::mem::take(&mut self.namespaces)
    }

    pub fn spec(&self) -> &LabSpec {
        &self.spec
    }
    /// Namespace of a node, if the node is part of the lab (and, in a lab
    /// split across machines, on this machine).
    pub fn netns(&self, node: &str) -> Option<String> {
        self.spec
            .kind_of(node)
            .filter(|_| self.spec.is_local(node))
            .map(|_| self.spec.netns_name(node))
    }
    /// The VXLAN ends this machine created (empty unless the lab is split
    /// across machines, and after [`Lab::attach`]).
    pub fn tunnels(&self) -> &[TunnelInfo] {
        &self.tunnels
    }
    /// All ports, two per link in link order (a end, then b end).
    pub fn all_ports(&self) -> &[Port] {
        &self.ports
    }
    /// The ports of one node, in link order.
    pub fn ports(&self, node: &str) -> Vec<&Port> {
        self.ports.iter().filter(|p| p.node == node).collect()
    }
    /// The first port of `node` facing `peer`.
    pub fn port(&self, node: &str, peer: &str) -> Option<&Port> {
        self.ports.iter().find(|p| p.node == node && p.peer_node == peer)
    }

    /// A command that will run `program` inside the node's namespace
    /// (`ip netns exec`), for the caller to add arguments and spawn.
    pub fn command(&self, node: &str, program: &str) -> Result<Command, LabError> {
        let ns = self.netns(node).ok_or_else(|| match &self.spec.part {
            Some(p) if self.spec.kind_of(node).is_some() => LabError::Invalid(format!(
                "node {node:?} runs on another machine than {} (see the placement file)",
                p.machine
            )),
            _ => LabError::Invalid(format!("no node {node:?} in the lab")),
        })?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &ns, program]);
        Ok(c)
    }

    /// Run `argv` inside the node's namespace and wait for it; a non-zero
    /// exit is an error carrying its stderr.
    pub fn exec(&self, node: &str, argv: &[&str]) -> Result<Output, LabError> {
        let (prog, args) = argv
            .split_first()
            .ok_or_else(|| LabError::Invalid("empty command".into()))?;
        let mut c = self.command(node, prog)?;
        c.args(args).stdin(Stdio::null());
        let shown = format!("[{node}] {}", argv.join(" "));
        let out = c.output().map_err(io_err(format!("running `{shown}`")))?;
        check(out, &shown)
    }

    /// Remove everything the lab created. Errors are collected, not
    /// short-circuited: one stuck namespace must not keep the rest alive.
    pub fn down(mut self) -> Result<(), LabError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), LabError> {
        if !self.is_up {
            return Ok(());
        }
        self.is_up = false;
        let nss = std::mem::take(&mut self.namespaces);
        let r = remove_namespaces(&nss);
        registry()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
        r
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("qosnet lab: cleanup incomplete: {e}");
        }
    }
}

fn route_dst(d: Ipv4Prefix) -> String {
    if d.len == 0 {
        "default".into()
    } else {
        d.network().to_string()
    }
}

/// Per-interface settings that `default` sysctls may not have reached and
/// offloads, done from inside the namespace.
fn iface_setup(ns: &str, ifname: &str) -> Result<(), LabError> {
    netns::write_sysctl(ns, &format!("net.ipv6.conf.{ifname}.disable_ipv6"), "1")
        .map_err(io_err(format!("in {ns}")))?;
    netns::write_sysctl(ns, &format!("net.ipv4.conf.{ifname}.rp_filter"), "0")
        .map_err(io_err(format!("in {ns}")))?;
    netns::run_in(ns, || iface::disable_offloads(ifname))
        .and_then(|r| r)
        .map_err(io_err(format!("offloads of {ifname} in {ns}")))
}

/// End processes in the namespaces (TERM, then KILL after a second), then
/// delete the namespaces; deleting a namespace deletes its veth ends, and a
/// veth pair dies with either end.
fn remove_namespaces(nss: &[String]) -> Result<(), LabError> {
    let mut pids = Vec::new();
    for ns in nss {
        if let Ok(p) = netns::pids(ns) {
            pids.extend(p);
        }
    }
    kill_all(&pids);
    let mut first_err = None;
    for ns in nss {
        if !netns::exists(ns) {
            continue;
        }
        if let Err(e) = ip(&["netns", "del", ns]) {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

fn kill_all(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    use qosnet_io::process::{alive, kill, Signal};
    for &p in pids {
        // A pid found in one of our lab namespaces.
        let _ = kill(p, Signal::TERM);
    }
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(1) && pids.iter().any(|&p| alive(p)) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for &p in pids {
        if alive(p) {
            // The process ignored SIGTERM.
            let _ = kill(p, Signal::KILL);
        }
    }
}

/// Remove the namespaces of the given nodes of lab `prefix` (one
/// machine's part of a lab split across machines: `{prefix}-{node}` and a
/// split host's `{prefix}-{node}_tx`), with the processes in them, leaving
/// other machines' parts alone even when they share this kernel. Returns
/// the names removed.
pub fn cleanup_nodes(prefix: &str, nodes: &[String]) -> Result<Vec<String>, LabError> {
    validate_prefix(prefix)?;
    let mut want = HashSet::new();
    for n in nodes {
        want.insert(format!("{prefix}-{n}"));
        want.insert(format!("{prefix}-{n}{}", SENDER_SUFFIX));
    }
    let nss: Vec<String> = netns::list()
        .map_err(io_err("listing network namespaces"))?
        .into_iter()
        .filter(|n| want.contains(n))
        .collect();
    remove_namespaces(&nss)?;
    Ok(nss)
}

/// Remove every namespace named `{prefix}-…` (and only those), with the
/// processes in them: the leftovers of a run that crashed or was killed.
/// Returns the names removed.
pub fn cleanup(prefix: &str) -> Result<Vec<String>, LabError> {
    validate_prefix(prefix)?;
    let start = format!("{prefix}-");
    let nss: Vec<String> = netns::list()
        .map_err(io_err("listing network namespaces"))?
        .into_iter()
        .filter(|n| n.starts_with(&start))
        .collect();
    remove_namespaces(&nss)?;
    Ok(nss)
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// True once SIGINT, SIGTERM or SIGHUP arrived after
/// [`install_signal_cleanup`]. Drivers check it and return, so labs drop
/// and clean up on the normal path.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Catch SIGINT, SIGTERM and SIGHUP. The first sets [`interrupted`]; if the
/// process has not exited `grace` later — or a second signal comes — a
/// watcher thread removes every live lab of the process itself and exits
/// with status 128 + signal. Idempotent; returns the flag for drivers that
/// prefer to hold it.
pub fn install_signal_cleanup(grace: std::time::Duration) -> std::io::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    if let Some(f) = FLAG.get() {
        return Ok(f.clone());
    }
    let flag = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    let f2 = flag.clone();
    std::thread::Builder::new()
        .name("qosnet-signals".into())
        .spawn(move || {
            let Some(sig) = signals.forever().next() else {
                return;
            };
            INTERRUPTED.store(true, Ordering::SeqCst);
            f2.store(true, Ordering::SeqCst);
            let t0 = std::time::Instant::now();
            while t0.elapsed() < grace {
                if signals.pending().next().is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            cleanup_registered();
            std::process::exit(128 + sig);
        })?;
    Ok(FLAG.get_or_init(|| flag).clone())
}

/// Remove the namespaces of every live lab of this process.
fn cleanup_registered() {
    let all: Vec<String> = {
        let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *r).into_values().flatten().collect()
    };
    if let Err(e) = remove_namespaces(&all) {
        eprintln!("qosnet lab: cleanup incomplete: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{require_root, test_prefix, PrefixGuard};

    #[test]
    fn ipv4net_parses_and_masks() {
        let n: Ipv4Prefix = "10.1.2.3/24".parse().unwrap();
        assert_eq!(n.network().addr, Ipv4Addr::new(10, 1, 2, 0));
        assert!(n.contains(Ipv4Addr::new(10, 1, 2, 200)));
        assert!(!n.contains(Ipv4Addr::new(10, 1, 3, 1)));
        assert_eq!(n.to_string(), "10.1.2.3/24");
        assert_eq!(parse_net("1.2.3.4").unwrap().len, 32);
        assert!(parse_net("1.2.3.4/33").is_err());
        assert!(parse_net("x/3").is_err());
        assert!(Ipv4Prefix::DEFAULT.contains(Ipv4Addr::new(8, 8, 8, 8)));
    }

    #[test]
    fn iface_names_are_short_unique_and_stable() {
        let spec = LabSpec::new("qn")
            .node("h1", NodeKind::Host)
            .node("router_number_one", NodeKind::Router)
            .node("router_number_two", NodeKind::Router)
            .link("h1", "", "router_number_one", "")
            .link("router_number_one", "", "router_number_two", "")
            .link("router_number_one", "", "router_number_two", "");
        let names = iface_names(&spec);
        assert_eq!(names[0].0, "h1-router_numbe");
        assert_eq!(names[0].1, "router_-h1");
        assert_eq!(names[1].0, "router_-router_");
        assert_eq!(names[2].0, "router_-router1");
        for (a, b) in &names {
            assert!(a.len() <= 15 && b.len() <= 15, "{a} {b}");
        }
        assert_eq!(names, iface_names(&spec));
    }

    #[test]
    fn validation_rejects_bad_specs() {
        let ok = LabSpec::new("qn")
            .node("a", NodeKind::Host)
            .node("b", NodeKind::Host)
            .link("a", "10.0.0.1/24", "b", "10.0.0.2/24");
        ok.validate().unwrap();
        assert!(LabSpec {
            prefix: "q-n".into(),
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(LabSpec {
            prefix: "".into(),
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(ok.clone().node("a", NodeKind::Host).validate().is_err());
        assert!(ok.clone().node("a b", NodeKind::Host).validate().is_err());
        assert!(ok.clone().link("a", "", "zz", "").validate().is_err());
        assert!(ok.clone().link("a", "", "a", "").validate().is_err());
        let mut big = ok.clone();
        big.links[0].mtu = 70_000;
        assert!(big.validate().is_err());
        let r = ok.clone().node("r", NodeKind::Router);
        assert!(r
            .route("r", Ipv4Prefix::DEFAULT, Ipv4Addr::LOCALHOST)
            .validate()
            .is_err());
    }

    fn three_node(prefix: &str, middle: NodeKind) -> LabSpec {
        LabSpec::new(prefix)
            .node("h1", NodeKind::Host)
            .node("r", middle)
            .node("h2", NodeKind::Host)
            .link("h1", "198.18.1.1/24", "r", "198.18.1.254/24")
            .link("r", "198.18.2.254/24", "h2", "198.18.2.1/24")
    }

    fn ours(prefix: &str) -> Vec<String> {
        let start = format!("{prefix}-");
        netns::list()
            .unwrap()
            .into_iter()
            .filter(|n| n.starts_with(&start))
            .collect()
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn kernel_router_lab_forwards_udp_and_goes_away() {
        require_root();
        let prefix = test_prefix();
        let root_v6 = std::fs::read_to_string("/proc/sys/net/ipv6/conf/all/disable_ipv6");
        let lab = Lab::up(&three_node(&prefix, NodeKind::KernelRouter)).unwrap();
        // Sysctls written from a thread inside a lab namespace did not leak
        // into the namespace this process runs in.
        assert_eq!(
            std::fs::read_to_string("/proc/sys/net/ipv6/conf/all/disable_ipv6").ok(),
            root_v6.ok()
        );
        assert_eq!(ours(&prefix).len(), 3);
        // A UDP datagram through the kernel router, with sockets opened in
        // the host namespaces from this thread (no ping binary needed).
        let rx = netns::run_in(&lab.netns("h2").unwrap(), || {
            std::net::UdpSocket::bind("198.18.2.1:9000")
        })
        .unwrap()
        .unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(3)))
            .unwrap();
        let tx = netns::run_in(&lab.netns("h1").unwrap(), || {
            std::net::UdpSocket::bind("0.0.0.0:0")
        })
        .unwrap()
        .unwrap();
        tx.send_to(b"through r", "198.18.2.1:9000").unwrap();
        let mut buf = [0u8; 64];
        let (n, from) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"through r");
        assert_eq!(from.ip(), Ipv4Addr::new(198, 18, 1, 1));
        // `exec` runs commands in the namespace and reports failures.
        let out = lab.exec("h1", &["ip", "-o", "link", "show", "h1-r"]).unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("mtu 1500"));
        let e = lab
            .exec("h1", &["ip", "link", "show", "nonexistent0"])
            .unwrap_err();
        assert!(e.to_string().contains("nonexistent0"), "{e}");
        // The settings the module doc promises.
        let r = lab.netns("r").unwrap();
        assert_eq!(netns::read_sysctl(&r, "net.ipv4.ip_forward").unwrap(), "1");
        let h1 = lab.netns("h1").unwrap();
        assert_eq!(netns::read_sysctl(&h1, "net.ipv4.ip_forward").unwrap(), "0");
        let p = lab.port("h1", "r").unwrap();
        assert_eq!(p.ifname, "h1-r");
        let key = format!("net.ipv6.conf.{}.disable_ipv6", p.ifname);
        assert_eq!(netns::read_sysctl(&h1, &key).unwrap(), "1");
        let offl = netns::run_in(&h1, || iface::offloads(&p.ifname))
            .unwrap()
            .unwrap();
        assert!(offl.iter().all(|(_, on)| !on), "{offl:?}");
        let mac = netns::run_in(&h1, || iface::mac(&p.ifname)).unwrap().unwrap();
        assert_eq!(mac, p.mac);
        assert_eq!(lab.port("r", "h1").unwrap().peer_mac, p.mac);
        let route = lab.exec("h1", &["ip", "route", "show", "default"]).unwrap();
        assert!(String::from_utf8_lossy(&route.stdout).contains("via 198.18.1.254"));
        lab.down().unwrap();
        assert!(ours(&prefix).is_empty());
    }

    /// A Linux bridge joins three hosts: unicast through it reaches only
    /// its destination once the bridge has learned, broadcasts (ARP) reach
    /// everyone.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn bridge_joins_its_ports() {
        require_root();
        let prefix = test_prefix();
        let _g = crate::testkit::PrefixGuard(prefix.clone());
        let spec = LabSpec::new(&prefix)
            .node("a", NodeKind::Host)
            .node("b", NodeKind::Host)
            .node("c", NodeKind::Host)
            .node("sw", NodeKind::Bridge)
            .link("a", "198.18.5.1/24", "sw", "")
            .link("b", "198.18.5.2/24", "sw", "")
            .link("c", "198.18.5.3/24", "sw", "");
        let lab = Lab::up(&spec).unwrap();
        let sock = |node: &str, addr: &str| {
            let s = netns::run_in(&lab.netns(node).unwrap(), || std::net::UdpSocket::bind(addr))
                .unwrap()
                .unwrap();
            s.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            s
        };
        let rb = sock("b", "198.18.5.2:9000");
        let rc = sock("c", "198.18.5.3:9000");
        let ta = sock("a", "198.18.5.1:0");
        let mut buf = [0u8; 64];
        for (rx, dst) in [(&rb, "198.18.5.2:9000"), (&rc, "198.18.5.3:9000")] {
            ta.send_to(b"via the bridge", dst).unwrap();
            let (n, _) = rx.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"via the bridge");
        }
        let out = lab
            .exec("sw", &["ip", "-o", "link", "show", "master", "br0"])
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
        lab.down().unwrap();
        assert!(ours(&prefix).is_empty());
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn userspace_router_has_no_kernel_addresses() {
        require_root();
        let prefix = test_prefix();
        let lab = Lab::up(&three_node(&prefix, NodeKind::Router)).unwrap();
        let out = lab.exec("r", &["ip", "-4", "-o", "addr", "show"]).unwrap();
        let s = String::from_utf8_lossy(&out.stdout);
        assert!(!s.contains("198.18."), "{s}");
        let r = lab.netns("r").unwrap();
        assert_eq!(netns::read_sysctl(&r, "net.ipv4.ip_forward").unwrap(), "0");
        // Hosts still point at the router's spec address.
        let route = lab.exec("h2", &["ip", "route", "show", "default"]).unwrap();
        assert!(String::from_utf8_lossy(&route.stdout).contains("via 198.18.2.254"));
        drop(lab);
        assert!(ours(&prefix).is_empty());
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn failed_up_leaves_nothing_and_existing_names_are_refused() {
        require_root();
        let prefix = test_prefix();
        let _guard = PrefixGuard(prefix.clone());
        // A route via an unreachable gateway makes `ip route add` fail after
        // the namespaces exist.
        let spec = three_node(&prefix, NodeKind::KernelRouter).route(
            "h1",
            "203.0.113.0/24".parse().unwrap(),
            Ipv4Addr::new(192, 0, 2, 1),
        );
        let e = Lab::up(&spec).unwrap_err();
        assert!(matches!(e, LabError::Command { .. }), "{e}");
        assert!(e.to_string().contains("route add"), "{e}");
        assert!(ours(&prefix).is_empty());

        let ns = format!("{prefix}-h1");
        ip(&["netns", "add", &ns]).unwrap();
        let e = Lab::up(&three_node(&prefix, NodeKind::Router)).unwrap_err();
        assert!(matches!(e, LabError::Exists(ref n) if *n == ns), "{e}");
        // The foreign namespace was not touched by the failed up.
        assert!(netns::exists(&ns));
        assert_eq!(cleanup(&prefix).unwrap(), vec![ns]);
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn cleanup_matches_prefix_exactly_and_ends_processes() {
        require_root();
        let prefix = test_prefix();
        let _guard = PrefixGuard(prefix.clone());
        let other = format!("{prefix}z");
        let _guard2 = PrefixGuard(other.clone());
        let lab = Lab::up(&three_node(&prefix, NodeKind::Router)).unwrap();
        let neighbour = format!("{other}-x");
        ip(&["netns", "add", &neighbour]).unwrap();
        let mut child = lab.command("h1", "sleep").unwrap().arg("30").spawn().unwrap();
        // Wait until the child has entered the namespace.
        let ns = lab.netns("h1").unwrap();
        for _ in 0..200 {
            if !netns::pids(&ns).unwrap().is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Simulate a crash: the Lab value is forgotten, not dropped (and
        // its registry entry dropped, as a dead process would lose it).
        let id = lab.id;
        std::mem::forget(lab);
        registry().lock().unwrap().remove(&id);
        let mut removed = cleanup(&prefix).unwrap();
        removed.sort();
        assert_eq!(removed.len(), 3, "{removed:?}");
        assert!(ours(&prefix).is_empty());
        assert!(netns::exists(&neighbour), "cleanup touched another prefix");
        let st = child.wait().unwrap();
        assert!(!st.success(), "sleep should have been ended, got {st}");
        cleanup(&other).unwrap();
        assert!(!netns::exists(&neighbour));
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn detach_then_attach_then_down() {
        require_root();
        let prefix = test_prefix();
        let _guard = PrefixGuard(prefix.clone());
        let spec = three_node(&prefix, NodeKind::KernelRouter);
        assert!(Lab::attach(&spec).is_err(), "attached to a lab that is not up");
        let lab = Lab::up(&spec).unwrap();
        let ports = lab.all_ports().to_vec();
        let mut nss = lab.detach();
        nss.sort();
        assert_eq!(nss, ours(&prefix), "detach must leave the lab running");
        let lab = Lab::attach(&spec).unwrap();
        assert_eq!(lab.all_ports(), &ports[..]);
        let out = lab.exec("h2", &["ip", "-o", "addr", "show", "h2-r"]).unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("198.18.2.1/24"));
        lab.down().unwrap();
        assert!(ours(&prefix).is_empty());
    }

    /// Two namespaces play two machines joined by an underlay veth (MTU
    /// 1500); a host-to-host link split between them is a VXLAN tunnel
    /// with the MTU lowered by 50 bytes, a UDP datagram crosses it, and
    /// each part's teardown leaves the machines as they were.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn a_link_across_machines_is_a_vxlan_tunnel() {
        require_root();
        let prefix = test_prefix();
        let _guard = PrefixGuard(prefix.clone());
        // The machines are not lab namespaces: their own guard.
        struct Machines(Vec<String>);
        impl Drop for Machines {
            fn drop(&mut self) {
                let _ = remove_namespaces(&self.0);
            }
        }
        let (m1, m2) = (format!("{prefix}m1"), format!("{prefix}m2"));
        let _machines = Machines(vec![m1.clone(), m2.clone()]);
        ip(&["netns", "add", &m1]).unwrap();
        ip(&["netns", "add", &m2]).unwrap();
        ip(&[
            "-n", &m1, "link", "add", "ul0", "type", "veth", "peer", "name", "ul0", "netns", &m2,
        ])
        .unwrap();
        for (m, a) in [(&m1, "192.0.2.1/24"), (&m2, "192.0.2.2/24")] {
            ip(&["-n", m, "addr", "add", a, "dev", "ul0"]).unwrap();
            ip(&["-n", m, "link", "set", "ul0", "up"]).unwrap();
        }
        let whole = LabSpec::new(&prefix)
            .node("a", NodeKind::Host)
            .node("b", NodeKind::Host)
            .link("a", "198.18.9.1/24", "b", "198.18.9.2/24");
        let part = |me: &str, ns: &str, local: Ipv4Addr, remote: Ipv4Addr| {
            let mut s = whole.clone();
            s.part = Some(LabPart {
                machine: ns.into(),
                local: [me.to_string()].into(),
                underlay_netns: Some(ns.into()),
                tunnels: [(
                    0,
                    Tunnel {
                        vni: 4242,
                        local,
                        remote,
                        dev: None,
                        dstport: 4789,
                    },
                )]
                .into(),
            });
            s
        };
        let (u1, u2) = (Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2));
        let la = Lab::up(&part("a", &m1, u1, u2)).unwrap();
        let lb = Lab::up(&part("b", &m2, u2, u1)).unwrap();
        assert_eq!(ours(&prefix).len(), 2);
        assert!(la.netns("b").is_none(), "b is on the other machine");
        let t = &la.tunnels()[0];
        assert_eq!(
            (t.vni, t.dev.as_str(), t.underlay_mtu, t.mtu),
            (4242, "ul0", 1500, 1450)
        );
        assert_eq!(la.ports("a")[0].mtu, 1450);
        let out = la.exec("a", &["ip", "-d", "-o", "link", "show", "a-b"]).unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("vxlan id 4242") && text.contains("mtu 1450"),
            "{text}"
        );
        let rx = netns::run_in(&lb.netns("b").unwrap(), || {
            std::net::UdpSocket::bind("198.18.9.2:9000")
        })
        .unwrap()
        .unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(3)))
            .unwrap();
        let tx = netns::run_in(&la.netns("a").unwrap(), || std::net::UdpSocket::bind("0.0.0.0:0"))
            .unwrap()
            .unwrap();
        let mut buf = [0u8; 64];
        // The first datagram may wait for ARP across the tunnel.
        tx.send_to(b"over vxlan", "198.18.9.2:9000").unwrap();
        let (n, from) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(
            (&buf[..n], from.ip()),
            (&b"over vxlan"[..], std::net::IpAddr::from([198, 18, 9, 1]))
        );
        // A second lab wanting the same VNI on this machine is refused
        // with the hint, and leaves nothing behind.
        let other = test_prefix();
        let _g2 = PrefixGuard(other.clone());
        let mut clash = part("a", &m1, u1, u2);
        clash.prefix = other.clone();
        let e = Lab::up(&clash).unwrap_err().to_string();
        assert!(e.contains("VNI collision") && e.contains("vni_base"), "{e}");
        assert!(ours(&other).is_empty());
        la.down().unwrap();
        lb.down().unwrap();
        assert!(ours(&prefix).is_empty());
        for m in [&m1, &m2] {
            let left = ip(&["-n", m, "-o", "link", "show", "type", "vxlan"]).unwrap();
            assert!(left.trim().is_empty(), "{m}: {left}");
        }
    }

    /// Helper run as a child process by `signal_removes_labs`.
    #[test]
    #[ignore = "helper for signal_removes_labs; runs in a child process"]
    fn manual_signal_child() {
        let Ok(prefix) = std::env::var("QOSNET_SIGNAL_CHILD") else {
            return;
        };
        install_signal_cleanup(std::time::Duration::from_millis(300)).unwrap();
        let _lab = Lab::up(&three_node(&prefix, NodeKind::Router)).unwrap();
        println!("lab-ready");
        // A driver stuck somewhere that never checks `interrupted()`: the
        // watcher thread must clean up on its own.
        std::thread::sleep(std::time::Duration::from_secs(30));
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn signal_removes_labs() {
        use std::io::{BufRead, BufReader};
        require_root();
        let prefix = test_prefix();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "lab::tests::manual_signal_child",
                "--ignored",
                "--nocapture",
            ])
            .env("QOSNET_SIGNAL_CHILD", &prefix)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Guard: whatever happens below, the child and its lab go away.
        struct Reap(std::process::Child, String);
        impl Drop for Reap {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
                let _ = cleanup(&self.1);
            }
        }
        let stdout = child.stdout.take().unwrap();
        let mut reap = Reap(child, prefix.clone());
        let mut ready = false;
        for line in BufReader::new(stdout).lines() {
            if line.unwrap().contains("lab-ready") {
                ready = true;
                break;
            }
        }
        assert!(ready, "child never built its lab");
        assert_eq!(ours(&prefix).len(), 3);
        qosnet_io::process::kill(reap.0.id(), qosnet_io::process::Signal::TERM).unwrap();
        let st = reap.0.wait().unwrap();
        assert_eq!(st.code(), Some(128 + libc::SIGTERM), "{st}");
        assert!(ours(&prefix).is_empty());
    }
}
