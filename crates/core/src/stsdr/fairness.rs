//! The paper's fairness experiment (Khan, Sahoo & Manjunath §V, Tables I
//! and V) at scheduling level: saturated class queues, R scheduling rounds
//! of the distributed WFQ, bytes per class on OL_1 beside a centralised
//! WFQ fed the same packets — and, beyond the paper, both against the GPS
//! fluid ideal ([`super::fluid`]): service lag per class and Jain's index.
//!
//! No network, no clocks: a round is phases 2 and 3 on a DS state that
//! every forwarder knows exactly (as in the paper's fairness runs, where no
//! broadcast was lost), so 10⁶ rounds take seconds. The node-level
//! behaviour (T_br, lost frames, CPU costs) is the forwarder's and the
//! simulator's business.
//!
//! The traffic model: on each outgoing link j, class k is an endless
//! stream of packets whose lengths are drawn independently from `sizes`
//! (fixed, or uniformly from a trace of lengths — the paper's "packets
//! from the trace were randomly assigned to one of three classes"); packet
//! n of the stream is queued at forwarder n mod M. The distributed system
//! serves Q_ijk as the matching decides; the centralised WFQ
//! ([`crate::sched::Wfq`], exact PGPS) serves class k's stream in order, as
//! Fig. 3 merges the forwarders' queues. Both send the same number of
//! packets on OL_1 (link index 0). Lengths are drawn by a counter-based
//! generator, so both see the same packets without storing the streams.
//! Time for the lag is link time on OL_1 with packets back to back (bytes
//! at `rate_bps`): the distributed system's idle gaps between cycles are a
//! throughput matter, not a fairness one.

use super::fluid::{jain, LagMeter};
use super::forwarder::Variant;
use super::sched::{Dwfq, Entry, FeState, LazyRank, Proposer, RoundKey, TieBreak, View};
use super::Dims;
use crate::packet::{Meta, Packet};
use crate::sched::{FairConf, QueueConf, Scheduler, Wfq};
use crate::time::{Duration, Instant};

/// Packet lengths (bytes) of the saturated streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sizes {
    Fixed(u16),
    /// Drawn uniformly at random from these lengths.
    Trace(Vec<u16>),
}

/// One fairness experiment.
#[derive(Clone, Debug)]
pub struct FairnessRun {
    /// M.
    pub forwarders: usize,
    /// N (the report is for link 0, the paper's OL_1).
    pub outlinks: usize,
    /// w_k, one per class.
    pub weights: Vec<u32>,
    /// Scheduling rounds of the distributed system (10⁶ in the paper).
    pub rounds: u64,
    /// S-DS, M-DS or L-DS (no-WFQ has no fairness to compare).
    pub variant: Variant,
    pub tie: TieBreak,
    pub proposer: Proposer,
    /// What L-DS ranks a burst by.
    pub lds_rank: LazyRank,
    pub sizes: Sizes,
    pub seed: u64,
    /// Link rate for the time axis of the GPS reference.
    pub rate_bps: u64,
}

impl FairnessRun {
    /// The paper's Table I set-up: M = N = K = 3, equal weights, S-DS,
    /// random tie-breaks, fixed 64-byte packets, 10⁶ rounds.
    pub fn table1() -> Self {
        FairnessRun {
            forwarders: 3,
            outlinks: 3,
            weights: vec![1, 1, 1],
            rounds: 1_000_000,
            variant: Variant::Sds,
            tie: TieBreak::Random { seed: 1 },
            proposer: Proposer::Forwarders,
            lds_rank: LazyRank::Head,
            sizes: Sizes::Fixed(64),
            seed: 1,
            rate_bps: 1_000_000_000,
        }
    }
}

/// One class on OL_1, both systems.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClassReport {
    pub central_bytes: u64,
    pub distributed_bytes: u64,
    pub central_pkts: u64,
    pub distributed_pkts: u64,
    /// max_t (W_GPS − W) in bytes, service counted bit by bit.
    pub central_lag: f64,
    pub distributed_lag: f64,
    /// max_t (W − W_GPS) in bytes.
    pub central_lead: f64,
    pub distributed_lead: f64,
}

impl ClassReport {
    /// |distributed − centralised| in bytes (Table I's comparison).
    pub fn diff_bytes(&self) -> u64 {
        self.central_bytes.abs_diff(self.distributed_bytes)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct FairnessReport {
    pub classes: Vec<ClassReport>,
    /// Rounds run, and rounds in which OL_1 sent something.
    pub rounds: u64,
    pub rounds_with_ol1: u64,
    /// Jain's index over bytes/weight per class.
    pub central_jain: f64,
    pub distributed_jain: f64,
}

impl FairnessReport {
    pub fn max_diff_bytes(&self) -> u64 {
        self.classes.iter().map(|c| c.diff_bytes()).max().unwrap_or(0)
    }
}

fn mix(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The class streams: length of packet `n` of class `k` on link `j`.
struct Streams {
    seed: u64,
    sizes: Sizes,
}

impl Streams {
    fn len(&self, j: usize, k: usize, n: u64) -> u32 {
        match &self.sizes {
            Sizes::Fixed(l) => *l as u32,
            Sizes::Trace(t) => {
                let h = [j as u64, k as u64, n]
                    .into_iter()
                    .fold(mix(self.seed), |h, x| mix(h ^ x));
                t[(h % t.len() as u64) as usize] as u32
            }
        }
    }
}

/// Run the distributed scheduler and the centralised WFQ side by side (see
/// the module docs).
pub fn compare(run: &FairnessRun) -> Result<FairnessReport, String> {
    let (m, n, k) = (run.forwarders, run.outlinks, run.weights.len());
    let dims = Dims::new(m, n, k);
    let mut dwfq = Dwfq::new(dims, run.weights.clone(), run.tie, run.proposer)?;
    dwfq.set_lazy(matches!(run.variant, Variant::Lds { .. }));
    dwfq.set_lazy_rank(run.lds_rank);
    let slots = match run.variant {
        Variant::NoWfq => return Err("fairness: no-WFQ mode has no schedule to compare".into()),
        Variant::Mds { slots: 0 } | Variant::Lds { packets: 0 } => {
            return Err("fairness: l must be ≥ 1".into())
        }
        v => v.slots(),
    };
    match &run.sizes {
        Sizes::Fixed(0) => return Err("fairness: packets of 0 bytes".into()),
        Sizes::Trace(t) if t.is_empty() || t.contains(&0) => {
            return Err("fairness: the size trace is empty or has 0-byte packets".into())
        }
        _ => {}
    }
    let streams = Streams {
        seed: run.seed,
        sizes: run.sizes.clone(),
    };
    // Q_ijk's next packet is stream index cursor[q]·M + i.
    let q_of = |i: usize, j: usize, c: usize| (i * n + j) * k + c;
    let mut cursor = vec![0u64; m * n * k];
    let pkt_index = |cur: u64, i: usize| cur * m as u64 + i as u64;
    // Arrival order: packet p of class c on link j arrived at (p·K + c)·N + j.
    let stamp = |p: u64, c: usize, j: usize| ((p * k as u64 + c as u64) * n as u64 + j as u64) as u32;
    let budget = match run.variant {
        Variant::Lds { packets } => packets as u64 * 64,
        _ => 0,
    };

    let mut dist_meter = LagMeter::new(run.rate_bps, run.weights.clone())?;
    let mut cent_meter = LagMeter::new(run.rate_bps, run.weights.clone())?;
    let mut gps_fed = vec![0u64; k]; // stream packets handed to each GPS
    let mut gps_fed_c = vec![0u64; k];
    let mut dist_t = Instant::ZERO;
    let mut report = vec![ClassReport::default(); k];
    let mut rounds = 0u64;
    let mut with_ol1 = 0u64;
    let link_time = |bytes: u64| Duration::for_bytes(bytes, run.rate_bps);
    let sum_w: u64 = run.weights.iter().map(|w| *w as u64).sum();
    // The most one round can take from a class: a packet, or a burst.
    let unit: u64 = match &run.sizes {
        Sizes::Fixed(l) => *l as u64,
        Sizes::Trace(t) => t.iter().copied().max().unwrap_or(0) as u64,
    } * slots_burst(run.variant);
    // Keep every class backlogged in a GPS reference up to time `t` (the
    // arrival time does not matter to a class that never idles).
    let feed = |meter: &mut LagMeter, fed: &mut [u64], t: Instant| {
        let horizon = (t.0 as u128 * run.rate_bps as u128 / 8_000_000_000) as u64;
        for (c, next) in fed.iter_mut().enumerate() {
            let want = horizon * run.weights[c] as u64 / sum_w.max(1) + 2 * unit;
            while meter.gps().served_bytes(c) + meter.gps().backlog_bytes(c) < want as f64 {
                let l = streams.len(0, c, *next);
                *next += 1;
                meter.arrive(t, c, l as u64);
            }
        }
    };
    feed(&mut dist_meter, &mut gps_fed, Instant::ZERO);

    let mut view = View::new(dims);
    let mut cycle = 0u32;
    'outer: while rounds < run.rounds {
        // Phase 1: every forwarder's state, l slots (or a burst) per queue.
        cycle = cycle.wrapping_add(1);
        for i in 0..m {
            let mut st = FeState::new(dims, u32::MAX);
            for j in 0..n {
                for c in 0..k {
                    let cur = cursor[q_of(i, j, c)];
                    if budget > 0 {
                        let (mut bytes, mut p) = (0u64, 0u64);
                        while bytes < budget && p < slots_burst(run.variant) {
                            bytes += streams.len(j, c, pkt_index(cur + p, i)) as u64;
                            p += 1;
                        }
                        let head = streams.len(j, c, pkt_index(cur, i));
                        st.push(
                            j,
                            c,
                            Entry::burst(stamp(pkt_index(cur, i), c, j), bytes as u32, head),
                        );
                    } else {
                        for s in 0..slots as u64 {
                            let p = pkt_index(cur + s, i);
                            st.push(j, c, Entry::packet(stamp(p, c, j), streams.len(j, c, p)));
                        }
                    }
                }
            }
            view.set(i, Some(st));
        }
        // Phases 2 and 3, up to l rounds on this state (M-DS), else one.
        for r in 0..run.variant.rounds() {
            if rounds >= run.rounds {
                break 'outer;
            }
            let d = dwfq.round(
                &mut view,
                RoundKey {
                    cycle,
                    round: r as u16,
                },
            );
            if d.size() == 0 {
                break;
            }
            rounds += 1;
            for p in d.matched() {
                let q = q_of(p.fe, p.ol, p.class);
                let (mut bytes, mut pkts) = (0u64, 0u64);
                while bytes < p.entry.len as u64 {
                    bytes += streams.len(p.ol, p.class, pkt_index(cursor[q], p.fe)) as u64;
                    cursor[q] += 1;
                    pkts += 1;
                }
                if p.ol == 0 {
                    report[p.class].distributed_bytes += bytes;
                    report[p.class].distributed_pkts += pkts;
                    dist_meter.start_tx(dist_t);
                    dist_t += link_time(bytes);
                    feed(&mut dist_meter, &mut gps_fed, dist_t);
                    dist_meter.end_tx(dist_t, p.class, bytes);
                }
            }
            with_ol1 += d.matched().any(|p| p.ol == 0) as u64;
        }
    }

    // The centralised WFQ on OL_1 sends as many packets, from the class
    // streams in order, all queued from the start (saturated).
    let conf = FairConf::classes(
        run.weights
            .iter()
            .enumerate()
            .map(|(c, w)| (c as u16, QueueConf::new(*w, usize::MAX, usize::MAX)))
            .collect(),
    );
    let mut wfq = Wfq::new(conf, run.rate_bps)?;
    let mut next = vec![0u64; k];
    let mut queued = vec![0u64; k];
    let total: u64 = report.iter().map(|c| c.distributed_pkts).sum();
    let mut cent_t = Instant::ZERO;
    feed(&mut cent_meter, &mut gps_fed_c, Instant::ZERO);
    for _ in 0..total {
        for c in 0..k {
            while queued[c] < 2 {
                let l = streams.len(0, c, next[c]) as usize;
                next[c] += 1;
                queued[c] += 1;
                let meta = Meta {
                    class: c as u16,
                    ..Meta::default()
                };
                wfq.enqueue(Packet::new(vec![0; l], meta), Instant::ZERO)
                    .map_err(|d| format!("fairness: WFQ refused a packet ({})", d.reason.name()))?;
            }
        }
        let Some(p) = wfq.dequeue(Instant::ZERO) else {
            break;
        };
        let c = p.meta.class as usize;
        queued[c] -= 1;
        report[c].central_bytes += p.len() as u64;
        report[c].central_pkts += 1;
        cent_meter.start_tx(cent_t);
        cent_t += link_time(p.len() as u64);
        feed(&mut cent_meter, &mut gps_fed_c, cent_t);
        cent_meter.end_tx(cent_t, c, p.len() as u64);
    }
    for (c, r) in report.iter_mut().enumerate() {
        r.central_lag = cent_meter.max_lag(c);
        r.central_lead = cent_meter.max_lead(c);
        r.distributed_lag = dist_meter.max_lag(c);
        r.distributed_lead = dist_meter.max_lead(c);
    }
    let share = |f: &dyn Fn(&ClassReport) -> u64| -> Vec<f64> {
        report
            .iter()
            .zip(&run.weights)
            .map(|(r, w)| f(r) as f64 / *w as f64)
            .collect()
    };
    Ok(FairnessReport {
        central_jain: jain(&share(&|r| r.central_bytes)),
        distributed_jain: jain(&share(&|r| r.distributed_bytes)),
        classes: report,
        rounds,
        rounds_with_ol1: with_ol1,
    })
}

/// L-DS: packets per burst at most.
fn slots_burst(v: Variant) -> u64 {
    match v {
        Variant::Lds { packets } => packets as u64,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table1_small(sizes: Sizes, outlinks: usize) -> FairnessRun {
        FairnessRun {
            outlinks,
            rounds: 30_000,
            sizes,
            ..FairnessRun::table1()
        }
    }

    /// Table I, fixed 64-byte packets: one link, three forwarders, three
    /// equal classes. The paper saw ≤ 256 B (four packets) between S-DS
    /// and centralised WFQ after 10⁶ rounds.
    #[test]
    fn table1_fixed_sizes_one_link() {
        let r = compare(&table1_small(Sizes::Fixed(64), 1)).unwrap();
        assert_eq!(r.rounds, 30_000);
        assert_eq!(
            r.rounds_with_ol1, 30_000,
            "one link, saturated: served every round"
        );
        let sent: u64 = r.classes.iter().map(|c| c.distributed_pkts).sum();
        assert_eq!(sent, 30_000);
        assert!(r.max_diff_bytes() <= 4 * 64, "{:?}", r.classes);
        // Equal weights, equal sizes: both within one packet of GPS.
        for c in &r.classes {
            assert!(
                c.central_lag <= 64.0 + 1e-6 && c.distributed_lag <= 64.0 + 1e-6,
                "{c:?}"
            );
        }
        assert!(r.distributed_jain > 0.999_999);
    }

    /// Table I with the paper's N = 3 links: the matching gives OL_1 a
    /// forwarder every round, and fairness on it is as good.
    #[test]
    fn table1_fixed_sizes_three_links() {
        let r = compare(&table1_small(Sizes::Fixed(64), 3)).unwrap();
        assert_eq!(r.rounds_with_ol1, 30_000);
        assert!(r.max_diff_bytes() <= 4 * 64, "{:?}", r.classes);
    }

    /// Variable sizes (40/576/1500 bytes in 7:4:1, the simple IMIX of
    /// RFC 6985 §5): each system stays within a maximum packet or two of
    /// GPS at every instant (PGPS within one, Parekh & Gallager Thm 2). At
    /// equal packet counts (the paper's rounds) the byte totals differ, as
    /// in the paper's Table I: the systems send different packets of each
    /// class's stream (the distributed one picks among the M heads of a
    /// class by finish tag, the centralised one serves the class in arrival
    /// order). Per class, the difference is then at most both systems'
    /// deviations from GPS plus the class's share of the difference in
    /// totals.
    #[test]
    fn table1_variable_sizes() {
        let mut trace = vec![40; 7];
        trace.extend([576; 4]);
        trace.push(1500);
        let r = compare(&table1_small(Sizes::Trace(trace), 1)).unwrap();
        let total = |f: fn(&ClassReport) -> u64| r.classes.iter().map(f).sum::<u64>();
        let (tc, td) = (total(|c| c.central_bytes), total(|c| c.distributed_bytes));
        for c in &r.classes {
            assert!(c.central_lag <= 1500.0 + 1e-6, "{c:?}");
            assert!(c.distributed_lag <= 2.0 * 1500.0, "{c:?}");
            let dev = c.central_lag.max(c.central_lead) + c.distributed_lag.max(c.distributed_lead);
            let bound = dev + tc.abs_diff(td) as f64 / 3.0;
            assert!((c.diff_bytes() as f64) <= bound + 1.0, "{c:?} bound {bound}");
            assert!((c.diff_bytes() as f64) < 0.005 * c.central_bytes as f64, "{c:?}");
        }
        assert!(r.distributed_jain > 0.9999);
    }

    /// Unequal weights are honoured: bytes per class in proportion to w_k
    /// within a few packets.
    #[test]
    fn weights_are_honoured() {
        let run = FairnessRun {
            weights: vec![1, 2, 5],
            ..table1_small(Sizes::Fixed(64), 2)
        };
        let r = compare(&run).unwrap();
        let total: u64 = r.classes.iter().map(|c| c.distributed_bytes).sum();
        for (c, w) in r.classes.iter().zip([1u64, 2, 5]) {
            let fair = total * w / 8;
            assert!(c.distributed_bytes.abs_diff(fair) <= 4 * 64, "{c:?} fair {fair}");
        }
        assert!(r.max_diff_bytes() <= 4 * 64);
    }

    /// Table V's trade-off: L-DS moves whole bursts, so its short-term
    /// lag grows to about a burst, while M-DS stays as fair as S-DS (§V-B).
    #[test]
    fn lazy_bursts_cost_short_term_fairness() {
        let base = table1_small(Sizes::Fixed(64), 1);
        let lds = compare(&FairnessRun {
            variant: Variant::Lds { packets: 25 },
            rounds: 3_000,
            ..base.clone()
        })
        .unwrap();
        let mds = compare(&FairnessRun {
            variant: Variant::Mds { slots: 25 },
            ..base
        })
        .unwrap();
        let burst = 25.0 * 64.0;
        for c in &lds.classes {
            assert_eq!(c.distributed_pkts % 25, 0, "whole bursts of 25");
            assert!(
                c.distributed_lag > 64.0 && c.distributed_lag <= 2.0 * burst,
                "{c:?}"
            );
        }
        assert!(lds.max_diff_bytes() <= 2 * 25 * 64);
        for c in &mds.classes {
            assert!(c.distributed_lag <= 64.0 + 1e-6, "{c:?}");
        }
        assert!(mds.max_diff_bytes() <= 4 * 64);
    }

    /// The full Table I (10⁶ rounds, M = N = K = 3), fixed and IMIX sizes,
    /// printed beside the paper's bound. Slow in debug builds:
    /// `cargo test -p qosnet-core --release --lib stsdr::fairness::tests::manual_table1_full -- --ignored --nocapture`.
    #[test]
    #[ignore = "slow; run explicitly with --ignored --nocapture"]
    fn manual_table1_full() {
        let mut imix = vec![40; 7];
        imix.extend([576; 4]);
        imix.push(1500);
        for (name, sizes) in [("64 bytes", Sizes::Fixed(64)), ("IMIX", Sizes::Trace(imix))] {
            let r = compare(&FairnessRun {
                sizes,
                ..FairnessRun::table1()
            })
            .unwrap();
            println!("Table I, {name}, {} rounds:", r.rounds);
            for (k, c) in r.classes.iter().enumerate() {
                println!(
                    "  class {}: centralised {} B, distributed {} B, diff {} B; lag vs GPS {:.0} / {:.0} B",
                    k + 1,
                    c.central_bytes,
                    c.distributed_bytes,
                    c.diff_bytes(),
                    c.central_lag,
                    c.distributed_lag
                );
            }
            println!(
                "  Jain: centralised {:.8}, distributed {:.8}",
                r.central_jain, r.distributed_jain
            );
            if name == "64 bytes" {
                assert!(r.max_diff_bytes() <= 256, "the paper's bound");
            }
        }
    }

    #[test]
    fn bad_runs_are_refused() {
        let base = table1_small(Sizes::Fixed(64), 1);
        for bad in [
            FairnessRun {
                variant: Variant::NoWfq,
                ..base.clone()
            },
            FairnessRun {
                sizes: Sizes::Trace(vec![]),
                ..base.clone()
            },
            FairnessRun {
                weights: vec![1, 0],
                ..base.clone()
            },
            FairnessRun {
                forwarders: 0,
                ..base
            },
        ] {
            assert!(compare(&bad).is_err());
        }
    }
}
