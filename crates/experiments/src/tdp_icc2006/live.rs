//! `qosnet reproduce tdp --live`: each testbed scenario simulated and then
//! run live in a namespace lab (qosnet routers on AF_PACKET ports,
//! emulating the scenarios' router processing time as the simulator
//! models the paper's PCs), Tables I and II printed as paper, sim and live
//! side by side with the router thread's timer lateness.

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};
use qosnet_lab::labrun::{self, LiveOptions, TrafficSource};
use qosnet_scenario::results::Results;

use super::{paper_jitter, verdicts, SCENARIOS, TABLES};
use crate::report::{self, fmt_ns, lateness_line};
use crate::run;
use crate::{RunOptions, Verdicts};

pub(super) fn run(o: &RunOptions) -> Result<Verdicts> {
    let mut v = Verdicts::default();
    run::need_root("qosnet reproduce tdp --live")?;
    let sets = o.overrides.sets();
    let stop = run::signals()?;
    let mut runs = Vec::new();
    let mut used = Vec::new();
    for e in SCENARIOS {
        let sc = run::load(e, &sets)?;
        let paper = paper_jitter(&sc);
        eprintln!("{}: simulating...", sc.name);
        // The same schedule on both sides: the simulated routers stalled
        // together (a stall fault added to the sim's copy), the live
        // router thread's core taken by a busy loop.
        let mut sim_sc = sc.clone();
        let st = run::stall(&mut sim_sc, o.stall)?;
        let sim = run::simulate_stalled(sim_sc, st.as_ref())?.results;
        eprintln!("{}: running live ({} s)...", sc.name, sc.duration.as_secs_f64());
        let lo = LiveOptions {
            prefix: o.prefix.clone(),
            emulate_cpu: true,
            traffic: o.traffic.unwrap_or_else(|| TrafficSource::auto(&sc)),
            devices: o.devices.clone(),
            stalls: o.stall,
            ..LiveOptions::default()
        };
        let live = labrun::run(&sc, &lo, stop.clone()).map_err(|e| anyhow!("{}: {e}", sc.name))?;
        if let Some(dir) = &o.out {
            // One directory per run, whatever names overrides gave them.
            used.push(format!("{}-live", sc.name));
            let d = report::run_dirs(dir, used.iter().map(|s| s.as_str()));
            report::write_outputs(&d[d.len() - 1], &live.results, &live.buckets)?;
        }
        let tf = sc.tdp.as_ref().map_or(0, |t| t.tf.as_nanos());
        runs.push((paper, sim, live.results, tf));
    }
    for (title, artefact, fi, ti, _) in TABLES {
        let (fifo, tdp) = (&runs[fi], &runs[ti]);
        outln!("\n{title} ({} s per run)", tdp.2.duration_s);
        outln!(
            "{:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
            "flow",
            "paper FIFO",
            "sim FIFO",
            "live FIFO",
            "paper TDP",
            "sim TDP",
            "live TDP",
            "lost live",
            "lost live"
        );
        outln!(
            "{:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "FIFO",
            "TDP"
        );
        for (i, f) in tdp.2.flows.iter().enumerate() {
            let p =
                |m: &BTreeMap<String, f64>| m.get(&f.name).map(|v| format!("{v:.2} ms")).unwrap_or_default();
            let j = |r: &Results| {
                r.flows
                    .get(i)
                    .map(|x| fmt_ns(x.jitter_ns as f64))
                    .unwrap_or_default()
            };
            outln!(
                "{:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
                f.name,
                p(&fifo.0),
                j(&fifo.1),
                j(&fifo.2),
                p(&tdp.0),
                j(&tdp.1),
                j(&tdp.2),
                fifo.2.flows.get(i).map_or(0, |x| x.lost),
                f.lost
            );
        }
        let sp = |r: &Results, name: &str, k: &str| {
            r.extra
                .get("delay_spread")
                .and_then(|m| m.get(name))
                .and_then(|v| v.get(k))
                .and_then(|v| v.as_f64())
        };
        outln!(
            "live delay spreads ({}): {:<7} {:>14} {:>14} {:>11} {:>11}",
            tdp.2.extra.get("traffic").and_then(|v| v.as_str()).unwrap_or("?"),
            "flow",
            "FIFO p0.1-99.9",
            "TDP p0.1-99.9",
            "FIFO 2TF",
            "TDP 2TF"
        );
        for f in &tdp.2.flows {
            let ns = |r: &Results| sp(r, &f.name, "p001_p999_ns").map_or("-".into(), fmt_ns);
            let pc = |r: &Results| {
                sp(r, &f.name, "in_window").map_or("-".into(), |x| format!("{:.2}%", 100.0 * x))
            };
            outln!(
                "{:>23}{:<7} {:>14} {:>14} {:>11} {:>11}",
                "",
                f.name,
                ns(&fifo.2),
                ns(&tdp.2),
                pc(&fifo.2),
                pc(&tdp.2)
            );
        }
        let loss = |r: &Results| {
            let (s, l) = r
                .flows
                .iter()
                .fold((0u64, 0u64), |(s, l), f| (s + f.sent, l + f.lost));
            100.0 * l as f64 / s.max(1) as f64
        };
        outln!(
            "live loss: FIFO {:.3} %, TDP {:.3} % of packets sent in the measured window",
            loss(&fifo.2),
            loss(&tdp.2)
        );
        // The live runs' stalls are in their lateness lines below.
        for (what, r) in [("sim FIFO", &fifo.1), ("sim TDP", &tdp.1)] {
            if let Some(l) = report::stalls_line(r) {
                outln!("{what}: {l}");
            }
        }
        outln!(
            "live FIFO: {}",
            lateness_line(&fifo.2).replace('\n', "\n           ")
        );
        outln!(
            "live TDP:  {}",
            lateness_line(&tdp.2).replace('\n', "\n           ")
        );
        let mut t = Verdicts::default();
        verdicts::table(
            &mut t,
            &verdicts::TableRun {
                artefact,
                paper_fifo: &fifo.0,
                paper_tdp: &tdp.0,
                fifo: &fifo.2,
                tdp: &tdp.2,
                tf_ns: tdp.3,
            },
        );
        let why = too_noisy(&tdp.2, tdp.3);
        for r in &mut t.rows {
            r.untestable_if(why.clone());
        }
        v.extend(t);
    }
    v.note(
        "live rows are UNTESTABLE when the router thread or the tester ran a deadline later than one TF: \
         a packet then misses its reserved TF whatever the scheduler does",
    );
    outln!(
        "\nlive traffic: `tester` is qosnet's tester thread (exact send times on the CTR, kernel receive timestamps;\n\
         `--traffic kernel` for the hosts' UDP generators); 2TF = share of packets in the best window of 2 time frames."
    );
    outln!(
        "live runs emulate the scenarios' router processing time (uniform 2-20 us per packet, as the simulator\n\
         models the paper's PCs) and 100 Mb/s store-and-forward wires on veth; jitter = max - min one-way delay."
    );
    Ok(v)
}

/// Why a live TDP run cannot test the paper's claims: its router thread
/// or its tester was late by more than one TF at some deadline (measured
/// in the run), or `None`.
fn too_noisy(r: &Results, tf_ns: u64) -> Option<String> {
    let router = r
        .extra
        .get("timer_lateness")
        .and_then(|v| v.get("max_ns"))
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0);
    let tester = r
        .extra
        .get("tester")
        .and_then(|t| t.get("send_lateness"))
        .and_then(|v| v.get("max_ns"))
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0);
    let worst = router.max(tester);
    (worst > tf_ns as f64).then(|| {
        format!(
            "router late by up to {}, tester by up to {} (one TF is {})",
            fmt_ns(router),
            fmt_ns(tester),
            fmt_ns(tf_ns as f64)
        )
    })
}
