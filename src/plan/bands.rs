//! The band design of a segment's sketch index (`crate::bands`, `format-spec/bands.md`) and
//! the cost model of the crawler's check (candidates within a wide `k` confirmed by sketch):
//! what one check reads from a segment whose every entry has a sketch, answered by its band
//! file alone (no table probe: `engine::confirmed`), beside the exhaustive multi-probe of its
//! tables ([`CheckCost`], what `simdex plan --check` prints).

use super::{Design, DesignError, ProbePlan};

/// Bits of sketch per band.
pub const BAND_BITS: u32 = 32;
/// Bits of each band kept beside an entry to tell buckets' entries apart (its low bits), in
/// the band files written today (version 4; 6 in versions 2 and 3, 8 in version 1).
pub const TAG_BITS: u32 = 5;
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
/// Buckets of a block (its entries' high ordinal bits in unary, then their low entries).
const BLOCK: f64 = 8.0;
/// Blocks of a directory group: a 32-bit base and a relative end a block.
const GROUP: f64 = 64.0;

/// What one crawler's check reads from a segment of `count` entries, each with a sketch
/// (expected values for random fingerprints and sketches).
#[derive(Clone, Debug, PartialEq)]
pub struct CheckCost {
    /// Entries.
    pub count: u64,
    /// The check's distance (candidates within `k`, confirmed by sketch).
    pub k: u32,
    /// The design's distance (at most `k`).
    pub table_k: u32,
    /// Range probes of the tables: none when the band file answers (every entry has a
    /// sketch); within `k` when the segment is too large for a band file.
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
        let exhaustive = ProbePlan::new(design, k, count)?;
        let bands = BandDesign::for_segment(count, sketch_bytes);
        // a segment whose band file holds every entry is asked through it alone
        let (table_probes, table_entries) = if bands.is_some() { (0, 0.0) } else { (exhaustive.probes(), exhaustive.expected_entries()) };
        let (mut band_pages, mut band_entries, mut sketch_reads, mut band_bytes_per_entry) = (0.0, 0.0, 0.0, 0.0);
        if let Some(b) = bands {
            let per_bucket = count as f64 / b.buckets() as f64;
            let lookups = f64::from(b.bands);
            band_entries = lookups * per_bucket;
            // the file written today (version 4, `format-spec/bands.md`): per band an entry
            // stream of `M (t + l + 1) + 2^(p + h)` bits (Elias-Fano: `h` high bits of the
            // ordinal in unary, `l = w - h` low bits and the tag packed) and a directory of
            // groups of 64 blocks of 8 buckets, `32 + 64 r` bits each (r: the bits of the
            // largest group, about its mean plus five standard deviations)
            let ordinal_bits = (64 - count.saturating_sub(1).leading_zeros()).max(1);
            let high_bits = (64 - (count.div_ceil(b.buckets())).saturating_sub(1).leading_zeros()).min(ordinal_bits);
            let low_entry = f64::from(ordinal_bits - high_bits + TAG_BITS);
            let stream_bits = count as f64 * (low_entry + 1.0) + (b.buckets() << high_bits) as f64;
            let entry_pages = (stream_bits / PAYLOAD_BITS).ceil();
            let group = GROUP * BLOCK * per_bucket;
            let dir_bits = (group + 5.0 * group.sqrt()).max(1.0).log2().floor() + 1.0;
            let groups_per_page = (PAYLOAD_BITS / (32.0 + GROUP * dir_bits)).floor();
            let dir_pages = (b.buckets() as f64 / BLOCK / GROUP).ceil() / groups_per_page;
            let dir_pages = dir_pages.ceil();
            // one directory page (a block's group is in one page), and the pages the block's
            // bits span: one, or two when it crosses a page's end
            let block_bits = BLOCK * (per_bucket * (low_entry + 1.0) + f64::from(1u32 << high_bits));
            band_pages = lookups * (1.0 + 1.0 + (block_bits / PAYLOAD_BITS).min(1.0));
            sketch_reads = band_entries / f64::from(1u32 << TAG_BITS);
            band_bytes_per_entry = lookups * (entry_pages + dir_pages) * PAGE / count.max(1) as f64;
        }
        Ok(CheckCost {
            count,
            k,
            table_k,
            table_probes,
            table_entries,
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
            assert_eq!((c.table_k, c.table_probes), (3, 0), "the band file answers alone");
            assert!(c.band_pages > 32.0 && c.band_pages < 40.0, "{log2}: {}", c.band_pages);
            // 5-bit tags: 8 to 16 entries a bucket let 4 to 8 others a check past the tag
            assert!(c.sketch_reads < 8.1, "{log2}: {}", c.sketch_reads);
            assert!(c.exhaustive_probes > 100, "{log2}: {}", c.exhaustive_probes);
            // format-spec/bands.md, "Size" (version 4): 52.65, 60.68, 62.49
            let spec = [(22, 52.65), (26, 60.68), (28, 62.49)].iter().find(|s| s.0 == log2).unwrap().1;
            assert!((c.band_bytes_per_entry - spec).abs() < 0.01, "{log2}: {}", c.band_bytes_per_entry);
        }
    }
}
