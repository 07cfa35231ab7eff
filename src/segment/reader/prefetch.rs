//! Asking ahead: the CPU for the cache lines a query will load ([`prefetch_line`],
//! [`prefetch_block`]), the kernel for the blocks of a query on a segment that is being read
//! from the disk ([`ColdReads`]) and for the next window of a sequential scan
//! (`Segment::scan_hint`). Hints only: none of them changes what is read.

use crate::codec::BLOCK_BYTES;

use super::Segment;

/// Whether queries on a mapped segment should ask for their blocks ahead: set when
/// touching a query's first blocks takes disk time (a major fault), for the next
/// [`ColdReads::QUERIES`] queries, then measured again. Warm queries pay one clock read.
#[derive(Debug, Default)]
pub(super) struct ColdReads(std::sync::atomic::AtomicU32);

impl ColdReads {
    /// Queries that ask ahead after a cold one.
    const QUERIES: u32 = 256;
    /// Touching a query's first blocks slower than this means they came from the disk.
    const DISK: std::time::Duration = std::time::Duration::from_micros(50);

    pub(super) fn is_cold(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    pub(super) fn observe(&self, was_cold: bool, touch: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        if touch > Self::DISK {
            self.0.store(Self::QUERIES, Relaxed);
        } else if was_cold {
            let _ = self.0.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        }
    }
}

impl Segment {
    /// When this segment's queries are reading from the disk (see [`ColdReads`]), asks the
    /// kernel now for the first block of every table a query of `fingerprint` probes, so
    /// that an index directory can start the reads of all its segments before it queries
    /// any. Costs one atomic load when warm.
    pub(crate) fn prefetch_if_cold(&self, fingerprint: u64) {
        if !self.cold.is_cold() {
            return;
        }
        for table in &self.tables {
            let q = table.design.permutation.apply(fingerprint);
            if let Ok(b) = table.lower_bound(q & table.design.prefix_mask()) {
                if b < table.dir.block_count {
                    self.bytes.will_need(table.block_offset(b) as usize, BLOCK_BYTES);
                }
            }
        }
    }

    /// Read-ahead and release for a sequential scan over `count` units of `unit` bytes
    /// starting at `start` (blocks of a table, pages of a column), called as the scan
    /// reaches unit `i`: the mapping is random-access (`FileBytes`), so a scan asks for the
    /// window after the one it enters and lets go of the one two behind it.
    pub(super) fn scan_hint(&self, start: u64, unit: u64, i: u64, count: u64) {
        if i % SCAN_WINDOW != 0 || !self.bytes.is_mapped() {
            return;
        }
        let span = |from: u64| (start + from * unit, count.min(from + SCAN_WINDOW).saturating_sub(from) * unit);
        let ask = |(offset, len): (u64, u64)| {
            if len > 0 {
                self.bytes.will_need(offset as usize, len as usize);
            }
        };
        if i == 0 {
            ask(span(0));
        }
        ask(span(i + SCAN_WINDOW));
        if let Some(behind) = i.checked_sub(2 * SCAN_WINDOW) {
            let (offset, len) = span(behind);
            self.bytes.done_with(offset as usize, len as usize);
        }
    }
}

/// Blocks (or pages) a sequential scan asks the kernel for at a time: 2 MiB (8 KiB in unit
/// tests, so that small segments cross many windows).
const SCAN_WINDOW: u64 = if cfg!(test) { 8 } else { 2048 };

/// Asks the CPU to load the cache lines of the block starting at `bytes[0]` without waiting
/// for them (a hint: nothing happens where prefetching is not available).
#[inline(always)]
pub(super) fn prefetch_block(bytes: &[u8]) {
    for line in bytes.iter().take(BLOCK_BYTES).step_by(64) {
        prefetch_line(line);
    }
}

/// Asks the CPU to load the cache line holding `value` without waiting for it.
#[inline(always)]
pub(super) fn prefetch_line<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address; SSE, which it
    // needs, is part of every x86-64 CPU. The pointer comes from a live reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((value as *const T).cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::{ColdReads, SCAN_WINDOW};
    use crate::error::Result;
    use crate::query::QueryOptions;
    use crate::segment::{build_segment, BuildOptions, Segment};
    use crate::storage::FsStorage;

    #[test]
    fn sequential_scans_advise_and_read_the_same_bytes() {
        // A mapped segment of many scan windows: every scan (which asks ahead and lets go
        // behind) and every cold-mode query (which asks for its blocks first) reads exactly
        // what was written, twice over.
        let mut x = 5u64;
        let mut fps: Vec<u64> = (0..30_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            })
            .collect();
        let ids: Vec<u64> = (0..fps.len() as u64).collect();
        let dir = std::env::temp_dir().join(format!("simdex-advise-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sdx");
        build_segment(&FsStorage, &path, &fps, Some(&ids), &BuildOptions::default()).unwrap();
        let seg = Segment::open(&path).unwrap();
        assert!(seg.bytes.is_mapped());
        assert!(seg.tables()[0].block_count() > 4 * SCAN_WINDOW);
        let mut pairs: Vec<(u64, u64)> = fps.iter().copied().zip(ids.iter().copied()).collect();
        pairs.sort_unstable();
        for _ in 0..2 {
            let got: Vec<(u64, u64)> = seg.entries().map(|e| e.map(|(f, i)| (f, i.unwrap()))).collect::<Result<_>>().unwrap();
            assert_eq!(got, pairs);
            for (t, table) in seg.tables().iter().enumerate() {
                let mut want: Vec<u64> = fps.iter().map(|&f| table.design().permutation.apply(f)).collect();
                want.sort_unstable();
                assert_eq!(seg.table_entries(t).collect::<Result<Vec<u64>>>().unwrap(), want);
            }
        }
        fps.sort_unstable();
        // Cold mode: queries ask for all their blocks first; the answers (with their ids)
        // are brute force's.
        seg.cold.0.store(ColdReads::QUERIES, std::sync::atomic::Ordering::Relaxed);
        for (i, &f) in fps.iter().enumerate().step_by(301) {
            let q = f ^ (1 << (i % 64));
            let want: std::collections::BTreeSet<(u64, u64)> = pairs.iter().copied().filter(|&(g, _)| (g ^ q).count_ones() <= 3).collect();
            assert!(!want.is_empty());
            let got: Vec<(u64, u64)> = seg.query(q, &QueryOptions::within(3)).unwrap().iter().map(|m| (m.fingerprint, m.doc_id.unwrap())).collect();
            assert_eq!(got.len(), want.len());
            assert_eq!(got.into_iter().collect::<std::collections::BTreeSet<_>>(), want);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
