//! The interleaved probe: every table's (or multi-probe variant's) first block is found and
//! asked for before any is decoded, then the blocks are decoded together, one entry of each
//! lane per round, so that the CPU overlaps the tables' serial decoding chains. Tables
//! beyond [`PREFETCH_TABLES`], and segments whose tables mix codecs, are probed one by one
//! (`probe`). [`in_turn`] is the round loop, which the batch join's walks (`wanted`) share.

use crate::codec::{Codec, Cursor, DeltaGaps, Gaps, XorGaps, BLOCK_BYTES};
use crate::error::Result;
use crate::plan::{prefix_mask, ProbePlan};

use super::cache_hints::{prefetch_block, prefetch_line};
use super::table::Table;
use super::Segment;

impl Segment {
    #[inline(always)]
    pub(super) fn probe_all_portable(&self, fingerprint: u64, k: u32, found: &mut Vec<u64>) -> Result<()> {
        // Find every table's first block and touch its cache lines before decoding any:
        // the blocks of a large segment are usually not in the CPU cache, and loads issued
        // together overlap their memory latency instead of paying it table after table.
        let mut starts = [0u64; PREFETCH_TABLES];
        let mut counts = [0u32; PREFETCH_TABLES];
        // Each key search's first probe is an interpolation between the table's first and
        // last keys, usually a cache miss: ask for every table's line first, so that the
        // searches' misses overlap instead of coming one table after the other.
        for table in self.tables.iter().take(PREFETCH_TABLES) {
            table.prefetch_search(table.design.permutation.apply(fingerprint) & table.design.prefix_mask());
        }
        for (start, table) in starts.iter_mut().zip(&self.tables) {
            let q = table.design.permutation.apply(fingerprint);
            *start = table.lower_bound(q & table.design.prefix_mask())?;
        }
        // On disk and cold (recent queries waited for the disk), ask for every table's
        // block at once, so that their reads overlap instead of faulting one by one.
        let cold = self.cold.is_cold();
        if cold {
            for (&start, table) in starts.iter().zip(&self.tables).filter(|(&s, t)| s < t.dir.block_count) {
                self.bytes.will_need(table.block_offset(start) as usize, BLOCK_BYTES);
            }
        }
        let clock = self.bytes.is_mapped().then(std::time::Instant::now);
        for ((&start, count), table) in starts.iter().zip(counts.iter_mut()).zip(&self.tables).filter(|((&s, _), t)| s < t.dir.block_count) {
            let at = table.block_offset(start) as usize;
            let block = self.bytes.get(at..).unwrap_or_default().iter().take(BLOCK_BYTES);
            for &byte in block.step_by(64) {
                std::hint::black_box(byte);
            }
            // The block's seek hints, when it has them, are away from it too.
            if let Some(word) = table.index.hints_word(start) {
                prefetch_line(word);
            }
            // The entry count lives in the block index, away from the block: loading it
            // here overlaps its cache miss with the blocks'. (Used only after the block's
            // index chunk is checked.)
            *count = table.block_entries(start);
        }
        if let Some(clock) = clock {
            self.cold.observe(cold, clock.elapsed());
        }
        // Decode the tables' blocks in turn, one entry of each per round: each table's
        // decoding is a serial chain (where an entry ends depends on the one before), and
        // advancing several chains in one loop lets the CPU overlap them.
        let n = self.tables.len().min(PREFETCH_TABLES);
        let codec = self.tables.first().map(|t| t.codec);
        if n > 1 && self.tables.iter().all(|t| Some(t.codec) == codec) {
            let mut lanes: [Option<Lane<'_>>; PREFETCH_TABLES] = [None; PREFETCH_TABLES];
            for (t, (lane, table)) in lanes.iter_mut().zip(&self.tables).enumerate() {
                let (Some(&start), Some(&count)) = (starts.get(t), counts.get(t)) else { continue };
                let q = table.design.permutation.apply(fingerprint);
                *lane = Some(Lane::new(t, table, q, q, table.design.prefix_bits, start));
                if start < table.dir.block_count {
                    if let Some(lane) = lane.as_mut() {
                        self.enter_block(lane, start, count, k, found)?;
                    }
                }
            }
            self.run_group(codec, lanes.get_mut(..n).unwrap_or_default(), k, found)?;
            for t in n..self.tables.len() {
                self.probe(t, fingerprint, k, None, found)?;
            }
            return Ok(());
        }
        for t in 0..self.tables.len() {
            let start = starts.get(t).copied().zip(counts.get(t).copied());
            self.probe(t, fingerprint, k, start, found)?;
        }
        Ok(())
    }

    /// [`Self::run_lanes`] for lanes whose tables all have `codec`; empties `lanes`.
    #[inline(always)]
    fn run_group<'s>(&'s self, codec: Option<Codec>, lanes: &mut [Option<Lane<'s>>], k: u32, found: &mut Vec<u64>) -> Result<()> {
        let r = match codec {
            Some(Codec::Xor) => self.run_lanes::<XorGaps>(lanes, k, found),
            Some(Codec::Delta) => self.run_lanes::<DeltaGaps>(lanes, k, found),
            // No tables, so no lanes to run.
            None => Ok(()),
        };
        lanes.fill(None);
        r
    }

    /// Advances every lane one entry per round until all are done.
    #[inline(always)]
    fn run_lanes<'s, G: Gaps>(&'s self, lanes: &mut [Option<Lane<'s>>], k: u32, found: &mut Vec<u64>) -> Result<()> {
        in_turn(lanes, |lane| lane.as_ref().is_none_or(|l| l.done), |lane| {
            let Some(lane) = lane.as_mut() else { return Ok(()) };
            if lane.cursor.as_ref().is_none_or(|c| c.remaining() == 0) {
                return self.next_block(lane, k, found);
            }
            let Some(cursor) = lane.cursor.as_mut() else { return Ok(()) };
            let v = if lane.seeking {
                match cursor.seek_step::<G>(lane.lo, lane.low_bits, &mut lane.top) {
                    Ok(Some(v)) => {
                        lane.seeking = false;
                        v
                    }
                    Ok(None) => return Ok(()),
                    Err(e) => return Err(self.block_error(lane.t, lane.b, e)),
                }
            } else {
                cursor.next::<G>().map_err(|e| self.block_error(lane.t, lane.b, e))?
            };
            lane.check(v, k, found);
            Ok(())
        })
    }

    /// A lane whose block is decoded: on to the next block if the run may go on there.
    #[inline(never)]
    fn next_block<'s>(&'s self, lane: &mut Lane<'s>, k: u32, found: &mut Vec<u64>) -> Result<()> {
        if lane.cursor.is_none() {
            // The probe's first block is past the table's end: nothing to read.
            lane.done = true;
            return Ok(());
        }
        if lane.table.key(lane.b)? > lane.hi || lane.b + 1 >= lane.table.dir.block_count {
            lane.done = true;
            return Ok(());
        }
        let b = lane.b + 1;
        self.enter_block(lane, b, lane.table.block_entries(b), k, found)
    }

    /// Starts `lane` on block `b` (holding `count` entries, as stored): checks its CRC,
    /// reads its first entry and either checks it (it is in the run) or starts the seek.
    #[inline(never)]
    fn enter_block<'s>(&'s self, lane: &mut Lane<'s>, b: u64, count: u32, k: u32, found: &mut Vec<u64>) -> Result<()> {
        let mut cursor = self.cursor(lane.t, b, count)?;
        let first = cursor.first();
        lane.b = b;
        if first >= lane.lo {
            lane.seeking = false;
            lane.check(first, k, found);
        } else {
            lane.seeking = true;
            lane.top = cursor.seek_start(lane.low_bits);
            match lane.table.codec {
                Codec::Xor => {
                    if let Some(top) = self.restart_seek(lane.table, b, &mut cursor, lane.lo, lane.low_bits) {
                        lane.top = top;
                    }
                }
                // Seek hints restart at an entry the code rebuilds from the prefix alone,
                // which only the XOR code does.
                Codec::Delta => {}
            }
        }
        lane.cursor = Some(cursor);
        Ok(())
    }

    #[inline(always)]
    pub(super) fn multi_probe_portable(&self, fingerprint: u64, plan: &ProbePlan, found: &mut Vec<u64>) -> Result<()> {
        // Find every probe's first block and touch it before decoding any, as `probe_all`
        // does: the loads overlap instead of waiting one after the other.
        let mut starts: Vec<(u64, u32)> = Vec::with_capacity(plan.tables().iter().map(|p| p.flips.len()).sum());
        for (table, probes) in self.tables.iter().zip(plan.tables()) {
            let q = table.design.permutation.apply(fingerprint);
            let mask = prefix_mask(probes.probe_bits);
            for &flip in &probes.flips {
                table.prefetch_search((q ^ flip) & mask);
            }
        }
        for (table, probes) in self.tables.iter().zip(plan.tables()) {
            let q = table.design.permutation.apply(fingerprint);
            let mask = prefix_mask(probes.probe_bits);
            for &flip in &probes.flips {
                let b = table.lower_bound((q ^ flip) & mask)?;
                if b < table.dir.block_count {
                    prefetch_block(self.bytes.get(table.block_offset(b) as usize..).unwrap_or_default());
                }
                starts.push((b, table.block_entries(b)));
            }
        }
        // Decode the probes' blocks in turn, as `probe_all` does, a group at a time.
        let codec = self.tables.first().map(|t| t.codec);
        if self.tables.iter().all(|t| Some(t.codec) == codec) {
            let mut lanes: [Option<Lane<'_>>; PREFETCH_TABLES] = [None; PREFETCH_TABLES];
            let mut filled = 0;
            let mut starts = starts.iter();
            for (t, (table, probes)) in self.tables.iter().zip(plan.tables()).enumerate() {
                let q = table.design.permutation.apply(fingerprint);
                for &flip in &probes.flips {
                    let Some(&(start, count)) = starts.next() else { break };
                    let mut lane = Lane::new(t, table, q, q ^ flip, probes.probe_bits, start);
                    if start < table.dir.block_count {
                        self.enter_block(&mut lane, start, count, plan.k(), found)?;
                    }
                    if let Some(slot) = lanes.get_mut(filled) {
                        *slot = Some(lane);
                        filled += 1;
                    }
                    if filled == lanes.len() {
                        self.run_group(codec, &mut lanes, plan.k(), found)?;
                        filled = 0;
                    }
                }
            }
            let group = lanes.get_mut(..filled).unwrap_or_default();
            return self.run_group(codec, group, plan.k(), found);
        }
        let mut starts = starts.into_iter();
        for (t, (table, probes)) in self.tables.iter().zip(plan.tables()).enumerate() {
            let q = table.design.permutation.apply(fingerprint);
            for &flip in &probes.flips {
                self.probe_range(t, table, q, q ^ flip, probes.probe_bits, plan.k(), starts.next(), found)?;
            }
        }
        Ok(())
    }
}

/// Advances each of `lanes` (serial decoding chains: a table's probe, a walk over a table's
/// blocks) by one `step` per round until `done` says each is done, so that the CPU overlaps
/// the chains instead of running them one after the other; the first error.
#[inline(always)]
pub(super) fn in_turn<L>(lanes: &mut [L], done: impl Fn(&L) -> bool, mut step: impl FnMut(&mut L) -> Result<()>) -> Result<()> {
    loop {
        let mut active = false;
        for lane in lanes.iter_mut() {
            if done(lane) {
                continue;
            }
            active = true;
            step(lane)?;
        }
        if !active {
            return Ok(());
        }
    }
}

/// Tables whose first blocks a query prefetches together (the rest are probed one by one).
const PREFETCH_TABLES: usize = 32;

/// One table's probe in the interleaved query loop ([`Segment::run_lanes`]): the entries
/// of `table` whose top `low_bits`-complement bits equal the variant's (`lo..=hi`) and that
/// are within `k` of `q`.
#[derive(Clone, Copy)]
struct Lane<'s> {
    /// The cursor over block `b`; `None` before the first block (or when there is none).
    cursor: Option<Cursor<'s>>,
    table: &'s Table,
    /// The table's position in the segment.
    t: usize,
    b: u64,
    q: u64,
    lo: u64,
    hi: u64,
    low_bits: u32,
    /// While seeking: the previous entry's prefix ([`Cursor::seek_step`]).
    top: u64,
    /// Passing over the entries below `lo`.
    seeking: bool,
    /// The run has ended.
    done: bool,
}

impl<'s> Lane<'s> {
    /// A lane for the entries of `table` (number `t`) sharing `variant`'s top `bits` bits,
    /// within `k` of `q` (both permuted), starting at block `start`.
    fn new(t: usize, table: &'s Table, q: u64, variant: u64, bits: u32, start: u64) -> Self {
        let mask = prefix_mask(bits);
        Lane { cursor: None, table, t, b: start, q, lo: variant & mask, hi: variant | !mask, low_bits: 64 - bits, top: 0, seeking: false, done: false }
    }

    /// Checks entry `v` of the run: ends the lane past the run, keeps `v` when within `k`.
    #[inline(always)]
    fn check(&mut self, v: u64, k: u32, found: &mut Vec<u64>) {
        if v > self.hi {
            self.done = true;
        } else if (v ^ self.q).count_ones() <= k {
            found.push(self.table.design.permutation.invert(v));
        }
    }
}
