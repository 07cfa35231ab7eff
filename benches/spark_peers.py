"""simdex.spark beside the Spark tools a dataset builder would otherwise pick (distributed-curator's
Spark MinHash LSH, text-dedup's MinHash) and ``simdex dedup`` on one corpus, one machine, one
Spark master: wall time, and precision / recall / F1 of the pairs each reports against the
ground truth (exact Jaccard >= 0.9 of word 3-shingles: ``DATA/pairs.tsv``, written by
../shared/eval's ``groundtruth.py`` or by ``benches/gen_documents.py``, whose planted corpus
has the same layout).

A tool that outputs clusters (distributed-curator marks each document's representative) is
scored on the pairs its clusters imply (every two members of one cluster); simdex is scored on
its ``--pairs`` file, and on its clusters' pairs too.

Each tool runs in its own process, in its own virtualenv (peers are never vendored):

    python benches/spark_peers.py simdex DATA --python target/spark-venv/bin/python
    python benches/spark_peers.py curator DATA --python target/peers-venv/bin/python [--tuned]
    python benches/spark_peers.py textdedup DATA --python target/peers-venv/bin/python [--tuned]
    python benches/spark_peers.py cli DATA --simdex target/release/simdex

or all four in one run, one after the other, each with the load average before it (``--tuned``
for the peers, as Spark II measured them), ``--rounds`` times; ``--tools`` picks some of them
(e.g. ``simdex,cli`` where the peers would take hours), ``--simdex`` repeated runs several
builds of the CLI and ``--python`` repeated several builds of simdex.spark (a baseline beside
the current one):

    python benches/spark_peers.py all DATA --python SPARK_VENV/bin/python --peers-python PEERS_VENV/bin/python --simdex target/release/simdex

Each run's line gives its wall seconds, its CPU seconds (user + system of every process it
started, the JVM and Python workers included) and the largest peak resident set of any one of
them (for simdex.spark in local mode, the driver's JVM, which holds the executors: run with
Spark's default memory, no ``--conf``).
"""

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time

MASTER = "local[2]"

# runs a command (argv after the file name) with the caller's streams, then writes its CPU
# seconds (user + system, the command and every process under it) and the largest peak
# resident set of any of them to the file named first. It is the subreaper of the processes
# under it, so that one its parent does not wait for (pyspark leaves the JVM to exit on its
# own) is waited for here, and counted.
MEASURE = """
import ctypes, json, os, resource, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
rc = subprocess.call(sys.argv[2:])
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
u = resource.getrusage(resource.RUSAGE_CHILDREN)
json.dump({"cpu": u.ru_utime + u.ru_stime, "peak_rss_mib": u.ru_maxrss // 1024}, open(sys.argv[1], "w"))
sys.exit(rc)
"""

USAGE = {}  # the last measured command's CPU seconds and peak RSS


def measured(cmd, work, **kw):
    """``subprocess.run(cmd, check=True, **kw)``, its CPU time and peak RSS kept in ``USAGE``."""
    out = os.path.join(work, "usage.json")
    p = subprocess.run([sys.executable, "-c", MEASURE, out, *cmd], check=True, **kw)
    USAGE.clear()
    USAGE.update(json.load(open(out)))
    return p


def truth(data, threshold=0.9):
    out = set()
    with open(os.path.join(data, "pairs.tsv"), encoding="utf-8") as f:
        for line in f:
            a, b, j = line.rstrip("\n").split("\t")
            if float(j) >= threshold:
                out.add((a, b) if a < b else (b, a))
    return out


def score(reported, true):
    hit = len(reported & true)
    p = hit / len(reported) if reported else 1.0
    r = hit / len(true) if true else 1.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return {"reported": len(reported), "true": len(true), "precision": round(p, 3), "recall": round(r, 3), "f1": round(f1, 3)}


def cluster_pairs(groups):
    out = set()
    for members in groups.values():
        for a, b in itertools.combinations(sorted(members), 2):
            out.add((a, b))
    return out


def pair_set(path):
    reported = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            a, b = line.split("\t")[:2]
            reported.add((a, b) if a < b else (b, a))
    return reported


def run_cli(data, simdex, work):
    pairs = os.path.join(work, "cli-pairs.tsv")
    start = time.monotonic()
    measured([simdex, "dedup", os.path.join(data, "docs.jsonl"), "--format", "jsonl", "--pairs", pairs], work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start, {"pairs": pair_set(pairs)}


def spark_jobs(events):
    """Spark jobs of the newest event log in ``events``. Spark 4 writes a rolling event log, a
    folder ``eventlog_v2_APP`` of ``events_N_APP`` files (N from 1, a codec suffix such as
    ``.zstd`` when compressed: the run asks for none) beside ``appstatus_APP`` and ``.crc``
    checksums; Spark 3 wrote one file. Each event is one JSON line."""
    log = max((os.path.join(events, n) for n in os.listdir(events)), key=os.path.getmtime)
    if os.path.isdir(log):
        app = os.path.basename(log)[len("eventlog_v2_") :]
        parts = {}
        for name in os.listdir(log):
            m = re.fullmatch(r"events_(\d+)_" + re.escape(app) + r"(\.\w+)?", name)
            if m:
                if m.group(2):
                    raise SystemExit(f"{os.path.join(log, name)}: a compressed event log (run with spark.eventLog.compress=false)")
                parts[int(m.group(1))] = os.path.join(log, name)
        files = [parts[n] for n in sorted(parts)]
    else:
        files = [log]
    jobs = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            jobs += sum(1 for line in f if line.strip() and json.loads(line)["Event"] == "SparkListenerJobStart")
    return jobs


def run_simdex(data, python, work):
    pairs, clusters = os.path.join(work, "pairs.tsv"), os.path.join(work, "clusters.tsv")
    events = os.path.join(work, "events")
    os.makedirs(events, exist_ok=True)
    os.environ["PYSPARK_PYTHON"] = python
    cmd = [python, "-m", "simdex.spark", "dedup", os.path.join(data, "docs.jsonl"), "--format", "jsonl", "--pairs", pairs, "--clusters", clusters, "--master", MASTER]
    cmd += ["--conf", "spark.eventLog.enabled=true", "--conf", "spark.eventLog.compress=false", "--conf", f"spark.eventLog.dir=file://{events}"]
    start = time.monotonic()
    p = measured(cmd, work, stderr=subprocess.PIPE, text=True)
    took = time.monotonic() - start
    steps = [line for line in p.stderr.splitlines() if line.startswith("steps:")]
    print(json.dumps({"tool": "simdex", "jobs": spark_jobs(events), "steps": steps[-1] if steps else ""}), file=sys.stderr)
    reported = pair_set(pairs)
    groups = {}
    with open(clusters, encoding="utf-8") as f:
        for line in f:
            i, c = line.rstrip("\n").split("\t")
            groups.setdefault(c, []).append(i)
    return took, {"pairs": reported, "cluster pairs": cluster_pairs(groups)}


def curator_child(data, out, tuned):
    """Runs inside the peers' virtualenv: distributed-curator on docs.jsonl."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import distributed_curator
    from distributed_curator.spark_partition_aware_deduplication import partition_aware_deduplicate
    from pyspark.sql import SparkSession

    jar = os.path.join(os.path.dirname(distributed_curator.__file__), "jars", "minhash-udf-assembly-0.1.jar")
    spark = SparkSession.builder.master(MASTER).config("spark.jars", jar).config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "8").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    start = time.monotonic()
    df = spark.read.json(os.path.join(data, "docs.jsonl")).selectExpr("id as doc_id", "text")
    # defaults, but 8 partitions (its 1000 are for a cluster); tuned for Jaccard 0.9:
    # 128 hashes in 8 bands of 16 rows (the S-curve's midpoint (1/8)^(1/16) = 0.88)
    kw = dict(similarity_threshold=0.9, num_hashes=128, num_bands=8) if tuned else {}
    result = partition_aware_deduplicate(spark, df, text_column="text", num_partitions=8, **kw)
    result.select("doc_id", "representative_id").write.mode("overwrite").json(out)
    took = time.monotonic() - start
    spark.stop()
    print(json.dumps({"seconds": took}))


def run_curator(data, python, work, tuned):
    out = os.path.join(work, "curator")
    start = time.monotonic()
    p = measured([python, __file__, "curator-child", data, "--out", out] + (["--tuned"] if tuned else []), work, capture_output=True, text=True)
    took = time.monotonic() - start
    groups = {}
    for name in os.listdir(out):
        if name.startswith("part-"):
            with open(os.path.join(out, name), encoding="utf-8") as f:
                for line in f:
                    r = json.loads(line)
                    groups.setdefault(r["representative_id"], []).append(r["doc_id"])
    inner = json.loads(p.stdout.strip().splitlines()[-1])["seconds"]
    return took, {"cluster pairs": cluster_pairs(groups), "inner seconds": inner}


def run_textdedup(data, python, work, tuned):
    """text-dedup's single-machine ``text_dedup.minhash`` (its Spark version needs the GraphFrames
    jar, which is not on this machine and cannot be fetched offline); clusters from its union-find
    (``--debug`` writes it, keyed by our ids with ``--idx_column id``)."""
    out, python = os.path.join(work, "textdedup"), os.path.abspath(python)
    # tuned for Jaccard 0.9 of word 3-shingles: its ngram is words (default 5) and threshold 0.7
    extra = ["--threshold", "0.9", "--ngram", "3"] if tuned else []
    cmd = [python, "-m", "text_dedup.minhash", "--path", "json", "--data_files", os.path.join(data, "docs.jsonl"), "--split", "train", "--column", "text", "--idx_column", "id", "--output", out, "--cache_dir", os.path.join(work, "cache"), "--debug", *extra]
    start = time.monotonic()
    measured(cmd, work, capture_output=True, cwd=work)
    took = time.monotonic() - start
    dump = "import json, pickle, sys; uf = pickle.load(open(sys.argv[1], 'rb')); print(json.dumps([[str(x), str(uf.find(x))] for x in uf.parent]))"
    p = subprocess.run([python, "-c", dump, os.path.join(out, "uf.pkl")], check=True, capture_output=True, text=True)
    groups = {}
    for x, root in json.loads(p.stdout):
        groups.setdefault(root, []).append(x)
    return took, {"cluster pairs": cluster_pairs(groups)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tool", choices=["simdex", "curator", "curator-child", "textdedup", "cli", "all"])
    ap.add_argument("data", help="the eval folder: docs.jsonl and pairs.tsv")
    ap.add_argument("--python", action="append", help="the interpreter (virtualenv) to run the tool with [default: this one]; all: repeat to run several builds of simdex.spark, each in turn (a baseline beside the current one)")
    ap.add_argument("--peers-python", help="all: the peers' interpreter")
    ap.add_argument("--simdex", action="append", help="cli, all: the simdex CLI (all: repeat to run several builds, each in turn) [default: target/release/simdex]")
    ap.add_argument("--tools", default="simdex,textdedup,cli,curator", help="all: which tools, in this order (default simdex,textdedup,cli,curator)")
    ap.add_argument("--rounds", type=int, default=1, help="all: rounds of every tool, one after the other")
    ap.add_argument("--tuned", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.tool == "curator-child":
        return curator_child(a.data, a.out, a.tuned)
    clis = a.simdex or ["target/release/simdex"]
    pythons = a.python or [sys.executable]
    true = truth(a.data)
    if a.tool == "all":
        known = {
            "simdex": [("simdex" if len(pythons) == 1 else f"simdex ({p})", lambda w, p=p: run_simdex(a.data, p, w)) for p in pythons],
            "textdedup": [("textdedup tuned", lambda w: run_textdedup(a.data, a.peers_python, w, True))],
            "cli": [(f"simdex dedup ({c})", lambda w, c=c: run_cli(a.data, c, w)) for c in clis],
            "curator": [("curator tuned", lambda w: run_curator(a.data, a.peers_python, w, True))],
        }
        runs = [r for t in a.tools.split(",") for r in known[t]]
        for round_ in range(1, a.rounds + 1):
            for name, run in runs:
                load = open("/proc/loadavg").read().split()[0]
                with tempfile.TemporaryDirectory(dir=os.environ.get("WORK")) as work:
                    try:
                        took, sets = run(work)
                    except (subprocess.CalledProcessError, OSError) as e:
                        err = getattr(e, "stderr", None) or ""
                        err = err if isinstance(err, str) else err.decode(errors="replace")
                        # the error's own lines (Spark's stack traces bury them)
                        said = [line for line in err.splitlines() if re.search(r"Error|Exception|error:", line) and not line.lstrip().startswith("at ")]
                        print(json.dumps({"tool": name, "round": round_, "failed": str(e)[-300:], "errors": said[:20], "stderr tail": err[-2000:], "load before": load}), flush=True)
                        continue
                usage = dict(USAGE)
                for what, reported in sets.items():
                    if isinstance(reported, set):
                        print(json.dumps({"tool": name, "round": round_, "scored": what, "seconds": round(took, 1), "cpu seconds": round(usage.get("cpu", 0), 1), "peak rss MiB": usage.get("peak_rss_mib"), "load before": load, **score(reported, true)}), flush=True)
        return 0
    with tempfile.TemporaryDirectory() as work:
        if a.tool == "cli":
            took, sets = run_cli(a.data, clis[0], work)
        elif a.tool == "simdex":
            took, sets = run_simdex(a.data, pythons[0], work)
        elif a.tool == "textdedup":
            took, sets = run_textdedup(a.data, pythons[0], work, a.tuned)
        else:
            took, sets = run_curator(a.data, pythons[0], work, a.tuned)
    for what, reported in sets.items():
        if isinstance(reported, set):
            print(json.dumps({"tool": a.tool + (" tuned" if a.tuned else ""), "scored": what, "seconds": round(took, 1), "cpu seconds": round(USAGE.get("cpu", 0), 1), "peak rss MiB": USAGE.get("peak_rss_mib"), **score(reported, true)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
