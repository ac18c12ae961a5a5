//! What a sweep refuses before it runs anything, each refusal naming its
//! place (`FILE:LINE` of the manifest, or the flag): a grid too big to
//! expand, seeds and values given twice (a repeated one would count one
//! run as two in a cell's mean and shrink its interval to nothing), a
//! swept `scenario.seed` (the run's own seed, set after it, would win),
//! and, against the scenario itself, every override and flow name, each
//! checked once rather than in every row.

use std::collections::{HashMap, HashSet};

use anyhow::{anyhow, bail, Result};
use serde::Deserialize;

use qosnet_scenario::{ScenarioError, SetBase};

use super::{value_text, Manifest, Seeds, Sweep, MAX_RUNS, MAX_SEED, METRICS};

/// Where the parts of a manifest were written: `FILE:LINE` in a manifest
/// file, the flag (`--seeds 1,1`) on the command line, or empty when
/// unknown (a manifest made in code). One entry per item of the part.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Places {
    pub seeds: String,
    pub set: Vec<String>,
    pub metrics: Vec<String>,
    pub flows: Vec<String>,
    /// Per parameter: its entry.
    pub params: Vec<String>,
    /// Per parameter, per value.
    pub values: Vec<Vec<String>>,
}

/// The manifest's parts with their spans (serde ignores the rest).
#[derive(Deserialize)]
struct Spans {
    seeds: Option<toml::Spanned<toml::Value>>,
    #[serde(default)]
    set: Vec<toml::Spanned<String>>,
    #[serde(default)]
    metrics: Vec<toml::Spanned<String>>,
    #[serde(default)]
    flows: Vec<toml::Spanned<String>>,
    #[serde(default)]
    param: Vec<ParamSpans>,
}

#[derive(Deserialize)]
struct ParamSpans {
    key: toml::Spanned<String>,
    #[serde(default)]
    values: Vec<toml::Spanned<toml::Value>>,
}

impl Places {
    /// The places of a manifest file's parts (`text` already parsed as a
    /// [`Manifest`]; every part is named by its line).
    pub fn of_file(path: &str, text: &str) -> Places {
        let at = |span: std::ops::Range<usize>| {
            let line = text.get(..span.start).map_or(0, |t| t.matches('\n').count()) + 1;
            format!("{path}:{line}")
        };
        let Ok(s) = toml::from_str::<Spans>(text) else {
            return Places::default();
        };
        let all = |v: &[toml::Spanned<String>]| v.iter().map(|x| at(x.span())).collect();
        Places {
            seeds: s.seeds.map(|x| at(x.span())).unwrap_or_default(),
            set: all(&s.set),
            metrics: all(&s.metrics),
            flows: all(&s.flows),
            params: s.param.iter().map(|p| at(p.key.span())).collect(),
            values: s
                .param
                .iter()
                .map(|p| p.values.iter().map(|v| at(v.span())).collect())
                .collect(),
        }
    }
}

/// `PLACE: ` before a message, or nothing where the place is unknown.
fn at(places: &[String], i: usize) -> String {
    prefix(places.get(i).map_or("", String::as_str))
}

fn prefix(place: &str) -> String {
    if place.is_empty() {
        String::new()
    } else {
        format!("{place}: ")
    }
}

/// [`Manifest::check`].
pub(super) fn manifest(m: &Manifest) -> Result<()> {
    grid_size(m)?;
    seeds(m)?;
    params(m)?;
    fixed_sets(m)?;
    names(
        "metric",
        &m.metrics,
        &m.places.metrics,
        "a table has one column pair per metric",
    )?;
    for (i, x) in m.metrics.iter().enumerate() {
        if !METRICS.iter().any(|k| k.0 == x) {
            bail!(
                "{}metric {x} unknown; use one of {}",
                at(&m.places.metrics, i),
                METRICS.iter().map(|k| k.0).collect::<Vec<_>>().join(", ")
            );
        }
    }
    names("flow", &m.flows, &m.places.flows, "a table has one row per flow")
}

/// The grid's size from its axes alone, so a huge one is refused before
/// anything is listed; the error shows the product.
fn grid_size(m: &Manifest) -> Result<()> {
    let mut axes: Vec<(u64, String)> = m
        .params
        .iter()
        .map(|p| (p.values.len() as u64, format!("{} ({})", p.values.len(), p.key)))
        .collect();
    axes.push((m.seeds.count(), format!("{} seeds", m.seeds.count())));
    let product = axes
        .iter()
        .try_fold(1u128, |acc, (n, _)| acc.checked_mul(u128::from(*n)));
    if product.is_none_or(|p| p > MAX_RUNS as u128) {
        bail!(
            "the grid has {} = {} runs, more than the limit of {MAX_RUNS}; sweep fewer values or seeds, \
             or split the sweep into several",
            axes.iter().map(|a| a.1.as_str()).collect::<Vec<_>>().join(" × "),
            product.map_or("more than 2^128".into(), |p| p.to_string())
        );
    }
    Ok(())
}

fn seeds(m: &Manifest) -> Result<()> {
    let at = prefix(&m.places.seeds);
    let list = match &m.seeds {
        Seeds::Count(0) => bail!("{at}seeds: no seeds; use a count >= 1 or a non-empty list"),
        Seeds::Count(_) => return Ok(()),
        Seeds::List(v) if v.is_empty() => bail!("{at}seeds: no seeds; use a count >= 1 or a non-empty list"),
        Seeds::List(v) => v,
    };
    let mut seen = HashSet::new();
    for &s in list {
        if s > MAX_SEED {
            bail!(
                "{at}seed {s} is more than the largest seed, {MAX_SEED} (2^63 - 1: sweep manifests and \
                 scenarios are TOML, whose integers are signed 64-bit); use a smaller seed"
            );
        }
        if !seen.insert(s) {
            bail!(
                "{at}seed {s} is given twice; give each seed once (a repeated seed reruns the same \
                 simulation and counts it twice in the mean and its interval)"
            );
        }
    }
    Ok(())
}

/// Each run's seed is set after the swept values and the fixed `set`, so
/// a `scenario.seed` there would be overridden by it in every run.
fn is_seed_key(key: &str) -> bool {
    key.trim() == "scenario.seed"
}

const SEED_HINT: &str = "every run's seed comes from `seeds` (set last, so this would be ignored and every \
                         cell would run the same seeds); use `seeds = [1, 7, 9]` in a manifest or --seeds 1,7,9";

fn params(m: &Manifest) -> Result<()> {
    let mut keys = HashSet::new();
    for (i, p) in m.params.iter().enumerate() {
        let here = at(&m.places.params, i);
        let key = &p.key;
        if is_seed_key(key) {
            bail!("{here}param {key}: {SEED_HINT}");
        }
        if p.values.is_empty() {
            bail!("{here}param {key}: no values");
        }
        if !keys.insert(key.trim()) {
            bail!("{here}param {key} is swept twice; give all its values in one entry");
        }
        let vplaces = m.places.values.get(i).map_or(&[][..], Vec::as_slice);
        let mut seen = HashMap::new();
        for (j, v) in p.values.iter().enumerate() {
            let text = value_text(v);
            if let Some(first) = seen.insert(text.clone(), j) {
                bail!(
                    "{}param {key}: value {text} is given twice (values {} and {}); give each value once \
                     (a repeated value runs the same simulations twice and counts them twice in its cell)",
                    at(vplaces, j),
                    first + 1,
                    j + 1
                );
            }
        }
    }
    Ok(())
}

fn fixed_sets(m: &Manifest) -> Result<()> {
    for (i, s) in m.set.iter().enumerate() {
        if s.split_once('=').is_some_and(|(k, _)| is_seed_key(k)) {
            bail!("{}set {s}: {SEED_HINT}", at(&m.places.set, i));
        }
    }
    Ok(())
}

/// Names of a list (metrics, flows) given once each.
fn names(what: &str, list: &[String], places: &[String], why: &str) -> Result<()> {
    let mut seen = HashSet::new();
    for (i, x) in list.iter().enumerate() {
        if !seen.insert(x) {
            bail!(
                "{}{what} {x} is given twice; give each {what} once ({why})",
                at(places, i)
            );
        }
    }
    Ok(())
}

/// At most this many names in a list of the scenario's flows.
const SHOW_NAMES: usize = 20;

impl Sweep {
    /// Check the sweep against its scenario before anything runs: the
    /// fixed overrides, every value of every parameter, each once with the
    /// fixed overrides (not once per row: a typo in a million-row grid is
    /// found in one load, not after a million), and the flows the tables
    /// are to show. A failure names the manifest line or the flag.
    pub fn check_scenario(&self) -> Result<()> {
        let m = &self.manifest;
        let base = SetBase::new(&self.scenario_label, &self.scenario_text);
        let sc = base.load(&m.set).map_err(|e| match set_index(&e, &m.set) {
            Some(k) => located(&e, &at(&m.places.set, k), &format!("set {}", m.set[k])),
            None => anyhow!("{e}"),
        })?;
        let known: HashSet<&str> = sc.flows.iter().map(|f| f.name.as_str()).collect();
        for (i, f) in m.flows.iter().enumerate() {
            if !known.contains(f.as_str()) {
                let names: Vec<&str> = sc
                    .flows
                    .iter()
                    .take(SHOW_NAMES)
                    .map(|f| f.name.as_str())
                    .collect();
                let more = sc.flows.len().saturating_sub(SHOW_NAMES);
                bail!(
                    "{}flow {f} is not in the scenario ({}); its flows: {}{}",
                    at(&m.places.flows, i),
                    self.scenario_label,
                    names.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                );
            }
        }
        let mut sets = m.set.clone();
        for (i, p) in m.params.iter().enumerate() {
            let vplaces = m.places.values.get(i).map_or(&[][..], Vec::as_slice);
            for (j, v) in p.values.iter().enumerate() {
                sets.push(format!("{}={}", p.key, value_text(v)));
                let r = base.load(&sets);
                if let Err(e) = r {
                    let what = format!("param {} value {}", p.key, value_text(v));
                    return Err(match set_index(&e, &sets) {
                        Some(k) if k == m.set.len() => located(&e, &at(vplaces, j), &what),
                        _ => anyhow!("{}{what}: {e}", at(vplaces, j)),
                    });
                }
                sets.pop();
            }
        }
        Ok(())
    }
}

/// The override a loader error is about: the loader names it
/// `--set OVERRIDE` (the last of equal ones: later overrides win).
fn set_index(e: &ScenarioError, sets: &[String]) -> Option<usize> {
    let s = e.file.strip_prefix("--set ")?;
    sets.iter().rposition(|x| x == s)
}

/// A loader error about one override, named by where it was written
/// (`PLACE: `) and what it is rather than as a `--set` it may not be.
fn located(e: &ScenarioError, at: &str, what: &str) -> anyhow::Error {
    let hint = if e.hint.is_empty() {
        String::new()
    } else {
        format!("\n  hint: {}", e.hint)
    };
    anyhow!("{at}{what}: {}{hint}", e.msg)
}
