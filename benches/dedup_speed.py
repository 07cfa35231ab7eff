#!/usr/bin/env python3
"""`simdex dedup` on a generated corpus, two builds side by side (issue 47, goal 1): wall time,
user + system CPU, MB/s and documents/s of each, the new/base ratios, and whether the two
builds found the same pairs (byte for byte) or, when their recipes differ, the F1 of each
against the planted near-duplicates whose exact resemblance (the ground truth's tokens and
word 3-shingles, `shared/eval/common.py`'s definition, computed here) is at least 0.9.

    python3 benches/dedup_speed.py --corpus DIR [--base BIN] [--new BIN] [--rounds 3]
                                   [--threads N] [--args "..."] [--work DIR]

DIR holds `docs.jsonl` and `planted.tsv` (`benches/gen_docs.py --docs 2^16 --out DIR`).
The builds take turns in every round (base first in odd rounds, new first in even ones), so
a noisy neighbour hits both; the table gives the medians, the per-round ratios and the load
average before and after. `--threads` is passed to the new build only (the baseline has no
such flag: it runs its passes on one core).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
TOKEN_RE = re.compile(f"[{CJK}]|[^\\W{CJK}]+")


def shingles(text):
    """The ground truth's word 3-shingle set of a text (shared/eval/common.py's definition)."""
    t = TOKEN_RE.findall(unicodedata.normalize("NFKC", text).casefold())
    if len(t) < 3:
        return {tuple(t)} if t else set()
    return {(t[i], t[i + 1], t[i + 2]) for i in range(len(t) - 2)}


def jaccard(a, b):
    return len(a & b) / len(a | b) if a or b else 1.0


def timed(cmd):
    """(wall seconds, user + system CPU seconds, max RSS MiB) of a child process."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def pair_set(path):
    """The unordered pairs of a pairs file."""
    with open(path, encoding="utf-8") as f:
        return {tuple(sorted(line.split("\t")[:2])) for line in f}


def truth(corpus):
    """Planted pairs with exact resemblance >= 0.9 (and every pair of copies of one original)."""
    planted = []
    with open(os.path.join(corpus, "planted.tsv"), encoding="utf-8") as f:
        for line in f:
            kind, doc, of, _ = line.rstrip("\n").split("\t")
            planted.append((doc, of))
    wanted = {d for p in planted for d in p}
    texts = {}
    with open(os.path.join(corpus, "docs.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r["id"] in wanted:
                texts[r["id"]] = r.get("text") or r.get("html")
    sets = {i: shingles(t) for i, t in texts.items()}
    true = set()
    for a, b in planted:
        if jaccard(sets[a], sets[b]) >= 0.9:
            true.add((a, b) if a < b else (b, a))
    # copies of one original are near each other too
    by_original = {}
    for a, b in planted:
        by_original.setdefault(b, []).append(a)
    for of, copies in by_original.items():
        for i, x in enumerate(copies):
            for y in copies[i + 1:]:
                if jaccard(sets[x], sets[y]) >= 0.9:
                    true.add((x, y) if x < y else (y, x))
    return true, sets


def f1(found, true):
    """Precision, recall and F1 of `found` against `true`, counting only pairs among planted
    documents as judged (an unplanted pair found is a false positive)."""
    tp = len(found & true)
    p = tp / len(found) if found else 1.0
    r = tp / len(true) if true else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--base", default="/work/base-2fc2d41/bin/simdex")
    ap.add_argument("--new", default=os.path.join(ROOT, "target/release/simdex"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--args", default="", help="more arguments for both builds' dedup")
    ap.add_argument("--work", default=None, help="where the pairs files go (default: the corpus folder)")
    ap.add_argument("--no-f1", action="store_true", help="skip the F1 (reads the corpus in Python)")
    a = ap.parse_args()
    docs = os.path.join(a.corpus, "docs.jsonl")
    size = os.path.getsize(docs)
    with open(docs, "rb") as f:
        count = sum(1 for _ in f)
    work = a.work or a.corpus
    extra = a.args.split()
    cmds = {
        "base": lambda out: [a.base, "dedup", docs, "--pairs", out] + extra,
        "new": lambda out: [a.new, "dedup", docs, "--pairs", out] + extra + ([f"--threads={a.threads}"] if a.threads else []),
    }
    print(f"corpus {docs}: {count} documents, {size / 1e6:.1f} MB; load before {load()}", file=sys.stderr)
    samples = {"base": [], "new": []}
    pairs = {}
    for i in range(a.rounds):
        order = ("base", "new") if i % 2 == 0 else ("new", "base")
        for which in order:
            out = os.path.join(work, f"pairs-{which}.tsv")
            s = timed(cmds[which](out))
            samples[which].append(s)
            pairs[which] = out
            print(f"round {i + 1} {which}: {s[0]:.2f} s wall, {s[1]:.2f} s CPU, {s[2]:.0f} MiB, load {load()}", file=sys.stderr)
    same = open(pairs["base"], "rb").read() == open(pairs["new"], "rb").read()
    print(f"\nload after {load()}; pairs files byte for byte equal: {same}\n")
    print("| build | wall (median) | user+sys CPU | max RSS | MB/s (wall) | documents/s | us a document (CPU) |")
    print("|---|---|---|---|---|---|---|")
    med = {}
    for which in ("base", "new"):
        wall = statistics.median(s[0] for s in samples[which])
        cpu = statistics.median(s[1] for s in samples[which])
        rss = max(s[2] for s in samples[which])
        med[which] = (wall, cpu)
        print(f"| {which} | {wall:.2f} s | {cpu:.2f} s | {rss:.0f} MiB | {size / 1e6 / wall:.1f} | {count / wall:,.0f} | {cpu / count * 1e6:.0f} |")
    rw = ", ".join(f"{n[0] / b[0]:.3f}" for n, b in zip(samples["new"], samples["base"]))
    rc = ", ".join(f"{n[1] / b[1]:.3f}" for n, b in zip(samples["new"], samples["base"]))
    print(f"\nnew / base: wall {med['new'][0] / med['base'][0]:.3f} (rounds {rw}); CPU {med['new'][1] / med['base'][1]:.3f} (rounds {rc})")
    if not a.no_f1:
        true, _ = truth(a.corpus)
        for which in ("base", "new"):
            p, r, f = f1(pair_set(pairs[which]), true)
            print(f"{which}: {len(pair_set(pairs[which]))} pairs; against {len(true)} planted pairs with resemblance >= 0.9: precision {p:.4f}, recall {r:.4f}, F1 {f:.4f}")


if __name__ == "__main__":
    main()
