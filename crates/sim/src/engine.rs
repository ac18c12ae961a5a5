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

use std::cmp::Reverse;
use std::collections::BinaryHeap;

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

/// Heap entry: `(time << 64 | seq, slot)`, smallest first.
type Key = Reverse<(u128, u32)>;

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Key>,
    /// Events by slot; `None` marks a free slot.
    slab: Vec<Option<Ev>>,
    free: Vec<u32>,
    seq: u64,
    pub peak: usize,
}

impl EventQueue {
    pub fn push(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
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
        let key = ((at.as_nanos() as u128) << 64) | self.seq as u128;
        self.heap.push(Reverse((key, slot)));
        self.peak = self.peak.max(self.heap.len());
    }
    pub fn pop(&mut self) -> Option<(Instant, Ev)> {
        let Reverse((key, slot)) = self.heap.pop()?;
        let ev = self.slab.get_mut(slot as usize).and_then(Option::take)?;
        self.free.push(slot);
        Some((Instant((key >> 64) as u64), ev))
    }
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((k, _))| Instant((*k >> 64) as u64))
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
    /// Frames in flight on links (for conservation accounting).
    pub fn frames_in_flight(&self) -> usize {
        self.slab
            .iter()
            .flatten()
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
}
