//! The live subcommands end to end, as root (ignored
//! otherwise): `qosnet router --config` on the interfaces of a namespace
//! lab forwards ping between two hosts, and `qosnet lab run` prints the
//! per-flow table and removes its lab.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use qosnet_io::netns;
use qosnet_lab::testkit::{node_processes, read_until, read_until_listed, repo, require_root, Guard, Kill};
use qosnet_lab::{lab, labrun};

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn router_config_forwards_between_lab_hosts() {
    require_root();
    let prefix = format!("qnc{}", std::process::id());
    let _g = Guard(prefix.clone());
    let path = repo().join("scenarios/live/line.toml");
    let sc = qosnet_scenario::load_file(path.to_str().unwrap(), &[]).unwrap();
    let net = qosnet_scenario::topo::Network::build(&sc).unwrap();
    let layout = labrun::layout(&sc, &net, &prefix).unwrap();
    let lab = lab::Lab::up(&layout.spec).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("r.toml");
    std::fs::write(
        &cfg,
        format!(
            "scenario = {:?}\nnode = \"R\"\nnetns = \"{prefix}-R\"\nemulate_wire = true\n[ports]\nh1 = \"R-h1\"\nh2 = \"R-h2\"\n",
            path.to_str().unwrap()
        ),
    )
    .unwrap();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("qosnet"))
        .args(["router", "--config", cfg.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _kill = Kill(child.id());
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let text = read_until(&mut out, |t| t.contains("running"));
    assert!(text.contains("port 0: R-h1"), "{text}");
    let ping = lab.exec("h1", &["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.1.2"]);
    let _ = qosnet_io::process::kill(child.id(), qosnet_io::process::Signal::INT);
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    let ping = ping.unwrap();
    assert!(String::from_utf8_lossy(&ping.stdout).contains("3 received"));
    assert!(st.success(), "{st}");
    assert!(rest.contains("forwarded 6"), "{rest}");
    assert!(rest.contains("arp_"), "{rest}");
    lab.down().unwrap();
}

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn lab_run_prints_the_flow_table_and_cleans_up() {
    require_root();
    let prefix = format!("qnd{}", std::process::id());
    let _g = Guard(prefix.clone());
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(assert_cmd::cargo::cargo_bin("qosnet"))
        .args([
            "lab",
            "run",
            "scenarios/live/line.toml",
            "--duration",
            "1s",
            // No loss is checked always: 2 s of drain deliver what a
            // stalled sender or router sends late.
            "--set",
            "scenario.drain=2s",
            "--prefix",
            &prefix,
            "--out",
        ])
        .arg(dir.path())
        .current_dir(repo())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("cbr") && text.contains("poisson") && text.contains("router timer lateness"),
        "{text}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap()).unwrap();
    assert_eq!(j["mode"], "live");
    assert_eq!(j["flows"][0]["lost"], 0);
    assert!(j["extra"]["timer_lateness"]["p99_ns"].is_u64());
    assert!(netns::list()
        .unwrap()
        .iter()
        .all(|n| !n.starts_with(&format!("{prefix}-"))));
}

/// h1 — R1 — R2 — h2, and h3 on R2: with one process per router,
/// `kill -9` of R1's process cuts h1 off while h3 still reaches h2 through
/// R2 — a real node failure, which the other nodes survive — and stopping
/// the lab leaves no namespace and no node process behind.
const TWO_ROUTERS: &str = r#"
[scenario]
name = "two"
duration = "1s"
[defaults.link]
capacity = "100Mb/s"
[[node]]
name = "R1"
kind = "router"
[[node]]
name = "R2"
kind = "router"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"
[[node]]
name = "h3"
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
[[link]]
a = "h3"
b = "R2"
"#;

/// The worst timer lateness of a lab run's nodes (its node processes'
/// included), from `lab run --json`; unknown counts as late.
fn worst_lateness(r: &serde_json::Value) -> u64 {
    r["extra"]["timer_lateness"]["max_ns"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn one_process_per_node_survives_kill_of_one() {
    require_root();
    let prefix = format!("qnk{}", std::process::id());
    let _g = Guard(prefix.clone());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.toml");
    std::fs::write(&path, TWO_ROUTERS).unwrap();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("qosnet"))
        .args(["lab", "up", "--processes", "--prefix", &prefix])
        .arg(&path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _kill = Kill(child.id());
    let mut out = BufReader::new(child.stdout.take().unwrap());
    // Up when the last node (h3) is listed.
    let text = read_until_listed(&mut out, "h3");
    assert!(text.contains("(process "), "{text}");
    let procs = node_processes(&prefix);
    assert_eq!(procs.len(), 2, "{procs:?}");
    // Reachable: a reply within 10 s (ping stops at the first; a stall
    // of this shared machine must not read as a dead path). Unreachable:
    // no reply to 2 pings, 1 s each.
    let ping = |from: &str, to: &str, how: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &format!("{prefix}-{from}"), "ping"])
            .args(how)
            .arg(to)
            .output()
            .unwrap()
            .status
            .success()
    };
    let reaches = |from: &str, to: &str| ping(from, to, &["-c", "1", "-i", "0.2", "-w", "10"]);
    let cut_off = |from: &str, to: &str| !ping(from, to, &["-c", "2", "-i", "0.2", "-W", "1"]);
    // Addresses: link k is 10.0.k.0/24, a = .1, b = .2.
    assert!(reaches("h1", "10.0.2.2"), "h1 -> h2 before the kill");
    assert!(reaches("h3", "10.0.2.2"), "h3 -> h2 before the kill");
    let r1 = procs.iter().find(|(_, c)| c.contains("/R1.toml")).unwrap().0;
    let _ = qosnet_io::process::kill(r1, qosnet_io::process::Signal::KILL);
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(cut_off("h1", "10.0.2.2"), "h1 still reaches h2 with R1 dead");
    assert!(reaches("h3", "10.0.2.2"), "R2 stopped forwarding when R1 died");
    let _ = qosnet_io::process::kill(child.id(), qosnet_io::process::Signal::INT);
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(st.success(), "{st} {rest}");
    assert!(rest.contains("removed"), "{rest}");
    assert!(node_processes(&prefix).is_empty());
    assert!(netns::list()
        .unwrap()
        .iter()
        .all(|n| !n.starts_with(&format!("{prefix}-"))));
}

/// `qosnet lab up --metrics`: the router's counters are scraped over
/// loopback while the lab runs, in both exposition formats, and checked by
/// promtool where it is installed.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn lab_up_serves_prometheus_metrics() {
    require_root();
    let prefix = format!("qnm{}", std::process::id());
    let _g = Guard(prefix.clone());
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("qosnet"))
        .args(["lab", "up", "--prefix", &prefix, "--metrics", "127.0.0.1:0"])
        .arg(repo().join("scenarios/live/line.toml"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _kill = Kill(child.id());
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut addr = None;
    let mut seen = String::new();
    for _ in 0..50 {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 {
            break;
        }
        seen += &l;
        if let Some(a) = l.trim().strip_prefix("metrics: http://") {
            // "HOST:PORT/metrics (loopback only)" or "..., bound to ...".
            addr = a.split_once("/metrics").map(|(a, _)| a.to_string());
            break;
        }
    }
    let addr = addr.unwrap_or_else(|| panic!("no metrics address in {seen}"));
    // Drain stderr so the lab never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let text = read_until_listed(&mut out, "h2");
    assert!(text.contains("is up"), "{text}");
    let ping = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{prefix}-h1"),
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "1",
            "10.0.1.2",
        ])
        .output()
        .unwrap();
    assert!(ping.status.success(), "{}", String::from_utf8_lossy(&ping.stdout));
    let scrape = |accept: &str| {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            c,
            "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n"
        )
        .unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        let (head, body) = s.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        body.to_string()
    };
    let value = |body: &str, prefix: &str| -> Option<f64> {
        body.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    };
    // Snapshots are published every 0.5 s: wait until the pings show.
    let mut body = String::new();
    for _ in 0..40 {
        body = scrape("text/plain");
        if value(
            &body,
            "qosnet_node_events_total{node=\"R\",counter=\"forwarded\"}",
        )
        .unwrap_or(0.0)
            >= 6.0
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // 3 echo requests and 3 replies went through R.
    let fwd = value(
        &body,
        "qosnet_node_events_total{node=\"R\",counter=\"forwarded\"}",
    );
    assert!(fwd.is_some_and(|v| v >= 6.0), "forwarded {fwd:?}\n{body}");
    assert!(
        body.lines()
            .filter(|l| l.starts_with("qosnet_port_rx_packets_total{node=\"R\""))
            .count()
            == 2,
        "{body}"
    );
    assert!(
        value(&body, "qosnet_timer_lateness_seconds_count").is_some(),
        "{body}"
    );
    assert!(body.contains("# TYPE qosnet_port_queue_depth gauge"), "{body}");
    qosnet_live::metrics::check_with_promtool(&body);
    let om = scrape("application/openmetrics-text;version=1.0.0");
    assert!(om.ends_with("# EOF\n"), "{om}");
    let _ = qosnet_io::process::kill(child.id(), qosnet_io::process::Signal::INT);
    let st = child.wait().unwrap();
    assert!(st.success(), "{st}");
    assert!(!netns::exists(&format!("{prefix}-R")), "lab left behind");
}

/// Run `cmd` in namespace `ns`; (success, stdout, stderr).
fn in_ns(ns: &str, cmd: &[&str]) -> (bool, String, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A RETHER segment live: `qosnet lab run` of
/// scenarios/rether/live.toml starts one `qosnet node` per station, each
/// in its namespace with its host's IP stack on a TAP. While s1's RT
/// session holds the segment in RETHER mode, ordinary `ping` and `iperf3`
/// TCP between the stations' namespaces cross it on the token's NRT
/// turns. Protocol facts are asserted (delivery, one token created, the
/// token visiting every station, the RT session admitted and carrying its
/// units); timing figures are printed, not asserted.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn rether_segment_carries_ping_and_tcp_live() {
    require_root();
    let prefix = format!("qr{}", std::process::id());
    let _g = Guard(prefix.clone());
    let path = repo().join("scenarios/rether/live.toml");
    let sc = qosnet_scenario::load_file(path.to_str().unwrap(), &[]).unwrap();
    let net = qosnet_scenario::topo::Network::build(&sc).unwrap();
    let ip_of = |n: &str| net.host_ip(sc.node_index(n).unwrap()).to_string();
    let (s1, s2) = (ip_of("s1"), ip_of("s2"));
    let child = Command::new(assert_cmd::cargo::cargo_bin("qosnet"))
        .args(["lab", "run", "--json", "--prefix", &prefix, "--duration", "12s"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _kill = Kill(child.id());
    // The stations are up once s3's TAP carries its address; traffic (the
    // RT session's first unit, which switches the segment to RETHER mode)
    // starts 5 to 6 s after their processes are spawned (a whole second
    // at least 2 s, plus 1 s per station process, after the lab is up).
    // Ping and TCP go 7 s after the address, inside RETHER mode.
    let ns = |n: &str| format!("{prefix}-{n}");
    let t = std::time::Instant::now();
    while !in_ns(&ns("s3"), &["ip", "-4", "addr", "show", "host0"])
        .1
        .contains("inet ")
    {
        assert!(t.elapsed().as_secs() < 30, "stations did not come up");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(7000));
    let (ok, out, err) = in_ns(&ns("s3"), &["ping", "-c", "5", "-i", "0.2", "-W", "3", &s2]);
    eprintln!("ping s3 -> s2:\n{out}{err}");
    assert!(
        ok && out.contains("5 received"),
        "ping across the RETHER segment failed"
    );
    let mut server = Command::new("ip")
        .args(["netns", "exec", &ns("s2"), "iperf3", "-s", "-1", "-B", &s2])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _ks = Kill(server.id());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (ok, out, err) = in_ns(
        &ns("s1"),
        &[
            "iperf3",
            "-c",
            &s2,
            "-B",
            &s1,
            "-t",
            "2",
            "-J",
            "--connect-timeout",
            "3000",
        ],
    );
    // iperf3 -s -1 exits after one test (killed if the client failed).
    let _ = server.kill();
    let _ = server.wait();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    let bytes = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    let bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    eprintln!("iperf3 TCP s1 -> s2: {bytes} bytes, {:.2} Mb/s {err}", bps / 1e6);
    assert!(
        ok && bytes > 100_000,
        "iperf3 TCP across the RETHER segment failed: {out} {err}"
    );
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = |n: &str, k: &str| {
        r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == n)
            .and_then(|x| x["counters"][k].as_u64())
            .unwrap_or(0)
    };
    let stations = ["s1", "s2", "s3"];
    for s in stations {
        eprintln!(
            "{s}: token passes {}, regenerations {}, retransmits {}, declared dead {}, from host {}, to host {}",
            c(s, "token_passes"),
            c(s, "token_regenerations"),
            c(s, "token_retransmits"),
            c(s, "successors_declared_dead"),
            c(s, "host_stack_from_host"),
            c(s, "host_stack_to_host")
        );
        // The token went round: every station received and passed it
        // many times (a cycle of 10 ms visits each station at least once).
        assert!(c(s, "token_received") >= 100, "{s} hardly saw the token");
        assert!(c(s, "token_passes") >= 100, "{s} hardly passed the token");
        assert!(c(s, "mode_to_rether") >= 1, "{s} never switched to RETHER");
        assert!(c(s, "host_stack_from_host") > 0 && c(s, "host_stack_to_host") > 0);
    }
    // One token: a single initiator created it, and the session was
    // admitted once. Unless a station's process was late by the failure
    // timers' slack (live.toml's ack_margin, 50 ms): then it may really
    // have been silent long enough to be declared dead, its session
    // dropped and opened again.
    let created: u64 = stations.iter().map(|s| c(s, "tokens_created")).sum();
    let worst = worst_lateness(&r);
    if worst < 50_000_000 {
        assert_eq!(created, 1, "tokens created");
        assert_eq!(c("s1", "admission_accepts"), 1, "RT session admitted");
    } else {
        qosnet_lab::testkit::relaxed(
            "one token and one admission",
            &format!("a station was {worst} ns late"),
        );
        eprintln!(
            "NOTE: one token and one admission not checked: a station was {worst} ns late ({created} tokens created)"
        );
        assert!(created >= 1 && c("s1", "admission_accepts") >= 1);
    }
    let rt = &r["flows"][0];
    assert_eq!(rt["name"], "rt");
    assert!(rt["received"].as_u64().unwrap() > 0, "RT units delivered: {rt}");
    eprintln!("rt flow: {rt}");
    assert!(netns::list()
        .unwrap()
        .iter()
        .all(|n| !n.starts_with(&format!("{prefix}-"))));
}

/// A real station failure (RETHER §2.4): `kill -9` of station s3's
/// process while s1's RT session holds the segment in RETHER mode. The
/// survivors must notice — s3's predecessor declares it dead after its
/// token retransmissions, or, had it died holding the token, a survivor
/// regenerates it — and the session must keep its reservation: never
/// revoked, its RT visits going on for the rest of the run.
#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn rether_survives_kill_of_a_station_live() {
    require_root();
    let prefix = format!("qrk{}", std::process::id());
    let _g = Guard(prefix.clone());
    let path = repo().join("scenarios/rether/live.toml");
    // Timed from the start of traffic (the RT session's first unit, which
    // switches the segment to RETHER mode), not from the processes'
    // appearance: traffic starts 5 to 6 s after they are spawned, and a
    // kill at a fixed 5.5 s after that fell before it about half the time
    // (s3 was then a switch non-responder, not a dead successor).
    let child = Command::new(assert_cmd::cargo::cargo_bin("qosnet"))
        .args(["lab", "run", "--json", "--prefix", &prefix, "--duration", "12s"])
        .args(["--kill", "s3@3s"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _kill = Kill(child.id());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["extra"]["nodes_without_report"], serde_json::json!(["s3"]));
    let node = |n: &str| {
        r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == n)
            .cloned()
            .unwrap_or_default()
    };
    let c = |n: &str, k: &str| node(n)["counters"][k].as_u64().unwrap_or(0);
    for s in ["s1", "s2"] {
        eprintln!(
            "{s}: declared dead {}, retransmits {}, regenerations {}, token passes {}",
            c(s, "successors_declared_dead"),
            c(s, "token_retransmits"),
            c(s, "token_regenerations"),
            c(s, "token_passes")
        );
    }
    let noticed: u64 = ["s1", "s2"]
        .iter()
        .map(|s| c(s, "successors_declared_dead") + c(s, "token_regenerations"))
        .sum();
    assert!(noticed >= 1, "no survivor noticed s3's death");
    let session = node("s1")["details"]["sessions"][0].clone();
    eprintln!("s1's session: {session}");
    // Kept unless a survivor was late by the failure timers' slack (50 ms)
    // and so may really have been declared dead with its session.
    let worst = worst_lateness(&r);
    if worst < 50_000_000 {
        assert_eq!(session["revoked"], 0, "the RT session lost its reservation");
    } else {
        qosnet_lab::testkit::relaxed(
            "the reservation's survival",
            &format!("a station was {worst} ns late"),
        );
        eprintln!("NOTE: the reservation's survival not checked: a station was {worst} ns late");
    }
    assert!(session.get("admitted_at_ns").is_some());
    // 12 s of 10 ms cycles: RT visits went on long after the kill (~3 s
    // into the traffic) — more than twice what the time before it allows.
    let visits = session["rt_visits"].as_u64().unwrap_or(0);
    assert!(visits > 600, "RT visits stopped after the kill: {visits}");
    assert!(r["flows"][0]["received"].as_u64().unwrap_or(0) > 300);
}
