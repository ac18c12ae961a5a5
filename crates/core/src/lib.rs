//! qosnet-core: the sans-IO heart of qosnet.
//!
//! Nothing in this crate reads a clock, sleeps, spawns a thread or touches a
//! socket. Every state machine is handed `now` and bytes by a driver — the
//! discrete-event simulator (`qosnet-sim`) or the live runtime — so the same
//! scheduler, meter and protocol code runs in both modes.
#![forbid(unsafe_code)]

pub mod arp;
pub mod config;
pub mod diffserv;
pub mod flow;
pub mod icmp;
pub mod meter;
pub mod node;
pub mod packet;
pub mod probe;
pub mod rether;
pub mod route;
pub mod router;
pub mod sched;
pub mod stats;
pub mod stsdr;
pub mod switch;
pub mod tdp;
pub mod time;
pub mod traffic;
pub mod wire;

pub use config::{ConfigError, Fault};
pub use packet::{Color, Framing, Meta, Packet};
pub use time::{Duration, Instant};
