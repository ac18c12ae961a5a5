//! Parameter sweeps: a grid of `--set` overrides × seeds over one scenario,
//! run on a local pool of threads (simulations are deterministic and
//! independent, so a run is a pure function of its row), gathered into one
//! table with a mean and a Student-t 95 % confidence interval per cell, and
//! plotted per swept parameter. This is the workflow of ns-3's SEM and of
//! any batch-scheduler user: every run is a row of a manifest, a finished
//! row is a file in the output directory (so an interrupted sweep resumes
//! where it stopped), and the same manifest can be handed to Slurm as a job
//! array (`SLURM_ARRAY_TASK_ID` selects the row) or to GNU parallel as a
//! job list.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use qosnet_scenario::load_str;
use qosnet_scenario::results::{FlowResult, Results};
use qosnet_sim::Sim;

use crate::run::for_each;

mod check;
pub use check::Places;

/// The metrics a sweep records for every flow of every run, in the order
/// of the tables: (name, column with unit, what it is).
pub const METRICS: &[(&str, &str, &str)] = &[
    (
        "delay_mean",
        "delay_mean_us",
        "mean one-way delay (RTT for echo flows), µs",
    ),
    ("delay_p99", "delay_p99_us", "99th percentile delay, µs"),
    ("delay_max", "delay_max_us", "maximum delay, µs"),
    (
        "jitter",
        "jitter_us",
        "max − min delay (the TDP paper's jitter), µs",
    ),
    ("loss", "loss_pct", "lost / sent, %"),
    ("throughput", "throughput_mbps", "received IP throughput, Mb/s"),
];

/// Name of the normalised manifest a sweep writes into its output
/// directory; Slurm tasks and job lists run rows of this file.
pub const MANIFEST_FILE: &str = "sweep.toml";
/// The scenario copied beside it, so the directory is self-contained (it
/// can be copied to a cluster's shared file system as it is).
pub const SCENARIO_FILE: &str = "scenario.toml";

/// One swept parameter: a scenario key and the values it takes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Param {
    pub key: String,
    pub values: Vec<toml::Value>,
}

/// Seeds: a count (`seeds = 5` means 1..=5) or an explicit list.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Seeds {
    Count(u64),
    List(Vec<u64>),
}

impl Default for Seeds {
    fn default() -> Self {
        Seeds::Count(1)
    }
}

/// Most runs one sweep may have (grid cells x seeds): a bigger grid is
/// refused before it is expanded.
pub const MAX_RUNS: usize = 1_000_000;

/// Most simulations a local sweep runs at once (`-j`): far more threads
/// than cores only costs memory, and past a process limit the system
/// refuses them.
pub const MAX_JOBS: usize = 1024;

/// The largest seed: manifests are TOML, whose integers are signed 64-bit.
pub const MAX_SEED: u64 = i64::MAX as u64;

impl Seeds {
    pub fn list(&self) -> Vec<u64> {
        match self {
            Seeds::Count(n) => (1..=*n).collect(),
            Seeds::List(v) => v.clone(),
        }
    }

    /// How many seeds, without listing them (a count may be huge until
    /// [`Manifest::check`] refuses it).
    pub fn count(&self) -> u64 {
        match self {
            Seeds::Count(n) => *n,
            Seeds::List(v) => v.len() as u64,
        }
    }

    /// The `j`-th seed (`j < count()`).
    fn nth(&self, j: usize) -> u64 {
        match self {
            Seeds::Count(_) => j as u64 + 1,
            Seeds::List(v) => v[j],
        }
    }
}

/// A sweep manifest (TOML; docs/sweep.md documents it).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Scenario file: relative to the manifest's directory, else to the
    /// working directory, else a scenario shipped in the binary.
    pub scenario: String,
    /// Output directory, relative to the manifest's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
    #[serde(default)]
    pub seeds: Seeds,
    /// Overrides applied to every run (before the swept ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<String>,
    /// Metrics of the tables and plots (names of [`METRICS`]); all when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<String>,
    /// Flows of the tables and plots; all when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<String>,
    #[serde(default, rename = "param")]
    pub params: Vec<Param>,
    /// Where each part was written, for error messages (not written out).
    #[serde(skip)]
    pub places: Places,
}

/// A `toml::Value` as the right-hand side of a `--set` (strings bare: the
/// loader takes what is not valid TOML as a string, and quotes the rest).
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A command-line value: TOML if it parses as a TOML value, else a string.
pub fn parse_value(s: &str) -> toml::Value {
    let s = s.trim();
    toml::from_str::<BTreeMap<String, toml::Value>>(&format!("v = {s}"))
        .ok()
        .and_then(|mut m| m.remove("v"))
        .unwrap_or_else(|| toml::Value::String(s.to_string()))
}

/// `KEY=V1,V2,...` from the command line.
pub fn parse_param(s: &str) -> Result<Param> {
    let (key, vals) = s
        .split_once('=')
        .ok_or_else(|| anyhow!("--param {s}: expected KEY=V1,V2,... (e.g. flow.f1.rate=1Mb/s,2Mb/s)"))?;
    let key = key.trim();
    if key.is_empty() || vals.trim().is_empty() {
        bail!("--param {s}: expected KEY=V1,V2,... (e.g. flow.f1.rate=1Mb/s,2Mb/s)");
    }
    Ok(Param {
        key: key.to_string(),
        values: vals.split(',').map(parse_value).collect(),
    })
}

/// `5` (seeds 1..=5) or `1,7,9`.
pub fn parse_seeds(s: &str) -> Result<Seeds> {
    if !s.contains(',') {
        if let Ok(n) = s.trim().parse::<u64>() {
            return Ok(Seeds::Count(n));
        }
    }
    s.split(',')
        .map(|x| x.trim().parse::<u64>())
        .collect::<Result<Vec<_>, _>>()
        .map(Seeds::List)
        .map_err(|_| anyhow!("--seeds {s}: expected a count (5) or a list (1,7,9)"))
}

/// One run of the grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub index: usize,
    /// Swept parameter values, in the manifest's parameter order.
    pub params: Vec<(String, String)>,
    pub seed: u64,
    /// Every override of the run: the manifest's `set`, the swept values,
    /// then the seed.
    pub sets: Vec<String>,
}

impl Manifest {
    /// Parse a manifest file; errors name its lines.
    pub fn from_file(path: &Path) -> Result<Manifest> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Manifest::parse(&text, &path.display().to_string())
    }

    /// Parse and check manifest text; `path` names it in messages.
    pub fn parse(text: &str, path: &str) -> Result<Manifest> {
        let mut m: Manifest = toml::from_str(text).map_err(|e| {
            // The parser leaves some lexical errors (a lone \r, a control
            // character, a value missing at the end) without a message.
            let at = e.span().map_or(0, |s| s.start);
            let what = qosnet_scenario::load::toml_message(e.message(), text, at);
            let shown = e.to_string();
            match shown.trim_end() {
                s if e.message().trim().is_empty() => anyhow!("{path}: {s}\n{what}"),
                s => anyhow!("{path}: {s}"),
            }
        })?;
        m.places = Places::of_file(path, text);
        // Errors about a key name its line already; the others (the
        // grid's size) are the file's as a whole.
        m.check().map_err(|e| {
            if format!("{e:#}").starts_with(path) {
                e
            } else {
                e.context(path.to_string())
            }
        })?;
        Ok(m)
    }

    /// Is this TOML text a manifest (a top-level `scenario` string) rather
    /// than a scenario (a `[scenario]` table)?
    pub fn looks_like(text: &str) -> bool {
        toml::from_str::<toml::Table>(text)
            .map(|t| matches!(t.get("scenario"), Some(toml::Value::String(_))))
            .unwrap_or(false)
    }

    /// Everything about the manifest that needs no scenario: a bounded
    /// grid (refused before it is expanded), seeds, parameters, metrics
    /// and flows given once each. Errors name the place (`FILE:LINE` or
    /// the flag); [`Sweep::check_scenario`] checks the rest.
    pub fn check(&self) -> Result<()> {
        check::manifest(self)
    }

    /// How many runs: the product of the parameters' value counts and the
    /// seeds (saturating; [`Manifest::check`] bounds it by [`MAX_RUNS`]).
    pub fn runs(&self) -> usize {
        let seeds = usize::try_from(self.seeds.count()).unwrap_or(usize::MAX);
        self.params
            .iter()
            .fold(seeds, |acc, p| acc.saturating_mul(p.values.len()))
    }

    /// Row `index` of the grid, computed alone (a million-row sweep need
    /// not hold its rows): parameters outermost in manifest order, the
    /// last parameter varying fastest, seeds innermost.
    pub fn row(&self, index: usize) -> Option<Row> {
        let n_seeds = usize::try_from(self.seeds.count()).ok().filter(|&n| n > 0)?;
        if index >= self.runs() {
            return None;
        }
        let seed = self.seeds.nth(index % n_seeds);
        let mut cell = index / n_seeds;
        let mut params = vec![(String::new(), String::new()); self.params.len()];
        for (slot, p) in params.iter_mut().zip(&self.params).rev() {
            let v = &p.values[cell % p.values.len()];
            cell /= p.values.len();
            *slot = (p.key.clone(), value_text(v));
        }
        let mut sets = self.set.clone();
        sets.extend(params.iter().map(|(k, v)| format!("{k}={v}")));
        sets.push(format!("scenario.seed={seed}"));
        Some(Row {
            index,
            params,
            seed,
            sets,
        })
    }

    /// The grid, parameters outermost in manifest order, seeds innermost.
    pub fn rows(&self) -> Vec<Row> {
        (0..self.runs()).filter_map(|i| self.row(i)).collect()
    }

    /// The metrics of the tables: the chosen ones in their order (the
    /// first is plotted), else all.
    pub fn metric_names(&self) -> Vec<&'static str> {
        if self.metrics.is_empty() {
            return METRICS.iter().map(|m| m.0).collect();
        }
        self.metrics
            .iter()
            .filter_map(|x| METRICS.iter().find(|m| m.0 == x).map(|m| m.0))
            .collect()
    }
}

/// Where a manifest's relative paths point from.
fn base_dir(manifest: &Path) -> PathBuf {
    manifest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The scenario text of a manifest: `(label, text)`.
pub fn scenario_text(scenario: &str, base: Option<&Path>) -> Result<(String, String)> {
    let mut tried = Vec::new();
    if let Some(b) = base {
        let p = b.join(scenario);
        if p.is_file() {
            let t = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
            return Ok((p.display().to_string(), t));
        }
        tried.push(p.display().to_string());
    }
    let p = Path::new(scenario);
    if p.is_file() {
        let t = std::fs::read_to_string(p).with_context(|| format!("reading {scenario}"))?;
        return Ok((scenario.to_string(), t));
    }
    if let Some(e) = crate::find_scenario(scenario) {
        return Ok((format!("<embedded {}>", e.path), e.text.to_string()));
    }
    tried.push(scenario.to_string());
    bail!(
        "scenario {scenario} not found (tried {}); give a scenario file or a shipped scenarios/... path",
        tried.join(", ")
    )
}

/// A sweep ready to run: the manifest with its scenario text, and the
/// output directory.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub manifest: Manifest,
    pub scenario_label: String,
    pub scenario_text: String,
    pub out: PathBuf,
}

impl Sweep {
    /// From a manifest file; `out` (command line) wins over the manifest's.
    pub fn from_manifest(path: &Path, m: Manifest, out: Option<PathBuf>) -> Result<Sweep> {
        let base = base_dir(path);
        let (label, text) = scenario_text(&m.scenario, Some(&base))?;
        let out = match (out, &m.out) {
            (Some(o), _) => o,
            (None, Some(o)) => base.join(o),
            (None, None) => bail!(
                "{}: no output directory; give --out DIR or `out = \"DIR\"` in the manifest",
                path.display()
            ),
        };
        Ok(Sweep {
            manifest: m,
            scenario_label: label,
            scenario_text: text,
            out,
        })
    }

    /// Write the normalised manifest and the scenario copy into the output
    /// directory; refuse a directory whose runs are of another scenario
    /// (they would be mixed into this one's table). Runs are recorded by
    /// their overrides, not their row number, so a grown or reordered grid
    /// in the same directory reuses every run it shares with the old one.
    pub fn prepare(&self) -> Result<PathBuf> {
        std::fs::create_dir_all(self.out.join("runs"))
            .with_context(|| format!("creating {}", self.out.display()))?;
        let mut m = self.manifest.clone();
        m.scenario = SCENARIO_FILE.into();
        m.out = Some(".".into());
        let text = format!(
            "# qosnet sweep manifest, written by `qosnet sweep` (scenario: {}).\n# Run one row: qosnet sweep --run-row N {MANIFEST_FILE}; all rows and the tables: qosnet sweep {MANIFEST_FILE}\n{}",
            self.scenario_label,
            toml::to_string(&m).context("writing the manifest")?
        );
        let mpath = self.out.join(MANIFEST_FILE);
        let spath = self.out.join(SCENARIO_FILE);
        if let Ok(old) = std::fs::read_to_string(&spath) {
            if old != self.scenario_text {
                bail!(
                    "{} holds runs of another scenario (its {SCENARIO_FILE} differs from {}); use another --out, or remove it to start over",
                    self.out.display(),
                    self.scenario_label
                );
            }
        }
        write_atomic(&spath, self.scenario_text.as_bytes())?;
        write_atomic(&mpath, text.as_bytes())?;
        Ok(mpath)
    }

    /// A run's record file: named by a hash of its overrides (FNV-1a, 64
    /// bits), which the record also holds in full to rule out collisions.
    fn record_path(&self, row: &Row) -> PathBuf {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in row.sets.join("\n").bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        self.out.join("runs").join(format!("{h:016x}.json"))
    }

    /// The finished record of a row, if there is one for these overrides.
    pub fn finished(&self, row: &Row) -> Result<Option<RunRecord>> {
        let p = self.record_path(row);
        let Ok(text) = std::fs::read_to_string(&p) else {
            return Ok(None);
        };
        let r: RunRecord = match serde_json::from_str(&text) {
            Ok(r) => r,
            // A torn file cannot happen (records are renamed into place),
            // but a hand-edited one can: redo the row.
            Err(_) => return Ok(None),
        };
        if r.sets != row.sets {
            // Two override lists of one hash: keep the old record, redo
            // this one (it overwrites; both are correct records).
            return Ok(None);
        }
        Ok(Some(r))
    }

    /// Simulate one row and record it.
    pub fn run_row(&self, row: &Row) -> Result<RunRecord> {
        let t0 = std::time::Instant::now();
        let sc = load_str(&self.scenario_label, &self.scenario_text, &row.sets)
            .map_err(|e| anyhow!("row {}: {e}", row.index))?;
        let mut sim = Sim::new(sc).map_err(|e| anyhow!("row {}: {e}", row.index))?;
        sim.set_progress(false);
        let r = sim.run();
        let rec = RunRecord::new(row, &r, t0.elapsed().as_secs_f64());
        let json = serde_json::to_string_pretty(&rec)?;
        std::fs::create_dir_all(self.out.join("runs"))
            .with_context(|| format!("creating {}", self.out.display()))?;
        write_atomic(&self.record_path(row), json.as_bytes())?;
        Ok(rec)
    }

    /// Run every unfinished row on `jobs` threads (at most one per row).
    /// `log` receives one line per finished run. Rows are made one at a
    /// time and records are not kept: they are on disk for [`Sweep::gather`].
    pub fn run_all(&self, jobs: usize, log: &(dyn Fn(&str) + Sync)) -> Result<RunSummary> {
        self.prepare()?;
        let runs = self.manifest.runs();
        let mut todo = Vec::new();
        for i in 0..runs {
            let row = self.row(i)?;
            if self.finished(&row)?.is_none() {
                todo.push(i);
            }
        }
        let total = todo.len();
        let done = std::sync::atomic::AtomicUsize::new(0);
        let t0 = std::time::Instant::now();
        for_each(jobs, total, |t| {
            let row = self.row(todo[t])?;
            let rec = self.run_row(&row)?;
            let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            log(&format!(
                "[{k}/{total}] row {} ({}) seed {} in {:.2} s",
                row.index,
                row.params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                row.seed,
                rec.wall_s
            ));
            Ok(())
        })?;
        Ok(RunSummary {
            rows: runs,
            ran: total,
            skipped: runs - total,
            wall_s: t0.elapsed().as_secs_f64(),
        })
    }

    /// Row `n` of the manifest, or an error naming the rows there are.
    pub fn row(&self, n: usize) -> Result<Row> {
        let runs = self.manifest.runs();
        self.manifest.row(n).ok_or_else(|| {
            anyhow!(
                "--run-row {n}: the sweep has rows 0..={} ({runs} runs)",
                runs.saturating_sub(1)
            )
        })
    }

    /// Gather every finished row into the tables and plots.
    pub fn gather(&self) -> Result<Table> {
        let rows = self.manifest.rows();
        let mut recs = Vec::with_capacity(rows.len());
        let mut missing = Vec::new();
        for r in &rows {
            match self.finished(r)? {
                Some(rec) => recs.push(rec),
                None => missing.push(r.index),
            }
        }
        let t = Table::build(&self.manifest, &rows, &recs, missing);
        write_atomic(&self.out.join("results.csv"), t.csv().as_bytes())?;
        write_atomic(
            &self.out.join("results.json"),
            serde_json::to_string_pretty(&t.json(&self.manifest, &self.scenario_label))?.as_bytes(),
        )?;
        for p in &self.manifest.params {
            if p.values.len() < 2 {
                continue;
            }
            let file = self.out.join(format!("{}.svg", file_stem(&p.key)));
            crate::plot::sweep_curve(&file, &t, &p.key)?;
        }
        Ok(t)
    }
}

/// What [`Sweep::run_all`] did.
#[derive(Clone, Debug)]
pub struct RunSummary {
    pub rows: usize,
    pub ran: usize,
    pub skipped: usize,
    pub wall_s: f64,
}

/// A parameter key as a file name (`defaults.flow.rate` → itself;
/// `node.*.scheduler` → `node._.scheduler`).
pub fn file_stem(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Write through a temporary file and a rename, so a sweep killed while
/// writing leaves either the old file or the new one, never half of one.
/// The temporary file is the tempfile crate's (a fresh random name, created
/// exclusively): two writers of one path, threads or Slurm tasks on other
/// hosts, never share one, and nobody can plant it in advance.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut b = tempfile::Builder::new();
    b.prefix(".tmp-");
    // Like fs::write: the umask decides, not tempfile's 0600 (a cluster's
    // shared directory is read by other users).
    #[cfg(unix)]
    b.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut tmp = b
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("writing {}", tmp.path().display()))?;
    tmp.persist(path).map_err(|e| {
        anyhow!(
            "renaming {} to {}: {}",
            e.file.path().display(),
            path.display(),
            e.error
        )
    })?;
    Ok(())
}

/// One finished run: its overrides and every flow's metrics.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    pub row: usize,
    pub seed: u64,
    pub params: Vec<(String, String)>,
    pub sets: Vec<String>,
    /// Per flow, per metric name of [`METRICS`].
    pub flows: BTreeMap<String, BTreeMap<String, f64>>,
    pub wall_s: f64,
}

/// A flow's value of a metric.
pub fn flow_metric(f: &FlowResult, metric: &str) -> f64 {
    match metric {
        "delay_mean" => f.delay_ns.mean / 1e3,
        "delay_p99" => f.delay_ns.p99 as f64 / 1e3,
        "delay_max" => f.delay_ns.max as f64 / 1e3,
        "jitter" => f.jitter_ns as f64 / 1e3,
        "loss" if f.sent > 0 => 100.0 * f.lost as f64 / f.sent as f64,
        "loss" => 0.0,
        "throughput" => f.throughput_bps / 1e6,
        _ => f64::NAN,
    }
}

impl RunRecord {
    pub fn new(row: &Row, r: &Results, wall_s: f64) -> RunRecord {
        let flows = r
            .flows
            .iter()
            .map(|f| {
                let m = METRICS
                    .iter()
                    .map(|m| (m.0.to_string(), flow_metric(f, m.0)))
                    .collect();
                (f.name.clone(), m)
            })
            .collect();
        RunRecord {
            row: row.index,
            seed: row.seed,
            params: row.params.clone(),
            sets: row.sets.clone(),
            flows,
            wall_s,
        }
    }
}

/// Sample statistics of one metric in one cell.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Stat {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); `None` for one sample.
    pub sd: Option<f64>,
    /// Half-width of the 95 % Student-t confidence interval of the mean;
    /// `None` for one sample.
    pub ci95: Option<f64>,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    pub fn of(xs: &[f64]) -> Option<Stat> {
        let n = xs.len();
        if n == 0 {
            return None;
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let (sd, ci95) = if n > 1 {
            let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
            let sd = var.sqrt();
            (Some(sd), Some(t975(n - 1) * sd / (n as f64).sqrt()))
        } else {
            (None, None)
        };
        Some(Stat {
            n,
            mean,
            sd,
            ci95,
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom: the
/// exact table values to 30, then the Cornish–Fisher expansion around the
/// normal quantile (error below 1e-4 from 30 on).
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788,
        2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
        2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
    ];
    if df == 0 {
        return f64::NAN;
    }
    if df <= 30 {
        return T[df - 1];
    }
    let z: f64 = 1.959_963_984_540_054;
    let v = df as f64;
    let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
    z + (z3 + z) / (4.0 * v)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * v * v)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * v * v * v)
}

/// One cell of the grid (one combination of swept values) and one flow.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub params: Vec<(String, String)>,
    pub flow: String,
    pub stats: BTreeMap<String, Stat>,
}

/// The gathered sweep.
#[derive(Clone, Debug)]
pub struct Table {
    pub param_keys: Vec<String>,
    pub metrics: Vec<&'static str>,
    pub cells: Vec<Cell>,
    pub missing_rows: Vec<usize>,
}

impl Table {
    pub fn build(m: &Manifest, rows: &[Row], recs: &[RunRecord], missing_rows: Vec<usize>) -> Table {
        let metrics = m.metric_names();
        // Cells in grid order (the first row of each combination), and the
        // records of each: hashed, as a million-cell grid compared every
        // cell with every row and record (10^12 comparisons, a hang).
        let mut cell_of: std::collections::HashMap<&[(String, String)], usize> = Default::default();
        let mut combos: Vec<&[(String, String)]> = Vec::new();
        for r in rows {
            cell_of.entry(&r.params).or_insert_with(|| {
                combos.push(&r.params);
                combos.len() - 1
            });
        }
        let mut recs_of: Vec<Vec<&RunRecord>> = vec![Vec::new(); combos.len()];
        for r in recs {
            if let Some(&c) = cell_of.get(r.params.as_slice()) {
                recs_of[c].push(r);
            }
        }
        let wanted: std::collections::HashSet<&String> = m.flows.iter().collect();
        let mut cells = Vec::new();
        for (c, of_cell) in combos.into_iter().zip(recs_of) {
            let mut flows: Vec<String> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for r in &of_cell {
                for f in r.flows.keys() {
                    if (wanted.is_empty() || wanted.contains(f)) && seen.insert(f) {
                        flows.push(f.clone());
                    }
                }
            }
            for f in flows {
                let mut stats = BTreeMap::new();
                for &metric in &metrics {
                    let xs: Vec<f64> = of_cell
                        .iter()
                        .filter_map(|r| r.flows.get(&f).and_then(|x| x.get(metric)).copied())
                        .filter(|x| x.is_finite())
                        .collect();
                    if let Some(s) = Stat::of(&xs) {
                        stats.insert(metric.to_string(), s);
                    }
                }
                cells.push(Cell {
                    params: c.to_vec(),
                    flow: f,
                    stats,
                });
            }
        }
        Table {
            param_keys: m.params.iter().map(|p| p.key.clone()).collect(),
            metrics,
            cells,
            missing_rows,
        }
    }

    /// One line per cell and flow: the swept values, the flow, the number
    /// of runs, and per metric its mean and 95 % CI half-width.
    pub fn csv(&self) -> String {
        let mut s = String::new();
        let col = |m: &'static str| METRICS.iter().find(|x| x.0 == m).map(|x| x.1).unwrap_or(m);
        let mut head: Vec<String> = self.param_keys.clone();
        head.push("flow".into());
        head.push("n".into());
        for m in &self.metrics {
            head.push(format!("{}_mean", col(m)));
            head.push(format!("{}_ci95", col(m)));
        }
        let _ = writeln!(
            s,
            "{}",
            head.iter().map(|h| csv_field(h)).collect::<Vec<_>>().join(",")
        );
        for c in &self.cells {
            let mut f: Vec<String> = c.params.iter().map(|(_, v)| csv_field(v)).collect();
            f.push(csv_field(&c.flow));
            f.push(c.stats.values().map(|s| s.n).max().unwrap_or(0).to_string());
            for m in &self.metrics {
                match c.stats.get(*m) {
                    Some(st) => {
                        f.push(fmt_num(st.mean));
                        f.push(st.ci95.map(fmt_num).unwrap_or_default());
                    }
                    None => {
                        f.push(String::new());
                        f.push(String::new());
                    }
                }
            }
            let _ = writeln!(s, "{}", f.join(","));
        }
        s
    }

    pub fn json(&self, m: &Manifest, scenario: &str) -> serde_json::Value {
        serde_json::json!({
            "scenario": scenario,
            "seeds": m.seeds.list(),
            "set": m.set,
            "params": m.params.iter().map(|p| serde_json::json!({
                "key": p.key,
                "values": p.values.iter().map(value_text).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "metrics": self.metrics.iter().map(|name| {
                let (_, col, what) = METRICS.iter().find(|x| x.0 == *name).copied().unwrap_or((name, name, ""));
                serde_json::json!({"name": name, "column": col, "description": what})
            }).collect::<Vec<_>>(),
            "confidence": 0.95,
            "missing_rows": self.missing_rows,
            "cells": self.cells.iter().map(|c| serde_json::json!({
                "params": c.params.iter().cloned().collect::<BTreeMap<_, _>>(),
                "flow": c.flow,
                "stats": c.stats,
            })).collect::<Vec<_>>(),
        })
    }
}

fn fmt_num(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.to_string()
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Single-quote a word for POSIX shells.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A Slurm batch script running the manifest's rows as a job array, one
/// array task per row. `qosnet` is the binary the tasks run (`$QOSNET`
/// overrides it on the cluster); `manifest` the normalised manifest in the
/// output directory (both absolute: tasks start in the submit directory,
/// which need not be this one).
pub fn slurm_script(qosnet: &Path, manifest: &Path, rows: usize) -> String {
    let out = manifest.parent().unwrap_or(Path::new("."));
    let mq = sh_quote(&manifest.display().to_string());
    format!(
        "#!/bin/bash\n\
# qosnet sweep as a Slurm job array: array task N runs row N of\n\
# {m} and records it in runs/<hash of its settings>.json beside it (the directory\n\
# must be on a file system every node sees).\n\
#   submit:  sbatch {script}\n\
#   gather:  qosnet sweep {mq}   (tables and plots; finished rows are not redone)\n\
# Rows: {rows}. Slurm's MaxArraySize (often 1001) bounds --array; split larger\n\
# sweeps with --array=0-999 and --array=1000-..., or throttle with %N.\n\
#SBATCH --job-name=qosnet-sweep\n\
#SBATCH --array=0-{last}\n\
#SBATCH --ntasks=1\n\
#SBATCH --cpus-per-task=1\n\
#SBATCH --output={log}\n\
set -eu\n\
QOSNET=\"${{QOSNET:-}}\"\n\
[ -n \"$QOSNET\" ] || QOSNET={bin}\n\
exec \"$QOSNET\" sweep --run-row \"${{SLURM_ARRAY_TASK_ID:?run this script with sbatch, or set SLURM_ARRAY_TASK_ID}}\" {mq}\n",
        m = manifest.display(),
        script = sh_quote(&out.join("sweep.slurm").display().to_string()),
        last = rows.saturating_sub(1),
        log = out.join("slurm-%A_%a.log").display(),
        bin = sh_quote(&qosnet.display().to_string()),
    )
}

/// A job list for GNU parallel (`parallel -j N < jobs.txt`), one row a line.
pub fn parallel_jobs(qosnet: &Path, manifest: &Path, rows: usize) -> String {
    let b = sh_quote(&qosnet.display().to_string());
    let m = sh_quote(&manifest.display().to_string());
    (0..rows)
        .map(|i| format!("{b} sweep --run-row {i} {m}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(text: &str) -> Manifest {
        let m: Manifest = toml::from_str(text).unwrap();
        m.check().unwrap();
        m
    }

    #[test]
    fn grid_is_params_outer_seeds_inner() {
        let m = manifest(
            r#"
            scenario = "x.toml"
            seeds = 2
            set = ["scenario.duration=1s"]
            [[param]]
            key = "defaults.flow.rate"
            values = ["100pps", "200pps"]
            [[param]]
            key = "flow.f1.size"
            values = [100, 200, 300]
            "#,
        );
        let rows = m.rows();
        assert_eq!(rows.len(), 2 * 3 * 2);
        assert_eq!(
            rows[0].sets,
            [
                "scenario.duration=1s",
                "defaults.flow.rate=100pps",
                "flow.f1.size=100",
                "scenario.seed=1"
            ]
        );
        assert_eq!(rows[1].seed, 2);
        assert_eq!(rows[2].params[1], ("flow.f1.size".into(), "200".into()));
        assert_eq!(rows[11].params[0].1, "200pps");
        assert!(rows.iter().enumerate().all(|(i, r)| r.index == i));
    }

    #[test]
    fn manifests_are_checked() {
        let bad = |t: &str| {
            toml::from_str::<Manifest>(t)
                .map_err(|e| e.to_string())
                .and_then(|m| m.check().map_err(|e| e.to_string()))
        };
        assert!(bad("scenario = \"x\"\nseeds = 0")
            .unwrap_err()
            .contains("no seeds"));
        assert!(bad("scenario = \"x\"\nmetrics = [\"speed\"]")
            .unwrap_err()
            .contains("metric speed unknown"));
        assert!(bad("scenario = \"x\"\n[[param]]\nkey = \"a\"\nvalues = []")
            .unwrap_err()
            .contains("no values"));
        assert!(bad("scenario = \"x\"\nsed = 1").is_err());
        // Huge grids are refused before anything is expanded.
        assert!(bad("scenario = \"x\"\nseeds = 100000000000")
            .unwrap_err()
            .contains("100000000000 seeds = 100000000000 runs, more than the limit of 1000000"));
        assert!(bad("scenario = \"x\"\nseeds = 1000\n[[param]]\nkey = \"a\"\nvalues = [1, 2]").is_ok());
        assert!(Manifest::looks_like("scenario = \"x.toml\""));
        assert!(!Manifest::looks_like("[scenario]\nname = \"x\""));
    }

    /// A manifest file's refusals name the line of what is refused.
    #[test]
    fn refusals_name_the_manifest_line() {
        let dir = tempfile::tempdir().unwrap();
        let refusal = |body: &str| {
            let p = dir.path().join("m.toml");
            std::fs::write(&p, format!("scenario = \"x.toml\"\nout = \"o\"\n{body}")).unwrap();
            Manifest::from_file(&p).unwrap_err().to_string()
        };
        let e = refusal("seeds = [3, 1, 3]");
        assert!(e.contains("m.toml:3: seed 3 is given twice"), "{e}");
        let e = refusal("[[param]]\nkey = \"k\"\nvalues = [\n  1,\n  2,\n  1,\n]");
        assert!(
            e.contains("m.toml:8: param k: value 1 is given twice (values 1 and 3)"),
            "{e}"
        );
        // 100 and "100" are the same override (k=100).
        let e = refusal("[[param]]\nkey = \"k\"\nvalues = [100, \"100\"]");
        assert!(e.contains("m.toml:5: param k: value 100 is given twice"), "{e}");
        let e = refusal("metrics = [\"jitter\",\n \"jitter\"]");
        assert!(e.contains("m.toml:4: metric jitter is given twice"), "{e}");
        let e = refusal("flows = [\"f1\", \"f1\"]");
        assert!(e.contains("m.toml:3: flow f1 is given twice"), "{e}");
        let e = refusal("\n[[param]]\nkey = \"scenario.seed\"\nvalues = [1, 2]");
        assert!(
            e.contains("m.toml:5: param scenario.seed: every run's seed comes from `seeds`"),
            "{e}"
        );
        let e = refusal("set = [\"scenario.duration=1s\", \" scenario.seed = 4\"]");
        assert!(
            e.contains("m.toml:3: set  scenario.seed = 4: every run's seed"),
            "{e}"
        );
        let e = refusal("[[param]]\nkey = \"a\"\nvalues = [1]\n[[param]]\nkey = \"a\"\nvalues = [2]");
        assert!(e.contains("m.toml:7: param a is swept twice"), "{e}");
        // A seed TOML cannot hold is refused with the limit, wherever it
        // comes from (a manifest cannot even spell it).
        let m = Manifest {
            seeds: parse_seeds("1,18446744073709551615").unwrap(),
            ..manifest("scenario = \"x\"")
        };
        let e = m.check().unwrap_err().to_string();
        assert!(
            e.contains("seed 18446744073709551615 is more than the largest seed, 9223372036854775807"),
            "{e}"
        );
        assert!(Manifest {
            seeds: Seeds::List(vec![MAX_SEED]),
            ..m
        }
        .check()
        .is_ok());
    }

    /// The grid's size is checked from its axes, and the refusal shows
    /// the product.
    #[test]
    fn grid_limit_shows_the_product() {
        let m: Manifest = toml::from_str(
            "scenario = \"x\"\nseeds = 200000\n[[param]]\nkey = \"a\"\nvalues = [1, 2, 3, 4, 5]\n[[param]]\nkey = \"b\"\nvalues = [1, 2]",
        )
        .unwrap();
        let e = m.check().unwrap_err().to_string();
        assert!(
            e.contains(
                "the grid has 5 (a) × 2 (b) × 200000 seeds = 2000000 runs, more than the limit of 1000000"
            ),
            "{e}"
        );
        assert_eq!(m.runs(), 2_000_000);
    }

    /// The scenario is loaded once per override and value, before any row
    /// runs; refusals name the line or flag.
    #[test]
    fn sweep_is_checked_against_its_scenario() {
        let dir = tempfile::tempdir().unwrap();
        let sweep = |body: &str| {
            let p = dir.path().join("m.toml");
            let text = format!("scenario = \"scenarios/tdp-icc2006/fifo-482.toml\"\nout = \"o\"\n{body}");
            std::fs::write(&p, text).unwrap();
            let m = Manifest::from_file(&p).unwrap();
            Sweep::from_manifest(&p, m, None).unwrap().check_scenario()
        };
        assert!(sweep(
            "flows = [\"f1234\"]\n[[param]]\nkey = \"defaults.flow.rate\"\nvalues = [\"1pps\", \"2pps\"]"
        )
        .is_ok());
        let e = sweep("flows = [\"f1234\", \"f9\"]").unwrap_err().to_string();
        assert!(e.contains("m.toml:3: flow f9 is not in the scenario"), "{e}");
        assert!(e.contains("its flows: f1234, f123, f234, f341, f412"), "{e}");
        let e = sweep("set = [\"scenario.duration=1s\",\n  \"flow.nope.size=100\"]")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("m.toml:4: set flow.nope.size=100: no flow named `nope`"),
            "{e}"
        );
        let e = sweep("[[param]]\nkey = \"defaults.flow.rate\"\nvalues = [\"1pps\",\n \"fast\"]")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("m.toml:6: param defaults.flow.rate value fast: `fast` is not a rate"),
            "{e}"
        );
        // A value that makes the scenario itself invalid names the value too.
        let e = sweep("[[param]]\nkey = \"scenario.duration\"\nvalues = [\"2s\", \"1ms\"]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("m.toml:5: param scenario.duration value 1ms: "), "{e}");
    }

    /// Concurrent writers of one file (two rows of one record, two Slurm
    /// tasks) each have their own temporary file: every write succeeds and
    /// the file is one whole write. With one temporary name per process,
    /// a writer's rename found its file already renamed by another.
    #[test]
    fn concurrent_writes_use_their_own_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..200 {
                        write_atomic(path, &[b'a' + t; 4096]).unwrap();
                    }
                });
            }
        });
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() == 4096 && bytes.iter().all(|&b| b == bytes[0]));
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "temporary files left"
        );
    }

    /// Rows and records are grouped by hashing: a 50 000-cell table was
    /// 2.5e9 comparisons of parameter lists (and a 1e6-cell one 1e12).
    #[test]
    fn big_tables_are_built_in_linear_time() {
        let values: Vec<toml::Value> = (0..50_000).map(toml::Value::Integer).collect();
        let m = Manifest {
            params: vec![Param {
                key: "k".into(),
                values,
            }],
            ..manifest("scenario = \"x\"\nmetrics = [\"jitter\"]")
        };
        let rows = m.rows();
        let recs: Vec<RunRecord> = rows
            .iter()
            .map(|r| RunRecord {
                row: r.index,
                seed: r.seed,
                params: r.params.clone(),
                sets: r.sets.clone(),
                flows: [("f".to_string(), [("jitter".to_string(), 1.0)].into())].into(),
                wall_s: 0.0,
            })
            .collect();
        let t0 = std::time::Instant::now();
        let t = Table::build(&m, &rows, &recs, Vec::new());
        assert_eq!(t.cells.len(), 50_000);
        assert!(t0.elapsed().as_secs_f64() < 5.0, "{:?}", t0.elapsed());
    }

    #[test]
    fn command_line_params_and_seeds() {
        let p = parse_param("flow.f1.rate=1Mb/s,2Mb/s,4Mb/s").unwrap();
        assert_eq!(p.key, "flow.f1.rate");
        assert_eq!(
            p.values.iter().map(value_text).collect::<Vec<_>>(),
            ["1Mb/s", "2Mb/s", "4Mb/s"]
        );
        let p = parse_param("flow.f1.size=100, 200").unwrap();
        assert_eq!(p.values, [toml::Value::Integer(100), toml::Value::Integer(200)]);
        assert!(parse_param("flow.f1.size").is_err());
        assert!(parse_param("=1,2").is_err());
        assert_eq!(parse_seeds("3").unwrap().list(), [1, 2, 3]);
        assert_eq!(parse_seeds("4,9").unwrap().list(), [4, 9]);
        assert!(parse_seeds("x").is_err());
    }

    /// Against published t tables (two-sided 95 %).
    #[test]
    fn student_t_quantiles() {
        for (df, t) in [
            (1, 12.706),
            (4, 2.776),
            (9, 2.262),
            (30, 2.042),
            (40, 2.021),
            (60, 2.000),
            (120, 1.980),
        ] {
            assert!((t975(df) - t).abs() < 1.5e-3, "df {df}: {} vs {t}", t975(df));
        }
        assert!((t975(100_000) - 1.95996).abs() < 1e-4);
        // Continuity where the table hands over to the expansion.
        assert!((t975(31) - 2.0395).abs() < 5e-4);
    }

    #[test]
    fn stats_mean_and_interval() {
        let s = Stat::of(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(s.n, 5);
        assert!((s.mean - 3.0).abs() < 1e-12);
        let sd = 2.5f64.sqrt();
        assert!((s.sd.unwrap() - sd).abs() < 1e-12);
        assert!((s.ci95.unwrap() - 2.7764 * sd / 5f64.sqrt()).abs() < 1e-9);
        let one = Stat::of(&[7.0]).unwrap();
        assert_eq!((one.mean, one.ci95, one.min, one.max), (7.0, None, 7.0, 7.0));
        assert!(Stat::of(&[]).is_none());
    }

    #[test]
    fn table_groups_runs_into_cells() {
        let m = manifest(
            "scenario = \"x\"\nseeds = 3\nmetrics = [\"jitter\"]\n[[param]]\nkey = \"k\"\nvalues = [\"a\", \"b,c\"]",
        );
        let rows = m.rows();
        let recs: Vec<RunRecord> = rows
            .iter()
            .filter(|r| r.index != 5)
            .map(|r| RunRecord {
                row: r.index,
                seed: r.seed,
                params: r.params.clone(),
                sets: r.sets.clone(),
                flows: [(
                    "f".to_string(),
                    [("jitter".to_string(), (r.index * 10) as f64)].into(),
                )]
                .into(),
                wall_s: 0.0,
            })
            .collect();
        let t = Table::build(&m, &rows, &recs, vec![5]);
        assert_eq!(t.cells.len(), 2);
        assert_eq!(t.cells[0].stats["jitter"].mean, 10.0);
        assert_eq!(t.cells[1].stats["jitter"].n, 2);
        assert_eq!(t.cells[1].stats["jitter"].mean, 35.0);
        let csv = t.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "k,flow,n,jitter_us_mean,jitter_us_ci95");
        assert!(lines[1].starts_with("a,f,3,10,"), "{csv}");
        assert!(lines[2].starts_with("\"b,c\",f,2,35,"), "{csv}");
        let ci: f64 = lines[2].rsplit(',').next().unwrap().parse().unwrap();
        assert!((ci - 12.7062 * 50f64.sqrt() / 2f64.sqrt()).abs() < 1e-3, "{ci}");
    }

    #[test]
    fn scripts_quote_paths() {
        let s = slurm_script(
            Path::new("/opt/q bin/qosnet"),
            Path::new("/data/sw/sweep.toml"),
            12,
        );
        assert!(s.starts_with("#!/bin/bash\n"));
        assert!(s.contains("#SBATCH --array=0-11\n"));
        assert!(
            s.contains("[ -n \"$QOSNET\" ] || QOSNET='/opt/q bin/qosnet'\n"),
            "{s}"
        );
        // Every #SBATCH line comes before the first command (sbatch stops
        // reading directives there).
        let first_cmd = s.lines().position(|l| !l.starts_with('#')).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines.iter().rposition(|l| l.starts_with("#SBATCH")).unwrap() < first_cmd);
        let j = parallel_jobs(Path::new("/opt/q bin/qosnet"), Path::new("/d/sweep.toml"), 3);
        assert_eq!(j.lines().count(), 3);
        assert_eq!(
            j.lines().nth(2).unwrap(),
            "'/opt/q bin/qosnet' sweep --run-row 2 /d/sweep.toml"
        );
    }
}
