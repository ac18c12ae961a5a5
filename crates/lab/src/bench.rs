//! `qosnet bench forward`: what one router can forward on the namespace
//! topology `h1 — r — h2`, RFC 2544-style (§26.1, throughput: the highest
//! offered rate forwarded without loss, found by binary search over
//! trials), for Linux kernel forwarding and qosnet routers with FIFO, TDP
//! and DiffServ ports, at 64- and 1518-byte frames, in one run — so the
//! ratios against the kernel are measured on the same machine in the same
//! minutes.
//!
//! **Offering more than the router carries.** A UDP socket generator is
//! slower than a router (every datagram crosses the sender's whole IP
//! stack), so the old version of this benchmark measured the generator.
//! Here one thread writes pre-built Ethernet frames into a memory-mapped
//! AF_PACKET TX ring on h1's interface (one system call per batch, past the
//! qdisc: [`qosnet_io::afpacket`]), paced at the trial's rate, and counts the
//! frames that reach h2 in an AF_PACKET RX ring on h2's interface (no IP
//! stack on the receiving side either). Its ceiling, measured in the same
//! run with nothing behind h1's interface but the router's port, is
//! printed beside the results; a router whose zero-loss rate reaches it
//! was not saturated.
//!
//! **Placement and CPU cost.** The router gets CPU 0 and the generator the
//! last CPU ([`qosnet_io::rt::placement`]): qosnet's router thread is pinned
//! there, and the kernel's forwarding, which on veth would otherwise run
//! in the sender's system call, is steered there with RPS on the router's
//! ingress interface. For qosnet routers the ingress is not steered (set
//! `QOSNET_BENCH_RPS=1` to steer it too; RPS does not apply to AF_XDP's
//! XDP path): the copy into the router's receive ring then runs in the
//! generator's system call, on the other core, and is not counted — in
//! qosnet's favour; the counter's receive on an AF_XDP tester is the same
//! path and its cost is printed (below). Router CPU per forwarded packet
//! is the router core's softirq and irq time (`/proc/stat`, tick-sampled)
//! plus, for qosnet, the router thread's run time
//! (`/proc/self/task/*/schedstat`), over the trial, divided by the
//! packets forwarded: `1e9 / ns per packet` is packets per second per
//! core. On a machine shared with other work, the softirq time of CPU 0
//! includes theirs (small next to forwarding at these rates).
//!
//! **The counter's receive off the router core.** On veth a receiver's
//! path runs in a softirq on the CPU that sent the frame: h2's receive ran
//! in the kernel router's softirq, and inside qosnet's router thread's
//! `send`, where it was counted twice (the thread's run time and the
//! core's tick-sampled softirq time; 55 % of an AF_XDP router thread's
//! samples in a profile). h2's interface is steered to the generator's
//! core by RPS (AF_PACKET tester), or — XDP bypasses RPS — given threaded
//! NAPI (GRO on, which gives veth a NAPI instance, then `threaded`),
//! SCHED_FIFO on the generator's core, whose run time is printed as the
//! counter's cost (AF_XDP tester; veth's 256-frame ring then overflows
//! when a router sends a larger burst at once, which shows as loss).
//! Either way it is
//! counted for no router. qosnet's router ports drop frames at tcx
//! ingress after their socket took them
//! ([`qosnet_io::afpacket::AfPacketConfig::stack_drop`]; AF_XDP ports take
//! them at XDP), so the router namespace's IP stack costs nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use qosnet_core::probe::Probe;
use qosnet_core::time::Duration;
use qosnet_core::wire::{self, UdpSpec, ETH_HDR, IPV4_HDR, UDP_HDR};
use serde::Serialize;

use crate::lab::{Lab, LabSpec, NodeKind};
use crate::labrun::{LiveLab, LiveOptions, TrafficSource};
use qosnet_io::afpacket::{AfPacketConfig, TxMode};
use qosnet_io::clock;
use qosnet_io::device::Device;
use qosnet_io::netdev::{DeviceKind, NetDevice, PortDevices};
use qosnet_io::xdp::XdpConfig;
use qosnet_live::driver::DriverConfig;

/// Settings of a forwarding benchmark.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub prefix: String,
    /// Length of each trial.
    pub trial: Duration,
    /// Ethernet frame sizes including the FCS (64 and 1518 by default).
    pub frame_sizes: Vec<usize>,
    /// Routers: `kernel` and qosnet schedulers (`fifo`, `tdp`, `diffserv`)
    /// on AF_PACKET ports, or on AF_XDP ports with `/af_xdp` (`fifo/af_xdp`).
    pub routers: Vec<String>,
    /// Binary search steps per (router, size).
    pub steps: usize,
    /// Loss allowed in a passing trial (RFC 2544: 0).
    pub loss: f64,
    /// The generator's and counter's device. AF_XDP takes frames for h2
    /// at XDP, before h2's IP stack, which otherwise runs on the router
    /// core for every router alike (route lookup, ICMP port unreachable).
    pub tester: DeviceKind,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            prefix: "qnb".into(),
            trial: Duration::from_millis(1000),
            frame_sizes: vec![64, 1518],
            routers: ["kernel", "fifo", "fifo/af_xdp", "tdp", "diffserv"]
                .map(String::from)
                .to_vec(),
            steps: 7,
            loss: 0.0,
            tester: DeviceKind::AfPacket,
        }
    }
}

/// One trial at one offered rate.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Trial {
    pub offered_pps: f64,
    pub sent: u64,
    pub received: u64,
    /// Router CPU nanoseconds per forwarded packet in this trial: the
    /// router core's softirq + irq time plus, for qosnet, the router
    /// thread's run time.
    pub cpu_ns_per_pkt: f64,
    /// Of which the router core's softirq + irq time (`/proc/stat`,
    /// sampled at each 4 ms tick): the kernel's whole forwarding path.
    pub softirq_ns_per_pkt: f64,
    /// Of which qosnet's router thread (user space and its system calls).
    pub thread_ns_per_pkt: f64,
    /// The counter's receive (h2's NAPI thread): not the router's, shown
    /// so its size is known.
    pub counter_ns_per_pkt: f64,
    /// The generator sent less than 90 % of the offered rate (the machine
    /// kept it off its core): the trial says little about the router.
    pub generator_short: bool,
}

/// The result for one router and frame size.
#[derive(Clone, Debug, Serialize)]
pub struct BenchPoint {
    pub router: String,
    pub frame_bytes: usize,
    /// What the generator reached with nothing limiting it but the
    /// router's receive ring, in this run.
    pub generator_pps: f64,
    /// Highest offered rate forwarded within the loss allowance.
    pub zero_loss_pps: f64,
    /// Router CPU per forwarded packet at that rate, and its parts (as in
    /// [`Trial`]).
    pub cpu_ns_per_pkt: f64,
    pub softirq_ns_per_pkt: f64,
    pub thread_ns_per_pkt: f64,
    pub counter_ns_per_pkt: f64,
    /// Router CPU per forwarded packet in the ceiling trial (offered as
    /// fast as the generator goes): the router busiest, batches fullest.
    pub saturated_ns_per_pkt: f64,
    pub trials: Vec<Trial>,
}

fn scenario(sched: &str) -> String {
    format!(
        r#"
[scenario]
name = "bench-{sched}"
duration = "1s"
[tdp]
tf = "250us"
tfs_per_tc = 10
[defaults.router]
scheduler = "{sched}"
queue_packets = 4096
[defaults.link]
capacity = "100Gb/s"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "h2"
kind = "host"
[[link]]
a = "h1"
b = "r"
[[link]]
a = "r"
b = "h2"
"#
    )
}

const H1: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 0, 0, 1);
const H2: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 0, 1, 2);
const DPORT: u16 = 9000;

/// Softirq + irq time of `cpu` so far, in nanoseconds (`/proc/stat`,
/// counted in USER_HZ ticks of 10 ms).
fn cpu_irq_ns(cpu: usize) -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    let tag = format!("cpu{cpu} ");
    s.lines()
        .find(|l| l.starts_with(&tag))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq
            (v.get(5).copied().unwrap_or(0) + v.get(6).copied().unwrap_or(0)) * 10_000_000
        })
        .unwrap_or(0)
}

/// Steer receive processing of `ifname` in namespace `ns` to `cpu` (RPS).
fn steer(ns: &str, ifname: &str, cpu: usize) -> Result<(), String> {
    let path = format!("/sys/class/net/{ifname}/queues/rx-0/rps_cpus");
    write_sysfs_in(ns, &path, &format!("{:x}", 1u64 << cpu), |why| {
        format!("RPS on {ifname} in {ns}: {why}")
    })
}

/// Write `value` to the sysfs file `path` as namespace `ns` sees it
/// (`ip netns exec` mounts the namespace's own sysfs); a refusal is
/// reported as `refused(the shell's error)`.
fn write_sysfs_in(
    ns: &str,
    path: &str,
    value: &str,
    refused: impl FnOnce(&str) -> String,
) -> Result<(), String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "sh", "-c", &format!("echo {value} > {path}")])
        .output()
        .map_err(|e| format!("ip netns exec: {e}"))?;
    if !out.status.success() {
        return Err(refused(String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(())
}

/// A threaded NAPI instance of one interface: a kernel thread
/// `napi/IFNAME-ID` whose run time is that receive path's CPU time.
#[derive(Clone, Debug)]
struct Napi {
    pid: i32,
    ifname: String,
}

/// Pids of the kernel's NAPI threads (`napi/...`).
fn napi_threads() -> std::collections::BTreeSet<i32> {
    let mut out = std::collections::BTreeSet::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.starts_with("napi/") {
            out.insert(pid);
        }
    }
    out
}

/// Give `ifname` in namespace `ns` a NAPI thread of its own (GRO on, which
/// on veth enables NAPI, then `threaded`), pinned to `cpu` if given,
/// under SCHED_FIFO at `rt_prio`.
///
/// Why: veth runs a receiver's whole path — the kernel's forwarding, or
/// the copy into a router's socket — in a softirq on whichever CPU sent
/// the frame, often inside a qosnet router thread's `send`, where it was
/// counted twice (in the thread's run time and in the CPU's tick-sampled
/// softirq time). In a thread of its own it is counted once, exactly.
fn threaded_napi(ns: &str, ifname: &str, cpu: Option<usize>, rt_prio: i32) -> Result<Napi, String> {
    let before = napi_threads();
    qosnet_io::netns::run_in(ns, || qosnet_io::iface::set_gro(ifname, true))
        .map_err(|e| format!("{ns}: {e}"))?
        .map_err(|e| format!("GRO on {ifname} in {ns}: {e}"))?;
    write_sysfs_in(ns, &format!("/sys/class/net/{ifname}/threaded"), "1", |why| {
        format!("threaded NAPI on {ifname} in {ns}: {why} (needs Linux >= 5.12)")
    })?;
    let tag = format!("napi/{ifname}-");
    let new: Vec<i32> = napi_threads()
        .difference(&before)
        .copied()
        .filter(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.starts_with(&tag)))
        .collect();
    let [pid] = new[..] else {
        return Err(format!(
            "threaded NAPI on {ifname} in {ns}: expected one new `{tag}*` kernel thread, found {new:?}"
        ));
    };
    if let Some(c) = cpu {
        let tid = rustix::process::Pid::from_raw(pid);
        qosnet_io::rt::pin(tid, c).map_err(|e| format!("pinning {tag}{pid} to CPU {c}: {e}"))?;
    }
    // SCHED_FIFO: the thread preempts ordinary threads as the softirq it
    // replaces would, so a loaded machine does not leave frames in veth's
    // 256-slot ring until it overflows.
    qosnet_io::sys::sched_set_pid(pid, libc::SCHED_FIFO, rt_prio)
        .map_err(|e| format!("SCHED_FIFO for {tag}{pid}: {e}"))?;
    Ok(Napi {
        pid,
        ifname: ifname.to_string(),
    })
}

/// CPU time of task `pid` so far, in nanoseconds (`/proc/PID/schedstat`).
fn task_ns(pid: i32) -> Result<u64, String> {
    std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("NAPI thread {pid} is gone"))
}

/// One reading of every CPU meter of a trial.
#[derive(Clone, Copy, Default)]
struct Meter {
    softirq: u64,
    thread: u64,
    counter: u64,
}

/// The generator and counter: frames into h1's TX ring, frames out of
/// h2's RX ring (AF_PACKET, or AF_XDP with [`BenchConfig::tester`]).
struct Gen {
    tx: NetDevice,
    rx: NetDevice,
    frame: Vec<u8>,
}

impl Gen {
    fn open(lab: &Lab, frame_bytes: usize, tester: DeviceKind) -> Result<Gen, String> {
        let p1 = lab.port("h1", "r").ok_or("no h1 port")?.clone();
        let p2 = lab.port("h2", "r").ok_or("no h2 port")?.clone();
        let txc = AfPacketConfig {
            tx_mode: TxMode::Ring,
            tx_frames: 4096,
            rx_frames: 64,
            ..AfPacketConfig::default()
        };
        let rxc = AfPacketConfig {
            rx_frames: 16384,
            ..AfPacketConfig::default()
        };
        let xdp = XdpConfig {
            ring: 8192,
            // h2's and h1's kernels still answer the routers' ARP.
            pass_arp: true,
            ..XdpConfig::default()
        };
        let (tx, how_tx) = NetDevice::open(Some(&p1.netns), &p1.ifname, tester, &txc, &xdp)
            .map_err(|e| format!("generator: {e}"))?;
        let (rx, how_rx) = NetDevice::open(Some(&p2.netns), &p2.ifname, tester, &rxc, &xdp)
            .map_err(|e| format!("counter: {e}"))?;
        if tester != DeviceKind::AfPacket {
            eprintln!(
                "bench generator on {}: {how_tx}; counter on {}: {how_rx}",
                p1.ifname, p2.ifname
            );
        }
        let spec = UdpSpec {
            src_mac: p1.mac,
            dst_mac: p1.peer_mac,
            src: H1,
            dst: H2,
            sport: 9000,
            dport: DPORT,
            tos: 0,
            ttl: 64,
            ident: 0,
        };
        // Frame bytes include the 4-byte FCS the NIC would add.
        let ip_len = frame_bytes
            .saturating_sub(ETH_HDR + 4)
            .max(IPV4_HDR + UDP_HDR + 12);
        let frame = wire::build_udp(&spec, ip_len, &[]);
        Ok(Gen { tx, rx, frame })
    }

    /// Count this trial's frames waiting in h2's ring (probe seq in range).
    fn drain(&mut self, trial: u32, got: &mut u64) {
        let _ = self.rx.recv_batch(usize::MAX, |f, _| {
            if let Ok(info) = wire::parse_ipv4(f) {
                if info.dport == DPORT {
                    if let Some(d) = Probe::decode_any(wire::udp_payload(f, &info)) {
                        if d.flow() == trial {
                            *got += 1;
                        }
                    }
                }
            }
        });
    }

    /// Offer `pps` for `dur` (0: as fast as the ring takes frames), then
    /// wait 100 ms for stragglers. Returns (sent, received).
    fn trial(&mut self, trial: u32, pps: f64, dur: Duration, stop: &AtomicBool) -> (u64, u64) {
        // Flush leftovers of earlier trials.
        let mut junk = 0;
        self.drain(u32::MAX, &mut junk);
        let t0 = clock::monotonic_now();
        let end = t0 + dur;
        let (mut sent, mut got) = (0u64, 0u64);
        let off = ETH_HDR + IPV4_HDR + UDP_HDR;
        loop {
            let now = clock::monotonic_now();
            if now >= end || stop.load(Ordering::Relaxed) {
                break;
            }
            let due = if pps > 0.0 {
                ((now - t0).as_secs_f64() * pps) as u64
            } else {
                sent + 256
            };
            let mut n = 0;
            while sent < due && n < 256 {
                let p = Probe {
                    flow: trial,
                    seq: sent,
                    tx_ns: 0,
                };
                let _ = p.write_into(&mut self.frame[off..]);
                match self.tx.send(&self.frame) {
                    Ok(()) => {
                        sent += 1;
                        n += 1;
                    }
                    Err(_) => break,
                }
            }
            let _ = self.tx.flush();
            self.drain(trial, &mut got);
            if n == 0 {
                std::hint::spin_loop();
            }
        }
        let _ = self.tx.flush();
        let until = clock::monotonic_now() + Duration::from_millis(100);
        while clock::monotonic_now() < until {
            self.drain(trial, &mut got);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        // The ring counts a frame it could not send as sent; the counter
        // sees the truth, so refused frames show up as loss.
        (sent, got)
    }
}

/// Binary-search the zero-loss rate of the router behind `lab`;
/// `router_cpu` reads the router thread's CPU time (qosnet) or 0 (kernel).
fn search(
    cfg: &BenchConfig,
    lab: &Lab,
    frame_bytes: usize,
    meter: &dyn Fn() -> Result<Meter, String>,
    stop: &AtomicBool,
) -> Result<(f64, Vec<Trial>, f64), String> {
    let mut g = Gen::open(lab, frame_bytes, cfg.tester)?;
    // Warm-up: ARP, rings, caches.
    let _ = g.trial(0, 10_000.0, Duration::from_millis(200), stop);
    let mut trials = Vec::new();
    let mut k = 1u32;
    let mut run = |g: &mut Gen, pps: f64| -> Result<Trial, String> {
        // A trial the generator could not keep up with is repeated (twice
        // at most): on a shared machine it is the machine, not the router.
        let mut t = Trial::default();
        for _ in 0..3 {
            let m0 = meter()?;
            let (sent, got) = g.trial(k, pps, cfg.trial, stop);
            let m1 = meter()?;
            k += 1;
            let actual = sent as f64 / cfg.trial.as_secs_f64();
            let per = |a: u64, b: u64| b.saturating_sub(a) as f64 / got.max(1) as f64;
            let (softirq, thread) = (per(m0.softirq, m1.softirq), per(m0.thread, m1.thread));
            t = Trial {
                offered_pps: if pps > 0.0 { pps } else { actual },
                sent,
                received: got,
                cpu_ns_per_pkt: softirq + thread,
                softirq_ns_per_pkt: softirq,
                thread_ns_per_pkt: thread,
                counter_ns_per_pkt: per(m0.counter, m1.counter),
                generator_short: pps > 0.0 && actual < 0.9 * pps,
            };
            trials.push(t);
            if !t.generator_short {
                break;
            }
        }
        Ok(t)
    };
    // The ceiling: as fast as the generator goes.
    let top = run(&mut g, 0.0)?;
    let passes = |t: &Trial| t.received as f64 >= t.sent as f64 * (1.0 - cfg.loss) && t.sent > 0;
    if passes(&top) {
        return Ok((top.offered_pps, trials, top.offered_pps));
    }
    let (mut lo, mut hi) = (0.0, top.offered_pps);
    for _ in 0..cfg.steps {
        if stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        let mid = (lo + hi) / 2.0;
        let t = run(&mut g, mid)?;
        if passes(&t) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((lo, trials, top.offered_pps))
}

/// Run the benchmark: one point per router and frame size. Runs on a
/// thread of its own (pinned and reprioritised as the generator).
pub fn forward(cfg: &BenchConfig, stop: Arc<AtomicBool>) -> Result<Vec<BenchPoint>, String> {
    let cfg = cfg.clone();
    std::thread::Builder::new()
        .name("qosnet-bench".into())
        .spawn(move || forward_here(&cfg, stop))
        .map_err(|e| format!("starting the benchmark thread: {e}"))?
        .join()
        .map_err(|_| "benchmark thread panicked".to_string())?
}

fn forward_here(cfg: &BenchConfig, stop: Arc<AtomicBool>) -> Result<Vec<BenchPoint>, String> {
    let pl = qosnet_io::rt::placement();
    let (rcpu, gcpu) = (pl.router_cpu, pl.tester_cpu);
    // The generator must out-run the router even when the machine is
    // shared: its own core and (below) the highest CFS weight (a
    // SCHED_FIFO busy loop would be stopped by RT throttling 50 ms in
    // every second).
    if let Some(c) = gcpu {
        qosnet_io::rt::pin_to(c).map_err(|e| format!("pinning the generator to CPU {c}: {e}"))?;
    }

    // (The thread ends with the benchmark: nothing to restore.)
    let mut out = Vec::new();
    for router in &cfg.routers {
        if stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        let kernel = router == "kernel";
        let mut live = None;
        let mut lab_kernel = None;
        let lab: &Lab = if kernel {
            let spec = LabSpec::new(&cfg.prefix)
                .node("h1", NodeKind::Host)
                .node("r", NodeKind::KernelRouter)
                .node("h2", NodeKind::Host)
                .link("h1", "10.0.0.1/24", "r", "10.0.0.2/24")
                .link("r", "10.0.1.1/24", "h2", "10.0.1.2/24");
            lab_kernel.insert(Lab::up(&spec).map_err(|e| e.to_string())?)
        } else {
            // `SCHED` runs the router on AF_PACKET ports, `SCHED/af_xdp`
            // on AF_XDP ports ([`qosnet_io::xdp`]).
            let (sched, device) = match router.split_once('/') {
                Some((s, d)) => (s, d.parse::<DeviceKind>()?),
                None => (router.as_str(), DeviceKind::AfPacket),
            };
            let sc = qosnet_scenario::load_str(&format!("<bench {router}>"), &scenario(sched), &[])
                .map_err(|e| e.to_string())?;
            let o = LiveOptions {
                processes: None,
                metrics: None,
                placement: None,
                start_at: None,
                epoch: None,
                kills: Vec::new(),
                crash_holding_token: Vec::new(),
                stalls: None,
                prefix: cfg.prefix.clone(),
                driver: DriverConfig {
                    batch: 256,
                    cpu: rcpu,
                    nice: Some(-15),
                    ..DriverConfig::default()
                },
                afpacket: AfPacketConfig {
                    tx_mode: TxMode::Ring,
                    rx_frames: 8192,
                    tx_frames: 1024,
                    stack_drop: true,
                    ..AfPacketConfig::default()
                },
                devices: PortDevices {
                    default: device,
                    // As deep as the AF_PACKET ports' receive rings.
                    xdp: XdpConfig {
                        ring: 8192,
                        ..XdpConfig::default()
                    },
                    ..PortDevices::default()
                },
                timer_noise: false,
                verbose: false,
                emulate_cpu: false,
                emulate_wire: false,
                traffic: TrafficSource::Kernel,
                realtime: false,
            };
            live = Some(LiveLab::start(&sc, &o, stop.clone(), Vec::new(), None)?);
            live.as_ref().map(|l| l.lab()).ok_or("no lab")?
        };
        if let Some(c) = rcpu.filter(|_| kernel || std::env::var_os("QOSNET_BENCH_RPS").is_some()) {
            let p = lab.port("r", "h1").ok_or("no router port")?;
            steer(&p.netns, &p.ifname, c)?;
        }
        // The counter's receive runs on the generator's core, not in the
        // router's softirq or send: by RPS (a backlog of 1 000 frames
        // absorbs a router's burst), or — XDP bypasses RPS — in a NAPI
        // thread of its own.
        let pout = lab.port("h2", "r").ok_or("no h2 port")?;
        let counter = match (cfg.tester, gcpu) {
            (DeviceKind::AfXdp, _) => Some(threaded_napi(&pout.netns, &pout.ifname, gcpu, 50)?),
            (DeviceKind::AfPacket, Some(c)) => {
                steer(&pout.netns, &pout.ifname, c)?;
                None
            }
            (DeviceKind::AfPacket, None) => None,
        };
        std::thread::sleep(std::time::Duration::from_millis(100));
        // Raised only now, after the router thread was created: threads
        // inherit their creator's nice value, and a router thread that
        // inherited −20 forwarded nothing here.
        let old_nice = qosnet_io::rt::set_nice(-20);
        let meter = || -> Result<Meter, String> {
            Ok(Meter {
                softirq: rcpu.map_or(0, cpu_irq_ns),
                // The router thread runs in this process as qosnet-routers.
                thread: if kernel {
                    0
                } else {
                    thread_cpu_ns("qosnet-routers").unwrap_or(0)
                },
                counter: match &counter {
                    Some(n) => task_ns(n.pid).map_err(|e| format!("{}: {e}", n.ifname))?,
                    None => 0,
                },
            })
        };
        for &fb in &cfg.frame_sizes {
            let (pps, trials, top) = search(cfg, lab, fb, &meter, &stop)?;
            let at = trials
                .iter()
                .filter(|t| t.offered_pps <= pps + 0.5 && t.received > 0 && !t.generator_short)
                .max_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps))
                .copied()
                .unwrap_or_default();
            out.push(BenchPoint {
                router: router.clone(),
                frame_bytes: fb,
                generator_pps: top,
                zero_loss_pps: pps,
                cpu_ns_per_pkt: at.cpu_ns_per_pkt,
                softirq_ns_per_pkt: at.softirq_ns_per_pkt,
                saturated_ns_per_pkt: trials
                    .iter()
                    .find(|t| !t.generator_short && t.received > 0)
                    .map_or(0.0, |t| t.cpu_ns_per_pkt),
                thread_ns_per_pkt: at.thread_ns_per_pkt,
                counter_ns_per_pkt: at.counter_ns_per_pkt,
                trials,
            });
        }
        if let Some(n) = old_nice {
            qosnet_io::rt::set_nice(n);
        }
        if let Some(l) = live.take() {
            l.finish().map_err(|e| e.to_string())?;
        }
        if let Some(l) = lab_kernel.take() {
            l.down().map_err(|e| e.to_string())?;
        }
    }
    Ok(out)
}

/// Time this process's thread named `name` has run on a CPU, in
/// nanoseconds (`/proc/self/task/*/schedstat`, first field).
fn thread_cpu_ns(name: &str) -> Option<u64> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let st = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
        return st.split_whitespace().next()?.parse().ok();
    }
    None
}
