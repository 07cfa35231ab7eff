"""Outputs written by the executors, then joined into one file without the driver holding them.

Each output is sorted by a total order (so a re-run, or a retried task, writes the same
bytes), written by Spark as part files into ``FILE.parts/`` (Spark's output committer
discards the files of failed task attempts), and the parts are then concatenated in order
into ``FILE``, streaming, 1 MiB at a time. The concatenation needs the driver to see the
part files: a local path in local mode and on one machine, a shared file system on a
cluster (or keep the parts, ``keep_parts=True``, and read them where they are).
"""

from __future__ import annotations

import glob
import os
import shutil


def write_lines(df, column, order, path: str, keep_parts: bool = False) -> int:
    """Writes ``column`` (a string column of ``df``) one value a line, in ``order``, to
    ``path``. Returns the number of lines."""
    parts = path + ".parts"
    df.orderBy(*order).select(column.alias("value")).write.mode("overwrite").text(parts)
    lines = concatenate(parts, path)
    if not keep_parts:
        shutil.rmtree(parts, ignore_errors=True)
    return lines


def concatenate(parts: str, path: str, prefix: bytes = b"") -> int:
    """Writes ``prefix`` then the files ``parts/part-*`` in name order into ``path`` (through
    ``path.tmp``, renamed when whole), 1 MiB at a time. Returns the number of lines."""
    lines = prefix.count(b"\n")
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        out.write(prefix)
        for part in sorted(glob.glob(os.path.join(parts, "part-*"))):
            with open(part, "rb") as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    lines += chunk.count(b"\n")
                    out.write(chunk)
    os.replace(tmp, path)
    return lines
