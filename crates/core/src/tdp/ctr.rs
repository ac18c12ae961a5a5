//! The common time reference (CTR) of Time-Driven Priority (ICC 2006 §II-A,
//! §III-A) and the 2-bit compressed TF/TC stamp carried in the DS byte
//! (§III-B).
//!
//! Time is cut into time frames (TF) of `T_f`; TFs are grouped into time
//! cycles (TC), TCs into super cycles (SC). TF numbers here are *absolute*:
//! `tf = now / T_f` counted from the driver's epoch, so every router that
//! shares the epoch (the simulator's zero, or the start of a UTC second in
//! live mode) agrees on them without exchanging anything.

use crate::time::{Duration, Instant};

/// DS bits set in every TDP packet (paper §III-B): marks the packet as TDP.
pub const TDP_MARK: u8 = 0x0c;
/// DS bit set in packets transmitted during odd TFs.
pub const TDP_TF_BIT: u8 = 0x10;
/// DS bit that toggles every TC (set in odd TCs).
pub const TDP_TC_BIT: u8 = 0x20;
/// Mask selecting the TDP mark from a DS byte (ignores the two stamp bits).
const TDP_MARK_MASK: u8 = 0xcf;

/// The common time reference: TF length, TFs per TC, TCs per super cycle.
///
/// Paper numbers: Fig. 1 uses `T_f` = 250 µs, 100 TFs/TC, 40 TCs/SC; the
/// testbed (§IV-A) uses 250 µs and 60 TFs/TC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ctr {
    tf: Duration,
    tfs_per_tc: u32,
    tcs_per_sc: u32,
}

impl Ctr {
    /// A CTR with TFs of `tf`, `tfs_per_tc` TFs per TC and `tcs_per_sc` TCs
    /// per super cycle. All three must be non-zero.
    pub fn new(tf: Duration, tfs_per_tc: u32, tcs_per_sc: u32) -> Result<Ctr, String> {
        if tf.as_nanos() == 0 {
            return Err("CTR: time frame length must be > 0 ns".into());
        }
        if tfs_per_tc == 0 {
            return Err("CTR: a time cycle needs at least one time frame".into());
        }
        if tcs_per_sc == 0 {
            return Err("CTR: a super cycle needs at least one time cycle".into());
        }
        Ok(Ctr {
            tf,
            tfs_per_tc,
            tcs_per_sc,
        })
    }

    /// Length of one TF (`T_f`).
    pub fn tf_len(&self) -> Duration {
        self.tf
    }
    /// TFs per TC (`n_TF`).
    pub fn tfs_per_tc(&self) -> u32 {
        self.tfs_per_tc
    }
    /// TCs per super cycle.
    pub fn tcs_per_sc(&self) -> u32 {
        self.tcs_per_sc
    }
    /// Length of one TC.
    pub fn tc_len(&self) -> Duration {
        Duration(self.tf.0.saturating_mul(self.tfs_per_tc as u64))
    }

    /// Absolute TF number containing `now`.
    pub fn tf_at(&self, now: Instant) -> u64 {
        now.0 / self.tf.0
    }
    /// When absolute TF `tf` begins (saturates at [`Instant::MAX`]).
    pub fn tf_start(&self, tf: u64) -> Instant {
        Instant(tf.saturating_mul(self.tf.0))
    }
    /// When absolute TF `tf` ends, i.e. the start of `tf + 1`.
    pub fn tf_end(&self, tf: u64) -> Instant {
        self.tf_start(tf.saturating_add(1))
    }
    /// Position of `tf` inside its TC, `0..tfs_per_tc`.
    pub fn tf_in_tc(&self, tf: u64) -> u32 {
        (tf % self.tfs_per_tc as u64) as u32
    }
    /// Absolute TC number containing `tf`.
    pub fn tc_of(&self, tf: u64) -> u64 {
        tf / self.tfs_per_tc as u64
    }
    /// First absolute TF of absolute TC `tc`.
    pub fn tc_start_tf(&self, tc: u64) -> u64 {
        tc.saturating_mul(self.tfs_per_tc as u64)
    }
    /// Position of the TC containing `tf` inside its super cycle.
    pub fn tc_in_sc(&self, tf: u64) -> u32 {
        (self.tc_of(tf) % self.tcs_per_sc as u64) as u32
    }
    /// Absolute super-cycle number containing `tf`.
    pub fn sc_of(&self, tf: u64) -> u64 {
        self.tc_of(tf) / self.tcs_per_sc as u64
    }

    /// The whole DS byte stamped on a TDP packet transmitted in TF `tf`:
    /// 0x0c, 0x1c, 0x2c or 0x3c (paper §III-B).
    ///
    /// The TF bit is the parity of the *absolute* TF number, not of the TF
    /// position inside the TC: with an odd `tfs_per_tc` the position wraps
    /// from even to even and the bit would not flip at the TC boundary,
    /// breaking the alternating-bit protocol. The absolute parity flips at
    /// every TF boundary whatever the TC length.
    pub fn stamp(&self, tf: u64) -> u8 {
        TDP_MARK | (((tf & 1) as u8) << 4) | (((self.tc_of(tf) & 1) as u8) << 5)
    }
}

/// Whether a DS byte carries a TDP stamp (0x0c, 0x1c, 0x2c or 0x3c; the
/// ECN bits must be clear, as TDP uses the whole byte).
pub fn is_tdp_tos(tos: u8) -> bool {
    tos & TDP_MARK_MASK == TDP_MARK
}

/// The (TF parity, TC parity) bits of a TDP DS byte.
pub fn stamp_bits(tos: u8) -> (u64, u64) {
    (((tos & TDP_TF_BIT) >> 4) as u64, ((tos & TDP_TC_BIT) >> 5) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn testbed() -> Ctr {
        Ctr::new(Duration::from_micros(250), 60, 40).unwrap()
    }

    #[test]
    fn rejects_zero_values() {
        assert!(Ctr::new(Duration(0), 60, 40).unwrap_err().contains("time frame"));
        assert!(Ctr::new(Duration(1), 0, 40).unwrap_err().contains("time cycle"));
        assert!(Ctr::new(Duration(1), 60, 0).unwrap_err().contains("super cycle"));
    }

    #[test]
    fn time_maps_to_frames_cycles_and_super_cycles() {
        let c = testbed();
        assert_eq!(c.tf_len(), Duration::from_micros(250));
        assert_eq!(c.tc_len(), Duration::from_millis(15));
        assert_eq!(c.tf_at(Instant(249_999)), 0);
        assert_eq!(c.tf_at(Instant(250_000)), 1);
        assert_eq!(c.tf_start(4000), Instant(1_000_000_000));
        assert_eq!(c.tf_end(3), Instant(1_000_000));
        let tf = 60 * 40 * 3 + 60 * 7 + 17;
        assert_eq!(c.tf_in_tc(tf), 17);
        assert_eq!(c.tc_of(tf), 40 * 3 + 7);
        assert_eq!(c.tc_in_sc(tf), 7);
        assert_eq!(c.sc_of(tf), 3);
        assert_eq!(c.tc_start_tf(2), 120);
        assert_eq!(c.tf_start(u64::MAX), Instant::MAX);
    }

    #[test]
    fn stamps_are_the_four_paper_codepoints() {
        let c = testbed();
        assert_eq!(c.stamp(0), 0x0c);
        assert_eq!(c.stamp(1), 0x1c);
        assert_eq!(c.stamp(60), 0x2c);
        assert_eq!(c.stamp(61), 0x3c);
        assert_eq!(c.stamp(120), 0x0c);
        for tf in 0..500 {
            let s = c.stamp(tf);
            assert!(is_tdp_tos(s));
            assert_eq!(stamp_bits(s), (tf & 1, c.tc_of(tf) & 1));
        }
        for tos in [0x00, 0x0d, 0x0e, 0x08, 0x04, 0xb8, 0x4c, 0x8c] {
            assert!(!is_tdp_tos(tos), "{tos:#x}");
        }
    }

    #[test]
    fn tf_bit_alternates_with_odd_cycle_length() {
        // 3 TFs per TC: positions go 0,1,2,0 — the absolute parity still
        // flips at the TC boundary.
        let c = Ctr::new(Duration(10), 3, 2).unwrap();
        let bits: Vec<u8> = (0..8).map(|t| c.stamp(t) & TDP_TF_BIT).collect();
        for w in bits.windows(2) {
            assert_ne!(w[0], w[1]);
        }
        let tc: Vec<u8> = (0..8).map(|t| c.stamp(t) & TDP_TC_BIT).collect();
        assert_eq!(tc, vec![0, 0, 0, 0x20, 0x20, 0x20, 0, 0]);
    }
}
