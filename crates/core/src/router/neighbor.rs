//! Address resolution (RFC 826) on the router's Ethernet ports: the
//! neighbour table of each port, and for next hops not yet in it a bounded
//! hold queue ([`ArpConfig::hold_packets`]), a broadcast request, retries
//! every [`ArpConfig::retry`] and, after [`ArpConfig::max_tries`], a
//! timeout that drops what was held — counted (`arp_timeouts`,
//! `arp_dropped`, and `unresolved` for received traffic). Received ARP
//! packets follow RFC 826's merge rule: the sender is updated if known,
//! added if the packet is for us (or we are resolving it), requests for a
//! port's own address are answered, and packets waiting for the sender
//! are released into the output pipeline in arrival order.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::Ipv4Addr;

use super::Router;
use crate::arp::{self, Arp, ARP_REPLY, ARP_REQUEST};
use crate::packet::Packet;
use crate::time::Instant;
use crate::wire::{Ipv4Info, MacAddr};

/// A packet waiting for its next hop's MAC.
pub(super) struct Held {
    pub pkt: Packet,
    pub info: Ipv4Info,
    pub upstream_tf: Option<u64>,
    /// Originated by the router (not counted as received traffic).
    pub local: bool,
}

/// A next hop being resolved.
pub(super) struct Pending {
    held: VecDeque<Held>,
    tries: u32,
    next_at: Instant,
}

/// One port's neighbours: learned MACs and next hops being resolved.
#[derive(Default)]
pub(super) struct Neighbors {
    table: HashMap<Ipv4Addr, MacAddr>,
    /// Unresolved next hops (ordered, so timeouts replay deterministically).
    pending: BTreeMap<Ipv4Addr, Pending>,
}

impl Neighbors {
    pub fn learn(&mut self, ip: Ipv4Addr, mac: MacAddr) {
        self.table.insert(ip, mac);
    }
    /// The MAC learned (or configured) for `ip`, not a port's static peer.
    #[inline]
    pub fn learned(&self, ip: Ipv4Addr) -> Option<MacAddr> {
        self.table.get(&ip).copied()
    }
    /// Packets held, the router's own included.
    pub fn held(&self) -> usize {
        self.pending.values().map(|p| p.held.len()).sum()
    }
    /// Received packets held (what the router owes its ledger).
    pub fn held_traffic(&self) -> usize {
        self.pending
            .values()
            .flat_map(|e| e.held.iter())
            .filter(|h| !h.local)
            .count()
    }
    /// Some next hop is being resolved.
    pub fn resolving(&self) -> bool {
        !self.pending.is_empty()
    }
    /// When the next request retry or timeout is due.
    pub fn next_retry(&self) -> Option<Instant> {
        if self.pending.is_empty() {
            return None;
        }
        self.pending.values().map(|e| e.next_at).min()
    }
}

impl Router {
    /// Keep a packet until `next_hop` on port `out` is resolved, asking for
    /// it if nobody has yet.
    pub(super) fn hold(&mut self, now: Instant, out: u16, next_hop: Ipv4Addr, h: Held) {
        let limit = self.arp.hold_packets;
        self.arp_maybe = true;
        let Some(p) = self.ports.get_mut(out as usize) else {
            return;
        };
        let fresh = !p.nbr.pending.contains_key(&next_hop);
        let e = p.nbr.pending.entry(next_hop).or_insert_with(|| Pending {
            held: VecDeque::new(),
            tries: 0,
            next_at: now,
        });
        if e.held.len() >= limit {
            self.counters.ctl("arp_hold_overflow", 1);
            if !h.local {
                self.counters.unresolved += 1;
            }
        } else {
            e.held.push_back(h);
            self.counters.ctl("arp_held", 1);
        }
        if fresh {
            self.send_arp_request(now, out, next_hop);
        }
    }

    /// Start resolving `ip` on `port` now (if it is not resolved or being
    /// resolved), so the first packets to it need not wait. Live drivers
    /// call this for each port's link peer at start.
    pub fn resolve(&mut self, now: Instant, port: u16, ip: Ipv4Addr) {
        let Some(p) = self.ports.get_mut(port as usize) else {
            return;
        };
        if p.nbr.table.contains_key(&ip) || p.nbr.pending.contains_key(&ip) {
            return;
        }
        self.arp_maybe = true;
        p.nbr.pending.insert(
            ip,
            Pending {
                held: VecDeque::new(),
                tries: 0,
                next_at: now,
            },
        );
        self.send_arp_request(now, port, ip);
    }

    /// Resolve `ip` on `port` at the first [`Node::handle_timeout`](crate::node::Node::handle_timeout), so a
    /// driver that knows a port's link peer (live labs) need not wait for
    /// traffic to learn it, without calling the router with a time of its
    /// own.
    pub fn resolve_on_start(&mut self, port: u16, ip: Ipv4Addr) {
        self.start_resolve.push((port, ip));
    }

    /// Send a gratuitous ARP (RFC 5227 announcement) on `port` at the first
    /// [`Node::handle_timeout`](crate::node::Node::handle_timeout): on a
    /// shared domain, switches learn where the router is before any
    /// traffic needs it, as they do when a real interface comes up.
    pub fn announce_on_start(&mut self, port: u16) {
        self.start_announce.push(port);
    }

    fn send_arp_request(&mut self, now: Instant, port: u16, ip: Ipv4Addr) {
        let retry = self.arp.retry;
        let Some(p) = self.ports.get_mut(port as usize) else {
            return;
        };
        let Some(e) = p.nbr.pending.get_mut(&ip) else {
            return;
        };
        e.tries += 1;
        e.next_at = now + retry;
        let req = Arp {
            oper: ARP_REQUEST,
            sha: p.cfg.mac,
            spa: p.cfg.ip,
            tha: MacAddr::default(),
            tpa: ip,
        };
        let frame = arp::build_arp(p.cfg.mac, MacAddr::BROADCAST, &req);
        p.send_ctrl(now, frame);
        self.wake_port(port);
        self.counters.ctl("arp_requests_tx", 1);
    }

    /// RFC 826 reception: merge the sender into the table if it is there,
    /// add it if the packet is for us, answer requests for our address, and
    /// release packets that were waiting for the sender.
    pub(super) fn handle_arp(&mut self, now: Instant, port: u16, a: Arp) {
        let Some(p) = self.ports.get_mut(port as usize) else {
            return;
        };
        let for_us = a.tpa == p.cfg.ip;
        let sender_ok = a.spa != Ipv4Addr::UNSPECIFIED && p.cfg.on_link(a.spa) && a.spa != p.cfg.ip;
        let known = p.nbr.table.contains_key(&a.spa);
        if sender_ok && (known || for_us || p.nbr.pending.contains_key(&a.spa)) {
            p.nbr.table.insert(a.spa, a.sha);
        }
        let mut ctl: Vec<&'static str> = Vec::with_capacity(2);
        if a.oper == ARP_REQUEST {
            ctl.push("arp_requests_rx");
            if for_us {
                let rep = Arp {
                    oper: ARP_REPLY,
                    sha: p.cfg.mac,
                    spa: p.cfg.ip,
                    tha: a.sha,
                    tpa: a.spa,
                };
                let frame = arp::build_arp(p.cfg.mac, a.sha, &rep);
                p.send_ctrl(now, frame);
                ctl.push("arp_replies_tx");
            }
        } else {
            ctl.push("arp_replies_rx");
        }
        if !for_us {
            ctl.push("arp_not_for_us");
        }
        let released = match (p.nbr.table.get(&a.spa).copied(), sender_ok) {
            (Some(mac), true) => p.nbr.pending.remove(&a.spa).map(|e| (mac, e)),
            _ => None,
        };
        // A reply may have been queued.
        self.wake_port(port);
        for c in ctl {
            self.counters.ctl(c, 1);
        }
        if let Some((mac, e)) = released {
            self.counters.ctl("arp_resolved", 1);
            self.release(now, port, mac, e.held);
        }
    }

    fn release(&mut self, now: Instant, port: u16, mac: MacAddr, held: VecDeque<Held>) {
        for mut h in held {
            if let Some(d) = h.pkt.data.get_mut(0..6) {
                d.copy_from_slice(&mac.0);
            }
            if h.local {
                self.enqueue(port, h.pkt, now);
            } else {
                self.output(now, port, h.pkt, &h.info, h.upstream_tf);
            }
        }
    }

    /// Retry or give up on next hops whose timer ran out.
    pub(super) fn arp_timeouts(&mut self, now: Instant) {
        for port in 0..self.ports.len() {
            let due: Vec<Ipv4Addr> = self.ports[port]
                .nbr
                .pending
                .iter()
                .filter(|(_, e)| e.next_at <= now)
                .map(|(ip, _)| *ip)
                .collect();
            for ip in due {
                let tries = self.ports[port].nbr.pending.get(&ip).map_or(0, |e| e.tries);
                if tries < self.arp.max_tries {
                    self.send_arp_request(now, port as u16, ip);
                    continue;
                }
                let Some(e) = self.ports[port].nbr.pending.remove(&ip) else {
                    continue;
                };
                self.counters.ctl("arp_timeouts", 1);
                let n = e.held.len() as u64;
                let local = e.held.iter().filter(|h| h.local).count() as u64;
                self.counters.ctl("arp_dropped", n);
                self.counters.unresolved += n - local;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::arp::ArpConfig;
    use crate::node::Node;
    use crate::packet::Meta;
    use crate::time::Duration;
    use crate::wire;

    #[test]
    fn answers_arp_for_its_own_address_only() {
        let mut r = router();
        let t = Instant(1_000);
        let q = arp_frame(
            ARP_REQUEST,
            H1_MAC,
            "10.0.1.1",
            MacAddr::default(),
            "10.0.1.254",
            MacAddr::BROADCAST,
        );
        r.handle_frame(t, 0, q, Meta::default());
        let out = drain(&mut r, t);
        assert_eq!(out.len(), 1);
        let (port, f) = &out[0];
        assert_eq!(*port, 0);
        let a = arp::parse_arp(f).unwrap();
        assert_eq!(
            (a.oper, a.sha, a.spa, a.tha, a.tpa),
            (ARP_REPLY, R_MAC0, ip("10.0.1.254"), H1_MAC, ip("10.0.1.1"))
        );
        assert_eq!(wire::eth_dst(f), Some(H1_MAC));
        // The requester was learned (RFC 826: the request was for us).
        assert_eq!(r.ports()[0].neighbor(ip("10.0.1.1")), Some(H1_MAC));
        // A request for another address (or the other port's) is ignored.
        let q = arp_frame(
            ARP_REQUEST,
            H1_MAC,
            "10.0.1.1",
            MacAddr::default(),
            "10.0.2.254",
            MacAddr::BROADCAST,
        );
        r.handle_frame(t, 0, q, Meta::default());
        assert!(drain(&mut r, t).is_empty());
        assert_eq!(r.counters.control_count("arp_requests_rx"), 2);
        assert_eq!(r.counters.control_count("arp_replies_tx"), 1);
        assert_eq!(r.counters.control_count("arp_not_for_us"), 1);
    }

    #[test]
    fn resolves_next_hop_holds_and_releases_in_order() {
        let mut r = router();
        let t = Instant(1_000_000);
        for i in 0..3 {
            r.handle_frame(t + Duration(i), 0, udp("10.0.2.1", 64), Meta::default());
        }
        assert_eq!(r.held(), 3);
        let out = drain(&mut r, t);
        assert_eq!(out.len(), 1, "one request for three packets");
        let a = arp::parse_arp(&out[0].1).unwrap();
        assert_eq!(
            (out[0].0, a.oper, a.tpa, a.spa),
            (1, ARP_REQUEST, ip("10.0.2.1"), ip("10.0.2.254"))
        );
        assert_eq!(wire::eth_dst(&out[0].1), Some(MacAddr::BROADCAST));
        let rep = arp_frame(ARP_REPLY, H2_MAC, "10.0.2.1", R_MAC1, "10.0.2.254", R_MAC1);
        r.handle_frame(t + Duration::from_micros(50), 1, rep, Meta::default());
        let out = drain(&mut r, t + Duration::from_micros(50));
        assert_eq!(out.len(), 3);
        for (p, f) in &out {
            assert_eq!(*p, 1);
            assert_eq!(wire::eth_dst(f), Some(H2_MAC));
            assert_eq!(wire::eth_src(f), Some(R_MAC1));
            assert_eq!(wire::parse_ipv4(f).unwrap().ttl, 63);
        }
        assert_eq!(r.counters.forwarded, 3);
        assert_eq!(r.held(), 0);
        // Resolved: the next packet goes at once. Via a gateway, too.
        r.handle_frame(
            t + Duration::from_micros(60),
            0,
            udp("10.9.3.3", 64),
            Meta::default(),
        );
        let out = drain(&mut r, t + Duration::from_micros(60));
        assert_eq!(out.len(), 1);
        assert_eq!(wire::eth_dst(&out[0].1), Some(H2_MAC));
    }

    #[test]
    fn unanswered_arp_retries_then_drops_and_counts() {
        let mut r = router();
        r.set_arp_config(ArpConfig {
            hold_packets: 2,
            retry: Duration::from_millis(100),
            max_tries: 3,
        });
        let t = Instant(5_000_000_000);
        for _ in 0..5 {
            r.handle_frame(t, 0, udp("10.0.2.7", 64), Meta::default());
        }
        assert_eq!(r.held(), 2);
        assert_eq!(r.counters.unresolved, 3);
        assert_eq!(r.counters.control_count("arp_hold_overflow"), 3);
        let mut requests = 0;
        let mut now = t;
        while let Some(at) = r.poll_timeout(now) {
            now = at.max(now);
            for tx in crate::node::step(&mut r, now) {
                requests += arp::parse_arp(&tx.pkt.data).is_ok() as u32;
            }
            if now > t + Duration::from_secs(2) {
                break;
            }
        }
        assert_eq!(requests, 3);
        assert_eq!(r.counters.control_count("arp_timeouts"), 1);
        assert_eq!(r.counters.unresolved, 5);
        assert_eq!(r.held(), 0);
        assert_eq!(r.poll_timeout(now), None, "nothing left to do");
    }
}
