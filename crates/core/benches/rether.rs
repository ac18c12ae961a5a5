//! Criterion benches: RETHER token handling per hop in the sans-IO core —
//! what one station spends on a token that visits it with nothing to send
//! (the paper's Table 2 case, 247 µs on a 66 MHz i486 with its driver and
//! ISA copies; this is the protocol processing alone, item 4 there:
//! 15 µs). Parsing and building a token frame are measured beside it.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use qosnet_core::node::{Node, TxStatus};
use qosnet_core::rether::wire::{self, Frame, NodeEntry, RtEntry, Token, TokenId, GROUP_MAC, NRT_PHASE};
use qosnet_core::rether::{Boot, RetherStation, SessionId, StationConfig};
use qosnet_core::wire::MacAddr;
use qosnet_core::{Duration, Instant, Meta};

/// A token from station 1 to station 2 for an NRT visit, on a segment of
/// `nodes` stations with `sessions` RT sessions.
fn token(nodes: u16, sessions: u16) -> Token {
    let trt = Duration(33_333_333);
    Token {
        sender: 1,
        to: 2,
        id: TokenId { epoch: 1, origin: 1 },
        seq: 0,
        cycle: 1,
        residual: trt,
        trt,
        t_nrt: Duration::from_millis(3),
        flags: 0,
        rt_next: NRT_PHASE,
        nrt_resume: 1,
        nodes: (1..=nodes).map(|id| NodeEntry { id, alive: true }).collect(),
        sessions: (0..sessions)
            .map(|k| RtEntry {
                session: SessionId {
                    sender: 3 + k % (nodes - 2),
                    num: k,
                },
                receiver: 1,
                bytes_per_trt: 1000,
                tht: Duration::from_millis(2),
                start_cycle: 0,
            })
            .collect(),
    }
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("rether_token");
    g.measurement_time(std::time::Duration::from_secs(2));
    for (nodes, sessions) in [(5u16, 2u16), (20, 10)] {
        let t = token(nodes, sessions);
        let frame = wire::build(MacAddr::local(1), GROUP_MAC, &Frame::Token(t.clone())).unwrap();
        g.bench_function(format!("parse_{nodes}n_{sessions}s"), |b| {
            b.iter(|| black_box(wire::parse(black_box(&frame)).is_ok()))
        });
        g.bench_function(format!("build_{nodes}n_{sessions}s"), |b| {
            b.iter(|| {
                black_box(wire::build(
                    MacAddr::local(2),
                    GROUP_MAC,
                    &Frame::Token(t.clone()),
                ))
            })
        });
        // A whole hop at station 2: the token arrives, the idle NRT visit
        // charges t_token, the station builds its pass, hands it to the
        // NIC and starts its acknowledgement timer on the transmit-done.
        g.bench_function(format!("hop_{nodes}n_{sessions}s"), |b| {
            let mut cfg = StationConfig::new("s2", 2, MacAddr::local(2), (1..=nodes).collect());
            cfg.boot = Boot::Csma;
            let mut st = RetherStation::new(cfg).unwrap();
            let mut seq = 0u32;
            let mut now = Instant(1_000_000);
            b.iter(|| {
                // Station 2 passes seq + 1; the next token it gets is newer.
                seq += 2;
                now += Duration::from_micros(300);
                let mut f = frame.clone();
                f[14 + 12..14 + 16].copy_from_slice(&seq.to_be_bytes());
                st.handle_frame(now, 0, f, Meta::default());
                let tx = st.poll_transmit(now).expect("the pass");
                st.handle_tx_done(now, 0, TxStatus::Sent { collisions: 0 });
                black_box(tx);
            })
        });
    }
    g.finish();
}

criterion_group!(rether, benches);
criterion_main!(rether);
