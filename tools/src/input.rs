//! Reading fingerprints from files or stdin: text (16 hex digits per line, optionally a tab
//! and a decimal document id) or binary (little-endian u64s, optionally u64 pairs).
//!
//! [`Decoder`] is the one parser of both formats: it takes the input in chunks of any size
//! (a record or a line may straddle two), so a command can read everything at once
//! ([`read_all`]) or stream an input of any length in bounded memory ([`ReadAhead`] and
//! `simdex insert`). Every error names the input and the line (text) or byte offset (binary)
//! at fault.

use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, TryRecvError};

/// How fingerprints are encoded in an input (also the `--binary`/`--with-ids` flags of the
/// commands that read fingerprints with their document ids).
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct InputFormat {
    /// Input is little-endian u64 fingerprints.
    #[arg(long)]
    pub binary: bool,
    /// With --binary: each fingerprint is followed by a u64 document id.
    #[arg(long, requires = "binary")]
    pub with_ids: bool,
}

impl InputFormat {
    /// Bytes of one binary record.
    fn record_bytes(self) -> usize {
        if self.with_ids {
            16
        } else {
            8
        }
    }
}

/// Fingerprints read from one input, with ids when the input has them.
#[derive(Debug, Default)]
pub struct Fingerprints {
    pub fps: Vec<u64>,
    pub ids: Option<Vec<u64>>,
}

/// One fingerprint of an input, with its document id when the input gives one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub fp: u64,
    pub id: Option<u64>,
}

/// How far a [`Decoder`] has got: the bytes and the lines (text only) it has consumed whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    pub bytes: u64,
    pub lines: u64,
}

/// Bytes read from an input at a time.
pub const CHUNK_BYTES: usize = 1 << 20;

/// Longest unfinished text line kept whole. A valid line is at most about 40 bytes; the
/// bound keeps a stream without newlines from growing the decoder's buffer without end.
const MAX_LINE_BYTES: usize = 64 << 10;

/// Decodes records from an input fed in chunks, in input order.
pub struct Decoder {
    name: String,
    format: InputFormat,
    /// The start of a line or record the last chunk ended inside.
    carry: Vec<u8>,
    at: Position,
    /// Text: whether the records so far carry document ids (decided by the first one).
    ids: Option<bool>,
    /// Text: the current line outgrew [`MAX_LINE_BYTES`]; its length so far (only its
    /// start is kept, for the message).
    overlong: Option<u64>,
}

impl Decoder {
    /// A decoder for the input called `name` in messages.
    pub fn new(name: String, format: InputFormat) -> Self {
        Self { name, format, carry: Vec::new(), at: Position::default(), ids: None, overlong: None }
    }

    /// What has been consumed whole so far.
    pub fn position(&self) -> Position {
        self.at
    }

    /// `position` as messages name it: the line (text) or byte offset (binary) it ends at.
    pub fn describe(&self, at: Position) -> String {
        if self.format.binary {
            format!("byte offset {}", at.bytes)
        } else {
            format!("line {} (byte offset {})", at.lines, at.bytes)
        }
    }

    /// Decodes every record that `chunk` completes, calling `each` with it and the
    /// position after it. Stops at the first bad record (records before it have been
    /// passed to `each`) or at the first error `each` returns.
    pub fn feed(&mut self, chunk: &[u8], each: &mut impl FnMut(Record, Position) -> Result<()>) -> Result<()> {
        if self.format.binary {
            self.feed_binary(chunk, each)
        } else {
            self.feed_text(chunk, each)
        }
    }

    /// Ends the input: decodes a last line without a newline; a binary input that ends
    /// inside a record is an error.
    pub fn finish(&mut self, each: &mut impl FnMut(Record, Position) -> Result<()>) -> Result<()> {
        if self.carry.is_empty() {
            return Ok(());
        }
        if self.format.binary {
            let record = self.format.record_bytes();
            bail!(
                "{}: {} bytes is not a multiple of {record} ({}): the input is truncated at byte offset {}",
                self.name,
                self.at.bytes + self.carry.len() as u64,
                if self.format.with_ids { "u64 fingerprint and u64 id per record" } else { "u64 per fingerprint" },
                self.at.bytes
            );
        }
        if let Some(len) = self.overlong {
            return Err(self.overlong_error(len));
        }
        let line = std::mem::take(&mut self.carry);
        self.text_line(&line, each)
    }

    fn feed_text(&mut self, mut chunk: &[u8], each: &mut impl FnMut(Record, Position) -> Result<()>) -> Result<()> {
        if let Some(len) = self.overlong {
            return match chunk.iter().position(|&b| b == b'\n') {
                None => {
                    self.overlong = Some(len + chunk.len() as u64);
                    Ok(())
                }
                Some(end) => Err(self.overlong_error(len + end as u64)),
            };
        }
        if !self.carry.is_empty() {
            let Some(end) = chunk.iter().position(|&b| b == b'\n') else {
                self.carry.extend_from_slice(chunk);
                self.bound_carry();
                return Ok(());
            };
            self.carry.extend_from_slice(&chunk[..=end]);
            chunk = &chunk[end + 1..];
            let mut line = std::mem::take(&mut self.carry);
            let result = self.text_line(&line, each);
            line.clear();
            self.carry = line;
            result?;
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\n') {
            self.text_line(&chunk[..=end], each)?;
            chunk = &chunk[end + 1..];
        }
        self.carry.extend_from_slice(chunk);
        self.bound_carry();
        Ok(())
    }

    /// A line longer than [`MAX_LINE_BYTES`] is not kept whole: only its start, for the
    /// message, and its length.
    fn bound_carry(&mut self) {
        if self.carry.len() > MAX_LINE_BYTES {
            self.overlong = Some(self.carry.len() as u64);
            self.carry.truncate(QUOTED_BYTES);
        }
    }

    fn overlong_error(&self, len: u64) -> anyhow::Error {
        anyhow!(
            "{}: line {}: {:?}... ({len} bytes in all) is not FINGERPRINT[<TAB>DOC_ID] (a binary input needs --binary)",
            self.name,
            self.at.lines + 1,
            String::from_utf8_lossy(&self.carry)
        )
    }

    fn text_line(&mut self, raw: &[u8], each: &mut impl FnMut(Record, Position) -> Result<()>) -> Result<()> {
        let line_no = self.at.lines + 1;
        let (fp, id) = parse_line(raw).with_context(|| format!("{}: line {line_no}", self.name))?;
        if fp.is_some() {
            match (self.ids, id.is_some()) {
                (None, has) => self.ids = Some(has),
                (Some(false), true) => {
                    bail!("{}: line {line_no} has a document id but the lines before it do not: give ids on every line or on none", self.name)
                }
                (Some(true), false) => {
                    bail!("{}: line {line_no} has no document id but the lines before it do: give ids on every line or on none", self.name)
                }
                _ => {}
            }
        }
        self.at.lines += 1;
        self.at.bytes += raw.len() as u64;
        match fp {
            Some(fp) => each(Record { fp, id }, self.at),
            None => Ok(()),
        }
    }

    fn feed_binary(&mut self, mut chunk: &[u8], each: &mut impl FnMut(Record, Position) -> Result<()>) -> Result<()> {
        let size = self.format.record_bytes();
        if !self.carry.is_empty() {
            let need = size - self.carry.len();
            if chunk.len() < need {
                self.carry.extend_from_slice(chunk);
                return Ok(());
            }
            self.carry.extend_from_slice(&chunk[..need]);
            chunk = &chunk[need..];
            let mut record = std::mem::take(&mut self.carry);
            let result = self.binary_record(&record, each);
            record.clear();
            self.carry = record;
            result?;
        }
        let mut records = chunk.chunks_exact(size);
        for record in &mut records {
            self.binary_record(record, each)?;
        }
        self.carry.extend_from_slice(records.remainder());
        Ok(())
    }

    fn binary_record(&mut self, bytes: &[u8], each: &mut impl FnMut(Record, Position) -> Result<()>) -> Result<()> {
        let (fp, rest) = bytes.split_at(8);
        let record = Record { fp: le_u64(fp), id: self.format.with_ids.then(|| le_u64(rest)) };
        self.at.bytes += bytes.len() as u64;
        each(record, self.at)
    }
}

/// The little-endian u64 in the first 8 bytes of `bytes` (the decoder passes whole records).
fn le_u64(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(word)
}

/// An input path, `-` meaning stdin.
pub fn open(path: &Path) -> Result<Box<dyn Read + Send>> {
    if path == Path::new("-") {
        Ok(Box::new(io::stdin()))
    } else {
        let f = File::open(path).with_context(|| format!("cannot open input {}", path.display()))?;
        Ok(Box::new(f))
    }
}

/// One `read` into `buf`, retried when interrupted; 0 at the end of the input.
fn read_some(reader: &mut dyn Read, buf: &mut [u8], name: &str) -> Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other.with_context(|| format!("reading {name}")),
        }
    }
}

/// Reads every fingerprint of `path`, calling `progress` with the bytes read so far.
pub fn read_all(path: &Path, format: InputFormat, mut progress: impl FnMut(u64)) -> Result<Fingerprints> {
    let mut reader = open(path)?;
    let name = display_name(path);
    let mut decoder = Decoder::new(name.clone(), format);
    let mut out = Fingerprints { fps: Vec::new(), ids: (format.binary && format.with_ids).then(Vec::new) };
    let mut push = |r: Record, _: Position| {
        out.fps.push(r.fp);
        if let Some(id) = r.id {
            out.ids.get_or_insert_with(Vec::new).push(id);
        }
        Ok(())
    };
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let n = read_some(&mut reader, &mut buf, &name)?;
        if n == 0 {
            break;
        }
        decoder.feed(&buf[..n], &mut push)?;
        progress(decoder.position().bytes);
    }
    decoder.finish(&mut push)?;
    Ok(out)
}

/// What [`ReadAhead`] has for its consumer.
pub enum Chunk {
    /// Bytes read from the input, in order.
    Data(Vec<u8>),
    /// Nothing is available yet: the input has not ended, the producer is just not writing.
    Waiting,
    /// The input has ended (and every chunk has been taken).
    End,
}

/// An input read on a thread of its own, a few chunks ahead, so that its consumer can tell
/// "no bytes available right now" (a pipe whose writer is waiting) from "the input ended"
/// without blocking. Memory: at most `depth + 2` chunks of [`CHUNK_BYTES`].
pub struct ReadAhead {
    chunks: Receiver<Result<Vec<u8>>>,
}

impl ReadAhead {
    /// Opens `path` (`-`: stdin) and starts reading it.
    pub fn spawn(path: &Path, depth: usize) -> Result<Self> {
        let mut reader = open(path)?;
        let name = display_name(path);
        let (tx, chunks) = mpsc::sync_channel(depth);
        std::thread::Builder::new()
            .name("simdex-read-ahead".into())
            .spawn(move || loop {
                let mut buf = vec![0u8; CHUNK_BYTES];
                let chunk = match read_some(&mut reader, &mut buf, &name) {
                    Ok(0) => return,
                    Ok(n) => {
                        buf.truncate(n);
                        Ok(buf)
                    }
                    Err(e) => Err(e),
                };
                let failed = chunk.is_err();
                if tx.send(chunk).is_err() || failed {
                    return;
                }
            })
            .context("starting the input thread")?;
        Ok(Self { chunks })
    }

    /// The next chunk if one is ready, [`Chunk::Waiting`] if the input has none yet.
    pub fn try_next(&self) -> Result<Chunk> {
        match self.chunks.try_recv() {
            Ok(chunk) => chunk.map(Chunk::Data),
            Err(TryRecvError::Empty) => Ok(Chunk::Waiting),
            Err(TryRecvError::Disconnected) => Ok(Chunk::End),
        }
    }

    /// The next chunk, waiting as long as it takes.
    pub fn next(&self) -> Result<Chunk> {
        match self.chunks.recv() {
            Ok(chunk) => chunk.map(Chunk::Data),
            Err(_) => Ok(Chunk::End),
        }
    }
}

/// The name used in messages.
pub fn display_name(path: &Path) -> String {
    if path == Path::new("-") {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    }
}

/// Parses one text line: `None` for a blank line (the library's parser).
pub fn parse_line(raw: &[u8]) -> Result<(Option<u64>, Option<u64>)> {
    match simdex_fingerprint::parse_fingerprint_line(raw)? {
        Some((fp, id)) => Ok((Some(fp), id)),
        None => Ok((None, None)),
    }
}

/// Parses exactly 16 hex digits.
pub fn parse_hex(hex: &str) -> Result<u64> {
    Ok(simdex_fingerprint::parse_fingerprint_hex(hex)?)
}

/// Formats a fingerprint as 16 lower-case hex digits.
pub fn hex(fp: u64) -> String {
    format!("{fp:016x}")
}

/// The input size in bytes, when known (for progress bars).
pub fn size_hint(path: &Path) -> Option<u64> {
    if path == Path::new("-") {
        None
    } else {
        std::fs::metadata(path).ok().map(|m| m.len())
    }
}

use simdex_fingerprint::QUOTED_BYTES;

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(format: InputFormat, chunks: &[&[u8]]) -> Result<Vec<(Record, Position)>> {
        let mut decoder = Decoder::new("t".into(), format);
        let mut out = Vec::new();
        let mut push = |r: Record, at: Position| {
            out.push((r, at));
            Ok(())
        };
        for chunk in chunks {
            decoder.feed(chunk, &mut push)?;
        }
        decoder.finish(&mut push)?;
        Ok(out)
    }

    /// Every way of cutting an input in two or three chunks decodes as the whole input does.
    #[test]
    fn chunk_boundaries_never_change_what_is_decoded() {
        let text = b"0123456789abcdef\t7\n\r\n  \nfedcba9876543210\t8\r\n00000000000000ff\t9".to_vec();
        let binary: Vec<u8> = (1u64..=5).flat_map(|i| [i.to_le_bytes(), (i * 10).to_le_bytes()].concat()).collect();
        let formats = [
            (InputFormat { binary: false, with_ids: false }, text),
            (InputFormat { binary: true, with_ids: true }, binary.clone()),
            (InputFormat { binary: true, with_ids: false }, binary),
        ];
        for (format, input) in formats {
            let whole = decode(format, &[&input]).unwrap();
            assert_eq!(whole.len(), if format.binary { 80 / format.record_bytes() } else { 3 });
            for i in 0..=input.len() {
                for j in i..=input.len() {
                    assert_eq!(decode(format, &[&input[..i], &input[i..j], &input[j..]]).unwrap(), whole, "cut at {i} and {j}");
                }
            }
        }
    }

    #[test]
    fn faults_name_their_line_or_offset_after_the_records_before_them() {
        let text = InputFormat { binary: false, with_ids: false };
        let err = decode(text, &[b"0123456789abcdef\t1\n0123456789abcdef\n"]).unwrap_err();
        assert!(format!("{err:#}").contains("t: line 2 has no document id"), "{err:#}");
        let mut decoder = Decoder::new("t".into(), text);
        let mut seen = 0;
        let err = decoder.feed(b"0123456789abcdef\nxyz\n", &mut |_, _| {
            seen += 1;
            Ok(())
        });
        let err = err.unwrap_err();
        assert_eq!((seen, decoder.position()), (1, Position { bytes: 17, lines: 1 }));
        assert!(format!("{err:#}").starts_with("t: line 2: fingerprint \"xyz\""), "{err:#}");
        let pairs = InputFormat { binary: true, with_ids: true };
        let err = decode(pairs, &[&[0u8; 20]]).unwrap_err();
        assert!(format!("{err:#}").contains("truncated at byte offset 16"), "{err:#}");
        let long = vec![b'z'; 3 * MAX_LINE_BYTES];
        let err = decode(text, &[&long[..MAX_LINE_BYTES], &long[MAX_LINE_BYTES..], b"\n"]).unwrap_err();
        assert!(format!("{err:#}").contains(&format!("({} bytes in all)", 3 * MAX_LINE_BYTES)), "{err:#}");
    }
}
