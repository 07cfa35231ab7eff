"""Documents by id: a page that changes under its URL replaces its old version (one log
record), through simdex.Index and simdex.Client, against a model map of id -> fingerprint;
a process killed with SIGKILL while it replaces pages leaves each page's old version or its
new one, never both or neither."""

import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

import simdex
from test_client import Server


def page(n):
    rng = random.Random(n)
    return " ".join(f"w{rng.randrange(50_000)}" for _ in range(60))


def changed_100_times(index):
    """Drives `index` (Index or Client): a neighbour, and one URL whose page changes 100 times."""
    url = simdex.doc_id("https://example.com/news")
    assert index.find_or_replace_document(page(10**6), 5)[1] == "inserted"
    held = None
    for version in range(101):
        fp, outcome, matches, previous = index.find_or_replace_document(page(version), url)
        if held is None:
            assert (outcome, matches, previous) == ("inserted", [], [])
        else:
            assert (outcome, previous) == ("replaced", [held]), version
        held = fp
        # fetched again unchanged: a revisit, its own stored version among the matches
        again = index.find_or_replace_document(page(version), url)
        assert again[1] == "unchanged" and any(m.doc_id == url for m in again[2]), again
        assert index.fingerprints_of(url) == [fp]
        if version % 40 == 39:
            index.compact()
    live = index.live_entries()
    assert len(live) == 2, live
    assert [f for f, i in live if i == url] == [held]
    # a near-duplicate of the neighbour under a new id is found and stores nothing
    fp, outcome, matches, previous = index.find_or_replace_document(page(10**6), 6)
    assert (outcome, matches[0].doc_id, previous) == ("found", 5, [])
    assert index.fingerprints_of(6) == []
    # the fingerprint-level calls
    assert index.find_or_replace(1 << 40, 6)[0] == "inserted"
    assert index.find_or_replace((1 << 40) | 1, 6)[0] == "unchanged"
    assert index.replace(99, 6) == [1 << 40]
    assert index.fingerprints_of(6) == [99]


def test_a_page_changed_100_times_leaves_one_entry_in_an_index(tmp_path):
    with simdex.Index(str(tmp_path / "idx")) as index:
        changed_100_times(index)


def test_a_page_changed_100_times_leaves_one_entry_through_a_server(tmp_path):
    server = Server(tmp_path / "served")
    try:
        with simdex.Client(server.url) as client:
            changed_100_times(client)
    finally:
        server.stop()


REPLACER = textwrap.dedent(
    """
    import sys, simdex
    idx = simdex.Index(sys.argv[1], durability="nosync")
    version = {}
    n = 0
    while True:
        page = n % 50
        v = version.get(page, 0) + 1
        idx.replace(page * 1_000_003 + v * 7_919, page)
        version[page] = v
        n += 1
        print(page, v, flush=True)
    """
)


def test_sigkill_while_replacing_keeps_each_pages_old_or_new_version(tmp_path):
    path = str(tmp_path / "idx")
    with simdex.Index(path) as idx:
        for page in range(50):
            idx.replace(page * 1_000_003, page)
    acked = {page: 0 for page in range(50)}
    for round in range(3):
        p = subprocess.Popen([sys.executable, "-c", REPLACER, path], stdout=subprocess.PIPE, text=True)
        # kill once the writer has acknowledged enough replaces (progress, not a duration)
        seen = 0
        while seen < 500 + 700 * round:
            line = p.stdout.readline()
            assert line, f"the writer died after {seen} replaces: exit {p.poll()}"
            page, v = map(int, line.split())
            acked[page] = v
            seen += 1
        os.kill(p.pid, signal.SIGKILL)
        # what it printed before the kill landed was acknowledged too: at most the one
        # replace after its last line was in flight
        for line in p.stdout:
            if not line.endswith("\n"):
                break  # cut short by the kill (PYTHONUNBUFFERED writes a line in pieces): in flight
            page, v = map(int, line.split())
            acked[page] = v
        p.wait()
        with simdex.Index(path) as idx:
            for page in range(50):
                held = idx.fingerprints_of(page)
                old, new = page * 1_000_003 + acked[page] * 7_919, page * 1_000_003 + (acked[page] + 1) * 7_919
                assert held in ([old], [new]), (round, page, acked[page], held)
            assert len(idx.live_entries()) == 50
        # the next round's writer starts its versions again from 1: start from a clean slate
        with simdex.Index(path) as idx:
            for page in range(50):
                idx.replace(page * 1_000_003, page)
        acked = {page: 0 for page in range(50)}
