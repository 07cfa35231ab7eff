//! Compaction: which segments to merge (size-tiered, over adjacent segments) and the
//! streaming merge itself.
//!
//! # Policy
//! Segments are kept in the order of their data (sequence numbers), oldest first. A
//! segment's *tier* is `floor(log_F(entries / flush_size))` with `F` the fan-out
//! ([`CompactionOptions::fanout`], default 4). Whenever the newest `F` segments share a
//! tier (or are smaller), they merge into one (which lands about one tier up), and the
//! check repeats; a longer run of such segments (left by merges that crashes cut short, or
//! by flushes that arrived while a long merge ran) merges `F` at a time, oldest first, so
//! no merge grows with the backlog and none is stranded between larger segments; segments
//! within a factor of 2 of each other count as one tier there, so sizes straddling a tier
//! boundary (3 and 4 flushes) still merge. Like a
//! base-`F` counter, this keeps at most `F - 1` segments per tier, so the live count stays
//! below `(F - 1) * (1 + log_F(total / flush_size))` and query cost grows with the log of
//! the data size, while each entry is rewritten about `log_F(total / flush_size)` times.
//!
//! Every live segment costs a query a probe of each of its tables, and below about 10^7
//! entries a probe's cost hardly depends on the segment's size (it decodes about half a
//! block before its prefix run starts), so a few small segments cost as much as the one
//! large segment they sit next to. So while the index is small (at most `F^3` flushes in
//! all), the small tiers also *absorb* ([`pick_small`]): when the two newest segments
//! together hold at most `F^2` flushes and the older holds at most `F` times the newer,
//! they merge. This keeps such an index at one segment plus a smaller one or two (at 10^7
//! entries and 2^20-entry flushes: 9.4M + the last flush, or 8M + 1M + the last flush,
//! depending on how flushes and merges interleave; the tiered policy alone leaves 4M + 4M +
//! 1M + 0.5M), for about two more rewrites of each entry while the index is small. A larger
//! index tiers as above: its large segments dominate a query's cost (from about 1.7e7
//! entries a compacted design has 10 tables, not 4), and rewrites there are what the
//! ingest time budget can least afford.
//! Only adjacent segments merge, so sequence ranges stay disjoint and the tombstone rule
//! (a delete hides copies in segments whose `max_seq` is older) keeps working. A full
//! compaction ([`crate::engine::Index::compact`]) merges everything into one segment.
//!
//! # Bounded merges
//! A merge is installed (its manifest durable) only when it is done: a process killed
//! during a merge loses that merge's work, and a merge longer than the time between kills
//! never lands. [`CompactionOptions::max_merge_entries`] bounds the input of every merge,
//! tiered and full alike: a full compaction then is a sequence of merges of adjacent
//! segments, each of at most that many entries and each installed before the next starts
//! ([`pick_full`]), so a kill loses at most one of them and every attempt after a kill
//! starts where the last one ended. The price: an index larger than the bound ends as
//! several segments (any two adjacent ones together above the bound, so at most
//! `2 * total / max_merge_entries + 1`), and queries probe each.
//!
//! # The merge
//! Memory is bounded whatever the sizes: sources are read block by block in fingerprint
//! order (table 0 and the id pages) and merged by `(fingerprint, id)`, dropping pairs a
//! tombstone hides and repeated pairs. Table 0 of the output is that stream. Every other
//! table needs the stream under its own permutation, sorted. When the merge drops nothing
//! (the usual case), output table `t` is the merge of the inputs' own tables of `t`'s
//! permutation, and only an input of another design (a 4-table segment below about 1.7e7
//! entries merged into a 10-table one) has its entries sorted for the permutations it
//! lacks. Otherwise every table's entries are sorted. Sorting goes through a buffer of at
//! most [`CompactionOptions::buffer_entries`] (shared by the tables), which is sorted and
//! spilled to a temporary run file whenever it fills; the runs are then merged. Each table
//! is read twice (once for the Huffman code's histogram, once to write it), the merged
//! stream three times (histogram, table 0, ids): decoding is cheaper than keeping it. When
//! the merge drops nothing, the histogram pass of the next table runs on a second thread
//! while a table is written. (At 2^26 entries, 7 live segments of both designs, the full
//! compaction takes 47 s this way against 103 s sorting every table, and writes the same
//! bytes.)

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use byteorder::{ByteOrder, LittleEndian as LE};

use super::version::{LiveSegment, TombstoneSet};
use crate::codec::{Codec, SymbolHistogram};
use crate::error::{Error, Result};
use crate::manifest::SegmentMeta;
use crate::plan::{planned_design, PlanOptions};
use crate::segment::{IdColumn, SegmentWriter, SketchColumn};
use crate::sort::sort_u64;
use crate::storage::{FileBytes, Storage};

/// How compaction chooses and merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactionOptions {
    /// Segments of one tier that trigger a merge, and the size ratio between tiers (>= 2);
    /// below `fanout^2` flushes the newest segments also absorb each other (see the
    /// module's policy; only while the index holds at most `fanout^3` flushes).
    pub fanout: usize,
    /// Fingerprints buffered in memory for sorting the permuted tables (8 bytes each),
    /// across all tables; beyond it the merge spills sorted runs to temporary files.
    pub buffer_entries: usize,
    /// Merge automatically after flushes (in the background thread when there is one).
    pub automatic: bool,
    /// Largest number of input entries one merge takes (tiered or full); segments whose
    /// merge would exceed it are left as they are. Unbounded by default (a full compaction
    /// is one merge); set it to what the machine merges between two kills where processes
    /// are killed often (about a million entries a second on one core).
    pub max_merge_entries: u64,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        Self { fanout: 4, buffer_entries: 8 << 20, automatic: true, max_merge_entries: u64::MAX }
    }
}

/// The segments (index range into `segments`, oldest first) the tiered policy merges next:
/// `fanout` adjacent segments of one tier, holding at most `max_merge` entries together.
pub(crate) fn pick(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> Option<std::ops::Range<usize>> {
    let fanout = fanout.max(2);
    if segments.len() < fanout {
        return None;
    }
    let tier = |entries: u64| {
        let mut t = 0u32;
        let mut size = flush_size.max(1);
        while entries >= size.saturating_mul(fanout as u64) && size < u64::MAX / fanout as u64 {
            size *= fanout as u64;
            t += 1;
        }
        t
    };
    let tiers: Vec<u32> = segments.iter().map(|s| tier(s.entries)).collect();
    let fits = |r: &std::ops::Range<usize>| segments[r.clone()].iter().map(|s| s.entries).fold(0u64, u64::saturating_add) <= max_merge;
    let newest = tiers[tiers.len() - 1];
    let same = tiers.iter().rev().take_while(|&&t| t <= newest).count();
    // The oldest `fanout` of that run: a merge's size stays bounded even when segments
    // piled up (merges cut short by crashes again and again), and its output stays older
    // than the small segments left after it, so repeated picks work through the run. (When
    // they hold too many entries, the next `fanout` of the run.)
    let run = (tiers.len() - same..=tiers.len().saturating_sub(fanout)).map(|start| start..start + fanout);
    // Otherwise `fanout` adjacent segments of one tier further back (what working through a
    // backlog leaves behind the newest, smaller segments): of the newest such run, its
    // oldest `fanout`. (Taking its newest would strand the older ones between larger
    // segments, where no segment of their tier can join them again: with merges lagging
    // behind flushes, 2^28 entries were left as 22 segments that way.)
    // Segments of about one size count as one tier here even across a tier boundary (a run
    // alternating 3 and 4 flushes, which absorbing merges leave, would never merge).
    let alike = |a: usize, b: usize| tiers[a] == tiers[b] || segments[a].entries.max(segments[b].entries) <= segments[a].entries.min(segments[b].entries).saturating_mul(2);
    let back = (0..=tiers.len() - fanout).rev().filter(|&i| (i + 1..i + fanout).all(|j| alike(i, j))).map(|i| {
        let start = (0..i).rev().take_while(|&j| alike(j, i)).count();
        i - start..i - start + fanout
    });
    run.chain(back).find(fits)
}

/// The small tiers' absorbing merge (see the module's policy): while all segments together
/// hold at most `fanout^3 * flush_size` entries, the two newest segments, when together
/// they hold at most `fanout^2 * flush_size` entries (and at most `max_merge`) and the older
/// holds at most `fanout` times the newer's entries. Each such merge removes a segment, so
/// repeated picks end; a segment past `fanout^2` flushes is never an input.
pub(crate) fn pick_small(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> Option<std::ops::Range<usize>> {
    let fanout = fanout.max(2) as u64;
    let flush_size = flush_size.max(1);
    let cap = flush_size.saturating_mul(fanout * fanout).min(max_merge);
    if segments.iter().map(|s| s.entries).fold(0u64, u64::saturating_add) > flush_size.saturating_mul(fanout * fanout * fanout) {
        return None;
    }
    let n = segments.len();
    let [older, newer] = segments.get(n.checked_sub(2)?..)? else { return None };
    let together = older.entries.saturating_add(newer.entries);
    (together <= cap && older.entries <= newer.entries.saturating_mul(fanout)).then_some(n - 2..n)
}

/// The automatic policy's next merge: the tiered merge ([`pick`]) when one is due (it
/// works through backlogs `fanout` at a time), else the small tiers' absorbing merge
/// ([`pick_small`]).
pub(crate) fn pick_next(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> Option<std::ops::Range<usize>> {
    pick(segments, flush_size, fanout, max_merge).or_else(|| pick_small(segments, flush_size, fanout, max_merge))
}

/// The next merge of a full compaction bounded by `max_merge` entries: the longest run of
/// at least two adjacent segments (the oldest such run on a tie) that holds at most
/// `max_merge` entries, or a lone segment worth rewriting (`rewrite_single`: tombstones hide
/// some of its pairs) within the bound. `None` when no merge within the bound is left.
pub(crate) fn pick_full(segments: &[SegmentMeta], max_merge: u64, rewrite_single: bool) -> Option<std::ops::Range<usize>> {
    if segments.len() == 1 {
        return (rewrite_single && segments[0].entries <= max_merge).then_some(0..1);
    }
    let mut best: Option<std::ops::Range<usize>> = None;
    for start in 0..segments.len() {
        let mut total = 0u64;
        let mut end = start;
        while end < segments.len() && total.saturating_add(segments[end].entries) <= max_merge {
            total += segments[end].entries;
            end += 1;
        }
        if end - start >= 2 && best.as_ref().is_none_or(|b| end - start > b.len()) {
            best = Some(start..end);
        }
    }
    best
}

/// True when the live segments are more than twice what the tiered policy keeps for their
/// total size, `2 * ((fanout - 1) * (2 + log_F(total / flush_size)) + fanout)`, not counting
/// segments too large to merge `fanout` at a time within `max_merge` entries: merges have
/// fallen behind flushes (the engine then stalls writes until they catch up).
pub(crate) fn over_budget(segments: &[SegmentMeta], flush_size: u64, fanout: usize, max_merge: u64) -> bool {
    let full = max_merge / fanout.max(2) as u64;
    let mergeable: Vec<&SegmentMeta> = segments.iter().filter(|s| s.entries <= full).collect();
    let fanout = fanout.max(2) as f64;
    let total: u64 = mergeable.iter().map(|s| s.entries).sum();
    let tiers = (total as f64 / flush_size.max(1) as f64).max(1.0).log(fanout);
    mergeable.len() as f64 > 2.0 * ((fanout - 1.0) * (2.0 + tiers) + fanout)
}

/// A source's sketches in table 0's order (for [`LiveMerge::with_sketches`]).
type SketchStream<'a> = Box<dyn Iterator<Item = Result<&'a [u8]>> + 'a>;

/// One source of the merge: a segment's `(fingerprint, id)` stream and its bound, and
/// (when the merge carries sketches and the segment has them) its sketch stream in step.
struct Source<'a> {
    entries: Box<dyn Iterator<Item = Result<(u64, Option<u64>)>> + 'a>,
    sketches: Option<SketchStream<'a>>,
    head: Option<(u64, u64)>,
    head_sketch: Option<&'a [u8]>,
    bound: u64,
}

impl Source<'_> {
    fn empty() -> Self {
        Source { entries: Box::new(std::iter::empty()), sketches: None, head: None, head_sketch: None, bound: 0 }
    }
}

/// The live pairs of several segments in `(fingerprint, id)` order, each once.
pub(crate) struct LiveMerge<'a> {
    sources: Vec<Source<'a>>,
    tombstones: &'a TombstoneSet,
    last: Option<(u64, u64)>,
    error: Option<Error>,
    /// False when there is no tombstone at all (most merges): no lookups then.
    any_tombstones: bool,
    /// Pairs dropped because a tombstone hides them.
    pub deleted: u64,
    /// Pairs dropped because an equal pair came first.
    pub repeated: u64,
    /// With [`Self::with_sketches`]: the sketch of the pair `next` returned last (`None`:
    /// its segment has no sketch column).
    pub sketch: Option<&'a [u8]>,
}

impl<'a> LiveMerge<'a> {
    pub fn new(inputs: &'a [std::sync::Arc<LiveSegment>], tombstones: &'a TombstoneSet) -> Self {
        Self::make(inputs, tombstones, false)
    }

    /// The same stream, with each pair's sketch in [`Self::sketch`].
    pub fn with_sketches(inputs: &'a [std::sync::Arc<LiveSegment>], tombstones: &'a TombstoneSet) -> Self {
        Self::make(inputs, tombstones, true)
    }

    fn make(inputs: &'a [std::sync::Arc<LiveSegment>], tombstones: &'a TombstoneSet, sketches: bool) -> Self {
        let any_tombstones = !tombstones.files.is_empty();
        let mut m = Self { sources: Vec::new(), tombstones, last: None, error: None, any_tombstones, deleted: 0, repeated: 0, sketch: None };
        for s in inputs {
            let sketches = (sketches && s.segment.has_sketches()).then(|| Box::new(s.segment.sketches_in_order()) as SketchStream<'a>);
            let mut src = Source { entries: Box::new(s.segment.entries()), sketches, head: None, head_sketch: None, bound: s.meta.max_seq };
            m.advance(&mut src);
            m.sources.push(src);
        }
        m
    }

    fn advance(&mut self, src: &mut Source<'a>) {
        if let Some(sketches) = src.sketches.as_mut() {
            src.head_sketch = match sketches.next() {
                Some(Ok(s)) => Some(s),
                Some(Err(e)) => {
                    self.error.get_or_insert(e);
                    None
                }
                None => None,
            };
        }
        src.head = match src.entries.next() {
            Some(Ok((fp, Some(id)))) => Some((fp, id)),
            Some(Ok((_, None))) => {
                self.error.get_or_insert(Error::InvalidArgument("an engine segment has no document ids".into()));
                None
            }
            Some(Err(e)) => {
                self.error.get_or_insert(e);
                None
            }
            None => None,
        };
    }

    /// The first error a source reported, which ended the stream early.
    pub fn finish(self) -> Result<()> {
        self.error.map_or(Ok(()), Err)
    }
}

impl Iterator for LiveMerge<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        loop {
            if self.error.is_some() {
                return None;
            }
            // Few sources: a linear scan for the smallest head beats a heap. Ties go to the
            // newest source, so a pair stored twice keeps its newest copy (and sketch): the
            // older copies follow it as repeats (when a delete hides the newest, it hides
            // every older copy too).
            let mut best: Option<(usize, (u64, u64))> = None;
            for (i, s) in self.sources.iter().enumerate() {
                if let Some(h) = s.head {
                    if best.is_none_or(|(_, b)| h <= b) {
                        best = Some((i, h));
                    }
                }
            }
            let (i, pair) = best?;
            let mut src = std::mem::replace(&mut self.sources[i], Source::empty());
            let bound = src.bound;
            let sketch = src.head_sketch;
            self.advance(&mut src);
            self.sources[i] = src;
            if self.last == Some(pair) {
                self.repeated += 1;
                continue;
            }
            if self.any_tombstones && self.tombstones.get(pair.0, pair.1).is_some_and(|s| s > bound) {
                self.deleted += 1;
                continue;
            }
            self.last = Some(pair);
            self.sketch = sketch;
            return Some(pair);
        }
    }
}

/// What a merge wrote.
pub(crate) struct Merged {
    pub entries: u64,
    pub file_len: u64,
    pub deleted: u64,
    pub repeated: u64,
    pub spilled_runs: usize,
}

/// What a merge's output is made with: the index's design distance, gap codec and sketch
/// column.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutputFormat {
    pub k: u32,
    pub codec: Codec,
    pub sketches: Option<SketchColumn>,
}

/// Merges `inputs` into a new segment at `path` (nothing is written when no pair is left).
pub(crate) fn merge(
    storage: &dyn Storage,
    inputs: &[std::sync::Arc<LiveSegment>],
    tombstones: &TombstoneSet,
    path: &Path,
    format: &OutputFormat,
    buffer_entries: usize,
) -> Result<Option<Merged>> {
    let OutputFormat { k, codec, sketches } = *format;
    let mut first = SymbolHistogram::new();
    let mut n = 0u64;
    let mut stream = LiveMerge::new(inputs, tombstones);
    for (fp, _) in &mut stream {
        first.push(codec, fp);
        n += 1;
    }
    let (deleted, repeated) = (stream.deleted, stream.repeated);
    stream.finish()?;
    if n == 0 {
        return Ok(None);
    }
    let design = planned_design(&PlanOptions::new(n, k))?;
    let tables = design.tables();
    let codecs = vec![codec; tables.len()];
    let mut writer = SegmentWriter::create_with(storage, path, &design, &codecs, IdColumn::Present, sketches)?;
    // When nothing was dropped, every input entry is in the output, so each permuted table
    // of the output is the merge of the inputs' tables of the same permutation; only inputs
    // without such a table (another design: smaller segments have 4 tables, larger 10)
    // have their entries sorted under it. Inputs of the output's design need no sorting.
    if deleted == 0 && repeated == 0 {
        let (file_len, spilled_runs) = merge_tables(storage, inputs, tombstones, path, writer, tables, codec, first, sketches, buffer_entries)?;
        return Ok(Some(Merged { entries: n, file_len, deleted, repeated, spilled_runs }));
    }
    let per_table = (buffer_entries / tables.len().saturating_sub(1).max(1)).max(1024);
    let mut sorters: Vec<ExternalSorter<'_>> = (1..tables.len()).map(|t| ExternalSorter::new(storage, path, t, per_table)).collect();
    let result = (|| {
        let mut spill_error = None;
        let mut stream = LiveMerge::new(inputs, tombstones);
        let feed = (&mut stream).map(|(fp, _)| {
            for (sorter, table) in sorters.iter_mut().zip(&tables[1..]) {
                if let Err(e) = sorter.push(table.permutation.apply(fp)) {
                    spill_error.get_or_insert(e);
                }
            }
            fp
        });
        writer.write_table(&first.code(), feed)?;
        stream.finish()?;
        spill_error.map_or(Ok(()), Err)?;
        for sorter in &mut sorters {
            let sorted = sorter.finish()?;
            let mut hist = SymbolHistogram::new();
            for v in sorted.iter() {
                hist.push(codec, v);
            }
            writer.write_table(&hist.code(), sorted.iter())?;
            // The table is written: its runs (or its buffer) go now, not at the end, so the
            // merge holds at most one table's sorted data, and no run it is done with stays
            // mapped and resident.
            sorter.remove_runs();
        }
        let mut stream = LiveMerge::new(inputs, tombstones);
        writer.write_ids((&mut stream).map(|(_, id)| id))?;
        stream.finish()?;
        write_sketches(&mut writer, inputs, tombstones, sketches)
    })();
    let spilled_runs = sorters.iter().map(|s| s.spilled).sum();
    for s in &mut sorters {
        s.remove_runs();
    }
    result?;
    let file_len = writer.finish()?;
    Ok(Some(Merged { entries: n, file_len, deleted, repeated, spilled_runs }))
}

/// The tables of a merge that drops nothing (see [`merge`]): table `t` of the output merges,
/// for each input, its own table of `t`'s permutation when it has one, and otherwise that
/// input's entries sorted under the permutation (one pass over such inputs feeds the sorters
/// of every table they lack; past the buffer the sorters spill runs). The histogram pass of
/// table `t + 1` runs on a second thread while table `t` is written (both stream block by
/// block; at most two histograms wait in the channel). Returns the file's length and the
/// runs spilled.
#[allow(clippy::too_many_arguments)]
fn merge_tables(
    storage: &dyn Storage,
    inputs: &[std::sync::Arc<LiveSegment>],
    tombstones: &TombstoneSet,
    path: &Path,
    mut writer: SegmentWriter<'_>,
    tables: &[crate::plan::TableDesign],
    codec: Codec,
    first: SymbolHistogram,
    sketches: Option<SketchColumn>,
    buffer_entries: usize,
) -> Result<(u64, usize)> {
    // own[t][i]: input i's table holding output table t's permutation.
    let own: Vec<Vec<Option<usize>>> =
        tables.iter().map(|out| inputs.iter().map(|s| s.segment.design().tables().iter().position(|d| d.permutation == out.permutation)).collect()).collect();
    let lacking: Vec<usize> = (1..tables.len()).filter(|&t| own[t].iter().any(Option::is_none)).collect();
    let per_table = (buffer_entries / lacking.len().max(1)).max(1024);
    let mut sorters: Vec<Option<ExternalSorter<'_>>> = (0..tables.len()).map(|t| lacking.contains(&t).then(|| ExternalSorter::new(storage, path, t, per_table))).collect();
    let result = (|| -> Result<()> {
        for (i, input) in inputs.iter().enumerate() {
            let wanted: Vec<usize> = lacking.iter().copied().filter(|&t| own[t][i].is_none()).collect();
            if wanted.is_empty() {
                continue;
            }
            // Table 0 is the identity: the input's fingerprints in order.
            let mut entries = input.segment.table_entries(0);
            for fp in &mut entries {
                let fp = fp?;
                for &t in &wanted {
                    if let (Some(sorter), Some(design)) = (sorters[t].as_mut(), tables.get(t)) {
                        sorter.push(design.permutation.apply(fp))?;
                    }
                }
            }
        }
        let mut sorted: Vec<Option<&Sorted>> = Vec::with_capacity(tables.len());
        for sorter in &mut sorters {
            sorted.push(match sorter.as_mut() {
                Some(sorter) => Some(sorter.finish()?),
                None => None,
            });
        }
        let sorted = &sorted;
        let own = &own;
        let sources = move |t: usize| {
            let tables = own[t].iter().zip(inputs).filter_map(|(j, s)| j.map(|j| Box::new(s.segment.table_entries(j)) as Box<dyn Iterator<Item = Result<u64>> + '_>));
            let rest = sorted[t].map(|s| Box::new(s.iter().map(Ok)) as Box<dyn Iterator<Item = Result<u64>> + '_>);
            SortedMerge::new(tables.chain(rest))
        };
        std::thread::scope(|scope| -> Result<()> {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            scope.spawn(move || {
                for t in 1..tables.len() {
                    let mut hist = SymbolHistogram::new();
                    let mut merged = sources(t);
                    for v in &mut merged {
                        hist.push(codec, v);
                    }
                    let failed = merged.finish().is_err();
                    if tx.send((!failed).then(|| hist.code())).is_err() || failed {
                        return;
                    }
                }
            });
            let mut stream = LiveMerge::new(inputs, tombstones);
            writer.write_table(&first.code(), (&mut stream).map(|(fp, _)| fp))?;
            stream.finish()?;
            for t in 1..tables.len() {
                // a failed histogram pass is reported by the write pass, which reads the same
                // blocks (dropping `rx` on an error stops the histogram thread)
                let code = rx.recv().ok().flatten();
                let mut merged = sources(t);
                match code {
                    Some(code) => writer.write_table(&code, &mut merged)?,
                    None => {
                        merged.by_ref().for_each(drop);
                        merged.finish()?;
                        return Err(Error::InvalidArgument(format!("compaction: the histogram pass of table {t} failed where the write pass did not")));
                    }
                };
                merged.finish()?;
                // The table's spilled runs are consumed: out of the resident set now (the
                // files go when the merge ends).
                if let Some(Some(Sorted::Runs(runs))) = sorted.get(t) {
                    for run in runs {
                        run.done_with(0, run.len());
                    }
                }
            }
            Ok(())
        })
    })();
    let spilled = sorters.iter().flatten().map(|s| s.spilled).sum();
    for s in sorters.iter_mut().flatten() {
        s.remove_runs();
    }
    result?;
    let mut stream = LiveMerge::new(inputs, tombstones);
    writer.write_ids((&mut stream).map(|(_, id)| id))?;
    stream.finish()?;
    write_sketches(&mut writer, inputs, tombstones, sketches)?;
    Ok((writer.finish()?, spilled))
}

/// The sketch column of a merge's output: each live pair's sketch from its segment, in the
/// output's table-0 order (zeros, "no sketch", for a pair from a segment without one).
fn write_sketches(writer: &mut SegmentWriter<'_>, inputs: &[std::sync::Arc<LiveSegment>], tombstones: &TombstoneSet, sketches: Option<SketchColumn>) -> Result<()> {
    let Some(column) = sketches else { return Ok(()) };
    let width = usize::from(column.bytes);
    let zeros = vec![0u8; width];
    let mut stream = LiveMerge::with_sketches(inputs, tombstones);
    let mut wrong = None;
    let values = std::iter::from_fn(|| {
        stream.next()?;
        Some(match stream.sketch {
            Some(s) if s.len() == width => s,
            Some(s) => {
                wrong.get_or_insert(s.len());
                &zeros[..]
            }
            None => &zeros[..],
        })
    });
    writer.write_sketches(values)?;
    stream.finish()?;
    match wrong {
        Some(w) => Err(Error::InvalidArgument(format!("compaction: an input segment holds {w}-byte sketches, the index's are {width} bytes"))),
        None => Ok(()),
    }
}

/// The merge of sorted streams of u64 that may fail (segment tables); the first error
/// ends the stream and is returned by [`SortedMerge::finish`].
struct SortedMerge<I> {
    sources: Vec<(I, Option<u64>)>,
    error: Option<Error>,
}

impl<I: Iterator<Item = Result<u64>>> SortedMerge<I> {
    fn new(sources: impl IntoIterator<Item = I>) -> Self {
        let mut m = Self { sources: Vec::new(), error: None };
        for mut it in sources {
            let head = m.pull(&mut it);
            m.sources.push((it, head));
        }
        m
    }

    fn pull(&mut self, it: &mut I) -> Option<u64> {
        match it.next()? {
            Ok(v) => Some(v),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }

    fn finish(self) -> Result<()> {
        self.error.map_or(Ok(()), Err)
    }
}

impl<I: Iterator<Item = Result<u64>>> Iterator for SortedMerge<I> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.error.is_some() {
            return None;
        }
        let mut best: Option<(usize, u64)> = None;
        for (i, (_, head)) in self.sources.iter().enumerate() {
            if let Some(v) = *head {
                if best.is_none_or(|(_, b)| v < b) {
                    best = Some((i, v));
                }
            }
        }
        let (i, v) = best?;
        let next = match self.sources[i].0.next() {
            Some(Ok(x)) => Some(x),
            Some(Err(e)) => {
                self.error.get_or_insert(e);
                None
            }
            None => None,
        };
        self.sources[i].1 = next;
        Some(v)
    }
}

/// Sorts a stream of u64 in bounded memory: sorted chunks spill to temporary run files
/// (`SEGMENT.tN.rM.tmp`, raw little-endian u64s, never synced: they die with the merge).
struct ExternalSorter<'s> {
    storage: &'s dyn Storage,
    base: PathBuf,
    table: usize,
    chunk: Vec<u64>,
    capacity: usize,
    runs: Vec<PathBuf>,
    spilled: usize,
    sorted: Option<Sorted>,
}

impl Drop for ExternalSorter<'_> {
    /// A merge that fails (a full disk) removes its spilled runs at once.
    fn drop(&mut self) {
        self.remove_runs();
    }
}

/// A finished sort: in memory, or runs to merge.
enum Sorted {
    Memory(Vec<u64>),
    Runs(Vec<FileBytes>),
}

impl<'s> ExternalSorter<'s> {
    fn new(storage: &'s dyn Storage, segment: &Path, table: usize, capacity: usize) -> Self {
        Self { storage, base: segment.to_path_buf(), table, chunk: Vec::new(), capacity, runs: Vec::new(), spilled: 0, sorted: None }
    }

    fn push(&mut self, v: u64) -> Result<()> {
        self.chunk.push(v);
        if self.chunk.len() >= self.capacity {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        sort_u64(&mut self.chunk);
        let mut name = self.base.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(format!(".t{}.r{}.tmp", self.table, self.runs.len()));
        let path = self.base.with_file_name(name);
        let file = self.storage.create(&path).map_err(|e| Error::io(&path, "create", e))?;
        self.runs.push(path.clone());
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut buf = [0u8; 8 * 512];
        for chunk in self.chunk.chunks(512) {
            LE::write_u64_into(chunk, &mut buf[..chunk.len() * 8]);
            out.write_all(&buf[..chunk.len() * 8]).map_err(|e| Error::io(&path, "write", e))?;
        }
        out.flush().map_err(|e| Error::io(&path, "write", e))?;
        self.chunk.clear();
        self.spilled += 1;
        Ok(())
    }

    fn finish(&mut self) -> Result<&Sorted> {
        if self.sorted.is_none() {
            if self.runs.is_empty() {
                sort_u64(&mut self.chunk);
                self.sorted = Some(Sorted::Memory(std::mem::take(&mut self.chunk)));
            } else {
                if !self.chunk.is_empty() {
                    self.spill()?;
                }
                self.chunk = Vec::new();
                let runs = self.runs.iter().map(|p| self.storage.read(p).map_err(|e| Error::io(p, "read", e))).collect::<Result<Vec<_>>>()?;
                self.sorted = Some(Sorted::Runs(runs));
            }
        }
        Ok(self.sorted.as_ref().expect("set above"))
    }

    fn remove_runs(&mut self) {
        self.sorted = None;
        for p in self.runs.drain(..) {
            // A run left behind is a *.tmp orphan, removed at the next open.
            let _ = self.storage.remove(&p);
        }
    }
}

impl Sorted {
    fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            Sorted::Memory(v) => Box::new(v.iter().copied()),
            Sorted::Runs(runs) => Box::new(RunMerge::new(runs)),
        }
    }
}

/// K-way merge of sorted runs of little-endian u64s.
struct RunMerge<'a> {
    runs: Vec<&'a [u8]>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl<'a> RunMerge<'a> {
    fn new(runs: &'a [FileBytes]) -> Self {
        let mut m = Self { runs: runs.iter().map(|r| &r[..]).collect(), heap: BinaryHeap::new() };
        for i in 0..m.runs.len() {
            m.refill(i);
        }
        m
    }

    fn refill(&mut self, i: usize) {
        if let Some((head, rest)) = self.runs[i].split_first_chunk::<8>() {
            self.heap.push(Reverse((u64::from_le_bytes(*head), i)));
            self.runs[i] = rest;
        }
    }
}

impl Iterator for RunMerge<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let Reverse((v, i)) = self.heap.pop()?;
        self.refill(i);
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` xorshift fingerprints from `seed`, with ids `base..`.
    fn random_pairs(seed: u64, count: usize, base: u64) -> Vec<(u64, u64)> {
        let mut x = seed;
        (0..count as u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x, base + i)
            })
            .collect()
    }

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
            let meta = SegmentMeta { number: i as u64, entries: 6_000, file_len: segment.file_len(), min_seq: seq, max_seq: seq + 5_999 };
            inputs.push(std::sync::Arc::new(LiveSegment { meta, segment }));
            pairs.extend(part);
        }
        let out = dir.path().join("out.sdx");
        let format = OutputFormat { k: 3, codec: Codec::Xor, sketches: None };
        let merged = merge(&storage, &inputs, &TombstoneSet::default(), &out, &format, 1_500).unwrap().unwrap();
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

    fn meta(entries: u64) -> SegmentMeta {
        SegmentMeta { number: 0, entries, file_len: 0, min_seq: 0, max_seq: 0 }
    }

    #[test]
    fn tiered_policy_merges_the_newest_fanout_of_a_tier() {
        let segs: Vec<SegmentMeta> = [100, 100, 100].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, u64::MAX), None);
        let segs: Vec<SegmentMeta> = [1600, 400, 100, 100, 100, 100].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, u64::MAX), Some(2..6));
        let segs: Vec<SegmentMeta> = [1600, 400, 400, 400, 400].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, u64::MAX), Some(1..5));
        let segs: Vec<SegmentMeta> = [400, 400, 400, 100].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, u64::MAX), None);
        // a backlog merges `fanout` at a time, oldest first
        let segs: Vec<SegmentMeta> = [1600, 100, 100, 100, 100, 100, 100, 100].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, u64::MAX), Some(1..5));
    }

    #[test]
    fn merges_stay_within_max_merge_entries() {
        // tiered: the oldest four of the run hold too much, the next four fit
        let segs: Vec<SegmentMeta> = [100, 100, 100, 100, 10, 10, 10, 10].map(meta).to_vec();
        assert_eq!(pick(&segs, 100, 4, 400), Some(0..4));
        assert_eq!(pick(&segs, 100, 4, 399), Some(1..5));
        assert_eq!(pick(&segs, 100, 4, 100), Some(4..8));
        assert_eq!(pick(&segs, 100, 4, 39), None);
        // full: the longest run within the bound, oldest first on a tie; a lone segment only
        // when tombstones hide some of it and it fits
        let segs: Vec<SegmentMeta> = [500, 30, 30, 30, 200, 10, 10].map(meta).to_vec();
        assert_eq!(pick_full(&segs, u64::MAX, false), Some(0..7));
        assert_eq!(pick_full(&segs, 100, false), Some(1..4));
        assert_eq!(pick_full(&segs, 60, false), Some(1..3));
        assert_eq!(pick_full(&segs, 19, false), None);
        assert_eq!(pick_full(&[meta(50)], 100, false), None);
        assert_eq!(pick_full(&[meta(50)], 100, true), Some(0..1));
        assert_eq!(pick_full(&[meta(500)], 100, true), None);
    }

    #[test]
    fn small_tiers_absorb_the_newest_segment() {
        // flush size 100, fan-out 4: merges of up to 1,600 entries, the older at most 4x
        let pick_s = |sizes: &[u64]| pick_small(&sizes.iter().copied().map(meta).collect::<Vec<_>>(), 100, 4, u64::MAX);
        assert_eq!(pick_s(&[100]), None);
        assert_eq!(pick_s(&[100, 100]), Some(0..2));
        assert_eq!(pick_s(&[3000, 400, 100]), Some(1..3));
        assert_eq!(pick_s(&[3000, 500, 100]), None, "the older is more than 4x the newer");
        assert_eq!(pick_s(&[3000, 1000, 700]), None, "together above 16 flushes");
        assert_eq!(pick_s(&[800, 800]), Some(0..2));
        assert_eq!(pick(&[800, 800].map(meta), 100, 4, u64::MAX), None, "the tiered policy alone waits for four");
        // within max_merge entries, and a fan-out below 2 counts as 2
        assert_eq!(pick_small(&[100, 100].map(meta), 100, 4, 199), None);
        assert_eq!(pick_small(&[200, 100].map(meta), 100, 0, u64::MAX), Some(0..2));
        assert_eq!(pick_small(&[300, 100].map(meta), 100, 1, u64::MAX), None);
        // only while the whole index holds at most fanout^3 flushes
        assert_eq!(pick_s(&[4700, 1200, 400, 100]), Some(2..4));
        assert_eq!(pick_s(&[4800, 1200, 400, 100]), None);
        // the tiered merge comes first (it works through backlogs fanout at a time)
        let segs: Vec<SegmentMeta> = [1600, 100, 100, 100, 100, 100].map(meta).to_vec();
        assert_eq!(pick_next(&segs, 100, 4, u64::MAX), Some(1..5));
        assert_eq!(pick_next(&[1600, 400, 100].map(meta), 100, 4, u64::MAX), Some(1..3));
    }

    /// Applies the automatic policy after every flush of `flushes` (entries each) and returns,
    /// after each, the live segment sizes; plus the entries all merges wrote.
    fn settle_after_flushes(flushes: &[u64], flush: u64, fanout: usize) -> (Vec<Vec<u64>>, u64) {
        let mut segs: Vec<SegmentMeta> = Vec::new();
        let mut written = 0u64;
        let mut shapes = Vec::new();
        for &f in flushes {
            segs.push(meta(f));
            while let Some(r) = pick_next(&segs, flush, fanout, u64::MAX) {
                assert!(r.len() >= 2);
                let entries: u64 = segs[r.clone()].iter().map(|s| s.entries).sum();
                written += entries;
                segs.splice(r, [meta(entries)]);
            }
            shapes.push(segs.iter().map(|s| s.entries).collect());
        }
        (shapes, written)
    }

    #[test]
    fn the_policy_keeps_few_segments_below_fanout_squared_flushes_and_bounded_rewrites() {
        for fanout in [2usize, 3, 4, 5] {
            let flush = 1000u64;
            let f = fanout as u64;
            // full flushes: up to fanout^2 flushes of data the live set is one segment and
            // at most two smaller ones (each a fan-out below the one before it)
            let (shapes, _) = settle_after_flushes(&vec![flush; (f * f) as usize], flush, fanout);
            for (i, shape) in shapes.iter().enumerate() {
                assert!(shape.len() <= 3, "fan-out {fanout}, after flush {}: {shape:?}", i + 1);
                assert!(shape.windows(2).all(|w| w[0] > f * w[1]), "fan-out {fanout}, after flush {}: {shape:?}", i + 1);
            }
            // far more data: still logarithmic, and each entry rewritten at most
            // log_F(total / flush) + fanout - 1 times (the absorbing merges cost up to fanout - 1 of them)
            let n = 300usize;
            let (shapes, written) = settle_after_flushes(&vec![flush; n], flush, fanout);
            let log = (n as f64).log(fanout as f64);
            for (i, shape) in shapes.iter().enumerate() {
                let bound = (fanout as f64 - 1.0) * (1.0 + ((i + 1) as f64).log(fanout as f64)) + 2.0;
                assert!(shape.len() as f64 <= bound, "fan-out {fanout}, after flush {}: {} segments (bound {bound:.1})", i + 1, shape.len());
            }
            let rewrites = written as f64 / (n as u64 * flush) as f64;
            assert!(rewrites <= log + fanout as f64 - 1.0, "fan-out {fanout}: each entry rewritten {rewrites:.2} times (log_F {log:.2})");
        }
    }

    #[test]
    fn the_policy_stays_logarithmic_under_random_flushes_deletes_and_lost_merges() {
        random_flushes_stay_logarithmic(0x9e37_79b9_7f4a_7c15, pick_next, false);
    }

    #[test]
    fn a_bounded_full_compaction_ends_with_no_two_adjacent_segments_within_the_bound() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for bound in [50u64, 333, 1000, 5000] {
            let mut segs: Vec<SegmentMeta> = (0..200)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    meta(1 + x % 120)
                })
                .collect();
            let total: u64 = segs.iter().map(|s| s.entries).sum();
            while let Some(r) = pick_full(&segs, bound, false) {
                let entries: u64 = segs[r.clone()].iter().map(|s| s.entries).sum();
                assert!(entries <= bound && r.len() >= 2);
                segs.splice(r, [meta(entries)]);
            }
            assert_eq!(segs.iter().map(|s| s.entries).sum::<u64>(), total);
            assert!(segs.windows(2).all(|w| w[0].entries + w[1].entries > bound), "bound {bound}: two adjacent segments left that fit");
            assert!((segs.len() as u64) <= 2 * total / bound + 1, "bound {bound}: {} segments", segs.len());
        }
    }

    #[test]
    fn a_backlog_of_small_segments_converges_with_bounded_merges() {
        // 3,000 segments of 20 entries (what thousands of flushes whose merges were all cut
        // short leave), flush size 24, fan-out 3: applying the policy to completion must use
        // merges of exactly 3 inputs and end within the tier bound.
        let (flush, fanout) = (24u64, 3usize);
        let mut segs: Vec<SegmentMeta> = vec![meta(20); 3000];
        let mut merges = 0;
        while let Some(r) = pick(&segs, flush, fanout, u64::MAX) {
            assert_eq!(r.len(), fanout);
            let entries = segs[r.clone()].iter().map(|s| s.entries).sum();
            segs.splice(r, [meta(entries)]);
            merges += 1;
        }
        let total: u64 = segs.iter().map(|s| s.entries).sum();
        assert_eq!(total, 60_000);
        let bound = (fanout as f64 - 1.0) * (1.0 + (total as f64 / flush as f64).log(fanout as f64));
        assert!((segs.len() as f64) <= bound, "{} segments left, bound {bound:.1}", segs.len());
        // each merge removes fanout - 1 segments
        assert_eq!(merges, (3000 - segs.len()) / (fanout - 1));
    }

    #[test]
    fn the_live_segment_count_stays_logarithmic_under_flushes_deletes_and_lost_merges() {
        random_flushes_stay_logarithmic(0x2545_f491_4f6c_dd1d, pick, true);
    }

    type Picker = fn(&[SegmentMeta], u64, usize, u64) -> Option<std::ops::Range<usize>>;

    /// Flushes of 1 to 100 entries, one round in ten losing its merges (a crash), merges
    /// chosen by `picker` (each of exactly `fanout` segments when `exact_fanout`) keeping 70%
    /// to 100% of their inputs (deleted pairs dropped): after every round the live count is
    /// within the tiered bound.
    /// The background thread's view: merges take time (`cost` flush intervals per flush of
    /// entries merged) while flushes keep arriving, one merge at a time, as in `simdex add`;
    /// at the end (`close`) the merge in flight lands and the policy runs to completion.
    /// Returns the segments left, the most seen while flushing, and the entries rewritten.
    fn lagging_merges(flushes: usize, fanout: usize, cost: f64) -> (Vec<u64>, usize, u64) {
        let flush = 1u64 << 20;
        let mut segs: Vec<SegmentMeta> = Vec::new();
        let mut busy: Option<(std::ops::Range<usize>, u64, f64)> = None;
        let mut free_at = 0f64;
        let (mut most, mut written) = (0usize, 0u64);
        for round in 0..=flushes {
            let now = round as f64;
            if round < flushes {
                segs.push(meta(flush));
            }
            loop {
                if let Some((r, entries, done)) = busy.clone() {
                    if done > now && round < flushes {
                        break;
                    }
                    segs.splice(r, [meta(entries)]);
                    written += entries;
                    free_at = done;
                    busy = None;
                }
                match pick_next(&segs, flush, fanout, u64::MAX) {
                    Some(r) => {
                        let entries: u64 = segs[r.clone()].iter().map(|s| s.entries).sum();
                        busy = Some((r, entries, free_at.max(now - 1.0) + cost * entries as f64 / flush as f64));
                    }
                    None => break,
                }
            }
            most = most.max(segs.len());
        }
        (segs.iter().map(|s| s.entries / flush).collect(), most, written)
    }

    #[test]
    fn merges_that_lag_behind_flushes_strand_no_segments() {
        // 2^28 entries in 256 flushes of 2^20 (`scale.sh 28`), merges from 5x faster than
        // ingest to as slow: once the last merges land, the shape is the tiered policy's (at
        // most F - 1 segments a tier; a merge that took the newest F of a longer run of one
        // tier used to strand the older ones between larger segments: 22 segments were left
        // at 2^28), and every entry is rewritten about log_F(flushes) times, not more.
        for cost in [0.2, 0.5, 1.0] {
            let (left, most, written) = lagging_merges(256, 4, cost);
            let rewrites = written as f64 / (256u64 << 20) as f64;
            eprintln!("cost {cost}: left {left:?}, at most {most} while flushing, {rewrites:.2} rewrites per entry");
            let bound = 3 * (1 + 4);
            assert!(left.len() <= bound, "cost {cost}: {} segments left: {left:?}", left.len());
            for w in left.windows(2) {
                assert!(w[0] >= w[1], "cost {cost}: a smaller segment older than a larger one: {left:?}");
            }
            assert!(rewrites <= 6.0, "cost {cost}: {rewrites:.2} rewrites per entry");
        }
    }

    fn random_flushes_stay_logarithmic(seed: u64, picker: Picker, exact_fanout: bool) {
        for fanout in [2usize, 3, 4] {
            let flush = 100u64;
            let mut x = seed ^ fanout as u64;
            let mut rand = |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let mut segs: Vec<SegmentMeta> = Vec::new();
            for round in 0..5000 {
                segs.push(meta(1 + rand(flush)));
                if rand(10) == 0 {
                    continue;
                }
                while let Some(r) = picker(&segs, flush, fanout, u64::MAX) {
                    assert!(!exact_fanout || r.len() == fanout, "{r:?}");
                    let entries: u64 = segs[r.clone()].iter().map(|s| s.entries).sum();
                    segs.splice(r, [meta((entries * (70 + rand(31)) / 100).max(1))]);
                }
                let total: u64 = segs.iter().map(|s| s.entries).sum();
                let bound = (fanout as f64 - 1.0) * (2.0 + (total as f64 / flush as f64).max(1.0).log(fanout as f64)) + 3.0;
                assert!((segs.len() as f64) <= bound, "fan-out {fanout}, round {round}: {} segments for {total} entries (bound {bound:.1})", segs.len());
            }
        }
    }
}
