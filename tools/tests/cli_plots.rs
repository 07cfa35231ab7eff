//! The pictures (issue 24, item 3), read back from their SVG: `tune --plot` marks the
//! recommended point where the JSON puts it, limits k to what an index supports and gives each
//! series a style of its own; `inspect --plot` scales the axis to the data, keeps the legend
//! beside it, shows the tables' spread and the expected distribution of h (the paper's Figure
//! 2a), whose peak is checked against a simulation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_simdex")).args(args).output().expect("run simdex")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}\nstdout: {}\nstderr: {}", o.status, String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

const PAGES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/corpus/pages");

/// The SVG elements of one kind: each element's attributes.
fn elements(svg: &str, tag: &str) -> Vec<BTreeMap<String, String>> {
    let open = format!("<{tag} ");
    svg.match_indices(&open)
        .map(|(at, _)| {
            let rest = &svg[at + open.len()..];
            let head = &rest[..rest.find('>').unwrap()];
            let mut attrs = BTreeMap::new();
            for part in head.split("\" ") {
                if let Some((name, value)) = part.trim().trim_end_matches('/').split_once("=\"") {
                    attrs.insert(name.to_owned(), value.trim_end_matches('"').to_owned());
                }
            }
            attrs
        })
        .collect()
}

fn num(attrs: &BTreeMap<String, String>, name: &str) -> f64 {
    attrs[name].parse().unwrap()
}

/// `<text>` elements: their attributes and their words (plotters writes them on the next line).
fn texts(svg: &str) -> Vec<(BTreeMap<String, String>, String)> {
    let lines: Vec<&str> = svg.lines().collect();
    let attrs = elements(svg, "text");
    let words: Vec<String> =
        lines.windows(2).filter(|w| w[0].trim_start().starts_with("<text")).map(|w| w[1].trim().replace("&gt;", ">").replace("&lt;", "<").replace("&apos;", "'")).collect();
    attrs.into_iter().zip(words).collect()
}

/// The axis whose tick labels are centred under it (x) or right-aligned beside it (y): each
/// label's value and pixel position.
fn ticks(svg: &str, x_axis: bool) -> Vec<(f64, f64)> {
    texts(svg)
        .into_iter()
        .filter(|(a, _)| a.get("text-anchor").map(String::as_str) == Some(if x_axis { "middle" } else { "end" }) && !a.contains_key("transform"))
        .filter_map(|(a, t)| Some((t.trim_end_matches('%').parse::<f64>().ok()?, num(&a, if x_axis { "x" } else { "y" }))))
        .collect()
}

/// The pixel of `value` on an axis, by the straight line through its first and last tick.
fn pixel(ticks: &[(f64, f64)], value: f64) -> f64 {
    let (first, last) = (ticks[0], ticks[ticks.len() - 1]);
    first.1 + (value - first.0) * (last.1 - first.1) / (last.0 - first.0)
}

/// Stroked paths (polyline and line elements) by (colour, width): how many elements each.
fn strokes(svg: &str) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for e in elements(svg, "polyline").into_iter().chain(elements(svg, "line")) {
        *out.entry((e["stroke"].clone(), e["stroke-width"].clone())).or_default() += 1;
    }
    out
}

#[test]
fn tune_plot_marks_the_recommendation_on_supported_k_with_distinct_series() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune.svg");
    let v: serde_json::Value = serde_json::from_str(&ok(&run(&["tune", PAGES, "--plot", p(&path), "--json"]))).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    // the axis: every k an index supports and no other
    let xs = ticks(&svg, true);
    assert_eq!(xs.iter().map(|t| t.0 as u32).collect::<Vec<_>>(), (0..=8).collect::<Vec<_>>(), "{xs:?}");
    // a title a person reads, not the recipe
    let all = texts(&svg);
    assert!(all[0].1.starts_with("How well Hamming distance k finds near-duplicates") && !svg.contains("simdex-fp/"), "{}", all[0].1);
    // six series, six colours; three solid and wide (one path and a legend sample each), three
    // dashed and narrower (many short paths)
    let series: Vec<((String, String), usize)> = strokes(&svg).into_iter().filter(|((c, _), _)| !["#000000", "#FFFFFF", "#DCDCDC"].contains(&c.as_str())).collect();
    assert_eq!(series.len(), 6, "{series:?}");
    assert_eq!(series.iter().map(|s| &s.0 .0).collect::<BTreeSet<_>>().len(), 6, "distinct colours: {series:?}");
    let solid: Vec<_> = series.iter().filter(|s| s.1 <= 2).collect();
    assert!(solid.len() == 3 && solid.iter().all(|s| s.0 .1 == "3"), "{series:?}");
    assert!(series.iter().filter(|s| s.1 > 9).all(|s| s.0 .1 == "2") && series.iter().filter(|s| s.1 > 9).count() == 3, "{series:?}");
    for label in ["precision, fingerprints only", "recall, fingerprints only", "F1, fingerprints only", "F1, confirmed (best t)"] {
        assert!(all.iter().any(|(_, t)| t == label), "{label} missing from the legend");
    }
    // the recommended point: a ring at (k, F1) of the JSON's recommendation, labelled
    let (k, f1) = (v["recommended"]["k"].as_f64().unwrap(), v["recommended"]["f1"].as_f64().unwrap());
    let ys = ticks(&svg, false);
    let ring = elements(&svg, "circle").into_iter().find(|c| c["r"] == "9").expect("a ring");
    assert!((num(&ring, "cx") - pixel(&xs, k)).abs() <= 1.5, "ring at x {} for k = {k} ({xs:?})", ring["cx"]);
    assert!((num(&ring, "cy") - pixel(&ys, f1)).abs() <= 2.0, "ring at y {} for F1 = {f1} ({ys:?})", ring["cy"]);
    assert!(all.iter().any(|(_, t)| *t == format!("recommended: k = {k}")), "the ring is labelled");
}

/// Counts of h for `n` sorted random fingerprints, averaged over `runs` runs: a simulation,
/// independent of the plot's formula.
fn simulated_peak(n: usize, runs: u64) -> u32 {
    let mut counts = [0u64; 64];
    for run in 0..runs {
        let mut x = 0x2545_F491_4F6C_DD1D ^ (run + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut fps: Vec<u64> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        fps.sort_unstable();
        for w in fps.windows(2) {
            if w[0] != w[1] {
                counts[63 - (w[0] ^ w[1]).leading_zeros() as usize] += 1;
            }
        }
    }
    (0..64).max_by_key(|&h| counts[h as usize]).unwrap()
}

#[test]
fn inspect_plot_scales_to_the_data_keeps_the_legend_aside_and_shows_the_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fp.txt");
    let mut x = 3u64;
    let fps: String = (0..5000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("{x:016x}\n")
        })
        .collect();
    std::fs::write(&input, fps).unwrap();
    let seg = dir.path().join("s.sdx");
    ok(&run(&["build", "--out", p(&seg), p(&input)]));
    let path = dir.path().join("h.svg");
    let report: serde_json::Value = serde_json::from_str(&ok(&run(&["inspect", p(&seg), "--plot", p(&path), "--json"]))).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    // the h the tables hold, from the JSON report
    let seen: BTreeSet<u32> =
        report["tables"].as_array().unwrap().iter().flat_map(|t| t["h_histogram"].as_object().unwrap().keys().filter_map(|h| h.parse().ok()).collect::<Vec<u32>>()).collect();
    let (lo, hi) = (*seen.first().unwrap(), *seen.last().unwrap());
    let xs = ticks(&svg, true);
    assert!(xs.len() >= 4, "{xs:?}");
    assert!(xs[0].0 >= f64::from(lo) - 1.0 && xs[xs.len() - 1].0 <= f64::from(hi) + 1.0, "ticks {xs:?} outside the data's {lo}..={hi}");
    assert!(lo > 20, "5,000 random fingerprints: no h near 0 ({lo}), so an axis from 0 would waste most of the picture");
    // the legend sits right of the chart's last tick, never over the data
    let right_edge = xs.iter().map(|t| t.1).fold(0.0, f64::max);
    let all = texts(&svg);
    for label in ["s.sdx: mean over its 4 tables", "expected for 5,000 uniform random fingerprints (the paper's Figure 2a)"] {
        let words: Vec<&str> = label.split(' ').collect();
        let first = all.iter().find(|(_, t)| t.starts_with(words[0]) && label.starts_with(t.as_str())).unwrap_or_else(|| panic!("{label} missing"));
        assert!(num(&first.0, "x") > right_edge + 20.0, "{label} at x {} over the chart (right edge {right_edge})", first.0["x"]);
    }
    let flat = all.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join(" ");
    assert!(flat.contains("expected for 5,000 uniform random fingerprints (the paper's Figure 2a)"), "{flat}");
    assert!(flat.contains("range across the tables (at most "), "{flat}");
    assert_eq!(elements(&svg, "polygon").len(), 1, "the tables' range as one band");
    // the expectation's peak (the dashed black curve's highest point) where a simulation puts it
    let dashed: Vec<(f64, f64)> = elements(&svg, "polyline")
        .into_iter()
        .filter(|e| e["stroke"] == "#000000" && e["stroke-width"] == "2")
        .flat_map(|e| e["points"].split_whitespace().map(|pt| pt.split_once(',').map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap())).unwrap()).collect::<Vec<(f64, f64)>>())
        .filter(|&(x, _)| x <= right_edge + 20.0)
        .collect();
    let top = dashed.iter().copied().fold((0.0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
    let peak = f64::from(simulated_peak(5000, 40));
    assert!(
        (top.0 - pixel(&xs, peak)).abs() <= (pixel(&xs, peak + 1.0) - pixel(&xs, peak)).abs() * 0.6,
        "expected peak at x {} (h = {peak}), drawn at {}",
        pixel(&xs, peak),
        top.0
    );
}
