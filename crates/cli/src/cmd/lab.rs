//! `qosnet lab run|up|exec|down`: a scenario as a live network-namespace
//! lab with qosnet routers (`qosnet_lab::labrun`), its results printed
//! like `qosnet sim`'s.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use qosnet_experiments::report::{self, lateness_line};
use qosnet_lab::lab;
use qosnet_lab::labrun::{self, LiveLab, LiveOptions, NodeProcesses};
use qosnet_lab::placement::Placement;

use super::print_driver;
use crate::args::{need_root, signals, DriverArgs, MetricsArgs, PrefixArgs, ScenarioArgs};

#[derive(Subcommand)]
pub enum LabCmd {
    /// Build the scenario's lab, run it live for its duration, print and
    /// write results like `qosnet sim`, and remove the lab (needs root).
    Run(LabRunArgs),
    /// Build the lab and keep qosnet routers running until Ctrl-C, for
    /// manual work with `qosnet lab exec` (ping, iperf3, irtt, tcpdump).
    Up(LabUpArgs),
    /// Run a command inside a node's namespace of a running lab.
    Exec(LabExecArgs),
    /// Remove every namespace of a lab prefix (leftovers of a crashed run);
    /// with --placement and --machine, only that machine's nodes'.
    Down(LabDownArgs),
    /// Join the results.json files the machines of a split lab wrote
    /// (`lab run --placement`) into one: sent from each flow's source
    /// machine, received, delay and jitter from its sink's.
    Merge(LabMergeArgs),
    /// Write the scenario as a lab for another tool: a containerlab
    /// topology whose nodes run `qosnet node` (no root needed).
    Export(LabExportArgs),
}

#[derive(Args)]
pub struct LabExportArgs {
    #[command(flatten)]
    pub sc: ScenarioArgs,
    /// Containerlab topology file to write (e.g. line.clab.yml); the node
    /// configs and the scenario go into qosnet-LAB/ beside it.
    #[arg(long, value_name = "FILE")]
    pub containerlab: PathBuf,
    /// Image of the qosnet nodes' containers (the binary is bound in).
    #[arg(long, default_value = "debian:bookworm-slim")]
    pub image: String,
    /// Image of the hosts' containers (needs iproute2).
    #[arg(long, default_value = "ghcr.io/hellt/network-multitool")]
    pub host_image: String,
    /// The qosnet binary on the machine that deploys the lab (default:
    /// this one).
    #[arg(long, value_name = "PATH")]
    pub qosnet_bin: Option<PathBuf>,
    /// Address each qosnet node serves Prometheus metrics on inside its
    /// container: HOST:PORT with a literal address, PORT (loopback), or
    /// `none`. The default is loopback only; 0.0.0.0:9469 makes it
    /// reachable on the container's management address.
    #[arg(long, value_name = "ADDR|none", default_value = qosnet_live::metrics::DEFAULT_ADDR,
          value_parser = export_metrics)]
    pub metrics: ExportMetrics,
}

/// `lab export --metrics`: the address every exported node serves on, or
/// none.
#[derive(Clone, Copy, Debug)]
pub struct ExportMetrics(pub Option<SocketAddr>);

/// The address is used inside the containers, so it must be a literal one
/// (a host name would be resolved here, not there).
fn export_metrics(s: &str) -> Result<ExportMetrics, String> {
    let s = s.trim();
    if s == "none" {
        return Ok(ExportMetrics(None));
    }
    if let Ok(port) = s.trim_start_matches(':').parse::<u16>() {
        return Ok(ExportMetrics(Some(SocketAddr::from(([127, 0, 0, 1], port)))));
    }
    s.parse::<SocketAddr>().map(|a| ExportMetrics(Some(a))).map_err(|_| {
        format!(
            "not a socket address: expected IP:PORT with a literal IP (e.g. {} loopback only, or 0.0.0.0:9469 on every address of the container), PORT, or none",
            qosnet_live::metrics::DEFAULT_ADDR
        )
    })
}

/// One machine's part of a lab split across machines.
#[derive(Args, Clone, Debug)]
pub struct PlacementArgs {
    /// Placement file (TOML): which machine runs which nodes, and each
    /// machine's underlay address; links between machines become VXLAN
    /// tunnels (docs/live.md, "Labs across machines").
    #[arg(long, value_name = "FILE", requires = "machine")]
    pub placement: Option<PathBuf>,
    /// The machine of the placement file this command plays.
    #[arg(long, value_name = "NAME", requires = "placement")]
    pub machine: Option<String>,
}

impl PlacementArgs {
    /// The placement and machine, checked against the scenario's nodes
    /// when there is one (before anything needs root).
    fn load(&self, sc: Option<&qosnet_scenario::Scenario>) -> Result<Option<labrun::PlacedOn>> {
        let (Some(f), Some(m)) = (&self.placement, &self.machine) else {
            return Ok(None);
        };
        let placement = Placement::load(f).map_err(|e| anyhow!(e))?;
        placement.machine(m).map_err(|e| anyhow!(e))?;
        if let Some(sc) = sc {
            let names: Vec<&str> = sc.nodes.iter().map(|n| n.name.as_str()).collect();
            placement.check(&names).map_err(|e| anyhow!(e))?;
        }
        Ok(Some(labrun::PlacedOn {
            placement,
            machine: m.clone(),
        }))
    }
}

#[derive(Args)]
pub struct LabDownArgs {
    #[command(flatten)]
    pub prefix: PrefixArgs,
    #[command(flatten)]
    pub placement: PlacementArgs,
}

#[derive(Args)]
pub struct LabMergeArgs {
    /// The results.json of every machine (`lab run --placement ... --out DIR`).
    #[arg(required = true, num_args = 2..)]
    pub parts: Vec<PathBuf>,
    /// Write the merged results.json here.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print the merged results.json to standard output instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct LabRunArgs {
    #[command(flatten)]
    pub sc: ScenarioArgs,
    #[command(flatten)]
    pub prefix: PrefixArgs,
    #[command(flatten)]
    pub driver: DriverArgs,
    /// Write results.json, flows.csv and delay.svg to this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print results.json to standard output instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Run every qosnet node (router, switch) as its own `qosnet node`
    /// process, so that killing one is a real node failure.
    #[arg(long)]
    pub processes: bool,
    /// `kill -9` a node's process this long after traffic starts:
    /// NODE@TIME, e.g. fe2@1.5s (a real node failure; needs --processes,
    /// implied by RETHER stations).
    /// Repeatable.
    #[arg(long, value_name = "NODE@TIME")]
    pub kill: Vec<String>,
    /// Inject CPU stalls: every EVERY from the start of traffic, take the
    /// router thread's core for LEN (a SCHED_FIFO 99 busy loop, as a
    /// kernel worker or the fair server would), e.g. 300us/200ms.
    #[arg(long, value_name = "LEN/EVERY")]
    pub stall: Option<String>,
    /// A RETHER station's process aborts while it holds the token, after
    /// its Nth token visit: STATION@N, e.g. s1@500 (the crash of a token
    /// holder, which a `--kill` cannot time). Repeatable.
    #[arg(long, value_name = "STATION@N")]
    pub crash_holding_token: Vec<String>,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// Start traffic at this UTC time, in seconds since 1970 (give every
    /// machine of a split lab the same, e.g. `$(( $(date +%s) + 30 ))`
    /// computed once); default: about 3 s after the lab is up, or with
    /// --placement the next whole 10 s at least 5 s away.
    #[arg(long, value_name = "UNIX_SECONDS")]
    pub start_at: Option<u64>,
    /// Who sends the flows: `tester` (one thread owning the hosts'
    /// interfaces: exact send times on the CTR, kernel receive
    /// timestamps, as the paper's RouterTester), `kernel` (UDP generators
    /// and sinks on the hosts' own stacks) or `auto` (the tester for
    /// scenarios with a [tdp] section unless --placement splits the lab,
    /// else kernel).
    #[arg(long, default_value = "auto")]
    pub traffic: String,
    /// With the tester, do not pin the router thread and the tester to
    /// separate cores, run them SCHED_FIFO or lock memory.
    #[arg(long)]
    pub no_realtime: bool,
}

#[derive(Args)]
pub struct LabUpArgs {
    #[command(flatten)]
    pub sc: ScenarioArgs,
    #[command(flatten)]
    pub prefix: PrefixArgs,
    #[command(flatten)]
    pub driver: DriverArgs,
    /// Run every qosnet node as its own process (`kill -9` one to see the
    /// others carry on; `qosnet lab exec` and `ps` show them).
    #[arg(long)]
    pub processes: bool,
    #[command(flatten)]
    pub metrics: MetricsArgs,
    #[command(flatten)]
    pub placement: PlacementArgs,
}

#[derive(Args)]
pub struct LabExecArgs {
    /// Scenario node (a split host's sender namespace is NODE_tx).
    pub node: String,
    #[command(flatten)]
    pub prefix: PrefixArgs,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    pub cmd: Vec<String>,
}

pub fn run(c: LabCmd) -> Result<()> {
    match c {
        LabCmd::Run(a) => lab_run(a),
        LabCmd::Up(a) => lab_up(a),
        LabCmd::Exec(a) => lab_exec(a),
        LabCmd::Export(a) => lab_export(a),
        LabCmd::Merge(a) => lab_merge(a),
        LabCmd::Down(a) => {
            need_root("qosnet lab down")?;
            let prefix = &a.prefix.prefix;
            let removed = match a.placement.load(None)? {
                Some(p) => {
                    let m = p.placement.machine(&p.machine).map_err(|e| anyhow!(e))?;
                    lab::cleanup_nodes(prefix, &m.nodes).map_err(|e| anyhow!("{e}"))?
                }
                None => lab::cleanup(prefix).map_err(|e| anyhow!("{e}"))?,
            };
            if removed.is_empty() {
                outln!("no namespaces of lab {prefix} found");
            } else {
                outln!("removed {}", removed.join(" "));
            }
            Ok(())
        }
    }
}

fn lab_run(a: LabRunArgs) -> Result<()> {
    let sc = a.sc.load()?;
    let paper = sc.paper.clone();
    let placement = a.placement.load(Some(&sc))?;
    // RETHER stations are each their own machine: one process each, so
    // a station's stall or `kill -9` is that station's alone.
    let processes = a.processes || sc.nodes.iter().any(|n| n.is_rether());
    let faults = Faults::parse(&a, &sc, processes)?;
    need_root("a live run")?;
    if let Some(dir) = &a.out {
        report::check_out_dir(dir)?;
    }
    let stop = signals()?;
    let mut o = LiveOptions {
        prefix: a.prefix.prefix.clone(),
        verbose: !a.json,
        ..LiveOptions::default()
    };
    a.driver.apply(&mut o)?;
    o.placement = placement;
    o.start_at = a
        .start_at
        .map(|s| qosnet_core::time::Instant(s.saturating_mul(1_000_000_000)));
    // `auto`: the tester for TDP testbeds, but a split lab's hosts are on
    // several machines, which one tester cannot drive.
    o.traffic = crate::args::parse_traffic(&a.traffic)?.unwrap_or_else(|| {
        if o.placement.is_some() {
            labrun::TrafficSource::Kernel
        } else {
            labrun::TrafficSource::auto(&sc)
        }
    });
    o.realtime = !a.no_realtime;
    // Served (in the root namespace) until this command returns.
    let _metrics = a.metrics.start()?;
    o.metrics = _metrics.as_ref().map(|(h, _)| h.clone());
    let _tmp;
    if processes {
        let (np, t) = node_processes(&a.sc)?;
        o.processes = Some(np);
        _tmp = t;
    }
    o.kills = faults.kills;
    o.stalls = faults.stalls;
    o.crash_holding_token = faults.crash_holding_token;
    let run = labrun::run(&sc, &o, stop).map_err(|e| anyhow!("{}: {e}", sc.name))?;
    let r = &run.results;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(r)?);
    } else {
        outln!(
            "scenario {} ({}), live, {} s, warm-up {} s",
            r.scenario,
            r.source,
            r.duration_s,
            r.warmup_s
        );
        out!("{}", report::flow_table(r, paper.as_ref()));
        if let Some(p) = report::paper_column(paper.as_ref()) {
            outln!("paper column: {}", p.source);
        }
        outln!();
        out!("{}", report::link_table(r));
        let sp = report::spread_table(r);
        if !sp.is_empty() {
            outln!("\ndelay spreads (jitter = max - min; TF = the scenario's time frame):");
            out!("{sp}");
        }
        outln!("{}", lateness_line(r));
    }
    if let Some(dir) = &a.out {
        report::write_outputs(dir, r, &run.buckets)?;
        if !a.json {
            outln!(
                "wrote {0}/results.json, {0}/flows.csv, {0}/delay.svg",
                dir.display()
            );
        }
    }
    Ok(())
}

/// `lab run`'s fault flags, checked against the scenario before anything
/// needs root. A timed fault must fall within the run: a kill at or after
/// its end would hold the lab until then, a stall schedule with no stall
/// inside it would do nothing.
struct Faults {
    kills: Vec<(String, qosnet_core::time::Duration)>,
    stalls: Option<qosnet_io::rt::StallSpec>,
    crash_holding_token: Vec<(String, u64)>,
}

impl Faults {
    fn parse(a: &LabRunArgs, sc: &qosnet_scenario::Scenario, processes: bool) -> Result<Faults> {
        let mut f = Faults {
            kills: Vec::new(),
            stalls: None,
            crash_holding_token: Vec::new(),
        };
        for k in &a.kill {
            f.kills.push(parse_kill(k, sc, processes)?);
        }
        if let Some(s) = &a.stall {
            let spec = qosnet_io::rt::StallSpec::parse(s).map_err(|e| anyhow!(e))?;
            spec.fits(sc.duration).map_err(|e| anyhow!("--stall {s}: {e}"))?;
            f.stalls = Some(spec);
        }
        for k in &a.crash_holding_token {
            let (node, n) = crate::args::split_at("--crash-holding-token", k, "STATION@N", "s1@500")?;
            if !sc.node_index(node).is_some_and(|i| sc.nodes[i].is_rether()) {
                bail!("--crash-holding-token {k}: the scenario has no RETHER station {node}");
            }
            let n: u64 = n.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                anyhow!("--crash-holding-token {k}: `{n}` is not a count of token visits (>= 1)")
            })?;
            f.crash_holding_token.push((node.to_string(), n));
        }
        Ok(f)
    }
}

/// `--kill NODE@DURATION`: a node process of the scenario, killed before
/// the end of the run.
fn parse_kill(
    k: &str,
    sc: &qosnet_scenario::Scenario,
    processes: bool,
) -> Result<(String, qosnet_core::time::Duration)> {
    let (node, at) = crate::args::split_at("--kill", k, "NODE@DURATION", "fe2@1.5s")?;
    if sc.node_index(node).is_none() {
        bail!("--kill {k}: the scenario has no node {node}");
    }
    if !processes {
        bail!("--kill {k}: needs --processes (each node its own process)");
    }
    let t = qosnet_scenario::units::parse_duration(at)
        .map_err(|e| anyhow!("--kill {k}: {e}; expected NODE@DURATION, e.g. fe2@1.5s"))?;
    if t >= sc.duration {
        bail!(
            "--kill {k}: {at} is not within the {} run (kills count from the start of traffic); give a time before {}, or a longer --duration",
            sc.duration,
            sc.duration
        );
    }
    Ok((node.to_string(), t))
}

fn lab_up(a: LabUpArgs) -> Result<()> {
    let sc = a.sc.load()?;
    let placement = a.placement.load(Some(&sc))?;
    need_root("qosnet lab up")?;
    let stop = signals()?;
    let mut o = LiveOptions {
        prefix: a.prefix.prefix.clone(),
        ..LiveOptions::default()
    };
    a.driver.apply(&mut o)?;
    o.placement = placement;
    // Served (in the root namespace) until this command returns.
    let _metrics = a.metrics.start()?;
    o.metrics = _metrics.as_ref().map(|(h, _)| h.clone());
    let _tmp;
    // RETHER stations are each their own machine: one process each, so
    // a station's stall or `kill -9` is that station's alone.
    if a.processes || sc.nodes.iter().any(|n| n.is_rether()) {
        let (np, t) = node_processes(&a.sc)?;
        o.processes = Some(np);
        _tmp = t;
    }
    let mut live = LiveLab::start(&sc, &o, stop.clone(), Vec::new(), None).map_err(|e| anyhow!("{e}"))?;
    let l = live.lab();
    outln!(
        "lab {} is up; qosnet routers are running. Ctrl-C removes it.",
        o.prefix
    );
    for n in l.spec().nodes.iter().filter(|n| l.spec().is_local(&n.name)) {
        let addrs: Vec<String> = l
            .ports(&n.name)
            .iter()
            .filter_map(|p| p.addr.map(|a| format!("{} {a}", p.ifname)))
            .collect();
        let pid = live
            .node_pid(&n.name)
            .map(|p| format!(" (process {p})"))
            .unwrap_or_default();
        outln!(
            "  {:<10} {:<8} ns {:<14} {}{pid}",
            n.name,
            format!("{:?}", n.kind).to_lowercase(),
            l.spec().netns_name(&n.name),
            addrs.join(", ")
        );
    }
    for t in l.tunnels() {
        outln!(
            "  {}:{} is VXLAN {} to {} over {} ({} -> {}:{}), MTU {}",
            t.node,
            t.ifname,
            t.vni,
            t.peer_node,
            t.dev,
            t.local,
            t.remote,
            t.dstport,
            t.mtu
        );
    }
    for s in live.layout.splits.iter().filter(|s| l.spec().is_local(&s.host)) {
        outln!(
            "  {} receives on br0 {}; its flows are sent from {} ({})",
            s.host,
            s.host_addr,
            s.sender,
            s.sender_addr
        );
    }
    let local_flow = sc
        .flows
        .iter()
        .find(|f| l.spec().is_local(&sc.nodes[f.from].name));
    if let Some(f) = local_flow {
        let p = if o.prefix == lab::DEFAULT_PREFIX {
            String::new()
        } else {
            format!(" --prefix {}", o.prefix)
        };
        let to = &live.net.nodes[f.to];
        if let (Some(a), Some(b)) = (live.net.nodes[f.from].ifaces.first(), to.ifaces.first()) {
            outln!(
                "try: qosnet lab exec {}{p} -- ping -c 3 {}   (its router: {})",
                sc.nodes[f.from].name,
                b.ip,
                a.peer_ip
            );
        }
    }
    let rep = live.wait(&stop);
    if let Some(r) = rep {
        print_driver(&r);
    }
    live.finish().map_err(|e| anyhow!("{e}"))?;
    outln!("lab {} removed", o.prefix);
    Ok(())
}

/// How labs start one `qosnet node` per node: this binary, the scenario
/// file (an embedded scenario is written to a temporary file, removed when
/// the returned guard drops) and the run's `--set` overrides.
fn node_processes(sc: &ScenarioArgs) -> Result<(NodeProcesses, Option<tempfile::TempDir>)> {
    let exe = std::env::current_exe().context("finding the qosnet binary")?;
    let sets = sc.run.overrides().sets();
    let on_disk = sc
        .scenario
        .as_deref()
        .filter(|p| std::path::Path::new(p).exists());
    if let Some(p) = on_disk {
        return Ok((
            NodeProcesses {
                exe,
                scenario: p.into(),
                sets,
            },
            None,
        ));
    }
    let e = match &sc.scenario {
        Some(p) => qosnet_experiments::find_scenario(p).ok_or_else(|| anyhow!("{p}: no such file"))?,
        None => qosnet_experiments::default_scenario(),
    };
    let dir = tempfile::tempdir().context("temporary directory")?;
    let path = dir.path().join("scenario.toml");
    std::fs::write(&path, e.text).context("writing the embedded scenario")?;
    Ok((
        NodeProcesses {
            exe,
            scenario: path,
            sets,
        },
        Some(dir),
    ))
}

fn lab_export(a: LabExportArgs) -> Result<()> {
    let sc = a.sc.load()?;
    let text = match &a.sc.scenario {
        Some(p) if std::path::Path::new(p).exists() => {
            std::fs::read_to_string(p).with_context(|| format!("reading {p}"))?
        }
        Some(p) => qosnet_experiments::find_scenario(p)
            .ok_or_else(|| anyhow!("{p}: no such file"))?
            .text
            .to_string(),
        None => qosnet_experiments::default_scenario().text.to_string(),
    };
    let bin = match &a.qosnet_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe().context("finding the qosnet binary")?,
    };
    let o = qosnet_lab::containerlab::ClabOptions {
        image: a.image.clone(),
        host_image: a.host_image.clone(),
        qosnet_bin: bin,
        metrics: a.metrics.0.map(|m| m.to_string()),
        sets: a.sc.run.overrides().sets(),
    };
    let e = qosnet_lab::containerlab::export(&sc, &text, &o).map_err(|e| anyhow!(e))?;
    let files = qosnet_lab::containerlab::write(&e, &a.containerlab).map_err(|e| anyhow!(e))?;
    for f in &files {
        outln!("wrote {}", f.display());
    }
    match a.metrics.0 {
        Some(m) if m.ip().is_loopback() => outln!(
            "metrics: each qosnet node serves http://{m}/metrics inside its container, loopback only (--metrics 0.0.0.0:9469 exposes it)"
        ),
        Some(m) => outln!(
            "metrics: each qosnet node serves http://{m}/metrics bound to {}, not loopback: reachable from outside its container",
            m.ip()
        ),
        None => {}
    }
    outln!("deploy: sudo containerlab deploy -t {}", a.containerlab.display());
    Ok(())
}

fn lab_merge(a: LabMergeArgs) -> Result<()> {
    let mut parts = Vec::new();
    for p in &a.parts {
        let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let r: qosnet_scenario::results::Results =
            serde_json::from_str(&text).with_context(|| format!("{}: not a results.json", p.display()))?;
        parts.push(r);
    }
    let r = qosnet_lab::placement::merge(&parts).map_err(|e| anyhow!(e))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        outln!(
            "scenario {} ({}), live on {} machines, {} s, warm-up {} s",
            r.scenario,
            r.source,
            parts.len(),
            r.duration_s,
            r.warmup_s
        );
        out!("{}", report::flow_table(&r, None));
        outln!();
        out!("{}", report::link_table(&r));
    }
    if let Some(f) = &a.out {
        std::fs::write(f, serde_json::to_string_pretty(&r)?)
            .with_context(|| format!("writing {}", f.display()))?;
        if !a.json {
            outln!("wrote {}", f.display());
        }
    }
    Ok(())
}

fn lab_exec(a: LabExecArgs) -> Result<()> {
    need_root("qosnet lab exec")?;
    let ns = format!("{}-{}", a.prefix.prefix, a.node);
    if !qosnet_io::netns::exists(&ns) {
        bail!(
            "namespace {ns} does not exist (is `qosnet lab up` running with prefix {}?)",
            a.prefix.prefix
        );
    }
    let st = std::process::Command::new("ip")
        .args(["netns", "exec", &ns])
        .args(&a.cmd)
        .status()
        .with_context(|| format!("running ip netns exec {ns}"))?;
    if !st.success() {
        std::process::exit(st.code().unwrap_or(1));
    }
    Ok(())
}
