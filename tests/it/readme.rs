//! The README's Rust examples, run as written (in a temporary directory).

use simdex::{build_segment, storage::FsStorage, BuildOptions, FindOrInsert, Index, IndexOptions, QueryOptions, Segment};

#[test]
fn crawler_loop_example() -> Result<(), simdex::Error> {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("pages");
    let index = Index::open(&pages, IndexOptions::default())?;
    assert!(matches!(index.find_or_insert(0x0123_4567_89ab_cdef, 42, &QueryOptions::within(3))?, FindOrInsert::Inserted { .. }));
    match index.find_or_insert(0x0123_4567_89ab_cdee, 43, &QueryOptions::within(3))? {
        FindOrInsert::Found(matches) => assert_eq!(matches[0].doc_id, Some(42)),
        FindOrInsert::Inserted { .. } => panic!("one bit away must be found"),
    }
    index.close()?;
    Ok(())
}

#[test]
fn segment_example() -> Result<(), simdex::Error> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.sdx");
    let fingerprints = vec![0x0123_4567_89ab_cdef_u64, 0xfedc_ba98_7654_3210];
    let ids = vec![1_u64, 2];
    build_segment(&FsStorage, &path, &fingerprints, Some(&ids), &BuildOptions::default())?;
    let segment = Segment::open(&path)?;
    let found = segment.query(0x0123_4567_89ab_cdee, &QueryOptions::within(3))?;
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].fingerprint, found[0].distance, found[0].doc_id), (0x0123_4567_89ab_cdef, 1, Some(1)));
    Ok(())
}

#[test]
fn verified_example() -> Result<(), Box<dyn std::error::Error>> {
    use simdex_fingerprint::document::DocumentKind;
    use simdex_fingerprint::sketch::SketchOptions;
    use simdex_fingerprint::{DocumentIndex, DocumentInput, DocumentQuery};
    let dir = tempfile::tempdir()?;
    let index = DocumentIndex::open(dir.path(), IndexOptions { sketches: Some(SketchOptions::default().column()), ..IndexOptions::default() })?;
    let page = DocumentInput { bytes: b"the quick brown fox jumps over the lazy dog again and again", kind: DocumentKind::Text };
    index.insert_document(page, 1)?;
    let (_, found) = index.find_or_insert_document_with(page, 2, &DocumentQuery::within(6))?;
    assert!(matches!(found, FindOrInsert::Found(m) if m[0].doc_id == Some(1)));
    Ok(())
}
