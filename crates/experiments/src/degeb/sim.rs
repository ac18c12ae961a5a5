//! `qosnet reproduce diffserv`: the DEGEB experiments in simulation —
//! T1/T3 once per class out of profile (line rate) and in profile
//! (200 pps), T4 for each path with and without congestion — printed as
//! Tables 4-1, 4-3 and Figure 4 beside the paper's numbers.

use std::cmp::Ordering;

use anyhow::Result;
use qosnet_scenario::results::Results;

use super::paper::{self, tos_text, Numbers};
use super::{PATHS, SCENARIOS, SIZES};
use crate::run::{self, Job};
use crate::{RunOptions, Verdicts};

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

pub(super) fn run(o: &RunOptions) -> Result<Verdicts> {
    let paper = paper::load()?;
    let base = o.overrides.sets();
    eprintln!("running DEGEB T1/T3 (22 runs) and T4 (6 runs) in simulation...");

    // T1 and T3: each class alone, out of profile (line rate) and in profile.
    let res = sim_t1(&base, &paper.class_names())?;
    print_t1(&paper, &res);
    let t1: Vec<T1> = paper
        .classes
        .iter()
        .enumerate()
        .map(|(k, _)| T1 {
            mbps: res[2 * k].flows[0].throughput_bps / 1e6,
            loss_pct: loss_pct(&res[2 * k]),
            in_tos: tos_set(&res[2 * k + 1]),
            out_tos: tos_set(&res[2 * k]),
        })
        .collect();

    // T4: hop counts x congestion.
    let res = sim_t4(&base)?;
    print_t4(&paper, &res);
    let t4 = Rtts::from_runs(&res);
    if let Some(dir) = &o.out {
        std::fs::create_dir_all(dir)?;
        let all: Vec<&Results> = res.iter().collect();
        std::fs::write(dir.join("degeb-t4.json"), serde_json::to_string_pretty(&all)?)?;
        outln!("\nwrote {}", dir.join("degeb-t4.json").display());
    }
    Ok(verdicts(&paper, &t1, &t4))
}

/// One class's T1/T3 measurements, in Table 4-1's order.
#[derive(Clone, Debug, Default)]
pub(super) struct T1 {
    pub mbps: f64,
    pub loss_pct: f64,
    /// TOS bytes received in profile and out of profile, as `tos_text`.
    pub in_tos: String,
    pub out_tos: String,
}

/// T4's mean RTTs in ms, `[congested][path][size]`, for EF and BE
/// (paths of 3, 4, 5 routers; sizes [`SIZES`]).
#[derive(Clone, Debug, Default)]
pub(super) struct Rtts {
    pub ef: [[[f64; 6]; 3]; 2],
    pub be: [[[f64; 6]; 3]; 2],
}

impl Rtts {
    fn from_runs(res: &[Results]) -> Self {
        let mut t = Rtts::default();
        for ci in 0..2 {
            for h in 0..3 {
                for (si, sz) in SIZES.iter().enumerate() {
                    t.ef[ci][h][si] = rtt(&res[ci * 3 + h], &format!("ef{sz}"));
                    t.be[ci][h][si] = rtt(&res[ci * 3 + h], &format!("be{sz}"));
                }
            }
        }
        t
    }
}

/// Largest RTT growth from the smallest to the largest packet over the
/// paths.
fn size_growth(r: &[[f64; 6]; 3]) -> f64 {
    r.iter().map(|p| p[5] - p[0]).fold(f64::NAN, f64::max)
}

/// Largest RTT growth from 3 to 5 routers over the sizes and both loads.
fn topology_growth(r: &[[[f64; 6]; 3]; 2]) -> f64 {
    r.iter()
        .flat_map(|c| (0..6).map(move |s| c[2][s] - c[0][s]))
        .fold(f64::NAN, f64::max)
}

/// The verdicts from T1/T3's and T4's numbers. Tables 4-1 and 4-3 are
/// tables (±15 %); Figure 4's numbers are the abstract's "around" readings
/// of a plot (±25 %).
pub(super) fn verdicts(paper: &Numbers, t1: &[T1], t4: &Rtts) -> Verdicts {
    let mut v = Verdicts::default();
    for (c, m) in paper.classes.iter().zip(t1) {
        v.figure(
            "Table 4-1",
            &format!("{} bandwidth at 100 Mb/s offer", c.name),
            c.measured_mbps,
            m.mbps,
            "Mb/s",
            0.15,
        );
        v.figure(
            "Table 4-1",
            &format!("{} loss", c.name),
            c.loss_pct,
            m.loss_pct,
            "%",
            0.15,
        );
    }
    for (c, m) in paper.classes.iter().zip(t1) {
        let (pin, pout) = (tos_text(&[c.tos]), tos_text(&c.out_received));
        v.claim(
            "Table 4-3",
            &format!("{} TOS received in / out of profile", c.name),
            format!("{pin} / {pout}"),
            format!("{} / {}", m.in_tos, m.out_tos),
            m.in_tos == pin && m.out_tos == pout,
        );
    }
    let claim = |k: &str| paper.claims.get(k).map_or(f64::NAN, |c| c.1);
    // 128 bytes (SIZES[1]) through 5 routers, under BE congestion.
    let (ef, be) = (t4.ef[1][2][1], t4.be[1][2][1]);
    v.figure(
        "Figure 4",
        "EF RTT, 128 B, 5 routers, BE congestion",
        claim("ef_rtt_128_congested"),
        ef,
        "ms",
        0.25,
    );
    v.figure(
        "Figure 4",
        "BE RTT, 128 B, 5 routers, BE congestion",
        claim("be_rtt_128_congested"),
        be,
        "ms",
        0.25,
    );
    let above: Vec<String> = (0..3)
        .flat_map(|h| (0..6).map(move |s| (h, s)))
        .filter(|&(h, s)| t4.ef[1][h][s].partial_cmp(&t4.be[1][h][s]) != Some(Ordering::Less))
        .map(|(h, s)| format!("{} B, {} routers", SIZES[s], h + 3))
        .collect();
    v.claim(
        "Figure 4",
        "EF RTT below BE's under BE congestion, every size and path",
        "middle (EF) below highest (BE) curves",
        if above.is_empty() {
            "below at every point".to_string()
        } else {
            format!("not below at {}", above.join(", "))
        },
        above.is_empty(),
    );
    // "Greatly improve": the paper's ~80 against ~7 ms.
    v.at_least(
        "Figure 4",
        "BE / EF RTT, 128 B, 5 routers, congested (paper's ratio)",
        claim("be_rtt_128_congested") / claim("ef_rtt_128_congested"),
        be / ef,
        "",
    );
    let (ge, gb) = (size_growth(&t4.ef[1]), size_growth(&t4.be[1]));
    v.figure(
        "Figure 4",
        "EF RTT growth 64 -> 1500 B, congested",
        claim("size_growth_congested"),
        ge,
        "ms",
        0.25,
    );
    v.figure(
        "Figure 4",
        "BE RTT growth 64 -> 1500 B, congested",
        claim("size_growth_congested"),
        gb,
        "ms",
        0.25,
    );
    let gi = size_growth(&t4.ef[0]).max(size_growth(&t4.be[0]));
    v.at_most(
        "Figure 4",
        "RTT growth 64 -> 1500 B, no congestion",
        claim("size_growth_idle"),
        gi,
        "ms",
    );
    let (te, tb) = (topology_growth(&t4.ef), topology_growth(&t4.be));
    v.at_most(
        "Figure 4",
        "EF RTT growth 3 -> 5 routers",
        claim("topology_growth"),
        te,
        "ms",
    );
    v.at_most(
        "Figure 4",
        "BE RTT growth 3 -> 5 routers",
        claim("topology_growth"),
        tb,
        "ms",
    );
    // §5: the size and topology effects are small beside EF's gain.
    let effect = ge.max(te);
    v.claim(
        "§5",
        "EF's size and path effects small beside its gain over BE",
        "small compared to EF's improvement",
        format!("{effect:.3} ms against {:.3} ms", be - ef),
        effect < be - ef,
    );
    v.note("Tables 4-1 and 4-3: ±15 %; Figure 4: the abstract's \"around\" readings of a plot, ±25 %");
    v
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Outcome;

    /// The paper's own numbers as a run: Table 4-1's figures, Table 4-3's
    /// TOS sets, and RTTs with Figure 4's shape (EF 7.0 ms, BE 80.7 ms at
    /// 128 B through 5 routers, growing 6 ms with size under congestion, 1 ms idle, 0.5 ms
    /// from 3 to 5 routers).
    fn like_the_paper(p: &Numbers) -> (Vec<T1>, Rtts) {
        let t1 = p
            .classes
            .iter()
            .map(|c| T1 {
                mbps: c.measured_mbps,
                loss_pct: c.loss_pct,
                in_tos: tos_text(&[c.tos]),
                out_tos: tos_text(&c.out_received),
            })
            .collect();
        let mut r = Rtts::default();
        for h in 0..3 {
            for s in 0..6 {
                let (hop, size) = (0.25 * h as f64, s as f64 / 5.0);
                r.ef[0][h][s] = 0.1 + size + hop;
                r.be[0][h][s] = 0.1 + size + hop;
                r.ef[1][h][s] = 5.3 + 6.0 * size + hop;
                r.be[1][h][s] = 79.0 + 6.0 * size + hop;
            }
        }
        (t1, r)
    }

    #[test]
    fn the_papers_own_numbers_hold() {
        let p = super::paper::load().unwrap();
        let (t1, r) = like_the_paper(&p);
        let v = verdicts(&p, &t1, &r);
        let bad: Vec<_> = v
            .rows
            .iter()
            .filter(|r| r.outcome != Outcome::Holds)
            .map(|r| format!("{}: {} ({})", r.artefact, r.what, r.qosnet))
            .collect();
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(v.rows.len(), 3 * p.classes.len() + 10);
    }

    #[test]
    fn a_fast_ef_a_wrong_tos_and_ef_above_be_differ() {
        let p = super::paper::load().unwrap();
        let (mut t1, mut r) = like_the_paper(&p);
        t1[1].out_tos = "0x28 0x30".into();
        // EF at 0.7 ms (routers forwarding in zero time), and one EF probe
        // slower than BE.
        for h in 0..3 {
            for s in 0..6 {
                r.ef[1][h][s] = 0.7;
            }
        }
        r.ef[1][0][5] = 100.0;
        let v = verdicts(&p, &t1, &r);
        let differs: Vec<&str> = v
            .rows
            .iter()
            .filter(|r| r.outcome == Outcome::Differs)
            .map(|r| r.what.as_str())
            .collect();
        assert_eq!(
            differs,
            [
                "AF11 TOS received in / out of profile",
                "EF RTT, 128 B, 5 routers, BE congestion",
                "EF RTT below BE's under BE congestion, every size and path",
                "EF RTT growth 64 -> 1500 B, congested",
                "EF's size and path effects small beside its gain over BE",
            ]
        );
    }
}
