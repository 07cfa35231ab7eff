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
from typing import Iterable, Iterator, List, Sequence, Tuple

from .._simdex import read_documents, read_jsonl_range

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


def _jsonl_reader(ranges: list, strict: bool):
    """Each task's byte range of a JSON-lines file read by the library
    (``read_jsonl_range``) into the rows of ``SCHEMA``, as Arrow columns."""

    def run(batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        for path, name, start, end, rank in _ranges_of(batches, ranges):
            places, columns = read_jsonl_range(path, name, start, end, strict)
            n = len(places) // 8
            place = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(places)])
            ord_ = pc.bit_wise_or(place, pa.scalar(rank << OFFSET_BITS, pa.int64()))
            strings = [pa.Array.from_buffers(pa.string(), n, [pa.py_buffer(v), pa.py_buffer(o), pa.py_buffer(d)]) for d, o, v in columns]
            yield pa.RecordBatch.from_arrays([ord_, *strings], names=["ord", "id", "content", "text", "error"])

    return run


def _whole_files(ranks: dict, strict: bool):
    def records(files: Iterable[Tuple[str, bytes]]) -> Iterator[tuple]:
        for uri, data in files:
            rank, name, fmt = ranks[_local(uri)]
            for id_, content, text, error in read_documents(bytes(data), name, fmt, strict):
                yield (rank << OFFSET_BITS, id_, content, text, error)

    return records


def _local(uri: str) -> str:
    path = uri[len("file:") :] if uri.startswith("file:") else uri
    while path.startswith("//"):
        path = path[1:]
    return os.path.realpath(path)


def read_files(spark, inputs: Sequence[str], format: str = "auto", strict: bool = False):
    """The documents of files and folders as a DataFrame (see the module docs)."""
    if format not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, not {format!r}")
    files = expand(inputs)
    if not files:
        raise InputError(f"no input files in {', '.join(inputs)}")
    if format == "parquet":
        return read_dataframe(spark.read.parquet(*files))
    sc = spark.sparkContext
    jsonl, whole = [], {}
    for rank, path in enumerate(files):
        fmt = format_of(path, format)
        if fmt == "jsonl":
            jsonl.append((rank, path))
        else:
            whole[os.path.realpath(path)] = (rank, escape_name(path), fmt)
    parts = []
    if jsonl:
        ranges = [(*r, rank) for rank, path in jsonl for r in splits([path], JSONL_SPLIT_BYTES)]
        parts.append(_ranges(spark, ranges).mapInArrow(_jsonl_reader(ranges, strict), SCHEMA))
    if whole:
        # (one task would read every small file: ask for a few per core)
        blobs = sc.binaryFiles(",".join(os.path.abspath(p) for p in whole), minPartitions=2 * sc.defaultParallelism)
        parts.append(spark.createDataFrame(blobs.mapPartitions(_whole_files(whole, strict)), SCHEMA))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def read_dataframe(df, id_column: str = "id"):
    """Documents from a DataFrame with ``id`` and ``text`` (plain text) or ``html`` columns; a
    row's place in the corpus is its place in the DataFrame (``monotonically_increasing_id``)."""
    from pyspark.sql import functions as F

    columns = set(df.columns)
    if id_column not in columns or not columns & {"text", "html"}:
        raise InputError(f"a DataFrame of documents needs an {id_column!r} column and a 'text' or 'html' column; it has {sorted(columns)}")
    body = "text" if "text" in columns else "html"
    rows = df.select(F.monotonically_increasing_id().alias("ord"), F.col(id_column).cast("string").alias("id"), F.col(body).alias("body"))

    def records(it):
        for ord_, id_, value in it:
            data = b"" if value is None else (value if isinstance(value, (bytes, bytearray)) else str(value).encode("utf-8", "surrogatepass"))
            for _, content, text, error in read_documents(bytes(data), id_ or "", "text" if body == "text" else "html"):
                yield (ord_, id_, content, text, error)

    return df.sparkSession.createDataFrame(rows.rdd.mapPartitions(records), SCHEMA)
