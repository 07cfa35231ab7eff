//! Recovery: checking an index and copying what is intact of a damaged one into a new
//! index, each in named steps. The engine itself never reads past damage (an open fails,
//! or stops at a point in time); this module is the only code that does, and it never
//! writes to the index it reads.
//!
//! - [`verify_index`] (`verify`): every file of an index directory read and checked, one
//!   consistent version even beside a writer; what `simdex verify DIR` prints.
//!   [`verify_segment`] (`verify_segment`): every byte of one segment file.
//! - [`salvage`] (`salvage`, with its segment and log steps in `salvage_segments` and
//!   `salvage_logs`, and `segment_scan`, which opens a damaged segment by finding the
//!   tables that are still whole): what is intact, into a new index, every loss counted.
//! - [`recover_into`] (`recover`): salvage on the file system, the new index published only
//!   when whole; what `simdex recover` runs.
//!
//! Looking inside files without judging them is [`crate::inspect`]'s.
//!
//! ```
//! use simdex::recovery::{recover_into, verify_index};
//! use simdex::{storage::FsStorage, Index, IndexOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let index = Index::open(dir.path().join("pages"), IndexOptions::default())?;
//! index.insert(0x0123_4567_89ab_cdef, 1)?;
//! index.close()?;
//! assert!(verify_index(&FsStorage, &dir.path().join("pages"))?.is_clean());
//! let report = recover_into(&dir.path().join("pages"), &dir.path().join("copy"), IndexOptions::default())?;
//! assert_eq!((report.live_pairs, report.segment_entries_lost, report.log_ops_lost), (1, 0, 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod recover;
mod report;
mod salvage;
mod salvage_logs;
mod salvage_segments;
internal_mod!(segment_scan);
mod verify;
internal_mod!(verify_segment);

pub use recover::recover_into;
pub use report::{FileProblem, IndexVerifyReport, SalvageReport, UNKNOWN_DOC_ID};
pub use salvage::salvage;
pub use verify::verify_index;
#[cfg(feature = "fuzzing")]
pub(crate) use verify_segment::verify_segment_bytes;
pub use verify_segment::{verify_segment, Problem, VerifyReport};
