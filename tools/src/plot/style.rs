//! What the pictures share: the Okabe-Ito palette (distinguishable with every common colour
//! vision deficiency; Okabe and Ito, "Color Universal Design", 2008), line styles, and a
//! legend drawn in an area of its own beside the chart, so it never covers the data.

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// The picture's size in pixels.
pub const SIZE: (u32, u32) = (1000, 560);
/// The width of the legend's column at the right.
pub const LEGEND_WIDTH: u32 = 300;
pub const FONT: &str = "sans-serif";

pub const BLACK: RGBColor = RGBColor(0, 0, 0);
pub const ORANGE: RGBColor = RGBColor(230, 159, 0);
pub const SKY_BLUE: RGBColor = RGBColor(86, 180, 233);
pub const BLUISH_GREEN: RGBColor = RGBColor(0, 158, 115);
pub const BLUE: RGBColor = RGBColor(0, 114, 178);
pub const VERMILLION: RGBColor = RGBColor(213, 94, 0);
pub const REDDISH_PURPLE: RGBColor = RGBColor(204, 121, 167);
/// The palette's colours that read as lines on white (its yellow does not), in order of use.
pub const LINE_COLORS: [RGBColor; 6] = [BLUE, VERMILLION, BLUISH_GREEN, REDDISH_PURPLE, ORANGE, SKY_BLUE];

/// How a line is drawn: solid or dashed, its width, and the marker at each point.
#[derive(Clone, Copy, Debug)]
pub struct Stroke {
    pub color: RGBColor,
    pub width: u32,
    pub dashed: bool,
    pub marker: Marker,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    None,
    Circle,
    Triangle,
}

impl Stroke {
    /// Draws the line through `points` (chart coordinates) with its markers.
    pub fn draw<DB: DrawingBackend>(
        &self,
        chart: &mut ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>,
        points: &[(f64, f64)],
    ) -> anyhow::Result<()> {
        let style = self.color.stroke_width(self.width);
        if self.dashed {
            chart.draw_series(DashedLineSeries::new(points.iter().copied(), 8, 5, style)).map_err(plot_error)?;
        } else {
            chart.draw_series(LineSeries::new(points.iter().copied(), style)).map_err(plot_error)?;
        }
        let fill = self.color.filled();
        match self.marker {
            Marker::None => {}
            Marker::Circle => {
                chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, fill))).map_err(plot_error)?;
            }
            Marker::Triangle => {
                chart.draw_series(points.iter().map(|&p| TriangleMarker::new(p, 5, fill))).map_err(plot_error)?;
            }
        }
        Ok(())
    }

    /// Draws a short sample of the line at `(x, y)` (pixels of `area`), for the legend.
    fn sample<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, x: i32, y: i32) -> anyhow::Result<()> {
        let style = self.color.stroke_width(self.width);
        let ends = vec![(x, y), (x + 36, y)];
        if self.dashed {
            area.draw(&DashedPathElement::new(ends, 8, 5, style)).map_err(plot_error)?;
        } else {
            area.draw(&PathElement::new(ends, style)).map_err(plot_error)?;
        }
        let mid = (x + 18, y);
        match self.marker {
            Marker::None => {}
            Marker::Circle => area.draw(&Circle::new(mid, 4, self.color.filled())).map_err(plot_error)?,
            Marker::Triangle => area.draw(&TriangleMarker::new(mid, 5, self.color.filled())).map_err(plot_error)?,
        }
        Ok(())
    }
}

/// One legend line: a sample of a stroke, a filled band, a ring, or only words.
pub enum Key {
    Stroke(Stroke),
    Band(RGBColor),
    Ring,
    Text,
}

/// The legend: one line per `(key, label)`, top-down in `area` (the column at the right).
pub fn legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, entries: &[(Key, String)]) -> anyhow::Result<()> {
    let text = (FONT, 14).into_font().color(&BLACK);
    let mut y = 12;
    for (key, label) in entries {
        match key {
            Key::Stroke(s) => s.sample(area, 8, y)?,
            Key::Band(c) => area.draw(&Rectangle::new([(8, y - 6), (44, y + 6)], c.mix(0.35).filled())).map_err(plot_error)?,
            Key::Ring => area.draw(&Circle::new((26, y), 8, BLACK.stroke_width(2))).map_err(plot_error)?,
            Key::Text => {}
        }
        let x = if matches!(key, Key::Text) { 8 } else { 52 };
        let lines = wrap(label, if x == 8 { 38 } else { 32 });
        for (n, line) in lines.iter().enumerate() {
            area.draw(&Text::new(line.clone(), (x, y - 7 + 17 * n as i32), text.clone())).map_err(plot_error)?;
        }
        y += 17 * (lines.len().max(1) as i32 - 1) + 26;
    }
    Ok(())
}

/// `text` in lines of at most `width` characters, broken at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// `n` with a comma between thousands: 1,000,000.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn plot_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting failed: {e:?}")
}
