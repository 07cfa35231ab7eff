//! Tombstone files: the deletes of one flush, `(fingerprint, doc_id, sequence number)`
//! sorted, checksummed (byte layout in `format-spec/tombstones.md`).
//!
//! A tombstone with sequence number `s` hides every copy of its pair in a segment whose
//! `max_seq` is below `s`. Compaction drops the hidden entries from the segments it merges;
//! the engine drops a tombstone file once every live segment is newer than it. This module
//! owns the file format only. Version 2 checksums the file in pages of [`PAGE_ENTRIES`]
//! tombstones, so that damage loses one page's deletes (salvage keeps the rest, counted),
//! not the whole file's.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

use std::path::Path;

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::error::{Error, Location, Result};
use crate::integrity::{check_magic_and_version, verify_crc};
use crate::storage::{write_atomically, Storage};

/// First bytes of a tombstone file.
pub const TOMBSTONE_MAGIC: [u8; 8] = *b"SIMDXTMB";
/// Tombstone format version written by this build: paged, a CRC-32 per page.
pub const TOMBSTONE_VERSION: u32 = 2;
/// The oldest version read: one CRC-32 over the whole file.
pub const TOMBSTONE_VERSION_UNPAGED: u32 = 1;
/// Offset of the magic.
pub const TB_MAGIC: usize = 0;
/// Offset of the format version.
pub const TB_VERSION: usize = TB_MAGIC + 8;
/// Offset of the tombstones per page (version 2; a reserved zero word in version 1).
pub const TB_PAGE_ENTRIES: usize = TB_VERSION + 4;
/// Offset of the tombstone count.
pub const TB_COUNT: usize = TB_PAGE_ENTRIES + 4;
/// Offset of the largest sequence number.
pub const TB_MAX_SEQ: usize = TB_COUNT + 8;
/// Offset of the first tombstone in version 1; of the header's CRC-32 in version 2.
pub const TB_ENTRIES: usize = TB_MAX_SEQ + 8;
/// Offset of the first page (version 2).
pub const TB_PAGES: usize = TB_ENTRIES + 4;
/// Bytes per tombstone: fingerprint, document id, sequence number (u64 each).
pub const TOMBSTONE_BYTES: usize = 24;
/// Tombstones per page: a damaged page loses at most this many deletes.
pub const PAGE_ENTRIES: usize = 128;

/// One delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tombstone {
    /// The deleted fingerprint.
    pub fingerprint: u64,
    /// Its document id.
    pub doc_id: u64,
    /// Sequence number of the delete.
    pub seq: u64,
}

/// Encodes `tombstones` (sorted by fingerprint and id), version 2.
pub fn encode(tombstones: &[Tombstone]) -> Vec<u8> {
    let pages = tombstones.len().div_ceil(PAGE_ENTRIES);
    let mut b = Vec::with_capacity(TB_PAGES + tombstones.len() * TOMBSTONE_BYTES + 4 * pages);
    b.extend_from_slice(&TOMBSTONE_MAGIC);
    b.extend_from_slice(&TOMBSTONE_VERSION.to_le_bytes());
    b.extend_from_slice(&(PAGE_ENTRIES as u32).to_le_bytes());
    b.extend_from_slice(&(tombstones.len() as u64).to_le_bytes());
    b.extend_from_slice(&tombstones.iter().map(|t| t.seq).max().unwrap_or(0).to_le_bytes());
    debug_assert_eq!(b.len(), TB_ENTRIES);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    for page in tombstones.chunks(PAGE_ENTRIES) {
        let at = b.len();
        for t in page {
            for v in [t.fingerprint, t.doc_id, t.seq] {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        let crc = crc32fast::hash(b.get(at..).unwrap_or_default());
        b.extend_from_slice(&crc.to_le_bytes());
    }
    b
}

fn entries(bytes: &[u8]) -> impl Iterator<Item = Tombstone> + '_ {
    bytes.chunks_exact(TOMBSTONE_BYTES).map(|c| {
        let mut v = [0u64; 3];
        LE::read_u64_into(c, &mut v);
        Tombstone { fingerprint: v[0], doc_id: v[1], seq: v[2] }
    })
}

/// A page of a version-2 file that failed its check (what salvage reports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamagedPage {
    /// Byte offset of the page.
    pub offset: u64,
    /// Tombstones it held.
    pub count: u64,
    /// What failed.
    pub detail: String,
}

/// Decodes a tombstone file read from `path`; any damage is an error.
pub fn decode(path: &Path, b: &[u8]) -> Result<Vec<Tombstone>> {
    let (tombstones, damaged) = decode_pages(path, b)?;
    match damaged.first() {
        Some(d) => Err(Error::corrupt(path, d.offset, format!("{} ({} tombstones)", d.detail, d.count))),
        None => Ok(tombstones),
    }
}

/// Decodes a tombstone file, keeping every intact page and listing the damaged ones
/// (version 2; a version-1 file is one page). An error when the header is damaged: then
/// nothing can be trusted.
pub fn decode_pages(path: &Path, b: &[u8]) -> Result<(Vec<Tombstone>, Vec<DamagedPage>)> {
    let version = check_magic_and_version(path, b, &TOMBSTONE_MAGIC, "tombstone file (magic SIMDXTMB)", TOMBSTONE_VERSION_UNPAGED..=TOMBSTONE_VERSION)?;
    let cut_short = || Error::corrupt(path, b.len() as u64, "tombstone file cut short inside its header");
    let head: &[u8; TB_ENTRIES] = b.first_chunk().ok_or_else(cut_short)?;
    let count = LE::read_u64(&head[TB_COUNT..]);
    let max_seq = LE::read_u64(&head[TB_MAX_SEQ..]);
    let (out, damaged) = if version == TOMBSTONE_VERSION_UNPAGED {
        let (body, crc) = b.split_last_chunk::<4>().filter(|(body, _)| body.len() >= TB_ENTRIES).ok_or_else(cut_short)?;
        let want = count.checked_mul(TOMBSTONE_BYTES as u64).and_then(|x| x.checked_add((TB_ENTRIES + 4) as u64));
        if want != Some(b.len() as u64) {
            return Err(Error::corrupt(path, TB_COUNT as u64, format!("{count} tombstones do not fill {} bytes", b.len())));
        }
        verify_crc(body, u32::from_le_bytes(*crc)).map_err(|m| m.corrupt(path, body.len() as u64, Location::default(), "tombstone file"))?;
        if LE::read_u32(&head[TB_PAGE_ENTRIES..]) != 0 {
            return Err(Error::corrupt(path, TB_PAGE_ENTRIES as u64, "reserved bytes are not zero"));
        }
        (entries(body.get(TB_ENTRIES..).unwrap_or_default()).collect::<Vec<_>>(), Vec::new())
    } else {
        let crc = b.get(TB_ENTRIES..TB_PAGES).and_then(|c| c.first_chunk::<4>()).ok_or_else(cut_short)?;
        verify_crc(head, u32::from_le_bytes(*crc)).map_err(|m| m.corrupt(path, TB_ENTRIES as u64, Location::default(), "tombstone file header"))?;
        let per_page = LE::read_u32(&head[TB_PAGE_ENTRIES..]) as u64;
        if per_page == 0 {
            return Err(Error::corrupt(path, TB_PAGE_ENTRIES as u64, "0 tombstones per page"));
        }
        let pages = count.div_ceil(per_page);
        let want = count.checked_mul(TOMBSTONE_BYTES as u64).and_then(|x| x.checked_add(TB_PAGES as u64 + 4 * pages));
        let mut out = Vec::with_capacity(count.min(1 << 24) as usize);
        let mut damaged = Vec::new();
        let mut at = TB_PAGES;
        for page in 0..pages {
            let n = per_page.min(count - page * per_page);
            let len = n as usize * TOMBSTONE_BYTES;
            let body = b.get(at..at + len);
            let crc = b.get(at + len..at + len + 4).and_then(|c| c.first_chunk::<4>());
            match (body, crc) {
                (Some(body), Some(crc)) => match verify_crc(body, u32::from_le_bytes(*crc)) {
                    Ok(()) => out.extend(entries(body)),
                    Err(m) => damaged.push(DamagedPage { offset: at as u64, count: n, detail: m.detail(format!("tombstone page {page}")) }),
                },
                _ => damaged.push(DamagedPage { offset: at as u64, count: n, detail: format!("tombstone page {page}: the file ends at byte {} (cut short)", b.len()) }),
            }
            at += len + 4;
        }
        if want != Some(b.len() as u64) && damaged.is_empty() {
            return Err(Error::corrupt(path, TB_COUNT as u64, format!("{count} tombstones do not fill {} bytes", b.len())));
        }
        (out, damaged)
    };
    if damaged.is_empty() && out.iter().map(|t| t.seq).max().unwrap_or(0) != max_seq {
        return Err(Error::corrupt(path, TB_MAX_SEQ as u64, "largest sequence number disagrees with the tombstones"));
    }
    Ok((out, damaged))
}

/// Writes a tombstone file atomically (temporary name, sync, rename, directory sync) and
/// returns its size.
pub fn write(storage: &dyn Storage, path: &Path, tombstones: &[Tombstone]) -> Result<u64> {
    let bytes = encode(tombstones);
    write_atomically(storage, path, &bytes)?;
    Ok(bytes.len() as u64)
}

/// Reads and checks a tombstone file.
pub fn read(storage: &dyn Storage, path: &Path) -> Result<Vec<Tombstone>> {
    let bytes = storage.read_copy(path).map_err(|e| Error::io(path, "read", e))?;
    decode(path, &bytes)
}

/// Reads a tombstone file's intact pages, listing the damaged ones ([`decode_pages`]).
pub fn read_pages(storage: &dyn Storage, path: &Path) -> Result<(Vec<Tombstone>, Vec<DamagedPage>)> {
    let bytes = storage.read_copy(path).map_err(|e| Error::io(path, "read", e))?;
    decode_pages(path, &bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn sample(n: u64) -> Vec<Tombstone> {
        (0..n).map(|i| Tombstone { fingerprint: i.wrapping_mul(0x9e37_79b9_7f4a_7c15), doc_id: i, seq: 1000 + i }).collect()
    }

    /// The version-1 bytes, as simdex 0.1 wrote them (the reference encoder).
    fn encode_v1(ts: &[Tombstone]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"SIMDXTMB");
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&(ts.len() as u64).to_le_bytes());
        b.extend_from_slice(&ts.iter().map(|t| t.seq).max().unwrap_or(0).to_le_bytes());
        for t in ts {
            for v in [t.fingerprint, t.doc_id, t.seq] {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn both_versions_read_back_and_every_truncation_is_an_error() {
        for n in [0u64, 1, 127, 128, 129, 300] {
            let ts = sample(n);
            let p = Path::new("t");
            let v2 = encode(&ts);
            assert_eq!(v2.len(), TB_PAGES + 24 * n as usize + 4 * (n as usize).div_ceil(PAGE_ENTRIES));
            assert_eq!(decode(p, &v2).unwrap(), ts);
            assert_eq!(decode(p, &encode_v1(&ts)).unwrap(), ts, "version 1 still reads");
            for len in 0..v2.len() {
                assert!(decode(p, &v2[..len]).unwrap_err().is_corruption(), "n = {n}, cut at {len}");
            }
        }
    }

    #[test]
    fn a_flipped_bit_costs_one_page_and_salvage_names_how_many() {
        let ts = sample(300);
        let b = encode(&ts);
        let p = Path::new("t");
        for bit in 0..b.len() * 8 {
            let mut d = b.clone();
            d[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(p, &d).is_err(), "bit {bit} went unnoticed");
            let byte = bit / 8;
            match decode_pages(p, &d) {
                // the header (or its CRC): nothing is trusted
                Err(_) => assert!(byte < TB_PAGES, "bit {bit}: a page flip must not lose the file"),
                Ok((kept, damaged)) => {
                    assert!(byte >= TB_PAGES, "bit {bit}: a header flip must not pass");
                    let page = (byte - TB_PAGES) / (PAGE_ENTRIES * TOMBSTONE_BYTES + 4);
                    let lost = PAGE_ENTRIES.min(300 - page * PAGE_ENTRIES);
                    assert_eq!(damaged.len(), 1, "bit {bit}");
                    assert_eq!(damaged[0].count, lost as u64);
                    let mut want = ts.clone();
                    want.drain(page * PAGE_ENTRIES..page * PAGE_ENTRIES + lost);
                    assert_eq!(kept, want, "bit {bit}: every other page kept");
                }
            }
        }
    }
}
