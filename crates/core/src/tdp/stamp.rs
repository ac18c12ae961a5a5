//! Decoding the compressed TF/TC stamp on a TDP input interface
//! (ICC 2006 §III-B).
//!
//! An upstream TDP router stamps each TDP packet with the parity of the TF
//! (bit 0x10) and of the TC (bit 0x20) in which it transmits it. The paper
//! keeps two variables per input interface, the TF and the TC of the last
//! received packet, and advances each when its bit differs from the previous
//! packet's: an alternating-bit protocol. It only works if every TF carries
//! at least one stamped packet, which is why an idle upstream sends padding.
//!
//! [`StampDecoder`] keeps the absolute TF of the last packet (its TC follows
//! from it) and adds two guards the paper leaves implicit: the TC bit
//! repairs the count when whole TFs were lost across a TC boundary, and the
//! local clock bounds how far the decoded TF may drift from "now".

use super::ctr::{stamp_bits, Ctr};
use crate::time::Instant;

/// Counters of one [`StampDecoder`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StampStats {
    /// Stamps decoded.
    pub packets: u64,
    /// Packets whose TF bit differed from the previous packet's.
    pub tf_advances: u64,
    /// Packets whose TC bit showed a TC boundary crossed while TFs were lost.
    pub tc_advances: u64,
    /// Times the decoded TF left the clock window and was re-derived from
    /// the local clock (the first packet's initialisation is not counted).
    pub resyncs: u64,
}

/// Per-input-interface decoder of TDP stamps into absolute upstream TFs.
#[derive(Clone, Debug)]
pub struct StampDecoder {
    last: Option<u64>,
    max_lag: u64,
    stats: StampStats,
}

impl Default for StampDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl StampDecoder {
    /// Default tolerated lag, in TFs, between the upstream TF decoded and the
    /// local TF at arrival (link propagation plus input processing).
    pub const DEFAULT_MAX_LAG: u64 = 4;

    /// A decoder with the default clock window.
    pub fn new() -> Self {
        Self::with_max_lag(Self::DEFAULT_MAX_LAG)
    }

    /// A decoder that resynchronises when the decoded TF is more than
    /// `max_lag` TFs behind the local TF (or more than one ahead). A tight
    /// window (1 on a short link) repairs any loss at once; a loose one
    /// tolerates slow links and processing but trusts the bits for longer.
    pub fn with_max_lag(max_lag: u64) -> Self {
        StampDecoder {
            last: None,
            max_lag,
            stats: StampStats::default(),
        }
    }

    /// The configured clock window, in TFs.
    pub fn max_lag(&self) -> u64 {
        self.max_lag
    }

    /// Absolute TF of the last decoded packet, if any.
    pub fn last_tf(&self) -> Option<u64> {
        self.last
    }

    /// Counters.
    pub fn stats(&self) -> &StampStats {
        &self.stats
    }

    /// Forget the state (e.g. the link went down): the next packet is
    /// initialised from the local clock again.
    pub fn reset(&mut self) {
        self.last = None;
    }

    /// Decode the DS byte `tos` of a TDP packet received at `now` into the
    /// absolute TF in which the upstream node transmitted it. The caller has
    /// checked [`is_tdp_tos`](super::is_tdp_tos); only the two stamp bits
    /// are read.
    pub fn handle_stamp(&mut self, ctr: &Ctr, now: Instant, tos: u8) -> u64 {
        self.stats.packets += 1;
        let local = ctr.tf_at(now);
        let (f, c) = stamp_bits(tos);
        let u = match self.last {
            None => sync_from_clock(ctr, local, f, c),
            Some(last) => {
                // `last` always has the parity of the previous packet's bit,
                // so a differing bit means the upstream moved on one TF.
                let mut u = last;
                if last & 1 != f {
                    u = u.saturating_add(1);
                    self.stats.tf_advances += 1;
                }
                if ctr.tc_of(u) & 1 != c {
                    // The TC toggled although the TF count says we are still
                    // in the old TC: whole TFs were lost across a boundary.
                    // The earliest consistent TF is the first one of the
                    // next TC with the right TF parity.
                    self.stats.tc_advances += 1;
                    let s = ctr.tc_start_tf(ctr.tc_of(u).saturating_add(1));
                    u = if s & 1 == f { s } else { s.saturating_add(1) };
                }
                if u > local.saturating_add(1) || u.saturating_add(self.max_lag) < local {
                    self.stats.resyncs += 1;
                    sync_from_clock(ctr, local, f, c)
                } else {
                    u
                }
            }
        };
        self.last = Some(u);
        u
    }
}

/// Largest `u <= x` with parity `f`.
fn parity_le(x: u64, f: u64) -> Option<u64> {
    if x & 1 == f {
        Some(x)
    } else {
        x.checked_sub(1)
    }
}

/// The TF the stamp bits `(f, c)` most plausibly name, seen from local TF
/// `local`: the largest TF not after `local` with both parities (a packet
/// cannot arrive before it was sent). The one exception is an upstream
/// clock slightly ahead across a TC boundary: if no match exists at `local`
/// or `local - 1` but `local + 1` matches, take it. The search is bounded to
/// four TCs back; with inconsistent bits (possible only with one TF per TC)
/// the TF parity alone decides.
fn sync_from_clock(ctr: &Ctr, local: u64, f: u64, c: u64) -> u64 {
    let tc_l = ctr.tc_of(local);
    let mut best = None;
    for back in 0..4u64 {
        let Some(tc) = tc_l.checked_sub(back) else {
            break;
        };
        if tc & 1 != c {
            continue;
        }
        let lo = ctr.tc_start_tf(tc);
        let hi = local.min(ctr.tc_start_tf(tc.saturating_add(1)).saturating_sub(1));
        if let Some(u) = parity_le(hi, f).filter(|&u| u >= lo) {
            best = Some(u);
            break;
        }
    }
    let next = local.saturating_add(1);
    let next_matches = next & 1 == f && ctr.tc_of(next) & 1 == c;
    match best {
        Some(u) if u.saturating_add(1) >= local => u,
        _ if next_matches => next,
        Some(u) => u,
        None => parity_le(local, f).unwrap_or(next),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;
    use proptest::prelude::*;

    fn ctr(tf_ns: u64, n_tf: u32) -> Ctr {
        Ctr::new(Duration(tf_ns), n_tf, 40).unwrap()
    }

    /// Arrival time of a packet sent at `offset` into TF `tf` over a link
    /// with `lag`.
    fn at(c: &Ctr, tf: u64, offset: u64, lag: u64) -> Instant {
        c.tf_start(tf) + Duration(offset + lag)
    }

    #[test]
    fn first_packet_initialises_from_the_clock() {
        let c = ctr(1000, 10);
        // Sent in TF 13, arriving in local TF 14: parity picks 13.
        let mut d = StampDecoder::new();
        assert_eq!(d.handle_stamp(&c, at(&c, 14, 100, 0), c.stamp(13)), 13);
        // Sent in TF 19 (last of TC 1), arriving in TF 20 (TC 2).
        let mut d = StampDecoder::new();
        assert_eq!(d.handle_stamp(&c, at(&c, 20, 5, 0), c.stamp(19)), 19);
        // Upstream clock slightly ahead: stamped TF 20 while local is 19.
        let mut d = StampDecoder::new();
        assert_eq!(d.handle_stamp(&c, at(&c, 19, 999, 0), c.stamp(20)), 20);
        // At the epoch an odd stamp can only be TF 1.
        let mut d = StampDecoder::new();
        assert_eq!(d.handle_stamp(&c, Instant(0), c.stamp(1)), 1);
        assert_eq!(d.stats().resyncs, 0);
    }

    #[test]
    fn alternating_bit_follows_the_upstream() {
        let c = ctr(1000, 4);
        let mut d = StampDecoder::with_max_lag(100);
        let mut got = vec![];
        for tf in 100..110 {
            got.push(d.handle_stamp(&c, at(&c, tf, 900, 500), c.stamp(tf)));
            got.push(d.handle_stamp(&c, at(&c, tf, 950, 500), c.stamp(tf)));
        }
        let want: Vec<u64> = (100..110).flat_map(|t| [t, t]).collect();
        assert_eq!(got, want);
        assert_eq!(d.stats().tf_advances, 9);
        assert_eq!(d.stats().tc_advances, 0);
    }

    #[test]
    fn tc_bit_repairs_a_tf_lost_at_the_cycle_boundary() {
        let c = ctr(1000, 4);
        // A loose window, so only the TC bit can notice.
        let mut d = StampDecoder::with_max_lag(1000);
        assert_eq!(d.handle_stamp(&c, at(&c, 6, 0, 0), c.stamp(6)), 6);
        // TF 7 (last of TC 1) lost; TF 8 has the same TF bit as 6.
        assert_eq!(d.handle_stamp(&c, at(&c, 8, 0, 0), c.stamp(8)), 8);
        assert_eq!(d.stats().tc_advances, 1);
        assert_eq!(d.stats().resyncs, 0);
    }

    #[test]
    fn clock_window_resynchronises_and_counts() {
        let c = ctr(1000, 100);
        let mut d = StampDecoder::new();
        assert_eq!(d.handle_stamp(&c, at(&c, 50, 0, 0), c.stamp(50)), 50);
        // 20 TFs of silence: the bits alone would say 51.
        assert_eq!(d.handle_stamp(&c, at(&c, 71, 10, 0), c.stamp(71)), 71);
        assert_eq!(d.stats().resyncs, 1);
        // A stamp from the local clock's future beyond +1 also resyncs.
        let mut d = StampDecoder::new();
        assert_eq!(d.handle_stamp(&c, at(&c, 50, 0, 0), c.stamp(50)), 50);
        // One TF ahead is tolerated (clocks are never perfectly aligned)...
        assert_eq!(d.handle_stamp(&c, at(&c, 50, 1, 0), c.stamp(51)), 51);
        // ...two are not: the bits are re-read against the clock.
        assert_eq!(d.handle_stamp(&c, at(&c, 50, 2, 0), c.stamp(52)), 50);
        assert_eq!(d.stats().resyncs, 1);
        d.reset();
        assert_eq!(d.last_tf(), None);
        assert_eq!(d.handle_stamp(&c, at(&c, 60, 3, 0), c.stamp(60)), 60);
    }

    #[test]
    fn extreme_times_do_not_panic() {
        let c = ctr(1, 10);
        let mut d = StampDecoder::new();
        for tos in [0x0c, 0x1c, 0x2c, 0x3c, 0x3c, 0x0c] {
            d.handle_stamp(&c, Instant::MAX, tos);
            d.handle_stamp(&c, Instant::ZERO, tos);
        }
    }

    /// A tiny deterministic generator for building streams from a seed.
    struct Mix(u64);
    impl Mix {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
        fn chance(&mut self, pct: u64) -> bool {
            self.below(100) < pct
        }
    }

    /// Upstream stream over TFs `t0..t0+n`: 1..=4 packets per TF at sorted
    /// random offsets, a constant link lag < 1 TF, and `keep(tf)` deciding
    /// whether any packet of a TF survives. Inside surviving TFs packets are
    /// dropped at `drop_pct` but never all of them. Returns (arrival, tf).
    fn stream(
        c: &Ctr,
        t0: u64,
        n: u64,
        drop_pct: u64,
        seed: u64,
        keep: impl Fn(u64) -> bool,
    ) -> Vec<(Instant, u64)> {
        let tf = c.tf_len().as_nanos();
        let mut rng = Mix(seed);
        let lag = rng.below(tf);
        let mut out = vec![];
        for t in t0..t0 + n {
            let count = 1 + rng.below(4) as usize;
            let mut offs: Vec<u64> = (0..count).map(|_| rng.below(tf)).collect();
            offs.sort_unstable();
            if !keep(t) {
                continue;
            }
            let survivor = rng.below(count as u64) as usize;
            for (i, o) in offs.into_iter().enumerate() {
                if i == survivor || !rng.chance(drop_pct) {
                    out.push((at(c, t, o, lag), t));
                }
            }
        }
        out
    }

    fn decode_all(c: &Ctr, d: &mut StampDecoder, s: &[(Instant, u64)]) -> Result<(), String> {
        for (i, &(now, tf)) in s.iter().enumerate() {
            let got = d.handle_stamp(c, now, c.stamp(tf));
            if got != tf {
                return Err(format!("packet {i}: sent in TF {tf}, decoded {got}"));
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn exact_when_every_tf_delivers_a_packet(
            tf_ns in 1_000u64..1_000_000, n_tf in 1u32..100, t0 in 0u64..1_000_000,
            n in 1u64..300, drop_pct in 0u64..90, seed: u64,
        ) {
            let c = ctr(tf_ns, n_tf);
            let s = stream(&c, t0, n, drop_pct, seed, |_| true);
            let mut d = StampDecoder::new();
            prop_assert_eq!(decode_all(&c, &mut d, &s), Ok(()));
            prop_assert_eq!(d.stats().resyncs, 0);
            prop_assert_eq!(d.stats().tc_advances, 0);
        }

        /// Runs of lost TFs that cross a TC boundary and end at most one TF
        /// after it are repaired by the TC bit alone (the clock window is
        /// made too loose to help).
        #[test]
        fn tc_bit_repairs_losses_across_cycle_boundaries(
            tf_ns in 1_000u64..1_000_000, n_tf in 2u32..40, t0 in 0u64..1_000_000,
            n in 1u64..400, drop_pct in 0u64..50, seed: u64, run_seed: u64,
        ) {
            let c = ctr(tf_ns, n_tf);
            let n_tf = n_tf as u64;
            // Per TC: lose `k` TFs before its start and `e` after, or none.
            let lost = |t: u64| {
                let (tc, pos) = (t / n_tf, t % n_tf);
                let run = |tc: u64| {
                    let mut r = Mix(run_seed ^ tc.wrapping_mul(0x2545_f491_4f6c_dd1d));
                    if r.chance(50) { (0, 0) } else { (r.below(n_tf - 1), r.below(2)) }
                };
                let (_, e) = run(tc);
                let (k_next, _) = run(tc + 1);
                pos < e || pos >= n_tf - k_next
            };
            // Start after a received TF so the first packet is not itself
            // the far side of a lost run.
            let s = stream(&c, t0, n, drop_pct, seed, |t| t == t0 || !lost(t));
            let mut d = StampDecoder::with_max_lag(1_000_000);
            prop_assert_eq!(decode_all(&c, &mut d, &s), Ok(()));
            prop_assert_eq!(d.stats().resyncs, 0);
        }

        /// With a window of one TF (true on a short link: lag < 1 TF), any
        /// pattern of lost TFs is repaired at the next received packet.
        #[test]
        fn tight_clock_window_repairs_any_tf_loss(
            tf_ns in 1_000u64..1_000_000, n_tf in 1u32..100, t0 in 0u64..1_000_000,
            n in 1u64..300, drop_pct in 0u64..90, tf_loss in 0u64..80, seed: u64,
        ) {
            let c = ctr(tf_ns, n_tf);
            let s = stream(&c, t0, n, drop_pct, seed, |t| {
                Mix(seed ^ t.wrapping_mul(0x9e37)).below(100) >= tf_loss
            });
            let mut d = StampDecoder::with_max_lag(1);
            prop_assert_eq!(decode_all(&c, &mut d, &s), Ok(()));
        }

        /// With the default window, outages longer than a TC plus the window
        /// are recovered from the clock.
        #[test]
        fn default_window_recovers_from_long_outages(
            tf_ns in 1_000u64..1_000_000, n_tf in 1u32..30, t0 in 0u64..1_000_000,
            n in 1u64..600, drop_pct in 0u64..90, seed: u64, outage_seed: u64,
        ) {
            let c = ctr(tf_ns, n_tf);
            let min_gap = n_tf as u64 + StampDecoder::DEFAULT_MAX_LAG + 3;
            // Outages of min_gap..2*min_gap TFs separated by >= 1 TF of traffic.
            let mut r = Mix(outage_seed);
            let mut lost = vec![];
            let mut t = t0 + 1 + r.below(20);
            while t < t0 + n {
                let len = min_gap + r.below(min_gap);
                lost.push(t..t + len);
                t += len + 1 + r.below(30);
            }
            let s = stream(&c, t0, n, drop_pct, seed, |t| !lost.iter().any(|l| l.contains(&t)));
            let mut d = StampDecoder::new();
            prop_assert_eq!(decode_all(&c, &mut d, &s), Ok(()));
        }
    }
}
