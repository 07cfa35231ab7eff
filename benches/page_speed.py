#!/usr/bin/env python3
"""The crawler's page, two builds side by side (issue 47, goal 2): microseconds a page of
`Index.find_or_insert_document` (one call a page, a new index with sketches, the default
decision: k = 8 confirmed at 0.90), of `fingerprint_document` alone, and of the Scrapy
middleware's whole `process_response` (on a running asyncio reactor, its default settings:
the thread-pool hop where a build makes one, the document call, the stats; no URL map),
each on the same real-text HTML pages.

    python3 benches/page_speed.py --pages DIR/docs.jsonl --base VENV_A --new VENV_B [--rounds 3] [--count 3000]

`docs.jsonl` holds HTML pages (`benches/gen_docs.py --html --median-bytes 7500`: 10 KB on
average). Each VENV has a simdex wheel and Scrapy installed. Every round runs both builds in
child processes, alternating which goes first; the table gives medians, the new/base ratios
of every round and the load average. CPU time (the process's, every thread's: the index's
background threads and the reactor's thread pool included) is what a page costs on a machine
shared with other work; wall time is what it took on this one.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CALLS = r"""
import json, os, sys, tempfile, time
import simdex
pages = [json.loads(l)["html"].encode() for l in open(sys.argv[1], encoding="utf-8")][: int(sys.argv[2])]
out = {"bytes": sum(map(len, pages)) / len(pages)}
with tempfile.TemporaryDirectory() as d:
    with simdex.Index(os.path.join(d, "one")) as idx:
        t, c = time.perf_counter(), time.process_time()
        found = 0
        for i, p in enumerate(pages):
            found += bool(idx.find_or_insert_document(p, i)[1])
        out["find_or_insert_document"] = (time.perf_counter() - t) / len(pages)
        out["find_or_insert_document cpu"] = (time.process_time() - c) / len(pages)
        out["found"] = found
        t, c = time.perf_counter(), time.process_time()
        for p in pages:
            idx.fingerprint_document(p)
        out["fingerprint_document"] = (time.perf_counter() - t) / len(pages)
        out["fingerprint_document cpu"] = (time.process_time() - c) / len(pages)
print(json.dumps(out))
"""

MIDDLEWARE = r"""
import json, logging, os, sys, tempfile, time
from twisted.internet import asyncioreactor
asyncioreactor.install()
from twisted.internet import reactor
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Request
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.test import get_crawler
import simdex.scrapy as sx

pages = [json.loads(l)["html"].encode() for l in open(sys.argv[1], encoding="utf-8")][: int(sys.argv[2])]
responses = [HtmlResponse(url=f"http://example.com/p/{i}", body=b, request=Request(f"http://example.com/p/{i}"), headers={"Content-Type": "text/html"}) for i, b in enumerate(pages)]
out = {}

class Spider:
    logger = logging.getLogger("bench")

d = tempfile.mkdtemp()
crawler = get_crawler(settings_dict={"SIMDEX_INDEX": os.path.join(d, "crawl"), "SIMDEX_LOG_INTERVAL": 0})
mw = sx.NearDuplicateMiddleware.from_crawler(crawler)

async def drive():
    spider = Spider()
    dropped = 0
    t, c = time.perf_counter(), time.process_time()
    for r in responses:
        try:
            await mw.process_response(r.request, r, spider)
        except IgnoreRequest:
            dropped += 1
    out["middleware"] = (time.perf_counter() - t) / len(responses)
    out["middleware cpu"] = (time.process_time() - c) / len(responses)
    out["dropped"] = dropped
    mw.spider_closed(spider)

def start():
    deferred_from_coro(drive()).addBoth(lambda r: (reactor.stop(), r)[1])

reactor.callWhenRunning(start)
reactor.run()
print(json.dumps(out))
"""


def child(venv, code, pages, count):
    py = os.path.join(venv, "bin", "python")
    with tempfile.TemporaryDirectory() as cwd:  # never the source tree's simdex package
        r = subprocess.run([py, "-c", code, pages, str(count)], capture_output=True, text=True, cwd=cwd)
    if r.returncode != 0:
        sys.exit(f"{py} failed:\n{r.stderr}")
    return json.loads(r.stdout)


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", required=True)
    ap.add_argument("--base", required=True, help="virtualenv with the baseline's wheel (and Scrapy)")
    ap.add_argument("--new", required=True, help="virtualenv with this build's wheel (and Scrapy)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--no-middleware", action="store_true")
    a = ap.parse_args()
    # the children run in an empty folder (never the source tree's simdex package)
    a.pages, a.base, a.new = (os.path.abspath(x) for x in (a.pages, a.base, a.new))
    print(f"load before {load()}", file=sys.stderr)
    samples = {"base": [], "new": []}
    for i in range(a.rounds):
        for which in ("base", "new") if i % 2 == 0 else ("new", "base"):
            venv = getattr(a, which)
            s = child(venv, CALLS, a.pages, a.count)
            if not a.no_middleware:
                s.update(child(venv, MIDDLEWARE, a.pages, a.count))
            samples[which].append(s)
            shown = ", ".join(f"{k} {v * 1e6:.0f} us" for k, v in s.items() if k.split()[0] in ("find_or_insert_document", "fingerprint_document", "middleware"))
            print(f"round {i + 1} {which}: {shown} (found {s['found']}, dropped {s.get('dropped', '-')}), load {load()}", file=sys.stderr)
    size = samples["new"][0]["bytes"]
    print(f"\n{a.count} pages, {size / 1000:.1f} KB on average; load after {load()}\n")
    print("| us a page (median of the rounds) | base wall | new wall | base CPU | new CPU | new / base, CPU (each round) |")
    print("|---|---|---|---|---|---|")
    keys = ["find_or_insert_document", "fingerprint_document"] + ([] if a.no_middleware else ["middleware"])
    med = lambda which, key: statistics.median(s[key] for s in samples[which]) * 1e6
    for key in keys:
        cpu = key + " cpu"
        rounds = ", ".join(f"{x[cpu] / y[cpu]:.2f}" for x, y in zip(samples["new"], samples["base"]))
        what = {"middleware": "Scrapy middleware `process_response`, whole"}.get(key, f"`{key}`")
        print(f"| {what} | {med('base', key):,.0f} | {med('new', key):,.0f} | {med('base', cpu):,.0f} | {med('new', cpu):,.0f} | {med('new', cpu) / med('base', cpu):.3f} ({rounds}) |")
    found = {w: sorted({s["found"] for s in samples[w]}) for w in samples}
    print(f"\nnear-duplicates found: base {found['base']}, new {found['new']}")


if __name__ == "__main__":
    main()
