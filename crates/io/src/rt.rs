//! Real-time placement of live threads: CPU pinning, SCHED_FIFO and locked
//! memory, each reported as applied or refused with the kernel's reason.
//!
//! A live TDP run measures deadlines of 250 µs time frames (ICC 2006 §IV);
//! a router thread or a traffic tester that the scheduler moves between
//! cores, preempts for a compiler, or stalls on a page fault misses them.
//! The paper's routers were dedicated PCs and its sources a hardware
//! tester; on a shared machine the closest equivalent is one core each,
//! SCHED_FIFO (so ordinary threads never preempt them) and `mlockall` (no
//! page faults once running). Each step needs privileges or resources a
//! machine may not grant, so each returns what happened in words, printed
//! beside the results instead of failing the run.
//!
//! The opposite tool lives here too: [`StallSpec`] takes the router's core
//! away on purpose, to measure what a stall of a given size costs.

use std::io;

use rustix::fs::FlockOperation;

use qosnet_core::time::{Duration, Instant};

use crate::sys;

/// SCHED_FIFO priority of the router thread; the tester gets one less
/// (they run on separate cores, so the order only matters on one core).
pub const ROUTER_PRIO: i32 = 50;
pub const TESTER_PRIO: i32 = 49;

/// CPUs this process may run on, ascending.
pub fn allowed_cpus() -> Vec<usize> {
    use rustix::thread::{sched_getaffinity, CpuSet};
    match sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    }
}

/// Pin the calling thread to `cpu`.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    pin(None, cpu)
}

/// Pin thread `tid` (the calling thread: `None`) to `cpu`.
pub fn pin(tid: Option<rustix::process::Pid>, cpu: usize) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    Ok(rustix::thread::sched_setaffinity(tid, &set)?)
}

/// Put the calling thread under SCHED_FIFO at `prio`; returns the old
/// policy and priority.
pub fn set_fifo(prio: i32) -> io::Result<(i32, i32)> {
    let old = sys::sched_get()?;
    sys::sched_set(libc::SCHED_FIFO, prio.clamp(1, 99))?;
    Ok(old)
}

/// Give the calling thread its old policy back.
pub fn restore_sched(policy: i32, prio: i32) {
    let _ = sys::sched_set(policy, prio);
}

/// Lock the whole process's memory, present and future (`mlockall`).
pub fn lock_memory() -> io::Result<()> {
    use rustix::mm::MlockAllFlags;
    Ok(rustix::mm::mlockall(
        MlockAllFlags::CURRENT | MlockAllFlags::FUTURE,
    )?)
}

/// Undo [`lock_memory`].
pub fn unlock_memory() {
    let _ = rustix::mm::munlockall();
}

/// The calling thread's CPU time so far, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec.max(0) as u64 * 1_000_000_000 + ts.tv_nsec.max(0) as u64
}

/// Set the calling thread's nice value (Linux: nice values are per
/// thread); returns the old one.
pub fn set_nice(nice: i32) -> Option<i32> {
    let me = Some(rustix::thread::gettid());
    let old = rustix::process::getpriority_process(me).ok()?;
    rustix::process::setpriority_process(me, nice.clamp(-20, 19))
        .ok()
        .map(|()| old)
}

/// Where the kernel keeps its RT throttling budget: SCHED_FIFO threads
/// together may run `sched_rt_runtime_us` of every `sched_rt_period_us`
/// (950 ms of 1 s by default), then wait out the rest of the period.
const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// The value of [`RT_RUNTIME`] that means "no budget": RT threads run
/// unthrottled.
const UNLIMITED: &str = "-1";

/// Read and write access to the RT budget; the kernel's file in a run, a
/// fake in the tests of the counting (which must never touch the
/// machine's setting).
trait RtBudget: Sync {
    fn read(&self) -> Result<String, String>;
    fn write(&self, v: &str) -> Result<(), String>;
    /// The file a [`Guardian`] writes the budget back to if this process
    /// dies holding it lifted; `None`: no guardian.
    fn file(&self) -> Option<&str> {
        None
    }
}

/// The kernel's budget, [`RT_RUNTIME`].
struct ProcRtBudget;

impl RtBudget for ProcRtBudget {
    fn read(&self) -> Result<String, String> {
        std::fs::read_to_string(RT_RUNTIME)
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("{RT_RUNTIME}: {e}"))
    }
    fn write(&self, v: &str) -> Result<(), String> {
        std::fs::write(RT_RUNTIME, v).map_err(|e| format!("{RT_RUNTIME}: {e}"))
    }
    fn file(&self) -> Option<&str> {
        Some(RT_RUNTIME)
    }
}

/// What a guardian does when the process that started it is gone without
/// saying `done` (killed with SIGKILL, a crash): exactly what that
/// process's last release would have done. Under the decision lock, if no
/// other process holds the budget lifted (an exclusive lock on
/// `rt-throttle.held` is granted: the dead process's shared lock went with
/// it), write the saved budget back and remove it; otherwise leave it to
/// the last of the others. Without a meeting directory, write the value
/// it was given. Arguments: directory (or empty), value, budget file.
const GUARDIAN: &str = r#"
read -r said || said=
[ "$said" = done ] && exit 0
if [ -z "$1" ]; then
  printf '%s\n' "$2" > "$3"
  exit 0
fi
command -v flock >/dev/null 2>&1 || exit 0
exec flock -x "$1/rt-throttle.lock" sh -c '
  flock -xn "$1/rt-throttle.held" true || exit 0
  v=$(cat "$1/rt-throttle.saved" 2>/dev/null) || exit 0
  [ -n "$v" ] || exit 0
  printf "%s\n" "$v" > "$3" && rm -f "$1/rt-throttle.saved"
' sh "$@"
"#;

/// A small process (`sh`, in a process group of its own so that a signal
/// to the lab's group spares it) that restores the budget if this process
/// dies while holding it lifted: it waits on a pipe that only this
/// process writes to, and the kernel closes that pipe however the process
/// ends. A normal release says `done` first, and the guardian exits.
struct Guardian {
    child: std::process::Child,
}

impl std::fmt::Debug for Guardian {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Guardian({})", self.child.id())
    }
}

impl Guardian {
    fn start(file: &str, dir: Option<&str>, restore: &str) -> Option<Guardian> {
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new("sh")
            .args(["-c", GUARDIAN, "sh", dir.unwrap_or(""), restore, file])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .ok()?;
        Some(Guardian { child })
    }

    /// This process releases the budget itself: the guardian exits.
    fn dismiss(mut self) {
        if let Some(mut i) = self.child.stdin.take() {
            use std::io::Write;
            let _ = i.write_all(b"done\n");
        }
        let _ = self.child.wait();
    }
}

/// The guards of one budget alive in this process, and the value the
/// last of them writes back.
struct Lifts {
    budget: &'static dyn RtBudget,
    /// Where processes that lift the budget meet ([`Shared`]); `None`:
    /// this process's count only.
    dir: Option<&'static str>,
    state: std::sync::Mutex<LiftState>,
}

#[derive(Debug)]
struct LiftState {
    holders: usize,
    restore: String,
    /// This process's share of a cross-process lift, while it holds one.
    shared: Option<Shared>,
    /// Restores the budget if this process dies holding it lifted.
    guardian: Option<Guardian>,
}

/// The process-wide count for the kernel's budget. `/run` is a tmpfs,
/// emptied at boot like the budget itself.
static PROC_LIFTS: Lifts = Lifts {
    budget: &ProcRtBudget,
    dir: Some("/run/qosnet"),
    state: std::sync::Mutex::new(LiftState {
        holders: 0,
        restore: String::new(),
        shared: None,
        guardian: None,
    }),
};

/// The files processes holding the budget lifted share, in one directory:
/// `rt-throttle.lock`, locked exclusively (flock) while a process decides
/// whether to lift, join or restore; `rt-throttle.held`, locked shared by
/// every process that holds the budget lifted, for as long as it does
/// (the kernel drops a dead process's locks, so a crash cannot leave a
/// holder behind); `rt-throttle.saved`, the budget to write back, written
/// by the process that lifted it and removed by the one that restores it.
#[derive(Debug)]
struct Shared {
    held: std::fs::File,
}

fn flock(f: &std::fs::File, op: FlockOperation) -> io::Result<()> {
    loop {
        match rustix::fs::flock(f, op) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

fn open_rw(path: &str) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// The decision lock of `dir`, held exclusively until dropped; `None`
/// when the directory or the lock cannot be had (then there is no
/// cross-process count).
fn decision_lock(dir: &str) -> Option<std::fs::File> {
    std::fs::create_dir_all(dir).ok()?;
    let f = open_rw(&format!("{dir}/rt-throttle.lock")).ok()?;
    flock(&f, FlockOperation::LockExclusive).ok()?;
    Some(f)
}

impl Lifts {
    fn state(&self) -> std::sync::MutexGuard<'_, LiftState> {
        // A panic while holding the lock leaves the count consistent (it
        // is only changed after the write it accounts for succeeded).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn saved_path(dir: &str) -> String {
        format!("{dir}/rt-throttle.saved")
    }

    fn lift(&'static self) -> Result<Option<RtThrottleLifted>, String> {
        let mut st = self.state();
        if st.holders > 0 {
            // Another run of this process holds it lifted: share its
            // guard's restore value, so whichever drops last restores.
            st.holders += 1;
            return Ok(Some(RtThrottleLifted {
                lifts: self,
                old: st.restore.clone(),
            }));
        }
        // Held until this function returns: no other process lifts,
        // joins or restores meanwhile.
        let decision = self.dir.and_then(decision_lock);
        let dir = self.dir.filter(|_| decision.is_some());
        let old = self.budget.read()?;
        let restore = if old == UNLIMITED {
            // Another qosnet process holding it lifted left the budget to
            // restore; without that, it is the machine's own setting (or
            // a tool's we know nothing of): not ours to restore.
            let saved = dir
                .and_then(|d| std::fs::read_to_string(Self::saved_path(d)).ok())
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty() && s != UNLIMITED);
            match saved {
                Some(s) => s,
                None => return Ok(None),
            }
        } else {
            // Saved before lifting: a process that dies between the two
            // leaves a saved budget that the next run restores, never an
            // unlimited one it would take for the machine's.
            let saved = dir.is_some_and(|d| std::fs::write(Self::saved_path(d), &old).is_ok());
            if let Err(e) = self.budget.write(UNLIMITED) {
                if let Some(d) = dir.filter(|_| saved) {
                    let _ = std::fs::remove_file(Self::saved_path(d));
                }
                return Err(e);
            }
            old
        };
        let shared = dir
            .and_then(|d| open_rw(&format!("{d}/rt-throttle.held")).ok())
            .filter(|f| flock(f, FlockOperation::LockShared).is_ok())
            .map(|held| Shared { held });
        st.holders = 1;
        st.restore = restore.clone();
        st.guardian = self.budget.file().and_then(|f| Guardian::start(f, dir, &restore));
        st.shared = shared;
        drop(decision);
        Ok(Some(RtThrottleLifted {
            lifts: self,
            old: restore,
        }))
    }

    fn release(&self) {
        let mut st = self.state();
        st.holders = st.holders.saturating_sub(1);
        if st.holders > 0 {
            return;
        }
        if let Some(g) = st.guardian.take() {
            g.dismiss();
        }
        let Some(shared) = st.shared.take() else {
            let _ = self.budget.write(&st.restore);
            return;
        };
        let decision = self.dir.and_then(decision_lock);
        // Under the decision lock no process takes a new shared hold, so
        // an exclusive one is granted exactly when no other process
        // holds the budget lifted: then this one restores it. Otherwise
        // the last of the others will.
        if decision.is_some() && flock(&shared.held, FlockOperation::NonBlockingLockExclusive).is_ok() {
            let _ = self.budget.write(&st.restore);
            if let Some(d) = self.dir {
                let _ = std::fs::remove_file(Self::saved_path(d));
            }
        }
        drop(shared);
        drop(decision);
    }
}

/// RT throttling lifted for as long as this guard lives. A router thread
/// that forwards at full load spends more than 95 % of its core in its own
/// sends and the softirq work they bring; the kernel then stops it for the
/// rest of the second: 45-52 ms, hundreds of TDP time frames, in every
/// ICC 2006 Table II run here, and none once lifted (docs/live.md).
///
/// Guards are counted per process: the first lift saves the budget and
/// lifts it, later ones (two live runs on parallel test threads, a lab run
/// inside a bench) join, and only the last drop writes the saved budget
/// back, so no run loses the lift while another still needs it.
///
/// Across processes (two `qosnet lab run`s, parallel test binaries) the
/// count is kept in `/run/qosnet` ([`Shared`]): a process that finds the
/// budget unlimited by another qosnet process joins it, and whichever
/// process holds it lifted last restores the budget the first one saved.
/// A budget found unlimited with nothing saved is the machine's own
/// setting: `Ok(None)`, never restored. Where `/run/qosnet` cannot be
/// used, the count is per process, and the process that lifted the budget
/// restores it when its last guard drops even if another still runs. A
/// process killed with SIGKILL (or crashing) is covered by its
/// [`Guardian`], which does what its release would have done; if the
/// guardian itself is killed too, the saved value stays for the next
/// qosnet run that lifts the budget to restore when it ends (or
/// `sysctl kernel.sched_rt_runtime_us=950000`).
pub struct RtThrottleLifted {
    lifts: &'static Lifts,
    old: String,
}

impl std::fmt::Debug for RtThrottleLifted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RtThrottleLifted")
            .field("old", &self.old)
            .finish()
    }
}

impl RtThrottleLifted {
    /// Lift the budget (or join this process's lift); `Ok(None)` when it
    /// is already unlimited and not by this process, `Err` with the
    /// reason when it cannot be read or written.
    pub fn lift() -> Result<Option<RtThrottleLifted>, String> {
        PROC_LIFTS.lift()
    }
    /// The budget that the last guard restores on drop (µs per period).
    pub fn old(&self) -> &str {
        &self.old
    }
}

impl Drop for RtThrottleLifted {
    fn drop(&mut self) {
        self.lifts.release();
    }
}

/// The kernel's fair server (Linux 6.12 and later): a deadline entity that,
/// when normal tasks wait on a CPU that real-time threads keep busy, runs
/// them for its budget (50 ms of every second by default) ahead of the
/// real-time threads. Lifting RT throttling does not remove it: beside
/// other work on the machine it stopped the ICC 2006 Table II router
/// thread for 40 and 50 ms in one run here (docs/live.md). Says what the
/// budget on `cpu` is, or, on a kernel that has one, why it cannot be read.
pub fn fair_server_note(cpu: usize) -> Option<String> {
    let dir = format!("/sys/kernel/debug/sched/fair_server/cpu{cpu}");
    let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).map(|s| s.trim().parse::<u64>());
    match (read("runtime"), read("period")) {
        (Ok(Ok(rt)), Ok(Ok(per))) => Some(format!(
            "kernel fair server on CPU {cpu}: normal tasks waiting there may take {:.1} ms of every {:.0} ms from the router thread",
            rt as f64 / 1e6,
            per as f64 / 1e6
        )),
        (r, _) => {
            let why = match r {
                Err(e) => e.to_string(),
                Ok(Err(e)) => format!("unreadable value: {e}"),
                Ok(Ok(_)) => "period unreadable".into(),
            };
            kernel_has_fair_server(&std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default()).then(|| {
                format!(
                    "kernel fair server on CPU {cpu}: normal tasks waiting there may take up to 50 ms of every second (its default budget) from the router thread; keep other work off CPU {cpu} (budget not readable: {dir}: {why})"
                )
            })
        }
    }
}

/// Linux 6.12 brought the fair server.
fn kernel_has_fair_server(release: &str) -> bool {
    let mut it = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = it.next().and_then(|s| s.parse::<u32>().ok());
    let minor = it.next().and_then(|s| s.parse::<u32>().ok());
    matches!((major, minor), (Some(ma), Some(mi)) if (ma, mi) >= (6, 12))
}

/// Where a live run's router thread and tester go: separate cores when
/// the process has two or more, else none (with the reason).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    pub router_cpu: Option<usize>,
    pub tester_cpu: Option<usize>,
    /// Why nothing was pinned, if so.
    pub note: Option<String>,
}

/// Choose cores: the router on the first allowed CPU, the tester on the
/// last (on this project's 2-core machine: 0 and 1).
pub fn placement() -> Placement {
    let cpus = allowed_cpus();
    match (cpus.first(), cpus.last()) {
        (Some(&a), Some(&b)) if a != b => Placement {
            router_cpu: Some(a),
            tester_cpu: Some(b),
            note: None,
        },
        _ => Placement {
            router_cpu: None,
            tester_cpu: None,
            note: Some(format!(
                "not pinned: this process may use {} CPU(s), router and tester need two",
                cpus.len()
            )),
        },
    }
}

/// Pin the calling thread to `cpu` (if any) and raise it to SCHED_FIFO
/// `prio` (if any); returns one line per step, saying what was applied or
/// why not, and the old scheduling policy to restore.
pub fn apply(who: &str, cpu: Option<usize>, prio: Option<i32>) -> (Vec<String>, Option<(i32, i32)>) {
    let mut notes = Vec::new();
    if let Some(c) = cpu {
        notes.push(match pin_to(c) {
            Ok(()) => format!("{who}: pinned to CPU {c}"),
            Err(e) => format!("{who}: not pinned to CPU {c} ({e})"),
        });
    }
    let mut old = None;
    if let Some(p) = prio {
        notes.push(match set_fifo(p) {
            Ok(o) => {
                old = Some(o);
                format!("{who}: SCHED_FIFO priority {p}")
            }
            Err(e) => format!("{who}: SCHED_FIFO refused ({e}; needs CAP_SYS_NICE), ordinary scheduling"),
        });
    }
    (notes, old)
}

/// Injected CPU stalls (`lab run --stall LEN/EVERY`): every `every`
/// from the start of traffic, a SCHED_FIFO thread of the highest priority
/// takes the router thread's core for `len`, busy, as a kernel worker,
/// an interrupt storm or the fair server would. The router thread gets
/// nothing meanwhile, so a run shows what a stall of that size does to
/// the schedule (TDP's late limit and stamps, FIFO's queues) on demand
/// instead of by chance. The spec and its parser live in the scenario
/// crate, which `qosnet sim --stall` turns into the same stalls of the
/// simulated routers.
pub use qosnet_scenario::stall::StallSpec;

/// Priority of the stall thread: above the router's and the tester's.
pub const STALL_PRIO: i32 = 99;

/// Runs a [`StallSpec`] on a live machine.
pub trait StallRun {
    /// Stall `cpu` every `every` from `from` to `until` (or until `stop`),
    /// on the calling thread (which it pins and makes SCHED_FIFO 99).
    /// Returns the figures for the run's results: stalls made, their
    /// length, and the lateness of their starts.
    fn run(
        &self,
        cpu: usize,
        from: Instant,
        until: Instant,
        stop: &std::sync::atomic::AtomicBool,
    ) -> serde_json::Value;
}

impl StallRun for StallSpec {
    fn run(
        &self,
        cpu: usize,
        from: Instant,
        until: Instant,
        stop: &std::sync::atomic::AtomicBool,
    ) -> serde_json::Value {
        let mut notes = Vec::new();
        if let Err(e) = pin_to(cpu) {
            notes.push(format!("not pinned to CPU {cpu}: {e}"));
        }
        if let Err(e) = set_fifo(STALL_PRIO) {
            notes.push(format!(
                "not SCHED_FIFO: {e} (the router thread may run through the stalls)"
            ));
        }
        let (mut n, mut busy, mut late_max) = (0u64, Duration::ZERO, Duration::ZERO);
        let mut at = from + self.every;
        while at + self.len <= until && !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let start = crate::clock::wait_until(at);
            let end = start + self.len;
            while crate::clock::now() < end {
                std::hint::spin_loop();
            }
            n += 1;
            busy += self.len;
            late_max = late_max.max(start.saturating_since(at));
            at += self.every;
        }
        serde_json::json!({
            "cpu": cpu,
            "count": n,
            "len_ns": self.len.as_nanos(),
            "every_ns": self.every.as_nanos(),
            "busy_ns": busy.as_nanos(),
            "start_late_max_ns": late_max.as_nanos(),
            "notes": notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_uses_two_distinct_allowed_cpus_or_says_why_not() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let p = placement();
        match (p.router_cpu, p.tester_cpu) {
            (Some(a), Some(b)) => {
                assert_ne!(a, b);
                assert!(cpus.contains(&a) && cpus.contains(&b));
            }
            _ => assert!(p.note.as_deref().unwrap_or("").contains("two"), "{p:?}"),
        }
    }

    #[test]
    fn fair_server_kernels_are_told_apart_by_release() {
        for (r, has) in [
            ("6.18.44-fc-v782\n", true),
            ("6.12.0", true),
            ("6.11.9-arch1", false),
            ("5.15.0-91-generic", false),
            ("7.0-rc1", true),
            ("", false),
            ("garbage", false),
        ] {
            assert_eq!(kernel_has_fair_server(r), has, "{r:?}");
        }
        // This machine: a note exactly when the kernel has the server.
        let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let note = fair_server_note(0);
        if kernel_has_fair_server(&rel) {
            assert!(
                note.as_deref()
                    .is_some_and(|n| n.contains("fair server on CPU 0")),
                "{note:?}"
            );
        }
    }

    #[test]
    fn rt_throttle_is_lifted_and_restored_or_the_reason_given() {
        let read = || std::fs::read_to_string(RT_RUNTIME).map(|s| s.trim().to_string());
        match RtThrottleLifted::lift() {
            Ok(Some(g)) => {
                let old = g.old().to_string();
                assert_ne!(old, UNLIMITED);
                assert_eq!(read().unwrap(), UNLIMITED);
                drop(g);
                // No other guard of this process lives in the unit tests
                // (the live runs that lift are in tests/), so this was
                // the last one here; another process (a lab run beside
                // the tests) may still hold it lifted, and then restores.
                let now = read().unwrap();
                assert!(now == old || held_elsewhere("/run/qosnet"), "{now}, not {old}");
            }
            // Already unlimited (another process holds it lifted, or the
            // machine's own setting): nothing to restore.
            Ok(None) => assert_eq!(read().unwrap(), UNLIMITED),
            Err(e) => assert!(e.contains(RT_RUNTIME), "{e}"),
        }
    }

    /// A budget in memory that counts its writes.
    struct FakeBudget {
        value: std::sync::Mutex<String>,
        writes: std::sync::atomic::AtomicUsize,
        writable: bool,
    }

    impl RtBudget for FakeBudget {
        fn read(&self) -> Result<String, String> {
            Ok(self.value.lock().unwrap().clone())
        }
        fn write(&self, v: &str) -> Result<(), String> {
            if !self.writable {
                return Err("fake: Permission denied".into());
            }
            self.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            *self.value.lock().unwrap() = v.to_string();
            Ok(())
        }
    }

    fn fake(value: &str, writable: bool) -> (&'static FakeBudget, &'static Lifts) {
        let b: &'static FakeBudget = Box::leak(Box::new(FakeBudget {
            value: std::sync::Mutex::new(value.into()),
            writes: Default::default(),
            writable,
        }));
        (b, lifts(b, None))
    }

    fn lifts(b: &'static FakeBudget, dir: Option<&'static str>) -> &'static Lifts {
        Box::leak(Box::new(Lifts {
            budget: b,
            dir,
            state: std::sync::Mutex::new(LiftState {
                holders: 0,
                restore: String::new(),
                shared: None,
                guardian: None,
            }),
        }))
    }

    /// Whether some process holds a budget lifted through `dir`.
    fn held_elsewhere(dir: &str) -> bool {
        let Ok(f) = std::fs::File::open(format!("{dir}/rt-throttle.held")) else {
            return false;
        };
        flock(&f, FlockOperation::NonBlockingLockExclusive).is_err()
    }

    /// A fresh meeting directory for the cross-process tests. flock locks
    /// belong to open files, so two `Lifts` in one test process contend
    /// for them exactly as two processes do.
    fn meeting_dir(name: &str) -> &'static str {
        let d = tempfile::Builder::new().prefix(name).tempdir().unwrap().keep();
        Box::leak(d.to_string_lossy().into_owned().into_boxed_str())
    }

    fn saved(dir: &str) -> Option<String> {
        std::fs::read_to_string(format!("{dir}/rt-throttle.saved")).ok()
    }

    #[test]
    fn two_processes_restore_when_the_last_one_ends_in_either_order() {
        for first_ends_first in [true, false] {
            let dir = meeting_dir(&format!("order-{first_ends_first}"));
            let (b, _) = fake("950000", true);
            let (p1, p2) = (lifts(b, Some(dir)), lifts(b, Some(dir)));
            let v = || b.value.lock().unwrap().clone();
            let g1 = p1.lift().unwrap().unwrap();
            assert_eq!((v(), saved(dir).as_deref()), (UNLIMITED.into(), Some("950000")));
            // The second process finds it unlimited by the first: it joins
            // (with the budget to restore) instead of taking it for the
            // machine's setting.
            let g2 = p2.lift().unwrap().expect("joins the other process's lift");
            assert_eq!(g2.old(), "950000");
            let (a, z) = if first_ends_first { (g1, g2) } else { (g2, g1) };
            drop(a);
            assert_eq!(v(), UNLIMITED, "the other process still runs");
            assert!(held_elsewhere(dir));
            drop(z);
            assert_eq!(v(), "950000");
            assert_eq!(saved(dir), None, "nothing left to restore");
            assert!(!held_elsewhere(dir));
            // One write to lift, one to restore: joining writes nothing.
            assert_eq!(b.writes.load(std::sync::atomic::Ordering::Relaxed), 2);
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// A budget in a file, which a guardian process can write back to.
    struct FileBudget(&'static str);

    impl RtBudget for FileBudget {
        fn read(&self) -> Result<String, String> {
            std::fs::read_to_string(self.0)
                .map(|s| s.trim().to_string())
                .map_err(|e| e.to_string())
        }
        fn write(&self, v: &str) -> Result<(), String> {
            std::fs::write(self.0, v).map_err(|e| e.to_string())
        }
        fn file(&self) -> Option<&str> {
            Some(self.0)
        }
    }

    fn file_lifts(dir: &'static str, value: &str) -> (&'static FileBudget, [&'static Lifts; 2]) {
        let f: &'static str = Box::leak(format!("{dir}/budget").into_boxed_str());
        std::fs::write(f, value).unwrap();
        let b: &'static FileBudget = Box::leak(Box::new(FileBudget(f)));
        let l = || -> &'static Lifts {
            Box::leak(Box::new(Lifts {
                budget: b,
                dir: Some(dir),
                state: std::sync::Mutex::new(LiftState {
                    holders: 0,
                    restore: String::new(),
                    shared: None,
                    guardian: None,
                }),
            }))
        };
        (b, [l(), l()])
    }

    /// What the kernel does to a process killed with SIGKILL while it
    /// holds the budget lifted: its locks and its end of the guardian's
    /// pipe are closed, and no release runs. Returns once the guardian
    /// has done its work.
    fn die(l: &Lifts, g: RtThrottleLifted) {
        std::mem::forget(g);
        let mut st = l.state();
        st.holders = 0;
        drop(st.shared.take());
        let mut guardian = st.guardian.take().expect("a guardian was started");
        drop(guardian.child.stdin.take());
        let status = guardian.child.wait().unwrap();
        assert!(status.success(), "{status}");
    }

    /// Issue 26 finding 5: a lab killed with SIGKILL left RT throttling
    /// lifted for the whole machine until the next run. Its guardian now
    /// restores it at once, unless another process still holds it
    /// lifted, which then restores it as the last one out.
    #[test]
    fn a_killed_lifters_guardian_restores_the_budget() {
        let dir = meeting_dir("guardian");
        let (b, [l1, l2]) = file_lifts(dir, "950000");
        let g = l1.lift().unwrap().unwrap();
        assert_eq!(b.read().unwrap(), UNLIMITED);
        die(l1, g);
        assert_eq!(b.read().unwrap(), "950000", "the guardian restored it");
        assert_eq!(saved(dir), None);

        // Two holders; the first dies: the other still needs it lifted.
        let g1 = l1.lift().unwrap().unwrap();
        let g2 = l2.lift().unwrap().expect("joins");
        die(l1, g1);
        assert_eq!(b.read().unwrap(), UNLIMITED, "the other process still runs");
        drop(g2);
        assert_eq!(b.read().unwrap(), "950000");

        // A normal end: the guardian is dismissed and writes nothing.
        let g = l1.lift().unwrap().unwrap();
        drop(g);
        std::fs::write(b.0, "4242").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(b.read().unwrap(), "4242", "a dismissed guardian wrote");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_killed_lifters_budget_is_restored_by_the_next_run() {
        // A process killed with SIGKILL: its locks are gone, the budget
        // is still lifted and its saved value still there.
        let dir = meeting_dir("killed");
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(format!("{dir}/rt-throttle.saved"), "950000").unwrap();
        let (b, _) = fake(UNLIMITED, true);
        let l = lifts(b, Some(dir));
        let g = l.lift().unwrap().expect("takes over the dead process's lift");
        assert_eq!(g.old(), "950000");
        drop(g);
        assert_eq!(*b.value.lock().unwrap(), "950000");
        assert_eq!(saved(dir), None);
        // Restored by hand after the crash instead: the stale value is
        // replaced by the budget found, which is what comes back.
        std::fs::write(format!("{dir}/rt-throttle.saved"), "123").unwrap();
        *b.value.lock().unwrap() = "900000".into();
        drop(l.lift().unwrap().unwrap());
        assert_eq!(*b.value.lock().unwrap(), "900000");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn with_a_meeting_place_the_machines_own_setting_is_still_left_alone() {
        let dir = meeting_dir("machine");
        let (b, _) = fake(UNLIMITED, true);
        let l = lifts(b, Some(dir));
        assert!(l.lift().unwrap().is_none());
        assert_eq!(b.writes.load(std::sync::atomic::Ordering::Relaxed), 0);
        // A refused write saves nothing for others to join.
        let (b, _) = fake("950000", false);
        let l = lifts(b, Some(dir));
        assert!(l.lift().is_err());
        assert_eq!(saved(dir), None);
        assert!(!held_elsewhere(dir));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn overlapping_lifts_restore_only_when_the_last_guard_drops() {
        let (b, l) = fake("950000", true);
        let v = || b.value.lock().unwrap().clone();
        let first = l.lift().unwrap().unwrap();
        let second = l.lift().unwrap().unwrap();
        assert_eq!((first.old(), second.old()), ("950000", "950000"));
        assert_eq!(v(), UNLIMITED);
        // The first run ends while the second still runs: still lifted.
        drop(first);
        assert_eq!(v(), UNLIMITED);
        let third = l.lift().unwrap().unwrap();
        assert_eq!(third.old(), "950000");
        drop(second);
        assert_eq!(v(), UNLIMITED);
        drop(third);
        assert_eq!(v(), "950000");
        // One write to lift, one to restore: joining writes nothing.
        assert_eq!(b.writes.load(std::sync::atomic::Ordering::Relaxed), 2);
        // And the next run lifts afresh.
        let again = l.lift().unwrap().unwrap();
        assert_eq!(v(), UNLIMITED);
        drop(again);
        assert_eq!(v(), "950000");
    }

    #[test]
    fn a_budget_lifted_elsewhere_is_left_alone() {
        // Another process (or the machine) has it unlimited: this one
        // must not take the job of restoring it, nor restore "-1".
        let (b, l) = fake(UNLIMITED, true);
        assert!(l.lift().unwrap().is_none());
        assert!(l.lift().unwrap().is_none());
        assert_eq!(b.writes.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert_eq!(l.state().holders, 0);
    }

    #[test]
    fn a_refused_lift_is_an_error_and_counts_no_holder() {
        let (b, l) = fake("950000", false);
        let e = l.lift().unwrap_err();
        assert!(e.contains("Permission denied"), "{e}");
        assert_eq!(l.state().holders, 0);
        assert_eq!(*b.value.lock().unwrap(), "950000");
    }

    #[test]
    fn guards_on_parallel_threads_restore_once_at_the_end() {
        let (b, l) = fake("950000", true);
        let outer = l.lift().unwrap().unwrap();
        let hs: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        let g = l.lift().unwrap().unwrap();
                        assert_eq!(*b.value.lock().unwrap(), UNLIMITED);
                        drop(g);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*b.value.lock().unwrap(), UNLIMITED);
        drop(outer);
        assert_eq!(*b.value.lock().unwrap(), "950000");
        assert_eq!(b.writes.load(std::sync::atomic::Ordering::Relaxed), 2);
    }

    #[test]
    fn pinning_a_thread_moves_it_and_fifo_reports_its_outcome() {
        let cpus = allowed_cpus();
        let c = *cpus.last().unwrap();
        std::thread::spawn(move || {
            let (notes, old) = apply("t", Some(c), Some(1));
            assert!(notes[0].contains(&format!("pinned to CPU {c}")), "{notes:?}");
            assert_eq!(allowed_cpus(), vec![c]);
            // Root gets SCHED_FIFO, others a refusal with the reason.
            assert!(notes[1].contains("SCHED_FIFO"), "{notes:?}");
            if let Some((pol, prio)) = old {
                restore_sched(pol, prio);
            }
        })
        .join()
        .unwrap();
    }
}
