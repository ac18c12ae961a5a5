//! First-in first-out queue with packet and byte limits (tail drop),
//! like Linux `pfifo`/`bfifo` combined.

use std::collections::VecDeque;

use super::{DropReason, Dropped, QueueStats, Scheduler};
use crate::packet::Packet;
use crate::time::Instant;

pub struct Fifo {
    q: VecDeque<Packet>,
    bytes: usize,
    limit_pkts: usize,
    limit_bytes: usize,
    stats: QueueStats,
}

impl Fifo {
    /// A FIFO holding at most `limit_pkts` packets and `limit_bytes` bytes.
    pub fn new(limit_pkts: usize, limit_bytes: usize) -> Self {
        Fifo {
            q: VecDeque::new(),
            bytes: 0,
            limit_pkts,
            limit_bytes,
            stats: QueueStats::default(),
        }
    }
}

impl Scheduler for Fifo {
    fn enqueue(&mut self, pkt: Packet, _now: Instant) -> Result<(), Dropped> {
        if self.q.len() >= self.limit_pkts || self.bytes + pkt.len() > self.limit_bytes {
            self.stats.on_drop(DropReason::QueueFull);
            return Err(Dropped {
                pkt,
                reason: DropReason::QueueFull,
            });
        }
        self.bytes += pkt.len();
        self.stats.on_enqueue(pkt.len());
        self.q.push_back(pkt);
        Ok(())
    }

    fn dequeue(&mut self, _now: Instant) -> Option<Packet> {
        let p = self.q.pop_front()?;
        self.bytes -= p.len();
        self.stats.on_dequeue(p.len());
        Some(p)
    }

    fn peek(&self, _now: Instant) -> Option<&Packet> {
        self.q.front()
    }

    fn poll_at(&self, now: Instant) -> Option<Instant> {
        (!self.q.is_empty()).then_some(now)
    }
    fn quiet_when_empty(&self) -> bool {
        true
    }
    fn uses_flow_id(&self) -> bool {
        false
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "fifo"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Meta;

    fn pkt(uid: u64, len: usize) -> Packet {
        Packet::new(
            vec![0; len],
            Meta {
                uid,
                ..Meta::default()
            },
        )
    }

    #[test]
    fn order_and_limits() {
        let mut f = Fifo::new(3, 250);
        let t = Instant(0);
        assert!(f.enqueue(pkt(1, 100), t).is_ok());
        assert!(f.enqueue(pkt(2, 100), t).is_ok());
        let e = f.enqueue(pkt(3, 100), t).unwrap_err();
        assert_eq!((e.pkt.meta.uid, e.reason), (3, DropReason::QueueFull));
        assert!(f.enqueue(pkt(4, 50), t).is_ok());
        assert!(f.enqueue(pkt(5, 1), t).is_err()); // packet limit
        let order: Vec<u64> = std::iter::from_fn(|| f.dequeue(t)).map(|p| p.meta.uid).collect();
        assert_eq!(order, vec![1, 2, 4]);
        assert_eq!(f.stats().drops(DropReason::QueueFull), 2);
        assert_eq!((f.stats().enq_pkts, f.stats().deq_pkts), (3, 3));
        assert_eq!(f.bytes(), 0);
        assert_eq!(f.poll_at(t), None);
    }
}
