//! Document-id tables: the index that finds a segment's entries by document id, so that
//! "what is stored under this id?" costs a few page reads per segment instead of a scan of
//! its id column (`format-spec/ids.md`).
//!
//! The id table of a segment (`seg-N.sdi`, beside `seg-N.sdx`) holds one entry per segment
//! entry: its ordinal in table 0 (where the segment keeps its fingerprint, id and sketch)
//! and 8 bits of a mix of its id as a tag, bit-packed, sorted by the mixed id's top bits
//! (its *bucket*), then tag, then ordinal; a directory of bucket ends finds a bucket. The
//! id is mixed ([`mix`], a bijection) so that sequential ids spread over the buckets. A
//! lookup reads a directory page and one or two entry pages and returns the ordinals whose
//! bucket and tag are the id's; the caller keeps those whose stored id is the id (about one
//! in ten lookups meets a stranger with the same tag).
//!
//! The table is derived data: a pure function of the segment's id column, rebuilt when
//! missing or damaged (nothing is lost: the id column is the truth), checked page by page
//! like every other section.
//!
//! - `layout`: the head, the design (bucket and ordinal bits), the packed entries and where
//!   each page is (mirrors the spec page);
//! - `build`: writing a segment's id table in bounded memory;
//! - `read`: opening one ([`IdTable`]), looking ids up, checking every byte.
//!
//! It reads segments and writes its own files; which id tables exist is the engine's.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

mod build;
pub(crate) mod layout;
mod read;

pub(crate) use build::write_id_table;
pub(crate) use read::{IdSlot, IdTable};

/// The mixed id an id table sorts by: the SplitMix64 finalizer, a bijection on u64 whose
/// top bits are close to uniform whatever the ids (sequential ids, URL hashes).
#[inline]
pub fn mix(id: u64) -> u64 {
    let mut z = id;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_the_specified_function_and_spreads_sequential_ids() {
        // format-spec/ids.md's worked values
        assert_eq!(mix(0), 0);
        assert_eq!(mix(1), 0x5692_161d_100b_05e5);
        let mut top = [0u32; 16];
        for id in 0..16_000u64 {
            top[(mix(id) >> 60) as usize] += 1;
        }
        assert!(top.iter().all(|&n| (800..1200).contains(&n)), "{top:?}");
    }
}
