"""simdex: an embeddable on-disk index of 64-bit simhash fingerprints.

>>> import simdex
>>> with simdex.Index("pages.idx") as idx:            # created if missing
...     fp = idx.add_document(b"<p>some page ...</p>", doc_id=1)
...     idx.find_or_insert(fp ^ 1, doc_id=2)         # a near-duplicate: the matches
[(fp, 1, 1)]

Fingerprints and document ids are unsigned 64-bit integers. Document fingerprints are made
with the index's pinned recipe (``Index.recipe``), so they are comparable across runs and
processes. ``simdex.scrapy`` holds the Scrapy middleware and item pipeline.
"""

from __future__ import annotations

import array
import sys
from typing import Any, Iterable, Optional

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
