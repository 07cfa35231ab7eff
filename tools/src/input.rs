//! Reading fingerprints from files or stdin: text (16 hex digits per line, optionally a tab
//! and a decimal document id) or binary (little-endian u64s, optionally u64 pairs).
//!
//! Every error names the input and the line (text) or byte offset (binary) at fault.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

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

/// Fingerprints read from one input, with ids when the input has them.
#[derive(Debug, Default)]
pub struct Fingerprints {
    pub fps: Vec<u64>,
    pub ids: Option<Vec<u64>>,
}

/// An input path, `-` meaning stdin.
pub fn open(path: &Path) -> Result<Box<dyn Read>> {
    if path == Path::new("-") {
        Ok(Box::new(io::stdin().lock()))
    } else {
        let f = File::open(path).with_context(|| format!("cannot open input {}", path.display()))?;
        Ok(Box::new(f))
    }
}

/// Reads every fingerprint of `path`, calling `progress` with the bytes read so far.
pub fn read_all(path: &Path, format: InputFormat, mut progress: impl FnMut(u64)) -> Result<Fingerprints> {
    let reader = open(path)?;
    let name = display_name(path);
    if format.binary {
        return read_binary(reader, &name, format.with_ids, progress);
    }
    let mut out = Fingerprints::default();
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    let mut line = Vec::new();
    let mut line_no = 0u64;
    let mut bytes = 0u64;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).with_context(|| format!("reading {name}"))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        bytes += n as u64;
        if line_no % 65536 == 0 {
            progress(bytes);
        }
        let (fp, id) = parse_line(&line).with_context(|| format!("{name}: line {line_no}"))?;
        let Some(fp) = fp else { continue };
        match (id, &mut out.ids) {
            (Some(id), Some(ids)) => ids.push(id),
            (Some(id), None) if out.fps.is_empty() => out.ids = Some(vec![id]),
            (None, None) => {}
            (Some(_), None) => bail!("{name}: line {line_no} has a document id but the lines before it do not: give ids on every line or on none"),
            (None, Some(_)) => bail!("{name}: line {line_no} has no document id but the lines before it do: give ids on every line or on none"),
        }
        out.fps.push(fp);
    }
    progress(bytes);
    Ok(out)
}

/// The name used in messages.
pub fn display_name(path: &Path) -> String {
    if path == Path::new("-") {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    }
}

/// Parses one text line: `None` for a blank line.
pub fn parse_line(raw: &[u8]) -> Result<(Option<u64>, Option<u64>)> {
    let text = std::str::from_utf8(raw).map_err(|e| anyhow::anyhow!("not valid UTF-8 (byte {} of the line)", e.valid_up_to()))?;
    let text = text.trim_end_matches(['\n', '\r']);
    if text.trim().is_empty() {
        return Ok((None, None));
    }
    let mut parts = text.split('\t');
    let hex = parts.next().unwrap_or_default();
    let fp = parse_hex(hex)?;
    let id = match parts.next() {
        None => None,
        Some(id) => Some(id.trim().parse::<u64>().map_err(|_| anyhow::anyhow!("document id {} is not a decimal u64", shown(id)))?),
    };
    if let Some(extra) = parts.next() {
        bail!("unexpected third field {}: expected FINGERPRINT[<TAB>DOC_ID]", shown(extra));
    }
    Ok((Some(fp), id))
}

/// Parses exactly 16 hex digits.
pub fn parse_hex(hex: &str) -> Result<u64> {
    let hex = hex.trim();
    if hex.len() != 16 {
        bail!("fingerprint {} has {} characters: expected exactly 16 hex digits", shown(hex), hex.chars().count());
    }
    if let Some(bad) = hex.chars().find(|c| !c.is_ascii_hexdigit()) {
        bail!("fingerprint {} has the non-hex character {bad:?}: expected exactly 16 hex digits", shown(hex));
    }
    u64::from_str_radix(hex, 16).map_err(|e| anyhow::anyhow!("fingerprint {hex:?}: {e}"))
}

fn read_binary(mut reader: Box<dyn Read>, name: &str, with_ids: bool, mut progress: impl FnMut(u64)) -> Result<Fingerprints> {
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf).with_context(|| format!("reading {name}"))?;
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
        progress(bytes.len() as u64);
    }
    let record = if with_ids { 16 } else { 8 };
    if bytes.len() % record != 0 {
        bail!(
            "{name}: {} bytes is not a multiple of {record} ({}): the input is truncated at byte offset {}",
            bytes.len(),
            if with_ids { "u64 fingerprint and u64 id per record" } else { "u64 per fingerprint" },
            bytes.len() - bytes.len() % record
        );
    }
    let mut out = Fingerprints::default();
    let mut ids = Vec::new();
    for chunk in bytes.chunks_exact(record) {
        out.fps.push(u64::from_le_bytes(chunk[..8].try_into().expect("8 bytes")));
        if with_ids {
            ids.push(u64::from_le_bytes(chunk[8..].try_into().expect("8 bytes")));
        }
    }
    if with_ids {
        out.ids = Some(ids);
    }
    Ok(out)
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

/// Bytes of an offending value an error message quotes at most (a 50 MB line must not put
/// 50 MB on stderr).
const QUOTED_BYTES: usize = 200;

/// `text`, quoted and escaped, cut to about [`QUOTED_BYTES`] with its full length said.
pub fn shown(text: &str) -> String {
    if text.len() <= QUOTED_BYTES {
        return format!("{text:?}");
    }
    let cut = (0..=QUOTED_BYTES).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    format!("{:?}... ({} bytes in all)", &text[..cut], text.len())
}
