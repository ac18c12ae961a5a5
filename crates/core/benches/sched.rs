//! Criterion benches: FIFO and TDP wheel enqueue + dequeue per packet.
//! FIFO is the baseline measured in the same run; compare the ratio.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use qosnet_core::sched::{Fifo, Scheduler};
use qosnet_core::tdp::{Ctr, StampMode, TdpWheel};
use qosnet_core::wire::{build_udp, MacAddr, UdpSpec};
use qosnet_core::{Duration, Framing, Instant, Meta, Packet};

fn frame() -> Vec<u8> {
    let spec = UdpSpec {
        src_mac: MacAddr::local(1),
        dst_mac: MacAddr::local(2),
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.0.1.1".parse().unwrap(),
        sport: 1,
        dport: 2,
        tos: 0,
        ttl: 64,
        ident: 0,
    };
    build_udp(&spec, 482, &[])
}

fn benches(c: &mut Criterion) {
    let data = frame();
    let mut g = c.benchmark_group("sched_enqueue_dequeue");
    g.measurement_time(std::time::Duration::from_secs(2));
    g.bench_function("fifo", |b| {
        let mut q = Fifo::new(1024, 1 << 20);
        let t = Instant(0);
        b.iter(|| {
            let p = Packet::new(data.clone(), Meta::default());
            let _ = q.enqueue(p, t);
            black_box(q.dequeue(t));
        })
    });
    g.bench_function("tdp_wheel", |b| {
        // 100 Mb/s, 250 us TFs, d = 4; each packet goes into the next TF and
        // is sent when time reaches it: the wheel turns once per packet.
        let ctr = Ctr::new(Duration::from_micros(250), 60, 1).unwrap();
        let be = Box::new(Fifo::new(1024, 1 << 20));
        let mut w = TdpWheel::new(ctr, 4, 100_000_000, Framing::default(), be, StampMode::Tdp, None).unwrap();
        let mut tf = 10u64;
        b.iter(|| {
            let now = ctr.tf_start(tf);
            let meta = Meta {
                tdp_tf: Some(tf + 1),
                ..Meta::default()
            };
            let _ = w.enqueue(Packet::new(data.clone(), meta), now);
            tf += 1;
            black_box(w.dequeue(ctr.tf_start(tf)));
        })
    });
    g.finish();
}

criterion_group!(sched, benches);
criterion_main!(sched);
