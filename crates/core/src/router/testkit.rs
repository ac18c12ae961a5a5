//! Fixtures shared by the router's tests: a two-port router with no static
//! MACs, frames to feed it, and a driver loop that collects what it sends.

use std::net::Ipv4Addr;

use super::{PortConfig, Router};
use crate::arp::{self, Arp};
use crate::icmp;
use crate::node::{Duplex, Node};
use crate::packet::Framing;
use crate::route::Route;
use crate::sched::Fifo;
use crate::time::{Duration, Instant};
use crate::wire::{self, MacAddr, UdpSpec};

pub const R_MAC0: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
pub const R_MAC1: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
pub const H1_MAC: MacAddr = MacAddr([2, 0, 0, 0, 1, 1]);
pub const H2_MAC: MacAddr = MacAddr([2, 0, 0, 0, 2, 1]);

pub fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// h1 (10.0.1.1) — port 0 (10.0.1.254) R port 1 (10.0.2.254) — h2
/// (10.0.2.1), no static MACs: everything by ARP.
pub fn router() -> Router {
    let mut r = Router::new("R");
    for (i, (mac, addr)) in [(R_MAC0, "10.0.1.254"), (R_MAC1, "10.0.2.254")]
        .into_iter()
        .enumerate()
    {
        r.add_port(
            PortConfig {
                name: format!("p{i}"),
                mac,
                ip: ip(addr),
                prefix_len: 24,
                rate_bps: 1_000_000_000,
                framing: Framing::default(),
                peer_mac: None,
                tdp_peer: false,
                duplex: Duplex::Full,
            },
            Box::new(Fifo::new(1000, 1 << 20)),
        );
    }
    r.routes.add(Route::new(ip("10.0.1.0"), 24, 0)).unwrap();
    r.routes.add(Route::new(ip("10.0.2.0"), 24, 1)).unwrap();
    r.routes
        .add(Route::new(ip("10.9.0.0"), 16, 1).via(ip("10.0.2.1")))
        .unwrap();
    r
}

pub fn udp(dst: &str, ttl: u8) -> Vec<u8> {
    wire::build_udp(
        &UdpSpec {
            src_mac: H1_MAC,
            dst_mac: R_MAC0,
            src: ip("10.0.1.1"),
            dst: ip(dst),
            sport: 1000,
            dport: 2000,
            tos: 0,
            ttl,
            ident: 1,
        },
        100,
        b"data",
    )
}

pub fn drain(r: &mut Router, now: Instant) -> Vec<(u16, Vec<u8>)> {
    let mut v = Vec::new();
    let mut t = now;
    while let Some(at) = r.poll_timeout(t) {
        if at > now + Duration::from_millis(1) {
            break;
        }
        t = t.max(at);
        for tx in crate::node::step(r, t) {
            v.push((tx.port, tx.pkt.data));
        }
        if r.poll_timeout(t).is_some_and(|a| a <= t) {
            t += Duration(1);
        }
    }
    v
}

pub fn arp_frame(oper: u16, sha: MacAddr, spa: &str, tha: MacAddr, tpa: &str, dst: MacAddr) -> Vec<u8> {
    arp::build_arp(
        sha,
        dst,
        &Arp {
            oper,
            sha,
            spa: ip(spa),
            tha,
            tpa: ip(tpa),
        },
    )
}
pub fn echo_request(dst: &str, ttl: u8) -> Vec<u8> {
    let mut msg = vec![
        icmp::ICMP_ECHO_REQUEST,
        0,
        0,
        0,
        0,
        1,
        0,
        1,
        b'p',
        b'i',
        b'n',
        b'g',
    ];
    let c = wire::checksum(&msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    let mut f = icmp::build_ipv4(ip("10.0.1.1"), ip(dst), wire::IPPROTO_ICMP, ttl, 1, &msg);
    wire::set_eth_addrs(&mut f, H1_MAC, R_MAC0);
    f
}
