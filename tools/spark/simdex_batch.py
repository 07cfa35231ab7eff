#!/usr/bin/env python3
"""Batch near-duplicate queries over many index chunks with Apache Spark.

The paper's MapReduce batch mode (section 3.3): every chunk of the stored fingerprints is
one task; the query file Q is shipped to every executor; each task runs the `simdex`
binary's merge join (`simdex batch CHUNK --queries Q`) on its chunk; the driver merges
the outputs, removes duplicates and sorts them exactly as `simdex batch` sorts its own
(query, then distance, then matched fingerprint, then document id).

Chunks are segment files, typically written by `simdex split INDEX --parts N --out DIR`.

Run locally:
    spark-submit tools/spark/simdex_batch.py --simdex target/release/simdex \
        --queries q.txt --out matches.tsv chunks/part-*.sdx

On a cluster (unchanged script):
  * the `simdex` binary is shipped to every executor with `--ship-binary` (it must be built
    for the executors' OS and CPU architecture: Linux x86-64 here), or already installed at
    the same path on every node (`--simdex /opt/simdex/bin/simdex`);
  * the query file is shipped to every executor by the script (SparkContext.addFile);
  * the chunks must be readable at the given paths from every executor: a shared file
    system (NFS, a mounted HDFS/S3 path) or node-local copies at identical paths; with
    `--ship-chunks` the script ships them too (fine for a few GB in total);
  * the output is written by the driver to `--out` (a local path on the driver).
"""

import argparse
import os
import subprocess
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("chunks", nargs="+", help="segment files (one Spark task each)")
    p.add_argument("--queries", required=True, help="query file (16 hex digits per line)")
    p.add_argument("--out", required=True, help="output file (query, match, distance[, doc_id] per line)")
    p.add_argument("-k", type=int, default=3, help="largest Hamming distance (default 3)")
    p.add_argument("--simdex", default="simdex", help="path of the simdex binary on the executors")
    p.add_argument("--ship-binary", action="store_true", help="ship --simdex from the driver to the executors")
    p.add_argument("--ship-chunks", action="store_true", help="ship the chunk files to the executors")
    p.add_argument("--master", default=None, help="Spark master when not run by spark-submit (e.g. local[2])")
    return p.parse_args(argv)


def sort_key(line):
    fields = line.split("\t")
    doc = int(fields[3]) if len(fields) > 3 else -1
    return (fields[0], int(fields[2]), fields[1], doc)


def main(argv):
    args = parse_args(argv)
    from pyspark import SparkFiles
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("simdex-batch")
    if args.master:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    try:
        sc.addFile(os.path.abspath(args.queries))
        queries_name = os.path.basename(args.queries)
        binary = args.simdex
        if args.ship_binary:
            sc.addFile(os.path.abspath(args.simdex))
            binary = None
        shipped = args.ship_chunks
        chunks = [os.path.abspath(c) for c in args.chunks]
        if shipped:
            for c in chunks:
                sc.addFile(c)
        k = args.k
        binary_name = os.path.basename(args.simdex)

        def run_chunk(chunk):
            exe = binary or SparkFiles.get(binary_name)
            if binary is None:
                os.chmod(exe, 0o755)
            path = SparkFiles.get(os.path.basename(chunk)) if shipped else chunk
            cmd = [exe, "batch", path, "--queries", SparkFiles.get(queries_name), "-k", str(k), "--threads", "1"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError("simdex failed on %s (exit %d): %s" % (chunk, done.returncode, done.stderr.strip()))
            return done.stdout.splitlines()

        lines = (
            sc.parallelize(chunks, numSlices=len(chunks))
            .flatMap(run_chunk)
            .distinct()
            .sortBy(sort_key, numPartitions=max(1, min(len(chunks), 8)))
        )
        with open(args.out, "w") as f:
            for line in lines.toLocalIterator():
                f.write(line + "\n")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
