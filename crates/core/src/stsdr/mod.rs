//! Distributed WFQ on the Switched Two-stage Distributed Router (STSDR):
//! Khan, Sahoo & Manjunath, "Implementation of WFQ in a Distributed Open
//! Software Router" (seed 003).
//!
//! The STSDR is one logical router made of PCs joined by a layer-2 switch
//! (the T-switch): load balancers own the router's external addresses and
//! spread flows over M forwarders (FEs); each forwarder routes, and queues
//! packets in N × K class queues Q_ijk (N outgoing links OL_j, K classes).
//! No forwarder owns an outgoing link, so WFQ over OL_j needs the state of
//! every forwarder. The paper's answer, built here:
//!
//! - phase 1 (§IV-A, [`wire`]): every forwarder broadcasts its head-of-line
//!   state (arrival stamp, length per queue) in a raw Ethernet *DS* frame,
//!   master first, slaves on hearing it, all waiting T_br;
//! - phase 2 (§IV-B, [`sched`]): every forwarder runs, for every forwarder
//!   and every outgoing link, WFQ over the K head-of-line packets with a
//!   per-link virtual clock V_j, and builds preference lists — forwarders
//!   by arrival time (ASORT), links by virtual finish time (VSORT);
//! - phase 3 (§IV-C, [`sched`]): Gale–Shapley stable matching of
//!   forwarders to links, identical at every forwarder; matched forwarders
//!   transmit, and everybody updates every V_j.
//!
//! [`forwarder`] and [`balancer`] are the two node kinds (sans-IO
//! [`crate::node::Node`]s); [`fluid`] is the exact GPS reference used to
//! judge fairness; [`fairness`] runs the paper's Table I/V comparison
//! (distributed vs centralised WFQ on saturated queues) at scheduling level.
//! `docs/stsdr-design.md` maps the paper section by section to this code;
//! `docs/stsdr-wire.md` documents the DS frame byte by byte.

pub mod balancer;
pub mod fairness;
pub mod fluid;
pub mod forwarder;
pub mod sched;
pub mod wire;

#[cfg(test)]
mod testbed;

pub use balancer::{Balancer, BalancerConfig, Liveness};
pub use forwarder::{Forwarder, ForwarderConfig, OutLink, PhaseCosts, Variant};
pub use sched::{Dwfq, LazyRank, Proposer, TieBreak};

use crate::arp::{self, Arp};
use crate::wire::{self as eth, MacAddr, Malformed};

/// What a frame from the T-switch is to an STSDR node (balancer or
/// forwarder), in the order both nodes must look: a DS frame first (a
/// broadcast in the internal VLAN), then a unicast for another MAC, then
/// ARP, then anything else for the node's data path.
#[derive(Debug)]
pub(crate) enum Rx {
    /// A DS frame (§IV-A), whoever it is addressed to.
    Ds,
    /// Unicast to another station: a copy the switch flooded while it had
    /// not learnt the destination. The NIC filters it, so the node counts
    /// it (`rx_not_for_us`) and, if it carries a traffic uid, tells the
    /// driver's ledger the copy is gone (the switch counted it created).
    NotForUs,
    /// A well-formed ARP frame, or why it is not one.
    Arp(Result<Arp, Malformed>),
    /// For the node's data path; `broadcast` if sent to every station.
    Data { broadcast: bool },
}

/// Sorts a received frame for a node whose MAC is `mac`.
pub(crate) fn classify(frame: &[u8], mac: MacAddr) -> Rx {
    if wire::is_ds(frame) {
        return Rx::Ds;
    }
    let dst = eth::eth_dst(frame);
    let broadcast = dst == Some(MacAddr::BROADCAST);
    if dst.is_some() && !broadcast && dst != Some(mac) {
        return Rx::NotForUs;
    }
    if eth::ethertype(frame) == Some(eth::ETHERTYPE_ARP) {
        return Rx::Arp(arp::parse_arp(frame));
    }
    Rx::Data { broadcast }
}

/// The size of an STSDR: M forwarders, N outgoing links, K classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dims {
    /// M: forwarders (FE ids `0..forwarders`).
    pub forwarders: usize,
    /// N: outgoing links (OL indices `0..outlinks`).
    pub outlinks: usize,
    /// K: traffic classes (`0..classes`).
    pub classes: usize,
}

impl Dims {
    pub const fn new(forwarders: usize, outlinks: usize, classes: usize) -> Self {
        Dims {
            forwarders,
            outlinks,
            classes,
        }
    }
    /// Queues per forwarder, N × K.
    pub const fn queues(&self) -> usize {
        self.outlinks * self.classes
    }
    /// Checks the sizes the wire format can carry (§IV-A: a 2-byte FE id;
    /// qosnet's header keeps N and K in one byte each).
    pub fn validate(&self) -> Result<(), String> {
        if self.forwarders == 0 || self.outlinks == 0 || self.classes == 0 {
            return Err(format!(
                "stsdr: M, N and K must be at least 1 (got M={} N={} K={})",
                self.forwarders, self.outlinks, self.classes
            ));
        }
        if self.forwarders > u16::MAX as usize {
            return Err(format!(
                "stsdr: at most 65535 forwarders (got {})",
                self.forwarders
            ));
        }
        if self.outlinks > u8::MAX as usize || self.classes > u8::MAX as usize {
            return Err(format!(
                "stsdr: at most 255 outgoing links and 255 classes (got N={} K={})",
                self.outlinks, self.classes
            ));
        }
        Ok(())
    }
}
