//! Full-duplex point-to-point links: two independent channels, one per
//! direction. The sending node's transmitter serialises each frame at the
//! link's capacity and is busy until the inter-frame gap after it has
//! passed (its [`Transmit::tx_end`](qosnet_core::node::Transmit)); the
//! frame's last bit (its FCS) left one gap earlier, so it has fully
//! reached the far port at `tx_end − gap + delay` — store and forward, as
//! a real NIC hands a frame up once it is whole, not after the idle line
//! time that follows it.

use qosnet_core::{Duration, Instant};

/// One direction of a link: where frames sent on a port arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Channel {
    pub peer: u32,
    pub peer_port: u16,
    pub delay: Duration,
    /// The inter-frame gap at the link's rate: idle line time the sender's
    /// transmitter counts after each frame.
    pub gap: Duration,
}

impl Channel {
    /// When a frame whose transmitter is free again at `tx_end` (the gap
    /// after the frame included) has fully arrived.
    pub fn arrival(&self, tx_end: Instant) -> Instant {
        tx_end - self.gap + self.delay
    }
}
