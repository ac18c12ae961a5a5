//! DiffServ parts of a router built from a scenario (seed 004): the port
//! scheduler of `scheduler = "diffserv"` (and the per-flow fair queueing
//! disciplines), and each router's classifier — edge conditioning by the
//! `[[diffserv.rule]]`s that name it, DSCP → PHB for every router.

use qosnet_core::diffserv::{
    self, DsClassifier, DsSched, DsSchedConf, Exceed, Match, PhbMap, Profile, ProfileKind, Rule, Step, Tcm,
};
use qosnet_core::sched::{
    Drr, FairConf, Fifo, GateEntry, Htb, HtbClass, HtbConf, Prio, QueueConf, Scheduler, Taprio, Wf2q, Wfq,
};
use qosnet_core::{Framing, Instant};

use crate::model::{AddrSpec, DsExceed, DsKind, RouterSpec, Scenario, SchedKind};
use crate::topo::Network;

/// The per-port scheduler for the DiffServ and fair-queueing kinds, or
/// `None` for the others.
pub fn scheduler(
    sc: &Scenario,
    spec: &RouterSpec,
    rate_bps: u64,
    framing: Framing,
) -> Result<Option<Box<dyn Scheduler>>, String> {
    let flows = || {
        // Per-flow queues: each flow may hold a tenth of the port's buffer,
        // all flows together the whole buffer (bounded under any number of flows).
        let per = QueueConf::new(
            1,
            (spec.queue_packets / 10).max(16),
            (spec.queue_bytes / 10).max(16 * 1514),
        );
        FairConf::per_flow(per)
            .with_total_limits(spec.queue_packets, spec.queue_bytes)
            .with_overhead(24)
    };
    Ok(Some(match spec.scheduler {
        SchedKind::DiffServ => {
            let d = &sc.diffserv;
            let mut c = DsSchedConf::new(rate_bps);
            c.ef_rate_bps = d.ef_rate_bps.unwrap_or(rate_bps * 3 / 10).min(rate_bps);
            c.ef_burst = d.ef_burst;
            c.af_weights = d.af_weights;
            c.be_weight = d.be_weight;
            c.queue_pkts = spec.queue_packets;
            c.queue_bytes = spec.queue_bytes;
            c.wred = d.wred;
            Box::new(DsSched::new(c)?)
        }
        SchedKind::Wfq => Box::new(Wfq::new(flows(), rate_bps)?),
        SchedKind::Wf2q => Box::new(Wf2q::new(flows(), rate_bps)?),
        SchedKind::Drr => {
            let mut f = flows();
            if let Some(q) = f.default.as_mut() {
                q.weight = 1514; // quantum: one full frame per round
            }
            Box::new(Drr::new(f)?)
        }
        SchedKind::Prio => {
            // Strict priority over the seven PHB classes (NC, EF, AF1..AF4, BE).
            let bands = (0..diffserv::dscp::CLASSES)
                .map(|_| Box::new(Fifo::new(spec.queue_packets, spec.queue_bytes)) as Box<dyn Scheduler>)
                .collect();
            Box::new(Prio::new(bands))
        }
        SchedKind::Taprio => {
            let t = sc
                .taprio
                .as_ref()
                .ok_or("scheduler taprio needs a [taprio] section")?;
            let gcl = t
                .entries
                .iter()
                .map(|(d, m)| GateEntry {
                    duration: *d,
                    open: *m,
                })
                .collect();
            let base = Instant(t.base_time.as_nanos());
            Box::new(Taprio::new(
                diffserv::dscp::CLASSES,
                spec.queue_packets,
                spec.queue_bytes,
                gcl,
                base,
                rate_bps,
                framing,
            )?)
        }
        SchedKind::Htb => {
            let h = sc.htb.as_ref().ok_or("scheduler htb needs an [htb] section")?;
            let classes = h
                .classes
                .iter()
                .map(|c| {
                    let mut k = HtbClass::new(c.id, c.parent, c.rate_bps, c.ceil_bps)
                        .prio(c.prio)
                        .limits(spec.queue_packets, spec.queue_bytes);
                    if let Some(b) = c.burst {
                        let cburst = b.max(k.cburst);
                        k = k.bursts(b, cburst);
                    }
                    k
                })
                .collect();
            let conf = HtbConf {
                classes,
                default_class: h.default,
                overhead: framing.fcs + framing.preamble + framing.ifg,
            };
            Box::new(Htb::new(conf).map_err(|e| format!("[htb]: {e}"))?)
        }
        _ => return Ok(None),
    }))
}

fn phb_map(sc: &Scenario) -> Result<PhbMap, String> {
    let mut m = PhbMap::default();
    for (d, name) in &sc.diffserv.phb_overrides {
        m.set(*d, diffserv::parse_phb(name)?);
    }
    Ok(m)
}

/// The classifier of router `i`: its edge rules (if any) and the DSCP →
/// PHB map. `None` when no router of the scenario does DiffServ.
pub fn classifier(sc: &Scenario, net: &Network, i: usize) -> Result<Option<DsClassifier>, String> {
    // Class-based schedulers need the DSCP → PHB class of every packet.
    let ds_here = sc.nodes[i].router().is_some_and(|r| {
        matches!(
            r.scheduler,
            SchedKind::DiffServ | SchedKind::Prio | SchedKind::Taprio | SchedKind::Htb
        )
    });
    let mine: Vec<_> = sc
        .diffserv
        .rules
        .iter()
        .filter(|r| r.nodes.contains(&i))
        .collect();
    if !ds_here && mine.is_empty() {
        return Ok(None);
    }
    let profiles = sc
        .diffserv
        .profiles
        .iter()
        .map(|p| Profile {
            name: p.name.clone(),
            kind: match &p.kind {
                DsKind::Mark(d) => ProfileKind::Mark(*d),
                DsKind::Ladder(steps) => ProfileKind::Ladder(
                    steps
                        .iter()
                        .map(|(dscp, rate_bps, burst)| Step {
                            dscp: *dscp,
                            rate_bps: *rate_bps,
                            burst: *burst,
                        })
                        .collect(),
                ),
                DsKind::Tcm {
                    two_rate,
                    cir_bps,
                    cbs,
                    ebs,
                    pir_bps,
                    pbs,
                    aware,
                    green,
                    yellow,
                    red,
                } => ProfileKind::Tcm {
                    tcm: if *two_rate {
                        Tcm::Tr {
                            pir_bps: *pir_bps,
                            pbs: *pbs,
                            cir_bps: *cir_bps,
                            cbs: *cbs,
                        }
                    } else {
                        Tcm::Sr {
                            cir_bps: *cir_bps,
                            cbs: *cbs,
                            ebs: *ebs,
                        }
                    },
                    color_aware: *aware,
                    green: *green,
                    yellow: *yellow,
                    red: *red,
                },
            },
            exceed: match p.exceed {
                DsExceed::Drop => Exceed::Drop,
                DsExceed::Pass => Exceed::Pass,
                DsExceed::Remark(d) => Exceed::Remark(d),
                DsExceed::Shape(n) => Exceed::Shape { limit_pkts: n },
            },
        })
        .collect();
    let addr = |a: &Option<AddrSpec>| {
        a.map(|a| match a {
            AddrSpec::Prefix(p) => (p.addr, p.len),
            AddrSpec::Node(n) => (net.nodes[n].ifaces[0].ip, 32),
        })
    };
    let mut rules = Vec::new();
    for r in mine {
        let in_port = match r.in_node {
            None => None,
            Some(n) => Some(
                net.nodes[i]
                    .ifaces
                    .iter()
                    .position(|f| f.peer == n)
                    .ok_or_else(|| {
                        format!(
                            "rule {}: `{}` is not a neighbour of `{}`",
                            r.name, sc.nodes[n].name, sc.nodes[i].name
                        )
                    })? as u16,
            ),
        };
        rules.push(Rule {
            name: r.name.clone(),
            m: Match {
                src: addr(&r.src),
                dst: addr(&r.dst),
                proto: r.proto,
                sport: r.sport,
                dport: r.dport,
                dscp: r.dscp.clone(),
                in_port,
            },
            profile: r.profile,
        });
    }
    DsClassifier::new(rules, profiles, phb_map(sc)?)
        .map(Some)
        .map_err(|e| format!("router {}: {e}", sc.nodes[i].name))
}
