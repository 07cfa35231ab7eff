//! Engine benchmarks, printed as tables (harness = false): ingest throughput per durability
//! mode, query latency on 1e7 fingerprints spread over live segments and the memtable while
//! a writer ingests (against one 1e7 segment), and compaction throughput.
//!
//! Documents by id: the id tables' bytes per fingerprint and the cost of a check by id
//! (`find_or_replace`) beside the plain check (`find_or_insert`).
//!
//! `cargo bench --bench engine` runs everything; `SIMDEX_BENCH_ENGINE=ingest,query,compact,by_id`
//! picks parts; `SIMDEX_BENCH_N` changes the 1e7 size. Files go to `SIMDEX_BENCH_DIR` (a
//! temporary directory under the target dir by default: a real disk, not tmpfs).

// A bench may unwrap and index: a panic there is a failed run (the crate's lint policy is
// for the library).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use simdex::storage::{FileBytes, FsStorage, LockGuard, Storage, SyncHandle, WriteFile};
use simdex::{build_segment, BuildOptions, Durability, Index, Match, Segment};
use simdex::{CompactionOptions, IndexOptions};

#[path = "common.rs"]
mod common;

fn bench_dir() -> tempfile::TempDir {
    let base = std::env::var_os("SIMDEX_BENCH_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

fn pairs(n: usize, seed: u64) -> Vec<(u64, u64)> {
    common::random(n, seed).into_iter().enumerate().map(|(i, fp)| (fp, i as u64)).collect()
}

fn wants(part: &str) -> bool {
    std::env::var("SIMDEX_BENCH_ENGINE").map_or(true, |v| v.split(',').any(|p| p.trim() == part))
}

fn n_total() -> usize {
    std::env::var("SIMDEX_BENCH_N").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000_000)
}

/// A field of /proc/self/status in KiB (VmRSS: now; VmHWM: peak since the last reset).
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status").ok().and_then(|s| s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())).unwrap_or(0)
}

/// Resets the peak-RSS mark (Linux: writing 5 to clear_refs).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The real file system with every log fsync made `delay` slower: a slow disk (or a busy
/// one: this machine's fsync latency swung between 0.1 and 3 ms over a day).
#[derive(Debug)]
struct SlowSync {
    delay: Duration,
}

struct SlowFile {
    file: Box<dyn WriteFile>,
    delay: Duration,
}

impl std::io::Write for SlowFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl WriteFile for SlowFile {
    fn sync(&mut self) -> std::io::Result<()> {
        std::thread::sleep(self.delay);
        self.file.sync()
    }
    fn sync_handle(&self) -> std::io::Result<Arc<dyn SyncHandle>> {
        Ok(Arc::new(SlowHandle { handle: self.file.sync_handle()?, delay: self.delay }))
    }
}

struct SlowHandle {
    handle: Arc<dyn SyncHandle>,
    delay: Duration,
}

impl SyncHandle for SlowHandle {
    fn sync(&self) -> std::io::Result<()> {
        std::thread::sleep(self.delay);
        self.handle.sync()
    }
}

impl Storage for SlowSync {
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>> {
        let file = FsStorage.create(path)?;
        Ok(Box::new(SlowFile { file, delay: self.delay }))
    }
    fn append(&self, path: &Path) -> std::io::Result<Box<dyn WriteFile>> {
        let file = FsStorage.append(path)?;
        Ok(Box::new(SlowFile { file, delay: self.delay }))
    }
    fn read(&self, path: &Path) -> std::io::Result<FileBytes> {
        FsStorage.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        FsStorage.rename(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        FsStorage.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        FsStorage.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        FsStorage.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        FsStorage.create_dir_all(dir)
    }
    fn truncate(&self, path: &Path, len: u64) -> std::io::Result<()> {
        FsStorage.truncate(path, len)
    }
    fn lock(&self, path: &Path) -> std::io::Result<LockGuard> {
        FsStorage.lock(path)
    }
}

/// Inserts `data` in calls of `batch` pairs with `durability`, for at most `limit`;
/// returns (pairs written, seconds) including the final sync. `slow_sync` adds that much to
/// every fsync of a written file.
fn ingest(dir: &Path, data: &[(u64, u64)], batch: usize, durability: Durability, limit: Duration, slow_sync: Duration) -> (usize, f64) {
    let mut options = IndexOptions::default().with_durability(durability);
    if !slow_sync.is_zero() {
        options.storage = Arc::new(SlowSync { delay: slow_sync });
    }
    let index = Index::open(dir, options).unwrap();
    let start = Instant::now();
    let mut done = 0;
    for chunk in data.chunks(batch) {
        if batch == 1 {
            index.insert(chunk[0].0, chunk[0].1).unwrap();
        } else {
            index.insert_many(&chunk.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
        }
        done += chunk.len();
        if done % 4096 < batch && start.elapsed() > limit {
            break;
        }
    }
    index.sync().unwrap();
    let secs = start.elapsed().as_secs_f64();
    index.close().unwrap();
    (done, secs)
}

fn ingest_table() {
    println!("\n## Ingest throughput (one writer thread, background flush and compaction, memtable 2^20 ops)\n");
    println!("| durability | pairs per call | pairs written | seconds | pairs/s | syncs |");
    println!("|---|---|---|---|---|---|");
    let data = pairs(4_000_000, 1);
    let group = Durability::Group { max_delay: Duration::from_millis(10), max_ops: 100_000 };
    let rows: [(&str, Durability, usize, usize, Duration); 9] = [
        ("group commit (10 ms / 100k ops)", group, 1000, data.len(), Duration::from_secs(60)),
        ("group commit (10 ms / 100k ops)", group, 1, 1_000_000, Duration::from_secs(20)),
        ("group commit, every fsync 3 ms slower", group, 1000, data.len(), Duration::from_secs(60)),
        ("group commit, every fsync 3 ms slower", group, 1, 1_000_000, Duration::from_secs(20)),
        ("none (OS buffers)", Durability::NoSync, 1000, data.len(), Duration::from_secs(60)),
        ("none (OS buffers)", Durability::NoSync, 1, 1_000_000, Duration::from_secs(20)),
        ("fsync per write", Durability::Sync, 1, 1_000_000, Duration::from_secs(5)),
        ("fsync per write", Durability::Sync, 100, 1_000_000, Duration::from_secs(5)),
        ("fsync per write", Durability::Sync, 1000, data.len(), Duration::from_secs(10)),
    ];
    for (name, durability, batch, n, limit) in rows {
        let dir = bench_dir();
        let slow = if name.contains("slower") { Duration::from_millis(3) } else { Duration::ZERO };
        let (done, secs) = ingest(dir.path(), &data[..n], batch, durability, limit, slow);
        let syncs = match durability {
            Durability::Sync => format!("{}", done.div_ceil(batch)),
            Durability::Group { .. } => "every 10 ms or 100k ops".into(),
            Durability::NoSync => "at rotation and close".into(),
        };
        println!("| {name} | {batch} | {done} | {secs:.2} | {:.0} | {syncs} |", done as f64 / secs);
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Median and p99 in microseconds of one query at a time.
fn latencies(queries: &[u64], mut query: impl FnMut(u64) -> usize) -> (f64, f64, f64) {
    for &q in queries.iter().take(2000) {
        query(q);
    }
    let mut t = Vec::with_capacity(queries.len());
    let mut found = 0usize;
    for &q in queries {
        let s = Instant::now();
        found += query(q);
        t.push(s.elapsed().as_secs_f64() * 1e6);
    }
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (percentile(&t, 0.5), percentile(&t, 0.99), found as f64 / queries.len() as f64)
}

fn query_table() {
    let n = n_total();
    println!("\n## Query latency, k = 3, {n} random fingerprints (half the queries near copies of stored ones)\n");
    let data = pairs(n, 7);
    let fps: Vec<u64> = data.iter().map(|p| p.0).collect();
    let queries = common::queries(&fps, 20_000, 99);
    let dir = bench_dir();

    // The single-segment figure.
    let seg_path = dir.path().join("single.sdx");
    let ids: Vec<u64> = data.iter().map(|p| p.1).collect();
    build_segment(&FsStorage, &seg_path, &fps, Some(&ids), &BuildOptions::default()).unwrap();
    let seg = Segment::open(&seg_path).unwrap();
    let mut out: Vec<Match> = Vec::new();
    let single = latencies(&queries, |q| {
        seg.query_into(q, &simdex::QueryOptions::within(3), &mut out).unwrap();
        out.len()
    });
    let single_design = seg.design().summary();
    drop(seg);

    // The same fingerprints through the engine: segments from flushes and compactions,
    // the last ones still in the memtable.
    let idx = dir.path().join("idx");
    let memtable_ops = 1 << 20;
    let options = IndexOptions::default().with_memtable_ops(memtable_ops).with_background(true).with_durability(Durability::NoSync);
    let index = Arc::new(Index::open(&idx, options).unwrap());
    for chunk in data.chunks(10_000) {
        index.insert_many(&chunk.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    }
    // Let the background thread finish its flushes and compactions.
    let settle = Instant::now();
    while index.stats().frozen_memtables > 0 && settle.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    index.compact_tiered().unwrap();
    let stats = index.stats();
    let layout = format!(
        "{} segments ({}) + memtable of {} pairs",
        stats.segments.len(),
        stats.segments.iter().map(|s| format!("{}: {} tables", s.entries, s.tables)).collect::<Vec<_>>().join(", "),
        stats.memtable_inserts
    );
    let mut out = Vec::new();
    let idle = latencies(&queries, |q| {
        index.query_into(q, &simdex::QueryOptions::within(3), &mut out).unwrap();
        out.len()
    });

    let run_with_writer = |rate: Option<u64>| {
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let writer = {
            let (index, stop, written) = (index.clone(), stop.clone(), written.clone());
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut x = 0x1234_5678_9abc_def1u64;
                let mut id = 1u64 << 40;
                let mut chunk = Vec::with_capacity(1000);
                while !stop.load(Ordering::Relaxed) {
                    chunk.clear();
                    for _ in 0..1000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        id += 1;
                        chunk.push((x, id));
                    }
                    index.insert_many(&chunk.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
                    let w = written.fetch_add(1000, Ordering::Relaxed) + 1000;
                    if let Some(rate) = rate {
                        let due = Duration::from_secs_f64(w as f64 / rate as f64);
                        if let Some(wait) = due.checked_sub(start.elapsed()) {
                            std::thread::sleep(wait);
                        }
                    }
                }
            })
        };
        while written.load(Ordering::Relaxed) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // At least five seconds of queries, so that flushes and compactions happen.
        let start = Instant::now();
        let w0 = written.load(Ordering::Relaxed);
        let mut long = Vec::new();
        while long.len() < queries.len() || start.elapsed() < Duration::from_secs(5) {
            long.extend_from_slice(&queries);
            if long.len() > 40 * queries.len() {
                break;
            }
            if start.elapsed() < Duration::from_secs(5) {
                let mut out = Vec::new();
                for &q in &queries {
                    index.query_into(q, &simdex::QueryOptions::within(3), &mut out).unwrap();
                }
            }
        }
        let mut out = Vec::new();
        let r = latencies(&queries, |q| {
            index.query_into(q, &simdex::QueryOptions::within(3), &mut out).unwrap();
            out.len()
        });
        let secs = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        let s = index.stats();
        (r, (written.load(Ordering::Relaxed) - w0) as f64 / secs, s.segments.len(), s.flushes, s.compactions)
    };
    let (limited, limited_rate, seg_a, fl_a, co_a) = run_with_writer(Some(200_000));
    let (full, full_rate, seg_b, fl_b, co_b) = run_with_writer(None);
    println!("| setup | median us | p99 us | matches/query | vs single segment (median) |");
    println!("|---|---|---|---|---|");
    println!("| one segment ({single_design}) | {:.1} | {:.1} | {:.2} | 1.00x |", single.0, single.1, single.2);
    println!("| index, no writer: {layout} | {:.1} | {:.1} | {:.2} | {:.2}x |", idle.0, idle.1, idle.2, idle.0 / single.0);
    println!(
        "| index, writer at {:.0} pairs/s (then {seg_a} segments; {fl_a} flushes, {co_a} compactions so far) | {:.1} | {:.1} | {:.2} | {:.2}x |",
        limited_rate,
        limited.0,
        limited.1,
        limited.2,
        limited.0 / single.0
    );
    println!(
        "| index, writer flat out at {:.0} pairs/s (then {seg_b} segments; {fl_b} flushes, {co_b} compactions so far) | {:.1} | {:.1} | {:.2} | {:.2}x |",
        full_rate,
        full.0,
        full.1,
        full.2,
        full.0 / single.0
    );
}

fn compact_table() {
    let n = n_total();
    println!("\n## Compaction: {n} fingerprints in 4 segments merged into one (k = 3)\n");
    println!("| input | buffer (fingerprints) | output tables | seconds | input fingerprints/s | input fingerprints x output tables / s | spilled runs | RSS before, MiB | peak RSS during, MiB |");
    println!("|---|---|---|---|---|---|---|---|---|");
    // Without deletes the permuted tables are merged from the inputs' (same design); with
    // deletes they are sorted again within the buffer, spilling runs when it fills.
    for (buffer, delete_every) in [(8usize << 20, 0usize), (8 << 20, 100), (1 << 20, 100)] {
        let dir = bench_dir();
        let idx = dir.path().join("idx");
        let options = IndexOptions::default()
            .with_memtable_ops(u64::MAX)
            .with_background(false)
            .with_durability(Durability::NoSync)
            .with_compaction(CompactionOptions::default().with_fanout(4).with_buffer_entries(buffer).with_automatic(false));
        let index = Index::open(&idx, options).unwrap();
        let data = pairs(n, 21);
        for part in data.chunks(n.div_ceil(4)) {
            for chunk in part.chunks(100_000) {
                index.insert_many(&chunk.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
            }
            index.flush().unwrap();
        }
        if delete_every > 0 {
            let gone: Vec<(u64, u64)> = data.iter().step_by(delete_every).copied().collect();
            index.delete_many(&gone.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
        }
        drop(data);
        assert_eq!(index.stats().segments.len(), 4);
        let deleted = if delete_every > 0 { format!("1 in {delete_every} deleted") } else { "none deleted".to_string() };
        let before = status_kib("VmRSS:");
        reset_peak_rss();
        let start = Instant::now();
        index.compact().unwrap();
        let secs = start.elapsed().as_secs_f64();
        let stats = index.stats();
        let tables = stats.segments[0].tables;
        println!(
            "| {deleted} | {buffer} | {tables} | {secs:.2} | {:.0} | {:.0} | {} | {} | {} |",
            n as f64 / secs,
            (n * tables) as f64 / secs,
            stats.compaction_spilled_runs,
            before / 1024,
            status_kib("VmHWM:") / 1024
        );
    }
}

/// Bytes of the files of `idx` whose names end in `ext`.
fn bytes_of(idx: &Path, ext: &str) -> u64 {
    std::fs::read_dir(idx).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().ends_with(ext)).map(|e| e.metadata().unwrap().len()).sum()
}

fn by_id_table() {
    println!("\n## Documents by id: id tables (seg-N.sdi) and the check by id (k = 3, one segment, NoSync)\n");
    println!("| stored | .sdi bytes | .sdi bytes/fp | .sdx bytes/fp | op | ops | µs/op | ratio to find_or_insert |");
    println!("|---|---|---|---|---|---|---|---|");
    let n = std::env::var("SIMDEX_BENCH_BY_ID_N").ok().and_then(|s| s.parse().ok()).unwrap_or(1usize << 22);
    let ops = 200_000usize;
    let dir = bench_dir();
    let idx = dir.path().join("idx");
    let options = IndexOptions::default().with_memtable_ops(u64::MAX).with_background(false).with_durability(Durability::NoSync);
    let index = Index::open(&idx, options).unwrap();
    for chunk in pairs(n, 31).chunks(100_000) {
        index.insert_many(&chunk.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    }
    index.compact().unwrap();
    let (sdi, sdx) = (bytes_of(&idx, ".sdi"), bytes_of(&idx, ".sdx"));
    let head = format!("| {n} | {sdi} | {:.2} | {:.2} |", sdi as f64 / n as f64, sdx as f64 / n as f64);
    let q = simdex::QueryOptions::default();
    // fresh fingerprints (no near-duplicate among random ones at k = 3) under: new ids
    // (find_or_insert inserts, find_or_replace inserts) and stored ids (find_or_replace
    // replaces the id's fingerprint: a changed page); each op on its own copy of the index state
    let fresh = common::random(3 * ops, 32);
    let stored_ids = |i: usize| (i as u64).wrapping_mul(0x9e37_79b9) % n as u64;
    let time = |f: &mut dyn FnMut(usize)| {
        let start = Instant::now();
        for i in 0..ops {
            f(i);
        }
        start.elapsed().as_secs_f64() * 1e6 / ops as f64
    };
    let base = time(&mut |i| assert!(matches!(index.find_or_insert(fresh[i], (n + i) as u64, &q).unwrap(), simdex::FindOrInsert::Inserted { .. })));
    let rows: Vec<(&str, f64)> = vec![
        ("find_or_insert, new id (inserts)", base),
        ("find_or_replace, new id (inserts)", time(&mut |i| assert!(index.find_or_replace(fresh[ops + i], (n + ops + i) as u64, &q).unwrap().stored()))),
        ("find_or_replace, stored id (replaces)", time(&mut |i| assert!(index.find_or_replace(fresh[2 * ops + i], stored_ids(i), &q).unwrap().stored()))),
        ("fingerprints_of, stored id", time(&mut |i| assert!(!index.fingerprints_of(stored_ids(i) ^ 1).unwrap().is_empty()))),
        ("replace, stored id (unchecked)", time(&mut |i| drop(index.replace(fresh[i] ^ 0xffff, stored_ids(i)).unwrap()))),
        ("insert (unchecked)", time(&mut |i| assert!(index.insert(fresh[ops + i] ^ 0xffff, (n + 3 * ops + i) as u64).unwrap() > 0))),
    ];
    for (op, us) in rows {
        println!("{head} {op} | {ops} | {us:.2} | {:.2} |", us / base);
    }
}

fn main() {
    // `cargo bench` passes --bench; nothing else is accepted.
    println!("# simdex engine benchmarks");
    if wants("ingest") {
        ingest_table();
    }
    if wants("query") {
        query_table();
    }
    if wants("compact") {
        compact_table();
    }
    if wants("by_id") {
        by_id_table();
    }
}
