//! `[stsdr]`: the Switched Two-stage Distributed Router of seed 003 (Khan,
//! Sahoo & Manjunath) — the settings its `stsdr-balancer` and
//! `stsdr-forwarder` nodes share: the WFQ variant (§V: S-DS, M-DS, L-DS, or
//! none), T_br (§IV-A), the phases' CPU costs (§V-A), the K classes and
//! their weights, the queue limit, and the outgoing links OL_1..OL_N (the
//! next-hop nodes on the T-switch, §III-A).

use std::ops::Range;

use qosnet_core::stsdr::{LazyRank, PhaseCosts, Proposer, TieBreak, Variant};
use qosnet_core::Duration;

use super::limits::MAX_RUN;
use super::{Ctx, Names, ScenarioError};
use crate::model::*;
use crate::raw;

/// Longest T_br, phase cost or cycle guard accepted: the paper's cycle is
/// ~100 µs; a second is a misplaced unit.
const MAX_PHASE: Duration = Duration::from_secs(1);

pub(super) fn stsdr(
    cx: &Ctx,
    f: &raw::File,
    names: &Names,
    nodes: &[Node],
    links: &[Link],
    seed: u64,
    run: Duration,
) -> Result<Option<StsdrParams>, ScenarioError> {
    let first_node = f
        .nodes
        .iter()
        .find(|n| n.get_ref().kind.get_ref().starts_with("stsdr-"))
        .map(|n| n.get_ref().kind.span());
    let Some(s) = &f.stsdr else {
        if let Some(sp) = first_node {
            return Err(cx.err(
                sp,
                "STSDR nodes need an [stsdr] table",
                "add [stsdr] with outlinks = [\"next hop 1\", ...] (and variant, t_br, weights...)",
            ));
        }
        return Ok(None);
    };
    let span = s.span();
    let s = s.get_ref();
    let count = |k: fn(&NodeKind) -> bool| nodes.iter().filter(|n| k(&n.kind)).count();
    let fes = count(|k| matches!(k, NodeKind::StsdrForwarder(_)));
    let lbs = count(|k| matches!(k, NodeKind::StsdrBalancer(_)));
    if fes == 0 || lbs == 0 {
        return Err(cx.err(
            span,
            format!("[stsdr] needs at least one stsdr-forwarder and one stsdr-balancer node (found {fes} and {lbs})"),
            "add [[node]] kind = \"stsdr-forwarder\" and kind = \"stsdr-balancer\", each linked to the T-switch",
        ));
    }
    // Every STSDR node has one port, on a switch (the T-switch).
    for (i, n) in nodes.iter().enumerate().filter(|(_, n)| n.is_stsdr()) {
        let ls: Vec<&Link> = links.iter().filter(|l| l.a == i || l.b == i).collect();
        let on_switch = |l: &Link| {
            let peer = if l.a == i { l.b } else { l.a };
            matches!(nodes[peer].kind, NodeKind::Switch(_))
        };
        if ls.len() != 1 || !on_switch(ls[0]) {
            return Err(cx.err(
                node_span(f, &n.name).unwrap_or(span.clone()),
                format!(
                    "{} `{}` must have exactly one link, to the T-switch (it has {})",
                    n.kind_name(),
                    n.name,
                    ls.len()
                ),
                "link it to a kind = \"switch\" node: [[link]] a = \"NAME\", b = \"tsw\"",
            ));
        }
    }
    let variant_name = s.variant.as_ref().map(|v| v.get_ref().as_str()).unwrap_or("sds");
    let vspan = s.variant.as_ref().map(|v| v.span()).unwrap_or(span.clone());
    let l = match &s.l {
        Some(v) => Some(cx.int::<u16>(v, 1, 65_535, "l")?),
        None => None,
    };
    let need_l = |what: &str| {
        l.ok_or_else(|| {
            cx.err(
                vspan.clone(),
                format!("variant \"{variant_name}\" needs l ({what})"),
                "e.g. l = 25",
            )
        })
    };
    let variant = match variant_name {
        "sds" => Variant::Sds,
        "mds" => Variant::Mds {
            slots: need_l("packets of state per queue in a DS frame")?,
        },
        "lds" => Variant::Lds {
            packets: need_l("packets per burst")?,
        },
        "nowfq" => Variant::NoWfq,
        other => {
            return Err(cx.err(
                vspan,
                format!("unknown STSDR variant `{other}`"),
                "use \"sds\", \"mds\", \"lds\" or \"nowfq\"",
            ))
        }
    };
    if let (Some(v), Variant::Sds | Variant::NoWfq) = (&s.l, variant) {
        return Err(cx.err(
            v.span(),
            format!("l does not apply to variant \"{variant_name}\""),
            "l is for \"mds\" and \"lds\"; remove it",
        ));
    }
    let dur = |v: &Option<raw::S<String>>, what: &str, d: Duration| -> Result<Duration, ScenarioError> {
        match v {
            Some(v) => cx.dur_max(v, MAX_PHASE, what, "an STSDR cycle takes microseconds"),
            None => Ok(d),
        }
    };
    let t_br = dur(&s.t_br, "t_br", Duration::from_micros(72))?;
    let weights: Vec<u32> = match (&s.weights, &s.classes) {
        (Some(w), c) => {
            let ws: Vec<u32> = w
                .get_ref()
                .iter()
                .map(|&x| u32::try_from(x).ok().filter(|&x| x >= 1))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    cx.err(
                        w.span(),
                        "weights must be integers ≥ 1",
                        "e.g. weights = [1, 1, 1]",
                    )
                })?;
            if ws.is_empty() || ws.len() > 255 {
                return Err(cx.err(
                    w.span(),
                    "weights need 1 to 255 entries (one per class)",
                    "e.g. weights = [1, 1, 1]",
                ));
            }
            if let Some(c) = c.as_ref().filter(|c| *c.get_ref() != ws.len() as i64) {
                return Err(cx.err(
                    c.span(),
                    format!("classes = {} but {} weights are given", c.get_ref(), ws.len()),
                    "give one weight per class, or drop classes",
                ));
            }
            ws
        }
        (None, Some(c)) => vec![1; cx.int::<usize>(c, 1, 255, "classes")?],
        (None, None) => vec![1; 3],
    };
    let queue_limit = match &s.queue_limit {
        Some(v) => cx.int(v, 1, 1 << 24, "queue_limit")?,
        None => 10_000,
    };
    let mut outlinks = Vec::new();
    for o in s.outlinks.get_ref() {
        let n = names.lookup(cx, o, "outgoing link")?;
        if nodes[n].is_stsdr() || nodes[n].is_l2() {
            return Err(cx.err(
                o.span(),
                format!("outgoing link `{}` is a {}", nodes[n].name, nodes[n].kind_name()),
                "name the next-hop host or router at the far end of each outgoing link",
            ));
        }
        if outlinks.contains(&n) {
            return Err(cx.err(
                o.span(),
                format!("`{}` is listed twice", nodes[n].name),
                "list each next hop once",
            ));
        }
        if !nodes
            .iter()
            .enumerate()
            .any(|(i, x)| matches!(x.kind, NodeKind::StsdrForwarder(_)) && shares_domain(links, i, n))
        {
            return Err(cx.err(
                o.span(),
                format!(
                    "`{}` shares no broadcast domain with the forwarders",
                    nodes[n].name
                ),
                "link the next hop to the T-switch, in the forwarders' VLAN",
            ));
        }
        outlinks.push(n);
    }
    if outlinks.is_empty() || outlinks.len() > 255 {
        return Err(cx.err(
            s.outlinks.span(),
            "outlinks needs 1 to 255 next hops (OL_1..OL_N)",
            "e.g. outlinks = [\"n1\", \"n2\", \"n3\"]",
        ));
    }
    let vlan = match &s.vlan {
        Some(v) => cx.int(v, 2, 4094, "vlan")?,
        None => 4000,
    };
    if let Some(l) = links.iter().find(|l| l.vlan == vlan) {
        let sp = s.vlan.as_ref().map(|v| v.span()).unwrap_or(span.clone());
        return Err(cx.err(
            sp,
            format!("internal VLAN {vlan} is also link {}'s access VLAN", l.name),
            "DS frames need a VLAN of their own: pick another vlan",
        ));
    }
    let tie = match s.tie.as_ref().map(|t| (t.get_ref().as_str(), t.span())) {
        None | Some(("deterministic", _)) => TieBreak::Deterministic,
        Some(("random", _)) => TieBreak::Random { seed },
        Some((o, sp)) => {
            return Err(cx.err(
                sp,
                format!("unknown tie rule `{o}`"),
                "use \"deterministic\" or \"random\" (seeded by [scenario] seed)",
            ))
        }
    };
    let proposer = match s.proposer.as_ref().map(|t| (t.get_ref().as_str(), t.span())) {
        None | Some(("forwarders", _)) => Proposer::Forwarders,
        Some(("outlinks", _)) => Proposer::Outlinks,
        Some((o, sp)) => {
            return Err(cx.err(
                sp,
                format!("unknown proposer `{o}`"),
                "use \"forwarders\" or \"outlinks\"",
            ))
        }
    };
    let lds_rank = match s.lds_rank.as_ref().map(|t| (t.get_ref().as_str(), t.span())) {
        None | Some(("head", _)) => LazyRank::Head,
        Some(("start", _)) => LazyRank::Start,
        Some((o, sp)) => {
            return Err(cx.err(
                sp,
                format!("unknown lds_rank `{o}`"),
                "use \"head\" (the head packet's finish tag, the paper's rule) or \"start\" (the class's start tag)",
            ))
        }
    };
    let costs = match &s.costs {
        None => PhaseCosts::default(),
        Some(c) => {
            let csp = c.span();
            let c = c.get_ref();
            let base = match c.preset.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
                None => PhaseCosts::default(),
                Some(("paper", sp)) => {
                    if t_br > Duration::from_micros(105) {
                        return Err(cx.err(
                            sp,
                            "preset \"paper\" puts phase 1's 105 µs around T_br, but t_br is longer",
                            "set the phase costs one by one, or t_br ≤ 105us",
                        ));
                    }
                    PhaseCosts::paper(t_br)
                }
                Some((o, sp)) => {
                    return Err(cx.err(
                        sp,
                        format!("unknown costs preset `{o}`"),
                        "use preset = \"paper\"",
                    ))
                }
            };
            let _ = csp;
            PhaseCosts {
                ds_build: dur(&c.ds_build, "ds_build", base.ds_build)?,
                phase1: dur(&c.phase1, "phase1", base.phase1)?,
                phase2: dur(&c.phase2, "phase2", base.phase2)?,
                phase3: dur(&c.phase3, "phase3", base.phase3)?,
            }
        }
    };
    let mtu = match &s.mtu {
        Some(v) => cx.int(v, 68, 65_000, "mtu")?,
        None => 1500,
    };

    let opt = |v: &Option<raw::S<String>>, what: &str| -> Result<Option<Duration>, ScenarioError> {
        v.as_ref()
            .map(|v| cx.dur_max(v, MAX_RUN, what, "timeouts are milliseconds"))
            .transpose()
    };
    let ds_loss = match &s.ds_loss {
        Some(v) if !(0.0..=1.0).contains(v.get_ref()) => {
            return Err(cx.err(
                v.span(),
                format!("ds_loss = {} is not a probability", v.get_ref()),
                "give the fraction of DS frames each forwarder loses, 0.0 to 1.0 (0.05 = 5 %)",
            ))
        }
        Some(v) => *v.get_ref(),
        None => 0.0,
    };
    tswitch_mtu(
        cx,
        s,
        nodes,
        links,
        variant,
        (outlinks.len(), weights.len()),
        &span,
    )?;
    let heartbeat = opt(&s.heartbeat, "heartbeat")?.unwrap_or(Duration::from_millis(1));
    let ds_processing = opt(&s.ds_processing, "ds_processing")?;
    if let (Variant::NoWfq, Some(v)) = (variant, &s.heartbeat) {
        if heartbeat > Duration::ZERO {
            heartbeat_floor(cx, v, heartbeat, nodes, links, ds_processing, run)?;
        }
    }
    Ok(Some(StsdrParams {
        variant,
        t_br,
        costs,
        weights,
        queue_limit,
        outlinks,
        vlan,
        tie,
        proposer,
        lds_rank,
        cycle_guard: dur(&s.cycle_guard, "cycle_guard", Duration::ZERO)?,
        mtu,
        fe_timeout: opt(&s.fe_timeout, "fe_timeout")?,
        master_timeout: opt(&s.master_timeout, "master_timeout")?,
        balancer_timeout: opt(&s.balancer_timeout, "balancer_timeout")?.unwrap_or(Duration::from_millis(10)),
        heartbeat,
        ds_processing,
        ds_loss,
    }))
}

/// Heartbeats (the `nowfq` forwarders' liveness broadcasts) may take at
/// most a tenth of what they load: every STSDR node's port receives each
/// forwarder's heartbeat and its CPU spends a DS frame's processing on
/// it. More often, the heartbeats are the workload (at 1 µs they filled
/// the T-switch's port to a forwarder; at 1 ns the simulator ran
/// 2 M events/s for 40 ms of simulated time in a minute and never
/// finished). And the heartbeats of a whole run must stay a countable
/// number of events.
fn heartbeat_floor(
    cx: &Ctx,
    v: &raw::S<String>,
    heartbeat: Duration,
    nodes: &[Node],
    links: &[Link],
    ds_processing: Option<Duration>,
    run: Duration,
) -> Result<(), ScenarioError> {
    let stsdr = |i: usize| nodes[i].is_stsdr();
    let fes = nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::StsdrForwarder(_)))
        .count() as u64;
    let slowest = links
        .iter()
        .filter(|l| stsdr(l.a) || stsdr(l.b))
        .map(|l| l.capacity_bps)
        .min()
        .unwrap_or(1_000_000_000);
    // A heartbeat is a minimum Ethernet frame with a VLAN tag, plus
    // preamble and inter-frame gap on the wire: 64 + 4 + 8 + 12 bytes.
    let wire = Duration::for_bytes(88, slowest);
    let cpu = nodes
        .iter()
        .filter_map(|n| match &n.kind {
            NodeKind::StsdrForwarder(sp) | NodeKind::StsdrBalancer(sp) => {
                Some(ds_processing.unwrap_or_else(|| mean_processing(&sp.processing)))
            }
            _ => None,
        })
        .max()
        .unwrap_or(Duration::ZERO);
    let floor = Duration(wire.max(cpu).as_nanos().saturating_mul(10 * fes));
    if heartbeat < floor {
        return Err(cx.err(
            v.span(),
            format!(
                "heartbeat = {} is below {floor}: the {fes} forwarders' heartbeats would take over a tenth of each STSDR node's port ({wire} each on the wire) or CPU ({cpu} to process each)",
                v.get_ref()
            ),
            format!(
                "use at least \"{}\" (10 x forwarders x the larger of the two); heartbeats only need to come well within balancer_timeout (default 10ms), the default is \"1ms\"",
                super::fmt_dur(floor)
            ),
        ));
    }
    let firings = (run.as_nanos() / heartbeat.as_nanos()).saturating_mul(fes);
    if firings > super::limits::MAX_TIMER_FIRINGS {
        return Err(cx.err(
            v.span(),
            format!(
                "heartbeat = {}: {firings} heartbeats in the {run} run (with its drain), more than {} events for one timer",
                v.get_ref(),
                super::limits::MAX_TIMER_FIRINGS
            ),
            "use a longer heartbeat or a shorter run",
        ));
    }
    Ok(())
}

/// The mean of a node's per-packet processing time.
fn mean_processing(p: &qosnet_core::node::cpu::ProcDist) -> Duration {
    use qosnet_core::node::cpu::ProcDist;
    match *p {
        ProcDist::Fixed(d) => d,
        ProcDist::Uniform(a, b) => Duration((a.as_nanos() + b.as_nanos()) / 2),
        ProcDist::Exp { base, mean } => base + mean,
    }
}

/// The DS frames must cross the T-switch: a switch drops frames over its
/// own MTU (counted `oversize`), and the forwarders would never hear each
/// other (M-DS with l = 150 and mtu = 9000 over a 1500-byte T-switch:
/// 6 148 DS frames dropped, no flow got a packet). A frame's size is the
/// variant's longest DS frame (the master's, with offsets), not `mtu`,
/// which only bounds it: mtu = 9000 with S-DS's small frames crosses a
/// 1500-byte switch. Real jumbo frames (§VI) need the switch configured
/// for them too, so the scenario must say so (switch `mtu`) rather than
/// qosnet raising it silently.
fn tswitch_mtu(
    cx: &Ctx,
    s: &raw::Stsdr,
    nodes: &[Node],
    links: &[Link],
    variant: Variant,
    dims: (usize, usize),
    span: &Range<usize>,
) -> Result<(), ScenarioError> {
    let ds = qosnet_core::stsdr::wire::payload_len(dims.0, dims.1, variant.slots(), true);
    for l in links {
        let (a, b) = (&nodes[l.a], &nodes[l.b]);
        let (sw, spec) = match (&a.kind, &b.kind) {
            (NodeKind::Switch(sp), _) if b.is_stsdr() => (a, sp),
            (_, NodeKind::Switch(sp)) if a.is_stsdr() => (b, sp),
            _ => continue,
        };
        if spec.mtu < ds {
            let sp = [&s.mtu, &s.l]
                .into_iter()
                .find_map(|v| v.as_ref().map(|v| v.span()))
                .unwrap_or(span.clone());
            return Err(cx.err(
                sp,
                format!(
                    "DS frames of up to {ds} bytes (l = {} slots per queue, {} outlinks, {} classes) are larger than the T-switch `{}` passes (its mtu is {}): it would drop every one and the forwarders would forward nothing",
                    variant.slots(),
                    dims.0,
                    dims.1,
                    sw.name,
                    spec.mtu
                ),
                format!(
                    "give the T-switch jumbo frames, switch = {{ mtu = {} }} on node `{}` (at most 9216), or a smaller l",
                    ds.max(1500),
                    sw.name
                ),
            ));
        }
    }
    Ok(())
}

fn node_span(f: &raw::File, name: &str) -> Option<Range<usize>> {
    f.nodes
        .iter()
        .map(|n| &n.get_ref().name)
        .find(|n| n.get_ref() == name)
        .map(|n| n.span())
}

/// Whether nodes `a` and `b` have ports in one broadcast domain.
fn shares_domain(links: &[Link], a: usize, b: usize) -> bool {
    let doms = |n: usize| {
        links
            .iter()
            .filter_map(move |l| if l.a == n || l.b == n { l.domain } else { None })
    };
    doms(a).any(|d| doms(b).any(|e| e == d))
}
