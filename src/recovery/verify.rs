//! Full verification of an index directory, in named steps: the manifest
//! ([`Pass::manifest`]), every file by its kind ([`Pass::file`]: segments byte by byte
//! through `verify_segment`, band files, tombstone files, the pinned recipe), the files the
//! manifest lists ([`Pass::listed_files`]) and those derived from them ([`Pass::band_files`]),
//! and every live log record in order ([`Pass::logs`]), checking that the files agree with the manifest and
//! with each other (sizes, counts, sequence numbers).
//!
//! It only reads. Orphans, torn log tails, unknown files and a missing band file (derived
//! data, built again by the next writable open) are *notes*, not problems: a running
//! writer leaves them in normal operation and the next writable open handles them.
//!
//! Beside a running writer it checks one consistent version, as a read-only open does: the
//! manifest's number before and after a pass; when a writer replaced the manifest in
//! between (a flush or compaction deleted or added files the pass saw half of), the pass
//! is thrown away and run again, and the report says how many passes it took
//! ([`IndexVerifyReport::passes`]). A damaged file is reported only from a pass no writer
//! disturbed.

use std::path::Path;

use super::report::{FileProblem, IndexVerifyReport};
use super::salvage_segments::segment_outlook;
use super::verify_segment::verify_segment;
use crate::bands::design_for;
use crate::engine::files::{self, FileKind};
use crate::engine::log::{scan_log, LogEnd, ScanMode};
use crate::engine::manifest::{Manifest, MANIFEST_NAME};
use crate::engine::seal::{missing_log, shortfall};
use crate::engine::{banded, id_tables, pinned_recipe, tombstone};
use crate::error::{Error, Result};
use crate::segment::Segment;
use crate::storage::Storage;

/// Most passes [`verify_index`] makes while a writer keeps replacing the manifest.
const MAX_PASSES: u32 = 20;

/// Verifies the index in `dir`, one consistent version of it even while a writer runs
/// (see the module docs; after 20 passes a writer disturbed, the report is
/// [`IndexVerifyReport::unsettled`]). Returns `Err` when the directory cannot be listed,
/// and [`Error::NoIndex`] when it holds no manifest and no index file (not damage: nothing
/// to verify); every fault in a file is in the report.
pub fn verify_index(storage: &dyn Storage, dir: &Path) -> Result<IndexVerifyReport> {
    let number = || Manifest::load(storage, dir).ok().flatten().map(|m| m.number);
    let mut passes = 0;
    loop {
        passes += 1;
        let before = number();
        let mut report = verify_pass(storage, dir)?;
        let settled = before == number();
        report.passes = passes;
        report.unsettled = !settled;
        if settled || passes >= MAX_PASSES {
            return Ok(report);
        }
    }
}

/// One pass over the directory, step by step.
fn verify_pass(storage: &dyn Storage, dir: &Path) -> Result<IndexVerifyReport> {
    let names = storage.list(dir).map_err(|e| Error::io(dir, "list", e))?;
    let mut pass = Pass { storage, dir, manifest: None, report: IndexVerifyReport::default(), logs: Vec::new(), merge_files: 0 };
    pass.manifest(&names)?;
    for name in &names {
        pass.file(name);
    }
    pass.listed_files(&names);
    pass.band_files(&names);
    pass.logs();
    Ok(pass.report)
}

/// What one pass has read so far.
struct Pass<'a> {
    storage: &'a dyn Storage,
    dir: &'a Path,
    manifest: Option<Manifest>,
    report: IndexVerifyReport,
    /// The live logs found, by number.
    logs: Vec<(u64, String)>,
    /// `merge.*` files: a merge in progress.
    merge_files: usize,
}

impl Pass<'_> {
    /// Step 1: the manifest, or why there is none (no index at all is an error, not damage);
    /// and the pinned recipe it records, when its file is gone.
    fn manifest(&mut self, names: &[String]) -> Result<()> {
        self.manifest = match Manifest::load(self.storage, self.dir) {
            Ok(Some(m)) => {
                self.report.checked.push((MANIFEST_NAME.into(), format!("{} segments, {} tombstone files, log {} on", m.segments.len(), m.tombstones.len(), m.log_number)));
                Some(m)
            }
            Ok(None) => {
                // No manifest and no data file: not an index (or one a writer is creating
                // right now), which is not damage.
                if !files::holds_index_data(names) {
                    return Err(Error::NoIndex {
                        dir: self.dir.to_path_buf(),
                        hint: " and no index file: nothing to verify (a writer creating an index has not written its manifest yet)".into(),
                    });
                }
                self.report.problems.push(FileProblem {
                    file: MANIFEST_NAME.into(),
                    offset: None,
                    detail: "missing, though the directory holds index files: the manifest was lost (`simdex recover` rebuilds from the files)".into(),
                });
                None
            }
            Err(e) => {
                self.report.problem(MANIFEST_NAME, &e);
                None
            }
        };
        let recorded = self.recipe_crc();
        if recorded.is_some() && !names.iter().any(|n| matches!(files::parse(n), FileKind::Recipe)) {
            if let Err(e) = pinned_recipe::load_checked(self.storage, self.dir, recorded) {
                self.report.problem(files::RECIPE_NAME, &e);
            }
        }
        Ok(())
    }

    fn recipe_crc(&self) -> Option<u32> {
        self.manifest.as_ref().and_then(|m| m.recipe_crc)
    }

    /// Step 2: one file of the directory, by its kind.
    fn file(&mut self, name: &str) {
        match files::parse(name) {
            FileKind::Manifest | FileKind::Lock => {}
            FileKind::Recipe => self.recipe(name),
            FileKind::Temporary => self.report.notes.push(format!("{name}: temporary file of an unfinished write (removed by the next writable open)")),
            FileKind::Merge => self.merge_files += 1,
            FileKind::Unknown if is_set_aside(name) => self
                .report
                .notes
                .push(format!("{name}: set aside by a writable open (what was in a band file's place could not be read as one); not used: look at it, then remove it")),
            FileKind::Unknown => self.report.unknown.push(name.to_string()),
            FileKind::Segment(n) => self.segment(name, n),
            FileKind::Bands(n) => self.bands(name, n),
            FileKind::Ids(n) => self.id_table(name, n),
            FileKind::Tombstones(n) => self.tombstones(name, n),
            FileKind::Log(n) => {
                if self.manifest.as_ref().is_some_and(|m| n < m.log_number) {
                    self.report.notes.push(format!("{name}: obsolete log (already flushed; removed by the next writable open)"));
                } else {
                    self.logs.push((n, name.to_string()));
                }
            }
        }
    }

    /// The pinned fingerprint recipe: whole, and the one the manifest last recorded.
    fn recipe(&mut self, name: &str) {
        let recorded = self.recipe_crc();
        match pinned_recipe::load_checked(self.storage, self.dir, recorded) {
            Ok(Some(r)) => {
                let path = self.dir.join(name);
                if let Some(crc) = recorded.filter(|&c| self.storage.read_copy(&path).is_ok_and(|b| pinned_recipe::identity(&b) != c)) {
                    self.report.notes.push(format!(
                        "{name}: an intact recipe other than the one the manifest last recorded (CRC-32 {crc:#010x}): a re-pin a crash interrupted, or a file copied in; the next pin records it"
                    ));
                }
                self.report.checked.push((name.to_string(), format!("fingerprint recipe `{}`, IDF table {} bytes", r.options.trim_end().replace('\n', " "), r.idf_table.len())))
            }
            Ok(None) => {}
            Err(e) => self.report.problem(name, &e),
        }
    }

    /// A segment, byte by byte, and its entry count against the manifest's.
    fn segment(&mut self, name: &str, n: u64) {
        let meta = self.manifest.as_ref().and_then(|m| m.segments.iter().find(|s| s.number == n)).copied();
        if self.manifest.is_some() && meta.is_none() {
            self.report.notes.push(format!("{name}: not in the manifest: an orphan of an interrupted flush or compaction (removed by the next writable open)"));
            return;
        }
        let path = self.dir.join(name);
        let outlook = || segment_outlook(self.storage, &path, meta.map(|m| m.entries));
        let v = match verify_segment(self.storage, &path) {
            Ok(v) => v,
            Err(e) => {
                self.report.problem(name, &e);
                let outlook = outlook();
                self.report.recoverable.push((name.to_string(), outlook));
                return;
            }
        };
        for p in &v.problems {
            self.report.problems.push(FileProblem { file: name.to_string(), offset: Some(p.offset), detail: format!("{}{}", p.detail, p.location) });
        }
        if let Some(meta) = meta.filter(|m| v.is_clean() && v.entries != m.entries) {
            self.report.problems.push(FileProblem { file: name.to_string(), offset: None, detail: format!("holds {} entries, the manifest says {}", v.entries, meta.entries) });
        }
        if v.is_clean() {
            self.report.checked.push((name.to_string(), format!("{} fingerprints, {} tables, {} blocks", v.entries, v.tables, v.blocks)));
        } else {
            let outlook = outlook();
            self.report.recoverable.push((name.to_string(), outlook));
        }
    }

    /// A band file: every page, and that it is the file its segment's sketches make.
    fn bands(&mut self, name: &str, n: u64) {
        if self.manifest.as_ref().is_some_and(|m| !m.segments.iter().any(|s| s.number == n)) {
            self.report.notes.push(format!("{name}: the band file of a segment not in the manifest: an orphan (removed by the next writable open)"));
            return;
        }
        match banded::verify_band_file(self.storage, self.dir, n) {
            Ok(summary) => self.report.checked.push((name.to_string(), summary)),
            Err(e) => {
                self.report.problem(name, &e);
                self.report.notes.push(format!("{name}: derived from the segment's sketches: remove it, and the next writable open builds it again"));
            }
        }
    }

    /// An id table (`seg-N.sdi`): every page, derived from the segment's document ids.
    fn id_table(&mut self, name: &str, n: u64) {
        if self.manifest.as_ref().is_some_and(|m| !m.segments.iter().any(|s| s.number == n)) {
            self.report.notes.push(format!("{name}: the id table of a segment not in the manifest: an orphan (removed by the next writable open)"));
            return;
        }
        match id_tables::verify_id_table(self.storage, self.dir, n) {
            Ok(summary) => self.report.checked.push((name.to_string(), summary)),
            Err(e) => {
                self.report.problem(name, &e);
                self.report.notes.push(format!(
                    "{name}: derived from the segment's document ids (nothing is lost): a writer builds it again when a lookup reads a damaged page; remove it to have the next writable open build it"
                ));
            }
        }
    }

    /// A tombstone file: whole, and its count against the manifest's.
    fn tombstones(&mut self, name: &str, n: u64) {
        let meta = self.manifest.as_ref().and_then(|m| m.tombstones.iter().find(|t| t.number == n)).copied();
        if self.manifest.is_some() && meta.is_none() {
            self.report.notes.push(format!("{name}: not in the manifest: an orphan (removed by the next writable open)"));
            return;
        }
        let path = self.dir.join(name);
        match tombstone::read(self.storage, &path) {
            Err(e) => {
                self.report.problem(name, &e);
                let outlook = match tombstone::read_pages(self.storage, &path) {
                    Ok((kept, damaged)) => format!(
                        "{} of its tombstones; the {} in damaged pages are lost, and recover counts the deleted pairs that may come back",
                        kept.len(),
                        damaged.iter().map(|d| d.count).sum::<u64>()
                    ),
                    Err(_) => "none of its tombstones (its header is damaged): recover counts the deleted pairs that may come back".to_string(),
                };
                self.report.recoverable.push((name.to_string(), outlook));
            }
            Ok(t) => {
                if let Some(meta) = meta.filter(|m| m.count != t.len() as u64) {
                    self.report.problems.push(FileProblem {
                        file: name.to_string(),
                        offset: None,
                        detail: format!("holds {} tombstones, the manifest says {}", t.len(), meta.count),
                    });
                }
                self.report.checked.push((name.to_string(), format!("{} tombstones", t.len())));
            }
        }
    }

    /// Step 3: every file the manifest lists is there; a merge in progress; the newest log.
    fn listed_files(&mut self, names: &[String]) {
        if let Some(m) = &self.manifest {
            let listed = m.segments.iter().map(|s| files::segment_name(s.number)).chain(m.tombstones.iter().map(|t| files::tombstones_name(t.number)));
            for name in listed.filter(|n| !names.contains(n)).collect::<Vec<_>>() {
                self.report.problems.push(FileProblem { file: name, offset: None, detail: "listed in the manifest but missing".into() });
            }
        }
        if self.merge_files > 0 {
            self.report.notes.push(format!(
                "a merge in progress: {} merge.* files (its checkpoint, output so far and sorted runs), which the next compaction of the same segments goes on from; a writable open removes them once those segments are gone",
                self.merge_files
            ));
        }
        if let Some(m) = &self.manifest {
            if let Some(problem) = missing_log(m, self.logs.len()) {
                self.report.problems.push(FileProblem { file: files::log_name(m.log_number), offset: None, detail: problem });
            }
        }
    }

    /// Step 4: the band file of every segment that gets one, when it is not a file the
    /// listing saw (those were checked in step 2). It is derived data: missing, the next
    /// writable open builds it (a note); anything else in its place (a directory, something
    /// unreadable) is a problem, which the next writable open sets aside.
    fn band_files(&mut self, names: &[String]) {
        let Some(m) = &self.manifest else { return };
        for meta in &m.segments {
            let (segment_name, name) = (files::segment_name(meta.number), files::bands_name(meta.number));
            if names.contains(&name) || !names.contains(&segment_name) {
                continue;
            }
            // A segment that does not open is reported in step 2; a segment without
            // sketches, or too small for bands, gets no band file.
            let segment = Segment::open_with(self.storage, &self.dir.join(&segment_name));
            if segment.ok().and_then(|s| design_for(&s)).is_none() {
                continue;
            }
            match self.storage.read(&self.dir.join(&name)) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.report.notes.push(format!(
                    "{name}: missing (derived from {segment_name}'s sketches): rebuilt on the next writable open; until then the crawler's check answers from {segment_name}'s tables"
                )),
                Err(e) => {
                    let what = if e.kind() == std::io::ErrorKind::IsADirectory { "a directory".to_string() } else { format!("not readable ({e})") };
                    self.report.problems.push(FileProblem {
                        file: name.clone(),
                        offset: None,
                        detail: format!("{what}, not a band file: the next writable open sets it aside ({name}.set-aside) and builds the band file again"),
                    });
                }
            }
        }
    }

    /// Step 5: the live logs in order (and those the manifest has a seal of), every record
    /// checked, sequence numbers continuing, each log holding what its seal says.
    fn logs(&mut self) {
        let seals = self.manifest.as_ref().map(|m| m.logs.clone()).unwrap_or_default();
        let mut logs = std::mem::take(&mut self.logs);
        logs.extend(seals.iter().map(|s| s.number).filter(|n| !logs.iter().any(|l| l.0 == *n)).map(|n| (n, files::log_name(n))).collect::<Vec<_>>());
        logs.sort_unstable();
        let mut next_seq = self.manifest.as_ref().map(|m| m.last_seq + 1);
        for (n, name) in logs {
            self.log(n, &name, seals.iter().find(|s| s.number == n), &mut next_seq);
        }
    }

    /// One log: its records, from `next_seq` on.
    fn log(&mut self, n: u64, name: &str, seal: Option<&crate::engine::manifest::LogMeta>, next_seq: &mut Option<u64>) {
        let path = self.dir.join(name);
        let bytes = match self.storage.read_copy(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && seal.is_some() => {
                if let Some(short) = seal.and_then(|s| shortfall(s, None, next_seq.map_or(0, |x| x - 1))) {
                    self.report.problems.push(FileProblem { file: name.to_string(), offset: None, detail: short.detail });
                }
                return;
            }
            Err(e) => return self.report.problem(name, &Error::io(&path, "read", e)),
        };
        let mut gap = None;
        let scanned = scan_log(&path, &bytes, n, ScanMode::Strict, |r| {
            if let Some(expected) = *next_seq {
                if r.last_seq() >= expected && r.seq != expected && gap.is_none() {
                    gap = Some((r.offset, expected, r.seq));
                }
            }
            *next_seq = Some(r.last_seq() + 1);
            Ok(())
        });
        let scan = match scanned {
            Ok(scan) => scan,
            Err(e) => {
                self.report.problem(name, &e);
                let rebuilds = "every record that passes its checksum; the operations lost between them are counted from their sequence numbers";
                return self.report.recoverable.push((name.to_string(), rebuilds.into()));
            }
        };
        if let Some((offset, expected, found)) = gap {
            self.report.problems.push(FileProblem {
                file: name.to_string(),
                offset: Some(offset),
                detail: format!("record starts at sequence number {found}, expected {expected}: records are missing"),
            });
        }
        if let Some(short) = seal.and_then(|s| shortfall(s, Some(scan.valid_len), next_seq.map_or(0, |x| x - 1))) {
            self.report.problems.push(FileProblem { file: name.to_string(), offset: Some(scan.valid_len), detail: short.detail });
            self.report.recoverable.push((name.to_string(), "every intact record (the operations lost are counted from the manifest's record of the log)".into()));
        } else if scan.end != LogEnd::Clean {
            self.report.notes.push(format!(
                "{name}: ends in {} bytes that are not a whole record ({:?}): the tail of a write cut short; the next writable open cuts it",
                bytes.len() as u64 - scan.valid_len,
                scan.end
            ));
        }
        self.report.checked.push((name.to_string(), format!("{} records, {} operations", scan.records, scan.ops)));
    }
}

/// A name a writable open gave what it set aside from a band file's place:
/// `seg-N.sdb.set-aside` or `seg-N.sdb.set-aside.K`.
fn is_set_aside(name: &str) -> bool {
    let Some((base, rest)) = name.split_once(".sdb.set-aside") else { return false };
    matches!(files::parse(&format!("{base}.sdb")), FileKind::Bands(_))
        && (rest.is_empty() || rest.strip_prefix('.').is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit())))
}
