//! qosnet-sim: the discrete-event simulator.
//!
//! Virtual time in integer nanoseconds, a deterministic event queue, links
//! with capacity, propagation delay and Ethernet framing overhead, routers
//! with processing time and clocks, hosts with traffic sources and sinks.
//! The routers are the core's sans-IO state machines, the same code live
//! mode runs on real packets.

#![forbid(unsafe_code)]

mod build;
pub mod engine;
pub mod host;
pub mod media;
pub mod sim;
pub mod sink;
pub mod source;

pub use build::make_scheduler;
pub use sim::Sim;
