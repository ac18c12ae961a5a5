//! `qosnet bench forward`: packets per second through one router — Linux
//! kernel forwarding, qosnet FIFO and qosnet TDP on the same namespace
//! topology (`qosnet_live::bench`).

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};

use crate::args::{need_root, parse_duration, signals};

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Packets per second through one router: Linux kernel forwarding,
    /// qosnet FIFO and qosnet TDP on the same namespace topology.
    Forward(BenchArgs),
}

#[derive(Args)]
pub struct BenchArgs {
    /// Measured time per configuration and round.
    #[arg(long, default_value = "2s")]
    pub duration: String,
    /// Rounds of (kernel, FIFO, TDP).
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// UDP payload bytes (18 makes 64-byte frames).
    #[arg(long, default_value_t = 18)]
    pub payload: usize,
    #[arg(long, default_value = "qnb")]
    pub prefix: String,
    #[arg(long)]
    pub json: bool,
}

pub fn run(c: BenchCmd) -> Result<()> {
    let BenchCmd::Forward(a) = c;
    need_root("qosnet bench forward")?;
    let stop = signals()?;
    let cfg = qosnet_live::bench::BenchConfig {
        prefix: a.prefix.clone(),
        duration: parse_duration(&a.duration)?,
        payload: a.payload,
        rounds: a.rounds.max(1),
    };
    let pts = qosnet_live::bench::forward(&cfg, stop).map_err(|e| anyhow!("{e}"))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&pts)?);
        return Ok(());
    }
    outln!(
        "forwarding h1 -> router -> h2, UDP payload {} B ({}-byte frames), {} per run",
        a.payload,
        a.payload + 42 + 4,
        a.duration
    );
    outln!(
        "{:<8} {:>6} {:>14} {:>14}",
        "router",
        "round",
        "offered pps",
        "received pps"
    );
    for p in &pts {
        outln!(
            "{:<8} {:>6} {:>14.0} {:>14.0}",
            p.router,
            p.round,
            p.sent_pps,
            p.received_pps
        );
    }
    let mean = |k: &str| {
        let v: Vec<f64> = pts
            .iter()
            .filter(|p| p.router == k)
            .map(|p| p.received_pps)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let (k, f, t) = (mean("kernel"), mean("fifo"), mean("tdp"));
    outln!(
        "means: kernel {k:.0} pps, qosnet FIFO {f:.0} pps, qosnet TDP {t:.0} pps\nratios: qosnet FIFO / kernel = {:.2}, qosnet TDP / qosnet FIFO = {:.2}",
        f / k.max(1.0),
        t / f.max(1.0)
    );
    Ok(())
}
