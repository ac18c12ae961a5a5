//! Time-Driven Priority (TDP), after Baldi et al., "Time Driven Priority
//! Router Implementation and First Experiments", ICC 2006.
//!
//! TDP gives reserved flows deterministic delay and less than two TFs of
//! jitter by forwarding them in lock step with a clock every router shares:
//!
//! - [`Ctr`] — the common time reference (§II-A): time frames (TF) of
//!   `T_f`, grouped into time cycles (TC) and super cycles. TF numbers are
//!   absolute (`now / T_f`), so routers sharing an epoch agree on them.
//! - Periodic forwarding (§II-B): a packet sent in TF `t` by node `n` is
//!   sent in TF `t + d` by node `n + 1`. With *immediate forwarding* `d` is
//!   one value per node; with *non-immediate forwarding* it is per flow.
//! - Stamps (§III-B): a TDP router marks each TDP packet with a DS byte of
//!   0x0c/0x1c/0x2c/0x3c ([`Ctr::stamp`]) carrying the parities of the TF
//!   and TC of transmission; the next router's [`StampDecoder`] (one per
//!   input interface) turns them back into the absolute upstream TF.
//!   Padding frames keep a link stamped when it has nothing else to carry.
//! - [`TdpWheel`] (§III-C) — the output module: `d_max + 1` per-TF queues
//!   per port, each of `T_f · C` bits, flushed one per TF, with best effort
//!   in the unused part of each TF behind a guard band.
//! - [`EdgeShaper`] (§II-C, §III-B) — at the ingress of a TDP domain,
//!   holds packets of reserved flows until one TF before their reserved TF.
//! - [`plan`] and [`Reservations`] (§II-E) — which TFs each flow gets on
//!   each link, with per-link, per-TF admission control.
//!
//! How a router uses them:
//!
//! ```text
//! input port (TDP interface), frame with is_tdp_tos(tos):
//!     u   = decoder[in_port].handle_stamp(&ctr, now, tos)   // upstream TF
//!     tf  = u + d            // d per node (immediate) or per flow
//!     pkt.meta.tdp_tf = Some(tf)  → route → wheel[out_port].enqueue(pkt, now)
//! input port (edge), unstamped frame:
//!     shaper.handle_packet(now, pkt, &info)
//!         Shaped{..}      → later: shaper.poll_release(now) gives (port, pkt)
//!                           with meta.tdp_tf set → wheel[port].enqueue
//!         NotShaped(pkt)  → best effort: meta.tdp_tf = None → wheel[port]
//! output port: when the link is free, wheel.dequeue(now); sleep until
//!     wheel.poll_at(now) (the next TF boundary at the latest when busy).
//! ```
//!
//! Everything is sans-IO: the driver hands in `now`; nothing here reads a
//! clock.

mod ctr;
mod plan;
mod shaper;
mod stamp;
mod wheel;

/// The 5-tuple, at home in [`crate::flow`]; re-exported here because the
/// edge shaper and per-flow forwarding delays are keyed by it.
pub use crate::flow::FlowKey;
pub use ctr::{is_tdp_tos, stamp_bits, Ctr, TfLag, TDP_MARK, TDP_TC_BIT, TDP_TF_BIT};
pub use plan::{plan, FlowPlan, Overbooked, Plan, PlanError, PlanFlow, PlanLink, Reservations};
pub use shaper::{EdgeShaper, ShapeOutcome, ShaperStats};
pub use stamp::{StampDecoder, StampStats};
pub use wheel::{queue_index, tf_budget_bytes, PaddingPolicy, PaddingSpec, StampMode, TdpStats, TdpWheel};
