//! Measures one fuzz target's cost per input outside AFL: replays every
//! file of the given directories through the target for a number of rounds
//! and prints inputs/s overall and the slowest inputs. Used to profile the
//! harnesses; `perf record` on it shows where one input goes.
//!
//!   cargo run --release -p qosnet-fuzz --example rate -- TARGET ROUNDS DIR...
use std::io::Write;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(name), Some(rounds)) = (args.first(), args.get(1)) else {
        eprintln!("usage: rate TARGET ROUNDS DIR...");
        std::process::exit(2);
    };
    let rounds: usize = rounds.parse().expect("ROUNDS is a number");
    let Some(&(_, run)) = qosnet_fuzz::TARGETS.iter().find(|(n, _)| n == name) else {
        eprintln!("unknown target {name}");
        std::process::exit(2);
    };
    let mut inputs = Vec::new();
    for d in &args[2..] {
        for e in std::fs::read_dir(d).expect("readable directory").flatten() {
            if e.path().is_file() {
                inputs.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    // The first input pays one-time set-up (OnceLock), as in AFL's
    // persistent mode; keep it out of the figures.
    if let Some((_, d)) = inputs.first() {
        run(d);
    }
    let mut per: Vec<(f64, usize)> = vec![(0.0, 0); inputs.len()];
    let t0 = Instant::now();
    for _ in 0..rounds {
        for (k, (_, d)) in inputs.iter().enumerate() {
            let t = Instant::now();
            run(d);
            per[k].0 += t.elapsed().as_secs_f64();
            per[k].1 = k;
        }
    }
    let total = t0.elapsed().as_secs_f64();
    let n = (inputs.len() * rounds) as f64;
    // Write errors (a closed pipe: `| head -1`) end the report quietly.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{name}: {} inputs x {rounds} rounds in {total:.2} s: {:.0} inputs/s, {:.1} us/input",
        inputs.len(),
        n / total,
        total / n * 1e6
    );
    per.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (t, k) in per.iter().take(8) {
        let _ = writeln!(
            out,
            "  {:>10.1} us  {}",
            t / rounds as f64 * 1e6,
            inputs[*k].0.display()
        );
    }
}
