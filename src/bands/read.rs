//! Reading a band file: [`BandFile::open`] maps it and checks its head against its segment
//! (cheap: no page is read); [`BandFile::lookup`] finds the ordinals of the entries whose
//! band equals the query's, checking each page against its CRC the first time it is read;
//! [`BandFile::verify`] checks every page and that the file is exactly the one its segment's
//! sketches make.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::build::{emit, head_for, segment_identity, BuildBudget};
use super::layout::{read_bits, BandHead, Geometry, BANDS_MAGIC, BANDS_OLDEST, BANDS_VERSION, BASE_BITS, ENDS_PER_PAGE, GROUP_BUCKETS, PAGE_BYTES, PAGE_CRC_BYTES};
use super::{tag, BandDesign};
use crate::error::{Error, Location, Result};
use crate::integrity::{check_magic_and_version, verify_crc};
use crate::segment::layout::slice;
use crate::segment::Segment;
use crate::storage::{FileBytes, FillError, Storage};

/// An open band file.
#[derive(Debug)]
pub(crate) struct BandFile {
    path: PathBuf,
    bytes: FileBytes,
    head: BandHead,
    geometry: Geometry,
    /// One bit per page, set once the page matched its CRC (the mapped bytes never change).
    verified: Box<[AtomicU64]>,
}

impl BandFile {
    /// Opens the band file at `path` of `segment`: its magic, version and head, and that
    /// it belongs to `segment` (entries, length, footer, sketch layout) and has the length
    /// its head implies. Reads no page.
    pub(crate) fn open(storage: &dyn Storage, path: &Path, segment: &Segment) -> Result<BandFile> {
        let bytes = storage.read(path).map_err(|e| Error::io(path, "read", e))?;
        let version = check_magic_and_version(path, &bytes, &BANDS_MAGIC, "band file (magic SIMDXBND)", BANDS_OLDEST..=BANDS_VERSION)?;
        let head = BandHead::decode(&bytes, version).map_err(|f| f.into_error(path))?;
        let (segment_len, footer_crc) = segment_identity(segment);
        let layout = segment.sketch_layout();
        let problem = if head.entries != segment.len() || head.segment_len != segment_len || head.segment_footer_crc != footer_crc {
            Some(format!("it was made for another segment ({} entries, {} bytes), not {} ({} entries, {segment_len} bytes)", head.entries, head.segment_len, segment.path().display(), segment.len()))
        } else if layout != Some((usize::from(head.sketch_bytes), head.scheme)) {
            Some(format!("its sketches ({} bytes, scheme {:02x?}) are not the segment's", head.sketch_bytes, head.scheme))
        } else if BandDesign::for_segment(head.entries, usize::from(head.sketch_bytes)) != Some(head.design) {
            Some(format!("its design ({} bands, {} bucket bits) is not the one for {} entries", head.design.bands, head.design.bucket_bits, head.entries))
        } else {
            None
        };
        if let Some(p) = problem {
            return Err(Error::corrupt(path, 0, p));
        }
        let geometry = head.geometry();
        let len = geometry.file_len(head.design.bands);
        if bytes.len() as u64 != len {
            return Err(Error::corrupt(path, bytes.len() as u64, format!("the file is {} bytes, its head implies {len}", bytes.len())));
        }
        let pages = (len / PAGE_BYTES).div_ceil(64) as usize;
        Ok(BandFile { path: path.to_path_buf(), bytes, head, geometry, verified: (0..pages).map(|_| AtomicU64::new(0)).collect() })
    }

    /// The design.
    pub(crate) fn design(&self) -> BandDesign {
        self.head.design
    }

    /// The file's length in bytes.
    pub(crate) fn file_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The payload of the page at `offset`, after its CRC check (once per open file).
    fn page(&self, offset: u64) -> Result<&[u8]> {
        let what = "band page";
        let page = slice(&self.bytes, offset, PAGE_BYTES, what).map_err(|f| f.into_error(&self.path))?;
        let (body, crc) = page.split_at((PAGE_BYTES - PAGE_CRC_BYTES) as usize);
        let n = offset / PAGE_BYTES;
        let word = self.verified.get((n / 64) as usize);
        let bit = 1u64 << (n % 64);
        if word.is_none_or(|w| w.load(Ordering::Relaxed) & bit == 0) {
            let stored = u32::from_le_bytes(crc.try_into().unwrap_or([0; 4]));
            verify_crc(body, stored).map_err(|m| m.corrupt(&self.path, offset, Location::default(), what))?;
            if let Some(w) = word {
                w.fetch_or(bit, Ordering::Relaxed);
            }
        }
        Ok(body)
    }

    /// The format version of the file (1 is still read, and kept until its segment is merged).
    pub(crate) fn version(&self) -> u32 {
        self.head.version
    }

    /// The entries of bucket `i` of band `b`: `start .. end` in the band's entry order.
    fn bucket(&self, b: u32, i: u64) -> Result<(u64, u64)> {
        let g = &self.geometry;
        let (start, end, at) = if g.version == 1 {
            let end = |i: u64| -> Result<u64> { Ok(read_bits(self.page(g.dir_page(b, i / ENDS_PER_PAGE))?, (i % ENDS_PER_PAGE) * 32, 32)) };
            (if i == 0 { 0 } else { end(i - 1)? }, end(i)?, g.dir_page(b, i / ENDS_PER_PAGE))
        } else {
            let (group, j) = (i / GROUP_BUCKETS, i % GROUP_BUCKETS);
            let offset = g.dir_page(b, group / g.groups_per_page());
            let page = self.page(offset)?;
            let bit = (group % g.groups_per_page()) * g.group_bits();
            let (base, r) = (read_bits(page, bit, BASE_BITS), u64::from(g.dir_bits));
            let rel = |j: u64| read_bits(page, bit + BASE_BITS + j * r, r);
            (base + if j == 0 { 0 } else { rel(j - 1) }, base + rel(j), offset)
        };
        if start > end || end > g.banded {
            return Err(Error::corrupt(&self.path, at, format!("band {b} bucket {i} is entries {start} .. {end} of {}", g.banded)));
        }
        Ok((start, end))
    }

    /// Appends to `out` the ordinals of the entries whose band `b` equals `key` (and some
    /// whose band shares its bucket and tag only: the caller compares the sketches).
    pub(crate) fn lookup(&self, b: u32, key: u32, out: &mut Vec<u32>) -> Result<()> {
        if b >= self.head.design.bands {
            return Ok(());
        }
        let g = &self.geometry;
        let (mut at, end) = self.bucket(b, u64::from(self.head.design.bucket(key)))?;
        let want = tag(key, g.tag_bits);
        let (per_page, bits) = (g.per_page(), g.entry_bits());
        while at < end {
            let page_no = at / per_page;
            let page = self.page(g.entry_page(b, page_no))?;
            let last = end.min((page_no + 1) * per_page);
            for i in at % per_page..(last - 1) % per_page + 1 {
                let (t, ordinal) = g.unpack(read_bits(page, i * bits, bits));
                if t == want {
                    out.push(ordinal as u32);
                }
            }
            at = last;
        }
        Ok(())
    }

    /// Checks every page's CRC, then that the file is byte for byte the band file of its
    /// version `segment`'s sketches make (so every entry is where a lookup finds it).
    pub(crate) fn verify(&self, segment: &Segment) -> Result<()> {
        let pages = self.bytes.len() as u64 / PAGE_BYTES;
        for p in 1..pages {
            self.page(p * PAGE_BYTES)?;
        }
        let made = head_for(segment)?.map(|h| if self.head.version == 1 { h.as_version_1() } else { h });
        if made != Some(self.head) {
            return Err(Error::corrupt(&self.path, 0, "the band file's head differs from the one the segment's sketches make"));
        }
        let mut compare = Compare { expected: &self.bytes, at: 0, mismatch: None };
        match emit(segment, &self.head, BuildBudget::default(), None, &mut compare) {
            Ok(len) if compare.mismatch.is_none() && len == self.bytes.len() as u64 => Ok(()),
            Ok(_) | Err(FillError::Write(_)) => {
                let at = compare.mismatch.unwrap_or(compare.at as u64);
                Err(Error::corrupt(&self.path, at, "the band file differs from the one the segment's sketches make"))
            }
            Err(FillError::Source(e)) => Err(e),
        }
    }
}

/// A sink that compares what is written with `expected`, recording the first difference.
struct Compare<'a> {
    expected: &'a [u8],
    at: usize,
    mismatch: Option<u64>,
}

impl Write for Compare<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.mismatch.is_none() {
            let have = self.expected.get(self.at..self.at + buf.len());
            if have != Some(buf) {
                let first = have.map_or(0, |h| h.iter().zip(buf).take_while(|(a, b)| a == b).count());
                self.mismatch = Some((self.at + first) as u64);
                return Err(std::io::Error::other("band file differs"));
            }
        }
        self.at += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::super::build::{head_for, write_band_file};
    use super::*;
    use crate::bands::band_key;
    use crate::codec::{Codec, SymbolHistogram};
    use crate::confirm::minhash_scheme;
    use crate::segment::{IdColumn, SegmentWriter, SketchColumn};
    use crate::storage::MemStorage;

    /// A segment of `n` entries with random 64-byte sketches (every seventh without one),
    /// written as the engine writes one (table 0 and the columns in `(fingerprint, id)` order).
    fn segment(storage: &MemStorage, n: u64) -> (Segment, Vec<(u64, [u8; 64])>) {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut rows: Vec<(u64, u64, [u8; 64])> = (0..n)
            .map(|id| {
                let mut sketch = [0u8; 64];
                if id % 7 != 0 {
                    for c in sketch.chunks_mut(8) {
                        // few distinct values per band, so buckets hold several entries
                        c.copy_from_slice(&((next() % 5) | (next() << 40)).to_le_bytes());
                    }
                }
                (next(), id, sketch)
            })
            .collect();
        rows.sort_by_key(|r| (r.0, r.1));
        let design = crate::plan::planned_design(&crate::plan::PlanOptions::new(n, 3)).unwrap();
        let column = SketchColumn { bytes: 64, scheme: minhash_scheme(1, 512, 1) };
        let path = std::path::Path::new("b/seg.sdx");
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

    #[test]
    fn the_bytes_do_not_depend_on_the_budget_and_lookups_find_every_band() {
        let storage = MemStorage::default();
        let (seg, stored) = segment(&storage, 3000);
        let head = head_for(&seg).expect("read").expect("banded");
        assert_eq!(head.banded, 3000 - 3000u64.div_ceil(7));
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
        let path = std::path::Path::new("b/x.sdb");
        assert!(write_band_file(&storage, &seg, path, BuildBudget { entries: 5 }, None).expect("write").is_some());
        let file = BandFile::open(&storage, path, &seg).expect("open");
        file.verify(&seg).expect("verify");
        // every entry with a sketch is found under each of its bands, and only entries
        // that share the bucket and tag are returned
        let ids: Vec<u64> = (0..seg.len()).map(|o| seg.doc_id(o).expect("id")).collect();
        // the fingerprint at each ordinal is table 0's entry there
        for (o, e) in (0u64..).zip(seg.entries()) {
            assert_eq!(seg.fingerprint_at(o).unwrap(), e.unwrap().0, "ordinal {o}");
        }
        for &(id, sketch) in stored.iter().step_by(13) {
            for b in 0..16 {
                let key = band_key(&sketch, b).expect("band");
                let mut found = Vec::new();
                file.lookup(b, key, &mut found).expect("lookup");
                let found_ids: Vec<u64> = found.iter().map(|&o| ids[o as usize]).collect();
                assert_eq!(found_ids.contains(&id), id % 7 != 0, "id {id} band {b}");
                for &o in &found {
                    let other = band_key(seg.sketch(u64::from(o)).expect("sketch"), b).expect("band");
                    assert_eq!((head.design.bucket(other), tag(other, head.tag_bits)), (head.design.bucket(key), tag(key, head.tag_bits)));
                }
            }
        }
    }

    /// Every ordinal whose band `b` is `key` among `segment`'s sketches (the oracle), and
    /// what `file`'s lookup finds once its candidates are compared on the whole band.
    fn found_and_truth(file: &BandFile, seg: &Segment, b: u32, key: u32) -> (Vec<u32>, Vec<u32>) {
        let mut found = Vec::new();
        file.lookup(b, key, &mut found).expect("lookup");
        found.retain(|&o| band_key(seg.sketch(u64::from(o)).expect("sketch"), b) == Some(key));
        found.sort_unstable();
        // entries without a sketch (all zero) are in no band
        let truth = (0..seg.len() as u32)
            .filter(|&o| {
                let s = seg.sketch(u64::from(o)).expect("sketch");
                !crate::bands::is_empty_sketch(s) && band_key(s, b) == Some(key)
            })
            .collect();
        (found, truth)
    }

    #[test]
    fn version_1_files_are_read_and_answer_as_version_2_does() {
        let storage = MemStorage::default();
        let (seg, stored) = segment(&storage, 1500);
        let head = head_for(&seg).expect("read").expect("banded");
        assert_eq!((head.version, head.tag_bits, head.ordinal_bits), (2, 6, 11));
        let (v1, v2) = (std::path::Path::new("b/v1.sdb"), std::path::Path::new("b/v2.sdb"));
        for (path, head) in [(v1, head.as_version_1()), (v2, head)] {
            let mut out = Vec::new();
            emit(&seg, &head, BuildBudget::default(), None, &mut out).map_err(|_| "emit").expect("emit");
            storage.put(path, &out);
        }
        let old = BandFile::open(&storage, v1, &seg).expect("open version 1");
        let new = BandFile::open(&storage, v2, &seg).expect("open version 2");
        assert_eq!((old.version(), new.version()), (1, 2));
        assert!(new.file_len() < old.file_len(), "{} against {}", new.file_len(), old.file_len());
        old.verify(&seg).expect("verify version 1");
        new.verify(&seg).expect("verify version 2");
        for &(_, sketch) in stored.iter().step_by(7) {
            for b in 0..16 {
                let key = band_key(&sketch, b).expect("band");
                let (a, truth) = found_and_truth(&old, &seg, b, key);
                assert_eq!(a, truth, "version 1, band {b}");
                assert_eq!(found_and_truth(&new, &seg, b, key).0, truth, "version 2, band {b}");
            }
        }
    }

    #[test]
    fn the_golden_version_1_file_still_opens_verifies_and_finds_every_band() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/v5/index-sketched");
        let storage = MemStorage::default();
        let (seg_path, bands_path) = (std::path::Path::new("f/seg.sdx"), std::path::Path::new("f/seg.sdb"));
        storage.put(seg_path, &std::fs::read(dir.join("seg-000000000004.sdx")).expect("fixture segment"));
        let golden = std::fs::read(dir.join("seg-000000000004.sdb")).expect("fixture band file");
        assert!(golden.starts_with(b"SIMDXBND\x01\0\0\0"), "the fixture is version 1");
        storage.put(bands_path, &golden);
        let seg = Segment::open_with(&storage, seg_path).expect("segment");
        let file = BandFile::open(&storage, bands_path, &seg).expect("open version 1");
        assert_eq!(file.version(), 1);
        file.verify(&seg).expect("verify");
        let mut banded = 0;
        for o in 0..seg.len() {
            let sketch = seg.sketch(o).expect("sketch").to_vec();
            if sketch.iter().all(|&b| b == 0) {
                continue;
            }
            banded += 1;
            for b in 0..file.design().bands {
                let key = band_key(&sketch, b).expect("band");
                let (found, truth) = found_and_truth(&file, &seg, b, key);
                assert!(found.contains(&(o as u32)), "ordinal {o} band {b}");
                assert_eq!(found, truth);
            }
        }
        assert!(banded > 10, "{banded} sketches");
    }
}
