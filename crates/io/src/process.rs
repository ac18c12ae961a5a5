//! Signals to processes this one started or found in its own labs
//! (rustix's `kill`), and children that die with their parent.

use std::process::Command;

pub use rustix::process::Signal;

/// Send `sig` to process `pid`. A pid that is not a process (0, or one
/// that cannot be a pid) is an error, never a signal to a group.
pub fn kill(pid: u32, sig: Signal) -> std::io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("no process {pid}")))?;
    Ok(rustix::process::kill_process(pid, sig)?)
}

/// Whether process `pid` exists (signal 0: only the check).
pub fn alive(pid: u32) -> bool {
    match i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
        Some(p) => rustix::process::test_kill_process(p).is_ok(),
        None => false,
    }
}

/// Make the child that `cmd` spawns receive `sig` when this process dies,
/// even by SIGKILL (`PR_SET_PDEATHSIG`), so it cannot outlive its parent.
pub fn die_with_parent(cmd: &mut Command, sig: Signal) {
    crate::sys::die_with_parent(cmd, sig);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_reach_a_child_and_bad_pids_are_refused() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(alive(child.id()));
        kill(child.id(), Signal::TERM).unwrap();
        let st = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(Signal::TERM.as_raw()));
        assert!(kill(0, Signal::TERM).is_err());
        assert!(kill(u32::MAX, Signal::TERM).is_err());
        assert!(!alive(0));
    }
}
