//! `qosnet reproduce diffserv`: the DEGEB experiments of seed 004 in
//! simulation — Table 4-1 (policed bandwidth and loss per class under a
//! 100 Mb/s CBR offer), Table 4-3 (DSCP sent vs received, in and out of
//! profile) and Figure 4 (round-trip latency of EF and BE through 3, 4 and
//! 5 routers, with and without BE congestion, 64 to 1500-byte packets).

use anyhow::{anyhow, Result};
use qosnet_scenario::load_str;
use qosnet_scenario::results::Results;
use qosnet_sim::Sim;

use crate::embedded::DEGEB;
use crate::ReproduceArgs;

pub(crate) const CLASSES: [&str; 11] = [
    "EF", "AF11", "AF12", "AF13", "AF21", "AF22", "AF23", "AF31", "AF32", "AF33", "BE",
];

/// Table 4-1's "Shaped Total Bandwidth" and "Packet Loss Rate" (paper).
pub(crate) const SHAPED_MBPS: [f64; 11] = [10.0, 76.0, 46.0, 21.0, 46.0, 26.0, 11.0, 16.0, 6.0, 1.0, 30.0];
pub(crate) const PAPER_LOSS_PCT: [f64; 11] =
    [89.0, 22.0, 52.0, 78.0, 51.0, 72.0, 88.0, 83.0, 94.0, 99.0, 68.0];

/// Table 4-3's out-of-profile column: TOS bytes received (paper).
pub(crate) const PAPER_OUT: [&str; 11] = [
    "0xb8",
    "0x28 0x30 0x38",
    "0x30 0x38",
    "0x38",
    "0x48 0x50 0x58",
    "0x50 0x58",
    "0x58",
    "0x68 0x70 0x78",
    "0x70 0x78",
    "0x78",
    "0x00",
];

fn run(path: &str, text: &str, sets: &[String]) -> Result<Results> {
    let sc = load_str(path, text, sets).map_err(|e| anyhow!("{e}"))?;
    let mut sim = Sim::new(sc).map_err(|e| anyhow!("{path}: {e}"))?;
    Ok(sim.run())
}

/// Run `jobs` on up to two threads (the runs are independent).
fn parallel<T: Send>(jobs: Vec<Box<dyn FnOnce() -> Result<T> + Send + '_>>) -> Result<Vec<T>> {
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(1);
    let mut out: Vec<Option<Result<T>>> = (0..jobs.len()).map(|_| None).collect();
    let mut jobs: Vec<(usize, _)> = jobs.into_iter().enumerate().collect();
    while !jobs.is_empty() {
        let batch: Vec<_> = jobs.drain(..n.min(jobs.len())).collect();
        std::thread::scope(|s| {
            let hs: Vec<_> = batch.into_iter().map(|(i, j)| (i, s.spawn(j))).collect();
            for (i, h) in hs {
                out[i] = Some(
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("simulation thread panicked"))),
                );
            }
        });
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(anyhow!("run missing"))))
        .collect()
}

pub(crate) fn tos_set(r: &Results) -> String {
    let f = &r.flows[0];
    f.tos_received.keys().cloned().collect::<Vec<_>>().join(" ")
}

/// Paths of T4's 3, 4 and 5-router runs (`--set flow.*.path=...`).
pub(crate) const PATHS: [(&str, &str); 3] = [
    ("3", "[\"Ei\", \"C1\", \"Ee\"]"),
    ("4", "[\"Ei\", \"C1\", \"C2\", \"Ee\"]"),
    ("5", "[\"Ei\", \"C1\", \"C2\", \"C3\", \"Ee\"]"),
];

/// T4's probe sizes (IP bytes).
pub(crate) const SIZES: [u32; 6] = [64, 128, 256, 512, 1024, 1500];

/// The sets every run gets from the command line.
pub(crate) fn base_sets(a: &ReproduceArgs) -> Vec<String> {
    let mut base = a.set.clone();
    if let Some(d) = &a.duration {
        base.push(format!("scenario.duration=\"{d}\""));
    }
    if let Some(s) = a.seed {
        base.push(format!("scenario.seed={s}"));
    }
    base
}

/// T1 and T3 in simulation: per class, out of profile (line rate, index
/// 2k) and in profile (200 pps, index 2k + 1).
pub(crate) fn sim_t1(base: &[String]) -> Result<Vec<Results>> {
    let t1 = &DEGEB[0];
    let mut jobs: Vec<Box<dyn FnOnce() -> Result<Results> + Send>> = Vec::new();
    for c in CLASSES {
        for rate in ["8127pps", "200pps"] {
            let mut s = base.to_vec();
            s.push(format!("flow.cbr.dscp=\"{c}\""));
            s.push(format!("flow.cbr.rate=\"{rate}\""));
            jobs.push(Box::new(move || run(t1.path, t1.text, &s)));
        }
    }
    parallel(jobs)
}

/// T4 in simulation: index `congested * 3 + path`.
pub(crate) fn sim_t4(base: &[String]) -> Result<Vec<Results>> {
    let t4 = &DEGEB[1];
    let mut jobs: Vec<Box<dyn FnOnce() -> Result<Results> + Send>> = Vec::new();
    for congested in [false, true] {
        for (_, p) in PATHS {
            let mut s = base.to_vec();
            s.push(format!("flow.*.path={p}"));
            if !congested {
                s.push("flow.bulk.stop=\"0s\"".into());
            }
            jobs.push(Box::new(move || run(t4.path, t4.text, &s)));
        }
    }
    parallel(jobs)
}

pub(crate) fn loss_pct(r: &Results) -> f64 {
    let f = &r.flows[0];
    if f.sent > 0 {
        100.0 * f.lost as f64 / f.sent as f64
    } else {
        0.0
    }
}

/// Mean RTT of an echo flow in ms.
pub(crate) fn rtt(r: &Results, name: &str) -> f64 {
    r.flow(name).map(|f| f.delay_ns.mean / 1e6).unwrap_or(f64::NAN)
}

pub fn diffserv(a: &ReproduceArgs) -> Result<()> {
    if a.live {
        return crate::reproduce_ds_live::diffserv_live(a);
    }
    let base = base_sets(a);
    let t1 = &DEGEB[0];
    eprintln!("running DEGEB T1/T3 (22 runs) and T4 (6 runs) in simulation...");

    // T1 and T3: each class alone, out of profile (line rate) and in profile.
    let res = sim_t1(&base)?;
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
    let paper_bw = t1_paper(t1.text)?;
    for (k, c) in CLASSES.iter().enumerate() {
        let r = &res[2 * k];
        let f = &r.flows[0];
        let loss = loss_pct(r);
        outln!(
            "{:<6} {:>12.1} {:>14} {:>14.2} {:>10.0}% {:>10.1}%",
            c,
            SHAPED_MBPS[k],
            paper_bw.get(*c).map(|v| format!("{v}")).unwrap_or_default(),
            f.throughput_bps / 1e6,
            PAPER_LOSS_PCT[k],
            loss
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
    for (k, c) in CLASSES.iter().enumerate() {
        let code = qosnet_core::diffserv::parse_dscp(c).map_err(|e| anyhow!(e))?;
        outln!(
            "{:<6} {:>6} {:>12} {:>22} {:>22}",
            c,
            format!("0x{:02x}", code << 2),
            tos_set(&res[2 * k + 1]),
            PAPER_OUT[k],
            tos_set(&res[2 * k])
        );
    }

    // T4: hop counts x congestion.
    let res = sim_t4(&base)?;
    let sizes = SIZES;
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
        for sz in sizes {
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
        sizes
            .iter()
            .map(|s| rtt(&res[ci * 3 + 2], &format!("{k}{s}")) - rtt(&res[ci * 3], &format!("{k}{s}")))
            .fold(0.0, f64::max)
    };
    outln!("\nFigure 4 summary            paper           qosnet");
    outln!("EF RTT, 128 B, congested    ~7 ms           {ef128:.3} ms (5 hops)");
    outln!("BE RTT, 128 B, congested    ~80 ms          {be128:.3} ms (5 hops)");
    outln!(
        "size growth, congested      ~7 ms           EF {:.3} ms, BE {:.3} ms",
        growth(1, "ef"),
        growth(1, "be")
    );
    outln!(
        "size growth, no congestion  < 1.1 ms        EF {:.3} ms, BE {:.3} ms",
        growth(0, "ef"),
        growth(0, "be")
    );
    outln!(
        "topology 3 -> 5 hops        <= ~1 ms        EF {:.3} ms (congested), {:.3} ms (idle)",
        topo(1, "ef"),
        topo(0, "ef")
    );
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        let all: Vec<&Results> = res.iter().collect();
        std::fs::write(dir.join("degeb-t4.json"), serde_json::to_string_pretty(&all)?)?;
        outln!("\nwrote {}", dir.join("degeb-t4.json").display());
    }
    Ok(())
}

pub(crate) fn t1_paper(text: &str) -> Result<std::collections::BTreeMap<String, f64>> {
    let sc = load_str("t1", text, &[]).map_err(|e| anyhow!("{e}"))?;
    Ok(sc.paper.map(|p| p.values).unwrap_or_default())
}
