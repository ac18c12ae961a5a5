//! Ethernet II / IPv4 / UDP / ICMP / ARP views and builders on raw bytes.
//!
//! Packets are real frames in sim and live alike, so classification, DSCP
//! marking, TTL handling and checksums are this one piece of code. Frames are
//! handled as the kernel hands them to AF_PACKET: destination MAC first, no
//! preamble and no FCS (the link model adds those to the wire length).
//! Parsing never panics: every malformed frame maps to a [`Malformed`] reason
//! that callers count. IEEE 802.1Q VLAN tags are in [`vlan`].

pub mod vlan;

pub use vlan::{parse_vlan, pop_tag, push_tag, VlanError, VlanTag, VlanView, TPID_8021AD, TPID_8021Q};

use std::fmt;
use std::net::Ipv4Addr;

pub const ETH_HDR: usize = 14;
/// Minimum frame without FCS (64 bytes on the wire including the FCS).
pub const ETH_MIN_NO_FCS: usize = 60;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_ARP: u16 = 0x0806;
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPV4_HDR: usize = 20;
pub const UDP_HDR: usize = 8;

/// A 48-bit Ethernet address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// Group (multicast or broadcast) address: the I/G bit, the least
    /// significant bit of the first octet (IEEE 802 §8.2).
    pub fn is_group(&self) -> bool {
        self.0[0] & 1 != 0
    }
    /// A locally administered unicast address derived from a small id,
    /// so simulated and lab ports get stable, readable MACs.
    pub fn local(id: u32) -> Self {
        let b = id.to_be_bytes();
        MacAddr([0x02, 0x71, b[0], b[1], b[2], b[3]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// Why a frame was not accepted. Each reason is a separate counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Malformed {
    Truncated,
    NotIpv4,
    BadVersion,
    BadIhl,
    BadTotalLength,
    BadChecksum,
    Fragment,
    /// ARP that is not Ethernet/IPv4 request or reply (RFC 826).
    BadArp,
}

impl Malformed {
    pub fn name(self) -> &'static str {
        match self {
            Malformed::Truncated => "truncated",
            Malformed::NotIpv4 => "not_ipv4",
            Malformed::BadVersion => "bad_version",
            Malformed::BadIhl => "bad_ihl",
            Malformed::BadTotalLength => "bad_total_length",
            Malformed::BadChecksum => "bad_checksum",
            Malformed::Fragment => "fragment",
            Malformed::BadArp => "bad_arp",
        }
    }
}

fn rd16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn wr16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// RFC 1071 one's-complement sum over `data`, folded, not inverted.
pub fn ones_sum(acc: u32, data: &[u8]) -> u32 {
    // 32-bit words into a 64-bit sum, folded at the end: the same sum as
    // 16-bit words (2^16 = 1 modulo 2^16 - 1, RFC 1071 §2(B)) in half the
    // additions, without overflow for any length.
    let mut sum = acc as u64;
    let mut words = data.chunks_exact(4);
    for c in &mut words {
        sum += u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as u64;
    }
    let mut pairs = words.remainder().chunks_exact(2);
    for c in &mut pairs {
        sum += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = pairs.remainder() {
        sum += (*last as u64) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u32
}

/// [`ones_sum`] of an IPv4 header: the 20-byte header without options
/// (nearly every packet, checked at every hop) as five words the compiler
/// adds without a loop, others through [`ones_sum`].
#[inline]
fn header_sum(h: &[u8]) -> u32 {
    let Ok(h) = <&[u8; IPV4_HDR]>::try_from(h) else {
        return ones_sum(0, h);
    };
    let w = |k: usize| u32::from_be_bytes([h[k], h[k + 1], h[k + 2], h[k + 3]]) as u64;
    let mut sum = w(0) + w(4) + w(8) + w(12) + w(16);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u32
}

/// The Internet checksum of `data` (RFC 1071).
pub fn checksum(data: &[u8]) -> u16 {
    !(ones_sum(0, data) as u16)
}

/// RFC 1624 eq. 3 incremental update: HC' = ~(~HC + ~m + m').
pub fn checksum_adjust(hc: u16, old: u16, new: u16) -> u16 {
    let mut s = (!hc as u32) + (!old as u32 & 0xffff) + new as u32;
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Ethernet header fields of a frame.
pub fn eth_dst(f: &[u8]) -> Option<MacAddr> {
    f.get(0..6).map(|b| MacAddr(b.try_into().unwrap_or([0; 6])))
}
pub fn eth_src(f: &[u8]) -> Option<MacAddr> {
    f.get(6..12).map(|b| MacAddr(b.try_into().unwrap_or([0; 6])))
}
pub fn ethertype(f: &[u8]) -> Option<u16> {
    (f.len() >= ETH_HDR).then(|| rd16(f, 12))
}
pub fn set_eth_addrs(f: &mut [u8], src: MacAddr, dst: MacAddr) {
    if f.len() >= 12 {
        f[0..6].copy_from_slice(&dst.0);
        f[6..12].copy_from_slice(&src.0);
    }
}

/// The parsed, validated view of an IPv4 packet inside an Ethernet frame.
/// Offsets are into the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Info {
    pub ihl: usize,
    pub total_len: usize,
    pub tos: u8,
    pub ttl: u8,
    pub proto: u8,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    /// Source and destination port for UDP/TCP first fragments, else 0.
    pub sport: u16,
    pub dport: u16,
}

impl Ipv4Info {
    pub fn dscp(&self) -> u8 {
        self.tos >> 2
    }
    /// Offset of the L4 header within the frame.
    pub fn l4_offset(&self) -> usize {
        ETH_HDR + self.ihl
    }
}

/// Validate and parse the IPv4 header of an Ethernet frame: version, IHL,
/// total length against the frame, header checksum. Frames may carry
/// Ethernet padding beyond `total_len`.
#[inline]
pub fn parse_ipv4(f: &[u8]) -> Result<Ipv4Info, Malformed> {
    if f.len() < ETH_HDR {
        return Err(Malformed::Truncated);
    }
    if rd16(f, 12) != ETHERTYPE_IPV4 {
        return Err(Malformed::NotIpv4);
    }
    let ip = &f[ETH_HDR..];
    if ip.len() < IPV4_HDR {
        return Err(Malformed::Truncated);
    }
    if ip[0] >> 4 != 4 {
        return Err(Malformed::BadVersion);
    }
    let ihl = (ip[0] & 0x0f) as usize * 4;
    if ihl < IPV4_HDR {
        return Err(Malformed::BadIhl);
    }
    if ip.len() < ihl {
        return Err(Malformed::Truncated);
    }
    let total_len = rd16(ip, 2) as usize;
    if total_len < ihl || total_len > ip.len() {
        return Err(Malformed::BadTotalLength);
    }
    if header_sum(&ip[..ihl]) != 0xffff {
        return Err(Malformed::BadChecksum);
    }
    let proto = ip[9];
    let frag = rd16(ip, 6);
    let first_fragment = frag & 0x1fff == 0;
    let (mut sport, mut dport) = (0, 0);
    if first_fragment && (proto == IPPROTO_UDP || proto == IPPROTO_TCP) && total_len >= ihl + 4 {
        sport = rd16(ip, ihl);
        dport = rd16(ip, ihl + 2);
    }
    Ok(Ipv4Info {
        ihl,
        total_len,
        tos: ip[1],
        ttl: ip[8],
        proto,
        src: Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
        dst: Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
        sport,
        dport,
    })
}

/// Rewrite the TOS/DS byte, keeping the header checksum valid (RFC 1624).
pub fn set_tos(f: &mut [u8], tos: u8) {
    if f.len() < ETH_HDR + IPV4_HDR {
        return;
    }
    let ip = &mut f[ETH_HDR..];
    let old = rd16(ip, 0);
    ip[1] = tos;
    let new = rd16(ip, 0);
    let c = checksum_adjust(rd16(ip, 10), old, new);
    wr16(ip, 10, c);
}

/// Rewrite the DSCP (upper six bits of the DS byte), keeping ECN bits.
pub fn set_dscp(f: &mut [u8], dscp: u8) {
    if f.len() < ETH_HDR + IPV4_HDR {
        return;
    }
    let ecn = f[ETH_HDR + 1] & 0x03;
    set_tos(f, (dscp << 2) | ecn);
}

/// Decrement the TTL by one with an incremental checksum update.
/// Returns the new TTL; the caller must have checked TTL > 1.
#[inline]
pub fn decrement_ttl(f: &mut [u8]) -> u8 {
    let ip = &mut f[ETH_HDR..];
    let old = rd16(ip, 8);
    ip[8] = ip[8].saturating_sub(1);
    let new = rd16(ip, 8);
    let c = checksum_adjust(rd16(ip, 10), old, new);
    wr16(ip, 10, c);
    ip[8]
}

/// Set the TTL, keeping the header checksum valid (RFC 1624).
pub fn set_ttl(f: &mut [u8], ttl: u8) {
    if f.len() < ETH_HDR + IPV4_HDR {
        return;
    }
    let ip = &mut f[ETH_HDR..];
    let old = rd16(ip, 8);
    ip[8] = ttl;
    let new = rd16(ip, 8);
    let c = checksum_adjust(rd16(ip, 10), old, new);
    wr16(ip, 10, c);
}

/// Turn a UDP datagram around in place: swap IP addresses and UDP ports
/// (the checksum is a sum, so a swap keeps it valid) and set the MACs.
pub fn reflect_udp(f: &mut [u8], info: &Ipv4Info, src_mac: MacAddr, dst_mac: MacAddr) {
    if f.len() < info.l4_offset() + 4 {
        return;
    }
    set_eth_addrs(f, src_mac, dst_mac);
    let ip = ETH_HDR;
    for k in 0..4 {
        f.swap(ip + 12 + k, ip + 16 + k);
    }
    let l4 = info.l4_offset();
    f.swap(l4, l4 + 2);
    f.swap(l4 + 1, l4 + 3);
}

/// Fields of a UDP datagram to build.
#[derive(Clone, Copy, Debug)]
pub struct UdpSpec {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
    pub tos: u8,
    pub ttl: u8,
    pub ident: u16,
}

/// Build an Ethernet/IPv4/UDP frame whose IP packet is `ip_len` bytes long
/// (clamped to at least 28), with `payload` at the start of the UDP data
/// and zeros after it. Pads the frame to the Ethernet minimum. The UDP
/// checksum is left zero (allowed for IPv4, RFC 768) so rewriting it per hop
/// is never needed.
pub fn build_udp(spec: &UdpSpec, ip_len: usize, payload: &[u8]) -> Vec<u8> {
    let ip_len = ip_len.clamp(IPV4_HDR + UDP_HDR, 65535);
    let frame_len = (ETH_HDR + ip_len).max(ETH_MIN_NO_FCS);
    let mut f = vec![0u8; frame_len];
    set_eth_addrs(&mut f, spec.src_mac, spec.dst_mac);
    wr16(&mut f, 12, ETHERTYPE_IPV4);
    {
        let ip = &mut f[ETH_HDR..];
        ip[0] = 0x45;
        ip[1] = spec.tos;
        wr16(ip, 2, ip_len as u16);
        wr16(ip, 4, spec.ident);
        wr16(ip, 6, 0x4000); // DF
        ip[8] = spec.ttl;
        ip[9] = IPPROTO_UDP;
        ip[12..16].copy_from_slice(&spec.src.octets());
        ip[16..20].copy_from_slice(&spec.dst.octets());
        let c = checksum(&ip[..IPV4_HDR]);
        wr16(ip, 10, c);
        let udp = &mut ip[IPV4_HDR..];
        wr16(udp, 0, spec.sport);
        wr16(udp, 2, spec.dport);
        wr16(udp, 4, (ip_len - IPV4_HDR) as u16);
        let room = ip_len - IPV4_HDR - UDP_HDR;
        let n = payload.len().min(room);
        udp[UDP_HDR..UDP_HDR + n].copy_from_slice(&payload[..n]);
    }
    f
}

/// The UDP payload of a validated frame (empty if not UDP or truncated).
pub fn udp_payload<'a>(f: &'a [u8], info: &Ipv4Info) -> &'a [u8] {
    if info.proto != IPPROTO_UDP {
        return &[];
    }
    let start = info.l4_offset() + UDP_HDR;
    let end = ETH_HDR + info.total_len;
    f.get(start..end).unwrap_or(&[])
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The unrolled sum of a 20-byte header is the general sum, and any
        /// other length falls through to it.
        #[test]
        fn header_sum_is_ones_sum(h in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            proptest::prop_assert_eq!(header_sum(&h), ones_sum(0, &h));
            if h.len() >= IPV4_HDR {
                proptest::prop_assert_eq!(header_sum(&h[..IPV4_HDR]), ones_sum(0, &h[..IPV4_HDR]));
            }
        }
    }

    fn spec() -> UdpSpec {
        UdpSpec {
            src_mac: MacAddr::local(1),
            dst_mac: MacAddr::local(2),
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 1, 2),
            sport: 5000,
            dport: 6000,
            tos: 0,
            ttl: 64,
            ident: 7,
        }
    }

    #[test]
    fn build_then_parse_roundtrip() {
        let f = build_udp(&spec(), 1002, b"hello");
        assert_eq!(f.len(), 14 + 1002);
        let i = parse_ipv4(&f).unwrap();
        assert_eq!(
            (i.total_len, i.ttl, i.proto, i.sport, i.dport),
            (1002, 64, 17, 5000, 6000)
        );
        assert_eq!(&udp_payload(&f, &i)[..5], b"hello");
    }

    #[test]
    fn small_frames_are_padded() {
        let f = build_udp(&spec(), 28, &[]);
        assert_eq!(f.len(), ETH_MIN_NO_FCS);
        assert_eq!(parse_ipv4(&f).unwrap().total_len, 28);
    }

    #[test]
    fn incremental_updates_keep_checksum_valid() {
        let mut f = build_udp(&spec(), 100, &[]);
        for tos in [0x0c, 0x1c, 0x2c, 0x3c, 0xb8, 0] {
            set_tos(&mut f, tos);
            assert_eq!(parse_ipv4(&f).unwrap().tos, tos);
        }
        for _ in 0..63 {
            decrement_ttl(&mut f);
            parse_ipv4(&f).unwrap();
        }
        assert_eq!(parse_ipv4(&f).unwrap().ttl, 1);
        set_dscp(&mut f, 46);
        assert_eq!(parse_ipv4(&f).unwrap().dscp(), 46);
    }

    #[test]
    fn reflect_and_ttl_keep_checksums() {
        let mut f = build_udp(&spec(), 200, b"x");
        let i = parse_ipv4(&f).unwrap();
        reflect_udp(&mut f, &i, MacAddr::local(9), MacAddr::local(8));
        set_ttl(&mut f, 3);
        let r = parse_ipv4(&f).unwrap();
        assert_eq!(
            (r.src, r.dst, r.sport, r.dport, r.ttl),
            (i.dst, i.src, i.dport, i.sport, 3)
        );
        assert_eq!(eth_dst(&f), Some(MacAddr::local(8)));
    }

    #[test]
    fn malformed_frames_are_classified() {
        let good = build_udp(&spec(), 100, &[]);
        assert_eq!(parse_ipv4(&good[..10]), Err(Malformed::Truncated));
        assert_eq!(parse_ipv4(&good[..20]), Err(Malformed::Truncated));
        let mut f = good.clone();
        f[12] = 0x86;
        assert_eq!(parse_ipv4(&f), Err(Malformed::NotIpv4));
        let mut f = good.clone();
        f[14] = 0x44;
        assert_eq!(parse_ipv4(&f), Err(Malformed::BadIhl));
        let mut f = good.clone();
        f[14] = 0x65;
        assert_eq!(parse_ipv4(&f), Err(Malformed::BadVersion));
        let mut f = good.clone();
        f[16] = 0xff;
        assert_eq!(parse_ipv4(&f), Err(Malformed::BadTotalLength));
        let mut f = good.clone();
        f[14 + 12] ^= 1;
        assert_eq!(parse_ipv4(&f), Err(Malformed::BadChecksum));
    }
}
