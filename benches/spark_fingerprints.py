"""The Spark pipeline's pair and cluster steps on bare fingerprints (issue 22, item 5): the
permuted-table self-join (``simdex.spark._pipeline.candidate_pairs``) and large-star /
small-star components, on the fingerprints of a ``simdex bench generate`` file, to set beside
``simdex cluster`` of the same fingerprints (benches/spark_scale.sh runs both).

usage: python benches/spark_fingerprints.py FILE [-k 3] [--master local[2]]
prints: fingerprints, pairs within k, clusters of two or more fingerprints, each step's
seconds and the total.
"""

import argparse
import os
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", help="fingerprints, 16 hex digits first on each line")
    p.add_argument("-k", type=int, default=3)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--candidates-log2", type=float, default=None, help="the planner's bound for the join (default: the pipeline's)")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import StorageLevel
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from simdex.spark._components import components
    from simdex.spark._pipeline import candidate_pairs

    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        .config("spark.driver.memory", "8g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    start = time.monotonic()
    # parsed in the JVM: the first field's 16 hex digits as two 32-bit halves, the high one
    # shifted into the sign bit (a fingerprint >= 2^63 is a negative long, as signed() makes it)
    first = F.lpad(F.split(F.col("value"), "[ \t]", 2)[0], 16, "0")

    def half(at):
        return F.conv(F.substring(first, at, 8), 16, 10).cast("long")

    lines = spark.read.text(args.file).where(F.length("value") > 0)
    fps = lines.select(F.shiftleft(half(1), 32).bitwiseOR(half(9)).alias("fp")).distinct()
    fps = fps.persist(StorageLevel.MEMORY_AND_DISK)
    n = fps.count()
    read = time.monotonic()
    bound = {} if args.candidates_log2 is None else {"candidates_log2": args.candidates_log2}
    pairs, plan = candidate_pairs(spark, fps, args.k, None, **bound)
    pairs = pairs.persist()
    n_pairs = pairs.count()
    paired = time.monotonic()
    comp = components(pairs.select(F.col("fa").alias("a"), F.col("fb").alias("b")))
    clusters = comp.select("component").distinct().count()
    end = time.monotonic()
    steps = f"read+distinct {read - start:.1f}s, keys+join {paired - read:.1f}s, components {end - paired:.1f}s"
    print(f"fingerprints: {n}  tables: {len(plan.tables)}  pairs within {args.k}: {n_pairs}  clusters: {clusters}  ({steps})  seconds: {end - start:.1f}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
