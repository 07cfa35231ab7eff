#!/usr/bin/env python3
"""Rules for the crawler's index check scored on a corpus's candidate pairs, without building an
index: what a rule on (fingerprint distance, sketch estimate) would score.

usage: simdex dedup DATA/docs.jsonl [--no-idf] --no-second-look --confirm-threshold 0.80 --pairs CAND
       python3 benches/check_rules.py --data DATA --candidates CAND [--k 8]

CAND holds every pair within k = 8 bits or sharing a sketch band (dedup's candidates) estimated
at 0.80 or more, with its distance and estimate (`id_a id_b distance estimate`); DATA is a
folder of shared/eval (pairs.tsv: exact Jaccard). Estimates of the default sketch are multiples
of 1/256. The index's check differs from this model only where the index's design k is below
the check's k (pairs between the two are found through a shared band: about 99% of them near
the threshold): the model's figure for today's rule is printed first, to set beside
`benches/index_quality.py`'s.

Rules (t = 0.90, est >= X):
  today        within k: t; beyond k (band candidates): t + 0.0167
  within k     within k: t; none beyond
  margin M     within k: t; beyond k: t + M
  weighted     at any distance d: t + (d - 6) / 512, i.e. 2 x (sketch bits differing) + d <= 56:
               a fingerprint bit counts half a sketch bit
"""

import argparse
import math
import sys


def load(data, candidates):
    jaccard = {}
    with open(f"{data}/pairs.tsv", encoding="utf-8") as f:
        for line in f:
            a, b, j = line.rstrip("\n").split("\t")
            jaccard[(a, b) if a < b else (b, a)] = float(j)
    true = {p for p, j in jaccard.items() if j >= 0.9}
    pairs = {}
    with open(candidates, encoding="utf-8") as f:
        for line in f:
            a, b, d, e = line.rstrip("\n").split("\t")[:4]
            pairs[(a, b) if a < b else (b, a)] = (int(d), round(float(e) * 256))
    return true, jaccard, pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--k", type=int, default=8)
    a = ap.parse_args()
    true, jaccard, pairs = load(a.data, a.candidates)
    k = a.k

    def grid(x):
        # the smallest multiple of 1/256 at or above x (estimates are on that grid)
        return math.ceil(x * 256 - 1e-9)

    rules = [
        ("today: beyond k at t + 0.0167", lambda d: grid(0.9) if d <= k else grid(0.9167)),
        ("within k only", lambda d: grid(0.9) if d <= k else 10**6),
        *[(f"margin {m}", lambda d, m=m: grid(0.9) if d <= k else grid(0.9 + m)) for m in (0.0, 0.005, 0.01, 0.02)],
        ("weighted: t + (d - 6) / 512", lambda d: grid(0.9 + (d - 6) / 512)),
        ("weighted beyond k only, at least t", lambda d: grid(0.9) if d <= k else max(grid(0.9), grid(0.9 + (d - 6) / 512))),
    ]
    bands = [(0.80, 0.85), (0.85, 0.88), (0.88, 0.90), (0.90, 0.91), (0.91, 0.92), (0.92, 0.94), (0.94, 0.97), (0.97, 1.0), (1.0, 2.0)]
    print(f"{len(true)} true pairs; {len(pairs)} candidates ({a.candidates})\n")
    print("| rule | reported | precision | recall | F1 | " + " | ".join(f"{lo:.2f}-{hi:.2f}" if hi < 2 else "1" for lo, hi in bands) + " |")
    print("|---|---:|---:|---:|---:|" + "---|" * len(bands))
    for name, rule in rules:
        reported = {p for p, (d, e) in pairs.items() if e >= rule(d)}
        tp = len(reported & true)
        p, r = tp / len(reported), tp / len(true)
        cells = []
        for lo, hi in bands:
            missed = sum(1 for q in true if lo <= jaccard[q] < hi and q not in reported)
            false = sum(1 for q in reported - true if lo <= jaccard.get(q, 0) < hi)
            cells.append(f"{missed}/{false}")
        print(f"| {name} | {len(reported)} | {p:.4f} | {r:.4f} | {2 * p * r / (p + r):.4f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
