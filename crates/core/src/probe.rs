//! The measurement payload that qosnet traffic sources put at the start of
//! every UDP datagram they send, in sim and live alike, so a sink can
//! compute one-way delay, loss and reordering from the bytes alone.
//!
//! Two layouts, chosen by the payload's length (a receiver knows it from
//! the UDP length, so neither needs a type field). Both say they are
//! qosnet's, and which version of the layout they are, so a sink counts
//! anybody else's datagram (a scan, a flood, another tool's traffic) as
//! garbage instead of creating a flow for it:
//!
//! * **full** (payload ≥ 24 bytes, IP ≥ 52; big-endian): magic `b"QoSn"`,
//!   flow id u32, the layout's version ([`PROBE_VERSION`]) u8, sequence
//!   number u56, send time u64 (nanoseconds on the sender's clock; in the
//!   simulator, virtual time; live, CLOCK_REALTIME).
//! * **compact** (payload 12–23 bytes, IP 40–51: IMIX's 40-byte packets and
//!   minimum Ethernet frames, IP 46): a check byte, flow id u24, the low 24
//!   bits of the sequence number, the low 40 bits of the send time. The
//!   check byte is a CRC-8 of the other eleven bytes keyed with the
//!   version, so a random 12–23-byte payload passes for a probe once in
//!   256 (a full probe's magic and version: once in 2^40). The receiver
//!   restores the high bits: the sequence number nearest the flow's
//!   highest one so far, the send time nearest its own receive time. Exact
//!   while a flow reorders by less than 2^23 packets and one-way delays
//!   (or clock offsets) stay within ±2^39 ns (±549 s) — beyond anything a
//!   scenario can produce (every delay, rate and queue is bounded at load).
//!
//! Payloads below 12 bytes (IP 28–39) cannot carry a probe: scenario files
//! and `qosnet gen` refuse them ([`MIN_IP_SIZE`]), in sim and live alike.

pub const PROBE_MAGIC: [u8; 4] = *b"QoSn";
/// The probe layouts' version: a full probe carries it after the flow
/// id, a compact one keys its check byte with it. A sink ignores (and
/// counts) probes of another version.
pub const PROBE_VERSION: u8 = 1;
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
/// Bits of the sequence number a compact probe carries.
const SEQ_BITS: u32 = 24;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// Bits of the sequence number a full probe carries (the top byte of its
/// u64 holds the version).
pub const FULL_SEQ_MASK: u64 = (1 << 56) - 1;

/// CRC-8 (polynomial 0x07, as in ATM HEC and SMBus) of `b`, started from
/// `init`: the compact probe's check byte, keyed with the version.
fn crc8(init: u8, b: &[u8]) -> u8 {
    let mut c = init;
    for &x in b {
        c ^= x;
        for _ in 0..8 {
            c = if c & 0x80 != 0 { (c << 1) ^ 0x07 } else { c << 1 };
        }
    }
    c
}

/// The check byte of a compact probe whose other eleven bytes are `rest`.
fn compact_check(rest: &[u8]) -> u8 {
    crc8(0x50 ^ PROBE_VERSION, rest)
}

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
    /// The low 24 bits of the sequence number.
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
        // The sequence number with these low 24 bits nearest the highest
        // seen (the first packet of a flow is near 0).
        let m = max_seq.unwrap_or(0);
        let lo = self.seq_lo as u64 & SEQ_MASK;
        let base = m & !SEQ_MASK;
        let seq = [
            base.checked_sub(1 << SEQ_BITS),
            Some(base),
            base.checked_add(1 << SEQ_BITS),
        ]
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
        b[8..16].copy_from_slice(&(self.seq & FULL_SEQ_MASK).to_be_bytes());
        b[8] = PROBE_VERSION;
        b[16..24].copy_from_slice(&self.tx_ns.to_be_bytes());
        b
    }
    /// The compact layout (12 bytes).
    pub fn encode_compact(&self) -> Result<[u8; COMPACT_LEN], DoesNotFit> {
        if self.flow > COMPACT_MAX_FLOW {
            return Err(DoesNotFit);
        }
        let mut b = [0u8; COMPACT_LEN];
        b[1..4].copy_from_slice(&self.flow.to_be_bytes()[1..]);
        b[4..7].copy_from_slice(&(self.seq & SEQ_MASK).to_be_bytes()[5..]);
        b[7..12].copy_from_slice(&(self.tx_ns & TX_MASK).to_be_bytes()[3..]);
        b[0] = compact_check(&b[1..]);
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
    /// A full probe only: `None` if the payload is too short, or lacks the
    /// magic or this version.
    pub fn decode(b: &[u8]) -> Option<Probe> {
        if b.len() < PROBE_LEN || b[0..4] != PROBE_MAGIC || b[8] != PROBE_VERSION {
            return None;
        }
        let u32at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        let u64at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Some(Probe {
            flow: u32at(4),
            seq: u64at(8) & FULL_SEQ_MASK,
            tx_ns: u64at(16),
        })
    }
    /// Either layout, by the payload's length: `None` if it is shorter than
    /// a compact probe, long enough for a full one without its magic and
    /// version, or compact with a wrong check byte.
    pub fn decode_any(b: &[u8]) -> Option<Decoded> {
        if b.len() >= PROBE_LEN {
            return Probe::decode(b).map(Decoded::Full);
        }
        if b.len() < COMPACT_LEN || b[0] != compact_check(&b[1..COMPACT_LEN]) {
            return None;
        }
        let mut f = [0u8; 4];
        f[1..].copy_from_slice(&b[1..4]);
        let mut t = [0u8; 8];
        t[3..].copy_from_slice(&b[7..12]);
        Some(Decoded::Compact(Compact {
            flow: u32::from_be_bytes(f),
            seq_lo: u32::from_be_bytes([0, b[4], b[5], b[6]]),
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
        let m24 = 1u64 << SEQ_BITS;
        for (seq, max_seq) in [
            (0, None),
            (m24 + 3, Some(m24 - 2)),
            (m24 - 2, Some(m24 + 3)),
            (7 * m24, Some(7 * m24 + 100)),
            ((1 << 40) + 5, Some((1 << 40) - 5)),
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

    /// Anybody else's datagram is not a probe: a wrong magic or version
    /// (full), a wrong check byte (compact). Of 100 000 random payloads of
    /// each compact length, about one in 256 passes (the check byte is 8
    /// bits); of full ones, none.
    #[test]
    fn garbage_and_other_versions_are_not_probes() {
        let p = Probe {
            flow: 3,
            seq: 9,
            tx_ns: 77,
        };
        let mut b = p.encode();
        b[8] = PROBE_VERSION + 1;
        assert_eq!(Probe::decode_any(&b), None, "another version");
        let mut c = p.encode_compact().unwrap();
        for i in 0..COMPACT_LEN {
            for bit in 0..8 {
                c[i] ^= 1 << bit;
                assert_eq!(Probe::decode_any(&c), None, "byte {i} bit {bit} flipped");
                c[i] ^= 1 << bit;
            }
        }
        // A deterministic generator: xorshift64.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut compact, mut full) = (0, 0);
        for n in 0..100_000 {
            let len = COMPACT_LEN + n % (PROBE_LEN + 8 - COMPACT_LEN);
            let buf: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            match Probe::decode_any(&buf) {
                Some(Decoded::Compact(_)) => compact += 1,
                Some(Decoded::Full(_)) => full += 1,
                None => {}
            }
        }
        assert_eq!(full, 0);
        // 100 000 * 12/20 compact-length payloads / 256 = 234 expected.
        assert!(
            (150..330).contains(&compact),
            "{compact} random compact payloads passed"
        );
    }
}
