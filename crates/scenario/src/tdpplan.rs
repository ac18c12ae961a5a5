//! TDP reservations for a scenario (ICC 2006 §II-B, §II-E): which flows
//! are reserved, the TF offsets of each of their hops, and a plan that
//! places every reserved packet into a TF of every link it crosses without
//! exceeding any link's T_f·C budget. The planning itself (admission
//! control, slot search) is `qosnet_core::tdp::plan`; this module turns a
//! scenario and its routes into the planner's input and back.

use std::collections::HashMap;

use qosnet_core::tdp::{plan as core_plan, tf_budget_bytes, Ctr, PlanError, PlanFlow, PlanLink};

use crate::model::{Scenario, SchedKind};
use crate::topo::Network;

#[derive(Clone, Debug)]
pub struct TdpPlan {
    /// Per flow (scenario order): reserved TFs within the TC at the first
    /// hop, or `None` if the flow is best effort.
    pub slots: Vec<Option<Vec<u32>>>,
    /// Per flow: TF offset of each hop from the first.
    pub offsets: Vec<Vec<u32>>,
    /// Per node: the largest forwarding delay it must buffer for (n_buf − 1).
    pub d_max: Vec<u32>,
    /// Per planned link: (node, port, name, budget, reserved bytes per TF).
    pub links: Vec<(usize, usize, String, u64, Vec<u64>)>,
}

fn is_tdp(sc: &Scenario, i: usize) -> bool {
    matches!(sc.nodes[i].router(), Some(r) if r.scheduler == SchedKind::Tdp)
}

/// Plan the reservations of every TDP flow of `sc`.
pub fn plan(sc: &Scenario, net: &Network) -> Result<TdpPlan, String> {
    plan_checked(sc, net).map_err(|e| e.1)
}

/// [`plan`], with the index of the flow that does not fit (or whose slots
/// overbook a link) beside the message, for the loader to point at.
pub fn plan_checked(sc: &Scenario, net: &Network) -> Result<TdpPlan, (Option<usize>, String)> {
    let t = sc
        .tdp
        .as_ref()
        .ok_or((None, "scenario has no [tdp] section".to_string()))?;
    let ctr = Ctr::new(t.tf, t.tfs_per_tc, t.tcs_per_sc).map_err(|e| (None, e.to_string()))?;
    let tc_s = ctr.tc_len().as_secs_f64();

    // One planner link per router output port.
    let mut link_ix: HashMap<(usize, usize), usize> = HashMap::new();
    let mut plinks = Vec::new();
    let mut where_ = Vec::new();
    for (i, nn) in net.nodes.iter().enumerate() {
        if !is_tdp(sc, i) {
            continue;
        }
        for (p, f) in nn.ifaces.iter().enumerate() {
            let l = &sc.links[f.link];
            link_ix.insert((i, p), plinks.len());
            where_.push((i, p));
            plinks.push(PlanLink {
                name: format!("{}->{}", sc.nodes[i].name, sc.nodes[f.peer].name),
                budget: tf_budget_bytes(&ctr, l.capacity_bps),
            });
        }
    }

    let mut d_max: Vec<u32> = sc
        .nodes
        .iter()
        .map(|n| n.router().map(|r| r.tdp_delay).unwrap_or(0))
        .collect();
    let mut pflows = Vec::new();
    let mut which = Vec::new();
    let mut offsets = vec![Vec::new(); sc.flows.len()];
    for (fi, f) in sc.flows.iter().enumerate() {
        let hops = &net.hops[fi];
        if !f.tdp || hops.iter().any(|h| !is_tdp(sc, h.node)) {
            continue;
        }
        let mut off = Vec::with_capacity(hops.len());
        let mut acc = 0u32;
        for (k, h) in hops.iter().enumerate() {
            let d = f
                .tdp_delay
                .unwrap_or_else(|| sc.nodes[h.node].router().map(|r| r.tdp_delay).unwrap_or(1));
            if k > 0 {
                acc += d;
            }
            d_max[h.node] = d_max[h.node].max(d);
            off.push(acc);
        }
        // The largest packet the flow sends (reservations hold it).
        let size = f.size.max() as usize;
        let wire = hops
            .iter()
            .map(|h| {
                sc.links[net.nodes[h.node].ifaces[h.port].link]
                    .framing
                    .wire_bytes(14 + size)
            })
            .max()
            .unwrap_or(0);
        let pkts = (f.pps() * tc_s - 1e-9).ceil().max(1.0) as u32;
        pflows.push(PlanFlow {
            name: f.name.clone(),
            hops: hops
                .iter()
                .zip(&off)
                .map(|(h, o)| (link_ix[&(h.node, h.port)], *o))
                .collect(),
            pkts_per_tc: pkts,
            wire_bytes: wire,
            fixed_slots: f.slots.clone(),
        });
        which.push(fi);
        offsets[fi] = off;
    }
    let p = core_plan(&plinks, t.tfs_per_tc, &pflows).map_err(|e| {
        let fi = match &e {
            PlanError::Overbooked(o) => sc.flows.iter().position(|f| f.name == o.flow),
            PlanError::NoRoom { flow, .. } => sc.flows.iter().position(|f| &f.name == flow),
            // The planner names the flow in its message ("flow NAME ...").
            PlanError::Invalid(m) => sc
                .flows
                .iter()
                .position(|f| m.contains(&format!("flow {} ", f.name))),
        };
        (fi, format!("TDP reservation: {e}"))
    })?;
    let mut slots = vec![None; sc.flows.len()];
    for (k, fi) in which.iter().enumerate() {
        slots[*fi] = p.slots_of(&pflows[k].name).map(|s| s.to_vec());
    }
    let links = where_
        .iter()
        .enumerate()
        .map(|(li, (n, port))| {
            (
                *n,
                *port,
                plinks[li].name.clone(),
                plinks[li].budget,
                p.reservations.per_tf(li).to_vec(),
            )
        })
        .collect();
    Ok(TdpPlan {
        slots,
        offsets,
        d_max,
        links,
    })
}

impl TdpPlan {
    /// A JSON summary for results.json.
    pub fn summary_json(&self, sc: &Scenario, _net: &Network) -> serde_json::Value {
        let flows: serde_json::Map<String, serde_json::Value> = sc
            .flows
            .iter()
            .zip(&self.slots)
            .filter_map(|(f, s)| s.as_ref().map(|s| (f.name.clone(), serde_json::json!(s))))
            .collect();
        let links: serde_json::Map<String, serde_json::Value> = self
            .links
            .iter()
            .filter(|l| l.4.iter().any(|b| *b > 0))
            .map(|(_, _, name, budget, per)| {
                let full = per.iter().filter(|b| **b > 0 && budget - **b < 64).count();
                (
                    name.clone(),
                    serde_json::json!({
                        "budget_bytes_per_tf": budget,
                        "max_reserved_bytes_per_tf": per.iter().max(),
                        "tfs_reserved": per.iter().filter(|b| **b > 0).count(),
                        "tfs_full": full,
                    }),
                )
            })
            .collect();
        serde_json::json!({ "flows": flows, "links": links })
    }

    /// A human-readable description for `qosnet check`.
    pub fn describe(&self, sc: &Scenario, _net: &Network) -> String {
        let mut s = String::from("TDP reservation plan (TFs within the TC at each flow's first hop):\n");
        for (f, sl) in sc.flows.iter().zip(&self.slots) {
            match sl {
                Some(v) => s += &format!("  {:<10} {} packets/TC in TFs {:?}\n", f.name, v.len(), v),
                None => s += &format!("  {:<10} best effort (not reserved)\n", f.name),
            }
        }
        s += "reserved bytes per TF (max / budget, TFs used):\n";
        for (_, _, name, budget, per) in &self.links {
            let used = per.iter().filter(|b| **b > 0).count();
            if used > 0 {
                s += &format!(
                    "  {:<12} {:>5} / {} B, {} of {} TFs\n",
                    name,
                    per.iter().max().unwrap_or(&0),
                    budget,
                    used,
                    per.len()
                );
            }
        }
        s
    }
}
