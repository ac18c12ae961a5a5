//! The DEGEB DiffServ experiments (seed 004) through qosnet routers in a
//! namespace lab, measured the way the paper measured them.
//!
//! **T1/T3** (Tables 4-1 and 4-3): one lab of `t1-edge.toml` (src — Ei —
//! C1 — dst); per class, a line-rate UDP offer with the class's DSCP.
//! With iperf3 installed the offer and the bandwidth/loss figures are
//! iperf3's (`iperf3 -u -b … -l 1470 --dscp …`, server in dst, as the
//! paper's iperf runs), and the TOS bytes those packets arrive with are
//! counted by an AF_PACKET tap on dst's port (iperf3 does not report TOS).
//! Without iperf3, qosnet's own generator and sink do both. The in-profile
//! column of Table 4-3 is a short low-rate run of qosnet's generator,
//! whose sink counts TOS bytes (IP_RECVTOS).
//!
//! **T4** (Figure 4): one lab of `t4-latency.toml` per path (the flows'
//! `path` gives /32 routes to dst along it, so pings to dst follow it; the
//! replies take the shortest way back). `ping -Q TOS -s SIZE` from src,
//! all probe sizes and classes at once, each in its own phase of the
//! interval as the simulated echo flows are, first on an idle network,
//! then while a best-effort bulk flow of qosnet's generator from the bulk
//! host congests the backbone.
//!
//! The routers, their wires and the traffic all share this machine's
//! cores; callers print the routers' timer lateness beside the figures.

use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use qosnet_core::time::Duration;
use qosnet_core::wire;
use qosnet_io::afpacket::{AfPacket, AfPacketConfig};
use qosnet_io::clock::{self, LatenessSummary};
use qosnet_io::device::{wait_readable, Device};
use qosnet_io::netns;
use qosnet_lab::labrun::{LiveLab, LiveOptions};
use qosnet_lab::labtools::{have, host_ip, parse_ping, router_counters, set_nice, warm_up, ChildGuard};
use qosnet_lab::traffic::{run_gen, FlowReport, GenConfig, GenReport, Rate, Sink, IP_UDP_HDR};
use qosnet_live::driver::DriverReport;
use qosnet_scenario::{Scenario, SizeDist};
use serde::Serialize;

/// iperf3's port in the lab.
const IPERF_PORT: u16 = 5201;
/// qosnet sink ports of the T1 runs and of T4's bulk flow.
const SINK_PORT: u16 = 5101;
const BULK_PORT: u16 = 5102;

/// Settings of the T1/T3 runs.
#[derive(Clone, Debug)]
pub struct T1Options {
    /// Length of each class's line-rate run.
    pub duration: Duration,
    /// Offered packets per second (the paper's iperf "100 Mbps": 8127).
    pub offer_pps: f64,
    /// IP packet size (1498: iperf's 1470-byte UDP payload).
    pub ip_size: u32,
    /// In-profile run: rate and length (qosnet's generator and sink).
    pub in_profile_pps: f64,
    pub in_profile: Duration,
    /// Drive the line-rate runs with iperf3 (else qosnet gen and sink).
    pub iperf3: bool,
}

impl Default for T1Options {
    fn default() -> Self {
        T1Options {
            duration: Duration::from_secs(2),
            offer_pps: 8127.0,
            ip_size: 1498,
            in_profile_pps: 200.0,
            in_profile: Duration::from_millis(500),
            iperf3: have("iperf3"),
        }
    }
}

/// One class of Tables 4-1 and 4-3, measured live.
#[derive(Clone, Debug, Default, Serialize)]
pub struct T1Point {
    /// TOS byte sent.
    pub tos: u8,
    /// What offered the load and measured bandwidth and loss:
    /// `"iperf3"` or `"qosnet"` (gen and sink).
    pub tool: String,
    pub sent: u64,
    pub received: u64,
    pub loss_pct: f64,
    /// Received IP bits per second.
    pub throughput_bps: f64,
    /// TOS bytes of the line-rate run's packets at the destination
    /// (AF_PACKET tap with iperf3, qosnet's sink otherwise).
    pub tos_out: BTreeMap<u8, u64>,
    /// Packets the tap or sink counted in the line-rate run.
    pub tos_out_packets: u64,
    /// TOS bytes of the in-profile run (qosnet's sink).
    pub tos_in: BTreeMap<u8, u64>,
    pub in_sent: u64,
    pub in_received: u64,
}

/// qosnet's generator in `src` to a sink in `dst` for `dur`: the
/// generator's and the sink's reports.
#[allow(clippy::too_many_arguments)]
fn qosnet_flow(
    live: &LiveLab,
    src: &str,
    dst: &str,
    port: u16,
    tos: u8,
    rate: Rate,
    ip_size: u32,
    dur: Duration,
    stop: &Arc<AtomicBool>,
) -> Result<(GenReport, FlowReport), String> {
    let (sip, dip) = (host_ip(live, src)?, host_ip(live, dst)?);
    let to = SocketAddrV4::new(dip, port);
    let dns = live.lab().netns(dst).ok_or("no namespace")?;
    let mut sink = netns::run_in(&dns, || Sink::bind(to))
        .and_then(|r| r)
        .map_err(|e| format!("sink {to} in {dns}: {e}"))?;
    let sns = live.lab().netns(src).ok_or("no namespace")?;
    let mut cfg = GenConfig::cbr(to, 1, rate, ip_size, dur);
    cfg.bind = Some(SocketAddrV4::new(sip, 0));
    cfg.dscp = tos >> 2;
    cfg.spin = Duration::from_micros(20);
    let st = stop.clone();
    let g = std::thread::spawn(move || {
        netns::run_in(&sns, || run_gen(&cfg, &st))
            .and_then(|r| r)
            .map_err(|e| e.to_string())
    });
    let r = sink.run_until(clock::now() + dur + Duration::from_millis(300), stop);
    let g = g
        .join()
        .unwrap_or_else(|_| Err("generator thread panicked".into()))?;
    r.map_err(|e| format!("sink: {e}"))?;
    let rep = sink
        .reports(&[(1, g.sent)].into_iter().collect())
        .into_iter()
        .next()
        .unwrap_or_default();
    Ok((g, rep))
}

/// The line-rate run of one class with iperf3; TOS bytes from a tap.
fn iperf3_run(
    live: &LiveLab,
    src: &str,
    dst: &str,
    tos: u8,
    o: &T1Options,
    stop: &AtomicBool,
) -> Result<T1Point, String> {
    let dip = host_ip(live, dst)?;
    let dips = dip.to_string();
    let port = IPERF_PORT.to_string();
    let _srv = ChildGuard(
        live.lab()
            .command(dst, "iperf3")
            .map_err(|e| e.to_string())?
            .args(["-s", "-1", "-B", &dips, "-p", &port])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting iperf3 -s: {e}"))?,
    );
    let tap_port = live
        .lab()
        .ports(dst)
        .first()
        .map(|p| (*p).clone())
        .ok_or("destination has no port")?;
    let mut tap = AfPacket::open_in(&tap_port.netns, &tap_port.ifname, &AfPacketConfig::default())
        .map_err(|e| format!("tap on {}: {e}", tap_port.ifname))?;
    std::thread::sleep(std::time::Duration::from_millis(250));
    let payload = o.ip_size as usize - IP_UDP_HDR;
    let bps = (o.offer_pps * payload as f64 * 8.0).round() as u64;
    let blocks = (o.offer_pps * o.duration.as_secs_f64()).round().max(1.0) as u64;
    let mut cli = ChildGuard(
        live.lab()
            .command(src, "iperf3")
            .map_err(|e| e.to_string())?
            .args([
                "-c",
                &dips,
                "-p",
                &port,
                "-u",
                "-b",
                &bps.to_string(),
                "-l",
                &payload.to_string(),
                "-k",
                &blocks.to_string(),
                "--dscp",
                &(tos >> 2).to_string(),
                "--json",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting iperf3 -c: {e}"))?,
    );
    let mut tos_out = BTreeMap::new();
    let mut seen = 0u64;
    let mut count = |f: &[u8]| {
        if let Ok(i) = wire::parse_ipv4(f) {
            if i.proto == wire::IPPROTO_UDP
                && i.dst == dip
                && i.dport == IPERF_PORT
                && i.total_len == o.ip_size as usize
            {
                *tos_out.entry(i.tos).or_insert(0u64) += 1;
                seen += 1;
            }
        }
    };
    let limit = clock::now() + o.duration + Duration::from_secs(10);
    loop {
        tap.recv_batch(512, |f, _| count(f))
            .map_err(|e| format!("tap: {e}"))?;
        if cli.0.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        if stop.load(Ordering::Relaxed) || clock::now() > limit {
            return Err("iperf3 did not finish".into());
        }
        let _ = wait_readable(&[tap.fd()], Some(Duration::from_millis(5)));
    }
    tap.recv_batch(usize::MAX, |f, _| count(f))
        .map_err(|e| format!("tap: {e}"))?;
    let mut out = String::new();
    if let Some(mut s) = cli.0.stdout.take() {
        use std::io::Read;
        s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    }
    let j: serde_json::Value = serde_json::from_str(&out).map_err(|e| format!("iperf3 output: {e}"))?;
    if let Some(e) = j.get("error").and_then(|e| e.as_str()) {
        return Err(format!("iperf3: {e}"));
    }
    let rx = &j["end"]["sum_received"];
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let expected = f(rx, "packets") as u64;
    let lost = f(rx, "lost_packets") as u64;
    let secs = f(rx, "seconds").max(1e-9);
    Ok(T1Point {
        tos,
        tool: "iperf3".into(),
        sent: (f(&j["end"]["sum_sent"], "packets") as u64).max(expected),
        received: expected.saturating_sub(lost),
        loss_pct: f(rx, "lost_percent"),
        // Payload bits to IP bits.
        throughput_bps: f(rx, "bytes") * 8.0 / secs * o.ip_size as f64 / payload as f64,
        tos_out,
        tos_out_packets: seen,
        ..T1Point::default()
    })
}

/// One class: the line-rate run (iperf3 or qosnet) and the in-profile run.
pub fn t1_point(
    live: &LiveLab,
    src: &str,
    dst: &str,
    tos: u8,
    o: &T1Options,
    stop: &Arc<AtomicBool>,
) -> Result<T1Point, String> {
    let mut p = if o.iperf3 {
        iperf3_run(live, src, dst, tos, o, stop)?
    } else {
        let (g, r) = qosnet_flow(
            live,
            src,
            dst,
            SINK_PORT,
            tos,
            Rate::Pps(o.offer_pps),
            o.ip_size,
            o.duration,
            stop,
        )?;
        T1Point {
            tos,
            tool: "qosnet".into(),
            sent: g.sent,
            received: r.received,
            loss_pct: 100.0 * r.lost as f64 / g.sent.max(1) as f64,
            throughput_bps: r.throughput_bps,
            tos_out_packets: r.tos.values().sum(),
            tos_out: r.tos,
            ..T1Point::default()
        }
    };
    // Token buckets refill (bursts of 10 packets) before the next run.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let (g, r) = qosnet_flow(
        live,
        src,
        dst,
        SINK_PORT,
        tos,
        Rate::Pps(o.in_profile_pps),
        o.ip_size,
        o.in_profile,
        stop,
    )?;
    p.tos_in = r.tos;
    p.in_sent = g.sent;
    p.in_received = r.received;
    Ok(p)
}

/// What a live T1/T3 session produced.
pub struct T1Run {
    /// Per requested class, in order.
    pub points: Vec<T1Point>,
    pub driver: DriverReport,
    /// Conditioner and router counters of every router at the end.
    pub counters: BTreeMap<String, BTreeMap<String, u64>>,
}

/// Build the lab of a T1 scenario (`sc`: one flow from the source to the
/// destination host) and run [`t1_point`] for each TOS byte in `classes`;
/// the lab is removed before returning.
pub fn t1_lab(
    sc: &Scenario,
    lo: &LiveOptions,
    stop: Arc<AtomicBool>,
    classes: &[u8],
    o: &T1Options,
    mut progress: impl FnMut(usize, &T1Point),
) -> Result<T1Run, String> {
    let f = sc.flows.first().ok_or("the T1 scenario has no flow")?;
    let (src, dst) = (sc.nodes[f.from].name.clone(), sc.nodes[f.to].name.clone());
    let mut live = LiveLab::start(sc, lo, stop.clone(), Vec::new(), None)?;
    warm_up(&live, &src, &dst)?;
    let mut points = Vec::new();
    for (k, &tos) in classes.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let p = t1_point(&live, &src, &dst, tos, o, &stop)?;
        progress(k, &p);
        points.push(p);
    }
    let (mut d, _) = live.stop().ok_or("router thread panicked")?;
    let driver = d.report();
    let counters = router_counters(&d);
    drop(d);
    live.finish().map_err(|e| e.to_string())?;
    if stop.load(Ordering::Relaxed) {
        return Err("interrupted; lab removed".into());
    }
    Ok(T1Run {
        points,
        driver,
        counters,
    })
}

/// One ping probe of T4.
#[derive(Clone, Debug, Serialize)]
pub struct Probe {
    pub name: String,
    pub tos: u8,
    /// IP packet size (ping's payload is 28 bytes less).
    pub ip_size: u32,
}

/// Settings of a T4 session (one path).
#[derive(Clone, Debug)]
pub struct T4Options {
    pub src: String,
    pub dst: String,
    pub probes: Vec<Probe>,
    /// Between a probe's pings (the scenario's 20 pps: 50 ms).
    pub interval: Duration,
    /// Length of each phase (idle, congested).
    pub phase: Duration,
    /// Run the phase without congestion too.
    pub idle: bool,
    /// BE bulk flow: from, rate (IP b/s), IP size.
    pub bulk_from: String,
    pub bulk_bps: f64,
    pub bulk_size: u32,
    /// Bulk traffic before the pings start (fills the BE queue).
    pub lead: Duration,
}

impl T4Options {
    /// From `t4-latency.toml`: the flow named `bulk` congests, every other
    /// flow is a probe (its DSCP and size) from the same source.
    pub fn from_scenario(sc: &Scenario, phase: Duration) -> Result<T4Options, String> {
        let bulk = sc
            .flows
            .iter()
            .find(|f| f.name == "bulk")
            .ok_or("T4 scenario has no flow `bulk`")?;
        let probes: Vec<&qosnet_scenario::Flow> = sc.flows.iter().filter(|f| f.name != "bulk").collect();
        let first = probes.first().ok_or("T4 scenario has no probe flows")?;
        let size = |s: &SizeDist| match s {
            SizeDist::Fixed(b) => Ok(*b),
            _ => Err("T4 probes need fixed sizes".to_string()),
        };
        Ok(T4Options {
            src: sc.nodes[first.from].name.clone(),
            dst: sc.nodes[first.to].name.clone(),
            probes: probes
                .iter()
                .map(|f| {
                    Ok(Probe {
                        name: f.name.clone(),
                        tos: f.dscp << 2,
                        ip_size: size(&f.size)?,
                    })
                })
                .collect::<Result<_, String>>()?,
            interval: Duration::from_secs_f64(1.0 / first.pps().max(1e-3)),
            phase,
            idle: true,
            bulk_from: sc.nodes[bulk.from].name.clone(),
            bulk_bps: bulk.pps() * size(&bulk.size)? as f64 * 8.0,
            bulk_size: size(&bulk.size)?,
            lead: Duration::from_millis(800),
        })
    }
}

/// ping's summary for one probe.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PingResult {
    pub name: String,
    pub tos: u8,
    pub ip_size: u32,
    pub sent: u64,
    pub received: u64,
    pub min_ms: f64,
    pub avg_ms: f64,
    pub max_ms: f64,
    pub mdev_ms: f64,
}

/// Every probe at once from `o.src` to `o.dst`, each `ping` started one
/// slot (interval / number of probes) after the previous one.
pub fn ping_all(live: &LiveLab, o: &T4Options, stop: &AtomicBool) -> Result<Vec<PingResult>, String> {
    let dip = host_ip(live, &o.dst)?.to_string();
    let count = ((o.phase.as_secs_f64() / o.interval.as_secs_f64()).round() as u64).max(1);
    let slot = o.interval.as_secs_f64() / o.probes.len().max(1) as f64;
    let interval = format!("{:.3}", o.interval.as_secs_f64());
    let mut kids = Vec::new();
    let t0 = std::time::Instant::now();
    for (k, p) in o.probes.iter().enumerate() {
        let wake = t0 + std::time::Duration::from_secs_f64(slot * k as f64);
        std::thread::sleep(wake.saturating_duration_since(std::time::Instant::now()));
        let payload = (p.ip_size as usize).saturating_sub(28).to_string();
        let child = live
            .lab()
            .command(&o.src, "ping")
            .map_err(|e| e.to_string())?
            .args([
                "-n",
                "-q",
                "-Q",
                &p.tos.to_string(),
                "-s",
                &payload,
                "-i",
                &interval,
                "-c",
                &count.to_string(),
                "-W",
                "1",
                &dip,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting ping: {e}"))?;
        kids.push(ChildGuard(child));
    }
    let mut res = Vec::new();
    for (p, mut k) in o.probes.iter().zip(kids) {
        while k.0.try_wait().map_err(|e| e.to_string())?.is_none() {
            if stop.load(Ordering::Relaxed) {
                return Err("interrupted".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let mut out = String::new();
        if let Some(mut s) = k.0.stdout.take() {
            use std::io::Read;
            let _ = s.read_to_string(&mut out);
        }
        let (sent, received, r) = parse_ping(&out);
        if sent == 0 {
            let mut err = String::new();
            if let Some(mut s) = k.0.stderr.take() {
                use std::io::Read;
                let _ = s.read_to_string(&mut err);
            }
            return Err(format!("ping {} gave no summary: {out} {err}", p.name));
        }
        res.push(PingResult {
            name: p.name.clone(),
            tos: p.tos,
            ip_size: p.ip_size,
            sent,
            received,
            min_ms: r[0],
            avg_ms: r[1],
            max_ms: r[2],
            mdev_ms: r[3],
        });
    }
    Ok(res)
}

/// What a T4 session on one path produced.
pub struct T4Run {
    /// Without congestion (empty unless [`T4Options::idle`]).
    pub idle: Vec<PingResult>,
    pub congested: Vec<PingResult>,
    /// The bulk flow: sent and received IP bits per second.
    pub bulk_sent_bps: f64,
    pub bulk_rx_bps: f64,
    /// The bulk generator's send errors and pacing lateness.
    pub bulk_send_errors: u64,
    pub bulk_lateness: LatenessSummary,
    pub driver: DriverReport,
    pub counters: BTreeMap<String, BTreeMap<String, u64>>,
}

/// Build the lab of a T4 scenario (its probe flows turned into plain
/// flows, `echo = false`, for their routes), ping without and with the
/// bulk flow, remove the lab.
pub fn t4_lab(
    sc: &Scenario,
    lo: &LiveOptions,
    stop: Arc<AtomicBool>,
    o: &T4Options,
) -> Result<T4Run, String> {
    let mut live = LiveLab::start(sc, lo, stop.clone(), Vec::new(), None)?;
    warm_up(&live, &o.src, &o.dst)?;
    warm_up(&live, &o.bulk_from, &o.dst)?;
    let idle = if o.idle {
        ping_all(&live, o, &stop)?
    } else {
        Vec::new()
    };
    // Bulk: qosnet's generator at the scenario's rate, sink at dst.
    let (bip, dip) = (host_ip(&live, &o.bulk_from)?, host_ip(&live, &o.dst)?);
    let to = SocketAddrV4::new(dip, BULK_PORT);
    let dns = live.lab().netns(&o.dst).ok_or("no namespace")?;
    let mut sink = netns::run_in(&dns, || Sink::bind(to))
        .and_then(|r| r)
        .map_err(|e| format!("bulk sink: {e}"))?;
    let bulk_dur = o.lead + o.phase + Duration::from_millis(300);
    let mut cfg = GenConfig::cbr(to, 2, Rate::Bps(o.bulk_bps), o.bulk_size, bulk_dur);
    cfg.bind = Some(SocketAddrV4::new(bip, 0));
    cfg.spin = Duration::from_micros(20);
    let bns = live.lab().netns(&o.bulk_from).ok_or("no namespace")?;
    let st = stop.clone();
    let gen = std::thread::spawn(move || {
        // The congestion is the experiment's condition: the bulk sender
        // outranks the sink and the pings (whose RTTs are timed from
        // kernel receive timestamps), not the routers (nice -15).
        set_nice(-10);
        netns::run_in(&bns, || run_gen(&cfg, &st))
            .and_then(|r| r)
            .map_err(|e| e.to_string())
    });
    let st = stop.clone();
    let until = clock::now() + bulk_dur + Duration::from_millis(300);
    let sink_t = std::thread::spawn(move || {
        let r = sink.run_until(until, &st);
        (sink, r)
    });
    std::thread::sleep(std::time::Duration::from_nanos(o.lead.as_nanos()));
    let congested = ping_all(&live, o, &stop);
    let g = gen
        .join()
        .unwrap_or_else(|_| Err("bulk generator panicked".into()))?;
    let (sink, r) = sink_t.join().map_err(|_| "bulk sink panicked")?;
    r.map_err(|e| format!("bulk sink: {e}"))?;
    let congested = congested?;
    let rep = sink
        .reports(&[(2, g.sent)].into_iter().collect())
        .into_iter()
        .next()
        .unwrap_or_default();
    let (mut d, _) = live.stop().ok_or("router thread panicked")?;
    let driver = d.report();
    let counters = router_counters(&d);
    drop(d);
    live.finish().map_err(|e| e.to_string())?;
    if stop.load(Ordering::Relaxed) {
        return Err("interrupted; lab removed".into());
    }
    let span = (g.end_ns.saturating_sub(g.start_ns)) as f64 * 1e-9;
    Ok(T4Run {
        idle,
        congested,
        bulk_sent_bps: g.sent_ip_bytes as f64 * 8.0 / span.max(1e-9),
        bulk_rx_bps: rep.throughput_bps,
        bulk_send_errors: g.send_errors,
        bulk_lateness: g.lateness,
        driver,
        counters,
    })
}
