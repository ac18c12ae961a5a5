//! A scenario as a containerlab topology (containerlab.dev, "topology
//! definition file"), so users who already deploy labs with containerlab —
//! or with its Kubernetes runtime — can run qosnet labs there: every qosnet
//! node (router, switch) becomes a `linux` container running
//! `qosnet node --config` on its `ethN` data interfaces, every host a
//! `linux` container given its scenario address and gateway, and every
//! scenario link a containerlab link between the two endpoints. The node
//! configs (docs/router-config.md) and the scenario go into a directory
//! beside the topology file that every qosnet container binds.
//!
//! The topology is built as a JSON value (what containerlab's published
//! JSON Schema, `schemas/clab.schema.json`, validates) and written as YAML
//! by [`to_yaml`], which quotes every string, so the YAML means exactly
//! that value.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use qosnet_scenario::model::Scenario;
use qosnet_scenario::topo::Network;

/// What the export needs besides the scenario.
#[derive(Clone, Debug)]
pub struct ClabOptions {
    /// Image of the qosnet nodes' containers; the qosnet binary is bound
    /// into it from [`ClabOptions::qosnet_bin`], so any glibc image works.
    pub image: String,
    /// Image of the hosts' containers (needs `ip`).
    pub host_image: String,
    /// The qosnet binary on the machines that run the lab.
    pub qosnet_bin: PathBuf,
    /// `--metrics` address of every qosnet node inside its container.
    pub metrics: Option<String>,
    /// The scenario's `--set` overrides, written into each node config.
    pub sets: Vec<String>,
}

impl Default for ClabOptions {
    fn default() -> Self {
        ClabOptions {
            image: "debian:bookworm-slim".into(),
            host_image: "ghcr.io/hellt/network-multitool".into(),
            qosnet_bin: PathBuf::from("/usr/local/bin/qosnet"),
            metrics: Some("0.0.0.0:9469".into()),
            sets: Vec::new(),
        }
    }
}

/// The exported lab: the topology and the files beside it.
#[derive(Clone, Debug)]
pub struct ClabExport {
    pub topology: Value,
    /// Directory (relative to the topology file) the qosnet nodes bind
    /// as `/qosnet`.
    pub dir: String,
    /// (file name in `dir`, contents): the scenario and one node config
    /// per qosnet node.
    pub files: Vec<(String, String)>,
}

/// Containerlab names: `^[a-zA-Z0-9][a-zA-Z0-9-._]*$` for the lab,
/// node names likewise (`|` also allowed).
fn clab_name(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-._".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        out.insert(0, 'q');
    }
    out
}

fn ifname(port: usize) -> String {
    // eth0 is containerlab's management interface.
    format!("eth{}", port + 1)
}

/// Build the export of a scenario. `scenario_text` is the scenario file
/// as the nodes will load it.
pub fn export(sc: &Scenario, scenario_text: &str, o: &ClabOptions) -> Result<ClabExport, String> {
    let net = Network::build(sc).map_err(|e| format!("{}: {e}", sc.source))?;
    let lab = clab_name(&sc.name);
    let dir = format!("qosnet-{lab}");
    let mut names = Vec::with_capacity(sc.nodes.len());
    for n in &sc.nodes {
        let c = clab_name(&n.name);
        if names.contains(&c) {
            return Err(format!(
                "{}: nodes {} and another map to the same containerlab name {c}; rename one",
                sc.source, n.name
            ));
        }
        names.push(c);
    }
    let mut nodes = Map::new();
    let mut files = vec![("scenario.toml".to_string(), scenario_text.to_string())];
    for (i, n) in sc.nodes.iter().enumerate() {
        let ifaces = &net.nodes[i].ifaces;
        if n.kind_name() == "segment" {
            return Err(format!(
                "{}: node {} is a shared segment (CSMA/CD); containerlab links are point to point: model it as a switch to export",
                sc.source, n.name
            ));
        }
        let wait = (0..ifaces.len())
            .map(|k| format!("until [ -e /sys/class/net/{} ]; do sleep 0.2; done", ifname(k)))
            .collect::<Vec<_>>()
            .join("; ");
        if n.is_host() {
            let mut exec = Vec::new();
            for (k, f) in ifaces.iter().enumerate() {
                exec.push(format!("ip addr add {}/{} dev {}", f.ip, f.prefix_len, ifname(k)));
            }
            if let Some(gw) = ifaces.iter().find_map(|f| gateway(sc, &net, f)) {
                exec.push(format!("ip route replace default via {gw}"));
            }
            let mut node = json!({
                "kind": "linux",
                "image": o.host_image,
                "labels": {"qosnet-node": n.name, "qosnet-kind": "host"},
            });
            if !exec.is_empty() {
                node["exec"] = json!(exec);
            }
            nodes.insert(names[i].clone(), node);
            continue;
        }
        // A qosnet node: its config names the interface towards each
        // neighbour (switch or segment ports by that node's name).
        let mut cfg = String::new();
        let _ = writeln!(
            cfg,
            "# qosnet node config (docs/router-config.md), written by qosnet lab export --containerlab\nscenario = \"scenario.toml\"\nnode = {}\n# veth links have no rate of their own: qosnet paces to the scenario's.\nemulate_wire = true",
            toml_str(&n.name)
        );
        if !o.sets.is_empty() {
            let _ = writeln!(
                cfg,
                "set = [{}]",
                o.sets.iter().map(|s| toml_str(s)).collect::<Vec<_>>().join(", ")
            );
        }
        let _ = writeln!(cfg, "\n[ports]");
        for (k, f) in ifaces.iter().enumerate() {
            let _ = writeln!(cfg, "{} = \"{}\"", toml_str(&sc.nodes[f.peer].name), ifname(k));
        }
        let file = format!("{}.toml", names[i]);
        let metrics = o
            .metrics
            .as_ref()
            .map(|m| format!(" --metrics {m}"))
            .unwrap_or_default();
        // containerlab creates the data links after the container starts:
        // wait for them, then become the node.
        let cmd = format!(
            "sh -c '{wait}; exec /usr/local/bin/qosnet node --config /qosnet/{file}{metrics}'",
            wait = if wait.is_empty() { "true".to_string() } else { wait }
        );
        nodes.insert(
            names[i].clone(),
            json!({
                "kind": "linux",
                "image": o.image,
                "cmd": cmd,
                "binds": [
                    format!("{}:/usr/local/bin/qosnet:ro", o.qosnet_bin.display()),
                    format!("{dir}:/qosnet:ro"),
                ],
                "cap-add": ["NET_ADMIN", "NET_RAW"],
                // qosnet answers ARP and forwards itself; the kernel must not.
                "sysctls": {"net.ipv4.ip_forward": 0},
                "labels": {"qosnet-node": n.name, "qosnet-kind": n.kind_name()},
            }),
        );
        files.push((file, cfg));
    }
    let mut links = Vec::new();
    for (i, nn) in net.nodes.iter().enumerate() {
        for (k, f) in nn.ifaces.iter().enumerate() {
            if (i, k) < (f.peer, f.peer_port) {
                links.push(json!({
                    "endpoints": [
                        format!("{}:{}", names[i], ifname(k)),
                        format!("{}:{}", names[f.peer], ifname(f.peer_port)),
                    ]
                }));
            }
        }
    }
    let mut topology = json!({
        "name": lab,
        "topology": {"nodes": Value::Object(nodes)},
    });
    if !links.is_empty() {
        topology["topology"]["links"] = Value::Array(links);
    }
    Ok(ClabExport { topology, dir, files })
}

/// A host port's gateway: the router end of its link, or a router in its
/// broadcast domain (a host behind a switch).
fn gateway(sc: &Scenario, net: &Network, f: &qosnet_scenario::topo::Iface) -> Option<Ipv4Addr> {
    if !f.peer_ip.is_unspecified() && sc.nodes[f.peer].router().is_some() {
        return Some(f.peer_ip);
    }
    let d = net.domains.get(f.domain?)?;
    d.members
        .iter()
        .find(|m| sc.nodes[m.node].router().is_some())
        .map(|m| m.ip)
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Write the export: the topology at `file` and its directory beside it.
pub fn write(e: &ClabExport, file: &Path) -> Result<Vec<PathBuf>, String> {
    let base = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = base.join(&e.dir);
    std::fs::create_dir_all(&dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
    let mut written = vec![file.to_path_buf()];
    for (name, text) in &e.files {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|err| format!("writing {}: {err}", p.display()))?;
        written.push(p);
    }
    let head = "# containerlab topology of a qosnet scenario (qosnet lab export --containerlab).\n# Deploy: sudo containerlab deploy -t THIS_FILE; the qosnet nodes' configs and\n# the scenario are in the directory beside it (bound as /qosnet).\n";
    std::fs::write(file, format!("{head}{}", to_yaml(&e.topology)))
        .map_err(|err| format!("writing {}: {err}", file.display()))?;
    Ok(written)
}

/// YAML block style for a JSON value; every string double-quoted with JSON
/// escapes (valid YAML), so no value is reinterpreted (`no`, `0x10`, ...).
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    yaml_into(&mut out, v, 0);
    out
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => Value::String(s.clone()).to_string(),
        Value::Object(m) if m.is_empty() => "{}".into(),
        Value::Array(a) if a.is_empty() => "[]".into(),
        other => other.to_string(),
    }
}

fn is_block(v: &Value) -> bool {
    matches!(v, Value::Object(m) if !m.is_empty()) || matches!(v, Value::Array(a) if !a.is_empty())
}

fn key(k: &str) -> String {
    if !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !k.starts_with(['-', '.'])
    {
        k.to_string()
    } else {
        Value::String(k.to_string()).to_string()
    }
}

fn yaml_into(out: &mut String, v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                if is_block(x) {
                    let _ = writeln!(out, "{pad}{}:", key(k));
                    yaml_into(out, x, indent + 2);
                } else {
                    let _ = writeln!(out, "{pad}{}: {}", key(k), scalar(x));
                }
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for x in a {
                if is_block(x) {
                    // "- " then the item's block, its first line on the dash.
                    let mut inner = String::new();
                    yaml_into(&mut inner, x, indent + 2);
                    let body = inner.strip_prefix(&" ".repeat(indent + 2)).unwrap_or(&inner);
                    let _ = write!(out, "{pad}- {body}");
                } else {
                    let _ = writeln!(out, "{pad}- {}", scalar(x));
                }
            }
        }
        other => {
            let _ = writeln!(out, "{pad}{}", scalar(other));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_quotes_every_string() {
        let v = json!({"a": "no", "b": [1, "x:y", {"c": [], "d": {"e": true}}], "f g": {}});
        assert_eq!(
            to_yaml(&v),
            "a: \"no\"\nb:\n  - 1\n  - \"x:y\"\n  - c: []\n    d:\n      e: true\n\"f g\": {}\n"
        );
    }

    #[test]
    fn names_are_containerlab_names() {
        assert_eq!(clab_name("tdp-1002"), "tdp-1002");
        assert_eq!(clab_name("a b/c"), "a-b-c");
        assert_eq!(clab_name("_x"), "q_x");
    }
}
