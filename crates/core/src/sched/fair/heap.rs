//! Priority queues of virtual-time tags for the fair schedulers:
//! [`Tagged`] entries (tag and tie-break packed into one `u128`), a
//! cache-friendly 4-ary heap ([`KeyHeap`]), and radix heaps (Ahuja,
//! Mehlhorn, Orlin & Tarjan, "Faster Algorithms for the Shortest Path
//! Problem", JACM 1990): [`RadixHeap`] for WFQ's fluid GPS system (behind
//! [`GpsQueue`]) and the exact, mostly-monotone [`RadixQueue`] for the
//! packet systems of WFQ and WF²Q+ (behind [`TagQueue`]). The wrappers
//! switch between heap and radix by size: small heaps sit in L1, large
//! ones miss the cache at every level of a sift, where a radix heap only
//! appends to and scans vectors.

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
    /// Tag and tie-break as one number: what the heaps order by.
    pub fn key(&self) -> u128 {
        self.key
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
    /// Calls `f` on every entry whose tag is ≤ `tag`, in no particular
    /// order. The heap order bounds the work: a subtree is entered only if
    /// its root qualifies, so this costs O(4·k) for k entries found.
    pub fn for_each_up_to(&self, tag: u128, mut f: impl FnMut(Tagged)) {
        let mut stack = Vec::new();
        if self.len > 0 {
            stack.push(0);
        }
        while let Some(n) = stack.pop() {
            let x = self.get(n);
            if x.tag() > tag {
                continue;
            }
            f(x);
            stack.extend((4 * n + 1..4 * n + 5).filter(|&c| c < self.len));
        }
    }
    /// Hands every entry, in no particular order, to `f`, and empties
    /// the heap.
    fn drain(&mut self, mut f: impl FnMut(Tagged)) {
        for n in 0..self.len {
            f(self.get(n));
        }
        self.len = 0;
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

/// Exact priority queue of [`Tagged`] entries for the packet systems:
/// entries leave in order of their whole key (tag, then tie-break), as
/// from a [`KeyHeap`], so it can stand in for one without changing a
/// single departure.
///
/// A radix heap over the *tag* does the work: an entry whose tag is above
/// `base` (the tag of the last entry removed) lives in bucket `b` = the
/// position of the highest bit in which its tag differs from `base`;
/// removing from the lowest non-empty bucket moves `base` up to that
/// bucket's smallest tag and spreads the bucket over lower ones. Entries
/// whose tag equals `base` form the current *run*, ordered by tie-break:
/// a vector sorted once when the run is formed (bucket entries were
/// mostly appended in arrival order, so the sort mostly finds them sorted
/// already), served from the front. Later pushes at `base` that sort after
/// the run's last entry are appended to it; others are collected, and
/// before the next removal merged into the run when they are many (a
/// sort, mostly of sorted input, and a linear merge: amortised O(1) moves
/// each) or put in a side heap when few.
/// Many flows sharing a tag (equal weights and sizes: the common case in
/// a busy per-flow scheduler) then cost one move and a sequential read
/// each, where a heap would sift through ~log₄ n cache misses.
///
/// A radix heap needs pushes ≥ `base`. The tags of a packet system are
/// only *mostly* monotone (WF²Q+'s pending start tags are: a flow is
/// pending only with S > V, and leaves once S ≤ V; WFQ's finish tags and
/// WF²Q+'s eligible ones are not: a short packet arriving after a long one
/// was sent can finish before it), so a push below `base` goes to a side
/// [`KeyHeap`] (`below`) instead. Every entry there is below `base` and
/// every other entry at or above it, so the minimum is `below`'s while it
/// has one: still exact.
pub(crate) struct RadixQueue {
    /// Entries in the run, `fresh`, `same` and the buckets (not `below`).
    len: usize,
    /// Tag of the current run; every entry outside `below` has a tag ≥ it.
    base: u128,
    /// The run: entries with tag `base`, by key, served from `head`.
    run: Vec<Tagged>,
    head: usize,
    /// Entries pushed with tag `base` that sort before the run's last one,
    /// in no order, and the smallest of them (meaningless when empty).
    fresh: Vec<Tagged>,
    fresh_min: Tagged,
    /// Such entries, settled in a heap (see [`RadixQueue::settle`]).
    same: KeyHeap,
    /// Spare vector for merges (no allocation per merge).
    scratch: Vec<Tagged>,
    /// Bit b set iff bucket b (1 ..= 96) is non-empty.
    nonempty: u128,
    buckets: Vec<Vec<Tagged>>,
    /// Smallest entry of each bucket (meaningless when it is empty).
    mins: Vec<Tagged>,
    /// Entries pushed with a tag below `base`.
    below: KeyHeap,
}

impl RadixQueue {
    /// Tags are below 2⁹⁶ (see [`Tagged`]): buckets 1 ..= 96.
    const BUCKETS: usize = 97;

    pub fn new() -> Self {
        RadixQueue {
            len: 0,
            base: 0,
            run: Vec::new(),
            head: 0,
            fresh: Vec::new(),
            fresh_min: Tagged { key: 0, slot: 0 },
            same: KeyHeap::new(),
            scratch: Vec::new(),
            nonempty: 0,
            // Allocated on first use: every WFQ and WF²Q+ has these
            // queues, and most never hold enough flows to switch.
            buckets: Vec::new(),
            mins: Vec::new(),
            below: KeyHeap::new(),
        }
    }
    pub fn len(&self) -> usize {
        self.len + self.below.len()
    }
    #[inline(always)]
    fn ensure_buckets(&mut self) {
        if self.buckets.is_empty() {
            self.buckets = (0..Self::BUCKETS).map(|_| Vec::new()).collect();
            self.mins = vec![Tagged { key: 0, slot: 0 }; Self::BUCKETS];
        }
    }
    /// Files an entry with tag > `base` in its bucket.
    #[inline(always)]
    fn put(&mut self, x: Tagged) {
        let b = (128 - (x.tag() ^ self.base).leading_zeros()) as usize;
        let v = &mut self.buckets[b];
        if v.is_empty() || x.key < self.mins[b].key {
            self.mins[b] = x;
        }
        v.push(x);
        self.nonempty |= 1 << b;
    }
    /// The next entry of the run, if it has one left.
    #[inline(always)]
    fn run_head(&self) -> Option<Tagged> {
        self.run.get(self.head).copied()
    }
    /// The smallest entry with tag `base`: the run's head, `same`'s top
    /// or the smallest fresh entry.
    #[inline(always)]
    fn current(&self) -> Option<Tagged> {
        let mut best = self.run_head();
        for c in [
            self.same.peek(),
            (!self.fresh.is_empty()).then_some(self.fresh_min),
        ]
        .into_iter()
        .flatten()
        {
            if best.is_none_or(|b| c.key < b.key) {
                best = Some(c);
            }
        }
        best
    }
    /// Places the fresh entries: merged into the run when they are at
    /// least an eighth of what is left of it (the merge's cost is then
    /// within a constant of theirs), else pushed into `same`.
    #[cold]
    fn settle(&mut self) {
        let rest = self.run.len() - self.head;
        if self.fresh.len() * 8 < rest {
            for &x in &self.fresh {
                self.same.push(x);
            }
            self.fresh.clear();
            return;
        }
        self.fresh.sort_unstable_by_key(|x| x.key);
        let (a, b) = (&self.run[self.head..], &self.fresh[..]);
        let out = &mut self.scratch;
        out.clear();
        out.reserve(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            if b[j].key < a[i].key {
                out.push(b[j]);
                j += 1;
            } else {
                out.push(a[i]);
                i += 1;
            }
        }
        out.extend_from_slice(&a[i..]);
        out.extend_from_slice(&b[j..]);
        std::mem::swap(&mut self.run, &mut self.scratch);
        self.head = 0;
        self.fresh.clear();
    }
    pub fn push(&mut self, x: Tagged) {
        let tag = x.tag();
        if tag < self.base {
            self.below.push(x);
            return;
        }
        self.len += 1;
        if self.len == 1 {
            // Nothing but `below`: any base in [old base, tag] keeps the
            // invariants; the tag itself makes this entry the run.
            self.base = tag;
            self.run.clear();
            self.head = 0;
            self.run.push(x);
        } else if tag > self.base {
            self.ensure_buckets();
            self.put(x);
        } else {
            if self.head == self.run.len() && self.fresh.is_empty() {
                self.run.clear();
                self.head = 0;
            }
            if self.run.last().is_none_or(|l| l.key < x.key) && self.fresh.is_empty() {
                // Sorts after the run: its order stays that of the keys.
                self.run.push(x);
            } else {
                if self.fresh.is_empty() || x.key < self.fresh_min.key {
                    self.fresh_min = x;
                }
                self.fresh.push(x);
            }
        }
    }
    /// Makes an empty queue take `entries`, the smallest of which has
    /// tag `min` (a heap's contents, in no order).
    fn fill(&mut self, min: u128, entries: impl FnOnce(&mut dyn FnMut(Tagged))) {
        debug_assert!(self.len() == 0);
        self.ensure_buckets();
        self.base = min;
        self.run.clear();
        self.head = 0;
        entries(&mut |x: Tagged| {
            self.len += 1;
            if x.tag() > self.base {
                self.put(x);
            } else {
                self.run.push(x);
            }
        });
        self.run.sort_unstable_by_key(|x| x.key);
    }
    pub fn peek(&self) -> Option<Tagged> {
        if let Some(x) = self.below.peek() {
            return Some(x);
        }
        if self.len == 0 {
            return None;
        }
        self.current()
            .or_else(|| Some(self.mins[self.nonempty.trailing_zeros() as usize]))
    }
    pub fn pop(&mut self) -> Option<Tagged> {
        if !self.below.is_empty() {
            return self.below.pop();
        }
        if self.len == 0 {
            return None;
        }
        if !self.fresh.is_empty() {
            self.settle();
        }
        if self.current().is_none() {
            self.next_run();
        }
        self.len -= 1;
        let r = self.run_head();
        match self.same.peek() {
            Some(s) if r.is_none_or(|r| s.key < r.key) => self.same.pop(),
            _ => {
                self.head += 1;
                r
            }
        }
    }
    /// The run and `same` are exhausted: move `base` up to the lowest
    /// bucket's smallest tag. The new base shares every bit above the
    /// bucket's with the old one, so other buckets stay valid; this one's
    /// entries with that tag become the run, the others spread over lower
    /// buckets.
    #[cold]
    fn next_run(&mut self) {
        let b = self.nonempty.trailing_zeros() as usize;
        let mut v = std::mem::take(&mut self.buckets[b]);
        self.nonempty &= !(1 << b);
        self.base = self.mins[b].tag();
        self.run.clear();
        self.head = 0;
        let mut sorted = true;
        for &x in &v {
            if x.tag() == self.base {
                sorted &= self.run.last().is_none_or(|l| l.key < x.key);
                self.run.push(x);
            } else {
                self.put(x);
            }
        }
        if !sorted {
            self.run.sort_unstable_by_key(|x| x.key);
        }
        v.clear();
        self.buckets[b] = v;
    }
    /// Calls `f` on every entry whose tag is ≤ `tag`, in no particular
    /// order: buckets hold increasing tag ranges, so the scan stops at the
    /// first bucket whose smallest tag is above the bound.
    pub fn for_each_up_to(&self, tag: u128, mut f: impl FnMut(Tagged)) {
        self.below.for_each_up_to(tag, &mut f);
        if self.len == 0 || self.base > tag {
            return;
        }
        self.run[self.head..].iter().for_each(|&x| f(x));
        self.fresh.iter().for_each(|&x| f(x));
        self.same.for_each_up_to(tag, &mut f);
        // (No buckets allocated yet: nothing in them.)
        for (b, v) in self.buckets.iter().enumerate().skip(1) {
            if v.is_empty() {
                continue;
            }
            if self.mins[b].tag() > tag {
                return;
            }
            v.iter().filter(|x| x.tag() <= tag).for_each(|&x| f(x));
        }
    }
}

/// A packet system's queue of flows by tag: a [`KeyHeap`] while it has
/// never held more than [`TagQueue::RADIX_MIN`] entries, a [`RadixQueue`]
/// from then on. Both give the exact order of the whole key, so switching
/// changes no departure. There is no way back: WF²Q+'s queues empty and
/// refill every round of a busy scheduler (all of its n flows move from
/// pending to eligible at once when V reaches their common start), so a
/// switch back when small would cost O(n) per round, and the radix queue
/// holds few entries cheaply too.
pub(crate) struct TagQueue {
    heap: KeyHeap,
    radix: RadixQueue,
    big: bool,
    /// Switch to the radix queue at this size ([`Self::RADIX_MIN`]; tests
    /// set it out of reach to compare a scheduler against its heap-only
    /// self).
    radix_min: usize,
}

impl TagQueue {
    const RADIX_MIN: usize = 4096;

    pub fn new() -> Self {
        TagQueue {
            heap: KeyHeap::new(),
            radix: RadixQueue::new(),
            big: false,
            radix_min: Self::RADIX_MIN,
        }
    }
    /// With a prefetching heap while small (see [`KeyHeap::with_prefetch`]).
    pub fn with_prefetch() -> Self {
        TagQueue {
            heap: KeyHeap::with_prefetch(),
            ..Self::new()
        }
    }
    /// Never switches to the radix queue (the reference in tests).
    #[cfg(test)]
    pub fn heap_only(&mut self) {
        assert!(!self.big);
        self.radix_min = usize::MAX;
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn len(&self) -> usize {
        if self.big {
            self.radix.len()
        } else {
            self.heap.len()
        }
    }
    #[inline]
    pub fn peek(&self) -> Option<Tagged> {
        if self.big {
            self.radix.peek()
        } else {
            self.heap.peek()
        }
    }
    #[inline]
    pub fn push(&mut self, x: Tagged) {
        if self.big {
            self.radix.push(x);
            return;
        }
        self.heap.push(x);
        if self.heap.len() >= self.radix_min {
            self.switch_to_radix();
        }
    }
    #[inline]
    pub fn pop(&mut self) -> Option<Tagged> {
        if self.big {
            self.radix.pop()
        } else {
            self.heap.pop()
        }
    }
    /// Replaces the minimum by `x` (any key) and returns the minimum.
    #[inline]
    pub fn replace_top(&mut self, x: Tagged) -> Tagged {
        if self.big {
            let top = self.radix.pop().expect("replace_top on an empty queue");
            self.radix.push(x);
            top
        } else {
            self.heap.replace_top(x)
        }
    }
    pub fn for_each_up_to(&self, tag: u128, f: impl FnMut(Tagged)) {
        if self.big {
            self.radix.for_each_up_to(tag, f)
        } else {
            self.heap.for_each_up_to(tag, f)
        }
    }
    #[cold]
    #[inline(never)]
    fn switch_to_radix(&mut self) {
        let Some(min) = self.heap.peek() else { return };
        let heap = &mut self.heap;
        self.radix.fill(min.tag(), |f| heap.drain(f));
        self.big = true;
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

#[cfg(test)]
mod tests {
    use super::super::div_rem;
    use super::*;
    use proptest::prelude::*;

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

    proptest! {
        /// `for_each_up_to` visits exactly the entries with tag ≤ the
        /// bound, each once.
        #[test]
        fn for_each_up_to_finds_every_entry_below_the_bound(
            tags in prop::collection::vec(0u64..100, 0..200),
            pops in 0usize..50,
            bound in 0u64..110,
        ) {
            let mut h = KeyHeap::new();
            let mut model = Vec::new();
            for (n, &t) in tags.iter().enumerate() {
                let x = Tagged::new(t as u128, n as u64, n as u32);
                h.push(x);
                model.push(x);
            }
            // Pops take the smallest keys, leaving a heap shaped by sifts.
            model.sort_by_key(|x| x.key());
            for _ in 0..pops {
                h.pop();
            }
            let rest = &model[pops.min(model.len())..];
            let mut want: Vec<u32> = rest.iter().filter(|x| x.tag() <= bound as u128).map(|x| x.slot).collect();
            let mut got = Vec::new();
            h.for_each_up_to(bound as u128, |x| got.push(x.slot));
            want.sort_unstable();
            got.sort_unstable();
            prop_assert_eq!(got, want);
        }
    }

    /// Reference for the exact queues: a sorted list of (key, slot).
    fn reference_pop(model: &mut Vec<Tagged>) -> Option<Tagged> {
        let i = (0..model.len()).min_by_key(|&i| model[i].key())?;
        Some(model.swap_remove(i))
    }

    /// A tag at or near `base` (mostly above: monotone runs, sometimes
    /// below: WFQ's out-of-order finish tags), or anywhere up to 2⁹⁶ − 1
    /// (top bits differing: the last bucket).
    fn tag_of(kind: u8, x: u64, base: u128) -> u128 {
        let t = match kind {
            // Often exactly at the last tag removed: the current run.
            0 if x.is_multiple_of(2) => base,
            0 => base + (x % 1_000) as u128,
            1 => base.saturating_sub((x % 300) as u128),
            2 => base + ((x as u128) << (x % 40)),
            _ => ((x as u128) << 32 | x as u128) % (1 << 96),
        };
        t.min((1 << 96) - 1)
    }

    proptest! {
        /// The radix queue gives exactly a reference's order of whole keys
        /// (tag, then tie-break) through any mix of push (above, at and
        /// below the last key removed), pop, replace_top and peek, and
        /// `for_each_up_to` finds exactly the entries at or below a bound.
        #[test]
        fn radix_queue_matches_reference(
            ops in prop::collection::vec((0u8..4, 0u8..4, any::<u64>()), 0..400),
        ) {
            let mut q = RadixQueue::new();
            let mut model: Vec<Tagged> = Vec::new();
            let mut last = 0u128;
            for (n, (op, kind, x)) in ops.into_iter().enumerate() {
                let e = Tagged::new(tag_of(kind, x, last), n as u64, n as u32);
                match op {
                    0 | 1 => {
                        q.push(e);
                        model.push(e);
                    }
                    2 => {
                        let want = reference_pop(&mut model);
                        prop_assert_eq!(q.pop(), want);
                        if let Some(w) = want {
                            last = w.tag();
                        }
                    }
                    _ => {
                        let bound = tag_of(kind, x / 2, last);
                        let mut want: Vec<u32> = model.iter().filter(|t| t.tag() <= bound).map(|t| t.slot).collect();
                        let mut got = Vec::new();
                        q.for_each_up_to(bound, |t| got.push(t.slot));
                        want.sort_unstable();
                        got.sort_unstable();
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(q.len(), model.len());
                prop_assert_eq!(q.peek(), model.iter().min_by_key(|t| t.key()).copied());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        /// `TagQueue` through its switch heap → radix (thousands of
        /// entries), then shrinking and growing again, keeps the reference
        /// order: a fair scheduler's departures do not depend on how many
        /// flows it holds.
        #[test]
        fn tag_queue_switches_keep_the_order(seed in any::<u64>(), below in 0u64..4) {
            let mut q = TagQueue::new();
            let mut model: Vec<Tagged> = Vec::new();
            let mut x = seed | 1;
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut last = 0u128;
            let mut n = 0u64;
            // Grow past RADIX_MIN, churn, shrink, twice.
            for (grow, churn) in [(5_000, 3_000), (0, 0), (4_500, 2_000), (0, 0)] {
                for _ in 0..grow {
                    let r = rnd();
                    let kind = if r % 8 < below { 1 } else { (r % 3) as u8 * 2 % 3 };
                    let e = Tagged::new(tag_of(kind, r >> 8, last), n, n as u32);
                    n += 1;
                    q.push(e);
                    model.push(e);
                }
                for _ in 0..churn {
                    let r = rnd();
                    let e = Tagged::new(tag_of((r % 3) as u8, r >> 8, last), n, n as u32);
                    n += 1;
                    let want = reference_pop(&mut model).unwrap();
                    model.push(e);
                    prop_assert_eq!(q.replace_top(e), want);
                    last = want.tag();
                }
                if grow == 0 {
                    while model.len() > 500 {
                        let want = reference_pop(&mut model);
                        prop_assert_eq!(q.pop(), want);
                        last = want.unwrap().tag();
                    }
                }
                prop_assert_eq!(q.len(), model.len());
                prop_assert_eq!(q.peek(), model.iter().min_by_key(|t| t.key()).copied());
            }
            while let Some(want) = reference_pop(&mut model) {
                prop_assert_eq!(q.pop(), Some(want));
            }
            prop_assert!(q.is_empty());
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
}
