//! Byte layout of a band file, mirroring `format-spec/bands.md` field by field: the head
//! (encoder and decoder), the pages, where each band's pages are, and the bit-packed entries
//! and bucket directories of version 2 (version 1's 5-byte entries are the same bit string
//! with 32-bit ordinals and 8-bit tags; its directory is u32 bucket ends). Version 3's
//! entry stream (blocks of 8 buckets, Elias-Fano coded ordinals) is `stream.rs`'s; its
//! directory is version 2's over blocks instead of buckets. Decoders return a
//! [`Fault`] with the offset of the bad field; they never panic.
//!
//! All integers are little-endian. Offsets below are relative to the structure's start.

use byteorder::{ByteOrder, LittleEndian as LE};

use super::{BandDesign, BAND_BITS, MAX_BANDS, MAX_BUCKET_BITS, TAG_BITS};
use crate::integrity::{verify_crc, Fault};
use crate::segment::layout::slice;

/// Format version written by this build (4: version 3 with 5-bit tags; 3: Elias-Fano coded
/// ordinals in blocks of 8 buckets, 6-bit tags; 2: bit-packed entries, grouped bucket ends).
pub const BANDS_VERSION: u32 = 4;
/// Oldest format version read (version 1: 5-byte entries, u32 bucket ends).
pub const BANDS_OLDEST: u32 = 1;
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
pub const B_ORDINAL_BITS: usize = B_SKETCH_BYTES + 2;
pub const B_DIR_BITS: usize = B_ORDINAL_BITS + 1;
pub const B_SCHEME: usize = B_DIR_BITS + 1;
pub const B_CRC: usize = B_SCHEME + 8;
pub const B_END: usize = B_CRC + 4;
/// The head occupies this many bytes (zero-padded); the first band's pages follow.
pub const HEAD_BYTES: u64 = 1024;

/// Bytes of a page; its last [`PAGE_CRC_BYTES`] hold the CRC-32 of the rest.
pub const PAGE_BYTES: u64 = 1024;
pub const PAGE_CRC_BYTES: u64 = 4;
/// Bits of a page's payload, where its packed entries or directory groups are.
pub const PAYLOAD_BITS: u64 = (PAGE_BYTES - PAGE_CRC_BYTES) * 8;
/// Bucket ends (u32) per directory page of version 1 (and of an id table).
pub const ENDS_PER_PAGE: u64 = (PAGE_BYTES - PAGE_CRC_BYTES) / 4;
/// Slots of a directory group (versions 2 and 3): a u32 base, then one relative end a
/// bucket (version 3: a block).
pub const GROUP_BUCKETS: u64 = 64;
/// Bits of a group's base.
pub const BASE_BITS: u64 = 32;
/// Buckets of a block (version 3): the directory counts blocks' entries, and a block's
/// buckets share one stretch of the entry stream.
pub const BLOCK_BUCKETS: u64 = 8;
/// Version 1's fixed widths: u32 ordinals, u8 tags, u32 bucket ends.
const V1_ORDINAL_BITS: u32 = 32;
const V1_TAG_BITS: u32 = 8;
const V1_DIR_BITS: u32 = 32;
/// The tag bits of versions 2 and 3.
const V3_TAG_BITS: u32 = 6;

/// `t`, the tag bits of a file of `version`: 8 (version 1), 6 (versions 2 and 3), 5
/// (version 4, [`TAG_BITS`]).
pub fn tag_bits_of(version: u32) -> u32 {
    match version {
        1 => V1_TAG_BITS,
        2 | 3 => V3_TAG_BITS,
        _ => TAG_BITS,
    }
}

/// Bits needed to write `n` (0 for 0).
pub fn bit_len(n: u64) -> u32 {
    64 - n.leading_zeros()
}

/// The ordinal bits of a version 2 or 3 file of a segment of `entries` entries: enough for
/// every ordinal `0 .. entries - 1` (at least 1).
pub fn ordinal_bits_for(entries: u64) -> u32 {
    bit_len(entries.saturating_sub(1)).max(1)
}

/// Buckets whose entries one directory group counts in a file of `version` (2 and 3;
/// `r`, the bits of a relative end, holds the largest such count): 64 buckets in version
/// 2, 64 blocks of 8 in version 3.
pub fn dir_group_buckets(version: u32) -> u64 {
    if version >= 3 {
        GROUP_BUCKETS * BLOCK_BUCKETS
    } else {
        GROUP_BUCKETS
    }
}

/// `h`, the high bits of a version 3 entry's ordinal (coded in unary in its block): the
/// fewest bits with `2^h` at least the mean entries a bucket, `ceil(banded / 2^p)`, and at
/// most `ordinal_bits` (0 for an empty band).
pub fn high_bits_for(banded: u64, bucket_bits: u32, ordinal_bits: u32) -> u32 {
    bit_len(banded.div_ceil(1u64 << bucket_bits).saturating_sub(1)).min(ordinal_bits)
}

/// The head of a band file: the design, the entries it bands, and which segment it
/// belongs to (its length and the CRC of its footer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandHead {
    /// 1, 2 or 3 ([`BANDS_VERSION`]).
    pub version: u32,
    pub design: BandDesign,
    /// `w`: bits of an entry's ordinal (32 in version 1).
    pub ordinal_bits: u32,
    /// `t`: bits of an entry's tag, the band's low bits (8 in version 1).
    pub tag_bits: u32,
    /// `r`: bits of a bucket's end relative to its group's base (32 in version 1: absolute ends).
    pub dir_bits: u32,
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
        head.extend_from_slice(&self.version.to_le_bytes());
        head.extend_from_slice(&[self.design.bands as u8, BAND_BITS as u8, self.design.bucket_bits as u8, self.tag_bits as u8]);
        head.extend_from_slice(&self.entries.to_le_bytes());
        head.extend_from_slice(&self.banded.to_le_bytes());
        head.extend_from_slice(&self.segment_len.to_le_bytes());
        head.extend_from_slice(&self.segment_footer_crc.to_le_bytes());
        head.extend_from_slice(&self.sketch_bytes.to_le_bytes());
        head.extend_from_slice(&if self.version == 1 { [0, 0] } else { [self.ordinal_bits as u8, self.dir_bits as u8] });
        head.extend_from_slice(&self.scheme);
        debug_assert_eq!(head.len(), B_CRC);
        let crc = crc32fast::hash(&head);
        head.extend_from_slice(&crc.to_le_bytes());
        if let Some(dst) = b.get_mut(..B_END) {
            dst.copy_from_slice(&head);
        }
        b
    }

    /// Decodes and checks the head at the start of `bytes`, of format `version` (magic and
    /// version are the caller's: `integrity::check_magic_and_version`).
    pub fn decode(bytes: &[u8], version: u32) -> Result<BandHead, Fault> {
        let h = slice(bytes, 0, B_END as u64, "band file head")?;
        let (body, crc) = h.split_at(B_CRC);
        verify_crc(body, LE::read_u32(crc)).map_err(|m| m.fault(0, Default::default(), "band file head"))?;
        let byte = |at: usize| body.get(at).copied().unwrap_or(0);
        let (bands, band_bits, bucket_bits, tag_bits) = (byte(B_BANDS), byte(B_BAND_BITS), byte(B_BUCKET_BITS), byte(B_TAG_BITS));
        let want_tag = tag_bits_of(version);
        if bands == 0 || u32::from(bands) > MAX_BANDS || u32::from(band_bits) != BAND_BITS || u32::from(bucket_bits) > MAX_BUCKET_BITS || u32::from(tag_bits) != want_tag {
            return Err(Fault::at(B_BANDS as u64, format!("band design {bands} x {band_bits} bits, {bucket_bits} bucket bits, {tag_bits}-bit tags is not one of version {version}")));
        }
        let u64_at = |at: usize| body.get(at..at + 8).map_or(0, LE::read_u64);
        let entries = u64_at(B_ENTRIES);
        let (ordinal_bits, dir_bits) = match (version, byte(B_ORDINAL_BITS), byte(B_DIR_BITS)) {
            (1, 0, 0) => (V1_ORDINAL_BITS, V1_DIR_BITS),
            (v, w, r) if v > 1 && u32::from(w) == ordinal_bits_for(entries) && (1..=32).contains(&r) => (u32::from(w), u32::from(r)),
            (_, w, r) => return Err(Fault::at(B_ORDINAL_BITS as u64, format!("{w}-bit ordinals and {r}-bit bucket ends are not those of a version {version} file of {entries} entries"))),
        };
        let head = BandHead {
            version,
            design: BandDesign { bands: u32::from(bands), bucket_bits: u32::from(bucket_bits) },
            ordinal_bits,
            tag_bits: u32::from(tag_bits),
            dir_bits,
            entries,
            banded: u64_at(B_BANDED),
            segment_len: u64_at(B_SEGMENT_LEN),
            segment_footer_crc: body.get(B_SEGMENT_FOOTER_CRC..B_SKETCH_BYTES).map_or(0, LE::read_u32),
            sketch_bytes: body.get(B_SKETCH_BYTES..B_ORDINAL_BITS).map_or(0, LE::read_u16),
            scheme: body.get(B_SCHEME..B_CRC).and_then(|s| s.try_into().ok()).unwrap_or([0; 8]),
        };
        if head.banded > head.entries || head.entries > u64::from(u32::MAX) {
            return Err(Fault::at(B_BANDED as u64, format!("{} banded entries of {}", head.banded, head.entries)));
        }
        Ok(head)
    }

    /// The same head as version 1 writes it (its fixed widths): how an old file is checked
    /// against the head its segment makes today.
    pub fn as_version_1(self) -> BandHead {
        BandHead { version: 1, ordinal_bits: V1_ORDINAL_BITS, tag_bits: V1_TAG_BITS, dir_bits: V1_DIR_BITS, ..self }
    }

    /// Where each band's pages are.
    pub fn geometry(&self) -> Geometry {
        let mut g = Geometry {
            version: self.version,
            entry_pages: 0,
            dir_pages: 0,
            banded: self.banded,
            buckets: self.design.buckets(),
            ordinal_bits: self.ordinal_bits,
            tag_bits: self.tag_bits,
            dir_bits: self.dir_bits,
            high_bits: if self.version >= 3 { high_bits_for(self.banded, self.design.bucket_bits, self.ordinal_bits) } else { 0 },
        };
        g.entry_pages = if self.version >= 3 { g.stream_bits().div_ceil(PAYLOAD_BITS) } else { self.banded.div_ceil(g.per_page()) };
        g.dir_pages = if self.version == 1 { g.buckets.div_ceil(ENDS_PER_PAGE) } else { g.dir_slots().div_ceil(GROUP_BUCKETS).div_ceil(g.groups_per_page()) };
        g
    }
}

/// Where a band file's pages are: each band is its entry pages, then its directory pages;
/// and how entries and bucket ends sit in their pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub version: u32,
    pub entry_pages: u64,
    pub dir_pages: u64,
    pub banded: u64,
    pub buckets: u64,
    pub ordinal_bits: u32,
    pub tag_bits: u32,
    pub dir_bits: u32,
    /// `h` (version 3): an ordinal's high bits, coded in unary; 0 before.
    pub high_bits: u32,
}

impl Geometry {
    /// Bits of an entry as it is stored bit-packed: `tag << w | ordinal` (versions 1 and
    /// 2), `tag << l | low` with `l = w - h` (version 3's low entries).
    pub fn entry_bits(&self) -> u64 {
        u64::from(self.ordinal_bits - self.high_bits + self.tag_bits)
    }

    /// What one directory slot counts: a bucket (versions 1 and 2) or a block of
    /// [`BLOCK_BUCKETS`] (version 3); this many a band.
    pub fn dir_slots(&self) -> u64 {
        if self.version >= 3 {
            self.buckets.div_ceil(BLOCK_BUCKETS)
        } else {
            self.buckets
        }
    }

    /// Bits of a band's entry stream (version 3): each entry's low entry and its 1 in the
    /// unary high bits, and `2^h` 0s a bucket.
    pub fn stream_bits(&self) -> u64 {
        self.banded * (self.entry_bits() + 1) + (self.buckets << self.high_bits)
    }

    /// Where block `k`, whose first entry is the band's entry `start`, begins in the
    /// band's entry stream (version 3): the blocks before it are whole.
    pub fn block_bit(&self, k: u64, start: u64) -> u64 {
        start * (self.entry_bits() + 1) + ((k * BLOCK_BUCKETS) << self.high_bits)
    }

    /// Buckets of block `k` (version 3): [`BLOCK_BUCKETS`], fewer in the last block of a
    /// band of fewer buckets.
    pub fn block_buckets(&self, k: u64) -> u64 {
        self.buckets.saturating_sub(k * BLOCK_BUCKETS).min(BLOCK_BUCKETS)
    }

    /// Entries an entry page holds (204 in version 1).
    pub fn per_page(&self) -> u64 {
        PAYLOAD_BITS / self.entry_bits()
    }

    /// Bits of a directory group (versions 2 and 3): its base and 64 relative ends.
    pub fn group_bits(&self) -> u64 {
        BASE_BITS + GROUP_BUCKETS * u64::from(self.dir_bits)
    }

    /// Directory groups a page holds (versions 2 and 3).
    pub fn groups_per_page(&self) -> u64 {
        (PAYLOAD_BITS / self.group_bits()).max(1)
    }

    /// The `(tag, ordinal)` of packed entry `v` (versions 1 and 2; version 3's `(tag, low)`).
    #[inline]
    pub fn unpack(&self, v: u64) -> (u32, u64) {
        let low = self.ordinal_bits - self.high_bits;
        ((v >> low) as u32, v & ((1u64 << low) - 1))
    }

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

/// The bits `bit .. bit + width` (`width` at most 57) of `payload` read as one
/// little-endian bit string (bit `j` is bit `j mod 8` of byte `j / 8`); bits past its end
/// read as 0.
#[inline]
pub fn read_bits(payload: &[u8], bit: u64, width: u64) -> u64 {
    let at = (bit / 8) as usize;
    // eight whole bytes (one load) but within a payload's last 7 bytes
    let word = match payload.get(at..).and_then(<[u8]>::first_chunk::<8>) {
        Some(word) => *word,
        None => {
            let mut word = [0u8; 8];
            let end = payload.len().min(at + 8);
            if let (Some(dst), Some(src)) = (word.get_mut(..end.saturating_sub(at)), payload.get(at..end)) {
                dst.copy_from_slice(src);
            }
            word
        }
    };
    (u64::from_le_bytes(word) >> (bit % 8)) & ((1u64 << width) - 1)
}

/// A version 2 or 3 band's directory pages: `counts` holds each slot's (bucket's, block's) entry count; each
/// group of [`GROUP_BUCKETS`] buckets is its base (the entries before it, 32 bits) and each
/// bucket's end relative to the base (`dir_bits` bits), `groups_per_page` groups a page.
pub fn group_pages(counts: &[u32], dir_bits: u32, groups_per_page: u64) -> impl Iterator<Item = [u8; PAGE_BYTES as usize]> + '_ {
    let mut base = 0u64;
    let groups: Vec<&[u32]> = counts.chunks(GROUP_BUCKETS as usize).collect();
    let mut out = Vec::with_capacity(groups.len().div_ceil(groups_per_page as usize));
    for page_groups in groups.chunks(groups_per_page as usize) {
        let mut page = PackedPage::new();
        for group in page_groups {
            page.push(base, BASE_BITS);
            let mut end = 0u64;
            for &c in group.iter() {
                end += u64::from(c);
                page.push(end, u64::from(dir_bits));
            }
            for _ in group.len()..GROUP_BUCKETS as usize {
                page.push(0, u64::from(dir_bits));
            }
            base += end;
        }
        out.push(seal_page(&page.take()));
    }
    out.into_iter()
}

/// A page's payload as it fills: values appended bit by bit, least significant first (the
/// entry pages of band files and id tables, and the directory pages of band files).
pub struct PackedPage {
    bytes: Vec<u8>,
    bits: u64,
    acc: u128,
    pending: u32,
}

impl Default for PackedPage {
    fn default() -> Self {
        Self::new()
    }
}

impl PackedPage {
    pub fn new() -> Self {
        PackedPage { bytes: Vec::with_capacity((PAGE_BYTES - PAGE_CRC_BYTES) as usize), bits: 0, acc: 0, pending: 0 }
    }

    /// Appends `width` (at most 64) bits of `v`; whole 64-bit words go to the bytes.
    #[inline]
    pub fn push(&mut self, v: u64, width: u64) {
        // `pending` < 64 before, so the bits fit the 128-bit accumulator
        self.acc |= u128::from(v) << self.pending;
        self.pending += width as u32;
        self.bits += width;
        if self.pending >= 64 {
            self.bytes.extend_from_slice(&(self.acc as u64).to_le_bytes());
            self.acc >>= 64;
            self.pending -= 64;
        }
    }

    /// The page's payload (its last partial byte included), and a fresh page in its place.
    pub fn take(&mut self) -> Vec<u8> {
        let rest = self.pending.div_ceil(8) as usize;
        self.bytes.extend_from_slice(self.acc.to_le_bytes().get(..rest).unwrap_or_default());
        let out = std::mem::take(&mut self.bytes);
        *self = PackedPage::new();
        out
    }

    /// True when nothing was pushed since the last [`Self::take`].
    pub fn is_empty(&self) -> bool {
        self.bits == 0
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

    fn head(version: u32) -> BandHead {
        let (ordinal_bits, tag_bits, dir_bits) = if version == 1 { (32, 8, 32) } else { (10, tag_bits_of(version), 7) };
        BandHead {
            version,
            design: BandDesign { bands: 16, bucket_bits: 6 },
            ordinal_bits,
            tag_bits,
            dir_bits,
            entries: 1000,
            banded: 990,
            segment_len: 123_456,
            segment_footer_crc: 0xabcd_ef01,
            sketch_bytes: 64,
            scheme: *b"MH\x01\x01\x00\x02\x00\x00",
        }
    }

    #[test]
    fn heads_roundtrip_and_refuse_damage() {
        for version in [1, 2, 3, 4] {
            let head = head(version);
            let mut bytes = head.encode();
            assert_eq!(bytes.len(), HEAD_BYTES as usize);
            assert_eq!(&bytes[8..12], &version.to_le_bytes());
            assert_eq!(BandHead::decode(&bytes, version), Ok(head));
            // version 1's widths are refused as another version's, and the others' as version 1's
            assert!(BandHead::decode(&bytes, if version == 1 { 2 } else { 1 }).is_err());
            // version 3's 6-bit tags are refused as version 4's and version 4's 5-bit ones as version 3's
            if version >= 3 {
                assert!(BandHead::decode(&bytes, 7 - version).unwrap_err().detail.contains("-bit tags is not one of version"));
            }
            bytes[B_ENTRIES] ^= 1;
            assert!(BandHead::decode(&bytes, version).unwrap_err().detail.contains("checksum"));
        }
        // version 2's ordinal bits follow the entry count
        let mut wrong = head(2);
        wrong.ordinal_bits = 11;
        assert!(BandHead::decode(&wrong.encode(), 2).unwrap_err().detail.contains("11-bit ordinals"));
    }

    #[test]
    fn bands_are_entry_pages_then_directory_pages() {
        let g = head(1).geometry();
        assert_eq!((g.per_page(), g.entry_pages, g.dir_pages), (204, 5, 1));
        assert_eq!(g.band_offset(0), 1024);
        assert_eq!(g.dir_page(0, 0), 1024 + 5 * 1024);
        assert_eq!(g.entry_page(1, 0), 1024 + 6 * 1024);
        assert_eq!(g.file_len(2), 1024 + 12 * 1024);
        // version 2: 16-bit entries (510 a page), one 480-bit group (17 a page)
        let g = head(2).geometry();
        assert_eq!((g.entry_bits(), g.per_page(), g.group_bits(), g.groups_per_page()), (16, 510, 480, 17));
        assert_eq!((g.entry_pages, g.dir_pages), (2, 1));
        assert_eq!(ENDS_PER_PAGE, 255);
        // version 3: 990 entries in 64 buckets: h = bitlen(16 - 1) = 4, 12-bit low entries;
        // a stream of 990 x 13 + 64 x 16 bits (2 pages), 8 blocks in one group (1 page)
        let g = head(3).geometry();
        assert_eq!((g.high_bits, g.entry_bits(), g.stream_bits(), g.dir_slots()), (4, 12, 990 * 13 + 64 * 16, 8));
        assert_eq!((g.entry_pages, g.dir_pages, g.block_bit(2, 100), g.block_buckets(7)), (2, 1, 100 * 13 + 2 * 8 * 16, 8));
        // version 4: the same with 5-bit tags: 11-bit low entries
        let g = head(4).geometry();
        assert_eq!((g.high_bits, g.entry_bits(), g.stream_bits(), g.entry_pages), (4, 11, 990 * 12 + 64 * 16, 2));
        assert_eq!((tag_bits_of(1), tag_bits_of(2), tag_bits_of(3), tag_bits_of(4), TAG_BITS), (8, 6, 6, 5, 5));
        assert_eq!((high_bits_for(0, 6, 10), high_bits_for(64, 6, 10), high_bits_for(65, 6, 10), high_bits_for(1 << 20, 0, 10)), (0, 0, 1, 10));
    }

    #[test]
    fn packed_values_and_groups_read_back() {
        for width in [1u64, 7, 26, 32, 40] {
            let mut page = PackedPage::new();
            let values: Vec<u64> = (0..PAYLOAD_BITS / width).map(|i| (i * 0x9e37_79b9_7f4a) & ((1 << width) - 1)).collect();
            for &v in &values {
                page.push(v, width);
            }
            let payload = page.take();
            assert!(payload.len() as u64 <= PAGE_BYTES - PAGE_CRC_BYTES);
            for (i, &v) in values.iter().enumerate() {
                assert_eq!(read_bits(&payload, i as u64 * width, width), v, "width {width}, value {i}");
            }
        }
        // every position and width against a bit-by-bit reader, the payload's last bytes
        // (read past its end as 0) included
        let payload: Vec<u8> = (0..1020u64).map(|i| (i.wrapping_mul(0x9e37_79b9) >> 7) as u8).collect();
        let bit_at = |j: u64| payload.get((j / 8) as usize).map_or(0, |b| u64::from(b >> (j % 8) & 1));
        for bit in 0..PAYLOAD_BITS + 16 {
            for width in [1u64, 5, 24, 25, 33, 57] {
                let want = (0..width).fold(0u64, |v, i| v | bit_at(bit + i) << i);
                assert_eq!(read_bits(&payload, bit, width), want, "bit {bit}, width {width}");
            }
        }
        // 130 buckets: two whole groups and a third of 2 buckets, 2 groups a page
        let counts: Vec<u32> = (0..130u32).map(|i| i % 5).collect();
        let pages: Vec<_> = group_pages(&counts, 8, 2).collect();
        assert_eq!(pages.len(), 2);
        let mut total = 0u64;
        for (i, &c) in counts.iter().enumerate() {
            let (g, j) = (i as u64 / GROUP_BUCKETS, i as u64 % GROUP_BUCKETS);
            let page = &pages[(g / 2) as usize];
            let at = (g % 2) * (32 + 64 * 8);
            let base = read_bits(page, at, 32);
            total += u64::from(c);
            assert_eq!(base + read_bits(page, at + 32 + j * 8, 8), total, "bucket {i}");
        }
    }
}
