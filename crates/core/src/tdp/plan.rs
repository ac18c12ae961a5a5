//! Reservations and TF planning (ICC 2006 §II-A, §II-B, §II-E).
//!
//! TDP reserves TFs to flows at reservation time; the schedule repeats
//! every TC. A flow injected in TF `s` of the TC crosses its k-th link in
//! TF `s + offset_k` (mod `n_TF`), where `offset_k` sums the forwarding
//! delays of the hops before it. The paper's prototype had no signalling
//! and reserved by hand (§III); [`plan`] does the same job offline:
//! admission control for hand-typed slots, then a placement of the rest.

use std::collections::HashSet;
use std::error::Error;
use std::fmt;

/// A reservation that would exceed a link's TF budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overbooked {
    /// Link name.
    pub link: String,
    /// TF inside the TC.
    pub tf: u32,
    /// Flow asking.
    pub flow: String,
    /// Wire bytes asked for.
    pub needs: u64,
    /// Wire bytes already reserved in that TF.
    pub reserved: u64,
    /// The TF budget of the link.
    pub budget: u64,
}

impl fmt::Display for Overbooked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "link {} TF {} overbooked: flow {} needs {} B, {} B reserved of {} B",
            self.link, self.tf, self.flow, self.needs, self.reserved, self.budget
        )
    }
}

impl Error for Overbooked {}

struct LinkBook {
    name: String,
    budget: u64,
    reserved: Vec<u64>,
}

/// Reserved wire bytes per link per TF of the TC, against each link's
/// budget of `floor(T_f · C / 8)` bytes per TF (see
/// [`tf_budget_bytes`](super::tf_budget_bytes)).
pub struct Reservations {
    n_tf: u32,
    links: Vec<LinkBook>,
}

impl Reservations {
    /// An empty table for TCs of `n_tf` TFs.
    pub fn new(n_tf: u32) -> Self {
        Reservations {
            n_tf: n_tf.max(1),
            links: Vec::new(),
        }
    }
    /// Add a link with `budget` wire bytes per TF; returns its index.
    pub fn add_link(&mut self, name: impl Into<String>, budget: u64) -> usize {
        self.links.push(LinkBook {
            name: name.into(),
            budget,
            reserved: vec![0; self.n_tf as usize],
        });
        self.links.len() - 1
    }
    /// TFs per TC.
    pub fn n_tf(&self) -> u32 {
        self.n_tf
    }
    /// Number of links.
    pub fn links(&self) -> usize {
        self.links.len()
    }
    /// Name of link `link`. Panics on an unknown index, like the other
    /// per-link accessors.
    pub fn link_name(&self, link: usize) -> &str {
        &self.links[link].name
    }
    /// Budget of link `link`, in wire bytes per TF.
    pub fn budget(&self, link: usize) -> u64 {
        self.links[link].budget
    }
    /// Wire bytes reserved on `link` in TF `tf_in_tc` (taken mod `n_tf`).
    pub fn reserved(&self, link: usize, tf_in_tc: u32) -> u64 {
        self.links[link].reserved[(tf_in_tc % self.n_tf) as usize]
    }
    /// Wire bytes still free on `link` in TF `tf_in_tc`.
    pub fn free(&self, link: usize, tf_in_tc: u32) -> u64 {
        self.budget(link).saturating_sub(self.reserved(link, tf_in_tc))
    }
    /// Reserved bytes of `link` for every TF of the TC.
    pub fn per_tf(&self, link: usize) -> &[u64] {
        &self.links[link].reserved
    }
    /// Reserve `bytes` on `link` in TF `tf_in_tc` (mod `n_tf`) for `flow`,
    /// or refuse without changing anything if the budget would be exceeded.
    pub fn reserve(&mut self, link: usize, tf_in_tc: u32, bytes: u64, flow: &str) -> Result<(), Overbooked> {
        let tf = tf_in_tc % self.n_tf;
        let l = &mut self.links[link];
        let reserved = l.reserved[tf as usize];
        if reserved.saturating_add(bytes) > l.budget {
            return Err(Overbooked {
                link: l.name.clone(),
                tf,
                flow: flow.to_string(),
                needs: bytes,
                reserved,
                budget: l.budget,
            });
        }
        l.reserved[tf as usize] = reserved + bytes;
        Ok(())
    }
    /// Give back `bytes` on `link` in TF `tf_in_tc` (saturating at zero).
    pub fn release(&mut self, link: usize, tf_in_tc: u32, bytes: u64) {
        let tf = (tf_in_tc % self.n_tf) as usize;
        let r = &mut self.links[link].reserved[tf];
        *r = r.saturating_sub(bytes);
    }
}

/// A link as the planner sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanLink {
    /// Name used in messages, e.g. "R1->R2".
    pub name: String,
    /// Wire bytes per TF.
    pub budget: u64,
}

/// A flow to place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanFlow {
    /// Name used in messages.
    pub name: String,
    /// Links crossed, in order, each with its TF offset from the injection
    /// TF (cumulative forwarding delays; the first hop is usually 0). A
    /// flow may cross a link several times.
    pub hops: Vec<(usize, u32)>,
    /// Packets per TC, one per reserved injection TF.
    pub pkts_per_tc: u32,
    /// Wire bytes per packet (frame + FCS + preamble + IFG).
    pub wire_bytes: u64,
    /// Injection TFs typed by hand; these flows only pass admission control.
    pub fixed_slots: Option<Vec<u32>>,
}

impl PlanFlow {
    fn demand(&self) -> u64 {
        self.pkts_per_tc as u64 * self.wire_bytes * self.hops.len() as u64
    }
}

/// A flow's placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowPlan {
    /// Flow name.
    pub name: String,
    /// Injection TFs (inside the TC, at hop 0), sorted.
    pub slots: Vec<u32>,
}

/// The planner's result.
pub struct Plan {
    /// One entry per input flow, in input order.
    pub flows: Vec<FlowPlan>,
    /// What every link carries in every TF.
    pub reservations: Reservations,
}

impl Plan {
    /// Injection slots of the flow named `name`.
    pub fn slots_of(&self, name: &str) -> Option<&[u32]> {
        self.flows
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.slots.as_slice())
    }
}

/// Why planning failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// The input itself is inconsistent.
    Invalid(String),
    /// Hand-typed slots exceed a budget.
    Overbooked(Overbooked),
    /// No placement found for a flow; names the tightest link and TF on
    /// its path when it failed.
    NoRoom {
        /// Flow that could not be placed.
        flow: String,
        /// Packets per TC it needs.
        pkts: u32,
        /// Wire bytes per packet.
        needs: u64,
        /// Most loaded link of its path.
        link: String,
        /// Most loaded TF of that link.
        tf: u32,
        /// Bytes already reserved there.
        reserved: u64,
        /// Budget of that link.
        budget: u64,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Invalid(m) => write!(f, "invalid TDP plan input: {m}"),
            PlanError::Overbooked(o) => o.fmt(f),
            PlanError::NoRoom {
                flow,
                pkts,
                needs,
                link,
                tf,
                reserved,
                budget,
            } => write!(
                f,
                "flow {flow} cannot be placed ({pkts} packets of {needs} B per TC): \
                 tightest is link {link} TF {tf}, {reserved} B reserved of {budget} B"
            ),
        }
    }
}

impl Error for PlanError {}

impl From<Overbooked> for PlanError {
    fn from(o: Overbooked) -> Self {
        PlanError::Overbooked(o)
    }
}

/// Place `flows` on `links` for TCs of `n_tf` TFs.
///
/// Flows with fixed slots are admitted first, in input order (an overbooked
/// TF refuses the plan). The others follow, largest demand (bytes × hops)
/// first: each tries evenly spaced slots (`n_tf / pkts` apart, every phase),
/// which keeps the flow's packets spread over the TC like a CBR source; if
/// no phase fits, the nearly even placement that moves no packet further
/// from its ideal TF than needed (a CBR source shaped onto such slots sees
/// at most that displacement as extra jitter); and last, first fit slot by
/// slot.
pub fn plan(links: &[PlanLink], n_tf: u32, flows: &[PlanFlow]) -> Result<Plan, PlanError> {
    validate(links, n_tf, flows)?;
    let mut res = Reservations::new(n_tf);
    for l in links {
        res.add_link(l.name.clone(), l.budget);
    }
    let mut slots: Vec<Option<Vec<u32>>> = vec![None; flows.len()];
    for (i, f) in flows.iter().enumerate() {
        if let Some(fixed) = &f.fixed_slots {
            for &s in fixed {
                for &(link, off) in &f.hops {
                    res.reserve(link, tf_at_hop(s, off, n_tf), f.wire_bytes, &f.name)?;
                }
            }
            let mut fixed = fixed.clone();
            fixed.sort_unstable();
            slots[i] = Some(fixed);
        }
    }
    let mut order: Vec<usize> = (0..flows.len())
        .filter(|&i| flows[i].fixed_slots.is_none())
        .collect();
    order.sort_by_key(|&i| std::cmp::Reverse(flows[i].demand()));
    for i in order {
        let f = &flows[i];
        let chosen = place_evenly(&res, n_tf, f)
            .or_else(|| place_near_even(&res, n_tf, f))
            .or_else(|| place_first_fit(&res, n_tf, f))
            .ok_or_else(|| no_room(&res, n_tf, f))?;
        for &s in &chosen {
            for &(link, off) in &f.hops {
                res.reserve(link, tf_at_hop(s, off, n_tf), f.wire_bytes, &f.name)?;
            }
        }
        slots[i] = Some(chosen);
    }
    let flows = flows
        .iter()
        .zip(slots)
        .map(|(f, s)| FlowPlan {
            name: f.name.clone(),
            slots: s.unwrap_or_default(),
        })
        .collect();
    Ok(Plan {
        flows,
        reservations: res,
    })
}

fn validate(links: &[PlanLink], n_tf: u32, flows: &[PlanFlow]) -> Result<(), PlanError> {
    let bad = |m: String| Err(PlanError::Invalid(m));
    if n_tf == 0 {
        return bad("a TC needs at least one TF".into());
    }
    let mut names = HashSet::new();
    for f in flows {
        if !names.insert(f.name.as_str()) {
            return bad(format!("flow {} is listed twice", f.name));
        }
        if f.hops.is_empty() {
            return bad(format!("flow {} has no hops", f.name));
        }
        if let Some(&(l, _)) = f.hops.iter().find(|h| h.0 >= links.len()) {
            return bad(format!("flow {} uses unknown link #{l}", f.name));
        }
        if f.wire_bytes == 0 {
            return bad(format!("flow {} has empty packets", f.name));
        }
        match &f.fixed_slots {
            Some(s) => {
                if let Some(x) = s.iter().find(|&&x| x >= n_tf) {
                    return bad(format!("flow {} slot {x} is outside a TC of {n_tf} TFs", f.name));
                }
                if s.len() != f.pkts_per_tc as usize {
                    return bad(format!(
                        "flow {} has {} fixed slots for {} packets per TC",
                        f.name,
                        s.len(),
                        f.pkts_per_tc
                    ));
                }
            }
            None if f.pkts_per_tc == 0 || f.pkts_per_tc > n_tf => {
                return bad(format!(
                    "flow {} needs {} packets per TC; 1..={n_tf} can be placed",
                    f.name, f.pkts_per_tc
                ));
            }
            None => {}
        }
    }
    Ok(())
}

/// The bytes one flow's slots chosen so far add to each (link, TF), kept
/// as slots are chosen: whether one more slot fits then costs that slot's
/// hops, not every chosen slot's. (Checking the whole set again per try made
/// the near-even search cubic in the TC's length: `qosnet check` took 3 s
/// to refuse a flow in a TC of 560 TFs, found by the scenario fuzz target,
/// and a TC of thousands of TFs would have taken hours.) A flow that
/// crosses the same link in the same TF several times (looping flows)
/// counts once per crossing.
///
/// The flow's crossings are merged once: two hops on one link collide in
/// the same TF for every slot exactly when their offsets are equal mod
/// `n_tf`. The added bytes live in one dense table per link the flow
/// crosses (no larger than the reservations' own), cleared by the entries
/// touched.
struct Tentative<'a> {
    res: &'a Reservations,
    n_tf: u32,
    /// (link, the link's row in `extra`, offset mod `n_tf`, bytes per slot).
    groups: Vec<(usize, usize, u32, u64)>,
    extra: Vec<u64>,
    touched: Vec<usize>,
    /// Fit checks left to the phase searches ([`SEARCH_BUDGET`]).
    budget: u64,
}

/// Slot checks (one per distinct crossing) a flow's phase searches may
/// make before they give up on a better placement: the phase searches are
/// quadratic in the TC's length. A flow that could not be placed in a TC of
/// 6 000 TFs took 15 s to refuse, one of 20 000 TFs over 2 minutes; the
/// shipped scenarios need a few thousand checks per flow.
const SEARCH_BUDGET: u64 = 1 << 24;

impl<'a> Tentative<'a> {
    fn new(res: &'a Reservations, n_tf: u32, f: &'a PlanFlow) -> Self {
        let n_tf = n_tf.max(1);
        let mut links: Vec<usize> = Vec::new();
        let mut groups: Vec<(usize, usize, u32, u64)> = Vec::new();
        for &(link, off) in &f.hops {
            let row = links.iter().position(|&l| l == link).unwrap_or_else(|| {
                links.push(link);
                links.len() - 1
            });
            let off = (off as u64 % n_tf as u64) as u32;
            match groups.iter_mut().find(|g| g.0 == link && g.2 == off) {
                Some(g) => g.3 = g.3.saturating_add(f.wire_bytes),
                None => groups.push((link, row, off, f.wire_bytes)),
            }
        }
        Tentative {
            res,
            n_tf,
            groups,
            extra: vec![0; links.len() * n_tf as usize],
            touched: Vec::new(),
            budget: SEARCH_BUDGET,
        }
    }
    /// Forget the chosen slots.
    fn clear(&mut self) {
        for i in self.touched.drain(..) {
            self.extra[i] = 0;
        }
    }
    fn cell(&self, row: usize, slot: u32, off: u32) -> (u32, usize) {
        let tf = tf_at_hop(slot, off, self.n_tf);
        (tf, row * self.n_tf as usize + tf as usize)
    }
    /// Whether `slot` fits beside the slots chosen so far.
    fn fits(&self, slot: u32) -> bool {
        self.groups.iter().all(|&(link, row, off, add)| {
            let (tf, i) = self.cell(row, slot, off);
            self.extra[i].saturating_add(add) <= self.res.free(link, tf)
        })
    }
    /// [`fits`](Self::fits) for the phase searches, counted against their
    /// budget: `None` once it is spent.
    fn try_fits(&mut self, slot: u32) -> Option<bool> {
        let cost = self.groups.len() as u64;
        if self.budget < cost {
            return None;
        }
        self.budget -= cost;
        Some(self.fits(slot))
    }
    /// Choose `slot` (the caller checked that it fits).
    fn add(&mut self, slot: u32) {
        for k in 0..self.groups.len() {
            let (_, row, off, add) = self.groups[k];
            let (_, i) = self.cell(row, slot, off);
            if self.extra[i] == 0 {
                self.touched.push(i);
            }
            self.extra[i] = self.extra[i].saturating_add(add);
        }
    }
}

/// TF inside the TC at which a packet injected in TF `slot` crosses the hop
/// at `offset` (computed in u64: no overflow for any `n_tf`).
fn tf_at_hop(slot: u32, offset: u32, n_tf: u32) -> u32 {
    ((slot as u64 + offset as u64) % n_tf as u64) as u32
}

/// The ideal TF offset of packet `k` of `pkts` spread evenly over `n_tf`.
fn ideal(k: u32, pkts: u32, n_tf: u32) -> u32 {
    (k as u64 * n_tf as u64 / pkts as u64) as u32
}

/// The first phase at which the flow's packets, spread evenly over the
/// TC, all fit. `None` also when the search budget runs out first.
/// (Whether a set fits does not depend on the order its slots are tried
/// in: a phase is abandoned at its first misfit, and only the winner's
/// slots are collected and sorted.)
fn place_evenly(res: &Reservations, n_tf: u32, f: &PlanFlow) -> Option<Vec<u32>> {
    let mut t = Tentative::new(res, n_tf, f);
    let pkts = f.pkts_per_tc;
    for phase in 0..n_tf {
        t.clear();
        let mut all = true;
        for k in 0..pkts {
            let slot = tf_at_hop(phase, ideal(k, pkts, n_tf), n_tf);
            if !t.try_fits(slot)? {
                all = false;
                break;
            }
            t.add(slot);
        }
        if all {
            let mut s: Vec<u32> = (0..pkts)
                .map(|k| tf_at_hop(phase, ideal(k, pkts, n_tf), n_tf))
                .collect();
            s.sort_unstable();
            return Some(s);
        }
    }
    None
}

/// For every phase, put each packet in the first TF at or after its ideal
/// TF (before the next packet's ideal TF) that still fits; keep the phase
/// whose largest displacement is smallest (the first such phase).
///
/// Called only when [`place_evenly`] found nothing, so no phase has
/// displacement 0: the first phase with displacement 1 is the answer, and
/// a phase stops as soon as its displacement reaches the best so far
/// (it could no longer win). Same answer as trying every phase to the
/// end (a property test checks it). When the search budget runs out, the
/// best placement found so far, if any. (Should [`place_evenly`] have run
/// out of its budget, a phase of displacement 0 after the first one of
/// displacement 1 is not looked for: still a near-even placement.)
fn place_near_even(res: &Reservations, n_tf: u32, f: &PlanFlow) -> Option<Vec<u32>> {
    let pkts = f.pkts_per_tc;
    let mut best: Option<(u32, Vec<u32>)> = None;
    let mut t = Tentative::new(res, n_tf, f);
    for phase in 0..n_tf {
        let bound = best.as_ref().map_or(u32::MAX, |(w, _)| *w);
        if bound <= 1 {
            break;
        }
        let mut chosen: Vec<u32> = Vec::with_capacity(pkts as usize);
        let mut worst = 0;
        t.clear();
        for k in 0..pkts {
            let (lo, hi) = (ideal(k, pkts, n_tf), ideal(k + 1, pkts, n_tf));
            // Displacements from `bound` on cannot beat the best phase.
            let hi = hi.max(lo + 1).min(lo.saturating_add(bound));
            let mut hit = None;
            for o in lo..hi {
                match t.try_fits(tf_at_hop(phase, o, n_tf)) {
                    Some(true) => {
                        hit = Some(o);
                        break;
                    }
                    Some(false) => {}
                    None => return best.map(|(_, s)| s),
                }
            }
            match hit {
                Some(o) => {
                    worst = worst.max(o - lo);
                    let slot = tf_at_hop(phase, o, n_tf);
                    t.add(slot);
                    chosen.push(slot);
                }
                None => break,
            }
        }
        if chosen.len() == pkts as usize && worst < bound {
            chosen.sort_unstable();
            best = Some((worst, chosen));
        }
    }
    best.map(|(_, s)| s)
}

fn place_first_fit(res: &Reservations, n_tf: u32, f: &PlanFlow) -> Option<Vec<u32>> {
    let mut chosen = Vec::new();
    let mut t = Tentative::new(res, n_tf, f);
    for s in 0..n_tf {
        if t.fits(s) {
            t.add(s);
            chosen.push(s);
            if chosen.len() == f.pkts_per_tc as usize {
                return Some(chosen);
            }
        }
    }
    None
}

fn no_room(res: &Reservations, n_tf: u32, f: &PlanFlow) -> PlanError {
    let (link, tf) = f
        .hops
        .iter()
        .flat_map(|&(link, _)| (0..n_tf).map(move |tf| (link, tf)))
        .min_by_key(|&(link, tf)| (res.free(link, tf), link, tf))
        .unwrap_or((f.hops[0].0, 0));
    PlanError::NoRoom {
        flow: f.name.clone(),
        pkts: f.pkts_per_tc,
        needs: f.wire_bytes,
        link: res.link_name(link).to_string(),
        tf,
        reserved: res.reserved(link, tf),
        budget: res.budget(link),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_even_when_no_phase_fits_evenly() {
        // A flow every 5 TFs fills one TF in five; a second flow every 4
        // TFs cannot be placed evenly (each phase hits a multiple of 5) and
        // gets slots displaced by at most one TF, not first-fit bunching.
        let links = vec![PlanLink {
            name: "a->b".into(),
            budget: 1000,
        }];
        let flows = vec![
            PlanFlow {
                name: "five".into(),
                hops: vec![(0, 0)],
                pkts_per_tc: 4,
                wire_bytes: 900,
                fixed_slots: None,
            },
            PlanFlow {
                name: "four".into(),
                hops: vec![(0, 0)],
                pkts_per_tc: 5,
                wire_bytes: 200,
                fixed_slots: None,
            },
        ];
        let p = plan(&links, 20, &flows).unwrap();
        assert_eq!(p.slots_of("five").unwrap(), &[0, 5, 10, 15]);
        let four = p.slots_of("four").unwrap();
        let mut gaps: Vec<u32> = four.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.push(four[0] + 20 - four[4]);
        assert!(gaps.iter().all(|g| (3..=5).contains(g)), "slots {four:?}");
    }

    /// A TC of 30 000 TFs (the phase searches bounded by their budget): a
    /// looping flow that needs more room than there is is refused, and one
    /// that needs less is placed.
    #[test]
    fn long_cycles_are_planned_or_refused() {
        let n_tf = 30_000;
        let links = vec![PlanLink {
            name: "a->b".into(),
            budget: 1000,
        }];
        let taken = PlanFlow {
            name: "taken".into(),
            hops: vec![(0, 0)],
            pkts_per_tc: n_tf / 3,
            wire_bytes: 300,
            fixed_slots: Some((0..n_tf / 3).map(|k| 3 * k).collect()),
        };
        // Crosses a->b in TFs s and s + 1, 800 B each: only TFs 1 and 2
        // of every 3 have room (one crossing each), so one packet in
        // every 3 TFs, injected at s = 1 mod 3.
        let flow = |pkts| PlanFlow {
            name: "f".into(),
            hops: vec![(0, 0), (0, 1)],
            pkts_per_tc: pkts,
            wire_bytes: 800,
            fixed_slots: None,
        };
        match plan(&links, n_tf, &[taken.clone(), flow(n_tf / 3 + 1)]) {
            Err(PlanError::NoRoom { flow, .. }) => assert_eq!(flow, "f"),
            Err(e) => panic!("expected NoRoom, got {e}"),
            Ok(_) => panic!("expected NoRoom, got a plan"),
        }
        for pkts in [n_tf / 3, n_tf / 4] {
            let p = plan(&links, n_tf, &[taken.clone(), flow(pkts)]).unwrap();
            let slots = p.slots_of("f").unwrap();
            assert_eq!(slots.len(), pkts as usize);
            assert!(slots.iter().all(|s| s % 3 == 1), "{pkts} packets");
        }
    }

    #[test]
    fn overbooked_message_names_link_tf_and_bytes() {
        let o = Overbooked {
            link: "R1->R2".into(),
            tf: 17,
            flow: "f123".into(),
            needs: 1040,
            reserved: 2080,
            budget: 3125,
        };
        assert_eq!(
            o.to_string(),
            "link R1->R2 TF 17 overbooked: flow f123 needs 1040 B, 2080 B reserved of 3125 B"
        );
    }

    #[test]
    fn reservations_refuse_beyond_the_budget() {
        let mut r = Reservations::new(60);
        let l = r.add_link("R1->R2", 3125);
        for _ in 0..3 {
            r.reserve(l, 17, 1040, "f").unwrap();
        }
        let e = r.reserve(l, 77, 1040, "g").unwrap_err(); // 77 mod 60 = 17
        assert_eq!(
            e.to_string(),
            "link R1->R2 TF 17 overbooked: flow g needs 1040 B, 3120 B reserved of 3125 B"
        );
        assert_eq!(
            (r.reserved(l, 17), r.free(l, 17), r.reserved(l, 16)),
            (3120, 5, 0)
        );
        r.release(l, 17, 1040);
        assert_eq!(r.reserved(l, 17), 2080);
        assert_eq!(r.per_tf(l).len(), 60);
    }

    /// The ICC 2006 testbed (§IV): four routers in a full mesh, each with a
    /// link to the traffic generator ("H"); 100 Mb/s, T_f = 250 µs → 3125 B
    /// per TF; 60 TFs per TC; five flows of 12 packets per TC (one every
    /// 5 TFs) looping on their cycle, then leaving to the host link of the
    /// router they entered at.
    fn testbed(wire_bytes: u64, loops: [u32; 5], per_hop: u32) -> (Vec<PlanLink>, Vec<PlanFlow>) {
        let mut links = vec![];
        for a in 1..=4 {
            for b in 1..=4 {
                if a != b {
                    links.push(format!("R{a}->R{b}"));
                }
            }
            links.push(format!("R{a}->H"));
        }
        let id = |name: String| links.iter().position(|l| *l == name).unwrap();
        let cycles: [(&str, &[u32]); 5] = [
            ("f1234", &[1, 2, 3, 4]),
            ("f123", &[1, 2, 3]),
            ("f234", &[2, 3, 4]),
            ("f341", &[3, 4, 1]),
            ("f412", &[4, 1, 2]),
        ];
        let flows = cycles
            .iter()
            .zip(loops)
            .map(|((name, cyc), n)| {
                let mut hops = vec![];
                for _ in 0..n {
                    for (i, a) in cyc.iter().enumerate() {
                        let b = cyc[(i + 1) % cyc.len()];
                        hops.push(id(format!("R{a}->R{b}")));
                    }
                }
                hops.push(id(format!("R{}->H", cyc[0])));
                PlanFlow {
                    name: name.to_string(),
                    hops: hops
                        .into_iter()
                        .enumerate()
                        .map(|(k, l)| (l, k as u32 * per_hop))
                        .collect(),
                    pkts_per_tc: 12,
                    wire_bytes,
                    fixed_slots: None,
                }
            })
            .collect();
        let links = links
            .into_iter()
            .map(|name| PlanLink { name, budget: 3125 })
            .collect();
        (links, flows)
    }

    fn check_testbed(p: &Plan, links: &[PlanLink], full: u64) {
        let r = &p.reservations;
        for (l, link) in links.iter().enumerate() {
            for tf in 0..60 {
                assert!(r.reserved(l, tf) <= link.budget, "{} TF {tf}", link.name);
            }
        }
        for ring in ["R1->R2", "R2->R3", "R3->R4", "R4->R1"] {
            let l = links.iter().position(|x| x.name == ring).unwrap();
            assert!(
                r.per_tf(l).iter().all(|&b| b == full),
                "{ring}: {:?}",
                r.per_tf(l)
            );
        }
        for f in &p.flows {
            let want: Vec<u32> = (0..12).map(|k| f.slots[0] + 5 * k).collect();
            assert_eq!(f.slots, want, "{} evenly spaced", f.name);
        }
    }

    #[test]
    fn testbed_scenario_1_fills_every_ring_tf() {
        // 1002-byte IP packets: 1020-byte frames, 1040 wire bytes; 3 per TF.
        let (links, flows) = testbed(1040, [5; 5], 3);
        let p = plan(&links, 60, &flows).unwrap();
        check_testbed(&p, &links, 3 * 1040);
        // Chords carry one flow each: 32 Mb/s, one packet per TF.
        let r = &p.reservations;
        let chord = links.iter().position(|x| x.name == "R1->R3").unwrap();
        assert!(r.per_tf(chord).iter().all(|&b| b == 1040));
    }

    #[test]
    fn testbed_scenario_2_fills_every_ring_tf() {
        // 482-byte IP packets: 500-byte frames, 520 wire bytes; 6 per TF.
        let (links, flows) = testbed(520, [5, 10, 15, 10, 15], 4);
        let p = plan(&links, 60, &flows).unwrap();
        check_testbed(&p, &links, 6 * 520);
        // R2->R4 carries f234 (15 loops): 48 Mb/s, three packets per TF.
        let r = &p.reservations;
        let chord = links.iter().position(|x| x.name == "R2->R4").unwrap();
        assert!(r.per_tf(chord).iter().all(|&b| b == 3 * 520));
    }

    #[test]
    fn hand_typed_overbooking_is_refused() {
        let (links, mut flows) = testbed(1040, [5; 5], 3);
        // Slots typed by hand for every flow are admitted...
        for f in flows.iter_mut() {
            f.fixed_slots = Some((0..12).map(|k| 2 + 5 * k).collect());
        }
        let p = plan(&links, 60, &flows).unwrap();
        assert_eq!(p.slots_of("f412").unwrap()[0], 2);
        // ...but one more packet on the full ring is not.
        let r12 = links.iter().position(|x| x.name == "R1->R2").unwrap();
        flows.push(PlanFlow {
            name: "extra".into(),
            hops: vec![(r12, 0)],
            pkts_per_tc: 1,
            wire_bytes: 1040,
            fixed_slots: Some(vec![17]),
        });
        let e = plan(&links, 60, &flows).err().unwrap();
        assert_eq!(
            e.to_string(),
            "link R1->R2 TF 17 overbooked: flow extra needs 1040 B, 3120 B reserved of 3125 B"
        );
        // Without fixed slots it cannot be placed either, and the error says
        // where it is tight.
        flows.last_mut().unwrap().fixed_slots = None;
        let e = plan(&links, 60, &flows).err().unwrap();
        assert_eq!(
            e.to_string(),
            "flow extra cannot be placed (1 packets of 1040 B per TC): \
             tightest is link R1->R2 TF 0, 3120 B reserved of 3125 B"
        );
    }

    #[test]
    fn near_even_when_even_spacing_fails() {
        let links = vec![PlanLink {
            name: "A->B".into(),
            budget: 100,
        }];
        let blocker = PlanFlow {
            name: "blocker".into(),
            hops: vec![(0, 0)],
            pkts_per_tc: 6,
            wire_bytes: 100,
            fixed_slots: Some(vec![2, 3, 4, 7, 8, 9]),
        };
        let f = PlanFlow {
            name: "f".into(),
            hops: vec![(0, 0)],
            pkts_per_tc: 3,
            wire_bytes: 100,
            fixed_slots: None,
        };
        // Free: 0, 1, 5, 6. Three packets spaced 3 apart never fit; the
        // nearly even placement (ideal 0, 3, 6) moves one packet by 2 TFs
        // rather than bunching them first-fit into 0, 1, 5.
        let p = plan(&links, 10, &[f.clone(), blocker.clone()]).unwrap();
        assert_eq!(p.slots_of("f").unwrap(), &[0, 5, 6]);
        assert!(p.reservations.per_tf(0).iter().all(|&b| b <= 100));
        // Two packets: evenly spaced 5 apart, phase 0 (TFs 0 and 5).
        let two = PlanFlow { pkts_per_tc: 2, ..f };
        let p = plan(&links, 10, &[two, blocker]).unwrap();
        assert_eq!(p.slots_of("f").unwrap(), &[0, 5]);
    }

    #[test]
    fn looping_flows_count_every_crossing() {
        // One link crossed twice per packet, 5 TFs apart: a 2-packet flow
        // spaced 5 apart would put both crossings in the same two TFs.
        let links = vec![PlanLink {
            name: "A->A".into(),
            budget: 100,
        }];
        let f = PlanFlow {
            name: "loop".into(),
            hops: vec![(0, 0), (0, 5)],
            pkts_per_tc: 2,
            wire_bytes: 100,
            fixed_slots: None,
        };
        let p = plan(&links, 10, std::slice::from_ref(&f)).unwrap();
        assert_eq!(p.slots_of("loop").unwrap(), &[0, 6]);
        assert_eq!(p.reservations.per_tf(0), &[100, 100, 0, 0, 0, 100, 100, 0, 0, 0]);
    }

    #[test]
    fn invalid_input_is_reported() {
        let links = vec![PlanLink {
            name: "A->B".into(),
            budget: 100,
        }];
        let f = PlanFlow {
            name: "f".into(),
            hops: vec![(1, 0)],
            pkts_per_tc: 1,
            wire_bytes: 10,
            fixed_slots: None,
        };
        let msg = |flows: &[PlanFlow]| plan(&links, 10, flows).err().unwrap().to_string();
        assert!(msg(std::slice::from_ref(&f)).contains("unknown link #1"));
        let g = PlanFlow {
            hops: vec![(0, 0)],
            fixed_slots: Some(vec![10]),
            ..f.clone()
        };
        assert!(msg(&[g]).contains("slot 10 is outside"));
        let h = PlanFlow {
            hops: vec![(0, 0)],
            pkts_per_tc: 11,
            ..f.clone()
        };
        assert!(msg(&[h]).contains("1..=10"));
        let ok = PlanFlow {
            hops: vec![(0, 0)],
            ..f
        };
        assert!(msg(&[ok.clone(), ok]).contains("listed twice"));
    }

    /// The check `Tentative` replaces: every chosen slot's crossings summed
    /// per (link, TF) from scratch, against the free capacity.
    fn fits_from_scratch(res: &Reservations, n_tf: u32, f: &PlanFlow, slots: &[u32]) -> bool {
        let mut sum: std::collections::HashMap<(usize, u32), u64> = Default::default();
        for &s in slots {
            for &(link, off) in &f.hops {
                *sum.entry((link, tf_at_hop(s, off, n_tf))).or_default() += f.wire_bytes;
            }
        }
        sum.iter().all(|(&(link, tf), &b)| b <= res.free(link, tf))
    }

    /// `place_near_even` without its shortcuts: every phase to the end.
    fn near_even_every_phase(res: &Reservations, n_tf: u32, f: &PlanFlow) -> Option<Vec<u32>> {
        let pkts = f.pkts_per_tc;
        let mut best: Option<(u32, Vec<u32>)> = None;
        for phase in 0..n_tf {
            let mut chosen: Vec<u32> = Vec::new();
            let mut worst = 0;
            for k in 0..pkts {
                let (lo, hi) = (ideal(k, pkts, n_tf), ideal(k + 1, pkts, n_tf));
                let hit = (lo..hi.max(lo + 1)).find(|&o| {
                    let mut with = chosen.clone();
                    with.push(tf_at_hop(phase, o, n_tf));
                    fits_from_scratch(res, n_tf, f, &with)
                });
                let Some(o) = hit else { break };
                worst = worst.max(o - lo);
                chosen.push(tf_at_hop(phase, o, n_tf));
            }
            if chosen.len() == pkts as usize && best.as_ref().is_none_or(|(w, _)| worst < *w) {
                chosen.sort_unstable();
                best = Some((worst, chosen));
            }
        }
        best.map(|(_, s)| s)
    }

    proptest::proptest! {
        /// Where no phase places a flow evenly, the pruned near-even search
        /// picks what trying every phase to the end picks.
        #[test]
        fn near_even_shortcuts_change_nothing(
            n_tf in 1u32..24,
            budget in 1u64..6,
            booked in proptest::collection::vec((0usize..3, 0u32..24, 0u64..6), 0..40),
            hops in proptest::collection::vec((0usize..3, 0u32..30), 1..4),
            pkts in 1u32..8,
        ) {
            let mut res = Reservations::new(n_tf);
            for i in 0..3 {
                res.add_link(format!("l{i}"), budget);
            }
            for (l, tf, b) in booked {
                let _ = res.reserve(l, tf % n_tf, b, "other");
            }
            let f = PlanFlow {
                name: "f".into(),
                hops,
                pkts_per_tc: pkts.min(n_tf),
                wire_bytes: 1,
                fixed_slots: None,
            };
            proptest::prop_assume!(place_evenly(&res, n_tf, &f).is_none());
            proptest::prop_assert_eq!(place_near_even(&res, n_tf, &f), near_even_every_phase(&res, n_tf, &f));
        }

        /// Choosing slots one at a time, `Tentative` accepts a slot exactly
        /// when the chosen set with it fits checked from scratch, for
        /// looping flows (a link crossed several times, in the same TF or
        /// not) over partly reserved links.
        #[test]
        fn incremental_fit_agrees_with_the_whole_set(
            n_tf in 1u32..12,
            budgets in proptest::collection::vec(0u64..5, 1..4),
            booked in proptest::collection::vec((0usize..4, 0u32..12, 0u64..4), 0..12),
            hops in proptest::collection::vec((0usize..4, 0u32..20), 1..6),
            wire in 1u64..3,
            tries in proptest::collection::vec(0u32..12, 1..16),
        ) {
            let mut res = Reservations::new(n_tf);
            for (i, &b) in budgets.iter().enumerate() {
                res.add_link(format!("l{i}"), b);
            }
            let nl = budgets.len();
            for (l, tf, b) in booked {
                let _ = res.reserve(l % nl, tf, b, "other");
            }
            let f = PlanFlow {
                name: "f".into(),
                hops: hops.into_iter().map(|(l, o)| (l % nl, o)).collect(),
                pkts_per_tc: 1,
                wire_bytes: wire,
                fixed_slots: None,
            };
            let mut t = Tentative::new(&res, n_tf, &f);
            let mut chosen: Vec<u32> = Vec::new();
            for s in tries {
                let s = s % n_tf;
                chosen.push(s);
                let whole = fits_from_scratch(&res, n_tf, &f, &chosen);
                proptest::prop_assert_eq!(t.fits(s), whole, "slot {} after {:?}", s, &chosen[..chosen.len() - 1]);
                if whole {
                    t.add(s);
                } else {
                    chosen.pop();
                }
            }
        }
    }
}
