"""The shapes the package's answers take (``DocumentMatch``, ``MatchColumns``) and the
conversions ``simdex.Index`` and ``simdex.Client`` share (u64 columns in, matches out): one
module both import, so neither imports the other."""

from __future__ import annotations

import array
import sys
import warnings
from typing import Any, List, NamedTuple, Optional, Tuple


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


def _deprecated(old: str, new: str) -> None:
    """Warns once per call site that ``old`` is the old name (one word per
    concept: the index's writes are inserts) of ``new``."""
    warnings.warn(f"{old} is deprecated: use {new} (the same call)", DeprecationWarning, stacklevel=3)


def _deprecated_keyword(call: str, old: str, new: str) -> None:
    """Warns once per call site that ``call``'s keyword ``old`` is the old name
    of ``new`` (``verify`` checked nothing: it confirms candidates by sketch)."""
    warnings.warn(f"{call}({old}=...) is deprecated: use {new}=... (the same meaning)", DeprecationWarning, stacklevel=3)
