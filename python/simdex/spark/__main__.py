"""``python -m simdex.spark dedup INPUT... --pairs OUT.tsv``: ``simdex dedup`` on Spark;
``python -m simdex.spark cluster INPUT... --pairs OUT.tsv``: ``simdex cluster`` on Spark.

Also runs under ``spark-submit`` (give this file, or ``-m``-less: ``spark-submit
$(python -c 'import simdex.spark.__main__ as m; print(m.__file__)') dedup ...``); without
``--master`` the session takes Spark's own default (``local[*]``, or what spark-submit set).
A local session starts without the web UI and with lean JVM settings (``LOCAL_DEFAULTS``),
its driver's classes mapped from a class-data archive that the first run writes (``_jvm``);
``--conf spark.ui.enabled=true`` (or any setting of the same key) brings Spark's own back.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable

USAGE_ERROR = 2


def parse_args(argv):
    from simdex._simdex import DEFAULT_CONFIRMED_K, DEFAULT_MIN_SIMILARITY, DEFAULT_UNCONFIRMED_K

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
    d.add_argument("-k", type=int, help=f"near-duplicates differ in at most K bits [default: {DEFAULT_CONFIRMED_K} confirmed by sketch, {DEFAULT_UNCONFIRMED_K} with --no-confirm]")
    d.add_argument("--no-confirm", action="store_true", help="pairs within k by fingerprint alone, not confirmed by sketch")
    d.add_argument("--confirm-threshold", type=float, default=None, help=f"resemblance a confirmed pair needs (default {DEFAULT_MIN_SIMILARITY})")
    d.add_argument("--no-second-look", action="store_true", help="decide by the sketch estimate alone, also within the sketch's noise of the threshold (by default those pairs get a second look: the exact Jaccard of their word 3-shingle sets), as simdex dedup --no-second-look")
    d.add_argument("--no-band-candidates", action="store_true", help="take as candidates only the pairs whose fingerprints are within k (by default pairs whose sketches share a band are too), as simdex dedup --no-band-candidates")
    d.add_argument("--preset", default="pages", help="fingerprint recipe preset (default pages, as simdex dedup)")
    d.add_argument("--index", metavar="DIR", help="also check every document against this index (its pinned recipe is used)")
    d.add_argument("--matches", metavar="FILE", help="with --index: id<TAB>index_doc_id<TAB>fingerprint<TAB>distance<TAB>similarity of each match")
    d.add_argument("--insert", "--add", dest="insert", action="store_true", help="with --index: insert the corpus into the index afterwards (--add: its old name)")
    d.add_argument("--master", help="Spark master URL (default: Spark's own, e.g. spark-submit's)")
    d.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for the session (e.g. spark.driver.memory=4g), as spark-submit --conf")
    d.add_argument("--fail-on-bad", action="store_true", help="fail (exit 1) when any record is bad or any document gets no fingerprint")
    c = sub.add_parser("cluster", help="near-duplicate pairs and clusters of fingerprints (simdex cluster's answers)")
    c.add_argument("inputs", nargs="+", metavar="INPUT", help="files or folders (walked recursively, in name order)")
    c.add_argument("--format", default="fingerprints", choices=["fingerprints", "binary", "parquet"], help="fingerprints: FINGERPRINT_HEX[<TAB>ID] a line (simdex bench generate --with-ids); binary: little-endian u64 fingerprints, as simdex insert --binary; parquet: a 64-bit fp column and an optional id")
    c.add_argument("--with-ids", action="store_true", help="with --format binary: each fingerprint is followed by a u64 document id (simdex insert --binary --with-ids)")
    c.add_argument("-k", type=int, help=f"near-duplicates differ in at most K bits (default {DEFAULT_UNCONFIRMED_K}, as simdex cluster)")
    c.add_argument("--pairs", metavar="FILE", help="every pair, as simdex cluster --pairs: fp_a<TAB>fp_b<TAB>distance, sorted")
    c.add_argument("--clusters", metavar="FILE", help="every entry in a cluster: fp<TAB>id<TAB>cluster (the cluster's smallest fingerprint; no id column without ids)")
    c.add_argument("--master", help="Spark master URL (default: Spark's own, e.g. spark-submit's)")
    c.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting for the session (e.g. spark.driver.memory=4g), as spark-submit --conf")
    c.add_argument("--fail-on-bad", action="store_true", help="fail (exit 1) when any line or record is bad (by default they are counted, named and skipped)")
    c.add_argument("--driver-pairs", type=int, default=None, help="pairs the driver merges from the join's sorted runs into its union-find at most (default 2^26); past it, Spark sorts them and finds the components itself")
    c.add_argument("--against", metavar="DIR", help="the input is a new batch: also its pairs with the fingerprints stored in this index (time grows with the batch); --clusters lists the batch's entries")
    c.add_argument("--split-bytes", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    for setting in args.conf:
        if "=" not in setting:
            p.error(f"--conf {setting}: expected KEY=VALUE")
    for path in args.inputs:
        if not os.path.exists(path):
            p.error(f"cannot read {path}: no such file or folder")
    from simdex._simdex import corpus_options

    if args.command == "cluster":
        try:  # the library's default, limit and message for fingerprints alone
            args.k = corpus_options(args.k, False, None)[0]
        except ValueError as e:
            p.error(f"-k {args.k}: {e}")
        if args.against and not os.path.isdir(args.against):
            p.error(f"--against {args.against}: no such index folder")
        if args.with_ids and args.format != "binary":
            p.error("--with-ids needs --format binary (text and Parquet input say whether they carry ids)")
        if args.format == "binary":
            from simdex.spark._cluster import check_binary
            from simdex.spark._read import InputError, expand

            args.format = "binary-ids" if args.with_ids else "binary"
            try:  # before Spark starts: a truncated file is a quick error
                check_binary(expand(args.inputs), args.format)
            except InputError as e:
                p.error(str(e))
        check_outputs(p, args, ("pairs", "clusters"))
        return args
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


# Settings of a local-mode session unless the command line or the environment gives them: the
# session is one JVM for one command's batch, so it starts without the web UI's server, with the
# client compiler only (no C2 compiler threads competing for the cores at start; the JVM moves
# bytes between Python and the shuffle, its own code is not the hot loop) and the serial
# collector (no concurrent GC threads). Measured on the 2-core Xeon: the session and its first
# jobs start in about a third of the time (benches/history, Spark III); answers do not change.
LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def session_settings(local: bool, given: dict, defaults=None, is_set=lambda key: False) -> dict:
    """The settings a command's session is built with: ``given`` (``--conf``) always; the
    command's ``defaults`` and, in local mode, ``LOCAL_DEFAULTS`` where neither ``given`` nor
    Spark's own configuration (``is_set``) names the key."""
    out = {}
    for key, value in {**(LOCAL_DEFAULTS if local else {}), **(defaults or {})}.items():
        if key not in given and not is_set(key):
            out[key] = value
    return {**out, **given}


def _set_elsewhere(conf) -> Callable[[str], bool]:
    """Whether Spark's own configuration names a key: the session's ``SparkConf``, the
    ``spark-defaults.conf`` spark-submit reads (``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``),
    or ``PYSPARK_SUBMIT_ARGS`` (where ``--driver-java-options`` sets the driver's options)."""
    folder = os.environ.get("SPARK_CONF_DIR") or os.path.join(os.environ.get("SPARK_HOME", ""), "conf")
    keys = set()
    try:
        with open(os.path.join(folder, "spark-defaults.conf"), encoding="utf-8") as f:
            keys = {line.split(None, 1)[0].split("=", 1)[0] for line in f if line.strip() and not line.lstrip().startswith("#")}
    except OSError:
        pass
    submit = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    if "--driver-java-options" in submit:
        keys.add("spark.driver.extraJavaOptions")
    return lambda key: conf.contains(key) or key in keys or key in submit


# the class-data archive this process's session uses or writes (``_jvm.Archive``)
ARCHIVE = None


def session(master, conf=(), defaults=None):
    global ARCHIVE
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print("error: simdex.spark needs pyspark: pip install 'simdex[spark]'", file=sys.stderr)
        sys.exit(USAGE_ERROR)
    from pyspark import SparkConf

    b = SparkSession.builder.appName("simdex dedup")
    local = (master or SparkConf().get("spark.master", "local")).startswith("local")
    if local and "SPARK_LOCAL_IP" not in os.environ:
        # local mode: the driver and its executors bind the loopback interface only
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    if local and "PYSPARK_PYTHON" not in os.environ:
        # local mode: the Python workers are this interpreter, which has simdex
        os.environ["PYSPARK_PYTHON"] = sys.executable
    if master:
        b = b.master(master)
    given = dict(setting.split("=", 1) for setting in conf)
    settings = session_settings(local, given, defaults, _set_elsewhere(SparkConf()))
    java = "spark.driver.extraJavaOptions"
    if settings.get(java) == LOCAL_DEFAULTS[java]:
        # the JVM options are the command's: its classes from the archive (or the archive made)
        from pyspark.find_spark_home import _find_spark_home

        from simdex.spark._jvm import archive

        ARCHIVE = archive(_find_spark_home())
        if ARCHIVE is not None:
            settings[java] += " " + ARCHIVE.options
    for key, value in settings.items():
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
    r = found.components
    where = "on the driver (union-find)" if r is None else f"in Spark (large-star/small-star: {r.rounds} rounds, {r.hubs} hubs' {r.hub_rows} rows by broadcast)"
    holding = f"{found.members} entries" if found.members is not None else f"{found.clustered} distinct fingerprints"
    print(f"pairs within {args.k}: {found.pairs}; {found.clusters} clusters holding {holding}, found {where}", file=log)
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
    corpus = read_files(spark, args.inputs, args.format, args.strict)
    sc = spark.sparkContext
    sc.setJobGroup("simdex dedup", "simdex dedup")
    index = None
    if args.index:
        from simdex.spark._incremental import IndexCheck

        index = IndexCheck(args.index, args.matches, args.insert)
    found = dedup(
        spark,
        corpus,
        k=args.k,
        confirm=not args.no_confirm,
        threshold=args.confirm_threshold,
        preset=args.preset,
        recipe=recipe,
        pairs=args.pairs,
        clusters=args.clusters,
        kept=args.kept,
        skipped=args.skipped,
        index=index,
        band_candidates=False if args.no_band_candidates else None,
        second_look=False if args.no_second_look else None,
    )
    if found.skipped and args.fail_on_bad:
        first = found.skipped_shown[0] if found.skipped_shown else ""
        print(f"error: {found.skipped} bad records or documents without a fingerprint (--fail-on-bad); first: {first}", file=log)
        return 1
    print(f"recipe: {found.recipe.recipe}", file=log)
    out = args.pairs or args.clusters or args.kept
    if out:
        with open(out + ".recipe", "w") as f:
            f.write(found.recipe.recipe + "\n")
        found.recipe.save_idf(out + ".idf")
    print(f"documents: {found.documents} ({found.skipped} skipped: bad records or no fingerprint)", file=log)
    print(f"representatives fingerprinted: {found.representatives}", file=log)
    for line in found.skipped_shown:
        print(f"skipped {line}", file=log)
    print(f"exact duplicates: {found.exact_groups} groups ({found.redundant} redundant copies)", file=log)
    confirmed = f", confirmed: sketch resemblance >= {found.threshold}" if found.threshold is not None else ""
    print(f"near-duplicate links (k = {found.k}{confirmed}): {found.links}; clusters of exact copies and near-duplicates: {found.clusters} clusters, {found.clustered} documents", file=log)
    if found.beyond_k:
        print(f"  of them {found.beyond_k} beyond k, found because their sketches share a band", file=log)
    if found.second_look is not None:
        print(f"second look (exact Jaccard) at {found.second_look[0]} pairs estimated within the sketch's noise of the threshold: {found.second_look[1]} changed side", file=log)
    if args.pairs:
        print(f"pairs: {found.pairs} written to {args.pairs}", file=log)
    if args.clusters:
        print(f"clusters: {found.clustered} documents in clusters written to {args.clusters}", file=log)
    if args.kept:
        print(f"kept: {found.kept} documents written to {args.kept}", file=log)
    if args.skipped:
        print(f"skipped: {found.skipped} written to {args.skipped}", file=log)
    if index is not None:
        if args.matches:
            print(f"index matches: {index.matches} written to {args.matches}", file=log)
        if args.insert:
            print(f"index {args.index}: {index.inserted} documents inserted (durable)", file=log)
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
    finally:
        if spark is None:  # the session this command started: stopped (its event log closed)
            stop_session()


def stop_session() -> None:
    """Stops the session the command started; when it writes the class-data archive, ends its
    JVM too (which then writes it) and puts the archive in place."""
    global ARCHIVE
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    if ARCHIVE is not None and ARCHIVE.create and SparkContext._gateway is not None:
        if ARCHIVE.finish(getattr(SparkContext._gateway, "proc", None)):
            print(f"the driver JVM's class-data archive written to {ARCHIVE.path} (once: later local runs start from it)", file=sys.stderr)
        SparkContext._gateway, SparkContext._jvm = None, None
    ARCHIVE = None


if __name__ == "__main__":
    sys.exit(main())
