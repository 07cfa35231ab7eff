#!/usr/bin/env python3
"""Issue 28's table in one run: this build against a baseline build (commit c5c8327 unless
told) and gaoya 0.2.2, side by side on the same seeded workload, the two builds taking turns
in every round so that a noisy neighbour hits both. Prints a markdown table of medians and
ratios (and the load average before and after).

usage: python3 benches/speed.py [--n 1e7] [--rounds 5] [--base-rev c5c8327] [--work DIR]
                                [--new BIN --new-peers BIN] [--base BIN --base-peers BIN]
                                [--skip-gaoya] [--skip-batch]
       python3 benches/speed.py --check [--n 2^26] [--rounds 3] [--base-rev ca8f31f] ...

`--check` measures issue 39 instead (the crawler's check, k = 8 confirmed by sketch at 0.90):
each build's `bench index` (one segment, synthetic sketches), this build's `bench index --live`
(as a crawl leaves it), each build's `add` (plain, as `add` leaves it: ingest time, peak RSS,
segments) and `build` (one segment); then in every round, builds alternating, `bench query
--verified -k 8` on each build's own index (this build also `--exhaustive`, the old path), on
the live index (the baseline reads its segments and ignores the band files, so it runs the old
path), with near copies 6 bits away (found only beyond the tables' k = 3), and `bench query
-k 3` on the live and one-segment indexes; and the bytes per fingerprint of each index.
`--live` measures issue 39's goal 2 alone: each build's `add` of N random fingerprints twice
(time, peak RSS; builds alternating), the segments it leaves, and the k = 3 p50 of that live
index against one segment (`build`), rounds alternating.

Without --new/--base the script builds them (release): this checkout's `simdex` and
`simdex-peers` (benches/peers), and the baseline's in a git worktree under WORK. Workload:
N random fingerprints (`simdex bench generate --seed 1`), 10,000 queries (half a stored
fingerprint with 2 bits flipped, half random, with ids), 1M queries of the same mix for
`simdex batch`. Each build makes its own segment (`simdex build`) and its own live index
(`simdex insert`, as a crawler's index is left: not compacted).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, **kw).stdout


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def build(rev, work):
    """(simdex, simdex-peers) built in release from `rev` (None: this checkout)."""
    src = ROOT
    env = dict(os.environ)
    if rev is not None:
        src = os.path.join(work, f"src-{rev}")
        if not os.path.exists(src):
            sh(["git", "-C", ROOT, "worktree", "add", "--detach", src, rev])
        env["CARGO_TARGET_DIR"] = os.path.join(work, f"target-{rev}")
    target = env.get("CARGO_TARGET_DIR", os.path.join(src, "target"))
    # benches/peers is a workspace of its own: its own target folder unless one is set
    peers_target = env.get("CARGO_TARGET_DIR", os.path.join(src, "benches", "peers", "target"))
    subprocess.run(["cargo", "build", "--release", "-p", "simdex-cli"], cwd=src, env=env, check=True)
    subprocess.run(["cargo", "build", "--release", "--manifest-path", "benches/peers/Cargo.toml"], cwd=src, env=env, check=True)
    return os.path.join(target, "release", "simdex"), os.path.join(peers_target, "release", "simdex-peers")


def query(bin_, target, queries, k, *extra):
    out = sh([bin_, "bench", "query", target, "--input", queries, "-k", str(k), "--rounds", "2", "--json", *extra])
    return json.loads(out)


def timed(cmd):
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def peers_p50(bin_, n):
    """(simdex p50, gaoya p50) in microseconds from one run of benches/peers."""
    out = sh([bin_, "--n", str(n), "--queries", "100000", "--rounds", "2", "--only", "simdex,gaoya"])
    p50 = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 4 and cells[2].startswith(("simdex", "gaoya")):
            p50[cells[2].split()[0]] = float(cells[3])
    return p50["simdex"], p50["gaoya"]


def measured(cmd):
    """(seconds, peak RSS in MiB) of one run of `cmd` (GNU time)."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cmd], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr
    secs, kib = out.strip().splitlines()[-1].split()
    return float(secs), int(kib) / 1024


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path))


def crawler_check(a, n, work):
    """Issue 39's table (see the module doc)."""
    f = lambda name: os.path.join(work, name)
    builds = {"base": a.base, "new": a.new}
    new = a.new
    if not os.path.exists(f("stored.txt")):
        with open(f("stored.txt"), "w") as out:
            subprocess.run([new, "bench", "generate", "-n", str(n), "--seed", "1", "--with-ids"], stdout=out, check=True)
        with open(f("q.txt"), "w") as out:
            subprocess.run([new, "bench", "generate", "-n", "5000", "--near", f("stored.txt"), "--flips", "2", "--seed", "2", "--with-ids"], stdout=out, check=True)
            subprocess.run([new, "bench", "generate", "-n", "5000", "--seed", "3", "--with-ids"], stdout=out, check=True)
        with open(f("q6.txt"), "w") as out:
            subprocess.run([new, "bench", "generate", "-n", "5000", "--near", f("stored.txt"), "--flips", "6", "--seed", "4", "--with-ids"], stdout=out, check=True)
    ingest = {}
    for name, bin_ in builds.items():
        if not os.path.exists(f(f"{name}-sk")):
            ingest[(name, "bench index")] = measured([bin_, "bench", "index", f(f"{name}-sk"), "--input", f("stored.txt")])
        if not os.path.exists(f(f"{name}-live")):
            ingest[(name, "add")] = measured([bin_, "add", f(f"{name}-live"), f("stored.txt")])
        if not os.path.exists(f(f"{name}.sdx")):
            subprocess.run([bin_, "build", "--out", f(f"{name}.sdx"), f("stored.txt")], check=True, stderr=subprocess.DEVNULL)
    if not os.path.exists(f("new-live-sk")):
        ingest[("new", "bench index --live")] = measured([new, "bench", "index", f("new-live-sk"), "--input", f("stored.txt"), "--live"])
    shape = lambda d: " + ".join(f"{int(l.split()[1]) / 1e6:.2f}M" for l in sh([new, "stats", d]).splitlines() if ".sdx " in l)
    before = load()
    cells = {}
    add = lambda key, value: cells.setdefault(key, []).append(value)
    for r in range(a.rounds):
        for name in (["base", "new"] if r % 2 == 0 else ["new", "base"]):
            b = builds[name]
            add((name, "check"), query(b, f(f"{name}-sk"), f("q.txt"), 8, "--verified")["p50_us"])
            add((name, "check6"), query(b, f(f"{name}-sk"), f("q6.txt"), 8, "--verified")["p50_us"])
            add((name, "check-live"), query(b, f("new-live-sk"), f("q.txt"), 8, "--verified")["p50_us"])
            add((name, "k3-live"), query(b, f(f"{name}-live"), f("q.txt"), 3)["p50_us"])
            add((name, "k3-one"), query(b, f(f"{name}.sdx"), f("q.txt"), 3)["p50_us"])
            add((name, "k3-sk"), query(b, f(f"{name}-sk"), f("q.txt"), 3)["p50_us"])
            if name == "new":
                r8 = query(b, f("new-sk"), f("q.txt"), 8, "--verified", "--exhaustive")
                add(("new", "check-exhaustive"), r8["p50_us"])
                add(("new", "check-p99"), query(b, f("new-sk"), f("q.txt"), 8, "--verified")["p99_us"])
    after = load()
    med = lambda name, key: statistics.median(cells[(name, key)])
    print(f"\nN = {n}, {a.rounds} rounds (medians), one thread, warm; load before {before}, after {after}")
    print(f"new: {a.new}\nbase: {a.base}\n")
    print("| measure | base | new | new / base |")
    print("|---|---|---|---|")
    for key, what in (("check", "crawler's check p50 (k = 8 confirmed at 0.90), one segment, half near copies 2 bits away"), ("check6", "the same, near copies 6 bits away (beyond the tables' k = 3)"), ("check-live", "the same on the live index `bench index --live` leaves")):
        b, x = med("base", key), med("new", key)
        print(f"| {what} | {b:.2f} us | {x:.2f} us | {x / b:.3f} |")
    print(f"| this build's old path (`--exhaustive`) / p99 of the check | - | {med('new', 'check-exhaustive'):.2f} us / {med('new', 'check-p99'):.2f} us | - |")
    b_live, x_live = med("base", "k3-live"), med("new", "k3-live")
    b_one, x_one = med("base", "k3-one"), med("new", "k3-one")
    print(f"| k = 3 p50, live index as `add` leaves it / one segment (`build`) | {b_live:.2f} / {b_one:.2f} us = {b_live / b_one:.2f}x ({shape(f('base-live'))}) | {x_live:.2f} / {x_one:.2f} us = {x_live / x_one:.2f}x ({shape(f('new-live'))}) | {(x_live / x_one) / (b_live / b_one):.3f} |")
    print(f"| k = 3 p50 on the sketched one-segment index (the k = 3 path) | {med('base', 'k3-sk'):.2f} us | {med('new', 'k3-sk'):.2f} us | {med('new', 'k3-sk') / med('base', 'k3-sk'):.3f} |")
    print(f"| crawler's check on the live index: segments | {shape(f('new-live-sk'))} (the same index) | {shape(f('new-live-sk'))} | - |")
    bb, nb = dir_bytes(f("base-sk")), dir_bytes(f("new-sk"))
    print(f"| bytes per fingerprint, sketched index (tables, ids, sketches; new: and band file) | {bb / n:.1f} | {nb / n:.1f} | {nb / bb:.3f} |")
    for (name, what), (secs, mib) in sorted(ingest.items()):
        print(f"| {name}: `{what}` | {secs:.1f} s, peak RSS {mib:.0f} MiB | | |")
    print("\nnew / base in each round:")
    for key in sorted({k for (nm, k) in cells if nm == "new" and ("base", k) in cells}):
        print(f"  {key}: {', '.join(f'{x / b:.2f}' for b, x in zip(cells[('base', key)], cells[('new', key)]))}")
    print("\nEvery sample:")
    for (name, key), values in sorted(cells.items()):
        print(f"  {name} {key}: {', '.join(f'{v:.2f}' for v in values)}")
    return 0


def live_set(a, n, work):
    """Issue 39 goal 2: the live set `add` leaves, against one segment, and what `add` costs
    (time, peak RSS), each build's `add` run twice, the builds alternating."""
    f = lambda name: os.path.join(work, name)
    builds = {"base": a.base, "new": a.new}
    new = a.new
    if not os.path.exists(f("stored.u64")):
        with open(f("stored.u64"), "wb") as out:
            subprocess.run([new, "bench", "generate", "-n", str(n), "--seed", "1", "--binary"], stdout=out, check=True)
        # the first 5,000 stored fingerprints (the same seed), and near copies of them
        with open(f("head.txt"), "w") as out:
            subprocess.run([new, "bench", "generate", "-n", "5000", "--seed", "1"], stdout=out, check=True)
        with open(f("q.txt"), "w") as out:
            subprocess.run([new, "bench", "generate", "-n", "5000", "--near", f("head.txt"), "--flips", "2", "--seed", "2"], stdout=out, check=True)
            subprocess.run([new, "bench", "generate", "-n", "5000", "--seed", "3"], stdout=out, check=True)
    ingest = {}
    for r in range(2):
        for name in (["base", "new"] if r == 0 else ["new", "base"]):
            d = f(f"{name}-live")
            shutil.rmtree(d, ignore_errors=True)
            ingest.setdefault(name, []).append(measured([builds[name], "add", d, "--binary", f("stored.u64")]))
    for name, bin_ in builds.items():
        if not os.path.exists(f(f"{name}.sdx")):
            subprocess.run([bin_, "build", "--binary", "--out", f(f"{name}.sdx"), f("stored.u64")], check=True, stderr=subprocess.DEVNULL)
    shape = lambda d: " + ".join(f"{int(l.split()[1]) / 1e6:.2f}M" for l in sh([new, "stats", d]).splitlines() if ".sdx " in l)
    before = load()
    cells = {}
    for r in range(a.rounds):
        for name in (["base", "new"] if r % 2 == 0 else ["new", "base"]):
            b = builds[name]
            cells.setdefault((name, "live"), []).append(query(b, f(f"{name}-live"), f("q.txt"), 3)["p50_us"])
            cells.setdefault((name, "one"), []).append(query(b, f(f"{name}.sdx"), f("q.txt"), 3)["p50_us"])
    after = load()
    med = lambda name, key: statistics.median(cells[(name, key)])
    print(f"\nN = {n}, {a.rounds} rounds (medians), k = 3, one thread, warm; load before {before}, after {after}\n")
    print("| build | `add` time (2 runs) | `add` peak RSS | segments `add` leaves | live p50 | one segment p50 | live / one |")
    print("|---|---|---|---|---|---|---|")
    for name in builds:
        times = ", ".join(f"{t:.1f} s" for t, _ in ingest[name])
        rss = max(m for _, m in ingest[name])
        live, one = med(name, "live"), med(name, "one")
        print(f"| {name} | {times} | {rss:.0f} MiB | {shape(f(f'{name}-live'))} | {live:.2f} us | {one:.2f} us | {live / one:.2f}x |")
    print("\nlive / one in each round:")
    for name in builds:
        print(f"  {name}: {', '.join(f'{l / o:.2f}' for l, o in zip(cells[(name, 'live')], cells[(name, 'one')]))}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", default="1e7")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--base-rev", default="c5c8327")
    p.add_argument("--work")
    p.add_argument("--new")
    p.add_argument("--new-peers")
    p.add_argument("--base")
    p.add_argument("--base-peers")
    p.add_argument("--skip-gaoya", action="store_true")
    p.add_argument("--skip-batch", action="store_true")
    p.add_argument("--check", action="store_true", help="issue 39: the crawler's check (see the module doc)")
    p.add_argument("--live", action="store_true", help="issue 39 goal 2: the live set `add` leaves and what `add` costs")
    a = p.parse_args()
    n = 2 ** int(a.n[2:]) if a.n.startswith("2^") else int(float(a.n))
    work = a.work or tempfile.mkdtemp(prefix="simdex-speed-")
    os.makedirs(work, exist_ok=True)
    if not a.new:
        a.new, a.new_peers = build(None, work)
    if not a.base:
        a.base, a.base_peers = build(a.base_rev, work)
    if a.check:
        return crawler_check(a, n, work)
    if a.live:
        return live_set(a, n, work)
    builds = {"base": a.base, "new": a.new}
    f = lambda name: os.path.join(work, name)
    new = a.new
    if not os.path.exists(f("stored.txt")):
        with open(f("stored.txt"), "w") as out:
            subprocess.run([new, "bench", "generate", "-n", str(n), "--seed", "1", "--with-ids"], stdout=out, check=True)
        for name, count in (("q.txt", 5000), ("q1m.txt", 500_000)):
            with open(f(name), "w") as out:
                subprocess.run([new, "bench", "generate", "-n", str(count), "--near", f("stored.txt"), "--flips", "2", "--seed", "2", "--with-ids"], stdout=out, check=True)
                subprocess.run([new, "bench", "generate", "-n", str(count), "--seed", "3", "--with-ids"], stdout=out, check=True)
    for name, bin_ in builds.items():
        if not os.path.exists(f(f"{name}.sdx")):
            subprocess.run([bin_, "build", "--out", f(f"{name}.sdx"), f("stored.txt")], check=True, stderr=subprocess.DEVNULL)
        if not os.path.exists(f(f"{name}-live")):
            # `add`: the name both builds accept (`insert` since issue 35)
            subprocess.run([bin_, "add", f(f"{name}-live"), f("stored.txt")], check=True, stdout=subprocess.DEVNULL)
    if not os.path.exists(f("sketched")):
        subprocess.run([new, "bench", "index", f("sketched"), "--input", f("stored.txt")], check=True, stdout=subprocess.DEVNULL)
    segments = {name: sh([bin_, "stats", f(f"{name}-live")]).count(".sdx ") for name, bin_ in builds.items()}
    for name in builds:
        print(f"{name}-live:", " ".join(l.split()[1] for l in sh([new, "stats", f(f"{name}-live")]).splitlines() if ".sdx " in l), "fingerprints per segment")
    before = load()
    cells = {}

    def add(key, value):
        cells.setdefault(key, []).append(value)

    for r in range(a.rounds):
        # the two builds take turns, the first one alternating between rounds
        order = ["base", "new"] if r % 2 == 0 else ["new", "base"]
        for name in order:
            b = builds[name]
            for k in (3, 6, 8):
                add((name, f"k{k}"), query(b, f(f"{name}.sdx"), f("q.txt"), k)["p50_us"])
            add((name, "live"), query(b, f(f"{name}-live"), f("q.txt"), 3)["p50_us"])
            # the same live set (the baseline's) for both: the query path alone, whatever
            # shape each build's compaction policy leaves
            add((name, "base-live"), query(b, f("base-live"), f("q.txt"), 3)["p50_us"])
            if not a.skip_batch:
                add((name, "batch"), timed([b, "batch", f(f"{name}.sdx"), "--queries", f("q1m.txt"), "-k", "3"]))
        add(("new", "k8-sketched"), query(new, f("sketched"), f("q.txt"), 8)["p50_us"])
        add(("new", "k8-verified"), query(new, f("sketched"), f("q.txt"), 8, "--verified")["p50_us"])
        for threads in (1, 2):
            add(("new", f"qps{threads}"), query(new, f("new.sdx"), f("q.txt"), 3, "--threads", str(threads))["qps"])
    if not a.skip_gaoya:
        for r in range(2):
            for name in (["base", "new"] if r == 0 else ["new", "base"]):
                s, g = peers_p50(a.base_peers if name == "base" else a.new_peers, n)
                add((name, "peers-simdex"), s)
                add((name, "peers-gaoya"), g)
    after = load()
    med = lambda name, key: statistics.median(cells[(name, key)]) if (name, key) in cells else float("nan")

    print(f"\nN = {n}, {a.rounds} rounds (medians), one thread unless said; load before {before}, after {after}")
    print(f"new: {a.new}\nbase: {a.base} ({a.base_rev})\n")
    print("| measure | base | new | new / base | goal |")
    print("|---|---|---|---|---|")
    row = lambda m, b, x, ratio, goal: print(f"| {m} | {b} | {x} | {ratio} | {goal} |")
    if not a.skip_gaoya:
        sb, gb, sn, gn = med("base", "peers-simdex"), med("base", "peers-gaoya"), med("new", "peers-simdex"), med("new", "peers-gaoya")
        row("online p50, one segment, k = 3 (benches/peers; gaoya in the same process)", f"{sb:.2f} us ({sb / gb:.3f}x gaoya's {gb:.2f})", f"{sn:.2f} us ({sn / gn:.3f}x gaoya's {gn:.2f})", f"{sn / sb:.2f}", "<= 0.15x gaoya, <= 0.70x base")
    for k, goal in ((3, "-"), (6, "<= 0.88x"), (8, "<= 0.45x")):
        b, x = med("base", f"k{k}"), med("new", f"k{k}")
        row(f"`bench query` p50, one segment, k = {k}", f"{b:.2f} us", f"{x:.2f} us", f"{x / b:.2f}", goal)
    v, s = med("new", "k8-verified"), med("new", "k8-sketched")
    row("k = 8 verified by sketch (`--verified`) / unverified, same index", "-", f"{v:.2f} / {s:.2f} us", f"{v / s:.2f} (verified / unverified)", "<= 1.10")
    lb, ln = med("base", "live"), med("new", "live")
    sb3, sn3 = med("base", "k3"), med("new", "k3")
    row(f"live index as `add` leaves N ({segments['base']} / {segments['new']} segments) / one segment, k = 3", f"{lb:.2f} us: {lb / sb3:.2f}x", f"{ln:.2f} us: {ln / sn3:.2f}x", f"{(ln / sn3) / (lb / sb3):.2f}", "<= 1.5x one segment")
    lb2, ln2 = med("base", "base-live"), med("new", "base-live")
    row("the baseline's live set queried by each build, k = 3", f"{lb2:.2f} us", f"{ln2:.2f} us", f"{ln2 / lb2:.2f}", "-")
    if not a.skip_batch:
        b, x = med("base", "batch"), med("new", "batch")
        row("`simdex batch` of 1M queries, whole process, 2 cores", f"{b:.2f} s", f"{x:.2f} s", f"{x / b:.2f}", "<= 0.54x")
    q1, q2 = med("new", "qps1"), med("new", "qps2")
    per_round = statistics.median(b / a for a, b in zip(cells[("new", "qps1")], cells[("new", "qps2")]))
    row("queries/s, 2 threads / 1 thread, one open segment (ratio: median of the rounds')", "-", f"{q2:.0f} / {q1:.0f}", f"{per_round:.2f}x", ">= 1.8x")
    print("\nnew / base in each round:")
    for key in sorted({k for (n, k) in cells if n == "new" and ("base", k) in cells}):
        print(f"  {key}: {', '.join(f'{x / b:.2f}' for b, x in zip(cells[('base', key)], cells[('new', key)]))}")
    print("\nEvery sample:")
    for (name, key), values in sorted(cells.items()):
        print(f"  {name} {key}: {', '.join(f'{v:.2f}' for v in values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
