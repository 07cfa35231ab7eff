//! The append log (write-ahead log): every insert and delete is framed, checksummed and
//! numbered here before it touches the memtable (byte layout in `format-spec/log.md`).
//!
//! This module owns the file format: [`scan_log`] reads a log back and classifies how it
//! ends (clean, torn by a crash, or damaged); `writer`'s [`LogWriter`] appends records. It
//! does not decide which logs are live or when to sync; the engine does.
//!
//! A record is `header (24 bytes) | payload (16 bytes per operation) | end marker (4)`; in
//! a log of version 2 or later (an index that stores sketches) an insert record's payload is
//! followed by one fixed-width sketch per operation, its width in the header. A version-4
//! log (every log this build creates) may hold *replace* records: the deletes of what a
//! document id held and the insert of its new pair, in one record, so that a crash keeps
//! all of it or none. The
//! header carries its own CRC, so a damaged length can never pass for a torn tail, and the
//! end marker has several bits set, so no single flipped bit can make a complete record
//! look like the zero-filled tail a power loss can leave.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

mod writer;

use crate::query::Entry;
use std::path::Path;

pub use writer::LogWriter;

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::error::{Error, Location, Result};
use crate::integrity::{check_magic_and_version, verify_crc};

/// First bytes of every log file.
pub const LOG_MAGIC: [u8; 8] = *b"SIMDXLOG";
/// Log format version written for an index without sketches (and the oldest read).
pub const LOG_VERSION: u32 = 1;
/// Log format version written for an index that stores sketches: insert records may carry
/// one sketch per operation (`format-spec/log.md`).
pub const LOG_VERSION_SKETCHES: u32 = 2;
/// Log format version written for an index with an expiry window: version 2 whose
/// header's reserved word names the time slice of every insert in the log.
pub const LOG_VERSION_EPOCH: u32 = 3;
/// Log format version written by this build for every index: version 3's header (the time
/// slice, 0 without an expiry window) and records, plus [`OpKind::Replace`] records.
pub const LOG_VERSION_REPLACE: u32 = 4;

// ---- file header ----------------------------------------------------------------------
/// Offset of the magic in the file header.
pub const LH_MAGIC: usize = 0;
/// Offset of the format version.
pub const LH_VERSION: usize = LH_MAGIC + 8;
/// Offset of the reserved word (0; in versions 3 and 4 the time slice of the log's inserts).
pub const LH_RESERVED: usize = LH_VERSION + 4;
/// Offset of the log's file number (equal to the number in its name).
pub const LH_NUMBER: usize = LH_RESERVED + 4;
/// Offset of the CRC-32 of bytes `0..LH_CRC`.
pub const LH_CRC: usize = LH_NUMBER + 8;
/// Offset of the zero padding.
pub const LH_PAD: usize = LH_CRC + 4;
/// Bytes of the file header; the first record starts here.
pub const LOG_HEADER_BYTES: usize = LH_PAD + 4;

// ---- record -------------------------------------------------------------------------
/// Offset of the header CRC: CRC-32 of record bytes `R_PAYLOAD_CRC..R_PAYLOAD`.
pub const R_HEADER_CRC: usize = 0;
/// Offset of the payload CRC: CRC-32 of the payload bytes.
pub const R_PAYLOAD_CRC: usize = R_HEADER_CRC + 4;
/// Offset of the sequence number of the record's first operation.
pub const R_SEQ: usize = R_PAYLOAD_CRC + 4;
/// Offset of the operation kind ([`OpKind`]).
pub const R_KIND: usize = R_SEQ + 8;
/// Offset of the sketch width (u16): bytes of sketch per operation after the payload's
/// pairs (version 2, insert records only; 0 otherwise).
pub const R_SKETCH_BYTES: usize = R_KIND + 1;
/// Offset of one reserved byte (0).
pub const R_RESERVED: usize = R_SKETCH_BYTES + 2;
/// Offset of the operation count.
pub const R_COUNT: usize = R_RESERVED + 1;
/// Offset of the payload: `count` operations of [`OP_BYTES`] each, then (when the sketch
/// width is not 0) `count` sketches of that width.
pub const R_PAYLOAD: usize = R_COUNT + 4;
/// Bytes per operation: fingerprint (u64), document id (u64).
pub const OP_BYTES: usize = 16;
/// The last 4 bytes of every record.
pub const RECORD_END: [u8; 4] = *b"SXRE";
/// Bytes of a record besides its payload.
pub const RECORD_OVERHEAD: usize = R_PAYLOAD + RECORD_END.len();
/// Most operations in one record (16 MiB of payload); larger batches are split.
pub const MAX_RECORD_OPS: usize = 1 << 20;

/// What a record's operations do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Add `(fingerprint, doc_id)`.
    Insert,
    /// Delete `(fingerprint, doc_id)` (a tombstone).
    Delete,
    /// Replace what a document id holds (version 4): every operation but the last deletes
    /// its pair, the last inserts its pair (all under the same id), as one record.
    Replace,
}

impl OpKind {
    /// The byte stored in the record.
    pub fn id(self) -> u8 {
        match self {
            OpKind::Insert => 1,
            OpKind::Delete => 2,
            OpKind::Replace => 3,
        }
    }

    /// The kind stored as `id`.
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            1 => Some(OpKind::Insert),
            2 => Some(OpKind::Delete),
            3 => Some(OpKind::Replace),
            _ => None,
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Insert => "insert",
            OpKind::Delete => "delete",
            OpKind::Replace => "replace",
        }
    }

    /// True when operations of this kind may carry sketches (inserts, and a replace's
    /// insert).
    pub fn inserts(self) -> bool {
        matches!(self, OpKind::Insert | OpKind::Replace)
    }
}

/// One decoded record, borrowing its payload from the log bytes.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// Byte offset of the record in its file.
    pub offset: u64,
    /// Sequence number of the first operation; operation `i` has `seq + i`.
    pub seq: u64,
    /// What the operations do.
    pub kind: OpKind,
    /// The `(fingerprint, id)` pairs, [`OP_BYTES`] each.
    payload: &'a [u8],
    /// Bytes of sketch per operation (0: the record carries none).
    sketch_bytes: usize,
    /// The sketches, `sketch_bytes` each, one per operation.
    sketches: &'a [u8],
}

impl<'a> Record<'a> {
    /// Number of operations.
    pub fn len(&self) -> usize {
        self.payload.len() / OP_BYTES
    }

    /// True when the record holds no operation (never written by this build).
    pub fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }

    /// Sequence number of the last operation.
    pub fn last_seq(&self) -> u64 {
        self.seq + self.len().saturating_sub(1) as u64
    }

    /// The `(fingerprint, doc_id)` pairs, in order.
    pub fn ops(&self) -> impl Iterator<Item = (u64, u64)> + 'a {
        self.payload.chunks_exact(OP_BYTES).map(|c| {
            let mut op = [0u64; 2];
            LE::read_u64_into(c, &mut op);
            (op[0], op[1])
        })
    }

    /// The operations' sketches, concatenated (`sketch_bytes()` each), when the record
    /// carries them (a replace record's deletes have all-zero sketches).
    pub fn sketches(&self) -> Option<&'a [u8]> {
        (self.sketch_bytes > 0).then_some(self.sketches)
    }

    /// Bytes of sketch per operation (0 when the record carries none).
    pub fn sketch_bytes(&self) -> usize {
        self.sketch_bytes
    }

    /// Bytes the record occupies in the file.
    pub fn encoded_len(&self) -> usize {
        RECORD_OVERHEAD + self.payload.len() + self.sketches.len()
    }
}

/// Encodes the file header of log number `number` (format `version`, 1 or 2; 3 and 4 name
/// the time slice 0).
pub fn encode_header(number: u64, version: u32) -> [u8; LOG_HEADER_BYTES] {
    encode_header_with_epoch(number, version, 0)
}

/// Encodes the file header of log number `number` (format `version`); `epoch` goes in the
/// reserved word (versions 3 and 4; 0 otherwise).
pub fn encode_header_with_epoch(number: u64, version: u32, epoch: u32) -> [u8; LOG_HEADER_BYTES] {
    let mut b = [0u8; LOG_HEADER_BYTES];
    b[LH_MAGIC..LH_VERSION].copy_from_slice(&LOG_MAGIC);
    LE::write_u32(&mut b[LH_VERSION..], version);
    LE::write_u32(&mut b[LH_RESERVED..], epoch);
    LE::write_u64(&mut b[LH_NUMBER..], number);
    let crc = crc32fast::hash(&b[..LH_CRC]);
    LE::write_u32(&mut b[LH_CRC..], crc);
    b
}

/// Sketches that go with a record's operations: `bytes` per operation, concatenated.
#[derive(Clone, Copy, Debug)]
pub struct SketchSlice<'a> {
    /// Bytes per sketch (1..=65535).
    pub width: usize,
    /// One sketch per operation, `width` bytes each.
    pub bytes: &'a [u8],
}

/// Appends one encoded record to `out`. `ops.len()` must be `1..=MAX_RECORD_OPS`; with
/// `sketches` (logs of version 2 or later only), one sketch per operation.
pub fn encode_record(out: &mut Vec<u8>, seq: u64, kind: OpKind, ops: &[Entry], sketches: Option<SketchSlice<'_>>) {
    debug_assert!(!ops.is_empty() && ops.len() <= MAX_RECORD_OPS);
    debug_assert!(sketches.is_none_or(|s| s.width > 0 && s.width <= usize::from(u16::MAX) && s.bytes.len() == s.width * ops.len()));
    let start = out.len();
    out.resize(start + R_PAYLOAD, 0);
    for e in ops {
        out.extend_from_slice(&e.fingerprint.to_le_bytes());
        out.extend_from_slice(&e.doc_id.to_le_bytes());
    }
    if let Some(s) = sketches {
        out.extend_from_slice(s.bytes);
    }
    let (head, payload) = out.split_at_mut(start + R_PAYLOAD);
    let mut h = [0u8; R_PAYLOAD];
    LE::write_u32(&mut h[R_PAYLOAD_CRC..], crc32fast::hash(payload));
    LE::write_u64(&mut h[R_SEQ..], seq);
    h[R_KIND] = kind.id();
    LE::write_u16(&mut h[R_SKETCH_BYTES..], sketches.map_or(0, |s| s.width as u16));
    LE::write_u32(&mut h[R_COUNT..], ops.len() as u32);
    let header_crc = crc32fast::hash(&h[R_PAYLOAD_CRC..]);
    LE::write_u32(&mut h[R_HEADER_CRC..], header_crc);
    head.split_at_mut(start).1.copy_from_slice(&h);
    out.extend_from_slice(&RECORD_END);
}

/// How a scanned log ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogEnd {
    /// The last record ends at the end of the file.
    Clean,
    /// The file ends inside its header or a record: an append cut short by a crash. The
    /// bytes from `valid_len` on are not a record.
    Torn,
    /// Everything from `valid_len` on is zero: space a power loss extended the file with
    /// before the data reached the disk.
    ZeroFilled,
}

/// A damaged stretch that a log scan skipped in salvage mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// First damaged byte.
    pub offset: u64,
    /// Bytes skipped (up to the next intact record, or the end of the file).
    pub len: u64,
    /// What was wrong at `offset`.
    pub detail: String,
}

/// What a log scan found.
#[derive(Clone, Debug)]
pub struct LogScan {
    /// Bytes up to the end of the last intact record (at least the header length when the
    /// header is intact, 0 when the header itself is incomplete).
    pub valid_len: u64,
    /// How the file ends after `valid_len`.
    pub end: LogEnd,
    /// Intact records.
    pub records: u64,
    /// Operations in the intact records.
    pub ops: u64,
    /// First and last sequence number of the intact records.
    pub seqs: Option<(u64, u64)>,
    /// Damaged stretches skipped (salvage mode only; strict mode fails instead).
    pub damage: Vec<Damage>,
    /// The record the file ends inside, when its header survived: first sequence number
    /// and operation count. A crash leaves such a tail (never acknowledged under
    /// `Durability::Sync`); a file cut short by damage does too (possibly acknowledged).
    pub cut_record: Option<(u64, u32)>,
    /// The format version its header names (0 when the header is not whole; in salvage
    /// mode, the newest when the header is damaged).
    pub version: u32,
}

/// Strict: damage is an error. Salvage: damage is skipped and reported (only the CLI's
/// `recover` uses it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanMode {
    /// Any damaged record is [`Error::Corrupt`].
    Strict,
    /// Damaged records are skipped up to the next intact one and listed in the scan.
    Salvage,
}

/// Why the bytes at `at` are not an intact record.
enum RecordFault {
    /// The file ends before the record does (with the record's first sequence number and
    /// operation count when its header is whole and intact).
    Incomplete(Option<(u64, u32)>),
    /// The record is complete but damaged.
    Damaged(String),
}

/// Decodes the record at `at` of a log of format `version`, checking both CRCs, the kind (a
/// replace only from version 4 on), the count, the sketch width (0 unless the log's version
/// is 2 or later and the record inserts) and the end marker.
fn decode_record(bytes: &[u8], at: usize, version: u32) -> Result<Record<'_>, RecordFault> {
    let sketches_allowed = version >= LOG_VERSION_SKETCHES;
    let rest = bytes.get(at..).unwrap_or_default();
    let Some((h, rest)) = rest.split_first_chunk::<R_PAYLOAD>() else { return Err(RecordFault::Incomplete(None)) };
    verify_crc(&h[R_PAYLOAD_CRC..], LE::read_u32(&h[R_HEADER_CRC..])).map_err(|m| RecordFault::Damaged(m.detail("record header")))?;
    let cut = || RecordFault::Incomplete(Some((LE::read_u64(&h[R_SEQ..]), LE::read_u32(&h[R_COUNT..]))));
    let kind = OpKind::from_id(h[R_KIND]).ok_or_else(|| RecordFault::Damaged(format!("unknown operation kind {}", h[R_KIND])))?;
    if kind == OpKind::Replace && version < LOG_VERSION_REPLACE {
        return Err(RecordFault::Damaged(format!("a replace record in a version-{version} log (replace records came with version {LOG_VERSION_REPLACE})")));
    }
    if h[R_RESERVED] != 0 {
        return Err(RecordFault::Damaged("reserved record byte is not zero".into()));
    }
    let sketch_bytes = usize::from(LE::read_u16(&h[R_SKETCH_BYTES..]));
    if sketch_bytes != 0 && !(sketches_allowed && kind.inserts()) {
        let why = if sketches_allowed { "a delete record" } else { "a version-1 log" };
        return Err(RecordFault::Damaged(format!("sketch width {sketch_bytes} in {why} (must be 0)")));
    }
    let count = LE::read_u32(&h[R_COUNT..]) as usize;
    if count == 0 || count > MAX_RECORD_OPS {
        return Err(RecordFault::Damaged(format!("operation count {count} is outside 1..={MAX_RECORD_OPS}")));
    }
    let Some((all, rest)) = rest.split_at_checked(count * (OP_BYTES + sketch_bytes)) else { return Err(cut()) };
    let Some(end) = rest.first_chunk::<4>() else { return Err(cut()) };
    verify_crc(all, LE::read_u32(&h[R_PAYLOAD_CRC..])).map_err(|m| RecordFault::Damaged(m.detail("record payload")))?;
    if *end != RECORD_END {
        return Err(RecordFault::Damaged("record end marker is not SXRE".into()));
    }
    let (payload, sketches) = all.split_at(count * OP_BYTES);
    Ok(Record { offset: at as u64, seq: LE::read_u64(&h[R_SEQ..]), kind, payload, sketch_bytes, sketches })
}

/// Checks the file header of log `number` at the start of `bytes` and returns its format
/// version. `Ok(None)` means the file ends inside the header (a log whose creation was cut
/// short: it holds no record).
pub fn check_header(path: &Path, bytes: &[u8], number: u64) -> Result<Option<u32>> {
    if bytes.len() < LOG_HEADER_BYTES {
        // A prefix of the header we would have written is a creation cut short; anything
        // else is not our file.
        let epoch = bytes.get(LH_RESERVED..LH_NUMBER).map_or(0, LE::read_u32);
        if [LOG_VERSION, LOG_VERSION_SKETCHES, LOG_VERSION_EPOCH, LOG_VERSION_REPLACE]
            .iter()
            .any(|&v| encode_header_with_epoch(number, v, if v >= LOG_VERSION_EPOCH { epoch } else { 0 }).starts_with(bytes))
        {
            return Ok(None);
        }
    }
    let version = check_magic_and_version(path, bytes, &LOG_MAGIC, "log (magic SIMDXLOG)", LOG_VERSION..=LOG_VERSION_REPLACE)?;
    let h: &[u8; LOG_HEADER_BYTES] = bytes.first_chunk().ok_or_else(|| Error::corrupt(path, 0, format!("log header cut short at {} bytes", bytes.len())))?;
    verify_crc(&h[..LH_CRC], LE::read_u32(&h[LH_CRC..])).map_err(|m| m.corrupt(path, LH_CRC as u64, Location::default(), "log header"))?;
    let found = LE::read_u64(&h[LH_NUMBER..]);
    if found != number || (version < LOG_VERSION_EPOCH && LE::read_u32(&h[LH_RESERVED..]) != 0) || LE::read_u32(&h[LH_PAD..]) != 0 {
        return Err(Error::corrupt(path, LH_NUMBER as u64, format!("log header names log {found}, the file name says {number}")));
    }
    Ok(Some(version))
}

/// The time slice a log's header names (versions 3 and 4; `None`: an older version, or a
/// header that is not whole). Read after [`check_header`] accepted the header.
pub fn header_epoch(bytes: &[u8]) -> Option<u64> {
    let h: &[u8; LOG_HEADER_BYTES] = bytes.first_chunk()?;
    (LE::read_u32(&h[LH_VERSION..]) >= LOG_VERSION_EPOCH).then(|| u64::from(LE::read_u32(&h[LH_RESERVED..])))
}

/// Reads log `number` from `bytes`, calling `each` with every intact record in order.
///
/// In strict mode a damaged record is [`Error::Corrupt`] with its offset, unless it is the
/// tail a crash leaves (the file ends inside the record, or everything from the record on
/// is zero), which ends the scan with [`LogEnd::Torn`] or [`LogEnd::ZeroFilled`]. Sequence
/// numbers must increase by one operation at a time; a gap is damage.
pub fn scan_log(path: &Path, bytes: &[u8], number: u64, mode: ScanMode, mut each: impl FnMut(&Record<'_>) -> Result<()>) -> Result<LogScan> {
    let mut scan = LogScan { valid_len: 0, end: LogEnd::Clean, records: 0, ops: 0, seqs: None, damage: Vec::new(), cut_record: None, version: 0 };
    let version = match check_header(path, bytes, number) {
        Ok(Some(version)) => version,
        Ok(None) => {
            scan.end = if bytes.is_empty() { LogEnd::Clean } else { LogEnd::Torn };
            return Ok(scan);
        }
        // Records carry their own checksums: a damaged file header loses none of them.
        Err(e) if mode == ScanMode::Salvage && bytes.len() >= LOG_HEADER_BYTES => {
            scan.damage.push(Damage { offset: 0, len: LOG_HEADER_BYTES as u64, detail: format!("file header: {}", e.chain_message()) });
            LOG_VERSION_REPLACE
        }
        Err(e) => return Err(e),
    };
    scan.version = version;
    let mut at = LOG_HEADER_BYTES;
    scan.valid_len = at as u64;
    // After salvage skipped damage, the next intact record may not continue the sequence.
    let mut check_seq = true;
    while at < bytes.len() {
        let detail = match decode_record(bytes, at, version) {
            Ok(r) => {
                if let Some((_, last)) = scan.seqs.filter(|&(_, last)| check_seq && r.seq != last.wrapping_add(1)) {
                    let detail = format!("sequence number {} does not follow {last}: records are missing", r.seq);
                    if mode == ScanMode::Strict {
                        return Err(Error::corrupt(path, at as u64, detail));
                    }
                    scan.damage.push(Damage { offset: at as u64, len: 0, detail });
                }
                each(&r)?;
                check_seq = true;
                scan.records += 1;
                scan.ops += r.len() as u64;
                scan.seqs = Some((scan.seqs.map_or(r.seq, |s| s.0), r.last_seq()));
                at += r.encoded_len();
                scan.valid_len = at as u64;
                continue;
            }
            Err(RecordFault::Incomplete(cut)) => {
                scan.end = LogEnd::Torn;
                scan.cut_record = cut;
                return Ok(scan);
            }
            Err(RecordFault::Damaged(detail)) => detail,
        };
        if bytes.get(at..).unwrap_or_default().iter().all(|&b| b == 0) {
            scan.end = LogEnd::ZeroFilled;
            return Ok(scan);
        }
        if mode == ScanMode::Strict {
            return Err(Error::corrupt(path, at as u64, format!("{detail}; the records from here on are not replayed (run `simdex recover` to salvage the intact ones)")));
        }
        let next = (at + 1..bytes.len()).find(|&p| decode_record(bytes, p, version).is_ok()).unwrap_or(bytes.len());
        scan.damage.push(Damage { offset: at as u64, len: (next - at) as u64, detail });
        check_seq = false;
        at = next;
    }
    Ok(scan)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// (first sequence number, kind, operations) of each record
    type Records = [(u64, OpKind, Vec<(u64, u64)>)];

    fn entries(pairs: &[(u64, u64)]) -> Vec<Entry> {
        pairs.iter().map(|&p| Entry::from(p)).collect()
    }

    fn log_bytes(records: &Records) -> Vec<u8> {
        let mut b = encode_header(7, LOG_VERSION).to_vec();
        for (seq, kind, ops) in records {
            encode_record(&mut b, *seq, *kind, &entries(ops), None);
        }
        b
    }

    #[test]
    fn records_roundtrip_and_torn_tails_are_cut() {
        let recs = vec![(1, OpKind::Insert, vec![(5, 6), (7, 8)]), (3, OpKind::Delete, vec![(5, 6)])];
        let b = log_bytes(&recs);
        let mut seen = Vec::new();
        let scan = scan_log(Path::new("l"), &b, 7, ScanMode::Strict, |r| {
            seen.push((r.seq, r.kind, r.ops().collect::<Vec<_>>()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, recs);
        assert_eq!((scan.end, scan.valid_len, scan.seqs), (LogEnd::Clean, b.len() as u64, Some((1, 3))));
        let cut = scan_log(Path::new("l"), &b[..b.len() - 1], 7, ScanMode::Strict, |_| Ok(())).unwrap();
        assert_eq!((cut.end, cut.records), (LogEnd::Torn, 1));
        let mut zeros = b.clone();
        zeros.extend_from_slice(&[0u8; 100]);
        assert_eq!(scan_log(Path::new("l"), &zeros, 7, ScanMode::Strict, |_| Ok(())).unwrap().end, LogEnd::ZeroFilled);
    }

    #[test]
    fn worked_example_from_the_spec() {
        let mut b = Vec::new();
        encode_record(&mut b, 1, OpKind::Insert, &entries(&[(0x0123_4567_89ab_cdef, 7)]), None);
        let want = [
            0x1a, 0xa7, 0x7c, 0xa8, 0x5d, 0xa3, 0x4e, 0x1b, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, 7, 0, 0, 0, 0, 0, 0, 0,
            b'S', b'X', b'R', b'E',
        ];
        assert_eq!(b, want);
    }

    #[test]
    fn a_gap_in_sequence_numbers_is_damage() {
        let b = log_bytes(&[(1, OpKind::Insert, vec![(5, 6)]), (3, OpKind::Insert, vec![(5, 6)])]);
        let err = scan_log(Path::new("l"), &b, 7, ScanMode::Strict, |_| Ok(())).unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }

    #[test]
    fn replace_records_roundtrip_in_a_version_4_log_only() {
        let sketches: Vec<u8> = vec![0, 0, 7, 7];
        let mut b = encode_header_with_epoch(7, LOG_VERSION_REPLACE, 0).to_vec();
        encode_record(&mut b, 1, OpKind::Replace, &entries(&[(5, 9), (6, 9)]), Some(SketchSlice { width: 2, bytes: &sketches }));
        encode_record(&mut b, 3, OpKind::Replace, &entries(&[(8, 10)]), None);
        let mut seen = Vec::new();
        scan_log(Path::new("l"), &b, 7, ScanMode::Strict, |r| {
            seen.push((r.kind, r.seq, r.ops().collect::<Vec<_>>(), r.sketches().map(<[u8]>::to_vec)));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(OpKind::Replace, 1, vec![(5, 9), (6, 9)], Some(sketches.clone())), (OpKind::Replace, 3, vec![(8, 10)], None)]);
        // the same records in a version-3 log are damage, named
        let mut v3 = b.clone();
        v3[..LOG_HEADER_BYTES].copy_from_slice(&encode_header_with_epoch(7, LOG_VERSION_EPOCH, 0));
        let err = scan_log(Path::new("l"), &v3, 7, ScanMode::Strict, |_| Ok(())).unwrap_err();
        assert!(err.is_corruption() && err.to_string().contains("a replace record in a version-3 log"), "{err}");
        // a version-4 header in an index without a window names slice 0
        assert_eq!(header_epoch(&b), Some(0));
    }

    #[test]
    fn sketches_roundtrip_in_a_version_2_log_only() {
        let sketches: Vec<u8> = (0..12u8).collect();
        let mut b = encode_header(7, LOG_VERSION_SKETCHES).to_vec();
        encode_record(&mut b, 1, OpKind::Insert, &entries(&[(5, 6), (7, 8), (9, 10)]), Some(SketchSlice { width: 4, bytes: &sketches }));
        encode_record(&mut b, 4, OpKind::Delete, &entries(&[(5, 6)]), None);
        encode_record(&mut b, 5, OpKind::Insert, &entries(&[(11, 12)]), None);
        let mut seen = Vec::new();
        let scan = scan_log(Path::new("l"), &b, 7, ScanMode::Strict, |r| {
            seen.push((r.seq, r.ops().collect::<Vec<_>>(), r.sketch_bytes(), r.sketches().map(<[u8]>::to_vec)));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(1, vec![(5, 6), (7, 8), (9, 10)], 4, Some(sketches.clone())), (4, vec![(5, 6)], 0, None), (5, vec![(11, 12)], 0, None)]);
        assert_eq!((scan.end, scan.valid_len, scan.ops), (LogEnd::Clean, b.len() as u64, 5));
        // Torn inside the sketches: a crash's tail, cut.
        let cut = scan_log(Path::new("l"), &b[..LOG_HEADER_BYTES + R_PAYLOAD + 48 + 5], 7, ScanMode::Strict, |_| Ok(())).unwrap();
        assert_eq!((cut.end, cut.records, cut.cut_record), (LogEnd::Torn, 0, Some((1, 3))));
        // The same records under a version-1 header are damage, not sketches.
        let mut v1 = b.clone();
        v1[..LOG_HEADER_BYTES].copy_from_slice(&encode_header(7, LOG_VERSION));
        let err = scan_log(Path::new("l"), &v1, 7, ScanMode::Strict, |_| Ok(())).unwrap_err();
        assert!(err.is_corruption() && err.to_string().contains("version-1 log"), "{err}");
    }
}
