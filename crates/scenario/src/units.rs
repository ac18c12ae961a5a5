//! Units in scenario files: durations ("250us", "1.5ms", "10s"), rates
//! ("100Mb/s", "6.4Mbps", "800pps") and sizes. Parsed to exact integers so
//! a scenario means the same thing on every machine.

use qosnet_core::Duration;

fn split_num(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_' || c == 'e' || c == 'E'))
        .unwrap_or(s.len());
    // "e" might start a unit; only accept it as an exponent if digits follow.
    let (num, unit) = s.split_at(end);
    let num: String = num.chars().filter(|c| *c != '_').collect();
    let v: f64 = num.parse().ok()?;
    v.is_finite().then_some((v, unit.trim()))
}

/// Parse a duration such as `250us`, `1.5ms`, `10s`, `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (v, unit) = split_num(s).ok_or_else(|| format!("`{s}` is not a duration"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "min" => 60e9,
        "" if v == 0.0 => 0.0,
        _ => {
            return Err(format!(
                "`{s}`: unknown or missing time unit (use ns, us, ms, s or min, e.g. \"250us\")"
            ))
        }
    };
    if v < 0.0 {
        return Err(format!("`{s}`: durations cannot be negative"));
    }
    Ok(Duration::from_nanos((v * scale).round() as u64))
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

/// Parse `100Mb/s`, `100Mbps`, `64kbit/s`, `1Gb/s`, `800pps`, `12kpps`.
pub fn parse_rate(s: &str) -> Result<Rate, String> {
    let (v, unit) = split_num(s).ok_or_else(|| format!("`{s}` is not a rate"))?;
    let u = unit.to_ascii_lowercase();
    let (mult, rest) = match u.chars().next() {
        Some('k') => (1e3, &u[1..]),
        Some('m') => (1e6, &u[1..]),
        Some('g') => (1e9, &u[1..]),
        _ => (1.0, &u[..]),
    };
    let r = match rest {
        "b/s" | "bps" | "bit/s" | "bits/s" => Rate::Bps(v * mult),
        "pps" | "p/s" => Rate::Pps(v * mult),
        _ => {
            return Err(format!(
                "`{s}`: unknown rate unit (use b/s, kb/s, Mb/s, Gb/s or pps, e.g. \"100Mb/s\")"
            ))
        }
    };
    if v <= 0.0 {
        return Err(format!("`{s}`: a rate must be positive"));
    }
    Ok(r)
}

/// Parse a bit rate only (link capacities): returns bit/s.
pub fn parse_bitrate(s: &str) -> Result<u64, String> {
    match parse_rate(s)? {
        Rate::Bps(b) => Ok(b.round() as u64),
        Rate::Pps(_) => Err(format!("`{s}`: a capacity must be in bit/s, e.g. \"100Mb/s\"")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("1.5ms").unwrap(), Duration::from_micros(1500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("10").unwrap_err().contains("unit"));
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_bitrate("100Mb/s").unwrap(), 100_000_000);
        assert_eq!(parse_bitrate("6.4Mbps").unwrap(), 6_400_000);
        assert_eq!(parse_rate("800pps").unwrap(), Rate::Pps(800.0));
        assert!((parse_rate("8kb/s").unwrap().pps(1000.0) - 1.0).abs() < 1e-9);
        assert!(parse_bitrate("800pps").is_err());
        assert!(parse_rate("3 furlongs").is_err());
        assert!(parse_rate("-1Mb/s").is_err());
    }
}
