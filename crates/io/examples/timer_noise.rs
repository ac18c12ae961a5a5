//! Print how precisely this machine wakes a thread: sleep overshoot,
//! busy-poll stalls and `wait_until` lateness, with the default timer slack
//! and then with 1 ns slack (what a live driver sets).
//!
//! `cargo run --release -p qosnet-io --example timer_noise [SECONDS]`

use qosnet_core::time::Duration;
use qosnet_io::clock;

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let d = std::time::Duration::from_secs_f64(secs);
    println!("default timer slack:\n{}\n", clock::measure_timer_noise(d));
    clock::set_timer_slack(Duration(1));
    println!("1 ns timer slack:\n{}", clock::measure_timer_noise(d));
}
