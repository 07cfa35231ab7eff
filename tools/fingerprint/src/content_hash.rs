//! The content hash exact copies are grouped by: 128 bits of every byte of a document's
//! content, as 32 hex digits, made as the bytes stream past ([`ContentHash`], a reader) or
//! of bytes in memory ([`ContentHash::of_bytes`]). Both give the same digits for the same
//! bytes, however they are split into reads.
//!
//! Four lanes, each the feature hash's block step (`hash::step`: one multiply-rotate of the
//! block, one of the lane) over every fourth 8-byte little-endian block, so that the CPU runs
//! the four multiply chains side by side (about 8 bytes a cycle; the two SipHash-1-3 states
//! it replaces took about 3 cycles a byte, 3% of `simdex dedup`'s CPU). The tail (0 to 31
//! bytes) is zero-padded into whole blocks and the length mixed in, so inputs of different
//! lengths never share a padded form; the two halves are two different merges of the four
//! lanes, each through `fmix64`. A non-cryptographic hash with fixed keys, as the SipHash
//! states with their fixed keys were: it finds accidental copies, not adversarial ones.
//!
//! Not persisted (no file or index stores it), so it may change between releases; both
//! sides of a comparison come from one build (`simdex dedup`'s report and simdex.spark's
//! are made by the same library).

// Indexing: a stripe's blocks at offsets below 32, and the pending bytes of a stripe, of which
// there are always fewer than 32 (`pending_len` and `take` keep within the array).
#![allow(clippy::indexing_slicing)]

use crate::hash::{fmix64, step, K1, K2};
use std::io::Read;

/// Bytes of one stripe: an 8-byte block for each of the four lanes.
const STRIPE: usize = 32;

/// The lanes' starting values (distinct, so that the lanes never hash alike).
const SEEDS: [u64; 4] = [0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344, 0xA409_3822_299F_31D0, 0x082E_FA98_EC4E_6C89];

/// The running state of one content hash.
#[derive(Clone, Debug)]
struct State {
    lanes: [u64; 4],
    /// Bytes of a stripe not yet whole.
    pending: [u8; STRIPE],
    pending_len: usize,
    /// Bytes hashed in all.
    len: u64,
}

impl State {
    fn new() -> Self {
        State { lanes: SEEDS, pending: [0; STRIPE], pending_len: 0, len: 0 }
    }

    #[inline(always)]
    fn stripe(lanes: &mut [u64; 4], stripe: &[u8; STRIPE]) {
        for (i, lane) in lanes.iter_mut().enumerate() {
            let mut block = [0u8; 8];
            block.copy_from_slice(&stripe[i * 8..i * 8 + 8]);
            *lane = step(*lane, u64::from_le_bytes(block));
        }
    }

    fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if self.pending_len > 0 {
            let take = (STRIPE - self.pending_len).min(bytes.len());
            let (head, rest) = bytes.split_at(take);
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(head);
            self.pending_len += take;
            bytes = rest;
            if self.pending_len < STRIPE {
                return;
            }
            Self::stripe(&mut self.lanes, &self.pending);
            self.pending_len = 0;
        }
        let mut stripes = bytes.chunks_exact(STRIPE);
        for s in &mut stripes {
            let mut stripe = [0u8; STRIPE];
            stripe.copy_from_slice(s);
            Self::stripe(&mut self.lanes, &stripe);
        }
        let rest = stripes.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    fn digest(&self) -> (u64, u64) {
        let mut lanes = self.lanes;
        if self.pending_len > 0 {
            let mut last = [0u8; STRIPE];
            last[..self.pending_len].copy_from_slice(&self.pending[..self.pending_len]);
            Self::stripe(&mut lanes, &last);
        }
        let [a, b, c, d] = lanes;
        let len = self.len.wrapping_mul(K1);
        let hi = fmix64(a.wrapping_add(b.rotate_left(7)).wrapping_add(c.rotate_left(12)).wrapping_add(d.rotate_left(18)) ^ len);
        let lo = fmix64((a.rotate_left(29) ^ b).wrapping_mul(K2).wrapping_add(c.rotate_left(41) ^ d).wrapping_add(len ^ K2));
        (hi, lo)
    }

    fn hex(&self) -> String {
        let (hi, lo) = self.digest();
        // (made in place: `format!` grows its string by reallocation, once a document)
        let mut out = String::with_capacity(32);
        let _ = std::fmt::Write::write_fmt(&mut out, format_args!("{hi:016x}{lo:016x}"));
        out
    }
}

/// A reader that hashes what passes through it (the module's content hash).
pub struct ContentHash<R> {
    inner: R,
    state: State,
}

impl ContentHash<()> {
    /// The content hash of `bytes` (what [`ContentHash::finish`] gives after reading them),
    /// without copying them through a reader.
    pub fn of_bytes(bytes: &[u8]) -> String {
        let mut state = State::new();
        state.update(bytes);
        state.hex()
    }
}

impl<R: Read> ContentHash<R> {
    /// Hashes what is read from `inner`.
    pub fn new(inner: R) -> Self {
        ContentHash { inner, state: State::new() }
    }

    /// The content hash of everything read so far.
    pub fn hex(&self) -> String {
        self.state.hex()
    }

    /// Reads the rest of the input (what a fingerprint that stopped early left), so that the
    /// hash covers the whole content.
    pub fn finish(&mut self) -> std::io::Result<String> {
        std::io::copy(self, &mut std::io::sink())?;
        Ok(self.hex())
    }
}

impl<R: Read> Read for ContentHash<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.state.update(buf.get(..n).unwrap_or_default());
        Ok(n)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// Bytes of every length around the stripe's and the block's edges.
    fn samples() -> Vec<Vec<u8>> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        (0..140)
            .map(|n| {
                (0..n)
                    .map(|_| {
                        x = fmix64(x.wrapping_add(1));
                        x as u8
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_content_hash_covers_every_byte_read() {
        let mut a = ContentHash::new(&b"hello world"[..]);
        let mut first = [0u8; 5];
        a.read_exact(&mut first).unwrap();
        let whole = a.finish().unwrap();
        let mut b = ContentHash::new(&b"hello world"[..]);
        assert_eq!(b.finish().unwrap(), whole);
        assert_ne!(ContentHash::new(&b"hello worle"[..]).finish().unwrap(), whole);
        assert_eq!(whole.len(), 32);
        assert_eq!(ContentHash::of_bytes(b"hello world"), whole);
    }

    /// A reader that hands out at most `at_most` bytes a read.
    struct Trickle<'a> {
        bytes: &'a [u8],
        at_most: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.at_most.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn any_split_into_reads_gives_the_same_hash() {
        for bytes in samples() {
            let whole = ContentHash::of_bytes(&bytes);
            for at_most in [1, 3, 7, 8, 31, 32, 33, 100] {
                let got = ContentHash::new(Trickle { bytes: &bytes, at_most }).finish().unwrap();
                assert_eq!(got, whole, "{} bytes read {at_most} at a time", bytes.len());
            }
        }
    }

    #[test]
    fn distinct_inputs_hash_apart() {
        let mut seen = std::collections::HashSet::new();
        // every sample, every one with a byte flipped, and zero runs of every length (the
        // tail's zero padding must not make a shorter input equal a longer one)
        for bytes in samples() {
            assert!(seen.insert(ContentHash::of_bytes(&bytes)), "{} bytes", bytes.len());
            for i in 0..bytes.len() {
                let mut flipped = bytes.clone();
                flipped[i] ^= 1;
                assert!(seen.insert(ContentHash::of_bytes(&flipped)), "{} bytes, byte {i} flipped", bytes.len());
            }
        }
        for n in 1..100 {
            assert!(seen.insert(ContentHash::of_bytes(&vec![0u8; n])), "{n} zeros");
        }
    }

    #[test]
    fn both_halves_depend_on_every_byte() {
        let base = vec![0x5Au8; 77];
        let (hi, lo) = {
            let mut s = State::new();
            s.update(&base);
            s.digest()
        };
        for i in 0..base.len() {
            let mut b = base.clone();
            b[i] ^= 0x80;
            let mut s = State::new();
            s.update(&b);
            let (h, l) = s.digest();
            assert!(h != hi && l != lo, "byte {i}");
        }
    }
}
