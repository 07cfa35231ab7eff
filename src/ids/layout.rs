//! Byte layout of an id table, mirroring `format-spec/ids.md` field by field: the head
//! (encoder and decoder), the design (bucket bits, ordinal bits), the bit-packed entries and
//! where each page is. Decoders return a [`Fault`] with the offset of the bad field; they
//! never panic.
//!
//! All integers are little-endian. Offsets below are relative to the structure's start.

use byteorder::{ByteOrder, LittleEndian as LE};

use super::mix;
use crate::integrity::{verify_crc, Fault};
use crate::segment::layout::slice;

/// Format version written by this build (and the only one read).
pub const IDS_VERSION: u32 = 1;
/// First bytes of every id table.
pub const IDS_MAGIC: [u8; 8] = *b"SIMDXIDT";

pub const I_MAGIC: usize = 0;
pub const I_VERSION: usize = I_MAGIC + 8;
pub const I_BUCKET_BITS: usize = I_VERSION + 4;
pub const I_TAG_BITS: usize = I_BUCKET_BITS + 1;
pub const I_ORDINAL_BITS: usize = I_TAG_BITS + 1;
pub const I_RESERVED: usize = I_ORDINAL_BITS + 1;
pub const I_ENTRIES: usize = I_RESERVED + 1;
pub const I_SEGMENT_LEN: usize = I_ENTRIES + 8;
pub const I_SEGMENT_FOOTER_CRC: usize = I_SEGMENT_LEN + 8;
pub const I_CRC: usize = I_SEGMENT_FOOTER_CRC + 4;
pub const I_END: usize = I_CRC + 4;
/// The head occupies this many bytes (zero-padded); the first entry page follows.
pub const HEAD_BYTES: u64 = 1024;

/// Bytes of a page; its last [`PAGE_CRC_BYTES`] hold the CRC-32 of the rest.
pub const PAGE_BYTES: u64 = 1024;
pub const PAGE_CRC_BYTES: u64 = 4;
/// Bits of a page's payload, where its packed entries are.
pub const PAYLOAD_BITS: u64 = (PAGE_BYTES - PAGE_CRC_BYTES) * 8;
/// Bucket ends (u32) per directory page.
pub const ENDS_PER_PAGE: u64 = (PAGE_BYTES - PAGE_CRC_BYTES) / 4;
/// Bits of the mixed id kept beside each ordinal, below the bucket bits.
pub const TAG_BITS: u32 = 8;
/// At most 2^24 buckets (a directory of 64 MiB).
pub const MAX_BUCKET_BITS: u32 = 24;
/// Largest segment with an id table: ordinals are at most 32 bits.
pub const MAX_ENTRIES: u64 = 1 << 32;

/// What an id table's shape depends on: its bucket bits and the width of its ordinals, both
/// fixed by the segment's entry count ([`IdDesign::for_entries`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdDesign {
    /// `p`: buckets are the mixed id's top `p` bits (16 to 32 entries a bucket).
    pub bucket_bits: u32,
    /// `w`: bits of an ordinal, enough for `entries - 1` (at least 1).
    pub ordinal_bits: u32,
}

/// Bits needed to write `n` (0 for 0).
fn bit_len(n: u64) -> u32 {
    64 - n.leading_zeros()
}

impl IdDesign {
    /// The design of a segment of `entries` entries; `None` above [`MAX_ENTRIES`] (such a
    /// segment has no id table: its id column is scanned).
    pub fn for_entries(entries: u64) -> Option<IdDesign> {
        (entries <= MAX_ENTRIES).then(|| IdDesign { bucket_bits: bit_len(entries).saturating_sub(5).min(MAX_BUCKET_BITS), ordinal_bits: bit_len(entries.saturating_sub(1)).max(1) })
    }

    /// Number of buckets, `2^p`.
    pub fn buckets(&self) -> u64 {
        1 << self.bucket_bits
    }

    /// Bits of one packed entry: the tag, then the ordinal.
    pub fn entry_bits(&self) -> u64 {
        u64::from(TAG_BITS + self.ordinal_bits)
    }

    /// Entries per entry page.
    pub fn per_page(&self) -> u64 {
        PAYLOAD_BITS / self.entry_bits()
    }

    /// The bucket and tag of document id `id`: the top `p` bits of its mix, and the 8 bits
    /// below them.
    #[inline]
    pub fn key(&self, id: u64) -> (u64, u8) {
        let h = mix(id);
        let bucket = if self.bucket_bits == 0 { 0 } else { h >> (64 - self.bucket_bits) };
        (bucket, ((h << self.bucket_bits) >> (64 - TAG_BITS)) as u8)
    }

    /// The packed entry of `(tag, ordinal)`.
    #[inline]
    pub fn pack(&self, tag: u8, ordinal: u64) -> u64 {
        u64::from(tag) << self.ordinal_bits | ordinal
    }

    /// The `(tag, ordinal)` of packed entry `v`.
    #[inline]
    pub fn unpack(&self, v: u64) -> (u8, u64) {
        ((v >> self.ordinal_bits) as u8, v & ((1u64 << self.ordinal_bits) - 1))
    }

    /// Packed entry `i` of a page's payload.
    #[inline]
    pub fn entry(&self, payload: &[u8], i: u64) -> u64 {
        crate::bands::layout::read_bits(payload, i * self.entry_bits(), self.entry_bits())
    }
}

/// The head of an id table: its design, the entries it holds, and which segment it belongs
/// to (its length and the CRC of its footer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdHead {
    pub design: IdDesign,
    /// The segment's entries (each is in the table once).
    pub entries: u64,
    pub segment_len: u64,
    /// CRC-32 of the segment's footer (its last 32 bytes).
    pub segment_footer_crc: u32,
}

impl IdHead {
    /// The head's bytes, zero-padded to [`HEAD_BYTES`].
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEAD_BYTES as usize];
        let mut head = Vec::with_capacity(I_END);
        head.extend_from_slice(&IDS_MAGIC);
        head.extend_from_slice(&IDS_VERSION.to_le_bytes());
        head.extend_from_slice(&[self.design.bucket_bits as u8, TAG_BITS as u8, self.design.ordinal_bits as u8, 0]);
        head.extend_from_slice(&self.entries.to_le_bytes());
        head.extend_from_slice(&self.segment_len.to_le_bytes());
        head.extend_from_slice(&self.segment_footer_crc.to_le_bytes());
        debug_assert_eq!(head.len(), I_CRC);
        let crc = crc32fast::hash(&head);
        head.extend_from_slice(&crc.to_le_bytes());
        if let Some(dst) = b.get_mut(..I_END) {
            dst.copy_from_slice(&head);
        }
        b
    }

    /// Decodes and checks the head at the start of `bytes` (magic and version are the
    /// caller's: `integrity::check_magic_and_version`): its CRC, and a design that is the
    /// one for its entry count.
    pub fn decode(bytes: &[u8]) -> Result<IdHead, Fault> {
        let h = slice(bytes, 0, I_END as u64, "id table head")?;
        let (body, crc) = h.split_at(I_CRC);
        verify_crc(body, LE::read_u32(crc)).map_err(|m| m.fault(0, Default::default(), "id table head"))?;
        let byte = |at: usize| body.get(at).copied().unwrap_or(0);
        let u64_at = |at: usize| body.get(at..at + 8).map_or(0, LE::read_u64);
        let entries = u64_at(I_ENTRIES);
        let design = IdDesign { bucket_bits: u32::from(byte(I_BUCKET_BITS)), ordinal_bits: u32::from(byte(I_ORDINAL_BITS)) };
        if u32::from(byte(I_TAG_BITS)) != TAG_BITS || byte(I_RESERVED) != 0 || IdDesign::for_entries(entries) != Some(design) {
            return Err(Fault::at(
                I_BUCKET_BITS as u64,
                format!(
                    "id table design of {} bucket bits, {}-bit tags, {}-bit ordinals is not the one for {entries} entries",
                    design.bucket_bits,
                    byte(I_TAG_BITS),
                    design.ordinal_bits
                ),
            ));
        }
        Ok(IdHead { design, entries, segment_len: u64_at(I_SEGMENT_LEN), segment_footer_crc: body.get(I_SEGMENT_FOOTER_CRC..I_CRC).map_or(0, LE::read_u32) })
    }

    /// Where the pages are.
    pub fn geometry(&self) -> Geometry {
        Geometry { entry_pages: self.entries.div_ceil(self.design.per_page()), dir_pages: self.design.buckets().div_ceil(ENDS_PER_PAGE) }
    }
}

/// Where an id table's pages are: the entry pages, then the directory pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub entry_pages: u64,
    pub dir_pages: u64,
}

impl Geometry {
    /// Offset of entry page `page`.
    pub fn entry_page(&self, page: u64) -> u64 {
        HEAD_BYTES + page * PAGE_BYTES
    }

    /// Offset of directory page `page`.
    pub fn dir_page(&self, page: u64) -> u64 {
        HEAD_BYTES + (self.entry_pages + page) * PAGE_BYTES
    }

    /// The file's length.
    pub fn file_len(&self) -> u64 {
        HEAD_BYTES + (self.entry_pages + self.dir_pages) * PAGE_BYTES
    }
}

pub use crate::bands::layout::PackedPage;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn designs_follow_the_entry_count() {
        assert_eq!(IdDesign::for_entries(0), Some(IdDesign { bucket_bits: 0, ordinal_bits: 1 }));
        assert_eq!(IdDesign::for_entries(1 << 22), Some(IdDesign { bucket_bits: 18, ordinal_bits: 22 }));
        assert_eq!(IdDesign::for_entries((1 << 22) + 1), Some(IdDesign { bucket_bits: 18, ordinal_bits: 23 }));
        assert_eq!(IdDesign::for_entries(1 << 26).map(|d| (d.per_page(), d.entry_bits())), Some((240, 34)));
        assert_eq!(IdDesign::for_entries(1 << 32), Some(IdDesign { bucket_bits: 24, ordinal_bits: 32 }));
        assert_eq!(IdDesign::for_entries((1 << 32) + 1), None);
        assert_eq!(ENDS_PER_PAGE, 255);
    }

    #[test]
    fn packed_entries_read_back_at_every_width() {
        for ordinal_bits in [1u32, 7, 22, 26, 32] {
            let d = IdDesign { bucket_bits: 4, ordinal_bits };
            let mut page = PackedPage::new();
            let values: Vec<u64> = (0..d.per_page()).map(|i| d.pack((i * 37) as u8, (i * 0x9e37_79b9) & ((1 << ordinal_bits) - 1))).collect();
            for &v in &values {
                page.push(v, d.entry_bits());
            }
            let payload = page.take();
            assert!(payload.len() as u64 <= PAGE_BYTES - PAGE_CRC_BYTES);
            for (i, &v) in values.iter().enumerate() {
                assert_eq!(d.entry(&payload, i as u64), v, "width {ordinal_bits}, entry {i}");
                assert_eq!(d.pack(d.unpack(v).0, d.unpack(v).1), v);
            }
        }
    }

    #[test]
    fn heads_roundtrip_and_refuse_damage() {
        let head = IdHead { design: IdDesign::for_entries(1000).unwrap(), entries: 1000, segment_len: 123_456, segment_footer_crc: 0xabcd_ef01 };
        let mut bytes = head.encode();
        assert_eq!(bytes.len(), HEAD_BYTES as usize);
        assert_eq!(IdHead::decode(&bytes), Ok(head));
        assert_eq!(head.geometry(), Geometry { entry_pages: 1000u64.div_ceil(8160 / 18), dir_pages: 1 });
        bytes[I_ENTRIES] ^= 1;
        assert!(IdHead::decode(&bytes).unwrap_err().detail.contains("checksum"));
    }
}
