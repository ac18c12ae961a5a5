//! A user's packet capture as a trace of IP packet sizes: a flow's size
//! distribution (`size = "pcap:FILE"`) and the size trace of seed 003's
//! fairness tables (`qosnet reproduce stsdr --set trace=FILE.pcap`; the
//! paper's variable sizes came from an ISP trace that is not public, Khan,
//! Sahoo & Manjunath, Appendix).
//!
//! Sizes are IP packet bytes read from each packet's IP header (IPv4 total
//! length, IPv6 40 + payload length), so captures cut short by a snap
//! length still give true sizes. Link types: Ethernet (with any 802.1Q /
//! 802.1ad tags), raw IP, IPv4, Linux cooked (SLL). Packets that are not
//! IP are skipped and counted. A file that is not a readable pcap is
//! refused with the reason; pcapng is not read (`editcap -F pcap` converts).

use std::path::Path;

use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;

/// The IP sizes of a capture, in order, and how many packets were not IP.
#[derive(Debug)]
pub struct SizeTrace {
    pub sizes: Vec<u16>,
    pub skipped: u64,
}

/// Captures larger than this many packets are cut (the fairness runs cycle
/// through the trace anyway).
const MAX_PACKETS: usize = 10_000_000;

/// Read `path` as a size trace.
pub fn read(path: &Path) -> Result<SizeTrace, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("trace {}: {e}", path.display()))?;
    let mut r = PcapReader::new(std::io::BufReader::new(f)).map_err(|e| {
        format!(
            "trace {}: not a readable pcap file ({e}); pcapng is not read: convert it with `editcap -F pcap IN OUT`",
            path.display()
        )
    })?;
    let link = r.header().datalink;
    let mut t = SizeTrace {
        sizes: Vec::new(),
        skipped: 0,
    };
    let mut n = 0u64;
    // Raw packets: the parsed ones refuse captures cut by a snap length
    // (orig_len > snaplen), which is exactly what a size trace needs.
    while let Some(p) = r.next_raw_packet() {
        n += 1;
        let p = p.map_err(|e| format!("trace {}: packet {n}: {e}", path.display()))?;
        match ip_size(link, &p.data) {
            Some(s) => t.sizes.push(s),
            None => t.skipped += 1,
        }
        if t.sizes.len() >= MAX_PACKETS {
            break;
        }
    }
    if t.sizes.is_empty() {
        return Err(format!(
            "trace {}: none of its {n} packets is IPv4 or IPv6 (link type {link:?}); give a capture of IP traffic",
            path.display()
        ));
    }
    Ok(t)
}

/// The IP size of one captured frame, if it carries a readable IP header.
fn ip_size(link: DataLink, d: &[u8]) -> Option<u16> {
    let ip = match link {
        DataLink::ETHERNET => {
            let mut off = 12;
            let mut ty = u16::from_be_bytes([*d.get(off)?, *d.get(off + 1)?]);
            // 802.1Q / 802.1ad tags, possibly stacked.
            while ty == 0x8100 || ty == 0x88A8 {
                off += 4;
                ty = u16::from_be_bytes([*d.get(off)?, *d.get(off + 1)?]);
            }
            if ty != 0x0800 && ty != 0x86DD {
                return None;
            }
            d.get(off + 2..)?
        }
        DataLink::LINUX_SLL => {
            let ty = u16::from_be_bytes([*d.get(14)?, *d.get(15)?]);
            if ty != 0x0800 && ty != 0x86DD {
                return None;
            }
            d.get(16..)?
        }
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => d,
        _ => return None,
    };
    match ip.first()? >> 4 {
        4 => {
            let len = u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]);
            (len >= 20).then_some(len)
        }
        6 => {
            let pl = u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]);
            pl.checked_add(40)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};

    fn eth_ipv4(total: u16, vlan: bool) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&ip);
        f
    }

    #[test]
    fn reads_ip_sizes_from_headers_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        let hdr = PcapHeader {
            datalink: DataLink::ETHERNET,
            snaplen: 64,
            ..PcapHeader::default()
        };
        let mut w = PcapWriter::with_header(std::fs::File::create(&path).unwrap(), hdr).unwrap();
        let arp = {
            let mut f = vec![0u8; 12];
            f.extend_from_slice(&[0x08, 0x06]);
            f.extend_from_slice(&[0u8; 28]);
            f
        };
        // Captured 34 bytes each, but the headers say 1500, 40 and 576.
        for f in [
            eth_ipv4(1500, false),
            arp,
            eth_ipv4(40, true),
            eth_ipv4(576, false),
        ] {
            let p = PcapPacket::new(std::time::Duration::ZERO, 1514, &f);
            w.write_packet(&p).unwrap();
        }
        drop(w);
        let t = read(&path).unwrap();
        assert_eq!(t.sizes, vec![1500, 40, 576]);
        assert_eq!(t.skipped, 1);
    }

    #[test]
    fn refuses_what_is_not_a_pcap_of_ip() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.pcap");
        std::fs::write(&junk, b"this is not a capture").unwrap();
        let e = read(&junk).unwrap_err();
        assert!(e.contains("not a readable pcap"), "{e}");
        let e = read(&dir.path().join("missing.pcap")).unwrap_err();
        assert!(e.contains("missing.pcap"), "{e}");
        // A valid pcap with no IP packet in it.
        let empty = dir.path().join("arp.pcap");
        let mut w = PcapWriter::new(std::fs::File::create(&empty).unwrap()).unwrap();
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x06]);
        w.write_packet(&PcapPacket::new(std::time::Duration::ZERO, 14, &f))
            .unwrap();
        drop(w);
        let e = read(&empty).unwrap_err();
        assert!(e.contains("none of its 1 packets"), "{e}");
        // Truncated frames never panic.
        for n in 0..40 {
            let f = eth_ipv4(100, true);
            let _ = ip_size(DataLink::ETHERNET, &f[..n.min(f.len())]);
            let _ = ip_size(DataLink::LINUX_SLL, &f[..n.min(f.len())]);
            let _ = ip_size(DataLink::RAW, &f[..n.min(f.len())]);
        }
    }
}
