//! Document sketches: 64 bytes of one-bit MinHash values of a document's word 3-shingles,
//! and the resemblance (Jaccard similarity) they estimate. A fingerprint within a wide `k`
//! (or a shared sketch band) is a candidate; the sketch confirms it (confirmed
//! near-duplicates, `benches/QUALITY.md`).
//!
//! This module owns the sketch recipe (tokens, shingles, hash family, bit packing) and its
//! byte encoding (`format-spec/sketch.md`); it knows nothing of where sketches are stored.
//!
//! # The recipe
//! 1. Tokens, as the independent ground truth (`shared/eval/common.py`) makes them: the text
//!    is NFKC-normalised and lowercased (`normalize`; then `ß` becomes `ss` and `ς` becomes
//!    `σ`, the case folds that matter in practice beyond lowercasing); a token is a maximal
//!    run of word characters (alphabetic but not a combining mark, numeric, or `_`: Python's
//!    `\w`, which splits `हिन्दी` at its vowel signs), except that every Han, Hiragana or
//!    Katakana character (U+3040-30FF, U+3400-4DBF, U+4E00-9FFF, U+F900-FAFF) is a token of
//!    its own.
//!    (The fingerprint's UAX #29 words differ: `1.95.0` is one word there, three tokens
//!    here. The sketch estimates the ground truth's resemblance, so it takes its tokens.)
//! 2. Word 3-shingles: token hashes `sfh64(0, token)` combined with `hash::combine`; the
//!    distinct shingle hashes form the document's set (a document of one or two tokens has
//!    one shingle of them all; an empty one, the empty set).
//! 3. The values, by recipe version ([`SketchOptions::version`]):
//!    - **2 (the default): one-permutation hashing filled by rounds** (Li, Owen and
//!      Zhang, "One Permutation Hashing", NIPS 2012; the rounds as in Dahlgaard, Knudsen
//!      and Thorup, "Fast Similarity Sketching", FOCS 2017). In round `t` every shingle
//!      hashes once and offers one slot the value `t + r` (`r` in 0..1 from the same hash);
//!      each slot keeps the shingle `s_i` of the smallest value, and the rounds stop once
//!      every slot holds one. A page of 1,000 shingles takes about five rounds (one hash
//!      per shingle in each), a small set about `hashes * ln(hashes)` hashes in all:
//!      instead of `hashes` hashes per shingle. Each slot agrees with probability `J`, and
//!      every shingle fills about as many slots as any other, so the slots sample the union
//!      nearly without replacement: lower noise than independent functions.
//!    - 1: `hashes` independent hash functions `h_i(s) = m(s ^ x_i)` (`m` a multiply-xorshift
//!      mixer with an odd multiplier `a_i`); the shingle `s_i` with the smallest `h_i` is
//!      taken and value `i` is the low `bits` bits of `fmix64(s_i ^ c_i)`. Cost: `hashes`
//!      hashes per shingle. Kept so that indexes that pinned it keep working.
//!
//!    Values are packed little-endian (value `i` in bits `i * bits ..`, bit 0 of byte 0
//!    first), so the default's 32-bit words are 32 one-bit values each (the band files'
//!    bands, `format-spec/bands.md`).
//!
//! Two documents agree on a value with probability `J + (1 - J) / 2^bits` (equal minima, or
//! unequal minima whose kept bits collide), so `J` is estimated as
//! `(agree / hashes - 2^-bits) / (1 - 2^-bits)`, clamped to `0..=1` (Li and König,
//! "b-Bit Minwise Hashing", WWW 2010). Its standard deviation near `J = 0.9` is about
//! 0.019 with recipe 1's 512 one-bit values (independent slots: `sqrt((1 - J)(1 + J) / n)`),
//! down to the chance term `sqrt((1 - J) / n)`, 0.014, with recipe 2 when the union is
//! small; 0.038 with 64 eight-bit values: at a fixed 64 bytes, fewer bits and more values
//! estimate high resemblance better (measured in QUALITY.md).

// Indexing: the sketch's slots are indexed by hash numbers below its configured count.
#![allow(clippy::indexing_slicing)]

use super::hash::fmix64;
pub(crate) use super::shingles::ShingleScan;
use super::tokenize::feed_chunks;

/// Most bytes a sketch takes.
pub const MAX_SKETCH_BYTES: usize = 64;
/// Version of the sketch recipe new sketches are made with; part of its descriptor.
pub const SKETCH_RECIPE_VERSION: u32 = 2;
/// The recipe versions this build makes and compares (1: independent hash functions;
/// 2: one-permutation hashing filled by rounds).
pub const SKETCH_RECIPE_VERSIONS: std::ops::RangeInclusive<u32> = 1..=2;
/// Key of recipe 2's round 0 (SHA-512's first initial value); round `t`'s is this plus
/// `t * 0x9E3779B97F4A7C15`.
const ROUND_KEY: u64 = 0x6A09_E667_F3BC_C908;
/// Rounds per slot after which recipe 2 fills a slot still empty from the next filled one.
const MAX_ROUNDS_PER_SLOT: u64 = 64;

/// Why a sketch cannot be made, decoded or compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SketchError {
    /// `bits` is not 1, 2, 4, 8 or 16, or `hashes * bits` is not a whole number of bytes
    /// between 1 and [`MAX_SKETCH_BYTES`], or the recipe version is not one this build knows.
    #[error("invalid sketch options: {hashes} hashes of {bits} bits, recipe version {version} (bits 1, 2, 4, 8 or 16; hashes x bits a multiple of 8, at most {max} bits; versions 1 and 2)", max = MAX_SKETCH_BYTES * 8)]
    BadOptions {
        /// Recipe version asked for.
        version: u32,
        /// Hash functions asked for.
        hashes: u32,
        /// Bits per hash asked for.
        bits: u32,
    },
    /// Encoded bytes of the wrong length for the options.
    #[error("a sketch of these options takes {expected} bytes, got {found}")]
    Length {
        /// Bytes the options give.
        expected: usize,
        /// Bytes found.
        found: usize,
    },
    /// Two sketches made with different options cannot be compared.
    #[error("sketches of different recipes cannot be compared: {a} vs {b}")]
    Mismatch {
        /// One recipe.
        a: String,
        /// The other.
        b: String,
    },
}

/// The sketch's shape: how many values, how many bits of each are kept, and the recipe
/// version that makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SketchOptions {
    /// Values in the sketch (hash functions in recipe 1, slots in recipe 2).
    pub hashes: u32,
    /// Bits kept per value.
    pub bits: u32,
    /// The recipe version ([`SKETCH_RECIPE_VERSIONS`]); new sketches use
    /// [`SKETCH_RECIPE_VERSION`], an index keeps the one it was created with.
    pub version: u32,
}

impl Default for SketchOptions {
    /// 512 one-bit values of recipe 2: 64 bytes. Chosen on the dev corpus (QUALITY.md,
    /// "Sketch").
    fn default() -> Self {
        SketchOptions { hashes: 512, bits: 1, version: SKETCH_RECIPE_VERSION }
    }
}

impl SketchOptions {
    /// `hashes` values of `bits` bits of the current recipe ([`Self::validate`] says whether
    /// that is a valid sketch).
    pub fn new(hashes: u32, bits: u32) -> Self {
        SketchOptions { hashes, bits, version: SKETCH_RECIPE_VERSION }
    }

    /// The same shape made by recipe `version`.
    pub fn with_version(self, version: u32) -> Self {
        SketchOptions { version, ..self }
    }

    /// Fails unless the options give a valid sketch (see [`SketchError::BadOptions`]).
    pub fn validate(&self) -> Result<(), SketchError> {
        let total = u64::from(self.hashes) * u64::from(self.bits);
        if !matches!(self.bits, 1 | 2 | 4 | 8 | 16) || total == 0 || total % 8 != 0 || total > MAX_SKETCH_BYTES as u64 * 8 || !SKETCH_RECIPE_VERSIONS.contains(&self.version) {
            return Err(SketchError::BadOptions { version: self.version, hashes: self.hashes, bits: self.bits });
        }
        Ok(())
    }

    /// Bytes of one encoded sketch.
    pub fn bytes(&self) -> usize {
        (self.hashes * self.bits / 8) as usize
    }

    /// The 8-byte scheme tag an index or segment records for these sketches
    /// (`format-spec/sketch.md`, "Scheme tag").
    pub fn scheme(&self) -> [u8; 8] {
        simdex::minhash_scheme(self.version as u8, self.hashes as u16, self.bits as u8)
    }

    /// The sketch column of an index that stores these sketches
    /// ([`simdex::IndexOptions::sketches`]).
    pub fn column(&self) -> simdex::SketchColumn {
        simdex::SketchColumn { bytes: self.bytes() as u16, scheme: self.scheme() }
    }

    /// The options whose sketches a column holds (of whichever recipe version this build
    /// knows: an index keeps the recipe it was created with), `None` when the column's
    /// scheme is not one of this crate's recipes (an unknown version or another kind of
    /// sketch).
    pub fn from_column(column: &simdex::SketchColumn) -> Option<Self> {
        let (version, hashes, bits) = simdex::parse_minhash_scheme(column)?;
        let options = SketchOptions { hashes: u32::from(hashes), bits: u32::from(bits), version: u32::from(version) };
        options.validate().is_ok().then_some(options)
    }

    /// The recipe descriptor, e.g. `simdex-sketch/2 w3 rounds hashes=512 bits=1`: what a store
    /// of sketches records, since only sketches of one recipe compare.
    pub fn recipe(&self) -> String {
        let family = if self.version == 1 { "minhash" } else { "rounds" };
        format!("simdex-sketch/{} w3 {family} hashes={} bits={}", self.version, self.hashes, self.bits)
    }
}

/// One document's sketch: [`SketchOptions::bytes`] bytes (`format-spec/sketch.md`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Sketch {
    options: SketchOptions,
    bytes: [u8; MAX_SKETCH_BYTES],
}

impl std::fmt::Debug for Sketch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex: String = self.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
        write!(f, "Sketch({} {hex})", self.options.recipe())
    }
}

impl Sketch {
    /// The encoded bytes (fixed length for the options).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.options.bytes()]
    }

    /// Decodes bytes written by [`Self::as_bytes`] with the same options.
    pub fn from_bytes(options: SketchOptions, bytes: &[u8]) -> Result<Self, SketchError> {
        options.validate()?;
        if bytes.len() != options.bytes() {
            return Err(SketchError::Length { expected: options.bytes(), found: bytes.len() });
        }
        let mut out = [0u8; MAX_SKETCH_BYTES];
        out[..bytes.len()].copy_from_slice(bytes);
        Ok(Sketch { options, bytes: out })
    }

    /// The options it was made with.
    pub fn options(&self) -> SketchOptions {
        self.options
    }

    /// Estimated resemblance (Jaccard similarity of the word 3-shingle sets), `0..=1`.
    pub fn similarity(&self, other: &Sketch) -> Result<f64, SketchError> {
        if self.options != other.options {
            return Err(SketchError::Mismatch { a: self.options.recipe(), b: other.options.recipe() });
        }
        let SketchOptions { hashes, bits, .. } = self.options;
        // Equal options give equal, valid lengths: the estimate exists.
        Ok(simdex::minhash_resemblance(self.as_bytes(), other.as_bytes(), hashes, bits).unwrap_or(0.0))
    }
}

/// Makes sketches; holds the hash family and reusable buffers.
#[derive(Debug, Clone)]
pub struct Sketcher {
    options: SketchOptions,
    family: Family,
    /// `c_i` per value: the key of the bits kept of value `i`.
    cs: Vec<u64>,
    norm: String,
    /// The last text's shingles: in text order with repeats after a scan, ascending and
    /// distinct once `sorted` (sorted when asked for, or for recipe 1, whose cost is per
    /// distinct shingle; recipe 2's values do not depend on order or repeats).
    shingles: Vec<u64>,
    sorted: bool,
}

/// How the values' minima are found, by recipe version.
#[derive(Debug, Clone)]
enum Family {
    /// Recipe 1: `x_i` and `a_i` per hash function (separate arrays, so the minimum loop
    /// vectorises).
    Independent { xs: Vec<u64>, muls: Vec<u64> },
    /// Recipe 2: one-permutation hashing filled by rounds; no per-value state beyond `c_i`.
    Rounds,
}

impl Sketcher {
    /// A sketcher for `options`.
    pub fn new(options: SketchOptions) -> Result<Self, SketchError> {
        options.validate()?;
        let mut state = 0x5EED_5EED_5EED_5EEDu64;
        let mut next = || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            fmix64(state)
        };
        let (mut xs, mut muls, mut cs) = (Vec::new(), Vec::new(), Vec::new());
        let family = if options.version == 1 {
            for _ in 0..options.hashes {
                xs.push(next());
                muls.push(next() | 1);
                cs.push(next());
            }
            Family::Independent { xs, muls }
        } else {
            cs.extend((0..options.hashes).map(|_| next()));
            Family::Rounds
        };
        Ok(Sketcher { options, family, cs, norm: String::new(), shingles: Vec::new(), sorted: true })
    }

    /// The options.
    pub fn options(&self) -> SketchOptions {
        self.options
    }

    /// The distinct word 3-shingle hashes of `text`, ascending (the set a sketch samples).
    pub fn shingles(&mut self, text: &str) -> &[u64] {
        self.scan_text(text);
        self.last_shingles()
    }

    /// Collects the shingles of `text` (in text order, with repeats).
    fn scan_text(&mut self, text: &str) {
        let mut scan = self.scan();
        feed_chunks(text, &mut scan);
        scan.finish();
    }

    /// The shingle set of the last text this sketcher sketched (by [`Self::sketch`],
    /// [`Self::shingles`] or [`Fingerprinter::fingerprint_and_sketch`](crate::Fingerprinter::fingerprint_and_sketch)),
    /// ascending.
    pub fn last_shingles(&mut self) -> &[u64] {
        if !self.sorted {
            self.shingles.sort_unstable();
            self.shingles.dedup();
            self.sorted = true;
        }
        &self.shingles
    }

    /// The shingles of the last text this sketcher sketched as its scan made them: in text
    /// order, with repeats, unless [`Self::last_shingles`] sorted them since. Their set is
    /// the same; for a caller that keeps many and sorts the few it compares.
    pub fn last_scan(&self) -> &[u64] {
        &self.shingles
    }

    /// The sketch of the set the last scan collected ([`Self::scan`]).
    pub(crate) fn sketch_of_scanned(&mut self) -> Sketch {
        if self.options.version == 1 {
            // recipe 1 hashes each shingle `hashes` times: once per distinct one
            self.last_shingles();
        }
        let set = std::mem::take(&mut self.shingles);
        let sketch = self.sketch_of_set(&set);
        self.shingles = set;
        sketch
    }

    /// A scan that collects the shingles of a text fed to it chunk by chunk
    /// ([`ShingleScan`]), into this sketcher's buffers.
    pub(crate) fn scan(&mut self) -> ShingleScan<'_> {
        self.shingles.clear();
        self.sorted = false;
        ShingleScan::new(&mut self.shingles, &mut self.norm)
    }

    /// The sketch of `text`.
    pub fn sketch(&mut self, text: &str) -> Sketch {
        self.scan_text(text);
        self.sketch_of_scanned()
    }

    /// Per value, the shingle of `set` it keeps (all 0 for an empty set): in recipe 1 the
    /// one with the smallest hash of each function, in recipe 2 the one with the smallest
    /// value offered to each slot over the rounds. Two documents' values agree exactly when these do;
    /// the sketch keeps `bits` bits of a hash of each.
    pub fn min_shingles(&self, set: &[u64]) -> Vec<u64> {
        let n = self.cs.len();
        if set.is_empty() {
            return vec![0; n];
        }
        match &self.family {
            Family::Independent { xs, muls } => {
                let mut mins = vec![u64::MAX; n];
                let mut args = vec![0u64; n];
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512dq") {
                    // SAFETY: `min_shingles_avx512` needs AVX-512F and DQ (64-bit lane
                    // multiplies), just detected. Same arithmetic as the portable loop, so
                    // the same sketch (`golden_sketch` pins it on whichever path the CPU
                    // takes).
                    unsafe { min_shingles_avx512(xs, muls, set, &mut mins, &mut args) };
                    return args;
                }
                min_shingles_portable(xs, muls, set, &mut mins, &mut args);
                args
            }
            Family::Rounds => round_minima(set, n),
        }
    }

    /// The sketch of a set of shingle hashes (as [`Self::shingles`] gives).
    pub fn sketch_of_set(&self, set: &[u64]) -> Sketch {
        let bits = self.options.bits as usize;
        let mut bytes = [0u8; MAX_SKETCH_BYTES];
        if !set.is_empty() {
            let minima = self.min_shingles(set);
            for (i, (&s, &c)) in minima.iter().zip(&self.cs).enumerate() {
                let v = fmix64(s ^ c);
                for j in 0..bits {
                    if v >> j & 1 == 1 {
                        let at = i * bits + j;
                        if let Some(byte) = bytes.get_mut(at / 8) {
                            *byte |= 1 << (at % 8);
                        }
                    }
                }
            }
        }
        Sketch { options: self.options, bytes }
    }
}

/// The slot of a 64-bit hash among `m`: its high 32 bits scaled to `0..m`.
#[inline]
fn slot_of(h: u64, m: usize) -> usize {
    (((h >> 32) * m as u64) >> 32) as usize
}

/// Recipe 2's minima of a non-empty `set` in `m` slots, by rounds (one-permutation hashing
/// whose empty slots are filled by further rounds, as in Dahlgaard, Knudsen and Thorup's
/// fast similarity sketch): in round `t = 0, 1, ..` every shingle `s` hashes to
/// `h = fmix64(s ^ (ROUND_KEY + t * K1))`, which offers slot `slot_of(h)` the value
/// `t * 2^32 + (h mod 2^32)`; each slot keeps the shingle of the smallest value (ties: the
/// smaller shingle). Later rounds offer larger values, so the rounds stop once every slot
/// holds one: one round (one hash per shingle) and a few short ones fill a large set's
/// slots; a small set takes about `m ln m / n` rounds, about `m ln m` hashes in all. After
/// [`MAX_ROUNDS_PER_SLOT`] `* m` rounds (never reached: it needs the rounds' hashes to miss
/// a slot that many times) a slot still empty takes the next filled slot's shingle.
fn round_minima(set: &[u64], m: usize) -> Vec<u64> {
    ROUND_SCRATCH.with_borrow_mut(|(value, hashes)| round_minima_in(set, m, value, hashes))
}

thread_local! {
    /// [`round_minima`]'s working space, kept from one set to the next (the slots' values, a
    /// round's hashes): no allocation of its own a document.
    static ROUND_SCRATCH: std::cell::RefCell<(Vec<u64>, Vec<u64>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Sets above this many shingles leave no working space behind them.
const ROUND_SCRATCH_KEPT: usize = 1 << 16;

/// [`round_minima`] in the working space `value` and `hashes` (any contents).
fn round_minima_in(set: &[u64], m: usize, value: &mut Vec<u64>, hashes: &mut Vec<u64>) -> Vec<u64> {
    value.clear();
    value.resize(m, u64::MAX);
    hashes.clear();
    hashes.resize(set.len(), 0);
    let mut arg = vec![0u64; m];
    let mut empty = m;
    let mut round = 0u64;
    while empty > 0 && round < MAX_ROUNDS_PER_SLOT * m as u64 {
        let key = ROUND_KEY.wrapping_add(round.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        // the round's hashes first, in a loop of their own (vectorised where the CPU can),
        // then the offers, without a branch on whether each is taken
        round_hashes(set, key, hashes);
        if round == 0 {
            for (&s, &h) in set.iter().zip(hashes.iter()) {
                let at = slot_of(h, m);
                let v = h & 0xFFFF_FFFF;
                let (held, by) = (value[at], arg[at]);
                let take = (v < held) | ((v == held) & (s < by));
                empty -= usize::from(take & (held == u64::MAX));
                value[at] = if take { v } else { held };
                arg[at] = if take { s } else { by };
            }
        } else {
            // a later round's values exceed every earlier round's: only the slots empty when
            // it began (or taken in it, `held >> 32 == round`) can take one, a few of them
            for (&s, &h) in set.iter().zip(hashes.iter()) {
                let at = slot_of(h, m);
                let held = value[at];
                if held >> 32 >= round {
                    let v = round << 32 | (h & 0xFFFF_FFFF);
                    if (v < held) | ((v == held) & (s < arg[at])) {
                        empty -= usize::from(held == u64::MAX);
                        (value[at], arg[at]) = (v, s);
                    }
                }
            }
        }
        round += 1;
    }
    if empty > 0 {
        let filled: Vec<usize> = (0..m).filter(|&i| value[i] != u64::MAX).collect();
        for i in (0..m).filter(|&i| value[i] == u64::MAX) {
            // a non-empty set fills a slot in its first round
            let next = filled.iter().find(|&&j| j > i).or(filled.first()).copied().unwrap_or(i);
            arg[i] = arg[next];
        }
    }
    if hashes.capacity() > ROUND_SCRATCH_KEPT {
        *hashes = Vec::new();
    }
    arg
}

/// `out[i] = fmix64(set[i] ^ key)`: one round's hashes of [`round_minima`].
fn round_hashes(set: &[u64], key: u64, out: &mut [u64]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512dq") {
        // SAFETY: `round_hashes_avx512` needs AVX-512F and DQ (64-bit lane multiplies),
        // just detected. The same arithmetic as the portable loop (`round_hashes_agree`
        // checks both paths, `round_values_follow_the_spec` the minima).
        unsafe { round_hashes_avx512(set, key, out) };
        return;
    }
    round_hashes_portable(set, key, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn round_hashes_avx512(set: &[u64], key: u64, out: &mut [u64]) {
    round_hashes_portable(set, key, out);
}

#[inline(always)]
fn round_hashes_portable(set: &[u64], key: u64, out: &mut [u64]) {
    for (o, &s) in out.iter_mut().zip(set) {
        *o = fmix64(s ^ key);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn min_shingles_avx512(xs: &[u64], muls: &[u64], set: &[u64], mins: &mut [u64], args: &mut [u64]) {
    min_shingles_portable(xs, muls, set, mins, args);
}

/// For each hash function `i`, the shingle of `set` with the smallest `h_i` (the first
/// one on ties; `h_i` is a bijection, so ties only come from repeated shingles). Branch-free,
/// so that it vectorises.
#[inline(always)]
fn min_shingles_portable(xs: &[u64], muls: &[u64], set: &[u64], mins: &mut [u64], args: &mut [u64]) {
    for &s in set {
        for (((&x, &a), min), arg) in xs.iter().zip(muls).zip(mins.iter_mut()).zip(args.iter_mut()) {
            let v = (s ^ x).wrapping_mul(a);
            let v = v ^ (v >> 29);
            let less = v < *min;
            *min = if less { v } else { *min };
            *arg = if less { s } else { *arg };
        }
    }
}

/// Exact Jaccard similarity of two ascending sets of distinct hashes (1 for two empty sets).
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        match x.cmp(y) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - common;
    if union == 0 {
        1.0
    } else {
        common as f64 / union as f64
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Distinct shingle count of `s` and the shingles of the token list `want`, compared.
    fn same_tokens(s: &str, want: &[&str]) {
        let mut sketcher = Sketcher::new(SketchOptions::default()).unwrap();
        let got = sketcher.shingles(s).to_vec();
        let expected = sketcher.shingles(&want.join(" ")).to_vec();
        assert_eq!(got, expected, "{s:?} should tokenize as {want:?}");
    }

    /// The expected tokens are what `shared/eval/common.py`'s `tokenize` returns.
    #[test]
    fn tokens_are_the_ground_truths() {
        same_tokens("Rust 1.95.0: don't_panic!", &["rust", "1", "95", "0", "don", "t_panic"]);
        same_tokens("你妈妈喊你 ok", &["你", "妈", "妈", "喊", "你", "ok"]);
        same_tokens("ＡＢＣ def", &["abc", "def"]);
        same_tokens("हिन्दी भाषा", &["ह", "न", "द", "भ", "ष"]);
        same_tokens("ภาษาไทย", &["ภาษาไทย"]);
        same_tokens("Ⅻ ½ straße", &["xii", "1", "2", "strasse"]);
        same_tokens("مَرْحَبًا", &["م", "ر", "ح", "ب", "ا"]);
        same_tokens("ΛΌΓΟΣ λόγος", &["λόγοσ", "λόγοσ"]);
    }

    #[test]
    fn identical_texts_have_identical_sketches_and_similarity_one() {
        let mut s = Sketcher::new(SketchOptions::default()).unwrap();
        let a = s.sketch("the cat sat on the mat and then went to sleep");
        let b = s.sketch("The cat sat on the mat, and then went to sleep.");
        assert_eq!(a, b);
        assert_eq!(a.as_bytes().len(), 64);
        assert_eq!(a.similarity(&b).unwrap(), 1.0);
    }

    #[test]
    fn the_estimate_follows_the_exact_jaccard() {
        let words: Vec<String> = (0..400).map(|i| format!("w{}", (i * 7919) % 1000)).collect();
        let shapes = [SketchOptions::new(512, 1), SketchOptions::new(128, 4), SketchOptions::new(64, 8)];
        for opts in shapes.into_iter().flat_map(|o| [o, o.with_version(1)]) {
            let mut s = Sketcher::new(opts).unwrap();
            for changed in [0usize, 4, 10, 40, 200] {
                let mut other = words.clone();
                for w in other.iter_mut().step_by(400 / changed.max(1)).take(changed) {
                    *w = format!("x{w}");
                }
                let (a, b) = (words.join(" "), other.join(" "));
                let sa = s.shingles(&a).to_vec();
                let exact = jaccard(&sa, s.shingles(&b));
                let est = s.sketch(&a).similarity(&s.sketch(&b)).unwrap();
                assert!((est - exact).abs() < 0.15, "{opts:?} changed {changed}: est {est} exact {exact}");
            }
        }
    }

    #[test]
    fn bytes_round_trip_and_bad_input_is_an_error() {
        let mut s = Sketcher::new(SketchOptions::new(64, 2)).unwrap();
        let a = s.sketch("one two three four five six");
        let back = Sketch::from_bytes(a.options(), a.as_bytes()).unwrap();
        assert_eq!(a, back);
        assert!(matches!(Sketch::from_bytes(a.options(), &[0; 3]), Err(SketchError::Length { expected: 16, found: 3 })));
        assert!(Sketcher::new(SketchOptions::new(1024, 1)).is_err());
        assert!(Sketcher::new(SketchOptions::new(3, 3)).is_err());
        assert!(matches!(Sketcher::new(SketchOptions::new(512, 1).with_version(3)), Err(SketchError::BadOptions { version: 3, .. })));
        let other = Sketcher::new(SketchOptions::default()).unwrap().sketch("one two three");
        assert!(matches!(a.similarity(&other), Err(SketchError::Mismatch { .. })));
        // the same shape of the two recipes does not compare either
        let v1 = Sketcher::new(SketchOptions::default().with_version(1)).unwrap().sketch("one two three");
        assert!(matches!(v1.similarity(&other), Err(SketchError::Mismatch { .. })));
    }

    fn hex_sketch(options: SketchOptions, text: &str) -> String {
        Sketcher::new(options).unwrap().sketch(text).as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The recipe is persisted with every stored sketch: these bytes must never change
    /// within a recipe version (format-spec/sketch.md, worked example).
    #[test]
    fn golden_sketch() {
        let text = "The cat sat on the mat; the dog sat on the log.";
        assert_eq!(
            hex_sketch(SketchOptions::default(), text),
            "8d5c8edae8c29f43079d96a9dfc8ce3521c3474a4dfbe208c58637be7d3156f61a306a58bea610f503fb29bbfc012d957c121396664fdacbe9b50209d45c1517"
        );
        assert_eq!(hex_sketch(SketchOptions::new(8, 8), text), "e2c55e04eb407a28");
    }

    /// Recipe 1 as indexes created before recipe 2 pinned it.
    #[test]
    fn golden_sketch_of_recipe_1() {
        let text = "The cat sat on the mat; the dog sat on the log.";
        let v1 = SketchOptions::default().with_version(1);
        assert_eq!(hex_sketch(v1, text), "11f9b2106fe283e076d351f8cd874a702c2a92f9d266e12196d94a011c8110ea6b400c4400e2a2becdef663cb657112b70630bffd2d83e6210df7eb7f99ddb80");
        assert_eq!(hex_sketch(SketchOptions::new(8, 8).with_version(1), text), "f7acae68d984aa38");
        assert_eq!(v1.recipe(), "simdex-sketch/1 w3 minhash hashes=512 bits=1");
        assert_eq!(SketchOptions::default().recipe(), "simdex-sketch/2 w3 rounds hashes=512 bits=1");
    }

    /// Recipe 2 against a plain re-statement of the spec: 200 rounds of every shingle (more
    /// than any of these sets needs), the smallest (value, shingle) per slot.
    #[test]
    fn round_values_follow_the_spec() {
        fn spec(set: &[u64], m: usize) -> Vec<u64> {
            let mut best: Vec<(u64, u64)> = vec![(u64::MAX, 0); m];
            for t in 0..2000u64 {
                for &s in set {
                    let h = fmix64(s ^ ROUND_KEY.wrapping_add(t.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
                    let at = ((u128::from(h >> 32) * m as u128) >> 32) as usize;
                    best[at] = best[at].min((t << 32 | (h & 0xFFFF_FFFF), s));
                }
            }
            best.into_iter().map(|b| b.1).collect()
        }
        for m in [8usize, 100, 512] {
            for size in [7usize, 100, 600, 1500] {
                // (with repeats, as a scan in text order gives them)
                let set: Vec<u64> = (0..size as u64).chain(0..size as u64 / 3).map(|x| fmix64(x * 31 + size as u64)).collect();
                assert_eq!(round_minima(&set, m), spec(&set, m), "{size} shingles in {m} slots");
            }
        }
    }

    /// The round hashes on the CPU's path (AVX-512 where it has it) against the plain loop.
    #[test]
    fn round_hashes_agree() {
        let set: Vec<u64> = (0..1001u64).map(|x| fmix64(x ^ 0x5555)).chain([0, u64::MAX]).collect();
        for key in [0, ROUND_KEY, u64::MAX] {
            let (mut got, mut want) = (vec![0; set.len()], vec![0; set.len()]);
            round_hashes(&set, key, &mut got);
            round_hashes_portable(&set, key, &mut want);
            assert_eq!(got, want);
            assert!(want.iter().zip(&set).all(|(&h, &s)| h == fmix64(s ^ key)));
        }
    }

    #[test]
    fn short_and_empty_documents() {
        let mut s = Sketcher::new(SketchOptions::default()).unwrap();
        assert_eq!(s.shingles("").len(), 0);
        assert_eq!(s.shingles("two words").len(), 1);
        assert_eq!(jaccard(&[], &[]), 1.0);
    }
}
