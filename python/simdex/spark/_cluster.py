"""``cluster``: fingerprints in, near-duplicate pairs and clusters out, as ``simdex cluster``
finds them on one machine (``python -m simdex.spark cluster``).

The steps, and what crosses Spark's shuffle:

1. **read**: text files (``FINGERPRINT_HEX[<TAB>ID]`` a line) are cut into byte ranges that
   the executors parse in Rust (``read_fingerprints``: a line belongs to the range holding
   its first byte), or Parquet files with a 64-bit ``fp`` column are read by Spark. The
   fingerprints are cached as one ``long`` column (one count plans the design); a bad line
   is counted and named with its file and line number.
2. **pairs**: the library's ``BlockSplit`` of the planned design (for ``k = 3`` and millions
   of fingerprints, 10 tables of 5 blocks): each table belongs to the group of its first
   leading block, and every fingerprint is repartitioned once per group (``k + 1`` times:
   4 for those 10 tables), as the bare ``long``, by the value of the group's block. Each
   partition is joined in Rust (``BlockJoin.join`` over the Arrow batch's int64 buffer): the
   group's tables built one at a time, each prefix group checked by popcount, every pair
   reported by its first shared table only, so no distinct follows. Copies of one
   fingerprint are counted in group 0, never joined (a fingerprint stored a million times is
   one value).
3. **components**: pairs that fit ``driver_pairs`` go to the driver as Arrow batches and
   the library sorts them, writes ``--pairs`` and runs its union-find (16 bytes a pair plus
   about 40 per clustered fingerprint); past it, Spark sorts and writes the pairs and
   ``_components`` runs large-star/small-star (locally checkpointed each round).
4. **members** (``--clusters``): the input is read again and every entry of a cluster (a
   component, or a fingerprint stored more than once) is written with its cluster, the
   smallest fingerprint of the component.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from .._simdex import BlockJoin, cluster_members, pairs_and_components, read_fingerprints
from . import _pipeline as P
from ._read import InputError, escape_name, expand

SPLIT_BYTES = 64 << 20  # a text file's byte range per read task
ROWS_PER_JOIN = 1 << 21  # fingerprints a join task expects (16 MiB, and its permuted copy)
DRIVER_PAIRS = 1 << 26  # pairs collected to the driver at most (1 GiB of pairs)
JOIN_CANDIDATES_LOG2 = 2.0  # the planner's bound on a prefix group, for joins in memory
FORMATS = ("fingerprints", "parquet")
BAD_SHOWN = 20


@dataclass
class Clustered:
    """What ``cluster`` found: counts, the design, and where each output went."""

    fingerprints: int
    bad_lines: int
    bad_shown: List[str]
    design: str
    groups: int
    pairs: int
    clustered: int
    on_driver: bool


def splits(files: Sequence[str], split_bytes: int = SPLIT_BYTES) -> List[Tuple[str, str, int, int]]:
    """``(path, name, start, end)`` byte ranges that tile every file."""
    out = []
    for path in files:
        size = os.path.getsize(path)
        name = escape_name(path)
        for start in range(0, max(size, 1), split_bytes):
            out.append((os.path.abspath(path), name, start, min(start + split_bytes, size)))
    return out


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


def _text_reader(with_ids: bool):
    import pyarrow as pa

    def run(batches):
        for batch in batches:
            paths, names, starts, ends = (batch.column(i).to_pylist() for i in range(4))
            for path, name, start, end in zip(paths, names, starts, ends):
                fps, ids, bad, shown = read_fingerprints(path, start, end, with_ids)
                cols = [_int64(fps)]
                n = len(cols[0])
                if with_ids:
                    data, offsets = ids
                    cols.append(pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]))
                cols += [pa.nulls(n, pa.string()), pa.nulls(n, pa.int64())]
                yield pa.RecordBatch.from_arrays(cols, schema=_schema(with_ids))
                if bad:
                    lines = [f"{name}:{line}: {reason}" for line, reason in shown]
                    m = len(lines)
                    cols = [pa.nulls(m, pa.int64())] + ([pa.nulls(m, pa.string())] if with_ids else [])
                    cols += [pa.array(lines, pa.string()), pa.array([bad] + [0] * (m - 1), pa.int64())]
                    yield pa.RecordBatch.from_arrays(cols, schema=_schema(with_ids))

    return run


def _schema(with_ids: bool):
    import pyarrow as pa

    fields = [pa.field("fp", pa.int64())] + ([pa.field("id", pa.string())] if with_ids else [])
    return pa.schema(fields + [pa.field("bad", pa.string()), pa.field("bad_count", pa.int64())])


def _ddl(with_ids: bool) -> str:
    return "fp long, " + ("id string, " if with_ids else "") + "bad string, bad_count long"


def read_entries(spark, inputs: Sequence[str], format: str, with_ids: bool = False, split_bytes: int = SPLIT_BYTES):
    """``fp`` (and ``id`` as text, with ``with_ids``), ``bad`` and ``bad_count`` of every
    entry: a row per fingerprint (``bad`` null), and rows naming bad lines or records
    (``fp`` null; ``bad_count`` on the first of a range, the range's count of them)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if format not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {format!r}")
    files = expand(inputs)
    if not files:
        raise InputError(f"no input files in {', '.join(inputs)}")
    if format == "parquet":
        df = spark.read.parquet(*files)
        if "fp" not in df.columns:
            raise InputError(f"Parquet input {', '.join(inputs)} has no 'fp' column (it has {df.columns})")
        kind = df.schema["fp"].dataType
        if isinstance(kind, T.LongType):
            fp = F.col("fp")
        elif isinstance(kind, T.DecimalType) and kind.scale == 0 and kind.precision >= 20:
            # an unsigned 64-bit column reads as decimal(20, 0): to the long of the same bits
            two63, two64 = F.expr("CAST('9223372036854775808' AS DECIMAL(20,0))"), F.expr("CAST('18446744073709551616' AS DECIMAL(21,0))")
            fp = F.when(F.col("fp") >= two63, F.col("fp") - two64).otherwise(F.col("fp")).cast("long")
        else:
            raise InputError(f"Parquet column 'fp' is {kind.simpleString()}: a 64-bit integer is needed")
        bad = F.when(F.col("fp").isNull(), F.concat(F.input_file_name(), F.lit(": a row without fp")))
        cols = [fp.alias("fp")] + ([F.col("id").cast("string").alias("id") if "id" in df.columns else F.lit(None).cast("string").alias("id")] if with_ids else [])
        return df.select(*cols, bad.alias("bad"), F.when(bad.isNotNull(), F.lit(1)).cast("long").alias("bad_count"))
    ranges = splits(files, split_bytes)
    rdd = spark.sparkContext.parallelize(ranges, len(ranges))
    df = spark.createDataFrame(rdd, "path string, name string, start long, end long")
    return df.mapInArrow(_text_reader(with_ids), _ddl(with_ids))


def _join(split: BlockJoin, group: int):
    import pyarrow as pa

    def run(batches):
        P._fail_first_attempt("join")
        fps = b"".join(_u64_bytes(b.column(0)) for b in batches)
        a, b, repeated, _ = split.join(group, fps)
        out = pa.RecordBatch.from_arrays([_int64(a), _int64(b)], names=["a", "b"])
        step = 1 << 20
        for at in range(0, out.num_rows, step):
            yield out.slice(at, step)
        if repeated:
            r = _int64(repeated)
            yield pa.RecordBatch.from_arrays([r, r], names=["a", "b"])

    return run


def pair_rows(spark, fps, n: int, k: int, candidates_log2: float = JOIN_CANDIDATES_LOG2, rows_per_join: int = ROWS_PER_JOIN):
    """``(a, b)``: every pair of distinct fingerprints of ``fps`` (a DataFrame with a ``long``
    column ``fp``, ``n`` rows) within ``k`` once, ``a < b`` unsigned, and every fingerprint
    held more than once as ``(fp, fp)``; with the ``BlockJoin`` that found them."""
    from pyspark.sql import functions as F

    split = BlockJoin(n, k, candidates_log2)
    parallel = spark.sparkContext.defaultParallelism
    parts = []
    for g in range(split.groups):
        shift, mask = split.key_bits(g)
        key = F.shiftrightunsigned("fp", shift).bitwiseAND(F.lit(P.signed(mask)))
        tasks = max(parallel, math.ceil(n * len(split.tables_of(g)) / rows_per_join / 2))
        parts.append(fps.repartition(tasks, key).mapInArrow(_join(split, g), "a long, b long"))
    out = parts[0]
    for p in parts[1:]:
        out = out.union(p)
    return out, split


def _hex(col):
    from pyspark.sql import functions as F

    return F.lpad(F.lower(F.hex(col)), 16, "0")


def _unsigned_order(col):
    from pyspark.sql import functions as F

    return F.col(col).bitwiseXOR(F.lit(P.SIGN))


def cluster(
    spark,
    inputs: Sequence[str],
    format: str = "fingerprints",
    k: int = 3,
    pairs_path: Optional[str] = None,
    clusters_path: Optional[str] = None,
    driver_pairs: int = DRIVER_PAIRS,
    split_bytes: int = SPLIT_BYTES,
    log=None,
) -> Clustered:
    """The command's work (see the module docs): writes ``pairs_path`` and
    ``clusters_path`` when given, returns the counts."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from . import _output as O
    from ._components import components

    if not 0 <= k <= 8:
        raise ValueError(f"k must be between 0 and 8, not {k}")
    sc = spark.sparkContext
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(1 << 20))
    with P.step(sc, "read fingerprints"):
        entries = read_entries(spark, inputs, format, split_bytes=split_bytes).persist(StorageLevel.MEMORY_AND_DISK)
        counts = entries.select(F.count("fp").alias("n"), F.sum("bad_count").alias("bad")).first()
        n, bad = counts["n"], counts["bad"] or 0
        shown = [r[0] for r in entries.where("bad is not null").select("bad").limit(BAD_SHOWN).collect()] if bad else []
    fps = entries.where("fp is not null").select("fp")
    with P.step(sc, "pairs (block-split join)"):
        rows, split = pair_rows(spark, fps, n, k)
        rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
        near = rows.where("a != b")
        total = near.count()
    on_driver = total <= driver_pairs
    if on_driver:
        with P.step(sc, "pairs to the driver: sorted, written, union-find"):
            import pyarrow as pa
            import pyarrow.compute as pc

            batches = rows._collect_as_arrow()
            table = pa.Table.from_batches(batches, schema=pa.schema([("a", pa.int64()), ("b", pa.int64())]))
            ca, cb = table.column("a").combine_chunks(), table.column("b").combine_chunks()
            # repeated fingerprints came as (fp, fp): split them off (columnar, no rows)
            same = pc.equal(ca, cb)
            differ = pc.invert(same)
            vertices, clusters = pairs_and_components(_u64_bytes(pc.filter(ca, differ)), _u64_bytes(pc.filter(cb, differ)), _u64_bytes(pc.filter(ca, same)), pairs_path)
        members_map = (vertices, clusters)
        clustered = len(vertices) // 8
    else:
        if pairs_path:
            with P.step(sc, "write pairs (sorted by Spark)"):
                line = F.concat_ws("\t", _hex(F.col("a")), _hex(F.col("b")), F.bit_count(F.col("a").bitwiseXOR(F.col("b"))).cast("string"))
                O.write_lines(near.select("a", "b", _unsigned_order("a").alias("ua"), _unsigned_order("b").alias("ub")), line, ["ua", "ub"], pairs_path)
        with P.step(sc, "clusters (large-star/small-star)"):
            # in unsigned order (the components' smallest vertex names them, as on the driver)
            flip = F.lit(P.SIGN)
            comp = components(near.select(F.col("a").bitwiseXOR(flip).alias("a"), F.col("b").bitwiseXOR(flip).alias("b")))
            comp = comp.select(F.col("vertex").bitwiseXOR(flip).alias("vertex"), F.col("component").bitwiseXOR(flip).alias("component"))
            repeated = rows.where("a = b").select(F.col("a").alias("vertex"))
            alone = repeated.join(comp, "vertex", "left_anti").select("vertex", F.col("vertex").alias("component"))
            members_map = comp.union(alone).persist(StorageLevel.MEMORY_AND_DISK)
            clustered = members_map.count()
    if clusters_path:
        with P.step(sc, "write cluster members"):
            _write_members(spark, inputs, format, members_map, clusters_path, split_bytes)
    rows.unpersist()
    entries.unpersist()
    return Clustered(fingerprints=n, bad_lines=bad, bad_shown=shown, design=split.summary, groups=split.groups, pairs=total, clustered=clustered, on_driver=on_driver)


def _has_ids(inputs, format, spark) -> bool:
    """Whether the entries carry document ids: a Parquet ``id`` column, or a tab on the
    first line of the first text file."""
    files = expand(inputs)
    if format == "parquet":
        return "id" in spark.read.parquet(*files).columns
    for path in files:
        with open(path, "rb") as f:
            for line in f:
                if line.strip():
                    return b"\t" in line
    return False


def _write_members(spark, inputs, format, members_map, path: str, split_bytes: int) -> int:
    """Every entry of a cluster: ``fp<TAB>id<TAB>cluster`` (``fp<TAB>cluster`` when the input
    has no ids), sorted by cluster, fingerprint and id."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from . import _output as O

    entries = read_entries(spark, inputs, format, with_ids=True, split_bytes=split_bytes).where("fp is not null").select("fp", "id")
    if isinstance(members_map, tuple):
        bc = spark.sparkContext.broadcast(members_map)

        def run(batches):
            vertices, clusters = bc.value
            for batch in batches:
                positions, found = cluster_members(vertices, clusters, _u64_bytes(batch.column(0)))
                if positions:
                    idx = pa.Array.from_buffers(pa.uint64(), len(positions) // 8, [None, pa.py_buffer(positions)])
                    taken = batch.take(idx)
                    yield pa.RecordBatch.from_arrays([taken.column(0), taken.column(1), _int64(found)], names=["fp", "id", "cluster"])

        members = entries.mapInArrow(run, "fp long, id string, cluster long")
    else:
        members = entries.join(F.broadcast(members_map).withColumnRenamed("vertex", "fp"), "fp").withColumnRenamed("component", "cluster")
    has_ids = _has_ids(inputs, format, spark)
    fields = [_hex(F.col("fp"))] + ([F.coalesce(F.col("id"), F.lit(""))] if has_ids else []) + [_hex(F.col("cluster"))]
    ordered = members.select("fp", "id", "cluster", _unsigned_order("cluster").alias("uc"), _unsigned_order("fp").alias("uf"))
    return O.write_lines(ordered, F.concat_ws("\t", *fields), ["uc", "uf", "id"], path)
