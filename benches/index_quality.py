#!/usr/bin/env python3
"""Issue 39's quality check: precision, recall and F1 of `simdex dedup` against the ground
truth of `../shared/eval` (exact Jaccard of word 3-shingles >= 0.9), for one or more builds,
on the in-memory path (`dedup DOCS --pairs`) and on the index path the crawler's check runs
(a first `dedup DOCS --index DIR` adds every document with its sketch; a second checks each
document against the index, k = 8 confirmed by sketch at 0.90, and reports its stored
matches: the (document, stored document) pairs other than itself are scored).

usage: python3 benches/index_quality.py --data DATA --work DIR NAME=SIMDEX [NAME="SIMDEX FLAGS" ...]

DATA is a folder made by shared/eval's extract.py and groundtruth.py (docs.jsonl, pairs.tsv).
FLAGS (optional) are passed to every `dedup` run of that build (e.g. `--no-band-candidates`:
the check before band candidates). Prints a markdown table, one row per build and path, and
writes each path's pairs to DIR/NAME/{pairs,index-pairs}.tsv (for `benches/dedup_bands.py
--data DATA NAME=DIR/NAME/index-pairs.tsv`: misses and false pairs by band of Jaccard).
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time


def truth(data, threshold=0.9):
    pairs = set()
    with open(os.path.join(data, "pairs.tsv"), encoding="utf-8") as f:
        for line in f:
            a, b, j = line.rstrip("\n").split("\t")
            if float(j) >= threshold:
                pairs.add((a, b) if a < b else (b, a))
    return pairs


def score(reported, true):
    hit = len(reported & true)
    p = hit / len(reported) if reported else 0.0
    r = hit / len(true) if true else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return len(reported), p, r, f1


def memory_pairs(simdex, flags, docs, out):
    subprocess.run([simdex, "dedup", docs, "--pairs", out, *flags], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pairs = set()
    with open(out, encoding="utf-8") as f:
        for line in f:
            a, b = line.split("\t")[:2]
            pairs.add((a, b) if a < b else (b, a))
    return pairs


def index_pairs(simdex, flags, docs, work):
    idx = os.path.join(work, "idx")
    shutil.rmtree(idx, ignore_errors=True)
    subprocess.run([simdex, "dedup", docs, "--index", idx, *flags], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report = os.path.join(work, "report.jsonl")
    start = time.monotonic()
    subprocess.run([simdex, "dedup", docs, "--index", idx, "--report", report, *flags], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.monotonic() - start
    records = [json.loads(l) for l in open(report, encoding="utf-8")]
    indexed = [r for r in records if r.get("kind") == "indexed"]
    member_of = {r["index_doc_id"]: r["member"] for r in indexed}
    pairs = set()
    for r in indexed:
        for m in r["matches"]:
            other = member_of.get(m["index_doc_id"])
            if other is not None and other != r["member"]:
                a, b = r["member"], other
                pairs.add((a, b) if a < b else (b, a))
    with open(os.path.join(work, "index-pairs.tsv"), "w", encoding="utf-8") as f:
        f.writelines(f"{a}\t{b}\n" for a, b in sorted(pairs))
    return pairs, seconds


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("builds", nargs="+", help="NAME=SIMDEX")
    a = p.parse_args()
    true = truth(a.data)
    docs = os.path.join(a.data, "docs.jsonl")
    print(f"{len(true)} true pairs (Jaccard >= 0.9) in {docs}\n")
    print("| build | path | reported | precision | recall | F1 | second run |")
    print("|---|---|---|---|---|---|---|")
    for spec in a.builds:
        name, command = spec.split("=", 1)
        simdex, *flags = shlex.split(command)
        work = os.path.join(a.work, name)
        os.makedirs(work, exist_ok=True)
        n, pr, rc, f1 = score(memory_pairs(simdex, flags, docs, os.path.join(work, "pairs.tsv")), true)
        print(f"| {name} | `dedup --pairs` (in memory) | {n} | {pr:.4f} | {rc:.4f} | {f1:.4f} | - |")
        pairs, secs = index_pairs(simdex, flags, docs, work)
        n, pr, rc, f1 = score(pairs, true)
        print(f"| {name} | `dedup --index` (the crawler's check) | {n} | {pr:.4f} | {rc:.4f} | {f1:.4f} | {secs:.1f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
