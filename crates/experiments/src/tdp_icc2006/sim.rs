//! `qosnet reproduce tdp`: the four testbed scenarios simulated, Tables I
//! and II printed as the paper's FIFO and TDP jitter beside qosnet's, with
//! the TDP bound (jitter < 2 T_f, ICC 2006 §III) and the link loads of
//! §IV-B.

use anyhow::{anyhow, Result};
use qosnet_scenario::{Paper, PaperCell};

use super::{paper_jitter, verdicts, SCENARIOS, TABLES};
use crate::report::{self, fmt_ns};
use crate::run::{self, Job, SimRun};
use crate::{RunOptions, Verdicts};

pub(super) fn run(o: &RunOptions) -> Result<Verdicts> {
    let mut v = Verdicts::default();
    let sets = o.overrides.sets();
    eprintln!(
        "running {} simulations of the ICC 2006 TDP testbed...",
        SCENARIOS.len()
    );
    let jobs: Vec<Job<SimRun>> = SCENARIOS
        .iter()
        .map(|e| Box::new(|| run::sim_stalled(e, &sets, o.stall)) as Job<SimRun>)
        .collect();
    let runs = run::parallel(jobs)?;
    for (table, artefact, fi, ti, size) in TABLES {
        let (fifo, tdp) = (&runs[fi], &runs[ti]);
        let (pf, pt) = (paper_jitter(&fifo.scenario), paper_jitter(&tdp.scenario));
        outln!(
            "\n{table} ({} s simulated per run, seed {})",
            tdp.results.duration_s,
            tdp.results.seed
        );
        for (what, r) in [("FIFO", &fifo.results), ("TDP", &tdp.results)] {
            if let Some(l) = report::stalls_line(r) {
                outln!("{what} run: {l}");
            }
        }
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
            let paper = |m: &std::collections::BTreeMap<String, f64>| {
                m.get(&f.name).map(|v| format!("{v:.2} ms")).unwrap_or_default()
            };
            outln!(
                "{:<8} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
                f.name,
                paper(&pf),
                fmt_ns(ff.jitter_ns as f64),
                paper(&pt),
                fmt_ns(f.jitter_ns as f64),
                ff.lost,
                f.lost
            );
        }
        let tf = tdp
            .scenario
            .tdp
            .as_ref()
            .ok_or_else(|| anyhow!("{}: no [tdp] section", tdp.scenario.source))?
            .tf;
        let worst = tdp.results.flows.iter().map(|f| f.jitter_ns).max().unwrap_or(0);
        outln!(
            "TDP bound: jitter < 2 TF = {:.0} us; worst qosnet TDP flow {}; {}-byte packets{}",
            2.0 * tf.as_nanos() as f64 / 1e3,
            fmt_ns(worst as f64),
            size,
            if o.stall.is_some() {
                " (the bound is for routers that keep time; these were stalled)"
            } else {
                ""
            }
        );
        outln!(
            "link loads (IP level, TDP run) — paper: {}",
            paper_loads(tdp.scenario.paper.as_ref()).map_err(|e| anyhow!("{}: {e}", tdp.scenario.source))?
        );
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
        verdicts::table(
            &mut v,
            &verdicts::TableRun {
                artefact,
                paper_fifo: &pf,
                paper_tdp: &pt,
                fifo: &fifo.results,
                tdp: &tdp.results,
                tf_ns: tf.as_nanos(),
            },
        );
        if o.stall.is_some() {
            v.note("the routers were stalled on purpose (--stall): the paper's claims are for routers that keep time");
        }
    }
    if let Some(dir) = &o.out {
        let dirs = report::run_dirs(dir, runs.iter().map(|r| r.results.scenario.as_str()));
        for (r, d) in runs.iter().zip(&dirs) {
            report::write_outputs_with_paper(d, &r.results, &r.buckets, r.scenario.paper.as_ref())?;
        }
        outln!("\nwrote results under {}", dir.display());
    }
    Ok(v)
}

/// §IV-B's link loads from the scenario's `[paper]` table `link-loads`
/// (rows: links, load), in the paper's words: consecutive rows with the
/// same load share one phrase ("32 Mb/s on R1->R3 and R2->R4").
pub(super) fn paper_loads(p: Option<&Paper>) -> Result<String, String> {
    let t = p
        .and_then(|p| p.table("link-loads"))
        .ok_or("no [[paper.table]] named link-loads")?;
    let (kc, lc) = match (t.column("links"), t.column("load")) {
        (Some(k), Some(l)) => (k, l),
        _ => return Err("table link-loads needs columns `links` and `load`".into()),
    };
    let unit = t.units.get(lc).map(String::as_str).unwrap_or("");
    let mut groups: Vec<(f64, Vec<&str>)> = Vec::new();
    for r in &t.rows {
        let (Some(PaperCell::Text(k)), Some(PaperCell::Number(v))) = (r.get(kc), r.get(lc)) else {
            return Err("table link-loads: each row is [links, load in numbers]".into());
        };
        match groups.last_mut() {
            Some((g, ks)) if *g == *v => ks.push(k),
            _ => groups.push((*v, vec![k])),
        }
    }
    Ok(groups
        .iter()
        .map(|(v, ks)| format!("{v} {unit} on {}", ks.join(" and ")))
        .collect::<Vec<_>>()
        .join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's numbers are data in the scenarios: every one of the four
    /// has its per-flow jitter column for its five flows, and the TDP runs
    /// the link loads, phrased as §IV-B phrases them.
    #[test]
    fn paper_numbers_load_from_the_scenarios() {
        for e in SCENARIOS {
            let sc = run::load(e, &[]).unwrap();
            let p = sc.paper.as_ref().unwrap();
            assert_eq!((p.metric.as_str(), p.unit.as_str()), ("jitter", "ms"));
            for f in &sc.flows {
                assert!(p.values[&f.name] > 0.0, "{}: {}", e.path, f.name);
            }
        }
        let loads = |i: usize| paper_loads(run::load(&SCENARIOS[i], &[]).unwrap().paper.as_ref());
        assert_eq!(
            loads(1).unwrap(),
            "96 Mb/s on ring links, 32 Mb/s on R1->R3 and R2->R4"
        );
        assert_eq!(
            loads(3).unwrap(),
            "96 Mb/s on ring links, 32 Mb/s on R1->R3, 48 Mb/s on R2->R4"
        );
        assert!(loads(0).is_err());
    }
}
