"""simdex: an embeddable on-disk index of 64-bit simhash fingerprints.

>>> import simdex
>>> with simdex.Index("pages.idx") as idx:            # created if missing
...     fp = idx.insert_document(b"<p>some page ...</p>", doc_id=1)
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

from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

try:
    from . import _simdex  # noqa: F401  (the compiled extension)
except ImportError as e:
    import os as _os

    _here = _os.path.dirname(__file__)
    if any(n.startswith("_simdex.") and n.endswith((".so", ".pyd")) for n in _os.listdir(_here)):
        raise
    # the source folder (python/simdex, found first from python/ as the working directory)
    raise ImportError(f"simdex was imported from its source folder {_here}, which has no compiled extension: run Python outside python/ to use the installed wheel") from e

from ._simdex import (
    DEFAULT_CONFIRMED_K,
    DEFAULT_MIN_SIMILARITY,
    DEFAULT_UNCONFIRMED_K,
    MAX_K,
    CorruptError,
    DocumentQuery,
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
from ._types import DocumentMatch, MatchColumns, _columns, _deprecated, _deprecated_keyword, _document_answer, _numpy, _u64_bytes  # noqa: F401

__all__ = [
    "Index",
    "Client",
    "OutcomeUnknownError",
    "ServerUnavailableError",
    "DocumentMatch",
    "DocumentQuery",
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
    "DEFAULT_CONFIRMED_K",
    "DEFAULT_UNCONFIRMED_K",
    "DEFAULT_MIN_SIMILARITY",
    "MAX_K",
]


class Index(_Index):
    """An on-disk index of (fingerprint, doc_id) pairs.

    ``Index(path, k=None, durability="group", read_only=False, create=True, sketches=True,
    log_recovery="strict", expire_after=None, create_in_nonempty=False)`` opens
    (or creates) the index in directory ``path``. ``k`` is the largest query distance, fixed when
    the index is created (``None``: the library's default design for a new index, the index's
    own for an existing one; another ``k`` than an existing index's raises ValueError, as a
    negative one does); so is ``sketches``: a new index stores a 64-byte sketch per document
    and its document calls confirm near-duplicates by it (``sketches=False``: fingerprints only,
    8 to 60 bytes per document less). ``durability``: ``"sync"`` (fsync before every write returns),
    ``"group"`` (a write survives a process crash at once and a power loss within 10 ms),
    ``"nosync"`` (synced on ``sync()``/``close()`` only). Raises ``LockedError`` while another
    writer has the index open. ``log_recovery``: what to do when a log holds less than the
    manifest recorded as acknowledged (a cut, damaged or missing log: disk damage or a bad copy,
    never a crash): ``"strict"`` raises ``CorruptError`` naming the log and the operations lost;
    ``"point_in_time"`` opens with everything before the loss and reports it in
    ``stats()["lost"]`` and ``stats()["lost_ops"]``. ``expire_after`` (``"30d"``, seconds or a
    ``datetime.timedelta``): the expiry window of a new index, pinned in it: a pair stored longer
    ago than the window plus its granularity (at most an eighth of it; ``stats()`` has both and
    the oldest live slice's start) never matches again, and compaction drops it; an existing
    index keeps its own (another window raises ValueError; ``None`` takes the index's). The
    window is read from the system's wall clock; a clock set back never expires anything early.
    A directory that is not an index and holds other files is refused (``simdex.Error``)
    unless ``create_in_nonempty=True``. Use it as a context manager, or call ``close()``.
    """

    def add(self, fp: int, doc_id: int) -> int:
        """Deprecated name of ``insert``."""
        _deprecated("Index.add", "Index.insert")
        return self.insert(fp, doc_id)

    def add_document(self, data: Union[str, bytes], doc_id: int, html: Optional[bool] = None) -> int:
        """Deprecated name of ``insert_document``."""
        _deprecated("Index.add_document", "Index.insert_document")
        return self.insert_document(data, doc_id, html=html)

    def add_many(self, fps: Iterable[int], doc_ids: Optional[Iterable[int]] = None) -> int:
        """Deprecated name of ``insert_many``."""
        _deprecated("Index.add_many", "Index.insert_many")
        return self.insert_many(fps, doc_ids)

    def insert_many(self, fps: Iterable[int], doc_ids: Optional[Iterable[int]] = None) -> int:
        """Inserts many pairs (numpy uint64 arrays or sequences of ints); without ``doc_ids``
        every fingerprint gets its insert's sequence number as id. Returns the count."""
        f = _u64_bytes(fps, "fps")
        ids = None if doc_ids is None else _u64_bytes(doc_ids, "doc_ids")
        if ids is not None and len(ids) != len(f):
            raise ValueError(f"fps and doc_ids differ in length ({len(f) // 8} and {len(ids) // 8})")
        return self._insert_many(f, ids)

    def find_or_insert_document(
        self, data: Union[str, bytes], doc_id: int, k: Optional[int] = None, html: Optional[bool] = None, min_words: Optional[int] = None, confirm: bool = True, verify: Optional[bool] = None
    ) -> Tuple[int, List[DocumentMatch], int]:
        """Fingerprints a document with the index's recipe (pinning the default one if none) and
        checks-then-adds it atomically: ``(fingerprint, matches, words)``, the matches
        (``DocumentMatch``, with the sketches' similarity estimate) when near-duplicates are
        stored (nothing inserted), else ``[]`` after inserting. ``k`` defaults to
        ``DEFAULT_CONFIRMED_K`` (8) with confirmation and ``DEFAULT_UNCONFIRMED_K`` (3) without
        (the library's ``DocumentQuery`` decides, for every front: ``simdex.DocumentQuery(k,
        confirm)`` says how). In an index with sketches a stored document within ``k`` is a
        match only when the sketches estimate a resemblance of at least
        ``DEFAULT_MIN_SIMILARITY`` (0.90), and one beyond ``k`` whose sketch shares a band with
        the document's when they estimate at least 0.9167 (``confirm=False``: fingerprints alone; ``verify`` is
        the deprecated name of ``confirm``: it warns, DeprecationWarning). A str is text, bytes an HTML page (``html``
        overrides). Raises EmptyDocumentError for a document with fewer words than the recipe's
        minimum or ``min_words``, BinaryDocumentError for a binary one (nothing stored)."""
        if verify is not None:
            _deprecated_keyword("Index.find_or_insert_document", "verify", "confirm")
            confirm = verify
        return _document_answer(super().find_or_insert_document(data, doc_id, k=k, html=html, min_words=min_words, confirm=confirm))

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
        it stay stored, and the exception says how far it got: ``done`` items were done, as
        ``results`` (their items) says; the rest were not."""
        ids = _u64_bytes(doc_ids, "doc_ids")
        items = lambda out: [a if isinstance(a, BaseException) else _document_answer(a) for a in out]  # noqa: E731
        try:
            return items(self._find_or_insert_documents(list(docs), ids, k, html, min_words, confirm))
        except Error as e:
            if hasattr(e, "results"):
                e.results = items(e.results)
            raise


# the client of `simdex serve` (imported last: it uses the helpers above)
from .client import Client, OutcomeUnknownError, ServerUnavailableError  # noqa: E402
