//! Compressed sorted runs of fingerprints: the gap symbols, the Huffman code over them and
//! the 1 KB block that stores a run (paper section 3.2).
//!
//! A sorted sequence `x_0 <= x_1 <= ...` is stored as gaps between successive entries. Each
//! gap is one *symbol* followed by the symbol's payload bits:
//!
//! | codec | symbol for `prev -> cur` | payload | decode |
//! |---|---|---|---|
//! | [`Codec::Xor`] (the paper's) | `h` = position of the top 1-bit of `prev ^ cur` | the `h` bits of `cur` below `h` | `cur = (prev >> (h+1) << (h+1)) \| 1 << h \| payload` |
//! | [`Codec::Delta`] | `h` = position of the top 1-bit of `cur - prev` | the `h` bits of `cur - prev` below `h` | `cur = prev + (1 << h \| payload)` |
//!
//! Symbol [`EQUAL`] (64) means `cur == prev` and has no payload: exact duplicates are common
//! (every empty page has fingerprint 0). Symbols `0..=63` are `h`.
//!
//! The module owns the encoding and decoding of blocks and never reads outside the bytes it
//! is given; bad bytes produce a [`BlockError`], never a panic.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

mod block;
mod gap;
mod histogram;
mod huffman;
pub mod reference;

pub(crate) use block::Cursor;
pub(crate) use gap::{DeltaGaps, Gaps, XorGaps};
pub use gap::{Codec, EQUAL, MAX_CODE_LEN, SYMBOLS};
pub use histogram::SymbolHistogram;
pub use block::{decode_block, encode_all, BlockEncoder, BlockError, BLOCK_BITS, BLOCK_BYTES};
pub use huffman::{limited_lengths, Code, CodeError};
