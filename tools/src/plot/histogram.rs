//! `simdex inspect --plot`: the histogram of h, the highest bit in which successive entries of
//! a sorted table differ (what the XOR code's Huffman table is built from), beside what the
//! paper's Figure 2a leads one to expect: the distribution for as many uniform random
//! fingerprints. A segment's tables hold the same fingerprints permuted, so their histograms
//! nearly coincide: each segment is drawn as the mean over its tables with the range across
//! them as a band, and an index directory as one such curve per segment.

use plotters::prelude::*;
use std::path::Path;

use super::style::{self, plot_error, Key, Marker, Stroke, FONT};

/// One segment's histograms: its tables' counts of successive entries by h.
pub struct Histogram {
    pub label: String,
    pub fingerprints: u64,
    pub tables: Vec<Vec<(u32, u64)>>,
}

/// The share of successive pairs at each h (0..64) expected among `n` uniform random
/// 64-bit fingerprints, sorted. Two neighbours agree on their top `L` bits unless a bucket
/// of the top `L` bits begins between them: of the `n - 1` neighbour pairs, `n - B(L)`
/// share `L` bits, where `B(L) = 2^L (1 - (1 - 2^-L)^n)` is the expected number of the
/// `2^L` buckets that are occupied; `h = 63 - L` for pairs that share exactly `L` bits.
pub fn expected_shares(n: u64) -> [f64; 64] {
    let mut shares = [0.0; 64];
    if n < 2 {
        return shares;
    }
    let nf = n as f64;
    let sharing = |l: u32| {
        let buckets = 2f64.powi(l as i32);
        let occupied = buckets * -(nf * (-1.0 / buckets).ln_1p()).exp_m1();
        ((nf - occupied) / (nf - 1.0)).clamp(0.0, 1.0)
    };
    for (h, share) in shares.iter_mut().enumerate() {
        let l = 63 - h as u32;
        *share = (sharing(l) - sharing(l + 1)).max(0.0);
    }
    shares
}

/// Per h, the mean share over a segment's tables and the least and greatest.
fn spread(tables: &[Vec<(u32, u64)>]) -> Vec<(u32, f64, f64, f64)> {
    let shares: Vec<[f64; 64]> = tables
        .iter()
        .map(|t| {
            let total: u64 = t.iter().map(|&(_, c)| c).sum();
            let mut s = [0.0; 64];
            for &(h, c) in t {
                if let Some(x) = s.get_mut(h as usize) {
                    *x = c as f64 / total.max(1) as f64;
                }
            }
            s
        })
        .collect();
    // from the lowest h seen to the highest, zeros between included
    let seen: Vec<u32> = (0..64u32).filter(|&h| shares.iter().any(|s| s.get(h as usize).is_some_and(|&x| x > 0.0))).collect();
    let (Some(&first), Some(&last)) = (seen.first(), seen.last()) else { return Vec::new() };
    (first..=last)
        .map(|h| {
            let at: Vec<f64> = shares.iter().filter_map(|s| s.get(h as usize).copied()).collect();
            let mean = at.iter().sum::<f64>() / at.len().max(1) as f64;
            let (low, high) = at.iter().fold((f64::INFINITY, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            (h, mean, low, high)
        })
        .collect()
}

/// Draws each segment of `curves` (the largest six when there are more) with its expectation.
pub fn histogram_svg(path: &Path, curves: &[Histogram]) -> anyhow::Result<()> {
    let mut drawn: Vec<&Histogram> = curves.iter().collect();
    drawn.sort_by_key(|c| std::cmp::Reverse(c.fingerprints));
    let left_out = drawn.len().saturating_sub(style::LINE_COLORS.len());
    drawn.truncate(style::LINE_COLORS.len());
    let observed: Vec<Vec<(u32, f64, f64, f64)>> = drawn.iter().map(|c| spread(&c.tables)).collect();
    let expected: Vec<[f64; 64]> = drawn.iter().map(|c| expected_shares(c.fingerprints)).collect();
    // the axes hold the data and the part of the expectation that shows (a share of 0.1% or more)
    let hs = observed.iter().flatten().map(|p| p.0).chain(expected.iter().flat_map(|e| (0..64u32).filter(|&h| e[h as usize] >= 1e-3)));
    let (lo, hi) = hs.fold((63u32, 0u32), |(lo, hi), h| (lo.min(h), hi.max(h)));
    let (lo, hi) = if lo > hi { (0, 63) } else { (lo.saturating_sub(1), (hi + 1).min(63)) };
    let top = observed.iter().flatten().map(|p| p.3).chain(expected.iter().flatten().copied()).fold(0.01, f64::max) * 1.12;

    let root = SVGBackend::new(path, style::SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let below_title = root.titled("Where successive entries of a table first differ: the histogram of h", (FONT, 22)).map_err(plot_error)?;
    let (subtitle_area, body) = below_title.split_vertically(28);
    let total: u64 = curves.iter().map(|c| c.fingerprints).sum();
    let subtitle = match curves {
        [one] => format!("{} fingerprints in {} tables; h = the highest differing bit (63 = the top bit)", style::thousands(one.fingerprints), one.tables.len()),
        _ => format!("{} segments, {} fingerprints; h = the highest differing bit (63 = the top bit)", curves.len(), style::thousands(total)),
    };
    subtitle_area.draw(&Text::new(subtitle, (20, 4), (FONT, 15).into_font().color(&style::BLACK))).map_err(plot_error)?;
    let (chart_area, legend_area) = body.split_horizontally(style::SIZE.0 - style::LEGEND_WIDTH);
    let mut chart = ChartBuilder::on(&chart_area)
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(f64::from(lo) - 0.5..f64::from(hi) + 0.5, 0f64..top)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_labels(((hi - lo) as usize + 1).min(16))
        .x_label_formatter(&|x| format!("{}", x.round()))
        .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
        .x_desc("h: the highest bit in which an entry differs from the one before it")
        .y_desc("share of successive pairs")
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 14))
        .max_light_lines(0)
        .bold_line_style(RGBColor(220, 220, 220))
        .draw()
        .map_err(plot_error)?;
    let mut legend = Vec::new();
    let single = drawn.len() == 1;
    for (i, (c, (points, exp))) in drawn.iter().zip(observed.iter().zip(&expected)).enumerate() {
        let color = style::LINE_COLORS[i];
        let band: Vec<(f64, f64)> = points.iter().map(|p| (f64::from(p.0), p.3)).chain(points.iter().rev().map(|p| (f64::from(p.0), p.2))).collect();
        chart.draw_series(std::iter::once(Polygon::new(band, color.mix(0.35).filled()))).map_err(plot_error)?;
        let line = Stroke { color, width: 2, dashed: false, marker: Marker::Circle };
        line.draw(&mut chart, &points.iter().map(|p| (f64::from(p.0), p.1)).collect::<Vec<_>>())?;
        let expectation = Stroke { color: if single { style::BLACK } else { color }, width: 2, dashed: true, marker: Marker::None };
        expectation.draw(&mut chart, &(lo..=hi).map(|h| (f64::from(h), exp[h as usize])).collect::<Vec<_>>())?;
        let widest = points.iter().map(|p| p.3 - p.2).fold(0.0, f64::max);
        if single {
            legend.push((Key::Stroke(line), format!("{}: mean over its {} tables", c.label, c.tables.len())));
            legend.push((Key::Band(color), format!("range across the tables (at most {:.2} percentage points apart)", widest * 100.0)));
            legend.push((Key::Stroke(expectation), format!("expected for {} uniform random fingerprints (the paper's Figure 2a)", style::thousands(c.fingerprints))));
        } else {
            legend
                .push((Key::Stroke(line), format!("{}: {} fingerprints (mean over {} tables, their range as a band)", c.label, style::thousands(c.fingerprints), c.tables.len())));
        }
    }
    if !single {
        let sample = Stroke { color: style::BLACK, width: 2, dashed: true, marker: Marker::None };
        legend.push((Key::Stroke(sample), "dashed, in each colour: expected for that many uniform random fingerprints (the paper's Figure 2a)".to_owned()));
    }
    if left_out > 0 {
        legend.push((Key::Text, format!("{left_out} smaller segments not drawn")));
    }
    legend.push((Key::Text, "Near-duplicates (fingerprints a few bits apart) add pairs at low h and move the peak right of the expectation.".to_owned()));
    style::legend(&legend_area, &legend)?;
    root.present().map_err(plot_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expectation against a simulation: sorted xorshift fingerprints, h counted.
    #[test]
    fn expected_shares_match_a_simulation() {
        let n = 200_000u64;
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut fps: Vec<u64> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        fps.sort_unstable();
        let mut counts = [0u64; 64];
        for w in fps.windows(2) {
            let d = w[0] ^ w[1];
            if d != 0 {
                counts[63 - d.leading_zeros() as usize] += 1;
            }
        }
        let expected = expected_shares(n);
        assert!((expected.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        for h in 0..64 {
            let seen = counts[h] as f64 / (n - 1) as f64;
            assert!((seen - expected[h]).abs() < 0.005, "h = {h}: simulated {seen}, expected {}", expected[h]);
        }
        let peak = (0..64).max_by(|&a, &b| expected[a].total_cmp(&expected[b])).unwrap();
        assert!((46..=47).contains(&peak), "2^17.6 fingerprints peak near h = 64 - 17.6 - 1: {peak}");
    }
}
