//! Strict priority over child schedulers (cf. Linux `prio`): band 0 is
//! served whenever it has a packet, then band 1, and so on. Classification
//! into bands is done before, by the router's classifier (`meta.class`
//! selects the band; classes beyond the last band go to the last band).

use super::{Dropped, QueueStats, Scheduler};
use crate::packet::Packet;
use crate::time::Instant;

pub struct Prio {
    bands: Vec<Box<dyn Scheduler>>,
    stats: QueueStats,
}

impl Prio {
    /// `bands[0]` has the highest priority. Needs at least one band.
    pub fn new(bands: Vec<Box<dyn Scheduler>>) -> Self {
        assert!(!bands.is_empty(), "Prio needs at least one band");
        Prio {
            bands,
            stats: QueueStats::default(),
        }
    }
    pub fn band(&self, i: usize) -> &dyn Scheduler {
        self.bands[i].as_ref()
    }
    pub fn bands(&self) -> usize {
        self.bands.len()
    }
}

impl Scheduler for Prio {
    fn enqueue(&mut self, pkt: Packet, now: Instant) -> Result<(), Dropped> {
        let b = (pkt.meta.class as usize).min(self.bands.len() - 1);
        let len = pkt.len();
        match self.bands[b].enqueue(pkt, now) {
            Ok(()) => {
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
        for b in self.bands.iter_mut() {
            if b.poll_at(now).is_some_and(|t| t <= now) {
                if let Some(p) = b.dequeue(now) {
                    self.stats.on_dequeue(p.len());
                    return Some(p);
                }
            }
        }
        None
    }

    /// The first band that is due and has a packet, as `dequeue` looks.
    fn peek(&self, now: Instant) -> Option<&Packet> {
        self.bands
            .iter()
            .filter(|b| b.poll_at(now).is_some_and(|t| t <= now))
            .find_map(|b| b.peek(now))
    }

    fn poll_at(&self, now: Instant) -> Option<Instant> {
        self.bands.iter().filter_map(|b| b.poll_at(now)).min()
    }
    fn len(&self) -> usize {
        self.bands.iter().map(|b| b.len()).sum()
    }
    fn bytes(&self) -> usize {
        self.bands.iter().map(|b| b.bytes()).sum()
    }
    fn stats(&self) -> &QueueStats {
        &self.stats
    }
    fn uses_flow_id(&self) -> bool {
        self.bands.iter().any(|b| b.uses_flow_id())
    }
    fn kind(&self) -> &'static str {
        "prio"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Meta;
    use crate::sched::Fifo;

    fn pkt(uid: u64, class: u16) -> Packet {
        Packet::new(
            vec![0; 64],
            Meta {
                uid,
                class,
                ..Meta::default()
            },
        )
    }

    #[test]
    fn golden_order_high_band_first() {
        let mut p = Prio::new(vec![
            Box::new(Fifo::new(10, 10_000)),
            Box::new(Fifo::new(10, 10_000)),
        ]);
        let t = Instant(0);
        for (uid, class) in [(1, 1), (2, 0), (3, 1), (4, 7), (5, 0)] {
            p.enqueue(pkt(uid, class), t).unwrap();
        }
        let order: Vec<u64> = std::iter::from_fn(|| p.dequeue(t)).map(|p| p.meta.uid).collect();
        assert_eq!(order, vec![2, 5, 1, 3, 4]);
        assert_eq!(p.stats().deq_pkts, 5);
    }
}
