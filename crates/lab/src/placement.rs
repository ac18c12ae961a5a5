//! Placement files: which machine runs which nodes of a lab split across
//! machines, and how the links that cross machines become VXLAN tunnels
//! (RFC 7348), the way containerlab's `tools vxlan` and netlab's
//! multi-server setups join hosts.
//!
//! ```toml
//! dstport = 4789          # optional: UDP port of the tunnels (IANA's VXLAN port)
//! vni_base = 70000        # optional: VNI of link i is vni_base + i
//!
//! [machine.m1]
//! underlay = "192.0.2.1"  # this machine's address on the network joining the machines
//! dev = "eth1"            # optional: underlay interface (default: the route's)
//! nodes = ["h1", "R1"]
//!
//! [machine.m2]
//! underlay = "192.0.2.2"
//! nodes = ["R2", "h2"]
//! ```
//!
//! Every machine reads the same file and the same scenario and derives the
//! same tunnels without talking to the others: link `i` of the scenario
//! (in file order) that joins nodes on two machines is VNI `vni_base + i`.
//! Without `vni_base` the base is derived from the scenario's name
//! ([`default_vni_base`]), so two different labs on the same machines
//! rarely collide; when they do, the kernel refuses the second device and
//! the error says to set `vni_base`.
//!
//! `netns = "NAME"` in a machine makes that machine's network the named
//! namespace instead of the namespace `qosnet` runs in: that is how one
//! host plays several machines in tests (the underlay then lives in those
//! namespaces, and so do the tunnels' UDP sockets).
//!
//! A lab split across machines measures a flow where its ends are:
//! [`merge`] combines the results each machine wrote into one.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use qosnet_scenario::results::{FlowResult, Results};
use serde::Deserialize;

use crate::lab::{LabPart, LabSpec, Tunnel};

/// IANA's VXLAN UDP port (RFC 7348 §5).
pub const VXLAN_PORT: u16 = 4789;

/// VNIs a lab gets when the base is derived: links 0..4095.
pub const VNI_BLOCK: u32 = 4096;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    dstport: Option<toml::Spanned<u16>>,
    vni_base: Option<toml::Spanned<u32>>,
    #[serde(default)]
    machine: BTreeMap<String, toml::Spanned<FileMachine>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMachine {
    underlay: toml::Spanned<String>,
    dev: Option<toml::Spanned<String>>,
    netns: Option<toml::Spanned<String>>,
    nodes: Vec<toml::Spanned<String>>,
}

/// One machine of a placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    pub name: String,
    /// Its address on the underlay: the local end of its tunnels, the
    /// remote end of the others'.
    pub underlay: Ipv4Addr,
    /// Underlay interface; `None`: the interface of the route to the peer.
    pub dev: Option<String>,
    /// The namespace that is this machine's network (one-host tests);
    /// `None`: the namespace `qosnet` runs in.
    pub netns: Option<String>,
    /// Scenario nodes it runs.
    pub nodes: Vec<String>,
    /// Line of `[machine.NAME]` and of each node name, for messages.
    line: usize,
    node_lines: Vec<usize>,
}

/// A parsed placement file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The file, as named in messages.
    pub path: String,
    pub dstport: u16,
    /// `vni_base` and its line, when the file gives one.
    vni_base: Option<(u32, usize)>,
    /// In name order.
    pub machines: Vec<Machine>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The VNI base of a scenario without `vni_base`: a block of
/// [`VNI_BLOCK`] VNIs chosen by a hash (FNV-1a) of the scenario's name,
/// between 4096 and 16 M, the same on every machine.
pub fn default_vni_base(scenario: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in scenario.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    // 1 + (h % 4000) blocks: 4096 ..= 16_384_000 + 4095 < 2^24.
    VNI_BLOCK * (1 + h % 4000)
}

/// An underlay address is a unicast address another machine can reach:
/// not 0.0.0.0, broadcast, multicast, class E or loopback.
fn check_underlay(a: Ipv4Addr) -> Result<(), String> {
    let why = if a.is_unspecified() {
        "is unspecified"
    } else if a.is_broadcast() {
        "is the broadcast address"
    } else if a.is_multicast() {
        "is multicast"
    } else if a.octets()[0] >= 240 {
        "is reserved (240.0.0.0/4)"
    } else if a.is_loopback() {
        "is loopback, which no other machine reaches"
    } else {
        return Ok(());
    };
    Err(format!(
        "{a} {why}: give this machine's unicast address on the network joining the machines"
    ))
}

impl Placement {
    /// Read and parse a placement file.
    pub fn load(path: &std::path::Path) -> Result<Placement, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Placement::parse(&text, &path.display().to_string())
    }

    /// Parse placement text; `path` names it in messages (`path:line: ...`).
    pub fn parse(text: &str, path: &str) -> Result<Placement, String> {
        let doc: FileDoc = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| format!(":{}", line_of(text, s.start)));
            let at = e.span().map_or(0, |s| s.start);
            let what = qosnet_scenario::load::toml_message(e.message(), text, at);
            format!("{path}{}: {what}", line.unwrap_or_default())
        })?;
        let at = |off: usize| format!("{path}:{}", line_of(text, off));
        if doc.machine.is_empty() {
            return Err(format!(
                "{path}: no machines (add a [machine.NAME] table with `underlay` and `nodes` per machine)"
            ));
        }
        let mut machines: Vec<Machine> = Vec::new();
        let mut placed: BTreeMap<String, (String, usize)> = BTreeMap::new();
        for (name, m) in &doc.machine {
            let line = line_of(text, m.span().start);
            let m = m.get_ref();
            let ok_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !ok_name {
                return Err(format!(
                    "{path}:{line}: machine name {name:?}: letters, digits, '_' or '-'"
                ));
            }
            let underlay: Ipv4Addr = m.underlay.get_ref().parse().map_err(|_| {
                format!(
                    "{}: machine {name}: underlay {:?} is not an IPv4 address (this machine's address on the network joining the machines)",
                    at(m.underlay.span().start),
                    m.underlay.get_ref()
                )
            })?;
            check_underlay(underlay)
                .map_err(|e| format!("{}: machine {name}: underlay {e}", at(m.underlay.span().start)))?;
            if let Some(o) = machines.iter().find(|o| o.underlay == underlay) {
                return Err(format!(
                    "{}: machines {} and {name} have the same underlay address {underlay}",
                    at(m.underlay.span().start),
                    o.name
                ));
            }
            if m.nodes.is_empty() {
                return Err(format!(
                    "{path}:{line}: machine {name} runs no nodes (list its scenario nodes in `nodes = [...]`, or remove the machine)"
                ));
            }
            let dev = m.dev.as_ref().map(|d| {
                qosnet_io::names::check_ifname(d.get_ref())
                    .map(|_| d.get_ref().clone())
                    .map_err(|e| format!("{}: machine {name}: dev: {e}", at(d.span().start)))
            });
            let netns = m.netns.as_ref().map(|n| {
                qosnet_io::names::check_netns(n.get_ref())
                    .map(|_| n.get_ref().clone())
                    .map_err(|e| format!("{}: machine {name}: {e}", at(n.span().start)))
            });
            let mut nodes = Vec::new();
            let mut node_lines = Vec::new();
            for n in &m.nodes {
                let nl = line_of(text, n.span().start);
                if let Some((other, ol)) = placed.get(n.get_ref()) {
                    return Err(format!(
                        "{path}:{nl}: node {:?} is placed twice: on {other} (line {ol}) and on {name}",
                        n.get_ref()
                    ));
                }
                placed.insert(n.get_ref().clone(), (name.clone(), nl));
                nodes.push(n.get_ref().clone());
                node_lines.push(nl);
            }
            machines.push(Machine {
                name: name.clone(),
                underlay,
                dev: dev.transpose()?,
                netns: netns.transpose()?,
                nodes,
                line,
                node_lines,
            });
        }
        let vni_base = doc
            .vni_base
            .map(|v| (*v.get_ref(), line_of(text, v.span().start)));
        if let Some((b, l)) = vni_base {
            if b == 0 || b >= 1 << 24 {
                return Err(format!(
                    "{path}:{l}: vni_base {b} outside 1..16777215 (VNIs are 24 bits)"
                ));
            }
        }
        let dstport = match &doc.dstport {
            None => VXLAN_PORT,
            Some(p) if *p.get_ref() == 0 => {
                return Err(format!(
                    "{}: dstport 0 is not a UDP port (1..65535; default {VXLAN_PORT}, IANA's VXLAN port)",
                    at(p.span().start)
                ))
            }
            Some(p) => *p.get_ref(),
        };
        Ok(Placement {
            path: path.to_string(),
            dstport,
            vni_base,
            machines,
        })
    }

    /// The machine called `name`.
    pub fn machine(&self, name: &str) -> Result<&Machine, String> {
        self.machines.iter().find(|m| m.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.machines.iter().map(|m| m.name.as_str()).collect();
            format!(
                "{}: no machine {name:?} (machines: {})",
                self.path,
                names.join(", ")
            )
        })
    }

    /// The machine that runs scenario node `node`.
    pub fn machine_of(&self, node: &str) -> Option<&Machine> {
        self.machines.iter().find(|m| m.nodes.iter().any(|n| n == node))
    }

    /// Check the placement against a scenario's node names: every node on
    /// exactly one machine (twice is refused when parsing), no unknown ones.
    pub fn check(&self, nodes: &[&str]) -> Result<(), String> {
        for m in &self.machines {
            for (n, l) in m.nodes.iter().zip(&m.node_lines) {
                if !nodes.contains(&n.as_str()) {
                    return Err(format!(
                        "{}:{l}: machine {}: the scenario has no node {n:?} (nodes: {})",
                        self.path,
                        m.name,
                        nodes.join(", ")
                    ));
                }
            }
        }
        let missing: Vec<&str> = nodes
            .iter()
            .copied()
            .filter(|n| self.machine_of(n).is_none())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "{}: node{} {} on no machine (add {} to some machine's `nodes`)",
                self.path,
                if missing.len() > 1 { "s are" } else { " is" },
                missing.join(", "),
                if missing.len() > 1 { "them" } else { "it" }
            ));
        }
        Ok(())
    }

    /// The VNI of link 0 for a scenario with `links` links: `vni_base`, or
    /// [`default_vni_base`] of the scenario name.
    pub fn vni_base(&self, scenario: &str, links: usize) -> Result<u32, String> {
        let (base, limit, place) = match self.vni_base {
            Some((b, l)) => (b, (1u32 << 24) - b, format!("{}:{l}", self.path)),
            None => (default_vni_base(scenario), VNI_BLOCK, self.path.clone()),
        };
        if links as u64 > limit as u64 {
            return Err(format!(
                "{place}: VNI collision: {links} links from VNI {base} do not fit (room for {limit}); set a smaller `vni_base`"
            ));
        }
        Ok(base)
    }

    /// This machine's part of `spec` (a lab laid out from scenario
    /// `scenario`): its nodes — `owner` maps a lab node to the scenario node
    /// it belongs to (a split host's sender namespace to its host) — and a
    /// tunnel for every link with one end here.
    pub fn part(
        &self,
        spec: &LabSpec,
        machine: &str,
        scenario: &str,
        owner: impl Fn(&str) -> String,
    ) -> Result<LabPart, String> {
        let me = self.machine(machine)?;
        let base = self.vni_base(scenario, spec.links.len())?;
        let where_is = |node: &str| -> Result<&Machine, String> {
            let o = owner(node);
            self.machine_of(&o)
                .ok_or_else(|| format!("{}: node {o} is on no machine", self.path))
        };
        let mut local = BTreeSet::new();
        for n in &spec.nodes {
            if where_is(&n.name)?.name == me.name {
                local.insert(n.name.clone());
            }
        }
        let mut tunnels = BTreeMap::new();
        for (i, l) in spec.links.iter().enumerate() {
            let (ma, mb) = (where_is(&l.a)?, where_is(&l.b)?);
            let other = match (ma.name == me.name, mb.name == me.name) {
                (true, false) => mb,
                (false, true) => ma,
                _ => continue,
            };
            tunnels.insert(
                i,
                Tunnel {
                    vni: base + i as u32,
                    local: me.underlay,
                    remote: other.underlay,
                    dev: me.dev.clone(),
                    dstport: self.dstport,
                },
            );
        }
        Ok(LabPart {
            machine: me.name.clone(),
            local,
            underlay_netns: me.netns.clone(),
            tunnels,
        })
    }

    /// Line of `[machine.NAME]` (for messages of callers).
    pub fn machine_line(&self, name: &str) -> Option<usize> {
        self.machines.iter().find(|m| m.name == name).map(|m| m.line)
    }
}

/// Where a flow of a split lab was measured, as a machine records it in
/// `extra.placement.flows` of its results.
pub const MEASURED_SOURCE: &str = "source";
pub const MEASURED_SINK: &str = "sink";
pub const MEASURED_BOTH: &str = "both";

/// Combine the results the machines of a split lab wrote into one, in the
/// same schema: per flow, `sent` from the machine of its source and
/// everything the receiver measures (received, delay, jitter, throughput,
/// TOS) from the machine of its sink; `lost` is then sent − received. Links
/// and nodes are each reported by the machine that ran them; every
/// machine's `extra` is kept under `extra.machines.NAME`.
pub fn merge(parts: &[Results]) -> Result<Results, String> {
    let first = parts.first().ok_or("nothing to merge")?;
    let mut machines = serde_json::Map::new();
    let mut measured: Vec<BTreeMap<String, String>> = Vec::new();
    let mut start0: Option<(u64, String)> = None;
    for (k, p) in parts.iter().enumerate() {
        if p.scenario != first.scenario || p.seed != first.seed || p.duration_s != first.duration_s {
            return Err(format!(
                "part {} is scenario {} (seed {}, {} s), part 1 is {} (seed {}, {} s): not one run",
                k + 1,
                p.scenario,
                p.seed,
                p.duration_s,
                first.scenario,
                first.seed,
                first.duration_s
            ));
        }
        let pl = p.extra.get("placement").ok_or_else(|| {
            format!(
                "part {}: no extra.placement (not one machine's part of a split lab)",
                k + 1
            )
        })?;
        let name = pl
            .get("machine")
            .and_then(|m| m.as_str())
            .ok_or_else(|| format!("part {}: extra.placement names no machine", k + 1))?;
        if machines.contains_key(name) {
            return Err(format!("machine {name} given twice"));
        }
        let start = pl.get("start_unix_ns").and_then(|v| v.as_u64());
        match (start, &start0) {
            (Some(t), Some((t0, m0))) if t != *t0 => {
                return Err(format!(
                    "machines {m0} and {name} started traffic at different times ({} s and {} s since 1970): \
                     not one run (give every machine the same `lab run --start-at`)",
                    *t0 as f64 / 1e9,
                    t as f64 / 1e9
                ))
            }
            (Some(t), None) => start0 = Some((t, name.to_string())),
            _ => {}
        }
        let flows: BTreeMap<String, String> = pl
            .get("flows")
            .and_then(|f| serde_json::from_value(f.clone()).ok())
            .unwrap_or_default();
        measured.push(flows);
        machines.insert(
            name.to_string(),
            serde_json::to_value(&p.extra).map_err(|e| e.to_string())?,
        );
    }
    let mut out = Results {
        flows: Vec::new(),
        links: Vec::new(),
        nodes: Vec::new(),
        extra: BTreeMap::new(),
        ..first.clone()
    };
    for f in &first.flows {
        let pick = |role: &str| -> Option<&FlowResult> {
            parts.iter().zip(&measured).find_map(|(p, m)| {
                let r = m.get(&f.name)?;
                (r == role || r == MEASURED_BOTH)
                    .then(|| p.flow(&f.name))
                    .flatten()
            })
        };
        let src =
            pick(MEASURED_SOURCE).ok_or_else(|| format!("flow {}: no part measured its source", f.name))?;
        let sink =
            pick(MEASURED_SINK).ok_or_else(|| format!("flow {}: no part measured its sink", f.name))?;
        let mut m = sink.clone();
        m.sent = src.sent;
        m.lost = src.sent.saturating_sub(sink.received);
        out.flows.push(m);
    }
    let (mut events, mut wall) = (0, 0.0f64);
    for p in parts {
        out.links.extend(p.links.iter().cloned());
        out.nodes.extend(p.nodes.iter().cloned());
        events += p.engine.events;
        wall = wall.max(p.engine.wall_s);
    }
    out.engine.events = events;
    out.engine.wall_s = wall;
    out.engine.events_per_wall_s = events as f64 / wall.max(1e-9);
    out.extra.insert("machines".into(), machines.into());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::NodeKind;

    const TWO: &str = r#"
[machine.m1]
underlay = "192.0.2.1"
nodes = ["h1", "R1"]

[machine.m2]
underlay = "192.0.2.2"
dev = "eth1"
nodes = ["R2", "h2"]
"#;

    fn spec() -> LabSpec {
        LabSpec::new("qp")
            .node("h1", NodeKind::Host)
            .node("R1", NodeKind::Router)
            .node("R2", NodeKind::Router)
            .node("h2", NodeKind::Host)
            .node("h2_tx", NodeKind::Host)
            .link("h1", "10.0.0.1/24", "R1", "10.0.0.2/24")
            .link("R1", "", "R2", "")
            .link("R2", "10.0.2.1/24", "h2", "")
            .link("h2", "", "h2_tx", "")
    }

    fn owner(n: &str) -> String {
        n.strip_suffix("_tx").unwrap_or(n).to_string()
    }

    #[test]
    fn both_machines_derive_the_same_tunnels() {
        let p = Placement::parse(TWO, "p.toml").unwrap();
        p.check(&["h1", "R1", "R2", "h2"]).unwrap();
        let s = spec();
        let a = p.part(&s, "m1", "line", owner).unwrap();
        let b = p.part(&s, "m2", "line", owner).unwrap();
        assert_eq!(a.local, ["R1", "h1"].map(String::from).into());
        assert_eq!(b.local, ["R2", "h2", "h2_tx"].map(String::from).into());
        // Only the R1–R2 link crosses: one tunnel each side, same VNI,
        // mirrored addresses.
        assert_eq!(a.tunnels.keys().collect::<Vec<_>>(), [&1]);
        let (ta, tb) = (&a.tunnels[&1], &b.tunnels[&1]);
        assert_eq!(ta.vni, tb.vni);
        assert_eq!(ta.vni, default_vni_base("line") + 1);
        assert_eq!((ta.local, ta.remote), (tb.remote, tb.local));
        assert_eq!(ta.dstport, VXLAN_PORT);
        assert_eq!(tb.dev.as_deref(), Some("eth1"));
        assert_eq!(ta.dev, None);
        let mut whole = s.clone();
        whole.part = Some(a);
        whole.validate().unwrap();
        // A different scenario name moves the VNIs; vni_base pins them.
        assert_ne!(default_vni_base("line"), default_vni_base("line2"));
        let pinned = Placement::parse(&format!("vni_base = 100\n{TWO}"), "p.toml").unwrap();
        assert_eq!(pinned.part(&s, "m1", "x", owner).unwrap().tunnels[&1].vni, 101);
        for name in ["", "a", "tdp-482", "a very long scenario name indeed"] {
            let b = default_vni_base(name);
            assert!(b >= VNI_BLOCK && b + VNI_BLOCK <= 1 << 24, "{name}: {b}");
        }
    }

    #[test]
    fn mistakes_are_named_with_their_line() {
        let twice = TWO.replace(r#"["R2", "h2"]"#, r#"["R2", "h1"]"#);
        let e = Placement::parse(&twice, "p.toml").unwrap_err();
        assert!(
            e.starts_with("p.toml:9:") && e.contains("\"h1\" is placed twice") && e.contains("line 4"),
            "{e}"
        );
        let p = Placement::parse(TWO, "p.toml").unwrap();
        let e = p.check(&["h1", "R1", "R2", "h2", "h3", "h4"]).unwrap_err();
        assert!(e.contains("nodes are h3, h4 on no machine"), "{e}");
        let e = p.check(&["h1", "R1", "R2"]).unwrap_err();
        assert!(e.starts_with("p.toml:9:") && e.contains("no node \"h2\""), "{e}");
        let e = p.machine("m3").unwrap_err();
        assert!(e.contains("no machine \"m3\" (machines: m1, m2)"), "{e}");
        let e = Placement::parse(&TWO.replace("192.0.2.2", "192.0.2.1"), "p.toml").unwrap_err();
        assert!(e.starts_with("p.toml:7:") && e.contains("same underlay"), "{e}");
        let e = Placement::parse(&TWO.replace("192.0.2.2", "host-b"), "p.toml").unwrap_err();
        assert!(e.starts_with("p.toml:7:") && e.contains("not an IPv4"), "{e}");
        let e = Placement::parse(&format!("{TWO}color = 1\n"), "p.toml").unwrap_err();
        assert!(e.starts_with("p.toml:") && e.contains("color"), "{e}");
        let e = Placement::parse(&format!("vni_base = 16777216\n{TWO}"), "p.toml").unwrap_err();
        assert!(e.starts_with("p.toml:1:"), "{e}");
        let big = Placement::parse(&format!("vni_base = 16777210\n{TWO}"), "p.toml").unwrap();
        let e = big.vni_base("x", 10).unwrap_err();
        assert!(e.starts_with("p.toml:1: VNI collision"), "{e}");
        assert!(p.vni_base("x", VNI_BLOCK as usize + 1).is_err());
        assert!(Placement::parse("", "p.toml")
            .unwrap_err()
            .contains("no machines"));
        // A part whose tunnels share a VNI is refused before anything is built.
        let mut s = spec();
        let mut part = p.part(&s, "m1", "line", owner).unwrap();
        s.links.push(s.links[1].clone());
        let t = part.tunnels[&1].clone();
        part.tunnels.insert(4, t);
        s.part = Some(part);
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("both have VNI"), "{e}");
    }

    /// Values that would fail later (an empty lab, a tunnel to port 0 or
    /// to a broadcast address, a device name the kernel refuses, a netns
    /// path outside /run/netns) are refused with their file:line.
    #[test]
    fn values_are_checked_when_parsed() {
        let refused = |text: &str, line: usize, what: &str| {
            let e = Placement::parse(text, "p.toml").unwrap_err();
            assert!(
                e.starts_with(&format!("p.toml:{line}:")) && e.contains(what),
                "{what}: {e}"
            );
        };
        refused(
            &TWO.replace(r#"["R2", "h2"]"#, "[]"),
            6,
            "machine m2 runs no nodes",
        );
        refused(&format!("dstport = 0\n{TWO}"), 1, "dstport 0 is not a UDP port");
        for (bad, why) in [
            ("255.255.255.255", "broadcast"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("240.0.0.1", "reserved"),
            ("127.0.0.1", "loopback"),
        ] {
            refused(&TWO.replace("192.0.2.2", bad), 7, why);
        }
        for bad in ["../eth1", "a/b", "", "sixteen-bytes-12", "eth1:0"] {
            refused(
                &TWO.replace(r#"dev = "eth1""#, &format!("dev = {bad:?}")),
                8,
                "machine m2: dev: interface name",
            );
        }
        for bad in ["../x", "/run/netns/x", ".."] {
            let t = TWO.replace(r#"dev = "eth1""#, &format!("netns = {bad:?}"));
            refused(&t, 8, "machine m2: netns name");
        }
        let ok = TWO.replace(r#"dev = "eth1""#, "netns = \"m2\"\ndev = \"enp1s0f0\"");
        let p = Placement::parse(&format!("dstport = 8472\n{ok}"), "p.toml").unwrap();
        assert_eq!(p.dstport, 8472);
        assert_eq!(p.machines[1].netns.as_deref(), Some("m2"));
    }

    fn flow(name: &str, sent: u64, received: u64, delay: u64) -> FlowResult {
        let mut f = FlowResult {
            name: name.into(),
            sent,
            received,
            ..FlowResult::default()
        };
        f.delay_ns.max = delay;
        f
    }

    fn part(machine: &str, flows: Vec<FlowResult>, measured: &[(&str, &str)]) -> Results {
        let mut r = Results {
            scenario: "s".into(),
            flows,
            ..Results::default()
        };
        let m: BTreeMap<&str, &str> = measured.iter().copied().collect();
        r.extra.insert(
            "placement".into(),
            serde_json::json!({"machine": machine, "flows": m}),
        );
        r
    }

    #[test]
    fn merge_takes_sent_from_the_source_and_the_rest_from_the_sink() {
        let m1 = part(
            "m1",
            vec![flow("ab", 100, 0, 0), flow("ba", 0, 48, 7), flow("aa", 10, 10, 3)],
            &[("ab", "source"), ("ba", "sink"), ("aa", "both")],
        );
        let m2 = part(
            "m2",
            vec![flow("ab", 0, 97, 5), flow("ba", 50, 0, 0), flow("aa", 0, 0, 0)],
            &[("ab", "sink"), ("ba", "source")],
        );
        let r = merge(&[m1.clone(), m2.clone()]).unwrap();
        let got: Vec<(u64, u64, u64, u64)> = r
            .flows
            .iter()
            .map(|f| (f.sent, f.received, f.lost, f.delay_ns.max))
            .collect();
        assert_eq!(got, [(100, 97, 3, 5), (50, 48, 2, 7), (10, 10, 0, 3)]);
        assert!(r.extra["machines"].get("m2").is_some());
        assert!(merge(&[m1.clone(), m1.clone()]).unwrap_err().contains("twice"));
        let e = merge(std::slice::from_ref(&m1)).unwrap_err();
        assert!(e.contains("flow ab: no part measured its sink"), "{e}");
        let mut late = m2.clone();
        late.extra.get_mut("placement").unwrap()["start_unix_ns"] = 2_000_000_000u64.into();
        let mut early = m1.clone();
        early.extra.get_mut("placement").unwrap()["start_unix_ns"] = 1_000_000_000u64.into();
        let e = merge(&[early, late]).unwrap_err();
        assert!(e.contains("different times"), "{e}");
        let mut other = m2;
        other.scenario = "t".into();
        assert!(merge(&[m1, other]).unwrap_err().contains("not one run"));
    }
}
