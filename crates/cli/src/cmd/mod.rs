//! One module per subcommand: its arguments (clap) and what it prints.

pub mod bench;
pub mod check;
pub mod gen;
pub mod lab;
pub mod node;
pub mod reproduce;
pub mod rether;
pub mod sim;
pub mod sink;
pub mod sweep;

use qosnet_live::driver::DriverReport;

/// The routers' driver summary after a live run.
fn print_driver(r: &DriverReport) {
    outln!(
        "routers: {} frames in, {} out in {:.1} s; timer lateness {}",
        r.stats.rx_frames,
        r.stats.tx_frames,
        r.wall_s,
        r.lateness
    );
}
