//! The measurement payload that qosnet traffic sources put at the start of
//! every UDP datagram they send, in sim and live alike, so a sink can
//! compute one-way delay, loss and reordering from the bytes alone.
//!
//! Two layouts, chosen by the payload's length (a receiver knows it from
//! the UDP length, so neither needs a type field):
//!
//! * **full** (payload ≥ 24 bytes, IP ≥ 52; big-endian): magic `b"QoSn"`,
//!   flow id u32, sequence number u64, send time u64 (nanoseconds on the
//!   sender's clock; in the simulator, virtual time; live, CLOCK_REALTIME).
//! * **compact** (payload 12–23 bytes, IP 40–51: IMIX's 40-byte packets and
//!   minimum Ethernet frames, IP 46): flow id u24, the low 32 bits of the
//!   sequence number, the low 40 bits of the send time. The receiver
//!   restores the high bits: the sequence number nearest the flow's highest
//!   one so far, the send time nearest its own receive time. Exact while a
//!   flow reorders by less than 2^31 packets and one-way delays (or clock
//!   offsets) stay within ±2^39 ns (±549 s) — beyond anything a scenario
//!   can produce (every delay, rate and queue is bounded at load).
//!
//! Payloads below 12 bytes (IP 28–39) cannot carry a probe: scenario files
//! and `qosnet gen` refuse them ([`MIN_IP_SIZE`]), in sim and live alike.

pub const PROBE_MAGIC: [u8; 4] = *b"QoSn";
/// Length of the full probe.
pub const PROBE_LEN: usize = 24;
/// Length of the compact probe: the smallest payload that is measured.
pub const COMPACT_LEN: usize = 12;
/// IPv4 + UDP header bytes in front of the payload.
pub const IP_UDP_HDR: usize = 28;
/// Smallest IP packet that carries a probe (the compact one).
pub const MIN_IP_SIZE: usize = IP_UDP_HDR + COMPACT_LEN;
/// Largest flow id a compact probe carries (u24).
pub const COMPACT_MAX_FLOW: u32 = (1 << 24) - 1;

const TX_BITS: u32 = 40;
const TX_MASK: u64 = (1 << TX_BITS) - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub flow: u32,
    pub seq: u64,
    pub tx_ns: u64,
}

/// A compact probe as read from the wire: the high bits of the sequence
/// number and send time are the receiver's to restore ([`Compact::resolve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compact {
    pub flow: u32,
    pub seq_lo: u32,
    pub tx_lo: u64,
}

/// What a payload holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    Full(Probe),
    Compact(Compact),
}

impl Decoded {
    pub fn flow(&self) -> u32 {
        match self {
            Decoded::Full(p) => p.flow,
            Decoded::Compact(c) => c.flow,
        }
    }
    /// The probe, with a compact one's high bits restored against the
    /// flow's highest sequence number so far and the receive time.
    pub fn resolve(self, max_seq: Option<u64>, rx_ns: u64) -> Probe {
        match self {
            Decoded::Full(p) => p,
            Decoded::Compact(c) => c.resolve(max_seq, rx_ns),
        }
    }
}

impl Compact {
    pub fn resolve(self, max_seq: Option<u64>, rx_ns: u64) -> Probe {
        // The sequence number with these low 32 bits nearest the highest
        // seen (the first packet of a flow is near 0).
        let m = max_seq.unwrap_or(0);
        let lo = self.seq_lo as u64;
        let base = m & !0xffff_ffff;
        let seq = [base.checked_sub(1 << 32), Some(base), base.checked_add(1 << 32)]
            .into_iter()
            .flatten()
            .map(|b| b | lo)
            .min_by_key(|&s| s.abs_diff(m))
            .unwrap_or(lo);
        // The send time with these low 40 bits nearest the receive time:
        // the delay modulo 2^40 read as a signed number.
        let d = (rx_ns & TX_MASK).wrapping_sub(self.tx_lo) & TX_MASK;
        let d = if d >= 1 << (TX_BITS - 1) {
            d as i64 - (1i64 << TX_BITS)
        } else {
            d as i64
        };
        let tx_ns = (rx_ns as i64).saturating_sub(d).max(0) as u64;
        Probe {
            flow: self.flow,
            seq,
            tx_ns,
        }
    }
}

/// The payload is too short for any probe (under [`COMPACT_LEN`] bytes), or
/// a compact probe cannot name the flow (id above [`COMPACT_MAX_FLOW`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoesNotFit;

impl Probe {
    pub fn encode(&self) -> [u8; PROBE_LEN] {
        let mut b = [0u8; PROBE_LEN];
        b[0..4].copy_from_slice(&PROBE_MAGIC);
        b[4..8].copy_from_slice(&self.flow.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..24].copy_from_slice(&self.tx_ns.to_be_bytes());
        b
    }
    /// The compact layout (12 bytes).
    pub fn encode_compact(&self) -> Result<[u8; COMPACT_LEN], DoesNotFit> {
        if self.flow > COMPACT_MAX_FLOW {
            return Err(DoesNotFit);
        }
        let mut b = [0u8; COMPACT_LEN];
        b[0..3].copy_from_slice(&self.flow.to_be_bytes()[1..]);
        b[3..7].copy_from_slice(&(self.seq as u32).to_be_bytes());
        b[7..12].copy_from_slice(&(self.tx_ns & TX_MASK).to_be_bytes()[3..]);
        Ok(b)
    }
    /// Write the probe at the start of `payload`, in the layout its length
    /// calls for; the rest of the payload is left as it is.
    pub fn write_into(&self, payload: &mut [u8]) -> Result<(), DoesNotFit> {
        if payload.len() >= PROBE_LEN {
            payload[..PROBE_LEN].copy_from_slice(&self.encode());
        } else if payload.len() >= COMPACT_LEN {
            payload[..COMPACT_LEN].copy_from_slice(&self.encode_compact()?);
        } else {
            return Err(DoesNotFit);
        }
        Ok(())
    }
    /// A full probe only: `None` if the payload is too short or lacks the
    /// magic.
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
    /// Either layout, by the payload's length: `None` if it is shorter than
    /// a compact probe, or long enough for a full one without its magic.
    pub fn decode_any(b: &[u8]) -> Option<Decoded> {
        if b.len() >= PROBE_LEN {
            return Probe::decode(b).map(Decoded::Full);
        }
        if b.len() < COMPACT_LEN {
            return None;
        }
        let mut f = [0u8; 4];
        f[1..].copy_from_slice(&b[0..3]);
        let mut t = [0u8; 8];
        t[3..].copy_from_slice(&b[7..12]);
        Some(Decoded::Compact(Compact {
            flow: u32::from_be_bytes(f),
            seq_lo: u32::from_be_bytes([b[3], b[4], b[5], b[6]]),
            tx_lo: u64::from_be_bytes(t),
        }))
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
        assert_eq!(Probe::decode_any(&b), None);
    }

    /// Every payload length from 12 up carries a probe that decodes to what
    /// was sent; shorter ones are refused.
    #[test]
    fn every_length_from_twelve_roundtrips() {
        let p = Probe {
            flow: 70_000,
            seq: 5,
            tx_ns: 1_700_000_000_123_456_789,
        };
        let rx = p.tx_ns + 16_348_000;
        for len in 0..64 {
            let mut buf = vec![0xa5u8; len];
            let w = p.write_into(&mut buf);
            if len < COMPACT_LEN {
                assert_eq!(w, Err(DoesNotFit), "{len}");
                assert_eq!(Probe::decode_any(&buf), None, "{len}");
                continue;
            }
            assert_eq!(w, Ok(()));
            let d = Probe::decode_any(&buf).expect("decodes");
            assert_eq!(d.flow(), 70_000);
            assert_eq!(d.resolve(Some(4), rx), p, "{len}");
        }
    }

    /// The receiver restores the high bits across wraps of the low ones,
    /// for late, reordered and (with unsynchronised clocks) early packets.
    #[test]
    fn compact_restores_high_bits() {
        let m32 = 1u64 << 32;
        for (seq, max_seq) in [
            (0, None),
            (m32 + 3, Some(m32 - 2)),
            (m32 - 2, Some(m32 + 3)),
            (7 * m32, Some(7 * m32 + 100)),
        ] {
            for (tx, rx) in [
                (TX_MASK - 5, TX_MASK + 100),
                (3 << 40, (3 << 40) + 400_000_000_000),
                (5 << 40, (5 << 40) - 1_000),
                (0, 10),
            ] {
                let p = Probe {
                    flow: 1,
                    seq,
                    tx_ns: tx,
                };
                let d = Probe::decode_any(&p.encode_compact().unwrap()).unwrap();
                assert_eq!(
                    d.resolve(max_seq, rx),
                    p,
                    "seq {seq} max {max_seq:?} tx {tx} rx {rx}"
                );
            }
        }
        let big = Probe {
            flow: COMPACT_MAX_FLOW + 1,
            seq: 0,
            tx_ns: 0,
        };
        assert_eq!(big.encode_compact(), Err(DoesNotFit));
    }
}
