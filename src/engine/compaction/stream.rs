//! The merge streams: the live `(fingerprint, id)` pairs of several segments in order
//! ([`LiveMerge`], what table 0, the ids and the sketches of a merge's output are written
//! from), and the merge of sorted u64 streams ([`SortedMerge`], a permuted table of the
//! output from the inputs' tables and sorted runs). Both read block by block: memory does
//! not grow with the inputs. They read segments and write nothing.

// Indexing: merge sources indexed by input number, below the number of inputs it was given.
#![allow(clippy::indexing_slicing)]
use crate::engine::version::{LiveSegment, TombstoneSet};
use crate::error::{Error, Result};

/// A source's sketches in table 0's order (for [`LiveMerge::resume`] with sketches).
type SketchStream<'a> = Box<dyn Iterator<Item = Result<&'a [u8]>> + 'a>;

/// One source of the merge: a segment's `(fingerprint, id)` stream and its bound, and
/// (when the merge carries sketches and the segment has them) its sketch stream in step.
struct Source<'a> {
    entries: Box<dyn Iterator<Item = Result<(u64, Option<u64>)>> + 'a>,
    sketches: Option<SketchStream<'a>>,
    head: Option<(u64, u64)>,
    head_sketch: Option<&'a [u8]>,
    bound: u64,
}

impl Source<'_> {
    fn empty() -> Self {
        Source { entries: Box::new(std::iter::empty()), sketches: None, head: None, head_sketch: None, bound: 0 }
    }
}

/// The live pairs of several segments in `(fingerprint, id)` order, each once.
pub(super) struct LiveMerge<'a> {
    sources: Vec<Source<'a>>,
    tombstones: &'a TombstoneSet,
    last: Option<(u64, u64)>,
    error: Option<Error>,
    /// False when there is no tombstone at all (most merges): no lookups then.
    any_tombstones: bool,
    /// Pairs dropped because a tombstone hides them.
    pub(super) deleted: u64,
    /// Pairs dropped because an equal pair came first.
    pub(super) repeated: u64,
    /// With sketches ([`Self::resume`]): the sketch of the pair `next` returned last (`None`:
    /// its segment has no sketch column).
    pub(super) sketch: Option<&'a [u8]>,
    /// Resuming: live pairs to pass over first (`(fingerprint, n)`: the first `n` live
    /// pairs of that fingerprint), see [`Self::resume`].
    skip: Option<(u64, u64)>,
    /// Resuming a count: the last pair counted (every pair up to it was counted, its own
    /// repeats not yet), see [`Self::resume_count`].
    after: Option<((u64, u64), bool)>,
}

impl<'a> LiveMerge<'a> {
    pub(super) fn new(inputs: &'a [std::sync::Arc<LiveSegment>], tombstones: &'a TombstoneSet) -> Self {
        Self::make(inputs, tombstones, false, 0)
    }

    /// The stream after its first live pairs, which ended with `tail` pairs of fingerprint
    /// `last` (`None`: from the start); each source starts at `last` through its block
    /// index, so nothing before it is read. With `sketches`, each pair's sketch is in
    /// [`Self::sketch`].
    pub(super) fn resume(inputs: &'a [std::sync::Arc<LiveSegment>], tombstones: &'a TombstoneSet, sketches: bool, cursor: Option<(u64, u64)>) -> Self {
        let Some((last, tail)) = cursor else { return Self::make(inputs, tombstones, sketches, 0) };
        let mut m = Self::make(inputs, tombstones, sketches, last);
        m.skip = (tail > 0).then_some((last, tail));
        m
    }

    /// A count (`deleted`, `repeated`) that goes on after `last`, the last live pair an
    /// earlier count returned: pairs up to it are passed over uncounted, its own older
    /// copies are counted as repeats, as that count would have.
    pub(super) fn resume_count(inputs: &'a [std::sync::Arc<LiveSegment>], tombstones: &'a TombstoneSet, last: Option<(u64, u64)>) -> Self {
        let Some(last) = last else { return Self::new(inputs, tombstones) };
        let mut m = Self::make(inputs, tombstones, false, last.0);
        m.after = Some((last, false));
        m
    }

    fn make(inputs: &'a [std::sync::Arc<LiveSegment>], tombstones: &'a TombstoneSet, sketches: bool, from: u64) -> Self {
        let any_tombstones = !tombstones.files.is_empty();
        let mut m = Self { sources: Vec::new(), tombstones, last: None, error: None, any_tombstones, deleted: 0, repeated: 0, sketch: None, skip: None, after: None };
        for s in inputs {
            let (ordinal, entries) = match s.segment.entries_from(from) {
                Ok((ordinal, entries)) => (ordinal, Box::new(entries) as Box<dyn Iterator<Item = Result<(u64, Option<u64>)>> + 'a>),
                Err(e) => (0, Box::new(std::iter::once(Err(e))) as Box<dyn Iterator<Item = Result<(u64, Option<u64>)>> + 'a>),
            };
            let sketches = (sketches && s.segment.has_sketches()).then(|| Box::new(s.segment.sketches_from(ordinal)) as SketchStream<'a>);
            let mut src = Source { entries, sketches, head: None, head_sketch: None, bound: s.meta.max_seq };
            m.advance(&mut src);
            m.sources.push(src);
        }
        m
    }

    fn advance(&mut self, src: &mut Source<'a>) {
        if let Some(sketches) = src.sketches.as_mut() {
            src.head_sketch = match sketches.next() {
                Some(Ok(s)) => Some(s),
                Some(Err(e)) => {
                    self.error.get_or_insert(e);
                    None
                }
                None => None,
            };
        }
        src.head = match src.entries.next() {
            Some(Ok((fp, Some(id)))) => Some((fp, id)),
            Some(Ok((_, None))) => {
                self.error.get_or_insert(Error::InvalidArgument("an engine segment has no document ids".into()));
                None
            }
            Some(Err(e)) => {
                self.error.get_or_insert(e);
                None
            }
            None => None,
        };
    }

    /// The first error a source reported, which ended the stream early.
    pub(super) fn finish(self) -> Result<()> {
        self.error.map_or(Ok(()), Err)
    }
}

impl Iterator for LiveMerge<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        loop {
            if self.error.is_some() {
                return None;
            }
            // Few sources: a linear scan for the smallest head beats a heap. Ties go to the
            // newest source, so a pair stored twice keeps its newest copy (and sketch): the
            // older copies follow it as repeats (when a delete hides the newest, it hides
            // every older copy too).
            let mut best: Option<(usize, (u64, u64))> = None;
            for (i, s) in self.sources.iter().enumerate() {
                if let Some(h) = s.head {
                    if best.is_none_or(|(_, b)| h <= b) {
                        best = Some((i, h));
                    }
                }
            }
            let (i, pair) = best?;
            let mut src = std::mem::replace(&mut self.sources[i], Source::empty());
            let bound = src.bound;
            let sketch = src.head_sketch;
            self.advance(&mut src);
            self.sources[i] = src;
            if let Some((after, seen)) = self.after {
                if pair < after || (pair == after && !seen) {
                    // counted before the count resumed (the first copy of `after` is the
                    // one returned then; its older copies are repeats, counted below)
                    if pair == after {
                        self.after = Some((after, true));
                        self.last = Some(pair);
                    }
                    continue;
                }
                if pair > after {
                    self.after = None;
                }
            }
            if self.last == Some(pair) {
                self.repeated += 1;
                continue;
            }
            if self.any_tombstones && self.tombstones.get(pair.0, pair.1).is_some_and(|s| s > bound) {
                self.deleted += 1;
                continue;
            }
            self.last = Some(pair);
            if let Some((fp, n)) = self.skip {
                if pair.0 == fp && n > 0 {
                    self.skip = (n > 1).then_some((fp, n - 1));
                    continue;
                }
                self.skip = None;
            }
            self.sketch = sketch;
            return Some(pair);
        }
    }
}

/// The merge of sorted streams of u64 that may fail (segment tables); the first error
/// ends the stream and is returned by [`SortedMerge::finish`].
pub(super) struct SortedMerge<I> {
    sources: Vec<(I, Option<u64>)>,
    error: Option<Error>,
    /// Resuming: the first `n` copies of a value to pass over (`(value, n)`).
    skip: Option<(u64, u64)>,
}

impl<I: Iterator<Item = Result<u64>>> SortedMerge<I> {
    pub(super) fn new(sources: impl IntoIterator<Item = I>) -> Self {
        let mut m = Self { sources: Vec::new(), error: None, skip: None };
        for mut it in sources {
            let head = m.pull(&mut it);
            m.sources.push((it, head));
        }
        m
    }

    /// The merge of sources that start at their first value `>= last`, after passing over
    /// `tail` copies of `last` (what a stopped merge had written last).
    pub(super) fn resumed(sources: impl IntoIterator<Item = I>, last: u64, tail: u64) -> Self {
        let mut m = Self::new(sources);
        m.skip = (tail > 0).then_some((last, tail));
        m
    }

    fn pull(&mut self, it: &mut I) -> Option<u64> {
        match it.next()? {
            Ok(v) => Some(v),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }

    pub(super) fn finish(self) -> Result<()> {
        self.error.map_or(Ok(()), Err)
    }
}

impl<I: Iterator<Item = Result<u64>>> Iterator for SortedMerge<I> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        loop {
            if self.error.is_some() {
                return None;
            }
            let mut best: Option<(usize, u64)> = None;
            for (i, (_, head)) in self.sources.iter().enumerate() {
                if let Some(v) = *head {
                    if best.is_none_or(|(_, b)| v < b) {
                        best = Some((i, v));
                    }
                }
            }
            let (i, v) = best?;
            let next = match self.sources[i].0.next() {
                Some(Ok(x)) => Some(x),
                Some(Err(e)) => {
                    self.error.get_or_insert(e);
                    None
                }
                None => None,
            };
            self.sources[i].1 = next;
            if let Some((x, n)) = self.skip {
                if x == v && n > 0 {
                    self.skip = (n > 1).then_some((x, n - 1));
                    continue;
                }
                self.skip = None;
            }
            return Some(v);
        }
    }
}
