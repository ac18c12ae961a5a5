//! One router interface: its configuration, its output scheduler, its
//! counters, and the transmitter that serialises frames onto the link at
//! the port's rate (the *output* module of ICC 2006 §II-D).
//!
//! The transmitter takes the scheduler's next frame when the link is free
//! and holds the port busy for the frame's wire time (full duplex), or
//! until the NIC reports the frame done (half duplex, a shared segment).
//! With catch-up ([`super::Router::set_transmit_catch_up`]) a frame that
//! was eligible before the transmitter went idle starts when it went idle,
//! as from a NIC's hardware queue (never before its TDP forwarding TF).
//! A TDP frame keeps the stamp the wheel gave it, its forwarding TF,
//! whenever it starts.

use std::cell::Cell;
use std::net::Ipv4Addr;

use super::neighbor::Neighbors;
use super::tdp::TdpNode;
use crate::node::{Duplex, TxTally};
use crate::packet::{Framing, Meta, Packet};
use crate::sched::{Dropped, Scheduler};
use crate::tdp::StampDecoder;
use crate::time::{Duration, Instant};
use crate::wire::{self, MacAddr};

/// Static description of one router interface.
#[derive(Clone, Debug)]
pub struct PortConfig {
    pub name: String,
    pub mac: MacAddr,
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    /// Link capacity in bit/s; the transmitter paces frames at this rate.
    pub rate_bps: u64,
    pub framing: Framing,
    /// MAC of the other end of a point-to-point link, if known statically
    /// (the simulator); `None` resolves next hops by ARP (live).
    pub peer_mac: Option<MacAddr>,
    /// The other end is a TDP router: decode stamps from it.
    pub tdp_peer: bool,
    /// Point-to-point link, or a shared segment where the NIC decides
    /// when each frame goes.
    pub duplex: Duplex,
}

impl PortConfig {
    /// Whether `ip` is on this port's subnet.
    pub fn on_link(&self, ip: Ipv4Addr) -> bool {
        let m = crate::route::mask(self.prefix_len);
        u32::from(ip) & m == u32::from(self.ip) & m
    }
}

/// Per-port counters. Every received frame ends in exactly one of
/// `not_for_us`, `non_ip`, `malformed`, `arp_rx`, or the router-wide
/// counters of IPv4 packets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    /// Frames sent, counted when they crossed, and those a half-duplex
    /// NIC gave up on after 16 attempts ([`TxTally`]).
    pub tx: TxTally,
    pub malformed: u64,
    pub not_for_us: u64,
    /// Of those, traffic frames (`meta.uid != 0`): copies a shared medium
    /// or a flooding switch delivered to this port too (for the ledger).
    pub traffic_not_for_us: u64,
    pub non_ip: u64,
    /// Well-formed ARP packets received.
    pub arp_rx: u64,
}

pub struct Port {
    pub cfg: PortConfig,
    pub(super) sched: Box<dyn Scheduler>,
    pub(super) busy_until: Instant,
    /// Half duplex: a frame is with the NIC, waiting for `handle_tx_done`.
    pub(super) tx_pending: bool,
    /// The scheduler is empty and stays so until the next enqueue (only
    /// for [`Scheduler::quiet_when_empty`] disciplines): the transmitter
    /// and the router's next-work scan skip it without a call.
    pub(super) idle: bool,
    /// The scheduler's last `poll_at` answer while it is still ahead
    /// (`Some(w)` with `w` later than when it was asked, or `None`): it
    /// holds until reached if nothing is enqueued or dequeued meanwhile
    /// ([`Scheduler::poll_at`]), so the router's next-work scan, which runs
    /// after every event, need not ask again. Asking every TDP wheel (never
    /// quiet with padding) each time was a tenth of the live router
    /// thread's CPU.
    sched_wake: Cell<Option<Option<Instant>>>,
    /// The scheduler's [`Scheduler::quiet_when_empty`], asked once: a
    /// property of the discipline, read on every transmission.
    quiet: bool,
    pub(super) decoder: StampDecoder,
    /// Neighbour table and next hops being resolved (ARP).
    pub(super) nbr: Neighbors,
    pub counters: PortCounters,
}

/// A frame the transmitter put on the link.
pub(super) struct Sent {
    pub pkt: Packet,
    /// When the link is free again (full duplex); `None` when the NIC
    /// will say (half duplex).
    pub tx_end: Option<Instant>,
}

impl Port {
    pub fn new(cfg: PortConfig, sched: Box<dyn Scheduler>) -> Self {
        Port {
            cfg,
            quiet: sched.quiet_when_empty(),
            sched,
            busy_until: Instant::ZERO,
            tx_pending: false,
            idle: false,
            sched_wake: Cell::new(None),
            decoder: StampDecoder::default(),
            nbr: Neighbors::default(),
            counters: PortCounters::default(),
        }
    }
    pub fn scheduler(&self) -> &dyn Scheduler {
        self.sched.as_ref()
    }
    pub fn decoder(&self) -> &StampDecoder {
        &self.decoder
    }
    /// When the transmitter finishes the frame it is sending.
    pub fn busy_until(&self) -> Instant {
        self.busy_until
    }
    pub fn add_neighbor(&mut self, ip: Ipv4Addr, mac: MacAddr) {
        self.nbr.learn(ip, mac);
    }
    /// The MAC of a neighbour on this port, learned or static.
    #[inline]
    pub fn neighbor(&self, ip: Ipv4Addr) -> Option<MacAddr> {
        self.nbr.learned(ip).or(self.cfg.peer_mac)
    }
    /// Packets held for unresolved next hops on this port.
    pub fn arp_held(&self) -> usize {
        self.nbr.held()
    }
    /// When the transmitter may next send, as far as the port knows
    /// without asking its scheduler: never (`Instant::MAX`) while its NIC
    /// holds a frame or its queue is quiet, else once the link is free.
    pub(super) fn tx_at(&self) -> Instant {
        if self.tx_pending || self.idle {
            Instant::MAX
        } else {
            self.busy_until
        }
    }
    pub(super) fn ready_at(&self, now: Instant) -> Option<Instant> {
        if self.tx_pending || self.idle {
            return None;
        }
        self.sched_poll_at(now).map(|t| t.max(self.busy_until))
    }
    /// The scheduler's `poll_at(now)`, from the memo while it holds.
    #[inline]
    fn sched_poll_at(&self, now: Instant) -> Option<Instant> {
        if let Some(w) = self.sched_wake.get() {
            if w.is_none_or(|w| w > now) {
                return w;
            }
        }
        let w = self.sched.poll_at(now);
        if w.is_none_or(|w| w > now) {
            self.sched_wake.set(Some(w));
        }
        w
    }
    /// Offer a frame the router originated; refusals are counted by the
    /// scheduler like any other.
    pub(super) fn send_ctrl(&mut self, now: Instant, data: Vec<u8>) {
        let meta = Meta {
            arrival: now,
            ..Meta::default()
        };
        let _: Result<(), Dropped> = self.enqueue(Packet::new(data, meta), now);
    }
    /// Offer a packet to the scheduler (refusals are counted there).
    pub(super) fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped> {
        self.idle = false;
        self.sched_wake.set(None);
        self.sched.enqueue(pkt, now)
    }

    /// The transmitter: the scheduler's next frame if the link is free and
    /// one is due at `now`. A full-duplex port is then busy for the frame's
    /// wire time from its start (`now`, or earlier with `catch_up`, see
    /// [`super::Router::set_transmit_catch_up`]); a half-duplex port waits
    /// for the NIC's `handle_tx_done`.
    #[inline]
    pub(super) fn transmit(
        &mut self,
        now: Instant,
        catch_up: Duration,
        tdp: Option<&TdpNode>,
    ) -> Option<Sent> {
        if self.tx_pending || self.busy_until > now || self.idle {
            return None;
        }
        match self.sched_poll_at(now) {
            None => {
                self.idle = self.quiet;
                return None;
            }
            Some(t) if t > now => return None,
            Some(_) => {}
        }
        self.sched_wake.set(None);
        let mut pkt = self.sched.dequeue(now)?;
        if self.quiet && self.sched_poll_at(now).is_none() {
            self.idle = true;
        }
        if pkt.meta.padding {
            // Padding is addressed from the static plan; a next hop
            // learned by ARP since takes precedence.
            if let Some(b) = pkt.data.get(wire::ETH_HDR + 16..wire::ETH_HDR + 20) {
                let ip = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
                if let Some(mac) = self.nbr.learned(ip) {
                    pkt.data[0..6].copy_from_slice(&mac.0);
                }
            }
        }
        let wire = self.cfg.framing.wire_bytes(pkt.len());
        let mut start = now;
        if catch_up > Duration::ZERO {
            let mut eligible = pkt.meta.arrival;
            if let Some(tf_start) = tdp.and_then(|t| t.tf_start_of(&pkt)) {
                eligible = eligible.max(tf_start);
            }
            start = now.min(self.busy_until.max(eligible)).max(now - catch_up);
        }
        self.counters.tx.handed(self.cfg.duplex, pkt.len() as u64, wire);
        let tx_end = match self.cfg.duplex {
            Duplex::Full => {
                self.busy_until = start + Duration::for_bytes(wire, self.cfg.rate_bps);
                Some(self.busy_until)
            }
            Duplex::Half => {
                self.tx_pending = true;
                None
            }
        };
        Some(Sent { pkt, tx_end })
    }
}
