//! `qosnet reproduce diffserv`: the DEGEB experiments in simulation —
//! T1/T3 once per class out of profile (line rate) and in profile
//! (200 pps), T4 for each path with and without congestion — printed as
//! Tables 4-1, 4-3 and Figure 4 beside the paper's numbers.

use anyhow::Result;
use qosnet_scenario::results::Results;

use super::paper::{self, tos_text, Numbers};
use super::{PATHS, SCENARIOS, SIZES};
use crate::run::{self, Job};
use crate::RunOptions;

fn results(e: &'static crate::Embedded, sets: Vec<String>) -> Job<'static, Results> {
    Box::new(move || Ok(run::sim(e, &sets)?.results))
}

/// T1 and T3 in simulation: per class, out of profile (line rate, index
/// 2k) and in profile (200 pps, index 2k + 1).
pub(super) fn sim_t1(base: &[String], classes: &[&str]) -> Result<Vec<Results>> {
    let mut jobs = Vec::new();
    for c in classes {
        for rate in ["8127pps", "200pps"] {
            let mut s = base.to_vec();
            s.push(format!("flow.cbr.dscp=\"{c}\""));
            s.push(format!("flow.cbr.rate=\"{rate}\""));
            jobs.push(results(&SCENARIOS[0], s));
        }
    }
    run::parallel(jobs)
}

/// T4 in simulation: index `congested * 3 + path`.
pub(super) fn sim_t4(base: &[String]) -> Result<Vec<Results>> {
    let mut jobs = Vec::new();
    for congested in [false, true] {
        for (_, p) in PATHS {
            let mut s = base.to_vec();
            s.push(format!("flow.*.path={p}"));
            if !congested {
                s.push("flow.bulk.stop=\"0s\"".into());
            }
            jobs.push(results(&SCENARIOS[1], s));
        }
    }
    run::parallel(jobs)
}

/// The TOS bytes a run's (first) flow was received with.
pub(super) fn tos_set(r: &Results) -> String {
    let f = &r.flows[0];
    f.tos_received.keys().cloned().collect::<Vec<_>>().join(" ")
}

pub(super) fn loss_pct(r: &Results) -> f64 {
    let f = &r.flows[0];
    if f.sent > 0 {
        100.0 * f.lost as f64 / f.sent as f64
    } else {
        0.0
    }
}

/// Mean RTT of an echo flow in ms.
pub(super) fn rtt(r: &Results, name: &str) -> f64 {
    r.flow(name).map(|f| f.delay_ns.mean / 1e6).unwrap_or(f64::NAN)
}

pub(super) fn run(o: &RunOptions) -> Result<()> {
    let paper = paper::load()?;
    let base = o.overrides.sets();
    eprintln!("running DEGEB T1/T3 (22 runs) and T4 (6 runs) in simulation...");

    // T1 and T3: each class alone, out of profile (line rate) and in profile.
    let res = sim_t1(&base, &paper.class_names())?;
    print_t1(&paper, &res);

    // T4: hop counts x congestion.
    let res = sim_t4(&base)?;
    print_t4(&paper, &res);
    if let Some(dir) = &o.out {
        std::fs::create_dir_all(dir)?;
        let all: Vec<&Results> = res.iter().collect();
        std::fs::write(dir.join("degeb-t4.json"), serde_json::to_string_pretty(&all)?)?;
        outln!("\nwrote {}", dir.join("degeb-t4.json").display());
    }
    Ok(())
}

fn print_t1(paper: &Numbers, res: &[Results]) {
    outln!("\nTable 4-1: edge router bandwidth under a 100 Mb/s CBR offer (one class at a time)");
    outln!(
        "{:<6} {:>12} {:>14} {:>14} {:>11} {:>11}",
        "class",
        "shaped Mb/s",
        "paper Mb/s",
        "qosnet Mb/s",
        "paper loss",
        "qosnet loss"
    );
    for (k, c) in paper.classes.iter().enumerate() {
        let r = &res[2 * k];
        outln!(
            "{:<6} {:>12.1} {:>14} {:>14.2} {:>10.0}% {:>10.1}%",
            c.name,
            c.shaped_mbps,
            format!("{}", c.measured_mbps),
            r.flows[0].throughput_bps / 1e6,
            c.loss_pct,
            loss_pct(r)
        );
    }
    outln!("(bandwidth: IP bits per second at the receiver; offer: 8127 pps of 1498-byte IP packets, the line rate of the 100 Mb/s port)");

    outln!("\nTable 4-3: TOS bytes received, in profile (200 pps) and out of profile (line rate)");
    outln!(
        "{:<6} {:>6} {:>12} {:>22} {:>22}",
        "class",
        "sent",
        "in profile",
        "out: paper",
        "out: qosnet"
    );
    for (k, c) in paper.classes.iter().enumerate() {
        outln!(
            "{:<6} {:>6} {:>12} {:>22} {:>22}",
            c.name,
            format!("0x{:02x}", c.tos),
            tos_set(&res[2 * k + 1]),
            tos_text(&c.out_received),
            tos_set(&res[2 * k])
        );
    }
}

fn print_t4(paper: &Numbers, res: &[Results]) {
    for (ci, label) in [
        (0, "without congestion"),
        (1, "under BE congestion (120 Mb/s of BE into 100 Mb/s)"),
    ] {
        outln!("\nFigure 4: mean round-trip time [ms] {label}");
        outln!(
            "{:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "bytes",
            "EF 3hop",
            "EF 4hop",
            "EF 5hop",
            "BE 3hop",
            "BE 4hop",
            "BE 5hop"
        );
        for sz in SIZES {
            let row: Vec<String> = ["ef", "be"]
                .iter()
                .flat_map(|k| (0..3).map(move |h| (k, h)))
                .map(|(k, h)| format!("{:>9.3}", rtt(&res[ci * 3 + h], &format!("{k}{sz}"))))
                .collect();
            outln!("{:>6} {}", sz, row.join(" "));
        }
    }
    // The paper's summary (abstract and §4.4) beside qosnet's.
    let c5 = &res[5];
    let (ef128, be128) = (rtt(c5, "ef128"), rtt(c5, "be128"));
    let growth = |ci: usize, k: &str| {
        (0..3)
            .map(|h| rtt(&res[ci * 3 + h], &format!("{k}1500")) - rtt(&res[ci * 3 + h], &format!("{k}64")))
            .fold(0.0, f64::max)
    };
    let topo = |ci: usize, k: &str| {
        SIZES
            .iter()
            .map(|s| rtt(&res[ci * 3 + 2], &format!("{k}{s}")) - rtt(&res[ci * 3], &format!("{k}{s}")))
            .fold(0.0, f64::max)
    };
    let p = |k: &str| paper.claim(k);
    outln!("\nFigure 4 summary            paper           qosnet");
    outln!(
        "EF RTT, 128 B, congested    {:<16}{ef128:.3} ms (5 hops)",
        p("ef_rtt_128_congested")
    );
    outln!(
        "BE RTT, 128 B, congested    {:<16}{be128:.3} ms (5 hops)",
        p("be_rtt_128_congested")
    );
    outln!(
        "size growth, congested      {:<16}EF {:.3} ms, BE {:.3} ms",
        p("size_growth_congested"),
        growth(1, "ef"),
        growth(1, "be")
    );
    outln!(
        "size growth, no congestion  {:<16}EF {:.3} ms, BE {:.3} ms",
        p("size_growth_idle"),
        growth(0, "ef"),
        growth(0, "be")
    );
    outln!(
        "topology 3 -> 5 hops        {:<16}EF {:.3} ms (congested), {:.3} ms (idle)",
        p("topology_growth"),
        topo(1, "ef"),
        topo(0, "ef")
    );
}
