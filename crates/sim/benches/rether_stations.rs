//! Simulator cost of a RETHER segment against its number of stations:
//! wall time per simulated second for N = 10, 25, 50 and 100 stations at
//! 1 Gb/s, and each as a ratio to the 10-station segment of the same
//! round. Every station hears every token pass, and the hop rate does not
//! depend on N, so the work per simulated second can at best grow
//! linearly: the ratio to 10 stations should stay near N / 10 (the last
//! column divides it by N / 10; 1.0 is linear). Before the node table was
//! parsed in one pass, 100 stations cost about 50 times 10 stations
//! (docs/paper-rether.md, "Simulator speed", has the figures).
//!
//! The scenario is `scripts/rether-stations N --duration 300ms`, written
//! here by [`scenario`]. Sizes are run in turn, round after round, so load
//! from other processes on a shared machine hits them alike.
//!
//! `cargo bench -p qosnet-sim --bench rether_stations` (a number as the
//! first argument, e.g. `-- 255`, adds that size, up to 255, to the list).
//! Writes `target/criterion/rether_stations.csv`.

use std::fmt::Write as _;
use std::path::Path;

use qosnet_scenario::load_str;
use qosnet_sim::Sim;

const SIZES: [usize; 4] = [10, 25, 50, 100];
const ROUNDS: usize = 5;

/// N stations `s1..sN` on one 1 Gb/s segment: two MPEG-I RT sessions
/// (s1 → s2, s3 → s2) and 100 kb/s of Poisson NRT traffic from every
/// station to the next, with the overheads of a fast host.
fn scenario(n: usize, duration: &str) -> String {
    let mut t = format!(
        "[scenario]\nname = \"rether-{n}\"\nduration = \"{duration}\"\nwarmup = \"100ms\"\nseed = 1\n\n\
         [rether]\nt_token = \"20us\"\na = \"5us\"\nb = \"10us\"\n\n"
    );
    for i in 1..=n {
        let _ = write!(t, "[[node]]\nname = \"s{i}\"\nkind = \"rether\"\n");
    }
    let names: Vec<String> = (1..=n).map(|i| format!("\"s{i}\"")).collect();
    // A /24 (the default) holds 254 stations.
    let subnet = if n > 254 { "subnet = \"10.0.0.0/16\"\n" } else { "" };
    let _ = write!(
        t,
        "\n[[segment]]\nname = \"bus\"\nnodes = [{}]\ncapacity = \"1Gb/s\"\npropagation = \"1us\"\n{subnet}\n",
        names.join(", ")
    );
    for (k, (from, start)) in [(1, "10ms"), (3, "20ms")].iter().enumerate() {
        let _ = write!(
            t,
            "[[flow]]\nname = \"video{}\"\nfrom = \"s{from}\"\nto = \"s2\"\nrt = true\n\
             size = 6400\nrate = \"30pps\"\npattern = \"cbr\"\nstart = \"{start}\"\n",
            k + 1
        );
    }
    for i in 1..=n {
        let _ = write!(
            t,
            "[[flow]]\nname = \"nrt{i}\"\nfrom = \"s{i}\"\nto = \"s{}\"\nsize = 1000\n\
             rate = \"100kb/s\"\npattern = \"poisson\"\n",
            i % n + 1
        );
    }
    t
}

/// Wall seconds per simulated second of one run, and its event count.
fn run(text: &str) -> (f64, u64) {
    let sc = load_str("rether-stations", text, &[]).expect("the generated scenario loads");
    let e = Sim::new(sc).expect("the scenario builds").run().engine;
    (e.wall_s / e.sim_s, e.events)
}

fn median(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let mut sizes = SIZES.to_vec();
    let extra = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .find_map(|a| a.parse::<usize>().ok());
    if let Some(n) = extra.filter(|n| (3..=255).contains(n) && !sizes.contains(n)) {
        sizes.push(n);
    }
    let texts: Vec<String> = sizes.iter().map(|&n| scenario(n, "300ms")).collect();
    // One unmeasured round warms caches and the allocator.
    let mut secs = vec![Vec::new(); sizes.len()];
    let mut events = vec![0u64; sizes.len()];
    for round in 0..=ROUNDS {
        for (k, t) in texts.iter().enumerate() {
            let (s, e) = run(t);
            if round > 0 {
                secs[k].push(s);
                events[k] = e;
            }
        }
    }
    let mut csv = String::from(
        "stations,wall_s_per_sim_s_median,min,max,ratio_to_10_median,ratio_min,ratio_max,ratio_per_station,events\n",
    );
    println!(
        "RETHER segment, 1 Gb/s, {ROUNDS} interleaved rounds: wall s per simulated s, median [min..max]"
    );
    for (k, &n) in sizes.iter().enumerate() {
        let mut ratio: Vec<f64> = secs[k].iter().zip(&secs[0]).map(|(a, b)| a / b).collect();
        let (m, lo, hi) = median(&mut secs[k].clone());
        let (rm, rlo, rhi) = median(&mut ratio);
        let linear = rm / (n as f64 / sizes[0] as f64);
        println!(
            "  {n:>3} stations  {m:8.3} s/s [{lo:.3}..{hi:.3}]  x{rm:6.2} vs {} [{rlo:.2}..{rhi:.2}]  x{linear:.2} of linear  {} events",
            sizes[0], events[k]
        );
        let _ = writeln!(
            csv,
            "{n},{m:.4},{lo:.4},{hi:.4},{rm:.3},{rlo:.3},{rhi:.3},{linear:.3},{}",
            events[k]
        );
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join("rether_stations.csv"), csv);
    }
}
