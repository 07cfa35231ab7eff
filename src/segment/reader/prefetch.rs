//! Asking the kernel ahead: for the blocks of a query on a segment that is being read from
//! the disk (`Segment::prefetch_if_cold`, by `cache_hints::ColdReads`), for the values a
//! cold crawler's check reads (`Segment::will_need_sketches`, `Segment::will_need_entries`)
//! and for the next window of a sequential scan (`Segment::scan_hint`). Hints only: none of them changes
//! what is read.

use crate::codec::BLOCK_BYTES;

use super::Segment;

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

impl Segment {
    /// [`Self::scan_hint`] for a walk that may jump ahead (a batch join over the blocks its
    /// queries land in, dense enough to read most of them): called as the walk reaches unit
    /// `i`, it asks for the window holding `i` and the one after it when they were not asked
    /// for yet (`asked`: the first unit not asked for), and lets go of the window two behind
    /// when the walk (which started at unit `first`) passed it: the windows before `first`
    /// are another walk's.
    pub(super) fn walk_hint(&self, start: u64, unit: u64, i: u64, count: u64, first: u64, asked: &mut u64) {
        if *asked > i + SCAN_WINDOW || !self.bytes.is_mapped() {
            return;
        }
        let from = (*asked).max(i - i % SCAN_WINDOW);
        let to = count.min(i - i % SCAN_WINDOW + 2 * SCAN_WINDOW);
        if to > from {
            self.bytes.will_need((start + from * unit) as usize, ((to - from) * unit) as usize);
        }
        if let Some(behind) = (i - i % SCAN_WINDOW).checked_sub(2 * SCAN_WINDOW).filter(|&b| b >= first) {
            self.bytes.done_with((start + behind * unit) as usize, (SCAN_WINDOW * unit) as usize);
        }
        *asked = to;
    }
}

impl Segment {
    /// Asks the kernel now for the pages the sketches of `ordinals` are read from (each
    /// one's page and, in the grouped layout, its group's CRC page), so that their reads
    /// overlap (the crawler's check of a band file's candidates, when cold).
    pub(crate) fn will_need_sketches(&self, ordinals: &[u32]) {
        if let Some(column) = self.sketches.as_ref() {
            for &ordinal in ordinals {
                self.will_need_value(column, u64::from(ordinal));
            }
        }
    }

    /// Asks the CPU for the cache lines of `ordinals`' sketches and of their pages'
    /// checksums, without waiting for them: a warm check's candidates are read together.
    pub(crate) fn prefetch_sketches(&self, ordinals: &[u32]) {
        let Some(column) = self.sketches.as_ref() else { return };
        for &ordinal in ordinals {
            let ordinal = u64::from(ordinal);
            if ordinal < self.entries {
                let page = ordinal / column.per_page.max(1);
                let at = column.page_span(page, self.entries).0 + ordinal % column.per_page.max(1) * column.value_bytes;
                for at in [at, column.crc_offset(page)] {
                    if let Some(byte) = usize::try_from(at).ok().and_then(|at| self.bytes.get(at)) {
                        super::prefetch_line(byte);
                    }
                }
            }
        }
    }

    /// Asks the CPU for the cache line of the document id of `ordinal`, without waiting
    /// for it: a batch reads its candidates' ids in ordinal order a few ahead.
    pub(crate) fn prefetch_id(&self, ordinal: u64) {
        self.prefetch_value(self.ids.as_ref(), ordinal);
    }

    /// Asks the CPU for the cache line of the sketch of `ordinal` (not its page's checksum:
    /// a batch tests its candidates' sketches in ordinal order a few ahead, on pages mostly
    /// checked already).
    pub(crate) fn prefetch_sketch(&self, ordinal: u64) {
        self.prefetch_value(self.sketches.as_ref(), ordinal);
    }

    /// The cache line of value `ordinal` of `column`, asked of the CPU.
    fn prefetch_value(&self, column: Option<&super::ColumnAt>, ordinal: u64) {
        if let Some(column) = column.filter(|_| ordinal < self.entries) {
            let page = ordinal / column.per_page.max(1);
            let at = column.page_span(page, self.entries).0 + ordinal % column.per_page.max(1) * column.value_bytes;
            if let Some(byte) = usize::try_from(at).ok().and_then(|at| self.bytes.get(at)) {
                super::prefetch_line(byte);
            }
        }
    }

    /// Asks the kernel now for what reading the document ids and the fingerprints of
    /// `ordinals` reads: their id pages and table 0's block index chunks at once, then
    /// (once the chunks are in: this waits for them) the table 0 blocks that hold them.
    pub(crate) fn will_need_entries(&self, ordinals: impl Iterator<Item = u64> + Clone) {
        let Some(table) = self.tables.first() else { return };
        for ordinal in ordinals.clone() {
            if let Some(column) = self.ids.as_ref() {
                self.will_need_value(column, ordinal);
            }
            table.index.will_need_chunk_of(ordinal);
        }
        for ordinal in ordinals {
            if let Ok(Some((b, _))) = table.index.block_of_ordinal(ordinal) {
                self.bytes.will_need(table.block_offset(b) as usize, BLOCK_BYTES);
            }
        }
    }

    /// Asks the kernel now (without waiting) for table 0's block index, which every read of
    /// a fingerprint by its ordinal (`Segment::fingerprint_at`) reads a chunk of: about 14
    /// bytes a block (0.075 bytes a fingerprint at 2^24). Called when a band file is opened
    /// beside the segment: the crawler's check reads it for every pair it confirms.
    pub(crate) fn will_need_fingerprint_index(&self) {
        if let Some(table) = self.tables.first() {
            self.bytes.will_need(table.dir.index_offset as usize, (table.dir.block_count * crate::segment::layout::INDEX_BYTES_PER_BLOCK) as usize);
        }
    }

    /// Asks for value `ordinal`'s page of `column` and where its CRC is.
    fn will_need_value(&self, column: &super::ColumnAt, ordinal: u64) {
        if ordinal < self.entries {
            let page = ordinal / column.per_page.max(1);
            let (start, len) = column.page_span(page, self.entries);
            self.bytes.will_need(start as usize, len as usize);
            self.bytes.will_need(column.crc_offset(page) as usize, 4);
        }
    }
}

/// Blocks (or pages) a sequential scan asks the kernel for at a time: 2 MiB (8 KiB in unit
/// tests, so that small segments cross many windows).
const SCAN_WINDOW: u64 = if cfg!(test) { 8 } else { 2048 };

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::super::cache_hints::ColdReads;
    use super::SCAN_WINDOW;
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
        // A batch dense enough to read ahead of its walk (and let go behind it, windows of 8
        // blocks here): the join's matches are brute force's.
        let queries: Vec<u64> = fps.iter().step_by(3).enumerate().map(|(i, &f)| f ^ (1 << (i % 64))).collect();
        let got = crate::batch::batch_query(&seg, &queries, &crate::batch::BatchOptions::new(3)).unwrap();
        let want: usize = queries.iter().map(|&q| pairs.iter().filter(|&&(g, _)| (g ^ q).count_ones() <= 3).count()).sum();
        assert!(got.iter().all(|m| (m.query ^ m.fingerprint).count_ones() <= 3));
        assert_eq!(got.len(), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
