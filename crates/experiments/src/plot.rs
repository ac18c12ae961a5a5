//! SVG plots drawn with `plotters`: per-flow one-way delay distributions
//! (empirical CDFs from the HDR histograms), and a sweep's metric against
//! one swept parameter with 95 % confidence intervals.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

pub fn delay_cdf(path: &Path, title: &str, flows: &[(String, Vec<(u64, u64)>)]) -> Result<()> {
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for (_, b) in flows {
        for (v, _) in b {
            lo = lo.min(*v as f64 / 1e6);
            hi = hi.max(*v as f64 / 1e6);
        }
    }
    if lo > hi {
        (lo, hi) = (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.05).max(0.01);
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: one-way delay CDF per flow"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((lo - pad)..(hi + pad), 0f64..1.0)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("one-way delay [ms]")
        .y_desc("fraction of packets")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, (name, b)) in flows.iter().enumerate() {
        let total: u64 = b.iter().map(|(_, c)| c).sum();
        if total == 0 {
            continue;
        }
        let mut acc = 0u64;
        let mut pts = Vec::with_capacity(b.len() * 2);
        for (v, c) in b {
            let x = *v as f64 / 1e6;
            pts.push((x, acc as f64 / total as f64));
            acc += c;
            pts.push((x, acc as f64 / total as f64));
        }
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    finish(&mut chart, &root, SeriesLabelPosition::LowerRight)
}

/// Swept values as x coordinates: numbers when every value is a number
/// followed by the same unit (`200pps`, `400pps` → 200, 400 with unit
/// `pps`), else the values' positions (a categorical axis).
fn x_axis(values: &[String]) -> (Vec<f64>, String, bool) {
    let split = |v: &str| {
        let end = v
            .char_indices()
            .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || (*i == 0 && (*c == '-' || *c == '+'))))
            .map(|(i, _)| i)
            .unwrap_or(v.len());
        v[..end]
            .parse::<f64>()
            .ok()
            .map(|x| (x, v[end..].trim().to_string()))
    };
    let parsed: Option<Vec<(f64, String)>> = values.iter().map(|v| split(v)).collect();
    match parsed {
        Some(p) if !p.is_empty() && p.iter().all(|(_, u)| *u == p[0].1) => {
            let unit = p[0].1.clone();
            (p.into_iter().map(|(x, _)| x).collect(), unit, true)
        }
        _ => (
            (0..values.len()).map(|i| i as f64).collect(),
            String::new(),
            false,
        ),
    }
}

/// The table's first metric against the swept parameter `key`: one line
/// per flow (and per combination of the other swept parameters), error
/// bars the 95 % confidence interval of the mean.
pub fn sweep_curve(path: &Path, t: &crate::sweep::Table, key: &str) -> Result<()> {
    let Some(ki) = t.param_keys.iter().position(|k| k == key) else {
        return Err(anyhow!("{key} is not a swept parameter"));
    };
    let Some(&metric) = t.metrics.first() else {
        return Err(anyhow!("no metric to plot"));
    };
    let mut values: Vec<String> = Vec::new();
    for c in &t.cells {
        if !values.contains(&c.params[ki].1) {
            values.push(c.params[ki].1.clone());
        }
    }
    let (xs, unit, numeric) = x_axis(&values);
    // Series: flow plus the other parameters' values.
    // (label, points of (x, CI low, CI high)).
    type Series = (String, Vec<(f64, f64, f64)>);
    let mut series: Vec<Series> = Vec::new();
    for c in &t.cells {
        let Some(st) = c.stats.get(metric) else { continue };
        let others: Vec<String> = c
            .params
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != ki)
            .map(|(_, (k, v))| format!("{k}={v}"))
            .collect();
        let label = if others.is_empty() {
            c.flow.clone()
        } else {
            format!("{} {}", c.flow, others.join(" "))
        };
        let vi = values.iter().position(|v| *v == c.params[ki].1).unwrap_or(0);
        let ci = st.ci95.unwrap_or(0.0);
        let pt = (xs[vi], st.mean - ci, st.mean + ci);
        match series.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push(pt),
            None => series.push((label, vec![pt])),
        }
    }
    let (mut x0, mut x1) = (f64::MAX, f64::MIN);
    let (mut y0, mut y1) = (f64::MAX, f64::MIN);
    for (_, pts) in &series {
        for &(x, lo, hi) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(lo);
            y1 = y1.max(hi);
        }
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    let xpad = ((x1 - x0) * 0.05).max(if numeric { 1e-9 } else { 0.5 });
    let ypad = ((y1 - y0) * 0.08).max(1e-6);
    let col = crate::sweep::METRICS
        .iter()
        .find(|m| m.0 == metric)
        .map(|m| m.2)
        .unwrap_or(metric);
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{metric} vs {key} (mean, 95 % CI)"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (x0 - xpad)..(x1 + xpad),
            (y0 - ypad).min(0f64.max(y0 - ypad))..(y1 + ypad),
        )
        .map_err(|e| anyhow!("{e}"))?;
    let xdesc = if unit.is_empty() {
        key.to_string()
    } else {
        format!("{key} [{unit}]")
    };
    let label_of = |x: &f64| {
        if numeric {
            format!("{x}")
        } else {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                values.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        }
    };
    chart
        .configure_mesh()
        .x_desc(xdesc)
        .y_desc(col)
        .x_label_formatter(&label_of)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, (label, mut pts)) in series.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        let mid: Vec<(f64, f64)> = pts.iter().map(|&(x, lo, hi)| (x, (lo + hi) / 2.0)).collect();
        chart
            .draw_series(LineSeries::new(mid.clone(), color.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(
                pts.iter()
                    .map(|&(x, lo, hi)| PathElement::new(vec![(x, lo), (x, hi)], color.stroke_width(1))),
            )
            .map_err(|e| anyhow!("{e}"))?;
    }
    finish(&mut chart, &root, SeriesLabelPosition::UpperLeft)
}

/// One curve of [`lines`]: its label and (x, y) points.
pub type Curve = (String, Vec<(f64, f64)>);

/// An SVG line chart of `curves` (points joined and marked).
pub fn lines(path: &Path, title: &str, x_desc: &str, y_desc: &str, curves: &[Curve]) -> Result<()> {
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let pts = curves.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    let xpad = ((x1 - x0) * 0.05).max(0.5);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x0 - xpad)..(x1 + xpad), 0f64..(y1 * 1.1).max(1e-9))
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, (name, p)) in curves.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(p.clone(), color.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(p.iter().map(|&(x, y)| Circle::new((x, y), 3, color.filled())))
            .map_err(|e| anyhow!("{e}"))?;
    }
    finish(&mut chart, &root, SeriesLabelPosition::UpperLeft)
}

/// Every chart ends alike: the legend in a framed white box at `pos`, then
/// the file written.
fn finish<'a, 'b: 'a>(
    chart: &mut ChartContext<
        'a,
        SVGBackend<'b>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    root: &DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    pos: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(pos)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_axis_needs_one_unit() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            x_axis(&v(&["200pps", "400pps"])),
            (vec![200.0, 400.0], "pps".into(), true)
        );
        assert_eq!(x_axis(&v(&["1.5", "-2"])), (vec![1.5, -2.0], String::new(), true));
        assert_eq!(
            x_axis(&v(&["1Mb/s", "800kb/s"])),
            (vec![0.0, 1.0], String::new(), false)
        );
        assert_eq!(
            x_axis(&v(&["fifo", "tdp"])),
            (vec![0.0, 1.0], String::new(), false)
        );
    }
}
