//! The `RECIPE` file: the fingerprint recipe an index's document fingerprints were made with
//! (byte layout in `format-spec/recipe.md`). The engine keeps the file and knows its
//! framing, not its meaning: the options text and the IDF table are opaque bytes here, made
//! and read by the text pipeline (the `simdex-fingerprint` crate), so the index crate
//! compiles no text code. Written atomically (temporary file, fsync, rename, directory
//! fsync, as the manifest is) under the writer's lock, and replaced only by an explicit
//! re-pin.
//!
//! ```text
//! 0   magic "SDXRCP\r\n"                 8 bytes
//! 8   format version = 1                 u32
//! 12  options text length O              u32
//! 16  options text (UTF-8 key=value)     O bytes
//! ..  IDF table length T (0: no table)   u64
//! ..  IDF table file (its own format)    T bytes
//! ..  CRC-32 (IEEE) of all bytes above   u32
//! ```

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;

use super::state::lock;
use super::Index;
use crate::error::{Error, Result};
use crate::integrity::verify_crc;
use crate::storage::{write_atomically, Storage};

pub use super::files::RECIPE_NAME;
/// File magic.
pub const MAGIC: [u8; 8] = *b"SDXRCP\r\n";
/// The only format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
const VERSION_AT: usize = MAGIC.len();
const OPTIONS_LEN_AT: usize = VERSION_AT + 4;
const OPTIONS_AT: usize = OPTIONS_LEN_AT + 4;

/// The recipe pinned in an index, as the engine stores it: the options as `key=value` text
/// and the IDF table file (empty: none). What they mean is the text pipeline's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PinnedRecipe {
    /// The recipe's options, one `key=value` per line (UTF-8).
    pub options: String,
    /// The IDF table file the recipe weights by; empty when it weights by none.
    pub idf_table: Vec<u8>,
}

/// The file's bytes.
pub fn encode(recipe: &PinnedRecipe) -> Vec<u8> {
    let (options, idf) = (recipe.options.as_bytes(), &recipe.idf_table);
    let mut out = Vec::with_capacity(OPTIONS_AT + options.len() + 12 + idf.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(options.len() as u32).to_le_bytes());
    out.extend_from_slice(options);
    out.extend_from_slice(&(idf.len() as u64).to_le_bytes());
    out.extend_from_slice(idf);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Parses the file at `path` (its framing and checksum; the contents are the text
/// pipeline's to check); never panics on bad bytes.
pub fn decode(path: &Path, b: &[u8]) -> Result<PinnedRecipe> {
    let corrupt = |offset: usize, detail: String| Error::corrupt(path, offset as u64, detail);
    let magic = b.get(..MAGIC.len());
    if magic != Some(&MAGIC[..]) {
        let found = b.iter().take(MAGIC.len()).flat_map(|&c| std::ascii::escape_default(c)).map(char::from).collect();
        return Err(Error::NotSimdexFile { path: path.to_path_buf(), expected: "fingerprint recipe", found });
    }
    let u32_at = |at: usize| b.get(at..at + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes);
    let version = u32_at(VERSION_AT).ok_or_else(|| corrupt(VERSION_AT, "truncated before the version".into()))?;
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion { path: path.to_path_buf(), found: version, supported: FORMAT_VERSION, oldest: FORMAT_VERSION });
    }
    let (body, stored) = b.split_last_chunk::<4>().ok_or_else(|| corrupt(0, "truncated".into()))?;
    verify_crc(body, u32::from_le_bytes(*stored)).map_err(|m| corrupt(body.len(), format!("checksum mismatch: stored {:#010x}, computed {:#010x}", m.stored, m.computed)))?;
    let options_len = u32_at(OPTIONS_LEN_AT).ok_or_else(|| corrupt(OPTIONS_LEN_AT, "truncated before the options".into()))? as usize;
    let options_end = OPTIONS_AT.checked_add(options_len).filter(|&e| e <= body.len()).ok_or_else(|| corrupt(OPTIONS_LEN_AT, "options run past the end".into()))?;
    let options = body.get(OPTIONS_AT..options_end).and_then(|t| std::str::from_utf8(t).ok()).ok_or_else(|| corrupt(OPTIONS_AT, "options are not UTF-8".into()))?;
    let idf_len = body
        .get(options_end..options_end + 8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| corrupt(options_end, "truncated before the IDF table".into()))?;
    let idf_at = options_end + 8;
    if idf_len != (body.len() - idf_at) as u64 {
        return Err(corrupt(options_end, format!("IDF table length {idf_len} does not match the file ({} bytes left)", body.len() - idf_at)));
    }
    Ok(PinnedRecipe { options: options.to_owned(), idf_table: body.get(idf_at..).unwrap_or_default().to_vec() })
}

/// The recipe of the index in `dir`, checked against the record its manifest keeps
/// (`recorded`: the CRC, manifest version 3): a recipe the manifest says is pinned but that
/// is missing is damage, never "no recipe" (a text pipeline would pin a new one and
/// fingerprint later documents differently).
pub fn load_checked(storage: &dyn Storage, dir: &Path, recorded: Option<u32>) -> Result<Option<PinnedRecipe>> {
    let path = dir.join(RECIPE_NAME);
    let bytes = match storage.read_copy(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match recorded {
                None => Ok(None),
                Some(crc) => Err(Error::corrupt(
                    &path,
                    0,
                    format!("missing, though the manifest records a pinned recipe (CRC-32 {crc:#010x}): documents added now would be fingerprinted with another recipe; restore the file, or run `simdex recover` and pin the recipe again"),
                )),
            };
        }
        Err(e) => return Err(Error::io(&path, "read", e)),
    };
    // An intact recipe other than the recorded one is what a crash between replacing the
    // file and the manifest leaves (`store_pinned_recipe`): not damage (`verify` notes it).
    decode(&path, &bytes).map(Some)
}

/// Replaces the recipe of the index in `dir`, atomically and durably; returns the CRC-32
/// of the file written (for the manifest).
pub fn store(storage: &dyn Storage, dir: &Path, recipe: &PinnedRecipe) -> Result<u32> {
    let bytes = encode(recipe);
    write_atomically(storage, &dir.join(RECIPE_NAME), &bytes)?;
    Ok(identity(&bytes))
}

/// What the manifest records of a `RECIPE` file: the CRC-32 of its bytes before its own
/// trailing CRC. (Not of the whole file: the CRC-32 of any message followed by its own
/// CRC-32 is one constant, the same for every intact recipe.)
pub(crate) fn identity(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes.get(..bytes.len().saturating_sub(4)).unwrap_or_default())
}

impl Index {
    /// The fingerprint recipe pinned in the index (its `RECIPE` file), `None` when none is.
    /// The text pipeline (`simdex-fingerprint`) reads it and makes every document
    /// fingerprint of the index with it.
    pub fn pinned_recipe(&self) -> Result<Option<PinnedRecipe>> {
        let recorded = lock(&self.engine.manifest).recipe_crc;
        load_checked(&*self.engine.storage, self.dir(), recorded)
    }

    /// Writes `recipe` as the index's pinned recipe, atomically and durably, replacing any
    /// other (the caller decides whether it may: `simdex-fingerprint` refuses to replace a
    /// different recipe unless asked).
    pub fn store_pinned_recipe(&self, recipe: &PinnedRecipe) -> Result<()> {
        self.engine.check_writable()?;
        // the writer's lock orders the file's replacement with the writes around it
        let _w = lock(&self.engine.writer);
        let crc = store(&*self.engine.storage, self.dir(), recipe)?;
        // then the manifest records it, so that losing the file later is damage
        let mut manifest = lock(&self.engine.manifest);
        if manifest.recipe_crc != Some(crc) {
            let mut m = manifest.clone();
            m.recipe_crc = Some(crc);
            m.number += 1;
            m.store(&*self.engine.storage, self.dir())?;
            *manifest = m;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_every_truncation_and_flip_is_an_error() {
        let p = Path::new("RECIPE");
        let with_table = PinnedRecipe { options: "recipe_version=1\nfeatures=w2\n".into(), idf_table: (0..200u8).collect() };
        for r in [PinnedRecipe { options: "recipe_version=1\n".into(), idf_table: Vec::new() }, with_table] {
            let bytes = encode(&r);
            assert_eq!(decode(p, &bytes).unwrap(), r);
            for n in 0..bytes.len() {
                assert!(decode(p, &bytes[..n]).is_err(), "truncated to {n}");
            }
            for i in 0..bytes.len() {
                let mut b = bytes.clone();
                b[i] ^= 0x10;
                assert!(decode(p, &b).is_err(), "flipped byte {i}");
            }
        }
    }
}
