#!/usr/bin/env python3
"""Where `simdex dedup` loses F1: misses and false pairs by band of exact Jaccard, against the
ground truth of `../shared/eval` (exact Jaccard of word 3-shingles >= 0.9).

usage: python3 benches/dedup_bands.py --data DATA NAME=PAIRS.tsv [NAME=PAIRS.tsv ...]
       python3 benches/dedup_bands.py --data DATA --run SIMDEX --work DIR NAME="DEDUP FLAGS" ...

DATA is a folder made by shared/eval's extract.py and groundtruth.py (docs.jsonl, pairs.tsv).
A pairs file is `simdex dedup --pairs`'s (id_a, id_b, ...). With --run, each NAME runs
`SIMDEX dedup DATA/docs.jsonl --pairs WORK/NAME.tsv FLAGS` first. Prints markdown tables:
precision, recall and F1 per run, then misses and false pairs per band of Jaccard.
"""

import argparse
import os
import shlex
import subprocess
import sys
import time

BANDS = [(0.0, 0.8), (0.8, 0.85), (0.85, 0.88), (0.88, 0.9), (0.9, 0.91), (0.91, 0.92), (0.92, 0.94), (0.94, 0.97), (0.97, 1.0), (1.0, 1.01)]


def band_name(lo, hi):
    return "1 (equal)" if lo == 1.0 else ("< 0.80 or unknown" if lo == 0.0 else f"{lo:.2f}-{hi:.2f}")


def jaccards(data):
    out = {}
    with open(os.path.join(data, "pairs.tsv"), encoding="utf-8") as f:
        for line in f:
            a, b, j = line.rstrip("\n").split("\t")
            out[(a, b) if a < b else (b, a)] = float(j)
    return out


def read_pairs(path):
    pairs = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            a, b = line.rstrip("\n").split("\t")[:2]
            pairs.add((a, b) if a < b else (b, a))
    return pairs


def band_of(j):
    return next(i for i, (lo, hi) in enumerate(BANDS) if lo <= j < hi)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--run", help="a simdex binary: run dedup for each NAME=FLAGS")
    p.add_argument("--work", help="where --run writes its pairs files")
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("runs", nargs="+", help="NAME=PAIRS.tsv, or NAME=FLAGS with --run")
    a = p.parse_args()
    jac = jaccards(a.data)
    true = {k for k, j in jac.items() if j >= a.threshold}
    results = []
    for spec in a.runs:
        name, rest = spec.split("=", 1)
        secs = None
        if a.run:
            os.makedirs(a.work, exist_ok=True)
            path = os.path.join(a.work, f"{name}.tsv")
            cmd = [a.run, "dedup", os.path.join(a.data, "docs.jsonl"), "--pairs", path] + shlex.split(rest)
            start = time.monotonic()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            secs = time.monotonic() - start
        else:
            path = rest
        results.append((name, read_pairs(path), secs))
    print(f"{len(true)} true pairs (Jaccard >= {a.threshold}) in {a.data}\n")
    print("| run | reported | precision | recall | F1 | seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, rep, secs in results:
        hit = len(rep & true)
        pr = hit / len(rep) if rep else 0.0
        rc = hit / len(true) if true else 0.0
        f1 = 2 * pr * rc / (pr + rc) if pr + rc else 0.0
        print(f"| {name} | {len(rep)} | {pr:.4f} | {rc:.4f} | {f1:.4f} | {'-' if secs is None else f'{secs:.1f}'} |")
    print()
    names = [r[0] for r in results]
    print("| true Jaccard | pairs | " + " | ".join(f"{n}: missed / false" for n in names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    pairs_in = [0] * len(BANDS)
    for k in true:
        pairs_in[band_of(jac[k])] += 1
    for i, (lo, hi) in enumerate(BANDS):
        cells = []
        for _, rep, _ in results:
            missed = sum(1 for k in true if band_of(jac[k]) == i and k not in rep)
            false = sum(1 for k in rep if k not in true and band_of(jac.get(k, 0.0)) == i)
            cells.append(f"{missed} / {false}")
        count = pairs_in[i] if lo >= a.threshold else "-"
        print(f"| {band_name(lo, hi)} | {count} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
