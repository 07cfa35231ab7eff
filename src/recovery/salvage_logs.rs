//! Salvage's log step: every log in order, read in salvage mode (a damaged stretch is
//! skipped, never the records after it), each operation lost counted exactly: from the
//! sequence numbers around a gap, from the manifest's record of the log (its seal) when the
//! end is damaged or cut, or from a cut record's intact header.

use super::salvage::Salvage;
use crate::engine::files::{self, FileKind};
use crate::engine::log::{scan_log, LogEnd, LogScan, OpKind, ScanMode};
use crate::engine::manifest::LogMeta;
use crate::engine::seal::shortfall;

impl Salvage<'_> {
    /// Step 4: the logs the directory holds and those the manifest has a seal of, from the
    /// manifest's first live log on, oldest first.
    pub(super) fn logs(&mut self) {
        let log_number = self.manifest.as_ref().map_or(0, |m| m.log_number);
        // A log that holds less than its seal lost exactly the operations the seal counts.
        let seals = self.seals();
        let mut numbers: Vec<u64> =
            self.numbered(|k| if let FileKind::Log(n) = k { Some(n) } else { None }).into_iter().chain(seals.iter().map(|s| s.number)).filter(|&n| n >= log_number).collect();
        numbers.sort_unstable();
        numbers.dedup();
        for n in numbers {
            self.log(n, seals.iter().find(|s| s.number == n));
        }
    }

    /// One log: its intact records' operations, and what its damage cost.
    fn log(&mut self, n: u64, seal: Option<&LogMeta>) {
        let name = files::log_name(n);
        let path = self.src.join(&name);
        let bytes = match self.storage.read_copy(&path) {
            Ok(b) => b,
            Err(e) => {
                let short = seal.and_then(|s| shortfall(s, None, self.next_seq.map_or(0, |x| x - 1)));
                self.report.log_ops_lost += short.as_ref().map_or(0, |s| s.lost_ops);
                let what = short.map_or_else(|| format!("the whole log: {e}"), |s| s.detail);
                self.report.lost.push((name, what));
                if let Some(s) = seal {
                    self.next_seq = self.next_seq.map(|x| x.max(s.last_seq + 1));
                }
                return;
            }
        };
        let (mut ops, mut inserts, mut gaps) = (0u64, 0u64, 0u64);
        let (pairs, sketches, deletes, next_seq) = (&mut self.pairs, &mut self.sketches, &mut self.deletes, &mut self.next_seq);
        let scanned = scan_log(&path, &bytes, n, ScanMode::Salvage, |r| {
            if r.last_seq() < next_seq.unwrap_or(0) {
                return Ok(());
            }
            if let Some(expected) = next_seq.filter(|&e| r.seq > e) {
                gaps += r.seq - expected;
            }
            let width = r.sketch_bytes();
            for (i, (fp, id)) in r.ops().enumerate() {
                let seq = r.seq + i as u64;
                // a replace deletes with every operation but its last, which inserts
                let is_insert = match r.kind {
                    OpKind::Insert => true,
                    OpKind::Delete => false,
                    OpKind::Replace => i + 1 == r.len(),
                };
                match is_insert {
                    true => {
                        pairs.push((fp, id, seq));
                        inserts += 1;
                        match r.sketches().and_then(|s| s.get(i * width..(i + 1) * width)).filter(|s| s.iter().any(|&b| b != 0)) {
                            Some(s) => sketches.insert((fp, id), s.into()),
                            None => sketches.remove(&(fp, id)),
                        };
                    }
                    false => {
                        let e = deletes.entry((fp, id)).or_insert(0);
                        *e = (*e).max(seq);
                    }
                }
            }
            ops += r.len() as u64;
            *next_seq = Some(r.last_seq() + 1);
            Ok(())
        });
        match scanned {
            Err(e) => self.report.lost.push((name, format!("the whole log: {}", e.chain_message()))),
            Ok(scan) => {
                self.report.log_ops += ops;
                self.report.log_inserts += inserts;
                self.report.log_ops_lost += gaps;
                self.report.recovered.push((name.clone(), format!("{} records, {ops} operations", scan.records)));
                self.log_damage(&name, &scan, bytes.len() as u64, seal, gaps);
            }
        }
    }

    /// What the damaged stretches and the end of a log (`len` bytes) cost: the stretches
    /// skipped, the `gaps` operations missing between intact records, the operations its
    /// seal says are missing, a record cut short at the end.
    fn log_damage(&mut self, name: &str, scan: &LogScan, len: u64, seal: Option<&LogMeta>, gaps: u64) {
        let report = &mut self.report;
        for d in &scan.damage {
            let at_end = d.offset + d.len == len;
            if at_end {
                report.log_tail_bytes_lost += d.len;
            }
            let counted = match (at_end, seal) {
                (false, _) => "",
                (true, Some(_)) => "; the operations in them are counted from the manifest's record of the log",
                (true, None) => "; the operations in them cannot be counted",
            };
            report.lost.push((name.to_string(), format!("bytes {}..{} ({}){counted}", d.offset, d.offset + d.len, d.detail)));
        }
        if gaps > 0 {
            report.lost.push((name.to_string(), format!("{gaps} operations (sequence numbers missing between intact records)")));
        }
        let found_last = self.next_seq.map_or(0, |x| x - 1);
        // The seal counts what a damaged or cut end lost; a cut record beyond it was never
        // recorded as acknowledged.
        let short = seal.and_then(|s| shortfall(s, Some(scan.valid_len), found_last));
        if let (Some(short), Some(s)) = (&short, seal) {
            report.log_ops_lost += short.lost_ops;
            report.lost.push((name.to_string(), short.detail.clone()));
            self.next_seq = Some(s.last_seq + 1);
        }
        let sealed_through = seal.map_or(0, |s| s.last_seq);
        let tail = len - scan.valid_len;
        if tail > 0 && scan.end != LogEnd::ZeroFilled && !scan.damage.iter().any(|d| d.offset + d.len == len) {
            // A crash mid-write leaves such a tail (never acknowledged under Sync
            // durability), but so does a file cut short: it may hold acknowledged writes,
            // and the record's header, when intact, says how many.
            report.log_tail_bytes_lost += tail;
            let ops = match scan.cut_record {
                // Operations the seal covers are counted above, as lost.
                Some((seq, count)) if seq + u64::from(count) - 1 <= sealed_through => "counted above".to_string(),
                Some((seq, count)) => {
                    let first = seq.max(sealed_through + 1);
                    let beyond = seq + u64::from(count) - first;
                    report.log_ops_possibly_lost += beyond;
                    format!("{beyond} operations (sequence numbers {first}..={}), possibly acknowledged (a crash mid-write, or a cut file)", seq + u64::from(count) - 1)
                }
                None if short.is_some() => "counted above".to_string(),
                None => "operations that cannot be counted, possibly acknowledged (a crash mid-write, or a cut file)".to_string(),
            };
            report.lost.push((name.to_string(), format!("{tail} bytes of a record cut short at the end: {ops}")));
        }
    }
}
