//! Text to fingerprint: [`Fingerprinter`] (one document at a time) and [`Session`] (many,
//! batched), the [`Fingerprint`] they give.

use crate::error::Error;
use crate::features::FeatureExtractor;
use crate::idf::IdfTable;
use crate::options::FingerprintOptions;
use crate::sketch::{Sketch, Sketcher};
use crate::stem::Stemmer;
use crate::stopwords::StopWords;
use crate::tokenize::{feed_chunks, ChunkSink, Tokenizer};
use crate::weights::{self, Accumulator, TfMode};

/// A fingerprint and what went into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// The 64-bit simhash.
    pub value: u64,
    /// Words kept (after stop words).
    pub words: u64,
    /// Feature occurrences added to the simhash.
    pub features: u64,
    /// Fewer words than [`FingerprintOptions::short_words`]: simhash is weak on short texts,
    /// so near-duplicate answers for this document deserve less trust.
    pub short: bool,
}

/// A document's features, counted once ([`Fingerprinter::document_features`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentFeatures {
    /// Distinct feature hashes, in the order they first occur (empty once numbered).
    distinct: Vec<u64>,
    /// Once numbered by a numbering IDF builder ([`DocumentFeatures::add_to`]): the
    /// distinct features' numbers in its vocabulary, in place of their hashes.
    numbers: Option<Vec<u32>>,
    /// Occurrences of each (empty for binary weights, which count each feature once).
    counts: Vec<u32>,
    /// Words kept (after stop words).
    words: u64,
    /// Feature occurrences.
    occurrences: u64,
}

impl DocumentFeatures {
    /// The distinct feature hashes (what [`IdfBuilder::add_document`](crate::IdfBuilder::add_document) counts);
    /// empty once numbered ([`DocumentFeatures::add_to`]).
    pub fn distinct(&self) -> &[u64] {
        &self.distinct
    }

    /// Counts these features in `idf` (as `idf.add_document(self.distinct())`) and, when it
    /// is a numbering builder ([`IdfBuilder::numbering`](crate::IdfBuilder::numbering)),
    /// keeps their numbers in its vocabulary in place of their hashes: 4 bytes a feature
    /// instead of 8, fingerprinted with the vocabulary by
    /// [`Fingerprinter::fingerprint_numbered`]. Returns whether it numbered them (false:
    /// counted, left as they were). Features numbered already are not counted again.
    pub fn add_to(&mut self, idf: &mut crate::IdfBuilder) -> bool {
        if self.numbers.is_some() {
            return false;
        }
        let mut numbers = Vec::with_capacity(self.distinct.len());
        if idf.number(&self.distinct, &mut numbers) {
            self.numbers = Some(numbers);
            self.distinct = Vec::new();
            return true;
        }
        idf.add_document(&self.distinct);
        false
    }

    /// Words kept (after stop words).
    pub fn words(&self) -> u64 {
        self.words
    }

    /// Bytes of memory these features hold (what a budget for keeping many counts).
    pub fn heap_bytes(&self) -> usize {
        8 * self.distinct.capacity() + 4 * (self.numbers.as_ref().map_or(0, Vec::capacity) + self.counts.capacity())
    }
}

/// The features a numbering IDF builder numbered, by number: each one's hash and its weight
/// in the IDF table of the fingerprinter that made it ([`Fingerprinter::vocabulary`]).
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    entries: Vec<(u64, u32)>,
    idf: Option<std::sync::Arc<IdfTable>>,
}

/// Turns documents into fingerprints. Reusable; clone it for another thread.
#[derive(Debug, Clone)]
pub struct Fingerprinter {
    options: FingerprintOptions,
    tokenizer: Tokenizer,
    stop: StopWords,
    stemmer: Option<std::sync::Arc<Stemmer>>,
    idf: Option<std::sync::Arc<IdfTable>>,
    scratch: weights::Scratch,
    batch: Batch,
    /// Numbered features' hashes and IDF weights, resolved by the vocabulary
    /// ([`Fingerprinter::fingerprint_numbered`]), reused from document to document.
    resolved: (Vec<u64>, Vec<u32>),
}

/// Word and feature hashes on their way through a [`Session`], a batch at a time: each stage
/// runs as one tight loop over a slice.
#[derive(Debug, Clone, Default)]
struct Batch {
    words: Vec<u64>,
    features: Vec<u64>,
}

/// Words per batch.
const BATCH: usize = 1024;

/// How far ahead of the numbered feature resolved the vocabulary entry of a later one is
/// prefetched ([`Fingerprinter::fingerprint_numbered`]): enough cache misses in flight, all
/// the time, to fill the memory system.
const RESOLVE_AHEAD: usize = 32;

impl Batch {
    /// Turns the batched words into features and adds them to `acc`.
    fn flush(&mut self, features: &mut FeatureExtractor<'_>, acc: &mut Accumulator<'_>) {
        features.hashed_words(&self.words, &mut self.features);
        acc.add_all(&self.features);
        self.words.clear();
        self.features.clear();
    }
}

impl Fingerprinter {
    /// A fingerprinter for `options` (without IDF weights).
    pub fn new(options: FingerprintOptions) -> Result<Self, Error> {
        options.validate()?;
        let stemmer = options.stemming.map(Stemmer::new).transpose()?.map(std::sync::Arc::new);
        Ok(Fingerprinter {
            tokenizer: Tokenizer::new(options.cjk)?,
            stop: StopWords::new(&options.stop_words),
            stemmer,
            idf: None,
            scratch: weights::Scratch::default(),
            batch: Batch::default(),
            resolved: Default::default(),
            options,
        })
    }

    /// Multiplies every weight by the feature's IDF weight from `table`, which must have been
    /// learned with the same feature recipe.
    pub fn with_idf(mut self, table: std::sync::Arc<IdfTable>) -> Result<Self, Error> {
        let mine = self.options.feature_recipe();
        if table.recipe() != mine {
            return Err(Error::IdfRecipeMismatch { table: table.recipe().to_owned(), fingerprinter: mine });
        }
        self.idf = Some(table);
        Ok(self)
    }

    /// The options.
    pub fn options(&self) -> &FingerprintOptions {
        &self.options
    }

    /// The IDF table the weights are multiplied by, if any.
    pub fn idf_table(&self) -> Option<std::sync::Arc<IdfTable>> {
        self.idf.clone()
    }

    /// The full recipe descriptor: the feature recipe, the weighting and the IDF table's id.
    pub fn recipe(&self) -> String {
        format!("{} tf={} idf={}", self.options.feature_recipe(), self.options.tf.name(), self.idf.as_ref().map_or("-".to_owned(), |t| format!("{:08x}", t.id())),)
    }

    /// The fingerprint of `text`.
    pub fn fingerprint(&mut self, text: &str) -> Result<Fingerprint, Error> {
        let mut s = self.session();
        s.push_complete(text);
        s.finish()
    }

    /// The distinct feature hashes of `text`, ascending (what [`IdfBuilder`](crate::IdfBuilder) counts).
    pub fn distinct_features(&mut self, text: &str) -> Vec<u64> {
        let Fingerprinter { tokenizer, stop, stemmer, options, .. } = self;
        let mut fx = FeatureExtractor::new(&options.features, stop, stemmer.as_deref(), options.fold_digits);
        let mut out = Vec::new();
        let mut emit = |h| out.push(h);
        if fx.needs_text() {
            tokenizer.words(text, |w| fx.word(w, &mut emit));
        } else {
            tokenizer.word_hashes(text, |h| fx.hashed_word(h, &mut emit));
        }
        fx.finish(&mut emit);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The features of `text`, counted once: a fingerprint with any IDF table of this
    /// recipe follows from them without reading the text again
    /// ([`Fingerprinter::fingerprint_features`]), and an IDF table counts their distinct
    /// hashes ([`DocumentFeatures::distinct`]). What `simdex dedup` keeps between learning
    /// its IDF table and fingerprinting.
    pub fn document_features(&mut self, text: &str) -> DocumentFeatures {
        let mut out = DocumentFeatures::default();
        self.document_features_into(text, &mut out);
        out
    }

    /// [`Fingerprinter::document_features`] into `out`, reusing its buffers.
    pub fn document_features_into(&mut self, text: &str, out: &mut DocumentFeatures) {
        self.features_into(text, out, &mut ());
    }

    /// [`Fingerprinter::fingerprint`] and [`Sketcher::sketch`] of `text` in one scan of it
    /// (where the recipe's features are made of word hashes alone, the default: a stemmer,
    /// stop words or character n-grams need the words' text, and the sketch's tokens are
    /// then found by a scan of their own). The same fingerprint and sketch as the two calls;
    /// the text's shingle set stays in the sketcher ([`Sketcher::last_shingles`]).
    pub fn fingerprint_and_sketch(&mut self, text: &str, sketcher: &mut Sketcher) -> (Result<Fingerprint, Error>, Sketch) {
        let mut scan = sketcher.scan();
        let mut s = self.session();
        s.push_complete_and(text, &mut scan);
        let f = s.finish();
        scan.finish();
        (f, sketcher.sketch_of_scanned())
    }

    /// [`Fingerprinter::document_features`] and [`Sketcher::sketch`] of `text` in one scan
    /// of it, as [`Fingerprinter::fingerprint_and_sketch`].
    pub fn document_features_and_sketch(&mut self, text: &str, sketcher: &mut Sketcher) -> (DocumentFeatures, Sketch) {
        let mut out = DocumentFeatures::default();
        let mut scan = sketcher.scan();
        self.features_into(text, &mut out, &mut scan);
        scan.finish();
        (out, sketcher.sketch_of_scanned())
    }

    /// [`Fingerprinter::document_features_into`], the text's chunks handed to `chunks` too.
    fn features_into(&mut self, text: &str, out: &mut DocumentFeatures, chunks: &mut impl ChunkSink) {
        let Fingerprinter { tokenizer, stop, stemmer, options, scratch, batch, .. } = self;
        batch.words.clear();
        batch.features.clear();
        let mut s = Session {
            features: FeatureExtractor::new(&options.features, stop, stemmer.as_deref(), options.fold_digits),
            acc: Accumulator::counting(scratch),
            tokenizer,
            options,
            batch,
            pending: String::new(),
        };
        s.push_complete_and(text, chunks);
        let Session { mut features, mut acc, batch, .. } = s;
        batch.flush(&mut features, &mut acc);
        features.finish(&mut |h| acc.add(h));
        out.words = features.words();
        out.occurrences = acc.features();
        // binary weights count a feature once, however often it occurs
        acc.into_counts(&mut out.distinct, &mut out.counts, options.tf != TfMode::Binary);
    }

    /// The fingerprint of a document from its features ([`Fingerprinter::document_features`],
    /// made with this recipe): the same as [`Fingerprinter::fingerprint`] of its text.
    pub fn fingerprint_features(&mut self, f: &DocumentFeatures) -> Result<Fingerprint, Error> {
        self.fingerprint_of(f, &f.distinct)
    }

    /// The fingerprint of features `f` whose distinct hashes are `distinct`.
    fn fingerprint_of(&mut self, f: &DocumentFeatures, distinct: &[u64]) -> Result<Fingerprint, Error> {
        self.check_features(f)?;
        let Fingerprinter { idf, options, scratch, .. } = self;
        let mut acc = Accumulator::new(options.tf, idf.as_deref(), scratch);
        acc.add_distinct(distinct, &f.counts);
        // (binary weights keep no counts: the occurrences are the ones counted when reading)
        Ok(Fingerprint { words: f.words, features: f.occurrences, short: f.words < options.short_words, value: acc.finish() })
    }

    /// [`Fingerprinter::fingerprint_features`] of features that may be numbered
    /// ([`DocumentFeatures::add_to`]), `vocabulary` the numbering builder's
    /// ([`IdfBuilder::build_keeping_vocabulary`](crate::IdfBuilder::build_keeping_vocabulary)):
    /// the same fingerprint as of the features before they were numbered.
    pub fn fingerprint_numbered(&mut self, f: &DocumentFeatures, vocabulary: &Vocabulary) -> Result<Fingerprint, Error> {
        let Some(numbers) = &f.numbers else {
            return self.fingerprint_features(f);
        };
        let entries = &vocabulary.entries;
        let beyond = || Error::InvalidOptions(format!("a feature number beyond the vocabulary of {} features: not the numbering IDF builder's", entries.len()));
        let (mut distinct, mut weights) = std::mem::take(&mut self.resolved);
        distinct.clear();
        weights.clear();
        // the vocabulary is read at random: each entry is asked for RESOLVE_AHEAD features
        // before it is read, so that the cache misses overlap
        let prefetch = |n: Option<&u32>| {
            if let Some(e) = n.and_then(|&n| entries.get(n as usize)) {
                crate::feature_map::prefetch((e as *const (u64, u32)).cast());
            }
        };
        numbers.iter().take(RESOLVE_AHEAD).for_each(|n| prefetch(Some(n)));
        for (i, &n) in numbers.iter().enumerate() {
            prefetch(numbers.get(i + RESOLVE_AHEAD));
            let &(h, w) = entries.get(n as usize).ok_or_else(beyond)?;
            distinct.push(h);
            weights.push(w);
        }
        // the weights looked up once hold for this fingerprinter's table only
        let same_table = match (&self.idf, &vocabulary.idf) {
            (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        };
        let checked = self.check_features(f);
        let Fingerprinter { idf, options, scratch, .. } = self;
        let value = checked.map(|()| {
            let mut acc = Accumulator::new(options.tf, idf.as_deref(), scratch);
            acc.add_distinct_weighing(&distinct, &f.counts, same_table.then_some(&weights[..]));
            acc.finish()
        });
        self.resolved = (distinct, weights);
        let options = &self.options;
        Ok(Fingerprint { words: f.words, features: f.occurrences, short: f.words < options.short_words, value: value? })
    }

    /// A numbering IDF builder's vocabulary (its features' hashes by number,
    /// [`IdfBuilder::build_keeping_vocabulary`](crate::IdfBuilder::build_keeping_vocabulary))
    /// for [`Fingerprinter::fingerprint_numbered`], each feature's weight in this
    /// fingerprinter's IDF table looked up once here instead of once in every document.
    pub fn vocabulary(&self, hashes: Vec<u64>) -> Vocabulary {
        // read at random by every document's numbers
        let mut entries = crate::feature_map::huge_vec(hashes.len(), (0u64, 1u32));
        for (e, &h) in entries.iter_mut().zip(&hashes) {
            e.0 = h;
        }
        if let Some(t) = &self.idf {
            t.weights_of(&hashes, |i, w| {
                if let Some(e) = entries.get_mut(i) {
                    e.1 = w;
                }
            });
        }
        Vocabulary { entries, idf: self.idf.clone() }
    }

    /// Fails as [`Fingerprinter::fingerprint_features`] would (too few words), without making
    /// the fingerprint.
    pub fn check_features(&self, f: &DocumentFeatures) -> Result<(), Error> {
        let min_words = self.options.min_words.max(1);
        if f.words < min_words {
            return Err(Error::EmptyDocument { words: f.words, min_words });
        }
        Ok(())
    }

    /// A streaming fingerprint: push text in pieces of any size, then `finish`. Memory stays
    /// bounded by the longest run of text without ASCII whitespace (capped at 1 MiB).
    pub fn session(&mut self) -> Session<'_> {
        let Fingerprinter { tokenizer, stop, stemmer, idf, options, scratch, batch, .. } = self;
        // a session dropped without `finish` may have left words behind
        batch.words.clear();
        batch.features.clear();
        Session {
            features: FeatureExtractor::new(&options.features, stop, stemmer.as_deref(), options.fold_digits),
            acc: Accumulator::new(options.tf, idf.as_deref(), scratch),
            tokenizer,
            options,
            batch,
            pending: String::new(),
        }
    }
}

/// Longest run without ASCII whitespace that a [`Session`] buffers before cutting it.
pub const MAX_PENDING: usize = 1 << 20;

/// One document being fingerprinted piece by piece ([`Fingerprinter::session`]).
#[derive(Debug)]
pub struct Session<'a> {
    tokenizer: &'a mut Tokenizer,
    features: FeatureExtractor<'a>,
    acc: Accumulator<'a>,
    options: &'a FingerprintOptions,
    batch: &'a mut Batch,
    pending: String,
}

impl Session<'_> {
    /// Adds a piece of the document. Pieces join without a separator, so a word may be split
    /// across two pushes.
    pub fn push(&mut self, piece: &str) {
        let bytes = piece.as_bytes();
        let (Some(first), Some(last)) = (bytes.iter().position(u8::is_ascii_whitespace), bytes.iter().rposition(u8::is_ascii_whitespace)) else {
            // no word boundary in `piece`: keep it, unless the run gets too long
            self.pending.push_str(piece);
            if self.pending.len() >= MAX_PENDING {
                self.flush_pending("");
            }
            return;
        };
        // the pending partial word ends at `first`; whole words run up to `last`
        self.flush_pending(&piece[..first]);
        self.push_complete(&piece[first..last]);
        self.pending.push_str(&piece[last..]);
    }

    /// Processes the pending text followed by `end` (which has no whitespace).
    fn flush_pending(&mut self, end: &str) {
        if self.pending.is_empty() {
            self.push_complete(end);
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.push_str(end);
        self.push_complete(&pending);
        pending.clear();
        self.pending = pending;
    }

    /// Adds text that ends at a word boundary (no pending partial word).
    fn push_complete(&mut self, text: &str) {
        self.push_complete_and(text, &mut ());
    }

    /// [`Session::push_complete`], the text's chunks handed to `chunks` too (by the same
    /// scan where the features are made of word hashes).
    fn push_complete_and(&mut self, text: &str, chunks: &mut impl ChunkSink) {
        let Session { tokenizer, features, acc, batch, .. } = self;
        if text.is_empty() {
            return;
        }
        if features.needs_text() {
            tokenizer.words(text, |w| features.word(w, &mut |h| acc.add(h)));
            feed_chunks(text, chunks);
            return;
        }
        // the batch is flushed when full and by `finish`, so that many small pieces (the text
        // nodes of a page) do not each pay for a pass through the later stages
        tokenizer.word_hashes_and(
            text,
            |h| {
                batch.words.push(h);
                if batch.words.len() == BATCH {
                    batch.flush(features, acc);
                }
            },
            chunks,
        );
    }

    /// The fingerprint of everything pushed.
    pub fn finish(mut self) -> Result<Fingerprint, Error> {
        let rest = std::mem::take(&mut self.pending);
        self.push_complete(&rest);
        let Session { mut features, mut acc, options, batch, .. } = self;
        batch.flush(&mut features, &mut acc);
        features.finish(&mut |h| acc.add(h));
        let words = features.words();
        if words < options.min_words.max(1) {
            return Err(Error::EmptyDocument { words, min_words: options.min_words.max(1) });
        }
        Ok(Fingerprint { words, features: acc.features(), short: words < options.short_words, value: acc.finish() })
    }
}
