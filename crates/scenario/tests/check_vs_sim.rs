//! `qosnet check` and `qosnet sim` refuse the same files: every validation
//! a driver runs happens at load, so no scenario passes `check` and then
//! fails to build in `sim`. Run on a corpus of bad files (each once passed
//! `check` or reached the simulator, see the comment at its top) and on
//! every shipped scenario.

use std::path::{Path, PathBuf};

use qosnet_scenario::{load_file, tdpplan, topo::Network};
use qosnet_sim::Sim;

/// What `qosnet check FILE` does before it prints "ok".
fn check_path(p: &str) -> Result<(), String> {
    let sc = load_file(p, &[]).map_err(|e| e.to_string())?;
    let net = Network::build(&sc)?;
    if sc.tdp.is_some() {
        tdpplan::plan(&sc, &net)?;
    }
    Ok(())
}

/// What `qosnet sim FILE` does before it runs.
fn sim_path(p: &str) -> Result<(), String> {
    let sc = load_file(p, &[]).map_err(|e| e.to_string())?;
    Sim::new(sc).map(|_| ())
}

fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| {
        let n = p.to_string_lossy();
        n.ends_with(".toml") && !n.ends_with(".router.toml") && !n.ends_with(".placement.toml")
    });
    v.sort();
    v
}

#[test]
fn check_and_sim_agree_on_a_corpus_of_bad_files() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let corpus = toml_files(&root.join("tests/corpus"));
    assert!(corpus.len() >= 20, "corpus has {} files", corpus.len());
    for p in &corpus {
        let ps = p.to_str().unwrap_or_default();
        let (c, s) = (check_path(ps), sim_path(ps));
        assert_eq!(c, s, "{ps}: check and sim disagree");
        let bad = p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("bad-"));
        if bad {
            // Refused at load, at a line of the file, with a hint.
            let e = load_file(ps, &[]).expect_err(ps);
            assert!(e.line > 0 && !e.hint.is_empty(), "{ps}: {e}");
            assert!(e.file == ps, "{ps}: {e}");
        } else {
            assert!(c.is_ok(), "{ps}: {c:?}");
        }
    }
}

#[test]
fn check_and_sim_agree_on_the_shipped_scenarios() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut n = 0;
    for dir in ["tdp-icc2006", "diffserv-degeb", "examples", "live"] {
        for p in toml_files(&root.join(dir)) {
            let ps = p.to_str().unwrap_or_default();
            assert_eq!(check_path(ps), Ok(()), "{ps}");
            assert_eq!(sim_path(ps), Ok(()), "{ps}");
            assert!(load_file(ps, &[]).unwrap().warnings.is_empty(), "{ps}");
            n += 1;
        }
    }
    assert!(n >= 9);
}

/// Two hosts on a switch: the base the switch rows of the table edit.
const SWITCHED: &str = r#"[scenario]
name = "switched"
duration = "100ms"

[defaults.link]
capacity = "1Gb/s"

[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"
[[node]]
name = "S1"
kind = "switch"
switch = { latency = "1us" }
[[node]]
name = "S2"
kind = "switch"
[[node]]
name = "S3"
kind = "switch"

[[link]]
a = "h1"
b = "S1"
[[link]]
a = "S1"
b = "S2"
[[link]]
a = "S2"
b = "S3"
[[link]]
a = "S2"
b = "h2"

[[flow]]
name = "f"
from = "h1"
to = "h2"
size = 500
rate = "90Mb/s"
"#;

/// Three RETHER stations on one segment, one crashing and rebooting.
const RETHER: &str = r#"[scenario]
name = "rether"
duration = "1s"

[rether]
trt = "33ms"

[[rether.fault]]
node = "s3"
at = "300ms"
kind = "crash"
restart = "600ms"

[[node]]
name = "s1"
kind = "rether"
[[node]]
name = "s2"
kind = "rether"
[[node]]
name = "s3"
kind = "rether"

[[segment]]
name = "bus"
nodes = ["s1", "s2", "s3"]
jam_bits = 32

[[flow]]
name = "video"
from = "s1"
to = "s2"
rt = true
size = 6400
rate = "30pps"
"#;

/// `n` RETHER stations on one segment.
fn rether_stations(n: usize) -> String {
    let mut s = String::from(
        "[scenario]\nname = \"many\"\nduration = \"100ms\"\n\n[rether]\ntrt = \"1s\"\nt_token = \"20us\"\n\n",
    );
    for i in 0..n {
        s += &format!("[[node]]\nname = \"s{i}\"\nkind = \"rether\"\n");
    }
    let list: Vec<String> = (0..n).map(|i| format!("\"s{i}\"")).collect();
    s += &format!(
        "[[segment]]\nname = \"bus\"\ncapacity = \"100Mb/s\"\nsubnet = \"10.9.0.0/16\"\nnodes = [{}]\n",
        list.join(", ")
    );
    s
}

/// A shipped scenario's text (`dir/file.toml` under scenarios/).
fn shipped(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Each row: a scenario, the text of the line the error must name, and
/// a part of the message. Every row once passed `check` and was refused
/// (or misbehaved) only in `sim`.
fn bad_rows() -> Vec<(&'static str, String, &'static str, &'static str)> {
    vec![
        (
            "switch-queue-bytes",
            SWITCHED.replace("latency = \"1us\"", "queue_bytes = 100"),
            "queue_bytes = 100",
            "cannot hold one 1518-byte frame",
        ),
        (
            "switch-aging-zero",
            SWITCHED.replace("latency = \"1us\"", "aging = \"0\""),
            "aging = \"0\"",
            "aging = 0",
        ),
        (
            "switch-no-links",
            SWITCHED.replace("[[link]]\na = \"S2\"\nb = \"S3\"\n", ""),
            "name = \"S3\"",
            "switch `S3` has no links",
        ),
        (
            "switch-loop",
            SWITCHED.replace(
                "[[link]]\na = \"S2\"\nb = \"h2\"",
                "[[link]]\na = \"S3\"\nb = \"S1\"\n[[link]]\na = \"S2\"\nb = \"h2\"",
            ),
            "a = \"S3\"",
            "layer-2 loop: S1 -> S2 -> S3 -> S1",
        ),
        (
            "rether-ack-margin-zero",
            RETHER.replace("trt = \"33ms\"", "trt = \"33ms\"\nack_margin = \"0\""),
            "ack_margin",
            "ack_margin = 0",
        ),
        (
            "rether-256-stations",
            rether_stations(256),
            "nodes = [",
            "256 RETHER stations",
        ),
        (
            "rether-fault-after-the-run",
            RETHER.replace("at = \"300ms\"", "at = \"5s\""),
            "at = \"5s\"",
            "at = 5s is not within the run (1s)",
        ),
        (
            "rether-restart-after-the-run",
            RETHER.replace("restart = \"600ms\"", "restart = \"2s\""),
            "restart = \"2s\"",
            "restart = 2s is not within the run",
        ),
        (
            "rether-overlapping-crashes",
            RETHER.replace(
                "[[node]]\nname = \"s1\"",
                "[[fault]]\nnode = \"s3\"\nat = \"400ms\"\nkind = \"crash-holding\"\n\n[[node]]\nname = \"s1\"",
            ),
            "at = \"400ms\"",
            "`s3` is already down at 400ms: the kind = \"crash\" fault at 300ms keeps it down until its restart at 600ms",
        ),
        (
            "rether-kill-while-crashed",
            RETHER.replace(
                "[[node]]\nname = \"s1\"",
                "[[fault]]\nnode = \"s3\"\nat = \"500ms\"\nkind = \"kill\"\n\n[[node]]\nname = \"s1\"",
            ),
            "at = \"500ms\"",
            "`s3` is already down at 500ms",
        ),
        (
            "stsdr-ds-frames-over-the-tswitch-mtu",
            shipped("stsdr/mds.toml")
                .replace("[stsdr]\n", "[stsdr]\nmtu = 9000\n")
                .replace("l = 25", "l = 150"),
            "mtu = 9000",
            "larger than the T-switch `tsw` passes (its mtu is 1500)",
        ),
        (
            "stsdr-heartbeat-1ns",
            shipped("stsdr/nowfq.toml").replace("variant = \"nowfq\"\n", "variant = \"nowfq\"\nheartbeat = \"1ns\"\n"),
            "heartbeat = \"1ns\"",
            "heartbeat = 1ns is below 80.64us",
        ),
        (
            "stsdr-heartbeat-over-the-budget",
            shipped("stsdr/nowfq.toml")
                .replace("variant = \"nowfq\"\n", "variant = \"nowfq\"\nheartbeat = \"100us\"\n")
                .replace("duration = \"150ms\"", "duration = \"86400s\""),
            "heartbeat = \"100us\"",
            "more than 1000000000 events for one timer",
        ),
        (
            "rether-token-timer-over-the-budget",
            RETHER
                .replace("trt = \"33ms\"", "trt = \"33ms\"\nt_token = \"80us\"")
                .replace("duration = \"1s\"", "duration = \"86400s\""),
            "t_token = \"80us\"",
            "a RETHER token pass (t_token) of 80us fires",
        ),
        (
            "segment-jam-zero",
            RETHER.replace("jam_bits = 32", "jam_bits = 0"),
            "jam_bits = 0",
            "jam_bits = 0 is out of range",
        ),
    ]
}

#[test]
fn check_and_sim_refuse_a_table_of_bad_scenarios_alike_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, needle, msg) in bad_rows() {
        let p = dir.path().join(format!("{name}.toml"));
        std::fs::write(&p, &text).unwrap();
        let ps = p.to_str().unwrap();
        let (c, s) = (check_path(ps), sim_path(ps));
        assert_eq!(c, s, "{name}: check and sim disagree");
        let e = c.expect_err(name);
        let line = text.lines().position(|l| l.contains(needle)).expect(needle) + 1;
        assert!(
            e.starts_with(&format!("{ps}:{line}:")),
            "{name}: not at line {line}: {e}"
        );
        assert!(e.contains(msg), "{name}: `{msg}` not in: {e}");
        assert!(e.contains("hint:"), "{name}: no hint: {e}");
    }
}

/// The bases of the table are valid, so each row fails for its one edit.
#[test]
fn the_bases_of_the_bad_table_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("switched", SWITCHED.to_string()),
        ("rether", RETHER.to_string()),
        ("many", rether_stations(255)),
    ] {
        let p = dir.path().join(format!("{name}.toml"));
        std::fs::write(&p, &text).unwrap();
        let ps = p.to_str().unwrap();
        assert_eq!(check_path(ps), Ok(()), "{name}");
        assert_eq!(sim_path(ps), Ok(()), "{name}");
    }
}

/// STSDR jumbo DS frames (§VI) work once the T-switch takes them: M-DS
/// with 150 slots per queue needs about 8 KB DS frames (26 fit in 1500
/// bytes), refused at mtu 1500, and forwarding every flow with mtu 9000
/// on both the STSDR and the T-switch (before switch `mtu` existed, the
/// T-switch dropped 6 148 such DS frames, `oversize`, and no flow got a
/// packet).
#[test]
fn stsdr_jumbo_ds_frames_cross_a_jumbo_tswitch() {
    let base = shipped("stsdr/mds.toml").replace("l = 25", "l = 150");
    assert!(
        load_str_ok("mds.toml", &base).is_err(),
        "150 slots fit no 1500-byte DS frame"
    );
    let jumbo = base.replace("[stsdr]\n", "[stsdr]\nmtu = 9000\n").replace(
        "switch = { queue_packets = 1000,",
        "switch = { mtu = 9000, queue_packets = 1000,",
    );
    // mtu = 9000 alone: S-DS frames are small and cross a 1500-byte
    // switch (at the docs' light load every packet arrives).
    let sds = shipped("stsdr/sds.toml")
        .replace("[stsdr]\n", "[stsdr]\nmtu = 9000\n")
        .replace("rate = \"2600pps\"", "rate = \"144.7pps\"");
    for text in [jumbo, sds] {
        let sc = qosnet_scenario::load_str("stsdr.toml", &text, &[]).unwrap_or_else(|e| panic!("{e}"));
        let r = Sim::new(sc).expect("builds").run();
        for f in &r.flows {
            // Longer DS frames make longer cycles (fewer packets per second
            // than l = 25); what matters here is that packets get through.
            assert!(f.received > 0, "{}: {} of {}", f.name, f.received, f.sent);
        }
    }
}

fn load_str_ok(file: &str, text: &str) -> Result<(), String> {
    qosnet_scenario::load_str(file, text, &[])
        .map(|_| ())
        .map_err(|e| e.to_string())
}
