//! The checks every simdex file kind shares: the magic number and format version a file
//! starts with, and the CRC-32 checksums that guard its parts. Each check lives here once;
//! the decoders (segment, log, manifest, tombstone file, band file, id table) call it and
//! never compare checksums themselves, so every damaged file is reported the same way.
//!
//! A decoder that does not know its file's path reports damage as a `Fault` (offset,
//! table and block, what failed); the caller that read the file turns it into
//! [`Error::Corrupt`]. All of it is the crate's (the text pipeline's IDF tables check
//! their own CRC).

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

use std::fmt::Display;
use std::path::Path;

use crate::error::{Error, Location, Result};

/// Fails with [`Error::NotSimdexFile`] unless `bytes` starts with `magic`, and with
/// [`Error::UnsupportedVersion`] unless the little-endian u32 after it is in `versions`;
/// returns that version.
/// `expected` names the file kind in the message, e.g. `"log (magic SIMDXLOG)"`.
pub(crate) fn check_magic_and_version(path: &Path, bytes: &[u8], magic: &[u8; 8], expected: &'static str, versions: std::ops::RangeInclusive<u32>) -> Result<u32> {
    if bytes.get(..8) != Some(magic.as_slice()) {
        let shown: String = bytes.iter().take(8).flat_map(|&b| std::ascii::escape_default(b)).map(char::from).collect();
        return Err(Error::NotSimdexFile {
            path: path.to_path_buf(),
            expected,
            found: if bytes.is_empty() { "nothing: the file is empty".into() } else { format!("\"{shown}\"") },
        });
    }
    let Some(&[a, b, c, d]) = bytes.get(8..12) else {
        return Err(Error::corrupt(path, 8, format!("file is only {} bytes: cut short inside the header", bytes.len())));
    };
    let version = u32::from_le_bytes([a, b, c, d]);
    if !versions.contains(&version) {
        return Err(Error::UnsupportedVersion { path: path.to_path_buf(), found: version, supported: *versions.end(), oldest: *versions.start() });
    }
    Ok(version)
}

/// Checks the CRC-32 (IEEE) of `data` against the checksum `stored` in the file. This is
/// the only place simdex compares checksums; the [`CrcMismatch`] it fails with becomes the
/// error of the file kind at hand (`CrcMismatch::fault`, `CrcMismatch::corrupt`).
#[inline]
pub(crate) fn verify_crc(data: &[u8], stored: u32) -> Result<(), CrcMismatch> {
    let computed = crc32fast::hash(data);
    if computed == stored {
        Ok(())
    } else {
        Err(CrcMismatch { stored, computed })
    }
}

/// A stored CRC-32 that disagrees with the bytes it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CrcMismatch {
    /// The checksum stored in the file.
    pub(crate) stored: u32,
    /// The checksum of the bytes read.
    pub(crate) computed: u32,
}

impl CrcMismatch {
    /// `"{what} checksum mismatch (stored 0x…, computed 0x…)"`.
    #[cold]
    pub(crate) fn detail(self, what: impl Display) -> String {
        format!("{what} checksum mismatch (stored {:#010x}, computed {:#010x})", self.stored, self.computed)
    }

    /// The damage at `offset` (and `location`), for a decoder that does not know the path.
    #[cold]
    pub(crate) fn fault(self, offset: u64, location: Location, what: impl Display) -> Fault {
        Fault { offset, location, detail: self.detail(what) }
    }

    /// [`Error::Corrupt`] for `path` at `offset` (and `location`).
    #[cold]
    pub(crate) fn corrupt(self, path: &Path, offset: u64, location: Location, what: impl Display) -> Error {
        self.fault(offset, location, what).into_error(path)
    }
}

/// The pages of a derived file (band file, id table) whose CRC already matched, one bit a
/// page: the mapped bytes never change, so a page is checked once per open file, and a page
/// that failed is never marked and fails every read.
#[derive(Debug)]
pub(crate) struct CheckedPages {
    verified: Box<[std::sync::atomic::AtomicU64]>,
}

impl CheckedPages {
    /// Room for `pages` pages, none checked yet.
    pub(crate) fn new(pages: u64) -> Self {
        Self { verified: (0..pages.div_ceil(64)).map(|_| std::sync::atomic::AtomicU64::new(0)).collect() }
    }

    /// The payload of the `page_bytes`-byte page at `offset` of `bytes` (everything before
    /// its last 4 bytes, the CRC-32 of the rest), after its CRC check the first time.
    pub(crate) fn page<'b>(&self, path: &Path, bytes: &'b [u8], offset: u64, page_bytes: u64, what: &str) -> Result<&'b [u8]> {
        use std::sync::atomic::Ordering;
        let page = usize::try_from(offset)
            .ok()
            .and_then(|at| bytes.get(at..at.checked_add(usize::try_from(page_bytes).ok()?)?))
            .ok_or_else(|| Error::corrupt(path, offset, format!("{what} at offset {offset} is past the end of the file ({} bytes)", bytes.len())))?;
        let (body, crc) = page.split_at(page.len().saturating_sub(4));
        let n = offset / page_bytes.max(1);
        let word = self.verified.get((n / 64) as usize);
        let bit = 1u64 << (n % 64);
        if word.is_none_or(|w| w.load(Ordering::Relaxed) & bit == 0) {
            let stored = u32::from_le_bytes(crc.try_into().unwrap_or([0; 4]));
            verify_crc(body, stored).map_err(|m| m.corrupt(path, offset, Location::default(), what))?;
            if let Some(w) = word {
                w.fetch_or(bit, Ordering::Relaxed);
            }
        }
        Ok(body)
    }
}

/// A damaged field: where it is and what is wrong, before the path is known. Offsets are
/// absolute in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    /// Byte offset in the file.
    pub offset: u64,
    /// Table and block.
    pub location: Location,
    /// What failed.
    pub detail: String,
}

impl Fault {
    /// Damage at `offset`, in no particular table or block.
    pub(crate) fn at(offset: u64, detail: impl Into<String>) -> Self {
        Self { offset, location: Location::default(), detail: detail.into() }
    }

    /// The same damage, inside table `table`.
    pub(crate) fn in_table(mut self, table: usize) -> Self {
        self.location.table = Some(table);
        self
    }

    /// The same damage, inside block `block`.
    pub(crate) fn in_block(mut self, block: u64) -> Self {
        self.location.block = Some(block);
        self
    }

    /// [`Error::Corrupt`] naming the file at `path`.
    #[cold]
    pub(crate) fn into_error(self, path: &Path) -> Error {
        Error::Corrupt { path: path.to_path_buf(), offset: self.offset, location: self.location, detail: self.detail }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn magic_version_and_length_are_told_apart() {
        let p = Path::new("f");
        let check = |b: &[u8]| check_magic_and_version(p, b, b"SIMDXLOG", "log", 1..=1);
        assert!(check(b"SIMDXLOG\x01\0\0\0").is_ok());
        assert!(matches!(check(b""), Err(Error::NotSimdexFile { found, .. }) if found.contains("empty")));
        assert!(matches!(check(b"SIMDX"), Err(Error::NotSimdexFile { .. })));
        assert!(matches!(check(b"SIMDXSEG\x01\0\0\0"), Err(Error::NotSimdexFile { .. })));
        assert!(matches!(check(b"SIMDXLOG\x01\0"), Err(Error::Corrupt { offset: 8, .. })));
        assert!(matches!(check(b"SIMDXLOG\x02\0\0\0"), Err(Error::UnsupportedVersion { found: 2, supported: 1, .. })));
    }

    #[test]
    fn a_mismatch_names_both_checksums() {
        assert_eq!(verify_crc(b"abc", crc32fast::hash(b"abc")), Ok(()));
        let m = verify_crc(b"abc", 7).unwrap_err();
        let e = m.corrupt(Path::new("f"), 12, Location { table: Some(1), block: Some(2) }, "block");
        let text = e.to_string();
        assert!(text.contains("offset 12 (table 1, block 2): block checksum mismatch (stored 0x00000007, computed 0x"), "{text}");
    }
}
