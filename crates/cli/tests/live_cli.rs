//! The live subcommands end to end, as root (skipped with a message
//! otherwise): `qosnet router --config` on the interfaces of a namespace
//! lab forwards ping between two hosts, and `qosnet lab run` prints the
//! per-flow table and removes its lab.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use qosnet_live::{lab, labrun, netns};

fn root() -> bool {
    if !netns::is_root() {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: needs root (network namespaces, AF_PACKET)"
        );
        return false;
    }
    true
}

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Guard(String);
impl Drop for Guard {
    fn drop(&mut self) {
        let _ = lab::cleanup(&self.0);
    }
}

#[test]
fn router_config_forwards_between_lab_hosts() {
    if !root() {
        return;
    }
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
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    while !text.contains("running") {
        let mut l = String::new();
        if out.read_line(&mut l).unwrap() == 0 {
            break;
        }
        text += &l;
    }
    assert!(text.contains("port 0: R-h1"), "{text}");
    let ping = lab.exec("h1", &["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.1.2"]);
    // SAFETY: SIGINT to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
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
fn lab_run_prints_the_flow_table_and_cleans_up() {
    if !root() {
        return;
    }
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
