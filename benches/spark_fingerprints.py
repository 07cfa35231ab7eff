"""The Spark pipeline's pair and cluster steps on bare fingerprints (issue 22, item 5): the
permuted-table self-join (``simdex.spark._pipeline.candidate_pairs``) and large-star /
small-star components, on the fingerprints of a ``simdex bench generate`` file, to set beside
``simdex cluster`` of the same fingerprints (benches/spark_scale.sh runs both).

usage: python benches/spark_fingerprints.py FILE [-k 3] [--master local[2]]
prints: fingerprints, pairs within k, clusters of two or more fingerprints, seconds.
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
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from simdex.spark._components import components
    from simdex.spark._pipeline import candidate_pairs, signed

    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        .config("spark.driver.memory", "3g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    start = time.monotonic()
    lines = spark.sparkContext.textFile(args.file, args.partitions)
    fps = spark.createDataFrame(lines.map(lambda line: (signed(int(line.split()[0], 16)),)), "fp long").distinct()
    pairs, plan = candidate_pairs(spark, fps, args.k, None)
    pairs = pairs.persist()
    n_pairs = pairs.count()
    comp = components(pairs.select(F.col("fa").alias("a"), F.col("fb").alias("b")))
    clusters = comp.select("component").distinct().count()
    took = time.monotonic() - start
    print(f"fingerprints: {fps.count()}  tables: {len(plan.tables)}  pairs within {args.k}: {n_pairs}  clusters: {clusters}  seconds: {took:.1f}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
