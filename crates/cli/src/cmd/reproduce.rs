//! `qosnet reproduce NAME [--live]`: a paper's experiment from the
//! registry of `qosnet-experiments`, simulated or live, with the same
//! overrides applied to each of its runs; `--list` (or no name) lists the
//! experiments.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use qosnet_experiments::RunOptions;
use qosnet_scenario::stall::StallSpec;

use crate::args::RunArgs;

#[derive(Args)]
pub struct ReproduceArgs {
    /// The experiment: `tdp` (ICC 2006 Tables I and II), `diffserv`
    /// (DEGEB Tables 4-1 and 4-3, Figure 4); `--list` shows all.
    pub name: Option<String>,
    /// List the experiments and exit.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub run: RunArgs,
    /// Write each run's outputs under DIR/<scenario>/.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also run every scenario live in a namespace lab (root) and print
    /// paper, sim and live side by side.
    #[arg(long)]
    pub live: bool,
    /// Exit with status 1 when a verdict differs from the paper: a claim,
    /// or a figure whose difference the docs do not explain.
    #[arg(long)]
    pub strict: bool,
    /// Namespace prefix of the live labs.
    #[arg(long, default_value = qosnet_lab::lab::DEFAULT_PREFIX)]
    pub prefix: String,
    /// Who sends the live runs' flows: `tester` (one thread owning the
    /// hosts' interfaces, exact send times, kernel receive timestamps),
    /// `kernel` (UDP generators and sinks on the hosts' stacks) or `auto`
    /// (the tester for TDP testbeds).
    #[arg(long, default_value = "auto")]
    pub traffic: String,
    /// Live runs' port devices, as `qosnet lab run --device`: `af_packet`
    /// (default) or `af_xdp` for every router port, or per node
    /// (`R1=af_xdp`) or port (`R1:R2=af_xdp`); repeatable, later ones win.
    /// Used by the TDP and DiffServ experiments.
    #[arg(long, value_name = "[NODE[:PEER]=]KIND")]
    pub device: Vec<String>,
    /// Stall the routers for LEN every EVERY from the start of traffic
    /// (e.g. `300us/200ms`), in every run: simulated as `qosnet sim
    /// --stall` does, live as `qosnet lab run --stall` does, so sim and
    /// live are compared under the same stalls. The TDP experiment only.
    #[arg(long, value_name = "LEN/EVERY")]
    pub stall: Option<String>,
}

pub fn run(a: ReproduceArgs) -> Result<()> {
    let name = match a.name {
        Some(n) if !a.list => n,
        _ => {
            outln!("experiments (qosnet reproduce NAME [--live]):");
            out!("{}", qosnet_experiments::list());
            return Ok(());
        }
    };
    let e = qosnet_experiments::find(&name)?;
    let mut devices = qosnet_io::netdev::PortDevices::default();
    crate::args::add_devices(&mut devices, &a.device)?;
    let o = RunOptions {
        overrides: a.run.overrides(),
        out: a.out,
        prefix: a.prefix,
        traffic: crate::args::parse_traffic(&a.traffic)?,
        devices,
        stall: a
            .stall
            .as_deref()
            .map(StallSpec::parse)
            .transpose()
            .map_err(|e| anyhow!(e))?,
    };
    let v = e.run(a.live, &o)?;
    if a.strict {
        e.strict(&v)?;
    }
    Ok(())
}
