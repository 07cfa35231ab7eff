//! Tombstone files: the deletes of one flush, `(fingerprint, doc_id, sequence number)`
//! sorted, checksummed (byte layout in `format-spec/tombstones.md`).
//!
//! A tombstone with sequence number `s` hides every copy of its pair in a segment whose
//! `max_seq` is below `s`. Compaction drops the hidden entries from the segments it merges;
//! the engine drops a tombstone file once every live segment is newer than it. This module
//! owns the file format only.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

use std::path::Path;

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::error::{Error, Location, Result};
use crate::integrity::{check_magic_and_version, verify_crc};
use crate::storage::{write_atomically, Storage};

/// First bytes of a tombstone file.
pub const TOMBSTONE_MAGIC: [u8; 8] = *b"SIMDXTMB";
/// Tombstone format version written and read by this build.
pub const TOMBSTONE_VERSION: u32 = 1;
/// Offset of the magic.
pub const TB_MAGIC: usize = 0;
/// Offset of the format version.
pub const TB_VERSION: usize = TB_MAGIC + 8;
/// Offset of the reserved word (0).
pub const TB_RESERVED: usize = TB_VERSION + 4;
/// Offset of the tombstone count.
pub const TB_COUNT: usize = TB_RESERVED + 4;
/// Offset of the largest sequence number.
pub const TB_MAX_SEQ: usize = TB_COUNT + 8;
/// Offset of the first tombstone.
pub const TB_ENTRIES: usize = TB_MAX_SEQ + 8;
/// Bytes per tombstone: fingerprint, document id, sequence number (u64 each).
pub const TOMBSTONE_BYTES: usize = 24;

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

/// Encodes `tombstones` (sorted by fingerprint and id).
pub fn encode(tombstones: &[Tombstone]) -> Vec<u8> {
    let mut b = Vec::with_capacity(TB_ENTRIES + tombstones.len() * TOMBSTONE_BYTES + 4);
    b.extend_from_slice(&TOMBSTONE_MAGIC);
    b.extend_from_slice(&TOMBSTONE_VERSION.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&(tombstones.len() as u64).to_le_bytes());
    b.extend_from_slice(&tombstones.iter().map(|t| t.seq).max().unwrap_or(0).to_le_bytes());
    debug_assert_eq!(b.len(), TB_ENTRIES);
    for t in tombstones {
        for v in [t.fingerprint, t.doc_id, t.seq] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a tombstone file read from `path`.
pub fn decode(path: &Path, b: &[u8]) -> Result<Vec<Tombstone>> {
    check_magic_and_version(path, b, &TOMBSTONE_MAGIC, "tombstone file (magic SIMDXTMB)", TOMBSTONE_VERSION..=TOMBSTONE_VERSION)?;
    let cut_short = || Error::corrupt(path, b.len() as u64, "tombstone file cut short inside its header");
    let head: &[u8; TB_ENTRIES] = b.first_chunk().ok_or_else(cut_short)?;
    let (body, crc) = b.split_last_chunk::<4>().filter(|(body, _)| body.len() >= TB_ENTRIES).ok_or_else(cut_short)?;
    let count = LE::read_u64(&head[TB_COUNT..]);
    let want = count.checked_mul(TOMBSTONE_BYTES as u64).and_then(|x| x.checked_add((TB_ENTRIES + 4) as u64));
    if want != Some(b.len() as u64) {
        return Err(Error::corrupt(path, TB_COUNT as u64, format!("{count} tombstones do not fill {} bytes", b.len())));
    }
    verify_crc(body, u32::from_le_bytes(*crc)).map_err(|m| m.corrupt(path, body.len() as u64, Location::default(), "tombstone file"))?;
    if LE::read_u32(&head[TB_RESERVED..]) != 0 {
        return Err(Error::corrupt(path, TB_RESERVED as u64, "reserved bytes are not zero"));
    }
    let out: Vec<Tombstone> = body
        .get(TB_ENTRIES..)
        .unwrap_or_default()
        .chunks_exact(TOMBSTONE_BYTES)
        .map(|c| {
            let mut v = [0u64; 3];
            LE::read_u64_into(c, &mut v);
            Tombstone { fingerprint: v[0], doc_id: v[1], seq: v[2] }
        })
        .collect();
    let max_seq = LE::read_u64(&head[TB_MAX_SEQ..]);
    if out.iter().map(|t| t.seq).max().unwrap_or(0) != max_seq {
        return Err(Error::corrupt(path, TB_MAX_SEQ as u64, "largest sequence number disagrees with the tombstones"));
    }
    Ok(out)
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
