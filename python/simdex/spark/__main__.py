"""``python -m simdex.spark dedup INPUT... --pairs OUT.tsv``: ``simdex dedup`` on Spark;
``python -m simdex.spark cluster INPUT... --pairs OUT.tsv``: ``simdex cluster`` on Spark.

Also runs under ``spark-submit`` (give this file, or ``-m``-less: ``spark-submit
$(python -c 'import simdex.spark.__main__ as m; print(m.__file__)') dedup ...``); without
``--master`` the session takes Spark's own default (``local[*]``, or what spark-submit set).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

USAGE_ERROR = 2


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m simdex.spark", description="Near-duplicate documents of a corpus on Spark (simdex dedup's answers).")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dedup", help="exact and near-duplicate pairs, clusters and the deduplicated documents")
    d.add_argument("inputs", nargs="+", metavar="INPUT", help="files or folders (walked recursively, in name order)")
    d.add_argument("--format", default="auto", choices=["auto", "text", "html", "jsonl", "parquet"], help="input format (auto: by extension, as simdex dedup)")
    d.add_argument("--strict", action="store_true", help="refuse documents with invalid UTF-8 instead of replacing the bad bytes")
    d.add_argument("--pairs", metavar="FILE", help="every near-duplicate pair, as simdex dedup --pairs: id_a<TAB>id_b<TAB>distance<TAB>similarity")
    d.add_argument("--clusters", metavar="FILE", help="id<TAB>cluster of every document in a cluster of two or more (cluster: its first document's id)")
    d.add_argument("--kept", metavar="FILE", help="the deduplicated corpus as JSON lines {id, text}: the first document of each cluster and every document alone")
    d.add_argument("--skipped", metavar="FILE", help="id<TAB>reason of every bad record and every document without a fingerprint")
    d.add_argument("-k", type=int, help="near-duplicates differ in at most K bits [default: 8 confirmed by sketch, 3 with --no-confirm]")
    d.add_argument("--no-confirm", action="store_true", help="pairs within k by fingerprint alone, not confirmed by sketch")
    d.add_argument("--confirm-threshold", type=float, default=None, help="resemblance a confirmed pair needs (default 0.9)")
    d.add_argument("--preset", default="pages", help="fingerprint recipe preset (default pages, as simdex dedup)")
    d.add_argument("--index", metavar="DIR", help="also check every document against this index (its pinned recipe is used)")
    d.add_argument("--matches", metavar="FILE", help="with --index: id<TAB>index_doc_id<TAB>fingerprint<TAB>distance<TAB>similarity of each match")
    d.add_argument("--insert", "--add", dest="insert", action="store_true", help="with --index: insert the corpus into the index afterwards (--add: its name before issue 35)")
    d.add_argument("--master", help="Spark master URL (default: Spark's own, e.g. spark-submit's)")
    d.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for the session (e.g. spark.driver.memory=4g), as spark-submit --conf")
    d.add_argument("--fail-on-bad", action="store_true", help="fail (exit 1) when any record is bad or any document gets no fingerprint")
    c = sub.add_parser("cluster", help="near-duplicate pairs and clusters of fingerprints (simdex cluster's answers)")
    c.add_argument("inputs", nargs="+", metavar="INPUT", help="files or folders (walked recursively, in name order)")
    c.add_argument("--format", default="fingerprints", choices=["fingerprints", "parquet"], help="fingerprints: FINGERPRINT_HEX[<TAB>ID] a line (simdex bench generate --with-ids); parquet: a 64-bit fp column and an optional id")
    c.add_argument("-k", type=int, default=3, help="near-duplicates differ in at most K bits (default 3, as simdex cluster)")
    c.add_argument("--pairs", metavar="FILE", help="every pair, as simdex cluster --pairs: fp_a<TAB>fp_b<TAB>distance, sorted")
    c.add_argument("--clusters", metavar="FILE", help="every entry in a cluster: fp<TAB>id<TAB>cluster (the cluster's smallest fingerprint; no id column without ids)")
    c.add_argument("--master", help="Spark master URL (default: Spark's own, e.g. spark-submit's)")
    c.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for the session (e.g. spark.driver.memory=4g), as spark-submit --conf")
    c.add_argument("--fail-on-bad", action="store_true", help="fail (exit 1) when any line or record is bad (by default they are counted, named and skipped)")
    c.add_argument("--driver-pairs", type=int, default=None, help="pairs the driver takes for its union-find at most (default 2^26, 1 GiB); past it, Spark sorts them and finds the components itself")
    c.add_argument("--against", metavar="DIR", help="the input is a new batch: also its pairs with the fingerprints stored in this index (time grows with the batch); --clusters lists the batch's entries")
    c.add_argument("--split-bytes", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for setting in args.conf:
        if "=" not in setting:
            p.error(f"--conf {setting}: expected KEY=VALUE")
    for path in args.inputs:
        if not os.path.exists(path):
            p.error(f"cannot read {path}: no such file or folder")
    if args.command == "cluster":
        if not 0 <= args.k <= 8:
            p.error(f"-k {args.k}: must be between 0 and 8")
        if args.against and not os.path.isdir(args.against):
            p.error(f"--against {args.against}: no such index folder")
        check_outputs(p, args, ("pairs", "clusters"))
        return args
    from simdex._simdex import corpus_options

    try:  # the library's rule and message, as simdex dedup's
        corpus_options(args.k, not args.no_confirm, args.confirm_threshold)
    except ValueError as e:
        p.error(str(e))
    if (args.matches or args.insert) and not args.index:
        p.error("--matches and --insert need --index DIR")
    if args.index and not os.path.isdir(args.index):
        p.error(f"--index {args.index}: no such index folder")
    check_outputs(p, args, ("pairs", "clusters", "kept", "skipped", "matches"))
    return args


def check_outputs(p, args, names) -> None:
    """Refuses, before Spark starts, an output whose folder is missing or not writable."""
    for what in names:
        path = getattr(args, what)
        if not path:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            p.error(f"--{what} {path}: its folder does not exist")
        if os.path.isdir(path):
            p.error(f"--{what} {path}: is a folder, not a file")
        if not os.access(folder, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
            p.error(f"--{what} {path}: not writable")


def session(master, conf=(), defaults=None):
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print("error: simdex.spark needs pyspark: pip install 'simdex[spark]'", file=sys.stderr)
        sys.exit(USAGE_ERROR)
    from pyspark import SparkConf

    b = SparkSession.builder.appName("simdex dedup")
    local = (master or SparkConf().get("spark.master", "local")).startswith("local")
    if local and "PYSPARK_PYTHON" not in os.environ:
        # local mode: the Python workers are this interpreter, which has simdex
        os.environ["PYSPARK_PYTHON"] = sys.executable
    if master:
        b = b.master(master)
    given = dict(setting.split("=", 1) for setting in conf)
    for key, value in {**(defaults or {}), **given}.items():
        if key in given or not SparkConf().contains(key):
            b = b.config(key, value)
    if not sys.stderr.isatty():
        b = b.config("spark.ui.showConsoleProgress", "false")
    spark = b.getOrCreate()
    if not spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        # Spark's 200 is for large inputs; adaptive execution coalesces small ones further
        spark.conf.set("spark.sql.shuffle.partitions", str(4 * spark.sparkContext.defaultParallelism))
    return spark


def print_steps(log) -> None:
    """Each step's seconds, in order (the Spark UI names the same steps' jobs)."""
    from simdex.spark._pipeline import STEP_SECONDS

    print("steps: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in STEP_SECONDS), file=log)


def run_cluster(args, spark=None) -> int:
    from simdex.spark import _cluster as C

    started = time.monotonic()
    options = {}
    if args.against:  # before Spark starts: a bad index is a quick error
        from simdex._simdex import IndexReader

        IndexReader(args.against)
        options["against"] = os.path.abspath(args.against)
    # the shuffle moves fingerprints, which do not compress: skip the work (unless set)
    spark = spark or session(args.master, args.conf, {"spark.shuffle.compress": "false"})
    log = sys.stderr
    if args.driver_pairs is not None:
        options["driver_pairs"] = args.driver_pairs
    if args.split_bytes:
        options["split_bytes"] = args.split_bytes
    found = C.cluster(spark, args.inputs, args.format, args.k, args.pairs, args.clusters, **options)
    for line in found.bad_shown:
        print(f"bad line {line}", file=log)
    if found.bad_lines and args.fail_on_bad:
        print(f"error: {found.bad_lines} bad lines or records (--fail-on-bad)", file=log)
        return 1
    print(f"fingerprints: {found.fingerprints} ({found.bad_lines} bad lines or records skipped)", file=log)
    print(f"design: {found.design}; each fingerprint sent to {found.groups} of {found.partitions} partitions", file=log)
    where = "on the driver (union-find)" if found.on_driver else "in Spark (large-star/small-star)"
    print(f"pairs within {args.k}: {found.pairs}; {found.clustered} fingerprints in clusters, found {where}", file=log)
    if args.pairs:
        print(f"pairs written to {args.pairs}", file=log)
    if args.clusters:
        print(f"cluster members written to {args.clusters}", file=log)
    print_steps(log)
    print(f"done in {time.monotonic() - started:.1f} s", file=log)
    return 0


def run(args, spark=None) -> int:
    if args.command == "cluster":
        return run_cluster(args, spark)
    from pyspark.sql import functions as F

    from simdex.spark import _output as O
    from simdex.spark._dedup import dedup
    from simdex.spark._read import read_files

    started = time.monotonic()
    if args.index:  # before Spark starts: a bad index is a quick error
        from simdex._simdex import IndexReader

        recipe = IndexReader(args.index).recipe()
    else:
        recipe = None
    spark = spark or session(args.master, args.conf)
    log = sys.stderr
    docs = read_files(spark, args.inputs, args.format, args.strict)
    result = dedup(spark, docs, k=args.k, confirm=not args.no_confirm, threshold=args.confirm_threshold, preset=args.preset, recipe=recipe)
    from simdex.spark._pipeline import step

    sc = spark.sparkContext
    with step(sc, "count skipped records"):
        skipped = result.skipped.count()
    if skipped and args.fail_on_bad:
        print(f"error: {skipped} bad records or documents without a fingerprint (--fail-on-bad); first: {result.skipped.first()}", file=log)
        return 1
    print(f"recipe: {result.recipe.recipe}", file=log)
    out = args.pairs or args.clusters or args.kept
    if out:
        with open(out + ".recipe", "w") as f:
            f.write(result.recipe.recipe + "\n")
        table = result.recipe.idf_table()
        if table is not None:
            with open(out + ".idf", "wb") as f:
                f.write(table)
    tab = lambda *cols: F.concat_ws("\t", *[F.col(c).cast("string") for c in cols])  # noqa: E731
    with step(sc, "summary counts"):
        documents = result.documents.count()
        print(f"documents: {documents} ({skipped} skipped: bad records or no fingerprint)", file=log)
        print(f"representatives fingerprinted: {result.fingerprinted.where('fp is not null').count()}", file=log)
        for row in result.skipped.limit(5).collect():
            print(f"skipped {row[0]}: {row[1]}", file=log)
    if args.pairs:
        with step(sc, "write pairs"):
            n = O.write_lines(result.pairs, tab("id_a", "id_b", "distance", "similarity"), ["ord_a", "ord_b"], args.pairs)
        print(f"pairs: {n} written to {args.pairs}", file=log)
    if args.clusters:
        with step(sc, "write clusters"):
            n = O.write_lines(result.clusters, tab("id", "cluster"), ["cluster_ord", "ord"], args.clusters)
        print(f"clusters: {n} documents in clusters written to {args.clusters}", file=log)
    if args.kept:
        with step(sc, "write kept documents"):
            n = O.write_lines(result.kept, F.to_json(F.struct("id", "text")), ["ord"], args.kept)
        print(f"kept: {n} documents written to {args.kept}", file=log)
    if args.skipped:
        with step(sc, "write skipped"):
            O.write_lines(result.skipped, tab("id", "reason"), ["id", "reason"], args.skipped)
    if args.index:
        from simdex.spark._incremental import insert_new_documents, index_matches

        matches = index_matches(spark, result, args.index, result.k, result.threshold is not None, result.threshold)
        if args.matches:
            sc.setJobGroup("simdex dedup", "simdex dedup: write index matches")
            hexfp = F.lpad(F.lower(F.hex(F.col("sfp"))), 16, "0")
            line = F.concat_ws("\t", "id", F.when(F.col("sid") < 0, F.col("sid").cast("decimal(20,0)") + F.expr("CAST('18446744073709551616' AS DECIMAL(20,0))")).otherwise(F.col("sid")).cast("decimal(20,0)").cast("string"), hexfp, F.col("distance").cast("string"), "similarity_text")
            n = O.write_lines(matches, line, ["ord", "distance", "sfp", "sid"], args.matches)
            print(f"index matches: {n} written to {args.matches}", file=log)
        if args.insert:
            sc.setJobGroup("simdex dedup", "simdex dedup: insert into the index")
            inserted = insert_new_documents(result, args.index)
            print(f"index {args.index}: {inserted} documents inserted (durable)", file=log)
    print_steps(log)
    print(f"done in {time.monotonic() - started:.1f} s", file=log)
    return 0


def main(argv=None, spark=None) -> int:
    """The command line; ``spark``: run in this session (tests) instead of starting one."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from simdex._simdex import Error
    from simdex.spark._read import InputError

    try:
        return run(args, spark)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return USAGE_ERROR
    except Error as e:  # the library's (a damaged or locked index, a recipe mismatch)
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
