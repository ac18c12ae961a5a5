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
    );
    for p in &pts {
        let k = pts
            .iter()
            .find(|q| q.router == "kernel" && q.frame_bytes == p.frame_bytes);
        // No CPU time measured (no trial qualified): n/a, not 1e9 pps.
        let per_core = |ns: f64| if ns > 0.0 { 1e9 / ns } else { f64::NAN };
        let (r1, r2, r3) = k.map_or((f64::NAN, f64::NAN, f64::NAN), |k| {
            (
                p.zero_loss_pps / k.zero_loss_pps.max(1.0),
                per_core(p.cpu_ns_per_pkt) / per_core(k.cpu_ns_per_pkt),
                per_core(p.saturated_ns_per_pkt) / per_core(k.saturated_ns_per_pkt),
            )
        });
        outln!(
            "{:<12} {:>6} {:>11.0} {:>11.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.2}x {:>8.2}x {:>8.2}x",
            p.router,
            p.frame_bytes,
            p.generator_pps,
            p.zero_loss_pps,
            p.cpu_ns_per_pkt,
            p.softirq_ns_per_pkt,
            p.thread_ns_per_pkt,
            p.saturated_ns_per_pkt,
            p.counter_ns_per_pkt,
            r1,
            r2,
            r3
        );
    }
    outln!(
        "ns/pkt: router CPU per packet forwarded in the highest passing trial = softirq (the router\n\
         core's, tick-sampled: the kernel's forwarding) + thread (qosnet's router thread; its receive copy\n\
         runs on the generator's core, uncounted). sat ns: the same in the ceiling trial (offered as fast\n\
         as the generator goes). counter: h2's receive (AF_XDP tester: its NAPI thread; AF_PACKET tester:\n\
         RPS-steered to the generator's core, not measured), never counted.\n\
         per core = (1e9 / ns/pkt) against the kernel's; sat/core likewise from sat ns. A zero-loss rate\n\
         equal to the generator's means the generator, not the router, was the limit."
    );
    Ok(())
}
