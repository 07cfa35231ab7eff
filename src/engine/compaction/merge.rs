//! The merge: the live pairs of adjacent segments written as one new segment (the worker
//! that runs what the policy chose). It writes the output file and its temporary runs,
//! nothing else: the engine checks the disk's room before and installs the output after.
//!
//! Memory is bounded whatever the sizes: sources are read block by block in fingerprint
//! order (table 0 and the id pages) and merged by `(fingerprint, id)`, dropping pairs a
//! tombstone hides and repeated pairs. Table 0 of the output is that stream. Every other
//! table needs the stream under its own permutation, sorted. When the merge drops nothing
//! (the usual case), output table `t` is the merge of the inputs' own tables of `t`'s
//! permutation, and only an input of another design (a 4-table segment below about 1.7e7
//! entries merged into a 10-table one) has its entries sorted for the permutations it
//! lacks. Otherwise every table's entries are sorted. Sorting goes through a buffer of at
//! most `CompactionOptions::buffer_entries` (shared by the tables), which is sorted and
//! spilled to a temporary run file whenever it fills; the runs are then merged. Each table
//! is read twice (once for the Huffman code's histogram, once to write it), the merged
//! stream three times (histogram, table 0, ids): decoding is cheaper than keeping it. When
//! the merge drops nothing, the histogram pass of the next table runs on a second thread
//! while a table is written. (At 2^26 entries, 7 live segments of both designs, the full
//! compaction takes 47 s this way against 103 s sorting every table, and writes the same
//! bytes.)

// Indexing: inputs and output tables indexed by the table number of the output's own design.
#![allow(clippy::indexing_slicing)]
use std::path::Path;

use super::external_sort::{ExternalSorter, Sorted};
use super::stream::{LiveMerge, SortedMerge};
use crate::codec::{Codec, SymbolHistogram};
use crate::engine::version::{LiveSegment, TombstoneSet};
use crate::error::{Error, Result};
use crate::plan::{planned_design, PlanOptions};
use crate::segment::{IdColumn, SegmentWriter, SketchColumn};
use crate::storage::Storage;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::manifest::SegmentMeta;

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
}
