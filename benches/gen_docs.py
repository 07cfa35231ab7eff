#!/usr/bin/env python3
"""Writes a corpus of documents made of real sentences, with planted exact and near duplicates:
the corpus the document benches (dedup, the crawler's page, simdex.spark) run on.

    python3 benches/gen_docs.py --docs 65536 --out DIR [--seed 1] [--html] [--source DOCS_DIR]

Writes DIR/docs.jsonl (one document a line: {"id": "d0000042", "text": ...}, or "html" with
--html: the text as paragraphs in a page template with navigation, scripts and a footer that
visible-text extraction drops) and DIR/planted.tsv (kind<TAB>id<TAB>of_id<TAB>edits, one line
per planted document: `exact` a byte-identical copy, `near` a copy with `edits` word edits or
one sentence dropped or added; `of_id` is the document it copies).

Sentences: the visible text of the HTML books under the Rust toolchain's documentation
(`--source`, default the newest rustup toolchain's share/doc/rust/html: the book, the
reference, the nomicon, Rust by Example, cargo, rustc, the edition and embedded guides, the
error index), split at sentence ends, 4 to 60 words, each sentence once, in file order. The
same source and seed give the same bytes (the generator is a splitmix64 of its own, so no
Python version changes it); the source's sentence count and a hash of its sentences are
printed, to say which text a corpus was made of.

Documents: a length drawn log-normally (median `--median-bytes`, default 5,000, sigma 0.6,
within 300 bytes and 12 medians: 6 KB on average by default), filled with sentences drawn uniformly from the pool, a third of them with
one word replaced by a random word of the pool's vocabulary (so that the pool's sentences
recur with variations, as boilerplate does). Of the documents, `--exact` (default 2%) are
byte-identical copies of an earlier original and `--near` (default 6%) near copies: 1, 2, 4,
8, 16 or 32 random word edits (replace, insert or delete), or one sentence dropped or added.
"""

import argparse
import glob
import hashlib
import html as htmlmod
import html.parser
import json
import math
import os
import re
import sys

MASK = (1 << 64) - 1
BOOKS = ["book", "reference", "nomicon", "rust-by-example", "cargo", "rustc", "edition-guide", "embedded-book", "error_codes"]


class SplitMix:
    """splitmix64: a seeded generator whose output no Python release changes."""

    def __init__(self, seed):
        self.s = (seed * 0x9E3779B97F4A7C15) & MASK

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n

    def unit(self):
        return (self.next() >> 11) / float(1 << 53)

    def normal(self):
        # Box-Muller, one value a call
        u = max(self.unit(), 1e-300)
        return math.sqrt(-2.0 * math.log(u)) * math.cos(2 * math.pi * self.unit())


class VisibleText(html.parser.HTMLParser):
    """The text of a page's <main> (or body) outside code, scripts, styles and navigation."""

    SKIP = {"script", "style", "nav", "pre", "header", "footer", "head", "title"}
    BLOCK = {"p", "li", "h1", "h2", "h3", "h4", "td", "div", "br", "dd", "dt", "blockquote"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.skip = 0
        self.parts = []

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip += 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skip > 0:
            self.skip -= 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.skip == 0:
            # line breaks in the page's source are spaces; only block tags end a line
            self.parts.append(re.sub(r"\s+", " ", data))


SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])|\n")


def sentences_of(source):
    """The distinct sentences of the books under `source`, in file order."""
    seen = set()
    out = []
    for book in BOOKS:
        for path in sorted(glob.glob(os.path.join(source, book, "**", "*.html"), recursive=True)):
            p = VisibleText()
            with open(path, encoding="utf-8", errors="replace") as f:
                p.feed(f.read())
            text = "".join(p.parts)
            for s in SENTENCE_END.split(text):
                s = " ".join(s.split())
                n = len(s.split())
                if 4 <= n <= 60 and s not in seen:
                    seen.add(s)
                    out.append(s)
    return out


def default_source():
    found = sorted(glob.glob(os.path.expanduser("~/.rustup/toolchains/*/share/doc/rust/html")))
    pinned = [d for d in found if "/1.95.0-" in d]
    if pinned:
        return pinned[0]
    if not found:
        sys.exit("no Rust documentation found under ~/.rustup/toolchains; give --source DIR")
    return found[-1]


TEMPLATE_HEAD = (
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>\n'
    '<script>var site = {{"page": "{id}", "theme": "light"}};</script>\n<style>body {{ margin: 0 }}</style></head>\n'
    '<body><header><a href="/">Home</a> <a href="/docs">Docs</a> <a href="/blog">Blog</a></header>\n'
    '<nav><ul><li><a href="/a">Getting started</a></li><li><a href="/b">Reference</a></li><li><a href="/c">Community</a></li></ul></nav>\n<main>\n'
)
TEMPLATE_TAIL = '</main>\n<footer>Copyright the authors. <a href="/privacy">Privacy</a></footer>\n<script src="/static/site.js"></script></body></html>\n'


def page(doc_id, paragraphs):
    body = "".join(f"<p>{htmlmod.escape(p, quote=False)}</p>\n" for p in paragraphs)
    title = htmlmod.escape(paragraphs[0][:60] if paragraphs else doc_id)
    return TEMPLATE_HEAD.format(title=title, id=doc_id) + body + TEMPLATE_TAIL


class Generator:
    def __init__(self, pool, seed, median):
        self.pool = pool
        self.median = median
        self.rng = SplitMix(seed)
        vocab = sorted({w for s in pool for w in s.split()})
        self.vocab = vocab

    def sentence(self):
        s = self.pool[self.rng.below(len(self.pool))]
        if self.rng.below(3) == 0:
            words = s.split()
            words[self.rng.below(len(words))] = self.vocab[self.rng.below(len(self.vocab))]
            s = " ".join(words)
        return s

    def original(self):
        target = min(12 * self.median, max(300, int(self.median * math.exp(0.6 * self.rng.normal()))))
        out, size = [], 0
        while size < target:
            s = self.sentence()
            out.append(s)
            size += len(s) + 1
        return out

    def near(self, sentences):
        """A near copy: word edits, or one sentence dropped or added. Returns (sentences, edits)."""
        rng = self.rng
        kind = rng.below(8)
        out = list(sentences)
        if kind == 0 and len(out) > 2:
            del out[rng.below(len(out))]
            return out, "drop1"
        if kind == 1:
            out.insert(rng.below(len(out) + 1), self.sentence())
            return out, "add1"
        edits = [1, 2, 4, 8, 16, 32][rng.below(6)]
        for _ in range(edits):
            i = rng.below(len(out))
            words = out[i].split()
            j = rng.below(len(words))
            op = rng.below(3)
            if op == 0:
                words[j] = self.vocab[rng.below(len(self.vocab))]
            elif op == 1:
                words.insert(j, self.vocab[rng.below(len(self.vocab))])
            elif len(words) > 1:
                del words[j]
            out[i] = " ".join(words)
        return out, str(edits)


def count(s):
    """65536 or 2^16."""
    base, _, power = s.partition("^")
    return int(base) ** int(power) if power else int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=count, required=True, help="documents (65536, 2^16, ...)")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--html", action="store_true", help="documents as HTML pages ('html' field)")
    ap.add_argument("--exact", type=float, default=0.02, help="share of exact copies")
    ap.add_argument("--near", type=float, default=0.06, help="share of near copies")
    ap.add_argument("--source", default=None, help="folder of the Rust documentation's HTML")
    ap.add_argument("--median-bytes", type=int, default=5000, help="median text length of a document")
    a = ap.parse_args()
    source = a.source or default_source()
    pool = sentences_of(source)
    if len(pool) < 1000:
        sys.exit(f"only {len(pool)} sentences under {source}: give --source")
    digest = hashlib.sha256("\n".join(pool).encode()).hexdigest()[:16]
    print(f"source {source}: {len(pool)} sentences, sha256 {digest}", file=sys.stderr)
    gen = Generator(pool, a.seed, a.median_bytes)
    rng = gen.rng
    os.makedirs(a.out, exist_ok=True)
    originals = []  # (id, sentences) of the documents copies are made of
    total = 0
    field = "html" if a.html else "text"
    with open(os.path.join(a.out, "docs.jsonl"), "w", encoding="utf-8") as docs, open(os.path.join(a.out, "planted.tsv"), "w", encoding="utf-8") as planted:
        for n in range(a.docs):
            doc_id = f"d{n:07d}"
            r = rng.unit()
            if originals and r < a.exact:
                of_id, sentences = originals[rng.below(len(originals))]
                planted.write(f"exact\t{doc_id}\t{of_id}\t0\n")
                body = page(of_id, sentences) if a.html else " ".join(sentences)
            elif originals and r < a.exact + a.near:
                of_id, source_sentences = originals[rng.below(len(originals))]
                sentences, edits = gen.near(source_sentences)
                planted.write(f"near\t{doc_id}\t{of_id}\t{edits}\n")
                body = page(doc_id, sentences) if a.html else " ".join(sentences)
            else:
                sentences = gen.original()
                # keep a bounded sample of originals to copy from (a reservoir of 4096)
                if len(originals) < 4096:
                    originals.append((doc_id, sentences))
                else:
                    originals[rng.below(4096)] = (doc_id, sentences)
                body = page(doc_id, sentences) if a.html else " ".join(sentences)
            line = json.dumps({"id": doc_id, field: body}, ensure_ascii=False)
            docs.write(line + "\n")
            total += len(line.encode()) + 1
    print(f"wrote {a.docs} documents, {total / 1e6:.1f} MB, to {a.out}/docs.jsonl (planted: {a.out}/planted.tsv)", file=sys.stderr)


if __name__ == "__main__":
    main()
