//! ARP for IPv4 over Ethernet (RFC 826): parsing and building the 28-byte
//! packet, and the timings a router uses to resolve next hops.
//!
//! Only the Ethernet/IPv4 combination exists here (hardware type 1,
//! protocol type 0x0800, lengths 6 and 4); anything else is
//! [`Malformed::BadArp`]. The resolution state machine itself (hold queue,
//! retries, timeouts, RFC 826's "merge" rule) lives with the router's ports
//! in [`crate::router`], because it needs the port's scheduler to send.

use std::net::Ipv4Addr;

use crate::time::Duration;
use crate::wire::{MacAddr, Malformed, ETHERTYPE_ARP, ETH_HDR, ETH_MIN_NO_FCS};

/// ARP operation codes (RFC 826).
pub const ARP_REQUEST: u16 = 1;
pub const ARP_REPLY: u16 = 2;
/// Bytes of an Ethernet/IPv4 ARP packet after the Ethernet header.
pub const ARP_LEN: usize = 28;

/// An Ethernet/IPv4 ARP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arp {
    pub oper: u16,
    /// Sender hardware and protocol address.
    pub sha: MacAddr,
    pub spa: Ipv4Addr,
    /// Target hardware and protocol address (`tha` is zero in requests).
    pub tha: MacAddr,
    pub tpa: Ipv4Addr,
}

fn mac_at(b: &[u8], at: usize) -> MacAddr {
    let mut m = [0u8; 6];
    m.copy_from_slice(&b[at..at + 6]);
    MacAddr(m)
}

fn ip_at(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

/// Parse the ARP packet of an Ethernet frame whose EtherType is ARP.
/// Never panics: short frames, other hardware/protocol types and unknown
/// operations are [`Malformed`].
pub fn parse_arp(f: &[u8]) -> Result<Arp, Malformed> {
    if f.len() < ETH_HDR + ARP_LEN {
        return Err(Malformed::Truncated);
    }
    if u16::from_be_bytes([f[12], f[13]]) != ETHERTYPE_ARP {
        return Err(Malformed::BadArp);
    }
    let a = &f[ETH_HDR..ETH_HDR + ARP_LEN];
    let htype = u16::from_be_bytes([a[0], a[1]]);
    let ptype = u16::from_be_bytes([a[2], a[3]]);
    let oper = u16::from_be_bytes([a[6], a[7]]);
    if htype != 1 || ptype != 0x0800 || a[4] != 6 || a[5] != 4 || !(oper == ARP_REQUEST || oper == ARP_REPLY)
    {
        return Err(Malformed::BadArp);
    }
    Ok(Arp {
        oper,
        sha: mac_at(a, 8),
        spa: ip_at(a, 14),
        tha: mac_at(a, 18),
        tpa: ip_at(a, 24),
    })
}

/// An Ethernet frame carrying `arp`, from `src` to `dst` (broadcast for
/// requests), padded to the Ethernet minimum.
pub fn build_arp(src: MacAddr, dst: MacAddr, arp: &Arp) -> Vec<u8> {
    let mut f = vec![0u8; ETH_MIN_NO_FCS];
    f[0..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    let a = &mut f[ETH_HDR..ETH_HDR + ARP_LEN];
    a[0..2].copy_from_slice(&1u16.to_be_bytes());
    a[2..4].copy_from_slice(&0x0800u16.to_be_bytes());
    a[4] = 6;
    a[5] = 4;
    a[6..8].copy_from_slice(&arp.oper.to_be_bytes());
    a[8..14].copy_from_slice(&arp.sha.0);
    a[14..18].copy_from_slice(&arp.spa.octets());
    a[18..24].copy_from_slice(&arp.tha.0);
    a[24..28].copy_from_slice(&arp.tpa.octets());
    f
}

/// How a router resolves next hops.
///
/// Defaults follow Linux's neighbour table where it matters to a router
/// (`mcast_solicit` = 3 tries) with a shorter retry interval (250 ms
/// instead of 1 s), so a next hop that does not answer costs its held
/// packets within a second rather than three.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpConfig {
    /// Packets held per unresolved next hop; more are dropped and counted.
    pub hold_packets: usize,
    /// Time between requests for one next hop.
    pub retry: Duration,
    /// Requests sent before the held packets are dropped.
    pub max_tries: u32,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            hold_packets: 64,
            retry: Duration::from_millis(250),
            max_tries: 3,
        }
    }
}

/// A gratuitous ARP announcement (RFC 5227 §2.3): an ARP request whose
/// sender and target protocol addresses are both `ip`, broadcast, so that
/// neighbours (and switches, which learn the source MAC) hear of a station
/// the moment its interface comes up.
pub fn announcement(mac: MacAddr, ip: std::net::Ipv4Addr) -> Vec<u8> {
    build_arp(
        mac,
        MacAddr::BROADCAST,
        &Arp {
            oper: ARP_REQUEST,
            sha: mac,
            spa: ip,
            tha: MacAddr::default(),
            tpa: ip,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_parse_roundtrip_and_rejects() {
        let a = Arp {
            oper: ARP_REQUEST,
            sha: MacAddr::local(1),
            spa: Ipv4Addr::new(10, 0, 0, 1),
            tha: MacAddr::default(),
            tpa: Ipv4Addr::new(10, 0, 0, 2),
        };
        let f = build_arp(MacAddr::local(1), MacAddr::BROADCAST, &a);
        assert_eq!(f.len(), 60);
        assert_eq!(parse_arp(&f), Ok(a));
        assert_eq!(parse_arp(&f[..41]), Err(Malformed::Truncated));
        let mut g = f.clone();
        g[ETH_HDR + 7] = 3; // RARP request
        assert_eq!(parse_arp(&g), Err(Malformed::BadArp));
        let mut g = f.clone();
        g[ETH_HDR + 5] = 16; // IPv6-sized protocol address
        assert_eq!(parse_arp(&g), Err(Malformed::BadArp));
        let mut g = f;
        g[12] = 0x08;
        g[13] = 0x00;
        assert_eq!(parse_arp(&g), Err(Malformed::BadArp));
    }
}
