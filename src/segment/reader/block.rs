//! Reading one block: [`Segment::block`] checks it against its CRC the first time this open
//! segment reads it, and the cursor and visitor decode it. Every other path to a block's
//! entries goes through here.

use crate::codec::{decode_block, BlockError, Cursor, BLOCK_BYTES};
use crate::error::{Error, Location, Result};
use crate::integrity::{verify_crc, Fault};

use super::table::Table;
use super::Segment;

impl Segment {
    /// The bytes of block `b` of table `t`, after checking them against the block's CRC.
    pub fn block(&self, t: usize, b: u64) -> Result<&[u8]> {
        self.checked_block(t, b).map(|block| block.as_slice())
    }

    /// [`Self::block`] as an array.
    #[inline(always)]
    pub(super) fn checked_block(&self, t: usize, b: u64) -> Result<&[u8; BLOCK_BYTES]> {
        let table = self.table(t)?;
        if b >= table.dir.block_count {
            return Err(Error::InvalidArgument(format!("block {b} out of range (table {t} has {} blocks)", table.dir.block_count)));
        }
        let at = table.block_offset(b);
        let loc = Location { table: Some(table.number), block: Some(b) };
        table.index.check_block(b).map_err(|f| Fault { location: loc, ..f }.into_error(&self.path))?;
        let block = self.array::<BLOCK_BYTES>(at, loc, "block")?;
        if !table.index.is_verified(b) {
            self.verify_block(table, b, block)?;
        }
        Ok(block)
    }

    /// Checks `block`, block `b` of `table`, against its stored CRC, and records that it
    /// matched: the first read of a block through this open segment pays the check, later
    /// reads of the same (immutable) mapped bytes do not.
    #[inline(never)]
    fn verify_block(&self, table: &Table, b: u64, block: &[u8; BLOCK_BYTES]) -> Result<()> {
        let loc = Location { table: Some(table.number), block: Some(b) };
        let stored = self.array::<4>(table.crc_offset(b), loc, "block checksum")?;
        verify_crc(block, u32::from_le_bytes(*stored)).map_err(|m| m.corrupt(&self.path, table.block_offset(b), loc, "block"))?;
        table.index.mark_verified(b);
        Ok(())
    }

    /// Decodes block `b` of table `t` (after its CRC check), calling `visit` with each
    /// permuted entry until it returns false.
    pub fn visit_block(&self, t: usize, b: u64, visit: impl FnMut(u64) -> bool) -> Result<()> {
        self.visit_block_inline(t, b, visit)
    }

    /// [`Self::visit_block`], inlined into the query loop so that it is compiled with the
    /// loop's instruction set.
    #[inline(always)]
    fn visit_block_inline(&self, t: usize, b: u64, visit: impl FnMut(u64) -> bool) -> Result<()> {
        let table = self.table(t)?;
        let block = self.checked_block(t, b)?;
        decode_block(table.codec, &table.code, block, table.block_entries(b), visit)
            .map_err(|e| self.block_error(t, b, e))?;
        Ok(())
    }

    /// A cursor over block `b` of table `t`, after its CRC check; `count` is the block's
    /// entry count as stored in the index (read by the caller, checked here with the
    /// index chunk before it is used).
    #[inline(always)]
    pub(super) fn cursor(&self, t: usize, b: u64, count: u32) -> Result<Cursor<'_>> {
        let table = self.table(t)?;
        let block = self.checked_block(t, b)?;
        Cursor::new(&table.code, block, count).map_err(|e| self.block_error(t, b, e))
    }

    #[cold]
    pub(super) fn block_error(&self, t: usize, b: u64, e: BlockError) -> Error {
        let (offset, number) = self.tables.get(t).map_or((0, t), |table| (table.block_offset(b), table.number));
        self.corrupt(offset, Location { table: Some(number), block: Some(b) }, e.to_string())
    }
}
