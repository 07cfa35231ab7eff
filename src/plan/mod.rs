//! Table designs: how the 64 bit positions are split into blocks, which blocks lead each
//! permuted table, and the planner that picks a design from the number of fingerprints.
//!
//! This module owns the *block split* of a design (the number of blocks at each level), the
//! permutations derived from it and the cost model that explains a choice. It knows nothing
//! about files; the segment stores a design and asks [`Design::from_parts`] to validate it.
//!
//! # The construction (paper section 3.1)
//! Two fingerprints within Hamming distance `k` differ in at most `k` bits, so if the 64 bits
//! are split into `r > k` blocks, at least `r - k` blocks agree exactly. For every choice of
//! `r - k` blocks there is one table whose permutation moves those blocks to the top; its
//! prefix length `p` is their total width. A level may be *nested*: the `k` blocks left over
//! are split again into `r'` blocks, giving `C(r, k) * C(r', k)` tables (the paper's
//! 16-table design is `4 blocks, then 4 blocks`). A design is the list of `r` per level.
//!
//! Blocks are cut from the most significant bit down, as evenly as possible with the wider
//! blocks first (64 bits in 6 blocks: 11, 11, 11, 11, 10, 10). Within a table the chosen
//! blocks keep their relative order, then the remaining bits follow in their original order,
//! so the first table of every design is the identity permutation. The segment relies on that:
//! it keeps document ids in the order of table 0.
//!
//! # Files
//! `permutation.rs` holds [`Permutation`], the shift-and-mask bit permutation a table applies.
//! `design.rs` turns a block split into its tables ([`Design`], [`TableDesign`], [`DesignError`]).
//! `probe.rs` holds [`ProbePlan`]: the prefix variants each table is probed with to answer a
//! distance above the design's `k` exactly (multi-probe), and their cost against a scan.
//! `bands.rs` holds the band design of a segment's sketch index ([`BandDesign`]) and the
//! cost model of the crawler's check with and without it ([`CheckCost`]).
//! `planner.rs` holds the paper's `X(f, k, d)` rule (`min_tables`), the cost model and
//! [`plan`], which picks a design for a count and explains why.

mod bands;
mod design;
mod permutation;
mod planner;
mod probe;

pub use bands::{BandDesign, CheckCost};
pub(crate) use bands::{BAND_BITS, MAX_BANDS, MAX_BUCKET_BITS, TAG_BITS};
pub(crate) use design::prefix_mask;
pub(crate) use design::{binomial, block_widths};
pub use design::{Design, DesignError, TableDesign};
pub use permutation::Permutation;
pub use planner::{information_bound_bits, plan, planned_design, Plan, PlanOptions, PlannedDesign};
pub use probe::{ProbePlan, TableProbe};

/// Width of a fingerprint in bits. The format stores it; only 64 is supported.
pub(crate) const FINGERPRINT_BITS: u32 = 64;
/// Largest Hamming distance a design can be built for.
pub const MAX_K: u32 = 8;
/// Largest number of tables the planner will consider.
pub(crate) const MAX_TABLES: usize = 512;
/// Largest nesting depth the planner will consider.
pub(crate) const MAX_LEVELS: usize = 3;
/// Default bound on the expected candidates of one probe, as a power of two.
///
/// 2^8 = 256 entries is about what one 1 KB block holds at the sizes simdex targets
/// (40 to 48 bits per entry): while a probe's expected run fits in one or two blocks, an
/// extra table costs more (another interpolation search and block decode) than it saves.
pub const DEFAULT_MAX_CANDIDATES_LOG2: f64 = 8.0;
/// The bound the engine plans the segments of an index with sketches for
/// ([`PlanOptions::for_segment`]): 2^13, so that at `k = 3` they keep the 4-table design
/// (16-bit prefixes, exact by pigeonhole) up to 2^29 entries. The crawler's check does not
/// probe the tables of a segment whose every entry has a sketch and whose band file is in
/// use (`crate::engine::confirmed`): there the tables serve plain queries and exhaustive
/// checks, which pay for fewer tables with longer runs (about 1,024 entries a table at
/// 2^26, against a few dozen with the default bound's 10 tables), and the index saves
/// about 31 bytes a fingerprint at 2^26.
pub(crate) const SKETCHED_MAX_CANDIDATES_LOG2: f64 = 13.0;
