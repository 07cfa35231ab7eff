"""Documents into a DataFrame, read as ``simdex dedup`` reads them.

Every row is one record of the input: ``ord`` (its place in the corpus: ``simdex dedup``'s
order, file by file in path order, then by byte offset; it breaks ties the way the CLI does),
``id``, ``content`` (the CLI's content hash, None for a record that is not a document, such
as a bad JSON line), ``text`` (what the fingerprint is made of, None when it cannot be read)
and ``error`` (why not). Files are split among tasks by the executors themselves: JSON lines
in byte ranges the library reads into Arrow columns (``read_jsonl_range``; any file size),
text and HTML pages one file per record. A record that is not a document is named as
``simdex dedup`` names it: its file, and its line number in the reason (counted only for
such records). The executors read the inputs at the driver's paths (local mode, or a shared
file system).
"""

from __future__ import annotations

import os
from typing import List, Sequence, Tuple

from .._simdex import read_bodies, read_jsonl_range, read_whole_files

# ord = file rank << OFFSET_BITS | the record's place in its file (a byte offset: a text or
# HTML file's 0; a JSON-lines record's range start plus its number in the range)
OFFSET_BITS = 40
FORMATS = ("auto", "text", "html", "jsonl", "parquet")
SCHEMA = "ord long, id string, content string, text string, error string"
JSONL_SPLIT_BYTES = 32 << 20  # a JSON-lines file's byte range per read task


def splits(files: Sequence[str], split_bytes: int) -> List[Tuple[str, str, int, int]]:
    """``(path, name, start, end)`` byte ranges that tile every file (a line belongs to the
    range holding its first byte)."""
    out = []
    for path in files:
        size = os.path.getsize(path)
        name = escape_name(path)
        for start in range(0, max(size, 1), split_bytes):
            out.append((os.path.abspath(path), name, start, min(start + split_bytes, size)))
    return out


def _ranges(spark, ranges: list):
    """One task per byte range: a JVM range of their numbers (no Python worker reads it),
    which the task's function maps to its range (``_ranges_of``)."""
    return spark.range(0, len(ranges), 1, max(len(ranges), 1))


def _ranges_of(batches, ranges: list):
    for batch in batches:
        for i in batch.column(0).to_pylist():
            yield ranges[i]


class InputError(ValueError):
    """A bad input path or format (the command line reports it without a traceback)."""


def escape_name(path: str) -> str:
    """A path as ``simdex dedup`` prints it (its ``NAME_ESCAPING``)."""
    out = []
    for ch in os.fsencode(path).decode("utf-8", "surrogateescape"):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\t\n\r":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r"}[ch])
        elif "\udc80" <= ch <= "\udcff":
            out.append("\\x%02x" % (ord(ch) - 0xDC00))
        elif ord(ch) < 0x80 and (ord(ch) < 0x20 or ord(ch) == 0x7F):
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def expand(inputs: Sequence[str]) -> List[str]:
    """The input files in ``simdex dedup``'s order: each argument, folders walked in name order
    (hidden files left out)."""
    out: List[str] = []

    def walk(d: str) -> None:
        for name in sorted(os.listdir(d), key=os.fsencode):
            p = os.path.join(d, name)
            if os.path.isdir(p):
                walk(p)
            elif not name.startswith("."):
                out.append(p)

    for p in inputs:
        if not os.path.exists(p):
            raise InputError(f"cannot read {p}: no such file or folder")
        if os.path.isdir(p):
            walk(p)
        else:
            out.append(p)
    return out


def format_of(path: str, format: str) -> str:
    """The record format of one file under ``--format`` (``auto``: by extension, as the CLI)."""
    if format != "auto":
        return format
    ext = os.path.splitext(path)[1].lower()
    if ext in (".html", ".htm", ".xhtml"):
        return "html"
    if ext in (".jsonl", ".ndjson"):
        return "jsonl"
    return "text"


FILES_PER_TASK = 256  # text or HTML files read by one task


class Corpus:
    """Documents to read in Spark tasks, as Arrow batches of ``SCHEMA`` made by the library
    (no record is a Python object): ``map(fn, schema)`` is the DataFrame of
    ``fn(task, batches)`` over every task, ``task`` a number that orders the tasks as the
    corpus is ordered (a file corpus's byte range or run of files; a DataFrame's partition)."""

    def __init__(self, spark, tasks=None, frame=None, body: str = "text", strict: bool = False):
        self.spark, self.tasks, self.frame, self.body, self.strict = spark, tasks, frame, body, strict

    def estimate(self) -> int:
        """About how many documents (for the join's plan: any count gives the same answers)."""
        if self.frame is not None:
            return 1 << 20
        n = 0
        for task in self.tasks:
            if task[0] == "files":
                n += len(task[1])
            else:
                _, path, _, start, end, _ = task
                with open(path, "rb") as f:
                    f.seek(start)
                    head = f.read(1 << 16)
                n += max(1, (end - start) * max(head.count(b"\n"), 1) // max(len(head), 1))
        return n

    def task_count(self) -> int:
        """How many map tasks ``map`` runs (a DataFrame's partitions)."""
        return self.frame.rdd.getNumPartitions() if self.frame is not None else len(self.tasks)

    def map(self, fn, schema: str):
        if self.frame is not None:
            body = self.body

            def run(batches):
                from pyspark import TaskContext

                yield from fn(TaskContext.get().partitionId(), (_bodies_batch(b, body) for b in batches))

            return self.frame.mapInArrow(run, schema)
        tasks, strict = self.tasks, self.strict

        def run(batches):
            for batch in batches:
                for i in batch.column(0).to_pylist():
                    yield from fn(i, iter([_read_task(tasks[i], strict)]))

        return self.spark.range(0, len(tasks), 1, max(len(tasks), 1)).mapInArrow(run, schema)


def _strings(columns):
    import pyarrow as pa

    return [pa.Array.from_buffers(pa.string(), len(o) // 4 - 1, [pa.py_buffer(v), pa.py_buffer(o), pa.py_buffer(d)]) for d, o, v in columns]


def _read_task(task, strict: bool):
    """One task's documents as a RecordBatch of ``SCHEMA``, read by the library."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if task[0] == "jsonl":
        _, path, name, start, end, rank = task
        places, columns = read_jsonl_range(path, name, start, end, strict)
        n = len(places) // 8
        place = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(places)])
        ords = pc.bit_wise_or(place, pa.scalar(rank << OFFSET_BITS, pa.int64()))
    else:
        files = task[1]
        places = b"".join((rank << OFFSET_BITS).to_bytes(8, "little") for _, _, _, rank in files)
        places, columns = read_whole_files([f[0] for f in files], [f[1] for f in files], [f[2] for f in files], places, strict)
        ords = pa.Array.from_buffers(pa.int64(), len(places) // 8, [None, pa.py_buffer(places)])
    return pa.RecordBatch.from_arrays([ords, *_strings(columns)], names=["ord", "id", "content", "text", "error"])


def _bodies_batch(batch, body: str):
    """A DataFrame's batch (``ord``, ``id``, the body) as a RecordBatch of ``SCHEMA``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ._pipeline import arrow_buffers

    bodies = batch.column(2)
    if pa.types.is_binary(bodies.type) or pa.types.is_large_binary(bodies.type) or pa.types.is_large_string(bodies.type):
        bodies = bodies.cast(pa.binary())
    content, text, error = _strings(read_bodies(*arrow_buffers(pc.fill_null(bodies, "" if pa.types.is_string(bodies.type) else b"")), "html" if body == "html" else "text"))
    ids = batch.column(1)
    return pa.RecordBatch.from_arrays([batch.column(0), ids, content, text, error], names=["ord", "id", "content", "text", "error"])


def read_files(spark, inputs: Sequence[str], format: str = "auto", strict: bool = False) -> Corpus:
    """The documents of files and folders (see the module docs)."""
    if format not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {format!r}")
    files = expand(inputs)
    if not files:
        raise InputError(f"no input files in {', '.join(inputs)}")
    if format == "parquet":
        return read_dataframe(spark.read.parquet(*files))
    tasks, run = [], []
    for rank, path in enumerate(files):
        fmt = format_of(path, format)
        if fmt == "jsonl":
            if run:
                tasks.append(("files", run))
                run = []
            tasks += [("jsonl", *r, rank) for r in splits([path], JSONL_SPLIT_BYTES)]
        else:
            run.append((os.path.abspath(path), escape_name(path), fmt, rank))
            if len(run) == FILES_PER_TASK:
                tasks.append(("files", run))
                run = []
    if run:
        tasks.append(("files", run))
    # (a few tasks per core when the files are few and small)
    return Corpus(spark, tasks=_spread(tasks, 2 * spark.sparkContext.defaultParallelism), strict=strict)


def _spread(tasks: list, want: int) -> list:
    """Runs of whole files cut further until there are about ``want`` tasks."""
    while len(tasks) < want:
        i = max(range(len(tasks)), key=lambda t: len(tasks[t][1]) if tasks[t][0] == "files" else 0, default=None)
        if i is None or tasks[i][0] != "files" or len(tasks[i][1]) < 2:
            break
        run = tasks[i][1]
        tasks[i : i + 1] = [("files", run[: len(run) // 2]), ("files", run[len(run) // 2 :])]
    return tasks


def read_dataframe(df, id_column: str = "id") -> Corpus:
    """Documents from a DataFrame with ``id`` and ``text`` (plain text) or ``html`` columns; a
    row's place in the corpus is its place in the DataFrame (``monotonically_increasing_id``)."""
    from pyspark.sql import functions as F

    columns = set(df.columns)
    if id_column not in columns or not columns & {"text", "html"}:
        raise InputError(f"a DataFrame of documents needs an {id_column!r} column and a 'text' or 'html' column; it has {sorted(columns)}")
    body = "text" if "text" in columns else "html"
    rows = df.select(F.monotonically_increasing_id().alias("ord"), F.col(id_column).cast("string").alias("id"), F.col(body).alias("body"))
    return Corpus(df.sparkSession, frame=rows, body=body)
