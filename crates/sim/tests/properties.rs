//! Simulator invariants on random scenarios: conservation, the TDP delay
//! bound, and deterministic replay.

use proptest::prelude::*;
use qosnet_scenario::load_str;
use qosnet_sim::Sim;

/// A chain h0 - R0 - R1 - ... - R(k-1) - h1 with `flows` flows h0 -> h1
/// (or, with `own_hosts`, each flow from its own host s<i> on R0).
fn chain(k: usize, sched: &str, flows: &[(u32, u32, u32)], extra: &str) -> String {
    chain_with(k, sched, flows, extra, false)
}

fn chain_with(k: usize, sched: &str, flows: &[(u32, u32, u32)], extra: &str, own_hosts: bool) -> String {
    let mut s = format!(
        "[scenario]\nname = \"chain\"\nduration = \"200ms\"\nwarmup = \"10ms\"\n\
         [tdp]\ntf = \"100us\"\ntfs_per_tc = 20\n\
         [defaults.router]\nscheduler = \"{sched}\"\ntdp_delay = 2\nqueue_packets = 20\n\
         processing = {{ dist = \"uniform\", min = \"1us\", max = \"8us\" }}\n\
         [defaults.link]\ncapacity = \"100Mb/s\"\ndelay = \"2us\"\n{extra}\n"
    );
    s += "[[node]]\nname = \"h0\"\nkind = \"host\"\n[[node]]\nname = \"h1\"\nkind = \"host\"\n";
    for i in 0..k {
        s += &format!("[[node]]\nname = \"R{i}\"\nkind = \"router\"\n");
    }
    s += "[[link]]\na = \"h0\"\nb = \"R0\"\n";
    for i in 1..k {
        s += &format!("[[link]]\na = \"R{}\"\nb = \"R{i}\"\n", i - 1);
    }
    s += &format!("[[link]]\na = \"R{}\"\nb = \"h1\"\n", k - 1);
    for (i, (size, pps, phase)) in flows.iter().enumerate() {
        let from = if own_hosts {
            s += &format!("[[node]]\nname = \"s{i}\"\nkind = \"host\"\n[[link]]\na = \"s{i}\"\nb = \"R0\"\n");
            format!("s{i}")
        } else {
            "h0".to_string()
        };
        s += &format!(
            "[[flow]]\nname = \"f{i}\"\nfrom = \"{from}\"\nto = \"h1\"\nsize = {size}\nrate = \"{pps}pps\"\nstart = \"{phase}us\"\n"
        );
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Every packet sent is delivered, dropped and counted, or still in
    /// flight — also under overload with small queues.
    #[test]
    fn conservation(k in 1usize..4, flows in prop::collection::vec((64u32..1500, 500u32..20_000, 0u32..1000), 1..4), poisson in any::<bool>()) {
        let extra = if poisson { "[defaults.flow]\npattern = \"poisson\"" } else { "" };
        let sc = load_str("chain", &chain(k, "fifo", &flows, extra), &[]).unwrap();
        let mut sim = Sim::new(sc).unwrap();
        let r = sim.run();
        let (generated, delivered, dropped, in_flight) = sim.ledger();
        prop_assert_eq!(generated, delivered + dropped + in_flight, "ledger {:?}", (generated, delivered, dropped, in_flight));
        prop_assert_eq!(r.extra["engine_stalls"].as_u64(), Some(0));
    }

    /// TDP (ICC 2006 §II-B): reserved flows see no loss and end-to-end
    /// jitter below two time frames, whatever their sizes, phases and the
    /// number of hops, when each source's period is a whole number of TFs
    /// (so edge shaping adds a constant wait) and sources do not queue
    /// behind each other before the TDP network.
    ///
    /// Edge shaping adds a constant wait only if a source's packets reach
    /// the edge router clear of a TF boundary: the first router's variable
    /// processing time (1–8 us, and up to two other flows' frames ahead
    /// of it in the CPU queue) can put one packet just before the boundary
    /// and the next just after, and the later one then waits a whole
    /// reservation period for the next reserved TF — an asynchronous
    /// source's inherent edge jitter, not the TDP network's. Such flows
    /// are held to 2 TF plus their period.
    #[test]
    fn tdp_delay_bound(k in 1usize..5, flows in prop::collection::vec((64u32..1200, prop::sample::select(vec![1u32, 2, 4]), 0u32..2000), 1..4)) {
        // n packets per 2 ms TC: periods of 2000/n us are whole TFs of
        // 100 us and nest (20, 10, 5 TFs), so evenly spaced reservations
        // always exist for up to three flows; every packet fits a TF at
        // 100 Mb/s (1250 B).
        const TF: u64 = 100_000;
        let fl: Vec<(u32, u32, u32)> = flows.iter().map(|(s, n, p)| (*s, n * 500, *p)).collect();
        let sc = load_str("chain", &chain_with(k, "tdp", &fl, "", true), &[]).unwrap();
        let mut sim = Sim::new(sc).unwrap();
        let r = sim.run();
        for (f, (size, pps, phase)) in r.flows.iter().zip(&fl) {
            prop_assert_eq!(f.lost, 0, "{} lost", f.name);
            // When the frame is whole at the edge router, within a TF: the
            // source's phase, its NIC's serialisation (frame + 24 B of
            // preamble, FCS and gap at 100 Mb/s, 80 ns a byte) and the link.
            let wire = (*size as u64 + 14).max(60) + 24;
            let at = (*phase as u64 * 1000 + wire * 80 + 2_000) % TF;
            // Up to 8 us of processing and two frames of other flows ahead.
            let clear = at >= 5_000 && at + 40_000 <= TF;
            let bound = if clear { 2 * TF } else { 2 * TF + 1_000_000_000 / *pps as u64 };
            prop_assert!(f.jitter_ns < bound, "{} jitter {} ns >= {} ns (edge arrival {} ns into its TF)", f.name, f.jitter_ns, bound, at);
        }
    }
}

#[test]
fn same_seed_same_run_bit_for_bit() {
    let text = chain(
        3,
        "fifo",
        &[(500, 9000, 0), (1200, 4000, 37)],
        "[defaults.flow]\npattern = \"poisson\"",
    );
    let run = |seed: u64| {
        let sc = load_str("chain", &text, &[format!("scenario.seed={seed}")]).unwrap();
        let mut r = Sim::new(sc).unwrap().run();
        r.engine = Default::default();
        serde_json::to_string(&r).unwrap()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

#[test]
fn pcap_capture_of_a_link() {
    let text = chain(2, "fifo", &[(500, 2000, 0)], "");
    let sc = load_str("chain", &text, &["scenario.duration=\"50ms\"".into()]).unwrap();
    let mut sim = Sim::new(sc).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    assert!(sim.enable_pcap(dir, &["R0->nope".into()]).is_err());
    let files = sim.enable_pcap(dir, &["R0->R1".into()]).unwrap();
    assert_eq!(files.len(), 1);
    let r = sim.run();
    let bytes = std::fs::read(dir.join("R0-R1.pcap")).unwrap();
    let mut reader = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
    let mut n = 0u64;
    let mut last = std::time::Duration::ZERO;
    while let Some(p) = reader.next_packet() {
        let p = p.unwrap();
        assert!(p.timestamp >= last, "timestamps go forward");
        last = p.timestamp;
        qosnet_core::wire::parse_ipv4(&p.data).expect("captured frames are valid IPv4");
        n += 1;
    }
    // The whole run (warm-up included) went through R0->R1.
    let link = r.link("R0->R1").unwrap();
    assert!(
        n >= link.packets && n > 50,
        "{n} captured, {} counted",
        link.packets
    );
}

#[test]
fn taprio_protects_the_ef_window() {
    let path = format!(
        "{}/../../scenarios/examples/taprio.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let sc = qosnet_scenario::load_file(&path, &["scenario.duration=\"600ms\"".into()]).unwrap();
    let r = Sim::new(sc).unwrap().run();
    let (ctl, bulk) = (r.flow("control").unwrap(), r.flow("bulk").unwrap());
    assert_eq!(ctl.lost, 0);
    // Bounded by the 1 ms cycle (waiting for the EF window) plus transmission.
    assert!(
        ctl.delay_ns.max < 1_000_000,
        "EF max delay {} ns",
        ctl.delay_ns.max
    );
    // BE gets the 800 us window only: six 1538-byte frames per cycle, 72 Mb/s of IP.
    let mbps = bulk.throughput_bps / 1e6;
    assert!((mbps - 72.0).abs() < 1.5, "BE {mbps} Mb/s");
}

#[test]
fn htb_shares_by_rate_ceil_and_priority() {
    let path = format!("{}/../../scenarios/examples/htb.toml", env!("CARGO_MANIFEST_DIR"));
    let sc = qosnet_scenario::load_file(&path, &["scenario.duration=\"1s\"".into()]).unwrap();
    let r = Sim::new(sc).unwrap().run();
    let mbps = |f: &str| r.flow(f).unwrap().throughput_bps / 1e6;
    // Wire shares 20 / 70 / 10 Mb/s; IP rates are 1500/1538 of those.
    let ip = 1500.0 / 1538.0;
    assert!(
        (mbps("ef") - 20.0 * ip).abs() < 0.6,
        "EF {} Mb/s: held at its ceiling",
        mbps("ef")
    );
    assert!(
        (mbps("af1") - 70.0 * ip).abs() < 1.5,
        "AF1 {} Mb/s: its offer, borrowing first",
        mbps("af1")
    );
    assert!(
        (mbps("be") - 10.0 * ip).abs() < 1.0,
        "BE {} Mb/s: its guarantee",
        mbps("be")
    );
}
