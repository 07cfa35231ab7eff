//! Confirmed queries over an index that stores sketches: candidates within a wide `k`,
//! each judged by the resemblance its stored sketch and the query's sketch estimate
//! ([`crate::confirm`]). Candidates and sketches come from one version of the live set, so
//! a concurrent flush or compaction cannot split them.
//!
//! Where the candidates come from (the crawler's check: the default sketch at
//! `min_similarity >= 0.9`, not `exhaustive`): a segment whose every entry has a sketch
//! and whose band file is in use is asked only through its band file, so a pair stored
//! there that shares none of the 16 bands with the query's is not found, even within the
//! design's `k` (about 1.1% of the pairs at resemblance 0.90 by the model, none whose
//! sketches differ in at most 15 of 512 bits); `exhaustive` finds it. The memtables and the
//! other segments (with entries stored without a sketch, or without a band file in use,
//! e.g. one whose page failed its checksum) are asked through their tables as well.
//!
//! Functions of a version (where the candidates and sketches come from) and of the engine
//! (the index's `k` and sketch column, which the arguments are checked against); the
//! [`super::Index`] calls that use them are `index`'s.

use super::band_batch::{BandBatch, Candidate, Judge};
use super::banded::{band_matches, BandQuery};
use super::state::Engine;
use super::version::Version;
use crate::confirm::{bands_serve, minhash_resemblance, parse_minhash_scheme, ConfirmOptions};
use crate::cpu::on_every_core;
use crate::error::{Error, Result};
use crate::query::{Match, QueryOptions};

/// The estimator of the index's sketches: `(hashes, bits)` of its b-bit MinHash scheme.
fn estimator(engine: &Engine) -> Result<(u32, u32)> {
    let column = engine.sketches.ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{}: the index stores no sketches, so candidates cannot be confirmed (query without confirmation, or create the index with sketches)",
            engine.dir.display()
        ))
    })?;
    let (_, hashes, bits) = parse_minhash_scheme(&column).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{}: the index's sketch scheme {:?} is not a b-bit MinHash this library can estimate; use `Index::query_sketched` and compare the sketches yourself",
            engine.dir.display(),
            String::from_utf8_lossy(&column.scheme)
        ))
    })?;
    Ok((u32::from(hashes), u32::from(bits)))
}

/// The candidates within `k` of `fingerprint` in `version`'s memtables and the segments
/// `asked` selects (by position), each with the sketch of its newest copy.
pub(super) fn candidates(engine: &Engine, version: &Version, fingerprint: u64, k: u32, asked: impl Fn(usize) -> bool) -> Result<Vec<(Match, Option<Vec<u8>>)>> {
    let options = QueryOptions::within(k);
    engine.check_k(&options)?;
    let mut found = Vec::new();
    version.query_tables_into(fingerprint, &options, asked, &mut found)?;
    let views = version.views();
    found.into_iter().map(|m| Ok((m, version.sketch_of(&views, m.fingerprint, m.doc_id.unwrap_or(0))?))).collect()
}

/// The confirmed near-duplicates in `version` of a document with `fingerprint` and `sketch`.
///
/// The rule: a pair stored with a sketch is a near-duplicate when its fingerprint is within
/// `options.k` and the two sketches estimate a resemblance of at least
/// `options.min_similarity`, or (band candidates, `options.band_candidates`, for the default
/// sketch at `min_similarity >= 0.9`) its sketch shares one of the 16 bands with the query's
/// and the estimate reaches `min_similarity + band_margin`, whatever the distance; a pair
/// stored without a sketch within `unsketched_k`.
///
/// Candidates, when the band files serve (the default sketch at `min_similarity >= 0.9`, a
/// query with a sketch) and not `options.exhaustive`: in a segment whose band file holds
/// every entry (every entry has a sketch: `BandSlot::whole_file`), the band file alone
/// (no table probe: such a segment may be planned with few tables,
/// `PlanOptions::for_segment`), so a pair there that shares no band with the query is not
/// found, whatever its distance (about 1.1% of the pairs at resemblance 0.90, none within
/// 15 differing bits of 512). In the memtables and the other segments, the tables within
/// the design's `k` (pairs stored without a sketch are judged there, within
/// `unsketched_k`) and, beyond it, the pairs whose sketch shares a band (a segment without
/// a band file in use: its tables within `options.k`). `options.exhaustive`, or a check
/// the band files do not serve: the tables within `options.k` everywhere (multi-probe).
pub(super) fn confirmed(engine: &Engine, version: &Version, fingerprint: u64, sketch: &[u8], options: &ConfirmOptions) -> Result<Vec<Match>> {
    confirmed_with(engine, version, fingerprint, sketch, options, &[])
}

/// [`confirmed`], with the band lookups and sketch tests of the segments `batched` holds
/// (by segment position; [`BandBatch::item`]) already done for this document.
fn confirmed_with(engine: &Engine, version: &Version, fingerprint: u64, sketch: &[u8], options: &ConfirmOptions, batched: &[Option<&[Candidate]>]) -> Result<Vec<Match>> {
    let (hashes, bits) = estimator(engine)?;
    if sketch.len() != engine.sketch_width() {
        return Err(Error::InvalidArgument(format!("a {}-byte query sketch: the index's sketches are {} bytes", sketch.len(), engine.sketch_width())));
    }
    if !(0.0..=1.0).contains(&options.min_similarity) {
        return Err(Error::InvalidArgument(format!("min_similarity {} is outside 0..=1", options.min_similarity)));
    }
    if !(0.0..=1.0).contains(&options.band_margin) {
        return Err(Error::InvalidArgument(format!("band_margin {} is outside 0..=1", options.band_margin)));
    }
    // A query without a sketch (all zero: an empty document) confirms nothing.
    let query_has_sketch = sketch.iter().any(|&b| b != 0);
    let bands_answer = query_has_sketch && bands_serve(hashes, bits, options.min_similarity);
    let table_k = options.unsketched_k.max(options.k.min(engine.k));
    // the band files answer: alone in the segments whose band file holds every entry
    let by_bands = bands_answer && !options.exhaustive;
    let alone: Vec<bool> = version.segments.iter().map(|s| by_bands && s.bands.whole_file().is_some()).collect();
    // elsewhere they find the sketched pairs within k beyond the tables' k
    let banded = by_bands && options.k > table_k;
    // band candidates: pairs sharing a band beyond k, at this resemblance
    let beyond_k = options.beyond_k_similarity(hashes, bits).filter(|_| query_has_sketch);
    let mut out = Vec::new();
    let probe_k = if banded { table_k } else { options.k.max(options.unsketched_k) };
    for (matched, stored) in candidates(engine, version, fingerprint, probe_k, |i| !alone.get(i).copied().unwrap_or(false))? {
        let similarity = match (&stored, query_has_sketch) {
            (Some(s), true) => minhash_resemblance(sketch, s, hashes, bits),
            _ => None,
        };
        let accept = match similarity {
            Some(sim) => matched.distance <= options.k && sim >= options.min_similarity,
            None => matched.distance <= options.unsketched_k,
        };
        if accept {
            out.push(Match { similarity, ..matched });
        }
    }
    if by_bands || beyond_k.is_some() {
        let query =
            BandQuery { fingerprint, sketch, hashes, bits, k: options.k, min_similarity: options.min_similarity, beyond_k, tables_found_k: !banded, alone: &alone, batched };
        for _ in 0..band_matches(version, &version.views(), &query, &mut out)? {
            engine.band_fault();
        }
        out.sort_by_key(|m| (m.distance, m.fingerprint, m.doc_id));
        out.dedup_by_key(|m| (m.fingerprint, m.doc_id));
    }
    Ok(out)
}

/// One version of an index's live set and its engine, for the confirmed checks of many
/// documents that must agree with each other ([`crate::query_confirmed_many`]).
pub(crate) struct ConfirmedView<'a> {
    engine: &'a Engine,
    version: std::sync::Arc<Version>,
}

impl<'a> ConfirmedView<'a> {
    pub(super) fn new(engine: &'a Engine) -> Self {
        ConfirmedView { engine, version: engine.visible() }
    }

    /// Bytes of the index's sketches (0 without).
    pub(crate) fn sketch_width(&self) -> usize {
        self.engine.sketch_width()
    }

    /// [`confirmed`] over this view's version.
    pub(crate) fn confirmed(&self, fingerprint: u64, sketch: &[u8], options: &ConfirmOptions) -> Result<Vec<Match>> {
        confirmed(self.engine, &self.version, fingerprint, sketch, options)
    }

    /// [`confirmed`] of every item (fingerprint, sketch of the index's width) over this
    /// view's version, in batch mode: the band lookups of the whole batch first, segment by
    /// segment, in the order of their band keys, and the candidates' sketches tested in
    /// ordinal order ([`BandBatch`]); then each item's check as [`confirmed`] makes it, on
    /// every core, with those lookups done. The same answers as one [`confirmed`] per item;
    /// `push` gets them in item order.
    pub(crate) fn confirmed_batch(&self, items: &[(u64, &[u8])], options: &ConfirmOptions, mut push: impl FnMut(Vec<Match>)) -> Result<()> {
        // the band half runs when the band files serve the check or band candidates apply
        // (otherwise, or on an index without a scheme it can estimate, the items' own checks
        // answer, errors included)
        let batch = estimator(self.engine).ok().and_then(|(hashes, bits)| {
            let serve = bands_serve(hashes, bits, options.min_similarity) && !options.exhaustive;
            (serve || options.beyond_k_similarity(hashes, bits).is_some())
                .then(|| BandBatch::new(&self.version, items, Judge { hashes, bits, min_similarity: options.min_similarity }))
        });
        let numbered: Vec<(usize, u64, &[u8])> = items.iter().enumerate().map(|(i, &(fp, sketch))| (i, fp, sketch)).collect();
        let parts = on_every_core(&numbered, 256, |part| {
            part.iter()
                .map(|&(i, fp, sketch)| {
                    let batched = batch.as_ref().map(|b| b.item(i)).unwrap_or_default();
                    confirmed_with(self.engine, &self.version, fp, sketch, options, &batched)
                })
                .collect::<Result<Vec<_>>>()
        })?;
        parts.into_iter().flatten().for_each(&mut push);
        Ok(())
    }
}
