//! RETHER: real-time Ethernet in software (Venkatramani & Chiueh, seed
//! 002), as sans-IO code.
//!
//! A shared Ethernet segment runs plain CSMA/CD until an application asks
//! for a real-time session; then the stations switch to a timed-token
//! protocol (§2.2) in which a token carrying a soft clock (ResidualTime),
//! the RT set and the dead-node list visits the RT sessions first and the
//! other nodes round robin in the time left of each cycle of one TRT, and
//! admission control at the token (eq. 3) keeps every reservation. When
//! the last session ends the segment switches back to CSMA/CD. Failures
//! are detected by acknowledgement timers (§2.4); qosnet adds what §8
//! left as future work — detecting a lost token and regenerating exactly
//! one, reservations preserved.
//!
//! - [`wire`]: the frames, byte by byte (`docs/rether-wire.md`).
//! - [`timing`]: eq. 1–7 and the failure timers.
//! - [`cycle`]: the token's visit order and decisions (Figure 2).
//! - [`session`]: sessions, fragmentation, reassembly (§3).
//! - [`station`]: the [`RetherStation`] node — the state machine of
//!   Figure 1 behind the [`Node`](crate::node::Node) trait.
//!
//! `docs/rether-design.md` maps each section of the paper to this code and
//! gives the design decisions the paper leaves open.

pub mod app;
pub mod bridge;
pub mod cycle;
pub mod session;
pub mod station;
pub mod timing;
pub mod wire;

#[cfg(test)]
mod harness;
#[cfg(test)]
mod tests;

use std::fmt;

pub use session::{RecvStats, RxUnit, SendError, SendState, SendStats};
pub use station::{
    Boot, ConfigError, Ctr, ModeKind, RetherStation, SessionError, SessionEvent, StationConfig, Visit,
    VisitKind,
};
pub use timing::{Refusal, TimingModel};

/// A station's id on the segment (the paper's node ID; lower ids win
/// initiator races, §2.2.2). 0xFFFF is reserved.
pub type StationId = u16;
/// The reserved "no station" id.
pub const NO_STATION: StationId = 0xFFFF;

/// A session: the sending station and its session number. The paper's
/// receiver opens a session with "the unique Id of the corresponding
/// sender" (§3.1) — this pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId {
    pub sender: StationId,
    pub num: u16,
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.sender, self.num)
    }
}

/// What a node sends at an NRT visit (§2.2.3's three policies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NrtPolicy {
    /// One packet per visit: fair, the paper's prototype.
    #[default]
    OnePacket,
    /// As many queued packets as the residual time allows.
    AsManyAsFit,
    /// At most this many packets.
    AtMost(u32),
}
