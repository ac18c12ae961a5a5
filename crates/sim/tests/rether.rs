//! RETHER (seed 002) in the whole simulator: stations on a CSMA/CD
//! segment, sessions from scenario flows, failures injected through
//! `[[rether.fault]]`. At sim level: every admitted
//! session gets its reservation every TRT, admission never overbooks, and
//! after any single failure one token remains (no RT visit ever comes
//! sooner than one TRT after the last, which a second token would cause).

use proptest::prelude::*;
use qosnet_core::rether::TimingModel;
use qosnet_core::Duration;
use qosnet_scenario::load_str;
use qosnet_scenario::results::Results;
use qosnet_sim::Sim;
use serde_json::Value;

const TRT: f64 = 33_333_333.0;

/// `n` stations, RT sessions (from, to, bytes per frame, start ms), an
/// NRT flow between the last two stations, extra TOML.
fn scenario(n: usize, rt: &[(usize, usize, u32, f64)], nrt_rate: &str, extra: &str, secs: f64) -> String {
    let mut t = format!(
        "[scenario]\nname = \"t\"\nduration = \"{secs}s\"\nwarmup = \"100ms\"\nseed = 3\n\n[rether]\n{extra}\n"
    );
    for i in 1..=n {
        t += &format!("[[node]]\nname = \"s{i}\"\nkind = \"rether\"\n");
    }
    let names: Vec<String> = (1..=n).map(|i| format!("\"s{i}\"")).collect();
    t += &format!(
        "[[segment]]\nname = \"bus\"\nnodes = [{}]\ncapacity = \"10Mb/s\"\npropagation = \"5us\"\n",
        names.join(",")
    );
    for (k, (a, b, bytes, start)) in rt.iter().enumerate() {
        t += &format!(
            "[[flow]]\nname = \"rt{k}\"\nfrom = \"s{a}\"\nto = \"s{b}\"\nrt = true\nsize = {bytes}\nrate = \"30pps\"\nstart = \"{start}ms\"\n"
        );
    }
    t += &format!(
        "[[flow]]\nname = \"nrt\"\nfrom = \"s{}\"\nto = \"s{}\"\nsize = 1000\nrate = \"{nrt_rate}\"\npattern = \"poisson\"\n",
        n,
        n - 1
    );
    t
}

fn run(text: &str) -> Results {
    let sc = load_str("t.toml", text, &[]).unwrap_or_else(|e| panic!("{e}\n{text}"));
    Sim::new(sc).unwrap_or_else(|e| panic!("{e}")).run()
}

fn senders(r: &Results) -> Vec<&Value> {
    r.nodes
        .iter()
        .filter_map(|n| n.details.as_ref()?["sessions"].as_array())
        .flatten()
        .filter(|s| s["role"] == "sender")
        .collect()
}

fn receiver<'a>(r: &'a Results, flow: &str) -> &'a Value {
    r.nodes
        .iter()
        .filter_map(|n| n.details.as_ref()?["sessions"].as_array())
        .flatten()
        .find(|s| s["role"] == "receiver" && s["flow"] == flow)
        .unwrap_or_else(|| panic!("no receiver of {flow}"))
}

fn total(r: &Results, counter: &str) -> u64 {
    r.nodes.iter().filter_map(|n| n.counters.get(counter)).sum()
}

fn node_counter(r: &Results, node: &str, counter: &str) -> u64 {
    r.nodes
        .iter()
        .find(|n| n.name == node)
        .and_then(|n| n.counters.get(counter).copied())
        .unwrap_or(0)
}

fn interval(s: &Value, k: &str) -> f64 {
    s["rt_visit_interval"][k].as_f64().unwrap_or(0.0)
}

/// No RT visit of any session came sooner than one TRT after its last:
/// one token served the RT set throughout.
fn one_token(r: &Results) -> bool {
    senders(r)
        .iter()
        .filter(|s| s["rt_visit_interval"]["count"].as_u64().unwrap_or(0) > 0)
        .all(|s| interval(s, "min_ns") >= TRT - 1e3)
}

#[test]
fn sessions_are_visited_every_trt_and_no_frame_is_late() {
    let r = run(&scenario(
        5,
        &[(1, 2, 6400, 5.0), (3, 2, 6400, 6.0)],
        "400kb/s",
        "",
        2.0,
    ));
    for s in senders(&r) {
        assert!(s.get("admitted_at_ns").is_some(), "{s}");
        assert_eq!(interval(s, "min_ns"), interval(s, "max_ns"), "{s}");
        assert!((interval(s, "mean_ns") - TRT).abs() < 1.0, "{s}");
        assert_eq!(s["units_buffers_full"], 0, "{s}");
    }
    for f in ["rt0", "rt1"] {
        let rx = receiver(&r, f);
        assert_eq!(rx["late_units"], 0, "{rx}");
        assert!(rx["units_in_window"].as_u64().unwrap_or(0) >= 50, "{rx}");
    }
    assert_eq!(total(&r, "tokens_created"), 1);
    assert_eq!(r.flow("nrt").map(|f| f.lost), Some(0));
}

#[test]
fn rether_disabled_sends_video_frames_fragmented_on_csma() {
    let r = run(&scenario(
        3,
        &[(1, 2, 6400, 5.0)],
        "100kb/s",
        "enabled = false",
        1.0,
    ));
    assert_eq!(total(&r, "tokens_created"), 0);
    assert!(
        node_counter(&r, "s1", "ip_fragments_sent") >= 5 * node_counter(&r, "s1", "ip_packets_fragmented")
    );
    let f = r.flow("rt0").expect("rt0");
    assert!(f.sent > 0 && f.received == f.sent, "{f:?}");
}

#[test]
fn the_last_session_closing_switches_back_to_csma() {
    let text = scenario(4, &[(1, 2, 3000, 5.0)], "100kb/s", "", 1.0).replace(
        "rate = \"30pps\"\nstart = \"5ms\"",
        "rate = \"30pps\"\nstart = \"5ms\"\nstop = \"400ms\"",
    );
    let r = run(&text);
    assert!(total(&r, "tokens_destroyed") >= 1, "{:?}", r.nodes);
    assert!(node_counter(&r, "s3", "mode_to_csma") >= 1);
}

#[test]
fn simultaneous_initiators_make_one_token() {
    let r = run(&scenario(
        5,
        &[(3, 4, 3000, 5.0), (1, 2, 3000, 5.0)],
        "100kb/s",
        "",
        1.0,
    ));
    assert_eq!(total(&r, "tokens_created"), 1, "{:?}", r.nodes);
    assert_eq!(total(&r, "initiations"), 2);
    assert!(senders(&r).iter().all(|s| s.get("admitted_at_ns").is_some()));
    assert!(one_token(&r));
}

fn with_fault(fault: &str) -> Results {
    let extra = format!("[[rether.fault]]\n{fault}\n");
    run(&scenario(
        6,
        &[(1, 2, 3000, 5.0), (3, 2, 3000, 6.0)],
        "200kb/s",
        &extra,
        2.0,
    ))
}

#[test]
fn a_dead_nrt_successor_goes_on_the_dead_list() {
    let r = with_fault("node = \"s4\"\nat = \"500ms\"\nkind = \"crash\"");
    assert_eq!(node_counter(&r, "s4", "fault_crashes"), 1);
    assert!(total(&r, "successors_declared_dead") >= 1, "{:?}", r.nodes);
    assert!(one_token(&r));
    // Both sessions keep being served to the end.
    for f in ["rt0", "rt1"] {
        let rx = receiver(&r, f);
        assert!(rx["units_in_window"].as_u64().unwrap_or(0) >= 55, "{rx}");
    }
}

#[test]
fn an_rt_sender_crashing_while_holding_the_token_loses_only_its_reservation() {
    let r = with_fault("node = \"s3\"\nat = \"600ms\"\nkind = \"crash-holding\"");
    assert_eq!(node_counter(&r, "s3", "fault_crashes"), 1);
    assert!(total(&r, "successors_declared_dead") + total(&r, "token_regenerations") >= 1);
    assert!(one_token(&r));
    let survivor = receiver(&r, "rt0");
    assert!(
        survivor["units_in_window"].as_u64().unwrap_or(0) >= 55,
        "{survivor}"
    );
    assert_eq!(survivor["units_incomplete"], 0);
}

#[test]
fn a_lost_token_frame_is_retransmitted_and_nobody_is_declared_dead() {
    let r = with_fault("node = \"s5\"\nat = \"500ms\"\nkind = \"drop-token\"");
    assert_eq!(node_counter(&r, "s5", "fault_tokens_dropped"), 1);
    assert!(total(&r, "token_retransmits") >= 1);
    assert_eq!(total(&r, "successors_declared_dead"), 0);
    assert!(one_token(&r));
}

#[test]
fn a_corrupted_token_frame_is_counted_and_retransmitted() {
    let r = with_fault("node = \"s5\"\nat = \"500ms\"\nkind = \"corrupt-token\"");
    assert_eq!(node_counter(&r, "s5", "fault_tokens_corrupted"), 1);
    let malformed: u64 = r
        .nodes
        .iter()
        .find(|n| n.name == "s5")
        .map(|n| {
            n.counters
                .iter()
                .filter(|(k, _)| k.starts_with("malformed_"))
                .map(|(_, v)| v)
                .sum()
        })
        .unwrap_or(0);
    assert!(malformed >= 1);
    assert!(total(&r, "token_retransmits") >= 1);
    assert_eq!(total(&r, "successors_declared_dead"), 0);
    assert!(one_token(&r));
}

/// The token-frame faults at the sender (`lose-sent-token`,
/// `corrupt-sent-token`, the ones `qosnet rether fault` injects live): the
/// frame is lost on the wire or goes out damaged. The sender's
/// acknowledgement timer retransmits it, nobody is declared dead, no token
/// is regenerated, and the sessions' RT visits are delayed by at most
/// one acknowledgement timer (`timing::lost_frame_recovery_bound`).
fn sent_token_fault(kind: &str, count: u32) -> Results {
    let r = with_fault(&format!(
        "node = \"s5\"\nat = \"500ms\"\nkind = \"{kind}\"\ncount = {count}"
    ));
    assert!(total(&r, "token_retransmits") >= count as u64, "{:?}", r.nodes);
    assert_eq!(total(&r, "successors_declared_dead"), 0);
    assert_eq!(total(&r, "token_regenerations"), 0);
    assert!(one_token(&r));
    // 6 stations' T_NRT as the scenario computes it (eq. 6), margin 2 ms.
    let m = TimingModel::paper_1995();
    let trt = Duration(33_333_333);
    let t_nrt = qosnet_core::rether::timing::paper_t_nrt_min(6, m.t_token, 1, 5, trt).max(
        m.nrt_visit_max(qosnet_core::rether::NrtPolicy::OnePacket)
            .unwrap_or(Duration::ZERO),
    );
    let bound = qosnet_core::rether::timing::lost_frame_recovery_bound(trt, t_nrt, Duration::from_millis(2));
    for s in senders(&r) {
        let max = interval(s, "max_ns");
        assert!(
            max <= (trt + bound).as_nanos() as f64,
            "RT visit gap {max} ns above TRT + {bound}: {s}"
        );
    }
    for f in ["rt0", "rt1"] {
        let rx = receiver(&r, f);
        assert!(rx["units_in_window"].as_u64().unwrap_or(0) >= 55, "{rx}");
        assert_eq!(rx["units_incomplete"], 0, "{rx}");
    }
    r
}

#[test]
fn a_token_frame_lost_on_the_wire_is_retransmitted() {
    let r = sent_token_fault("lose-sent-token", 2);
    assert_eq!(node_counter(&r, "s5", "fault_sent_tokens_lost"), 2);
    // Lost on the wire: no station saw it, so no parser refused anything.
    assert_eq!(total(&r, "malformed_bad_version"), 0);
}

#[test]
fn a_token_frame_sent_corrupted_is_refused_by_every_receiver() {
    let r = sent_token_fault("corrupt-sent-token", 1);
    assert_eq!(node_counter(&r, "s5", "fault_sent_tokens_corrupted"), 1);
    // It went out damaged: every other station's parser refused it once.
    for i in [1, 2, 3, 4, 6] {
        assert_eq!(
            node_counter(&r, &format!("s{i}"), "malformed_bad_version"),
            1,
            "s{i}: {:?}",
            r.nodes
        );
    }
    assert_eq!(node_counter(&r, "s5", "malformed_bad_version"), 0);
}

#[test]
fn a_crashed_node_rejoins_during_a_cycle() {
    let r = with_fault("node = \"s5\"\nat = \"400ms\"\nkind = \"crash\"\nrestart = \"900ms\"");
    assert_eq!(node_counter(&r, "s5", "fault_restarts"), 1);
    assert!(node_counter(&r, "s5", "joins_sent") >= 1);
    assert!(total(&r, "joins_applied") >= 1, "{:?}", r.nodes);
    // Back in the NRT round robin after the join.
    assert!(node_counter(&r, "s5", "nrt_visits") > 0);
    assert!(one_token(&r));
}

/// `[[fault]]` is `[[rether.fault]]`'s other spelling: the same station
/// fault, the same run.
#[test]
fn a_top_level_fault_is_the_same_station_fault() {
    let fault = "node = \"s5\"\nat = \"400ms\"\nkind = \"crash\"\nrestart = \"900ms\"";
    let base = scenario(6, &[(1, 2, 3000, 5.0), (3, 2, 3000, 6.0)], "200kb/s", "", 2.0);
    let a = with_fault(fault);
    let b = run(&format!("{base}\n[[fault]]\n{fault}\n"));
    assert_eq!(node_counter(&b, "s5", "fault_restarts"), 1);
    assert_eq!(
        serde_json::to_value(&a.flows).unwrap(),
        serde_json::to_value(&b.flows).unwrap()
    );
}

/// The simulator's generic kill (`kind = "kill"`) at a RETHER station: s4,
/// an NRT station, dies at 500 ms and reboots at 1.2 s. The others declare
/// it dead and keep one token; the reboot (a fresh station, `boot =
/// "join"`) joins again and is visited.
#[test]
fn a_killed_station_is_declared_dead_and_its_reboot_joins() {
    let base = scenario(
        6,
        &[(1, 2, 3000, 5.0), (3, 2, 3000, 6.0)],
        "200kb/s",
        "boot = \"join\"",
        2.0,
    );
    let sc = load_str(
        "t.toml",
        &format!("{base}\n[[fault]]\nnode = \"s4\"\nat = \"500ms\"\nkind = \"kill\"\nrestart = \"1.2s\"\n"),
        &[],
    )
    .unwrap();
    // (No ledger here: RT sessions deliver units, not the flow packets
    // the ledger counts, with or without kills.)
    let r = Sim::new(sc).unwrap().run();
    assert_eq!(
        (
            node_counter(&r, "s4", "killed"),
            node_counter(&r, "s4", "restarted")
        ),
        (1, 1)
    );
    assert!(total(&r, "successors_declared_dead") >= 1, "{:?}", r.nodes);
    assert!(node_counter(&r, "s4", "joins_sent") >= 1, "{:?}", r.nodes);
    assert!(total(&r, "joins_applied") >= 1, "{:?}", r.nodes);
    assert!(one_token(&r));
    for f in ["rt0", "rt1"] {
        let rx = receiver(&r, f);
        assert!(rx["units_in_window"].as_u64().unwrap_or(0) >= 55, "{rx}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// Random station counts, session sizes and NRT loads: every admitted
    /// session is visited exactly every TRT; the admitted reservations
    /// plus T_NRT never exceed TRT (eq. 3); a refusal names eq. 3.
    #[test]
    fn admitted_sessions_get_their_reservation_and_admission_never_overbooks(
        n in 3usize..9,
        sizes in proptest::collection::vec(500u32..9000, 1..7),
        nrt_kbps in 50u32..3000,
    ) {
        let rt: Vec<(usize, usize, u32, f64)> = sizes
            .iter()
            .enumerate()
            .map(|(k, &b)| (1 + k % (n - 1), 1 + (k + 1) % (n - 1), b, 5.0 + k as f64))
            .collect();
        let r = run(&scenario(n, &rt, &format!("{nrt_kbps}kb/s"), "", 0.6));
        let m = TimingModel::paper_1995();
        let t_nrt = qosnet_core::rether::timing::paper_t_nrt_min(n as u64, m.t_token, 1, 5, Duration(33_333_333))
            .max(m.nrt_visit_max(qosnet_core::rether::NrtPolicy::OnePacket).unwrap_or(Duration::ZERO));
        let mut reserved = Duration::ZERO;
        for s in senders(&r) {
            if s.get("admitted_at_ns").is_some() {
                reserved += m.tht_rt(s["bytes_per_trt"].as_u64().unwrap_or(0) as u32);
                if s["rt_visit_interval"]["count"].as_u64().unwrap_or(0) > 0 {
                    prop_assert!((interval(s, "min_ns") - TRT).abs() < 1e3, "{}", s);
                    prop_assert!((interval(s, "max_ns") - TRT).abs() < 1e3, "{}", s);
                }
            } else {
                prop_assert!(s["refused"].as_str().unwrap_or("").contains("eq. 3"), "{}", s);
            }
        }
        prop_assert!(reserved + t_nrt <= Duration(33_333_333), "{reserved} + {t_nrt}");
    }
}

/// A session reserving several units per TRT (120 units/s at TRT 33.3 ms:
/// four 7000-byte units) sends all of them at each visit, so nothing piles
/// up in its buffers and every unit arrives within about one TRT.
#[test]
fn a_session_of_several_units_per_trt_sends_them_all_each_visit() {
    let text = scenario(3, &[(1, 2, 7000, 10.0)], "50kb/s", "", 2.0)
        .replace("rate = \"30pps\"", "rate = \"120pps\"");
    let r = run(&text);
    let f = r.flows.iter().find(|f| f.name == "rt0").unwrap();
    assert!(f.sent > 150, "{}", f.sent);
    assert_eq!(f.received, f.sent, "units left behind");
    assert!(
        f.delay_ns.max as f64 <= TRT + 10e6,
        "max delay {} ns",
        f.delay_ns.max
    );
    let s = senders(&r)[0];
    assert_eq!(s["units_sent"], s["units_generated"], "{s}");
    assert_eq!(s["units_buffers_full"], 0, "{s}");
    assert!((interval(s, "max_ns") - TRT).abs() < 1e3, "{s}");
    // Bursts of four per visit are not late: the receiver counts lateness
    // beyond the burst's spread (TRT − period).
    let rx = receiver(&r, "rt0");
    assert_eq!(rx["late_units"], 0, "{rx}");
}
