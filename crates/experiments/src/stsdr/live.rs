//! `qosnet reproduce stsdr --live`: Table IV's claim — L-DS keeps most of
//! the forwarders' throughput without WFQ (Khan, Sahoo & Manjunath §V-B:
//! 183.1 of 186 kpps, 98.4 %, at l = 100) — measured on a namespace lab
//! where every load balancer, forwarder and the T-switch is its own
//! `qosnet node` process, DS frames are raw Ethernet over AF_PACKET, and
//! the forwarders' per-frame CPU is emulated.
//!
//! `scenarios/stsdr/live.toml` is the paper's configuration with CPU and
//! protocol times × 50 and the load / 50, so one 2-core machine can run it
//! (3.7 kpps per forwarder instead of 186). The baseline (no WFQ,
//! `live-nowfq.toml`) is measured in the same run, interleaved with the
//! L-DS runs round by round (3 rounds; `--set rounds=N`), so slow phases
//! of the machine hit both; ratios are of medians, and the spread of each
//! configuration over the rounds is printed as the noise, with the node
//! processes' worst timer lateness. The same scenarios'
//! simulated figures are printed beside: they are the reference the live
//! ratios should approach on a quiet machine.
//!
//! `live-bulk.toml` is the configuration for the goal of L-DS at
//! ≥ 99 % of no WFQ (docs/paper-stsdr.md, *L-DS at 99 %*): l = 800 and a
//! cycle guard, so each cycle's two DS frames are a smaller share of its
//! forwarding work; 20 s runs. It is measured against the same no-WFQ
//! runs, and its price is printed beside: packet delay (every
//! configuration) and the class shares on OL_1 ("bulk 2x").

use anyhow::{anyhow, Result};
use qosnet_lab::labrun::{self, LiveOptions, NodeProcesses};
use qosnet_scenario::results::Results;
use qosnet_scenario::Scenario;

use super::sim::{delays, measure, ol1_class_bytes, ol1_fairness, shares, sim_jobs};
use super::SCENARIOS;
use crate::report;
use crate::run;
use crate::RunOptions;

/// The embedded live scenarios (indices into [`SCENARIOS`]).
const LIVE_LDS: usize = 4;
const LIVE_NOWFQ: usize = 5;
/// live-bulk.toml: L-DS configured for throughput (l = 800, cycle guard
/// 58 ms), 20 s runs.
const LIVE_BULK: usize = 8;

/// The configurations of each round: name, scenario, extra `--set`s. The
/// first [`THROUGHPUT`] are Table IV's; the last two offer class 1 twice
/// the others' load on every OL for the live fairness table (as the
/// simulated DS-loss table does).
fn configs() -> Vec<(&'static str, usize, Vec<String>)> {
    let double: Vec<String> = ["g1", "g2"]
        .iter()
        .flat_map(|g| (1..=3).map(move |j| format!("flow.{g}_ol{j}_c1*.rate=104pps")))
        .collect();
    vec![
        ("no WFQ", LIVE_NOWFQ, vec![]),
        ("L-DS l=25", LIVE_LDS, vec![]),
        ("L-DS l=100", LIVE_LDS, vec!["stsdr.l=100".into()]),
        ("L-DS bulk", LIVE_BULK, vec![]),
        ("L-DS 25 2x", LIVE_LDS, double.clone()),
        ("L-DS bulk 2x", LIVE_BULK, double.clone()),
        ("no WFQ 2x", LIVE_NOWFQ, double),
    ]
}

/// How many of [`configs`] are throughput configurations (Table IV's and
/// the bulk one, live-bulk.toml).
const THROUGHPUT: usize = 4;

/// One live run's figures.
struct Point {
    kpps: f64,
    input_kpps: f64,
    lost_ds_pct: f64,
    /// Worst timer lateness of any node process (ns).
    worst_late_ns: f64,
    results: Results,
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The median: a round in which another process starved the lab (seen
/// here: a forwarder receiving a tenth of what its balancers sent it)
/// does not move it.
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// (max − min) / median, in per cent.
fn spread_pct(v: &[f64]) -> f64 {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    100.0 * (hi - lo) / median(v).max(1e-12)
}

pub(super) fn run(o: &RunOptions) -> Result<()> {
    run::need_root("qosnet reproduce stsdr --live")?;
    // `rounds=N` is this experiment's own; the rest go to the scenarios.
    let mut rounds = 3usize;
    let mut sets = Vec::new();
    for s in o.overrides.sets() {
        match s.strip_prefix("rounds=") {
            Some(v) => {
                rounds = v
                    .parse()
                    .ok()
                    .filter(|r| (1..=20).contains(r))
                    .ok_or_else(|| anyhow!("--set rounds={v}: live rounds from 1 to 20"))?
            }
            None => sets.push(s),
        }
    }
    let exe = std::env::current_exe().map_err(|e| anyhow!("finding the qosnet binary: {e}"))?;
    // A private run directory (never a predictable path in /tmp): root's
    // node processes load these files.
    let dir = qosnet_io::rundir::RunDir::create("stsdr-live").map_err(|e| anyhow!("run directory: {e}"))?;
    let mut files = Vec::new();
    for &i in &[LIVE_LDS, LIVE_NOWFQ, LIVE_BULK] {
        let p = dir
            .write_new(&format!("{i}.toml"), SCENARIOS[i].text.as_bytes())
            .map_err(|e| anyhow!("{e}"))?;
        files.push((i, p));
    }

    eprintln!("simulating the live scenarios (reference)...");
    let cfgs = configs();
    let sims = run::parallel(sim_jobs(
        cfgs.iter().map(|(_, i, x)| (*i, x.clone())).collect(),
        &sets,
    ))?;
    let sim_kpps: Vec<f64> = sims.iter().map(|(sc, r)| measure(sc, r).kpps).collect();

    eprintln!("measuring this machine's timer noise (0.3 s)...");
    let noise = qosnet_io::clock::measure_timer_noise(std::time::Duration::from_millis(300));
    let stop = run::signals()?;
    let mut points: Vec<Vec<Point>> = cfgs.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for (c, (name, i, extra)) in cfgs.iter().enumerate() {
            let mut s = sets.clone();
            s.extend(extra.iter().cloned());
            let sc: Scenario = run::load(&SCENARIOS[*i], &s)?;
            let path = files
                .iter()
                .find(|(k, _)| k == i)
                .map(|(_, p)| p.clone())
                .ok_or_else(|| anyhow!("scenario {i} not written"))?;
            eprintln!(
                "round {}/{rounds}: {name} live ({} s)...",
                round + 1,
                sc.duration.as_secs_f64()
            );
            let lo = LiveOptions {
                prefix: o.prefix.clone(),
                emulate_cpu: true,
                timer_noise: false,
                processes: Some(NodeProcesses {
                    exe: exe.clone(),
                    scenario: path,
                    sets: s.clone(),
                }),
                ..LiveOptions::default()
            };
            // A lab that came up too late for its own start is retried once.
            let run = match labrun::run(&sc, &lo, stop.clone()) {
                Err(e) if e.contains("too loaded") => {
                    eprintln!("  {e}; once more");
                    labrun::run(&sc, &lo, stop.clone())
                }
                r => r,
            }
            .map_err(|e| anyhow!("{}: {e}", sc.name))?;
            let t = measure(&sc, &run.results);
            let worst = run
                .results
                .extra
                .get("timer_lateness")
                .and_then(|v| v.get("max_ns"))
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::NAN);
            if let Some(base) = &o.out {
                let d =
                    base.join("stsdr-live")
                        .join(format!("{}-{}", name.replace([' ', '='], "_"), round + 1));
                report::write_outputs(&d, &run.results, &run.buckets)?;
            }
            points[c].push(Point {
                kpps: t.kpps,
                input_kpps: t.input_kpps,
                lost_ds_pct: t.lost_ds_pct,
                worst_late_ns: worst,
                results: run.results,
            });
        }
    }

    outln!("Distributed WFQ on the STSDR (Khan, Sahoo & Manjunath, seed 003), live");
    outln!(
        "every balancer, forwarder and the T-switch its own `qosnet node` process; DS frames over AF_PACKET;"
    );
    outln!(
        "scenarios/stsdr/live.toml: the paper's 3 forwarders x 3 OLs x 3 classes with CPU and T_br x 50, load / 50"
    );
    outln!("(forwarder CPU 268.8 us per frame: 3.72 kpps each without WFQ; T_br 3.6 ms); {rounds} rounds, interleaved\n");
    outln!(
        "{:<12} {:>32} {:>9} {:>10} {:>9} {:>11} {:>11} {:>11} {:>11}",
        "config",
        "live kpps per forwarder, by round",
        "median",
        "spread %",
        "lost DS %",
        "worst late",
        "sim kpps",
        "mean delay",
        "worst p99"
    );
    let means: Vec<f64> = points
        .iter()
        .map(|p| median(&p.iter().map(|x| x.kpps).collect::<Vec<_>>()))
        .collect();
    for (c, (name, _, _)) in cfgs.iter().enumerate() {
        let k: Vec<f64> = points[c].iter().map(|x| x.kpps).collect();
        let by_round = k.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(" ");
        let lost = mean(&points[c].iter().map(|x| x.lost_ds_pct).collect::<Vec<_>>());
        let worst = points[c].iter().map(|x| x.worst_late_ns).fold(0.0, f64::max);
        // Packet delay, medians over the rounds: what the longer cycles
        // of the bulk configuration cost.
        let d: Vec<(f64, f64)> = points[c].iter().map(|x| delays(&x.results)).collect();
        outln!(
            "{:<12} {:>32} {:>9.3} {:>10.1} {:>9.2} {:>11} {:>11.3} {:>11} {:>11}",
            name,
            by_round,
            means[c],
            spread_pct(&k),
            lost,
            report::fmt_ns(worst),
            sim_kpps[c],
            report::fmt_ns(median(&d.iter().map(|x| x.0).collect::<Vec<_>>())),
            report::fmt_ns(median(&d.iter().map(|x| x.1).collect::<Vec<_>>()))
        );
    }
    let offered = mean(&points[0].iter().map(|x| x.input_kpps).collect::<Vec<_>>());
    outln!("(offered {offered:.3} kpps per forwarder; spread = (max - min) / median over the rounds: this machine's noise;");
    outln!(" delay: one-way over every flow, medians over the rounds; no WFQ's is the overloaded forwarders' input queues)");
    let base_spread = spread_pct(&points[0].iter().map(|x| x.kpps).collect::<Vec<_>>());
    outln!("\nTable IV's claim as a ratio to no WFQ measured in the same run, medians (paper: 183.1 / 186 kpps = 98.4 % at l = 100)");
    outln!(
        "{:<12} {:>10} {:>10} {:>12}",
        "config",
        "live %",
        "sim %",
        "± noise %"
    );
    for c in 1..THROUGHPUT {
        let spread = spread_pct(&points[c].iter().map(|x| x.kpps).collect::<Vec<_>>());
        outln!(
            "{:<12} {:>10.2} {:>10.2} {:>12.1}",
            cfgs[c].0,
            100.0 * means[c] / means[0].max(1e-12),
            100.0 * sim_kpps[c] / sim_kpps[0].max(1e-12),
            // Two configurations' spreads add up in their ratio.
            base_spread + spread
        );
    }
    // Table V on a live OL: with class 1 offered twice the others' load
    // and every class offered more than a third of what the forwarders
    // send, GPS with equal weights (and so centralised WFQ, within a
    // packet) gives each class a third of OL_1's bytes; no WFQ serves
    // arrivals (50/25/25 %).
    outln!("\nTable V on a live OL (beyond the paper's scheduling-level table): class 1 offered 2x, equal weights;");
    outln!("shares of the bytes the sink on OL_1 received in the window, all rounds together; GPS / centralised WFQ: 33.33 % each");
    outln!(
        "{:<12} {:>6} {:>9} {:>9} {:>9} {:>16} {:>10} {:>28}",
        "config",
        "",
        "class 1 %",
        "class 2 %",
        "class 3 %",
        "max off 1/3 (pt)",
        "Jain",
        "max off 1/3 by round (pt)"
    );
    for (c, (name, _, _)) in cfgs.iter().enumerate().skip(THROUGHPUT) {
        let mut bytes = [0.0f64; 3];
        let mut by_round = Vec::new();
        for p in &points[c] {
            let b = ol1_class_bytes(&p.results);
            bytes.iter_mut().zip(b).for_each(|(x, y)| *x += y);
            by_round.push(format!("{:.2}", ol1_fairness(&p.results).1));
        }
        let (sh, off, jain) = shares(bytes);
        outln!(
            "{:<12} {:>6} {:>9.2} {:>9.2} {:>9.2} {:>16.2} {:>10.5} {:>28}",
            name,
            "live",
            sh[0],
            sh[1],
            sh[2],
            off,
            jain,
            by_round.join(" ")
        );
        let (sh, off, jain) = ol1_fairness(&sims[c].1);
        outln!(
            "{:<12} {:>6} {:>9.2} {:>9.2} {:>9.2} {:>16.2} {:>10.5}",
            "",
            "sim",
            sh[0],
            sh[1],
            sh[2],
            off,
            jain
        );
    }
    let w = &noise.wait_lateness;
    outln!(
        "machine timer noise (before the runs): wait_until p50 {}, p99 {}, max {}; spinning thread's longest gap {}",
        report::fmt_ns(w.p50_ns as f64),
        report::fmt_ns(w.p99_ns as f64),
        report::fmt_ns(w.max_ns as f64),
        report::fmt_ns(noise.spin_gaps.max_ns as f64)
    );
    // Every run's DS cycle counters, briefly: the cycle ran on every
    // forwarder of every L-DS run.
    for (c, (name, _, _)) in cfgs
        .iter()
        .enumerate()
        .filter(|(_, (_, i, _))| *i == LIVE_LDS || *i == LIVE_BULK)
    {
        let cycles: Vec<String> = points[c]
            .iter()
            .map(|p| {
                let n = |k: &str| -> u64 { p.results.nodes.iter().filter_map(|n| n.counters.get(k)).sum() };
                format!("{} cycles, {} DS missing", n("cycles"), n("ds_missing"))
            })
            .collect();
        outln!("{name}: {}", cycles.join("; "));
    }
    Ok(())
}
