//! What every experiment does with its scenarios: load an embedded one with
//! the run's overrides, simulate it, run independent simulations on the
//! machine's cores, and, live, check for root and make Ctrl-C remove the
//! labs.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Result};
use qosnet_scenario::results::Results;
use qosnet_scenario::stall::StallSpec;
use qosnet_scenario::{load_str, Scenario};
use qosnet_sim::Sim;

use crate::Embedded;

/// An embedded scenario with `--set` overrides.
pub(crate) fn load(e: &Embedded, sets: &[String]) -> Result<Scenario> {
    load_str(e.path, e.text, sets).map_err(|err| anyhow!("{err}"))
}

/// One simulation: its results, per-flow delay histograms for plots, and
/// the scenario it ran.
pub(crate) struct SimRun {
    pub scenario: Scenario,
    pub results: Results,
    pub buckets: Vec<(String, Vec<(u64, u64)>)>,
}

/// Simulate a loaded scenario.
pub(crate) fn simulate(sc: Scenario) -> Result<SimRun> {
    let mut sim = Sim::new(sc.clone()).map_err(|e| anyhow!("{}: {e}", sc.source))?;
    let results = sim.run();
    let buckets = (0..results.flows.len())
        .map(|i| (results.flows[i].name.clone(), sim.delay_buckets(i)))
        .collect();
    Ok(SimRun {
        scenario: sc,
        results,
        buckets,
    })
}

/// An embedded scenario with overrides, simulated.
pub(crate) fn sim(e: &Embedded, sets: &[String]) -> Result<SimRun> {
    simulate(load(e, sets)?)
}

/// `--stall` applied to a loaded scenario: its routers stalled together
/// (`StallSpec::apply`), to be reported by [`simulate_stalled`].
pub(crate) struct Stalled {
    spec: StallSpec,
    nodes: Vec<usize>,
}

/// Apply `--stall`, if given, to a loaded scenario.
pub(crate) fn stall(sc: &mut Scenario, spec: Option<StallSpec>) -> Result<Option<Stalled>> {
    let Some(spec) = spec else { return Ok(None) };
    let (nodes, _) = spec.apply(sc).map_err(|e| anyhow!(e))?;
    Ok(Some(Stalled { spec, nodes }))
}

/// Simulate a loaded scenario that [`stall`] may have stalled; the
/// results then carry the `stalls` section `qosnet sim --stall` writes.
pub(crate) fn simulate_stalled(sc: Scenario, st: Option<&Stalled>) -> Result<SimRun> {
    let names: Vec<String> = sc.nodes.iter().map(|n| n.name.clone()).collect();
    let mut run = simulate(sc)?;
    if let Some(st) = st {
        let extra = crate::report::sim_stalls_extra(&run.results, &st.spec, &st.nodes, &names);
        run.results.extra.insert("stalls".into(), extra);
    }
    Ok(run)
}

/// An embedded scenario with overrides and `--stall`, simulated.
pub(crate) fn sim_stalled(e: &Embedded, sets: &[String], spec: Option<StallSpec>) -> Result<SimRun> {
    let mut sc = load(e, sets)?;
    let st = stall(&mut sc, spec)?;
    simulate_stalled(sc, st.as_ref())
}

pub(crate) type Job<'a, T> = Box<dyn FnOnce() -> Result<T> + Send + 'a>;

/// Run independent jobs on as many threads as the machine has cores, each
/// thread taking the next job when it is done; results in job order.
pub(crate) fn parallel<T: Send>(jobs: Vec<Job<'_, T>>) -> Result<Vec<T>> {
    parallel_with(cores(), jobs)
}

/// The machine's cores (1 when it cannot tell).
pub fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// [`parallel`] on `threads` threads (at least one, at most one per job).
/// Every job runs even when an earlier one fails; the first failure in
/// job order is returned.
pub(crate) fn parallel_with<T: Send>(threads: usize, jobs: Vec<Job<'_, T>>) -> Result<Vec<T>> {
    let n = jobs.len();
    let threads = threads.clamp(1, n.max(1));
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let done: Mutex<Vec<Option<Result<T>>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).next();
                let Some((i, job)) = next else { break };
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
                    .unwrap_or_else(|_| Err(anyhow!("simulation thread panicked")));
                done.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
            });
        }
    });
    done.into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(anyhow!("run missing"))))
        .collect()
}

/// Root, or an error saying why `what` needs it.
pub(crate) fn need_root(what: &str) -> Result<()> {
    qosnet_live::labtools::require_root(what).map_err(|e| anyhow!(e))
}

/// Ctrl-C, SIGTERM and SIGHUP set the returned flag; this process's labs
/// are removed even if the program does not get to it within 5 s.
pub(crate) fn signals() -> Result<Arc<AtomicBool>> {
    qosnet_live::lab::install_signal_cleanup(std::time::Duration::from_secs(5))
        .map_err(|e| anyhow!("installing signal handlers: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_keeps_job_order_and_reports_failures() {
        let jobs: Vec<Job<usize>> = (0..7usize)
            .map(|i| {
                Box::new(move || {
                    std::thread::sleep(std::time::Duration::from_millis(7 - i as u64));
                    Ok(i * i)
                }) as Job<usize>
            })
            .collect();
        assert_eq!(parallel(jobs).unwrap(), [0, 1, 4, 9, 16, 25, 36]);
        let jobs: Vec<Job<u8>> = vec![Box::new(|| Ok(1)), Box::new(|| Err(anyhow!("run 2 failed")))];
        assert_eq!(parallel(jobs).unwrap_err().to_string(), "run 2 failed");
        assert!(parallel::<u8>(Vec::new()).unwrap().is_empty());
    }
}
