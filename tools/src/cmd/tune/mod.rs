//! `simdex tune`: precision, recall and F1 of near-duplicate detection on a sample of the
//! user's own corpus, against an exact ground truth, for every k an index supports, with and
//! without confirmation by sketches (the paper's Figure 1, and the issue-11 confirmed mode);
//! then the cheapest setting within a margin of the best F1, with bootstrap intervals, as the
//! exact setting of each front; optionally the picture (`--plot FILE.svg`).
//!
//! `measure.rs` owns the figures (ground truth, pairs, counts, bootstrap); `advice.rs` turns
//! them into a recommendation and the fronts' settings; this file reads the corpus and prints.

mod advice;
#[cfg(test)]
mod index_oracle;
mod measure;

use crate::corpus::{self, ReadArgs};
use crate::progress;
use crate::recipe_args::RecipeArgs;
use advice::{describe, Advice};
use anyhow::Context;
use clap::Args as ClapArgs;
use measure::{Intervals, Setting, Tally, K_MAX, RESAMPLES};
use serde_json::json;
use simdex_fingerprint::sketch::{Sketch, SketchOptions, Sketcher};
use simdex_fingerprint::{Fingerprinter, IdfBuilder};
use std::path::PathBuf;
use std::sync::Arc;

/// Measure near-duplicate detection on a sample of your corpus and recommend a setting
///
/// Builds an exact ground truth on the sample (shingle sets, MinHash-LSH candidates, exact
/// Jaccard), then prints precision, recall and F1 of "Hamming distance <= k" for every k an
/// index supports (0..=8), and of the index's confirmed check (distance <= k and
/// sketch-estimated resemblance >= t, and for t >= 0.90 pairs beyond k whose sketches share a
/// band at t + the library's band margin; the best t per k).
///
/// It recommends the cheapest setting whose F1 is within --margin of the best. Cheapest:
/// fingerprints only within the index's design k (3) first; then a smaller k first; at one
/// k, fingerprints only, then confirmed at 0.90 (the threshold Python and Scrapy use), then
/// confirmed at the best t. The recommendation is printed as `simdex.Index(...)` arguments
/// and Scrapy settings, and as the CLI's flags: for a setting confirmed by sketch, `simdex
/// dedup` at the same k by its own rule (band candidates and a second look by exact Jaccard
/// near the threshold), with the F1 that rule measured (its table by k is printed too).
///
/// Uncertainty: 95% intervals from a bootstrap over the sampled pairs that count (those
/// that are true near-duplicates or within 8 bits): 1000 resamples drawn with replacement,
/// seeded by --seed. With fewer than 50 true pairs the estimate is called weak.
#[derive(Debug, ClapArgs)]
#[command(after_help = "Examples:\n  simdex tune corpus/ --plot tune.svg\n  simdex tune corpus/ --no-idf --json")]
pub struct Args {
    /// Files, folders (walked recursively) or `-` for standard input
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub read: ReadArgs,
    /// Documents sampled (uniformly, seeded); 0 = all
    #[arg(long, default_value_t = 5000)]
    pub sample: usize,
    /// Seed of the sample and of the bootstrap
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Jaccard similarity of word 3-shingle sets at which a pair is a near-duplicate
    #[arg(long, default_value_t = 0.9, value_parser = crate::value_parsers::fraction)]
    pub threshold: f64,
    /// Recommend the cheapest setting whose F1 is at most this far below the best
    #[arg(long, default_value_t = 0.01, value_parser = crate::value_parsers::fraction)]
    pub margin: f64,
    /// Do not learn IDF weights from the sample (dedup learns them from its input; Python
    /// and Scrapy use none)
    #[arg(long)]
    pub no_idf: bool,
    /// Sketch recipe version (2: one-permutation hashing, the default; 1: independent hash
    /// functions, what indexes created before recipe 2 keep)
    #[arg(long, default_value_t = SketchOptions::default().version)]
    pub sketch_recipe: u32,
    /// Sketch values (with --sketch-bits; at most 64 bytes in all)
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

/// Fewer true pairs than this make a weak estimate.
pub const MIN_TRUE_PAIRS: u64 = 50;

/// One row of the table: fingerprints only at k, and confirmed at the best threshold for k.
struct Row {
    fingerprint: Setting,
    confirmed: Setting,
}

/// What the run measured, for the text, the JSON and the picture.
struct Report {
    read: u64,
    sampled: usize,
    fingerprinted: usize,
    recipe: String,
    sketch: String,
    tally: Tally,
    /// The sketch's estimate against the exact Jaccard, by band of Jaccard.
    noise: Vec<measure::Noise>,
    /// `dedup`'s default rule (second look) the dedup figures are for.
    rule: measure::DedupRule,
    /// The index's check the confirmed figures are for.
    check: measure::IndexCheck,
    counted_pairs: usize,
    rows: Vec<Row>,
    advice: Option<Advice>,
    /// Intervals of the recommended and the best setting.
    intervals: Option<(Intervals, Intervals)>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let options = SketchOptions::new(args.sketch_hashes, args.sketch_bits).with_version(args.sketch_recipe);
    let mut sketcher = Sketcher::new(options)?;
    let files = corpus::expand(&args.inputs)?;
    let (docs, read) = sample(&args, &files)?;
    let mut fp = fingerprinter(&args, &docs)?;
    let bar = progress::steps(docs.len() as u64, "shingling");
    let mut kept: Vec<(u64, Vec<u64>, Sketch)> = Vec::with_capacity(docs.len());
    for text in &docs {
        bar.inc(1);
        // Documents without a fingerprint (too few words) take no part, as in dedup.
        let Ok(f) = fp.fingerprint(text) else { continue };
        let set = sketcher.shingles(text).to_vec();
        let sketch = sketcher.sketch_of_set(&set);
        kept.push((f.value, set, sketch));
    }
    bar.finish_and_clear();
    let sets: Vec<&[u64]> = kept.iter().map(|d| d.1.as_slice()).collect();
    let near = measure::near_pairs(&sets, measure::NOISE_BANDS[0])?;
    let truth = measure::ground_truth(&near, args.threshold);
    let fps: Vec<u64> = kept.iter().map(|d| d.0).collect();
    let sketches: Vec<&Sketch> = kept.iter().map(|d| &d.2).collect();
    let noise = measure::noise(&near, args.threshold, |a, b| Ok(sketches[a as usize].similarity(sketches[b as usize])?))?;
    let rule = measure::DedupRule::new(args.threshold, options);
    let check = measure::IndexCheck::new(options);
    let pairs = measure::pairs(&fps, &sketches, &sets, &truth, rule, &check)?;
    let tally = Tally::of(&pairs);
    let rows = (0..=K_MAX).map(|k| Row { fingerprint: Setting { k, confirm: None }, confirmed: Setting { k, confirm: Some(advice::best_threshold(&tally, k)) } }).collect();
    let advice = advice::recommend(&tally, args.margin);
    let intervals = advice.map(|a| {
        let i = measure::bootstrap(&pairs, &[a.recommended.0, a.best.0], args.seed);
        (i[0], i[1])
    });
    let report = Report {
        read,
        sampled: docs.len(),
        fingerprinted: kept.len(),
        recipe: fp.recipe(),
        sketch: options.recipe(),
        tally,
        noise,
        rule,
        check,
        counted_pairs: pairs.len(),
        rows,
        advice,
        intervals,
    };
    if let Some(path) = &args.plot {
        plot(path, &args, &report).with_context(|| format!("cannot draw {}", path.display()))?;
    }
    if args.json {
        out!("{}", serde_json::to_string_pretty(&to_json(&args, &report))?);
    } else {
        print_text(&args, &report)?;
    }
    Ok(())
}

/// The command that runs `dedup` on the same inputs with the same reading and recipe flags.
fn dedup_command(args: &Args) -> String {
    let mut words = vec!["simdex".to_owned(), "dedup".to_owned()];
    words.extend(args.inputs.iter().map(|p| p.to_string_lossy().into_owned()));
    words.extend(args.read.flags());
    words.extend(args.recipe.flags());
    if args.no_idf {
        words.push("--no-idf".to_owned());
    }
    words.iter().map(|w| advice::shell_word(w)).collect::<Vec<_>>().join(" ")
}

/// How each front asks for setting `s` (`advice::fronts`), with the figures its lines quote:
/// the F1 at the fronts' threshold and `s.k`, and `simdex dedup`'s own at `s.k` (its rule
/// keeps pairs at the ground truth's threshold).
fn fronts_of(args: &Args, r: &Report, s: Setting) -> Vec<advice::Front> {
    let fronts_f1 = r.tally.score(Setting { k: s.k, confirm: Some(advice::fronts_threshold()) }).f1;
    let dedup = advice::DedupFigure { threshold: (args.threshold * 100.0).round() as u32, f1: r.tally.dedup_score(s.k).f1 };
    advice::fronts(s, &dedup_command(args), fronts_f1, dedup)
}

/// Why the figures may not carry over to every front.
fn caveats(args: &Args, report: &Report, s: Setting) -> Vec<String> {
    let mut notes = Vec::new();
    if !args.no_idf || !args.recipe.is_default() {
        notes.push(format!(
            "Python and Scrapy fingerprint with the recipe pinned in the index, and a new index pins the default one (no recipe flags, no IDF weights); these figures are for {}: rerun tune with --no-idf and no recipe flags to measure theirs",
            report.recipe
        ));
    }
    if s.confirm.is_some() && report.sketch != SketchOptions::default().recipe() {
        notes.push(format!("dedup and the fronts confirm with the default sketch ({}); these figures are for {}", SketchOptions::default().recipe(), report.sketch));
    }
    notes
}

/// What a weak or empty estimate needs: more documents, from the sample or the corpus.
fn remedy(report: &Report) -> String {
    if (report.sampled as u64) < report.read {
        format!("{} of {} documents were sampled: --sample 0 (all) or a larger --sample adds pairs", report.sampled, report.read)
    } else {
        format!("every document of the corpus ({}) was sampled: only a larger corpus adds pairs", report.read)
    }
}

fn print_text(args: &Args, r: &Report) -> anyhow::Result<()> {
    out!("documents: {} read, {} sampled, {} fingerprinted; recipe {}; sketch {}", r.read, r.sampled, r.fingerprinted, r.recipe, r.sketch);
    out!("ground truth: {} pairs with exact Jaccard of word 3-shingles >= {}", r.tally.true_pairs(), args.threshold);
    out!();
    out!("{:>3}  {:>9} {:>9} {:>7} {:>7}   {:>9} {:>9} {:>7} {:>7} {:>6}", "k", "reported", "precision", "recall", "F1", "confirmed", "precision", "recall", "F1", "t");
    for row in &r.rows {
        let (f, v) = (r.tally.score(row.fingerprint), r.tally.score(row.confirmed));
        let t = row.confirmed.threshold().unwrap_or_default();
        out!(
            "{:>3}  {:>9} {:>9.4} {:>7.4} {:>7.4}   {:>9} {:>9.4} {:>7.4} {:>7.4} {:>6.2}",
            row.fingerprint.k,
            f.reported,
            f.precision,
            f.recall,
            f.f1,
            v.reported,
            v.precision,
            v.recall,
            v.f1,
            t
        );
    }
    out!("{}", confirmed_rule(r));
    out!();
    print_noise(args, r)?;
    out!();
    print_dedup(r)?;
    out!();
    let (Some(a), Some((ri, bi))) = (r.advice, r.intervals) else {
        out!(
            "no recommendation: no two of the {} fingerprinted documents have a Jaccard similarity of {} or more, so recall cannot be measured ({}); the defaults stand",
            r.fingerprinted,
            args.threshold,
            remedy(r)
        );
        return Ok(());
    };
    let (best, best_score) = a.best;
    let (rec, score) = a.recommended;
    out!("best F1: {:.3} (95% interval {:.3}-{:.3}), {}", best_score.f1, bi.f1.low, bi.f1.high, describe(best));
    if r.tally.true_pairs() < MIN_TRUE_PAIRS {
        out!("WEAK ESTIMATE: it rests on {} true pairs (fewer than {MIN_TRUE_PAIRS}); {}", r.tally.true_pairs(), remedy(r));
        let n = r.tally.true_pairs();
        out!("  (a bootstrap understates the uncertainty of so few pairs: finding all {n} would still allow missing up to 3/{n} of such pairs, at 95%)");
    }
    out!("recommended: {}, the cheapest setting within {} of the best F1", describe(rec), args.margin);
    out!(
        "  precision {:.3} ({:.3}-{:.3}), recall {:.3} ({:.3}-{:.3}), F1 {:.3} ({:.3}-{:.3})",
        score.precision,
        ri.precision.low,
        ri.precision.high,
        score.recall,
        ri.recall.low,
        ri.recall.high,
        score.f1,
        ri.f1.low,
        ri.f1.high
    );
    out!(
        "  from {} true pairs; 95% intervals: bootstrap of the {} pairs that are true or within {K_MAX} bits, {RESAMPLES} resamples, seed {}",
        r.tally.true_pairs(),
        r.counted_pairs,
        args.seed
    );
    for front in fronts_of(args, r, rec) {
        out!("  {:<8}{}", format!("{}:", front.name), front.setting);
    }
    for note in caveats(args, r, rec) {
        out!("  note: {note}");
    }
    Ok(())
}

/// The sketch's bias and noise by band of exact Jaccard, and what they do at the threshold.
fn print_noise(args: &Args, r: &Report) -> anyhow::Result<()> {
    out!("sketch estimate minus exact Jaccard, by band of exact Jaccard (every pair of the sample at {:.2} or more):", measure::NOISE_BANDS[0]);
    out!("  {:<11} {:>8} {:>8} {:>7} {:>13}", "Jaccard", "pairs", "bias", "sd", format!("wrong side of {:.2}", args.threshold));
    for n in &r.noise {
        let band = if n.high.is_infinite() { "1 (equal)".to_owned() } else { format!("{:.2}-{:.2}", n.low, n.high) };
        out!("  {:<11} {:>8} {:>+8.4} {:>7.4} {:>13}", band, n.pairs, n.bias, n.sd, n.wrong_side);
    }
    if let Some(at) = threshold_noise(args, r) {
        out!(
            "  at the threshold ({:.2}-{:.2}, {} pairs): bias {:+.4}, sd {:.4}: pairs within about {:.3} of {:.2} fall on either side by chance",
            at.low,
            at.high,
            at.pairs,
            at.bias,
            at.sd,
            2.0 * at.sd,
            args.threshold
        );
    }
    Ok(())
}

/// What the confirmed columns count: the index's check, band candidates included.
fn confirmed_rule(r: &Report) -> String {
    let fronts = advice::fronts_threshold();
    match r.check.beyond_k(fronts) {
        Some(at) => format!(
            "confirmed: the index's check (an index made at that k, its pairs in segments): pairs within k at an estimate of t or more, and, for t >= {:.2}, only those whose sketches share a band, and beyond k those at t + {:.4} or more ({at:.4} at {:.2})",
            f64::from(fronts) / 100.0,
            at - f64::from(fronts) / 100.0,
            f64::from(fronts) / 100.0
        ),
        None => "confirmed: the index's check (an index made at that k): pairs within k at an estimate of t or more (no band candidates with this sketch)".to_owned(),
    }
}

/// `dedup`'s figures by k (candidates within k or sharing a sketch band, the second look),
/// and the true pairs beyond k.
fn print_dedup(r: &Report) -> anyhow::Result<()> {
    let rule = r.rule;
    out!(
        "simdex dedup's rule: candidates within k or sharing a sketch band; kept at an estimate of {:.2} or more, or by exact Jaccard when the estimate is within {:.3}-{:.3}:",
        rule.threshold,
        rule.low,
        rule.high
    );
    out!("{:>3}  {:>9} {:>9} {:>7} {:>7}   {:>12} {:>16}", "k", "reported", "precision", "recall", "F1", "true beyond k", "of them in a band");
    for k in [3, 6, K_MAX] {
        let s = r.tally.dedup_score(k);
        let (beyond, banded) = r.tally.beyond(k);
        out!("{k:>3}  {:>9} {:>9.4} {:>7.4} {:>7.4}   {beyond:>12} {banded:>16}", s.reported, s.precision, s.recall, s.f1);
    }
    Ok(())
}

/// The noise of the pairs nearest the threshold: the bands that touch it, pooled.
fn threshold_noise(args: &Args, r: &Report) -> Option<measure::Noise> {
    let near: Vec<&measure::Noise> = r.noise.iter().filter(|n| n.pairs > 0 && n.high.is_finite() && n.low >= args.threshold - 0.021 && n.high <= args.threshold + 0.021).collect();
    let pairs: u64 = near.iter().map(|n| n.pairs).sum();
    if pairs < 2 {
        return None;
    }
    let bias = near.iter().map(|n| n.bias * n.pairs as f64).sum::<f64>() / pairs as f64;
    // pooled second moment about the pooled mean
    let second: f64 = near.iter().map(|n| (n.sd * n.sd + (n.bias - bias).powi(2)) * n.pairs as f64).sum::<f64>() / pairs as f64;
    let (low, high) = (near.iter().map(|n| n.low).fold(f64::INFINITY, f64::min), near.iter().map(|n| n.high).fold(0.0, f64::max));
    Some(measure::Noise { low, high, pairs, bias, sd: second.sqrt(), wrong_side: near.iter().map(|n| n.wrong_side).sum() })
}

fn to_json(args: &Args, r: &Report) -> serde_json::Value {
    let score = |s: Setting| {
        let x = r.tally.score(s);
        json!({"k": s.k, "confirm_threshold": s.threshold(), "reported": x.reported, "precision": x.precision, "recall": x.recall, "f1": x.f1})
    };
    let interval = |i: measure::Interval| json!([i.low, i.high]);
    let intervals = |i: &Intervals| json!({"precision": interval(i.precision), "recall": interval(i.recall), "f1": interval(i.f1)});
    let rows: Vec<_> = r.rows.iter().map(|row| json!({"k": row.fingerprint.k, "fingerprint": score(row.fingerprint), "confirmed": score(row.confirmed)})).collect();
    let (recommended, best) = match (r.advice, r.intervals) {
        (Some(a), Some((ri, bi))) => {
            let rec = a.recommended.0;
            let fronts: serde_json::Map<_, _> = fronts_of(args, r, rec).into_iter().map(|f| (f.name.to_lowercase(), json!(f.setting))).collect();
            let mut recommended = score(rec);
            recommended["interval"] = intervals(&ri);
            recommended["fronts"] = json!(fronts);
            recommended["notes"] = json!(caveats(args, r, rec));
            let mut best = score(a.best.0);
            best["interval"] = intervals(&bi);
            (recommended, best)
        }
        _ => (serde_json::Value::Null, serde_json::Value::Null),
    };
    json!({
        "documents": {"read": r.read, "sampled": r.sampled, "fingerprinted": r.fingerprinted},
        "true_pairs": r.tally.true_pairs(), "threshold": args.threshold, "recipe": r.recipe, "sketch": r.sketch,
        "rows": rows,
        "confirmed_rule": confirmed_rule(r),
        "noise": r.noise.iter().map(|n| json!({"jaccard": [n.low, if n.high.is_finite() { n.high } else { 1.0 }], "pairs": n.pairs, "bias": n.bias, "sd": n.sd, "wrong_side": n.wrong_side})).collect::<Vec<_>>(),
        "dedup": {
            "rule": {"threshold": r.rule.threshold, "second_look": [r.rule.low, r.rule.high], "band_candidates": true},
            "rows": (0..=K_MAX).map(|k| {
                let s = r.tally.dedup_score(k);
                let (beyond, banded) = r.tally.beyond(k);
                json!({"k": k, "reported": s.reported, "precision": s.precision, "recall": s.recall, "f1": s.f1, "true_beyond_k": beyond, "true_beyond_k_in_a_band": banded})
            }).collect::<Vec<_>>(),
        },
        "noise_at_threshold": threshold_noise(args, r).map(|n| json!({"jaccard": [n.low, n.high], "pairs": n.pairs, "bias": n.bias, "sd": n.sd})),
        "margin": args.margin,
        "weak": r.tally.true_pairs() < MIN_TRUE_PAIRS,
        "bootstrap": {"pairs": r.counted_pairs, "resamples": RESAMPLES, "seed": args.seed, "level": 0.95},
        "best": best,
        "recommended": recommended,
    })
}

/// The picture: precision, recall and F1 by k, both modes, the recommended point marked.
fn plot(path: &std::path::Path, args: &Args, r: &Report) -> anyhow::Result<()> {
    type Pick = fn(&measure::Score) -> f64;
    let metrics: [(&str, Pick); 3] = [("precision", |s| s.precision), ("recall", |s| s.recall), ("F1", |s| s.f1)];
    let mut lines = Vec::new();
    for confirmed in [false, true] {
        for (name, pick) in metrics {
            let points = r.rows.iter().map(|row| (row.fingerprint.k, pick(&r.tally.score(if confirmed { row.confirmed } else { row.fingerprint })))).collect();
            lines.push(crate::plot::Line { name: if confirmed { format!("{name}, confirmed (best t)") } else { format!("{name}, fingerprints only") }, points });
        }
    }
    let mark = match (r.advice, r.intervals) {
        (Some(a), Some((ri, _))) => Some(crate::plot::Mark {
            k: a.recommended.0.k,
            value: a.recommended.1.f1,
            low: ri.f1.low,
            high: ri.f1.high,
            label: format!("recommended: {} (F1 {:.3}, 95% {:.3}-{:.3})", describe(a.recommended.0), a.recommended.1.f1, ri.f1.low, ri.f1.high),
        }),
        _ => None,
    };
    let weak = if r.tally.true_pairs() < MIN_TRUE_PAIRS { ", a weak estimate" } else { "" };
    let subtitle = format!("{} documents, {} true pairs (word 3-shingle Jaccard >= {}){weak}", r.fingerprinted, r.tally.true_pairs(), args.threshold);
    crate::plot::tune_svg(path, "How well Hamming distance k finds near-duplicates in your corpus", &subtitle, &lines, mark.as_ref(), K_MAX)
}

/// The sampled documents' texts, and how many documents were read: a uniform sample
/// (reservoir, seeded) of `--sample` documents, or all.
fn sample(args: &Args, files: &[PathBuf]) -> anyhow::Result<(Vec<String>, u64)> {
    let bar = progress::steps(files.len() as u64, "reading");
    let mut docs: Vec<String> = Vec::new();
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
                docs.push(text);
            } else {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let at = (rng % seen) as usize;
                if let Some(slot) = docs.get_mut(at) {
                    *slot = text;
                }
            }
            Ok(None)
        },
        |_| {},
    )?;
    bar.finish_and_clear();
    Ok((docs, seen))
}

/// The recipe's fingerprinter, with IDF weights learned from the sample unless `--no-idf`
/// or `--idf` (as dedup learns them from its input).
fn fingerprinter(args: &Args, docs: &[String]) -> anyhow::Result<Fingerprinter> {
    let mut fp = args.recipe.fingerprinter()?;
    if args.no_idf || args.recipe.idf.is_some() {
        return Ok(fp);
    }
    let mut builder = IdfBuilder::new(fp.options().feature_recipe());
    for text in docs {
        builder.add_document(&fp.distinct_features(text));
    }
    Ok(fp.with_idf(Arc::new(builder.build(1)))?)
}
