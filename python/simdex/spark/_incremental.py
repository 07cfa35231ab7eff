"""Incremental dedup: a new corpus against an existing index directory (``dedup --index``).

Every map task of ``dedup``'s one pass checks its documents against the index, through the
library's check on an index reader (``IndexReader.check_documents``: the documents' own rule,
the same code a crawler's check-then-add runs, which decides k, the confirmation by stored
sketch and the fallback for entries stored without one), one reader per executor process,
opened once and reused by every batch and task. A task hands the library its documents in
one call (up to ``CHECK_DOCUMENTS`` at a time, as they are fingerprinted), so that the
library checks them in batch mode: each stored band walked in the order of the batch's band
keys, the candidates' sketches read in order, with the answers of one check per document.
The matches are written by the tasks as part files. So the index directory must be readable
at the same path on every executor.

Writing back is the driver's: an index has one writer, so each task appends its new documents
(fingerprint, document id, sketch) to a part file, and the driver inserts the files into the
index afterwards, 2^16 documents at a time (new log records, flushed into segments as the
index does). Document ids are ``simdex.doc_id(id)``, as ``simdex dedup --index`` stores them.
"""

from __future__ import annotations

import glob
import os
from typing import Optional

from .._simdex import IndexReader, append_new_documents, insert_files_into_index
from ._pipeline import arrow_buffers

_READERS: dict = {}
# documents (fingerprint, sketch, id) a task holds for one call of the library's check: the
# larger the call, the more of each band's walk it shares (about 100 bytes a document: 25 MiB)
CHECK_DOCUMENTS = 1 << 18


def _reader(path: str) -> IndexReader:
    """One reader per executor process and index."""
    r = _READERS.get(path)
    if r is None:
        r = _READERS[path] = IndexReader(path)
    return r


class IndexCheck:
    """What ``dedup`` does with an index: check every document against it (writing the
    matches to ``matches`` when given) and, with ``insert``, add the corpus afterwards."""

    def __init__(self, path: str, matches: Optional[str] = None, insert: bool = False):
        self.path, self.matches_path, self.insert = os.path.abspath(path), matches, insert
        self.matches: Optional[int] = None
        self.inserted: Optional[int] = None
        self._matches_parts = self._insert_dir = None
        self.k = self.confirm = self.threshold = None

    def sketching(self, recipe):
        """``recipe`` making the index's own sketches (``IndexReader.sketching``)."""
        return _reader(self.path).sketching(recipe)

    def prepare(self, work: str, k, confirm: bool, threshold, parts_of) -> None:
        """Before the pass: the user's k, confirmation and threshold (the library decides what
        they mean), part files for the matches (``parts_of(path)``) and the new documents."""
        self.k, self.confirm, self.threshold = k, confirm, threshold
        self._matches_parts = parts_of(self.matches_path or os.path.join(work, "matches.tsv"))
        if self.insert:
            self._insert_dir = os.path.join(work, "insert")
            os.makedirs(self._insert_dir, exist_ok=True)

    def task(self, task: int):
        """A map task's writer: ``check(fps, sketches, ids)`` per batch, ``done()`` at the end."""
        parts, insert_dir = self._matches_parts, self._insert_dir
        tmp = parts.tmp(task)
        new = os.path.join(insert_dir, os.path.basename(tmp)) if insert_dir else None
        open(tmp, "wb").close()
        if new:
            open(new, "wb").close()
        reader = _reader(self.path)
        k, confirm, threshold = self.k, self.confirm, self.threshold

        class Writer:
            def __init__(self):
                self.held, self.n = [], 0

            def check(self, fps: bytes, sketches: bytes, id_data: bytes, id_offsets: bytes) -> None:
                import pyarrow as pa

                n = len(id_offsets) // 4 - 1
                self.held.append((fps, sketches, pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(id_offsets), pa.py_buffer(id_data)])))
                self.n += n
                if self.n >= CHECK_DOCUMENTS:
                    self.flush()
                if new:
                    append_new_documents(new, fps, sketches, id_data, id_offsets)

            def flush(self) -> None:
                """The held documents checked in one library call (their matches appended in
                document order)."""
                import pyarrow as pa

                if self.held:
                    ids = arrow_buffers(pa.concat_arrays([i for _, _, i in self.held]))
                    reader.check_documents(tmp, b"".join(f for f, _, _ in self.held), b"".join(s for _, s, _ in self.held), *ids, k, confirm, threshold)
                self.held, self.n = [], 0

            def done(self) -> None:
                self.flush()
                parts.done(tmp, task)
                if new:
                    os.replace(new, os.path.join(insert_dir, f"part-{task:08d}"))

        return Writer()

    def finish(self, recipe, sketches: bool) -> None:
        """After the pass: the matches file, and the new documents inserted."""
        n = self._matches_parts.join()
        self.matches = n if self.matches_path else None
        if not self.matches_path:
            os.remove(self._matches_parts.path)
        if self.insert:
            parts = sorted(glob.glob(os.path.join(self._insert_dir, "part-*")))
            self.inserted = insert_files_into_index(self.path, recipe, parts, sketches)
