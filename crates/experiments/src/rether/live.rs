//! `qosnet reproduce rether --live`: RETHER (seed 002) on real frames.
//! Figure 7 of the paper compares its simulator with its implementation;
//! here the same scenario (`scenarios/rether/live.toml`) runs in qosnet's
//! simulator and in a namespace lab — one `qosnet node` process per
//! station, its port a veth on the segment's Linux bridge, its host's IP
//! stack on a TAP — and the NRT delay (§4.1: the time between a station's
//! NRT token visits) and the RT figures are printed side by side. Table 2
//! (token passing overhead, 247 µs on the paper's i486) gets qosnet's live
//! per-hop times beside it: inside a station (kernel receive timestamp of
//! a token it has nothing to send on → the pass handed to the NIC) and on
//! the wire (token frame → the next holder's pass, by a third station's
//! kernel timestamps), with the machine's timer noise measured in the
//! same run; and the live mode-switch time (CSMA → RETHER, §4.3).

use anyhow::{anyhow, Result};
use qosnet_io::rundir::RunDir;
use qosnet_lab::labrun::{self, LiveOptions, NodeProcesses};
use qosnet_scenario::results::Results;
use serde_json::Value;

use crate::run;
use crate::RunOptions;

/// A directory removed when dropped.
fn details(r: &Results) -> Vec<(&str, &Value)> {
    r.nodes
        .iter()
        .filter_map(|n| n.details.as_ref().map(|d| (n.name.as_str(), d)))
        .collect()
}

fn us(v: &Value) -> String {
    match v.as_f64() {
        Some(x) => format!("{:.1}", x / 1e3),
        None => "-".into(),
    }
}

fn ms(v: &Value) -> String {
    match v.as_f64() {
        Some(x) => format!("{:.3}", x / 1e6),
        None => "-".into(),
    }
}

/// The median over stations of a token-hop figure (`key` of `series`).
fn median(r: &Results, series: &str, key: &str) -> Option<f64> {
    let mut v: Vec<f64> = details(r)
        .iter()
        .filter(|(_, d)| d[series]["count"].as_u64().unwrap_or(0) > 0)
        .filter_map(|(_, d)| d[series][key].as_f64())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

pub(super) fn run(o: &RunOptions) -> Result<()> {
    run::need_root("qosnet reproduce rether --live")?;
    let e = &super::SCENARIOS[2];
    let sets = o.overrides.sets();
    let stop = run::signals()?;
    eprintln!("Figure 7: {} in qosnet sim...", e.path);
    let sim = run::sim(e, &sets)?;
    let sc = run::load(e, &sets)?;
    // Each station process loads the scenario itself.
    // A private run directory (never a predictable path in /tmp): root's
    // station processes load this file.
    let dir = RunDir::create("rether-live").map_err(|e| anyhow!("run directory: {e}"))?;
    let file = dir
        .write_new("scenario.toml", e.text.as_bytes())
        .map_err(|e| anyhow!("{e}"))?;
    let lo = LiveOptions {
        prefix: o.prefix.clone(),
        verbose: true,
        processes: Some(NodeProcesses {
            exe: std::env::current_exe().map_err(|e| anyhow!("finding the qosnet binary: {e}"))?,
            scenario: file,
            sets: sets.clone(),
        }),
        ..LiveOptions::default()
    };
    eprintln!(
        "... and live (one qosnet node process per station, lab {}-*)",
        o.prefix
    );
    let live = labrun::run(&sc, &lo, stop).map_err(|e| anyhow!("{}: {e}", sc.name))?;
    let (s, l) = (&sim.results, &live.results);
    if let Some(out) = &o.out {
        let d = out.join("rether-live");
        std::fs::create_dir_all(&d).map_err(|e| anyhow!("creating {}: {e}", d.display()))?;
        for (name, r) in [("sim.json", s), ("live.json", l)] {
            let p = d.join(name);
            std::fs::write(&p, serde_json::to_string_pretty(r)?)
                .map_err(|e| anyhow!("{}: {e}", p.display()))?;
            outln!("wrote {}", p.display());
        }
        let d = out.join("rether");
        std::fs::create_dir_all(&d).map_err(|e| anyhow!("creating {}: {e}", d.display()))?;
        let p = d.join("figure-7.svg");
        let (title, x, y) = super::FIGURE7;
        crate::plot::lines(&p, title, x, y, &super::figure7_curves(s, Some(l)))?;
        outln!("wrote {}", p.display());
    }

    outln!(
        "Figure 7: simulation vs implementation, `{}` (qosnet sim | qosnet live)",
        e.path
    );
    outln!("  paper: its simulator and its implementation gave close NRT delays; here both are qosnet's");
    outln!(
        "  {:<8} {:>22} {:>22} {:>24}",
        "station",
        "NRT delay ms (sim)",
        "NRT delay ms (live)",
        "NRT visits (sim | live)"
    );
    let (ds, dl) = (details(s), details(l));
    for (name, d) in &ds {
        let lv = dl.iter().find(|(n, _)| n == name).map(|(_, d)| *d);
        let iv = |d: Option<&Value>, k: &str| d.map_or(Value::Null, |d| d["nrt_visit_interval"][k].clone());
        outln!(
            "  {:<8} {:>22} {:>22} {:>13} | {:<9}",
            name,
            ms(&iv(Some(d), "mean_ns")),
            ms(&iv(lv, "mean_ns")),
            iv(Some(d), "count"),
            iv(lv, "count")
        );
    }
    for (fs, fl) in s.flows.iter().zip(&l.flows) {
        outln!(
            "  flow {:<6} received {:>5} | {:<5} of sent {:>5} | {:<5}  delay mean {:>9} | {:<9} ms  p99 {:>9} | {:<9} ms",
            fs.name,
            fs.received,
            fl.received,
            fs.sent,
            fl.sent,
            format!("{:.3}", fs.delay_ns.mean / 1e6),
            format!("{:.3}", fl.delay_ns.mean / 1e6),
            format!("{:.3}", fs.delay_ns.p99 as f64 / 1e6),
            format!("{:.3}", fl.delay_ns.p99 as f64 / 1e6),
        );
    }
    let rt = |d: &[(&str, &Value)]| {
        d.iter()
            .filter_map(|(_, d)| d["sessions"].as_array())
            .flatten()
            .find(|x| x["role"] == "sender")
            .map(|x| x["rt_visit_interval"].clone())
            .unwrap_or(Value::Null)
    };
    let (rs, rl) = (rt(&ds), rt(&dl));
    outln!(
        "  RT visit interval ms: sim mean {} std {} (min {} max {}) | live mean {} std {} (min {} max {})",
        ms(&rs["mean_ns"]),
        ms(&rs["std_ns"]),
        ms(&rs["min_ns"]),
        ms(&rs["max_ns"]),
        ms(&rl["mean_ns"]),
        ms(&rl["std_ns"]),
        ms(&rl["min_ns"]),
        ms(&rl["max_ns"])
    );
    outln!();

    outln!(
        "Table 2: token passing overhead per hop, paper (i486, 10 Mb/s) beside qosnet live (this machine)"
    );
    // The paper's breakdown is pinned in the two-MPEG scenario's [paper].
    let paper = run::load(&super::SCENARIOS[1], &[])?.paper;
    if let Some(t) = paper.as_ref().and_then(|p| p.table("table-2")) {
        for k in t.keys() {
            if let Some(qosnet_scenario::PaperCell::Number(v)) = t.get(k, "us") {
                outln!("  paper  {:<80} {:>6} us", k, v);
            }
        }
    } else {
        outln!("  paper total 247 us (Table 2)");
    }
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.1}", v / 1e3));
    outln!(
        "  qosnet live, in the station (token rx timestamp -> pass to NIC, idle NRT visit): p50 {} us, p99 {} us (median over stations)",
        f(median(l, "token_hop_local", "p50_ns")),
        f(median(l, "token_hop_local", "p99_ns"))
    );
    outln!(
        "  qosnet live, on the wire (token frame -> next holder's pass, kernel timestamps, incl. emulated wire time): p50 {} us, p99 {} us",
        f(median(l, "token_hop_wire", "p50_ns")),
        f(median(l, "token_hop_wire", "p99_ns"))
    );
    let switch: Vec<String> = dl
        .iter()
        .filter_map(|(_, d)| d["switch_times_ns"].as_array())
        .flatten()
        .map(|v| format!("{} us", us(v)))
        .collect();
    let switch_sim: Vec<String> = ds
        .iter()
        .filter_map(|(_, d)| d["switch_times_ns"].as_array())
        .flatten()
        .map(|v| format!("{} us", us(v)))
        .collect();
    outln!(
        "  mode switch CSMA -> RETHER (Switch-to-RETHER to token created): live {} | sim {}",
        switch.join(", "),
        switch_sim.join(", ")
    );
    let n = &l.extra.get("timer_noise").cloned().unwrap_or(Value::Null);
    outln!(
        "  this machine's timer noise in the same run: wait_until lateness p50 {} us, p99 {} us, max {} us; sleep overshoot p50 {} us",
        us(&n["wait_lateness"]["p50_ns"]),
        us(&n["wait_lateness"]["p99_ns"]),
        us(&n["wait_lateness"]["max_ns"]),
        us(&n["sleep_overshoot"]["p50_ns"])
    );
    let tl = &l.extra.get("timer_lateness").cloned().unwrap_or(Value::Null);
    outln!(
        "  the stations' own deadline lateness (worst process): p50 {} us, p99 {} us",
        us(&tl["p50_ns"]),
        us(&tl["p99_ns"])
    );
    Ok(())
}
