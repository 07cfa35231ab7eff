"""Scrapy integration: drop near-duplicate pages while crawling.

Downloader middleware::

    DOWNLOADER_MIDDLEWARES = {"simdex.scrapy.NearDuplicateMiddleware": 540}
    SIMDEX_INDEX = "crawl.simdex"      # index directory, created if missing

Its place: 540, just below ``RetryMiddleware`` (550). Scrapy hands a response to the
downloader middlewares' ``process_response`` from the highest number down, so at 540 the
middleware sees each response after ``HttpCacheMiddleware`` (900), ``RedirectMiddleware``
(600), ``HttpCompressionMiddleware`` (590, bodies are decompressed) and ``RetryMiddleware``
(550: a 503 it retries never reaches it; one it gave up on does, and is passed on) have, and
before the spider. Above 550 (the 950 of earlier versions) it would fingerprint compressed
bodies and pages a retry replaces; it says so at start (a warning naming the middlewares it
runs before). Only responses with a status in ``SIMDEX_STATUSES`` (2xx by default) are
fingerprinted; every other response (an error page, a maintenance page, ``robots.txt``'s 404)
is passed on untouched, never stored, so ``RetryMiddleware`` and the spider's
``HttpErrorMiddleware`` handle it as without simdex (``simdex/other_status``).

For each HTML response, the body is fingerprinted with the index's recipe and checked against
every page stored before, in this crawl or an earlier one, by one index call under the page's
document id (``simdex.doc_id(url)``): ``find_or_replace_document``, atomic, whether the index
is this process's or a server's. A near-duplicate of another URL's page raises
``IgnoreRequest`` (logged with the page it duplicates and the distance); a new page is stored
and passed on. A page near what its own URL stored is a *revisit* (a re-crawl, or a page
fetched twice): nothing is written, it is passed on, flagged ``simdex:revisit``, never dropped
as a near-duplicate of itself, so a second crawl on the same index follows the links it
followed the first time. A page that changed under its URL (nothing near it, and the URL had
stored another page) *replaces* what the index held for the URL, in the same call (one log
record: one entry per live URL, whichever process crawls it; a crash leaves the old version
or the new one), flagged ``simdex:changed``. Stats:
``simdex/new``, ``simdex/revisit``, ``simdex/changed``, ``simdex/near_duplicates``,
``simdex/non_html`` (passed on unfingerprinted), ``simdex/other_status`` (a status not in
``SIMDEX_STATUSES``: passed on untouched), ``simdex/answers_lost`` (a server's answer
lost on the way: the page's fate found out by a query, never by storing it twice), ``simdex/too_short`` (passed on, flagged
``simdex:too_short``, not stored), ``simdex/binary`` (a body the library refuses as binary:
passed on, flagged ``simdex:binary``, not stored), ``simdex/skipped`` (a request whose
``meta["simdex_skip"]`` is true: passed on unchecked). Every checked response's
``meta["simdex"]`` says what was found: ``outcome``, ``fingerprint`` and, for a
near-duplicate, ``duplicate_of`` (its URL, or None when neither this process nor the
``SIMDEX_URLS`` map knows it), ``doc_id``, ``distance`` and ``similarity`` (the
sketches' estimate). While the crawl runs, a log line gives the counts every
``SIMDEX_LOG_INTERVAL`` seconds.

Settings (all of them checked when the crawler is created, before anything is written: a bad
value stops the crawl with one ERROR line naming the setting and the values it takes, and
``scrapy crawl`` exits 1; so do a locked index, a directory of other files, another expiry
window than an existing index's and a server out of reach):

- ``SIMDEX_INDEX``: the index directory, opened by this process (one process writes an index
  at a time). A directory that is not an index and holds other files is refused
  (``SIMDEX_CREATE_IN_NONEMPTY = True`` creates the index there anyway).
- ``SIMDEX_URL``: instead of ``SIMDEX_INDEX``, the URL of a ``simdex serve`` server
  (``http://127.0.0.1:7878``): several crawl processes, on one machine or many, share its
  index through ``simdex.Client``, and one is told "new" for a page the others stored.
  ``SIMDEX_TOKEN`` (default: the environment's ``SIMDEX_TOKEN``) is its bearer token.
  ``SIMDEX_DURABILITY`` is then the server's (``simdex serve --durability``). When both are
  set, the one set with the higher Scrapy priority wins (``scrapy crawl -s SIMDEX_URL=...``
  over a ``settings.py`` that sets ``SIMDEX_INDEX``; the start line says which); set at the
  same priority, the crawl stops with an error.
- ``SIMDEX_EXPIRE_AFTER``: the expiry window of a new index (``"30d"``, ``"12h"``; units s, m,
  h, d, w): a page stored longer ago than the window (plus its granularity, at most an eighth of
  it) no longer matches: it is new again, stored again, and its item produced again. Pinned in
  the index when it is created (an existing index keeps its own; another window stops the crawl
  with ValueError). A server's index has its own window (``simdex serve --expire-after`` when it
  creates it): with ``SIMDEX_URL`` this setting is refused.
- ``SIMDEX_STATUSES``: the HTTP statuses whose responses are fingerprinted (default: 200 to
  299); every other response is passed on untouched.
- ``SIMDEX_K``: distance within which a stored page is a candidate, 0 to 8 whatever design
  the index has (default 8, what ``simdex dedup`` uses). On an index with sketches (the
  default) a candidate is a near-duplicate only when the sketches estimate a resemblance of at
  least 0.90; fingerprints alone decide within at most 3.
- ``SIMDEX_CONFIRM``: on an index with sketches, candidates are confirmed by them (default
  True). False lets fingerprints alone decide within ``SIMDEX_K`` (on an index without
  sketches this is the only way to match beyond 3 bits: without it fingerprints alone decide
  within at most 3, and the start line says so). What ``simdex tune`` recommends when it
  recommends fingerprints alone beyond 3.
- ``SIMDEX_DURABILITY``: ``"group"`` (default), ``"sync"`` or ``"nosync"``.
- ``SIMDEX_MIN_WORDS``: pages with fewer words are passed on and not stored (default 20;
  tiny pages all look alike).
- ``SIMDEX_URLS``: optional, for log lines only: a SQLite file mapping document ids to URLs
  (``"crawl.urls.sqlite3"``; the processes of one machine may share one file, SQLite locks
  it), so that a near-duplicate of a page stored by an earlier crawl or another process is
  named by its URL. Without it (the default) the index alone decides everything as with it;
  a process names the pages it stored itself by their URLs (up to 2^20 of them) and others
  as "a page stored by an earlier crawl or another process (doc id N; ...)".
- ``SIMDEX_ACTION``: ``"drop"`` (default: a near-duplicate of another URL raises
  ``IgnoreRequest``, an item ``DropItem``) or ``"flag"`` (passed on, flagged
  ``simdex:near_duplicate``, with ``meta["simdex"]``, for the spider to decide).
- ``SIMDEX_LOG_INTERVAL``: seconds between the progress log lines (default 60; 0: none).

Item pipeline (items carrying text)::

    ITEM_PIPELINES = {"simdex.scrapy.NearDuplicatePipeline": 300}
    SIMDEX_TEXT_FIELD = "text"   # the item field fingerprinted (str: text, bytes: HTML)
    SIMDEX_ID_FIELD = "url"      # the field naming the item

A near-duplicate item is dropped (``DropItem``; or passed on with ``SIMDEX_ACTION = "flag"``);
stats under ``simdex/items/``. Beside the middleware, an item whose id (``SIMDEX_ID_FIELD``,
the page's URL) names a page the middleware checked in this process is not checked again (the
two agree on ids and store a page once) and goes by what the middleware found for its page
(``simdex/items/page_new``, ``page_changed``, ``page_revisit``, ...: one stat per outcome).

No item twice across re-crawls: an item whose page is *unchanged* since a crawl stored it (a
revisit: the page matches what its own URL stored) is dropped (``DropItem``,
``simdex/items/page_revisit``, or ``simdex/items/revisit`` for an item the pipeline checked
itself), while the page itself still reaches the spider (flagged ``simdex:revisit``), so the
links it holds are followed again. A page that changed under its URL gives its item again
(``page_changed``). ``SIMDEX_REVISIT_ITEMS = "pass"`` passes revisits' items on instead (the
spider sees the ``simdex:revisit`` flag on the response and decides). Pages too short to be
stored (``SIMDEX_MIN_WORDS``) or binary are never known again, so their items pass every time.

Where a check runs: a page of at most ``INLINE_BYTES`` (128 KiB) checked against this
process's own index, without ``SIMDEX_URLS``, is checked on the reactor's thread, at once: the
library's call takes about 150 us for a 10 KB page, less than handing it to a thread and
back costs (measured: ``benches/page_speed.py``), and about what the spider's own parsing of
the page takes there. A larger page, a server's index (``SIMDEX_URL``: a network round trip),
an index opened with ``SIMDEX_DURABILITY = "sync"`` (each write waits for an fsync) and a check
that writes the ``SIMDEX_URLS`` map (SQLite) run on the reactor's thread pool
(``REACTOR_THREADPOOL_MAXSIZE``), so downloads and parsing go on meanwhile (the index calls
release the GIL). The index is opened when the crawler is created: an index
locked by another process fails the crawl at once with ``simdex.LockedError``, before any
request (so does a ``SIMDEX_URL`` no server answers, with ``simdex.ServerUnavailableError``).
The middleware and the pipeline of one process share one open index (or client).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from typing import Any, Dict, Optional, Tuple

from scrapy import signals
from scrapy.exceptions import DropItem, IgnoreRequest, NotConfigured
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.threads import deferToThread

import simdex

from ._scrapy_settings import CrawlSettings, SettingError, fail

logger = logging.getLogger(__name__)

# the place documented above: process_response after RetryMiddleware (550) and everything above it
RECOMMENDED_PRIORITY = 540
# built-in downloader middlewares whose process_response must run before this one's
# (Scrapy runs process_response from the highest number down)
# the URLs a process remembers for its log lines without a map (~150 bytes each)
NAMES_KEPT = 1 << 20
# the largest page (bytes, or characters of an item's text) checked on the reactor's thread
# rather than its thread pool, against a local index without a URL map (see the module docs)
INLINE_BYTES = 128 << 10
_MUST_RUN_FIRST = (
    "scrapy.downloadermiddlewares.retry.RetryMiddleware",
    "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware",
    "scrapy.downloadermiddlewares.redirect.RedirectMiddleware",
)


class _Store:
    """An open index (or the server's client), shared by the users of one directory in a
    process, and the names of its pages: doc id -> URL, for log lines only (what the index
    stores under a page's id decides every outcome)."""

    _open: Dict[str, Tuple["_Store", int]] = {}
    _lock = threading.Lock()

    def __init__(self, c: CrawlSettings) -> None:
        # a new index gets the library's design; SIMDEX_K is the query's distance
        self.index: Any = _open_index(c)
        self.db: Optional[sqlite3.Connection] = None
        # what the middleware found for each page it checked in this process (its first
        # check): the pipeline goes by it for the page's items instead of storing them again
        self.pages: Dict[int, str] = {}
        # the URLs of the pages this process stored or revisited (up to NAMES_KEPT): a
        # near-duplicate of one of them is named by its URL without a map
        self.names: Dict[int, str] = {}
        # the start line is logged once, by the first of the middleware and the pipeline
        self.announced = False
        # checks run on the reactor's thread pool: the map (one SQLite connection) and the
        # names are used under this lock
        self.lock = threading.Lock()
        # checks short enough to run on the reactor's thread: a local index, no URL map, and
        # writes that do not wait for an fsync ("sync" durability waits milliseconds a write)
        self.inline = not c.remote and c.urls is None and c.durability != "sync"
        if c.urls is None:
            return
        self.urls_path = c.urls
        # autocommit; WAL with synchronous=NORMAL survives a process crash; other processes
        # may share the file (a busy file is waited for)
        self.db = sqlite3.connect(self.urls_path, isolation_level=None, check_same_thread=False, timeout=30.0)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        # (maps written by earlier versions have an `fp` column: no longer read or written)
        self.db.execute("CREATE TABLE IF NOT EXISTS urls (doc_id INTEGER PRIMARY KEY, url TEXT NOT NULL)")

    @classmethod
    def acquire(cls, c: CrawlSettings) -> "_Store":
        with cls._lock:
            if c.where in cls._open:
                store, n = cls._open[c.where]
                cls._open[c.where] = (store, n + 1)
                return store
            store = cls(c)
            cls._open[c.where] = (store, 1)
            return store

    @classmethod
    def release(cls, path: str) -> None:
        with cls._lock:
            store, n = cls._open[path]
            if n > 1:
                cls._open[path] = (store, n - 1)
                return
            del cls._open[path]
        store.index.close()
        if store.db is not None:
            store.db.close()

    def name(self, doc_id: int, url: str) -> None:
        """Records that ``doc_id`` (stored in the index) is ``url``'s page: in this process
        and, with ``SIMDEX_URLS``, in the map."""
        with self.lock:
            if len(self.names) < NAMES_KEPT or doc_id in self.names:
                self.names[doc_id] = url
            if self.db is not None:
                # ids are stored as signed 64-bit integers, SQLite's
                self.db.execute("INSERT OR REPLACE INTO urls (doc_id, url) VALUES (?, ?)", (_signed(doc_id), url))

    def url_of(self, doc_id: Optional[int]) -> Optional[str]:
        """The URL of the page stored under ``doc_id``, when this process or the map knows it."""
        if doc_id is None:
            return None
        with self.lock:
            url = self.names.get(doc_id)
            if url is None and self.db is not None:
                row = self.db.execute("SELECT url FROM urls WHERE doc_id = ?", (_signed(doc_id),)).fetchone()
                url = row[0] if row else None
        return url

    def describe(self, doc_id: Optional[int]) -> str:
        """A page stored under ``doc_id``, in words for a log line: its URL when known."""
        url = self.url_of(doc_id)
        if url is not None:
            return url
        if doc_id is None:
            return "a page stored without an id"
        more = "" if self.db is not None else "; SIMDEX_URLS keeps URLs across crawls"
        return f"a page stored by an earlier crawl or another process (doc id {doc_id}{more})"


def _open_index(c: CrawlSettings) -> Any:
    """The crawl's index (or the server's client); a start-up error stops the crawl with one
    line saying what to do (``fail``)."""
    setting = "SIMDEX_URL" if c.remote else "SIMDEX_INDEX"
    try:
        if c.remote:
            client = simdex.Client(c.where, token=c.token)
            # asked now, so that a server out of reach fails the crawl before any request
            client.k
            return client
        return simdex.Index(c.where, durability=c.durability, expire_after=c.expire_after, create_in_nonempty=c.create_in_nonempty)
    except simdex.LockedError as e:
        fail(
            e,
            f"the index {c.where} is locked by another process (its LOCK file): one process writes an index at a time; "
            "stop the other crawl, give this one its own SIMDEX_INDEX, or share the index through `simdex serve` and SIMDEX_URL",
        )
    except simdex.ServerUnavailableError as e:
        fail(e, f"SIMDEX_URL = {c.where}: no simdex server answers there (start one with `simdex serve DIR`)")
    except (simdex.Error, ValueError) as e:
        message = str(e)
        if "refused to create an index among other files" in message:
            # the library names the CLI's, Rust's and Python's spellings: this is Scrapy's
            message = message.split("; use an empty", 1)[0] + "; use an empty or new directory, or set SIMDEX_CREATE_IN_NONEMPTY = True"
        elif "expiry window" in message and c.expire_after:
            # an existing index keeps its own window
            setting = f"SIMDEX_EXPIRE_AFTER = {c.expire_after!r} with {setting}"
        fail(e, f"{setting} = {c.where}: {message}")


# the library's outcome of a page's check -> the stat's name
_OUTCOMES = {"unchanged": "revisit", "inserted": "new", "replaced": "changed"}


def _signed(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


def _secs(secs: int) -> str:
    """``secs`` in days, hours, minutes and seconds (``30d``, ``3d18h``)."""
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if secs >= size:
            parts.append(f"{secs // size}{unit}")
            secs %= size
    return "".join(parts) or "0s"


def misplaced(crawler: Any) -> Optional[str]:
    """Why the middleware's place among the downloader middlewares is wrong (it runs
    ``process_response`` before a built-in middleware that must see the response first), or
    None when it is right."""
    mws = crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    path = f"{NearDuplicateMiddleware.__module__}.{NearDuplicateMiddleware.__qualname__}"
    ours = next((v for k, v in mws.items() if k in (path, NearDuplicateMiddleware)), None)
    if ours is None:
        return None
    before = [f"{k.rsplit('.', 1)[-1]} ({mws[k]})" for k in _MUST_RUN_FIRST if mws.get(k) is not None and mws[k] < ours]
    if not before:
        return None
    return (
        f"NearDuplicateMiddleware is at {ours}, so it sees responses before {', '.join(before)}: it would fingerprint "
        f"compressed bodies and pages a retry or redirect replaces; put it at {RECOMMENDED_PRIORITY} (below RetryMiddleware's 550)"
    )


class _Base:
    stats_prefix = "simdex"

    def __init__(self, crawler: Any) -> None:
        # every setting checked before anything is created: a bad one stops the crawl with
        # one line naming it, and leaves no file behind
        try:
            self.settings = CrawlSettings.read(crawler.settings)
        except SettingError as e:
            fail(e, str(e))
        if not self.settings.where:
            raise NotConfigured("neither SIMDEX_INDEX (an index directory) nor SIMDEX_URL (a simdex serve server) is set")
        c = self.settings
        self.path, self.k, self.min_words, self.confirm, self.query = c.where, c.k, c.min_words, c.confirm, c.query
        self.action, self.revisit_items, self.log_interval, self.statuses = c.action, c.revisit_items, c.log_interval, c.statuses
        self.overridden = c.overridden
        self.last_log = time.monotonic()
        self.stats = crawler.stats
        # opened now, so that a locked index fails the crawl before any request
        self.store = _Store.acquire(c)
        self.closed = False
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Any) -> Any:
        return cls(crawler)

    def spider_opened(self, spider: Any) -> None:
        if self.store.announced:
            # the middleware and the pipeline share the store: one start line
            return
        self.store.announced = True
        idx = self.store.index
        k, how = self.decision(idx.sketches)
        window = idx.expire_after
        expiry = f"pages stored more than {_secs(window)} ago are new again" if window else "nothing expires"
        spider.logger.info("simdex: near-duplicates within k = %s %s, against %s (recipe: %s; %s)", k, how, self.path, idx.recipe or "default, pinned on the first page", expiry)
        if self.overridden:
            spider.logger.info("simdex: %s", self.overridden)

    def decision(self, sketches: bool) -> Tuple[int, str]:
        """The distance the document calls run at on an index with or without sketches, and
        how they decide, in words: the library's ``DocumentQuery.decision``."""
        k, min_similarity = self.query.decision(sketches)
        if min_similarity is not None:
            # band candidates serve thresholds from the default up
            beyond = "; beyond k when their sketches share a band, by a margin of the estimate's noise" if min_similarity >= simdex.DEFAULT_MIN_SIMILARITY else ""
            return k, f"confirmed by sketch (resemblance >= {min_similarity:.2f}{beyond})"
        if not self.confirm:
            return k, "by fingerprints alone (SIMDEX_CONFIRM = False)"
        if k < self.query.k:
            asked = f"SIMDEX_K = {self.query.k}" if self.k is not None else f"SIMDEX_K unset: {self.query.k}"
            return k, f"by fingerprints alone ({asked}, but the index has no sketches: fingerprints alone decide beyond {k} only with SIMDEX_CONFIRM = False)"
        return k, "by fingerprints alone (the index has no sketches)"

    def spider_closed(self, spider: Any) -> None:
        if not self.closed:
            self.closed = True
            _Store.release(self.path)

    async def checked(self, data: Any, name: str, html: Optional[bool], doc: int) -> Tuple[str, Dict[str, Any]]:
        """``check``, on the reactor's thread when it is short (see the module docs), else on
        its thread pool."""
        if self.store.inline and len(data) <= INLINE_BYTES:
            return self.check(data, name, html, doc)
        return await maybe_deferred_to_future(deferToThread(self.check, data, name, html, doc))

    def check(self, data: Any, name: str, html: Optional[bool], doc: Optional[int] = None) -> Tuple[str, Dict[str, Any]]:
        """(outcome, what was found): the outcome is the stat's name ('new', 'revisit',
        'changed', 'near_duplicates', 'too_short', 'binary'). One index call decides and
        writes (``find_or_replace_document`` under the page's id, atomic): a binary or too
        short page is passed on, never stored; a page near what its own id stored is a revisit
        (nothing written); a near-duplicate of another id's page is not stored; a new page is
        stored; a page that changed under its id replaces what the id held (one log record:
        the index holds one entry per live page). ``doc``: ``simdex.doc_id(name)``, when the
        caller has it."""
        if doc is None:
            doc = simdex.doc_id(name)
        try:
            try:
                fp, outcome, matches, _ = self.store.index.find_or_replace_document(data, doc, k=self.k, html=html, min_words=self.min_words, confirm=self.confirm)
            except simdex.OutcomeUnknownError:
                fp, outcome, matches = self._after_lost_answer(data, doc, html)
        except simdex.EmptyDocumentError:
            return "too_short", {}
        except simdex.BinaryDocumentError:
            return "binary", {}
        found: Dict[str, Any] = {"fingerprint": fp}
        if outcome == "found":
            m = matches[0]
            found.update(duplicate_of=self.store.url_of(m.doc_id), doc_id=m.doc_id, distance=m.distance, similarity=m.similarity)
            return "near_duplicates", found
        self.store.name(doc, name)
        return _OUTCOMES[outcome], found

    def _after_lost_answer(self, data: Any, doc: int, html: Optional[bool]) -> Tuple[int, str, Any]:
        """The check of a page whose ``find_or_replace_document`` answer a server lost (it may
        or may not have stored the page): what the index holds under the page's id, asked
        (the client retries reads), tells. Held alone with the page's fingerprint: stored,
        by the lost call (new or changed) or before it (a revisit with no change at all),
        which nothing tells apart: counted as new, so the page's item passes (an item may
        come twice, never be lost). Otherwise nothing was stored, and the check runs again."""
        self.stats.inc_value(f"{self.stats_prefix}/answers_lost")
        fp, _, _ = self.store.index.query_document(data, k=self.k, html=html, confirm=self.confirm)
        if self.store.index.fingerprints_of(doc) == [fp]:
            return fp, "inserted", []
        fp, outcome, matches, _ = self.store.index.find_or_replace_document(data, doc, k=self.k, html=html, min_words=self.min_words, confirm=self.confirm)
        return fp, outcome, matches

    def progress(self, spider: Any) -> None:
        """Logs the counts so far, every ``SIMDEX_LOG_INTERVAL`` seconds."""
        now = time.monotonic()
        if self.log_interval <= 0 or now - self.last_log < self.log_interval:
            return
        self.last_log = now
        counts = {k.rsplit("/", 1)[1]: v for k, v in self.stats.get_stats().items() if k.startswith(self.stats_prefix + "/") and k.count("/") == self.stats_prefix.count("/") + 1}
        spider.logger.info("simdex: %s", ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "nothing checked yet")


class NearDuplicateMiddleware(_Base):
    """Downloader middleware dropping near-duplicate HTML pages (see the module docstring)."""

    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        self.crawler = crawler
        self.misplaced = misplaced(crawler)

    def spider_opened(self, spider: Any) -> None:
        super().spider_opened(spider)
        if self.misplaced:
            spider.logger.warning("simdex: %s", self.misplaced)

    # `spider` is optional: Scrapy 2.14+ deprecates requiring it (and passes it no more),
    # 2.13 still passes it.
    # The check (fingerprinting, the index, the URL map) runs on the reactor's thread when
    # it is short, else on its thread pool (`checked`, the module docs).
    async def process_response(self, request: Any, response: Response, spider: Any = None) -> Response:
        spider = spider or self.crawler.spider
        if request.meta.get("simdex_skip"):
            self.stats.inc_value(f"{self.stats_prefix}/skipped")
            return response
        if response.status not in self.statuses:
            # an error or maintenance page, robots.txt's 404: untouched, for RetryMiddleware and the spider
            self.stats.inc_value(f"{self.stats_prefix}/other_status")
            return response
        if not isinstance(response, HtmlResponse) and not (isinstance(response, TextResponse) and b"html" in (response.headers.get(b"Content-Type") or b"").lower()):
            self.stats.inc_value(f"{self.stats_prefix}/non_html")
            return response
        name = response.url
        doc = simdex.doc_id(name)
        outcome, found = await self.checked(response.body, name, True, doc)
        self.store.pages.setdefault(doc, outcome)
        self.stats.inc_value(f"{self.stats_prefix}/{outcome}")
        request.meta["simdex"] = dict(found, outcome=outcome)
        self.progress(spider)
        if outcome == "near_duplicates":
            url, distance = self.store.describe(found["doc_id"]), found["distance"]
            spider.logger.info("simdex: %s is a near-duplicate of %s (distance %d)", response.url, url, distance)
            if self.action == "drop":
                raise IgnoreRequest(f"near-duplicate of {url} (distance {distance})")
            return response.replace(flags=response.flags + ["simdex:near_duplicate"])
        if outcome in ("too_short", "binary", "revisit", "changed"):
            return response.replace(flags=response.flags + [f"simdex:{outcome}"])
        return response


class NearDuplicatePipeline(_Base):
    """Item pipeline dropping items whose text is a near-duplicate of a stored one."""

    stats_prefix = "simdex/items"

    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        self.crawler = crawler
        self.text_field = self.settings.text_field
        self.id_field = self.settings.id_field

    async def process_item(self, item: Any, spider: Any = None) -> Any:
        text = item.get(self.text_field) if hasattr(item, "get") else None
        name = item.get(self.id_field) if hasattr(item, "get") else None
        page = None if name is None else self.store.pages.get(simdex.doc_id(str(name)))
        if page is not None:
            # the middleware checked (and stored) this page already: its outcome decides,
            # whatever the item carries
            self.stats.inc_value(f"{self.stats_prefix}/page_{page}")
            if page == "revisit" and self.revisit_items == "drop":
                raise DropItem(f"{name}: unchanged since a crawl stored it (a revisit); its item was produced then")
            return item
        if not isinstance(text, (str, bytes)) or name is None:
            self.stats.inc_value(f"{self.stats_prefix}/without_text")
            return item
        outcome, found = await self.checked(text, str(name), None, simdex.doc_id(str(name)))
        self.stats.inc_value(f"{self.stats_prefix}/{outcome}")
        if outcome == "near_duplicates" and self.action == "drop":
            raise DropItem(f"near-duplicate of {self.store.describe(found['doc_id'])} (distance {found['distance']})")
        if outcome == "revisit" and self.revisit_items == "drop":
            raise DropItem(f"{name}: unchanged since it was stored (a revisit); its item was produced then")
        return item
