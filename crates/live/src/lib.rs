//! qosnet-live: the runtime of live mode, the simulator's sibling.
//!
//! The live driver ([`driver`]) runs any of `qosnet_core`'s nodes on real
//! ports (`qosnet_io`'s devices): `handle_frame` for each frame a
//! `Device` receives, `handle_timeout` and `poll_transmit` into
//! `Device::send`, and a wait until the node's `poll_timeout`, in one
//! real-time loop. Around it: the node host of `qosnet node` ([`node`]),
//! the metrics listener ([`metrics`]) and RETHER's control socket
//! ([`rethctl`]). Labs of namespaces, traffic and benchmarks are
//! `qosnet-lab`'s; every system call is `qosnet-io`'s, so this crate has
//! no `unsafe`.

#![forbid(unsafe_code)]

pub mod driver;
pub mod metrics;
pub mod node;
pub mod report;
pub mod rethctl;
