#!/usr/bin/env python3
"""Reference transcription of format-spec/fingerprint.md (recipe version 1), independent of the
Rust code: it computes the golden fingerprints pinned by tests/it/fingerprint.rs.

Limits: its tokenizer covers only texts whose words are runs of letters and digits separated
by spaces and simple punctuation (no '.', ':', ',', ';', "'" or '_' inside words), plus Han
ideographs one per word; that is, texts where UAX #29 has nothing subtle to decide.

    python3 format-spec/fingerprint_ref.py        # prints the golden table
"""
import math
import os
import re
import unicodedata

M = (1 << 64) - 1
K1, K2 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F
SEED_WORD, SEED_CHAR = 0, 0x636861726E677261


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def fmix64(x):
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M
    return x ^ (x >> 33)


def sfh64(seed, b):
    h = seed ^ ((len(b) * K1) & M)
    for i in range(0, len(b), 8):
        w = int.from_bytes(b[i:i + 8].ljust(8, b"\0"), "little")
        h = (rotl(h ^ rotl((w * K2) & M, 31), 27) * K1) & M
    return fmix64(h)


def combine(acc, nxt):
    return fmix64((acc * K1 + nxt) & M)


HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
WORD = re.compile(f"[{HAN}]|[^\\W_{HAN}]+")


def words(text):
    out = []
    for chunk in re.split(r"[ \t\n\r\f]+", text):
        norm = "".join(c.lower() for c in unicodedata.normalize("NFKC", chunk))
        out += WORD.findall(norm)
    return out


def stop_words(langs):
    src = open(os.path.join(os.path.dirname(__file__), "..", "tools", "fingerprint", "src", "stopwords.rs"), encoding="utf-8").read()
    names = {"en": "EN", "ru": "RU", "ar": "AR", "zh": "ZH", "de": "DE", "fr": "FR", "es": "ES"}
    out = set()
    for lang in langs:
        body = re.search(rf"const {names[lang]}: &\[&str\] = &\[(.*?)\];", src, re.S).group(1)
        out |= {sfh64(SEED_WORD, w.encode()) for w in re.findall(r'"([^"]*)"', body)}
    return out


def features(text, kinds, stop=()):
    stop = stop_words(stop)
    hs, kept = [], []
    for w in words(text):
        h = sfh64(SEED_WORD, w.encode())
        if h in stop:
            continue
        kept.append(w)
        hs.append(h)
        for kind in kinds:
            if kind == "w":
                yield h
            elif kind[0] == "w":
                n = int(kind[1:])
                if len(hs) >= n:
                    acc = hs[-n]
                    for x in hs[-n + 1:]:
                        acc = combine(acc, x)
                    yield acc
    for kind in kinds:
        if kind[0] == "w" and kind != "w" and 0 < len(hs) < int(kind[1:]):
            acc = hs[0]
            for x in hs[1:]:
                acc = combine(acc, x)
            yield acc
        if kind[0] == "c":
            n = int(kind[1:])
            joined = " ".join(kept)
            if 0 < len(joined) < n:
                yield sfh64(SEED_CHAR, joined.encode())
            for i in range(len(joined) - n + 1):
                yield sfh64(SEED_CHAR, joined[i:i + n].encode())


def simhash(feats, tf="tf", idf=None):
    counts = {}
    for h in feats:
        counts[h] = counts.get(h, 0) + 1
    v = [0] * 64
    for h, c in counts.items():
        w = {"tf": c, "logtf": 1 + int(math.log2(c)), "binary": 1}[tf]
        if idf is not None:
            w *= idf[0].get(h, idf[1])
        for i in range(64):
            v[i] += w if (h >> i) & 1 else -w
    return sum(1 << i for i in range(64) if v[i] > 0)


def learn_idf(texts, kinds):
    df = {}
    for t in texts:
        for h in set(features(t, kinds)):
            df[h] = df.get(h, 0) + 1
    n = len(texts)
    weight = lambda d: min(max(round(1000 * math.log((1 + n) / (1 + d))), 1), 65535)
    return {h: weight(d) for h, d in df.items()}, weight(0)


EN = ("Near-duplicate web documents are abundant. Two such documents differ from each other in "
      "a very small portion that displays advertisements, for example. Such differences are "
      "irrelevant for web search. So the quality of a web crawler increases if it can assess "
      "whether a newly crawled web page is a near-duplicate of a previously crawled web page or not.")
RU = ("Почти одинаковые веб страницы встречаются очень часто и отличаются друг от друга лишь "
      "небольшой частью например рекламой Такие различия не важны для поиска")
ZH = "你妈妈喊你回家吃饭哦,回家罗回家罗"
CORPUS = [EN, RU, ZH, "the cat sat on the mat", "we all scream for ice cream",
          "Near-duplicate web documents are abundant, and web search engines crawl the web daily."]

GOLDEN = [
    ("default (w2, binary)", EN, ["w2"], "binary", (), None),
    ("short_text (w, tf, all stop words)", "the cat sat on the mat", ["w"], "tf", ("en", "ru", "ar", "zh", "de", "fr", "es"), None),
    ("w3, logtf", RU, ["w3"], "logtf", (), None),
    ("c4, tf", ZH, ["c4"], "tf", (), None),
    ("w + w2, tf, en stop words", EN, ["w", "w2"], "tf", ("en",), None),
    ("w2, binary, IDF of CORPUS", EN, ["w2"], "binary", (), "idf"),
]

if __name__ == "__main__":
    for name, text, kinds, tf, stop, idf in GOLDEN:
        table = learn_idf(CORPUS, kinds) if idf else None
        print(f"{name}: {simhash(features(text, kinds, stop), tf, table):016x}")
