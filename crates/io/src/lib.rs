//! qosnet-io: the devices and system calls of live mode.
//!
//! Everything here talks to the Linux kernel, so that neither the sans-IO
//! core nor the live runtime (`qosnet-live`) nor the labs (`qosnet-lab`)
//! ever has to: frame-level ports ([`device::Device`] on AF_PACKET
//! [`afpacket`], AF_XDP [`xdp`], TAP [`tap`], chosen per port by
//! [`netdev`]), network namespaces ([`netns`]), interfaces ([`iface`],
//! [`names`], [`iproute`]), clocks ([`clock`]), real-time placement
//! ([`rt`]), privileges ([`privs`]), processes ([`process`]) and private
//! run directories ([`rundir`]). It is quinn-udp's role beside quinn-proto.
//!
//! This is the only crate of the workspace with `unsafe` code, and in it
//! only [`sys`] has any (the system calls rustix and socket2 do not wrap,
//! and the memory shared with the kernel), each block with a SAFETY comment.

#![deny(unsafe_code)]

pub mod afpacket;
pub mod clock;
pub mod device;
pub mod iface;
pub mod iproute;
pub mod names;
pub mod netdev;
pub mod netns;
pub mod noise;
pub mod privs;
pub mod process;
pub mod rt;
pub mod rundir;
#[allow(unsafe_code)]
pub mod sys;
pub mod tap;
pub mod xdp;
