//! `qosnet`: the command line. Argument parsing and dispatch; each
//! subcommand is a module of [`cmd`], the options several share are in
//! [`args`], and the work is in the library crates (`qosnet-sim`,
//! `qosnet-live`, `qosnet-experiments`).

#![forbid(unsafe_code)]

#[macro_use]
extern crate qosnet_experiments;

mod args;
mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "qosnet",
    version,
    about = "Software router and network lab for deterministic and differentiated QoS"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario in the discrete-event simulator (default: the ICC 2006 TDP testbed).
    Sim(cmd::sim::SimArgs),
    /// Run a paper's experiments and print qosnet's numbers beside the paper's.
    Reproduce(cmd::reproduce::ReproduceArgs),
    /// A parameter grid × seeds over a scenario on every core, with means
    /// and 95 % confidence intervals; or a Slurm job array / GNU parallel
    /// job list of it.
    Sweep(cmd::sweep::SweepArgs),
    /// Validate a scenario and show its network: addresses, routes, TDP plan.
    Check(args::ScenarioArgs),
    /// Live network-namespace labs of scenarios, with qosnet routers (root).
    Lab {
        #[command(subcommand)]
        cmd: cmd::lab::LabCmd,
    },
    /// Send measurement UDP traffic (probe payloads) to a sink.
    Gen(cmd::gen::GenArgs),
    /// Receive measurement traffic and print per-flow loss, delay, jitter.
    Sink(cmd::sink::SinkArgs),
    /// Run one node of a scenario (router, switch, ...) as its own process
    /// on this machine's interfaces.
    Node(cmd::node::NodeArgs),
    /// The same as `node` (kept for router configs written for it).
    Router(cmd::node::NodeArgs),
    /// Real-time sessions on a running RETHER lab's stations: status,
    /// open, send, recv, watch, close (root).
    Rether {
        #[command(subcommand)]
        cmd: cmd::rether::RetherCmd,
    },
    /// Benchmarks: `qosnet bench forward` (root).
    Bench {
        #[command(subcommand)]
        cmd: cmd::bench::BenchCmd,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Sim(a) => cmd::sim::run(a),
        Cmd::Reproduce(a) => cmd::reproduce::run(a),
        Cmd::Sweep(a) => cmd::sweep::run(a),
        Cmd::Check(a) => cmd::check::run(a),
        Cmd::Lab { cmd } => cmd::lab::run(cmd),
        Cmd::Gen(a) => cmd::gen::run(a),
        Cmd::Sink(a) => cmd::sink::run(a),
        Cmd::Node(a) | Cmd::Router(a) => cmd::node::run(a),
        Cmd::Rether { cmd } => cmd::rether::run(cmd),
        Cmd::Bench { cmd } => cmd::bench::run(cmd),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            // `reproduce --strict` on a verdict that differs is an answer,
            // not a failure to run: status 1, as `diff` and `cmp` do.
            if e.is::<qosnet_experiments::verdict::StrictFailure>() {
                ExitCode::from(1)
            } else {
                ExitCode::from(2)
            }
        }
    }
}
