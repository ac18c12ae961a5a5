//! What every experiment does with its scenarios: load an embedded one with
//! the run's overrides, simulate it, run independent simulations on the
//! machine's cores, and, live, check for root and make Ctrl-C remove the
//! labs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    let jobs: Vec<Mutex<Option<Job<T>>>> = jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let done: Vec<Mutex<Option<Result<T>>>> = (0..n).map(|_| Mutex::new(None)).collect();
    pool(threads, n, &|i| {
        let job = jobs[i].lock().unwrap_or_else(|p| p.into_inner()).take();
        let r = job.map_or_else(|| Err(anyhow!("run missing")), run_caught);
        *done[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    })?;
    done.into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(|| Err(anyhow!("run missing")))
        })
        .collect()
}

/// `job(i)` for every `i` in `0..n` on `threads` threads (at least one,
/// at most `n`), each thread taking the next index when it is done. Every
/// index runs even when an earlier one fails; the first failure in index
/// order is returned. Nothing is kept per index, so a million indices
/// cost no more memory than ten.
pub(crate) fn for_each<F>(threads: usize, n: usize, job: F) -> Result<()>
where
    F: Fn(usize) -> Result<()> + Sync,
{
    let first_err: Mutex<Option<(usize, anyhow::Error)>> = Mutex::new(None);
    pool(threads, n, &|i| {
        if let Err(e) = run_caught(|| job(i)) {
            let mut f = first_err.lock().unwrap_or_else(|p| p.into_inner());
            if f.as_ref().is_none_or(|(j, _)| i < *j) {
                *f = Some((i, e));
            }
        }
    })?;
    match first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// A job whose panic becomes an error (one bad run must not take the
/// others down with it).
fn run_caught<T>(job: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
        .unwrap_or_else(|_| Err(anyhow!("simulation thread panicked")))
}

/// The worker pool under [`parallel_with`] and [`for_each`].
fn pool(threads: usize, n: usize, work: &(dyn Fn(usize) + Sync)) -> Result<()> {
    pool_built(threads, n, work, &|_| std::thread::Builder::new())
}

/// [`pool`] with the threads made by `builder(k)`: `work(i)` for every
/// `i` in `0..n` on at most `threads` threads (never more than `n`). A
/// thread the system refuses (a process limit, no memory for its stack)
/// is an error, not a panic: the threads already started finish the
/// index they hold and take no more, and the error names the limit hit.
fn pool_built(
    threads: usize,
    n: usize,
    work: &(dyn Fn(usize) + Sync),
    builder: &dyn Fn(usize) -> std::thread::Builder,
) -> Result<()> {
    let threads = threads.clamp(1, n.max(1));
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for k in 0..threads.min(n) {
            let worker = || {
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    work(i);
                }
            };
            if let Err(e) = builder(k).spawn_scoped(s, worker) {
                stop.store(true, Ordering::Relaxed);
                return Err(anyhow!(
                    "starting worker thread {} of {threads}: {e}; the system refused it \
                     (a process or memory limit, see ulimit -u): run fewer at once (-j)",
                    k + 1
                ));
            }
        }
        Ok(())
    })
}

/// Root, or an error saying why `what` needs it.
pub(crate) fn need_root(what: &str) -> Result<()> {
    qosnet_lab::labtools::require_root(what).map_err(|e| anyhow!(e))
}

/// Ctrl-C, SIGTERM and SIGHUP set the returned flag; this process's labs
/// are removed even if the program does not get to it within 5 s.
pub(crate) fn signals() -> Result<Arc<AtomicBool>> {
    qosnet_lab::lab::install_signal_cleanup(std::time::Duration::from_secs(5))
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

    /// A thread the system refuses is an error naming it, not a panic
    /// (`sweep -j 1000000` under a process limit panicked in
    /// `std::thread::scope`'s spawn). Here the second thread asks for a
    /// stack of 1 PiB, more than the address space, so its spawn fails.
    #[test]
    fn refused_thread_is_an_error() {
        let ran = AtomicUsize::new(0);
        let builder = |k: usize| {
            let b = std::thread::Builder::new();
            if k == 1 {
                b.stack_size(1 << 50)
            } else {
                b
            }
        };
        // Slow enough that the first thread cannot do all 100 (0.5 s)
        // before the second one's spawn fails (microseconds).
        let work = |_| {
            ran.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let err = pool_built(4, 100, &work, &builder).unwrap_err().to_string();
        assert!(err.contains("starting worker thread 2 of 4"), "{err}");
        // The first thread stopped taking work when the second failed.
        assert!(ran.load(Ordering::Relaxed) < 100);
    }

    #[test]
    fn for_each_reports_the_first_failure_in_index_order() {
        let ran = AtomicUsize::new(0);
        let r = for_each(3, 50, |i| {
            ran.fetch_add(1, Ordering::Relaxed);
            match i {
                7 | 30 => Err(anyhow!("index {i} failed")),
                9 => panic!("index 9 panicked"),
                _ => Ok(()),
            }
        });
        assert_eq!(r.unwrap_err().to_string(), "index 7 failed");
        assert_eq!(ran.load(Ordering::Relaxed), 50);
        assert!(for_each(8, 0, |_| Ok(())).is_ok());
    }
}
