//! Phases 2 and 3 of the STSDR's distributed WFQ (Khan, Sahoo & Manjunath,
//! §IV-B and §IV-C, Algorithm 1): per-forwarder WFQ over head-of-line
//! packets, preference lists, and Gale–Shapley stable matching.
//!
//! Every forwarder runs this code on the same DS state ([`View`]) and the
//! same virtual clocks ([`VirtualClocks`]), so every forwarder reaches the
//! same [`Decision`]: nothing here reads a clock, iterates a hash map or
//! draws from a shared random stream.
//!
//! ## Virtual time: self-clocked fair queueing at the head of line
//!
//! Exact WFQ (PGPS) needs the GPS virtual time V(t), which depends on real
//! time and on when each class became backlogged — arrival times on the
//! clocks of M unsynchronised forwarders (§III-C). The paper instead keeps
//! per outgoing link a virtual clock V_j "always updated to the virtual
//! finish of the last packet transmitted on OL_j" (§IV): that is
//! Golestani's self-clocked fair queueing (SCFQ, INFOCOM 1994), whose
//! system virtual time is the finish tag of the packet in service. Every
//! forwarder knows which packets were sent (it computed the matching), so
//! every forwarder can keep V_j without any clock.
//!
//! Each class k on link j is one SCFQ flow whose packets sit in M queues
//! Q_1jk … Q_Mjk (Fig. 3). Its state is a start tag S_jk:
//! - a head-of-line packet of length L in Q_ijk has finish tag
//!   v_ijk = S_jk + L / w_k (the paper's v_ijk);
//! - when a class-k packet with tag v goes out on OL_j: S_jk := v and
//!   V_j := max(V_j, v);
//! - a class that a freshly exchanged view shows at no forwarder is idle
//!   (one the matching just took out of the view is not: its queues may
//!   hold more); when it is next seen backlogged it starts at
//!   S_jk := max(S_jk, V_j) (SCFQ's max(F_prev, V(arrival))).
//!
//! Tags are computed when a packet is *seen* (in a DS frame), not when it
//! arrived. With one forwarder and one link this is exactly SCFQ with each
//! packet handed to the scheduler at the DS snapshot after its arrival (a
//! property test checks it packet for packet), and with saturated queues it
//! is exactly PGPS (checked against [`crate::sched::Wfq`]). With one link
//! and any M it inherits SCFQ's bound |W_a/w_a − W_b/w_b| ≤ L_a/w_a + L_b/w_b
//! for classes backlogged over an interval (property test). Recomputing
//! tags from V_j at every round instead would lose fairness: after class a
//! is served, V_j = S_a and every class would tie.
//!
//! `V_j := max(V_j, v)`: with one link tags go out in increasing order and
//! this is the paper's rule; with several links the stable matching may
//! give a link a packet with a smaller tag than the last, and a clock that
//! went backwards would hand newly backlogged classes credit.
//!
//! Units are those of [`crate::sched::Wfq`] ([`VT_PER_BYTE`] per byte at
//! unit weight, `u128`), offset by [`VT_BASE`] so that a clock adopted from
//! another forwarder (offsets S_jk − V_j, see [`VirtualClocks::offsets`])
//! never goes below zero.
//!
//! ## Preference lists and matching
//!
//! P_ij (phase 2) is the WFQ choice of FE_i for OL_j among its K
//! head-of-line packets: smallest v_ijk. X_i lists the links FE_i has a
//! packet for, earliest arrival first (ASORT) — arrival stamps of FE_i only,
//! never two forwarders' stamps compared. Y_j lists the forwarders with a
//! packet for OL_j, smallest virtual finish first (VSORT). A forwarder with
//! no packet for a link does not list it, and the link does not list the
//! forwarder: lists are partial when queues are empty, and the matching is
//! then stable among acceptable pairs and may be smaller than min(M, N).
//! When every forwarder has a packet for every link it has min(M, N) pairs.
//!
//! Phase 3 is Gale & Shapley's deferred acceptance (Kleinberg & Tardos,
//! *Algorithm Design*, ch. 1, the paper's [12]). Forwarders propose by
//! default — the argument order of Algorithm 1's `StableMatch(X, Y)`, and
//! the side that gets its best stable partner, so old packets go first;
//! [`Proposer::Outlinks`] makes links propose (each link gets its smallest
//! stable virtual finish time).
//!
//! ## Ties
//!
//! [`TieBreak::Deterministic`]: among classes, equal finish tag → earlier
//! arrival → lower class; in ASORT, equal arrival → lower link; in VSORT,
//! equal tag → lower forwarder. [`TieBreak::Random`] (the paper's choice,
//! §V): equal keys are ordered by a hash of (seed, cycle, round, item), so
//! every forwarder "draws" the same numbers without sharing a random
//! stream, then by index to keep the order total.

use std::collections::VecDeque;

use super::Dims;
use crate::sched::VT_PER_BYTE;

/// Where virtual clocks start: far enough above zero that offsets adopted
/// from another forwarder never underflow, far enough below `u128::MAX`
/// that 2⁹⁵ bytes of service cannot overflow.
pub const VT_BASE: u128 = 1 << 96;

/// One head-of-line packet (or, in L-DS, one burst) as a DS frame reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Arrival stamp on the reporting forwarder's own clock (wrapping).
    pub stamp: u32,
    /// Bytes charged when it is sent: the frame length, or the burst's
    /// bytes in L-DS. Never zero (zero means "no packet" on the wire).
    pub len: u32,
    /// The head-of-line packet's own bytes: what phase 2 ranks an L-DS
    /// burst by (§V-B: "the packet selection and link assignment happen as
    /// described in Section IV"). Equal to `len` for a single packet; 0
    /// (as in entries built before the field existed) is read as `len`.
    pub head: u32,
}

impl Entry {
    /// One packet of `len` bytes.
    pub fn packet(stamp: u32, len: u32) -> Self {
        Entry {
            stamp,
            len,
            head: len,
        }
    }
    /// An L-DS burst of `len` bytes whose first packet has `head` bytes.
    pub fn burst(stamp: u32, len: u32, head: u32) -> Self {
        Entry { stamp, len, head }
    }
    /// The head-of-line packet's bytes, never above the whole entry's.
    pub fn head_len(&self) -> u32 {
        if self.head == 0 || self.head > self.len {
            self.len
        } else {
            self.head
        }
    }
}

/// What a DS frame says about one forwarder's N × K queues: the first few
/// entries of each queue, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeState {
    /// The forwarder's clock (as a stamp) when it built the DS frame:
    /// ASORT compares ages `stamp_ref − stamp`, a total order even when
    /// 32-bit stamps wrap.
    pub stamp_ref: u32,
    classes: usize,
    queues: Vec<VecDeque<Entry>>,
}

impl FeState {
    /// Empty queues.
    pub fn new(dims: Dims, stamp_ref: u32) -> Self {
        FeState {
            stamp_ref,
            classes: dims.classes,
            queues: vec![VecDeque::new(); dims.queues()],
        }
    }
    fn index(&self, ol: usize, class: usize) -> Option<usize> {
        (class < self.classes && ol * self.classes + class < self.queues.len())
            .then_some(ol * self.classes + class)
    }
    /// Append an entry to Q_{·,ol,class}. False if the queue does not
    /// exist or the entry has length zero.
    pub fn push(&mut self, ol: usize, class: usize, e: Entry) -> bool {
        match self.index(ol, class) {
            Some(i) if e.len > 0 => {
                self.queues[i].push_back(e);
                true
            }
            _ => false,
        }
    }
    pub fn head(&self, ol: usize, class: usize) -> Option<Entry> {
        self.index(ol, class)
            .and_then(|i| self.queues[i].front().copied())
    }
    pub fn pop(&mut self, ol: usize, class: usize) -> Option<Entry> {
        self.index(ol, class).and_then(|i| self.queues[i].pop_front())
    }
    /// Entries known for one queue, oldest first.
    pub fn queue(&self, ol: usize, class: usize) -> impl Iterator<Item = Entry> + '_ {
        self.index(ol, class)
            .map(|i| self.queues[i].iter().copied())
            .into_iter()
            .flatten()
    }
    /// Entries known over all queues.
    pub fn len(&self) -> usize {
        self.queues.iter().map(|q| q.len()).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(|q| q.is_empty())
    }
    /// How long before the DS snapshot `e` arrived, in stamp units: the
    /// ASORT key (larger is earlier).
    pub fn age(&self, e: Entry) -> u32 {
        self.stamp_ref.wrapping_sub(e.stamp)
    }
}

/// The DS state of the whole STSDR as one forwarder holds it: one
/// [`FeState`] per forwarder, `None` for a forwarder that is dead or never
/// heard from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    dims: Dims,
    fes: Vec<Option<FeState>>,
}

impl View {
    pub fn new(dims: Dims) -> Self {
        View {
            dims,
            fes: vec![None; dims.forwarders],
        }
    }
    pub fn dims(&self) -> Dims {
        self.dims
    }
    /// Replace what is known of forwarder `fe` (ignored if out of range).
    pub fn set(&mut self, fe: usize, st: Option<FeState>) {
        if let Some(s) = self.fes.get_mut(fe) {
            *s = st;
        }
    }
    pub fn get(&self, fe: usize) -> Option<&FeState> {
        self.fes.get(fe).and_then(|s| s.as_ref())
    }
    pub fn get_mut(&mut self, fe: usize) -> Option<&mut FeState> {
        self.fes.get_mut(fe).and_then(|s| s.as_mut())
    }
    /// Whether some forwarder has a known packet of `class` for `ol`.
    pub fn visible(&self, ol: usize, class: usize) -> bool {
        self.fes.iter().flatten().any(|s| s.head(ol, class).is_some())
    }
    /// Known entries over all forwarders.
    pub fn len(&self) -> usize {
        self.fes.iter().flatten().map(|s| s.len()).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.fes.iter().flatten().all(|s| s.is_empty())
    }
}

/// Per-link virtual clocks V_j and per-(link, class) start tags S_jk (see
/// the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtualClocks {
    weights: Vec<u32>,
    v: Vec<u128>,
    start: Vec<u128>,
    /// Class is backlogged as far as the views show (see `begin_round`).
    backlogged: Vec<bool>,
    /// Class was sent since the last fresh view: a view that no longer
    /// shows it (its entries were taken by the matching) says nothing
    /// about whether its queues hold more.
    served: Vec<bool>,
}

impl VirtualClocks {
    /// Clocks for `outlinks` links and one class per weight.
    pub fn new(outlinks: usize, weights: Vec<u32>) -> Result<Self, String> {
        if weights.is_empty() {
            return Err("stsdr: at least one class weight is needed".into());
        }
        if let Some(k) = weights.iter().position(|w| *w == 0) {
            return Err(format!("stsdr: class {k} has weight 0; it would never be served"));
        }
        let nk = outlinks * weights.len();
        Ok(VirtualClocks {
            weights,
            v: vec![VT_BASE; outlinks],
            start: vec![VT_BASE; nk],
            backlogged: vec![false; nk],
            served: vec![false; nk],
        })
    }
    pub fn classes(&self) -> usize {
        self.weights.len()
    }
    pub fn weights(&self) -> &[u32] {
        &self.weights
    }
    /// V_j.
    pub fn clock(&self, ol: usize) -> u128 {
        self.v.get(ol).copied().unwrap_or(VT_BASE)
    }
    /// S_jk.
    pub fn start_tag(&self, ol: usize, class: usize) -> u128 {
        self.start
            .get(ol * self.classes() + class)
            .copied()
            .unwrap_or(VT_BASE)
    }
    /// Virtual finish of a head-of-line packet of `len` bytes of `class`
    /// for `ol`: S_jk + len / w_k.
    pub fn finish_tag(&self, ol: usize, class: usize, len: u32) -> u128 {
        let w = self.weights.get(class).copied().unwrap_or(1).max(1) as u128;
        self.start_tag(ol, class) + len as u128 * VT_PER_BYTE / w
    }
    /// A class that becomes backlogged starts from the clock: S_jk :=
    /// max(S_jk, V_j). `fresh`: `view` was just exchanged (round 0 of a
    /// cycle). A class is idle when a view does not show it and either
    /// the view is fresh or nothing of the class was sent since the last
    /// fresh one. A class whose entries the matching took stays backlogged
    /// until a fresh view says otherwise: treating it as newly backlogged
    /// when its next packet shows up would reset S_jk to V_j and lose it
    /// the credit of its last service whenever V_j has run ahead of it
    /// (several links, or L-DS, where V_j follows the largest burst).
    fn begin_round(&mut self, view: &View, fresh: bool) {
        let k = self.classes();
        for i in 0..self.start.len() {
            if view.visible(i / k, i % k) {
                if !self.backlogged[i] {
                    self.start[i] = self.start[i].max(self.v[i / k]);
                }
                self.backlogged[i] = true;
            } else if fresh || !self.served[i] {
                self.backlogged[i] = false;
            }
            if fresh {
                self.served[i] = false;
            }
        }
    }
    fn serve(&mut self, ol: usize, class: usize, tag: u128) {
        let k = self.classes();
        if let (Some(s), Some(v)) = (self.start.get_mut(ol * k + class), self.v.get_mut(ol)) {
            *s = tag;
            *v = (*v).max(tag);
            self.served[ol * k + class] = true;
        }
    }
    /// S_jk − V_j for every (link, class), link-major, saturated to `i64`:
    /// the part of the clock state that decides the schedule (tags are
    /// only ever compared within one link). The master ships it in its DS
    /// frame so clocks that diverged after lost frames agree again.
    pub fn offsets(&self) -> Vec<i64> {
        let k = self.classes();
        self.start
            .iter()
            .enumerate()
            .map(|(i, s)| {
                (*s as i128 - self.v[i / k] as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
            })
            .collect()
    }
    /// Take another forwarder's [`offsets`](Self::offsets): S_jk := V_j +
    /// offset. False (nothing changed) if the length does not fit.
    pub fn adopt(&mut self, offsets: &[i64]) -> bool {
        if offsets.len() != self.start.len() {
            return false;
        }
        let k = self.classes();
        for (i, o) in offsets.iter().enumerate() {
            let s = self.v[i / k] as i128 + *o as i128;
            self.start[i] = s.max(0) as u128;
        }
        true
    }
}

/// How ties between equal keys are broken (module docs, "Ties").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TieBreak {
    #[default]
    Deterministic,
    /// Seeded pseudo-random order, the same at every forwarder for the same
    /// cycle and round.
    Random { seed: u64 },
}

/// What L-DS ranks a burst by in phase 2 and VSORT (see
/// [`Dwfq::set_lazy`]). The two agree for fixed-size packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LazyRank {
    /// The finish tag of the burst's head-of-line packet alone, S_jk +
    /// head / w_k: §V-B's "selection ... as described in Section IV", the
    /// burst's first packet ranked as S-DS ranks a packet.
    #[default]
    Head,
    /// The class's start tag S_jk (start-time fair queueing over bursts):
    /// a smaller lag behind GPS for variable sizes (docs/paper-stsdr.md,
    /// *The head's length*), not the paper's rule.
    Start,
}

/// Which side proposes in Gale–Shapley.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Proposer {
    /// Forwarders propose along X_i (earliest arrival first): the
    /// forwarder-optimal stable matching.
    #[default]
    Forwarders,
    /// Links propose along Y_j (smallest virtual finish first): the
    /// link-optimal stable matching.
    Outlinks,
}

/// Which scheduling round a decision is for: random tie-breaks are drawn
/// from it, so all forwarders must agree on it (the master's DS carries
/// the cycle number).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RoundKey {
    pub cycle: u32,
    /// Round within the cycle (M-DS runs several per DS exchange).
    pub round: u16,
}

/// P_ij: the packet FE_i would send on OL_j.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    pub fe: usize,
    pub ol: usize,
    pub class: usize,
    pub entry: Entry,
    /// Its virtual finish time v_ijk (in L-DS, of the whole burst): the
    /// class's start tag after it is sent.
    pub tag: u128,
    /// What phase 2 and VSORT rank it by: `tag`, or in L-DS the finish
    /// tag of the burst's head-of-line packet alone (see
    /// [`Dwfq::set_lazy`]).
    pub rank: u128,
    /// Its age at FE_i (ASORT key, larger is earlier).
    pub age: u32,
}

/// The outcome of phases 2 and 3 for one round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub key: RoundKey,
    dims: Dims,
    /// P_ij, index `i * N + j`.
    picks: Vec<Option<Pick>>,
    /// X_i: links by FE_i's preference.
    pub fe_prefs: Vec<Vec<usize>>,
    /// Y_j: forwarders by OL_j's preference.
    pub ol_prefs: Vec<Vec<usize>>,
    /// Z: the link each forwarder is matched to.
    pub matching: Vec<Option<usize>>,
}

impl Decision {
    pub fn pick(&self, fe: usize, ol: usize) -> Option<&Pick> {
        if fe >= self.dims.forwarders || ol >= self.dims.outlinks {
            return None;
        }
        self.picks[fe * self.dims.outlinks + ol].as_ref()
    }
    /// The packets that go out this round, by forwarder.
    pub fn matched(&self) -> impl Iterator<Item = &Pick> + '_ {
        self.matching
            .iter()
            .enumerate()
            .filter_map(|(i, j)| j.and_then(|j| self.pick(i, j)))
    }
    /// What forwarder `fe` sends this round, if anything.
    pub fn matched_pick(&self, fe: usize) -> Option<&Pick> {
        self.matching
            .get(fe)
            .copied()
            .flatten()
            .and_then(|j| self.pick(fe, j))
    }
    /// |Z|.
    pub fn size(&self) -> usize {
        self.matching.iter().flatten().count()
    }
    /// Acceptable pairs (FE_i has a packet for OL_j) that would both rather
    /// be together than with their partners: empty for a stable matching.
    pub fn blocking_pairs(&self) -> Vec<(usize, usize)> {
        let rank = |list: &[usize], x: usize| list.iter().position(|y| *y == x);
        let mut ol_match = vec![None; self.dims.outlinks];
        for (i, j) in self.matching.iter().enumerate() {
            if let Some(j) = j {
                ol_match[*j] = Some(i);
            }
        }
        let mut out = Vec::new();
        for (i, xi) in self.fe_prefs.iter().enumerate() {
            for (r, &j) in xi.iter().enumerate() {
                let fe_wants = match self.matching[i] {
                    None => true,
                    Some(cur) => rank(xi, cur).is_none_or(|rc| r < rc),
                };
                let yj = &self.ol_prefs[j];
                let ol_wants = match ol_match[j] {
                    None => true,
                    Some(cur) => match (rank(yj, i), rank(yj, cur)) {
                        (Some(a), Some(b)) => a < b,
                        (Some(_), None) => true,
                        _ => false,
                    },
                };
                if fe_wants && ol_wants {
                    out.push((i, j));
                }
            }
        }
        out
    }
}

/// Order-independent 64-bit mixing (SplitMix64's finaliser), for
/// tie-breaks every forwarder computes alike.
fn mix(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The random tie-break key of one item in one round.
fn draw(seed: u64, key: RoundKey, what: u64, a: usize, b: usize, c: usize) -> u64 {
    [
        key.cycle as u64,
        key.round as u64,
        what,
        a as u64,
        b as u64,
        c as u64,
    ]
    .into_iter()
    .fold(mix(seed), |h, x| mix(h ^ x))
}

const DRAW_CLASS: u64 = 1;
const DRAW_ASORT: u64 = 2;
const DRAW_VSORT: u64 = 3;

/// Gale–Shapley deferred acceptance (Kleinberg & Tardos ch. 1): returns,
/// for each proposer, the acceptor it ends with. Lists may be partial; an
/// acceptor refuses proposers it does not list. Free proposers are taken
/// lowest index first, though the result (the proposer-optimal stable
/// matching) does not depend on that order.
fn gale_shapley(props: &[Vec<usize>], accs: &[Vec<usize>]) -> Vec<Option<usize>> {
    let mut rank = vec![vec![usize::MAX; props.len()]; accs.len()];
    for (a, list) in accs.iter().enumerate() {
        for (r, &p) in list.iter().enumerate() {
            if let Some(x) = rank[a].get_mut(p) {
                *x = (*x).min(r);
            }
        }
    }
    let mut next = vec![0usize; props.len()];
    let mut held: Vec<Option<usize>> = vec![None; accs.len()];
    let mut free: VecDeque<usize> = (0..props.len()).collect();
    while let Some(p) = free.pop_front() {
        while let Some(&a) = props[p].get(next[p]) {
            next[p] += 1;
            let Some(r) = rank.get(a).map(|ra| ra[p]).filter(|r| *r != usize::MAX) else {
                continue;
            };
            match held[a] {
                None => {
                    held[a] = Some(p);
                    break;
                }
                Some(q) if r < rank[a][q] => {
                    held[a] = Some(p);
                    free.push_back(q);
                    break;
                }
                Some(_) => {}
            }
        }
    }
    let mut out = vec![None; props.len()];
    for (a, p) in held.iter().enumerate() {
        if let Some(p) = p {
            out[*p] = Some(a);
        }
    }
    out
}

/// Phase 3: the stable matching of forwarders to links, as the link each
/// forwarder gets.
pub fn stable_match(
    fe_prefs: &[Vec<usize>],
    ol_prefs: &[Vec<usize>],
    proposer: Proposer,
) -> Vec<Option<usize>> {
    match proposer {
        Proposer::Forwarders => gale_shapley(fe_prefs, ol_prefs),
        Proposer::Outlinks => {
            let ol_side = gale_shapley(ol_prefs, fe_prefs);
            let mut out = vec![None; fe_prefs.len()];
            for (j, i) in ol_side.iter().enumerate() {
                if let Some(slot) = i.and_then(|i| out.get_mut(i)) {
                    *slot = Some(j);
                }
            }
            out
        }
    }
}

/// The distributed WFQ scheduler one forwarder runs (phases 2 and 3): the
/// virtual clocks, plus how to break ties and who proposes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dwfq {
    dims: Dims,
    clocks: VirtualClocks,
    tie: TieBreak,
    proposer: Proposer,
    lazy: bool,
    lazy_rank: LazyRank,
}

impl Dwfq {
    /// `weights`: one per class (K = `weights.len()` must equal
    /// `dims.classes`).
    pub fn new(dims: Dims, weights: Vec<u32>, tie: TieBreak, proposer: Proposer) -> Result<Self, String> {
        dims.validate()?;
        if weights.len() != dims.classes {
            return Err(format!(
                "stsdr: {} class weights for K = {} classes",
                weights.len(),
                dims.classes
            ));
        }
        Ok(Dwfq {
            dims,
            clocks: VirtualClocks::new(dims.outlinks, weights)?,
            tie,
            proposer,
            lazy: false,
            lazy_rank: LazyRank::Head,
        })
    }
    /// L-DS (§V-B): "the packet selection and link assignment happen as
    /// described in Section IV", then l packets go out. So picks are
    /// ranked as their queue's head-of-line packet would be in S-DS, by
    /// S_jk + (head's bytes) / w_k (the DS entry carries the head's length
    /// beside the burst's), not by the finish of the whole burst (which
    /// would make the matching prefer queues with short bursts); the
    /// burst is charged in full when sent.
    pub fn set_lazy(&mut self, lazy: bool) {
        self.lazy = lazy;
    }
    /// What L-DS ranks by ([`LazyRank::Head`] unless set).
    pub fn set_lazy_rank(&mut self, r: LazyRank) {
        self.lazy_rank = r;
    }
    pub fn dims(&self) -> Dims {
        self.dims
    }
    pub fn clocks(&self) -> &VirtualClocks {
        &self.clocks
    }
    pub fn clocks_mut(&mut self) -> &mut VirtualClocks {
        &mut self.clocks
    }
    pub fn tie_break(&self) -> TieBreak {
        self.tie
    }

    /// Phase 2 for one forwarder and one link: P_ij = WFQ(Q_ij1 … Q_ijK).
    fn wfq(&self, st: &FeState, fe: usize, ol: usize, key: RoundKey) -> Option<Pick> {
        (0..self.dims.classes)
            .filter_map(|k| {
                let e = st.head(ol, k)?;
                let tag = self.clocks.finish_tag(ol, k, e.len);
                let rank = match (self.lazy, self.lazy_rank) {
                    (true, LazyRank::Head) => self.clocks.finish_tag(ol, k, e.head_len()),
                    (true, LazyRank::Start) => self.clocks.start_tag(ol, k),
                    (false, _) => tag,
                };
                let age = st.age(e);
                let tb = match self.tie {
                    TieBreak::Deterministic => (u32::MAX - age) as u64,
                    TieBreak::Random { seed } => draw(seed, key, DRAW_CLASS, fe, ol, k),
                };
                Some((
                    (rank, tb, k),
                    Pick {
                        fe,
                        ol,
                        class: k,
                        entry: e,
                        tag,
                        rank,
                        age,
                    },
                ))
            })
            .min_by_key(|(sort_key, _)| *sort_key)
            .map(|(_, p)| p)
    }

    /// Phases 2 and 3 on `view`, without committing: the picks P_ij, the
    /// preference lists X_i and Y_j, and the matching Z. Classes that were
    /// idle are brought up to their link's clock first, as the round
    /// begins.
    pub fn decide(&mut self, view: &View, key: RoundKey) -> Decision {
        self.clocks.begin_round(view, key.round == 0);
        let (m, n) = (self.dims.forwarders, self.dims.outlinks);
        let mut picks = vec![None; m * n];
        for fe in 0..m {
            if let Some(st) = view.get(fe) {
                for ol in 0..n {
                    picks[fe * n + ol] = self.wfq(st, fe, ol, key);
                }
            }
        }
        let tb = |what, a, b| match self.tie {
            TieBreak::Deterministic => 0,
            TieBreak::Random { seed } => draw(seed, key, what, a, b, 0),
        };
        // X_i = ASORT(P_i1 … P_iN): earliest arrival (largest age) first.
        let fe_prefs: Vec<Vec<usize>> = (0..m)
            .map(|i| {
                let mut xs: Vec<(u32, u64, usize)> = (0..n)
                    .filter_map(|j| {
                        picks[i * n + j].map(|p: Pick| (u32::MAX - p.age, tb(DRAW_ASORT, i, j), j))
                    })
                    .collect();
                xs.sort_unstable();
                xs.into_iter().map(|x| x.2).collect()
            })
            .collect();
        // Y_j = VSORT(P_1j … P_Mj): smallest virtual finish first. Picks
        // of one class are one WFQ flow split over the forwarders, whose
        // FIFO serves the oldest first: a pick's finish is its class's
        // start tag plus the bytes of that class's older picks and its
        // own (picks of equal age tie, left to the tie-break). Ranking
        // same-class picks by their own length alone would
        // make a forwarder whose queue has grown (an L-DS burst of l
        // packets) lose every round to the short bursts of forwarders
        // just served, and starve (Table IV at l = 25, 100).
        let ol_prefs: Vec<Vec<usize>> = (0..n)
            .map(|j| {
                let mut ys: Vec<(u128, u64, usize)> = (0..m)
                    .filter_map(|i| {
                        let p: Pick = picks[i * n + j]?;
                        let ahead: u64 = (0..m)
                            .filter_map(|o| picks[o * n + j])
                            .filter(|q| q.class == p.class && q.age > p.age)
                            .map(|q| q.entry.len as u64)
                            .sum();
                        let w = self.clocks.weights().get(p.class).copied().unwrap_or(1).max(1) as u128;
                        Some((p.rank + ahead as u128 * VT_PER_BYTE / w, tb(DRAW_VSORT, i, j), i))
                    })
                    .collect();
                ys.sort_unstable();
                ys.into_iter().map(|y| y.2).collect()
            })
            .collect();
        let matching = stable_match(&fe_prefs, &ol_prefs, self.proposer);
        Decision {
            key,
            dims: self.dims,
            picks,
            fe_prefs,
            ol_prefs,
            matching,
        }
    }

    /// After the matched packets went out: every V_j and S_jk is updated
    /// and the sent entries leave the view.
    pub fn commit(&mut self, view: &mut View, d: &Decision) {
        for p in d.matched() {
            self.clocks.serve(p.ol, p.class, p.tag);
            if let Some(st) = view.get_mut(p.fe) {
                st.pop(p.ol, p.class);
            }
        }
    }

    /// One scheduling round: [`decide`](Self::decide) then
    /// [`commit`](Self::commit).
    pub fn round(&mut self, view: &mut View, key: RoundKey) -> Decision {
        let d = self.decide(view, key);
        self.commit(view, &d);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Meta, Packet};
    use crate::sched::{FairConf, QueueConf, Scheduler, Wfq};
    use crate::time::Instant;
    use proptest::prelude::*;

    fn e(stamp: u32, len: u32) -> Entry {
        Entry::packet(stamp, len)
    }

    /// Kleinberg & Tardos ch. 1: deferred acceptance on complete lists is
    /// a perfect matching without blocking pairs, optimal for proposers.
    #[test]
    fn gale_shapley_textbook_instance() {
        // Men 0..3 and women 0..3 with preferences where the man-optimal
        // and woman-optimal matchings differ.
        let men = vec![vec![0, 1, 2], vec![1, 0, 2], vec![0, 1, 2]];
        let women = vec![vec![1, 0, 2], vec![0, 1, 2], vec![0, 1, 2]];
        let m = gale_shapley(&men, &women);
        assert_eq!(m, vec![Some(0), Some(1), Some(2)]);
        let w = gale_shapley(&women, &men);
        assert_eq!(w, vec![Some(1), Some(0), Some(2)]);
        // Partial lists: an unacceptable proposer is refused.
        let m = gale_shapley(&[vec![0], vec![0]], &[vec![1]]);
        assert_eq!(m, vec![None, Some(0)]);
        // Out-of-range entries are ignored, not a panic.
        let m = gale_shapley(&[vec![7, 0]], &[vec![3, 0]]);
        assert_eq!(m, vec![Some(0)]);
    }

    fn dims(m: usize, n: usize, k: usize) -> Dims {
        Dims::new(m, n, k)
    }

    #[test]
    fn paper_figure5_example() {
        // M = 2, N = 2, K = 3 (Fig. 5). FE_0 has an old packet for OL_1
        // and a young one for OL_0; FE_1 only has packets for OL_0.
        let d = dims(2, 2, 3);
        let mut view = View::new(d);
        let mut f0 = FeState::new(d, 1000);
        f0.push(0, 0, e(900, 100));
        f0.push(1, 2, e(100, 100));
        let mut f1 = FeState::new(d, 50);
        f1.push(0, 1, e(10, 64));
        f1.push(0, 2, e(20, 1500));
        view.set(0, Some(f0));
        view.set(1, Some(f1));
        let mut s = Dwfq::new(d, vec![1, 1, 1], TieBreak::Deterministic, Proposer::Forwarders).unwrap();
        let dec = s.decide(&view, RoundKey::default());
        // P_10 is FE_1's class-1 packet (64 B beats 1500 B).
        assert_eq!(dec.pick(1, 0).unwrap().class, 1);
        assert_eq!(
            dec.fe_prefs[0],
            vec![1, 0],
            "ASORT: the older packet's link first"
        );
        assert_eq!(dec.ol_prefs[0], vec![1, 0], "VSORT: 64 B before 100 B");
        // FE_0 prefers OL_1, the only forwarder for it: both links used.
        assert_eq!(dec.matching, vec![Some(1), Some(0)]);
        assert!(dec.blocking_pairs().is_empty());
        s.commit(&mut view, &dec);
        assert_eq!(view.get(0).unwrap().head(1, 2), None);
        assert_eq!(view.get(1).unwrap().head(0, 1), None);
        assert_eq!(s.clocks().clock(0), VT_BASE + 64 * VT_PER_BYTE);
        assert_eq!(s.clocks().start_tag(1, 2), VT_BASE + 100 * VT_PER_BYTE);
    }

    /// L-DS ranks a pick as its head-of-line packet (by the finish tag of
    /// the head alone) and charges the whole burst: a queue whose burst is
    /// long is not passed over for one whose burst is short, and the long
    /// burst's class then waits its full charge.
    #[test]
    fn lds_ranks_by_head_and_charges_the_burst() {
        let d = dims(1, 1, 2);
        let view = |a: u32, b: u32| {
            let mut st = FeState::new(d, 100);
            // Bursts of 64-byte packets: equal heads.
            st.push(0, 0, Entry::burst(10, a, 64.min(a))); // older
            st.push(0, 1, Entry::burst(20, b, 64.min(b)));
            let mut v = View::new(d);
            v.set(0, Some(st));
            v
        };
        // By finish tag (S-DS/M-DS ranking), the short burst goes first.
        let mut s = Dwfq::new(d, vec![1, 1], TieBreak::Deterministic, Proposer::Forwarders).unwrap();
        assert_eq!(
            s.round(&mut view(2000, 100), RoundKey::default())
                .matched_pick(0)
                .unwrap()
                .class,
            1
        );
        // Lazy: equal head tags, the older head goes first, charged 2000 B.
        let mut s = Dwfq::new(d, vec![1, 1], TieBreak::Deterministic, Proposer::Forwarders).unwrap();
        s.set_lazy(true);
        let mut v = view(2000, 100);
        let dec = s.round(&mut v, RoundKey::default());
        assert_eq!(dec.matched_pick(0).unwrap().class, 0);
        assert_eq!(s.clocks().start_tag(0, 0), VT_BASE + 2000 * VT_PER_BYTE);
        // Then class 1 until it has caught up by 2000 B (20 bursts of 100).
        let mut order = Vec::new();
        for r in 1..=21u16 {
            // A fresh view each round, as each S-DS/L-DS cycle exchanges.
            let mut v = view(2000, 100);
            let key = RoundKey {
                cycle: r as u32,
                round: 0,
            };
            order.push(s.round(&mut v, key).matched_pick(0).unwrap().class);
        }
        assert_eq!(order[..20], [1; 20]);
        assert_eq!(order[20], 0);
    }

    /// Variable sizes (the paper's rule, §V-B): among classes with equal
    /// start tags, L-DS picks the one whose head-of-line packet finishes
    /// first, as S-DS would, whatever the bursts behind the heads; and a
    /// head of length 0 (an entry built without it) counts as the whole
    /// entry, never as a free packet.
    #[test]
    fn lds_ranks_equal_start_tags_by_the_head_length() {
        let d = dims(1, 1, 2);
        let pick = |a: Entry, b: Entry| {
            let mut st = FeState::new(d, 100);
            st.push(0, 0, a); // older
            st.push(0, 1, b);
            let mut v = View::new(d);
            v.set(0, Some(st));
            let mut s = Dwfq::new(d, vec![1, 1], TieBreak::Deterministic, Proposer::Forwarders).unwrap();
            s.set_lazy(true);
            s.round(&mut v, RoundKey::default())
                .matched_pick(0)
                .unwrap()
                .class
        };
        // A 1538-byte head (a 1500-byte IP packet on the link) loses to a
        // 84-byte one though it is older and its burst is shorter.
        assert_eq!(pick(Entry::burst(10, 1538, 1538), Entry::burst(20, 3000, 84)), 1);
        // Equal heads: the older goes first.
        assert_eq!(pick(Entry::burst(10, 3000, 84), Entry::burst(20, 1538, 84)), 0);
        // Head unknown (0) or larger than the burst: the whole entry.
        assert_eq!(
            pick(
                Entry {
                    stamp: 10,
                    len: 3000,
                    head: 0
                },
                Entry::burst(20, 1538, 1538)
            ),
            1
        );
        assert_eq!(pick(Entry::burst(10, 100, 5000), Entry::burst(20, 200, 84)), 1);
        // Ranked by start tag instead, the older head goes first.
        let mut st = FeState::new(d, 100);
        st.push(0, 0, Entry::burst(10, 1538, 1538));
        st.push(0, 1, Entry::burst(20, 3000, 84));
        let mut v = View::new(d);
        v.set(0, Some(st));
        let mut s = Dwfq::new(d, vec![1, 1], TieBreak::Deterministic, Proposer::Forwarders).unwrap();
        s.set_lazy(true);
        s.set_lazy_rank(LazyRank::Start);
        assert_eq!(
            s.round(&mut v, RoundKey::default())
                .matched_pick(0)
                .unwrap()
                .class,
            0
        );
    }

    /// Stamps compare by age against the sender's reference, so a wrap of
    /// the 32-bit clock does not reorder ASORT.
    #[test]
    fn asort_survives_stamp_wrap() {
        let d = dims(1, 2, 1);
        let mut st = FeState::new(d, 5);
        st.push(0, 0, e(u32::MAX - 10, 64)); // 16 units old
        st.push(1, 0, e(2, 64)); // 3 units old
        let mut view = View::new(d);
        view.set(0, Some(st));
        let mut s = Dwfq::new(d, vec![1], TieBreak::Deterministic, Proposer::Forwarders).unwrap();
        assert_eq!(s.decide(&view, RoundKey::default()).fe_prefs[0], vec![0, 1]);
    }

    /// Centralised SCFQ over K classes: tags at hand-over, V = finish of
    /// the last packet sent, ties by hand-over order.
    struct Scfq {
        w: Vec<u32>,
        v: u128,
        last: Vec<u128>,
        q: Vec<VecDeque<(u128, u64, u32)>>,
        seq: u64,
    }
    impl Scfq {
        fn new(w: Vec<u32>) -> Self {
            let k = w.len();
            Scfq {
                w,
                v: 0,
                last: vec![0; k],
                q: vec![VecDeque::new(); k],
                seq: 0,
            }
        }
        fn enqueue(&mut self, k: usize, len: u32) {
            let f = self.last[k].max(self.v) + len as u128 * VT_PER_BYTE / self.w[k] as u128;
            self.last[k] = f;
            self.q[k].push_back((f, self.seq, len));
            self.seq += 1;
        }
        fn dequeue(&mut self) -> Option<(usize, u32)> {
            let k = (0..self.q.len())
                .filter(|k| !self.q[*k].is_empty())
                .min_by_key(|k| (self.q[*k][0].0, self.q[*k][0].1))?;
            let (f, _, len) = self.q[k].pop_front()?;
            self.v = f;
            Some((k, len))
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// One forwarder, one link: S-DS (one entry per queue per round)
        /// sends exactly what centralised SCFQ sends, packet for packet,
        /// when SCFQ is handed each packet at the DS snapshot after its
        /// arrival.
        #[test]
        fn one_fe_one_ol_equals_centralised_scfq(
            weights in prop::collection::vec(1u32..5, 1..4),
            batches in prop::collection::vec(
                prop::collection::vec((0usize..4, 40u32..1500), 0..6), 1..40),
        ) {
            let k = weights.len();
            let d = dims(1, 1, k);
            let mut s = Dwfq::new(d, weights.clone(), TieBreak::Deterministic, Proposer::Forwarders).unwrap();
            let mut reference = Scfq::new(weights);
            let mut queues: Vec<VecDeque<Entry>> = vec![VecDeque::new(); k];
            let mut clock = 0u32;
            let mut sent = Vec::new();
            let mut expect = Vec::new();
            let rounds = batches.len() + 300;
            for r in 0..rounds {
                // Arrivals since the last round; stamps in arrival order.
                for &(c, len) in batches.get(r).into_iter().flatten() {
                    let c = c % k;
                    clock += 1;
                    queues[c].push_back(e(clock, len));
                    reference.enqueue(c, len);
                }
                // DS snapshot: head of line of each queue.
                let mut st = FeState::new(d, clock);
                for (c, q) in queues.iter().enumerate() {
                    if let Some(h) = q.front() {
                        st.push(0, c, *h);
                    }
                }
                let mut view = View::new(d);
                view.set(0, Some(st));
                let dec = s.round(&mut view, RoundKey { cycle: r as u32, round: 0 });
                if let Some(p) = dec.matched_pick(0) {
                    let h = queues[p.class].pop_front().unwrap();
                    prop_assert_eq!(h, p.entry);
                    sent.push((p.class, h.len));
                }
                if let Some(x) = reference.dequeue() {
                    expect.push(x);
                }
            }
            prop_assert_eq!(sent, expect);
        }

        /// With saturated queues (everything queued at once), one forwarder
        /// and one link: the same order as qosnet's exact PGPS.
        #[test]
        fn one_fe_one_ol_saturated_equals_pgps(
            weights in prop::collection::vec(1u32..6, 1..4),
            pkts in prop::collection::vec((0usize..4, 40u32..1500), 1..120),
        ) {
            let k = weights.len();
            let d = dims(1, 1, k);
            let conf = FairConf::classes(
                (0..k).map(|c| (c as u16, QueueConf::new(weights[c], 1 << 20, 1 << 30))).collect());
            let mut wfq = Wfq::new(conf, 1_000_000_000).unwrap();
            let mut queues: Vec<VecDeque<Entry>> = vec![VecDeque::new(); k];
            for (i, &(c, len)) in pkts.iter().enumerate() {
                let c = c % k;
                queues[c].push_back(e(i as u32, len));
                let meta = Meta { uid: i as u64, class: c as u16, ..Meta::default() };
                wfq.enqueue(Packet::new(vec![0; len as usize], meta), Instant::ZERO).unwrap();
            }
            let mut s = Dwfq::new(d, weights, TieBreak::Deterministic, Proposer::Forwarders).unwrap();
            for r in 0..pkts.len() {
                let mut st = FeState::new(d, pkts.len() as u32);
                for (c, q) in queues.iter().enumerate() {
                    if let Some(h) = q.front() {
                        st.push(0, c, *h);
                    }
                }
                let mut view = View::new(d);
                view.set(0, Some(st));
                let dec = s.round(&mut view, RoundKey { cycle: r as u32, round: 0 });
                let p = dec.matched_pick(0).unwrap();
                let h = queues[p.class].pop_front().unwrap();
                let w = wfq.dequeue(Instant::ZERO).unwrap();
                prop_assert_eq!(w.meta.uid, h.stamp as u64);
            }
        }

        /// Random DS states of any size: the matching is stable, uses only
        /// acceptable pairs, gives each link at most one forwarder, and has
        /// min(M, N) pairs when every forwarder has a packet for every link.
        #[test]
        fn matching_is_stable_and_maximal_when_complete(
            m in 1usize..6, n in 1usize..6, k in 1usize..4,
            full in any::<bool>(),
            cells in prop::collection::vec((any::<bool>(), 0u32..50, 40u32..1500), 150),
            seed in any::<u64>(), random in any::<bool>(), ol_proposes in any::<bool>(),
        ) {
            let d = dims(m, n, k);
            let tie = if random { TieBreak::Random { seed } } else { TieBreak::Deterministic };
            let prop_side = if ol_proposes { Proposer::Outlinks } else { Proposer::Forwarders };
            let mut s = Dwfq::new(d, vec![1; k], tie, prop_side).unwrap();
            let mut view = View::new(d);
            let mut c = cells.iter().cycle();
            for i in 0..m {
                let mut st = FeState::new(d, 100);
                for j in 0..n {
                    for kk in 0..k {
                        let &(present, stamp, len) = c.next().unwrap();
                        if present || (full && kk == 0) {
                            st.push(j, kk, e(stamp, len));
                        }
                    }
                }
                view.set(i, Some(st));
            }
            for r in 0..4u16 {
                let dec = s.decide(&view, RoundKey { cycle: 7, round: r });
                prop_assert!(dec.blocking_pairs().is_empty(), "blocking pairs {:?}", dec.blocking_pairs());
                let mut used = vec![false; n];
                for (i, j) in dec.matching.iter().enumerate() {
                    if let Some(j) = *j {
                        prop_assert!(dec.pick(i, j).is_some(), "unacceptable pair");
                        prop_assert!(!used[j], "link matched twice");
                        used[j] = true;
                    }
                }
                if full && r == 0 {
                    prop_assert_eq!(dec.size(), m.min(n));
                }
                s.commit(&mut view, &dec);
            }
        }

        /// M independent copies fed the same DS state compute the same
        /// decisions round after round, with either tie-break, and their
        /// clocks stay equal.
        #[test]
        fn copies_agree(
            m in 1usize..5, n in 1usize..4, k in 1usize..4,
            cells in prop::collection::vec((0u8..3, 0u32..8, prop::sample::select(vec![64u32, 64, 64, 576, 1500])), 60),
            seed in any::<u64>(), random in any::<bool>(),
        ) {
            let d = dims(m, n, k);
            let tie = if random { TieBreak::Random { seed } } else { TieBreak::Deterministic };
            let mut view = View::new(d);
            let mut c = cells.iter().cycle();
            for i in 0..m {
                let mut st = FeState::new(d, 10);
                for j in 0..n {
                    for kk in 0..k {
                        let &(depth, stamp, len) = c.next().unwrap();
                        for x in 0..depth as u32 {
                            st.push(j, kk, e(stamp + x, len));
                        }
                    }
                }
                view.set(i, Some(st));
            }
            let mut copies: Vec<(Dwfq, View)> = (0..m)
                .map(|_| (Dwfq::new(d, vec![1, 2, 3][..k].to_vec(), tie, Proposer::Forwarders).unwrap(), view.clone()))
                .collect();
            for r in 0..8u16 {
                let key = RoundKey { cycle: 3, round: r };
                let decisions: Vec<Decision> = copies.iter_mut().map(|(s, v)| s.round(v, key)).collect();
                for dd in &decisions[1..] {
                    prop_assert_eq!(dd, &decisions[0]);
                }
                for (s, v) in &copies[1..] {
                    prop_assert_eq!(s.clocks(), copies[0].0.clocks());
                    prop_assert_eq!(v, &copies[0].1);
                }
            }
        }

        /// One link, M forwarders, all classes backlogged throughout:
        /// Golestani's SCFQ bound holds at every round,
        /// |W_a/w_a − W_b/w_b| ≤ L_max/w_a + L_max/w_b.
        #[test]
        fn scfq_fairness_bound_one_link(
            m in 1usize..4,
            weights in prop::collection::vec(1u32..5, 2..4),
            lens in prop::collection::vec(40u32..1500, 32),
            seed in any::<u64>(),
        ) {
            let k = weights.len();
            let d = dims(m, 1, k);
            let mut s = Dwfq::new(d, weights.clone(), TieBreak::Random { seed }, Proposer::Forwarders).unwrap();
            let lmax = *lens.iter().max().unwrap() as f64;
            let mut next = 0usize;
            let mut draw_len = || { next += 1; lens[(next * 7 + next / 3) % lens.len()] };
            let mut view = View::new(d);
            for i in 0..m {
                let mut st = FeState::new(d, 0);
                for c in 0..k {
                    st.push(0, c, e(0, draw_len()));
                }
                view.set(i, Some(st));
            }
            let mut served = vec![0f64; k];
            for r in 0..600u32 {
                let dec = s.round(&mut view, RoundKey { cycle: r, round: 0 });
                let p = *dec.matched_pick(dec.matching.iter().position(|x| x.is_some()).unwrap()).unwrap();
                served[p.class] += p.entry.len as f64;
                // Saturated: refill the queue that was served.
                let len = draw_len();
                view.get_mut(p.fe).unwrap().push(0, p.class, e(r + 1, len));
                for a in 0..k {
                    for b in 0..k {
                        let gap = served[a] / weights[a] as f64 - served[b] / weights[b] as f64;
                        let bound = lmax / weights[a] as f64 + lmax / weights[b] as f64;
                        prop_assert!(gap <= bound + 1e-9, "round {}: classes {} {} gap {} > {}", r, a, b, gap, bound);
                    }
                }
            }
        }
    }

    /// One class split over two forwarders is one WFQ flow: the older
    /// head goes first even when it is a long L-DS burst and the younger
    /// one a single packet (else a grown queue loses every round).
    #[test]
    fn same_class_picks_are_served_oldest_first() {
        let d = dims(2, 1, 1);
        let mut view = View::new(d);
        let mut f0 = FeState::new(d, 1000);
        f0.push(0, 0, e(100, 21 * 78));
        let mut f1 = FeState::new(d, 1000);
        f1.push(0, 0, e(900, 78));
        view.set(0, Some(f0));
        view.set(1, Some(f1));
        let s = Dwfq::new(d, vec![1], TieBreak::Deterministic, Proposer::Forwarders).unwrap();
        let dec = s.clone().decide(&view, RoundKey::default());
        assert_eq!(dec.ol_prefs[0], vec![0, 1], "older burst first");
        assert_eq!(dec.matching[0], Some(0));
    }

    #[test]
    fn random_ties_depend_on_the_round_not_on_the_copy() {
        let d = dims(3, 1, 1);
        let mut view = View::new(d);
        for i in 0..3 {
            let mut st = FeState::new(d, 0);
            st.push(0, 0, e(0, 64));
            view.set(i, Some(st));
        }
        let s = Dwfq::new(d, vec![1], TieBreak::Random { seed: 42 }, Proposer::Forwarders).unwrap();
        let winners: std::collections::BTreeSet<usize> = (0..64)
            .map(|c| {
                let dec = s.clone().decide(&view, RoundKey { cycle: c, round: 0 });
                dec.matching.iter().position(|x| x.is_some()).unwrap()
            })
            .collect();
        assert_eq!(winners.len(), 3, "every forwarder wins some equal-tag rounds");
        let det = Dwfq::new(d, vec![1], TieBreak::Deterministic, Proposer::Forwarders).unwrap();
        for c in 0..8 {
            let dec = det.clone().decide(&view, RoundKey { cycle: c, round: 0 });
            assert_eq!(dec.matching[0], Some(0), "deterministic: lowest forwarder");
        }
    }

    #[test]
    fn idle_class_starts_from_the_clock_and_offsets_round_trip() {
        let d = dims(1, 1, 2);
        let mut s = Dwfq::new(d, vec![1, 1], TieBreak::Deterministic, Proposer::Forwarders).unwrap();
        let mut view = View::new(d);
        // Class 0 alone for 10 packets.
        for r in 0..10 {
            let mut st = FeState::new(d, r);
            st.push(0, 0, e(r, 100));
            view.set(0, Some(st));
            s.round(&mut view, RoundKey::default());
        }
        assert_eq!(s.clocks().clock(0), VT_BASE + 1000 * VT_PER_BYTE);
        // Class 1 appears: it starts at V, not at its stale start tag, so it
        // does not get ten packets of credit.
        let mut st = FeState::new(d, 20);
        st.push(0, 0, e(11, 100));
        st.push(0, 1, e(12, 100));
        view.set(0, Some(st));
        let dec = s.decide(&view, RoundKey::default());
        assert_eq!(
            dec.pick(0, 0).unwrap().class,
            0,
            "equal tags, earlier arrival first"
        );
        assert_eq!(s.clocks().start_tag(0, 1), VT_BASE + 1000 * VT_PER_BYTE);
        // Offsets adopted by a fresh copy reproduce the decision.
        let offs = s.clocks().offsets();
        let mut other = Dwfq::new(d, vec![1, 1], TieBreak::Deterministic, Proposer::Forwarders).unwrap();
        assert!(other.clocks_mut().adopt(&offs));
        assert!(!other.clocks_mut().adopt(&offs[..1]));
        assert_eq!(other.clocks().offsets(), offs);
        let mut s2 = s.clone();
        let a = s2.round(&mut view.clone(), RoundKey::default());
        let b = other.round(&mut view.clone(), RoundKey::default());
        assert_eq!(a.matching, b.matching);
        assert_eq!(a.pick(0, 0).map(|p| p.class), b.pick(0, 0).map(|p| p.class));
    }

    #[test]
    fn config_errors_are_refused() {
        assert!(Dwfq::new(
            dims(1, 1, 2),
            vec![1],
            TieBreak::Deterministic,
            Proposer::Forwarders
        )
        .is_err());
        assert!(Dwfq::new(
            dims(1, 1, 1),
            vec![0],
            TieBreak::Deterministic,
            Proposer::Forwarders
        )
        .is_err());
        assert!(Dwfq::new(
            dims(0, 1, 1),
            vec![1],
            TieBreak::Deterministic,
            Proposer::Forwarders
        )
        .is_err());
        assert!(Dwfq::new(
            dims(1, 300, 1),
            vec![1],
            TieBreak::Deterministic,
            Proposer::Forwarders
        )
        .is_err());
    }
}
