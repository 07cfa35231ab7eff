//! Full verification of an index directory: the manifest, every segment byte by byte
//! (`segment::verify`), every tombstone file, every live log record, and that the files
//! agree with the manifest and with each other (sizes, counts, sequence numbers).
//!
//! It only reads. Orphans, torn log tails and unknown files are *notes*, not problems: a
//! running writer leaves them in normal operation and the next writable open handles them.
//!
//! Beside a running writer it checks one consistent version, as a read-only open does: the
//! manifest's number before and after a pass; when a writer replaced the manifest in
//! between (a flush or compaction deleted or added files the pass saw half of), the pass
//! is thrown away and run again, and the report says how many passes it took
//! ([`IndexVerifyReport::passes`]). A damaged file is reported only from a pass no writer
//! disturbed.

use std::path::Path;

use super::files::{self, FileKind};
use super::log::{scan_log, LogEnd, ScanMode};
use super::manifest::{Manifest, MANIFEST_NAME};
use super::seal::shortfall;
use super::tombstone;
use crate::error::{Error, Result};
use crate::segment::verify::verify_segment_with;
use crate::storage::Storage;

/// One fault in one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileProblem {
    /// File name within the directory.
    pub file: String,
    /// Byte offset of the fault, when known.
    pub offset: Option<u64>,
    /// What is wrong.
    pub detail: String,
}

impl std::fmt::Display for FileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{}: byte offset {o}: {}", self.file, self.detail),
            None => write!(f, "{}: {}", self.file, self.detail),
        }
    }
}

/// What [`verify_index`] checked and found.
#[derive(Clone, Debug, Default)]
pub struct IndexVerifyReport {
    /// Files checked, with a one-line summary each.
    pub checked: Vec<(String, String)>,
    /// Faults.
    pub problems: Vec<FileProblem>,
    /// Things worth knowing that are not damage (orphans, torn log tails).
    pub notes: Vec<String>,
    /// Files that are not simdex's.
    pub unknown: Vec<String>,
    /// Per damaged file: what `simdex recover` can rebuild of it.
    pub recoverable: Vec<(String, String)>,
    /// Passes over the directory: more than 1 when a writer replaced the manifest while a
    /// pass ran (that pass's findings were thrown away).
    pub passes: u32,
    /// True when a writer replaced the manifest during every one of [`MAX_PASSES`] passes:
    /// the problems (if any) are those of the last pass, which no single version backs
    /// (inconclusive, not damage: run verify again when the writer is quieter).
    pub unsettled: bool,
}

/// Most passes [`verify_index`] makes while a writer keeps replacing the manifest.
pub const MAX_PASSES: u32 = 20;

impl IndexVerifyReport {
    /// True when no problem was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, file: &str, e: &Error) {
        let offset = match e {
            Error::Corrupt { offset, .. } => Some(*offset),
            _ => None,
        };
        let detail = match e {
            Error::Corrupt { detail, location, .. } => format!("{detail}{location}"),
            other => other.chain_message(),
        };
        self.problems.push(FileProblem { file: file.to_string(), offset, detail });
    }
}

/// Verifies the index in `dir`, one consistent version of it even while a writer runs
/// (see the module docs). Returns `Err` when the directory cannot be listed, and
/// [`Error::NoIndex`] when it holds no manifest and no index file (not damage: nothing to
/// verify); every fault in a file is in the report.
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

/// One pass over the directory.
fn verify_pass(storage: &dyn Storage, dir: &Path) -> Result<IndexVerifyReport> {
    let mut report = IndexVerifyReport::default();
    let names = storage.list(dir).map_err(|e| Error::io(dir, "list", e))?;
    let manifest = match Manifest::load(storage, dir) {
        Ok(Some(m)) => {
            report.checked.push((MANIFEST_NAME.into(), format!("{} segments, {} tombstone files, log {} on", m.segments.len(), m.tombstones.len(), m.log_number)));
            Some(m)
        }
        Ok(None) => {
            // No manifest and no data file: not an index (or one a writer is creating right
            // now), which is not damage.
            if !files::holds_index_data(&names) {
                return Err(Error::NoIndex {
                    dir: dir.to_path_buf(),
                    hint: " and no index file: nothing to verify (a writer creating an index has not written its manifest yet)".into(),
                });
            }
            report.problems.push(FileProblem {
                file: MANIFEST_NAME.into(),
                offset: None,
                detail: "missing, though the directory holds index files: the manifest was lost (`simdex recover` rebuilds from the files)".into(),
            });
            None
        }
        Err(e) => {
            report.problem(MANIFEST_NAME, &e);
            None
        }
    };
    if manifest.as_ref().is_some_and(|m| m.recipe_crc.is_some()) && !names.iter().any(|n| matches!(files::parse(n), FileKind::Recipe)) {
        if let Err(e) = super::pinned_recipe::load_checked(storage, dir, manifest.as_ref().and_then(|m| m.recipe_crc)) {
            report.problem(files::RECIPE_NAME, &e);
        }
    }
    let mut logs = Vec::new();
    let mut merge_files = 0usize;
    for name in &names {
        let path = dir.join(name);
        match files::parse(name) {
            FileKind::Manifest | FileKind::Lock => {}
            FileKind::Recipe => match super::pinned_recipe::load_checked(storage, dir, manifest.as_ref().and_then(|m| m.recipe_crc)) {
                Ok(Some(r)) => {
                    let recorded = manifest.as_ref().and_then(|m| m.recipe_crc);
                    if let Some(crc) = recorded.filter(|&c| storage.read_copy(&path).is_ok_and(|b| super::pinned_recipe::identity(&b) != c)) {
                        report.notes.push(format!(
                            "{name}: an intact recipe other than the one the manifest last recorded (CRC-32 {crc:#010x}): a re-pin a crash interrupted, or a file copied in; the next pin records it"
                        ));
                    }
                    report.checked.push((name.clone(), format!("fingerprint recipe `{}`, IDF table {} bytes", r.options.trim_end().replace('\n', " "), r.idf_table.len())))
                }
                Ok(None) => {}
                Err(e) => report.problem(name, &e),
            },
            FileKind::Temporary => report.notes.push(format!("{name}: temporary file of an unfinished write (removed by the next writable open)")),
            FileKind::Merge => merge_files += 1,
            FileKind::Unknown => report.unknown.push(name.clone()),
            FileKind::Segment(n) => {
                let meta = manifest.as_ref().and_then(|m| m.segments.iter().find(|s| s.number == n));
                if manifest.is_some() && meta.is_none() {
                    report.notes.push(format!("{name}: not in the manifest: an orphan of an interrupted flush or compaction (removed by the next writable open)"));
                    continue;
                }
                let outlook = || super::salvage::segment_outlook(storage, &path, meta.map(|m| m.entries));
                match verify_segment_with(storage, &path) {
                    Err(e) => {
                        report.problem(name, &e);
                        report.recoverable.push((name.clone(), outlook()));
                    }
                    Ok(v) => {
                        for p in &v.problems {
                            report.problems.push(FileProblem { file: name.clone(), offset: Some(p.offset), detail: format!("{}{}", p.detail, p.location) });
                        }
                        if let Some(meta) = meta {
                            if v.is_clean() && v.entries != meta.entries {
                                report.problems.push(FileProblem {
                                    file: name.clone(),
                                    offset: None,
                                    detail: format!("holds {} entries, the manifest says {}", v.entries, meta.entries),
                                });
                            }
                        }
                        if v.is_clean() {
                            report.checked.push((name.clone(), format!("{} fingerprints, {} tables, {} blocks", v.entries, v.tables, v.blocks)));
                        } else {
                            report.recoverable.push((name.clone(), outlook()));
                        }
                    }
                }
            }
            FileKind::Bands(n) => {
                if manifest.as_ref().is_some_and(|m| !m.segments.iter().any(|s| s.number == n)) {
                    report.notes.push(format!("{name}: the band file of a segment not in the manifest: an orphan (removed by the next writable open)"));
                    continue;
                }
                match super::banded::verify_band_file(storage, dir, n) {
                    Ok(summary) => report.checked.push((name.clone(), summary)),
                    Err(e) => {
                        report.problem(name, &e);
                        report.notes.push(format!("{name}: derived from the segment's sketches: remove it, and the next writable open builds it again"));
                    }
                }
            }
            FileKind::Ids(n) => {
                if manifest.as_ref().is_some_and(|m| !m.segments.iter().any(|s| s.number == n)) {
                    report.notes.push(format!("{name}: the id table of a segment not in the manifest: an orphan (removed by the next writable open)"));
                    continue;
                }
                match super::id_tables::verify_id_table(storage, dir, n) {
                    Ok(summary) => report.checked.push((name.clone(), summary)),
                    Err(e) => {
                        report.problem(name, &e);
                        report.notes.push(format!("{name}: derived from the segment's document ids (nothing is lost): a writer builds it again when a lookup reads a damaged page; remove it to have the next writable open build it"));
                    }
                }
            }
            FileKind::Tombstones(n) => {
                let meta = manifest.as_ref().and_then(|m| m.tombstones.iter().find(|t| t.number == n));
                if manifest.is_some() && meta.is_none() {
                    report.notes.push(format!("{name}: not in the manifest: an orphan (removed by the next writable open)"));
                    continue;
                }
                match tombstone::read(storage, &path) {
                    Err(e) => {
                        report.problem(name, &e);
                        let outlook = match tombstone::read_pages(storage, &path) {
                            Ok((kept, damaged)) => format!(
                                "{} of its tombstones; the {} in damaged pages are lost, and recover counts the deleted pairs that may come back",
                                kept.len(),
                                damaged.iter().map(|d| d.count).sum::<u64>()
                            ),
                            Err(_) => "none of its tombstones (its header is damaged): recover counts the deleted pairs that may come back".to_string(),
                        };
                        report.recoverable.push((name.clone(), outlook));
                    }
                    Ok(t) => {
                        if let Some(meta) = meta.filter(|m| m.count != t.len() as u64) {
                            report.problems.push(FileProblem {
                                file: name.clone(),
                                offset: None,
                                detail: format!("holds {} tombstones, the manifest says {}", t.len(), meta.count),
                            });
                        }
                        report.checked.push((name.clone(), format!("{} tombstones", t.len())));
                    }
                }
            }
            FileKind::Log(n) => {
                if manifest.as_ref().is_some_and(|m| n < m.log_number) {
                    report.notes.push(format!("{name}: obsolete log (already flushed; removed by the next writable open)"));
                } else {
                    logs.push((n, name.clone()));
                }
            }
        }
    }
    if let Some(m) = &manifest {
        for s in &m.segments {
            let name = files::segment_name(s.number);
            if !names.contains(&name) {
                report.problems.push(FileProblem { file: name, offset: None, detail: "listed in the manifest but missing".into() });
            }
        }
        for t in &m.tombstones {
            let name = files::tombstones_name(t.number);
            if !names.contains(&name) {
                report.problems.push(FileProblem { file: name, offset: None, detail: "listed in the manifest but missing".into() });
            }
        }
    }
    if merge_files > 0 {
        report.notes.push(format!(
            "a merge in progress: {merge_files} merge.* files (its checkpoint, output so far and sorted runs), which the next compaction of the same segments goes on from; a writable open removes them once those segments are gone"
        ));
    }
    if let Some(problem) = manifest.as_ref().and_then(|m| missing_log(m, logs.len())) {
        report.problems.push(FileProblem { file: files::log_name(manifest.as_ref().map_or(0, |m| m.log_number)), offset: None, detail: problem });
    }
    logs.sort_unstable();
    // The logs the directory holds and those the manifest has a seal of (`seal`).
    let seals = manifest.as_ref().map(|m| m.logs.clone()).unwrap_or_default();
    let missing: Vec<u64> = seals.iter().map(|s| s.number).filter(|n| !logs.iter().any(|l| l.0 == *n)).collect();
    logs.extend(missing.into_iter().map(|n| (n, files::log_name(n))));
    logs.sort_unstable();
    let mut next_seq = manifest.as_ref().map(|m| m.last_seq + 1);
    for (n, name) in logs {
        let path = dir.join(&name);
        let seal = seals.iter().find(|s| s.number == n);
        let bytes = match storage.read_copy(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && seal.is_some() => {
                if let Some(short) = seal.and_then(|s| shortfall(s, None, next_seq.map_or(0, |x| x - 1))) {
                    report.problems.push(FileProblem { file: name.clone(), offset: None, detail: short.detail });
                }
                continue;
            }
            Err(e) => {
                report.problem(&name, &Error::io(&path, "read", e));
                continue;
            }
        };
        let mut gap = None;
        let scanned = scan_log(&path, &bytes, n, ScanMode::Strict, |r| {
            if let Some(expected) = next_seq {
                if r.last_seq() >= expected && r.seq != expected && gap.is_none() {
                    gap = Some((r.offset, expected, r.seq));
                }
            }
            next_seq = Some(r.last_seq() + 1);
            Ok(())
        });
        match scanned {
            Err(e) => {
                report.problem(&name, &e);
                report.recoverable.push((name.clone(), "every record that passes its checksum; the operations lost between them are counted from their sequence numbers".into()));
            }
            Ok(scan) => {
                if let Some((offset, expected, found)) = gap {
                    report.problems.push(FileProblem {
                        file: name.clone(),
                        offset: Some(offset),
                        detail: format!("record starts at sequence number {found}, expected {expected}: records are missing"),
                    });
                }
                if let Some(short) = seal.and_then(|s| shortfall(s, Some(scan.valid_len), next_seq.map_or(0, |x| x - 1))) {
                    report.problems.push(FileProblem { file: name.clone(), offset: Some(scan.valid_len), detail: short.detail });
                    report.recoverable.push((name.clone(), "every intact record (the operations lost are counted from the manifest's record of the log)".into()));
                } else if scan.end != LogEnd::Clean {
                    report.notes.push(format!(
                        "{name}: ends in {} bytes that are not a whole record ({:?}): the tail of a write cut short; the next writable open cuts it",
                        bytes.len() as u64 - scan.valid_len,
                        scan.end
                    ));
                }
                report.checked.push((name.clone(), format!("{} records, {} operations", scan.records, scan.ops)));
            }
        }
    }
    Ok(report)
}

/// What is lost when the directory holds `live_logs` logs numbered at or above the
/// manifest's `log_number`, if that is a loss. A manifest that a flush or compaction
/// installed (number above 1) was written while such a log existed (the log a freeze starts
/// is created before the flush that names its predecessor obsolete), so none left means the
/// newest log was deleted or lost; how many writes it held cannot be known. A new index's
/// first manifest (number 1) may lose its log to a crash before the log was created, with
/// nothing in it.
pub(crate) fn missing_log(manifest: &Manifest, live_logs: usize) -> Option<String> {
    (live_logs == 0 && manifest.number > 1 && super::seal::seal_of(manifest, manifest.log_number).is_none()).then(|| {
        format!(
            "missing: no log numbered {} or above, though the manifest was written while one existed; writes after sequence number {} may be lost (how many cannot be known)",
            manifest.log_number, manifest.last_seq
        )
    })
}
