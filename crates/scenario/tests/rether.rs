//! RETHER stations in scenario files: defaults, every parameter, and
//! errors with file:line and a hint for bad keys and values.

use qosnet_core::rether::NrtPolicy;
use qosnet_core::Duration;
use qosnet_scenario::{load_str, ScenarioError};

const BASE: &str = r#"
[scenario]
name = "r"
duration = "1s"

[[node]]
name = "s1"
kind = "rether"
[[node]]
name = "s2"
kind = "rether"
[[node]]
name = "h"
kind = "host"

[[segment]]
name = "bus"
nodes = ["s1", "s2", "h"]

[[flow]]
name = "v"
from = "s1"
to = "s2"
rt = true
size = 6400
rate = "30pps"
"#;

fn err(text: &str) -> ScenarioError {
    match load_str("r.toml", text, &[]) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn defaults_are_the_papers_1995_pcs() {
    let sc = load_str("r.toml", BASE, &[]).unwrap_or_else(|e| panic!("{e}"));
    let p = sc.rether.as_ref().expect("stations imply [rether] defaults");
    assert!(p.enabled);
    assert_eq!(p.trt, Duration(33_333_333));
    assert_eq!(
        (p.a, p.b, p.t_token),
        (Duration(140_000), Duration(650_000), Duration(247_000))
    );
    assert_eq!(p.nrt_policy, NrtPolicy::OnePacket);
    assert_eq!(p.late_threshold, Duration(2_000_000));
    assert!(sc.flows[0].rt);
    assert!(sc.nodes[0].is_rether() && sc.nodes[0].is_host());
}

#[test]
fn every_parameter_is_read() {
    let text = format!(
        "{BASE}\n[rether]\nenabled = false\ntrt = \"20ms\"\nt_nrt = \"5ms\"\na = \"10us\"\nb = \"50us\"\nt_token = \"80us\"\nnrt_policy = 3\nlate_threshold = \"1ms\"\nbuffers = 8\nack_stagger = \"100us\"\nboot = \"join\"\n"
    );
    let sc = load_str("r.toml", &text, &[]).unwrap_or_else(|e| panic!("{e}"));
    let p = sc.rether.expect("[rether]");
    assert!(!p.enabled && !p.boot_csma);
    assert_eq!(p.trt, Duration::from_millis(20));
    assert_eq!(p.t_nrt, Some(Duration::from_millis(5)));
    assert_eq!(p.nrt_policy, NrtPolicy::AtMost(3));
    assert_eq!(p.buffers, 8);
    assert_eq!(p.ack_stagger, Duration::from_micros(100));
}

#[test]
fn bad_values_point_at_their_line_with_a_hint() {
    let e = err(&format!("{BASE}\n[rether]\nnrt_policy = \"all\"\n"));
    assert!(
        e.line > 0 && e.msg.contains("nrt_policy") && e.hint.contains("fit"),
        "{e}"
    );
    let e = err(&format!("{BASE}\n[rether]\nt_nrt = \"40ms\"\n"));
    assert!(e.line > 0 && e.msg.contains("not below trt"), "{e}");
    let e = err(&format!("{BASE}\n[rether]\nboot = \"warm\"\n"));
    assert!(e.line > 0 && e.hint.contains("join"), "{e}");
    let e = err(&format!("{BASE}\n[rether]\ntrtt = \"1ms\"\n"));
    assert!(e.line > 0 && e.msg.contains("trtt"), "{e}");
}

#[test]
fn rt_flows_run_between_stations_and_are_periodic() {
    let e = err(&BASE.replace("to = \"s2\"", "to = \"h\""));
    assert!(e.line > 0 && e.msg.contains("two RETHER stations"), "{e}");
    let e = err(&BASE.replace("rate = \"30pps\"", "rate = \"30pps\"\npattern = \"poisson\""));
    assert!(e.msg.contains("periodic"), "{e}");
}

#[test]
fn stations_sit_on_one_segment_with_unique_ids() {
    let e = err(&BASE.replace(
        "kind = \"rether\"\n[[node]]\nname = \"s2\"",
        "kind = \"rether\"\nstation_id = 7\n[[node]]\nname = \"s2\"\nstation_id = 7",
    ));
    assert!(e.line > 0 && e.msg.contains("station_id 7"), "{e}");
    let e = err(&BASE.replace("nodes = [\"s1\", \"s2\", \"h\"]", "nodes = [\"s2\", \"h\"]"));
    assert!(e.msg.contains("s1") && e.hint.contains("segment"), "{e}");
    let e = err(&BASE.replace(
        "name = \"h\"\nkind = \"host\"",
        "name = \"h\"\nkind = \"host\"\nstation_id = 3",
    ));
    assert!(e.line > 0 && e.msg.contains("not a RETHER station"), "{e}");
    let e = err(&format!(
        "{}\n[rether]\ntrt = \"10ms\"\n",
        BASE.replace("kind = \"rether\"", "kind = \"host\"")
            .replace("rt = true\n", "")
    ));
    assert!(e.msg.contains("without RETHER stations"), "{e}");
}

#[test]
fn faults_are_read_and_checked() {
    let ok = format!(
        "{BASE}\n[rether]\n[[rether.fault]]\nnode = \"s1\"\nat = \"1ms\"\nkind = \"crash\"\nrestart = \"2ms\"\n[[rether.fault]]\nnode = \"s2\"\nat = \"1ms\"\nkind = \"drop-token\"\ncount = 2\n"
    );
    let sc = load_str("r.toml", &ok, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sc.rether.map(|p| p.faults.len()), Some(2));
    let e = err(&ok.replace("kind = \"crash\"", "kind = \"explode\""));
    assert!(e.line > 0 && e.hint.contains("crash-holding"), "{e}");
    let e = err(&ok.replace("restart = \"2ms\"", "restart = \"1ms\""));
    assert!(e.line > 0 && e.msg.contains("restart"), "{e}");
    let e = err(&ok.replace("node = \"s2\"", "node = \"h\""));
    assert!(e.line > 0 && e.msg.contains("not a RETHER station"), "{e}");
    let e = err(&ok.replace("count = 2", "count = 2\nrestart = \"5ms\""));
    assert!(e.msg.contains("does not apply"), "{e}");
}

/// What a station would refuse to start with is refused at load, with the
/// line (`check` and `sim` agree): found by the scenario fuzzer.
#[test]
fn station_timing_the_simulator_refuses_is_refused_at_load() {
    let e = err(&format!("{BASE}\n[rether]\nt_token = \"47us\"\n"));
    assert!(e.line > 0 && e.msg.contains("token frame's wire time"), "{e}");
    let e = err(&format!("{BASE}\n[rether]\nt_nrt = \"100us\"\n"));
    assert!(e.line > 0 && e.msg.contains("one maximum-size NRT visit"), "{e}");
    // Without t_nrt the stations derive one (eq. 6, at least one NRT
    // visit): a TRT too short for it was accepted and the simulator then
    // refused every station (a find of the scenario fuzzer).
    let text = format!("{BASE}\n[rether]\ntrt = \"650us\"\n");
    let e = err(&text);
    let trt_line = text.lines().position(|l| l.starts_with("trt =")).unwrap() + 1;
    assert_eq!(e.line, trt_line, "{e}");
    assert!(e.msg.contains("leaves no time for NRT traffic"), "{e}");
    // Room for it: loads.
    load_str("r.toml", &format!("{BASE}\n[rether]\ntrt = \"20ms\"\n"), &[]).unwrap_or_else(|e| panic!("{e}"));
}

/// Table 3's copy costs (§5.2): read, charged in the stations' model (the
/// first frame's copy, the copies the wire does not hide, two token
/// copies in t_token), and refused with the line when out of range.
#[test]
fn copy_costs_are_read_charged_and_checked() {
    let text = format!("{BASE}\n[rether]\ncopy_per_packet = \"11.5us\"\ncopy_per_byte = \"394ns\"\n");
    let sc = load_str("r.toml", &text, &[]).unwrap_or_else(|e| panic!("{e}"));
    let p = sc.rether.expect("[rether]");
    assert_eq!(
        (p.copy_per_packet, p.copy_per_byte),
        (Duration(11_500), Duration(394))
    );
    let framing = qosnet_core::Framing {
        fcs: 4,
        preamble: 8,
        ifg: 12,
    };
    let m = p.timing(100_000_000, framing, 3);
    // Two copies of a 14 + 52 + 3 × 3-byte token frame on top of t_token.
    let token = 14 + 52 + 9;
    assert_eq!(m.t_token, Duration(247_000 + 2 * (11_500 + 394 * token)));
    // Two 1514-byte frames at 100 Mb/s: the second copy (608 us) outlasts
    // the first frame's 123.04 us on the wire.
    let copy = Duration(11_500 + 394 * 1514);
    let wire = m.wire_time(1514);
    assert_eq!(
        m.transmission_time([1514, 1514]),
        wire + wire + copy + Duration(copy.0 - wire.0) + m.sw_overhead(2)
    );
    // Zero copy costs: eq. 7 as before.
    let m0 = qosnet_core::rether::TimingModel::paper_1995();
    assert_eq!(
        m0.transmission_time([1514, 1514]),
        m0.wire_time(1514) + m0.wire_time(1514) + m0.sw_overhead(2)
    );
    let e = err(&format!("{BASE}\n[rether]\ncopy_per_byte = \"1ms\"\n"));
    assert!(
        e.line > 0 && e.msg.contains("copy_per_byte") && e.hint.contains("394ns"),
        "{e}"
    );
    let e = err(&format!("{BASE}\n[rether]\ncopy_per_packet = \"fast\"\n"));
    assert!(e.line > 0 && e.msg.contains("`fast` is not a duration"), "{e}");
}
