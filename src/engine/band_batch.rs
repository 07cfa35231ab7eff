//! The band half of many documents' checks at once (the paper's batch mode for the
//! crawler's check, `confirmed::ConfirmedView::confirmed_many`): for each segment's band
//! file, every band's lookups of the whole batch in the order of their band keys (so the
//! walk goes through each band's entry pages once, in order, a lookup per distinct key,
//! instead of a seek per document), then every candidate's stored sketch read in ordinal
//! order (the sketch column once, in order) and judged by the check's own test (shares a
//! band, resemblance at least `min_similarity`), and the survivors' fingerprints and ids
//! read in ordinal order too. Each walk asks the CPU for what it reads a few steps ahead
//! ([`AHEAD`]): against a large segment every key's block and every candidate's sketch is
//! a new cache line, so that their reads overlap (issue 48: a 2^20 batch against 2^26
//! stored reads most of the band file). What is left per document is what
//! `banded::band_matches` does after its lookup (the survivors' distances, tombstones,
//! newer copies) and the rest of the check (memtables, other segments): the same code, so
//! the same answers as one check per document.
//!
//! A segment whose lookups or reads fail here (a band page failing its checksum, a damaged
//! id page) is left to each document's own check, which sets its band file aside and asks
//! the tables, as one check at a time does.

use super::version::Version;
use crate::bands::{band_key, is_empty_sketch, shares_band, BandFile};
use crate::confirm::minhash_resemblance;
use crate::cpu::on_every_core;
use crate::error::Result;
use crate::segment::Segment;

/// What the batch's band lookups kept, by segment position (`None`: each document looks
/// the segment up itself).
pub(crate) struct BandBatch {
    segments: Vec<Option<Kept>>,
}

/// One segment's kept candidates: item `i`'s are `kept[offsets[i]..offsets[i + 1]]`, in
/// ordinal order.
struct Kept {
    offsets: Vec<usize>,
    kept: Vec<Candidate>,
}

/// A candidate whose sketch shares a band with the query's and passes the threshold: its
/// ordinal, the resemblance, and (when the batch read them) its fingerprint and document id.
pub(super) type Candidate = (u64, f64, Option<(u64, u64)>);

/// Keys (of a band's sorted walk), pairs (of the ordinal-ordered sketch tests) and kept
/// candidates (of the ordinal-ordered reads of fingerprints and ids) a walk asks the CPU
/// for ahead of the one it reads: against a large segment each is a new cache line (and
/// often a new page), so that their reads overlap instead of each waiting in turn.
const AHEAD: usize = 8;

/// The judge of a candidate: the b-bit MinHash scheme and the threshold.
#[derive(Clone, Copy)]
pub(super) struct Judge {
    pub hashes: u32,
    pub bits: u32,
    pub min_similarity: f64,
}

impl BandBatch {
    /// The band lookups and sketch tests of `items` (fingerprint, sketch) in every segment
    /// of `version` with a band file in use. Items without a sketch (all zero) get none.
    pub(super) fn new(version: &Version, items: &[(u64, &[u8])], judge: Judge) -> BandBatch {
        let segments = version.segments.iter().map(|s| s.bands.file().and_then(|bands| segment_batch(&s.segment, &bands, items, judge).ok())).collect();
        BandBatch { segments }
    }

    /// Item `i`'s kept candidates, by segment position (`None`: not looked up here).
    pub(super) fn item(&self, i: usize) -> Vec<Option<&[Candidate]>> {
        self.segments.iter().map(|s| s.as_ref().map(|k| k.offsets.get(i).zip(k.offsets.get(i + 1)).and_then(|(&a, &b)| k.kept.get(a..b)).unwrap_or_default())).collect()
    }
}

/// One segment's band lookups of the batch (the bands split over the cores, each band's
/// keys in order, one lookup per distinct key), then the candidates' sketches in ordinal
/// order (split over the cores), each judged as `band_matches` judges it, and the kept
/// ones' fingerprints and ids read in ordinal order too (what `band_matches` reads of each).
fn segment_batch(segment: &Segment, bands: &BandFile, items: &[(u64, &[u8])], judge: Judge) -> Result<Kept> {
    let design = bands.design();
    let all: Vec<u32> = (0..design.bands).collect();
    let found = on_every_core(&all, 1, |part| {
        let (mut out, mut keys, mut ordinals) = (Vec::new(), Vec::with_capacity(items.len()), Vec::new());
        for &b in part {
            keys.clear();
            keys.extend(items.iter().zip(0u32..).filter(|((_, s), _)| !is_empty_sketch(s)).filter_map(|((_, s), i)| band_key(s, b).map(|k| (k, i))));
            keys.sort_unstable();
            // each distinct key's block located (and asked of the CPU) AHEAD keys early
            let first_keys = || keys.chunk_by(|x, y| x.0 == y.0).filter_map(<[_]>::first).map(|&(key, _)| key);
            let mut located = [None; AHEAD];
            for (slot, key) in located.iter_mut().zip(first_keys()) {
                *slot = bands.locate_ahead(b, key);
            }
            let mut ahead = first_keys().skip(AHEAD);
            for (j, run) in keys.chunk_by(|x, y| x.0 == y.0).enumerate() {
                let Some(&(key, _)) = run.first() else { continue };
                let slot = located.get_mut(j % AHEAD);
                let here = slot.as_ref().and_then(|s| **s);
                if let Some(slot) = slot {
                    *slot = ahead.next().and_then(|next| bands.locate_ahead(b, next));
                }
                ordinals.clear();
                bands.lookup_located(b, key, here, &mut ordinals)?;
                for &(_, item) in run {
                    out.extend(ordinals.iter().map(|&o| (o, item)));
                }
            }
        }
        Ok::<_, crate::Error>(out)
    })?;
    // (ordinal, item), each once: the sketch column read in order
    let mut pairs: Vec<(u32, u32)> = found.concat();
    pairs.sort_unstable();
    pairs.dedup();
    let judged = on_every_core(&pairs, 4096, |part| {
        let mut kept = Vec::new();
        for (j, &(ordinal, item)) in part.iter().enumerate() {
            if let Some(&(ahead, _)) = part.get(j + AHEAD) {
                segment.prefetch_sketch(u64::from(ahead));
            }
            let Some(&(_, sketch)) = items.get(item as usize) else { continue };
            let stored = segment.sketch(u64::from(ordinal))?;
            // a candidate that shares only a bucket and a tag with the query's band is not one
            if !shares_band(sketch, stored, design.bands) {
                continue;
            }
            if let Some(similarity) = minhash_resemblance(sketch, stored, judge.hashes, judge.bits).filter(|&s| s >= judge.min_similarity) {
                kept.push((item, u64::from(ordinal), similarity));
            }
        }
        // their fingerprints and ids, in ordinal order
        let mut entries = Vec::with_capacity(kept.len());
        for (j, &(item, ordinal, similarity)) in kept.iter().enumerate() {
            if let Some(&(_, ahead, _)) = kept.get(j + AHEAD) {
                segment.prefetch_id(ahead);
            }
            entries.push((item, (ordinal, similarity, Some((segment.fingerprint_at(ordinal)?, segment.doc_id(ordinal)?)))));
        }
        Ok::<_, crate::Error>(entries)
    })?;
    let mut judged = judged.concat();
    judged.sort_unstable_by_key(|&(item, (ordinal, _, _))| (item, ordinal));
    let mut offsets = Vec::with_capacity(items.len() + 1);
    let mut at = 0;
    offsets.push(0);
    for i in 0..items.len() as u32 {
        at += judged.get(at..).unwrap_or_default().iter().take_while(|&&(item, _)| item == i).count();
        offsets.push(at);
    }
    Ok(Kept { offsets, kept: judged.into_iter().map(|(_, candidate)| candidate).collect() })
}
