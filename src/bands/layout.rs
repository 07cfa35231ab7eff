//! Byte layout of a band file, mirroring `format-spec/bands.md` field by field: the head
//! (encoder and decoder), the pages and where each band's pages are. Decoders return a
//! [`Fault`] with the offset of the bad field; they never panic.
//!
//! All integers are little-endian. Offsets below are relative to the structure's start.

use byteorder::{ByteOrder, LittleEndian as LE};

use super::{BandDesign, BAND_BITS, MAX_BANDS, MAX_BUCKET_BITS, TAG_BITS};
use crate::integrity::{verify_crc, Fault};
use crate::segment::layout::slice;

/// Format version written by this build (and the only one read).
pub const BANDS_VERSION: u32 = 1;
/// First bytes of every band file.
pub const BANDS_MAGIC: [u8; 8] = *b"SIMDXBND";

pub const B_MAGIC: usize = 0;
pub const B_VERSION: usize = B_MAGIC + 8;
pub const B_BANDS: usize = B_VERSION + 4;
pub const B_BAND_BITS: usize = B_BANDS + 1;
pub const B_BUCKET_BITS: usize = B_BAND_BITS + 1;
pub const B_TAG_BITS: usize = B_BUCKET_BITS + 1;
pub const B_ENTRIES: usize = B_TAG_BITS + 1;
pub const B_BANDED: usize = B_ENTRIES + 8;
pub const B_SEGMENT_LEN: usize = B_BANDED + 8;
pub const B_SEGMENT_FOOTER_CRC: usize = B_SEGMENT_LEN + 8;
pub const B_SKETCH_BYTES: usize = B_SEGMENT_FOOTER_CRC + 4;
pub const B_RESERVED: usize = B_SKETCH_BYTES + 2;
pub const B_SCHEME: usize = B_RESERVED + 2;
pub const B_CRC: usize = B_SCHEME + 8;
pub const B_END: usize = B_CRC + 4;
/// The head occupies this many bytes (zero-padded); the first band's pages follow.
pub const HEAD_BYTES: u64 = 1024;

/// Bytes of a page; its last [`PAGE_CRC_BYTES`] hold the CRC-32 of the rest.
pub const PAGE_BYTES: u64 = 1024;
pub const PAGE_CRC_BYTES: u64 = 4;
/// Bytes of an entry: the ordinal (u32) and the tag (u8).
pub const ENTRY_BYTES: u64 = 5;
/// Entries per entry page.
pub const ENTRIES_PER_PAGE: u64 = (PAGE_BYTES - PAGE_CRC_BYTES) / ENTRY_BYTES;
/// Bucket ends (u32) per directory page.
pub const ENDS_PER_PAGE: u64 = (PAGE_BYTES - PAGE_CRC_BYTES) / 4;

/// The head of a band file: the design, the entries it bands, and which segment it
/// belongs to (its length and the CRC of its footer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandHead {
    pub design: BandDesign,
    /// The segment's entries.
    pub entries: u64,
    /// The entries with a sketch (all-zero sketches are not banded): each band holds this many.
    pub banded: u64,
    pub segment_len: u64,
    /// CRC-32 of the segment's footer (its last 32 bytes).
    pub segment_footer_crc: u32,
    pub sketch_bytes: u16,
    pub scheme: [u8; 8],
}

impl BandHead {
    /// The head's bytes, zero-padded to [`HEAD_BYTES`].
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEAD_BYTES as usize];
        let mut head = Vec::with_capacity(B_END);
        head.extend_from_slice(&BANDS_MAGIC);
        head.extend_from_slice(&BANDS_VERSION.to_le_bytes());
        head.extend_from_slice(&[self.design.bands as u8, BAND_BITS as u8, self.design.bucket_bits as u8, TAG_BITS as u8]);
        head.extend_from_slice(&self.entries.to_le_bytes());
        head.extend_from_slice(&self.banded.to_le_bytes());
        head.extend_from_slice(&self.segment_len.to_le_bytes());
        head.extend_from_slice(&self.segment_footer_crc.to_le_bytes());
        head.extend_from_slice(&self.sketch_bytes.to_le_bytes());
        head.extend_from_slice(&[0; 2]);
        head.extend_from_slice(&self.scheme);
        debug_assert_eq!(head.len(), B_CRC);
        let crc = crc32fast::hash(&head);
        head.extend_from_slice(&crc.to_le_bytes());
        if let Some(dst) = b.get_mut(..B_END) {
            dst.copy_from_slice(&head);
        }
        b
    }

    /// Decodes and checks the head at the start of `bytes` (magic and version are the
    /// caller's: `integrity::check_magic_and_version`).
    pub fn decode(bytes: &[u8]) -> Result<BandHead, Fault> {
        let h = slice(bytes, 0, B_END as u64, "band file head")?;
        let (body, crc) = h.split_at(B_CRC);
        verify_crc(body, LE::read_u32(crc)).map_err(|m| m.fault(0, Default::default(), "band file head"))?;
        let byte = |at: usize| body.get(at).copied().unwrap_or(0);
        let (bands, band_bits, bucket_bits, tag_bits) = (byte(B_BANDS), byte(B_BAND_BITS), byte(B_BUCKET_BITS), byte(B_TAG_BITS));
        if bands == 0 || u32::from(bands) > MAX_BANDS || u32::from(band_bits) != BAND_BITS || u32::from(bucket_bits) > MAX_BUCKET_BITS || u32::from(tag_bits) != TAG_BITS {
            return Err(Fault::at(B_BANDS as u64, format!("band design {bands} x {band_bits} bits, {bucket_bits} bucket bits, {tag_bits}-bit tags is not one this build writes")));
        }
        let u64_at = |at: usize| body.get(at..at + 8).map_or(0, LE::read_u64);
        let head = BandHead {
            design: BandDesign { bands: u32::from(bands), bucket_bits: u32::from(bucket_bits) },
            entries: u64_at(B_ENTRIES),
            banded: u64_at(B_BANDED),
            segment_len: u64_at(B_SEGMENT_LEN),
            segment_footer_crc: body.get(B_SEGMENT_FOOTER_CRC..B_SKETCH_BYTES).map_or(0, LE::read_u32),
            sketch_bytes: body.get(B_SKETCH_BYTES..B_RESERVED).map_or(0, LE::read_u16),
            scheme: body.get(B_SCHEME..B_CRC).and_then(|s| s.try_into().ok()).unwrap_or([0; 8]),
        };
        if head.banded > head.entries || head.entries > u64::from(u32::MAX) {
            return Err(Fault::at(B_BANDED as u64, format!("{} banded entries of {}", head.banded, head.entries)));
        }
        Ok(head)
    }

    /// Where each band's pages are.
    pub fn geometry(&self) -> Geometry {
        Geometry { entry_pages: self.banded.div_ceil(ENTRIES_PER_PAGE), dir_pages: self.design.buckets().div_ceil(ENDS_PER_PAGE), banded: self.banded, buckets: self.design.buckets() }
    }
}

/// Where a band file's pages are: each band is its entry pages, then its directory pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub entry_pages: u64,
    pub dir_pages: u64,
    pub banded: u64,
    pub buckets: u64,
}

impl Geometry {
    /// Pages of one band.
    pub fn band_pages(&self) -> u64 {
        self.entry_pages + self.dir_pages
    }

    /// Offset of band `b`'s first entry page.
    pub fn band_offset(&self, b: u32) -> u64 {
        HEAD_BYTES + u64::from(b) * self.band_pages() * PAGE_BYTES
    }

    /// Offset of entry page `page` of band `b`.
    pub fn entry_page(&self, b: u32, page: u64) -> u64 {
        self.band_offset(b) + page * PAGE_BYTES
    }

    /// Offset of directory page `page` of band `b`.
    pub fn dir_page(&self, b: u32, page: u64) -> u64 {
        self.band_offset(b) + (self.entry_pages + page) * PAGE_BYTES
    }

    /// The file's length with `bands` bands.
    pub fn file_len(&self, bands: u32) -> u64 {
        HEAD_BYTES + u64::from(bands) * self.band_pages() * PAGE_BYTES
    }
}

/// A directory's pages (of a band, or of an id table): `ends` holds each bucket's entry
/// count and becomes the running ends (the end of bucket i's entries), which are sealed
/// [`ENDS_PER_PAGE`] to a page, little-endian u32s, in bucket order.
pub fn directory_pages(ends: &mut [u32]) -> impl Iterator<Item = [u8; PAGE_BYTES as usize]> + '_ {
    let mut total = 0u32;
    for end in ends.iter_mut() {
        total += *end;
        *end = total;
    }
    ends.chunks(ENDS_PER_PAGE as usize).map(|chunk| seal_page(&chunk.iter().flat_map(|e| e.to_le_bytes()).collect::<Vec<u8>>()))
}

/// A page's bytes: `payload` then zeros up to the CRC, then the CRC of all before it.
pub fn seal_page(payload: &[u8]) -> [u8; PAGE_BYTES as usize] {
    let mut page = [0u8; PAGE_BYTES as usize];
    let body = (PAGE_BYTES - PAGE_CRC_BYTES) as usize;
    let n = payload.len().min(body);
    if let (Some(dst), Some(src)) = (page.get_mut(..n), payload.get(..n)) {
        dst.copy_from_slice(src);
    }
    let crc = crc32fast::hash(page.get(..body).unwrap_or_default());
    if let Some(dst) = page.get_mut(body..) {
        dst.copy_from_slice(&crc.to_le_bytes());
    }
    page
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn heads_roundtrip_and_refuse_damage() {
        let head = BandHead {
            design: BandDesign { bands: 16, bucket_bits: 20 },
            entries: 1000,
            banded: 990,
            segment_len: 123_456,
            segment_footer_crc: 0xabcd_ef01,
            sketch_bytes: 64,
            scheme: *b"MH\x01\x01\x00\x02\x00\x00",
        };
        let mut bytes = head.encode();
        assert_eq!(bytes.len(), HEAD_BYTES as usize);
        assert_eq!(BandHead::decode(&bytes), Ok(head));
        bytes[B_ENTRIES] ^= 1;
        assert!(BandHead::decode(&bytes).unwrap_err().detail.contains("checksum"));
    }

    #[test]
    fn bands_are_entry_pages_then_directory_pages() {
        let g = Geometry { entry_pages: 3, dir_pages: 2, banded: 500, buckets: 300 };
        assert_eq!(g.band_offset(0), 1024);
        assert_eq!(g.dir_page(0, 0), 1024 + 3 * 1024);
        assert_eq!(g.entry_page(1, 0), 1024 + 5 * 1024);
        assert_eq!(g.file_len(2), 1024 + 10 * 1024);
        assert_eq!(ENTRIES_PER_PAGE, 204);
        assert_eq!(ENDS_PER_PAGE, 255);
    }
}
