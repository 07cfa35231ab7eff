#!/usr/bin/env python3
"""Issue 20 item 1: recall and wrong drops of the Scrapy middleware on a real crawl.

Real pages (the Rust books and references of the installed stable toolchain's HTML docs, as
they are: navigation, sidebars, scripts), planted variants of some of them made the way sites
make them (a sponsored block, a changed date line, a few words replaced, another navigation
bar), the ground truth from `../shared/eval` (its text extraction and exact Jaccard of word
3-shingles, >= 0.9; no simdex code), served by Python's http.server on 127.0.0.1 and crawled
by a real Scrapy crawl through `simdex.scrapy.NearDuplicateMiddleware`, once per setting.

A true pair is *caught* when the crawl drops one of its pages; a drop is *wrong* when the
dropped page has no true partner at all. Prints a table and writes `results.json` to --work.

    python3 benches/crawl_quality.py --python target/python-test-venv/bin/python --work /tmp/cq

Needs selectolax and numpy for the system python3 (the ground truth's), and a python with the
simdex wheel and scrapy for the crawl (python/test.sh makes one: target/python-test-venv).
"""

import argparse
import functools
import glob
import http.server
import json
import os
import random
import re
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

CRAWL = """
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess

start, index, out, extra = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])

class Site(scrapy.Spider):
    name = "site"

    async def start(self):
        yield scrapy.Request(start)

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            if href.startswith("p"):
                yield response.follow(href)

process = CrawlerProcess(settings={
    "DOWNLOADER_MIDDLEWARES": {"simdex.scrapy.NearDuplicateMiddleware": 540},
    "SIMDEX_INDEX": index,
    "CONCURRENT_REQUESTS": 8,
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": False,
    "ROBOTSTXT_OBEY": False,
    "FEEDS": {out: {"format": "jsonlines"}},
    **extra,
})
crawler = process.create_crawler(Site)
process.crawl(crawler)
process.start()
print(json.dumps({k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simdex/")}))
"""

FILLER = ("offer special limited partner today discount readers subscribe newsletter weekly "
          "premium hosting cloud servers fast reliable secure support team sign free trial").split()


def real_pages(toolchain_glob, minimum, count, rng, extract_text, tokenize):
    """`count` real pages of at least `minimum` words, no two with the same text."""
    books = ("book", "reference", "cargo", "nomicon", "rust-by-example", "edition-guide", "rustc", "embedded-book", "rustdoc", "style-guide", "unstable-book")
    paths = []
    for root in sorted(glob.glob(os.path.expanduser(toolchain_glob))):
        for b in books:
            paths += sorted(glob.glob(os.path.join(root, b, "**", "*.html"), recursive=True))
    rng.shuffle(paths)
    chosen, seen = [], set()
    for p in paths:
        if len(chosen) == count:
            break
        if os.path.basename(p) in ("print.html", "index.html", "404.html", "toc.html"):
            continue
        text = extract_text(p)
        if len(tokenize(text)) < minimum or text in seen:
            continue
        seen.add(text)
        chosen.append(p)
    return chosen


def insert_in_main(html, fragment):
    """`fragment` at the start of the page's main content."""
    m = re.search(r"<main[^>]*>", html) or re.search(r"<body[^>]*>", html)
    return html[: m.end()] + fragment + html[m.end():] if m else fragment + html


def variant(html, kind, rng):
    if kind == "sponsored":
        block = " ".join(rng.choice(FILLER) for _ in range(25))
        return insert_in_main(html, f'<div class="ad"><p>Sponsored: {block}.</p></div>')
    if kind == "date":
        return insert_in_main(html, f"<p>Last updated on 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} by the documentation team.</p>")
    if kind == "words":
        nodes = [m for m in re.finditer(r">([^<>]{60,})<", html)]
        for m in sorted(rng.sample(nodes, min(4, len(nodes))), key=lambda m: -m.start()):
            words = list(re.finditer(r"\b[a-z]{4,}\b", m.group(1)))
            if words:
                w = rng.choice(words)
                at = m.start(1) + w.start()
                html = html[:at] + rng.choice(FILLER) + html[at + len(w.group(0)):]
        return html
    if kind == "nav":
        links = "".join(f'<a href="#s{i}">section {i}</a> ' for i in range(rng.randint(10, 30)))
        return insert_in_main(html, f'<nav class="site-nav">{links}</nav><div class="breadcrumbs">home / docs / page</div>')
    raise ValueError(kind)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(root):
    """A static server of `root` on 127.0.0.1 in a thread of this process: (base URL, server)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/", server


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True, help="a python with the simdex wheel and scrapy")
    ap.add_argument("--work", required=True)
    ap.add_argument("--eval", default=os.path.join(HERE, "..", "..", "shared", "eval"))
    ap.add_argument("--toolchains", default="~/.rustup/toolchains/stable-*/share/doc/rust/html")
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--planted", type=int, default=80)
    ap.add_argument("--min-words", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.eval))
    from common import Shingler, tokenize
    from extract import extract_text

    rng = random.Random(args.seed)
    site = os.path.join(args.work, "site")
    os.makedirs(site, exist_ok=True)
    sources = real_pages(args.toolchains, args.min_words, args.pages, rng, extract_text, tokenize)
    names = []
    for i, p in enumerate(sources):
        name = f"p{i:04d}.html"
        with open(p, "rb") as f:
            open(os.path.join(site, name), "wb").write(f.read())
        names.append(name)
    kinds = ["sponsored", "date", "words", "nav"]
    planted = []
    for j, i in enumerate(rng.sample(range(len(names)), min(args.planted, len(names)))):
        kind = kinds[j % len(kinds)]
        html = open(os.path.join(site, names[i]), encoding="utf-8", errors="replace").read()
        name = f"p{i:04d}-{kind}.html"
        open(os.path.join(site, name), "w", encoding="utf-8").write(variant(html, kind, rng))
        names.append(name)
        planted.append((names[i], name, kind))
    order = list(names)
    rng.shuffle(order)
    links = "".join(f'<li><a href="{n}">{n}</a></li>' for n in order)
    open(os.path.join(site, "index.html"), "w").write(f"<html><body><ul>{links}</ul></body></html>")

    # the ground truth: exact Jaccard of word 3-shingles over every pair of pages
    shingle = Shingler(3)
    sets = {n: shingle(tokenize(extract_text(os.path.join(site, n)))) for n in names}
    true_pairs = {}
    for a_i, a in enumerate(names):
        for b in names[a_i + 1:]:
            sa, sb = sets[a], sets[b]
            inter = len(np.intersect1d(sa, sb, assume_unique=True))
            union = len(sa) + len(sb) - inter
            if union and inter / union >= 0.9:
                true_pairs[(a, b)] = inter / union
    partner = {n for pair in true_pairs for n in pair}
    planted_true = [(a, b, k) for a, b, k in planted if (a, b) in true_pairs or (b, a) in true_pairs]
    print(f"{len(sources)} real pages, {len(planted)} planted variants ({len(planted_true)} at Jaccard >= 0.9), "
          f"{len(true_pairs)} true pairs in all ({len(true_pairs) - len(planted_true)} not planted)")

    base, server = serve(site)
    results = {"pages": len(sources), "planted": len(planted), "planted_true": len(planted_true), "true_pairs": len(true_pairs), "runs": []}
    try:
        for label, extra in (("default (k = 8 confirmed at 0.90)", {}), ("SIMDEX_K = 3 (the old default)", {"SIMDEX_K": 3}), ("SIMDEX_K = 3, confirm off", {"SIMDEX_K": 3})):
            if "confirm off" in label:
                # fingerprints alone: an index without sketches
                extra = dict(extra)
                pre = os.path.join(args.work, "plain-index")
                subprocess.run([args.python, "-c", f"import simdex; simdex.Index({pre!r}, sketches=False).close()"], check=True)
                index = pre
            else:
                index = os.path.join(args.work, f"index-{len(results['runs'])}")
            out = os.path.join(args.work, f"items-{len(results['runs'])}.jsonl")
            for f in (out,):
                if os.path.exists(f):
                    os.remove(f)
            t = time.monotonic()
            p = subprocess.run([args.python, "-c", CRAWL, base + "index.html", index, out, json.dumps(extra)], capture_output=True, text=True, timeout=1200)
            seconds = time.monotonic() - t
            if p.returncode != 0:
                sys.exit(p.stderr[-3000:])
            stats = json.loads(p.stdout.strip().splitlines()[-1])
            kept = {json.loads(line)["url"].rsplit("/", 1)[1] for line in open(out)}
            dropped = set(names) - kept
            caught = sum(1 for a, b, _ in planted_true if a in dropped or b in dropped)
            by_kind = {k: (sum(1 for a, b, kk in planted_true if kk == k and (a in dropped or b in dropped)), sum(1 for *_, kk in planted_true if kk == k)) for k in kinds}
            all_caught = sum(1 for a, b in true_pairs if a in dropped or b in dropped)
            wrong = sorted(n for n in dropped if n not in partner)
            run = {"setting": label, "seconds": round(seconds, 1), "stats": stats, "planted_caught": caught, "by_kind": by_kind,
                   "true_pairs_caught": all_caught, "dropped": len(dropped), "wrong_drops": wrong}
            results["runs"].append(run)
            print(f"\n{label}: {seconds:.1f} s, dropped {len(dropped)}; planted pairs caught {caught}/{len(planted_true)} "
                  f"({', '.join(f'{k} {c}/{n}' for k, (c, n) in by_kind.items())}); all true pairs {all_caught}/{len(true_pairs)}; "
                  f"wrong drops {len(wrong)} {wrong[:5]}")
    finally:
        server.shutdown()
    json.dump(results, open(os.path.join(args.work, "results.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
