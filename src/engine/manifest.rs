//! The manifest: the one small file that says which segments, tombstone files and logs make
//! up an index (byte layout in `format-spec/manifest.md`).
//!
//! It is replaced, never edited: [`Manifest::store`] writes `MANIFEST.tmp`, syncs it,
//! renames it over `MANIFEST` and syncs the directory, so after any crash the directory
//! holds either the previous manifest or the new one, whole. This module owns the format
//! and that protocol; the engine decides what goes in it.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

use std::path::Path;

use byteorder::{ByteOrder, LittleEndian as LE};

use super::expiry::{self, Expiry, EXPIRY_RECORD_BYTES, SEGMENT_EPOCH_BYTES};
use crate::codec::Codec;
use crate::error::{Error, Location, Result};
use crate::integrity::{check_magic_and_version, verify_crc};
use crate::segment::SketchColumn;
use crate::storage::{write_atomically, Storage};

/// The manifest's file name inside an index directory.
pub const MANIFEST_NAME: &str = "MANIFEST";
/// First bytes of a manifest.
pub const MANIFEST_MAGIC: [u8; 8] = *b"SIMDXMAN";
/// Manifest format version of an index without sketches (and the oldest read).
pub const MANIFEST_VERSION: u32 = 1;
/// Manifest format version of an index that stores sketches: [`M_SKETCH_BYTES`] is set and
/// the sketch scheme (8 bytes) follows the tombstone entries.
pub const MANIFEST_VERSION_SKETCHES: u32 = 2;
/// Manifest format version written today: the log entries (each live log's
/// synced length and last sequence number) follow the tombstone entries, their count in the
/// header's last word; the sketch width is 0 in an index without sketches.
pub const MANIFEST_VERSION_LOGS: u32 = 3;
/// Manifest format version of an index with an expiry window: version 3 with the
/// expiry section (the window, its granularity and each segment's time slice) after the
/// recipe record. An index without a window writes version 3.
pub const MANIFEST_VERSION_EXPIRY: u32 = 4;

/// Offset of the magic.
pub const M_MAGIC: usize = 0;
/// Offset of the format version.
pub const M_VERSION: usize = M_MAGIC + 8;
/// Offset of the total file length (u32).
pub const M_LEN: usize = M_VERSION + 4;
/// Offset of the manifest number: one more than the manifest it replaced.
pub const M_NUMBER: usize = M_LEN + 4;
/// Offset of the next unused file number.
pub const M_NEXT_FILE: usize = M_NUMBER + 8;
/// Offset of the oldest live log's number.
pub const M_LOG_NUMBER: usize = M_NEXT_FILE + 8;
/// Offset of the last sequence number whose operation is in a segment or tombstone file.
pub const M_LAST_SEQ: usize = M_LOG_NUMBER + 8;
/// Offset of the index's design distance k (u8).
pub const M_K: usize = M_LAST_SEQ + 8;
/// Offset of the gap codec of new segments (u8).
pub const M_CODEC: usize = M_K + 1;
/// Offset of the sketch width (u16): bytes of sketch per document (version 2; 0 in version 1).
pub const M_SKETCH_BYTES: usize = M_CODEC + 1;
/// Offset of the segment count (u32).
pub const M_SEGMENTS: usize = M_SKETCH_BYTES + 2;
/// Offset of the tombstone-file count (u32).
pub const M_TOMBSTONES: usize = M_SEGMENTS + 4;
/// Offset of the log-entry count (u32; version 3; four reserved zero bytes before it).
pub const M_LOGS: usize = M_TOMBSTONES + 4;
/// Offset of the first segment entry.
pub const M_ENTRIES: usize = M_LOGS + 4;
/// Bytes per segment entry: number, entries, file length, first and last sequence number.
pub const SEGMENT_ENTRY: usize = 5 * 8;
/// Bytes per tombstone-file entry: number, tombstones, last sequence number, file length.
pub const TOMBSTONE_ENTRY: usize = 4 * 8;
/// Bytes per log entry: number, synced length, last sequence number, reserved.
pub const LOG_ENTRY: usize = 4 * 8;
/// Bytes of the recipe record after the log entries (version 3): flags (u32, bit 0: a
/// recipe is pinned) and the CRC-32 of the `RECIPE` file (u32).
pub const RECIPE_RECORD_BYTES: usize = 8;
/// Bytes of the sketch scheme after the tombstone entries (version 2).
pub const SKETCH_SCHEME_BYTES: usize = 8;
/// Bytes of the trailing CRC.
pub const M_CRC_BYTES: usize = 4;

/// A live segment as the manifest records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentMeta {
    /// File number (`seg-NUMBER.sdx`).
    pub number: u64,
    /// Fingerprints stored (with repeats).
    pub entries: u64,
    /// File size in bytes.
    pub file_len: u64,
    /// Sequence numbers of the operations the segment holds lie in `min_seq..=max_seq`.
    pub min_seq: u64,
    /// See `min_seq`. A tombstone with a larger sequence number hides this segment's copy.
    pub max_seq: u64,
    /// The time slice of every pair in it, in an index with an expiry window (`expiry`); 0
    /// otherwise.
    pub epoch: u64,
}

/// A live tombstone file as the manifest records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TombstoneMeta {
    /// File number (`tomb-NUMBER.sdt`).
    pub number: u64,
    /// Tombstones in the file.
    pub count: u64,
    /// Largest sequence number of a tombstone in the file.
    pub max_seq: u64,
    /// File size in bytes.
    pub file_len: u64,
}

/// What the manifest records of a live log when it was written (a *seal*): the log held at
/// least `len` bytes of intact records, all synced, through sequence number `last_seq`.
/// A log found shorter, or missing, lost the acknowledged operations up to `last_seq`
/// (`format-spec/manifest.md`, "Log entries").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogMeta {
    /// File number (`log-NUMBER.wal`).
    pub number: u64,
    /// Bytes of header and intact records the log held, synced.
    pub len: u64,
    /// The last sequence number in the log then; with no records, the one it continues from.
    pub last_seq: u64,
}

/// The decoded manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Increases by one with every replacement.
    pub number: u64,
    /// Next unused file number (segments, tombstone files and logs share one counter).
    pub next_file: u64,
    /// The oldest live log; logs with smaller numbers are obsolete.
    pub log_number: u64,
    /// Every operation up to this sequence number is in a segment or tombstone file.
    pub last_seq: u64,
    /// Largest query distance the index's designs guarantee.
    pub k: u32,
    /// Gap codec of the segments the engine writes.
    pub codec: Codec,
    /// Live segments, oldest data first (sequence ranges ascending and disjoint).
    pub segments: Vec<SegmentMeta>,
    /// Live tombstone files, in the order they were written.
    pub tombstones: Vec<TombstoneMeta>,
    /// The sketch every document of the index carries (fixed when the index is created):
    /// its width and scheme. `None`: the index stores no sketches (a version-1 manifest).
    pub sketches: Option<SketchColumn>,
    /// Seals of live logs (version 3), oldest first: what was synced to each when the
    /// manifest was written (at a flush for the logs frozen before it, at a clean close
    /// for the open one).
    pub logs: Vec<LogMeta>,
    /// The CRC-32 of the pinned `RECIPE` file, when one is pinned (version 3), so that a
    /// lost or replaced recipe is damage, not an index that never had one.
    pub recipe_crc: Option<u32>,
    /// The expiry window (version 4), fixed when the index is created; `None`: nothing expires.
    pub expiry: Option<Expiry>,
}

impl Manifest {
    /// The manifest of a new, empty index.
    pub fn new(k: u32, codec: Codec, sketches: Option<SketchColumn>) -> Self {
        Self {
            number: 1,
            next_file: 2,
            log_number: 1,
            last_seq: 0,
            k,
            codec,
            segments: Vec::new(),
            tombstones: Vec::new(),
            sketches,
            logs: Vec::new(),
            recipe_crc: None,
            expiry: None,
        }
    }

    /// Bytes of the expiry section (version 4; 0 without a window).
    fn expiry_len(&self) -> usize {
        self.expiry.map_or(0, |_| EXPIRY_RECORD_BYTES + self.segments.len() * SEGMENT_EPOCH_BYTES)
    }

    /// The encoded bytes.
    pub fn encode(&self) -> Vec<u8> {
        let scheme_len = if self.sketches.is_some() { SKETCH_SCHEME_BYTES } else { 0 };
        let len = M_ENTRIES
            + self.segments.len() * SEGMENT_ENTRY
            + self.tombstones.len() * TOMBSTONE_ENTRY
            + self.logs.len() * LOG_ENTRY
            + RECIPE_RECORD_BYTES
            + self.expiry_len()
            + scheme_len
            + M_CRC_BYTES;
        let mut b = Vec::with_capacity(len);
        b.extend_from_slice(&MANIFEST_MAGIC);
        let version = if self.expiry.is_some() { MANIFEST_VERSION_EXPIRY } else { MANIFEST_VERSION_LOGS };
        b.extend_from_slice(&version.to_le_bytes());
        b.extend_from_slice(&(len as u32).to_le_bytes());
        for v in [self.number, self.next_file, self.log_number, self.last_seq] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[self.k as u8, self.codec.id()]);
        b.extend_from_slice(&self.sketches.map_or(0, |s| s.bytes).to_le_bytes());
        b.extend_from_slice(&(self.segments.len() as u32).to_le_bytes());
        b.extend_from_slice(&(self.tombstones.len() as u32).to_le_bytes());
        b.extend_from_slice(&(self.logs.len() as u32).to_le_bytes());
        debug_assert_eq!(b.len(), M_ENTRIES);
        for s in &self.segments {
            for v in [s.number, s.entries, s.file_len, s.min_seq, s.max_seq] {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        for t in &self.tombstones {
            for v in [t.number, t.count, t.max_seq, t.file_len] {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        for l in &self.logs {
            for v in [l.number, l.len, l.last_seq, 0] {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        b.extend_from_slice(&u32::from(self.recipe_crc.is_some()).to_le_bytes());
        b.extend_from_slice(&self.recipe_crc.unwrap_or(0).to_le_bytes());
        if let Some(x) = &self.expiry {
            expiry::encode_section(&mut b, x, self.segments.iter().map(|s| s.epoch));
        }
        if let Some(s) = self.sketches {
            b.extend_from_slice(&s.scheme);
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(b.len(), len);
        b
    }

    /// Decodes a manifest read from `path`, checking its CRC and invariants.
    pub fn decode(path: &Path, b: &[u8]) -> Result<Self> {
        let version = check_magic_and_version(path, b, &MANIFEST_MAGIC, "manifest (magic SIMDXMAN)", MANIFEST_VERSION..=MANIFEST_VERSION_EXPIRY)?;
        let cut_short = || Error::corrupt(path, b.len() as u64, format!("manifest is {} bytes, shorter than its {}-byte header: cut short", b.len(), M_ENTRIES));
        let head: &[u8; M_ENTRIES] = b.first_chunk().ok_or_else(cut_short)?;
        let (body, crc) = b.split_last_chunk::<M_CRC_BYTES>().filter(|(body, _)| body.len() >= M_ENTRIES).ok_or_else(cut_short)?;
        let len = LE::read_u32(&head[M_LEN..]) as usize;
        if len != b.len() {
            return Err(Error::corrupt(path, M_LEN as u64, format!("manifest says it is {len} bytes, the file is {}", b.len())));
        }
        verify_crc(body, u32::from_le_bytes(*crc)).map_err(|m| m.corrupt(path, body.len() as u64, Location::default(), "manifest"))?;
        // Versions 1 and 2 keep the log-entry count's word reserved (zero).
        let logs_n = LE::read_u32(&head[M_LOGS..]) as usize;
        if version < MANIFEST_VERSION_LOGS && logs_n != 0 {
            return Err(Error::corrupt(path, M_LOGS as u64, "reserved manifest bytes are not zero"));
        }
        let sketch_bytes = LE::read_u16(&head[M_SKETCH_BYTES..]);
        if version < MANIFEST_VERSION_LOGS && (version >= MANIFEST_VERSION_SKETCHES) != (sketch_bytes > 0) {
            return Err(Error::corrupt(path, M_SKETCH_BYTES as u64, format!("sketch width {sketch_bytes} in a version-{version} manifest")));
        }
        let segments_n = LE::read_u32(&head[M_SEGMENTS..]) as usize;
        let tombstones_n = LE::read_u32(&head[M_TOMBSTONES..]) as usize;
        let entries = body.get(M_ENTRIES..).unwrap_or_default();
        let (entries, scheme) = if sketch_bytes > 0 {
            let (entries, scheme) = entries.split_last_chunk::<SKETCH_SCHEME_BYTES>().ok_or_else(cut_short)?;
            (entries, Some(*scheme))
        } else {
            (entries, None)
        };
        let (entries, expiry) = if version >= MANIFEST_VERSION_EXPIRY {
            let section = EXPIRY_RECORD_BYTES + segments_n.saturating_mul(SEGMENT_EPOCH_BYTES);
            let at = entries.len().checked_sub(section).ok_or_else(cut_short)?;
            let (entries, section) = entries.split_at_checked(at).ok_or_else(cut_short)?;
            (entries, Some(expiry::decode_section(path, M_ENTRIES + at, section, segments_n)?))
        } else {
            (entries, None)
        };
        let (entries, recipe_crc) = if version >= MANIFEST_VERSION_LOGS {
            let (entries, record) = entries.split_last_chunk::<RECIPE_RECORD_BYTES>().ok_or_else(cut_short)?;
            let (flags, crc) = (LE::read_u32(&record[..4]), LE::read_u32(&record[4..]));
            if flags > 1 || (flags == 0 && crc != 0) {
                return Err(Error::corrupt(path, (M_ENTRIES + entries.len()) as u64, format!("recipe record flags {flags}, CRC {crc:#010x}: reserved bits set")));
            }
            (entries, (flags == 1).then_some(crc))
        } else {
            (entries, None)
        };
        let (segment_bytes, rest) = entries.split_at_checked(segments_n.saturating_mul(SEGMENT_ENTRY)).unwrap_or_default();
        let (tombstone_bytes, log_bytes) = rest.split_at_checked(tombstones_n.saturating_mul(TOMBSTONE_ENTRY)).unwrap_or_default();
        if segment_bytes.len() != segments_n.saturating_mul(SEGMENT_ENTRY)
            || tombstone_bytes.len() != tombstones_n.saturating_mul(TOMBSTONE_ENTRY)
            || log_bytes.len() != logs_n.saturating_mul(LOG_ENTRY)
        {
            return Err(Error::corrupt(path, M_SEGMENTS as u64, format!("{segments_n} segments, {tombstones_n} tombstone files and {logs_n} logs do not fill {len} bytes")));
        }
        let codec = Codec::from_id(head[M_CODEC]).ok_or_else(|| Error::corrupt(path, M_CODEC as u64, format!("unknown codec id {}", head[M_CODEC])))?;
        let mut m = Manifest {
            number: LE::read_u64(&head[M_NUMBER..]),
            next_file: LE::read_u64(&head[M_NEXT_FILE..]),
            log_number: LE::read_u64(&head[M_LOG_NUMBER..]),
            last_seq: LE::read_u64(&head[M_LAST_SEQ..]),
            k: u32::from(head[M_K]),
            codec,
            segments: segment_bytes
                .chunks_exact(SEGMENT_ENTRY)
                .map(|c| {
                    let mut v = [0u64; 5];
                    LE::read_u64_into(c, &mut v);
                    SegmentMeta { number: v[0], entries: v[1], file_len: v[2], min_seq: v[3], max_seq: v[4], epoch: 0 }
                })
                .collect(),
            tombstones: tombstone_bytes
                .chunks_exact(TOMBSTONE_ENTRY)
                .map(|c| {
                    let mut v = [0u64; 4];
                    LE::read_u64_into(c, &mut v);
                    TombstoneMeta { number: v[0], count: v[1], max_seq: v[2], file_len: v[3] }
                })
                .collect(),
            sketches: scheme.map(|scheme| SketchColumn { bytes: sketch_bytes, scheme }),
            logs: log_bytes
                .chunks_exact(LOG_ENTRY)
                .map(|c| {
                    let mut v = [0u64; 4];
                    LE::read_u64_into(c, &mut v);
                    (LogMeta { number: v[0], len: v[1], last_seq: v[2] }, v[3])
                })
                .enumerate()
                .map(|(i, (l, reserved))| {
                    let at = M_ENTRIES + segment_bytes.len() + tombstone_bytes.len() + i * LOG_ENTRY;
                    if reserved != 0 {
                        return Err(Error::corrupt(path, (at + 24) as u64, "reserved manifest bytes are not zero"));
                    }
                    Ok(l)
                })
                .collect::<Result<_>>()?,
            recipe_crc,
            expiry: None,
        };
        if let Some((window, epochs)) = expiry {
            m.expiry = Some(window);
            for (s, e) in m.segments.iter_mut().zip(epochs) {
                s.epoch = e;
            }
        }
        m.check(path)?;
        Ok(m)
    }

    /// Invariants a CRC cannot catch (a writer bug): file numbers below `next_file`,
    /// segment sequence ranges ascending and disjoint, nothing beyond `last_seq`.
    fn check(&self, path: &Path) -> Result<()> {
        let bad = |offset: usize, detail: String| Err(Error::corrupt(path, offset as u64, detail));
        if self.log_number >= self.next_file {
            return bad(M_LOG_NUMBER, format!("log number {} is not below the next file number {}", self.log_number, self.next_file));
        }
        let mut prev_max: Option<u64> = None;
        for (i, s) in self.segments.iter().enumerate() {
            let at = M_ENTRIES + i * SEGMENT_ENTRY;
            if s.number >= self.next_file || s.min_seq > s.max_seq || s.max_seq > self.last_seq || prev_max.is_some_and(|p| s.min_seq <= p) {
                return bad(at, format!("segment entry {i} (number {}, sequence numbers {}..={}) is out of order or out of range", s.number, s.min_seq, s.max_seq));
            }
            prev_max = Some(s.max_seq);
        }
        for (i, t) in self.tombstones.iter().enumerate() {
            if t.number >= self.next_file || t.max_seq > self.last_seq {
                return bad(M_ENTRIES + self.segments.len() * SEGMENT_ENTRY + i * TOMBSTONE_ENTRY, format!("tombstone entry {i} (number {}) is out of range", t.number));
            }
        }
        let mut prev: Option<&LogMeta> = None;
        for (i, l) in self.logs.iter().enumerate() {
            let at = M_ENTRIES + self.segments.len() * SEGMENT_ENTRY + self.tombstones.len() * TOMBSTONE_ENTRY + i * LOG_ENTRY;
            let ordered = prev.is_none_or(|p| p.number < l.number && p.last_seq <= l.last_seq);
            if l.number < self.log_number || l.number >= self.next_file || l.last_seq < self.last_seq || !ordered {
                return bad(at, format!("log entry {i} (number {}, through sequence number {}) is out of order or out of range", l.number, l.last_seq));
            }
            prev = Some(l);
        }
        Ok(())
    }

    /// Reads the manifest of the index in `dir`; `Ok(None)` when there is none.
    pub fn load(storage: &dyn Storage, dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(MANIFEST_NAME);
        match storage.read_copy(&path) {
            Ok(bytes) => Self::decode(&path, &bytes).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&path, "read", e)),
        }
    }

    /// Replaces the manifest of the index in `dir` with this one, atomically and durably.
    pub fn store(&self, storage: &dyn Storage, dir: &Path) -> Result<()> {
        write_atomically(storage, &dir.join(MANIFEST_NAME), &self.encode())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_every_truncation_is_an_error() {
        let mut m = Manifest::new(3, Codec::Xor, None);
        m.next_file = 10;
        m.last_seq = 100;
        m.segments.push(SegmentMeta { number: 3, entries: 50, file_len: 4096, min_seq: 1, max_seq: 60, epoch: 0 });
        m.segments.push(SegmentMeta { number: 5, entries: 20, file_len: 2048, min_seq: 61, max_seq: 90, epoch: 0 });
        m.tombstones.push(TombstoneMeta { number: 6, count: 2, max_seq: 90, file_len: 84 });
        m.log_number = 7;
        m.logs.push(LogMeta { number: 7, len: 32 + 44 * 3, last_seq: 103 });
        m.logs.push(LogMeta { number: 8, len: 32, last_seq: 103 });
        let b = m.encode();
        assert_eq!((LE::read_u32(&b[M_VERSION..]), LE::read_u32(&b[M_LOGS..]), b.len()), (3, 2, M_ENTRIES + 2 * 40 + 32 + 2 * 32 + 8 + 4));
        m.recipe_crc = Some(0xdead_beef);
        assert_eq!(Manifest::decode(Path::new("M"), &m.encode()).unwrap(), m);
        m.recipe_crc = None;
        assert_eq!(Manifest::decode(Path::new("M"), &b).unwrap(), m);
        for len in 0..b.len() {
            assert!(Manifest::decode(Path::new("M"), &b[..len]).unwrap_err().is_corruption());
        }
        // With sketches: version 2, the width in the header, the scheme before the CRC.
        m.sketches = Some(SketchColumn { bytes: 64, scheme: *b"MH\x00\x02\x01\x01\x00\x00" });
        let b2 = m.encode();
        assert_eq!((LE::read_u32(&b2[M_VERSION..]), LE::read_u16(&b2[M_SKETCH_BYTES..]), b2.len()), (3, 64, b.len() + 8));
        assert_eq!(Manifest::decode(Path::new("M"), &b2).unwrap(), m);
        for len in 0..b2.len() {
            assert!(Manifest::decode(Path::new("M"), &b2[..len]).unwrap_err().is_corruption());
        }
        // With an expiry window: version 4, the window and one time slice per segment after
        // the recipe record (before the sketch scheme).
        m.expiry = Some(Expiry::parse("30d").unwrap());
        m.segments[0].epoch = 5;
        m.segments[1].epoch = 6;
        let b4 = m.encode();
        assert_eq!((LE::read_u32(&b4[M_VERSION..]), b4.len()), (4, b2.len() + 16 + 2 * 8));
        assert_eq!(Manifest::decode(Path::new("M"), &b4).unwrap(), m);
        for len in 0..b4.len() {
            assert!(Manifest::decode(Path::new("M"), &b4[..len]).unwrap_err().is_corruption());
        }
    }
}
