//! Clusters from pairs: union-find over document numbers, and the grouping of near-duplicate
//! pairs into clusters (PAPER.md section 3: near-duplicate pairs are grouped with union-find).
//!
//! Knows nothing of fingerprints or files: documents are `0..n`, pairs are `(a, b)`.

/// Disjoint sets over `0..n` with path halving and union by size.
#[derive(Debug, Clone)]
pub struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    /// `n` singleton sets.
    ///
    /// # Panics
    /// If `n` exceeds `u32::MAX` (document numbers are u32).
    pub fn new(n: usize) -> Self {
        assert!(u32::try_from(n).is_ok(), "at most u32::MAX elements");
        UnionFind {
            parent: (0..n as u32).collect(),
            size: vec![1; n],
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.parent.is_empty()
    }

    /// The representative of `x`'s set.
    pub fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grandparent = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grandparent;
            x = grandparent;
        }
        x
    }

    /// Merges the sets of `a` and `b`; returns whether they were apart.
    pub fn union(&mut self, a: u32, b: u32) -> bool {
        let (mut ra, mut rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        if self.size[ra as usize] < self.size[rb as usize] {
            std::mem::swap(&mut ra, &mut rb);
        }
        self.parent[rb as usize] = ra;
        self.size[ra as usize] += self.size[rb as usize];
        true
    }

    /// The sets with more than one element, each sorted ascending; largest first, ties by
    /// smallest member.
    pub fn clusters(&mut self) -> Vec<Vec<u32>> {
        let n = self.len() as u32;
        let mut by_root: std::collections::HashMap<u32, Vec<u32>> =
            std::collections::HashMap::new();
        for x in 0..n {
            let r = self.find(x);
            if self.size[r as usize] > 1 {
                by_root.entry(r).or_default().push(x);
            }
        }
        let mut out: Vec<Vec<u32>> = by_root.into_values().collect();
        out.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
        out
    }
}

/// Groups `n` documents into clusters given the pairs that are near-duplicates.
pub fn clusters_from_pairs(n: usize, pairs: impl IntoIterator<Item = (u32, u32)>) -> Vec<Vec<u32>> {
    let mut uf = UnionFind::new(n);
    for (a, b) in pairs {
        uf.union(a, b);
    }
    uf.clusters()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn groups_transitively() {
        let c = clusters_from_pairs(7, [(0, 1), (5, 6), (1, 2), (6, 4)]);
        assert_eq!(c, vec![vec![0, 1, 2], vec![4, 5, 6]]);
        assert!(clusters_from_pairs(3, []).is_empty());
    }

    proptest! {
        // oracle: connected components by repeated relabelling
        #[test]
        fn matches_naive_components(pairs in proptest::collection::vec((0u32..30, 0u32..30), 0..40)) {
            let mut label: Vec<u32> = (0..30).collect();
            loop {
                let mut changed = false;
                for &(a, b) in &pairs {
                    let m = label[a as usize].min(label[b as usize]);
                    for x in [a, b] {
                        if label[x as usize] != m { label[x as usize] = m; changed = true; }
                    }
                }
                if !changed { break; }
            }
            let mut expect: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
            for x in 0..30u32 { expect.entry(label[x as usize]).or_default().push(x); }
            let mut expect: Vec<Vec<u32>> = expect.into_values().filter(|c| c.len() > 1).collect();
            expect.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
            prop_assert_eq!(clusters_from_pairs(30, pairs), expect);
        }
    }
}
