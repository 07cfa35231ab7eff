//! SVG pictures (plotters, SVG backend only): the precision/recall/F1 curves of `simdex tune`
//! (the paper's Figure 1) and the histogram of h of `simdex inspect --plot` (Figure 2a).

use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

const SIZE: (u32, u32) = (900, 540);
const COLORS: [RGBColor; 6] = [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40), RGBColor(148, 103, 189), RGBColor(140, 86, 75)];

/// One curve of `tune_svg`: its name, whether it is confirmed by sketch, its `(k, value)` points.
pub type Line<'a> = (&'a str, bool, Vec<(u32, f64)>);

/// Precision, recall and F1 by k: one line per `(name, confirmed, points)`, fingerprint only
/// (solid) and confirmed by sketch (thin, the same colours, marked with circles), for k in
/// `0..k_max`.
pub fn tune_svg(path: &Path, lines: &[Line<'_>], k_max: u32, recipe: &str) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("near-duplicates by Hamming distance k ({recipe})"), ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0u32..k_max, 0f64..1.0)
        .map_err(plot_error)?;
    chart.configure_mesh().x_desc("k (Hamming distance)").y_desc("precision, recall, F1").draw().map_err(plot_error)?;
    for (i, (name, confirmed, points)) in lines.iter().enumerate() {
        let (name, confirmed, points) = (*name, *confirmed, points.clone());
        let color = COLORS[i % 3];
        let style = if confirmed { color.stroke_width(1) } else { color.stroke_width(2) };
        chart.draw_series(LineSeries::new(points.clone(), style)).map_err(plot_error)?.label(name).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        if confirmed {
            chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled()))).map_err(plot_error)?;
        }
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).position(SeriesLabelPosition::LowerRight).draw().map_err(plot_error)?;
    root.present().map_err(plot_error)?;
    Ok(())
}

/// The histogram of h: the share of successive entries whose top differing bit is h
/// (`equal` entries left out), one line per `(label, counts by h)`: a segment's tables, or an
/// index's segments.
pub fn histogram_svg(path: &Path, curves: &[(String, Vec<(u32, u64)>)]) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let shares: Vec<Vec<(u32, f64)>> = curves
        .iter()
        .map(|(_, h)| {
            let total: u64 = h.iter().map(|&(_, c)| c).sum();
            h.iter().map(|&(s, c)| (s, c as f64 / total.max(1) as f64)).collect()
        })
        .collect();
    let top = shares.iter().flatten().map(|&(_, f)| f).fold(0.0, f64::max).max(0.01) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption("distribution of h (top differing bit of successive entries)", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0u32..64, 0f64..top)
        .map_err(plot_error)?;
    chart.configure_mesh().x_desc("h").y_desc("fraction of entries").draw().map_err(plot_error)?;
    for (t, (points, (label, _))) in shares.into_iter().zip(curves).enumerate() {
        let color = COLORS[t % COLORS.len()];
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(plot_error)?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).draw().map_err(plot_error)?;
    root.present().map_err(plot_error)?;
    Ok(())
}

fn plot_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting failed: {e:?}")
}
