//! Reading a band file: [`BandFile::open`] maps it and checks its head against its segment
//! (cheap: no page is read); [`BandFile::lookup`] finds the ordinals of the entries whose
//! band equals the query's, checking each page against its CRC the first time it is read;
//! [`BandFile::verify`] checks every page and that the file is exactly the one its segment's
//! sketches make.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::build::{emit, BuildBudget, Emit};
use super::layout::{BandHead, Geometry, BANDS_MAGIC, BANDS_VERSION, ENDS_PER_PAGE, ENTRIES_PER_PAGE, ENTRY_BYTES, PAGE_BYTES, PAGE_CRC_BYTES};
use super::{tag, BandDesign};
use crate::error::{Error, Location, Result};
use crate::integrity::{check_magic_and_version, verify_crc};
use crate::segment::layout::{slice, FOOTER_BYTES};
use crate::segment::Segment;
use crate::storage::{FileBytes, Storage};

/// The segment a band file belongs to: its length and the CRC-32 of its footer (which
/// covers the directory's CRC, so any other segment differs).
pub(crate) fn segment_identity(segment: &Segment) -> (u64, u32) {
    let bytes = segment.bytes();
    let footer = bytes.get(bytes.len().saturating_sub(FOOTER_BYTES)..).unwrap_or_default();
    (bytes.len() as u64, crc32fast::hash(footer))
}

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
        check_magic_and_version(path, &bytes, &BANDS_MAGIC, "band file (magic SIMDXBND)", BANDS_VERSION..=BANDS_VERSION)?;
        let head = BandHead::decode(&bytes).map_err(|f| f.into_error(path))?;
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

    /// Bucket end `i` of band `b` (entries in buckets `0..=i`).
    fn end(&self, b: u32, i: u64) -> Result<u64> {
        let page = self.page(self.geometry.dir_page(b, i / ENDS_PER_PAGE))?;
        let at = (i % ENDS_PER_PAGE) as usize * 4;
        let v = page.get(at..at + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes);
        let v = v.ok_or_else(|| Error::corrupt(&self.path, self.geometry.dir_page(b, i / ENDS_PER_PAGE), "bucket end outside its page"))?;
        if u64::from(v) > self.geometry.banded {
            return Err(Error::corrupt(&self.path, self.geometry.dir_page(b, i / ENDS_PER_PAGE), format!("band {b} bucket {i} ends at entry {v} of {}", self.geometry.banded)));
        }
        Ok(u64::from(v))
    }

    /// Appends to `out` the ordinals of the entries whose band `b` equals `key` (and some
    /// whose band shares its bucket and tag only: the caller compares the sketches).
    pub(crate) fn lookup(&self, b: u32, key: u32, out: &mut Vec<u32>) -> Result<()> {
        if b >= self.head.design.bands {
            return Ok(());
        }
        let bucket = u64::from(self.head.design.bucket(key));
        let start = if bucket == 0 { 0 } else { self.end(b, bucket - 1)? };
        let end = self.end(b, bucket)?;
        let want = tag(key);
        let mut at = start;
        while at < end {
            let page_no = at / ENTRIES_PER_PAGE;
            let page = self.page(self.geometry.entry_page(b, page_no))?;
            let last = end.min((page_no + 1) * ENTRIES_PER_PAGE);
            let from = ((at % ENTRIES_PER_PAGE) * ENTRY_BYTES) as usize;
            let to = from + ((last - at) * ENTRY_BYTES) as usize;
            for e in page.get(from..to).unwrap_or_default().chunks_exact(ENTRY_BYTES as usize) {
                if let [a, b1, c, d, t] = *e {
                    if t == want {
                        out.push(u32::from_le_bytes([a, b1, c, d]));
                    }
                }
            }
            at = last;
        }
        Ok(())
    }

    /// Checks every page's CRC, then that the file is byte for byte the band file
    /// `segment`'s sketches make (so every entry is where a lookup finds it).
    pub(crate) fn verify(&self, segment: &Segment) -> Result<()> {
        let pages = self.bytes.len() as u64 / PAGE_BYTES;
        for p in 1..pages {
            self.page(p * PAGE_BYTES)?;
        }
        let mut compare = Compare { expected: &self.bytes, at: 0, mismatch: None };
        match emit(segment, &self.head, BuildBudget::default(), &mut compare) {
            Ok(len) if compare.mismatch.is_none() && len == self.bytes.len() as u64 => Ok(()),
            Ok(_) | Err(Emit::Io(_)) => {
                let at = compare.mismatch.unwrap_or(compare.at as u64);
                Err(Error::corrupt(&self.path, at, "the band file differs from the one the segment's sketches make"))
            }
            Err(Emit::Read(e)) => Err(e),
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
