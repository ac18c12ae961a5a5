//! DSCP names and the DSCP → PHB map of a DiffServ node.
//!
//! - RFC 2474 §3, §4.2.2: the DS field's upper six bits are the DSCP;
//!   class selector codepoints `xxx000` (CS0..CS7) keep IP precedence
//!   order, CS0 (`000000`) is the default PHB (best effort).
//! - RFC 2597 §6: AF class x, drop precedence y is DSCP `8x + 2y`
//!   (AF11 = 10 … AF43 = 38); higher y is dropped first.
//! - RFC 3246 §1.2: EF is 46; RFC 5865 adds VOICE-ADMIT (VA, 44), an EF
//!   codepoint for admission-controlled traffic.
//! - RFC 4594 §3: the service classes these codepoints are recommended for.
//! - RFC 2475 §2.3.1: a behaviour-aggregate classifier selects on the DSCP
//!   alone; RFC 2697/2698 §3: a colour-aware meter reads a packet's colour
//!   from its DSCP, which [`Phb::color`] derives from the drop precedence.
//! - Lai, DEGEB (seed 004) §2.1: a core router (DSCR) "performs only the
//!   corresponding PHB" — i.e. reads the DSCP and looks the PHB up, which
//!   is [`PhbMap::get`]; Table 4-3 lists the DS bytes the paper exchanged
//!   (EF 0xb8, AF11 0x28, …: those are whole TOS bytes, DSCP = TOS >> 2).

use crate::packet::Color;

/// Expedited forwarding (RFC 3246).
pub const EF: u8 = 46;
/// VOICE-ADMIT (RFC 5865): EF treatment for admitted voice.
pub const VA: u8 = 44;
/// Default PHB, best effort (RFC 2474 §4.1).
pub const BE: u8 = 0;

/// DSCP of AF class `class` (1..=4), drop precedence `dp` (1..=3).
pub const fn af(class: u8, dp: u8) -> u8 {
    8 * class + 2 * dp
}

/// DSCP of class selector `n` (0..=7).
pub const fn cs(n: u8) -> u8 {
    8 * n
}

/// The AF (class, drop precedence) of a DSCP, if it is an AF codepoint.
pub fn af_of(d: u8) -> Option<(u8, u8)> {
    let (class, low) = (d >> 3, d & 7);
    ((1..=4).contains(&class) && matches!(low, 2 | 4 | 6)).then_some((class, low / 2))
}

/// Every name [`parse_dscp`] accepts, for error messages and docs.
pub const DSCP_NAMES: &str = "EF, VA, AF11..AF13, AF21..AF23, AF31..AF33, AF41..AF43, CS0..CS7, \
                              BE or DF (= 0), or a number 0..63";

/// Parse a DSCP name (case-insensitive) or a decimal number 0..=63.
///
/// Hexadecimal is refused on purpose: the paper's Table 4-3 writes whole
/// TOS bytes in hex (AF11 = 0x28), and reading 0x28 as a DSCP would give
/// CS5 instead of AF11. The error says so.
pub fn parse_dscp(s: &str) -> Result<u8, String> {
    let t = s.trim();
    let u = t.to_ascii_uppercase();
    let b = u.as_bytes();
    let digit = |c: u8| c.is_ascii_digit().then(|| c - b'0');
    let named = match u.as_str() {
        "EF" => Some(EF),
        "VA" => Some(VA),
        "BE" | "DF" => Some(BE),
        _ if b.len() == 4 && u.starts_with("AF") => match (digit(b[2]), digit(b[3])) {
            (Some(c @ 1..=4), Some(d @ 1..=3)) => Some(af(c, d)),
            _ => None,
        },
        _ if b.len() == 3 && u.starts_with("CS") => match digit(b[2]) {
            Some(n @ 0..=7) => Some(cs(n)),
            _ => None,
        },
        _ => None,
    };
    if let Some(d) = named {
        return Ok(d);
    }
    if u.starts_with("0X") {
        return Err(format!(
            "DSCP `{t}`: hexadecimal looks like a TOS byte (the DSCP is TOS >> 2, e.g. 0x28 = AF11); \
             give a name or a decimal DSCP: {DSCP_NAMES}"
        ));
    }
    match t.parse::<u8>() {
        Ok(d) if d < 64 => Ok(d),
        _ => Err(format!("unknown DSCP `{t}`; valid: {DSCP_NAMES}")),
    }
}

/// The standard name of a DSCP (`"AF11"`, `"EF"`, `"CS6"`, `"BE"` for 0),
/// else its decimal value, so every DSCP has a stable counter name.
pub fn dscp_name(d: u8) -> String {
    match d {
        BE => "BE".into(),
        EF => "EF".into(),
        VA => "VA".into(),
        _ => {
            if let Some((c, p)) = af_of(d) {
                format!("AF{c}{p}")
            } else if d < 64 && d & 7 == 0 {
                format!("CS{}", d / 8)
            } else {
                d.to_string()
            }
        }
    }
}

/// A per-hop behaviour group of the node's output scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phb {
    /// Routing and network control traffic (RFC 4594 §3.1, CS6/CS7).
    NetworkControl,
    /// Expedited forwarding (RFC 3246).
    Ef,
    /// Assured forwarding class `class` (1..=4) with drop precedence `dp`
    /// (1..=3) (RFC 2597). `dp` 0 in a configuration means "take the drop
    /// precedence from the DSCP" (see [`PhbMap::set`]).
    Af { class: u8, dp: u8 },
    /// Default forwarding (RFC 2474 §4.1).
    Be,
}

/// `meta.class` values set from the PHB; [`super::DsSched`] serves them.
pub const CLASS_NC: u16 = 0;
pub const CLASS_EF: u16 = 1;
pub const CLASS_AF1: u16 = 2;
pub const CLASS_AF2: u16 = 3;
pub const CLASS_AF3: u16 = 4;
pub const CLASS_AF4: u16 = 5;
pub const CLASS_BE: u16 = 6;
/// Number of classes (`CLASS_NC..=CLASS_BE`).
pub const CLASSES: usize = 7;

impl Phb {
    /// The scheduler class of this PHB. An AF class outside 1..=4 (which
    /// [`PhbMap::set`] never stores) falls back to BE rather than panic.
    pub fn class(self) -> u16 {
        match self {
            Phb::NetworkControl => CLASS_NC,
            Phb::Ef => CLASS_EF,
            Phb::Af { class: c @ 1..=4, .. } => CLASS_AF1 + (c as u16 - 1),
            Phb::Af { .. } | Phb::Be => CLASS_BE,
        }
    }

    /// Drop precedence as a colour (RFC 2597 §2 with RFC 2697/2698's
    /// green/yellow/red): dp1 green, dp2 yellow, dp3 red; non-AF green.
    pub fn color(self) -> Color {
        match self {
            Phb::Af { dp: 2, .. } => Color::Yellow,
            Phb::Af { dp: 3, .. } => Color::Red,
            _ => Color::Green,
        }
    }

    /// A PHB name of a configuration: `EF`, `AF1`..`AF4` (drop precedence
    /// from the DSCP it is set for: `dp` 0, resolved by [`PhbMap::set`]),
    /// `AF11`..`AF43` (explicit), `BE` (also `DF`), `NC`.
    pub fn parse(s: &str) -> Result<Phb, String> {
        let u = s.trim().to_ascii_uppercase();
        let b = u.as_bytes();
        let digit = |c: u8| c.is_ascii_digit().then(|| c - b'0');
        let p = match u.as_str() {
            "EF" => Some(Phb::Ef),
            "BE" | "DF" => Some(Phb::Be),
            "NC" => Some(Phb::NetworkControl),
            _ if u.starts_with("AF") && b.len() == 3 => match digit(b[2]) {
                Some(c @ 1..=4) => Some(Phb::Af { class: c, dp: 0 }),
                _ => None,
            },
            _ if u.starts_with("AF") && b.len() == 4 => match (digit(b[2]), digit(b[3])) {
                (Some(c @ 1..=4), Some(d @ 1..=3)) => Some(Phb::Af { class: c, dp: d }),
                _ => None,
            },
            _ => None,
        };
        p.ok_or_else(|| {
            format!(
                "unknown PHB `{}`; valid: EF, AF1..AF4, AF11..AF43, BE, NC",
                s.trim()
            )
        })
    }
}

/// Free-function form of [`Phb::parse`].
pub fn parse_phb(s: &str) -> Result<Phb, String> {
    Phb::parse(s)
}

/// DSCP → PHB table of a node (RFC 2474 §3: "a DS node MUST … map each
/// codepoint to some PHB").
///
/// The default map:
/// - EF (46) and VA (44) → [`Phb::Ef`] (RFC 3246, RFC 5865);
/// - AF11..AF43 → [`Phb::Af`] with their class and drop precedence
///   (RFC 2597);
/// - CS6 and CS7 → [`Phb::NetworkControl`] (RFC 4594 §3.1-3.2: routing and
///   reserved network control);
/// - everything else, including CS1..CS5 and unassigned codepoints → BE.
///
/// Against RFC 4594's full table this is deliberately smaller: 4594 gives
/// CS5 (signalling), CS4 (real-time interactive), CS3 (broadcast video) and
/// CS2 (OAM) their own treatments, and CS1 a *lower* one than BE. The
/// DEGEB node (and this scheduler) has only NC, EF, AF1-4 and BE, and
/// giving unconditioned CS traffic priority would let anything that sets
/// precedence bits jump the queue. Equal treatment for CS0..CS5 still
/// satisfies RFC 2474 §4.2.2.2, which only asks that a higher class
/// selector be treated *no worse* than a lower one. RFC 2474 §3 also says
/// unknown codepoints get the default PHB, which is what BE is here.
/// Override any entry with [`PhbMap::set`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhbMap {
    map: [Phb; 64],
}

impl Default for PhbMap {
    fn default() -> Self {
        let mut map = [Phb::Be; 64];
        for (d, p) in map.iter_mut().enumerate() {
            let d = d as u8;
            *p = if d == EF || d == VA {
                Phb::Ef
            } else if let Some((class, dp)) = af_of(d) {
                Phb::Af { class, dp }
            } else if d == cs(6) || d == cs(7) {
                Phb::NetworkControl
            } else {
                Phb::Be
            };
        }
        PhbMap { map }
    }
}

impl PhbMap {
    /// Map `dscp` (low six bits) to `phb`. An AF PHB with `dp` 0 takes the
    /// drop precedence of `dscp` if it is an AF codepoint, else 1 (lowest
    /// drop precedence: re-mapping e.g. CS1 into AF1 should not make it
    /// the first to go). An AF class outside 1..=4 or a `dp` above 3 is
    /// stored as BE, since `set` cannot fail; [`Phb::parse`] never
    /// produces one.
    pub fn set(&mut self, dscp: u8, phb: Phb) {
        let d = dscp & 0x3f;
        let phb = match phb {
            Phb::Af {
                class: c @ 1..=4,
                dp: 0,
            } => Phb::Af {
                class: c,
                dp: af_of(d).map_or(1, |(_, dp)| dp),
            },
            Phb::Af {
                class: 1..=4,
                dp: 1..=3,
            } => phb,
            Phb::Af { .. } => Phb::Be,
            other => other,
        };
        self.map[d as usize] = phb;
    }

    /// Parse both sides (`"CS1"`, `"AF1"`) and [`set`](Self::set).
    pub fn set_named(&mut self, dscp: &str, phb: &str) -> Result<(), String> {
        let d = parse_dscp(dscp)?;
        self.set(d, Phb::parse(phb)?);
        Ok(())
    }

    /// The PHB of `dscp` (low six bits).
    pub fn get(&self, dscp: u8) -> Phb {
        self.map[(dscp & 0x3f) as usize]
    }

    /// [`Phb::parse`], here so configuration code finds it beside `set`.
    pub fn parse_phb(s: &str) -> Result<Phb, String> {
        Phb::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_for_every_dscp() {
        for d in 0..64u8 {
            assert_eq!(parse_dscp(&dscp_name(d)), Ok(d), "{d}");
        }
        assert_eq!(dscp_name(46), "EF");
        assert_eq!(dscp_name(10), "AF11");
        assert_eq!(dscp_name(38), "AF43");
        assert_eq!(dscp_name(48), "CS6");
        assert_eq!(dscp_name(0), "BE");
        assert_eq!(dscp_name(13), "13");
        assert_eq!(dscp_name(200), "200");
    }

    #[test]
    fn parses_names_numbers_and_refuses_the_rest() {
        assert_eq!(parse_dscp("ef"), Ok(46));
        assert_eq!(parse_dscp(" VA "), Ok(44));
        assert_eq!(parse_dscp("DF"), Ok(0));
        assert_eq!(parse_dscp("cs0"), Ok(0));
        assert_eq!(parse_dscp("CS7"), Ok(56));
        assert_eq!(parse_dscp("AF23"), Ok(22));
        assert_eq!(parse_dscp("63"), Ok(63));
        for bad in ["AF14", "AF51", "AF1", "CS8", "64", "-1", "", "EFF"] {
            let e = parse_dscp(bad).unwrap_err();
            assert!(e.contains("AF11") && e.contains("CS0..CS7"), "{bad}: {e}");
        }
        assert!(parse_dscp("0x28").unwrap_err().contains("TOS"));
    }

    #[test]
    fn paper_table_4_3_tos_bytes_are_these_dscps() {
        // Table 4-3 (Lai, DEGEB §4.3) lists whole DS bytes.
        for (name, tos) in [
            ("EF", 0xb8),
            ("AF11", 0x28),
            ("AF12", 0x30),
            ("AF13", 0x38),
            ("AF21", 0x48),
            ("AF22", 0x50),
            ("AF23", 0x58),
            ("AF31", 0x68),
            ("AF32", 0x70),
            ("AF33", 0x78),
            ("BE", 0x00),
        ] {
            assert_eq!(parse_dscp(name).unwrap() << 2, tos, "{name}");
        }
    }

    #[test]
    fn default_map_and_classes() {
        let m = PhbMap::default();
        assert_eq!(m.get(EF), Phb::Ef);
        assert_eq!(m.get(VA), Phb::Ef);
        assert_eq!(m.get(af(3, 2)), Phb::Af { class: 3, dp: 2 });
        assert_eq!(m.get(cs(6)), Phb::NetworkControl);
        assert_eq!(m.get(cs(7)), Phb::NetworkControl);
        for d in [0, cs(1), cs(5), 13, 63] {
            assert_eq!(m.get(d), Phb::Be, "{d}");
        }
        assert_eq!(Phb::NetworkControl.class(), CLASS_NC);
        assert_eq!(Phb::Ef.class(), CLASS_EF);
        assert_eq!(Phb::Af { class: 1, dp: 3 }.class(), CLASS_AF1);
        assert_eq!(Phb::Af { class: 4, dp: 1 }.class(), CLASS_AF4);
        assert_eq!(Phb::Af { class: 9, dp: 1 }.class(), CLASS_BE);
        assert_eq!(Phb::Be.class(), CLASS_BE);
        assert_eq!(Phb::Af { class: 2, dp: 1 }.color(), Color::Green);
        assert_eq!(Phb::Af { class: 2, dp: 2 }.color(), Color::Yellow);
        assert_eq!(Phb::Af { class: 2, dp: 3 }.color(), Color::Red);
        assert_eq!(Phb::Ef.color(), Color::Green);
    }

    #[test]
    fn overrides_take_drop_precedence_from_the_dscp() {
        let mut m = PhbMap::default();
        m.set_named("AF12", "AF4").unwrap();
        assert_eq!(m.get(af(1, 2)), Phb::Af { class: 4, dp: 2 });
        m.set_named("CS1", "AF1").unwrap();
        assert_eq!(m.get(cs(1)), Phb::Af { class: 1, dp: 1 });
        m.set_named("CS2", "af23").unwrap();
        assert_eq!(m.get(cs(2)), Phb::Af { class: 2, dp: 3 });
        m.set_named("EF", "be").unwrap();
        assert_eq!(m.get(EF), Phb::Be);
        m.set(cs(3), Phb::Af { class: 7, dp: 1 });
        assert_eq!(m.get(cs(3)), Phb::Be);
        assert_eq!(PhbMap::parse_phb("NC"), Ok(Phb::NetworkControl));
        assert!(m.set_named("AF11", "AF5").unwrap_err().contains("EF, AF1..AF4"));
        assert!(m.set_named("XX", "EF").unwrap_err().contains("unknown DSCP"));
    }
}
