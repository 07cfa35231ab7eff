//! The uncompressed baseline: the paper's permuted tables as plain sorted `Vec<u64>`s (8 bytes
//! per fingerprint per table), with simdex's own design, so the only difference from simdex is
//! the storage: binary search for the query's prefix, then a scan of its run.

use simdex::plan::{Design, TableDesign};

pub struct UncompressedTables {
    tables: Vec<(TableDesign, Vec<u64>)>,
}

impl UncompressedTables {
    /// One table per table of `design`: every fingerprint permuted, then sorted.
    pub fn build(design: &Design, fingerprints: &[u64]) -> Self {
        let tables = design
            .tables()
            .iter()
            .map(|table| {
                let mut values: Vec<u64> = fingerprints.iter().map(|&x| table.permutation.apply(x)).collect();
                values.sort_unstable();
                (table.clone(), values)
            })
            .collect();
        Self { tables }
    }

    pub fn table_count(&self) -> usize {
        self.tables.len()
    }

    /// Every stored fingerprint within `k` bits of `query`, sorted, each once, into `out`.
    pub fn query_into(&self, query: u64, k: u32, out: &mut Vec<u64>) {
        out.clear();
        for (table, values) in &self.tables {
            let permuted = table.permutation.apply(query);
            let mask = table.prefix_mask();
            let prefix = permuted & mask;
            let start = values.partition_point(|&x| x < prefix);
            for &x in &values[start..] {
                if x & mask != prefix {
                    break;
                }
                // A permutation moves bits, so it keeps Hamming distances.
                if (x ^ permuted).count_ones() <= k {
                    out.push(table.permutation.invert(x));
                }
            }
        }
        // A fingerprint that shares several tables' prefixes with the query is found once per table.
        out.sort_unstable();
        out.dedup();
    }
}
