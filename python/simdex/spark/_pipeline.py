"""The steps of ``simdex dedup`` as Spark jobs (see the package docs for the whole story).

Every step is a pure function of its input rows (no randomness, no clock), so a task that
Spark runs again gives the same rows, and the outputs are written by the executors through
Spark's output committer: a retried task leaves no trace.
"""

from __future__ import annotations

import array
import contextlib
import math
import sys
from typing import Iterator, Optional

from .._simdex import DEFAULT_CONFIRMED_K, DEFAULT_UNCONFIRMED_K, CorpusRecipe, TablePlan, sketch_similarity
from .._simdex import DEFAULT_MIN_SIMILARITY as DEFAULT_THRESHOLD

BATCH = 512  # documents per library call in the executors
SIGN = -(1 << 63)  # XOR with it orders signed longs as unsigned fingerprints
# The planner's bound on the fingerprints one key is expected to share, as a power of two, for
# the pair step's join: every shared key is a pair the join checks row by row (the library's
# default, 2^8, suits a segment's 1 KB blocks; here it would make the join quadratic in the
# buckets: 4 tables of 16 bits at 2^22 fingerprints check 537 million candidate pairs, the
# 10 tables of 25 bits this bound gives check 2 million for 2.5x the rows).
JOIN_CANDIDATES_LOG2 = 1.0


def signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def unsigned(x: int) -> int:
    return x + (1 << 64) if x < 0 else x


@contextlib.contextmanager
def step(sc, name: str):
    """Names the jobs (and their stages, through the call site) Spark runs in ``name``."""
    sc.setJobGroup("simdex dedup", f"simdex dedup: {name}")
    sc.setLocalProperty("callSite.short", f"simdex: {name}")
    sc.setLocalProperty("callSite.long", f"simdex.spark step: {name}")
    try:
        yield
    finally:
        sc.setLocalProperty("callSite.short", None)
        sc.setLocalProperty("callSite.long", None)


def _fail_first_attempt(where: str) -> None:
    """Test hook: the local property ``simdex.test.fail_first_attempt`` naming this step (a
    comma-separated list) makes each of its tasks fail on its first attempt (Spark then runs it
    again)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is not None and where in (ctx.getLocalProperty("simdex.test.fail_first_attempt") or "").split(",") and ctx.attemptNumber() == 0:
        raise RuntimeError(f"simdex test hook: first attempt of a {where} task fails")


def _batches(rows, n: int = BATCH) -> Iterator[list]:
    batch = []
    for r in rows:
        batch.append(r)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def learn_idf(spark, reps, documents: int, recipe: CorpusRecipe) -> CorpusRecipe:
    """The IDF table of the corpus: every representative's distinct features counted once per
    copy of it (``size``), summed per feature on the executors; the driver streams the counts
    (one row per distinct feature, never the documents) into the table."""
    from pyspark.sql import functions as F

    bc = spark.sparkContext.broadcast(recipe)

    def features(rows):
        r = bc.value
        for batch in _batches(rows):
            for (_, size), fs in zip(batch, r.distinct_features([t for t, _ in batch])):
                a = array.array("q")
                a.frombytes(fs)
                if sys.byteorder != "little":
                    a.byteswap()
                for f in a:
                    yield (f, size)

    counts = spark.createDataFrame(reps.select("text", "size").rdd.mapPartitions(features), "feature long, n long")
    df = counts.groupBy("feature").agg(F.sum("n").alias("df"))
    fs, ns = array.array("q"), array.array("q")
    for row in df.toLocalIterator():
        fs.append(row[0])
        ns.append(row[1])
    if sys.byteorder != "little":
        fs.byteswap()
        ns.byteswap()
    return recipe.with_document_frequencies(documents, fs.tobytes(), ns.tobytes())


def fingerprint(spark, reps, recipe: CorpusRecipe, sketches: bool):
    """``(ord, fp, short, error, sketch)`` of every representative with a text."""
    bc = spark.sparkContext.broadcast(recipe)

    def run(rows):
        _fail_first_attempt("fingerprint")
        r = bc.value
        for batch in _batches(rows):
            for (ord_, _), (fp, short, error, sk) in zip(batch, r.fingerprint_texts([t for _, t in batch], sketches)):
                yield (ord_, None if fp is None else signed(fp), short, error, sk)

    rdd = reps.select("ord", "text").rdd.mapPartitions(run)
    return spark.createDataFrame(rdd, "ord long, fp long, short boolean, error string, sketch binary")


def sql_keys(plan: TablePlan, fp="fp") -> list:
    """Per table, its key of the ``long`` column ``fp`` as a Spark SQL expression (what
    ``plan.keys`` computes, as a signed long): the OR of the table's ``plan.key_terms``, each
    ``((fp >>> shift_right) & mask) << shift_left``, so keying runs in the JVM."""
    from pyspark.sql import functions as F

    col = F.col(fp) if isinstance(fp, str) else fp
    keys = []
    for terms in plan.key_terms:
        key = F.lit(0).cast("long")
        for right, mask, left in terms:
            bits = col if right == 0 else F.shiftrightunsigned(col, right)
            if mask != (1 << 64) - 1:
                bits = bits.bitwiseAND(F.lit(signed(mask)))
            key = key.bitwiseOR(bits if left == 0 else F.shiftleft(bits, left))
        keys.append(key)
    return keys


def keyed_rows(plan: TablePlan, fps, fp: str = "fp"):
    """``(t, key, fp)``: every row of ``fps`` once per table of ``plan``, keyed (in the JVM)."""
    from pyspark.sql import functions as F

    rows = [F.struct(F.lit(t).alias("t"), key.alias("key"), F.col(fp).alias("fp")) for t, key in enumerate(sql_keys(plan, fp))]
    # all three columns out of the generator (no projection after it). Meant to let the
    # self-join's two sides share one exchange; Spark 3.5 does not (at 2^26 two stages each
    # wrote the same 11.3 GB shuffle): making it share is still open.
    return fps.select(F.inline(F.array(*rows)))


def candidate_pairs(spark, fps, k: int, design_k: Optional[int], candidates_log2: float = JOIN_CANDIDATES_LOG2):
    """Every pair ``(fa, fb)`` of distinct fingerprints within ``k`` (``fa < fb`` unsigned): the
    paper's permuted tables as shuffles. Each fingerprint is keyed in every table by its
    permuted leading bits (the library's planned design, ``TablePlan``, its keys as Spark SQL
    bit operations: ``sql_keys``); the probes of a fingerprint (its key with each flip of the
    table's multi-probe plan, only ``[0]`` when the design answers ``k`` itself) are joined
    with the keys, so a pair meets in every table whose leading bits it shares; then the
    distance is checked and duplicates dropped. ``candidates_log2`` bounds the fingerprints a
    key is expected to share (``JOIN_CANDIDATES_LOG2``)."""
    from pyspark.sql import functions as F

    n = fps.count()
    plan = TablePlan(max(n, 1), k, design_k, candidates_log2)
    tables = plan.tables
    keyed = keyed_rows(plan, fps)
    within = F.bit_count(F.col("q.fp").bitwiseXOR(F.col("s.fp"))) <= k
    if all(flips == [0] for _, _, flips in tables):
        q = keyed.alias("q")
        cond = (F.col("q.fp").bitwiseXOR(F.lit(SIGN)) < F.col("s.fp").bitwiseXOR(F.lit(SIGN))) & within
    else:
        rows = [(t, signed(f)) for t, (_, _, flips) in enumerate(tables) for f in flips]
        flips = spark.createDataFrame(rows, "t int, flip long")
        q = keyed.join(F.broadcast(flips), "t").select("t", F.col("key").bitwiseXOR(F.col("flip")).alias("key"), "fp").alias("q")
        cond = (F.col("q.fp") != F.col("s.fp")) & within
    # a shuffled hash join: never a broadcast (a cached input's small estimate would ship
    # tables x N rows through the driver; 2^20 fingerprints: 24 s), no sort (sort-merge: 65 s,
    # this: 15 s)
    s = keyed.alias("s").hint("shuffle_hash")
    pairs = q.join(s, (F.col("q.t") == F.col("s.t")) & (F.col("q.key") == F.col("s.key")) & cond)
    lo = F.when(F.col("q.fp").bitwiseXOR(F.lit(SIGN)) < F.col("s.fp").bitwiseXOR(F.lit(SIGN)), F.col("q.fp")).otherwise(F.col("s.fp"))
    hi = F.when(F.col("q.fp").bitwiseXOR(F.lit(SIGN)) < F.col("s.fp").bitwiseXOR(F.lit(SIGN)), F.col("s.fp")).otherwise(F.col("q.fp"))
    return pairs.select(lo.alias("fa"), hi.alias("fb")).distinct(), plan


def similarity_text(x: Optional[float]) -> str:
    """The similarity column of ``simdex dedup --pairs`` (Rust's ``{:.4}`` rounds as Python's)."""
    return "-" if x is None or math.isnan(x) else "%.4f" % x


def confirm(spark, links, sketches, threshold: Optional[float]):
    """Links ``(a, b, distance)`` with their sketches' estimated resemblance and its text, kept
    when it reaches ``threshold`` (all, with similarity ``-``, when ``threshold`` is None)."""
    from pyspark.sql import functions as F

    if threshold is None:
        return links.select("a", "b", "distance", F.lit(None).cast("double").alias("similarity"), F.lit("-").alias("similarity_text"))
    s = sketches.select("ord", "sketch")
    joined = links.join(s.withColumnRenamed("ord", "a").withColumnRenamed("sketch", "sa"), "a").join(s.withColumnRenamed("ord", "b").withColumnRenamed("sketch", "sb"), "b")

    def run(rows):
        _fail_first_attempt("confirm")
        for a, b, d, sa, sb in rows:
            x = sketch_similarity(bytes(sa), bytes(sb)) if sa is not None and sb is not None else float("nan")
            if not math.isnan(x) and x >= threshold:
                yield (a, b, d, x, similarity_text(x))

    rdd = joined.select("a", "b", "distance", "sa", "sb").rdd.mapPartitions(run)
    return spark.createDataFrame(rdd, "a long, b long, distance int, similarity double, similarity_text string")
