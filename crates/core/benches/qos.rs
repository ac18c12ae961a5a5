//! DiffServ building blocks, cost per packet: meters (token bucket,
//! srTCM RFC 2697, trTCM RFC 2698) and fair schedulers (WFQ/PGPS,
//! WF²Q+, DRR) in steady state with 10, 1 000 and 100 000 backlogged flows:
//! each iteration dequeues one packet and enqueues one (the same packet,
//! back to its flow, so no allocation is measured and every flow stays
//! backlogged). FIFO runs the same loop as the baseline of the same run:
//! after the criterion groups, all schedulers are timed in interleaved
//! rounds and each is reported as a ratio to FIFO and to DRR (median and
//! spread), with the heap bytes per flow measured by a counting allocator;
//! see [`paired`].

use std::hint::black_box;
use std::path::Path;
use std::time::Duration as StdDuration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use qosnet_core::meter::{Meter, SrTcm, TokenBucket, TrTcm};
use qosnet_core::sched::{Drr, FairConf, Fifo, QueueConf, Scheduler, Wf2q, Wfq};
use qosnet_core::{Instant, Meta, Packet};

const LINK_BPS: u64 = 10_000_000_000;
const PKT: usize = 100;
/// Link time of one packet at 10 Gbit/s.
const TX_NS: u64 = (PKT as u64 * 8 * 1_000_000_000) / LINK_BPS;

fn meters(c: &mut Criterion) {
    let mut g = c.benchmark_group("meter");
    // 100 Mbit/s profiles fed 1000-byte packets at ~160 Mbit/s, so all
    // colours (and both branches of each test) occur.
    fn run<M: Meter>(
        g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        name: &str,
        mut m: M,
    ) {
        let mut t = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                t += 50_000;
                black_box(m.meter(Instant(t), black_box(1_000), None))
            })
        });
    }
    run(
        &mut g,
        "token_bucket",
        TokenBucket::new(100_000_000, 15_000).unwrap(),
    );
    run(&mut g, "srtcm", SrTcm::new(100_000_000, 15_000, 30_000).unwrap());
    run(
        &mut g,
        "trtcm",
        TrTcm::new(150_000_000, 30_000, 100_000_000, 15_000).unwrap(),
    );
    g.finish();
}

fn conf() -> FairConf {
    FairConf::per_flow(QueueConf::new(1, 16, 16 * 1_500))
}

/// `flows` flows with two packets each.
fn fill(s: &mut dyn Scheduler, flows: u32) {
    for round in 0..2u64 {
        for f in 0..flows {
            let meta = Meta {
                uid: round * flows as u64 + f as u64,
                flow: f,
                ..Meta::default()
            };
            s.enqueue(Packet::new(vec![0; PKT], meta), Instant(0)).unwrap();
        }
    }
}

/// Schedulers measured, FIFO first: it is the baseline every other figure
/// is divided by (same packets, same dequeue-then-enqueue loop, no
/// classification or ordering work).
const SCHEDS: [&str; 4] = ["fifo", "wfq", "wf2q", "drr"];

fn make(name: &str) -> Box<dyn Scheduler> {
    match name {
        "fifo" => Box::new(Fifo::new(usize::MAX, usize::MAX)),
        "wfq" => Box::new(Wfq::new(conf(), LINK_BPS).unwrap()),
        "wf2q" => Box::new(Wf2q::new(conf(), LINK_BPS).unwrap()),
        // Quantum of one maximum packet: O(1) per packet.
        _ => Box::new(Drr::new(FairConf::per_flow(QueueConf::new(1_500, 16, 16 * 1_500))).unwrap()),
    }
}

/// Live heap bytes, so memory per flow is measured (queue buffers, heaps,
/// index tables and all) rather than only computed from type sizes
/// (`peak_alloc` counts them: no allocator of our own, so no `unsafe`).
#[global_allocator]
static ALLOC: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// A filled scheduler and the heap bytes it holds beyond its packets'
/// payloads (the `Packet` structs themselves, in the queues, are counted).
fn filled(name: &str, flows: u32) -> (Box<dyn Scheduler>, usize) {
    let before = ALLOC.current_usage();
    let mut s = make(name);
    fill(s.as_mut(), flows);
    let bytes = ALLOC.current_usage() - before - 2 * flows as usize * PKT;
    (s, bytes)
}

/// One steady-state step: the head packet leaves and goes back to its
/// flow's tail, so every flow stays backlogged and nothing is allocated.
#[inline(always)]
fn step(s: &mut dyn Scheduler, now: &mut u64) {
    *now += TX_NS;
    let p = s.dequeue(Instant(*now)).unwrap();
    s.enqueue(black_box(p), Instant(*now)).unwrap();
}

/// The first positional argument, as criterion reads it (a substring of
/// the benchmark ids to run).
fn filter() -> Option<String> {
    std::env::args().skip(1).find(|a| !a.starts_with('-'))
}

fn schedulers(c: &mut Criterion) {
    println!(
        "state per flow from type sizes (bytes, queued packets excluded): wfq {}, wf2q {}, drr {}",
        Wfq::bytes_per_flow(),
        Wf2q::bytes_per_flow(),
        Drr::bytes_per_flow()
    );
    let mut g = c.benchmark_group("sched_enq_deq");
    for &flows in &[10u32, 1_000, 100_000] {
        for name in SCHEDS {
            let (mut s, _) = filled(name, flows);
            let mut now = 0u64;
            g.bench_with_input(BenchmarkId::new(name, flows), &flows, |b, _| {
                b.iter(|| step(s.as_mut(), &mut now))
            });
            assert_eq!(s.len(), 2 * flows as usize, "{name}: flows stayed backlogged");
        }
    }
    g.finish();
    paired();
}

/// Baseline in the same run: for each flow count, every scheduler (FIFO
/// included) is timed in turn, round after round, so load from other
/// processes on a shared machine hits them alike; each round's figure is
/// divided by the FIFO figure of the same round. Prints medians with the
/// spread (min..max over rounds) and writes them to
/// `target/criterion/sched_enq_deq_vs_fifo.csv`.
fn paired() {
    const ROUNDS: usize = 15;
    const STEPS: u32 = 200_000;
    let f = filter();
    let wanted = |name: &str, flows: u32| {
        name == "fifo"
            || name == "drr"
            || f.as_deref()
                .is_none_or(|f| format!("sched_enq_deq/{name}/{flows}").contains(f))
    };
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    let mut csv = String::from(
        "flows,sched,ns_per_pkt_median,ns_min,ns_max,ratio_to_fifo_median,ratio_min,ratio_max,ratio_to_drr_median,drr_ratio_min,drr_ratio_max,heap_bytes_per_flow\n",
    );
    println!("\nenqueue+dequeue vs FIFO, {ROUNDS} interleaved rounds of {STEPS} packets: median [min..max]");
    for &flows in &[10u32, 1_000, 100_000] {
        let names: Vec<&str> = SCHEDS.iter().copied().filter(|n| wanted(n, flows)).collect();
        if names.iter().all(|&n| n == "fifo" || n == "drr")
            && f.as_deref().is_some_and(|f| !f.contains("drr"))
        {
            continue;
        }
        let mut runs: Vec<(Box<dyn Scheduler>, usize, u64)> = names
            .iter()
            .map(|n| {
                let (s, b) = filled(n, flows);
                (s, b, 0)
            })
            .collect();
        let mut ns = vec![Vec::new(); names.len()];
        for _ in 0..ROUNDS + 1 {
            for (k, (s, _, now)) in runs.iter_mut().enumerate() {
                let t = std::time::Instant::now();
                for _ in 0..STEPS {
                    step(s.as_mut(), now);
                }
                ns[k].push(t.elapsed().as_nanos() as f64 / STEPS as f64);
            }
        }
        // The first round warms caches and grows nothing; drop it.
        for v in &mut ns {
            v.remove(0);
        }
        // DRR, the O(1) fair scheduler, is the second baseline (the goal
        // for WFQ and WF²Q+ is a small multiple of it), by round too.
        let drr = names.iter().position(|&n| n == "drr");
        for k in 0..names.len() {
            let mut ratio: Vec<f64> = ns[k].iter().zip(&ns[0]).map(|(a, b)| a / b).collect();
            let (m, lo, hi) = median(&mut ns[k].clone());
            let (rm, rlo, rhi) = median(&mut ratio);
            let (dm, dlo, dhi) = match drr {
                Some(d) => median(&mut ns[k].iter().zip(&ns[d]).map(|(a, b)| a / b).collect()),
                None => (f64::NAN, f64::NAN, f64::NAN),
            };
            let per_flow = runs[k].1 as f64 / flows as f64;
            println!(
                "  {flows:>7} flows  {:<5} {m:7.1} ns/pkt [{lo:.1}..{hi:.1}]  x{rm:.2} fifo [{rlo:.2}..{rhi:.2}]  x{dm:.2} drr [{dlo:.2}..{dhi:.2}]  {per_flow:.0} B/flow",
                names[k]
            );
            csv += &format!(
                "{flows},{},{m:.2},{lo:.2},{hi:.2},{rm:.3},{rlo:.3},{rhi:.3},{dm:.3},{dlo:.3},{dhi:.3},{per_flow:.1}\n",
                names[k]
            );
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join("sched_enq_deq_vs_fifo.csv"), csv);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(StdDuration::from_millis(500))
        .measurement_time(StdDuration::from_millis(1_500))
        .sample_size(20);
    targets = meters, schedulers
}
criterion_main!(benches);
