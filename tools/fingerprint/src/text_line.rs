//! The text form of fingerprints, one `FINGERPRINT[<TAB>DOC_ID]` a line (16 hex digits and
//! an optional decimal id: what `simdex bench generate --with-ids` writes and every command
//! that reads fingerprints reads), and of a near-duplicate pair. The one parser of a line and
//! writer of a pair, shared by the fronts (the `simdex` tool and `simdex.spark`): here, in the
//! text crate both fronts use, not in the index crate, which compiles no text code. Reading
//! files, counting lines and naming them is the fronts'.

// Indexing: a 256-entry table indexed by a byte.
#![allow(clippy::indexing_slicing)]

/// Why a line is not `FINGERPRINT[<TAB>DOC_ID]` (the message says what is wrong, quoting at
/// most [`QUOTED_BYTES`] of the offending text; the caller names the file and line).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadLine(String);

/// Writes one near-duplicate pair as `simdex cluster --pairs` and `simdex.spark cluster
/// --pairs` write it: `fp_a<TAB>fp_b<TAB>distance`, 16 lower-case hex digits each.
pub fn write_pair_line(out: &mut impl std::io::Write, a: u64, b: u64) -> std::io::Result<()> {
    writeln!(out, "{a:016x}\t{b:016x}\t{}", (a ^ b).count_ones())
}

/// Bytes of an offending value a message quotes at most (a 50 MB line must not put 50 MB on
/// stderr).
pub const QUOTED_BYTES: usize = 200;

/// Parses one line (its `\n` or `\r\n` included or not): `Ok(None)` for a blank line, else
/// the fingerprint and the document id when the line has one.
pub fn parse_fingerprint_line(raw: &[u8]) -> Result<Option<(u64, Option<u64>)>, BadLine> {
    // the common lines, 16 hex digits with or without a decimal id, without the checks that
    // name what is wrong (a 1M-query batch spent a sixth of its CPU here: benches/RESULTS.md)
    let line = raw.strip_suffix(b"\n").unwrap_or(raw);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if let (Some(digits), rest) = (line.get(..16), line.get(16..).unwrap_or_default()) {
        if let Some(fp) = hex16(digits) {
            match rest {
                [] => return Ok(Some((fp, None))),
                [b'\t', id @ ..] if !id.is_empty() && id.len() <= 20 && id.iter().all(u8::is_ascii_digit) => {
                    if let Some(id) = std::str::from_utf8(id).ok().and_then(|t| t.parse::<u64>().ok()) {
                        return Ok(Some((fp, Some(id))));
                    }
                }
                _ => {}
            }
        }
    }
    parse_checked(raw)
}

/// [`parse_fingerprint_line`] of any line, saying what is wrong with a bad one.
fn parse_checked(raw: &[u8]) -> Result<Option<(u64, Option<u64>)>, BadLine> {
    let text = std::str::from_utf8(raw).map_err(|e| BadLine(format!("not valid UTF-8 (byte {} of the line)", e.valid_up_to())))?;
    let text = text.trim_end_matches(['\n', '\r']);
    if text.trim().is_empty() {
        return Ok(None);
    }
    let mut parts = text.split('\t');
    let fp = parse_fingerprint_hex(parts.next().unwrap_or_default())?;
    let id = match parts.next() {
        None => None,
        Some(id) => Some(id.trim().parse::<u64>().map_err(|_| BadLine(format!("document id {} is not a decimal u64", quoted(id))))?),
    };
    if let Some(extra) = parts.next() {
        return Err(BadLine(format!("unexpected third field {}: expected FINGERPRINT[<TAB>DOC_ID]", quoted(extra))));
    }
    Ok(Some((fp, id)))
}

/// Parses exactly 16 hex digits (surrounding blanks allowed).
pub fn parse_fingerprint_hex(hex: &str) -> Result<u64, BadLine> {
    let hex = hex.trim();
    if hex.len() != 16 {
        return Err(BadLine(format!("fingerprint {} has {} characters: expected exactly 16 hex digits", quoted(hex), hex.chars().count())));
    }
    if let Some(bad) = hex.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(BadLine(format!("fingerprint {} has the non-hex character {bad:?}: expected exactly 16 hex digits", quoted(hex))));
    }
    u64::from_str_radix(hex, 16).map_err(|e| BadLine(format!("fingerprint {hex:?}: {e}")))
}

/// `text`, quoted and escaped, cut to about [`QUOTED_BYTES`] with its full length said.
pub(crate) fn quoted(text: &str) -> String {
    if text.len() <= QUOTED_BYTES {
        return format!("{text:?}");
    }
    let cut = (0..=QUOTED_BYTES).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    format!("{:?}... ({} bytes in all)", text.get(..cut).unwrap_or_default(), text.len())
}

/// The value of exactly 16 hex digits, or `None`.
fn hex16(digits: &[u8]) -> Option<u64> {
    // A table lookup per digit and one check at the end: no branch per digit to mispredict.
    let (mut v, mut bad) = (0u64, 0u8);
    for &c in digits {
        let d = HEX_DIGIT[usize::from(c)];
        bad |= d;
        v = v << 4 | u64::from(d & 15);
    }
    (bad & 0x80 == 0).then_some(v)
}

/// The value of each ASCII hex digit; 0x80 for every other byte.
static HEX_DIGIT: [u8; 256] = {
    let mut t = [0x80u8; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = match c as u8 {
            b'0'..=b'9' => c as u8 - b'0',
            b'a'..=b'f' => c as u8 - b'a' + 10,
            b'A'..=b'F' => c as u8 - b'A' + 10,
            _ => 0x80,
        };
        c += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_reads_lines_as_the_checked_one_does() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let pieces: [&[u8]; 12] = [b"", b"\n", b"\r\n", b"\t", b"\t5", b"\t18446744073709551615", b"\t18446744073709551616", b" ", b"g", b"\tx", b"\t\t1", b"\t007"];
        for _ in 0..20_000 {
            let fp = next();
            let mut line = match next() % 4 {
                0 => format!("{fp:016x}").into_bytes(),
                1 => format!("{fp:016X}").into_bytes(),
                2 => format!("{fp:x}").into_bytes(),
                _ => format!("{fp:016x}").into_bytes().into_iter().map(|c| if next() % 20 == 0 { b'z' } else { c }).collect(),
            };
            for _ in 0..next() % 3 {
                line.extend_from_slice(pieces[(next() % 12) as usize]);
            }
            let (fast, checked) = (parse_fingerprint_line(&line), parse_checked(&line));
            match (&fast, &checked) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{}", String::from_utf8_lossy(&line)),
                (Err(_), Err(_)) => {}
                _ => panic!("{}: {fast:?} vs {checked:?}", String::from_utf8_lossy(&line)),
            }
        }
    }
}
