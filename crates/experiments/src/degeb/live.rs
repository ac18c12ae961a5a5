//! `qosnet reproduce diffserv --live`: the DEGEB experiments of seed 004
//! in simulation and through qosnet routers in namespace labs, beside the
//! paper's numbers. The live measurements are in [`super::lab`]: iperf3 (when installed) offers each class at
//! line rate and reports bandwidth and loss, an AF_PACKET tap at the
//! destination counts the TOS bytes, qosnet's sink the in-profile ones;
//! `ping -Q TOS -s SIZE` measures Figure 4's round trips while qosnet's
//! generator congests the backbone with best effort.

use std::collections::BTreeMap;

use anyhow::{anyhow, Result};
use qosnet_core::time::Duration;
use qosnet_lab::labrun::LiveOptions;
use qosnet_scenario::results::Results;

use super::lab::{self, PingResult, T1Options, T1Point, T4Options, T4Run};
use super::paper::{self, tos_text, Numbers};
use super::sim::{loss_pct, rtt, sim_t1, sim_t4, tos_set};
use super::{PATHS, SCENARIOS, SIZES};
use crate::report::{fmt_ns, lateness_text};
use crate::run;
use crate::RunOptions;

fn tos_keys(m: &BTreeMap<u8, u64>) -> String {
    if m.is_empty() {
        return "-".into();
    }
    m.keys()
        .map(|t| format!("0x{t:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn share(m: &BTreeMap<u8, u64>) -> String {
    let n: u64 = m.values().sum();
    m.iter()
        .map(|(t, c)| format!("0x{t:02x} {:.1}%", 100.0 * *c as f64 / n.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn run(o: &RunOptions) -> Result<()> {
    run::need_root("qosnet reproduce diffserv --live")?;
    let paper = paper::load()?;
    let classes = paper.class_names();
    let dur = match &o.overrides.duration {
        Some(d) => qosnet_scenario::units::parse_duration(d).map_err(|e| anyhow!("--duration {d}: {e}"))?,
        None => Duration::from_secs(2),
    };
    // --duration is the live runs' length; the simulations keep the
    // scenarios' own (change them with --set scenario.duration=...).
    let base = o.overrides.sets_except_duration();
    let stop = run::signals()?;
    eprintln!("running DEGEB T1/T3 (22 runs) and T4 (6 runs) in simulation...");
    let sim1 = sim_t1(&base, &classes)?;
    let sim4 = sim_t4(&base)?;

    eprintln!("measuring this machine's timer noise (0.3 s)...");
    let noise = qosnet_io::clock::measure_timer_noise(std::time::Duration::from_millis(300));
    let lo = LiveOptions {
        prefix: o.prefix.clone(),
        timer_noise: false,
        devices: o.devices.clone(),
        ..LiveOptions::default()
    };

    // T1/T3: one lab, every class in turn.
    let sc1 = run::load(&SCENARIOS[0], &base)?;
    let o1 = T1Options {
        duration: dur,
        ..T1Options::default()
    };
    let tool = if o1.iperf3 {
        format!(
            "iperf3 -u -b {:.2}M -l 1470 --dscp CLASS, {} per class; TOS bytes by an AF_PACKET tap at dst",
            o1.offer_pps * 1470.0 * 8.0 / 1e6,
            dur
        )
    } else {
        eprintln!("note: iperf3 is not installed; qosnet's own generator and sink offer and measure the line-rate runs");
        format!("qosnet gen/sink (iperf3 not installed), 8127 pps of 1498 B, {dur} per class")
    };
    let codes: Vec<u8> = classes
        .iter()
        .map(|c| qosnet_core::diffserv::parse_dscp(c).map(|d| d << 2))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| anyhow!(e))?;
    eprintln!(
        "T1/T3 live: lab {}-*, {} classes, {} each + 0.5 s in profile...",
        lo.prefix,
        classes.len(),
        dur
    );
    let live1 = lab::t1_lab(&sc1, &lo, stop.clone(), &codes, &o1, |k, p| {
        eprintln!(
            "  {:<5} {:>7.2} Mb/s, {:>5.1}% lost, out {}, in {}",
            classes[k],
            p.throughput_bps / 1e6,
            p.loss_pct,
            tos_keys(&p.tos_out),
            tos_keys(&p.tos_in)
        )
    })
    .map_err(|e| anyhow!("T1 live: {e}"))?;

    // T4: one lab per path, idle then congested.
    let mut live4: Vec<T4Run> = Vec::new();
    for (hops, p) in PATHS {
        let mut s = base.clone();
        s.push(format!("flow.*.path={p}"));
        s.push("flow.*.echo=false".into());
        let sc = run::load(&SCENARIOS[1], &s)?;
        let o = T4Options::from_scenario(&sc, dur).map_err(|e| anyhow!(e))?;
        eprintln!(
            "T4 live, {hops} routers: {} ping probes, one ping each per {}, idle then under {:.0} Mb/s of BE...",
            o.probes.len(),
            o.interval,
            o.bulk_bps / 1e6
        );
        live4.push(
            lab::t4_lab(&sc, &lo, stop.clone(), &o).map_err(|e| anyhow!("T4 live ({hops} routers): {e}"))?,
        );
    }

    print_t1(&paper, &sim1, &live1.points, &tool);
    print_t4(&paper, &sim4, &live4);
    outln!(
        "\nlive timing (all routers of a lab on one thread of this 2-core machine, shared with the traffic):"
    );
    outln!(
        "  machine timer noise before the runs: wait_until late p50 {}, p99 {}, max {}; busy-poll gaps max {}",
        fmt_ns(noise.wait_lateness.p50_ns as f64),
        fmt_ns(noise.wait_lateness.p99_ns as f64),
        fmt_ns(noise.wait_lateness.max_ns as f64),
        fmt_ns(noise.spin_gaps.max_ns as f64)
    );
    outln!(
        "  T1 lab: router timer lateness {}",
        lateness_text(&live1.driver.lateness)
    );
    for ((hops, _), r) in PATHS.iter().zip(&live4) {
        outln!(
            "  T4 lab, {hops} routers: router timer lateness {}\n    bulk sent {:.1} Mb/s ({} send errors, pacing lateness {}), delivered {:.1} Mb/s",
            lateness_text(&r.driver.lateness),
            r.bulk_sent_bps / 1e6,
            r.bulk_send_errors,
            lateness_text(&r.bulk_lateness),
            r.bulk_rx_bps / 1e6
        );
        // A quarter of the BE queue's drain time (1 MiB at 100 Mb/s).
        if r.bulk_lateness.p99_ns > 20_000_000 {
            outln!(
                "    NOTE: the bulk sender was held up by {} at p99 (machine load): the BE queue drained meanwhile, so this lab's congested BE RTTs are understated",
                fmt_ns(r.bulk_lateness.p99_ns as f64)
            );
        }
    }
    if let Some(dir) = &o.out {
        std::fs::create_dir_all(dir)?;
        let t4j: Vec<serde_json::Value> = PATHS
            .iter()
            .zip(&live4)
            .map(|((h, _), r)| {
                serde_json::json!({
                    "routers": h.parse::<u32>().unwrap_or(0),
                    "idle": r.idle,
                    "congested": r.congested,
                    "bulk_sent_bps": r.bulk_sent_bps,
                    "bulk_rx_bps": r.bulk_rx_bps,
                    "timer_lateness": r.driver.lateness,
                    "counters": r.counters,
                })
            })
            .collect();
        let j = serde_json::json!({
            "mode": "live",
            "duration_s": dur.as_secs_f64(),
            "t1": classes.iter().zip(&live1.points).map(|(c, p)| (c.to_string(), p)).collect::<BTreeMap<_, _>>(),
            "t1_timer_lateness": live1.driver.lateness,
            "t1_counters": live1.counters,
            "t4": t4j,
            "timer_noise": noise,
        });
        std::fs::write(dir.join("degeb-live.json"), serde_json::to_string_pretty(&j)?)?;
        let all: Vec<&Results> = sim4.iter().collect();
        std::fs::write(dir.join("degeb-t4.json"), serde_json::to_string_pretty(&all)?)?;
        outln!(
            "\nwrote {} and {}",
            dir.join("degeb-live.json").display(),
            dir.join("degeb-t4.json").display()
        );
    }
    Ok(())
}

fn print_t1(paper: &Numbers, sim: &[Results], live: &[T1Point], tool: &str) {
    outln!("\nTable 4-1: edge router bandwidth under a 100 Mb/s CBR offer (one class at a time): paper, sim, live");
    outln!(
        "{:<6} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "class",
        "shaped",
        "paper",
        "sim",
        "live",
        "paper",
        "sim",
        "live"
    );
    outln!(
        "{:<6} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "",
        "Mb/s",
        "Mb/s",
        "Mb/s",
        "Mb/s",
        "loss",
        "loss",
        "loss"
    );
    for (k, c) in paper.classes.iter().enumerate() {
        let s = &sim[2 * k];
        let l = live.get(k).cloned().unwrap_or_default();
        outln!(
            "{:<6} {:>7.1} {:>7} {:>7.2} {:>7.2} {:>6.0}% {:>6.1}% {:>6.1}%",
            c.name,
            c.shaped_mbps,
            format!("{}", c.measured_mbps),
            s.flows[0].throughput_bps / 1e6,
            l.throughput_bps / 1e6,
            c.loss_pct,
            loss_pct(s),
            l.loss_pct
        );
    }
    outln!("(bandwidth: IP bits per second at the receiver; live: {tool})");

    outln!("\nTable 4-3: TOS bytes received, in profile (200 pps) and out of profile (line rate): paper, sim, live");
    outln!(
        "{:<6} {:>5} {:>8} {:>8} {:>15} {:>15} {:>15}",
        "class",
        "sent",
        "in: sim",
        "in: live",
        "out: paper",
        "out: sim",
        "out: live"
    );
    for (k, c) in paper.classes.iter().enumerate() {
        let l = live.get(k).cloned().unwrap_or_default();
        outln!(
            "{:<6} {:>5} {:>8} {:>8} {:>15} {:>15} {:>15}",
            c.name,
            format!("0x{:02x}", l.tos),
            tos_set(&sim[2 * k + 1]),
            tos_keys(&l.tos_in),
            tos_text(&c.out_received),
            tos_set(&sim[2 * k]),
            tos_keys(&l.tos_out)
        );
    }
    outln!("live out-of-profile TOS bytes: packets counted at dst, shares");
    for (k, c) in paper.class_names().iter().enumerate() {
        if let Some(l) = live.get(k) {
            outln!(
                "  {c:<5} {}: {} (tool received {})",
                l.tos_out_packets,
                share(&l.tos_out),
                l.received
            );
        }
    }
}

fn print_t4(paper: &Numbers, sim: &[Results], live: &[T4Run]) {
    let lv = |ci: usize, h: usize, name: &str| -> f64 {
        live.get(h)
            .and_then(|r| {
                let v: &Vec<PingResult> = if ci == 0 { &r.idle } else { &r.congested };
                v.iter().find(|p| p.name == name).map(|p| p.avg_ms)
            })
            .unwrap_or(f64::NAN)
    };
    let sv = |ci: usize, h: usize, name: &str| rtt(&sim[ci * 3 + h], name);
    for (ci, label) in [
        (0, "without congestion"),
        (1, "under BE congestion (120 Mb/s of BE into 100 Mb/s)"),
    ] {
        outln!("\nFigure 4: mean round-trip time [ms] {label}, sim / live");
        outln!(
            "{:>6} {:>15} {:>15} {:>15} {:>15} {:>15} {:>15}",
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
                .map(|(k, h)| {
                    let n = format!("{k}{sz}");
                    format!("{:>15}", format!("{:.3} / {:.3}", sv(ci, h, &n), lv(ci, h, &n)))
                })
                .collect();
            outln!("{:>6} {}", sz, row.join(" "));
        }
    }
    let lost: u64 = live
        .iter()
        .flat_map(|r| r.idle.iter().chain(&r.congested))
        .map(|p| p.sent - p.received.min(p.sent))
        .sum();
    let sent: u64 = live
        .iter()
        .flat_map(|r| r.idle.iter().chain(&r.congested))
        .map(|p| p.sent)
        .sum();
    outln!("(live: ping -Q TOS -s SIZE-28 from src to dst, mean of each probe's pings; {lost} of {sent} pings unanswered)");

    type Get<'a> = &'a dyn Fn(usize, usize, &str) -> f64;
    let growth = |g: Get, ci: usize, k: &str| {
        (0..3)
            .map(|h| g(ci, h, &format!("{k}1500")) - g(ci, h, &format!("{k}64")))
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let topo = |g: Get, ci: usize, k: &str| {
        SIZES
            .iter()
            .map(|s| g(ci, 2, &format!("{k}{s}")) - g(ci, 0, &format!("{k}{s}")))
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let (s, l): (Get, Get) = (&sv, &lv);
    outln!(
        "\n{:<28} {:<14} {:<26} {:<26}",
        "Figure 4 summary",
        "paper",
        "sim",
        "live"
    );
    outln!(
        "{:<28} {:<14} {:<26} {:<26}",
        "EF RTT, 128 B, congested",
        paper.claim("ef_rtt_128_congested"),
        format!("{:.3} ms (5 hops)", s(1, 2, "ef128")),
        format!("{:.3} ms (5 hops)", l(1, 2, "ef128"))
    );
    outln!(
        "{:<28} {:<14} {:<26} {:<26}",
        "BE RTT, 128 B, congested",
        paper.claim("be_rtt_128_congested"),
        format!("{:.3} ms (5 hops)", s(1, 2, "be128")),
        format!("{:.3} ms (5 hops)", l(1, 2, "be128"))
    );
    for (label, paper, ci) in [
        ("size growth, congested", paper.claim("size_growth_congested"), 1),
        ("size growth, no congestion", paper.claim("size_growth_idle"), 0),
    ] {
        outln!(
            "{:<28} {:<14} {:<26} {:<26}",
            label,
            paper,
            format!("EF {:.3}, BE {:.3} ms", growth(s, ci, "ef"), growth(s, ci, "be")),
            format!("EF {:.3}, BE {:.3} ms", growth(l, ci, "ef"), growth(l, ci, "be"))
        );
    }
    outln!(
        "{:<28} {:<14} {:<26} {:<26}",
        "topology 3 -> 5 hops, EF",
        paper.claim("topology_growth"),
        format!("{:.3} cong., {:.3} idle", topo(s, 1, "ef"), topo(s, 0, "ef")),
        format!("{:.3} cong., {:.3} idle", topo(l, 1, "ef"), topo(l, 0, "ef"))
    );
}
