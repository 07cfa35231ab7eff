"""``cluster``: fingerprints in, near-duplicate pairs and clusters out, as ``simdex cluster``
finds them on one machine (``python -m simdex.spark cluster``).

The steps, and what crosses Spark's shuffle (one shuffle in all):

1. **plan**: the library's ``BlockSplit`` for the number of fingerprints (estimated from the
   text files' sizes and their first lines, or Parquet's row count): for ``k = 3`` and
   millions of fingerprints, 10 tables of 5 blocks. Each table belongs to the group of its
   first leading block: 4 groups (``k + 1``), each with its partitions.
2. **read and scatter** (map tasks): text files (``FINGERPRINT_HEX[<TAB>ID]`` a line) are cut
   into byte ranges that the executors parse in Rust (``read_fingerprints``: a line belongs
   to the range holding its first byte; a bad line is counted and named with its file and
   line number); binary files (``simdex insert --binary [--with-ids]``'s records: a
   little-endian u64 fingerprint, then a u64 id with ``--with-ids``) are cut into ranges of
   whole records whose bytes are the fingerprints as they are (with ids, every other word:
   no parsing; a file that ends inside a record is refused before Spark starts, named with
   its byte offset); or Spark reads Parquet's 64-bit ``fp`` column. The library scatters a task's
   fingerprints (``BlockJoin.scatter``): each distinct one to its partition in every group
   (a hash of the group's block), packed 8 bytes a fingerprint into one binary row per
   partition, so the shuffle moves ``k + 1`` copies of each fingerprint as bare 8-byte
   values, without a row each; a fingerprint the task holds more than once goes once, and
   is marked repeated.
3. **join** (reduce tasks, one per partition): the library joins the partition
   (``BlockJoin.join``): the group's tables built one at a time, each prefix group checked by
   popcount, every pair reported by its first shared table only (no distinct follows).
4. **components**: each join task also writes its pairs, sorted, as a run to the run's work
   folder (``CLUSTERS.work`` or ``PAIRS.work``, a folder every executor and the driver reach;
   a temporary one without either); when the pairs fit ``driver_pairs``, the driver merges
   the runs (the library: a buffer per run), writing ``--pairs`` and feeding its union-find
   one pair at a time, so it holds the components (about 40 bytes a clustered fingerprint),
   never the pairs, and no Spark job collects them; past it, Spark sorts and writes the pairs
   and ``_components`` runs large-star/small-star (locally checkpointed each round).
5. **members** (``--clusters``): every entry of a cluster (a component, or a fingerprint
   stored more than once) is written with its cluster, the smallest fingerprint of the
   component. The input is not read again: each read task of step 2 (text, binary or
   Parquet) also writes its entries (``fp`` and ``id``, binary) as an Arrow file to the run's
   work folder (``CLUSTERS.work``, beside ``--clusters``: a folder every executor and the
   driver reach, as ``dedup``'s), and this step reads those; by the driver itself, with no
   Spark job, when the clusters were found there and fit ``driver_pairs``.

With ``--against DIR`` (``index_rows``) the batch is also checked against an index through
the library's batch mode, all of a task's fingerprints in one call (one task per 2^24): a
new batch against an earlier corpus costs the batch and the stored blocks it lands in.

No step touches a fingerprint in Python: the batches pass from Spark to the library as
Arrow buffers.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import List, Optional, Sequence

from .._simdex import BlockJoin, cluster_members, corpus_options, merge_pair_runs, read_fingerprints, write_members, write_pair_run
from . import _pipeline as P
from ._read import InputError, _ranges, _ranges_of, expand, splits

SPLIT_BYTES = 128 << 20  # a text file's byte range per read task
ROWS_PER_JOIN = 1 << 24  # fingerprint-tables a join task expects (its values times its tables)
DRIVER_PAIRS = 1 << 26  # pairs collected to the driver at most (1 GiB of pairs)
INDEX_TASK_FPS = 1 << 24  # fingerprints an ``--against`` task checks in one call at most (128 MiB)
JOIN_CANDIDATES_LOG2 = 2.0  # the planner's bound on a prefix group, for joins in memory
FORMATS = ("fingerprints", "binary", "binary-ids", "parquet")
# bytes of a binary input's record (``binary-ids``: a u64 fingerprint and a u64 id, as
# ``simdex insert --binary --with-ids`` reads them)
RECORD_BYTES = {"binary": 8, "binary-ids": 16}
BAD_SHOWN = 20
# the shuffle's rows: a partition's packed fingerprints (``fps``), or a map task's count of
# entries (``count``, ``bad`` null) or of bad lines (``bad`` the first's message) for partition 0
SCATTERED = "pid long, repeated boolean, fps binary, bad string, count long"
# the join's rows: a pair ``(a, b)``, a repeated fingerprint ``(fp, fp)``, or (``a`` null) the
# counts passed on
JOINED = "a long, b long, bad string, count long"


@dataclass
class Clustered:
    """What ``cluster`` found: counts, the design, and where the components were found."""

    fingerprints: int
    bad_lines: int
    bad_shown: List[str]
    design: str
    groups: int
    partitions: int
    pairs: int
    clustered: int
    on_driver: bool
    # clusters, and the entries (lines) of ``--clusters`` when written: ``simdex cluster``'s
    # "N clusters holding M entries"
    clusters: int = 0
    members: Optional[int] = None
    # the Spark path's rounds and hubs broadcast (``_components.Rounds``; None on the driver)
    components: Optional[object] = None


def _int64(buf):
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int64(), len(buf) // 8, [None, pa.py_buffer(buf)])


def _u64_bytes(col) -> bytes:
    """The little-endian u64s of an int64 Arrow column without nulls (one copy, no rows)."""
    if col.null_count:
        raise ValueError("a fingerprint column holds nulls")
    if len(col) == 0:
        return b""
    return col.buffers()[1].slice(col.offset * 8, len(col) * 8).to_pybytes()


def estimate_count(spark, files: Sequence[str], format: str) -> int:
    """The number of fingerprints, for the plan: Parquet's row count, or the text files'
    bytes over the mean line length of the first 64 KiB (any count gives the same answers;
    a close one gives the fastest design)."""
    if format == "parquet":
        return spark.read.parquet(*files).count()
    total = sum(os.path.getsize(p) for p in files)
    if format in RECORD_BYTES:
        return max(1, total // RECORD_BYTES[format])
    for path in files:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
        lines = head.count(b"\n")
        if lines:
            return max(1, total * lines // len(head))
    return max(1, total // 17)


def spark_hash(value: int) -> int:
    """Spark SQL's ``hash`` of a ``long`` (Murmur3 x86 32-bit, seed 42), as a signed int."""
    m = 0xFFFFFFFF

    def mix_k1(k):
        k = (k * 0xCC9E2D51) & m
        k = ((k << 15) | (k >> 17)) & m
        return (k * 0x1B873593) & m

    def mix_h1(h, k):
        h ^= k
        h = ((h << 13) | (h >> 19)) & m
        return (h * 5 + 0xE6546B64) & m

    v = value & 0xFFFFFFFFFFFFFFFF
    h = mix_h1(mix_h1(42, mix_k1(v & m)), mix_k1(v >> 32))
    h ^= 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & m
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & m
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def _reducers(total: int, tasks: Optional[int] = None) -> List[int]:
    """A ``pid`` per partition ``0..total`` that Spark's hash partitioning into ``tasks``
    (default ``total``; ``pmod(hash(pid), tasks)``, the partitioning of
    ``repartition(tasks, "pid")``) sends to reduce task ``partition % tasks``, so that no two
    partitions share a reduce task when ``tasks`` is ``total``, and they share them evenly
    when fewer (found on the driver, with Spark's hash function: no job)."""
    tasks = total if tasks is None else tasks
    waiting: dict = {}
    for r in reversed(range(total)):
        waiting.setdefault(r % tasks, []).append(r)
    out = [0] * total
    i, left = 0, total
    while left:
        slots = waiting.get(spark_hash(i) % tasks)
        if slots:
            out[slots.pop()] = i
            left -= 1
        i += 1
    return out


def _scattered_batches(split: BlockJoin, parts: List[int], pids: List[int], fps: bytes, bad_rows=()):
    """The scattered rows of one map task's fingerprints (``SCATTERED``), its count of
    them and its bad lines (``(message, count)``), the counts for partition 0."""
    import pyarrow as pa

    partitions, reps, data, offsets = split.scatter(fps, parts)
    rows = len(partitions)
    bad_rows = [(None, len(fps) // 8)] + list(bad_rows)
    ids = [pids[i] for i in partitions] + [pids[0]] * len(bad_rows)
    reps = reps + [False] * len(bad_rows)
    last = offsets[-4:] if rows else b"\0\0\0\0"
    blobs = pa.Array.from_buffers(pa.binary(), rows + len(bad_rows), [None, pa.py_buffer(offsets + last * len(bad_rows)), pa.py_buffer(data)])
    bad = [None] * rows + [m for m, _ in bad_rows]
    counts = [None] * rows + [c for _, c in bad_rows]
    cols = [pa.array(ids, pa.int64()), pa.array(reps, pa.bool_()), blobs, pa.array(bad, pa.string()), pa.array(counts, pa.int64())]
    return pa.RecordBatch.from_arrays(cols, names=["pid", "repeated", "fps", "bad", "count"])


def _kept(keep: str, i: int) -> str:
    """The Arrow file of read task ``i``'s entries in the work folder ``keep``."""
    return os.path.join(keep, f"entries-{i:06d}.arrow")


def _keep_entries(keep: str, i: int, fps: bytes, ids) -> None:
    """Writes read task ``i``'s entries (``fp, id``) to ``keep`` as an Arrow file, under a
    temporary name then renamed: a task run again writes the same bytes. ``ids``: an Arrow
    string column, an Arrow string column's ``(data, offsets)``, or None (no ids)."""
    import pyarrow as pa

    n = len(fps) // 8
    if isinstance(ids, tuple):
        data, offsets = ids
        ids = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    table = pa.table({"fp": _int64(fps), "id": pa.nulls(n, pa.string()) if ids is None else ids})
    tmp = f"{_kept(keep, i)}.{os.getpid()}.tmp"
    with pa.OSFile(tmp, "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)
    os.replace(tmp, _kept(keep, i))


def _kept_batches(file: str):
    """The record batches of a read task's kept entries (memory-mapped)."""
    import pyarrow as pa

    if not os.path.exists(file):  # (a Parquet partition without rows may run no task)
        return []
    r = pa.ipc.open_file(pa.memory_map(file))
    return [r.get_batch(j) for j in range(r.num_record_batches)]


def read_binary(path: str, start: int, end: int, record: int, ids: bool):
    """The records of a binary file in ``[start, end)`` (whole records): ``(fps, ids)``, the
    fingerprints as little-endian u64s (the bytes as they are; with ids, every other word) and,
    with ``ids`` and records that carry them, the ids as an Arrow string column (decimal, as
    text input's); nothing is parsed."""
    import pyarrow as pa

    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    if len(data) != end - start:
        raise OSError(f"{path}: {end - start} bytes expected at byte offset {start}, {len(data)} read (the file changed?)")
    if record == 8:
        return data, None
    words = memoryview(data).cast("B").cast("Q")
    fps = words[0::2].tobytes()
    if not ids:
        return fps, None
    return fps, pa.Array.from_buffers(pa.uint64(), len(fps) // 8, [None, pa.py_buffer(words[1::2].tobytes())]).cast(pa.string())


def check_binary(files: Sequence[str], format: str) -> None:
    """Refuses (``InputError``) a binary file that ends inside a record, naming the file and
    the byte offset where its last whole record ends (``simdex insert --binary``'s message)."""
    record = RECORD_BYTES[format]
    what = "u64 fingerprint and u64 id per record" if record == 16 else "u64 per fingerprint"
    for path in files:
        size = os.path.getsize(path)
        if size % record:
            raise InputError(f"{path}: {size} bytes is not a multiple of {record} ({what}): the input is truncated at byte offset {size - size % record}")


def _scatter_text(split: BlockJoin, parts: List[int], pids: List[int], ranges: list, keep: Optional[str] = None, format: str = "fingerprints"):
    """Map tasks over byte ranges of text (or of binary records, ``format``): one scatter per
    range; with ``keep`` (a folder), the range's entries are kept there too
    (``_keep_entries``), for the members."""
    record = RECORD_BYTES.get(format)

    def run(batches):
        for batch in batches:
            for i in batch.column(0).to_pylist():
                path, name, start, end = ranges[i]
                if record:
                    fps, ids = read_binary(path, start, end, record, keep is not None)
                    bad, shown = 0, []
                else:
                    fps, ids, bad, shown = read_fingerprints(path, start, end, keep is not None)
                if keep is not None:
                    _keep_entries(keep, i, fps, ids)
                bad_rows = [(f"{name}:{line}: {reason}", bad if j == 0 else 0) for j, (line, reason) in enumerate(shown)]
                yield _scattered_batches(split, parts, pids, fps, bad_rows)

    return run


def _scatter_arrow(split: BlockJoin, parts: List[int], pids: List[int], keep: Optional[str] = None):
    """Map tasks over Arrow batches of a nullable ``fp`` column (Parquet), and ``id`` (text)
    with ``keep``: one scatter per task; rows without ``fp`` are counted. With ``keep`` (a
    folder), the task's entries are kept there too (``_keep_entries``, named by the task's
    partition), for the members."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def run(batches):
        chunks, ids, missing = [], [], 0
        for batch in batches:
            col = batch.column(0)
            missing += col.null_count
            if col.null_count:
                batch = batch.filter(pc.is_valid(col))
                col = batch.column(0)
            chunks.append(_u64_bytes(col))
            if keep is not None:
                ids.append(batch.column(1))
        fps = b"".join(chunks)
        if keep is not None:
            from pyspark import TaskContext

            _keep_entries(keep, TaskContext.get().partitionId(), fps, pa.concat_arrays(ids) if ids else pa.nulls(0, pa.string()))
        bad_rows = [(f"{missing} rows without fp", missing)] if missing else []
        yield _scattered_batches(split, parts, pids, fps, bad_rows)

    return run


def _blob_bytes(col) -> bytes:
    """The values of a binary Arrow column back to back (one copy, no rows)."""
    if len(col) == 0:
        return b""
    col = col.combine_chunks() if hasattr(col, "combine_chunks") else col
    import pyarrow as pa

    offsets = pa.Array.from_buffers(pa.int32(), len(col) + 1, [None, col.buffers()[1]], offset=col.offset)
    start, end = offsets[0].as_py(), offsets[len(col)].as_py()
    return col.buffers()[2].slice(start, end - start).to_pybytes()


def _join(split: BlockJoin, group_of: dict, work: Optional[str] = None):
    """The join's reduce tasks (``JOINED`` rows); with ``work`` (a folder), each also writes
    its pairs and repeated fingerprints there as a sorted run (``pairs-PID.bin``,
    ``write_pair_run``) for the driver's merge."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def run(batches):
        P._fail_first_attempt("join")
        fps, repeated, bad, counts, group, pid = [], [], [], [], None, None
        for b in batches:
            if b.num_rows == 0:
                continue
            pid = b.column(0)[0].as_py()
            group = group_of[pid]
            counted = pc.is_valid(b.column(4))
            if pc.any(counted).as_py():
                c = b.filter(counted)
                bad += c.column(3).to_pylist()
                counts += c.column(4).to_pylist()
            values = b.filter(pc.invert(counted))
            is_repeated = values.column(1)
            fps.append(_blob_bytes(values.column(2).filter(pc.invert(is_repeated))))
            repeated.append(_blob_bytes(values.column(2).filter(is_repeated)))
        if group is None:
            return
        a, b, rep = split.join(group, b"".join(fps), b"".join(repeated))
        if work is not None:
            write_pair_run(os.path.join(work, f"pairs-{pid:06d}.bin"), a, b, rep)
        nulls = pa.nulls(len(a) // 8, pa.string()), pa.nulls(len(a) // 8, pa.int64())
        out = pa.RecordBatch.from_arrays([_int64(a), _int64(b), *nulls], names=["a", "b", "bad", "count"])
        for at in range(0, out.num_rows, 1 << 20):
            yield out.slice(at, 1 << 20)
        if rep:
            r = _int64(rep)
            yield pa.RecordBatch.from_arrays([r, r, pa.nulls(len(r), pa.string()), pa.nulls(len(r), pa.int64())], names=["a", "b", "bad", "count"])
        if bad:
            m = len(bad)
            yield pa.RecordBatch.from_arrays([pa.nulls(m, pa.int64()), pa.nulls(m, pa.int64()), pa.array(bad, pa.string()), pa.array(counts, pa.int64())], names=["a", "b", "bad", "count"])

    return run


def _split_bytes(spark, files, most: int) -> int:
    """Byte ranges of at most ``most``: two per core when that keeps them over 1 MiB."""
    total = sum(os.path.getsize(p) for p in files)
    return min(most, max(1 << 20, -(-total // (2 * spark.sparkContext.defaultParallelism))))


def _range_bytes(spark, files, most: int, format: str) -> int:
    """``_split_bytes``, in whole records for binary input."""
    step = _split_bytes(spark, files, most)
    record = RECORD_BYTES.get(format)
    return max(record, step - step % record) if record else step


def _plan(spark, n: int, k: int, candidates_log2: float, rows_per_join: int, copies_after: Sequence[int] = ()):
    """The split for ``n`` fingerprints, the partitions of each group, a ``pid`` per
    partition (``_reducers``) and the group of each ``pid``. ``copies_after``: groups after the
    split's (``dedup``'s band group), each receiving that many copies of every row."""
    split = BlockJoin(n, k, candidates_log2)
    parallel = spark.sparkContext.defaultParallelism
    # at least the cores in all (each partition is a task of the join: a Python worker)
    floor = -(-parallel // split.groups)
    parts = [max(floor, math.ceil(n * len(split.tables_of(g)) / rows_per_join)) for g in range(split.groups)]
    parts += [max(floor, math.ceil(n * c / rows_per_join)) for c in copies_after]
    pids, group_of = _pids(parts)
    return split, parts, pids, group_of


def _pids(parts: List[int], tasks: Optional[int] = None):
    """A ``pid`` per partition (``_reducers``, into ``tasks`` reduce tasks) and the group of
    each ``pid``."""
    pids = _reducers(sum(parts), tasks)
    group_of = {}
    at = 0
    for g, count in enumerate(parts):
        for i in range(at, at + count):
            group_of[pids[i]] = g
        at += count
    return pids, group_of


def pair_rows(spark, inputs: Sequence[str], format: str, k: int, split_bytes: int = SPLIT_BYTES, candidates_log2: float = JOIN_CANDIDATES_LOG2, rows_per_join: int = ROWS_PER_JOIN, keep: Optional[str] = None, work: Optional[str] = None):
    """``(a, b, bad, count)`` (``JOINED``): every pair of distinct fingerprints of the input
    within ``k`` once (``a < b`` unsigned), every fingerprint stored more than once as
    ``(fp, fp)``, and with ``a`` null each map task's count of entries (``bad`` null) and its
    bad lines (``bad`` the message, ``count`` the task's count on the first). Returns them
    with the ``BlockJoin``, the partitions per group and, with ``keep`` (a folder), the Arrow
    files where the read tasks keep their entries (``_keep_entries``); with ``work`` (a
    folder), the join tasks write their sorted pair runs there (``_join``)."""
    from pyspark.sql import functions as F

    files = expand(inputs)
    if not files:
        raise InputError(f"no input files in {', '.join(inputs)}")
    if format in RECORD_BYTES:
        check_binary(files, format)
    split, parts, pids, group_of = _plan(spark, estimate_count(spark, files, format), k, candidates_log2, rows_per_join)
    kept: List[str] = []
    if format == "parquet":
        fps = _parquet_fps(spark, files, with_ids=keep is not None)
        if keep:
            kept = [_kept(keep, i) for i in range(fps.rdd.getNumPartitions())]
        scattered = fps.mapInArrow(_scatter_arrow(split, parts, pids, keep), SCATTERED)
    else:
        ranges = splits(files, _range_bytes(spark, files, split_bytes, format))
        kept = [_kept(keep, i) for i in range(len(ranges))] if keep else []
        scattered = _ranges(spark, ranges).mapInArrow(_scatter_text(split, parts, pids, ranges, keep, format), SCATTERED)
    rows = scattered.repartition(sum(parts), F.col("pid")).mapInArrow(_join(split, group_of, work), JOINED)
    return rows, split, parts, kept


def fingerprint_pairs(spark, fps, k: int, n: int, candidates_log2: float = JOIN_CANDIDATES_LOG2, rows_per_join: int = ROWS_PER_JOIN):
    """``(fa, fb)``: every pair of distinct fingerprints of the ``long`` column ``fp`` of
    ``fps`` (about ``n`` rows; nulls and repeats allowed) within ``k``, once, ``fa < fb``
    unsigned: the block-split join of ``cluster``, for any DataFrame."""
    from pyspark.sql import functions as F

    split, parts, pids, group_of = _plan(spark, max(n, 1), k, candidates_log2, rows_per_join)
    scattered = fps.select("fp").mapInArrow(_scatter_arrow(split, parts, pids), SCATTERED)
    rows = scattered.repartition(sum(parts), F.col("pid")).mapInArrow(_join(split, group_of), JOINED)
    return rows.where("a is not null and a != b").select(F.col("a").alias("fa"), F.col("b").alias("fb"))


def index_rows(spark, inputs: Sequence[str], format: str, k: int, index: str, split_bytes: int = SPLIT_BYTES, task_fps: Optional[int] = None, work: Optional[str] = None):
    """``JOINED`` rows of the input's fingerprints against the index at ``index``: every pair
    of an input fingerprint and a live stored one within ``k`` (``(fp, fp)`` where they are
    equal: stored more than once). Each task hands all its fingerprints to the library in one
    call (``IndexReader.near``: the batch mode, the sorted batch merged with each stored table,
    reading only the blocks it lands in), and there are as few tasks as ``task_fps``
    fingerprints each allow (``INDEX_TASK_FPS``: one for a batch of up to 2^24): a table is
    read about once per task, so the work follows the batch and the blocks it touches, not
    the input's splits. With ``work`` (a folder), each task also writes its pairs there as a
    sorted run (``index-TASK.bin``, ``write_pair_run``) for the driver's merge."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ._incremental import _reader

    def rows(fps: bytes):
        queries, stored = _reader(index).near(fps, k)
        n = len(queries) // 8
        q, f = (pa.Array.from_buffers(pa.uint64(), n, [None, pa.py_buffer(b)]) for b in (queries, stored))
        a, b = pc.min_element_wise(q, f).view(pa.int64()), pc.max_element_wise(q, f).view(pa.int64())
        if work is not None:
            from pyspark import TaskContext

            write_pair_run(os.path.join(work, f"index-{TaskContext.get().partitionId():06d}.bin"), _u64_bytes(a), _u64_bytes(b), b"")
        out = pa.RecordBatch.from_arrays([a, b, pa.nulls(n, pa.string()), pa.nulls(n, pa.int64())], names=["a", "b", "bad", "count"])
        for at in range(0, n, 1 << 20):
            yield out.slice(at, 1 << 20)

    files = expand(inputs)
    task_fps = task_fps or INDEX_TASK_FPS
    if format == "parquet":
        import pyarrow.parquet as pq

        n = sum(pq.ParquetFile(p).metadata.num_rows for p in files)

        def run(batches):
            fps = []
            for batch in batches:
                col = batch.column(0)
                fps.append(_u64_bytes(pc.drop_null(col) if col.null_count else col))
            yield from rows(b"".join(fps))

        return _parquet_fps(spark, files).select("fp").coalesce(_index_tasks(n, task_fps)).mapInArrow(run, JOINED)
    ranges = splits(files, _range_bytes(spark, files, split_bytes, format))
    tasks = _index_tasks(estimate_count(spark, files, format), task_fps)
    record = RECORD_BYTES.get(format)
    # consecutive ranges per task
    per = -(-len(ranges) // tasks)
    groups = [ranges[i : i + per] for i in range(0, len(ranges), per)]

    def run(batches):
        for group in _ranges_of(batches, groups):
            yield from rows(b"".join((read_binary(path, start, end, record, False) if record else read_fingerprints(path, start, end, False))[0] for path, _, start, end in group))

    return _ranges(spark, groups).mapInArrow(run, JOINED)


def _index_tasks(n: int, task_fps: int) -> int:
    """Tasks checking about ``n`` fingerprints against an index, ``task_fps`` at most each."""
    return max(1, -(-n // max(task_fps, 1)))


def _parquet_fps(spark, files, with_ids: bool = False):
    """``fp`` (a long of the fingerprint's bits, null where missing) and, with ``with_ids``,
    ``id`` as text, of Parquet files with a 64-bit ``fp`` column."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    df = spark.read.parquet(*files)
    if "fp" not in df.columns:
        raise InputError(f"Parquet input has no 'fp' column (it has {df.columns})")
    kind = df.schema["fp"].dataType
    if isinstance(kind, T.LongType):
        fp = F.col("fp")
    elif isinstance(kind, T.DecimalType) and kind.scale == 0 and kind.precision >= 20:
        # an unsigned 64-bit column reads as decimal(20, 0): to the long of the same bits
        two63, two64 = F.expr("CAST('9223372036854775808' AS DECIMAL(20,0))"), F.expr("CAST('18446744073709551616' AS DECIMAL(21,0))")
        fp = F.when(F.col("fp") >= two63, F.col("fp") - two64).otherwise(F.col("fp")).cast("long")
    else:
        raise InputError(f"Parquet column 'fp' is {kind.simpleString()}: a 64-bit integer is needed")
    cols = [fp.alias("fp")]
    if with_ids:
        cols.append((F.col("id").cast("string") if "id" in df.columns else F.lit(None).cast("string")).alias("id"))
    return df.select(*cols)


def _hex(col):
    from pyspark.sql import functions as F

    return F.lpad(F.lower(F.hex(col)), 16, "0")


def _unsigned_order(col):
    from pyspark.sql import functions as F

    return F.col(col).bitwiseXOR(F.lit(P.SIGN))


def cluster(spark, inputs: Sequence[str], format: str = "fingerprints", k: Optional[int] = None, pairs_path=None, clusters_path=None, driver_pairs: int = DRIVER_PAIRS, split_bytes: int = SPLIT_BYTES, against=None) -> Clustered:
    """The command's work (see the module docs): writes ``pairs_path`` and
    ``clusters_path`` when given, returns the counts. With ``against`` (an index directory,
    readable at the same path by every executor), the input is a new batch: the pairs are
    those with at least one fingerprint of the batch (the other of the batch or stored), found
    by the block split within the batch and by the library's queries of the index, so the
    time grows with the batch; the clusters are those of these pairs, and list the batch's
    entries."""
    k = corpus_options(k, False, None)[0]  # the library's default and limit
    if format not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {format!r}")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(1 << 20))
    has_ids = bool(clusters_path) and _has_ids(inputs, format, spark)
    # the run's work folder, removed at the end: the join tasks' sorted pair runs, and the read
    # tasks' entries for the members. Beside --clusters (else --pairs), where every executor
    # and the driver reach; without either, a temporary folder (local mode).
    base = clusters_path or pairs_path
    work = os.path.abspath(str(base)) + ".work" if base else tempfile.mkdtemp(prefix="simdex-spark-cluster-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        return _cluster(spark, inputs, format, k, pairs_path, clusters_path, driver_pairs, split_bytes, against, has_ids, work if clusters_path else None, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _cluster(spark, inputs, format, k, pairs_path, clusters_path, driver_pairs, split_bytes, against, has_ids, keep, work) -> Clustered:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from . import _output as O
    from ._components import Rounds, components

    sc = spark.sparkContext
    with P.step(sc, "read, scatter and join (block split)"):
        rows, split, parts, kept = pair_rows(spark, inputs, format, k, split_bytes, keep=keep, work=work)
        if against:
            rows = rows.union(index_rows(spark, inputs, format, k, against, split_bytes, work=work))
        rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
        c = rows.select(
            F.sum(F.when(F.col("a") != F.col("b"), 1).otherwise(0)).alias("pairs"),
            F.sum(F.when(F.col("bad").isNotNull(), F.col("count"))).alias("bad"),
            F.sum(F.when(F.col("a").isNull() & F.col("bad").isNull(), F.col("count"))).alias("entries"),
        ).first()
        total, bad, entries = c["pairs"] or 0, c["bad"] or 0, c["entries"] or 0
        shown = [r[0] for r in rows.where("bad is not null").select("bad").limit(BAD_SHOWN).collect()] if bad else []
    good = rows.where("a is not null").select("a", "b")
    near = good.where("a != b")
    if against:
        # (a pair of two fingerprints both in the batch and stored is found three times: the
        # driver's merge keeps one, Spark's path takes them distinct)
        good, near = good.distinct(), near.distinct()
    on_driver = total <= driver_pairs
    rounds = None
    if on_driver:
        with P.step(sc, "pairs merged on the driver from the join's sorted runs: written, union-find"):
            import pyarrow.compute as pc

            runs = sorted(f for f in os.listdir(work) if f.endswith(".bin") and f.startswith(("pairs-", "index-")))
            vertices, clusters, merged = merge_pair_runs([os.path.join(work, f) for f in runs], pairs_path)
        if not against and merged != total:
            raise RuntimeError(f"the join's sorted runs in {work} hold {merged} pairs, but the join found {total}: is it a folder every executor and the driver share?")
        total = merged
        members_map = (vertices, clusters)
        clustered = len(vertices) // 8
        n_clusters = pc.count_distinct(_int64(clusters)).as_py() if clustered else 0
    else:
        if against:
            total = near.count()
        if pairs_path:
            with P.step(sc, "write pairs (sorted by Spark)"):
                line = F.concat_ws("\t", _hex(F.col("a")), _hex(F.col("b")), F.bit_count(F.col("a").bitwiseXOR(F.col("b"))).cast("string"))
                O.write_lines(near.select("a", "b", _unsigned_order("a").alias("ua"), _unsigned_order("b").alias("ub")), line, ["ua", "ub"], pairs_path)
        with P.step(sc, "clusters (large-star/small-star)"):
            # in unsigned order (the components' smallest vertex names them, as on the driver)
            flip = F.lit(P.SIGN)
            rounds = Rounds()
            comp = components(near.select(F.col("a").bitwiseXOR(flip).alias("a"), F.col("b").bitwiseXOR(flip).alias("b")), stats=rounds)
            comp = comp.select(F.col("vertex").bitwiseXOR(flip).alias("vertex"), F.col("component").bitwiseXOR(flip).alias("component"))
            repeated = good.where("a = b").select(F.col("a").alias("vertex"))
            alone = repeated.join(comp, "vertex", "left_anti").select("vertex", F.col("vertex").alias("component"))
            members_map = comp.union(alone).persist(StorageLevel.MEMORY_AND_DISK)
            clustered = members_map.count()
            n_clusters = members_map.select("component").distinct().count()
    members = None
    if clusters_path:
        with P.step(sc, "write cluster members"):
            members = _write_members(spark, inputs, format, members_map, clusters_path, driver_pairs, has_ids, kept)
    rows.unpersist()
    return Clustered(fingerprints=entries, bad_lines=bad, bad_shown=shown, design=split.summary, groups=split.groups, partitions=sum(parts), pairs=total, clustered=clustered, on_driver=on_driver, clusters=n_clusters, members=members if clusters_path else None, components=rounds)


def _has_ids(inputs, format, spark) -> bool:
    """Whether the entries carry document ids: a Parquet ``id`` column, binary records with
    ids (``binary-ids``), or a tab on the first line of the first text file."""
    if format in RECORD_BYTES:
        return format == "binary-ids"
    files = expand(inputs)
    if format == "parquet":
        return "id" in spark.read.parquet(*files).columns
    for path in files:
        with open(path, "rb") as f:
            for line in f:
                if line.strip():
                    return b"\t" in line
    return False


def _member_batch(vertices: bytes, clusters: bytes, fps_col, ids_col):
    """The members among a batch's entries: ``fp, id, cluster`` (columnar)."""
    import pyarrow as pa

    positions, found = cluster_members(vertices, clusters, _u64_bytes(fps_col))
    if not positions:
        return None
    idx = pa.Array.from_buffers(pa.uint64(), len(positions) // 8, [None, pa.py_buffer(positions)])
    return pa.RecordBatch.from_arrays([fps_col.take(idx), ids_col.take(idx), _int64(found)], names=["fp", "id", "cluster"])


def _write_members(spark, inputs, format, members_map, path: str, driver_rows: int, has_ids: bool, kept: Sequence[str] = ()) -> int:
    """Every entry of a cluster: ``fp<TAB>id<TAB>cluster`` (``fp<TAB>cluster`` when the input
    has no ids), sorted by cluster, fingerprint and id (unsigned); by the driver when the
    clusters were found there and hold at most ``driver_rows`` fingerprints, else by Spark.
    The entries are those the read tasks kept (``kept``: their Arrow files, in order), not the
    input read again."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from . import _output as O

    schema = "fp long, id string, cluster long"
    found = None  # the members' batches when the driver found them itself
    on_driver = isinstance(members_map, tuple) and len(members_map[0]) // 8 <= driver_rows
    if isinstance(members_map, tuple) and on_driver:
        # the driver looks the kept entries up in its map (the library's calls on every core): no Spark job
        from concurrent.futures import ThreadPoolExecutor

        vertices, clusters = members_map

        def one(file):
            return [m for m in (_member_batch(vertices, clusters, b.column(0), b.column(1)) for b in _kept_batches(file)) if m is not None]

        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            found = [m for ms in pool.map(one, kept) for m in ms]
    elif isinstance(members_map, tuple):
        bc = spark.sparkContext.broadcast(members_map)

        def run(batches):
            vertices, clusters = bc.value
            for batch in batches:
                # the kept files of this task's read tasks
                out = [_member_batch(vertices, clusters, b.column(0), b.column(1)) for i in batch.column(0).to_pylist() for b in _kept_batches(kept[i])]
                yield from (m for m in out if m is not None)

        members = _ranges(spark, kept).mapInArrow(run, schema)
    else:
        entries = _kept_entries(spark, kept)
        members = entries.join(F.broadcast(members_map).withColumnRenamed("vertex", "fp"), "fp").withColumnRenamed("component", "cluster")
    if on_driver:
        # as few as the map: sorted and written by the driver (no Spark sort)
        table = pa.Table.from_batches(members._collect_as_arrow() if found is None else found, schema=pa.schema([("fp", pa.int64()), ("id", pa.string()), ("cluster", pa.int64())])).combine_chunks()
        ids = pc.fill_null(table.column("id").combine_chunks(), "")
        offsets = ids.buffers()[1].slice(ids.offset * 4, (len(ids) + 1) * 4).to_pybytes() if len(ids) else b"\0\0\0\0"
        data = ids.buffers()[2].to_pybytes() if len(ids) and ids.buffers()[2] is not None else b""
        fps, clusters = (_u64_bytes(table.column(c).combine_chunks()) for c in ("fp", "cluster"))
        return write_members(path, fps, clusters, data, offsets, has_ids)
    fields = [_hex(F.col("fp"))] + ([F.coalesce(F.col("id"), F.lit(""))] if has_ids else []) + [_hex(F.col("cluster"))]
    # cached, so that the sort's sampling pass does not read the input again
    ordered = members.select("fp", "id", "cluster", _unsigned_order("cluster").alias("uc"), _unsigned_order("fp").alias("uf")).persist(StorageLevel.MEMORY_AND_DISK)
    written = O.write_lines(ordered, F.concat_ws("\t", *fields), ["uc", "uf", "id"], path)
    ordered.unpersist()
    return written


def _kept_entries(spark, kept: Sequence[str]):
    """``fp, id`` of every entry the read tasks kept (``kept``: their Arrow files), one task
    per file (the Spark path's members)."""

    def run(batches):
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield from _kept_batches(kept[i])

    return _ranges(spark, kept).mapInArrow(run, "fp long, id string")
