"""What every Spark step shares: naming and timing the steps, a test hook, Arrow buffers.

Every step is a pure function of its input rows (no randomness, no clock), so a task that
Spark runs again gives the same rows and writes the same part files.
"""

from __future__ import annotations

import contextlib
import time

SIGN = -(1 << 63)  # XOR with it orders signed longs as unsigned fingerprints


# (step, seconds) of every step run in this process, in order (the commands print them)
STEP_SECONDS: list = []


@contextlib.contextmanager
def step(sc, name: str):
    """Names the jobs (and their stages, through the call site) Spark runs in ``name``, and
    times it (``STEP_SECONDS``)."""
    sc.setJobGroup("simdex dedup", f"simdex dedup: {name}")
    sc.setLocalProperty("callSite.short", f"simdex: {name}")
    sc.setLocalProperty("callSite.long", f"simdex.spark step: {name}")
    started = time.monotonic()
    try:
        yield
    finally:
        STEP_SECONDS.append((name, time.monotonic() - started))
        sc.setLocalProperty("callSite.short", None)
        sc.setLocalProperty("callSite.long", None)


def _fail_first_attempt(where: str) -> None:
    """Test hook: the local property ``simdex.test.fail_first_attempt`` naming this step (a
    comma-separated list) makes each of its tasks fail on its first attempt (Spark then runs it
    again)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is not None and where in (ctx.getLocalProperty("simdex.test.fail_first_attempt") or "").split(",") and ctx.attemptNumber() == 0:
        raise RuntimeError(f"simdex test hook: first attempt of a {where} task fails")


def arrow_buffers(col) -> tuple:
    """``(data, offsets)`` of an Arrow string or binary column without nulls, the offsets
    from 0 (i32s): what the library's column calls read."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, col.buffers()[1]], offset=col.offset) if n else pa.array([0], pa.int32())
    base, end = offsets[0].as_py(), offsets[n].as_py()
    data = col.buffers()[2].slice(base, end - base).to_pybytes() if n and end > base else b""
    rebased = pc.subtract(offsets, pa.scalar(base, pa.int32())) if base else offsets
    return data, rebased.buffers()[1].slice(rebased.offset * 4, (n + 1) * 4).to_pybytes()


def _u64s(col) -> bytes:
    """The little-endian bytes of an int64 Arrow column without nulls."""
    if len(col) == 0:
        return b""
    return col.buffers()[1].slice(col.offset * 8, len(col) * 8).to_pybytes()


def _int64(buf):
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int64(), len(buf) // 8, [None, pa.py_buffer(buf)])
