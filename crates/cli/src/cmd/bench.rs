//! `qosnet bench forward`: RFC 2544-style zero-loss throughput and router
//! CPU per forwarded packet through one router — Linux kernel forwarding
//! and qosnet FIFO, TDP and DiffServ — at 64- and 1518-byte frames, on the
//! same namespace topology in one run (`qosnet_live::bench`), printed as
//! ratios against the kernel.

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};

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
    let cfg = qosnet_live::bench::BenchConfig {
        prefix: a.prefix.clone(),
        trial: parse_duration(&a.trial)?,
        frame_sizes: a.frames.clone(),
        routers: a.routers.clone(),
        steps: a.steps,
        loss: a.loss,
        tester: a.tester.parse().map_err(|e: String| anyhow!(e))?,
    };
    let pts = qosnet_live::bench::forward(&cfg, stop).map_err(|e| anyhow!("{e}"))?;
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
    outln!(
        "{:<12} {:>6} {:>14} {:>14} {:>12} {:>13} {:>10} {:>10}",
        "router",
        "frame",
        "generator pps",
        "zero-loss pps",
        "ns/pkt",
        "pps per core",
        "vs kernel",
        "per core"
    );
    for p in &pts {
        let k = pts
            .iter()
            .find(|q| q.router == "kernel" && q.frame_bytes == p.frame_bytes);
        // No CPU time measured (no trial qualified): n/a, not 1e9 pps.
        let per_core = |q: &qosnet_live::bench::BenchPoint| {
            if q.cpu_ns_per_pkt > 0.0 {
                1e9 / q.cpu_ns_per_pkt
            } else {
                f64::NAN
            }
        };
        let (r1, r2) = k.map_or((f64::NAN, f64::NAN), |k| {
            (
                p.zero_loss_pps / k.zero_loss_pps.max(1.0),
                per_core(p) / per_core(k),
            )
        });
        outln!(
            "{:<12} {:>6} {:>14.0} {:>14.0} {:>12.0} {:>13.0} {:>9.2}x {:>9.2}x",
            p.router,
            p.frame_bytes,
            p.generator_pps,
            p.zero_loss_pps,
            p.cpu_ns_per_pkt,
            per_core(p),
            r1,
            r2
        );
    }
    outln!(
        "ns/pkt: the router core's softirq+irq time (+ the qosnet router thread's run time) per packet\n\
         forwarded in the highest passing trial; pps per core = 1e9 / ns/pkt. A zero-loss rate equal to\n\
         the generator's means the generator, not the router, was the limit."
    );
    Ok(())
}
