//! Stop words per language: the fixed lists the recipe drops when stop words are on.
//!
//! The lists are part of the persisted recipe (format-spec/fingerprint.md, "Stop words"): a
//! change to any of them is a new recipe version. They are written normalised (NFKC,
//! lowercase), as the tokenizer emits words. A word is dropped when its feature hash equals the
//! hash of a listed word of an enabled language.

use super::hash::{seed, sfh64};
use std::collections::HashSet;

/// A language with a stop-word list (and, with the `stem` feature, a Snowball stemmer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Language {
    /// English (`en`).
    English,
    /// Russian (`ru`).
    Russian,
    /// Arabic (`ar`).
    Arabic,
    /// Chinese (`zh`): stop words only, no stemmer.
    Chinese,
    /// German (`de`).
    German,
    /// French (`fr`).
    French,
    /// Spanish (`es`).
    Spanish,
}

impl Language {
    /// Every language, in recipe order.
    pub const ALL: [Language; 7] = [Language::English, Language::Russian, Language::Arabic, Language::Chinese, Language::German, Language::French, Language::Spanish];

    /// ISO 639-1 code, as used in recipe descriptors and on the command line.
    pub fn code(self) -> &'static str {
        match self {
            Language::English => "en",
            Language::Russian => "ru",
            Language::Arabic => "ar",
            Language::Chinese => "zh",
            Language::German => "de",
            Language::French => "fr",
            Language::Spanish => "es",
        }
    }

    /// The language with ISO 639-1 code `code`.
    pub fn from_code(code: &str) -> Option<Language> {
        Language::ALL.into_iter().find(|l| l.code() == code)
    }

    /// The stop words of this language (normalised).
    pub fn stop_words(self) -> &'static [&'static str] {
        match self {
            Language::English => EN,
            Language::Russian => RU,
            Language::Arabic => AR,
            Language::Chinese => ZH,
            Language::German => DE,
            Language::French => FR,
            Language::Spanish => ES,
        }
    }
}

/// The set of word hashes to drop.
#[derive(Debug, Clone, Default)]
pub struct StopWords {
    hashes: HashSet<u64, BuildIdentity>,
}

impl StopWords {
    /// The union of the lists of `languages`.
    pub fn new(languages: &[Language]) -> Self {
        let hashes = languages.iter().flat_map(|l| l.stop_words()).map(|w| sfh64(seed::WORD, w.as_bytes())).collect();
        StopWords { hashes }
    }

    /// Whether no word is a stop word.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Whether the word with feature hash `h` is a stop word.
    #[inline]
    pub fn contains(&self, h: u64) -> bool {
        !self.hashes.is_empty() && self.hashes.contains(&h)
    }
}

/// Hasher for keys that already are uniform 64-bit hashes.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildIdentity;

/// See [`BuildIdentity`].
#[derive(Debug, Default)]
pub struct IdentityHasher(u64);

impl std::hash::BuildHasher for BuildIdentity {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}

impl std::hash::Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // only u64 keys are hashed with this hasher; fold anything else in deterministically
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[rustfmt::skip]
const EN: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just",
    "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once",
    "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she",
    "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves",
];

#[rustfmt::skip]
const RU: &[&str] = &[
    "а", "без", "более", "бы", "был", "была", "были", "было", "быть", "в", "вам", "вас", "весь",
    "во", "вот", "все", "всего", "всех", "вы", "где", "да", "даже", "для", "до", "его", "ее",
    "её", "если", "есть", "еще", "ещё", "же", "за", "здесь", "и", "из", "или", "им", "их", "к",
    "как", "ко", "когда", "кто", "ли", "либо", "мне", "может", "мы", "на", "над", "надо", "наш",
    "не", "него", "нее", "неё", "нет", "ни", "них", "но", "ну", "о", "об", "однако", "он",
    "она", "они", "оно", "от", "очень", "по", "под", "при", "с", "со", "так", "также", "такой",
    "там", "те", "тем", "то", "того", "тоже", "той", "только", "том", "ты", "у", "уже", "хотя",
    "чего", "чей", "чем", "что", "чтобы", "чье", "чья", "эта", "эти", "это", "я",
];

#[rustfmt::skip]
const AR: &[&str] = &[
    "و", "في", "من", "على", "إلى", "الى", "عن", "مع", "هذا", "هذه", "ذلك", "تلك", "التي",
    "الذي", "الذين", "ما", "لا", "لم", "لن", "قد", "كان", "كانت", "أن", "ان", "إن", "أو", "او",
    "ثم", "هو", "هي", "هم", "كل", "بعد", "قبل", "عند", "بين", "حتى", "إذا", "اذا", "كما",
    "أي", "اي", "ليس", "غير", "بل", "لكن", "يا", "به", "بها", "له", "لها", "فيه", "فيها",
    "منه", "منها", "عليه", "عليها",
];

#[rustfmt::skip]
const ZH: &[&str] = &[
    "的", "了", "是", "在", "和", "与", "及", "或", "也", "就", "都", "而", "着", "之", "其",
    "这", "那", "个", "我", "你", "他", "她", "它", "们", "吗", "呢", "吧", "啊", "哦", "把",
    "被", "对", "从", "向", "以", "为", "啦", "呀", "嘛", "哟",
];

#[rustfmt::skip]
const DE: &[&str] = &[
    "aber", "als", "am", "an", "auch", "auf", "aus", "bei", "bin", "bis", "da", "das", "dass",
    "dem", "den", "der", "des", "die", "doch", "du", "durch", "ein", "eine", "einem", "einen",
    "einer", "eines", "er", "es", "für", "hat", "ich", "im", "in", "ist", "ja", "mit", "nach",
    "nicht", "noch", "nur", "oder", "sich", "sie", "sind", "so", "um", "und", "von", "vor",
    "war", "was", "wie", "wir", "zu", "zum", "zur",
];

#[rustfmt::skip]
const FR: &[&str] = &[
    "au", "aux", "avec", "ce", "ces", "dans", "de", "des", "du", "elle", "en", "et", "eux", "il",
    "je", "la", "le", "les", "leur", "lui", "ma", "mais", "me", "même", "mes", "moi", "mon",
    "ne", "nos", "notre", "nous", "on", "ou", "par", "pas", "pour", "qu", "que", "qui", "sa",
    "se", "ses", "son", "sur", "ta", "te", "tes", "toi", "ton", "tu", "un", "une", "vos",
    "votre", "vous",
];

#[rustfmt::skip]
const ES: &[&str] = &[
    "a", "al", "algo", "como", "con", "de", "del", "el", "ella", "en", "es", "esta", "este",
    "fue", "ha", "la", "las", "le", "les", "lo", "los", "mas", "más", "me", "mi", "muy", "no",
    "nos", "o", "para", "pero", "por", "que", "se", "si", "sin", "sobre", "su", "sus", "también",
    "te", "tu", "un", "una", "uno", "y", "ya", "yo",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_normalised_words() {
        let mut t = super::super::tokenize::Tokenizer::new(Default::default()).unwrap();
        for lang in Language::ALL {
            for w in lang.stop_words() {
                assert_eq!(t.collect_words(w), [w.to_string()], "{}: {w}", lang.code());
            }
        }
    }

    #[test]
    fn contains_by_hash() {
        let s = StopWords::new(&[Language::English]);
        assert!(s.contains(sfh64(seed::WORD, b"the")));
        assert!(!s.contains(sfh64(seed::WORD, b"cat")));
        assert!(!StopWords::new(&[]).contains(sfh64(seed::WORD, b"the")));
    }
}
