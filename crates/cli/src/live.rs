//! Live-mode subcommands: `qosnet lab run|up|exec|down`, `qosnet router`,
//! `qosnet gen`, `qosnet sink` and `qosnet bench forward`. The work is in
//! `qosnet-live`; this module parses arguments and prints.

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use qosnet_core::time::Duration;
use qosnet_live::labrun::{self, LiveLab, LiveOptions, LiveRun};
use qosnet_live::router_loop::DriverReport;
use qosnet_live::{lab, traffic};
use qosnet_scenario::results::Results;

use crate::report::{self, fmt_ns};
use crate::ScenarioArgs;

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
    /// Remove every namespace of a lab prefix (leftovers of a crashed run).
    Down(PrefixArgs),
}

#[derive(Args, Clone)]
pub struct PrefixArgs {
    /// Namespace prefix: namespaces are PREFIX-NODE.
    #[arg(long, default_value = lab::DEFAULT_PREFIX)]
    pub prefix: String,
}

#[derive(Args, Clone)]
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
}

impl DriverArgs {
    fn apply(&self, o: &mut LiveOptions) -> Result<()> {
        o.driver.busy_poll = self.busy_poll;
        o.emulate_cpu = self.emulate_cpu;
        if let Some(s) = &self.spin {
            o.driver.spin = parse_duration(s)?;
        }
        Ok(())
    }
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
}

#[derive(Args)]
pub struct LabUpArgs {
    #[command(flatten)]
    pub sc: ScenarioArgs,
    #[command(flatten)]
    pub prefix: PrefixArgs,
    #[command(flatten)]
    pub driver: DriverArgs,
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

fn parse_duration(s: &str) -> Result<Duration> {
    qosnet_scenario::units::parse_duration(s).map_err(|e| anyhow!("{s}: {e}"))
}

fn need_root(what: &str) -> Result<()> {
    if !qosnet_live::netns::is_root() {
        bail!(
            "{what} needs root: it creates network namespaces and veth pairs (CAP_SYS_ADMIN, \
             CAP_NET_ADMIN) and opens AF_PACKET sockets (CAP_NET_RAW); run it with sudo"
        );
    }
    Ok(())
}

/// Ctrl-C, SIGTERM and SIGHUP set the returned flag; labs of this process
/// are removed even if the program does not get to it within 5 s.
fn signals() -> Result<Arc<AtomicBool>> {
    lab::install_signal_cleanup(std::time::Duration::from_secs(5)).context("installing signal handlers")
}

pub fn lab_cmd(c: LabCmd) -> Result<()> {
    match c {
        LabCmd::Run(a) => lab_run(a),
        LabCmd::Up(a) => lab_up(a),
        LabCmd::Exec(a) => lab_exec(a),
        LabCmd::Down(a) => {
            need_root("qosnet lab down")?;
            let removed = lab::cleanup(&a.prefix).map_err(|e| anyhow!("{e}"))?;
            if removed.is_empty() {
                outln!("no namespaces named {}-* found", a.prefix);
            } else {
                outln!("removed {}", removed.join(" "));
            }
            Ok(())
        }
    }
}

/// The live lateness line printed beside results.
pub fn lateness_line(r: &Results) -> String {
    let get = |k: &str, f: &str| {
        r.extra
            .get(k)
            .and_then(|v| v.get(f))
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0)
    };
    let mut s = format!(
        "router timer lateness: p50 {}, p99 {}, p99.9 {}, max {} over {} deadlines",
        fmt_ns(get("timer_lateness", "p50_ns")),
        fmt_ns(get("timer_lateness", "p99_ns")),
        fmt_ns(get("timer_lateness", "p999_ns")),
        fmt_ns(get("timer_lateness", "max_ns")),
        get("timer_lateness", "count") as u64
    );
    if let Some(n) = r.extra.get("timer_noise").and_then(|n| n.get("wait_lateness")) {
        let f = |k: &str| n.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
        s += &format!(
            "\nmachine timer noise (before the run): wait_until p50 {}, p99 {}, max {}",
            fmt_ns(f("p50_ns")),
            fmt_ns(f("p99_ns")),
            fmt_ns(f("max_ns"))
        );
    }
    s
}

/// Run a loaded scenario live (shared with `reproduce tdp --live`).
pub fn run_live(
    sc: &qosnet_scenario::Scenario,
    prefix: &str,
    drv: &DriverArgs,
    verbose: bool,
) -> Result<LiveRun> {
    need_root("a live run")?;
    let stop = signals()?;
    let mut o = LiveOptions {
        prefix: prefix.to_string(),
        verbose,
        ..LiveOptions::default()
    };
    drv.apply(&mut o)?;
    labrun::run(sc, &o, stop).map_err(|e| anyhow!("{}: {e}", sc.name))
}

fn lab_run(a: LabRunArgs) -> Result<()> {
    let sc = a.sc.load()?;
    let paper = sc.paper.clone();
    let run = run_live(&sc, &a.prefix.prefix, &a.driver, !a.json)?;
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
        if let Some(p) = &paper {
            outln!("paper column: {}", p.source);
        }
        outln!();
        out!("{}", report::link_table(r));
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

fn lab_up(a: LabUpArgs) -> Result<()> {
    need_root("qosnet lab up")?;
    let sc = a.sc.load()?;
    let stop = signals()?;
    let mut o = LiveOptions {
        prefix: a.prefix.prefix.clone(),
        ..LiveOptions::default()
    };
    a.driver.apply(&mut o)?;
    let mut live = LiveLab::start(&sc, &o, stop.clone(), Vec::new(), None).map_err(|e| anyhow!("{e}"))?;
    let l = live.lab();
    outln!(
        "lab {} is up; qosnet routers are running. Ctrl-C removes it.",
        o.prefix
    );
    for n in &l.spec().nodes {
        let addrs: Vec<String> = l
            .ports(&n.name)
            .iter()
            .filter_map(|p| p.addr.map(|a| format!("{} {a}", p.ifname)))
            .collect();
        outln!(
            "  {:<10} {:<8} ns {:<14} {}",
            n.name,
            format!("{:?}", n.kind).to_lowercase(),
            l.spec().netns_name(&n.name),
            addrs.join(", ")
        );
    }
    for s in &live.layout.splits {
        outln!(
            "  {} receives on br0 {}; its flows are sent from {} ({})",
            s.host,
            s.host_addr,
            s.sender,
            s.sender_addr
        );
    }
    if let Some(f) = sc.flows.first() {
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

fn print_driver(r: &DriverReport) {
    outln!(
        "routers: {} frames in, {} out in {:.1} s; timer lateness {}",
        r.stats.rx_frames,
        r.stats.tx_frames,
        r.wall_s,
        r.lateness
    );
}

fn lab_exec(a: LabExecArgs) -> Result<()> {
    need_root("qosnet lab exec")?;
    let ns = format!("{}-{}", a.prefix.prefix, a.node);
    if !qosnet_live::netns::exists(&ns) {
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

// ---- qosnet gen / qosnet sink -------------------------------------------

#[derive(Args)]
pub struct GenArgs {
    /// Destination IP:PORT.
    #[arg(long)]
    pub dst: SocketAddrV4,
    /// Source IP:PORT to bind (default: any).
    #[arg(long)]
    pub bind: Option<SocketAddrV4>,
    /// Rate: e.g. 800pps, 6.4Mb/s (bit rates count IP bytes).
    #[arg(long, default_value = "1000pps")]
    pub rate: String,
    /// IP packet size in bytes (at least 52), or `imix`.
    #[arg(long, default_value = "1000")]
    pub size: String,
    /// cbr, poisson, or onoff:ON/OFF (e.g. onoff:10ms/20ms).
    #[arg(long, default_value = "cbr")]
    pub pattern: String,
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Stop after this many packets.
    #[arg(long)]
    pub count: Option<u64>,
    /// Flow id written in every probe.
    #[arg(long, default_value_t = 0)]
    pub flow: u32,
    #[arg(long, default_value_t = 0)]
    pub dscp: u8,
    #[arg(long)]
    pub ttl: Option<u8>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct SinkArgs {
    /// Address to listen on, IP:PORT.
    #[arg(long)]
    pub bind: SocketAddrV4,
    /// Listen this long (default: until Ctrl-C).
    #[arg(long)]
    pub duration: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub fn gen(a: GenArgs) -> Result<()> {
    let size = if a.size == "imix" {
        traffic::SizeDist::Imix
    } else {
        traffic::SizeDist::Fixed(
            a.size
                .parse()
                .map_err(|_| anyhow!("--size: a number of IP bytes or imix"))?,
        )
    };
    let rate =
        match qosnet_scenario::units::parse_rate(&a.rate).map_err(|e| anyhow!("--rate {}: {e}", a.rate))? {
            qosnet_scenario::units::Rate::Pps(p) => traffic::Rate::Pps(p),
            qosnet_scenario::units::Rate::Bps(b) => traffic::Rate::Bps(b),
        };
    let pattern = match a.pattern.as_str() {
        "cbr" => traffic::Pattern::Cbr,
        "poisson" => traffic::Pattern::Poisson,
        p => {
            let (on, off) = p
                .strip_prefix("onoff:")
                .and_then(|s| s.split_once('/'))
                .ok_or_else(|| anyhow!("--pattern: cbr, poisson or onoff:ON/OFF"))?;
            traffic::Pattern::OnOff {
                on: parse_duration(on)?,
                off: parse_duration(off)?,
            }
        }
    };
    let cfg = traffic::GenConfig {
        dst: a.dst,
        bind: a.bind,
        flow: a.flow,
        pattern,
        rate,
        size,
        dscp: a.dscp & 0x3f,
        ttl: a.ttl,
        start: None,
        duration: Some(parse_duration(&a.duration)?),
        count: a.count,
        seed: a.seed,
        measure: None,
        spin: qosnet_live::clock::DEFAULT_SPIN,
    };
    let stop = ctrl_c_flag()?;
    let r = traffic::run_gen(&cfg, &stop).with_context(|| format!("sending to {}", a.dst))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        outln!(
            "flow {}: sent {} datagrams ({} IP bytes) in {:.3} s, {} send errors {:?}; pacing lateness {}",
            r.flow,
            r.sent,
            r.sent_ip_bytes,
            (r.end_ns - r.start_ns) as f64 * 1e-9,
            r.send_errors,
            r.errors_by_kind,
            r.lateness
        );
    }
    Ok(())
}

fn ctrl_c_flag() -> Result<Arc<AtomicBool>> {
    let f = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, f.clone()).context("installing signal handler")?;
    }
    Ok(f)
}

pub fn sink(a: SinkArgs) -> Result<()> {
    let mut s = traffic::Sink::bind(a.bind).with_context(|| format!("binding {}", a.bind))?;
    let stop = ctrl_c_flag()?;
    let until = match &a.duration {
        Some(d) => qosnet_live::clock::now() + parse_duration(d)?,
        None => qosnet_core::Instant::MAX,
    };
    if !a.json {
        eprintln!("listening on {} ...", a.bind);
    }
    s.run_until(until, &stop)?;
    let reps = s.reports(&Default::default());
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"flows": reps, "counters": s.counters()}))?
        );
        return Ok(());
    }
    outln!(
        "{:<6} {:>9} {:>9} {:>6} {:>9} {:>11} {:>11} {:>11} {:>11} {:>12}",
        "flow",
        "sent",
        "received",
        "lost",
        "reordered",
        "delay min",
        "p50",
        "max",
        "jitter",
        "Mb/s"
    );
    for r in &reps {
        outln!(
            "{:<6} {:>9} {:>9} {:>6} {:>9} {:>11} {:>11} {:>11} {:>11} {:>12.3}",
            r.flow,
            r.sent,
            r.received,
            r.lost,
            r.reordered,
            fmt_ns(r.delay_ns.min as f64),
            fmt_ns(r.delay_ns.p50 as f64),
            fmt_ns(r.delay_ns.max as f64),
            fmt_ns(r.jitter_ns as f64),
            r.throughput_bps / 1e6
        );
    }
    let c = s.counters();
    outln!(
        "datagrams {}, not probes {}, socket drops {}, without kernel timestamp {}",
        c.datagrams,
        c.not_probe,
        c.socket_drops,
        c.no_kernel_timestamp
    );
    let _ = stop.load(Ordering::Relaxed);
    Ok(())
}

// ---- qosnet router --config ---------------------------------------------

#[derive(Args)]
pub struct RouterArgs {
    /// Router config (TOML): `scenario`, `node`, `[ports]`; see
    /// docs/router-config.md.
    #[arg(long)]
    pub config: PathBuf,
    #[command(flatten)]
    pub driver: DriverArgs,
}

/// A parsed `qosnet router` config.
struct RouterConfig {
    scenario: PathBuf,
    node: String,
    /// Scenario neighbour → local interface.
    ports: std::collections::BTreeMap<String, String>,
    netns: Option<String>,
    sets: Vec<String>,
    emulate_wire: bool,
}

fn router_config(path: &std::path::Path) -> Result<RouterConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let v: toml::Table = toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let known = ["scenario", "node", "ports", "netns", "set", "emulate_wire"];
    if let Some(k) = v.keys().find(|k| !known.contains(&k.as_str())) {
        bail!(
            "{}: unknown key `{k}` (known: {})",
            path.display(),
            known.join(", ")
        );
    }
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(String::from);
    let scenario =
        s("scenario").ok_or_else(|| anyhow!("{}: `scenario = \"FILE\"` is required", path.display()))?;
    let scenario = path.parent().unwrap_or(std::path::Path::new(".")).join(scenario);
    let node = s("node").ok_or_else(|| anyhow!("{}: `node = \"NAME\"` is required", path.display()))?;
    let mut ports = std::collections::BTreeMap::new();
    if let Some(t) = v.get("ports").and_then(|p| p.as_table()) {
        for (k, x) in t {
            let ifname = x
                .as_str()
                .ok_or_else(|| anyhow!("{}: ports.{k} must be an interface name", path.display()))?;
            ports.insert(k.clone(), ifname.to_string());
        }
    }
    let sets = match v.get("set") {
        Some(toml::Value::Array(a)) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
        _ => Vec::new(),
    };
    Ok(RouterConfig {
        scenario,
        node,
        ports,
        netns: s("netns"),
        sets,
        emulate_wire: v.get("emulate_wire").and_then(|x| x.as_bool()).unwrap_or(false),
    })
}

pub fn router(a: RouterArgs) -> Result<()> {
    use qosnet_live::afpacket::AfPacket;
    use qosnet_live::router_loop::{Driver, RouterHost};
    use qosnet_scenario::build::{build_router, tdp_setup, BuildOpts};
    let c = router_config(&a.config)?;
    if !qosnet_live::netns::is_root() {
        bail!("qosnet router needs root (or CAP_NET_RAW and CAP_NET_ADMIN) for AF_PACKET sockets in promiscuous mode");
    }
    let sc =
        qosnet_scenario::load_file(&c.scenario.to_string_lossy(), &c.sets).map_err(|e| anyhow!("{e}"))?;
    let net = qosnet_scenario::topo::Network::build(&sc).map_err(|e| anyhow!("{}: {e}", sc.source))?;
    let i = sc
        .node_index(&c.node)
        .filter(|&i| sc.nodes[i].is_router())
        .ok_or_else(|| anyhow!("{}: no router named {}", sc.source, c.node))?;
    let (ctr, plan) = tdp_setup(&sc, &net).map_err(|e| anyhow!("{e}"))?;
    let mut r = build_router(&sc, &net, ctr.as_ref(), plan.as_ref(), i, &BuildOpts::default())
        .map_err(|e| anyhow!("{e}"))?;
    r.set_transmit_catch_up(Duration::from_millis(1));
    let mut devs = Vec::new();
    let mut resolve = Vec::new();
    for (k, f) in net.nodes[i].ifaces.iter().enumerate() {
        let peer = &sc.nodes[f.peer].name;
        let ifname = c.ports.get(peer).ok_or_else(|| {
            anyhow!(
                "{}: [ports] lacks `{peer} = \"IFNAME\"` (the port towards {peer})",
                a.config.display()
            )
        })?;
        let af = qosnet_live::afpacket::AfPacketConfig::default();
        let dev = match &c.netns {
            Some(ns) => AfPacket::open_in(ns, ifname, &af),
            None => AfPacket::open(ifname, &af),
        }
        .with_context(|| format!("opening {ifname}"))?;
        // The port answers ARP with the NIC's own MAC.
        if let Some(p) = r.port_mut(k as u16) {
            p.cfg.mac = dev.mac();
        }
        outln!(
            "port {k}: {ifname} {}/{} mac {} -> {peer} ({})",
            f.ip,
            f.prefix_len,
            dev.mac(),
            f.peer_ip
        );
        devs.push(dev);
        resolve.push((k as u16, f.peer_ip));
    }
    for extra in c.ports.keys() {
        if !net.nodes[i]
            .ifaces
            .iter()
            .any(|f| &sc.nodes[f.peer].name == extra)
        {
            bail!(
                "{}: [ports] names {extra}, which is not a neighbour of {}",
                a.config.display(),
                c.node
            );
        }
    }
    let mut h = RouterHost::new(r, devs);
    h.resolve = resolve;
    if c.emulate_wire {
        h.wire = Some(
            net.nodes[i]
                .ifaces
                .iter()
                .map(|f| sc.links[f.link].delay)
                .collect(),
        );
    }
    let mut o = LiveOptions::default();
    a.driver.apply(&mut o)?;
    let mut d = Driver::new(vec![h], o.driver);
    let stop = ctrl_c_flag()?;
    if let Some(ctr) = ctr {
        outln!(
            "CTR: T_f {}, {} TFs per TC, on CLOCK_REALTIME (TF 0 began at the Unix epoch; TFs align to UTC seconds)",
            ctr.tf_len(),
            ctr.tfs_per_tc()
        );
    }
    outln!("router {} running; Ctrl-C stops it", c.node);
    d.run(|| stop.load(Ordering::Relaxed), None, |_, _| {});
    let rep = d.report();
    let rc = &d.hosts[0].router.counters;
    outln!(
        "forwarded {}, local {}, drops {}, unresolved {}",
        rc.forwarded,
        rc.local_rx,
        rc.total_drops(),
        rc.unresolved
    );
    for (k, v) in d.hosts[0].router.extra_counters() {
        outln!("  {k} {v}");
    }
    for p in &rep.ports {
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
    print_driver(&rep);
    Ok(())
}

// ---- qosnet bench forward -----------------------------------------------

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

pub fn bench(c: BenchCmd) -> Result<()> {
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

// ---- qosnet reproduce tdp --live ----------------------------------------

/// ICC 2006 Tables I and II: paper, simulator and live lab side by side.
pub fn reproduce_tdp_live(a: &crate::ReproduceArgs) -> Result<()> {
    need_root("qosnet reproduce tdp --live")?;
    let mut sets = a.set.clone();
    if let Some(d) = &a.duration {
        sets.push(format!("scenario.duration=\"{d}\""));
    }
    if let Some(s) = a.seed {
        sets.push(format!("scenario.seed={s}"));
    }
    let stop = signals()?;
    let mut runs = Vec::new();
    for e in crate::embedded::TDP_ICC2006.iter() {
        let sc = qosnet_scenario::load_str(e.path, e.text, &sets).map_err(|e| anyhow!("{e}"))?;
        let paper = sc.paper.as_ref().map(|p| p.values.clone()).unwrap_or_default();
        eprintln!("{}: simulating...", sc.name);
        let sim = qosnet_sim::Sim::new(sc.clone())
            .map_err(|e| anyhow!("{e}"))?
            .run();
        eprintln!("{}: running live ({} s)...", sc.name, sc.duration.as_secs_f64());
        let o = LiveOptions {
            prefix: a.prefix.clone(),
            emulate_cpu: true,
            ..LiveOptions::default()
        };
        let live = labrun::run(&sc, &o, stop.clone()).map_err(|e| anyhow!("{}: {e}", sc.name))?;
        if let Some(dir) = &a.out {
            report::write_outputs(
                &dir.join(format!("{}-live", sc.name)),
                &live.results,
                &live.buckets,
            )?;
        }
        runs.push((paper, sim, live.results));
    }
    for (title, fifo, tdp) in [
        (
            "Table I: end-to-end delay jitter, 1002-byte IP packets",
            &runs[0],
            &runs[1],
        ),
        (
            "Table II: end-to-end delay jitter, 482-byte IP packets",
            &runs[2],
            &runs[3],
        ),
    ] {
        outln!("\n{title} ({} s per run)", tdp.2.duration_s);
        outln!(
            "{:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
            "flow",
            "paper FIFO",
            "sim FIFO",
            "live FIFO",
            "paper TDP",
            "sim TDP",
            "live TDP",
            "lost live",
            "lost live"
        );
        outln!(
            "{:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "FIFO",
            "TDP"
        );
        for (i, f) in tdp.2.flows.iter().enumerate() {
            let p = |m: &std::collections::BTreeMap<String, f64>| {
                m.get(&f.name).map(|v| format!("{v:.2} ms")).unwrap_or_default()
            };
            let j = |r: &Results| {
                r.flows
                    .get(i)
                    .map(|x| fmt_ns(x.jitter_ns as f64))
                    .unwrap_or_default()
            };
            outln!(
                "{:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
                f.name,
                p(&fifo.0),
                j(&fifo.1),
                j(&fifo.2),
                p(&tdp.0),
                j(&tdp.1),
                j(&tdp.2),
                fifo.2.flows.get(i).map_or(0, |x| x.lost),
                f.lost
            );
        }
        outln!(
            "live FIFO: {}",
            lateness_line(&fifo.2).replace('\n', "\n           ")
        );
        outln!(
            "live TDP:  {}",
            lateness_line(&tdp.2).replace('\n', "\n           ")
        );
    }
    outln!(
        "\nlive runs emulate the scenarios' router processing time (uniform 2-20 us per packet, as the simulator\n\
         models the paper's PCs) and 100 Mb/s store-and-forward wires on veth; jitter = max - min one-way delay."
    );
    Ok(())
}
