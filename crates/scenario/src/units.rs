//! Units in scenario files: durations ("250us", "1.5ms", "10s"), rates
//! ("100Mb/s", "6.4Mbps", "12.5MB/s", "800pps") and sizes. Parsed to exact
//! integers (or checked finite floats) so a scenario means the same thing
//! on every machine.
//!
//! Units are case-sensitive, as SI and IEC 80000-13 write them: `b` is a
//! bit and `B` a byte (8 bits), `M` is mega and `m` milli. A spelling that
//! could be read two ways (`mb/s`, `KB/s`, `Mbps` vs `MBps`) is refused
//! with the list of accepted ones rather than guessed. Numbers are plain
//! decimals with an optional exponent; NaN, infinities, negative values
//! and values beyond the integer range are refused, never clamped.

use qosnet_core::Duration;

/// Split `s` into a finite, non-negative number and the unit after it.
fn split_num<'a>(s: &'a str, what: &str) -> Result<(f64, &'a str), String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("`{s}`: a {what} cannot be negative"));
    }
    let b = t.as_bytes();
    let digits = |mut i: usize| {
        while i < b.len() && (b[i].is_ascii_digit() || (b[i] == b'_' && i > 0 && b[i - 1].is_ascii_digit())) {
            i += 1;
        }
        i
    };
    let mut end = digits(0);
    let int_digits = end;
    if end < b.len() && b[end] == b'.' {
        end = digits(end + 1);
    }
    if end == 0 || (int_digits == 0 && end <= 1) {
        return Err(format!("`{s}` is not a {what}: it does not start with a number"));
    }
    // An exponent only if digits follow ("1e3s"); otherwise `e` starts a unit.
    if end < b.len() && (b[end] == b'e' || b[end] == b'E') {
        let mut k = end + 1;
        if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
            k += 1;
        }
        if k < b.len() && b[k].is_ascii_digit() {
            end = digits(k);
        }
    }
    let (num, unit) = t.split_at(end);
    let clean: String = num.chars().filter(|c| *c != '_').collect();
    let v: f64 = clean
        .parse()
        .map_err(|_| format!("`{s}` is not a {what}: `{num}` is not a number"))?;
    if !v.is_finite() {
        return Err(format!("`{s}`: the number is too large"));
    }
    Ok((v, unit.trim_start()))
}

/// The duration units accepted, for hints.
pub const DURATION_UNITS: &str = "ns, us (or µs), ms, s, min";

/// Parse a duration such as `250us`, `1.5ms`, `10s`, `2min`, `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let ns = parse_duration_ns(s)?;
    if ns >= u64::MAX as f64 {
        return Err(format!(
            "`{s}` is too long to count in nanoseconds (at most about 584 years)"
        ));
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}

/// A duration in nanoseconds, as a float: every check of
/// [`parse_duration`] but the range, so a caller can compare a huge value
/// with its own limit and say what that limit is.
pub fn parse_duration_ns(s: &str) -> Result<f64, String> {
    let (v, unit) = split_num(s, "duration")?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" | "μs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        "" if v == 0.0 => 0.0,
        "" => return Err(format!("`{s}`: a duration needs a unit ({DURATION_UNITS})")),
        "m" => {
            return Err(format!(
                "`{s}`: `m` is ambiguous; write `ms` for milliseconds or `min` for minutes"
            ))
        }
        _ => {
            return Err(format!(
                "`{s}`: unknown time unit `{unit}` (use {DURATION_UNITS})"
            ))
        }
    };
    let ns = v * scale;
    // Below the simulator's 1 ns resolution a non-zero value would become 0.
    if v > 0.0 && ns < 0.5 {
        return Err(format!(
            "`{s}` is shorter than 1ns, the resolution of time in qosnet"
        ));
    }
    Ok(ns)
}

/// A traffic rate: bits per second or packets per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    Bps(f64),
    Pps(f64),
}

impl Rate {
    /// Packets per second for packets of `ip_bytes` (bit rates count IP bytes).
    pub fn pps(self, ip_bytes: f64) -> f64 {
        match self {
            Rate::Pps(p) => p,
            Rate::Bps(b) => b / (8.0 * ip_bytes.max(1.0)),
        }
    }
}

/// The rate units accepted, for hints.
pub const RATE_UNITS: &str = "bits: b/s, kb/s, Mb/s, Gb/s, Tb/s (also bps, kbps, Mbps, Gbps, bit/s, kbit/s, Mbit/s, Gbit/s); bytes: B/s, kB/s, MB/s, GB/s; packets: pps, kpps, Mpps";

/// Parse `100Mb/s`, `100Mbps`, `64kbit/s`, `12.5MB/s` (bytes), `800pps`,
/// `12kpps`. Case matters: `B` is a byte, `b` a bit, `M` mega.
pub fn parse_rate(s: &str) -> Result<Rate, String> {
    let (v, unit) = split_num(s, "rate")?;
    let (mult, rest) = match unit.chars().next() {
        Some('k') if unit.len() > 1 => (1e3, &unit[1..]),
        Some('M') if unit.len() > 1 => (1e6, &unit[1..]),
        Some('G') if unit.len() > 1 => (1e9, &unit[1..]),
        Some('T') if unit.len() > 1 => (1e12, &unit[1..]),
        _ => (1.0, unit),
    };
    let r = match rest {
        "b/s" | "bps" | "bit/s" => Rate::Bps(v * mult),
        "B/s" if mult < 1e12 => Rate::Bps(v * mult * 8.0),
        "pps" if mult <= 1e6 => Rate::Pps(v * mult),
        _ => {
            let why = if unit.is_empty() {
                "a rate needs a unit".to_string()
            } else if unit.ends_with("Bps") {
                format!("`{unit}` is too easily confused with bits per second; write bytes as B/s (`MB/s`) or bits as b/s (`Mb/s`)")
            } else if unit.starts_with(['m', 'g', 'K']) {
                format!("`{unit}`: prefixes are k (kilo), M (mega), G (giga), T (tera) — case matters (`m` is milli)")
            } else if unit.contains("i") && !unit.contains("bit") {
                format!("`{unit}`: binary prefixes (Ki, Mi) are not used for rates")
            } else {
                format!("unknown rate unit `{unit}`")
            };
            return Err(format!("`{s}`: {why}"));
        }
    };
    if v == 0.0 {
        return Err(format!("`{s}`: a rate must be positive"));
    }
    Ok(r)
}

/// Parse a bit rate only (link capacities, profiles): returns bit/s,
/// at least 1.
pub fn parse_bitrate(s: &str) -> Result<u64, String> {
    match parse_rate(s)? {
        Rate::Bps(b) if b >= u64::MAX as f64 => Err(format!("`{s}` is too large")),
        Rate::Bps(b) if b < 0.5 => Err(format!("`{s}` is below 1 bit/s")),
        Rate::Bps(b) => Ok(b.round() as u64),
        Rate::Pps(_) => Err(format!(
            "`{s}`: this rate must be in bit/s or bytes/s, e.g. \"100Mb/s\""
        )),
    }
}

/// `bps` bit/s written the way a human reads it ("1Tb/s", "2.5Gb/s").
pub fn fmt_bitrate(bps: u64) -> String {
    let (v, u) = match bps {
        b if b >= 1_000_000_000_000 => (b as f64 / 1e12, "Tb/s"),
        b if b >= 1_000_000_000 => (b as f64 / 1e9, "Gb/s"),
        b if b >= 1_000_000 => (b as f64 / 1e6, "Mb/s"),
        b if b >= 1_000 => (b as f64 / 1e3, "kb/s"),
        b => (b as f64, "b/s"),
    };
    format!("{}{u}", (v * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("250µs").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("1.5ms").unwrap(), Duration::from_micros(1500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2min").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1e-3s").unwrap(), Duration::from_millis(1));
        assert_eq!(parse_duration("1_000ns").unwrap(), Duration::from_micros(1));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration(".5s").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("10").unwrap_err().contains("unit"));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("5m").unwrap_err().contains("ambiguous"));
        assert!(parse_duration("5S").unwrap_err().contains("unknown time unit"));
        assert!(parse_duration("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration("nans").is_err());
        assert!(parse_duration("infs").is_err());
        assert!(parse_duration("1e400s").is_err());
        assert!(parse_duration("1e12s").unwrap_err().contains("too long"));
        assert!(parse_duration("0.1ns").unwrap_err().contains("shorter than 1ns"));
        assert!(parse_duration(".s").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_bitrate("100Mb/s").unwrap(), 100_000_000);
        assert_eq!(parse_bitrate("6.4Mbps").unwrap(), 6_400_000);
        assert_eq!(parse_bitrate("64kbit/s").unwrap(), 64_000);
        assert_eq!(parse_bitrate("1Tb/s").unwrap(), 1_000_000_000_000);
        assert_eq!(parse_rate("800pps").unwrap(), Rate::Pps(800.0));
        assert_eq!(parse_rate("2Mpps").unwrap(), Rate::Pps(2e6));
        assert!((parse_rate("8kb/s").unwrap().pps(1000.0) - 1.0).abs() < 1e-9);
        assert!(parse_bitrate("800pps").is_err());
        assert!(parse_rate("3 furlongs").is_err());
        assert!(parse_rate("-1Mb/s").unwrap_err().contains("negative"));
        assert!(parse_rate("0Mb/s").unwrap_err().contains("positive"));
        assert!(parse_rate("1e400Mb/s").is_err());
        assert!(parse_bitrate("1e30Gb/s").unwrap_err().contains("too large"));
    }

    #[test]
    fn bytes_and_bits_are_not_confused() {
        assert_eq!(parse_bitrate("10MB/s").unwrap(), 80_000_000);
        assert_eq!(parse_bitrate("10Mb/s").unwrap(), 10_000_000);
        assert_eq!(parse_bitrate("1kB/s").unwrap(), 8_000);
        assert_eq!(parse_bitrate("3B/s").unwrap(), 24);
        for bad in [
            "10mb/s", "10MBps", "10KB/s", "10Kb/s", "10gb/s", "10MiB/s", "10Mib/s", "10mbps",
        ] {
            let e = parse_rate(bad).unwrap_err();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }
}
