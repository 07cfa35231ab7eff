//! An IDF table learned in parts (each part's document frequencies summed apart, written with
//! `write_idf_part`, mapped by `IdfTable::from_parts`) against the oracle: the table
//! `IdfBuilder` learns in one process from the same documents.

use simdex_fingerprint::{idf_part_of, write_idf_part, IdfBuilder, IdfPartSummary, IdfTable};
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
    let pool: Vec<u64> = (0..3000).map(|_| next()).chain([0, 1, u64::MAX, u64::MAX - 1]).collect();
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
        let mut got = Vec::new();
        t.weights_of(&[1, 2, u64::MAX], |i, w| got.push((i, w)));
        assert_eq!(got, vec![(0, whole.weight(1)), (1, whole.weight(2)), (2, whole.weight(u64::MAX))]);
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
