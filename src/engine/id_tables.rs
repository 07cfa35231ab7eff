//! The engine's id tables (`crate::ids`, `format-spec/ids.md`) and the answer to "what is
//! stored under this document id?" over a version: every live segment's id table (its
//! entries whose stored id is the id), the memtables' inserts under the id, less what the
//! tombstones and the memtables' deletes hide.
//!
//! Every segment gets its id table when it is written (flush, merge), with its band file and
//! before the manifest that installs it ([`attach_new`]); an open finds it beside its
//! segment, or a writable open builds it again when it is missing or not its segment's
//! ([`attach_on_open`]), which is how an index of an older build gains its tables. A lookup
//! that meets a damaged page answers from the segment's id column instead (the same answer,
//! by a scan), and a writer builds the table again at once ([`Engine::heal_id_tables`]);
//! a read-only open without a table (or a segment too large for one) scans too.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::banded::{self, OnOpen};
use super::compaction::checkpoint::MergeFiles;
use super::files::ids_name;
use super::manifest::SegmentMeta;
use super::report::OpenReport;
use super::state::Engine;
use super::version::{LiveSegment, Version};
use crate::bands::BuildBudget;
use crate::error::Result;
use crate::ids::{write_id_table, IdTable};
use crate::segment::Segment;
use crate::storage::Storage;

/// Writes segment `live`'s id table (when it has ids) and puts it in its slot.
fn build(storage: &dyn Storage, dir: &Path, live: &LiveSegment) -> Result<bool> {
    let path = dir.join(ids_name(live.meta.number));
    if write_id_table(storage, &live.segment, &path, BuildBudget::default())?.is_none() {
        return Ok(false);
    }
    live.ids.set(IdTable::open(storage, &path, &live.segment)?);
    Ok(true)
}

/// A flush's new segment, live with its derived files: its band file (`banded`, in a
/// flush's budget) and its id table, both written now.
pub(super) fn attach_new(storage: &dyn Storage, dir: &Path, meta: SegmentMeta, segment: Segment) -> Result<LiveSegment> {
    let live = banded::attach_new(storage, dir, meta, segment, BuildBudget::FLUSH)?;
    build(storage, dir, &live)?;
    Ok(live)
}

/// A merge's output live with its band file ([`banded::attach_merged`]) and its id table,
/// built from the segment under its new name before the manifest installs it (a crash in
/// between leaves a segment without its table: the next writable open builds it).
pub(super) fn attach_merged(engine: &Engine, files: &MergeFiles, meta: SegmentMeta) -> Result<LiveSegment> {
    let live = banded::attach_merged(engine, files, meta)?;
    build(&*engine.storage, &engine.dir, &live)?;
    Ok(live)
}

/// A segment the manifest lists, live with its derived files: its band file as `banded`
/// decides (`on_open`), and its id table opened or, in a writable open, built again at once
/// when missing or not this segment's (named in `report.rebuilt_id_tables`).
pub(super) fn attach_on_open(storage: &dyn Storage, dir: &Path, meta: SegmentMeta, segment: Segment, on_open: OnOpen, report: &mut OpenReport) -> Result<LiveSegment> {
    let live = banded::attach_on_open(storage, dir, meta, segment, on_open, &mut report.rebuilt_bands, &mut report.set_aside)?;
    match IdTable::open(storage, &dir.join(ids_name(meta.number)), &live.segment) {
        Ok(table) => live.ids.set(table),
        Err(_) if on_open != OnOpen::GoWithout => {
            if build(storage, dir, &live)? {
                report.rebuilt_id_tables.push(ids_name(meta.number));
            }
        }
        // read-only: the segment's id column is scanned
        Err(_) => {}
    }
    Ok(live)
}

/// `simdex verify` of id table `n`: every page, and that it is the table its segment's ids
/// make. Returns a summary for the report.
pub(crate) fn verify_id_table(storage: &dyn Storage, dir: &Path, n: u64) -> Result<String> {
    let segment = Segment::open_with(storage, &dir.join(super::files::segment_name(n)))?;
    let table = IdTable::open(storage, &dir.join(ids_name(n)), &segment)?;
    table.verify(&segment)?;
    let d = table.head().design;
    Ok(format!("document ids of segment {n}'s {} entries, {} buckets, {} bytes", table.head().entries, d.buckets(), table.file_len()))
}

/// The ordinals of segment `s`'s entries stored under `id`: from its id table, else (none,
/// or a damaged page: `s` is added to `damaged`) from a scan of its id column.
fn ordinals_of(s: &Arc<LiveSegment>, id: u64, damaged: &mut Vec<Arc<LiveSegment>>, out: &mut Vec<u64>) -> Result<()> {
    out.clear();
    if let Some(table) = s.ids.get() {
        match table.lookup(id, out) {
            Ok(()) => {
                let mut kept = Vec::with_capacity(out.len());
                for &o in out.iter() {
                    if s.segment.doc_id(o)? == id {
                        kept.push(o);
                    }
                }
                *out = kept;
                return Ok(());
            }
            Err(e) if e.is_corruption() => {
                out.clear();
                damaged.push(s.clone());
            }
            Err(e) => return Err(e),
        }
    }
    for (o, stored) in (0u64..).zip(s.segment.doc_ids()) {
        if stored? == id {
            out.push(o);
        }
    }
    Ok(())
}

/// The fingerprints of the live pairs stored under document id `id` in `version`, sorted,
/// each once. Segments whose id table was found damaged (answered by a scan) are added to
/// `damaged`.
pub(super) fn stored_under(version: &Version, id: u64, damaged: &mut Vec<Arc<LiveSegment>>) -> Result<Vec<u64>> {
    let views = version.views();
    let mut out = Vec::new();
    let mut ordinals = Vec::new();
    for s in &version.segments {
        ordinals_of(s, id, damaged, &mut ordinals)?;
        for &o in &ordinals {
            let fp = s.segment.fingerprint_at(o)?;
            if !version.hidden(&views, fp, id, s.meta.max_seq) {
                out.push(fp);
            }
        }
    }
    for v in &views.0 {
        out.extend(v.entries_of(id).into_iter().filter(|e| !version.hidden(&views, e.fp, e.id, e.seq)).map(|e| e.fp));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

impl Engine {
    /// Builds again the id tables a lookup found damaged (a writable index; the caller holds
    /// the writer's lock, so one rebuild runs at a time). A failure leaves the segment
    /// answered by scans and is reported.
    pub(super) fn heal_id_tables(&self, damaged: Vec<Arc<LiveSegment>>) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        for s in damaged {
            if build(&*self.storage, &self.dir, &s)? {
                self.rebuilt_id_tables.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }
}
