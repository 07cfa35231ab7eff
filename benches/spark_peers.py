"""Issue 22, item 5: simdex.spark beside distributed-curator's Spark MinHash LSH on one corpus,
one machine, one Spark master: wall time, and precision / recall / F1 of the pairs each
reports against the ground truth of ../shared/eval (exact Jaccard >= 0.9 of word
3-shingles; its ``groundtruth.py`` writes ``DATA/pairs.tsv``).

A tool that outputs clusters (distributed-curator marks each document's representative) is
scored on the pairs its clusters imply (every two members of one cluster); simdex is scored on
its ``--pairs`` file, and on its clusters' pairs too.

Each tool runs in its own process, in its own virtualenv (peers are never vendored):

    python benches/spark_peers.py simdex DATA --python target/spark-venv/bin/python
    python benches/spark_peers.py curator DATA --python target/peers-venv/bin/python [--tuned]
    python benches/spark_peers.py textdedup DATA --python target/peers-venv/bin/python [--tuned]
"""

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

MASTER = "local[2]"


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


def run_simdex(data, python, work):
    pairs, clusters = os.path.join(work, "pairs.tsv"), os.path.join(work, "clusters.tsv")
    os.environ["PYSPARK_PYTHON"] = python
    cmd = [python, "-m", "simdex.spark", "dedup", os.path.join(data, "docs.jsonl"), "--format", "jsonl", "--pairs", pairs, "--clusters", clusters, "--master", MASTER]
    start = time.monotonic()
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    took = time.monotonic() - start
    reported = set()
    with open(pairs, encoding="utf-8") as f:
        for line in f:
            a, b = line.split("\t")[:2]
            reported.add((a, b) if a < b else (b, a))
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
    p = subprocess.run([python, __file__, "curator-child", data, "--out", out] + (["--tuned"] if tuned else []), check=True, capture_output=True, text=True)
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
    subprocess.run(cmd, check=True, capture_output=True, cwd=work)
    took = time.monotonic() - start
    dump = "import json, pickle, sys; uf = pickle.load(open(sys.argv[1], 'rb')); print(json.dumps([[str(x), str(uf.find(x))] for x in uf.parent]))"
    p = subprocess.run([python, "-c", dump, os.path.join(out, "uf.pkl")], check=True, capture_output=True, text=True)
    groups = {}
    for x, root in json.loads(p.stdout):
        groups.setdefault(root, []).append(x)
    return took, {"cluster pairs": cluster_pairs(groups)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tool", choices=["simdex", "curator", "curator-child", "textdedup"])
    ap.add_argument("data", help="the eval folder: docs.jsonl and pairs.tsv")
    ap.add_argument("--python", default=sys.executable, help="the interpreter (virtualenv) to run the tool with")
    ap.add_argument("--tuned", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.tool == "curator-child":
        return curator_child(a.data, a.out, a.tuned)
    true = truth(a.data)
    with tempfile.TemporaryDirectory() as work:
        if a.tool == "simdex":
            took, sets = run_simdex(a.data, a.python, work)
        elif a.tool == "textdedup":
            took, sets = run_textdedup(a.data, a.python, work, a.tuned)
        else:
            took, sets = run_curator(a.data, a.python, work, a.tuned)
    for what, reported in sets.items():
        if isinstance(reported, set):
            print(json.dumps({"tool": a.tool + (" tuned" if a.tuned else ""), "scored": what, "seconds": round(took, 1), **score(reported, true)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
