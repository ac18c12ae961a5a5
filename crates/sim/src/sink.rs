//! Per-flow measurement at the receiving host: one-way delay (a sparse
//! HDR-bucket histogram, 3 significant digits, storing only the buckets the
//! flow uses: `qosnet_core::stats`), jitter as max − min delay (ICC 2006
//! footnote 1), loss, reordering, duplicates and throughput.
//!
//! A packet is received once: a second arrival of the same sequence
//! number (a copy a layer-2 loop, a flooding switch or a retransmission
//! made) is counted in `duplicates`, never in `received`, so `lost` is
//! never hidden by copies.

use qosnet_core::stats::DelayHist;
use qosnet_scenario::results::{DelayStats, FlowResult};

pub struct FlowStat {
    pub name: String,
    pub sent: u64,
    pub received: u64,
    /// Every packet of the flow that arrived, inside the measurement
    /// window or not (for conservation accounting).
    pub total_received: u64,
    /// IP bytes that arrived inside the measurement window (by arrival
    /// time, as a receiver such as iperf's server measures throughput).
    pub recv_ip_bytes: u64,
    pub reordered: u64,
    /// Arrivals of a sequence number that had already arrived.
    pub duplicates: u64,
    /// Which sequence numbers have arrived, to tell copies from packets.
    seen: Seen,
    /// Delays are round trips (echo flow).
    pub rtt: bool,
    tos: std::collections::BTreeMap<u8, u64>,
    max_seq: Option<u64>,
    /// Highest sequence number of any arrival (window or not).
    top_seq: Option<u64>,
    hist: DelayHist,
}

impl FlowStat {
    pub fn new(name: String) -> Self {
        FlowStat {
            name,
            sent: 0,
            received: 0,
            total_received: 0,
            recv_ip_bytes: 0,
            reordered: 0,
            duplicates: 0,
            seen: Seen::default(),
            rtt: false,
            tos: Default::default(),
            max_seq: None,
            top_seq: None,
            hist: DelayHist::new(),
        }
    }

    /// The highest sequence number seen so far (compact probes restore
    /// theirs against it).
    pub fn top_seq(&self) -> Option<u64> {
        self.top_seq
    }
    /// Any packet of the flow arrived, inside the window or not. False
    /// (counted in `duplicates`) if its sequence number had arrived
    /// before: the caller then records nothing else of it. Every arrival
    /// counts in `total_received` (the packet ledger counts copies).
    pub fn saw(&mut self, seq: u64) -> bool {
        self.total_received += 1;
        self.top_seq = Some(self.top_seq.map_or(seq, |m| m.max(seq)));
        if self.seen.first(seq) {
            true
        } else {
            self.duplicates += 1;
            false
        }
    }

    /// A packet sent inside the measurement window arrived.
    pub fn record(&mut self, seq: u64, delay_ns: u64, tos: u8) {
        self.received += 1;
        *self.tos.entry(tos).or_default() += 1;
        match self.max_seq {
            Some(m) if seq < m => self.reordered += 1,
            _ => self.max_seq = Some(seq),
        }
        self.hist.record(delay_ns);
    }

    pub fn result(&self, interval_s: f64) -> FlowResult {
        let n = self.received;
        let s = self.hist.summary();
        let delay = DelayStats::from(s);
        FlowResult {
            name: self.name.clone(),
            sent: self.sent,
            received: n,
            lost: self.sent.saturating_sub(n),
            reordered: self.reordered,
            duplicates: self.duplicates,
            jitter_ns: s.max - s.min,
            delay_ns: delay,
            throughput_bps: if interval_s > 0.0 {
                self.recv_ip_bytes as f64 * 8.0 / interval_s
            } else {
                0.0
            },
            delay_kind: if self.rtt { "rtt" } else { "one-way" }.into(),
            tos_received: self.tos.iter().map(|(t, n)| (format!("0x{t:02x}"), *n)).collect(),
        }
    }

    /// IP bytes arriving inside the measurement window, whenever sent.
    pub fn arrived_in_window(&mut self, ip_bytes: usize) {
        self.recv_ip_bytes += ip_bytes as u64;
    }

    /// Delay histogram buckets (value ns, count) for plotting.
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.hist.buckets()
    }
}

/// How far below the highest sequence number arrivals are told apart
/// from copies: 65 536 packets of reordering, far beyond what any
/// simulated path produces. Older arrivals count as new (they cannot be
/// checked without keeping every gap of the run).
const SEEN_WINDOW: u64 = 1 << 16;

/// The sequence numbers of a flow that have arrived: the highest, and the
/// gaps (missing ranges) below it within [`SEEN_WINDOW`]. Memory grows
/// with the gaps in the window only, not with the packets.
#[derive(Debug, Default)]
struct Seen {
    top: Option<u64>,
    /// Missing ranges, start -> end (exclusive).
    gaps: std::collections::BTreeMap<u64, u64>,
}

impl Seen {
    /// Whether `seq` arrives for the first time (and mark it arrived).
    fn first(&mut self, seq: u64) -> bool {
        let Some(top) = self.top else {
            if seq > 0 {
                self.gaps.insert(seq.saturating_sub(SEEN_WINDOW), seq);
            }
            self.top = Some(seq);
            return true;
        };
        if seq > top {
            if seq > top + 1 {
                self.gaps
                    .insert((top + 1).max(seq.saturating_sub(SEEN_WINDOW)), seq);
            }
            self.top = Some(seq);
            self.forget_below(seq.saturating_sub(SEEN_WINDOW));
            return true;
        }
        if seq + SEEN_WINDOW < top {
            return true;
        }
        // Below the top: new only if it fills a gap.
        let Some((&start, &end)) = self.gaps.range(..=seq).next_back() else {
            return false;
        };
        if seq >= end {
            return false;
        }
        self.gaps.remove(&start);
        if start < seq {
            self.gaps.insert(start, seq);
        }
        if seq + 1 < end {
            self.gaps.insert(seq + 1, end);
        }
        true
    }

    /// Drop the gaps wholly below `low`, trim one that straddles it.
    fn forget_below(&mut self, low: u64) {
        while let Some((&start, &end)) = self.gaps.first_key_value() {
            if start >= low {
                break;
            }
            self.gaps.remove(&start);
            if end > low {
                self.gaps.insert(low, end);
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_loss_reordering_jitter() {
        let mut f = FlowStat::new("f".into());
        f.sent = 5;
        for (seq, d) in [(0, 1000), (2, 3000), (1, 2000), (3, 1500)] {
            f.record(seq, d, 0x28);
            f.arrived_in_window(500);
        }
        let r = f.result(1.0);
        assert_eq!((r.sent, r.received, r.lost, r.reordered), (5, 4, 1, 1));
        assert_eq!((r.delay_ns.min, r.delay_ns.max, r.jitter_ns), (1000, 3000, 2000));
        assert!((r.delay_ns.mean - 1875.0).abs() < 1e-9);
        assert_eq!(r.throughput_bps, 4.0 * 500.0 * 8.0);
        assert_eq!(r.tos_received.get("0x28"), Some(&4));
        let empty = FlowStat::new("e".into()).result(1.0);
        assert_eq!(empty.duplicates, 0);
        assert_eq!((empty.jitter_ns, empty.delay_ns.max), (0, 0));
    }

    /// A copy of a packet already received (a loop, a flood) is a
    /// duplicate, not a second reception; a late packet filling a gap
    /// is a reception (reordered), not a duplicate.
    #[test]
    fn duplicates_are_not_received() {
        let mut f = FlowStat::new("f".into());
        f.sent = 4;
        for seq in [0, 2, 0, 2, 1, 1, 3, 3, 3] {
            if f.saw(seq) {
                f.record(seq, 1000, 0);
            }
        }
        let r = f.result(1.0);
        assert_eq!((r.received, r.duplicates, r.lost, r.reordered), (4, 5, 0, 1));
        assert_eq!(f.total_received, 9);
    }

    /// The first arrival far into the flow, and arrivals far below the
    /// top: gaps are kept only within the window, so memory stays bounded.
    #[test]
    fn seen_window_is_bounded() {
        let mut s = Seen::default();
        assert!(s.first(10));
        assert!(s.first(3), "a gap below the first arrival");
        assert!(!s.first(3));
        for k in 0..10 {
            assert!(s.first(20 + 2 * k * SEEN_WINDOW), "{k}");
        }
        assert!(s.gaps.len() <= 2, "{:?}", s.gaps);
        let top = s.top.unwrap();
        assert!(s.first(top - 1));
        assert!(!s.first(top - 1));
        assert!(!s.first(top));
    }
}
