//! IEEE 802.1Q VLAN tags on raw Ethernet frames: parse, push, pop.
//!
//! A tag sits between the source MAC and the EtherType (IEEE 802.1Q-2018
//! §9.5): a 2-byte TPID (0x8100 for a customer tag, C-TAG; 0x88a8 for a
//! service tag, S-TAG, of 802.1ad provider bridging) and a 2-byte TCI —
//! priority code point (PCP, 3 bits), drop eligible indicator (DEI, 1 bit)
//! and VLAN identifier (VID, 12 bits). VID 0 marks a priority-tagged frame
//! (no VLAN, only a priority, §9.6) and VID 0xFFF is reserved.
//!
//! qosnet's switch is a C-VLAN bridge: it understands one C-TAG. A frame
//! with an S-TAG outside or two stacked tags (QinQ) is reported as
//! [`VlanError::Stacked`] so a caller can count it as unsupported rather
//! than mistake the inner tag for payload. Parsing never panics.

use std::fmt;

use super::{rd16, ETH_HDR};

/// TPID of an IEEE 802.1Q customer VLAN tag (C-TAG).
pub const TPID_8021Q: u16 = 0x8100;
/// TPID of an IEEE 802.1ad service VLAN tag (S-TAG), the outer tag of QinQ.
pub const TPID_8021AD: u16 = 0x88a8;
/// Bytes one tag adds to a frame.
pub const VLAN_TAG_LEN: usize = 4;
/// Highest VID a VLAN may have; 0xFFF is reserved (802.1Q Table 9-2).
pub const VID_MAX: u16 = 4094;
/// The reserved VID (802.1Q Table 9-2): never valid in a frame or a config.
pub const VID_RESERVED: u16 = 0x0fff;

/// Whether `tpid` starts a VLAN tag qosnet recognises.
pub fn is_tpid(tpid: u16) -> bool {
    tpid == TPID_8021Q || tpid == TPID_8021AD
}

/// The tag control information of one VLAN tag (802.1Q §9.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Priority code point, 0..=7 (802.1p user priority).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 12 bits: 0 = priority tag only, 0xFFF reserved.
    pub vid: u16,
}

impl VlanTag {
    /// A tag for `vid` with priority 0.
    pub fn new(vid: u16) -> Self {
        VlanTag {
            pcp: 0,
            dei: false,
            vid: vid & 0x0fff,
        }
    }
    /// Decode a TCI.
    pub fn from_tci(tci: u16) -> Self {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }
    /// Encode as a TCI; out-of-range fields are truncated to their bits.
    pub fn tci(&self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }
}

/// Why a frame's tags could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VlanError {
    /// Shorter than an Ethernet header, or a TPID without the rest of
    /// its tag and the EtherType after it.
    Truncated,
    /// An S-TAG (0x88a8) outside, or two tags stacked (QinQ): not handled
    /// by a C-VLAN bridge.
    Stacked,
}

impl VlanError {
    pub fn name(self) -> &'static str {
        match self {
            VlanError::Truncated => "truncated_tag",
            VlanError::Stacked => "stacked_tags",
        }
    }
}

impl fmt::Display for VlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a frame's link header says about VLANs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanView {
    /// The frame's C-TAG, if it carries one.
    pub tag: Option<VlanTag>,
    /// The EtherType (or 802.3 length) after the tag.
    pub ethertype: u16,
    /// Offset of the payload: 14 untagged, 18 tagged.
    pub header_len: usize,
}

/// Read a frame's VLAN tag (at most one C-TAG) and the EtherType after it.
pub fn parse_vlan(f: &[u8]) -> Result<VlanView, VlanError> {
    if f.len() < ETH_HDR {
        return Err(VlanError::Truncated);
    }
    let outer = rd16(f, 12);
    if outer == TPID_8021AD {
        return Err(VlanError::Stacked);
    }
    if outer != TPID_8021Q {
        return Ok(VlanView {
            tag: None,
            ethertype: outer,
            header_len: ETH_HDR,
        });
    }
    if f.len() < ETH_HDR + VLAN_TAG_LEN {
        return Err(VlanError::Truncated);
    }
    let inner = rd16(f, 16);
    if is_tpid(inner) {
        return Err(VlanError::Stacked);
    }
    Ok(VlanView {
        tag: Some(VlanTag::from_tci(rd16(f, 14))),
        ethertype: inner,
        header_len: ETH_HDR + VLAN_TAG_LEN,
    })
}

/// Insert a tag with `tpid` right after the MAC addresses (the outermost
/// position). Refused, leaving the frame as it was, if the frame has no
/// room for the addresses.
pub fn push_tag(f: &mut Vec<u8>, tpid: u16, tag: VlanTag) -> Result<(), VlanError> {
    if f.len() < 12 {
        return Err(VlanError::Truncated);
    }
    let mut t = [0u8; VLAN_TAG_LEN];
    t[0..2].copy_from_slice(&tpid.to_be_bytes());
    t[2..4].copy_from_slice(&tag.tci().to_be_bytes());
    f.splice(12..12, t);
    Ok(())
}

/// Remove the outermost tag (TPID 0x8100 or 0x88a8) and return its TPID
/// and TCI; `None`, leaving the frame as it was, if there is none. The
/// frame is not re-padded: a bridge that untags a minimum-size frame pads
/// it itself (see [`pad_min`]).
pub fn pop_tag(f: &mut Vec<u8>) -> Option<(u16, VlanTag)> {
    if f.len() < 12 + VLAN_TAG_LEN {
        return None;
    }
    let tpid = rd16(f, 12);
    if !is_tpid(tpid) {
        return None;
    }
    let tag = VlanTag::from_tci(rd16(f, 14));
    f.drain(12..12 + VLAN_TAG_LEN);
    Some((tpid, tag))
}

/// Pad a frame with zeros to the Ethernet minimum (60 bytes without FCS),
/// as a MAC does before sending a short frame (IEEE 802.3 §4.2.3.3).
pub fn pad_min(f: &mut Vec<u8>) {
    if f.len() < super::ETH_MIN_NO_FCS {
        f.resize(super::ETH_MIN_NO_FCS, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn untagged(ethertype: u16, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len.max(ETH_HDR)];
        f[0..6].copy_from_slice(&[0xff; 6]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        for (i, b) in f.iter_mut().enumerate().skip(ETH_HDR) {
            *b = i as u8;
        }
        f
    }

    #[test]
    fn tci_fields_roundtrip() {
        let t = VlanTag {
            pcp: 5,
            dei: true,
            vid: 100,
        };
        // PCP 5 = 101, DEI 1, VID 100 = 0x064: 1011 0000 0110 0100.
        assert_eq!(t.tci(), 0xb064);
        assert_eq!(VlanTag::from_tci(0xb064), t);
        assert_eq!(VlanTag::from_tci(0xffff).vid, VID_RESERVED);
    }

    #[test]
    fn untagged_frame_parses_without_tag() {
        let f = untagged(0x0800, 60);
        assert_eq!(
            parse_vlan(&f),
            Ok(VlanView {
                tag: None,
                ethertype: 0x0800,
                header_len: 14
            })
        );
    }

    #[test]
    fn push_parse_pop() {
        let orig = untagged(0x0806, 60);
        let mut f = orig.clone();
        let tag = VlanTag {
            pcp: 3,
            dei: false,
            vid: 42,
        };
        push_tag(&mut f, TPID_8021Q, tag).unwrap();
        assert_eq!(f.len(), 64);
        assert_eq!(&f[12..18], &[0x81, 0x00, 0x60, 0x2a, 0x08, 0x06]);
        let v = parse_vlan(&f).unwrap();
        assert_eq!((v.tag, v.ethertype, v.header_len), (Some(tag), 0x0806, 18));
        assert_eq!(pop_tag(&mut f), Some((TPID_8021Q, tag)));
        assert_eq!(f, orig);
        assert_eq!(pop_tag(&mut f), None, "nothing left to pop");
        assert_eq!(f, orig);
    }

    #[test]
    fn qinq_and_s_tags_are_stacked() {
        let mut f = untagged(0x0800, 60);
        push_tag(&mut f, TPID_8021Q, VlanTag::new(10)).unwrap();
        push_tag(&mut f, TPID_8021AD, VlanTag::new(200)).unwrap();
        assert_eq!(parse_vlan(&f), Err(VlanError::Stacked));
        let mut g = untagged(0x0800, 60);
        push_tag(&mut g, TPID_8021Q, VlanTag::new(10)).unwrap();
        push_tag(&mut g, TPID_8021Q, VlanTag::new(20)).unwrap();
        assert_eq!(parse_vlan(&g), Err(VlanError::Stacked));
        let mut h = untagged(0x0800, 60);
        push_tag(&mut h, TPID_8021AD, VlanTag::new(5)).unwrap();
        assert_eq!(parse_vlan(&h), Err(VlanError::Stacked));
        // Popping the outer S-tag leaves a plain C-tagged frame.
        assert_eq!(pop_tag(&mut f).map(|(t, v)| (t, v.vid)), Some((TPID_8021AD, 200)));
        assert_eq!(parse_vlan(&f).unwrap().tag.map(|t| t.vid), Some(10));
    }

    #[test]
    fn truncated_tags_are_refused() {
        assert_eq!(parse_vlan(&[0u8; 13]), Err(VlanError::Truncated));
        let mut f = untagged(0x0800, 14);
        push_tag(&mut f, TPID_8021Q, VlanTag::new(7)).unwrap();
        assert_eq!(parse_vlan(&f).map(|v| v.header_len), Ok(18));
        assert_eq!(parse_vlan(&f[..17]), Err(VlanError::Truncated));
        let mut short = vec![0u8; 11];
        assert_eq!(
            push_tag(&mut short, TPID_8021Q, VlanTag::new(1)),
            Err(VlanError::Truncated)
        );
        assert_eq!(short, vec![0u8; 11]);
    }

    #[test]
    fn pad_min_pads_short_frames_only() {
        let mut f = vec![1u8; 56];
        pad_min(&mut f);
        assert_eq!(f.len(), 60);
        assert_eq!(&f[56..], &[0, 0, 0, 0]);
        let mut g = vec![1u8; 61];
        pad_min(&mut g);
        assert_eq!(g.len(), 61);
    }

    fn any_tag() -> impl Strategy<Value = VlanTag> {
        (0u8..8, any::<bool>(), 0u16..4096).prop_map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Parsing arbitrary bytes never panics, and what it reports is
        /// consistent with the bytes.
        #[test]
        fn parse_never_panics(f in prop::collection::vec(any::<u8>(), 0..80)) {
            match parse_vlan(&f) {
                Ok(v) => {
                    prop_assert!(v.header_len <= f.len());
                    prop_assert_eq!(v.tag.is_some(), v.header_len == 18);
                    prop_assert!(!is_tpid(v.ethertype));
                }
                Err(VlanError::Truncated) => prop_assert!(f.len() < 18),
                Err(VlanError::Stacked) => prop_assert!(f.len() >= 14),
            }
            let mut g = f.clone();
            let popped = pop_tag(&mut g);
            prop_assert_eq!(popped.is_some(), f.len() == g.len() + 4);
        }

        /// pop ∘ push is the identity on any frame with room for its
        /// addresses, for C- and S-tags and every TCI.
        #[test]
        fn pop_after_push_is_identity(
            f in prop::collection::vec(any::<u8>(), 12..120),
            tag in any_tag(),
            s in any::<bool>(),
        ) {
            let tpid = if s { TPID_8021AD } else { TPID_8021Q };
            let mut g = f.clone();
            push_tag(&mut g, tpid, tag).unwrap();
            prop_assert_eq!(g.len(), f.len() + VLAN_TAG_LEN);
            prop_assert_eq!(pop_tag(&mut g), Some((tpid, tag)));
            prop_assert_eq!(g, f);
        }

        /// push ∘ pop is the identity on every tagged frame.
        #[test]
        fn push_after_pop_is_identity(
            body in prop::collection::vec(any::<u8>(), 12..120),
            tag in any_tag(),
        ) {
            let mut f = body.clone();
            push_tag(&mut f, TPID_8021Q, tag).unwrap();
            let orig = f.clone();
            let (tpid, t) = pop_tag(&mut f).unwrap();
            push_tag(&mut f, tpid, t).unwrap();
            prop_assert_eq!(f, orig);
        }
    }
}
