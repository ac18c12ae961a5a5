//! A store-and-forward layer-2 switch: a VLAN-aware bridge (IEEE 802.1Q,
//! whose relay, filtering database and learning follow IEEE 802.1D) with a
//! finite output queue and a paced transmitter per port.
//!
//! ```text
//!  port p ──▶ ingress ──▶ learning ──▶ forwarding ──▶ output FIFO q ──▶ transmitter q
//!             (802.1Q     (FDB: (VID,   (known unicast: its port;      (bounded, tail   (wire time at
//!              §6.9,8.6.2) MAC)→port)   else flood the VLAN)           drop)            the port's rate)
//! ```
//!
//! - **Ingress** (802.1Q-2018 §6.9 classification, §8.6.2 filtering): an
//!   untagged or priority-tagged (VID 0) frame belongs to the port's PVID
//!   (the access VLAN, or a trunk's native VLAN); a tagged frame to its VID. Frames of a VLAN the
//!   port is not a member of are discarded (ingress filtering, counted
//!   `vlan_filtered`), as are untagged frames on a trunk without a native
//!   VLAN. Runts, truncated tags and the reserved VID 0xFFF are
//!   `malformed`; payloads over the MTU `oversize`; QinQ and S-tagged
//!   frames `unsupported_tag` (this is a C-VLAN bridge).
//! - **Learning** (802.1D §7.8, 802.1Q §8.7 with independent VLAN
//!   learning): the source MAC of every admitted frame is bound to the
//!   ingress port in that VLAN, unless it is a group address; a station
//!   seen on another port moves (`moves`); a full table learns nothing
//!   (`fdb_full`). Entries age out `aging_time` after they were last
//!   refreshed (802.1D §7.9.2, 802.1Q §8.8.3; default 300 s).
//! - **Forwarding** (§8.6.3–8.6.6): a known unicast goes to its port only —
//!   never back out of the ingress port (`filtered`); broadcast,
//!   multicast and unknown unicast are flooded to every other member of the
//!   VLAN (`flooded`). Frames to the reserved 01-80-C2-00-00-0x addresses
//!   (STP, pause, LACP, 802.1X) are never relayed (§8.6.3, `link_local`).
//!   Egress tagging follows the port: tagged on a trunk except in its
//!   native VLAN, untagged on an access port (the PCP and DEI of a tagged
//!   frame are kept; untagged frames get priority 0).
//! - **Output**: one FIFO per port bounded in packets and bytes ([`Fifo`]);
//!   a frame that does not fit is dropped (`queue_full`), so contention for
//!   an output link loses frames as on the STSDR's T-switch (seed 003 §III-D).
//!   A frame may leave no earlier than `forwarding_latency` after it was
//!   received (the fabric's delay), and each port's transmitter sends one
//!   frame at a time at its rate, as [`crate::router::Router`]'s ports do.
//!
//! Sans-IO ([`Node`]): frames in by `handle_frame`, aging in
//! `handle_timeout`, frames out by `poll_transmit`. Every received frame
//! ends in exactly one [`Outcome`] counter (property test
//! `every_frame_is_counted`). Flooding copies frames, so the switch also
//! reports how many extra copies it made (`replicated`) for a driver's
//! conservation ledger. docs/switch.md lists every setting and counter.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

use crate::node::{Duplex, Ledger, Node, PortReport, Transmit, TxStatus, TxTally};
use crate::packet::{Framing, Meta, Packet};
use crate::sched::{DropReason, Fifo, Scheduler};
use crate::time::{Duration, Instant};
use crate::wire::vlan::{self, VlanError, VlanTag, TPID_8021Q, VID_MAX, VID_RESERVED};
use crate::wire::{self, MacAddr, ETH_HDR};

/// 802.1Q's recommended aging time (§8.8.3).
pub const DEFAULT_AGING_TIME: Duration = Duration::from_secs(300);
/// FDB entries a switch learns by default (a small managed switch's table).
pub const DEFAULT_FDB_CAPACITY: usize = 8192;
/// Largest payload by default: standard Ethernet.
pub const DEFAULT_MTU: usize = 1500;
/// Largest MTU accepted (the common jumbo-frame limit).
pub const MAX_MTU: usize = 9216;
/// Output queue limit in packets by default (Linux's txqueuelen).
pub const DEFAULT_QUEUE_PACKETS: usize = 1000;
/// Output queue limit in bytes by default: 1000 full tagged frames.
pub const DEFAULT_QUEUE_BYTES: usize = 1000 * (ETH_HDR + vlan::VLAN_TAG_LEN + DEFAULT_MTU);
/// Longest aging time 802.1Q allows (§8.8.3: 10 s to 1 000 000 s; shorter
/// times are accepted for experiments).
pub const MAX_AGING_TIME: Duration = Duration::from_secs(1_000_000);
/// Longest forwarding latency accepted: anything longer is a units mistake.
pub const MAX_FORWARDING_LATENCY: Duration = Duration::from_secs(1);

/// How a port takes part in VLANs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VlanMode {
    /// Member of one VLAN; frames enter and leave untagged.
    Access(u16),
    /// Member of `allowed` and of `native`; frames leave tagged except in
    /// the native VLAN, and untagged frames that arrive belong to the
    /// native VLAN (discarded if there is none). `native` need not be
    /// listed in `allowed`.
    Trunk { native: Option<u16>, allowed: Vec<u16> },
}

impl VlanMode {
    /// The VLAN untagged and priority-tagged frames belong to (the PVID).
    pub fn pvid(&self) -> Option<u16> {
        match self {
            VlanMode::Access(v) => Some(*v),
            VlanMode::Trunk { native, .. } => *native,
        }
    }
    /// Whether the port is a member of `vid`.
    pub fn is_member(&self, vid: u16) -> bool {
        match self {
            VlanMode::Access(v) => *v == vid,
            VlanMode::Trunk { native, allowed } => *native == Some(vid) || allowed.contains(&vid),
        }
    }
    /// Whether frames of `vid` leave this port tagged.
    pub fn egress_tagged(&self, vid: u16) -> bool {
        match self {
            VlanMode::Access(_) => false,
            VlanMode::Trunk { native, .. } => *native != Some(vid),
        }
    }
}

/// One switch port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchPortConfig {
    pub name: String,
    /// Link rate in bit/s; the transmitter paces frames at it.
    pub rate_bps: u64,
    pub framing: Framing,
    /// Full duplex (the default: a point-to-point link, paced by the
    /// switch) or half duplex (a shared segment: the NIC decides when).
    pub duplex: Duplex,
    pub vlan: VlanMode,
    /// Output queue limit in frames.
    pub queue_packets: usize,
    /// Output queue limit in bytes (frames as they leave, tags included).
    pub queue_bytes: usize,
}

impl SwitchPortConfig {
    /// A full-duplex port with default framing and queue limits.
    pub fn new(name: impl Into<String>, rate_bps: u64, vlan: VlanMode) -> Self {
        SwitchPortConfig {
            name: name.into(),
            rate_bps,
            framing: Framing::default(),
            duplex: Duplex::Full,
            vlan,
            queue_packets: DEFAULT_QUEUE_PACKETS,
            queue_bytes: DEFAULT_QUEUE_BYTES,
        }
    }
}

/// A static FDB entry (802.1Q §8.8.1): never learned over, never aged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticMac {
    pub vid: u16,
    pub mac: MacAddr,
    pub port: u16,
}

/// A whole switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    pub name: String,
    pub ports: Vec<SwitchPortConfig>,
    /// Fabric delay: a frame may leave no earlier than this after it was
    /// received whole (on top of waiting for its output port).
    pub forwarding_latency: Duration,
    /// Dynamic FDB entries at most; 0 never learns (every frame floods).
    pub fdb_capacity: usize,
    /// A learned entry is forgotten this long after it was last refreshed.
    pub aging_time: Duration,
    /// Largest payload (bytes after the Ethernet header and tag) accepted.
    pub mtu: usize,
    /// Static FDB entries, outside `fdb_capacity`.
    pub static_macs: Vec<StaticMac>,
}

impl SwitchConfig {
    /// A switch with no ports and default settings.
    pub fn new(name: impl Into<String>) -> Self {
        SwitchConfig {
            name: name.into(),
            ports: Vec::new(),
            forwarding_latency: Duration::ZERO,
            fdb_capacity: DEFAULT_FDB_CAPACITY,
            aging_time: DEFAULT_AGING_TIME,
            mtu: DEFAULT_MTU,
            static_macs: Vec::new(),
        }
    }

    /// The longest frame (no FCS) a port may have to queue.
    pub fn max_frame(&self) -> usize {
        ETH_HDR + vlan::VLAN_TAG_LEN + self.mtu
    }

    /// Check every setting; the error names the switch, the port and the
    /// value at fault.
    pub fn validate(&self) -> Result<(), String> {
        let sw = &self.name;
        let vid_ok = |v: u16| (1..=VID_MAX).contains(&v);
        if self.ports.is_empty() {
            return Err(format!("switch {sw:?}: no ports"));
        }
        if self.ports.len() > u16::MAX as usize {
            return Err(format!(
                "switch {sw:?}: {} ports; at most {}",
                self.ports.len(),
                u16::MAX
            ));
        }
        if !(68..=MAX_MTU).contains(&self.mtu) {
            return Err(format!(
                "switch {sw:?}: mtu {} out of range 68..={MAX_MTU}",
                self.mtu
            ));
        }
        if self.aging_time == Duration::ZERO || self.aging_time > MAX_AGING_TIME {
            return Err(format!(
                "switch {sw:?}: aging time {} out of range (0, {MAX_AGING_TIME}]",
                self.aging_time
            ));
        }
        if self.forwarding_latency > MAX_FORWARDING_LATENCY {
            return Err(format!(
                "switch {sw:?}: forwarding latency {} over {MAX_FORWARDING_LATENCY}",
                self.forwarding_latency
            ));
        }
        let mut names = HashSet::new();
        for (i, p) in self.ports.iter().enumerate() {
            let at = format!("switch {sw:?}: port {i} ({:?})", p.name);
            if p.name.is_empty() {
                return Err(format!("switch {sw:?}: port {i} has no name"));
            }
            if !names.insert(p.name.as_str()) {
                return Err(format!("{at}: duplicate port name"));
            }
            if p.rate_bps == 0 {
                return Err(format!("{at}: rate must be positive"));
            }
            if p.queue_packets == 0 {
                return Err(format!("{at}: queue_packets must be at least 1"));
            }
            if p.queue_bytes < self.max_frame() {
                return Err(format!(
                    "{at}: queue_bytes {} cannot hold one {}-byte frame (mtu {} plus header and tag)",
                    p.queue_bytes,
                    self.max_frame(),
                    self.mtu
                ));
            }
            match &p.vlan {
                VlanMode::Access(v) if !vid_ok(*v) => {
                    return Err(format!("{at}: access VLAN {v} out of range 1..={VID_MAX}"));
                }
                VlanMode::Access(_) => {}
                VlanMode::Trunk { native, allowed } => {
                    if let Some(v) = native.filter(|v| !vid_ok(*v)) {
                        return Err(format!("{at}: native VLAN {v} out of range 1..={VID_MAX}"));
                    }
                    let mut seen = HashSet::new();
                    for v in allowed {
                        if !vid_ok(*v) {
                            return Err(format!("{at}: allowed VLAN {v} out of range 1..={VID_MAX}"));
                        }
                        if !seen.insert(*v) {
                            return Err(format!("{at}: VLAN {v} listed twice in allowed"));
                        }
                    }
                    if native.is_none() && allowed.is_empty() {
                        return Err(format!("{at}: trunk carries no VLAN (no native, none allowed)"));
                    }
                }
            }
        }
        let mut statics = HashSet::new();
        for s in &self.static_macs {
            let at = format!("switch {sw:?}: static MAC {} in VLAN {}", s.mac, s.vid);
            if !vid_ok(s.vid) {
                return Err(format!("{at}: VLAN out of range 1..={VID_MAX}"));
            }
            if s.mac.is_group() {
                return Err(format!("{at}: a group address cannot be a static unicast entry"));
            }
            let Some(p) = self.ports.get(s.port as usize) else {
                return Err(format!("{at}: port {} does not exist", s.port));
            };
            if !p.vlan.is_member(s.vid) {
                return Err(format!(
                    "{at}: port {} ({:?}) is not in that VLAN",
                    s.port, p.name
                ));
            }
            if !statics.insert((s.vid, s.mac)) {
                return Err(format!("{at}: listed twice"));
            }
        }
        Ok(())
    }
}

/// What became of a received frame: each one ends in exactly one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Known unicast, queued for its one port (the queue may still drop it).
    Forwarded,
    /// Broadcast, multicast or unknown unicast, copied to every other
    /// member of its VLAN (possibly none).
    Flooded,
    /// Known unicast whose station is on the ingress port: not sent back.
    Filtered,
    /// The port is not a member of the frame's VLAN, or an untagged frame
    /// arrived on a trunk without a native VLAN.
    VlanFiltered,
    /// Runt, truncated tag, or reserved VID 0xFFF.
    Malformed,
    /// Payload longer than the MTU.
    Oversize,
    /// S-tag or stacked tags (QinQ).
    UnsupportedTag,
    /// To a reserved 01-80-C2-00-00-0x address: never relayed.
    LinkLocal,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Forwarded,
        Outcome::Flooded,
        Outcome::Filtered,
        Outcome::VlanFiltered,
        Outcome::Malformed,
        Outcome::Oversize,
        Outcome::UnsupportedTag,
        Outcome::LinkLocal,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Forwarded => "forwarded",
            Outcome::Flooded => "flooded",
            Outcome::Filtered => "filtered",
            Outcome::VlanFiltered => "vlan_filtered",
            Outcome::Malformed => "malformed",
            Outcome::Oversize => "oversize",
            Outcome::UnsupportedTag => "unsupported_tag",
            Outcome::LinkLocal => "link_local",
        }
    }
    /// The frame went nowhere.
    pub fn is_drop(self) -> bool {
        !matches!(self, Outcome::Forwarded | Outcome::Flooded)
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// Counters of one port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchPortCounters {
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    /// Frames sent, counted when they crossed, and those a half-duplex
    /// NIC gave up on after 16 attempts ([`TxTally`]).
    pub tx: TxTally,
    outcomes: [u64; Outcome::ALL.len()],
}

impl SwitchPortCounters {
    /// Frames received on this port that ended in `o`.
    pub fn outcome(&self, o: Outcome) -> u64 {
        self.outcomes[o.index()]
    }
}

/// Switch-wide counters beyond the per-port ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    /// New FDB entries.
    pub learned: u64,
    /// Learned stations seen on another port (entry moved).
    pub moves: u64,
    /// Entries forgotten after the aging time.
    pub aged: u64,
    /// Sources not learned because the table was full.
    pub fdb_full: u64,
    /// Frames with a group source address (forwarded, never learned).
    pub src_group: u64,
    /// Frames whose source has a static entry on another port (not learned).
    pub static_conflict: u64,
    /// Copies offered to output queues by flooding.
    pub flood_copies: u64,
    /// Flooded frames with no other member port in their VLAN (gone).
    pub flooded_nowhere: u64,
    /// Frames handed in on a port that does not exist.
    pub rx_bad_port: u64,
    /// Frames an application tried to send from the switch (it has none).
    pub no_app: u64,
    malformed: BTreeMap<&'static str, u64>,
}

impl SwitchCounters {
    /// Malformed frames by reason (`runt`, `truncated_tag`, `reserved_vid`).
    pub fn malformed(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.malformed.iter().map(|(k, v)| (*k, *v))
    }
}

/// A set of VLAN ids as a 4096-bit map.
#[derive(Clone)]
struct VidSet([u64; 64]);

impl VidSet {
    /// The VLANs `mode` is a member of (`VlanMode::is_member`). Set from
    /// the listed VIDs, not by asking `is_member` of all 4094: building a
    /// switch is on every fuzz input's path, and the scan cost
    /// 4094 x allowed-list comparisons per port.
    fn of(mode: &VlanMode) -> Self {
        let mut s = VidSet([0; 64]);
        let (one, list): (Option<u16>, &[u16]) = match mode {
            VlanMode::Access(v) => (Some(*v), &[]),
            VlanMode::Trunk { native, allowed } => (*native, allowed),
        };
        for &v in one.iter().chain(list) {
            if (1..=VID_MAX).contains(&v) {
                s.0[v as usize / 64] |= 1 << (v % 64);
            }
        }
        s
    }
    fn contains(&self, v: u16) -> bool {
        v <= VID_MAX && self.0[v as usize / 64] & (1 << (v % 64)) != 0
    }
}

struct SwitchPort {
    cfg: SwitchPortConfig,
    members: VidSet,
    queue: Fifo,
    busy_until: Instant,
    /// Half duplex: a frame is with the NIC, waiting for `handle_tx_done`.
    tx_pending: bool,
    /// The frame with the NIC is traffic (for the ledger).
    tx_traffic: bool,
    counters: SwitchPortCounters,
}

#[derive(Clone, Copy, Debug)]
struct FdbEntry {
    port: u16,
    last_seen: Instant,
    fixed: bool,
}

/// The filtering database: (VID, MAC) → port, with independent VLAN
/// learning. Every dynamic entry has exactly one item in `expiries`, which
/// may be early (the entry was refreshed since); aging re-files it.
struct Fdb {
    map: HashMap<(u16, MacAddr), FdbEntry>,
    dynamic: usize,
    expiries: BinaryHeap<Reverse<(Instant, u16, MacAddr)>>,
}

/// How an FDB entry's life is judged: alive while `now < last_seen + aging`.
fn alive(e: &FdbEntry, now: Instant, aging: Duration) -> bool {
    e.fixed || now < e.last_seen + aging
}

/// A store-and-forward VLAN switch (see the module docs).
pub struct Switch {
    cfg: SwitchConfig,
    ports: Vec<SwitchPort>,
    fdb: Fdb,
    counters: SwitchCounters,
    next_port: usize,
    /// The conservation ledger over traffic frames only (`meta.uid != 0`:
    /// what traffic sources generated). Control frames — gratuitous ARP,
    /// protocol frames — are flooded and dropped like any other but are
    /// not traffic, and nodes do not count them.
    traffic: Ledger,
}

/// A frame admitted at ingress, untagged, with its VLAN and priority.
struct Admitted {
    frame: Vec<u8>,
    vid: u16,
    tag: VlanTag,
    /// A tag was removed: re-pad if it leaves untagged.
    was_tagged: bool,
}

impl Switch {
    /// A switch from a validated configuration.
    pub fn new(cfg: SwitchConfig) -> Result<Switch, String> {
        cfg.validate()?;
        let ports = cfg
            .ports
            .iter()
            .map(|p| SwitchPort {
                cfg: p.clone(),
                members: VidSet::of(&p.vlan),
                queue: Fifo::new(p.queue_packets, p.queue_bytes),
                busy_until: Instant::ZERO,
                tx_pending: false,
                tx_traffic: false,
                counters: SwitchPortCounters::default(),
            })
            .collect();
        let mut map = HashMap::new();
        for s in &cfg.static_macs {
            map.insert(
                (s.vid, s.mac),
                FdbEntry {
                    port: s.port,
                    last_seen: Instant::ZERO,
                    fixed: true,
                },
            );
        }
        Ok(Switch {
            cfg,
            ports,
            fdb: Fdb {
                map,
                dynamic: 0,
                expiries: BinaryHeap::new(),
            },
            counters: SwitchCounters::default(),
            next_port: 0,
            traffic: Ledger::default(),
        })
    }

    pub fn config(&self) -> &SwitchConfig {
        &self.cfg
    }
    pub fn switch_counters(&self) -> &SwitchCounters {
        &self.counters
    }
    pub fn port_counters(&self, port: u16) -> Option<&SwitchPortCounters> {
        self.ports.get(port as usize).map(|p| &p.counters)
    }
    /// Frames waiting in `port`'s output queue.
    pub fn queued(&self, port: u16) -> usize {
        self.ports.get(port as usize).map_or(0, |p| p.queue.len())
    }
    /// Frames `port`'s output queue refused (tail drop).
    pub fn queue_drops(&self, port: u16) -> u64 {
        self.ports
            .get(port as usize)
            .map_or(0, |p| p.queue.stats().drops(DropReason::QueueFull))
    }
    /// Where the FDB sends unicast to `mac` in VLAN `vid` at `now`.
    pub fn lookup(&self, now: Instant, vid: u16, mac: MacAddr) -> Option<u16> {
        self.fdb
            .map
            .get(&(vid, mac))
            .filter(|e| alive(e, now, self.cfg.aging_time))
            .map(|e| e.port)
    }
    /// Dynamic FDB entries held (some may be past their age until the next
    /// `handle_timeout`).
    pub fn fdb_len(&self) -> usize {
        self.fdb.dynamic
    }
    /// Extra traffic copies flooding made: copies beyond the first of each
    /// flooded frame. A conservation ledger over a network with switches
    /// reads `generated + replicated = delivered + dropped + held`.
    pub fn replicated(&self) -> u64 {
        let c = &self.counters;
        let flooded: u64 = self.outcome_total(Outcome::Flooded);
        c.flood_copies.saturating_sub(flooded - c.flooded_nowhere)
    }
    /// Frames received on every port that ended in `o`.
    pub fn outcome_total(&self, o: Outcome) -> u64 {
        self.ports.iter().map(|p| p.counters.outcome(o)).sum()
    }

    fn bad(&mut self, reason: &'static str) -> Outcome {
        *self.counters.malformed.entry(reason).or_default() += 1;
        Outcome::Malformed
    }

    /// 802.1Q ingress: parse, classify the VLAN, filter, strip the tag.
    fn admit(&mut self, port: usize, mut frame: Vec<u8>) -> Result<Admitted, Outcome> {
        let view = match vlan::parse_vlan(&frame) {
            Ok(v) => v,
            Err(VlanError::Truncated) if frame.len() < ETH_HDR => return Err(self.bad("runt")),
            Err(VlanError::Truncated) => return Err(self.bad("truncated_tag")),
            Err(VlanError::Stacked) => return Err(Outcome::UnsupportedTag),
        };
        if frame.len() - view.header_len > self.cfg.mtu {
            return Err(Outcome::Oversize);
        }
        let mode = &self.ports[port].cfg.vlan;
        let (vid, tag) = match view.tag {
            Some(t) if t.vid == VID_RESERVED => return Err(self.bad("reserved_vid")),
            // Tagged: its own VLAN. Untagged or priority-tagged (VID 0,
            // §6.9.1): the port's PVID, keeping a priority tag's PCP.
            Some(t) if t.vid != 0 => (Some(t.vid), t),
            Some(t) => (mode.pvid(), t),
            None => (mode.pvid(), VlanTag::default()),
        };
        let Some(vid) = vid else {
            return Err(Outcome::VlanFiltered);
        };
        if !self.ports[port].members.contains(vid) {
            return Err(Outcome::VlanFiltered);
        }
        let was_tagged = view.tag.is_some();
        if was_tagged {
            vlan::pop_tag(&mut frame);
        }
        Ok(Admitted {
            frame,
            vid,
            tag: VlanTag { vid, ..tag },
            was_tagged,
        })
    }

    /// Bind `mac` to `port` in `vid` (802.1D §7.8).
    fn learn(&mut self, now: Instant, vid: u16, mac: MacAddr, port: u16) {
        if mac.is_group() {
            self.counters.src_group += 1;
            return;
        }
        let aging = self.cfg.aging_time;
        if let Some(e) = self.fdb.map.get_mut(&(vid, mac)) {
            if e.fixed {
                if e.port != port {
                    self.counters.static_conflict += 1;
                }
                return;
            }
            if !alive(e, now, aging) {
                // Past its age but not yet purged: what the aging timer
                // would have done first, then a fresh entry.
                self.counters.aged += 1;
                self.counters.learned += 1;
            } else if e.port != port {
                self.counters.moves += 1;
            }
            e.port = port;
            e.last_seen = e.last_seen.max(now);
            return;
        }
        if self.fdb.dynamic >= self.cfg.fdb_capacity {
            // Make room from entries already past their age, if any.
            self.expire(now);
            if self.fdb.dynamic >= self.cfg.fdb_capacity {
                self.counters.fdb_full += 1;
                return;
            }
        }
        self.fdb.map.insert(
            (vid, mac),
            FdbEntry {
                port,
                last_seen: now,
                fixed: false,
            },
        );
        self.fdb.dynamic += 1;
        self.fdb.expiries.push(Reverse((now + aging, vid, mac)));
        self.counters.learned += 1;
    }

    /// Forget entries not refreshed for the aging time (802.1D §7.9.2).
    fn expire(&mut self, now: Instant) {
        let aging = self.cfg.aging_time;
        while let Some(&Reverse((at, vid, mac))) = self.fdb.expiries.peek() {
            if at > now {
                break;
            }
            self.fdb.expiries.pop();
            let Some(e) = self.fdb.map.get(&(vid, mac)).copied() else {
                continue;
            };
            if alive(&e, now, aging) {
                self.fdb.expiries.push(Reverse((e.last_seen + aging, vid, mac)));
            } else {
                self.fdb.map.remove(&(vid, mac));
                self.fdb.dynamic -= 1;
                self.counters.aged += 1;
            }
        }
    }

    /// Offer a copy to `out`'s queue, tagged as `out` wants it. Refusals
    /// are counted by the queue (`queue_full`).
    fn offer(&mut self, now: Instant, out: usize, a: &Admitted, mut frame: Vec<u8>, meta: Meta) {
        let p = &mut self.ports[out];
        if p.cfg.vlan.egress_tagged(a.vid) {
            // Cannot fail: an admitted frame has a whole Ethernet header.
            let _ = vlan::push_tag(&mut frame, TPID_8021Q, a.tag);
        } else if a.was_tagged {
            vlan::pad_min(&mut frame);
        }
        let traffic = meta.uid != 0;
        match p.queue.enqueue(Packet::new(frame, meta), now) {
            Ok(()) if traffic => self.traffic.held += 1,
            Err(_) if traffic => self.traffic.dropped += 1,
            _ => {}
        }
    }

    fn ingress(&mut self, now: Instant, port: usize, frame: Vec<u8>, meta: Meta) -> Outcome {
        let mut a = match self.admit(port, frame) {
            Ok(a) => a,
            Err(o) => return o,
        };
        // Admitted frames have a whole header.
        let (Some(dst), Some(src)) = (wire::eth_dst(&a.frame), wire::eth_src(&a.frame)) else {
            return self.bad("runt");
        };
        self.learn(now, a.vid, src, port as u16);
        if dst.0[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && dst.0[5] & 0xf0 == 0 {
            return Outcome::LinkLocal;
        }
        let meta = Meta {
            arrival: now,
            in_port: port as u16,
            ..meta
        };
        if !dst.is_group() {
            if let Some(out) = self.lookup(now, a.vid, dst) {
                if out as usize == port {
                    return Outcome::Filtered;
                }
                let frame = std::mem::take(&mut a.frame);
                self.offer(now, out as usize, &a, frame, meta);
                return Outcome::Forwarded;
            }
        }
        let outs: Vec<usize> = (0..self.ports.len())
            .filter(|&q| q != port && self.ports[q].members.contains(a.vid))
            .collect();
        let traffic = meta.uid != 0;
        if outs.is_empty() {
            self.counters.flooded_nowhere += 1;
            if traffic {
                self.traffic.dropped += 1;
            }
        }
        let last = outs.len().saturating_sub(1);
        for (i, q) in outs.into_iter().enumerate() {
            self.counters.flood_copies += 1;
            if traffic && i > 0 {
                self.traffic.created += 1;
            }
            let frame = if i == last {
                std::mem::take(&mut a.frame)
            } else {
                a.frame.clone()
            };
            self.offer(now, q, &a, frame, meta);
        }
        Outcome::Flooded
    }

    /// The next frame whose port is free and whose fabric delay has passed.
    fn transmit(&mut self, now: Instant) -> Option<Transmit> {
        let n = self.ports.len();
        let latency = self.cfg.forwarding_latency;
        for k in 0..n {
            let i = (self.next_port + k) % n;
            let p = &mut self.ports[i];
            if p.tx_pending || p.busy_until > now {
                continue;
            }
            if p.queue.peek(now).is_none_or(|h| h.meta.arrival + latency > now) {
                continue;
            }
            let Some(pkt) = p.queue.dequeue(now) else {
                continue;
            };
            let traffic = pkt.meta.uid != 0;
            if traffic {
                self.traffic.held -= 1;
            }
            let wire = p.cfg.framing.wire_bytes(pkt.len());
            p.counters.tx.handed(p.cfg.duplex, pkt.len() as u64, wire);
            let tx_end = match p.cfg.duplex {
                Duplex::Full => {
                    p.busy_until = now + Duration::for_bytes(wire, p.cfg.rate_bps);
                    Some(p.busy_until)
                }
                Duplex::Half => {
                    p.tx_pending = true;
                    p.tx_traffic = traffic;
                    None
                }
            };
            self.next_port = (i + 1) % n;
            return Some(Transmit {
                port: i as u16,
                pkt,
                tx_end,
            });
        }
        None
    }

    /// The ledger over every frame, traffic or not: frames queued, frames
    /// that went nowhere, and copies made by flooding.
    pub fn frame_ledger(&self) -> Ledger {
        Ledger {
            held: self.ports.iter().map(|p| p.queue.len() as u64).sum(),
            dropped: self.dropped(),
            created: self.replicated(),
        }
    }

    fn dropped(&self) -> u64 {
        let c = &self.counters;
        let outcomes: u64 = Outcome::ALL
            .iter()
            .filter(|o| o.is_drop())
            .map(|o| self.outcome_total(*o))
            .sum();
        let ports: u64 = self
            .ports
            .iter()
            .map(|p| p.queue.stats().total_drops() + p.counters.tx.excessive_collisions)
            .sum();
        outcomes + ports + c.flooded_nowhere + c.rx_bad_port + c.no_app
    }
}

impl Node for Switch {
    fn name(&self) -> &str {
        &self.cfg.name
    }
    fn port_count(&self) -> usize {
        self.ports.len()
    }
    fn handle_frame(&mut self, now: Instant, port: u16, frame: Vec<u8>, meta: Meta) {
        let Some(p) = self.ports.get_mut(port as usize) else {
            self.counters.rx_bad_port += 1;
            return;
        };
        p.counters.rx_pkts += 1;
        p.counters.rx_bytes += frame.len() as u64;
        let traffic = meta.uid != 0;
        let o = self.ingress(now, port as usize, frame, meta);
        if traffic && o.is_drop() {
            self.traffic.dropped += 1;
        }
        self.ports[port as usize].counters.outcomes[o.index()] += 1;
    }
    /// A switch runs no applications: counted (`no_app`) and dropped.
    fn handle_send(&mut self, _now: Instant, _pkt: Packet) {
        self.counters.no_app += 1;
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.expire(now);
    }
    fn handle_tx_done(&mut self, now: Instant, port: u16, status: TxStatus) {
        if let Some(p) = self.ports.get_mut(port as usize) {
            p.tx_pending = false;
            p.busy_until = p.busy_until.max(now);
            p.counters.tx.done(status);
            if status == TxStatus::ExcessiveCollisions && p.tx_traffic {
                self.traffic.dropped += 1;
            }
        }
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.transmit(now)
    }
    fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        let latency = self.cfg.forwarding_latency;
        let ports = self
            .ports
            .iter()
            .filter(|p| !p.tx_pending)
            .filter_map(|p| {
                p.queue
                    .peek(now)
                    .map(|h| (h.meta.arrival + latency).max(p.busy_until))
            })
            .min();
        let aging = self.fdb.expiries.peek().map(|Reverse((t, _, _))| *t);
        ports.into_iter().chain(aging).min()
    }
    fn counters(&self) -> Vec<(String, u64)> {
        let c = &self.counters;
        let sum = |f: fn(&SwitchPortCounters) -> u64| self.ports.iter().map(|p| f(&p.counters)).sum::<u64>();
        let mut v: Vec<(String, u64)> = vec![
            ("rx_frames".into(), sum(|p| p.rx_pkts)),
            ("tx_frames".into(), sum(|p| p.tx.pkts)),
        ];
        v.extend(
            Outcome::ALL
                .iter()
                .map(|o| (o.name().to_string(), self.outcome_total(*o))),
        );
        v.extend(c.malformed().map(|(k, n)| (format!("malformed_{k}"), n)));
        let queue_full: u64 = (0..self.ports.len()).map(|i| self.queue_drops(i as u16)).sum();
        v.extend(
            [
                ("flood_copies", c.flood_copies),
                ("flooded_nowhere", c.flooded_nowhere),
                ("replicated", self.replicated()),
                ("learned", c.learned),
                ("moves", c.moves),
                ("aged", c.aged),
                ("fdb_full", c.fdb_full),
                ("src_group", c.src_group),
                ("static_conflict", c.static_conflict),
                ("queue_full", queue_full),
                ("tx_excessive_collisions", sum(|p| p.tx.excessive_collisions)),
                ("rx_bad_port", c.rx_bad_port),
                ("no_app", c.no_app),
            ]
            .into_iter()
            .map(|(k, n)| (k.to_string(), n)),
        );
        v
    }
    fn port_report(&self, port: u16) -> PortReport {
        let Some(p) = self.ports.get(port as usize) else {
            return PortReport::default();
        };
        let c = &p.counters;
        let mut drops: Vec<(String, u64)> = p
            .queue
            .stats()
            .drop_counts()
            .map(|(k, n)| (k.to_string(), n))
            .collect();
        drops.extend(c.tx.drop_entry());
        let rx_counters = Outcome::ALL
            .iter()
            .map(|o| (o.name().to_string(), c.outcome(*o)))
            .filter(|(_, n)| *n > 0)
            .collect();
        PortReport {
            name: p.cfg.name.clone(),
            rx_pkts: c.rx_pkts,
            rx_bytes: c.rx_bytes,
            tx_pkts: c.tx.pkts,
            tx_bytes: c.tx.bytes,
            tx_wire_bytes: c.tx.wire_bytes,
            scheduler: p.queue.kind().to_string(),
            queued: p.queue.len() as u64,
            drops,
            counters: Vec::new(),
            rx_counters,
        }
    }
    /// Traffic frames only (`meta.uid != 0`); see [`Switch::replicated`]
    /// for every frame.
    fn ledger(&self) -> Ledger {
        self.traffic
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::step;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    const GBPS: u64 = 1_000_000_000;
    /// IEEE 802 local experimental EtherType: carries nothing the switch reads.
    const ETHERTYPE_TEST: u16 = 0x88b5;

    fn mac(n: u8) -> MacAddr {
        MacAddr([2, 0, 0, 0, 0, n])
    }

    /// The member set built from the listed VIDs is exactly `is_member`
    /// over every VID (it used to be built by that scan).
    #[test]
    fn vid_set_matches_is_member() {
        let modes = [
            VlanMode::Access(1),
            VlanMode::Access(VID_MAX),
            VlanMode::Trunk {
                native: None,
                allowed: vec![],
            },
            VlanMode::Trunk {
                native: Some(7),
                allowed: vec![1, 63, 64, 65, 7, 4000, VID_MAX],
            },
        ];
        for m in &modes {
            let s = VidSet::of(m);
            for v in 0..=u16::MAX {
                let want = (1..=VID_MAX).contains(&v) && m.is_member(v);
                assert_eq!(s.contains(v), want, "{m:?} vid {v}");
            }
        }
    }

    /// An untagged frame of `len` bytes (no FCS), its payload filled with
    /// `mark` so copies can be told apart.
    fn frame(dst: MacAddr, src: MacAddr, len: usize, mark: u8) -> Vec<u8> {
        let mut f = vec![mark; len.max(ETH_HDR)];
        wire::set_eth_addrs(&mut f, src, dst);
        f[12..14].copy_from_slice(&ETHERTYPE_TEST.to_be_bytes());
        f
    }

    fn tagged(dst: MacAddr, src: MacAddr, tag: VlanTag, len: usize, mark: u8) -> Vec<u8> {
        let mut f = frame(dst, src, len, mark);
        vlan::push_tag(&mut f, TPID_8021Q, tag).unwrap();
        f
    }

    fn port(name: &str, vlan: VlanMode) -> SwitchPortConfig {
        SwitchPortConfig::new(name, GBPS, vlan)
    }

    /// `n` access ports in VLAN 1 at 1 Gb/s.
    fn flat(n: usize) -> SwitchConfig {
        let mut c = SwitchConfig::new("sw");
        c.ports = (0..n)
            .map(|i| port(&format!("p{i}"), VlanMode::Access(1)))
            .collect();
        c
    }

    fn switch(c: SwitchConfig) -> Switch {
        Switch::new(c).unwrap()
    }

    /// A frame the switch put on a port: when it started and when its last
    /// bit left.
    #[derive(Debug)]
    struct Sent {
        port: u16,
        start: Instant,
        end: Option<Instant>,
        data: Vec<u8>,
    }

    /// Drive a switch as a driver with ideal links would: at each instant,
    /// hand in that instant's frames (in order), then run timers and drain
    /// transmits; sleep until the next input or the switch's deadline.
    /// Stops at `until`. Asserts the switch never asks to be woken for
    /// nothing.
    fn run(sw: &mut Switch, inputs: Vec<(Instant, u16, Vec<u8>)>, until: Instant) -> Vec<Sent> {
        let mut inputs: Vec<_> = inputs;
        inputs.sort_by_key(|x| x.0);
        let mut inputs: VecDeque<_> = inputs.into();
        let mut out = Vec::new();
        let mut now = Instant::ZERO;
        loop {
            let next = [inputs.front().map(|x| x.0), sw.poll_timeout(now)]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = next else { break };
            now = t.max(now);
            if now > until {
                break;
            }
            while inputs.front().is_some_and(|x| x.0 <= now) {
                let (_, p, f) = inputs.pop_front().unwrap();
                sw.handle_frame(now, p, f, Meta::default());
            }
            for tx in step(sw, now) {
                out.push(Sent {
                    port: tx.port,
                    start: now,
                    end: tx.tx_end,
                    data: tx.pkt.data,
                });
            }
            assert!(sw.poll_timeout(now).is_none_or(|t| t > now), "stalled at {now:?}");
        }
        out
    }

    fn ports_of(sent: &[Sent]) -> Vec<u16> {
        let mut v: Vec<u16> = sent.iter().map(|s| s.port).collect();
        v.sort();
        v
    }

    fn counter(sw: &Switch, name: &str) -> u64 {
        sw.counters()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, n)| n)
            .unwrap_or_else(|| panic!("no counter {name}"))
    }

    fn us(n: u64) -> Instant {
        Instant(n * 1_000)
    }

    #[test]
    fn learns_then_sends_unicast_to_its_port_only() {
        let mut sw = switch(flat(4));
        let (a, b, c) = (mac(0xa), mac(0xb), mac(0xc));
        // A → B: B unknown, flooded to every other port.
        let out = run(&mut sw, vec![(us(1), 0, frame(b, a, 100, 1))], us(50));
        assert_eq!(ports_of(&out), vec![1, 2, 3]);
        // B → A: A was learned on port 0.
        let out = run(&mut sw, vec![(us(100), 1, frame(a, b, 100, 2))], us(150));
        assert_eq!(ports_of(&out), vec![0]);
        // A → B: B was learned on port 1 by its reply.
        let out = run(&mut sw, vec![(us(200), 0, frame(b, a, 100, 3))], us(250));
        assert_eq!(ports_of(&out), vec![1]);
        assert_eq!(out[0].data, frame(b, a, 100, 3), "forwarded unchanged");
        let out = run(&mut sw, vec![(us(300), 2, frame(a, c, 100, 4))], us(350));
        assert_eq!(ports_of(&out), vec![0]);
        assert_eq!(
            [a, b, c].map(|m| sw.lookup(us(400), 1, m)),
            [Some(0), Some(1), Some(2)]
        );
        assert_eq!(sw.lookup(us(400), 2, a), None, "learning is per VLAN");
        assert_eq!(
            ["learned", "flooded", "forwarded", "flood_copies", "replicated"].map(|k| counter(&sw, k)),
            [3, 1, 3, 3, 2]
        );
    }

    #[test]
    fn floods_broadcast_multicast_and_unknown_unicast_to_vlan_members_except_ingress() {
        let mut c = flat(5);
        c.ports[3].vlan = VlanMode::Access(20);
        c.ports[4].vlan = VlanMode::Access(1);
        let mut sw = switch(c);
        let s = mac(1);
        let dsts = [
            MacAddr::BROADCAST,
            MacAddr([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01]),
            mac(0x77),
        ];
        for (i, d) in dsts.into_iter().enumerate() {
            let t = us(100 * (i as u64 + 1));
            let f = frame(d, s, 200, i as u8);
            let out = run(&mut sw, vec![(t, 1, f.clone())], t + Duration::from_micros(50));
            assert_eq!(ports_of(&out), vec![0, 2, 4], "{d}");
            assert!(out.iter().all(|o| o.data == f), "copies are the frame itself");
        }
        assert_eq!(counter(&sw, "flooded"), 3);
        assert_eq!(counter(&sw, "flood_copies"), 9);
        // The group destinations were never learned; the source was, once.
        assert_eq!(counter(&sw, "learned"), 1);
        // A group source address is forwarded but never learned.
        let out = run(
            &mut sw,
            vec![(us(500), 0, frame(mac(0x55), dsts[1], 64, 9))],
            us(600),
        );
        assert_eq!(ports_of(&out), vec![1, 2, 4]);
        assert_eq!(counter(&sw, "src_group"), 1);
        assert_eq!(sw.lookup(us(600), 1, dsts[1]), None);
    }

    #[test]
    fn never_sends_back_out_of_the_ingress_port() {
        let mut sw = switch(flat(3));
        let (a, c) = (mac(0xa), mac(0xc));
        // A and C share port 0 (a hub or another switch behind it).
        run(
            &mut sw,
            vec![(us(1), 0, frame(MacAddr::BROADCAST, a, 64, 0))],
            us(20),
        );
        run(
            &mut sw,
            vec![(us(30), 0, frame(MacAddr::BROADCAST, c, 64, 0))],
            us(50),
        );
        let out = run(&mut sw, vec![(us(100), 0, frame(a, c, 64, 1))], us(200));
        assert!(out.is_empty());
        assert_eq!(counter(&sw, "filtered"), 1);
        assert_eq!(sw.frame_ledger().dropped, 1);
    }

    #[test]
    fn a_station_that_moves_is_followed() {
        let mut sw = switch(flat(3));
        let (a, b) = (mac(0xa), mac(0xb));
        run(&mut sw, vec![(us(1), 0, frame(b, a, 64, 0))], us(20));
        assert_eq!(sw.lookup(us(20), 1, a), Some(0));
        run(&mut sw, vec![(us(30), 2, frame(b, a, 64, 0))], us(50));
        assert_eq!(sw.lookup(us(50), 1, a), Some(2));
        let out = run(&mut sw, vec![(us(60), 1, frame(a, b, 64, 0))], us(80));
        assert_eq!(ports_of(&out), vec![2]);
        assert_eq!((counter(&sw, "moves"), counter(&sw, "learned")), (1, 2));
    }

    /// 0, 1: access VLAN 10; 2, 3: access VLAN 20; 4: trunk of 10 and 20
    /// without a native VLAN; 5: trunk with native 10, allowing 20.
    fn vlan_switch() -> Switch {
        let mut c = SwitchConfig::new("sw");
        c.ports = vec![
            port("a10", VlanMode::Access(10)),
            port("b10", VlanMode::Access(10)),
            port("a20", VlanMode::Access(20)),
            port("b20", VlanMode::Access(20)),
            port(
                "trunk",
                VlanMode::Trunk {
                    native: None,
                    allowed: vec![10, 20],
                },
            ),
            port(
                "native10",
                VlanMode::Trunk {
                    native: Some(10),
                    allowed: vec![20],
                },
            ),
        ];
        switch(c)
    }

    fn by_port(out: &[Sent]) -> BTreeMap<u16, Vec<u8>> {
        let m: BTreeMap<u16, Vec<u8>> = out.iter().map(|s| (s.port, s.data.clone())).collect();
        assert_eq!(m.len(), out.len(), "one copy per port");
        m
    }

    #[test]
    fn vlans_are_isolated_and_trunks_tag_except_native() {
        let mut sw = vlan_switch();
        let (h10, h20, x) = (mac(0x10), mac(0x20), mac(0x99));
        let tag = |vid| VlanTag {
            pcp: 0,
            dei: false,
            vid,
        };

        // Broadcast in VLAN 10: the other access port and the native trunk
        // untagged, the trunk tagged 10; never VLAN 20's access ports.
        let b = frame(MacAddr::BROADCAST, h10, 60, 1);
        let out = by_port(&run(&mut sw, vec![(us(10), 0, b.clone())], us(100)));
        let want: BTreeMap<u16, Vec<u8>> = [
            (1, b.clone()),
            (4, tagged(MacAddr::BROADCAST, h10, tag(10), 60, 1)),
            (5, b.clone()),
        ]
        .into();
        assert_eq!(out, want);

        // Broadcast in VLAN 20: tagged on both trunks (20 is not native).
        let b = frame(MacAddr::BROADCAST, h20, 60, 2);
        let out = by_port(&run(&mut sw, vec![(us(200), 2, b.clone())], us(300)));
        let t20 = tagged(MacAddr::BROADCAST, h20, tag(20), 60, 2);
        let want: BTreeMap<u16, Vec<u8>> = [(3, b.clone()), (4, t20.clone()), (5, t20)].into();
        assert_eq!(out, want);

        // Unicast to a station of VLAN 20 from VLAN 10 is unknown in VLAN 10:
        // flooded there, never delivered into VLAN 20.
        run(
            &mut sw,
            vec![(us(400), 3, frame(MacAddr::BROADCAST, x, 60, 3))],
            us(500),
        );
        assert_eq!(
            (sw.lookup(us(500), 20, x), sw.lookup(us(500), 10, x)),
            (Some(3), None)
        );
        let out = run(&mut sw, vec![(us(600), 0, frame(x, h10, 60, 4))], us(700));
        assert_eq!(ports_of(&out), vec![1, 4, 5]);
        // The same MAC may live in both VLANs at once (independent learning).
        run(
            &mut sw,
            vec![(us(800), 1, frame(MacAddr::BROADCAST, x, 60, 5))],
            us(900),
        );
        assert_eq!(
            (sw.lookup(us(900), 20, x), sw.lookup(us(900), 10, x)),
            (Some(3), Some(1))
        );
        let out = run(
            &mut sw,
            vec![(us(1000), 4, tagged(x, h20, tag(20), 60, 6))],
            us(1100),
        );
        assert_eq!(ports_of(&out), vec![3]);
        assert_eq!(out[0].data, frame(x, h20, 60, 6), "untagged on the access port");

        // A tagged frame of VLAN 20 entering the trunk, with a priority:
        // untagged to the access ports, tagged (PCP kept) to the other trunk.
        let pri = VlanTag {
            pcp: 5,
            dei: true,
            vid: 20,
        };
        let f = tagged(MacAddr::BROADCAST, mac(0x21), pri, 200, 7);
        let out = by_port(&run(&mut sw, vec![(us(1200), 4, f.clone())], us(1300)));
        let u = frame(MacAddr::BROADCAST, mac(0x21), 200, 7);
        let want: BTreeMap<u16, Vec<u8>> = [(2, u.clone()), (3, u), (5, f)].into();
        assert_eq!(out, want);

        // A priority-tagged frame (VID 0) on an access port is in its VLAN.
        let p = VlanTag {
            pcp: 6,
            dei: false,
            vid: 0,
        };
        // 60 bytes tagged: 56 untagged, which the switch re-pads to 60.
        let f = tagged(MacAddr::BROADCAST, h10, p, 56, 8);
        assert_eq!(f.len(), 60);
        let out = by_port(&run(&mut sw, vec![(us(1400), 0, f)], us(1500)));
        let want: BTreeMap<u16, Vec<u8>> = [
            (1, frame(MacAddr::BROADCAST, h10, 56, 8)),
            (
                4,
                tagged(MacAddr::BROADCAST, h10, VlanTag { vid: 10, ..p }, 56, 8),
            ),
            (5, frame(MacAddr::BROADCAST, h10, 56, 8)),
        ]
        .into_iter()
        .map(|(k, mut v)| {
            if k != 4 {
                vlan::pad_min(&mut v);
            }
            (k, v)
        })
        .collect();
        assert_eq!(out, want);

        // Ingress filtering: VLAN 30 on the trunk, untagged on a trunk
        // without native VLAN, VLAN 20 on an access port of VLAN 10.
        let filtered = [
            (4, tagged(MacAddr::BROADCAST, h10, tag(30), 60, 9)),
            (4, frame(MacAddr::BROADCAST, h10, 60, 9)),
            (0, tagged(MacAddr::BROADCAST, h10, tag(20), 60, 9)),
        ];
        let out = run(
            &mut sw,
            filtered.into_iter().map(|(p, f)| (us(1600), p, f)).collect(),
            us(1700),
        );
        assert!(out.is_empty());
        assert_eq!(counter(&sw, "vlan_filtered"), 3);
        // Tagged with the native VLAN: admitted (the port is a member),
        // leaves untagged on VLAN 10's access ports.
        let out = run(
            &mut sw,
            vec![(us(1800), 5, tagged(MacAddr::BROADCAST, mac(0x3), tag(10), 64, 10))],
            us(1900),
        );
        assert_eq!(ports_of(&out), vec![0, 1, 4]);
        let on0 = &out.iter().find(|s| s.port == 0).unwrap().data;
        assert_eq!(on0, &frame(MacAddr::BROADCAST, mac(0x3), 64, 10));
    }

    /// Two ports sending at line rate into one output port of the same
    /// rate: the output carries exactly its line rate, and the buffer
    /// overflows. Per slot (one frame time w) two frames arrive and one
    /// leaves, so the queue grows by one a slot until it holds its limit
    /// L, and from then on one of every two arrivals is dropped. With the
    /// arrivals of a slot queued before that slot's departure, after N
    /// slots N - L + 1 frames were dropped and N + L - 1 sent.
    fn overflow(queue_packets: usize, queue_bytes: usize, limit: u64) {
        let mut c = flat(3);
        c.ports[2].queue_packets = queue_packets;
        c.ports[2].queue_bytes = queue_bytes;
        let mut sw = switch(c);
        let (a, b, dst) = (mac(0xa), mac(0xb), mac(0xc));
        let len = 1514;
        let w = Duration::for_bytes(Framing::default().wire_bytes(len), GBPS);
        let n = 400u64;
        let t0 = Instant::from_nanos(1_000_000);
        let mut inputs = vec![(Instant(1_000), 2, frame(MacAddr::BROADCAST, dst, 60, 0))];
        for k in 1..=n {
            let t = t0 + Duration(k * w.0);
            inputs.push((t, 0, frame(dst, a, len, 1)));
            inputs.push((t, 1, frame(dst, b, len, 2)));
        }
        let out: Vec<Sent> = run(&mut sw, inputs, Instant::MAX)
            .into_iter()
            .filter(|s| s.port == 2)
            .collect();
        assert_eq!(out.len() as u64, n + limit - 1);
        assert_eq!(sw.queue_drops(2), n - limit + 1);
        assert_eq!(counter(&sw, "queue_full"), n - limit + 1);
        assert_eq!(
            sw.port_report(2).drops,
            vec![("queue_full".to_string(), n - limit + 1)]
        );
        // Back to back from the first arrival: exactly the line rate.
        assert_eq!(out[0].start, t0 + w);
        for pair in out.windows(2) {
            assert_eq!(Some(pair[1].start), pair[0].end);
        }
        let busy = out.last().unwrap().end.unwrap() - out[0].start;
        assert_eq!(busy, Duration(w.0 * out.len() as u64));
        // Everything received is sent or counted dropped.
        let l = sw.frame_ledger();
        assert_eq!(l.held, 0);
        assert_eq!(2 * n, out.len() as u64 + l.dropped);
    }

    #[test]
    fn output_contention_overflows_the_packet_limited_buffer() {
        overflow(50, DEFAULT_QUEUE_BYTES, 50);
    }

    #[test]
    fn output_contention_overflows_the_byte_limited_buffer() {
        // Room for 10 frames of 1514 bytes but not 11.
        overflow(10_000, 10 * 1514 + 1000, 10);
    }

    #[test]
    fn aging_forgets_a_station_and_flooding_resumes() {
        let mut sw = switch(flat(4));
        let (a, x) = (mac(0xa), mac(0x1));
        let age = DEFAULT_AGING_TIME;
        let t_learn = Instant::from_nanos(1_000_000_000);
        run(
            &mut sw,
            vec![(t_learn, 1, frame(MacAddr::BROADCAST, x, 64, 0))],
            t_learn + Duration(1_000_000),
        );
        // The next deadline is the entry's age.
        assert_eq!(
            sw.poll_timeout(t_learn + Duration(1_000_000)),
            Some(t_learn + age)
        );
        // Unicast to x does not refresh it (only frames from x do).
        let t1 = t_learn + age - Duration::from_secs(1);
        let out = run(
            &mut sw,
            vec![(t1, 0, frame(x, a, 64, 1))],
            t1 + Duration(1_000_000),
        );
        assert_eq!(ports_of(&out), vec![1]);
        // One nanosecond before its age it is still there; at its age, gone.
        let before = t_learn + age - Duration(1);
        sw.handle_timeout(before);
        assert_eq!((sw.lookup(before, 1, x), counter(&sw, "aged")), (Some(1), 0));
        let t2 = t_learn + age;
        let out = run(
            &mut sw,
            vec![(t2, 0, frame(x, a, 64, 2))],
            t2 + Duration(1_000_000),
        );
        assert_eq!(counter(&sw, "aged"), 1);
        assert_eq!(ports_of(&out), vec![1, 2, 3], "flooded again");
        assert_eq!(sw.lookup(t2, 1, x), None);
        // Frames from a station refresh it: it lives `age` after the last.
        let t3 = t2 + Duration::from_secs(10);
        run(
            &mut sw,
            vec![(t3, 2, frame(MacAddr::BROADCAST, x, 64, 3))],
            t3 + Duration(1_000_000),
        );
        let t4 = t3 + Duration::from_secs(200);
        run(
            &mut sw,
            vec![(t4, 2, frame(MacAddr::BROADCAST, x, 64, 4))],
            t4 + Duration(1_000_000),
        );
        sw.handle_timeout(t3 + age);
        assert_eq!(sw.lookup(t3 + age, 1, x), Some(2));
        assert_eq!(sw.poll_timeout(t3 + age), Some(t4 + age));
        sw.handle_timeout(t4 + age);
        assert_eq!(sw.lookup(t4 + age, 1, x), None);
        assert_eq!((counter(&sw, "aged"), sw.fdb_len()), (3, 0));
        assert_eq!(sw.poll_timeout(t4 + age), None, "nothing left to do");
    }

    #[test]
    fn forwarding_latency_delays_departures_exactly() {
        let mut c = flat(2);
        let d = Duration::from_micros(5);
        c.forwarding_latency = d;
        let mut sw = switch(c);
        let (a, b) = (mac(0xa), mac(0xb));
        run(
            &mut sw,
            vec![(us(1), 1, frame(MacAddr::BROADCAST, b, 64, 0))],
            us(100),
        );
        let w = Duration::for_bytes(Framing::default().wire_bytes(1000), GBPS);
        let t = us(1000);
        sw.handle_frame(t, 0, frame(b, a, 1000, 1), Meta::default());
        assert_eq!(sw.poll_timeout(t), Some(t + d), "not before the fabric delay");
        assert!(step(&mut sw, t + d - Duration(1)).is_empty());
        let out = run(
            &mut sw,
            vec![
                // Arrives while the first waits: leaves when the port frees.
                (t + Duration(1), 0, frame(b, a, 1000, 2)),
                // Arrives when the port is idle again: waits the delay only.
                (t + d + w + w + Duration::from_micros(1), 0, frame(b, a, 1000, 3)),
            ],
            us(2000),
        );
        let starts: Vec<Instant> = out.iter().map(|s| s.start).collect();
        let ends: Vec<Option<Instant>> = out.iter().map(|s| s.end).collect();
        let t3 = t + d + w + w + Duration::from_micros(1);
        assert_eq!(starts, vec![t + d, t + d + w, t3 + d]);
        assert_eq!(ends, vec![Some(t + d + w), Some(t + d + w + w), Some(t3 + d + w)]);
    }

    #[test]
    fn paces_at_one_gigabit() {
        let mut c = flat(3);
        c.ports[2].rate_bps = 100_000_000;
        let mut sw = switch(c);
        let (a, b, z) = (mac(0xa), mac(0xb), mac(0xc));
        run(
            &mut sw,
            vec![
                (us(1), 1, frame(MacAddr::BROADCAST, b, 64, 0)),
                (us(1), 2, frame(MacAddr::BROADCAST, z, 64, 0)),
            ],
            us(100),
        );
        // Minimum frames (60 bytes + FCS, preamble, IFG = 84 bytes) at
        // 1 Gb/s take 672 ns each (1.488 Mframe/s); maximum ones (1514 +
        // 24 = 1538 bytes) 12.304 µs (81 274 frame/s).
        let t = us(1000);
        let mut inputs = Vec::new();
        for k in 0..10u64 {
            inputs.push((t + Duration(k * 672), 0, frame(b, a, 60, k as u8)));
        }
        let out = run(&mut sw, inputs, us(2000));
        let ends: Vec<u64> = out.iter().map(|s| (s.end.unwrap() - t).as_nanos()).collect();
        assert_eq!(ends, (1..=10).map(|k| k * 672).collect::<Vec<u64>>());
        // A burst queued at once leaves back to back: each frame's wire
        // time after the one before.
        let t = us(3000);
        let sizes = [1514usize, 60, 1514, 200];
        let inputs: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (t, 0, frame(b, a, n, i as u8)))
            .collect();
        // Frames arriving on one port at once are a driver's batch; fine
        // for pacing, which only depends on the output.
        let out = run(&mut sw, inputs, us(4000));
        let ends: Vec<u64> = out.iter().map(|s| (s.end.unwrap() - t).as_nanos()).collect();
        assert_eq!(ends, vec![12_304, 12_976, 25_280, 27_072]);
        // The same 1514-byte frame at 100 Mb/s: ten times as long.
        let t = us(5000);
        let out = run(&mut sw, vec![(t, 0, frame(z, a, 1514, 7))], us(6000));
        assert_eq!(out[0].end, Some(t + Duration(123_040)));
        // Port 1 also carried z's 64-byte broadcast at the start.
        let r = sw.port_report(1);
        assert_eq!(r.tx_pkts, 1 + 14);
        assert_eq!(r.tx_wire_bytes, 88 + 10 * 84 + 2 * 1538 + 84 + 224);
        assert_eq!(r.tx_bytes, 64 + 10 * 60 + 2 * 1514 + 60 + 200);
    }

    #[test]
    fn a_full_table_learns_nothing_more_until_entries_age() {
        let mut c = flat(3);
        c.fdb_capacity = 2;
        c.aging_time = Duration::from_secs(10);
        let mut sw = switch(c);
        let t = Instant::from_nanos(1_000_000);
        for (i, m) in [1u8, 2, 3].into_iter().enumerate() {
            sw.handle_frame(
                t + Duration(i as u64),
                1,
                frame(MacAddr::BROADCAST, mac(m), 64, 0),
                Meta::default(),
            );
        }
        assert_eq!(
            (counter(&sw, "learned"), counter(&sw, "fdb_full"), sw.fdb_len()),
            (2, 1, 2)
        );
        assert_eq!(sw.lookup(t, 1, mac(3)), None);
        // Once the old entries are past their age there is room again,
        // even before the aging timer ran.
        let later = t + Duration::from_secs(10) + Duration(5);
        sw.handle_frame(
            later,
            2,
            frame(MacAddr::BROADCAST, mac(3), 64, 0),
            Meta::default(),
        );
        assert_eq!(sw.lookup(later, 1, mac(3)), Some(2));
        assert_eq!((counter(&sw, "aged"), sw.fdb_len()), (2, 1));
    }

    #[test]
    fn static_entries_are_never_learned_over_or_aged() {
        let mut c = flat(4);
        c.aging_time = Duration::from_secs(1);
        let s = mac(0x5);
        c.static_macs = vec![StaticMac {
            vid: 1,
            mac: s,
            port: 3,
        }];
        let mut sw = switch(c);
        let out = run(&mut sw, vec![(us(1), 0, frame(s, mac(1), 64, 0))], us(100));
        assert_eq!(ports_of(&out), vec![3]);
        run(
            &mut sw,
            vec![(us(200), 1, frame(MacAddr::BROADCAST, s, 64, 0))],
            us(300),
        );
        assert_eq!(counter(&sw, "static_conflict"), 1);
        let late = Instant::from_nanos(1_000_000_000_000);
        let out = run(
            &mut sw,
            vec![(late, 0, frame(s, mac(1), 64, 0))],
            late + Duration(1_000_000),
        );
        assert_eq!(ports_of(&out), vec![3]);
    }

    #[test]
    fn bad_frames_land_in_named_counters() {
        let mut c = flat(3);
        c.ports[2].vlan = VlanMode::Trunk {
            native: Some(1),
            allowed: vec![],
        };
        let mut sw = switch(c);
        let (a, b) = (mac(0xa), mac(0xb));
        let mut qinq = tagged(MacAddr::BROADCAST, a, VlanTag::new(1), 100, 0);
        vlan::push_tag(&mut qinq, vlan::TPID_8021AD, VlanTag::new(7)).unwrap();
        let inputs = vec![
            (us(1), 0, vec![0xff; 13]),
            (
                us(2),
                2,
                tagged(MacAddr::BROADCAST, a, VlanTag::new(1), 60, 0)[..16].to_vec(),
            ),
            (
                us(3),
                2,
                tagged(MacAddr::BROADCAST, a, VlanTag::new(VID_RESERVED), 60, 0),
            ),
            (us(4), 0, frame(MacAddr::BROADCAST, a, ETH_HDR + 1501, 0)),
            (us(5), 2, qinq),
            (us(6), 0, frame(MacAddr([0x01, 0x80, 0xc2, 0, 0, 0]), a, 60, 0)),
            (us(7), 0, frame(MacAddr([0x01, 0x80, 0xc2, 0, 0, 1]), a, 60, 0)),
            (us(8), 7, frame(b, a, 60, 0)),
        ];
        let out = run(&mut sw, inputs, us(100));
        assert!(out.is_empty());
        let named: BTreeMap<String, u64> = sw.counters().into_iter().collect();
        for (k, n) in [
            ("malformed", 3),
            ("malformed_runt", 1),
            ("malformed_truncated_tag", 1),
            ("malformed_reserved_vid", 1),
            ("oversize", 1),
            ("unsupported_tag", 1),
            ("link_local", 2),
            ("rx_bad_port", 1),
            ("rx_frames", 7),
        ] {
            assert_eq!(named.get(k), Some(&n), "{k}");
        }
        assert_eq!((sw.frame_ledger().held, sw.frame_ledger().dropped), (0, 8));
        // A 1500-byte payload is fine, tagged or not; jumbo needs the MTU.
        let out = run(
            &mut sw,
            vec![
                (us(200), 0, frame(MacAddr::BROADCAST, a, ETH_HDR + 1500, 0)),
                (
                    us(201),
                    2,
                    tagged(MacAddr::BROADCAST, b, VlanTag::new(1), ETH_HDR + 1500, 0),
                ),
            ],
            us(400),
        );
        assert_eq!(out.len(), 4);
        let mut c = flat(2);
        c.mtu = 9000;
        let mut sw = switch(c);
        let out = run(
            &mut sw,
            vec![(us(1), 0, frame(MacAddr::BROADCAST, a, ETH_HDR + 9000, 0))],
            us(100),
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].end, Some(us(1) + Duration::for_bytes(9014 + 24, GBPS)));
    }

    #[test]
    fn half_duplex_ports_wait_for_the_medium() {
        let mut c = flat(2);
        c.ports[1].duplex = Duplex::Half;
        let mut sw = switch(c);
        let t = us(1);
        for k in 0..3 {
            sw.handle_frame(t, 0, frame(MacAddr::BROADCAST, mac(1), 100, k), Meta::default());
        }
        let out = step(&mut sw, t);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].port, out[0].tx_end), (1, None));
        assert_eq!(sw.port_report(1).tx_pkts, 0, "not sent until the NIC says so");
        // Only the FDB's aging timer: the port waits for the NIC.
        assert_eq!(sw.poll_timeout(t), Some(t + DEFAULT_AGING_TIME));
        sw.handle_tx_done(us(5), 1, TxStatus::Sent { collisions: 2 });
        assert_eq!(step(&mut sw, us(5)).len(), 1);
        sw.handle_tx_done(us(9), 1, TxStatus::ExcessiveCollisions);
        assert_eq!(step(&mut sw, us(9)).len(), 1);
        assert_eq!(
            sw.port_report(1).drops,
            vec![("excessive_collisions".to_string(), 1)]
        );
        // Sent: the first frame only (the second was abandoned, the third
        // is with the NIC).
        let r = sw.port_report(1);
        assert_eq!((r.tx_pkts, r.tx_bytes), (1, out[0].pkt.len() as u64));
        assert_eq!((sw.frame_ledger().held, sw.frame_ledger().dropped), (0, 1));
    }

    #[test]
    fn bad_configs_are_refused_with_a_reason() {
        let trunk = |native, allowed: &[u16]| VlanMode::Trunk {
            native,
            allowed: allowed.to_vec(),
        };
        type Edit = Box<dyn Fn(&mut SwitchConfig)>;
        let cases: Vec<(Edit, &str)> = vec![
            (Box::new(|c| c.ports.clear()), "no ports"),
            (
                Box::new(|c| c.ports[0].vlan = VlanMode::Access(0)),
                "access VLAN 0 out of range",
            ),
            (
                Box::new(|c| c.ports[0].vlan = VlanMode::Access(4095)),
                "access VLAN 4095",
            ),
            (
                Box::new(move |c| c.ports[1].vlan = trunk(Some(4095), &[1])),
                "native VLAN 4095",
            ),
            (
                Box::new(move |c| c.ports[1].vlan = trunk(None, &[1, 5, 1])),
                "VLAN 1 listed twice",
            ),
            (
                Box::new(move |c| c.ports[1].vlan = trunk(None, &[0])),
                "allowed VLAN 0",
            ),
            (
                Box::new(move |c| c.ports[1].vlan = trunk(None, &[])),
                "carries no VLAN",
            ),
            (Box::new(|c| c.ports[1].rate_bps = 0), "rate must be positive"),
            (Box::new(|c| c.ports[1].queue_packets = 0), "queue_packets"),
            (
                Box::new(|c| c.ports[1].queue_bytes = 1000),
                "cannot hold one 1518-byte frame",
            ),
            (Box::new(|c| c.ports[1].name = "p0".into()), "duplicate port name"),
            (Box::new(|c| c.mtu = 20_000), "mtu 20000"),
            (Box::new(|c| c.aging_time = Duration::ZERO), "aging time"),
            (
                Box::new(|c| c.forwarding_latency = Duration::from_secs(2)),
                "forwarding latency",
            ),
            (
                Box::new(|c| {
                    c.static_macs = vec![StaticMac {
                        vid: 2,
                        mac: mac(1),
                        port: 0,
                    }]
                }),
                "not in that VLAN",
            ),
            (
                Box::new(|c| {
                    c.static_macs = vec![StaticMac {
                        vid: 1,
                        mac: mac(1),
                        port: 9,
                    }]
                }),
                "port 9 does not exist",
            ),
            (
                Box::new(|c| {
                    c.static_macs = vec![StaticMac {
                        vid: 1,
                        mac: MacAddr::BROADCAST,
                        port: 0,
                    }]
                }),
                "group address",
            ),
        ];
        for (edit, want) in cases {
            let mut c = flat(2);
            edit(&mut c);
            let e = Switch::new(c)
                .err()
                .unwrap_or_else(|| panic!("accepted; wanted {want:?}"));
            assert!(e.contains(want), "{e:?} does not say {want:?}");
            assert!(e.starts_with("switch \"sw\""), "{e:?} names the switch");
        }
        // Native VLAN need not be listed in allowed, and may be.
        let mut c = flat(2);
        c.ports[1].vlan = trunk(Some(1), &[1, 2]);
        assert!(Switch::new(c).is_ok());
    }

    /// A switch that exercises every path: small queues and table, short
    /// aging, VLANs, a trunk, a half-duplex port.
    fn busy_switch() -> Switch {
        let mut c = SwitchConfig::new("sw");
        c.fdb_capacity = 4;
        c.aging_time = Duration::from_micros(500);
        c.forwarding_latency = Duration::from_nanos(300);
        c.ports = vec![
            port("a", VlanMode::Access(10)),
            port("b", VlanMode::Access(10)),
            port(
                "t",
                VlanMode::Trunk {
                    native: Some(10),
                    allowed: vec![20, 30],
                },
            ),
            port("c", VlanMode::Access(20)),
            port("h", VlanMode::Access(10)),
        ];
        for p in &mut c.ports {
            p.queue_packets = 3;
            p.queue_bytes = 4000;
            p.rate_bps = 100_000_000;
        }
        c.ports[4].duplex = Duplex::Half;
        c.static_macs = vec![StaticMac {
            vid: 20,
            mac: mac(9),
            port: 3,
        }];
        switch(c)
    }

    fn valid_frames() -> Vec<Vec<u8>> {
        let t = |vid| VlanTag {
            pcp: 3,
            dei: false,
            vid,
        };
        let mut qinq = tagged(mac(2), mac(1), t(20), 80, 0);
        vlan::push_tag(&mut qinq, vlan::TPID_8021AD, t(5)).unwrap();
        vec![
            frame(MacAddr::BROADCAST, mac(1), 60, 0),
            frame(mac(2), mac(1), 100, 0),
            frame(mac(1), mac(2), 1514, 0),
            frame(mac(9), mac(3), 60, 0),
            frame(MacAddr([1, 0, 0x5e, 0, 0, 1]), mac(4), 60, 0),
            frame(MacAddr([1, 0x80, 0xc2, 0, 0, 2]), mac(4), 60, 0),
            tagged(MacAddr::BROADCAST, mac(5), t(20), 64, 0),
            tagged(mac(1), mac(6), t(30), 64, 0),
            tagged(mac(9), mac(7), t(20), 64, 0),
            tagged(MacAddr::BROADCAST, mac(8), t(0), 64, 0),
            qinq,
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Random bytes and mutated valid frames never panic the switch;
        /// every received frame lands in exactly one outcome; every copy
        /// offered to a queue is sent, queued or counted dropped; and the
        /// ledger balances once flooding's copies are added.
        #[test]
        fn every_frame_is_counted(
            frames in prop::collection::vec(
                (0usize..11, prop::collection::vec((any::<u16>(), any::<u8>()), 0..4),
                 0usize..80, prop::collection::vec(any::<u8>(), 0..100), any::<bool>(),
                 0u16..6, 0u64..200_000, any::<bool>(), any::<bool>()),
                1..60),
        ) {
            let mut sw = busy_switch();
            let mut now = Instant(1_000_000);
            let valid = valid_frames();
            let mut sent = 0u64;
            let mut lost = 0u64;
            let mut pending_half = false;
            for (k, muts, cut, junk, raw, port, gap, app, collide) in frames {
                let f = if raw {
                    junk
                } else {
                    let mut f = valid[k].clone();
                    for (at, v) in muts {
                        let n = f.len();
                        f[at as usize % n] = v;
                    }
                    if cut > 0 && cut < f.len() {
                        f.truncate(f.len() - cut);
                    }
                    f
                };
                if app {
                    sw.handle_send(now, Packet::new(f.clone(), Meta::default()));
                }
                sw.handle_frame(now, port, f, Meta::default());
                now += Duration(gap);
                if pending_half {
                    let st = if collide { TxStatus::ExcessiveCollisions } else { TxStatus::Sent { collisions: 1 } };
                    lost += collide as u64;
                    sw.handle_tx_done(now, 4, st);
                    pending_half = false;
                }
                for tx in step(&mut sw, now) {
                    sent += 1;
                    pending_half |= tx.tx_end.is_none();
                    prop_assert!(tx.pkt.len() <= sw.config().max_frame());
                    prop_assert!(vlan::parse_vlan(&tx.pkt.data).is_ok());
                }
                prop_assert!(sw.poll_timeout(now).is_none_or(|t| t > now));
                let mut offered = 0;
                for p in 0..sw.port_count() as u16 {
                    let c = sw.port_counters(p).unwrap();
                    let outcomes: u64 = Outcome::ALL.iter().map(|o| c.outcome(*o)).sum();
                    prop_assert_eq!(c.rx_pkts, outcomes);
                    let r = sw.port_report(p);
                    // A frame counts as sent once the medium carried it
                    // (IEEE 802.3 §4.2.3.2.5): one with the NIC or given
                    // up after excessive collisions is not.
                    let with_nic = (pending_half && p == 4) as u64;
                    let handed = r.tx_pkts + c.tx.excessive_collisions + with_nic;
                    prop_assert_eq!(handed + r.queued + sw.queue_drops(p),
                        sw.ports[p as usize].queue.stats().enq_pkts + sw.queue_drops(p));
                    offered += sw.ports[p as usize].queue.stats().enq_pkts + sw.queue_drops(p);
                }
                let c = sw.switch_counters();
                prop_assert_eq!(offered, sw.outcome_total(Outcome::Forwarded) + c.flood_copies);
                let rx: u64 = counter(&sw, "rx_frames") + c.rx_bad_port + c.no_app;
                let l = sw.frame_ledger();
                prop_assert_eq!(counter(&sw, "tx_frames"), sent - lost - pending_half as u64);
                prop_assert_eq!(rx + sw.replicated(), (sent - lost) + l.held + l.dropped);
            }
        }
    }
}
