//! Reading a band file: [`BandFile::open`] maps it and checks its head against its segment
//! (no page is checked; the directory pages of a mapped file are copied into memory, where
//! every lookup reads one); [`BandFile::lookup`] finds the ordinals of the entries whose
//! band equals the query's, checking each page against its CRC the first time it is read
//! ([`BandFile::lookup_all`]: every band of a sketch, its entry pages asked for at once
//! first by [`BandFile::ask_ahead`] when lookups have been waiting for the disk);
//! [`BandFile::verify`] checks every page and that the file is exactly the one its segment's
//! sketches make.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::build::{emit, head_for, segment_identity, BuildBudget};
use super::layout::{read_bits, BandHead, Geometry, BANDS_MAGIC, BANDS_OLDEST, BANDS_VERSION, BASE_BITS, BLOCK_BUCKETS, ENDS_PER_PAGE, GROUP_BUCKETS, HEAD_BYTES, PAGE_BYTES, PAGE_CRC_BYTES, PAYLOAD_BITS};
use super::stream::{block_lookup, stream_bits};
use super::{band_key, tag, BandDesign};
use crate::error::{Error, Location, Result};
use crate::integrity::{check_magic_and_version, verify_crc};
use crate::segment::layout::slice;
use crate::segment::{prefetch_line, ColdReads, Segment};
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
    /// A mapped file's directory pages, band after band, copied at open: every lookup reads
    /// one, so they stay in memory rather than cost a read from the disk each when the page
    /// cache has let them go (`None`: the file's bytes are in memory already). The same
    /// bytes as the file's, checked against their CRCs the same way.
    dirs: Option<Box<[u8]>>,
    /// Whether lookups have been waiting for the disk ([`Self::ask_ahead`] then asks for
    /// every band's entry pages before any is read).
    cold: ColdReads,
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
        let dirs = bytes.is_mapped().then(|| resident_directories(&bytes, &geometry, head.design.bands));
        // a file just mapped is taken to be on the disk until its lookups show otherwise
        let cold = ColdReads::default();
        if dirs.is_some() {
            cold.set_cold();
        }
        Ok(BandFile { path: path.to_path_buf(), bytes, head, geometry, verified: (0..pages).map(|_| AtomicU64::new(0)).collect(), dirs, cold })
    }

    /// Bytes of the directory pages kept in memory (0 when the file's bytes are).
    pub(crate) fn resident_bytes(&self) -> usize {
        self.dirs.as_deref().map_or(0, <[u8]>::len)
    }

    /// True when lookups have been waiting for the disk: a caller about to read the
    /// candidates' sketches should ask for them all first.
    pub(crate) fn is_cold(&self) -> bool {
        self.cold.is_cold()
    }

    /// Makes the next lookups of every band ask ahead (`cold`, as after waiting for the
    /// disk) or not.
    #[cfg(test)]
    pub(crate) fn set_cold(&self, cold: bool) {
        if cold {
            self.cold.set_cold();
        } else {
            self.cold.set_warm();
        }
    }

    /// When lookups have been waiting for the disk (a file just mapped is taken to be),
    /// asks the kernel for the entry pages a lookup of every band of `sketch` reads, so
    /// that their reads overlap, and returns true (to pass to [`Self::lookup_all`]).
    pub(crate) fn ask_ahead(&self, sketch: &[u8]) -> bool {
        let cold = self.cold.is_cold();
        if cold {
            self.will_need_entry_pages(sketch);
        }
        cold
    }

    /// [`Self::lookup`] of every band of `sketch` (the file's bands; a shorter sketch's
    /// missing bands are not looked up), timed to tell whether they waited for the disk
    /// (`asked`: whether [`Self::ask_ahead`] asked for their pages).
    pub(crate) fn lookup_all(&self, sketch: &[u8], asked: bool, out: &mut Vec<u32>) -> Result<()> {
        let clock = self.bytes.is_mapped().then(std::time::Instant::now);
        for b in 0..self.head.design.bands {
            if let Some(key) = band_key(sketch, b) {
                self.lookup(b, key, out)?;
            }
        }
        if let Some(clock) = clock {
            self.cold.observe_twice(asked, clock.elapsed());
        }
        Ok(())
    }

    /// Asks the kernel for the entry pages a lookup of each band of `sketch` reads (from the
    /// directory, in memory). A hint: a directory page that fails its check asks for
    /// nothing (the lookup reports it).
    fn will_need_entry_pages(&self, sketch: &[u8]) {
        let g = &self.geometry;
        self.entry_bits_of(sketch, |b, from, last| {
            let (first, last) = (from / PAYLOAD_BITS, (last / PAYLOAD_BITS).min(g.entry_pages.saturating_sub(1)));
            if first <= last {
                self.bytes.will_need(g.entry_page(b, first) as usize, ((last - first + 1) * PAGE_BYTES) as usize);
            }
        });
    }

    /// For each band of `sketch`, `f(band, first, last)`: the bits of the band's entry pages
    /// (payload bits, counted from its first entry page; version 1 and 2: whole pages) its
    /// lookup reads, from the directory. A directory page that fails its check gives nothing
    /// (the lookup reports it).
    fn entry_bits_of(&self, sketch: &[u8], mut f: impl FnMut(u32, u64, u64)) {
        let g = &self.geometry;
        for b in 0..self.head.design.bands {
            let Some(key) = band_key(sketch, b) else { continue };
            let i = u64::from(self.head.design.bucket(key));
            let bits = if g.version >= 3 {
                self.bucket(b, i / BLOCK_BUCKETS).map(|(start, end)| {
                    let k = i / BLOCK_BUCKETS;
                    let from = g.block_bit(k, start);
                    (from, (g.block_bit(k, end) + (g.block_buckets(k) << g.high_bits)).max(from + 1) - 1)
                })
            } else {
                self.bucket(b, i).map(|(start, end)| (start / g.per_page() * PAYLOAD_BITS, end.max(start + 1).saturating_sub(1) / g.per_page() * PAYLOAD_BITS))
            };
            if let Ok((from, last)) = bits {
                f(b, from, last);
            }
        }
    }

    /// Asks the CPU for the cache lines of the directory entries a lookup of each band of
    /// `sketch` reads, without waiting for them: called for every segment's band file
    /// before [`Self::prefetch_entries`], so that a check's directory reads overlap.
    pub(crate) fn prefetch_directories(&self, sketch: &[u8]) {
        let g = &self.geometry;
        if g.version < 3 {
            return;
        }
        for b in 0..self.head.design.bands {
            let Some(key) = band_key(sketch, b) else { continue };
            let group = u64::from(self.head.design.bucket(key)) / BLOCK_BUCKETS / GROUP_BUCKETS;
            let bit = (group % g.groups_per_page()) * g.group_bits();
            if let Some(byte) = self.resident(g.dir_page(b, group / g.groups_per_page())).and_then(|page| page.get((bit / 8) as usize)) {
                prefetch_line(byte);
            }
        }
    }

    /// Asks the CPU for the first cache line of the entries a lookup of each band of
    /// `sketch` reads (their directory entries now at hand), without waiting for them: a
    /// warm check's entry reads overlap, as [`Self::ask_ahead`] makes a cold check's.
    pub(crate) fn prefetch_entries(&self, sketch: &[u8]) {
        let g = &self.geometry;
        self.entry_bits_of(sketch, |b, from, _| {
            let at = g.entry_page(b, from / PAYLOAD_BITS) + from % PAYLOAD_BITS / 8;
            if let Some(byte) = usize::try_from(at).ok().and_then(|at| self.bytes.get(at)) {
                prefetch_line(byte);
            }
        });
    }

    /// Where the block a lookup of `key` in band `b` reads lies (version 3 and on: its
    /// directory entry, read now), its cache lines asked of the CPU without waiting for
    /// them: a batch's walk through a band's keys locates a few keys ahead and hands each
    /// its location back ([`Self::lookup_located`]), so that its reads overlap (against a
    /// large file each key's block is a new one, not cached) and the directory is read once
    /// a key. `None` (the lookup reads the directory itself): an older version, or a
    /// directory page that fails its check (the lookup reports it).
    pub(crate) fn locate_ahead(&self, b: u32, key: u32) -> Option<(u64, u64)> {
        let g = &self.geometry;
        if g.version < 3 || b >= self.head.design.bands {
            return None;
        }
        let k = u64::from(self.head.design.bucket(key)) / BLOCK_BUCKETS;
        let (start, end) = self.bucket(b, k).ok()?;
        let from = g.block_bit(k, start);
        let last = (g.block_bit(k, end) + (g.block_buckets(k) << g.high_bits)).max(from + 1) - 1;
        // the lines of the block's first and last bits (a block is a few lines: the ones
        // between are the neighbours the CPU fetches with them, or soon after)
        for bit in [from, last] {
            let at = g.entry_page(b, bit / PAYLOAD_BITS) + bit % PAYLOAD_BITS / 8;
            if let Some(byte) = usize::try_from(at).ok().and_then(|at| self.bytes.get(at)) {
                prefetch_line(byte);
            }
        }
        Some((start, end))
    }

    /// The directory page at `offset` when it is kept in memory.
    fn resident(&self, offset: u64) -> Option<&[u8]> {
        let (dirs, g) = (self.dirs.as_deref()?, &self.geometry);
        let band_bytes = g.band_pages() * PAGE_BYTES;
        let within = offset.checked_sub(HEAD_BYTES)?;
        let dir = (within % band_bytes).checked_sub(g.entry_pages * PAGE_BYTES)?;
        let at = usize::try_from(within / band_bytes * g.dir_pages * PAGE_BYTES + dir).ok()?;
        dirs.get(at..at + PAGE_BYTES as usize)
    }

    /// The design.
    pub(crate) fn design(&self) -> BandDesign {
        self.head.design
    }

    /// Whether the file holds every entry of its segment (its head's `banded` equals
    /// `entries`: every entry has a sketch).
    pub(crate) fn holds_every_entry(&self) -> bool {
        self.head.banded == self.head.entries
    }

    /// The file's length in bytes.
    pub(crate) fn file_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The payload of the page at `offset`, after its CRC check (once per open file).
    fn page(&self, offset: u64) -> Result<&[u8]> {
        let what = "band page";
        let page = match self.resident(offset) {
            Some(page) => page,
            None => slice(&self.bytes, offset, PAGE_BYTES, what).map_err(|f| f.into_error(&self.path))?,
        };
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

    /// The format version of the file (1 and 2 are still read, and kept until their segment is merged).
    pub(crate) fn version(&self) -> u32 {
        self.head.version
    }

    /// The entries of directory slot `i` of band `b` (bucket `i`; version 3: block `i`):
    /// `start .. end` in the band's entry order.
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
        self.lookup_located(b, key, None, out)
    }

    /// [`Self::lookup`], with the directory entry of `key`'s block already read
    /// (`located`: what [`Self::locate_ahead`] returned for this band and key).
    pub(crate) fn lookup_located(&self, b: u32, key: u32, located: Option<(u64, u64)>, out: &mut Vec<u32>) -> Result<()> {
        if b >= self.head.design.bands {
            return Ok(());
        }
        let g = &self.geometry;
        let want = tag(key, g.tag_bits);
        if g.version >= 3 {
            return self.block_lookup(b, u64::from(self.head.design.bucket(key)), want, located, out);
        }
        let (mut at, end) = self.bucket(b, u64::from(self.head.design.bucket(key)))?;
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

    /// Version 3's lookup of bucket `i` of band `b`: its block's entries (the directory),
    /// then the bucket's in the block's unary high bits, their low entries after them.
    fn block_lookup(&self, b: u32, i: u64, want: u32, located: Option<(u64, u64)>, out: &mut Vec<u32>) -> Result<()> {
        let g = &self.geometry;
        let k = i / BLOCK_BUCKETS;
        let (start, end) = match located {
            Some(found) => found,
            None => self.bucket(b, k)?,
        };
        let from = g.block_bit(k, start);
        let page = |p: u64| {
            if p >= g.entry_pages {
                return Err(Error::corrupt(&self.path, g.entry_page(b, g.entry_pages), format!("band {b} block {k} runs past the band's {} entry pages", g.entry_pages)));
            }
            self.page(g.entry_page(b, p))
        };
        // the block's first two pages, read once (a block's bits rarely reach a third)
        let last = (g.block_bit(k, end) + (g.block_buckets(k) << g.high_bits)).max(from + 1) - 1;
        let (first, p0) = (from / super::layout::PAYLOAD_BITS, page(from / super::layout::PAYLOAD_BITS)?);
        let p1 = if last / super::layout::PAYLOAD_BITS > first { Some(page(first + 1)?) } else { None };
        let cached = |p: u64| match p1 {
            _ if p == first => Ok(p0),
            Some(p1) if p == first + 1 => Ok(p1),
            _ => page(p),
        };
        let bits = |at: u64, width: u64| stream_bits(cached, from + at, width);
        let corrupt = |detail: String| Error::corrupt(&self.path, g.entry_page(b, from / super::layout::PAYLOAD_BITS), format!("band {b} block {k}: {detail}"));
        block_lookup(g, bits, corrupt, end - start, g.block_buckets(k), i % BLOCK_BUCKETS, want, out)
    }

    /// Checks every page's CRC, then that the file is byte for byte the band file of its
    /// version `segment`'s sketches make (so every entry is where a lookup finds it).
    pub(crate) fn verify(&self, segment: &Segment) -> Result<()> {
        let pages = self.bytes.len() as u64 / PAGE_BYTES;
        for p in 1..pages {
            self.page(p * PAGE_BYTES)?;
        }
        let made = if self.head.version == 1 { head_for(segment, 2)?.map(BandHead::as_version_1) } else { head_for(segment, self.head.version)? };
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

/// The directory pages of every band of a mapped file, band after band: asked for all at
/// once (a band's are contiguous), copied, then let go of in the mapping (the copy is what
/// lookups read).
fn resident_directories(bytes: &FileBytes, g: &Geometry, bands: u32) -> Box<[u8]> {
    let len = (g.dir_pages * PAGE_BYTES) as usize;
    for b in 0..bands {
        bytes.will_need(g.dir_page(b, 0) as usize, len);
    }
    let mut dirs = Vec::with_capacity(len * bands as usize);
    for b in 0..bands {
        let at = g.dir_page(b, 0) as usize;
        dirs.extend_from_slice(bytes.get(at..at + len).unwrap_or_default());
        bytes.done_with(at, len);
    }
    dirs.into_boxed_slice()
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
