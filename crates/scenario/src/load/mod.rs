//! Loading a scenario: `--set` overrides, TOML parsing, validation.
//!
//! Every error names the file, line and column, says what is wrong and how
//! to fix it. Overrides are applied to the document before parsing (with
//! `toml_edit`, which keeps the rest of the text as written), so a value
//! set on the command line is checked exactly like one typed in the file.
//!
//! One submodule per part of the file, in the order a scenario is built:
//! [`header`] (`[scenario]`, `[tdp]`), [`nodes`] (`[[node]]` of every
//! kind), [`links`] (`[[link]]`, `[[segment]]`, broadcast domains and
//! addresses), [`flows`] (`[[flow]]`), [`extras`] (`[[route]]`,
//! `[taprio]`, `[htb]`), [`paper`] (`[paper]`); `[diffserv]` is in
//! `crate::ds`. [`l2`] checks the layer-2 topology (no switching loops).

mod extras;
pub(crate) mod faults;
mod flows;
mod header;
mod l2;
mod links;
mod nodes;
mod paper;
mod rether;
mod split;
mod stsdr;

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

use qosnet_core::Duration;

use crate::model::*;
use crate::raw::{self, S};
use crate::units::{fmt_bitrate, parse_bitrate, parse_duration, RATE_UNITS};

/// A scenario error with its place in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub msg: String,
    pub hint: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}:{}: {}", self.file, self.line, self.col, self.msg)?;
        } else {
            write!(f, "{}: {}", self.file, self.msg)?;
        }
        if !self.hint.is_empty() {
            write!(f, "\n  hint: {}", self.hint)?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Where an offset of the loaded text comes from: a line of the file, or
/// a `--set` argument (its index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    File(usize),
    Set(usize),
}

/// How the text after `--set` overrides maps back to the file and to the
/// overrides, so every message points at what the user typed.
struct SetMap {
    sets: Vec<String>,
    /// Per line of the loaded text (0-based).
    lines: Vec<Origin>,
}

pub(crate) struct Ctx<'a> {
    pub(crate) file: &'a str,
    text: &'a str,
    sets: Option<SetMap>,
    warnings: std::cell::RefCell<Vec<ScenarioWarning>>,
}

impl Ctx<'_> {
    /// File (or `--set` argument), line and column of `offset`.
    fn place(&self, offset: usize) -> (String, usize, usize) {
        let (line, col) = line_col(self.text, offset);
        match &self.sets {
            None => (self.file.to_string(), line, col),
            Some(m) => match m.lines.get(line.wrapping_sub(1)) {
                Some(Origin::Set(k)) => (format!("--set {}", m.sets[*k]), 0, 0),
                Some(Origin::File(l)) => (self.file.to_string(), *l, col),
                None => (self.file.to_string(), line, col),
            },
        }
    }
    pub(crate) fn err(
        &self,
        span: Range<usize>,
        msg: impl Into<String>,
        hint: impl Into<String>,
    ) -> ScenarioError {
        let (file, line, col) = self.place(span.start);
        ScenarioError {
            file,
            line,
            col,
            msg: msg.into(),
            hint: hint.into(),
        }
    }
    /// Accept a value but tell the user, with its place.
    pub(crate) fn warn(&self, span: Range<usize>, msg: impl Into<String>) {
        let (file, line, col) = self.place(span.start);
        self.warnings.borrow_mut().push(ScenarioWarning {
            file,
            line,
            col,
            msg: msg.into(),
        });
    }
    /// A duration of at most `max`; `what` names the key, `why` says why
    /// longer ones are refused.
    pub(crate) fn dur_max(
        &self,
        v: &S<String>,
        max: Duration,
        what: &str,
        why: &str,
    ) -> Result<Duration, ScenarioError> {
        self.dur_str_max(v.get_ref(), v.span(), max, what, why)
    }
    /// [`Ctx::dur_max`] of a value without a span of its own.
    pub(crate) fn dur_str_max(
        &self,
        v: &str,
        span: Range<usize>,
        max: Duration,
        what: &str,
        why: &str,
    ) -> Result<Duration, ScenarioError> {
        let ns = crate::units::parse_duration_ns(v).map_err(|e| self.err(span.clone(), e, DUR_HINT))?;
        if ns > max.as_nanos() as f64 {
            return Err(self.too_long(v, span, max, what, why));
        }
        parse_duration(v).map_err(|e| self.err(span, e, DUR_HINT))
    }
    fn too_long(
        &self,
        shown: &str,
        span: Range<usize>,
        max: Duration,
        what: &str,
        why: &str,
    ) -> ScenarioError {
        self.err(
            span,
            format!("{what} = {shown} is longer than {max}, the most qosnet accepts"),
            format!("use at most \"{}\": {why}", fmt_dur(max)),
        )
    }
    pub(crate) fn check_max(
        &self,
        d: Duration,
        span: Range<usize>,
        max: Duration,
        what: &str,
        why: &str,
    ) -> Result<Duration, ScenarioError> {
        if d > max {
            return Err(self.too_long(&d.to_string(), span, max, what, why));
        }
        Ok(d)
    }
    pub(crate) fn int<T: TryFrom<i64>>(
        &self,
        v: &S<i64>,
        lo: i64,
        hi: i64,
        what: &str,
    ) -> Result<T, ScenarioError> {
        let x = *v.get_ref();
        if x < lo || x > hi {
            return Err(self.err(
                v.span(),
                format!("{what} = {x} is out of range"),
                format!("use a value from {lo} to {hi}"),
            ));
        }
        T::try_from(x).map_err(|_| self.err(v.span(), format!("{what} = {x} is out of range"), ""))
    }
}

const DUR_HINT: &str = "write a number with a unit (ns, us or µs, ms, s, min): \"250us\", \"1.5ms\", \"10s\"";

/// The hint of a rate that does not parse: an example and every unit.
pub(crate) fn rate_hint(example: &str) -> String {
    format!("e.g. {example}; units (case matters) — {RATE_UNITS}")
}

/// A bit rate in bit/s as a float (so a huge one can be compared with the
/// limit before it is turned into an integer).
fn bitrate_f64(v: &str) -> Result<f64, String> {
    match crate::units::parse_rate(v)? {
        crate::units::Rate::Bps(b) => Ok(b),
        crate::units::Rate::Pps(_) => parse_bitrate(v).map(|b| b as f64),
    }
}

/// A duration as a scenario file writes it ("1s", "250us", "86400s").
pub(crate) fn fmt_dur(d: Duration) -> String {
    let ns = d.as_nanos();
    match ns {
        0 => "0".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

impl Ctx<'_> {
    pub(crate) fn dscp(&self, name: &str, span: Range<usize>) -> Result<u8, ScenarioError> {
        qosnet_core::diffserv::parse_dscp(name)
            .map_err(|e| self.err(span, e, "DSCP names: EF, VA, AF11..AF43, CS0..CS7, BE, or 0..63"))
    }
    /// A bit rate of a profile, class or limit: at most the fastest link.
    pub(crate) fn rate(&self, v: &str, span: Range<usize>) -> Result<u64, ScenarioError> {
        let r = bitrate_f64(v).map_err(|e| self.err(span.clone(), e, rate_hint("\"30Mb/s\"")))?;
        if r > limits::MAX_CAPACITY_BPS as f64 {
            return Err(self.err(
                span,
                format!(
                    "`{v}` is above {}, the fastest link qosnet simulates",
                    fmt_bitrate(limits::MAX_CAPACITY_BPS)
                ),
                format!("use at most \"{}\"", fmt_bitrate(limits::MAX_CAPACITY_BPS)),
            ));
        }
        parse_bitrate(v).map_err(|e| self.err(span, e, "e.g. \"30Mb/s\""))
    }
    /// A link or segment capacity, within [`limits::MIN_CAPACITY_BPS`,
    /// `limits::MAX_CAPACITY_BPS`].
    pub(crate) fn capacity(&self, v: &S<String>) -> Result<u64, ScenarioError> {
        let r = bitrate_f64(v.get_ref())
            .map_err(|e| self.err(v.span(), e, rate_hint("capacity = \"100Mb/s\"")))?;
        let (lo, hi) = (limits::MIN_CAPACITY_BPS, limits::MAX_CAPACITY_BPS);
        if r > hi as f64 {
            return Err(self.err(
                v.span(),
                format!(
                    "capacity `{}` is above {}, the fastest link qosnet simulates",
                    v.get_ref(),
                    fmt_bitrate(hi)
                ),
                format!(
                    "use at most \"{}\" (400 GbE is the fastest Ethernet in service)",
                    fmt_bitrate(hi)
                ),
            ));
        }
        if r < lo as f64 {
            return Err(self.err(
                v.span(),
                format!(
                    "capacity `{}` is below {}, the slowest link qosnet simulates",
                    v.get_ref(),
                    fmt_bitrate(lo)
                ),
                format!("use at least \"{}\"", fmt_bitrate(lo)),
            ));
        }
        Ok(r.round() as u64)
    }
}

/// The largest (and smallest) values a scenario may use. Each is far
/// beyond what a real experiment needs and well inside what the simulator
/// counts exactly (nanoseconds in 64 bits, bytes per time frame, packet
/// periods); anything beyond is refused at load, never clamped.
pub mod limits {
    use qosnet_core::Duration;

    /// A run (`duration`), and any point in it: flow `start`/`stop`,
    /// on/off periods, `[taprio] base_time`, switch `aging`. One day.
    pub const MAX_RUN: Duration = Duration(86_400_000_000_000);
    /// Time after the sources stop for packets in flight: one hour.
    pub const MAX_DRAIN: Duration = Duration(3_600_000_000_000);
    /// Propagation delay of a link: 10 s (the Moon is 1.3 s away).
    pub const MAX_LINK_DELAY: Duration = Duration(10_000_000_000);
    /// Per-packet processing time of a router: 1 s.
    pub const MAX_PROCESSING: Duration = Duration(1_000_000_000);
    /// A node's clock offset from true time, either way: 1 s.
    pub const MAX_CLOCK_OFFSET: Duration = Duration(1_000_000_000);
    /// Fabric latency of a switch: 1 s.
    pub const MAX_SWITCH_LATENCY: Duration = Duration(1_000_000_000);
    /// End-to-end propagation of a shared segment: 1 ms (200 km of cable;
    /// CSMA/CD detects collisions only within a slot time).
    pub const MAX_PROPAGATION: Duration = Duration(1_000_000);
    /// A TDP time frame, or one entry of a gate control list: 1 s.
    pub const MAX_TF: Duration = Duration(1_000_000_000);
    /// How long a TDP edge shaper may hold a packet: one hour (a super
    /// cycle of the paper's testbed is 3 s).
    pub const MAX_SHAPER_HOLD: Duration = Duration(3_600_000_000_000);
    /// Link (and every other bit-rate) bounds: 1 kb/s to 1 Tb/s.
    pub const MIN_CAPACITY_BPS: u64 = 1_000;
    pub const MAX_CAPACITY_BPS: u64 = 1_000_000_000_000;
    /// A flow sends at least one packet per `MAX_RUN`.
    pub const MIN_FLOW_PPS: f64 = 1.0 / 86_400.0;
    /// Stations of one shared segment, its `[[link]]`s to switches
    /// included (the simulator's medium takes no more).
    pub const MAX_SEGMENT_STATIONS: usize = 1024;
    /// How often one periodic timer (a heartbeat, a token pass, a time
    /// frame) may fire in a run, drain included: 10^9. The simulator runs
    /// 2 to 5 M events/s on this project's machine (`qosnet sim --stats`,
    /// scenarios/stsdr/nowfq.toml: 2.04 M/s with 1 ns heartbeats, 4.09 M/s
    /// with 1 ms), so one such timer alone is minutes of wall time.
    pub const MAX_TIMER_FIRINGS: u64 = 1_000_000_000;
    /// A scenario file: 256 MiB of text.
    pub const MAX_FILE_BYTES: u64 = 256 << 20;
}

pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let upto = &text[..offset.min(text.len())];
    let line = upto.matches('\n').count() + 1;
    let col = upto.rfind('\n').map(|p| offset - p).unwrap_or(offset + 1);
    (line, col)
}

/// Read a scenario file as text, refusing what is not one (a directory,
/// a binary file, a file too large to be a scenario) with what it is.
fn read_text(path: &str) -> Result<String, ScenarioError> {
    use std::io::Read;
    let fail = |msg: String, hint: &str| ScenarioError {
        file: path.to_string(),
        line: 0,
        col: 0,
        msg,
        hint: hint.into(),
    };
    let meta = std::fs::metadata(path).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound {
            "check the path; shipped scenarios are under scenarios/"
        } else {
            "check the file's permissions"
        };
        fail(format!("cannot read scenario: {e}"), hint)
    })?;
    if meta.is_dir() {
        return Err(fail(
            "is a directory, not a scenario file".into(),
            "name a .toml file, e.g. scenarios/live/line.toml",
        ));
    }
    let mut fh = std::fs::File::open(path).map_err(|e| {
        fail(
            format!("cannot read scenario: {e}"),
            "check the file's permissions",
        )
    })?;
    let mut bytes = Vec::new();
    // The first block decides whether this is text at all (binary files
    // and devices such as /dev/zero show NUL bytes at once).
    let mut head = (&mut fh).take(8192);
    head.read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot read scenario: {e}"), "check the file"))?;
    let binary = |at: usize| {
        fail(
            format!("is not a text file (byte {at} is a NUL): a scenario is UTF-8 TOML text"),
            "check the path: this looks like a binary file",
        )
    };
    if let Some(at) = bytes.iter().position(|b| *b == 0) {
        return Err(binary(at));
    }
    fh.take(limits::MAX_FILE_BYTES + 1 - bytes.len() as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot read scenario: {e}"), "check the file"))?;
    if bytes.len() as u64 > limits::MAX_FILE_BYTES {
        return Err(fail(
            format!(
                "is larger than {} MiB, too large for a scenario file",
                limits::MAX_FILE_BYTES >> 20
            ),
            "check the path",
        ));
    }
    if let Some(at) = bytes.iter().position(|b| *b == 0) {
        return Err(binary(at));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        fail(
            format!("is not a text file: byte {at} is not valid UTF-8 (a scenario is UTF-8 TOML text)"),
            "check the path, or save the file as UTF-8",
        )
    })
}

/// Load a scenario file from disk with `--set` overrides.
pub fn load_file(path: &str, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let text = read_text(path)?;
    load_str(path, &text, sets)
}

/// Load a scenario from text; `file` names it in errors. Everything a
/// driver would refuse later (routes, TDP reservations, schedulers,
/// DiffServ rules) is checked here, so `qosnet check` and `qosnet sim`
/// refuse the same files with the same messages.
pub fn load_str(file: &str, text: &str, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let load = |sets: &[String]| {
        if sets.is_empty() {
            return load_applied(file, text, None, sets);
        }
        let applied = apply_sets(file, text, sets)?;
        load_applied(file, text, Some(applied), sets)
    };
    load(sets).map_err(|e| blame_sets(e, sets, load))
}

/// An error at a line of the file that the file alone does not have was
/// caused by the `--set` overrides (a duration shorter than the file's
/// warm-up, a flow sent to a node that cannot take it): name the first
/// override after which the scenario is refused, and keep the file's
/// place in the message. Only on the error path: it loads the scenario
/// again with the file alone and with each prefix of the overrides.
fn blame_sets(
    err: ScenarioError,
    sets: &[String],
    load: impl Fn(&[String]) -> Result<Scenario, ScenarioError>,
) -> ScenarioError {
    if sets.is_empty() || err.file.starts_with("--set ") || load(&[]).err().as_ref() == Some(&err) {
        return err;
    }
    let prefix = |k: usize| load(&sets[..k]).err();
    let culprit = (1..=sets.len())
        .find(|&k| prefix(k).as_ref() == Some(&err))
        .or_else(|| (1..=sets.len()).find(|&k| prefix(k).is_some()));
    let Some(k) = culprit else {
        return err;
    };
    let at = if err.line > 0 {
        format!(" ({}:{}:{})", err.file, err.line, err.col)
    } else {
        String::new()
    };
    ScenarioError {
        file: format!("--set {}", sets[k - 1]),
        line: 0,
        col: 0,
        msg: format!("{}{at}", err.msg),
        hint: err.hint,
    }
}

/// A scenario file parsed once (as a TOML document), to be loaded with
/// many `--set` lists: [`SetBase::load`] is `load_str(file, text, sets)`
/// without parsing the file again for each list. The `set` fuzz target
/// loads one shipped scenario with every input.
pub struct SetBase<'a> {
    file: String,
    text: &'a str,
    doc: Result<toml_edit::DocumentMut, ScenarioError>,
}

impl<'a> SetBase<'a> {
    pub fn new(file: &str, text: &'a str) -> SetBase<'a> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        SetBase {
            file: file.to_string(),
            text,
            doc: parse_doc(file, text),
        }
    }

    /// The scenario with `sets` applied, as `load_str` loads it.
    pub fn load(&self, sets: &[String]) -> Result<Scenario, ScenarioError> {
        let load = |sets: &[String]| {
            if sets.is_empty() {
                return load_applied(&self.file, self.text, None, sets);
            }
            let applied = apply_sets_doc(self.doc.clone()?, sets)?;
            load_applied(&self.file, self.text, Some(applied), sets)
        };
        load(sets).map_err(|e| blame_sets(e, sets, load))
    }
}

/// `load_str` after `--set`: `text` is the file (BOM removed), `applied`
/// the file with `sets` applied, if any.
fn load_applied(
    file: &str,
    text: &str,
    applied: Option<String>,
    sets: &[String],
) -> Result<Scenario, ScenarioError> {
    let (text, map) = match &applied {
        None => (text, None),
        Some(a) => {
            let lines = map_lines(text, a);
            (
                a.as_str(),
                Some(SetMap {
                    sets: sets.to_vec(),
                    lines,
                }),
            )
        }
    };
    let cx = Ctx {
        file,
        text,
        sets: map,
        warnings: Default::default(),
    };
    // `[[flow]]` tables are parsed one at a time, after the rest.
    let tables = split::flow_tables(text);
    let rest = split::blank(text, &tables);
    let toml_err = |e: toml::de::Error, base: usize| {
        let at = e.span().map(|s| s.start + base).unwrap_or(0);
        let msg = toml_message(e.message(), text, at);
        let hint = if msg.contains("unknown field") {
            "remove or correct the key; every key is listed in docs/scenario-format.md"
        } else if msg.contains("missing field") {
            "add the missing key; see docs/scenario-format.md"
        } else {
            "see docs/scenario-format.md for the expected form"
        };
        match e.span() {
            Some(s) => cx.err(s.start + base..s.end + base, msg, hint),
            None => ScenarioError {
                file: file.to_string(),
                line: 0,
                col: 0,
                msg,
                hint: hint.into(),
            },
        }
    };
    let mut raw: raw::File = toml::from_str(&rest).map_err(|e| toml_err(e, 0))?;
    drop(rest);
    let inline = std::mem::take(&mut raw.flows);
    let flows = inline.into_iter().map(Ok).chain(tables.iter().flat_map(|r| {
        let parsed: Result<raw::FlowTable, _> = toml::from_str(&text[r.clone()]);
        let v: Vec<Result<S<raw::Flow>, ScenarioError>> = match parsed {
            Ok(t) => t
                .flow
                .into_iter()
                .map(|fl| {
                    let sp = fl.span();
                    Ok(S::new(
                        sp.start + r.start..sp.end + r.start,
                        fl.into_inner().shifted(r.start),
                    ))
                })
                .collect(),
            Err(e) => vec![Err(toml_err(e, r.start))],
        };
        v
    }));
    let (mut sc, spans) = build(&cx, &raw, flows)?;
    validate(&cx, &raw, &spans, &sc)?;
    sc.warnings = cx.warnings.take();
    Ok(sc)
}

/// The marker `apply_sets` leaves after each value it sets (a TOML
/// comment), so errors about the value can name the `--set` argument.
const SET_MARK: &str = "# qosnet --set #";

/// Map each line of `applied` (the text after overrides) to its line in
/// `orig`, or to the `--set` argument that wrote it. Unchanged lines are
/// matched in order. A line that matches nothing is one an override
/// created (a table header such as `[a.b]` before the value it set): it
/// belongs to the next `--set` value below it, or, if none follows before
/// the next line of the file, to the line before it.
fn map_lines(orig: &str, applied: &str) -> Vec<Origin> {
    let o: Vec<&str> = orig.split('\n').collect();
    let mut out = Vec::new();
    let mut unmatched = Vec::new();
    let mut p = 0usize;
    let mut last = 1usize;
    for line in applied.split('\n') {
        if let Some(k) = line
            .find(SET_MARK)
            .and_then(|i| line[i + SET_MARK.len()..].trim().parse::<usize>().ok())
        {
            out.push(Origin::Set(k));
            unmatched.push(false);
            continue;
        }
        // Overrides change few lines: look a bounded way ahead.
        match (p..o.len().min(p + 4096)).find(|&i| o[i] == line) {
            Some(i) => {
                p = i + 1;
                last = i + 1;
                out.push(Origin::File(i + 1));
                unmatched.push(false);
            }
            None => {
                out.push(Origin::File(last));
                unmatched.push(true);
            }
        }
    }
    let mut next_set = None;
    for i in (0..out.len()).rev() {
        match out[i] {
            Origin::Set(k) => next_set = Some(k),
            Origin::File(_) if unmatched[i] => {
                if let Some(k) = next_set {
                    out[i] = Origin::Set(k);
                }
            }
            Origin::File(_) => next_set = None,
        }
    }
    out
}
/// Apply `key=value` overrides. Keys are dotted paths; arrays of tables
/// (`node`, `link`, `flow`, `route`, `segment`) are addressed by element name, `*`
/// (all) or a name prefix followed by `*`: `flow.f1234.size=482`,
/// `node.R*.scheduler=fifo`, `flow.*.size=482`, `scenario.duration=2s`.
/// Each value set is followed by a `# qosnet --set #K` comment naming the
/// override it came from.
/// The TOML parser's message, or — it reports some lexical errors (a lone
/// carriage return, a control character) with none — a description of the
/// character at `at` where it stopped. Public for the other TOML files
/// qosnet reads (sweep manifests, placement files, node configs).
pub fn toml_message(msg: &str, text: &str, at: usize) -> String {
    let msg = msg.trim();
    if !msg.is_empty() {
        return msg.to_string();
    }
    match text.get(at..).and_then(|t| t.chars().next()) {
        Some('\r') => {
            "a carriage return (\\r) not followed by a newline: TOML allows \\r only in \\r\\n line ends"
                .into()
        }
        Some(c) if c.is_control() => format!("control character U+{:04X} is not allowed here", c as u32),
        Some(c) => format!("invalid TOML at {c:?}"),
        None => "invalid TOML at the end of the file".into(),
    }
}

pub fn apply_sets(file: &str, text: &str, sets: &[String]) -> Result<String, ScenarioError> {
    if sets.is_empty() {
        return Ok(text.to_string());
    }
    apply_sets_doc(parse_doc(file, text)?, sets)
}

/// `text` as a TOML document `--set` can edit.
fn parse_doc(file: &str, text: &str) -> Result<toml_edit::DocumentMut, ScenarioError> {
    text.parse().map_err(|e: toml_edit::TomlError| {
        let (line, col) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
        ScenarioError {
            file: file.into(),
            line,
            col,
            msg: toml_message(e.message(), text, e.span().map(|s| s.start).unwrap_or(0)),
            hint: "fix the TOML syntax".into(),
        }
    })
}

/// A `--set` value that is not TOML, as a TOML basic string written out
/// here. `toml_edit::Value::from` would leave the quoting to toml_write
/// when the document is printed, whose quote counters are `u8`: a value
/// with a run of 256 quotes overflowed them (a panic in checked builds,
/// found by the `set` fuzz target, fuzz/regressions/set/).
fn set_string(s: &str) -> toml_edit::Value {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if c.is_control() => q.push_str(&format!("\\u{:04X}", c as u32)),
            c => q.push(c),
        }
    }
    q.push('"');
    q.parse().unwrap_or_else(|_| toml_edit::Value::from(s))
}

/// `apply_sets` on the parsed file.
fn apply_sets_doc(mut doc: toml_edit::DocumentMut, sets: &[String]) -> Result<String, ScenarioError> {
    for (k, s) in sets.iter().enumerate() {
        let set_err = |msg: String, hint: &str| ScenarioError {
            file: format!("--set {s}"),
            line: 0,
            col: 0,
            msg,
            hint: hint.into(),
        };
        let (key, val) = s
            .split_once('=')
            .ok_or_else(|| set_err("expected KEY=VALUE".into(), "e.g. --set scenario.duration=2s"))?;
        let mut value: toml_edit::Value = val.trim().parse().unwrap_or_else(|_| set_string(val.trim()));
        // Mark the value's line, so a message about it names this argument.
        value.decor_mut().set_suffix(format!(" {SET_MARK}{k}"));
        let parts: Vec<&str> = key.trim().split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(set_err(
                format!("malformed key `{key}`"),
                "keys are dotted paths such as flow.f1234.size",
            ));
        }
        let arrays = ["node", "link", "flow", "route", "segment"];
        if arrays.contains(&parts[0]) {
            if parts.len() < 3 {
                return Err(set_err(
                    format!("`{key}` must name an element and a key"),
                    &format!("use {0}.NAME.KEY or {0}.*.KEY", parts[0]),
                ));
            }
            let Some(arr) = doc.get_mut(parts[0]).and_then(|i| i.as_array_of_tables_mut()) else {
                return Err(set_err(
                    format!("the scenario has no [[{}]] entries", parts[0]),
                    "",
                ));
            };
            let mut names = Vec::new();
            let mut hit = 0;
            for t in arr.iter_mut() {
                let name = element_name(parts[0], t);
                names.push(name.clone());
                // `*` is every element, `R*` every one whose name starts
                // with `R`, anything else one name.
                let hit_this = match parts[1].strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => parts[1] == name,
                };
                if hit_this {
                    set_path(t, &parts[2..], value.clone());
                    hit += 1;
                }
            }
            if hit == 0 {
                return Err(set_err(
                    format!("no {} named `{}`", parts[0], parts[1]),
                    &format!("{} names here: {}", parts[0], names.join(", ")),
                ));
            }
        } else {
            set_path(doc.as_table_mut(), &parts, value);
        }
    }
    Ok(doc.to_string())
}

fn element_name(kind: &str, t: &toml_edit::Table) -> String {
    let s = |k: &str| t.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
    match kind {
        "link" if t.get("name").is_none() => format!("{}-{}", s("a"), s("b")),
        "route" => s("node"),
        _ => s("name"),
    }
}

fn set_path(t: &mut toml_edit::Table, parts: &[&str], v: toml_edit::Value) {
    if parts.len() == 1 {
        t[parts[0]] = toml_edit::value(v);
        return;
    }
    if !t.contains_key(parts[0]) || !t[parts[0]].is_table_like() {
        t[parts[0]] = toml_edit::table();
    }
    match t[parts[0]].as_table_mut() {
        Some(sub) => set_path(sub, &parts[1..], v),
        None => {
            if let Some(it) = t[parts[0]].as_inline_table_mut() {
                let mut tt = it.clone().into_table();
                set_path(&mut tt, &parts[1..], v);
                t[parts[0]] = toml_edit::Item::Table(tt);
            }
        }
    }
}

/// Node names → indices, with an error that lists the known names.
pub(crate) struct Names(pub HashMap<String, usize>);

impl Names {
    pub(crate) fn lookup(&self, cx: &Ctx, v: &S<String>, what: &str) -> Result<usize, ScenarioError> {
        self.0.get(v.get_ref()).copied().ok_or_else(|| {
            let mut known: Vec<&str> = self.0.keys().map(|s| s.as_str()).collect();
            known.sort();
            cx.err(
                v.span(),
                format!("{what} `{}` is not a node", v.get_ref()),
                format!("nodes are: {}", known.join(", ")),
            )
        })
    }
}

fn build(
    cx: &Ctx,
    f: &raw::File,
    raw_flows: impl Iterator<Item = Result<S<raw::Flow>, ScenarioError>>,
) -> Result<(Scenario, Vec<flows::FlowSpans>), ScenarioError> {
    let h = header::header(cx, &f.scenario)?;
    let tdp = header::tdp(cx, f.tdp.as_ref())?;
    let (mut names, mut nodes) = nodes::nodes(cx, f, tdp.is_some())?;
    let segments = links::segment_nodes(cx, f, &mut names, &mut nodes)?;
    let (links, domains) = links::links(cx, f, &names, &nodes, &segments)?;
    l2::check(cx, f, &nodes, &links)?;
    let (flows, spans) = flows::flows(
        cx,
        raw_flows,
        f,
        &h,
        &names,
        &nodes,
        &links,
        &domains,
        tdp.as_ref(),
    )?;
    let routes = extras::routes(cx, f, &names, &nodes, &links)?;
    let taprio = extras::taprio(cx, f, &nodes)?;
    let htb = extras::htb(cx, f, &nodes, &links)?;
    let rether = rether::params(cx, f, &names, &nodes, h.duration)?;
    rether::stations(cx, f, &nodes, &links, rether.as_ref())?;
    let diffserv = match &f.diffserv {
        None => DiffServParams::default(),
        Some(d) => crate::ds::diffserv(cx, d, &names.0, &nodes, &links)?,
    };
    let stsdr = stsdr::stsdr(cx, f, &names, &nodes, &links, h.seed, h.duration + h.drain)?;
    let paper = paper::paper(cx, f.paper.as_ref())?;
    timer_budgets(
        cx,
        f,
        h.duration + h.drain,
        tdp.as_ref(),
        taprio.as_ref(),
        rether.as_ref(),
    )?;
    let kills = faults::kills(cx, f, &names, &nodes, h.duration)?;
    faults::no_overlapping_downs(cx, f, &names)?;
    let stalls = faults::stalls(cx, f, &names, &nodes, h.duration)?;
    let sc = Scenario {
        name: h.name,
        description: h.description,
        source: cx.file.to_string(),
        duration: h.duration,
        warmup: h.warmup,
        drain: h.drain,
        seed: h.seed,
        tdp,
        nodes,
        links,
        flows,
        domains,
        routes,
        diffserv,
        taprio,
        htb,
        stsdr,
        rether,
        kills,
        stalls,
        paper,
        warnings: Vec::new(),
    };
    Ok((sc, spans))
}

/// The periodic timers a scenario sets (TDP's time frame, a taprio gate
/// cycle's shortest entry, RETHER's token pass; the STSDR heartbeat is
/// checked with `[stsdr]`) must fire a countable number of times in the
/// run: each firing is an event of the simulator, and a run of more than
/// [`limits::MAX_TIMER_FIRINGS`] for one timer would not finish in any
/// useful time. Each key has its floor relative to what it does where it
/// is parsed; this is the bound over the whole run.
fn timer_budgets(
    cx: &Ctx,
    f: &raw::File,
    run: Duration,
    tdp: Option<&TdpParams>,
    taprio: Option<&TaprioParams>,
    rether: Option<&RetherParams>,
) -> Result<(), ScenarioError> {
    let budget = |span: Range<usize>, what: &str, period: Duration, hint: &str| {
        let firings = run.as_nanos() / period.as_nanos().max(1);
        if firings <= limits::MAX_TIMER_FIRINGS {
            return Ok(());
        }
        Err(cx.err(
            span,
            format!(
                "{what} of {period} fires {firings} times in the {run} run (drain included), more than {} events for one timer",
                limits::MAX_TIMER_FIRINGS
            ),
            format!("{hint}, or shorten the run"),
        ))
    };
    if let (Some(t), Some(r)) = (tdp, &f.tdp) {
        budget(r.get_ref().tf.span(), "a TDP time frame", t.tf, "use a longer tf")?;
    }
    if let (Some(t), Some(r)) = (taprio, &f.taprio) {
        if let Some(&(d, _)) = t.entries.iter().min_by_key(|e| e.0) {
            budget(r.span(), "a taprio gate entry", d, "use longer gate entries")?;
        }
    }
    if let (Some(p), Some(r)) = (rether, &f.rether) {
        let span = r
            .get_ref()
            .t_token
            .as_ref()
            .map_or_else(|| r.span(), |v| v.span());
        budget(
            span,
            "a RETHER token pass (t_token)",
            p.t_token,
            "use a longer t_token",
        )?;
    }
    Ok(())
}

/// What the drivers work out from a loaded scenario — its routes and flow
/// traces, TDP reservations, every router with its schedulers and
/// classifier — worked out once here, so whatever they would refuse is
/// refused at load, pointing at the flow, route, rule or node responsible.
/// The simulator builds routers exactly this way (`static_peer_macs`);
/// the live runtime differs only in where MACs come from.
fn validate(
    cx: &Ctx,
    f: &raw::File,
    flow_spans: &[flows::FlowSpans],
    sc: &Scenario,
) -> Result<(), ScenarioError> {
    use crate::topo::{Culprit, Network};
    let node_span = |i: usize| -> Range<usize> {
        let name = &sc.nodes[i].name;
        f.nodes
            .iter()
            .map(|n| &n.get_ref().name)
            .chain(f.segments.iter().map(|s| &s.get_ref().name))
            .find(|n| n.get_ref() == name)
            .map(|n| n.span())
            .unwrap_or_else(|| f.scenario.span())
    };
    let flow_span = |i: usize| -> Range<usize> {
        flow_spans
            .get(i)
            .map(|x| x.name.clone())
            .unwrap_or_else(|| f.scenario.span())
    };
    let net = Network::build_checked(sc).map_err(|e| {
        let span = match e.culprit {
            Culprit::Flow(i) => flow_span(i),
            Culprit::Route(i) => f
                .routes
                .get(i)
                .map(|r| r.get_ref().prefix.span())
                .unwrap_or_else(|| f.scenario.span()),
            Culprit::Node(i) => node_span(i),
        };
        cx.err(span, e.msg, e.hint)
    })?;
    let tdp_span = || {
        f.tdp
            .as_ref()
            .map(|t| t.span())
            .unwrap_or_else(|| f.scenario.span())
    };
    let ctr = match &sc.tdp {
        Some(t) => Some(
            qosnet_core::tdp::Ctr::new(t.tf, t.tfs_per_tc, t.tcs_per_sc).map_err(|e| {
                cx.err(
                    tdp_span(),
                    format!("[tdp]: {e}"),
                    "see docs/paper-tdp.md for the CTR's parameters",
                )
            })?,
        ),
        None => None,
    };
    let plan = match &ctr {
        Some(_) if (0..sc.nodes.len()).any(|i| crate::build::is_tdp(sc, i)) => {
            Some(crate::tdpplan::plan_checked(sc, &net).map_err(|(fi, msg)| {
                let span = fi.map(|i| match flow_spans.get(i).and_then(|s| s.slots.clone()) {
                    Some(s) => s,
                    None => flow_span(i),
                });
                cx.err(
                    span.unwrap_or_else(tdp_span),
                    msg,
                    "lower the flow's rate or packet size, give the link more capacity, or set tdp = false on flows that need no reservation",
                )
            })?)
        }
        _ => None,
    };
    let opts = crate::build::BuildOpts {
        static_peer_macs: true,
        ..crate::build::BuildOpts::default()
    };
    // The name in the first `rule `X`` / `profile `X`` of a message.
    let named = |msg: &str, what: &str| -> Option<String> {
        let at = msg.find(&format!("{what} `"))? + what.len() + 2;
        let len = msg[at..].find('`')?;
        Some(msg[at..at + len].to_string())
    };
    for i in (0..sc.nodes.len()).filter(|&i| sc.nodes[i].is_router()) {
        crate::build::build_router(sc, &net, ctr.as_ref(), plan.as_ref(), i, &opts).map_err(|msg| {
            let ds = f.diffserv.as_ref();
            let mut hint = "the simulator and the live lab would refuse this router as configured";
            let span = if let Some(r) = named(&msg, "rule")
                .and_then(|n| ds.and_then(|d| d.rules.iter().find(|r| r.get_ref().name.get_ref() == &n)))
            {
                hint = "the first matching rule wins: put the more specific rule first, or remove one";
                r.get_ref().name.span()
            } else if let Some(p) = named(&msg, "profile")
                .and_then(|n| ds.and_then(|d| d.profiles.iter().find(|p| p.get_ref().name.get_ref() == &n)))
            {
                p.get_ref().name.span()
            } else if let (true, Some(h)) = (msg.contains("htb"), &f.htb) {
                h.span()
            } else if let (true, Some(t)) = (msg.contains("taprio") || msg.contains("gate"), &f.taprio) {
                t.span()
            } else {
                node_span(i)
            };
            let msg = if msg.starts_with("router ") {
                msg
            } else {
                format!("router {}: {msg}", sc.nodes[i].name)
            };
            cx.err(span, msg, hint)
        })?;
    }
    // STSDR nodes are built as the drivers will build them: what the core
    // refuses (a DS frame too small for l, timeouts below two cycles...)
    // is refused here, pointing at [stsdr].
    let setup = crate::build::Setup::new(sc, &net).map_err(|e| cx.err(f.scenario.span(), e, ""))?;
    for i in (0..sc.nodes.len()).filter(|&i| sc.nodes[i].is_stsdr()) {
        crate::build::build_node(sc, &net, &setup, i, &opts).map_err(|msg| {
            let span = f.stsdr.as_ref().map(|s| s.span()).unwrap_or_else(|| node_span(i));
            cx.err(
                span,
                format!("{} {}: {msg}", sc.nodes[i].kind_name(), sc.nodes[i].name),
                "the simulator and the live lab would refuse this STSDR as configured",
            )
        })?;
    }
    // Every other node the drivers build (switches, RETHER stations and
    // bridges), built here too: whatever their constructors refuse that
    // the checks above missed is refused at load, at the node, so `check`
    // never passes a file `sim` or `lab` would refuse.
    let others = |i: &usize| !sc.nodes[*i].is_router() && !sc.nodes[*i].is_stsdr();
    for i in (0..sc.nodes.len()).filter(others) {
        crate::build::build_node(sc, &net, &setup, i, &opts).map_err(|msg| {
            cx.err(
                node_span(i),
                format!("{} {}: {msg}", sc.nodes[i].kind_name(), sc.nodes[i].name),
                "the simulator and the live lab would refuse this node as configured",
            )
        })?;
    }
    Ok(())
}
