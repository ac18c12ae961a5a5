//! Arguments and helpers shared by several subcommands: the scenario
//! overrides (`--set`, `--seed`, `--duration`, merged once by
//! [`qosnet_experiments::Overrides`]), the scenario to load (a file, an
//! embedded scenario, or the default), lab prefix and live driver options,
//! the root check and signal handling.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use qosnet_core::time::Duration;
use qosnet_experiments::Overrides;
use qosnet_lab::labrun::LiveOptions;
use qosnet_scenario::{load_file, load_str, Scenario};

/// Changes to the scenario of a run (of every run, for `reproduce`).
#[derive(Args, Clone, Debug, Default)]
pub struct RunArgs {
    /// Override a scenario value: KEY=VALUE, e.g. scenario.duration=2s,
    /// flow.f1234.size=482, node.R*.scheduler=fifo (NAME, NAME-PREFIX* or *
    /// selects nodes, links, flows). Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Random seed; the same seed replays a run bit for bit.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Shorthand for --set scenario.duration=DURATION.
    #[arg(long)]
    pub duration: Option<String>,
}

impl RunArgs {
    pub fn overrides(&self) -> Overrides {
        Overrides {
            set: self.set.clone(),
            seed: self.seed,
            duration: self.duration.clone(),
        }
    }
}

/// A scenario and the changes to it.
#[derive(Args, Clone, Debug)]
pub struct ScenarioArgs {
    /// Scenario file (TOML). Without it, the embedded default
    /// scenarios/tdp-icc2006/tdp-1002.toml is used.
    pub scenario: Option<String>,
    #[command(flatten)]
    pub run: RunArgs,
}

impl ScenarioArgs {
    /// Load the scenario with the overrides: a file on disk, else a
    /// shipped scenario of that path compiled into the binary (so
    /// `scenarios/...` works from any directory), else the default.
    pub fn load(&self) -> Result<Scenario> {
        let sets = self.run.overrides().sets();
        let r = match &self.scenario {
            Some(p) if std::path::Path::new(p).exists() => load_file(p, &sets),
            Some(p) => match qosnet_experiments::find_scenario(p) {
                Some(e) => load_str(e.path, e.text, &sets),
                None => load_file(p, &sets),
            },
            None => {
                let e = qosnet_experiments::default_scenario();
                load_str(&format!("<embedded {}>", e.path), e.text, &sets)
            }
        };
        let sc = r.map_err(|e| anyhow!("{e}"))?;
        // Values accepted with a word of warning: said before any output,
        // with their place (file:line or the --set argument).
        for w in &sc.warnings {
            eprintln!("{w}");
        }
        Ok(sc)
    }
}

#[derive(Args, Clone, Debug)]
pub struct PrefixArgs {
    /// Namespace prefix: namespaces are PREFIX-NODE.
    #[arg(long, default_value = qosnet_lab::lab::DEFAULT_PREFIX)]
    pub prefix: String,
}

#[derive(Args, Clone, Debug)]
pub struct DriverArgs {
    /// Busy-poll the ports and the clock continuously (one core at 100%)
    /// instead of sleeping until the routers' next deadline.
    #[arg(long)]
    pub busy_poll: bool,
    /// Busy-poll this long before each deadline (default 100us).
    #[arg(long, value_name = "DURATION")]
    pub spin: Option<String>,
    /// Emulate each router's scenario `processing` time (as the simulator
    /// models the paper's PCs) before input processing.
    #[arg(long)]
    pub emulate_cpu: bool,
    /// Port devices: `af_packet` (default) or `af_xdp` for every qosnet
    /// port, or for one node (`R1=af_xdp`) or one port (`R1:R2=af_xdp`,
    /// R1's port towards R2); repeatable, later ones win. An AF_XDP port
    /// that cannot be had falls back to AF_PACKET with the reason printed.
    #[arg(long, value_name = "[NODE[:PEER]=]KIND")]
    pub device: Vec<String>,
    /// AF_XDP: ask for zero-copy (copy mode, with the reason, where the
    /// driver has none: veth).
    #[arg(long)]
    pub xdp_zero_copy: bool,
    /// AF_XDP: where the XDP program runs: auto (native, else generic),
    /// native or generic.
    #[arg(long, value_name = "MODE", default_value = "auto")]
    pub xdp_attach: String,
}

impl DriverArgs {
    pub fn apply(&self, o: &mut LiveOptions) -> Result<()> {
        o.driver.busy_poll = self.busy_poll;
        o.emulate_cpu = self.emulate_cpu;
        add_devices(&mut o.devices, &self.device)?;
        o.devices.xdp.zero_copy = self.xdp_zero_copy;
        o.devices.xdp.attach = self.xdp_attach.parse().map_err(|e: String| anyhow!(e))?;
        if let Some(s) = &self.spin {
            o.driver.spin = parse_duration(s)?;
        }
        Ok(())
    }
}

/// Apply `--device` arguments, in order, to `devices`.
pub fn add_devices(devices: &mut qosnet_io::netdev::PortDevices, args: &[String]) -> Result<()> {
    for d in args {
        devices.add_arg(d).map_err(|e| anyhow!(e))?;
    }
    Ok(())
}

/// `--metrics [ADDR]`: serve Prometheus metrics of the live nodes.
#[derive(Args, Clone, Debug, Default)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics on http://ADDR/metrics while running
    /// (HOST:PORT, :PORT or PORT; bare --metrics: 127.0.0.1:9469, loopback
    /// only). Per-port packets, bytes, drops by reason, queue depth,
    /// scheduler and node counters, timer lateness histogram.
    #[arg(long, value_name = "ADDR", num_args = 0..=1,
          default_missing_value = qosnet_live::metrics::DEFAULT_ADDR, value_parser = metrics_addr)]
    pub metrics: Option<SocketAddr>,
}

/// `--metrics ADDR` as clap checks it when parsing, so a bad address is
/// refused with the flag named before anything starts.
fn metrics_addr(s: &str) -> Result<SocketAddr, String> {
    qosnet_live::metrics::parse_addr(s)
        .map_err(|e| e.trim_start_matches(&format!("--metrics {s}: ")).to_string())
}

/// The line saying where metrics are served: a binding other than
/// loopback is said to be one, since it exposes the node's counters.
pub fn metrics_binding(addr: SocketAddr) -> String {
    if addr.ip().is_loopback() {
        format!("metrics: http://{addr}/metrics (loopback only)")
    } else {
        format!(
            "metrics: http://{addr}/metrics, bound to {} — not loopback: reachable from other machines",
            addr.ip()
        )
    }
}

impl MetricsArgs {
    /// Start the server if asked: its hub for the driver, and the server
    /// (serving until dropped).
    pub fn start(
        &self,
    ) -> Result<
        Option<(
            Arc<qosnet_live::metrics::MetricsHub>,
            qosnet_live::metrics::MetricsServer,
        )>,
    > {
        let Some(addr) = self.metrics else { return Ok(None) };
        let hub = qosnet_live::metrics::MetricsHub::new();
        let srv = qosnet_live::metrics::serve(addr, hub.clone()).map_err(|e| anyhow!(e))?;
        eprintln!("{}", metrics_binding(srv.addr));
        Ok(Some((hub, srv)))
    }
}

/// `--traffic tester|kernel|auto`: `None` for auto (the scenario decides).
pub fn parse_traffic(s: &str) -> Result<Option<qosnet_lab::labrun::TrafficSource>> {
    if s == "auto" {
        return Ok(None);
    }
    s.parse().map(Some).map_err(|e: String| anyhow!(e))
}

pub fn parse_duration(s: &str) -> Result<Duration> {
    qosnet_scenario::units::parse_duration(s).map_err(|e| anyhow!("{s}: {e}"))
}

/// A `FLAG NAME@VALUE` argument (`--kill fe2@1.5s`): the name and the
/// value, both non-empty, or an error naming the flag and the form.
pub fn split_at<'a>(flag: &str, arg: &'a str, form: &str, example: &str) -> Result<(&'a str, &'a str)> {
    match arg.split_once('@') {
        Some((n, v)) if !n.is_empty() && !v.is_empty() => Ok((n, v)),
        _ => Err(anyhow!("{flag} {arg}: expected {form}, e.g. {example}")),
    }
}

/// Root, or an error saying why `what` needs it.
pub fn need_root(what: &str) -> Result<()> {
    qosnet_lab::labtools::require_root(what).map_err(|e| anyhow!(e))
}

/// Ctrl-C, SIGTERM and SIGHUP set the returned flag; labs of this process
/// are removed even if the program does not get to it within 5 s.
pub fn signals() -> Result<Arc<AtomicBool>> {
    qosnet_lab::lab::install_signal_cleanup(std::time::Duration::from_secs(5))
        .context("installing signal handlers")
}

/// A flag Ctrl-C and SIGTERM set (for commands without a lab).
pub fn ctrl_c_flag() -> Result<Arc<AtomicBool>> {
    let f = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, f.clone()).context("installing signal handler")?;
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        sc: ScenarioArgs,
    }

    /// The flags become the one merged list of `--set` strings.
    #[test]
    fn flags_merge_into_sets() {
        let t = T::parse_from([
            "t",
            "x.toml",
            "--set",
            "flow.a.size=500",
            "--duration",
            "2s",
            "--seed",
            "3",
            "--set",
            "node.R*.scheduler=fifo",
        ]);
        assert_eq!(t.sc.scenario.as_deref(), Some("x.toml"));
        assert_eq!(
            t.sc.run.overrides().sets(),
            [
                "flow.a.size=500",
                "node.R*.scheduler=fifo",
                "scenario.seed=3",
                "scenario.duration=\"2s\""
            ]
        );
        let t = T::parse_from(["t"]);
        assert!(t.sc.scenario.is_none() && t.sc.run.overrides().sets().is_empty());
        let sc = t.sc.load().unwrap();
        assert!(sc.source.contains("tdp-1002"), "{}", sc.source);
    }
}
