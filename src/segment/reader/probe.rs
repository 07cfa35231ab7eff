//! One table's probe, decoded on its own: the entries of a table sharing a (permuted)
//! prefix and within `k` of the query. Used for the tables the interleaved loop (`lanes`)
//! does not take.

use crate::codec::{Codec, DeltaGaps, Gaps, XorGaps};
use crate::error::Result;
use crate::plan::prefix_mask;

use super::table::Table;
use super::Segment;

impl Segment {
    /// Finds the entries of table `t` sharing the query's prefix and within `k`; pushes the
    /// matches, un-permuted, to `found`.
    #[inline(always)]
    pub(super) fn probe(&self, t: usize, fingerprint: u64, k: u32, start: Option<(u64, u32)>, found: &mut Vec<u64>) -> Result<()> {
        let table = self.table(t)?;
        let q = table.design.permutation.apply(fingerprint);
        self.probe_range(t, table, q, q, table.design.prefix_bits, k, start, found)
    }

    /// Pushes the entries of table `t` (`table`) whose top `bits` bits equal `variant`'s and
    /// that are within `k` of `q` (both permuted), un-permuted, to `found`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn probe_range(&self, t: usize, table: &Table, q: u64, variant: u64, bits: u32, k: u32, start: Option<(u64, u32)>, found: &mut Vec<u64>) -> Result<()> {
        match table.codec {
            Codec::Xor => self.probe_with::<XorGaps>(t, table, q, variant, bits, k, start, found),
            Codec::Delta => self.probe_with::<DeltaGaps>(t, table, q, variant, bits, k, start, found),
        }
    }

    /// [`Self::probe_range`] with the table's codec; `start`, when known, is the table's
    /// first block for this query and its entry count as stored.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn probe_with<G: Gaps>(&self, t: usize, table: &Table, q: u64, variant: u64, bits: u32, k: u32, start: Option<(u64, u32)>, found: &mut Vec<u64>) -> Result<()> {
        let permutation = &table.design.permutation;
        let low_bits = 64 - bits;
        let mask = prefix_mask(bits);
        let (lo, hi) = (variant & mask, variant | !mask);
        let (mut b, mut count) = match start {
            Some(start) => start,
            None => {
                let b = table.lower_bound(lo)?;
                (b, table.block_entries(b))
            }
        };
        while b < table.dir.block_count {
            let mut cursor = self.cursor(t, b, count)?;
            // Pass over the entries below the run, then check every entry in it.
            let first = cursor.first();
            let start = if first >= lo { Some(first) } else { cursor.seek::<G>(lo, low_bits).map_err(|e| self.block_error(t, b, e))? };
            if let Some(mut v) = start {
                loop {
                    if v > hi {
                        return Ok(());
                    }
                    if (v ^ q).count_ones() <= k {
                        found.push(permutation.invert(v));
                    }
                    if cursor.remaining() == 0 {
                        break;
                    }
                    v = cursor.next::<G>().map_err(|e| self.block_error(t, b, e))?;
                }
            }
            if table.key(b)? > hi {
                break;
            }
            b += 1;
            count = table.block_entries(b);
        }
        Ok(())
    }
}
