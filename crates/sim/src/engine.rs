//! The event queue: events ordered by `(time, sequence)`. The sequence
//! number, taken from a counter at scheduling time, breaks ties so that two
//! events at the same nanosecond always run in the order they were
//! scheduled — the whole run is deterministic for a given seed.
//!
//! The queue holds 32-byte entries: the key (time and sequence packed into
//! one `u128`) and a 12-byte event. An arriving frame — a packet of a
//! hundred bytes and more — stays put in a frame pool whose slots are
//! reused, and its event names the slot. Profiling the ICC 2006 testbed
//! showed moving whole events as the simulator's largest cost, first in a
//! heap's sift-down, then in and out of a slab of every event; now only
//! arrivals (a third of the events) touch the pool.
//!
//! Two shortcuts keep the order exactly that of one heap: events for the
//! time the queue last reached go to a FIFO lane (sorted by construction)
//! merged with the rest on `(time, seq)`, and future events are a sorted
//! array while few (a heap while many).

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

/// An event as the queue holds it: 16 bytes, copied freely. An arriving
/// frame's packet waits in the queue's frame pool and the event names its
/// slot, so the 80-byte [`Ev`] is built only when the event is taken.
#[derive(Clone, Copy, Debug)]
enum Slim {
    Arrive { node: u32, port: u16, frame: u32 },
    Wake { node: u32 },
    CpuDone { node: u32 },
    Emit { node: u32, source: u32 },
    Medium { seg: u32 },
}

/// A future event with its key `time << 64 | seq`. Keys are unique (the
/// sequence number is), so ordering by key alone is a total order.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u128,
    ev: Slim,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(&o.key)
    }
}

/// Up to this many future events are kept in a sorted array; beyond, in a
/// binary heap (back to the array when the heap shrinks to a quarter).
const SMALL: usize = 32;

/// The future events, smallest key first out. Simulations mostly have few
/// events pending at a time (the ICC 2006 testbed: at most 18), where
/// a sorted array (insertion: a scan from the back and a short move;
/// removal: the front) beats a heap's sift-down; large ones (thousands of
/// sources) keep the heap's logarithmic bounds.
#[derive(Default)]
struct Future {
    /// From `head` on, sorted by key, smallest first. A new event is
    /// mostly among the latest (a transmission's end, an arrival a link
    /// delay later), so the scan from the back and the move to make room
    /// are short; taken events leave a gap before `head`, closed when the
    /// array empties or the gap grows to [`GAP`].
    small: Vec<Entry>,
    head: usize,
    /// Used instead of `small` while more than [`SMALL`] events are pending.
    big: BinaryHeap<Reverse<Entry>>,
}

/// Taken events in front of `small` before they are compacted away.
const GAP: usize = 64;

impl Future {
    fn push(&mut self, e: Entry) {
        if self.big.is_empty() {
            if self.small.len() - self.head < SMALL {
                if self.head >= GAP {
                    self.small.drain(..self.head);
                    self.head = 0;
                }
                let at = self.small[self.head..]
                    .iter()
                    .rposition(|x| x.key < e.key)
                    .map_or(self.head, |k| self.head + k + 1);
                self.small.insert(at, e);
                return;
            }
            self.big.extend(self.small.drain(self.head..).map(Reverse));
            self.small.clear();
            self.head = 0;
        }
        self.big.push(Reverse(e));
    }
    #[inline]
    fn pop(&mut self) -> Option<Entry> {
        if self.big.is_empty() {
            let e = *self.small.get(self.head)?;
            self.head += 1;
            if self.head == self.small.len() {
                self.small.clear();
                self.head = 0;
            }
            return Some(e);
        }
        let e = self.big.pop().map(|Reverse(e)| e);
        if self.big.len() <= SMALL / 4 {
            // `into_sorted_vec` sorts the `Reverse`s ascending: the
            // entries largest first. `small` is empty while `big` is used.
            let rest = std::mem::take(&mut self.big).into_sorted_vec();
            self.small.extend(rest.into_iter().rev().map(|Reverse(e)| e));
        }
        e
    }
    #[inline]
    fn peek_key(&self) -> Option<u128> {
        match self.big.peek() {
            Some(Reverse(e)) => Some(e.key),
            None => self.small.get(self.head).map(|e| e.key),
        }
    }
    fn len(&self) -> usize {
        self.small.len() - self.head + self.big.len()
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: Future,
    /// Frames of pending arrivals by slot; `None` marks a free slot.
    frames: Vec<Option<Packet>>,
    free: Vec<u32>,
    /// Events scheduled for the time the queue last reached, in scheduling
    /// order, with their sequence numbers: see [`EventQueue::push`].
    lane: VecDeque<(u64, Slim)>,
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
        let ev = match ev {
            Ev::Arrive { node, port, pkt } => {
                let frame = match self.free.pop() {
                    Some(s) => {
                        self.frames[s as usize] = Some(pkt);
                        s
                    }
                    None => {
                        self.frames.push(Some(pkt));
                        (self.frames.len() - 1) as u32
                    }
                };
                Slim::Arrive { node, port, frame }
            }
            Ev::Wake { node } => Slim::Wake { node },
            Ev::CpuDone { node } => Slim::CpuDone { node },
            Ev::Emit { node, source } => Slim::Emit { node, source },
            Ev::Medium { seg } => Slim::Medium { seg },
        };
        if at == self.now && (self.lane.is_empty() || self.lane_at == at) {
            self.lane_at = at;
            self.lane.push_back((self.seq, ev));
        } else {
            let key = ((at as u128) << 64) | self.seq as u128;
            self.heap.push(Entry { key, ev });
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
        match (self.heap.peek_key(), self.lane_key()) {
            (Some(k), Some(l)) => k < l,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
    #[inline]
    pub fn pop(&mut self) -> Option<(Instant, Ev)> {
        let (at, ev) = if self.heap_first() {
            let e = self.heap.pop()?;
            ((e.key >> 64) as u64, e.ev)
        } else {
            let (_, ev) = self.lane.pop_front()?;
            (self.lane_at, ev)
        };
        self.now = at;
        let ev = match ev {
            Slim::Arrive { node, port, frame } => {
                let pkt = self.frames.get_mut(frame as usize).and_then(Option::take)?;
                self.free.push(frame);
                Ev::Arrive { node, port, pkt }
            }
            Slim::Wake { node } => Ev::Wake { node },
            Slim::CpuDone { node } => Ev::CpuDone { node },
            Slim::Emit { node, source } => Ev::Emit { node, source },
            Slim::Medium { seg } => Ev::Medium { seg },
        };
        Some((Instant(at), ev))
    }
    pub fn peek_time(&self) -> Option<Instant> {
        if self.heap_first() {
            self.heap.peek_key().map(|k| Instant((k >> 64) as u64))
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
        self.frames
            .iter()
            .flatten()
            .filter(|pkt| !pkt.meta.padding && pkt.meta.uid != 0)
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
    fn frame_slots_are_reused_and_times_survive_packing() {
        let mut q = EventQueue::default();
        let far = Instant(u64::MAX - 1);
        for k in 0..100u32 {
            let pkt = Packet::new(vec![k as u8; 60], qosnet_core::Meta::default());
            q.push(
                Instant(k as u64),
                Ev::Arrive {
                    node: k,
                    port: 1,
                    pkt,
                },
            );
            q.push(Instant(k as u64), Ev::Wake { node: k });
            let Some((t, Ev::Arrive { node, port, pkt })) = q.pop() else {
                panic!("the arrival first");
            };
            assert_eq!((t, node, port, pkt.data[0]), (Instant(k as u64), k, 1, k as u8));
            assert!(matches!(q.pop(), Some((_, Ev::Wake { node })) if node == k));
        }
        assert_eq!(q.frames.len(), 1, "one frame slot, reused");
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
