//! The router's counters: router-wide ([`RouterCounters`] — forwarding,
//! drops before the output schedulers by reason, malformed frames by
//! reason, and the control plane's `arp_*`/`icmp_*` events) and the flat
//! list of named counters results report. Together with each port's
//! [`super::PortCounters`] and its scheduler's stats they account for
//! every frame the router receives (the `every_frame_is_counted` property).

use std::collections::{BTreeMap, HashMap};

use super::Router;
use crate::sched::DropReason;
use crate::wire::Malformed;

/// Router-wide counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouterCounters {
    pub forwarded: u64,
    pub local_rx: u64,
    pub padding_rx: u64,
    pub tdp_rx: u64,
    pub shaped: u64,
    /// Packets that arrived with a TDP-looking DS byte on an interface not
    /// facing a TDP router, re-marked to 0 so hosts cannot forge stamps.
    pub stamp_cleared: u64,
    /// Received packets dropped because their next hop's MAC could not be
    /// resolved (ARP timeout or hold queue full).
    pub unresolved: u64,
    malformed: HashMap<&'static str, u64>,
    /// Visible to the router's tests, which check that every frame is
    /// accounted for.
    pub(super) drops: HashMap<&'static str, u64>,
    /// Control plane: `arp_*` and `icmp_*` counters by name.
    control: BTreeMap<&'static str, u64>,
}

impl RouterCounters {
    pub fn malformed(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.malformed.iter().map(|(k, v)| (*k, *v))
    }
    /// Drops that happened before the output schedulers (routing, TTL,
    /// classification, shaping). Output queue drops are in each port's
    /// scheduler stats.
    pub fn drops(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.drops.iter().map(|(k, v)| (*k, *v))
    }
    pub fn total_drops(&self) -> u64 {
        self.drops.values().sum::<u64>() + self.malformed.values().sum::<u64>()
    }
    /// ARP and ICMP counters (`arp_requests_rx`, `icmp_echo_replies`, ...).
    pub fn control(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.control.iter().map(|(k, v)| (*k, *v))
    }
    /// One control counter, zero if never incremented.
    pub fn control_count(&self, name: &str) -> u64 {
        self.control.get(name).copied().unwrap_or(0)
    }
    pub(super) fn drop(&mut self, r: DropReason) {
        self.drop_named(r.name());
    }
    pub(super) fn drop_named(&mut self, name: &'static str) {
        *self.drops.entry(name).or_default() += 1;
    }
    pub(super) fn bad(&mut self, m: Malformed) {
        *self.malformed.entry(m.name()).or_default() += 1;
    }
    pub(super) fn ctl(&mut self, name: &'static str, n: u64) {
        *self.control.entry(name).or_default() += n;
    }
}

impl Router {
    /// [`extra_counters`](Self::extra_counters).
    pub fn named_counters(&self) -> Vec<(String, u64)> {
        let c = &self.counters;
        let mut v: Vec<(String, u64)> = [
            ("forwarded", c.forwarded),
            ("local_rx", c.local_rx),
            ("padding_rx", c.padding_rx),
            ("tdp_rx", c.tdp_rx),
            ("shaped", c.shaped),
            ("stamp_cleared", c.stamp_cleared),
            ("unresolved", c.unresolved),
        ]
        .into_iter()
        .map(|(k, n)| (k.to_string(), n))
        .collect();
        v.extend(c.drops().map(|(k, n)| (format!("drop_{k}"), n)));
        v.extend(c.malformed().map(|(k, n)| (format!("malformed_{k}"), n)));
        v.extend(self.extra_counters());
        v
    }

    /// Protocol counters beyond [`RouterCounters`]: the classifier's,
    /// TDP stamp decoder resyncs per port, ARP and ICMP, by name.
    pub fn extra_counters(&self) -> Vec<(String, u64)> {
        let mut v = self.classifier.as_ref().map(|c| c.counters()).unwrap_or_default();
        if self.tdp.is_some() {
            for p in &self.ports {
                let s = p.decoder.stats();
                if s.packets > 0 {
                    v.push((format!("{}.stamp_resyncs", p.cfg.name), s.resyncs));
                }
            }
        }
        for (k, n) in self.counters.control() {
            v.push((k.to_string(), n));
        }
        v
    }
}
