//! `simdex tune --plot`: precision, recall and F1 against k for the user's corpus, as the
//! paper's Figure 1 shows them for its 8B pages, fingerprints only and confirmed by sketch,
//! with the recommended setting marked.

use plotters::prelude::*;
use std::path::Path;

use super::style::{self, plot_error, Key, Marker, Stroke, FONT};

/// One curve: its name and its `(k, value)` points.
pub struct Line {
    pub name: String,
    pub points: Vec<(u32, f64)>,
}

/// The recommended point: its k, its F1 and that F1's interval, and what to call it.
pub struct Mark {
    pub k: u32,
    pub value: f64,
    pub low: f64,
    pub high: f64,
    pub label: String,
}

/// The strokes of the six curves, in the order `tune` gives them: precision, recall and F1 of
/// fingerprints only (solid, wide, dots), then of the confirmed mode (dashed, triangles), each
/// in a colour of its own.
const STROKES: [Stroke; 6] = [
    Stroke { color: style::BLUE, width: 3, dashed: false, marker: Marker::Circle },
    Stroke { color: style::VERMILLION, width: 3, dashed: false, marker: Marker::Circle },
    Stroke { color: style::BLUISH_GREEN, width: 3, dashed: false, marker: Marker::Circle },
    Stroke { color: style::SKY_BLUE, width: 2, dashed: true, marker: Marker::Triangle },
    Stroke { color: style::ORANGE, width: 2, dashed: true, marker: Marker::Triangle },
    Stroke { color: style::REDDISH_PURPLE, width: 2, dashed: true, marker: Marker::Triangle },
];

/// Draws `lines` (at most six, styled by `STROKES` in order) for k in `0..=k_max`, the value
/// axis from a tenth below the lowest point to 1, and `mark` as a ring with its interval.
pub fn tune_svg(path: &Path, title: &str, subtitle: &str, lines: &[Line], mark: Option<&Mark>, k_max: u32) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, style::SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let below_title = root.titled(title, (FONT, 22)).map_err(plot_error)?;
    let (subtitle_area, body) = below_title.split_vertically(28);
    subtitle_area.draw(&Text::new(subtitle.to_owned(), (20, 4), (FONT, 15).into_font().color(&style::BLACK))).map_err(plot_error)?;
    let (chart_area, legend_area) = body.split_horizontally(style::SIZE.0 - style::LEGEND_WIDTH);
    let lowest = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).chain(mark.map(|m| m.low)).fold(1.0, f64::min);
    let y_low = ((lowest * 10.0).floor() / 10.0 - if lowest * 10.0 - (lowest * 10.0).floor() < 0.2 { 0.1 } else { 0.0 }).max(0.0);
    let y_high = 1.0 + (1.0 - y_low) * 0.04;
    let x_range = -0.3..f64::from(k_max) + 0.3;
    let mut chart = ChartBuilder::on(&chart_area).margin(12).x_label_area_size(48).y_label_area_size(58).build_cartesian_2d(x_range, y_low..y_high).map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_labels(k_max as usize + 1)
        .x_label_formatter(&|x| format!("{}", x.round()))
        .y_labels(6)
        .y_label_formatter(&|y| format!("{y:.2}"))
        .x_desc("k: the largest Hamming distance counted as a near-duplicate")
        .y_desc("precision, recall, F1")
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 14))
        .max_light_lines(0)
        .bold_line_style(RGBColor(220, 220, 220))
        .draw()
        .map_err(plot_error)?;
    let mut legend = Vec::new();
    for (line, stroke) in lines.iter().zip(STROKES) {
        let points: Vec<(f64, f64)> = line.points.iter().map(|&(k, v)| (f64::from(k), v)).collect();
        stroke.draw(&mut chart, &points)?;
        legend.push((Key::Stroke(stroke), line.name.clone()));
    }
    if let Some(m) = mark {
        let (x, y) = (f64::from(m.k), m.value);
        let bar = style::BLACK.stroke_width(2);
        chart.draw_series(std::iter::once(PathElement::new(vec![(x, m.low), (x, m.high)], bar))).map_err(plot_error)?;
        for end in [m.low, m.high] {
            chart.draw_series(std::iter::once(PathElement::new(vec![(x - 0.08, end), (x + 0.08, end)], bar))).map_err(plot_error)?;
        }
        chart.draw_series(std::iter::once(Circle::new((x, y), 9, style::BLACK.stroke_width(2)))).map_err(plot_error)?;
        // the label beside the ring, on the side with room, below the curves near 1
        let right = m.k * 2 <= k_max;
        let anchor = if right { (x + 0.2, y - (y_high - y_low) * 0.08) } else { (x - 0.2, y - (y_high - y_low) * 0.08) };
        let pos = plotters::style::text_anchor::Pos::new(
            if right { plotters::style::text_anchor::HPos::Left } else { plotters::style::text_anchor::HPos::Right },
            plotters::style::text_anchor::VPos::Center,
        );
        let font = (FONT, 15).into_font().color(&style::BLACK).pos(pos);
        chart.draw_series(std::iter::once(Text::new(format!("recommended: k = {}", m.k), anchor, font))).map_err(plot_error)?;
        legend.push((Key::Ring, m.label.clone()));
    }
    style::legend(&legend_area, &legend)?;
    root.present().map_err(plot_error)?;
    Ok(())
}
