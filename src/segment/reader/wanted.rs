//! The prefix groups a batch join wants from one table: only the blocks holding one are
//! decoded, and inside a block the entries before a wanted group are passed over by the
//! cursor's seek (an XOR code skips them without rebuilding them), so a batch small against
//! a table pays for the groups it lands in, not for the blocks around them.

use crate::codec::{Codec, DeltaGaps, Gaps, XorGaps, BLOCK_BYTES};
use crate::error::Result;

use super::Segment;

impl Segment {
    /// Calls `group` with each prefix group of table `t` whose prefix is in `wanted`
    /// (sorted, distinct; the table's prefix between 1 and 63 bits): the prefix and its
    /// entries (permuted, sorted, duplicates kept), each group whole and once, in order;
    /// a wanted prefix with no entries is not passed.
    pub(crate) fn for_each_wanted_prefix(&self, t: usize, wanted: &[u64], group: impl FnMut(u64, &[u64])) -> Result<()> {
        match self.table(t)?.codec {
            Codec::Xor => self.wanted_with::<XorGaps>(t, wanted, group),
            Codec::Delta => self.wanted_with::<DeltaGaps>(t, wanted, group),
        }
    }

    fn wanted_with<G: Gaps>(&self, t: usize, wanted: &[u64], mut group: impl FnMut(u64, &[u64])) -> Result<()> {
        let table = self.table(t)?;
        let p = table.design.prefix_bits;
        let Some(&first) = wanted.first() else { return Ok(()) };
        if p == 0 || p >= 64 {
            return Err(crate::Error::InvalidArgument(format!("table {t} has a {p}-bit prefix: no prefix groups to seek")));
        }
        let (shift, blocks) = (64 - p, table.dir.block_count);
        // the entries of wanted[wi] found so far (non-empty: its group may go on in block b)
        let mut buf: Vec<u64> = Vec::new();
        let mut wi = 0usize;
        let mut b = table.lower_bound(first << shift)?;
        // a batch that lands in most blocks reads the table ahead of the walk, in windows
        let (dense, mut asked) = (wanted.len() as u64 >= blocks / 2, 0u64);
        let start = table.block_offset(0);
        'blocks: while b < blocks {
            if dense {
                self.walk_hint(start, BLOCK_BYTES as u64, b, blocks, &mut asked);
            }
            let mut cursor = self.cursor(t, b, table.block_entries(b))?;
            let mut v = cursor.first();
            loop {
                let pv = v >> shift;
                if let Some(&w) = wanted.get(wi).filter(|&&w| !buf.is_empty() && w != pv) {
                    // the group is over: v is past it
                    group(w, &buf);
                    buf.clear();
                    wi += 1;
                }
                if buf.is_empty() {
                    while wanted.get(wi).is_some_and(|&w| w < pv) {
                        wi += 1;
                    }
                    let Some(&w) = wanted.get(wi) else { return Ok(()) };
                    if w > pv {
                        // pass over the entries below w in this block (none of its group is
                        // here when the block's last entry is below it: no decoding to that
                        // end), else go to the block where w's group would start
                        if table.key(b)? < w << shift {
                            b = (b + 1).max(table.lower_bound(w << shift)?);
                            continue 'blocks;
                        }
                        match cursor.seek::<G>(w << shift, shift).map_err(|e| self.block_error(t, b, e))? {
                            Some(x) => v = x,
                            None => {
                                b = (b + 1).max(table.lower_bound(w << shift)?);
                                continue 'blocks;
                            }
                        }
                        continue;
                    }
                }
                buf.push(v);
                if cursor.remaining() == 0 {
                    b += 1;
                    continue 'blocks;
                }
                v = cursor.next::<G>().map_err(|e| self.block_error(t, b, e))?;
            }
        }
        if let Some(&w) = wanted.get(wi).filter(|_| !buf.is_empty()) {
            group(w, &buf);
        }
        Ok(())
    }
}
