//! The DEGEB DiffServ experiments (seed 004) in simulation, shortened:
//! T1 (Table 4-1) policed bandwidth per class, T3 (Table 4-3) re-marking
//! down the AF ladder, T4 (Figure 4) EF vs BE latency under congestion.

use qosnet_scenario::load_file;
use qosnet_scenario::results::Results;
use qosnet_sim::Sim;

fn run(name: &str, sets: &[String]) -> Results {
    let path = format!(
        "{}/../../scenarios/diffserv-degeb/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let sc = load_file(&path, sets).unwrap_or_else(|e| panic!("{e}"));
    Sim::new(sc).unwrap_or_else(|e| panic!("{e}")).run()
}

fn class_run(class: &str, rate: &str) -> Results {
    run(
        "t1-edge",
        &[
            format!("flow.cbr.dscp=\"{class}\""),
            format!("flow.cbr.rate=\"{rate}\""),
            "scenario.duration=1s".into(),
        ],
    )
}

#[test]
fn t1_bandwidth_and_t3_remarking() {
    // (class, shaped total Mb/s, TOS bytes out of profile) — Tables 4-1 and 4-3.
    let table = [
        ("EF", 10.0, vec!["0xb8"]),
        ("AF11", 76.0, vec!["0x28", "0x30", "0x38"]),
        ("AF12", 46.0, vec!["0x30", "0x38"]),
        ("AF13", 21.0, vec!["0x38"]),
        ("AF21", 46.0, vec!["0x48", "0x50", "0x58"]),
        ("AF22", 26.0, vec!["0x50", "0x58"]),
        ("AF23", 11.0, vec!["0x58"]),
        ("AF31", 16.0, vec!["0x68", "0x70", "0x78"]),
        ("AF32", 6.0, vec!["0x70", "0x78"]),
        ("AF33", 1.0, vec!["0x78"]),
        ("BE", 30.0, vec!["0x00"]),
    ];
    for (class, shaped, out) in table {
        let r = class_run(class, "8127pps");
        let f = &r.flows[0];
        let mbps = f.throughput_bps / 1e6;
        assert!(
            (mbps - shaped).abs() <= 0.03 * shaped + 0.1,
            "{class}: {mbps} Mb/s vs {shaped}"
        );
        let got: Vec<&str> = f.tos_received.keys().map(|s| s.as_str()).collect();
        assert_eq!(got, out, "{class}: out-of-profile TOS bytes");
        assert!(f.lost > 0, "{class}: line rate must exceed the profile");
        // In profile: nothing lost, nothing re-marked.
        let r = class_run(class, "50pps");
        let f = &r.flows[0];
        assert_eq!(f.lost, 0, "{class} in profile lost packets");
        assert_eq!(
            f.tos_received.len(),
            1,
            "{class} in profile re-marked: {:?}",
            f.tos_received
        );
        assert_eq!(f.tos_received.keys().next().map(|s| s.as_str()), Some(out[0]));
    }
}

#[test]
fn t4_ef_latency_under_be_congestion() {
    let rtt = |r: &Results, f: &str| r.flow(f).unwrap().delay_ns.mean / 1e6;
    let five = "flow.*.path=[\"Ei\", \"C1\", \"C2\", \"C3\", \"Ee\"]".to_string();
    let three = "flow.*.path=[\"Ei\", \"C1\", \"Ee\"]".to_string();
    let busy = run("t4-latency", &[five.clone(), "scenario.duration=2500ms".into()]);
    let idle = run(
        "t4-latency",
        &[
            five,
            "flow.bulk.stop=\"0s\"".into(),
            "scenario.duration=2500ms".into(),
        ],
    );
    let busy3 = run("t4-latency", &[three, "scenario.duration=2500ms".into()]);
    for sz in [64, 128, 256, 512, 1024, 1500] {
        let (ef, be) = (rtt(&busy, &format!("ef{sz}")), rtt(&busy, &format!("be{sz}")));
        assert!(
            ef * 10.0 < be,
            "{sz} B: EF {ef} ms not an order of magnitude below BE {be} ms"
        );
        assert_eq!(busy.flow(&format!("ef{sz}")).unwrap().lost, 0, "EF probes lost");
        // Hop count and size effects are small next to the congestion effect.
        assert!((ef - rtt(&busy3, &format!("ef{sz}"))).abs() < 2.0);
        assert!((rtt(&idle, &format!("ef{sz}")) - rtt(&idle, &format!("be{sz}"))).abs() < 0.5);
    }
    assert!(rtt(&busy, "ef1500") - rtt(&busy, "ef64") < 3.0);
    assert_eq!(busy.flows[0].delay_kind, "one-way");
    assert_eq!(busy.flow("ef64").unwrap().delay_kind, "rtt");
}

#[test]
fn per_class_counters_reach_results() {
    let r = run("t4-latency", &["scenario.duration=1500ms".into()]);
    let l = r.link("Ei->C1").unwrap();
    assert!(
        l.counters["EF.sent"] > 0 && l.counters["BE.sent"] > 0,
        "{:?}",
        l.counters
    );
    // The 120 Mb/s of BE into 100 Mb/s is dropped in BE, never in EF.
    assert!(
        l.counters
            .iter()
            .any(|(k, v)| k.starts_with("BE.drop_") && *v > 0),
        "{:?}",
        l.counters
    );
    assert!(!l.counters.keys().any(|k| k.starts_with("EF.drop_")));
}
