//! `salvage` (`simdex recover`) uses the redundancy and reports loss, never silently: the
//! intact records after a damaged log header, what a cut log tail may have held, a missing
//! newest log, a damaged block rebuilt from sibling tables, fingerprints kept when their id
//! page is damaged.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use simdex::inspect::salvage;
use simdex::storage::{MemStorage, Storage};
use simdex::{Index, IndexOptions};

use crate::engine::mem_options;

/// An index in `/idx` whose every write is still in its one log: 40 records of 5 inserts.
fn logged_index() -> (MemStorage, PathBuf, BTreeSet<(u64, u64)>) {
    let storage = MemStorage::default();
    // close leaves the memtable in the log (the default would flush it into a segment)
    let index = Index::open("/idx", IndexOptions { flush_on_close: false, ..mem_options(&storage, 1 << 20) }).unwrap();
    let mut all = BTreeSet::new();
    for r in 0..40u64 {
        let batch: Vec<(u64, u64)> = (0..5).map(|i| ((r * 5 + i).wrapping_mul(0x9e37_79b9_7f4a_7c15), r * 5 + i)).collect();
        index.insert_batch(&batch).unwrap();
        all.extend(batch);
    }
    index.close().unwrap();
    let log = storage.list(Path::new("/idx")).unwrap().into_iter().find(|n| n.starts_with("log-")).expect("a log");
    (storage, Path::new("/idx").join(log), all)
}

#[test]
fn a_damaged_log_header_loses_no_record() {
    for byte in [0usize, 8, 16, 24, 28] {
        let (storage, log, all) = logged_index();
        let mut bytes = storage.file(&log).unwrap();
        bytes[byte] ^= 0x10;
        storage.put(&log, &bytes);
        assert!(Index::open("/idx", mem_options(&storage, 1 << 20)).is_err(), "byte {byte}: the engine itself never skips damage");
        let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
        assert_eq!((report.log_ops, report.log_ops_lost, report.log_ops_possibly_lost), (200, 0, 0), "byte {byte}: {report:?}");
        assert!(report.lost.iter().any(|(f, d)| f.starts_with("log-") && d.contains("file header")), "byte {byte}: the damage is named: {:?}", report.lost);
        let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
        assert_eq!(out.live_entries().unwrap().into_iter().collect::<BTreeSet<_>>(), all, "byte {byte}");
    }
}

#[test]
fn a_cut_log_reports_the_cut_record_as_possibly_acknowledged() {
    let (storage, log, all) = logged_index();
    let bytes = storage.file(&log).unwrap();
    // Each record: 24 header bytes, 5 x 16 payload bytes, 4 end bytes = 108 bytes after a
    // 32-byte file header. Cut the last record in its payload.
    let cut = bytes.len() - 50;
    storage.put(&log, &bytes[..cut]);
    let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!(report.log_ops, 195, "{report:?}");
    assert_eq!(report.log_ops_possibly_lost, 5, "the cut record's header counts its operations: {report:?}");
    assert_eq!(report.log_tail_bytes_lost, (cut - 32 - 39 * 108) as u64);
    let (_, detail) = report.lost.iter().find(|(f, _)| f.starts_with("log-")).expect("the cut is reported");
    assert!(detail.contains("possibly acknowledged") && detail.contains("sequence numbers 196..=200"), "{detail}");
    let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!(out.live_entries().unwrap().len(), all.len() - 5);
}

#[test]
fn a_missing_newest_log_is_reported_on_open_and_by_verify() {
    let storage = MemStorage::default();
    // 100 inserts flushed, 50 left in the newest log by a close that does not flush
    let index = Index::open("/idx", IndexOptions { flush_on_close: false, ..mem_options(&storage, 100) }).unwrap();
    for i in 0..150u64 {
        index.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i).unwrap();
    }
    index.close().unwrap();
    let dir = Path::new("/idx");
    let verify = |s: &MemStorage| simdex::inspect::verify_index(s, dir).unwrap();
    assert!(verify(&storage).is_clean());
    assert!(Index::open_read_only(dir, mem_options(&storage, 100)).unwrap().open_report().lost.is_empty());
    for log in storage.list(dir).unwrap().into_iter().filter(|n| n.starts_with("log-")) {
        storage.remove(&dir.join(log)).unwrap();
    }
    let report = verify(&storage);
    assert!(!report.is_clean(), "verify reports the missing log");
    assert!(report.problems.iter().any(|p| p.detail.contains("writes after sequence number 100 may be lost")), "{:?}", report.problems);
    let reader = Index::open_read_only(dir, mem_options(&storage, 100)).unwrap();
    assert_eq!(reader.open_report().lost.len(), 1, "the open reports it too: {:?}", reader.open_report());
    assert_eq!(reader.live_entries().unwrap().len(), 100, "and goes on with what is there");
}

/// An index in `/idx` with one flushed segment of `n` pairs, and that segment's path.
fn flushed_index(n: u64) -> (MemStorage, PathBuf, BTreeSet<(u64, u64)>) {
    let storage = MemStorage::default();
    let index = Index::open("/idx", mem_options(&storage, 1 << 20)).unwrap();
    let pairs: Vec<(u64, u64)> = (0..n).map(|i| ((i % (n - 7)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 3), i)).collect();
    index.insert_batch(&pairs).unwrap();
    index.flush().unwrap();
    index.close().unwrap();
    let seg = storage.list(Path::new("/idx")).unwrap().into_iter().find(|n| n.starts_with("seg-")).expect("a segment");
    (storage, Path::new("/idx").join(seg), pairs.into_iter().collect())
}

#[test]
fn a_damaged_block_of_any_table_loses_no_fingerprint() {
    let (clean, seg, all) = flushed_index(20_000);
    let segment = simdex::Segment::open_with(&clean, &seg).unwrap();
    assert!(segment.tables().len() >= 2, "siblings to rebuild from");
    let mut cases = 0;
    for (t, table) in segment.tables().iter().enumerate() {
        let last = table.block_count() - 1;
        for b in [0, last / 2, last] {
            let storage = MemStorage::default();
            for name in clean.list(Path::new("/idx")).unwrap() {
                let path = Path::new("/idx").join(name);
                storage.put(&path, &clean.file(&path).unwrap());
            }
            let mut bytes = storage.file(&seg).unwrap();
            bytes[(table.block_offset(b) + 17) as usize] ^= 0x40;
            storage.put(&seg, &bytes);
            let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
            assert_eq!(report.segment_entries_lost, 0, "table {t} block {b}: {:?}", report.lost);
            let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
            assert_eq!(out.live_entries().unwrap().into_iter().collect::<BTreeSet<_>>(), all, "table {t} block {b}: every pair, ids included");
            cases += 1;
        }
    }
    assert!(cases >= 6);
}

#[test]
fn a_damaged_id_page_keeps_the_fingerprints_and_names_each_lost_id() {
    let (storage, seg, all) = flushed_index(5_000);
    let mut bytes = storage.file(&seg).unwrap();
    // Footer (last 32 bytes): the directory's offset; the directory's id entry (after 24
    // bytes of head and 40 per table) starts with the id column's offset (format-spec).
    let footer = bytes.len() - 32;
    let dir = u64::from_le_bytes(bytes[footer..footer + 8].try_into().unwrap()) as usize;
    let tables = u16::from_le_bytes(bytes[dir + 16..dir + 18].try_into().unwrap()) as usize;
    let ids_at = dir + 24 + 40 * tables;
    let ids_offset = u64::from_le_bytes(bytes[ids_at..ids_at + 8].try_into().unwrap()) as usize;
    // Page 3 holds the ids of entries 384..512.
    bytes[ids_offset + 3 * 1024 + 5] ^= 1;
    storage.put(&seg, &bytes);
    let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!(report.segment_entries_lost, 0, "{:?}", report.lost);
    let unknown: Vec<_> = report.lost.iter().filter(|(_, d)| d.contains("document id is unreadable")).collect();
    assert_eq!(unknown.len(), 128, "each entry of the page is named");
    let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
    let live = out.live_entries().unwrap();
    let fingerprints = |pairs: &mut dyn Iterator<Item = (u64, u64)>| pairs.map(|p| p.0).collect::<BTreeSet<u64>>();
    assert_eq!(fingerprints(&mut live.iter().copied()), fingerprints(&mut all.iter().copied()), "every fingerprint kept");
    // Pairs whose id survived are exact; the page's 128 entries are kept under the unknown
    // id (entries with equal fingerprints then coincide).
    let unknown = live.iter().filter(|p| p.1 == simdex::inspect::UNKNOWN_DOC_ID).count();
    assert!((100..=128).contains(&unknown), "{unknown}");
    assert_eq!(live.iter().filter(|p| p.1 != simdex::inspect::UNKNOWN_DOC_ID).count(), all.len() - 128);
    assert!(live.iter().filter(|p| p.1 != simdex::inspect::UNKNOWN_DOC_ID).all(|p| all.contains(p)));
}

#[test]
fn the_pinned_recipe_is_verified_and_salvaged() {
    use simdex::fingerprint::document::DocumentKind;
    let storage = MemStorage::default();
    let index = Index::open("/idx", mem_options(&storage, 1 << 20)).unwrap();
    let doc = simdex::DocumentInput { bytes: b"the cat sat on the mat and looked at the dog", kind: DocumentKind::Text };
    index.insert_document(doc, 7).unwrap();
    let pinned = index.recipe().expect("the first document pins the recipe");
    index.close().unwrap();
    let dir = Path::new("/idx");
    let report = simdex::inspect::verify_index(&storage, dir).unwrap();
    assert!(report.is_clean() && report.unknown.is_empty(), "{report:?}");
    assert!(report.checked.iter().any(|(f, _)| f == "RECIPE"), "RECIPE is checked: {:?}", report.checked);
    let report = salvage(&storage, dir, Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
    assert!(report.recovered.iter().any(|(f, _)| f == "RECIPE"), "{report:?}");
    assert_eq!(Index::open("/out", mem_options(&storage, 1 << 20)).unwrap().recipe(), Some(pinned));
    // A damaged recipe is a problem verify names.
    let path = dir.join("RECIPE");
    let mut bytes = storage.file(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    storage.put(&path, &bytes);
    let report = simdex::inspect::verify_index(&storage, dir).unwrap();
    assert!(report.problems.iter().any(|p| p.file == "RECIPE"), "{report:?}");
}
