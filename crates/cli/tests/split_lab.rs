//! A lab split across two machines, on one host (root; ignored
//! otherwise): two network namespaces play the machines, joined by
//! an underlay veth with addresses, and the placement file names them
//! (`netns = ...`), so each `qosnet lab` command creates its tunnels' VXLAN
//! devices there and moves them into its node namespaces, as it would on a
//! real host in the root namespace.
//!
//! `scenarios/live/tdp-split.toml` (h1 — R1 — R2 — h2) is split with h1
//! and R1 on m1, R2 and h2 on m2: the R1–R2 link is a VXLAN tunnel. With
//! `lab up` on both machines (one `qosnet node` process per router), ping
//! and iperf3 cross the tunnel; with `lab run` on both, the scenario's
//! flows run across it and `lab merge` joins the two results; the same
//! scenario on a single namespace set runs in the same test, and both are
//! printed. Delivery is asserted strictly (FIFO and DiffServ lose nothing
//! at these loads); timing is printed, not asserted: it depends on the
//! machine's load, which the two runs share.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use qosnet_io::netns;
use qosnet_lab::lab;
use qosnet_lab::testkit::{repo, require_root_for, tool};

fn qosnet() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("qosnet"));
    c.current_dir(repo());
    c
}

/// Whatever happens, the labs' namespaces (both machines' parts share the
/// prefix) and the two machine namespaces go away.
struct Cleanup {
    prefix: String,
    machines: Vec<String>,
}
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = lab::cleanup(&self.prefix);
        for m in &self.machines {
            let _ = Command::new("ip").args(["netns", "del", m]).status();
        }
    }
}

/// Kills a child (and, through PDEATHSIG, its node processes) however the
/// test ends.
struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn in_ns(ns: &str, argv: &[&str]) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(argv)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `lab up` of one machine, read until it says the lab is up; returns the
/// child and what it printed.
fn lab_up(placement: &str, machine: &str, prefix: &str, sets: &[&str]) -> (Kill, String) {
    let mut c = qosnet();
    c.args([
        "lab",
        "up",
        "scenarios/live/tdp-split.toml",
        "--processes",
        "--prefix",
        prefix,
    ])
    .args(["--placement", placement, "--machine", machine]);
    for s in sets {
        c.args(["--set", s]);
    }
    let mut child = Kill(c.stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap());
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut text = String::new();
    loop {
        let mut l = String::new();
        if out.read_line(&mut l).unwrap() == 0 {
            panic!("lab up {machine} ended before the lab was up:\n{text}");
        }
        text += &l;
        // The last line `lab up` prints before it waits.
        if l.starts_with("try:") {
            break;
        }
    }
    // The rest of its output is not needed; keep the pipe drained.
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut sink);
    });
    (child, text)
}

/// The address `lab up` printed for port `ifname`.
fn addr_of(text: &str, ifname: &str) -> String {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == ifname {
            if let Some(a) = words.next() {
                return a.split('/').next().unwrap().trim_end_matches(',').to_string();
            }
        }
    }
    panic!("no address of {ifname} in:\n{text}");
}

fn results(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn flow<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no flow {name}"))
}

#[test]
#[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
fn lab_split_across_two_machines_over_vxlan() {
    require_root_for("network namespaces, VXLAN, AF_PACKET");
    let pid = std::process::id();
    let prefix = format!("qv{pid}");
    let (m1, m2) = (format!("qv{pid}m1"), format!("qv{pid}m2"));
    let _clean = Cleanup {
        prefix: prefix.clone(),
        machines: vec![m1.clone(), m2.clone()],
    };
    // The underlay: a veth between the machines, MTU 1550 so the tunnel
    // carries the lab's 1500-byte packets (docs/live.md, MTU).
    ip(&["netns", "add", &m1]);
    ip(&["netns", "add", &m2]);
    #[rustfmt::skip]
    ip(&["-n", &m1, "link", "add", "ul0", "mtu", "1550", "type", "veth",
         "peer", "name", "ul0", "mtu", "1550", "netns", &m2]);
    for (m, a) in [(&m1, "10.99.0.1/24"), (&m2, "10.99.0.2/24")] {
        ip(&["-n", m, "addr", "add", a, "dev", "ul0"]);
        ip(&["-n", m, "link", "set", "ul0", "up"]);
    }
    let dir = tempfile::tempdir().unwrap();
    let placement = dir.path().join("placement.toml");
    std::fs::write(
        &placement,
        format!(
            "[machine.m1]\nunderlay = \"10.99.0.1\"\nnetns = \"{m1}\"\nnodes = [\"h1\", \"R1\"]\n\n\
             [machine.m2]\nunderlay = \"10.99.0.2\"\nnetns = \"{m2}\"\nnodes = [\"R2\", \"h2\"]\n"
        ),
    )
    .unwrap();
    let pl = placement.to_str().unwrap();

    // --- ping and iperf3 across the tunnel, FIFO routers -----------------
    {
        let fifo = ["node.R*.scheduler=fifo"];
        let (_up1, t1) = lab_up(pl, "m1", &prefix, &fifo);
        let (_up2, t2) = lab_up(pl, "m2", &prefix, &fifo);
        println!("--- lab up m1:\n{t1}--- lab up m2:\n{t2}");
        assert!(
            t1.contains("R1:R1-R2 is VXLAN") && t1.contains("MTU 1500"),
            "{t1}"
        );
        assert!(t2.contains("R2:R2-R1 is VXLAN"), "{t2}");
        // Each machine built only its own nodes.
        let ns: Vec<String> = netns::list().unwrap();
        for n in ["h1", "R1", "R2", "h2"] {
            assert!(ns.contains(&format!("{prefix}-{n}")), "{ns:?}");
        }
        assert!(!t1.contains(&format!("{prefix}-h2")) && !t2.contains(&format!("{prefix}-h1")));
        // The tunnel's device sits in R1's namespace; its UDP socket in m1.
        let d = ip(&["-n", &format!("{prefix}-R1"), "-d", "-o", "link", "show", "R1-R2"]);
        assert!(
            d.contains("vxlan id") && d.contains("remote 10.99.0.2") && d.contains("dstport 4789"),
            "{d}"
        );
        let udp = in_ns(&m1, &["ss", "-uln"]);
        assert!(
            String::from_utf8_lossy(&udp.stdout).contains(":4789"),
            "no VXLAN socket in {m1}"
        );

        let h1 = format!("{prefix}-h1");
        let h2_addr = addr_of(&t2, "h2-R2");
        let ping = in_ns(&h1, &["ping", "-c", "5", "-i", "0.2", "-W", "2", &h2_addr]);
        let ptext = String::from_utf8_lossy(&ping.stdout);
        println!("{ptext}");
        assert!(ptext.contains("5 received"), "{ptext}");
        // Full-size packets (1500 bytes of IP, DF set) cross the tunnel.
        let big = in_ns(
            &h1,
            &[
                "ping", "-c", "2", "-i", "0.2", "-W", "2", "-M", "do", "-s", "1472", &h2_addr,
            ],
        );
        let btext = String::from_utf8_lossy(&big.stdout);
        assert!(btext.contains("2 received"), "{btext}");

        if tool("iperf3") {
            let h2 = format!("{prefix}-h2");
            let _server = Kill(
                Command::new("ip")
                    .args(["netns", "exec", &h2, "iperf3", "-s", "-1", "-p", "5299"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
            let mut report = None;
            for _ in 0..20 {
                std::thread::sleep(std::time::Duration::from_millis(200));
                let o = in_ns(&h1, &["iperf3", "-c", &h2_addr, "-p", "5299", "-t", "2", "-J"]);
                if o.status.success() {
                    report = Some(String::from_utf8_lossy(&o.stdout).into_owned());
                    break;
                }
            }
            let j: serde_json::Value =
                serde_json::from_str(&report.expect("iperf3 never connected")).unwrap();
            let (sent, recv) = (&j["end"]["sum_sent"], &j["end"]["sum_received"]);
            println!(
                "iperf3 h1 -> h2 across the tunnel (TCP, 2 s): {:.1} Mb/s received, {} retransmits",
                recv["bits_per_second"].as_f64().unwrap() / 1e6,
                sent["retransmits"]
            );
            assert!(recv["bytes"].as_u64().unwrap() > 100_000, "{j}");
        }
        // _up1 and _up2 drop here: SIGKILL; their node processes follow
        // (PDEATHSIG) and the namespaces go with the explicit down below.
    }
    for m in ["m1", "m2"] {
        let out = qosnet()
            .args([
                "lab",
                "down",
                "--prefix",
                &prefix,
                "--placement",
                pl,
                "--machine",
                m,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let ours = |p: &str| {
        netns::list()
            .unwrap()
            .into_iter()
            .filter(|n| n.starts_with(&format!("{p}-")))
            .collect::<Vec<_>>()
    };
    assert!(ours(&prefix).is_empty(), "{:?}", ours(&prefix));

    // --- the scenario split across the machines, then on one ------------
    let ds = "node.R*.scheduler=diffserv";
    // No loss is checked always: 2 s of drain deliver what a stalled
    // sender or node sends late.
    let drain = "scenario.drain=2s";
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 12;
    let run_part = |m: &str| {
        let out = dir.path().join(m);
        let child = qosnet()
            .args([
                "lab",
                "run",
                "scenarios/live/tdp-split.toml",
                "--processes",
                "--prefix",
                &prefix,
            ])
            .args(["--set", ds, "--set", drain, "--placement", pl, "--machine", m])
            .args(["--start-at", &start.to_string(), "--out"])
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        (Kill(child), out)
    };
    let (mut c1, o1) = run_part("m1");
    let (mut c2, o2) = run_part("m2");
    for (c, m) in [(&mut c1, "m1"), (&mut c2, "m2")] {
        let mut text = String::new();
        std::io::Read::read_to_string(c.0.stdout.as_mut().unwrap(), &mut text).unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(c.0.stderr.as_mut().unwrap(), &mut err).unwrap();
        let st = c.0.wait().unwrap();
        println!("--- lab run {m}:\n{text}");
        assert!(st.success(), "lab run {m}: {st}\n{text}\n{err}");
    }
    let (r1, r2) = (
        results(&o1.join("results.json")),
        results(&o2.join("results.json")),
    );
    // Each machine says what it measured.
    assert_eq!(r1["extra"]["placement"]["flows"]["east"], "source");
    assert_eq!(r2["extra"]["placement"]["flows"]["east"], "sink");
    assert_eq!(r1["extra"]["placement"]["flows"]["west"], "sink");
    let (tu1, tu2) = (
        &r1["extra"]["placement"]["tunnels"][0],
        &r2["extra"]["placement"]["tunnels"][0],
    );
    assert_eq!(tu1["vni"], tu2["vni"]);
    assert_eq!(
        (tu1["mtu"].as_u64(), tu1["underlay_mtu"].as_u64()),
        (Some(1500), Some(1550))
    );
    let merged_path = dir.path().join("merged.json");
    let merge = qosnet()
        .args(["lab", "merge"])
        .arg(o1.join("results.json"))
        .arg(o2.join("results.json"))
        .arg("--out")
        .arg(&merged_path)
        .output()
        .unwrap();
    let mtext = String::from_utf8_lossy(&merge.stdout);
    assert!(
        merge.status.success(),
        "{mtext}{}",
        String::from_utf8_lossy(&merge.stderr)
    );
    println!("--- lab merge:\n{mtext}");
    let split = results(&merged_path);
    assert_eq!(flow(&split, "east")["sent"], flow(&r1, "east")["sent"]);
    assert_eq!(flow(&split, "east")["received"], flow(&r2, "east")["received"]);

    let single_out = dir.path().join("single");
    let single = qosnet()
        .args([
            "lab",
            "run",
            "scenarios/live/tdp-split.toml",
            "--processes",
            "--prefix",
            &prefix,
        ])
        .args(["--set", ds, "--set", drain, "--out"])
        .arg(&single_out)
        .output()
        .unwrap();
    let stext = String::from_utf8_lossy(&single.stdout);
    println!("--- lab run, single namespace set:\n{stext}");
    assert!(
        single.status.success(),
        "{stext}{}",
        String::from_utf8_lossy(&single.stderr)
    );
    let single = results(&single_out.join("results.json"));

    println!("flow   run      sent  received  lost  delay p50      p99      max (us)");
    for name in ["east", "west"] {
        for (label, r) in [("split", &split), ("single", &single)] {
            let f = flow(r, name);
            let us = |k: &str| f["delay_ns"][k].as_f64().unwrap_or(0.0) / 1e3;
            println!(
                "{name:<6} {label:<7} {:>5} {:>9} {:>5} {:>10.1} {:>8.1} {:>8.1}",
                f["sent"],
                f["received"],
                f["lost"],
                us("p50"),
                us("p99"),
                us("max")
            );
            // 1000 and ~500 pps for 2.5 s: well over 500 each, all delivered.
            let sent = f["sent"].as_u64().unwrap();
            assert!(sent > 500, "{label} {name}: {f}");
            assert_eq!(
                (f["received"].as_u64(), f["lost"].as_u64()),
                (Some(sent), Some(0)),
                "{label} {name}: {f}"
            );
        }
    }
    assert!(ours(&prefix).is_empty(), "{:?}", ours(&prefix));
    for m in [&m1, &m2] {
        let left = ip(&["-n", m, "-o", "link", "show", "type", "vxlan"]);
        assert!(left.trim().is_empty(), "{m} kept a VXLAN device: {left}");
    }
}
