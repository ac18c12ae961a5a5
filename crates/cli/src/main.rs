//! `qosnet`: the command line. Subcommands simulate a scenario, reproduce
//! a paper's experiments beside the paper's numbers, and check scenarios.

/// Print to stdout; a closed pipe (`qosnet ... | head`) ends the program
/// quietly instead of panicking.
macro_rules! out {
    ($($t:tt)*) => { $crate::emit(&format!($($t)*)) };
}
macro_rules! outln {
    () => { $crate::emit("\n") };
    ($($t:tt)*) => { $crate::emit(&format!("{}\n", format!($($t)*))) };
}

pub(crate) fn emit(s: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(s.as_bytes()).and_then(|_| o.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to stdout: {e}");
        std::process::exit(2);
    }
}

mod embedded;
mod live;
mod plot;
mod report;
mod reproduce;
mod reproduce_ds;
mod reproduce_ds_live;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::{Args, Parser, Subcommand};
use qosnet_scenario::{load_file, load_str, Scenario};
use qosnet_sim::Sim;

#[derive(Parser)]
#[command(
    name = "qosnet",
    version,
    about = "Software router and network lab for deterministic and differentiated QoS"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario in the discrete-event simulator (default: the ICC 2006 TDP testbed).
    Sim(SimArgs),
    /// Run a paper's experiments and print qosnet's numbers beside the paper's.
    Reproduce(ReproduceArgs),
    /// Validate a scenario and show its network: addresses, routes, TDP plan.
    Check(ScenarioArgs),
    /// Live network-namespace labs of scenarios, with qosnet routers (root).
    Lab {
        #[command(subcommand)]
        cmd: live::LabCmd,
    },
    /// Send measurement UDP traffic (probe payloads) to a sink.
    Gen(live::GenArgs),
    /// Receive measurement traffic and print per-flow loss, delay, jitter.
    Sink(live::SinkArgs),
    /// Run one qosnet router of a scenario on this machine's interfaces.
    Router(live::RouterArgs),
    /// Benchmarks: `qosnet bench forward` (root).
    Bench {
        #[command(subcommand)]
        cmd: live::BenchCmd,
    },
}

#[derive(Args, Clone)]
pub struct ScenarioArgs {
    /// Scenario file (TOML). Without it, the embedded default
    /// scenarios/tdp-icc2006/tdp-1002.toml is used.
    pub scenario: Option<String>,
    /// Override a scenario value: KEY=VALUE, e.g. scenario.duration=2s,
    /// flow.f1234.size=482, node.*.scheduler=tdp. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Random seed; the same seed replays a run bit for bit.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Shorthand for --set scenario.duration=DURATION.
    #[arg(long)]
    pub duration: Option<String>,
}

#[derive(Args)]
struct SimArgs {
    #[command(flatten)]
    sc: ScenarioArgs,
    /// Write results.json, flows.csv and delay.svg to this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print simulator performance figures (events/s, simulated s per wall s).
    #[arg(long)]
    stats: bool,
    /// Print results.json to standard output instead of tables.
    #[arg(long)]
    json: bool,
    /// Write a pcap file per link direction into this directory (frames as
    /// transmitted, virtual-time nanosecond timestamps).
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,
    /// Only capture these directed links (e.g. R1->R2); repeatable.
    #[arg(long = "pcap-link", value_name = "FROM->TO", requires = "pcap")]
    pcap_links: Vec<String>,
}

#[derive(Args)]
pub struct ReproduceArgs {
    /// Which paper: `tdp` (ICC 2006 Tables I and II) or `diffserv`
    /// (DEGEB Tables 4-1 and 4-3, Figure 4).
    pub paper: String,
    /// Override values in every run (e.g. --set scenario.duration=2s).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Shorthand for --set scenario.duration=DURATION.
    #[arg(long)]
    pub duration: Option<String>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write each run's outputs under DIR/<scenario>/.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also run every scenario live in a namespace lab (root) and print
    /// paper, sim and live side by side.
    #[arg(long)]
    pub live: bool,
    /// Namespace prefix of the live labs.
    #[arg(long, default_value = "qn")]
    pub prefix: String,
}

impl ScenarioArgs {
    pub fn sets(&self) -> Vec<String> {
        let mut v = self.set.clone();
        if let Some(s) = self.seed {
            v.push(format!("scenario.seed={s}"));
        }
        if let Some(d) = &self.duration {
            v.push(format!("scenario.duration=\"{d}\""));
        }
        v
    }
    pub fn load(&self) -> Result<Scenario> {
        let sets = self.sets();
        let r = match &self.scenario {
            Some(p) if std::path::Path::new(p).exists() => load_file(p, &sets),
            Some(p) => match embedded::find(p) {
                Some(e) => load_str(e.path, e.text, &sets),
                None => load_file(p, &sets),
            },
            None => {
                let e = embedded::default_scenario();
                load_str(&format!("<embedded {}>", e.path), e.text, &sets)
            }
        };
        r.map_err(|e| anyhow!("{e}"))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Sim(a) => cmd_sim(a),
        Cmd::Reproduce(a) => reproduce::run(a),
        Cmd::Check(a) => cmd_check(a),
        Cmd::Lab { cmd } => live::lab_cmd(cmd),
        Cmd::Gen(a) => live::gen(a),
        Cmd::Sink(a) => live::sink(a),
        Cmd::Router(a) => live::router(a),
        Cmd::Bench { cmd } => live::bench(cmd),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn cmd_sim(a: SimArgs) -> Result<()> {
    let sc = a.sc.load()?;
    let paper = sc.paper.clone();
    let name = sc.name.clone();
    let mut sim = Sim::new(sc).map_err(|e| anyhow!("{name}: {e}"))?;
    sim.set_progress(!a.json);
    if let Some(dir) = &a.pcap {
        let files = sim.enable_pcap(dir, &a.pcap_links).map_err(|e| anyhow!(e))?;
        if !a.json {
            eprintln!("capturing {} link directions into {}", files.len(), dir.display());
        }
    }
    let r = sim.run();
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        outln!(
            "scenario {} ({}), seed {}, {} simulated, warm-up {}",
            r.scenario,
            r.source,
            r.seed,
            report::fmt_ns(r.duration_s * 1e9),
            report::fmt_ns(r.warmup_s * 1e9)
        );
        out!("{}", report::flow_table(&r, paper.as_ref()));
        if let Some(p) = &paper {
            outln!("paper column: {}", p.source);
        }
        outln!();
        out!("{}", report::link_table(&r));
        if a.stats {
            outln!("{}", report::engine_line(&r));
        }
    }
    if let Some(dir) = &a.out {
        let buckets: Vec<_> = (0..r.flows.len())
            .map(|i| (r.flows[i].name.clone(), sim.delay_buckets(i)))
            .collect();
        report::write_outputs(dir, &r, &buckets)?;
        if !a.json {
            outln!(
                "wrote {0}/results.json, {0}/flows.csv, {0}/delay.svg",
                dir.display()
            );
        }
    }
    Ok(())
}

fn cmd_check(a: ScenarioArgs) -> Result<()> {
    let sc = a.load()?;
    let net = qosnet_scenario::topo::Network::build(&sc).map_err(|e| anyhow!("{}: {e}", sc.source))?;
    outln!(
        "scenario {}: {} nodes, {} links, {} flows",
        sc.name,
        sc.nodes.len(),
        sc.links.len(),
        sc.flows.len()
    );
    for (i, n) in sc.nodes.iter().enumerate() {
        outln!(
            "node {} ({})",
            n.name,
            if n.is_router() { "router" } else { "host" }
        );
        for f in &net.nodes[i].ifaces {
            outln!(
                "  port {}/{} mac {} -> {}",
                f.ip,
                f.prefix_len,
                f.mac,
                sc.nodes[f.peer].name
            );
        }
        for r in net.nodes[i].routes.iter() {
            outln!("  route {r}");
        }
    }
    for (fi, f) in sc.flows.iter().enumerate() {
        let hops: Vec<String> = net.hops[fi]
            .iter()
            .map(|h| sc.nodes[h.node].name.clone())
            .collect();
        outln!(
            "flow {}: {:.1} pps, {} router hops: {}",
            f.name,
            f.pps(),
            hops.len(),
            hops.join(" ")
        );
    }
    if sc.tdp.is_some() {
        let plan = qosnet_scenario::tdpplan::plan(&sc, &net).map_err(|e| anyhow!("{}: {e}", sc.source))?;
        outln!("{}", plan.describe(&sc, &net));
    }
    outln!("ok");
    Ok(())
}
