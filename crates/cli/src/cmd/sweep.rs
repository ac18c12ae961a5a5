//! `qosnet sweep`: a parameter grid × seeds over one scenario, on every
//! core of this machine, or emitted as a Slurm job array or a GNU parallel
//! job list; the work is in [`qosnet_experiments::sweep`].

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use qosnet_experiments::sweep::{self, Manifest, Sweep};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Emit {
    /// A Slurm batch script (`sbatch OUT/sweep.slurm`), one array task per run.
    Slurm,
    /// A GNU parallel job list (`parallel -j N < OUT/jobs.txt`), one run a line.
    Parallel,
}

#[derive(Args)]
pub struct SweepArgs {
    /// A sweep manifest (TOML with a top-level `scenario = "..."`, see
    /// docs/sweep.md) or a scenario file to sweep with --param. Without
    /// it, the default scenario (scenarios/tdp-icc2006/tdp-1002.toml).
    pub file: Option<String>,
    /// A swept parameter: KEY=V1,V2,... (e.g. flow.f1.rate=1Mb/s,2Mb/s,4Mb/s).
    /// Repeatable, one KEY each: the grid is every combination. Replaces a
    /// manifest parameter of the same key.
    #[arg(long = "param", value_name = "KEY=V1,V2,...")]
    pub params: Vec<String>,
    /// Seeds per grid cell: a count N (seeds 1..=N) or a list (1,7,9).
    #[arg(long)]
    pub seeds: Option<String>,
    /// An override of every run: KEY=VALUE. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Shorthand for --set scenario.duration=DURATION.
    #[arg(long)]
    pub duration: Option<String>,
    /// Metrics of the tables (the first is plotted): delay_mean, delay_p99,
    /// delay_max, jitter, loss, throughput. Default: all, delay_mean first.
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Only these flows in the tables and plots (default: all).
    #[arg(long, value_delimiter = ',')]
    pub flows: Vec<String>,
    /// Output directory: sweep.toml, scenario.toml, runs/, results.csv,
    /// results.json and one SVG per swept parameter.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Simulations at once, 1 to 1024 (default: every core; never more
    /// threads than runs).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// Do not run: write a Slurm job array script or a GNU parallel job list
    /// for the sweep into the output directory.
    #[arg(long, value_enum)]
    pub emit: Option<Emit>,
    /// Run only row N of the manifest (what a Slurm array task or a job
    /// list line does) and record it; no tables.
    #[arg(long, value_name = "N")]
    pub run_row: Option<usize>,
}

/// The manifest of the command line: a manifest file with the flags on
/// top, or a scenario (file or default) with the flags.
fn manifest(a: &SweepArgs) -> Result<(Manifest, Option<PathBuf>)> {
    let (mut m, path) = match &a.file {
        Some(f)
            if Path::new(f).is_file() && {
                let text = std::fs::read_to_string(f).with_context(|| format!("reading {f}"))?;
                Manifest::looks_like(&text)
            } =>
        {
            (Manifest::from_file(Path::new(f))?, Some(PathBuf::from(f)))
        }
        f => {
            // Not TOML at all: neither a manifest nor a scenario. Say what
            // is wrong with it, at its line, before anything else (the
            // missing output directory was the first complaint).
            if let Some(f) = f.as_deref().filter(|f| Path::new(f).is_file()) {
                let text = std::fs::read_to_string(f).with_context(|| format!("reading {f}"))?;
                if toml::from_str::<toml::Table>(&text).is_err() {
                    if let Err(e) = qosnet_scenario::load_str(f, &text, &[]) {
                        bail!("{e}");
                    }
                }
            }
            let scenario = f
                .clone()
                .unwrap_or_else(|| qosnet_experiments::default_scenario().path.to_string());
            let m = Manifest {
                scenario,
                out: None,
                seeds: Default::default(),
                set: Vec::new(),
                metrics: Vec::new(),
                flows: Vec::new(),
                params: Vec::new(),
                places: Default::default(),
            };
            (m, None)
        }
    };
    add_flags(&mut m, a)?;
    m.check()?;
    Ok((m, path))
}

/// The flags on top of a manifest, each part's place the flag that gave it.
fn add_flags(m: &mut Manifest, a: &SweepArgs) -> Result<()> {
    add_params(m, &a.params)?;
    if let Some(s) = &a.seeds {
        m.seeds = sweep::parse_seeds(s)?;
        m.places.seeds = format!("--seeds {s}");
    }
    for s in &a.set {
        m.set.push(s.clone());
        m.places.set.push(format!("--set {s}"));
    }
    if let Some(d) = &a.duration {
        m.set.push(format!("scenario.duration=\"{d}\""));
        m.places.set.push(format!("--duration {d}"));
    }
    if !a.metrics.is_empty() {
        m.metrics = a.metrics.clone();
        m.places.metrics = vec![format!("--metrics {}", a.metrics.join(",")); a.metrics.len()];
    }
    if !a.flows.is_empty() {
        m.flows = a.flows.clone();
        m.places.flows = vec![format!("--flows {}", a.flows.join(",")); a.flows.len()];
    }
    Ok(())
}

/// `--param` flags: each replaces the manifest's parameter of its key or
/// adds one; the same key twice on the command line is refused (the first
/// would be silently lost).
fn add_params(m: &mut Manifest, flags: &[String]) -> Result<()> {
    let mut given: Vec<(&str, String)> = Vec::new();
    for arg in flags {
        let p = sweep::parse_param(arg)?;
        if let Some((first, _)) = given.iter().find(|(_, k)| *k == p.key) {
            bail!(
                "--param {arg}: {} is already swept by --param {first}; give all its values in one --param \
                 ({}=V1,V2,...)",
                p.key,
                p.key
            );
        }
        given.push((arg, p.key.clone()));
        let place = format!("--param {arg}");
        let values = vec![place.clone(); p.values.len()];
        let i = match m.params.iter().position(|q| q.key == p.key) {
            Some(i) => {
                m.params[i] = p;
                i
            }
            None => {
                m.params.push(p);
                m.params.len() - 1
            }
        };
        set_place(&mut m.places.params, i, place);
        set_place(&mut m.places.values, i, values);
    }
    Ok(())
}

/// `v[i] = x`, growing `v` with defaults (a manifest made in code has no
/// places).
fn set_place<T: Default>(v: &mut Vec<T>, i: usize, x: T) {
    if v.len() <= i {
        v.resize_with(i + 1, T::default);
    }
    v[i] = x;
}

/// `-j`: 1 to [`sweep::MAX_JOBS`], default every core.
fn jobs(a: &SweepArgs) -> Result<usize> {
    let Some(j) = a.jobs else {
        return Ok(qosnet_experiments::cores().min(sweep::MAX_JOBS));
    };
    if j == 0 || j > sweep::MAX_JOBS {
        bail!(
            "-j {j}: give 1 to {} simulations at once (this machine has {} cores; more threads than \
             cores only cost memory)",
            sweep::MAX_JOBS,
            qosnet_experiments::cores()
        );
    }
    Ok(j)
}

pub fn run(a: SweepArgs) -> Result<()> {
    let (m, path) = manifest(&a)?;
    let jobs = jobs(&a)?;
    // Relative paths of a command-line sweep resolve from here.
    let mpath = path.clone().unwrap_or_else(|| PathBuf::from("./command-line"));
    let sw = Sweep::from_manifest(&mpath, m, a.out.clone())?;
    let runs = sw.manifest.runs();
    if let Some(n) = a.run_row {
        // One row of a checked sweep (a Slurm task): its own load checks it.
        let row = sw.row(n)?;
        if sw.finished(&row)?.is_some() {
            outln!("row {n} already finished ({})", sw.out.display());
            return Ok(());
        }
        let rec = sw.run_row(&row)?;
        outln!("row {n} seed {} done in {:.2} s", rec.seed, rec.wall_s);
        return Ok(());
    }
    sw.check_scenario()?;
    if let Some(e) = a.emit {
        let manifest = sw.prepare()?;
        let manifest = manifest
            .canonicalize()
            .with_context(|| format!("resolving {}", manifest.display()))?;
        let bin = std::env::current_exe().context("finding the qosnet binary")?;
        // Paths go into shell scripts (a Slurm #SBATCH line, comments): a
        // newline or other control character there would end a line and
        // start a command.
        for p in [&manifest, &bin] {
            if p.to_string_lossy().chars().any(|c| c.is_control()) {
                anyhow::bail!(
                    "{:?} has a control character; scripts cannot name it safely: choose another --out",
                    p
                );
            }
        }
        let (file, text) = match e {
            Emit::Slurm => ("sweep.slurm", sweep::slurm_script(&bin, &manifest, runs)),
            Emit::Parallel => ("jobs.txt", sweep::parallel_jobs(&bin, &manifest, runs)),
        };
        let dir = manifest.parent().unwrap_or(Path::new("."));
        let p = dir.join(file);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        outln!("wrote {} ({runs} runs)", p.display());
        match e {
            Emit::Slurm => outln!("submit: sbatch {}", p.display()),
            Emit::Parallel => outln!("run:    parallel -j N < {}", p.display()),
        }
        outln!("gather: qosnet sweep {}", manifest.display());
        return Ok(());
    }
    let seeds = sw.manifest.seeds.count().max(1);
    eprintln!(
        "sweep: {runs} runs ({} cells × {seeds} seeds) on {} threads into {}",
        runs as u64 / seeds,
        jobs.min(runs).max(1),
        sw.out.display()
    );
    let s = sw.run_all(jobs, &|line| eprintln!("{line}"))?;
    let t = sw.gather()?;
    outln!(
        "{} runs: {} run now in {:.2} s wall on {} threads, {} finished before",
        s.rows,
        s.ran,
        s.wall_s,
        jobs.min(s.ran).max(1),
        s.skipped
    );
    out!("{}", t.csv());
    let svgs: Vec<String> = sw
        .manifest
        .params
        .iter()
        .filter(|p| p.values.len() > 1)
        .map(|p| format!("{}.svg", sweep::file_stem(&p.key)))
        .collect();
    outln!(
        "wrote {0}/results.csv, {0}/results.json{1}",
        sw.out.display(),
        if svgs.is_empty() {
            String::new()
        } else {
            format!(", {}", svgs.join(", "))
        }
    );
    Ok(())
}
