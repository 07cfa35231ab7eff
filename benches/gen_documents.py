"""A seeded corpus of documents with planted near-duplicates at known Jaccard, for the Spark
peers bench (``benches/spark_peers.py``) at sizes no real sample here reaches (2^20 documents
and more).

    python3 benches/gen_documents.py OUT_DIR -n 1048576 [--seed 48] [--family-share 0.2]

Writes ``OUT_DIR/docs.jsonl`` (``{"id", "lang", "text"}`` a line) and ``OUT_DIR/pairs.tsv``
(``id_a<TAB>id_b<TAB>jaccard``, every pair of one family with a Jaccard of at least 0.5, the
exact Jaccard of their word 3-shingle sets: the ground truth's definition in
``shared/eval/groundtruth.py``, whose ``pairs.tsv`` has the same layout), and
``OUT_DIR/gen.json`` (the arguments and counts).

- **Languages**: six synthetic ones, each with its own alphabet (Latin with and without
  diacritics, Cyrillic, Greek) and syllables, a vocabulary of ``--vocabulary`` words (default
  2^16) drawn by a Zipf law (s = 1.07), a handful of function words at the top.
- **Lengths**: log-normal words per document (median 350, sigma 0.8, 40 to 8,000 words), as
  web pages after extraction; sentences of 6 to 30 words.
- **Families**: a share of the documents (``--family-share``) are copies of a source
  document edited towards a target Jaccard (uniform over 0.70 to 1.0, exact copies included):
  words replaced, inserted and deleted at random places; each pair's Jaccard is then computed
  exactly. Documents of different families share no planted text (any shared 3-shingle is by
  chance, and a chance pair at 0.5 or more does not happen at these lengths).

Deterministic for a seed (numpy's PCG64): the same arguments give the same bytes.
"""

import argparse
import itertools
import json
import os

import numpy as np

LANGUAGES = {
    "en": ("bcdfghklmnprstvw", "aeiou", ["the", "of", "and", "to", "in", "is", "that", "for"]),
    "de": ("bcdfghklmnprstwz", "aeiouäöü", ["der", "die", "und", "in", "den", "von", "zu", "das"]),
    "fr": ("bcdfglmnprstv", "aeiouéèà", ["de", "la", "le", "et", "les", "des", "en", "un"]),
    "es": ("bcdfglmnprstvñ", "aeiouáéó", ["de", "la", "que", "el", "en", "y", "a", "los"]),
    "ru": ("бвгдзклмнпрстфх", "аеиоуыя", ["и", "в", "не", "на", "что", "с", "по", "как"]),
    "el": ("βγδζκλμνπρστφχ", "αεηιουω", ["και", "το", "της", "η", "να", "του", "σε", "με"]),
}
ZIPF_S = 1.07


def vocabulary(rng, consonants, vowels, size, exclude=()):
    """``size`` distinct pseudo-words of 1 to 4 syllables."""
    out, seen = [], set(exclude)
    c, v = np.array(list(consonants)), np.array(list(vowels))
    while len(out) < size:
        syl = rng.integers(1, 5, 4096)
        for n in syl:
            w = "".join(c[rng.integers(len(c))] + v[rng.integers(len(v))] for _ in range(n))
            if rng.random() < 0.3:
                w += c[rng.integers(len(c))]
            if w not in seen:
                seen.add(w)
                out.append(w)
                if len(out) == size:
                    break
    return out


class Language:
    def __init__(self, rng, name, size):
        consonants, vowels, function = LANGUAGES[name]
        self.words = np.array(function + vocabulary(rng, consonants, vowels, size - len(function), function), dtype=object)
        ranks = np.arange(1, len(self.words) + 1, dtype=np.float64)
        p = ranks**-ZIPF_S
        self.cdf = np.cumsum(p / p.sum())

    def draw(self, rng, n):
        return np.minimum(np.searchsorted(self.cdf, rng.random(n)), len(self.words) - 1)


def text_of(lang, idx, rng):
    """Sentences of the words ``idx`` (lower case; sentence breaks as periods)."""
    words = lang.words[idx]
    out, at = [], 0
    while at < len(words):
        n = int(rng.integers(6, 31))
        out.append(" ".join(words[at : at + n]) + ".")
        at += n
    return " ".join(out)


def shingles(idx):
    return set(zip(idx[:-2].tolist(), idx[1:-1].tolist(), idx[2:].tolist()))


def jaccard(a, b):
    return len(a & b) / len(a | b) if a or b else 1.0


def edited(lang, src, target, rng):
    """A copy of the word ids ``src`` edited towards a shingle Jaccard of ``target``: each edit
    (a replacement, an insertion or a deletion at a random place) changes about 3 of the n
    shingles, so about n (1 - J) / (3 (1 + J)) edits."""
    n = len(src)
    edits = int(round(n * (1 - target) / (3 * (1 + target))))
    out = list(src)
    for _ in range(edits):
        at = int(rng.integers(len(out)))
        kind = rng.random()
        if kind < 0.6:
            out[at] = int(lang.draw(rng, 1)[0])
        elif kind < 0.8:
            out.insert(at, int(lang.draw(rng, 1)[0]))
        elif len(out) > 10:
            del out[at]
    return np.array(out, dtype=np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("-n", type=int, default=1 << 20, help="documents")
    ap.add_argument("--seed", type=int, default=48)
    ap.add_argument("--family-share", type=float, default=0.2, help="share of documents that are edited copies")
    ap.add_argument("--vocabulary", type=int, default=1 << 16, help="words per language")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    langs = {name: Language(rng, name, a.vocabulary) for name in LANGUAGES}
    names = list(LANGUAGES)
    lang_p = np.array([0.4, 0.15, 0.15, 0.12, 0.1, 0.08])
    os.makedirs(a.out, exist_ok=True)
    written, planted, true_pairs = 0, 0, 0
    with open(os.path.join(a.out, "docs.jsonl"), "w", encoding="utf-8") as docs, open(os.path.join(a.out, "pairs.tsv"), "w", encoding="utf-8") as pairs:
        while written < a.n:
            name = names[int(rng.choice(len(names), p=lang_p))]
            lang = langs[name]
            length = int(np.clip(rng.lognormal(np.log(350), 0.8), 40, 8000))
            src = lang.draw(rng, length)
            family = [(f"d{written:08d}", src)]
            # copies: the family's share of the corpus, 1 to 4 per source
            if rng.random() < a.family_share / (1 - a.family_share) / 2.5:
                for _ in range(int(rng.integers(1, 5))):
                    target = 1.0 if rng.random() < 0.1 else float(rng.uniform(0.70, 1.0))
                    family.append((f"d{written + len(family):08d}", src.copy() if target == 1.0 else edited(lang, src, target, rng)))
            family = family[: a.n - written]
            for id_, idx in family:
                docs.write(json.dumps({"id": id_, "lang": name, "text": text_of(lang, idx, rng)}, ensure_ascii=False) + "\n")
            if len(family) > 1:
                sets = [shingles(idx) for _, idx in family]
                for (x, (ia, _)), (y, (ib, _)) in itertools.combinations(enumerate(family), 2):
                    j = jaccard(sets[x], sets[y])
                    if j >= 0.5:
                        pairs.write(f"{ia}\t{ib}\t{j:.4f}\n")
                        true_pairs += j >= 0.9
                planted += len(family) - 1
            written += len(family)
    with open(os.path.join(a.out, "gen.json"), "w") as f:
        json.dump({"documents": written, "seed": a.seed, "family_share": a.family_share, "vocabulary": a.vocabulary, "planted_copies": planted, "pairs_at_0.9": true_pairs}, f)
    print(json.dumps({"documents": written, "planted_copies": planted, "pairs_at_0.9": true_pairs}))


if __name__ == "__main__":
    main()
