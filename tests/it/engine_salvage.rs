//! `salvage` (`simdex recover`) uses the redundancy and reports loss, never silently: the
//! intact records after a damaged log header, what a cut log tail may have held, a missing
//! newest log, a damaged block rebuilt from sibling tables, fingerprints kept when their id
//! page is damaged.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use simdex::recovery::salvage;
use simdex::storage::{MemStorage, Storage};
use simdex::Index;

use crate::engine::mem_options;

/// An index in `/idx` whose every write is still in its one log: 40 records of 5 inserts,
/// closed cleanly (the manifest records the log's length).
fn logged_index() -> (MemStorage, PathBuf, BTreeSet<(u64, u64)>) {
    let (closed, _, log, all) = logged_index_and_crash_image();
    (closed, log, all)
}

/// [`logged_index`], and a copy of its files as a crash just before the close left them
/// (the manifest has no record of the log).
fn logged_index_and_crash_image() -> (MemStorage, MemStorage, PathBuf, BTreeSet<(u64, u64)>) {
    let storage = MemStorage::default();
    // close leaves the memtable in the log (the default would flush it into a segment)
    let index = Index::open("/idx", (mem_options(&storage, 1 << 20)).with_flush_on_close(false)).unwrap();
    let mut all = BTreeSet::new();
    for r in 0..40u64 {
        let batch: Vec<(u64, u64)> = (0..5).map(|i| ((r * 5 + i).wrapping_mul(0x9e37_79b9_7f4a_7c15), r * 5 + i)).collect();
        index.insert_many(&batch.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
        all.extend(batch);
    }
    let crashed = copy_of(&storage);
    index.close().unwrap();
    let log = storage.list(Path::new("/idx")).unwrap().into_iter().find(|n| n.starts_with("log-")).expect("a log");
    (storage, crashed, Path::new("/idx").join(log), all)
}

/// A copy of every file in `/idx`.
fn copy_of(storage: &MemStorage) -> MemStorage {
    let copy = MemStorage::default();
    for name in storage.list(Path::new("/idx")).unwrap() {
        let p = Path::new("/idx").join(&name);
        copy.put(&p, &storage.file(&p).unwrap());
    }
    copy
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
        assert_eq!(out.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect::<BTreeSet<_>>(), all, "byte {byte}");
    }
}

#[test]
fn a_cut_log_reports_the_cut_record_exactly_when_sealed_and_as_possibly_acknowledged_after_a_crash() {
    let (sealed, crashed, log, all) = logged_index_and_crash_image();
    for (storage, was_sealed) in [(sealed, true), (crashed, false)] {
        let bytes = storage.file(&log).unwrap();
        // Each record: 24 header bytes, 5 x 16 payload bytes, 4 end bytes = 108 bytes after a
        // 32-byte file header. Cut the last record in its payload.
        let cut = bytes.len() - 50;
        storage.put(&log, &bytes[..cut]);
        let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
        assert_eq!(report.log_ops, 195, "{report:?}");
        assert_eq!(report.log_tail_bytes_lost, (cut - 32 - 39 * 108) as u64);
        let details: Vec<&String> = report.lost.iter().filter(|(f, _)| f.starts_with("log-")).map(|(_, d)| d).collect();
        if was_sealed {
            // The manifest recorded the log whole: the 5 operations are lost, exactly.
            assert_eq!((report.log_ops_lost, report.log_ops_possibly_lost), (5, 0), "{report:?}");
            assert!(details.iter().any(|d| d.contains("5 acknowledged operations (sequence numbers 196..=200) are lost")), "{details:?}");
        } else {
            // After a crash the cut record may never have been acknowledged: its header counts it.
            assert_eq!((report.log_ops_lost, report.log_ops_possibly_lost), (0, 5), "{report:?}");
            assert!(details.iter().any(|d| d.contains("possibly acknowledged") && d.contains("sequence numbers 196..=200")), "{details:?}");
        }
        let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
        assert_eq!(out.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().len(), all.len() - 5);
    }
}

#[test]
fn a_missing_newest_log_is_reported_on_open_and_by_verify() {
    let storage = MemStorage::default();
    // 100 inserts flushed, 50 left in the newest log by a close that does not flush
    let index = Index::open("/idx", mem_options(&storage, 100).with_flush_on_close(false)).unwrap();
    for i in 0..150u64 {
        index.insert(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), i).unwrap();
    }
    // what a crash before the close leaves: the manifest has no record of the newest log
    let crashed = MemStorage::default();
    for name in storage.list(Path::new("/idx")).unwrap() {
        let p = Path::new("/idx").join(&name);
        crashed.put(&p, &storage.file(&p).unwrap());
    }
    index.close().unwrap();
    let dir = Path::new("/idx");
    let verify = |s: &MemStorage| simdex::recovery::verify_index(s, dir).unwrap();
    assert!(verify(&storage).is_clean());
    assert!(Index::open_read_only(dir, mem_options(&storage, 100)).unwrap().open_report().lost.is_empty());
    let remove_logs = |s: &MemStorage| {
        for log in s.list(dir).unwrap().into_iter().filter(|n| n.starts_with("log-")) {
            s.remove(&dir.join(log)).unwrap();
        }
    };
    // Closed cleanly, the manifest recorded the log: its loss is counted exactly.
    remove_logs(&storage);
    let report = verify(&storage);
    assert!(!report.is_clean(), "verify reports the missing log");
    assert!(
        report.problems.iter().any(|p| p.detail.contains("missing") && p.detail.contains("50 acknowledged operations (sequence numbers 101..=150) are lost")),
        "{:?}",
        report.problems
    );
    let e = Index::open_read_only(dir, mem_options(&storage, 100)).unwrap_err();
    assert!(e.is_corruption() && e.to_string().contains("50 acknowledged operations in all"), "{e}");
    let reader = Index::open_read_only(dir, mem_options(&storage, 100).with_log_recovery(simdex::LogRecovery::PointInTime)).unwrap();
    assert_eq!((reader.open_report().lost.len(), reader.open_report().lost_ops), (1, 50), "{:?}", reader.open_report());
    assert_eq!(reader.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().len(), 100, "and goes on with what is there");
    // After a crash, only the manifest's log number says a log existed: how much it held
    // cannot be known, and both report that.
    remove_logs(&crashed);
    let report = verify(&crashed);
    assert!(report.problems.iter().any(|p| p.detail.contains("writes after sequence number 100 may be lost")), "{:?}", report.problems);
    let reader = Index::open_read_only(dir, mem_options(&crashed, 100)).unwrap();
    assert_eq!(reader.open_report().lost.len(), 1, "the open reports it too: {:?}", reader.open_report());
    assert_eq!(reader.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().len(), 100, "and goes on with what is there");
}

/// An index in `/idx` with one flushed segment of `n` pairs, and that segment's path.
fn flushed_index(n: u64) -> (MemStorage, PathBuf, BTreeSet<(u64, u64)>) {
    let storage = MemStorage::default();
    let index = Index::open("/idx", mem_options(&storage, 1 << 20)).unwrap();
    let pairs: Vec<(u64, u64)> = (0..n).map(|i| ((i % (n - 7)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 3), i)).collect();
    index.insert_many(&pairs.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.flush().unwrap();
    index.close().unwrap();
    let seg = storage.list(Path::new("/idx")).unwrap().into_iter().find(|n| n.starts_with("seg-") && n.ends_with(".sdx")).expect("a segment");
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
            assert_eq!(
                out.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect::<BTreeSet<_>>(),
                all,
                "table {t} block {b}: every pair, ids included"
            );
            cases += 1;
        }
    }
    assert!(cases >= 6);
}

#[test]
fn a_damaged_id_page_keeps_the_fingerprints_and_names_the_page_once() {
    let (storage, seg, all) = flushed_index(5_000);
    let mut bytes = storage.file(&seg).unwrap();
    // Page 3 of the id column (after its 1024-byte head) holds the ids of entries 381..508.
    let ids_head = SegmentMap::of(&bytes).ids_head;
    bytes[ids_head + 1024 + 3 * 1024 + 5] ^= 1;
    storage.put(&seg, &bytes);
    let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!(report.segment_entries_lost, 0, "{:?}", report.lost);
    let unknown: Vec<_> = report.lost.iter().filter(|(_, d)| d.contains("their id page")).collect();
    assert_eq!(unknown.len(), 1, "one line names the damaged page: {:?}", report.lost);
    assert!(unknown[0].1.contains("the document ids of 127 entries (381..=507)"), "{:?}", unknown[0]);
    assert_eq!(report.doc_ids_lost, 127, "and counted");
    let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
    let live = out.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>();
    let fingerprints = |pairs: &mut dyn Iterator<Item = (u64, u64)>| pairs.map(|p| p.0).collect::<BTreeSet<u64>>();
    assert_eq!(fingerprints(&mut live.iter().copied()), fingerprints(&mut all.iter().copied()), "every fingerprint kept");
    // Pairs whose id survived are exact; the page's 127 entries are kept under the unknown
    // id (entries with equal fingerprints then coincide: counted as merged).
    let unknown = live.iter().filter(|p| p.1 == simdex::recovery::UNKNOWN_DOC_ID).count();
    assert!((100..=127).contains(&unknown), "{unknown}");
    assert_eq!(report.merged, 127 - unknown as u64, "{report:?}");
    assert_eq!(live.iter().filter(|p| p.1 != simdex::recovery::UNKNOWN_DOC_ID).count(), all.len() - 127);
    assert!(live.iter().filter(|p| p.1 != simdex::recovery::UNKNOWN_DOC_ID).all(|p| all.contains(p)));
}

/// Issue 45's accounting, against an oracle: what went in is counted, an id page damaged,
/// and the report adds up to it exactly: every entry read is live, deleted, a copy or
/// merged (its id lost, its fingerprint shared with another entry whose id was lost), and
/// the page is one line, not one per entry.
#[test]
fn recover_accounts_for_every_entry_when_an_id_page_is_lost() {
    let storage = MemStorage::default();
    let index = Index::open("/idx", mem_options(&storage, 1 << 20)).unwrap();
    // The same page stored under 4 URLs: 4 ids a fingerprint (their entries neighbours in
    // fingerprint order), so that ids lost in one page merge.
    let pairs: Vec<(u64, u64)> = (0..1000u64).map(|i| ((i / 4).wrapping_mul(0x9e37_79b9_7f4a_7c15), 1_000 + i)).collect();
    index.insert_many(&pairs.iter().map(|&p| simdex::Entry::from(p)).collect::<Vec<_>>()).unwrap();
    index.flush().unwrap();
    index.close().unwrap();
    let seg = Path::new("/idx").join(storage.list(Path::new("/idx")).unwrap().into_iter().find(|n| n.starts_with("seg-") && n.ends_with(".sdx")).unwrap());
    let mut bytes = storage.file(&seg).unwrap();
    // Id page 2 holds the ids of entries 254..381 (127 a page) in fingerprint order.
    let ids_head = SegmentMap::of(&bytes).ids_head;
    bytes[ids_head + 1024 + 2 * 1024 + 100] ^= 0x04;
    storage.put(&seg, &bytes);

    // The oracle: the entries in table 0's order; those of the page lose their ids, and
    // the same fingerprint under the unknown id is one pair.
    let mut sorted = pairs.clone();
    sorted.sort_unstable();
    let page: Vec<(u64, u64)> = sorted[254..381].to_vec();
    let page_fps: BTreeSet<u64> = page.iter().map(|p| p.0).collect();
    let mut want: BTreeSet<(u64, u64)> = sorted.iter().copied().filter(|p| !page.contains(p)).collect();
    want.extend(page_fps.iter().map(|&fp| (fp, simdex::recovery::UNKNOWN_DOC_ID)));

    let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!((report.segment_entries, report.log_inserts, report.segment_entries_lost), (1000, 0, 0), "{report:?}");
    assert_eq!(report.doc_ids_lost, 127, "{report:?}");
    assert_eq!(report.merged, 127 - page_fps.len() as u64, "{report:?}");
    assert_eq!((report.pairs_deleted, report.copies), (0, 0), "{report:?}");
    assert_eq!(report.live_pairs, want.len() as u64, "{report:?}");
    assert_eq!(report.segment_entries + report.log_inserts, report.live_pairs + report.pairs_deleted + report.copies + report.merged, "the summary adds up: {report:?}");
    let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
    let live: BTreeSet<(u64, u64)> = out.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect();
    assert_eq!(live, want, "exactly the oracle's pairs");
    // One line for the page, one for the merge: not one per entry.
    assert_eq!(report.lost.len(), 2, "{:?}", report.lost);
    assert!(report.lost.iter().all(|(_, d)| d.len() < 300), "{:?}", report.lost);
    assert!(report.lost.iter().any(|(f, d)| f.starts_with("seg-") && d.contains("the document ids of 127 entries (254..=380)")), "{:?}", report.lost);
    assert!(report.lost.iter().any(|(_, d)| d.contains(&format!("{} entries merged", report.merged))), "{:?}", report.lost);
}

#[test]
fn deletes_that_recover_cannot_apply_are_counted_never_silently_undone() {
    // 5000 pairs in a segment, then 15 of them deleted and flushed into a tombstone file:
    // 10 whose ids are on id page 3 (entries 381..508 in fingerprint order), 5 elsewhere.
    let (storage, seg, all) = flushed_index(5_000);
    let mut sorted: Vec<(u64, u64)> = all.iter().copied().collect();
    sorted.sort_unstable();
    let deleted: Vec<(u64, u64)> = sorted[381..391].iter().chain(&sorted[1000..1005]).copied().collect();
    let index = Index::open("/idx", mem_options(&storage, 1 << 20)).unwrap();
    for &(fp, id) in &deleted {
        index.delete(fp, id).unwrap();
    }
    index.flush().unwrap();
    index.close().unwrap();
    let clean = salvage(&storage, Path::new("/idx"), Path::new("/clean"), mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!((clean.deletes_possibly_undone, clean.live_pairs), (0, all.len() as u64 - 15));
    // The id page lost: its 10 deleted pairs' fingerprints are kept with an unknown id.
    let mut bytes = storage.file(&seg).unwrap();
    let ids_head = SegmentMap::of(&bytes).ids_head;
    bytes[ids_head + 1024 + 3 * 1024 + 5] ^= 1;
    let damaged = copy_of(&storage);
    damaged.put(&seg, &bytes);
    let report = salvage(&damaged, Path::new("/idx"), Path::new("/out"), mem_options(&damaged, 1 << 20)).unwrap();
    assert_eq!(report.deletes_possibly_undone, 10, "{:?}", report.lost);
    assert!(report.lost.iter().any(|(_, d)| d.contains("10 fingerprints kept with an unknown id")), "{:?}", report.lost);
    // The tombstone file lost: all 15 deletes, named.
    let tomb = storage.list(Path::new("/idx")).unwrap().into_iter().find(|n| n.starts_with("tomb-")).expect("a tombstone file");
    let tomb = Path::new("/idx").join(tomb);
    let damaged = copy_of(&storage);
    let mut t = storage.file(&tomb).unwrap();
    let last = t.len() - 1;
    t[last] ^= 0x40;
    damaged.put(&tomb, &t);
    let report = salvage(&damaged, Path::new("/idx"), Path::new("/out2"), mem_options(&damaged, 1 << 20)).unwrap();
    assert_eq!(report.deletes_possibly_undone, 15, "{:?}", report.lost);
    assert!(report.lost.iter().any(|(f, d)| f.starts_with("tomb-") && d.contains("15 tombstones at byte offset")), "{:?}", report.lost);
}

/// The document ids the report's lines say are lost: "the document ids of [all] N entries"
/// (one line per damaged id page, or the whole column).
fn ids_named(lost: &[(String, String)]) -> usize {
    let count = |d: &str| d.split("document ids of ").nth(1)?.trim_start_matches("all ").split(' ').next()?.parse::<usize>().ok();
    lost.iter().filter_map(|(_, d)| count(d)).sum()
}

/// Where a version-2 segment's structures are, read from its footer and directory
/// (`format-spec/segment.md`), to damage them on purpose.
struct SegmentMap {
    dir: usize,
    tables: usize,
    ids_head: usize,
}

impl SegmentMap {
    fn of(bytes: &[u8]) -> Self {
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        let footer = bytes.len() - 32;
        let dir = u64_at(footer);
        let tables = u16::from_le_bytes(bytes[dir + 16..dir + 18].try_into().unwrap()) as usize;
        Self { dir, tables, ids_head: u64_at(dir + 24 + 40 * tables) }
    }
}

/// A copy of `clean`'s `/idx` with `damage` applied to the segment `seg`.
fn damaged_copy(clean: &MemStorage, seg: &Path, damage: impl FnOnce(&mut Vec<u8>)) -> MemStorage {
    let storage = MemStorage::default();
    for name in clean.list(Path::new("/idx")).unwrap() {
        let path = Path::new("/idx").join(name);
        storage.put(&path, &clean.file(&path).unwrap());
    }
    let mut bytes = storage.file(seg).unwrap();
    damage(&mut bytes);
    storage.put(seg, &bytes);
    storage
}

#[test]
fn damaged_segment_metadata_loses_no_fingerprint_and_no_id() {
    let (clean, seg, all) = flushed_index(20_000);
    let segment = simdex::Segment::open_with(&clean, &seg).unwrap();
    let bytes = clean.file(&seg).unwrap();
    let map = SegmentMap::of(&bytes);
    let t = |i: usize| &segment.tables()[i];
    let trailer = |i: usize| {
        let end = t(i).index_offset() + t(i).block_count() * 14;
        ((end + 64).div_ceil(1024) * 1024 - 64) as usize
    };
    assert!(map.tables >= 3);
    let cases: Vec<(&str, usize)> = vec![
        ("header magic", 2),
        ("header design", 40),
        ("directory entry count", map.dir + 9),
        ("directory table 1 offsets", map.dir + 24 + 40 + 3),
        ("directory id column offset", map.dir + 24 + 40 * map.tables + 1),
        ("footer directory offset", bytes.len() - 31),
        ("footer magic", bytes.len() - 2),
        ("table 0 head", t(0).head_offset() as usize + 30),
        ("table 1 block index", t(1).index_offset() as usize + 3),
        ("table 2 trailer", trailer(2) + 20),
        ("id column head", map.ids_head + 17),
    ];
    for (what, at) in cases {
        let storage = damaged_copy(&clean, &seg, |b| b[at] ^= 0x08);
        // Opening detects damage to what it reads; a block-index chunk is checked when
        // first used (and by verify).
        let detected = simdex::Segment::open_with(&storage, &seg).is_err()
            || !simdex::recovery::verify_segment::verify_segment_bytes(&seg, simdex::storage::FileBytes::from_vec(storage.file(&seg).unwrap())).unwrap().is_clean();
        assert!(detected, "{what}: the damage is detected");
        let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
        assert_eq!(report.segment_entries_lost, 0, "{what}: {:?}", report.lost);
        assert!(report.lost.is_empty(), "{what}: {:?}", report.lost);
        assert!(!report.bypassed.is_empty(), "{what}: the damage is named");
        let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
        assert_eq!(
            out.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().into_iter().collect::<BTreeSet<_>>(),
            all,
            "{what}: every pair, ids included"
        );
    }
}

#[test]
fn a_segment_cut_short_keeps_every_fingerprint_while_one_table_is_whole() {
    let (clean, seg, all) = flushed_index(20_000);
    let len = clean.file(&seg).unwrap().len();
    let fingerprints: BTreeSet<u64> = all.iter().map(|p| p.0).collect();
    for percent in [95, 60, 30] {
        let storage = damaged_copy(&clean, &seg, |b| b.truncate(len * percent / 100));
        let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
        assert_eq!(report.segment_entries_lost, 0, "{percent}%: {:?}", report.lost);
        // Every lost id is reported: by its page (past the cut) or all at once.
        let reported = ids_named(&report.lost);
        let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
        let live = out.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>();
        assert_eq!(live.iter().map(|p| p.0).collect::<BTreeSet<_>>(), fingerprints, "{percent}%: every fingerprint");
        let exact: Vec<_> = live.iter().filter(|p| p.1 != simdex::recovery::UNKNOWN_DOC_ID).collect();
        assert!(exact.iter().all(|p| all.contains(p)), "{percent}%: the ids read are right");
        assert_eq!(reported, all.len() - exact.len(), "{percent}%: each pair not recovered exactly is reported");
        assert!(reported > 0);
        storage.remove(Path::new("/out/MANIFEST")).ok();
    }
}

#[test]
fn version_1_segments_with_damaged_metadata_are_salvaged_too() {
    // The frozen version-1 index: one segment of 120 inserts and a log.
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/v1/index");
    let clean = MemStorage::default();
    let mut seg = PathBuf::new();
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name.starts_with("seg-") {
            seg = Path::new("/idx").join(&name);
        }
        clean.put(&Path::new("/idx").join(&name), &std::fs::read(entry.path()).unwrap());
    }
    let want = salvage(&clean, Path::new("/idx"), Path::new("/out"), mem_options(&clean, 1 << 20)).unwrap();
    let want_live = Index::open("/out", mem_options(&clean, 1 << 20)).unwrap().live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>();
    assert!(want.lost.is_empty() && want.bypassed.is_empty());
    let bytes = clean.file(&seg).unwrap();
    let footer = bytes.len() - 32;
    let dir = u64::from_le_bytes(bytes[footer..footer + 8].try_into().unwrap()) as usize;
    let tables = u16::from_le_bytes(bytes[dir + 16..dir + 18].try_into().unwrap()) as usize;
    let crcs_at = u64::from_le_bytes(bytes[dir + 24 + 40 * tables + 8..][..8].try_into().unwrap()) as usize;
    // Directory, footer, and the id-page checksum array (whose page 0 entry is then wrong:
    // that page's ids are reported, the rest kept).
    let page0 = simdex::Segment::open_with(&clean, &seg).unwrap().len().min(128) as usize;
    for (what, at, ids_lost) in [("directory", dir + 30, 0), ("footer", bytes.len() - 30, 0), ("id-page checksums", crcs_at + 1, page0)] {
        let storage = damaged_copy(&clean, &seg, |b| b[at] ^= 0x20);
        let report = salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
        assert_eq!(report.segment_entries_lost, 0, "{what}: {:?}", report.lost);
        assert_eq!(ids_named(&report.lost), ids_lost, "{what}: {:?}", report.lost);
        let live = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap().live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>();
        // (Deletes name pairs: a deleted pair whose id became unknown comes back under it.)
        let kept: BTreeSet<u64> = live.iter().map(|p| p.0).collect();
        assert!(want_live.iter().all(|p| kept.contains(&p.0)), "{what}: every fingerprint");
        if ids_lost == 0 {
            assert_eq!(live, want_live, "{what}: every pair");
        }
    }
}

#[test]
fn a_recovered_index_continues_the_old_ones_sequence_numbers() {
    // 200 operations (40 records of 5) in the old index: the recovered one numbers after them,
    // so `add` without ids never hands out a document id the old index used.
    let (storage, _, _) = logged_index();
    salvage(&storage, Path::new("/idx"), Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
    let out = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
    match out.find_or_insert(0x1234_5678_9abc_def0, 9, &simdex::QueryOptions::within(0)).unwrap() {
        simdex::FindOrInsert::Inserted { seq } => assert_eq!(seq, 201),
        other => panic!("{other:?}"),
    }
    out.close().unwrap();
    assert!(simdex::recovery::verify_index(&storage, Path::new("/out")).unwrap().is_clean());
    let again = Index::open("/out", mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!(again.live_entries().unwrap().into_iter().map(<(u64, u64)>::from).collect::<Vec<_>>().len(), 201);
}

#[test]
fn a_pinned_recipe_that_goes_missing_is_damage_never_no_recipe() {
    // Found by tools/scripts/fault-suite.py: RECIPE deleted, verify said ok and the text
    // pipeline pinned a new recipe silently. The manifest now records the recipe's CRC.
    let storage = MemStorage::default();
    let dir = Path::new("/idx");
    let index = Index::open(dir, mem_options(&storage, 1 << 20)).unwrap();
    let recipe = simdex::PinnedRecipe { options: "recipe_version=1\n".into(), idf_table: vec![1, 2, 3] };
    index.store_pinned_recipe(&recipe).unwrap();
    index.insert(1, 1).unwrap();
    index.close().unwrap();
    assert!(simdex::recovery::verify_index(&storage, dir).unwrap().is_clean());
    let recipe_path = dir.join(simdex::RECIPE_NAME);
    let original = storage.file(&recipe_path).unwrap();
    // missing
    storage.remove(&recipe_path).unwrap();
    let report = simdex::recovery::verify_index(&storage, dir).unwrap();
    assert!(report.problems.iter().any(|p| p.file == "RECIPE" && p.detail.contains("missing, though the manifest records a pinned recipe")), "{:?}", report.problems);
    let reader = Index::open_read_only(dir, mem_options(&storage, 1 << 20)).unwrap();
    assert!(reader.pinned_recipe().unwrap_err().is_corruption());
    let out = salvage(&storage, dir, Path::new("/out"), mem_options(&storage, 1 << 20)).unwrap();
    assert!(out.lost.iter().any(|(f, d)| f == "RECIPE" && d.contains("missing")), "{:?}", out.lost);
    // replaced by another (valid) recipe file
    let other = simdex::PinnedRecipe { options: "recipe_version=1\nfeatures=w1\n".into(), idf_table: Vec::new() };
    let writer = Index::open(Path::new("/other"), mem_options(&storage, 1 << 20)).unwrap();
    writer.store_pinned_recipe(&other).unwrap();
    writer.close().unwrap();
    storage.put(&recipe_path, &storage.file(&Path::new("/other").join(simdex::RECIPE_NAME)).unwrap());
    // (what a crash between replacing RECIPE and the manifest leaves: read, and noted)
    let reader = Index::open_read_only(dir, mem_options(&storage, 1 << 20)).unwrap();
    assert_eq!(reader.pinned_recipe().unwrap(), Some(other));
    let report = simdex::recovery::verify_index(&storage, dir).unwrap();
    assert!(report.is_clean() && report.notes.iter().any(|n| n.contains("other than the one the manifest last recorded")), "{:?}", report.notes);
    // restored: clean again
    storage.put(&recipe_path, &original);
    assert!(simdex::recovery::verify_index(&storage, dir).unwrap().is_clean());
    assert_eq!(Index::open_read_only(dir, mem_options(&storage, 1 << 20)).unwrap().pinned_recipe().unwrap(), Some(recipe));
}
