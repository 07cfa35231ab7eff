//! What opening an index found and did: [`OpenReport`] and, per log, [`LogReport`]. Built by
//! `open` during recovery and kept by the engine for [`super::Index::open_report`]; the
//! running index's summary is `stats`'.

use super::log::LogEnd;

/// How one log looked when the index was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogReport {
    /// File name.
    pub name: String,
    /// Bytes in the file.
    pub len: u64,
    /// Bytes of intact records and header.
    pub valid_len: u64,
    /// How it ended.
    pub end: LogEnd,
    /// Operations replayed from it.
    pub ops: u64,
}

/// What opening the index found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Orphans of interrupted flushes and compactions that were removed (writable opens).
    pub removed: Vec<String>,
    /// Files that are not simdex's: left alone.
    pub unknown: Vec<String>,
    /// The live logs and how each ended.
    pub logs: Vec<LogReport>,
    /// Operations replayed from the logs into the memtable.
    pub replayed_ops: u64,
    /// True when the index was created by this open.
    pub created: bool,
    /// Loss found while opening (a log the manifest says existed is missing); the open
    /// went on with what is there. `simdex verify` reports the same.
    pub lost: Vec<String>,
    /// Acknowledged operations lost from the logs, counted from the manifest's record of
    /// each (opened past with [`super::LogRecovery::PointInTime`]).
    pub lost_ops: u64,
    /// Band files (`seg-N.sdb`, derived from a segment's sketches) that were missing or
    /// not their segment's, built again (writable opens).
    pub rebuilt_bands: Vec<String>,
    /// What a writable open found in a band file's place that cannot be read as a file (a
    /// directory, an unreadable file), renamed aside so that the band file can be built
    /// again: the new names (`seg-N.sdb.set-aside`). Left for a person to look at or remove.
    pub set_aside: Vec<String>,
    /// Id tables (`seg-N.sdi`, derived from a segment's document ids) that were missing or
    /// not their segment's, built again (writable opens; how an index of an older build
    /// gains them).
    pub rebuilt_id_tables: Vec<String>,
}
