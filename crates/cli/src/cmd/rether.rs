//! `qosnet rether`: real-time sessions on the stations of a running
//! RETHER lab (the paper's §3.1 interface from the command line):
//! open a session with a reservation and see admission decided (eq. 3's
//! figures on refusal), push a stream into it, receive it with a
//! per-unit sequence and reassembly report, watch the bytes each token
//! cycle carries against the reservation, close it and see it leave the
//! RT set. It talks to each station's control socket
//! (`qosnet_live::rethctl`), found in the lab's run directory by the
//! lab's prefix and the station's name.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use qosnet_live::rethctl::{self, Client, Request};
use serde_json::Value;

/// Which station to talk to.
#[derive(Args, Clone, Debug)]
pub struct Target {
    /// The lab's namespace prefix (`qosnet lab up ... --prefix`).
    #[arg(long, default_value = qosnet_lab::lab::DEFAULT_PREFIX)]
    pub lab: String,
    /// The station (scenario node name).
    #[arg(long)]
    pub station: String,
    /// The station's control socket, instead of finding it by --lab.
    #[arg(long)]
    pub socket: Option<PathBuf>,
}

impl Target {
    fn path_of(&self, station: &str) -> Result<PathBuf> {
        match &self.socket {
            Some(p) if station == self.station => Ok(p.clone()),
            _ => rethctl::find_socket(&self.lab, station).map_err(|e| anyhow!(e)),
        }
    }
    fn connect(&self) -> Result<Client> {
        self.connect_to(&self.station)
    }
    fn connect_to(&self, station: &str) -> Result<Client> {
        Client::connect(&self.path_of(station)?).map_err(|e| anyhow!(e))
    }
}

#[derive(Subcommand)]
pub enum RetherCmd {
    /// A station's mode, token (RT set with each reservation, dead list),
    /// token visits, NRT figures and sessions.
    Status {
        #[command(flatten)]
        t: Target,
        /// Print the station's answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Open a session from --station to --to, open its receiving end at
    /// --to and ask for admission; waits for the token's decision.
    Open {
        #[command(flatten)]
        t: Target,
        /// The receiving station.
        #[arg(long)]
        to: String,
        /// The reservation: bytes per TRT.
        #[arg(long, conflicts_with = "rate")]
        bytes_per_trt: Option<u32>,
        /// The reservation as a rate (e.g. 800kb/s): bytes per TRT =
        /// rate × TRT, rounded up.
        #[arg(long)]
        rate: Option<String>,
        /// Send (and receive) buffers of the session, 1 to the stations'
        /// limit (64).
        #[arg(long, default_value_t = rethctl::DEFAULT_BUFFERS, value_parser = buffers)]
        buffers: usize,
        /// Give up waiting for the admission decision after this long.
        #[arg(long, default_value = "5s")]
        wait: String,
    },
    /// Send on a session: standard input cut into units of the
    /// reservation, or with --generate a stream of numbered units.
    Send {
        #[command(flatten)]
        t: Target,
        /// SENDER.NUMBER, as `open` printed it.
        session: String,
        /// Generate units instead of reading standard input.
        #[arg(long)]
        generate: bool,
        /// Unit size in bytes, at least 1 (default, and at most: the
        /// reservation).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        unit: Option<u32>,
        /// Units per second to generate, a positive number (default: one
        /// per TRT).
        #[arg(long, value_parser = units_per_s, allow_hyphen_values = true)]
        units_per_s: Option<f64>,
        /// Stop generating after this long.
        #[arg(long, default_value = "10s")]
        duration: String,
    },
    /// Receive a session at --station: one line per unit (number, bytes,
    /// complete or the fragments missing, units skipped) and a summary.
    Recv {
        #[command(flatten)]
        t: Target,
        session: String,
        /// Stop after this long.
        #[arg(long, default_value = "10s")]
        duration: String,
        /// Write the units' bytes here (`-`: standard output; the report
        /// then goes to standard error).
        #[arg(long)]
        output: Option<PathBuf>,
        /// Print only the summary.
        #[arg(long)]
        quiet: bool,
    },
    /// Close a session at --station (and its receiving end at --receiver)
    /// and show it leave the RT set.
    Close {
        #[command(flatten)]
        t: Target,
        session: String,
        #[arg(long)]
        receiver: Option<String>,
    },
    /// Per token cycle, the bytes the session sent in its RT slot against
    /// its reservation (watch it held while NRT traffic loads the segment).
    Watch {
        #[command(flatten)]
        t: Target,
        session: String,
        /// Stop after this long.
        #[arg(long, default_value = "10s")]
        duration: String,
        /// One summary line per interval instead of one line per cycle.
        #[arg(long)]
        summary: Option<String>,
    },
    /// Fault injection at --station (§2.4 and the token regeneration
    /// beyond the paper): `lose-sent-token` (its next token frames are
    /// lost on the wire), `corrupt-sent-token` (they go out with a damaged
    /// version byte, refused by every receiver's parser) or
    /// `crash-holding` (the station process aborts the next time it holds
    /// the token). Watch the segment recover with `status`.
    Fault {
        #[command(flatten)]
        t: Target,
        #[arg(value_parser = ["lose-sent-token", "corrupt-sent-token", "crash-holding"])]
        kind: String,
        /// Token frames to lose or corrupt.
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
}

/// Buffers a station takes per session: what its [`StationConfig`]
/// allows (`qosnet_core::rether::StationConfig::max_buffers`), so the flag
/// is refused here, by name, rather than by the station as `BadBuffers`.
fn max_buffers() -> usize {
    qosnet_core::rether::StationConfig::new("", 1, qosnet_core::wire::MacAddr([0; 6]), Vec::new()).max_buffers
}

fn buffers(s: &str) -> Result<usize, String> {
    let max = max_buffers();
    s.parse::<usize>()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("a session has 1 to {max} buffers"))
}

/// A rate to generate at: finite and above zero (a NaN, zero or negative
/// rate has no period; an infinite one none either).
fn units_per_s(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r > 0.0)
        .ok_or_else(|| "expected a positive number of units per second, e.g. 30 or 0.5".to_string())
}

fn dur(s: &str) -> Result<StdDuration> {
    let d = qosnet_scenario::units::parse_duration(s).map_err(|e| anyhow!("{s}: {e}"))?;
    Ok(StdDuration::from_nanos(d.as_nanos()))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

pub fn run(c: RetherCmd) -> Result<()> {
    match c {
        RetherCmd::Status { t, json } => status(&t, json),
        RetherCmd::Open {
            t,
            to,
            bytes_per_trt,
            rate,
            buffers,
            wait,
        } => open(&t, &to, bytes_per_trt, rate, buffers, dur(&wait)?),
        RetherCmd::Send {
            t,
            session,
            generate,
            unit,
            units_per_s,
            duration,
        } => send(&t, &session, generate, unit, units_per_s, dur(&duration)?),
        RetherCmd::Recv {
            t,
            session,
            duration,
            output,
            quiet,
        } => recv(&t, &session, dur(&duration)?, output, quiet),
        RetherCmd::Close { t, session, receiver } => close(&t, &session, receiver.as_deref()),
        RetherCmd::Watch {
            t,
            session,
            duration,
            summary,
        } => watch(
            &t,
            &session,
            dur(&duration)?,
            summary.as_deref().map(dur).transpose()?,
        ),
        RetherCmd::Fault { t, kind, count } => fault(&t, &kind, count),
    }
}

fn fault(t: &Target, kind: &str, count: u32) -> Result<()> {
    use rethctl::WireFault;
    let req = match kind {
        "lose-sent-token" => Request::Fault {
            kind: WireFault::LoseSentToken,
            count,
        },
        "corrupt-sent-token" => Request::Fault {
            kind: WireFault::CorruptSentToken,
            count,
        },
        _ => Request::CrashHoldingToken,
    };
    let crash = matches!(req, Request::CrashHoldingToken);
    match t.connect()?.call(&req) {
        Ok(_) => outln!("{}: {kind} armed", t.station),
        // The crash may come before the answer is written.
        Err(e) if crash => outln!("{}: {kind} armed (answer lost: {e})", t.station),
        Err(e) => bail!("{}: {e}", t.station),
    }
    Ok(())
}

fn status(t: &Target, json: bool) -> Result<()> {
    let v = t.connect()?.call(&Request::Status).map_err(|e| anyhow!(e))?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    outln!(
        "station {} (id {}): mode {}{}{}, TRT {}, T_NRT {}",
        v["station"].as_str().unwrap_or("?"),
        u(&v["id"]),
        v["mode"].as_str().unwrap_or("?"),
        if v["holds_token"] == true {
            ", holds the token"
        } else {
            ""
        },
        if v["down"] == true { ", DOWN" } else { "" },
        ms(u(&v["trt_ns"])),
        ms(u(&v["t_nrt_ns"])),
    );
    outln!(
        "token: received {}, visits {}, passes {}, regenerations {}; RT visits {}",
        u(&v["token_received"]),
        u(&v["token_visits"]),
        u(&v["token_passes"]),
        u(&v["token_regenerations"]),
        u(&v["rt_visits"])
    );
    let n = &v["nrt"];
    outln!(
        "NRT: {} queued, {} visits ({} idle), {} refusals",
        u(&n["queued"]),
        u(&n["visits"]),
        u(&n["visits_idle"]),
        u(&n["refusals"])
    );
    match v["token"].as_object() {
        None => outln!("no token (CSMA mode)"),
        Some(tk) => {
            let names = |k: &str| -> String {
                tk[k]
                    .as_array()
                    .map(|a| a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join(" "))
                    .unwrap_or_default()
            };
            outln!(
                "token {} seq {} cycle {}: alive [{}], dead [{}]",
                tk["id"].as_str().unwrap_or("?"),
                u(&tk["seq"]),
                u(&tk["cycle"]),
                names("alive"),
                names("dead")
            );
            let set = tk["rt_set"].as_array().cloned().unwrap_or_default();
            outln!(
                "RT set: {} session(s), Σ THT_RT {} of TRT {} (T_NRT {})",
                set.len(),
                ms(u(&tk["reserved_tht_ns"])),
                ms(u(&tk["trt_ns"])),
                ms(u(&tk["t_nrt_ns"]))
            );
            for e in set {
                outln!(
                    "  {} {} -> {}: {} bytes/TRT, THT_RT {}, from cycle {}",
                    e["session"].as_str().unwrap_or("?"),
                    e["sender"].as_str().unwrap_or("?"),
                    e["receiver"].as_str().unwrap_or("?"),
                    u(&e["bytes_per_trt"]),
                    ms(u(&e["tht_ns"])),
                    u(&e["start_cycle"])
                );
            }
        }
    }
    for s in v["sessions"].as_array().cloned().unwrap_or_default() {
        outln!(
            "session {} ({}, {}): {}",
            s["session"].as_str().unwrap_or("?"),
            s["role"].as_str().unwrap_or("?"),
            s["owner"].as_str().unwrap_or("?"),
            s.as_object()
                .map(|m| m
                    .iter()
                    .filter(|(k, _)| !["session", "role", "owner"].contains(&k.as_str()))
                    .map(|(k, x)| format!("{k} {x}"))
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// The sender's TRT, from its status.
fn trt_ns(c: &mut Client) -> Result<u64> {
    let v = c.call(&Request::Status).map_err(|e| anyhow!(e))?;
    Ok(u(&v["trt_ns"]).max(1))
}

fn open(
    t: &Target,
    to: &str,
    bytes: Option<u32>,
    rate: Option<String>,
    buffers: usize,
    wait: StdDuration,
) -> Result<()> {
    let mut tx = t.connect()?;
    let bytes = match (bytes, rate) {
        (Some(b), _) => b,
        (None, Some(r)) => {
            let bps = qosnet_scenario::units::parse_bitrate(&r).map_err(|e| anyhow!("--rate {r}: {e}"))?;
            let trt = trt_ns(&mut tx)?;
            let b = (bps as u128 * trt as u128).div_ceil(8 * 1_000_000_000);
            u32::try_from(b).map_err(|_| anyhow!("--rate {r}: {b} bytes per TRT is too much"))?
        }
        (None, None) => bail!("give the reservation: --bytes-per-trt N or --rate R"),
    };
    let v = tx
        .call(&Request::Open {
            to: to.into(),
            bytes_per_trt: bytes,
            buffers: Some(buffers),
            admit: false,
        })
        .map_err(|e| anyhow!("{}: {e}", t.station))?;
    let session = v["session"].as_str().unwrap_or_default().to_string();
    // The receiver first: data of an admitted session may arrive at once.
    let listened = t.connect_to(to).and_then(|mut rx| {
        rx.call(&Request::Listen {
            session: session.clone(),
            buffers: Some(buffers),
        })
        .map_err(|e| anyhow!("{to}: {e}"))
    });
    if let Err(e) = listened {
        let _ = tx.call(&Request::Close {
            session: session.clone(),
        });
        bail!("opening the receiving end of {session}: {e}");
    }
    tx.call(&Request::Admit {
        session: session.clone(),
    })
    .map_err(|e| anyhow!("{}: {e}", t.station))?;
    let t0 = StdInstant::now();
    loop {
        let s = tx
            .call(&Request::State {
                session: session.clone(),
            })
            .map_err(|e| anyhow!(e))?;
        match s["state"].as_str() {
            Some("admitted") => {
                outln!(
                    "session {session}: {} -> {to}, {bytes} bytes/TRT, THT_RT {}, admitted (sends from cycle {})",
                    t.station,
                    ms(u(&v["tht_ns"])),
                    u(&s["start_cycle"])
                );
                return Ok(());
            }
            Some("refused") => {
                let r = &s["refused"];
                if r.get("trt_ns").is_none() {
                    outln!("session {session}: {}", r["text"].as_str().unwrap_or("refused"));
                } else {
                    outln!(
                        "session {session}: admission refused (eq. 3): reserved {} + requested {} + T_NRT {} = {} > TRT {}",
                        ms(u(&r["reserved_ns"])),
                        ms(u(&r["requested_ns"])),
                        ms(u(&r["t_nrt_ns"])),
                        ms(u(&r["reserved_ns"]) + u(&r["requested_ns"]) + u(&r["t_nrt_ns"])),
                        ms(u(&r["trt_ns"]))
                    );
                }
                let _ = tx.call(&Request::Close {
                    session: session.clone(),
                });
                if let Ok(mut rx) = t.connect_to(to) {
                    let _ = rx.call(&Request::Close {
                        session: session.clone(),
                    });
                }
                bail!("session {session} not admitted");
            }
            _ => {}
        }
        if t0.elapsed() > wait {
            bail!(
                "session {session}: no admission decision within {wait:?} (state {}); the token has not visited {}",
                s["state"],
                t.station
            );
        }
        std::thread::sleep(StdDuration::from_millis(10));
    }
}

/// Queue `unit`, waiting while every send buffer is full, until
/// `deadline` if there is one; false when the deadline came first.
fn push(
    c: &mut Client,
    session: &str,
    unit: &[u8],
    waits: &mut u64,
    deadline: Option<StdInstant>,
) -> Result<bool> {
    let req = Request::Send {
        session: session.into(),
        data: rethctl::hex(unit),
    };
    loop {
        let v = c.call(&req).map_err(|e| anyhow!("sending on {session}: {e}"))?;
        if v["retry"] != true {
            return Ok(true);
        }
        if deadline.is_some_and(|d| StdInstant::now() >= d) {
            return Ok(false);
        }
        *waits += 1;
        std::thread::sleep(StdDuration::from_millis(1));
    }
}

/// Unit `k` of a generated stream: its number then a pattern, so a
/// receiver can check it.
fn unit_bytes(k: u64, size: usize) -> Vec<u8> {
    let mut b: Vec<u8> = (0..size).map(|i| (k as usize).wrapping_add(i) as u8).collect();
    let n = k.to_be_bytes();
    let m = n.len().min(size);
    b[..m].copy_from_slice(&n[..m]);
    b
}

/// Generate units of `size` bytes every `period` for `duration`, handing
/// each to `push` (which gets the deadline and says whether it queued the
/// unit). Ends at `duration` whatever the period: the wait for the next
/// unit is cut at the deadline. Returns the units queued.
fn generate_units(
    size: usize,
    period: StdDuration,
    duration: StdDuration,
    mut push: impl FnMut(&[u8], StdInstant) -> Result<bool>,
) -> Result<u64> {
    let t0 = StdInstant::now();
    // A duration past what an Instant holds is as good as no end.
    let deadline = t0
        .checked_add(duration)
        .unwrap_or(t0 + StdDuration::from_secs(u32::MAX as u64));
    let mut units = 0u64;
    while StdInstant::now() < deadline {
        if !push(&unit_bytes(units, size), deadline)? {
            break;
        }
        units += 1;
        let next = u32::try_from(units)
            .ok()
            .and_then(|k| period.checked_mul(k))
            .and_then(|d| t0.checked_add(d))
            .map_or(deadline, |n| n.min(deadline));
        if let Some(d) = next.checked_duration_since(StdInstant::now()) {
            std::thread::sleep(d);
        }
    }
    Ok(units)
}

fn send(
    t: &Target,
    session: &str,
    generate: bool,
    unit: Option<u32>,
    units_per_s: Option<f64>,
    duration: StdDuration,
) -> Result<()> {
    let mut c = t.connect()?;
    let st = c
        .call(&Request::State {
            session: session.into(),
        })
        .map_err(|e| anyhow!(e))?;
    let reservation = u(&st["reservation"]) as u32;
    if reservation == 0 {
        bail!(
            "session {session} has no reservation at {} (send from the station that opened it)",
            t.station
        );
    }
    // A unit larger than the reservation is cut to it (one RT slot).
    let size = unit.unwrap_or(reservation).min(reservation) as usize;
    let (mut units, mut bytes, mut waits) = (0u64, 0u64, 0u64);
    if generate {
        // One unit per TRT unless told; a period past what a Duration
        // holds (a tiny rate) is as good as one unit.
        let period = match units_per_s {
            Some(r) => StdDuration::try_from_secs_f64(1.0 / r).unwrap_or(StdDuration::MAX),
            None => StdDuration::from_nanos(trt_ns(&mut c)?),
        };
        units = generate_units(size, period, duration, |b, deadline| {
            push(&mut c, session, b, &mut waits, Some(deadline))
        })?;
        bytes = units * size as u64;
    } else {
        let mut stdin = std::io::stdin().lock();
        let mut b = vec![0u8; size];
        loop {
            let mut got = 0;
            while got < size {
                match stdin.read(&mut b[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => bail!("reading standard input: {e}"),
                }
            }
            if got == 0 {
                break;
            }
            push(&mut c, session, &b[..got], &mut waits, None)?;
            units += 1;
            bytes += got as u64;
            if got < size {
                break;
            }
        }
    }
    outln!("session {session}: queued {units} units, {bytes} bytes ({size}-byte units; {waits} waits for a free send buffer)");
    Ok(())
}

fn recv(
    t: &Target,
    session: &str,
    duration: StdDuration,
    output: Option<PathBuf>,
    quiet: bool,
) -> Result<()> {
    let mut c = t.connect()?;
    let to_stdout = output.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let mut out: Option<Box<dyn Write>> = match &output {
        None => None,
        Some(_) if to_stdout => Some(Box::new(std::io::stdout())),
        Some(p) => Some(Box::new(
            std::fs::File::create(p).map_err(|e| anyhow!("{}: {e}", p.display()))?,
        )),
    };
    let say = |s: String| {
        if to_stdout {
            eprintln!("{s}");
        } else {
            outln!("{s}");
        }
    };
    let (mut n, mut complete, mut incomplete, mut skipped, mut backwards, mut bytes) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut last: Option<u32> = None;
    let t0 = StdInstant::now();
    let mut v = Value::Null;
    while t0.elapsed() < duration {
        v = c
            .call(&Request::Recv {
                session: session.into(),
                max: 1024,
                data: out.is_some(),
            })
            .map_err(|e| anyhow!(e))?;
        let units = v["units"].as_array().cloned().unwrap_or_default();
        for x in &units {
            let num = u(&x["unit"]) as u32;
            let gap = match last {
                Some(l) if num > l => num - l - 1,
                Some(_) => {
                    backwards += 1;
                    0
                }
                None => 0,
            };
            skipped += gap as u64;
            last = Some(num);
            n += 1;
            bytes += u(&x["len"]) - u(&x["bytes_missing"]);
            let ok = x["complete"] == true;
            if ok {
                complete += 1;
            } else {
                incomplete += 1;
            }
            if !quiet {
                say(format!(
                    "unit {num}: {} bytes, {}{}",
                    u(&x["len"]),
                    if ok {
                        "complete".to_string()
                    } else {
                        format!("INCOMPLETE, fragments missing {}", x["missing"])
                    },
                    if gap > 0 {
                        format!(", {gap} unit(s) skipped")
                    } else {
                        String::new()
                    }
                ));
            }
            if let (Some(o), Some(d)) = (out.as_mut(), x["data"].as_str()) {
                o.write_all(&rethctl::unhex(d).map_err(|e| anyhow!(e))?)?;
            }
        }
        if units.is_empty() {
            std::thread::sleep(StdDuration::from_millis(20));
        }
    }
    say(format!(
        "session {session}: {n} units ({complete} complete, {incomplete} incomplete), {bytes} bytes, {skipped} unit numbers skipped, {backwards} out of order; station: {} fragments, {} duplicate, {} stale, {} units overwritten unread",
        u(&v["frames_rx"]),
        u(&v["frames_duplicate"]),
        u(&v["frames_stale"]),
        u(&v["units_overwritten"]) + u(&v["units_dropped_unread"]),
    ));
    Ok(())
}

fn close(t: &Target, session: &str, receiver: Option<&str>) -> Result<()> {
    let mut c = t.connect()?;
    c.call(&Request::Close {
        session: session.into(),
    })
    .map_err(|e| anyhow!("{}: {e}", t.station))?;
    if let Some(r) = receiver {
        t.connect_to(r)?
            .call(&Request::Close {
                session: session.into(),
            })
            .map_err(|e| anyhow!("{r}: {e}"))?;
    }
    // An admitted session leaves the RT set at the token's next visit.
    let t0 = StdInstant::now();
    loop {
        let v = c.call(&Request::Status).map_err(|e| anyhow!(e))?;
        let in_set = v["token"]["rt_set"]
            .as_array()
            .is_some_and(|a| a.iter().any(|e| e["session"] == session));
        if !in_set {
            outln!(
                "session {session} closed; not in {}'s RT set (mode {})",
                t.station,
                v["mode"].as_str().unwrap_or("?")
            );
            return Ok(());
        }
        if t0.elapsed() > StdDuration::from_secs(5) {
            bail!("session {session} still in the RT set 5 s after close");
        }
        std::thread::sleep(StdDuration::from_millis(10));
    }
}

fn watch(t: &Target, session: &str, duration: StdDuration, summary: Option<StdDuration>) -> Result<()> {
    let mut c = t.connect()?;
    // From now on, not the session's history.
    let v = c
        .call(&Request::Visits {
            session: session.into(),
            from: u64::MAX,
        })
        .map_err(|e| anyhow!(e))?;
    let mut from = u(&v["next"]);
    let mut last_cycle: Option<u64> = None;
    let t0 = StdInstant::now();
    let (mut tot_visits, mut tot_full, mut tot_idle, mut tot_short, mut tot_missed) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut iv, mut ib, mut imin, mut imiss) = (0u64, 0u64, u64::MAX, 0u64);
    let mut next_sum = summary.map(|s| StdInstant::now() + s);
    let mut first_at: Option<u64> = None;
    while t0.elapsed() < duration {
        let v = c
            .call(&Request::Visits {
                session: session.into(),
                from,
            })
            .map_err(|e| anyhow!(e))?;
        let res = u(&v["reservation"]);
        for x in v["visits"].as_array().cloned().unwrap_or_default() {
            from = u(&x["seq"]) + 1;
            let cycle = u(&x["cycle"]);
            let b = u(&x["bytes"]);
            let at = u(&x["at_ns"]);
            let missed = last_cycle.map_or(0, |l| cycle.saturating_sub(l + 1));
            last_cycle = Some(cycle);
            let f = *first_at.get_or_insert(at);
            tot_visits += 1;
            tot_missed += missed;
            let verdict = if b >= res {
                tot_full += 1;
                "held"
            } else if b == 0 {
                tot_idle += 1;
                "idle (nothing queued)"
            } else {
                tot_short += 1;
                "partial unit"
            };
            iv += 1;
            ib += b;
            imin = imin.min(b);
            imiss += missed;
            if summary.is_none() {
                outln!(
                    "cycle {cycle} +{:.1} ms: {b} of {res} bytes/TRT, {verdict}{}",
                    (at - f) as f64 / 1e6,
                    if missed > 0 {
                        format!(" ({missed} cycle(s) without a visit)")
                    } else {
                        String::new()
                    }
                );
            }
        }
        if let (Some(n), Some(s)) = (next_sum, summary) {
            if StdInstant::now() >= n {
                outln!(
                    "{:.1} s: {iv} cycles, {ib} bytes, min {} of {res} bytes/TRT per cycle, {imiss} cycles without a visit; {}",
                    t0.elapsed().as_secs_f64(),
                    if iv == 0 { 0 } else { imin },
                    v["state"].as_str().unwrap_or("?")
                );
                (iv, ib, imin, imiss) = (0, 0, u64::MAX, 0);
                next_sum = Some(n + s);
            }
        }
        std::thread::sleep(StdDuration::from_millis(50));
    }
    outln!(
        "session {session}: {tot_visits} RT visits: {tot_full} held the reservation, {tot_idle} idle (nothing queued), {tot_short} partial units; {tot_missed} cycles without a visit"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `generate_units` on a thread: its result, or None if it is
    /// still going after `limit`.
    fn generated(
        period: StdDuration,
        duration: StdDuration,
        queued: bool,
        limit: StdDuration,
    ) -> Option<u64> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = generate_units(16, period, duration, |b, _| {
                assert_eq!(b.len(), 16);
                Ok(queued)
            });
            let _ = tx.send(r.unwrap());
        });
        rx.recv_timeout(limit).ok()
    }

    /// `--units-per-s 0.001` (what NaN, 0 and negative rates became): a
    /// 1000 s period still ends at --duration, after one unit.
    #[test]
    fn generating_ends_at_the_duration_whatever_the_rate() {
        let t0 = StdInstant::now();
        let n = generated(
            StdDuration::from_secs(1000),
            StdDuration::from_millis(100),
            true,
            StdDuration::from_secs(20),
        );
        assert_eq!(n, Some(1), "still sending 20 s into a 100 ms run");
        assert!(t0.elapsed() < StdDuration::from_secs(5), "{:?}", t0.elapsed());
        // A push that waited out the deadline (every buffer full) ends it.
        let n = generated(
            StdDuration::from_millis(1),
            StdDuration::from_secs(3600),
            false,
            StdDuration::from_secs(20),
        );
        assert_eq!(n, Some(0));
        // At a rate: about duration / period units.
        let n = generated(
            StdDuration::from_millis(10),
            StdDuration::from_millis(200),
            true,
            StdDuration::from_secs(20),
        )
        .unwrap();
        assert!((5..=21).contains(&n), "{n} units of 10 ms in 200 ms");
    }

    #[test]
    fn units_carry_their_number() {
        assert_eq!(unit_bytes(0x0102, 10), [0, 0, 0, 0, 0, 0, 1, 2, 10, 11]);
        assert_eq!(unit_bytes(7, 3), [0, 0, 0]);
    }
}
