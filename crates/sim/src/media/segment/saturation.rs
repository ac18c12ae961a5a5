//! N saturated stations on one segment: throughput and fairness against
//! the Metcalfe–Boggs efficiency model.
//!
//! Every station always has a frame: it hands its NIC the next one the
//! instant `TxDone` reports the last (as a host with a full transmit ring
//! would). Measured over a window after a warm-up:
//! - **efficiency**: the fraction of the window the bus spent on frames sent
//!   whole, each charged its full cost on the medium — preamble, padded
//!   frame, FCS, carrier extension and the inter-frame gap that must follow
//!   it (so one station alone measures 1.0, the model's N = 1 value);
//! - **Jain's fairness index** of the frames each station sent,
//!   `(Σx)² / (N·Σx²)`: 1 when all send equally, 1/N when one takes all
//!   (Jain, Chiu & Hawe 1984);
//! - collisions per frame sent, excessive-collision drops.
//!
//! The model (Metcalfe & Boggs, "Ethernet: distributed packet switching
//! for local computer networks", CACM 19(7), 1976, §6; discussed against
//! measurements in Boggs, Mogul & Kent, "Measured capacity of an Ethernet:
//! myths and reality", SIGCOMM 1988): with N stations each transmitting in
//! a contention slot with probability 1/N, a slot is acquired with
//! probability `A = (1 − 1/N)^(N−1)`, the mean number of wasted slots is
//! `W = (1 − A)/A`, and the efficiency is `P / (P + W·T)` for frame time
//! `P` and slot `T`. Here `P` is the same full frame cost as measured
//! (with the IFG) and `T` is the 802.3 slot. Real binary exponential
//! backoff is not the model's ideal `p = 1/N`, and a collision on a short
//! bus costs a fragment (96 bits) plus a gap rather than a whole slot,
//! while backoff waits cost whole slots — so expect agreement where frames
//! are long compared with the slot, and only qualitative agreement for
//! minimum-size frames.

use qosnet_core::node::TxStatus;
use qosnet_core::{Duration, Instant, Meta, Packet};

use super::{SegOutput, Segment, SegmentConfig, TraceKind};

/// One saturation experiment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saturation {
    /// Line rate, bit/s.
    pub rate_bps: u64,
    /// Frame size including FCS, bytes (64..=1518 on Ethernet).
    pub frame_bytes: usize,
    /// Number of stations.
    pub stations: usize,
    /// Propagation time from one end of the bus to the other, ns; stations
    /// are spread evenly along it.
    pub span_ns: u64,
    /// Time before measuring (the first collisions of a cold start).
    pub warmup: Duration,
    /// Measurement window.
    pub duration: Duration,
    pub seed: u64,
}

impl Saturation {
    /// 10 Mb/s Ethernet, a 1 km coax segment (~5 µs end to end at 0.77 c),
    /// 0.2 s warm-up and 5 s window.
    pub fn ethernet10(stations: usize, frame_bytes: usize) -> Self {
        Saturation {
            rate_bps: 10_000_000,
            frame_bytes,
            stations,
            span_ns: 5_000,
            warmup: Duration::from_millis(200),
            duration: Duration::from_secs(5),
            seed: 1,
        }
    }
}

/// The result of one experiment.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub stations: usize,
    pub frame_bytes: usize,
    /// Measured efficiency (see the module docs).
    pub efficiency: f64,
    /// Metcalfe–Boggs efficiency for the same N, frame cost and slot.
    pub model: f64,
    /// Jain's index of the frames sent per station.
    pub jain: f64,
    /// Collisions (aborted attempts, all stations) per frame sent whole.
    pub collisions_per_frame: f64,
    /// Frames sent whole in the window.
    pub frames: u64,
    /// Frames given up after 16 attempts in the window.
    pub excessive: u64,
    /// Frame bytes (with FCS) sent whole per second.
    pub throughput_bps: f64,
    /// Frames delivered intact to other stations in the window (each frame
    /// sent whole reaches N − 1 of them on a bus within the slot).
    pub deliveries: u64,
}

/// Metcalfe–Boggs efficiency `P / (P + W·T)`, `W = (1 − A)/A`,
/// `A = (1 − 1/N)^(N−1)` (1 for N ≤ 1).
pub fn metcalfe_boggs(stations: usize, frame: Duration, slot: Duration) -> f64 {
    if stations <= 1 {
        return 1.0;
    }
    let n = stations as f64;
    let a = (1.0 - 1.0 / n).powf(n - 1.0);
    let w = (1.0 - a) / a;
    let p = frame.0 as f64;
    p / (p + w * slot.0 as f64)
}

/// Jain's fairness index of `xs` (1 for an empty or all-zero list).
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if sq == 0.0 {
        1.0
    } else {
        sum * sum / (xs.len() as f64 * sq)
    }
}

/// Run one saturation experiment.
pub fn saturation_run(exp: &Saturation) -> Result<Row, String> {
    if exp.stations == 0 {
        return Err("saturation: need at least one station".into());
    }
    if exp.frame_bytes < 64 {
        return Err(format!(
            "saturation: frame of {} bytes is below the 64-byte minimum",
            exp.frame_bytes
        ));
    }
    let n = exp.stations;
    let positions = (0..n)
        .map(|i| {
            if n == 1 {
                0
            } else {
                exp.span_ns * i as u64 / (n as u64 - 1)
            }
        })
        .collect();
    let cfg = SegmentConfig {
        seed: exp.seed,
        ..SegmentConfig::ethernet(exp.rate_bps, positions)
    };
    let fcs = cfg.framing.fcs as usize;
    let mut seg = Segment::new(cfg)?;
    let len = exp.frame_bytes - fcs;
    let cost = seg.frame_time(len) + seg.ifg();
    let model = metcalfe_boggs(n, cost, seg.slot_time());

    let mut uid = 0u64;
    let mut frame = |s: usize| {
        uid += 1;
        let mut data = vec![0u8; len];
        data[..6].fill(0xff);
        data[6..12].copy_from_slice(&[0x02, 0, 0, 0, (s >> 8) as u8, s as u8]);
        // IEEE 802 local experimental EtherType.
        data[12..14].copy_from_slice(&[0x88, 0xb5]);
        Packet::new(
            data,
            Meta {
                uid,
                ..Meta::default()
            },
        )
    };
    for s in 0..n {
        seg.handle_send(Instant::ZERO, s, frame(s))
            .map_err(|r| format!("saturation: refused {:?}", r.reason))?;
    }
    let from = Instant::ZERO + exp.warmup;
    let to = from + exp.duration;
    let mut sent = vec![0u64; n];
    let mut base = None;
    let mut deliveries = 0u64;
    let mut done = Vec::new();
    while let Some(t) = seg.poll_timeout() {
        if t > to {
            break;
        }
        if base.is_none() && t > from {
            base = Some(seg.stats().clone());
        }
        seg.handle_timeout(t);
        while let Some(out) = seg.poll_output() {
            match out {
                SegOutput::TxDone {
                    station, status, at, ..
                } => {
                    if at > from && matches!(status, TxStatus::Sent { .. }) {
                        sent[station] += 1;
                    }
                    done.push((station, at));
                }
                SegOutput::Deliver { at, .. } => deliveries += u64::from(at > from),
            }
        }
        for (s, at) in done.drain(..) {
            seg.handle_send(at, s, frame(s))
                .map_err(|r| format!("saturation: refused {:?}", r.reason))?;
        }
    }
    let base = base.unwrap_or_else(|| seg.stats().clone());
    let end = seg.stats();
    let delta = |f: fn(&super::StationStats) -> u64| -> u64 {
        end.stations
            .iter()
            .zip(&base.stations)
            .map(|(e, b)| f(e) - f(b))
            .sum()
    };
    let frames: u64 = sent.iter().sum();
    let collisions = delta(|s| s.collisions);
    let excessive = delta(|s| s.excessive_collisions);
    let secs = exp.duration.as_secs_f64();
    Ok(Row {
        stations: n,
        frame_bytes: exp.frame_bytes,
        efficiency: frames as f64 * cost.0 as f64 / exp.duration.0 as f64,
        model,
        jain: jain_index(&sent.iter().map(|&x| x as f64).collect::<Vec<_>>()),
        collisions_per_frame: if frames == 0 {
            f64::INFINITY
        } else {
            collisions as f64 / frames as f64
        },
        frames,
        excessive,
        throughput_bps: frames as f64 * exp.frame_bytes as f64 * 8.0 / secs,
        deliveries,
    })
}

/// [`saturation_run`] for each station count in `stations`, other
/// parameters from `template`.
pub fn saturation_sweep(template: &Saturation, stations: &[usize]) -> Result<Vec<Row>, String> {
    stations
        .iter()
        .map(|&n| {
            saturation_run(&Saturation {
                stations: n,
                ..template.clone()
            })
        })
        .collect()
}

/// Backoff races between two saturated stations, tallied by the loser's
/// collision count k (see [`capture_races`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Races {
    /// The station that sent the last frame wins again.
    pub won: u64,
    /// The other station wins.
    pub lost: u64,
    /// They collide again.
    pub tied: u64,
}

impl Races {
    pub fn n(&self) -> u64 {
        self.won + self.lost + self.tied
    }
}

/// The capture effect (Ramakrishnan & Yang 1994): two saturated stations
/// on a segment built from `cfg` (two stations). The winner W of a backoff
/// race sends its frame and hands the next one; when the loser L's backoff
/// ends it defers to W's frame, and at its end both go (1-persistence) and
/// collide — W's new frame for the first time (backoff r_W ∈ {0, 1}), L's
/// frame for the k-th (r_L uniform in [0, 2^k)). W wins again iff
/// r_W < r_L: P = (2M − 3)/(2M) with M = 2^min(k, 10), **5/8** for k = 2; L
/// wins with probability 1/(2M), and they collide again with probability
/// 1/M. Runs until `min_k2` races at k = 2 and `min_k3` at k = 3 were seen,
/// or `limit` of simulated time passed; returns the tally by k.
pub fn capture_races(
    cfg: SegmentConfig,
    frame_bytes: usize,
    min_k2: u64,
    min_k3: u64,
    limit: Duration,
) -> Result<std::collections::BTreeMap<u32, Races>, String> {
    use std::collections::BTreeMap;
    let mut seg = Segment::new(cfg)?;
    seg.enable_trace(1 << 16);
    let pkt = |uid: u64| {
        Packet::new(
            vec![0u8; frame_bytes],
            Meta {
                uid,
                ..Meta::default()
            },
        )
    };
    let mut uid = 0;
    for s in 0..2 {
        uid += 1;
        seg.handle_send(Instant::ZERO, s, pkt(uid))
            .map_err(|r| format!("{:?}", r.reason))?;
    }
    let mut races: BTreeMap<u32, Races> = BTreeMap::new();
    let enough = |r: &BTreeMap<u32, Races>| {
        let n = |k| r.get(&k).map_or(0, Races::n);
        n(2) >= min_k2 && n(3) >= min_k3
    };
    // Whether each station's last frame was sent (rather than given up).
    let mut won_last = [false; 2];
    let mut unpaired: Option<(usize, u32)> = None;
    let mut race: Option<(usize, u32)> = None;
    let limit = Instant::ZERO + limit;
    while let Some(t) = seg.poll_timeout() {
        if t >= limit || enough(&races) {
            break;
        }
        seg.handle_timeout(t);
        while let Some(o) = seg.poll_output() {
            if let SegOutput::TxDone {
                station, at, status, ..
            } = o
            {
                won_last[station] = matches!(status, TxStatus::Sent { .. });
                uid += 1;
                seg.handle_send(at, station, pkt(uid))
                    .map_err(|r| format!("{:?}", r.reason))?;
            }
        }
        while let Some(tr) = seg.poll_trace() {
            match tr.kind {
                TraceKind::End { aborted: false } => {
                    if let Some((w, k)) = race.take() {
                        let r = races.entry(k).or_default();
                        if tr.station == w {
                            r.won += 1;
                        } else {
                            r.lost += 1;
                        }
                    }
                }
                TraceKind::Collision { collisions, .. } => {
                    if let Some((_, k)) = race.take() {
                        races.entry(k).or_default().tied += 1;
                    }
                    match unpaired.take() {
                        Some((o, oc)) if o != tr.station => {
                            // One collision, as seen by both stations: W's
                            // new frame against L's k-th collision (the 16th
                            // makes L give up: no race).
                            race = match ((o, oc), (tr.station, collisions)) {
                                ((w, 1), (_, k)) | ((_, k), (w, 1))
                                    if (2..16).contains(&k) && won_last[w] =>
                                {
                                    Some((w, k))
                                }
                                _ => None,
                            };
                        }
                        _ => unpaired = Some((tr.station, collisions)),
                    }
                }
                _ => {}
            }
        }
    }
    if seg.stats().trace_dropped > 0 {
        return Err(format!(
            "trace overflowed: {} records lost",
            seg.stats().trace_dropped
        ));
    }
    Ok(races)
}

/// Theory for [`capture_races`] at loser collision count `k`: (winner wins
/// again, loser wins, collide again).
pub fn capture_theory(k: u32) -> (f64, f64, f64) {
    let m = f64::from(1u32 << k.min(10));
    ((2.0 * m - 3.0) / (2.0 * m), 1.0 / (2.0 * m), 1.0 / m)
}
