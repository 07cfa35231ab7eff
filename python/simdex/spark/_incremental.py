"""Incremental dedup: a new corpus against an existing index directory.

The index's live entries are read by the executors through the library (``IndexReader``,
one fingerprint range per task, so the index directory must be readable at the same path on
every executor), keyed into the index's own table design (its ``k``, usually 3) and joined
with the new documents' fingerprints probed for ``k`` (8 by default: multi-probe above the
design's k). Candidates are confirmed by the sketch stored with the entry (entries stored
without one match within 3 bits by fingerprint alone, as ``simdex dedup --index``).

Writing back is the driver's: an index has one writer, so the new documents' (fingerprint,
document id, sketch) rows are streamed to the driver in batches (``toLocalIterator``) and
inserted into the index (``insert_into_index``: new log records, flushed into segments as the index
does). Document ids are ``simdex.doc_id(id)``, as ``simdex dedup --index`` stores them.
"""

from __future__ import annotations

import array
import sys

from .._simdex import IndexReader, insert_into_index, doc_id, sketch_similarity
from . import _pipeline as P

_READERS: dict = {}
UNSKETCHED_K = 3
ADD_BATCH = 100_000


def _reader(path: str) -> IndexReader:
    """One reader per executor process and index."""
    r = _READERS.get(path)
    if r is None:
        r = _READERS[path] = IndexReader(path)
    return r


def stored_entries(spark, path: str, bits: int = 4):
    """``(sfp, sid)`` of every live entry of the index, read by ``2^bits`` tasks."""
    from pyspark.sql import functions as F

    def read(parts):
        for part in parts:
            fps, ids = array.array("Q"), array.array("Q")
            f, i = _reader(path).entries(part, bits)
            fps.frombytes(f)
            ids.frombytes(i)
            if sys.byteorder != "little":
                fps.byteswap()
                ids.byteswap()
            for fp, id_ in zip(fps, ids):
                yield (P.signed(fp), P.signed(id_))

    rdd = spark.sparkContext.parallelize(range(1 << bits), 1 << bits).mapPartitions(read)
    return spark.createDataFrame(rdd, "sfp long, sid long").select(F.col("sfp"), F.col("sid"))


def index_matches(spark, result, path: str, k: int, confirm: bool, threshold: float):
    """Every new document's matches in the index: ``id, index_doc_id, fingerprint, distance,
    similarity`` (``fingerprint`` the stored one, 16 hex digits; ``similarity`` ``-`` when
    not confirmed by sketch), with ``ord`` for ordering."""
    from pyspark.sql import functions as F

    reader = IndexReader(path)
    confirm = confirm and reader.sketches
    if not confirm:
        k = min(k, UNSKETCHED_K)
    stored = stored_entries(spark, path)
    new = result.new_documents  # ord, id, fp, sketch: every new document with a fingerprint
    fps = new.select("fp").distinct()
    with P.step(spark.sparkContext, "index: candidate pairs (the index's tables, multi-probed)"):
        plan_count = max(stored.count(), 1)
        from .._simdex import TablePlan

        plan = TablePlan(plan_count, k, min(reader.k, k))
        bc = spark.sparkContext.broadcast(plan)
        tables = plan.tables

        def keys(rows):
            p = bc.value
            for batch in P._batches(rows, 4096):
                a = array.array("Q", (P.unsigned(r[0]) for r in batch))
                out = array.array("Q")
                out.frombytes(p.keys(a.tobytes()))
                m = len(batch)
                for t in range(len(out) // m):
                    for i in range(m):
                        yield (t, P.signed(out[t * m + i]), batch[i][0])

        s_keys = spark.createDataFrame(stored.select("sfp").distinct().rdd.mapPartitions(keys), "t int, key long, sfp long")
        q_keys = spark.createDataFrame(fps.rdd.mapPartitions(keys), "t int, key long, fp long")
        flips = spark.createDataFrame([(t, P.signed(f)) for t, (_, _, fl) in enumerate(tables) for f in fl], "t int, flip long")
        probes = q_keys.join(F.broadcast(flips), "t").select("t", F.col("key").bitwiseXOR(F.col("flip")).alias("key"), "fp")
        d = F.bit_count(F.col("fp").bitwiseXOR(F.col("sfp")))
        cand = probes.join(s_keys, ["t", "key"]).where(d <= k).select("fp", "sfp").distinct()
        cand = cand.join(stored, "sfp").join(new, "fp").select("ord", "id", "fp", "sketch", "sfp", "sid", d.cast("int").alias("distance"))

    def check(rows):
        r = _reader(path)
        for ord_, id_, fp, sk, sfp, sid, dist in rows:
            if not confirm:
                yield (ord_, id_, sfp, sid, dist, None, "-")
                continue
            stored_sketch = r.sketch(P.unsigned(sfp), P.unsigned(sid))
            if stored_sketch is None or sk is None:
                if dist <= UNSKETCHED_K:
                    yield (ord_, id_, sfp, sid, dist, None, "-")
                continue
            x = sketch_similarity(bytes(sk), stored_sketch)
            if x >= threshold:
                yield (ord_, id_, sfp, sid, dist, x, P.similarity_text(x))

    with P.step(spark.sparkContext, "index: confirm by stored sketch"):
        rdd = cand.rdd.mapPartitions(check)
        return spark.createDataFrame(rdd, "ord long, id string, sfp long, sid long, distance int, similarity double, similarity_text string")


def insert_new_documents(result, path: str) -> int:
    """Adds every new document with a fingerprint to the index (see the module docs)."""
    fps, ids, sketches, n = array.array("Q"), array.array("Q"), bytearray(), 0

    def flush() -> int:
        if not fps:
            return 0
        if sys.byteorder != "little":
            fps.byteswap()
            ids.byteswap()
        whole = len(sketches) == 64 * len(fps)  # else some have none: store them all without
        inserted = insert_into_index(path, result.recipe, fps.tobytes(), ids.tobytes(), bytes(sketches) if whole else b"")
        del fps[:], ids[:], sketches[:]
        return inserted

    for row in result.new_documents.select("fp", "id", "sketch").toLocalIterator():
        fps.append(P.unsigned(row[0]))
        ids.append(doc_id(row[1]))
        if row[2] is not None:
            sketches.extend(row[2])
        if len(fps) >= ADD_BATCH:
            n += flush()
    return n + flush()
