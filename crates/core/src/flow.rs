//! Flow identity: the IPv4 5-tuple (RFC 2475 §2.3.1's microflow — source
//! and destination address, protocol, source and destination port).
//!
//! One type for every part of qosnet that names a flow: the router hashes
//! it into `meta.flow` for per-flow queueing, the TDP edge shaper and the
//! per-flow forwarding delays (ICC 2006 §II-B, §II-C) look reserved flows
//! up by it. Not to be confused with [`crate::sched::QueueKey`], which says
//! which metadata field a fair scheduler queues on.

use std::net::Ipv4Addr;

use crate::wire::Ipv4Info;

/// Exact 5-tuple identifying a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// IPv4 source address.
    pub src: Ipv4Addr,
    /// IPv4 destination address.
    pub dst: Ipv4Addr,
    /// IP protocol number.
    pub proto: u8,
    /// L4 source port (0 for protocols without ports).
    pub sport: u16,
    /// L4 destination port (0 for protocols without ports).
    pub dport: u16,
}

impl FlowKey {
    /// A well-mixed 32-bit id of the 5-tuple (FNV-1a), stable across runs,
    /// for per-flow queueing.
    #[inline]
    pub fn hash32(&self) -> u32 {
        let mut h: u32 = 0x811c_9dc5;
        let mut eat = |b: &[u8]| {
            for x in b {
                h ^= *x as u32;
                h = h.wrapping_mul(0x0100_0193);
            }
        };
        eat(&self.src.octets());
        eat(&self.dst.octets());
        eat(&[self.proto]);
        eat(&self.sport.to_be_bytes());
        eat(&self.dport.to_be_bytes());
        h
    }
}

impl From<&Ipv4Info> for FlowKey {
    fn from(i: &Ipv4Info) -> Self {
        FlowKey {
            src: i.src,
            dst: i.dst,
            proto: i.proto,
            sport: i.sport,
            dport: i.dport,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a over the tuple's bytes in network order, written out.
    fn fnv1a(bytes: &[u8]) -> u32 {
        bytes
            .iter()
            .fold(0x811c_9dc5u32, |h, &b| (h ^ b as u32).wrapping_mul(0x0100_0193))
    }

    #[test]
    fn hash_is_fnv1a_of_the_tuple_and_the_tdp_path_is_the_same_type() {
        // FNV-1a's published vector: "a" → 0xe40c292c.
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
        let k: crate::tdp::FlowKey = FlowKey {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 9, 9),
            proto: 17,
            sport: 5000,
            dport: 9,
        };
        let bytes = [10, 0, 0, 1, 10, 0, 9, 9, 17, 0x13, 0x88, 0, 9];
        assert_eq!(k.hash32(), fnv1a(&bytes));
        let other = FlowKey { sport: 5001, ..k };
        assert_ne!(k.hash32(), other.hash32());
    }
}
