//! RETHER frames on the wire: the control frames of §2.2 and §2.4 of
//! Venkatramani & Chiueh (Switch-to-RETHER, its acknowledgement, the token,
//! Switch-to-CSMA, the boot-time join broadcast), the token acknowledgement
//! qosnet adds for failure detection, and the real-time data frames of
//! §3.2 (per-frame sequence numbers for reassembly).
//!
//! Every frame is an Ethernet II frame with EtherType 0x88B5 (IEEE 802
//! "local experimental"), a one-byte version, a one-byte type and the
//! sender's station id, all big-endian. `docs/rether-wire.md` documents
//! every byte. Tokens and acknowledgements go to [`GROUP_MAC`], a
//! locally administered multicast address, so that a node's predecessor
//! hears it pass the token on — the piggybacked acknowledgement of §2.4;
//! switch messages and joins go to the broadcast address, as the paper
//! says.
//!
//! Parsing never panics and never trusts a length or a count: every
//! refusal is a [`WireError`] whose [`name`](WireError::name) the station
//! counts. Frames may carry Ethernet padding after their body.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::fmt;

use crate::time::Duration;
use crate::wire::{MacAddr, ETH_HDR, ETH_MIN_NO_FCS};

use super::{SessionId, StationId, NO_STATION};

/// IEEE 802 local experimental EtherType 1 (IEEE Std 802-2014 §9.2.2).
pub const ETHERTYPE_RETHER: u16 = 0x88B5;
/// The format version this code writes and accepts.
pub const VERSION: u8 = 1;
/// Group address of RETHER tokens and acknowledgements: multicast (bit 0
/// of the first octet) and locally administered (bit 1).
pub const GROUP_MAC: MacAddr = MacAddr([0x03, 0x00, 0x88, 0xb5, 0x00, 0x01]);
/// Largest Ethernet payload (no VLAN tag).
pub const MTU: usize = 1500;
/// Common header after the Ethernet header: version, type, sender.
pub const HDR: usize = 4;
/// Token body before its node and session tables.
pub const TOKEN_FIXED: usize = 52;
/// One node-table entry: id and state.
pub const NODE_ENTRY: usize = 3;
/// One RT-set entry: session, receiver, reservation, THT, first cycle.
pub const SESSION_ENTRY: usize = 22;
/// RT data header (common header included) before the payload.
pub const RT_HDR: usize = 26;
/// Most payload one RT data frame carries.
pub const RT_PAYLOAD_MAX: usize = MTU - RT_HDR;
/// `rt_next` value meaning "the RT phase of this cycle is over".
pub const NRT_PHASE: u16 = 0xFFFF;
/// Token flag: this pass returns the token to the first RT node, which
/// starts a new cycle (§2.2.3).
pub const FLAG_CYCLE_END: u8 = 0x01;
/// Token flag: the token was regenerated after a silence (beyond the
/// paper, §8's "token monitoring and regeneration").
pub const FLAG_REGENERATED: u8 = 0x02;
const KNOWN_FLAGS: u8 = FLAG_CYCLE_END | FLAG_REGENERATED;
/// Most entries a node table may hold (its count is one byte).
pub const MAX_NODES: usize = 255;

/// Frame types (byte 1 of the RETHER header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameType {
    SwitchToRether = 1,
    SwitchAck = 2,
    Token = 3,
    TokenAck = 4,
    SwitchToCsma = 5,
    Join = 6,
    RtData = 7,
}

impl FrameType {
    fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => FrameType::SwitchToRether,
            2 => FrameType::SwitchAck,
            3 => FrameType::Token,
            4 => FrameType::TokenAck,
            5 => FrameType::SwitchToCsma,
            6 => FrameType::Join,
            7 => FrameType::RtData,
            _ => return None,
        })
    }
}

/// Why a frame was refused. Each reason is a separate counter
/// (`malformed_<name>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WireError {
    /// Shorter than its header, its counts or its payload length say.
    Truncated,
    /// Not EtherType 0x88B5.
    NotRether,
    BadVersion,
    UnknownType,
    /// A station id field holds the reserved value 0xFFFF.
    BadStation,
    /// A node or session appears twice in a token.
    DuplicateEntry,
    /// `rt_next` points past the RT set.
    BadCursor,
    /// A time field is zero where it must not be, or exceeds TRT.
    BadTime,
    /// Unknown token flag bits.
    BadFlags,
    /// Node state byte is neither alive nor dead.
    BadNodeState,
    /// A reservation of zero bytes.
    BadReservation,
    /// Fragment number not below the count, zero count, or payload
    /// outside the unit.
    BadFragment,
    /// (Building) the frame would not fit in one Ethernet MTU.
    TooLarge,
}

impl WireError {
    pub const ALL: [WireError; 13] = [
        WireError::Truncated,
        WireError::NotRether,
        WireError::BadVersion,
        WireError::UnknownType,
        WireError::BadStation,
        WireError::DuplicateEntry,
        WireError::BadCursor,
        WireError::BadTime,
        WireError::BadFlags,
        WireError::BadNodeState,
        WireError::BadReservation,
        WireError::BadFragment,
        WireError::TooLarge,
    ];
    pub fn name(self) -> &'static str {
        match self {
            WireError::Truncated => "truncated",
            WireError::NotRether => "not_rether",
            WireError::BadVersion => "bad_version",
            WireError::UnknownType => "unknown_type",
            WireError::BadStation => "bad_station",
            WireError::DuplicateEntry => "duplicate_entry",
            WireError::BadCursor => "bad_cursor",
            WireError::BadTime => "bad_time",
            WireError::BadFlags => "bad_flags",
            WireError::BadNodeState => "bad_node_state",
            WireError::BadReservation => "bad_reservation",
            WireError::BadFragment => "bad_fragment",
            WireError::TooLarge => "too_large",
        }
    }
    /// Index into a per-reason counter array.
    pub fn index(self) -> usize {
        WireError::ALL.iter().position(|e| *e == self).unwrap_or(0)
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which token a frame belongs to. Every creation, regeneration or
/// reconfiguration after a failure starts a new epoch; two stations that
/// regenerate from the same copy start the same epoch and the lower
/// origin id wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TokenId {
    pub epoch: u32,
    pub origin: StationId,
}

/// A token's place in the total order used to find duplicates: a later
/// epoch is newer; in one epoch the lower origin is newer (it wins); in
/// one lineage a higher hop sequence number is newer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stamp {
    pub id: TokenId,
    pub seq: u32,
}

impl Ord for Stamp {
    fn cmp(&self, o: &Self) -> Ordering {
        self.id
            .epoch
            .cmp(&o.id.epoch)
            .then(o.id.origin.cmp(&self.id.origin))
            .then(self.seq.cmp(&o.seq))
    }
}
impl PartialOrd for Stamp {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// One station in the token's node table (§2.2.3 "network state
/// information"). The dead-node list of the paper is the entries with
/// `alive == false`; carrying the live ones too lets nodes that were not
/// configured join (§2.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    pub id: StationId,
    pub alive: bool,
}

/// One session of the RT set (§2.2.3 "RT-set information"). The owner
/// computed `tht` with its own overhead constants, so admission stays
/// right on heterogeneous networks (§4.2, last paragraph).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtEntry {
    pub session: SessionId,
    pub receiver: StationId,
    /// Reservation: bytes of data per TRT.
    pub bytes_per_trt: u32,
    /// THT_RT of eq. 1.
    pub tht: Duration,
    /// The first cycle in which the token visits this session (§2.3: a
    /// session admitted in cycle c sends from cycle c + 1).
    pub start_cycle: u32,
}

/// The token (§2.2.3): the soft clock, the RT set and the node table,
/// plus where it is going and the identity failure handling needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The station that sent this copy.
    pub sender: StationId,
    /// The station that is to hold it next.
    pub to: StationId,
    pub id: TokenId,
    /// Hop sequence number in this epoch.
    pub seq: u32,
    /// Cycle number, incremented by the first RT node at each cycle start.
    pub cycle: u32,
    /// The paper's ResidualTime: what is left of this cycle's TRT.
    pub residual: Duration,
    pub trt: Duration,
    /// T_NRT of eq. 3.
    pub t_nrt: Duration,
    pub flags: u8,
    /// Index of the RT entry visited by this pass, or [`NRT_PHASE`].
    pub rt_next: u16,
    /// The NRT node that is first in the next cycle's round robin.
    pub nrt_resume: StationId,
    pub nodes: Vec<NodeEntry>,
    pub sessions: Vec<RtEntry>,
}

impl Token {
    pub fn stamp(&self) -> Stamp {
        Stamp {
            id: self.id,
            seq: self.seq,
        }
    }
    pub fn cycle_end(&self) -> bool {
        self.flags & FLAG_CYCLE_END != 0
    }
    /// Bytes after the Ethernet header.
    pub fn body_len(&self) -> usize {
        TOKEN_FIXED + self.nodes.len() * NODE_ENTRY + self.sessions.len() * SESSION_ENTRY
    }
    /// Whole frame without FCS (Ethernet minimum applied).
    pub fn frame_len(&self) -> usize {
        (ETH_HDR + self.body_len()).max(ETH_MIN_NO_FCS)
    }
    /// Whether one more RT entry still fits in one frame.
    pub fn has_room_for_session(&self) -> bool {
        self.body_len() + SESSION_ENTRY <= MTU
    }
    pub fn has_room_for_node(&self) -> bool {
        self.nodes.len() < MAX_NODES && self.body_len() + NODE_ENTRY <= MTU
    }
}

/// Switch-to-RETHER (§2.2.2), broadcast by an initiator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchToRether {
    pub sender: StationId,
    /// The initiator's attempt number; retries repeat it.
    pub switch_seq: u32,
    /// Stations whose acknowledgements the initiator already has (empty
    /// in the first message): on a retry only the others answer, so the
    /// retry does not set every NIC contending again.
    pub acked: Vec<StationId>,
}

/// Acknowledgement of a Switch-to-RETHER, sent once the NIC has drained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchAck {
    pub sender: StationId,
    pub initiator: StationId,
    pub switch_seq: u32,
}

/// "I already have (or had) this token": the answer to a retransmitted
/// token, so the retransmitting predecessor does not declare a live
/// successor dead when only the successor's pass was lost on its way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenAck {
    pub sender: StationId,
    pub stamp: Stamp,
}

/// Switch-to-CSMA (§2.2.4): the token `id` is destroyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchToCsma {
    pub sender: StationId,
    pub id: TokenId,
}

/// The boot-time broadcast of §2.4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Join {
    pub sender: StationId,
}

/// One fragment of a real-time unit (§3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtData<'a> {
    pub sender: StationId,
    pub session_num: u16,
    pub receiver: StationId,
    /// Unit (application frame) number in the session.
    pub unit: u32,
    pub frag: u16,
    pub frag_count: u16,
    /// Bytes in the whole unit.
    pub unit_len: u32,
    /// Where this fragment's payload goes in the unit.
    pub offset: u32,
    pub payload: &'a [u8],
}

impl RtData<'_> {
    pub fn session(&self) -> SessionId {
        SessionId {
            sender: self.sender,
            num: self.session_num,
        }
    }
}

/// Any RETHER frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    SwitchToRether(SwitchToRether),
    SwitchAck(SwitchAck),
    Token(Token),
    TokenAck(TokenAck),
    SwitchToCsma(SwitchToCsma),
    Join(Join),
    RtData(RtData<'a>),
}

impl Frame<'_> {
    pub fn kind(&self) -> FrameType {
        match self {
            Frame::SwitchToRether(_) => FrameType::SwitchToRether,
            Frame::SwitchAck(_) => FrameType::SwitchAck,
            Frame::Token(_) => FrameType::Token,
            Frame::TokenAck(_) => FrameType::TokenAck,
            Frame::SwitchToCsma(_) => FrameType::SwitchToCsma,
            Frame::Join(_) => FrameType::Join,
            Frame::RtData(_) => FrameType::RtData,
        }
    }
    pub fn sender(&self) -> StationId {
        match self {
            Frame::SwitchToRether(f) => f.sender,
            Frame::SwitchAck(f) => f.sender,
            Frame::Token(f) => f.sender,
            Frame::TokenAck(f) => f.sender,
            Frame::SwitchToCsma(f) => f.sender,
            Frame::Join(f) => f.sender,
            Frame::RtData(f) => f.sender,
        }
    }
}

/// Whether an Ethernet frame carries the RETHER EtherType.
pub fn is_rether(frame: &[u8]) -> bool {
    frame.len() >= ETH_HDR && u16::from_be_bytes([frame[12], frame[13]]) == ETHERTYPE_RETHER
}

/// A bounds-checked big-endian reader: every read past the end is
/// [`WireError::Truncated`].
struct Rd<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).ok_or(WireError::Truncated)?;
        let s = self.b.get(self.at..end).ok_or(WireError::Truncated)?;
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        let s = self.take(2)?;
        Ok(u16::from_be_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        let s = self.take(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_be_bytes(a))
    }
    fn station(&mut self) -> Result<StationId, WireError> {
        let id = self.u16()?;
        if id == NO_STATION {
            return Err(WireError::BadStation);
        }
        Ok(id)
    }
}

/// Parse a whole Ethernet frame (no FCS) as a RETHER frame.
pub fn parse(frame: &[u8]) -> Result<Frame<'_>, WireError> {
    if frame.len() < ETH_HDR {
        return Err(WireError::Truncated);
    }
    if !is_rether(frame) {
        return Err(WireError::NotRether);
    }
    let mut r = Rd {
        b: frame,
        at: ETH_HDR,
    };
    if r.u8()? != VERSION {
        return Err(WireError::BadVersion);
    }
    let kind = FrameType::from_u8(r.u8()?).ok_or(WireError::UnknownType)?;
    let sender = r.station()?;
    Ok(match kind {
        FrameType::SwitchToRether => {
            let switch_seq = r.u32()?;
            let n = r.u8()? as usize;
            if r.b.len().saturating_sub(r.at) < 2 * n {
                return Err(WireError::Truncated);
            }
            let mut acked = Vec::with_capacity(n);
            for _ in 0..n {
                acked.push(r.station()?);
            }
            Frame::SwitchToRether(SwitchToRether {
                sender,
                switch_seq,
                acked,
            })
        }
        FrameType::SwitchAck => Frame::SwitchAck(SwitchAck {
            sender,
            initiator: r.station()?,
            switch_seq: r.u32()?,
        }),
        FrameType::TokenAck => {
            let origin = r.station()?;
            let epoch = r.u32()?;
            let seq = r.u32()?;
            Frame::TokenAck(TokenAck {
                sender,
                stamp: Stamp {
                    id: TokenId { epoch, origin },
                    seq,
                },
            })
        }
        FrameType::SwitchToCsma => {
            let origin = r.station()?;
            let epoch = r.u32()?;
            Frame::SwitchToCsma(SwitchToCsma {
                sender,
                id: TokenId { epoch, origin },
            })
        }
        FrameType::Join => Frame::Join(Join { sender }),
        FrameType::Token => Frame::Token(parse_token_remembered(&mut r, sender)?),
        FrameType::RtData => Frame::RtData(parse_rt(&mut r, sender)?),
    })
}

thread_local! {
    /// The last token frame parsed on this thread (its bytes after the
    /// Ethernet header) and what it parsed to.
    static LAST_TOKEN: RefCell<Option<(Vec<u8>, Token)>> = const { RefCell::new(None) };
}

/// [`parse_token`], remembering the last token parsed on this thread.
/// On a segment every station parses every token pass, and in the
/// simulator they do it one after another on one thread: the second to
/// the N-th parse of a pass are a comparison of its bytes and a copy,
/// instead of reading and checking a node table of up to 255 entries.
/// A pure function remembered: the result is the same either way.
fn parse_token_remembered(r: &mut Rd<'_>, sender: StationId) -> Result<Token, WireError> {
    let body = &r.b[ETH_HDR..];
    let hit = LAST_TOKEN.with_borrow(|c| {
        c.as_ref()
            .filter(|(bytes, _)| bytes.as_slice() == body)
            .map(|(_, t)| t.clone())
    });
    if let Some(t) = hit {
        return Ok(t);
    }
    let t = parse_token(r, sender)?;
    LAST_TOKEN.with_borrow_mut(|c| match c {
        Some((bytes, last)) => {
            bytes.clear();
            bytes.extend_from_slice(body);
            last.clone_from(&t);
        }
        None => *c = Some((body.to_vec(), t.clone())),
    });
    Ok(t)
}

fn parse_token(r: &mut Rd<'_>, sender: StationId) -> Result<Token, WireError> {
    let to = r.station()?;
    let origin = r.station()?;
    let epoch = r.u32()?;
    let seq = r.u32()?;
    let cycle = r.u32()?;
    let residual = Duration(r.u64()?);
    let trt = Duration(r.u64()?);
    let t_nrt = Duration(r.u64()?);
    let flags = r.u8()?;
    let n_nodes = r.u8()? as usize;
    let rt_next = r.u16()?;
    let nrt_resume = r.station()?;
    let n_sessions = r.u16()? as usize;
    if flags & !KNOWN_FLAGS != 0 {
        return Err(WireError::BadFlags);
    }
    if trt == Duration::ZERO || residual > trt || t_nrt > trt {
        return Err(WireError::BadTime);
    }
    // Counts are checked against the bytes present before anything is
    // allocated for them.
    let need = n_nodes * NODE_ENTRY + n_sessions * SESSION_ENTRY;
    if r.b.len().saturating_sub(r.at) < need {
        return Err(WireError::Truncated);
    }
    let nodes = parse_nodes(r, n_nodes)?;
    let mut sessions: Vec<RtEntry> = Vec::with_capacity(n_sessions);
    for _ in 0..n_sessions {
        let s_sender = r.station()?;
        let num = r.u16()?;
        let receiver = r.station()?;
        let bytes_per_trt = r.u32()?;
        let tht = Duration(r.u64()?);
        let start_cycle = r.u32()?;
        if bytes_per_trt == 0 {
            return Err(WireError::BadReservation);
        }
        if tht == Duration::ZERO || tht > trt {
            return Err(WireError::BadTime);
        }
        let session = SessionId {
            sender: s_sender,
            num,
        };
        if sessions.iter().any(|e| e.session == session) {
            return Err(WireError::DuplicateEntry);
        }
        sessions.push(RtEntry {
            session,
            receiver,
            bytes_per_trt,
            tht,
            start_cycle,
        });
    }
    if rt_next != NRT_PHASE && rt_next as usize >= n_sessions {
        return Err(WireError::BadCursor);
    }
    Ok(Token {
        sender,
        to,
        id: TokenId { epoch, origin },
        seq,
        cycle,
        residual,
        trt,
        t_nrt,
        flags,
        rt_next,
        nrt_resume,
        nodes,
        sessions,
    })
}

/// The node table. Every station parses every token it hears, so this
/// runs once per station per hop: checking each entry against all before
/// it made a hop cost O(N²) per station, O(N³) per hop on a segment of N
/// stations. Entries are now read in one pass over their bytes, noting
/// whether the ids ascend (tokens built here usually list them so); only
/// a table that does not is sorted to look for a repeated id. Refusals
/// are those of an entry-by-entry check: an entry's own fault (reserved
/// id, then state) first, and a duplicate among the entries read before a
/// malformed one wins over it.
fn parse_nodes(r: &mut Rd<'_>, n_nodes: usize) -> Result<Vec<NodeEntry>, WireError> {
    let bytes = r.take(n_nodes * NODE_ENTRY)?;
    let mut nodes: Vec<NodeEntry> = Vec::with_capacity(n_nodes);
    let mut ascending = true;
    for e in bytes.chunks_exact(NODE_ENTRY) {
        let id = u16::from_be_bytes([e[0], e[1]]);
        let alive = match e[2] {
            _ if id == NO_STATION => Err(WireError::BadStation),
            0 => Ok(true),
            1 => Ok(false),
            _ => Err(WireError::BadNodeState),
        };
        let alive = match alive {
            Ok(a) => a,
            Err(_) if !ascending && has_duplicate_id(&nodes) => return Err(WireError::DuplicateEntry),
            Err(e) => return Err(e),
        };
        ascending &= nodes.last().is_none_or(|p| p.id < id);
        nodes.push(NodeEntry { id, alive });
    }
    if !ascending && has_duplicate_id(&nodes) {
        return Err(WireError::DuplicateEntry);
    }
    Ok(nodes)
}

/// Whether two entries of a node table share an id (n ≤ 255, a one-byte
/// count, so the sort is short).
fn has_duplicate_id(nodes: &[NodeEntry]) -> bool {
    let mut ids: Vec<StationId> = nodes.iter().map(|n| n.id).collect();
    ids.sort_unstable();
    ids.windows(2).any(|w| w[0] == w[1])
}

fn parse_rt<'a>(r: &mut Rd<'a>, sender: StationId) -> Result<RtData<'a>, WireError> {
    let session_num = r.u16()?;
    let receiver = r.station()?;
    let unit = r.u32()?;
    let frag = r.u16()?;
    let frag_count = r.u16()?;
    let unit_len = r.u32()?;
    let offset = r.u32()?;
    let len = r.u16()? as usize;
    let payload = r.take(len)?;
    if frag_count == 0 || frag >= frag_count {
        return Err(WireError::BadFragment);
    }
    if (offset as u64) + (len as u64) > unit_len as u64 {
        return Err(WireError::BadFragment);
    }
    Ok(RtData {
        sender,
        session_num,
        receiver,
        unit,
        frag,
        frag_count,
        unit_len,
        offset,
        payload,
    })
}

/// Writes the Ethernet and RETHER headers.
fn header(src: MacAddr, dst: MacAddr, kind: FrameType, sender: StationId, body: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity((ETH_HDR + body).max(ETH_MIN_NO_FCS));
    b.extend_from_slice(&dst.0);
    b.extend_from_slice(&src.0);
    b.extend_from_slice(&ETHERTYPE_RETHER.to_be_bytes());
    b.push(VERSION);
    b.push(kind as u8);
    b.extend_from_slice(&sender.to_be_bytes());
    b
}

/// Pads to the Ethernet minimum, as a NIC does.
fn finish(mut b: Vec<u8>) -> Vec<u8> {
    if b.len() < ETH_MIN_NO_FCS {
        b.resize(ETH_MIN_NO_FCS, 0);
    }
    b
}

/// Build the Ethernet frame of `f` from `src` to `dst`. Refuses only a
/// token or data frame larger than one MTU.
pub fn build(src: MacAddr, dst: MacAddr, f: &Frame<'_>) -> Result<Vec<u8>, WireError> {
    let b = match f {
        Frame::SwitchToRether(s) => {
            if s.acked.len() > MAX_NODES {
                return Err(WireError::TooLarge);
            }
            let mut b = header(
                src,
                dst,
                FrameType::SwitchToRether,
                s.sender,
                9 + 2 * s.acked.len(),
            );
            b.extend_from_slice(&s.switch_seq.to_be_bytes());
            b.push(s.acked.len() as u8);
            for id in &s.acked {
                b.extend_from_slice(&id.to_be_bytes());
            }
            b
        }
        Frame::SwitchAck(a) => {
            let mut b = header(src, dst, FrameType::SwitchAck, a.sender, 10);
            b.extend_from_slice(&a.initiator.to_be_bytes());
            b.extend_from_slice(&a.switch_seq.to_be_bytes());
            b
        }
        Frame::TokenAck(a) => {
            let mut b = header(src, dst, FrameType::TokenAck, a.sender, 14);
            b.extend_from_slice(&a.stamp.id.origin.to_be_bytes());
            b.extend_from_slice(&a.stamp.id.epoch.to_be_bytes());
            b.extend_from_slice(&a.stamp.seq.to_be_bytes());
            b
        }
        Frame::SwitchToCsma(s) => {
            let mut b = header(src, dst, FrameType::SwitchToCsma, s.sender, 10);
            b.extend_from_slice(&s.id.origin.to_be_bytes());
            b.extend_from_slice(&s.id.epoch.to_be_bytes());
            b
        }
        Frame::Join(j) => header(src, dst, FrameType::Join, j.sender, 4),
        Frame::Token(t) => build_token(src, dst, t)?,
        Frame::RtData(d) => {
            if d.payload.len() > RT_PAYLOAD_MAX {
                return Err(WireError::TooLarge);
            }
            let mut b = header(src, dst, FrameType::RtData, d.sender, RT_HDR + d.payload.len());
            b.extend_from_slice(&d.session_num.to_be_bytes());
            b.extend_from_slice(&d.receiver.to_be_bytes());
            b.extend_from_slice(&d.unit.to_be_bytes());
            b.extend_from_slice(&d.frag.to_be_bytes());
            b.extend_from_slice(&d.frag_count.to_be_bytes());
            b.extend_from_slice(&d.unit_len.to_be_bytes());
            b.extend_from_slice(&d.offset.to_be_bytes());
            b.extend_from_slice(&(d.payload.len() as u16).to_be_bytes());
            b.extend_from_slice(d.payload);
            b
        }
    };
    Ok(finish(b))
}

fn build_token(src: MacAddr, dst: MacAddr, t: &Token) -> Result<Vec<u8>, WireError> {
    if t.body_len() > MTU || t.nodes.len() > MAX_NODES || t.sessions.len() > u16::MAX as usize {
        return Err(WireError::TooLarge);
    }
    let mut b = header(src, dst, FrameType::Token, t.sender, t.body_len());
    b.extend_from_slice(&t.to.to_be_bytes());
    b.extend_from_slice(&t.id.origin.to_be_bytes());
    b.extend_from_slice(&t.id.epoch.to_be_bytes());
    b.extend_from_slice(&t.seq.to_be_bytes());
    b.extend_from_slice(&t.cycle.to_be_bytes());
    b.extend_from_slice(&t.residual.0.to_be_bytes());
    b.extend_from_slice(&t.trt.0.to_be_bytes());
    b.extend_from_slice(&t.t_nrt.0.to_be_bytes());
    b.push(t.flags);
    b.push(t.nodes.len() as u8);
    b.extend_from_slice(&t.rt_next.to_be_bytes());
    b.extend_from_slice(&t.nrt_resume.to_be_bytes());
    b.extend_from_slice(&(t.sessions.len() as u16).to_be_bytes());
    for n in &t.nodes {
        b.extend_from_slice(&n.id.to_be_bytes());
        b.push(if n.alive { 0 } else { 1 });
    }
    for e in &t.sessions {
        b.extend_from_slice(&e.session.sender.to_be_bytes());
        b.extend_from_slice(&e.session.num.to_be_bytes());
        b.extend_from_slice(&e.receiver.to_be_bytes());
        b.extend_from_slice(&e.bytes_per_trt.to_be_bytes());
        b.extend_from_slice(&e.tht.0.to_be_bytes());
        b.extend_from_slice(&e.start_cycle.to_be_bytes());
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mac(i: u32) -> MacAddr {
        MacAddr::local(i)
    }

    pub(crate) fn sample_token() -> Token {
        Token {
            sender: 3,
            to: 6,
            id: TokenId { epoch: 2, origin: 1 },
            seq: 41,
            cycle: 7,
            residual: Duration::from_micros(12_500),
            trt: Duration(33_333_333),
            t_nrt: Duration::from_micros(2_900),
            flags: 0,
            rt_next: 2,
            nrt_resume: 7,
            nodes: (1..=4).map(|id| NodeEntry { id, alive: id != 4 }).collect(),
            sessions: vec![
                RtEntry {
                    session: SessionId { sender: 1, num: 0 },
                    receiver: 2,
                    bytes_per_trt: 6250,
                    tht: Duration::from_micros(6_853),
                    start_cycle: 3,
                },
                RtEntry {
                    session: SessionId { sender: 3, num: 0 },
                    receiver: 4,
                    bytes_per_trt: 6250,
                    tht: Duration::from_micros(6_853),
                    start_cycle: 5,
                },
                RtEntry {
                    session: SessionId { sender: 6, num: 1 },
                    receiver: 1,
                    bytes_per_trt: 1000,
                    tht: Duration::from_micros(2_000),
                    start_cycle: 8,
                },
            ],
        }
    }

    #[test]
    fn every_frame_roundtrips() {
        let payload: Vec<u8> = (0..200u8).collect();
        let frames = vec![
            Frame::SwitchToRether(SwitchToRether {
                sender: 3,
                switch_seq: 9,
                acked: Vec::new(),
            }),
            Frame::SwitchToRether(SwitchToRether {
                sender: 3,
                switch_seq: 9,
                acked: vec![1, 2, 7],
            }),
            Frame::SwitchAck(SwitchAck {
                sender: 2,
                initiator: 3,
                switch_seq: 9,
            }),
            Frame::Token(sample_token()),
            Frame::TokenAck(TokenAck {
                sender: 6,
                stamp: sample_token().stamp(),
            }),
            Frame::SwitchToCsma(SwitchToCsma {
                sender: 1,
                id: TokenId { epoch: 5, origin: 2 },
            }),
            Frame::Join(Join { sender: 12 }),
            Frame::RtData(RtData {
                sender: 1,
                session_num: 0,
                receiver: 2,
                unit: 77,
                frag: 1,
                frag_count: 5,
                unit_len: 6250,
                offset: 1474,
                payload: &payload,
            }),
        ];
        for f in &frames {
            let b = build(mac(1), GROUP_MAC, f).unwrap();
            assert!(b.len() >= ETH_MIN_NO_FCS);
            assert_eq!(&parse(&b).unwrap(), f, "{:?}", f.kind());
        }
    }

    #[test]
    fn token_layout_matches_the_documentation() {
        // docs/rether-wire.md lists these offsets; keep them in step.
        let t = sample_token();
        let b = build(mac(3), GROUP_MAC, &Frame::Token(t.clone())).unwrap();
        assert_eq!(
            b.len(),
            ETH_HDR + TOKEN_FIXED + 4 * NODE_ENTRY + 3 * SESSION_ENTRY
        );
        assert_eq!(t.frame_len(), b.len());
        let body = &b[ETH_HDR..];
        assert_eq!(body[0], VERSION);
        assert_eq!(body[1], FrameType::Token as u8);
        assert_eq!(&body[2..4], &3u16.to_be_bytes()); // sender
        assert_eq!(&body[4..6], &6u16.to_be_bytes()); // to
        assert_eq!(&body[6..8], &1u16.to_be_bytes()); // origin
        assert_eq!(&body[8..12], &2u32.to_be_bytes()); // epoch
        assert_eq!(&body[12..16], &41u32.to_be_bytes()); // seq
        assert_eq!(&body[16..20], &7u32.to_be_bytes()); // cycle
        assert_eq!(&body[20..28], &12_500_000u64.to_be_bytes()); // residual
        assert_eq!(&body[28..36], &33_333_333u64.to_be_bytes()); // trt
        assert_eq!(&body[36..44], &2_900_000u64.to_be_bytes()); // t_nrt
        assert_eq!(body[44], 0); // flags
        assert_eq!(body[45], 4); // node count
        assert_eq!(&body[46..48], &2u16.to_be_bytes()); // rt_next
        assert_eq!(&body[48..50], &7u16.to_be_bytes()); // nrt_resume
        assert_eq!(&body[50..52], &3u16.to_be_bytes()); // session count
        assert_eq!(&body[52..55], &[0, 1, 0]); // node 1 alive
        assert_eq!(&body[61..64], &[0, 4, 1]); // node 4 dead
        let e = &body[64..64 + SESSION_ENTRY];
        assert_eq!(&e[0..6], &[0, 1, 0, 0, 0, 2]);
        assert_eq!(&e[6..10], &6250u32.to_be_bytes());
        assert_eq!(&e[10..18], &6_853_000u64.to_be_bytes());
        assert_eq!(&e[18..22], &3u32.to_be_bytes());
    }

    #[test]
    fn short_frames_are_padded_and_still_parse() {
        let b = build(mac(1), MacAddr::BROADCAST, &Frame::Join(Join { sender: 4 })).unwrap();
        assert_eq!(b.len(), ETH_MIN_NO_FCS);
        assert_eq!(parse(&b).unwrap(), Frame::Join(Join { sender: 4 }));
    }

    #[test]
    fn refusals_name_their_reason() {
        let good = build(mac(1), GROUP_MAC, &Frame::Token(sample_token())).unwrap();
        let mut f = good.clone();
        f[12] = 0x08;
        f[13] = 0x00;
        assert_eq!(parse(&f), Err(WireError::NotRether));
        let mut f = good.clone();
        f[ETH_HDR] = 2;
        assert_eq!(parse(&f), Err(WireError::BadVersion));
        let mut f = good.clone();
        f[ETH_HDR + 1] = 99;
        assert_eq!(parse(&f), Err(WireError::UnknownType));
        let mut f = good.clone();
        f[ETH_HDR + 2] = 0xff;
        f[ETH_HDR + 3] = 0xff;
        assert_eq!(parse(&f), Err(WireError::BadStation));
        assert_eq!(parse(&good[..good.len() - 1]), Err(WireError::Truncated));
        let mut f = good.clone();
        f[ETH_HDR + 44] = 0x80;
        assert_eq!(parse(&f), Err(WireError::BadFlags));
        let mut t = sample_token();
        t.residual = t.trt + Duration(1);
        let f = build(mac(1), GROUP_MAC, &Frame::Token(t)).unwrap();
        assert_eq!(parse(&f), Err(WireError::BadTime));
        let mut t = sample_token();
        t.rt_next = 3;
        let f = build(mac(1), GROUP_MAC, &Frame::Token(t)).unwrap();
        assert_eq!(parse(&f), Err(WireError::BadCursor));
        let mut t = sample_token();
        t.nodes[1].id = 1;
        let f = build(mac(1), GROUP_MAC, &Frame::Token(t)).unwrap();
        assert_eq!(parse(&f), Err(WireError::DuplicateEntry));
        let mut f = good.clone();
        f[ETH_HDR + 52 + 2] = 7;
        assert_eq!(parse(&f), Err(WireError::BadNodeState));
        let mut t = sample_token();
        t.sessions[0].bytes_per_trt = 0;
        let f = build(mac(1), GROUP_MAC, &Frame::Token(t)).unwrap();
        assert_eq!(parse(&f), Err(WireError::BadReservation));
        // A fragment that claims to reach past its unit.
        let d = RtData {
            sender: 1,
            session_num: 0,
            receiver: 2,
            unit: 0,
            frag: 0,
            frag_count: 1,
            unit_len: 10,
            offset: 0,
            payload: &[0; 10],
        };
        let mut f = build(mac(1), GROUP_MAC, &Frame::RtData(d)).unwrap();
        f[ETH_HDR + 16..ETH_HDR + 20].copy_from_slice(&9u32.to_be_bytes());
        assert_eq!(parse(&f), Err(WireError::BadFragment));
        let mut f = build(mac(1), GROUP_MAC, &Frame::RtData(d)).unwrap();
        f[ETH_HDR + 12..ETH_HDR + 14].copy_from_slice(&1u16.to_be_bytes());
        assert_eq!(parse(&f), Err(WireError::BadFragment));
    }

    #[test]
    fn builder_refuses_oversize() {
        let mut t = sample_token();
        t.sessions = (0..70)
            .map(|n| RtEntry {
                session: SessionId { sender: 1, num: n },
                ..t.sessions[0]
            })
            .collect();
        assert_eq!(
            build(mac(1), GROUP_MAC, &Frame::Token(t)),
            Err(WireError::TooLarge)
        );
        let big = vec![0u8; RT_PAYLOAD_MAX + 1];
        let d = RtData {
            sender: 1,
            session_num: 0,
            receiver: 2,
            unit: 0,
            frag: 0,
            frag_count: 1,
            unit_len: big.len() as u32,
            offset: 0,
            payload: &big,
        };
        assert_eq!(
            build(mac(1), GROUP_MAC, &Frame::RtData(d)),
            Err(WireError::TooLarge)
        );
    }

    #[test]
    fn stamps_order_epoch_then_lower_origin_then_seq() {
        let s = |epoch, origin, seq| Stamp {
            id: TokenId { epoch, origin },
            seq,
        };
        assert!(s(2, 9, 0) > s(1, 1, 100));
        assert!(s(2, 1, 0) > s(2, 9, 100), "lower origin wins an epoch");
        assert!(s(2, 1, 5) > s(2, 1, 4));
    }

    /// The examples of docs/rether-wire.md.
    fn doc_examples() -> Vec<Frame<'static>> {
        vec![
            Frame::Token(Token {
                sender: 1,
                to: 2,
                id: TokenId { epoch: 1, origin: 1 },
                seq: 7,
                cycle: 4,
                residual: Duration::from_millis(20),
                trt: Duration(33_333_333),
                t_nrt: Duration(2_901_666),
                flags: 0,
                rt_next: NRT_PHASE,
                nrt_resume: 2,
                nodes: vec![
                    NodeEntry { id: 1, alive: true },
                    NodeEntry { id: 2, alive: true },
                    NodeEntry { id: 3, alive: false },
                ],
                sessions: vec![RtEntry {
                    session: SessionId { sender: 1, num: 0 },
                    receiver: 2,
                    bytes_per_trt: 6250,
                    tht: Duration::from_micros(6853),
                    start_cycle: 2,
                }],
            }),
            Frame::RtData(RtData {
                sender: 1,
                session_num: 0,
                receiver: 2,
                unit: 5,
                frag: 4,
                frag_count: 5,
                unit_len: 5906,
                offset: 5896,
                payload: b"0123456789",
            }),
            Frame::SwitchToRether(SwitchToRether {
                sender: 1,
                switch_seq: 1,
                acked: vec![2, 4],
            }),
            Frame::SwitchAck(SwitchAck {
                sender: 3,
                initiator: 1,
                switch_seq: 1,
            }),
            Frame::TokenAck(TokenAck {
                sender: 2,
                stamp: Stamp {
                    id: TokenId { epoch: 1, origin: 1 },
                    seq: 7,
                },
            }),
            Frame::SwitchToCsma(SwitchToCsma {
                sender: 1,
                id: TokenId { epoch: 1, origin: 1 },
            }),
            Frame::Join(Join { sender: 3 }),
        ]
    }

    #[test]
    fn documented_examples_match_the_code() {
        let doc = include_str!("../../../../docs/rether-wire.md");
        for f in doc_examples() {
            let dst = match f {
                Frame::Token(_) | Frame::SwitchAck(_) | Frame::TokenAck(_) => GROUP_MAC,
                Frame::RtData(_) => mac(2),
                _ => MacAddr::BROADCAST,
            };
            let built = build(mac(1), dst, &f).unwrap();
            let marker = format!("<!-- example: {:?} -->", f.kind());
            let at = doc.find(&marker).unwrap_or_else(|| panic!("{marker} missing"));
            let block = doc[at..].split("```").nth(1).unwrap();
            let bytes: Vec<u8> = block
                .split_whitespace()
                .map(|h| u8::from_str_radix(h, 16).unwrap())
                .collect();
            assert_eq!(bytes, built, "{:?}", f.kind());
            assert_eq!(parse(&bytes).unwrap(), f);
        }
    }

    proptest! {
        #[test]
        fn parser_never_panics(data in proptest::collection::vec(any::<u8>(), 0..1600)) {
            let _ = parse(&data);
        }

        #[test]
        fn parser_never_panics_on_rether_headers(
            kind in 0u8..9,
            body in proptest::collection::vec(any::<u8>(), 0..400),
        ) {
            let mut f = vec![0u8; 12];
            f.extend_from_slice(&ETHERTYPE_RETHER.to_be_bytes());
            f.push(VERSION);
            f.push(kind);
            f.extend_from_slice(&body);
            let _ = parse(&f);
        }

        /// The node table's one-pass duplicate check refuses exactly what
        /// checking each entry against all before it refused, with the
        /// same reason: ids from a small range (duplicates likely, in and
        /// out of order), the reserved id and bad states mixed in.
        #[test]
        fn node_table_refusals_match_entry_by_entry_check(
            entries in proptest::collection::vec(
                (prop_oneof![8 => 0u16..12, 1 => Just(NO_STATION)], prop_oneof![8 => 0u8..2, 1 => 2u8..=255]),
                0..40,
            ),
        ) {
            let mut t = sample_token();
            t.nodes = (0..entries.len()).map(|i| NodeEntry { id: i as StationId, alive: true }).collect();
            let mut f = build(mac(1), GROUP_MAC, &Frame::Token(t)).unwrap();
            for (i, &(id, state)) in entries.iter().enumerate() {
                let at = ETH_HDR + TOKEN_FIXED + i * NODE_ENTRY;
                f[at..at + 2].copy_from_slice(&id.to_be_bytes());
                f[at + 2] = state;
            }
            let mut seen: Vec<StationId> = Vec::new();
            let mut expected = Ok(());
            for &(id, state) in &entries {
                expected = if id == NO_STATION {
                    Err(WireError::BadStation)
                } else if state > 1 {
                    Err(WireError::BadNodeState)
                } else if seen.contains(&id) {
                    Err(WireError::DuplicateEntry)
                } else {
                    Ok(())
                };
                if expected.is_err() {
                    break;
                }
                seen.push(id);
            }
            match (parse(&f), expected) {
                (Ok(Frame::Token(p)), Ok(())) => {
                    let ids: Vec<StationId> = p.nodes.iter().map(|n| n.id).collect();
                    prop_assert_eq!(ids, seen);
                }
                (got, want) => prop_assert_eq!(got.map(|_| ()), want),
            }
        }

        /// A remembered token never stands in for another frame: after a
        /// good token, a copy changed in any one byte parses (or is
        /// refused) exactly as it does with nothing remembered, and so
        /// does the good token after it.
        #[test]
        fn remembered_token_only_answers_its_own_bytes(pos in 0usize..300, val in any::<u8>()) {
            let good = build(mac(1), GROUP_MAC, &Frame::Token(sample_token())).unwrap();
            let mut f = good.clone();
            let at = ETH_HDR + pos % (f.len() - ETH_HDR);
            f[at] = if f[at] == val { val ^ 1 } else { val };
            let fresh = |f: &[u8]| {
                LAST_TOKEN.with_borrow_mut(|c| *c = None);
                parse(f).map(|p| format!("{p:?}"))
            };
            let (want, want_good) = (fresh(&f), fresh(&good));
            prop_assert!(parse(&good).is_ok());
            prop_assert_eq!(parse(&f).map(|p| format!("{p:?}")), want);
            prop_assert_eq!(parse(&good).map(|p| format!("{p:?}")), want_good);
        }

        #[test]
        fn mutated_tokens_parse_or_refuse(pos in 0usize..200, val in any::<u8>()) {
            let mut f = build(mac(1), GROUP_MAC, &Frame::Token(sample_token())).unwrap();
            let at = pos % f.len();
            f[at] = val;
            if let Ok(Frame::Token(t)) = parse(&f) {
                // Whatever parsed is internally consistent.
                prop_assert!(t.residual <= t.trt);
                prop_assert!(t.rt_next == NRT_PHASE || (t.rt_next as usize) < t.sessions.len());
            }
        }
    }
}
