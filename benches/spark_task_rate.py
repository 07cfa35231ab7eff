#!/usr/bin/env python3
"""simdex.spark's per-task document rate, two builds of the package side by side (issue 47's
last goal): `python -m simdex.spark dedup` of each on one corpus, local[2], the builds taking
turns (base first in odd rounds, new first in even ones), Spark's event log on.

    python3 benches/spark_task_rate.py DOCS.jsonl --python VENV/bin/python \
        --build base=SITE_DIR --build new=SITE_DIR [--rounds 2] [--work DIR] [--conf K=V ...]

A build is a folder a wheel was installed into (`pip install --no-deps --target SITE_DIR
WHEEL`); it is put on PYTHONPATH of a run (Spark's Python workers inherit it), so both builds
run on the one pyspark of `--python`'s virtualenv. Every run has `spark.driver.memory=4g`
(2fc2d41's driver needs it at 2^16) unless `--conf` gives another.

Per run: wall, the CPU of every process under it (user + system of the driver, the JVM and the
Python workers: `spark_peers.py`'s subreaper), and from the event log the sum over every task of
`Executor Run Time` (the task's wall) and `Executor CPU Time` (the task's JVM thread only: the
Python worker's CPU, where simdex's work runs, is in no Spark metric), each as documents a
second; then new / base of each, per round and of the means, and whether each build's pairs
were the same in every round.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from spark_peers import MEASURE  # noqa: E402


def task_sums(folder):
    """(tasks, sum of executorRunTime s, sum of executorCpuTime s) of the event logs in a folder."""
    tasks, run_ms, cpu_ns = 0, 0, 0
    for path in sorted(glob.glob(os.path.join(folder, "**", "*"), recursive=True)):
        if os.path.isdir(path) or os.path.basename(path).startswith((".", "appstatus")):
            continue
        if path.endswith(".zstd"):
            data = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
        else:
            with open(path, "rb") as f:
                data = f.read()
        for line in data.splitlines():
            e = json.loads(line)
            if e.get("Event") == "SparkListenerTaskEnd":
                m = e.get("Task Metrics") or {}
                tasks += 1
                run_ms += m.get("Executor Run Time", 0)
                cpu_ns += m.get("Executor CPU Time", 0)
    return tasks, run_ms / 1e3, cpu_ns / 1e9


def run(args, name, site, work, docs):
    out = os.path.abspath(os.path.join(work, name))
    os.makedirs(os.path.join(out, "ev"), exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(site))
    env.pop("PYSPARK_PYTHON", None)
    conf = ["spark.driver.memory=4g"] if not any(c.startswith("spark.driver.memory=") for c in args.conf) else []
    conf += args.conf + ["spark.eventLog.enabled=true", f"spark.eventLog.dir=file://{out}/ev"]
    cmd = [args.python, "-m", "simdex.spark", "dedup", docs, "--format", "jsonl", "--pairs", os.path.join(out, "pairs.tsv"), "--master", "local[2]"]
    for c in conf:
        cmd += ["--conf", c]
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    with open(os.path.join(out, "stderr"), "w") as err:
        p = subprocess.run([sys.executable, "-c", MEASURE, os.path.join(out, "usage.json"), *cmd], env=env, cwd=out, stdout=err, stderr=err)
    wall = time.monotonic() - t0
    if p.returncode:
        sys.exit(f"{name} failed: see {out}/stderr")
    with open(os.path.join(out, "usage.json")) as f:
        usage = json.load(f)
    tasks, run_s, cpu_s = task_sums(os.path.join(out, "ev"))
    with open(os.path.join(out, "pairs.tsv"), "rb") as f:
        pairs = sorted(f.read().splitlines())
    return {"wall": wall, "cpu": usage["cpu"], "rss": usage["peak_rss_mib"], "tasks": tasks, "run_s": run_s, "cpu_s": cpu_s, "load": load, "pairs": pairs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("docs")
    ap.add_argument("--python", required=True, help="a virtualenv's python with pyspark (no simdex)")
    ap.add_argument("--build", action="append", required=True, metavar="NAME=SITE_DIR", help="two: base=... and new=...")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--work", default=".")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args()
    builds = dict(b.split("=", 1) for b in a.build)
    if set(builds) != {"base", "new"}:
        sys.exit("--build base=SITE_DIR --build new=SITE_DIR")
    with open(a.docs, "rb") as f:
        count = sum(1 for _ in f)
    print(f"{a.docs}: {count} documents, {os.path.getsize(a.docs) / 1e6:.1f} MB")
    got = {"base": [], "new": []}
    for r in range(1, a.rounds + 1):
        for name in ("base", "new") if r % 2 else ("new", "base"):
            x = run(a, f"r{r}-{name}", builds[name], a.work, os.path.abspath(a.docs))
            got[name].append(x)
            print(f"round {r} {name}: wall {x['wall']:.1f} s, tree CPU {x['cpu']:.1f} s, peak RSS {x['rss']} MiB, {x['tasks']} tasks, "
                  f"executorRunTime {x['run_s']:.1f} s ({count / x['run_s']:.0f} docs/s), executorCpuTime {x['cpu_s']:.2f} s "
                  f"({count / x['cpu_s']:.0f} docs/s), {len(x['pairs'])} pairs, load before {x['load']:.1f}", flush=True)
    for key, what in (("run_s", "sum of executorRunTime"), ("cpu_s", "sum of executorCpuTime"), ("cpu", "tree CPU"), ("wall", "wall")):
        b = sum(x[key] for x in got["base"]) / a.rounds
        n = sum(x[key] for x in got["new"]) / a.rounds
        per = ", ".join(f"{y[key] / x[key]:.3f}" for x, y in zip(got["base"], got["new"]))
        print(f"new / base, {what}: {n / b:.3f} of the means (rounds {per}): the rate up {b / n:.2f}x")
    for name, xs in got.items():
        print(f"{name}: the same pairs in every round: {all(x['pairs'] == xs[0]['pairs'] for x in xs)}")
    print(f"base and new found the same pairs: {got['base'][0]['pairs'] == got['new'][0]['pairs']}")


if __name__ == "__main__":
    main()
