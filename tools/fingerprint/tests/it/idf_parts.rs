//! An IDF table learned in parts (each part's document frequencies summed apart, written with
//! `write_idf_part`, mapped by `IdfTable::from_parts`) against the oracle: the table
//! `IdfBuilder` learns in one process from the same documents.

use simdex_fingerprint::{idf_part_of, write_idf_part, IdfBuilder, IdfPartCounts, IdfPartSummary, IdfTable};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Documents of features drawn from a small pool (some in many documents, some in one),
/// hashes spread over the whole range (0 and u64::MAX included).
fn documents() -> Vec<Vec<u64>> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // (and runs of neighbouring hashes, where a lookup's first guess of an entry misses most)
    let runs = [0x4000_0000_0000_0000u64, 0x7fff_ffff_ffff_ff00, 0xc000_0000_0000_1234];
    let clustered = runs.into_iter().flat_map(|r| (0..300).map(move |i| r + 3 * i));
    let pool: Vec<u64> = (0..3000).map(|_| next()).chain(clustered).chain([0, 1, u64::MAX, u64::MAX - 1]).collect();
    (0..400)
        .map(|_| {
            let mut d: Vec<u64> = (0..40).map(|_| pool[(next() % pool.len() as u64) as usize]).collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect()
}

fn write_parts(dir: &Path, docs: &[Vec<u64>], parts: usize) -> (Vec<PathBuf>, Vec<IdfPartSummary>) {
    let mut counts = vec![HashMap::<u64, u64>::new(); parts];
    for d in docs {
        for &h in d {
            *counts[idf_part_of(h, parts)].entry(h).or_default() += 1;
        }
    }
    let (mut paths, mut summaries) = (Vec::new(), Vec::new());
    for (p, c) in counts.into_iter().enumerate() {
        let path = dir.join(format!("part-{p}"));
        summaries.push(write_idf_part(&path, p, parts, docs.len() as u64, c.into_iter().collect()).unwrap());
        paths.push(path);
    }
    (paths, summaries)
}

#[test]
fn a_table_in_parts_is_the_table_learned_in_one_process() {
    let docs = documents();
    let mut b = IdfBuilder::new("w3");
    docs.iter().for_each(|d| b.add_document(d));
    let whole = b.build(1);
    for parts in [1, 2, 3, 7, 64] {
        let dir = tempfile::tempdir().unwrap();
        let (paths, summaries) = write_parts(dir.path(), &docs, parts);
        let t = IdfTable::from_parts("w3", docs.len() as u64, &paths, &summaries).unwrap();
        assert_eq!(t.encode(), whole.encode(), "{parts} parts");
        assert_eq!(t.id(), whole.id());
        assert_eq!(t.len(), whole.len());
        assert_eq!(t, whole);
        for h in docs.iter().flatten().copied().chain([2, 12345, u64::MAX - 2]) {
            assert_eq!(t.weight(h), whole.weight(h), "{h:#x} in {parts} parts");
        }
        // a batch (each lookup's reads asked for ahead of it): every feature, and hashes
        // beside them and between the parts that are not stored
        let asked: Vec<u64> = docs.iter().flatten().flat_map(|&h| [h, h.wrapping_add(1), h.wrapping_sub(1)]).chain([2, u64::MAX / 2, u64::MAX]).collect();
        let mut got = Vec::new();
        t.weights_of(&asked, |i, w| got.push((i, w)));
        let expected: Vec<(usize, u32)> = asked.iter().enumerate().map(|(i, &h)| (i, whole.weight(h))).collect();
        assert_eq!(got, expected, "{parts} parts");
        let path = dir.path().join("t.idf");
        t.save(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), whole.encode());
        assert_eq!(t.part_files().unwrap().0, paths.as_slice());
    }
}

#[test]
fn a_damaged_short_or_foreign_part_is_refused_naming_its_file() {
    let docs = documents();
    let dir = tempfile::tempdir().unwrap();
    let (paths, summaries) = write_parts(dir.path(), &docs, 3);
    let n = docs.len() as u64;
    let mut bytes = std::fs::read(&paths[1]).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&paths[1], &bytes).unwrap();
    let e = IdfTable::from_parts("w3", n, &paths, &summaries).unwrap_err();
    assert!(e.to_string().contains("part-1") && e.to_string().contains("checksum"), "{e}");
    std::fs::write(&paths[1], &bytes[..bytes.len() - 12]).unwrap();
    let e = IdfTable::from_parts("w3", n, &paths, &summaries).unwrap_err();
    assert!(e.to_string().contains("part-1") && e.to_string().contains("entries expected"), "{e}");
    std::fs::remove_file(&paths[1]).unwrap();
    assert!(IdfTable::from_parts("w3", n, &paths, &summaries).is_err());
    assert!(IdfTable::from_parts("w3", n, &paths[..2], &summaries).is_err());
    // parts swapped: each is intact but holds another range
    let (paths, summaries) = write_parts(dir.path(), &docs, 2);
    let e = IdfTable::from_parts("w3", n, &[paths[1].clone(), paths[0].clone()], &[summaries[1], summaries[0]]).unwrap_err();
    assert!(e.to_string().contains("range"), "{e}");
    let e = write_idf_part(&dir.path().join("x"), 0, 2, 10, vec![(u64::MAX, 1)]).unwrap_err();
    assert!(e.to_string().contains("outside"), "{e}");
    let e = write_idf_part(&dir.path().join("x"), 0, 1, 1, vec![(5, 2)]).unwrap_err();
    assert!(e.to_string().contains("more documents"), "{e}");
    let e = write_idf_part(&dir.path().join("x"), 0, 1, 9, vec![(5, 2), (5, 3)]).unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
}

#[test]
fn one_part_of_a_few_entries_spans_every_hash() {
    // (its directory's slots cover 2^63 hashes each: a shift by 64 would be no shift)
    let docs = vec![vec![0, 5, u64::MAX], vec![5, 1 << 63]];
    let mut b = IdfBuilder::new("w3");
    docs.iter().for_each(|d| b.add_document(d));
    let whole = b.build(1);
    let dir = tempfile::tempdir().unwrap();
    let (paths, summaries) = write_parts(dir.path(), &docs, 1);
    let t = IdfTable::from_parts("w3", 2, &paths, &summaries).unwrap();
    let asked = [0, 1, 5, 6, 1 << 63, (1 << 63) + 1, u64::MAX - 1, u64::MAX];
    let mut got = Vec::new();
    t.weights_of(&asked, |i, w| got.push((i, w)));
    assert_eq!(got, asked.iter().enumerate().map(|(i, &h)| (i, whole.weight(h))).collect::<Vec<_>>());
    assert_ne!(t.weight(5), t.weight(6));
}

/// The oracle's counts: `(feature, documents it is in, times copies)` split by part, ascending.
fn counted(docs: &[Vec<u64>], copies: impl Fn(usize) -> u64, parts: usize) -> Vec<Vec<(u64, u64)>> {
    let mut all = std::collections::BTreeMap::<u64, u64>::new();
    for (i, d) in docs.iter().enumerate() {
        for &h in d {
            *all.entry(h).or_default() += copies(i);
        }
    }
    let mut out = vec![Vec::new(); parts];
    all.into_iter().for_each(|(h, c)| out[idf_part_of(h, parts)].push((h, c)));
    out
}

#[test]
fn part_counts_are_the_documents_frequencies_by_part() {
    let docs = documents();
    let copies = |i: usize| 1 + (i % 3) as u64;
    for parts in [1, 2, 7, 64] {
        let mut c = IdfPartCounts::default();
        docs.iter().enumerate().for_each(|(i, d)| c.add_document(d, copies(i)));
        let expected = counted(&docs, copies, parts);
        assert_eq!(c.len(), expected.iter().map(Vec::len).sum::<usize>());
        assert_eq!(c.into_parts(parts), expected, "{parts} parts");
    }
}

#[test]
fn one_parts_counts_summed_from_batches_are_the_whole_corpus_counts() {
    // each batch of documents counted apart (a map task), then each part's answers summed
    // (a reduce task), as documents and as counts
    let docs = documents();
    let parts = 7;
    let batches: Vec<Vec<Vec<(u64, u64)>>> = docs
        .chunks(37)
        .map(|b| {
            let mut c = IdfPartCounts::default();
            b.iter().for_each(|d| c.add_document(d, 1));
            c.into_parts(parts)
        })
        .collect();
    let expected = counted(&docs, |_| 1, parts);
    for p in 0..parts {
        let mut sum = IdfPartCounts::of_one_part();
        for b in &batches {
            let (f, n): (Vec<u64>, Vec<u64>) = b[p].iter().copied().unzip();
            sum.add_counts(&f, &n);
        }
        assert_eq!(sum.into_parts(1).concat(), expected[p], "part {p}");
    }
    let mut one = IdfPartCounts::of_one_part();
    docs.iter().for_each(|d| one.add_document(d, 2));
    assert_eq!(one.into_parts(parts), counted(&docs, |_| 2, parts));
    assert!(IdfPartCounts::of_one_part().is_empty());
}
