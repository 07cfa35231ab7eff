"""Incremental dedup: a new corpus against an existing index directory (``dedup --index``).

Every map task of ``dedup``'s one pass checks its documents against the index as they are
fingerprinted, through the library's check on an index reader
(``IndexReader.check_documents``: the documents' own rule, the same code a crawler's
check-then-add runs, which decides k, the confirmation by stored sketch and the fallback for
entries stored without one), one reader per executor process, opened once and reused by every
batch and task. The matches are written by the tasks as part files. So the index directory
must be readable at the same path on every executor.

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

_READERS: dict = {}


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
            def check(self, fps: bytes, sketches: bytes, id_data: bytes, id_offsets: bytes) -> None:
                reader.check_documents(tmp, fps, sketches, id_data, id_offsets, k, confirm, threshold)
                if new:
                    append_new_documents(new, fps, sketches, id_data, id_offsets)

            def done(self) -> None:
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
