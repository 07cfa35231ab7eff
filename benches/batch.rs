//! Batch queries and clusters at scale, with wall time and peak heap (a counting global
//! allocator; the mmap'd segment is page cache, not heap). Prints a table.
//!
//! `cargo bench --bench batch` (sizes from `SIMDEX_BENCH_SIZES`, default 1e6,1e7;
//! `SIMDEX_BENCH_QUERIES`, default 1e6). The planted near-duplicate groups are
//! `SIMDEX_BENCH_GROUP` fingerprints (default 10) of `SIMDEX_BENCH_FLIPS` bits (default 2)
//! around a center; 1 flip makes every pair of a group a near pair (large groups: many
//! pairs). Clusters run twice: with the default pair memory and bounded to
//! `SIMDEX_BENCH_PAIR_MIB` MiB (default 16), spilling into a temporary directory
//! (`SIMDEX_BENCH_CLUSTERS=0`: batch only). `SIMDEX_BENCH_MATCH_MIB` sets the batch's
//! match memory (default: automatic, the size of the queries).

// A bench may unwrap and index: a panic there is a failed run (the crate's lint policy is
// for the library).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use simdex::storage::FsStorage;
use simdex::{batch_query_each, BatchOptions};
use simdex::{build_segment, BuildOptions, Segment};
use simdex::{clusters, ClusterOptions};

#[path = "common.rs"]
mod common;

struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counters only
// observe sizes. Exercised by running this bench.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn reset_peak() -> usize {
    let now = CURRENT.load(Ordering::Relaxed);
    PEAK.store(now, Ordering::Relaxed);
    now
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() {
    let sizes: Vec<usize> =
        std::env::var("SIMDEX_BENCH_SIZES").map(|s| s.split(',').map(|x| x.trim().parse().expect("size")).collect()).unwrap_or_else(|_| vec![1_000_000, 10_000_000]);
    let nq: usize = std::env::var("SIMDEX_BENCH_QUERIES").map(|s| s.parse().expect("count")).unwrap_or(1_000_000);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let env = |name: &str, default: usize| std::env::var(name).map(|s| s.parse().expect(name)).unwrap_or(default);
    let group = env("SIMDEX_BENCH_GROUP", 10).max(1);
    let flips = env("SIMDEX_BENCH_FLIPS", 2);
    let pair_mib = env("SIMDEX_BENCH_PAIR_MIB", 16);
    let dir = tempfile::tempdir().expect("tempdir");
    println!("| operation | stored N | queries | threads | wall (s) | results | peak heap (MiB) | size of Q (MiB) | block keys (MiB) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for &n in &sizes {
        // 10% of the stored fingerprints are planted groups of `group`: `flips` bits from
        // the group's first fingerprint (itself `flips` bits from where it was).
        let mut fps = common::random(n, 11);
        let noise = common::random(n, 12);
        for i in 0..n / 10 {
            let center = fps[(i / group) * group];
            fps[i] = (0..flips).fold(center, |c, f| c ^ (1 << ((noise[i] >> (6 * f)) % 64)));
        }
        let ids: Vec<u64> = (0..n as u64).collect();
        let path = dir.path().join(format!("s{n}.sdx"));
        build_segment(&FsStorage, &path, &fps, Some(&ids), &BuildOptions::default()).expect("build");
        let seg = Segment::open(&path).expect("open");
        let keys: usize = seg.tables().iter().map(|t| t.block_count() as usize * 8).sum();
        let near = common::queries(&fps, nq, 5);
        let random = common::random(nq, 77);
        drop((fps, ids, noise));

        for (label, queries) in [("half near-duplicate queries", &near), ("random queries", &random)] {
            let base = reset_peak();
            let t = Instant::now();
            // Stream the matches, as `simdex batch` does to its output.
            let mut matches = 0u64;
            let match_memory = std::env::var("SIMDEX_BENCH_MATCH_MIB").ok().map(|v| v.parse::<usize>().expect("SIMDEX_BENCH_MATCH_MIB") << 20);
            batch_query_each(&seg, queries, &BatchOptions::new(3).with_threads(threads).with_match_memory(match_memory), |_| {
                matches += 1;
                Ok(())
            })
            .expect("batch");
            let wall = t.elapsed().as_secs_f64();
            let peak = PEAK.load(Ordering::Relaxed) - base;
            println!("| batch k=3, {label} | {n} | {nq} | {threads} | {wall:.2} | {matches} matches | {:.1} | {:.1} | {:.2} |", mib(peak), mib(nq * 8), mib(keys));
        }

        if std::env::var("SIMDEX_BENCH_CLUSTERS").is_ok_and(|v| v == "0") {
            continue;
        }
        let spill = tempfile::tempdir_in(dir.path()).expect("spill dir");
        for (label, pair_memory) in [("default pair memory", ClusterOptions::new(3).pair_memory), ("pairs bounded", pair_mib << 20)] {
            let options = ClusterOptions::new(3).with_threads(threads).with_pair_memory(pair_memory).with_spill_dir(Some(spill.path().to_path_buf()));
            let base = reset_peak();
            let t = Instant::now();
            let found = clusters(&seg, &options).expect("clusters");
            let wall = t.elapsed().as_secs_f64();
            let peak = PEAK.load(Ordering::Relaxed) - base;
            let members: usize = found.iter().map(|c| c.members.len()).sum();
            println!(
                "| cluster k=3, groups of {group} ({flips} bits), {label} ({} MiB) | {n} | - | {threads} | {wall:.2} | {} clusters, {members} entries | {:.1} | - | {:.2} |",
                pair_memory >> 20,
                found.len(),
                mib(peak),
                mib(keys)
            );
        }
    }
}
