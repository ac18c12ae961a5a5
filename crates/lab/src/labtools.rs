//! Helpers for measurements in a running lab, shared by the experiments
//! (`qosnet-experiments`) and the tests: external tools (on the PATH?
//! reaped when dropped? iputils ping's summary), a lab host's address, a
//! datagram each way so neighbours are resolved before timing starts, the
//! routers' counters at the end of a run, the calling thread's nice value,
//! and the root check with the reason root is needed.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Child, Stdio};

use crate::labrun::LiveLab;
use qosnet_io::netdev::NetDevice;
use qosnet_io::netns;
use qosnet_live::driver::Driver;

/// Is `bin` on the PATH?
pub fn have(bin: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `Err` with what needs root and why, unless this process is root.
pub fn require_root(what: &str) -> Result<(), String> {
    if netns::is_root() {
        return Ok(());
    }
    Err(format!(
        "{what} needs root: it creates network namespaces and veth pairs (CAP_SYS_ADMIN, \
         CAP_NET_ADMIN) and opens AF_PACKET sockets (CAP_NET_RAW); run it with sudo"
    ))
}

/// A child process killed and reaped when dropped (servers, stragglers
/// left by an error), so no tool outlives its lab.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first address of a lab node's ports.
pub fn host_ip(live: &LiveLab, node: &str) -> Result<Ipv4Addr, String> {
    live.lab()
        .ports(node)
        .iter()
        .find_map(|p| p.addr.map(|a| a.addr))
        .ok_or_else(|| format!("node {node} has no address in the lab"))
}

/// One UDP datagram each way between two hosts (to the discard port), so
/// both kernels and the routers have resolved their neighbours before a
/// measurement starts.
pub fn warm_up(live: &LiveLab, a: &str, b: &str) -> Result<(), String> {
    let (ia, ib) = (host_ip(live, a)?, host_ip(live, b)?);
    for (node, from, to) in [(a, ia, ib), (b, ib, ia)] {
        let ns = live.lab().netns(node).ok_or("no namespace")?;
        netns::run_in(&ns, || {
            let s = std::net::UdpSocket::bind(SocketAddrV4::new(from, 0))?;
            s.send_to(b"qosnet warm-up", SocketAddrV4::new(to, 9)).map(|_| ())
        })
        .and_then(|r| r)
        .map_err(|e| format!("warm-up datagram from {node}: {e}"))?;
    }
    std::thread::sleep(std::time::Duration::from_millis(150));
    Ok(())
}

/// Every router's forwarding, drop and extra (conditioner, TDP) counters,
/// by router name.
pub fn router_counters(d: &Driver<NetDevice>) -> BTreeMap<String, BTreeMap<String, u64>> {
    d.hosts
        .iter()
        .filter_map(|h| h.router())
        .map(|r| {
            let c = &r.counters;
            let mut m: BTreeMap<String, u64> = r.extra_counters().into_iter().collect();
            m.insert("forwarded".into(), c.forwarded);
            for (k, v) in c.drops() {
                m.insert(format!("drop_{k}"), v);
            }
            (r.name.clone(), m)
        })
        .collect()
}

/// Set the calling thread's nice value (negative needs CAP_SYS_NICE);
/// the old one, or `None` if refused.
pub fn set_nice(nice: i32) -> Option<i32> {
    qosnet_io::rt::set_nice(nice)
}

/// iputils ping's summary (`-q`): transmitted, received, and rtt
/// min/avg/max/mdev in ms (NaN when no reply came).
pub fn parse_ping(out: &str) -> (u64, u64, [f64; 4]) {
    let mut sent = 0;
    let mut rx = 0;
    let mut rtt = [f64::NAN; 4];
    for l in out.lines() {
        if l.contains("packets transmitted") {
            let nums: Vec<u64> = l
                .split(',')
                .filter_map(|p| p.split_whitespace().next().and_then(|n| n.parse().ok()))
                .collect();
            sent = nums.first().copied().unwrap_or(0);
            rx = nums.get(1).copied().unwrap_or(0);
        } else if let Some(v) = l
            .split(" = ")
            .nth(1)
            .filter(|_| l.starts_with("rtt") || l.starts_with("round-trip"))
        {
            for (k, x) in v
                .split_whitespace()
                .next()
                .unwrap_or("")
                .split('/')
                .enumerate()
                .take(4)
            {
                rtt[k] = x.parse().unwrap_or(f64::NAN);
            }
        }
    }
    (sent, rx, rtt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_summary_is_parsed() {
        let out = "PING 10.0.8.2 (10.0.8.2) 36(64) bytes of data.\n\n--- 10.0.8.2 ping statistics ---\n\
                   40 packets transmitted, 39 received, 2.5% packet loss, time 1951ms\n\
                   rtt min/avg/max/mdev = 0.094/0.129/0.228/0.029 ms\n";
        let (s, r, rtt) = parse_ping(out);
        assert_eq!((s, r), (40, 39));
        assert_eq!(rtt, [0.094, 0.129, 0.228, 0.029]);
        let (s, r, rtt) = parse_ping("3 packets transmitted, 0 received, 100% packet loss, time 2ms\n");
        assert_eq!((s, r), (3, 0));
        assert!(rtt[1].is_nan());
    }
}
