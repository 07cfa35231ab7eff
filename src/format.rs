//! Checks shared by every simdex file kind that starts with an 8-byte magic and a u32
//! format version (logs, manifests, tombstone files; segments keep their own check).

use byteorder::{ByteOrder, LittleEndian as LE};
use std::path::Path;

use crate::error::{Error, Result};

/// Fails with [`Error::NotSimdexFile`] unless `bytes` starts with `magic`, and with
/// [`Error::UnsupportedVersion`] unless the u32 after it is `supported`.
pub(crate) fn check_magic_and_version(path: &Path, bytes: &[u8], magic: &[u8; 8], expected: &'static str, supported: u32) -> Result<()> {
    if bytes.len() < 8 || bytes[..8] != magic[..] {
        let shown: String = bytes.iter().take(8).flat_map(|&b| std::ascii::escape_default(b)).map(char::from).collect();
        return Err(Error::NotSimdexFile {
            path: path.to_path_buf(),
            expected,
            found: if bytes.is_empty() { "nothing: the file is empty".into() } else { format!("\"{shown}\"") },
        });
    }
    let Some(v) = bytes.get(8..12) else {
        return Err(Error::corrupt(path, 8, format!("file is only {} bytes: cut short inside the header", bytes.len())));
    };
    let version = LE::read_u32(v);
    if version != supported {
        return Err(Error::UnsupportedVersion { path: path.to_path_buf(), found: version, supported });
    }
    Ok(())
}

/// Checks the CRC-32 of `data` against the little-endian u32 at `stored`, naming `what`.
pub(crate) fn check_crc(path: &Path, data: &[u8], stored: u32, offset: u64, what: &str) -> Result<()> {
    let actual = crc32fast::hash(data);
    if actual == stored {
        Ok(())
    } else {
        Err(Error::corrupt(path, offset, format!("{what} checksum mismatch (stored {stored:#010x}, computed {actual:#010x})")))
    }
}
