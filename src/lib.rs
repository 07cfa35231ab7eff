//! simdex: an embeddable on-disk index of 64-bit simhash fingerprints. It answers the
//! question a web crawler asks for every page it fetches: *have I already stored a
//! near-duplicate of this?* It implements Manku, Jain and Das Sarma, "Detecting
//! Near-Duplicates for Web Crawling" (WWW 2007): Charikar simhash fingerprints, permuted
//! tables that find every stored fingerprint within `k` bits of a query, compressed into
//! 1 KB blocks with the paper's XOR leading-bit Huffman code.
//!
//! ```
//! use simdex::{FindOrInsert, Index, IndexOptions, QueryOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let index = Index::open(dir.path().join("pages"), IndexOptions::default())?; // created if missing
//! let within3 = QueryOptions::within(3);
//! // The crawler's loop: check and add in one atomic call.
//! assert!(matches!(index.find_or_insert(0x0123_4567_89ab_cdef, 1, &within3)?, FindOrInsert::Inserted { .. }));
//! match index.find_or_insert(0x0123_4567_89ab_cdee, 2, &within3)? {
//!     FindOrInsert::Found(matches) => assert_eq!(matches[0].doc_id, Some(1)), // one bit away
//!     FindOrInsert::Inserted { .. } => unreachable!(),
//! }
//! index.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The API
//! - [`Index`]: the persistent, growing store (a directory): writes appended to a log and
//!   made durable per [`Durability`], flushed into immutable segments and compacted;
//!   queries from many threads; [`Snapshot`]s for whole-index jobs. Options in
//!   [`IndexOptions`].
//! - [`Segment`] and [`build_segment`]: one immutable segment file, without the engine.
//! - [`QueryOptions`] and [`Match`]: what every `query` takes and returns.
//! - Whole-set jobs over a segment, a snapshot or fingerprints in memory ([`Stored`]): a
//!   file of queries ([`batch_query`]), all pairs within `k` ([`near_pairs`], [`clusters`]),
//!   chunks for scale-out ([`split`]); many queries or checks at once ([`query_many`],
//!   [`find_or_insert_many`]).
//! - Near-duplicates confirmed by the sketches stored beside their fingerprints
//!   ([`Index::query_confirmed`], [`ConfirmOptions`]), for sketches made anywhere
//!   ([`minhash_scheme`], [`minhash_resemblance`]).
//! - [`BlockSplit`]: the all-pairs self-join cut into partitions by block, for a cluster of
//!   machines that moves each fingerprint `k + 1` times (`python -m simdex.spark cluster`).
//! - Documents (text, HTML, JSON lines) to fingerprints and sketches are the text
//!   pipeline's: the `simdex-fingerprint` crate (`tools/fingerprint`), whose
//!   `DocumentIndex` adds the document calls to an [`Index`] and keeps its recipe in the
//!   index ([`PinnedRecipe`]). This crate compiles no text code.
//! - [`plan`]: the table designs, the planner that picks one, and the multi-probe plans
//!   that answer any `k` up to 8 from a design built for less ([`plan::ProbePlan`]).
//! - [`inspect`]: looking inside index files (what the `simdex` tool's `inspect` and
//!   `dump-log` print); [`recovery`]: verifying an index or a segment file byte by byte, and
//!   salvaging what is intact of a damaged one into a new index (`verify`, `recover`).
//! - [`storage`]: the file-system trait every file goes through.
//!
//! The file formats are specified byte for byte in the repository's `format-spec/`; the
//! modules that read and write them (log, manifest, tombstones, codec, segment layout,
//! engine files and compaction) are private.

#![deny(missing_docs)]

/// Declares a module private to the crate, or public and hidden from the docs with the
/// `test-support` feature, so the integration tests and benches can check its internals
/// against their oracles. Not an API: nothing behind `test-support` is stable. Shared by the
/// workspace's library crates (the feature is the calling crate's).
#[doc(hidden)]
#[macro_export]
macro_rules! internal_mod {
    ($name:ident) => {
        #[cfg(feature = "test-support")]
        #[doc(hidden)]
        #[allow(missing_docs)]
        pub mod $name;
        #[cfg(not(feature = "test-support"))]
        #[allow(dead_code, unused_imports)]
        mod $name;
    };
}

internal_mod!(bands);
/// Builder methods for an options struct: `with_FIELD(value)` returns the options with that
/// field set, so callers outside the crate build `#[non_exhaustive]` options from a default
/// (`IndexOptions::default().with_k(4)`), and new fields never break them. Shared by the
/// workspace's library crates; not an API.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_fields {
    ($t:ty { $($f:ident: $ty:ty => $with:ident),* $(,)? }) => {
        impl $t {
            $(
                #[doc = concat!("The same options with [`", stringify!($f), "`](Self::", stringify!($f), ") set.")]
                #[must_use]
                pub fn $with(mut self, $f: $ty) -> Self {
                    self.$f = $f;
                    self
                }
            )*
        }
    };
}

mod batch;
mod block_split;
mod cluster;
internal_mod!(codec);
mod confirm;
mod cpu;
mod engine;
mod ids;
#[cfg(feature = "test-support")]
#[doc(hidden)]
pub use engine::log;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod inspect;
mod integrity;
mod interpolation;
mod join;
mod many;
pub mod plan;
mod query;
pub mod recovery;
internal_mod!(segment);
mod sort;
mod split;
pub mod storage;
mod stored;

pub use batch::{batch_query, batch_query_each, BatchMatch, BatchOptions};
pub use block_split::{BlockSplit, PartitionPairs, Scattered};
pub use cluster::{clusters, clusters_and_pairs, clusters_from_pairs, near_pairs, pair_components, Cluster, ClusterOptions};
pub use codec::Codec;
pub use confirm::{minhash_resemblance, minhash_scheme, parse_minhash_scheme, ConfirmOptions};
pub use engine::pinned_recipe::{PinnedRecipe, RECIPE_NAME};
pub use engine::snapshot::{Deletes, Snapshot};
pub use engine::{
    Clock, CompactionOptions, Durability, Expiry, FindOrInsert, FindOrReplace, Index, IndexOptions, LogRecovery, LogReport, OpenReport, Replaced, SegmentStats, StatValue, Stats,
    SystemClock,
};
pub use error::{Error, ErrorKind, Location, Result};
pub use many::{find_or_insert_many, query_confirmed_many, query_many, Grouped, MatchColumns};
pub use plan::MAX_K;
pub use query::{Entry, Match, QueryOptions};
pub use segment::SketchColumn;
pub use segment::{build_segment, BuildOptions, Segment, Table};
pub use split::{split, Chunk, Chunks, SplitOptions};
pub use stored::{SortedTables, Source, Stored};
