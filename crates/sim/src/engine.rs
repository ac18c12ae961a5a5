//! The event queue: a binary heap of `(time, sequence)` keys. The sequence
//! number, taken from a counter at scheduling time, breaks ties so that two
//! events at the same nanosecond always run in the order they were
//! scheduled — the whole run is deterministic for a given seed.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use qosnet_core::{Instant, Packet};

#[derive(Debug)]
pub enum Ev {
    /// A frame's last bit reaches `node`'s `port`.
    Arrive { node: u32, port: u16, pkt: Packet },
    /// A node asked to be polled at this time.
    Wake { node: u32 },
    /// A router's CPU finished processing the frame at the head of its input queue.
    CpuDone { node: u32 },
    /// A traffic source emits its next packet.
    Emit { node: u32, source: u32 },
}

struct Entry {
    at: Instant,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap, we want the earliest first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
    pub peak: usize,
}

impl EventQueue {
    pub fn push(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
        self.peak = self.peak.max(self.heap.len());
    }
    pub fn pop(&mut self) -> Option<(Instant, Ev)> {
        self.heap.pop().map(|e| (e.at, e.ev))
    }
    pub fn peek_time(&self) -> Option<Instant> {
        self.heap.peek().map(|e| e.at)
    }
    pub fn len(&self) -> usize {
        self.heap.len()
    }
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
    /// Frames in flight on links (for conservation accounting).
    pub fn frames_in_flight(&self) -> usize {
        self.heap
            .iter()
            .filter(|e| matches!(&e.ev, Ev::Arrive { pkt, .. } if !pkt.meta.padding))
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
}
