//! Loading a scenario: `--set` overrides, TOML parsing, validation.
//!
//! Every error names the file, line and column, says what is wrong and how
//! to fix it. Overrides are applied to the document before parsing (with
//! `toml_edit`, which keeps the rest of the text as written), so a value
//! set on the command line is checked exactly like one typed in the file.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::Ipv4Addr;
use std::ops::Range;

use qosnet_core::{Duration, Framing};

use crate::model::*;
use crate::raw::{self, S};
use crate::units::{parse_bitrate, parse_duration, parse_rate};

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

pub(crate) struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    pub(crate) fn err(
        &self,
        span: Range<usize>,
        msg: impl Into<String>,
        hint: impl Into<String>,
    ) -> ScenarioError {
        let (line, col) = line_col(self.text, span.start);
        ScenarioError {
            file: self.file.to_string(),
            line,
            col,
            msg: msg.into(),
            hint: hint.into(),
        }
    }
    pub(crate) fn dur(&self, v: &S<String>) -> Result<Duration, ScenarioError> {
        parse_duration(v.get_ref()).map_err(|e| {
            self.err(
                v.span(),
                e,
                "write a number with a unit: \"250us\", \"1.5ms\", \"10s\"",
            )
        })
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

impl Ctx<'_> {
    pub(crate) fn dscp(&self, name: &str, span: Range<usize>) -> Result<u8, ScenarioError> {
        qosnet_core::diffserv::parse_dscp(name)
            .map_err(|e| self.err(span, e, "DSCP names: EF, VA, AF11..AF43, CS0..CS7, BE, or 0..63"))
    }
    pub(crate) fn rate(&self, v: &str, span: Range<usize>) -> Result<u64, ScenarioError> {
        parse_bitrate(v).map_err(|e| self.err(span, e, "e.g. \"30Mb/s\""))
    }
}

const PHB_CLASSES: [&str; 7] = ["NC", "EF", "AF1", "AF2", "AF3", "AF4", "BE"];

/// `[htb]`: leaves named after PHB classes, inner classes any other name;
/// parents before children; ceil >= rate; rates within the links.
fn htb(cx: &Ctx, h: &raw::Htb, links: &[Link]) -> Result<HtbParams, ScenarioError> {
    let sp = h.classes.span();
    let max_cap = links.iter().map(|l| l.capacity_bps).max().unwrap_or(u64::MAX);
    let mut ids: HashMap<String, u16> = HashMap::new();
    let mut classes = Vec::new();
    let mut inner = 100u16;
    for c in h.classes.get_ref() {
        if ids.contains_key(&c.name) {
            return Err(cx.err(
                sp,
                format!("duplicate htb class `{}`", c.name),
                "give every class a unique name",
            ));
        }
        let id = match PHB_CLASSES.iter().position(|n| *n == c.name) {
            Some(p) => p as u16,
            None => {
                inner += 1;
                inner
            }
        };
        let parent = match &c.parent {
            None => None,
            Some(p) => Some(*ids.get(p).ok_or_else(|| {
                cx.err(
                    sp.clone(),
                    format!("htb class `{}`: parent `{p}` is not defined before it", c.name),
                    "list parents before their children",
                )
            })?),
        };
        let rate_bps = cx.rate(&c.rate, sp.clone())?;
        let ceil_bps = match &c.ceil {
            Some(v) => cx.rate(v, sp.clone())?,
            None => rate_bps,
        };
        if ceil_bps < rate_bps {
            return Err(cx.err(
                sp,
                format!("htb class `{}`: ceil below rate", c.name),
                "ceil >= rate",
            ));
        }
        if ceil_bps > max_cap {
            return Err(cx.err(
                sp,
                format!(
                    "htb class `{}`: ceil {} is above link capacity",
                    c.name,
                    c.ceil.as_deref().unwrap_or(&c.rate)
                ),
                "a class cannot send faster than the link",
            ));
        }
        let prio = match c.prio {
            None => 0,
            Some(p) if (0..=7).contains(&p) => p as u8,
            Some(p) => {
                return Err(cx.err(
                    sp,
                    format!("htb class `{}`: prio {p} out of range", c.name),
                    "prio is 0 (first) to 7",
                ))
            }
        };
        let burst = match c.burst {
            None => None,
            Some(b) if (64..=1 << 30).contains(&b) => Some(b as u32),
            Some(b) => {
                return Err(cx.err(
                    sp,
                    format!("htb class `{}`: burst {b} B out of range", c.name),
                    "64 bytes to 1 GiB",
                ))
            }
        };
        ids.insert(c.name.clone(), id);
        classes.push(HtbClassSpec {
            name: c.name.clone(),
            id,
            parent,
            rate_bps,
            ceil_bps,
            prio,
            burst,
        });
    }
    for c in &classes {
        let has_children = classes.iter().any(|x| x.parent == Some(c.id));
        if c.id < 100 && has_children {
            return Err(cx.err(
                sp,
                format!("htb class `{}` is a PHB class (a leaf) but has children", c.name),
                "name inner classes anything but NC, EF, AF1..AF4, BE",
            ));
        }
        if c.id >= 100 && !has_children {
            return Err(cx.err(
                sp,
                format!("htb class `{}` has no children and is not a PHB class", c.name),
                "leaves are named NC, EF, AF1, AF2, AF3, AF4 or BE",
            ));
        }
    }
    let default = match &h.default {
        Some(d) => Some(*ids.get(d.get_ref()).filter(|id| **id < 100).ok_or_else(|| {
            cx.err(
                d.span(),
                format!("default `{}` is not a leaf of the tree", d.get_ref()),
                "name a PHB class leaf, e.g. default = \"BE\"",
            )
        })?),
        None => ids.get("BE").copied(),
    };
    Ok(HtbParams { classes, default })
}

pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let upto = &text[..offset.min(text.len())];
    let line = upto.matches('\n').count() + 1;
    let col = upto.rfind('\n').map(|p| offset - p).unwrap_or(offset + 1);
    (line, col)
}

/// Load a scenario file from disk with `--set` overrides.
pub fn load_file(path: &str, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: path.to_string(),
        line: 0,
        col: 0,
        msg: format!("cannot read scenario: {e}"),
        hint: "check the path; shipped scenarios are under scenarios/".into(),
    })?;
    load_str(path, &text, sets)
}

/// Load a scenario from text; `file` names it in errors.
pub fn load_str(file: &str, text: &str, sets: &[String]) -> Result<Scenario, ScenarioError> {
    let text = apply_sets(file, text, sets)?;
    let raw: raw::File = toml::from_str(&text).map_err(|e| {
        let (line, col) = e.span().map(|s| line_col(&text, s.start)).unwrap_or((0, 0));
        let msg = e.message().to_string();
        let hint = if msg.contains("unknown field") {
            "remove or correct the key; every key is listed in docs/scenario-format.md"
        } else if msg.contains("missing field") {
            "add the missing key; see docs/scenario-format.md"
        } else {
            "see docs/scenario-format.md for the expected form"
        };
        ScenarioError {
            file: file.to_string(),
            line,
            col,
            msg,
            hint: hint.into(),
        }
    })?;
    let cx = Ctx { file, text: &text };
    build(&cx, raw)
}

/// Apply `key=value` overrides. Keys are dotted paths; arrays of tables
/// (`node`, `link`, `flow`, `route`) are addressed by element name or `*`:
/// `flow.f1234.size=482`, `node.*.scheduler=tdp`, `scenario.duration=2s`.
pub fn apply_sets(file: &str, text: &str, sets: &[String]) -> Result<String, ScenarioError> {
    if sets.is_empty() {
        return Ok(text.to_string());
    }
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let (line, col) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
        ScenarioError {
            file: file.into(),
            line,
            col,
            msg: e.message().to_string(),
            hint: "fix the TOML syntax".into(),
        }
    })?;
    for s in sets {
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
        let value: toml_edit::Value = val
            .trim()
            .parse()
            .unwrap_or_else(|_| toml_edit::Value::from(val.trim()));
        let parts: Vec<&str> = key.trim().split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(set_err(
                format!("malformed key `{key}`"),
                "keys are dotted paths such as flow.f1234.size",
            ));
        }
        let arrays = ["node", "link", "flow", "route"];
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
                if parts[1] == "*" || parts[1] == name {
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

fn build(cx: &Ctx, f: raw::File) -> Result<Scenario, ScenarioError> {
    let h = f.scenario.get_ref();
    let duration = cx.dur(&h.duration)?;
    if duration == Duration::ZERO {
        return Err(cx.err(
            h.duration.span(),
            "duration must be positive",
            "e.g. duration = \"10s\"",
        ));
    }
    let warmup = match &h.warmup {
        Some(w) => cx.dur(w)?,
        None => Duration::ZERO,
    };
    if warmup >= duration {
        let span = h.warmup.as_ref().map(|w| w.span()).unwrap_or(h.duration.span());
        return Err(cx.err(
            span,
            format!("warmup ({warmup}) is not shorter than duration ({duration})"),
            "shorten the warm-up or lengthen the run",
        ));
    }
    let drain = match &h.drain {
        Some(d) => cx.dur(d)?,
        None => Duration::from_millis(200),
    };

    // [tdp]
    let tdp = match &f.tdp {
        None => None,
        Some(t) => {
            let tr = t.get_ref();
            let tf = cx.dur(&tr.tf)?;
            if tf < Duration::from_micros(1) {
                return Err(cx.err(
                    tr.tf.span(),
                    "a time frame shorter than 1us is not supported",
                    "the paper uses tf = \"250us\"",
                ));
            }
            Some(TdpParams {
                tf,
                tfs_per_tc: cx.int(&tr.tfs_per_tc, 1, 1_000_000, "tfs_per_tc")?,
                tcs_per_sc: match &tr.tcs_per_sc {
                    Some(v) => cx.int(v, 1, 1_000_000, "tcs_per_sc")?,
                    None => 1,
                },
                padding: tr.padding.unwrap_or(true),
                max_lag: match &tr.max_lag {
                    Some(v) => cx.int(v, 1, 1000, "max_lag")?,
                    None => 4,
                },
                shaper_queue: match &tr.shaper_queue {
                    Some(v) => cx.int(v, 1, 1 << 20, "shaper_queue")?,
                    None => 1000,
                },
            })
        }
    };

    // Nodes.
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut nodes = Vec::new();
    for n in &f.nodes {
        let n = n.get_ref();
        let name = n.name.get_ref().clone();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(cx.err(
                n.name.span(),
                format!("node name `{name}` is not allowed"),
                "use letters, digits and _ only (names become interface and namespace names)",
            ));
        }
        if names.insert(name.clone(), nodes.len()).is_some() {
            return Err(cx.err(
                n.name.span(),
                format!("duplicate node name `{name}`"),
                "give every node a unique name",
            ));
        }
        let kind = match n.kind.get_ref().as_str() {
            "host" => {
                let o = n.opts(&raw::RouterOpts::default());
                let router_only = [
                    ("scheduler", o.scheduler.as_ref().map(|v| v.span())),
                    ("processing", o.processing.as_ref().map(|v| v.span())),
                    ("queue_packets", o.queue_packets.as_ref().map(|v| v.span())),
                    ("queue_bytes", o.queue_bytes.as_ref().map(|v| v.span())),
                    ("input_queue", o.input_queue.as_ref().map(|v| v.span())),
                    ("tdp_delay", o.tdp_delay.as_ref().map(|v| v.span())),
                ];
                if let Some((k, Some(sp))) = router_only.into_iter().find(|(_, s)| s.is_some()) {
                    return Err(cx.err(
                        sp,
                        format!("`{k}` applies to routers; `{name}` is a host"),
                        "remove the key or make the node a router",
                    ));
                }
                let r = router_spec(cx, &o, true)?;
                NodeKind::Host(HostSpec {
                    clock_offset_ns: r.clock_offset_ns,
                    clock_drift_ppm: r.clock_drift_ppm,
                })
            }
            "router" => NodeKind::Router(router_spec(cx, &n.opts(&f.defaults.router), tdp.is_some())?),
            other => {
                return Err(cx.err(
                    n.kind.span(),
                    format!("unknown node kind `{other}`"),
                    "use kind = \"router\" or kind = \"host\"",
                ))
            }
        };
        nodes.push(Node { name, kind });
    }
    if nodes.is_empty() {
        return Err(cx.err(
            f.scenario.span(),
            "the scenario has no nodes",
            "add [[node]] tables",
        ));
    }
    let lookup = |v: &S<String>, what: &str| -> Result<usize, ScenarioError> {
        names.get(v.get_ref()).copied().ok_or_else(|| {
            let mut known: Vec<&str> = names.keys().map(|s| s.as_str()).collect();
            known.sort();
            cx.err(
                v.span(),
                format!("{what} `{}` is not a node", v.get_ref()),
                format!("nodes are: {}", known.join(", ")),
            )
        })
    };

    // Links, with addresses.
    let mut links = Vec::new();
    let mut pairs = HashSet::new();
    let mut degree = vec![0usize; nodes.len()];
    for (i, l) in f.links.iter().enumerate() {
        let span = l.span();
        let l = l.get_ref();
        let a = lookup(&l.a, "link end")?;
        let b = lookup(&l.b, "link end")?;
        if a == b {
            return Err(cx.err(
                span,
                format!("link joins `{}` to itself", nodes[a].name),
                "a link needs two different nodes",
            ));
        }
        if !pairs.insert((a.min(b), a.max(b))) {
            return Err(cx.err(
                span,
                format!("second link between `{}` and `{}`", nodes[a].name, nodes[b].name),
                "qosnet supports one link per node pair",
            ));
        }
        if !nodes[a].is_router() && !nodes[b].is_router() {
            return Err(cx.err(span, "a link between two hosts", "connect hosts to routers"));
        }
        degree[a] += 1;
        degree[b] += 1;
        let o = l.opts(&f.defaults.link);
        let capacity_bps = match &o.capacity {
            Some(c) => {
                parse_bitrate(c.get_ref()).map_err(|e| cx.err(c.span(), e, "e.g. capacity = \"100Mb/s\""))?
            }
            None => {
                return Err(cx.err(
                    span,
                    "link has no capacity",
                    "set capacity = \"100Mb/s\" on the link or in [defaults.link]",
                ))
            }
        };
        let delay = match &o.delay {
            Some(d) => cx.dur(d)?,
            None => Duration::ZERO,
        };
        let fr = Framing::default();
        let framing = Framing {
            fcs: o
                .fcs
                .as_ref()
                .map(|v| cx.int(v, 0, 64, "fcs"))
                .transpose()?
                .unwrap_or(fr.fcs),
            preamble: o
                .preamble
                .as_ref()
                .map(|v| cx.int(v, 0, 64, "preamble"))
                .transpose()?
                .unwrap_or(fr.preamble),
            ifg: o
                .ifg
                .as_ref()
                .map(|v| cx.int(v, 0, 64, "ifg"))
                .transpose()?
                .unwrap_or(fr.ifg),
        };
        let (prefix, prefix_len) = match &l.subnet {
            Some(s) => parse_subnet(s.get_ref())
                .map_err(|e| cx.err(s.span(), e, "e.g. subnet = \"10.0.12.0/24\""))?,
            None => (Ipv4Addr::new(10, (i >> 8) as u8, (i & 0xff) as u8, 0), 24),
        };
        if prefix_len > 30 {
            let s = l.subnet.as_ref().map(|s| s.span()).unwrap_or(span.clone());
            return Err(cx.err(s, "subnet too small for two addresses", "use a /30 or larger"));
        }
        let base = u32::from(prefix);
        let name = match &l.name {
            Some(n) => n.get_ref().clone(),
            None => format!("{}-{}", nodes[a].name, nodes[b].name),
        };
        links.push(Link {
            name,
            a,
            b,
            capacity_bps,
            delay,
            framing,
            prefix,
            prefix_len,
            a_ip: Ipv4Addr::from(base + 1),
            b_ip: Ipv4Addr::from(base + 2),
        });
    }
    for (i, n) in nodes.iter().enumerate() {
        if !n.is_router() && degree[i] != 1 {
            let span = f.nodes[i].get_ref().name.span();
            return Err(cx.err(
                span,
                format!("host `{}` has {} links", n.name, degree[i]),
                "a host has exactly one link, to a router",
            ));
        }
    }
    let link_between = |a: usize, b: usize| {
        links
            .iter()
            .position(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a))
    };

    // Flows.
    let mut flows = Vec::new();
    let mut flow_names = HashSet::new();
    for (i, fl) in f.flows.iter().enumerate() {
        let span = fl.span();
        let fl = fl.get_ref();
        let name = fl.name.get_ref().clone();
        if !flow_names.insert(name.clone()) {
            return Err(cx.err(
                fl.name.span(),
                format!("duplicate flow name `{name}`"),
                "give every flow a unique name",
            ));
        }
        let from = lookup(&fl.from, "flow source")?;
        let to = lookup(&fl.to, "flow destination")?;
        for (v, n) in [(&fl.from, from), (&fl.to, to)] {
            if nodes[n].is_router() {
                return Err(cx.err(
                    v.span(),
                    format!("`{}` is a router; flows run between hosts", nodes[n].name),
                    "name a node of kind \"host\"",
                ));
            }
        }
        let o = fl.opts(&f.defaults.flow);
        let size = match &o.size {
            None => {
                return Err(cx.err(
                    span,
                    format!("flow `{name}` has no size"),
                    "set size = 1002 (IP bytes) or size = \"imix\"",
                ))
            }
            Some(s) => match s.get_ref() {
                raw::SizeSpec::Bytes(b) if (28..=9000).contains(b) => SizeDist::Fixed(*b as u32),
                raw::SizeSpec::Bytes(b) => {
                    return Err(cx.err(
                        s.span(),
                        format!("size = {b} is not a valid IP packet size"),
                        "use 28 to 9000 bytes (IP header included)",
                    ))
                }
                raw::SizeSpec::Named(n) if n == "imix" => SizeDist::Imix,
                raw::SizeSpec::Named(n) => {
                    return Err(cx.err(
                        s.span(),
                        format!("unknown size `{n}`"),
                        "use a number of IP bytes or \"imix\"",
                    ))
                }
            },
        };
        let rate = match &o.rate {
            None => {
                return Err(cx.err(
                    span,
                    format!("flow `{name}` has no rate"),
                    "set rate = \"800pps\" or rate = \"6.4Mb/s\"",
                ))
            }
            Some(r) => parse_rate(r.get_ref()).map_err(|e| cx.err(r.span(), e, "e.g. rate = \"800pps\""))?,
        };
        let pattern = match o.pattern.as_ref().map(|p| (p.get_ref().as_str(), p.span())) {
            None | Some(("cbr", _)) => Pattern::Cbr,
            Some(("poisson", _)) => Pattern::Poisson,
            Some(("onoff", sp)) => {
                let (Some(on), Some(off)) = (&o.on, &o.off) else {
                    return Err(cx.err(
                        sp,
                        "pattern \"onoff\" needs `on` and `off` durations",
                        "add on = \"10ms\", off = \"10ms\"",
                    ));
                };
                Pattern::OnOff {
                    on: cx.dur(on)?,
                    off: cx.dur(off)?,
                }
            }
            Some((p, sp)) => {
                return Err(cx.err(
                    sp,
                    format!("unknown pattern `{p}`"),
                    "use \"cbr\", \"poisson\" or \"onoff\"",
                ))
            }
        };
        let start = o
            .start
            .as_ref()
            .map(|s| cx.dur(s))
            .transpose()?
            .unwrap_or(Duration::ZERO);
        let stop = o.stop.as_ref().map(|s| cx.dur(s)).transpose()?;
        let ttl: u8 = o
            .ttl
            .as_ref()
            .map(|v| cx.int(v, 2, 255, "ttl"))
            .transpose()?
            .unwrap_or(64);
        let dscp: u8 = match &o.dscp {
            None => 0,
            Some(v) => match v.get_ref() {
                raw::DscpSpec::Number(n) if (0..=63).contains(n) => *n as u8,
                raw::DscpSpec::Number(n) => {
                    return Err(cx.err(
                        v.span(),
                        format!("dscp = {n} is out of range"),
                        "use 0 to 63 or a name such as \"EF\" or \"AF11\"",
                    ))
                }
                raw::DscpSpec::Name(n) => cx.dscp(n, v.span())?,
            },
        };
        let echo = o.echo.as_ref().map(|b| *b.get_ref()).unwrap_or(false);
        if echo && from == to {
            let sp = o.echo.as_ref().map(|b| b.span()).unwrap_or(span.clone());
            return Err(cx.err(
                sp,
                format!("echo flow `{name}` starts and ends at the same host"),
                "an echo flow needs a distinct destination that answers",
            ));
        }
        let loops: u32 = fl
            .loops
            .as_ref()
            .map(|v| cx.int(v, 1, 250, "loops"))
            .transpose()?
            .unwrap_or(1);

        // Path: given (ring or chain), or none (shortest path at build time).
        let mut path = Vec::new();
        let mut ring = false;
        if let Some(p) = &o.path {
            for v in p.get_ref() {
                let n = lookup(v, "path node")?;
                if !nodes[n].is_router() {
                    return Err(cx.err(
                        v.span(),
                        format!("path node `{}` is a host", nodes[n].name),
                        "a path lists routers only",
                    ));
                }
                path.push(n);
            }
            if path.is_empty() {
                return Err(cx.err(
                    p.span(),
                    "empty path",
                    "list the routers the flow visits, or leave path out",
                ));
            }
            let attach = |h: usize| {
                links
                    .iter()
                    .find(|l| l.a == h || l.b == h)
                    .map(|l| if l.a == h { l.b } else { l.a })
            };
            for w in path.windows(2) {
                if link_between(w[0], w[1]).is_none() {
                    return Err(cx.err(
                        p.span(),
                        format!(
                            "no link between `{}` and `{}` on the path",
                            nodes[w[0]].name, nodes[w[1]].name
                        ),
                        "add the link or change the path",
                    ));
                }
            }
            if attach(from) != Some(path[0]) {
                return Err(cx.err(
                    p.span(),
                    format!(
                        "path starts at `{}` but host `{}` is attached elsewhere",
                        nodes[path[0]].name, nodes[from].name
                    ),
                    "start the path at the router the source host is linked to",
                ));
            }
            let last = *path.last().unwrap_or(&path[0]);
            if attach(to) == Some(path[0])
                && path.len() > 2
                && last != path[0]
                && link_between(last, path[0]).is_some()
                && fl.loops.is_some()
            {
                ring = true;
            } else if fl.loops.is_some() {
                return Err(cx.err(fl.loops.as_ref().map(|l| l.span()).unwrap_or(span.clone()), "`loops` needs a ring path: at least 3 routers, the last linked back to the first, and the destination host on the first", "remove loops or make the path a ring"));
            } else if attach(to) != Some(last) {
                return Err(cx.err(
                    p.span(),
                    format!(
                        "path ends at `{}` but host `{}` is attached elsewhere",
                        nodes[last].name, nodes[to].name
                    ),
                    "end the path at the destination host's router",
                ));
            }
            if ring {
                let hops = loops as usize * path.len() + 1;
                if hops + 1 >= ttl as usize {
                    return Err(cx.err(
                        span,
                        format!("flow `{name}` makes {hops} router hops but starts with TTL {ttl}"),
                        "raise ttl or lower loops",
                    ));
                }
            }
        } else if let Some(l) = &fl.loops {
            return Err(cx.err(
                l.span(),
                "`loops` without a `path`",
                "give the ring as path = [\"R1\", \"R2\", \"R3\"]",
            ));
        }
        let tdp_flag = o.tdp.as_ref().map(|b| *b.get_ref()).unwrap_or(true);
        let tdp_delay = fl
            .tdp_delay
            .as_ref()
            .map(|v| cx.int(v, 1, 10_000, "tdp_delay"))
            .transpose()?;
        let slots = match &fl.slots {
            None => None,
            Some(s) => {
                let Some(t) = &tdp else {
                    return Err(cx.err(
                        s.span(),
                        "slots given but the scenario has no [tdp] section",
                        "add [tdp] or remove slots",
                    ));
                };
                let mut v = Vec::new();
                for x in s.get_ref() {
                    if *x < 0 || *x >= t.tfs_per_tc as i64 {
                        return Err(cx.err(
                            s.span(),
                            format!("slot {x} is outside the time cycle"),
                            format!("slots are TF numbers 0..{} within the TC", t.tfs_per_tc - 1),
                        ));
                    }
                    v.push(*x as u32);
                }
                Some(v)
            }
        };
        if let (Some(v), Some(t), Some(sp)) = (&slots, &tdp, fl.slots.as_ref().map(|s| s.span())) {
            let tc_s = t.tf.as_secs_f64() * t.tfs_per_tc as f64;
            let need = (rate.pps(size.mean()) * tc_s - 1e-9).ceil().max(1.0) as usize;
            if v.len() != need {
                return Err(cx.err(
                    sp,
                    format!(
                        "slots lists {} TFs but flow `{name}` sends {need} packets per time cycle",
                        v.len()
                    ),
                    format!(
                        "list exactly {need} TFs (one per packet), or remove slots to let qosnet plan them"
                    ),
                ));
            }
        }
        flows.push(Flow {
            name,
            id: i as u32,
            from,
            to,
            path,
            loops,
            ring,
            size,
            rate,
            pattern,
            start,
            stop,
            ttl,
            dscp,
            sport: fl
                .sport
                .as_ref()
                .map(|v| cx.int(v, 1, 65535, "sport"))
                .transpose()?
                .unwrap_or(10_000 + i as u16),
            dport: fl
                .dport
                .as_ref()
                .map(|v| cx.int(v, 1, 65535, "dport"))
                .transpose()?
                .unwrap_or(5_001),
            tdp: tdp_flag,
            tdp_delay,
            slots,
            echo,
        });
    }

    let mut routes = Vec::new();
    for r in &f.routes {
        let r = r.get_ref();
        let node = lookup(&r.node, "route node")?;
        let via = lookup(&r.via, "route next hop")?;
        if link_between(node, via).is_none() {
            return Err(cx.err(
                r.via.span(),
                format!(
                    "`{}` is not a neighbour of `{}`",
                    nodes[via].name, nodes[node].name
                ),
                "via names a node linked to the route's node",
            ));
        }
        let (prefix, len) = parse_subnet(r.prefix.get_ref())
            .map_err(|e| cx.err(r.prefix.span(), e, "e.g. prefix = \"10.0.3.0/24\""))?;
        let ttl = match &r.ttl {
            None => None,
            Some(t) => match t.get_ref().as_slice() {
                [lo, hi] if 0 <= *lo && lo <= hi && *hi <= 255 => Some((*lo as u8, *hi as u8)),
                _ => {
                    return Err(cx.err(
                        t.span(),
                        "ttl must be [low, high] within 0..=255",
                        "e.g. ttl = [45, 255]",
                    ))
                }
            },
        };
        routes.push(StaticRoute {
            node,
            prefix,
            len,
            via,
            ttl,
        });
    }

    let taprio = match &f.taprio {
        None => None,
        Some(t) => {
            let tr = t.get_ref();
            let base_time = match &tr.base_time {
                Some(b) => cx.dur(b)?,
                None => Duration::ZERO,
            };
            let sp = tr.entries.span();
            let mut entries = Vec::new();
            for e in tr.entries.get_ref() {
                let d = parse_duration(&e.duration)
                    .map_err(|m| cx.err(sp.clone(), m, "e.g. duration = \"250us\""))?;
                if d == Duration::ZERO {
                    return Err(cx.err(
                        sp.clone(),
                        "a gate entry of zero duration",
                        "give every entry a positive duration",
                    ));
                }
                let mut mask = 0u32;
                for c in &e.open {
                    let bit = match c.as_str() {
                        "NC" => 0,
                        "EF" => 1,
                        "AF1" => 2,
                        "AF2" => 3,
                        "AF3" => 4,
                        "AF4" => 5,
                        "BE" => 6,
                        other => {
                            return Err(cx.err(
                                sp.clone(),
                                format!("unknown class `{other}` in a gate entry"),
                                "classes: NC, EF, AF1, AF2, AF3, AF4, BE",
                            ))
                        }
                    };
                    mask |= 1 << bit;
                }
                entries.push((d, mask));
            }
            if entries.is_empty() {
                return Err(cx.err(sp, "[taprio] has no entries", "entries = [{ duration = \"250us\", open = [\"EF\"] }, { duration = \"750us\", open = [\"AF1\", \"BE\"] }]"));
            }
            Some(TaprioParams { base_time, entries })
        }
    };
    if taprio.is_none() {
        if let Some((i, _)) = nodes
            .iter()
            .enumerate()
            .find(|(_, n)| n.router().is_some_and(|r| r.scheduler == SchedKind::Taprio))
        {
            let sp = f.nodes[i].get_ref().name.span();
            return Err(cx.err(
                sp,
                format!(
                    "router `{}` uses scheduler \"taprio\" but there is no [taprio] section",
                    nodes[i].name
                ),
                "add [taprio] with a gate control list",
            ));
        }
    }

    let htb = match &f.htb {
        None => None,
        Some(h) => Some(htb(cx, h.get_ref(), &links)?),
    };
    if htb.is_none() {
        if let Some((i, _)) = nodes
            .iter()
            .enumerate()
            .find(|(_, n)| n.router().is_some_and(|r| r.scheduler == SchedKind::Htb))
        {
            let sp = f.nodes[i].get_ref().name.span();
            return Err(cx.err(
                sp,
                format!(
                    "router `{}` uses scheduler \"htb\" but there is no [htb] section",
                    nodes[i].name
                ),
                "add [htb] with a class tree",
            ));
        }
    }

    let diffserv = match &f.diffserv {
        None => DiffServParams::default(),
        Some(d) => crate::ds::diffserv(cx, d.get_ref(), &names, &nodes, &links)?,
    };

    Ok(Scenario {
        name: h.name.clone(),
        description: h.description.clone(),
        source: cx.file.to_string(),
        duration,
        warmup,
        drain,
        seed: h.seed.unwrap_or(1),
        tdp,
        nodes,
        links,
        flows,
        routes,
        diffserv,
        taprio,
        htb,
        paper: f.paper,
    })
}

fn router_spec(cx: &Ctx, o: &raw::RouterOpts, have_tdp: bool) -> Result<RouterSpec, ScenarioError> {
    let scheduler = match &o.scheduler {
        None => SchedKind::Fifo,
        Some(s) => SchedKind::parse(s.get_ref()).ok_or_else(|| {
            cx.err(
                s.span(),
                format!("unknown scheduler `{}`", s.get_ref()),
                format!("use one of: {}", SchedKind::NAMES),
            )
        })?,
    };
    if scheduler == SchedKind::Tdp && !have_tdp {
        let span = o.scheduler.as_ref().map(|s| s.span()).unwrap_or(0..0);
        return Err(cx.err(
            span,
            "scheduler \"tdp\" needs a [tdp] section",
            "add [tdp] with tf and tfs_per_tc",
        ));
    }
    let d = |s: &Option<String>, sp: &Range<usize>, what: &str| -> Result<Duration, ScenarioError> {
        let v = s.as_ref().ok_or_else(|| {
            cx.err(
                sp.clone(),
                format!("processing distribution needs `{what}`"),
                "e.g. processing = { dist = \"uniform\", min = \"5us\", max = \"40us\" }",
            )
        })?;
        parse_duration(v).map_err(|e| cx.err(sp.clone(), e, "durations need a unit"))
    };
    let processing = match &o.processing {
        None => ProcTime::Fixed(Duration::ZERO),
        Some(p) => {
            let sp = p.span();
            match p.get_ref() {
                raw::Processing::Fixed(s) => ProcTime::Fixed(
                    parse_duration(s).map_err(|e| cx.err(sp.clone(), e, "e.g. processing = \"10us\""))?,
                ),
                raw::Processing::Dist(pd) => match pd.dist.as_str() {
                    "uniform" => {
                        let (lo, hi) = (d(&pd.min, &sp, "min")?, d(&pd.max, &sp, "max")?);
                        if lo > hi {
                            return Err(cx.err(sp, "processing min is above max", "swap min and max"));
                        }
                        ProcTime::Uniform(lo, hi)
                    }
                    "exp" => ProcTime::Exp {
                        base: pd
                            .base
                            .as_ref()
                            .map(|b| parse_duration(b))
                            .transpose()
                            .map_err(|e| cx.err(sp.clone(), e, ""))?
                            .unwrap_or(Duration::ZERO),
                        mean: d(&pd.mean, &sp, "mean")?,
                    },
                    other => {
                        return Err(cx.err(
                            sp,
                            format!("unknown processing distribution `{other}`"),
                            "use dist = \"uniform\" (min, max) or \"exp\" (base, mean)",
                        ))
                    }
                },
            }
        }
    };
    Ok(RouterSpec {
        scheduler,
        processing,
        queue_packets: o
            .queue_packets
            .as_ref()
            .map(|v| cx.int(v, 1, 1 << 24, "queue_packets"))
            .transpose()?
            .unwrap_or(1000),
        queue_bytes: o
            .queue_bytes
            .as_ref()
            .map(|v| cx.int(v, 64, 1 << 32, "queue_bytes"))
            .transpose()?
            .unwrap_or(1 << 20),
        input_queue: o
            .input_queue
            .as_ref()
            .map(|v| cx.int(v, 1, 1 << 24, "input_queue"))
            .transpose()?
            .unwrap_or(1000),
        tdp_delay: o
            .tdp_delay
            .as_ref()
            .map(|v| cx.int(v, 1, 10_000, "tdp_delay"))
            .transpose()?
            .unwrap_or(2),
        clock_offset_ns: o
            .clock_offset
            .as_ref()
            .map(|v| {
                let (neg, s) = match v.get_ref().strip_prefix('-') {
                    Some(rest) => (true, rest.to_string()),
                    None => (false, v.get_ref().clone()),
                };
                parse_duration(&s)
                    .map(|d| {
                        if neg {
                            -(d.as_nanos() as i64)
                        } else {
                            d.as_nanos() as i64
                        }
                    })
                    .map_err(|e| cx.err(v.span(), e, "e.g. clock_offset = \"-3us\""))
            })
            .transpose()?
            .unwrap_or(0),
        clock_drift_ppm: match &o.clock_drift_ppm {
            Some(v) if v.get_ref().abs() > 1000.0 => {
                return Err(cx.err(
                    v.span(),
                    "clock drift above 1000 ppm",
                    "real oscillators drift by tens of ppm",
                ))
            }
            Some(v) => *v.get_ref(),
            None => 0.0,
        },
    })
}

pub fn parse_subnet(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (a, l) = s
        .split_once('/')
        .ok_or_else(|| format!("`{s}` is not ADDRESS/LENGTH"))?;
    let addr: Ipv4Addr = a.parse().map_err(|_| format!("`{a}` is not an IPv4 address"))?;
    let len: u8 = l
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| format!("`{l}` is not a prefix length 0..=32"))?;
    let m = qosnet_core::route::mask(len);
    Ok((Ipv4Addr::from(u32::from(addr) & m), len))
}
