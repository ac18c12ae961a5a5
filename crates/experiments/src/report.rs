//! Human-readable reports: per-flow and per-link tables, paper columns,
//! live timing lines, and the files written to `--out DIR` (results.json,
//! flows.csv, delay.svg). Shared by every subcommand that prints results.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use qosnet_core::Duration;
use qosnet_io::clock::LatenessSummary;
use qosnet_scenario::results::Results;
use qosnet_scenario::Paper;

pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// The paper, if it has a per-flow column the flow table shows (jitter).
pub fn paper_column(paper: Option<&Paper>) -> Option<&Paper> {
    paper.filter(|p| p.metric == "jitter" && !p.values.is_empty())
}

/// The per-flow table, with the paper's value beside ours when known.
pub fn flow_table(r: &Results, paper: Option<&Paper>) -> String {
    let mut s = String::new();
    let pcol = paper_column(paper);
    let _ = write!(
        s,
        "{:<14} {:>9} {:>9} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "flow", "sent", "received", "lost", "delay min", "mean", "p99", "max", "jitter"
    );
    if let Some(p) = pcol {
        let _ = write!(s, " {:>13}", format!("paper [{}]", p.unit));
    }
    s.push('\n');
    for f in &r.flows {
        let d = &f.delay_ns;
        let _ = write!(
            s,
            "{:<14} {:>9} {:>9} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11}",
            if f.delay_kind == "rtt" {
                format!("{} (rtt)", f.name)
            } else {
                f.name.clone()
            },
            f.sent,
            f.received,
            f.lost,
            fmt_ns(d.min as f64),
            fmt_ns(d.mean),
            fmt_ns(d.p99 as f64),
            fmt_ns(d.max as f64),
            fmt_ns(f.jitter_ns as f64)
        );
        if let Some(v) = pcol.and_then(|p| p.values.get(&f.name)) {
            let _ = write!(s, " {:>13}", format!("{v:.2}"));
        }
        s.push('\n');
    }
    s
}

/// Links with traffic, their IP-level load and wire utilisation.
pub fn link_table(r: &Results) -> String {
    let mut s = format!(
        "{:<14} {:>6} {:>11} {:>8} {:>8} {:>8}\n",
        "link", "sched", "load Mb/s", "util %", "drops", "queued"
    );
    for l in r.links.iter().filter(|l| l.packets > 0 || l.drops > 0) {
        let _ = writeln!(
            s,
            "{:<14} {:>6} {:>11.2} {:>8.2} {:>8} {:>8}",
            l.name,
            l.scheduler,
            l.load_bps / 1e6,
            l.utilization * 100.0,
            l.drops,
            l.queued_at_end
        );
    }
    s
}

pub fn engine_line(r: &Results) -> String {
    let e = &r.engine;
    format!(
        "engine: {} events in {:.3} s wall for {:.3} s simulated: {:.2} M events/s, {:.1} simulated s per wall s, peak queue {}",
        e.events,
        e.wall_s,
        e.sim_s,
        e.events_per_wall_s / 1e6,
        e.sim_s_per_wall_s,
        e.peak_event_queue
    )
}

/// Make sure results can be written under `dir` before a run spends its
/// time: create it and write (then remove) a probe file, so an unwritable
/// `--out` fails in a second, not after the whole run.
pub fn check_out_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--out {}: cannot create the directory", dir.display()))?;
    let probe = dir.join(".qosnet-write-test");
    std::fs::write(&probe, b"")
        .with_context(|| format!("--out {}: cannot write into the directory", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// One output directory per run under `base`, named after each run's
/// scenario: a name seen before (two runs whose scenarios share a name,
/// e.g. after `--set scenario.name=x`) gets `-2`, `-3`, ... so no run
/// overwrites another's results. Scenario names are plain file names
/// (the loader refuses separators, `..` and control characters).
pub fn run_dirs<'a>(base: &Path, names: impl IntoIterator<Item = &'a str>) -> Vec<std::path::PathBuf> {
    let mut used = std::collections::HashSet::new();
    names
        .into_iter()
        .map(|n| {
            let mut k = 1;
            let mut cand = n.to_string();
            while !used.insert(cand.clone()) {
                k += 1;
                cand = format!("{n}-{k}");
            }
            base.join(cand)
        })
        .collect()
}

/// `DIR/verdicts.json`: an experiment's verdict rows, their summary and
/// notes (the same rows `qosnet reproduce` prints).
pub fn write_verdicts(dir: &Path, experiment: &str, mode: &str, v: &crate::Verdicts) -> Result<()> {
    let doc = serde_json::json!({
        "experiment": experiment,
        "mode": mode,
        "summary": v.summary(),
        "rows": v.rows,
        "notes": v.notes,
    });
    let path = dir.join("verdicts.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", path.display()))
}

pub fn write_outputs(dir: &Path, r: &Results, buckets: &[(String, Vec<(u64, u64)>)]) -> Result<()> {
    write_outputs_with_paper(dir, r, buckets, None)
}

/// [`write_outputs`], with the paper's per-flow figures (the scenario's
/// `[paper]` column) shown beside qosnet's in the delay plot's legend.
pub fn write_outputs_with_paper(
    dir: &Path,
    r: &Results,
    buckets: &[(String, Vec<(u64, u64)>)],
    paper: Option<&Paper>,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating output directory {}", dir.display()))?;
    let json = serde_json::to_string_pretty(r)?;
    std::fs::write(dir.join("results.json"), json).context("writing results.json")?;
    let mut w = csv::Writer::from_path(dir.join("flows.csv")).context("writing flows.csv")?;
    w.write_record([
        "flow",
        "sent",
        "received",
        "lost",
        "reordered",
        "delay_min_ns",
        "delay_mean_ns",
        "delay_p50_ns",
        "delay_p99_ns",
        "delay_p999_ns",
        "delay_max_ns",
        "jitter_ns",
        "throughput_bps",
    ])?;
    for f in &r.flows {
        let d = &f.delay_ns;
        w.write_record([
            f.name.clone(),
            f.sent.to_string(),
            f.received.to_string(),
            f.lost.to_string(),
            f.reordered.to_string(),
            d.min.to_string(),
            format!("{:.1}", d.mean),
            d.p50.to_string(),
            d.p99.to_string(),
            d.p999.to_string(),
            d.max.to_string(),
            f.jitter_ns.to_string(),
            format!("{:.0}", f.throughput_bps),
        ])?;
    }
    w.flush()?;
    let pcol = paper_column(paper);
    let flows: Vec<crate::plot::DelayFlow> = buckets
        .iter()
        .map(|(name, b)| {
            let f = r.flows.iter().find(|f| &f.name == name);
            crate::plot::DelayFlow {
                name,
                buckets: b,
                sent: f.map_or(0, |f| f.sent),
                lost: f.map_or(0, |f| f.lost),
                jitter_ns: f.map_or(0, |f| f.jitter_ns),
                p99_ns: f.map_or(0, |f| f.delay_ns.p99),
                paper: pcol.and_then(|p| {
                    p.values
                        .get(name)
                        .map(|v| (p.metric.as_str(), *v, p.unit.as_str()))
                }),
            }
        })
        .collect();
    crate::plot::delay_cdf(&dir.join("delay.svg"), &r.scenario, &flows)?;
    Ok(())
}

/// The injected stalls of a run (`--stall LEN/EVERY`), if any: live, how
/// many the stall thread made on the router thread's CPU and how late they
/// started; simulated, how many stalls the routers took together.
/// The `stalls` section of a simulated run with `--stall`: the schedule,
/// the nodes stalled together, and how many stalls they took (the
/// engine's count, so an interrupted run shows fewer; a scenario's own
/// stall faults of those nodes count too), in the live stall thread's
/// terms, so [`stalls_line`] prints sim and live alike.
pub fn sim_stalls_extra(
    r: &Results,
    spec: &qosnet_scenario::stall::StallSpec,
    nodes: &[usize],
    names: &[String],
) -> serde_json::Value {
    let stalled: Vec<&str> = nodes.iter().map(|&i| names[i].as_str()).collect();
    let count = r
        .nodes
        .iter()
        .filter(|n| stalled.contains(&n.name.as_str()))
        .filter_map(|n| n.counters.get("stalls").copied())
        .max()
        .unwrap_or(0);
    serde_json::json!({
        "count": count,
        "len_ns": spec.len.as_nanos(),
        "every_ns": spec.every.as_nanos(),
        "busy_ns": count * spec.len.as_nanos(),
        "nodes": stalled,
    })
}

pub fn stalls_line(r: &Results) -> Option<String> {
    let t = r.extra.get("stalls")?;
    let f = |k: &str| t.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let mut s = format!(
        "injected stalls: {} of {} every {}",
        f("count") as u64,
        fmt_ns(f("len_ns")),
        fmt_ns(f("every_ns")),
    );
    if let Some(nodes) = t.get("nodes").and_then(|v| v.as_array()) {
        let n: Vec<&str> = nodes.iter().filter_map(|x| x.as_str()).collect();
        s += &format!(" on {} together (simulated)", n.join(", "));
    } else {
        s += &format!(
            " on CPU {} (start late by at most {})",
            f("cpu") as u64,
            fmt_ns(f("start_late_max_ns"))
        );
    }
    if let Some(n) = t
        .get("notes")
        .and_then(|v| v.as_array())
        .filter(|n| !n.is_empty())
    {
        let n: Vec<&str> = n.iter().filter_map(|x| x.as_str()).collect();
        s += &format!(" ({})", n.join("; "));
    }
    Some(s)
}

/// The live lateness lines printed beside a lab's results: the router
/// thread's timer lateness and, when measured, the machine's timer noise.
pub fn lateness_line(r: &Results) -> String {
    let get = |k: &str, f: &str| {
        r.extra
            .get(k)
            .and_then(|v| v.get(f))
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0)
    };
    let mut s = format!(
        "router timer lateness: p50 {}, p99 {}, p99.9 {}, max {} over {} deadlines",
        fmt_ns(get("timer_lateness", "p50_ns")),
        fmt_ns(get("timer_lateness", "p99_ns")),
        fmt_ns(get("timer_lateness", "p999_ns")),
        fmt_ns(get("timer_lateness", "max_ns")),
        get("timer_lateness", "count") as u64
    );
    if let Some(t) = r.extra.get("tester").and_then(|t| t.get("send_lateness")) {
        let f = |k: &str| t.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
        s += &format!(
            "\ntester send lateness: p50 {}, p99 {}, p99.9 {}, max {} over {} packets",
            fmt_ns(f("p50_ns")),
            fmt_ns(f("p99_ns")),
            fmt_ns(f("p999_ns")),
            fmt_ns(f("max_ns")),
            f("count") as u64
        );
    }
    if let Some(l) = stalls_line(r) {
        s += "\n";
        s += &l;
    }
    if let Some(c) = r.extra.get("router_thread_cpu_s").and_then(|v| v.as_f64()) {
        s += &format!(
            "\nrouter thread CPU: {:.0} % of {:.2} s",
            100.0 * c / r.engine.wall_s.max(1e-9),
            r.engine.wall_s
        );
    }
    if let Some(v) = r.extra.get("realtime").and_then(|v| v.as_array()) {
        let notes: Vec<&str> = v.iter().filter_map(|x| x.as_str()).collect();
        s += &format!("\nplacement: {}", notes.join("; "));
    }
    if let Some(n) = r.extra.get("timer_noise").and_then(|n| n.get("wait_lateness")) {
        let f = |k: &str| n.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
        s += &format!(
            "\nmachine timer noise (before the run): wait_until p50 {}, p99 {}, max {}",
            fmt_ns(f("p50_ns")),
            fmt_ns(f("p99_ns")),
            fmt_ns(f("max_ns"))
        );
    }
    s
}

/// Per-flow delay spreads of a run with a TDP section (`extra.delay_spread`):
/// max − min (the paper's jitter), p0.1–p99.9, and the share of packets in
/// the best 2-TF window; empty if the run has none.
pub fn spread_table(r: &Results) -> String {
    let Some(m) = r.extra.get("delay_spread").and_then(|v| v.as_object()) else {
        return String::new();
    };
    let mut s = format!(
        "{:<8} {:>9} {:>12} {:>14} {:>12}\n",
        "flow", "packets", "max - min", "p0.1 - p99.9", "in 2 TFs"
    );
    for f in &r.flows {
        let Some(v) = m.get(&f.name) else { continue };
        let g = |k: &str| v.get(k).and_then(|x| x.as_f64()).unwrap_or(0.0);
        s += &format!(
            "{:<8} {:>9} {:>12} {:>14} {:>11.2}%\n",
            f.name,
            g("packets") as u64,
            fmt_ns(g("max_min_ns")),
            fmt_ns(g("p001_p999_ns")),
            100.0 * g("in_window")
        );
    }
    s
}

/// A lateness summary in one phrase: "p50 …, p99 …, p99.9 …, max …".
pub fn lateness_text(l: &LatenessSummary) -> String {
    format!(
        "p50 {}, p99 {}, p99.9 {}, max {}",
        Duration(l.p50_ns),
        Duration(l.p99_ns),
        Duration(l.p999_ns),
        Duration(l.max_ns)
    )
}

/// RETHER stations' sessions and NRT access (`nodes[].details`), if the
/// run has any: per session units sent and received, late units, RT
/// visit intervals; per station NRT revisit interval and switch times;
/// per bridge (§2.5) what it relayed and each of its segments' stations.
pub fn rether_table(r: &Results) -> String {
    let mut s = String::new();
    let head =
        "RETHER stations: RT sessions (visit interval in ms) and NRT access (mean ms between NRT visits)\n";
    for n in &r.nodes {
        let Some(d) = &n.details else { continue };
        if d.get("station_id").is_some() {
            if s.is_empty() {
                s.push_str(head);
            }
            station_lines(&mut s, &n.name, d, "  ");
        } else if let Some(ports) = d.get("ports").filter(|_| d.get("bridge").is_some()) {
            if s.is_empty() {
                s.push_str(head);
            }
            let _ = writeln!(
                s,
                "  {} (bridge): relayed {} RT units and {} ordinary frames, flooded {}, {} for nobody behind it",
                n.name, d["rt_relayed"], d["nrt_relayed"], d["flooded"], d["unknown_dst"]
            );
            for p in ports.as_array().into_iter().flatten() {
                let name = format!("{} port {}", n.name, p["port"]);
                station_lines(&mut s, &name, &p["station"], "    ");
            }
        }
    }
    s
}

fn station_lines(s: &mut String, name: &str, d: &serde_json::Value, indent: &str) {
    let ms = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |x| format!("{:.3}", x / 1e6));
    let nrt = &d["nrt_visit_interval"];
    let switch: Vec<String> = d["switch_times_ns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| format!("{} ms", ms(v)))
        .collect();
    let _ = writeln!(
        s,
        "{indent}{} (id {}, RETHER {}): NRT access {} ms over {} visits{}",
        name,
        d["station_id"],
        d["rether"].as_str().unwrap_or("?"),
        ms(&nrt["mean_ns"]),
        nrt["count"],
        if switch.is_empty() {
            String::new()
        } else {
            format!(", switched to RETHER in {}", switch.join(", "))
        }
    );
    for x in d["sessions"].as_array().into_iter().flatten() {
        if x["role"] == "sender" {
            let iv = &x["rt_visit_interval"];
            let state = match (x.get("admitted_at_ns"), x.get("refused")) {
                (Some(_), _) => "admitted".to_string(),
                (None, Some(r)) => format!("refused: {}", r.as_str().unwrap_or("")),
                _ => "not admitted".to_string(),
            };
            let _ = writeln!(
                s,
                "{indent}  send {} ({}, {} B/TRT): {} units sent of {}, RT visits {} apart (min {} max {}), {}",
                x["flow"].as_str().unwrap_or(""),
                x["session"].as_str().unwrap_or(""),
                x["bytes_per_trt"],
                x["units_sent"],
                x["units_generated"],
                ms(&iv["mean_ns"]),
                ms(&iv["min_ns"]),
                ms(&iv["max_ns"]),
                state
            );
        } else {
            let _ = writeln!(
                s,
                "{indent}  recv {} ({}): {} units, {} incomplete, {} late of {} in the window ({}%), worst {} ms after expected",
                x["flow"].as_str().unwrap_or(""),
                x["session"].as_str().unwrap_or(""),
                x["units_received"],
                x["units_incomplete"],
                x["late_units"],
                x["units_in_window"],
                x["late_percent"],
                ms(&x["max_lateness_ns"])
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs whose scenarios share a name get distinct directories.
    #[test]
    fn run_dirs_are_distinct() {
        let d = run_dirs(Path::new("out"), ["x", "x", "y", "x"]);
        let names: Vec<String> = d.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(names, ["out/x", "out/x-2", "out/y", "out/x-3"]);
    }

    #[test]
    fn out_dir_is_checked_writable() {
        let t = tempfile::tempdir().unwrap();
        assert!(check_out_dir(&t.path().join("a/b")).is_ok());
        std::fs::write(t.path().join("f"), "").unwrap();
        let e = check_out_dir(&t.path().join("f/sub")).unwrap_err();
        assert!(format!("{e:#}").contains("--out"), "{e:#}");
    }

    /// The live stall thread's section and the simulator's `--stall` one
    /// print on one line each, in the same terms.
    #[test]
    fn stalls_line_reads_live_and_simulated_runs() {
        let mut r = Results::default();
        assert_eq!(stalls_line(&r), None);
        r.extra.insert(
            "stalls".into(),
            serde_json::json!({"cpu": 0, "count": 24, "len_ns": 300_000, "every_ns": 200_000_000,
                "busy_ns": 7_200_000, "start_late_max_ns": 12_000, "notes": ["not SCHED_FIFO: x"]}),
        );
        assert_eq!(
            stalls_line(&r).unwrap(),
            "injected stalls: 24 of 300.0 us every 200.000 ms on CPU 0 (start late by at most 12.0 us) (not SCHED_FIFO: x)"
        );
        assert!(lateness_line(&r).contains("\ninjected stalls: 24 of"));
        r.extra.insert(
            "stalls".into(),
            serde_json::json!({"count": 3, "len_ns": 1_000_000, "every_ns": 500_000_000,
                "busy_ns": 3_000_000, "nodes": ["R1", "R2"]}),
        );
        assert_eq!(
            stalls_line(&r).unwrap(),
            "injected stalls: 3 of 1.000 ms every 500.000 ms on R1, R2 together (simulated)"
        );
    }
}
