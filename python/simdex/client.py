"""``simdex.Client``: an index served by ``simdex serve``, with ``simdex.Index``'s API.

>>> import simdex
>>> with simdex.Client("http://127.0.0.1:7878") as idx:      # token="..." beyond loopback
...     idx.find_or_insert(0x1234, doc_id=1)
[]

Code written for ``Index`` runs against ``Client``: the same methods, arguments, return
values and exception classes (``EmptyDocumentError``, ``RecipeMismatchError``,
``CorruptError``, ``ValueError`` for bad arguments, ``Error`` for the rest), so several
processes and machines share one index through one server. The protocol is
``format-spec/protocol.md``.

Connections: one keep-alive HTTP/1.1 connection per thread (no third-party package), so a
client may be shared by threads: for ``http://`` a plain socket that sends each request in
one write and reads the answer's head with a minimal parser (``http.client`` cost about 150 us
of the caller's CPU per call, several times the server's work for one fingerprint);
``https://`` URLs (a TLS proxy in front of the server) go through ``http.client``.

Failures: a server that cannot be reached raises ``ServerUnavailableError`` (an ``Error`` and
a ``ConnectionError``) naming the URL; a request without an answer within ``timeout`` seconds
raises it too. Every call is retried, up to ``retries`` times with the server's
``Retry-After``, when the server refused it without doing anything (503: overloaded,
starting, recovering after a failed write) or when the connection failed before the request
was sent. Calls that are safe to repeat (queries, fingerprinting, ``stats``, ``sync``,
``flush``, ``compact``) are also retried when the connection broke after the request was
sent. A write (``add``, ``find_or_insert``, ``delete``, the document writes and their
batches) is never sent twice: when its answer is lost (the connection broke after the
request was sent, or no answer came within ``timeout``) the server may have done it or not,
and ``OutcomeUnknownError`` (a ``ServerUnavailableError``) says so, for the caller to find
out (a query tells whether the pair is stored) rather than a repeat answering "found" with
the caller's own pair. Keep-alive connections the server closes while idle are not mistaken
for that: the server says how long it keeps an idle connection (``Keep-Alive: timeout=N``),
and a connection idle for about that long, or found closed, is replaced before a request is
sent on it.
"""

from __future__ import annotations

import base64
import http.client
import json
import select
import socket
import sys
import threading
import time
from array import array
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union
from urllib.parse import urlsplit

from ._simdex import BinaryDocumentError, CorruptError, EmptyDocumentError, Error, RecipeMismatchError
from ._types import DocumentMatch, MatchColumns, _deprecated, _deprecated_keyword, _numpy, _u64_bytes

__all__ = ["Client", "OutcomeUnknownError", "ServerUnavailableError"]

_BINARY = "application/octet-stream"


class ServerUnavailableError(Error, ConnectionError):
    """The server could not be reached, or gave no answer in time (the message names the URL)."""


class OutcomeUnknownError(ServerUnavailableError):
    """A write's answer was lost (the connection broke after the request was sent, or no
    answer came in time): the server may have done it or not. Never retried by the client,
    since a repeat could store a batch twice, or answer a ``find_or_insert`` with the
    caller's own pair; a query tells whether the write is stored. ``op`` names the call."""

    op: str = ""


_ERRORS = {
    "empty_document": EmptyDocumentError,
    "binary_document": BinaryDocumentError,
    "recipe_mismatch": RecipeMismatchError,
    "corrupt": CorruptError,
    "bad_request": ValueError,
    "invalid_argument": ValueError,
}


def _error(kind: str, message: str, status: int) -> BaseException:
    e = _ERRORS.get(kind, Error)(message)
    e.status = status  # type: ignore[attr-defined]
    e.kind = kind  # type: ignore[attr-defined]
    return e


class _Answer:
    """An answer read by ``_PlainConnection`` (the part of ``http.client.HTTPResponse`` used here)."""

    __slots__ = ("status", "reason", "headers", "will_close", "data")

    def __init__(self, status: int, reason: str, headers: Dict[str, str], will_close: bool, data: bytes) -> None:
        self.status, self.reason, self.headers, self.will_close, self.data = status, reason, headers, will_close, data

    def getheader(self, name: str, default: Optional[str] = None) -> Optional[str]:
        return self.headers.get(name.lower(), default)

    def read(self) -> bytes:
        return self.data


class _PlainConnection:
    """A keep-alive HTTP/1.1 connection over a plain socket, with ``http.client``'s interface
    and exceptions for what ``Client`` uses: ``request`` (one ``sendall`` of head and body,
    TCP_NODELAY), ``getresponse`` (status line, headers, a body by Content-Length, chunks or
    until close) and ``close``."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        name = f"[{host}]" if ":" in host else host
        self._host = (name if port == 80 else f"{name}:{port}").encode("ascii")
        self.sock: Optional[socket.socket] = None
        self._file: Any = None

    def request(self, method: str, path: str, body: bytes, headers: Dict[str, str]) -> None:
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        if head.count("\n") != len(headers) or head.count("\r") != len(headers):
            raise ValueError(f"invalid header value (a line break) in {list(headers)}")  # as http.client
        if self.sock is None:
            sock = socket.create_connection((self.host, self.port), self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock, self._file = sock, sock.makefile("rb")
        self.sock.sendall(b"%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n%s\r\n" % (method.encode(), path.encode(), self._host, len(body), head.encode("latin-1")) + body)

    def _line(self) -> bytes:
        line = self._file.readline(65537)
        if len(line) > 65536:
            raise http.client.LineTooLong("header line")
        return line

    def getresponse(self) -> _Answer:
        if self._file is None:
            raise http.client.ResponseNotReady("no request sent")
        line = self._line()
        if not line:
            raise http.client.RemoteDisconnected("Remote end closed connection without response")
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise http.client.BadStatusLine(str(line))
        headers: Dict[str, str] = {}
        while True:
            h = self._line()
            if h in (b"\r\n", b"\n"):
                break
            if not h:
                raise http.client.RemoteDisconnected("Remote end closed connection within the answer's head")
            k, _, v = h.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        status, conn = int(parts[1]), headers.get("connection", "").lower()
        will_close = conn == "close" or (parts[0] == b"HTTP/1.0" and conn != "keep-alive")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks = []
            while True:
                try:
                    size = int(self._line().split(b";", 1)[0], 16)
                except ValueError:
                    raise http.client.IncompleteRead(b"".join(chunks)) from None
                if size == 0:
                    while self._line() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                chunks.append(self._exactly(size))
                self._line()
            data = b"".join(chunks)
        elif "content-length" in headers:
            data = self._exactly(int(headers["content-length"]))
        elif status in (204, 304) or 100 <= status < 200:
            data = b""
        else:
            data, will_close = self._file.read(), True
        return _Answer(status, parts[2].strip().decode("latin-1") if len(parts) > 2 else "", headers, will_close, data)

    def _exactly(self, n: int) -> bytes:
        data = self._file.read(n)
        if len(data) < n:
            raise http.client.IncompleteRead(data, n - len(data))
        return data

    def close(self) -> None:
        sock, f, self.sock, self._file = self.sock, self._file, None, None
        if f is not None:
            f.close()
        if sock is not None:
            sock.close()


class _Retry(Exception):
    def __init__(self, after: float, cause: BaseException) -> None:
        self.after = after
        self.cause = cause


def _document(data: Union[str, bytes], html: Optional[bool]) -> Dict[str, str]:
    """A document as the protocol carries it (a str is text, bytes an HTML page; ``html``
    overrides), as ``Index`` reads its ``data`` arguments."""
    if isinstance(data, str):
        return {"html" if html is True else "text": data}
    if isinstance(data, (bytes, bytearray, memoryview)):
        return {("text_base64" if html is False else "html_base64"): base64.b64encode(bytes(data)).decode("ascii")}
    raise TypeError("a document is a str (text) or bytes (an HTML page)")


def _matches(rows: List[List[Any]]) -> List[Tuple[int, int, Optional[int]]]:
    return [(r[0], r[1], r[2]) for r in rows]


def _grouped_json(items: List[List[List[Any]]]) -> List[List[Tuple[int, int, Optional[int]]]]:
    return [_matches(rows) for rows in items]


def _keep_alive_timeout(header: Optional[str]) -> Optional[float]:
    """The ``timeout=N`` of a ``Keep-Alive`` header: seconds the server keeps an idle connection."""
    for part in (header or "").split(","):
        name, _, value = part.strip().partition("=")
        if name.strip().lower() == "timeout":
            try:
                return float(value)
            except ValueError:
                return None
    return None


def _stale(conn: Any, idle_since: float, keep_alive: Optional[float]) -> bool:
    """True when a kept-alive connection should not carry another request: idle for about as
    long as the server keeps one (it may close it while the request travels), or closed by
    the server already (its end of file, or anything else, is waiting to be read)."""
    if keep_alive is not None and time.monotonic() - idle_since >= max(keep_alive - 1.0, keep_alive / 2):
        return True
    sock = getattr(conn, "sock", None)
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class Client:
    """An index served by ``simdex serve`` at ``url``: ``Client(url, token=None, timeout=30.0, retries=5)``.

    ``token``: the server's bearer token (``--token-file``), needed beyond loopback.
    ``timeout``: seconds to wait for each answer. ``retries``: how many times a refused or
    failed call is tried again (see the module's docs for which calls are safe to repeat).
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 30.0, retries: int = 5) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r}: a server URL is http://HOST:PORT (or https:// through a TLS proxy)")
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout
        self.retries = retries
        self._local = threading.local()
        self._conns: List[Any] = []
        self._conns_lock = threading.Lock()
        self._closed = False
        self._info: Optional[Dict[str, Any]] = None

    # -- transport --------------------------------------------------------------------------

    def _connection(self) -> Tuple[Any, bool]:
        conn = getattr(self._local, "conn", None)
        if conn is not None and _stale(conn, getattr(self._local, "idle_since", 0.0), getattr(self._local, "keep_alive", None)):
            self._drop_connection()
            conn = None
        if conn is not None:
            return conn, True
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout)
        else:
            conn = _PlainConnection(self._host, self._port, self.timeout)
        self._local.conn = conn
        self._local.keep_alive = None
        with self._conns_lock:
            self._conns.append(conn)
        return conn, False

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def _call(self, op: str, body: Any = None, safe: bool = False, binary: Optional[bytes] = None, query: str = "", method: str = "POST") -> Any:
        """The answer of operation ``op`` (JSON decoded, or the bytes of a binary answer).
        ``safe``: the call may be sent again when its answer is lost (reads); a write whose
        answer is lost raises ``OutcomeUnknownError`` instead."""
        if self._closed:
            raise ValueError("the client is closed")
        if binary is not None:
            payload, ctype = binary, _BINARY
        else:
            payload, ctype = json.dumps(body if body is not None else {}).encode(), "application/json"
        path = f"{self._base}/v1/{op}" + (f"?{query}" if query else "")
        headers = dict(self._headers, **{"Content-Type": ctype})
        attempt = 0
        while True:
            try:
                return self._once(op, method, path, payload, headers, safe)
            except _Retry as r:
                attempt += 1
                if attempt > self.retries:
                    raise r.cause from None
                time.sleep(r.after)

    def _once(self, op: str, method: str, path: str, payload: bytes, headers: Dict[str, str], safe: bool) -> Any:
        conn, _reused = self._connection()
        sent = False
        try:
            conn.request(method, path, body=payload, headers=headers)
            # the whole request is in the socket's buffer: from here on the server may do it
            sent = True
            resp = conn.getresponse()
            data = resp.read()
        except (socket.timeout, TimeoutError) as e:
            self._drop_connection()
            if sent and not safe:
                raise self._unknown(op, f"no answer within {self.timeout} s ({e})") from None
            raise ServerUnavailableError(f"{self.url}: no answer within {self.timeout} s ({e})") from None
        except (http.client.HTTPException, OSError) as e:
            self._drop_connection()
            if safe or not sent:
                raise _Retry(0.0 if not sent else 0.2, self._unavailable(e)) from None
            raise self._unknown(op, f"the connection broke before the answer ({type(e).__name__}: {e})") from None
        if resp.will_close:
            self._drop_connection()
        else:
            self._local.idle_since = time.monotonic()
            if self._local.keep_alive is None:
                self._local.keep_alive = _keep_alive_timeout(resp.getheader("Keep-Alive"))
        if resp.status == 200:
            return data if resp.getheader("Content-Type", "").startswith(_BINARY) else json.loads(data)
        try:
            err = json.loads(data)["error"]
            kind, message = err["kind"], err["message"]
        except (ValueError, KeyError, TypeError):
            kind, message = "http", data.decode("utf-8", "replace")[:500] or resp.reason
            err = {}
        e = _error(kind, f"{self.url}: {message}", resp.status)
        if isinstance(err, dict) and "done" in err:
            e.done = err["done"]  # type: ignore[attr-defined]
            if "matches" in err:
                e.matches = _grouped_json(err["matches"])  # type: ignore[attr-defined]
            if "results" in err:
                e.results = [_error(r["error"]["kind"], r["error"]["message"], 422) if "error" in r else _answer(r) for r in err["results"]]  # type: ignore[attr-defined]
        if resp.status in (429, 503):
            raise _Retry(float(resp.getheader("Retry-After", "1") or 1), e)
        raise e

    def _unknown(self, op: str, why: str) -> OutcomeUnknownError:
        e = OutcomeUnknownError(f"{self.url}: {op}: the answer was lost ({why}); the server may or may not have done it, and it is not sent again")
        e.op = op
        return e

    def _unavailable(self, e: BaseException) -> ServerUnavailableError:
        return ServerUnavailableError(f"{self.url}: cannot reach the simdex server ({type(e).__name__}: {e})")

    # -- what the index is ------------------------------------------------------------------

    def _server_info(self) -> Dict[str, Any]:
        if self._info is None:
            self._info = self._call("info", safe=True)
        return self._info

    @property
    def k(self) -> int:
        """Largest query distance the index guarantees."""
        return int(self._server_info()["k"])

    @property
    def expire_after(self) -> Optional[int]:
        """The server's index's expiry window in seconds (fixed at creation), or None."""
        v = self._server_info().get("expire_after")
        return None if v is None else int(v)

    @property
    def sketches(self) -> bool:
        """True when the index stores a sketch per document."""
        return bool(self._server_info()["sketches"])

    @property
    def path(self) -> str:
        """The index directory, on the server's machine."""
        return str(self._server_info()["path"])

    @property
    def recipe(self) -> Optional[str]:
        """The pinned fingerprint recipe's descriptor, or None (asked each time: the first
        document call pins one)."""
        return self._call("info", safe=True)["recipe"]

    @property
    def closed(self) -> bool:
        return self._closed

    # -- fingerprints -------------------------------------------------------------------------

    def insert(self, fp: int, doc_id: int) -> int:
        """Inserts (fp, doc_id); returns its sequence number, once durable on the server.
        Never sent twice: a lost answer raises ``OutcomeUnknownError``."""
        return int(self._call("insert", {"fp": fp, "doc_id": doc_id})["seq"])

    def add(self, fp: int, doc_id: int) -> int:
        """Deprecated name of ``insert``."""
        _deprecated("Client.add", "Client.insert")
        return self.insert(fp, doc_id)

    def add_many(self, fps: Iterable[int], doc_ids: Optional[Iterable[int]] = None) -> int:
        """Deprecated name of ``insert_many``."""
        _deprecated("Client.add_many", "Client.insert_many")
        return self.insert_many(fps, doc_ids)

    def add_document(self, data: Union[str, bytes], doc_id: int, html: Optional[bool] = None) -> int:
        """Deprecated name of ``insert_document``."""
        _deprecated("Client.add_document", "Client.insert_document")
        return self.insert_document(data, doc_id, html=html)

    def insert_many(self, fps: Iterable[int], doc_ids: Optional[Iterable[int]] = None) -> int:
        """Inserts many pairs (numpy uint64 arrays or sequences of ints); without ``doc_ids`` every
        fingerprint gets its insert's sequence number as id. Returns the count. Never
        sent twice: a lost answer raises ``OutcomeUnknownError``. On a full disk the batch is
        stored whole or not at all (``Error`` with ``status`` 507)."""

        f = _u64_bytes(fps, "fps")
        if doc_ids is None:
            return int(self._call("insert_many", {"fps": list(memoryview(f).cast("B").cast("Q"))})["count"])
        ids = _u64_bytes(doc_ids, "doc_ids")
        if len(ids) != len(f):
            raise ValueError(f"fps and doc_ids differ in length ({len(f) // 8} and {len(ids) // 8})")
        return int(self._call("insert_many", binary=f + ids)["count"])

    def query(self, fp: int, k: Optional[int] = None) -> List[Tuple[int, int, Optional[int]]]:
        """Every stored (fingerprint, distance, doc_id) within k (default: the index's). Retried."""
        return _matches(self._call("query", {"fp": fp, "k": k}, safe=True)["matches"])

    def find_or_insert(self, fp: int, doc_id: int, k: Optional[int] = None) -> List[Tuple[int, int, Optional[int]]]:
        """Atomic check-then-add across every client of the server: the matches within k when
        there are any (nothing inserted), else inserts (fp, doc_id) and returns []. Never
        sent twice: a lost answer raises ``OutcomeUnknownError`` (``query(fp, k=0)`` then
        tells whether (fp, doc_id) is stored)."""
        return _matches(self._call("find_or_insert", {"fp": fp, "doc_id": doc_id, "k": k})["matches"])

    def delete(self, fp: int, doc_id: int) -> int:
        """Deletes (fp, doc_id): queries stop returning it. Never sent twice: a lost answer raises ``OutcomeUnknownError``."""
        return int(self._call("delete", {"fp": fp, "doc_id": doc_id})["seq"])

    def _grouped(self, raw: bytes, columnar: bool) -> Any:

        n, m = int.from_bytes(raw[0:8], "little"), int.from_bytes(raw[8:16], "little")
        cols = [raw[16 + i * 8 * m : 16 + (i + 1) * 8 * m] for i in range(3)]
        distances = raw[16 + 24 * m : 16 + 28 * m]
        if columnar:
            np = _numpy("columnar=True")
            return MatchColumns(
                np.frombuffer(cols[0], dtype="<u8").astype(np.int64),
                np.frombuffer(cols[1], dtype="<u8").astype(np.uint64),
                np.frombuffer(cols[2], dtype="<u8").astype(np.uint64),
                np.frombuffer(distances, dtype="<u4").astype(np.uint32),
            )
        items, fps, ids, dist = array("Q"), array("Q"), array("Q"), array("I")
        for a, b in ((items, cols[0]), (fps, cols[1]), (ids, cols[2]), (dist, distances)):
            a.frombytes(b)
            if sys.byteorder != "little":
                a.byteswap()
        out: List[List[Tuple[int, int, Optional[int]]]] = [[] for _ in range(n)]
        for i, f, d, x in zip(items, fps, dist, ids):
            out[i].append((f, d, x))
        return out

    def query_many(self, fps: Iterable[int], k: Optional[int] = None, columnar: bool = False) -> Any:
        """``query`` of every fingerprint, all answered over one snapshot on the server: per
        item its list of (fingerprint, distance, doc_id), or with ``columnar=True`` one
        ``MatchColumns``. Sent in the binary form. Retried."""

        raw = self._call("query_many", binary=_u64_bytes(fps, "fps"), query=f"k={k}" if k is not None else "", safe=True)
        return self._grouped(raw, columnar)

    def find_or_insert_many(self, fps: Iterable[int], doc_ids: Iterable[int], k: Optional[int] = None, columnar: bool = False) -> Any:
        """``find_or_insert`` of every (fps[i], doc_ids[i]) in order, as if called one by one:
        per item its matches, or [] when it was inserted (``columnar=True``: a
        ``MatchColumns``). Sent in the binary form. Never sent twice: a lost answer raises
        ``OutcomeUnknownError``. A batch the server stopped part-way (a full disk: ``Error``
        with ``status`` 507) says how far it got: ``done`` items were done, as ``matches`` (a
        list per item) says; the rest were not."""

        f, ids = _u64_bytes(fps, "fps"), _u64_bytes(doc_ids, "doc_ids")
        if len(f) != len(ids):
            raise ValueError(f"fps and doc_ids differ in length ({len(f) // 8} and {len(ids) // 8})")
        raw = self._call("find_or_insert_many", binary=f + ids, query=f"k={k}" if k is not None else "")
        return self._grouped(raw, columnar)

    # -- documents ----------------------------------------------------------------------------

    def fingerprint_document(self, data: Union[str, bytes], html: Optional[bool] = None) -> int:
        """The fingerprint of a document with the index's recipe. Retried."""
        return int(self._call("fingerprint_document", {"doc": _document(data, html)}, safe=True)["fingerprint"])

    def insert_document(self, data: Union[str, bytes], doc_id: int, html: Optional[bool] = None) -> int:
        """Fingerprints a document with the index's recipe, inserts it under doc_id and returns
        the fingerprint. Never sent twice: a lost answer raises ``OutcomeUnknownError``."""
        return int(self._call("insert_document", {"doc": _document(data, html), "doc_id": doc_id})["fingerprint"])

    def find_or_insert_document(
        self, data: Union[str, bytes], doc_id: int, k: Optional[int] = None, html: Optional[bool] = None, min_words: Optional[int] = None, confirm: bool = True, verify: Optional[bool] = None
    ) -> Tuple[int, List[Any], int]:
        """As ``Index.find_or_insert_document``: ``(fingerprint, matches, words)``, atomic
        across every client of the server. Never sent twice: a lost answer raises ``OutcomeUnknownError``.
        ``verify`` is the deprecated name of ``confirm`` (it warns, DeprecationWarning)."""
        if verify is not None:
            _deprecated_keyword("Client.find_or_insert_document", "verify", "confirm")
            confirm = verify
        body = {"doc": _document(data, html), "doc_id": doc_id, "k": k, "min_words": min_words, "confirm": confirm}
        return _answer(self._call("find_or_insert_document", body))

    def fingerprints_of(self, doc_id: int) -> List[int]:
        """As ``Index.fingerprints_of``: the fingerprints stored under doc_id, sorted. Retried."""
        return [int(f) for f in self._call("fingerprints_of", {"doc_id": doc_id}, safe=True)["fingerprints"]]

    def replace(self, fp: int, doc_id: int) -> List[int]:
        """As ``Index.replace``: (fp, doc_id) stored in place of what doc_id held, in one log
        record; returns the fingerprints it held before. Never sent twice: a lost answer raises
        ``OutcomeUnknownError`` (``fingerprints_of(doc_id)`` then says whether it was stored)."""
        return [int(f) for f in self._call("replace", {"fp": fp, "doc_id": doc_id})["previous"]]

    def find_or_replace(self, fp: int, doc_id: int, k: Optional[int] = None) -> Tuple[str, List[Tuple[int, int, Optional[int]]], List[int]]:
        """As ``Index.find_or_replace``: ``(outcome, matches, previous)``, atomic across every
        client of the server. Never sent twice: a lost answer raises ``OutcomeUnknownError``."""
        r = self._call("find_or_replace", {"fp": fp, "doc_id": doc_id, "k": k})
        return str(r["outcome"]), _matches(r["matches"]), [int(f) for f in r["previous"]]

    def find_or_replace_document(
        self, data: Union[str, bytes], doc_id: int, k: Optional[int] = None, html: Optional[bool] = None, min_words: Optional[int] = None, confirm: bool = True
    ) -> Tuple[int, str, List[Any], List[int]]:
        """As ``Index.find_or_replace_document``: ``(fingerprint, outcome, matches, previous)``,
        atomic across every client of the server (a changed page leaves one entry whichever
        process crawls it). Never sent twice: a lost answer raises ``OutcomeUnknownError``
        (``fingerprints_of(doc_id) == [fingerprint]`` then says the page was stored)."""
        body = {"doc": _document(data, html), "doc_id": doc_id, "k": k, "min_words": min_words, "confirm": confirm}
        r = self._call("find_or_replace_document", body)
        matches = [DocumentMatch(m[0], m[1], m[2], m[3]) for m in r["matches"]]
        return int(r["fingerprint"]), str(r["outcome"]), matches, [int(f) for f in r["previous"]]

    def query_document(self, data: Union[str, bytes], k: Optional[int] = None, html: Optional[bool] = None, confirm: bool = True) -> Tuple[int, List[Any], int]:
        """The stored near-duplicates of a document, judged as ``find_or_insert_document``
        judges them, storing nothing: ``(fingerprint, matches, words)``. Retried."""
        body = {"doc": _document(data, html), "k": k, "confirm": confirm}
        return _answer(self._call("query_document", body, safe=True))

    def fingerprint_documents(self, docs: Sequence[Union[str, bytes]], html: Optional[bool] = None) -> Any:
        """The fingerprints of documents (a numpy uint64 array), made on the server's cores.
        Retried."""

        np = _numpy("fingerprint_documents")
        out = self._call("fingerprint_documents", {"docs": [_document(d, html) for d in docs]}, safe=True)
        return np.array(out["fingerprints"], dtype=np.uint64)

    def find_or_insert_documents(
        self, docs: Sequence[Union[str, bytes]], doc_ids: Iterable[int], k: Optional[int] = None, html: Optional[bool] = None, min_words: Optional[int] = None, confirm: bool = True
    ) -> List[Any]:
        """As ``Index.find_or_insert_documents``: per item ``(fingerprint, matches, words)``, or
        the EmptyDocumentError or BinaryDocumentError a refused document would raise, returned.
        Never sent twice: a lost answer raises ``OutcomeUnknownError``. A call the server
        stopped part-way (a full disk: ``Error`` with ``status`` 507) says how far it got:
        ``done`` items were done, as ``results`` (their items) says; the rest were not."""
        docs = list(docs)
        ids = [int(i) for i in doc_ids]
        if len(docs) != len(ids):
            raise ValueError(f"docs and doc_ids differ in length ({len(docs)} and {len(ids)})")
        body = {"docs": [_document(d, html) for d in docs], "doc_ids": ids, "k": k, "min_words": min_words, "confirm": confirm}
        out = self._call("find_or_insert_documents", body)["results"]
        return [_error(r["error"]["kind"], r["error"]["message"], 422) if "error" in r else _answer(r) for r in out]

    # -- the index as a whole -------------------------------------------------------------------

    def sync(self) -> None:
        """Makes every write so far durable on the server. Retried."""
        self._call("sync", safe=True)

    def flush(self) -> None:
        """Writes the server's memtable out as a segment. Retried."""
        self._call("flush", safe=True)

    def compact(self) -> None:
        """Merges every segment into one (may take long: waits up to ``timeout``). Retried."""
        self._call("compact", safe=True)

    def live_entries(self) -> List[Tuple[int, int]]:
        """Every live (fingerprint, doc_id) pair, sorted (sent as 16 bytes a pair). Retried."""
        raw = self._call("live_entries", safe=True)
        flat = array("Q")
        flat.frombytes(raw)
        if sys.byteorder != "little":
            flat.byteswap()
        return list(zip(flat[0::2], flat[1::2]))

    def stats(self) -> Dict[str, Any]:
        """The index's statistics (``Index.stats()``'s keys). Retried."""
        return dict(self._call("stats", safe=True))

    def close(self) -> None:
        """Closes this client's connections (the server and its index go on). Idempotent."""
        self._closed = True
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for c in conns:
            c.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_args: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        return f"simdex.Client({self.url!r})" + (" (closed)" if self._closed else "")


def _answer(r: Dict[str, Any]) -> Tuple[int, List[Any], int]:

    return int(r["fingerprint"]), [DocumentMatch(m[0], m[1], m[2], m[3]) for m in r["matches"]], int(r["words"])
