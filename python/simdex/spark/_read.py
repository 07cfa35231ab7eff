"""Documents into a DataFrame, read as ``simdex dedup`` reads them.

Every row is one record of the input: ``ord`` (its place in the corpus: ``simdex dedup``'s
order, file by file in path order, then by byte offset; it breaks ties the way the CLI does),
``id``, ``content`` (the CLI's content hash, None for a record that is not a document, such
as a bad JSON line), ``text`` (what the fingerprint is made of, None when it cannot be read)
and ``error`` (why not). Files are split among tasks by the executors themselves: JSON lines
by Hadoop's line reader (any file size), text and HTML pages one file per record. A record
that is not a document is named as ``simdex dedup`` names it: its file, and its line number
in the reason (counted from its byte offset, only for such records, so the input must be
readable at the same path on the executors, as every input is in local mode).
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator, List, Sequence, Tuple

from .._simdex import count_lines, read_documents

# ord = file rank << OFFSET_BITS | byte offset of the record in its file
OFFSET_BITS = 40
FORMATS = ("auto", "text", "html", "jsonl", "parquet")
SCHEMA = "ord long, id string, content string, text string, error string"


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


def _jsonl_records(rank: int, path: str, name: str, strict: bool):
    def records(rows: Iterable[Tuple[int, str]]) -> Iterator[tuple]:
        # a bad record is named by its line, as simdex dedup names it: the lines before its
        # byte offset, counted (from the last one counted) only when a record needs it
        counted_to, lines = 0, 0
        for offset, line in rows:
            ord_ = rank << OFFSET_BITS | offset
            data = line.encode("utf-8", "surrogatepass")
            docs = read_documents(data, name, "jsonl", strict)
            if any(content is None for _, content, _, _ in docs):
                lines += count_lines(path, counted_to, offset)
                counted_to = offset
                docs = read_documents(data, name, "jsonl", strict, lines + 1)
            for n, (id_, content, text, error) in enumerate(docs):
                yield (ord_ + n, id_, content, text, error)

    return records


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
    for rank, path in jsonl:
        lines = sc.newAPIHadoopFile(
            os.path.abspath(path),
            "org.apache.hadoop.mapreduce.lib.input.TextInputFormat",
            "org.apache.hadoop.io.LongWritable",
            "org.apache.hadoop.io.Text",
        )
        parts.append(lines.mapPartitions(_jsonl_records(rank, os.path.abspath(path), escape_name(path), strict)))
    if whole:
        # (one task would read every small file: ask for a few per core)
        blobs = sc.binaryFiles(",".join(os.path.abspath(p) for p in whole), minPartitions=2 * sc.defaultParallelism)
        parts.append(blobs.mapPartitions(_whole_files(whole, strict)))
    rdd = parts[0] if len(parts) == 1 else sc.union(parts)
    return spark.createDataFrame(rdd, SCHEMA)


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
