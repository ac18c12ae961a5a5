//! qosnet-live: the OS-facing half of live mode.
//!
//! Everything here talks to the Linux kernel — namespaces, veth pairs,
//! AF_PACKET sockets, clocks, UDP sockets — so the sans-IO core never has
//! to. The live driver ([`driver`]) joins these pieces to any of
//! `qosnet_core`'s nodes: `handle_frame` for each frame a
//! [`device::Device`] receives, `handle_timeout` and `poll_transmit` into
//! `Device::send`, and a wait until the node's `poll_timeout`.
//!
//! `unsafe` appears only around system calls, each with a SAFETY comment.

pub mod afpacket;
pub mod bench;
pub mod clock;
pub mod containerlab;
pub mod device;
pub mod driver;
pub mod iface;
pub mod lab;
pub mod labrun;
pub mod labtools;
pub mod metrics;
pub mod names;
pub mod netdev;
pub mod netns;
pub mod node;
pub mod placement;
pub mod privs;
pub mod rethctl;
pub mod rt;
pub mod rundir;
pub mod tap;
pub mod tester;
pub mod testkit;
pub mod traffic;
pub mod xdp;

#[cfg(test)]
mod testutil;
