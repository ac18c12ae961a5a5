//! `qosnet sim`: one scenario in the discrete-event simulator; the
//! per-flow and per-link tables (with the paper's column when the scenario
//! has one), results files, pcap capture and engine figures.

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use qosnet_experiments::report;
use qosnet_scenario::stall::StallSpec;
use qosnet_sim::Sim;

use crate::args::{ctrl_c_flag, ScenarioArgs};

#[derive(Args)]
pub struct SimArgs {
    #[command(flatten)]
    pub sc: ScenarioArgs,
    /// Write results.json, flows.csv and delay.svg to this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print simulator performance figures (events/s, simulated s per wall s).
    #[arg(long)]
    pub stats: bool,
    /// Print results.json to standard output instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write a pcap file per link direction into this directory (frames as
    /// transmitted, virtual-time nanosecond timestamps).
    #[arg(long, value_name = "DIR")]
    pub pcap: Option<PathBuf>,
    /// Only capture these directed links (e.g. R1->R2); repeatable.
    #[arg(long = "pcap-link", value_name = "FROM->TO", requires = "pcap")]
    pub pcap_links: Vec<String>,
    /// Stall the routers: every EVERY from the start of traffic, all
    /// routers (every node but hosts and segments, as the live lab's router
    /// thread runs them) stop together for LEN, e.g. 300us/200ms. The
    /// simulator's side of `qosnet lab run --stall` (a `[[fault]] kind =
    /// "stall"` added to the scenario).
    #[arg(long, value_name = "LEN/EVERY")]
    pub stall: Option<String>,
}

pub fn run(a: SimArgs) -> Result<()> {
    let mut sc = a.sc.load()?;
    let stall = match &a.stall {
        None => None,
        Some(s) => {
            let spec = StallSpec::parse(s).map_err(|e| anyhow!(e))?;
            let (nodes, _) = spec.apply(&mut sc).map_err(|e| anyhow!(e))?;
            Some((spec, nodes))
        }
    };
    // An unwritable --out fails now, not after the run.
    if let Some(dir) = &a.out {
        report::check_out_dir(dir)?;
    }
    let paper = sc.paper.clone();
    let name = sc.name.clone();
    let names: Vec<String> = sc.nodes.iter().map(|n| n.name.clone()).collect();
    let mut sim = Sim::new(sc).map_err(|e| anyhow!("{name}: {e}"))?;
    sim.set_progress(!a.json);
    // Ctrl-C (or SIGTERM) ends the run early; what was measured up to
    // then is printed and written like a full run's results.
    sim.set_stop(ctrl_c_flag()?);
    if let Some(dir) = &a.pcap {
        let files = sim.enable_pcap(dir, &a.pcap_links).map_err(|e| anyhow!(e))?;
        if !a.json {
            eprintln!("capturing {} link directions into {}", files.len(), dir.display());
        }
    }
    let mut r = sim.run();
    if let Some((spec, nodes)) = &stall {
        r.extra
            .insert("stalls".into(), report::sim_stalls_extra(&r, spec, nodes, &names));
    }
    if sim.interrupted() {
        eprintln!(
            "interrupted at {} of {} simulated: partial results (packets still in flight count as lost)",
            report::fmt_ns(r.engine.sim_s * 1e9),
            report::fmt_ns(r.duration_s * 1e9)
        );
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        outln!(
            "scenario {} ({}), seed {}, {} simulated, warm-up {}",
            r.scenario,
            r.source,
            r.seed,
            report::fmt_ns(r.duration_s * 1e9),
            report::fmt_ns(r.warmup_s * 1e9)
        );
        if let Some(l) = report::stalls_line(&r) {
            outln!("{l}");
        }
        out!("{}", report::flow_table(&r, paper.as_ref()));
        if let Some(p) = report::paper_column(paper.as_ref()) {
            outln!("paper column: {}", p.source);
        }
        outln!();
        out!("{}", report::link_table(&r));
        let rether = report::rether_table(&r);
        if !rether.is_empty() {
            outln!();
            out!("{rether}");
        }
        if a.stats {
            outln!("{}", report::engine_line(&r));
        }
    }
    if let Some(dir) = &a.out {
        let buckets: Vec<_> = (0..r.flows.len())
            .map(|i| (r.flows[i].name.clone(), sim.delay_buckets(i)))
            .collect();
        report::write_outputs_with_paper(dir, &r, &buckets, paper.as_ref())?;
        if !a.json {
            outln!(
                "wrote {0}/results.json, {0}/flows.csv, {0}/delay.svg",
                dir.display()
            );
        }
    }
    if sim.interrupted() {
        anyhow::bail!("interrupted (partial results above)");
    }
    Ok(())
}
