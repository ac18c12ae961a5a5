//! `qosnet reproduce PAPER`: run a paper's experiments as shipped scenarios
//! and print qosnet's numbers beside the numbers the paper reports.

use anyhow::{anyhow, bail, Result};
use qosnet_scenario::load_str;
use qosnet_scenario::results::Results;
use qosnet_sim::Sim;

use crate::embedded::TDP_ICC2006;
use crate::report::{self, fmt_ns};
use crate::ReproduceArgs;

pub fn run(a: ReproduceArgs) -> Result<()> {
    match a.paper.as_str() {
        "tdp" if a.live => crate::live::reproduce_tdp_live(&a),
        "tdp" => tdp(&a),
        "diffserv" => crate::reproduce_ds::diffserv(&a),
        other => {
            bail!("unknown paper `{other}`; available: tdp (ICC 2006 TDP router, Tables I and II), diffserv (DEGEB Tables 4-1, 4-3, Figure 4)")
        }
    }
}

struct Run {
    results: Results,
    paper: std::collections::BTreeMap<String, f64>,
    buckets: Vec<(String, Vec<(u64, u64)>)>,
}

fn sim_one(path: &str, text: &str, sets: &[String]) -> Result<Run> {
    let sc = load_str(path, text, sets).map_err(|e| anyhow!("{e}"))?;
    let paper = sc.paper.as_ref().map(|p| p.values.clone()).unwrap_or_default();
    let mut sim = Sim::new(sc).map_err(|e| anyhow!("{path}: {e}"))?;
    let results = sim.run();
    let buckets = (0..results.flows.len())
        .map(|i| (results.flows[i].name.clone(), sim.delay_buckets(i)))
        .collect();
    Ok(Run {
        results,
        paper,
        buckets,
    })
}

/// ICC 2006 §IV: Tables I and II, FIFO vs TDP jitter per flow, and the
/// link loads the paper states.
fn tdp(a: &ReproduceArgs) -> Result<()> {
    let mut sets = a.set.clone();
    if let Some(d) = &a.duration {
        sets.push(format!("scenario.duration=\"{d}\""));
    }
    if let Some(s) = a.seed {
        sets.push(format!("scenario.seed={s}"));
    }
    eprintln!(
        "running {} simulations of the ICC 2006 TDP testbed...",
        TDP_ICC2006.len()
    );
    let runs: Vec<Result<Run>> = std::thread::scope(|s| {
        let hs: Vec<_> = TDP_ICC2006
            .iter()
            .map(|e| s.spawn(|| sim_one(e.path, e.text, &sets)))
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("simulation thread panicked")))
            })
            .collect()
    });
    let runs: Vec<Run> = runs.into_iter().collect::<Result<_>>()?;
    for (table, size, fifo, tdp, loads) in [
        (
            "Table I: end-to-end delay jitter, 1002-byte IP packets",
            1002,
            &runs[0],
            &runs[1],
            "96 Mb/s on ring links, 32 Mb/s on R1->R3 and R2->R4",
        ),
        (
            "Table II: end-to-end delay jitter, 482-byte IP packets",
            482,
            &runs[2],
            &runs[3],
            "96 Mb/s on ring links, 32 Mb/s on R1->R3, 48 Mb/s on R2->R4",
        ),
    ] {
        outln!(
            "\n{table} ({} s simulated per run, seed {})",
            tdp.results.duration_s,
            tdp.results.seed
        );
        outln!(
            "{:<8} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
            "flow",
            "paper FIFO",
            "qosnet FIFO",
            "paper TDP",
            "qosnet TDP",
            "lost FIFO",
            "lost TDP"
        );
        for (i, f) in tdp.results.flows.iter().enumerate() {
            let ff = &fifo.results.flows[i];
            let pf = fifo
                .paper
                .get(&f.name)
                .map(|v| format!("{v:.2} ms"))
                .unwrap_or_default();
            let pt = tdp
                .paper
                .get(&f.name)
                .map(|v| format!("{v:.2} ms"))
                .unwrap_or_default();
            outln!(
                "{:<8} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
                f.name,
                pf,
                fmt_ns(ff.jitter_ns as f64),
                pt,
                fmt_ns(f.jitter_ns as f64),
                ff.lost,
                f.lost
            );
        }
        let tf_us = 250.0;
        let worst = tdp.results.flows.iter().map(|f| f.jitter_ns).max().unwrap_or(0);
        outln!(
            "TDP bound: jitter < 2 TF = {:.0} us; worst qosnet TDP flow {}; {}-byte packets",
            2.0 * tf_us,
            fmt_ns(worst as f64),
            size
        );
        outln!("link loads (IP level, TDP run) — paper: {loads}");
        let ring = ["R1->R2", "R2->R3", "R3->R4", "R4->R1"];
        let chords = ["R1->R3", "R2->R4", "R3->R1", "R4->R2"];
        let show = |names: &[&str]| {
            names
                .iter()
                .filter_map(|n| {
                    tdp.results.link(n).map(|l| {
                        format!(
                            "{n} {:.1} Mb/s ({:.1}% of the wire)",
                            l.load_bps / 1e6,
                            l.utilization * 100.0
                        )
                    })
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        outln!("  ring:   {}", show(&ring));
        outln!("  chords: {}", show(&chords));
    }
    if let Some(dir) = &a.out {
        for r in &runs {
            let d = dir.join(&r.results.scenario);
            report::write_outputs(&d, &r.results, &r.buckets)?;
        }
        outln!("\nwrote results under {}", dir.display());
    }
    Ok(())
}
