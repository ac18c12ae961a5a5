//! `qosnet gen`: measurement UDP traffic (probe payloads, `qosnet_lab::traffic`)
//! to a sink, usable outside a lab and without root.

use std::net::SocketAddrV4;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use qosnet_lab::traffic;

use crate::args::{ctrl_c_flag, parse_duration};

#[derive(Args)]
pub struct GenArgs {
    /// Destination IP:PORT.
    #[arg(long)]
    pub dst: SocketAddrV4,
    /// Source IP:PORT to bind (default: any).
    #[arg(long)]
    pub bind: Option<SocketAddrV4>,
    /// Rate: e.g. 800pps, 6.4Mb/s (bit rates count IP bytes).
    #[arg(long, default_value = "1000pps")]
    pub rate: String,
    /// IP packet size in bytes (40 to 65535; 40-51 carry the compact probe), or `imix`.
    #[arg(long, default_value = "1000")]
    pub size: String,
    /// cbr, poisson, or onoff:ON/OFF (e.g. onoff:10ms/20ms).
    #[arg(long, default_value = "cbr")]
    pub pattern: String,
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Stop after this many packets.
    #[arg(long)]
    pub count: Option<u64>,
    /// Flow id written in every probe.
    #[arg(long, default_value_t = 0)]
    pub flow: u32,
    #[arg(long, default_value_t = 0)]
    pub dscp: u8,
    #[arg(long)]
    pub ttl: Option<u8>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: GenArgs) -> Result<()> {
    let size = if a.size == "imix" {
        traffic::SizeDist::Imix
    } else {
        traffic::SizeDist::Fixed(
            a.size
                .parse()
                .ok()
                .filter(|&b: &u32| (qosnet_lab::traffic::MIN_IP_SIZE as u32..=65_535).contains(&b))
                .ok_or_else(|| {
                    anyhow!(
                        "--size {}: a number of IP bytes from {} (the smallest packet that carries a measurement probe) to 65535, or imix",
                        a.size,
                        qosnet_lab::traffic::MIN_IP_SIZE
                    )
                })?,
        )
    };
    let rate =
        match qosnet_scenario::units::parse_rate(&a.rate).map_err(|e| anyhow!("--rate {}: {e}", a.rate))? {
            qosnet_scenario::units::Rate::Pps(p) => traffic::Rate::Pps(p),
            qosnet_scenario::units::Rate::Bps(b) => traffic::Rate::Bps(b),
        };
    let pattern = match a.pattern.as_str() {
        "cbr" => traffic::Pattern::Cbr,
        "poisson" => traffic::Pattern::Poisson,
        p => {
            let (on, off) = p
                .strip_prefix("onoff:")
                .and_then(|s| s.split_once('/'))
                .ok_or_else(|| anyhow!("--pattern: cbr, poisson or onoff:ON/OFF"))?;
            traffic::Pattern::OnOff {
                on: parse_duration(on)?,
                off: parse_duration(off)?,
            }
        }
    };
    let cfg = traffic::GenConfig {
        dst: a.dst,
        bind: a.bind,
        flow: a.flow,
        pattern,
        rate,
        size,
        dscp: a.dscp & 0x3f,
        ttl: a.ttl,
        start: None,
        duration: Some(parse_duration(&a.duration)?),
        count: a.count,
        seed: a.seed,
        measure: None,
        spin: qosnet_io::clock::DEFAULT_SPIN,
    };
    let stop = ctrl_c_flag()?;
    let r = traffic::run_gen(&cfg, &stop).with_context(|| format!("sending to {}", a.dst))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        outln!(
            "flow {}: sent {} datagrams ({} IP bytes) in {:.3} s, {} send errors {:?}; pacing lateness {}",
            r.flow,
            r.sent,
            r.sent_ip_bytes,
            (r.end_ns - r.start_ns) as f64 * 1e-9,
            r.send_errors,
            r.errors_by_kind,
            r.lateness
        );
    }
    Ok(())
}
