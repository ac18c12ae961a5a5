//! The device tests that need root: AF_PACKET and AF_XDP ports over a
//! veth pair between two namespaces, and the AF_XDP → AF_PACKET fallback.
//! They test `qosnet-io`'s devices; they live here, with the labs, because
//! they need a lab (and root) to run.

mod afpacket {
    use qosnet_core::time::Duration;
    use qosnet_core::time::Instant;
    use qosnet_io::afpacket::*;
    use qosnet_io::device::wait_readable;
    use qosnet_io::device::Device;
    use qosnet_io::netns;
    use qosnet_lab::testkit::{drain, require_root, seq_of, test_frame, test_prefix, two_hosts};
    use std::sync::atomic::Ordering;

    fn one_way(mode: TxMode) {
        let prefix = test_prefix();
        let lab = two_hosts(&prefix, ("", ""));
        let pa = lab.port("a", "b").unwrap().clone();
        let pb = lab.port("b", "a").unwrap().clone();
        let cfg = AfPacketConfig {
            tx_mode: mode,
            ..Default::default()
        };
        let mut tx = AfPacket::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
        let mut rx = AfPacket::open_in(&pb.netns, &pb.ifname, &cfg).unwrap();
        assert_eq!(tx.mac(), pa.mac);
        assert_eq!(rx.mtu(), 1500);
        const N: usize = 5000;
        const CHUNK: usize = 250;
        let before = qosnet_io::clock::realtime_now();
        let mut got = Vec::new();
        for c in 0..N / CHUNK {
            for i in 0..CHUNK {
                let seq = (c * CHUNK + i) as u32;
                let len = 60 + (seq as usize * 7) % 1455; // 60..=1514
                tx.send(&test_frame(pa.mac, pb.mac, seq, len)).unwrap();
            }
            tx.flush().unwrap();
            drain(&mut rx, (c + 1) * CHUNK, &mut got);
        }
        assert_eq!(got.len(), N, "received {} of {N} frames", got.len());
        for (i, (seq, f)) in got.iter().enumerate() {
            assert_eq!(*seq as usize, i, "out of order");
            let len = 60 + (i * 7) % 1455;
            assert_eq!(f, &test_frame(pa.mac, pb.mac, *seq, len), "frame {i} corrupted");
        }
        let ts = tx.stats();
        assert_eq!(ts.tx_frames, N as u64);
        assert_eq!((ts.tx_busy, ts.tx_errors, ts.tx_invalid), (0, 0, 0));
        let rs = rx.stats();
        assert!(rs.rx_frames >= N as u64);
        assert_eq!(rs.rx_kernel_drops, 0);
        // Our own transmissions never show up as received on the sender.
        let mut echoed = 0;
        tx.recv_batch(usize::MAX, |f, _| echoed += seq_of(f).is_some() as usize)
            .unwrap();
        assert_eq!(echoed, 0);
        // Receive timestamps are CLOCK_REALTIME.
        let mut stamp = Instant::ZERO;
        tx.send(&test_frame(pa.mac, pb.mac, 1, 64)).unwrap();
        tx.flush().unwrap();
        wait_readable(&[rx.fd()], Some(Duration::from_secs(1))).unwrap();
        rx.recv_batch(1, |_, t| stamp = t).unwrap();
        let after = qosnet_io::clock::realtime_now();
        assert!(
            stamp >= before && stamp <= after,
            "{stamp:?} not in [{before:?}, {after:?}]"
        );
        drop((tx, rx));
        lab.down().unwrap();
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn frames_cross_a_veth_pair_with_send() {
        require_root();
        one_way(TxMode::Send);
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn frames_cross_a_veth_pair_with_tx_ring() {
        require_root();
        one_way(TxMode::Ring);
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn garbage_is_counted_not_fatal() {
        use rand::{Rng, SeedableRng};
        require_root();
        let prefix = test_prefix();
        let lab = two_hosts(&prefix, ("", ""));
        let pa = lab.port("a", "b").unwrap().clone();
        let pb = lab.port("b", "a").unwrap().clone();
        let cfg = AfPacketConfig::default();
        let mut tx = AfPacket::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
        let mut rx = AfPacket::open_in(&pb.netns, &pb.ifname, &cfg).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut sent = 0u64;
        let mut refused = 0u64;
        let mut seen = 0u64;
        let mut bytes_ok = true;
        for burst in 0..20 {
            for _ in 0..100 {
                // Random lengths including runts and over-MTU frames.
                let len = rng.gen_range(0..1600);
                let mut f: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                if len >= 14 && burst % 2 == 0 {
                    // Half the bursts look like IPv4 with garbage inside.
                    f[12] = 0x08;
                    f[13] = 0x00;
                }
                match tx.send(&f) {
                    Ok(()) => sent += 1,
                    Err(_) => refused += 1,
                }
            }
            let t0 = std::time::Instant::now();
            while seen < sent && t0.elapsed() < std::time::Duration::from_secs(1) {
                let n = rx
                    .recv_batch(usize::MAX, |f, _| {
                        seen += 1;
                        bytes_ok &= f.len() >= 14 && f.len() <= 1518;
                    })
                    .unwrap();
                if n == 0 {
                    wait_readable(&[rx.fd()], Some(Duration::from_millis(10))).unwrap();
                }
            }
        }
        let ts = tx.stats();
        assert!(sent > 1000 && refused > 50, "sent {sent} refused {refused}");
        assert_eq!(ts.tx_frames, sent);
        assert_eq!(ts.tx_invalid + ts.tx_busy + ts.tx_errors, refused);
        assert!(bytes_ok);
        // Kernel-generated frames cannot appear (IPv6 off, no addresses), so
        // every accepted garbage frame arrived and nothing else did.
        assert_eq!(seen, sent);
        assert_eq!(rx.stats().rx_frames, sent);
        drop((tx, rx));
        lab.down().unwrap();
    }

    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn host_frames_arrive_with_finished_checksums() {
        use qosnet_core::wire::{self, IPPROTO_UDP};
        require_root();
        let prefix = test_prefix();
        let lab = two_hosts(&prefix, ("198.18.0.1/24", "198.18.0.2/24"));
        let pb = lab.port("b", "a").unwrap().clone();
        let mut rx = AfPacket::open_in(&pb.netns, &pb.ifname, &Default::default()).unwrap();
        let sock = netns::run_in(&lab.netns("a").unwrap(), || {
            std::net::UdpSocket::bind("198.18.0.1:4000")
        })
        .unwrap()
        .unwrap();
        // The kernel ARPs first; nothing listens at b, which is fine.
        for _ in 0..3 {
            sock.send_to(&[0x5a; 333], "198.18.0.2:4001").unwrap();
        }
        let mut udp_ok = 0;
        let t0 = std::time::Instant::now();
        while udp_ok < 3 && t0.elapsed() < std::time::Duration::from_secs(2) {
            wait_readable(&[rx.fd()], Some(Duration::from_millis(50))).unwrap();
            rx.recv_batch(64, |f, _| {
                let Ok(ip) = wire::parse_ipv4(f) else { return };
                if ip.proto != IPPROTO_UDP {
                    return;
                }
                // Pseudo-header + UDP segment must sum to 0xffff: the
                // checksum was finished by the sender, not left to offload.
                let seg = &f[ip.l4_offset()..wire::ETH_HDR + ip.total_len];
                let mut acc = wire::ones_sum(0, &ip.src.octets());
                acc = wire::ones_sum(acc, &ip.dst.octets());
                acc = wire::ones_sum(acc, &[0, IPPROTO_UDP]);
                acc = wire::ones_sum(acc, &(seg.len() as u16).to_be_bytes());
                assert_eq!(wire::ones_sum(acc, seg), 0xffff, "bad UDP checksum");
                udp_ok += 1;
            })
            .unwrap();
        }
        assert_eq!(udp_ok, 3);
        assert_eq!(rx.stats().rx_csum_partial, 0);
        drop(rx);
        lab.down().unwrap();
    }

    /// With `stack_drop`, the socket still gets every frame while the
    /// namespace's kernel sees none (it answers no ARP, so a ping from the
    /// peer fails); once the socket is closed the link and its program are
    /// gone and the same ping is answered.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn stack_drop_hides_frames_from_the_kernel_only_while_open() {
        require_root();
        let prefix = test_prefix();
        let _guard = qosnet_lab::testkit::PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("198.18.0.1/24", "198.18.0.2/24"));
        let pb = lab.port("b", "a").unwrap().clone();
        let cfg = AfPacketConfig {
            stack_drop: true,
            ..Default::default()
        };
        let mut rx = AfPacket::open_in(&pb.netns, &pb.ifname, &cfg).unwrap();
        match rx.stack_drop() {
            Ok(on) => assert!(on),
            Err(e) => {
                // tcx needs Linux >= 6.6: say so rather than fail.
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "SKIPPED stack_drop: {e}");
                drop(rx);
                lab.down().unwrap();
                return;
            }
        }
        let ping = |lab: &qosnet_lab::lab::Lab| {
            // A failing command is an Err of `exec`.
            lab.exec("a", &["ping", "-c", "1", "-W", "1", "198.18.0.2"])
                .is_ok_and(|o| o.status.success())
        };
        assert!(!ping(&lab), "b's kernel answered while the socket was open");
        let mut arp = 0;
        rx.recv_batch(usize::MAX, |f, _| {
            arp += (f.len() > 14 && f[12..14] == [0x08, 0x06]) as usize
        })
        .unwrap();
        assert!(arp >= 1, "the socket did not get a's ARP request");
        drop(rx);
        // The kernel releases a closed link in deferred work: a few tries.
        assert!(
            (0..5).any(|_| ping(&lab)),
            "b's kernel still blind after the socket closed"
        );
        lab.down().unwrap();
    }

    /// Throughput of one veth pair: one thread sends 64-byte frames as fast
    /// as it can for a second, another receives. Prints pps for both
    /// transmit modes. `cargo test --release -p qosnet-live -- --ignored
    /// manual_throughput --nocapture`.
    #[test]
    #[ignore = "benchmark (needs root); run explicitly with --ignored --nocapture"]
    fn manual_throughput() {
        require_root();
        let runs = [
            (TxMode::Send, 1),
            (TxMode::Ring, 1),
            (TxMode::Send, 64),
            (TxMode::Ring, 64),
        ];
        for (mode, batch) in runs.into_iter().chain(runs) {
            let prefix = test_prefix();
            let lab = two_hosts(&prefix, ("", ""));
            let pa = lab.port("a", "b").unwrap().clone();
            let pb = lab.port("b", "a").unwrap().clone();
            let cfg = AfPacketConfig {
                tx_mode: mode,
                rx_frames: 8192,
                ..Default::default()
            };
            let mut tx = AfPacket::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
            let mut rx = AfPacket::open_in(&pb.netns, &pb.ifname, &cfg).unwrap();
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let stop2 = stop.clone();
            let receiver = std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop2.load(Ordering::Relaxed) {
                    let k = rx.recv_batch(512, |_, _| n += 1).unwrap();
                    if k == 0 {
                        wait_readable(&[rx.fd()], Some(Duration::from_millis(1))).unwrap();
                    }
                }
                rx.recv_batch(usize::MAX, |_, _| n += 1).unwrap();
                (n, rx.stats())
            });
            let frame = test_frame(pa.mac, pb.mac, 0, 60);
            let t0 = std::time::Instant::now();
            let mut busy = 0u64;
            while t0.elapsed() < std::time::Duration::from_secs(1) {
                for _ in 0..batch {
                    if tx.send(&frame).is_err() {
                        busy += 1;
                    }
                }
                let _ = tx.flush();
            }
            let secs = t0.elapsed().as_secs_f64();
            std::thread::sleep(std::time::Duration::from_millis(50));
            stop.store(true, Ordering::Relaxed);
            let (n, rs) = receiver.join().unwrap();
            let ts = tx.stats();
            println!(
                "{mode:?} batch {batch}: sent {:.0} pps, received {:.0} pps, busy {busy}, rx ring drops {}, \
                 lost in veth {}",
                ts.tx_frames as f64 / secs,
                n as f64 / secs,
                rs.rx_kernel_drops,
                ts.tx_frames.saturating_sub(n + rs.rx_kernel_drops),
            );
            drop(tx);
            lab.down().unwrap();
        }
    }
}

mod xdp {
    use std::io;
    use std::os::fd::{AsFd, AsRawFd};
    use std::sync::atomic::{AtomicU32, Ordering};

    use qosnet_io::afpacket::{AfPacket, AfPacketConfig};
    use qosnet_io::device::Device;
    use qosnet_io::xdp::*;

    use qosnet_lab::testkit::{drain, require_root, test_frame, two_hosts, PrefixGuard};

    /// Return early, saying why, when this kernel has no AF_XDP sockets.
    macro_rules! require_af_xdp {
        () => {
            // A socket opened and closed at once.
            if let Err(e) = rustix::net::socket(
                rustix::net::AddressFamily::XDP,
                rustix::net::SocketType::RAW,
                None,
            ) {
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED {}:{}: no AF_XDP sockets here: {}",
                    module_path!(),
                    line!(),
                    io::Error::from(e)
                );
                return;
            }
        };
    }

    /// `qxd{pid}n{k}`: this module's namespaces, unique per call.
    fn prefix() -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        format!("qxd{}n{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
    }

    fn len_of(seq: usize) -> usize {
        60 + (seq * 7) % 1455 // 60..=1514
    }

    /// Frames AF_XDP → AF_XDP and AF_PACKET → AF_XDP across a veth pair,
    /// every length from 60 to 1514, in order and intact; zero-copy asked
    /// for on veth falls back with a reason; no XDP program is left on
    /// either interface afterwards.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn frames_cross_a_veth_pair_and_nothing_is_left_attached() {
        require_root();
        require_af_xdp!();
        let prefix = prefix();
        let _guard = PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("", ""));
        let pa = lab.port("a", "b").unwrap().clone();
        let pb = lab.port("b", "a").unwrap().clone();
        let cfg = XdpConfig {
            ring: 256,
            zero_copy: true,
            ..Default::default()
        };
        let mut tx = AfXdp::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
        let mut rx = AfXdp::open_in(&pb.netns, &pb.ifname, &cfg).unwrap();
        eprintln!("tx: {}\nrx: {}", tx.mode(), rx.mode());
        assert_eq!(tx.mac(), pa.mac);
        // veth has no zero-copy: the fallback happened and says why.
        assert!(
            !rx.is_zero_copy() && rx.mode().contains("zero-copy refused"),
            "{}",
            rx.mode()
        );
        assert!(xdp_attached_in(&pb.netns, &pb.ifname).unwrap().is_some());

        // More frames than the rings hold, in chunks: chunks and
        // descriptors must be recycled many times over.
        const N: usize = 3000;
        const CHUNK: usize = 100;
        let mut got = Vec::new();
        for c in 0..N / CHUNK {
            for i in 0..CHUNK {
                let seq = (c * CHUNK + i) as u32;
                tx.send(&test_frame(pa.mac, pb.mac, seq, len_of(seq as usize)))
                    .unwrap();
            }
            tx.flush().unwrap();
            drain(&mut rx, (c + 1) * CHUNK, &mut got);
        }
        assert_eq!(got.len(), N, "received {} of {N} frames", got.len());
        for (i, (seq, f)) in got.iter().enumerate() {
            assert_eq!(*seq as usize, i, "out of order");
            assert_eq!(
                f,
                &test_frame(pa.mac, pb.mac, *seq, len_of(i)),
                "frame {i} corrupted"
            );
        }
        let ts = tx.stats();
        assert_eq!(ts.tx_frames, N as u64);
        assert_eq!((ts.tx_busy, ts.tx_errors, ts.tx_invalid), (0, 0, 0));
        let rs = rx.stats();
        assert_eq!(rs.rx_frames, N as u64);
        assert_eq!((rs.rx_kernel_drops, rs.rx_bad_slot, rs.rx_truncated), (0, 0, 0));
        // Oversized and runt frames are refused and counted.
        assert!(tx.send(&[0u8; 1600]).is_err());
        assert!(tx.send(&[0u8; 10]).is_err());
        assert_eq!(tx.stats().tx_invalid, 2);

        // An AF_PACKET sender on the other end reaches the XDP socket too.
        drop(tx);
        assert_eq!(xdp_attached_in(&pa.netns, &pa.ifname).unwrap(), None);
        let mut ptx = AfPacket::open_in(&pa.netns, &pa.ifname, &AfPacketConfig::default()).unwrap();
        let mut got = Vec::new();
        for c in 0..5 {
            for seq in c * 100..(c + 1) * 100 {
                ptx.send(&test_frame(pa.mac, pb.mac, seq, len_of(seq as usize)))
                    .unwrap();
            }
            drain(&mut rx, (c as usize + 1) * 100, &mut got);
        }
        assert_eq!(got.len(), 500);
        assert!(got.iter().enumerate().all(|(i, (s, _))| *s as usize == i));

        drop(rx);
        assert_eq!(
            xdp_attached_in(&pb.netns, &pb.ifname).unwrap(),
            None,
            "program left attached"
        );
        drop(ptx);
        lab.down().unwrap();
    }

    /// An interface whose XDP hook another live process holds (here a
    /// first qosnet socket, through its XDP link) is refused with a clear
    /// error, the holder's program is not touched, and once the holder is
    /// gone the interface is free again.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn a_second_socket_on_a_busy_interface_fails_cleanly() {
        require_root();
        require_af_xdp!();
        let prefix = prefix();
        let _guard = PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("", ""));
        let pa = lab.port("a", "b").unwrap().clone();
        let cfg = XdpConfig {
            ring: 64,
            ..Default::default()
        };
        let first = AfXdp::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
        let second = AfXdp::open_in(&pa.netns, &pa.ifname, &cfg);
        let err = second.err().expect("the hook is taken");
        assert!(err.to_string().contains("attaching XDP"), "{err}");
        // The first one is untouched.
        assert!(xdp_attached_in(&pa.netns, &pa.ifname).unwrap().is_some());
        drop(first);
        assert_eq!(xdp_attached_in(&pa.netns, &pa.ifname).unwrap(), None);
        let again = AfXdp::open_in(&pa.netns, &pa.ifname, &cfg).unwrap();
        drop(again);
        lab.down().unwrap();
    }

    /// A bpffs mounted on a fresh directory, unmounted and removed on drop.
    struct BpfFs(std::path::PathBuf);

    impl BpfFs {
        fn mount() -> BpfFs {
            let dir = tempfile::Builder::new()
                .prefix("qxd-bpffs-")
                .tempdir()
                .unwrap()
                .keep();
            let st = std::process::Command::new("mount")
                .args(["-t", "bpf", "bpf"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(st.success(), "mounting bpffs on {}", dir.display());
            BpfFs(dir)
        }
    }

    impl Drop for BpfFs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    /// A program attached through netlink by another tool (here `ip link
    /// set xdpgeneric pinned`, the way xdp-loader or `ip` leave one behind:
    /// it outlives its loader) is found at open, removed with a note, and
    /// the port works; nothing is left afterwards.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn a_leftover_netlink_program_is_removed_at_open() {
        require_root();
        require_af_xdp!();
        let prefix = prefix();
        let _guard = PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("", ""));
        let pb = lab.port("b", "a").unwrap().clone();
        let fs = BpfFs::mount();
        {
            let map = xsk_map(4).unwrap();
            let prog = load_program(map.as_raw_fd(), false).unwrap();
            let path = std::ffi::CString::new(fs.0.join("left").to_str().unwrap()).unwrap();
            qosnet_io::sys::bpf::obj_pin(prog.as_fd(), &path).unwrap();
            let out = std::process::Command::new("ip")
                .args([
                    "-n",
                    &pb.netns,
                    "link",
                    "set",
                    "dev",
                    &pb.ifname,
                    "xdpgeneric",
                    "pinned",
                ])
                .arg(fs.0.join("left"))
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        // Our descriptors are closed: the netlink attachment stays.
        let left = xdp_attached_in(&pb.netns, &pb.ifname).unwrap();
        assert!(left.is_some());
        let dev = AfXdp::open_in(
            &pb.netns,
            &pb.ifname,
            &XdpConfig {
                ring: 64,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(
            dev.mode()
                .contains(&format!("removed a leftover XDP program (id {})", left.unwrap())),
            "{}",
            dev.mode()
        );
        assert_ne!(xdp_attached_in(&pb.netns, &pb.ifname).unwrap(), left);
        drop(dev);
        assert_eq!(xdp_attached_in(&pb.netns, &pb.ifname).unwrap(), None);
        drop(fs);
        lab.down().unwrap();
    }

    /// With `pass_arp`, the host's kernel still answers ARP while the
    /// socket takes everything else: a ping from the peer resolves the
    /// address (the kernel replied) and its echo request reaches the socket.
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn pass_arp_leaves_arp_to_the_kernel() {
        require_root();
        require_af_xdp!();
        let prefix = prefix();
        let _guard = PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("198.18.0.1/24", "198.18.0.2/24"));
        let pb = lab.port("b", "a").unwrap().clone();
        let mut rx = AfXdp::open_in(
            &pb.netns,
            &pb.ifname,
            &XdpConfig {
                ring: 64,
                pass_arp: true,
                ..Default::default()
            },
        )
        .unwrap();
        // One ping, 1 s deadline: no reply (the socket took the request).
        let _ = lab.exec("a", &["ping", "-c", "1", "-W", "1", "198.18.0.2"]);
        let mut echo = 0;
        let mut arp = 0;
        rx.recv_batch(64, |f, _| {
            if f.len() > 23 && f[12..14] == [0x08, 0x00] && f[23] == 1 {
                echo += 1;
            }
            if f.len() > 14 && f[12..14] == [0x08, 0x06] {
                arp += 1;
            }
        })
        .unwrap();
        assert_eq!(
            (echo, arp),
            (1, 0),
            "the socket gets the echo request, not the ARP"
        );
        let neigh = lab.exec("a", &["ip", "neigh", "show", "198.18.0.2"]).unwrap();
        let text = String::from_utf8_lossy(&neigh.stdout);
        assert!(
            text.contains(&pb.mac.to_string()),
            "a did not learn b's MAC: {text}"
        );
        drop(rx);
        lab.down().unwrap();
    }
}

mod netdev {
    use qosnet_io::afpacket::AfPacketConfig;
    use qosnet_io::netdev::*;
    use qosnet_io::xdp::XdpConfig;
    /// As root: an AF_XDP port opens as AF_XDP; a second one on the same
    /// interface (its XDP hook taken) falls back to AF_PACKET and says
    /// why (the line a node prints for that port).
    #[test]
    #[ignore = "needs root: network namespaces, AF_PACKET (scripts/test runs it as root with --include-ignored)"]
    fn af_xdp_falls_back_to_af_packet_with_the_reason() {
        use qosnet_lab::testkit::{require_root, two_hosts, PrefixGuard};
        require_root();
        let prefix = format!("qxd{}f", std::process::id());
        let _guard = PrefixGuard(prefix.clone());
        let lab = two_hosts(&prefix, ("", ""));
        let pa = lab.port("a", "b").unwrap().clone();
        let pk = AfPacketConfig::default();
        let xdp = XdpConfig {
            ring: 64,
            ..XdpConfig::default()
        };
        let (first, how) = match NetDevice::open(Some(&pa.netns), &pa.ifname, DeviceKind::AfXdp, &pk, &xdp) {
            Ok(x) => x,
            Err(e) => panic!("{e}"),
        };
        if first.kind() != DeviceKind::AfXdp {
            // A kernel without AF_XDP: the fallback is what is tested.
            assert!(how.starts_with("af_packet (af_xdp refused:"), "{how}");
            return;
        }
        assert!(how.starts_with("af_xdp "), "{how}");
        assert_eq!(first.mac(), pa.mac);
        let (second, how) =
            NetDevice::open(Some(&pa.netns), &pa.ifname, DeviceKind::AfXdp, &pk, &xdp).unwrap();
        assert_eq!(second.kind(), DeviceKind::AfPacket);
        assert!(
            how.contains("af_xdp refused") && how.contains("attaching XDP"),
            "{how}"
        );
        assert_eq!(second.ifname(), pa.ifname);
        drop((first, second));
        lab.down().unwrap();
    }
}
