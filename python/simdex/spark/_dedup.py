"""``dedup``: documents in; near-duplicate pairs, clusters, kept and skipped documents out, in
a handful of Spark jobs (see the package docs for the steps).

1. **learn IDF** (one job, unless a recipe is given): every task reads its documents and the
   library counts their distinct features, in one bucket per part of the table (ranges of
   feature hashes); after one shuffle of a few binary rows per task, each reduce task sums
   one part as its rows stream in and writes the part file with the library's weights in the
   run's work folder; the driver gets the parts' summaries, and every process maps the part
   files (the table never passes through the driver, nor is it held whole by one process).
2. **fingerprint, scatter, join, confirm** (one job): every task reads its documents again;
   the library fingerprints and sketches each text and packs each document (ord, content
   hash, fingerprint, sketch, id) into its block-split partitions (``scatter_documents``);
   after the one shuffle, each partition forms the exact groups and joins and confirms its
   representatives (``join_documents``); the driver collects the links and members (small:
   the documents in clusters), and the library writes the pairs and clusters files from them
   (``finish_dedup``). Skipped records are written by the map tasks as they find them; the
   report's counts come back as rows of the same job.
   Every candidate (within k, or sharing a sketch band: a band group after the join's) gets
   the library's verdict (``CorpusRule``); pairs within the sketch's noise of the threshold
   are left undecided.
3. **second look** (one job, only when a pair is undecided): every task reads its documents
   again and the library gives the shingle sets of the undecided pairs' documents; the
   driver's library call settles those pairs by exact Jaccard (``finish_dedup``), as
   ``simdex dedup`` does.
4. **kept** (one job, with ``kept``): every task reads its documents once more and the library
   writes those the deduplicated corpus keeps.

Each task writes its part of an output into ``OUT.parts/`` under a name of its own (a task
that runs again writes the same bytes); the driver joins the parts in task order, which is
corpus order.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import List, Optional, Tuple

from .._simdex import CorpusRecipe, CorpusRule, FeatureSum, corpus_options, feature_counts, finish_dedup, join_documents, scatter_documents, shingle_sets, undecided_documents, write_kept, write_tsv
from . import _pipeline as P
from ._cluster import JOIN_CANDIDATES_LOG2, ROWS_PER_JOIN, _blob_bytes, _pids, _plan, _reducers
from ._output import concatenate

# a map task's rows: packed documents for partition ``pid``, or (``fps`` null) its counts
SCATTERED = "pid long, fps binary, documents long, bad long, skipped long, fingerprinted long, shown string"
JOINED = "la binary, lb binary, ld binary, ls binary, lu binary, mo binary, mr binary, mf binary, ids binary, id_offsets binary, documents long, bad long, skipped long, fingerprinted long, shown string"
SHOWN = 5  # skipped records named in the summary
SETS = "o binary, l binary, s binary"
BANDS = 16  # copies of a representative in the band group (one a band; for the plan only)
# scattered document records a join partition holds at most, and about what a join task
# holds (a record is about 120 bytes with the pages preset's 512-bit sketch: 256 MiB), so
# that a join worker's memory does not follow the corpus (the band group, 16 records a
# document, was one partition below 2^20 documents: 2 GB of records in one Python worker)
RECORDS_PER_JOIN = 1 << 21


def _schema(ddl: str):
    import pyarrow as pa

    kinds = {"long": pa.int64(), "binary": pa.binary(), "string": pa.string()}
    return pa.schema([(name, kinds[kind]) for name, kind in (f.split() for f in ddl.split(", "))])



@dataclass
class Dedup:
    """What ``dedup`` found and wrote: the counts of the report (``beyond_k``: links found
    because their sketches share a band; ``second_look``: the pairs decided by exact Jaccard and
    how many changed side, None when none was within the noise), the recipe, ``k`` and the
    threshold (None when not confirmed). A table learned by the run is in part files that
    leave with the run's work folder: the driver's ``recipe`` keeps reading them (mapped;
    ``recipe.save_idf(PATH)`` writes the table file), but does not ship to another job."""

    documents: int
    bad: int
    skipped: int
    fingerprinted: int
    representatives: int
    exact_groups: int
    redundant: int
    links: int
    beyond_k: int
    second_look: Optional[Tuple[int, int]]
    clusters: int
    clustered: int
    pairs: int
    kept: Optional[int]
    skipped_shown: List[str]
    recipe: CorpusRecipe
    k: int
    threshold: Optional[float]


class Parts:
    """An output written by tasks as part files (``PATH.parts/part-TASK``), joined in task
    order into ``PATH`` by ``join``. A task writes ``tmp(task)`` and ``done(task)`` renames it."""

    def __init__(self, path: str):
        self.path, self.dir = path, path + ".parts"
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)

    def tmp(self, task: int) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        attempt = f"{ctx.stageId()}.{ctx.attemptNumber()}" if ctx else "0"
        return os.path.join(self.dir, f".part-{task:08d}.{attempt}")

    def done(self, tmp: str, task: int) -> None:
        os.replace(tmp, os.path.join(self.dir, f"part-{task:08d}"))

    def join(self, prefix: bytes = b"") -> int:
        lines = concatenate(self.dir, self.path, prefix)
        shutil.rmtree(self.dir, ignore_errors=True)
        return lines


def _flags(mask) -> bytes:
    """A u8 (0 or 1) per value of a boolean Arrow array."""
    import pyarrow as pa

    a = mask.cast(pa.uint8())
    return a.buffers()[1].to_pybytes()[a.offset : a.offset + len(a)] if len(a) else b""


def _u8(buf: bytes):
    import pyarrow as pa

    return pa.Array.from_buffers(pa.uint8(), len(buf), [None, pa.py_buffer(buf)])


COUNTS = "pid long, part long, features binary, counts binary, documents long"
SUMMED = "part long, entries long, crc long, documents long"


def learn_idf(spark, corpus, recipe: CorpusRecipe, work: str):
    """The IDF table of the corpus (step 1, one job), in parts that no process holds whole:
    each map task's library call counts the distinct features of its documents, split into
    the table's parts (ranges of feature hashes, as many as the map tasks: a part holds no
    more features than a task counts); Spark brings each part's counts of every task to one
    reduce task (a few binary rows per task and part, with the batch's document count), which
    sums them as they stream in and writes the part file with the library's weights under
    ``work`` (a folder every executor reads, as an index's). The driver gets each part's
    summary (entries, checksum) and the document count, and the recipe maps the part files
    wherever it runs. Returns the recipe with the table and the number of documents with a
    text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bc = spark.sparkContext.broadcast(recipe)
    parts = max(spark.sparkContext.defaultParallelism, corpus.task_count())
    pids = _reducers(parts)
    folder = os.path.join(os.path.abspath(work), "idf")
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, f"part-{p:05d}") for p in range(parts)]
    _COUNTS, _SUMMED = _schema(COUNTS), _schema(SUMMED)

    def count(task, batches):
        r = bc.value
        for b in batches:
            texts = b.column(3).filter(pc.is_valid(b.column(3)))
            n = len(texts)
            data, offsets = P.arrow_buffers(texts)
            answers = feature_counts(r, data, offsets, (1).to_bytes(8, "little") * n, parts)
            # every part's row carries the batch's documents: each part's sum knows the corpus's
            yield pa.RecordBatch.from_arrays(
                [pa.array(pids, pa.int64()), pa.array(range(parts), pa.int64()), pa.array([f for f, _ in answers], pa.binary()), pa.array([c for _, c in answers], pa.binary()), pa.array([n] * parts, pa.int64())],
                schema=_COUNTS,
            )

    def total(batches):
        sums, documents = {}, {}
        for b in batches:
            for i, part in enumerate(b.column(1).to_pylist()):
                sums.setdefault(part, FeatureSum()).add(b.column(2)[i].as_py(), b.column(3)[i].as_py())
                documents[part] = documents.get(part, 0) + b.column(4)[i].as_py()
        for part in sorted(sums):
            entries, crc = sums.pop(part).write(paths[part], part, parts, documents[part])
            yield pa.RecordBatch.from_arrays([pa.array([x], pa.int64()) for x in (part, entries, crc, documents[part])], schema=_SUMMED)

    from pyspark.sql import functions as F

    rows = corpus.map(count, COUNTS).repartition(parts, F.col("pid")).mapInArrow(total, SUMMED).collect()
    found = {r["part"]: r for r in rows}
    documents = {r["documents"] for r in rows} or {0}
    if len(documents) != 1:
        raise RuntimeError(f"the IDF table's parts counted different numbers of documents: {sorted(documents)}")
    documents = documents.pop()
    summaries = []
    for p in range(parts):
        if p in found:
            summaries.append((found[p]["entries"], found[p]["crc"]))
        else:
            # (no map task had a batch: an empty corpus)
            summaries.append(FeatureSum().write(paths[p], p, parts, documents))
    return recipe.with_idf_parts(documents, paths, summaries), documents


def _skipped_rows(b, good, status, reasons):
    """``(ord, id, reason)`` of a batch's skipped records: those that are not documents, then
    documents without a text or a fingerprint, in corpus order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bad = b.filter(pc.invert(good))
    g = b.filter(good)
    no_fp = pc.not_equal(status, 0)
    reason = pc.if_else(pc.equal(status, 1), reasons, g.column(4))
    rows = pa.table({"ord": pa.concat_arrays([bad.column(0), g.column(0).filter(no_fp)]), "id": pa.concat_arrays([bad.column(1), g.column(1).filter(no_fp)]), "reason": pa.concat_arrays([bad.column(4), reason.filter(no_fp)])})
    return rows.sort_by("ord")


def _pairs(spark, corpus, recipe: CorpusRecipe, rule: CorpusRule, estimate: int, skipped_parts: Optional[Parts], index=None):
    """Step 2's one job (see the module docs): the driver's table of every partition's links
    and members (one row each) and every map batch's counts (rows with ``la`` null)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = max(estimate, 1)
    split, parts, _, _ = _plan(spark, n, rule.k, JOIN_CANDIDATES_LOG2, ROWS_PER_JOIN, [BANDS] if rule.band_candidates else [])
    # a document's records: one in each group of the split, one a band in the band group;
    # no partition holds more than RECORDS_PER_JOIN of them
    records = [1] * split.groups + ([BANDS] if rule.band_candidates else [])
    parts = [max(p, math.ceil(n * c / RECORDS_PER_JOIN)) for p, c in zip(parts, records)]
    # a reduce task joins several partitions one after the other when they are small (each
    # task is a Python worker's round trip), as many as the cores, the rows (the join's work)
    # or the records (its memory) ask for
    copies = sum(len(split.tables_of(g)) for g in range(split.groups)) + (BANDS if rule.band_candidates else 0)
    tasks = min(sum(parts), max(spark.sparkContext.defaultParallelism, math.ceil(n * copies / ROWS_PER_JOIN), math.ceil(n * sum(records) / RECORDS_PER_JOIN)))
    pids, group_of = _pids(parts, tasks)
    bc = spark.sparkContext.broadcast(recipe)
    _SCATTERED, _JOINED = _schema(SCATTERED), _schema(JOINED)

    def scatter(task, batches):
        P._fail_first_attempt("fingerprint")
        r = bc.value
        tmp = skipped_parts.tmp(task) if skipped_parts else None
        check = index.task(task) if index is not None else None
        for b in batches:
            good = pc.is_valid(b.column(2))
            g = b.filter(good)
            has_text = pc.is_valid(g.column(3))
            ids = P.arrow_buffers(pc.fill_null(g.column(1), ""))
            texts = P.arrow_buffers(pc.fill_null(g.column(3), ""))
            partitions, data, offsets, status, r_data, r_offsets, fps, sks = scatter_documents(
                r, split, parts, P._u64s(g.column(0)), *ids, *P.arrow_buffers(g.column(2)), *texts, _flags(has_text), rule, check is not None
            )
            status = _u8(status)
            if check is not None:
                check.check(fps, sks, *P.arrow_buffers(pc.fill_null(g.column(1), "").filter(pc.equal(status, 0))))
            reasons = pa.Array.from_buffers(pa.string(), len(g), [None, pa.py_buffer(r_offsets), pa.py_buffer(r_data)])
            skipped = _skipped_rows(b, good, status, reasons)
            if tmp and skipped.num_rows:
                write_tsv(tmp, [P.arrow_buffers(pc.fill_null(skipped.column(c).combine_chunks(), "")) for c in ("id", "reason")], True)
            shown = "\n".join(f"{i}: {x}" for i, x in zip(skipped.column("id").slice(0, SHOWN).to_pylist(), skipped.column("reason").slice(0, SHOWN).to_pylist()))
            fps = pa.Array.from_buffers(pa.binary(), len(partitions), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
            m = len(partitions)
            yield pa.RecordBatch.from_arrays([pa.array([pids[p] for p in partitions], pa.int64()), fps, *(pa.nulls(m, pa.int64()) for _ in range(4)), pa.nulls(m, pa.string())], schema=_SCATTERED)
            fingerprinted = pc.sum(pc.equal(status, 0).cast(pa.int64())).as_py() or 0
            counts = [len(g), b.num_rows - len(g), skipped.num_rows, fingerprinted]
            yield pa.RecordBatch.from_arrays([pa.array([pids[0]], pa.int64()), pa.nulls(1, pa.binary()), *(pa.array([c], pa.int64()) for c in counts), pa.array([shown or None], pa.string())], schema=_SCATTERED)
        if check is not None:
            check.done()
        if tmp:
            if not os.path.exists(tmp):
                open(tmp, "wb").close()
            skipped_parts.done(tmp, task)

    def join(batches):
        P._fail_first_attempt("confirm")
        blobs = {}
        for b in batches:
            if b.num_rows == 0:
                continue
            has = pc.is_valid(b.column(1))
            counted = b.filter(pc.invert(has))
            if counted.num_rows:
                m = counted.num_rows
                yield pa.RecordBatch.from_arrays([pa.nulls(m, pa.binary()) for _ in range(10)] + [counted.column(i) for i in range(2, 7)], schema=_JOINED)
            scattered = b.filter(has)
            for pid in set(scattered.column(0).to_pylist()):
                blobs.setdefault(pid, []).append(_blob_bytes(scattered.column(1).filter(pc.equal(scattered.column(0), pid))))
        for pid in sorted(blobs):
            found = join_documents(split, group_of[pid], b"".join(blobs.pop(pid)), rule)
            yield pa.RecordBatch.from_arrays([pa.array([x], pa.binary()) for x in found] + [pa.nulls(1, pa.int64()) for _ in range(4)] + [pa.nulls(1, pa.string())], schema=_JOINED)

    from pyspark.sql import functions as F

    scattered = corpus.map(scatter, SCATTERED)
    rows = scattered.repartition(tasks, F.col("pid")).mapInArrow(join, JOINED)
    return pa.Table.from_batches(rows._collect_as_arrow(), schema=_JOINED), split


def _second_look(spark, corpus, recipe: CorpusRecipe, wanted: bytes):
    """The shingle sets of the documents ``wanted`` (the ords of the links left undecided):
    one more pass over the corpus whose tasks give the library the texts; the sets come back
    to the driver, concatenated as ``shingle_sets`` returns them (small: the documents of pairs
    within the sketch's noise of the threshold)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bc = spark.sparkContext.broadcast((recipe, wanted))
    schema = _schema(SETS)

    def run(task, batches):
        r, w = bc.value
        for b in batches:
            g = b.filter(pc.is_valid(b.column(2)))
            found = shingle_sets(r, P._u64s(g.column(0)), *P.arrow_buffers(pc.fill_null(g.column(3), "")), _flags(pc.is_valid(g.column(3))), w)
            if found[0]:
                yield pa.RecordBatch.from_arrays([pa.array([x], pa.binary()) for x in found], schema=schema)

    table = pa.Table.from_batches(corpus.map(run, SETS)._collect_as_arrow(), schema=schema)
    return tuple(_concat(table.column(c)) for c in ("o", "l", "s"))


def _write_kept(spark, corpus, dropped: bytes, path: str) -> int:
    """Step 3: every task writes its kept documents (``write_kept``) into a part file."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    out = Parts(path)
    bc = spark.sparkContext.broadcast(dropped)

    def run(task, batches):
        tmp = out.tmp(task)
        n = 0
        open(tmp, "wb").close()
        for b in batches:
            g = b.filter(pc.is_valid(b.column(2)))
            n += write_kept(tmp, P._u64s(g.column(0)), *P.arrow_buffers(pc.fill_null(g.column(1), "")), *P.arrow_buffers(pc.fill_null(g.column(3), "")), _flags(pc.is_valid(g.column(3))), bc.value)
        out.done(tmp, task)
        yield pa.RecordBatch.from_arrays([pa.array([n], pa.int64())], names=["n"])

    corpus.map(run, "n long").agg(F.sum("n")).collect()
    return out.join()


def _concat(column) -> bytes:
    return b"".join(v for v in column.to_pylist() if v is not None)


def dedup(spark, corpus, k: Optional[int] = None, confirm: bool = True, threshold: Optional[float] = None, preset: str = "pages", recipe: Optional[CorpusRecipe] = None, pairs: Optional[str] = None, clusters: Optional[str] = None, kept: Optional[str] = None, skipped: Optional[str] = None, index=None, band_candidates: Optional[bool] = None, second_look: Optional[bool] = None) -> Dedup:
    """``simdex dedup``'s answer for ``corpus`` (``read_files`` or ``read_dataframe``), written
    to the files given: the library's corpus options decide k and the threshold (one rule and
    message for every front); the IDF table is learned from the corpus unless ``recipe`` is
    given (one already pinned, e.g. an index's). ``band_candidates``, ``second_look``: False
    turns them off (None: the library's default, as ``simdex dedup``). With ``index`` (an ``_incremental.IndexCheck``)
    every document is also checked against an index. Returns the counts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sc = spark.sparkContext
    asked = (k, confirm, threshold)
    k, threshold = corpus_options(k, confirm, threshold)
    outputs = [p for p in (pairs, clusters, kept, skipped) if p]
    work = (outputs[0] + ".work") if outputs else tempfile.mkdtemp(prefix="simdex-dedup-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    adaptive = spark.conf.get("spark.sql.adaptive.enabled", "true")
    # (adaptive execution would submit each shuffle's map stage as a job of its own; this plan
    # is fixed: the join's partitions are the design's)
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        if recipe is None:
            with P.step(sc, "learn IDF (document frequencies)"):
                recipe, estimate = learn_idf(spark, corpus, CorpusRecipe(preset), work)
        else:
            estimate = corpus.estimate()
        skipped_parts = Parts(skipped) if skipped else None
        if index is not None:
            # the index's own sketch recipe (an older index keeps its own), for the corpus's
            # pairs as for the check: what simdex dedup --index sketches with
            recipe = index.sketching(recipe)
            index.prepare(work, *asked, Parts)
        rule = CorpusRule(recipe, *asked, band_candidates, second_look)
        with P.step(sc, "fingerprint, scatter, join and confirm"):
            table, split = _pairs(spark, corpus, recipe, rule, estimate, skipped_parts, index)
        counts = {c: pc.sum(table.column(c)).as_py() or 0 for c in ("documents", "bad", "skipped", "fingerprinted")}
        shown = [line for s in table.column("shown").to_pylist() if s for line in s.split("\n")][:SHOWN]
        found = table.filter(pc.is_valid(table.column("la")))
        cols = [_concat(found.column(c)) for c in ("la", "lb", "ld", "ls", "lu", "mo", "mr", "mf")]
        ids = [pa.Array.from_buffers(pa.binary(), len(o) // 4 - 1, [None, pa.py_buffer(o), pa.py_buffer(d)]) for d, o in zip(found.column("ids").to_pylist(), found.column("id_offsets").to_pylist())]
        ids = pa.concat_arrays(ids) if ids else pa.array([], pa.binary())
        if skipped_parts:
            skipped_parts.join()
        wanted = undecided_documents(cols[0], cols[1], cols[4])
        sets = None
        if wanted:
            with P.step(sc, "second look: shingle sets of the pairs within the noise"):
                sets = _second_look(spark, corpus, recipe, wanted)
        with P.step(sc, "clusters, pairs and clusters files (driver)"):
            f = finish_dedup(*cols, *P.arrow_buffers(ids), rule, sets, pairs, clusters)
        del table, found, cols, ids
        if index is not None:
            with P.step(sc, "index: matches written, new documents inserted (driver)"):
                index.finish(recipe, threshold is not None)
        n_kept = None
        if kept:
            with P.step(sc, "write kept documents"):
                n_kept = _write_kept(spark, corpus, f.dropped, kept)
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
        shutil.rmtree(work, ignore_errors=True)
    return Dedup(
        documents=counts["documents"],
        bad=counts["bad"],
        skipped=counts["skipped"],
        fingerprinted=counts["fingerprinted"],
        representatives=counts["fingerprinted"] - f.redundant_fingerprinted,
        exact_groups=f.exact_groups,
        redundant=f.redundant,
        links=f.links,
        beyond_k=f.beyond_k,
        second_look=(f.second_look_decided, f.second_look_changed) if wanted else None,
        clusters=f.clusters,
        clustered=f.clustered,
        pairs=f.pairs,
        kept=n_kept,
        skipped_shown=shown,
        recipe=recipe,
        k=k,
        threshold=threshold,
    )
