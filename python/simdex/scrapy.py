"""Scrapy integration: drop near-duplicate pages while crawling.

Downloader middleware::

    DOWNLOADER_MIDDLEWARES = {"simdex.scrapy.NearDuplicateMiddleware": 950}
    SIMDEX_INDEX = "crawl.simdex"      # index directory, created if missing

For each HTML response, the body is fingerprinted with the index's recipe and checked against
every page stored before, in this crawl or an earlier one (``find_or_insert``, atomic): a
near-duplicate raises ``IgnoreRequest`` (logged with the URL of the page it duplicates and the
distance); a new page is stored and passed on. A page whose matches include the page stored
under its own URL is a *revisit* (a re-crawl, or a page fetched twice): it is passed on,
flagged ``simdex:revisit``, never dropped as a near-duplicate of itself, so a second crawl on
the same index follows the links it followed the first time. Stats: ``simdex/new``,
``simdex/revisit``, ``simdex/near_duplicates``, ``simdex/non_html`` (passed on unfingerprinted),
``simdex/too_short`` (passed on, flagged ``simdex:too_short``, not stored), ``simdex/binary``
(a body the library refuses as binary: passed on, flagged ``simdex:binary``, not stored).

Settings:

- ``SIMDEX_INDEX`` (required): the index directory.
- ``SIMDEX_K``: distance within which a stored page is a candidate, 0 to 8 whatever design
  the index has (default 8, what ``simdex dedup`` uses). On an index with sketches (the
  default) a candidate is a near-duplicate only when the sketches estimate a resemblance of at
  least 0.90; fingerprints alone decide within at most 3.
- ``SIMDEX_DURABILITY``: ``"group"`` (default), ``"sync"`` or ``"nosync"``.
- ``SIMDEX_MIN_WORDS``: pages with fewer words are passed on and not stored (default 20;
  tiny pages all look alike).
- ``SIMDEX_URLS``: the SQLite file mapping document ids to URLs (default: the index
  directory's path plus ``.urls.sqlite3``), kept durable beside the index.

Item pipeline (items carrying text)::

    ITEM_PIPELINES = {"simdex.scrapy.NearDuplicatePipeline": 300}
    SIMDEX_TEXT_FIELD = "text"   # the item field fingerprinted (str: text, bytes: HTML)
    SIMDEX_ID_FIELD = "url"      # the field naming the item

A near-duplicate item is dropped (``DropItem``); stats under ``simdex/items/``.

The index is opened when the crawler is created: an index locked by another process fails
the crawl at once with ``simdex.LockedError``, before any request. The middleware and the
pipeline of one process share one open index.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from typing import Any, Dict, Optional, Tuple

from scrapy import signals
from scrapy.exceptions import DropItem, IgnoreRequest, NotConfigured
from scrapy.http import HtmlResponse, Response, TextResponse

import simdex

logger = logging.getLogger(__name__)

DEFAULT_MIN_WORDS = 20
# the candidate distance of the document calls by default (simdex dedup's), and the largest the
# index answers (multi-probe above the design's k)
DEFAULT_K = 8
MAX_K = 8


class _Store:
    """An open index and its id -> URL map, shared by the users of one directory in a process."""

    _open: Dict[str, Tuple["_Store", int]] = {}
    _lock = threading.Lock()

    def __init__(self, path: str, k: Optional[int], durability: str, urls: Optional[str]) -> None:
        # a new index gets the library's design (k = 3); SIMDEX_K is the query's distance
        self.index = simdex.Index(path, durability=durability)
        self.urls_path = urls or path.rstrip("/") + ".urls.sqlite3"
        # autocommit; WAL with synchronous=NORMAL survives a process crash
        self.db = sqlite3.connect(self.urls_path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS urls (doc_id INTEGER PRIMARY KEY, url TEXT NOT NULL)")

    @classmethod
    def acquire(cls, path: str, k: Optional[int], durability: str, urls: Optional[str]) -> "_Store":
        with cls._lock:
            if path in cls._open:
                store, n = cls._open[path]
                cls._open[path] = (store, n + 1)
                return store
            store = cls(path, k, durability, urls)
            cls._open[path] = (store, 1)
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
        store.db.close()

    def remember(self, doc_id: int, url: str) -> None:
        # ids are stored as signed 64-bit integers, SQLite's
        self.db.execute("INSERT OR REPLACE INTO urls VALUES (?, ?)", (_signed(doc_id), url))

    def url_of(self, doc_id: Optional[int]) -> str:
        if doc_id is None:
            return "<no id>"
        row = self.db.execute("SELECT url FROM urls WHERE doc_id = ?", (_signed(doc_id),)).fetchone()
        return row[0] if row else f"<doc id {doc_id}>"


def _signed(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


class _Base:
    stats_prefix = "simdex"

    def __init__(self, crawler: Any) -> None:
        s = crawler.settings
        path = s.get("SIMDEX_INDEX")
        if not path:
            raise NotConfigured("SIMDEX_INDEX is not set")
        self.path = str(path)
        k = s.get("SIMDEX_K")
        self.k: Optional[int] = None if k in (None, "") else int(k)
        self.min_words = s.getint("SIMDEX_MIN_WORDS", DEFAULT_MIN_WORDS)
        self.stats = crawler.stats
        # opened now, so that a locked index fails the crawl before any request
        try:
            self.store = _Store.acquire(self.path, self.k, s.get("SIMDEX_DURABILITY", "group"), s.get("SIMDEX_URLS"))
        except simdex.LockedError:
            logger.error(
                "simdex: the index %s is locked by another process (its LOCK file): one process writes an index at a time; "
                "stop the other crawl, or give this one its own SIMDEX_INDEX",
                self.path,
            )
            raise
        if self.k is not None and not 0 <= self.k <= MAX_K:
            _Store.release(self.path)
            raise ValueError(f"SIMDEX_K = {self.k}: the index answers k = 0 to {MAX_K}")
        self.closed = False
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Any) -> Any:
        return cls(crawler)

    def spider_opened(self, spider: Any) -> None:
        idx = self.store.index
        k = self.k if self.k is not None else DEFAULT_K
        how = "confirmed by sketch (resemblance >= 0.90)" if idx.sketches else "by fingerprints alone (within at most 3)"
        spider.logger.info("simdex: near-duplicates within k = %s, %s, against %s (recipe: %s)", k, how, self.path, idx.recipe or "default, pinned on the first page")

    def spider_closed(self, spider: Any) -> None:
        if not self.closed:
            self.closed = True
            _Store.release(self.path)

    def check(self, data: Any, name: str, html: Optional[bool]) -> Tuple[str, Optional[Tuple[str, int]]]:
        """('new' | 'revisit' | 'too_short' | 'binary', None) or ('near_duplicates', (url,
        distance)): the outcome is the stat's name; a binary or too short page is passed on,
        never stored; a page matching the one stored under its own name is a revisit."""
        doc = simdex.doc_id(name)
        try:
            _, matches, _ = self.store.index.find_or_insert_document(data, doc, k=self.k, html=html, min_words=self.min_words)
        except simdex.EmptyDocumentError:
            return "too_short", None
        except simdex.BinaryDocumentError:
            return "binary", None
        if any(m.doc_id == doc for m in matches):
            return "revisit", None
        if matches:
            return "near_duplicates", (self.store.url_of(matches[0].doc_id), matches[0].distance)
        self.store.remember(doc, name)
        return "new", None


class NearDuplicateMiddleware(_Base):
    """Downloader middleware dropping near-duplicate HTML pages (see the module docstring)."""

    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        self.crawler = crawler

    # `spider` is optional: Scrapy 2.14+ deprecates requiring it (and passes it no more),
    # 2.13 still passes it.
    def process_response(self, request: Any, response: Response, spider: Any = None) -> Response:
        spider = spider or self.crawler.spider
        if not isinstance(response, HtmlResponse) and not (isinstance(response, TextResponse) and b"html" in (response.headers.get(b"Content-Type") or b"").lower()):
            self.stats.inc_value(f"{self.stats_prefix}/non_html")
            return response
        outcome, dup = self.check(response.body, response.url, html=True)
        self.stats.inc_value(f"{self.stats_prefix}/{outcome}")
        if outcome == "near_duplicates":
            assert dup is not None
            url, distance = dup
            spider.logger.info("simdex: %s is a near-duplicate of %s (distance %d)", response.url, url, distance)
            raise IgnoreRequest(f"near-duplicate of {url} (distance {distance})")
        if outcome in ("too_short", "binary", "revisit"):
            return response.replace(flags=response.flags + [f"simdex:{outcome}"])
        return response


class NearDuplicatePipeline(_Base):
    """Item pipeline dropping items whose text is a near-duplicate of a stored one."""

    stats_prefix = "simdex/items"

    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        self.crawler = crawler
        self.text_field = crawler.settings.get("SIMDEX_TEXT_FIELD", "text")
        self.id_field = crawler.settings.get("SIMDEX_ID_FIELD", "url")

    def process_item(self, item: Any, spider: Any = None) -> Any:
        text = item.get(self.text_field) if hasattr(item, "get") else None
        name = item.get(self.id_field) if hasattr(item, "get") else None
        if not isinstance(text, (str, bytes)) or name is None:
            self.stats.inc_value(f"{self.stats_prefix}/without_text")
            return item
        outcome, dup = self.check(text, str(name), html=None)
        self.stats.inc_value(f"{self.stats_prefix}/{outcome}")
        if outcome == "near_duplicates":
            assert dup is not None
            raise DropItem(f"near-duplicate of {dup[0]} (distance {dup[1]})")
        return item
