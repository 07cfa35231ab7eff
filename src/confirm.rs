//! Confirmed near-duplicates: what a query asks when candidates within a wide `k` are
//! confirmed by their stored sketches ([`ConfirmOptions`]; each accepted match carries its
//! similarity, [`crate::Match::similarity`]), the scheme
//! tag that names a b-bit MinHash sketch in a store (`format-spec/sketch.md`, "Scheme
//! tag"), and the resemblance estimate between two such sketches. The sketch recipe itself
//! (tokens, shingles, hashing) is the text pipeline's (`simdex_fingerprint::sketch`); this
//! module needs none of it, so an embedder that makes its own sketches confirms by them
//! without compiling any text code.

use crate::segment::SketchColumn;

/// First two bytes of the scheme tag of a b-bit MinHash sketch.
pub(crate) const MINHASH_TAG: [u8; 2] = *b"MH";

/// The scheme tag of b-bit MinHash sketches of `hashes` values of `bits` bits, recipe
/// `version`: `"MH"`, the version (u8), `bits` (u8), `hashes` (u16, little-endian), two
/// zero bytes.
pub fn minhash_scheme(version: u8, hashes: u16, bits: u8) -> [u8; 8] {
    let h = hashes.to_le_bytes();
    [MINHASH_TAG[0], MINHASH_TAG[1], version, bits, h[0], h[1], 0, 0]
}

/// `(version, hashes, bits)` of a b-bit MinHash scheme tag that fits `bytes`-byte
/// sketches, `None` for any other tag.
pub fn parse_minhash_scheme(column: &SketchColumn) -> Option<(u8, u16, u8)> {
    let [m, h, version, bits, h0, h1, 0, 0] = column.scheme else { return None };
    let hashes = u16::from_le_bytes([h0, h1]);
    let fits = matches!(bits, 1 | 2 | 4 | 8 | 16) && usize::from(hashes) * usize::from(bits) == usize::from(column.bytes) * 8;
    ([m, h] == MINHASH_TAG && fits).then_some((version, hashes, bits))
}

/// Estimated resemblance (Jaccard similarity of the sets) of two b-bit MinHash sketches of
/// `hashes` values of `bits` bits: values agree with probability `J + (1 - J) / 2^bits`, so
/// `J = (agree / hashes - 2^-bits) / (1 - 2^-bits)`, clamped to `0..=1`. `None` when the
/// lengths are not `hashes * bits / 8`.
pub fn minhash_resemblance(a: &[u8], b: &[u8], hashes: u32, bits: u32) -> Option<f64> {
    let len = (hashes as usize * bits as usize).div_ceil(8);
    if a.len() != len || b.len() != len || hashes == 0 || !matches!(bits, 1 | 2 | 4 | 8 | 16) {
        return None;
    }
    let differ: u32 = match bits {
        1 => a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum(),
        _ => (0..hashes as usize).filter(|&i| value(a, i, bits) != value(b, i, bits)).count() as u32,
    };
    let agree = f64::from(hashes - differ) / f64::from(hashes);
    let chance = 0.5f64.powi(bits as i32);
    Some(((agree - chance) / (1.0 - chance)).clamp(0.0, 1.0))
}

/// Value `i` of a packed sketch (`bits` bits, little-endian bit order).
fn value(bytes: &[u8], i: usize, bits: u32) -> u32 {
    let bit = i * bits as usize;
    let mut v = 0u32;
    for j in 0..bits as usize {
        let at = bit + j;
        let b = bytes.get(at / 8).map_or(0, |byte| (byte >> (at % 8)) & 1);
        v |= u32::from(b) << j;
    }
    v
}

/// How a confirmed query judges candidates ([`crate::Index::query_confirmed`]).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct ConfirmOptions {
    /// Candidates: stored fingerprints within `k` bits (at most 8 from any design; the
    /// cost grows with the probes `simdex plan --for-design` shows).
    pub k: u32,
    /// A candidate with a sketch is a near-duplicate when the estimated resemblance is at
    /// least this.
    pub min_similarity: f64,
    /// A candidate stored without a sketch cannot be confirmed: it is a near-duplicate when
    /// its fingerprint is within this many bits (fingerprint only).
    pub unsketched_k: u32,
    /// Find every sketched candidate within `k` through the tables (multi-probe: the cost
    /// grows with the index, about 2 ms at 2^26 for `k = 8`), instead of the band files.
    /// Off by default: candidates are the stored sketches that share one of 16 bands with
    /// the query's (`format-spec/bands.md`), which finds every pair whose sketches differ in
    /// at most 15 of 512 bits and 98.9% of those at the 0.90 threshold (25 bits), at a cost
    /// that does not grow with the index; in a segment whose every entry has a sketch that
    /// holds within the design's `k` too (its tables are not asked: a pair there within
    /// `k` that shares no band is not found), elsewhere (memtables, segments with pairs
    /// stored without a sketch or without a band file) the tables answer within the
    /// design's `k` as well. Used only for the default sketch (512 one-bit values) at
    /// `min_similarity >= 0.9`; otherwise the tables answer.
    pub exhaustive: bool,
    /// Band candidates (on by default): a stored pair whose sketch shares one of the 16
    /// bands with the query's is an answer whatever its fingerprint's distance when its
    /// estimate reaches `min_similarity + band_margin` (beside the pairs within `k`, judged
    /// at `min_similarity`): near-duplicates whose fingerprints lie more than `k` bits apart
    /// are found. Only for the default sketch (512 one-bit values) at `min_similarity >=
    /// 0.9`; off, only pairs within `k` are answers.
    pub band_candidates: bool,
    /// How far above `min_similarity` a band candidate beyond `k` must be estimated. Default
    /// 0.0167: one standard deviation of the default sketch's estimate at 0.9 (recipe 2,
    /// measured by `simdex tune` on the tuning sample, `benches/QUALITY.md`). Beyond `k` the
    /// fingerprints say a pair is less alike, so fewer pairs estimated just above the
    /// threshold are true ones: at 0 the crawler's check on a held-out corpus loses 0.045 of
    /// precision for no F1; at 0.0167 F1 rises 0.0098 for 0.0065 of precision.
    pub band_margin: f64,
}

__with_fields!(ConfirmOptions {
    k: u32 => with_k,
    unsketched_k: u32 => with_unsketched_k,
    exhaustive: bool => with_exhaustive,
    band_candidates: bool => with_band_candidates,
    band_margin: f64 => with_band_margin,
});

impl Default for ConfirmOptions {
    /// `k = 3`, resemblance at least 0.90, candidates without a sketch within 3 bits, band
    /// candidates on (beyond `k` at a resemblance of at least 0.9167).
    ///
    /// Chosen on the dev corpus (`benches/QUALITY.md`, "Issue 11"): at k = 3 confirmation
    /// raises F1 from 0.721 to 0.795 (precision 0.73 to 0.92) for the cost of a k = 3 query
    /// plus a sketch read per candidate. A wider `k` finds more (F1 0.872 at k = 6, 0.892 at
    /// k = 8) at 13 and 47 times the entries decoded: [`ConfirmOptions::within`].
    fn default() -> Self {
        Self { k: 3, min_similarity: 0.9, unsketched_k: 3, exhaustive: false, band_candidates: true, band_margin: DEFAULT_BAND_MARGIN }
    }
}

/// [`ConfirmOptions::band_margin`]'s default.
const DEFAULT_BAND_MARGIN: f64 = 0.0167;

impl ConfirmOptions {
    /// The defaults with candidates within `k`.
    pub fn within(k: u32) -> Self {
        Self { k, ..Self::default() }
    }

    /// The same options with another resemblance threshold.
    pub fn with_min_similarity(self, min_similarity: f64) -> Self {
        Self { min_similarity, ..self }
    }

    /// The resemblance at which the check answers a stored pair more than `k` bits away
    /// whose sketch shares one of the 16 bands with the query's (band candidates):
    /// `min_similarity + band_margin`; `None` when it answers no pair beyond `k` (band
    /// candidates off, or sketches of `hashes` values of `bits` bits, or a `min_similarity`,
    /// that the band files do not serve). Within `k` a pair is an answer at `min_similarity`.
    pub fn beyond_k_similarity(&self, hashes: u32, bits: u32) -> Option<f64> {
        (self.band_candidates && bands_serve(hashes, bits, self.min_similarity)).then_some(self.min_similarity + self.band_margin)
    }
}

/// True when the band files answer a check of this scheme and threshold (and band
/// candidates apply): the 512 one-bit values they were designed and measured for, at a
/// resemblance of at least [`BANDS_MIN_SIMILARITY`] (below it, more pairs share no band).
pub(crate) fn bands_serve(hashes: u32, bits: u32, min_similarity: f64) -> bool {
    hashes == 512 && bits == 1 && min_similarity >= BANDS_MIN_SIMILARITY
}

/// The lowest threshold the band files serve: the crawler's default.
pub(crate) const BANDS_MIN_SIMILARITY: f64 = 0.9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_tags_roundtrip_and_check_the_width() {
        let tag = minhash_scheme(1, 512, 1);
        assert_eq!(&tag, b"MH\x01\x01\x00\x02\x00\x00");
        assert_eq!(parse_minhash_scheme(&SketchColumn { bytes: 64, scheme: tag }), Some((1, 512, 1)));
        assert_eq!(parse_minhash_scheme(&SketchColumn { bytes: 32, scheme: tag }), None);
        assert_eq!(parse_minhash_scheme(&SketchColumn { bytes: 64, scheme: *b"TEST0001" }), None);
    }

    #[test]
    fn resemblance_of_one_bit_sketches_is_twice_the_agreement_less_one() {
        let a = [0u8; 8];
        let mut b = [0u8; 8];
        assert_eq!(minhash_resemblance(&a, &b, 64, 1), Some(1.0));
        b[0] = 0xff; // 8 of 64 values differ: agree 56/64, J = 2 * 0.875 - 1
        assert_eq!(minhash_resemblance(&a, &b, 64, 1), Some(0.75));
        assert_eq!(minhash_resemblance(&a, &[0u8; 7], 64, 1), None);
        // two-bit values: 32 values; value 0 differs in both bits, counted once
        b = [0u8; 8];
        b[0] = 0b11;
        let want = ((31.0 / 32.0) - 0.25) / 0.75;
        assert!((minhash_resemblance(&a, &b, 32, 2).unwrap() - want).abs() < 1e-12);
    }
}
