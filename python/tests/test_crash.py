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
            idx.add_many([i * 7919 + j for j in range(3)], [i * 10 + j for j in range(3)])
        else:
            idx.add(i * 7919, i * 10)
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
