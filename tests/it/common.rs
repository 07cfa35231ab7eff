//! Helpers shared by the integration tests: data generators and the brute-force oracle.

use simdex::{build_segment, BuildOptions, Match, Segment};
use std::path::{Path, PathBuf};

/// The oracle: every stored (fingerprint, id) within `k` of `q`, by a linear Hamming scan,
/// sorted as the library sorts matches, each (fingerprint, id) once.
pub fn brute_force(fps: &[u64], ids: Option<&[u64]>, q: u64, k: u32) -> Vec<Match> {
    let mut out: Vec<Match> = fps
        .iter()
        .enumerate()
        .filter(|(_, &x)| (x ^ q).count_ones() <= k)
        .map(|(i, &x)| Match { distance: (x ^ q).count_ones(), fingerprint: x, doc_id: ids.map(|ids| ids[i]) })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Builds a segment from `fps` (and `ids`) at `dir/name` and opens it.
pub fn build(dir: &Path, name: &str, fps: &[u64], ids: Option<&[u64]>, options: &BuildOptions) -> (PathBuf, Segment) {
    let path = dir.join(name);
    build_segment(&simdex::storage::FsStorage, &path, fps, ids, options).expect("build");
    let seg = Segment::open(&path).expect("open");
    (path, seg)
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `x` with `n` distinct random bits flipped.
    pub fn flip(&mut self, x: u64, n: u32) -> u64 {
        let mut y = x;
        while (y ^ x).count_ones() < n {
            y ^= 1 << (self.next() % 64);
        }
        y
    }
}
