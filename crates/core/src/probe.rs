//! The measurement payload that qosnet traffic sources put at the start of
//! every UDP datagram they send, in sim and live alike, so a sink can
//! compute one-way delay, loss and reordering from the bytes alone.
//!
//! Layout (big-endian, 24 bytes): magic `b"QoSn"`, flow id u32, sequence
//! number u64, send time u64 (nanoseconds on the sender's clock; in the
//! simulator, virtual time; live, CLOCK_REALTIME).

pub const PROBE_MAGIC: [u8; 4] = *b"QoSn";
pub const PROBE_LEN: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub flow: u32,
    pub seq: u64,
    pub tx_ns: u64,
}

impl Probe {
    pub fn encode(&self) -> [u8; PROBE_LEN] {
        let mut b = [0u8; PROBE_LEN];
        b[0..4].copy_from_slice(&PROBE_MAGIC);
        b[4..8].copy_from_slice(&self.flow.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..24].copy_from_slice(&self.tx_ns.to_be_bytes());
        b
    }
    /// `None` if the payload is too short or lacks the magic.
    pub fn decode(b: &[u8]) -> Option<Probe> {
        if b.len() < PROBE_LEN || b[0..4] != PROBE_MAGIC {
            return None;
        }
        let u32at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        let u64at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Some(Probe {
            flow: u32at(4),
            seq: u64at(8),
            tx_ns: u64at(16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_rejects() {
        let p = Probe {
            flow: 7,
            seq: 1 << 40,
            tx_ns: 123_456_789,
        };
        assert_eq!(Probe::decode(&p.encode()), Some(p));
        assert_eq!(Probe::decode(&p.encode()[..23]), None);
        let mut b = p.encode();
        b[0] = b'X';
        assert_eq!(Probe::decode(&b), None);
    }
}
