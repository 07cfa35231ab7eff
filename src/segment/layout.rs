//! Byte layout of a segment file, mirroring `format-spec/segment.md` field by field: the
//! header, the table head, the directory and the footer, each with an encoder and a
//! decoder. Decoders return a [`Fault`] with the offset of the bad field; they never panic.
//!
//! All integers are little-endian. Offsets below are relative to the structure's start.

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::codec::{Codec, SYMBOLS};
use crate::error::Location;

/// Format version written by this build, and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;
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

// ---- table head ---------------------------------------------------------------------
/// First bytes of every table section.
pub const TABLE_MAGIC: [u8; 8] = *b"SIMDXTBL";
pub const T_MAGIC: usize = 0;
pub const T_INDEX: usize = T_MAGIC + 8;
pub const T_CODEC: usize = T_INDEX + 2;
pub const T_PREFIX: usize = T_CODEC + 1;
pub const T_LENGTHS: usize = T_PREFIX + 1;
pub const T_RESERVED: usize = T_LENGTHS + SYMBOLS;
pub const T_CRC: usize = T_RESERVED + 3;
pub const T_END: usize = T_CRC + 4;
/// The table head occupies this many bytes (zero-padded) so blocks start aligned.
pub const TABLE_HEAD_BYTES: u64 = ALIGN;

// ---- block index ----------------------------------------------------------------------
/// Bytes of block index per block: key (8), entry count (2), CRC-32 (4).
pub const INDEX_BYTES_PER_BLOCK: u64 = 8 + 2 + 4;

// ---- document ids -------------------------------------------------------------------
/// Document ids per checksummed page.
pub const IDS_PER_PAGE: u64 = 128;

// ---- directory ----------------------------------------------------------------------
pub const DIR_MAGIC: [u8; 8] = *b"SIMDXDIR";
pub const D_MAGIC: usize = 0;
pub const D_ENTRIES: usize = D_MAGIC + 8;
pub const D_TABLE_COUNT: usize = D_ENTRIES + 8;
pub const D_RESERVED: usize = D_TABLE_COUNT + 2;
pub const D_TABLES: usize = D_RESERVED + 6;
/// Per table: head offset, block count, entries, index offset (u64 each), index CRC, reserved.
pub const D_TABLE_ENTRY: usize = 8 + 8 + 8 + 8 + 4 + 4;
/// After the tables: ids offset, id-page CRCs offset (u64 each), CRC of the id-page CRCs, reserved.
pub const D_IDS_ENTRY: usize = 8 + 8 + 4 + 4;

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

/// A damaged field: where it is and what is wrong. Offsets are absolute in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Byte offset in the file.
    pub offset: u64,
    /// Table and block.
    pub location: Location,
    /// What failed.
    pub detail: String,
}

impl Fault {
    pub fn at(offset: u64, detail: impl Into<String>) -> Self {
        Self { offset, location: Location::default(), detail: detail.into() }
    }

    pub fn in_table(mut self, table: usize) -> Self {
        self.location.table = Some(table);
        self
    }

    pub fn in_block(mut self, block: u64) -> Self {
        self.location.block = Some(block);
        self
    }
}

/// Rounds `x` up to a multiple of `to`.
pub fn align_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

/// The bytes `offset..offset + len` of `bytes`, or a fault naming what was cut short.
pub fn slice<'a>(bytes: &'a [u8], offset: u64, len: u64, what: &str) -> Result<&'a [u8], Fault> {
    let end = offset.checked_add(len).filter(|&e| e <= bytes.len() as u64);
    match end {
        Some(end) => Ok(&bytes[offset as usize..end as usize]),
        None => Err(Fault::at(
            offset,
            format!("{what} ({len} bytes at offset {offset}) runs past the end of the {}-byte file", bytes.len()),
        )),
    }
}

/// Checks the CRC-32 of `data` against `stored`.
pub fn check_crc(data: &[u8], stored: u32, offset: u64, what: &str) -> Result<(), Fault> {
    let actual = crc32fast::hash(data);
    if actual == stored {
        Ok(())
    } else {
        Err(Fault::at(offset, format!("{what} checksum mismatch (stored {stored:#010x}, computed {actual:#010x})")))
    }
}

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
    pub k: u8,
    pub levels: Vec<u8>,
    pub has_ids: bool,
    pub tables: Vec<HeaderTable>,
}

impl Header {
    /// Encoded length including the CRC, before padding.
    pub fn encoded_len(&self) -> usize {
        H_LEVELS + self.levels.len() + self.tables.len() * H_TABLE_ENTRY + 4
    }

    /// The header bytes, zero-padded to [`ALIGN`].
    pub fn encode(&self) -> Vec<u8> {
        let len = self.encoded_len();
        let mut b = vec![0u8; align_up(len as u64, ALIGN) as usize];
        b[H_MAGIC..H_MAGIC + 8].copy_from_slice(&HEADER_MAGIC);
        LE::write_u32(&mut b[H_VERSION..], FORMAT_VERSION);
        LE::write_u32(&mut b[H_LEN..], len as u32);
        b[H_F] = 64;
        b[H_K] = self.k;
        b[H_LEVEL_COUNT] = self.levels.len() as u8;
        b[H_FLAGS] = if self.has_ids { FLAG_HAS_IDS } else { 0 };
        LE::write_u16(&mut b[H_TABLE_COUNT..], self.tables.len() as u16);
        b[H_LEVELS..H_LEVELS + self.levels.len()].copy_from_slice(&self.levels);
        let mut at = H_LEVELS + self.levels.len();
        for t in &self.tables {
            b[at] = t.prefix_bits;
            b[at + 1] = t.codec.id();
            b[at + 2..at + 2 + 64].copy_from_slice(&t.order);
            at += H_TABLE_ENTRY;
        }
        let crc = crc32fast::hash(&b[..at]);
        LE::write_u32(&mut b[at..], crc);
        b
    }

    /// Decodes the header at the start of `bytes`. Magic and version problems are reported
    /// by the caller, which knows the path; this checks everything after them.
    pub fn decode(bytes: &[u8]) -> Result<(Header, u64), Fault> {
        let fixed = slice(bytes, 0, H_LEVELS as u64, "header")?;
        let len = LE::read_u32(&fixed[H_LEN..]) as u64;
        let head = slice(bytes, 0, len, "header")?;
        if (len as usize) < H_LEVELS + 4 {
            return Err(Fault::at(H_LEN as u64, format!("header length {len} is too small")));
        }
        let crc_at = len as usize - 4;
        check_crc(&head[..crc_at], LE::read_u32(&head[crc_at..]), crc_at as u64, "header")?;
        if head[H_F] != 64 {
            return Err(Fault::at(H_F as u64, format!("fingerprint width {} is not supported (only 64)", head[H_F])));
        }
        if head[H_FLAGS] & !FLAG_HAS_IDS != 0 {
            return Err(Fault::at(H_FLAGS as u64, format!("unknown flags {:#04x}", head[H_FLAGS])));
        }
        let levels_n = head[H_LEVEL_COUNT] as usize;
        let tables_n = LE::read_u16(&head[H_TABLE_COUNT..]) as usize;
        if H_LEVELS + levels_n + tables_n * H_TABLE_ENTRY + 4 != len as usize {
            return Err(Fault::at(
                H_LEN as u64,
                format!("header length {len} does not fit {levels_n} levels and {tables_n} tables"),
            ));
        }
        let levels = head[H_LEVELS..H_LEVELS + levels_n].to_vec();
        let mut tables = Vec::with_capacity(tables_n);
        let mut at = H_LEVELS + levels_n;
        for i in 0..tables_n {
            let codec = Codec::from_id(head[at + 1])
                .ok_or_else(|| Fault::at(at as u64 + 1, format!("unknown codec id {}", head[at + 1])).in_table(i))?;
            let mut order = [0u8; 64];
            order.copy_from_slice(&head[at + 2..at + 66]);
            tables.push(HeaderTable { prefix_bits: head[at], codec, order });
            at += H_TABLE_ENTRY;
        }
        Ok((Header { k: head[H_K], levels, has_ids: head[H_FLAGS] & FLAG_HAS_IDS != 0, tables }, len))
    }
}

/// The head of one table section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableHead {
    pub index: u16,
    pub codec: Codec,
    pub prefix_bits: u8,
    pub lengths: [u8; SYMBOLS],
}

impl TableHead {
    /// [`TABLE_HEAD_BYTES`] bytes: the fields, their CRC, zero padding.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; TABLE_HEAD_BYTES as usize];
        b[T_MAGIC..T_MAGIC + 8].copy_from_slice(&TABLE_MAGIC);
        LE::write_u16(&mut b[T_INDEX..], self.index);
        b[T_CODEC] = self.codec.id();
        b[T_PREFIX] = self.prefix_bits;
        b[T_LENGTHS..T_LENGTHS + SYMBOLS].copy_from_slice(&self.lengths);
        let crc = crc32fast::hash(&b[..T_CRC]);
        LE::write_u32(&mut b[T_CRC..], crc);
        b
    }

    /// Decodes the table head at absolute offset `at`.
    pub fn decode(bytes: &[u8], at: u64) -> Result<TableHead, Fault> {
        let b = slice(bytes, at, T_END as u64, "table head")?;
        check_crc(&b[..T_CRC], LE::read_u32(&b[T_CRC..]), at + T_CRC as u64, "table head")?;
        if b[T_MAGIC..T_MAGIC + 8] != TABLE_MAGIC {
            return Err(Fault::at(at, "table head magic is not SIMDXTBL"));
        }
        let codec = Codec::from_id(b[T_CODEC])
            .ok_or_else(|| Fault::at(at + T_CODEC as u64, format!("unknown codec id {}", b[T_CODEC])))?;
        let mut lengths = [0u8; SYMBOLS];
        lengths.copy_from_slice(&b[T_LENGTHS..T_LENGTHS + SYMBOLS]);
        Ok(TableHead { index: LE::read_u16(&b[T_INDEX..]), codec, prefix_bits: b[T_PREFIX], lengths })
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
}

/// Where the document ids are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirIds {
    pub ids_offset: u64,
    pub crcs_offset: u64,
    pub crcs_crc: u32,
}

/// The directory: written after all data, found through the footer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directory {
    pub entries: u64,
    pub tables: Vec<DirTable>,
    pub ids: DirIds,
}

impl Directory {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; D_TABLES + self.tables.len() * D_TABLE_ENTRY + D_IDS_ENTRY];
        b[D_MAGIC..D_MAGIC + 8].copy_from_slice(&DIR_MAGIC);
        LE::write_u64(&mut b[D_ENTRIES..], self.entries);
        LE::write_u16(&mut b[D_TABLE_COUNT..], self.tables.len() as u16);
        let mut at = D_TABLES;
        for t in &self.tables {
            LE::write_u64(&mut b[at..], t.head_offset);
            LE::write_u64(&mut b[at + 8..], t.block_count);
            LE::write_u64(&mut b[at + 16..], t.entries);
            LE::write_u64(&mut b[at + 24..], t.index_offset);
            LE::write_u32(&mut b[at + 32..], t.index_crc);
            at += D_TABLE_ENTRY;
        }
        LE::write_u64(&mut b[at..], self.ids.ids_offset);
        LE::write_u64(&mut b[at + 8..], self.ids.crcs_offset);
        LE::write_u32(&mut b[at + 16..], self.ids.crcs_crc);
        b
    }

    /// Decodes the directory bytes found at absolute offset `at` (CRC already checked).
    pub fn decode(b: &[u8], at: u64) -> Result<Directory, Fault> {
        if b.len() < D_TABLES || b[D_MAGIC..D_MAGIC + 8] != DIR_MAGIC {
            return Err(Fault::at(at, "directory magic is not SIMDXDIR"));
        }
        let n = LE::read_u16(&b[D_TABLE_COUNT..]) as usize;
        if b.len() != D_TABLES + n * D_TABLE_ENTRY + D_IDS_ENTRY {
            return Err(Fault::at(at, format!("directory is {} bytes, {n} tables need {}", b.len(), D_TABLES + n * D_TABLE_ENTRY + D_IDS_ENTRY)));
        }
        let mut tables = Vec::with_capacity(n);
        let mut p = D_TABLES;
        for _ in 0..n {
            tables.push(DirTable {
                head_offset: LE::read_u64(&b[p..]),
                block_count: LE::read_u64(&b[p + 8..]),
                entries: LE::read_u64(&b[p + 16..]),
                index_offset: LE::read_u64(&b[p + 24..]),
                index_crc: LE::read_u32(&b[p + 32..]),
            });
            p += D_TABLE_ENTRY;
        }
        let ids = DirIds {
            ids_offset: LE::read_u64(&b[p..]),
            crcs_offset: LE::read_u64(&b[p + 8..]),
            crcs_crc: LE::read_u32(&b[p + 16..]),
        };
        Ok(Directory { entries: LE::read_u64(&b[D_ENTRIES..]), tables, ids })
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

    /// Decodes the footer from the last [`FOOTER_BYTES`] of the file (`file_len` long).
    pub fn decode(b: &[u8], file_len: u64) -> Result<Footer, Fault> {
        let at = file_len - FOOTER_BYTES as u64;
        if b[F_MAGIC..] != FOOTER_MAGIC {
            return Err(Fault::at(
                at + F_MAGIC as u64,
                "the file does not end with the footer magic SIMDXEND: it was cut short or not completely written",
            ));
        }
        check_crc(&b[..F_CRC], LE::read_u32(&b[F_CRC..]), at + F_CRC as u64, "footer")?;
        Ok(Footer {
            dir_offset: LE::read_u64(&b[F_DIR_OFFSET..]),
            dir_len: LE::read_u32(&b[F_DIR_LEN..]),
            dir_crc: LE::read_u32(&b[F_DIR_CRC..]),
            version: LE::read_u32(&b[F_VERSION..]),
        })
    }
}
