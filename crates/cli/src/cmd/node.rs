//! `qosnet node --config FILE`: one node of a scenario — router, switch,
//! any kind the builder registry builds — as its own process on this
//! machine's interfaces (AF_PACKET, or AF_XDP with `--device af_xdp`), until SIGINT or SIGTERM. Labs start
//! one of these per node with `lab run --processes`, so that killing one is
//! a real node failure for the others; on real machines each runs its own.
//! `qosnet router --config FILE` is the same command. Config keys:
//! docs/router-config.md.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use qosnet_lab::labrun::LiveOptions;
use qosnet_live::node::{self, NodeConfig, OpenOptions};

use super::print_driver;
use crate::args::{ctrl_c_flag, DriverArgs, MetricsArgs};

#[derive(Args)]
pub struct NodeArgs {
    /// Node config (TOML): `scenario`, `node`, `[ports]`; see
    /// docs/router-config.md.
    #[arg(long)]
    pub config: PathBuf,
    #[command(flatten)]
    pub driver: DriverArgs,
    /// Run the driver thread at this nice value, -20..19 (negative needs
    /// CAP_SYS_NICE; labs pass theirs on).
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    pub nice: Option<i32>,
    #[command(flatten)]
    pub metrics: MetricsArgs,
}

pub fn run(a: NodeArgs) -> Result<()> {
    let cfg = NodeConfig::from_file(&a.config).map_err(|e| anyhow!(e))?;
    if !qosnet_io::netns::is_root() {
        bail!("qosnet node needs root (or CAP_NET_RAW and CAP_NET_ADMIN) for AF_PACKET sockets in promiscuous mode");
    }
    let mut o = LiveOptions::default();
    a.driver.apply(&mut o)?;
    if let Some(n) = a.nice {
        o.driver.nice = Some(n);
    }
    // Root only until the ports are open (docs/security.md).
    o.driver.drop_privileges = true;
    // Bound before the node starts, in this process's network namespace
    // (the machine's loopback), and served until the node stops.
    let metrics = a.metrics.start()?;
    let open = OpenOptions {
        metrics: metrics.as_ref().map(|(h, _)| h.clone()),
        // Real NICs answer with their own MACs; in a namespace lab the
        // veths already carry the scenario's.
        nic_macs: cfg.netns.is_none(),
        emulate_cpu: o.emulate_cpu,
        devices: o.devices.clone(),
        ..OpenOptions::default()
    };
    let stop = ctrl_c_flag()?;
    let name = cfg.node.clone();
    let (rep, dr) = node::run(
        &cfg,
        o.driver,
        &open,
        || stop.load(Ordering::Relaxed),
        |h| {
            for p in 0..h.node.port_count() {
                outln!("port {p}: {}", h.node.port_report(p as u16).name);
            }
            outln!("{} {name} running; Ctrl-C stops it", h.node.name());
        },
    )
    .map_err(|e| anyhow!(e))?;
    let shown: Vec<String> = rep
        .counters
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    outln!("{} ({}): {}", rep.name, rep.kind, shown.join(", "));
    for p in &dr.ports {
        outln!(
            "  {}: rx {} tx {} kernel drops {} tx busy {} tx errors {}",
            p.port,
            p.device.rx_frames,
            p.device.tx_frames,
            p.device.rx_kernel_drops,
            p.device.tx_busy,
            p.device.tx_errors
        );
    }
    print_driver(&dr);
    Ok(())
}
