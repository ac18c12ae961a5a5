//! Every class of scenario error gives file:line, a message and a hint.

use qosnet_scenario::{load_str, ScenarioError};

const BASE: &str = r#"
[scenario]
name = "t"
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
name = "f"
from = "h1"
to = "h2"
size = 500
rate = "1Mb/s"
"#;

fn err(text: &str) -> ScenarioError {
    load_str("x.toml", text, &[]).expect_err("scenario should be refused")
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .expect("needle in text")
        + 1
}

fn check(text: &str, needle: &str, msg: &str) {
    let e = err(text);
    assert_eq!(e.file, "x.toml");
    assert_eq!(e.line, line_of(text, needle), "wrong line for {e}");
    assert!(e.msg.contains(msg), "message `{}` lacks `{msg}`", e.msg);
    assert!(!e.hint.is_empty(), "no hint in {e}");
    let shown = e.to_string();
    assert!(shown.starts_with(&format!("x.toml:{}:", e.line)), "{shown}");
}

#[test]
fn base_is_valid() {
    let sc = load_str("x.toml", BASE, &[]).unwrap();
    assert_eq!(sc.nodes.len(), 4);
    assert_eq!(sc.flows[0].pps(), 1e6 / (8.0 * 500.0));
}

#[test]
fn toml_syntax() {
    let t = BASE.replace("size = 500", "size = = 500");
    check(&t, "size = = 500", "");
}

#[test]
fn unknown_key() {
    let t = BASE.replace("size = 500", "size = 500\ncolour = \"red\"");
    check(&t, "colour", "unknown field");
}

#[test]
fn missing_key() {
    let t = BASE.replace("duration = \"1s\"\n", "");
    let e = err(&t);
    assert!(e.msg.contains("duration"), "{e}");
}

#[test]
fn bad_units() {
    check(
        &BASE.replace("\"1s\"", "\"1 fortnight\""),
        "fortnight",
        "time unit",
    );
    check(
        &BASE.replace("\"1Mb/s\"", "\"1 furlong\""),
        "furlong",
        "rate unit",
    );
    check(
        &BASE.replace("capacity = \"100Mb/s\"", "capacity = \"100pps\""),
        "100pps",
        "bit/s",
    );
}

#[test]
fn unknown_names() {
    check(
        &BASE.replace("b = \"h2\"", "b = \"h3\""),
        "\"h3\"",
        "is not a node",
    );
    check(
        &BASE.replace("to = \"h2\"", "to = \"R2\""),
        "to = \"R2\"",
        "is a router",
    );
}

#[test]
fn duplicates_and_self_links() {
    let t = BASE.replacen("name = \"R2\"", "name = \"R1\"", 1);
    let e = err(&t);
    assert!(e.msg.contains("duplicate node"), "{e}");
    assert_eq!(e.line, line_of(BASE, "name = \"R2\""));
    let t = BASE.replace("a = \"R1\"\nb = \"R2\"", "a = \"R1\"\nb = \"R1\"");
    let e = err(&t);
    assert!(e.msg.contains("itself"), "{e}");
}

#[test]
fn unknown_kind_and_scheduler() {
    check(
        &BASE.replacen("kind = \"router\"", "kind = \"switch\"", 1),
        "switch",
        "unknown node kind",
    );
    let t = BASE.replacen("kind = \"router\"", "kind = \"router\"\nscheduler = \"wfqq\"", 1);
    check(&t, "wfqq", "unknown scheduler");
    let t = BASE.replacen("kind = \"router\"", "kind = \"router\"\nscheduler = \"tdp\"", 1);
    check(&t, "\"tdp\"", "needs a [tdp] section");
}

#[test]
fn host_links_and_paths() {
    let t = BASE.replace("[[link]]\na = \"R2\"\nb = \"h2\"\n", "");
    let e = err(&t);
    assert!(e.msg.contains("has 0 links"), "{e}");
    let t = BASE.replace("rate = \"1Mb/s\"", "rate = \"1Mb/s\"\npath = [\"R2\", \"R1\"]");
    check(&t, "path =", "attached elsewhere");
    let t = BASE.replace("rate = \"1Mb/s\"", "rate = \"1Mb/s\"\nloops = 3");
    check(&t, "loops = 3", "without a `path`");
}

#[test]
fn ranges() {
    check(
        &BASE.replace("size = 500", "size = 12"),
        "size = 12",
        "not a valid IP packet size",
    );
    let t = BASE.replace("rate = \"1Mb/s\"", "rate = \"1Mb/s\"\ndscp = 64");
    check(&t, "dscp = 64", "out of range");
    let t = BASE.replace("duration = \"1s\"", "duration = \"1s\"\nwarmup = \"2s\"");
    check(&t, "warmup", "not shorter than duration");
}

#[test]
fn set_overrides() {
    let sc = load_str(
        "x.toml",
        BASE,
        &["flow.f.size=1000".into(), "scenario.duration=2s".into()],
    )
    .unwrap();
    assert_eq!(sc.flows[0].size, qosnet_scenario::SizeDist::Fixed(1000));
    assert_eq!(sc.duration.as_nanos(), 2_000_000_000);
    let sc = load_str("x.toml", BASE, &["defaults.router.processing=10us".into()]).unwrap();
    assert!(sc.nodes[0].router().is_some());
    // Router-only keys on hosts are refused, not ignored.
    let e = load_str("x.toml", BASE, &["node.*.processing=10us".into()]).unwrap_err();
    assert!(e.msg.contains("applies to routers"), "{e}");
    let e = load_str("x.toml", BASE, &["flow.nope.size=3".into()]).unwrap_err();
    assert!(
        e.msg.contains("no flow named `nope`") && e.hint.contains("f"),
        "{e}"
    );
    let e = load_str("x.toml", BASE, &["flow.f.size".into()]).unwrap_err();
    assert!(e.msg.contains("KEY=VALUE"), "{e}");
    // A value set on the command line is validated like one in the file.
    let e = load_str("x.toml", BASE, &["flow.f.size=5".into()]).unwrap_err();
    assert!(e.msg.contains("not a valid IP packet size"), "{e}");
}

const DS: &str = r#"
[diffserv]
af_weights = [4, 3, 2, 1]

[[diffserv.profile]]
name = "af1"
ladder = [{ dscp = "AF11", rate = "30Mb/s", burst = 15000 }, { dscp = "AF12", rate = "25Mb/s", burst = 15000 }]
exceed = "drop"

[[diffserv.rule]]
name = "all-af1"
nodes = ["R1"]
dscp = ["AF11", "AF12"]
profile = "af1"
"#;

fn ds(extra: &str) -> String {
    format!("{BASE}{DS}{extra}")
}

#[test]
fn diffserv_config_is_checked() {
    let ok = load_str("x.toml", &ds(""), &[]).unwrap();
    assert_eq!(ok.diffserv.rules.len(), 1);
    let t = ds("").replace("af_weights = [4, 3, 2, 1]", "af_weights = [4, 0, 2, 1]");
    check(&t, "af_weights", "four positive weights");
    let t = ds("").replace("\"AF12\", rate", "\"AF99\", rate");
    check(&t, "ladder =", "AF99");
    let t = ds("").replace("rate = \"25Mb/s\"", "rate = \"250Mb/s\"");
    check(&t, "ladder =", "above link capacity");
    let t = ds("").replace("profile = \"af1\"", "profile = \"af9\"");
    check(&t, "profile = \"af9\"", "no profile named");
    let t = ds("").replace("dscp = [\"AF11\", \"AF12\"]", "dscp = \"XX\"");
    check(&t, "dscp = \"XX\"", "XX");
    let t = ds("").replace("exceed = \"drop\"", "exceed = \"explode\"");
    check(&t, "explode", "unknown exceed action");
}

#[test]
fn shadowed_diffserv_rules_are_refused_with_names() {
    use qosnet_scenario::topo::Network;
    // `narrow` can never match: `all-af1` before it matches everything it does.
    let t = ds("[[diffserv.rule]]\nname = \"narrow\"\nnodes = [\"R1\"]\ndscp = \"AF11\"\nproto = \"udp\"\nprofile = \"af1\"\n");
    let sc = load_str("x.toml", &t, &[]).unwrap();
    let net = Network::build(&sc).unwrap();
    let e = qosnet_scenario::dsbuild::classifier(&sc, &net, 0)
        .err()
        .expect("shadowed rule must be refused");
    assert!(e.contains("narrow") && e.contains("all-af1"), "{e}");
}
