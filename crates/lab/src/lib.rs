//! qosnet-lab: labs of network namespaces, and everything measured in them.
//!
//! [`lab`] builds a lab from a plain description (namespaces, veth pairs,
//! VXLAN tunnels for a lab split across machines by [`placement`]);
//! [`labrun`] runs a scenario in one (`qosnet lab run`: the scenario's
//! routers on `qosnet-live`'s driver, its flows from [`traffic`]'s
//! generators into its sinks, results in the simulator's schema);
//! [`containerlab`] exports a scenario for containerlab; [`tester`] is
//! the hardware tester of the TDP paper in software; [`bench`] the
//! forwarding benchmarks; [`labtools`] the helpers experiments and tests
//! measure a running lab with; [`testkit`] what every live test needs.
//!
//! The only crate whose tests need root (`#[ignore = "needs root: ..."]`,
//! run by `scripts/test` as root). No `unsafe`: system calls are
//! `qosnet-io`'s.

#![forbid(unsafe_code)]

pub mod bench;
pub mod containerlab;
pub mod lab;
pub mod labrun;
pub mod labtools;
pub mod placement;
pub mod tester;
pub mod testkit;
pub mod traffic;
