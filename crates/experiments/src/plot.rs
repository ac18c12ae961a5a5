//! SVG plots drawn with `plotters`: per-flow one-way delay distributions
//! (empirical CDFs from the HDR histograms, on a log delay axis, with
//! jitter, loss and the paper's figures in the legend), and a sweep's metric against
//! one swept parameter with 95 % confidence intervals.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::coord::combinators::BindKeyPoints;
use plotters::prelude::*;

/// One flow of a delay plot: its delay histogram and the figures its
/// legend line shows.
pub struct DelayFlow<'a> {
    pub name: &'a str,
    /// `(delay in ns, packets)`, ascending.
    pub buckets: &'a [(u64, u64)],
    pub sent: u64,
    pub lost: u64,
    /// max - min one-way delay (the ICC 2006 paper's jitter).
    pub jitter_ns: u64,
    pub p99_ns: u64,
    /// The paper's figure for this flow, with its metric and unit
    /// (`("jitter", 3.1, "ms")`), shown beside qosnet's.
    pub paper: Option<(&'a str, f64, &'a str)>,
}

/// Rows of legend shown under a delay plot; more flows are summarised.
const LEGEND_ROWS: usize = 12;

/// A delay in ns, to three significant figures, in the unit that suits it.
fn short_ns(ns: f64) -> String {
    let (v, unit) = if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "us")
    } else {
        (ns, "ns")
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$} {unit}")
}

/// Per-flow one-way delay CDFs on a logarithmic delay axis, so a flow of
/// hundreds of microseconds and one of tens of milliseconds both show
/// their shape (on a linear axis from 0 the short one is a vertical line at
/// the origin). Under the chart, one line per flow: its jitter (with the
/// paper's figure beside it when the scenario has one), p99 and loss.
pub fn delay_cdf(path: &Path, title: &str, flows: &[DelayFlow]) -> Result<()> {
    let rows = flows.len().min(LEGEND_ROWS) + usize::from(flows.len() > LEGEND_ROWS);
    let legend_h = 14 + 18 * rows as u32;
    let root = SVGBackend::new(path, (900, 500 + legend_h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let (top, bottom) = root.split_vertically(500);
    // Delays in ms; the axis from the smallest positive delay (a zero
    // delay, possible only in contrived scenarios, is drawn at its left
    // edge) to the largest, a little wider on both sides.
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for f in flows {
        for (v, _) in f.buckets.iter().filter(|(v, _)| *v > 0) {
            lo = lo.min(*v as f64 / 1e6);
            hi = hi.max(*v as f64 / 1e6);
        }
    }
    if lo > hi {
        (lo, hi) = (1e-3, 1.0);
    }
    let (lo, hi) = (lo / 1.25, hi * 1.25);
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("{title}: one-way delay CDF per flow (log delay axis)"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((lo..hi).log_scale().with_key_points(log_ticks(lo, hi)), 0f64..1.0)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("one-way delay [ms], logarithmic")
        .y_desc("fraction of packets")
        .x_label_formatter(&|v| {
            let s = format!("{v:.6}");
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        })
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, f) in flows.iter().enumerate() {
        let total: u64 = f.buckets.iter().map(|(_, c)| c).sum();
        if total == 0 {
            continue;
        }
        let mut acc = 0u64;
        let mut pts = Vec::with_capacity(f.buckets.len() * 2);
        for (v, c) in f.buckets {
            let x = (*v as f64 / 1e6).max(lo);
            pts.push((x, acc as f64 / total as f64));
            acc += c;
            pts.push((x, acc as f64 / total as f64));
        }
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?;
    }
    let style = ("sans-serif", 14).into_font().color(&BLACK);
    for (i, f) in flows.iter().take(LEGEND_ROWS).enumerate() {
        let y = 8 + 18 * i as i32;
        let color = Palette99::pick(i).to_rgba();
        bottom
            .draw(&PathElement::new(
                vec![(62, y + 8), (92, y + 8)],
                color.stroke_width(3),
            ))
            .map_err(|e| anyhow!("{e}"))?;
        bottom
            .draw(&Text::new(legend_line(f), (100, y), style.clone()))
            .map_err(|e| anyhow!("{e}"))?;
    }
    if flows.len() > LEGEND_ROWS {
        let y = 8 + 18 * LEGEND_ROWS as i32;
        let text = format!(
            "... and {} more flows (flows.csv has them all)",
            flows.len() - LEGEND_ROWS
        );
        bottom
            .draw(&Text::new(text, (100, y), style))
            .map_err(|e| anyhow!("{e}"))?;
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// Tick values for a log axis over `lo..hi`: 1, 2, 5 per decade, or every
/// digit when the axis spans less than a decade (plotters' own log axis
/// then labels nothing: the ICC 2006 flows span 1.5-5 ms).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let ticks = |mantissas: &[f64]| -> Vec<f64> {
        let mut v = Vec::new();
        let mut e = lo.log10().floor() as i32;
        while 10f64.powi(e) <= hi * 10.0 && v.len() < 64 {
            for m in mantissas {
                let t = m * 10f64.powi(e);
                if t >= lo && t <= hi {
                    v.push(t);
                }
            }
            e += 1;
        }
        v
    };
    let coarse = ticks(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 3 {
        return coarse;
    }
    ticks(&[1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
}

/// A flow's legend line: name, jitter (and the paper's), p99, loss.
fn legend_line(f: &DelayFlow) -> String {
    let mut s = format!("{}: jitter {}", f.name, short_ns(f.jitter_ns as f64));
    if let Some((metric, v, unit)) = f.paper {
        s += &format!(" (paper {metric} {v} {unit})");
    }
    s += &format!(", p99 {}", short_ns(f.p99_ns as f64));
    if f.sent > 0 {
        s += &format!(
            ", lost {} of {} ({:.2} %)",
            f.lost,
            f.sent,
            100.0 * f.lost as f64 / f.sent as f64
        );
    } else {
        s += &format!(", lost {}", f.lost);
    }
    s
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
    fn log_ticks_label_narrow_and_wide_axes() {
        assert_eq!(
            log_ticks(0.4, 115.0),
            vec![0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        assert_eq!(log_ticks(1.4, 5.5), vec![1.5, 2.0, 2.5, 3.0, 4.0, 5.0]);
    }

    #[test]
    fn legend_shows_jitter_loss_and_the_papers_figure() {
        let f = DelayFlow {
            name: "f123",
            buckets: &[],
            sent: 8000,
            lost: 2,
            jitter_ns: 1_420_000,
            p99_ns: 2_500,
            paper: Some(("jitter", 1.97, "ms")),
        };
        assert_eq!(
            legend_line(&f),
            "f123: jitter 1.42 ms (paper jitter 1.97 ms), p99 2.50 us, lost 2 of 8000 (0.03 %)"
        );
    }

    /// Flows 500 us and 83 ms apart both span the log axis: the SVG has
    /// one polyline per flow, and the short flow's points are not all at
    /// one x (as they were on a linear axis from 0).
    #[test]
    fn short_and_long_flows_both_show_their_spread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("delay.svg");
        let short: Vec<(u64, u64)> = (0..10).map(|k| (500_000 + 20_000 * k, 10)).collect();
        let long: Vec<(u64, u64)> = (0..10).map(|k| (80_000_000 + 500_000 * k, 10)).collect();
        let flow = |name, b| DelayFlow {
            name,
            buckets: b,
            sent: 100,
            lost: 0,
            jitter_ns: 0,
            p99_ns: 0,
            paper: None,
        };
        delay_cdf(&path, "t", &[flow("a", &short), flow("b", &long)]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Vec<f64>> = svg
            .split("<polyline")
            .skip(1)
            .map(|p| {
                let pts = p.split("points=\"").nth(1).unwrap().split('"').next().unwrap();
                pts.split_whitespace()
                    .map(|xy| xy.split(',').next().unwrap().parse::<f64>().unwrap())
                    .collect()
            })
            .filter(|xs: &Vec<f64>| xs.len() == 20)
            .collect();
        assert_eq!(lines.len(), 2, "one CDF per flow");
        let width = |xs: &Vec<f64>| {
            xs.iter().cloned().fold(f64::MIN, f64::max) - xs.iter().cloned().fold(f64::MAX, f64::min)
        };
        // On the old linear axis from 0 to 83 ms the short flow spanned
        // about 1 px of ~800; on the log axis about 45.
        assert!(
            width(&lines[0]) > 20.0,
            "short flow spans {} px",
            width(&lines[0])
        );
        assert!(width(&lines[1]) > 5.0, "long flow spans {} px", width(&lines[1]));
    }

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
