//! qosnet-live: the OS-facing half of live mode.
//!
//! Everything here talks to the Linux kernel — namespaces, veth pairs,
//! AF_PACKET sockets, clocks, UDP sockets — so the sans-IO core never has
//! to. The live router loop ([`router_loop`]) joins these pieces to
//! `qosnet_core`'s `Router`: `handle_frame` for each frame a [`afpacket::Device`]
//! receives, `poll_transmit` into `Device::send`, and a wait until the
//! router's `poll_at`.
//!
//! `unsafe` appears only around system calls, each with a SAFETY comment.

pub mod afpacket;
pub mod bench;
pub mod clock;
pub mod degeb;
pub mod iface;
pub mod lab;
pub mod labrun;
pub mod netns;
pub mod router_loop;
pub mod traffic;

#[cfg(test)]
mod testutil;
