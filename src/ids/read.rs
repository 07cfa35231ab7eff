//! Reading an id table: [`IdTable::open`] maps it and checks its head against its segment
//! (cheap: no page is read); [`IdTable::lookup`] finds the ordinals whose bucket and tag are
//! an id's, checking each page against its CRC the first time it is read;
//! [`IdTable::verify`] checks every page and that the file is exactly the one its segment's
//! id column makes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::build::emit;
use super::layout::{Geometry, IdHead, ENDS_PER_PAGE, IDS_MAGIC, IDS_VERSION, PAGE_BYTES};
use crate::bands::BuildBudget;
use crate::error::{Error, Result};
use crate::integrity::{check_magic_and_version, CheckedPages};
use crate::segment::Segment;
use crate::storage::{FileBytes, Storage};

/// A live segment's id table: opened or built with the segment, replaced when a writer
/// builds it again after a lookup found it damaged. Empty: the segment's id column is
/// scanned instead.
#[derive(Debug, Default)]
pub(crate) struct IdSlot(RwLock<Option<Arc<IdTable>>>);

impl IdSlot {
    pub(crate) fn get(&self) -> Option<Arc<IdTable>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn set(&self, table: IdTable) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(table));
    }
}

/// An open id table.
#[derive(Debug)]
pub(crate) struct IdTable {
    path: PathBuf,
    bytes: FileBytes,
    head: IdHead,
    geometry: Geometry,
    checked: CheckedPages,
}

impl IdTable {
    /// Opens the id table at `path` of `segment`: its magic, version and head, that it
    /// belongs to `segment` (entries, length, footer) and has the length its head implies.
    /// Reads no page.
    pub(crate) fn open(storage: &dyn Storage, path: &Path, segment: &Segment) -> Result<IdTable> {
        let bytes = storage.read(path).map_err(|e| Error::io(path, "read", e))?;
        check_magic_and_version(path, &bytes, &IDS_MAGIC, "id table (magic SIMDXIDT)", IDS_VERSION..=IDS_VERSION)?;
        let head = IdHead::decode(&bytes).map_err(|f| f.into_error(path))?;
        let (segment_len, footer_crc) = segment.identity();
        if head.entries != segment.len() || head.segment_len != segment_len || head.segment_footer_crc != footer_crc {
            let detail = format!(
                "it was made for another segment ({} entries, {} bytes), not {} ({} entries, {segment_len} bytes)",
                head.entries,
                head.segment_len,
                segment.path().display(),
                segment.len()
            );
            return Err(Error::corrupt(path, 0, detail));
        }
        let geometry = head.geometry();
        let len = geometry.file_len();
        if bytes.len() as u64 != len {
            return Err(Error::corrupt(path, bytes.len() as u64, format!("the file is {} bytes, its head implies {len}", bytes.len())));
        }
        Ok(IdTable { path: path.to_path_buf(), bytes, head, geometry, checked: CheckedPages::new(len / PAGE_BYTES) })
    }

    /// The file's length in bytes.
    pub(crate) fn file_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The head.
    pub(crate) fn head(&self) -> &IdHead {
        &self.head
    }

    fn page(&self, offset: u64, what: &str) -> Result<&[u8]> {
        self.checked.page(&self.path, &self.bytes, offset, PAGE_BYTES, what)
    }

    /// Bucket end `i` (entries in buckets `0..=i`).
    fn end(&self, i: u64) -> Result<u64> {
        let at = self.geometry.dir_page(i / ENDS_PER_PAGE);
        let page = self.page(at, "id table directory page")?;
        let k = (i % ENDS_PER_PAGE) as usize * 4;
        let v = page.get(k..k + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes);
        let v = v.ok_or_else(|| Error::corrupt(&self.path, at, "bucket end outside its page"))?;
        if u64::from(v) > self.head.entries {
            return Err(Error::corrupt(&self.path, at, format!("bucket {i} ends at entry {v} of {}", self.head.entries)));
        }
        Ok(u64::from(v))
    }

    /// Appends to `out` the ordinals of the entries whose bucket and tag are those of id
    /// `id`: every entry stored under `id`, and perhaps some others (the caller compares the
    /// stored ids).
    pub(crate) fn lookup(&self, id: u64, out: &mut Vec<u64>) -> Result<()> {
        let design = self.head.design;
        let (bucket, tag) = design.key(id);
        let start = if bucket == 0 { 0 } else { self.end(bucket - 1)? };
        let end = self.end(bucket)?;
        let per_page = design.per_page();
        let mut at = start;
        while at < end {
            let page_no = at / per_page;
            let payload = self.page(self.geometry.entry_page(page_no), "id table entry page")?;
            let last = end.min((page_no + 1) * per_page);
            for i in at % per_page..at % per_page + (last - at) {
                let (t, ordinal) = design.unpack(design.entry(payload, i));
                if t == tag && ordinal < self.head.entries {
                    out.push(ordinal);
                }
            }
            at = last;
        }
        Ok(())
    }

    /// Checks every page's CRC, then that the file is byte for byte the id table
    /// `segment`'s id column makes (so every entry is where a lookup finds it).
    pub(crate) fn verify(&self, segment: &Segment) -> Result<()> {
        let pages = self.bytes.len() as u64 / PAGE_BYTES;
        for p in 1..pages {
            self.page(p * PAGE_BYTES, "id table page")?;
        }
        let (mut at, mut mismatch) = (0usize, None);
        emit(segment, &self.head, BuildBudget::default(), |made| {
            let have = self.bytes.get(at..at + made.len());
            if have != Some(made) {
                let same = have.map_or(0, |h| h.iter().zip(made).take_while(|(a, b)| a == b).count());
                mismatch = Some((at + same) as u64);
                return false;
            }
            at += made.len();
            true
        })?;
        match mismatch {
            None if at == self.bytes.len() => Ok(()),
            m => Err(Error::corrupt(&self.path, m.unwrap_or(at as u64), "the id table differs from the one the segment's document ids make")),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::super::build::{head_for, write_id_table};
    use super::*;
    use crate::codec::{Codec, SymbolHistogram};
    use crate::segment::{IdColumn, SegmentWriter};
    use crate::storage::MemStorage;

    /// A segment whose rows are `rows` (fingerprint, id), sorted, written as the engine
    /// writes one.
    fn segment_of(storage: &MemStorage, rows: &[(u64, u64)], path: &Path) -> Segment {
        let design = crate::plan::planned_design(&crate::plan::PlanOptions::new(rows.len() as u64, 3)).unwrap();
        let mut w = SegmentWriter::create_with(storage, path, &design, &vec![Codec::Xor; design.tables().len()], IdColumn::Present, None).unwrap();
        for t in design.tables() {
            let mut v: Vec<u64> = rows.iter().map(|r| t.permutation.apply(r.0)).collect();
            v.sort_unstable();
            w.write_table(&SymbolHistogram::of_sorted(Codec::Xor, &v).code(), v).unwrap();
        }
        w.write_ids(rows.iter().map(|r| r.1)).unwrap();
        w.finish().unwrap();
        Segment::open_with(storage, path).unwrap()
    }

    #[test]
    fn worked_example_from_the_spec() {
        let storage = MemStorage::default();
        let seg = segment_of(&storage, &[(10, 7), (20, 1), (30, 7)], Path::new("i/w.sdx"));
        let mut file = Vec::new();
        emit(&seg, &head_for(&seg).unwrap(), BuildBudget::default(), |b| {
            file.extend_from_slice(b);
            true
        })
        .unwrap();
        assert_eq!(file.len(), 3 * 1024);
        assert_eq!(&file[..16], b"SIMDXIDT\x01\0\0\0\x00\x08\x02\x00");
        assert_eq!(&file[1024..1024 + 5], &[0x48, 0x28, 0x91, 0x15, 0]);
        assert_eq!(&file[2048..2048 + 5], &[3, 0, 0, 0, 0]);
    }

    /// A segment of `n` entries whose ids repeat (about three fingerprints an id), written
    /// as the engine writes one (table 0 and the id column in `(fingerprint, id)` order).
    fn segment(storage: &MemStorage, n: u64, name: &str) -> (Segment, Vec<(u64, u64)>) {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut rows: Vec<(u64, u64)> = (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x, i / 3)
            })
            .collect();
        rows.sort_unstable();
        (segment_of(storage, &rows, &std::path::PathBuf::from(format!("i/{name}.sdx"))), rows)
    }

    #[test]
    fn lookups_find_every_entry_of_an_id_and_the_bytes_do_not_depend_on_the_budget() {
        let storage = MemStorage::default();
        for n in [1u64, 40, 3000, 20_000] {
            let (seg, rows) = segment(&storage, n, &format!("s{n}"));
            let head = head_for(&seg).unwrap();
            let emit_with = |entries: u64| {
                let mut out = Vec::new();
                emit(&seg, &head, BuildBudget { entries }, |b| {
                    out.extend_from_slice(b);
                    true
                })
                .unwrap();
                out
            };
            let whole = emit_with(1 << 30);
            for budget in [7000, 900, 5] {
                assert!(emit_with(budget) == whole, "n {n}, budget {budget}");
            }
            let path = std::path::PathBuf::from(format!("i/s{n}.sdi"));
            assert_eq!(write_id_table(&storage, &seg, &path, BuildBudget { entries: 5 }).unwrap(), Some(whole.len() as u64));
            let table = IdTable::open(&storage, &path, &seg).unwrap();
            table.verify(&seg).unwrap();
            // the oracle: every ordinal whose stored id is the id, from the rows themselves
            for id in (0..n / 3 + 2).step_by(7).chain([u64::MAX, 1 << 40]) {
                let mut got = Vec::new();
                table.lookup(id, &mut got).unwrap();
                let mut confirmed: Vec<u64> = got.iter().copied().filter(|&o| seg.doc_id(o).unwrap() == id).collect();
                confirmed.sort_unstable();
                let want: Vec<u64> = (0u64..).zip(&rows).filter(|(_, r)| r.1 == id).map(|(o, _)| o).collect();
                assert_eq!(confirmed, want, "n {n}, id {id}");
                assert!(got.len() <= want.len() + 4, "n {n}, id {id}: {} candidates", got.len());
            }
        }
    }

    #[test]
    fn damage_is_named_and_another_segments_table_is_refused() {
        let storage = MemStorage::default();
        let (seg, _) = segment(&storage, 5000, "a");
        let (other, _) = segment(&storage, 4000, "b");
        let path = Path::new("i/a.sdi");
        write_id_table(&storage, &seg, path, BuildBudget::default()).unwrap();
        let err = IdTable::open(&storage, path, &other).unwrap_err();
        assert!(err.is_corruption() && err.to_string().contains("another segment"), "{err}");
        let mut bytes = storage.file(path).unwrap();
        bytes[1024 + 100] ^= 0x10;
        storage.put(path, &bytes);
        let table = IdTable::open(&storage, path, &seg).unwrap();
        let err = table.verify(&seg).unwrap_err();
        assert!(err.to_string().contains("id table page checksum mismatch") && err.to_string().contains("offset 1024"), "{err}");
    }
}
