//! `qosnet bench forward`: RFC 2544-style zero-loss throughput and router
//! CPU per forwarded packet through one router — Linux kernel forwarding
//! and qosnet FIFO, TDP and DiffServ — at 64- and 1518-byte frames, on the
//! same namespace topology in one run (`qosnet_lab::bench`), printed as
//! ratios against the kernel.

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};

use qosnet_lab::bench::BenchPoint;

use crate::args::{need_root, parse_duration, signals};

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Zero-loss forwarding rate and router CPU per packet: Linux kernel
    /// forwarding and qosnet routers on the same namespace topology.
    Forward(BenchArgs),
}

#[derive(Args)]
pub struct BenchArgs {
    /// Length of each trial of the binary search.
    #[arg(long, default_value = "1s")]
    pub trial: String,
    /// Binary search steps per router and frame size.
    #[arg(long, default_value_t = 7)]
    pub steps: usize,
    /// Ethernet frame sizes (with FCS), comma-separated.
    #[arg(long, default_value = "64,1518", value_delimiter = ',')]
    pub frames: Vec<usize>,
    /// Routers: `kernel` and qosnet schedulers, comma-separated; a
    /// scheduler runs on AF_PACKET ports, or on AF_XDP ports with
    /// `/af_xdp` (`fifo/af_xdp`).
    #[arg(
        long,
        default_value = "kernel,fifo,fifo/af_xdp,tdp,diffserv",
        value_delimiter = ','
    )]
    pub routers: Vec<String>,
    /// Loss a passing trial may have (RFC 2544: 0).
    #[arg(long, default_value_t = 0.0)]
    pub loss: f64,
    #[arg(long, default_value = "qnb")]
    pub prefix: String,
    /// The generator's and counter's device: `af_packet`, or `af_xdp`
    /// (the counter takes frames at XDP, before h2's IP stack, whose work
    /// otherwise lands on the router core for every router alike).
    #[arg(long, default_value = "af_packet")]
    pub tester: String,
    #[arg(long)]
    pub json: bool,
}

pub fn run(c: BenchCmd) -> Result<()> {
    let BenchCmd::Forward(a) = c;
    need_root("qosnet bench forward")?;
    let stop = signals()?;
    if !(0.0..1.0).contains(&a.loss) {
        return Err(anyhow!("--loss {}: a fraction in [0, 1)", a.loss));
    }
    let cfg = qosnet_lab::bench::BenchConfig {
        prefix: a.prefix.clone(),
        trial: parse_duration(&a.trial)?,
        frame_sizes: a.frames.clone(),
        routers: a.routers.clone(),
        steps: a.steps,
        loss: a.loss,
        tester: a.tester.parse().map_err(|e: String| anyhow!(e))?,
    };
    let pts = qosnet_lab::bench::forward(&cfg, stop).map_err(|e| anyhow!("{e}"))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&pts)?);
        return Ok(());
    }
    outln!(
        "h1 -> router -> h2 on veth; zero-loss rate by binary search ({} trials of {}), loss allowed {}, generator and counter on {}",
        a.steps + 1,
        a.trial,
        a.loss,
        a.tester
    );
    for line in table(&pts) {
        outln!("{line}");
    }
    Ok(())
}

/// Ratios of `p` against the kernel's row of the same frame size: zero-loss
/// rate, per-core rate (1e9 / ns/pkt), saturated per-core rate. `None`
/// where the run has no kernel row for that frame size, or a side has no
/// figure (no trial qualified: no rate, no CPU time): n/a, not NaN or 1e9.
fn vs_kernel(p: &BenchPoint, pts: &[BenchPoint]) -> [Option<f64>; 3] {
    let Some(k) = pts
        .iter()
        .find(|q| q.router == "kernel" && q.frame_bytes == p.frame_bytes)
    else {
        return [None; 3];
    };
    let pos = |x: f64| (x > 0.0 && x.is_finite()).then_some(x);
    let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b?);
    let per_core = |ns: f64| pos(ns).map(|ns| 1e9 / ns);
    [
        ratio(pos(p.zero_loss_pps), pos(k.zero_loss_pps)),
        ratio(per_core(p.cpu_ns_per_pkt), per_core(k.cpu_ns_per_pkt)),
        ratio(per_core(p.saturated_ns_per_pkt), per_core(k.saturated_ns_per_pkt)),
    ]
}

/// The text table of a bench run: header, one row per router and frame
/// size, the ratios against the kernel, and the notes saying what the
/// columns are (and why a ratio is missing).
fn table(pts: &[BenchPoint]) -> Vec<String> {
    let mut out = vec![format!(
        "{:<12} {:>6} {:>11} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9}",
        "router",
        "frame",
        "gen pps",
        "0-loss pps",
        "ns/pkt",
        "softirq",
        "thread",
        "sat ns",
        "counter",
        "vs kernel",
        "per core",
        "sat/core"
    )];
    let ratio = |r: Option<f64>| match r {
        Some(r) => format!("{r:>8.2}x"),
        None => format!("{:>9}", "n/a"),
    };
    for p in pts {
        let [r1, r2, r3] = vs_kernel(p, pts);
        out.push(format!(
            "{:<12} {:>6} {:>11.0} {:>11.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {} {} {}",
            p.router,
            p.frame_bytes,
            p.generator_pps,
            p.zero_loss_pps,
            p.cpu_ns_per_pkt,
            p.softirq_ns_per_pkt,
            p.thread_ns_per_pkt,
            p.saturated_ns_per_pkt,
            p.counter_ns_per_pkt,
            ratio(r1),
            ratio(r2),
            ratio(r3)
        ));
    }
    out.push(
        "ns/pkt: router CPU per packet forwarded in the highest passing trial = softirq (the router\n\
         core's, tick-sampled: the kernel's forwarding) + thread (qosnet's router thread; its receive copy\n\
         runs on the generator's core, uncounted). sat ns: the same in the ceiling trial (offered as fast\n\
         as the generator goes). counter: h2's receive (AF_XDP tester: its NAPI thread; AF_PACKET tester:\n\
         RPS-steered to the generator's core, not measured), never counted.\n\
         per core = (1e9 / ns/pkt) against the kernel's; sat/core likewise from sat ns. A zero-loss rate\n\
         equal to the generator's means the generator, not the router, was the limit."
            .into(),
    );
    if pts.iter().any(|p| {
        !pts.iter()
            .any(|q| q.router == "kernel" && q.frame_bytes == p.frame_bytes)
    }) {
        out.push(
            "vs kernel, per core, sat/core: n/a: no kernel baseline in this run; add `kernel` to --routers"
                .into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(router: &str, frame: usize, pps: f64, ns: f64) -> BenchPoint {
        BenchPoint {
            router: router.into(),
            frame_bytes: frame,
            generator_pps: 500_000.0,
            zero_loss_pps: pps,
            cpu_ns_per_pkt: ns,
            softirq_ns_per_pkt: ns / 2.0,
            thread_ns_per_pkt: ns / 2.0,
            counter_ns_per_pkt: 0.0,
            saturated_ns_per_pkt: ns,
            trials: Vec::new(),
        }
    }

    #[test]
    fn without_a_kernel_row_ratios_are_na_with_the_reason() {
        let pts = [
            point("fifo", 64, 200_000.0, 1000.0),
            point("tdp", 64, 150_000.0, 1500.0),
        ];
        for p in &pts {
            assert_eq!(vs_kernel(p, &pts), [None; 3]);
        }
        let t = table(&pts).join("\n");
        assert!(!t.contains("NaN") && !t.contains("inf"), "{t}");
        let fifo = t.lines().find(|l| l.starts_with("fifo")).unwrap();
        assert_eq!(fifo.matches("n/a").count(), 3, "{fifo}");
        assert!(
            t.contains("no kernel baseline in this run; add `kernel` to --routers"),
            "{t}"
        );
    }

    #[test]
    fn with_a_kernel_row_ratios_are_against_it() {
        let pts = [
            point("kernel", 64, 100_000.0, 2000.0),
            point("fifo", 64, 200_000.0, 1000.0),
            // No trial qualified: no CPU time, so no per-core ratio.
            point("tdp", 64, 0.0, 0.0),
        ];
        let [r1, r2, r3] = vs_kernel(&pts[1], &pts);
        assert_eq!((r1, r2, r3), (Some(2.0), Some(2.0), Some(2.0)));
        assert_eq!(vs_kernel(&pts[2], &pts), [None; 3]);
        let t = table(&pts).join("\n");
        let fifo = t.lines().find(|l| l.starts_with("fifo")).unwrap();
        assert!(fifo.ends_with("    2.00x     2.00x     2.00x"), "{fifo}");
        assert!(!t.contains("no kernel baseline"), "{t}");
        assert!(!t.contains("NaN"), "{t}");
    }
}
