//! Names of the files in an index directory, and what each name means.
//!
//! ```text
//! MANIFEST              the live set (manifest.rs)
//! LOCK                  held by the one writer (fs2 lock)
//! seg-000000000007.sdx  a segment (segment/)
//! seg-000000000007.sdb  the sketch bands of segment 7 (bands/), derived from its sketches
//! seg-000000000007.sdi  the id table of segment 7 (ids/), derived from its document ids
//! tomb-000000000008.sdt the deletes of one flush (tombstone.rs)
//! log-000000000009.wal  an append log (log.rs)
//! *.tmp                 a file being written; an orphan if found on open
//! merge.*               a merge in progress: its checkpoint, output and sorted runs
//!                       (compaction/checkpoint.rs)
//! ```
//! Every data file carries a number from the manifest's one counter, so names never repeat.

use super::manifest::MANIFEST_NAME;

/// The writer's lock file.
pub const LOCK_NAME: &str = "LOCK";

/// The fingerprint recipe pinned in the index (`format-spec/recipe.md`).
pub const RECIPE_NAME: &str = "RECIPE";

/// What a file name in an index directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// `MANIFEST`.
    Manifest,
    /// `LOCK`.
    Lock,
    /// `RECIPE`: the fingerprint recipe pinned in the index.
    Recipe,
    /// `seg-N.sdx`.
    Segment(u64),
    /// `seg-N.sdb`: the band file of segment `N` (derived from its sketches; rebuilt when
    /// missing).
    Bands(u64),
    /// `seg-N.sdi`: the id table of segment `N` (derived from its document ids; rebuilt
    /// when missing or damaged).
    Ids(u64),
    /// `tomb-N.sdt`.
    Tombstones(u64),
    /// `log-N.wal`.
    Log(u64),
    /// `*.tmp`: a file some writer had not finished.
    Temporary,
    /// `merge.*`: a file of a merge in progress, which a merge of the same segments goes
    /// on from.
    Merge,
    /// Not a simdex name: left alone and reported.
    Unknown,
}

const SEGMENT: (&str, &str) = ("seg-", ".sdx");
const BANDS: (&str, &str) = ("seg-", ".sdb");
const IDS: (&str, &str) = ("seg-", ".sdi");
const TOMBSTONES: (&str, &str) = ("tomb-", ".sdt");
const LOG: (&str, &str) = ("log-", ".wal");

fn numbered((prefix, suffix): (&str, &str), n: u64) -> String {
    format!("{prefix}{n:012}{suffix}")
}

/// The file name of segment `n`.
pub fn segment_name(n: u64) -> String {
    numbered(SEGMENT, n)
}

/// The file name of segment `n`'s band file.
pub fn bands_name(n: u64) -> String {
    numbered(BANDS, n)
}

/// The file name of segment `n`'s id table.
pub fn ids_name(n: u64) -> String {
    numbered(IDS, n)
}

/// The file name of tombstone file `n`.
pub fn tombstones_name(n: u64) -> String {
    numbered(TOMBSTONES, n)
}

/// The file name of log `n`.
pub fn log_name(n: u64) -> String {
    numbered(LOG, n)
}

/// Classifies a file name.
pub fn parse(name: &str) -> FileKind {
    if name == MANIFEST_NAME {
        return FileKind::Manifest;
    }
    if name == LOCK_NAME {
        return FileKind::Lock;
    }
    if name == RECIPE_NAME {
        return FileKind::Recipe;
    }
    if super::compaction::checkpoint::is_merge_file(name) {
        return FileKind::Merge;
    }
    if name.ends_with(".tmp") {
        return FileKind::Temporary;
    }
    let number =
        |(prefix, suffix): (&str, &str)| name.strip_prefix(prefix)?.strip_suffix(suffix).filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))?.parse::<u64>().ok();
    if let Some(n) = number(SEGMENT) {
        FileKind::Segment(n)
    } else if let Some(n) = number(BANDS) {
        FileKind::Bands(n)
    } else if let Some(n) = number(IDS) {
        FileKind::Ids(n)
    } else if let Some(n) = number(TOMBSTONES) {
        FileKind::Tombstones(n)
    } else if let Some(n) = number(LOG) {
        FileKind::Log(n)
    } else {
        FileKind::Unknown
    }
}

/// True when `names` include a segment, a tombstone file or a log: the directory holds an
/// index's data (with or without its manifest).
pub fn holds_index_data(names: &[String]) -> bool {
    names.iter().any(|n| matches!(parse(n), FileKind::Segment(_) | FileKind::Tombstones(_) | FileKind::Log(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        assert_eq!(parse(&segment_name(7)), FileKind::Segment(7));
        assert_eq!(parse(&bands_name(7)), FileKind::Bands(7));
        assert_eq!(parse(&ids_name(7)), FileKind::Ids(7));
        assert_eq!(parse(&tombstones_name(8)), FileKind::Tombstones(8));
        assert_eq!(parse(&log_name(9)), FileKind::Log(9));
        assert_eq!(parse("seg-000000000007.sdx.tmp"), FileKind::Temporary);
        assert_eq!(parse("merge.checkpoint"), FileKind::Merge);
        assert_eq!(parse("merge.t3.r0.run"), FileKind::Merge);
        assert_eq!(parse("seg-x.sdx"), FileKind::Unknown);
        assert_eq!(parse("notes.txt"), FileKind::Unknown);
    }
}
