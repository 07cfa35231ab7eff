//! A query's answer: [`Segment::query`] picks the probe (the design's tables, multi-probe
//! above the design's k, or a scan of table 0), runs it with the decoding loop compiled for
//! the CPU's instruction set, and joins the matches with their document ids.

use crate::error::Result;
use crate::plan::{ProbePlan, MAX_K};
use crate::query::{finish_matches, Match, QueryOptions};

use super::lanes::probe_segments_portable;
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
        self.finish_found(fingerprint, &mut found, out)
    }

    /// `out` (cleared by the caller) gets the entries `found` (un-permuted, possibly
    /// repeated) with their document ids, each once, sorted by distance, fingerprint and id.
    fn finish_found(&self, fingerprint: u64, found: &mut Vec<u64>, out: &mut Vec<Match>) -> Result<()> {
        found.sort_unstable();
        found.dedup();
        for &fp in found.iter() {
            let distance = (fp ^ fingerprint).count_ones();
            if self.ids.is_some() {
                self.ids_of(fp, |id| out.push(Match { distance, fingerprint: fp, doc_id: Some(id) }))?;
            } else {
                out.push(Match { distance, fingerprint: fp, doc_id: None });
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

    /// Queries several segments in one pass: `outs` gets one list per segment, each what
    /// [`Self::query_into`] gives for that segment. Within every segment's design k the
    /// tables of all the segments are probed together (their blocks found and touched
    /// before any is decoded, then decoded in one interleaved loop), so the memory latency
    /// of the live set's segments overlaps instead of adding up; above it, or for one
    /// segment, each segment is queried on its own.
    pub fn query_each_into(segments: &[&Segment], fingerprint: u64, options: &QueryOptions, outs: &mut Vec<Vec<Match>>) -> Result<()> {
        outs.resize_with(segments.len(), Vec::new);
        outs.truncate(segments.len());
        if segments.len() < 2 || segments.iter().any(|s| options.k > s.design.k()) {
            for (seg, out) in segments.iter().zip(outs.iter_mut()) {
                seg.query_into(fingerprint, options, out)?;
            }
            return Ok(());
        }
        let mut found: Vec<Vec<u64>> = vec![Vec::new(); segments.len()];
        probe_segments(segments, fingerprint, options.k, &mut found)?;
        for ((seg, out), found) in segments.iter().zip(outs.iter_mut()).zip(found.iter_mut()) {
            out.clear();
            seg.finish_found(fingerprint, found, out)?;
        }
        Ok(())
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
            out.push(Match { distance: (fp ^ fingerprint).count_ones(), fingerprint: fp, doc_id });
        }
        finish_matches(out);
        Ok(())
    }
}

/// [`probe_segments_portable`] with the decoding loop compiled for the best instruction set
/// the CPU has, as [`Segment::probe_all`].
fn probe_segments(segments: &[&Segment], fingerprint: u64, k: u32, found: &mut [Vec<u64>]) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::has_bmi2_popcnt() {
        // SAFETY: `probe_segments_bmi2` needs only BMI1, BMI2 and POPCNT, which
        // `has_bmi2_popcnt` has just confirmed this CPU supports. Exercised by every query
        // of an index with several segments on such CPUs; `tests::segments_probed_together_
        // answer_as_apart` checks it against each segment queried alone.
        return unsafe { probe_segments_bmi2(segments, fingerprint, k, found) };
    }
    probe_segments_portable(segments, fingerprint, k, found)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "bmi1,bmi2,popcnt")]
fn probe_segments_bmi2(segments: &[&Segment], fingerprint: u64, k: u32, found: &mut [Vec<u64>]) -> Result<()> {
    probe_segments_portable(segments, fingerprint, k, found)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use crate::query::QueryOptions;
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

    #[test]
    fn segments_probed_together_answer_as_apart() {
        let mut x = 99u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let dir = std::env::temp_dir().join(format!("simdex-together-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Segments of different sizes (so different designs), one sharing fingerprints with
        // another, and one of design k = 4.
        // Enough of them that their tables outnumber the interleaved lanes (so they are
        // probed in groups).
        let mut sizes = vec![(30_000usize, 3u32), (2_000, 3), (500, 3), (9_000, 4), (1, 3)];
        sizes.extend((0..10).map(|i| (700 + 100 * i, 3)));
        let mut all: Vec<Vec<u64>> = Vec::new();
        let mut segments = Vec::new();
        for (i, &(n, k)) in sizes.iter().enumerate() {
            let mut fps: Vec<u64> = (0..n).map(|_| next()).collect();
            if i == 1 {
                fps.extend(all[0].iter().take(300).copied());
            }
            let path = dir.join(format!("s{i}.sdx"));
            build_segment(&FsStorage, &path, &fps, None, &BuildOptions { k, ..BuildOptions::default() }).unwrap();
            segments.push(Segment::open(&path).unwrap());
            all.push(fps);
        }
        let refs: Vec<&Segment> = segments.iter().collect();
        assert!(refs.iter().map(|s| s.tables.len()).sum::<usize>() > 32, "more tables than lanes");
        let mut outs = Vec::new();
        let mut checked = 0;
        for round in 0..300 {
            let base = &all[round % all.len()];
            let f = base[(round * 31) % base.len()];
            let q = if round % 5 == 4 { next() } else { f ^ (1 << (round % 64)) ^ (1 << ((round * 7) % 64)) ^ (if round % 3 == 0 { 1 << ((round * 13) % 64) } else { 0 }) };
            for k in [0u32, 2, 3, 5] {
                let options = QueryOptions::within(k);
                let these: Vec<&Segment> = if k > 3 { refs.iter().copied().filter(|s| s.design.k() >= 3).collect() } else { refs.clone() };
                Segment::query_each_into(&these, q, &options, &mut outs).unwrap();
                assert_eq!(outs.len(), these.len());
                for (seg, got) in these.iter().zip(&outs) {
                    assert_eq!(got, &seg.query(q, &options).unwrap(), "round {round}, k {k}");
                }
                // and against brute force over each segment's fingerprints
                for (fps, got) in all.iter().zip(&outs) {
                    let mut want: Vec<u64> = fps.iter().copied().filter(|&v| (v ^ q).count_ones() <= k).collect();
                    want.sort_unstable();
                    want.dedup();
                    let mut have: Vec<u64> = got.iter().map(|m| m.fingerprint).collect();
                    have.sort_unstable();
                    have.dedup();
                    assert_eq!(have, want, "round {round}, k {k}");
                    checked += want.len();
                }
            }
        }
        assert!(checked > 300, "the queries find matches: {checked}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
