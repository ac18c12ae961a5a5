//! DEGEB's numbers (seed 004), read from the scenarios' `[paper]` tables
//! and checked once, so the printing code looks them up by class or claim:
//! Tables 4-1 and 4-3 from `t1-edge.toml`, the abstract's reading of
//! Figure 4 from `t4-latency.toml`.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Context, Result};
use qosnet_scenario::{PaperCell, PaperTable};

use super::SCENARIOS;
use crate::run;

/// One DS class of Tables 4-1 and 4-3.
#[derive(Clone, Debug)]
pub(super) struct Class {
    pub name: String,
    /// Table 4-1: shaped total and measured bandwidth (Mb/s), loss (%).
    pub shaped_mbps: f64,
    pub measured_mbps: f64,
    pub loss_pct: f64,
    /// Table 4-3: the TOS byte sent, and the TOS bytes received out of
    /// profile (in profile the paper received what was sent).
    pub tos: u8,
    pub out_received: Vec<u8>,
}

/// The claims of Figure 4's summary (rows of table `figure-4`).
pub(super) const CLAIMS: [&str; 5] = [
    "ef_rtt_128_congested",
    "be_rtt_128_congested",
    "size_growth_congested",
    "size_growth_idle",
    "topology_growth",
];

pub(super) struct Numbers {
    /// In the order of Table 4-1.
    pub classes: Vec<Class>,
    /// Claim → (as the paper states it, its number in ms).
    pub claims: BTreeMap<String, (String, f64)>,
}

impl Numbers {
    /// The claim as the paper states it ("~7 ms").
    pub fn claim(&self, key: &str) -> &str {
        self.claims.get(key).map(|c| c.0.as_str()).unwrap_or("?")
    }
    /// Class names in table order.
    pub fn class_names(&self) -> Vec<&str> {
        self.classes.iter().map(|c| c.name.as_str()).collect()
    }
}

fn num(t: &PaperTable, key: &str, col: &str) -> Result<f64> {
    t.get(key, col)
        .and_then(PaperCell::as_f64)
        .ok_or_else(|| anyhow!("table {}: row {key} has no number in column {col}", t.name))
}

fn text<'a>(t: &'a PaperTable, key: &str, col: &str) -> Result<&'a str> {
    t.get(key, col)
        .and_then(PaperCell::as_str)
        .ok_or_else(|| anyhow!("table {}: row {key} has no text in column {col}", t.name))
}

/// "0x28, 0x30, 0x38" → [0x28, 0x30, 0x38].
fn tos_list(s: &str) -> Result<Vec<u8>> {
    s.split(',')
        .map(|x| {
            let x = x.trim();
            x.strip_prefix("0x")
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| anyhow!("`{x}` is not a TOS byte such as 0x28"))
        })
        .collect()
}

/// TOS bytes as the tables print them: "0x28 0x30 0x38".
pub(super) fn tos_text(t: &[u8]) -> String {
    t.iter()
        .map(|b| format!("0x{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Read and check the paper's numbers.
pub(super) fn load() -> Result<Numbers> {
    let t1 = run::load(&SCENARIOS[0], &[])?;
    let t4 = run::load(&SCENARIOS[1], &[])?;
    let table = |sc: &qosnet_scenario::Scenario, name: &str| -> Result<PaperTable> {
        sc.paper
            .as_ref()
            .and_then(|p| p.table(name))
            .cloned()
            .ok_or_else(|| anyhow!("{}: no [[paper.table]] named {name}", sc.source))
    };
    let (t41, t43, f4) = (table(&t1, "4-1")?, table(&t1, "4-3")?, table(&t4, "figure-4")?);
    let mut classes = Vec::new();
    for k in t41.keys() {
        let c = (|| -> Result<Class> {
            let tos = tos_list(text(&t43, k, "in_sent")?)?;
            let [tos] = tos[..] else {
                bail!("one TOS byte sent")
            };
            Ok(Class {
                name: k.to_string(),
                shaped_mbps: num(&t41, k, "shaped")?,
                measured_mbps: num(&t41, k, "measured")?,
                loss_pct: num(&t41, k, "loss")?,
                tos,
                out_received: tos_list(text(&t43, k, "out_received")?)?,
            })
        })()
        .with_context(|| format!("{}: paper tables 4-1 and 4-3, class {k}", t1.source))?;
        classes.push(c);
    }
    if t43.keys().count() != classes.len() {
        bail!("{}: tables 4-1 and 4-3 list different classes", t1.source);
    }
    let mut claims = BTreeMap::new();
    for k in CLAIMS {
        let c = (text(&f4, k, "paper")?.to_string(), num(&f4, k, "ms")?);
        claims.insert(k.to_string(), c);
    }
    Ok(Numbers { classes, claims })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers load, and they are the paper's own story: each class's
    /// TOS byte is its RFC 2597/3246 codepoint, sent unchanged in profile;
    /// out of profile the cascade keeps the sent TOS first and only adds
    /// higher drop precedences of the same AF class (AFx1 → AFx2 → AFx3);
    /// the measured bandwidth is within "some burst flow allowance" (§4.1,
    /// here 5 %) of the shaped total; the EF claim is an order of magnitude
    /// below the BE one.
    #[test]
    fn paper_numbers_load_and_hold_together() {
        let n = load().unwrap();
        let t1 = run::load(&SCENARIOS[0], &[]).unwrap();
        let t43 = t1.paper.as_ref().and_then(|p| p.table("4-3")).unwrap();
        assert_eq!(
            n.class_names(),
            ["EF", "AF11", "AF12", "AF13", "AF21", "AF22", "AF23", "AF31", "AF32", "AF33", "BE"]
        );
        for c in &n.classes {
            let dscp = qosnet_core::diffserv::parse_dscp(&c.name).unwrap();
            assert_eq!(c.tos, dscp << 2, "{}", c.name);
            for col in ["in_sent", "in_received", "out_sent"] {
                assert_eq!(
                    tos_list(text(t43, &c.name, col).unwrap()).unwrap(),
                    [c.tos],
                    "{}",
                    c.name
                );
            }
            assert_eq!(c.out_received[0], c.tos, "{}", c.name);
            for w in c.out_received.windows(2) {
                assert_eq!(w[1], w[0] + 8, "{}: {:?}", c.name, c.out_received);
            }
            assert!(
                (c.measured_mbps - c.shaped_mbps).abs() <= 0.05 * c.shaped_mbps,
                "{}",
                c.name
            );
            assert!(c.loss_pct > 0.0 && c.loss_pct < 100.0);
        }
        assert_eq!(tos_text(&n.classes[1].out_received), "0x28 0x30 0x38");
        for k in CLAIMS {
            assert!(n.claims[k].1 > 0.0 && !n.claim(k).is_empty(), "{k}");
        }
        assert!(n.claims["ef_rtt_128_congested"].1 * 10.0 <= n.claims["be_rtt_128_congested"].1);
    }

    #[test]
    fn tos_lists_parse_or_fail_clearly() {
        assert_eq!(tos_list("0x48, 0x50,0x58").unwrap(), [0x48, 0x50, 0x58]);
        assert!(tos_list("0x48; 0x50").is_err() && tos_list("48").is_err());
    }
}
