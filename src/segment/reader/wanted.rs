//! The prefix groups a batch join wants from one table: only the blocks holding one are
//! decoded, and inside a block the entries before a wanted group are passed over by the
//! cursor's seek (an XOR code skips them without rebuilding them), so a batch small against
//! a table pays for the groups it lands in, not for the blocks around them.
//!
//! Decoding a block is a serial chain (where an entry starts depends on the one before), so
//! the wanted groups are cut into [`WALKS`] consecutive shares, each walked by its own
//! cursor, and the walks are advanced one entry each per round ([`in_turn`], as the
//! probe's lanes are): the CPU overlaps their chains.

use crate::codec::{Codec, Cursor, DeltaGaps, Gaps, XorGaps, BLOCK_BYTES};
use crate::error::Result;

use super::lanes::in_turn;
use super::table::Table;
use super::Segment;

/// Walks over one table advanced together.
const WALKS: usize = 4;

impl Segment {
    /// Calls `group` with each prefix group of table `t` whose prefix is in `wanted`
    /// (sorted, distinct; the table's prefix between 1 and 63 bits): the prefix's position
    /// in `wanted` and its entries (permuted, sorted, duplicates kept), each group whole and
    /// once, in no set order; a wanted prefix with no entries is not passed.
    pub(crate) fn for_each_wanted_prefix(&self, t: usize, wanted: &[u64], group: impl FnMut(usize, &[u64])) -> Result<()> {
        match self.table(t)?.codec {
            Codec::Xor => self.wanted_with::<XorGaps>(t, wanted, group),
            Codec::Delta => self.wanted_with::<DeltaGaps>(t, wanted, group),
        }
    }

    fn wanted_with<G: Gaps>(&self, t: usize, wanted: &[u64], mut group: impl FnMut(usize, &[u64])) -> Result<()> {
        let table = self.table(t)?;
        let p = table.design.prefix_bits;
        if wanted.is_empty() {
            return Ok(());
        }
        if p == 0 || p >= 64 {
            return Err(crate::Error::InvalidArgument(format!("table {t} has a {p}-bit prefix: no prefix groups to seek")));
        }
        // a batch that lands in most blocks reads the table ahead of each walk, in windows
        let dense = wanted.len() as u64 >= table.dir.block_count / 2;
        let walk = Walk { segment: self, t, table, wanted, shift: 64 - p, dense };
        let per = wanted.len().div_ceil(WALKS);
        let mut cursors: Vec<WalkCursor<'_>> = Vec::with_capacity(WALKS);
        for from in (0..wanted.len()).step_by(per) {
            let b = table.lower_bound(wanted.get(from).map_or(0, |&w| w << walk.shift))?;
            cursors.push(WalkCursor { cursor: None, b, wi: from, end: wanted.len().min(from + per), lo: 0, top: 0, seeking: false, done: false, first: b, asked: 0, buf: Vec::new() });
        }
        in_turn(&mut cursors, |c| c.done, |c| walk.step::<G>(c, &mut group))
    }
}

/// What every walk over one table shares.
struct Walk<'s> {
    segment: &'s Segment,
    t: usize,
    table: &'s Table,
    wanted: &'s [u64],
    /// Bits below the table's prefix.
    shift: u32,
    /// Reading ahead of the walks.
    dense: bool,
}

/// One walk over the wanted groups `wi..end`.
struct WalkCursor<'s> {
    /// The cursor over block `b`; `None` when block `b` is to be entered next.
    cursor: Option<Cursor<'s>>,
    b: u64,
    /// The wanted group sought or being gathered.
    wi: usize,
    end: usize,
    /// While seeking: the first entry of the group sought, and the seek's state.
    lo: u64,
    top: u64,
    seeking: bool,
    done: bool,
    /// The walk's first block, and the first not asked for ahead.
    first: u64,
    asked: u64,
    /// The entries of group `wi` found so far (it may go on in the next block).
    buf: Vec<u64>,
}

impl<'s> Walk<'s> {
    /// Decodes one entry of `c` (or enters its next block) and acts on it.
    #[inline(always)]
    fn step<G: Gaps>(&self, c: &mut WalkCursor<'s>, group: &mut impl FnMut(usize, &[u64])) -> Result<()> {
        let Some(cursor) = c.cursor.as_mut() else { return self.enter(c, group) };
        if cursor.remaining() == 0 {
            // the block is over: a seek goes on where its group would start
            let next = if c.seeking { (c.b + 1).max(self.table.lower_bound(c.lo)?) } else { c.b + 1 };
            c.b = next;
            c.cursor = None;
            return Ok(());
        }
        let v = if c.seeking {
            match cursor.seek_step::<G>(c.lo, self.shift, &mut c.top).map_err(|e| self.segment.block_error(self.t, c.b, e))? {
                Some(v) => v,
                None => return Ok(()),
            }
        } else {
            cursor.next::<G>().map_err(|e| self.segment.block_error(self.t, c.b, e))?
        };
        self.take(c, v, group)
    }

    /// Enters block `c.b` (or ends the walk past the table) and acts on its first entry.
    #[inline(never)]
    fn enter(&self, c: &mut WalkCursor<'s>, group: &mut impl FnMut(usize, &[u64])) -> Result<()> {
        let blocks = self.table.dir.block_count;
        if c.b >= blocks {
            if c.wi < c.end && !c.buf.is_empty() {
                group(c.wi, &c.buf);
            }
            c.done = true;
            return Ok(());
        }
        if self.dense {
            self.segment.walk_hint(self.table.block_offset(0), BLOCK_BYTES as u64, c.b, blocks, c.first, &mut c.asked);
        }
        let mut cursor = self.segment.cursor(self.t, c.b, self.table.block_entries(c.b))?;
        let v = cursor.first();
        c.cursor = Some(cursor);
        self.take(c, v, group)
    }

    /// Acts on entry `v` of `c`'s block: gathers it into the group sought, hands over the
    /// group it ends, or seeks the next wanted group (in this block or another).
    #[inline(always)]
    fn take(&self, c: &mut WalkCursor<'_>, v: u64, group: &mut impl FnMut(usize, &[u64])) -> Result<()> {
        let pv = v >> self.shift;
        let wanted = self.wanted.get(..c.end).unwrap_or_default();
        if !c.buf.is_empty() && wanted.get(c.wi).is_some_and(|&w| w != pv) {
            // the group is over: v is past it
            group(c.wi, &c.buf);
            c.buf.clear();
            c.wi += 1;
        }
        if c.buf.is_empty() {
            while wanted.get(c.wi).is_some_and(|&w| w < pv) {
                c.wi += 1;
            }
            let Some(&w) = wanted.get(c.wi) else {
                c.done = true;
                return Ok(());
            };
            if w > pv {
                // pass over the entries below w in this block (none of its group is here
                // when the block's last entry is below it: no decoding to that end), else go
                // to the block where w's group would start
                c.lo = w << self.shift;
                if self.table.key(c.b)? < c.lo {
                    c.b = (c.b + 1).max(self.table.lower_bound(c.lo)?);
                    c.cursor = None;
                    return Ok(());
                }
                c.seeking = true;
                c.top = c.cursor.as_ref().map_or(0, |cursor| cursor.seek_start(self.shift));
                return Ok(());
            }
        }
        c.seeking = false;
        c.buf.push(v);
        Ok(())
    }
}
