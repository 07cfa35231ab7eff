//! Byte layout of a segment file, mirroring `format-spec/segment.md` field by field: the
//! header, the table head, the directory and the footer, each with an encoder and a
//! decoder. Decoders return a [`Fault`] with the offset of the bad field; they never panic.
//!
//! All integers are little-endian. Offsets below are relative to the structure's start.

use byteorder::{ByteOrder, LittleEndian as LE};

use crate::codec::{Codec, SYMBOLS};
use crate::error::Location;
use crate::integrity::{verify_crc, Fault};

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

/// Rounds `x` up to a multiple of `to`.
pub fn align_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

/// The bytes `offset..offset + len` of `bytes`, or a fault naming what was cut short.
pub fn slice<'a>(bytes: &'a [u8], offset: u64, len: u64, what: &str) -> Result<&'a [u8], Fault> {
    let range = usize::try_from(offset).ok().zip(usize::try_from(len).ok()).and_then(|(o, l)| Some(o..o.checked_add(l)?));
    range.and_then(|r| bytes.get(r)).ok_or_else(|| past_end(bytes, offset, len, what))
}

/// The `N` bytes at `offset` of `bytes` as an array, or a fault naming what was cut short.
pub fn array<'a, const N: usize>(bytes: &'a [u8], offset: u64, what: &str) -> Result<&'a [u8; N], Fault> {
    let field = usize::try_from(offset).ok().and_then(|o| bytes.get(o..)?.first_chunk());
    field.ok_or_else(|| past_end(bytes, offset, N as u64, what))
}

#[cold]
fn past_end(bytes: &[u8], offset: u64, len: u64, what: &str) -> Fault {
    Fault::at(offset, format!("{what} ({len} bytes at offset {offset}) runs past the end of the {}-byte file", bytes.len()))
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
        let padded = align_up(len as u64, ALIGN) as usize;
        let mut b = Vec::with_capacity(padded);
        b.extend_from_slice(&HEADER_MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.extend_from_slice(&(len as u32).to_le_bytes());
        b.extend_from_slice(&[64, self.k, self.levels.len() as u8, if self.has_ids { FLAG_HAS_IDS } else { 0 }]);
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
        let len = u64::from(LE::read_u32(&fixed[H_LEN..]));
        let head = slice(bytes, 0, len, "header")?;
        let Some((body, crc)) = head.split_last_chunk::<4>().filter(|(body, _)| body.len() >= H_LEVELS) else {
            return Err(Fault::at(H_LEN as u64, format!("header length {len} is too small")));
        };
        verify_crc(body, u32::from_le_bytes(*crc)).map_err(|m| m.fault(body.len() as u64, Location::default(), "header"))?;
        if fixed[H_F] != 64 {
            return Err(Fault::at(H_F as u64, format!("fingerprint width {} is not supported (only 64)", fixed[H_F])));
        }
        if fixed[H_FLAGS] & !FLAG_HAS_IDS != 0 {
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
        Ok((Header { k: fixed[H_K], levels, has_ids: fixed[H_FLAGS] & FLAG_HAS_IDS != 0, tables }, len))
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
        let mut b = [0u8; TABLE_HEAD_BYTES as usize];
        b[T_MAGIC..T_INDEX].copy_from_slice(&TABLE_MAGIC);
        LE::write_u16(&mut b[T_INDEX..], self.index);
        b[T_CODEC] = self.codec.id();
        b[T_PREFIX] = self.prefix_bits;
        b[T_LENGTHS..T_RESERVED].copy_from_slice(&self.lengths);
        let crc = crc32fast::hash(&b[..T_CRC]);
        LE::write_u32(&mut b[T_CRC..], crc);
        b.to_vec()
    }

    /// Decodes the table head at absolute offset `at`.
    pub fn decode(bytes: &[u8], at: u64) -> Result<TableHead, Fault> {
        let b: &[u8; T_END] = array(bytes, at, "table head")?;
        verify_crc(&b[..T_CRC], LE::read_u32(&b[T_CRC..])).map_err(|m| m.fault(at + T_CRC as u64, Location::default(), "table head"))?;
        if b[T_MAGIC..T_INDEX] != TABLE_MAGIC {
            return Err(Fault::at(at, "table head magic is not SIMDXTBL"));
        }
        let codec = Codec::from_id(b[T_CODEC])
            .ok_or_else(|| Fault::at(at + T_CODEC as u64, format!("unknown codec id {}", b[T_CODEC])))?;
        let mut lengths = [0u8; SYMBOLS];
        lengths.copy_from_slice(&b[T_LENGTHS..T_RESERVED]);
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
        let mut b = Vec::with_capacity(D_TABLES + self.tables.len() * D_TABLE_ENTRY + D_IDS_ENTRY);
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
        b.extend_from_slice(&self.ids.ids_offset.to_le_bytes());
        b.extend_from_slice(&self.ids.crcs_offset.to_le_bytes());
        b.extend_from_slice(&self.ids.crcs_crc.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b
    }

    /// Decodes the directory bytes found at absolute offset `at` (CRC already checked).
    pub fn decode(b: &[u8], at: u64) -> Result<Directory, Fault> {
        let Some(fixed) = b.first_chunk::<D_TABLES>().filter(|f| f[D_MAGIC..D_ENTRIES] == DIR_MAGIC) else {
            return Err(Fault::at(at, "directory magic is not SIMDXDIR"));
        };
        let n = usize::from(LE::read_u16(&fixed[D_TABLE_COUNT..]));
        let want = D_TABLES + n * D_TABLE_ENTRY + D_IDS_ENTRY;
        let Some((entries, ids)) = b.get(D_TABLES..).and_then(|rest| rest.split_last_chunk::<D_IDS_ENTRY>()).filter(|_| b.len() == want) else {
            return Err(Fault::at(at, format!("directory is {} bytes, {n} tables need {want}", b.len())));
        };
        let mut tables = Vec::with_capacity(n);
        let mut rest = entries;
        while let Some((e, tail)) = rest.split_first_chunk::<D_TABLE_ENTRY>() {
            tables.push(DirTable {
                head_offset: LE::read_u64(&e[0..]),
                block_count: LE::read_u64(&e[8..]),
                entries: LE::read_u64(&e[16..]),
                index_offset: LE::read_u64(&e[24..]),
                index_crc: LE::read_u32(&e[32..]),
            });
            rest = tail;
        }
        let ids = DirIds {
            ids_offset: LE::read_u64(&ids[0..]),
            crcs_offset: LE::read_u64(&ids[8..]),
            crcs_crc: LE::read_u32(&ids[16..]),
        };
        Ok(Directory { entries: LE::read_u64(&fixed[D_ENTRIES..]), tables, ids })
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
