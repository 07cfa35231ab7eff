//! The merge: the live pairs of adjacent segments written as one new segment (the worker
//! that runs what the policy chose). It writes the output file, its sorted runs and its
//! checkpoint (`checkpoint`), nothing else: the engine checks the disk's room before and
//! installs the output after.
//!
//! Memory is bounded whatever the sizes: sources are read block by block in fingerprint
//! order (table 0 and the id pages) and merged by `(fingerprint, id)`, dropping pairs a
//! tombstone hides and repeated pairs. A merge runs in three stages:
//! - the *count*: the live pairs' number (which fixes the output's design) and table 0's
//!   code;
//! - the *feed*: the entries of every permuted table of the output that cannot be merged
//!   from the inputs' own tables go through a sorter (a buffer of at most
//!   `CompactionOptions::buffer_entries`, shared by the tables, sorted and spilled to a run
//!   file whenever it fills). When the merge drops nothing (the usual case), output table
//!   `t` is the merge of the inputs' own tables of `t`'s permutation, and only an input of
//!   another design (a 4-table segment below about 1.7e7 entries merged into a 10-table
//!   one) feeds the sorters, from its table 0. Otherwise the live stream feeds every table;
//! - the *write*: table 0 from the live stream, each other table from its inputs' tables
//!   and runs, then the ids and the sketches from the live stream. Each table is read
//!   twice (once for its Huffman code's histogram, once to write it; the histogram of the
//!   next table runs on a second thread while one is written): decoding is cheaper than
//!   keeping it.
//!
//! Each stage reads sorted streams, so where it stands is a value and a count (the last
//! value and how many copies of it are done), and every stream can start there through the
//! block indexes. At most every `CompactionOptions::checkpoint_interval` the merge makes
//! what it wrote durable and records that position (`checkpoint`); a merge of the same
//! inputs goes on from it, so a merge killed every few seconds still finishes, and its
//! output is byte for byte the one an uninterrupted merge writes.

// Indexing: inputs and output tables indexed by the table number of the output's own design.
#![allow(clippy::indexing_slicing)]
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::checkpoint::{Checkpoint, Counted, FeedPosition, Identity, MergeFiles, Stage};
use super::external_sort::{ExternalSorter, Sorted};
use super::stream::{LiveMerge, SortedMerge};
use crate::codec::{Code, Codec, SymbolHistogram, SYMBOLS};
use crate::engine::version::{LiveSegment, TombstoneSet};
use crate::error::{Error, Result};
use crate::plan::{planned_design, Design, PlanOptions, TableDesign};
use crate::segment::layout::ColumnKind;
use crate::segment::{IdColumn, Section, SegmentWriter, SketchColumn, TableProgress, WriterState};
use crate::storage::{parent_dir, Storage};

/// What a merge wrote.
pub(crate) struct Merged {
    pub entries: u64,
    pub file_len: u64,
    pub deleted: u64,
    pub repeated: u64,
    pub spilled_runs: usize,
    /// It went on from a checkpoint a stopped merge left.
    pub resumed: bool,
    /// It found a checkpoint it could not go on from (its files damaged or gone) and
    /// started over (read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub restarted: bool,
}

/// What a merge's output is made with: the index's design distance, gap codec and sketch
/// column.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutputFormat {
    pub k: u32,
    pub codec: Codec,
    pub sketches: Option<SketchColumn>,
}

/// How a merge runs: its sort buffer, how often it records a checkpoint (`None`: never;
/// the output is then written as an unnamed file, and a killed merge starts over), and the
/// flag that stops it (the index is closing): it returns [`Error::stopped`] at its next
/// look at the clock, its files and last checkpoint kept for the next merge of the same
/// segments.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MergeOptions<'a> {
    pub buffer_entries: usize,
    pub checkpoint_interval: Option<Duration>,
    pub stop: Option<&'a AtomicBool>,
}

type Inputs = [std::sync::Arc<LiveSegment>];

/// The count and the feed look at the clock once per this many entries (the write, once a
/// block or a page).
const CLOCK_EVERY: u64 = 1024;
type Lengths = [u8; SYMBOLS];
/// What a stopped write left: the codes known, the position in the column being written,
/// the writer's state.
type WriteResume = (Vec<Option<Lengths>>, (u64, u64), WriterState);

/// Merges `inputs` into a new segment at `path` (nothing is written when no pair is left),
/// going on from the checkpoint a merge of the same inputs left in `path`'s directory.
/// Every `merge.*` file is gone when it returns, but for a finished merge's checkpoint
/// when `path` is a merge file itself (`MergeFiles::output`: the caller builds the output's
/// band file, then installs it and removes them) and for a merge that was stopped or
/// killed (they stay, for the next).
pub(crate) fn merge(storage: &dyn Storage, inputs: &Inputs, tombstones: &TombstoneSet, path: &Path, format: &OutputFormat, options: &MergeOptions<'_>) -> Result<Option<Merged>> {
    let files = MergeFiles::in_dir(&parent_dir(path));
    let identity = identity(inputs, tombstones, format);
    let resume = options.checkpoint_interval.and_then(|_| files.load(storage)).filter(|c| c.identity == identity);
    if resume.is_none() {
        files.remove_all(storage)?;
    }
    let now = Instant::now();
    let job = Job {
        storage,
        inputs,
        tombstones,
        path,
        format: *format,
        files: files.clone(),
        identity,
        buffer_entries: options.buffer_entries,
        every: options.checkpoint_interval,
        stop: options.stop,
        last_save: std::sync::Mutex::new(now),
        started: now,
    };
    let mut result = job.run(resume.as_ref().map(|c| &c.stage));
    let mut restarted = false;
    if matches!(&result, Err(e) if e.is_stopped()) {
        return result;
    }
    if resume.is_some() && result.is_err() {
        // a checkpoint that does not resume (its files damaged or gone): start over once
        files.remove_all(storage)?;
        result = job.run(None);
        restarted = true;
        if matches!(&result, Err(e) if e.is_stopped()) {
            return result;
        }
    }
    let keep_checkpoint = result.as_ref().is_ok_and(Option::is_some) && files.is_output(path);
    let cleanup = if keep_checkpoint { files.remove_all_but_output(storage) } else { files.remove_all(storage) };
    let merged = result?.map(|m| Merged { resumed: resume.is_some() && !restarted, restarted, ..m });
    cleanup?;
    Ok(merged)
}

/// The error of a stage no merge resumes at this point (a finished merge returns before).
fn unreachable_stage() -> Result<(Counted, Lengths)> {
    Err(Error::InvalidArgument("merge checkpoint: a finished merge has nothing to count".into()))
}

/// What the merge is of, as its checkpoint records it.
fn identity(inputs: &Inputs, tombstones: &TombstoneSet, format: &OutputFormat) -> Identity {
    Identity {
        inputs: inputs.iter().map(|s| s.meta.number).collect(),
        tombstones: tombstones.files.iter().map(|(t, _)| t.number).collect(),
        k: format.k,
        codec: format.codec.id(),
        sketch_bytes: format.sketches.map_or(0, |s| s.bytes),
        sketch_scheme: format.sketches.map_or([0; 8], |s| s.scheme),
    }
}

/// One merge's inputs and settings.
struct Job<'a> {
    storage: &'a dyn Storage,
    inputs: &'a Inputs,
    tombstones: &'a TombstoneSet,
    path: &'a Path,
    format: OutputFormat,
    files: MergeFiles,
    identity: Identity,
    buffer_entries: usize,
    every: Option<Duration>,
    stop: Option<&'a AtomicBool>,
    last_save: std::sync::Mutex<Instant>,
    started: Instant,
}

/// A stream a table of the output is written from.
enum TableSource<'a> {
    Live(LiveMerge<'a>),
    Sorted(SortedMerge<Box<dyn Iterator<Item = Result<u64>> + 'a>>),
}

impl Iterator for TableSource<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        match self {
            TableSource::Live(m) => m.next().map(|(fp, _)| fp),
            TableSource::Sorted(m) => m.next(),
        }
    }
}

impl TableSource<'_> {
    fn finish(self) -> Result<()> {
        match self {
            TableSource::Live(m) => m.finish(),
            TableSource::Sorted(m) => m.finish(),
        }
    }
}

/// How the output's tables are made: `own[t][i]`, input `i`'s table holding output table
/// `t`'s permutation (none when the merge drops pairs: every table is then sorted from the
/// live stream), and the tables sorted.
struct Plan<'t> {
    design: &'t Design,
    tables: &'t [TableDesign],
    own: Vec<Vec<Option<usize>>>,
    sorted: Vec<usize>,
    clean: bool,
}

fn code_of(lengths: &Lengths) -> Result<Code> {
    Code::from_lengths(lengths).map_err(|e| Error::InvalidArgument(format!("merge checkpoint: a stored code is not valid: {e}")))
}

impl<'a> Job<'a> {
    /// Fails with [`Error::stopped`] when the merge is asked to stop.
    fn check_stop(&self) -> Result<()> {
        match self.stop {
            Some(flag) if flag.load(Ordering::Relaxed) => Err(Error::stopped(self.path)),
            _ => Ok(()),
        }
    }

    fn due(&self) -> bool {
        self.every.is_some_and(|e| self.last_save.lock().map_or(true, |t| t.elapsed() >= e))
    }

    fn save(&self, stage: Stage) -> Result<()> {
        self.files.save(self.storage, &Checkpoint { identity: self.identity.clone(), stage })?;
        if let Ok(mut t) = self.last_save.lock() {
            *t = Instant::now();
        }
        Ok(())
    }

    fn run(&self, stage: Option<&Stage>) -> Result<Option<Merged>> {
        if let Some(Stage::Finished { counted, file_len }) = stage {
            return self.finished(*counted, *file_len);
        }
        let (counted, code0) = match stage {
            None => self.count(Counted::default(), None, SymbolHistogram::new())?,
            Some(Stage::Count { counted, last, symbols }) => self.count(*counted, Some(*last), SymbolHistogram::resume(**symbols, Some(last.0)))?,
            Some(Stage::Feed { counted, code0, .. }) => (*counted, *code0),
            Some(Stage::Write { counted, codes, .. }) => {
                (*counted, codes.first().copied().flatten().ok_or_else(|| Error::InvalidArgument("merge checkpoint: no code for table 0".into()))?)
            }
            Some(Stage::Finished { .. }) => unreachable_stage()?,
        };
        if counted.entries == 0 {
            return Ok(None);
        }
        let design = planned_design(&PlanOptions::for_segment(counted.entries, self.format.k, self.format.sketches.is_some()))?;
        let tables = design.tables();
        let clean = counted.deleted == 0 && counted.repeated == 0;
        let own: Vec<Vec<Option<usize>>> = tables
            .iter()
            .map(|out| self.inputs.iter().map(|s| if clean { s.segment.design().tables().iter().position(|d| d.permutation == out.permutation) } else { None }).collect())
            .collect();
        let sorted: Vec<usize> = (1..tables.len()).filter(|&t| own[t].iter().any(Option::is_none)).collect();
        let plan = Plan { design: &design, tables, own, sorted, clean };
        let per_table = (self.buffer_entries / plan.sorted.len().max(1)).max(1024);
        let runs_at: Vec<u32> = match stage {
            Some(Stage::Feed { runs, .. } | Stage::Write { runs, .. }) => runs.clone(),
            _ => vec![0; tables.len()],
        };
        // A checkpoint of another design (a build that planned this merge's output with
        // another table count: an index with sketches plans fewer since session 6) does not
        // resume: the merge starts over.
        if runs_at.len() != tables.len() {
            return Err(Error::InvalidArgument(format!("merge checkpoint: made for {} output tables, this build plans {}", runs_at.len(), tables.len())));
        }
        let base = self.files.runs_base();
        let mut sorters: Vec<Option<ExternalSorter<'_>>> = (0..tables.len())
            .map(|t| plan.sorted.contains(&t).then(|| ExternalSorter::resume(self.storage, &base, t, per_table, runs_at.get(t).copied().unwrap_or(0) as usize)))
            .collect();
        let result = (|| {
            let position = match stage {
                Some(Stage::Write { .. }) => None,
                Some(Stage::Feed { position, .. }) => Some(*position),
                _ => Some(FeedPosition::default()),
            };
            if let Some(position) = position {
                self.feed(&plan, &mut sorters, counted, &code0, position)?;
            }
            for sorter in sorters.iter_mut().flatten() {
                sorter.finish()?;
            }
            // A merge that has run for a checkpoint interval may run for more: its sorts go
            // to runs (those in memory too), so that its writes can be checkpointed.
            let checkpoints = self.every.is_some_and(|e| self.started.elapsed() >= e) || matches!(stage, Some(Stage::Write { .. }));
            if checkpoints {
                for sorter in sorters.iter_mut().flatten() {
                    sorter.persist()?;
                }
            }
            let runs: Vec<u32> = sorters.iter().map(|s| s.as_ref().map_or(0, |s| s.runs() as u32)).collect();
            let sorted: Vec<Option<&Sorted>> = sorters.iter().map(|s| s.as_ref().and_then(ExternalSorter::sorted)).collect();
            let writer_state = match stage {
                Some(Stage::Write { codes, column, writer, .. }) => Some((codes.clone(), *column, writer.clone())),
                _ => None,
            };
            self.write(&plan, &sorted, counted, code0, &runs, checkpoints, writer_state)
        })();
        let spilled_runs = sorters.iter().flatten().map(|s| s.spilled).sum();
        // a stopped merge keeps its runs: its checkpoint names them
        if !matches!(&result, Err(e) if e.is_stopped()) {
            for s in sorters.iter_mut().flatten() {
                s.remove_runs();
            }
        }
        let file_len = result?;
        Ok(Some(Merged { entries: counted.entries, file_len, deleted: counted.deleted, repeated: counted.repeated, spilled_runs, resumed: false, restarted: false }))
    }

    /// The count, from `base` (what an earlier count found up to `last`).
    fn count(&self, base: Counted, last: Option<(u64, u64)>, mut hist: SymbolHistogram) -> Result<(Counted, Lengths)> {
        let mut stream = LiveMerge::resume_count(self.inputs, self.tombstones, last);
        let mut n = base.entries;
        while let Some(pair) = stream.next() {
            hist.push(self.format.codec, pair.0);
            n += 1;
            if n % CLOCK_EVERY == 0 {
                self.check_stop()?;
            }
            if n % CLOCK_EVERY == 0 && self.due() {
                let counted = Counted { entries: n, deleted: base.deleted + stream.deleted, repeated: base.repeated + stream.repeated };
                self.save(Stage::Count { counted, last: pair, symbols: Box::new(*hist.counts()) })?;
            }
        }
        let counted = Counted { entries: n, deleted: base.deleted + stream.deleted, repeated: base.repeated + stream.repeated };
        stream.finish()?;
        Ok((counted, *hist.code().lengths()))
    }

    /// The feed, from `position`: every table of `plan.sorted` gets its entries pushed to
    /// its sorter (spilled to runs at each checkpoint, so the checkpoint names all of them).
    fn feed(&self, plan: &Plan<'_>, sorters: &mut [Option<ExternalSorter<'_>>], counted: Counted, code0: &Lengths, position: FeedPosition) -> Result<()> {
        if plan.sorted.is_empty() {
            return Ok(());
        }
        let checkpoint = |sorters: &mut [Option<ExternalSorter<'_>>], position: FeedPosition| -> Result<()> {
            for s in sorters.iter_mut().flatten() {
                s.spill_buffered()?;
            }
            let runs = sorters.iter().map(|s| s.as_ref().map_or(0, |s| s.runs() as u32)).collect();
            self.save(Stage::Feed { counted, code0: *code0, position, runs })
        };
        let push = |sorters: &mut [Option<ExternalSorter<'_>>], tables: &[usize], fp: u64| -> Result<()> {
            for &t in tables {
                if let Some(sorter) = sorters[t].as_mut() {
                    sorter.push(plan.tables[t].permutation.apply(fp))?;
                }
            }
            Ok(())
        };
        if plan.clean {
            // only inputs lacking a permutation feed it, from their own table 0
            for i in position.input as usize..self.inputs.len() {
                let wanted: Vec<usize> = plan.sorted.iter().copied().filter(|&t| plan.own[t][i].is_none()).collect();
                if wanted.is_empty() {
                    continue;
                }
                let mut ordinal = if i == position.input as usize { position.ordinal } else { 0 };
                for fp in self.inputs[i].segment.table_entries_at(0, ordinal)? {
                    push(sorters, &wanted, fp?)?;
                    ordinal += 1;
                    if ordinal % CLOCK_EVERY == 0 {
                        self.check_stop()?;
                    }
                    if ordinal % CLOCK_EVERY == 0 && self.due() {
                        checkpoint(sorters, FeedPosition { input: i as u32, ordinal, ..FeedPosition::default() })?;
                    }
                }
            }
            return Ok(());
        }
        let cursor = (position.ordinal > 0).then_some((position.last, position.tail));
        let mut stream = LiveMerge::resume(self.inputs, self.tombstones, false, cursor);
        let (mut fed, mut last, mut tail) = (position.ordinal, position.last, position.tail);
        for (fp, _) in stream.by_ref() {
            push(sorters, &plan.sorted, fp)?;
            (last, tail) = if fed > 0 && fp == last { (last, tail + 1) } else { (fp, 1) };
            fed += 1;
            if fed % CLOCK_EVERY == 0 {
                self.check_stop()?;
            }
            if fed % CLOCK_EVERY == 0 && self.due() {
                checkpoint(sorters, FeedPosition { input: 0, ordinal: fed, last, tail })?;
            }
        }
        stream.finish()
    }

    /// The stream output table `t` is written from, after `progress` (what a stopped write
    /// had written of it).
    fn table_source<'s>(&'s self, plan: &Plan<'_>, sorted: &[Option<&'s Sorted>], t: usize, progress: Option<TableProgress>) -> Result<TableSource<'s>> {
        let cursor = progress.filter(|p| p.entries > 0).map(|p| (p.last, p.tail));
        if t == 0 {
            return Ok(TableSource::Live(LiveMerge::resume(self.inputs, self.tombstones, false, cursor)));
        }
        let (from, tail) = cursor.unwrap_or((0, 0));
        let mut streams: Vec<Box<dyn Iterator<Item = Result<u64>> + 's>> = Vec::new();
        for (i, s) in self.inputs.iter().enumerate() {
            if let Some(j) = plan.own[t][i] {
                streams.push(Box::new(s.segment.table_entries_from(j, from)?));
            }
        }
        if let Some(Some(sorted)) = sorted.get(t) {
            streams.push(Box::new(sorted.iter_from(from)?.map(Ok)));
        }
        Ok(TableSource::Sorted(SortedMerge::resumed(streams, from, tail)))
    }

    /// The code of output table `t` (its histogram pass).
    fn histogram(&self, plan: &Plan<'_>, sorted: &[Option<&Sorted>], t: usize) -> Result<Lengths> {
        let mut hist = SymbolHistogram::new();
        let mut source = self.table_source(plan, sorted, t, None)?;
        let mut n = 0u64;
        for v in &mut source {
            hist.push(self.format.codec, v);
            n += 1;
            if n % (CLOCK_EVERY * 64) == 0 {
                self.check_stop()?;
            }
        }
        source.finish()?;
        Ok(*hist.code().lengths())
    }

    /// The write, from `state` (codes, column cursor and writer of a stopped write).
    /// Returns the output's length.
    #[allow(clippy::too_many_arguments)]
    fn write(&self, plan: &Plan<'_>, sorted: &[Option<&Sorted>], counted: Counted, code0: Lengths, runs: &[u32], checkpoints: bool, state: Option<WriteResume>) -> Result<u64> {
        let tables = plan.tables;
        let codecs = vec![self.format.codec; tables.len()];
        let part = self.files.part();
        let (storage, path, sketches) = (self.storage, self.path, self.format.sketches);
        let (mut codes, column, state) = match state {
            Some((codes, column, writer)) => (codes, column, Some(writer)),
            None => {
                let mut codes = vec![None; tables.len()];
                codes[0] = Some(code0);
                (codes, (0, 0), None)
            }
        };
        let mut writer = match &state {
            Some(st) => SegmentWriter::resume(storage, path, &part, plan.design, &codecs, IdColumn::Present, sketches, st)?,
            None if checkpoints => SegmentWriter::create_resumable(storage, path, &part, plan.design, &codecs, IdColumn::Present, sketches)?,
            None => SegmentWriter::create_with(storage, path, plan.design, &codecs, IdColumn::Present, sketches)?,
        };
        let save =
            |codes: &[Option<Lengths>], column: (u64, u64), writer: WriterState| self.save(Stage::Write { counted, codes: codes.to_vec(), runs: runs.to_vec(), column, writer });
        let first = state.as_ref().map_or(0, |s| s.tables.len());
        let resumed_table = state.as_ref().and_then(|st| match &st.section {
            Section::Table { lengths, progress, .. } => Some((st, *lengths, *progress)),
            _ => None,
        });
        if let Some((_, lengths, _)) = resumed_table {
            codes[first] = Some(lengths);
        }
        // The histogram passes run on a second thread, a table or two ahead of the writes
        // (at most one code waits in the channel; a failed pass ends the thread, and the
        // write of its table reports it).
        let todo: Vec<usize> = (first..tables.len()).filter(|&t| codes[t].is_none()).collect();
        std::thread::scope(|scope| -> Result<()> {
            let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Result<Lengths>)>(1);
            scope.spawn(move || {
                for t in todo {
                    let code = self.histogram(plan, sorted, t);
                    let failed = code.is_err();
                    if tx.send((t, code)).is_err() || failed {
                        return;
                    }
                }
            });
            for t in first..tables.len() {
                let lengths = match codes[t] {
                    Some(lengths) => lengths,
                    None => match rx.recv() {
                        Ok((u, code)) if u == t => code?,
                        _ => return Err(Error::InvalidArgument(format!("compaction: the histogram pass of table {t} did not finish"))),
                    },
                };
                codes[t] = Some(lengths);
                let code = code_of(&lengths)?;
                let resumed = resumed_table.filter(|_| t == first);
                let mut source = self.table_source(plan, sorted, t, resumed.map(|r| r.2))?;
                let mut table = match resumed {
                    Some((st, _, _)) => writer.resume_table(&code, st)?,
                    None => writer.begin_table(&code)?,
                };
                for v in &mut source {
                    let block_done = table.push(v)?;
                    if block_done {
                        self.check_stop()?;
                    }
                    if block_done && checkpoints && self.due() {
                        let st = table.checkpoint()?;
                        save(&codes, (0, 0), st)?;
                    }
                }
                source.finish()?;
                table.end()?;
                // the table's runs are consumed: out of the resident set now (the files go
                // when the merge ends)
                if let Some(Some(Sorted::Runs(runs, _))) = sorted.get(t) {
                    for run in runs {
                        run.done_with(0, run.len());
                    }
                }
            }
            Ok(())
        })?;
        let column_of = |kind: ColumnKind| state.as_ref().filter(|s| matches!(s.section, Section::Column { kind: k, .. } if k == kind));
        if state.as_ref().is_none_or(|s| s.ids_head.is_none()) {
            let resumed = column_of(ColumnKind::Ids);
            self.write_column(&mut writer, resumed, resumed.map(|_| column), false, checkpoints, &|column, st| save(&codes, column, st))?;
        }
        if sketches.is_some() {
            let resumed = column_of(ColumnKind::Sketches);
            self.write_column(&mut writer, resumed, resumed.map(|_| column), true, checkpoints, &|column, st| save(&codes, column, st))?;
        }
        // The checkpoint goes before the output takes its name: a checkpoint is never left
        // naming a `merge.part` that is gone. An output named as a merge file
        // (`MergeFiles::output`) is recorded as finished, so that a merge stopped while its
        // caller builds the output's band file does not start over.
        self.files.remove_checkpoint(self.storage)?;
        let file_len = writer.finish()?;
        if self.files.is_output(self.path) && self.every.is_some() {
            self.save(Stage::Finished { counted, file_len })?;
        }
        Ok(file_len)
    }

    /// A merge that had finished (its output at `self.path`, `file_len` bytes), stopped
    /// before its caller installed it.
    fn finished(&self, counted: Counted, file_len: u64) -> Result<Option<Merged>> {
        let on_disk = self.storage.read(self.path).map_err(|e| Error::io(self.path, "read", e))?.len() as u64;
        if on_disk != file_len {
            return Err(Error::InvalidArgument(format!("{}: a finished merge's output is {on_disk} bytes, its checkpoint says {file_len}", self.path.display())));
        }
        Ok(Some(Merged { entries: counted.entries, file_len, deleted: counted.deleted, repeated: counted.repeated, spilled_runs: 0, resumed: false, restarted: false }))
    }

    /// The id column (or with `sketches`, the sketch column: each live pair's sketch from
    /// its segment, zeros for a pair from a segment without one) from the live stream,
    /// going on from `resumed` after `cursor` when given.
    fn write_column(
        &self,
        writer: &mut SegmentWriter<'_>,
        resumed: Option<&WriterState>,
        cursor: Option<(u64, u64)>,
        sketches: bool,
        checkpoints: bool,
        save: &dyn Fn((u64, u64), WriterState) -> Result<()>,
    ) -> Result<()> {
        let mut column = match resumed {
            Some(st) => writer.resume_column(st)?,
            None if sketches => writer.begin_sketches()?,
            None => writer.begin_ids()?,
        };
        let width = self.format.sketches.map_or(0, |s| usize::from(s.bytes));
        let zeros = vec![0u8; width];
        let mut wrong = None;
        let mut stream = LiveMerge::resume(self.inputs, self.tombstones, sketches, cursor);
        let mut at = cursor;
        while let Some((fp, id)) = stream.next() {
            let page_done = if sketches {
                let value = match stream.sketch {
                    Some(s) if s.len() == width => s,
                    Some(s) => {
                        wrong.get_or_insert(s.len());
                        &zeros[..]
                    }
                    None => &zeros[..],
                };
                column.push(value)?
            } else {
                column.push(&id.to_le_bytes())?
            };
            at = Some(match at {
                Some((last, n)) if last == fp => (last, n + 1),
                _ => (fp, 1),
            });
            if page_done {
                self.check_stop()?;
            }
            if page_done && checkpoints && self.due() {
                let st = column.checkpoint()?;
                save(at.unwrap_or_default(), st)?;
            }
        }
        stream.finish()?;
        if let Some(w) = wrong {
            return Err(Error::InvalidArgument(format!("compaction: an input segment holds {w}-byte sketches, the index's are {width} bytes")));
        }
        column.end().map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::manifest::SegmentMeta;

    use crate::engine::compaction::test_segments::random_pairs;

    /// Merges segments built with the given table counts (`None`: the planner's design for
    /// their size, the output's) and checks every table, id and query of the output against
    /// brute force over the inputs' pairs. Returns the runs the merge spilled.
    fn merge_designs(tables: &[Option<usize>]) -> usize {
        use crate::segment::{build_segment, BuildOptions, Segment};
        let dir = tempfile::tempdir().unwrap();
        let storage = crate::storage::FsStorage;
        let mut pairs = Vec::new();
        let mut inputs = Vec::new();
        for (i, &t) in tables.iter().enumerate() {
            let part = random_pairs(0x9e37_79b9 + i as u64, 6_000, 1_000_000 * i as u64);
            let path = dir.path().join(format!("in{i}.sdx"));
            let design = t.map(|t| planned_design(&PlanOptions { tables: Some(t), ..PlanOptions::new(6_000, 3) }).unwrap());
            let fps: Vec<u64> = part.iter().map(|p| p.0).collect();
            let ids: Vec<u64> = part.iter().map(|p| p.1).collect();
            build_segment(&storage, &path, &fps, Some(&ids), &BuildOptions { design, ..BuildOptions::default() }).unwrap();
            let segment = Segment::open(&path).unwrap();
            let seq = 1 + 10_000 * i as u64;
            let meta = SegmentMeta { number: i as u64, entries: 6_000, file_len: segment.file_len(), min_seq: seq, max_seq: seq + 5_999, epoch: 0 };
            inputs.push(std::sync::Arc::new(LiveSegment { meta, segment, bands: Default::default(), ids: Default::default() }));
            pairs.extend(part);
        }
        let out = dir.path().join("out.sdx");
        let format = OutputFormat { k: 3, codec: Codec::Xor, sketches: None };
        let merged =
            merge(&storage, &inputs, &TombstoneSet::default(), &out, &format, &MergeOptions { buffer_entries: 1_500, checkpoint_interval: None, stop: None }).unwrap().unwrap();
        assert_eq!(merged.entries, pairs.len() as u64);
        let seg = Segment::open(&out).unwrap();
        assert_eq!(*seg.design(), planned_design(&PlanOptions::new(pairs.len() as u64, 3)).unwrap());
        pairs.sort_unstable();
        let got: Vec<(u64, u64)> = seg.entries().map(|e| e.map(|(f, i)| (f, i.unwrap()))).collect::<Result<_>>().unwrap();
        assert_eq!(got, pairs);
        for (t, table) in seg.design().tables().iter().enumerate() {
            let mut want: Vec<u64> = pairs.iter().map(|p| table.permutation.apply(p.0)).collect();
            want.sort_unstable();
            assert_eq!(seg.table_entries(t).collect::<Result<Vec<u64>>>().unwrap(), want, "table {t}");
        }
        for &(fp, _) in pairs.iter().step_by(97) {
            let q = fp ^ 0b1011;
            let want: Vec<(u64, u64)> = pairs.iter().copied().filter(|p| (p.0 ^ q).count_ones() <= 3).collect();
            let mut got: Vec<(u64, u64)> = seg.query(q, &crate::query::QueryOptions::within(3)).unwrap().iter().map(|m| (m.fingerprint, m.doc_id.unwrap())).collect();
            got.sort_unstable();
            assert_eq!(got, want);
        }
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).filter(|n| n.to_string_lossy().ends_with(".tmp")).collect();
        assert!(left.is_empty(), "spilled runs left behind: {left:?}");
        merged.spilled_runs
    }

    #[test]
    fn a_merge_sorts_only_the_tables_an_input_lacks() {
        // Inputs of the output's design (4 tables at this size) stream their own tables; a
        // 10-table input (what a segment above 1.7e7 entries has) lacks three of the output's
        // permutations, so its entries are sorted for those (spilling past the buffer).
        assert_eq!(merge_designs(&[None, None, None]), 0);
        assert!(merge_designs(&[None, Some(10), None]) > 0);
        assert!(merge_designs(&[Some(10), Some(10)]) > 0);
    }
}
