//! Merge checkpoints: what a merge has made durable, so that a merge killed again and again
//! still finishes. A merge works in three stages, each over a sorted stream:
//! the *count* (the live pairs, their number and table 0's code), the *feed* (the entries
//! the output's permuted tables need sorted, spilled as sorted runs) and the *write* (the
//! output's tables, ids and sketches, in a file named `merge.part`). At most every
//! `CompactionOptions::checkpoint_interval` it makes what it wrote durable and replaces
//! `merge.checkpoint` (written atomically) with where each stream stands. A merge of the
//! same inputs, under the same tombstones and output format, goes on from there; any other
//! merge removes the files first. Every file of a merge in progress is named `merge.*`
//! (byte layout in `format-spec/engine.md`, "Merge checkpoints").

use std::path::{Path, PathBuf};

use crate::codec::{Codec, SYMBOLS};
use crate::error::{Error, Result};
use crate::segment::{take_u32, take_u64, WriterState};
use crate::storage::{write_atomically, Storage};

/// Names of a merge's files start with this.
pub(crate) const PREFIX: &str = "merge.";
/// The checkpoint record.
pub(crate) const CHECKPOINT_NAME: &str = "merge.checkpoint";
/// The output being written.
pub(crate) const PART_NAME: &str = "merge.part";
/// The finished output, before the engine installs it under a segment's name.
const OUTPUT_NAME: &str = "merge.out";
/// The finished output's band file, before the engine installs it.
const BANDS_NAME: &str = "merge.bands";
/// Run files are `merge.tT.rR.run`.
const RUNS_BASE: &str = "merge";

const MAGIC: &[u8; 8] = b"SDXMERGE";
const VERSION: u32 = 1;

/// What a merge is of: a checkpoint is only resumed by the same merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    /// The input segments' numbers, oldest first.
    pub inputs: Vec<u64>,
    /// The tombstone files' numbers the merge applies.
    pub tombstones: Vec<u64>,
    pub k: u32,
    pub codec: u8,
    /// Bytes per sketch (0: none) and the sketch scheme.
    pub sketch_bytes: u16,
    pub sketch_scheme: [u8; 8],
}

/// What the count found (or has found so far).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counted {
    pub entries: u64,
    pub deleted: u64,
    pub repeated: u64,
}

/// Where a merge stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Counting: the last live pair counted (every pair up to it is in the counts), and
    /// table 0's symbol counts so far.
    Count { counted: Counted, last: (u64, u64), symbols: Box<[u64; SYMBOLS]> },
    /// Feeding the sorters: the feed's position (an input and an entry in its table 0, or
    /// the live stream's last fingerprint and how many of its pairs were fed) and the runs
    /// of each table (every value fed is in them).
    Feed { counted: Counted, code0: [u8; SYMBOLS], position: FeedPosition, runs: Vec<u32> },
    /// Writing the output: the runs, the codes known, the writer's state and, inside a
    /// column, the live stream's last fingerprint and how many of its pairs are written.
    Write { counted: Counted, codes: Vec<Option<[u8; SYMBOLS]>>, runs: Vec<u32>, column: (u64, u64), writer: WriterState },
    /// Written: the output is whole at `merge.out` (`file_len` bytes); what is left is the
    /// engine's (its band file, then installing it).
    Finished { counted: Counted, file_len: u64 },
}

/// Where the feed stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FeedPosition {
    pub input: u32,
    pub ordinal: u64,
    pub last: u64,
    pub tail: u64,
}

/// A merge's checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub identity: Identity,
    pub stage: Stage,
}

/// The files of a merge in a directory.
#[derive(Clone, Debug)]
pub(crate) struct MergeFiles {
    dir: PathBuf,
}

impl MergeFiles {
    pub(crate) fn in_dir(dir: &Path) -> Self {
        Self { dir: dir.to_path_buf() }
    }

    pub(crate) fn part(&self) -> PathBuf {
        self.dir.join(PART_NAME)
    }

    pub(crate) fn checkpoint(&self) -> PathBuf {
        self.dir.join(CHECKPOINT_NAME)
    }

    /// Where a merge whose caller installs the output itself writes it (`merge.out`): the
    /// merge then records it as finished, and a merge stopped after it (while the caller
    /// builds the band file) finds it there.
    pub(crate) fn output(&self) -> PathBuf {
        self.dir.join(OUTPUT_NAME)
    }

    /// True when `path` is [`Self::output`].
    pub(crate) fn is_output(&self, path: &Path) -> bool {
        path == self.output()
    }

    /// Where the output's band file is built before it is installed.
    pub(crate) fn bands(&self) -> PathBuf {
        self.dir.join(BANDS_NAME)
    }

    /// The base the sorters name their runs after.
    pub(crate) fn runs_base(&self) -> PathBuf {
        self.dir.join(RUNS_BASE)
    }

    /// The checkpoint, if there is one that reads back whole.
    pub(crate) fn load(&self, storage: &dyn Storage) -> Option<Checkpoint> {
        let bytes = storage.read_copy(&self.checkpoint()).ok()?;
        decode(&bytes)
    }

    /// Makes `checkpoint` the one a merge resumes from (after what it names is durable).
    pub(crate) fn save(&self, storage: &dyn Storage, checkpoint: &Checkpoint) -> Result<()> {
        write_atomically(storage, &self.checkpoint(), &encode(checkpoint))
    }

    /// Removes the checkpoint (durably: the directory is synced).
    pub(crate) fn remove_checkpoint(&self, storage: &dyn Storage) -> Result<()> {
        let path = self.checkpoint();
        match storage.remove(&path) {
            Ok(()) => storage.sync_dir(&self.dir).map_err(|e| Error::io(&self.dir, "fsync directory", e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(&path, "remove", e)),
        }
    }

    /// Removes every file of a merge (a merge that finished, failed, or will not resume).
    pub(crate) fn remove_all(&self, storage: &dyn Storage) -> Result<()> {
        self.remove_except(storage, &[])
    }

    /// Removes every file of a finished merge but its output and checkpoint.
    pub(crate) fn remove_all_but_output(&self, storage: &dyn Storage) -> Result<()> {
        self.remove_except(storage, &[OUTPUT_NAME, CHECKPOINT_NAME])
    }

    fn remove_except(&self, storage: &dyn Storage, keep: &[&str]) -> Result<()> {
        let names = storage.list(&self.dir).map_err(|e| Error::io(&self.dir, "list", e))?;
        for name in names.iter().filter(|n| is_merge_file(n) && !keep.contains(&n.as_str())) {
            let path = self.dir.join(name);
            storage.remove(&path).map_err(|e| Error::io(&path, "remove", e))?;
        }
        Ok(())
    }
}

/// True for the name of a merge's file (`merge.*`, a temporary one included).
pub(crate) fn is_merge_file(name: &str) -> bool {
    name.starts_with(PREFIX)
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_counted(out: &mut Vec<u8>, c: &Counted) {
    for v in [c.entries, c.deleted, c.repeated] {
        put_u64(out, v);
    }
}

fn put_runs(out: &mut Vec<u8>, runs: &[u32]) {
    put_u32(out, runs.len() as u32);
    for &r in runs {
        put_u32(out, r);
    }
}

pub(crate) fn encode(c: &Checkpoint) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    put_u32(&mut out, VERSION);
    let id = &c.identity;
    for list in [&id.inputs, &id.tombstones] {
        put_u32(&mut out, list.len() as u32);
        for &n in list {
            put_u64(&mut out, n);
        }
    }
    put_u32(&mut out, id.k);
    out.push(id.codec);
    out.extend_from_slice(&id.sketch_bytes.to_le_bytes());
    out.extend_from_slice(&id.sketch_scheme);
    match &c.stage {
        Stage::Count { counted, last, symbols } => {
            out.push(1);
            put_counted(&mut out, counted);
            put_u64(&mut out, last.0);
            put_u64(&mut out, last.1);
            for &s in symbols.iter() {
                put_u64(&mut out, s);
            }
        }
        Stage::Feed { counted, code0, position, runs } => {
            out.push(2);
            put_counted(&mut out, counted);
            out.extend_from_slice(code0);
            put_u32(&mut out, position.input);
            for v in [position.ordinal, position.last, position.tail] {
                put_u64(&mut out, v);
            }
            put_runs(&mut out, runs);
        }
        Stage::Write { counted, codes, runs, column, writer } => {
            out.push(3);
            put_counted(&mut out, counted);
            put_u32(&mut out, codes.len() as u32);
            for code in codes {
                match code {
                    Some(lengths) => {
                        out.push(1);
                        out.extend_from_slice(lengths);
                    }
                    None => out.push(0),
                }
            }
            put_runs(&mut out, runs);
            put_u64(&mut out, column.0);
            put_u64(&mut out, column.1);
            writer.encode(&mut out);
        }
        Stage::Finished { counted, file_len } => {
            out.push(4);
            put_counted(&mut out, counted);
            put_u64(&mut out, *file_len);
        }
    }
    let crc = crc32fast::hash(&out);
    put_u32(&mut out, crc);
    out
}

fn take_bytes<const N: usize>(r: &mut &[u8]) -> Option<[u8; N]> {
    let (v, rest) = r.split_first_chunk::<N>()?;
    *r = rest;
    Some(*v)
}

fn take_counted(r: &mut &[u8]) -> Option<Counted> {
    Some(Counted { entries: take_u64(r)?, deleted: take_u64(r)?, repeated: take_u64(r)? })
}

fn take_runs(r: &mut &[u8]) -> Option<Vec<u32>> {
    let n = take_u32(r)?;
    (0..n).map(|_| take_u32(r)).collect()
}

/// The checkpoint in `bytes`; `None` when they are not a whole one (a torn or foreign
/// file: the merge starts again).
pub(crate) fn decode(bytes: &[u8]) -> Option<Checkpoint> {
    let (body, crc) = bytes.split_last_chunk::<4>()?;
    if crc32fast::hash(body) != u32::from_le_bytes(*crc) {
        return None;
    }
    let mut r = body;
    if take_bytes::<8>(&mut r)? != *MAGIC || take_u32(&mut r)? != VERSION {
        return None;
    }
    let mut lists = [Vec::new(), Vec::new()];
    for list in &mut lists {
        let n = take_u32(&mut r)?;
        *list = (0..n).map(|_| take_u64(&mut r)).collect::<Option<Vec<u64>>>()?;
    }
    let [inputs, tombstones] = lists;
    let k = take_u32(&mut r)?;
    let [codec] = take_bytes::<1>(&mut r)?;
    Codec::from_id(codec)?;
    let sketch_bytes = u16::from_le_bytes(take_bytes::<2>(&mut r)?);
    let sketch_scheme = take_bytes::<8>(&mut r)?;
    let identity = Identity { inputs, tombstones, k, codec, sketch_bytes, sketch_scheme };
    let [tag] = take_bytes::<1>(&mut r)?;
    let stage = match tag {
        1 => {
            let counted = take_counted(&mut r)?;
            let last = (take_u64(&mut r)?, take_u64(&mut r)?);
            let mut symbols = Box::new([0u64; SYMBOLS]);
            for s in symbols.iter_mut() {
                *s = take_u64(&mut r)?;
            }
            Stage::Count { counted, last, symbols }
        }
        2 => {
            let counted = take_counted(&mut r)?;
            let code0 = take_bytes::<SYMBOLS>(&mut r)?;
            let input = take_u32(&mut r)?;
            let position = FeedPosition { input, ordinal: take_u64(&mut r)?, last: take_u64(&mut r)?, tail: take_u64(&mut r)? };
            Stage::Feed { counted, code0, position, runs: take_runs(&mut r)? }
        }
        3 => {
            let counted = take_counted(&mut r)?;
            let n = take_u32(&mut r)?;
            let mut codes = Vec::new();
            for _ in 0..n {
                let [present] = take_bytes::<1>(&mut r)?;
                codes.push(if present == 1 { Some(take_bytes::<SYMBOLS>(&mut r)?) } else { None });
            }
            let runs = take_runs(&mut r)?;
            let column = (take_u64(&mut r)?, take_u64(&mut r)?);
            let writer = WriterState::decode(&mut r)?;
            Stage::Write { counted, codes, runs, column, writer }
        }
        4 => Stage::Finished { counted: take_counted(&mut r)?, file_len: take_u64(&mut r)? },
        _ => return None,
    };
    r.is_empty().then_some(Checkpoint { identity, stage })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::{Section, TableProgress};

    fn identity() -> Identity {
        Identity { inputs: vec![3, 7, 9], tombstones: vec![8], k: 3, codec: 0, sketch_bytes: 32, sketch_scheme: *b"minhash1" }
    }

    #[test]
    fn checkpoints_read_back_and_damage_is_refused() {
        let writer = WriterState {
            offset: 123_456,
            tables: Vec::new(),
            ids_head: None,
            sketches_head: None,
            section: Section::Table { head_offset: 4096, lengths: [5; SYMBOLS], progress: TableProgress { entries: 900, last: 77, tail: 2 }, blocks: 6 },
        };
        let stages = [
            Stage::Count { counted: Counted { entries: 10, deleted: 1, repeated: 2 }, last: (5, 6), symbols: Box::new([9; SYMBOLS]) },
            Stage::Feed { counted: Counted::default(), code0: [3; SYMBOLS], position: FeedPosition { input: 2, ordinal: 40, last: 0, tail: 0 }, runs: vec![0, 4, 4] },
            Stage::Write { counted: Counted::default(), codes: vec![Some([2; SYMBOLS]), None], runs: vec![1, 2], column: (11, 1), writer },
            Stage::Finished { counted: Counted { entries: 10, deleted: 1, repeated: 2 }, file_len: 123_456 },
        ];
        for stage in stages {
            let c = Checkpoint { identity: identity(), stage };
            let bytes = encode(&c);
            assert_eq!(decode(&bytes), Some(c.clone()));
            for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
                assert_eq!(decode(&bytes[..cut]), None, "cut at {cut}");
            }
            for at in [0, 9, bytes.len() / 2, bytes.len() - 1] {
                let mut bad = bytes.clone();
                bad[at] ^= 0x10;
                assert_eq!(decode(&bad), None, "flip at {at}");
            }
        }
    }
}
