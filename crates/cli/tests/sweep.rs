//! `qosnet sweep` as a user and a cluster run it: the local pool, resuming,
//! and the Slurm and GNU parallel paths executed here with the variables a
//! scheduler would set.

use std::path::Path;

use assert_cmd::Command;

fn qosnet() -> Command {
    Command::cargo_bin("qosnet").unwrap()
}

fn stdout(c: &mut Command) -> String {
    String::from_utf8(c.assert().success().get_output().stdout.clone()).unwrap()
}

fn csv_rows(dir: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(dir.join("results.csv"))
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn local_pool_gathers_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sw");
    let args = [
        "sweep",
        "scenarios/tdp-icc2006/fifo-482.toml",
        "--param",
        "defaults.flow.rate=400pps,800pps",
        "--seeds",
        "3",
        "--duration",
        "300ms",
        "--metrics",
        "jitter,loss",
        "--flows",
        "f1234,f123",
        "-j",
        "2",
        "--out",
    ];
    let text = stdout(qosnet().args(args).arg(&out));
    assert!(text.contains("6 runs: 6 run now"), "{text}");
    let rows = csv_rows(&out);
    assert_eq!(
        rows[0],
        [
            "defaults.flow.rate",
            "flow",
            "n",
            "jitter_us_mean",
            "jitter_us_ci95",
            "loss_pct_mean",
            "loss_pct_ci95"
        ]
    );
    assert_eq!(rows.len(), 1 + 2 * 2, "{rows:?}");
    for r in &rows[1..] {
        assert_eq!(r[2], "3", "{r:?}");
        let (mean, ci): (f64, f64) = (r[3].parse().unwrap(), r[4].parse().unwrap());
        assert!(mean > 0.0 && ci >= 0.0, "{r:?}");
    }
    // FIFO jitter depends on the seed (random processing times): the
    // interval of at least one cell is not zero.
    assert!(
        rows[1..].iter().any(|r| r[4].parse::<f64>().unwrap() > 0.0),
        "{rows:?}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["cells"].as_array().unwrap().len(), 4);
    assert_eq!(json["cells"][0]["stats"]["jitter"]["n"], 3);
    assert_eq!(json["seeds"], serde_json::json!([1, 2, 3]));
    let svg = std::fs::read_to_string(out.join("defaults.flow.rate.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("f1234"));
    assert_eq!(std::fs::read_dir(out.join("runs")).unwrap().count(), 6);

    // Again: nothing is redone, the table is the same.
    let before = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let text = stdout(qosnet().args(args).arg(&out));
    assert!(
        text.contains("6 runs: 0 run now") && text.contains("6 finished before"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(out.join("results.csv")).unwrap(), before);

    // A grown grid reuses the runs it shares.
    let mut grown = args.to_vec();
    grown[3] = "defaults.flow.rate=400pps,800pps,200pps";
    let text = stdout(qosnet().args(&grown).arg(&out));
    assert!(
        text.contains("9 runs: 3 run now") && text.contains("6 finished before"),
        "{text}"
    );

    // Another scenario in the same directory is refused.
    let mut other = args.to_vec();
    other[1] = "scenarios/tdp-icc2006/tdp-482.toml";
    let err = qosnet()
        .args(&other)
        .arg(&out)
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8_lossy(&err).contains("another scenario"));
}

fn write_manifest(dir: &Path) -> std::path::PathBuf {
    let m = dir.join("m.toml");
    std::fs::write(
        &m,
        r#"
scenario = "scenarios/tdp-icc2006/fifo-482.toml"
out = "sw"
seeds = [4, 5]
set = ["scenario.duration=200ms"]
metrics = ["delay_p99"]
[[param]]
key = "defaults.router.scheduler"
values = ["fifo", "tdp"]
"#,
    )
    .unwrap();
    m
}

/// The Slurm script's array task, run here the way Slurm runs it: the
/// script itself under bash with SLURM_ARRAY_TASK_ID set, once per index of
/// its --array range; then the gather step finds every run done.
#[test]
fn slurm_array_tasks_run_rows() {
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(dir.path());
    let text = stdout(qosnet().args(["sweep", "--emit", "slurm"]).arg(&m));
    let out = dir.path().join("sw");
    let script = out.join("sweep.slurm");
    assert!(text.contains("sbatch"), "{text}");
    let s = std::fs::read_to_string(&script).unwrap();
    let range = s
        .lines()
        .find_map(|l| l.strip_prefix("#SBATCH --array="))
        .expect("an --array directive");
    assert_eq!(range, "0-3");
    // Nothing ran yet.
    assert_eq!(std::fs::read_dir(out.join("runs")).unwrap().count(), 0);
    let bin = assert_cmd::cargo::cargo_bin("qosnet");
    for task in 0..4 {
        let o = std::process::Command::new("bash")
            .arg(&script)
            .env("SLURM_ARRAY_TASK_ID", task.to_string())
            .env("QOSNET", &bin)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "task {task}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("row {task} seed")));
    }
    assert_eq!(std::fs::read_dir(out.join("runs")).unwrap().count(), 4);
    // Without the variable the script refuses instead of running row 0.
    let o = std::process::Command::new("bash")
        .arg(&script)
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env("QOSNET", &bin)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("SLURM_ARRAY_TASK_ID"));
    // Gathering runs nothing again.
    let text = stdout(qosnet().arg("sweep").arg(out.join("sweep.toml")));
    assert!(
        text.contains("4 runs: 0 run now") && text.contains("4 finished before"),
        "{text}"
    );
    let rows = csv_rows(&out);
    assert_eq!(rows.len(), 1 + 2 * 5, "{rows:?}");
    assert!(rows[1..].iter().all(|r| r[2] == "2"));
    let err = qosnet()
        .args(["sweep", "--run-row", "4"])
        .arg(out.join("sweep.toml"))
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8_lossy(&err).contains("rows 0..=3"));
}

/// Each line of the GNU parallel job list is a shell command that runs its
/// row (run here with sh, as parallel would).
#[test]
fn parallel_job_list_runs_rows() {
    let dir = tempfile::tempdir().unwrap();
    let m = write_manifest(dir.path());
    stdout(qosnet().args(["sweep", "--emit", "parallel"]).arg(&m));
    let out = dir.path().join("sw");
    let jobs = std::fs::read_to_string(out.join("jobs.txt")).unwrap();
    assert_eq!(jobs.lines().count(), 4);
    for line in jobs.lines() {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(line)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let text = stdout(qosnet().arg("sweep").arg(&m));
    assert!(text.contains("0 run now"), "{text}");
}

/// A failed sweep's stderr.
fn refusal(args: &[&str]) -> String {
    let o = qosnet().args(args).output().unwrap();
    assert!(!o.status.success(), "{args:?} was accepted");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Careless and hostile flags are refused before anything runs, each
/// with the flag named; nothing is written.
#[test]
fn bad_flags_are_refused_with_the_flag_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sw");
    let out = out.to_str().unwrap();
    let base = [
        "sweep",
        "scenarios/tdp-icc2006/fifo-482.toml",
        "--duration",
        "300ms",
        "--out",
        out,
    ];
    let with = |extra: &[&str]| refusal(&[&base[..], extra].concat());
    for (extra, says) in [
        (&["-j", "0"][..], "-j 0: give 1 to 1024 simulations at once"),
        (&["-j", "1000000"], "-j 1000000: give 1 to 1024 simulations at once"),
        (&["--seeds", "1,2,1"], "--seeds 1,2,1: seed 1 is given twice"),
        (
            &["--seeds", "1,18446744073709551615"],
            "--seeds 1,18446744073709551615: seed 18446744073709551615 is more than the largest seed, 9223372036854775807",
        ),
        (
            &["--param", "defaults.flow.rate=100pps,200pps,100pps"],
            "--param defaults.flow.rate=100pps,200pps,100pps: param defaults.flow.rate: value 100pps is given twice",
        ),
        (
            &["--param", "defaults.flow.rate=100pps", "--param", "defaults.flow.rate=200pps"],
            "--param defaults.flow.rate=200pps: defaults.flow.rate is already swept by --param defaults.flow.rate=100pps",
        ),
        (
            &["--param", "scenario.seed=1,2,3"],
            "--param scenario.seed=1,2,3: param scenario.seed: every run's seed comes from `seeds`",
        ),
        (&["--set", "scenario.seed=3"], "--set scenario.seed=3: set scenario.seed=3: every run's seed"),
        (&["--metrics", "jitter,loss,jitter"], "--metrics jitter,loss,jitter: metric jitter is given twice"),
        (
            &["--flows", "f1234,f9"],
            "--flows f1234,f9: flow f9 is not in the scenario (<embedded scenarios/tdp-icc2006/fifo-482.toml>); \
             its flows: f1234, f123, f234, f341, f412",
        ),
        (
            &["--param", "flow.nope.size=100,200"],
            "--param flow.nope.size=100,200: param flow.nope.size value 100: no flow named `nope`",
        ),
    ] {
        let err = with(extra);
        assert!(err.contains(says), "{extra:?}: {err}");
        assert!(!Path::new(out).exists(), "{extra:?} wrote {out}");
    }
}

/// A typo in a million-row sweep fails at once, in as little memory as
/// in a one-row sweep: the overrides are checked against the scenario
/// once, before any row is made (it ran every row, 146 s and 2.5 GB).
#[test]
fn typo_in_a_huge_grid_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let rates: Vec<String> = (1..=1000).map(|r| format!("{r}pps")).collect();
    let param = format!("defaults.flow.rate={}", rates.join(","));
    let out = dir.path().join("sw");
    let t0 = std::time::Instant::now();
    let err = refusal(&[
        "sweep",
        "scenarios/tdp-icc2006/fifo-482.toml",
        "--set",
        "flow.nope.size=100",
        "--seeds",
        "1000",
        "--param",
        &param,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        err.contains("--set flow.nope.size=100: set flow.nope.size=100: no flow named `nope`"),
        "{err}"
    );
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        t0.elapsed()
    );
    // One more value is over the limit, refused with the product.
    let err = refusal(&[
        "sweep",
        "scenarios/tdp-icc2006/fifo-482.toml",
        "--seeds",
        "1001",
        "--param",
        &param,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        err.contains("the grid has 1000 (defaults.flow.rate) × 1001 seeds = 1001000 runs, more than the limit of 1000000"),
        "{err}"
    );
    assert!(!out.exists());
}

/// -j larger than the runs starts one thread per run, not -j threads.
#[test]
fn threads_never_outnumber_runs() {
    let dir = tempfile::tempdir().unwrap();
    let o = qosnet()
        .args([
            "sweep",
            "scenarios/tdp-icc2006/fifo-482.toml",
            "--duration",
            "300ms",
            "--seeds",
            "2",
            "-j",
            "1024",
            "--out",
        ])
        .arg(dir.path().join("sw"))
        .assert()
        .success();
    let err = String::from_utf8_lossy(&o.get_output().stderr).into_owned();
    assert!(err.contains("2 runs (1 cells × 2 seeds) on 2 threads"), "{err}");
}

/// A file that is not TOML at all is neither a manifest nor a scenario:
/// its own error, at its line, comes first (it said "no output
/// directory" before).
#[test]
fn a_broken_file_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("broken.toml");
    std::fs::write(&f, "scenario = \"x.toml\"\nseeds = [1, 2\n").unwrap();
    let e = refusal(&["sweep", f.to_str().unwrap()]);
    assert!(e.contains("broken.toml:"), "{e}");
    assert!(!e.contains("output directory"), "{e}");
}
