//! `qosnet sink`: receive measurement traffic and print per-flow loss,
//! delay and jitter (`qosnet_lab::traffic::Sink`).

use std::net::SocketAddrV4;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use clap::Args;
use qosnet_experiments::report::fmt_ns;
use qosnet_lab::traffic;

use crate::args::{ctrl_c_flag, parse_duration};

#[derive(Args)]
pub struct SinkArgs {
    /// Address to listen on, IP:PORT.
    #[arg(long)]
    pub bind: SocketAddrV4,
    /// Listen this long (default: until Ctrl-C).
    #[arg(long)]
    pub duration: Option<String>,
    #[arg(long)]
    pub json: bool,
    /// Track at most this many flows; probes of further flow ids are
    /// counted ("flows over the limit") and ignored, so a flood of made-up
    /// ids cannot exhaust memory (about 9 KB per flow).
    #[arg(long, default_value_t = traffic::DEFAULT_MAX_FLOWS as u32, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_flows: u32,
}

pub fn run(a: SinkArgs) -> Result<()> {
    let mut s = traffic::Sink::bind(a.bind).with_context(|| format!("binding {}", a.bind))?;
    s.set_max_flows(a.max_flows as usize);
    let stop = ctrl_c_flag()?;
    let until = match &a.duration {
        Some(d) => qosnet_io::clock::now() + parse_duration(d)?,
        None => qosnet_core::Instant::MAX,
    };
    if !a.json {
        eprintln!("listening on {} ...", a.bind);
    }
    s.run_until(until, &stop)?;
    let reps = s.reports(&Default::default());
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"flows": reps, "counters": s.counters()}))?
        );
        return Ok(());
    }
    outln!(
        "{:<6} {:>9} {:>9} {:>6} {:>9} {:>11} {:>11} {:>11} {:>11} {:>12}",
        "flow",
        "sent",
        "received",
        "lost",
        "reordered",
        "delay min",
        "p50",
        "max",
        "jitter",
        "Mb/s"
    );
    for r in &reps {
        outln!(
            "{:<6} {:>9} {:>9} {:>6} {:>9} {:>11} {:>11} {:>11} {:>11} {:>12.3}",
            r.flow,
            r.sent,
            r.received,
            r.lost,
            r.reordered,
            fmt_ns(r.delay_ns.min as f64),
            fmt_ns(r.delay_ns.p50 as f64),
            fmt_ns(r.delay_ns.max as f64),
            fmt_ns(r.jitter_ns as f64),
            r.throughput_bps / 1e6
        );
    }
    let c = s.counters();
    outln!(
        "datagrams {}, not probes {}, flows over the limit {}, socket drops {}, without kernel timestamp {}",
        c.datagrams,
        c.not_probe,
        c.flows_over_limit,
        c.socket_drops,
        c.no_kernel_timestamp
    );
    let _ = stop.load(Ordering::Relaxed);
    Ok(())
}
