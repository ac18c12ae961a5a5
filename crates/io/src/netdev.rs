//! Which [`Device`] each port of a live node gets: AF_PACKET
//! ([`crate::afpacket`], the default) or AF_XDP ([`crate::xdp`]),
//! chosen per port and falling back to AF_PACKET, with the reason printed,
//! when the kernel or the interface cannot do AF_XDP.
//!
//! [`NetDevice`] is the one device type the live driver runs: an enum
//! rather than a trait object because [`Device::recv_batch`] takes a
//! closure generically (no allocation, no indirect call per frame).
//!
//! Selection ([`PortDevices`]) is a default plus rules `NODE=KIND` and
//! `NODE:PEER=KIND` (a node's port towards a neighbour, switch or
//! segment), later rules winning: `--device af_xdp` on `lab run`, `lab
//! up` and `node`, and `device` / `[devices]` in a node config
//! (docs/router-config.md).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;

use qosnet_core::time::Instant;
use qosnet_core::wire::MacAddr;

use crate::afpacket::{AfPacket, AfPacketConfig};
use crate::device::{Device, DeviceStats};
use crate::xdp::{AfXdp, AttachMode, XdpConfig};

/// A port's device type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceKind {
    #[default]
    AfPacket,
    AfXdp,
}

impl DeviceKind {
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::AfPacket => "af_packet",
            DeviceKind::AfXdp => "af_xdp",
        }
    }
}

impl std::fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DeviceKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "af_packet" | "afpacket" | "packet" => Ok(DeviceKind::AfPacket),
            "af_xdp" | "afxdp" | "xdp" => Ok(DeviceKind::AfXdp),
            _ => Err(format!("device `{s}`: use af_packet or af_xdp")),
        }
    }
}

/// One selection rule: `node` (and, if given, its port towards `peer`)
/// gets `kind`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortRule {
    pub node: String,
    pub peer: Option<String>,
    pub kind: DeviceKind,
}

/// Which device every port of a run gets.
#[derive(Clone, Debug, Default)]
pub struct PortDevices {
    pub default: DeviceKind,
    /// Applied in order; the last matching rule wins.
    pub rules: Vec<PortRule>,
    /// Geometry and modes of AF_XDP ports.
    pub xdp: XdpConfig,
}

impl PortDevices {
    /// Add one `--device` argument: `KIND` (the default of every port),
    /// `NODE=KIND` or `NODE:PEER=KIND`.
    pub fn add_arg(&mut self, s: &str) -> Result<(), String> {
        match s.split_once('=') {
            None => self.default = s.parse()?,
            Some((target, kind)) => {
                let kind = kind.parse()?;
                let (node, peer) = match target.split_once(':') {
                    Some((n, p)) => (n, Some(p.to_string())),
                    None => (target, None),
                };
                if node.is_empty() || peer.as_deref() == Some("") {
                    return Err(format!("--device `{s}`: use KIND, NODE=KIND or NODE:PEER=KIND"));
                }
                self.rules.push(PortRule {
                    node: node.to_string(),
                    peer,
                    kind,
                });
            }
        }
        Ok(())
    }

    /// The device of `node`'s port towards `peer`.
    pub fn kind_for(&self, node: &str, peer: &str) -> DeviceKind {
        self.rules
            .iter()
            .rev()
            .find(|r| r.node == node && r.peer.as_deref().is_none_or(|p| p == peer))
            .map_or(self.default, |r| r.kind)
    }

    /// Whether every port gets AF_PACKET (nothing to report).
    pub fn all_af_packet(&self) -> bool {
        self.default == DeviceKind::AfPacket && self.rules.iter().all(|r| r.kind == DeviceKind::AfPacket)
    }

    /// The `device` and `[devices]` keys of `node`'s config file
    /// (`qosnet node`), given its ports' peers: the same choice in a node
    /// process as in the lab that starts it.
    pub fn write_node_keys(&self, node: &str, peers: &[String], cfg: &mut toml::Table) {
        if self.all_af_packet() {
            return;
        }
        let mut t = toml::Table::new();
        for p in peers {
            t.insert(p.clone(), self.kind_for(node, p).name().into());
        }
        cfg.insert("devices".into(), t.into());
        if self.xdp.zero_copy {
            cfg.insert("xdp_zero_copy".into(), true.into());
        }
        if self.xdp.attach != AttachMode::Auto {
            cfg.insert("xdp_attach".into(), self.xdp.attach.name().into());
        }
    }

    /// Apply a node config's `device` and `[devices]` to `node`.
    pub fn apply_node_config(
        &mut self,
        node: &str,
        device: Option<DeviceKind>,
        devices: &BTreeMap<String, DeviceKind>,
    ) {
        if let Some(k) = device {
            self.rules.push(PortRule {
                node: node.to_string(),
                peer: None,
                kind: k,
            });
        }
        for (peer, &kind) in devices {
            self.rules.push(PortRule {
                node: node.to_string(),
                peer: Some(peer.clone()),
                kind,
            });
        }
    }
}

/// A live port: AF_PACKET or AF_XDP.
// A node has a handful of ports, each opened once: the size difference
// costs nothing, a Box would cost an indirection on every frame.
#[allow(clippy::large_enum_variant)]
pub enum NetDevice {
    Packet(AfPacket),
    Xdp(AfXdp),
}

impl NetDevice {
    /// Open `ifname` (in `netns`, or the calling thread's namespace) as a
    /// `kind` port. Returns the device and a line saying what it is and,
    /// when AF_XDP was asked for but could not be had, why AF_PACKET is
    /// used instead.
    pub fn open(
        netns: Option<&str>,
        ifname: &str,
        kind: DeviceKind,
        packet: &AfPacketConfig,
        xdp: &XdpConfig,
    ) -> io::Result<(NetDevice, String)> {
        if kind == DeviceKind::AfXdp {
            let r = match netns {
                Some(ns) => AfXdp::open_in(ns, ifname, xdp),
                None => AfXdp::open(ifname, xdp),
            };
            match r {
                Ok(d) => {
                    let how = d.mode().to_string();
                    return Ok((NetDevice::Xdp(d), how));
                }
                Err(e) => {
                    let d = open_packet(netns, ifname, packet)?;
                    return Ok((NetDevice::Packet(d), format!("af_packet (af_xdp refused: {e})")));
                }
            }
        }
        let d = open_packet(netns, ifname, packet)?;
        let how = match d.stack_drop() {
            Ok(true) => "af_packet, kernel stack bypassed (tcx drop after the tap)".to_string(),
            Ok(false) => "af_packet".to_string(),
            Err(e) => format!("af_packet (kernel stack still sees frames: {e})"),
        };
        Ok((NetDevice::Packet(d), how))
    }

    pub fn kind(&self) -> DeviceKind {
        match self {
            NetDevice::Packet(_) => DeviceKind::AfPacket,
            NetDevice::Xdp(_) => DeviceKind::AfXdp,
        }
    }

    pub fn mac(&self) -> MacAddr {
        match self {
            NetDevice::Packet(d) => d.mac(),
            NetDevice::Xdp(d) => d.mac(),
        }
    }

    pub fn ifname(&self) -> &str {
        match self {
            NetDevice::Packet(d) => d.ifname(),
            NetDevice::Xdp(d) => d.ifname(),
        }
    }
}

fn open_packet(netns: Option<&str>, ifname: &str, cfg: &AfPacketConfig) -> io::Result<AfPacket> {
    match netns {
        Some(ns) => AfPacket::open_in(ns, ifname, cfg),
        None => AfPacket::open(ifname, cfg),
    }
}

impl Device for NetDevice {
    fn recv_batch(&mut self, max: usize, f: impl FnMut(&[u8], Instant)) -> io::Result<usize> {
        match self {
            NetDevice::Packet(d) => d.recv_batch(max, f),
            NetDevice::Xdp(d) => d.recv_batch(max, f),
        }
    }
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        match self {
            NetDevice::Packet(d) => d.send(frame),
            NetDevice::Xdp(d) => d.send(frame),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            NetDevice::Packet(d) => d.flush(),
            NetDevice::Xdp(d) => d.flush(),
        }
    }
    fn fd(&self) -> RawFd {
        match self {
            NetDevice::Packet(d) => d.fd(),
            NetDevice::Xdp(d) => d.fd(),
        }
    }
    fn stats(&mut self) -> DeviceStats {
        match self {
            NetDevice::Packet(d) => d.stats(),
            NetDevice::Xdp(d) => d.stats(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_pick_per_port_and_later_ones_win() {
        let mut d = PortDevices::default();
        assert!(d.all_af_packet());
        d.add_arg("r=af_xdp").unwrap();
        d.add_arg("r:h2=af_packet").unwrap();
        assert_eq!(d.kind_for("r", "h1"), DeviceKind::AfXdp);
        assert_eq!(d.kind_for("r", "h2"), DeviceKind::AfPacket);
        assert_eq!(d.kind_for("s", "h1"), DeviceKind::AfPacket);
        d.add_arg("xdp").unwrap();
        assert_eq!(d.kind_for("s", "h1"), DeviceKind::AfXdp);
        assert_eq!(d.kind_for("r", "h2"), DeviceKind::AfPacket);
        assert!(!d.all_af_packet());
        for bad in ["fast", "r=fast", "=af_xdp", "r:=af_xdp"] {
            assert!(PortDevices::default().add_arg(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn node_config_keys_round_trip() {
        let mut d = PortDevices::default();
        d.add_arg("r:h1=af_xdp").unwrap();
        d.xdp.attach = AttachMode::Generic;
        let mut cfg = toml::Table::new();
        d.write_node_keys("r", &["h1".into(), "h2".into()], &mut cfg);
        let t = cfg["devices"].as_table().unwrap();
        assert_eq!(t["h1"].as_str(), Some("af_xdp"));
        assert_eq!(t["h2"].as_str(), Some("af_packet"));
        assert_eq!(cfg["xdp_attach"].as_str(), Some("generic"));
        assert!(!cfg.contains_key("xdp_zero_copy"));
        // A node process applying them decides the same.
        let map: BTreeMap<String, DeviceKind> = t
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().parse().unwrap()))
            .collect();
        let mut n = PortDevices::default();
        n.apply_node_config("r", None, &map);
        assert_eq!(n.kind_for("r", "h1"), DeviceKind::AfXdp);
        assert_eq!(n.kind_for("r", "h2"), DeviceKind::AfPacket);
        // Nothing is written when every port is AF_PACKET.
        let mut cfg = toml::Table::new();
        PortDevices::default().write_node_keys("r", &["h1".into()], &mut cfg);
        assert!(cfg.is_empty());
    }
}
