//! `simdex tune`: precision, recall and F1 of near-duplicate detection on a sample of the
//! user's own corpus, against an exact ground truth, for k = 0..10, with and without
//! confirmation by sketches (the paper's Figure 1, and the issue-11 confirmed mode); then a
//! recommendation, and optionally the picture (`--plot FILE.svg`).
//!
//! Ground truth, independent of fingerprints: a pair is a near-duplicate when the exact
//! Jaccard similarity of the two documents' word 3-shingle sets (the sketch's tokens and
//! shingles, `simdex_fingerprint::sketch`) is at least `--threshold`. Candidate pairs come
//! from MinHash LSH (20 bands of 5 rows: a pair at Jaccard 0.9 is missed with probability
//! below 1e-7, at 0.7 below 1e-3), and every candidate's Jaccard is computed exactly.

use crate::corpus::{self, ReadArgs};
use crate::progress;
use crate::recipe_args::RecipeArgs;
use anyhow::{bail, Context};
use clap::Args as ClapArgs;
use serde_json::json;
use simdex_fingerprint::sketch::{jaccard, Sketch, SketchOptions, Sketcher};
use simdex_fingerprint::{Fingerprinter, IdfBuilder};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Measure near-duplicate quality on a sample of a corpus and recommend k and a threshold
///
/// Builds an exact ground truth on the sample (shingle sets, MinHash-LSH candidates, exact
/// Jaccard), then prints precision, recall and F1 of "Hamming distance <= k" for k = 0..10,
/// and of the confirmed mode (distance <= k and sketch-estimated resemblance >= t, the best t
/// per k). Example: `simdex tune pages/ --plot tune.svg`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Files, folders (walked recursively) or `-` for standard input
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub read: ReadArgs,
    /// Documents sampled (uniformly, seeded); 0 = all
    #[arg(long, default_value_t = 5000)]
    pub sample: usize,
    /// Sampling seed
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Jaccard similarity of word 3-shingle sets at which a pair is a near-duplicate
    #[arg(long, default_value_t = 0.9, value_parser = crate::value_parsers::fraction)]
    pub threshold: f64,
    /// Do not learn IDF weights from the sample (dedup learns them from its input)
    #[arg(long)]
    pub no_idf: bool,
    /// Sketch hash functions (with --sketch-bits; at most 64 bytes in all)
    #[arg(long, default_value_t = SketchOptions::default().hashes)]
    pub sketch_hashes: u32,
    /// Bits kept per sketch hash (1, 2, 4, 8 or 16)
    #[arg(long, default_value_t = SketchOptions::default().bits)]
    pub sketch_bits: u32,
    /// Draw precision, recall and F1 by k (with and without confirmation) to FILE.svg
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub recipe: RecipeArgs,
}

/// Largest k measured.
pub const K_MAX: u32 = 10;
/// Fewest true pairs for which the figures mean anything.
pub const MIN_TRUE_PAIRS: usize = 50;
/// Confirmation thresholds tried: 0.70, 0.71, .., 0.99.
fn thresholds() -> impl Iterator<Item = f64> {
    (70..100).map(|t| f64::from(t) / 100.0)
}

/// Precision, recall and F1 of one configuration.
#[derive(Clone, Copy, Debug, Default)]
pub struct Score {
    pub reported: u64,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

impl Score {
    fn new(reported: u64, tp: u64, true_pairs: u64) -> Self {
        let precision = if reported == 0 { 1.0 } else { tp as f64 / reported as f64 };
        let recall = if true_pairs == 0 { 0.0 } else { tp as f64 / true_pairs as f64 };
        let f1 = if precision + recall == 0.0 { 0.0 } else { 2.0 * precision * recall / (precision + recall) };
        Score { reported, precision, recall, f1 }
    }
}

/// One row of the table: k, fingerprint only, and confirmed at the best threshold.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub k: u32,
    pub fingerprint: Score,
    pub confirmed: Score,
    pub threshold: f64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let options = SketchOptions { hashes: args.sketch_hashes, bits: args.sketch_bits };
    let mut sketcher = Sketcher::new(options)?;
    let files = corpus::expand(&args.inputs)?;
    let docs = sample(&args, &files)?;
    let mut fp = fingerprinter(&args, &docs)?;
    let bar = progress::steps(docs.len() as u64, "shingling");
    let mut kept: Vec<(String, u64, Vec<u64>, Sketch)> = Vec::with_capacity(docs.len());
    for (id, text) in &docs {
        bar.inc(1);
        // Documents without a fingerprint (too few words) take no part, as in dedup.
        let Ok(f) = fp.fingerprint(text) else { continue };
        let set = sketcher.shingles(text).to_vec();
        let sketch = sketcher.sketch_of_set(&set);
        kept.push((id.clone(), f.value, set, sketch));
    }
    bar.finish_and_clear();
    let sets: Vec<&[u64]> = kept.iter().map(|d| d.2.as_slice()).collect();
    let truth = ground_truth(&sets, args.threshold)?;
    let fps: Vec<u64> = kept.iter().map(|d| d.1).collect();
    let sketches: Vec<&Sketch> = kept.iter().map(|d| &d.3).collect();
    let rows = score(&fps, &sketches, &truth)?;
    let true_pairs = truth.len();
    let best_fp = rows.iter().max_by(|a, b| a.fingerprint.f1.total_cmp(&b.fingerprint.f1)).copied();
    let best_confirmed = rows.iter().max_by(|a, b| a.confirmed.f1.total_cmp(&b.confirmed.f1)).copied();
    if let Some(path) = &args.plot {
        type Pick = fn(&Row) -> f64;
        let series: [(&str, Pick, bool); 6] = [
            ("precision", |r| r.fingerprint.precision, false),
            ("recall", |r| r.fingerprint.recall, false),
            ("F1", |r| r.fingerprint.f1, false),
            ("confirmed precision", |r| r.confirmed.precision, true),
            ("confirmed recall", |r| r.confirmed.recall, true),
            ("confirmed F1", |r| r.confirmed.f1, true),
        ];
        let lines: Vec<_> = series.iter().map(|&(name, pick, confirmed)| (name, confirmed, rows.iter().map(|r| (r.k, pick(r))).collect())).collect();
        crate::plot::tune_svg(path, &lines, K_MAX, &fp.recipe()).with_context(|| format!("cannot draw {}", path.display()))?;
    }
    if args.json {
        let row = |r: &Row| {
            json!({"k": r.k, "reported": r.fingerprint.reported, "precision": r.fingerprint.precision, "recall": r.fingerprint.recall, "f1": r.fingerprint.f1,
                   "confirmed": {"threshold": r.threshold, "reported": r.confirmed.reported, "precision": r.confirmed.precision, "recall": r.confirmed.recall, "f1": r.confirmed.f1}})
        };
        let out = json!({"documents": kept.len(), "true_pairs": true_pairs, "threshold": args.threshold, "recipe": fp.recipe(), "sketch": options.recipe(),
                         "rows": rows.iter().map(row).collect::<Vec<_>>(),
                         "recommended": best_confirmed.map(|r| json!({"k": r.k, "threshold": r.threshold, "f1": r.confirmed.f1})),
                         "recommended_fingerprint_only": best_fp.map(|r| json!({"k": r.k, "f1": r.fingerprint.f1}))});
        out!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        out!("documents: {} sampled, {} fingerprinted; recipe {}; sketch {}", docs.len(), kept.len(), fp.recipe(), options.recipe());
        out!("ground truth: {true_pairs} pairs with exact Jaccard of word 3-shingles >= {}", args.threshold);
        out!();
        out!("{:>3}  {:>9} {:>9} {:>7} {:>7}   {:>9} {:>9} {:>7} {:>7} {:>6}", "k", "reported", "precision", "recall", "F1", "confirmed", "precision", "recall", "F1", "t");
        for r in &rows {
            let (f, v) = (r.fingerprint, r.confirmed);
            out!(
                "{:>3}  {:>9} {:>9.4} {:>7.4} {:>7.4}   {:>9} {:>9.4} {:>7.4} {:>7.4} {:>6.2}",
                r.k,
                f.reported,
                f.precision,
                f.recall,
                f.f1,
                v.reported,
                v.precision,
                v.recall,
                v.f1,
                r.threshold
            );
        }
    }
    if true_pairs < MIN_TRUE_PAIRS {
        bail!(
            "the sample is too small to tune on: {true_pairs} true near-duplicate pairs found among {} documents (at least {MIN_TRUE_PAIRS} needed); give a larger corpus or --sample",
            kept.len()
        );
    }
    if !args.json {
        if let (Some(f), Some(v)) = (best_fp, best_confirmed) {
            out!();
            out!("fingerprint only: best k = {} (precision {:.3}, recall {:.3}, F1 {:.3})", f.k, f.fingerprint.precision, f.fingerprint.recall, f.fingerprint.f1);
            out!(
                "recommended: confirmed, k = {} and estimated resemblance >= {:.2} (precision {:.3}, recall {:.3}, F1 {:.3})",
                v.k,
                v.threshold,
                v.confirmed.precision,
                v.confirmed.recall,
                v.confirmed.f1
            );
        }
    }
    Ok(())
}

/// The sampled documents' ids and texts: a uniform sample (reservoir, seeded) of
/// `--sample` documents, or all.
fn sample(args: &Args, files: &[PathBuf]) -> anyhow::Result<Vec<(String, String)>> {
    let bar = progress::steps(files.len() as u64, "reading");
    let mut docs: Vec<(String, String)> = Vec::new();
    let mut seen = 0u64;
    let mut rng = args.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let utf8 = args.read.invalid_utf8();
    corpus::for_each_doc(
        files,
        &args.read,
        &bar,
        |mut doc| {
            let text = match doc.text(utf8) {
                Ok(t) => t,
                Err(e) => return Ok(Some(e.to_string())),
            };
            seen += 1;
            if args.sample == 0 || docs.len() < args.sample {
                docs.push((doc.id, text));
            } else {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let at = (rng % seen) as usize;
                if let Some(slot) = docs.get_mut(at) {
                    *slot = (doc.id, text);
                }
            }
            Ok(None)
        },
        |_| {},
    )?;
    bar.finish_and_clear();
    Ok(docs)
}

/// The recipe's fingerprinter, with IDF weights learned from the sample unless `--no-idf`
/// or `--idf` (as dedup learns them from its input).
fn fingerprinter(args: &Args, docs: &[(String, String)]) -> anyhow::Result<Fingerprinter> {
    let mut fp = args.recipe.fingerprinter()?;
    if args.no_idf || args.recipe.idf.is_some() {
        return Ok(fp);
    }
    let mut builder = IdfBuilder::new(fp.options().feature_recipe());
    for (_, text) in docs {
        builder.add_document(&fp.distinct_features(text));
    }
    Ok(fp.with_idf(Arc::new(builder.build(1)))?)
}

/// The true near-duplicate pairs `(i, j)`, `i < j`, sorted: MinHash-LSH candidates whose
/// exact Jaccard is at least `threshold`.
pub fn ground_truth(sets: &[&[u64]], threshold: f64) -> anyhow::Result<Vec<(u32, u32)>> {
    const BANDS: usize = 20;
    const ROWS: usize = 5;
    let lsh = Sketcher::new(SketchOptions { hashes: (BANDS * ROWS) as u32, bits: 4 })?;
    let mut buckets: HashMap<(usize, u64), Vec<u32>> = HashMap::new();
    for (i, set) in sets.iter().enumerate() {
        let sig = lsh.min_shingles(set);
        for (band, rows) in sig.chunks(ROWS).enumerate() {
            let key = rows.iter().fold(band as u64, |acc, &v| simdex_fingerprint::hash::combine(acc, v));
            buckets.entry((band, key)).or_default().push(i as u32);
        }
    }
    let mut candidates: Vec<(u32, u32)> = Vec::new();
    for members in buckets.values() {
        for (x, &a) in members.iter().enumerate() {
            candidates.extend(members[x + 1..].iter().map(|&b| (a.min(b), a.max(b))));
        }
    }
    candidates.sort_unstable();
    candidates.dedup();
    candidates.retain(|&(a, b)| jaccard(sets[a as usize], sets[b as usize]) >= threshold);
    Ok(candidates)
}

/// Scores for k = 0..=K_MAX: every pair of documents is compared (a popcount each).
fn score(fps: &[u64], sketches: &[&Sketch], truth: &[(u32, u32)]) -> anyhow::Result<Vec<Row>> {
    let t: Vec<f64> = thresholds().collect();
    // reported[k], tp[k]; confirmed counts per (k, threshold) by distance and threshold.
    let mut reported = [0u64; K_MAX as usize + 1];
    let mut tp = [0u64; K_MAX as usize + 1];
    let mut v_reported = vec![[0u64; K_MAX as usize + 1]; t.len()];
    let mut v_tp = vec![[0u64; K_MAX as usize + 1]; t.len()];
    for i in 0..fps.len() {
        for j in i + 1..fps.len() {
            let d = (fps[i] ^ fps[j]).count_ones();
            if d > K_MAX {
                continue;
            }
            let is_true = truth.binary_search(&(i as u32, j as u32)).is_ok();
            let est = sketches[i].similarity(sketches[j])?;
            reported[d as usize] += 1;
            tp[d as usize] += u64::from(is_true);
            for (x, &th) in t.iter().enumerate() {
                if est >= th {
                    v_reported[x][d as usize] += 1;
                    v_tp[x][d as usize] += u64::from(is_true);
                }
            }
        }
    }
    let n_true = truth.len() as u64;
    let cum = |a: &[u64; K_MAX as usize + 1], k: u32| a[..=k as usize].iter().sum::<u64>();
    Ok((0..=K_MAX)
        .map(|k| {
            let fingerprint = Score::new(cum(&reported, k), cum(&tp, k), n_true);
            let (threshold, confirmed) = t
                .iter()
                .enumerate()
                .map(|(x, &th)| (th, Score::new(cum(&v_reported[x], k), cum(&v_tp[x], k), n_true)))
                .max_by(|a, b| a.1.f1.total_cmp(&b.1.f1))
                .unwrap_or((0.0, Score::default()));
            Row { k, fingerprint, confirmed, threshold }
        })
        .collect())
}
