//! Live tests: qosnet routers forwarding real frames between network
//! namespaces. They need root (namespaces, veth, AF_PACKET): ignored
//! otherwise (`scripts/test` includes them as root); external judges (ping,
//! iperf3, irtt) skip with a message when their binaries are missing, and
//! fail under CI (`.ci/run` installs them).
//!
//! Every test builds its own lab under a unique prefix (`qnl{pid}x{k}`),
//! talks only to addresses inside it, removes it on the way out — also when
//! it fails (the lab's `Drop`, and a [`Guard`] that removes the prefix) —
//! and checks that nothing is left. Tests take a lock so they run one at a
//! time: timing measurements must not share the machine's two cores with
//! another live test.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use qosnet_core::tdp::{is_tdp_tos, Ctr, TDP_TC_BIT, TDP_TF_BIT};
use qosnet_core::time::Duration;
use qosnet_core::wire;
use qosnet_io::afpacket::{AfPacket, AfPacketConfig};
use qosnet_io::device::{wait_readable, Device};
use qosnet_io::{clock, netns};
use qosnet_lab::labrun::{self, LiveLab, LiveOptions};
use qosnet_lab::testkit::{leftovers, require_root, tool, Guard};
use qosnet_scenario::load_str;

static SERIAL: Mutex<()> = Mutex::new(());

fn prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("qnl{}x{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Return early when a tool is missing ([`tool`]: CI fails instead).
macro_rules! require_bin {
    ($b:expr) => {
        if !tool($b) {
            return;
        }
    };
}

/// h1 — R — h2, one router, FIFO, 100 Mb/s.
const LINE: &str = r#"
[scenario]
name = "line"
duration = "1s"
warmup = "100ms"
[defaults.link]
capacity = "100Mb/s"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "R"
kind = "router"
[[node]]
name = "h2"
kind = "host"
[[link]]
a = "h1"
b = "R"
[[link]]
a = "R"
b = "h2"
[[flow]]
name = "a"
from = "h1"
to = "h2"
size = 500
rate = "2000pps"
[[flow]]
name = "b"
from = "h2"
to = "h1"
size = 1000
rate = "4Mb/s"
pattern = "poisson"
"#;

fn opts(prefix: &str) -> LiveOptions {
    LiveOptions {
        prefix: prefix.into(),
        timer_noise: false,
        ..LiveOptions::default()
    }
}

fn h(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn ping_through_a_qosnet_router_and_to_it() {
    require_root();
    require_bin!("ping");
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let p = prefix();
    let _g = Guard(p.clone());
    let sc = load_str("line", LINE, &[]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut live = LiveLab::start(&sc, &opts(&p), stop, Vec::new(), None).unwrap();
    // h2 is 10.0.1.2, R's port towards h1 is 10.0.0.2: the hosts have no
    // static neighbour entries, the router none either.
    for dst in ["10.0.1.2", "10.0.0.2", "10.0.1.1"] {
        let out = live
            .lab()
            .exec("h1", &["ping", "-c", "3", "-i", "0.2", "-W", "2", dst])
            .unwrap_or_else(|e| panic!("ping {dst}: {e}"));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("3 received"), "ping {dst}: {text}");
    }
    // TTL 1 through the router: time exceeded from R (traceroute's first hop).
    let out = live
        .lab()
        .command("h1", "ping")
        .unwrap()
        .args(["-c", "1", "-t", "1", "-W", "2", "10.0.1.2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Time to live exceeded"), "{text}");
    // The hosts learned the router's MAC from its own ARP requests (RFC
    // 826); forget it, and h2 has to ask.
    live.lab().exec("h2", &["ip", "neigh", "flush", "all"]).unwrap();
    live.lab()
        .exec("h2", &["ping", "-c", "1", "-W", "2", "10.0.1.1"])
        .unwrap();
    let (d, _) = live.stop().unwrap();
    let r = d.hosts[0].router().expect("a router");
    assert!(r.counters.control_count("icmp_echo_replies_tx") >= 7);
    assert!(
        r.counters.control_count("arp_requests_rx") >= 1,
        "{:?}",
        r.extra_counters()
    );
    assert!(
        r.counters.control_count("arp_replies_tx") >= 1,
        "{:?}",
        r.extra_counters()
    );
    // R knows both hosts: from its own start-up requests, or from theirs
    // (RFC 826 merges a request's sender), whichever came first. A CI run
    // once had h1's request reach R before R's own first timeout,
    // so R resolved only h2.
    for (port, host) in [(0, "10.0.0.1"), (1, "10.0.1.2")] {
        assert!(
            r.ports()[port].neighbor(h(host)).is_some(),
            "R does not know {host}: {:?}",
            r.extra_counters()
        );
    }
    assert!(
        r.counters.control_count("arp_resolved") >= 1,
        "{:?}",
        r.extra_counters()
    );
    assert_eq!(r.counters.control_count("icmp_time_exceeded_tx"), 1);
    drop(d);
    live.finish().unwrap();
    assert!(leftovers(&p).is_empty());
}

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn scenario_flows_arrive_complete() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let p = prefix();
    let _g = Guard(p.clone());
    let sc = load_str("line", LINE, &[]).unwrap();
    let cpu0 = cpu_denied_ns();
    let run = labrun::run(&sc, &opts(&p), Arc::new(AtomicBool::new(false))).unwrap();
    let denied = cpu_denied_ns().saturating_sub(cpu0);
    let r = &run.results;
    assert_eq!(r.mode, "live");
    let a = r.flow("a").unwrap();
    let b = r.flow("b").unwrap();
    // Router, generators and sinks are this process's threads: denied
    // the CPU for a tenth of the run or more (seen at load ~14), sockets
    // overflow and delays grow with the machine, not with qosnet. Then
    // only the accounting is checked.
    if denied >= 100_000_000 {
        qosnet_lab::testkit::relaxed(
            "completeness and delay",
            &format!("threads denied the CPU for {} ms", denied / 1_000_000),
        );
        eprintln!(
            "SKIPPED {}:{}: completeness and delay checks: threads denied the CPU for {} ms",
            file!(),
            line!(),
            denied / 1_000_000
        );
        for f in [a, b] {
            assert!(f.received > 0 && f.received + f.lost == f.sent, "{f:?}");
        }
        assert!(leftovers(&p).is_empty());
        return;
    }
    // 2000 pps for the 0.9 s after warm-up, from a generator that kept
    // time (a run beside two builds sent fewer with this process's threads
    // denied under 100 ms: the generator itself was late).
    let gen_late = r.extra["generator_lateness"]["a"]["max_ns"]
        .as_u64()
        .unwrap_or(u64::MAX);
    if gen_late < 20_000_000 {
        // Counted by when each packet left: a send late by L at either
        // edge of the window moves L × 2000 pps packets across it.
        let slack = 10 + 2 * gen_late * 2000 / 1_000_000_000;
        assert!(
            a.sent.abs_diff(1800) <= slack,
            "{a:?} (generator {gen_late} ns late)"
        );
    } else {
        qosnet_lab::testkit::relaxed(
            "flow a sent 1790-1810",
            &format!("its generator was {} ms late", gen_late / 1_000_000),
        );
        eprintln!(
            "NOTE {}:{}: flow a's generator was {} ms late: sent {} (1790-1810 not required)",
            file!(),
            line!(),
            gen_late / 1_000_000,
            a.sent
        );
        assert!(a.sent > 300, "{a:?}");
    }
    assert_eq!((a.received, a.lost), (a.sent, 0), "{a:?}");
    assert!(b.sent > 300, "{b:?}");
    assert_eq!((b.received, b.lost), (b.sent, 0), "{b:?}");
    // Plus the time the threads were denied the CPU (under 100 ms here).
    assert!(
        a.delay_ns.min > 0 && a.delay_ns.max < 50_000_000 + denied,
        "{a:?} (denied {denied} ns)"
    );
    // Link loads: 2000 pps × 500 B = 8 Mb/s on R->h2.
    let l = r.link("R->h2").unwrap();
    assert!((l.load_bps - 8e6).abs() < 0.1 * 8e6, "{l:?}");
    // The driver's own timing is reported beside the results.
    assert!(r.extra["timer_lateness"].get("p99_ns").is_some());
    assert!(leftovers(&p).is_empty());
}

/// Two broadcast domains with more than two IP ports: h1 and h2 behind a
/// switch on R (qosnet's switch node, h3 alone in VLAN 20), s1 and s2 with
/// R on a shared segment (a Linux bridge); flows within a domain (no
/// router) and across R.
const LAN: &str = r#"
[scenario]
name = "lan"
duration = "1s"
warmup = "100ms"
[defaults.link]
capacity = "100Mb/s"
[[node]]
name = "R"
kind = "router"
[[node]]
name = "SW"
kind = "switch"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"
[[node]]
name = "s1"
kind = "host"
[[node]]
name = "s2"
kind = "host"
[[node]]
name = "h3"
kind = "host"
[[link]]
a = "h3"
b = "SW"
vlan = 20
[[link]]
a = "R"
b = "SW"
[[link]]
a = "h1"
b = "SW"
[[link]]
a = "h2"
b = "SW"
[[segment]]
name = "bus"
nodes = ["R", "s1", "s2"]
capacity = "10Mb/s"
[[flow]]
name = "across"
from = "h1"
to = "s2"
size = 500
rate = "500pps"
[[flow]]
name = "back"
from = "s1"
to = "h2"
size = 300
rate = "500pps"
[[flow]]
name = "within"
from = "h2"
to = "h1"
size = 200
rate = "1000pps"
"#;

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn switched_lan_with_vlans_and_a_segment() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let p = prefix();
    let _g = Guard(p.clone());
    // Lossless is checked always: 2 s of drain deliver what a stalled
    // generator or router sends late (the default 200 ms did not always).
    let sc = load_str("lan", LAN, &["scenario.drain=2s".into()]).unwrap();
    let run = labrun::run(&sc, &opts(&p), Arc::new(AtomicBool::new(false))).unwrap();
    let r = &run.results;
    for name in ["across", "back", "within"] {
        let f = r.flow(name).unwrap();
        // The hosts' kernel generators send what the machine lets them: a
        // CI run beside other work sent 280 of ~950 `within` packets.
        // Their first packets are often a few hundred ms late (a process
        // start under load) and they catch up, so the measure of a starved
        // generator is its p99 send lateness. Lossless delivery is checked
        // always.
        let late = r.extra["generator_lateness"][name]["p99_ns"]
            .as_u64()
            .unwrap_or(u64::MAX);
        if late < 20_000_000 {
            assert!(f.sent > 400, "{f:?}");
        } else {
            qosnet_lab::testkit::relaxed(
                &format!("flow {name} sent > 400"),
                &format!("its generator was {} ms late at p99", late / 1_000_000),
            );
            eprintln!(
                "NOTE {}:{}: flow {name}'s generator was {} ms late at p99: sent {} (400 not required)",
                file!(),
                line!(),
                late / 1_000_000,
                f.sent
            );
            assert!(f.sent > 0, "{f:?}");
        }
        assert_eq!((f.received, f.lost), (f.sent, 0), "{f:?}");
    }
    // Only the flows that cross domains went through the router.
    let fwd = r.nodes.iter().find(|n| n.name == "R").unwrap().counters["forwarded"];
    let crossing = r.flow("across").unwrap().sent + r.flow("back").unwrap().sent;
    // Beyond the window: the warm-up's 100 packets, and one a millisecond
    // (500 + 500 pps) for as long as a generator sent late past its end.
    let late_ms = ["across", "back"]
        .iter()
        .filter_map(|n| r.extra["generator_lateness"][n]["max_ns"].as_u64())
        .max()
        .unwrap_or(0)
        / 1_000_000;
    assert!(
        fwd >= crossing && fwd < crossing + 200 + late_ms,
        "forwarded {fwd}, crossing {crossing}, generators up to {late_ms} ms late"
    );
    // The switch is qosnet's (as in the simulator): it learned the hosts,
    // and h3, alone in VLAN 20, heard nothing of VLAN 1.
    let sw = &r.nodes.iter().find(|n| n.name == "SW").unwrap().counters;
    assert!(sw["learned"] >= 3, "{sw:?}");
    let h3 = r.link("SW->h3").unwrap();
    assert_eq!(h3.packets, 0, "{h3:?}");
    assert!(leftovers(&p).is_empty());
}

/// h1 — R1 — R2 — h2 with TDP: the frames on the R1→R2 wire carry stamps
/// 0x0c/0x1c/0x2c/0x3c that name the TF and TC of transmission, and the TF
/// bit alternates every TF (padding fills empty TFs).
const TDP_LINE: &str = r#"
[scenario]
name = "tdp-line"
duration = "1500ms"
warmup = "200ms"
[tdp]
tf = "250us"
tfs_per_tc = 8
tcs_per_sc = 10
[defaults.router]
scheduler = "tdp"
tdp_delay = 2
[defaults.link]
capacity = "100Mb/s"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "R1"
kind = "router"
[[node]]
name = "R2"
kind = "router"
[[node]]
name = "h2"
kind = "host"
[[link]]
a = "h1"
b = "R1"
[[link]]
a = "R1"
b = "R2"
[[link]]
a = "R2"
b = "h2"
[[flow]]
name = "t"
from = "h1"
to = "h2"
size = 1000
rate = "1000pps"
"#;

/// The worst send lateness of a run's kernel generators (any flow);
/// `u64::MAX` when the run reports none.
fn generators_late_max(r: &qosnet_scenario::results::Results) -> u64 {
    r.extra["generator_lateness"]
        .as_object()
        .map(|m| m.values().filter_map(|v| v["max_ns"].as_u64()).max().unwrap_or(0))
        .unwrap_or(u64::MAX)
}

/// Nanoseconds this process's threads have waited runnable for a CPU
/// (/proc/self/task/*/schedstat), plus the time the VM's CPUs were stolen
/// by its host (/proc/stat, all CPUs): what a timing assertion cannot
/// blame on the code under test.
fn cpu_denied_ns() -> u64 {
    let mut ns = 0u64;
    if let Ok(rd) = std::fs::read_dir("/proc/self/task") {
        for t in rd.flatten() {
            let f = t.path().join("schedstat");
            if let Some(w) = std::fs::read_to_string(f)
                .ok()
                .and_then(|s| s.split_whitespace().nth(1).and_then(|x| x.parse::<u64>().ok()))
            {
                ns += w;
            }
        }
    }
    let steal_jiffies = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(8).and_then(|x| x.parse::<u64>().ok()))
        })
        .unwrap_or(0);
    // USER_HZ is 100 on Linux.
    ns + steal_jiffies * 10_000_000
}

/// Microseconds some runnable task on this machine waited for a CPU since
/// boot (/proc/pressure/cpu, `some ... total=`); 0 where PSI is missing.
fn cpu_pressure_us() -> u64 {
    std::fs::read_to_string("/proc/pressure/cpu")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("some"))
                .and_then(|l| l.split("total=").nth(1))
                .and_then(|x| x.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn tdp_stamps_alternate_on_the_wire() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let p = prefix();
    let _g = Guard(p.clone());
    let sc = load_str("tdp-line", TDP_LINE, &[]).unwrap();
    let ctr = Ctr::new(Duration::from_micros(250), 8, 10).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let live = LiveLab::start(&sc, &opts(&p), stop.clone(), Vec::new(), None).unwrap();
    // A tap: a second AF_PACKET socket on R2's end of the R1–R2 link.
    let port = live.lab().port("R2", "R1").unwrap().clone();
    let mut tap = AfPacket::open_in(&port.netns, &port.ifname, &AfPacketConfig::default()).unwrap();
    let dst = std::net::SocketAddrV4::new(h("10.0.2.2"), 5001);
    let src = live.layout.flow_src[0].1;
    let ns = live.lab().netns("h1").unwrap();
    let gen = std::thread::spawn(move || {
        let mut cfg = qosnet_lab::traffic::GenConfig::cbr(
            dst,
            0,
            qosnet_lab::traffic::Rate::Pps(1000.0),
            1000,
            Duration::from_millis(600),
        );
        cfg.bind = Some(std::net::SocketAddrV4::new(src, 10000));
        netns::run_in(&ns, || {
            qosnet_lab::traffic::run_gen(&cfg, &AtomicBool::new(false))
        })
        .unwrap()
        .unwrap()
    });
    let mut frames: Vec<(u64, u8, bool)> = Vec::new();
    let cpu0 = cpu_denied_ns();
    let end = clock::now() + Duration::from_millis(700);
    while clock::now() < end {
        tap.recv_batch(256, |f, t| {
            if let Ok(i) = wire::parse_ipv4(f) {
                frames.push((t.as_nanos(), i.tos, i.proto == wire::IPPROTO_UDP && i.dport == 9));
            }
        })
        .unwrap();
        wait_readable(&[tap.fd()], Some(Duration::from_millis(5))).unwrap();
    }
    // Time this process's threads (router, generator, tap) sat runnable
    // without a CPU, or the VM lost to its host, during the capture: the
    // stamp-per-TF claims hold only if the router kept time (a TF is
    // 250 us; a stall of several TFs moves frames out of their TF).
    let denied = cpu_denied_ns().saturating_sub(cpu0);
    let quiet = denied < 5_000_000;
    // Denied a seventh of the capture or more (seen: 230-640 ms of 700 at
    // load ~14), the counts below say how much CPU the machine gave, not
    // whether the router stamps right: only the stamps' form is checked.
    let starved = denied >= 100_000_000;
    let g = gen.join().unwrap();
    assert!(starved || g.sent >= 590, "{g:?}");
    drop(tap);
    drop(live);
    assert!(leftovers(&p).is_empty());

    // Strict figures on a machine that kept time, loose ones (the
    // mechanism works at all) when the capture was starved of CPU.
    let (share, count) = if quiet { (0.95, 1000) } else { (0.5, 100) };
    if !quiet {
        qosnet_lab::testkit::relaxed(
            "TF-exact shares and counts",
            &format!("threads denied the CPU for {} us in 700 ms", denied / 1000),
        );
        eprintln!(
            "NOTE {}:{}: threads denied the CPU for {} us in 700 ms: TF-exact figures relaxed",
            file!(),
            line!(),
            denied / 1000
        );
    }
    let tdp: Vec<_> = frames.iter().filter(|f| is_tdp_tos(f.1)).collect();
    let padding = tdp.iter().filter(|f| f.2).count();
    let data = tdp.len() - padding;
    let codes: std::collections::BTreeSet<u8> = tdp.iter().map(|f| f.1).collect();
    if starved {
        qosnet_lab::testkit::relaxed(
            "TF-exact checks",
            &format!(
                "threads denied the CPU for {} ms of the 700 ms capture",
                denied / 1_000_000
            ),
        );
        eprintln!(
            "SKIPPED {}:{}: TF-exact checks: threads denied the CPU for {} ms of the 700 ms capture",
            file!(),
            line!(),
            denied / 1_000_000
        );
        assert!(data > 0 && padding > 0, "data {data}, padding {padding}");
        assert!(codes.iter().all(|&c| is_tdp_tos(c)), "{codes:?}");
        return;
    }
    assert!(data >= 500, "reserved frames on the wire: {data}");
    assert!(
        padding > count,
        "padding frames: {padding} (CPU denied {denied} ns)"
    );
    // Every frame's stamp names the TF it was received in (sent in, up to
    // the capture's timestamp noise near boundaries).
    let matching = tdp
        .iter()
        .filter(|(t, tos, _)| ctr.stamp(ctr.tf_at(qosnet_core::Instant(*t))) == *tos)
        .count();
    assert!(
        matching as f64 > share * tdp.len() as f64,
        "{matching} of {} stamps match their TF (CPU denied {denied} ns)",
        tdp.len()
    );
    // The TF bit alternates from one TF to the next, and all four
    // codepoints appear.
    let mut by_tf: std::collections::BTreeMap<u64, u8> = Default::default();
    for (t, tos, _) in &tdp {
        by_tf.insert(ctr.tf_at(qosnet_core::Instant(*t)), *tos);
    }
    let tfs: Vec<(&u64, &u8)> = by_tf.iter().collect();
    let flips = tfs
        .windows(2)
        .filter(|w| w[1].0 - w[0].0 == 1)
        .filter(|w| (w[0].1 ^ w[1].1) & TDP_TF_BIT != 0)
        .count();
    let adjacent = tfs.windows(2).filter(|w| w[1].0 - w[0].0 == 1).count();
    assert!(
        adjacent > count && flips as f64 > share * adjacent as f64,
        "{flips} of {adjacent} (CPU denied {denied} ns)"
    );
    assert_eq!(
        codes.into_iter().collect::<Vec<_>>(),
        vec![0x0c, 0x1c, 0x2c, 0x3c]
    );
    assert!(tdp.iter().any(|f| f.1 & TDP_TC_BIT != 0));
}

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn garbage_at_a_router_port_is_counted_and_forwarding_carries_on() {
    use rand::{Rng, SeedableRng};
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let p = prefix();
    let _g = Guard(p.clone());
    // 2 s of drain: no loss is checked always (see the LAN test).
    let sc = load_str(
        "line",
        LINE,
        &["scenario.duration=2s".into(), "scenario.drain=2s".into()],
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let o = opts(&p);
    // Run the scenario's flows on a thread while this one sprays garbage
    // at R's port from h1's side once the lab exists.
    let sc2 = sc.clone();
    let o2 = o.clone();
    let runner = std::thread::spawn(move || labrun::run(&sc2, &o2, stop));
    let ns = format!("{p}-h1");
    let t0 = std::time::Instant::now();
    while !netns::exists(&ns) || netns::run_in(&ns, || qosnet_io::iface::index("h1-R")).is_err() {
        assert!(t0.elapsed().as_secs() < 10, "lab never came up");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let mut inj = AfPacket::open_in(&ns, "h1-R", &AfPacketConfig::default()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let r_mac = qosnet_core::wire::MacAddr::local(2);
    let mut sent = 0;
    // 30 bursts of 100 frames, 50 ms apart: across the start of the flows.
    for k in 0..3000 {
        let len = rng.gen_range(14..1500);
        let mut f: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        f[0..6].copy_from_slice(&r_mac.0);
        match k % 3 {
            0 => f[12..14].copy_from_slice(&[0x08, 0x00]), // "IPv4"
            1 => f[12..14].copy_from_slice(&[0x08, 0x06]), // "ARP"
            _ => {}
        }
        if inj.send(&f).is_ok() {
            sent += 1;
        }
        if k % 100 == 99 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    drop(inj);
    let run = runner.join().unwrap().unwrap();
    let r = &run.results;
    let node = r.nodes.iter().find(|n| n.name == "R").unwrap();
    let bad: u64 = node
        .counters
        .iter()
        .filter(|(k, _)| k.starts_with("malformed_"))
        .map(|(_, v)| *v)
        .sum();
    let non_ip = node.counters.get("R-h1.non_ip").copied().unwrap_or(0);
    assert!(sent > 2900, "{sent}");
    assert!(
        bad + non_ip >= 1900,
        "malformed {bad} non-IP {non_ip} of {sent}: {:?}",
        node.counters
    );
    for f in &r.flows {
        assert_eq!(f.lost, 0, "{f:?}");
        assert!(f.received > 0);
    }
    assert!(leftovers(&p).is_empty());
}

/// Helper for `a_failing_test_leaves_nothing_behind`: builds a lab with
/// routers running, then panics.
#[test]
#[ignore = "helper; run as a child process"]
fn manual_panicking_child() {
    let Ok(p) = std::env::var("QOSNET_LIVE_CHILD") else {
        return;
    };
    let _live = line_lab(&p);
    // Never waited on: the lab's teardown must end it (checked by the parent).
    #[allow(clippy::zombie_processes)]
    let _sleeper = _live
        .lab()
        .command("h1", "sleep")
        .unwrap()
        .arg("60")
        .spawn()
        .unwrap();
    println!("child-ready");
    panic!("deliberate failure with a live lab");
}

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn a_failing_test_leaves_nothing_behind() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let p = prefix();
    let _g = Guard(p.clone());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "manual_panicking_child", "--ignored", "--nocapture"])
        .env("QOSNET_LIVE_CHILD", &p)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("child-ready"), "{text}");
    assert!(!out.status.success());
    assert!(leftovers(&p).is_empty(), "{:?}", leftovers(&p));
    // No process was left in any of its namespaces (they are gone), and the
    // `sleep` it started was ended with them.
    let ps = std::process::Command::new("pgrep")
        .args(["-f", "^sleep 60$"])
        .output();
    if let Ok(ps) = ps {
        let pids = String::from_utf8_lossy(&ps.stdout).trim().to_string();
        for pid in pids.lines() {
            let ns = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
            let mine = std::fs::read_link("/proc/self/ns/net").ok();
            assert_eq!(
                ns, mine,
                "a sleep from the failed test survives in another namespace"
            );
        }
    }
}

fn testbed(name: &str, duration: &str) -> qosnet_scenario::Scenario {
    testbed_with(name, duration, &[])
}

fn testbed_with(name: &str, duration: &str, more: &[&str]) -> qosnet_scenario::Scenario {
    let path = format!(
        "{}/../../scenarios/tdp-icc2006/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    // A stall of this shared VM leaves FIFO's 99.8 %-loaded ring links a
    // backlog they drain only once the senders stop (a run here: 517 ms of
    // delay at the end of 4 s); 2 s of drain delivers it, so "lost" means
    // lost, not still queued.
    let mut sets = vec![
        format!("scenario.duration={duration}"),
        "scenario.drain=2s".to_string(),
    ];
    sets.extend(more.iter().map(|s| s.to_string()));
    if let Ok(extra) = std::env::var("QOSNET_TESTBED_SET") {
        sets.extend(extra.split_whitespace().map(String::from));
    }
    qosnet_scenario::load_file(&path, &sets).unwrap()
}

/// The ICC 2006 testbed live, FIFO then TDP in the same session, with the
/// scenario's router processing time emulated (as the simulator models the
/// paper's PCs) and 100 Mb/s store-and-forward wires.
///
/// Always asserted: every packet of both runs went round its rings
/// (minimum delays of 16+ wire hops), FIFO loses nothing; TDP delivers at
/// least half unless the router thread was a TF late for 0.1 % of its
/// deadlines. Asserted when the routers' worst timer lateness in the TDP
/// run stayed below 750 µs (3 TFs): TDP loses nothing and every flow's TDP
/// jitter is below a third of its FIFO jitter. On this shared 2-core VM the
/// host sometimes deschedules the VM for milliseconds — a dozen 250 µs TFs
/// while every ring-link TF is 99.8 % full — and such a run loses TDP
/// packets and slips flows by reserved slots (docs/live.md, "TDP on a
/// shared VM"); the test then says so on stderr. Printed either way: both
/// jitters, losses, and the lateness and timer noise beside them.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn tdp_testbed_live_fifo_and_tdp() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut res = Vec::new();
    for name in ["fifo-1002", "tdp-1002"] {
        let p = prefix();
        let _g = Guard(p.clone());
        let mut o = opts(&p);
        o.timer_noise = true;
        o.emulate_cpu = true;
        // The hosts' kernel generators are often late by more than the
        // edge shaper's slack here; with the scenario's bound on the hold
        // each such packet costs the next one (a loaded run delivered 23 %).
        // This test is about the routers: without the bound a late packet
        // costs its flow a slot instead, and nothing is dropped at the edge.
        let sc = testbed_with(name, "4s", &["tdp.shaper_max_hold=none"]);
        let run = labrun::run(&sc, &o, Arc::new(AtomicBool::new(false))).unwrap();
        assert!(leftovers(&p).is_empty());
        res.push(run.results);
    }
    let (fifo, tdp) = (&res[0], &res[1]);
    println!(
        "{:<8} {:>12} {:>12} {:>8} {:>8} {:>20} {:>20}",
        "flow", "FIFO jitter", "TDP jitter", "lost F", "lost T", "FIFO delay min/max", "TDP delay min/max"
    );
    for (f, t) in fifo.flows.iter().zip(&tdp.flows) {
        println!(
            "{:<8} {:>10.1}us {:>10.1}us {:>8} {:>8} {:>9.1}/{:>9.1}us {:>9.1}/{:>9.1}us",
            f.name,
            f.jitter_ns as f64 / 1e3,
            t.jitter_ns as f64 / 1e3,
            f.lost,
            t.lost,
            f.delay_ns.min as f64 / 1e3,
            f.delay_ns.max as f64 / 1e3,
            t.delay_ns.min as f64 / 1e3,
            t.delay_ns.max as f64 / 1e3,
        );
    }
    for l in tdp.links.iter().filter(|l| l.drops > 0) {
        println!("TDP link {} drops {:?}", l.name, l.drops_by_reason);
    }
    println!("timer lateness FIFO {}", fifo.extra["timer_lateness"]);
    println!("timer lateness TDP  {}", tdp.extra["timer_lateness"]);
    println!("timer noise {}", tdp.extra["timer_noise"]);
    let router_p999 = tdp.extra["timer_lateness"]["p999_ns"]
        .as_u64()
        .unwrap_or(u64::MAX);
    // FIFO loses nothing unless its router thread stopped long enough for
    // the ring's full links to outrun the receive rings and the 1 000-packet
    // queues (~80 ms at this load); the kernel's fair server alone may take
    // 50 ms (docs/live.md), other sessions' builds more.
    let fifo_worst = fifo.extra["timer_lateness"]["max_ns"]
        .as_u64()
        .unwrap_or(u64::MAX);
    // Nor unless its senders, the hosts' kernel UDP generators, fell so far
    // behind that they caught up in bursts larger than the queues: a run
    // beside two builds lost 203 of 2 608 with the router at most 8.4 ms
    // late but FIFO delays of 0.78 s.
    let fifo_senders = generators_late_max(fifo);
    let fifo_worst = fifo_worst.max(fifo_senders);
    for (f, t) in fifo.flows.iter().zip(&tdp.flows) {
        // 16+ hops of 83.2 µs wire time each: the packets really went
        // round the rings (no shortcut across a split host's bridge).
        assert!(
            f.delay_ns.min > 1_300_000 && t.delay_ns.min > 1_300_000,
            "{f:?} {t:?}"
        );
        // The generators send ~2 400 each unless the machine starves them
        // (seen beside two builds: under 2 000); then any is enough.
        if fifo_senders.max(generators_late_max(tdp)) < 20_000_000 {
            assert!(f.sent > 2000 && t.sent > 2000, "{f:?} {t:?}");
        } else {
            assert!(f.sent > 0 && t.sent > 0, "{f:?} {t:?}");
        }
        if fifo_worst < 20_000_000 {
            assert_eq!(
                f.lost, 0,
                "FIFO lost packets: {f:?} (router and senders at most {fifo_worst} ns late)"
            );
        } else if f.lost > 0 {
            qosnet_lab::testkit::relaxed(
                &format!("FIFO loss of {}", f.name),
                &format!("{} lost; router thread or senders {fifo_worst} ns late", f.lost),
            );
            eprintln!(
                "NOTE {}:{}: FIFO lost {} packets of {}, not checked: its router thread or its senders were {fifo_worst} ns late",
                file!(),
                line!(),
                f.lost,
                f.name
            );
        }
        // Half, not all: the hosts' kernel UDP senders are late by up to
        // milliseconds on a shared VM and a late packet loses its TF for
        // good; a run here delivered 86.5 % with the router at most
        // 0.49 ms late. Far below half means the router itself is broken —
        // unless the router thread was more than a TF late for 0.1 % of
        // its deadlines (hundreds of times a run): under other sessions'
        // builds a run delivered 5 % at p99.9 lateness 4.2 ms, the next
        // 93 % at 3.5 ms, so such a run only says so.
        if router_p999 < 250_000 {
            assert!(
                t.received as f64 >= 0.5 * t.sent as f64,
                "TDP delivered too little: {t:?}"
            );
        } else if (t.received as f64) < 0.5 * t.sent as f64 {
            qosnet_lab::testkit::relaxed(
                &format!("TDP delivery of {}", t.name),
                &format!(
                    "{} of {} delivered; router p99.9 lateness {router_p999} ns",
                    t.received, t.sent
                ),
            );
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "NOTE {}:{}: TDP delivered {} of {} packets of {}, not checked: the router thread's \
                 p99.9 lateness was {router_p999} ns",
                file!(),
                line!(),
                t.received,
                t.sent,
                t.name
            );
        }
    }
    // The paper's claims need a machine that keeps time. Every ring-link TF
    // is full and every flow sends exactly its reserved rate, so a stall of
    // more than a TF makes a packet miss its TF and its flow's next slot for
    // good. The claims are asserted only when neither the router thread
    // (its own lateness) nor the machine (clock-read gaps measured while
    // spinning, just before the run) stalled for a whole TF (250 us); a run
    // here lost 1 of ~2 400 packets at 489 us of router lateness, another
    // 7–15 per flow with jitter near FIFO's after a 1.6 ms stall.
    let worst = tdp.extra["timer_lateness"]["max_ns"].as_u64().unwrap_or(u64::MAX);
    let stall = tdp.extra["timer_noise"]["spin_gaps"]["max_ns"]
        .as_u64()
        .unwrap_or(u64::MAX);
    // The senders too: these are the hosts' kernel UDP generators, and a
    // packet sent a TF late has lost its slot (a CI run lost 26 of 3 120
    // with the router at most 243 us late and the machine's spin gaps at
    // 82 us: the generators were the late ones).
    let senders = generators_late_max(tdp);
    if worst >= 250_000 || stall >= 250_000 || senders >= 250_000 {
        qosnet_lab::testkit::relaxed(
            "TDP zero loss and jitter below FIFO",
            &format!("router {worst} ns late, machine stalled {stall} ns, senders {senders} ns late"),
        );
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "NOTE {}:{}: TDP zero loss and jitter below FIFO not checked: the router thread was \
             {worst} ns late at worst, the machine stalled for {stall} ns and the senders were \
             {senders} ns late (see docs/live.md; `--traffic tester` sends on time)",
            file!(),
            line!()
        );
        return;
    }
    for (f, t) in fifo.flows.iter().zip(&tdp.flows) {
        assert_eq!(t.lost, 0, "TDP lost packets on a punctual machine: {t:?}");
        assert!(
            t.jitter_ns * 3 < f.jitter_ns,
            "{}: TDP jitter {} ns not well below FIFO {} ns",
            t.name,
            t.jitter_ns,
            f.jitter_ns
        );
    }
}

/// Kill a child process when dropped (a judge's server).
struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// qosnet's own generator and sink through the running lab: (throughput
/// b/s, lost, received, median one-way delay ns, jitter ns).
fn qosnet_measure(
    live: &LiveLab,
    rate_bps: f64,
    size: u32,
    pps: Option<f64>,
    dur: Duration,
) -> (f64, u64, u64, u64, u64) {
    use qosnet_lab::traffic::{run_gen, GenConfig, Rate, Sink};
    let dst = std::net::SocketAddrV4::new(h("10.0.1.2"), 5999);
    let mut sink = netns::run_in(&live.lab().netns("h2").unwrap(), || Sink::bind(dst))
        .unwrap()
        .unwrap();
    let ns = live.lab().netns("h1").unwrap();
    let rate = pps.map_or(Rate::Bps(rate_bps), Rate::Pps);
    let cfg = GenConfig::cbr(dst, 1, rate, size, dur);
    let g = std::thread::spawn(move || {
        netns::run_in(&ns, || run_gen(&cfg, &AtomicBool::new(false)))
            .unwrap()
            .unwrap()
    });
    sink.run_until(
        clock::now() + dur + Duration::from_millis(300),
        &AtomicBool::new(false),
    )
    .unwrap();
    let g = g.join().unwrap();
    // A generator the machine stalled sends late: its last packets get
    // their 300 ms too.
    sink.run_until(clock::now() + Duration::from_millis(300), &AtomicBool::new(false))
        .unwrap();
    let r = &sink.reports(&[(1, g.sent)].into_iter().collect())[0];
    (
        r.received_ip_bytes as f64 * 8.0 / dur.as_secs_f64(),
        r.lost,
        r.received,
        r.delay_ns.p50,
        r.jitter_ns,
    )
}

/// The LINE scenario running as a lab under prefix `p`, routers started,
/// no flows yet (tests drive their own traffic through it).
fn line_lab(p: &str) -> LiveLab {
    let sc = load_str("line", LINE, &[]).unwrap();
    LiveLab::start(&sc, &opts(p), Arc::new(AtomicBool::new(false)), Vec::new(), None).unwrap()
}

/// iperf3 (UDP) as an external judge of throughput and loss through a
/// qosnet router: at 20 Mb/s of 1000-byte datagrams, iperf3's receiver and
/// qosnet's sink agree on throughput within 5 % and both see < 1 % loss.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn iperf3_agrees_with_qosnet_sink() {
    require_root();
    require_bin!("iperf3");
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let p = prefix();
    let _g = Guard(p.clone());
    let live = line_lab(&p);
    let _srv = Child(
        live.lab()
            .command("h2", "iperf3")
            .unwrap()
            .args(["-s", "-1", "-B", "10.0.1.2", "-p", "5201"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    let psi0 = cpu_pressure_us();
    let out = live
        .lab()
        .exec(
            "h1",
            &[
                "iperf3", "-c", "10.0.1.2", "-p", "5201", "-u", "-b", "20M", "-l", "972", "-t", "2", "--json",
            ],
        )
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sum = &j["end"]["sum"];
    let ip_bps = sum["bits_per_second"].as_f64().unwrap() * 1000.0 / 972.0; // payload → IP bytes
    let lost = sum["lost_percent"].as_f64().unwrap();
    let (q_bps, q_lost, q_rx, _, _) = qosnet_measure(&live, 20e6, 1000, None, Duration::from_secs(2));
    println!(
        "iperf3: {:.2} Mb/s (IP), {lost:.2} % lost; qosnet sink: {:.2} Mb/s, {q_lost} of {} lost",
        ip_bps / 1e6,
        q_bps / 1e6,
        q_rx + q_lost
    );
    // Two runs one after the other, each paced by its own sender: they
    // agree only if nothing else took the CPUs meanwhile (PSI: time some
    // runnable task waited for a CPU, machine-wide; at load ~14 the
    // senders lost hundreds of ms).
    let busy_us = cpu_pressure_us().saturating_sub(psi0);
    if busy_us >= 200_000 {
        qosnet_lab::testkit::relaxed(
            "agreement and loss",
            &format!("tasks waited {} ms for a CPU", busy_us / 1000),
        );
        eprintln!(
            "SKIPPED {}:{}: agreement and loss checks: tasks waited {} ms for a CPU during the runs",
            file!(),
            line!(),
            busy_us / 1000
        );
        assert!(
            ip_bps > 0.0 && q_rx > 0,
            "iperf3 {ip_bps}, qosnet received {q_rx}"
        );
    } else {
        assert!(
            (ip_bps - q_bps).abs() < 0.05 * q_bps,
            "iperf3 {ip_bps} vs qosnet {q_bps} (CPU pressure {busy_us} us)"
        );
        assert!(lost < 1.0 && (q_lost as f64) < 0.01 * (q_rx + q_lost) as f64);
    }
    drop(live);
    assert!(leftovers(&p).is_empty());
}

/// irtt as an external judge of one-way delay: at 100 packets/s through a
/// qosnet router, irtt's median send delay and qosnet's median one-way
/// delay agree within 150 µs plus the machine's wake-up noise (both are
/// tens to hundreds of µs here; the two run side by side through the same
/// router, on one clock, but irtt stamps arrivals in user space, a thread
/// wake-up after qosnet's kernel stamps), and irtt's mean IPDV stays below
/// qosnet's max − min jitter.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn irtt_agrees_with_qosnet_sink() {
    require_root();
    require_bin!("irtt");
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let p = prefix();
    let _g = Guard(p.clone());
    let live = line_lab(&p);
    let _srv = Child(
        live.lab()
            .command("h2", "irtt")
            .unwrap()
            .args(["server", "-b", "10.0.1.2:2112"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    // The machine's wake-up noise, in this run: how late a 1 ms sleep
    // wakes (at the default timer slack, as irtt's server runs).
    let noise = || clock::measure_timer_noise(std::time::Duration::from_millis(300)).sleep_overshoot;
    let before = noise();
    let psi0 = cpu_pressure_us();
    let tmpdir = tempfile::tempdir().unwrap();
    let dir = tmpdir.path().join(format!("{p}-irtt.json"));
    // Side by side, so that both see the router in the same state (one
    // after the other, a CI run read 225 µs from irtt and 70 µs from
    // qosnet a few seconds later with little CPU pressure).
    let (_, q_lost, q_rx, q_med, q_jit) = std::thread::scope(|sc| {
        let q = sc.spawn(|| qosnet_measure(&live, 0.0, 100, Some(100.0), Duration::from_secs(2)));
        live.lab()
            .exec(
                "h1",
                &[
                    "irtt",
                    "client",
                    "-i",
                    "10ms",
                    "-d",
                    "2s",
                    "-l",
                    "100",
                    "-Q",
                    "--wait=300ms",
                    "-o",
                    dir.to_str().unwrap(),
                    "10.0.1.2:2112",
                ],
            )
            .unwrap();
        q.join().unwrap()
    });
    let busy_us = cpu_pressure_us().saturating_sub(psi0);
    let after = noise();
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&dir).unwrap()).unwrap();
    let _ = std::fs::remove_file(&dir);
    let s = &j["stats"];
    let i_med = s["send_delay"]["median"].as_f64().unwrap();
    let i_ipdv = s["ipdv_send"]["mean"].as_f64().unwrap();
    let wake = before.p99_ns.max(after.p99_ns);
    println!(
        "irtt: send delay median {:.1} us, IPDV mean {:.1} us, {} of {} received; qosnet: median {:.1} us, jitter {:.1} us, {q_lost} lost; 1 ms sleeps overshot p50 {:.1}/{:.1} us, p99 {:.1}/{:.1} us (before/after)",
        i_med / 1e3,
        i_ipdv / 1e3,
        s["packets_received"],
        s["packets_sent"],
        q_med as f64 / 1e3,
        q_jit as f64 / 1e3,
        before.p50_ns as f64 / 1e3,
        after.p50_ns as f64 / 1e3,
        before.p99_ns as f64 / 1e3,
        after.p99_ns as f64 / 1e3
    );
    // Compared only if nothing else took the CPUs meanwhile (PSI: time
    // some runnable task waited for a CPU, machine-wide).
    if busy_us < 100_000 {
        assert!(
            (i_med - q_med as f64).abs() < 150_000.0 + wake as f64,
            "irtt {i_med} vs qosnet {q_med} (wake-up noise p99 {wake} ns, CPU pressure {busy_us} us)"
        );
        assert!(
            i_ipdv <= q_jit as f64 + 50_000.0,
            "IPDV {i_ipdv} vs jitter {q_jit} (CPU pressure {busy_us} us)"
        );
    } else {
        qosnet_lab::testkit::relaxed(
            "irtt and qosnet medians and jitters",
            &format!("tasks waited {busy_us} us for a CPU"),
        );
        eprintln!(
            "NOTE: tasks waited {busy_us} us for a CPU during the runs: irtt and qosnet medians and jitters not compared"
        );
    }
    assert!(q_rx >= 190 && q_lost == 0);
    drop(live);
    assert!(leftovers(&p).is_empty());
}

/// The ICC 2006 testbed driven by qosnet's tester (`--traffic tester`,
/// the default for TDP testbeds), FIFO then TDP in the same session, with
/// the router thread and the tester placed as `lab run` places them.
///
/// Always asserted (the tester's own guarantees): every flow's whole
/// schedule was sent (800 pps × 3 s from each port, late if the machine
/// stalled the tester, never skipped), no receive ring overflowed (every
/// arrival has its kernel timestamp), sent = received + lost, the measured
/// count is the window's 2 320 give or take what the worst send lateness
/// can move across the window's edges, and every received packet went
/// round its rings. Asserted only when neither the router thread, nor the
/// tester's sends, nor the machine's clock reads (measured just before)
/// stalled for a TF (250 µs) in either run: FIFO loses nothing, TDP at most
/// 0.1 %, and each flow's p0.1–p99.9 delay spread under TDP is below
/// FIFO's. This shared VM stalls for milliseconds often enough that those
/// are reported (stderr says why) rather than required.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn tdp_testbed_live_tester() {
    require_root();
    let _s = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    static K: AtomicU32 = AtomicU32::new(0);
    let mut res = Vec::new();
    for name in ["fifo-1002", "tdp-1002"] {
        let p = format!("qt{}x{}", std::process::id(), K.fetch_add(1, Ordering::Relaxed));
        let _g = Guard(p.clone());
        let mut o = opts(&p);
        o.timer_noise = true;
        o.emulate_cpu = true;
        o.traffic = labrun::TrafficSource::Tester;
        let run = labrun::run(&testbed(name, "3s"), &o, Arc::new(AtomicBool::new(false))).unwrap();
        assert!(leftovers(&p).is_empty());
        res.push(run.results);
    }
    let (fifo, tdp) = (&res[0], &res[1]);
    let sc = testbed("tdp-1002", "3s");
    let spread = |r: &qosnet_scenario::results::Results, f: &str, k: &str| {
        r.extra["delay_spread"][f][k].as_f64().unwrap_or(f64::NAN)
    };
    let mut worst = 0u64;
    for r in [fifo, tdp] {
        assert_eq!(r.extra["traffic"], "tester");
        println!("{}: placement {}", r.scenario, r.extra["realtime"]);
        println!("{}: tester {}", r.scenario, r.extra["tester"]["send_lateness"]);
        println!("{}: router lateness {}", r.scenario, r.extra["timer_lateness"]);
        for f in &r.flows {
            println!(
                "{} {:<6} sent {} lost {} min {} us, max-min {} us, p0.1-99.9 {} us, in 2 TF {:.4}",
                r.scenario,
                f.name,
                f.sent,
                f.lost,
                f.delay_ns.min / 1000,
                f.jitter_ns / 1000,
                spread(r, &f.name, "p001_p999_ns") / 1e3,
                spread(r, &f.name, "in_window")
            );
        }
        for n in r.nodes.iter().filter(|n| n.name.starts_with('t')) {
            // 800 pps from the flow's start phase to the end of the 3 s.
            let start = sc
                .flows
                .iter()
                .find(|f| sc.nodes[f.from].name == n.name)
                .unwrap()
                .start;
            let want = (3_000_000_000 - start.as_nanos()).div_ceil(1_250_000);
            assert_eq!(n.counters["sent"], want, "{}: {n:?}", r.scenario);
            assert_eq!(n.counters["send_errors"], 0);
        }
        for (h, d) in r.extra["tester"]["ports"].as_object().unwrap() {
            assert_eq!(d["rx_kernel_drops"], 0, "{h}: {d}");
        }
        let late = r.extra["tester"]["send_lateness"]["max_ns"].as_u64().unwrap();
        // Packets a stall delays across a window edge change the count.
        let slack = 2 + late * 800 / 1_000_000_000;
        for f in &r.flows {
            assert_eq!(f.sent, f.received + f.lost, "{f:?}");
            assert!(f.sent.abs_diff(2320) <= slack, "{f:?} (slack {slack})");
            assert!(f.received == 0 || f.delay_ns.min > 1_300_000, "{f:?}");
        }
        worst = [
            Some(worst),
            r.extra["timer_lateness"]["max_ns"].as_u64(),
            Some(late),
            r.extra["timer_noise"]["spin_gaps"]["max_ns"].as_u64(),
        ]
        .into_iter()
        .map(|v| v.unwrap_or(u64::MAX))
        .max()
        .unwrap_or(u64::MAX);
    }
    if worst >= 250_000 {
        qosnet_lab::testkit::relaxed(
            "FIFO zero loss, TDP loss <= 0.1 % and TDP spreads below FIFO's",
            &format!("a stall of {worst} ns"),
        );
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "NOTE {}:{}: FIFO zero loss, TDP loss <= 0.1 % and TDP spreads below FIFO's not checked: \
             a stall of {worst} ns (router, tester or machine)",
            file!(),
            line!()
        );
        return;
    }
    for f in &fifo.flows {
        assert_eq!(f.lost, 0, "FIFO lost packets on a punctual machine: {f:?}");
    }
    let (sent, lost) = tdp
        .flows
        .iter()
        .fold((0, 0), |(s, l), f| (s + f.sent, l + f.lost));
    assert!(
        lost * 1000 <= sent,
        "TDP lost {lost} of {sent} on a punctual machine"
    );
    for f in &tdp.flows {
        let (a, b) = (
            spread(fifo, &f.name, "p001_p999_ns"),
            spread(tdp, &f.name, "p001_p999_ns"),
        );
        assert!(b < a, "{}: TDP spread {b} ns not below FIFO's {a} ns", f.name);
    }
}
