//! Entry points for the fuzz targets in `tools/fuzz/` (compiled only with the `fuzzing`
//! feature; not a public API). Each function takes arbitrary bytes, runs them through the
//! decoding path a real open uses and walks everything decoded. It panics only when a
//! decoder does (the bug the fuzzer looks for) or when an oracle disagrees: the bitvec
//! reference decoder for blocks, a brute-force scan for segment queries, and for the
//! other files, encoding what was decoded gives back the same bytes.
//!
//! A mutated file almost always fails its CRC-32 first, so the log, manifest, tombstone
//! and IDF functions also decode a copy whose checksums they have recomputed: the
//! mutations then reach the checks behind the CRC as well.

#![deny(clippy::indexing_slicing, clippy::undocumented_unsafe_blocks)]

use std::path::{Path, PathBuf};

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::codec::reference::decode_block_reference;
use crate::codec::{decode_block, Code, Codec, BLOCK_BYTES, SYMBOLS};
use crate::engine::log::{
    encode_record, scan_log, ScanMode, SketchSlice, LH_CRC, LH_NUMBER, LOG_HEADER_BYTES, MAX_RECORD_OPS, OP_BYTES, RECORD_END, R_COUNT, R_HEADER_CRC, R_PAYLOAD, R_PAYLOAD_CRC,
};
use crate::engine::manifest::Manifest;
use crate::engine::tombstone;
use crate::recovery::verify_segment_bytes;
use crate::storage::FileBytes;
use crate::{QueryOptions, Segment};

/// `data` is 65 code lengths (each byte mod 14), a codec byte, a little-endian u16 entry
/// count, then the block (zero-padded or cut to [`BLOCK_BYTES`]). The fast decoder must
/// agree with the reference decoder on validity and on every value.
pub fn block_decode(data: &[u8]) {
    let Some((head, rest)) = data.split_first_chunk::<{ SYMBOLS + 3 }>() else { return };
    let (lengths, tail) = head.split_at(SYMBOLS);
    let &[codec, c0, c1] = tail else { return };
    let lengths: [u8; SYMBOLS] = std::array::from_fn(|i| lengths.get(i).map_or(0, |l| l % 14));
    let Ok(code) = Code::from_lengths(&lengths) else { return };
    let codec = if codec & 1 == 0 { Codec::Xor } else { Codec::Delta };
    let count = u32::from(u16::from_le_bytes([c0, c1]));
    let mut block = [0u8; BLOCK_BYTES];
    for (to, &from) in block.iter_mut().zip(rest) {
        *to = from;
    }
    let mut fast = Vec::new();
    let r = decode_block(codec, &code, &block, count, |v| {
        fast.push(v);
        true
    });
    let reference = decode_block_reference(codec, code.lengths(), &block, count);
    match (r, reference) {
        (Ok(_), Some(v)) => assert_eq!(fast, v),
        (Err(_), None) => {}
        (r, v) => panic!("decoders disagree: fast {:?}, reference {:?}", r.map(|_| fast.len()), v.map(|v| v.len())),
    }
}

/// `data` is a segment file: open it as [`Segment::open`] does, verify it, iterate every
/// entry and id, and query it. A file that opens and verifies clean must answer queries
/// like a brute-force scan of its entries.
pub fn segment_open(data: &[u8]) {
    let path = PathBuf::from("fuzz.sdx");
    let bytes = FileBytes::from_vec(data.to_vec());
    let report = verify_segment_bytes(&path, bytes.clone()).expect("in-memory bytes are readable");
    let Ok(seg) = Segment::from_bytes(path, bytes) else { return };
    let entries: Vec<_> = seg.entries().collect();
    for t in 0..seg.tables().len() {
        seg.table_entries(t).for_each(drop);
    }
    seg.doc_ids().for_each(drop);
    let k = seg.design().k();
    let mut out = Vec::new();
    for q in [0u64, u64::MAX, 0x0123_4567_89ab_cdef] {
        let _ = seg.query(q, &QueryOptions::within(k + 1).with_full_scan());
        let found = seg.query_into(q, &QueryOptions::within(k), &mut out);
        if report.is_clean() {
            assert!(found.is_ok(), "a clean segment failed a query: {found:?}");
            let all: Vec<(u64, Option<u64>)> = entries.iter().filter_map(|e| e.as_ref().ok().copied()).collect();
            assert_eq!(all.len(), entries.len(), "a clean segment failed to decode");
            let mut want: Vec<_> = all.iter().filter(|(f, _)| (f ^ q).count_ones() <= k).collect();
            want.dedup();
            assert_eq!(out.len(), want.len());
        }
    }
}

/// `data` is a log file, numbered as its header says: scan it strictly (as an index opens
/// it) and in salvage mode (as `simdex recover` does), reading every operation. Every
/// intact record must encode back to its own bytes.
pub fn log(data: &[u8]) {
    let mut fixed = data.to_vec();
    fix_log_crcs(&mut fixed);
    for data in [data, &fixed] {
        let path = Path::new("log-000000000001.wal");
        let number = data.get(LH_NUMBER..LH_NUMBER + 8).map_or(1, LE::read_u64);
        for mode in [ScanMode::Strict, ScanMode::Salvage] {
            let mut again = Vec::new();
            let _ = scan_log(path, data, number, mode, |r| {
                let ops: Vec<crate::Entry> = r.ops().map(crate::Entry::from).collect();
                again.clear();
                let sketches = r.sketches().map(|bytes| SketchSlice { width: r.sketch_bytes(), bytes });
                encode_record(&mut again, r.seq, r.kind, &ops, sketches);
                let at = r.offset as usize;
                assert_eq!(data.get(at..at + again.len()), Some(again.as_slice()), "record at {at} does not encode back to its bytes");
                Ok(())
            });
        }
    }
}

/// Rewrites the CRCs of the log header and of every record whose count fits the file.
fn fix_log_crcs(b: &mut [u8]) {
    if let Some(h) = b.first_chunk_mut::<LOG_HEADER_BYTES>() {
        let crc = crc32fast::hash(&h[..LH_CRC]);
        LE::write_u32(&mut h[LH_CRC..], crc);
    }
    let mut at = LOG_HEADER_BYTES;
    while let Some(h) = b.get(at..).and_then(|rest| rest.first_chunk::<R_PAYLOAD>()) {
        let count = LE::read_u32(&h[R_COUNT..]) as usize;
        let end = at + R_PAYLOAD + count.min(MAX_RECORD_OPS) * OP_BYTES;
        let Some(payload) = b.get(at + R_PAYLOAD..end) else { return };
        let payload_crc = crc32fast::hash(payload);
        let Some(h) = b.get_mut(at..).and_then(|rest| rest.first_chunk_mut::<R_PAYLOAD>()) else { return };
        LE::write_u32(&mut h[R_PAYLOAD_CRC..], payload_crc);
        let header_crc = crc32fast::hash(&h[R_PAYLOAD_CRC..]);
        LE::write_u32(&mut h[R_HEADER_CRC..], header_crc);
        at = end + RECORD_END.len();
    }
}

/// `data`, and `data` with its last 4 bytes replaced by the CRC-32 of the others (the
/// layout of manifests, tombstone files and IDF tables).
pub fn with_trailing_crc(data: &[u8]) -> [Vec<u8>; 2] {
    let mut fixed = data.to_vec();
    if let Some((body, crc)) = fixed.split_last_chunk_mut::<4>() {
        *crc = crc32fast::hash(body).to_le_bytes();
    }
    [data.to_vec(), fixed]
}

/// `data` is a `MANIFEST`: decode it as `Manifest::load` does. A manifest that decodes
/// must encode back to the same bytes.
pub fn manifest(data: &[u8]) {
    for data in with_trailing_crc(data) {
        if let Ok(m) = Manifest::decode(Path::new("MANIFEST"), &data) {
            assert_eq!(m.encode(), data, "manifest does not encode back to its bytes");
        }
    }
}

/// `data` is a tombstone file: decode it as `tombstone::read` does. A file that decodes
/// must encode back to the same bytes.
pub fn tombstone(data: &[u8]) {
    for data in with_trailing_crc(data) {
        if let Ok(t) = tombstone::decode(Path::new("tomb-000000000001.sdt"), &data) {
            assert_eq!(tombstone::encode(&t), data, "tombstone file does not encode back to its bytes");
        }
    }
}

/// `data` as a band file's head (and a copy with its CRC recomputed): decoding never
/// panics, a head that decodes encodes back to its bytes, and its geometry (where every
/// band's pages are) does not overflow.
pub fn band_head(data: &[u8]) {
    use crate::bands::layout::{BandHead, B_CRC};
    let mut fixed = data.to_vec();
    if let Some(body) = fixed.get(..B_CRC) {
        let crc = crc32fast::hash(body);
        if let Some(at) = fixed.get_mut(B_CRC..B_CRC + 4) {
            at.copy_from_slice(&crc.to_le_bytes());
        }
    }
    // (every version a band file is read in: 1, 2 since entries are bit-packed, 3 since
    // ordinals are Elias-Fano coded)
    for (data, version) in [data, &fixed[..]].into_iter().flat_map(|d| [(d, 1), (d, 2), (d, 3)]) {
        if let Ok(head) = BandHead::decode(data, version) {
            assert_eq!(head.encode().get(..B_CRC + 4), data.get(..B_CRC + 4), "band head does not encode back to its bytes");
            let g = head.geometry();
            let _ = (g.file_len(head.design.bands), g.dir_page(head.design.bands - 1, g.dir_pages));
        }
    }
}
