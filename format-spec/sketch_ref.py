#!/usr/bin/env python3
"""Reference transcription of format-spec/sketch.md (recipes 1 and 2), independent of the Rust
code: it computes the worked example pinned by `sketch::tests::golden_sketch` and
`golden_sketch_of_recipe_1`.

Tokens as shared/eval/common.py makes them (NFKC, case-folded runs of word characters, each
Han/kana character a token); shingle hashes with sfh64 and combine of fingerprint_ref.py.

    python3 format-spec/sketch_ref.py        # prints the worked example's sketches
"""
import re
import unicodedata

from fingerprint_ref import M, combine, fmix64, sfh64

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
TOKEN = re.compile(f"[{CJK}]|[^\\W{CJK}]+")


def shingles(text):
    t = [sfh64(0, w.encode()) for w in TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())]
    if len(t) >= 3:
        return sorted({combine(combine(t[j], t[j + 1]), t[j + 2]) for j in range(len(t) - 2)})
    if len(t) == 2:
        return [combine(t[0], t[1])]
    return t


def draws():
    state = 0x5EED5EED5EED5EED
    while True:
        state = (state + 0x9E3779B97F4A7C15) & M
        yield fmix64(state)


def recipe1(s, n):
    d = draws()
    keys = [(next(d), next(d) | 1, next(d)) for _ in range(n)]
    out = []
    for x, a, c in keys:
        def h(v):
            y = ((v ^ x) * a) & M
            return y ^ (y >> 29)
        out.append(fmix64(min(s, key=h) ^ c) if s else 0)
    return out


def recipe2(s, n):
    """Rounds: every shingle offers one slot per round; the smallest (value, shingle) wins."""
    d = draws()
    cs = [next(d) for _ in range(n)]
    if not s:
        return [0] * n
    best = {}
    t = 0
    while len(best) < n:
        key = (0x6A09E667F3BCC908 + t * 0x9E3779B97F4A7C15) & M
        for v in s:
            h = fmix64(v ^ key)
            at = ((h >> 32) * n) >> 32
            best[at] = min(best.get(at, (M, 0)), ((t << 32) | (h & 0xFFFFFFFF), v))
        t += 1
    return [fmix64(best[i][1] ^ c) for i, c in enumerate(cs)]


def sketch(text, n=512, bits=1, version=2):
    values = (recipe2 if version == 2 else recipe1)(shingles(text), n)
    out = bytearray(n * bits // 8)
    for i, v in enumerate(values):
        for j in range(bits):
            if v >> j & 1:
                at = i * bits + j
                out[at // 8] |= 1 << (at % 8)
    return out.hex()


if __name__ == "__main__":
    text = "The cat sat on the mat; the dog sat on the log."
    for version in (2, 1):
        print(f"recipe {version}: {sketch(text, version=version)}")
        print(f"recipe {version}, hashes=8 bits=8: {sketch(text, 8, 8, version)}")
