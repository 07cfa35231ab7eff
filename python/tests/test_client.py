"""simdex.Client against a real `simdex serve` on 127.0.0.1 (port 0, read back): the same
calls through the client and through an in-process simdex.Index (the oracle) give the same
answers and raise the same exception classes; tokens; atomicity across clients; two Scrapy
processes sharing one index through SIMDEX_URL."""

import os
import pathlib
import random
import subprocess
import threading

import pytest

import simdex

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXE = os.environ.get("SIMDEX") or str(ROOT / "target" / "debug" / "simdex")


class Server:
    """`simdex serve DIR --listen 127.0.0.1:0 ARGS`, its URL read from its first line."""

    def __init__(self, directory, *args):
        self.proc = subprocess.Popen([EXE, "serve", str(directory), "--listen", "127.0.0.1:0", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise AssertionError(f"the server did not start: {line!r} {self.proc.stderr.read()[-2000:]}")
        self.url = line.split()[-1]

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=30) == 0, self.proc.stderr.read()[-2000:]


@pytest.fixture
def served(tmp_path):
    s = Server(tmp_path / "served")
    yield s
    s.stop()


def words(rng, n):
    return " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "lambda", "zeta"]) + str(rng.randrange(40)) for _ in range(n))


def test_the_client_answers_as_the_index_does(served, tmp_path):
    rng = random.Random(5)
    base = [rng.getrandbits(64) for _ in range(300)]
    fps = base + [f ^ (1 << rng.randrange(64)) for f in base[:100]] + base[:20]
    ids = list(range(1, len(fps) + 1))
    docs = [words(rng, 80) for _ in range(20)]
    docs += [d.replace("alpha", "alpha0", 1) for d in docs[:5]] + ["too short", b"<html><body><p>" + docs[0].encode() + b"</p></body></html>", b"\x00\x01binary" * 20]
    with simdex.Index(tmp_path / "local") as local, simdex.Client(served.url) as remote:
        for idx in (local, remote):
            assert idx.k == 3 and idx.sketches is True and idx.recipe is None
        answers = []
        for idx in (local, remote):
            got = []
            got.append([idx.find_or_insert(f, i) for f, i in zip(fps[:150], ids[:150])])
            got.append(idx.find_or_insert_many(fps[150:], ids[150:]))
            got.append(idx.query_many(fps, k=4))
            cols = idx.query_many(fps[:50], columnar=True)
            got.append([c.tolist() for c in cols])
            got.append([idx.query(f, k=5) for f in fps[:40]])
            got.append(idx.insert(123, 99999))
            got.append(idx.insert_many([7, 8, 9], [1, 2, 3]))
            got.append(idx.delete(fps[0], 1))
            got.append(idx.query(fps[0], k=0))
            got.append(idx.find_or_insert_documents(docs, list(range(10**6, 10**6 + len(docs)))))
            got.append(idx.find_or_insert_document(docs[3], 5, k=8))
            got.append(idx.find_or_insert_document(docs[3], 5, confirm=False))
            got.append(idx.fingerprint_document(docs[7]))
            got.append(idx.insert_document(words(rng.__class__(9), 60), 77))
            got.append(idx.fingerprint_documents(docs[:10]).tolist())
            got.append(idx.recipe)
            answers.append(got)
        local_answers, remote_answers = answers
        for n, (a, b) in enumerate(zip(local_answers, remote_answers)):
            if n == 9:
                # a refused document is its exception, of the same class and message
                assert [type(x) for x in a] == [type(x) for x in b], n
                assert [x if isinstance(x, tuple) else str(x) for x in a] == [x if isinstance(x, tuple) else str(x) for x in b]
            else:
                assert a == b, f"call {n} differs"
        assert sum(isinstance(x, simdex.EmptyDocumentError) for x in local_answers[9]) == 1
        assert sum(isinstance(x, simdex.BinaryDocumentError) for x in local_answers[9]) == 1
        ls, rs = local.stats(), remote.stats()
        for key in ("k", "segments", "segment_fingerprints", "memtable_inserts", "memtable_deletes", "last_seq", "recipe", "lost", "lost_ops"):
            assert ls[key] == rs[key], key
        # the same exception classes for the same causes
        for idx in (local, remote):
            with pytest.raises(simdex.EmptyDocumentError):
                idx.find_or_insert_document("two words", 1)
            with pytest.raises(ValueError):
                idx.query(1, k=40)
            with pytest.raises(ValueError):
                idx.find_or_insert_many([1, 2], [1])
            with pytest.raises(TypeError):
                idx.fingerprint_document(12)
        remote.sync()
        remote.flush()
        remote.compact()
        assert remote.stats()["segments"] == 1
        assert remote.query_many(fps, k=4) == local.query_many(fps, k=4)
        assert remote.live_entries() == local.live_entries() and len(local.live_entries()) > 300
        # every public method of Index is a method of Client
        missing = {m for m in dir(simdex.Index) if not m.startswith("_") and m not in dir(simdex.Client)}
        assert not missing, missing


def test_find_or_insert_is_atomic_across_clients(served):
    rng = random.Random(11)
    fps = [rng.getrandbits(64) for _ in range(200)]
    inserted = [0] * len(fps)
    lock = threading.Lock()

    def crawler(n):
        with simdex.Client(served.url) as c:
            for i, f in enumerate(fps):
                if c.find_or_insert(f, n * 1000 + i) == []:
                    with lock:
                        inserted[i] += 1

    threads = [threading.Thread(target=crawler, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert inserted == [1] * len(fps)
    with simdex.Client(served.url) as c:
        assert all(len(m) == 1 for m in c.query_many(fps, k=0))


def test_errors_name_the_url_and_tokens_are_required(tmp_path):
    with pytest.raises(simdex.ServerUnavailableError, match="http://127.0.0.1:9"):
        simdex.Client("http://127.0.0.1:9", retries=1).query(1)
    with pytest.raises(ValueError, match="http://HOST:PORT"):
        simdex.Client("127.0.0.1:7878")
    token = tmp_path / "token"
    token.write_text("a-token-of-some-length-42\n")
    s = Server(tmp_path / "idx", "--token-file", token)
    try:
        with pytest.raises(simdex.Error, match="Authorization") as e:
            simdex.Client(s.url).query(1)
        assert e.value.status == 401
        with pytest.raises(simdex.Error) as e:
            simdex.Client(s.url, token="a-token-of-some-length-43").insert(1, 1)
        assert e.value.status == 401
        with simdex.Client(s.url, token="a-token-of-some-length-42") as c:
            assert c.find_or_insert(5, 1) == [] and c.query(5) == [(5, 0, 1)]
    finally:
        s.stop()
    # the server refuses to listen beyond loopback without a token
    p = subprocess.run([EXE, "serve", str(tmp_path / "idx"), "--listen", "0.0.0.0:0"], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--token-file" in p.stderr and "0.0.0.0" in p.stderr


def test_a_read_only_server_refuses_writes_with_the_index_error_class(tmp_path):
    with simdex.Index(tmp_path / "idx") as idx:
        idx.insert(42, 1)
    s = Server(tmp_path / "idx", "--read-only")
    try:
        with simdex.Client(s.url) as c:
            assert c.query(42) == [(42, 0, 1)]
            with pytest.raises(simdex.Error, match="read-only") as e:
                c.insert(43, 2)
            assert e.value.status == 403
    finally:
        s.stop()


def test_two_scrapy_processes_share_one_index_through_simdex_url(tmp_path, site):
    pytest.importorskip("scrapy")
    from test_scrapy import PAIRS, UNIQUE, crawl

    base, urls = site
    server = Server(tmp_path / "shared")
    try:
        settings = {"SIMDEX_INDEX": None, "SIMDEX_URL": server.url, "SIMDEX_URLS": str(tmp_path / "urls.sqlite3")}
        results = {}

        def run(name):
            results[name] = crawl(base, urls, tmp_path / "unused", tmp_path / f"{name}.json", settings)

        crawlers = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
        for t in crawlers:
            t.start()
        for t in crawlers:
            t.join()
        assert set(results) == {"a", "b"}
        stats = [results[n][0] for n in ("a", "b")]
        # every page is stored once between the two processes; the other one sees it again
        assert sum(s.get("simdex/new", 0) for s in stats) == UNIQUE + PAIRS + 1, stats
        assert sum(s.get("simdex/near_duplicates", 0) for s in stats) >= PAIRS, stats
        for i in range(PAIRS):
            assert not ({f"pair-{i}-a.html", f"pair-{i}-b.html"} <= {u for n in ("a", "b") for u in _new(results[n][1])}), i
        with simdex.Client(server.url) as c:
            s = c.stats()
            assert s["segment_fingerprints"] + s["memtable_inserts"] - s["memtable_deletes"] == UNIQUE + PAIRS + 1
    finally:
        server.stop()


def _new(items):
    """The pages a crawl stored (passed on, and neither a revisit nor flagged otherwise)."""
    return {i["url"].rsplit("/", 1)[1] for i in items if (i.get("simdex") or {}).get("outcome") in ("new", "changed")}


from test_scrapy import site  # noqa: E402,F401  (the local site fixture)


def test_the_client_warns_of_verify_as_the_index_does(served, tmp_path):
    """``verify=`` is the deprecated name of ``confirm=`` in both fronts: the same answers,
    each with a DeprecationWarning naming the new keyword."""
    text = words(random.Random(9), 80)
    with simdex.Index(tmp_path / "local") as local, simdex.Client(served.url) as remote:
        for idx, name in ((local, "Index"), (remote, "Client")):
            idx.insert_document(text, 1)
            with pytest.warns(DeprecationWarning, match=rf"{name}.find_or_insert_document\(verify=...\) is deprecated: use confirm="):
                _, found, _ = idx.find_or_insert_document(text, 2, verify=False)
            assert [m[2] for m in found] == [1]
