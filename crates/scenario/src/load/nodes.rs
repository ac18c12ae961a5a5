//! `[[node]]`: routers (scheduler, CPU, TDP delay, clock), hosts (clock)
//! and switches (fabric latency, buffers, forwarding database).

use std::collections::HashMap;
use std::ops::Range;

use qosnet_core::Duration;

use super::limits::{MAX_CLOCK_OFFSET, MAX_PROCESSING, MAX_RUN, MAX_SWITCH_LATENCY};
use super::{Ctx, Names, ScenarioError};
use crate::model::*;
use crate::raw;

/// The first router-only key set on a node that is not a router.
fn router_only_key(o: &raw::RouterOpts) -> Option<(&'static str, Range<usize>)> {
    [
        ("scheduler", o.scheduler.as_ref().map(|v| v.span())),
        ("processing", o.processing.as_ref().map(|v| v.span())),
        ("queue_packets", o.queue_packets.as_ref().map(|v| v.span())),
        ("queue_bytes", o.queue_bytes.as_ref().map(|v| v.span())),
        ("input_queue", o.input_queue.as_ref().map(|v| v.span())),
        ("tdp_delay", o.tdp_delay.as_ref().map(|v| v.span())),
        ("tf_irq_latency", o.tf_irq_latency.as_ref().map(|v| v.span())),
        ("tf_port_service", o.tf_port_service.as_ref().map(|v| v.span())),
    ]
    .into_iter()
    .find_map(|(k, s)| s.map(|s| (k, s)))
}

/// Any router key (including clocks) set on a switch.
fn router_keys(o: &raw::RouterOpts) -> Option<Range<usize>> {
    router_only_key(o).map(|(_, s)| s).or_else(|| {
        o.clock_offset
            .as_ref()
            .map(|v| v.span())
            .or(o.clock_drift_ppm.as_ref().map(|v| v.span()))
    })
}

pub(super) fn nodes(cx: &Ctx, f: &raw::File, have_tdp: bool) -> Result<(Names, Vec<Node>), ScenarioError> {
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut nodes = Vec::new();
    for n in &f.nodes {
        let n = n.get_ref();
        let name = n.name.get_ref().clone();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(cx.err(
                n.name.span(),
                format!("node name `{name}` is not allowed"),
                "use letters, digits and _ only (names become interface and namespace names)",
            ));
        }
        if names.insert(name.clone(), nodes.len()).is_some() {
            return Err(cx.err(
                n.name.span(),
                format!("duplicate node name `{name}`"),
                "give every node a unique name",
            ));
        }
        let kind = match n.kind.get_ref().as_str() {
            "host" => {
                let o = n.opts(&raw::RouterOpts::default());
                if let Some((k, sp)) = router_only_key(&o) {
                    return Err(cx.err(
                        sp,
                        format!("`{k}` applies to routers; `{name}` is a host"),
                        "remove the key or make the node a router",
                    ));
                }
                let r = router_spec(cx, &o, true)?;
                NodeKind::Host(HostSpec {
                    clock_offset_ns: r.clock_offset_ns,
                    clock_drift_ppm: r.clock_drift_ppm,
                })
            }
            "rether" | "rether-bridge" => {
                let o = n.opts(&raw::RouterOpts::default());
                if let Some(sp) = router_keys(&o) {
                    return Err(cx.err(
                        sp,
                        format!("router settings on `{name}`, a RETHER {}", n.kind.get_ref()),
                        "a RETHER station or bridge takes station_id; protocol parameters go in [rether]",
                    ));
                }
                let id = match &n.station_id {
                    Some(v) => cx.int(v, 0, 0xfffe, "station_id")?,
                    None => 1 + nodes.iter().filter(|k: &&Node| k.rether_id().is_some()).count() as u16,
                };
                if n.kind.get_ref() == "rether" {
                    NodeKind::Rether(RetherNodeSpec { id })
                } else {
                    NodeKind::RetherBridge(RetherNodeSpec { id })
                }
            }
            "router" => NodeKind::Router(router_spec(cx, &n.opts(&f.defaults.router), have_tdp)?),
            "switch" => {
                let o = n.opts(&raw::RouterOpts::default());
                if let Some(sp) = router_keys(&o) {
                    return Err(cx.err(
                        sp,
                        format!("router settings on `{name}`, a switch"),
                        "a switch takes switch = { latency, queue_packets, queue_bytes, fdb_size, aging, mtu }",
                    ));
                }
                NodeKind::Switch(switch_spec(cx, n.switch.as_ref())?)
            }
            "stsdr-balancer" | "stsdr-forwarder" => {
                let o = n.opts(&raw::RouterOpts::default());
                let bad = [
                    ("scheduler", o.scheduler.as_ref().map(|v| v.span())),
                    ("queue_packets", o.queue_packets.as_ref().map(|v| v.span())),
                    ("queue_bytes", o.queue_bytes.as_ref().map(|v| v.span())),
                    ("tdp_delay", o.tdp_delay.as_ref().map(|v| v.span())),
                    ("clock_offset", o.clock_offset.as_ref().map(|v| v.span())),
                    ("clock_drift_ppm", o.clock_drift_ppm.as_ref().map(|v| v.span())),
                ]
                .into_iter()
                .find_map(|(k, s)| s.map(|s| (k, s)));
                if let Some((k, sp)) = bad {
                    return Err(cx.err(
                        sp,
                        format!("`{k}` does not apply to `{name}`, an STSDR node"),
                        "an STSDR node takes processing and input_queue; queues, WFQ and T_br are set in [stsdr]",
                    ));
                }
                let r = router_spec(cx, &o, false)?;
                let spec = StsdrNodeSpec {
                    processing: r.processing,
                    input_queue: r.input_queue,
                };
                if n.kind.get_ref() == "stsdr-balancer" {
                    NodeKind::StsdrBalancer(spec)
                } else {
                    NodeKind::StsdrForwarder(spec)
                }
            }
            "segment" => {
                return Err(cx.err(
                    n.kind.span(),
                    "segments are declared with [[segment]], not [[node]]",
                    "[[segment]] name = \"bus\", nodes = [\"s1\", \"s2\"], capacity = \"10Mb/s\"",
                ))
            }
            other => {
                return Err(cx.err(
                    n.kind.span(),
                    format!("unknown node kind `{other}`"),
                    "use kind = \"router\", \"host\", \"switch\", \"rether\", \"rether-bridge\", \"stsdr-balancer\" or \"stsdr-forwarder\"",
                ))
            }
        };
        if let (Some(v), false) = (
            &n.station_id,
            matches!(kind, NodeKind::Rether(_) | NodeKind::RetherBridge(_)),
        ) {
            return Err(cx.err(
                v.span(),
                format!("`station_id` on `{name}`, which is not a RETHER station or bridge"),
                "remove it or make the node kind = \"rether\" or \"rether-bridge\"",
            ));
        }
        if let (Some(sw), false) = (&n.switch, matches!(kind, NodeKind::Switch(_))) {
            return Err(cx.err(
                sw.span(),
                format!("`switch` settings on `{name}`, which is not a switch"),
                "remove them or make the node kind = \"switch\"",
            ));
        }
        nodes.push(Node { name, kind });
    }
    if nodes.is_empty() {
        return Err(cx.err(
            f.scenario.span(),
            "the scenario has no nodes",
            "add [[node]] tables",
        ));
    }
    Ok((Names(names), nodes))
}

fn switch_spec(cx: &Ctx, o: Option<&raw::S<raw::SwitchOpts>>) -> Result<SwitchSpec, ScenarioError> {
    use qosnet_core::switch::{MAX_AGING_TIME, MAX_MTU};
    let d = SwitchSpec::default();
    let Some(o) = o else {
        return Ok(d);
    };
    let o = o.get_ref();
    let mtu = o
        .mtu
        .as_ref()
        .map(|v| cx.int(v, 68, MAX_MTU as i64, "mtu"))
        .transpose()?
        .unwrap_or(d.mtu);
    // A port's queue must hold one frame of the largest size the switch
    // takes (tagged, header included), or it could forward nothing.
    let max_frame = SwitchSpec::max_frame(mtu);
    let queue_bytes = match &o.queue_bytes {
        Some(v) => {
            let q: usize = cx.int(v, 64, 1 << 32, "queue_bytes")?;
            if q < max_frame {
                return Err(cx.err(
                    v.span(),
                    format!("queue_bytes = {q} cannot hold one {max_frame}-byte frame (mtu {mtu}, 14-byte header, 4-byte VLAN tag)"),
                    format!("use at least {max_frame}; the default is {}", d.queue_bytes),
                ));
            }
            q
        }
        None => d.queue_bytes.max(max_frame),
    };
    let aging = match &o.aging {
        Some(v) => {
            let a = cx.dur_max(
                v,
                MAX_RUN.min(MAX_AGING_TIME),
                "aging",
                "802.1D's default is 300s",
            )?;
            if a == Duration::ZERO {
                return Err(cx.err(
                    v.span(),
                    "aging = 0 would forget every address as soon as it is learnt",
                    "give a positive time; 802.1D's default is \"300s\" (802.1Q allows 10s to 1000000s)",
                ));
            }
            a
        }
        None => d.aging,
    };
    Ok(SwitchSpec {
        latency: o
            .latency
            .as_ref()
            .map(|v| {
                cx.dur_max(
                    v,
                    MAX_SWITCH_LATENCY,
                    "latency",
                    "switch fabrics take microseconds",
                )
            })
            .transpose()?
            .unwrap_or(d.latency),
        queue_packets: o
            .queue_packets
            .as_ref()
            .map(|v| cx.int(v, 1, 1 << 24, "queue_packets"))
            .transpose()?
            .unwrap_or(d.queue_packets),
        queue_bytes,
        fdb_size: o
            .fdb_size
            .as_ref()
            .map(|v| cx.int(v, 1, 1 << 24, "fdb_size"))
            .transpose()?
            .unwrap_or(d.fdb_size),
        aging,
        mtu,
    })
}

const PROC_WHY: &str = "a router CPU takes microseconds per packet";

pub(super) fn router_spec(
    cx: &Ctx,
    o: &raw::RouterOpts,
    have_tdp: bool,
) -> Result<RouterSpec, ScenarioError> {
    let scheduler = match &o.scheduler {
        None => SchedKind::Fifo,
        Some(s) => SchedKind::parse(s.get_ref()).ok_or_else(|| {
            cx.err(
                s.span(),
                format!("unknown scheduler `{}`", s.get_ref()),
                format!("use one of: {}", SchedKind::NAMES),
            )
        })?,
    };
    if scheduler == SchedKind::Tdp && !have_tdp {
        let span = o.scheduler.as_ref().map(|s| s.span()).unwrap_or(0..0);
        return Err(cx.err(
            span,
            "scheduler \"tdp\" needs a [tdp] section",
            "add [tdp] with tf and tfs_per_tc",
        ));
    }
    let processing = match &o.processing {
        None => ProcDist::Fixed(Duration::ZERO),
        Some(p) => dist(cx, p, "processing")?,
    };
    let tf_irq_latency = o
        .tf_irq_latency
        .as_ref()
        .map(|p| dist(cx, p, "tf_irq_latency"))
        .transpose()?;
    let tf_port_service = o
        .tf_port_service
        .as_ref()
        .map(|v| cx.dur_str_max(v.get_ref(), v.span(), MAX_PROCESSING, "tf_port_service", PROC_WHY))
        .transpose()?
        .unwrap_or(Duration::ZERO);
    Ok(RouterSpec {
        scheduler,
        processing,
        queue_packets: o
            .queue_packets
            .as_ref()
            .map(|v| cx.int(v, 1, 1 << 24, "queue_packets"))
            .transpose()?
            .unwrap_or(1000),
        queue_bytes: o
            .queue_bytes
            .as_ref()
            .map(|v| cx.int(v, 64, 1 << 32, "queue_bytes"))
            .transpose()?
            .unwrap_or(1 << 20),
        input_queue: o
            .input_queue
            .as_ref()
            .map(|v| cx.int(v, 1, 1 << 24, "input_queue"))
            .transpose()?
            .unwrap_or(1000),
        tdp_delay: o
            .tdp_delay
            .as_ref()
            .map(|v| cx.int(v, 1, 10_000, "tdp_delay"))
            .transpose()?
            .unwrap_or(2),
        tf_irq_latency,
        tf_port_service,
        clock_offset_ns: o
            .clock_offset
            .as_ref()
            .map(|v| {
                let (neg, s) = match v.get_ref().strip_prefix('-') {
                    Some(rest) => (true, rest.to_string()),
                    None => (false, v.get_ref().clone()),
                };
                let d = cx.dur_str_max(
                    &s,
                    v.span(),
                    MAX_CLOCK_OFFSET,
                    "clock_offset",
                    "NTP keeps clocks within milliseconds, TDP's CTR within microseconds (either sign)",
                )?;
                // Within i64: MAX_CLOCK_OFFSET is one second.
                let ns = d.as_nanos() as i64;
                Ok(if neg { -ns } else { ns })
            })
            .transpose()?
            .unwrap_or(0),
        clock_drift_ppm: match &o.clock_drift_ppm {
            Some(v) if !v.get_ref().is_finite() || v.get_ref().abs() > 1000.0 => {
                return Err(cx.err(
                    v.span(),
                    format!("clock_drift_ppm = {} is not within ±1000 ppm", v.get_ref()),
                    "use a finite value from -1000 to 1000; real oscillators drift by tens of ppm",
                ))
            }
            Some(v) => *v.get_ref(),
            None => 0.0,
        },
    })
}

/// A time distribution key (`processing`, `tf_irq_latency`): a duration,
/// or `{ dist = "uniform", min, max }` or `{ dist = "exp", base, mean }`.
fn dist(cx: &Ctx, p: &raw::S<raw::Processing>, key: &str) -> Result<ProcDist, ScenarioError> {
    let sp = p.span();
    let d = |s: &Option<String>, what: &str| -> Result<Duration, ScenarioError> {
        let v = s.as_ref().ok_or_else(|| {
            cx.err(
                sp.clone(),
                format!("{key} distribution needs `{what}`"),
                format!("e.g. {key} = {{ dist = \"uniform\", min = \"5us\", max = \"40us\" }}"),
            )
        })?;
        cx.dur_str_max(v, sp.clone(), MAX_PROCESSING, &format!("{key} {what}"), PROC_WHY)
    };
    Ok(match p.get_ref() {
        raw::Processing::Fixed(s) => {
            ProcDist::Fixed(cx.dur_str_max(s, sp.clone(), MAX_PROCESSING, key, PROC_WHY)?)
        }
        raw::Processing::Dist(pd) => match pd.dist.as_str() {
            "uniform" => {
                let (lo, hi) = (d(&pd.min, "min")?, d(&pd.max, "max")?);
                if lo > hi {
                    return Err(cx.err(sp, format!("{key} min is above max"), "swap min and max"));
                }
                ProcDist::Uniform(lo, hi)
            }
            "exp" => ProcDist::Exp {
                base: match &pd.base {
                    Some(_) => d(&pd.base, "base")?,
                    None => Duration::ZERO,
                },
                mean: d(&pd.mean, "mean")?,
            },
            other => {
                return Err(cx.err(
                    sp,
                    format!("unknown {key} distribution `{other}`"),
                    "use dist = \"uniform\" (min, max) or \"exp\" (base, mean)",
                ))
            }
        },
    })
}
