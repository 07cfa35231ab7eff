"""A writer killed with SIGKILL loses nothing it was told was written."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import simdex

WRITER = textwrap.dedent(
    """
    import sys, simdex
    idx = simdex.Index(sys.argv[1], durability=sys.argv[2])
    i = 0
    while True:
        i += 1
        if i % 3 == 0:
            idx.insert_many([i * 7919 + j for j in range(3)], [i * 10 + j for j in range(3)])
        else:
            idx.insert(i * 7919, i * 10)
        print(i, flush=True)
    """
)


@pytest.mark.parametrize("durability", ["group", "sync", "nosync"])
def test_sigkill_loses_nothing_acknowledged(tmp_path, durability):
    path = tmp_path / "idx"
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(path), durability], stdout=subprocess.PIPE, text=True)
    acked = 0
    deadline = time.time() + 60
    while acked < 2000 and time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        acked = int(line)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert acked >= 2000, "the writer did not get going"
    with simdex.Index(path) as idx:
        live = set(idx.live_entries())
    for i in range(1, acked + 1):
        want = [(i * 7919 + j, i * 10 + j) for j in range(3)] if i % 3 == 0 else [(i * 7919, i * 10)]
        for pair in want:
            assert pair in live, (i, pair)


def test_a_cut_log_is_refused_or_opened_past_by_choice(tmp_path):
    """Issue 23: a log cut at a record boundary is loss, never silent."""
    path = tmp_path / "idx"
    idx = simdex.Index(str(path), durability="sync", sketches=False)
    for i in range(1, 101):
        idx.insert(i * 7919, i)
    idx.sync()
    # what a writer that was never closed leaves: copy the directory now
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    idx.close()
    # a writable open records the log it replayed in the manifest; dropped without close()
    # (close() would flush the log into a segment)
    reopened = simdex.Index(str(copy), durability="sync")
    del reopened
    log = next(p for p in copy.iterdir() if p.suffix == ".wal")
    size = os.path.getsize(log)
    with open(log, "r+b") as f:
        f.truncate(size - 40 * 44)  # the last 40 one-pair records
    with pytest.raises(simdex.CorruptError, match="40 acknowledged operations in all"):
        simdex.Index(str(copy))
    with pytest.raises(ValueError, match="log_recovery"):
        simdex.Index(str(copy), log_recovery="maybe")
    past = simdex.Index(str(copy), log_recovery="point_in_time")
    stats = past.stats()
    assert stats["lost_ops"] == 40 and len(stats["lost"]) == 1
    assert len(past.live_entries()) == 60
    past.close()
