//! `[rether]` and `kind = "rether"` stations (seed 002, RETHER): the
//! protocol parameters the stations share, each station on exactly one
//! shared segment and each `rether-bridge` on several (§2.5), station ids
//! unique, and `rt = true` flows (real-time
//! sessions) between two stations.

use std::ops::Range;

use qosnet_core::rether::NrtPolicy;
use qosnet_core::Duration;

use super::{Ctx, Names, ScenarioError};
use crate::model::*;
use crate::raw;
use qosnet_core::rether::app::{Fault, FaultKind};
use qosnet_core::Instant;

/// The defaults of `[rether]`: the paper's 1995 PCs on 10 Mb/s (§4).
pub const TRT: Duration = Duration(33_333_333);
pub const A: Duration = Duration(140_000);
pub const B: Duration = Duration(650_000);
pub const T_TOKEN: Duration = Duration(247_000);
pub const LATE: Duration = Duration(2_000_000);
pub const BUFFERS: usize = 4;
/// Slack on failure timers (`StationConfig::new`'s).
pub const ACK_MARGIN: Duration = Duration(2_000_000);

const WHY: &str = "RETHER's cycles are tens of milliseconds (TRT 33.33 ms for 30 frames/s)";

/// `[rether]`, validated, if the scenario has RETHER stations.
pub(super) fn params(
    cx: &Ctx,
    f: &raw::File,
    names: &Names,
    nodes: &[Node],
    duration: Duration,
) -> Result<Option<RetherParams>, ScenarioError> {
    let any = nodes.iter().any(|n| n.is_rether());
    let Some(r) = f.rether.as_ref() else {
        let faults = faults(cx, f, names, nodes, duration)?;
        return Ok(any.then(|| RetherParams { faults, ..defaults() }));
    };
    if !any {
        return Err(cx.err(
            r.span(),
            "[rether] without RETHER stations",
            "add [[node]] tables with kind = \"rether\" on a [[segment]], or remove [rether]",
        ));
    }
    let r = r.get_ref();
    let max = Duration::from_secs(1);
    let dur = |v: &Option<raw::S<String>>, what: &str, d: Duration| -> Result<Duration, ScenarioError> {
        v.as_ref()
            .map(|v| cx.dur_max(v, max, what, WHY))
            .transpose()
            .map(|x| x.unwrap_or(d))
    };
    let trt = dur(&r.trt, "trt", TRT)?;
    if trt == Duration::ZERO {
        return Err(cx.err(span(&r.trt), "trt must be positive", "e.g. trt = \"33.33ms\""));
    }
    let t_nrt = r
        .t_nrt
        .as_ref()
        .map(|v| cx.dur_max(v, max, "t_nrt", WHY))
        .transpose()?;
    if let Some(t) = t_nrt {
        if t >= trt {
            return Err(cx.err(
                span(&r.t_nrt),
                format!("t_nrt {t} is not below trt {trt}"),
                "T_NRT is the part of each cycle left to NRT traffic (eq. 3); leave it out for eq. 6's value",
            ));
        }
    }
    let nrt_policy = match r.nrt_policy.as_ref().map(|v| (v.span(), v.get_ref())) {
        None => NrtPolicy::OnePacket,
        Some((_, raw::SizeSpec::Named(n))) if n == "one" => NrtPolicy::OnePacket,
        Some((_, raw::SizeSpec::Named(n))) if n == "fit" => NrtPolicy::AsManyAsFit,
        Some((_, raw::SizeSpec::Bytes(k))) if (1..=1000).contains(k) => NrtPolicy::AtMost(*k as u32),
        Some((sp, _)) => {
            return Err(cx.err(
                sp,
                "unknown nrt_policy",
                "use \"one\" (one packet per visit), \"fit\" (as many as fit) or a number k (at most k packets, 1 to 1000)",
            ))
        }
    };
    let boot_csma = match r.boot.as_ref().map(|v| (v.span(), v.get_ref().as_str())) {
        None | Some((_, "csma")) => true,
        Some((_, "join")) => false,
        Some((sp, other)) => {
            return Err(cx.err(
                sp,
                format!("unknown boot `{other}`"),
                "use \"csma\" (every station starts in CSMA mode) or \"join\" (§2.4: broadcast a join, listen for a token)",
            ))
        }
    };
    Ok(Some(RetherParams {
        enabled: r.enabled.as_ref().map(|v| *v.get_ref()).unwrap_or(true),
        trt,
        t_nrt,
        a: dur(&r.a, "a", A)?,
        b: dur(&r.b, "b", B)?,
        t_token: dur(&r.t_token, "t_token", T_TOKEN)?,
        copy_per_packet: dur(&r.copy_per_packet, "copy_per_packet", Duration::ZERO)?,
        copy_per_byte: r
            .copy_per_byte
            .as_ref()
            .map(|v| {
                cx.dur_max(
                    v,
                    Duration::from_micros(10),
                    "copy_per_byte",
                    "the time to copy one byte to the NIC: Table 3's I/O bus is about 0.39 us (\"394ns\"), its CPU bus 0.055 us",
                )
            })
            .transpose()?
            .unwrap_or(Duration::ZERO),
        nrt_policy,
        late_threshold: dur(&r.late_threshold, "late_threshold", LATE)?,
        buffers: r
            .buffers
            .as_ref()
            .map(|v| cx.int(v, 1, 64, "buffers"))
            .transpose()?
            .unwrap_or(BUFFERS),
        ack_stagger: dur(&r.ack_stagger, "ack_stagger", Duration::ZERO)?,
        ack_margin: ack_margin(cx, r)?,
        boot_csma,
        faults: faults(cx, f, names, nodes, duration)?,
    }))
}

/// `ack_margin`: the slack on every failure timer must be positive, or a
/// station declares a peer dead the instant its answer is due.
fn ack_margin(cx: &Ctx, r: &raw::Rether) -> Result<Duration, ScenarioError> {
    let Some(v) = &r.ack_margin else {
        return Ok(ACK_MARGIN);
    };
    let m = cx.dur_max(v, Duration::from_secs(1), "ack_margin", WHY)?;
    if m == Duration::ZERO {
        return Err(cx.err(
            v.span(),
            "ack_margin = 0 leaves no slack on the failure timers: a station answering a moment late would be declared dead",
            "give a positive margin: the default is \"2ms\"; live on a loaded machine, tens of ms (scenarios/rether/live.toml uses 50ms)",
        ));
    }
    Ok(m)
}

fn span<T>(v: &Option<raw::S<T>>) -> Range<usize> {
    v.as_ref().map(|v| v.span()).unwrap_or(0..0)
}

fn defaults() -> RetherParams {
    RetherParams {
        enabled: true,
        trt: TRT,
        t_nrt: None,
        a: A,
        b: B,
        t_token: T_TOKEN,
        copy_per_packet: Duration::ZERO,
        copy_per_byte: Duration::ZERO,
        nrt_policy: NrtPolicy::OnePacket,
        late_threshold: LATE,
        buffers: BUFFERS,
        ack_stagger: Duration::ZERO,
        ack_margin: ACK_MARGIN,
        boot_csma: true,
        faults: Vec::new(),
    }
}

const KINDS_HINT: &str = "use \"kill\" (any node), or at a RETHER station \"crash\", \"crash-holding\" (when it next holds the token), \"drop-token\", \"corrupt-token\" (token frames to it), \"lose-sent-token\" or \"corrupt-sent-token\" (token frames it sends)";

/// The station faults of `[[rether.fault]]` and `[[fault]]`: every kind
/// but `kill`, which fails any node from outside (`faults.rs`).
fn faults(
    cx: &Ctx,
    f: &raw::File,
    names: &Names,
    nodes: &[Node],
    duration: Duration,
) -> Result<Vec<(usize, Fault)>, ScenarioError> {
    let mut v = Vec::new();
    let max = super::limits::MAX_RUN;
    let listed = f.rether.as_ref().and_then(|r| r.get_ref().fault.as_ref());
    for fl in f.faults.iter().chain(listed.into_iter().flatten()) {
        let fl = fl.get_ref();
        if super::faults::ENGINE_KINDS.contains(&fl.kind.get_ref().as_str()) {
            continue;
        }
        let n = names.lookup(cx, super::faults::one_node(cx, fl)?, "fault node")?;
        let known = [
            "crash",
            "crash-holding",
            "drop-token",
            "corrupt-token",
            "lose-sent-token",
            "corrupt-sent-token",
        ];
        if !known.contains(&fl.kind.get_ref().as_str()) {
            return Err(cx.err(
                fl.kind.span(),
                format!("unknown fault kind `{}`", fl.kind.get_ref()),
                KINDS_HINT,
            ));
        }
        if !nodes[n].is_rether() {
            return Err(cx.err(
                fl.kind.span(),
                format!(
                    "fault kind `{}` at `{}`, which is not a RETHER station",
                    fl.kind.get_ref(),
                    nodes[n].name
                ),
                "RETHER faults are injected at kind = \"rether\" nodes; kind = \"kill\" fails any node",
            ));
        }
        let within = |v: &raw::S<String>, what: &str| -> Result<Instant, ScenarioError> {
            let t = cx.dur_max(v, max, what, "faults happen within the run")?;
            if t >= duration {
                // After the end the station never sees it: a typo for an
                // earlier time, or a run meant to be longer.
                return Err(cx.err(
                    v.span(),
                    format!("{what} = {} is not within the run ({duration})", v.get_ref()),
                    "a fault happens before the scenario's duration: move it earlier, or lengthen the run (leave restart out for a station that stays down)",
                ));
            }
            Ok(Instant(t.as_nanos()))
        };
        let at = within(&fl.at, "at")?;
        let restart = fl.restart.as_ref().map(|v| within(v, "restart")).transpose()?;
        if let (Some(t), Some(v)) = (restart, &fl.restart) {
            if t <= at {
                return Err(cx.err(
                    v.span(),
                    "restart is not after at",
                    "a station restarts after it crashed",
                ));
            }
        }
        let count = fl
            .count
            .as_ref()
            .map(|v| cx.int(v, 1, 1_000_000, "count"))
            .transpose()?
            .unwrap_or(1);
        let extra = |k: &str, sp: Option<Range<usize>>| -> Result<(), ScenarioError> {
            match sp {
                Some(sp) => Err(cx.err(
                    sp,
                    format!("`{k}` does not apply to this fault kind"),
                    "restart goes with crashes, count with token faults",
                )),
                None => Ok(()),
            }
        };
        let kind = match fl.kind.get_ref().as_str() {
            "crash" | "crash-holding" => {
                extra("count", fl.count.as_ref().map(|c| c.span()))?;
                FaultKind::Crash {
                    holding: fl.kind.get_ref() == "crash-holding",
                    restart,
                }
            }
            k @ ("drop-token" | "corrupt-token" | "lose-sent-token" | "corrupt-sent-token") => {
                extra("restart", fl.restart.as_ref().map(|c| c.span()))?;
                match k {
                    "drop-token" => FaultKind::DropTokens { count },
                    "corrupt-token" => FaultKind::CorruptTokens { count },
                    "lose-sent-token" => FaultKind::LoseSentTokens { count },
                    _ => FaultKind::CorruptSentTokens { count },
                }
            }
            other => {
                return Err(cx.err(
                    fl.kind.span(),
                    format!("unknown fault kind `{other}`"),
                    KINDS_HINT,
                ))
            }
        };
        v.push((n, Fault { at, kind }));
    }
    Ok(v)
}

/// Every RETHER station sits on exactly one segment, every RETHER bridge
/// on two or more (§2.5), ids are unique, and the bridges form no loop.
pub(super) fn stations(
    cx: &Ctx,
    f: &raw::File,
    nodes: &[Node],
    links: &[Link],
    params: Option<&RetherParams>,
) -> Result<(), ScenarioError> {
    let node_span = |i: usize| -> Range<usize> {
        f.nodes
            .iter()
            .find(|n| n.get_ref().name.get_ref() == &nodes[i].name)
            .map(|n| n.get_ref().name.span())
            .unwrap_or(0..0)
    };
    let topo = crate::rethertopo::RetherTopo::new(nodes, links);
    let mut ids = std::collections::BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let Some(id) = n.rether_id() else {
            continue;
        };
        if let Some(other) = ids.insert(id, i) {
            return Err(cx.err(
                node_span(i),
                format!(
                    "RETHER {} `{}` has station_id {}, as `{}` has",
                    n.kind_name(),
                    n.name,
                    id,
                    nodes[other].name
                ),
                "give every station and bridge a unique station_id",
            ));
        }
        let degree = links.iter().filter(|l| l.a == i || l.b == i).count();
        let on = topo.segs[i].len();
        if n.is_rether() && (on != 1 || degree != 1) {
            return Err(cx.err(
                node_span(i),
                format!("RETHER station `{}` is not on exactly one shared segment", n.name),
                "list it in one [[segment]]'s nodes and give it no other link; kind = \"rether-bridge\" joins segments",
            ));
        }
        if n.is_rether_bridge() && on < 2 {
            return Err(cx.err(
                node_span(i),
                format!("RETHER bridge `{}` is on {on} segment(s)", n.name),
                "a bridge joins two or more segments: list it in each [[segment]]'s nodes",
            ));
        }
    }
    if let Some(p) = params {
        segment_timing(cx, f, nodes, &topo, p)?;
    }
    if let Some((br, s)) = topo.find_loop(nodes) {
        return Err(cx.err(
            node_span(br),
            format!(
                "RETHER bridges form a loop: `{}` joins segment `{}` to segments it already reaches",
                nodes[br].name, nodes[s].name
            ),
            "bridges run no spanning tree: join segments in a tree (remove a bridge or a segment from its list)",
        ));
    }
    Ok(())
}

/// What a station refuses to start with, checked per RETHER segment at
/// load (so `check` and `sim` agree, with the line): a token frame must
/// fit in t_token, an explicit t_nrt must hold one NRT visit, and the
/// T_NRT the stations derive without one must leave the TRT room.
fn segment_timing(
    cx: &Ctx,
    f: &raw::File,
    nodes: &[Node],
    topo: &crate::rethertopo::RetherTopo,
    p: &RetherParams,
) -> Result<(), ScenarioError> {
    let r = f.rether.as_ref().map(|r| r.get_ref());
    for (s, n) in nodes.iter().enumerate() {
        let NodeKind::Segment(seg) = &n.kind else { continue };
        if topo.members(s).is_empty() {
            continue;
        }
        // The segment's station list: where a timing key left at its
        // default is blamed, and where too many stations are.
        let seg_span = f
            .segments
            .iter()
            .find(|g| g.get_ref().name.get_ref() == &n.name)
            .map(|g| g.get_ref().nodes.span())
            .unwrap_or(0..0);
        let key = |v: Range<usize>| if v.is_empty() { seg_span.clone() } else { v };
        let count = topo.members(s).len();
        if count > qosnet_core::rether::wire::MAX_NODES {
            return Err(cx.err(
                seg_span.clone(),
                format!(
                    "segment `{}` has {count} RETHER stations and bridges; a token frame lists at most {}",
                    n.name,
                    qosnet_core::rether::wire::MAX_NODES
                ),
                "split the stations over several segments joined by kind = \"rether-bridge\" nodes (§2.5)",
            ));
        }
        let m = p.timing(seg.capacity_bps, seg.framing, topo.members(s).len());
        let token = m.wire_time(qosnet_core::rether::wire::TOKEN_FIXED + qosnet_core::wire::ETH_HDR);
        if p.t_token < token {
            return Err(cx.err(
                key(r.map(|r| span(&r.t_token)).unwrap_or(0..0)),
                format!(
                    "t_token {} is shorter than a token frame's wire time on segment `{}` ({token})",
                    p.t_token, n.name
                ),
                "t_token covers passing the token: make it at least that, or the segment faster",
            ));
        }
        if p.t_nrt.is_none() {
            let t = p.station_t_nrt(&m, topo.members(s).len());
            if t >= p.trt {
                return Err(cx.err(
                    key(r.map(|r| span(&r.trt)).unwrap_or(0..0)),
                    format!(
                        "trt {} leaves no time for NRT traffic on segment `{}`: its stations' T_NRT \
                         (eq. 6 with {} stations, at least one maximum-size NRT visit) is {t}",
                        p.trt,
                        n.name,
                        topo.members(s).len()
                    ),
                    "raise trt above that, or give t_nrt below trt",
                ));
            }
        }
        if let (Some(t), Some(one)) = (p.t_nrt, m.nrt_visit_max(p.nrt_policy)) {
            if t < one {
                return Err(cx.err(
                    key(r.map(|r| span(&r.t_nrt)).unwrap_or(0..0)),
                    format!(
                        "t_nrt {t} is below one maximum-size NRT visit on segment `{}` ({one}): NRT traffic could starve",
                        n.name
                    ),
                    "raise t_nrt, or leave it out for eq. 6's value",
                ));
            }
        }
    }
    Ok(())
}
