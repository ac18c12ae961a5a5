//! `size = "pcap:FILE"`: a flow's packet sizes drawn from a capture's IP
//! sizes — loaded relative to the scenario file, refused with file:line
//! when the capture is missing, not a pcap or holds no IP packet, and
//! followed by the simulator's generator.

use pcap_file::pcap::{PcapPacket, PcapWriter};
use qosnet_scenario::{load_file, SizeDist};

const SCENARIO: &str = r#"[scenario]
name = "pcap-size"
duration = "1s"
warmup = "100ms"

[defaults.link]
capacity = "100Mb/s"

[[node]]
name = "R1"
kind = "router"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"

[[link]]
a = "h1"
b = "R1"
[[link]]
a = "R1"
b = "h2"

[[flow]]
name = "f"
from = "h1"
to = "h2"
rate = "2000pps"
pattern = "poisson"
"#;

/// An Ethernet frame whose IPv4 header says `total` bytes (the capture
/// holds only the headers, as a snap length would cut it).
fn frame(total: u16) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0u8; 16]);
    f
}

fn write_pcap(path: &std::path::Path, sizes: &[u16]) {
    let mut w = PcapWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    for &s in sizes {
        w.write_packet(&PcapPacket::new(
            std::time::Duration::ZERO,
            14 + s as u32,
            &frame(s),
        ))
        .unwrap();
    }
}

#[test]
fn a_flow_takes_its_sizes_from_a_capture_next_to_the_scenario() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("caps")).unwrap();
    // Three 100-byte packets for one of 1500, and a 30-byte one (below
    // the probe's minimum: raised, with a warning).
    write_pcap(&dir.path().join("caps/mix.pcap"), &[100, 1500, 100, 100, 30]);
    let file = dir.path().join("s.toml");
    std::fs::write(&file, format!("{SCENARIO}size = \"pcap:caps/mix.pcap\"\n")).unwrap();
    let sc = load_file(file.to_str().unwrap(), &[]).unwrap();
    let SizeDist::Trace(t) = &sc.flows[0].size else {
        panic!("{:?}", sc.flows[0].size)
    };
    let min = qosnet_core::probe::MIN_IP_SIZE as u16;
    assert_eq!(&t[..], &[100, 1500, 100, 100, min]);
    assert!(
        sc.warnings.iter().any(|w| w.msg.contains("1 of 5 sizes below")),
        "{:?}",
        sc.warnings
    );
    // The generator follows it: the mean IP size on the wire is the trace's.
    let r = qosnet_sim::Sim::new(sc.clone()).unwrap().run();
    let l = r.links.iter().find(|l| l.name == "R1->h2").unwrap();
    let ip_bytes = l.bytes - 14 * l.packets;
    let mean = ip_bytes as f64 / l.packets as f64;
    let want = sc.flows[0].size.mean();
    // ~1800 packets: the mean of a 4:1 mix of 100 and 1500 within 10 %.
    assert!(l.packets > 1000, "{l:?}");
    assert!((mean / want - 1.0).abs() < 0.1, "mean {mean}, trace {want}");
}

#[test]
fn a_missing_or_bad_capture_is_refused_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk.pcap"), b"not a capture").unwrap();
    let arp = dir.path().join("arp.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&arp).unwrap()).unwrap();
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x06]);
    w.write_packet(&PcapPacket::new(std::time::Duration::ZERO, 14, &f))
        .unwrap();
    drop(w);
    let line = SCENARIO.lines().count() + 1;
    for (spec, want) in [
        ("pcap:missing.pcap", "missing.pcap"),
        ("pcap:junk.pcap", "not a readable pcap"),
        ("pcap:arp.pcap", "none of its 1 packets"),
        ("pcap:", "names no file"),
    ] {
        let file = dir.path().join("s.toml");
        std::fs::write(&file, format!("{SCENARIO}size = \"{spec}\"\n")).unwrap();
        let e = load_file(file.to_str().unwrap(), &[]).unwrap_err();
        assert!(e.msg.contains(want), "{spec}: {e}");
        assert_eq!(e.line, line, "{spec}: {e}");
        assert!(e.hint.contains("pcap"), "{spec}: {e}");
    }
}
