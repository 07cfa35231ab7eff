//! The band design of a segment's sketch index (`crate::bands`, `format-spec/bands.md`) and
//! the cost model of the crawler's check (candidates within a wide `k` confirmed by sketch):
//! what one check reads from a segment answered by its tables within the design's `k` and
//! by its band file beyond, beside the exhaustive multi-probe of its tables ([`CheckCost`],
//! what `simdex plan --check` prints).

use super::{Design, DesignError, ProbePlan};

/// Bits of sketch per band.
pub const BAND_BITS: u32 = 32;
/// Bits of each band kept beside an entry to tell buckets' entries apart (its low bits).
pub const TAG_BITS: u32 = 6;
/// Most bands a band file holds (16 x 32 bits: the whole default 64-byte sketch).
pub const MAX_BANDS: u32 = 16;
/// Most bucket bits (2^24 buckets, a 64 MiB directory per band).
pub const MAX_BUCKET_BITS: u32 = 24;

/// How a segment's band file is cut: how many bands and how many buckets per band.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandDesign {
    /// Bands (32-bit words of the sketch, from its first byte on).
    pub bands: u32,
    /// Each band's entries are bucketed by its top `bucket_bits` bits.
    pub bucket_bits: u32,
}

impl BandDesign {
    /// The design for `entries` sketches of `sketch_bytes` bytes: one band per 4 bytes (at
    /// most 16), and 8 to 16 entries per bucket (at most 2^24 buckets). `None` when the
    /// sketch holds no whole band or the segment is too large for 32-bit ordinals.
    pub fn for_segment(entries: u64, sketch_bytes: usize) -> Option<BandDesign> {
        let bands = (sketch_bytes / 4).min(MAX_BANDS as usize) as u32;
        if bands == 0 || entries > u64::from(u32::MAX) {
            return None;
        }
        let log2 = 64 - entries.max(1).leading_zeros();
        Some(BandDesign { bands, bucket_bits: log2.saturating_sub(4).min(MAX_BUCKET_BITS) })
    }

    /// Buckets per band.
    pub fn buckets(&self) -> u64 {
        1 << self.bucket_bits
    }

    /// The bucket of band value `key`: its top bits.
    #[inline]
    pub fn bucket(&self, key: u32) -> u32 {
        if self.bucket_bits == 0 {
            0
        } else {
            key >> (BAND_BITS - self.bucket_bits)
        }
    }
}

/// Bytes of a band file's pages; each ends with a 4-byte CRC.
const PAGE: f64 = 1024.0;
/// Bits of a page's payload.
const PAYLOAD_BITS: f64 = (PAGE - 4.0) * 8.0;
/// Buckets of a directory group: a 32-bit base and a relative end a bucket.
const GROUP: f64 = 64.0;

/// What one crawler's check reads from a segment of `count` entries, each with a sketch
/// (expected values for random fingerprints and sketches).
#[derive(Clone, Debug, PartialEq)]
pub struct CheckCost {
    /// Entries.
    pub count: u64,
    /// The check's distance (candidates within `k`, confirmed by sketch).
    pub k: u32,
    /// The distance the tables answer: the design's.
    pub table_k: u32,
    /// Range probes of the tables within `table_k`.
    pub table_probes: u64,
    /// Entries the table probes decode.
    pub table_entries: f64,
    /// The band file's design (`None`: the segment is too large for one; the tables
    /// answer the whole check).
    pub bands: Option<BandDesign>,
    /// Band file pages read per check (a directory page and the bucket's entry pages, per band).
    pub band_pages: f64,
    /// Band entries scanned per check.
    pub band_entries: f64,
    /// Stored sketches read per check for entries that share a bucket and tag with the
    /// query's band but not the whole band, or the band but not enough of the sketch (a
    /// random query's; a near-duplicate adds its own).
    pub sketch_reads: f64,
    /// The band file's bytes per entry.
    pub band_bytes_per_entry: f64,
    /// The check without band files: probes of the tables for every pair within `k`.
    pub exhaustive_probes: u64,
    /// Entries those probes decode.
    pub exhaustive_entries: f64,
}

impl CheckCost {
    /// The check at distance `k` on a segment of `count` entries with `design` and
    /// `sketch_bytes`-byte sketches.
    pub fn new(design: &Design, k: u32, count: u64, sketch_bytes: usize) -> Result<CheckCost, DesignError> {
        let table_k = design.k().min(k);
        let tables = ProbePlan::new(design, table_k, count)?;
        let exhaustive = ProbePlan::new(design, k, count)?;
        let bands = BandDesign::for_segment(count, sketch_bytes);
        let (mut band_pages, mut band_entries, mut sketch_reads, mut band_bytes_per_entry) = (0.0, 0.0, 0.0, 0.0);
        if let Some(b) = bands.filter(|_| k > table_k) {
            let per_bucket = count as f64 / b.buckets() as f64;
            let lookups = f64::from(b.bands);
            band_entries = lookups * per_bucket;
            // one directory page (a bucket's group is in one page), and the pages the
            // bucket's entries span; entries of `w + t` bits (w: the ordinal's), groups of
            // 32 + 64 r bits (r: the bits of the largest group, about 64 buckets' mean plus
            // five standard deviations)
            let entry_bits = f64::from(64 - count.saturating_sub(1).leading_zeros()).max(1.0) + f64::from(TAG_BITS);
            let per_page = (PAYLOAD_BITS / entry_bits).floor();
            let group = GROUP * per_bucket;
            let dir_bits = (group + 5.0 * group.sqrt()).max(1.0).log2().floor() + 1.0;
            band_pages = lookups * (1.0 + 1.0 + (per_bucket - 1.0).max(0.0) / per_page);
            sketch_reads = band_entries / f64::from(1u32 << TAG_BITS);
            let group_bytes = (32.0 + GROUP * dir_bits) / 8.0;
            band_bytes_per_entry = lookups * (PAGE / per_page + group_bytes / GROUP * PAGE / (PAGE - 4.0) * b.buckets() as f64 / count.max(1) as f64);
        }
        Ok(CheckCost {
            count,
            k,
            table_k,
            table_probes: tables.probes(),
            table_entries: tables.expected_entries(),
            bands,
            band_pages,
            band_entries,
            sketch_reads,
            band_bytes_per_entry,
            exhaustive_probes: exhaustive.probes(),
            exhaustive_entries: exhaustive.expected_entries(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn designs_keep_eight_to_sixteen_entries_a_bucket() {
        assert_eq!(BandDesign::for_segment(1 << 22, 64), Some(BandDesign { bands: 16, bucket_bits: 19 }));
        assert_eq!(BandDesign::for_segment(1 << 28, 64), Some(BandDesign { bands: 16, bucket_bits: 24 }));
        assert_eq!(BandDesign::for_segment(5, 64), Some(BandDesign { bands: 16, bucket_bits: 0 }));
        assert_eq!(BandDesign::for_segment(100, 8), Some(BandDesign { bands: 2, bucket_bits: 3 }));
        assert_eq!(BandDesign::for_segment(100, 3), None);
        assert_eq!(BandDesign::for_segment(1 << 33, 64), None);
    }

    #[test]
    fn the_check_reads_a_few_pages_a_band_whatever_the_size() {
        for log2 in [22u32, 26, 28] {
            let count = 1u64 << log2;
            let design = super::super::planned_design(&super::super::PlanOptions::new(count, 3)).unwrap();
            let c = CheckCost::new(&design, 8, count, 64).unwrap();
            assert_eq!(c.table_k, 3);
            assert!(c.band_pages > 32.0 && c.band_pages < 40.0, "{log2}: {}", c.band_pages);
            // 6-bit tags: 8 to 16 entries a bucket let 2 to 4 others a check past the tag
            assert!(c.sketch_reads < 4.1, "{log2}: {}", c.sketch_reads);
            assert!(c.exhaustive_probes > 10 * c.table_probes, "{log2}: {} against {}", c.exhaustive_probes, c.table_probes);
            // format-spec/bands.md, "Size": 58.97, 66.92, 69.72
            let spec = [(22, 58.97), (26, 66.92), (28, 69.72)].iter().find(|s| s.0 == log2).unwrap().1;
            assert!((c.band_bytes_per_entry - spec).abs() < 0.1, "{log2}: {}", c.band_bytes_per_entry);
        }
    }
}
