//! In-process fuzzing of qosnet's frame parsers: Ethernet/IPv4/
//! UDP views, VLAN tags, measurement probes, RETHER frames
//! (`rether::wire`) and STSDR DS frames (`stsdr::wire`). Inputs are random
//! bytes with the EtherType forced to the parser's own (so the fuzzer gets
//! past the first check) and mutations of valid frames the encoders build.
//! No input may panic; a frame a parser accepts must re-encode (DS) without
//! panicking either.
//!
//! The structured complement of the coverage-guided AFL++ targets
//! (`crates/fuzz`, `scripts/fuzz`): these proptest properties reach deep
//! states by construction; short in the normal test run
//! (`QOSNET_FUZZ_CASES`, default 2000 per target, about a second) and long
//! on request:
//!
//! `QOSNET_FUZZ_CASES=10000000 cargo test --release -p qosnet-core --test fuzz_wire`

use proptest::prelude::*;
use qosnet_core::probe::Probe;
use qosnet_core::rether::wire as rether;
use qosnet_core::stsdr::sched::FeState;
use qosnet_core::stsdr::wire as ds;
use qosnet_core::stsdr::Dims;
use qosnet_core::wire::{self, MacAddr};

fn cases() -> u32 {
    std::env::var("QOSNET_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn with_type(mut f: Vec<u8>, ethertype: u16) -> Vec<u8> {
    if f.len() < 14 {
        f.resize(14, 0);
    }
    f[12..14].copy_from_slice(&ethertype.to_be_bytes());
    f
}

/// Valid DS frames of assorted sizes, to mutate.
fn ds_seed(fe: u16, n: u8, k: u8, l: u16, vlan: bool) -> Vec<u8> {
    let dims = Dims::new(fe as usize + 1, n as usize, k as usize);
    let h = ds::Header {
        fe,
        flags: 0,
        cycle: 7,
        stamp_ref: 99,
        outlinks: n,
        classes: k,
        slots: l,
    };
    let st = FeState::new(dims, 99);
    ds::encode(
        &h,
        &st,
        None,
        MacAddr([2, 0, 0, 0, 0, 1]),
        vlan.then(|| ds::Vlan::new(100)),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), .. ProptestConfig::default() })]

    #[test]
    fn ip_udp_vlan_probe_views(f in prop::collection::vec(any::<u8>(), 0..1600), ipv4 in any::<bool>()) {
        let f = if ipv4 { with_type(f, 0x0800) } else { f };
        if let Ok(info) = wire::parse_ipv4(&f) {
            let p = wire::udp_payload(&f, &info);
            prop_assert!(p.len() <= f.len());
            if let Some(d) = Probe::decode_any(p) {
                let _ = d.resolve(Some(u64::MAX), u64::MAX);
                let _ = d.resolve(None, 0);
            }
        }
        let _ = wire::eth_dst(&f);
        let _ = wire::eth_src(&f);
        let _ = qosnet_core::wire::vlan::parse_vlan(&f);
        let mut g = f.clone();
        let _ = qosnet_core::wire::vlan::pop_tag(&mut g);
    }

    #[test]
    fn rether_frames(f in prop::collection::vec(any::<u8>(), 0..400), ty in 0u8..9, at in 14usize..20) {
        let mut f = with_type(f, rether::ETHERTYPE_RETHER);
        if f.len() > at {
            f[at] = ty;
        }
        prop_assert!(rether::is_rether(&f));
        if let Ok(fr) = rether::parse(&f) {
            // What parses, builds.
            let _ = rether::build(MacAddr([2, 0, 0, 0, 0, 1]), MacAddr::BROADCAST, &fr);
        }
    }

    #[test]
    fn ds_frames(
        (fe, n, k, l) in (0u16..8, 1u8..5, 1u8..4, 1u16..6),
        vlan in any::<bool>(),
        muts in prop::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
        vid in prop::option::of(0u16..4096),
        dims in prop::option::of((0usize..10, 0usize..6, 0usize..5)),
    ) {
        let mut f = ds_seed(fe, n, k, l, vlan);
        let exp0 = ds::Expect { vid: None, dims: None };
        let p0 = ds::parse(&f, &exp0);
        prop_assert!(p0.is_ok(), "a frame encode built must parse: {:?}", p0.err());
        for (i, b) in muts {
            let len = f.len();
            f[i % len] = b;
        }
        f.truncate(cut % (f.len() + 1));
        let exp = ds::Expect { vid, dims: dims.map(|(m, n, k)| Dims::new(m, n, k)) };
        let _ = ds::is_ds(&f);
        let _ = ds::parse_header(&f, &exp);
        let _ = ds::parse(&f, &exp);
        let _ = ds::parse(&f, &exp0);
    }

    #[test]
    fn ds_random_bytes(f in prop::collection::vec(any::<u8>(), 0..600)) {
        let f = with_type(f, ds::ETHERTYPE_DS);
        let exp = ds::Expect { vid: None, dims: None };
        let _ = ds::parse(&f, &exp);
        let _ = ds::parse(&f, &ds::Expect { vid: Some(100), dims: Some(Dims::new(4, 2, 2)) });
    }
}
