//! `[paper]`: the numbers a paper reports for the scenario, kept as data
//! beside it (the experiments print them next to qosnet's). A per-flow
//! column and `[[paper.table]]`s of several columns; every table is
//! rectangular and keyed by its first column, so a reader looks a number
//! up by row key and column name and never by position.

use std::collections::HashSet;

use super::{Ctx, ScenarioError};
use crate::model::*;
use crate::raw::{self, S};

pub(super) fn paper(cx: &Ctx, p: Option<&S<raw::Paper>>) -> Result<Option<Paper>, ScenarioError> {
    let Some(sp) = p else { return Ok(None) };
    let p = sp.get_ref();
    let text = |v: &Option<S<String>>| v.as_ref().map(|s| s.get_ref().clone()).unwrap_or_default();
    let values = p.values.as_ref().map(|v| v.get_ref().clone()).unwrap_or_default();
    if p.values.is_some() && (p.metric.is_none() || p.unit.is_none()) {
        return Err(cx.err(
            sp.span(),
            "[paper] has `values` without `metric` and `unit`",
            "name what the values are: metric = \"jitter\", unit = \"ms\"",
        ));
    }
    if p.values.is_none() && p.tables.is_empty() {
        return Err(cx.err(
            sp.span(),
            "[paper] has neither `values` nor a [[paper.table]]",
            "add values = { flow = number, ... } or [[paper.table]] with columns and rows",
        ));
    }
    let mut names = HashSet::new();
    let mut tables = Vec::new();
    for t in &p.tables {
        let t = t.get_ref();
        let name = t.name.get_ref();
        if name.is_empty() || !names.insert(name.clone()) {
            return Err(cx.err(
                t.name.span(),
                format!("[[paper.table]] name `{name}` is empty or used twice"),
                "give each table its own name, e.g. the paper's table number: name = \"4-1\"",
            ));
        }
        let columns = t.columns.get_ref();
        let mut seen = HashSet::new();
        if columns.is_empty() || columns.iter().any(|c| c.is_empty() || !seen.insert(c)) {
            return Err(cx.err(
                t.columns.span(),
                format!("table `{name}`: columns must be distinct, non-empty names"),
                "e.g. columns = [\"class\", \"shaped\", \"measured\", \"loss\"]",
            ));
        }
        let units = match &t.units {
            None => Vec::new(),
            Some(u) if u.get_ref().len() == columns.len() => u.get_ref().clone(),
            Some(u) => {
                return Err(cx.err(
                    u.span(),
                    format!(
                        "table `{name}`: {} units for {} columns",
                        u.get_ref().len(),
                        columns.len()
                    ),
                    "give one unit per column, \"\" where there is none",
                ))
            }
        };
        let mut keys = HashSet::new();
        let mut rows = Vec::new();
        for r in &t.rows {
            let cells = r.get_ref();
            if cells.len() != columns.len() {
                return Err(cx.err(
                    r.span(),
                    format!(
                        "table `{name}`: a row of {} cells under {} columns",
                        cells.len(),
                        columns.len()
                    ),
                    format!("every row has one cell per column: {}", columns.join(", ")),
                ));
            }
            match cells.first() {
                Some(PaperCell::Text(k)) if keys.insert(k.clone()) => {}
                _ => {
                    return Err(cx.err(
                        r.span(),
                        format!("table `{name}`: a row's first cell must be a text key used once"),
                        format!(
                            "the first column ({}) names the row, e.g. [\"EF\", 10, 10.2]",
                            columns[0]
                        ),
                    ))
                }
            }
            rows.push(cells.clone());
        }
        tables.push(PaperTable {
            name: name.clone(),
            title: t.title.clone().unwrap_or_default(),
            columns: columns.clone(),
            units,
            rows,
        });
    }
    Ok(Some(Paper {
        source: p.source.clone(),
        metric: text(&p.metric),
        unit: text(&p.unit),
        values,
        tables,
    }))
}
