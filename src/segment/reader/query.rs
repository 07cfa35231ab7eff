//! A query's answer: [`Segment::query`] picks the probe (the design's tables, multi-probe
//! above the design's k, or a scan of table 0), runs it with the decoding loop compiled for
//! the CPU's instruction set, and joins the matches with their document ids.

use crate::error::Result;
use crate::plan::{ProbePlan, MAX_K};
use crate::query::{finish_matches, Match, QueryOptions};

use super::Segment;

impl Segment {
    /// All stored fingerprints within `options.k` bits of `fingerprint`, each once, sorted
    /// by distance, fingerprint and id.
    pub fn query(&self, fingerprint: u64, options: &QueryOptions) -> Result<Vec<Match>> {
        let mut out = Vec::new();
        self.query_into(fingerprint, options, &mut out)?;
        Ok(out)
    }

    /// Appends the matches of one query to `out` (cleared first), each once, sorted by
    /// distance, fingerprint and id.
    pub fn query_into(&self, fingerprint: u64, options: &QueryOptions, out: &mut Vec<Match>) -> Result<()> {
        out.clear();
        options.check_against(self.design.k())?;
        let mut found: Vec<u64> = Vec::new();
        if options.k > self.design.k() {
            // Above the design's k: multi-probe (`plan::ProbePlan`), or a scan where the
            // plan says a scan is cheaper or k is above what a plan covers.
            let plan = if options.k <= MAX_K { Some(ProbePlan::cached(&self.design, options.k, self.entries)?) } else { None };
            match plan {
                Some(plan) if options.always_probe || !plan.prefers_scan() => self.multi_probe(fingerprint, &plan, &mut found)?,
                _ => return self.scan_into(fingerprint, options.k, out),
            }
        } else {
            self.probe_all(fingerprint, options.k, &mut found)?;
        }
        found.sort_unstable();
        found.dedup();
        for fp in found {
            let distance = (fp ^ fingerprint).count_ones();
            if self.ids.is_some() {
                self.ids_of(fp, |id| out.push(Match::new(fp, distance, Some(id))))?;
            } else {
                out.push(Match::new(fp, distance, None));
            }
        }
        finish_matches(out);
        Ok(())
    }

    /// Probes every table, with the decoding loop compiled for the best instruction set the
    /// CPU has: on x86-64 with BMI2 and POPCNT, variable shifts and population counts are
    /// single instructions, which makes decoding about 20% faster than the portable build.
    fn probe_all(&self, fingerprint: u64, k: u32, found: &mut Vec<u64>) -> Result<()> {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_bmi2_popcnt() {
            // SAFETY: `probe_all_bmi2` needs only BMI1, BMI2 and POPCNT, which
            // `has_bmi2_popcnt` has just confirmed this CPU supports. Exercised by every
            // query test on such CPUs; `tests::dispatched_and_portable_probes_agree`
            // checks it against the portable loop.
            return unsafe { self.probe_all_bmi2(fingerprint, k, found) };
        }
        self.probe_all_portable(fingerprint, k, found)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi1,bmi2,popcnt")]
    fn probe_all_bmi2(&self, fingerprint: u64, k: u32, found: &mut Vec<u64>) -> Result<()> {
        self.probe_all_portable(fingerprint, k, found)
    }

    /// Answers a distance above the design's with the prefix variants of `plan`, with the
    /// decoding loop compiled as in [`Self::probe_all`].
    fn multi_probe(&self, fingerprint: u64, plan: &ProbePlan, found: &mut Vec<u64>) -> Result<()> {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::has_bmi2_popcnt() {
            // SAFETY: as in `probe_all`: `has_bmi2_popcnt` has just confirmed BMI1, BMI2
            // and POPCNT. Checked against brute force by the multi-probe proptests.
            return unsafe { self.multi_probe_bmi2(fingerprint, plan, found) };
        }
        self.multi_probe_portable(fingerprint, plan, found)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "bmi1,bmi2,popcnt")]
    fn multi_probe_bmi2(&self, fingerprint: u64, plan: &ProbePlan, found: &mut Vec<u64>) -> Result<()> {
        self.multi_probe_portable(fingerprint, plan, found)
    }

    /// Calls `each` with every document id stored under fingerprint `fp` (table 0 is the
    /// identity, and ids follow its order).
    fn ids_of(&self, fp: u64, mut each: impl FnMut(u64)) -> Result<()> {
        let ordinals = self.ordinals_of(fp)?;
        if ordinals.is_empty() {
            return Err(self.missing_from_table0(fp));
        }
        for ordinal in ordinals {
            each(self.doc_id(ordinal)?);
        }
        Ok(())
    }

    /// Exact answer for any `k` by scanning table 0.
    fn scan_into(&self, fingerprint: u64, k: u32, out: &mut Vec<Match>) -> Result<()> {
        let mut ordinal = 0u64;
        let mut hits: Vec<(u64, u64)> = Vec::new();
        for b in 0..self.tables.first().map_or(0, |t| t.dir.block_count) {
            self.visit_block(0, b, |v| {
                if (v ^ fingerprint).count_ones() <= k {
                    hits.push((v, ordinal));
                }
                ordinal += 1;
                true
            })?;
        }
        for (fp, ordinal) in hits {
            let doc_id = if self.ids.is_some() { Some(self.doc_id(ordinal)?) } else { None };
            out.push(Match::new(fp, (fp ^ fingerprint).count_ones(), doc_id));
        }
        finish_matches(out);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use crate::segment::{build_segment, BuildOptions, Segment};
    use crate::storage::FsStorage;

    #[test]
    fn dispatched_and_portable_probes_agree() {
        let mut x = 77u64;
        let fps: Vec<u64> = (0..20_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 3 == 0 { x & 0xffff_0000_0000_ffff } else { x }
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("simdex-dispatch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sdx");
        build_segment(&FsStorage, &path, &fps, None, &BuildOptions::default()).unwrap();
        let seg = Segment::open(&path).unwrap();
        for (i, &f) in fps.iter().enumerate().step_by(97) {
            let q = f ^ (1 << (i % 64)) ^ (1 << ((i * 7) % 64));
            let (mut a, mut b) = (Vec::new(), Vec::new());
            seg.probe_all(q, 3, &mut a).unwrap();
            seg.probe_all_portable(q, 3, &mut b).unwrap();
            a.sort_unstable();
            b.sort_unstable();
            assert!(!a.is_empty());
            assert_eq!(a, b);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
