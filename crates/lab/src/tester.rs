//! A traffic tester in the live runtime: the scenario's flows sent at exact
//! times and their arrivals timestamped by the kernel, from one thread
//! that owns the hosts' interfaces — what the Agilent RouterTester did for
//! the ICC 2006 TDP testbed (Baldi et al., §IV).
//!
//! Why not the kernel generators of [`crate::traffic`]: with every
//! ring-link time frame reserved exactly full (the paper's full load), a
//! packet that leaves its host late misses its TF at the first router's
//! edge shaper, and with no spare room in later TFs it is lost or pushed
//! into the next cycle. Hosts' kernel UDP generators are late by tens of
//! microseconds to milliseconds (scheduling, the UDP stack, the socket's
//! qdisc). A tester is the paper's instrument instead:
//!
//! - **Sending.** Every flow's packets follow the scenario's schedule
//!   ([`Schedule`], the simulator's own) on CLOCK_REALTIME, the routers'
//!   common time reference, with the host's clock offset and drift applied
//!   as the simulator applies them. The thread sleeps until `spin` before
//!   the next packet and busy-polls the clock for the rest, then writes
//!   the frame — pre-built Ethernet/IPv4/UDP, probe stamped with the clock
//!   read just before the send — straight onto the host's interface
//!   (AF_PACKET, past the qdisc: [`qosnet_io::afpacket`]).
//! - **Receiving.** The same AF_PACKET sockets' receive rings carry the
//!   kernel's timestamp of each arriving frame (the ring header's
//!   `tp_sec`/`tp_nsec`, taken when the frame reached the socket, not
//!   when this thread read it), so a late read does not inflate a delay.
//! - **ARP.** The hosts' interfaces have no kernel address in tester mode
//!   (so their kernels neither answer nor send ICMP errors for the
//!   traffic); the tester answers ARP requests for each host's address and
//!   announces each host to its router before traffic starts, as a
//!   hardware tester's ports do.
//!
//! The tester reports per flow what a generator and a sink would
//! ([`GenReport`], [`FlowStats`]), how late each send was against its
//! schedule, and its own counters.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};

use qosnet_core::arp::{self, Arp, ARP_REPLY, ARP_REQUEST};
use qosnet_core::probe::Probe;
use qosnet_core::time::{Duration, Instant};
use qosnet_core::wire::{self, MacAddr, UdpSpec, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETH_HDR, IPV4_HDR, UDP_HDR};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;

use crate::traffic::{sample_size, FlowStats, GenReport, Pattern, RngDraw, Schedule, SizeDist, MIN_IP_SIZE};
use qosnet_io::clock::{self, Clock, Lateness, LatenessSummary};
use qosnet_io::device::{Device, DeviceStats};

/// One host interface the tester owns.
#[derive(Clone, Debug)]
pub struct PortSpec {
    /// The scenario host behind it (for reports).
    pub host: String,
    /// The host's address (answered in ARP, the source of its flows).
    pub ip: Ipv4Addr,
    /// The interface's MAC.
    pub mac: MacAddr,
    /// The first hop's address and MAC (the router port at the other end).
    pub gw_ip: Ipv4Addr,
    pub gw_mac: MacAddr,
}

/// One flow the tester sends.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    /// Flow id carried in the probe (the scenario's flow index).
    pub flow: u32,
    /// Port it leaves from (index into the tester's ports).
    pub port: usize,
    pub dst: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
    pub dscp: u8,
    pub ttl: u8,
    pub size: SizeDist,
    pub pattern: Pattern,
    pub pps: f64,
    /// The flow's first packet, as an offset from `t0` on the host's clock.
    pub start: Duration,
    /// No packet at or after this offset (host's clock).
    pub stop: Duration,
    /// The host's clock against the CTR (as the simulator's host clocks):
    /// local = true + offset + true · drift.
    pub clock_offset_ns: i64,
    pub clock_drift_ppm: f64,
    pub seed: u64,
}

/// How the tester runs.
#[derive(Clone, Debug)]
pub struct TesterConfig {
    /// Time zero of every flow's schedule (CLOCK_REALTIME, a UTC second in
    /// a live run, where the routers' TFs are aligned too).
    pub t0: Instant,
    /// Receive until this time (the end of the flows plus a drain).
    pub until: Instant,
    /// Packets sent inside this window (by send time) are counted as
    /// measured, and only they are recorded on arrival.
    pub window: (Instant, Instant),
    /// Busy-poll the clock for this long before each send; sleep before.
    pub spin: Duration,
    /// Pin the tester's thread to this CPU and run it SCHED_FIFO at this
    /// priority ([`qosnet_io::rt`]).
    pub cpu: Option<usize>,
    pub fifo: Option<i32>,
}

/// The tester's own counters.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TesterCounters {
    /// Frames received on the tester's ports.
    pub rx_frames: u64,
    /// Probes recorded (inside the window).
    pub rx_probes: u64,
    /// Probes sent outside the measurement window.
    pub rx_outside_window: u64,
    /// Probes of a flow that arrived on another port than its
    /// destination's (misrouted; still recorded).
    pub rx_wrong_port: u64,
    /// IPv4 frames without a probe or of an unknown flow.
    pub rx_not_probe: u64,
    /// Frames that are neither IPv4 nor ARP, or malformed.
    pub rx_other: u64,
    /// Probes whose sequence number was implausible (ignored).
    pub rx_bad_seq: u64,
    pub arp_requests_answered: u64,
    pub arp_announcements: u64,
    /// Sends the interface refused (the packet is lost: counted as sent
    /// by the schedule, as a tester port reports a transmit error).
    pub tx_errors: u64,
}

/// What the tester did.
#[derive(Clone, Debug)]
pub struct TesterReport {
    /// Per flow, in [`FlowSpec`] order: what was sent ...
    pub gens: Vec<GenReport>,
    /// ... and what arrived.
    pub flows: Vec<FlowStats>,
    pub counters: TesterCounters,
    /// How late every send was against its schedule, all flows.
    pub send_lateness: LatenessSummary,
    /// Placement and scheduling of the tester's thread.
    pub sched: Vec<String>,
    /// Device counters per port (host name, stats).
    pub ports: Vec<(String, DeviceStats)>,
}

struct Flow {
    spec: FlowSpec,
    sched: Schedule,
    rng: StdRng,
    /// Destination port index, if the destination is one of ours.
    dst_port: Option<usize>,
    frame: Vec<u8>,
    frame_ip_len: usize,
    seq: u64,
    gen: GenReport,
    stats: FlowStats,
}

/// A tester: ports (devices with their host's identity) and flows.
pub struct Tester<D: Device> {
    ports: Vec<(PortSpec, D)>,
    flows: Vec<Flow>,
    cfg: TesterConfig,
    counters: TesterCounters,
    late: Lateness,
}

impl<D: Device> Tester<D> {
    /// A tester on `ports` sending `flows`. Refuses flows it cannot send:
    /// a port that does not exist or packets too small for a probe.
    pub fn new(ports: Vec<(PortSpec, D)>, flows: Vec<FlowSpec>, cfg: TesterConfig) -> Result<Self, String> {
        let mut fl = Vec::new();
        for spec in flows {
            if spec.port >= ports.len() {
                return Err(format!("tester flow {}: no port {}", spec.flow, spec.port));
            }
            if let SizeDist::Fixed(s) = spec.size {
                if (s as usize) < MIN_IP_SIZE {
                    return Err(format!(
                        "tester flow {}: IP size {s} cannot carry a measurement probe (use at least {MIN_IP_SIZE})",
                        spec.flow
                    ));
                }
            }
            let dst_port = ports.iter().position(|(q, _)| q.ip == spec.dst);
            let sched = Schedule::new(spec.pattern, spec.pps, spec.start);
            let rng = StdRng::seed_from_u64(spec.seed);
            let gen = GenReport {
                flow: spec.flow,
                ..GenReport::default()
            };
            let stats = FlowStats::new(spec.flow);
            if spec.flow as usize != fl.len() {
                return Err(format!(
                    "tester flow {} at index {}: flow ids must be their indices (probes name flows by id)",
                    spec.flow,
                    fl.len()
                ));
            }
            fl.push(Flow {
                spec,
                sched,
                rng,
                dst_port,
                frame: Vec::new(),
                frame_ip_len: 0,
                seq: 0,
                gen,
                stats,
            });
        }
        Ok(Tester {
            ports,
            flows: fl,
            cfg,
            counters: TesterCounters::default(),
            late: Lateness::new(),
        })
    }

    /// Announce every port's host to its first hop: an ARP request for the
    /// gateway (RFC 826: the router learns the requester, since the request
    /// is for its address, and answers).
    pub fn announce(&mut self) {
        for (p, d) in &mut self.ports {
            let req = Arp {
                oper: ARP_REQUEST,
                sha: p.mac,
                spa: p.ip,
                tha: MacAddr::default(),
                tpa: p.gw_ip,
            };
            if d.send(&arp::build_arp(p.mac, MacAddr::BROADCAST, &req)).is_ok() {
                self.counters.arp_announcements += 1;
            }
            let _ = d.flush();
        }
    }

    /// When flow `i`'s current packet is due on the CTR: its local
    /// schedule time mapped through the host's clock (the inverse of
    /// local = true + offset + true · drift).
    fn due(&self, i: usize) -> Instant {
        let f = &self.flows[i];
        let local = f.sched.time_ns() as f64;
        let t = (local - f.spec.clock_offset_ns as f64) / (1.0 + f.spec.clock_drift_ppm * 1e-6);
        self.cfg.t0 + Duration(t.max(0.0).ceil() as u64)
    }

    /// Whether flow `i` has a current packet (before its stop).
    fn active(&self, i: usize) -> bool {
        let f = &self.flows[i];
        f.spec.pps > 0.0 && f.sched.time_ns() < f.spec.stop.as_nanos()
    }

    /// Send flow `i`'s current packet now and move to its next.
    fn send(&mut self, i: usize, at: Instant, clock: &Clock) {
        let f = &mut self.flows[i];
        let size = sample_size(&f.spec.size, &mut f.rng).max(MIN_IP_SIZE);
        if f.frame.is_empty() || f.frame_ip_len != size {
            let (p, _) = &self.ports[f.spec.port];
            let spec = UdpSpec {
                src_mac: p.mac,
                dst_mac: p.gw_mac,
                src: p.ip,
                dst: f.spec.dst,
                sport: f.spec.sport,
                dport: f.spec.dport,
                tos: (f.spec.dscp & 0x3f) << 2,
                ttl: f.spec.ttl,
                ident: 0,
            };
            f.frame = wire::build_udp(&spec, size, &[]);
            f.frame_ip_len = size;
        }
        let payload = &mut f.frame[ETH_HDR + IPV4_HDR + UDP_HDR..ETH_HDR + size];
        let tx = clock.now();
        let probe = Probe {
            flow: f.spec.flow,
            seq: f.seq,
            tx_ns: tx.as_nanos(),
        };
        // Sizes were checked against MIN_IP_SIZE: the probe fits.
        let _ = probe.write_into(payload);
        self.late.record(at, tx);
        let dev = &mut self.ports[f.spec.port].1;
        match dev.send(&f.frame) {
            Ok(()) => {
                f.gen.sent += 1;
                f.gen.sent_ip_bytes += size as u64;
                let (a, b) = self.cfg.window;
                if tx >= a && tx < b {
                    f.gen.sent_measured += 1;
                }
            }
            Err(_) => {
                f.gen.send_errors += 1;
                self.counters.tx_errors += 1;
            }
        }
        let _ = dev.flush();
        if f.seq == 0 {
            f.gen.start_ns = tx.as_nanos();
        }
        f.gen.end_ns = tx.as_nanos();
        f.seq += 1;
        f.sched.advance(&mut RngDraw(&mut f.rng));
    }

    /// Take every waiting frame of every port: record probes, answer ARP.
    fn drain(&mut self) {
        let mut replies: Vec<(usize, Vec<u8>)> = Vec::new();
        for pi in 0..self.ports.len() {
            let (spec, dev) = &mut self.ports[pi];
            let (flows, c) = (&mut self.flows, &mut self.counters);
            let window = self.cfg.window;
            let _ = dev.recv_batch(usize::MAX, |frame, rx| {
                c.rx_frames += 1;
                match wire::ethertype(frame) {
                    Some(ETHERTYPE_ARP) => {
                        if let Ok(a) = arp::parse_arp(frame) {
                            if a.oper == ARP_REQUEST && a.tpa == spec.ip && a.spa != spec.ip {
                                let rep = Arp {
                                    oper: ARP_REPLY,
                                    sha: spec.mac,
                                    spa: spec.ip,
                                    tha: a.sha,
                                    tpa: a.spa,
                                };
                                replies.push((pi, arp::build_arp(spec.mac, a.sha, &rep)));
                            }
                        } else {
                            c.rx_other += 1;
                        }
                    }
                    Some(ETHERTYPE_IPV4) => {
                        let Ok(info) = wire::parse_ipv4(frame) else {
                            c.rx_other += 1;
                            return;
                        };
                        let payload = wire::udp_payload(frame, &info);
                        let Some(d) = Probe::decode_any(payload) else {
                            c.rx_not_probe += 1;
                            return;
                        };
                        // Flow ids are indices (checked in `new`).
                        let Some(f) = flows.get_mut(d.flow() as usize) else {
                            c.rx_not_probe += 1;
                            return;
                        };
                        let p = d.resolve(f.stats.max_seq(), rx.as_nanos());
                        if p.tx_ns < window.0.as_nanos() || p.tx_ns >= window.1.as_nanos() {
                            c.rx_outside_window += 1;
                            return;
                        }
                        if f.dst_port.is_some_and(|dp| dp != pi) {
                            c.rx_wrong_port += 1;
                        }
                        if f.stats.record(&p, rx, info.total_len, Some(info.tos)) {
                            c.rx_probes += 1;
                        } else {
                            c.rx_bad_seq += 1;
                        }
                    }
                    _ => c.rx_other += 1,
                }
            });
        }
        for (pi, f) in replies {
            let d = &mut self.ports[pi].1;
            if d.send(&f).is_ok() {
                self.counters.arp_requests_answered += 1;
            }
            let _ = d.flush();
        }
    }

    /// Send every flow on schedule and record arrivals until
    /// `cfg.until` or `stop`. Places and schedules the calling thread as
    /// configured first (and restores its policy after).
    pub fn run(mut self, stop: &AtomicBool) -> TesterReport {
        let (sched_notes, old) = qosnet_io::rt::apply("tester", self.cfg.cpu, self.cfg.fifo);
        let old_slack = clock::set_timer_slack(Duration(1));
        let clock = Clock::realtime().with_spin(self.cfg.spin);
        let mut heap: BinaryHeap<Reverse<(Instant, usize)>> = (0..self.flows.len())
            .filter(|&i| self.active(i))
            .map(|i| Reverse((self.due(i), i)))
            .collect();
        let max_sleep = Duration::from_millis(5);
        let drain = self.cfg.until.saturating_since(self.cfg.window.1);
        let mut last_send = self.cfg.t0;
        loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let now = clock.now();
            // Everything due goes now, earliest first (also after a stall
            // past `until`: every scheduled packet is sent, late if need
            // be, and counted).
            let mut sent = false;
            while let Some(&Reverse((at, i))) = heap.peek() {
                if at > now {
                    break;
                }
                heap.pop();
                // The last microseconds before a send are spun (see
                // below), so `at` is reached by reading the clock.
                while clock.now() < at {
                    std::hint::spin_loop();
                }
                self.send(i, at, &clock);
                last_send = clock.now();
                sent = true;
                if self.active(i) {
                    heap.push(Reverse((self.due(i), i)));
                }
            }
            self.drain();
            if clock.now() >= self.cfg.until {
                break;
            }
            if sent {
                continue;
            }
            let next = heap.peek().map_or(self.cfg.until, |r| r.0 .0).min(self.cfg.until);
            let now = clock.now();
            let left = next.saturating_since(now);
            if left > self.cfg.spin {
                clock.sleep_until(now + (left - self.cfg.spin).min(max_sleep));
            } else {
                std::hint::spin_loop();
            }
        }
        // Packets sent late (a stall near the end) get their drain time too.
        let end = last_send + drain;
        while !stop.load(Ordering::Relaxed) && clock.now() < end {
            self.drain();
            clock.sleep_until(clock.now() + Duration::from_millis(1));
        }
        self.drain();
        clock::set_timer_slack(old_slack);
        if let Some((p, q)) = old {
            qosnet_io::rt::restore_sched(p, q);
        }
        let send_lateness = self.late.summary();
        let ports = self
            .ports
            .iter_mut()
            .map(|(p, d)| (p.host.clone(), d.stats()))
            .collect();
        let mut gens = Vec::new();
        let mut flows = Vec::new();
        for f in self.flows {
            let mut g = f.gen;
            g.lateness = send_lateness;
            gens.push(g);
            flows.push(f.stats);
        }
        TesterReport {
            gens,
            flows,
            counters: self.counters,
            send_lateness,
            sched: sched_notes,
            ports,
        }
    }
}

/// Delay spreads of one flow: the TDP paper's jitter (max − min) and what
/// survives the rarest outliers (p0.1 to p99.9), and the share of packets
/// inside the best window of a given width (e.g. 2 TFs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    pub packets: u64,
    pub max_min_ns: u64,
    pub p001_p999_ns: u64,
    /// Width of the window of [`Spread::in_window`].
    pub window_ns: u64,
    /// Largest fraction of packets whose delays fit in one window of
    /// `window_ns` (bucket resolution: 3 significant digits).
    pub in_window: f64,
}

/// The spreads of a delay distribution given as histogram buckets
/// (highest value of each bucket, count; ascending, as
/// [`DelayHist::buckets`](qosnet_core::stats::DelayHist::buckets) gives
/// them) with its exact `min` and `max`, for a window of `window` (e.g. 2
/// TFs). Quantiles are read as `DelayHist::quantile` reads them.
pub fn spread(buckets: &[(u64, u64)], min: u64, max: u64, window: Duration) -> Spread {
    let n: u64 = buckets.iter().map(|b| b.1).sum();
    if n == 0 {
        return Spread {
            window_ns: window.as_nanos(),
            ..Spread::default()
        };
    }
    let quantile = |q: f64| {
        let rank = ((q * n as f64).ceil() as u64).max(1);
        let mut acc = 0;
        for &(v, c) in buckets {
            acc += c;
            if acc >= rank {
                return v.clamp(min, max);
            }
        }
        max
    };
    // Two pointers over ascending buckets: the most packets whose bucket
    // values lie within `window` of each other.
    let (mut best, mut acc, mut lo) = (0u64, 0u64, 0usize);
    for hi in 0..buckets.len() {
        acc += buckets[hi].1;
        while buckets[hi].0 - buckets[lo].0 > window.as_nanos() {
            acc -= buckets[lo].1;
            lo += 1;
        }
        best = best.max(acc);
    }
    Spread {
        packets: n,
        max_min_ns: max.saturating_sub(min),
        p001_p999_ns: quantile(0.999).saturating_sub(quantile(0.001)),
        window_ns: window.as_nanos(),
        in_window: best as f64 / n as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A port whose frames come back to it after `delay` (a wire to a
    /// reflector), timestamped on arrival as the kernel would.
    struct Loop {
        q: VecDeque<(Instant, Vec<u8>)>,
        delay: Duration,
        sent: Vec<Vec<u8>>,
        stats: DeviceStats,
    }

    impl Device for Loop {
        fn recv_batch(&mut self, max: usize, mut f: impl FnMut(&[u8], Instant)) -> std::io::Result<usize> {
            let now = clock::now();
            let mut n = 0;
            while n < max && self.q.front().is_some_and(|(t, _)| *t <= now) {
                let (t, fr) = self.q.pop_front().expect("checked");
                f(&fr, t);
                n += 1;
            }
            Ok(n)
        }
        fn send(&mut self, frame: &[u8]) -> std::io::Result<()> {
            self.stats.tx_frames += 1;
            self.sent.push(frame.to_vec());
            // IP frames loop back; ARP is only recorded.
            if wire::ethertype(frame) == Some(ETHERTYPE_IPV4) {
                self.q.push_back((clock::now() + self.delay, frame.to_vec()));
            }
            Ok(())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
        fn fd(&self) -> std::os::fd::RawFd {
            -1
        }
        fn stats(&mut self) -> DeviceStats {
            self.stats
        }
    }

    fn port() -> PortSpec {
        PortSpec {
            host: "t1".into(),
            ip: Ipv4Addr::new(10, 0, 0, 1),
            mac: MacAddr([2, 0, 0, 0, 0, 1]),
            gw_ip: Ipv4Addr::new(10, 0, 0, 254),
            gw_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        }
    }

    fn flow(flow: u32, start_us: u64, drift: f64) -> FlowSpec {
        FlowSpec {
            flow,
            port: 0,
            dst: Ipv4Addr::new(10, 0, 0, 1),
            sport: 1000,
            dport: 2000,
            dscp: 3,
            ttl: 64,
            size: SizeDist::Fixed(200),
            pattern: Pattern::Cbr,
            pps: 1000.0,
            start: Duration::from_micros(start_us),
            stop: Duration::from_millis(300),
            clock_offset_ns: 0,
            clock_drift_ppm: drift,
            seed: 1,
        }
    }

    #[test]
    fn sends_on_schedule_and_measures_every_packet_that_returns() {
        let dev = Loop {
            q: VecDeque::new(),
            delay: Duration::from_micros(100),
            sent: Vec::new(),
            stats: DeviceStats::default(),
        };
        let t0 = clock::now() + Duration::from_millis(20);
        // The window ends 100 ms after the last sends are due (299 and
        // 299.2 ms): a send that a busy machine makes late still counts.
        let cfg = TesterConfig {
            t0,
            until: t0 + Duration::from_millis(420),
            window: (t0, t0 + Duration::from_millis(400)),
            spin: Duration::from_micros(100),
            cpu: None,
            fifo: None,
        };
        let mut t = Tester::new(
            vec![(port(), dev)],
            vec![flow(0, 0, 0.0), flow(1, 500, 1000.0)],
            cfg,
        )
        .unwrap();
        t.announce();
        let r = t.run(&AtomicBool::new(false));
        // 300 ms at 1000 pps; the drifting clock runs 0.1 % fast, so its
        // flow's 300 local milliseconds end 0.3 ms early: still 300.
        for (i, g) in r.gens.iter().enumerate() {
            assert_eq!(g.sent, 300, "flow {i}: {g:?}");
            assert_eq!(g.sent_measured, 300, "flow {i}");
            let s = r.flows[i].report(Some(g.sent));
            assert_eq!((s.received, s.lost, s.reordered), (300, 0, 0), "flow {i}: {s:?}");
            // The loop's 100 µs is the floor of every delay.
            assert!(s.delay_ns.min >= 100_000, "{s:?}");
            assert_eq!(s.tos.get(&(3 << 2)), Some(&300));
        }
        assert_eq!(r.counters.rx_probes, 600);
        assert_eq!(r.counters.arp_announcements, 1);
        assert_eq!(r.send_lateness.count, 600);
        // The first flow's sends sit on a 1 ms grid from t0; the drifting
        // one's 300th is 299 ms / 1.001 + 0.5 ms / 1.001 after t0.
        assert!(r.gens[0].start_ns >= t0.as_nanos());
        let last = r.gens[1].end_ns - t0.as_nanos();
        let want = (299.5e6 / 1.001) as u64;
        let late = r.send_lateness.max_ns;
        assert!(
            last >= want && last < want + 5_000_000 + late,
            "{last} vs {want} (late {late})"
        );
    }

    #[test]
    fn answers_arp_for_its_host_only() {
        let mut dev = Loop {
            q: VecDeque::new(),
            delay: Duration::ZERO,
            sent: Vec::new(),
            stats: DeviceStats::default(),
        };
        let p = port();
        let asker = MacAddr([2, 0, 0, 0, 0, 9]);
        for tpa in [p.ip, Ipv4Addr::new(10, 0, 0, 7)] {
            let req = Arp {
                oper: ARP_REQUEST,
                sha: asker,
                spa: p.gw_ip,
                tha: MacAddr::default(),
                tpa,
            };
            dev.q
                .push_back((clock::now(), arp::build_arp(asker, MacAddr::BROADCAST, &req)));
        }
        let now = clock::now();
        let cfg = TesterConfig {
            t0: now,
            until: now + Duration::from_millis(5),
            window: (now, now),
            spin: Duration::from_micros(50),
            cpu: None,
            fifo: None,
        };
        let mut t = Tester::new(vec![(p.clone(), dev)], Vec::new(), cfg).unwrap();
        t.drain();
        assert_eq!(t.counters.arp_requests_answered, 1);
        let sent = &t.ports[0].1.sent;
        let a = arp::parse_arp(&sent[0]).unwrap();
        assert_eq!(
            (a.oper, a.sha, a.spa, a.tha, a.tpa),
            (ARP_REPLY, p.mac, p.ip, asker, p.gw_ip)
        );
        // Too small for a probe: refused up front.
        let mut f = flow(0, 0, 0.0);
        f.size = SizeDist::Fixed(30);
        let e = Tester::<Loop>::new(Vec::new(), vec![f], t.cfg.clone());
        assert!(e.is_err());
    }

    #[test]
    fn spreads_of_a_histogram() {
        let mut h = qosnet_core::stats::DelayHist::new();
        // 998 packets between 1.0 and 1.2 ms, one at 0.1 ms, one at 5 ms.
        for i in 0..998u64 {
            h.record(1_000_000 + (i % 200) * 1_000);
        }
        h.record(100_000);
        h.record(5_000_000);
        let s = spread(&h.buckets(), h.min(), h.max(), Duration::from_micros(500));
        assert_eq!(s.packets, 1000);
        assert_eq!(s.max_min_ns, 4_900_000);
        // p0.1 is the 1st value (0.1 ms), p99.9 the 999th (≈1.2 ms).
        assert!((1_090_000..=1_110_000).contains(&s.p001_p999_ns), "{s:?}");
        assert!((s.in_window - 0.998).abs() < 1e-9, "{s:?}");
        assert_eq!(spread(&[], 0, 0, Duration(1)).packets, 0);
    }
}
