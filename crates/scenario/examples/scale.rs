//! Loading at scale: time to load (parse, validate, generate routes,
//! trace flows, build every router) a chain of N routers, and heap bytes
//! per flow of a file of K flows, with the ratio between sizes (near
//! linear: a 10x larger input costs about 10x).
//!
//! `cargo run --release -p qosnet-scenario --example scale`

use std::time::Instant;

/// The system allocator, counting bytes in use and their peak
/// (`peak_alloc`: no allocator of our own, so no `unsafe` here).
#[global_allocator]
static A: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// A chain h1 - R1 - ... - Rn - h2 (longer than any TTL: no flows; the
/// flow benchmark below measures those).
fn chain(n: usize) -> String {
    let mut s = String::from(
        "[scenario]\nname = \"chain\"\nduration = \"1s\"\n[defaults.link]\ncapacity = \"1Gb/s\"\n",
    );
    for i in 0..n {
        s += &format!("[[node]]\nname = \"R{i}\"\nkind = \"router\"\n");
    }
    s += &format!(
        "[[node]]\nname = \"h1\"\nkind = \"host\"\n[[node]]\nname = \"h2\"\nkind = \"host\"\n\
         [[link]]\na = \"h1\"\nb = \"R0\"\n[[link]]\na = \"R{}\"\nb = \"h2\"\n",
        n - 1
    );
    for i in 1..n {
        s += &format!("[[link]]\na = \"R{}\"\nb = \"R{i}\"\n", i - 1);
    }
    s
}

/// `k` flows between two hosts across one router.
fn flows(k: usize) -> String {
    let mut s = String::from(
        "[scenario]\nname = \"flows\"\nduration = \"1s\"\n[defaults.link]\ncapacity = \"1Gb/s\"\n\
         [[node]]\nname = \"R\"\nkind = \"router\"\n[[node]]\nname = \"h1\"\nkind = \"host\"\n\
         [[node]]\nname = \"h2\"\nkind = \"host\"\n[[link]]\na = \"h1\"\nb = \"R\"\n[[link]]\na = \"R\"\nb = \"h2\"\n",
    );
    for i in 0..k {
        s +=
            &format!("[[flow]]\nname = \"f{i}\"\nfrom = \"h1\"\nto = \"h2\"\nsize = 500\nrate = \"10pps\"\n");
    }
    s
}

fn main() {
    println!("load time of a chain of N routers (load_str: parse, validate, routes, traces, routers)");
    let mut prev: Option<f64> = None;
    for n in [100, 1_000, 10_000] {
        let text = chain(n);
        let t = Instant::now();
        let sc = qosnet_scenario::load_str("chain", &text, &[]).expect("chain loads");
        let secs = t.elapsed().as_secs_f64();
        let net = qosnet_scenario::topo::Network::build(&sc).expect("network");
        let routes: usize = net.nodes.iter().map(|n| n.routes.len()).sum();
        let ratio = prev
            .map(|p| format!(", x{:.1} for 10x the routers", secs / p))
            .unwrap_or_default();
        println!(
            "  N = {n:>6}: {:>8.1} ms ({} nodes, {} links, {routes} routes){ratio}",
            secs * 1e3,
            sc.nodes.len(),
            sc.links.len()
        );
        prev = Some(secs);
    }
    println!("heap per flow while loading K flows (peak during load_str, and kept by the Scenario)");
    let mut prev: Option<f64> = None;
    for k in [1_000, 10_000, 100_000] {
        let text = flows(k);
        let base = A.current_usage();
        A.reset_peak_usage();
        let t = Instant::now();
        let sc = qosnet_scenario::load_str("flows", &text, &[]).expect("flows load");
        let secs = t.elapsed().as_secs_f64();
        let peak = (A.peak_usage() - base) as f64;
        let kept = A.current_usage().saturating_sub(base) as f64;
        let ratio = prev
            .map(|p| format!(", time x{:.1} for 10x the flows", secs / p))
            .unwrap_or_default();
        println!(
            "  K = {k:>6}: peak {:>6.0} B/flow, kept {:>5.0} B/flow, text {:>4.0} B/flow, {:>7.1} ms{ratio}",
            peak / k as f64,
            kept / k as f64,
            text.len() as f64 / k as f64,
            secs * 1e3
        );
        assert_eq!(sc.flows.len(), k);
        prev = Some(secs);
    }
}
