//! When a transmitted frame counts as sent: one rule for every node kind.
//!
//! On a full-duplex port a frame handed to the transmitter goes out
//! whole, so it is counted at once. On a half-duplex port (a shared
//! CSMA/CD segment) the NIC may still give the frame up: IEEE 802.3
//! §4.2.3.2.5 abandons a transmission after `attemptLimit` (16) attempts,
//! "excessive collisions" (§4.2.8 `TransmitFrame` returns
//! `excessiveCollisionError`). Nobody receives such a frame, so on a
//! half-duplex port a frame is counted when the NIC reports it sent
//! ([`TxStatus::Sent`]), and one it abandoned is a drop
//! ([`EXCESSIVE_COLLISIONS`]), never a sent packet: the link's packets,
//! bytes, load and utilization are those of frames that crossed.

use super::{Duplex, TxStatus};

/// The drop reason of a frame abandoned after too many collisions.
pub const EXCESSIVE_COLLISIONS: &str = "excessive_collisions";

/// A port's transmit counters, kept by the rule above.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxTally {
    /// Frames sent whole.
    pub pkts: u64,
    /// Their bytes (no FCS, preamble or IFG).
    pub bytes: u64,
    /// Their link time, in bytes, counting FCS, preamble and IFG.
    pub wire_bytes: u64,
    /// Half duplex: frames the NIC abandoned after its last attempt.
    pub excessive_collisions: u64,
    /// Half duplex: (bytes, wire bytes) of the frame the NIC holds.
    nic: Option<(u64, u64)>,
}

impl TxTally {
    /// A frame of `bytes` (`wire` bytes of link time) goes to the
    /// transmitter of a `duplex` port.
    pub fn handed(&mut self, duplex: Duplex, bytes: u64, wire: u64) {
        match duplex {
            Duplex::Full => self.count(bytes, wire),
            Duplex::Half => self.nic = Some((bytes, wire)),
        }
    }

    /// The NIC of a half-duplex port finished the frame it held with
    /// `status`. A completion with no frame handed (a node restarted
    /// while its NIC held an earlier life's frame) counts nothing.
    pub fn done(&mut self, status: TxStatus) {
        let Some((bytes, wire)) = self.nic.take() else {
            return;
        };
        match status {
            TxStatus::Sent { .. } => self.count(bytes, wire),
            TxStatus::ExcessiveCollisions => self.excessive_collisions += 1,
        }
    }

    /// The port report's drop entry for abandoned frames, if any.
    pub fn drop_entry(&self) -> Option<(String, u64)> {
        (self.excessive_collisions > 0).then(|| (EXCESSIVE_COLLISIONS.to_string(), self.excessive_collisions))
    }

    fn count(&mut self, bytes: u64, wire: u64) {
        self.pkts += 1;
        self.bytes += bytes;
        self.wire_bytes += wire;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_duplex_counts_at_handoff() {
        let mut t = TxTally::default();
        t.handed(Duplex::Full, 100, 124);
        assert_eq!((t.pkts, t.bytes, t.wire_bytes), (1, 100, 124));
    }

    #[test]
    fn half_duplex_counts_only_frames_sent_whole() {
        let mut t = TxTally::default();
        t.handed(Duplex::Half, 100, 124);
        assert_eq!(t.pkts, 0, "not counted while the NIC holds it");
        t.done(TxStatus::Sent { collisions: 3 });
        t.handed(Duplex::Half, 1500, 1524);
        t.done(TxStatus::ExcessiveCollisions);
        assert_eq!((t.pkts, t.bytes, t.wire_bytes), (1, 100, 124));
        assert_eq!(t.drop_entry(), Some((EXCESSIVE_COLLISIONS.into(), 1)));
        // A completion for no frame of this tally's counts nothing.
        t.done(TxStatus::Sent { collisions: 0 });
        assert_eq!(t.pkts, 1);
    }
}
