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

/// The TOML parser reports a lone carriage return without a message
/// (found by AFL++, `fuzz/regressions/scenario/`): qosnet names it.
#[test]
fn lone_carriage_return() {
    let t = BASE.replace("[[node]]\nname = \"R2\"", "\r[[node]]\nname = \"R2\"");
    let e = err(&t);
    assert!(e.msg.contains("carriage return"), "{e}");
    assert_eq!(e.line, line_of(&t, "\r[[node]]"), "{e}");
    // The same in a `[[flow]]` table, which is parsed on its own.
    let t = BASE.replace("size = 500", "\rsize = 500");
    let e = err(&t);
    assert!(e.msg.contains("carriage return"), "{e}");
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
        &BASE.replacen("kind = \"router\"", "kind = \"hub\"", 1),
        "hub",
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
    // A name prefix and `*` select several elements: every router here.
    let sc = load_str("x.toml", BASE, &["node.R*.processing=10us".into()]).unwrap();
    assert_eq!(sc.nodes.iter().filter(|n| n.router().is_some()).count(), 2);
    let e = load_str("x.toml", BASE, &["node.Q*.processing=10us".into()]).unwrap_err();
    assert!(e.msg.contains("no node named `Q*`"), "{e}");
}

/// An override that creates a table the format does not have is reported
/// at the `--set` argument, not at a line past the end of the file (it once
/// said `line.toml:47:2` of a 45-line file).
#[test]
fn set_errors_name_the_argument_not_a_line_past_the_file() {
    for set in ["a.b.c.d=[", "bogus.key=1", "scenario.nope.x=2"] {
        let e = load_str("x.toml", BASE, &[set.into()]).unwrap_err();
        assert_eq!(e.file, format!("--set {set}"), "{e}");
        assert_eq!(e.line, 0, "{e}");
    }
    let lines = BASE.lines().count();
    let e = load_str("x.toml", BASE, &["flow.f.size=1000".into(), "zzz.y=1".into()]).unwrap_err();
    assert!(e.file == "--set zzz.y=1" || e.line <= lines, "{e}");
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
    // `narrow` can never match: `all-af1` before it matches everything it
    // does. Refused at load (so `qosnet check` refuses it as `sim` does),
    // at the shadowed rule's line.
    let t = ds("[[diffserv.rule]]\nname = \"narrow\"\nnodes = [\"R1\"]\ndscp = \"AF11\"\nproto = \"udp\"\nprofile = \"af1\"\n");
    check(&t, "name = \"narrow\"", "all-af1");
    let e = err(&t);
    assert!(e.msg.contains("narrow") && e.msg.contains("never match"), "{e}");
}

/// BASE plus a switch SW on R2 with host h3, and `extra` (which may put
/// host h4 on a segment).
fn lan(extra: &str) -> String {
    let h4 = if extra.contains("h4") {
        "[[node]]\nname = \"h4\"\nkind = \"host\"\n"
    } else {
        ""
    };
    let t = BASE.replace(
        "[[link]]\na = \"h1\"",
        &format!("[[node]]\nname = \"SW\"\nkind = \"switch\"\n[[node]]\nname = \"h3\"\nkind = \"host\"\n{h4}[[link]]\na = \"R2\"\nb = \"SW\"\n[[link]]\na = \"h3\"\nb = \"SW\"\n[[link]]\na = \"h1\""),
    );
    format!("{t}\n{extra}")
}

#[test]
fn switches_vlans_and_segments() {
    let ok = lan("[[segment]]\nname = \"bus\"\nnodes = [\"R1\", \"h4\"]\n");
    load_str("x.toml", &ok, &[]).unwrap();
    // vlan only on a link with one switch end.
    let t = BASE.replacen("a = \"R1\"\nb = \"R2\"", "a = \"R1\"\nb = \"R2\"\nvlan = 10", 1);
    check(&t, "vlan = 10", "without exactly one switch end");
    let t = lan("").replacen("a = \"h3\"\nb = \"SW\"", "a = \"h3\"\nb = \"SW\"\nvlan = 5000", 1);
    check(&t, "vlan = 5000", "out of range");
    // Router keys on a switch, switch keys on a router.
    let t = lan("").replacen("kind = \"switch\"", "kind = \"switch\"\nscheduler = \"fifo\"", 1);
    check(&t, "scheduler = \"fifo\"", "router settings");
    let t = BASE.replacen(
        "kind = \"router\"",
        "kind = \"router\"\nswitch = { latency = \"1us\" }",
        1,
    );
    check(&t, "switch = {", "not a switch");
    // Segments: declared as [[segment]], at least two stations, IP nodes
    // only, one segment per host, positions per station.
    let t = BASE.replacen("kind = \"router\"", "kind = \"segment\"", 1);
    check(&t, "kind = \"segment\"", "[[segment]]");
    let t = lan("[[segment]]\nname = \"bus\"\nnodes = [\"h4\"]\n");
    check(&t, "nodes = [\"h4\"]", "1 stations");
    let t = lan("[[segment]]\nname = \"bus\"\nnodes = [\"h4\", \"SW\"]\n");
    check(&t, "nodes = [\"h4\", \"SW\"]", "is a switch");
    let t = lan("[[segment]]\nname = \"bus\"\nnodes = [\"R1\", \"h4\"]\npositions = [\"1us\"]\n");
    check(&t, "positions = [\"1us\"]", "1 positions for 2 stations");
    let t = lan("[[segment]]\nname = \"bus\"\nnodes = [\"R1\", \"h4\"]\npropagation = \"1us\"\npositions = [\"0us\", \"3us\"]\n");
    check(&t, "positions = [", "beyond");
    let t = lan("[[segment]]\nname = \"R1\" # the segment\nnodes = [\"R2\", \"h4\"]\n");
    check(&t, "# the segment", "already a node name");
    // A host needs exactly one attachment.
    let t = lan("[[segment]]\nname = \"bus\"\nnodes = [\"R1\", \"h4\", \"h3\"]\n");
    check(&t, "name = \"h3\"", "has 2 links");
    // One subnet per broadcast domain, and no overlaps between domains.
    let t = lan("").replacen(
        "a = \"h3\"\nb = \"SW\"",
        "a = \"h3\"\nb = \"SW\"\nsubnet = \"10.9.0.0/24\"",
        1,
    );
    let t = t.replacen(
        "a = \"R2\"\nb = \"SW\"",
        "a = \"R2\"\nb = \"SW\"\nsubnet = \"10.8.0.0/24\"",
        1,
    );
    check(&t, "subnet = \"10.9.0.0/24\"", "differs from");
    let t = BASE
        .replacen(
            "a = \"h1\"\nb = \"R1\"",
            "a = \"h1\"\nb = \"R1\"\nsubnet = \"10.7.0.0/16\"",
            1,
        )
        .replacen(
            "a = \"R1\"\nb = \"R2\"",
            "a = \"R1\"\nb = \"R2\"\nsubnet = \"10.7.3.0/24\"",
            1,
        );
    check(&t, "subnet = \"10.7.3.0/24\"", "overlaps");
}

const PAPER: &str = r#"
[paper]
source = "a paper, Table 1"

[[paper.table]]
name = "1"
title = "Table 1"
columns = ["class", "rate", "tos"]
units = ["", "Mb/s", ""]
rows = [
    ["EF", 10, "0xb8"],
    ["BE", 29.6, "0x00"],
]
"#;

#[test]
fn paper_tables() {
    let sc = load_str("x.toml", &format!("{BASE}{PAPER}"), &[]).unwrap();
    let p = sc.paper.unwrap();
    assert!(p.values.is_empty() && p.metric.is_empty());
    let t = p.table("1").unwrap();
    assert_eq!(t.keys().collect::<Vec<_>>(), ["EF", "BE"]);
    assert_eq!(t.get("EF", "rate").and_then(|c| c.as_f64()), Some(10.0));
    assert_eq!(t.get("BE", "tos").and_then(|c| c.as_str()), Some("0x00"));
    assert_eq!(t.units[1], "Mb/s");
    assert!(t.get("AF11", "rate").is_none() && t.get("EF", "loss").is_none());
    // The per-flow column still works alone.
    let col = "[paper]\nsource = \"s\"\nmetric = \"jitter\"\nunit = \"ms\"\nvalues = { f = 0.5 }\n";
    let sc = load_str("x.toml", &format!("{BASE}{col}"), &[]).unwrap();
    assert_eq!(sc.paper.unwrap().values["f"], 0.5);
}

#[test]
fn paper_errors() {
    let with = |p: &str| format!("{BASE}{p}");
    let t = with(&PAPER.replace("[\"BE\", 29.6, \"0x00\"]", "[\"BE\", 29.6]"));
    check(&t, "[\"BE\", 29.6]", "a row of 2 cells under 3 columns");
    let t = with(&PAPER.replace("[\"BE\", 29.6,", "[\"EF\", 29.6,"));
    check(&t, "[\"EF\", 29.6,", "text key used once");
    let t = with(&PAPER.replace("[\"BE\", 29.6,", "[7, 29.6,"));
    check(&t, "[7, 29.6,", "text key");
    let t = with(&PAPER.replace("units = [\"\", \"Mb/s\", \"\"]", "units = [\"Mb/s\"]"));
    check(&t, "units = [\"Mb/s\"]", "1 units for 3 columns");
    let t = with(&PAPER.replace("\"rate\", \"tos\"]", "\"rate\", \"rate\"]"));
    check(&t, "columns =", "distinct");
    let t = with(&PAPER.replace("columns = [", "colums = ["));
    check(&t, "colums", "unknown field");
    let t = with("[paper]\nsource = \"s\"\n");
    check(&t, "[paper]", "neither");
    let t = with("[paper]\nsource = \"s\"\nvalues = { f = 1.0 }\n");
    check(&t, "[paper]", "without `metric`");
    let twice = format!("{PAPER}\n[[paper.table]]\nname = \"1\" # again\ncolumns = [\"k\"]\nrows = []\n");
    check(&with(&twice), "# again", "used twice");
}

/// `check`, plus: the error's hint names `hint`.
fn check_hint(text: &str, needle: &str, msg: &str, hint: &str) {
    check(text, needle, msg);
    let e = err(text);
    assert!(e.hint.contains(hint), "hint `{}` lacks `{hint}`", e.hint);
}

#[test]
fn values_that_cannot_be_simulated_are_refused_with_the_limit() {
    let cap = |c: &str| BASE.replace("capacity = \"100Mb/s\"", &format!("capacity = \"{c}\""));
    check_hint(&cap("1e12Gb/s"), "capacity", "above 1Tb/s", "at most \"1Tb/s\"");
    check_hint(&cap("100b/s"), "capacity", "below 1kb/s", "at least \"1kb/s\"");
    check(&cap("1e30Gb/s"), "capacity", "above 1Tb/s");
    check(&cap("1e400Gb/s"), "capacity", "too large");
    let dur = |d: &str| BASE.replace("duration = \"1s\"", &format!("duration = \"{d}\""));
    check_hint(&dur("100000s"), "duration =", "longer than 86400s", "\"86400s\"");
    check_hint(&dur("1e12s"), "duration =", "longer than 86400s", "\"86400s\"");
    check(&dur("1e400s"), "duration =", "too large");
    let t = BASE.replace("duration = \"1s\"", "duration = \"1s\"\ndrain = \"4000s\"");
    check(&t, "drain", "longer than");
    let link = |k: &str| {
        BASE.replacen(
            "a = \"R1\"\nb = \"R2\"",
            &format!("a = \"R1\"\nb = \"R2\"\n{k}"),
            1,
        )
    };
    check_hint(&link("delay = \"11s\""), "delay", "longer than 10s", "\"10s\"");
    check_hint(&link("delay = \"1e12s\""), "delay", "longer than 10s", "\"10s\"");
    let r1 = |k: &str| BASE.replacen("kind = \"router\"", &format!("kind = \"router\"\n{k}"), 1);
    check_hint(
        &r1("processing = \"1e9s\""),
        "processing",
        "longer than 1s",
        "\"1s\"",
    );
    check_hint(
        &r1("processing = \"1e30s\""),
        "processing",
        "longer than 1s",
        "\"1s\"",
    );
    check(
        &r1("processing = { dist = \"uniform\", min = \"1us\", max = \"2s\" }"),
        "processing",
        "processing max",
    );
    check(
        &r1("processing = { dist = \"exp\", base = \"5s\", mean = \"1us\" }"),
        "processing",
        "processing base",
    );
    check_hint(
        &r1("clock_offset = \"1e12s\""),
        "clock_offset",
        "longer than 1s",
        "\"1s\"",
    );
    check_hint(
        &r1("clock_offset = \"-2s\""),
        "clock_offset",
        "longer than 1s",
        "\"1s\"",
    );
    check(&r1("clock_drift_ppm = nan"), "clock_drift_ppm", "not within");
    check(&r1("clock_drift_ppm = inf"), "clock_drift_ppm", "not within");
    let sw = lan("").replacen(
        "kind = \"switch\"",
        "kind = \"switch\"\nswitch = { latency = \"5s\" }",
        1,
    );
    check(&sw, "latency", "longer than 1s");
    let seg = lan("[[segment]]\nname = \"bus\"\nnodes = [\"R1\", \"h4\"]\npropagation = \"2ms\"\n");
    check(&seg, "propagation", "longer than 1ms");
    let tdp = BASE.replace(
        "[defaults.link]",
        "[tdp]\ntf = \"2s\"\ntfs_per_tc = 4\n[defaults.link]",
    );
    check(&tdp, "tf =", "longer than 1s");
}

#[test]
fn shaper_max_hold_is_none_or_a_bounded_duration() {
    let tdp = |v: &str| {
        BASE.replace(
            "[defaults.link]",
            &format!("[tdp]\ntf = \"250us\"\ntfs_per_tc = 4\nshaper_max_hold = {v}\n[defaults.link]"),
        )
    };
    check(
        &tdp("\"sometimes\""),
        "shaper_max_hold",
        "neither \"none\" nor a duration",
    );
    // "auto" was an earlier, withdrawn value: refused, and the hint offers
    // only what is accepted.
    let e = err(&tdp("\"auto\""));
    assert!(e.msg.contains("neither") && !e.hint.contains("auto"), "{e}");
    check(&tdp("\"7200s\""), "shaper_max_hold", "longer than");
    let e = err(&tdp("\"-1ms\""));
    assert_eq!(e.line, line_of(&tdp("\"-1ms\""), "shaper_max_hold"), "{e}");
    for ok in ["\"none\"", "\"2ms\""] {
        let sc = load_str("x.toml", &tdp(ok), &[]).unwrap_or_else(|e| panic!("{ok}: {e}"));
        let want = match ok {
            "\"none\"" => None,
            _ => Some(qosnet_core::Duration::from_millis(2)),
        };
        assert_eq!(sc.tdp.as_ref().unwrap().shaper_max_hold, want);
    }
}

#[test]
fn late_limit_is_a_tf_count_or_none_and_defaults_to_max_lag() {
    let tdp = |extra: &str| {
        BASE.replace(
            "[defaults.link]",
            &format!("[tdp]\ntf = \"250us\"\ntfs_per_tc = 4\n{extra}\n[defaults.link]"),
        )
    };
    check(
        &tdp("late_limit = \"soon\""),
        "late_limit",
        "neither a number of TFs nor \"none\"",
    );
    check(&tdp("late_limit = 1001"), "late_limit", "out of range");
    check(&tdp("late_limit = -1"), "late_limit", "out of range");
    check(
        &tdp("late_limit = 2.5"),
        "late_limit",
        "expected a whole number or \"none\"",
    );
    for (extra, want) in [
        ("", Some(4)),
        ("max_lag = 7", Some(7)),
        ("late_limit = 0", Some(0)),
        ("late_limit = \"none\"", None),
    ] {
        let sc = load_str("x.toml", &tdp(extra), &[]).unwrap_or_else(|e| panic!("{extra}: {e}"));
        assert_eq!(sc.tdp.as_ref().unwrap().late_limit, want, "{extra}");
    }
}

#[test]
fn numbers_must_be_finite_and_positive() {
    for bad in ["nanMb/s", "infMb/s", "-5Mb/s", "0Mb/s", "1e400Mb/s", "Mb/s"] {
        let t = BASE.replace("\"1Mb/s\"", &format!("\"{bad}\""));
        check(&t, "rate =", "");
    }
    let t = BASE.replace("\"1Mb/s\"", "\"-5Mb/s\"");
    check(&t, "rate =", "negative");
}

#[test]
fn flow_rates_fit_the_first_link() {
    // 1e15 Gb/s would make the simulator loop at time 0: refused, with
    // the largest rate the host's link carries.
    let t = BASE.replace("\"1Mb/s\"", "\"1e15Gb/s\"");
    check_hint(
        &t,
        "rate =",
        "more than 10 times the 23234",
        "use at most 232342pps",
    );
    let t = BASE.replace("\"1Mb/s\"", "\"1e9pps\"");
    check_hint(&t, "rate =", "h1-R1", "give the link more capacity");
    // Overload up to 10 times the link rate (wire overhead included) is
    // an experiment (the host drops the excess, counted): accepted.
    let t = BASE.replace("\"1Mb/s\"", "\"232342pps\"");
    load_str("x.toml", &t, &[]).unwrap();
    let t = BASE.replace("\"1Mb/s\"", "\"232343pps\"");
    check(&t, "rate =", "more than 10 times");
    let t = BASE.replace("\"1Mb/s\"", "\"1e-9pps\"");
    check(&t, "rate =", "less than one packet a day");
}

#[test]
fn bytes_and_bits_are_not_confused() {
    let rate = |r: &str| BASE.replace("\"1Mb/s\"", &format!("\"{r}\""));
    let sc = load_str("x.toml", &rate("10MB/s"), &[]).unwrap();
    assert_eq!(sc.flows[0].pps(), 80e6 / (8.0 * 500.0));
    let sc = load_str("x.toml", &rate("10Mb/s"), &[]).unwrap();
    assert_eq!(sc.flows[0].pps(), 10e6 / (8.0 * 500.0));
    let sc = load_str("x.toml", &rate("2kpps"), &[]).unwrap();
    assert_eq!(sc.flows[0].pps(), 2000.0);
    for bad in ["10mb/s", "10MBps", "10KB/s", "10mbps", "10Mib/s", "10 megabits"] {
        check_hint(&rate(bad), "rate =", bad, "");
        let e = err(&rate(bad));
        assert!(
            e.hint.contains("Mb/s") && e.hint.contains("MB/s") && e.hint.contains("pps"),
            "{e}"
        );
    }
    // Durations: `m` could be minutes or milliseconds.
    let t = BASE.replace("duration = \"1s\"", "duration = \"5m\"");
    check(&t, "duration =", "ambiguous");
    let t = BASE.replace("duration = \"1s\"", "duration = \"2min\"");
    assert_eq!(
        load_str("x.toml", &t, &[]).unwrap().duration.as_nanos(),
        120_000_000_000
    );
    let t = BASE.replace("duration = \"1s\"", "duration = \"5 sec\"");
    check_hint(&t, "duration =", "unknown time unit", "ns, us");
}

/// An edge shaper that drops what waits longer than `shaper_max_hold`
/// beside a flow whose packets come further apart: warned at the rate.
#[test]
fn a_flow_slower_than_the_shaper_hold_is_warned() {
    let t = include_str!("../../../scenarios/tdp-icc2006/tdp-1002.toml");
    let sc = load_str("tdp.toml", t, &[]).unwrap();
    assert!(sc.warnings.is_empty(), "{:?}", sc.warnings);
    let set = "defaults.flow.rate=\"200pps\"".to_string();
    let sc = load_str("tdp.toml", t, std::slice::from_ref(&set)).unwrap();
    assert_eq!(sc.warnings.len(), sc.flows.len(), "{:?}", sc.warnings);
    let w = &sc.warnings[0];
    assert_eq!(w.file, format!("--set {set}"));
    assert!(
        w.msg.contains("every 5ms") && w.msg.contains("shaper_max_hold = 1750us"),
        "{w}"
    );
    // No bound, or flows outside TDP: nothing to say.
    for more in ["tdp.shaper_max_hold=\"none\"", "defaults.flow.tdp=false"] {
        let sc = load_str("tdp.toml", t, &[set.clone(), more.into()]).unwrap();
        assert!(sc.warnings.is_empty(), "{more}: {:?}", sc.warnings);
    }
}

#[test]
fn accepted_nonsense_is_refused_or_warned() {
    let fl = |k: &str| BASE.replace("rate = \"1Mb/s\"", &format!("rate = \"1Mb/s\"\n{k}"));
    // on = 0 never sends (with off = 0 too, once silently CBR).
    check(
        &fl("pattern = \"onoff\"\non = \"0\"\noff = \"0\""),
        "on = \"0\"",
        "never send",
    );
    check(
        &fl("pattern = \"onoff\"\non = \"0\"\noff = \"5ms\""),
        "on = \"0\"",
        "never send",
    );
    // off = 0 is CBR: accepted, with a warning at its line.
    let t = fl("pattern = \"onoff\"\non = \"5ms\"\noff = \"0\"");
    let sc = load_str("x.toml", &t, &[]).unwrap();
    assert_eq!(sc.warnings.len(), 1, "{:?}", sc.warnings);
    let w = &sc.warnings[0];
    assert_eq!((w.file.as_str(), w.line), ("x.toml", line_of(&t, "off = \"0\"")));
    assert!(w.msg.contains("cbr"), "{w}");
    assert!(w.to_string().starts_with(&format!("x.toml:{}:", w.line)), "{w}");
    // on/off keys on a flow whose pattern ignores them.
    check(&fl("on = \"5ms\"\noff = \"5ms\""), "on = \"5ms\"", "no effect");
    check(&fl("pattern = \"poisson\"\noff = \"5ms\""), "off = ", "no effect");
    // stop before start: the two swapped.
    check(
        &fl("start = \"500ms\"\nstop = \"100ms\""),
        "stop =",
        "before it starts",
    );
    // stop = start switches a flow off (`--set flow.bulk.stop=0s`): warned.
    let t = fl("start = \"500ms\"\nstop = \"500ms\"");
    let sc = load_str("x.toml", &t, &[]).unwrap();
    assert_eq!(sc.warnings.len(), 1, "{:?}", sc.warnings);
    assert_eq!(sc.warnings[0].line, line_of(&t, "stop = \"500ms\""));
    assert!(sc.warnings[0].msg.contains("sends nothing"), "{}", sc.warnings[0]);
    let sc = load_str("x.toml", BASE, &["flow.f.stop=\"0s\"".into()]).unwrap();
    assert_eq!(sc.warnings[0].file, "--set flow.f.stop=\"0s\"");
    // A start after the run ends: a shortened run of a longer scenario, warned.
    let t = fl("start = \"2s\"");
    let sc = load_str("x.toml", &t, &[]).unwrap();
    assert_eq!(sc.warnings.len(), 1);
    assert_eq!(sc.warnings[0].line, line_of(&t, "start = \"2s\""));
    assert!(sc.warnings[0].msg.contains("sends nothing"), "{}", sc.warnings[0]);
    // A flow that stops within the warm-up is never measured.
    let t = fl("stop = \"100ms\"").replace("duration = \"1s\"", "duration = \"1s\"\nwarmup = \"200ms\"");
    let sc = load_str("x.toml", &t, &[]).unwrap();
    assert_eq!(sc.warnings[0].line, line_of(&t, "stop = \"100ms\""));
    assert!(sc.warnings[0].msg.contains("warm-up"), "{}", sc.warnings[0]);
    // A clean scenario has no warnings.
    assert!(load_str("x.toml", BASE, &[]).unwrap().warnings.is_empty());
    // [scenario]: names that are no directory name.
    for bad in ["", "..", "../../tmp/x", "a\\u0000b", "a/b"] {
        let t = BASE.replace("name = \"t\"", &format!("name = \"{bad}\""));
        check(&t, "name = \"", "is not allowed");
    }
}

/// A chain h1 - R1 - ... - Rk - h2 with a flow from h1 to h2.
fn chain(k: usize, flow: &str) -> String {
    let mut s = String::from(
        "[scenario]\nname = \"c\"\nduration = \"1s\"\n[defaults.link]\ncapacity = \"100Mb/s\"\n",
    );
    for i in 1..=k {
        s += &format!("[[node]]\nname = \"R{i}\"\nkind = \"router\"\n");
    }
    s += "[[node]]\nname = \"h1\"\nkind = \"host\"\n[[node]]\nname = \"h2\"\nkind = \"host\"\n";
    s += "[[link]]\na = \"h1\"\nb = \"R1\"\n";
    for i in 1..k {
        s += &format!("[[link]]\na = \"R{i}\"\nb = \"R{}\"\n", i + 1);
    }
    s += &format!("[[link]]\na = \"R{k}\"\nb = \"h2\"\n");
    s += &format!(
        "[[flow]]\nname = \"f\"\nfrom = \"h1\"\nto = \"h2\"\nsize = 500\nrate = \"1kpps\"\n{flow}\n"
    );
    s
}

#[test]
fn network_errors_point_at_their_cause() {
    // TTL too small for the path: says so, not "routing loop?".
    let t = BASE.replace("rate = \"1Mb/s\"", "rate = \"1Mb/s\"\nttl = 2");
    check_hint(
        &t,
        "name = \"f\"",
        "TTL 2 runs out at router R2 after 1 router hops",
        "raise the flow's ttl",
    );
    let t = chain(300, "ttl = 255");
    check_hint(
        &t,
        "name = \"f\"",
        "TTL 255 runs out",
        "longer than any IP packet",
    );
    // Two parts of the network without a link between them.
    let t = BASE.replace("[[link]]\na = \"R1\"\nb = \"R2\"\n", "");
    check_hint(&t, "name = \"f\"", "cannot reach `h2`", "link the two parts");
    // A static route that sends the flow back: a loop, at the route.
    let t = format!("{BASE}\n[[route]]\nnode = \"R2\"\nprefix = \"10.0.2.2/32\"\nvia = \"R1\"\n");
    check_hint(
        &t,
        "prefix = \"10.0.2.2/32\"",
        "routing loop R1 -> R2 -> R1",
        "[[route]]",
    );
    // A static route colliding with a generated one.
    let t = format!("{BASE}\n[[route]]\nnode = \"R2\"\nprefix = \"10.0.1.0/24\"\nvia = \"R1\"\n");
    check_hint(
        &t,
        "prefix = \"10.0.1.0/24\"",
        "overlaps existing route",
        "generated route",
    );
}

const TDP: &str = r#"
[tdp]
tf = "250us"
tfs_per_tc = 4
"#;

#[test]
fn tdp_overbooking_points_at_the_flow() {
    // 100 Mb/s carries 3125 bytes per 250us TF: three 1002-byte packets.
    let t = BASE
        .replace(
            "[defaults.link]",
            &format!("{TDP}\n[defaults.router]\nscheduler = \"tdp\"\n[defaults.link]"),
        )
        .replace(
            "size = 500\nrate = \"1Mb/s\"",
            "size = 1002\nrate = \"1Mb/s\"\nslots = [0]",
        );
    load_str("x.toml", &t, &[]).unwrap();
    let mut more = t.clone();
    for k in 0..3 {
        more += &format!("[[flow]]\nname = \"g{k}\"\nfrom = \"h1\"\nto = \"h2\"\nsize = 1002\nrate = \"1kpps\"\nslots = [0]\n");
    }
    let e = err(&more);
    assert_eq!(e.line, line_of(&more, "name = \"g2\"") + 5, "{e}");
    assert!(
        e.msg.contains("link R1->R2")
            && e.msg.contains("TF 0")
            && e.msg.contains("flow g2")
            && e.msg.contains(" B"),
        "{e}"
    );
    assert!(!e.hint.is_empty());
}

#[test]
fn files_that_are_not_text_are_named_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = dir.join("bin.toml");
    std::fs::write(&bin, [0x7fu8, b'E', b'L', b'F', 0, 0, 1]).unwrap();
    let e = qosnet_scenario::load_file(bin.to_str().unwrap(), &[]).unwrap_err();
    assert!(e.msg.contains("not a text file"), "{e}");
    let latin1 = dir.join("latin1.toml");
    std::fs::write(&latin1, b"[scenario]\nname = \"caf\xe9\"\n").unwrap();
    let e = qosnet_scenario::load_file(latin1.to_str().unwrap(), &[]).unwrap_err();
    assert!(
        e.msg.contains("not a text file") && e.msg.contains("UTF-8"),
        "{e}"
    );
    let e = qosnet_scenario::load_file(dir.to_str().unwrap(), &[]).unwrap_err();
    assert!(e.msg.contains("directory"), "{e}");
    let e = qosnet_scenario::load_file(dir.join("nope.toml").to_str().unwrap(), &[]).unwrap_err();
    assert!(e.hint.contains("check the path"), "{e}");
}

#[test]
fn set_errors_name_the_argument() {
    // A value from --set is refused naming the argument, not a line of
    // the file (which may not even exist).
    let e = load_str("x.toml", BASE, &["flow.f.size=9".into()]).unwrap_err();
    assert_eq!(e.file, "--set flow.f.size=9", "{e}");
    assert_eq!(e.line, 0);
    assert!(e.msg.contains("not a valid IP packet size"), "{e}");
    assert!(e.to_string().starts_with("--set flow.f.size=9: "), "{e}");
    // A key the file does not have (inserted by the override).
    let e = load_str(
        "x.toml",
        BASE,
        &["scenario.duration=1s".into(), "flow.f.on=5ms".into()],
    )
    .unwrap_err();
    assert_eq!(e.file, "--set flow.f.on=5ms", "{e}");
    let e = load_str("x.toml", BASE, &["flow.f.colour=red".into()]).unwrap_err();
    assert_eq!(e.file, "--set flow.f.colour=red", "{e}");
    assert!(e.msg.contains("unknown field"), "{e}");
    let e = load_str("x.toml", BASE, &["scenario.duration=\"1e12s\"".into()]).unwrap_err();
    assert_eq!(e.file, "--set scenario.duration=\"1e12s\"", "{e}");
    // An error in the file keeps its own line after overrides insert lines above it.
    let t = BASE.replace("size = 500", "size = 12");
    let e = load_str(
        "x.toml",
        &t,
        &["scenario.warmup=100ms".into(), "flow.f.dscp=EF".into()],
    )
    .unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.line),
        ("x.toml", line_of(&t, "size = 12")),
        "{e}"
    );
    // Warnings from --set values name the argument too.
    let sc = load_str("x.toml", BASE, &["flow.f.start=5s".into()]).unwrap();
    assert_eq!(sc.warnings[0].file, "--set flow.f.start=5s");
}

/// An error the file alone does not have, reported at a line of the file
/// (the file's warm-up against a duration set on the command line; a
/// flow sent by --set to a node that cannot take it), names the `--set`
/// argument that caused it, and keeps the file's place in the message
/// (it once named only the file's line).
#[test]
fn errors_caused_by_a_set_name_it() {
    let t = BASE.replace("duration = \"1s\"", "duration = \"1s\"\nwarmup = \"200ms\"");
    let sets: Vec<String> = vec!["flow.f.size=600".into(), "scenario.duration=100ms".into()];
    let e = load_str("x.toml", &t, &sets).unwrap_err();
    assert_eq!(e.file, "--set scenario.duration=100ms", "{e}");
    assert!(
        e.msg
            .contains("warmup (200ms) is not shorter than duration (100ms)"),
        "{e}"
    );
    let at = format!("(x.toml:{}:", line_of(&t, "warmup = "));
    assert!(e.msg.contains(&at), "{e}");
    assert!(!e.hint.is_empty(), "{e}");
    let e = load_str("x.toml", BASE, &["flow.f.to=R2".into()]).unwrap_err();
    assert_eq!(e.file, "--set flow.f.to=R2", "{e}");
    // The file's own error stays at its line whatever is set.
    let bad = t.replace("size = 500", "size = 12");
    let e = load_str("x.toml", &bad, &["flow.f.dscp=EF".into()]).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.line),
        ("x.toml", line_of(&bad, "size = 12")),
        "{e}"
    );
}

const SEGMENT: &str = r#"
[scenario]
name = "seg"
duration = "100ms"

[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"

[[segment]]
name = "bus"
nodes = ["h1", "h2"]

[[flow]]
name = "f"
from = "h1"
to = "h2"
size = 500
rate = "1Mb/s"
"#;

/// Segments are set like nodes, links and flows: `segment.NAME.KEY`
/// (docs/scenario-format.md said so, but the key was taken for a table
/// and refused as "invalid type: map, expected a sequence").
#[test]
fn segments_can_be_set() {
    let sc = load_str("s.toml", SEGMENT, &["segment.bus.capacity=100Mb/s".into()]).unwrap();
    let seg = sc.nodes.iter().find(|n| n.name == "bus").unwrap();
    let qosnet_scenario::NodeKind::Segment(spec) = &seg.kind else {
        panic!("bus is a {}", seg.kind_name())
    };
    assert_eq!(spec.capacity_bps, 100_000_000);
    let sc = load_str("s.toml", SEGMENT, &["segment.*.slot_bits=1024".into()]).unwrap();
    assert!(sc
        .nodes
        .iter()
        .any(|n| matches!(&n.kind, qosnet_scenario::NodeKind::Segment(s) if s.slot_bits == 1024)));
    let e = load_str("s.toml", SEGMENT, &["segment.bus.jam_bits=0".into()]).unwrap_err();
    assert_eq!(e.file, "--set segment.bus.jam_bits=0", "{e}");
    let e = load_str("s.toml", SEGMENT, &["segment.wire.capacity=1Gb/s".into()]).unwrap_err();
    assert!(
        e.msg.contains("no segment named `wire`") && e.hint.contains("bus"),
        "{e}"
    );
}

#[test]
fn route_tables_stay_small_in_long_chains() {
    // A chain's routers carry their connected subnets, a default route at
    // each end and the hosts' subnets in the middle: a handful each, not
    // one per link of the chain.
    use qosnet_scenario::topo::Network;
    let sc = load_str("c.toml", &chain(250, "ttl = 255"), &[]).unwrap();
    let net = Network::build(&sc).unwrap();
    for (i, n) in sc.nodes.iter().enumerate() {
        if n.is_router() {
            assert!(
                net.nodes[i].routes.len() <= 6,
                "{}: {}",
                n.name,
                net.nodes[i].routes.len()
            );
        }
    }
    assert_eq!(net.hops[0].len(), 250);
    // Every router still reaches both hosts and its neighbours' links.
    let h2 = net.host_ip(sc.node_index("h2").unwrap());
    let h1 = net.host_ip(sc.node_index("h1").unwrap());
    for i in 0..250 {
        assert!(net.nodes[i].routes.lookup(h1, 64).is_some());
        assert!(net.nodes[i].routes.lookup(h2, 64).is_some());
    }
}

/// Found by `tests/fuzz_load.rs`: a non-ASCII character outside a comment
/// or string (a comment's `#` replaced) panicked the `[[flow]]` splitter,
/// which sliced the line inside the character. Now an error at its line.
#[test]
fn fuzz_regression_multibyte_outside_strings() {
    for text in [
        "$ \u{a7}IV-B: the load\n",
        "[scenario]\nname = \"x\"\nduration = \"1s\"\nx = \u{e9}'a'\n",
        "\u{a7}\"\"\"\n[[flow]]\n",
    ] {
        let e = load_str("x.toml", text, &[]).unwrap_err();
        assert!(e.line >= 1 && e.line <= text.lines().count(), "{e}");
    }
}

/// A `--set` value that is not TOML is taken as a string, whatever it
/// holds: quotes (a run of 256 overflowed the TOML printer's counters, a
/// panic the `set` fuzz target found), backslashes, control characters.
#[test]
fn set_values_that_are_not_toml_are_strings_verbatim() {
    for v in [
        "'".repeat(300),
        "\"".repeat(300),
        "a\"b\\c'd".to_string(),
        "tab\there\u{7f}".to_string(),
    ] {
        let sc = load_str("x.toml", BASE, &[format!("scenario.description={v}")])
            .unwrap_or_else(|e| panic!("{v:?}: {e}"));
        assert_eq!(sc.description, v);
    }
}

/// `[[fault]] kind = "stall"`: every bad value is refused at its line.
#[test]
fn bad_stall_faults() {
    let ok = "\n[[fault]]\nkind = \"stall\"\nnodes = [\"R1\", \"R2\"]\nat = \"100ms\"\nfor = \"1ms\"\nevery = \"50ms\"\nuntil = \"500ms\"\n";
    let sc = load_str("x.toml", &format!("{BASE}{ok}"), &[]).unwrap();
    assert_eq!(sc.stalls.len(), 1);
    assert_eq!(sc.stalls[0].nodes, vec![0, 1]);
    // 100, 150, ..., 450 ms: eight stalls of 1 ms.
    let w = sc.stalls[0].windows();
    assert_eq!(w.len(), 8);
    assert_eq!((w[7].0.as_nanos(), w[7].1.as_nanos()), (450_000_000, 451_000_000));
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "nodes = [\"R1\", \"R2\"]",
            "nodes = [\"R1\", \"R9\"]",
            "nodes = ",
            "not a node",
        ),
        (
            "nodes = [\"R1\", \"R2\"]",
            "nodes = [\"R1\", \"R1\"]",
            "nodes = ",
            "listed twice",
        ),
        ("nodes = [\"R1\", \"R2\"]", "nodes = []", "nodes = ", "empty"),
        (
            "nodes = [\"R1\", \"R2\"]\n",
            "",
            "kind = \"stall\"",
            "names no node",
        ),
        ("for = \"1ms\"\n", "", "kind = \"stall\"", "no `for`"),
        ("for = \"1ms\"", "for = \"0s\"", "for = ", "no time"),
        ("for = \"1ms\"", "for = \"1 parsec\"", "for = ", ""),
        (
            "every = \"50ms\"",
            "every = \"1ms\"",
            "every = ",
            "not longer than",
        ),
        (
            "until = \"500ms\"",
            "until = \"50ms\"",
            "until = ",
            "not after at",
        ),
        ("at = \"100ms\"", "at = \"2s\"", "at = ", "not within the run"),
        ("every = \"50ms\"\n", "", "until = ", "without `every`"),
        (
            "every = \"50ms\"",
            "every = \"50ms\"\nrestart = \"1s\"",
            "restart = ",
            "does not apply",
        ),
        (
            "every = \"50ms\"\nuntil = \"500ms\"",
            "every = \"1.1us\"\nfor = \"1us\"\nuntil = \"900ms\"",
            "every = ",
            "more than",
        ),
    ];
    for (from, to, needle, msg) in cases {
        let f = ok.replacen(from, to, 1);
        // `for` given twice is a TOML error; drop the first for that case.
        let f = if to.contains("for = \"1us\"") {
            f.replacen("for = \"1ms\"\n", "", 1)
        } else {
            f
        };
        check(&format!("{BASE}{f}"), needle, msg);
    }
    // The stall-only keys on a kill, and a kill without its node.
    let kill = "\n[[fault]]\nkind = \"kill\"\nnode = \"R1\"\nat = \"100ms\"\nfor = \"1ms\"\n";
    check(&format!("{BASE}{kill}"), "for = ", "does not apply");
    let kill = "\n[[fault]]\nkind = \"kill\"\nat = \"100ms\"\n";
    check(&format!("{BASE}{kill}"), "kind = \"kill\"", "names no `node`");
    // `count` is the RETHER token faults' own, on either kind.
    let kill = "\n[[fault]]\nkind = \"kill\"\nnode = \"R1\"\nat = \"100ms\"\ncount = 2\n";
    check(
        &format!("{BASE}{kill}"),
        "count = ",
        "`count` does not apply to kind = \"kill\"",
    );
    let stall = ok.replacen("for = ", "count = 2\nfor = ", 1);
    check(
        &format!("{BASE}{stall}"),
        "count = ",
        "`count` does not apply to kind = \"stall\"",
    );
}

#[test]
fn tf_interrupt_keys_take_a_distribution() {
    let r1 = |k: &str| BASE.replacen("kind = \"router\"", &format!("kind = \"router\"\n{k}"), 1);
    // A FIFO router has no TF interrupt: the keys wait unused, as
    // `tdp_delay` does, so `--set node.R*.scheduler=fifo` on a TDP
    // scenario runs.
    load_str(
        "x.toml",
        &r1("tf_irq_latency = \"10us\"\ntf_port_service = \"1us\""),
        &[],
    )
    .unwrap();
    check(
        &r1("tf_port_service = \"10s\""),
        "tf_port_service",
        "longer than 1s",
    );
    check(
        &r1("tf_irq_latency = { dist = \"uniform\", min = \"9us\", max = \"2us\" }"),
        "tf_irq_latency",
        "tf_irq_latency min is above max",
    );
    check(
        &r1("tf_irq_latency = { dist = \"normal\", mean = \"9us\" }"),
        "tf_irq_latency",
        "unknown tf_irq_latency distribution `normal`",
    );
    check(
        &r1("tf_irq_latency = { dist = \"exp\" }"),
        "tf_irq_latency",
        "needs `mean`",
    );
    // On a host they are router keys like any other.
    let h = BASE.replacen("kind = \"host\"", "kind = \"host\"\ntf_port_service = \"1us\"", 1);
    assert!(err(&h).msg.contains("tf_port_service"), "{}", err(&h));
}
