//! `simdex insert` (alias `add`): stream fingerprints into an index directory (creating it if missing),
//! acknowledging them group by group. Reading and parsing the input is `input`'s; this
//! module owns the synced group: when a group is committed, what "acknowledged" means and
//! how progress, acknowledgements and errors are reported.

use anyhow::{anyhow, Context, Result};
use clap::Args as ClapArgs;
use indicatif::ProgressBar;
use serde_json::json;
use simdex::{Durability, Index, IndexOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::input::{self, Chunk, Decoder, InputFormat, Position, ReadAhead, Record};
use crate::progress;

/// Insert fingerprints into an index directory, creating the index if it is missing.
///
/// INPUT is in the formats `simdex build` reads (text: 16 hex digits per line, optionally a
/// tab and a decimal document id, on every line or on none; `--binary`: little-endian u64s,
/// with `--with-ids` u64 pairs; `-` reads stdin). Without ids, each fingerprint gets the
/// sequence number of its insert as its document id.
///
/// The input is read as a stream, in memory bounded whatever its length (the index's
/// memtable is flushed to segments as it fills), and added in synced groups: the records
/// read so far are appended to the index's log as one record and fsynced when 65,536 of
/// them are waiting, when the oldest has waited 100 ms, or as soon as the input has no
/// more bytes available at that moment (a producer that writes a line and then waits gets
/// it committed at once, not left in a half-full group), and at the end of the input.
///
/// ACKNOWLEDGED means: the synced group holding the record has returned, so the record is
/// on disk (it survives a crash of this process or a power loss) and every query and
/// read-only open (`simdex query`, `simdex stats`) from then on sees it. With a pipe
/// (`-`), `--acks` prints a line on stdout after every synced group with the number of
/// records acknowledged so far and the input line (text) or byte offset (binary) they
/// reach; a record not covered by such a line may or may not be in the index if this
/// process is killed. A last line without its newline waits for the newline or the end of
/// the input. Exit 0 acknowledges everything read; the index is then closed in bounded
/// time: the memtable is flushed into a segment when it holds at most --memtable-ops
/// operations in all, else (the end of a burst) what is unflushed stays in the synced logs
/// and the next open replays it and flushes it in the background.
///
/// A bad record or a read error in the middle of the input stops the command (exit 2): the
/// message names the line or byte offset at fault and how many records before it were
/// acknowledged (they stay in the index; nothing after the fault is added).
///
/// `simdex add`, this command's former name, still runs it.
#[derive(Debug, ClapArgs)]
#[command(
    after_help = "Examples:\n  simdex insert pages.idx stored.txt\n  simdex insert news.idx stored.txt --expire-after 30d\n  simdex bench generate --count 100 --seed 7 | simdex insert pages.idx - --acks"
)]
pub struct Args {
    /// The index directory.
    dir: PathBuf,
    /// The fingerprints (`-` for stdin).
    input: PathBuf,
    /// Largest Hamming distance the index serves (only when it is created).
    #[arg(short, long, default_value_t = 3)]
    k: u32,
    /// An expiry window for the index this creates (`30d`, `12h`, `90m`; units s, m, h, d, w):
    /// fingerprints stored longer ago than the window (plus its granularity, at most an
    /// eighth of it) stop matching and compaction drops them. Pinned in the index when it is
    /// created; an existing index keeps its own (another window is refused).
    #[arg(long, value_name = "WINDOW", value_parser = crate::value_parsers::expiry)]
    expire_after: Option<simdex::Expiry>,
    /// Create the index even in a directory that holds other files (refused by default,
    /// so a mistyped path never turns a directory of other files into an index).
    #[arg(long)]
    create_in_nonempty: bool,
    #[command(flatten)]
    format: InputFormat,
    /// Print a line on stdout after every synced group, flushed at once: `acked N records,
    /// last sequence number S, input bytes B, input lines L` (with --json
    /// `{"acked":N,"last_seq":S,"input_bytes":B,"input_lines":L}`): every record in the
    /// first B bytes of the input is acknowledged.
    #[arg(long)]
    acks: bool,
    /// Operations the index's memtable holds before it is flushed to a segment (default:
    /// `IndexOptions::memtable_ops`, 2^20, about 50 MiB).
    #[arg(long, value_name = "N")]
    memtable_ops: Option<u64>,
    /// Start even when the file system looks too full for a memtable's log and segment
    /// (checked before anything is read, since a full disk mid-stream stops the command);
    /// the writes that do not fit then fail, reported, and nothing acknowledged is lost.
    #[arg(long)]
    no_space_check: bool,
    /// Print the summary (and with --acks, each acknowledgement) as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    log_recovery: crate::log_recovery::LogRecoveryArg,
}

/// Records per synced group at most (one log record each, 1 MiB of log).
const GROUP_RECORDS: usize = 1 << 16;

/// Longest a record waits in a group while input keeps arriving.
const GROUP_DELAY: Duration = Duration::from_millis(100);

/// Chunks of input read ahead of the parser.
const READ_AHEAD: usize = 2;

pub fn run(args: Args) -> Result<()> {
    let start = Instant::now();
    // The input first: a missing input creates no index.
    let chunks = ReadAhead::spawn(&args.input, READ_AHEAD)?;
    let defaults = IndexOptions::default();
    // Every synced group is fsynced before the next group is read.
    let memtable_ops = args.memtable_ops.unwrap_or(defaults.memtable_ops);
    let options = defaults
        .with_k(args.k)
        .with_durability(Durability::Sync)
        .with_memtable_ops(memtable_ops)
        .with_log_recovery(args.log_recovery.mode())
        .with_expiry(args.expire_after)
        .with_create_in_nonempty(args.create_in_nonempty);
    if !args.no_space_check {
        check_free_space(&args.dir, options.memtable_ops)?;
    }
    let before = Before::look(&args.dir);
    let index = Index::open(&args.dir, options)?;
    crate::log_recovery::warn_of_loss(&index);
    let first_seq = index.stats().last_seq + 1;
    let bar = progress::bytes(input::size_hint(&args.input), "adding");
    let mut decoder = Decoder::new(input::display_name(&args.input), args.format);
    let mut group = SyncedGroup::new(index, &args, first_seq, bar.clone());
    let streamed = stream(&chunks, &mut decoder, &mut group, &bar);
    bar.finish_and_clear();
    if let Err(e) = streamed {
        let (error, acked) = stopped(e, group, &decoder, &args.dir);
        if acked == 0 {
            // nothing was added: a directory this run created goes again
            return Err(before.restore(&args.dir, error));
        }
        return Err(error);
    }
    let summary = Summary::of(&group, &decoder);
    group.index.close().with_context(|| format!("closing {} ({} records were acknowledged before)", args.dir.display(), summary.added))?;
    if args.json {
        // Counted after the close, which flushed the memtable into a segment.
        let segments = Index::open_read_only(&args.dir, IndexOptions::default())?.stats().segments.len();
        out!(
            "{}",
            json!({
                "dir": args.dir, "added": summary.added, "first_seq": first_seq, "last_seq": summary.last_seq,
                "ids_assigned": summary.ids_assigned, "synced_groups": summary.commits, "input_bytes": summary.input.bytes,
                "segments": segments, "seconds": start.elapsed().as_secs_f64()
            })
        );
    } else {
        eprintln!(
            "inserted {} fingerprints to {} in {} synced group(s) (sequence numbers {first_seq}..{}{}); synced",
            summary.added,
            args.dir.display(),
            summary.commits,
            summary.last_seq,
            if summary.ids_assigned { ", ids = sequence numbers" } else { "" }
        );
    }
    Ok(())
}

/// Reads, decodes and commits until the input ends.
fn stream(chunks: &ReadAhead, decoder: &mut Decoder, group: &mut SyncedGroup, bar: &ProgressBar) -> Result<()> {
    loop {
        let mut chunk = chunks.try_next()?;
        if let Chunk::Waiting = chunk {
            // Nothing to read right now: acknowledge what is buffered before waiting.
            group.commit()?;
            chunk = chunks.next()?;
        }
        match chunk {
            Chunk::Data(bytes) => {
                decoder.feed(&bytes, &mut |r: Record, at: Position| group.push(r, at))?;
                bar.set_position(decoder.position().bytes);
                if group.waited_too_long() {
                    group.commit()?;
                }
            }
            Chunk::Waiting => {}
            Chunk::End => {
                decoder.finish(&mut |r: Record, at: Position| group.push(r, at))?;
                return group.commit();
            }
        }
    }
}

/// The error of a stream that stopped: a bad record or a read error is reported with the
/// records acknowledged before it (those still buffered are committed first); a failed
/// commit with the records acknowledged before it.
fn stopped(error: anyhow::Error, mut group: SyncedGroup, decoder: &Decoder, dir: &Path) -> (anyhow::Error, u64) {
    let mut error = format!("{error:#}");
    if !group.failed {
        if let Err(e) = group.commit() {
            error = format!("{error}; then committing the records before it failed: {e:#}");
        }
    }
    let closed = group.index.close();
    let through = if group.acked > 0 { format!(", through {}", decoder.describe(group.acked_through)) } else { String::new() };
    let mut message = format!(
        "{error}\n{} records were acknowledged before it (durably added to {}{through}); {}",
        group.acked,
        dir.display(),
        if group.failed { "the group being committed and everything after it were not acknowledged" } else { "nothing after it was added" }
    );
    if let Err(e) = closed {
        message.push_str(&format!("\nclosing the index also failed: {e:#}"));
    }
    (anyhow!(message), group.acked)
}

/// What the index directory was before the run: a run that fails before acknowledging
/// anything leaves a directory it created (or an empty one it filled) as it found it.
enum Before {
    Missing,
    Empty,
    Held,
}

impl Before {
    fn look(dir: &Path) -> Self {
        match std::fs::read_dir(dir).map(|mut entries| entries.next().is_none()) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Before::Missing,
            Ok(true) => Before::Empty,
            Ok(false) | Err(_) => Before::Held,
        }
    }

    /// Removes what the run created (the index is closed: its lock is released), and says so
    /// in `error`.
    fn restore(&self, dir: &Path, error: anyhow::Error) -> anyhow::Error {
        let removed = match self {
            Before::Held => return error,
            Before::Missing => std::fs::remove_dir_all(dir),
            Before::Empty => std::fs::read_dir(dir).and_then(|mut entries| entries.try_for_each(|e| std::fs::remove_file(e?.path()))),
        };
        match removed {
            Ok(()) => anyhow!("{error:#}\n{} is left as it was: the index this run created is removed", dir.display()),
            Err(e) => anyhow!("{error:#}\nremoving the index this run created in {} also failed: {e}", dir.display()),
        }
    }
}

/// Records waiting to be committed, and what has been acknowledged so far.
struct SyncedGroup {
    index: Index,
    acks: Option<AckFormat>,
    bar: ProgressBar,
    /// The group's records; the index numbers those without an id.
    records: Vec<(u64, Option<u64>)>,
    /// When the oldest record of the group arrived.
    oldest: Option<Instant>,
    /// Where the input stands after the group's last record.
    group_end: Position,
    first_seq: u64,
    /// Records acknowledged, and the input position they reach.
    acked: u64,
    acked_through: Position,
    commits: u64,
    ids_assigned: bool,
    /// A commit failed: nothing more may be acknowledged.
    failed: bool,
}

#[derive(Clone, Copy)]
enum AckFormat {
    Text,
    Json,
}

impl SyncedGroup {
    fn new(index: Index, args: &Args, first_seq: u64, bar: ProgressBar) -> Self {
        Self {
            index,
            acks: args.acks.then_some(if args.json { AckFormat::Json } else { AckFormat::Text }),
            bar,
            records: Vec::with_capacity(GROUP_RECORDS),
            oldest: None,
            group_end: Position::default(),
            first_seq,
            acked: 0,
            acked_through: Position::default(),
            commits: 0,
            ids_assigned: false,
            failed: false,
        }
    }

    fn push(&mut self, record: Record, at: Position) -> Result<()> {
        self.ids_assigned |= record.id.is_none();
        self.records.push((record.fp, record.id));
        self.oldest.get_or_insert_with(Instant::now);
        self.group_end = at;
        if self.records.len() >= GROUP_RECORDS {
            self.commit()?;
        }
        Ok(())
    }

    fn waited_too_long(&self) -> bool {
        self.oldest.is_some_and(|t| t.elapsed() >= GROUP_DELAY)
    }

    /// Appends the group to the log and fsyncs it ([`Durability::Sync`]): when this returns
    /// Ok, every record so far is acknowledged.
    fn commit(&mut self) -> Result<()> {
        if self.records.is_empty() {
            return Ok(());
        }
        if self.failed {
            return Err(anyhow!("an earlier synced group failed"));
        }
        // the sequence numbers the summary reports (the writer's lock is ours alone)
        let expected = self.first_seq + self.acked + self.records.len() as u64 - 1;
        let last = match self.index.insert_many_numbered(&self.records) {
            Ok(last) => last,
            Err(e) => {
                self.failed = true;
                return Err(anyhow::Error::new(e).context(format!("committing {} records to {}", self.records.len(), self.index.dir().display())));
            }
        };
        if last != expected {
            // The reported sequence numbers would be wrong: another writer cannot hold the
            // lock, so this is a bug, reported rather than printed silently.
            self.failed = true;
            return Err(anyhow!("the index gave sequence numbers up to {last}, expected {expected}"));
        }
        self.acked += self.records.len() as u64;
        self.acked_through = self.group_end;
        self.commits += 1;
        self.records.clear();
        self.oldest = None;
        self.bar.set_message(format!("adding ({} acknowledged)", self.acked));
        if let Some(format) = self.acks {
            self.print_ack(format, last)?;
        }
        Ok(())
    }

    fn print_ack(&self, format: AckFormat, last_seq: u64) -> Result<()> {
        let at = self.acked_through;
        match format {
            AckFormat::Json => out!("{}", json!({"acked": self.acked, "last_seq": last_seq, "input_bytes": at.bytes, "input_lines": at.lines})),
            AckFormat::Text => out!("acked {} records, last sequence number {last_seq}, input bytes {}, input lines {}", self.acked, at.bytes, at.lines),
        }
        std::io::stdout().flush().context("writing an acknowledgement to stdout")
    }
}

/// What the summary reports.
struct Summary {
    added: u64,
    last_seq: u64,
    commits: u64,
    ids_assigned: bool,
    input: Position,
}

impl Summary {
    fn of(group: &SyncedGroup, decoder: &Decoder) -> Self {
        Self { added: group.acked, last_seq: group.first_seq + group.acked - 1, commits: group.commits, ids_assigned: group.ids_assigned, input: decoder.position() }
    }
}

/// Refuses to start when the index's file system cannot take one memtable's worth of
/// writes: its log (16 bytes an operation) and the segment it is flushed to (about 64
/// bytes a fingerprint with its id, at most 10 tables), so that a full disk is found before
/// anything is read, not in the middle of a stream. (Merges check their own needs and are
/// put off when they do not fit.)
fn check_free_space(dir: &std::path::Path, memtable_ops: u64) -> Result<()> {
    use simdex::storage::{FsStorage, Storage};
    let needed = memtable_ops.saturating_mul(16 + 64).saturating_add(16 << 20);
    // The directory may not exist yet: its nearest existing ancestor is on the same disk.
    let existing = dir.ancestors().find(|d| d.is_dir()).unwrap_or(std::path::Path::new("."));
    if let Ok(Some(available)) = FsStorage.available_space(existing) {
        if available < needed {
            anyhow::bail!(
                "{}: {} MiB free, and adding needs about {} MiB for a memtable's log and segment: free space first (or pass a smaller --memtable-ops, or --no-space-check); nothing was added",
                dir.display(),
                available >> 20,
                needed >> 20
            );
        }
    }
    Ok(())
}
