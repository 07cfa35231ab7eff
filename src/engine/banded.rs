//! The engine's band files (`crate::bands`, `format-spec/bands.md`): every segment that
//! stores sketches gets one when it is written (flush, merge) and before it is installed;
//! an open finds it beside its segment, or builds it again when it is missing or its head
//! does not match (a read-only open goes without: that segment's candidates then come from
//! its tables, as before bands). And the band half of the crawler's check: the stored
//! pairs whose sketch shares a band with the query's, judged by today's rule
//! (`confirmed`).

use std::path::Path;

use super::files::bands_name;
use super::manifest::SegmentMeta;
use super::version::{LiveSegment, MemViews, Version};
use crate::bands::{band_key, shares_band, write_band_file, BandFile, BuildBudget};
use crate::confirm::minhash_resemblance;
use crate::error::Result;
use crate::query::Match;
use crate::segment::Segment;
use crate::storage::Storage;

/// A newly written segment, live with its band file (written now when the segment stores
/// sketches).
pub(super) fn attach_new(storage: &dyn Storage, dir: &Path, meta: SegmentMeta, segment: Segment) -> Result<LiveSegment> {
    let path = dir.join(bands_name(meta.number));
    let bands = match write_band_file(storage, &segment, &path, BuildBudget::default())? {
        Some(_) => Some(BandFile::open(storage, &path, &segment)?),
        None => None,
    };
    Ok(LiveSegment { meta, segment, bands, ids: Default::default() })
}

/// A segment the manifest lists, live with its band file: opened, or (`writable`) built
/// again when missing or not this segment's (its name added to `rebuilt`).
pub(super) fn attach_on_open(storage: &dyn Storage, dir: &Path, meta: SegmentMeta, segment: Segment, writable: bool, rebuilt: &mut Vec<String>) -> Result<LiveSegment> {
    if !segment.has_sketches() {
        return Ok(LiveSegment { meta, segment, bands: None, ids: Default::default() });
    }
    let path = dir.join(bands_name(meta.number));
    match BandFile::open(storage, &path, &segment) {
        Ok(bands) => Ok(LiveSegment { meta, segment, bands: Some(bands), ids: Default::default() }),
        Err(_) if writable => {
            let live = attach_new(storage, dir, meta, segment)?;
            if live.bands.is_some() {
                rebuilt.push(bands_name(meta.number));
            }
            Ok(live)
        }
        Err(_) => Ok(LiveSegment { meta, segment, bands: None, ids: Default::default() }),
    }
}

/// `simdex verify` of band file `n`: every page, and that it is the file its segment's
/// sketches make. Returns a summary for the report.
pub(super) fn verify_band_file(storage: &dyn Storage, dir: &Path, n: u64) -> Result<String> {
    let segment = Segment::open_with(storage, &dir.join(super::files::segment_name(n)))?;
    let bands = BandFile::open(storage, &dir.join(bands_name(n)), &segment)?;
    bands.verify(&segment)?;
    let d = bands.design();
    Ok(format!("{} bands of segment {n}'s sketches, {} buckets each, {} bytes", d.bands, d.buckets(), bands.file_len()))
}

/// What the band half of a check compares with: the query and today's rule.
pub(super) struct BandQuery<'a> {
    pub fingerprint: u64,
    pub sketch: &'a [u8],
    /// The b-bit MinHash scheme of the index's sketches.
    pub hashes: u32,
    pub bits: u32,
    pub k: u32,
    pub min_similarity: f64,
}

impl BandQuery<'_> {
    /// The resemblance of a stored sketch when it passes the threshold.
    fn accepts(&self, stored: &[u8]) -> Option<f64> {
        minhash_resemblance(self.sketch, stored, self.hashes, self.bits).filter(|&s| s >= self.min_similarity)
    }
}

/// Appends every live pair of `version` whose stored sketch shares a band with the query's
/// and that today's rule accepts: within `q.k`, resemblance at least `q.min_similarity`,
/// judged by the sketch of the pair's newest copy. Segments without a band file are asked
/// through their tables instead (`fallback`: every pair within `q.k` and its sketch).
pub(super) fn band_matches(version: &Version, views: &MemViews<'_>, q: &BandQuery<'_>, out: &mut Vec<Match>) -> Result<()> {
    let mut ordinals = Vec::new();
    let newest = version.segments.len().saturating_sub(1);
    // where a newer copy of a pair may be: a later segment or a memtable
    let memtables_hold_inserts = views.0.iter().any(|v| v.entries().next().is_some());
    for (i, s) in version.segments.iter().enumerate() {
        let Some(bands) = &s.bands else {
            fallback(version, views, s, q, out)?;
            continue;
        };
        ordinals.clear();
        for b in 0..bands.design().bands {
            if let Some(key) = band_key(q.sketch, b) {
                bands.lookup(b, key, &mut ordinals)?;
            }
        }
        ordinals.sort_unstable();
        ordinals.dedup();
        for &ordinal in &ordinals {
            let ordinal = u64::from(ordinal);
            // a candidate that shares only a bucket and a tag with the query's band is not one
            let stored = s.segment.sketch(ordinal)?;
            if !shares_band(q.sketch, stored, bands.design().bands) {
                continue;
            }
            let Some(similarity) = q.accepts(stored) else { continue };
            let fp = s.segment.fingerprint_at(ordinal)?;
            let distance = (fp ^ q.fingerprint).count_ones();
            if distance > q.k {
                continue;
            }
            let id = s.segment.doc_id(ordinal)?;
            if version.hidden(views, fp, id, s.meta.max_seq) {
                continue;
            }
            // A newer copy of the pair (re-inserted with another sketch) is the one judged.
            let newer_copy = i < newest || memtables_hold_inserts;
            let similarity = if newer_copy {
                match version.sketch_of(views, fp, id)? {
                    Some(stored) => match q.accepts(&stored) {
                        Some(s) => s,
                        None => continue,
                    },
                    None => continue,
                }
            } else {
                similarity
            };
            out.push(Match { distance, fingerprint: fp, doc_id: Some(id), similarity: Some(similarity) });
        }
    }
    for v in &views.0 {
        for e in v.band_candidates(q.sketch) {
            let distance = (e.fp ^ q.fingerprint).count_ones();
            if distance > q.k || version.hidden(views, e.fp, e.id, e.seq) {
                continue;
            }
            let Some(similarity) = version.sketch_of(views, e.fp, e.id)?.as_deref().and_then(|s| q.accepts(s)) else { continue };
            out.push(Match { distance, fingerprint: e.fp, doc_id: Some(e.id), similarity: Some(similarity) });
        }
    }
    Ok(())
}

/// A segment without a band file (a read-only open of an index whose band file is
/// missing): every pair within `q.k` from its tables, judged by the newest copy's sketch.
fn fallback(version: &Version, views: &MemViews<'_>, s: &LiveSegment, q: &BandQuery<'_>, out: &mut Vec<Match>) -> Result<()> {
    let mut found = Vec::new();
    s.segment.query_into(q.fingerprint, &crate::query::QueryOptions::within(q.k), &mut found)?;
    for m in found {
        let id = m.doc_id.unwrap_or(0);
        if version.hidden(views, m.fingerprint, id, s.meta.max_seq) {
            continue;
        }
        if let Some(similarity) = version.sketch_of(views, m.fingerprint, id)?.as_deref().and_then(|st| q.accepts(st)) {
            out.push(Match { similarity: Some(similarity), ..m });
        }
    }
    Ok(())
}
