"""A seeded corpus of documents with planted near-duplicates at known Jaccard, for the Spark
peers bench (``benches/spark_peers.py``) at sizes no real sample here reaches (2^20 documents
and more): synthetic words under a Zipf law in six languages, with a ground truth.

    python3 benches/gen_documents.py OUT_DIR -n 1048576 [--seed 48] [--family-share 0.2]
    python3 benches/gen_documents.py OUT_DIR --check ../shared/eval   # the truth, re-derived

Not to be confused with ``benches/gen_docs.py`` (speed's): that one writes real English
sentences (the Rust docs' text) with planted exact and near copies listed by *edit* (a
``planted.tsv``, no Jaccard), for the dedup and crawler speed benches; this one writes
synthetic multilingual text whose truth is the *exact Jaccard* of every planted pair, for
scoring precision, recall and F1.

Writes ``OUT_DIR/docs.jsonl`` (``{"id", "lang", "text"}`` a line) and ``OUT_DIR/pairs.tsv``
(``id_a<TAB>id_b<TAB>jaccard``, every pair of one family with a Jaccard of at least 0.5, the
exact Jaccard of their word 3-shingle sets: the ground truth's definition in
``shared/eval/common.py``, whose ``pairs.tsv`` has the same layout), and
``OUT_DIR/gen.json`` (the arguments and counts).

- **Languages**: six synthetic ones, each with its own alphabet (Latin with and without
  diacritics, Cyrillic, Greek) and syllables, a vocabulary of ``--vocabulary`` words (default
  2^16) drawn by a Zipf law (s = 1.07), a handful of function words at the top. Every word is
  lower case letters only, so the ground truth's tokenizer (NFKC, case folding, runs of word
  characters) gives back exactly the generator's words.
- **Lengths**: log-normal words per document (median 350, sigma 0.8, 40 to 8,000 words: 3.4 KB
  on average), as web pages after extraction; sentences of 6 to 30 words (a document's first
  may be shorter), each ending with a period.
- **Families**: a share of the documents (``--family-share``) are copies of a source
  document edited towards a target Jaccard (uniform over 0.70 to 1.0; one copy in ten exact,
  the source's bytes): words replaced, inserted and deleted at random places; each pair's
  Jaccard is then computed exactly on the word ids (distinct words are distinct tokens).
  Documents of different families share no planted text (any shared 3-shingle is by chance,
  and a chance pair at 0.5 or more does not happen at these lengths: ``--check`` looks).

Vectorised (numpy): the words of 4,096 sources are drawn at once, and their texts are one
gather of bytes from a buffer holding every word; 2^20 documents take a few CPU minutes. Deterministic for a seed (numpy's PCG64): the
same arguments give the same bytes.

``--check EVAL_DIR`` re-derives the truth of a written corpus with ``EVAL_DIR/common.py``'s
tokenizer and shingles (blake2b hashes, not the generator's word ids): every pair of documents
sharing a shingle gets its exact Jaccard, and the pairs at 0.5 or more must be ``pairs.tsv``'s,
to its four decimals. All pairs are compared, so use it on small corpora (2^12 documents).
"""

import argparse
import json
import os
import sys

import numpy as np

LANGUAGES = {
    "en": ("bcdfghklmnprstvw", "aeiou", ["the", "of", "and", "to", "in", "is", "that", "for"]),
    "de": ("bcdfghklmnprstwz", "aeiouäöü", ["der", "die", "und", "in", "den", "von", "zu", "das"]),
    "fr": ("bcdfglmnprstv", "aeiouéèà", ["de", "la", "le", "et", "les", "des", "en", "un"]),
    "es": ("bcdfglmnprstvñ", "aeiouáéó", ["de", "la", "que", "el", "en", "y", "a", "los"]),
    "ru": ("бвгдзклмнпрстфх", "аеиоуыя", ["и", "в", "не", "на", "что", "с", "по", "как"]),
    "el": ("βγδζκλμνπρστφχ", "αεηιουω", ["και", "το", "της", "η", "να", "του", "σε", "με"]),
}
SHARES = np.array([0.4, 0.15, 0.15, 0.12, 0.1, 0.08])
ZIPF_S = 1.07
MEDIAN_WORDS, SIGMA, MIN_WORDS, MAX_WORDS = 350, 0.8, 40, 8000
SENTENCE = (6, 30)
COPIES = (1, 4)
EXACT_SHARE, MIN_TARGET = 0.1, 0.70
LISTED = 0.5
CHUNK = 4096
# a shingle of three word ids (each < 2^21) packed in one int64
ID_BITS = 21


def vocabulary(rng, consonants, vowels, size, exclude=()):
    """``size`` distinct pseudo-words of 1 to 4 syllables (a batch of candidates at a time)."""
    out, seen = [], set(exclude)
    syllables = [c + v for c in consonants for v in vowels]
    while len(out) < size:
        m = 8192
        n = rng.integers(1, 5, m).tolist()
        syl = rng.integers(len(syllables), size=(m, 4)).tolist()
        tail = np.where(rng.random(m) < 0.3, rng.integers(len(consonants), size=m), -1).tolist()
        for i in range(m):
            w = "".join([syllables[j] for j in syl[i][: n[i]]]) + (consonants[tail[i]] if tail[i] >= 0 else "")
            if w not in seen:
                seen.add(w)
                out.append(w)
                if len(out) == size:
                    break
    return out


class Language:
    def __init__(self, rng, name, size):
        consonants, vowels, function = LANGUAGES[name]
        self.words = function + vocabulary(rng, consonants, vowels, size - len(function), function)
        self.name, self.size = name, len(self.words)
        ranks = np.arange(1, self.size + 1, dtype=np.float64)
        p = ranks**-ZIPF_S
        self.cdf = np.cumsum(p / p.sum())

    def draw(self, rng, n):
        return np.minimum(np.searchsorted(self.cdf, rng.random(n)), self.size - 1)


class Tokens:
    """Every language's words as UTF-8 bytes in one buffer, each twice: followed by a space,
    and ending a sentence (a period and a space); a document is a gather from it."""

    def __init__(self, langs):
        self.base, pieces = [], []
        for lang in langs:
            self.base.append(len(pieces) // 2)
            pieces += [w + " " for w in lang.words]
        total = len(pieces)
        pieces += [p[:-1] + ". " for p in pieces]
        self.ended = total
        blobs = [p.encode("utf-8") for p in pieces]
        self.length = np.array([len(b) for b in blobs], dtype=np.int64)
        self.offset = np.r_[0, np.cumsum(self.length)[:-1]]
        self.buf = np.frombuffer(b"".join(blobs), dtype=np.uint8)

    def texts(self, rng, docs):
        """The texts (bytes) of ``docs``, global word ids each: sentences of 6 to 30 words
        drawn over the chunk (a document's first may be shorter), each document's last word
        ending one."""
        ids = np.concatenate(docs)
        ends = np.cumsum(rng.integers(SENTENCE[0], SENTENCE[1] + 1, len(ids) // SENTENCE[0] + 1)) - 1
        ids[ends[ends < len(ids)]] += self.ended
        last = np.cumsum([len(d) for d in docs]) - 1
        ids[last] = np.where(ids[last] >= self.ended, ids[last], ids[last] + self.ended)
        lengths = self.length[ids]
        lengths[last] -= 1  # no space after the last word
        ends_at = np.cumsum(lengths)
        starts_at = ends_at - lengths
        gather = np.repeat(self.offset[ids] - starts_at, lengths) + np.arange(ends_at[-1])
        data = self.buf[gather].tobytes()
        bounds = np.r_[0, ends_at[last]].tolist()
        return [data[bounds[i] : bounds[i + 1]] for i in range(len(docs))]


def shingle_keys(idx):
    """The distinct word 3-shingles of ``idx``, each packed in one int64, sorted."""
    a = idx.astype(np.int64)
    return np.unique((a[:-2] << (2 * ID_BITS)) | (a[1:-1] << ID_BITS) | a[2:])


def jaccard(a, b):
    inter = len(np.intersect1d(a, b, assume_unique=True))
    union = len(a) + len(b) - inter
    return inter / union if union else 1.0


def edited(lang, src, target, rng):
    """A copy of the word ids ``src`` edited towards a shingle Jaccard of ``target``: each edit
    (a replacement, an insertion or a deletion at a random place) changes about 3 of the n
    shingles, so about n (1 - J) / (3 (1 + J)) edits, applied at once."""
    n = len(src)
    edits = int(round(n * (1 - target) / (3 * (1 + target))))
    if edits == 0:
        return src.copy()
    at = rng.integers(n, size=edits)
    kind = rng.random(edits)
    words = lang.draw(rng, edits)
    out = src.copy()
    rep = kind < 0.6
    out[at[rep]] = words[rep]
    ins = (kind >= 0.6) & (kind < 0.8)
    dele = np.unique(at[kind >= 0.8])
    keep = np.ones(n, dtype=bool)
    if n - len(dele) >= MIN_WORDS // 4:
        keep[dele] = False
    # insertions go before their place in the source (a deleted place's insertion stays)
    return np.insert(out, at[ins], words[ins])[np.insert(keep, at[ins], True)]


def generate(out, n, seed, family_share, vocab):
    if vocab >= 1 << ID_BITS:
        raise SystemExit(f"--vocabulary {vocab}: at most {(1 << ID_BITS) - 1} words a language")
    rng = np.random.default_rng(seed)
    langs = [Language(rng, name, vocab) for name in LANGUAGES]
    tokens = Tokens(langs)
    # a source has copies with this probability: copies are 2.5 a family on average
    p_family = family_share / (1 - family_share) / 2.5
    os.makedirs(out, exist_ok=True)
    written = planted = true_pairs = listed = 0
    with open(os.path.join(out, "docs.jsonl"), "wb", buffering=1 << 22) as docs, open(os.path.join(out, "pairs.tsv"), "w", encoding="utf-8", buffering=1 << 20) as pairs:
        while written < n:
            lang_of = rng.choice(len(langs), size=CHUNK, p=SHARES)
            length = np.clip(rng.lognormal(np.log(MEDIAN_WORDS), SIGMA, CHUNK), MIN_WORDS, MAX_WORDS).astype(np.int64)
            copies = np.where(rng.random(CHUNK) < p_family, rng.integers(COPIES[0], COPIES[1] + 1, CHUNK), 0)
            words = [None] * CHUNK
            for li, lang in enumerate(langs):
                mine = np.flatnonzero(lang_of == li)
                if len(mine):
                    drawn = lang.draw(rng, int(length[mine].sum()))
                    for i, part in zip(mine, np.split(drawn, np.cumsum(length[mine])[:-1])):
                        words[i] = part
            # each document: (id, language, its text's index in `texts`); exact copies share it
            rows, texts = [], []
            for i in range(CHUNK):
                if written >= n:
                    break
                lang = langs[lang_of[i]]
                base = tokens.base[lang_of[i]]
                family = [(f"d{written:08d}", words[i])]
                source = len(texts)
                rows.append((family[0][0], lang.name, source))
                texts.append(words[i] + base)
                for _ in range(min(int(copies[i]), n - written - 1)):
                    id_ = f"d{written + len(family):08d}"
                    if rng.random() < EXACT_SHARE:
                        family.append((id_, words[i]))
                        rows.append((id_, lang.name, source))
                    else:
                        copy = edited(lang, words[i], float(rng.uniform(MIN_TARGET, 1.0)), rng)
                        family.append((id_, copy))
                        rows.append((id_, lang.name, len(texts)))
                        texts.append(copy + base)
                if len(family) > 1:
                    keys = [shingle_keys(idx) for _, idx in family]
                    for x in range(len(family)):
                        for y in range(x + 1, len(family)):
                            j = jaccard(keys[x], keys[y])
                            if j >= LISTED:
                                pairs.write(f"{family[x][0]}\t{family[y][0]}\t{j:.4f}\n")
                                listed += 1
                                true_pairs += j >= 0.9
                    planted += len(family) - 1
                written += len(family)
            # letters, spaces and periods only: JSON strings as they are
            text = tokens.texts(rng, texts)
            docs.write(b"".join(b'{"id": "%s", "lang": "%s", "text": "%s"}\n' % (id_.encode(), name.encode(), text[t]) for id_, name, t in rows))
    counts = {"documents": written, "planted_copies": planted, "pairs_listed": listed, "pairs_at_0.9": true_pairs}
    with open(os.path.join(out, "gen.json"), "w") as f:
        json.dump({"seed": seed, "family_share": family_share, "vocabulary": vocab, **counts}, f)
    print(json.dumps(counts))


def check(out, eval_dir):
    """Every pair at Jaccard >= 0.5 by the ground truth's own tokens and shingles, against
    ``pairs.tsv``: exits 1 naming the first difference."""
    sys.path.insert(0, eval_dir)
    import common  # shared/eval's tokenizer and word 3-shingles

    shingle = common.Shingler(3)
    ids, sets = [], []
    with open(os.path.join(out, "docs.jsonl"), encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            ids.append(d["id"])
            sets.append(shingle(common.tokenize(d["text"])))
    size = np.array([len(s) for s in sets], dtype=np.int64)
    # (shingle, document) pairs sorted by shingle: every two documents of one shingle share it
    sh = np.concatenate(sets)
    doc = np.repeat(np.arange(len(sets), dtype=np.int64), size)
    order = np.argsort(sh, kind="stable")
    sh, doc = sh[order], doc[order]
    starts = np.flatnonzero(np.r_[True, sh[1:] != sh[:-1]])
    ends = np.r_[starts[1:], len(sh)]
    keys = []
    for s, e in zip(starts[ends - starts > 1], ends[ends - starts > 1]):
        g = doc[s:e]
        a, b = np.triu_indices(len(g), 1)
        keys.append(g[a] * len(sets) + g[b])
    pair, inter = np.unique(np.concatenate(keys) if keys else np.empty(0, np.int64), return_counts=True)
    a, b = pair // len(sets), pair % len(sets)
    j = inter / (size[a] + size[b] - inter)
    found = {(ids[x], ids[y]): round(float(v), 4) for x, y, v in zip(a, b, j) if v >= LISTED}
    listed = {}
    with open(os.path.join(out, "pairs.tsv"), encoding="utf-8") as f:
        for line in f:
            x, y, v = line.rstrip("\n").split("\t")
            listed[(x, y)] = float(v)
    for p in sorted(set(found) | set(listed)):
        if p not in listed or p not in found or abs(found[p] - listed[p]) > 1e-4:
            raise SystemExit(f"{out}: pair {p}: the truth says {found.get(p)}, pairs.tsv says {listed.get(p)}")
    print(json.dumps({"documents": len(ids), "pairs_checked": len(found), "pairs_sharing_a_shingle": len(pair)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("-n", type=int, default=1 << 20, help="documents")
    ap.add_argument("--seed", type=int, default=48)
    ap.add_argument("--family-share", type=float, default=0.2, help="share of documents that are edited copies")
    ap.add_argument("--vocabulary", type=int, default=1 << 16, help="words per language")
    ap.add_argument("--check", metavar="EVAL_DIR", help="check OUT's pairs.tsv with EVAL_DIR/common.py instead of generating")
    a = ap.parse_args()
    if a.check:
        check(a.out, a.check)
    else:
        generate(a.out, a.n, a.seed, a.family_share, a.vocabulary)


if __name__ == "__main__":
    main()
