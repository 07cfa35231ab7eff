//! Side-by-side latency bench (issue 13, item 4): simdex against gaoya 0.2.2's `SimHashIndex`
//! and uncompressed permuted sorted tables, on one seeded workload in one process, so the
//! figure to quote is simdex's ratio to each, not an absolute time on a shared machine.
//!
//! Its own crate and workspace (see README.md): neither the library, CI nor `cargo test`
//! compiles gaoya.

mod heap;
mod uncompressed;

use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

use gaoya::simhash::SimHashIndex;
use simdex::storage::FsStorage;
use simdex::{build_segment, BuildOptions, Match, QueryOptions, Segment};
use uncompressed::UncompressedTables;

#[global_allocator]
static ALLOCATOR: heap::CountingAllocator = heap::CountingAllocator;

/// The paper's distance, simdex's default.
const K: u32 = 3;
/// `SimHashIndex::new(blocks, d)` cuts the fingerprint into `blocks` blocks, keys one hash
/// table on each choice of `blocks - d` of them, and reports distances `< d` (strictly): so
/// k = 3 is `d = 4`, and 6 blocks give C(6, 2) = 15 tables keyed on 20 to 22 bits.
const GAOYA_BLOCKS: usize = 6;
const GAOYA_D: usize = K as usize + 1;

const USAGE: &str = "usage: simdex-peers [--n N[,N...]] [--queries Q] [--rounds R] [--seed S] [--check C] [--dir DIR] [--only simdex,gaoya,sorted]
  --n        stored fingerprints per run: 1000000, 1e7 or 2^26 (default 1e6)
  --queries  queries, half 2-bit variants of stored fingerprints, half random (default 100000)
  --rounds   timed passes over the queries after one untimed warm-up pass (default 2)
  --seed     workload seed (default 1)
  --check    queries also checked against a brute-force scan (default 200)
  --dir      where the simdex segment file is written (default: the temp directory)
  --only     build and time only these (e.g. `--only simdex` under perf)";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Peer {
    Simdex,
    Gaoya,
    Sorted,
}

impl Peer {
    const ALL: [Peer; 3] = [Peer::Simdex, Peer::Gaoya, Peer::Sorted];

    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "simdex" => Ok(Peer::Simdex),
            "gaoya" => Ok(Peer::Gaoya),
            "sorted" => Ok(Peer::Sorted),
            _ => Err(format!("--only {s}: expected simdex, gaoya or sorted")),
        }
    }
}

struct Args {
    sizes: Vec<usize>,
    queries: usize,
    rounds: usize,
    seed: u64,
    check: usize,
    dir: PathBuf,
    only: Vec<Peer>,
}

/// `1000000`, `1e7` or `2^26`.
fn parse_size(s: &str) -> Result<usize, String> {
    let bad = || format!("{s}: expected a count like 1000000, 1e7 or 2^26");
    if let Some((m, e)) = s.split_once('e') {
        let (m, e): (usize, u32) = (m.parse().map_err(|_| bad())?, e.parse().map_err(|_| bad())?);
        return 10usize.checked_pow(e).and_then(|p| p.checked_mul(m)).ok_or_else(bad);
    }
    if let Some((b, e)) = s.split_once('^') {
        let (b, e): (usize, u32) = (b.parse().map_err(|_| bad())?, e.parse().map_err(|_| bad())?);
        return b.checked_pow(e).ok_or_else(bad);
    }
    s.parse().map_err(|_| bad())
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { sizes: vec![1_000_000], queries: 100_000, rounds: 2, seed: 1, check: 200, dir: std::env::temp_dir(), only: Peer::ALL.to_vec() };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--n" => args.sizes = value.split(',').map(parse_size).collect::<Result<_, _>>()?,
            "--queries" => args.queries = parse_size(&value)?,
            "--rounds" => args.rounds = parse_size(&value)?,
            "--seed" => args.seed = value.parse().map_err(|_| format!("--seed {value}: expected an integer"))?,
            "--check" => args.check = parse_size(&value)?,
            "--dir" => args.dir = PathBuf::from(value),
            "--only" => args.only = value.split(',').map(Peer::parse).collect::<Result<_, _>>()?,
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    if args.sizes.iter().any(|&n| n == 0 || n > u32::MAX as usize) || args.queries == 0 || args.rounds == 0 {
        return Err(format!("--n must be in 1..=2^32-1, --queries and --rounds at least 1\n{USAGE}"));
    }
    Ok(args)
}

/// xorshift64*, the generator of `benches/common.rs`.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `count` queries alternating between a stored fingerprint with exactly two bits flipped and
/// a random fingerprint (almost surely no match at N <= 2^26).
fn make_queries(stored: &[u64], count: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| {
            let r = rng.next();
            if i % 2 == 1 {
                return r;
            }
            let x = stored[(r % stored.len() as u64) as usize];
            let a = (r >> 58) as u32;
            let b = (a + 1 + ((r >> 52) & 63) as u32 % 63) % 64;
            x ^ (1 << a) ^ (1 << b)
        })
        .collect()
}

struct Built {
    build_seconds: f64,
    bytes_per_fingerprint: f64,
    /// Heap held once built (for simdex the segment's in-memory keys; its tables are mmap'd).
    heap_bytes: usize,
    /// Highest heap during the build, above what was live before it.
    peak_bytes: usize,
}

/// Latencies in nanoseconds, one per query per round.
struct Latency {
    sorted_ns: Vec<u64>,
    round_p50s: Vec<f64>,
    matches: usize,
}

impl Latency {
    fn percentile_us(&self, p: usize) -> f64 {
        let n = self.sorted_ns.len();
        self.sorted_ns[(n * p / 100).min(n - 1)] as f64 / 1e3
    }

    fn mean_us(&self) -> f64 {
        self.sorted_ns.iter().sum::<u64>() as f64 / self.sorted_ns.len() as f64 / 1e3
    }
}

/// One timed pass: appends one latency per query, returns the matches found.
fn timed_pass(queries: &[u64], latencies: &mut Vec<u64>, mut query: impl FnMut(u64) -> usize) -> usize {
    let mut matches = 0;
    for &q in queries {
        let t = Instant::now();
        let found = query(std::hint::black_box(q));
        latencies.push(t.elapsed().as_nanos() as u64);
        matches += found;
    }
    matches
}

fn p50_us(ns: &[u64]) -> f64 {
    let mut v = ns.to_vec();
    v.sort_unstable();
    v[v.len() / 2] as f64 / 1e3
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.trim().to_string()).unwrap_or_else(|e| format!("unreadable: {e}"))
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, m)| m.trim().to_string()))
        .unwrap_or_else(|| "unknown".to_string())
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// The three indexes over one stored set; `None` where `--only` left one out.
struct Peers {
    segment: Option<Segment>,
    gaoya: Option<SimHashIndex<u64, u32>>,
    sorted: Option<UncompressedTables>,
}

impl Peers {
    fn has(&self, peer: Peer) -> bool {
        match peer {
            Peer::Simdex => self.segment.is_some(),
            Peer::Gaoya => self.gaoya.is_some(),
            Peer::Sorted => self.sorted.is_some(),
        }
    }

    /// The timed call of each: the library's own query entry point, answer held in memory.
    fn time(&self, peer: Peer, queries: &[u64], latencies: &mut Vec<u64>) -> Result<usize, Box<dyn Error>> {
        let within = QueryOptions::within(K);
        Ok(match peer {
            Peer::Simdex => {
                let segment = self.segment.as_ref().ok_or("simdex not built")?;
                let mut out: Vec<Match> = Vec::new();
                let mut failed = None;
                let matches = timed_pass(queries, latencies, |q| {
                    if let Err(e) = segment.query_into(q, &within, &mut out) {
                        failed = Some(e);
                    }
                    out.len()
                });
                if let Some(e) = failed {
                    return Err(e.into());
                }
                matches
            }
            Peer::Gaoya => {
                let index = self.gaoya.as_ref().ok_or("gaoya not built")?;
                timed_pass(queries, latencies, |q| index.query(&q).len())
            }
            Peer::Sorted => {
                let tables = self.sorted.as_ref().ok_or("sorted tables not built")?;
                let mut out = Vec::new();
                timed_pass(queries, latencies, |q| {
                    tables.query_into(q, K, &mut out);
                    out.len()
                })
            }
        })
    }

    /// The matching fingerprints of one query, sorted, each once.
    fn answer(&self, peer: Peer, stored: &[u64], q: u64) -> Result<Vec<u64>, Box<dyn Error>> {
        let mut v: Vec<u64> = match peer {
            Peer::Simdex => self.segment.as_ref().ok_or("simdex not built")?.query(q, &QueryOptions::within(K))?.iter().map(|m| m.fingerprint).collect(),
            Peer::Gaoya => self.gaoya.as_ref().ok_or("gaoya not built")?.query(&q).into_iter().map(|&id| stored[id as usize]).collect(),
            Peer::Sorted => {
                let mut out = Vec::new();
                self.sorted.as_ref().ok_or("sorted tables not built")?.query_into(q, K, &mut out);
                out
            }
        };
        v.sort_unstable();
        v.dedup();
        Ok(v)
    }
}

fn run(n: usize, args: &Args) -> Result<(), Box<dyn Error>> {
    println!("\n## N = {n}\n\nload before building: {}", loadavg());
    let mut rng = Rng::new(args.seed);
    let stored: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    let queries = make_queries(&stored, args.queries, args.seed ^ 0x5eed);
    let wanted = |p: Peer| args.only.contains(&p);
    let mut peers = Peers { segment: None, gaoya: None, sorted: None };
    let mut built: Vec<(Peer, Built)> = Vec::new();

    // simdex: the planner's default design for N and k = 3, XOR blocks, no ids; queries read the mmap'd file.
    let path = args.dir.join(format!("simdex-peers-{}-{n}.sdx", std::process::id()));
    let design = {
        let before = heap::live();
        heap::reset_peak();
        let t = Instant::now();
        let file_bytes = build_segment(&FsStorage, &path, &stored, None, &BuildOptions::default())?;
        let build_seconds = t.elapsed().as_secs_f64();
        let peak_bytes = heap::peak().saturating_sub(before);
        let after_build = heap::live();
        let segment = Segment::open(&path)?;
        let design = segment.design().clone();
        if wanted(Peer::Simdex) {
            // The open segment's heap alone: the build leaves the planner's process-wide caches
            // behind (about 2.9 MB whatever N is), which are not the index's.
            let heap_bytes = heap::live().saturating_sub(after_build);
            built.push((Peer::Simdex, Built { build_seconds, bytes_per_fingerprint: file_bytes as f64 / n as f64, heap_bytes, peak_bytes }));
            peers.segment = Some(segment);
        } else {
            drop(segment);
            std::fs::remove_file(&path)?;
        }
        design
    };
    println!("design (simdex's planner, also used by the sorted tables): {}", design.summary());

    if wanted(Peer::Gaoya) {
        let before = heap::live();
        heap::reset_peak();
        let ids: Vec<u32> = (0..n as u32).collect();
        let signatures = stored.clone();
        let t = Instant::now();
        let mut index = SimHashIndex::<u64, u32>::new(GAOYA_BLOCKS, GAOYA_D);
        index.par_bulk_insert(ids, signatures);
        let build_seconds = t.elapsed().as_secs_f64();
        let heap_bytes = heap::live().saturating_sub(before);
        built.push((Peer::Gaoya, Built { build_seconds, bytes_per_fingerprint: heap_bytes as f64 / n as f64, heap_bytes, peak_bytes: heap::peak().saturating_sub(before) }));
        peers.gaoya = Some(index);
    }

    if wanted(Peer::Sorted) {
        let before = heap::live();
        heap::reset_peak();
        let t = Instant::now();
        let tables = UncompressedTables::build(&design, &stored);
        let build_seconds = t.elapsed().as_secs_f64();
        let bytes_per_fingerprint = 8.0 * tables.table_count() as f64;
        built
            .push((Peer::Sorted, Built { build_seconds, bytes_per_fingerprint, heap_bytes: heap::live().saturating_sub(before), peak_bytes: heap::peak().saturating_sub(before) }));
        peers.sorted = Some(tables);
    }

    // Warm: one untimed pass each (page cache, TLB, branch predictors), then the timed rounds,
    // the implementations taking turns so that the machine's load drifts over all of them alike.
    let present: Vec<Peer> = Peer::ALL.into_iter().filter(|&p| peers.has(p)).collect();
    // What simdex's queries leave allocated (the seek hints of the blocks they used).
    let mut simdex_query_heap = 0usize;
    for &p in &present {
        let (mut latencies, before) = (Vec::with_capacity(queries.len()), heap::live());
        peers.time(p, &queries, &mut latencies)?;
        if p == Peer::Simdex {
            simdex_query_heap += heap::live().saturating_sub(before);
        }
    }
    let mut latencies: Vec<(Peer, Latency)> = present.iter().map(|&p| (p, Latency { sorted_ns: Vec::new(), round_p50s: Vec::new(), matches: 0 })).collect();
    for _ in 0..args.rounds {
        for (p, lat) in latencies.iter_mut() {
            let mut round = Vec::with_capacity(queries.len());
            let before = heap::live();
            lat.matches += peers.time(*p, &queries, &mut round)?;
            if *p == Peer::Simdex {
                simdex_query_heap += heap::live().saturating_sub(before);
            }
            lat.round_p50s.push(p50_us(&round));
            lat.sorted_ns.extend(round);
        }
    }
    for (_, lat) in latencies.iter_mut() {
        lat.sorted_ns.sort_unstable();
    }

    let gaoya_tables = (GAOYA_BLOCKS * (GAOYA_BLOCKS - 1)) / 2;
    let label = |p: Peer| match p {
        Peer::Simdex => format!("simdex ({} tables, XOR blocks, mmap)", design.tables().len()),
        Peer::Gaoya => format!("gaoya 0.2.2 SimHashIndex::new({GAOYA_BLOCKS}, {GAOYA_D}) ({gaoya_tables} hash tables)"),
        Peer::Sorted => format!("sorted tables ({} x Vec<u64>)", design.tables().len()),
    };
    let simdex = latencies.iter().find(|(p, _)| *p == Peer::Simdex).map(|(_, l)| (l.percentile_us(50), l.mean_us()));
    println!(
        "\n{} queries ({} 2-bit variants of stored fingerprints, {} random), k = {K}, one thread, {} timed round(s) after a warm-up pass\n",
        queries.len(),
        queries.len().div_ceil(2),
        queries.len() / 2,
        args.rounds
    );
    println!("| N | implementation | p50 (us) | p99 (us) | mean (us) | build (s) | bytes/fp | heap (MiB) | build peak heap (MiB) | simdex p50 ratio | simdex mean ratio |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (p, lat) in &latencies {
        let b = &built.iter().find(|(q, _)| q == p).ok_or("missing build figures")?.1;
        let (p50, mean) = (lat.percentile_us(50), lat.mean_us());
        let ratios = match simdex {
            Some((s50, smean)) => format!("{:.3} | {:.3}", s50 / p50, smean / mean),
            None => "- | -".to_string(),
        };
        println!(
            "| {n} | {} | {p50:.2} | {:.2} | {mean:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {ratios} |",
            label(*p),
            lat.percentile_us(99),
            b.build_seconds,
            b.bytes_per_fingerprint,
            mib(b.heap_bytes),
            mib(b.peak_bytes)
        );
    }
    println!();
    for (p, lat) in &latencies {
        let rounds: Vec<String> = lat.round_p50s.iter().map(|x| format!("{x:.2}")).collect();
        println!("{}: p50 per round {} us; {} matches per round", label(*p), rounds.join(", "), lat.matches / args.rounds);
        if *p == Peer::Simdex {
            println!("{}: heap left by the queries (seek hints) {:.1} MiB", label(*p), mib(simdex_query_heap));
        }
    }

    // Same answers: all queries across the implementations built, the first `--check` also
    // against a brute-force scan of the stored fingerprints.
    let mut differing = 0usize;
    let mut brute_wrong = vec![0usize; present.len()];
    let checked = args.check.min(queries.len());
    let mut total = 0usize;
    for (i, &q) in queries.iter().enumerate() {
        let answers: Vec<Vec<u64>> = present.iter().map(|&p| peers.answer(p, &stored, q)).collect::<Result<_, _>>()?;
        total += answers[0].len();
        if answers.iter().any(|a| *a != answers[0]) {
            if differing < 5 {
                println!("DIFFERENT answers for query {q:016x}: {:?}", present.iter().zip(&answers).map(|(&p, a)| (label(p), a)).collect::<Vec<_>>());
            }
            differing += 1;
        }
        if i < checked {
            let mut brute: Vec<u64> = stored.iter().copied().filter(|&x| (x ^ q).count_ones() <= K).collect();
            brute.sort_unstable();
            brute.dedup();
            for (wrong, a) in brute_wrong.iter_mut().zip(&answers) {
                *wrong += usize::from(*a != brute);
            }
        }
    }
    let names: Vec<String> = present.iter().map(|&p| label(p)).collect();
    println!(
        "\nanswer check: {} queries, {total} matching fingerprints; {} ({differing} queries differ) across {}",
        queries.len(),
        if differing == 0 { "IDENTICAL sets" } else { "NOT identical" },
        names.join(", ")
    );
    let brute: Vec<String> = present.iter().zip(&brute_wrong).map(|(&p, &w)| format!("{}: {}", label(p), if w == 0 { "ok".to_string() } else { format!("{w} WRONG") })).collect();
    println!("brute-force check on the first {checked} queries (distance <= {K}): {}", brute.join("; "));
    println!("load after N = {n}: {}", loadavg());

    drop(peers);
    if wanted(Peer::Simdex) {
        std::fs::remove_file(&path)?;
    }
    if differing > 0 || brute_wrong.iter().any(|&w| w > 0) {
        return Err("the implementations do not give the same answers".into());
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    // gaoya's bulk insert runs on rayon's pool: one thread, like the other two builds.
    rayon::ThreadPoolBuilder::new().num_threads(1).build_global()?;
    println!("# simdex side by side (issue 13)\n");
    println!("machine: {} CPUs ({}), {}", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), cpu_model(), std::env::consts::ARCH);
    println!("command: {}", std::env::args().collect::<Vec<_>>().join(" "));
    println!("load at start (/proc/loadavg): {}", loadavg());
    for &n in &args.sizes {
        run(n, &args)?;
    }
    println!("\nload at end (/proc/loadavg): {}", loadavg());
    Ok(())
}
