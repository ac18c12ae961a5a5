//! Issue 10: small packets are measured, not counted as lost. IP sizes
//! 40-51 carry the compact probe, 52 up the full one; the same flow at
//! any measurable size arrives whole with the delay its size implies, and
//! IMIX (40-byte packets among others) loses nothing on an idle path.
//! Delay tables are internally consistent (min ≤ p50 ≤ p99 ≤ p99.9 ≤ max).

use qosnet_scenario::load_str;
use qosnet_sim::Sim;

fn line(size: &str, pattern: &str) -> String {
    format!(
        "[scenario]\nname = \"small\"\nduration = \"1s\"\nwarmup = \"10ms\"\n\
         [defaults.link]\ncapacity = \"100Mb/s\"\ndelay = \"5us\"\n\
         [[node]]\nname = \"h1\"\nkind = \"host\"\n[[node]]\nname = \"R\"\nkind = \"router\"\n\
         [[node]]\nname = \"h2\"\nkind = \"host\"\n\
         [[link]]\na = \"h1\"\nb = \"R\"\n[[link]]\na = \"R\"\nb = \"h2\"\n\
         [[flow]]\nname = \"f\"\nfrom = \"h1\"\nto = \"h2\"\nsize = {size}\nrate = \"2000pps\"\npattern = \"{pattern}\"\n\
         [[flow]]\nname = \"back\"\nfrom = \"h2\"\nto = \"h1\"\nsize = {size}\nrate = \"700pps\"\necho = true\n"
    )
}

#[test]
fn every_measurable_size_arrives_whole() {
    for size in [40, 41, 46, 51, 52, 53, 64, 200] {
        let sc = load_str("small", &line(&size.to_string(), "cbr"), &[]).unwrap();
        let r = Sim::new(sc).unwrap().run();
        for f in &r.flows {
            assert!(f.sent > 600, "size {size}: {f:?}");
            assert_eq!((f.received, f.lost), (f.sent, 0), "size {size}: {} lost", f.name);
            let d = &f.delay_ns;
            assert!(d.min > 10_000 && d.max < 1_000_000, "size {size}: {d:?}");
        }
        // An idle path: every packet of the CBR flow takes the same time,
        // two frame times and two propagation delays plus the host NIC's.
        let d = &r.flows[0].delay_ns;
        assert_eq!(d.min, d.max, "size {size}: {d:?}");
    }
}

#[test]
fn imix_loses_nothing_on_an_idle_path() {
    for pattern in ["cbr", "poisson"] {
        let sc = load_str("small", &line("\"imix\"", pattern), &[]).unwrap();
        let r = Sim::new(sc).unwrap().run();
        let f = &r.flows[0];
        assert!(f.sent > 1500);
        assert_eq!((f.received, f.lost), (f.sent, 0), "{pattern}: {f:?}");
        // 40-, 576- and 1500-byte packets: three distinct delays at least.
        assert!(f.delay_ns.max > f.delay_ns.min, "{pattern}: {:?}", f.delay_ns);
    }
}

#[test]
fn sizes_too_small_for_a_probe_are_refused_at_load() {
    for size in [28, 39] {
        let e = load_str("small", &line(&size.to_string(), "cbr"), &[]).unwrap_err();
        assert!(e.line > 0, "{e}");
        assert!(e.msg.contains("probe") && e.hint.contains("at least 40"), "{e}");
    }
}

#[test]
fn delay_tables_are_ordered_and_exact_at_the_ends() {
    for text in [line("\"imix\"", "poisson"), line("1002", "poisson")] {
        let sc = load_str("small", &text, &[]).unwrap();
        let r = Sim::new(sc).unwrap().run();
        for f in &r.flows {
            let d = &f.delay_ns;
            assert!(
                d.min <= d.p50 && d.p50 <= d.p99 && d.p99 <= d.p999 && d.p999 <= d.max,
                "{}: {d:?}",
                f.name
            );
            assert!(d.min as f64 <= d.mean && d.mean <= d.max as f64, "{d:?}");
            assert_eq!(f.jitter_ns, d.max - d.min);
        }
    }
}
