//! `qosnet sweep`: a parameter grid × seeds over one scenario, on every
//! core of this machine, or emitted as a Slurm job array or a GNU parallel
//! job list; the work is in [`qosnet_experiments::sweep`].

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
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
    /// Repeatable: the grid is every combination. Replaces a manifest
    /// parameter of the same key.
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
    /// Simulations at once (default: every core).
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
            };
            (m, None)
        }
    };
    for p in &a.params {
        let p = sweep::parse_param(p)?;
        match m.params.iter_mut().find(|q| q.key == p.key) {
            Some(q) => *q = p,
            None => m.params.push(p),
        }
    }
    if let Some(s) = &a.seeds {
        m.seeds = sweep::parse_seeds(s)?;
    }
    m.set.extend(a.set.iter().cloned());
    if let Some(d) = &a.duration {
        m.set.push(format!("scenario.duration=\"{d}\""));
    }
    if !a.metrics.is_empty() {
        m.metrics = a.metrics.clone();
    }
    if !a.flows.is_empty() {
        m.flows = a.flows.clone();
    }
    m.check()?;
    Ok((m, path))
}

pub fn run(a: SweepArgs) -> Result<()> {
    let (m, path) = manifest(&a)?;
    // Relative paths of a command-line sweep resolve from here.
    let mpath = path.clone().unwrap_or_else(|| PathBuf::from("./command-line"));
    let sw = Sweep::from_manifest(&mpath, m, a.out.clone())?;
    let rows = sw.manifest.rows();
    if let Some(n) = a.run_row {
        let row = rows.get(n).ok_or_else(|| {
            anyhow!(
                "--run-row {n}: the sweep has rows 0..={} ({} runs)",
                rows.len().saturating_sub(1),
                rows.len()
            )
        })?;
        if sw.finished(row)?.is_some() {
            outln!("row {n} already finished ({})", sw.out.display());
            return Ok(());
        }
        let rec = sw.run_row(row)?;
        outln!("row {n} seed {} done in {:.2} s", rec.seed, rec.wall_s);
        return Ok(());
    }
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
            Emit::Slurm => ("sweep.slurm", sweep::slurm_script(&bin, &manifest, rows.len())),
            Emit::Parallel => ("jobs.txt", sweep::parallel_jobs(&bin, &manifest, rows.len())),
        };
        let dir = manifest.parent().unwrap_or(Path::new("."));
        let p = dir.join(file);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        outln!("wrote {} ({} runs)", p.display(), rows.len());
        match e {
            Emit::Slurm => outln!("submit: sbatch {}", p.display()),
            Emit::Parallel => outln!("run:    parallel -j N < {}", p.display()),
        }
        outln!("gather: qosnet sweep {}", manifest.display());
        return Ok(());
    }
    let jobs = a.jobs.unwrap_or_else(qosnet_experiments::cores);
    if jobs == 0 {
        bail!("-j 0: give at least one job");
    }
    eprintln!(
        "sweep: {} runs ({} cells × {} seeds) on {} threads into {}",
        rows.len(),
        rows.len() / sw.manifest.seeds.list().len().max(1),
        sw.manifest.seeds.list().len(),
        jobs,
        sw.out.display()
    );
    let s = sw.run_all(jobs, &|line| eprintln!("{line}"))?;
    let t = sw.gather()?;
    outln!(
        "{} runs: {} run now in {:.2} s wall on {} threads, {} finished before",
        s.rows,
        s.ran,
        s.wall_s,
        jobs,
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
