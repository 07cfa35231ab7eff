//! `simdex tune`'s advice: the cheapest setting whose F1 is within a margin of the best, and
//! how to ask for it in each front (the CLI's flags, `simdex.Index(...)`, Scrapy settings).
//!
//! Cost order, cheapest first: fingerprints alone within the index's design k (one table
//! query, no sketch); then by k (fewer tables or probes per query), and at one k
//! fingerprints alone (no 64-byte sketch per document), then confirmed by sketch at the
//! fronts' threshold (0.90, the only one Python and Scrapy offer), then confirmed at the
//! threshold that measured best at that k (the CLI's `--confirm-threshold`). A confirmed
//! check at any k costs at least a query at the design k: it runs one, and looks the sketch's
//! bands up for the band candidates.

use simdex_fingerprint::DEFAULT_UNCONFIRMED_K;

use super::measure::{Score, Setting, Tally, K_MAX, THRESHOLDS};

/// The resemblance the library's document calls confirm at (Python and Scrapy cannot set
/// another), in hundredths.
pub fn fronts_threshold() -> u32 {
    (simdex::ConfirmOptions::default().min_similarity * 100.0).round() as u32
}

/// At `k`, the confirmation threshold with the best F1; of equals, the nearest to the
/// fronts' threshold (the middle of a flat optimum rather than its edge).
pub fn best_threshold(tally: &Tally, k: u32) -> u32 {
    let fronts = fronts_threshold();
    let mut best = (fronts, tally.score(Setting { k, confirm: Some(fronts) }).f1);
    for t in THRESHOLDS {
        let f1 = tally.score(Setting { k, confirm: Some(t) }).f1;
        if f1 > best.1 || (f1 == best.1 && t.abs_diff(fronts) < best.0.abs_diff(fronts)) {
            best = (t, f1);
        }
    }
    best.0
}

/// Every setting tune can recommend, cheapest first (the module's cost order).
pub fn by_cost(tally: &Tally) -> Vec<Setting> {
    let fronts = fronts_threshold();
    let design_k = simdex::IndexOptions::default().k.min(K_MAX);
    let mut out: Vec<Setting> = (0..=design_k).map(|k| Setting { k, confirm: None }).collect();
    for k in 0..=K_MAX {
        if k > design_k {
            out.push(Setting { k, confirm: None });
        }
        out.push(Setting { k, confirm: Some(fronts) });
        let best = best_threshold(tally, k);
        if best != fronts {
            out.push(Setting { k, confirm: Some(best) });
        }
    }
    out
}

/// The setting with the best F1 (the cheapest of equals), and the one recommended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Advice {
    pub best: (Setting, Score),
    pub recommended: (Setting, Score),
}

/// The best setting, and the cheapest within `margin` of its F1; `None` when the sample has
/// no true pair (recall cannot be measured, so nothing can be recommended).
pub fn recommend(tally: &Tally, margin: f64) -> Option<Advice> {
    if tally.true_pairs() == 0 {
        return None;
    }
    let scored: Vec<(Setting, Score)> = by_cost(tally).into_iter().map(|s| (s, tally.score(s))).collect();
    // the first of the best F1s: the cheapest of them
    let best = scored.iter().copied().reduce(|a, b| if b.1.f1 > a.1.f1 { b } else { a })?;
    let recommended = scored.iter().copied().find(|(_, s)| s.f1 >= best.1.f1 - margin)?;
    Some(Advice { best, recommended })
}

/// The setting in words: "fingerprints only, k = 4" or "confirmed by sketch at 0.90, k = 4".
pub fn describe(s: Setting) -> String {
    match s.threshold() {
        None => format!("fingerprints only, k = {}", s.k),
        Some(t) => format!("confirmed by sketch at resemblance >= {t:.2}, k = {}", s.k),
    }
}

/// Where the recommendation is to be used.
pub struct Front {
    pub name: &'static str,
    pub setting: String,
}

/// The index directory the Python and Scrapy lines name.
const INDEX: &str = "crawl.simdex";

/// `simdex dedup`'s own figure at a setting's k: the threshold its rule keeps pairs at (the
/// ground truth's, in hundredths) and the F1 its rule measured there (`Tally::dedup_score`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DedupFigure {
    pub threshold: u32,
    pub f1: f64,
}

/// How to ask for `s` in each front: `dedup` is the start of the CLI command (`simdex dedup`,
/// the inputs and the reading and recipe flags tune was given). `fronts_f1` is the F1
/// measured at the fronts' threshold and `s.k`, quoted when `s` needs another.
///
/// A setting confirmed by sketch is the index's check (what Python and Scrapy run); `simdex
/// dedup` confirms by its own rule (band candidates, a second look by exact Jaccard near the
/// threshold), so its line asks for the same k at the rule's threshold and quotes the F1 the
/// rule measured there (`dedup_at_k`), not the check's.
pub fn fronts(s: Setting, dedup: &str, fronts_f1: f64, dedup_at_k: DedupFigure) -> Vec<Front> {
    let k = s.k;
    let fronts = fronts_threshold();
    let cli = match s.threshold() {
        None => format!("{dedup} -k {k} --no-confirm"),
        Some(_) => {
            let threshold = if dedup_at_k.threshold == fronts { String::new() } else { format!(" --confirm-threshold {:.2}", f64::from(dedup_at_k.threshold) / 100.0) };
            format!(
                "{dedup} -k {k}{threshold}   (dedup's own rule: candidates within k or sharing a sketch band, a second look by exact Jaccard near the threshold: F1 {:.3}; the F1 above is the index's check, as Python and Scrapy run it)",
                dedup_at_k.f1
            )
        }
    };
    let at = format!("{:.2}", f64::from(fronts) / 100.0);
    let (python, scrapy) = match s.confirm {
        // The document calls let fingerprints alone decide within at most
        // DEFAULT_UNCONFIRMED_K unless asked for more (`confirm=False`): said where k needs it.
        None if k > DEFAULT_UNCONFIRMED_K => (
            format!("simdex.Index(\"{INDEX}\", k={k}, sketches=False); idx.find_or_insert_document(page, doc_id, k={k}, confirm=False)   (fingerprints alone beyond {DEFAULT_UNCONFIRMED_K} only when asked: confirm=False)"),
            format!("SIMDEX_INDEX = \"{INDEX}\"; SIMDEX_K = {k}; SIMDEX_CONFIRM = False   (fingerprints alone beyond {DEFAULT_UNCONFIRMED_K} only when asked; made beforehand without sketches: simdex.Index(\"{INDEX}\", k={k}, sketches=False).close())"),
        ),
        None => (
            format!("simdex.Index(\"{INDEX}\", k={k}, sketches=False)"),
            format!("SIMDEX_INDEX = \"{INDEX}\"; SIMDEX_K = {k}   (made beforehand without sketches: simdex.Index(\"{INDEX}\", k={k}, sketches=False).close())"),
        ),
        Some(t) if t == fronts => (
            format!("simdex.Index(\"{INDEX}\", k={k})   (sketches=True, the default: confirmed at {at})"),
            format!("SIMDEX_INDEX = \"{INDEX}\"; SIMDEX_K = {k}   (a new index stores sketches: confirmed at {at})"),
        ),
        Some(_) => {
            let nearest = format!("confirms at {at} only; the nearest setting measured F1 {fronts_f1:.3}");
            (format!("simdex.Index(\"{INDEX}\", k={k})   ({nearest})"), format!("SIMDEX_INDEX = \"{INDEX}\"; SIMDEX_K = {k}   ({nearest})"))
        }
    };
    vec![Front { name: "CLI", setting: cli }, Front { name: "Python", setting: python }, Front { name: "Scrapy", setting: scrapy }]
}

/// A word for the shell: as it is when it needs no quoting, else in single quotes.
pub fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::measure::Pair;
    use super::*;

    /// Five true pairs at distances 0, 0, 1, 2, 5 (resemblance 0.95), two false ones at 1 and
    /// 2 (0.5). Fingerprints only, F1 by k: 0.571, 0.667, 0.727, 0.727, 0.727, 0.833; confirmed
    /// at 0.90: 0.571, 0.75, 0.889, 0.889, 0.889, 1.
    fn tally() -> Tally {
        let mut pairs: Vec<Pair> = [0, 0, 1, 2, 5].iter().map(|&d| Pair::of(d, true, 0.95)).collect();
        pairs.extend([1, 2].iter().map(|&d| Pair::of(d, false, 0.5)));
        Tally::of(&pairs)
    }

    #[test]
    fn the_cheapest_setting_within_the_margin_is_recommended() {
        let t = tally();
        let confirmed = |k| Setting { k, confirm: Some(fronts_threshold()) };
        let a = recommend(&t, 0.01).unwrap();
        assert_eq!(a.best.0, confirmed(5), "F1 1 first at k = 5, confirmed");
        assert_eq!(a.recommended.0, confirmed(5));
        // within 0.2 of 1: the first setting of F1 >= 0.8 in cost order is k = 2, confirmed
        assert_eq!(recommend(&t, 0.2).unwrap().recommended.0, confirmed(2));
        // within 0.5: k = 0, fingerprints only (0.571), before k = 0 confirmed (as good)
        assert_eq!(recommend(&t, 0.5).unwrap().recommended.0, Setting { k: 0, confirm: None });
        assert!(recommend(&Tally::of(&[Pair::of(1, false, 0.99)]), 0.01).is_none(), "no true pair, no advice");
    }

    #[test]
    fn the_best_threshold_of_equals_is_the_nearest_to_the_fronts() {
        // every threshold from 0.70 to 0.95 keeps exactly the true pairs
        assert_eq!(best_threshold(&tally(), 5), fronts_threshold());
        let high: Vec<Pair> = vec![Pair::of(1, true, 0.99), Pair::of(1, false, 0.93)];
        assert_eq!(best_threshold(&Tally::of(&high), 1), 94, "0.94 is the lowest threshold dropping the false pair");
    }

    #[test]
    fn each_front_gets_its_own_words_for_the_setting() {
        let dedup = "simdex dedup pages";
        let rule = DedupFigure { threshold: 90, f1: 0.9975 };
        let f = fronts(Setting { k: 3, confirm: None }, dedup, 0.0, rule);
        let lines: Vec<(&str, &str)> = f.iter().map(|f| (f.name, f.setting.as_str())).collect();
        assert_eq!(lines[0], ("CLI", "simdex dedup pages -k 3 --no-confirm"));
        assert_eq!(lines[1], ("Python", "simdex.Index(\"crawl.simdex\", k=3, sketches=False)"));
        assert!(lines[2].1.starts_with("SIMDEX_INDEX = \"crawl.simdex\"; SIMDEX_K = 3 ") && lines[2].1.contains("sketches=False"), "{lines:?}");
        // beyond 3, fingerprints alone decide only when the document call asks (confirm=False)
        let f = fronts(Setting { k: 4, confirm: None }, dedup, 0.0, rule);
        assert_eq!(f[0].setting, "simdex dedup pages -k 4 --no-confirm");
        assert!(f[1].setting.starts_with("simdex.Index(\"crawl.simdex\", k=4, sketches=False); idx.find_or_insert_document(page, doc_id, k=4, confirm=False)"), "{}", f[1].setting);
        assert!(f[2].setting.starts_with("SIMDEX_INDEX = \"crawl.simdex\"; SIMDEX_K = 4; SIMDEX_CONFIRM = False "), "{}", f[2].setting);
        // confirmed: dedup's line is its own rule at that k (the truth's threshold), with its F1
        let f = fronts(Setting { k: 6, confirm: Some(90) }, dedup, 0.0, rule);
        assert!(f[0].setting.starts_with("simdex dedup pages -k 6   (dedup's own rule") && f[0].setting.contains("F1 0.998;"), "{}", f[0].setting);
        assert!(f[1].setting.starts_with("simdex.Index(\"crawl.simdex\", k=6)") && f[2].setting.contains("SIMDEX_K = 6"));
        let f = fronts(Setting { k: 6, confirm: Some(95) }, dedup, 0.8766, rule);
        assert!(f[0].setting.starts_with("simdex dedup pages -k 6   ("), "the check's threshold is not dedup's: {}", f[0].setting);
        let f = fronts(Setting { k: 6, confirm: Some(95) }, dedup, 0.8766, DedupFigure { threshold: 85, f1: 0.95 });
        assert!(f[0].setting.starts_with("simdex dedup pages -k 6 --confirm-threshold 0.85   (") && f[0].setting.contains("F1 0.950;"), "{}", f[0].setting);
        assert!(f[1].setting.contains("confirms at 0.90 only; the nearest setting measured F1 0.877"), "{}", f[1].setting);
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("fixtures/corpus/pages"), "fixtures/corpus/pages");
        assert_eq!(shell_word("my pages"), "'my pages'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
