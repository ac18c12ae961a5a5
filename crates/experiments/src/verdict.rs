//! Verdicts: each claim and figure of a paper beside qosnet's, decided from
//! the run that just happened.
//!
//! An experiment returns its verdicts as data ([`Verdicts`]); the text
//! table `qosnet reproduce` ends with, `verdicts.json` under `--out` and
//! `--strict` are views of those rows, so no verdict is ever typed by hand.
//!
//! Two kinds of row:
//! - a **claim**: a conclusion of the paper ("TDP jitter stays below two
//!   TFs"), decided by a predicate the experiment computes from its runs;
//! - a **figure**: a number the paper gives, beside qosnet's, within a
//!   tolerance (relative, or a bound: at most / at least). A figure that
//!   differs for a reason the docs show by experiment says where
//!   ([`Verdict::explained`]).
//!
//! A live row whose claim the machine's measured noise makes untestable
//! says so and why ([`Verdict::untestable_if`]) instead of HOLDS or
//! DIFFERS. `--strict` fails on a claim that differs and on a figure that
//! differs without an explanation.

use std::fmt::{self, Display, Write as _};

use serde::Serialize;

/// What a row decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "verdict", content = "why")]
pub enum Outcome {
    Holds,
    Differs,
    /// The run could not decide: why (a measured stall, missing data).
    Untestable(String),
}

/// A conclusion, or a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Claim,
    Figure,
}

/// One row: an artefact's claim or figure, the paper's side, qosnet's side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// The paper's table or figure ("Table I", "Figure 5"), or section.
    pub artefact: String,
    pub kind: Kind,
    /// What is compared, in a few words.
    pub what: String,
    /// The paper's claim or figure, as text.
    pub paper: String,
    /// qosnet's, as text.
    pub qosnet: String,
    /// How close counts as the same ("±15 %", "at most", "claim").
    pub tolerance: String,
    pub outcome: Outcome,
    /// Where the docs show, by experiment, why a differing figure differs.
    pub explained: Option<String>,
}

impl Verdict {
    /// The docs anchor (`docs/paper-tdp.md#fifo-jitter`) that shows by
    /// experiment why this figure differs from the paper's. Shown only
    /// when the row differs; `--strict` then accepts it.
    pub fn explained(&mut self, anchor: &str) -> &mut Self {
        self.explained = Some(anchor.to_string());
        self
    }

    /// When the run measured noise that makes this row meaningless
    /// (`Some(why)`), it is UNTESTABLE with that reason, whatever the
    /// comparison said.
    pub fn untestable_if(&mut self, why: Option<String>) -> &mut Self {
        if let Some(w) = why {
            self.outcome = Outcome::Untestable(w);
        }
        self
    }

    /// Whether `--strict` fails on this row: a claim that differs, or a
    /// figure that differs with no explanation.
    pub fn fails_strict(&self) -> bool {
        self.outcome == Outcome::Differs && (self.kind == Kind::Claim || self.explained.is_none())
    }

    fn verdict_text(&self) -> String {
        match (&self.outcome, &self.explained) {
            (Outcome::Holds, _) => "HOLDS".into(),
            (Outcome::Differs, Some(a)) if self.kind == Kind::Figure => format!("DIFFERS (explained: {a})"),
            (Outcome::Differs, _) => "DIFFERS".into(),
            (Outcome::Untestable(w), _) => format!("UNTESTABLE: {w}"),
        }
    }
}

/// An experiment's rows, in the order it found them, and notes printed
/// beside them (a live run's measured noise).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Verdicts {
    pub rows: Vec<Verdict>,
    /// Lines printed under the table: what the machine did during a live
    /// run, what the experiment's choices were.
    pub notes: Vec<String>,
}

/// Counts of each verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub holds: usize,
    pub differs: usize,
    /// Of `differs`: figures whose difference the docs explain.
    pub explained: usize,
    pub untestable: usize,
}

impl Verdicts {
    fn push(&mut self, v: Verdict) -> &mut Verdict {
        self.rows.push(v);
        self.rows.last_mut().expect("just pushed")
    }

    /// A conclusion of the paper; `holds` is computed from the run.
    pub fn claim(
        &mut self,
        artefact: &str,
        what: &str,
        paper: impl Display,
        qosnet: impl Display,
        holds: bool,
    ) -> &mut Verdict {
        self.push(Verdict {
            artefact: artefact.into(),
            kind: Kind::Claim,
            what: what.into(),
            paper: paper.to_string(),
            qosnet: qosnet.to_string(),
            tolerance: "claim".into(),
            outcome: if holds { Outcome::Holds } else { Outcome::Differs },
            explained: None,
        })
    }

    /// A number the paper gives: holds when qosnet's is within `rel_tol`
    /// (0.15 = ±15 %) of the paper's. A non-finite figure of qosnet's
    /// (no packet measured) differs.
    pub fn figure(
        &mut self,
        artefact: &str,
        what: &str,
        paper: f64,
        qosnet: f64,
        unit: &str,
        rel_tol: f64,
    ) -> &mut Verdict {
        let dev = deviation(paper, qosnet);
        let holds = qosnet.is_finite() && (qosnet - paper).abs() <= rel_tol * paper.abs();
        let ours = match dev {
            Some(d) if d.abs() < 0.5 => format!("{} (±0 %)", num(qosnet, unit)),
            Some(d) => format!("{} ({d:+.0} %)", num(qosnet, unit)),
            None => num(qosnet, unit),
        };
        self.push(Verdict {
            artefact: artefact.into(),
            kind: Kind::Figure,
            what: what.into(),
            paper: num(paper, unit),
            qosnet: ours,
            tolerance: format!("±{} %", trim(rel_tol * 100.0)),
            outcome: if holds { Outcome::Holds } else { Outcome::Differs },
            explained: None,
        })
    }

    /// A bound the paper states: holds when qosnet's figure is at most
    /// `bound`.
    pub fn at_most(
        &mut self,
        artefact: &str,
        what: &str,
        bound: f64,
        qosnet: f64,
        unit: &str,
    ) -> &mut Verdict {
        self.bound(artefact, what, bound, qosnet, unit, true)
    }

    /// A floor the paper states: holds when qosnet's figure is at least
    /// `floor`.
    pub fn at_least(
        &mut self,
        artefact: &str,
        what: &str,
        floor: f64,
        qosnet: f64,
        unit: &str,
    ) -> &mut Verdict {
        self.bound(artefact, what, floor, qosnet, unit, false)
    }

    fn bound(
        &mut self,
        artefact: &str,
        what: &str,
        limit: f64,
        qosnet: f64,
        unit: &str,
        most: bool,
    ) -> &mut Verdict {
        let holds = qosnet.is_finite() && if most { qosnet <= limit } else { qosnet >= limit };
        self.push(Verdict {
            artefact: artefact.into(),
            kind: Kind::Figure,
            what: what.into(),
            paper: format!("{} {}", if most { "≤" } else { "≥" }, num(limit, unit)),
            qosnet: num(qosnet, unit),
            tolerance: if most { "at most" } else { "at least" }.into(),
            outcome: if holds { Outcome::Holds } else { Outcome::Differs },
            explained: None,
        })
    }

    /// A claim this run could not decide, and why.
    pub fn untestable(
        &mut self,
        artefact: &str,
        what: &str,
        paper: impl Display,
        qosnet: impl Display,
        why: &str,
    ) -> &mut Verdict {
        self.claim(artefact, what, paper, qosnet, false)
            .untestable_if(Some(why.to_string()))
    }

    /// A line printed under the table.
    pub fn note(&mut self, line: impl Into<String>) {
        self.notes.push(line.into());
    }

    /// Another part's rows after these.
    pub fn extend(&mut self, other: Verdicts) {
        self.rows.extend(other.rows);
        self.notes.extend(other.notes);
    }

    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for r in &self.rows {
            match r.outcome {
                Outcome::Holds => s.holds += 1,
                Outcome::Differs => {
                    s.differs += 1;
                    if !r.fails_strict() {
                        s.explained += 1;
                    }
                }
                Outcome::Untestable(_) => s.untestable += 1,
            }
        }
        s
    }

    /// The rows `--strict` fails on.
    pub fn strict_failures(&self) -> impl Iterator<Item = &Verdict> {
        self.rows.iter().filter(|r| r.fails_strict())
    }

    /// The table `qosnet reproduce` ends with.
    pub fn table(&self, title: &str) -> String {
        let mut s = format!("\n{title}\n");
        if self.rows.is_empty() {
            s.push_str("(this experiment computes no verdicts)\n");
        }
        let head = [
            "artefact",
            "kind",
            "what",
            "paper",
            "qosnet",
            "tolerance",
            "verdict",
        ];
        let cells: Vec<[String; 7]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.artefact.clone(),
                    match r.kind {
                        Kind::Claim => "claim".into(),
                        Kind::Figure => "figure".into(),
                    },
                    r.what.clone(),
                    r.paper.clone(),
                    r.qosnet.clone(),
                    r.tolerance.clone(),
                    r.verdict_text(),
                ]
            })
            .collect();
        if !cells.is_empty() {
            let mut w = head.map(|h| h.chars().count());
            for c in &cells {
                for (i, x) in c.iter().enumerate() {
                    w[i] = w[i].max(x.chars().count());
                }
            }
            let line = |c: &[&str]| {
                let mut l = String::new();
                for (i, x) in c.iter().enumerate() {
                    if i + 1 == c.len() {
                        l.push_str(x);
                    } else {
                        let pad = w[i] - x.chars().count();
                        let _ = write!(l, "{x}{}  ", " ".repeat(pad));
                    }
                }
                l.trim_end().to_string() + "\n"
            };
            s += &line(&head);
            for c in &cells {
                s += &line(&c.each_ref().map(String::as_str));
            }
        }
        let m = self.summary();
        let _ = writeln!(
            s,
            "summary: {} HOLDS, {} DIFFERS ({} explained in the docs), {} UNTESTABLE",
            m.holds, m.differs, m.explained, m.untestable
        );
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }
}

/// Signed deviation of `q` from `p` in per cent, where it means something.
fn deviation(p: f64, q: f64) -> Option<f64> {
    (p != 0.0 && p.is_finite() && q.is_finite()).then(|| (q - p) / p.abs() * 100.0)
}

/// A number with three significant figures and its unit.
fn num(x: f64, unit: &str) -> String {
    if !x.is_finite() {
        return "none".into();
    }
    let a = x.abs();
    let s = if a == 0.0 || a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        // Three significant figures below 1.
        let digits = (-a.log10().floor()) as usize + 2;
        format!("{x:.digits$}")
    };
    if unit.is_empty() {
        s
    } else if unit == "%" {
        format!("{s} %")
    } else {
        format!("{s} {unit}")
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// The `--strict` failure: which rows differ.
#[derive(Debug)]
pub struct StrictFailure {
    pub experiment: String,
    pub rows: Vec<String>,
}

impl Display for StrictFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--strict: {} of {}'s verdicts differ from the paper (or theory) without an explanation in the docs: {}",
            self.rows.len(),
            self.experiment,
            self.rows.join("; ")
        )
    }
}

impl std::error::Error for StrictFailure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_hold_inside_their_tolerance_only() {
        let mut v = Verdicts::default();
        v.figure("T", "a", 0.18, 0.20, "ms", 0.15);
        v.figure("T", "b", 0.18, 0.21, "ms", 0.15);
        v.figure("T", "c", 0.18, 0.155, "ms", 0.15);
        v.figure("T", "d", 0.18, f64::NAN, "ms", 0.15);
        let o: Vec<_> = v.rows.iter().map(|r| r.outcome.clone()).collect();
        assert_eq!(
            o,
            [Outcome::Holds, Outcome::Differs, Outcome::Holds, Outcome::Differs]
        );
        assert_eq!(v.rows[0].qosnet, "0.200 ms (+11 %)");
        assert_eq!(v.rows[0].paper, "0.180 ms");
        assert_eq!(v.rows[0].tolerance, "±15 %");
        assert_eq!(v.rows[3].qosnet, "none");
    }

    #[test]
    fn bounds_and_claims_decide_as_computed() {
        let mut v = Verdicts::default();
        v.at_most("T", "jitter", 0.5, 0.5, "ms");
        v.at_most("T", "jitter", 0.5, 0.51, "ms");
        v.at_least("T", "share", 97.0, 98.4, "%");
        v.at_least("T", "share", 97.0, 95.3, "%");
        v.claim("T", "no loss", "0", "3 lost", false);
        let o: Vec<_> = v.rows.iter().map(|r| r.outcome == Outcome::Holds).collect();
        assert_eq!(o, [true, false, true, false, false]);
        assert_eq!(v.rows[2].paper, "≥ 97.0 %");
    }

    #[test]
    fn strict_fails_on_claims_and_unexplained_figures_only() {
        let mut v = Verdicts::default();
        v.figure("T", "explained", 3.1, 1.3, "ms", 0.15)
            .explained("docs/x.md#y");
        v.figure("T", "unexplained", 3.1, 1.3, "ms", 0.15);
        v.claim("T", "differs", "a", "b", false).explained("docs/x.md#y");
        v.claim("T", "noisy", "a", "b", false)
            .untestable_if(Some("a 7 ms stall".into()));
        v.claim("T", "quiet", "a", "a", true).untestable_if(None);
        let failing: Vec<_> = v.strict_failures().map(|r| r.what.as_str()).collect();
        assert_eq!(failing, ["unexplained", "differs"]);
        assert_eq!(
            v.summary(),
            Summary {
                holds: 1,
                differs: 3,
                explained: 1,
                untestable: 1
            }
        );
        let t = v.table("Verdicts");
        assert!(t.contains("DIFFERS (explained: docs/x.md#y)"), "{t}");
        assert!(t.contains("UNTESTABLE: a 7 ms stall"), "{t}");
        assert!(t.contains("summary: 1 HOLDS, 3 DIFFERS (1 explained in the docs), 1 UNTESTABLE"));
    }

    #[test]
    fn the_table_lines_up_and_an_empty_one_says_so() {
        let mut v = Verdicts::default();
        v.claim("Table I", "no TDP packet lost", "0", "0", true);
        v.figure("Fig. 4", "EF RTT", 7.0, 6.5, "ms", 0.15);
        v.note("router late at most 12 us");
        let t = v.table("Verdicts");
        let rows: Vec<&str> = t.lines().filter(|l| l.ends_with("HOLDS")).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].find("claim"), rows[1].find("figure"));
        assert!(t.ends_with("note: router late at most 12 us\n"));
        assert!(Verdicts::default().table("V").contains("computes no verdicts"));
    }

    #[test]
    fn rows_serialise_with_their_verdict() {
        let mut v = Verdicts::default();
        v.untestable("T", "lossless", "0 %", "0.2 %", "stall of 7 ms");
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j["rows"][0]["outcome"]["verdict"], "untestable");
        assert_eq!(j["rows"][0]["outcome"]["why"], "stall of 7 ms");
        assert_eq!(j["rows"][0]["kind"], "claim");
    }
}
