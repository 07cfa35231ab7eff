"""The Scrapy integration's settings (``SIMDEX_*``, documented in ``simdex.scrapy``): read and
checked in full before anything is created (``CrawlSettings.read``), so that a bad value stops
the crawl with one log line naming the setting and the values it takes, and leaves no file
behind; and how a start-up error stops the crawl (``fail``): one ERROR line, not the
framework's traceback of it. What a document call decides (the default k, its range, the
confirmation) is the library's ``simdex.DocumentQuery``; this module only names the settings.
It imports nothing of Scrapy, so it owns no crawling."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, FrozenSet, NoReturn, Optional

import simdex

logger = logging.getLogger("simdex.scrapy")

# the middleware's own defaults (not the library's: a crawl passes tiny pages on unstored,
# logs progress every minute and fingerprints 2xx responses)
DEFAULT_MIN_WORDS = 20
DEFAULT_LOG_INTERVAL = 60.0
DEFAULT_STATUSES = range(200, 300)
DURABILITIES = ("group", "sync", "nosync")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class SettingError(ValueError):
    """A ``SIMDEX_*`` setting a crawl cannot start with (raised when the crawler is created,
    before any file is written): the message names the setting, its value and what it takes."""


@dataclass(frozen=True)
class CrawlSettings:
    """Every ``SIMDEX_*`` setting of a crawl, checked."""

    where: str
    """The index directory (SIMDEX_INDEX) or the server's URL (SIMDEX_URL)."""
    remote: bool
    overridden: Optional[str]
    """The start line's note when SIMDEX_URL and SIMDEX_INDEX are both set (one wins)."""
    token: Optional[str]
    durability: str
    urls: Optional[str]
    expire_after: Optional[str]
    create_in_nonempty: bool
    k: Optional[int]
    """SIMDEX_K as given (None: the library's default for ``confirm``)."""
    confirm: bool
    min_words: int
    query: Any
    """The library's ``simdex.DocumentQuery`` of these settings, checked."""
    action: str
    revisit_items: str
    log_interval: float
    statuses: FrozenSet[int]
    text_field: str
    id_field: str

    @classmethod
    def read(cls, s: Any) -> "CrawlSettings":
        """Reads and checks the settings ``s`` (Scrapy's ``Settings``): raises SettingError
        naming the first bad one, ``scrapy.exceptions.NotConfigured`` (from the caller) when
        neither SIMDEX_INDEX nor SIMDEX_URL is set (``where`` is then empty)."""
        path, url = s.get("SIMDEX_INDEX"), s.get("SIMDEX_URL")
        overridden = None
        if path and url:
            # the README's settings.py sets SIMDEX_INDEX, its shared-server command adds
            # `-s SIMDEX_URL=...`: the setting with the higher priority wins
            index_priority, url_priority = s.getpriority("SIMDEX_INDEX"), s.getpriority("SIMDEX_URL")
            if index_priority == url_priority:
                raise SettingError("SIMDEX_INDEX and SIMDEX_URL are both set, at the same priority: a crawl opens an index directory or uses a server, not both")
            if url_priority > index_priority:
                overridden, path = f"SIMDEX_URL overrides SIMDEX_INDEX = {path} (set with a lower priority)", None
            else:
                overridden, url = f"SIMDEX_INDEX overrides SIMDEX_URL = {url} (set with a lower priority)", None
        remote = bool(url)
        k = _whole(s, "SIMDEX_K", None, f"0 to {simdex.MAX_K}; unset: the library's default")
        confirm = _flag(s, "SIMDEX_CONFIRM", True)
        min_words = _whole(s, "SIMDEX_MIN_WORDS", DEFAULT_MIN_WORDS, "a whole number of words, 0 or more")
        if min_words is None or min_words < 0:
            _bad("SIMDEX_MIN_WORDS", s.get("SIMDEX_MIN_WORDS"), "not negative", "a whole number of words, 0 or more")
        try:
            query = simdex.DocumentQuery(k=k, confirm=confirm, min_words=min_words)
            query.check()
        except ValueError as e:
            _bad("SIMDEX_K", s.get("SIMDEX_K"), str(e), f"0 to {simdex.MAX_K}")
        durability = str(s.get("SIMDEX_DURABILITY") or "group")
        if durability not in DURABILITIES:
            _bad("SIMDEX_DURABILITY", durability, "unknown", _choices(DURABILITIES))
        expire_after = s.get("SIMDEX_EXPIRE_AFTER") or None
        if expire_after is not None:
            if remote:
                raise SettingError(
                    f"SIMDEX_EXPIRE_AFTER = {expire_after!r} with SIMDEX_URL: a server's index has its own expiry window "
                    "(`simdex serve DIR --expire-after 30d` when it creates the index); unset SIMDEX_EXPIRE_AFTER"
                )
            try:
                simdex._simdex._expiry_secs(expire_after)
            except (ValueError, TypeError) as e:
                _bad("SIMDEX_EXPIRE_AFTER", expire_after, str(e), 'a window such as "30d" or "12h" (units s, m, h, d, w)')
        log_interval = _number(s, "SIMDEX_LOG_INTERVAL", DEFAULT_LOG_INTERVAL)
        return cls(
            where=str(path or url or ""),
            remote=remote,
            overridden=overridden,
            token=s.get("SIMDEX_TOKEN") or os.environ.get("SIMDEX_TOKEN"),
            durability=durability,
            urls=s.get("SIMDEX_URLS") or None,
            expire_after=None if expire_after is None else str(expire_after),
            create_in_nonempty=_flag(s, "SIMDEX_CREATE_IN_NONEMPTY", False),
            k=k,
            confirm=confirm,
            min_words=min_words,
            query=query,
            action=_choice(s, "SIMDEX_ACTION", ("drop", "flag")),
            revisit_items=_choice(s, "SIMDEX_REVISIT_ITEMS", ("drop", "pass")),
            log_interval=log_interval,
            statuses=_statuses(s),
            text_field=str(s.get("SIMDEX_TEXT_FIELD") or "text"),
            id_field=str(s.get("SIMDEX_ID_FIELD") or "url"),
        )


def _bad(name: str, value: Any, why: str, takes: str) -> NoReturn:
    raise SettingError(f"{name} = {value!r}: {why}; {name} takes {takes}")


def _choices(values: Any) -> str:
    return " or ".join(f'"{v}"' for v in values)


def _choice(s: Any, name: str, values: Any) -> str:
    value = s.get(name) or values[0]
    if value not in values:
        _bad(name, value, "unknown", f"{_choices(values)} (default {values[0]!r})")
    return str(value)


def _flag(s: Any, name: str, default: bool) -> bool:
    value = s.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in _TRUE:
        return True
    if str(value).strip().lower() in _FALSE:
        return False
    _bad(name, value, "not a boolean", f"True or False (1/0, true/false; default {default})")


def _whole(s: Any, name: str, default: Optional[int], takes: str) -> Optional[int]:
    value = s.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        _bad(name, value, "not a whole number", takes)
    try:
        return int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        _bad(name, value, "not a whole number", takes)


def _number(s: Any, name: str, default: float) -> float:
    value = s.get(name)
    if value is None or value == "":
        return default
    try:
        n = float(value)
    except (TypeError, ValueError):
        n = float("nan")
    if not n >= 0:
        _bad(name, value, "not a number of seconds", f"seconds, 0 or more (0: no progress lines; default {default:g})")
    return n


def _statuses(s: Any) -> FrozenSet[int]:
    value = s.get("SIMDEX_STATUSES")
    if value is None or value == "":
        return frozenset(DEFAULT_STATUSES)
    takes = "HTTP statuses, 100 to 599, as a list or a comma-separated string (default 200 to 299)"
    try:
        statuses = frozenset(int(x) for x in s.getlist("SIMDEX_STATUSES"))
    except (TypeError, ValueError):
        _bad("SIMDEX_STATUSES", value, "not a list of whole numbers", takes)
    if not statuses or not all(100 <= x <= 599 for x in statuses):
        _bad("SIMDEX_STATUSES", value, "not HTTP statuses", takes)
    return statuses


class _Repeated(logging.Filter):
    """Drops the framework's report of a start-up error ``fail`` logged already: Scrapy
    (asyncio's "Task exception was never retrieved", Twisted's "Unhandled error in Deferred"
    through logging) would repeat it with its 11-16 frames of crawler internals."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not getattr(exc, "_simdex_logged", False)


def fail(error: BaseException, message: str) -> NoReturn:
    """Stops the crawl at start-up: logs ``message`` once (ERROR, ``simdex: ...``) and raises
    ``error`` (so the crawl fails and ``scrapy crawl`` exits 1), its framework traceback
    dropped from the log."""
    logger.error("simdex: %s", message)
    try:
        error._simdex_logged = True  # type: ignore[attr-defined]
    except AttributeError:
        pass
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _Repeated) for f in handler.filters):
            handler.addFilter(_Repeated())
    raise error
