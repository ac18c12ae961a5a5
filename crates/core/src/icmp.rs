//! ICMP messages a router originates (RFC 792, with the router rules of
//! RFC 1812 §4.3): echo replies for its own addresses, and time exceeded /
//! destination unreachable errors about packets it could not forward.
//!
//! Builders return a whole Ethernet frame with zero MAC addresses: the
//! router fills them in when it knows the output port and next hop. They
//! take frames that [`crate::wire::parse_ipv4`] already validated, and
//! still never index outside the slice they are given.

use std::net::Ipv4Addr;

use crate::wire::{self, Ipv4Info, ETHERTYPE_IPV4, ETH_HDR, ETH_MIN_NO_FCS, IPPROTO_ICMP, IPV4_HDR};

pub const ICMP_ECHO_REPLY: u8 = 0;
pub const ICMP_DEST_UNREACHABLE: u8 = 3;
pub const ICMP_ECHO_REQUEST: u8 = 8;
pub const ICMP_TIME_EXCEEDED: u8 = 11;
/// Destination unreachable code 0: net unreachable (no route).
pub const CODE_NET_UNREACHABLE: u8 = 0;
/// Time exceeded code 0: TTL exceeded in transit.
pub const CODE_TTL_EXCEEDED: u8 = 0;
/// TTL of packets the router originates (RFC 1700's recommended default).
pub const ORIGIN_TTL: u8 = 64;
/// Largest IP datagram an ICMP error may make (RFC 1812 §4.3.2.3).
pub const ERROR_MAX_IP: usize = 576;

/// An Ethernet/IPv4 frame (zero MACs) carrying `payload` as protocol
/// `proto`, with a valid header checksum, padded to the Ethernet minimum.
pub fn build_ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, ident: u16, payload: &[u8]) -> Vec<u8> {
    let ip_len = (IPV4_HDR + payload.len()).min(u16::MAX as usize);
    let mut f = vec![0u8; (ETH_HDR + ip_len).max(ETH_MIN_NO_FCS)];
    f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    let ip = &mut f[ETH_HDR..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&ident.to_be_bytes());
    ip[8] = ttl;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = wire::checksum(&ip[..IPV4_HDR]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let n = ip_len - IPV4_HDR;
    ip[IPV4_HDR..IPV4_HDR + n].copy_from_slice(&payload[..n]);
    f
}

/// The ICMP message of a validated frame, if it is one and not a
/// fragment (fragments of ICMP are rare and never reassembled here).
fn icmp_body<'a>(f: &'a [u8], info: &Ipv4Info) -> Option<&'a [u8]> {
    if info.proto != IPPROTO_ICMP || is_fragment(f) {
        return None;
    }
    f.get(info.l4_offset()..ETH_HDR + info.total_len)
        .filter(|b| b.len() >= 8)
}

/// Whether a validated frame is a fragment (MF set or offset non-zero).
fn is_fragment(f: &[u8]) -> bool {
    f.get(ETH_HDR + 6..ETH_HDR + 8)
        .is_some_and(|b| u16::from_be_bytes([b[0], b[1]]) & 0x3fff != 0)
}

/// The echo reply (RFC 792) to a frame holding a well-formed ICMP echo
/// request with a valid checksum; `None` for anything else. The reply goes
/// from the address that was pinged back to the sender, with the request's
/// identifier, sequence number and data.
pub fn echo_reply(f: &[u8], info: &Ipv4Info, ident: u16) -> Option<Vec<u8>> {
    let body = icmp_body(f, info)?;
    if body[0] != ICMP_ECHO_REQUEST || body[1] != 0 || wire::ones_sum(0, body) != 0xffff {
        return None;
    }
    let mut msg = body.to_vec();
    msg[0] = ICMP_ECHO_REPLY;
    msg[2] = 0;
    msg[3] = 0;
    let c = wire::checksum(&msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    Some(build_ipv4(
        info.dst,
        info.src,
        IPPROTO_ICMP,
        ORIGIN_TTL,
        ident,
        &msg,
    ))
}

/// Whether an address may be the source or destination of a packet an ICMP
/// error is sent about (RFC 1812 §4.3.2.7, §5.3.7): not 0/8, 127/8,
/// multicast, class E or limited broadcast.
pub fn is_unicast(a: Ipv4Addr) -> bool {
    let o = a.octets();
    !(o[0] == 0 || o[0] == 127 || o[0] >= 224)
}

/// An ICMP error (`typ`, `code`) from `src` about the packet in `f`, or
/// `None` where RFC 1812 §4.3.2.7 forbids one: the packet is itself an
/// ICMP error, a non-initial fragment, or has a non-unicast source or
/// destination. The error quotes as much of the packet as fits in a
/// 576-byte datagram (§4.3.2.3).
pub fn error(f: &[u8], info: &Ipv4Info, src: Ipv4Addr, typ: u8, code: u8, ident: u16) -> Option<Vec<u8>> {
    if !is_unicast(info.src) || !is_unicast(info.dst) {
        return None;
    }
    let frag = f.get(ETH_HDR + 6..ETH_HDR + 8)?;
    if u16::from_be_bytes([frag[0], frag[1]]) & 0x1fff != 0 {
        return None;
    }
    if info.proto == IPPROTO_ICMP {
        // Only queries (echo, timestamp, ...) may draw an error; an ICMP
        // message too short to tell is treated as an error message.
        let t = f.get(info.l4_offset()).copied()?;
        if !matches!(t, 0 | 8 | 13 | 14 | 15 | 16 | 17 | 18) {
            return None;
        }
    }
    let orig = f.get(ETH_HDR..ETH_HDR + info.total_len)?;
    let quote = orig.len().min(ERROR_MAX_IP - IPV4_HDR - 8);
    let mut msg = vec![0u8; 8 + quote];
    msg[0] = typ;
    msg[1] = code;
    msg[8..].copy_from_slice(&orig[..quote]);
    let c = wire::checksum(&msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    Some(build_ipv4(src, info.src, IPPROTO_ICMP, ORIGIN_TTL, ident, &msg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::parse_ipv4;

    fn echo_request(data: &[u8]) -> Vec<u8> {
        let mut msg = vec![ICMP_ECHO_REQUEST, 0, 0, 0, 0x12, 0x34, 0, 7];
        msg.extend_from_slice(data);
        let c = wire::checksum(&msg);
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        build_ipv4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            IPPROTO_ICMP,
            64,
            1,
            &msg,
        )
    }

    #[test]
    fn echo_reply_mirrors_request() {
        let req = echo_request(b"abcdefgh");
        let info = parse_ipv4(&req).unwrap();
        let rep = echo_reply(&req, &info, 9).unwrap();
        let ri = parse_ipv4(&rep).unwrap();
        assert_eq!(
            (ri.src, ri.dst, ri.proto, ri.ttl),
            (info.dst, info.src, IPPROTO_ICMP, 64)
        );
        let body = &rep[ri.l4_offset()..ETH_HDR + ri.total_len];
        assert_eq!(body[0], ICMP_ECHO_REPLY);
        assert_eq!(wire::ones_sum(0, body), 0xffff, "ICMP checksum");
        assert_eq!(&body[4..], &req[info.l4_offset() + 4..ETH_HDR + info.total_len]);
        // A corrupted checksum or a reply is not answered.
        let mut bad = req.clone();
        bad[info.l4_offset() + 9] ^= 1;
        assert!(echo_reply(&bad, &parse_ipv4(&bad).unwrap(), 0).is_none());
        assert!(echo_reply(&rep, &ri, 0).is_none());
    }

    #[test]
    fn errors_quote_and_obey_rfc1812() {
        let spec = wire::UdpSpec {
            src_mac: Default::default(),
            dst_mac: Default::default(),
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 9, 0, 1),
            sport: 1,
            dport: 2,
            tos: 0,
            ttl: 1,
            ident: 3,
        };
        let big = wire::build_udp(&spec, 1400, b"x");
        let info = parse_ipv4(&big).unwrap();
        let r = Ipv4Addr::new(10, 0, 0, 254);
        let e = error(&big, &info, r, ICMP_TIME_EXCEEDED, 0, 5).unwrap();
        let ei = parse_ipv4(&e).unwrap();
        assert_eq!((ei.src, ei.dst, ei.total_len), (r, info.src, ERROR_MAX_IP));
        let body = &e[ei.l4_offset()..ETH_HDR + ei.total_len];
        assert_eq!(wire::ones_sum(0, body), 0xffff);
        assert_eq!(&body[8..28], &big[ETH_HDR..ETH_HDR + 20]);
        // No error about an error, nor about a broadcast source.
        assert!(error(&e, &ei, r, ICMP_TIME_EXCEEDED, 0, 5).is_none());
        let mut s = spec;
        s.src = Ipv4Addr::BROADCAST;
        let b = wire::build_udp(&s, 100, b"");
        assert!(error(&b, &parse_ipv4(&b).unwrap(), r, ICMP_TIME_EXCEEDED, 0, 5).is_none());
        // An echo request (a query) may draw an error.
        let q = echo_request(b"");
        assert!(error(&q, &parse_ipv4(&q).unwrap(), r, ICMP_TIME_EXCEEDED, 0, 5).is_some());
    }
}
