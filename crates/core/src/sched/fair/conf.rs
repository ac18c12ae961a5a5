//! Configuration and reports shared by the fair schedulers ([`super::Wfq`],
//! [`super::Wf2q`], [`super::Drr`]): which metadata field picks a packet's
//! queue ([`QueueKey`]), each queue's share and limits ([`QueueConf`]),
//! the whole set ([`FairConf`], checked once for all three), and a
//! snapshot of one queue's counters ([`QueueInfo`]).

use crate::config::ConfigError;
use crate::packet::Meta;

/// Which metadata field selects a packet's queue in a fair scheduler
/// (not a flow's identity: that is [`crate::flow::FlowKey`], which the
/// router hashes into `meta.flow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKey {
    /// `meta.class`: a few configured classes (class-based queueing).
    Class,
    /// `meta.flow`: one queue per flow, created on demand (per-flow fair
    /// queueing).
    Flow,
}

impl QueueKey {
    pub fn of(self, m: &Meta) -> u32 {
        match self {
            QueueKey::Class => m.class as u32,
            QueueKey::Flow => m.flow,
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
    pub key: QueueKey,
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
            key: QueueKey::Class,
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
            key: QueueKey::Flow,
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
    pub(crate) fn validate(&self, what: &'static str, share: &str) -> Result<(), ConfigError> {
        if self.queues.is_empty() && self.default.is_none() {
            return Err(ConfigError::missing(
                what,
                "no queues configured and no default queue",
            ));
        }
        let check = |name: String, q: &QueueConf| -> Result<(), ConfigError> {
            if q.weight == 0 {
                return Err(ConfigError::zero(
                    what,
                    format!("{name}'s {share} (0 would never be served)"),
                ));
            }
            if q.limit_pkts == 0 || q.limit_bytes == 0 {
                return Err(ConfigError::zero(
                    what,
                    format!("{name}'s packet and byte limits"),
                ));
            }
            Ok(())
        };
        let mut seen = std::collections::HashSet::new();
        for (k, q) in &self.queues {
            if !seen.insert(*k) {
                return Err(ConfigError::duplicate(what, format!("queue {k}")));
            }
            check(format!("queue {k}"), q)?;
        }
        if let Some(d) = &self.default {
            check("the default queue".into(), d)?;
        }
        if self.total_limit_pkts == 0 || self.total_limit_bytes == 0 {
            return Err(ConfigError::zero(what, "the total packet and byte limits"));
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
