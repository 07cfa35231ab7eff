//! Band files of every version against an oracle: the segment's own sketches, grouped by
//! brute force (every entry with a sketch under each of its bands' values, buckets and
//! tags), never the file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::HashMap;
use std::path::Path;

use super::build::{emit, head_for, write_band_file, BuildBudget};
use super::layout::{BandHead, BANDS_VERSION, PAGE_BYTES, PAGE_CRC_BYTES};
use super::read::BandFile;
use super::{band_key, is_empty_sketch, tag};
use crate::codec::{Codec, SymbolHistogram};
use crate::confirm::minhash_scheme;
use crate::segment::{IdColumn, Segment, SegmentWriter, SketchColumn};
use crate::storage::{FsStorage, MemStorage, Storage};

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// A segment at `path` of the `(fingerprint, id, sketch)` rows, written as the engine
/// writes one (table 0 and the columns in `(fingerprint, id)` order); returns it and its
/// `(id, sketch)` in ordinal order.
fn segment_of(storage: &dyn Storage, path: &Path, mut rows: Vec<(u64, u64, [u8; 64])>) -> (Segment, Vec<(u64, [u8; 64])>) {
    rows.sort_by_key(|r| (r.0, r.1));
    let design = crate::plan::planned_design(&crate::plan::PlanOptions::new(rows.len() as u64, 3)).unwrap();
    let column = SketchColumn { bytes: 64, scheme: minhash_scheme(1, 512, 1) };
    let mut w = SegmentWriter::create_with(storage, path, &design, &vec![Codec::Xor; design.tables().len()], IdColumn::Present, Some(column)).unwrap();
    for t in design.tables() {
        let mut v: Vec<u64> = rows.iter().map(|r| t.permutation.apply(r.0)).collect();
        v.sort_unstable();
        w.write_table(&SymbolHistogram::of_sorted(Codec::Xor, &v).code(), v).unwrap();
    }
    w.write_ids(rows.iter().map(|r| r.1)).unwrap();
    w.write_sketches(rows.iter().map(|r| r.2)).unwrap();
    w.finish().unwrap();
    (Segment::open_with(storage, path).unwrap(), rows.iter().map(|r| (r.1, r.2)).collect())
}

/// A segment of `n` entries with random 64-byte sketches (every seventh without one); the
/// even bands take few values (all in bucket 0: a bucket of many entries).
fn segment(storage: &MemStorage, n: u64) -> (Segment, Vec<(u64, [u8; 64])>) {
    let mut next = xorshift(0x1234_5678_9abc_def1);
    let rows = (0..n)
        .map(|id| {
            let mut sketch = [0u8; 64];
            if id % 7 != 0 {
                for c in sketch.chunks_mut(8) {
                    c.copy_from_slice(&((next() % 5) | (next() << 40)).to_le_bytes());
                }
            }
            (next(), id, sketch)
        })
        .collect();
    segment_of(storage, Path::new("b/seg.sdx"), rows)
}

/// A segment of `n` entries whose bands are shaped to reach every corner of a block:
/// band 0 random (8 a bucket), band 1 in a sixteenth of the buckets (empty buckets and
/// blocks), band 2 one bucket for every fifth entry (a block over several pages), band 3
/// one value for every third, the others random; every eleventh entry without a sketch.
fn shaped_segment(storage: &MemStorage, n: u64, seed: u64) -> (Segment, Vec<(u64, [u8; 64])>) {
    segment_of(storage, Path::new("s/seg.sdx"), shaped_rows(n, seed))
}

/// [`shaped_segment`]'s rows `(fingerprint, id, sketch)`.
fn shaped_rows(n: u64, seed: u64) -> Vec<(u64, u64, [u8; 64])> {
    let mut next = xorshift(seed);
    (0..n)
        .map(|id| {
            let mut sketch = [0u8; 64];
            if id % 11 != 3 {
                for c in sketch.chunks_mut(4) {
                    c.copy_from_slice(&(next() as u32).to_le_bytes());
                }
                let band = |s: &mut [u8; 64], b: usize, v: u32| s[4 * b..4 * b + 4].copy_from_slice(&v.to_le_bytes());
                band(&mut sketch, 1, (next() as u32) & 0x0fff_ffff);
                if id % 5 == 0 {
                    band(&mut sketch, 2, 0x8000_0000 | (next() as u32 & 0xffff));
                }
                if id % 3 == 0 {
                    band(&mut sketch, 3, 0x1234_5678);
                }
            }
            (next(), id, sketch)
        })
        .collect()
}

/// The oracle, by brute force over the segment's sketches (entries without a sketch in
/// none): for each `(band, value)` the ordinals whose band is that value, and for each
/// `(band, bucket, tag)` of a head's design those whose band is in that bucket with that tag.
struct Oracle {
    by_value: HashMap<(u32, u32), Vec<u32>>,
    by_bucket: HashMap<(u32, u32, u32), Vec<u32>>,
}

fn oracle(seg: &Segment, head: &BandHead) -> Oracle {
    let (mut by_value, mut by_bucket): (HashMap<_, Vec<u32>>, HashMap<_, Vec<u32>>) = (HashMap::new(), HashMap::new());
    for o in 0..seg.len() {
        let s = seg.sketch(o).unwrap();
        if is_empty_sketch(s) {
            continue;
        }
        for b in 0..head.design.bands {
            let v = band_key(s, b).unwrap();
            by_value.entry((b, v)).or_default().push(o as u32);
            by_bucket.entry((b, head.design.bucket(v), tag(v, head.tag_bits))).or_default().push(o as u32);
        }
    }
    Oracle { by_value, by_bucket }
}

/// Checks `file`'s lookup of band `b`'s value `key` against the oracle: exactly the
/// ordinals whose band shares the value's bucket and tag (the file's filter), in the file's
/// order (bucket, ordinal); after the whole band is compared, exactly the value's.
fn check_lookup(file: &BandFile, head: &BandHead, oracle: &Oracle, b: u32, key: u32) {
    let mut found = Vec::new();
    file.lookup(b, key, &mut found).expect("lookup");
    let none = Vec::new();
    let want = oracle.by_bucket.get(&(b, head.design.bucket(key), tag(key, head.tag_bits))).unwrap_or(&none);
    assert_eq!(&found, want, "version {} band {b} key {key:#x}: the bucket's entries with the tag", head.version);
    let exact = oracle.by_value.get(&(b, key)).unwrap_or(&none);
    let whole: Vec<u32> = found.into_iter().filter(|o| exact.contains(o)).collect();
    assert_eq!(&whole, exact, "version {} band {b} key {key:#x}", head.version);
}

/// The file of `head`'s version for `seg`, written to `path` and opened.
fn file_of(storage: &MemStorage, seg: &Segment, head: BandHead, path: &str) -> BandFile {
    let mut out = Vec::new();
    emit(seg, &head, BuildBudget::default(), None, &mut out).map_err(|_| "emit").expect("emit");
    storage.put(Path::new(path), &out);
    BandFile::open(storage, Path::new(path), seg).expect("open")
}

/// The four versions' heads for `seg`.
fn heads(seg: &Segment) -> [BandHead; 4] {
    let v2 = head_for(seg, 2).expect("read").expect("banded");
    [v2.as_version_1(), v2, head_for(seg, 3).expect("read").expect("banded"), head_for(seg, 4).expect("read").expect("banded")]
}

#[test]
fn the_bytes_do_not_depend_on_the_budget_and_lookups_find_every_band() {
    let storage = MemStorage::default();
    let (seg, stored) = segment(&storage, 3000);
    let head = head_for(&seg, BANDS_VERSION).expect("read").expect("banded");
    assert_eq!((head.version, head.tag_bits, head.banded), (4, 5, 3000 - 3000u64.div_ceil(7)));
    let emit_with = |entries: u64| {
        let mut out = Vec::new();
        emit(&seg, &head, BuildBudget { entries }, None, &mut out).map_err(|_| "emit").expect("emit");
        out
    };
    let whole = emit_with(1 << 30);
    // several bands a pass, one band a pass, and a band in many bucket ranges
    for budget in [9000, 2600, 700, 5] {
        assert!(emit_with(budget) == whole, "budget {budget}");
    }
    let path = Path::new("b/x.sdb");
    assert!(write_band_file(&storage, &seg, path, BuildBudget { entries: 5 }, None).expect("write").is_some());
    let file = BandFile::open(&storage, path, &seg).expect("open");
    assert_eq!(file.version(), 4);
    file.verify(&seg).expect("verify");
    // the fingerprint at each ordinal is table 0's entry there
    for (o, e) in (0u64..).zip(seg.entries()) {
        assert_eq!(seg.fingerprint_at(o).unwrap(), e.unwrap().0, "ordinal {o}");
    }
    let by_value = oracle(&seg, &head);
    let ids: Vec<u64> = (0..seg.len()).map(|o| seg.doc_id(o).expect("id")).collect();
    for &(id, sketch) in stored.iter().step_by(13) {
        for b in 0..16 {
            let key = band_key(&sketch, b).expect("band");
            check_lookup(&file, &head, &by_value, b, key);
            let mut found = Vec::new();
            file.lookup(b, key, &mut found).expect("lookup");
            assert_eq!(found.iter().any(|&o| ids[o as usize] == id), id % 7 != 0, "id {id} band {b}");
        }
    }
}

#[test]
fn every_version_answers_as_the_oracle_does_and_version_4_is_smallest() {
    let storage = MemStorage::default();
    let (seg, stored) = segment(&storage, 1500);
    let [h1, h2, h3, h4] = heads(&seg);
    assert_eq!((h2.tag_bits, h2.ordinal_bits, h3.tag_bits, h3.ordinal_bits, h4.tag_bits, h4.ordinal_bits), (6, 11, 6, 11, 5, 11));
    let files = [file_of(&storage, &seg, h1, "b/v1.sdb"), file_of(&storage, &seg, h2, "b/v2.sdb"), file_of(&storage, &seg, h3, "b/v3.sdb"), file_of(&storage, &seg, h4, "b/v4.sdb")];
    assert_eq!(files.iter().map(BandFile::version).collect::<Vec<_>>(), [1, 2, 3, 4]);
    // (whole pages: this small segment's bands are as many pages in versions 2 to 4)
    assert!(files[3].file_len() <= files[2].file_len() && files[2].file_len() <= files[1].file_len() && files[1].file_len() < files[0].file_len());
    for (file, head) in files.iter().zip([h1, h2, h3, h4]) {
        file.verify(&seg).expect("verify");
        let by_value = oracle(&seg, &head);
        for &(_, sketch) in stored.iter().step_by(7) {
            for b in 0..16 {
                check_lookup(file, &head, &by_value, b, band_key(&sketch, b).expect("band"));
            }
        }
    }
}

#[test]
fn versions_3_and_4_edge_cases_answer_as_the_oracle_does() {
    // 1 bucket (a block of one bucket); 256 buckets (32 blocks: one partial directory
    // group); 8192 buckets (1024 blocks, 16 groups over 2 directory pages: the last
    // page partial) with empty buckets and blocks, a bucket over several pages, and
    // 1 value for a third of the entries
    for (n, seed, version) in [(9u64, 5u64, 3u32), (3000, 6, 3), (70_000, 7, 3), (9, 5, 4), (3000, 6, 4), (70_000, 7, 4)] {
        let storage = MemStorage::default();
        let (seg, stored) = shaped_segment(&storage, n, seed);
        let head = head_for(&seg, version).expect("read").expect("banded");
        let file = file_of(&storage, &seg, head, "s/v.sdb");
        file.verify(&seg).expect("verify");
        let g = head.geometry();
        if n == 70_000 {
            assert!(g.dir_slots() == 1024 && g.dir_pages >= 2 && g.high_bits == 3, "{g:?}");
        }
        let by_value = oracle(&seg, &head);
        let step = (stored.len() / 300).max(1);
        for &(_, sketch) in stored.iter().step_by(step) {
            for b in 0..16 {
                check_lookup(&file, &head, &by_value, b, band_key(&sketch, b).expect("band"));
            }
        }
        // values no entry has: empty buckets, the last bucket, the first
        for key in [0u32, u32::MAX, 0x7fff_ffff, 0x8000_0000, 0x1234_5678, 0xf000_0001] {
            for b in 0..16 {
                check_lookup(&file, &head, &by_value, b, key);
            }
        }
    }
}

#[test]
fn bands_of_many_bins_built_in_bucket_ranges_across_bins_are_the_same_bytes() {
    // 8192 buckets: 16 bins of 512 buckets a band; budgets that cut a band into ranges
    // whose ends fall inside a bin (3, 7 and 64 ranges), several bands a pass, the whole
    let storage = MemStorage::default();
    let (seg, stored) = shaped_segment(&storage, 70_000, 7);
    let head = head_for(&seg, BANDS_VERSION).expect("read").expect("banded");
    assert_eq!(head.design.bucket_bits, 13);
    let emit_with = |entries: u64| {
        let mut out = Vec::new();
        emit(&seg, &head, BuildBudget { entries }, None, &mut out).map_err(|_| "emit").expect("emit");
        out
    };
    let whole = emit_with(1 << 30);
    for budget in [head.banded / 3 + 1, head.banded / 7 + 1, head.banded / 64 + 1, 3 * head.banded] {
        assert!(emit_with(budget) == whole, "budget {budget}");
    }
    storage.put(Path::new("m/x.sdb"), &whole);
    let file = BandFile::open(&storage, Path::new("m/x.sdb"), &seg).expect("open");
    let by_value = oracle(&seg, &head);
    for &(_, sketch) in stored.iter().step_by(97) {
        for b in 0..16 {
            check_lookup(&file, &head, &by_value, b, band_key(&sketch, b).expect("band"));
        }
    }
}

#[test]
fn a_segment_without_any_sketch_has_an_empty_band_file() {
    let storage = MemStorage::default();
    let rows = (0..100u64).map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i, [0u8; 64])).collect();
    let (seg, _) = segment_of(&storage, Path::new("e/seg.sdx"), rows);
    let head = head_for(&seg, BANDS_VERSION).expect("read").expect("banded");
    assert_eq!(head.banded, 0);
    let file = file_of(&storage, &seg, head, "e/v4.sdb");
    file.verify(&seg).expect("verify");
    for key in [0u32, 1, u32::MAX] {
        let mut found = Vec::new();
        file.lookup(0, key, &mut found).expect("lookup");
        assert!(found.is_empty());
    }
}

#[test]
fn damaged_version_4_pages_are_refused_and_forged_ones_never_panic() {
    let storage = MemStorage::default();
    let (seg, stored) = shaped_segment(&storage, 3000, 9);
    let head = head_for(&seg, BANDS_VERSION).expect("read").expect("banded");
    let good = {
        let mut out = Vec::new();
        emit(&seg, &head, BuildBudget::default(), None, &mut out).map_err(|_| "emit").expect("emit");
        out
    };
    let keys: Vec<(u32, u32)> = stored.iter().step_by(97).flat_map(|(_, s)| (0..16).map(move |b| (b, band_key(s, b).unwrap()))).collect();
    let run = |bytes: &[u8]| -> (usize, bool) {
        let path = Path::new("s/bad.sdb");
        storage.put(path, bytes);
        let file = BandFile::open(&storage, path, &seg).expect("open: no page is read");
        let failed = keys.iter().filter(|&&(b, key)| file.lookup(b, key, &mut Vec::new()).is_err()).count();
        (failed, file.verify(&seg).is_err())
    };
    assert_eq!(run(&good), (0, false));
    let mut next = xorshift(77);
    let body = (PAGE_BYTES - PAGE_CRC_BYTES) as usize;
    for _ in 0..60 {
        let at = 1024 + (next() as usize % (good.len() - 1024));
        let mut bad = good.clone();
        bad[at] ^= 1 << (next() % 8);
        // a flipped bit: the page's CRC refuses it
        let (_, verify_failed) = run(&bad);
        assert!(verify_failed, "byte {at}");
        let page = at / 1024 * 1024;
        if at - page < body {
            // the same page with its CRC made to match: answers may be wrong, but a lookup
            // returns (an error or ordinals) and verify finds the difference
            let crc = crc32fast::hash(&bad[page..page + body]);
            bad[page + body..page + 1024].copy_from_slice(&crc.to_le_bytes());
            let (_, verify_failed) = run(&bad);
            assert!(verify_failed, "forged byte {at}");
        }
    }
    // a bit flipped in every page of band 0: each lookup there reads a damaged page (its
    // block's directory page and entry page) and fails; band 1's all answer
    let g = head.geometry();
    let mut bad = good.clone();
    for p in 0..g.band_pages() {
        bad[(g.band_offset(0) + p * PAGE_BYTES) as usize + 7] ^= 0x10;
    }
    let (failed, _) = run(&bad);
    assert_eq!(failed, keys.iter().filter(|k| k.0 == 0).count());
}

#[test]
fn the_golden_files_of_every_version_open_verify_and_find_every_band() {
    // generation 5's band file is version 1, generation 7's version 2, generation 8's
    // version 3, generation 9's version 4
    for (generation, version) in [(5, 1u32), (7, 2), (8, 3), (9, 4)] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/v{generation}/index-sketched"));
        let storage = MemStorage::default();
        let (seg_path, bands_path) = (Path::new("f/seg.sdx"), Path::new("f/seg.sdb"));
        storage.put(seg_path, &std::fs::read(dir.join("seg-000000000004.sdx")).expect("fixture segment"));
        let golden = std::fs::read(dir.join("seg-000000000004.sdb")).expect("fixture band file");
        assert!(golden.starts_with(&[b"SIMDXBND".as_slice(), &version.to_le_bytes()].concat()), "generation {generation}'s is version {version}");
        storage.put(bands_path, &golden);
        let seg = Segment::open_with(&storage, seg_path).expect("segment");
        let file = BandFile::open(&storage, bands_path, &seg).expect("open");
        assert_eq!(file.version(), version);
        file.verify(&seg).expect("verify");
        let head = if version == 1 { head_for(&seg, 2).unwrap().unwrap().as_version_1() } else { head_for(&seg, version).unwrap().unwrap() };
        let by_value = oracle(&seg, &head);
        let mut banded = 0;
        for o in 0..seg.len() {
            let sketch = seg.sketch(o).expect("sketch").to_vec();
            if is_empty_sketch(&sketch) {
                continue;
            }
            banded += 1;
            for b in 0..file.design().bands {
                check_lookup(&file, &head, &by_value, b, band_key(&sketch, b).expect("band"));
            }
        }
        assert!(banded > 10, "{banded} sketches");
    }
}

#[test]
fn the_worked_example_of_the_spec_is_these_bytes() {
    // format-spec/bands.md, "Worked example": band 0 values 0x41, 0x05, 0x45 at ordinals 0, 1, 2
    let storage = MemStorage::default();
    let rows = [0x41u32, 0x05, 0x45]
        .iter()
        .zip(1u64..)
        .map(|(&v, fp)| {
            let mut sketch = [0u8; 64];
            for c in sketch.chunks_mut(4) {
                c.copy_from_slice(&v.to_le_bytes());
            }
            (fp, fp, sketch)
        })
        .collect();
    let (seg, _) = segment_of(&storage, Path::new("w/seg.sdx"), rows);
    let [_, h2, h3, h4] = heads(&seg);
    for (head, entries) in [(h4, &[0x95u8, 0x50, 0x0a, 0x00][..]), (h3, &[0x95u8, 0xa0, 0x28, 0x00][..]), (h2, &[0x04, 0x15, 0x16, 0x00][..])] {
        let mut out = Vec::new();
        emit(&seg, &head, BuildBudget::default(), None, &mut out).map_err(|_| "emit").expect("emit");
        assert_eq!(out.len(), 1024 + 16 * 2 * 1024, "version {}", head.version);
        assert_eq!(&out[1024..1028], entries, "version {}: the entry page", head.version);
        assert!(out[1028..2044].iter().all(|&b| b == 0));
        assert_eq!(&out[2048..2054], &[0, 0, 0, 0, 3, 0], "version {}: the directory page", head.version);
        assert_eq!((head.ordinal_bits, head.dir_bits, head.geometry().high_bits), (2, 2, if head.version >= 3 { 2 } else { 0 }));
    }
}

/// A temporary directory of this process for mapped files, made empty.
fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("simdex-bands-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The oracle's answer to a lookup of every band of `sketch`: band after band, the
/// entries of the band's bucket with its tag.
fn oracle_all(oracle: &Oracle, head: &BandHead, sketch: &[u8]) -> Vec<u32> {
    let none = Vec::new();
    (0..head.design.bands).flat_map(|b| {
        let key = band_key(sketch, b).unwrap();
        oracle.by_bucket.get(&(b, head.design.bucket(key), tag(key, head.tag_bits))).unwrap_or(&none).clone()
    })
    .collect()
}

/// `bytes` as band file `name` of `seg` (on disk, in `dir`), opened mapped (its directory
/// pages copied into memory) and from memory (no copy).
fn mapped_and_in_memory(dir: &Path, seg: &Segment, bytes: &[u8], name: &str) -> (BandFile, BandFile) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let mapped = BandFile::open(&FsStorage, &path, seg).expect("open mapped");
    let memory = MemStorage::default();
    memory.put(&path, bytes);
    (mapped, BandFile::open(&memory, &path, seg).expect("open in memory"))
}

#[test]
fn mapped_files_keep_their_directories_and_cold_lookups_answer_as_the_oracle() {
    // Every version (a segment of one directory page a band), and version 4 of several: the mapped
    // file reads its directories from memory; its lookups of all bands, warm and cold (the
    // entry pages, and then the candidates' sketch, id and table 0 pages asked for first),
    // answer as the oracle and as the file read from memory.
    let dir = temp_dir("resident");
    for (n, seed) in [(3000u64, 6u64), (70_000, 7)] {
        let (seg, stored) = segment_of(&FsStorage, &dir.join(format!("seg-{n}.sdx")), shaped_rows(n, seed));
        for head in heads(&seg).into_iter().filter(|h| n < 10_000 || h.version == BANDS_VERSION) {
            let mut bytes = Vec::new();
            emit(&seg, &head, BuildBudget::default(), None, &mut bytes).map_err(|_| "emit").expect("emit");
            let (mapped, memory) = mapped_and_in_memory(&dir, &seg, &bytes, &format!("v{}-{n}.sdb", head.version));
            let g = head.geometry();
            assert_eq!((mapped.resident_bytes() as u64, memory.resident_bytes()), (16 * g.dir_pages * PAGE_BYTES, 0), "version {}", head.version);
            mapped.verify(&seg).expect("verify");
            let by_value = oracle(&seg, &head);
            let step = (stored.len() / 150).max(1);
            let mut sketches: Vec<[u8; 64]> = stored.iter().step_by(step).map(|r| r.1).collect();
            sketches.push([0xa5; 64]);
            for sketch in &sketches {
                let want = oracle_all(&by_value, &head, sketch);
                for cold in [false, true] {
                    mapped.set_cold(cold);
                    let mut found = Vec::new();
                    let asked = mapped.ask_ahead(sketch);
                    assert_eq!(asked, cold);
                    mapped.lookup_all(sketch, asked, &mut found).expect("lookup");
                    assert_eq!(found, want, "version {} cold {cold}", head.version);
                    // what the check then reads, asked for first: the same values
                    found.sort_unstable();
                    found.dedup();
                    seg.will_need_sketches(&found);
                    seg.will_need_entries(found.iter().map(|&o| u64::from(o)));
                    for &o in &found {
                        let o = u64::from(o);
                        assert_eq!((seg.sketch(o).unwrap(), seg.doc_id(o).unwrap()), (&stored[o as usize].1[..], stored[o as usize].0));
                    }
                }
                let mut found = Vec::new();
                assert!(!memory.ask_ahead(sketch));
                memory.lookup_all(sketch, false, &mut found).expect("lookup");
                assert_eq!(found, want, "version {} in memory", head.version);
            }
        }
        // table 0's fingerprints, asked for in one go, are table 0's entries
        let all: Vec<u64> = (0..seg.len()).step_by(7).collect();
        seg.will_need_entries(all.iter().copied());
        let table0: Vec<u64> = seg.entries().map(|e| e.unwrap().0).collect();
        for &o in &all {
            assert_eq!(seg.fingerprint_at(o).unwrap(), table0[o as usize], "ordinal {o}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_page_fails_the_same_lookups_with_the_directories_in_memory() {
    // A flipped bit in a directory page (kept in memory) or an entry page: the mapped
    // file's lookups of all bands, warm and cold, fail exactly where the file read from
    // memory fails (the caller then answers from the tables), and answer the same elsewhere.
    let dir = temp_dir("damaged");
    let (seg, stored) = segment_of(&FsStorage, &dir.join("seg.sdx"), shaped_rows(3000, 9));
    let head = head_for(&seg, BANDS_VERSION).expect("read").expect("banded");
    let mut good = Vec::new();
    emit(&seg, &head, BuildBudget::default(), None, &mut good).map_err(|_| "emit").expect("emit");
    let g = head.geometry();
    let damage = [g.dir_page(0, 0) + 5, g.dir_page(15, g.dir_pages - 1) + 3, g.entry_page(3, 0) + 100, g.entry_page(9, g.entry_pages - 1) + 1];
    for (i, at) in damage.into_iter().enumerate() {
        let mut bad = good.clone();
        bad[at as usize] ^= 0x04;
        let (mapped, memory) = mapped_and_in_memory(&dir, &seg, &bad, &format!("bad-{i}.sdb"));
        let mut failed = 0;
        for &(_, sketch) in stored.iter().step_by(3) {
            let (mut want, mut found) = (Vec::new(), Vec::new());
            let expected = memory.lookup_all(&sketch, false, &mut want).map(|()| want);
            for cold in [false, true] {
                mapped.set_cold(cold);
                found.clear();
                let asked = mapped.ask_ahead(&sketch);
                let got = mapped.lookup_all(&sketch, asked, &mut found).map(|()| found.clone());
                assert_eq!(got.as_ref().ok(), expected.as_ref().ok(), "damage {i} cold {cold}");
                failed += usize::from(got.is_err());
            }
        }
        assert!(failed > 0, "damage {i}: some lookup reads the damaged page");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
