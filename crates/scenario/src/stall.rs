//! `--stall LEN/EVERY`: a CPU stall of the routers every EVERY for LEN,
//! from the start of traffic to the end of the run, as one flag for both
//! sides of a sim/live A/B. Live (`qosnet lab run --stall`), a SCHED_FIFO
//! 99 busy loop takes the router thread's core, which runs every router
//! of the lab (`qosnet_io::rt`); in the simulator (`qosnet sim --stall`)
//! the same schedule becomes a `[[fault]] kind = "stall"` of those routers
//! together (docs/scenario-format.md). ICC 2006 §IV's time frames are
//! 250 µs, so a stall of a few hundred µs already costs TDP frames; this
//! measures by how much.

use qosnet_core::Duration;

use crate::model::{NodeStall, Scenario};

/// A stall schedule: `len` of every `every`, the first `every` after the
/// start of traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallSpec {
    pub len: Duration,
    pub every: Duration,
}

impl StallSpec {
    /// Parse `LEN/EVERY`, e.g. `300us/200ms`: each stall at most 1 s and
    /// shorter than its period, so the routers run in between. Errors name
    /// the flag and say what would be accepted.
    pub fn parse(s: &str) -> Result<StallSpec, String> {
        let (l, e) = s
            .split_once('/')
            .ok_or_else(|| format!("--stall {s}: expected LEN/EVERY, e.g. 300us/200ms"))?;
        let dur = |x: &str, what: &str| {
            crate::units::parse_duration(x.trim())
                .map_err(|e| format!("--stall {s}: {what}: {e} (LEN/EVERY, e.g. 300us/200ms)"))
        };
        let (len, every) = (dur(l, "stall length")?, dur(e, "period")?);
        if len == Duration::ZERO || len > Duration::from_secs(1) {
            return Err(format!(
                "--stall {s}: a stall lasts more than 0 and at most 1s, e.g. 300us/200ms"
            ));
        }
        if every <= len {
            return Err(format!(
                "--stall {s}: the period must be longer than the stall, or the routers never run (e.g. {l}/{})",
                Duration(len.as_nanos().saturating_mul(100))
            ));
        }
        Ok(StallSpec { len, every })
    }

    /// The stalls of a run of `duration` from the start of traffic: at
    /// `every`, `2 * every`, ... while a stall ends by the end of the run
    /// (the live stall thread's schedule).
    pub fn windows(&self, duration: Duration) -> u64 {
        let (len, every, d) = (self.len.as_nanos(), self.every.as_nanos(), duration.as_nanos());
        if every == 0 || every + len > d {
            return 0;
        }
        (d - len) / every
    }

    /// How many stalls a run of `duration` has; an error (for the caller
    /// to prefix with the flag as given) when none fits (the flag would do nothing). One check for `qosnet
    /// sim --stall`, `lab run --stall` and `reproduce --stall`.
    pub fn fits(&self, duration: Duration) -> Result<u64, String> {
        match self.windows(duration) {
            0 => Err(format!(
                "no stall fits in the {duration} run (the first starts at {} and lasts {}); give an EVERY shorter than the run, or a longer --duration",
                self.every, self.len
            )),
            n => Ok(n),
        }
    }

    /// Stall every router of `sc` (every node the builder builds but hosts
    /// and segments: the nodes a single-process lab runs on its router
    /// thread) together, on this schedule, as one more stall fault.
    /// Returns the stalled nodes' indices and the number of stalls; a
    /// schedule with no stall inside the run ([`StallSpec::fits`]) and a
    /// scenario without routers are errors (the flag would do nothing).
    pub fn apply(&self, sc: &mut Scenario) -> Result<(Vec<usize>, u64), String> {
        let nodes: Vec<usize> = (0..sc.nodes.len())
            .filter(|&i| !sc.nodes[i].is_host() && !sc.nodes[i].is_medium())
            .collect();
        if nodes.is_empty() {
            return Err(format!(
                "--stall {}/{}: scenario {} has no router to stall (only hosts and segments); stall a host with [[fault]] kind = \"stall\"",
                self.len, self.every, sc.name
            ));
        }
        let n = self
            .fits(sc.duration)
            .map_err(|e| format!("--stall {}/{}: {e}", self.len, self.every))?;
        // The same bound on the simulator's schedule as for stall faults
        // written in the scenario.
        let before: u64 = sc
            .stalls
            .iter()
            .map(|s| s.windows().len() as u64 * s.nodes.len() as u64)
            .sum();
        let total = before.saturating_add(n.saturating_mul(nodes.len() as u64));
        let max = crate::load::faults::MAX_STALLS;
        if total > max {
            return Err(format!(
                "--stall {}/{}: {total} stalls in all ({n} of {} routers{}), more than {max}; stall less often (a longer EVERY) or run shorter",
                self.len,
                self.every,
                nodes.len(),
                if before > 0 { " and the scenario's own" } else { "" }
            ));
        }
        // The last stall starts at n * every; `until` bounds the starts.
        let until = Duration(n * self.every.as_nanos() + 1);
        sc.stalls.push(NodeStall {
            nodes: nodes.clone(),
            at: self.every,
            len: self.len,
            every: Some(self.every),
            until,
        });
        Ok((nodes, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_specs_parse_or_say_why_not() {
        let s = StallSpec::parse("300us/200ms").unwrap();
        assert_eq!(
            (s.len, s.every),
            (Duration::from_micros(300), Duration::from_millis(200))
        );
        for (bad, why) in [
            ("300us", "expected LEN/EVERY"),
            ("0/1s", "more than 0"),
            ("0s/1s", "more than 0"),
            ("2s/10s", "at most 1s"),
            ("2s/1s", "at most 1s"),
            ("5ms/5ms", "longer than the stall"),
            ("5ms/1x", "period"),
            ("5/1s", "stall length"),
        ] {
            let e = StallSpec::parse(bad).unwrap_err();
            assert!(e.contains(why) && e.starts_with("--stall"), "{bad}: {e}");
            assert!(e.contains("e.g."), "{bad}: no hint: {e}");
        }
    }

    #[test]
    fn windows_follow_the_live_schedule() {
        let s = StallSpec::parse("1ms/500ms").unwrap();
        // Starts at 0.5, 1.0, 1.5 s; one at 2 s would end after the run.
        assert_eq!(s.windows(Duration::from_secs(2)), 3);
        assert_eq!(s.windows(Duration::from_millis(2001)), 4);
        assert_eq!(s.windows(Duration::from_millis(500)), 0);
        assert_eq!(s.windows(Duration::from_millis(501)), 1);
    }

    #[test]
    fn apply_stalls_the_routers_together_not_the_hosts() {
        let mut sc = crate::load_str(
            "tdp-482.toml",
            include_str!("../../../scenarios/tdp-icc2006/tdp-482.toml"),
            &[],
        )
        .unwrap();
        sc.duration = Duration::from_secs(2);
        let before = sc.stalls.len();
        let (nodes, n) = StallSpec::parse("1ms/500ms").unwrap().apply(&mut sc).unwrap();
        assert_eq!(n, 3);
        assert!(!nodes.is_empty());
        for i in 0..sc.nodes.len() {
            let node = &sc.nodes[i];
            // The routers (this scenario has no switches), never a host.
            assert_eq!(nodes.contains(&i), node.is_router(), "{}", node.name);
        }
        let st = sc.stalls.last().unwrap();
        assert_eq!(sc.stalls.len(), before + 1);
        let w: Vec<_> = st.windows().iter().map(|w| w.0.as_nanos()).collect();
        assert_eq!(w, [500_000_000, 1_000_000_000, 1_500_000_000]);
        // Hosts only: nothing the flag could stall, said so.
        let mut hosts = sc.clone();
        hosts.nodes.retain(|n| n.is_host());
        let e = StallSpec::parse("1ms/500ms")
            .unwrap()
            .apply(&mut hosts)
            .unwrap_err();
        assert!(
            e.starts_with("--stall 1ms/500ms") && e.contains("no router"),
            "{e}"
        );
        // Too many: refused with the flag named.
        let e = StallSpec::parse("1us/2us").unwrap().apply(&mut sc).unwrap_err();
        assert!(e.starts_with("--stall 1us/2us") && e.contains("more than"), "{e}");
    }
}
