#!/usr/bin/env python3
"""simdex's visible text of HTML pages against the ground truth's (`../shared/eval/extract.py`,
selectolax), and what the difference does to the sketch's estimate of the definition's Jaccard.

usage: python3 benches/extraction_bias.py --data DATA NAME=DOCS.jsonl [NAME=DOCS.jsonl ...]
           [--show N]

DATA is a folder made by shared/eval's extract.py and groundtruth.py (docs.jsonl: the ground
truth's texts; pairs.tsv: every LSH candidate pair with its exact Jaccard). Each DOCS.jsonl is
written by `cargo bench -p simdex-fingerprint --bench quality -- --write-docs FILE` with
`--manifest DATA/manifest.tsv` (simdex's extraction of the same HTML files) or `--docs
DATA/docs.jsonl` (the ground truth's texts, sketched by simdex): `{"id", "text", "sketch"}` a
line, the sketch in hex (the default recipe: 512 one-bit values).

Prints, per NAME: how often its text of a page has the ground truth's word 3-shingle set
(tokens and shingles of `shared/eval/common.py`), and then, by band of the ground truth's
exact Jaccard (the pairs of pairs.tsv at 0.80 or more), the sketch estimate minus the exact
Jaccard (bias, standard deviation), the pairs the estimate puts on the wrong side of 0.90, and
how far the Jaccard of NAME's own texts strays from the ground truth's (the extraction's share
of the bias). `--show N` lists the N pages whose texts differ most, with the tokens one side
has and the other lacks.
"""

import argparse
import collections
import json
import os
import sys

import numpy as np

BANDS = [0.80, 0.85, 0.88, 0.90, 0.92, 0.94, 0.97, 1.0, float("inf")]
THRESHOLD = 0.9


def eval_modules(data):
    """common.py of shared/eval (next to extract.py): the ground truth's tokenizer."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.environ.get("SIMDEX_EVAL"), os.path.join(here, "..", "..", "shared", "eval"), "/work/shared/eval"):
        if d and os.path.exists(os.path.join(d, "common.py")):
            sys.path.insert(0, d)
            import common  # noqa: E402

            return common
    raise SystemExit("cannot find shared/eval/common.py (set SIMDEX_EVAL)")


def load(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out[d["id"]] = d
    return out


def estimate(a, b):
    """The sketch's resemblance estimate (format-spec/sketch.md, section 5; 1-bit values)."""
    n = len(a) * 4
    differ = bin(int(a, 16) ^ int(b, 16)).count("1")
    return min(1.0, max(0.0, 2.0 * (n - differ) / n - 1.0))


def jaccard(a, b):
    inter = np.intersect1d(a, b, assume_unique=True).size
    union = a.size + b.size - inter
    return inter / union if union else 1.0


def band_of(j):
    for lo, hi in zip(BANDS, BANDS[1:]):
        if lo <= j < hi:
            return lo, hi
    return None


def label(lo, hi):
    return "1 (equal)" if hi == float("inf") else f"{lo:.2f}-{hi:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--show", type=int, default=0)
    ap.add_argument("runs", nargs="+", metavar="NAME=DOCS.jsonl")
    a = ap.parse_args()
    common = eval_modules(a.data)
    shingler = common.Shingler(3)
    truth = {d["id"]: d["text"] for d in common.read_docs(a.data)}
    truth_sets = {i: shingler(common.tokenize(t)) for i, t in truth.items()}
    pairs = []
    with open(os.path.join(a.data, "pairs.tsv"), encoding="utf-8") as f:
        for line in f:
            x, y, j = line.rstrip("\n").split("\t")
            if float(j) >= BANDS[0]:
                pairs.append((x, y, float(j)))
    print(f"{len(truth)} documents, {len(pairs)} pairs at exact Jaccard >= {BANDS[0]:.2f} ({a.data})")

    for spec in a.runs:
        name, path = spec.split("=", 1)
        docs = load(path)
        missing = [i for i in truth if i not in docs]
        if missing:
            raise SystemExit(f"{path}: {len(missing)} documents of {a.data} missing, e.g. {missing[0]}")
        sets = {i: shingler(common.tokenize(docs[i]["text"])) for i in truth}
        agree = {i: jaccard(sets[i], truth_sets[i]) for i in truth}
        same = sum(1 for v in agree.values() if v == 1.0)
        cuts = [(0.99, 1.0), (0.95, 0.99), (0.90, 0.95), (0.0, 0.90)]
        print(f"\n## {name}: {path}\n")
        print(f"pages whose shingle set is the ground truth's: {same} of {len(truth)} ({same / len(truth):.2%}); "
              + ", ".join(f"{sum(1 for v in agree.values() if lo <= v < hi)} at {lo:.2f}-{hi:.2f}" for lo, hi in cuts))
        rows = collections.OrderedDict((band_of(b + 1e-9), []) for b in BANDS[:-1])
        for x, y, j in pairs:
            est = estimate(docs[x]["sketch"], docs[y]["sketch"])
            own = jaccard(sets[x], sets[y])
            rows[band_of(j)].append((est - j, own - j, (j >= THRESHOLD) != (est >= THRESHOLD)))
        print()
        print("| exact Jaccard | pairs | bias | sd | wrong side of 0.90 | own texts' Jaccard minus exact | pairs whose own Jaccard differs |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        pooled = []
        for (lo, hi), r in rows.items():
            if not r:
                continue
            d = np.array([x[0] for x in r])
            e = np.array([x[1] for x in r])
            print(f"| {label(lo, hi)} | {len(r):,} | {d.mean():+.4f} | {d.std(ddof=1) if len(r) > 1 else 0:.4f} | "
                  f"{sum(x[2] for x in r):,} | {e.mean():+.4f} | {int(np.count_nonzero(np.abs(e) > 1e-5)):,} |")
            if lo >= 0.88 and hi <= 0.92:
                pooled.extend(r)
        if pooled:
            d = np.array([x[0] for x in pooled])
            e = np.array([x[1] for x in pooled])
            print(f"| **at the threshold, 0.88-0.92** | {len(pooled):,} | **{d.mean():+.4f}** | **{d.std(ddof=1):.4f}** | "
                  f"{sum(x[2] for x in pooled):,} | {e.mean():+.4f} | {int(np.count_nonzero(np.abs(e) > 1e-5)):,} |")
        if a.show:
            print(f"\nthe {a.show} pages whose texts differ most (shingle-set Jaccard against the ground truth's):")
            for i in sorted(agree, key=agree.get)[: a.show]:
                mine, theirs = collections.Counter(common.tokenize(docs[i]["text"])), collections.Counter(common.tokenize(truth[i]))
                extra, lack = mine - theirs, theirs - mine
                print(f"  {agree[i]:.3f} {i}: simdex has {sum(extra.values())} more tokens {list(extra)[:12]}, "
                      f"{sum(lack.values())} fewer {list(lack)[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
