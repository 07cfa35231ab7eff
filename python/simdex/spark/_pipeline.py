"""The steps of ``simdex dedup`` as Spark jobs (see the package docs for the whole story).

Every step is a pure function of its input rows (no randomness, no clock), so a task that
Spark runs again gives the same rows, and the outputs are written by the executors through
Spark's output committer: a retried task leaves no trace.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Iterator, Optional

from .._simdex import CorpusRecipe, feature_counts, fingerprint_column, similarity_column

BATCH = 512  # documents per library call in the executors
SIGN = -(1 << 63)  # XOR with it orders signed longs as unsigned fingerprints



def signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def unsigned(x: int) -> int:
    return x + (1 << 64) if x < 0 else x


# (step, seconds) of every step run in this process, in order (the commands print them)
STEP_SECONDS: list = []


@contextlib.contextmanager
def step(sc, name: str):
    """Names the jobs (and their stages, through the call site) Spark runs in ``name``, and
    times it (``STEP_SECONDS``)."""
    sc.setJobGroup("simdex dedup", f"simdex dedup: {name}")
    sc.setLocalProperty("callSite.short", f"simdex: {name}")
    sc.setLocalProperty("callSite.long", f"simdex.spark step: {name}")
    started = time.monotonic()
    try:
        yield
    finally:
        STEP_SECONDS.append((name, time.monotonic() - started))
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


def arrow_buffers(col) -> tuple:
    """``(data, offsets)`` of an Arrow string or binary column without nulls, the offsets
    from 0 (i32s): what the library's column calls read."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, col.buffers()[1]], offset=col.offset) if n else pa.array([0], pa.int32())
    base, end = offsets[0].as_py(), offsets[n].as_py()
    data = col.buffers()[2].slice(base, end - base).to_pybytes() if n and end > base else b""
    rebased = pc.subtract(offsets, pa.scalar(base, pa.int32())) if base else offsets
    return data, rebased.buffers()[1].slice(rebased.offset * 4, (n + 1) * 4).to_pybytes()


def _u64s(col) -> bytes:
    """The little-endian bytes of an int64 Arrow column without nulls."""
    if len(col) == 0:
        return b""
    return col.buffers()[1].slice(col.offset * 8, len(col) * 8).to_pybytes()


def learn_idf(spark, reps, documents: int, recipe: CorpusRecipe) -> CorpusRecipe:
    """The IDF table of the corpus: every representative's distinct features counted once per
    copy of it (``size``), summed per batch by the library (``feature_counts``, over the
    Arrow batch's buffers) and per feature by Spark; the driver takes the counts (one row per
    distinct feature, never the documents) as Arrow and builds the table."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    bc = spark.sparkContext.broadcast(recipe)

    def run(batches):
        r = bc.value
        for b in batches:
            data, offsets = arrow_buffers(b.column(0))
            features, counts = feature_counts(r, data, offsets, _u64s(b.column(1)))
            yield pa.RecordBatch.from_arrays([_int64(features), _int64(counts)], names=["feature", "n"])

    counts = reps.select("text", "size").mapInArrow(run, "feature long, n long")
    table = pa.Table.from_batches(counts.groupBy("feature").agg(F.sum("n").alias("df"))._collect_as_arrow(), schema=pa.schema([("feature", pa.int64()), ("df", pa.int64())]))
    fs, ns = (_u64s(table.column(c).combine_chunks()) if table.num_rows else b"" for c in ("feature", "df"))
    return recipe.with_document_frequencies(documents, fs, ns)


def _int64(buf):
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int64(), len(buf) // 8, [None, pa.py_buffer(buf)])


def fingerprint(spark, reps, recipe: CorpusRecipe, sketches: bool):
    """``(ord, fp, short, error, sketch)`` of every representative with a text, made by the
    library over each Arrow batch's text buffer (``fingerprint_column``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bc = spark.sparkContext.broadcast(recipe)

    def run(batches):
        _fail_first_attempt("fingerprint")
        r = bc.value
        for b in batches:
            n = b.num_rows
            data, offsets = arrow_buffers(b.column(1))
            fps, has, short, errors, sk_data, sk_offsets = fingerprint_column(r, data, offsets, sketches)
            flag = lambda buf: pc.not_equal(pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(buf)]), 0)  # noqa: E731
            fp = pc.if_else(flag(has), _int64(fps), pa.scalar(None, pa.int64()))
            error = [None] * n
            for i, e in errors:
                error[i] = e
            sketch = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(sk_offsets), pa.py_buffer(sk_data)]) if sketches else pa.nulls(n, pa.binary())
            yield pa.RecordBatch.from_arrays([b.column(0), fp, flag(short), pa.array(error, pa.string()), sketch], names=["ord", "fp", "short", "error", "sketch"])

    return reps.select("ord", "text").mapInArrow(run, "ord long, fp long, short boolean, error string, sketch binary")


def similarity_text(x: Optional[float]) -> str:
    """The similarity column of ``simdex dedup --pairs`` (Rust's ``{:.4}`` rounds as Python's)."""
    return "-" if x is None or math.isnan(x) else "%.4f" % x


def confirm(spark, links, sketches, threshold: Optional[float]):
    """Links ``(a, b, distance)`` with their sketches' estimated resemblance and its text, kept
    when it reaches ``threshold`` (all, with similarity ``-``, when ``threshold`` is None):
    the library compares each Arrow batch's two sketch columns (``similarity_column``)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    if threshold is None:
        return links.select("a", "b", "distance", F.lit(None).cast("double").alias("similarity"), F.lit("-").alias("similarity_text"))
    s = sketches.select("ord", "sketch")
    joined = links.join(s.withColumnRenamed("ord", "a").withColumnRenamed("sketch", "sa"), "a").join(s.withColumnRenamed("ord", "b").withColumnRenamed("sketch", "sb"), "b")

    def run(batches):
        _fail_first_attempt("confirm")
        for b in batches:
            n = b.num_rows
            sa, sb = (arrow_buffers(pc.fill_null(b.column(i), b"")) for i in (3, 4))
            values, text, offsets = similarity_column(*sa, *sb)
            x = pa.Array.from_buffers(pa.float64(), n, [None, pa.py_buffer(values)])
            keep = pc.and_(pc.invert(pc.is_nan(x)), pc.greater_equal(x, threshold))
            text = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(text)])
            out = pa.RecordBatch.from_arrays([b.column(0), b.column(1), b.column(2), x, text], names=["a", "b", "distance", "similarity", "similarity_text"])
            yield out.filter(keep)

    return joined.select("a", "b", "distance", "sa", "sb").mapInArrow(run, "a long, b long, distance int, similarity double, similarity_text string")
