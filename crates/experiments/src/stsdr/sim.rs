//! `qosnet reproduce stsdr`: Tables I–V and the fairness–throughput
//! trade-off of L-DS; `--out DIR` writes `DIR/stsdr/tradeoff.svg`.
//! `--set rounds=N` sets the scheduling rounds of Tables I and V (default
//! 10⁵; the paper's 10⁶ takes ~15 s more); `--set trace=FILE.pcap` takes
//! their variable sizes from a capture instead of the IMIX (`trace.rs`);
//! every other `--set` goes to the scenarios.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use qosnet_core::stsdr::fairness::{compare, FairnessReport, FairnessRun, Sizes};
use qosnet_core::stsdr::{LazyRank, Variant};
use qosnet_scenario::results::Results;
use qosnet_scenario::Scenario;

use super::SCENARIOS;
use crate::run::{self, Job};
use crate::{RunOptions, Verdicts};

/// The simple IMIX (7 × 40, 4 × 576, 1 × 1500 IP bytes; Agilent/Spirent's
/// "simple IMIX", the mix RFC 6985 §4 cites as the common default): the
/// variable sizes, since the paper's ISP trace is not public.
const IMIX: [u16; 12] = [40, 40, 40, 40, 40, 40, 40, 576, 576, 576, 576, 1500];

/// One throughput measurement of the whole simulator.
pub(super) struct Tput {
    /// Output packets per second per forwarder (the paper's unit: OL
    /// output over the window, divided by M).
    pub kpps: f64,
    /// DS frames not heard in their cycle, of those expected.
    pub lost_ds_pct: f64,
    /// Packets offered per forwarder per second.
    pub input_kpps: f64,
}

pub(super) fn measure(sc: &Scenario, r: &Results) -> Tput {
    let iv = (r.duration_s - r.warmup_s).max(1e-9);
    let p = sc.stsdr.as_ref();
    let outl: Vec<String> = p
        .map(|p| p.outlinks.iter().map(|&n| sc.nodes[n].name.clone()).collect())
        .unwrap_or_default();
    let m = qosnet_scenario::build::stsdr_forwarders(sc).len().max(1) as f64;
    let out: u64 = r
        .links
        .iter()
        .filter(|l| outl.iter().any(|o| l.name.ends_with(&format!("->{o}"))))
        .map(|l| l.packets)
        .sum();
    let sum = |k: &str| -> u64 { r.nodes.iter().filter_map(|n| n.counters.get(k)).sum() };
    let expected = (sum("cycles") as f64 * (m - 1.0)).max(1.0);
    let sent: u64 = r.flows.iter().map(|f| f.sent).sum();
    Tput {
        kpps: out as f64 / iv / m / 1e3,
        lost_ds_pct: 100.0 * sum("ds_missing") as f64 / expected,
        input_kpps: sent as f64 / iv / m / 1e3,
    }
}

pub(super) fn sim_jobs(
    variants: Vec<(usize, Vec<String>)>,
    sets: &[String],
) -> Vec<Job<'static, (Scenario, Results)>> {
    variants
        .into_iter()
        .map(|(i, mut extra)| {
            let mut s = sets.to_vec();
            s.append(&mut extra);
            Box::new(move || {
                let r = run::sim(&SCENARIOS[i], &s)?;
                Ok((r.scenario, r.results))
            }) as Job<'static, _>
        })
        .collect()
}

fn paper_row(sc: &Scenario, table: &str, key: &str) -> Vec<f64> {
    sc.paper
        .as_ref()
        .and_then(|p| p.table(table))
        .and_then(|t| t.row(key))
        .map(|r| r.iter().filter_map(|c| c.as_f64()).collect())
        .unwrap_or_default()
}

fn fairness(rounds: u64, variant: Variant, sizes: Sizes) -> Result<FairnessReport> {
    fairness_ranked(rounds, variant, sizes, LazyRank::Head)
}

fn fairness_ranked(
    rounds: u64,
    variant: Variant,
    sizes: Sizes,
    lds_rank: LazyRank,
) -> Result<FairnessReport> {
    let run = FairnessRun {
        rounds,
        variant,
        sizes,
        lds_rank,
        ..FairnessRun::table1()
    };
    compare(&run).map_err(|e| anyhow!(e))
}

/// The worst lag behind GPS over the classes (bytes).
fn worst_lag(rep: &FairnessReport) -> f64 {
    rep.classes.iter().map(|c| c.distributed_lag).fold(0.0, f64::max)
}

fn print_fairness(
    name: &str,
    sc: &Scenario,
    rounds: u64,
    variant: Variant,
    variable: &[u16],
) -> Result<Vec<Fair>> {
    let mut out = Vec::new();
    outln!(
        "\nTable {name}: bytes per class on OL_1 after {rounds} rounds, centralised WFQ vs {} (M = N = K = 3, equal weights, random ties, seed 1)",
        variant.name()
    );
    outln!("paper figures are for 10^6 rounds (--set rounds=1000000 to match)");
    outln!(
        "{:>9} {:>5} {:>13} {:>13} {:>9} {:>14} {:>14} {:>11} {:>11}",
        "sizes",
        "class",
        "central B",
        "distrib. B",
        "diff %",
        "paper central",
        "paper distr.",
        "lag c/d B",
        ""
    );
    for (key, sizes) in [
        ("64", Sizes::Fixed(64)),
        ("variable", Sizes::Trace(variable.to_vec())),
    ] {
        let max_packet = match &sizes {
            Sizes::Fixed(b) => *b as f64,
            _ => variable.iter().copied().max().unwrap_or(0) as f64,
        };
        let rep = fairness(rounds, variant, sizes)?;
        let paper = paper_row(sc, name, key);
        out.push(Fair::from_report(
            name,
            variant,
            key,
            &rep,
            max_packet,
            paper.clone(),
        ));
        for (k, c) in rep.classes.iter().enumerate() {
            let diff =
                100.0 * (c.distributed_bytes as f64 - c.central_bytes as f64) / c.central_bytes.max(1) as f64;
            let pc = paper.get(2 * k).map(|v| format!("{v:.0}")).unwrap_or_default();
            let pd = paper
                .get(2 * k + 1)
                .map(|v| format!("{v:.0}"))
                .unwrap_or_default();
            outln!(
                "{:>9} {:>5} {:>13} {:>13} {:>+9.4} {:>14} {:>14} {:>11.0} {:>11.0}",
                if k == 0 {
                    if key == "64" {
                        "64 B"
                    } else {
                        if variable == IMIX {
                            "IMIX"
                        } else {
                            "pcap"
                        }
                    }
                } else {
                    ""
                },
                k + 1,
                c.central_bytes,
                c.distributed_bytes,
                diff,
                pc,
                pd,
                c.central_lag,
                c.distributed_lag
            );
        }
        outln!(
            "{:>9} Jain index over classes: centralised {:.8}, distributed {:.8}; largest byte difference {} B",
            "",
            rep.central_jain,
            rep.distributed_jain,
            rep.max_diff_bytes()
        );
        if matches!(variant, Variant::Lds { .. }) && key == "variable" {
            // The other L-DS ranking (`[stsdr] lds_rank = "start"`), for
            // comparison: the two agree for fixed sizes.
            let st = fairness_ranked(rounds, variant, Sizes::Trace(variable.to_vec()), LazyRank::Start)?;
            outln!(
                "{:>9} ranked by start tag instead (lds_rank = \"start\"): largest byte difference {} B, worst GPS lag {:.0} B (head rule: {:.0} B)",
                "",
                st.max_diff_bytes(),
                worst_lag(&st),
                worst_lag(&rep)
            );
        }
    }
    Ok(out)
}

pub(super) fn run(o: &RunOptions) -> Result<Verdicts> {
    // `rounds=N` is this experiment's own; the rest go to the scenarios.
    let mut rounds = 100_000u64;
    let mut sets = Vec::new();
    let mut trace = None;
    for s in o.overrides.sets() {
        if let Some(p) = s.strip_prefix("trace=") {
            trace = Some(p.trim_matches('"').to_string());
            continue;
        }
        match s.strip_prefix("rounds=") {
            Some(v) => {
                rounds = v
                    .parse()
                    .ok()
                    .filter(|r| (1..=100_000_000).contains(r))
                    .ok_or_else(|| anyhow!("--set rounds={v}: give a number of rounds from 1 to 10^8"))?
            }
            None => sets.push(s),
        }
    }
    // A bad trace fails now, not after a minute of the other tables.
    let trace = trace
        .map(|path| super::trace::read(std::path::Path::new(&path)).map(|t| (path, t)))
        .transpose()?;
    let base = run::load(&SCENARIOS[0], &sets)?;
    let lds = run::load(&SCENARIOS[2], &sets)?;
    let mds = run::load(&SCENARIOS[1], &sets)?;

    // Throughput runs, all at once on the machine's cores.
    let tbr = ["72us", "76us", "80us"];
    let mds_l = [15, 20, 25];
    let lds_l = [15, 20, 25, 100];
    let curve_l = [1, 5, 15, 25, 50, 100];
    let mut jobs = Vec::new();
    // Table II offers each forwarder one packet per T_br, as the paper
    // did (288 flows, hashed over 3 forwarders).
    for t in tbr {
        let us: f64 = t.trim_end_matches("us").parse().unwrap_or(72.0);
        let per_flow = 3.0 * 1e6 / us / 288.0;
        jobs.push((
            0,
            vec![
                format!("stsdr.t_br={t}"),
                format!("defaults.flow.rate={per_flow:.1}pps"),
            ],
        ));
    }
    for l in mds_l {
        jobs.push((1, vec![format!("stsdr.l={l}")]));
    }
    for l in lds_l {
        jobs.push((2, vec![format!("stsdr.l={l}")]));
    }
    jobs.push((3, vec![]));
    for l in curve_l.iter().filter(|l| !lds_l.contains(l)) {
        jobs.push((2, vec![format!("stsdr.l={l}")]));
    }
    // DS-frame loss vs fairness: class 1 offered twice the others' load
    // on every OL, so a scheduler that is not fair shows it (no WFQ
    // serves arrivals: 50/25/25 %); L-DS l = 25 with each forwarder
    // losing each DS frame it receives with probability p.
    let loss_base = jobs.len();
    let double: Vec<String> = ["g1", "g2"]
        .iter()
        .flat_map(|g| (1..=3).map(move |j| format!("flow.{g}_ol{j}_c1*.rate=5200pps")))
        .collect();
    for p in DS_LOSS {
        let mut v = double.clone();
        v.push(format!("stsdr.ds_loss={p}"));
        jobs.push((2, v));
    }
    jobs.push((3, double.clone()));
    // T_br vs fairness, measured in the whole simulator the same way
    // (class 1 at twice the load, L-DS l = 25, no DS loss): a longer
    // T_br means fewer, longer-apart decisions on older views.
    let tbr_base = jobs.len();
    for t in TBR_CURVE {
        let mut v = double.clone();
        v.push(format!("stsdr.t_br={t}"));
        jobs.push((2, v));
    }
    // L-DS for throughput (scenarios/stsdr/lds-bulk.toml): longer bursts
    // and a cycle guard against no WFQ over the same window, each row
    // also with class 1 offered twice the others' load for its fairness.
    let bulk = run::load(&SCENARIOS[BULK], &sets)?;
    let bulk_dur = format!("scenario.duration={}us", bulk.duration.as_nanos() / 1000);
    let bulk_warm = format!("scenario.warmup={}us", bulk.warmup.as_nanos() / 1000);
    let bulk_base = jobs.len();
    jobs.push((3, vec![bulk_dur.clone(), bulk_warm.clone()]));
    jobs.push((
        3,
        [vec![bulk_dur.clone(), bulk_warm.clone()], double.clone()].concat(),
    ));
    for (l, g) in BULK_ROWS {
        let v = vec![format!("stsdr.l={l}"), format!("stsdr.cycle_guard={g}")];
        jobs.push((BULK, v.clone()));
        jobs.push((BULK, [v, double.clone()].concat()));
    }
    // Node failures (scenarios/stsdr/kill.toml): the master killed for
    // good, another forwarder killed and restarted.
    let kill_at = jobs.len();
    jobs.push((KILL, vec![]));
    let runs = run::parallel(sim_jobs(jobs, &sets))?;
    let t: Vec<Tput> = runs.iter().map(|(sc, r)| measure(sc, r)).collect();

    outln!("Distributed WFQ on the STSDR (Khan, Sahoo & Manjunath, seed 003), simulated");
    outln!(
        "M = 3 forwarders, N = 3 outgoing links, K = 3 classes, 2 balancers, 1 Gb/s T-switch; 64-byte IP packets;"
    );
    outln!(
        "forwarder CPU 5.376 us per frame (186 kpps without WFQ, the paper's baseline); phase 2 600 ns, phase 3 450 ns"
    );
    outln!("throughput = packets leaving the T-switch on OL_1..OL_3 per second, per forwarder\n");

    outln!("Table II: S-DS throughput vs T_br ({})", base.source);
    outln!(
        "{:>6} {:>11} {:>11} {:>11} {:>9} | {:>11} {:>9} {:>11} {:>9}",
        "T_br",
        "input kpps",
        "output kpps",
        "lost DS %",
        "output %",
        "paper in",
        "lost %",
        "paper out",
        "%"
    );
    let mut n = Numbers {
        rounds,
        ..Numbers::default()
    };
    for (i, tb) in tbr.iter().enumerate() {
        let x = &t[i];
        let key = tb.trim_end_matches("us");
        let p = paper_row(&base, "II", key);
        let g = |k: usize| p.get(k).copied().unwrap_or(f64::NAN);
        n.sds.push(SdsRow {
            t_br: tb.to_string(),
            kpps: x.kpps,
            output_pct: 100.0 * x.kpps / x.input_kpps.max(1e-9),
            lost_ds_pct: x.lost_ds_pct,
            paper_kpps: g(2) / 1e3,
            paper_output_pct: g(3),
            paper_lost_ds_pct: g(1),
        });
        outln!(
            "{:>6} {:>11.1} {:>11.2} {:>11.2} {:>9.2} | {:>11.1} {:>9.2} {:>11.2} {:>9.2}",
            tb,
            x.input_kpps,
            x.kpps,
            x.lost_ds_pct,
            100.0 * x.kpps / x.input_kpps.max(1e-9),
            g(0) / 1e3,
            g(1),
            g(2) / 1e3,
            g(3)
        );
    }
    outln!("(offered: one packet per T_br per forwarder on average, as in the paper; lost DS = DS frames missing in their cycle)");

    outln!("\nTable III: M-DS throughput, T_br = 72 us ({})", mds.source);
    outln!(
        "{:>4} {:>12} {:>11} {:>12}",
        "l",
        "kpps",
        "lost DS %",
        "paper kpps"
    );
    for (i, l) in mds_l.iter().enumerate() {
        let x = &t[3 + i];
        let p = paper_row(&mds, "III", &l.to_string());
        n.mds.push((*l, x.kpps, p.first().copied().unwrap_or(f64::NAN)));
        outln!(
            "{:>4} {:>12.1} {:>11.2} {:>12.1}",
            l,
            x.kpps,
            x.lost_ds_pct,
            p.first().copied().unwrap_or(f64::NAN)
        );
    }

    let nowfq = &t[3 + mds_l.len() + lds_l.len()];
    outln!(
        "\nTable IV: L-DS throughput, T_br = 72 us, vs no WFQ ({})",
        lds.source
    );
    outln!(
        "{:>6} {:>12} {:>14} {:>12} {:>14}",
        "l",
        "kpps",
        "% of no-WFQ",
        "paper kpps",
        "paper % of 186"
    );
    for (i, l) in lds_l.iter().enumerate() {
        let x = &t[3 + mds_l.len() + i];
        let p = paper_row(&lds, "IV", &l.to_string())
            .first()
            .copied()
            .unwrap_or(f64::NAN);
        n.lds.push((*l, x.kpps, p));
        outln!(
            "{:>6} {:>12.1} {:>14.1} {:>12.1} {:>14.1}",
            l,
            x.kpps,
            100.0 * x.kpps / nowfq.kpps.max(1e-9),
            p,
            100.0 * p / 186.0
        );
    }
    n.nowfq = (
        nowfq.kpps,
        paper_row(&lds, "IV", "nowfq")
            .first()
            .copied()
            .unwrap_or(f64::NAN),
    );
    outln!(
        "{:>6} {:>12.1} {:>14.1} {:>12.1} {:>14.1}",
        "no WFQ",
        nowfq.kpps,
        100.0,
        n.nowfq.1,
        100.0
    );

    let variable = match trace {
        Some((path, t)) => {
            let mean = t.sizes.iter().map(|&s| s as f64).sum::<f64>() / t.sizes.len() as f64;
            outln!(
                "\nvariable sizes: {path}, {} IP packets (mean {mean:.1} B), {} non-IP skipped",
                t.sizes.len(),
                t.skipped
            );
            t.sizes
        }
        None => IMIX.to_vec(),
    };
    n.fair = print_fairness("I", &base, rounds, Variant::Sds, &variable)?;
    n.fair.extend(print_fairness(
        "V",
        &lds,
        rounds,
        Variant::Lds { packets: 25 },
        &variable,
    )?);
    // §V-B: M-DS "is a direct extension of S-DS", its fairness identical;
    // the paper prints no table for it, so only its lag behind GPS is judged.
    for (key, sizes) in [
        ("64", Sizes::Fixed(64)),
        ("variable", Sizes::Trace(variable.clone())),
    ] {
        let max_packet = match &sizes {
            Sizes::Fixed(b) => *b as f64,
            _ => variable.iter().copied().max().unwrap_or(0) as f64,
        };
        let v = Variant::Mds { slots: 25 };
        let rep = fairness(rounds, v, sizes)?;
        let f = Fair::from_report("III", v, key, &rep, max_packet, Vec::new());
        outln!(
            "M-DS l = 25, {}: worst lag behind GPS {:.0} B (centralised {:.0} B), largest byte difference from centralised {} B",
            f.sizes,
            f.dist_lag,
            f.central_lag,
            rep.max_diff_bytes()
        );
        n.fair.push(f);
    }

    // Beyond the paper: what L-DS trades. Throughput from the simulator,
    // fairness as the largest per-class byte difference from centralised
    // WFQ and the worst service lag behind the GPS fluid, IMIX sizes.
    outln!("\nFairness vs throughput, L-DS (l = 1 is S-DS scheduling with L-DS accounting), IMIX sizes, {rounds} rounds");
    outln!(
        "{:>5} {:>12} {:>16} {:>18} {:>12}",
        "l",
        "kpps",
        "max diff % bytes",
        "worst GPS lag (B)",
        "Jain"
    );
    let mut curve = Vec::new();
    for l in curve_l {
        let x = match lds_l.iter().position(|&y| y == l) {
            Some(i) => &t[3 + mds_l.len() + i],
            None => {
                let k = curve_l
                    .iter()
                    .filter(|y| !lds_l.contains(y))
                    .position(|&y| y == l)
                    .unwrap_or(0);
                &t[4 + mds_l.len() + lds_l.len() + k]
            }
        };
        let rep = fairness(
            rounds,
            Variant::Lds { packets: l as u16 },
            Sizes::Trace(IMIX.to_vec()),
        )?;
        let diff = rep
            .classes
            .iter()
            .map(|c| {
                100.0 * (c.distributed_bytes as f64 - c.central_bytes as f64).abs()
                    / c.central_bytes.max(1) as f64
            })
            .fold(0.0, f64::max);
        let lag = rep.classes.iter().map(|c| c.distributed_lag).fold(0.0, f64::max);
        outln!(
            "{:>5} {:>12.1} {:>16.4} {:>18.0} {:>12.8}",
            l,
            x.kpps,
            diff,
            lag,
            rep.distributed_jain
        );
        curve.push((l, x.kpps, diff, lag));
    }
    print_ds_loss(&runs[loss_base..tbr_base]);
    // The DS-loss table's first run (L-DS, no loss) and its last (no WFQ),
    // class 1 offered twice the others' load: who gets OL_1.
    n.unequal = Some((
        ol1_fairness(&runs[loss_base].1).0,
        ol1_fairness(&runs[tbr_base - 1].1).0,
    ));
    let tbr_curve = print_tbr(&runs[tbr_base..bulk_base]);
    print_bulk(&bulk, &runs[bulk_base..kill_at], rounds)?;
    print_kills(&runs[kill_at]);
    if let Some(dir) = &o.out {
        let dir = dir.join("stsdr");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("tradeoff.svg");
        plot(&path, &curve, &tbr_curve, nowfq.kpps).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        outln!("wrote {}", path.display());
    }
    Ok(verdicts(&n))
}

/// One Table II row, qosnet's beside the paper's.
#[derive(Clone, Debug, Default)]
pub(super) struct SdsRow {
    pub t_br: String,
    pub kpps: f64,
    pub output_pct: f64,
    pub lost_ds_pct: f64,
    pub paper_kpps: f64,
    pub paper_output_pct: f64,
    pub paper_lost_ds_pct: f64,
}

/// One scheduling-level fairness comparison (a row pair of Table I or V).
#[derive(Clone, Debug, Default)]
pub(super) struct Fair {
    /// "I", "V" (the paper's tables) or "III" (M-DS, no paper table).
    pub table: String,
    pub scheme: String,
    /// "64 B" or "variable".
    pub sizes: String,
    /// Distributed bytes per class on OL_1, scaled to 10⁶ packets sent on it.
    pub dist_bytes_1e6: [f64; 3],
    /// Largest per-class |distributed − centralised|, bytes and % of centralised.
    pub max_diff_bytes: f64,
    pub max_diff_pct: f64,
    /// Worst service lag behind the GPS fluid over the classes (bytes).
    pub central_lag: f64,
    pub dist_lag: f64,
    /// The largest packet of the sizes: WFQ's own bound behind GPS.
    pub max_packet: f64,
    /// The paper's row: central_1, dist_1, central_2, dist_2, central_3, dist_3.
    pub paper: Vec<f64>,
}

impl Fair {
    fn from_report(
        table: &str,
        variant: Variant,
        key: &str,
        rep: &FairnessReport,
        max_packet: f64,
        paper: Vec<f64>,
    ) -> Self {
        // Per 10^6 packets on OL_1, the paper's horizon for both tables:
        // its Table V ("~10^6 rounds" of 25-packet bursts) has Table I's
        // bytes, so it counts packets sent, not scheduling cycles.
        let pkts: u64 = rep.classes.iter().map(|c| c.distributed_pkts).sum();
        let scale = 1e6 / pkts.max(1) as f64;
        let mut dist = [0.0; 3];
        for (d, c) in dist.iter_mut().zip(&rep.classes) {
            *d = c.distributed_bytes as f64 * scale;
        }
        let max_diff_pct = rep
            .classes
            .iter()
            .map(|c| 100.0 * c.diff_bytes() as f64 / c.central_bytes.max(1) as f64)
            .fold(0.0, f64::max);
        Fair {
            table: table.into(),
            scheme: match variant {
                Variant::Mds { slots } => format!("M-DS l = {slots}"),
                Variant::Lds { packets } => format!("L-DS l = {packets}"),
                Variant::Sds => "S-DS".into(),
                Variant::NoWfq => "no WFQ".into(),
            },
            sizes: if key == "64" {
                "64 B".into()
            } else {
                "variable".into()
            },
            dist_bytes_1e6: dist,
            max_diff_bytes: rep.max_diff_bytes() as f64,
            max_diff_pct,
            central_lag: rep.classes.iter().map(|c| c.central_lag).fold(0.0, f64::max),
            dist_lag: worst_lag(rep),
            max_packet,
            paper,
        }
    }

    /// Near-WFQ fairness: behind GPS by at most WFQ's own lag plus one
    /// largest packet (WFQ's bound behind GPS is one packet, Parekh &
    /// Gallager), i.e. the distribution costs at most one more packet.
    fn near_wfq(&self) -> bool {
        self.dist_lag <= self.central_lag + self.max_packet
    }

    /// The paper's largest per-class difference, % of centralised.
    fn paper_max_diff_pct(&self) -> f64 {
        self.paper
            .chunks(2)
            .filter_map(|p| match p {
                [c, d] if *c > 0.0 => Some(100.0 * (d - c).abs() / c),
                _ => None,
            })
            .fold(f64::NAN, f64::max)
    }
}

/// What the verdicts are decided from: every figure of the run that the
/// paper has a counterpart for.
#[derive(Clone, Debug, Default)]
pub(super) struct Numbers {
    pub rounds: u64,
    pub sds: Vec<SdsRow>,
    /// (l, kpps, paper kpps).
    pub mds: Vec<(u32, f64, f64)>,
    pub lds: Vec<(u32, f64, f64)>,
    /// No WFQ's kpps and the paper's.
    pub nowfq: (f64, f64),
    pub fair: Vec<Fair>,
    /// Shares (%) of OL_1's bytes per class with class 1 offered twice the
    /// others' load: L-DS l = 25, then no WFQ.
    pub unequal: Option<([f64; 3], [f64; 3])>,
}

/// The verdicts, from the run's numbers (the paper's tables give numbers,
/// not plots: ±15 %).
pub(super) fn verdicts(n: &Numbers) -> Verdicts {
    const TOL: f64 = 0.15;
    let mut v = Verdicts::default();
    for r in &n.sds {
        let what = |x: &str| format!("S-DS {x}, T_br = {}", r.t_br);
        v.figure(
            "Table II",
            &what("output per forwarder"),
            r.paper_kpps,
            r.kpps,
            "kpps",
            TOL,
        );
        v.figure(
            "Table II",
            &what("output share of input"),
            r.paper_output_pct,
            r.output_pct,
            "%",
            TOL,
        );
        v.figure(
            "Table II",
            &what("DS frames lost"),
            r.paper_lost_ds_pct,
            r.lost_ds_pct,
            "%",
            TOL,
        );
    }
    for (l, k, p) in &n.mds {
        v.figure(
            "Table III",
            &format!("M-DS throughput, l = {l}"),
            *p,
            *k,
            "kpps",
            TOL,
        );
    }
    for (l, k, p) in &n.lds {
        v.figure(
            "Table IV",
            &format!("L-DS throughput, l = {l}"),
            *p,
            *k,
            "kpps",
            TOL,
        );
    }
    v.figure("Table IV", "no-WFQ throughput", n.nowfq.1, n.nowfq.0, "kpps", TOL);

    let sds72 = n.sds.first().map_or(f64::NAN, |r| r.kpps);
    let sds72_paper = n.sds.first().map_or(f64::NAN, |r| r.paper_kpps);
    if let Some((l, k, p)) = n.mds.first() {
        v.claim(
            "Table III",
            &format!("M-DS (l = {l}) far above S-DS (T_br = 72 us)"),
            format!("{p:.1} vs {sds72_paper:.1} kpps ({:.1}x)", p / sds72_paper),
            format!("{k:.1} vs {sds72:.1} kpps ({:.1}x)", k / sds72),
            *k > sds72,
        );
    }
    let short: Vec<String> = n
        .mds
        .iter()
        .filter(|(_, k, _)| *k >= n.nowfq.0)
        .map(|(l, ..)| l.to_string())
        .collect();
    v.claim(
        "Table III",
        "M-DS short of no WFQ at every l",
        format!(
            "{:.1}-{:.1} kpps vs ~{:.0}",
            n.mds.iter().map(|m| m.2).fold(f64::NAN, f64::min),
            n.mds.iter().map(|m| m.2).fold(f64::NAN, f64::max),
            n.nowfq.1
        ),
        if short.is_empty() {
            format!("below {:.1} kpps at every l", n.nowfq.0)
        } else {
            format!("at or above no WFQ at l = {}", short.join(", "))
        },
        short.is_empty(),
    );
    let pairs: Vec<(u32, f64, f64)> = n
        .lds
        .iter()
        .filter_map(|(l, k, _)| n.mds.iter().find(|m| m.0 == *l).map(|m| (*l, *k, m.1)))
        .collect();
    let worse: Vec<String> = pairs
        .iter()
        .filter(|(_, lk, mk)| lk <= mk)
        .map(|(l, lk, mk)| format!("l = {l}: {lk:.1} vs {mk:.1}"))
        .collect();
    v.claim(
        "Table IV",
        "L-DS above M-DS for the same l",
        "every l",
        if worse.is_empty() {
            format!(
                "every l ({})",
                pairs
                    .iter()
                    .map(|p| format!("{}", p.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!("not at {}", worse.join("; "))
        },
        !pairs.is_empty() && worse.is_empty(),
    );
    // "Almost the same throughput as no WFQ": the paper's evidence is its
    // best L-DS row's share of its no-WFQ figure; qosnet's best beside it.
    let best = |rows: &[(u32, f64, f64)], i: usize| {
        rows.iter()
            .map(|r| if i == 1 { r.1 } else { r.2 })
            .fold(f64::NAN, f64::max)
    };
    v.at_least(
        "Table IV",
        "best L-DS row, % of no WFQ (paper's own share)",
        100.0 * best(&n.lds, 2) / n.nowfq.1,
        100.0 * best(&n.lds, 1) / n.nowfq.0,
        "%",
    );

    for f in &n.fair {
        // M-DS has no fairness table: §V-B says its fairness is S-DS's.
        let art = match f.table.as_str() {
            "III" => "§V-B".to_string(),
            t => format!("Table {t}"),
        };
        if f.table != "III" && f.sizes == "64 B" {
            for k in 0..3 {
                let p = f.paper.get(2 * k + 1).copied().unwrap_or(f64::NAN);
                v.figure(
                    &art,
                    &format!(
                        "{} class {} bytes per 10^6 packets on OL_1, 64 B",
                        f.scheme,
                        k + 1
                    ),
                    p,
                    f.dist_bytes_1e6[k],
                    "B",
                    TOL,
                );
            }
        }
        if f.table == "I" && f.sizes == "64 B" {
            // §V-A: "a maximum of 256 bytes, i.e., four packets".
            v.at_most(
                &art,
                "S-DS largest difference from centralised WFQ, 64 B",
                256.0,
                f.max_diff_bytes,
                "B",
            );
        } else if f.table != "III" {
            v.at_most(
                &art,
                &format!(
                    "{} largest difference from centralised WFQ, {} (paper's table)",
                    f.scheme, f.sizes
                ),
                f.paper_max_diff_pct(),
                f.max_diff_pct,
                "%",
            );
        }
        v.claim(
            &art,
            &format!("{} near-WFQ fairness against GPS, {}", f.scheme, f.sizes),
            "close to centralised WFQ",
            format!(
                "lag {:.0} B vs WFQ's {:.0} B + one {:.0} B packet",
                f.dist_lag, f.central_lag, f.max_packet
            ),
            f.near_wfq(),
        );
    }
    // The paper's conclusion (§V-B): L-DS "offers both high performance and
    // almost fair bandwidth allocation".
    let lds_fair: Vec<&Fair> = n.fair.iter().filter(|f| f.table == "V").collect();
    let l25 = n.lds.iter().find(|r| r.0 == 25).map_or(f64::NAN, |r| r.1);
    let m25 = n.mds.iter().find(|r| r.0 == 25).map_or(f64::NAN, |r| r.1);
    let fair_ok = !lds_fair.is_empty() && lds_fair.iter().all(|f| f.near_wfq());
    v.claim(
        "§V-B",
        "L-DS (l = 25): near-WFQ fairness at higher throughput",
        "high throughput and almost fair",
        format!(
            "{:.1} kpps (M-DS {m25:.1}, S-DS {sds72:.1}); GPS lag {}near WFQ's",
            l25,
            if fair_ok { "" } else { "not " }
        ),
        fair_ok && l25 > m25 && l25 > sds72,
    );
    if let Some((lds, nowfq)) = n.unequal {
        // Class 1 offered half the load: a scheduler that serves arrivals
        // gives it nearer half of OL_1 than a third.
        let nearer_half = |s: &[f64; 3]| (s[0] - 50.0).abs() < (s[0] - 100.0 / 3.0).abs();
        v.claim(
            "§V (no WFQ)",
            "no WFQ unfair: class 1 offered 2x takes nearer half than a third",
            "no fairness without WFQ",
            format!("class 1 {:.1} % of OL_1", nowfq[0]),
            nearer_half(&nowfq),
        );
        v.claim(
            "§V-B",
            "L-DS fair under the same load: class 1 nearer a third",
            "almost fair bandwidth allocation",
            format!("class 1 {:.1} % of OL_1", lds[0]),
            !nearer_half(&lds),
        );
    }
    v.note("all paper figures are read from its tables (not plots): ±15 %");
    v.note(format!(
        "Tables I and V: {} scheduling rounds, bytes per class scaled to the paper's 10^6 packets on OL_1 (its Table V's bytes equal Table I's: it counts packets, not L-DS cycles); variable-size bytes are not compared (the IMIX stands in for the paper's unpublished trace), only their difference from centralised WFQ",
        n.rounds
    ));
    v.note("near-WFQ against GPS: worst lag behind the GPS fluid at most centralised WFQ's plus one largest packet");
    v
}

/// The node-failure scenario (index into [`SCENARIOS`]).
const KILL: usize = 6;
/// L-DS configured for throughput (index into [`SCENARIOS`]).
pub(super) const BULK: usize = 7;
/// The rows of the throughput-vs-cost table, (l, cycle guard), on
/// lds-bulk.toml: the shipped l = 25 and the paper's l = 100 without a
/// guard, l = 400 at the guard it tolerates, then l = 800 with guards
/// around the shipped 1 ms.
const BULK_ROWS: [(u16, &str); 7] = [
    (25, "0s"),
    (100, "0s"),
    (400, "1ms"),
    (800, "200us"),
    (800, "500us"),
    (800, "1ms"),
    (800, "1500us"),
];

/// Packet delay over all flows: the mean (weighted by packets received)
/// and the worst flow's 99th percentile, in ns.
pub(super) fn delays(r: &Results) -> (f64, f64) {
    let n: u64 = r.flows.iter().map(|f| f.received).sum();
    let mean = r
        .flows
        .iter()
        .map(|f| f.delay_ns.mean * f.received as f64)
        .sum::<f64>()
        / n.max(1) as f64;
    let p99 = r.flows.iter().map(|f| f.delay_ns.p99).max().unwrap_or(0);
    (mean, p99 as f64)
}

/// What L-DS's throughput costs (beyond the paper): for each (l, guard),
/// throughput against no WFQ over the same window, packet delay, the
/// shares of OL_1 with class 1 offered twice the others' load, and the
/// worst lag behind GPS of the scheduling-level comparison (IMIX, l).
/// `runs`: no WFQ, no WFQ 2x, then per row its run and its 2x run.
fn print_bulk(bulk: &Scenario, runs: &[(Scenario, Results)], rounds: u64) -> Result<()> {
    let [(nsc, nr), (_, n2), rows @ ..] = runs else {
        return Err(anyhow!(
            "lds-bulk table: {} runs, expected at least 2",
            runs.len()
        ));
    };
    let base = measure(nsc, nr).kpps;
    outln!(
        "\nL-DS for throughput (beyond the paper; {}): what >= 99 % of no WFQ costs, {} ms windows",
        bulk.source,
        (bulk.duration.as_secs_f64() - bulk.warmup.as_secs_f64()) * 1e3
    );
    outln!(
        "{:>4} {:>7} {:>8} {:>12} {:>11} {:>12} {:>22} {:>11} {:>14}",
        "l",
        "guard",
        "kpps",
        "% of no-WFQ",
        "mean delay",
        "worst p99",
        "2x: class 1/2/3 %",
        "off 1/3 pt",
        "GPS lag (B)"
    );
    let row = |l: String, g: &str, r: &Results, r2: &Results, kpps: f64, lag: String| {
        let (mean, p99) = delays(r);
        let (sh, off, _) = ol1_fairness(r2);
        outln!(
            "{:>4} {:>7} {:>8.1} {:>12.2} {:>11} {:>12} {:>22} {:>11.2} {:>14}",
            l,
            g,
            kpps,
            100.0 * kpps / base.max(1e-9),
            crate::report::fmt_ns(mean),
            crate::report::fmt_ns(p99),
            format!("{:.2} {:.2} {:.2}", sh[0], sh[1], sh[2]),
            off,
            lag
        );
    };
    row("-".into(), "no WFQ", nr, n2, base, "-".into());
    let mut lags: Vec<(u16, f64)> = Vec::new();
    for ((l, g), pair) in BULK_ROWS.iter().zip(rows.chunks(2)) {
        let [(sc, r), (_, r2)] = pair else { break };
        let lag = match lags.iter().find(|(x, _)| x == l) {
            Some((_, v)) => *v,
            None => {
                let rep = fairness(rounds, Variant::Lds { packets: *l }, Sizes::Trace(IMIX.to_vec()))?;
                let v = rep.classes.iter().map(|c| c.distributed_lag).fold(0.0, f64::max);
                lags.push((*l, v));
                v
            }
        };
        row(l.to_string(), g, r, r2, measure(sc, r).kpps, format!("{lag:.0}"));
    }
    outln!(
        "(delay: one-way, every flow; no WFQ's is the forwarders' overloaded input queues. GPS lag: scheduling level, IMIX, {rounds} rounds)"
    );
    Ok(())
}

/// What the kills did, from the run's counters (§IV-A's robustness and
/// the election and re-hashing beyond it).
fn print_kills((sc, r): &(Scenario, Results)) {
    outln!(
        "\nNode failures in the simulator ({}, beyond the paper): {}",
        SCENARIOS[KILL].path,
        sc.description
    );
    let ms = |d: qosnet_core::time::Duration| d.0 as f64 / 1e6;
    let faults: Vec<String> = sc
        .kills
        .iter()
        .map(|k| {
            let name = sc.nodes.get(k.node).map_or("?", |n| n.name.as_str());
            match k.restart {
                Some(t) => format!("{name} killed at {} ms, restarted at {} ms", ms(k.at), ms(t)),
                None => format!("{name} killed at {} ms for good", ms(k.at)),
            }
        })
        .collect();
    outln!("faults: {}", faults.join("; "));
    let cols = [
        ("killed", "killed"),
        ("restarted", "restarted"),
        ("down_at_end", "down at end"),
        ("is_master", "master"),
        ("elections_won", "elected"),
        ("master_lost", "master lost"),
        ("fe_declared_dead", "FE dead"),
        ("fe_revived", "FE revived"),
        ("lost_held_at_kill", "lost held"),
        ("lost_arriving_while_down", "lost arriving"),
        ("fe_down", "FE down"),
        ("fe_up", "FE up"),
        ("rehashed", "rehashed"),
    ];
    let mut head = format!("{:<5}", "node");
    for (_, t) in cols {
        head += &format!(" {t:>13}");
    }
    outln!("{head}");
    for n in r
        .nodes
        .iter()
        .filter(|n| n.name.starts_with("fe") || n.name.starts_with("lb"))
    {
        let mut line = format!("{:<5}", n.name);
        for (k, _) in cols {
            line += &format!(" {:>13}", n.counters.get(k).copied().unwrap_or(0));
        }
        outln!("{line}");
    }
    let sent: u64 = r.flows.iter().map(|f| f.sent).sum();
    let received: u64 = r.flows.iter().map(|f| f.received).sum();
    outln!(
        "flows: {sent} packets sent, {received} received ({:.1} %); a killed forwarder's queued and arriving packets are the lost ones",
        100.0 * received as f64 / sent.max(1) as f64
    );
}

/// T_br values of the T_br-vs-fairness table (72 us: the paper's).
const TBR_CURVE: [&str; 4] = ["36us", "72us", "144us", "288us"];

/// Shares of OL_1's bytes per class (%), the worst distance of a share
/// from 1/3 (points) and Jain's index over the three classes.
pub(super) fn ol1_fairness(r: &Results) -> ([f64; 3], f64, f64) {
    shares(ol1_class_bytes(r))
}

/// Shares (%) of bytes per class, the worst distance from 1/3 (points) and
/// Jain's index.
pub(super) fn shares(b: [f64; 3]) -> ([f64; 3], f64, f64) {
    let tot: f64 = b.iter().sum::<f64>().max(1e-9);
    let jain = tot * tot / (3.0 * b.iter().map(|x| x * x).sum::<f64>().max(1e-9));
    let off = b
        .iter()
        .map(|x| (100.0 * x / tot - 100.0 / 3.0).abs())
        .fold(0.0, f64::max);
    (b.map(|x| 100.0 * x / tot), off, jain)
}

/// The T_br-vs-fairness table; returns (T_br, kpps, max off 1/3 in
/// points) per run for the plot.
fn print_tbr(runs: &[(Scenario, Results)]) -> Vec<(String, f64, f64)> {
    outln!("\nT_br vs fairness (beyond the paper; whole simulator): L-DS l = 25, class 1 offered 2x, equal weights; shares of OL_1 bytes");
    outln!(
        "{:>7} {:>9} {:>9} {:>9} {:>16} {:>10} {:>8}",
        "T_br",
        "class 1 %",
        "class 2 %",
        "class 3 %",
        "max off 1/3 (pt)",
        "Jain",
        "kpps"
    );
    let mut v = Vec::new();
    for (t, (sc, r)) in TBR_CURVE.iter().zip(runs) {
        let (sh, off, jain) = ol1_fairness(r);
        let kpps = measure(sc, r).kpps;
        outln!(
            "{:>7} {:>9.2} {:>9.2} {:>9.2} {:>16.2} {:>10.5} {:>8.1}",
            t,
            sh[0],
            sh[1],
            sh[2],
            off,
            jain,
            kpps
        );
        v.push((t.to_string(), kpps, off));
    }
    v
}

/// DS-loss probabilities of the loss-vs-fairness table.
const DS_LOSS: [f64; 5] = [0.0, 0.05, 0.10, 0.15, 0.20];

/// Bytes per class delivered on OL_1 (flows `*_ol1_c<k>_*`) in the window.
pub(super) fn ol1_class_bytes(r: &Results) -> [f64; 3] {
    let iv = (r.duration_s - r.warmup_s).max(1e-9);
    let mut b = [0.0; 3];
    for f in &r.flows {
        let Some(rest) = f.name.split_once("_ol1_c").map(|x| x.1) else {
            continue;
        };
        if let Some(k) = rest.chars().next().and_then(|c| c.to_digit(10)) {
            if (1..=3).contains(&k) {
                b[k as usize - 1] += f.throughput_bps * iv / 8.0;
            }
        }
    }
    b
}

fn print_ds_loss(runs: &[(Scenario, Results)]) {
    outln!("\nDS-frame loss vs fairness (beyond the paper): L-DS l = 25, class 1 offered 2x, equal weights;");
    outln!("each forwarder loses each DS frame it receives with probability p ([stsdr] ds_loss); shares of OL_1 bytes");
    outln!(
        "{:>7} {:>9} {:>9} {:>9} {:>16} {:>10} {:>8} {:>12}",
        "p",
        "class 1 %",
        "class 2 %",
        "class 3 %",
        "max off 1/3 (pt)",
        "Jain",
        "kpps",
        "DS lost"
    );
    for (i, (sc, r)) in runs.iter().enumerate() {
        let (sh, off, jain) = ol1_fairness(r);
        let lost: u64 = r
            .nodes
            .iter()
            .filter_map(|n| n.counters.get("ds_loss_injected"))
            .sum();
        let label = match DS_LOSS.get(i) {
            Some(p) => format!("{:.0} %", 100.0 * p),
            None => "no WFQ".into(),
        };
        outln!(
            "{:>7} {:>9.2} {:>9.2} {:>9.2} {:>16.2} {:>10.5} {:>8.1} {:>12}",
            label,
            sh[0],
            sh[1],
            sh[2],
            off,
            jain,
            measure(sc, r).kpps,
            lost
        );
    }
}

/// Left: the l axis (scheduling-level fairness, the worst GPS lag, vs
/// simulated throughput). Right: the T_br axis (fairness measured in the
/// whole simulator, the worst class share's distance from 1/3 on OL_1,
/// vs throughput).
fn plot(
    path: &Path,
    curve: &[(u32, f64, f64, f64)],
    tbr: &[(String, f64, f64)],
    nowfq: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1200, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(720);
    plot_tbr(&right, tbr, nowfq)?;
    let root = left;
    let lag_max = curve.iter().map(|c| c.3).fold(1.0, f64::max) * 1.1;
    let mut ch = ChartBuilder::on(&root)
        .caption(
            "L-DS: throughput vs fairness (IMIX, M = N = K = 3)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..nowfq.max(1.0) * 1.05, 0f64..lag_max)?;
    ch.configure_mesh()
        .x_desc("throughput per forwarder (kpps)")
        .y_desc("worst service lag behind GPS (bytes)")
        .draw()?;
    let pts: Vec<(f64, f64)> = curve.iter().map(|c| (c.1, c.3)).collect();
    ch.draw_series(LineSeries::new(pts.clone(), BLUE.stroke_width(2)))?;
    for (c, p) in curve.iter().zip(&pts) {
        ch.draw_series(std::iter::once(Circle::new(*p, 4, BLUE.filled())))?;
        ch.draw_series(std::iter::once(Text::new(
            format!("l={}", c.0),
            (p.0, p.1),
            ("sans-serif", 13),
        )))?;
    }
    ch.draw_series(LineSeries::new(
        vec![(nowfq, 0.0), (nowfq, lag_max)],
        RED.mix(0.6),
    ))?
    .label("no WFQ")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    ch.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    root.present()?;
    Ok(())
}

fn plot_tbr<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    tbr: &[(String, f64, f64)],
    nowfq: f64,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let off_max = tbr.iter().map(|c| c.2).fold(1.0, f64::max) * 1.2;
    let mut ch = ChartBuilder::on(area)
        .caption("L-DS l = 25 vs T_br (whole simulator)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..nowfq.max(1.0) * 1.05, 0f64..off_max)?;
    ch.configure_mesh()
        .x_desc("throughput per forwarder (kpps)")
        .y_desc("worst class share off 1/3 on OL_1 (points)")
        .draw()?;
    let pts: Vec<(f64, f64)> = tbr.iter().map(|c| (c.1, c.2)).collect();
    ch.draw_series(LineSeries::new(pts.clone(), GREEN.stroke_width(2)))?;
    for (c, p) in tbr.iter().zip(&pts) {
        ch.draw_series(std::iter::once(Circle::new(*p, 4, GREEN.filled())))?;
        ch.draw_series(std::iter::once(Text::new(
            format!("T_br={}", c.0),
            (p.0, p.1),
            ("sans-serif", 13),
        )))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Outcome;

    fn fair(table: &str, scheme: &str, sizes: &str, dist_lag: f64) -> Fair {
        let c = 21_333_312.0;
        Fair {
            table: table.into(),
            scheme: scheme.into(),
            sizes: sizes.into(),
            dist_bytes_1e6: [c; 3],
            max_diff_bytes: 64.0,
            max_diff_pct: 0.0003,
            central_lag: 43.0,
            dist_lag,
            max_packet: 64.0,
            paper: vec![c, c + 32.0, c, c - 192.0, c, c + 64.0],
        }
    }

    /// A run that matches the paper: 72 us S-DS, M-DS and L-DS at l = 25.
    fn matching() -> Numbers {
        Numbers {
            rounds: 100_000,
            sds: vec![SdsRow {
                t_br: "72us".into(),
                kpps: 12.9,
                output_pct: 92.0,
                lost_ds_pct: 2.2,
                paper_kpps: 12.831,
                paper_output_pct: 92.39,
                paper_lost_ds_pct: 2.31,
            }],
            mds: vec![(25, 151.0, 150.6)],
            lds: vec![(25, 175.0, 174.2), (100, 184.0, 183.1)],
            nowfq: (186.0, 186.0),
            fair: vec![
                fair("I", "S-DS", "64 B", 43.0),
                fair("V", "L-DS l = 25", "64 B", 60.0),
            ],
            unequal: Some(([33.4, 33.3, 33.3], [49.6, 24.4, 26.0])),
        }
    }

    #[test]
    fn a_run_like_the_papers_holds_everywhere() {
        let v = verdicts(&matching());
        let bad: Vec<_> = v
            .rows
            .iter()
            .filter(|r| r.outcome != Outcome::Holds)
            .map(|r| format!("{}: {} ({})", r.artefact, r.what, r.qosnet))
            .collect();
        assert!(bad.is_empty(), "{bad:?}");
        assert!(v
            .rows
            .iter()
            .any(|r| r.what.contains("near-WFQ fairness at higher")));
    }

    #[test]
    fn lds_far_behind_gps_and_a_fair_no_wfq_differ() {
        let mut n = matching();
        // L-DS 1 000 B behind GPS where WFQ is 43 B behind: more than a
        // 64-byte packet beyond WFQ's lag.
        n.fair[1].dist_lag = 1_000.0;
        n.unequal = Some(([33.4, 33.3, 33.3], [34.0, 33.0, 33.0]));
        n.mds[0].1 = 180.0;
        let v = verdicts(&n);
        let differs: Vec<&str> = v
            .rows
            .iter()
            .filter(|r| r.outcome == Outcome::Differs)
            .map(|r| r.what.as_str())
            .collect();
        assert_eq!(
            differs,
            [
                "M-DS throughput, l = 25",
                "L-DS above M-DS for the same l",
                "L-DS l = 25 near-WFQ fairness against GPS, 64 B",
                "L-DS (l = 25): near-WFQ fairness at higher throughput",
                "no WFQ unfair: class 1 offered 2x takes nearer half than a third",
            ]
        );
    }
}
