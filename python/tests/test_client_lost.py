"""simdex.Client when an answer is lost (issue 37): a proxy between the client and a real
`simdex serve` forwards a request, reads the server's answer and closes the client's
connection instead of passing it on, the way a server killed after doing a write looks.
Every write call raises OutcomeUnknownError and the server did it exactly once (its
last_seq moved by the call's operations, no more); reads are sent again and answer; a
connection the server (or the proxy) closed while idle is replaced before a write is sent
on it; the Scrapy middleware finds a lost answer's outcome by a query, never storing a page
twice or dropping it as a duplicate of itself."""

import re
import socket
import threading
import time

import pytest

import simdex
from test_client import Server


class DroppingProxy:
    """Forwards connections to ``target`` (host, port). ``drop(n)``: the next n answers are
    read from the server and not passed on, the client's connection closed instead;
    ``drop_op(op, every)``: so is the answer to the first request of every ``every``-th
    document id that ``op`` is sent (a repeat for the same id is answered);
    ``close_idle()``: closes every client connection not waiting for an answer."""

    def __init__(self, target):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Lock()
        self.to_drop = 0
        self.op, self.every, self.ids = None, 0, set()
        self.dropped = 0
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def drop(self, n=1):
        with self.lock:
            self.to_drop += n

    def drop_op(self, op, every):
        with self.lock:
            self.op, self.every, self.ids = op, every, set()

    def close_idle(self):
        with self.lock:
            conns, self.conns = self.conns, []
        for c in conns:
            if not c["waiting"]:
                for s in (c["client"], c["server"]):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    s.close()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            c = {"client": client, "server": server, "waiting": False, "request": b""}
            with self.lock:
                self.conns.append(c)
            threading.Thread(target=self._requests, args=(c,), daemon=True).start()
            threading.Thread(target=self._answers, args=(c,), daemon=True).start()

    def _requests(self, c):
        while True:
            try:
                data = c["client"].recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                try:
                    c["server"].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            with self.lock:
                if re.match(rb"(?:GET|POST) /", data):
                    c["waiting"], c["request"] = True, data
                else:
                    c["request"] += data
            try:
                c["server"].sendall(data)
            except OSError:
                return

    def _drops(self, request):
        """Whether the answer to ``request`` (the whole of it, forwarded) is dropped."""
        if self.to_drop > 0:
            self.to_drop -= 1
            return True
        m = re.match(rb"(?:GET|POST) /v1/(\w+)", request)
        doc = re.search(rb'"doc_id": (\d+)', request)
        if self.op is None or not m or m.group(1).decode() != self.op or not doc or doc.group(1) in self.ids:
            return False
        self.ids.add(doc.group(1))
        return len(self.ids) % self.every == 0

    def _answers(self, c):
        while True:
            try:
                data = c["server"].recv(1 << 16)
            except OSError:
                data = b""
            with self.lock:
                drop = bool(data) and c["waiting"] and self._drops(c["request"])
                c["waiting"] = False
                if drop:
                    self.dropped += 1
            if drop:
                # the server answered (so it did the request): the client never hears of it
                for s in (c["client"], c["server"]):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    s.close()
                return
            if not data:
                try:
                    c["client"].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            try:
                c["client"].sendall(data)
            except OSError:
                return


def target(url):
    host, port = url.rsplit("//", 1)[1].rsplit(":", 1)
    return host, int(port)


@pytest.fixture
def proxied(tmp_path):
    s = Server(tmp_path / "served")
    proxy = DroppingProxy(target(s.url))
    yield s, proxy
    s.stop()


def doc(n):
    return " ".join(f"word{(n * 7919 + i * 104729) % 5000} term{i % 97}" for i in range(120))


def test_every_write_whose_answer_is_lost_raises_outcome_unknown_and_was_done_once(proxied):
    server, proxy = proxied
    direct = simdex.Client(server.url)
    c = simdex.Client(proxy.url)
    fps = [0x1111_0000_0000_0000 + i * 0x0101_0101_0101 for i in range(40)]
    c.insert(fps[0], 1)  # the connection is open and kept alive: the next call reuses it
    writes = [
        ("insert", 1, lambda: c.insert(fps[1], 2)),
        ("insert_many with ids", 3, lambda: c.insert_many(fps[2:5], [3, 4, 5])),
        ("insert_many without ids", 4, lambda: c.insert_many(fps[5:9])),
        ("find_or_insert", 1, lambda: c.find_or_insert(fps[9], 10)),
        ("find_or_insert_many", 5, lambda: c.find_or_insert_many(fps[10:15], list(range(11, 16)))),
        ("delete", 1, lambda: c.delete(fps[0], 1)),
        ("insert_document", 1, lambda: c.insert_document(doc(1), 101)),
        ("find_or_insert_document", 1, lambda: c.find_or_insert_document(doc(2), 102)),
        ("find_or_insert_documents", 3, lambda: c.find_or_insert_documents([doc(3), doc(4), doc(5)], [103, 104, 105])),
    ]
    for name, ops, call in writes:
        before = direct.stats()["last_seq"]
        proxy.drop()
        with pytest.raises(simdex.OutcomeUnknownError, match="may or may not have done it") as e:
            call()
        assert isinstance(e.value, simdex.ServerUnavailableError)
        assert e.value.op == name.split()[0], (name, e.value.op)
        assert direct.stats()["last_seq"] - before == ops, f"{name}: the server did it once, and was not sent it again"
        # the client goes on, on a new connection
        assert c.query(fps[1], k=0) == [(fps[1], 0, 2)]
    assert proxy.dropped == len(writes)
    # the pairs of the lost find_or_insert are stored once: a repeat would have answered
    # "found" with the caller's own pair
    assert direct.query(fps[9], k=0) == [(fps[9], 0, 10)]
    assert [m for f in fps[10:15] for m in direct.query(f, k=0)] == [(f, 0, i) for f, i in zip(fps[10:15], range(11, 16))]
    direct.close()
    c.close()


def test_reads_whose_answer_is_lost_are_sent_again(proxied):
    server, proxy = proxied
    with simdex.Client(server.url) as direct, simdex.Client(proxy.url) as c:
        direct.insert_many([5, 6, 7], [50, 60, 70])
        c.stats()
        reads = [
            (lambda: c.query(5, k=0), [(5, 0, 50)]),
            (lambda: c.query_many([6, 7], k=0), [[(6, 0, 60)], [(7, 0, 70)]]),
            (lambda: c.stats()["last_seq"], 3),
            (lambda: c.fingerprint_document(doc(9)), direct.fingerprint_document(doc(9))),
            (lambda: c.live_entries(), [(5, 50), (6, 60), (7, 70)]),
        ]
        for call, expected in reads:
            proxy.drop()
            assert call() == expected
        assert proxy.dropped == len(reads)


def test_connections_closed_while_idle_are_replaced_before_a_write_is_sent(tmp_path):
    # the server closes idle connections after --header-timeout, and says so in Keep-Alive
    server = Server(tmp_path / "idle", "--header-timeout", "1")
    try:
        far = [0x0123_4567_89AB_CDEF * (n + 1) % (1 << 64) for n in range(5)]
        with simdex.Client(server.url) as c:
            assert c.find_or_insert(far[1], 1) == []
            for n in range(2, 5):
                time.sleep(1.2)  # past the server's idle timeout: it closed the connection
                before = c.stats()["last_seq"]
                time.sleep(0.6)  # past half of it: the client does not risk the connection
                assert c.find_or_insert(far[n], n) == []
                assert c.stats()["last_seq"] == before + 1
        # a connection closed by someone else while idle (a proxy, a restarted server) is
        # found closed before the write goes out
        proxy = DroppingProxy(target(server.url))
        with simdex.Client(proxy.url) as c:
            c.insert(100, 1)
            before = c.stats()["last_seq"]
            for i in range(3):
                proxy.close_idle()
                time.sleep(0.05)
                assert c.insert(101 + i, 1) == before + 1 + i
    finally:
        server.stop()


def test_the_scrapy_middleware_finds_out_a_lost_answer_by_a_query(tmp_path, site):
    pytest.importorskip("scrapy")
    from test_scrapy import PAIRS, UNIQUE, crawl

    base, urls = site
    server = Server(tmp_path / "shared")
    proxy = DroppingProxy(target(server.url))
    proxy.drop_op("find_or_replace_document", 2)  # every second page's answer is lost
    try:
        settings = {"SIMDEX_INDEX": None, "SIMDEX_URL": proxy.url}
        stats, items, _log = crawl(base, urls, tmp_path / "unused", tmp_path / "crawl.json", settings)
        assert proxy.dropped >= 4, proxy.dropped
        assert stats.get("simdex/answers_lost", 0) == proxy.dropped, stats
        # every page stored once, none taken for a duplicate of itself
        assert stats.get("simdex/new", 0) == UNIQUE + PAIRS + 1, stats
        assert stats.get("simdex/near_duplicates", 0) >= PAIRS, stats
        assert stats.get("simdex/revisit", 0) == 0, stats
        with simdex.Client(server.url) as c:
            s = c.stats()
            assert s["segment_fingerprints"] + s["memtable_inserts"] - s["memtable_deletes"] == UNIQUE + PAIRS + 1
    finally:
        server.stop()


from test_scrapy import site  # noqa: E402,F401  (the local site fixture)


def test_a_batch_stopped_by_a_full_disk_says_how_far_it_got():
    # a stand-in server answering as `simdex serve` does when find_or_insert_many meets a full
    # disk after 2 items: the client raises the 507 with the items done and their matches
    import http.server

    calls = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            calls.append(self.path)
            body = b'{"error": {"kind": "no_space", "message": "No space left on device", "done": 2, "matches": [[], [[7, 1, 70]]]}}'
            self.send_response(507)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", "5")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with simdex.Client(f"http://127.0.0.1:{server.server_address[1]}") as c:
            with pytest.raises(simdex.Error, match="No space left") as e:
                c.find_or_insert_many([5, 6, 7], [50, 60, 70])
        assert (e.value.status, e.value.kind, e.value.done, e.value.matches) == (507, "no_space", 2, [[], [(7, 1, 70)]])
        assert calls == ["/v1/find_or_insert_many"], "a 507 is not sent again"
    finally:
        server.shutdown()
