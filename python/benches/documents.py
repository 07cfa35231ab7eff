#!/usr/bin/env python3
"""Documents per second through the crawler's document call, two builds side by side
(issue 35, item 1: a found match carries its similarity, so a near-duplicate is no longer
extracted, sketched and queried a second time).

    python3 python/benches/documents.py --base VENV_A --new VENV_B [--rounds 5] [--pages 2000]

Each VENV is a virtualenv with a simdex wheel installed (python/test.sh makes one under
target/python-test-venv; build the baseline's the same way in a worktree of it). Every
round runs both builds in child processes, alternating which goes first, on the same pages:
`pages` HTML pages of 2,000 words, half of them near copies of the other half (1% of words
edited), into a new index with sketches (the default), with the default decision (k = 8
confirmed by sketch). It times `find_or_insert_document` one page at a time and
`find_or_insert_documents` on the whole batch, and prints the medians and the new/base
ratios (pages per second).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, random, sys, tempfile, time
import simdex
n = int(sys.argv[1])
r = random.Random(20)
vocab = [f"w{i}" for i in range(20_000)]
base = [" ".join(r.choice(vocab) for _ in range(2000)) for _ in range(n // 2)]
docs = base + [" ".join(w if r.random() > 0.01 else "edit" for w in p.split()) for p in base]
docs = [f"<html><body><p>{t}</p></body></html>".encode() for t in docs]
ids = list(range(len(docs)))
out = {}
with tempfile.TemporaryDirectory() as d:
    with simdex.Index(os.path.join(d, "one"), durability="nosync") as idx:
        t = time.perf_counter()
        found = sum(1 for p, i in zip(docs, ids) if idx.find_or_insert_document(p, i)[1])
        out["one_s"] = time.perf_counter() - t
        out["one_found"] = found
    with simdex.Index(os.path.join(d, "many"), durability="nosync") as idx:
        t = time.perf_counter()
        got = idx.find_or_insert_documents(docs, ids)
        out["many_s"] = time.perf_counter() - t
        out["many_found"] = sum(1 for g in got if g[1])
print(json.dumps(out))
"""


def run(venv, pages):
    py = os.path.join(venv, "bin", "python")
    with tempfile.TemporaryDirectory() as cwd:  # never the source tree's simdex package
        r = subprocess.run([py, "-c", CHILD, str(pages)], capture_output=True, text=True, cwd=cwd, check=True)
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="virtualenv with the baseline's wheel")
    ap.add_argument("--new", required=True, help="virtualenv with this build's wheel")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pages", type=int, default=2000)
    a = ap.parse_args()
    samples = {"base": [], "new": []}
    for i in range(a.rounds):
        order = ("base", "new") if i % 2 == 0 else ("new", "base")
        for which in order:
            s = run(getattr(a, which), a.pages)
            samples[which].append(s)
            print(f"round {i + 1} {which}: one by one {a.pages / s['one_s']:.0f} pages/s ({s['one_found']} found), batch {a.pages / s['many_s']:.0f} pages/s ({s['many_found']} found)", file=sys.stderr)
    print(f"| measure | base | new | new / base |")
    print(f"|---|---|---|---|")
    for key, what in (("one_s", "`find_or_insert_document`, one call per page"), ("many_s", "`find_or_insert_documents`, the whole batch")):
        b = statistics.median(a.pages / s[key] for s in samples["base"])
        n = statistics.median(a.pages / s[key] for s in samples["new"])
        rounds = ", ".join(f"{(a.pages / x[key]) / (a.pages / y[key]):.2f}" for x, y in zip(samples["new"], samples["base"]))
        print(f"| {what}, {a.pages} pages (half near copies) | {b:,.0f} pages/s | {n:,.0f} pages/s | {n / b:.2f} (rounds {rounds}) |")
    found = {w: {s["one_found"] for s in samples[w]} | {s["many_found"] for s in samples[w]} for w in samples}
    print(f"\nnear-duplicates found: base {sorted(found['base'])}, new {sorted(found['new'])}")


if __name__ == "__main__":
    main()
