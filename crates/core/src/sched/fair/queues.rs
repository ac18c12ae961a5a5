//! The table of queues a fair scheduler serves: key → slot index
//! ([`KeyIndex`], with a fast integer hash for sparse keys), one FIFO per
//! slot with the discipline's per-queue state ([`Slot`]), and admission
//! against per-queue and total limits with every refusal counted
//! ([`Queues`]). Per-flow queues are created on a flow's first packet and
//! their slots recycled when idle, so state stays proportional to the
//! flows present, not to the key space.
//!
//! The per-packet methods are `#[inline]`: the schedulers calling them are
//! in sibling modules, which the compiler may build as other codegen units,
//! where a call per packet would not be inlined.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use super::conf::{FairConf, QueueConf, QueueInfo, QueueKey};
use crate::packet::Packet;
use crate::sched::{DropReason, Dropped, QueueStats};

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

    #[inline]
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
    #[inline]
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
    #[inline]
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
    key: QueueKey,
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
    #[inline]
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

    #[inline]
    pub fn push(&mut self, i: u32, pkt: Packet, tag: T, stats: &mut QueueStats) {
        let len = pkt.len();
        stats.on_enqueue(len);
        self.len += 1;
        self.bytes += len;
        let s = &mut self.slots[i as usize];
        s.bytes += len;
        s.fifo.push_back((pkt, tag));
    }

    #[inline]
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
    #[inline]
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
