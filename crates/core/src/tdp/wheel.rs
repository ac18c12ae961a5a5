//! The TDP output module: a wheel of per-TF queues per output port
//! (ICC 2006 §III-C), with best-effort traffic in the unused part of each TF
//! (§II-B) and padding that keeps the downstream stamp decoder in step
//! (§III-B).
//!
//! A port has `n_buf = d_max + 1` FIFO queues, each holding at most
//! `T_f · C` bits: one per TF from the current one to `d_max` TFs ahead.
//! The extra queue means packets are normally never written into the queue
//! being flushed. At every TF boundary the wheel turns by one queue.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use super::ctr::{is_tdp_tos, Ctr};
use crate::packet::{Framing, Meta, Packet};
use crate::sched::{DropReason, Dropped, QueueStats, Scheduler};
use crate::time::{Duration, Instant};
use crate::wire::{self, MacAddr, UdpSpec};

/// The paper's output-queue formula (§III-C):
/// `((TF_out + n_TF − TF_curr) mod n_TF + buf_curr) mod n_buf`, where the TF
/// numbers are positions inside the TC (`0..n_tf`) and `buf_curr` is the
/// queue being flushed. Valid while `TF_out − TF_curr < n_buf ≤ n_TF`.
/// Zero `n_tf` or `n_buf` are treated as 1 rather than dividing by zero.
pub fn queue_index(tf_out_in_tc: u32, tf_curr_in_tc: u32, n_tf: u32, buf_curr: usize, n_buf: usize) -> usize {
    let n_tf = n_tf.max(1) as u64;
    let ahead = (tf_out_in_tc as u64 + n_tf - tf_curr_in_tc as u64 % n_tf) % n_tf;
    ((ahead + buf_curr as u64) % n_buf.max(1) as u64) as usize
}

/// What the DS byte of a TDP packet becomes on this port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StampMode {
    /// The peer is a TDP router: stamp `ctr.stamp(tf)` with the packet's
    /// forwarding TF, its TF of transmission unless it is late
    /// (0x0c/0x1c/0x2c/0x3c).
    Tdp,
    /// The peer is asynchronous (the TDP domain ends here): rewrite the DS
    /// byte to this value, e.g. 0, so no TDP codepoint leaks out.
    Rewrite(u8),
}

/// Addresses of the padding frames a port sends to its TDP peer: a UDP
/// datagram to the discard port (9) of the router at the other end
/// (paper §III-B, footnote 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaddingSpec {
    /// This port's MAC.
    pub src_mac: MacAddr,
    /// The peer interface's MAC.
    pub dst_mac: MacAddr,
    /// This port's IPv4 address.
    pub src_ip: Ipv4Addr,
    /// The peer interface's IPv4 address.
    pub dst_ip: Ipv4Addr,
}

/// When a padding frame is sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PaddingPolicy {
    /// The paper's rule: only in a TF in which nothing at all was sent,
    /// after best effort, so padding never costs bandwidth. A TF that
    /// carries only best-effort frames then carries no stamp, and the
    /// downstream decoder relies on its clock window to catch up.
    #[default]
    WhenIdle,
    /// In every TF that has not carried a stamped frame yet, ahead of best
    /// effort: every TF carries a stamp, for 84 wire bytes of best-effort
    /// capacity in TFs without reserved traffic.
    WhenUnstamped,
}

/// Counters of a [`TdpWheel`] beyond its [`QueueStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TdpStats {
    /// TDP packets accepted into the wheel.
    pub tdp_enq: u64,
    /// TDP packets sent (including late ones).
    pub tdp_sent: u64,
    /// Best-effort packets sent.
    pub be_sent: u64,
    /// Padding frames sent (not counted in [`QueueStats`]: never enqueued).
    pub padding_sent: u64,
    /// Of those, bridges: padding naming a TF that went by without a stamp
    /// (a stall, or a TF of best effort only), sent before the next stamped
    /// frame so the peer's alternating-bit decoder counts every TF.
    pub padding_bridges: u64,
    /// TDP packets still queued when their TF ended; each was sent later,
    /// ahead of the next TF's packets, never dropped.
    pub overrun: u64,
    /// TDP packets that reached the wheel after their forwarding TF had
    /// ended (a stalled router reads them late) but within the late limit:
    /// queued with the overrun, in TF order, and sent late with their own
    /// TF's stamp, as a packet that was queued in time and could not leave.
    pub late_enq: u64,
    /// Best-effort frames carrying a TDP codepoint that were re-marked to 0
    /// on a TDP link, so the peer does not read them as stamps.
    pub be_remarked: u64,
    /// Most wire bytes accepted for any single TF.
    pub max_tf_bytes: u64,
}

/// The per-output-port TDP scheduler (a [`Scheduler`]).
///
/// Packets with `meta.tdp_tf == Some(tf)` go into the queue of TF `tf`
/// (refused if `tf` has passed, is beyond the wheel or its TF is full); the
/// others go to the best-effort child. A packet for the current TF is still
/// taken and sent at once, although rule (i) of §II-B wants it queued by the
/// end of the previous TF. In each TF the wheel sends, in order: packets
/// left over from TFs that already ended, the current TF's packets (FIFO),
/// best effort as long as the guard band allows, then padding if the TF
/// carried nothing ([`PaddingPolicy`]).
pub struct TdpWheel {
    ctr: Ctr,
    n_buf: usize,
    budget: u64,
    capacity_bps: u64,
    framing: Framing,
    queues: Vec<VecDeque<Packet>>,
    /// Wire bytes accepted for the TF currently mapped to each queue, sent
    /// or not: the budget is per TF, not per backlog.
    tf_bytes: Vec<u64>,
    overrun: VecDeque<Packet>,
    held_pkts: usize,
    held_bytes: usize,
    buf_curr: usize,
    tf_curr: Option<u64>,
    be: Box<dyn Scheduler>,
    /// Best-effort frame taken from the child but not yet allowed out by
    /// the guard band (held here, `poll_at` knows its length).
    be_head: Option<Packet>,
    stamping: StampMode,
    padding: Option<PaddingSpec>,
    padding_policy: PaddingPolicy,
    /// What [`Scheduler::peek`] shows when padding is next: padding is
    /// built when it is sent.
    padding_preview: Option<Packet>,
    strict_guard: bool,
    /// TFs a reserved packet may still leave after its forwarding TF ended
    /// ([`TdpWheel::with_late_limit`]); `None`: no limit.
    late_limit: Option<u64>,
    /// The peer decoder's clock window (its `max_lag`): how far behind the
    /// clock a bridge may still name a TF and be read by its bits.
    peer_window: u64,
    last_sent_tf: Option<u64>,
    last_stamped_tf: Option<u64>,
    pad_ident: u16,
    stats: QueueStats,
    tdp: TdpStats,
}

impl TdpWheel {
    /// A wheel for a port of `capacity_bps` with forwarding delays up to
    /// `d_max` TFs (`n_buf = d_max + 1` queues of `floor(T_f·C/8)` wire
    /// bytes each). `be` takes the best-effort traffic. `padding` needs
    /// [`StampMode::Tdp`]: it only makes sense towards a TDP peer.
    pub fn new(
        ctr: Ctr,
        d_max: u32,
        capacity_bps: u64,
        framing: Framing,
        be: Box<dyn Scheduler>,
        stamping: StampMode,
        padding: Option<PaddingSpec>,
    ) -> Result<TdpWheel, String> {
        let n_buf = d_max as u64 + 1;
        if n_buf > ctr.tfs_per_tc() as u64 {
            return Err(format!(
                "TDP wheel: d_max + 1 = {n_buf} queues exceed the {} TFs of a TC \
                 (the queue index is computed modulo n_TF)",
                ctr.tfs_per_tc()
            ));
        }
        if capacity_bps == 0 {
            return Err("TDP wheel: link capacity must be > 0 bit/s".into());
        }
        let budget = tf_budget_bytes(&ctr, capacity_bps);
        if budget == 0 {
            return Err(format!(
                "TDP wheel: a TF of {} at {capacity_bps} bit/s holds less than one byte",
                ctr.tf_len()
            ));
        }
        if padding.is_some() && stamping != StampMode::Tdp {
            return Err("TDP wheel: padding is only sent towards a TDP peer".into());
        }
        let n_buf = n_buf as usize;
        Ok(TdpWheel {
            ctr,
            n_buf,
            budget,
            capacity_bps,
            framing,
            queues: (0..n_buf).map(|_| VecDeque::new()).collect(),
            tf_bytes: vec![0; n_buf],
            overrun: VecDeque::new(),
            held_pkts: 0,
            held_bytes: 0,
            buf_curr: 0,
            tf_curr: None,
            be,
            be_head: None,
            stamping,
            padding_preview: padding.map(|spec| {
                let mut p = padding_packet(&ctr, spec, 0, 0);
                p.meta.tdp_tf = None;
                p
            }),
            padding,
            padding_policy: PaddingPolicy::default(),
            strict_guard: false,
            late_limit: None,
            peer_window: super::StampDecoder::DEFAULT_MAX_LAG,
            last_sent_tf: None,
            last_stamped_tf: None,
            pad_ident: 0,
            stats: QueueStats::default(),
            tdp: TdpStats::default(),
        })
    }

    /// Choose when padding is sent (default [`PaddingPolicy::WhenIdle`]).
    pub fn with_padding_policy(mut self, policy: PaddingPolicy) -> Self {
        self.padding_policy = policy;
        self
    }

    /// With a strict guard band a best-effort frame starts only if it ends
    /// inside the current TF (or is longer than a whole TF and the next TF's
    /// queue is empty). The default guard also lets it run over when the
    /// next TF's queue is empty *now*, which keeps the link busier but can
    /// delay reserved packets that reach that queue during the current TF
    /// by up to one best-effort frame.
    pub fn with_strict_guard(mut self, strict: bool) -> Self {
        self.strict_guard = strict;
        self
    }

    /// Drop, as [`DropReason::TfStale`], a reserved packet still queued
    /// when `limit` more TFs have ended after its forwarding TF (at its
    /// next chance to leave). After a stall longer than that, the port
    /// sheds what it can no longer deliver on time and resumes its schedule
    /// at once, instead of sending every later packet late: on a link
    /// reserved nearly full the backlog would otherwise never drain. Set it
    /// towards a TDP peer to the peer decoder's clock window
    /// ([`super::StampDecoder::with_max_lag`]): a packet later than that
    /// has its stamp misread there anyway. `None` (the default) keeps
    /// every late packet.
    pub fn with_late_limit(mut self, limit: Option<u32>) -> Self {
        self.late_limit = limit.map(u64::from);
        self
    }

    /// The clock window of the peer's stamp decoder (its `max_lag`,
    /// default [`super::StampDecoder::DEFAULT_MAX_LAG`]). The peer counts
    /// TFs by the alternating TF bit, so a TF that went by without a stamp
    /// (the port stalled, or sent only best effort in it) would make it
    /// read the next stamp two TFs early. Before the next stamped frame the
    /// wheel therefore sends padding naming each TF missed (a bridge,
    /// counted), as long as that TF is within this window of the clock,
    /// where the peer still decodes by the bits; further back the peer
    /// resynchronises from its clock anyway.
    pub fn with_peer_window(mut self, max_lag: u32) -> Self {
        self.peer_window = u64::from(max_lag);
        self
    }

    /// The common time reference.
    pub fn ctr(&self) -> &Ctr {
        &self.ctr
    }
    /// Number of per-TF queues (`d_max + 1`).
    pub fn n_buf(&self) -> usize {
        self.n_buf
    }
    /// Wire bytes a TF can carry, `floor(T_f · C / 8)`.
    pub fn budget_bytes(&self) -> u64 {
        self.budget
    }
    /// TF the wheel was last turned to (`None` before first use).
    pub fn current_tf(&self) -> Option<u64> {
        self.tf_curr
    }
    /// Wire bytes accepted so far for absolute TF `tf` (0 outside the wheel).
    pub fn tf_bytes(&self, tf: u64) -> u64 {
        self.queue_for(tf).map_or(0, |i| self.tf_bytes[i])
    }
    /// TDP-specific counters.
    pub fn tdp_stats(&self) -> &TdpStats {
        &self.tdp
    }
    /// The best-effort child.
    pub fn best_effort(&self) -> &dyn Scheduler {
        self.be.as_ref()
    }

    /// Queue holding absolute TF `tf`, if it is on the wheel (the current
    /// TF up to `n_buf - 1` ahead, counted from the last turn).
    fn queue_for(&self, tf: u64) -> Option<usize> {
        let cur = self.tf_curr?;
        let ahead = tf.checked_sub(cur)?;
        (ahead < self.n_buf as u64).then(|| (self.buf_curr + ahead as usize) % self.n_buf)
    }

    /// Turn the wheel to the TF of `now`, as many steps as TF boundaries
    /// passed since the last call. Packets of TFs that ended move to the
    /// overrun queue, in TF order. Returns the current TF; time never runs
    /// backwards for the wheel.
    fn roll(&mut self, now: Instant) -> u64 {
        let t = self.ctr.tf_at(now);
        let Some(cur) = self.tf_curr else {
            self.tf_curr = Some(t);
            return t;
        };
        if t <= cur {
            return cur;
        }
        let steps = t - cur;
        for i in 0..steps.min(self.n_buf as u64) as usize {
            let idx = (self.buf_curr + i) % self.n_buf;
            self.tdp.overrun += self.queues[idx].len() as u64;
            self.overrun.append(&mut self.queues[idx]);
            self.tf_bytes[idx] = 0;
        }
        self.buf_curr = (self.buf_curr + (steps % self.n_buf as u64) as usize) % self.n_buf;
        self.tf_curr = Some(t);
        t
    }

    /// The TF a bridge must name before a frame stamped `tf` leaves in TF
    /// `t`: the first TF after the last one stamped, if that was skipped
    /// and is still inside the peer's window ([`TdpWheel::with_peer_window`]),
    /// and if TF `t` has room for it beyond its reservations (a bridge is
    /// charged to the TF's budget, so it never pushes reserved traffic out
    /// of its TF).
    fn bridge_for(&self, tf: u64, t: u64) -> Option<u64> {
        if self.padding.is_none() || self.stamping != StampMode::Tdp {
            return None;
        }
        let next = self.last_stamped_tf?.checked_add(1)?;
        // `queue_for(t)` is the current TF's queue once the wheel is turned
        // to `t`; beyond the wheel's reach the turn empties it.
        let used = self.queue_for(t).map_or(0, |i| self.tf_bytes[i]);
        let room = used + self.framing.wire_bytes(PADDING_LEN) <= self.budget;
        (tf > next && t - next.min(t) <= self.peer_window && room).then_some(next)
    }

    /// What `peek` shows for reserved frame `p` next in TF `t`: a bridge
    /// goes before it if one is due.
    fn bridged<'a>(&'a self, p: &'a Packet, t: u64) -> Option<&'a Packet> {
        match self.bridge_for(stamp_tf(p, t), t) {
            Some(_) => self.padding_preview.as_ref(),
            None => Some(p),
        }
    }

    /// Whether a packet of forwarding TF `tf` is past the late limit in
    /// TF `t`.
    fn stale(&self, tf: u64, t: u64) -> bool {
        self.late_limit.is_some_and(|l| tf.saturating_add(l) < t)
    }

    /// Drop the left-over packets past the late limit in TF `t`. The
    /// overrun queue is in TF order, so they are at its front.
    fn shed_stale(&mut self, t: u64) {
        while let Some(p) = self.overrun.pop_front() {
            if !self.stale(stamp_tf(&p, t), t) {
                self.overrun.push_front(p);
                return;
            }
            self.held_pkts -= 1;
            self.held_bytes -= p.len();
            self.stats.on_drop(DropReason::TfStale);
        }
    }

    /// TDP packets due at TF `t`: left over, or queued for a TF <= `t`.
    /// Stale ones count: `dequeue` drops them then, which is work due now.
    fn tdp_due(&self, t: u64) -> bool {
        if !self.overrun.is_empty() {
            return true;
        }
        let Some(cur) = self.tf_curr else {
            return false;
        };
        let span = (t.saturating_sub(cur)).min(self.n_buf as u64 - 1) as usize;
        (0..=span).any(|i| !self.queues[(self.buf_curr + i) % self.n_buf].is_empty())
    }

    /// Guard band: may a best-effort (or padding) frame of `len` bytes start
    /// at `now` in TF `t` without delaying reserved traffic of TF `t + 1`?
    /// Yes if it ends by the end of TF `t`, or if TF `t + 1` has nothing
    /// queued (see [`TdpWheel::with_strict_guard`]).
    fn be_fits(&self, len: usize, now: Instant, t: u64) -> bool {
        let wire = Duration::for_bytes(self.framing.wire_bytes(len), self.capacity_bps);
        let end = now + wire;
        if end <= self.ctr.tf_end(t) {
            return true;
        }
        let next_empty = match self.queue_for(t.saturating_add(1)) {
            Some(i) => self.queues[i].is_empty(),
            None => true,
        };
        if self.strict_guard {
            // A frame longer than a TF could never go otherwise.
            next_empty && wire > self.ctr.tf_len()
        } else {
            next_empty
        }
    }

    fn send_tdp(&mut self, mut p: Packet, t: u64) -> Packet {
        self.held_pkts -= 1;
        self.held_bytes -= p.len();
        // The stamp names the packet's forwarding TF here (§II-B rule (ii),
        // §III-A: the next node's input module needs "the forwarding TF of
        // each packet at the previous router"). On time that is the TF of
        // transmission; a late packet (a stalled CPU) keeps its own TF, so
        // the next node still forwards it in its reserved TF `tf + d`
        // instead of pushing it into the next, already full, one. Late
        // packets leave in TF order ahead of the current TF's, so the stamps
        // the peer's alternating-bit decoder sees go back only when a
        // stalled router reads a late packet after this port stamped a later
        // TF (`late_enq`; docs/paper-tdp.md, *Stalls in the simulator*).
        let tf = stamp_tf(&p, t);
        if wire::ethertype(&p.data) == Some(wire::ETHERTYPE_IPV4) {
            let tos = match self.stamping {
                StampMode::Tdp => self.ctr.stamp(tf),
                StampMode::Rewrite(tos) => tos,
            };
            wire::set_tos(&mut p.data, tos);
            if self.stamping == StampMode::Tdp {
                self.last_stamped_tf = Some(tf);
            }
        }
        self.stats.on_dequeue(p.len());
        self.tdp.tdp_sent += 1;
        // A TF that carried only late packets has not shown the peer its
        // own stamp yet: padding is still due in it (both policies).
        self.last_sent_tf = Some(tf);
        p
    }

    fn send_be(&mut self, mut p: Packet, t: u64) -> Packet {
        if self.stamping == StampMode::Tdp
            && wire::ethertype(&p.data) == Some(wire::ETHERTYPE_IPV4)
            && p.data.get(wire::ETH_HDR + 1).is_some_and(|&tos| is_tdp_tos(tos))
        {
            wire::set_tos(&mut p.data, 0);
            self.tdp.be_remarked += 1;
        }
        self.stats.on_dequeue(p.len());
        self.tdp.be_sent += 1;
        self.last_sent_tf = Some(t);
        p
    }

    /// Take the next best-effort frame if the guard band lets it start.
    fn take_be(&mut self, now: Instant, t: u64) -> Option<Packet> {
        if self.be_head.is_none() && self.be.poll_at(now).is_some_and(|w| w <= now) {
            self.be_head = self.be.dequeue(now);
        }
        let len = self.be_head.as_ref()?.len();
        if self.be_fits(len, now, t) {
            self.be_head.take()
        } else {
            None
        }
    }

    /// A padding frame naming TF `t` (a bridge if that is not the current
    /// TF).
    fn padding_frame(&mut self, spec: PaddingSpec, t: u64) -> Packet {
        self.pad_ident = self.pad_ident.wrapping_add(1);
        let p = padding_packet(&self.ctr, spec, t, self.pad_ident);
        self.tdp.padding_sent += 1;
        if let Some(cur) = self.tf_curr.filter(|&c| t < c) {
            self.tdp.padding_bridges += 1;
            if let Some(i) = self.queue_for(cur) {
                self.tf_bytes[i] += self.framing.wire_bytes(PADDING_LEN);
            }
        }
        self.last_sent_tf = Some(t);
        self.last_stamped_tf = Some(t);
        p
    }

    /// Padding to send now under `policy`, if that is the configured policy
    /// and the TF still lacks a (stamped) frame. Padding obeys the guard
    /// band like best effort: a TF with reserved packets next carries stamps
    /// anyway, and their timing matters more than one TF of padding.
    fn padding_due(&self, now: Instant, t: u64, policy: PaddingPolicy) -> Option<PaddingSpec> {
        let due = match policy {
            PaddingPolicy::WhenIdle => self.last_sent_tf != Some(t),
            PaddingPolicy::WhenUnstamped => self.last_stamped_tf != Some(t),
        };
        self.padding
            .filter(|_| due && self.padding_policy == policy && self.be_fits(PADDING_LEN, now, t))
    }
}

/// The TF a reserved packet's stamp names when it leaves in TF `t`: its
/// forwarding TF (earlier than `t` if it is late).
fn stamp_tf(p: &Packet, t: u64) -> u64 {
    p.meta.tdp_tf.map_or(t, |f| f.min(t))
}

/// The padding frame for TF `t`: stamped with `t`, IP ident `ident`.
fn padding_packet(ctr: &Ctr, spec: PaddingSpec, t: u64, ident: u16) -> Packet {
    let udp = UdpSpec {
        src_mac: spec.src_mac,
        dst_mac: spec.dst_mac,
        src: spec.src_ip,
        dst: spec.dst_ip,
        sport: DISCARD_PORT,
        dport: DISCARD_PORT,
        tos: ctr.stamp(t),
        ttl: 1,
        ident,
    };
    let data = wire::build_udp(&udp, wire::IPV4_HDR + wire::UDP_HDR, &[]);
    Packet::new(
        data,
        Meta {
            tdp_tf: Some(t),
            padding: true,
            ..Meta::default()
        },
    )
}

/// UDP discard port (RFC 863), the destination of padding frames.
const DISCARD_PORT: u16 = 9;
/// Frame length of a padding frame: a 28-byte IP packet padded to 60 bytes.
const PADDING_LEN: usize = wire::ETH_MIN_NO_FCS;

/// Wire bytes one TF carries on a link of `capacity_bps`: `floor(T_f·C/8)`.
pub fn tf_budget_bytes(ctr: &Ctr, capacity_bps: u64) -> u64 {
    let b = ctr.tf_len().as_nanos() as u128 * capacity_bps as u128 / 8_000_000_000;
    b.min(u64::MAX as u128) as u64
}

impl Scheduler for TdpWheel {
    fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped> {
        let len = pkt.len();
        let Some(tf_out) = pkt.meta.tdp_tf else {
            return match self.be.enqueue(pkt, now) {
                Ok(()) => {
                    self.stats.on_enqueue(len);
                    Ok(())
                }
                Err(d) => {
                    self.stats.on_drop(d.reason);
                    Err(d)
                }
            };
        };
        let t = self.roll(now);
        let reason = if tf_out < t && !self.stale(tf_out, t) {
            // Late but not stale: the same as a packet its port could not
            // send in its TF (the router, not the port, was stalled).
            let at = self
                .overrun
                .partition_point(|q| q.meta.tdp_tf.is_some_and(|f| f <= tf_out));
            self.tdp.late_enq += 1;
            self.held_pkts += 1;
            self.held_bytes += len;
            self.stats.on_enqueue(len);
            self.overrun.insert(at, pkt);
            return Ok(());
        } else if tf_out < t {
            DropReason::TfLate
        } else if tf_out - t >= self.n_buf as u64 {
            DropReason::TfTooEarly
        } else {
            let idx = queue_index(
                self.ctr.tf_in_tc(tf_out),
                self.ctr.tf_in_tc(t),
                self.ctr.tfs_per_tc(),
                self.buf_curr,
                self.n_buf,
            );
            debug_assert_eq!(Some(idx), self.queue_for(tf_out));
            let wb = self.framing.wire_bytes(len);
            if self.tf_bytes[idx] + wb > self.budget {
                DropReason::TfOverflow
            } else {
                self.tf_bytes[idx] += wb;
                self.tdp.max_tf_bytes = self.tdp.max_tf_bytes.max(self.tf_bytes[idx]);
                self.tdp.tdp_enq += 1;
                self.held_pkts += 1;
                self.held_bytes += len;
                self.stats.on_enqueue(len);
                self.queues[idx].push_back(pkt);
                return Ok(());
            }
        };
        self.stats.on_drop(reason);
        Err(Dropped { pkt, reason })
    }

    fn dequeue(&mut self, now: Instant) -> Option<Packet> {
        let t = self.roll(now);
        self.shed_stale(t);
        // The next reserved frame's stamp, and a bridge before it if TFs
        // went by unstamped. Padding bridges for itself (same frame, an
        // earlier TF named).
        let next_tdp = match self.overrun.front() {
            Some(p) => Some(stamp_tf(p, t)),
            None => self.queues[self.buf_curr].front().map(|_| t),
        };
        if let (Some(tf), Some(spec)) = (next_tdp, self.padding) {
            if let Some(b) = self.bridge_for(tf, t) {
                return Some(self.padding_frame(spec, b));
            }
        }
        if let Some(p) = self.overrun.pop_front() {
            return Some(self.send_tdp(p, t));
        }
        if let Some(p) = self.queues[self.buf_curr].pop_front() {
            return Some(self.send_tdp(p, t));
        }
        if let Some(spec) = self.padding_due(now, t, PaddingPolicy::WhenUnstamped) {
            let tf = self.bridge_for(t, t).unwrap_or(t);
            return Some(self.padding_frame(spec, tf));
        }
        if let Some(p) = self.take_be(now, t) {
            return Some(self.send_be(p, t));
        }
        if let Some(spec) = self.padding_due(now, t, PaddingPolicy::WhenIdle) {
            let tf = self.bridge_for(t, t).unwrap_or(t);
            return Some(self.padding_frame(spec, tf));
        }
        None
    }

    /// Decides exactly as `dequeue(now)` would, on the wheel as it would
    /// be after turning to `now` (without turning it) and without taking
    /// the best-effort child's head. What it shows is the frame before
    /// dequeue finishes it: reserved frames get their DS byte there (the
    /// stamp of their forwarding TF, or the rewrite towards an
    /// asynchronous peer), best-effort frames carrying a TDP codepoint are
    /// re-marked to 0, and padding is built there — for padding, peek shows
    /// a padding frame of the same size and addresses (`meta.padding`),
    /// whose stamp, IP ident and `meta.tdp_tf` are filled in when sent.
    fn peek(&self, now: Instant) -> Option<&Packet> {
        let t = self.ctr.tf_at(now).max(self.tf_curr.unwrap_or(0));
        // Stale packets are dropped, not sent: skip them.
        if let Some(p) = self.overrun.iter().find(|p| !self.stale(stamp_tf(p, t), t)) {
            return self.bridged(p, t);
        }
        if let Some(cur) = self.tf_curr {
            // `roll` moves the queues of TFs that ended, in TF order, to
            // the overrun queue; the current TF's queue follows them.
            let steps = t - cur;
            let ended = steps.min(self.n_buf as u64) as usize;
            let current = (steps < self.n_buf as u64).then_some(ended);
            for i in (0..ended).chain(current) {
                if i < ended && self.stale(cur + i as u64, t) {
                    continue;
                }
                if let Some(p) = self.queues[(self.buf_curr + i) % self.n_buf].front() {
                    return self.bridged(p, t);
                }
            }
        }
        if self.padding_due(now, t, PaddingPolicy::WhenUnstamped).is_some() {
            return self.padding_preview.as_ref();
        }
        let be = match &self.be_head {
            Some(p) => Some(p),
            None if self.be.poll_at(now).is_some_and(|w| w <= now) => self.be.peek(now),
            None => None,
        };
        if let Some(p) = be.filter(|p| self.be_fits(p.len(), now, t)) {
            return Some(p);
        }
        if self.padding_due(now, t, PaddingPolicy::WhenIdle).is_some() {
            return self.padding_preview.as_ref();
        }
        None
    }

    fn poll_at(&self, now: Instant) -> Option<Instant> {
        // Look at the wheel as `dequeue(now)` would after turning it.
        let t = self.ctr.tf_at(now).max(self.tf_curr.unwrap_or(0));
        if self.tdp_due(t) || self.padding_due(now, t, PaddingPolicy::WhenUnstamped).is_some() {
            return Some(now);
        }
        let mut wake = match &self.be_head {
            Some(p) if self.be_fits(p.len(), now, t) => return Some(now),
            Some(_) => Some(self.ctr.tf_end(t)),
            // The child's head length is unknown until taken, so this is
            // optimistic: a frame the guard band refuses costs one empty
            // dequeue, after which it is held and known.
            None => match self.be.poll_at(now) {
                Some(w) if w <= now => return Some(now),
                w => w,
            },
        };
        if self.padding_due(now, t, PaddingPolicy::WhenIdle).is_some() {
            return Some(now);
        }
        let mut earliest = |at: Instant| wake = Some(wake.map_or(at, |w| w.min(at)));
        if self.padding.is_some() {
            earliest(self.ctr.tf_end(t));
        }
        if let Some(cur) = self.tf_curr {
            if let Some(tf) = (t.saturating_add(1)..cur.saturating_add(self.n_buf as u64))
                .find(|&tf| self.queue_for(tf).is_some_and(|i| !self.queues[i].is_empty()))
            {
                earliest(self.ctr.tf_start(tf));
            }
        }
        wake
    }

    fn len(&self) -> usize {
        self.held_pkts + self.be_head.is_some() as usize + self.be.len()
    }
    fn bytes(&self) -> usize {
        self.held_bytes + self.be_head.as_ref().map_or(0, |p| p.len()) + self.be.bytes()
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    /// The wheel files frames by their time frame, never by flow.
    fn uses_flow_id(&self) -> bool {
        false
    }
    fn kind(&self) -> &'static str {
        "tdp"
    }
    fn counters(&self) -> Vec<(String, u64)> {
        let t = &self.tdp;
        [
            ("tdp_sent", t.tdp_sent),
            ("be_sent", t.be_sent),
            ("padding_sent", t.padding_sent),
            ("padding_bridges", t.padding_bridges),
            ("overrun", t.overrun),
            ("late_enq", t.late_enq),
            ("be_remarked", t.be_remarked),
            ("max_tf_bytes", t.max_tf_bytes),
        ]
        .into_iter()
        .map(|(k, n)| (k.to_string(), n))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::Fifo;
    use crate::wire::{build_udp, parse_ipv4};
    use proptest::prelude::*;

    /// 100 µs TFs of 10 per TC on 100 Mb/s: 1250 wire bytes per TF, and one
    /// wire byte is exactly 80 ns, so golden times are exact.
    const TF: u64 = 100_000;
    const C: u64 = 100_000_000;

    fn ctr() -> Ctr {
        Ctr::new(Duration(TF), 10, 4).unwrap()
    }

    fn pkt(uid: u64, ip_len: usize, tdp_tf: Option<u64>) -> Packet {
        let spec = UdpSpec {
            src_mac: MacAddr::local(1),
            dst_mac: MacAddr::local(2),
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 9, 9),
            sport: 5000,
            dport: 6000,
            tos: 0,
            ttl: 64,
            ident: uid as u16,
        };
        let meta = Meta {
            uid,
            tdp_tf,
            ..Meta::default()
        };
        Packet::new(build_udp(&spec, ip_len, &[]), meta)
    }

    fn pad() -> PaddingSpec {
        PaddingSpec {
            src_mac: MacAddr::local(7),
            dst_mac: MacAddr::local(8),
            src_ip: Ipv4Addr::new(10, 1, 0, 1),
            dst_ip: Ipv4Addr::new(10, 1, 0, 2),
        }
    }

    fn wheel(d_max: u32, padding: Option<PaddingSpec>) -> TdpWheel {
        let be = Box::new(Fifo::new(10_000, 1 << 24));
        TdpWheel::new(ctr(), d_max, C, Framing::default(), be, StampMode::Tdp, padding).unwrap()
    }

    fn tf(n: u64) -> Instant {
        ctr().tf_start(n)
    }

    fn wire_time(p: &Packet) -> Duration {
        Duration::for_bytes(Framing::default().wire_bytes(p.len()), C)
    }

    fn tos(p: &Packet) -> u8 {
        parse_ipv4(&p.data)
            .expect("valid IPv4 with a correct checksum")
            .tos
    }

    /// Drive the wheel like an output link from `from` to `until`: a sent
    /// frame holds the link for its wire time, `arrivals` are enqueued at
    /// their own times, and the link sleeps until `poll_at` or the next
    /// arrival. Returns each frame with the instant its transmission began.
    fn run(
        w: &mut TdpWheel,
        mut arrivals: Vec<(Instant, Packet)>,
        from: Instant,
        until: Instant,
    ) -> Vec<(Instant, Packet)> {
        arrivals.sort_by_key(|a| a.0);
        let mut arrivals = arrivals.into_iter().peekable();
        let (mut now, mut out, mut idle_polls) = (from, vec![], 0);
        loop {
            while let Some((at, p)) = arrivals.next_if(|a| a.0 <= now) {
                let _ = w.enqueue(p, at);
            }
            if now >= until {
                return out;
            }
            if let Some(p) = w.dequeue(now) {
                idle_polls = 0;
                let busy = wire_time(&p);
                out.push((now, p));
                now += busy;
                continue;
            }
            let next_arrival = arrivals.peek().map(|a| a.0);
            match [w.poll_at(now), next_arrival].into_iter().flatten().min() {
                None => return out,
                Some(at) if at <= now => {
                    // poll_at may be optimistic once about a held-back BE frame.
                    idle_polls += 1;
                    assert!(idle_polls < 3, "poll_at says {at:?} but nothing is sent");
                }
                Some(at) => now = at.min(until),
            }
        }
    }

    fn order(sent: &[(Instant, Packet)]) -> Vec<(u64, u64)> {
        sent.iter().map(|(at, p)| (p.meta.uid, at.0)).collect()
    }

    #[test]
    fn queue_index_paper_formula() {
        // Wrap-around inside the TC: TF 58 now, TF 1 of the next TC out.
        assert_eq!(queue_index(1, 58, 60, 3, 5), (3 + 3) % 5);
        assert_eq!(queue_index(58, 58, 60, 3, 5), 3);
        assert_eq!(queue_index(0, 0, 0, 0, 0), 0);
    }

    proptest! {
        #[test]
        fn queue_index_matches_absolute_reference(
            n_tf in 1u32..200, n_buf_seed: u32, tf_curr in 0u64..1 << 40, ahead_seed: u64,
        ) {
            let n_buf = 1 + (n_buf_seed % n_tf) as usize;
            let ahead = ahead_seed % n_buf as u64;
            let c = Ctr::new(Duration(1), n_tf, 1).unwrap();
            let tf_out = tf_curr + ahead;
            let got = queue_index(
                c.tf_in_tc(tf_out),
                c.tf_in_tc(tf_curr),
                n_tf,
                (tf_curr % n_buf as u64) as usize,
                n_buf,
            );
            prop_assert_eq!(got as u64, tf_out % n_buf as u64);
        }
    }

    #[test]
    fn constructor_rejects_bad_configurations() {
        let be = || Box::new(Fifo::new(1, 1)) as Box<dyn Scheduler>;
        let fr = Framing::default();
        let err = TdpWheel::new(ctr(), 10, C, fr, be(), StampMode::Tdp, None)
            .err()
            .unwrap();
        assert!(err.contains("exceed the 10 TFs"), "{err}");
        assert!(TdpWheel::new(ctr(), 9, C, fr, be(), StampMode::Tdp, None).is_ok());
        let err = TdpWheel::new(ctr(), 3, 0, fr, be(), StampMode::Tdp, None)
            .err()
            .unwrap();
        assert!(err.contains("capacity"), "{err}");
        let err = TdpWheel::new(ctr(), 3, 1, fr, be(), StampMode::Tdp, None)
            .err()
            .unwrap();
        assert!(err.contains("less than one byte"), "{err}");
        let err = TdpWheel::new(ctr(), 3, C, fr, be(), StampMode::Rewrite(0), Some(pad()))
            .err()
            .unwrap();
        assert!(err.contains("padding"), "{err}");
        let w = wheel(3, None);
        assert_eq!((w.n_buf(), w.budget_bytes()), (4, 1250));
    }

    #[test]
    fn packet_is_released_exactly_at_its_tf() {
        let mut w = wheel(3, None);
        let now = tf(5) + Duration(10_000);
        assert!(w.enqueue(pkt(1, 100, Some(7)), now).is_ok());
        assert_eq!(w.dequeue(now), None);
        assert_eq!(w.poll_at(now), Some(tf(7)));
        assert_eq!(w.dequeue(tf(7) - Duration(1)), None);
        assert_eq!(w.poll_at(tf(7) - Duration(1)), Some(tf(7)));
        let p = w.dequeue(tf(7)).unwrap();
        assert_eq!(p.meta.uid, 1);
        assert_eq!(tos(&p), 0x1c); // TF 7: odd, TC 0
        assert_eq!(w.poll_at(tf(7)), None);
        assert_eq!((w.tdp_stats().tdp_sent, w.tdp_stats().overrun), (1, 0));
        assert_eq!(w.len(), 0);
    }

    /// X, Y: 1038 wire bytes (83.04 µs); Z, A, B: 138 wire bytes (11.04 µs).
    fn gap_arrivals() -> Vec<(Instant, Packet)> {
        vec![
            (tf(5), pkt(1, 100, Some(6))), // A
            (tf(5), pkt(2, 100, Some(6))), // B
            (tf(5), pkt(10, 1000, None)),  // X
            (tf(5), pkt(11, 1000, None)),  // Y
            (tf(5), pkt(12, 100, None)),   // Z
        ]
    }

    #[test]
    fn best_effort_fills_gaps_within_the_guard_band() {
        let mut w = wheel(3, None);
        let sent = run(&mut w, gap_arrivals(), tf(5), tf(9));
        // X fills TF 5. Y would run into TF 6, whose queue holds A and B,
        // so it waits. TF 6 starts with A and B; Y then runs over into
        // TF 7 because TF 7 has nothing reserved.
        assert_eq!(
            order(&sent),
            vec![
                (10, 500_000),
                (1, 600_000),
                (2, 611_040),
                (11, 622_080),
                (12, 705_120)
            ]
        );
        assert_eq!(tos(&sent[1].1), 0x0c);
        assert_eq!(tos(&sent[3].1), 0); // best effort keeps its DS byte
        let s = w.tdp_stats();
        assert_eq!((s.tdp_sent, s.be_sent, s.padding_sent, s.overrun), (2, 3, 0, 0));
        assert_eq!((w.stats().enq_pkts, w.stats().deq_pkts), (5, 5));
    }

    #[test]
    fn strict_guard_keeps_best_effort_inside_the_tf() {
        let mut w = wheel(3, None).with_strict_guard(true);
        let sent = run(&mut w, gap_arrivals(), tf(5), tf(9));
        assert_eq!(
            order(&sent),
            vec![
                (10, 500_000),
                (1, 600_000),
                (2, 611_040),
                (11, 700_000),
                (12, 783_040)
            ]
        );
    }

    #[test]
    fn padding_once_per_idle_tf_with_alternating_stamps() {
        let mut w = wheel(3, Some(pad()));
        let sent = run(&mut w, vec![], tf(10), tf(14));
        let starts: Vec<u64> = sent.iter().map(|(at, _)| at.0).collect();
        assert_eq!(starts, vec![tf(10).0, tf(11).0, tf(12).0, tf(13).0]);
        let stamps: Vec<u8> = sent.iter().map(|(_, p)| tos(p)).collect();
        assert_eq!(stamps, vec![0x2c, 0x3c, 0x2c, 0x3c]); // TC 1
        for (i, (_, p)) in sent.iter().enumerate() {
            assert!(p.meta.padding);
            assert_eq!(p.meta.tdp_tf, Some(10 + i as u64));
            assert_eq!(p.len(), 60);
            let ip = parse_ipv4(&p.data).unwrap();
            assert_eq!((ip.total_len, ip.ttl, ip.proto, ip.dport), (28, 1, 17, 9));
            assert_eq!((ip.src, ip.dst), (pad().src_ip, pad().dst_ip));
            assert_eq!(wire::eth_dst(&p.data), Some(pad().dst_mac));
        }
        assert_eq!(w.tdp_stats().padding_sent, 4);
        // Padding is not traffic: it was never enqueued.
        assert_eq!(w.stats().deq_pkts, 0);
        assert_eq!(w.poll_at(tf(14) - Duration(1)), Some(tf(14)));

        // A TF with reserved traffic needs no padding; with the paper's rule
        // a TF with only best effort gets none either.
        // TF 16 then carries no stamp, so TF 17 first sends a bridge naming
        // it: the peer counts TFs by the alternating bit and would read 17
        // as 15.
        let arrivals = vec![(tf(14), pkt(1, 100, Some(15))), (tf(16), pkt(2, 100, None))];
        let sent = run(&mut w, arrivals, tf(14), tf(18));
        let got: Vec<(bool, u64, u64, Option<u64>)> = sent
            .iter()
            .map(|(at, p)| (p.meta.padding, p.meta.uid, ctr().tf_at(*at), p.meta.tdp_tf))
            .collect();
        assert_eq!(
            got,
            vec![
                (true, 0, 14, Some(14)),
                (false, 1, 15, Some(15)),
                (false, 2, 16, None),
                (true, 0, 17, Some(16)),
                (true, 0, 17, Some(17))
            ]
        );
        assert_eq!(w.tdp_stats().padding_bridges, 1);
    }

    #[test]
    fn unstamped_policy_pads_ahead_of_best_effort() {
        let mut w = wheel(3, Some(pad())).with_padding_policy(PaddingPolicy::WhenUnstamped);
        let arrivals = vec![(tf(15), pkt(1, 100, Some(16))), (tf(15), pkt(2, 100, None))];
        let sent = run(&mut w, arrivals, tf(15), tf(17));
        let got: Vec<(bool, u64, u64)> = sent
            .iter()
            .map(|(at, p)| (p.meta.padding, p.meta.uid, at.0))
            .collect();
        // TF 15: padding (84 B = 6.72 µs), then the BE frame; TF 16: the
        // reserved packet carries the stamp, so no padding.
        assert_eq!(
            got,
            vec![(true, 0, 1_500_000), (false, 2, 1_506_720), (false, 1, 1_600_000)]
        );
    }

    #[test]
    fn padding_respects_the_guard_band() {
        let mut w = wheel(3, Some(pad()));
        let late = tf(5) + Duration(TF - 1_000); // 1 µs before TF 6
        assert!(w.enqueue(pkt(1, 100, Some(6)), late).is_ok());
        // Nothing was sent in TF 5, but a 6.72 µs padding frame would delay
        // the reserved packet of TF 6.
        assert_eq!(w.dequeue(late), None);
        assert_eq!(w.poll_at(late), Some(tf(6)));
        assert_eq!(w.dequeue(tf(6)).unwrap().meta.uid, 1);
    }

    #[test]
    fn drops_are_counted_by_reason() {
        // 4 queues: TFs 5..=8 seen from TF 5; no late packet is kept.
        let mut w = wheel(3, None).with_late_limit(Some(0));
        let now = tf(5) + Duration(50_000);
        let reason = |r: Result<(), Dropped>| r.err().map(|d| d.reason);
        assert_eq!(
            reason(w.enqueue(pkt(1, 100, Some(4)), now)),
            Some(DropReason::TfLate)
        );
        assert_eq!(
            reason(w.enqueue(pkt(2, 100, Some(9)), now)),
            Some(DropReason::TfTooEarly)
        );
        assert_eq!(reason(w.enqueue(pkt(3, 100, Some(8)), now)), None);
        // The current TF still takes packets (sent at once).
        assert_eq!(reason(w.enqueue(pkt(4, 100, Some(5)), now)), None);
        // TF 6: 1038 + 138 = 1176 of 1250 B fits, another 138 does not.
        assert_eq!(reason(w.enqueue(pkt(5, 1000, Some(6)), now)), None);
        assert_eq!(reason(w.enqueue(pkt(6, 100, Some(6)), now)), None);
        assert_eq!(
            reason(w.enqueue(pkt(7, 100, Some(6)), now)),
            Some(DropReason::TfOverflow)
        );
        let st = w.stats();
        for r in [DropReason::TfLate, DropReason::TfTooEarly, DropReason::TfOverflow] {
            assert_eq!(st.drops(r), 1, "{r:?}");
        }
        assert_eq!((st.enq_pkts, st.total_drops()), (4, 3));
        assert_eq!((w.tf_bytes(6), w.tdp_stats().max_tf_bytes), (1176, 1176));
        assert_eq!(w.len(), 4);
        // The budget is per TF: sending does not free room in it.
        assert_eq!(w.dequeue(now).unwrap().meta.uid, 4);
        assert_eq!(w.tf_bytes(5), 138);
    }

    #[test]
    fn late_packets_go_first_and_are_counted() {
        let mut w = wheel(3, None);
        for (uid, t) in [(1, 6), (2, 6), (3, 7), (4, 8)] {
            w.enqueue(pkt(uid, 100, Some(t)), tf(5)).unwrap();
        }
        // The port was not served during TF 6 at all (e.g. a stalled CPU).
        let sent = run(&mut w, vec![], tf(7) + Duration(5_000), tf(10));
        let got: Vec<(u64, u64, u8)> = sent
            .iter()
            .map(|(at, p)| (p.meta.uid, ctr().tf_at(*at), tos(p)))
            .collect();
        // Stamps name each packet's forwarding TF, late or not, and stay in
        // order: 6, 6, 7, then 8 on time.
        assert_eq!(got, vec![(1, 7, 0x0c), (2, 7, 0x0c), (3, 7, 0x1c), (4, 8, 0x0c)]);
        assert_eq!(w.tdp_stats().overrun, 2);

        // Unserved for longer than the whole wheel: nothing is lost, TF order kept.
        for (uid, t) in [(5, 21), (6, 22), (7, 23)] {
            w.enqueue(pkt(uid, 100, Some(t)), tf(20)).unwrap();
        }
        let sent = run(&mut w, vec![], tf(40), tf(41));
        assert_eq!(
            sent.iter().map(|(_, p)| p.meta.uid).collect::<Vec<_>>(),
            vec![5, 6, 7]
        );
        assert_eq!(w.tdp_stats().overrun, 5);
        assert_eq!(w.current_tf(), Some(40));
    }

    #[test]
    fn a_tf_that_sent_only_late_packets_still_shows_its_stamp() {
        // Without its own stamp in TF 7 the peer would see stamps 6, 8:
        // the same TF bit twice, and decode TF 8 as 6.
        for policy in [PaddingPolicy::WhenIdle, PaddingPolicy::WhenUnstamped] {
            let mut w = wheel(3, Some(pad())).with_padding_policy(policy);
            w.enqueue(pkt(1, 100, Some(6)), tf(5)).unwrap();
            w.enqueue(pkt(2, 100, Some(8)), tf(5)).unwrap();
            // Not served during TF 6 (a stall); served again early in TF 7.
            let sent = run(&mut w, vec![], tf(7) + Duration(5_000), tf(9));
            let got: Vec<(u64, u8, bool)> = sent
                .iter()
                .map(|(at, p)| (ctr().tf_at(*at), tos(p), p.meta.padding))
                .collect();
            let s = |t| ctr().stamp(t);
            assert_eq!(
                got,
                vec![(7, s(6), false), (7, s(7), true), (8, s(8), false)],
                "{policy:?}"
            );
        }
    }

    #[test]
    fn a_late_packet_within_the_limit_is_sent_late_in_tf_order() {
        let mut w = wheel(3, None).with_late_limit(Some(2));
        let now = tf(5) + Duration(50_000);
        // TF 3 is 2 TFs back: kept, ahead of the current TF's packet;
        // TF 2 is 3 back: refused as late.
        assert!(w.enqueue(pkt(1, 100, Some(5)), now).is_ok());
        assert!(w.enqueue(pkt(2, 100, Some(4)), now).is_ok());
        assert!(w.enqueue(pkt(3, 100, Some(3)), now).is_ok());
        let late = w.enqueue(pkt(4, 100, Some(2)), now).err().map(|d| d.reason);
        assert_eq!(late, Some(DropReason::TfLate));
        assert_eq!(w.tdp_stats().late_enq, 2);
        let order: Vec<(u64, Option<u64>)> = (0..3)
            .map(|_| w.dequeue(now).map(|p| (p.meta.uid, p.meta.tdp_tf)).unwrap())
            .collect();
        assert_eq!(order, vec![(3, Some(3)), (2, Some(4)), (1, Some(5))]);
    }

    #[test]
    fn a_late_limit_sheds_what_can_no_longer_make_it() {
        let mut w = wheel(3, None).with_late_limit(Some(1));
        for (uid, t) in [(1, 6), (2, 7), (3, 8)] {
            w.enqueue(pkt(uid, 100, Some(t)), tf(5)).unwrap();
        }
        // Stalled through TFs 6 and 7, served again in TF 8: TF 6's packet
        // is two TFs late (dropped), TF 7's one (sent, stamped 7).
        let sent = run(&mut w, vec![], tf(8) + Duration(5_000), tf(10));
        let got: Vec<(u64, u64, u8)> = sent
            .iter()
            .map(|(at, p)| (p.meta.uid, ctr().tf_at(*at), tos(p)))
            .collect();
        let s = |t| ctr().stamp(t);
        assert_eq!(got, vec![(2, 8, s(7)), (3, 8, s(8))]);
        assert_eq!(w.stats().drops(DropReason::TfStale), 1);
        assert_eq!((w.len(), w.bytes()), (0, 0));

        // A stall longer than the whole wheel: all but the last TF's shed.
        for (uid, t) in [(5, 11), (6, 12), (7, 13)] {
            w.enqueue(pkt(uid, 100, Some(t)), tf(10)).unwrap();
        }
        assert_eq!(w.peek(tf(14)).map(|p| p.meta.uid), Some(7));
        assert_eq!(w.dequeue(tf(14)).map(|p| p.meta.uid), Some(7));
        assert_eq!(w.stats().drops(DropReason::TfStale), 3);
        assert!(w.is_empty());

        // Without a limit (the default) nothing is shed.
        let mut w = wheel(3, None);
        w.enqueue(pkt(8, 100, Some(6)), tf(5)).unwrap();
        assert_eq!(w.dequeue(tf(40)).map(|p| p.meta.uid), Some(8));
    }

    #[test]
    fn ds_byte_handling_by_peer_kind() {
        // Towards a TDP peer, a best-effort frame must not look stamped.
        let mut w = wheel(3, None);
        let mut be = pkt(1, 100, None);
        wire::set_tos(&mut be.data, 0x1c);
        w.enqueue(be, tf(5)).unwrap();
        assert_eq!(tos(&w.dequeue(tf(5)).unwrap()), 0);
        assert_eq!(w.tdp_stats().be_remarked, 1);
        // Towards an asynchronous peer, TDP frames get the egress TOS and
        // best effort is left alone.
        let be_child = Box::new(Fifo::new(10, 10_000));
        let mut w = TdpWheel::new(
            ctr(),
            3,
            C,
            Framing::default(),
            be_child,
            StampMode::Rewrite(0),
            None,
        )
        .unwrap();
        let mut tdp = pkt(2, 100, Some(5));
        wire::set_tos(&mut tdp.data, 0x3c);
        let mut be = pkt(3, 100, None);
        wire::set_tos(&mut be.data, 0x1c);
        w.enqueue(tdp, tf(5)).unwrap();
        w.enqueue(be, tf(5)).unwrap();
        assert_eq!(tos(&w.dequeue(tf(5)).unwrap()), 0);
        assert_eq!(tos(&w.dequeue(tf(5)).unwrap()), 0x1c);
        assert_eq!(w.tdp_stats().be_remarked, 0);
    }

    #[test]
    fn poll_at_is_none_when_idle_without_padding() {
        let mut w = wheel(3, None);
        assert_eq!(w.poll_at(tf(3)), None);
        w.enqueue(pkt(1, 100, None), tf(3)).unwrap();
        assert_eq!(w.poll_at(tf(3)), Some(tf(3)));
        assert_eq!(w.dequeue(tf(3)).unwrap().meta.uid, 1);
        assert_eq!(w.poll_at(tf(3)), None);
    }

    /// A random reserved load within every TF's budget (each packet arriving
    /// at least `min_ahead` TFs before its forwarding TF) under a
    /// best-effort backlog. Returns the arrivals and the number of TDP ones.
    fn load(
        seed: u64,
        d_max: u64,
        min_ahead: u64,
        tfs: u64,
        be_pkts: usize,
    ) -> (Vec<(Instant, Packet)>, usize) {
        let mut x = seed | 1;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        let mut arrivals = vec![];
        let mut uid = 0;
        for out in 20..20 + tfs {
            let mut room = 1250;
            loop {
                let ip_len = 28 + rnd(700) as usize;
                let wb = Framing::default().wire_bytes(14 + ip_len);
                if wb > room || rnd(4) == 0 {
                    break;
                }
                room -= wb;
                let ahead = min_ahead + rnd(d_max - min_ahead + 1);
                let at = tf(out - ahead) + Duration(rnd(TF));
                uid += 1;
                arrivals.push((at, pkt(uid, ip_len, Some(out))));
            }
        }
        let n_tdp = arrivals.len();
        for _ in 0..be_pkts {
            uid += 1;
            let at = tf(15 + rnd(tfs + 5)) + Duration(rnd(TF));
            arrivals.push((at, pkt(uid, 28 + rnd(972) as usize, None)));
        }
        (arrivals, n_tdp)
    }

    fn check_reserved_timing(
        mut w: TdpWheel,
        arrivals: Vec<(Instant, Packet)>,
        n_tdp: usize,
    ) -> Result<(), TestCaseError> {
        let n = arrivals.len();
        let sent = run(&mut w, arrivals, tf(10), tf(10_000));
        let c = ctr();
        let mut tdp_seen = 0;
        for (at, p) in &sent {
            if p.meta.padding {
                continue;
            }
            if let Some(out) = p.meta.tdp_tf {
                tdp_seen += 1;
                prop_assert_eq!(c.tf_at(*at), out, "uid {} started at {:?}", p.meta.uid, at);
                prop_assert_eq!(tos(p), c.stamp(out));
            }
        }
        prop_assert_eq!(tdp_seen, n_tdp);
        prop_assert_eq!(w.tdp_stats().overrun, 0);
        prop_assert_eq!(w.stats().total_drops(), 0);
        // Conservation: everything offered left the port.
        prop_assert_eq!(sent.iter().filter(|(_, p)| !p.meta.padding).count(), n);
        prop_assert_eq!(w.len(), 0);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// With the strict guard band, reserved packets that reach the port
        /// by the end of the previous TF always leave in their TF, whatever
        /// the best-effort backlog and the padding policy.
        #[test]
        fn strict_guard_keeps_reserved_packets_in_their_tf(
            seed: u64, d_max in 1u64..6, be_pkts in 0usize..300, pad_policy: bool,
        ) {
            let (arrivals, n_tdp) = load(seed, d_max, 1, 40, be_pkts);
            let policy = if pad_policy { PaddingPolicy::WhenUnstamped } else { PaddingPolicy::WhenIdle };
            let w = wheel(d_max as u32, Some(pad()))
                .with_strict_guard(true)
                .with_padding_policy(policy);
            check_reserved_timing(w, arrivals, n_tdp)?;
        }

        /// With the default guard band the same holds for packets that
        /// arrive at least two TFs ahead (immediate forwarding with d >= 2).
        #[test]
        fn default_guard_keeps_early_reserved_packets_in_their_tf(
            seed: u64, d_max in 2u64..6, be_pkts in 0usize..300, pad_policy: bool,
        ) {
            let (arrivals, n_tdp) = load(seed, d_max, 2, 40, be_pkts);
            let policy = if pad_policy { PaddingPolicy::WhenUnstamped } else { PaddingPolicy::WhenIdle };
            let w = wheel(d_max as u32, Some(pad())).with_padding_policy(policy);
            check_reserved_timing(w, arrivals, n_tdp)?;
        }
    }
}
