//! Memory per simulated flow: heap bytes a simulation of K
//! flows holds at its peak (load, build, run, results), per flow, for K =
//! 1 000, 10 000, 100 000, with the ratio between sizes (a 10x larger
//! scenario should cost about 10x) and the time to load and to run.
//!
//! `cargo run --release -p qosnet-sim --example flow_memory`
//!
//! Each flow is Poisson at 10 packets/s for 2 s between two hosts across
//! one router, so every flow records a spread of delays (its histogram
//! holds several buckets, not one).

use std::time::Instant;

/// The system allocator, counting bytes in use and their peak
/// (`peak_alloc`: no allocator of our own, so no `unsafe` here).
#[global_allocator]
static A: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

fn flows(k: usize) -> String {
    let mut s = String::from(
        "[scenario]\nname = \"flows\"\nduration = \"2s\"\n[defaults.link]\ncapacity = \"10Gb/s\"\n\
         [[node]]\nname = \"R\"\nkind = \"router\"\n[[node]]\nname = \"h1\"\nkind = \"host\"\n\
         [[node]]\nname = \"h2\"\nkind = \"host\"\n[[link]]\na = \"h1\"\nb = \"R\"\n[[link]]\na = \"R\"\nb = \"h2\"\n",
    );
    for i in 0..k {
        s += &format!(
            "[[flow]]\nname = \"f{i}\"\nfrom = \"h1\"\nto = \"h2\"\nsize = 500\nrate = \"10pps\"\npattern = \"poisson\"\n"
        );
    }
    s
}

fn main() {
    println!("heap per simulated flow (peak while loading, building and running; scenario text excluded)");
    let mut prev: Option<(f64, f64)> = None;
    for k in [1_000, 10_000, 100_000] {
        let text = flows(k);
        let base = A.current_usage();
        A.reset_peak_usage();
        let t = Instant::now();
        let sc = qosnet_scenario::load_str("flows", &text, &[]).expect("flows load");
        let load_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut sim = qosnet_sim::Sim::new(sc).expect("builds");
        let r = sim.run();
        let run_s = t.elapsed().as_secs_f64();
        let peak = (A.peak_usage() - base) as f64;
        let received: u64 = r.flows.iter().map(|f| f.received).sum();
        drop(sim);
        let per = peak / k as f64;
        let ratio = prev
            .map(|(p, l)| {
                format!(
                    ", x{:.1} bytes and x{:.1} load time for 10x the flows",
                    peak / p,
                    load_s / l
                )
            })
            .unwrap_or_default();
        println!(
            "  K = {k:>6}: {per:>6.0} B/flow ({:.1} MB peak), load {:>7.1} ms, run {:>7.1} ms, {received} packets measured{ratio}",
            peak / 1e6,
            load_s * 1e3,
            run_s * 1e3
        );
        prev = Some((peak, load_s));
    }
}
