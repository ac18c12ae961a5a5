//! qosnet's fuzz targets: the entry points that untrusted bytes
//! reach — frames off the wire into every parser and every node kind,
//! scenario files and `--set` arguments into the loader, and the other
//! files users hand qosnet (sweep manifests, placement files, node
//! configs) — each as a function from bytes that panics only
//! when qosnet is wrong.
//!
//! Two drivers call them:
//! * `fuzz/` (outside the workspace): one AFL++ binary per target, built
//!   and run by `scripts/fuzz` with cargo-afl (coverage-guided, stable Rust);
//! * `tests/corpus.rs` here: replays the committed seed corpus and every
//!   crash or hang input ever found (`fuzz/regressions/<target>/`) on each
//!   `cargo test`, so a fixed bug stays fixed.
//!
//! The in-process proptest properties (`crates/core/tests/fuzz_wire.rs`,
//! `crates/fuzz/tests/nodes.rs`, `crates/scenario/tests/fuzz_load.rs`)
//! remain as the structured, always-on complement: they reach deep states
//! by construction where a byte-level fuzzer needs time to learn them.
//!
//! A target never allocates without bound and never loops without bound:
//! inputs are capped ([`MAX_INPUT`]), a `node` input feeds at most
//! [`MAX_FRAMES`] frames and [`MAX_STEPS`] timer steps, and a node's reaction to one frame is drained
//! for at most 50 ms of virtual time, 64 timer steps and 100 000
//! transmissions.
//!
//! Speed (the aim is 10 M inputs per target in a CI-sized run): an input pays only for
//! work about that input. What does not depend on it is built once,
//! before AFL's fork server starts ([`warm_up`]): the `node` target's
//! shipped scenarios and node index, the `set` target's parsed file
//! (`SetBase`, so the shipped file is not parsed per input). Building the
//! chosen node per input stays (a fresh node per input keeps runs
//! reproducible); its cost was a switch's 4094-VID member scan, now built
//! from the listed VIDs. `scenario` plans TDP no more often than `check`
//! and `sim` do, and its STSDR seeds carry 18 flows, not 288 (the same
//! code, a ninth of the text). `cargo run --release -p qosnet-fuzz
//! --example rate -- TARGET ROUNDS DIR...` measures a target's cost per
//! input outside AFL.

#![forbid(unsafe_code)]

use std::sync::OnceLock;

use qosnet_core::node::{Node, TxStatus};
use qosnet_core::probe::Probe;
use qosnet_core::rether::wire as rether;
use qosnet_core::stsdr::wire as ds;
use qosnet_core::stsdr::Dims;
use qosnet_core::wire::{self, MacAddr};
use qosnet_core::{Duration, Instant, Meta};
use qosnet_scenario::build::{build_node, BuildOpts, Setup};
use qosnet_scenario::topo::Network;
use qosnet_scenario::{load_str, Scenario, SetBase};

/// Inputs longer than this are cut: a jumbo frame, or a scenario file of a
/// size users write, is well inside it.
pub const MAX_INPUT: usize = 64 * 1024;

/// Frames one `node` input feeds at most (records past it are ignored).
pub const MAX_FRAMES: usize = 512;

/// Timer steps (`feed`) one `node` input takes at most: no frame is fed
/// once they are spent.
pub const MAX_STEPS: usize = 4096;

/// A fuzz target: bytes in, a panic only when qosnet is wrong.
pub type Target = fn(&[u8]);

/// The targets by name, as `scripts/fuzz` and the corpus test know them.
pub const TARGETS: &[(&str, Target)] = &[
    ("frame", frame),
    ("node", node),
    ("scenario", scenario),
    ("set", set),
    ("manifest", manifest),
    ("placement", placement),
    ("nodecfg", nodecfg),
];

/// Shipped scenarios whose nodes the `node` target feeds (every node kind:
/// TDP, FIFO and DiffServ routers, taprio, HTB, switches, CSMA/CD stations,
/// RETHER stations, STSDR balancers and forwarders).
const NODE_SCENARIOS: &[(&str, &str)] = &[
    (
        "tdp-1002",
        include_str!("../../../scenarios/tdp-icc2006/tdp-1002.toml"),
    ),
    (
        "fifo-482",
        include_str!("../../../scenarios/tdp-icc2006/fifo-482.toml"),
    ),
    (
        "t1-edge",
        include_str!("../../../scenarios/diffserv-degeb/t1-edge.toml"),
    ),
    (
        "t4-latency",
        include_str!("../../../scenarios/diffserv-degeb/t4-latency.toml"),
    ),
    ("taprio", include_str!("../../../scenarios/examples/taprio.toml")),
    ("htb", include_str!("../../../scenarios/examples/htb.toml")),
    (
        "saturation",
        include_str!("../../../scenarios/ethernet/saturation.toml"),
    ),
    ("line", include_str!("../../../scenarios/live/line.toml")),
    (
        "rether-faults",
        include_str!("../../../scenarios/rether/faults.toml"),
    ),
    ("stsdr-lds", include_str!("../../../scenarios/stsdr/lds.toml")),
    ("stsdr-sds", include_str!("../../../scenarios/stsdr/sds.toml")),
    (
        "rether-bridged",
        include_str!("../../../scenarios/rether/bridged.toml"),
    ),
];

/// The scenario `--set` arguments are applied to.
const SET_BASE: &str = include_str!("../../../scenarios/live/line.toml");

/// Wire parsers: Ethernet/IPv4/UDP views, measurement probes, 802.1Q tags,
/// RETHER frames (docs/rether-wire.md), STSDR DS frames
/// (docs/stsdr-wire.md). What parses must re-encode without panicking.
pub fn frame(data: &[u8]) {
    let f = &data[..data.len().min(MAX_INPUT)];
    let _ = wire::eth_dst(f);
    let _ = wire::eth_src(f);
    if let Ok(info) = wire::parse_ipv4(f) {
        let p = wire::udp_payload(f, &info);
        assert!(p.len() <= f.len(), "UDP payload longer than its frame");
        if let Some(d) = Probe::decode_any(p) {
            let _ = d.resolve(Some(u64::MAX), u64::MAX);
            let _ = d.resolve(None, 0);
        }
    }
    let _ = wire::vlan::parse_vlan(f);
    let mut g = f.to_vec();
    let _ = wire::vlan::pop_tag(&mut g);
    if rether::is_rether(f) {
        if let Ok(fr) = rether::parse(f) {
            let _ = rether::build(MacAddr([2, 0, 0, 0, 0, 1]), MacAddr::BROADCAST, &fr);
        }
    }
    let _ = ds::is_ds(f);
    let loose = ds::Expect {
        vid: None,
        dims: None,
    };
    let strict = ds::Expect {
        vid: Some(100),
        dims: Some(Dims::new(4, 3, 3)),
    };
    let _ = ds::parse_header(f, &loose);
    for exp in [&loose, &strict] {
        if let Ok(d) = ds::parse(f, exp) {
            // Re-encoding reads every slot again, LAZY head lengths too.
            let g = ds::encode(&d.header, &d.state, d.offsets.as_deref(), MacAddr::local(1), None);
            assert!(
                ds::parse(&g, exp).is_ok(),
                "a parsed DS frame re-encodes to one that does not parse"
            );
        }
    }
}

struct Prepared {
    sc: Scenario,
    net: Network,
    setup: Setup,
}

fn prepared() -> &'static [Prepared] {
    static P: OnceLock<Vec<Prepared>> = OnceLock::new();
    P.get_or_init(|| {
        NODE_SCENARIOS
            .iter()
            .map(|(name, text)| {
                let sc = load_str(name, text, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
                let net = Network::build(&sc).unwrap_or_else(|e| panic!("{name}: {e}"));
                let setup = Setup::new(&sc, &net).unwrap_or_else(|e| panic!("{name}: {e}"));
                Prepared { sc, net, setup }
            })
            .collect()
    })
}

/// (scenario, node index) of every node the builder registry makes.
fn node_index() -> &'static [(usize, usize)] {
    static I: OnceLock<Vec<(usize, usize)>> = OnceLock::new();
    I.get_or_init(|| {
        let mut v = Vec::new();
        for (s, p) in prepared().iter().enumerate() {
            for i in 0..p.sc.nodes.len() {
                if build(s, i).is_some() {
                    v.push((s, i));
                }
            }
        }
        v
    })
}

fn build(s: usize, i: usize) -> Option<Box<dyn Node>> {
    let p = &prepared()[s];
    let opts = BuildOpts {
        static_peer_macs: true,
        ..BuildOpts::default()
    };
    build_node(&p.sc, &p.net, &p.setup, i, &opts).expect("shipped scenario node builds")
}

/// ARP announcements for every interface of the prepared scenarios, so
/// mutations reach the ARP and ICMP paths of the routers.
pub fn arp_frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for p in prepared() {
        for n in &p.net.nodes {
            for f in &n.ifaces {
                v.push(qosnet_core::arp::announcement(f.mac, f.ip));
            }
        }
    }
    v
}

/// A fresh copy of every node the `node` target chooses from.
pub fn nodes() -> Vec<Box<dyn Node>> {
    node_index()
        .iter()
        .map(|&(s, i)| build(s, i).expect("indexed nodes build"))
        .collect()
}

/// How many nodes the `node` target chooses from (its first input byte
/// selects one, modulo this).
pub fn node_count() -> usize {
    node_index().len()
}

/// The scenario kinds (`router`, `switch`, `rether`, ...) of the nodes the
/// `node` target feeds.
pub fn node_kinds() -> Vec<&'static str> {
    let mut v: Vec<&str> = node_index()
        .iter()
        .map(|&(s, i)| prepared()[s].sc.nodes[i].kind_name())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The router input path of every node kind. Input: one byte choosing the
/// node, then records `[port][gap][len_hi][len_lo][len bytes of frame]`
/// (gap in units of 10 µs of virtual time before the frame; a short last
/// record takes what is left; records after the [`MAX_FRAMES`]th, or once
/// [`MAX_STEPS`] timer steps are spent, are ignored). After each frame the node's timers,
/// transmissions (acknowledged as sent, every 7th as lost to excessive collisions) and
/// events are drained for up to 50 ms of virtual time.
pub fn node(data: &[u8]) {
    let data = &data[..data.len().min(MAX_INPUT)];
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let idx = node_index();
    let (s, i) = idx[sel as usize % idx.len()];
    let mut n = build(s, i).expect("indexed nodes build");
    let mut now = Instant(1_000_000);
    let mut uid = 0u64;
    let mut steps = 0usize;
    // At most MAX_FRAMES records and MAX_STEPS timer steps: 64 KiB of
    // 4-byte records would be 16 384 frames, each drained for up to 64
    // steps, and a node with its own clock (an STSDR forwarder runs a
    // protocol cycle every t_br) takes all 64 for every frame: seconds per
    // input under instrumentation, for no code a shorter run misses.
    while rest.len() >= 4 && (uid as usize) < MAX_FRAMES && steps < MAX_STEPS {
        let (port, gap) = (rest[0], rest[1]);
        let len = u16::from_be_bytes([rest[2], rest[3]]) as usize;
        let body = &rest[4..];
        let take = len.min(body.len());
        now += Duration::from_micros(10 * gap as u64);
        uid += 1;
        steps += feed(n.as_mut(), &mut now, port as u16, body[..take].to_vec(), uid);
        rest = &body[take..];
    }
}

/// Hand one frame to a node and let it run until it is quiet (bounded:
/// 64 timer steps within 50 ms). Returns the timer steps taken.
pub fn feed(n: &mut dyn Node, now: &mut Instant, port: u16, frame: Vec<u8>, uid: u64) -> usize {
    let ports = n.port_count().max(1) as u16;
    let meta = Meta {
        uid,
        arrival: *now,
        ..Meta::default()
    };
    n.handle_frame(*now, port % ports, frame, meta);
    let until = *now + Duration::from_millis(50);
    let mut sent = 0u32;
    for step in 1..=64 {
        n.handle_timeout(*now);
        while let Some(tx) = n.poll_transmit(*now) {
            sent += 1;
            assert!(
                sent < 100_000,
                "{}: one frame caused {sent} transmissions",
                n.name()
            );
            let at = tx.tx_end.unwrap_or(*now).max(*now);
            let status = if sent.is_multiple_of(7) {
                TxStatus::ExcessiveCollisions
            } else {
                TxStatus::Sent { collisions: 0 }
            };
            n.handle_tx_done(at, tx.port, status);
        }
        while n.poll_event().is_some() {}
        match n.poll_timeout(*now) {
            Some(t) if t > *now && t <= until => *now = t,
            Some(t) if t <= *now => *now += Duration(1),
            _ => return step,
        }
    }
    64
}

/// A scenario file: it loads, or fails with a file:line inside the file;
/// what loads passes every check the simulator makes (`check` == `sim`).
pub fn scenario(data: &[u8]) {
    let data = &data[..data.len().min(MAX_INPUT)];
    let text = String::from_utf8_lossy(data);
    let lines = text.lines().count();
    match load_str("fuzz.toml", &text, &[]) {
        Err(e) => {
            assert_eq!(e.file, "fuzz.toml", "{e}");
            assert!(
                e.line <= lines + 1,
                "{e}: line past the end of a {lines}-line file"
            );
            assert!(!e.msg.is_empty(), "an error without a message: {e:?}");
        }
        Ok(sc) => loaded(sc),
    }
}

fn loaded(sc: Scenario) {
    let net = Network::build(&sc);
    assert!(net.is_ok(), "loaded but no network: {:?}", net.err());
    // No separate `tdpplan::plan` here: the loader plans (validate) and
    // `Sim::new` plans again for its TDP routers; a third plan per input
    // was a third of a TDP scenario's cost.
    let sim = qosnet_sim::Sim::new(sc);
    assert!(sim.is_ok(), "loaded but the simulator refused: {:?}", sim.err());
}

/// The file `set` applies its arguments to, parsed once (not per input),
/// and its line count.
fn set_base() -> (&'static SetBase<'static>, usize) {
    static BASE: OnceLock<(SetBase<'static>, usize)> = OnceLock::new();
    let (b, n) = BASE.get_or_init(|| (SetBase::new("line.toml", SET_BASE), SET_BASE.lines().count()));
    (b, *n)
}

/// Everything `target` builds once (the `node` target's scenarios and
/// node index, the `set` target's parsed file), built now. The AFL
/// harnesses call it before the fork server starts, so a restarted
/// harness (after a crash or a timeout) does not build it again and no
/// input's coverage includes it.
pub fn warm_up(target: &str) {
    match target {
        "node" => {
            node_index();
        }
        "set" => {
            set_base();
        }
        _ => {}
    }
}

/// `--set KEY=VALUE` arguments, one per input line, over a shipped
/// scenario: an error names the `--set` argument (or a line of the file
/// that exists); what loads passes the simulator's checks.
pub fn set(data: &[u8]) {
    let data = &data[..data.len().min(4096)];
    let text = String::from_utf8_lossy(data);
    let sets: Vec<String> = text.lines().take(16).map(str::to_string).collect();
    let (base, base_lines) = set_base();
    match base.load(&sets) {
        Err(e) => {
            if e.file == "line.toml" {
                assert!(e.line <= base_lines + 1, "{e}: line past the end of the file");
            } else {
                assert!(e.file.starts_with("--set "), "{e}");
            }
        }
        Ok(sc) => loaded(sc),
    }
}

/// The `N` of an error that starts `path:N:`, if it does.
fn error_line(e: &str, path: &str) -> Option<usize> {
    let rest = e.strip_prefix(path)?.strip_prefix(':')?;
    rest.split(':').next()?.parse().ok()
}

/// A config file's error names the file, a line inside it if any, and
/// says what is wrong (`path:N: WHAT` or `path: WHAT`, WHAT not empty).
fn names_the_file(e: &str, path: &str, lines: usize) {
    assert!(e.starts_with(path), "an error that does not name {path}: {e}");
    let what = match error_line(e, path) {
        Some(l) => {
            assert!(
                (1..=lines + 1).contains(&l),
                "{e}: line past the end of a {lines}-line file"
            );
            e.splitn(3, ':').nth(2).unwrap_or("")
        }
        None => e[path.len()..].strip_prefix(':').unwrap_or(""),
    };
    assert!(!what.trim().is_empty(), "an error without a message: {e:?}");
}

/// Grids larger than this are checked by their count only: expanding a
/// million rows per input would be all the target did.
const MAX_EXPANDED_ROWS: usize = 4096;

/// A sweep manifest, as `qosnet sweep FILE` reads it
/// ([`qosnet_experiments::sweep::Manifest::parse`]: TOML, then `check`):
/// refused with a message naming the file and what is wrong, or a grid
/// of at most `MAX_RUNS` runs whose rows are exactly params × seeds, each
/// ending with its seed.
pub fn manifest(data: &[u8]) {
    use qosnet_experiments::sweep::{Manifest, MAX_RUNS};
    let data = &data[..data.len().min(MAX_INPUT)];
    let text = String::from_utf8_lossy(data);
    let _ = Manifest::looks_like(&text);
    let m = match Manifest::parse(&text, "m.toml") {
        Err(e) => {
            // `{:#}`: as `qosnet sweep` prints it, with its context.
            let e = format!("{e:#}");
            // "m.toml: ..." or, where the check knows the key's line,
            // "m.toml:LINE: ...".
            assert!(
                e.starts_with("m.toml: ")
                    || e.strip_prefix("m.toml:")
                        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())),
                "an error that does not name the file: {e}"
            );
            // A TOML error ends with what is wrong, not with the excerpt
            // and its caret (the parser leaves some without a message).
            let last = e.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            assert!(
                !last.trim().ends_with('^') && last.len() > "m.toml: ".len(),
                "an error without a message: {e:?}"
            );
            return;
        }
        Ok(m) => m,
    };
    let seeds = m.seeds.list().len();
    let runs = m.params.iter().map(|p| p.values.len()).product::<usize>() * seeds;
    assert!(
        (1..=MAX_RUNS).contains(&runs),
        "check passed a grid of {runs} runs"
    );
    if runs > MAX_EXPANDED_ROWS {
        return;
    }
    let rows = m.rows();
    assert_eq!(rows.len(), runs, "rows of the grid");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.index, i);
        assert_eq!(r.params.len(), m.params.len());
        assert_eq!(r.sets.last(), Some(&format!("scenario.seed={}", r.seed)));
    }
}

/// A placement file ([`qosnet_lab::placement::Placement::parse`]): an
/// error names the file (and a line inside it); a placement that parses
/// checks against its own nodes, and every machine derives the same
/// tunnel for a link that crosses machines, mirrored (a chain of links
/// through its first 64 nodes), or says the VNIs do not fit.
pub fn placement(data: &[u8]) {
    use qosnet_lab::lab::{LabSpec, NodeKind};
    use qosnet_lab::placement::Placement;
    let data = &data[..data.len().min(MAX_INPUT)];
    let text = String::from_utf8_lossy(data);
    let p = match Placement::parse(&text, "p.toml") {
        Err(e) => return names_the_file(&e, "p.toml", text.lines().count()),
        Ok(p) => p,
    };
    assert!(p.dstport != 0, "dstport 0 accepted");
    let nodes: Vec<&str> = p
        .machines
        .iter()
        .flat_map(|m| m.nodes.iter().map(String::as_str))
        .collect();
    for m in &p.machines {
        assert!(!m.nodes.is_empty(), "machine {} has no nodes", m.name);
        assert!(!m.underlay.is_broadcast() && !m.underlay.is_unspecified() && !m.underlay.is_multicast());
    }
    p.check(&nodes).expect("a placement checks against its own nodes");
    let chain = &nodes[..nodes.len().min(64)];
    let mut spec = LabSpec::new("fz");
    for n in chain {
        spec = spec.node(n, NodeKind::Router);
    }
    for w in chain.windows(2) {
        spec = spec.link(w[0], "", w[1], "");
    }
    let mut parts = Vec::new();
    for m in &p.machines {
        match p.part(&spec, &m.name, "fuzz", str::to_string) {
            Ok(part) => parts.push((m, part)),
            Err(e) => return assert!(e.contains("VNI collision"), "{e}"),
        }
    }
    for (i, w) in chain.windows(2).enumerate() {
        let at = |n: &str| {
            parts
                .iter()
                .find(|(m, _)| m.nodes.iter().any(|x| x == n))
                .expect("placed")
        };
        let ((ma, pa), (mb, pb)) = (at(w[0]), at(w[1]));
        match (pa.tunnels.get(&i), pb.tunnels.get(&i)) {
            (None, None) => assert_eq!(ma.name, mb.name, "link {i} crosses machines without a tunnel"),
            (Some(ta), Some(tb)) => {
                assert_ne!(ma.name, mb.name);
                assert_eq!(ta.vni, tb.vni, "link {i}: VNIs differ");
                assert!(ta.vni >= 1 && ta.vni < 1 << 24, "VNI {} is not 24 bits", ta.vni);
                assert_eq!(
                    (ta.local, ta.remote),
                    (tb.remote, tb.local),
                    "link {i}: not mirrored"
                );
                assert_eq!(ta.dstport, p.dstport);
            }
            _ => panic!("link {i}: a tunnel on one side only"),
        }
    }
}

/// A node config ([`qosnet_live::node::NodeConfig::parse`]): an error
/// names the file (and a line inside it); what parses has interface and
/// namespace names Linux takes, one interface per neighbour, a device per
/// named port only, and its paths under the config's directory or
/// absolute.
pub fn nodecfg(data: &[u8]) {
    use qosnet_io::names::{check_ifname, check_netns};
    use qosnet_live::node::NodeConfig;
    let data = &data[..data.len().min(MAX_INPUT)];
    let text = String::from_utf8_lossy(data);
    let c = match NodeConfig::parse(&text, "n.toml", std::path::Path::new("/cfg")) {
        Err(e) => return names_the_file(&e, "n.toml", text.lines().count()),
        Ok(c) => c,
    };
    assert!(!c.node.trim().is_empty());
    let mut seen = std::collections::BTreeSet::new();
    for i in c.ports.values() {
        check_ifname(i).unwrap_or_else(|e| panic!("accepted: {e}"));
        assert!(seen.insert(i), "interface {i} given twice");
    }
    if let Some(n) = &c.netns {
        check_netns(n).unwrap_or_else(|e| panic!("accepted: {e}"));
    }
    assert!(c.devices.keys().all(|k| c.ports.contains_key(k)));
    for p in [
        Some(&c.scenario),
        c.report.as_ref(),
        c.ready.as_ref(),
        c.control.as_ref(),
    ]
    .into_iter()
    .flatten()
    {
        assert!(p.is_absolute(), "{} is not under /cfg or absolute", p.display());
    }
    assert!(c.crash_holding_token_after.is_none_or(|n| n >= 1));
}
