//! Verified queries over an index that stores sketches: candidates within a wide `k`
//! (multi-probe), each judged by the resemblance its stored sketch and the query's sketch
//! estimate ([`crate::verify_sketch`]). Candidates and sketches come from one version of
//! the live set, so a concurrent flush or compaction cannot split them.

use super::log::OpKind;
use super::state::{lock, Engine};
use super::{FindOrInsert, Index};
use crate::error::{Error, Result};
use crate::query::{Match, QueryOptions};
use crate::verify_sketch::{minhash_resemblance, parse_minhash_scheme, VerifiedMatch, VerifyOptions};

impl Engine {
    /// The estimator of the index's sketches: `(hashes, bits)` of its b-bit MinHash scheme.
    fn estimator(&self) -> Result<(u32, u32)> {
        let column = self.sketches.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: the index stores no sketches, so candidates cannot be verified (query without verification, or create the index with sketches)",
                self.dir.display()
            ))
        })?;
        let (_, hashes, bits) = parse_minhash_scheme(&column).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: the index's sketch scheme {:?} is not a b-bit MinHash this library can estimate; use `Index::query_sketched` and compare the sketches yourself",
                self.dir.display(),
                String::from_utf8_lossy(&column.scheme)
            ))
        })?;
        Ok((u32::from(hashes), u32::from(bits)))
    }

    /// The candidates within `k` of `fingerprint`, each with its stored sketch.
    fn candidates(&self, fingerprint: u64, k: u32) -> Result<Vec<(Match, Option<Vec<u8>>)>> {
        let options = QueryOptions::within(k);
        self.check_k(&options)?;
        let version = self.current();
        let mut found = Vec::new();
        version.query_into(fingerprint, &options, &mut found)?;
        let views = version.views();
        found.into_iter().map(|m| Ok((m, version.sketch_of(&views, m.fingerprint, m.doc_id.unwrap_or(0))?))).collect()
    }

    /// The verified near-duplicates of a document with `fingerprint` and `sketch`.
    fn verified(&self, fingerprint: u64, sketch: &[u8], options: &VerifyOptions) -> Result<Vec<VerifiedMatch>> {
        let (hashes, bits) = self.estimator()?;
        if sketch.len() != self.sketch_width() {
            return Err(Error::InvalidArgument(format!("a {}-byte query sketch: the index's sketches are {} bytes", sketch.len(), self.sketch_width())));
        }
        if !(0.0..=1.0).contains(&options.min_similarity) {
            return Err(Error::InvalidArgument(format!("min_similarity {} is outside 0..=1", options.min_similarity)));
        }
        // A query without a sketch (all zero: an empty document) verifies nothing.
        let query_has_sketch = sketch.iter().any(|&b| b != 0);
        let mut out = Vec::new();
        for (matched, stored) in self.candidates(fingerprint, options.k.max(options.unsketched_k))? {
            let similarity = match (&stored, query_has_sketch) {
                (Some(s), true) => minhash_resemblance(sketch, s, hashes, bits),
                _ => None,
            };
            let accept = match similarity {
                Some(sim) => matched.distance <= options.k && sim >= options.min_similarity,
                None => matched.distance <= options.unsketched_k,
            };
            if accept {
                out.push(VerifiedMatch { matched, similarity });
            }
        }
        Ok(out)
    }
}

impl Index {
    /// Every live pair within `options.k` of `fingerprint` (as [`Index::query`]), each with
    /// the sketch stored with it (`None`: stored without one, or the index stores none).
    pub fn query_sketched(&self, fingerprint: u64, options: &QueryOptions) -> Result<Vec<(Match, Option<Vec<u8>>)>> {
        self.engine.check_k(options)?;
        if options.k > crate::plan::MAX_K {
            return Err(Error::InvalidArgument(format!("k = {} is above {}: sketched queries use the tables", options.k, crate::plan::MAX_K)));
        }
        self.engine.candidates(fingerprint, options.k)
    }

    /// The verified near-duplicates of a document whose fingerprint is `fingerprint` and
    /// sketch `sketch` (the index's width): the live pairs within `options.k` whose stored
    /// sketch estimates a resemblance of at least `options.min_similarity`, and the pairs
    /// stored without a sketch within `options.unsketched_k`; sorted by distance,
    /// fingerprint and id. Fails with [`Error::InvalidArgument`] when the index stores no
    /// sketches (no silent fallback: [`Index::query`] is the unverified call).
    pub fn query_verified(&self, fingerprint: u64, sketch: &[u8], options: &VerifyOptions) -> Result<Vec<VerifiedMatch>> {
        self.engine.verified(fingerprint, sketch, options)
    }

    /// The crawler's check-then-add, verified: when no verified near-duplicate of the
    /// document is live, inserts `(fingerprint, doc_id)` with its sketch. `Found` lists the
    /// accepted matches. Atomic with respect to other writers of the index.
    pub fn find_or_insert_verified(&self, fingerprint: u64, doc_id: u64, sketch: &[u8], options: &VerifyOptions) -> Result<FindOrInsert> {
        let s = &self.engine;
        s.check_writable()?;
        s.check_sketches(OpKind::Insert, 1, Some(sketch))?;
        let mut w = lock(&s.writer);
        let found = s.verified(fingerprint, sketch, options)?;
        if !found.is_empty() {
            return Ok(FindOrInsert::Found(found.into_iter().map(|v| v.matched).collect()));
        }
        let (seq, due) = s.append(&mut w, OpKind::Insert, &[(fingerprint, doc_id)], Some(sketch))?;
        let w = if due { s.commit_group(w)? } else { w };
        s.after_write(w);
        Ok(FindOrInsert::Inserted { seq })
    }
}
