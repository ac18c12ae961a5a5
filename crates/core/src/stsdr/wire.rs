//! DS frames: the state broadcast of phase 1 (Khan, Sahoo & Manjunath
//! §IV-A), byte by byte in `docs/stsdr-wire.md`.
//!
//! A DS frame is a raw Ethernet broadcast on the IEEE 802 local
//! experimental EtherType 0x88B6 (IEEE Std 802-2014 §9.2.2), normally
//! inside the STSDR's internal VLAN (an IEEE 802.1Q tag) so the broadcasts
//! stay among STSDR nodes. The paper's body — a 2-byte FE id, then per
//! queue a 4-byte arrival stamp and a 2-byte length, 6·N·K + 2 bytes — is
//! kept as is and preceded by a 14-byte qosnet header that makes it robust:
//! a version, flags (master, virtual state, heartbeat, lazy), the cycle
//! number (so a late frame is not taken for the current one, and random
//! tie-breaks agree), the sender's clock as a stamp (so ASORT compares
//! ages, which survive the 32-bit wrap), and N, K and the slots per queue
//! l, so a receiver can check the frame against its configuration.
//!
//! M-DS carries l slots per queue (the first l packets); S-DS is l = 1.
//! L-DS (the LAZY flag) is l = 1 with 8-byte slots: the burst's length,
//! then its head-of-line packet's own length, which phase 2 ranks the
//! burst by (§V-B: selection as in §IV, for variable sizes too).
//! An empty slot is all zeros (length 0 means no packet), and only
//! trailing slots of a queue may be empty. The master's frame may append the virtual-clock offsets
//! S_jk − V_j (8 bytes each) that let every forwarder re-synchronise its
//! clocks ([`crate::stsdr::sched::VirtualClocks::offsets`]).
//!
//! Parsing never panics and refuses bad frames with a [`DsError`] whose
//! [`name`](DsError::name) is a counter.

use super::sched::{Entry, FeState};
use super::Dims;
use crate::wire::{MacAddr, ETH_HDR, ETH_MIN_NO_FCS};

/// IEEE 802 Local Experimental EtherType 1.
pub const ETHERTYPE_DS: u16 = 0x88B6;
/// IEEE 802.1Q customer VLAN tag protocol identifier.
const TPID_8021Q: u16 = 0x8100;
/// Version of the format described here. 2: LAZY slots carry the head's
/// length (a version-1 receiver would misread them, so it refuses them).
pub const VERSION: u8 = 2;
/// qosnet's header before the paper's body.
pub const HEADER_LEN: usize = 14;
/// Bytes per queue slot: 4-byte stamp, 2-byte length (§IV-A).
pub const SLOT_LEN: usize = 6;
/// Bytes per slot of a LAZY (L-DS) frame: stamp, burst length, and the
/// 2-byte length of the burst's head-of-line packet.
pub const LAZY_SLOT_LEN: usize = 8;
/// Bytes per virtual-clock offset in a master frame.
pub const OFFSET_LEN: usize = 8;
/// The standard Ethernet MTU; DS payloads must fit in the MTU in use.
pub const MTU: usize = 1500;
/// A common jumbo-frame MTU (the paper's future work for M-DS).
pub const JUMBO_MTU: usize = 9000;

/// Flag bits (byte 1 of the header).
pub mod flags {
    /// The frame opens a cycle: the sender is the master.
    pub const MASTER: u8 = 0x01;
    /// Virtual-clock offsets follow the queue slots.
    pub const VSTATE: u8 = 0x02;
    /// Liveness only (no-WFQ mode): no slots (l = 0).
    pub const HEARTBEAT: u8 = 0x04;
    /// L-DS: slot lengths are the bytes of the burst the queue would send,
    /// and each slot also carries its head-of-line packet's length.
    pub const LAZY: u8 = 0x08;
    pub const ALL: u8 = MASTER | VSTATE | HEARTBEAT | LAZY;
}

/// An IEEE 802.1Q tag to put on DS frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vlan {
    /// VLAN id, 1..=4094.
    pub vid: u16,
    /// Priority code point (802.1p), 0..=7; 7 (network control) by default.
    pub pcp: u8,
}

impl Vlan {
    pub fn new(vid: u16) -> Self {
        Vlan { vid, pcp: 7 }
    }
    pub fn validate(&self) -> Result<(), String> {
        if self.vid == 0 || self.vid >= 4095 {
            return Err(format!("stsdr: VLAN id {} is not in 1..=4094", self.vid));
        }
        if self.pcp > 7 {
            return Err(format!("stsdr: VLAN priority {} is not in 0..=7", self.pcp));
        }
        Ok(())
    }
}

/// The VLAN id (if tagged), EtherType and payload offset of a frame.
fn untag(f: &[u8]) -> Option<(Option<u16>, u16, usize)> {
    let rd = |at: usize| f.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let t = rd(12)?;
    if t == TPID_8021Q {
        let tci = rd(14)?;
        Some((Some(tci & 0x0fff), rd(16)?, ETH_HDR + 4))
    } else {
        Some((None, t, ETH_HDR))
    }
}

/// Whether a frame is a DS frame (by EtherType, tagged or not): what a
/// node checks before handing it to [`parse`].
pub fn is_ds(f: &[u8]) -> bool {
    untag(f).is_some_and(|(_, t, _)| t == ETHERTYPE_DS)
}

/// The paper's DS body, 6·N·K·l + 2 bytes (l = 1 for S-DS: 6·N·K + 2).
pub const fn paper_body_len(outlinks: usize, classes: usize, slots: usize) -> usize {
    2 + SLOT_LEN * outlinks * classes * slots
}

/// Bytes after the EtherType: header, body, and offsets if `vstate`.
pub const fn payload_len(outlinks: usize, classes: usize, slots: usize, vstate: bool) -> usize {
    HEADER_LEN
        + paper_body_len(outlinks, classes, slots)
        + if vstate {
            OFFSET_LEN * outlinks * classes
        } else {
            0
        }
}

/// The largest l whose master frame (with offsets, the longest DS frame)
/// fits an MTU of `mtu` payload bytes; 0 if not even one slot fits.
pub const fn max_slots(outlinks: usize, classes: usize, mtu: usize) -> usize {
    let fixed = payload_len(outlinks, classes, 0, true);
    let per = SLOT_LEN * outlinks * classes;
    if mtu < fixed || per == 0 {
        0
    } else {
        (mtu - fixed) / per
    }
}

/// Why a frame was not accepted as a DS frame. Each is a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DsError {
    /// Shorter than its header says it is.
    Truncated,
    /// Not EtherType 0x88B6.
    NotDs,
    /// Tagged with a VLAN other than the internal one.
    WrongVlan,
    BadVersion,
    /// Unknown flag bits.
    BadFlags,
    /// N, K or l zero where they may not be, or not this STSDR's.
    BadDims,
    /// FE id not below M.
    BadFeId,
    /// An empty slot (length 0) with a stamp, or a packet slot after an
    /// empty slot in the same queue.
    BadEntry,
}

impl DsError {
    pub fn name(self) -> &'static str {
        match self {
            DsError::Truncated => "truncated",
            DsError::NotDs => "not_ds",
            DsError::WrongVlan => "wrong_vlan",
            DsError::BadVersion => "bad_version",
            DsError::BadFlags => "bad_flags",
            DsError::BadDims => "bad_dims",
            DsError::BadFeId => "bad_fe_id",
            DsError::BadEntry => "bad_entry",
        }
    }
    /// The counter nodes count this refusal in: `ds_refused_<name>`.
    pub fn counter(self) -> &'static str {
        match self {
            DsError::Truncated => "ds_refused_truncated",
            DsError::NotDs => "ds_refused_not_ds",
            DsError::WrongVlan => "ds_refused_wrong_vlan",
            DsError::BadVersion => "ds_refused_bad_version",
            DsError::BadFlags => "ds_refused_bad_flags",
            DsError::BadDims => "ds_refused_bad_dims",
            DsError::BadFeId => "ds_refused_bad_fe_id",
            DsError::BadEntry => "ds_refused_bad_entry",
        }
    }
}

/// The fixed fields of a DS frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub fe: u16,
    pub flags: u8,
    pub cycle: u32,
    pub stamp_ref: u32,
    pub outlinks: u8,
    pub classes: u8,
    /// l: slots per queue.
    pub slots: u16,
}

impl Header {
    pub fn is_master(&self) -> bool {
        self.flags & flags::MASTER != 0
    }
    pub fn is_heartbeat(&self) -> bool {
        self.flags & flags::HEARTBEAT != 0
    }
    fn is_lazy(&self) -> bool {
        self.flags & flags::LAZY != 0
    }
    fn slot_len(&self) -> usize {
        if self.is_lazy() {
            LAZY_SLOT_LEN
        } else {
            SLOT_LEN
        }
    }
    fn payload_len(&self) -> usize {
        let (n, k) = (self.outlinks as usize, self.classes as usize);
        payload_len(n, k, 0, self.flags & flags::VSTATE != 0) + self.slot_len() * n * k * self.slots as usize
    }
}

/// A whole DS frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ds {
    pub header: Header,
    /// The queue slots as entries (empty slots dropped).
    pub state: FeState,
    /// S_jk − V_j, link-major, if the VSTATE flag is set.
    pub offsets: Option<Vec<i64>>,
}

/// What a receiver knows to check a DS frame against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    /// The internal VLAN: frames tagged with another VID are refused
    /// (untagged frames are accepted: an access port delivers them so).
    pub vid: Option<u16>,
    /// This STSDR's size; `None` accepts any (a load balancer that only
    /// listens for liveness).
    pub dims: Option<Dims>,
}

fn rd16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn rd32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Check the Ethernet framing and the header; returns the header and the
/// payload (from the header on).
fn split<'a>(f: &'a [u8], exp: &Expect) -> Result<(Header, &'a [u8]), DsError> {
    let (vid, et, off) = untag(f).ok_or(DsError::Truncated)?;
    if et != ETHERTYPE_DS {
        return Err(DsError::NotDs);
    }
    if let (Some(v), Some(want)) = (vid, exp.vid) {
        if v != want {
            return Err(DsError::WrongVlan);
        }
    }
    let p = f.get(off..).unwrap_or(&[]);
    if p.len() < HEADER_LEN + 2 {
        return Err(DsError::Truncated);
    }
    if p[0] != VERSION {
        return Err(DsError::BadVersion);
    }
    let h = Header {
        flags: p[1],
        cycle: rd32(p, 2),
        stamp_ref: rd32(p, 6),
        outlinks: p[10],
        classes: p[11],
        slots: rd16(p, 12),
        fe: rd16(p, 14),
    };
    if h.flags & !flags::ALL != 0 {
        return Err(DsError::BadFlags);
    }
    if h.outlinks == 0 || h.classes == 0 || (h.slots == 0) != h.is_heartbeat() {
        return Err(DsError::BadDims);
    }
    if let Some(d) = exp.dims {
        if h.outlinks as usize != d.outlinks || h.classes as usize != d.classes {
            return Err(DsError::BadDims);
        }
        if h.fe as usize >= d.forwarders {
            return Err(DsError::BadFeId);
        }
    }
    // Trailing bytes are Ethernet padding.
    if p.len() < h.payload_len() {
        return Err(DsError::Truncated);
    }
    Ok((h, p))
}

/// Parse only the fixed fields (a load balancer learning liveness), after
/// checking that the frame is as long as they say.
pub fn parse_header(f: &[u8], exp: &Expect) -> Result<Header, DsError> {
    split(f, exp).map(|(h, _)| h)
}

/// Parse a whole DS frame.
pub fn parse(f: &[u8], exp: &Expect) -> Result<Ds, DsError> {
    let (h, p) = split(f, exp)?;
    let (n, k, l) = (h.outlinks as usize, h.classes as usize, h.slots as usize);
    let dims = Dims::new(exp.dims.map_or(1, |d| d.forwarders), n, k);
    let mut state = FeState::new(dims, h.stamp_ref);
    let mut at = HEADER_LEN + 2;
    for j in 0..n {
        for c in 0..k {
            let mut ended = false;
            for _ in 0..l {
                let (stamp, len) = (rd32(p, at), rd16(p, at + 4) as u32);
                // A LAZY slot's head is 1 ..= the burst's length (0 only in
                // an empty slot); other slots are one packet.
                let head = if h.is_lazy() { rd16(p, at + 6) as u32 } else { len };
                let e = Entry::burst(stamp, len, head);
                at += h.slot_len();
                if e.len == 0 {
                    if e.stamp != 0 || e.head != 0 {
                        return Err(DsError::BadEntry);
                    }
                    ended = true;
                } else if ended || e.head == 0 || e.head > e.len {
                    // A packet after an empty slot, or a head that is not
                    // part of its burst.
                    return Err(DsError::BadEntry);
                } else {
                    state.push(j, c, e);
                }
            }
        }
    }
    let offsets = (h.flags & flags::VSTATE != 0).then(|| {
        (0..n * k)
            .map(|i| {
                let b = &p[at + i * OFFSET_LEN..at + (i + 1) * OFFSET_LEN];
                i64::from_be_bytes(b.try_into().unwrap_or([0; 8]))
            })
            .collect()
    });
    Ok(Ds {
        header: h,
        state,
        offsets,
    })
}

/// Build a broadcast DS frame from `src`, tagged with `vlan` if given,
/// padded to the Ethernet minimum. `h.outlinks`, `h.classes` and
/// `h.slots` give the layout: each queue's first `h.slots` entries of
/// `state` are written, missing ones as empty slots; lengths above 65535
/// are written as 65535 (the forwarder never builds such a burst). With
/// LAZY each slot also gets its entry's head length (at most its length). The
/// VSTATE flag is set exactly when `offsets` is given (it must have N·K
/// values; missing ones are written as 0).
pub fn encode(
    h: &Header,
    state: &FeState,
    offsets: Option<&[i64]>,
    src: MacAddr,
    vlan: Option<Vlan>,
) -> Vec<u8> {
    let mut h = *h;
    h.flags = (h.flags & !flags::VSTATE) | if offsets.is_some() { flags::VSTATE } else { 0 };
    let (n, k, l) = (h.outlinks as usize, h.classes as usize, h.slots as usize);
    let mut f = Vec::with_capacity(ETH_HDR + 4 + h.payload_len());
    f.extend_from_slice(&MacAddr::BROADCAST.0);
    f.extend_from_slice(&src.0);
    if let Some(v) = vlan {
        f.extend_from_slice(&TPID_8021Q.to_be_bytes());
        let tci = ((v.pcp as u16 & 7) << 13) | (v.vid & 0x0fff);
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ETHERTYPE_DS.to_be_bytes());
    f.push(VERSION);
    f.push(h.flags);
    f.extend_from_slice(&h.cycle.to_be_bytes());
    f.extend_from_slice(&h.stamp_ref.to_be_bytes());
    f.push(h.outlinks);
    f.push(h.classes);
    f.extend_from_slice(&h.slots.to_be_bytes());
    f.extend_from_slice(&h.fe.to_be_bytes());
    for j in 0..n {
        for c in 0..k {
            let mut q = state.queue(j, c);
            for _ in 0..l {
                let e = q.next().unwrap_or_default();
                let len = e.len.min(u16::MAX as u32) as u16;
                f.extend_from_slice(&e.stamp.to_be_bytes());
                f.extend_from_slice(&len.to_be_bytes());
                if h.is_lazy() {
                    let head = (e.head_len().min(u16::MAX as u32) as u16).min(len);
                    f.extend_from_slice(&head.to_be_bytes());
                }
            }
        }
    }
    if let Some(o) = offsets {
        for i in 0..n * k {
            f.extend_from_slice(&o.get(i).copied().unwrap_or(0).to_be_bytes());
        }
    }
    if f.len() < ETH_MIN_NO_FCS {
        f.resize(ETH_MIN_NO_FCS, 0);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(fe: u16, flags: u8, n: u8, k: u8, l: u16) -> Header {
        Header {
            fe,
            flags,
            cycle: 0x0102_0304,
            stamp_ref: 0x0a0b_0c0d,
            outlinks: n,
            classes: k,
            slots: l,
        }
    }

    fn state(d: Dims, per_queue: usize) -> FeState {
        let mut st = FeState::new(d, 0x0a0b_0c0d);
        for j in 0..d.outlinks {
            for k in 0..d.classes {
                for s in 0..per_queue {
                    st.push(j, k, Entry::packet((j * 100 + k * 10 + s) as u32, 60 + s as u32));
                }
            }
        }
        st
    }

    /// One L-DS burst per queue: 25 packets, the head 84 link bytes.
    fn lazy_state(d: Dims) -> FeState {
        let mut st = FeState::new(d, 0x0a0b_0c0d);
        for j in 0..d.outlinks {
            for k in 0..d.classes {
                st.push(
                    j,
                    k,
                    Entry::burst((j * 100 + k * 10) as u32, 2100 + k as u32, 84 + j as u32),
                );
            }
        }
        st
    }

    /// L-DS slots carry the burst's length and its head's, 8 bytes a
    /// queue; a head of 0 or longer than its burst is refused.
    #[test]
    fn lazy_slots_carry_the_head_length() {
        let d = Dims::new(3, 3, 3);
        let h = header(2, flags::LAZY, 3, 3, 1);
        let st = lazy_state(d);
        let f = encode(&h, &st, None, MacAddr::local(7), None);
        // 2-byte FE id, then 8 bytes per queue.
        assert_eq!(f.len(), ETH_HDR + HEADER_LEN + 2 + 8 * 9);
        let body = &f[ETH_HDR + HEADER_LEN..];
        // Queue (0, 1): stamp 10, burst 2101 (0x0835), head 84 (0x54).
        assert_eq!(&body[10..18], &[0, 0, 0, 10, 0x08, 0x35, 0, 0x54]);
        let exp = Expect {
            vid: None,
            dims: Some(d),
        };
        let ds = parse(&f, &exp).unwrap();
        assert_eq!(ds.state, st);
        assert_eq!(ds.state.head(2, 0).unwrap().head_len(), 86);
        let with_head = |v: u16| {
            let mut g = f.clone();
            g[ETH_HDR + HEADER_LEN + 2 + 6..ETH_HDR + HEADER_LEN + 2 + 8].copy_from_slice(&v.to_be_bytes());
            parse(&g, &exp)
        };
        assert_eq!(with_head(0), Err(DsError::BadEntry));
        assert_eq!(with_head(2101), Err(DsError::BadEntry));
        assert!(with_head(2100).is_ok());
        // An entry's head longer than its length is written as the length.
        let mut big = FeState::new(d, 0);
        big.push(0, 0, Entry::burst(1, 100, 900));
        let g = encode(&h, &big, None, MacAddr::local(7), None);
        assert_eq!(parse(&g, &exp).unwrap().state.head(0, 0).unwrap().head, 100);
    }

    #[test]
    fn sds_body_is_6nk_plus_2_bytes() {
        // §IV-A: N = K = 3 gives a 56-byte body.
        assert_eq!(paper_body_len(3, 3, 1), 56);
        let d = Dims::new(3, 3, 3);
        let f = encode(
            &header(2, 0, 3, 3, 1),
            &state(d, 1),
            None,
            MacAddr::local(7),
            None,
        );
        // Ethernet header, qosnet header, then exactly the paper's body.
        assert_eq!(f.len(), ETH_HDR + HEADER_LEN + 56);
        assert_eq!(payload_len(3, 3, 1, false) - HEADER_LEN, 56);
        // FE id first in the body, then the first queue's stamp and length.
        let body = &f[ETH_HDR + HEADER_LEN..];
        assert_eq!(&body[..2], &[0, 2]);
        assert_eq!(&body[2..8], &[0, 0, 0, 0, 0, 60]);
    }

    #[test]
    fn slots_that_fit_one_frame() {
        // N = K = 3: 54 bytes a slot round; the master frame carries 88
        // fixed bytes, so 26 slots fit 1500 bytes (the paper: "about 25").
        assert_eq!(max_slots(3, 3, MTU), 26);
        assert!(payload_len(3, 3, 26, true) <= MTU);
        assert!(payload_len(3, 3, 27, true) > MTU);
        // Jumbo frames, the paper's future work: 165 slots.
        assert_eq!(max_slots(3, 3, JUMBO_MTU), 165);
        assert!(payload_len(3, 3, 165, true) <= JUMBO_MTU);
        assert!(payload_len(3, 3, 166, true) > JUMBO_MTU);
        assert_eq!(max_slots(200, 200, MTU), 0);
    }

    /// The example of docs/stsdr-wire.md, byte for byte.
    #[test]
    fn documented_example() {
        let d = Dims::new(3, 3, 3);
        let mut st = FeState::new(d, 0x0001_86a0);
        st.push(0, 0, Entry::packet(0x0001_8000, 64));
        st.push(0, 2, Entry::packet(0x0001_8100, 1514));
        st.push(2, 1, Entry::packet(0x0001_7f00, 60));
        let h = Header {
            fe: 1,
            flags: 0,
            cycle: 42,
            stamp_ref: 0x0001_86a0,
            outlinks: 3,
            classes: 3,
            slots: 1,
        };
        let f = encode(
            &h,
            &st,
            None,
            MacAddr([0x02, 0x71, 0, 0, 0, 0x12]),
            Some(Vlan::new(4000)),
        );
        let hex: String = f.iter().map(|b| format!("{b:02x}")).collect();
        let want = concat!(
            // Ethernet: broadcast, source, 802.1Q tag (PCP 7, VID 4000), EtherType.
            "ffffffffffff",
            "027100000012",
            "8100",
            "efa0",
            "88b6",
            // qosnet header: version, flags, cycle, stamp_ref, N, K, l.
            "02",
            "00",
            "0000002a",
            "000186a0",
            "03",
            "03",
            "0001",
            // Paper body: FE id, then (stamp, length) per queue, j-major.
            "0001",
            "000180000040",
            "000000000000",
            "0001810005ea",
            "000000000000",
            "000000000000",
            "000000000000",
            "000000000000",
            "00017f00003c",
            "000000000000",
        );
        assert_eq!(hex, want);
        assert_eq!(f.len(), 88);
        let ds = parse(
            &f,
            &Expect {
                vid: Some(4000),
                dims: Some(d),
            },
        )
        .unwrap();
        assert_eq!(ds.state, st);
        assert_eq!(ds.header, h);
    }

    #[test]
    fn roundtrip_master_with_offsets_and_heartbeat() {
        let d = Dims::new(4, 2, 3);
        let st = state(d, 3);
        let offs: Vec<i64> = (0..6).map(|i| i * 1_000_000_007 - 2_000_000_000).collect();
        let h = header(3, flags::MASTER | flags::LAZY, 2, 3, 4);
        let f = encode(&h, &st, Some(&offs), MacAddr::local(1), Some(Vlan::new(7)));
        let exp = Expect {
            vid: Some(7),
            dims: Some(d),
        };
        let ds = parse(&f, &exp).unwrap();
        assert_eq!(ds.header.flags, flags::MASTER | flags::LAZY | flags::VSTATE);
        assert_eq!(ds.offsets.as_deref(), Some(&offs[..]));
        assert_eq!(ds.state, st);
        // Untagged is accepted, another VLAN is not.
        let g = encode(&h, &st, None, MacAddr::local(1), None);
        assert!(parse(&g, &exp).unwrap().offsets.is_none());
        let g = encode(&h, &st, None, MacAddr::local(1), Some(Vlan::new(8)));
        assert_eq!(parse(&g, &exp), Err(DsError::WrongVlan));
        // A heartbeat has no slots and is padded to the Ethernet minimum.
        let hb = encode(
            &header(1, flags::HEARTBEAT, 2, 3, 0),
            &st,
            None,
            MacAddr::local(1),
            None,
        );
        assert_eq!(hb.len(), ETH_MIN_NO_FCS);
        let ds = parse(&hb, &exp).unwrap();
        assert!(ds.header.is_heartbeat() && ds.state.is_empty());
    }

    #[test]
    fn refusals_by_reason() {
        let d = Dims::new(2, 2, 2);
        let exp = Expect {
            vid: None,
            dims: Some(d),
        };
        let good = encode(
            &header(1, 0, 2, 2, 2),
            &state(d, 1),
            None,
            MacAddr::local(1),
            None,
        );
        assert!(parse(&good, &exp).is_ok());
        let set = |at: usize, v: u8| {
            let mut f = good.clone();
            f[at] = v;
            parse(&f, &exp)
        };
        let p = ETH_HDR;
        assert_eq!(parse(&good[..p + 10], &exp), Err(DsError::Truncated));
        assert_eq!(parse(&good[..good.len() - 1], &exp), Err(DsError::Truncated));
        assert_eq!(set(12, 0x08), Err(DsError::NotDs));
        assert_eq!(set(p, 1), Err(DsError::BadVersion));
        assert_eq!(set(p + 1, 0x80), Err(DsError::BadFlags));
        assert_eq!(set(p + 10, 3), Err(DsError::BadDims));
        assert_eq!(set(p + 13, 0), Err(DsError::BadDims));
        assert_eq!(set(p + 15, 2), Err(DsError::BadFeId));
        // Second slot of queue (0,0) filled after an empty first slot.
        let mut f = good.clone();
        f[p + HEADER_LEN + 2 + 4] = 0;
        f[p + HEADER_LEN + 2 + 5] = 0;
        f[p + HEADER_LEN + 2 + 6 + 5] = 9;
        assert_eq!(parse(&f, &exp), Err(DsError::BadEntry));
        assert!(is_ds(&good) && !is_ds(&good[..10]));
        // Without expectations, another STSDR's size is fine.
        assert!(parse(&good, &Expect::default()).is_ok());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Arbitrary bytes, and valid frames with bytes changed or cut,
        /// never panic the parsers; what parses re-encodes to the same
        /// bytes (up to padding).
        #[test]
        fn parsers_never_panic(
            junk in prop::collection::vec(any::<u8>(), 0..300),
            muts in prop::collection::vec((any::<u16>(), any::<u8>()), 0..8),
            cut in 0usize..200, tagged in any::<bool>(), raw in any::<bool>(), lazy in any::<bool>(),
        ) {
            let d = Dims::new(3, 2, 2);
            let f = if raw {
                junk
            } else {
                // LAZY frames have one 8-byte slot per queue.
                let (fl, l) = if lazy { (flags::MASTER | flags::LAZY, 1) } else { (flags::MASTER, 3) };
                let st = if lazy { lazy_state(d) } else { state(d, 2) };
                let mut f = encode(&header(1, fl, 2, 2, l), &st, Some(&[1, -2, 3, -4]),
                    MacAddr::local(1), tagged.then(|| Vlan::new(5)));
                for (at, v) in muts {
                    let n = f.len();
                    f[at as usize % n] = v;
                }
                f.truncate(f.len().saturating_sub(cut));
                f
            };
            for exp in [Expect::default(), Expect { vid: Some(5), dims: Some(d) }] {
                let _ = parse_header(&f, &exp);
                if let Ok(ds) = parse(&f, &exp) {
                    let h = ds.header;
                    let (vid, _, off) = untag(&f).unwrap();
                    let g = encode(&h, &ds.state, ds.offsets.as_deref(), MacAddr::local(1),
                        vid.map(|vid| Vlan { vid, pcp: 0 }));
                    let n = off + h.payload_len();
                    prop_assert_eq!(&g[off..n], &f[off..n]);
                }
            }
        }
    }
}
