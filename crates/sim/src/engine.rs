//! The event queue: events ordered by `(time, sequence)`. The sequence
//! number, taken from a counter at scheduling time, breaks ties so that two
//! events at the same nanosecond always run in the order they were
//! scheduled — the whole run is deterministic for a given seed.
//!
//! The heap holds only 16-byte keys (time and sequence packed into one
//! `u128`) and a slot number; the events themselves — an arriving frame is
//! a packet of a hundred bytes and more — stay put in a slab whose slots
//! are reused. Profiling the ICC 2006 testbed showed the binary heap's
//! sift-down moving whole events as the simulator's largest cost; moving
//! keys instead of events is what this layout is for.
//!
//! Two shortcuts keep the order exactly that of one heap: events for the
//! time the queue last reached go to a FIFO lane (sorted by construction)
//! merged with the rest on `(time, seq)`, and the keys of future events are
//! a sorted array while few (a heap while many).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use qosnet_core::{Instant, Packet};

#[derive(Debug)]
pub enum Ev {
    /// A frame's last bit reaches `node`'s `port`.
    Arrive { node: u32, port: u16, pkt: Packet },
    /// A node asked to be polled at this time.
    Wake { node: u32 },
    /// A node's CPU finished processing the frame at the head of its input queue.
    CpuDone { node: u32 },
    /// A traffic source emits its next packet.
    Emit { node: u32, source: u32 },
    /// A shared medium asked to be polled at this time.
    Medium { seg: u32 },
}

/// A future event's key and slab slot: `(time << 64 | seq, slot)`.
type Entry = (u128, u32);

/// Up to this many future events are kept in a sorted array; beyond, in a
/// binary heap (back to the array when the heap shrinks to a quarter).
const SMALL: usize = 32;

/// The future events' keys, smallest first out. Simulations mostly have few
/// events pending at a time (the ICC 2006 testbed: at most 18), where
/// a sorted array (insertion: binary search and a short move; removal: the
/// last element) beats a heap's sift-down; large ones (thousands of
/// sources) keep the heap's logarithmic bounds.
#[derive(Default)]
struct Future {
    /// Sorted by key, largest first: the next event is the last.
    small: Vec<Entry>,
    /// Used instead of `small` while more than [`SMALL`] events are pending.
    big: BinaryHeap<Reverse<Entry>>,
}

impl Future {
    fn push(&mut self, e: Entry) {
        if self.big.is_empty() {
            if self.small.len() < SMALL {
                let at = self.small.partition_point(|x| x.0 > e.0);
                self.small.insert(at, e);
                return;
            }
            self.big.extend(self.small.drain(..).map(Reverse));
        }
        self.big.push(Reverse(e));
    }
    fn pop(&mut self) -> Option<Entry> {
        if self.big.is_empty() {
            return self.small.pop();
        }
        let e = self.big.pop().map(|Reverse(e)| e);
        if self.big.len() <= SMALL / 4 {
            // Largest first, as `small` keeps them.
            let rest = std::mem::take(&mut self.big).into_sorted_vec();
            self.small.extend(rest.into_iter().map(|Reverse(e)| e));
        }
        e
    }
    fn peek(&self) -> Option<&Entry> {
        match self.big.peek() {
            Some(Reverse(e)) => Some(e),
            None => self.small.last(),
        }
    }
    fn len(&self) -> usize {
        self.small.len() + self.big.len()
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: Future,
    /// Events by slot; `None` marks a free slot.
    slab: Vec<Option<Ev>>,
    free: Vec<u32>,
    /// Events scheduled for the time the queue last reached, in scheduling
    /// order, with their sequence numbers: see [`EventQueue::push`].
    lane: VecDeque<(u64, Ev)>,
    /// The time every event in `lane` is scheduled for.
    lane_at: u64,
    /// The time of the last event taken.
    now: u64,
    seq: u64,
    pub peak: usize,
}

impl EventQueue {
    /// Schedule `ev` at `at`, after every event already scheduled for `at`.
    ///
    /// An event for the current time (a zero-time CPU stage's completion,
    /// a medium's immediate wake-up: about a third of all events on the
    /// ICC 2006 testbed) goes into the lane instead of the heap. The lane
    /// is a FIFO of events for one time, and its events are pushed in
    /// sequence order, so it is sorted by `(time, seq)`; [`pop`](Self::pop)
    /// merges it with the heap on that key, which gives exactly the order
    /// one heap of all events would.
    pub fn push(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        let at = at.as_nanos();
        if at == self.now && (self.lane.is_empty() || self.lane_at == at) {
            self.lane_at = at;
            self.lane.push_back((self.seq, ev));
        } else {
            let slot = match self.free.pop() {
                Some(s) => {
                    self.slab[s as usize] = Some(ev);
                    s
                }
                None => {
                    self.slab.push(Some(ev));
                    (self.slab.len() - 1) as u32
                }
            };
            let key = ((at as u128) << 64) | self.seq as u128;
            self.heap.push((key, slot));
        }
        self.peak = self.peak.max(self.len());
    }
    /// The lane's first event's key, if any.
    fn lane_key(&self) -> Option<u128> {
        self.lane
            .front()
            .map(|(seq, _)| ((self.lane_at as u128) << 64) | *seq as u128)
    }
    /// Whether the next event is the heap's (not the lane's).
    fn heap_first(&self) -> bool {
        match (self.heap.peek(), self.lane_key()) {
            (Some((k, _)), Some(l)) => *k < l,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
    pub fn pop(&mut self) -> Option<(Instant, Ev)> {
        let (at, ev) = if self.heap_first() {
            let (key, slot) = self.heap.pop()?;
            let ev = self.slab.get_mut(slot as usize).and_then(Option::take)?;
            self.free.push(slot);
            ((key >> 64) as u64, ev)
        } else {
            let (_, ev) = self.lane.pop_front()?;
            (self.lane_at, ev)
        };
        self.now = at;
        Some((Instant(at), ev))
    }
    pub fn peek_time(&self) -> Option<Instant> {
        if self.heap_first() {
            self.heap.peek().map(|(k, _)| Instant((*k >> 64) as u64))
        } else {
            self.lane.front().map(|_| Instant(self.lane_at))
        }
    }
    pub fn len(&self) -> usize {
        self.heap.len() + self.lane.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.len() == 0 && self.lane.is_empty()
    }
    /// Frames in flight on links (for conservation accounting).
    pub fn frames_in_flight(&self) -> usize {
        self.slab
            .iter()
            .flatten()
            .chain(self.lane.iter().map(|(_, e)| e))
            .filter(|e| matches!(e, Ev::Arrive { pkt, .. } if !pkt.meta.padding && pkt.meta.uid != 0))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_ties_in_scheduling_order() {
        let mut q = EventQueue::default();
        q.push(Instant(5), Ev::Wake { node: 1 });
        q.push(Instant(3), Ev::Wake { node: 2 });
        q.push(Instant(5), Ev::Wake { node: 3 });
        q.push(Instant(3), Ev::Wake { node: 4 });
        let order: Vec<u32> = std::iter::from_fn(|| q.pop())
            .map(|(_, e)| match e {
                Ev::Wake { node } => node,
                _ => 0,
            })
            .collect();
        assert_eq!(order, vec![2, 4, 1, 3]);
    }

    #[test]
    fn slots_are_reused_and_times_survive_packing() {
        let mut q = EventQueue::default();
        let far = Instant(u64::MAX - 1);
        for k in 0..100u32 {
            q.push(Instant(k as u64), Ev::Wake { node: k });
            let (t, _) = q.pop().unwrap();
            assert_eq!(t, Instant(k as u64));
        }
        assert_eq!(q.slab.len(), 1, "one slot, reused");
        q.push(far, Ev::Wake { node: 7 });
        assert_eq!(q.peek_time(), Some(far));
        assert_eq!(q.pop().map(|(t, _)| t), Some(far));
        assert!(q.is_empty());
    }

    proptest::proptest! {
        /// Any interleaving of pushes (now, soon, later; enough at once to
        /// move between the sorted array and the heap both ways) and pops
        /// gives the order of one reference heap of `(time, seq)`.
        #[test]
        fn same_order_as_one_heap(ops in proptest::collection::vec((0u8..4, 0u64..50, 1usize..60), 1..200)) {
            let mut q = EventQueue::default();
            let mut reference = BinaryHeap::new();
            let (mut now, mut seq) = (0u64, 0u64);
            for (kind, dt, n) in ops {
                if kind == 0 {
                    for _ in 0..n {
                        let Some((t, Ev::Wake { node })) = q.pop() else {
                            proptest::prop_assert!(reference.is_empty());
                            break;
                        };
                        let Reverse((rt, rs)) = reference.pop().unwrap();
                        proptest::prop_assert_eq!((t.as_nanos(), node as u64), (rt, rs));
                        now = rt;
                    }
                } else {
                    for k in 0..n as u64 {
                        // kind 1: all at the current time (the lane).
                        let at = if kind == 1 { now } else { now + (dt * k) % 97 };
                        seq += 1;
                        q.push(Instant(at), Ev::Wake { node: seq as u32 });
                        reference.push(Reverse((at, seq)));
                    }
                }
                proptest::prop_assert_eq!(q.len(), reference.len());
            }
        }
    }
}
