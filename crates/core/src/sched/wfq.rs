//! Weighted fair queueing as packet-by-packet GPS (PGPS), Parekh &
//! Gallager, "A Generalized Processor Sharing Approach to Flow Control in
//! Integrated Services Networks: The Single-Node Case" (IEEE/ACM ToN 1993),
//! §III; the same algorithm as Demers, Keshav & Shenker's WFQ.
//!
//! The scheduler emulates the fluid GPS server *exactly*: it tracks the
//! set B(t) of flows backlogged in the fluid system and advances the GPS
//! virtual time piecewise, dV/dt = r / Σ_{i∈B(t)} wᵢ, with an event each time
//! a flow's fluid backlog runs out (§III-A, eq. for V(t)). A packet of L
//! bytes arriving at `a` gets finish tag F = max(F_prev, V(a)) + L/w, and
//! the link always sends the queued packet with the smallest F — the packet
//! that would finish first under GPS. Then (Theorems 1 and 2) every packet
//! leaves at most L_max/r after it would under GPS, and no flow's service
//! lags its GPS service by more than L_max bytes.
//!
//! Arithmetic is integer. Virtual time is in *nano-bits per unit weight*
//! (`u128`): the link does exactly `rate_bps × Δt_ns` nano-bits of work in
//! Δt, so V advances by work / Σw and a packet's tag grows by
//! `L·8·10⁹ / w`. The only rounding is the floor in these two divisions
//! (< 1 unit, i.e. < 10⁻⁹ bit per unit weight, and work left over by the
//! floor is carried, not lost), far below any real tie.
//!
//! Cost: O(log n) per packet amortised with binary heaps — one heap of
//! flows ordered by head-of-line finish tag for the packet system, one of
//! GPS-backlogged flows ordered by (a lower bound of) their last finish tag
//! for the fluid system, re-keyed lazily when V reaches a stale key. The
//! fluid side's keys never go below V, so with many flows it is a radix
//! heap instead ([`GpsQueue`]): amortised O(1) moves per key, no sift.
//!
//! This file also holds what the per-flow/per-class schedulers (WFQ,
//! WF²Q+, DRR) share: [`FairConf`], [`QueueConf`], [`FlowKey`] and the
//! table of queues.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use super::{DropReason, Dropped, QueueStats, Scheduler};
use crate::packet::{Meta, Packet};
use crate::time::Instant;

/// Virtual-time units per byte of service at unit weight (nano-bits).
pub const VT_PER_BYTE: u128 = 8_000_000_000;

/// Which metadata field selects a packet's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKey {
    /// `meta.class`: a few configured classes (class-based queueing).
    Class,
    /// `meta.flow`: one queue per flow, created on demand (per-flow fair
    /// queueing).
    Flow,
}

impl FlowKey {
    pub fn of(self, m: &Meta) -> u32 {
        match self {
            FlowKey::Class => m.class as u32,
            FlowKey::Flow => m.flow,
        }
    }
}

/// One queue's share and limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConf {
    /// WFQ/WF²Q+: relative weight. DRR: quantum in bytes per round.
    pub weight: u32,
    /// Tail-drop limits of this queue.
    pub limit_pkts: usize,
    pub limit_bytes: usize,
}

impl QueueConf {
    pub fn new(weight: u32, limit_pkts: usize, limit_bytes: usize) -> Self {
        QueueConf {
            weight,
            limit_pkts,
            limit_bytes,
        }
    }
}

/// Queues of a fair scheduler: explicitly configured keys, and optionally a
/// `default` for every other key (each such key gets its own queue, created
/// on its first packet and forgotten when idle). A packet whose key has no
/// queue — not listed and no default — is refused as `QueueFull` (its
/// queue has size zero).
#[derive(Clone, Debug)]
pub struct FairConf {
    pub key: FlowKey,
    pub queues: Vec<(u32, QueueConf)>,
    pub default: Option<QueueConf>,
    /// Limits over all queues together (tail drop), so per-flow queueing
    /// stays bounded however many flows appear.
    pub total_limit_pkts: usize,
    pub total_limit_bytes: usize,
    /// Bytes added to every packet's length when charging it (e.g. 24 for
    /// Ethernet FCS + preamble + IFG, so shares are of link time).
    pub overhead: u32,
}

impl FairConf {
    /// Class-based: one queue per listed `meta.class`.
    pub fn classes(queues: Vec<(u16, QueueConf)>) -> Self {
        FairConf {
            key: FlowKey::Class,
            queues: queues.into_iter().map(|(k, q)| (k as u32, q)).collect(),
            default: None,
            total_limit_pkts: usize::MAX,
            total_limit_bytes: usize::MAX,
            overhead: 0,
        }
    }
    /// Per-flow: every `meta.flow` gets its own queue with `default`.
    pub fn per_flow(default: QueueConf) -> Self {
        FairConf {
            key: FlowKey::Flow,
            queues: Vec::new(),
            default: Some(default),
            total_limit_pkts: usize::MAX,
            total_limit_bytes: usize::MAX,
            overhead: 0,
        }
    }
    pub fn with_total_limits(mut self, pkts: usize, bytes: usize) -> Self {
        self.total_limit_pkts = pkts;
        self.total_limit_bytes = bytes;
        self
    }
    pub fn with_overhead(mut self, bytes: u32) -> Self {
        self.overhead = bytes;
        self
    }

    /// Checks the configuration; `what` names the scheduler in messages.
    pub(crate) fn validate(&self, what: &str, share: &str) -> Result<(), String> {
        if self.queues.is_empty() && self.default.is_none() {
            return Err(format!("{what}: no queues configured and no default queue"));
        }
        let check = |name: String, q: &QueueConf| -> Result<(), String> {
            if q.weight == 0 {
                return Err(format!("{what}: {name} has {share} 0; it would never be served"));
            }
            if q.limit_pkts == 0 || q.limit_bytes == 0 {
                return Err(format!("{what}: {name} has a zero packet or byte limit"));
            }
            Ok(())
        };
        let mut seen = std::collections::HashSet::new();
        for (k, q) in &self.queues {
            if !seen.insert(*k) {
                return Err(format!("{what}: queue {k} configured twice"));
            }
            check(format!("queue {k}"), q)?;
        }
        if let Some(d) = &self.default {
            check("the default queue".into(), d)?;
        }
        if self.total_limit_pkts == 0 || self.total_limit_bytes == 0 {
            return Err(format!("{what}: zero total packet or byte limit"));
        }
        Ok(())
    }
}

/// A snapshot of one queue's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueInfo {
    pub weight: u32,
    pub len: usize,
    pub bytes: usize,
    pub sent_pkts: u64,
    pub sent_bytes: u64,
    pub drops: u64,
}

/// Multiplicative hash for small integer keys: flow ids are chosen by our
/// own classifier, so SipHash's DoS resistance buys nothing here and its
/// cost would dominate a 100 000-flow scheduler.
#[derive(Default, Clone, Copy)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        let x = (self.0 ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 32);
    }
}

pub(crate) type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// Key → slot map. Keys below [`KeyIndex::DIRECT`] (every class, and
/// flow ids as a classifier hands them out, densely) index a table
/// directly — no hashing, and neighbouring flows share cache lines; others
/// go through a hash map, so sparse or adversarial ids cost memory only
/// for the flows that exist.
#[derive(Default)]
pub(crate) struct KeyIndex {
    direct: Vec<u32>,
    direct_len: usize,
    sparse: IntMap<u32, u32>,
}

impl KeyIndex {
    /// Direct table bound: at most 4 MiB of `u32`, grown on demand.
    const DIRECT: u32 = 1 << 20;
    const NONE: u32 = u32::MAX;

    pub fn get(&self, key: u32) -> Option<u32> {
        if key < Self::DIRECT {
            match self.direct.get(key as usize) {
                Some(&i) if i != Self::NONE => Some(i),
                _ => None,
            }
        } else {
            self.sparse.get(&key).copied()
        }
    }
    pub fn insert(&mut self, key: u32, slot: u32) {
        if key < Self::DIRECT {
            let k = key as usize;
            if k >= self.direct.len() {
                self.direct.resize((k + 1).next_power_of_two(), Self::NONE);
            }
            self.direct[k] = slot;
            self.direct_len += 1;
        } else {
            self.sparse.insert(key, slot);
        }
    }
    pub fn remove(&mut self, key: u32) {
        if key < Self::DIRECT {
            if let Some(e) = self.direct.get_mut(key as usize) {
                if *e != Self::NONE {
                    *e = Self::NONE;
                    self.direct_len -= 1;
                }
            }
        } else {
            self.sparse.remove(&key);
        }
    }
    pub fn len(&self) -> usize {
        self.direct_len + self.sparse.len()
    }
}

/// One queue: FIFO of packets with a per-packet tag `T`, plus the
/// discipline's per-queue state `S`.
pub(crate) struct Slot<T, S> {
    pub key: u32,
    pub weight: u32,
    pub limit_pkts: usize,
    pub limit_bytes: usize,
    pub fifo: VecDeque<(Packet, T)>,
    pub bytes: usize,
    pub sent_pkts: u64,
    pub sent_bytes: u64,
    pub drops: u64,
    /// Configured explicitly: kept when idle so its counters survive.
    pub permanent: bool,
    /// Bumped each time the slot is freed, so stale heap entries that
    /// still name it can be recognised.
    pub gen: u32,
    pub st: S,
}

/// The queues of a fair scheduler, addressed by dense slot index.
pub(crate) struct Queues<T, S> {
    key: FlowKey,
    conf: IntMap<u32, QueueConf>,
    default: Option<QueueConf>,
    index: KeyIndex,
    pub slots: Vec<Slot<T, S>>,
    free: Vec<u32>,
    total_limit_pkts: usize,
    total_limit_bytes: usize,
    pub overhead: u32,
    pub len: usize,
    pub bytes: usize,
}

impl<T, S: Default> Queues<T, S> {
    pub fn new(c: &FairConf) -> Self {
        let mut q = Queues {
            key: c.key,
            conf: c.queues.iter().copied().collect(),
            default: c.default,
            index: KeyIndex::default(),
            slots: Vec::new(),
            free: Vec::new(),
            total_limit_pkts: c.total_limit_pkts,
            total_limit_bytes: c.total_limit_bytes,
            overhead: c.overhead,
            len: 0,
            bytes: 0,
        };
        for (k, conf) in &c.queues {
            let i = q.create(*k, *conf);
            q.slots[i as usize].permanent = true;
        }
        q
    }

    fn create(&mut self, key: u32, c: QueueConf) -> u32 {
        let i = match self.free.pop() {
            Some(i) => {
                let s = &mut self.slots[i as usize];
                s.key = key;
                s.weight = c.weight;
                s.limit_pkts = c.limit_pkts;
                s.limit_bytes = c.limit_bytes;
                s.bytes = 0;
                s.sent_pkts = 0;
                s.sent_bytes = 0;
                s.drops = 0;
                s.st = S::default();
                i
            }
            None => {
                self.slots.push(Slot {
                    key,
                    weight: c.weight,
                    limit_pkts: c.limit_pkts,
                    limit_bytes: c.limit_bytes,
                    fifo: VecDeque::new(),
                    bytes: 0,
                    sent_pkts: 0,
                    sent_bytes: 0,
                    drops: 0,
                    permanent: false,
                    gen: 0,
                    st: S::default(),
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.index.insert(key, i);
        i
    }

    /// Finds or creates the packet's queue and checks its limits. On
    /// success returns the slot (the caller pushes the packet); on refusal
    /// the drop is counted and a queue created just for it is freed again.
    pub fn admit(&mut self, pkt: Packet, stats: &mut QueueStats) -> Result<(u32, Packet), Dropped> {
        let key = self.key.of(&pkt.meta);
        let (i, fresh) = match self.index.get(key) {
            Some(i) => (i, false),
            None => match self.conf.get(&key).copied().or(self.default) {
                Some(c) => (self.create(key, c), true),
                None => return Err(drop(pkt, stats)),
            },
        };
        let len = pkt.len();
        let s = &self.slots[i as usize];
        if s.fifo.len() >= s.limit_pkts
            || s.bytes + len > s.limit_bytes
            || self.len >= self.total_limit_pkts
            || self.bytes + len > self.total_limit_bytes
        {
            self.slots[i as usize].drops += 1;
            if fresh {
                self.release(i);
            }
            return Err(drop(pkt, stats));
        }
        Ok((i, pkt))
    }

    pub fn push(&mut self, i: u32, pkt: Packet, tag: T, stats: &mut QueueStats) {
        let len = pkt.len();
        stats.on_enqueue(len);
        self.len += 1;
        self.bytes += len;
        let s = &mut self.slots[i as usize];
        s.bytes += len;
        s.fifo.push_back((pkt, tag));
    }

    pub fn pop(&mut self, i: u32, stats: &mut QueueStats) -> Option<(Packet, T)> {
        let s = &mut self.slots[i as usize];
        let (pkt, tag) = s.fifo.pop_front()?;
        let len = pkt.len();
        s.bytes -= len;
        s.sent_pkts += 1;
        s.sent_bytes += len as u64;
        self.len -= 1;
        self.bytes -= len;
        stats.on_dequeue(len);
        Some((pkt, tag))
    }

    /// Forgets an idle on-demand queue (configured queues are kept).
    pub fn release(&mut self, i: u32) {
        let s = &mut self.slots[i as usize];
        debug_assert!(s.fifo.is_empty());
        s.gen = s.gen.wrapping_add(1);
        if s.permanent {
            return;
        }
        self.index.remove(s.key);
        self.free.push(i);
    }

    /// Cost of a packet in bytes, overhead included.
    pub fn cost(&self, pkt: &Packet) -> u64 {
        pkt.len() as u64 + self.overhead as u64
    }

    pub fn info(&self, key: u32) -> Option<QueueInfo> {
        let s = &self.slots[self.index.get(key)? as usize];
        Some(QueueInfo {
            weight: s.weight,
            len: s.fifo.len(),
            bytes: s.bytes,
            sent_pkts: s.sent_pkts,
            sent_bytes: s.sent_bytes,
            drops: s.drops,
        })
    }

    pub fn slot_of(&self, key: u32) -> Option<u32> {
        self.index.get(key)
    }

    /// Queues currently known (configured plus on-demand ones in use).
    pub fn active(&self) -> usize {
        self.index.len()
    }

    /// Bytes of state per queue, packets not counted: the slot and its
    /// entry in the direct index (dense keys; a sparse key's hash-map entry
    /// is ~10 bytes instead).
    pub fn bytes_per_queue() -> usize {
        std::mem::size_of::<Slot<T, S>>() + std::mem::size_of::<u32>()
    }
}

fn drop(pkt: Packet, stats: &mut QueueStats) -> Dropped {
    stats.on_drop(DropReason::QueueFull);
    Dropped {
        pkt,
        reason: DropReason::QueueFull,
    }
}

/// Heap entry: a virtual-time tag with a 32-bit tie-break (`low`: arrival
/// sequence, or a slot generation) packed into one `u128` key,
/// `tag << 32 | low`, so that ordering is a single integer compare — no
/// data-dependent branch chains in the heap's inner loop. Tags stay below
/// 2⁹⁶ nano-bits per unit weight: 25 years of a 100 Gbit/s link with one
/// flow of weight 1. `seq` wraps after 2³² packets, which can only reorder
/// packets with exactly equal tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tagged {
    key: u128,
    pub slot: u32,
}

impl Tagged {
    pub fn new(tag: u128, low: u64, slot: u32) -> Self {
        debug_assert!(tag < 1 << 96, "virtual time tag overflow");
        Tagged {
            key: tag << 32 | (low as u32) as u128,
            slot,
        }
    }
    /// The virtual-time tag.
    pub fn tag(&self) -> u128 {
        self.key >> 32
    }
    /// The tie-break / generation bits.
    pub fn low(&self) -> u32 {
        self.key as u32
    }
}

/// Implicit 4-ary min-heap of [`Tagged`]. Four children per node halve
/// the depth of a binary heap; the children of node n (logical indices
/// 4n+1 ..= 4n+4) are stored together as group n, one 64-byte-aligned
/// cache line of keys, so a sift touches one line of keys per level; the
/// smallest child is picked by a branch-free tournament. This is what
/// keeps 100 000-flow heaps fast. The root lives outside the groups.
pub(crate) struct KeyHeap {
    len: usize,
    /// Load the next level's keys ahead during a sift (see
    /// [`KeyHeap::with_prefetch`]).
    prefetch: bool,
    root: Tagged,
    keys: Vec<Keys4>,
    slots: Vec<[u32; 4]>,
}

#[derive(Clone, Copy)]
#[repr(align(64))]
struct Keys4([u128; 4]);

impl KeyHeap {
    /// Bytes one entry occupies (key and slot arrays).
    pub const ENTRY_BYTES: usize = std::mem::size_of::<u128>() + std::mem::size_of::<u32>();
    /// Heaps from this size on (64 KiB of keys, more than an L1 cache)
    /// load the next level's keys ahead during a sift.
    const PREFETCH_MIN: usize = 4096;

    pub fn new() -> Self {
        KeyHeap {
            len: 0,
            prefetch: false,
            root: Tagged { key: 0, slot: 0 },
            keys: Vec::new(),
            slots: Vec::new(),
        }
    }
    /// A heap whose sifts, once it outgrows L1 ([`Self::PREFETCH_MIN`]),
    /// start loading the next level's keys while comparing this level's.
    /// Pays off where sifts go deep (WFQ's heaps: −25% per packet at
    /// 100 000 flows); measured a loss for WF²Q+, whose sifts are short.
    pub fn with_prefetch() -> Self {
        KeyHeap {
            prefetch: true,
            ..Self::new()
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn peek(&self) -> Option<Tagged> {
        (self.len > 0).then_some(self.root)
    }
    /// Moves every entry, in no particular order, into `to`.
    fn drain_into(&mut self, to: &mut RadixHeap) {
        for n in 0..self.len {
            to.push(self.get(n));
        }
        self.len = 0;
    }
    #[inline(always)]
    fn key(&self, n: usize) -> u128 {
        if n == 0 {
            self.root.key
        } else {
            self.keys[(n - 1) >> 2].0[(n - 1) & 3]
        }
    }
    #[inline(always)]
    fn get(&self, n: usize) -> Tagged {
        if n == 0 {
            self.root
        } else {
            let (g, l) = ((n - 1) >> 2, (n - 1) & 3);
            Tagged {
                key: self.keys[g].0[l],
                slot: self.slots[g][l],
            }
        }
    }
    #[inline(always)]
    fn set(&mut self, n: usize, x: Tagged) {
        if n == 0 {
            self.root = x;
        } else {
            let (g, l) = ((n - 1) >> 2, (n - 1) & 3);
            self.keys[g].0[l] = x.key;
            self.slots[g][l] = x.slot;
        }
    }
    pub fn push(&mut self, x: Tagged) {
        let mut i = self.len;
        self.len += 1;
        if i > 0 && (i - 1) >> 2 == self.keys.len() {
            self.keys.push(Keys4([0; 4]));
            self.slots.push([0; 4]);
        }
        while i > 0 {
            let p = (i - 1) / 4;
            if self.key(p) <= x.key {
                break;
            }
            let up = self.get(p);
            self.set(i, up);
            i = p;
        }
        self.set(i, x);
    }
    pub fn pop(&mut self) -> Option<Tagged> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        let last = self.get(self.len);
        if self.len == 0 {
            return Some(last);
        }
        Some(self.replace_top(last))
    }
    /// Replaces the minimum by `x` and restores the heap: one sift instead
    /// of a pop and a push.
    pub fn replace_top(&mut self, x: Tagged) -> Tagged {
        let top = self.root;
        let n = self.len;
        let mut i = 0;
        loop {
            let c = 4 * i + 1;
            // The next level's key group is one of groups c..c+4, which
            // are contiguous: start loading all four while this level's
            // tournament runs, so the sift is not one cache miss per level
            // back to back. Small heaps sit in L1, where the extra loads
            // only cost time.
            if self.prefetch && n >= Self::PREFETCH_MIN {
                if let Some(next) = self.keys.get(c..c + 4) {
                    prefetch(next);
                }
            }
            let (m, km) = if c + 4 <= n {
                let k = &self.keys[i].0;
                let (a, ka) = min_of(0, k[0], 1, k[1]);
                let (b, kb) = min_of(2, k[2], 3, k[3]);
                min_of(a, ka, b, kb)
            } else if c < n {
                let k = &self.keys[i].0;
                let mut best = (0, k[0]);
                for (l, &kl) in k.iter().enumerate().take(n - c).skip(1) {
                    best = min_of(best.0, best.1, l, kl);
                }
                best
            } else {
                break;
            };
            if km >= x.key {
                break;
            }
            let child = Tagged {
                key: km,
                slot: self.slots[i][m],
            };
            self.set(i, child);
            i = c + m;
        }
        self.set(i, x);
        top
    }
}

/// Monotone priority queue for the GPS side (a radix heap, Ahuja,
/// Mehlhorn, Orlin & Tarjan, "Faster Algorithms for the Shortest Path
/// Problem", JACM 1990). WFQ's fluid system only ever pushes a tag ≥ V,
/// and V ≥ every tag removed so far, so pushes never go below the last
/// removed tag (`base`). An entry lives in bucket `b` = the position of
/// the highest bit in which its tag differs from `base` (+1; 0 when
/// equal); removing the minimum of the lowest non-empty bucket moves
/// `base` up to it and spreads that bucket over lower ones. Each entry
/// moves down at most 97 times, in practice a few; pushes and pops are
/// appends and removals at a vector's end, with no sift through a
/// 100 000-entry heap. Entries are [`Tagged`] keys with the slot as the
/// low 32 bits; equal tags leave in no particular order (which flow of
/// several leaving B(t) at the same V is released first changes nothing).
pub(crate) struct RadixHeap {
    len: usize,
    /// Tag of the last entry removed; every entry's tag is ≥ it.
    base: u128,
    /// Bit b set iff bucket b is non-empty.
    nonempty: u128,
    buckets: Vec<Vec<u128>>,
    /// Smallest key in each bucket (meaningless when it is empty), kept
    /// on push so the minimum is found without a scan.
    mins: Vec<u128>,
}

impl RadixHeap {
    /// Tags are below 2⁹⁶ (see [`Tagged`]): buckets 0 ..= 96.
    const BUCKETS: usize = 97;

    pub fn new() -> Self {
        RadixHeap {
            len: 0,
            base: 0,
            nonempty: 0,
            buckets: Vec::new(),
            mins: Vec::new(),
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    /// Makes an empty heap take entries with tags ≥ `base`.
    fn start(&mut self, base: u128) {
        debug_assert!(self.len == 0);
        if self.buckets.is_empty() {
            self.buckets = (0..Self::BUCKETS).map(|_| Vec::new()).collect();
            self.mins = vec![0; Self::BUCKETS];
        }
        self.base = base;
    }
    /// Moves every entry into `to`.
    fn drain_into(&mut self, to: &mut KeyHeap) {
        for v in &mut self.buckets {
            for &key in v.iter() {
                to.push(Tagged {
                    key,
                    slot: key as u32,
                });
            }
            v.clear();
        }
        self.len = 0;
        self.nonempty = 0;
    }
    #[inline(always)]
    fn put(&mut self, key: u128) {
        let b = (128 - ((key >> 32) ^ self.base).leading_zeros()) as usize;
        let v = &mut self.buckets[b];
        if v.is_empty() || key < self.mins[b] {
            self.mins[b] = key;
        }
        v.push(key);
        self.nonempty |= 1 << b;
    }
    /// Adds an entry; its tag must be ≥ the last one removed.
    pub fn push(&mut self, x: Tagged) {
        debug_assert!(x.slot == x.low());
        debug_assert!(x.tag() >= self.base, "radix heap: push below the last pop");
        self.put(x.key);
        self.len += 1;
    }
    pub fn peek(&self) -> Option<Tagged> {
        if self.len == 0 {
            return None;
        }
        let b = self.nonempty.trailing_zeros() as usize;
        let key = if b == 0 {
            *self.buckets[0].last()?
        } else {
            self.mins[b]
        };
        Some(Tagged {
            key,
            slot: key as u32,
        })
    }
    pub fn pop(&mut self) -> Option<Tagged> {
        if self.len == 0 {
            return None;
        }
        let b = self.nonempty.trailing_zeros() as usize;
        if b > 0 {
            // Move `base` up to the minimum: it shares every bit above
            // b−1 with the old base, so other buckets stay valid, and
            // this one spreads downwards: its minimum, the entry `peek`
            // showed, last into bucket 0, so it is the one popped.
            let mut v = std::mem::take(&mut self.buckets[b]);
            self.nonempty &= !(1 << b);
            let m = self.mins[b];
            self.base = m >> 32;
            for &k in &v {
                if k != m {
                    self.put(k);
                }
            }
            self.put(m);
            v.clear();
            self.buckets[b] = v;
        }
        let v = &mut self.buckets[0];
        let key = v.pop()?;
        if v.is_empty() {
            self.nonempty &= !1;
        }
        self.len -= 1;
        Some(Tagged {
            key,
            slot: key as u32,
        })
    }
    /// Removes the minimum and adds `x` (tag ≥ the minimum's).
    pub fn replace_top(&mut self, x: Tagged) -> Tagged {
        let top = self.pop().expect("replace_top on an empty radix heap");
        self.push(x);
        top
    }
}

/// The fluid system's flows, by (a lower bound of) last finish tag: a
/// [`KeyHeap`] while small, where a sift is a few compares in L1, and a
/// [`RadixHeap`] from [`GpsQueue::RADIX_MIN`] entries on, where heap
/// sifts miss the cache at every level.
pub(crate) struct GpsQueue {
    heap: KeyHeap,
    radix: RadixHeap,
    big: bool,
}

impl GpsQueue {
    const RADIX_MIN: usize = 4096;
    /// Back to the heap below this (hysteresis: a switch costs O(n) and
    /// comes at most once per 3/4 · RADIX_MIN operations).
    const HEAP_MAX: usize = Self::RADIX_MIN / 4;

    pub fn new() -> Self {
        GpsQueue {
            heap: KeyHeap::new(),
            radix: RadixHeap::new(),
            big: false,
        }
    }
    pub fn peek(&self) -> Option<Tagged> {
        if self.big {
            self.radix.peek()
        } else {
            self.heap.peek()
        }
    }
    /// Adds an entry; `v`, the current virtual time, must be ≤ its tag,
    /// every entry's tag and every tag pushed later.
    pub fn push(&mut self, x: Tagged, v: u128) {
        if self.big {
            self.radix.push(x);
            return;
        }
        self.heap.push(x);
        if self.heap.len() >= Self::RADIX_MIN {
            self.switch_to_radix(v);
        }
    }
    #[cold]
    #[inline(never)]
    fn switch_to_radix(&mut self, v: u128) {
        self.radix.start(v);
        self.heap.drain_into(&mut self.radix);
        self.big = true;
    }
    #[cold]
    #[inline(never)]
    fn switch_to_heap(&mut self) {
        self.radix.drain_into(&mut self.heap);
        self.big = false;
    }
    pub fn pop(&mut self) -> Option<Tagged> {
        if !self.big {
            return self.heap.pop();
        }
        let top = self.radix.pop();
        if self.radix.len() < Self::HEAP_MAX {
            self.switch_to_heap();
        }
        top
    }
    /// Replaces the minimum by `x`, whose tag is ≥ the minimum's.
    pub fn replace_top(&mut self, x: Tagged) -> Tagged {
        if self.big {
            self.radix.replace_top(x)
        } else {
            self.heap.replace_top(x)
        }
    }
}

/// Starts loading the four key groups (256 bytes) of `next`: plain loads
/// whose results are discarded (this crate forbids `unsafe`, so no
/// prefetch intrinsic), independent of the tournament running meanwhile.
#[inline(always)]
fn prefetch(next: &[Keys4]) {
    std::hint::black_box(
        next[0].0[0] as u64 ^ next[1].0[0] as u64 ^ next[2].0[0] as u64 ^ next[3].0[0] as u64,
    );
}

/// The smaller of two (index, key) pairs; written as selects so the
/// compiler emits conditional moves.
#[inline(always)]
fn min_of(i: usize, ki: u128, j: usize, kj: u128) -> (usize, u128) {
    let lt = kj < ki;
    (if lt { j } else { i }, if lt { kj } else { ki })
}

/// `a / b` and `a % b`, on 64-bit hardware division when `a` fits (the
/// common case: a packet's cost, a few µs of link work), else on `u128`.
#[inline]
pub(crate) fn div_rem(a: u128, b: u64) -> (u128, u128) {
    if a >> 64 == 0 {
        let (a, b) = (a as u64, b);
        ((a / b) as u128, (a % b) as u128)
    } else {
        (a / b as u128, a % b as u128)
    }
}

/// Per-flow state of the GPS emulation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WfqFlow {
    /// Finish tag of the flow's last arrived packet (its GPS backlog ends
    /// when V reaches it).
    last_finish: u128,
    /// In B(t): backlogged in the fluid system.
    in_gps: bool,
}

/// PGPS / WFQ. See the module documentation.
pub struct Wfq {
    q: Queues<(u128, u64), WfqFlow>,
    rate_bps: u64,
    /// GPS virtual time V(t_v), nano-bits per unit weight.
    v: u128,
    t_v: Instant,
    /// Work (nano-bits) done since t_v that the floor in V += work/Σw
    /// has not turned into virtual time yet.
    work_carry: u128,
    /// Σ wᵢ over B(t).
    gps_weight: u64,
    /// One entry per flow in B(t), keyed by a finish tag ≤ its last one
    /// (ties broken by slot while few; in no particular order when many).
    gps: GpsQueue,
    /// One entry per flow with queued packets, keyed by head finish tag.
    ready: KeyHeap,
    seq: u64,
    stats: QueueStats,
}

impl Wfq {
    /// WFQ on a link of `rate_bps` bit/s. The GPS reference runs at this
    /// rate, so it should be the rate the driver actually dequeues at.
    pub fn new(conf: FairConf, rate_bps: u64) -> Result<Self, String> {
        conf.validate("wfq", "weight")?;
        if rate_bps == 0 {
            return Err("wfq: link rate must be > 0 bit/s".into());
        }
        Ok(Wfq {
            q: Queues::new(&conf),
            rate_bps,
            v: 0,
            t_v: Instant::ZERO,
            work_carry: 0,
            gps_weight: 0,
            gps: GpsQueue::new(),
            ready: KeyHeap::with_prefetch(),
            seq: 0,
            stats: QueueStats::default(),
        })
    }

    /// GPS virtual time as last advanced, in nano-bits per unit weight
    /// ([`VT_PER_BYTE`] per byte).
    pub fn virtual_time(&self) -> u128 {
        self.v
    }
    /// Counters of the queue for `key` (class or flow id), if it exists.
    pub fn queue(&self, key: u32) -> Option<QueueInfo> {
        self.q.info(key)
    }
    /// Number of queues (flows) the scheduler holds state for.
    pub fn flows(&self) -> usize {
        self.q.active()
    }
    /// Bytes of scheduler state per active flow, queued packets excluded.
    pub fn bytes_per_flow() -> usize {
        Queues::<(u128, u64), WfqFlow>::bytes_per_queue() + 2 * KeyHeap::ENTRY_BYTES
    }

    /// Runs the fluid GPS system from `t_v` to `now`: V grows at
    /// r/Σ_{B} w, and each time it reaches a flow's last finish tag that
    /// flow leaves B(t) and the slope changes.
    fn advance(&mut self, now: Instant) {
        if now <= self.t_v {
            return;
        }
        let dt = now.saturating_since(self.t_v).as_nanos() as u128;
        self.t_v = now;
        if self.gps_weight == 0 {
            self.work_carry = 0;
            return;
        }
        let mut work = (dt * self.rate_bps as u128).saturating_add(self.work_carry);
        self.work_carry = 0;
        while let Some(top) = self.gps.peek() {
            let need = top
                .tag()
                .saturating_sub(self.v)
                .saturating_mul(self.gps_weight as u128);
            if work < need {
                let (dv, carry) = div_rem(work, self.gps_weight);
                self.v += dv;
                self.work_carry = carry;
                return;
            }
            work -= need;
            self.v = self.v.max(top.tag());
            let i = top.slot;
            let s = &mut self.q.slots[i as usize];
            if s.st.last_finish > top.tag() {
                // Stale key: more packets arrived since; re-key in place
                // (one sift), no change of slope.
                let _old = self.gps.replace_top(Tagged::new(s.st.last_finish, i as u64, i));
                debug_assert_eq!(_old, top);
                continue;
            }
            let _old = self.gps.pop();
            debug_assert_eq!(_old, Some(top));
            // The flow's fluid backlog is exhausted: it leaves B(t).
            s.st.in_gps = false;
            self.gps_weight -= s.weight as u64;
            if s.fifo.is_empty() {
                self.q.release(i);
            }
            if self.gps_weight == 0 {
                return; // fluid system idle: the rest of dt was idle time
            }
        }
    }
}

impl Scheduler for Wfq {
    fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped> {
        self.advance(now);
        let (i, pkt) = self.q.admit(pkt, &mut self.stats)?;
        let cost = self.q.cost(&pkt) as u128 * VT_PER_BYTE;
        let s = &mut self.q.slots[i as usize];
        let start = s.st.last_finish.max(self.v);
        let finish = start + div_rem(cost, s.weight as u64).0;
        s.st.last_finish = finish;
        if !s.st.in_gps {
            s.st.in_gps = true;
            self.gps_weight += s.weight as u64;
            self.gps.push(Tagged::new(finish, i as u64, i), self.v);
        }
        let seq = self.seq;
        self.seq += 1;
        if s.fifo.is_empty() {
            self.ready.push(Tagged::new(finish, seq, i));
        }
        self.q.push(i, pkt, (finish, seq), &mut self.stats);
        Ok(())
    }

    fn dequeue(&mut self, now: Instant) -> Option<Packet> {
        self.advance(now);
        let i = self.ready.peek()?.slot;
        let (pkt, _) = self.q.pop(i, &mut self.stats)?;
        let s = &self.q.slots[i as usize];
        match s.fifo.front() {
            // Same flow's next packet replaces it at the top: one sift.
            Some(&(_, (f, seq))) => {
                self.ready.replace_top(Tagged::new(f, seq, i));
            }
            None => {
                self.ready.pop();
                if !s.st.in_gps {
                    self.q.release(i);
                }
            }
        }
        Some(pkt)
    }

    fn poll_at(&self, now: Instant) -> Option<Instant> {
        (self.q.len > 0).then_some(now)
    }
    fn len(&self) -> usize {
        self.q.len
    }
    fn bytes(&self) -> usize {
        self.q.bytes
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "wfq"
    }
}

/// Helpers shared by the fair schedulers' tests.
#[cfg(test)]
pub(crate) mod testkit {
    use crate::packet::{Meta, Packet};

    /// A packet of `len` bytes with `uid`, in class and flow `key`.
    pub fn pkt(uid: u64, key: u16, len: usize) -> Packet {
        Packet::new(
            vec![0; len],
            Meta {
                uid,
                class: key,
                flow: key as u32,
                ..Meta::default()
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::pkt;
    use super::*;
    use crate::sched::{Drr, Wf2q};
    use proptest::prelude::*;

    fn big() -> QueueConf {
        QueueConf::new(1, 10_000, 10_000_000)
    }
    fn classes(w: &[u32]) -> FairConf {
        FairConf::classes(
            w.iter()
                .enumerate()
                .map(|(i, &w)| (i as u16, QueueConf { weight: w, ..big() }))
                .collect(),
        )
    }
    /// 8 Gbit/s: one byte per ns, so times are byte counts.
    const ONE_BYTE_PER_NS: u64 = 8_000_000_000;

    #[test]
    fn constructor_refuses_bad_configs() {
        let e = |c: FairConf| Wfq::new(c, ONE_BYTE_PER_NS).err().unwrap();
        assert!(e(classes(&[1, 0])).contains("weight 0"));
        assert!(e(FairConf::classes(vec![])).contains("no queues"));
        assert!(e(FairConf::classes(vec![(1, big()), (1, big())])).contains("twice"));
        assert!(e(FairConf::per_flow(QueueConf::new(1, 0, 10))).contains("zero"));
        assert!(Wfq::new(classes(&[1]), 0).err().unwrap().contains("rate"));
        assert!(Drr::new(classes(&[0])).err().unwrap().contains("quantum 0"));
        assert!(Wf2q::new(classes(&[2, 0])).err().unwrap().contains("weight 0"));
    }

    #[test]
    fn golden_simultaneous_arrivals() {
        // A (w=1) and B (w=2), two 100-byte packets each at t=0. Tags in
        // bytes per weight: A 100, 200; B 50, 100. B1 first; A1 and B2 tie
        // at 100 and arrival order breaks the tie.
        let mut w = Wfq::new(classes(&[1, 2]), ONE_BYTE_PER_NS).unwrap();
        let t = Instant(0);
        for (uid, k) in [(1, 0), (2, 0), (3, 1), (4, 1)] {
            w.enqueue(pkt(uid, k, 100), t).unwrap();
        }
        let order: Vec<u64> = std::iter::from_fn(|| w.dequeue(t)).map(|p| p.meta.uid).collect();
        assert_eq!(order, vec![3, 1, 4, 2]);
    }

    #[test]
    fn golden_gps_virtual_time_changes_slope() {
        // A (w=1): 2×120 B, B (w=3): 60 B at t=0; C (w=1): 50 B at t=100.
        // GPS: Σw=4 until B's fluid backlog ends at V=20 (t=80), then Σw=1,
        // so V(100)=40 and C's tag is 90 < A2's 240.
        let mut w = Wfq::new(classes(&[1, 3, 1]), ONE_BYTE_PER_NS).unwrap();
        w.enqueue(pkt(1, 0, 120), Instant(0)).unwrap();
        w.enqueue(pkt(2, 0, 120), Instant(0)).unwrap();
        w.enqueue(pkt(3, 1, 60), Instant(0)).unwrap();
        assert_eq!(w.dequeue(Instant(0)).unwrap().meta.uid, 3); // F=20, sent 0..60
        assert_eq!(w.dequeue(Instant(60)).unwrap().meta.uid, 1); // F=120, 60..180
        w.enqueue(pkt(4, 2, 50), Instant(100)).unwrap();
        assert_eq!(w.virtual_time(), 40 * VT_PER_BYTE);
        assert_eq!(w.dequeue(Instant(180)).unwrap().meta.uid, 4); // F=90
        assert_eq!(w.dequeue(Instant(230)).unwrap().meta.uid, 2); // F=240
        assert!(w.dequeue(Instant(350)).is_none());
        // Everything has left GPS too by t=350 (A's backlog ends at V=240).
        assert_eq!(w.virtual_time(), 240 * VT_PER_BYTE);
    }

    #[test]
    fn late_arrival_is_not_penalised_like_scfq() {
        // A (w=1) 3×100 at t=0; B (w=1) 100 at t=150: V(150)=150 (only A in
        // B(t)), so F_B = 250 < F_A3 = 300: B goes before A3.
        let mut w = Wfq::new(classes(&[1, 1]), ONE_BYTE_PER_NS).unwrap();
        for uid in 1..=3 {
            w.enqueue(pkt(uid, 0, 100), Instant(0)).unwrap();
        }
        assert_eq!(w.dequeue(Instant(0)).unwrap().meta.uid, 1);
        assert_eq!(w.dequeue(Instant(100)).unwrap().meta.uid, 2);
        w.enqueue(pkt(4, 1, 100), Instant(150)).unwrap();
        assert_eq!(w.virtual_time(), 150 * VT_PER_BYTE);
        assert_eq!(w.dequeue(Instant(200)).unwrap().meta.uid, 4);
        assert_eq!(w.dequeue(Instant(300)).unwrap().meta.uid, 3);
    }

    #[test]
    fn per_flow_state_is_created_and_forgotten() {
        let mut w = Wfq::new(FairConf::per_flow(QueueConf::new(1, 2, 1_000)), ONE_BYTE_PER_NS).unwrap();
        for f in 0..100u16 {
            w.enqueue(pkt(f as u64, f, 100), Instant(0)).unwrap();
        }
        assert_eq!(w.flows(), 100);
        // Per-flow packet limit 2.
        w.enqueue(pkt(1000, 7, 10), Instant(0)).unwrap();
        let e = w.enqueue(pkt(1001, 7, 10), Instant(0)).unwrap_err();
        assert_eq!(e.reason, DropReason::QueueFull);
        assert_eq!(w.queue(7).unwrap().drops, 1);
        let mut t = Instant(0);
        while let Some(p) = w.dequeue(t) {
            t += crate::time::Duration(p.len() as u64);
        }
        // Once GPS has served everything too, no state is left.
        w.dequeue(t);
        assert_eq!(w.flows(), 0);
        assert_eq!(w.stats().deq_pkts, 101);
    }

    #[test]
    fn unknown_class_without_default_is_refused() {
        let mut w = Wfq::new(classes(&[1]), ONE_BYTE_PER_NS).unwrap();
        let e = w.enqueue(pkt(1, 5, 100), Instant(0)).unwrap_err();
        assert_eq!(e.reason, DropReason::QueueFull);
        assert_eq!(w.stats().drops(DropReason::QueueFull), 1);
        let mut w = Wfq::new(
            FairConf {
                default: Some(QueueConf::new(2, 10, 10_000)),
                ..classes(&[1])
            },
            ONE_BYTE_PER_NS,
        )
        .unwrap();
        w.enqueue(pkt(1, 5, 100), Instant(0)).unwrap();
        assert_eq!(w.queue(5).unwrap().weight, 2);
    }

    #[test]
    fn total_limits_bound_all_flows() {
        let conf = FairConf::per_flow(QueueConf::new(1, 10, 10_000)).with_total_limits(3, 1_000_000);
        let mut w = Wfq::new(conf, ONE_BYTE_PER_NS).unwrap();
        for f in 0..3 {
            w.enqueue(pkt(f, f as u16, 100), Instant(0)).unwrap();
        }
        assert!(w.enqueue(pkt(9, 9, 100), Instant(0)).is_err());
        assert_eq!(w.flows(), 3);
    }

    // ---- GPS fluid reference, exact rationals -------------------------

    #[derive(Clone, Copy, Debug)]
    struct Q(i128, i128); // numerator, denominator > 0, reduced

    fn gcd(a: i128, b: i128) -> i128 {
        let (mut a, mut b) = (a.abs(), b.abs());
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a.max(1)
    }
    impl Q {
        fn new(n: i128, d: i128) -> Q {
            let g = gcd(n, d) * d.signum();
            Q(n / g, d / g)
        }
        fn int(n: i128) -> Q {
            Q(n, 1)
        }
        fn add(self, o: Q) -> Q {
            Q::new(self.0 * o.1 + o.0 * self.1, self.1 * o.1)
        }
        fn sub(self, o: Q) -> Q {
            Q::new(self.0 * o.1 - o.0 * self.1, self.1 * o.1)
        }
        fn mul(self, o: Q) -> Q {
            Q::new(self.0 * o.0, self.1 * o.1)
        }
        fn div(self, o: Q) -> Q {
            Q::new(self.0 * o.1, self.1 * o.0)
        }
        fn le(self, o: Q) -> bool {
            self.0 * o.1 <= o.0 * self.1
        }
        fn min(self, o: Q) -> Q {
            if self.le(o) {
                self
            } else {
                o
            }
        }
    }

    /// The fluid GPS server of rate 1 byte/ns, simulated event by event:
    /// between events every backlogged flow i is served at wᵢ/Σw.
    struct Fluid {
        w: Vec<i128>,
        t: Q,
        served: Vec<Q>,
        arrived: Vec<i128>,
        /// Per flow: cumulative bytes at which each queued packet ends.
        ends: Vec<VecDeque<(i128, usize)>>,
        finish: Vec<Option<Q>>,
    }

    impl Fluid {
        fn new(w: &[u32], packets: usize) -> Self {
            Fluid {
                w: w.iter().map(|&w| w as i128).collect(),
                t: Q::int(0),
                served: vec![Q::int(0); w.len()],
                arrived: vec![0; w.len()],
                ends: vec![VecDeque::new(); w.len()],
                finish: vec![None; packets],
            }
        }
        fn arrive(&mut self, f: usize, len: i128, id: usize) {
            self.arrived[f] += len;
            self.ends[f].push_back((self.arrived[f], id));
        }
        fn advance(&mut self, to: Q) {
            loop {
                let busy: Vec<usize> = (0..self.w.len()).filter(|&i| !self.ends[i].is_empty()).collect();
                let wsum: i128 = busy.iter().map(|&i| self.w[i]).sum();
                if wsum == 0 {
                    if self.t.le(to) {
                        self.t = to;
                    }
                    return;
                }
                let mut step = to.sub(self.t);
                for &i in &busy {
                    let left = Q::int(self.ends[i][0].0).sub(self.served[i]);
                    step = step.min(left.mul(Q::int(wsum)).div(Q::int(self.w[i])));
                }
                for &i in &busy {
                    self.served[i] = self.served[i].add(step.mul(Q::new(self.w[i], wsum)));
                }
                self.t = self.t.add(step);
                let mut popped = false;
                for &i in &busy {
                    while let Some(&(end, id)) = self.ends[i].front() {
                        if !Q::int(end).le(self.served[i]) {
                            break;
                        }
                        self.finish[id] = Some(self.t);
                        self.ends[i].pop_front();
                        popped = true;
                    }
                }
                if !popped && to.le(self.t) {
                    return;
                }
            }
        }
    }

    /// Runs PGPS on a 1 byte/ns link and the fluid GPS side by side and
    /// checks Parekh–Gallager: service lag ≤ L_max (Theorem 2) and
    /// departure ≤ GPS finish + L_max/r (Theorem 1).
    fn check_against_gps(w: &[u32], arrivals: &[(u64, usize, u64)]) {
        let n = arrivals.len();
        let lmax = arrivals.iter().map(|a| a.2).max().unwrap() as i128;
        let mut wfq = Wfq::new(classes(w), ONE_BYTE_PER_NS).unwrap();
        let mut fluid = Fluid::new(w, n);
        let mut pk_served = vec![0i128; w.len()];
        let mut depart = vec![0u64; n];
        let (mut i, mut link_free) = (0, 0u64);
        loop {
            let t = if !wfq.is_empty() {
                link_free
            } else if i < n {
                arrivals[i].0.max(link_free)
            } else {
                break;
            };
            while i < n && arrivals[i].0 <= t {
                let (at, f, len) = arrivals[i];
                fluid.advance(Q::int(at as i128));
                fluid.arrive(f, len as i128, i);
                wfq.enqueue(pkt(i as u64, f as u16, len as usize), Instant(at))
                    .unwrap();
                i += 1;
            }
            fluid.advance(Q::int(t as i128));
            for (j, &p) in pk_served.iter().enumerate() {
                let lag = fluid.served[j].sub(Q::int(p));
                assert!(
                    lag.le(Q::int(lmax)),
                    "flow {j} lags GPS by {lag:?} > {lmax} at t={t}"
                );
            }
            let p = wfq.dequeue(Instant(t)).expect("work conserving");
            let f = p.meta.class as usize;
            pk_served[f] += p.len() as i128;
            link_free = t + p.len() as u64;
            depart[p.meta.uid as usize] = link_free;
        }
        fluid.advance(Q::int(i128::MAX / (1 << 80)));
        for (id, &d) in depart.iter().enumerate() {
            let gps = fluid.finish[id].expect("GPS finished every packet");
            assert!(
                Q::int(d as i128).le(gps.add(Q::int(lmax))),
                "packet {id} left at {d}, GPS finish {gps:?} + L_max {lmax}"
            );
        }
    }

    #[test]
    fn gps_reference_hand_case() {
        check_against_gps(&[1, 3, 1], &[(0, 0, 120), (0, 0, 120), (0, 1, 60), (100, 2, 50)]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn pgps_tracks_gps_within_one_max_packet(
            w in prop::collection::vec(1u32..=5, 2..=4),
            raw in prop::collection::vec((0u64..=150, 0usize..4, 1u64..=120), 1..60),
        ) {
            let mut t = 0;
            let arrivals: Vec<(u64, usize, u64)> = raw
                .iter()
                .map(|&(gap, f, len)| {
                    t += gap;
                    (t, f % w.len(), len)
                })
                .collect();
            check_against_gps(&w, &arrivals);
        }
    }

    proptest! {
        /// The 4-ary heap pops in sorted order, through any mix of push,
        /// pop and replace_top.
        #[test]
        fn key_heap_matches_sorted_order(ops in prop::collection::vec((0u8..3, 0u64..50), 0..300)) {
            let mut h = KeyHeap::new();
            let mut model: Vec<(u128, u32)> = Vec::new();
            for (n, (op, tag)) in ops.into_iter().enumerate() {
                let x = Tagged::new(tag as u128, n as u64, n as u32);
                let as_pair = |t: Tagged| (t.tag(), t.low());
                model.sort_unstable();
                match op {
                    0 => {
                        h.push(x);
                        model.push(as_pair(x));
                    }
                    1 => {
                        let want = (!model.is_empty()).then(|| model.remove(0));
                        prop_assert_eq!(h.pop().map(as_pair), want);
                    }
                    _ if !model.is_empty() => {
                        let want = model.remove(0);
                        model.push(as_pair(x));
                        prop_assert_eq!(as_pair(h.replace_top(x)), want);
                    }
                    _ => {}
                }
                model.sort_unstable();
                prop_assert_eq!(h.peek().map(as_pair), model.first().copied());
                if let Some(t) = h.peek() {
                    prop_assert_eq!(t.slot, t.low()); // slots move with keys
                }
            }
        }
    }

    #[test]
    fn tagged_packs_tag_and_tie_break() {
        let a = Tagged::new(1 << 64, 0, 0);
        let b = Tagged::new((1 << 64) - 1, 9, 9);
        assert!(b.key < a.key);
        assert_eq!((a.tag(), b.tag(), b.low()), (1 << 64, (1 << 64) - 1, 9));
        assert!(Tagged::new(5, 1, 7).key < Tagged::new(5, 2, 0).key);
        assert_eq!(div_rem(7, 2), (3, 1));
        assert_eq!(div_rem(1 << 70, 3), ((1 << 70) / 3, (1 << 70) % 3));
    }

    // ---- properties shared by the fair schedulers ---------------------

    fn fair(kind: usize, w: &[u32], limit_pkts: usize) -> Box<dyn Scheduler> {
        let conf = FairConf::classes(
            w.iter()
                .enumerate()
                .map(|(i, &w)| (i as u16, QueueConf::new(w, limit_pkts, limit_pkts * 1_500)))
                .collect(),
        );
        match kind {
            0 => Box::new(Wfq::new(conf, 1_000_000_000).unwrap()),
            1 => Box::new(Wf2q::new(conf).unwrap()),
            _ => {
                // DRR quantum in bytes: weight × max packet.
                let mut conf = conf;
                for q in &mut conf.queues {
                    q.1.weight *= 1_500;
                }
                Box::new(Drr::new(conf).unwrap())
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]

        /// Every offered packet is either dequeued exactly once or refused
        /// and counted; the scheduler never idles while it holds packets;
        /// each flow's packets leave in arrival order.
        #[test]
        fn conservation_and_work_conservation(
            kind in 0usize..3,
            w in prop::collection::vec(1u32..=4, 1..=5),
            ops in prop::collection::vec((0u8..3, 0u16..6, 1usize..=1_500), 1..300),
        ) {
            let mut s = fair(kind, &w, 4);
            let mut now = 0u64;
            let (mut offered, mut refused) = (0u64, 0u64);
            let mut out: Vec<Packet> = Vec::new();
            for (uid, &(op, key, len)) in ops.iter().enumerate() {
                now += 100;
                if op < 2 {
                    offered += 1;
                    match s.enqueue(pkt(uid as u64, key, len), Instant(now)) {
                        Ok(()) => {}
                        Err(d) => {
                            prop_assert_eq!(d.reason, DropReason::QueueFull);
                            refused += 1;
                        }
                    }
                } else {
                    let held = s.len();
                    prop_assert_eq!(s.poll_at(Instant(now)).is_some(), held > 0);
                    match s.dequeue(Instant(now)) {
                        Some(p) => out.push(p),
                        None => prop_assert_eq!(held, 0, "idle while backlogged"),
                    }
                }
            }
            while let Some(p) = s.dequeue(Instant(now)) {
                out.push(p);
            }
            prop_assert_eq!(s.len(), 0);
            prop_assert_eq!(s.bytes(), 0);
            prop_assert_eq!(out.len() as u64 + refused, offered);
            let st = s.stats();
            prop_assert_eq!(st.enq_pkts, out.len() as u64);
            prop_assert_eq!(st.deq_pkts, out.len() as u64);
            prop_assert_eq!(st.total_drops(), refused);
            prop_assert_eq!(st.enq_bytes, st.deq_bytes);
            for k in 0..6u16 {
                let uids: Vec<u64> = out.iter().filter(|p| p.meta.class == k).map(|p| p.meta.uid).collect();
                prop_assert!(uids.windows(2).all(|x| x[0] < x[1]), "flow {} reordered", k);
            }
        }

        /// Continuously backlogged flows share the link in proportion to
        /// their weights, to within n·L_max bytes at every instant
        /// (DRR: within one quantum plus n·L_max).
        #[test]
        fn weights_respected_when_backlogged(
            kind in 0usize..3,
            w in prop::collection::vec(1u32..=4, 2..=4),
            seed in any::<u64>(),
        ) {
            let n = w.len();
            let mut s = fair(kind, &w, 100);
            let mut x = seed | 1;
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                64 + (x % 1_437) as usize
            };
            let mut uid = 0u64;
            let mut now = 0u64;
            for f in 0..n {
                for _ in 0..3 {
                    s.enqueue(pkt(uid, f as u16, rnd()), Instant(now)).unwrap();
                    uid += 1;
                }
            }
            let wsum: u32 = w.iter().sum();
            let lmax = 1_500.0;
            let bound = if kind == 2 { 4.0 * 1_500.0 + n as f64 * lmax } else { n as f64 * lmax };
            let mut sent = vec![0f64; n];
            for _ in 0..3_000 {
                let p = s.dequeue(Instant(now)).unwrap();
                let f = p.meta.class as usize;
                sent[f] += p.len() as f64;
                // 1 Gbit/s: the link is busy for len·8 ns.
                now += p.len() as u64 * 8;
                s.enqueue(pkt(uid, f as u16, rnd()), Instant(now)).unwrap();
                uid += 1;
                let total: f64 = sent.iter().sum();
                for i in 0..n {
                    let fair = total * w[i] as f64 / wsum as f64;
                    prop_assert!((sent[i] - fair).abs() <= bound,
                        "kind {} flow {} sent {} fair {} bound {}", kind, i, sent[i], fair, bound);
                }
            }
        }
    }
}
