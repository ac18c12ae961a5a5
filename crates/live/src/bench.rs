//! `qosnet bench forward`: packets per second through one router on the
//! identical namespace topology `h1 — r — h2`, three ways in one run —
//! Linux kernel IP forwarding, a qosnet router with FIFO ports, and a
//! qosnet router with TDP wheels — so the ratios are measured on the same
//! machine in the same minute.
//!
//! The sender in `h1` blasts UDP datagrams to `h2` with `sendmmsg` as fast
//! as the kernel takes them; the receiver in `h2` counts them with
//! `recvmmsg`. The figure is datagrams received per second over the
//! measured interval (after a short warm-up). The links are declared at
//! 100 Gb/s so qosnet's pacing never limits; qosnet's driver busy-polls and
//! sends through a TX ring flushed once per batch.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use qosnet_core::time::Duration;
use serde::Serialize;

use crate::afpacket::{AfPacketConfig, TxMode};
use crate::driver::DriverConfig;
use crate::lab::{Lab, LabSpec, NodeKind};
use crate::labrun::{LiveLab, LiveOptions};
use crate::netns;

/// Settings of a forwarding benchmark.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub prefix: String,
    /// Measured time per configuration and round.
    pub duration: Duration,
    /// UDP payload bytes (18: 64-byte Ethernet frames with FCS).
    pub payload: usize,
    /// Rounds of (kernel, FIFO, TDP), to see the spread.
    pub rounds: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            prefix: "qnb".into(),
            duration: Duration::from_secs(2),
            payload: 18,
            rounds: 2,
        }
    }
}

/// One measurement.
#[derive(Clone, Debug, Serialize)]
pub struct BenchPoint {
    pub router: String,
    pub round: usize,
    pub sent_pps: f64,
    pub received_pps: f64,
}

fn scenario(sched: &str) -> String {
    format!(
        r#"
[scenario]
name = "bench-{sched}"
duration = "1s"
[tdp]
tf = "250us"
tfs_per_tc = 10
[defaults.router]
scheduler = "{sched}"
queue_packets = 4096
[defaults.link]
capacity = "100Gb/s"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "r"
kind = "router"
[[node]]
name = "h2"
kind = "host"
[[link]]
a = "h1"
b = "r"
[[link]]
a = "r"
b = "h2"
"#
    )
}

const H1: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const H2: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
const PORT: u16 = 9000;

/// Blast from `h1` and count at `h2` for `warm + dur`; returns (sent pps,
/// received pps) over `dur`.
fn blast(h1: &str, h2: &str, payload: usize, warm: Duration, dur: Duration) -> Result<(f64, f64), String> {
    let rx = netns::run_in(h2, || UdpSocket::bind(SocketAddrV4::new(H2, PORT)))
        .and_then(|r| r)
        .map_err(|e| format!("receiver: {e}"))?;
    rx.set_nonblocking(true).map_err(|e| e.to_string())?;
    let big = 8 << 20;
    // SAFETY: setsockopt with a live c_int; failure only leaves the default.
    unsafe {
        libc::setsockopt(
            rx.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &big as *const i32 as *const libc::c_void,
            4,
        )
    };
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let (s2, n2) = (stop.clone(), sent.clone());
    let h1 = h1.to_string();
    let tx = std::thread::spawn(move || -> Result<(), String> {
        let sock = netns::run_in(&h1, || UdpSocket::bind(SocketAddrV4::new(H1, 0)))
            .and_then(|r| r)
            .map_err(|e| format!("sender: {e}"))?;
        sock.connect(SocketAddrV4::new(H2, PORT))
            .map_err(|e| e.to_string())?;
        let buf = vec![0x5au8; payload];
        const B: usize = 64;
        let mut iov: Vec<libc::iovec> = (0..B)
            .map(|_| libc::iovec {
                iov_base: buf.as_ptr() as *mut libc::c_void,
                iov_len: buf.len(),
            })
            .collect();
        // SAFETY: mmsghdr is plain data; zeroed is valid before filling.
        let mut msgs: Vec<libc::mmsghdr> = (0..B).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        while !s2.load(Ordering::Relaxed) {
            // SAFETY: msgs and the iovecs they point to live across the
            // call; the socket is connected so no addresses are needed.
            let r = unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs.as_mut_ptr(), B as u32, 0) };
            if r > 0 {
                n2.fetch_add(r as u64, Ordering::Relaxed);
            } else {
                std::thread::yield_now();
            }
        }
        Ok(())
    });
    const B: usize = 64;
    let mut bufs = vec![[0u8; 64]; B];
    let mut iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: as above.
    let mut msgs: Vec<libc::mmsghdr> = (0..B).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    let t0 = std::time::Instant::now();
    let warm = std::time::Duration::from_nanos(warm.as_nanos());
    let end = warm + std::time::Duration::from_nanos(dur.as_nanos());
    let (mut got, mut got0, mut sent0) = (0u64, None, 0u64);
    loop {
        let el = t0.elapsed();
        if got0.is_none() && el >= warm {
            got0 = Some(got);
            sent0 = sent.load(Ordering::Relaxed);
        }
        if el >= end {
            break;
        }
        // SAFETY: msgs and buffers live across the call.
        let r = unsafe {
            libc::recvmmsg(
                rx.as_raw_fd(),
                msgs.as_mut_ptr(),
                B as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r > 0 {
            got += r as u64;
        } else {
            let _ = crate::device::wait_readable(&[rx.as_raw_fd()], Some(Duration::from_millis(1)));
        }
    }
    let sent1 = sent.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    tx.join().map_err(|_| "sender panicked")??;
    let secs = dur.as_secs_f64();
    Ok((
        (sent1 - sent0) as f64 / secs,
        (got - got0.unwrap_or(0)) as f64 / secs,
    ))
}

/// Run the benchmark; one point per router kind and round.
pub fn forward(cfg: &BenchConfig, stop: Arc<AtomicBool>) -> Result<Vec<BenchPoint>, String> {
    let warm = Duration::from_millis(300);
    let mut out = Vec::new();
    for round in 0..cfg.rounds {
        for kind in ["kernel", "fifo", "tdp"] {
            if stop.load(Ordering::Relaxed) {
                return Err("interrupted".into());
            }
            let (h1, h2) = (format!("{}-h1", cfg.prefix), format!("{}-h2", cfg.prefix));
            let (sent, got) = if kind == "kernel" {
                let spec = LabSpec::new(&cfg.prefix)
                    .node("h1", NodeKind::Host)
                    .node("r", NodeKind::KernelRouter)
                    .node("h2", NodeKind::Host)
                    .link("h1", "10.0.0.1/24", "r", "10.0.0.2/24")
                    .link("r", "10.0.1.1/24", "h2", "10.0.1.2/24");
                let lab = Lab::up(&spec).map_err(|e| e.to_string())?;
                let r = blast(&h1, &h2, cfg.payload, warm, cfg.duration);
                lab.down().map_err(|e| e.to_string())?;
                r?
            } else {
                let sc = qosnet_scenario::load_str(&format!("<bench {kind}>"), &scenario(kind), &[])
                    .map_err(|e| e.to_string())?;
                let o = LiveOptions {
                    processes: None,
                    metrics: None,
                    prefix: cfg.prefix.clone(),
                    driver: DriverConfig {
                        busy_poll: std::env::var("QOSNET_BENCH_BUSY").is_ok(),
                        batch: 256,
                        ..DriverConfig::default()
                    },
                    afpacket: AfPacketConfig {
                        tx_mode: TxMode::Ring,
                        rx_frames: 8192,
                        tx_frames: 1024,
                        ..AfPacketConfig::default()
                    },
                    timer_noise: false,
                    verbose: false,
                    emulate_cpu: false,
                    emulate_wire: false,
                    kills: Vec::new(),
                };
                let live = LiveLab::start(&sc, &o, stop.clone(), Vec::new(), None)?;
                std::thread::sleep(std::time::Duration::from_millis(100));
                let r = blast(&h1, &h2, cfg.payload, warm, cfg.duration);
                live.finish().map_err(|e| e.to_string())?;
                r?
            };
            out.push(BenchPoint {
                router: kind.into(),
                round,
                sent_pps: sent,
                received_pps: got,
            });
        }
    }
    Ok(out)
}
