//! `[[flow]]`: traffic between hosts — size, rate, pattern, timing, DSCP,
//! TTL — and, for TDP, its path (a chain, or a ring walked `loops` times
//! with TTL-range routes, ICC 2006 §IV-B), forwarding delay and slots.

use std::collections::HashSet;
use std::ops::Range;

use qosnet_core::probe::{COMPACT_LEN, MIN_IP_SIZE};
use qosnet_core::Duration;

use super::header::Header;
use super::limits::{MAX_RUN, MIN_FLOW_PPS};
use super::{fmt_dur, rate_hint, Ctx, Names, ScenarioError};
use crate::model::*;
use crate::raw;
use crate::units::{fmt_bitrate, parse_rate};

/// How far beyond its host's link a flow may send (overload experiments).
const OVERLOAD: f64 = 10.0;

/// Where a flow's keys are, for messages after loading.
pub(super) struct FlowSpans {
    pub name: Range<usize>,
    pub slots: Option<Range<usize>>,
}

/// Validate the flows `raw` yields (one at a time: a file may have very
/// many, and each raw table is dropped once its flow is built).
#[allow(clippy::too_many_arguments)]
pub(super) fn flows(
    cx: &Ctx,
    raw: impl Iterator<Item = Result<raw::S<raw::Flow>, ScenarioError>>,
    f: &raw::File,
    h: &Header,
    names: &Names,
    nodes: &[Node],
    links: &[Link],
    domains: &[Domain],
    tdp: Option<&TdpParams>,
) -> Result<(Vec<Flow>, Vec<FlowSpans>), ScenarioError> {
    // Each node's broadcast domains, and each host's link (it has one).
    let mut node_domains: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (di, d) in domains.iter().enumerate() {
        for m in &d.members {
            if !node_domains[m.0].contains(&di) {
                node_domains[m.0].push(di);
            }
        }
    }
    let mut host_link: Vec<Option<usize>> = vec![None; nodes.len()];
    for (li, l) in links.iter().enumerate() {
        for n in [l.a, l.b] {
            if nodes[n].is_host() {
                host_link[n].get_or_insert(li);
            }
        }
    }
    // IP nodes that share a broadcast domain are neighbours.
    let adjacent = |a: usize, b: usize| node_domains[a].iter().any(|d| node_domains[b].contains(d));
    // The router a host reaches first: the first router in its domain.
    let attach = |h: usize| {
        node_domains[h].first().and_then(|&d| {
            domains[d]
                .members
                .iter()
                .map(|m| m.0)
                .find(|&n| nodes[n].is_router())
        })
    };
    let tdp = tdp.cloned();
    let mut flows = Vec::new();
    let mut flow_names = HashSet::new();
    let mut spans = Vec::new();
    // One read per capture, however many flows take their sizes from it.
    let mut traces: std::collections::HashMap<std::path::PathBuf, std::sync::Arc<[u16]>> = Default::default();
    for (i, fl) in raw.enumerate() {
        let fl = fl?;
        let span = fl.span();
        let fl = fl.get_ref();
        spans.push(FlowSpans {
            name: fl.name.span(),
            slots: fl.slots.as_ref().map(|s| s.span()),
        });
        let name = fl.name.get_ref().clone();
        if !flow_names.insert(name.clone()) {
            return Err(cx.err(
                fl.name.span(),
                format!("duplicate flow name `{name}`"),
                "give every flow a unique name",
            ));
        }
        let from = names.lookup(cx, &fl.from, "flow source")?;
        let to = names.lookup(cx, &fl.to, "flow destination")?;
        for (v, n) in [(&fl.from, from), (&fl.to, to)] {
            if !nodes[n].is_host() {
                return Err(cx.err(
                    v.span(),
                    format!(
                        "`{}` is a {}; flows run between hosts",
                        nodes[n].name,
                        nodes[n].kind_name()
                    ),
                    "name a node of kind \"host\"",
                ));
            }
        }
        let o = fl.opts(&f.defaults.flow);
        let size = match &o.size {
            None => {
                return Err(cx.err(
                    span,
                    format!("flow `{name}` has no size"),
                    "set size = 1002 (IP bytes) or size = \"imix\"",
                ))
            }
            Some(s) => match s.get_ref() {
                raw::SizeSpec::Bytes(b) if (MIN_IP_SIZE as i64..=9000).contains(b) => SizeDist::Fixed(*b as u32),
                raw::SizeSpec::Bytes(b) if (28..MIN_IP_SIZE as i64).contains(b) => {
                    return Err(cx.err(
                        s.span(),
                        format!(
                            "size = {b} leaves {} bytes of UDP payload, too few for qosnet's measurement probe ({COMPACT_LEN} bytes): its packets could not be measured",
                            b - 28
                        ),
                        format!(
                            "use at least {MIN_IP_SIZE} IP bytes (IMIX's small packets); a minimum Ethernet frame (64 bytes on the wire) carries 46"
                        ),
                    ))
                }
                raw::SizeSpec::Bytes(b) => {
                    return Err(cx.err(
                        s.span(),
                        format!("size = {b} is not a valid IP packet size"),
                        format!("use {MIN_IP_SIZE} to 9000 bytes (IP header included)"),
                    ))
                }
                raw::SizeSpec::Named(n) if n == "imix" => SizeDist::Imix,
                raw::SizeSpec::Named(n) if n.starts_with("pcap:") => {
                    SizeDist::Trace(pcap_sizes(cx, &n["pcap:".len()..], s.span(), &mut traces)?)
                }
                raw::SizeSpec::Named(n) => {
                    return Err(cx.err(
                        s.span(),
                        format!("unknown size `{n}`"),
                        "use a number of IP bytes, \"imix\" or \"pcap:FILE\" (a capture's sizes)",
                    ))
                }
            },
        };
        let rate = match &o.rate {
            None => {
                return Err(cx.err(
                    span,
                    format!("flow `{name}` has no rate"),
                    "set rate = \"800pps\" or rate = \"6.4Mb/s\"",
                ))
            }
            Some(r) => {
                parse_rate(r.get_ref()).map_err(|e| cx.err(r.span(), e, rate_hint("rate = \"800pps\"")))?
            }
        };
        // A host cannot send faster than its link carries its packets; up
        // to OVERLOAD times that is an overload experiment (the excess is
        // dropped, counted, at the host's NIC), beyond it only a way to
        // make the simulator crawl.
        let rate_span = o.rate.as_ref().map(|r| r.span()).unwrap_or(span.clone());
        let pps = rate.pps(size.mean());
        if let Some(li) = host_link[from] {
            let l = &links[li];
            let wire_bits = 8.0 * l.framing.wire_bytes(14 + size.mean().round() as usize) as f64;
            let link_pps = l.capacity_bps as f64 / wire_bits;
            let max_pps = (link_pps * OVERLOAD).floor();
            if pps > max_pps {
                let max_ip = fmt_bitrate((max_pps * 8.0 * size.mean()).floor() as u64);
                return Err(cx.err(
                    rate_span,
                    format!(
                        "flow `{name}` sends {} packets/s, more than {OVERLOAD} times the {link_pps:.0} its host's link `{}` ({}) carries",
                        if pps < 1e9 { format!("{pps:.0}") } else { format!("{pps:.3e}") },
                        l.name,
                        fmt_bitrate(l.capacity_bps)
                    ),
                    format!(
                        "use at most {max_pps:.0}pps ({max_ip} of {:.0}-byte IP packets; the link itself carries {link_pps:.0}pps), or give the link more capacity",
                        size.mean()
                    ),
                ));
            }
        }
        if pps < MIN_FLOW_PPS {
            return Err(cx.err(
                rate_span,
                format!("flow `{name}` sends less than one packet a day ({pps:e} packets/s)"),
                "a flow sends at least one packet per day, the longest run",
            ));
        }
        let pattern = match o.pattern.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
            None | Some(("cbr", _)) | Some(("poisson", _)) => {
                // `on`/`off` on the flow itself with another pattern would
                // do nothing: the user meant something else. (From
                // [defaults.flow] they may serve other flows.)
                if let Some(k) = fl.on.as_ref().or(fl.off.as_ref()) {
                    let p = o.pattern.as_ref().map(|p| p.get_ref().as_str()).unwrap_or("cbr");
                    return Err(cx.err(
                        k.span(),
                        format!("`on`/`off` have no effect on flow `{name}`: its pattern is \"{p}\""),
                        "set pattern = \"onoff\", or remove on and off",
                    ));
                }
                if o.pattern.as_ref().is_some_and(|p| p.get_ref() == "poisson") {
                    Pattern::Poisson
                } else {
                    Pattern::Cbr
                }
            }
            Some(("onoff", sp)) => {
                let (Some(on), Some(off)) = (&o.on, &o.off) else {
                    return Err(cx.err(
                        sp,
                        "pattern \"onoff\" needs `on` and `off` durations",
                        "add on = \"10ms\", off = \"10ms\"",
                    ));
                };
                let why = "a period longer than the longest run never ends";
                let (on_d, off_d) = (
                    cx.dur_max(on, MAX_RUN, "on", why)?,
                    cx.dur_max(off, MAX_RUN, "off", why)?,
                );
                // Nothing is ever sent in an on period of zero.
                if on_d == Duration::ZERO {
                    return Err(cx.err(
                        on.span(),
                        format!("flow `{name}` has on = 0: it would never send"),
                        "give the on period a length, e.g. on = \"10ms\"",
                    ));
                }
                // No off time is plain CBR; a sweep over off times may
                // well include 0, so it is accepted with a word.
                if off_d == Duration::ZERO {
                    cx.warn(
                        off.span(),
                        format!("flow `{name}` has off = 0: it sends as pattern \"cbr\" would"),
                    );
                }
                Pattern::OnOff { on: on_d, off: off_d }
            }
            Some((p, sp)) => {
                return Err(cx.err(
                    sp,
                    format!("unknown pattern `{p}`"),
                    "use \"cbr\", \"poisson\" or \"onoff\"",
                ))
            }
        };
        let why = "flows start and stop within a run, at most a day long";
        let start = o
            .start
            .as_ref()
            .map(|s| cx.dur_max(s, MAX_RUN, "start", why))
            .transpose()?
            .unwrap_or(Duration::ZERO);
        let stop = o
            .stop
            .as_ref()
            .map(|s| cx.dur_max(s, MAX_RUN, "stop", why))
            .transpose()?;
        if let (Some(st), Some(sp)) = (stop, o.stop.as_ref()) {
            // Stopping before starting is a slip (the two swapped).
            if st < start {
                return Err(cx.err(
                    sp.span(),
                    format!("flow `{name}` stops ({st}) before it starts ({start})"),
                    "stop must be later than start",
                ));
            }
            // stop = start is how a flow is switched off from the command
            // line (`--set flow.bulk.stop=0s`, as the DiffServ reproduction
            // does for its uncongested baseline): accepted, with a word.
            if st == start {
                cx.warn(
                    sp.span(),
                    format!("flow `{name}` stops when it starts ({st}): it sends nothing"),
                );
            }
        }
        // Accepted with a warning: a shorter run (`--duration`) of a
        // scenario whose flows start late is a fair thing to ask for.
        let start_span = o.start.as_ref().map(|s| s.span()).unwrap_or(span.clone());
        if stop.is_some_and(|st| st <= start) {
            // Warned above (or refused).
        } else if start >= h.duration {
            cx.warn(
                start_span,
                format!(
                    "flow `{name}` starts at {start}, when the run (duration {}) is over: it sends nothing",
                    h.duration
                ),
            );
        } else if stop.unwrap_or(h.duration).min(h.duration) <= h.warmup {
            let sp = o.stop.as_ref().map(|s| s.span()).unwrap_or(start_span);
            cx.warn(
                sp,
                format!(
                    "flow `{name}` stops within the warm-up ({}): none of its packets is measured",
                    fmt_dur(h.warmup)
                ),
            );
        }
        let ttl: u8 = o
            .ttl
            .as_ref()
            .map(|v| cx.int(v, 2, 255, "ttl"))
            .transpose()?
            .unwrap_or(64);
        let dscp: u8 = match &o.dscp {
            None => 0,
            Some(v) => match v.get_ref() {
                raw::DscpSpec::Number(n) if (0..=63).contains(n) => *n as u8,
                raw::DscpSpec::Number(n) => {
                    return Err(cx.err(
                        v.span(),
                        format!("dscp = {n} is out of range"),
                        "use 0 to 63 or a name such as \"EF\" or \"AF11\"",
                    ))
                }
                raw::DscpSpec::Name(n) => cx.dscp(n, v.span())?,
            },
        };
        let echo = o.echo.as_ref().map(|b| *b.get_ref()).unwrap_or(false);
        if echo && from == to {
            let sp = o.echo.as_ref().map(|b| b.span()).unwrap_or(span.clone());
            return Err(cx.err(
                sp,
                format!("echo flow `{name}` starts and ends at the same host"),
                "an echo flow needs a distinct destination that answers",
            ));
        }
        let rt = fl.rt.as_ref().map(|b| *b.get_ref()).unwrap_or(false);
        if rt {
            let sp = fl.rt.as_ref().map(|b| b.span()).unwrap_or(span.clone());
            if !nodes[from].is_rether() || !nodes[to].is_rether() || from == to {
                return Err(cx.err(
                    sp,
                    format!("rt flow `{name}` must run between two RETHER stations"),
                    "make `from` and `to` distinct nodes of kind \"rether\", or remove rt = true",
                ));
            }
            if echo || pattern != Pattern::Cbr {
                return Err(cx.err(
                    sp,
                    format!("rt flow `{name}` must be a periodic (cbr) flow without echo"),
                    "an RT session sends one unit (packet) per period: pattern = \"cbr\"",
                ));
            }
        }
        let loops: u32 = fl
            .loops
            .as_ref()
            .map(|v| cx.int(v, 1, 250, "loops"))
            .transpose()?
            .unwrap_or(1);

        // Path: given (ring or chain), or none (shortest path at build time).
        let mut path = Vec::new();
        let mut ring = false;
        if let Some(p) = &o.path {
            for v in p.get_ref() {
                let n = names.lookup(cx, v, "path node")?;
                if !nodes[n].is_router() {
                    return Err(cx.err(
                        v.span(),
                        format!("path node `{}` is a {}", nodes[n].name, nodes[n].kind_name()),
                        "a path lists routers only",
                    ));
                }
                path.push(n);
            }
            if path.is_empty() {
                return Err(cx.err(
                    p.span(),
                    "empty path",
                    "list the routers the flow visits, or leave path out",
                ));
            }
            for w in path.windows(2) {
                if !adjacent(w[0], w[1]) {
                    return Err(cx.err(
                        p.span(),
                        format!(
                            "no link between `{}` and `{}` on the path",
                            nodes[w[0]].name, nodes[w[1]].name
                        ),
                        "add the link or change the path",
                    ));
                }
            }
            if attach(from) != Some(path[0]) {
                return Err(cx.err(
                    p.span(),
                    format!(
                        "path starts at `{}` but host `{}` is attached elsewhere",
                        nodes[path[0]].name, nodes[from].name
                    ),
                    "start the path at the router the source host is linked to",
                ));
            }
            let last = *path.last().unwrap_or(&path[0]);
            if attach(to) == Some(path[0])
                && path.len() > 2
                && last != path[0]
                && adjacent(last, path[0])
                && fl.loops.is_some()
            {
                ring = true;
            } else if fl.loops.is_some() {
                return Err(cx.err(fl.loops.as_ref().map(|l| l.span()).unwrap_or(span.clone()), "`loops` needs a ring path: at least 3 routers, the last linked back to the first, and the destination host on the first", "remove loops or make the path a ring"));
            } else if attach(to) != Some(last) {
                return Err(cx.err(
                    p.span(),
                    format!(
                        "path ends at `{}` but host `{}` is attached elsewhere",
                        nodes[last].name, nodes[to].name
                    ),
                    "end the path at the destination host's router",
                ));
            }
            if ring {
                let hops = loops as usize * path.len() + 1;
                if hops + 1 >= ttl as usize {
                    return Err(cx.err(
                        span,
                        format!("flow `{name}` makes {hops} router hops but starts with TTL {ttl}"),
                        "raise ttl or lower loops",
                    ));
                }
            }
        } else if let Some(l) = &fl.loops {
            return Err(cx.err(
                l.span(),
                "`loops` without a `path`",
                "give the ring as path = [\"R1\", \"R2\", \"R3\"]",
            ));
        }
        let tdp_flag = o.tdp.as_ref().map(|b| *b.get_ref()).unwrap_or(true);
        // A packet that waits longer than shaper_max_hold at its edge for
        // its reserved TF is dropped. A flow whose packets come further
        // apart than that may have all of them arrive too early: a CBR
        // flow keeps its phase against its slots (lowering the ICC 2006
        // testbed's 800 pps to 200 pps lost every packet of four flows).
        if let Some(hold) = tdp.as_ref().filter(|_| tdp_flag).and_then(|t| t.shaper_max_hold) {
            let gap = 1.0 / pps;
            if gap > hold.as_secs_f64() {
                cx.warn(
                    rate_span.clone(),
                    format!(
                        "flow `{name}` sends a packet every {} on average, longer than [tdp] shaper_max_hold = {}: \
                         a packet that reaches its edge more than {} before its time frame is dropped (shaper_hold), \
                         and a CBR flow keeps that phase, so it may lose every packet; \
                         set shaper_max_hold = \"none\" or to at least the flow's period",
                        fmt_dur(Duration((gap * 1e9).round() as u64)),
                        fmt_dur(hold),
                        fmt_dur(hold),
                    ),
                );
            }
        }
        let tdp_delay = fl
            .tdp_delay
            .as_ref()
            .map(|v| cx.int(v, 1, 10_000, "tdp_delay"))
            .transpose()?;
        let slots = match &fl.slots {
            None => None,
            Some(s) => {
                let Some(t) = &tdp else {
                    return Err(cx.err(
                        s.span(),
                        "slots given but the scenario has no [tdp] section",
                        "add [tdp] or remove slots",
                    ));
                };
                let mut v = Vec::new();
                for x in s.get_ref() {
                    if *x < 0 || *x >= t.tfs_per_tc as i64 {
                        return Err(cx.err(
                            s.span(),
                            format!("slot {x} is outside the time cycle"),
                            format!("slots are TF numbers 0..{} within the TC", t.tfs_per_tc - 1),
                        ));
                    }
                    v.push(*x as u32);
                }
                Some(v)
            }
        };
        if let (Some(v), Some(t), Some(sp)) = (&slots, &tdp, fl.slots.as_ref().map(|s| s.span())) {
            let tc_s = t.tf.as_secs_f64() * t.tfs_per_tc as f64;
            let need = (rate.pps(size.mean()) * tc_s - 1e-9).ceil().max(1.0) as usize;
            if v.len() != need {
                return Err(cx.err(
                    sp,
                    format!(
                        "slots lists {} TFs but flow `{name}` sends {need} packets per time cycle",
                        v.len()
                    ),
                    format!(
                        "list exactly {need} TFs (one per packet), or remove slots to let qosnet plan them"
                    ),
                ));
            }
        }
        flows.push(Flow {
            name,
            id: i as u32,
            from,
            to,
            path,
            loops,
            ring,
            size,
            rate,
            pattern,
            start,
            stop,
            ttl,
            dscp,
            sport: fl
                .sport
                .as_ref()
                .map(|v| cx.int(v, 1, 65535, "sport"))
                .transpose()?
                // 10000 up, wrapping before 65535 in files of many flows.
                .unwrap_or(10_000 + (i % 55_536) as u16),
            dport: fl
                .dport
                .as_ref()
                .map(|v| cx.int(v, 1, 65535, "dport"))
                .transpose()?
                .unwrap_or(5_001),
            tdp: tdp_flag,
            tdp_delay,
            slots,
            echo,
            rt,
        });
    }

    Ok((flows, spans))
}

/// `size = "pcap:FILE"`: the IP sizes of a capture (`crate::sizetrace`),
/// FILE relative to the scenario file's directory. Sizes a flow cannot
/// send are brought into range, with a warning that counts them: below
/// [`MIN_IP_SIZE`] (too small for the measurement probe: TCP ACKs, 40
/// bytes) up to it, above 9000 (a capture of segmentation-offloaded
/// traffic has 64 KB "packets") down to 9000.
fn pcap_sizes(
    cx: &Ctx,
    file: &str,
    span: std::ops::Range<usize>,
    cache: &mut std::collections::HashMap<std::path::PathBuf, std::sync::Arc<[u16]>>,
) -> Result<std::sync::Arc<[u16]>, ScenarioError> {
    let hint = "size = \"pcap:FILE\" takes a pcap capture of IP traffic, FILE relative to the scenario file";
    if file.is_empty() {
        return Err(cx.err(span, "size = \"pcap:\" names no file", hint));
    }
    let dir = std::path::Path::new(cx.file)
        .parent()
        .unwrap_or(std::path::Path::new(""));
    let path = dir.join(file);
    if let Some(t) = cache.get(&path) {
        return Ok(t.clone());
    }
    let t = crate::sizetrace::read(&path).map_err(|e| cx.err(span.clone(), e, hint))?;
    let (lo, hi) = (MIN_IP_SIZE as u16, 9000u16);
    let raised = t.sizes.iter().filter(|&&b| b < lo).count();
    let cut = t.sizes.iter().filter(|&&b| b > hi).count();
    if raised + cut > 0 {
        cx.warn(
            span.clone(),
            format!(
                "{}: {raised} of {} sizes below {lo} IP bytes raised to {lo} (the measurement probe's minimum), {cut} above {hi} cut to {hi}",
                path.display(),
                t.sizes.len()
            ),
        );
    }
    let sizes: std::sync::Arc<[u16]> = t.sizes.iter().map(|&b| b.clamp(lo, hi)).collect();
    cache.insert(path, sizes.clone());
    Ok(sizes)
}
