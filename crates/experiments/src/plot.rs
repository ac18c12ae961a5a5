//! SVG plot of per-flow one-way delay distributions (empirical CDFs from
//! the HDR histograms), drawn with `plotters`.

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
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
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
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
