//! The token's cycle (§2.2.3): who holds the token next and what each
//! holder may do, as pure functions of the token, so the station and the
//! tests walk the very same rules.
//!
//! A cycle starts at the first RT node (the sender of the oldest session),
//! which resets ResidualTime to TRT. The token then visits every session of
//! the RT set in order — a node with two sending sessions twice — each
//! visit charging its THT_RT (eq. 1). In the time left it visits all nodes
//! (the NRT set) round robin by station id, from where the previous cycle
//! stopped; each decides under its NRT policy whether its data fits
//! (eq. 2). The first node that cannot fit returns the token to the first
//! RT node, flagging itself first in the next cycle's round robin.
//!
//! The token's cursor says what the next holder is visited for:
//! `FLAG_CYCLE_END` → start a cycle; `rt_next` an index → that RT visit;
//! `rt_next == NRT_PHASE` → an NRT visit of `to`.

use crate::time::Duration;

use super::timing::{admission, Refusal, TimingModel};
use super::wire::{NodeEntry, RtEntry, Token, FLAG_CYCLE_END, NRT_PHASE};
use super::{NrtPolicy, StationId};

/// What the holder of a token is visited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Start a new cycle (the holder is the first RT node).
    CycleStart,
    /// Send for the RT entry at this index.
    Rt(usize),
    /// An NRT visit.
    Nrt,
}

/// The purpose of the visit a token's cursor names.
pub fn purpose(t: &Token) -> Purpose {
    if t.cycle_end() {
        Purpose::CycleStart
    } else if t.rt_next != NRT_PHASE {
        Purpose::Rt(t.rt_next as usize)
    } else {
        Purpose::Nrt
    }
}

pub fn is_alive(t: &Token, id: StationId) -> bool {
    t.nodes.iter().any(|n| n.id == id && n.alive)
}

/// Live stations, ascending.
pub fn alive(t: &Token) -> Vec<StationId> {
    let mut v: Vec<StationId> = t.nodes.iter().filter(|n| n.alive).map(|n| n.id).collect();
    v.sort_unstable();
    v
}

/// Where `me` stands in `t`: whether it is live, and its claim rank —
/// its place among the live stations, ascending, the addressee left out:
/// the order in which silent stations claim a lost token (`None` when
/// `me` is the addressee or not live). One pass over the node table,
/// counting rather than finding `me` in a sorted copy of [`alive`]: every
/// station asks this of every token it hears.
pub fn standing(t: &Token, me: StationId) -> (bool, Option<u64>) {
    // Branch-free, so the compiler can vectorise it.
    let (mut alive, mut below) = (false, 0u32);
    for n in &t.nodes {
        alive |= n.alive & (n.id == me);
        below += u32::from(n.alive & (n.id < me) & (n.id != t.to));
    }
    (alive, (alive && me != t.to).then_some(u64::from(below)))
}

/// The first RT node: sender of the oldest session. Sessions are appended
/// at admission, so the head only changes when its session leaves, and
/// the other RT visits keep their place in the cycle.
pub fn head(t: &Token) -> Option<StationId> {
    t.sessions.first().map(|e| e.session.sender)
}

/// Σ THT_RT of the RT set.
pub fn reserved(t: &Token) -> Duration {
    t.sessions.iter().fold(Duration::ZERO, |a, e| a + e.tht)
}

/// THT of the head's leading run of sessions: how long the head holds the
/// token after a cycle starts before it passes it on.
pub fn head_slots(t: &Token) -> Duration {
    let Some(h) = head(t) else {
        return Duration::ZERO;
    };
    t.sessions
        .iter()
        .take_while(|e| e.session.sender == h)
        .fold(Duration::ZERO, |a, e| a + e.tht)
}

/// First live station at or after `from` in ascending ring order.
pub fn rr_at_or_after(t: &Token, from: StationId) -> Option<StationId> {
    let a = alive(t);
    a.iter()
        .copied()
        .find(|&id| id >= from)
        .or_else(|| a.first().copied())
}

/// The live station after `from` in ring order (`from` itself when it is
/// the only one left).
pub fn rr_next(t: &Token, from: StationId) -> Option<StationId> {
    let a = alive(t);
    a.iter()
        .copied()
        .find(|&id| id > from)
        .or_else(|| a.first().copied())
}

/// Point the cursor at the first started RT entry at or after `from`, or
/// at the NRT phase starting from `nrt_resume`. Sets `to`.
fn settle_rt(t: &mut Token, from: usize) {
    let cycle = t.cycle;
    match t
        .sessions
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, e)| e.start_cycle <= cycle)
    {
        Some((i, e)) => {
            t.rt_next = i as u16;
            t.to = e.session.sender;
        }
        None => {
            t.rt_next = NRT_PHASE;
            if let Some(n) = rr_at_or_after(t, t.nrt_resume) {
                t.to = n;
            }
        }
    }
}

/// The first RT node starts a cycle: new cycle number, ResidualTime back
/// to one TRT, cursor on the first RT entry.
pub fn begin_cycle(t: &mut Token) {
    t.cycle = t.cycle.wrapping_add(1);
    t.residual = t.trt;
    t.flags &= !FLAG_CYCLE_END;
    settle_rt(t, 0);
}

/// After the RT visit of entry `i`: the next started entry, or the NRT phase.
pub fn after_rt(t: &mut Token, i: usize) {
    settle_rt(t, i + 1);
}

/// After `me`'s NRT visit: the next live node round robin.
pub fn after_nrt(t: &mut Token, me: StationId) {
    t.rt_next = NRT_PHASE;
    if let Some(n) = rr_next(t, me) {
        t.to = n;
    }
}

/// `me` could not fit its NRT data: back to the first RT node, `me` first
/// in the next cycle's round robin. `false` when there is no RT node left.
pub fn end_cycle(t: &mut Token, me: StationId) -> bool {
    t.nrt_resume = me;
    t.flags |= FLAG_CYCLE_END;
    t.rt_next = NRT_PHASE;
    match head(t) {
        Some(h) => {
            t.to = h;
            true
        }
        None => false,
    }
}

/// Remove the RT entries `pred` selects, keeping the cursor on the entry
/// it pointed at (or the one after it). Returns what was removed.
pub fn remove_sessions(t: &mut Token, mut pred: impl FnMut(&RtEntry) -> bool) -> Vec<RtEntry> {
    let mut removed = Vec::new();
    let mut i = 0;
    while i < t.sessions.len() {
        if pred(&t.sessions[i]) {
            removed.push(t.sessions.remove(i));
            if t.rt_next != NRT_PHASE && (i as u16) < t.rt_next {
                t.rt_next -= 1;
            }
        } else {
            i += 1;
        }
    }
    if t.rt_next != NRT_PHASE && t.rt_next as usize >= t.sessions.len() {
        // The entry under the cursor was the last: the RT phase is over.
        t.rt_next = NRT_PHASE;
        if let Some(n) = rr_at_or_after(t, t.nrt_resume) {
            t.to = n;
        }
    }
    removed
}

/// Put `id` on the dead list and drop its reservations (§2.4).
pub fn declare_dead(t: &mut Token, id: StationId) -> Vec<RtEntry> {
    match t.nodes.iter_mut().find(|n| n.id == id) {
        Some(n) => n.alive = false,
        None => {
            if t.has_room_for_node() {
                t.nodes.push(NodeEntry { id, alive: false });
            }
        }
    }
    remove_sessions(t, |e| e.session.sender == id)
}

/// Take `id` off the dead list, adding it if unknown (§2.4 join). `false`
/// when the node table is full.
pub fn mark_alive(t: &mut Token, id: StationId) -> bool {
    if let Some(n) = t.nodes.iter_mut().find(|n| n.id == id) {
        n.alive = true;
        return true;
    }
    if !t.has_room_for_node() {
        return false;
    }
    t.nodes.push(NodeEntry { id, alive: true });
    true
}

/// The token was meant for `dead`, which never passed it on: with `dead`
/// on the dead list and its sessions gone, point the cursor at whoever
/// must now hold it for the same purpose — the new first RT node for a
/// cycle start, the next RT entry, or the next live node round robin.
/// `None` when no RT session is left (the token is to be destroyed).
pub fn reroute_after_death(t: &mut Token, dead: StationId) -> Option<StationId> {
    let purpose = purpose(t);
    declare_dead(t, dead);
    if t.sessions.is_empty() {
        return None;
    }
    match purpose {
        Purpose::CycleStart => {
            t.to = head(t)?;
        }
        Purpose::Rt(_) => {
            // remove_sessions left rt_next on the entry after the dead
            // node's, or moved the cursor to the NRT phase.
            if t.rt_next != NRT_PHASE {
                let i = t.rt_next as usize;
                settle_rt(t, i);
            }
        }
        Purpose::Nrt => {
            t.to = rr_next(t, dead)?;
        }
    }
    Some(t.to)
}

/// What an NRT visit may do (§2.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// Send the first `frames` queued frames, charging `cost` (eq. 2).
    Send { frames: usize, cost: Duration },
    /// Nothing queued: pass on, charging the token overhead.
    Idle { cost: Duration },
    /// Not enough time left: return the token to the first RT node.
    Refuse,
}

/// Decide an NRT visit from the residual time and the lengths of the
/// queued frames (head first), under `policy`.
pub fn nrt_grant<I: IntoIterator<Item = usize>>(
    m: &TimingModel,
    policy: NrtPolicy,
    residual: Duration,
    queued: I,
) -> Grant {
    let limit = match policy {
        NrtPolicy::OnePacket => 1,
        NrtPolicy::AtMost(k) => k.max(1) as usize,
        NrtPolicy::AsManyAsFit => usize::MAX,
    };
    let (mut n, mut wire, mut cost) = (0usize, Duration::ZERO, Duration::ZERO);
    let mut any = false;
    let mut prev = None;
    for len in queued.into_iter().take(limit) {
        any = true;
        // Eq. 7 (TimingModel::transmission_time), one frame at a time.
        let w = wire + m.wire_time(len) + m.copy_stall(prev, len);
        let c = w + m.sw_overhead(n as u64 + 1) + m.t_token;
        if c > residual {
            break;
        }
        n += 1;
        wire = w;
        cost = c;
        prev = Some(len);
    }
    match (n, any) {
        (0, true) => Grant::Refuse,
        (0, false) if m.t_token <= residual => Grant::Idle { cost: m.t_token },
        (0, false) => Grant::Refuse,
        _ => Grant::Send { frames: n, cost },
    }
}

/// Why the token did not take a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmitError {
    Refused(Refusal),
    /// One more entry would not fit in a token frame.
    TokenFull,
}

/// Admission control at the token (§2.3, eq. 3): append `entry` if it
/// fits. Its first cycle is the next one.
pub fn admit(t: &mut Token, mut entry: RtEntry) -> Result<(), AdmitError> {
    admission(reserved(t), entry.tht, t.t_nrt, t.trt).map_err(AdmitError::Refused)?;
    if !t.has_room_for_session() {
        return Err(AdmitError::TokenFull);
    }
    entry.start_cycle = t.cycle.wrapping_add(1);
    t.sessions.push(entry);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rether::wire::TokenId;
    use crate::rether::SessionId;

    fn entry(sender: StationId, num: u16, tht: Duration) -> RtEntry {
        RtEntry {
            session: SessionId { sender, num },
            receiver: 99,
            bytes_per_trt: 1000,
            tht,
            start_cycle: 0,
        }
    }

    fn token(nodes: std::ops::RangeInclusive<StationId>, trt: Duration) -> Token {
        Token {
            sender: 1,
            to: 1,
            id: TokenId { epoch: 1, origin: 1 },
            seq: 0,
            cycle: 0,
            residual: trt,
            trt,
            t_nrt: Duration::from_millis(2),
            flags: FLAG_CYCLE_END,
            rt_next: NRT_PHASE,
            nrt_resume: 1,
            nodes: nodes.map(|id| NodeEntry { id, alive: true }).collect(),
            sessions: Vec::new(),
        }
    }

    /// Walk the token through `visits` visits with every node backlogged
    /// with frames of `frame` bytes, recording who holds it for an RT or
    /// NRT visit — exactly the decisions a station takes.
    fn walk(t: &mut Token, m: &TimingModel, frame: usize, visits: usize) -> Vec<StationId> {
        let mut seq = Vec::new();
        while seq.len() < visits {
            let me = t.to;
            match purpose(t) {
                Purpose::CycleStart => begin_cycle(t),
                Purpose::Rt(i) => {
                    seq.push(me);
                    t.residual -= t.sessions[i].tht;
                    after_rt(t, i);
                }
                Purpose::Nrt => {
                    seq.push(me);
                    match nrt_grant(m, NrtPolicy::OnePacket, t.residual, [frame, frame]) {
                        Grant::Send { cost, .. } | Grant::Idle { cost } => {
                            t.residual -= cost;
                            after_nrt(t, me);
                        }
                        Grant::Refuse => {
                            assert!(end_cycle(t, me));
                        }
                    }
                }
            }
        }
        seq
    }

    #[test]
    fn figure2_visit_sequence() {
        // Figure 2: eleven nodes, RT set {1, 3, 6}. With the time left
        // after the RT visits enough for six one-packet NRT visits and not
        // seven, the paper's sequence over two cycles comes out:
        // 1-3-6-1-2-3-4-5-6-7-1-3-6-7-8-9-10-11-1-2.
        let m = TimingModel::paper_1995();
        let frame = 1000;
        let h = m.tht_nrt([frame]);
        let rt = Duration::from_millis(5);
        let trt = rt + rt + rt + Duration(h.0 * 6 + h.0 / 2);
        let mut t = token(1..=11, trt);
        for s in [1, 3, 6] {
            t.sessions.push(entry(s, 0, rt));
        }
        let seq = walk(&mut t, &m, frame, 20);
        assert_eq!(
            seq,
            vec![1, 3, 6, 1, 2, 3, 4, 5, 6, 7, 1, 3, 6, 7, 8, 9, 10, 11, 1, 2]
        );
    }

    #[test]
    fn two_sessions_at_one_node_are_visited_twice() {
        let m = TimingModel::paper_1995();
        let rt = Duration::from_millis(3);
        let mut t = token(1..=3, Duration::from_millis(20));
        t.sessions = vec![entry(2, 0, rt), entry(1, 0, rt), entry(2, 1, rt)];
        let seq = walk(&mut t, &m, 1000, 3);
        assert_eq!(seq, vec![2, 1, 2]);
        assert_eq!(head_slots(&t), rt);
    }

    #[test]
    fn refused_node_is_first_next_cycle_and_rt_never_waits() {
        // Whatever the NRT load, every cycle begins with the RT visits.
        let m = TimingModel::paper_1995();
        let rt = Duration::from_millis(4);
        let mut t = token(1..=5, Duration::from_millis(12));
        t.sessions = vec![entry(4, 0, rt)];
        // 8 ms left after the RT visit: three one-packet visits of
        // 2.2674 ms fit, the fourth node is refused and goes first next time.
        let seq = walk(&mut t, &m, 1514, 15);
        assert_eq!(seq, vec![4, 1, 2, 3, 4, 4, 4, 5, 1, 2, 4, 2, 3, 4, 5]);
    }

    #[test]
    fn sessions_start_next_cycle() {
        let mut t = token(1..=3, Duration::from_millis(30));
        t.cycle = 5;
        let e = entry(2, 0, Duration::from_millis(5));
        admit(&mut t, e).unwrap();
        assert_eq!(t.sessions[0].start_cycle, 6);
        // Mid-cycle the new entry is not visited: the cursor skips it.
        t.flags = 0;
        t.rt_next = NRT_PHASE;
        settle_rt(&mut t, 0);
        assert_eq!(t.rt_next, NRT_PHASE);
        begin_cycle(&mut t);
        assert_eq!(purpose(&t), Purpose::Rt(0));
        assert_eq!(t.to, 2);
    }

    #[test]
    fn admission_is_eq3_at_the_token() {
        let mut t = token(1..=3, Duration::from_millis(30));
        t.t_nrt = Duration::from_millis(10);
        admit(&mut t, entry(1, 0, Duration::from_millis(12))).unwrap();
        admit(&mut t, entry(2, 0, Duration::from_millis(8))).unwrap();
        let r = admit(&mut t, entry(3, 0, Duration(1))).unwrap_err();
        assert_eq!(
            r,
            AdmitError::Refused(Refusal {
                reserved: Duration::from_millis(20),
                requested: Duration(1),
                t_nrt: Duration::from_millis(10),
                trt: Duration::from_millis(30),
            })
        );
        assert_eq!(t.sessions.len(), 2);
    }

    #[test]
    fn dead_successor_is_skipped_for_every_purpose() {
        let rt = Duration::from_millis(2);
        let mut t = token(1..=6, Duration::from_millis(30));
        t.sessions = vec![entry(2, 0, rt), entry(4, 0, rt), entry(5, 0, rt)];
        // RT visit of 4 fails: next is 5's RT visit.
        t.flags = 0;
        t.rt_next = 1;
        t.to = 4;
        assert_eq!(reroute_after_death(&mut t, 4), Some(5));
        assert_eq!(purpose(&t), Purpose::Rt(1));
        assert!(!is_alive(&t, 4));
        assert_eq!(t.sessions.len(), 2);
        // NRT visit of 3 fails: 5 is next (4 is dead).
        t.rt_next = NRT_PHASE;
        t.to = 3;
        assert_eq!(reroute_after_death(&mut t, 3), Some(5));
        // Cycle start at the head 2 fails: 5 is the new head.
        t.flags = FLAG_CYCLE_END;
        t.to = 2;
        assert_eq!(reroute_after_death(&mut t, 2), Some(5));
        assert_eq!(head(&t), Some(5));
        // The last RT node dies: nothing left, the token is destroyed.
        assert_eq!(reroute_after_death(&mut t, 5), None);
        // A node comes back.
        assert!(mark_alive(&mut t, 4));
        assert!(is_alive(&t, 4));
    }

    #[test]
    fn removing_the_entry_under_the_cursor_moves_on() {
        let rt = Duration::from_millis(2);
        let mut t = token(1..=6, Duration::from_millis(30));
        t.sessions = vec![entry(2, 0, rt), entry(4, 0, rt), entry(5, 0, rt)];
        t.flags = 0;
        t.rt_next = 2;
        remove_sessions(&mut t, |e| e.session.sender == 2);
        assert_eq!(t.rt_next, 1, "still the entry of station 5");
        remove_sessions(&mut t, |e| e.session.sender == 5);
        assert_eq!(t.rt_next, NRT_PHASE);
    }

    #[test]
    fn grants_follow_the_policy() {
        let m = TimingModel::paper_1995();
        let one = m.tht_nrt([1000]);
        let two = m.tht_nrt([1000, 1000]);
        let q = [1000, 1000, 1000];
        assert_eq!(
            nrt_grant(&m, NrtPolicy::OnePacket, Duration::from_millis(30), q),
            Grant::Send { frames: 1, cost: one }
        );
        assert_eq!(
            nrt_grant(&m, NrtPolicy::AtMost(2), Duration::from_millis(30), q),
            Grant::Send { frames: 2, cost: two }
        );
        assert_eq!(
            nrt_grant(&m, NrtPolicy::AsManyAsFit, two, q),
            Grant::Send { frames: 2, cost: two }
        );
        assert_eq!(
            nrt_grant(&m, NrtPolicy::AsManyAsFit, one - Duration(1), q),
            Grant::Refuse
        );
        assert_eq!(
            nrt_grant(&m, NrtPolicy::OnePacket, m.t_token, []),
            Grant::Idle { cost: m.t_token }
        );
        assert_eq!(
            nrt_grant(&m, NrtPolicy::OnePacket, m.t_token - Duration(1), []),
            Grant::Refuse
        );
    }

    proptest::proptest! {
        /// The one-pass standing is what the station computed before:
        /// live as `is_alive` says, and the claim rank its position in the
        /// sorted live list with the addressee left out. Any node table
        /// (out of order, dead entries, repeated ids), any addressee, any
        /// station asking.
        #[test]
        fn standing_is_liveness_and_position_among_live_stations_but_the_addressee(
            nodes in proptest::collection::vec((0u16..16, proptest::bool::ANY), 0..24),
            to in 0u16..16,
            me in 0u16..16,
        ) {
            let mut t = token(1..=1, Duration::from_millis(30));
            t.nodes = nodes.iter().map(|&(id, alive)| NodeEntry { id, alive }).collect();
            t.to = to;
            let sorted = alive(&t)
                .into_iter()
                .filter(|&id| id != t.to)
                .position(|id| id == me)
                .map(|p| p as u64);
            proptest::prop_assert_eq!(standing(&t, me), (is_alive(&t, me), sorted));
        }
    }
}
