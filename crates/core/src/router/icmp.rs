//! ICMP at the router (RFC 792, RFC 1812 §4.3): echo requests to any of
//! its addresses are answered; packets whose TTL runs out draw a time
//! exceeded and packets without a route a net unreachable, rate-limited by
//! a token bucket (RFC 1812 §4.3.2.8) and never sent about ICMP errors,
//! fragments or non-unicast addresses (§4.3.2.7, decided by
//! [`crate::icmp::error`]). What the router originates leaves through the
//! port facing the destination, waiting for ARP like any next hop.

use std::net::Ipv4Addr;

use super::neighbor::Held;
use super::Router;
use crate::icmp;
use crate::packet::{Meta, Packet};
use crate::time::Instant;
use crate::wire::{self, Ipv4Info};

/// ICMP behaviour of a router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IcmpConfig {
    /// Answer echo requests to own addresses.
    pub echo: bool,
    /// Send time exceeded / net unreachable errors.
    pub errors: bool,
    /// Errors per second, sustained (RFC 1812 §4.3.2.8 rate limiting).
    pub errors_per_sec: u32,
    /// Errors that may go out back to back.
    pub burst: u32,
}

impl Default for IcmpConfig {
    fn default() -> Self {
        IcmpConfig {
            echo: true,
            errors: true,
            errors_per_sec: 100,
            burst: 20,
        }
    }
}

/// Token bucket in nanoseconds of credit: one error costs `1 s / rate`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Limiter {
    credit: u64,
    last: Option<Instant>,
}

impl Limiter {
    pub fn allow(&mut self, now: Instant, cfg: &IcmpConfig) -> bool {
        if cfg.errors_per_sec == 0 {
            return false;
        }
        let cost = 1_000_000_000 / cfg.errors_per_sec as u64;
        let cap = cost.saturating_mul(cfg.burst.max(1) as u64);
        let since = match self.last {
            Some(l) => now.saturating_since(l).as_nanos(),
            None => cap,
        };
        self.last = Some(now.max(self.last.unwrap_or(now)));
        self.credit = self.credit.saturating_add(since).min(cap);
        if self.credit >= cost {
            self.credit -= cost;
            true
        } else {
            false
        }
    }
}

impl Router {
    fn next_ident(&mut self) -> u16 {
        self.ident = self.ident.wrapping_add(1);
        self.ident
    }

    /// ICMP addressed to the router: answer echo requests.
    pub(super) fn handle_icmp_local(&mut self, now: Instant, data: &[u8], info: &Ipv4Info) {
        self.counters.ctl("icmp_rx", 1);
        if !self.icmp.echo {
            return;
        }
        let ident = self.next_ident();
        if let Some(reply) = icmp::echo_reply(data, info, ident) {
            self.counters.ctl("icmp_echo_requests_rx", 1);
            self.counters.ctl("icmp_echo_replies_tx", 1);
            self.originate(now, reply, info.src);
        }
    }

    /// An ICMP error about `data` from `src`, if allowed and within rate.
    pub(super) fn icmp_error(
        &mut self,
        now: Instant,
        data: &[u8],
        info: &Ipv4Info,
        src: Ipv4Addr,
        typ: u8,
        code: u8,
    ) {
        if !self.icmp.errors {
            return;
        }
        let ident = self.ident.wrapping_add(1);
        let Some(msg) = icmp::error(data, info, src, typ, code, ident) else {
            self.counters.ctl("icmp_errors_suppressed", 1);
            return;
        };
        if !self.limiter.allow(now, &self.icmp) {
            self.counters.ctl("icmp_ratelimited", 1);
            return;
        }
        self.ident = ident;
        self.counters.ctl(
            if typ == icmp::ICMP_TIME_EXCEEDED {
                "icmp_time_exceeded_tx"
            } else {
                "icmp_unreachable_tx"
            },
            1,
        );
        self.originate(now, msg, info.src);
    }

    /// Send a packet the router made (zero MACs) to `dst`: straight out of
    /// the port whose subnet holds `dst`, else by the route table.
    fn originate(&mut self, now: Instant, mut data: Vec<u8>, dst: Ipv4Addr) {
        let (port, next_hop) = match self.ports.iter().position(|p| p.cfg.on_link(dst)) {
            Some(i) => (i as u16, dst),
            None => match self.routes.lookup(dst, icmp::ORIGIN_TTL) {
                Some(r) => (r.port, r.gateway.unwrap_or(dst)),
                None => {
                    self.counters.ctl("originated_no_route", 1);
                    return;
                }
            },
        };
        let Some(p) = self.ports.get(port as usize) else {
            return;
        };
        self.counters.ctl("originated", 1);
        let mac = p.neighbor(next_hop);
        wire::set_eth_addrs(&mut data, p.cfg.mac, mac.unwrap_or_default());
        match mac {
            Some(_) => self.enqueue(port, Packet::new(data, Meta::default()), now),
            None => {
                let Ok(info) = wire::parse_ipv4(&data) else {
                    return;
                };
                let pkt = Packet::new(data, Meta::default());
                self.hold(
                    now,
                    port,
                    next_hop,
                    Held {
                        pkt,
                        info,
                        upstream_tf: None,
                        local: true,
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::time::Duration;

    fn echo_request(dst: &str, ttl: u8) -> Vec<u8> {
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

    #[test]
    fn answers_ping_on_every_own_address() {
        let mut r = router();
        r.port_mut(0).unwrap().add_neighbor(ip("10.0.1.1"), H1_MAC);
        let t = Instant(1);
        for dst in ["10.0.1.254", "10.0.2.254"] {
            r.handle_frame(t, 0, echo_request(dst, 64), Meta::default());
            let out = drain(&mut r, t);
            assert_eq!(out.len(), 1, "{dst}");
            let (p, f) = &out[0];
            let i = wire::parse_ipv4(f).unwrap();
            assert_eq!(
                (*p, i.src, i.dst, i.proto),
                (0, ip(dst), ip("10.0.1.1"), wire::IPPROTO_ICMP)
            );
            assert_eq!(f[i.l4_offset()], icmp::ICMP_ECHO_REPLY);
            assert_eq!(wire::eth_dst(f), Some(H1_MAC));
        }
        assert_eq!(r.counters.control_count("icmp_echo_replies_tx"), 2);
        assert_eq!(r.counters.local_rx, 2);
    }

    #[test]
    fn ttl_expiry_sends_rate_limited_time_exceeded() {
        let mut r = router();
        r.port_mut(0).unwrap().add_neighbor(ip("10.0.1.1"), H1_MAC);
        r.set_icmp_config(IcmpConfig {
            errors_per_sec: 10,
            burst: 2,
            ..IcmpConfig::default()
        });
        let t = Instant(10_000_000_000);
        for _ in 0..5 {
            r.handle_frame(t, 0, udp("10.0.2.1", 1), Meta::default());
        }
        let out = drain(&mut r, t);
        assert_eq!(out.len(), 2, "burst of two, then limited");
        let i = wire::parse_ipv4(&out[0].1).unwrap();
        assert_eq!((i.src, i.dst), (ip("10.0.1.254"), ip("10.0.1.1")));
        assert_eq!(out[0].1[i.l4_offset()], icmp::ICMP_TIME_EXCEEDED);
        assert_eq!(r.counters.control_count("icmp_ratelimited"), 3);
        // 100 ms later one more token.
        r.handle_frame(
            t + Duration::from_millis(100),
            0,
            udp("10.0.2.1", 1),
            Meta::default(),
        );
        assert_eq!(drain(&mut r, t + Duration::from_millis(100)).len(), 1);
        let ttl = r
            .counters
            .drops()
            .find(|(k, _)| *k == "ttl_expired")
            .map(|(_, v)| v);
        assert_eq!(ttl, Some(6));
        // No route: net unreachable.
        r.handle_frame(
            t + Duration::from_secs(1),
            0,
            udp("192.0.2.1", 9),
            Meta::default(),
        );
        let out = drain(&mut r, t + Duration::from_secs(1));
        let i = wire::parse_ipv4(&out[0].1).unwrap();
        assert_eq!(out[0].1[i.l4_offset()], icmp::ICMP_DEST_UNREACHABLE);
    }
}
