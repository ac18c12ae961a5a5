//! RETHER's timing model: token holding times (eq. 1 and 2) with the
//! software overhead measured in §4.2 (eq. 7), the admission test (eq. 3),
//! the NRT access latency of eq. 4–6 — as printed and as a bound qosnet
//! can prove — and the timers of failure handling (§2.4 and beyond).
//!
//! Times are what the *accounting* charges the token's ResidualTime; how
//! the station keeps real time in step with it is in `station.rs`.
//!
//! Defaults are the paper's 1995 PCs (i486, ISA SMC Elite cards, 10 Mb/s):
//! a = 140 µs per packet, b = 650 µs per message (eq. 7), and
//! t_token = 247 µs, the total of Table 2. They are parameters, so the same
//! code shows what RETHER does on today's hardware.
//!
//! Where the paper divides the data by the bandwidth, qosnet charges the
//! frames' real wire time — RETHER and Ethernet headers, FCS, preamble and
//! inter-frame gap, minimum-frame padding — so a reservation is never
//! short by its framing ([`TimingModel::paper_tht`] keeps the printed form
//! for comparison).

use std::fmt;

use crate::packet::Framing;
use crate::time::Duration;
use crate::wire::ETH_HDR;

use super::wire::{RT_HDR, RT_PAYLOAD_MAX};
use super::NrtPolicy;

/// Largest Ethernet frame without FCS: 14-byte header + 1500-byte MTU.
pub const MAX_FRAME: usize = ETH_HDR + super::wire::MTU;

/// A station's costs, as in eq. 1, 2 and 7.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimingModel {
    /// Ethernet bandwidth, bit/s.
    pub rate_bps: u64,
    /// `a` of eq. 7: per-packet processing (transmit-complete interrupt,
    /// start of the next packet).
    pub per_packet: Duration,
    /// `b` of eq. 7: processing of the first packet, and its copy to the
    /// NIC unless the copy costs below are given (then they charge it).
    pub per_message: Duration,
    /// Token processing and passing overhead (Table 2), its copies
    /// included.
    pub t_token: Duration,
    pub framing: Framing,
    /// Copying a packet between memory and the NIC (§5.2, Table 3):
    /// `copy_per_packet + copy_per_byte × frame bytes`. Zero (the
    /// default): eq. 7's `b` holds the first packet's copy and later
    /// copies overlap the wire, as §4.2 measured at 10 Mb/s. Given, each
    /// message pays its first packet's copy, and every later packet the
    /// part of its copy that its predecessor's wire time does not hide
    /// (the pipelining of §5.2: at 100 Mb/s an I/O-bus copy of a
    /// 1500-byte packet, 604 µs, outlasts its 123 µs on the wire).
    pub copy_per_packet: Duration,
    pub copy_per_byte: Duration,
}

impl Default for TimingModel {
    fn default() -> Self {
        TimingModel::paper_1995()
    }
}

impl TimingModel {
    /// The paper's testbed: 10 Mb/s, a = 140 µs, b = 650 µs (§4.2),
    /// t_token = 247 µs (Table 2).
    pub const fn paper_1995() -> Self {
        TimingModel {
            rate_bps: 10_000_000,
            per_packet: Duration::from_micros(140),
            per_message: Duration::from_micros(650),
            t_token: Duration::from_micros(247),
            framing: Framing {
                fcs: 4,
                preamble: 8,
                ifg: 12,
            },
            copy_per_packet: Duration::ZERO,
            copy_per_byte: Duration::ZERO,
        }
    }

    /// Time to copy a frame of `len` bytes between memory and the NIC
    /// (Table 3's linear model); zero without copy costs.
    pub fn copy_time(&self, len: usize) -> Duration {
        Duration(
            self.copy_per_byte
                .0
                .saturating_mul(len as u64)
                .saturating_add(self.copy_per_packet.0),
        )
    }

    /// The copy time of a packet of `len` bytes that the wire time of its
    /// predecessor (`prev_len`, `None` for a message's first packet) does
    /// not hide.
    pub fn copy_stall(&self, prev_len: Option<usize>, len: usize) -> Duration {
        let c = self.copy_time(len);
        match prev_len {
            None => c,
            Some(p) => Duration(c.0.saturating_sub(self.wire_time(p).0)),
        }
    }

    /// The longest a NIC can still hold a frame once every other station
    /// has gone quiet: IEEE 802.3's largest backoff (2^10 - 1 slot times
    /// of 512 bits, §4.2.3.2.5), then the longest frame. A station that
    /// hears a switch message while its NIC is that deep in backoff (the
    /// capture effect of a saturated segment) can acknowledge only after.
    pub fn nic_hold_max(&self) -> Duration {
        let slot = Duration::for_bytes(512 / 8, self.rate_bps);
        Duration(slot.0 * 1023) + self.wire_time(1514)
    }

    /// Time a frame of `frame_len` bytes (no FCS) occupies the wire.
    pub fn wire_time(&self, frame_len: usize) -> Duration {
        Duration::for_bytes(self.framing.wire_bytes(frame_len), self.rate_bps)
    }

    /// The S/W overhead of eq. 7 for `n` packets: a·n + b, nothing when
    /// nothing is sent.
    pub fn sw_overhead(&self, n: u64) -> Duration {
        if n == 0 {
            return Duration::ZERO;
        }
        Duration(
            self.per_packet
                .0
                .saturating_mul(n)
                .saturating_add(self.per_message.0),
        )
    }

    /// Eq. 7: transmission time of a message of frames of these lengths,
    /// with the copies the wire does not hide (see `copy_per_byte`).
    pub fn transmission_time<I: IntoIterator<Item = usize>>(&self, frame_lens: I) -> Duration {
        let (mut wire, mut n, mut copy) = (Duration::ZERO, 0u64, Duration::ZERO);
        let mut prev = None;
        for len in frame_lens {
            wire += self.wire_time(len);
            copy += self.copy_stall(prev, len);
            prev = Some(len);
            n += 1;
        }
        wire + copy + self.sw_overhead(n)
    }

    /// Eq. 1: THT_RT of a reservation of `bytes` per TRT, sent as RETHER
    /// data frames.
    pub fn tht_rt(&self, bytes: u32) -> Duration {
        self.transmission_time(rt_frame_lens(bytes)) + self.t_token
    }

    /// Eq. 2: THT_NRT of a message of frames of these lengths; with
    /// nothing to send, the token overhead alone.
    pub fn tht_nrt<I: IntoIterator<Item = usize>>(&self, frame_lens: I) -> Duration {
        self.transmission_time(frame_lens) + self.t_token
    }

    /// Eq. 1 as printed: `bytes` / bandwidth + a·n + b + t_token, payload
    /// only, no framing.
    pub fn paper_tht(&self, bytes: u64, n: u64) -> Duration {
        Duration::for_bytes(bytes, self.rate_bps) + self.sw_overhead(n) + self.t_token
    }

    /// The longest THT_NRT one visit can take under `policy` with
    /// maximum-size frames; `None` when the policy has no limit (as many
    /// as fit).
    pub fn nrt_visit_max(&self, policy: NrtPolicy) -> Option<Duration> {
        let k = match policy {
            NrtPolicy::OnePacket => 1,
            NrtPolicy::AtMost(k) => k.max(1) as usize,
            NrtPolicy::AsManyAsFit => return None,
        };
        Some(self.tht_nrt(std::iter::repeat_n(MAX_FRAME, k)))
    }
}

/// Number of RT data frames that carry `bytes`.
pub fn rt_fragments(bytes: u32) -> u32 {
    (bytes as usize).div_ceil(RT_PAYLOAD_MAX) as u32
}

/// Frame lengths (no FCS, before minimum padding) of a unit of `bytes`.
pub fn rt_frame_lens(bytes: u32) -> impl Iterator<Item = usize> {
    let n = rt_fragments(bytes) as usize;
    let total = bytes as usize;
    (0..n).map(move |i| {
        let payload = (total - i * RT_PAYLOAD_MAX).min(RT_PAYLOAD_MAX);
        ETH_HDR + RT_HDR + payload
    })
}

/// Why a session was not admitted: the figures of eq. 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Σ THT_RT of the sessions already in the RT set.
    pub reserved: Duration,
    /// THT_RT of the new session.
    pub requested: Duration,
    pub t_nrt: Duration,
    pub trt: Duration,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "admission refused (eq. 3): reserved {} + requested {} + T_NRT {} = {} > TRT {}",
            self.reserved,
            self.requested,
            self.t_nrt,
            self.reserved + self.requested + self.t_nrt,
            self.trt
        )
    }
}

/// Eq. 3: admit a session of THT `requested` next to `reserved` iff
/// reserved + requested + T_NRT ≤ TRT.
pub fn admission(
    reserved: Duration,
    requested: Duration,
    t_nrt: Duration,
    trt: Duration,
) -> Result<(), Refusal> {
    if reserved + requested + t_nrt <= trt {
        Ok(())
    } else {
        Err(Refusal {
            reserved,
            requested,
            t_nrt,
            trt,
        })
    }
}

/// Eq. 4: the least number of cycles X with X · T_NRT ≥ N · THT_NRT_avg.
pub fn paper_x(n: u64, tht_nrt_avg: Duration, t_nrt: Duration) -> u64 {
    if t_nrt == Duration::ZERO {
        return u64::MAX;
    }
    (n.saturating_mul(tht_nrt_avg.0)).div_ceil(t_nrt.0).max(1)
}

/// Eq. 5: worst-case network access latency, X · TRT.
pub fn paper_worst_latency(x: u64, trt: Duration) -> Duration {
    Duration(x.saturating_mul(trt.0))
}

/// Eq. 6: the least T_NRT for `n` nodes, X cycles of latency and
/// `nrt_percent` % of the bandwidth left to NRT traffic:
/// N · t_token / X + share · TRT.
pub fn paper_t_nrt_min(n: u64, t_token: Duration, x: u64, nrt_percent: u32, trt: Duration) -> Duration {
    let per = Duration(n.saturating_mul(t_token.0) / x.max(1));
    per + Duration((trt.0 as u128 * nrt_percent as u128 / 100) as u64)
}

/// NRT visits every cycle is sure to serve before it can refuse one, given
/// the longest visit `visit_max` (`None`: unbounded, then one). Needs
/// T_NRT ≥ one maximum-size packet's THT_NRT, which station configs
/// enforce.
pub fn nrt_visits_per_cycle(t_nrt: Duration, visit_max: Option<Duration>) -> u64 {
    match visit_max {
        Some(h) if h > Duration::ZERO => (t_nrt.0 / h.0).max(1),
        _ => 1,
    }
}

/// A provable bound on NRT access latency — the time from a packet's
/// arrival at the head of a node's NRT queue to the start of the visit
/// that sends it — for the round robin of §2.2.3:
///
/// every cycle starts its NRT phase with at least T_NRT left (eq. 3), and
/// a visit is refused only when less than one visit's worth is left, so
/// each cycle serves at least v = [`nrt_visits_per_cycle`] nodes in
/// round-robin order and a refused node is first in the next one. A node
/// passed over by the pointer just before its packet arrived waits for the
/// other N − 1 nodes, at most ⌈(N − 1) / v⌉ further cycles, plus one more
/// if it is refused when the pointer reaches it, plus the rest of the
/// current cycle:
///
/// latency ≤ (⌈(N − 1) / v⌉ + 2) · TRT.
///
/// This is eq. 5 with X made exact; it assumes cycles of one TRT (no
/// failure in progress).
pub fn nrt_access_bound(
    n_nodes: u64,
    t_nrt: Duration,
    visit_max: Option<Duration>,
    trt: Duration,
) -> Duration {
    let v = nrt_visits_per_cycle(t_nrt, visit_max);
    let cycles = n_nodes.saturating_sub(1).div_ceil(v) + 2;
    Duration(cycles.saturating_mul(trt.0))
}

/// §2.4's acknowledgement timer for a token just passed: the residual
/// time on it ("the successor should definitely transmit the token within
/// this interval"), plus `margin` for overruns and driver latency. A pass
/// that ends a cycle goes to the first RT node, which may hold the token
/// until the cycle's TRT is over and then for its own RT visits
/// (`head_slots`), so that pass waits TRT + head_slots + margin.
pub fn ack_timeout(
    residual: Duration,
    cycle_end: bool,
    trt: Duration,
    head_slots: Duration,
    margin: Duration,
) -> Duration {
    if cycle_end {
        trt + head_slots + margin
    } else {
        residual + margin
    }
}

/// The longest a live holder keeps the token before passing it on: the
/// first RT node's wait for the cycle's TRT plus its RT visits, which eq. 3
/// keeps below TRT − T_NRT, plus `margin`. A monitor that learns its
/// successor holds the token (a token acknowledgement) waits this long.
pub fn max_hold(trt: Duration, t_nrt: Duration, margin: Duration) -> Duration {
    trt + (trt - t_nrt) + margin
}

/// The longest time without a token frame on the segment while a token
/// exists and failures are handled by §2.4's acknowledgement timer: the
/// longest acknowledgement timer ([`max_hold`] bounds them all), after
/// which the predecessor retransmits or passes on, plus `margin`. Silence
/// beyond this means the token is lost.
pub fn silence_timeout(trt: Duration, t_nrt: Duration, margin: Duration) -> Duration {
    max_hold(trt, t_nrt, margin) + margin
}

/// Time from the last token frame to a regenerated token's first frame:
/// the silence timeout plus one claim stagger for each live station that
/// ranks before the first one able to claim (`ahead`: 0 with a single
/// failure, since the silent holder is left out of the ranking).
pub fn regeneration_bound(
    trt: Duration,
    t_nrt: Duration,
    margin: Duration,
    stagger: Duration,
    ahead: u64,
) -> Duration {
    silence_timeout(trt, t_nrt, margin) + Duration(stagger.0.saturating_mul(ahead))
}

/// The longest interruption of the token after one station crashes,
/// holding the token or not: its predecessor's acknowledgement timer (at
/// most [`max_hold`]) runs out `retries` + 1 times (the pass and its
/// retransmissions) before it declares the station dead and passes on;
/// or, had nobody been watching, the [`regeneration_bound`] with no
/// station ahead. Traffic on the segment (ping across it) recovers within
/// this, plus one token hop.
pub fn crash_recovery_bound(trt: Duration, t_nrt: Duration, margin: Duration, retries: u32) -> Duration {
    let monitor = Duration(max_hold(trt, t_nrt, margin).0.saturating_mul(retries as u64 + 1));
    monitor.max(regeneration_bound(trt, t_nrt, margin, Duration::ZERO, 0))
}

/// The longest interruption of the token after one lost or corrupted
/// token frame: the sender's acknowledgement timer (at most [`max_hold`])
/// runs out once and it sends the same frame again, which the successor
/// takes. Nobody is declared dead and no token is regenerated.
pub fn lost_frame_recovery_bound(trt: Duration, t_nrt: Duration, margin: Duration) -> Duration {
    max_hold(trt, t_nrt, margin)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRT: Duration = Duration(33_333_333);

    #[test]
    fn crash_recovery_bound_is_the_predecessors_three_timers() {
        // live.toml: TRT 10 ms, T_NRT 0.8 ms, margin 50 ms, 2 retries:
        // 3 × (10 + 9.2 + 50) ms, above the silence timeout (119.2 ms).
        let ms = Duration::from_millis;
        let b = crash_recovery_bound(ms(10), Duration(800_000), ms(50), 2);
        assert_eq!(b, Duration(207_600_000));
        assert!(b > silence_timeout(ms(10), Duration(800_000), ms(50)));
        // No retransmission: the silence timeout bounds it.
        let b0 = crash_recovery_bound(ms(10), Duration(800_000), ms(50), 0);
        assert_eq!(b0, silence_timeout(ms(10), Duration(800_000), ms(50)));
    }

    #[test]
    fn tht_rt_of_an_mpeg1_session_by_hand() {
        // §4.3: an MPEG-I stream of 1.5 Mb/s sends 6.25 KB per TRT of
        // 33.33 ms. 6250 bytes in frames of at most 1474 payload bytes:
        // 5 frames (4 × 1474 + 354). Frame bytes 6250 + 5 × (14 + 26) =
        // 6450, wire bytes + 5 × (4 + 8 + 12) = 6570 → 5256 µs at 10 Mb/s.
        // a·n + b = 5 × 140 + 650 = 1350 µs; t_token 247 µs.
        let m = TimingModel::paper_1995();
        assert_eq!(rt_fragments(6250), 5);
        assert_eq!(rt_frame_lens(6250).sum::<usize>(), 6450);
        assert_eq!(m.tht_rt(6250), Duration::from_micros(5256 + 1350 + 247));
        // The printed eq. 1: 6250 B / 10 Mb/s = 5000 µs.
        assert_eq!(m.paper_tht(6250, 5), Duration::from_micros(5000 + 1350 + 247));
    }

    #[test]
    fn tht_nrt_by_hand() {
        let m = TimingModel::paper_1995();
        // Nothing to send: just the token.
        assert_eq!(m.tht_nrt([]), Duration::from_micros(247));
        // One 1514-byte frame: 1538 wire bytes = 1230.4 µs, + 140 + 650 + 247.
        assert_eq!(m.tht_nrt([1514]), Duration(1_230_400 + 1_037_000));
        // A runt is padded to 60 bytes: 84 wire bytes = 67.2 µs.
        assert_eq!(m.tht_nrt([42]), Duration(67_200 + 1_037_000));
        assert_eq!(m.nrt_visit_max(NrtPolicy::OnePacket), Some(m.tht_nrt([1514])));
        assert_eq!(
            m.nrt_visit_max(NrtPolicy::AtMost(3)),
            Some(Duration(3 * 1_230_400 + 3 * 140_000 + 650_000 + 247_000))
        );
        assert_eq!(m.nrt_visit_max(NrtPolicy::AsManyAsFit), None);
    }

    #[test]
    fn admission_counts_mpeg1_streams_by_hand() {
        // Eq. 6 with N = 5 nodes, X = 1 and 5 % NRT share:
        // T_NRT = 5 × 247 µs + 0.05 × 33.333 ms = 1235 µs + 1666.67 µs.
        let m = TimingModel::paper_1995();
        let t_nrt = paper_t_nrt_min(5, m.t_token, 1, 5, TRT);
        assert_eq!(t_nrt, Duration(1_235_000 + 1_666_666));
        // Each stream costs 6853 µs: four fit (27 412 + 2901.7 ≤ 33 333),
        // a fifth does not (34 265 > 33 333).
        let tht = m.tht_rt(6250);
        let mut reserved = Duration::ZERO;
        for _ in 0..4 {
            admission(reserved, tht, t_nrt, TRT).unwrap();
            reserved += tht;
        }
        let r = admission(reserved, tht, t_nrt, TRT).unwrap_err();
        assert_eq!(r.reserved, Duration::from_micros(4 * 6853));
        assert_eq!(r.requested, Duration::from_micros(6853));
        let msg = r.to_string();
        assert!(
            msg.contains("27.412ms") && msg.contains("6.853ms") && msg.contains("33.333333ms"),
            "{msg}"
        );
    }

    #[test]
    fn figure5_single_session_of_28kb_fits_with_room_for_nrt() {
        // §4.3: one session of 28 KB per frame (69 % of 10 Mb/s) with
        // TRT 33.33 ms still leaves T_NRT for NRT traffic.
        let m = TimingModel::paper_1995();
        let tht = m.tht_rt(28_000);
        // 19 frames (18 × 1474 + 1468): wire 28 000 + 19 × 64 = 29 216 B
        // = 23 372.8 µs; + 19 × 140 + 650 + 247 = 3557 µs.
        assert_eq!(rt_fragments(28_000), 19);
        assert_eq!(tht, Duration(23_372_800 + 3_557_000));
        let left = TRT - tht;
        assert!(left > m.nrt_visit_max(NrtPolicy::OnePacket).unwrap());
        assert!(admission(Duration::ZERO, tht, left, TRT).is_ok());
    }

    #[test]
    fn paper_latency_equations() {
        // Eq. 4: 20 nodes that each hold the token 1 ms on average with
        // T_NRT = 4 ms need X = 5 cycles; eq. 5: 5 × TRT.
        assert_eq!(paper_x(20, Duration::from_millis(1), Duration::from_millis(4)), 5);
        assert_eq!(
            paper_x(20, Duration::from_micros(900), Duration::from_millis(4)),
            5
        );
        assert_eq!(paper_worst_latency(5, TRT), Duration(5 * 33_333_333));
        // Eq. 6 with X = 2: 20 × 247 / 2 µs + 5 % of TRT.
        assert_eq!(
            paper_t_nrt_min(20, Duration::from_micros(247), 2, 5, TRT),
            Duration(2_470_000 + 1_666_666)
        );
    }

    #[test]
    fn nrt_bound_by_hand() {
        let m = TimingModel::paper_1995();
        let h = m.nrt_visit_max(NrtPolicy::OnePacket).unwrap(); // 2.2674 ms
                                                                // T_NRT = 10 ms serves at least 4 one-packet visits per cycle;
                                                                // 11 nodes: ⌈10 / 4⌉ + 2 = 5 cycles.
        assert_eq!(nrt_visits_per_cycle(Duration::from_millis(10), Some(h)), 4);
        assert_eq!(
            nrt_access_bound(11, Duration::from_millis(10), Some(h), TRT),
            Duration(5 * 33_333_333)
        );
        // As many as fit: one node per cycle, N + 1 cycles.
        assert_eq!(
            nrt_access_bound(11, Duration::from_millis(10), None, TRT),
            Duration(12 * 33_333_333)
        );
    }

    #[test]
    fn failure_timers_by_hand() {
        let margin = Duration::from_millis(2);
        assert_eq!(
            ack_timeout(
                Duration::from_millis(5),
                false,
                TRT,
                Duration::from_millis(7),
                margin
            ),
            Duration::from_millis(7)
        );
        assert_eq!(
            ack_timeout(
                Duration::from_millis(5),
                true,
                TRT,
                Duration::from_millis(7),
                margin
            ),
            TRT + Duration::from_millis(9)
        );
        let t_nrt = Duration::from_millis(3);
        // The longest acknowledgement timer is the longest hold, below the
        // silence timeout.
        let longest = ack_timeout(Duration::ZERO, true, TRT, TRT - t_nrt, margin);
        assert_eq!(longest, max_hold(TRT, t_nrt, margin));
        assert!(longest < silence_timeout(TRT, t_nrt, margin));
        assert!(ack_timeout(TRT, false, TRT, Duration::ZERO, margin) <= longest);
        assert_eq!(
            regeneration_bound(TRT, t_nrt, margin, Duration::from_millis(1), 2),
            silence_timeout(TRT, t_nrt, margin) + Duration::from_millis(2)
        );
    }
}
