//! Per-flow measurement at the receiving host: one-way delay (a sparse
//! HDR-bucket histogram, 3 significant digits, storing only the buckets the
//! flow uses: `qosnet_core::stats`), jitter as max − min delay (ICC 2006
//! footnote 1), loss, reordering and throughput.

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
    /// Any packet of the flow arrived, inside the window or not.
    pub fn saw(&mut self, seq: u64) {
        self.total_received += 1;
        self.top_seq = Some(self.top_seq.map_or(seq, |m| m.max(seq)));
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
        assert_eq!((empty.jitter_ns, empty.delay_ns.max), (0, 0));
    }
}
