//! The merge join under batch queries, near pairs and clusters (paper section 3.3), over the
//! permuted tables of a segment or of [`SortedTables`] in memory.
//!
//! For each table `t`, the queries are permuted by `pi_t` and sorted in memory; the stored
//! table, already sorted, is walked in step with them, one prefix group (entries sharing the
//! table's top `p_t` bits) at a time. Every query-entry pair of a group is checked with a
//! popcount. Memory is the sorted queries (one array the size of Q, permuted in place from
//! table to table) plus one prefix group; a segment's tables are decoded block by block from
//! the page cache and never held.
//!
//! The paper's map tasks build tables over Q and stream F once instead. That needs one
//! permuted copy of Q per table (t times the memory) and random probes into them; the merge
//! join needs one copy, probes nothing and streams each stored table once, which on two
//! cores is the faster of the two (see `benches/RESULTS.md`).
//!
//! A pair within distance `k` shares its prefix in at least one table and often in several.
//! It is reported only by the first such table: permutations are linear over XOR, so the
//! pair shares table `j`'s prefix exactly when `a ^ b` has no bit in table `j`'s prefix
//! positions, which is one AND per earlier table. Work is split between threads by ranges
//! of prefixes, balanced by block count (by entry count in memory).
//!
//! The joins hand their pairs to a [`SharedSorter`], which sorts them, each once, and spills
//! sorted runs to disk past its memory budget; the caller reads them back in order.

mod cross;
mod merge;
mod records;
mod tables;

pub(crate) use cross::cross_pairs;
pub(crate) use merge::{join, self_join};
pub(crate) use records::{near_pair, QueryPair};
pub(crate) use tables::{Part, Tables};
