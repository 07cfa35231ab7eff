//! Byte layout of a segment file, mirroring `format-spec/segment.md` field by field: the
//! header, the table head, the directory and the footer, each with an encoder and a
//! decoder. Decoders return a [`Fault`] with the offset of the bad field; they never panic.
//!
//! All integers are little-endian. Offsets below are relative to the structure's start.

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::codec::{Codec, SYMBOLS};
use crate::error::Location;
use crate::integrity::{verify_crc, Fault};

pub use super::bytes::{align_up, array, slice};

/// Newest format version written by this build: 3 for a segment with a sketch column (its
/// pages in groups with a CRC page each, layout 3), 2 for one without.
pub const FORMAT_VERSION: u32 = 3;
/// The version a segment is written in: [`FORMAT_VERSION`] with sketches, 2 without.
pub fn version_for(has_sketches: bool) -> u32 {
    if has_sketches {
        FORMAT_VERSION
    } else {
        2
    }
}
/// The oldest format version this build still reads.
pub const OLDEST_VERSION: u32 = 1;
/// Regions that hold blocks start at multiples of this.
pub const ALIGN: u64 = 1024;

// ---- header -------------------------------------------------------------------------
/// First bytes of every segment.
pub const HEADER_MAGIC: [u8; 8] = *b"SIMDXSEG";
pub const H_MAGIC: usize = 0;
pub const H_VERSION: usize = H_MAGIC + 8;
pub const H_LEN: usize = H_VERSION + 4;
pub const H_F: usize = H_LEN + 4;
pub const H_K: usize = H_F + 1;
pub const H_LEVEL_COUNT: usize = H_K + 1;
pub const H_FLAGS: usize = H_LEVEL_COUNT + 1;
pub const H_TABLE_COUNT: usize = H_FLAGS + 1;
pub const H_RESERVED: usize = H_TABLE_COUNT + 2;
/// Start of the variable part: levels, then one [`H_TABLE_ENTRY`]-byte entry per table.
pub const H_LEVELS: usize = H_RESERVED + 2;
/// Per table in the header: prefix bits (1), codec (1), permutation order (64).
pub const H_TABLE_ENTRY: usize = 1 + 1 + 64;
/// Header flag: the segment has a document-id column.
pub const FLAG_HAS_IDS: u8 = 1;
/// Header flag (version 2): the segment has a sketch column.
pub const FLAG_HAS_SKETCHES: u8 = 2;

// ---- table head ---------------------------------------------------------------------
/// First bytes of every table section.
pub const TABLE_MAGIC: [u8; 8] = *b"SIMDXTBL";
pub const T_MAGIC: usize = 0;
pub const T_INDEX: usize = T_MAGIC + 8;
pub const T_CODEC: usize = T_INDEX + 2;
pub const T_PREFIX: usize = T_CODEC + 1;
pub const T_LENGTHS: usize = T_PREFIX + 1;
pub const T_RESERVED: usize = T_LENGTHS + SYMBOLS;
/// Version 2: the block layout (0, the only one, is `block.md`'s); reserved in version 1.
pub const T_BLOCK_LAYOUT: usize = T_RESERVED;
/// Version 1: the head's CRC; version 2 puts the design here and its CRC after it.
pub const T_CRC_V1: usize = T_RESERVED + 3;
pub const T_END_V1: usize = T_CRC_V1 + 4;
pub const T_VERSION: usize = T_CRC_V1;
pub const T_TABLE_COUNT: usize = T_VERSION + 4;
pub const T_K: usize = T_TABLE_COUNT + 2;
pub const T_LEVEL_COUNT: usize = T_K + 1;
pub const T_LEVELS: usize = T_LEVEL_COUNT + 1;
/// Room for the levels in a version-2 table head (at most [`crate::plan::MAX_LEVELS`] used).
pub const T_LEVELS_ROOM: usize = 4;
pub const T_FLAGS: usize = T_LEVELS + T_LEVELS_ROOM;
pub const T_ORDER: usize = T_FLAGS + 4;
pub const T_CRC_V2: usize = T_ORDER + 64;
pub const T_END_V2: usize = T_CRC_V2 + 4;
/// The table head occupies this many bytes (zero-padded) so blocks start aligned.
pub const TABLE_HEAD_BYTES: u64 = ALIGN;

// ---- block index ----------------------------------------------------------------------
/// Bytes of block index per block: key (8), entry count (2), CRC-32 (4).
pub const INDEX_BYTES_PER_BLOCK: u64 = 8 + 2 + 4;
/// Version 2: blocks per block-index chunk (each chunk has its own CRC and base ordinal).
pub const INDEX_CHUNK_BLOCKS: u64 = 512;
/// Version 2: bytes per chunk in the index summary: base ordinal (8), chunk CRC (4),
/// reserved (4).
pub const SUMMARY_BYTES_PER_CHUNK: u64 = 16;

// ---- table trailer (version 2) --------------------------------------------------------
/// First bytes of a table trailer, which ends the table section at a multiple of [`ALIGN`].
pub const TRAILER_MAGIC: [u8; 8] = *b"SIMDXTTR";
pub const R_MAGIC: usize = 0;
pub const R_INDEX: usize = R_MAGIC + 8;
pub const R_HEAD_OFFSET: usize = R_INDEX + 8;
pub const R_BLOCK_COUNT: usize = R_HEAD_OFFSET + 8;
pub const R_ENTRIES: usize = R_BLOCK_COUNT + 8;
pub const R_INDEX_OFFSET: usize = R_ENTRIES + 8;
pub const R_INDEX_CRC: usize = R_INDEX_OFFSET + 8;
pub const R_CRC: usize = R_INDEX_CRC + 12;
/// Bytes of a table trailer.
pub const TRAILER_BYTES: usize = R_CRC + 4;

// ---- columns (version 2) ----------------------------------------------------------------
/// First bytes of a column section (document ids or sketches).
pub const COLUMN_MAGIC: [u8; 8] = *b"SIMDXCOL";
pub const C_MAGIC: usize = 0;
pub const C_KIND: usize = C_MAGIC + 8;
pub const C_VALUE_BYTES: usize = C_KIND + 2;
pub const C_PER_PAGE: usize = C_VALUE_BYTES + 2;
pub const C_ENTRIES: usize = C_PER_PAGE + 4;
pub const C_SCHEME: usize = C_ENTRIES + 8;
pub const C_VERSION: usize = C_SCHEME + 8;
pub const C_CRC: usize = C_VERSION + 4;
pub const C_END: usize = C_CRC + 4;
/// A column head occupies this many bytes (zero-padded); pages follow.
pub const COLUMN_HEAD_BYTES: u64 = ALIGN;
/// Bytes of one column page; its last [`PAGE_CRC_BYTES`] hold the CRC-32 of the rest.
pub const PAGE_BYTES: u64 = ALIGN;
pub const PAGE_CRC_BYTES: u64 = 4;
/// Column layout 2: each page ends with its CRC (ids; sketches in version-2 segments).
pub const PAGE_CRC_LAYOUT: u32 = 2;
/// Column layout 3 (sketches in version-3 segments): whole pages of values, and after each
/// group of [`GROUP_PAGES`] pages (or the column's last, shorter group) one CRC page.
pub const SKETCH_LAYOUT: u32 = 3;
/// Pages of a layout-3 group: a CRC page holds their CRCs, then its own CRC.
pub const GROUP_PAGES: u64 = (PAGE_BYTES - PAGE_CRC_BYTES) / 4;
/// Largest sketch a column holds, in bytes.
pub const MAX_SKETCH_BYTES: usize = 64;

// ---- document ids (version 1) ---------------------------------------------------------
/// Document ids per checksummed page in a version-1 id column.
pub const IDS_PER_PAGE_V1: u64 = 128;

// ---- directory ----------------------------------------------------------------------
pub const DIR_MAGIC: [u8; 8] = *b"SIMDXDIR";
pub const D_MAGIC: usize = 0;
pub const D_ENTRIES: usize = D_MAGIC + 8;
pub const D_TABLE_COUNT: usize = D_ENTRIES + 8;
pub const D_RESERVED: usize = D_TABLE_COUNT + 2;
pub const D_TABLES: usize = D_RESERVED + 6;
/// Per table: head offset, block count, entries, index offset (u64 each), index CRC, reserved.
pub const D_TABLE_ENTRY: usize = 8 + 8 + 8 + 8 + 4 + 4;
/// Version 1, after the tables: ids offset, id-page CRCs offset (u64 each), CRC of the
/// id-page CRCs, reserved.
pub const D_IDS_ENTRY_V1: usize = 8 + 8 + 4 + 4;
/// Version 2, after the tables: id column head offset, sketch column head offset (0 = none).
pub const D_COLUMNS_ENTRY_V2: usize = 8 + 8;

// ---- footer -------------------------------------------------------------------------
pub const FOOTER_MAGIC: [u8; 8] = *b"SIMDXEND";
pub const F_DIR_OFFSET: usize = 0;
pub const F_DIR_LEN: usize = F_DIR_OFFSET + 8;
pub const F_DIR_CRC: usize = F_DIR_LEN + 4;
pub const F_VERSION: usize = F_DIR_CRC + 4;
pub const F_CRC: usize = F_VERSION + 4;
pub const F_MAGIC: usize = F_CRC + 4;
/// Bytes of the footer, the last bytes of the file.
pub const FOOTER_BYTES: usize = F_MAGIC + 8;

/// The per-table part of the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderTable {
    pub prefix_bits: u8,
    pub codec: Codec,
    pub order: [u8; 64],
}

/// The segment header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Format version (from the file when decoded; [`FORMAT_VERSION`] is written).
    pub version: u32,
    pub k: u8,
    pub levels: Vec<u8>,
    pub has_ids: bool,
    /// Version 2 only: a sketch column follows the id column.
    pub has_sketches: bool,
    pub tables: Vec<HeaderTable>,
}

impl Header {
    /// Encoded length including the CRC, before padding.
    pub fn encoded_len(&self) -> usize {
        H_LEVELS + self.levels.len() + self.tables.len() * H_TABLE_ENTRY + 4
    }

    /// The header's flags byte.
    pub fn flags(&self) -> u8 {
        (if self.has_ids { FLAG_HAS_IDS } else { 0 }) | (if self.has_sketches { FLAG_HAS_SKETCHES } else { 0 })
    }

    /// The header bytes (of `self.version`), zero-padded to [`ALIGN`].
    pub fn encode(&self) -> Vec<u8> {
        let len = self.encoded_len();
        let padded = align_up(len as u64, ALIGN) as usize;
        let mut b = Vec::with_capacity(padded);
        b.extend_from_slice(&HEADER_MAGIC);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&(len as u32).to_le_bytes());
        b.extend_from_slice(&[64, self.k, self.levels.len() as u8, self.flags()]);
        b.extend_from_slice(&(self.tables.len() as u16).to_le_bytes());
        b.extend_from_slice(&[0; 2]);
        debug_assert_eq!(b.len(), H_LEVELS);
        b.extend_from_slice(&self.levels);
        for t in &self.tables {
            b.extend_from_slice(&[t.prefix_bits, t.codec.id()]);
            b.extend_from_slice(&t.order);
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(b.len(), len);
        b.resize(padded, 0);
        b
    }

    /// Decodes the header at the start of `bytes`. Magic and version problems are reported
    /// by the caller, which knows the path; this checks everything after them.
    pub fn decode(bytes: &[u8]) -> Result<(Header, u64), Fault> {
        let fixed: &[u8; H_LEVELS] = array(bytes, 0, "header")?;
        let version = LE::read_u32(&fixed[H_VERSION..]);
        let len = u64::from(LE::read_u32(&fixed[H_LEN..]));
        let head = slice(bytes, 0, len, "header")?;
        let Some((body, crc)) = head.split_last_chunk::<4>().filter(|(body, _)| body.len() >= H_LEVELS) else {
            return Err(Fault::at(H_LEN as u64, format!("header length {len} is too small")));
        };
        verify_crc(body, u32::from_le_bytes(*crc)).map_err(|m| m.fault(body.len() as u64, Location::default(), "header"))?;
        if fixed[H_F] != 64 {
            return Err(Fault::at(H_F as u64, format!("fingerprint width {} is not supported (only 64)", fixed[H_F])));
        }
        let known = if version >= 2 { FLAG_HAS_IDS | FLAG_HAS_SKETCHES } else { FLAG_HAS_IDS };
        if fixed[H_FLAGS] & !known != 0 {
            return Err(Fault::at(H_FLAGS as u64, format!("unknown flags {:#04x}", fixed[H_FLAGS])));
        }
        let levels_n = usize::from(fixed[H_LEVEL_COUNT]);
        let tables_n = usize::from(LE::read_u16(&fixed[H_TABLE_COUNT..]));
        if H_LEVELS + levels_n + tables_n * H_TABLE_ENTRY != body.len() {
            return Err(Fault::at(
                H_LEN as u64,
                format!("header length {len} does not fit {levels_n} levels and {tables_n} tables"),
            ));
        }
        let levels = slice(body, H_LEVELS as u64, levels_n as u64, "header levels")?.to_vec();
        let mut tables = Vec::with_capacity(tables_n);
        let mut at = (H_LEVELS + levels_n) as u64;
        for i in 0..tables_n {
            let e: &[u8; H_TABLE_ENTRY] = array(body, at, "header table entry")?;
            let [prefix_bits, codec_id, ..] = *e;
            let codec = Codec::from_id(codec_id).ok_or_else(|| Fault::at(at + 1, format!("unknown codec id {codec_id}")).in_table(i))?;
            let mut order = [0u8; 64];
            order.copy_from_slice(&e[2..]);
            tables.push(HeaderTable { prefix_bits, codec, order });
            at += H_TABLE_ENTRY as u64;
        }
        let flags = fixed[H_FLAGS];
        let header = Header {
            version,
            k: fixed[H_K],
            levels,
            has_ids: flags & FLAG_HAS_IDS != 0,
            has_sketches: flags & FLAG_HAS_SKETCHES != 0,
            tables,
        };
        Ok((header, len))
    }
}

/// What a version-2 table head repeats of the header, so that a table can be read without
/// the header: the design's block split, the table count, the flags and the table's permutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadDesign {
    pub table_count: u16,
    pub k: u8,
    pub levels: Vec<u8>,
    pub flags: u8,
    pub order: [u8; 64],
}

/// The head of one table section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableHead {
    pub index: u16,
    pub codec: Codec,
    pub prefix_bits: u8,
    pub lengths: [u8; SYMBOLS],
    /// Version 2 only (`None` in a version-1 head).
    pub design: Option<HeadDesign>,
}

impl TableHead {
    /// [`TABLE_HEAD_BYTES`] bytes: the fields, their CRC, zero padding. A head with a
    /// design is written as the version its flags give ([`version_for`]: 3 with sketches,
    /// else 2), one without as version 1.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = [0u8; TABLE_HEAD_BYTES as usize];
        b[T_MAGIC..T_INDEX].copy_from_slice(&TABLE_MAGIC);
        LE::write_u16(&mut b[T_INDEX..], self.index);
        b[T_CODEC] = self.codec.id();
        b[T_PREFIX] = self.prefix_bits;
        b[T_LENGTHS..T_RESERVED].copy_from_slice(&self.lengths);
        match &self.design {
            None => {
                let crc = crc32fast::hash(&b[..T_CRC_V1]);
                LE::write_u32(&mut b[T_CRC_V1..], crc);
            }
            Some(d) => {
                LE::write_u32(&mut b[T_VERSION..], version_for(d.flags & FLAG_HAS_SKETCHES != 0));
                LE::write_u16(&mut b[T_TABLE_COUNT..], d.table_count);
                b[T_K] = d.k;
                b[T_LEVEL_COUNT] = d.levels.len() as u8;
                for (to, &r) in b[T_LEVELS..T_LEVELS + T_LEVELS_ROOM].iter_mut().zip(&d.levels) {
                    *to = r;
                }
                b[T_FLAGS] = d.flags;
                b[T_ORDER..T_CRC_V2].copy_from_slice(&d.order);
                let crc = crc32fast::hash(&b[..T_CRC_V2]);
                LE::write_u32(&mut b[T_CRC_V2..], crc);
            }
        }
        b.to_vec()
    }

    /// Decodes the table head of format `version` at absolute offset `at`.
    pub fn decode(bytes: &[u8], at: u64, version: u32) -> Result<TableHead, Fault> {
        if version < 2 {
            let b: &[u8; T_END_V1] = array(bytes, at, "table head")?;
            verify_crc(&b[..T_CRC_V1], LE::read_u32(&b[T_CRC_V1..])).map_err(|m| m.fault(at + T_CRC_V1 as u64, Location::default(), "table head"))?;
            return Self::decode_common(b, at, None);
        }
        let b: &[u8; T_END_V2] = array(bytes, at, "table head")?;
        verify_crc(&b[..T_CRC_V2], LE::read_u32(&b[T_CRC_V2..])).map_err(|m| m.fault(at + T_CRC_V2 as u64, Location::default(), "table head"))?;
        let stored_version = LE::read_u32(&b[T_VERSION..]);
        if stored_version != version {
            return Err(Fault::at(at + T_VERSION as u64, format!("table head says format version {stored_version}, the file {version}")));
        }
        if b[T_BLOCK_LAYOUT] != 0 {
            return Err(Fault::at(at + T_BLOCK_LAYOUT as u64, format!("unknown block layout {} (this build reads layout 0)", b[T_BLOCK_LAYOUT])));
        }
        let level_count = usize::from(b[T_LEVEL_COUNT]);
        let levels: &[u8; T_LEVELS_ROOM] = array(b, T_LEVELS as u64, "table head levels")?;
        let Some(levels) = levels.get(..level_count) else {
            return Err(Fault::at(at + T_LEVEL_COUNT as u64, format!("{level_count} levels do not fit a table head")));
        };
        let mut order = [0u8; 64];
        order.copy_from_slice(&b[T_ORDER..T_CRC_V2]);
        let design = HeadDesign { table_count: LE::read_u16(&b[T_TABLE_COUNT..]), k: b[T_K], levels: levels.to_vec(), flags: b[T_FLAGS], order };
        let common: &[u8; T_END_V1] = array(b, 0, "table head")?;
        Self::decode_common(common, at, Some(design))
    }

    /// The fields versions 1 and 2 share, after the CRC check.
    fn decode_common(b: &[u8; T_END_V1], at: u64, design: Option<HeadDesign>) -> Result<TableHead, Fault> {
        if b[T_MAGIC..T_INDEX] != TABLE_MAGIC {
            return Err(Fault::at(at, "table head magic is not SIMDXTBL"));
        }
        let codec = Codec::from_id(b[T_CODEC]).ok_or_else(|| Fault::at(at + T_CODEC as u64, format!("unknown codec id {}", b[T_CODEC])))?;
        let mut lengths = [0u8; SYMBOLS];
        lengths.copy_from_slice(&b[T_LENGTHS..T_RESERVED]);
        Ok(TableHead { index: LE::read_u16(&b[T_INDEX..]), codec, prefix_bits: b[T_PREFIX], lengths, design })
    }
}

/// Where one table's parts are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirTable {
    pub head_offset: u64,
    pub block_count: u64,
    pub entries: u64,
    pub index_offset: u64,
    pub index_crc: u32,
}

impl DirTable {
    /// Blocks start right after the table head.
    pub fn blocks_offset(&self) -> u64 {
        self.head_offset + TABLE_HEAD_BYTES
    }

    /// Where the block index's columns (keys, counts, CRCs) end.
    pub fn index_columns_end(&self) -> u64 {
        self.index_offset + self.block_count * INDEX_BYTES_PER_BLOCK
    }

    /// Version 2: where the block index's summary starts (right after its columns).
    pub fn summary_offset(&self) -> u64 {
        self.index_columns_end()
    }

    /// Version 2: bytes of the block index's summary.
    pub fn summary_len(&self) -> u64 {
        self.block_count.div_ceil(INDEX_CHUNK_BLOCKS) * SUMMARY_BYTES_PER_CHUNK
    }

    /// Version 2: where the table's trailer starts (it ends the section at a multiple of
    /// [`ALIGN`], after the summary).
    pub fn trailer_offset(&self) -> u64 {
        trailer_offset_after(self.summary_offset() + self.summary_len())
    }
}

/// Where the trailer of a table whose block index (with its summary) ends at `index_end`
/// starts.
pub fn trailer_offset_after(index_end: u64) -> u64 {
    align_up(index_end + TRAILER_BYTES as u64, ALIGN) - TRAILER_BYTES as u64
}

/// The trailer that ends a version-2 table section: everything the directory says about
/// the table, so that the table can be found and checked without the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableTrailer {
    pub index: u16,
    pub table: DirTable,
}

impl TableTrailer {
    pub fn encode(&self) -> [u8; TRAILER_BYTES] {
        let mut b = [0u8; TRAILER_BYTES];
        b[R_MAGIC..R_INDEX].copy_from_slice(&TRAILER_MAGIC);
        LE::write_u16(&mut b[R_INDEX..], self.index);
        let t = &self.table;
        LE::write_u64(&mut b[R_HEAD_OFFSET..], t.head_offset);
        LE::write_u64(&mut b[R_BLOCK_COUNT..], t.block_count);
        LE::write_u64(&mut b[R_ENTRIES..], t.entries);
        LE::write_u64(&mut b[R_INDEX_OFFSET..], t.index_offset);
        LE::write_u32(&mut b[R_INDEX_CRC..], t.index_crc);
        let crc = crc32fast::hash(&b[..R_CRC]);
        LE::write_u32(&mut b[R_CRC..], crc);
        b
    }

    /// Decodes the trailer at absolute offset `at`, checking its magic and CRC and that it
    /// sits where its own offsets say it must.
    pub fn decode(bytes: &[u8], at: u64) -> Result<TableTrailer, Fault> {
        let b: &[u8; TRAILER_BYTES] = array(bytes, at, "table trailer")?;
        if b[R_MAGIC..R_INDEX] != TRAILER_MAGIC {
            return Err(Fault::at(at, "table trailer magic is not SIMDXTTR"));
        }
        verify_crc(&b[..R_CRC], LE::read_u32(&b[R_CRC..])).map_err(|m| m.fault(at + R_CRC as u64, Location::default(), "table trailer"))?;
        let table = DirTable {
            head_offset: LE::read_u64(&b[R_HEAD_OFFSET..]),
            block_count: LE::read_u64(&b[R_BLOCK_COUNT..]),
            entries: LE::read_u64(&b[R_ENTRIES..]),
            index_offset: LE::read_u64(&b[R_INDEX_OFFSET..]),
            index_crc: LE::read_u32(&b[R_INDEX_CRC..]),
        };
        let consistent = table.block_count.checked_mul(ALIGN + INDEX_BYTES_PER_BLOCK).is_some()
            && table.index_offset == table.blocks_offset() + table.block_count * ALIGN
            && table.trailer_offset() == at;
        if !consistent {
            return Err(Fault::at(at, "table trailer's offsets do not place it here"));
        }
        Ok(TableTrailer { index: LE::read_u16(&b[R_INDEX..]), table })
    }
}

/// What a version-2 column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// One u64 document id per entry.
    Ids,
    /// One fixed-size sketch per entry.
    Sketches,
}

impl ColumnKind {
    pub fn id(self) -> u8 {
        match self {
            ColumnKind::Ids => 1,
            ColumnKind::Sketches => 2,
        }
    }

    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            1 => Some(ColumnKind::Ids),
            2 => Some(ColumnKind::Sketches),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ColumnKind::Ids => "document-id",
            ColumnKind::Sketches => "sketch",
        }
    }
}

/// The head of a column section (version 2 and later): self-describing, so the column can
/// be found and read without the directory. Pages of [`PAGE_BYTES`] follow it, each holding
/// `per_page` values: in layout 2 each page ends with its own CRC; in layout 3
/// ([`SKETCH_LAYOUT`]) pages are whole and a CRC page follows each group of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnHead {
    pub kind: ColumnKind,
    pub value_bytes: u16,
    pub per_page: u16,
    pub entries: u64,
    /// An opaque tag naming the values' encoding (zero for ids; the sketch scheme).
    pub scheme: [u8; 8],
    /// [`PAGE_CRC_LAYOUT`] or [`SKETCH_LAYOUT`] (the head's version field).
    pub layout: u32,
}

impl ColumnHead {
    /// A head for `entries` values of `value_bytes` (1..=[`MAX_SKETCH_BYTES`]) each, in the
    /// layout this build writes for `kind`: ids in layout 2, sketches in layout 3.
    pub fn new(kind: ColumnKind, value_bytes: u16, entries: u64, scheme: [u8; 8]) -> Self {
        let layout = match kind {
            ColumnKind::Ids => PAGE_CRC_LAYOUT,
            ColumnKind::Sketches => SKETCH_LAYOUT,
        };
        Self::with_layout(kind, value_bytes, entries, scheme, layout)
    }

    /// [`Self::new`] in `layout`.
    pub fn with_layout(kind: ColumnKind, value_bytes: u16, entries: u64, scheme: [u8; 8], layout: u32) -> Self {
        let room = if layout >= SKETCH_LAYOUT { PAGE_BYTES } else { PAGE_BYTES - PAGE_CRC_BYTES };
        let per_page = (room / u64::from(value_bytes.max(1))) as u16;
        Self { kind, value_bytes, per_page, entries, scheme, layout }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = [0u8; COLUMN_HEAD_BYTES as usize];
        b[C_MAGIC..C_KIND].copy_from_slice(&COLUMN_MAGIC);
        b[C_KIND] = self.kind.id();
        LE::write_u16(&mut b[C_VALUE_BYTES..], self.value_bytes);
        LE::write_u16(&mut b[C_PER_PAGE..], self.per_page);
        LE::write_u64(&mut b[C_ENTRIES..], self.entries);
        b[C_SCHEME..C_VERSION].copy_from_slice(&self.scheme);
        LE::write_u32(&mut b[C_VERSION..], self.layout);
        let crc = crc32fast::hash(&b[..C_CRC]);
        LE::write_u32(&mut b[C_CRC..], crc);
        b.to_vec()
    }

    /// Decodes the column head at absolute offset `at`.
    pub fn decode(bytes: &[u8], at: u64) -> Result<ColumnHead, Fault> {
        let b: &[u8; C_END] = array(bytes, at, "column head")?;
        if b[C_MAGIC..C_KIND] != COLUMN_MAGIC {
            return Err(Fault::at(at, "column head magic is not SIMDXCOL"));
        }
        verify_crc(&b[..C_CRC], LE::read_u32(&b[C_CRC..])).map_err(|m| m.fault(at + C_CRC as u64, Location::default(), "column head"))?;
        let kind = ColumnKind::from_id(b[C_KIND]).ok_or_else(|| Fault::at(at + C_KIND as u64, format!("unknown column kind {}", b[C_KIND])))?;
        let value_bytes = LE::read_u16(&b[C_VALUE_BYTES..]);
        let mut scheme = [0u8; 8];
        scheme.copy_from_slice(&b[C_SCHEME..C_VERSION]);
        let layout = LE::read_u32(&b[C_VERSION..]);
        let known = match kind {
            ColumnKind::Ids => [PAGE_CRC_LAYOUT].contains(&layout),
            ColumnKind::Sketches => [PAGE_CRC_LAYOUT, SKETCH_LAYOUT].contains(&layout),
        };
        if !known {
            return Err(Fault::at(at + C_VERSION as u64, format!("{} column: layout version {layout} is not one this build reads", kind.name())));
        }
        let head = ColumnHead::with_layout(kind, value_bytes, LE::read_u64(&b[C_ENTRIES..]), scheme, layout);
        let valid_width = match kind {
            ColumnKind::Ids => value_bytes == 8,
            ColumnKind::Sketches => (1..=MAX_SKETCH_BYTES as u16).contains(&value_bytes),
        };
        if !valid_width || head.per_page != LE::read_u16(&b[C_PER_PAGE..]) {
            return Err(Fault::at(at + C_VALUE_BYTES as u64, format!("{} column: {value_bytes}-byte values, {} per page, is not a valid layout", kind.name(), LE::read_u16(&b[C_PER_PAGE..]))));
        }
        Ok(head)
    }
}

/// Version 1: where the document ids and their page CRCs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirIds {
    pub ids_offset: u64,
    pub crcs_offset: u64,
    pub crcs_crc: u32,
}

/// What follows the tables in the directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirColumns {
    /// Version 1: the id array and its page CRCs (all zero without ids).
    V1(DirIds),
    /// Version 2: the offsets of the column heads (0 for a column that is absent).
    V2 { ids_head: u64, sketches_head: u64 },
}

/// The directory: written after all data, found through the footer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directory {
    pub entries: u64,
    pub tables: Vec<DirTable>,
    pub columns: DirColumns,
}

impl Directory {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(D_TABLES + self.tables.len() * D_TABLE_ENTRY + D_IDS_ENTRY_V1);
        b.extend_from_slice(&DIR_MAGIC);
        b.extend_from_slice(&self.entries.to_le_bytes());
        b.extend_from_slice(&(self.tables.len() as u16).to_le_bytes());
        b.extend_from_slice(&[0; 6]);
        debug_assert_eq!(b.len(), D_TABLES);
        for t in &self.tables {
            for v in [t.head_offset, t.block_count, t.entries, t.index_offset] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&t.index_crc.to_le_bytes());
            b.extend_from_slice(&[0; 4]);
        }
        match self.columns {
            DirColumns::V1(ids) => {
                b.extend_from_slice(&ids.ids_offset.to_le_bytes());
                b.extend_from_slice(&ids.crcs_offset.to_le_bytes());
                b.extend_from_slice(&ids.crcs_crc.to_le_bytes());
                b.extend_from_slice(&[0; 4]);
            }
            DirColumns::V2 { ids_head, sketches_head } => {
                b.extend_from_slice(&ids_head.to_le_bytes());
                b.extend_from_slice(&sketches_head.to_le_bytes());
            }
        }
        b
    }

    /// Decodes the directory bytes of format `version` found at absolute offset `at` (CRC
    /// already checked).
    pub fn decode(b: &[u8], at: u64, version: u32) -> Result<Directory, Fault> {
        let Some(fixed) = b.first_chunk::<D_TABLES>().filter(|f| f[D_MAGIC..D_ENTRIES] == DIR_MAGIC) else {
            return Err(Fault::at(at, "directory magic is not SIMDXDIR"));
        };
        let n = usize::from(LE::read_u16(&fixed[D_TABLE_COUNT..]));
        let tail_len = if version >= 2 { D_COLUMNS_ENTRY_V2 } else { D_IDS_ENTRY_V1 };
        let want = D_TABLES + n * D_TABLE_ENTRY + tail_len;
        let Some((entries, tail)) = b.get(D_TABLES..).filter(|_| b.len() == want).and_then(|rest| rest.split_at_checked(n * D_TABLE_ENTRY)) else {
            return Err(Fault::at(at, format!("directory is {} bytes, {n} tables need {want}", b.len())));
        };
        let mut tables = Vec::with_capacity(n);
        let mut rest = entries;
        while let Some((e, more)) = rest.split_first_chunk::<D_TABLE_ENTRY>() {
            tables.push(DirTable {
                head_offset: LE::read_u64(&e[0..]),
                block_count: LE::read_u64(&e[8..]),
                entries: LE::read_u64(&e[16..]),
                index_offset: LE::read_u64(&e[24..]),
                index_crc: LE::read_u32(&e[32..]),
            });
            rest = more;
        }
        let u64_at = |i: u64| array::<8>(tail, i, "directory").map(|b| u64::from_le_bytes(*b));
        let columns = if version >= 2 {
            DirColumns::V2 { ids_head: u64_at(0)?, sketches_head: u64_at(8)? }
        } else {
            let crc = array::<4>(tail, 16, "directory").map(|b| u32::from_le_bytes(*b))?;
            DirColumns::V1(DirIds { ids_offset: u64_at(0)?, crcs_offset: u64_at(8)?, crcs_crc: crc })
        };
        Ok(Directory { entries: LE::read_u64(&fixed[D_ENTRIES..]), tables, columns })
    }
}

/// The fixed-size footer at the end of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    pub dir_offset: u64,
    pub dir_len: u32,
    pub dir_crc: u32,
    pub version: u32,
}

impl Footer {
    pub fn encode(&self) -> [u8; FOOTER_BYTES] {
        let mut b = [0u8; FOOTER_BYTES];
        LE::write_u64(&mut b[F_DIR_OFFSET..], self.dir_offset);
        LE::write_u32(&mut b[F_DIR_LEN..], self.dir_len);
        LE::write_u32(&mut b[F_DIR_CRC..], self.dir_crc);
        LE::write_u32(&mut b[F_VERSION..], self.version);
        let crc = crc32fast::hash(&b[..F_CRC]);
        LE::write_u32(&mut b[F_CRC..], crc);
        b[F_MAGIC..].copy_from_slice(&FOOTER_MAGIC);
        b
    }

    /// Decodes the footer from the last [`FOOTER_BYTES`] of the file.
    pub fn decode(bytes: &[u8]) -> Result<Footer, Fault> {
        let Some((before, b)) = bytes.split_last_chunk::<FOOTER_BYTES>() else {
            return Err(Fault::at(0, format!("file is only {} bytes: too short to hold a footer; it was cut short", bytes.len())));
        };
        let at = before.len() as u64;
        if b[F_MAGIC..] != FOOTER_MAGIC {
            return Err(Fault::at(
                at + F_MAGIC as u64,
                "the file does not end with the footer magic SIMDXEND: it was cut short or not completely written",
            ));
        }
        verify_crc(&b[..F_CRC], LE::read_u32(&b[F_CRC..])).map_err(|m| m.fault(at + F_CRC as u64, Location::default(), "footer"))?;
        Ok(Footer {
            dir_offset: LE::read_u64(&b[F_DIR_OFFSET..]),
            dir_len: LE::read_u32(&b[F_DIR_LEN..]),
            dir_crc: LE::read_u32(&b[F_DIR_CRC..]),
            version: LE::read_u32(&b[F_VERSION..]),
        })
    }
}
