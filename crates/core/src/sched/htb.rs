//! Hierarchical token bucket link sharing, after Linux `sch_htb`
//! (M. Devera) and the link-sharing model of Floyd & Jacobson,
//! "Link-sharing and Resource Management Models for Packet Networks"
//! (IEEE/ACM ToN 1995), which HTB implements with token buckets.
//!
//! Classes form a tree; leaves hold packets (a FIFO, or any child
//! [`Scheduler`]). Every class has two buckets: `rate` (its guarantee, depth
//! `burst`) and `ceil` (its cap, depth `cburst`). A class *can send* while
//! both hold tokens (≥ 0, packets may drive them negative as in Linux),
//! *may borrow* while only ceil does, and *cannot send* once ceil is empty.
//! A leaf sends at its own rate when it can send; otherwise it borrows
//! from the nearest ancestor that can send, provided every class on the
//! way may borrow. Leaves that need the fewest borrowing hops go first,
//! then lower `prio`, then deficit round robin by `quantum`. Sending
//! charges every class up the tree its ceil tokens, and rate tokens from
//! the lender up (htb_charge_class). Because ceil and rate limit the
//! tree, the scheduler is not work conserving: [`Scheduler::poll_at`] gives
//! the exact instant at which some throttled class may send again.
//!
//! Differences from Linux, on purpose: borrowing level is counted in hops
//! from the leaf rather than Linux's fixed per-depth levels, round robin
//! among leaves borrowing at the same level is flat (per leaf, by quantum)
//! rather than per lending parent, there is no hysteresis or 60 s
//! `mbuffer` cap. Tokens are exact integers in nano-bits (rate × Δt_ns).

use crate::config::ConfigError;
use std::collections::HashMap;

use super::{DropReason, Dropped, Fifo, QueueStats, Scheduler};
use crate::packet::Packet;
use crate::time::{Duration, Instant};

/// Priorities 0 (served first) ..= 7, as Linux `TC_HTB_NUMPRIO`.
pub const HTB_PRIOS: usize = 8;
/// Deepest class chain accepted (Linux `TC_HTB_MAXDEPTH`).
pub const HTB_MAX_DEPTH: usize = 8;

const UNITS_PER_BYTE: i128 = 8_000_000_000;

/// One class of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HtbClass {
    /// Matched against `meta.class` for leaves.
    pub id: u16,
    /// `None` for a top-level class (nothing to borrow from).
    pub parent: Option<u16>,
    /// Guaranteed rate, bit/s.
    pub rate_bps: u64,
    /// Maximum rate including borrowing, bit/s (≥ rate).
    pub ceil_bps: u64,
    /// Depth of the rate and ceil buckets, bytes.
    pub burst: u32,
    pub cburst: u32,
    /// 0 = served (and lent to) first.
    pub prio: u8,
    /// DRR quantum among leaves at the same level and priority, bytes.
    pub quantum: u32,
    /// Leaf FIFO limits (ignored for inner classes).
    pub limit_pkts: usize,
    pub limit_bytes: usize,
}

impl HtbClass {
    /// A class with Linux-like defaults: bursts of 1 ms at the rate but at
    /// least 1600 bytes, prio 0, quantum rate/10 bytes per second clamped
    /// to 1000..=200 000 (Linux r2q = 10), a 1000-packet FIFO.
    pub fn new(id: u16, parent: Option<u16>, rate_bps: u64, ceil_bps: u64) -> Self {
        let burst = |r: u64| (r / 8 / 1_000).clamp(1_600, u32::MAX as u64) as u32;
        HtbClass {
            id,
            parent,
            rate_bps,
            ceil_bps,
            burst: burst(rate_bps),
            cburst: burst(ceil_bps),
            prio: 0,
            quantum: (rate_bps / 8 / 10).clamp(1_000, 200_000) as u32,
            limit_pkts: 1_000,
            limit_bytes: 1_000 * 1_514,
        }
    }
    pub fn bursts(mut self, burst: u32, cburst: u32) -> Self {
        self.burst = burst;
        self.cburst = cburst;
        self
    }
    pub fn prio(mut self, prio: u8) -> Self {
        self.prio = prio;
        self
    }
    pub fn quantum(mut self, quantum: u32) -> Self {
        self.quantum = quantum;
        self
    }
    pub fn limits(mut self, pkts: usize, bytes: usize) -> Self {
        self.limit_pkts = pkts;
        self.limit_bytes = bytes;
        self
    }
}

#[derive(Clone, Debug)]
pub struct HtbConf {
    pub classes: Vec<HtbClass>,
    /// Leaf for packets whose `meta.class` is not a leaf; without one they
    /// are refused as `QueueFull`.
    pub default_class: Option<u16>,
    /// Bytes added to each packet's length when charging buckets.
    pub overhead: u32,
}

/// Counters of one class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HtbClassInfo {
    /// Whole bytes in the rate and ceil buckets at the time asked (< 0:
    /// in debt).
    pub tokens: i64,
    pub ctokens: i64,
    /// Packets and bytes sent through this class (leaf or inner).
    pub sent_pkts: u64,
    pub sent_bytes: u64,
    /// Leaf: packets sent with borrowed rate. Inner: packets it lent.
    pub borrowed: u64,
    pub lent: u64,
    /// Leaf backlog.
    pub len: usize,
}

/// A token bucket that may go negative (HTB sends while tokens ≥ 0).
#[derive(Clone, Copy, Debug)]
struct Tb {
    rate: u64,
    cap: i128,
    tokens: i128,
}

impl Tb {
    fn new(rate_bps: u64, burst: u32) -> Self {
        let cap = burst as i128 * UNITS_PER_BYTE;
        Tb {
            rate: rate_bps,
            cap,
            tokens: cap,
        }
    }
    fn at(&self, dt: Duration) -> i128 {
        let add = (dt.as_nanos() as u128 * self.rate as u128).min(i128::MAX as u128) as i128;
        self.tokens.saturating_add(add).min(self.cap)
    }
    /// Earliest instant ≥ `now` with tokens ≥ 0, given tokens `tok` at now.
    fn ready(&self, tok: i128, now: Instant) -> Instant {
        if tok >= 0 {
            now
        } else {
            let ns = (tok.unsigned_abs()).div_ceil(self.rate as u128);
            now + Duration(ns.min(u64::MAX as u128) as u64)
        }
    }
}

struct Node {
    parent: Option<usize>,
    rate: Tb,
    ceil: Tb,
    t_c: Instant,
    prio: u8,
    quantum: u32,
    /// Leaf only: its queue and DRR deficit per borrowing level.
    q: Option<Box<dyn Scheduler>>,
    deficit: [i64; HTB_MAX_DEPTH],
    info: HtbClassInfo,
}

impl Node {
    fn tokens(&self, now: Instant) -> (i128, i128) {
        let dt = now.saturating_since(self.t_c);
        (self.rate.at(dt), self.ceil.at(dt))
    }
}

/// HTB. See the module documentation.
pub struct Htb {
    nodes: Vec<Node>,
    /// Node indices of the leaves, in configuration order (the round-robin
    /// order).
    leaves: Vec<usize>,
    by_id: HashMap<u16, usize>,
    default_leaf: Option<usize>,
    /// Round-robin position (index into `leaves`) per (level, prio).
    rr: [[usize; HTB_PRIOS]; HTB_MAX_DEPTH],
    /// Scratch: borrowing level of each leaf at the current dequeue.
    level: Vec<u8>,
    overhead: u32,
    len: usize,
    bytes: usize,
    stats: QueueStats,
}

const NOT_READY: u8 = u8::MAX;

impl Htb {
    pub fn new(conf: HtbConf) -> Result<Self, ConfigError> {
        let cs = &conf.classes;
        if cs.is_empty() {
            return Err(ConfigError::missing("htb", "no classes"));
        }
        let mut by_id = HashMap::new();
        for (i, c) in cs.iter().enumerate() {
            if by_id.insert(c.id, i).is_some() {
                return Err(ConfigError::duplicate("htb", format!("class {}", c.id)));
            }
        }
        let mut has_child = vec![false; cs.len()];
        let mut parent = vec![None; cs.len()];
        for (i, c) in cs.iter().enumerate() {
            let id = c.id;
            if c.rate_bps == 0 {
                return Err(ConfigError::zero("htb", format!("class {id}'s rate")));
            }
            if c.ceil_bps < c.rate_bps {
                return Err(ConfigError::conflict(
                    "htb",
                    format!("class {id} has ceil {} < rate {}", c.ceil_bps, c.rate_bps),
                ));
            }
            if c.burst == 0 || c.cburst == 0 {
                return Err(ConfigError::zero("htb", format!("class {id}'s burst and cburst")));
            }
            if c.quantum == 0 {
                return Err(ConfigError::zero("htb", format!("class {id}'s quantum")));
            }
            if c.prio as usize >= HTB_PRIOS {
                return Err(ConfigError::range(
                    "htb",
                    format!("class {id}'s prio"),
                    c.prio,
                    format!("at most {}", HTB_PRIOS - 1),
                ));
            }
            if let Some(p) = c.parent {
                let &pi = by_id.get(&p).ok_or_else(|| {
                    ConfigError::missing("htb", format!("class {id} has unknown parent {p}"))
                })?;
                if pi == i {
                    return Err(ConfigError::conflict(
                        "htb",
                        format!("class {id} is its own parent"),
                    ));
                }
                has_child[pi] = true;
                parent[i] = Some(pi);
            }
        }
        for (i, c) in cs.iter().enumerate() {
            let (mut a, mut depth) = (i, 1);
            while let Some(p) = parent[a] {
                a = p;
                depth += 1;
                if depth > HTB_MAX_DEPTH {
                    return Err(ConfigError::conflict(
                        "htb",
                        format!(
                            "class {} is in a parent cycle or deeper than {HTB_MAX_DEPTH} levels",
                            c.id
                        ),
                    ));
                }
            }
        }
        let mut nodes = Vec::with_capacity(cs.len());
        let mut leaves = Vec::new();
        for (i, c) in cs.iter().enumerate() {
            let q: Option<Box<dyn Scheduler>> = if has_child[i] {
                None
            } else {
                if c.limit_pkts == 0 || c.limit_bytes == 0 {
                    return Err(ConfigError::zero(
                        "htb",
                        format!("leaf class {}'s packet and byte limits", c.id),
                    ));
                }
                leaves.push(i);
                Some(Box::new(Fifo::new(c.limit_pkts, c.limit_bytes)))
            };
            nodes.push(Node {
                parent: parent[i],
                rate: Tb::new(c.rate_bps, c.burst),
                ceil: Tb::new(c.ceil_bps, c.cburst),
                t_c: Instant::ZERO,
                prio: c.prio,
                quantum: c.quantum,
                q,
                deficit: [0; HTB_MAX_DEPTH],
                info: HtbClassInfo::default(),
            });
        }
        let default_leaf = match conf.default_class {
            None => None,
            Some(d) => match by_id.get(&d) {
                Some(&i) if nodes[i].q.is_some() => Some(i),
                Some(_) => {
                    return Err(ConfigError::conflict(
                        "htb",
                        format!("default class {d} is not a leaf"),
                    ))
                }
                None => {
                    return Err(ConfigError::missing(
                        "htb",
                        format!("default class {d} does not exist"),
                    ))
                }
            },
        };
        Ok(Htb {
            level: vec![NOT_READY; leaves.len()],
            nodes,
            leaves,
            by_id,
            default_leaf,
            rr: [[0; HTB_PRIOS]; HTB_MAX_DEPTH],
            overhead: conf.overhead,
            len: 0,
            bytes: 0,
            stats: QueueStats::default(),
        })
    }

    /// Replaces the FIFO of leaf `id` by another discipline (RED, WFQ, …).
    pub fn set_leaf_qdisc(&mut self, id: u16, q: Box<dyn Scheduler>) -> Result<(), String> {
        let &i = self.by_id.get(&id).ok_or_else(|| format!("htb: no class {id}"))?;
        match &mut self.nodes[i].q {
            None => Err(format!("htb: class {id} is not a leaf")),
            Some(old) if !old.is_empty() => Err(format!("htb: leaf {id} is not empty")),
            Some(old) => {
                *old = q;
                Ok(())
            }
        }
    }

    /// Counters and bucket levels of class `id` at `now`.
    pub fn class(&self, id: u16, now: Instant) -> Option<HtbClassInfo> {
        let n = &self.nodes[*self.by_id.get(&id)?];
        let (t, c) = n.tokens(now);
        let to_bytes =
            |u: i128| (u.div_euclid(UNITS_PER_BYTE)).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        Some(HtbClassInfo {
            tokens: to_bytes(t),
            ctokens: to_bytes(c),
            len: n.q.as_ref().map_or(0, |q| q.len()),
            ..n.info
        })
    }

    /// Hops from leaf `li` to the class it may send on at `now`: 0 = its
    /// own rate, k = borrowing from its k-th ancestor; `None` if blocked.
    fn send_level(&self, li: usize, now: Instant) -> Option<u8> {
        let mut a = li;
        for k in 0..HTB_MAX_DEPTH as u8 {
            let n = &self.nodes[a];
            let (tok, ctok) = n.tokens(now);
            if ctok < 0 {
                return None; // cannot send: ceil exhausted on the path
            }
            if tok >= 0 {
                return Some(k); // can send: lends to the leaf
            }
            a = n.parent?; // may borrow: ask the parent
        }
        None
    }

    /// Earliest instant ≥ `now` at which leaf `li` may send, if no other
    /// class sends meanwhile: min over lenders k of the latest of the ceil
    /// refills on the path up to k and k's rate refill.
    fn send_time(&self, li: usize, now: Instant) -> Instant {
        let (mut a, mut ceil_ok, mut best) = (li, now, Instant::MAX);
        loop {
            let n = &self.nodes[a];
            let (tok, ctok) = n.tokens(now);
            ceil_ok = ceil_ok.max(n.ceil.ready(ctok, now));
            best = best.min(ceil_ok.max(n.rate.ready(tok, now)));
            match n.parent {
                Some(p) => a = p,
                None => return best,
            }
        }
    }

    /// The leaf to serve at `now`, as (position in `leaves`, borrowing
    /// level, prio), without changing anything: `level` is scratch, one
    /// entry per leaf. Pass 1 finds each backlogged leaf's borrowing level
    /// and the best (level, prio); pass 2 goes round robin among the
    /// leaves with that (level, prio) from where the last turn stopped.
    fn pick(&self, now: Instant, level: &mut [u8]) -> Option<(usize, u8, u8)> {
        let mut best: Option<(u8, u8)> = None;
        for (&li, slot) in self.leaves.iter().zip(level.iter_mut()) {
            let q = self.nodes[li].q.as_ref().expect("leaf");
            let lvl = if q.poll_at(now).is_some_and(|t| t <= now) {
                self.send_level(li, now).unwrap_or(NOT_READY)
            } else {
                NOT_READY
            };
            *slot = lvl;
            if lvl != NOT_READY {
                let key = (lvl, self.nodes[li].prio);
                best = Some(match best {
                    Some(b) if b <= key => b,
                    _ => key,
                });
            }
        }
        let (lvl, prio) = best?;
        let n = self.leaves.len();
        let start = self.rr[lvl as usize][prio as usize] % n;
        let pos = (0..n)
            .map(|d| (start + d) % n)
            .find(|&p| level[p] == lvl && self.nodes[self.leaves[p]].prio == prio)?;
        Some((pos, lvl, prio))
    }

    /// Charges a sent packet up the tree (htb_charge_class): every class
    /// pays ceil tokens; the lender at hop `level` and above pay rate too.
    fn charge(&mut self, li: usize, level: u8, cost: u64, now: Instant) {
        let units = cost as i128 * UNITS_PER_BYTE;
        let (mut a, mut hop) = (Some(li), 0u8);
        while let Some(i) = a {
            let n = &mut self.nodes[i];
            let (tok, ctok) = n.tokens(now);
            n.t_c = n.t_c.max(now);
            n.rate.tokens = tok;
            n.ceil.tokens = ctok - units;
            if hop >= level {
                n.rate.tokens -= units;
            }
            n.info.sent_pkts += 1;
            n.info.sent_bytes += cost;
            if hop == 0 && level > 0 {
                n.info.borrowed += 1;
            }
            if hop == level && level > 0 {
                n.info.lent += 1;
            }
            a = n.parent;
            hop += 1;
        }
    }
}

impl Scheduler for Htb {
    fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped> {
        let leaf = match self.by_id.get(&pkt.meta.class) {
            Some(&i) if self.nodes[i].q.is_some() => Some(i),
            _ => self.default_leaf,
        };
        let Some(i) = leaf else {
            self.stats.on_drop(DropReason::QueueFull);
            return Err(Dropped {
                pkt,
                reason: DropReason::QueueFull,
            });
        };
        let len = pkt.len();
        let q = self.nodes[i].q.as_mut().expect("leaf");
        match q.enqueue(pkt, now) {
            Ok(()) => {
                self.len += 1;
                self.bytes += len;
                self.stats.on_enqueue(len);
                Ok(())
            }
            Err(d) => {
                self.stats.on_drop(d.reason);
                Err(d)
            }
        }
    }

    fn dequeue(&mut self, now: Instant) -> Option<Packet> {
        if self.len == 0 {
            return None;
        }
        let mut level = std::mem::take(&mut self.level);
        let pick = self.pick(now, &mut level);
        self.level = level;
        let (pos, lvl, prio) = pick?;
        let li = self.leaves[pos];
        let node = &mut self.nodes[li];
        let pkt = node.q.as_mut().expect("leaf").dequeue(now)?;
        let cost = pkt.len() as u64 + self.overhead as u64;
        // DRR as in htb_dequeue_tree: stay on this leaf until its deficit
        // at this level goes negative, then top it up and move on.
        let d = &mut node.deficit[lvl as usize];
        *d -= cost as i64;
        if *d < 0 {
            *d += node.quantum as i64;
            self.rr[lvl as usize][prio as usize] = pos + 1;
        } else {
            self.rr[lvl as usize][prio as usize] = pos;
        }
        self.charge(li, lvl, cost, now);
        self.len -= 1;
        self.bytes -= pkt.len();
        self.stats.on_dequeue(pkt.len());
        Some(pkt)
    }

    /// The chosen leaf's head, found as `dequeue` finds it (token levels
    /// read at `now`, not refilled).
    fn peek(&self, now: Instant) -> Option<&Packet> {
        if self.len == 0 {
            return None;
        }
        let mut level = vec![NOT_READY; self.leaves.len()];
        let (pos, _, _) = self.pick(now, &mut level)?;
        self.nodes[self.leaves[pos]].q.as_ref()?.peek(now)
    }

    fn poll_at(&self, now: Instant) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        let mut best: Option<Instant> = None;
        for &li in &self.leaves {
            let q = self.nodes[li].q.as_ref().expect("leaf");
            if let Some(t) = q.poll_at(now) {
                let t = t.max(self.send_time(li, now)).max(now);
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        }
        best
    }
    fn len(&self) -> usize {
        self.len
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "htb"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Meta;
    use proptest::prelude::*;

    const MBIT: u64 = 1_000_000;

    fn pkt(uid: u64, class: u16, len: usize) -> Packet {
        Packet::new(
            vec![0; len],
            Meta {
                uid,
                class,
                ..Meta::default()
            },
        )
    }
    fn conf(classes: Vec<HtbClass>) -> HtbConf {
        HtbConf {
            classes,
            default_class: None,
            overhead: 0,
        }
    }

    #[test]
    fn constructor_refuses_bad_trees() {
        let c = |id, parent| HtbClass::new(id, parent, MBIT, MBIT);
        use crate::config::Fault;
        let e = |cs: Vec<HtbClass>| Htb::new(conf(cs)).err().unwrap();
        let says = |x: ConfigError, text: &str| x.component == "htb" && x.to_string().contains(text);
        assert!(matches!(e(vec![]).fault, Fault::Missing(_)));
        assert_eq!(
            e(vec![c(1, None), c(1, None)]).fault,
            Fault::Duplicate("class 1".into())
        );
        assert!(matches!(e(vec![c(1, Some(9))]).fault, Fault::Missing(s) if s.contains("unknown parent 9")));
        assert!(matches!(e(vec![c(1, Some(1))]).fault, Fault::Conflict(s) if s.contains("own parent")));
        assert!(says(e(vec![c(1, Some(2)), c(2, Some(1))]), "cycle"));
        assert!(says(e(vec![HtbClass::new(1, None, 2 * MBIT, MBIT)]), "ceil"));
        assert_eq!(
            e(vec![HtbClass::new(1, None, 0, MBIT)]).fault,
            Fault::Zero("class 1's rate".into())
        );
        assert!(matches!(e(vec![c(1, None).prio(8)]).fault, Fault::Range { .. }));
        assert!(says(e(vec![c(1, None).quantum(0)]), "quantum must be > 0"));
        let mut cf = conf(vec![c(1, None), c(2, Some(1))]);
        cf.default_class = Some(1);
        assert!(says(Htb::new(cf).err().unwrap(), "not a leaf"));
    }

    #[test]
    fn golden_rate_limited_leaf_and_exact_poll_at() {
        // 8 Mbit/s = 1 byte/µs, burst 1000 B. HTB sends while tokens ≥ 0:
        // 1000 → 500 → 0 → -500, then waits 500 µs per packet.
        let leaf = HtbClass::new(1, None, 8 * MBIT, 8 * MBIT).bursts(1_000, 1_000);
        let mut h = Htb::new(conf(vec![leaf])).unwrap();
        let t0 = Instant(0);
        for uid in 1..=5 {
            h.enqueue(pkt(uid, 1, 500), t0).unwrap();
        }
        let burst: Vec<u64> = std::iter::from_fn(|| h.dequeue(t0)).map(|p| p.meta.uid).collect();
        assert_eq!(burst, vec![1, 2, 3]);
        assert_eq!(h.class(1, t0).unwrap().tokens, -500);
        assert_eq!(h.poll_at(t0), Some(Instant(500_000)));
        assert!(h.dequeue(Instant(499_999)).is_none());
        assert_eq!(h.dequeue(Instant(500_000)).unwrap().meta.uid, 4);
        assert_eq!(h.poll_at(Instant(500_000)), Some(Instant(1_000_000)));
        assert_eq!(h.dequeue(Instant(1_000_000)).unwrap().meta.uid, 5);
        assert_eq!(h.poll_at(Instant(1_000_000)), None);
        assert_eq!(h.stats().deq_pkts, 5);
    }

    #[test]
    fn golden_drr_among_leaves_at_their_own_rate() {
        // Both leaves have plenty of tokens (level 0). Quanta 1000 and
        // 2000 with 500-byte packets: A sends 1 then 2 per turn, B 1 then
        // 4 per turn (deficits start at 0, as in Linux).
        let big = |c: HtbClass| c.bursts(100_000, 100_000);
        let mut h = Htb::new(conf(vec![
            big(HtbClass::new(1, None, 8 * MBIT, 8 * MBIT)),
            big(HtbClass::new(10, Some(1), 4 * MBIT, 8 * MBIT).quantum(1_000)),
            big(HtbClass::new(11, Some(1), 4 * MBIT, 8 * MBIT).quantum(2_000)),
        ]))
        .unwrap();
        let t = Instant(0);
        for uid in 1..=6 {
            h.enqueue(pkt(uid, 10, 500), t).unwrap();
        }
        for uid in 11..=18 {
            h.enqueue(pkt(uid, 11, 500), t).unwrap();
        }
        let order: Vec<u64> = std::iter::from_fn(|| h.dequeue(t)).map(|p| p.meta.uid).collect();
        assert_eq!(order, vec![1, 11, 2, 3, 12, 13, 14, 15, 4, 5, 16, 17, 18, 6]);
        assert_eq!(h.class(1, t).unwrap().sent_bytes, 14 * 500);
    }

    #[test]
    fn default_class_and_refusal() {
        let mut cf = conf(vec![
            HtbClass::new(1, None, MBIT, MBIT),
            HtbClass::new(2, Some(1), MBIT, MBIT).limits(1, 10_000),
        ]);
        let mut h = Htb::new(cf.clone()).unwrap();
        // Inner or unknown class without default: refused.
        assert_eq!(
            h.enqueue(pkt(1, 1, 100), Instant(0)).unwrap_err().reason,
            DropReason::QueueFull
        );
        assert_eq!(
            h.enqueue(pkt(2, 7, 100), Instant(0)).unwrap_err().reason,
            DropReason::QueueFull
        );
        cf.default_class = Some(2);
        h = Htb::new(cf).unwrap();
        h.enqueue(pkt(3, 7, 100), Instant(0)).unwrap();
        // Leaf FIFO limit of 1 packet.
        assert!(h.enqueue(pkt(4, 2, 100), Instant(0)).is_err());
        assert_eq!(h.stats().drops(DropReason::QueueFull), 1);
        assert_eq!(h.class(2, Instant(0)).unwrap().len, 1);
    }

    /// Drives `h` as a link of `link_bps` for `secs`, keeping the leaves in
    /// `busy` backlogged with `len`-byte packets; returns bytes per leaf and
    /// how often the link idled while packets were queued.
    fn run(h: &mut Htb, busy: &[u16], link_bps: u64, secs: u64, len: usize) -> (HashMap<u16, u64>, u64) {
        let end = Instant(secs * 1_000_000_000);
        let (mut now, mut uid, mut idle) = (Instant(0), 0u64, 0u64);
        let mut got = HashMap::new();
        while now < end {
            for &c in busy {
                while h.class(c, now).unwrap().len < 4 {
                    h.enqueue(pkt(uid, c, len), now).unwrap();
                    uid += 1;
                }
            }
            match h.dequeue(now) {
                Some(p) => {
                    *got.entry(p.meta.class).or_insert(0u64) += p.len() as u64;
                    now += Duration::for_bytes(p.len() as u64, link_bps);
                }
                None => {
                    let t = h.poll_at(now).expect("backlogged");
                    assert!(t > now, "dequeue refused but poll_at says ready");
                    idle += 1;
                    now = t;
                }
            }
        }
        (got, idle)
    }

    fn near(got: u64, want: u64) -> bool {
        (got as f64 - want as f64).abs() <= want as f64 * 0.02
    }

    fn two_leaves(a: HtbClass, b: HtbClass) -> Htb {
        Htb::new(conf(vec![HtbClass::new(1, None, 16 * MBIT, 16 * MBIT), a, b])).unwrap()
    }

    #[test]
    fn borrowing_fills_the_parent_and_guarantees_rates() {
        // Equal rates 8+8 under 16: halves.
        let mut h = two_leaves(
            HtbClass::new(10, Some(1), 8 * MBIT, 16 * MBIT),
            HtbClass::new(11, Some(1), 8 * MBIT, 16 * MBIT),
        );
        let (got, _) = run(&mut h, &[10, 11], 16 * MBIT, 1, 500);
        assert!(near(got[&10], 1_000_000) && near(got[&11], 1_000_000), "{got:?}");
        // Alone, a leaf borrows the idle sibling's share: the whole link.
        let mut h = two_leaves(
            HtbClass::new(10, Some(1), 8 * MBIT, 16 * MBIT),
            HtbClass::new(11, Some(1), 8 * MBIT, 16 * MBIT),
        );
        let (got, idle) = run(&mut h, &[10], 16 * MBIT, 1, 500);
        assert!(near(got[&10], 2_000_000), "{got:?}");
        assert_eq!(idle, 0);
        // Unequal guarantees 12 + 4: each gets its rate.
        let mut h = two_leaves(
            HtbClass::new(10, Some(1), 12 * MBIT, 16 * MBIT),
            HtbClass::new(11, Some(1), 4 * MBIT, 16 * MBIT),
        );
        let (got, _) = run(&mut h, &[10, 11], 16 * MBIT, 1, 500);
        assert!(near(got[&10], 1_500_000) && near(got[&11], 500_000), "{got:?}");
    }

    #[test]
    fn ceil_caps_borrowing_and_idles_the_link() {
        let mut h = two_leaves(
            HtbClass::new(10, Some(1), 4 * MBIT, 12 * MBIT),
            HtbClass::new(11, Some(1), 4 * MBIT, 16 * MBIT),
        );
        let (got, idle) = run(&mut h, &[10], 16 * MBIT, 1, 500);
        // 12 Mbit/s for 1 s, plus at most the ceil burst and one packet.
        let cburst = HtbClass::new(0, None, 12 * MBIT, 12 * MBIT).burst as u64;
        assert!(near(got[&10], 1_500_000), "{got:?}");
        assert!(got[&10] <= 1_500_000 + cburst + 500, "{got:?}");
        assert!(idle > 0, "a ceil-limited class must leave the link idle");
    }

    #[test]
    fn lower_prio_value_borrows_first() {
        // Both guaranteed 4; the spare 8 goes to prio 0.
        let mut h = two_leaves(
            HtbClass::new(10, Some(1), 4 * MBIT, 16 * MBIT).prio(0),
            HtbClass::new(11, Some(1), 4 * MBIT, 16 * MBIT).prio(1),
        );
        let (got, _) = run(&mut h, &[10, 11], 16 * MBIT, 1, 500);
        assert!(near(got[&10], 1_500_000) && near(got[&11], 500_000), "{got:?}");
        let i = h.class(11, Instant(1_000_000_000)).unwrap();
        assert!(i.borrowed < i.sent_pkts / 10, "prio 1 barely borrows: {i:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// `poll_at` is exact: dequeue succeeds at `now` iff poll_at ≤ now,
        /// and when it says a later instant, dequeue fails 1 ns before and
        /// succeeds then. Every packet is sent or counted as dropped.
        #[test]
        fn poll_at_is_exact_and_packets_conserved(
            ops in prop::collection::vec((0u64..400_000, 0u8..5, 40usize..1_500), 1..200),
        ) {
            let mut h = Htb::new(HtbConf {
                classes: vec![
                    HtbClass::new(1, None, 10 * MBIT, 10 * MBIT).bursts(2_000, 2_000),
                    HtbClass::new(2, Some(1), 6 * MBIT, 8 * MBIT).bursts(1_600, 3_000),
                    HtbClass::new(3, Some(1), 2 * MBIT, 10 * MBIT).bursts(1_600, 1_600).prio(1),
                    HtbClass::new(4, Some(2), MBIT, 3 * MBIT).limits(5, 5_000),
                    HtbClass::new(5, Some(2), 2 * MBIT, 8 * MBIT).limits(5, 5_000).quantum(1_500),
                ],
                default_class: Some(3),
                overhead: 24,
            }).unwrap();
            let (mut now, mut offered, mut refused, mut sent) = (0u64, 0u64, 0u64, 0u64);
            for (uid, &(dt, class, len)) in ops.iter().enumerate() {
                now += dt;
                offered += 1;
                if h.enqueue(pkt(uid as u64, class as u16 + 1, len), Instant(now)).is_err() {
                    refused += 1;
                }
                let pa = h.poll_at(Instant(now));
                let got = h.dequeue(Instant(now));
                prop_assert_eq!(pa.is_some_and(|t| t <= Instant(now)), got.is_some());
                if got.is_some() {
                    sent += 1;
                } else if let Some(t) = pa {
                    prop_assert!(h.dequeue(Instant(t.0 - 1)).is_none());
                    prop_assert!(h.dequeue(t).is_some());
                    sent += 1;
                    now = now.max(t.0);
                }
            }
            while let Some(t) = h.poll_at(Instant(now)) {
                now = now.max(t.0);
                prop_assert!(h.dequeue(Instant(now)).is_some());
                sent += 1;
            }
            prop_assert_eq!(h.len(), 0);
            prop_assert_eq!(h.bytes(), 0);
            prop_assert_eq!(sent + refused, offered);
            prop_assert_eq!(h.stats().total_drops(), refused);
        }
    }
}
