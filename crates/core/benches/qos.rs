//! DiffServ building blocks, cost per packet: meters (token bucket,
//! srTCM RFC 2697, trTCM RFC 2698) and fair schedulers (WFQ/PGPS,
//! WF²Q+, DRR) in steady state with 10, 1 000 and 100 000 backlogged flows:
//! each iteration dequeues one packet and enqueues one (the same packet,
//! back to its flow, so no allocation is measured and every flow stays
//! backlogged). Also prints scheduler state per flow, from type sizes.

use std::hint::black_box;
use std::time::Duration as StdDuration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use qosnet_core::meter::{Meter, SrTcm, TokenBucket, TrTcm};
use qosnet_core::sched::{Drr, FairConf, QueueConf, Scheduler, Wf2q, Wfq};
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

fn make(name: &str) -> Box<dyn Scheduler> {
    match name {
        "wfq" => Box::new(Wfq::new(conf(), LINK_BPS).unwrap()),
        "wf2q" => Box::new(Wf2q::new(conf()).unwrap()),
        // Quantum of one maximum packet: O(1) per packet.
        _ => Box::new(Drr::new(FairConf::per_flow(QueueConf::new(1_500, 16, 16 * 1_500))).unwrap()),
    }
}

fn schedulers(c: &mut Criterion) {
    println!(
        "state per flow (bytes, queued packets excluded): wfq {}, wf2q {}, drr {}",
        Wfq::bytes_per_flow(),
        Wf2q::bytes_per_flow(),
        Drr::bytes_per_flow()
    );
    let mut g = c.benchmark_group("sched_enq_deq");
    for &flows in &[10u32, 1_000, 100_000] {
        for name in ["wfq", "wf2q", "drr"] {
            let mut s = make(name);
            fill(s.as_mut(), flows);
            let mut now = 0u64;
            g.bench_with_input(BenchmarkId::new(name, flows), &flows, |b, _| {
                b.iter(|| {
                    now += TX_NS;
                    let p = s.dequeue(Instant(now)).unwrap();
                    s.enqueue(black_box(p), Instant(now)).unwrap();
                })
            });
            assert_eq!(s.len(), 2 * flows as usize, "{name}: flows stayed backlogged");
        }
    }
    g.finish();
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
