"""simdex: an embeddable on-disk index of 64-bit simhash fingerprints.

>>> import simdex
>>> with simdex.Index("pages.idx") as idx:            # created if missing
...     fp = idx.add_document(b"<p>some page ...</p>", doc_id=1)
...     idx.find_or_insert(fp ^ 1, doc_id=2)         # a near-duplicate: the matches
[(fp, 1, 1)]

Fingerprints and document ids are unsigned 64-bit integers. Document fingerprints are made
with the index's pinned recipe (``Index.recipe``), so they are comparable across runs and
processes. ``simdex.scrapy`` holds the Scrapy middleware and item pipeline. ``simdex.Client(url)``
has ``Index``'s API over a ``simdex serve`` server, so several processes share one index.

Batches: ``query_many`` and ``find_or_insert_many`` take numpy uint64 arrays (or sequences of
ints) and answer per item, as lists or, with ``columnar=True``, as numpy columns
(``MatchColumns``); ``fingerprint_documents`` and ``find_or_insert_documents`` fingerprint a
list of documents on every core. Every batch call releases the GIL.
"""

from __future__ import annotations

import array
import sys
from typing import Any, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from ._simdex import (
    CorruptError,
    EmptyDocumentError,
    BinaryDocumentError,
    Error,
    Fingerprinter,
    LockedError,
    RecipeMismatchError,
    Segment,
    doc_id,
)
from ._simdex import Index as _Index

__all__ = [
    "Index",
    "Client",
    "OutcomeUnknownError",
    "ServerUnavailableError",
    "DocumentMatch",
    "MatchColumns",
    "Fingerprinter",
    "Segment",
    "Error",
    "LockedError",
    "CorruptError",
    "RecipeMismatchError",
    "EmptyDocumentError",
    "BinaryDocumentError",
    "doc_id",
]


def _u64_bytes(values: Any, what: str) -> bytes:
    """Little-endian u64 bytes of a numpy array, a buffer or a sequence of ints."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"{what} must be one-dimensional, not of shape {values.shape}")
        if values.dtype.kind not in "ui":
            raise ValueError(f"{what} must hold integers, not {values.dtype}")
        if values.dtype.kind == "i" and values.size and values.min() < 0:
            raise ValueError(f"{what} must not be negative")
        return np.ascontiguousarray(values, dtype="<u8").tobytes()
    try:
        a = array.array("Q", values)
    except OverflowError as e:
        raise ValueError(f"{what}: every value must fit in an unsigned 64-bit integer") from e
    except TypeError as e:
        raise ValueError(f"{what} must be a sequence of integers") from e
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


class DocumentMatch(NamedTuple):
    """A stored document that a document call matched."""

    fingerprint: int
    distance: int
    doc_id: Optional[int]
    similarity: Optional[float]
    """The resemblance (Jaccard similarity of the word shingles) the two documents' sketches
    estimate; None when the index stores no sketches or the stored pair has none."""


class MatchColumns(NamedTuple):
    """The matches of a batch as numpy arrays of one entry per match, in item order (each
    item's matches sorted by distance, fingerprint and id): ``query_index`` (int64, the
    item's position in the batch), ``fingerprint`` (uint64), ``doc_id`` (uint64) and
    ``distance`` (uint32). An item without matches has no entry. ``pandas.DataFrame(c._asdict())``
    makes a table of it."""

    query_index: Any
    fingerprint: Any
    doc_id: Any
    distance: Any


def _numpy(what: str) -> Any:
    try:
        import numpy
    except ImportError as e:
        raise ImportError(f"{what} needs numpy (pip install numpy)") from e
    return numpy


def _columns(raw: Tuple[bytes, bytes, bytes, bytes]) -> MatchColumns:
    np = _numpy("columnar=True")
    items, fps, ids, distances = raw
    # (astype copies: arrays over bytes would be read-only)
    return MatchColumns(
        np.frombuffer(items, dtype="<u8").astype(np.int64),
        np.frombuffer(fps, dtype="<u8").astype(np.uint64),
        np.frombuffer(ids, dtype="<u8").astype(np.uint64),
        np.frombuffer(distances, dtype="<u4").astype(np.uint32),
    )


def _document_answer(answer: Tuple[int, List[Tuple[int, int, Optional[int], Optional[float]]], int]) -> Tuple[int, List[DocumentMatch], int]:
    fp, matches, words = answer
    return fp, [DocumentMatch._make(m) for m in matches], words


class Index(_Index):
    """An on-disk index of (fingerprint, doc_id) pairs.

    ``Index(path, k=3, durability="group", read_only=False, create=True, sketches=True)`` opens
    (or creates) the index in directory ``path``. ``k`` is the largest query distance, fixed when
    the index is created; so is ``sketches``: a new index stores a 64-byte sketch per document
    and its document calls confirm near-duplicates by it (``sketches=False``: fingerprints only,
    8 to 60 bytes per document less). ``durability``: ``"sync"`` (fsync before every write returns),
    ``"group"`` (a write survives a process crash at once and a power loss within 10 ms),
    ``"nosync"`` (synced on ``sync()``/``close()`` only). Raises ``LockedError`` while another
    writer has the index open. ``log_recovery``: what to do when a log holds less than the
    manifest recorded as acknowledged (a cut, damaged or missing log: disk damage or a bad copy,
    never a crash): ``"strict"`` raises ``CorruptError`` naming the log and the operations lost;
    ``"point_in_time"`` opens with everything before the loss and reports it in
    ``stats()["lost"]`` and ``stats()["lost_ops"]``. Use it as a context manager, or call
    ``close()``.
    """

    def add_many(self, fps: Iterable[int], doc_ids: Optional[Iterable[int]] = None) -> int:
        """Adds many pairs (numpy uint64 arrays or sequences of ints); without ``doc_ids``
        every fingerprint gets its insert's sequence number as id. Returns the count."""
        f = _u64_bytes(fps, "fps")
        ids = None if doc_ids is None else _u64_bytes(doc_ids, "doc_ids")
        if ids is not None and len(ids) != len(f):
            raise ValueError(f"fps and doc_ids differ in length ({len(f) // 8} and {len(ids) // 8})")
        return self._add_many(f, ids)

    def find_or_insert_document(
        self, data: Union[str, bytes], doc_id: int, k: Optional[int] = None, html: Optional[bool] = None, min_words: Optional[int] = None, confirm: bool = True, verify: Optional[bool] = None
    ) -> Tuple[int, List[DocumentMatch], int]:
        """Fingerprints a document with the index's recipe (pinning the default one if none) and
        checks-then-adds it atomically: ``(fingerprint, matches, words)``, the matches
        (``DocumentMatch``, with the sketches' similarity estimate) when near-duplicates are
        stored (nothing inserted), else ``[]`` after inserting. ``k`` defaults to the index's. In
        an index with sketches a stored document within ``k`` is a match only when the sketches
        estimate a resemblance of at least 0.90 (``confirm=False``: fingerprints alone;
        ``verify`` is the old name of ``confirm``). A str is text, bytes an HTML page (``html``
        overrides). Raises EmptyDocumentError for a document with fewer words than the recipe's
        minimum or ``min_words``, BinaryDocumentError for a binary one (nothing stored)."""
        return _document_answer(super().find_or_insert_document(data, doc_id, k=k, html=html, min_words=min_words, confirm=confirm, verify=verify))

    def query_many(self, fps: Iterable[int], k: Optional[int] = None, columnar: bool = False) -> Union[List[List[Tuple[int, int, Optional[int]]]], MatchColumns]:
        """``query`` of every fingerprint (a numpy integer array or a sequence of ints), all
        answered over one snapshot of the index: per item, its list of (fingerprint, distance,
        doc_id) sorted by distance, fingerprint and id; with ``columnar=True``, one
        ``MatchColumns`` of numpy arrays instead (no Python object per match: for large
        batches). A large batch is answered by the Rust batch path (one merge join per
        table), a small one by one probe per item on every core; both are exact."""
        raw = self._query_many(_u64_bytes(fps, "fps"), k, columnar)
        return _columns(raw) if columnar else raw

    def find_or_insert_many(self, fps: Iterable[int], doc_ids: Iterable[int], k: Optional[int] = None, columnar: bool = False) -> Union[List[List[Tuple[int, int, Optional[int]]]], MatchColumns]:
        """``find_or_insert`` of every (fps[i], doc_ids[i]) in order, as if called one by one:
        per item, its matches, or ``[]`` when it was inserted (so of two equal new fingerprints
        the first is inserted and the second matches it). ``columnar=True``: a ``MatchColumns``
        (inserted items have no entry). An error stops the batch and is raised; the items
        before it stay stored."""
        f = _u64_bytes(fps, "fps")
        ids = _u64_bytes(doc_ids, "doc_ids")
        raw = self._find_or_insert_many(f, ids, k, columnar)
        return _columns(raw) if columnar else raw

    def fingerprint_documents(self, docs: Sequence[Union[str, bytes]], html: Optional[bool] = None) -> Any:
        """The fingerprints of documents with the index's recipe (as ``fingerprint_document``:
        a str is text, bytes an HTML page, ``html`` overrides), made on every core: a numpy
        uint64 array. Raises the error of the first document that cannot be fingerprinted
        (EmptyDocumentError, BinaryDocumentError), its message starting with its position."""
        np = _numpy("fingerprint_documents")
        return np.frombuffer(self._fingerprint_documents(list(docs), html), dtype="<u8").astype(np.uint64)

    def find_or_insert_documents(
        self, docs: Sequence[Union[str, bytes]], doc_ids: Iterable[int], k: Optional[int] = None, html: Optional[bool] = None, min_words: Optional[int] = None, confirm: bool = True
    ) -> List[Union[Tuple[int, List[DocumentMatch], int], Error]]:
        """``find_or_insert_document`` of every (docs[i], doc_ids[i]), as if called one by one in
        order, the documents fingerprinted (and sketched) on every core first: per item,
        ``(fingerprint, matches, words)``, or, for a document refused (too few words, binary;
        nothing stored), the EmptyDocumentError or BinaryDocumentError it would raise,
        returned, not raised. Any other error stops the batch and is raised; the items before
        it stay stored."""
        ids = _u64_bytes(doc_ids, "doc_ids")
        out = self._find_or_insert_documents(list(docs), ids, k, html, min_words, confirm)
        return [a if isinstance(a, BaseException) else _document_answer(a) for a in out]


# the client of `simdex serve` (imported last: it uses the helpers above)
from .client import Client, OutcomeUnknownError, ServerUnavailableError  # noqa: E402
