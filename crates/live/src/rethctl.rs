//! The control socket of a live RETHER station: the session interface of
//! the paper's §3.1 (`retherOpenRTsession`, `retherAdmit`, `retherSend`,
//! `retherRecv`, `retherCloseRTsession`) for applications outside the
//! station process — `qosnet rether`.
//!
//! Each station process (`qosnet node` with `control = "PATH"`, which
//! labs set to `NODE.ctl` in their run directory) listens on a Unix-domain
//! socket on the filesystem, so it is reachable from the root namespace
//! whatever namespace the station runs in. The socket is mode 0600 in a
//! 0700 directory, and a peer whose uid is neither root nor the station's
//! is refused (SO_PEERCRED).
//!
//! Protocol: one JSON [`Request`] per line, one JSON object per line back
//! (`{"ok": true, ...}` or `{"ok": false, "error": "..."}`); a connection
//! may carry any number of requests. Requests are bounded
//! ([`MAX_REQUEST`] bytes); garbage gets an error answer, never a panic.
//! Connection threads parse; the station's own loop (a driver
//! [`Service`]) executes, between two steps of the driver, so the core's
//! session API ([`RetherHost`]'s `ext_*` methods, i.e.
//! [`RetherStation`](qosnet_core::rether::RetherStation)'s open / admit /
//! send / recv / close) is called from the thread that owns the station.
//! No protocol is implemented here.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;

use qosnet_core::rether::app::{Fault, FaultKind, RetherHost};
use qosnet_core::rether::cycle::AdmitError;
use qosnet_core::rether::{Ctr, ModeKind, SendState, SessionId, StationId};
use qosnet_core::time::Instant;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::driver::{NodeHost, Service};
use qosnet_io::device::Device;

/// Largest request line, bytes (a unit of 256 KiB, hex-encoded).
pub const MAX_REQUEST: usize = 1 << 20;
/// Connections served at once; more are answered with an error and closed.
pub const MAX_CONNECTIONS: usize = 16;
/// Requests waiting for the station's loop at most.
const QUEUE: usize = 64;
/// A connection idle this long is closed.
const IDLE: std::time::Duration = std::time::Duration::from_secs(120);
/// Send buffers of a session opened without saying.
pub const DEFAULT_BUFFERS: usize = 4;

/// One request to a station (see the module docs). Stations are named by
/// scenario name or numeric id; sessions as `SENDER.NUMBER` (`1.0`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Mode, token, RT set, dead list, counters, sessions.
    Status,
    /// Open a sending session to `to` reserving `bytes_per_trt`; with
    /// `admit`, ask for admission at once.
    Open {
        to: String,
        bytes_per_trt: u32,
        #[serde(default)]
        buffers: Option<usize>,
        #[serde(default)]
        admit: bool,
    },
    /// Open the receiving end of `session` here.
    Listen {
        session: String,
        #[serde(default)]
        buffers: Option<usize>,
    },
    Admit {
        session: String,
    },
    /// A sending session's state (admission decided? refused, why?).
    State {
        session: String,
    },
    /// Queue one unit (hex bytes, at most the reservation).
    Send {
        session: String,
        data: String,
    },
    /// Up to `max` received units, with their bytes if `data`.
    Recv {
        session: String,
        #[serde(default = "default_max")]
        max: usize,
        #[serde(default)]
        data: bool,
    },
    Close {
        session: String,
    },
    /// The session's RT visits numbered `from` on: bytes sent per cycle.
    Visits {
        session: String,
        #[serde(default)]
        from: u64,
    },
    /// Fault injection: the station process aborts at the next moment it
    /// holds the token (see [`CrashHoldingToken`]).
    CrashHoldingToken,
    /// Fault injection on the wire: the next `count` token frames this
    /// station sends are lost (`lose_sent_token`: not sent, the station
    /// told they were) or go out with a damaged version byte
    /// (`corrupt_sent_token`), which every other station's parser refuses
    /// and counts. The station's own §2.4 timers must recover.
    Fault {
        kind: WireFault,
        #[serde(default = "one")]
        count: u32,
    },
}

/// The token-frame faults of [`Request::Fault`].
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WireFault {
    LoseSentToken,
    CorruptSentToken,
}

fn one() -> u32 {
    1
}

fn default_max() -> usize {
    256
}

/// Parse `SENDER.NUMBER`.
pub fn parse_session(s: &str) -> Result<SessionId, String> {
    let (a, b) = s
        .split_once('.')
        .ok_or_else(|| format!("session `{s}`: expected SENDER.NUMBER, e.g. 1.0"))?;
    let sender = a
        .parse::<StationId>()
        .map_err(|_| format!("session `{s}`: sender `{a}` is not a station id (0-65534)"))?;
    let num = b
        .parse::<u16>()
        .map_err(|_| format!("session `{s}`: `{b}` is not a session number (0-65535)"))?;
    Ok(SessionId { sender, num })
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push(D[(x >> 4) as usize] as char);
        s.push(D[(x & 15) as usize] as char);
    }
    s
}

/// The bytes of a hex string.
pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) {
        return Err("hex data of odd length".into());
    }
    let d = |c: u8| -> Result<u8, String> {
        (c as char)
            .to_digit(16)
            .map(|v| v as u8)
            .ok_or_else(|| format!("`{}` is not a hex digit", c as char))
    };
    s.chunks(2).map(|p| Ok(d(p[0])? << 4 | d(p[1])?)).collect()
}

struct Call {
    req: Request,
    reply: SyncSender<Value>,
}

/// A station's control socket (see the module docs): listening threads
/// plus the [`Service`] the station's driver runs.
pub struct ControlServer {
    path: PathBuf,
    calls: Receiver<Call>,
    wake: UnixStream,
    names: BTreeMap<String, StationId>,
    /// Armed by a [`Request::CrashHoldingToken`].
    crash: Option<CrashHoldingToken>,
}

impl ControlServer {
    /// Listen on `path` (a stale socket there is replaced). `names` maps
    /// the segment's station names to their ids.
    pub fn start(path: &Path, names: BTreeMap<String, StationId>) -> Result<ControlServer, String> {
        let shown = path.display();
        if let Ok(m) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            if !m.file_type().is_socket() {
                return Err(format!("{shown} exists and is not a socket; not replacing it"));
            }
            let _ = std::fs::remove_file(path);
        }
        let listener = UnixListener::bind(path).map_err(|e| format!("binding {shown}: {e}"))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("chmod 600 {shown}: {e}"))?;
        let (wake_tx, wake) = UnixStream::pair().map_err(|e| format!("socketpair: {e}"))?;
        wake.set_nonblocking(true).map_err(|e| e.to_string())?;
        wake_tx.set_nonblocking(true).map_err(|e| e.to_string())?;
        let (tx, calls) = mpsc::sync_channel::<Call>(QUEUE);
        let wake_tx = Arc::new(wake_tx);
        let active = Arc::new(AtomicUsize::new(0));
        std::thread::Builder::new()
            .name("rether-ctl".into())
            .spawn(move || {
                // This thread and the connection threads it starts parse
                // what clients send: no capability is needed for that.
                let _ = qosnet_io::privs::drop_thread_privileges(&[]);
                for conn in listener.incoming() {
                    let Ok(mut conn) = conn else { continue };
                    if let Err(e) = peer_allowed(&conn) {
                        let _ = writeln!(conn, "{}", json!({"ok": false, "error": e}));
                        continue;
                    }
                    if active.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                        let _ = writeln!(
                            conn,
                            "{}",
                            json!({"ok": false, "error": format!("{MAX_CONNECTIONS} connections already open")})
                        );
                        continue;
                    }
                    active.fetch_add(1, Ordering::Relaxed);
                    let (tx, wake_tx, done) = (tx.clone(), wake_tx.clone(), active.clone());
                    let r = std::thread::Builder::new()
                        .name("rether-ctl-conn".into())
                        .spawn(move || {
                            serve_conn(conn, &tx, &wake_tx);
                            done.fetch_sub(1, Ordering::Relaxed);
                        });
                    if r.is_err() {
                        // No thread: the connection closed with the closure.
                        active.fetch_sub(1, Ordering::Relaxed);
                    }
                }
            })
            .map_err(|e| format!("starting the control thread: {e}"))?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            calls,
            wake,
            names,
            crash: None,
        })
    }

    fn station(&self, s: &str) -> Result<StationId, String> {
        if let Some(id) = self.names.get(s) {
            return Ok(*id);
        }
        match s.parse::<StationId>() {
            Ok(id) if self.names.values().any(|v| *v == id) => Ok(id),
            _ => Err(format!(
                "no station `{s}` on this segment (stations: {})",
                self.names
                    .iter()
                    .map(|(n, i)| format!("{n} = {i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    fn name_of(&self, id: StationId) -> String {
        self.names
            .iter()
            .find(|(_, v)| **v == id)
            .map_or_else(|| id.to_string(), |(n, _)| n.clone())
    }

    /// Execute one request on the station.
    pub fn execute(&mut self, now: Instant, h: &mut RetherHost, req: Request) -> Result<Value, String> {
        let se = |e: qosnet_core::rether::SessionError| format!("{e}");
        match req {
            Request::Status => Ok(self.status(h)),
            Request::CrashHoldingToken => {
                let mut c = CrashHoldingToken::new(0);
                c.arm(now, h);
                self.crash = Some(c);
                Ok(json!({"armed": true}))
            }
            Request::Fault { kind, count } => {
                if count == 0 || count > 1000 {
                    return Err(format!("count {count}: between 1 and 1000 token frames"));
                }
                let kind = match kind {
                    WireFault::LoseSentToken => FaultKind::LoseSentTokens { count },
                    WireFault::CorruptSentToken => FaultKind::CorruptSentTokens { count },
                };
                h.add_fault(Fault { at: now, kind });
                Ok(json!({"armed": true, "count": count}))
            }
            Request::Open {
                to,
                bytes_per_trt,
                buffers,
                admit,
            } => {
                let to = self.station(&to)?;
                let id = h
                    .ext_open_sender(to, bytes_per_trt, buffers.unwrap_or(DEFAULT_BUFFERS))
                    .map_err(|e| format!("opening: {e}"))?;
                if admit {
                    h.ext_admit(now, id).map_err(|e| format!("admitting {id}: {e}"))?;
                }
                let tht = h.station().config().timing.tht_rt(bytes_per_trt);
                Ok(json!({"session": id.to_string(), "tht_ns": tht.as_nanos()}))
            }
            Request::Listen { session, buffers } => {
                let id = parse_session(&session)?;
                h.ext_open_receiver(id, buffers.unwrap_or(DEFAULT_BUFFERS))
                    .map_err(se)?;
                Ok(json!({"session": id.to_string()}))
            }
            Request::Admit { session } => {
                let id = parse_session(&session)?;
                h.ext_admit(now, id).map_err(se)?;
                Ok(json!({}))
            }
            Request::State { session } => {
                let id = parse_session(&session)?;
                Ok(self.state(h, id)?)
            }
            Request::Send { session, data } => {
                let id = parse_session(&session)?;
                let data = unhex(&data)?;
                let n = data.len();
                match h.ext_send(now, id, data) {
                    Ok(()) => Ok(json!({"queued": n, "free_buffers": h.station().free_buffers(id)})),
                    Err(e @ qosnet_core::rether::SendError::BuffersFull) => {
                        Ok(json!({"queued": 0, "retry": true, "reason": e.to_string()}))
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            Request::Recv { session, max, data } => {
                let id = parse_session(&session)?;
                let units = h.ext_recv(id, max.min(4096)).ok_or_else(|| {
                    format!("no receiving session {id} opened here (`qosnet rether listen`)")
                })?;
                let units: Vec<Value> = units
                    .into_iter()
                    .map(|(at, u)| {
                        let mut v = json!({
                            "unit": u.number,
                            "len": u.data.len(),
                            "complete": u.complete,
                            "missing": u.missing,
                            "bytes_missing": u.bytes_missing,
                            "at_ns": at.as_nanos(),
                        });
                        if data {
                            v["data"] = Value::String(hex(&u.data));
                        }
                        v
                    })
                    .collect();
                let st = h.station().recv_stats(id).unwrap_or_default();
                let dropped = h.ext_rx(id).map_or(0, |r| r.units_dropped);
                Ok(json!({
                    "units": units,
                    "frames_rx": st.frames_rx,
                    "bytes_rx": st.bytes_rx,
                    "units_complete": st.units_complete,
                    "units_incomplete": st.units_incomplete,
                    "units_overwritten": st.units_overwritten,
                    "frames_duplicate": st.frames_duplicate,
                    "frames_stale": st.frames_stale,
                    "units_dropped_unread": dropped,
                }))
            }
            Request::Close { session } => {
                let id = parse_session(&session)?;
                h.ext_close(now, id).map_err(se)?;
                Ok(json!({}))
            }
            Request::Visits { session, from } => {
                let id = parse_session(&session)?;
                let x = h
                    .ext_tx(id)
                    .ok_or_else(|| format!("no sending session {id} opened through this socket"))?;
                let dropped = x.visits_dropped;
                let next = x.next_visit();
                let visits: Vec<Value> = h
                    .ext_visits(id, from)
                    .iter()
                    .map(|v| json!({"seq": v.seq, "cycle": v.cycle, "at_ns": v.at.as_nanos(), "bytes": v.bytes}))
                    .collect();
                let s = h.station().send_stats(id).unwrap_or_default();
                Ok(json!({
                    "visits": visits,
                    "visits_dropped": dropped,
                    "next": next,
                    "reservation": h.station().reservation(id),
                    "trt_ns": h.station().config().trt.as_nanos(),
                    "state": h.station().session_state(id).map(state_name),
                    "queued_units": s.units_queued.saturating_sub(s.units_sent),
                    "units_sent": s.units_sent,
                    "bytes_sent": s.bytes_sent,
                    "rt_visits": s.rt_visits,
                    "idle_visits": s.idle_visits,
                    "slot_overruns": s.slot_overruns,
                }))
            }
        }
    }

    fn state(&self, h: &RetherHost, id: SessionId) -> Result<Value, String> {
        let st = h
            .station()
            .session_state(id)
            .ok_or_else(|| format!("no sending session {id} at this station"))?;
        let mut v = json!({
            "session": id.to_string(),
            "state": state_name(st),
            "reservation": h.station().reservation(id),
        });
        let in_set = h
            .station()
            .token()
            .filter(|_| h.station().mode() == ModeKind::Rether)
            .is_some_and(|t| t.sessions.iter().any(|e| e.session == id));
        v["in_rt_set"] = Value::Bool(in_set);
        if let Some(x) = h.ext_tx(id) {
            v["start_cycle"] = json!(x.start_cycle);
            v["revoked"] = json!(x.revoked);
            if let Some(r) = x.refused {
                v["refused"] = refusal(&r);
            }
        }
        if let SendState::Refused(r) = st {
            v["refused"] = refusal(&r);
        }
        Ok(v)
    }

    fn status(&self, h: &RetherHost) -> Value {
        use qosnet_core::node::Node;
        let st = h.station();
        let counters: BTreeMap<String, u64> = h.counters().into_iter().collect();
        // The token a station last saw outlives a switch back to CSMA.
        let token = st.token().filter(|_| st.mode() == ModeKind::Rether).map(|t| {
            json!({
                "id": format!("{}/{}", t.id.epoch, t.id.origin),
                "seq": t.seq,
                "cycle": t.cycle,
                "trt_ns": t.trt.as_nanos(),
                "t_nrt_ns": t.t_nrt.as_nanos(),
                "rt_set": t.sessions.iter().map(|e| json!({
                    "session": e.session.to_string(),
                    "sender": self.name_of(e.session.sender),
                    "receiver": self.name_of(e.receiver),
                    "bytes_per_trt": e.bytes_per_trt,
                    "tht_ns": e.tht.as_nanos(),
                    "start_cycle": e.start_cycle,
                })).collect::<Vec<_>>(),
                "reserved_tht_ns": t.sessions.iter().map(|e| e.tht.as_nanos()).sum::<u64>(),
                "dead": t.nodes.iter().filter(|n| !n.alive).map(|n| self.name_of(n.id)).collect::<Vec<_>>(),
                "alive": t.nodes.iter().filter(|n| n.alive).map(|n| self.name_of(n.id)).collect::<Vec<_>>(),
            })
        });
        let (ext_tx, ext_rx) = h.ext_sessions();
        let mut sessions = Vec::new();
        for id in ext_tx {
            let mut v = self
                .state(h, id)
                .unwrap_or_else(|e| json!({"session": id.to_string(), "error": e}));
            v["role"] = "sender".into();
            v["owner"] = "control".into();
            if let Some(s) = st.send_stats(id) {
                v["units_sent"] = s.units_sent.into();
                v["bytes_sent"] = s.bytes_sent.into();
                v["rt_visits"] = s.rt_visits.into();
                v["idle_visits"] = s.idle_visits.into();
            }
            sessions.push(v);
        }
        for id in ext_rx {
            let r = st.recv_stats(id).unwrap_or_default();
            sessions.push(json!({
                "session": id.to_string(), "role": "receiver", "owner": "control",
                "units_complete": r.units_complete, "units_incomplete": r.units_incomplete,
                "bytes_rx": r.bytes_rx,
            }));
        }
        for (flow, id, send) in h.flow_sessions() {
            let mut v = json!({"session": id.to_string(), "owner": format!("flow {flow}"),
                "role": if send { "sender" } else { "receiver" }});
            if send {
                if let Some(s) = st.session_state(id) {
                    v["state"] = state_name(s).into();
                }
                v["reservation"] = json!(st.reservation(id));
            }
            sessions.push(v);
        }
        let c = |k: Ctr| st.counter(k);
        json!({
            "station": st.config().name,
            "id": st.id(),
            "mode": mode_name(st.mode()),
            "trt_ns": st.config().trt.as_nanos(),
            "t_nrt_ns": st.config().t_nrt.as_nanos(),
            // How long the token may stop after one station's crash.
            "crash_recovery_bound_ns": qosnet_core::rether::timing::crash_recovery_bound(
                st.config().trt,
                st.config().t_nrt,
                st.config().ack_margin,
                st.config().pass_retries,
            )
            .as_nanos(),
            // How long the token may stop after one lost or corrupted
            // token frame (one acknowledgement timer, then the resend).
            "lost_frame_recovery_bound_ns": qosnet_core::rether::timing::lost_frame_recovery_bound(
                st.config().trt,
                st.config().t_nrt,
                st.config().ack_margin,
            )
            .as_nanos(),
            "holds_token": st.holds_token(),
            "down": h.is_down(),
            "token": token,
            "token_visits": c(Ctr::TokenVisits),
            "token_received": c(Ctr::TokenReceived),
            "token_passes": c(Ctr::TokenPasses),
            "token_regenerations": c(Ctr::TokenRegenerations),
            "rt_visits": c(Ctr::RtVisits),
            "nrt": {
                "queued": st.nrt_queued(),
                "visits": c(Ctr::NrtVisits),
                "visits_idle": c(Ctr::NrtVisitsIdle),
                "refusals": c(Ctr::NrtRefusals),
            },
            "sessions": sessions,
            "counters": counters,
        })
    }
}

fn refusal(r: &AdmitError) -> Value {
    match r {
        AdmitError::Refused(f) => json!({
            "text": f.to_string(),
            "reserved_ns": f.reserved.as_nanos(),
            "requested_ns": f.requested.as_nanos(),
            "t_nrt_ns": f.t_nrt.as_nanos(),
            "trt_ns": f.trt.as_nanos(),
        }),
        AdmitError::TokenFull => json!({"text": "the token has no room for another RT entry"}),
    }
}

fn state_name(s: SendState) -> &'static str {
    match s {
        SendState::Opened => "opened",
        SendState::Pending => "pending",
        SendState::Admitted { .. } => "admitted",
        SendState::Refused(_) => "refused",
        SendState::Closing => "closing",
        SendState::Revoked => "revoked",
    }
}

fn mode_name(m: ModeKind) -> &'static str {
    match m {
        ModeKind::Csma => "csma",
        ModeKind::Joining => "joining",
        ModeKind::Initiating => "initiating",
        ModeKind::Switching => "switching",
        ModeKind::Rether => "rether",
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl<D: Device> Service<D> for ControlServer {
    fn poll_fd(&self) -> std::os::fd::RawFd {
        self.wake.as_raw_fd()
    }
    fn handle(&mut self, now: Instant, hosts: &mut [NodeHost<D>]) -> usize {
        if let Some(c) = self.crash.as_mut() {
            Service::<D>::handle(c, now, hosts);
        }
        let mut buf = [0u8; 256];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
        let mut n = 0;
        while let Ok(call) = self.calls.try_recv() {
            n += 1;
            let host = hosts
                .first_mut()
                .and_then(|h| h.node.as_any_mut().downcast_mut::<RetherHost>());
            let v = match host {
                None => json!({"ok": false, "error": "this node is not a RETHER station"}),
                Some(h) => match self.execute(now, h, call.req) {
                    Ok(mut v) => {
                        v["ok"] = Value::Bool(true);
                        v
                    }
                    Err(e) => json!({"ok": false, "error": e}),
                },
            };
            let _ = call.reply.try_send(v);
        }
        n
    }
}

/// Read requests off one connection until it closes, fails or idles.
fn serve_conn(conn: UnixStream, tx: &SyncSender<Call>, wake: &UnixStream) {
    let _ = conn.set_read_timeout(Some(IDLE));
    let _ = conn.set_write_timeout(Some(std::time::Duration::from_secs(10)));
    let Ok(mut out) = conn.try_clone() else { return };
    let mut r = BufReader::new(conn);
    let mut line = Vec::new();
    loop {
        line.clear();
        let got = (&mut r).take(MAX_REQUEST as u64 + 1).read_until(b'\n', &mut line);
        match got {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > MAX_REQUEST {
            let e = format!("request longer than {MAX_REQUEST} bytes; closing");
            let _ = writeln!(out, "{}", json!({"ok": false, "error": e}));
            return;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let v = match serde_json::from_str::<Request>(text) {
            Err(e) => json!({"ok": false, "error": format!("bad request: {e}")}),
            Ok(req) => {
                let (rtx, rrx) = mpsc::sync_channel(1);
                match tx.try_send(Call { req, reply: rtx }) {
                    Err(_) => json!({"ok": false, "error": "station busy (request queue full); retry"}),
                    Ok(()) => {
                        let _ = (&*wake).write(&[1]);
                        rrx.recv_timeout(std::time::Duration::from_secs(5))
                            .unwrap_or_else(
                                |_| json!({"ok": false, "error": "the station did not answer within 5 s"}),
                            )
                    }
                }
            }
        };
        if writeln!(out, "{v}").is_err() {
            return;
        }
    }
}

/// Only root and the station's own user may talk to it. The client
/// asks the same of the station ([`Client::connect`]): each end trusts
/// the other only if it runs as root or as itself.
fn peer_allowed(c: &UnixStream) -> Result<(), String> {
    let cred = rustix::net::sockopt::socket_peercred(c).map_err(|e| format!("SO_PEERCRED: {e}"))?;
    let uid = cred.uid.as_raw();
    if uid == 0 || uid == qosnet_io::rundir::euid() {
        Ok(())
    } else {
        Err(format!("uid {uid} may not control this station"))
    }
}

/// Crash the station process (`abort`, a real crash: no report, no
/// goodbye) while it holds the token, once it has had `after` token
/// visits: the fault a test cannot time from outside (§2.4 and qosnet's
/// token regeneration). The core's `Crash { holding }` fault mutes the
/// station at the first moment it holds the token; the process then dies
/// on the loop's next turn, microseconds later, the pass never sent.
pub struct CrashHoldingToken {
    pub after: u64,
    armed: bool,
}

impl CrashHoldingToken {
    pub fn new(after: u64) -> Self {
        CrashHoldingToken { after, armed: false }
    }

    fn arm(&mut self, now: Instant, h: &mut RetherHost) {
        self.armed = true;
        h.add_fault(Fault {
            at: now,
            kind: FaultKind::Crash {
                holding: true,
                restart: None,
            },
        });
    }
}

impl<D: Device> Service<D> for CrashHoldingToken {
    fn poll_fd(&self) -> std::os::fd::RawFd {
        -1
    }
    fn handle(&mut self, now: Instant, hosts: &mut [NodeHost<D>]) -> usize {
        let Some(h) = hosts
            .first_mut()
            .and_then(|h| h.node.as_any_mut().downcast_mut::<RetherHost>())
        else {
            return 0;
        };
        if h.is_down() {
            let _ = writeln!(
                std::io::stderr(),
                "{}: crashing while holding the token (fault injection, after {} token visits)",
                h.station().config().name,
                h.station().counter(Ctr::TokenVisits)
            );
            std::process::abort();
        }
        if !self.armed && h.station().counter(Ctr::TokenVisits) >= self.after {
            self.arm(now, h);
        }
        0
    }
}

/// A connection to a station's control socket.
pub struct Client {
    r: BufReader<UnixStream>,
    w: UnixStream,
    path: PathBuf,
}

impl Client {
    /// Connect to the station at `path`, after checking that the socket
    /// and its directory are root's or the caller's, and that the process
    /// listening runs as root or as the caller (SO_PEERCRED): nothing is
    /// sent to a socket some other user put there.
    pub fn connect(path: &Path) -> Result<Client, String> {
        qosnet_io::rundir::check_socket(path).map_err(|e| format!("not trusting {}: {e}", path.display()))?;
        let s = UnixStream::connect(path).map_err(|e| format!("connecting to {}: {e}", path.display()))?;
        peer_allowed(&s).map_err(|e| {
            format!(
                "not trusting {}: the process listening there runs as another user ({e})",
                path.display()
            )
        })?;
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(10)));
        let w = s.try_clone().map_err(|e| e.to_string())?;
        Ok(Client {
            r: BufReader::new(s),
            w,
            path: path.to_path_buf(),
        })
    }

    /// Send `req`; the answer, or its error.
    pub fn call(&mut self, req: &Request) -> Result<Value, String> {
        let line = serde_json::to_string(req).map_err(|e| e.to_string())?;
        writeln!(self.w, "{line}").map_err(|e| format!("writing to {}: {e}", self.path.display()))?;
        let mut back = String::new();
        (&mut self.r)
            .take(64 << 20)
            .read_line(&mut back)
            .map_err(|e| format!("reading from {}: {e}", self.path.display()))?;
        if back.is_empty() {
            return Err(format!("{} closed the connection", self.path.display()));
        }
        let v: Value = serde_json::from_str(&back).map_err(|e| format!("bad answer: {e}"))?;
        if v["ok"] == Value::Bool(true) {
            Ok(v)
        } else {
            Err(v["error"]
                .as_str()
                .unwrap_or("error without a message")
                .to_string())
        }
    }
}

/// The control socket of `station` in the lab with namespace prefix
/// `lab`: `NODE.ctl` in one of the lab's run directories
/// ([`qosnet_io::rundir`]: `/run/qosnet/qosnet-PREFIX-*` for root), the one
/// whose station answers. Directories, sockets and listeners that are
/// neither root's nor the caller's are never used, and are named in the
/// error when nothing else is found.
pub fn find_socket(lab: &str, station: &str) -> Result<PathBuf, String> {
    let (dirs, refused) = qosnet_io::rundir::find(lab);
    let mut found = Vec::new();
    let mut untrusted: Vec<String> = refused.iter().map(|e| e.to_string()).collect();
    for d in dirs {
        let p = d.join(format!("{station}.ctl"));
        if std::fs::symlink_metadata(&p).is_err() {
            continue;
        }
        match qosnet_io::rundir::check_socket(&p) {
            Ok(()) => found.push(p),
            Err(e) => untrusted.push(e.to_string()),
        }
    }
    for p in &found {
        if let Ok(s) = UnixStream::connect(p) {
            match peer_allowed(&s) {
                Ok(()) => return Ok(p.clone()),
                Err(e) => untrusted.push(format!("{}: {e}", p.display())),
            }
        }
    }
    let where_ = match qosnet_io::rundir::base() {
        Ok(Some(b)) => b.display().to_string(),
        _ => std::env::temp_dir().display().to_string(),
    };
    let refused = if untrusted.is_empty() {
        String::new()
    } else {
        format!("; refused as not root's or yours: {}", untrusted.join("; "))
    };
    if found.is_empty() {
        Err(format!(
            "no control socket of station {station} in lab {lab} ({where_}/qosnet-{lab}-*/{station}.ctl){refused}; is the lab up (`qosnet lab up ... --prefix {lab}`), run by you or root, and {station} a RETHER station?"
        ))
    } else {
        Err(format!(
            "the control sockets of {station} found ({found:?}) do not answer: its station process is gone{refused}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_garbage_is_an_error() {
        let r: Request =
            serde_json::from_str(r#"{"op":"open","to":"s3","bytes_per_trt":1000,"admit":true}"#).unwrap();
        assert_eq!(
            r,
            Request::Open {
                to: "s3".into(),
                bytes_per_trt: 1000,
                buffers: None,
                admit: true
            }
        );
        for bad in [
            "",
            "{",
            r#"{"op":"nuke"}"#,
            r#"{"op":"open","to":"s3"}"#,
            r#"{"op":"fault","kind":"unplug"}"#,
            "\u{0}\u{1}",
        ] {
            assert!(serde_json::from_str::<Request>(bad).is_err(), "{bad}");
        }
        let f: Request = serde_json::from_str(r#"{"op":"fault","kind":"corrupt_sent_token"}"#).unwrap();
        assert_eq!(
            f,
            Request::Fault {
                kind: WireFault::CorruptSentToken,
                count: 1
            }
        );
        assert_eq!(parse_session("1.0").unwrap(), SessionId { sender: 1, num: 0 });
        for bad in ["", "1", "a.b", "1.70000", "-1.0"] {
            assert!(parse_session(bad).is_err(), "{bad}");
        }
        assert_eq!(unhex(&hex(&[0, 1, 0xab, 0xff])).unwrap(), vec![0, 1, 0xab, 0xff]);
        assert!(unhex("abc").is_err() && unhex("zz").is_err());
    }
}
