//! `qosnet reproduce rether`: the paper's tables and figures in the
//! simulator, the paper's numbers (its scenarios' `[paper]` tables) beside
//! qosnet's. Table 1 runs the embedded scenario with overrides; the
//! figures sweep station counts, session sizes and hardware, so their
//! scenarios are written here from one template (`bus`) and loaded like
//! any file. `--out DIR` writes `DIR/rether/figure-N.svg`.

use std::fmt::Write as _;

use anyhow::{anyhow, Result};
use qosnet_scenario::results::Results;
use qosnet_scenario::{load_str, PaperCell};
use serde_json::Value;

use crate::plot::{lines, Curve};
use crate::run::{self, Job};
use crate::RunOptions;

/// A flow of a generated scenario.
struct F {
    from: usize,
    to: usize,
    size: u32,
    rate: String,
    rt: bool,
    start_us: u64,
}

impl F {
    /// An RT session of `kb_per_frame` kilobytes per 33.33 ms frame, sent
    /// as units of at most 8000 bytes (flows carry at most 9000).
    fn session(from: usize, to: usize, bytes_per_frame: u32, start_us: u64) -> F {
        let units = bytes_per_frame.div_ceil(8000).max(1);
        F {
            from,
            to,
            size: bytes_per_frame / units,
            rate: format!("{}pps", 30 * units),
            rt: true,
            start_us,
        }
    }
    fn mpeg(from: usize, to: usize, start_us: u64) -> F {
        F {
            from,
            to,
            size: 6400,
            rate: "30pps".into(),
            rt: true,
            start_us,
        }
    }
    fn nrt(from: usize, to: usize, size: u32, rate: &str) -> F {
        F {
            from,
            to,
            size,
            rate: rate.into(),
            rt: false,
            start_us: 0,
        }
    }
}

/// A RETHER segment of `n` stations (`s1`..`sN`) at `capacity`, with
/// `rether` lines in `[rether]`.
fn bus(name: &str, n: usize, capacity: &str, rether: &str, flows: &[F], secs: f64, seed: u64) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "[scenario]\nname = \"{name}\"\nduration = \"{secs}s\"\nwarmup = \"300ms\"\nseed = {seed}\n\n[rether]\n{rether}\n"
    );
    for i in 1..=n {
        let _ = writeln!(t, "[[node]]\nname = \"s{i}\"\nkind = \"rether\"\n");
    }
    let names: Vec<String> = (1..=n).map(|i| format!("\"s{i}\"")).collect();
    let _ = writeln!(
        t,
        "[[segment]]\nname = \"bus\"\nnodes = [{}]\ncapacity = \"{capacity}\"\npropagation = \"5us\"\n",
        names.join(", ")
    );
    for (k, f) in flows.iter().enumerate() {
        let pattern = if f.rt { "cbr" } else { "poisson" };
        let _ = writeln!(
            t,
            "[[flow]]\nname = \"f{k}\"\nfrom = \"s{}\"\nto = \"s{}\"\nsize = {}\nrate = \"{}\"\npattern = \"{pattern}\"\nrt = {}\nstart = \"{}us\"\n",
            f.from, f.to, f.size, f.rate, f.rt, f.start_us
        );
    }
    t
}

fn simulate(name: &str, text: String, sets: &[String]) -> Result<Results> {
    let sc = load_str(name, &text, sets).map_err(|e| anyhow!("{e}"))?;
    Ok(run::simulate(sc)?.results)
}

/// Every station's details.
fn details(r: &Results) -> Vec<&Value> {
    r.nodes.iter().filter_map(|n| n.details.as_ref()).collect()
}

fn sessions<'a>(r: &'a Results, role: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    details(r)
        .into_iter()
        .filter_map(|d| d["sessions"].as_array())
        .flatten()
        .filter(move |s| s["role"] == role)
}

/// Mean over stations of their mean NRT revisit interval, in ms.
fn nrt_delay_ms(r: &Results) -> f64 {
    let v: Vec<f64> = details(r)
        .iter()
        .filter(|d| d["nrt_visit_interval"]["count"].as_u64().unwrap_or(0) > 0)
        .filter_map(|d| d["nrt_visit_interval"]["mean_ns"].as_f64())
        .collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64 / 1e6
    }
}

fn admitted(r: &Results) -> usize {
    sessions(r, "sender")
        .filter(|s| s.get("admitted_at_ns").is_some())
        .count()
}

/// Whether every admitted session's RT visits came exactly one TRT apart
/// (to 1 µs) and no received unit was late.
fn guarantees_held(r: &Results, trt_ns: f64) -> bool {
    let visits_ok = sessions(r, "sender")
        .filter(|s| s.get("admitted_at_ns").is_some())
        .all(|s| {
            let iv = &s["rt_visit_interval"];
            iv["count"].as_u64().unwrap_or(0) == 0
                || ((iv["min_ns"].as_f64().unwrap_or(0.0) - trt_ns).abs() < 1e3
                    && (iv["max_ns"].as_f64().unwrap_or(0.0) - trt_ns).abs() < 1e3)
        });
    visits_ok && sessions(r, "receiver").all(|s| s["late_units"].as_u64() == Some(0))
}

fn cell(c: Option<&PaperCell>) -> String {
    match c {
        Some(PaperCell::Number(v)) => format!("{v:.2}"),
        Some(PaperCell::Text(t)) => t.clone(),
        None => "-".into(),
    }
}

pub(super) fn run(o: &RunOptions) -> Result<()> {
    let sets = o.overrides.sets();
    let seed = o.overrides.seed.unwrap_or(1);
    let out = o.out.as_ref().map(|d| d.join("rether"));
    if let Some(d) = &out {
        std::fs::create_dir_all(d).map_err(|e| anyhow!("creating {}: {e}", d.display()))?;
    }
    table1(&sets)?;
    table2(&sets)?;
    let figs: Vec<Fig> = vec![
        figure4(seed)?,
        figure5(seed)?,
        figure6(seed)?,
        figure8(seed)?,
        figure9(seed)?,
        section25(seed)?,
    ];
    if let Some(d) = &out {
        for (file, title, x, y, curves) in &figs {
            let p = d.join(file);
            lines(&p, title, x, y, curves)?;
            outln!("wrote {}", p.display());
        }
        // Figure 7 in sim alone; `--live` draws it with the live series.
        let r = run::sim(&super::SCENARIOS[2], &sets)?;
        let (title, x, y) = super::FIGURE7;
        let p = d.join("figure-7.svg");
        lines(&p, title, x, y, &super::figure7_curves(&r.results, None))?;
        outln!("wrote {} (qosnet sim; --live adds the live series)", p.display());
    }
    Ok(())
}

/// Table 1: 1-5 streams on CSMA/CD, then under RETHER.
fn table1(sets: &[String]) -> Result<()> {
    let e = &super::SCENARIOS[0];
    let paper = run::load(e, &[])?.paper;
    let mut jobs: Vec<Job<'_, Results>> = Vec::new();
    for rether in [false, true] {
        for k in 1..=5usize {
            let mut s = sets.to_vec();
            for j in k + 1..=5 {
                s.push(format!("flow.stream{j}.start=\"0s\""));
                s.push(format!("flow.stream{j}.stop=\"0s\""));
            }
            s.push(format!("rether.enabled={rether}"));
            jobs.push(Box::new(move || Ok(run::sim(e, &s)?.results)));
        }
    }
    let runs = run::parallel(jobs)?;
    let late = |r: &Results, stream: &str| -> Option<f64> {
        sessions(r, "receiver")
            .find(|s| s["flow"] == stream && s["units_in_window"].as_u64().unwrap_or(0) > 0)
            .and_then(|s| s["late_percent"].as_f64())
    };
    let sc = run::load(e, sets)?;
    outln!(
        "Table 1: % of video frames late (> 2 ms after expected), 1-5 streams of 30 frames/s x 6400 B, 10 Mb/s, {} s per run",
        (sc.duration - sc.warmup).as_secs_f64()
    );
    outln!("  (qosnet CSMA/CD | qosnet RETHER | paper CSMA/CD; `{}`)", e.path);
    outln!(
        "{:<9} {}",
        "streams",
        (1..=5).map(|k| format!("{k:>24}")).collect::<String>()
    );
    let table = paper.as_ref().and_then(|p| p.table("table-1"));
    for i in 1..=5usize {
        let name = format!("stream{i}");
        let mut row = format!("{name:<9} ");
        for k in 1..=5usize {
            if i > k {
                row.push_str(&format!("{:>24}", "x"));
                continue;
            }
            let c = late(&runs[k - 1], &name).map_or("-".into(), |v| format!("{v:.2}"));
            let refused = sessions(&runs[5 + k - 1], "sender")
                .any(|s| s["flow"] == name.as_str() && s.get("refused").is_some());
            let r = match late(&runs[5 + k - 1], &name) {
                Some(v) => format!("{v:.2}"),
                None if refused => "refused".into(),
                None => "-".into(),
            };
            let p = cell(table.and_then(|t| t.get(&name, &k.to_string())));
            row.push_str(&format!("{:>24}", format!("{c} | {r} | {p}")));
        }
        outln!("{row}");
    }
    let ok = runs[5..].iter().all(|r| guarantees_held(r, 33_333_333.0));
    outln!("  (refused: admission control, eq. 3 — four 6400-byte sessions fit in a 33.33 ms TRT with the 1995 overheads, a fifth does not)");
    outln!(
        "under RETHER: every RT visit one TRT after the last and no frame late in all five runs: {}",
        if ok { "yes" } else { "NO" }
    );
    outln!();
    Ok(())
}

/// Table 2: the paper's breakdown beside qosnet's model and the
/// simulated per-hop token time.
fn table2(sets: &[String]) -> Result<()> {
    let e = &super::SCENARIOS[1];
    let r = run::sim(e, sets)?;
    let p = r
        .scenario
        .rether
        .clone()
        .ok_or_else(|| anyhow!("{}: no [rether]", e.path))?;
    let n = r.scenario.nodes.iter().filter(|n| n.is_rether()).count().max(1);
    // The shortest time between two NRT visits to a station is one round
    // of n hops with nothing to send: n token passes.
    let min_round = details(&r.results)
        .iter()
        .filter_map(|d| d["nrt_visit_interval"]["min_ns"].as_f64())
        .fold(f64::MAX, f64::min);
    let hop_us = min_round / n as f64 / 1e3;
    let seg = r
        .scenario
        .nodes
        .iter()
        .find_map(|n| match &n.kind {
            qosnet_scenario::NodeKind::Segment(s) => Some(s.clone()),
            _ => None,
        })
        .ok_or_else(|| anyhow!("{}: no segment", e.path))?;
    let token_bytes = qosnet_core::rether::wire::TOKEN_FIXED + qosnet_core::wire::ETH_HDR;
    let wire_us = seg.framing.wire_bytes(token_bytes) as f64 * 8.0 / seg.capacity_bps as f64 * 1e6;
    outln!(
        "Table 2: token passing overhead per hop (idle node), `{}`",
        e.path
    );
    if let Some(t) = r.scenario.paper.as_ref().and_then(|p| p.table("table-2")) {
        for k in t.keys() {
            outln!("  paper  {:<80} {:>6} us", k, cell(t.get(k, "us")));
        }
    }
    outln!(
        "  qosnet t_token charged per visit (scenario parameter, Table 2's total)        {:>9.1} us",
        p.t_token.as_secs_f64() * 1e6
    );
    outln!(
        "  qosnet token frame on the wire ({token_bytes} B + FCS, preamble, IFG at {} Mb/s)       {:>9.1} us",
        seg.capacity_bps / 1_000_000,
        wire_us
    );
    outln!(
        "  qosnet simulated hop (shortest NRT round / {n} stations; wire + propagation)   {:>9.1} us",
        hop_us
    );
    outln!("  (the core's own processing per hop: `cargo bench -p qosnet-core --bench rether`)");
    outln!();
    Ok(())
}

type Fig = (&'static str, String, &'static str, &'static str, Vec<Curve>);

const T1995: &str = "a = \"140us\"\nb = \"650us\"\nt_token = \"247us\"";

/// Figure 4: switch time to RETHER mode against the number of stations.
fn figure4(seed: u64) -> Result<Fig> {
    let ns: Vec<usize> = vec![2, 3, 5, 8, 10, 15, 20, 25, 30];
    let jobs: Vec<Job<'_, Results>> = ns
        .iter()
        .map(|&n| {
            Box::new(move || {
                let t = bus("fig4", n, "10Mb/s", T1995, &[F::mpeg(1, 2, 10_000)], 0.4, seed);
                simulate("<figure 4>", t, &[])
            }) as Job<'_, Results>
        })
        .collect();
    let runs = run::parallel(jobs)?;
    outln!("Figure 4: time to switch from CSMA/CD to RETHER mode (initiator: Switch-to-RETHER to token created), idle 10 Mb/s");
    outln!("  paper: grows with the number of nodes (curve not in the text)");
    let mut pts = Vec::new();
    for (n, r) in ns.iter().zip(&runs) {
        let st = details(r)
            .iter()
            .filter_map(|d| d["switch_times_ns"].as_array())
            .flatten()
            .filter_map(|v| v.as_f64())
            .next();
        if let Some(st) = st {
            outln!("  {n:>3} stations: {:>8.3} ms", st / 1e6);
            pts.push((*n as f64, st / 1e6));
        }
    }
    outln!();
    Ok((
        "figure-4.svg",
        "RETHER Figure 4: switch time vs network size (qosnet sim)".into(),
        "stations",
        "switch time [ms]",
        vec![("qosnet sim, 10 Mb/s".into(), pts)],
    ))
}

/// Heavy NRT load of §4.1: two stations exchanging packets continuously.
fn heavy_nrt() -> [F; 2] {
    [F::nrt(4, 5, 1000, "4Mb/s"), F::nrt(5, 4, 1000, "4Mb/s")]
}

/// Figure 5: NRT delay against session size, 1 and 4 sessions.
fn figure5(seed: u64) -> Result<Fig> {
    let kbs: Vec<u32> = vec![4, 8, 12, 16, 20, 24, 26, 28, 30];
    let mut jobs: Vec<Job<'_, Results>> = Vec::new();
    for sessions in [1usize, 4] {
        for &kb in &kbs {
            jobs.push(Box::new(move || {
                let mut fl: Vec<F> = (0..sessions)
                    .map(|k| {
                        let (from, to) = [(1, 2), (2, 3), (3, 1), (1, 3)][k];
                        F::session(from, to, kb * 1000 / sessions as u32, 10_000 + k as u64 * 1000)
                    })
                    .collect();
                fl.extend(heavy_nrt());
                simulate("<figure 5>", bus("fig5", 5, "10Mb/s", T1995, &fl, 1.5, seed), &[])
            }));
        }
    }
    let runs = run::parallel(jobs)?;
    outln!("Figure 5: NRT delay (mean time between NRT token visits to a station) vs session size, TRT 33.33 ms, 5 stations, heavy NRT load");
    let paper = run::load(&super::SCENARIOS[1], &[])?.paper;
    let claim = |k: &str| {
        cell(
            paper
                .as_ref()
                .and_then(|p| p.table("claims"))
                .and_then(|t| t.get(k, "paper")),
        )
    };
    outln!(
        "  paper: 10 ms reached at {} (1 session), {} (4 sessions)",
        claim("fig5_one_session_kb_at_10ms"),
        claim("fig5_four_sessions_kb_at_10ms")
    );
    let mut curves = Vec::new();
    for (si, sessions) in [1usize, 4].into_iter().enumerate() {
        let mut pts = Vec::new();
        let mut at10 = None;
        for (ki, &kb) in kbs.iter().enumerate() {
            let r = &runs[si * kbs.len() + ki];
            let d = nrt_delay_ms(r);
            let adm = admitted(r);
            outln!(
                "  {sessions} session(s), {kb:>2} KB per frame ({:>4.1} % of 10 Mb/s): NRT delay {d:>7.2} ms, admitted {adm}/{sessions}",
                kb as f64 * 8000.0 * 30.0 / 1e7 * 100.0
            );
            if adm == sessions {
                pts.push((kb as f64, d));
                if d <= 10.0 {
                    at10 = Some(kb);
                }
            }
        }
        outln!(
            "  => {sessions} session(s): largest reservation with NRT delay <= 10 ms: {}",
            at10.map_or("none".into(), |k| format!("{k} KB per frame"))
        );
        curves.push((format!("qosnet sim, {sessions} session(s)"), pts));
    }
    outln!();
    Ok((
        "figure-5.svg",
        "RETHER Figure 5: NRT delay vs session size (qosnet sim)".into(),
        "reserved KB per 33.33 ms frame (total)",
        "NRT delay [ms]",
        curves,
    ))
}

/// Figure 6: NRT delay against the number of sessions, total constant.
fn figure6(seed: u64) -> Result<Fig> {
    let totals: Vec<u32> = vec![8, 16, 24, 32];
    let counts: Vec<usize> = vec![1, 2, 3, 4, 5];
    let mut jobs: Vec<Job<'_, Results>> = Vec::new();
    for &kb in &totals {
        for &k in &counts {
            jobs.push(Box::new(move || {
                let mut fl: Vec<F> = (0..k)
                    .map(|j| {
                        F::session(
                            1 + j % 3,
                            1 + (j + 1) % 3,
                            kb * 1000 / k as u32,
                            10_000 + j as u64 * 1000,
                        )
                    })
                    .collect();
                fl.extend(heavy_nrt());
                simulate("<figure 6>", bus("fig6", 5, "10Mb/s", T1995, &fl, 1.5, seed), &[])
            }));
        }
    }
    let runs = run::parallel(jobs)?;
    outln!(
        "Figure 6: NRT delay vs number of sessions, total reservation constant, 5 stations, heavy NRT load"
    );
    outln!("  paper: the number of sessions matters only at 32 KB per frame (about 75 %)");
    let mut curves = Vec::new();
    for (ti, &kb) in totals.iter().enumerate() {
        let mut pts = Vec::new();
        let mut row = format!("  {kb:>2} KB per frame:");
        for (ci, &k) in counts.iter().enumerate() {
            let r = &runs[ti * counts.len() + ci];
            let d = nrt_delay_ms(r);
            let adm = admitted(r);
            // Nothing admitted: the segment never left CSMA/CD, so there
            // are no NRT token visits to time.
            let delay = if d.is_finite() {
                format!("{d:.2} ms")
            } else {
                "no token".to_string()
            };
            row.push_str(&format!(" {k} -> {delay} ({adm}/{k} admitted);"));
            if adm == k {
                pts.push((k as f64, d));
            }
        }
        outln!("{row}");
        curves.push((format!("{kb} KB per frame"), pts));
    }
    outln!();
    Ok((
        "figure-6.svg",
        "RETHER Figure 6: NRT delay vs number of sessions (qosnet sim)".into(),
        "sessions",
        "NRT delay [ms]",
        curves,
    ))
}

/// Figure 8: NRT access delay against network size, two MPEG-I streams,
/// light NRT load.
fn figure8(seed: u64) -> Result<Fig> {
    let ns: Vec<usize> = vec![5, 10, 15, 20, 25, 30];
    let jobs: Vec<Job<'_, Results>> = ns
        .iter()
        .map(|&n| {
            Box::new(move || {
                let fl = [
                    F::mpeg(1, 2, 10_000),
                    F::mpeg(3, 4, 11_000),
                    F::nrt(n, n - 1, 500, "100kb/s"),
                ];
                simulate("<figure 8>", bus("fig8", n, "10Mb/s", T1995, &fl, 1.5, seed), &[])
            }) as Job<'_, Results>
        })
        .collect();
    let runs = run::parallel(jobs)?;
    outln!("Figure 8: NRT access delay (mean time between NRT visits) vs network size, two MPEG-I streams, light load, 10 Mb/s");
    outln!("  paper: about 8 ms at 20 nodes");
    let mut pts = Vec::new();
    for (n, r) in ns.iter().zip(&runs) {
        let d = nrt_delay_ms(r);
        outln!("  {n:>3} stations: {d:>7.2} ms");
        pts.push((*n as f64, d));
    }
    outln!();
    Ok((
        "figure-8.svg",
        "RETHER Figure 8: NRT access delay vs network size (qosnet sim)".into(),
        "stations",
        "NRT access delay [ms]",
        vec![("qosnet sim, 2 MPEG-I streams".into(), pts)],
    ))
}

/// Least-squares line through (bytes, us) points: (us per packet, us per
/// byte).
fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - slope * mx, slope)
}

/// Figure 9's station parameters from the paper's Tables 2 and 3 (in
/// two-mpeg.toml's `[paper]`): the copy costs of each bus fitted to
/// Table 3 (per packet + per byte), eq. 7's b less the copy of the
/// 1514-byte frame it was measured with, t_token less Table 2's two token
/// copies (the model charges copies itself). Slow hardware copies over
/// the I/O bus (Table 3's memory-to-NIC row), fast over the CPU bus
/// (memory to memory); a (interrupt and start of the next packet) is the
/// same for both: §5.2 makes only the copies faster. Prints Table 3
/// beside the fitted model.
fn figure9_hardware() -> Result<[(&'static str, String); 2]> {
    let paper = run::load(&super::SCENARIOS[1], &[])?
        .paper
        .ok_or_else(|| anyhow!("two-mpeg.toml: no [paper]"))?;
    let t3 = paper
        .table("table-3")
        .ok_or_else(|| anyhow!("two-mpeg.toml: no [paper] table-3"))?;
    let t2 = paper
        .table("table-2")
        .ok_or_else(|| anyhow!("two-mpeg.toml: no [paper] table-2"))?;
    let col = |c: &str| -> Result<Vec<(f64, f64)>> {
        t3.keys()
            .map(|k| {
                let x = k
                    .parse::<f64>()
                    .map_err(|_| anyhow!("table-3 row `{k}`: not a size"))?;
                let y = t3
                    .get(k, c)
                    .and_then(|v| v.as_f64())
                    .ok_or_else(|| anyhow!("table-3 row `{k}`: no {c}"))?;
                Ok((x, y))
            })
            .collect()
    };
    let (io, cpu) = (col("mem_to_nic_us")?, col("mem_to_mem_us")?);
    let (io_p, io_b) = fit(&io);
    let (cpu_p, cpu_b) = fit(&cpu);
    let us = |k: &str| -> Result<f64> {
        t2.get(k, "us")
            .and_then(|v| v.as_f64())
            .ok_or_else(|| anyhow!("table-2: no `{k}`"))
    };
    let token_copies = us("copy token from NIC to memory")? + us("copy token from memory to NIC")?;
    let t_token = us("total")? - token_copies;
    let mtu_frame = 1514.0;
    let b = 650.0 - (io_p + io_b * mtu_frame);
    let ns = |v: f64| (v * 1e3).round() as u64;
    outln!("Table 3 (paper) beside the copy model of Figure 9's stations (copy_per_packet + copy_per_byte x bytes), us:");
    outln!("  bytes | I/O bus (mem to NIC): paper  model | CPU bus (mem to mem): paper  model");
    for ((x, y_io), (_, y_cpu)) in io.iter().zip(&cpu) {
        outln!(
            "  {x:>5} | {y_io:>27.0} {:>6.1} | {y_cpu:>27.0} {:>6.1}",
            ns(io_p) as f64 / 1e3 + ns(io_b) as f64 / 1e3 * x,
            ns(cpu_p) as f64 / 1e3 + ns(cpu_b) as f64 / 1e3 * x
        );
    }
    outln!(
        "  slow hardware: copy_per_packet {:.3} us, copy_per_byte {} ns; fast: {:.3} us, {} ns ({:.1}x faster per byte; §5.2: 7)",
        ns(io_p) as f64 / 1e3,
        ns(io_b),
        ns(cpu_p) as f64 / 1e3,
        ns(cpu_b),
        io_b / cpu_b
    );
    outln!(
        "  both: a 140 us, b {:.1} us (650 us less the 1514-byte copy), t_token {t_token:.0} us (Table 2's {:.0} less its token copies, {token_copies:.0} us) + two copies of the token frame",
        ns(b) as f64 / 1e3,
        us("total")?
    );
    outln!();
    let params = |p: f64, per_byte: f64| {
        format!(
            "a = \"140us\"\nb = \"{}ns\"\nt_token = \"{}ns\"\ncopy_per_packet = \"{}ns\"\ncopy_per_byte = \"{}ns\"",
            ns(b),
            ns(t_token),
            ns(p),
            ns(per_byte)
        )
    };
    Ok([("slow", params(io_p, io_b)), ("fast", params(cpu_p, cpu_b))])
}

/// Figure 9: fast/slow hardware and links, 20 stations: NRT access delay
/// against the number of MPEG-I streams, and how many are admitted.
fn figure9(seed: u64) -> Result<Fig> {
    let hw = figure9_hardware()?;
    let links = [("10Mb/s", 10u32), ("100Mb/s", 100)];
    let streams: Vec<usize> = vec![1, 2, 4, 8, 12, 16, 24, 32, 40, 48];
    let mut jobs: Vec<Job<'_, Results>> = Vec::new();
    for (link, _) in links {
        for (_, params) in &hw {
            for &m in &streams {
                let params = params.clone();
                jobs.push(Box::new(move || {
                    // Senders round robin over the 20 stations, each to
                    // the next one.
                    let fl: Vec<F> = (0..m)
                        .map(|k| F::mpeg(1 + k % 20, 1 + (k + 1) % 20, 10_000 + 500 * k as u64))
                        .collect();
                    simulate("<figure 9>", bus("fig9", 20, link, &params, &fl, 1.0, seed), &[])
                }));
            }
        }
    }
    let runs = run::parallel(jobs)?;
    outln!("Figure 9: 20 stations, MPEG-I streams offered; NRT access delay and streams admitted (eq. 3)");
    outln!("  paper: 100 Mb/s links with fast hardware support up to 40 MPEG-I streams; a faster link matters more than a faster bus");
    let mut curves = Vec::new();
    let mut i = 0;
    for (lname, _) in &links {
        for (hname, _) in &hw {
            let mut pts = Vec::new();
            let mut most = 0;
            let mut row = format!("  {lname:>7}, {hname} hardware:");
            for &m in &streams {
                let r = &runs[i];
                i += 1;
                let adm = admitted(r);
                most = most.max(adm);
                let d = nrt_delay_ms(r);
                row.push_str(&format!(" {m}->{adm}/{d:.1}ms"));
                if adm == m {
                    pts.push((m as f64, d));
                }
            }
            outln!("{row}");
            outln!("      most streams admitted: {most}");
            curves.push((format!("{lname}, {hname} hardware"), pts));
        }
    }
    outln!("  (each entry: offered -> admitted / NRT access delay)");
    outln!();
    Ok((
        "figure-9.svg",
        "RETHER Figure 9: fast/slow hardware and links, 20 stations (qosnet sim)".into(),
        "MPEG-I streams (all admitted)",
        "NRT access delay [ms]",
        curves,
    ))
}

/// A chain of `segs` 10 Mb/s segments (2 stations each, a bridge between
/// neighbours), an MPEG-I stream from the first segment to the last and
/// light NRT traffic along the same path.
fn chain(segs: usize, seed: u64) -> String {
    let mut t = format!(
        "[scenario]\nname = \"chain{segs}\"\nduration = \"3s\"\nwarmup = \"500ms\"\nseed = {seed}\n\n[rether]\n{T1995}\n\n"
    );
    t += &qosnet_scenario::rethertopo::chain_toml(segs);
    let l = segs - 1;
    t += &format!(
        "[[flow]]\nname = \"video\"\nfrom = \"s0_1\"\nto = \"s{l}_2\"\nrt = true\nsize = 6400\nrate = \"30pps\"\nstart = \"10ms\"\n"
    );
    t += &format!(
        "[[flow]]\nname = \"nrt\"\nfrom = \"s0_2\"\nto = \"s{l}_1\"\nsize = 1000\nrate = \"100kb/s\"\npattern = \"poisson\"\n"
    );
    t
}

/// §2.5: an MPEG-I stream across 1-5 segments joined by bridges: its
/// delay grows by at most one TRT per segment (each segment's schedule is
/// its own; the bridges buffer between them).
fn section25(seed: u64) -> Result<Fig> {
    let ks: Vec<usize> = vec![1, 2, 3, 4, 5];
    let jobs: Vec<Job<'_, Results>> = ks
        .iter()
        .map(|&k| Box::new(move || simulate("<section 2.5>", chain(k, seed), &[])) as Job<'_, Results>)
        .collect();
    let runs = run::parallel(jobs)?;
    outln!("Section 2.5: an MPEG-I stream (30 x 6400 B/s) across segments joined by RETHER bridges, 10 Mb/s, TRT 33.33 ms");
    outln!("  paper: \"the number of hops that such a real-time connection can cross is bounded\" by the buffering delay (no figures)");
    outln!("  segments  units rx/sent  late  delay min / max [ms]  in TRTs  NRT max [ms]");
    let trt_ms = 100.0 / 3.0;
    let (mut max_pts, mut bound_pts) = (Vec::new(), Vec::new());
    for (k, r) in ks.iter().zip(&runs) {
        let f = |n: &str| r.flows.iter().find(|f| f.name == n);
        let (Some(v), Some(n)) = (f("video"), f("nrt")) else {
            return Err(anyhow!("section 2.5: a flow is missing from the results"));
        };
        let late: u64 = sessions(r, "receiver")
            .filter(|s| s["flow"] == "video")
            .filter_map(|s| s["late_units"].as_u64())
            .sum();
        let max = v.delay_ns.max as f64 / 1e6;
        outln!(
            "  {k:>8}  {:>6}/{:<6}  {late:>4}  {:>8.2} / {:<8.2}  {:>7.2}  {:>12.2}",
            v.received,
            v.sent,
            v.delay_ns.min as f64 / 1e6,
            max,
            max / trt_ms,
            n.delay_ns.max as f64 / 1e6
        );
        max_pts.push((*k as f64, max));
        bound_pts.push((*k as f64, *k as f64 * trt_ms));
    }
    outln!("  (the bound drawn beside: one TRT of wait per segment)");
    outln!();
    Ok((
        "section-2.5.svg",
        "RETHER §2.5: delay of an MPEG-I stream across bridged segments (qosnet sim)".into(),
        "segments crossed",
        "delay [ms]",
        vec![
            ("max delay, qosnet sim".into(), max_pts),
            ("segments x TRT".into(), bound_pts),
        ],
    ))
}
