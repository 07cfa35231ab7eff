//! Arguments out of range (a table, a block, an entry past the end) are errors, not panics.

use std::path::Path;

use simdex::storage::MemStorage;
use simdex::{build_segment, BuildOptions, Error, Segment};

#[test]
fn tables_and_blocks_out_of_range_are_errors_not_panics() {
    let fps: Vec<u64> = (0..5000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
    let storage = MemStorage::default();
    let path = Path::new("s.sdx");
    build_segment(&storage, path, &fps, Some(&fps), &BuildOptions::default()).unwrap();
    let seg = Segment::open_with(&storage, path).unwrap();
    let (t, blocks) = (seg.tables().len(), seg.tables()[0].block_count());
    assert!(matches!(seg.block(t, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(seg.block(0, blocks), Err(Error::InvalidArgument(_))));
    assert!(matches!(seg.visit_block(0, blocks, |_| true), Err(Error::InvalidArgument(_))));
    let past: Vec<_> = seg.table_entries(t).collect();
    assert!(matches!(past.as_slice(), [Err(Error::InvalidArgument(_))]), "{past:?}");
    assert_eq!(seg.table_entries(0).count(), fps.len());
    assert_eq!(seg.tables()[0].block_entries(blocks), 0);
    assert_eq!(seg.tables()[0].first_ordinal(blocks), fps.len() as u64);
    assert!(matches!(seg.doc_id(fps.len() as u64), Err(Error::InvalidArgument(_))));
}
