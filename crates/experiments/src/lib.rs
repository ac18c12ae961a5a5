//! qosnet-experiments: the papers' experiments, one module folder per
//! paper, behind one registry (`qosnet reproduce NAME [--live]`).
//!
//! A folder holds the experiment's registry entry (`mod.rs`: the names
//! `qosnet reproduce` accepts, a one-line description, its scenarios), its
//! simulated reproduction (`sim.rs`), its live one in namespace labs
//! (`live.rs`), and whatever measurement code only it needs. The scenarios
//! stay under `scenarios/` where users find them and are embedded here, so
//! `qosnet reproduce` runs from any directory; the paper's numbers are data
//! in those scenarios' `[paper]` tables, not constants in code.
//!
//! Adding a paper's experiment: a folder `src/NAME/` whose `mod.rs`
//! defines `pub static EXPERIMENT: Experiment`, a `mod NAME;` line below
//! and its entry in [`REGISTRY`].
//!
//! Also here: the human-readable reports every subcommand prints
//! ([`report`]) and the overrides of the command line ([`Overrides`]).

#![forbid(unsafe_code)]

/// Print to stdout; a closed pipe (`qosnet ... | head`) ends the program
/// quietly instead of panicking.
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::emit(&format!($($t)*)) };
}

/// [`out!`] with a newline.
#[macro_export]
macro_rules! outln {
    () => { $crate::emit("\n") };
    ($($t:tt)*) => { $crate::emit(&format!("{}\n", format!($($t)*))) };
}

/// A scenario file compiled into the binary, under its path in the
/// repository.
macro_rules! embed {
    ($p:literal) => {
        $crate::Embedded {
            path: $p,
            text: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../", $p)),
        }
    };
}

pub mod plot;
pub mod report;
mod run;
pub mod sweep;
pub mod verdict;

pub use run::cores;
pub use verdict::Verdicts;

pub mod degeb;
pub mod ethernet;
pub mod rether;
pub mod stsdr;
pub mod tdp_icc2006;

use std::path::PathBuf;

/// Every experiment, in the order `qosnet reproduce --list` shows them.
pub static REGISTRY: &[&Experiment] = &[
    &tdp_icc2006::EXPERIMENT,
    &degeb::EXPERIMENT,
    &ethernet::EXPERIMENT,
    &stsdr::EXPERIMENT,
    &rether::EXPERIMENT,
];

/// The registry.
pub fn registry() -> &'static [&'static Experiment] {
    REGISTRY
}

/// One paper's experiment as `qosnet reproduce` runs it.
pub struct Experiment {
    /// Names `qosnet reproduce` accepts; the first (the folder's) is the
    /// experiment's own, the others are aliases.
    pub names: &'static [&'static str],
    /// One line: the paper and what is reproduced.
    pub description: &'static str,
    /// Its scenarios, embedded.
    pub scenarios: &'static [Embedded],
    /// Simulated reproduction: prints the paper's numbers beside qosnet's
    /// and returns the verdicts it computed from its runs.
    pub sim: fn(&RunOptions) -> anyhow::Result<Verdicts>,
    /// Live reproduction in namespace labs (root), if there is one.
    pub live: Option<fn(&RunOptions) -> anyhow::Result<Verdicts>>,
    /// Whether its runs honour `--stall` ([`RunOptions::stall`]): the
    /// experiments whose routers' timing is the point (TDP).
    pub stall: bool,
}

impl Experiment {
    pub fn name(&self) -> &'static str {
        self.names[0]
    }
    pub fn answers_to(&self, name: &str) -> bool {
        self.names.contains(&name)
    }
    /// Run it, simulated or live; print its verdicts at the end (and
    /// write them to `--out DIR/verdicts.json`) and return them, for
    /// `--strict` to judge.
    pub fn run(&self, live: bool, o: &RunOptions) -> anyhow::Result<Verdicts> {
        // An unwritable --out fails now, not after every run.
        if let Some(dir) = &o.out {
            report::check_out_dir(dir)?;
        }
        if let (Some(s), false) = (&o.stall, self.stall) {
            let spec = format!("{}/{}", s.len, s.every);
            anyhow::bail!(
                "--stall {spec}: experiment {} does not take --stall (the TDP testbed does: `qosnet reproduce tdp --stall {spec}`); \
                 stall one of its scenarios with `qosnet sim --stall` or `qosnet lab run --stall`",
                self.name()
            );
        }
        let v = match (live, self.live) {
            (false, _) => (self.sim)(o)?,
            (true, Some(f)) => f(o)?,
            (true, None) => anyhow::bail!("experiment {} has no live reproduction yet", self.name()),
        };
        let mode = if live { "sim and live" } else { "sim" };
        out!(
            "{}",
            v.table(&format!(
                "Verdicts: {} ({mode}), each computed from the runs above",
                self.name()
            ))
        );
        if let Some(dir) = &o.out {
            report::write_verdicts(dir, self.name(), mode, &v)?;
        }
        Ok(v)
    }

    /// `--strict`: an error naming the rows that differ from the paper
    /// without an explanation in the docs.
    pub fn strict(&self, v: &Verdicts) -> Result<(), verdict::StrictFailure> {
        let rows: Vec<String> = v
            .strict_failures()
            .map(|r| {
                format!(
                    "{} {}: paper {}, qosnet {}",
                    r.artefact, r.what, r.paper, r.qosnet
                )
            })
            .collect();
        if rows.is_empty() {
            Ok(())
        } else {
            Err(verdict::StrictFailure {
                experiment: self.name().into(),
                rows,
            })
        }
    }
}

/// An unknown experiment name; shows the known ones.
#[derive(Debug)]
pub struct UnknownExperiment(pub String);

impl std::fmt::Display for UnknownExperiment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "unknown experiment `{}`; known experiments:", self.0)?;
        write!(f, "{}", list().trim_end())
    }
}

impl std::error::Error for UnknownExperiment {}

/// The experiment answering to `name`.
pub fn find(name: &str) -> Result<&'static Experiment, UnknownExperiment> {
    REGISTRY
        .iter()
        .copied()
        .find(|e| e.answers_to(name))
        .ok_or_else(|| UnknownExperiment(name.to_string()))
}

/// The registry as a table: names (aliases in parentheses), whether it
/// runs live, description.
pub fn list() -> String {
    let rows: Vec<(String, &str)> = REGISTRY
        .iter()
        .map(|e| {
            let mut n = e.name().to_string();
            if e.names.len() > 1 {
                n += &format!(" ({})", e.names[1..].join(", "));
            }
            (n, e.description)
        })
        .collect();
    let w = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    rows.iter()
        .zip(REGISTRY)
        .map(|((n, d), e)| {
            let modes = if e.live.is_some() { "sim, live" } else { "sim" };
            format!("  {n:<w$}  {d} [{modes}]\n")
        })
        .collect()
}

/// A scenario compiled into the binary.
pub struct Embedded {
    /// Its path in the repository, e.g. `scenarios/tdp-icc2006/tdp-1002.toml`.
    pub path: &'static str,
    pub text: &'static str,
}

/// The embedded scenario at `path` (or a path ending in it), from any
/// experiment.
pub fn find_scenario(path: &str) -> Option<&'static Embedded> {
    REGISTRY
        .iter()
        .flat_map(|e| e.scenarios.iter())
        .find(|e| e.path == path || path.ends_with(e.path))
}

/// The scenario `qosnet sim` runs without one: the ICC 2006 TDP testbed,
/// 1002-byte packets.
pub fn default_scenario() -> &'static Embedded {
    tdp_icc2006::default_scenario()
}

/// The command line's changes to the scenarios of a run: `--set
/// KEY=VALUE`, `--seed N` and `--duration D`, merged into `--set` strings
/// here and nowhere else.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub set: Vec<String>,
    pub seed: Option<u64>,
    pub duration: Option<String>,
}

impl Overrides {
    /// Every override as `--set` strings: `--set`s as given, then the
    /// seed and the duration (so these two win over a `--set` of the same
    /// key).
    pub fn sets(&self) -> Vec<String> {
        let mut v = self.sets_except_duration();
        if let Some(d) = &self.duration {
            v.push(format!("scenario.duration=\"{d}\""));
        }
        v
    }
    /// As [`sets`](Self::sets) without `--duration`, for runs where it
    /// means something else (the length of each live measurement phase).
    pub fn sets_except_duration(&self) -> Vec<String> {
        let mut v = self.set.clone();
        if let Some(s) = self.seed {
            v.push(format!("scenario.seed={s}"));
        }
        v
    }
}

/// What `qosnet reproduce` passes to an experiment.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Applied to every run of the experiment.
    pub overrides: Overrides,
    /// Write each run's outputs under this directory.
    pub out: Option<PathBuf>,
    /// Namespace prefix of live labs.
    pub prefix: String,
    /// Who sends live runs' flows; `None`: each scenario's default
    /// ([`TrafficSource::auto`](qosnet_lab::labrun::TrafficSource::auto):
    /// the tester for TDP testbeds).
    pub traffic: Option<qosnet_lab::labrun::TrafficSource>,
    /// Live runs' port devices (AF_PACKET unless `--device` says AF_XDP).
    pub devices: qosnet_io::netdev::PortDevices,
    /// `--stall LEN/EVERY`: every run's routers stalled together on this
    /// schedule, simulated and live alike (`qosnet sim --stall`, `qosnet
    /// lab run --stall`). Only experiments with [`Experiment::stall`].
    pub stall: Option<qosnet_scenario::stall::StallSpec>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            overrides: Overrides::default(),
            out: None,
            prefix: qosnet_lab::lab::DEFAULT_PREFIX.into(),
            traffic: None,
            devices: Default::default(),
            stall: None,
        }
    }
}

#[doc(hidden)]
pub fn emit(s: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(s.as_bytes()).and_then(|_| o.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to stdout: {e}");
        std::process::exit(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_names_are_unique_and_found() {
        let mut all: Vec<&str> = REGISTRY.iter().flat_map(|e| e.names.iter().copied()).collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a name answers for two experiments");
        for e in REGISTRY {
            for n in e.names {
                assert_eq!(find(n).unwrap().name(), e.name());
            }
            assert!(list().contains(e.name()) && list().contains(e.description));
        }
        for (alias, name) in [
            ("tdp", "tdp-icc2006"),
            ("tdp-icc2006", "tdp-icc2006"),
            ("diffserv", "degeb"),
            ("degeb", "degeb"),
        ] {
            assert_eq!(find(alias).unwrap().name(), name);
        }
        let e = find("nopaper").map(|e| e.name()).unwrap_err().to_string();
        assert!(
            e.contains("nopaper") && e.contains("tdp-icc2006") && e.contains("degeb"),
            "{e}"
        );
    }

    #[test]
    fn every_embedded_scenario_loads_and_is_found_by_path() {
        for e in REGISTRY {
            assert!(!e.scenarios.is_empty(), "{} has no scenarios", e.name());
            for s in e.scenarios {
                qosnet_scenario::load_str(s.path, s.text, &[]).unwrap();
                assert!(std::ptr::eq(find_scenario(s.path).unwrap(), s));
                let elsewhere = format!("/home/u/qosnet/{}", s.path);
                assert!(std::ptr::eq(find_scenario(&elsewhere).unwrap(), s));
            }
        }
        assert_eq!(default_scenario().path, "scenarios/tdp-icc2006/tdp-1002.toml");
        assert!(find_scenario("scenarios/nope.toml").is_none());
    }

    #[test]
    fn overrides_merge_once_in_one_order() {
        let o = Overrides {
            set: vec!["flow.f123.size=500".into(), "scenario.duration=9s".into()],
            seed: Some(7),
            duration: Some("2s".into()),
        };
        assert_eq!(
            o.sets(),
            [
                "flow.f123.size=500",
                "scenario.duration=9s",
                "scenario.seed=7",
                "scenario.duration=\"2s\""
            ]
        );
        assert_eq!(
            o.sets_except_duration(),
            ["flow.f123.size=500", "scenario.duration=9s", "scenario.seed=7"]
        );
        assert!(Overrides::default().sets().is_empty());
        // The duration given last wins: --duration beats a --set of it.
        let s = default_scenario();
        let sc = qosnet_scenario::load_str(s.path, s.text, &o.sets()).unwrap();
        assert_eq!(sc.duration, qosnet_core::Duration::from_secs(2));
        assert_eq!(sc.seed, 7);
    }
}
