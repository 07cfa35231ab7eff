//! What recovery found: [`IndexVerifyReport`] (verify, with [`FileProblem`]s) and
//! [`SalvageReport`] (salvage and recover), built step by step by `verify` and `salvage`
//! and printed by the `simdex` tool's `verify` and `recover`.

use crate::error::Error;

/// One fault in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileProblem {
    /// File name within the directory.
    pub file: String,
    /// Byte offset of the fault, when known.
    pub offset: Option<u64>,
    /// What is wrong.
    pub detail: String,
}

impl std::fmt::Display for FileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{}: byte offset {o}: {}", self.file, self.detail),
            None => write!(f, "{}: {}", self.file, self.detail),
        }
    }
}

/// What [`verify_index`](super::verify_index) checked and found.
#[derive(Clone, Debug, Default)]
pub struct IndexVerifyReport {
    /// Files checked, with a one-line summary each.
    pub checked: Vec<(String, String)>,
    /// Faults.
    pub problems: Vec<FileProblem>,
    /// Things worth knowing that are not damage (orphans, torn log tails, a missing band
    /// file).
    pub notes: Vec<String>,
    /// Files that are not simdex's.
    pub unknown: Vec<String>,
    /// Per damaged file: what `simdex recover` can rebuild of it.
    pub recoverable: Vec<(String, String)>,
    /// Passes over the directory: more than 1 when a writer replaced the manifest while a
    /// pass ran (that pass's findings were thrown away).
    pub passes: u32,
    /// True when a writer replaced the manifest during every pass verify makes (20): the
    /// problems (if any) are those of the last pass, which no single version backs
    /// (inconclusive, not damage: run verify again when the writer is quieter).
    pub unsettled: bool,
}

impl IndexVerifyReport {
    /// True when no problem was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    pub(super) fn problem(&mut self, file: &str, e: &Error) {
        let offset = match e {
            Error::Corrupt { offset, .. } => Some(*offset),
            _ => None,
        };
        let detail = match e {
            Error::Corrupt { detail, location, .. } => format!("{detail}{location}"),
            other => other.chain_message(),
        };
        self.problems.push(FileProblem { file: file.to_string(), offset, detail });
    }
}

/// What [`salvage`](super::salvage) recovered and lost, file by file, and every pair read
/// accounted for: `segment_entries + log_inserts == live_pairs + pairs_deleted + copies +
/// merged`.
#[derive(Clone, Debug, Default)]
pub struct SalvageReport {
    /// Why the manifest could not be used, if it could not.
    pub manifest_problem: Option<String>,
    /// Per file: name, what was recovered.
    pub recovered: Vec<(String, String)>,
    /// Per file: name, exactly what was lost (one line per damaged block, page or region).
    pub lost: Vec<(String, String)>,
    /// Per file: name, a damaged structure that was worked around (by itself it loses
    /// nothing; what it did cost is in [`Self::lost`]).
    pub bypassed: Vec<(String, String)>,
    /// Fingerprint entries read from segments.
    pub segment_entries: u64,
    /// Segment entries lost to damage (known exactly from block counts and id pages).
    pub segment_entries_lost: u64,
    /// Tombstones read.
    pub tombstones: u64,
    /// Operations read from logs (inserts and deletes).
    pub log_ops: u64,
    /// Insert operations read from logs: pairs read, as [`Self::segment_entries`] are.
    pub log_inserts: u64,
    /// Log operations lost between intact records (from the sequence numbers).
    pub log_ops_lost: u64,
    /// Log bytes lost at the end of a log (damage, or a record cut short).
    pub log_tail_bytes_lost: u64,
    /// Operations in records cut short at the end of a log, where the record's header
    /// survived to count them: possibly acknowledged (a crash mid-write leaves such a
    /// record unacknowledged, a file cut short does not).
    pub log_ops_possibly_lost: u64,
    /// Pairs read that a delete hides (not written).
    pub pairs_deleted: u64,
    /// Pairs read more than once (the same fingerprint and id in a segment and a log, or in
    /// two segments): written once.
    pub copies: u64,
    /// Pairs read whose document ids were lost and whose fingerprint another such pair
    /// shares: they cannot be told apart, so each fingerprint is written once with
    /// [`UNKNOWN_DOC_ID`] (each merge also named in [`Self::lost`]).
    pub merged: u64,
    /// Live pairs written to the new index.
    pub live_pairs: u64,
    /// Deleted pairs that may be in the new index again: the tombstones of tombstone files
    /// that could not be read (the manifest's count), and fingerprints kept with an unknown
    /// id ([`UNKNOWN_DOC_ID`]) that a newer delete of the same
    /// fingerprint may have hidden. Each is also named in [`Self::lost`].
    pub deletes_possibly_undone: u64,
    /// Fingerprints read from segments whose document id could not be read: kept with
    /// [`UNKNOWN_DOC_ID`] (their pages named in [`Self::lost`]).
    pub doc_ids_lost: u64,
}

/// The document id salvage stores for a fingerprint whose id is unreadable (its id page is
/// damaged): the fingerprint is kept, and the report names the page.
pub const UNKNOWN_DOC_ID: u64 = u64::MAX;
