//! Time-Driven Priority in the router (Baldi et al., ICC 2006): the TDP
//! settings of a node ([`TdpNode`]) and the three places the pipeline
//! applies them.
//!
//! - *Input* (§III-B): a frame from a TDP neighbour carries a stamp in its
//!   DS byte, which the port's [`StampDecoder`] turns back into the
//!   upstream TF; a TDP-looking DS byte from any other neighbour is
//!   cleared, so hosts cannot forge stamps.
//! - *Forwarding* (§II-B): a stamped packet's forwarding TF is the
//!   upstream TF plus this node's delay `d` (immediate forwarding) or its
//!   flow's delay (non-immediate forwarding). An unstamped packet of a
//!   reserved flow is held by the edge shaper (§II-C) until its reserved
//!   TF comes.
//! - *Output*: the wheel stamps each frame with its forwarding TF here,
//!   which is its TF of transmission unless it is late; a late frame
//!   keeps its own TF, so the next node forwards it in its reserved TF.

use std::collections::HashMap;

use super::Router;
use crate::flow::FlowKey;
use crate::packet::Packet;
use crate::tdp::{is_tdp_tos, Ctr, EdgeShaper, ShapeOutcome, StampDecoder};
use crate::time::Instant;
use crate::wire::{self, Ipv4Info};

/// TDP settings of a router (ICC 2006 §II-B).
pub struct TdpNode {
    pub ctr: Ctr,
    /// Immediate forwarding: the forwarding delay of this node, in TFs.
    pub d: u32,
    /// Non-immediate forwarding: per-flow forwarding delays override `d`.
    pub d_flow: HashMap<FlowKey, u32>,
    /// Edge shaping of asynchronous flows into their reserved TFs.
    pub shaper: EdgeShaper,
    /// How many TFs a stamp may lag the local clock before the decoder
    /// resynchronises from the clock.
    pub max_lag: u32,
}

impl TdpNode {
    /// When the frame's forwarding TF begins, if it has one: it is not
    /// eligible to leave before.
    pub(super) fn tf_start_of(&self, pkt: &Packet) -> Option<Instant> {
        pkt.meta.tdp_tf.map(|tf| self.ctr.tf_start(tf))
    }
}

impl Router {
    pub fn set_tdp(&mut self, tdp: TdpNode) {
        for p in &mut self.ports {
            p.decoder = StampDecoder::with_max_lag(tdp.max_lag as u64);
        }
        self.tdp = Some(tdp);
    }
    pub fn tdp(&self) -> Option<&TdpNode> {
        self.tdp.as_ref()
    }

    /// TDP input processing (§III-B) of a packet received on `port` at
    /// `rx_time`: the upstream TF decoded from its stamp, or `None` —
    /// unstamped, not a TDP router, or a forged stamp from an
    /// asynchronous neighbour, cleared here.
    pub(super) fn tdp_input(
        &mut self,
        port: u16,
        rx_time: Instant,
        info: &Ipv4Info,
        pkt: &mut Packet,
    ) -> Option<u64> {
        let tdp = self.tdp.as_ref()?;
        if !is_tdp_tos(info.tos) {
            return None;
        }
        let p = self.ports.get_mut(port as usize)?;
        if p.cfg.tdp_peer {
            let u = p.decoder.handle_stamp(&tdp.ctr, rx_time, info.tos);
            self.counters.tdp_rx += 1;
            Some(u)
        } else {
            wire::set_tos(&mut pkt.data, 0);
            self.counters.stamp_cleared += 1;
            None
        }
    }

    /// TDP forwarding (§II-B, §II-C): a stamped packet gets its forwarding
    /// TF; an unstamped one of a reserved flow goes to the edge shaper.
    /// Returns the packet to enqueue, or `None` if the shaper kept it or
    /// dropped it (both counted). Without TDP the packet passes unchanged.
    pub(super) fn tdp_forward(
        &mut self,
        now: Instant,
        mut pkt: Packet,
        info: &Ipv4Info,
        upstream_tf: Option<u64>,
    ) -> Option<Packet> {
        let Some(tdp) = self.tdp.as_mut() else {
            return Some(pkt);
        };
        if let Some(u) = upstream_tf {
            let key = FlowKey::from(info);
            let d = tdp.d_flow.get(&key).copied().unwrap_or(tdp.d);
            pkt.meta.tdp_tf = Some(u + d as u64);
            return Some(pkt);
        }
        match tdp.shaper.handle_packet(now, pkt, info) {
            Ok(ShapeOutcome::Shaped { .. }) => {
                self.counters.shaped += 1;
                None
            }
            Ok(ShapeOutcome::NotShaped(p)) => Some(p),
            Err(d) => {
                self.counters.drop(d.reason);
                None
            }
        }
    }

    /// Packets the edge shaper releases at `now`, to their port's wheel.
    pub(super) fn tdp_release(&mut self, now: Instant) {
        if let Some(tdp) = self.tdp.as_mut() {
            while let Some((port, pkt)) = tdp.shaper.poll_release(now) {
                if let Some(p) = self.ports.get_mut(port as usize) {
                    let _ = p.enqueue(pkt, now);
                    self.tx_at.set(port as usize, p.tx_at());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Meta;
    use crate::time::Duration;
    use crate::wire::{MacAddr, UdpSpec};

    fn node() -> TdpNode {
        let ctr = Ctr::new(Duration::from_micros(100), 10, 2).unwrap();
        TdpNode {
            ctr,
            d: 1,
            d_flow: HashMap::new(),
            shaper: EdgeShaper::new(ctr, 10),
            max_lag: 2,
        }
    }

    fn frame(tos: u8) -> Packet {
        let spec = UdpSpec {
            src_mac: MacAddr::local(1),
            dst_mac: MacAddr::local(2),
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.1.1".parse().unwrap(),
            sport: 1,
            dport: 2,
            tos,
            ttl: 64,
            ident: 0,
        };
        Packet::new(wire::build_udp(&spec, 100, b""), Meta::default())
    }

    #[test]
    fn a_frame_is_eligible_from_its_forwarding_tf() {
        let t = node();
        let ctr = &t.ctr;
        // The eligibility of a frame is the start of its forwarding TF.
        let mut p = frame(0);
        assert_eq!(t.tf_start_of(&p), None);
        p.meta.tdp_tf = Some(12);
        assert_eq!(t.tf_start_of(&p), Some(ctr.tf_start(12)));
    }
}
