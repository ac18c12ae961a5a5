//! `[scenario]` (name, run length, warm-up, drain, seed) and `[tdp]` (the
//! CTR: time frame, TFs per time cycle, TCs per super cycle; ICC 2006 §II).

use qosnet_core::Duration;

use super::limits::{MAX_DRAIN, MAX_RUN, MAX_SHAPER_HOLD, MAX_TF};
use super::{Ctx, ScenarioError};
use crate::model::TdpParams;
use crate::raw;

/// The `[scenario]` table, validated.
pub(super) struct Header {
    pub name: String,
    pub description: String,
    pub duration: Duration,
    pub warmup: Duration,
    pub drain: Duration,
    pub seed: u64,
}

pub(super) fn header(cx: &Ctx, h: &raw::S<raw::Header>) -> Result<Header, ScenarioError> {
    let h = h.get_ref();
    let span = h.name.span();
    let name = h.name.get_ref();
    // The name becomes a directory name under --out: no path tricks, no
    // control characters (a NUL would cut it short).
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.chars().any(|c| c.is_control() || c == '/' || c == '\\');
    if bad {
        return Err(cx.err(
            span,
            format!("scenario name {name:?} is not allowed"),
            "a name is non-empty, without control characters or path separators (it names output directories)",
        ));
    }
    let duration = cx.dur_max(
        &h.duration,
        MAX_RUN,
        "duration",
        "a day of simulated time is beyond any experiment qosnet is meant for",
    )?;
    if duration == Duration::ZERO {
        return Err(cx.err(
            h.duration.span(),
            "duration must be positive",
            "e.g. duration = \"10s\"",
        ));
    }
    let warmup = match &h.warmup {
        Some(w) => cx.dur_max(w, MAX_RUN, "warmup", "a warm-up is shorter than the run")?,
        None => Duration::ZERO,
    };
    if warmup >= duration {
        let span = h.warmup.as_ref().map(|w| w.span()).unwrap_or(h.duration.span());
        return Err(cx.err(
            span,
            format!("warmup ({warmup}) is not shorter than duration ({duration})"),
            "shorten the warm-up or lengthen the run",
        ));
    }
    let drain = match &h.drain {
        Some(d) => cx.dur_max(
            d,
            MAX_DRAIN,
            "drain",
            "packets in flight arrive within seconds in any bounded network",
        )?,
        None => Duration::from_millis(200),
    };

    Ok(Header {
        name: name.clone(),
        description: h.description.clone(),
        duration,
        warmup,
        drain,
        seed: h.seed.unwrap_or(1),
    })
}

pub(super) fn tdp(cx: &Ctx, t: Option<&raw::S<raw::Tdp>>) -> Result<Option<TdpParams>, ScenarioError> {
    Ok(match t {
        None => None,
        Some(t) => {
            let tr = t.get_ref();
            let tf = cx.dur_max(&tr.tf, MAX_TF, "tf", "the paper's time frame is 250us")?;
            if tf < Duration::from_micros(1) {
                return Err(cx.err(
                    tr.tf.span(),
                    "a time frame shorter than 1us is not supported",
                    "the paper uses tf = \"250us\"",
                ));
            }
            let max_lag = match &tr.max_lag {
                Some(v) => cx.int(v, 1, 1000, "max_lag")?,
                None => 4,
            };
            // By default as late as the peer's decoder still reads a stamp
            // right (its clock window), no later.
            const LATE_HINT: &str =
                "give a number of TFs from 0 to 1000, or \"none\" to send every late packet";
            let late_limit = match tr.late_limit.as_ref().map(|v| (v.get_ref(), v.span())) {
                None => Some(max_lag),
                Some((raw::CountOrNone::Word(w), _)) if w.trim() == "none" => None,
                Some((raw::CountOrNone::Count(n), _)) if (0..=1000).contains(n) => Some(*n as u32),
                Some((raw::CountOrNone::Count(n), span)) => {
                    return Err(cx.err(span, format!("late_limit = {n} is out of range"), LATE_HINT))
                }
                Some((raw::CountOrNone::Word(w), span)) => {
                    return Err(cx.err(
                        span,
                        format!("late_limit = \"{w}\" is neither a number of TFs nor \"none\""),
                        LATE_HINT,
                    ))
                }
            };
            Some(TdpParams {
                tf,
                tfs_per_tc: cx.int(&tr.tfs_per_tc, 1, 1_000_000, "tfs_per_tc")?,
                tcs_per_sc: match &tr.tcs_per_sc {
                    Some(v) => cx.int(v, 1, 1_000_000, "tcs_per_sc")?,
                    None => 1,
                },
                padding: tr.padding.unwrap_or(true),
                max_lag,
                late_limit,
                shaper_queue: match &tr.shaper_queue {
                    Some(v) => cx.int(v, 1, 1 << 20, "shaper_queue")?,
                    None => 1000,
                },
                shaper_max_hold: match &tr.shaper_max_hold {
                    None => None,
                    Some(v) => {
                        const HINT: &str =
                            "give \"none\" (no bound, the default) or a duration such as \"2ms\"";
                        match v.get_ref().trim() {
                            "none" => None,
                            t if crate::units::parse_duration_ns(t).is_err() => {
                                return Err(cx.err(
                                    v.span(),
                                    format!("shaper_max_hold = \"{t}\" is neither \"none\" nor a duration"),
                                    HINT,
                                ))
                            }
                            _ => Some(cx.dur_max(v, MAX_SHAPER_HOLD, "shaper_max_hold", HINT)?),
                        }
                    }
                },
            })
        }
    })
}
