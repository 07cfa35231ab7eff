"""A real Scrapy crawl of a local site (python -m http.server on 127.0.0.1) with planted
near-duplicate pages, through simdex.scrapy.NearDuplicateMiddleware."""

import json
import pathlib
import random
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

import simdex

pytest.importorskip("scrapy")

UNIQUE = 8
PAIRS = 3

CRAWL = textwrap.dedent(
    """
    import json, sys
    import scrapy
    from scrapy.crawler import CrawlerProcess

    base, index, out = sys.argv[1], sys.argv[2], sys.argv[3]
    urls = json.loads(sys.argv[4])
    extra = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    skip = set(json.loads(sys.argv[6])) if len(sys.argv) > 6 else set()
    # the threads the checks run on, and the sizes of what they checked, recorded
    import threading
    import simdex.scrapy
    if "_INLINE_BYTES" in extra:
        simdex.scrapy.INLINE_BYTES = extra.pop("_INLINE_BYTES")
    threads = []
    check = simdex.scrapy._Base.check
    def recording(self, data, *args, **kwargs):
        threads.append((threading.current_thread() is threading.main_thread(), len(data), self.store.inline))
        return check(self, data, *args, **kwargs)
    simdex.scrapy._Base.check = recording

    VISITED = []

    class Site(scrapy.Spider):
        name = "site"

        async def start(self):
            for u in urls:
                yield scrapy.Request(base + u, meta={"simdex_skip": True} if u in skip else {}, dont_filter=u in skip)

        def parse(self, response):
            VISITED.append(response.url)
            text = " ".join(response.css("p::text").getall()) if isinstance(response, scrapy.http.TextResponse) else ""
            yield {"url": response.url, "flags": response.flags, "simdex": response.meta.get("simdex"), "text": text}
            if hasattr(response, "css"):
                for href in response.css("a::attr(href)").getall():
                    yield response.follow(href)

    process = CrawlerProcess(settings={
        "DOWNLOADER_MIDDLEWARES": {"simdex.scrapy.NearDuplicateMiddleware": 540},
        "SIMDEX_INDEX": index,
        "CONCURRENT_REQUESTS": 8,
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "FEEDS": {out + ".items.jsonl": {"format": "jsonlines"}},
        **extra,
    })
    crawler = process.create_crawler(Site)
    order = []
    def opened(spider):
        # the downloader middlewares' process_response methods, in the order Scrapy calls them
        order.extend(type(m.__self__).__name__ for m in crawler.engine.downloader.middleware.methods["process_response"] if m is not None)
    from scrapy import signals
    crawler.signals.connect(opened, signal=signals.spider_opened)
    process.crawl(crawler)
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simdex/")}
    stats["checks on the reactor's thread"] = sum(main for main, _, _ in threads)
    # with a local index and no URL map (`inline`) a page of at most INLINE_BYTES is checked
    # on the reactor's thread, anything else on its thread pool
    stats["checks where the rule puts them"] = sum(main == (inline and size <= simdex.scrapy.INLINE_BYTES) for main, size, inline in threads)
    stats["checks"] = len(threads)
    stats["visited"] = VISITED
    stats["process_response order"] = order
    json.dump(stats, open(out, "w"))
    """
)


def words(rng, n):
    vocab = [f"{a}{b}" for a in "bcdfghklmnprstvz" for b in ["ar", "en", "il", "on", "us", "ey", "ow", "ix"]]
    return [rng.choice(vocab) for _ in range(n)]


def page(title, body):
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{' '.join(body)}</p></body></html>"


def serve(root):
    """An http.server on 127.0.0.1 serving ``root``: (base URL, process)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/"
    for _ in range(100):
        try:
            urllib.request.urlopen(base, timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    return base, server


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    rng = random.Random(3)
    html = {}
    for i in range(UNIQUE):
        html[f"unique-{i}.html"] = page(f"unique {i}", words(rng, 300))
    fp = simdex.Fingerprinter()
    for i in range(PAIRS):
        body = words(rng, 300)
        html[f"pair-{i}-a.html"] = page(f"pair {i}", body)
        # one word changed, at a place where the default recipe puts the copy within 3 bits
        for at in range(150, 300):
            changed = body[:at] + ["changedword"] + body[at + 1 :]
            b = page(f"pair {i}", changed)
            if bin(fp.fingerprint_html(b.encode()) ^ fp.fingerprint_html(html[f"pair-{i}-a.html"].encode())).count("1") <= 3:
                html[f"pair-{i}-b.html"] = b
                break
        assert f"pair-{i}-b.html" in html
    html["tiny-1.html"] = page("tiny", ["hello", "world"])
    html["tiny-2.html"] = page("tiny", ["hello", "there"])
    links = "".join(f'<a href="{n}">{n}</a> ' for n in sorted(html)) + '<a href="logo.png">logo</a>'
    html["index.html"] = page("site index", words(rng, 200)) .replace("</body>", links + "</body>")
    for name, text in html.items():
        (root / name).write_text(text)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    base, server = serve(root)
    yield base, sorted(html) + ["logo.png"]
    server.kill()
    server.wait()


# outcomes that make no check (the pipeline's page_* go by the middleware's check)
UNCHECKED = ("simdex/non_html", "simdex/skipped", "simdex/other_status", "simdex/answers_lost", "simdex/items/without_text")


def crawl(base, urls, index, out, settings=None, skip=(), extra=None):
    """Runs CRAWL in a new process: (simdex stats, items, stderr); ``extra`` (a dict) gets the
    pages the spider saw ("visited") and the order of the process_response methods."""
    p = subprocess.run([sys.executable, "-c", CRAWL, base, str(index), str(out), json.dumps(urls), json.dumps(settings or {}), json.dumps(list(skip))], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    items = [json.loads(line) for line in open(str(out) + ".items.jsonl")] if (out.parent / (out.name + ".items.jsonl")).exists() else []
    stats = json.load(open(out))
    for key in ("visited", "process_response order"):
        value = stats.pop(key)
        if extra is not None:
            extra[key] = value
    # every check ran where the rule says (these pages are small): on the reactor's thread with
    # a local index, no URL map and no "sync" durability, else (a map, a server, "sync", or
    # INLINE_BYTES = 0) on its thread pool
    checked = sum(v for k, v in stats.items() if k not in UNCHECKED and not k.startswith("simdex/items/page_") and k.startswith("simdex/"))
    settings = settings or {}
    on_reactor = 0 if settings.get("_INLINE_BYTES") == 0 or settings.get("SIMDEX_URLS") or settings.get("SIMDEX_URL") or settings.get("SIMDEX_DURABILITY") == "sync" else checked
    assert stats.pop("checks on the reactor's thread") == on_reactor and stats.pop("checks where the rule puts them") == checked and stats.pop("checks") == checked, stats
    return stats, items, p.stderr


def test_a_crawl_drops_one_of_each_near_duplicate_pair_and_a_second_crawl_revisits(site, tmp_path):
    base, urls = site
    index = tmp_path / "crawl.simdex"
    stats, items, log = crawl(base, urls, index, tmp_path / "first.json")
    got = {i["url"].rsplit("/", 1)[1] for i in items}
    for i in range(UNIQUE):
        assert f"unique-{i}.html" in got
    for i in range(PAIRS):
        assert (f"pair-{i}-a.html" in got) != (f"pair-{i}-b.html" in got), got
    assert {"index.html", "tiny-1.html", "tiny-2.html", "logo.png"} <= got
    flagged = {i["url"].rsplit("/", 1)[1] for i in items if "simdex:too_short" in i["flags"]}
    assert flagged == {"tiny-1.html", "tiny-2.html"}
    assert stats["simdex/near_duplicates"] == PAIRS
    assert stats["simdex/new"] == UNIQUE + PAIRS + 1
    assert stats["simdex/too_short"] == 2
    assert stats["simdex/non_html"] == 1
    assert "is a near-duplicate of " + base + "pair-" in log and "(distance " in log
    # the dropped page names the kept one as its original
    with simdex.Index(index, read_only=True) as idx:
        assert len(idx.live_entries()) == UNIQUE + PAIRS + 1
    assert "ScrapyDeprecationWarning" not in log, log[-2000:]
    # A second crawl of the same site, in a new process: every stored page is a revisit (passed
    # on, flagged, never a near-duplicate of itself); the copies of other pages are dropped again.
    # Its checks run on the reactor's thread pool (as pages above INLINE_BYTES do), with the
    # same outcomes.
    stats, items, log = crawl(base, urls, index, tmp_path / "second.json", {"_INLINE_BYTES": 0})
    assert stats["simdex/revisit"] == UNIQUE + PAIRS + 1, stats
    assert stats["simdex/near_duplicates"] == PAIRS, stats
    assert "simdex/new" not in stats
    second = {i["url"].rsplit("/", 1)[1] for i in items}
    assert second == got, (second ^ got)
    revisited = {i["url"].rsplit("/", 1)[1] for i in items if "simdex:revisit" in i["flags"]}
    assert revisited == got - {"tiny-1.html", "tiny-2.html", "logo.png"}
    with simdex.Index(index, read_only=True) as idx:
        assert len(idx.live_entries()) == UNIQUE + PAIRS + 1, "a revisit stores nothing"
    # A third, with "sync" durability (each write waits for an fsync): its checks run on the
    # thread pool too (`crawl` asserts where), with the same outcomes.
    stats, items, log = crawl(base, urls, index, tmp_path / "third.json", {"SIMDEX_DURABILITY": "sync"})
    assert stats["simdex/revisit"] == UNIQUE + PAIRS + 1, stats
    assert stats["simdex/near_duplicates"] == PAIRS, stats
    assert {i["url"].rsplit("/", 1)[1] for i in items} == got



def test_a_locked_index_fails_the_crawl_at_start(site, tmp_path):
    base, urls = site
    index = tmp_path / "locked.simdex"
    with simdex.Index(index):
        p = subprocess.run([sys.executable, "-c", CRAWL, base, str(index), str(tmp_path / "x.json"), json.dumps(urls)], capture_output=True, text=True, timeout=300)
    # Scrapy logs the failed start (CrawlerProcess does not turn it into an exit status)
    assert "LockedError" in p.stderr and "locked by another writer" in p.stderr
    # one line says what happened and what to do
    assert f"simdex: the index {index} is locked by another process (its LOCK file)" in p.stderr, p.stderr[-3000:]
    assert "Crawled (200)" not in p.stderr


def test_the_example_project_crawls_and_drops_the_planted_copies(site, tmp_path):
    base, urls = site
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "scrapy"
    index = tmp_path / "example.simdex"
    scrapy_exe = pathlib.Path(sys.executable).parent / "scrapy"
    p = subprocess.run(
        [str(scrapy_exe), "crawl", "site", "-a", f"start={base}index.html", "-s", f"SIMDEX_INDEX={index}", "-s", "ROBOTSTXT_OBEY=False", "-s", "TELNETCONSOLE_ENABLED=False", "-O", str(tmp_path / "items.jsonl")],
        cwd=example,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"'simdex/near_duplicates': {PAIRS}" in p.stderr, p.stderr[-3000:]
    assert f"'simdex/new': {UNIQUE + PAIRS + 1}" in p.stderr


PIPELINE = textwrap.dedent(
    """
    import json, sys
    import scrapy
    from scrapy.crawler import CrawlerProcess

    index, out, texts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

    class Items(scrapy.Spider):
        name = "items"

        async def start(self):
            yield scrapy.Request("data:,x", callback=self.emit)

        def emit(self, response):
            for i, t in enumerate(texts):
                yield {"url": f"item-{i}", "text": t}

    process = CrawlerProcess(settings={
        "ITEM_PIPELINES": {"simdex.scrapy.NearDuplicatePipeline": 300},
        "SIMDEX_INDEX": index,
        "TELNETCONSOLE_ENABLED": False,
        "FEEDS": {out: {"format": "jsonlines", "overwrite": True}},
    })
    crawler = process.create_crawler(Items)
    process.crawl(crawler)
    process.start()
    print(json.dumps({k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simdex/")}))
    """
)


def test_the_item_pipeline_drops_near_duplicate_texts(tmp_path):
    rng = random.Random(11)
    fp = simdex.Fingerprinter()
    texts = [" ".join(words(rng, 200)) for _ in range(5)]
    base = texts[0].split()
    for at in range(100, 200):
        copy = " ".join(base[:at] + ["changedword"] + base[at + 1 :])
        if bin(fp.fingerprint_text(copy) ^ fp.fingerprint_text(texts[0])).count("1") <= 3:
            break
    texts.append(copy)
    texts.append("too short")
    out = tmp_path / "items.jsonl"
    # from a file: Scrapy reads a generator callback's source
    script = tmp_path / "pipeline_crawl.py"
    script.write_text(PIPELINE)
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "idx"), str(out), json.dumps(texts)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    stats = json.loads(p.stdout.strip().splitlines()[-1])
    assert stats == {"simdex/items/new": 5, "simdex/items/near_duplicates": 1, "simdex/items/too_short": 1}
    kept = {json.loads(line)["url"] for line in out.read_text().splitlines()}
    # checks run on a thread pool, items concurrently: either of the pair may come first
    assert ("item-0" in kept) != ("item-5" in kept), kept
    assert kept - {"item-0", "item-5"} == {"item-1", "item-2", "item-3", "item-4", "item-6"}
    # the same items again, in a new process: revisits, never near-duplicates of themselves,
    # dropped (no item twice); the too-short one, never stored, passes again
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "idx"), str(out), json.dumps(texts)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    stats = json.loads(p.stdout.strip().splitlines()[-1])
    assert stats == {"simdex/items/revisit": 5, "simdex/items/near_duplicates": 1, "simdex/items/too_short": 1}
    assert {json.loads(line)["url"] for line in out.read_text().splitlines()} == {"item-6"}
    assert "ScrapyDeprecationWarning" not in p.stderr, p.stderr[-2000:]


def test_a_changed_page_replaces_its_url_and_flag_mode_and_opt_out(tmp_path):
    """A page that changed under its URL replaces what the index held for it (one entry per
    live URL, the old fingerprint gone); with SIMDEX_ACTION = "flag" a near-duplicate is passed
    on, flagged, with what it duplicates in meta["simdex"]; a request with meta simdex_skip is
    passed on unchecked."""
    rng = random.Random(5)
    root = tmp_path / "site"
    root.mkdir()
    a, c = words(rng, 300), words(rng, 300)
    (root / "a.html").write_text(page("a", a))
    (root / "c.html").write_text(page("c", c))
    (root / "copy.html").write_text(page("a", a))
    base, server = serve(root)
    try:
        index = tmp_path / "idx"
        stats, items, _ = crawl(base, ["a.html", "c.html"], index, tmp_path / "1.json")
        assert stats == {"simdex/new": 2}, stats
        with simdex.Index(index, read_only=True) as idx:
            old_c = [fp for fp, doc in idx.live_entries() if doc == simdex.doc_id(base + "c.html")]
        assert len(old_c) == 1
        (root / "c.html").write_text(page("c", words(rng, 300)))
        stats, items, _ = crawl(base, ["a.html", "c.html"], index, tmp_path / "2.json")
        assert stats == {"simdex/revisit": 1, "simdex/changed": 1}, stats
        changed = [i for i in items if i["url"].endswith("c.html")][0]
        assert "simdex:changed" in changed["flags"] and changed["simdex"]["outcome"] == "changed"
        with simdex.Index(index, read_only=True) as idx:
            entries = idx.live_entries()
        assert len(entries) == 2, "one entry per live URL"
        assert [fp for fp, doc in entries if doc == simdex.doc_id(base + "c.html")] == [changed["simdex"]["fingerprint"]] != old_c
        # flag mode: the copy of a.html is passed on, flagged, naming a.html; skip: unchecked
        stats, items, log = crawl(base, ["copy.html", "c.html"], index, tmp_path / "3.json", {"SIMDEX_ACTION": "flag", "SIMDEX_LOG_INTERVAL": 0.001}, skip=["c.html"])
        assert stats == {"simdex/near_duplicates": 1, "simdex/skipped": 1}, stats
        assert "simdex: 1 near_duplicates" in log, "the progress line while the crawl runs"
        copy = [i for i in items if i["url"].endswith("copy.html")][0]
        assert "simdex:near_duplicate" in copy["flags"]
        # a.html was stored by an earlier crawl and no SIMDEX_URLS map names it: its id, no URL
        assert copy["simdex"]["doc_id"] == simdex.doc_id(base + "a.html") and copy["simdex"]["duplicate_of"] is None
        assert copy["simdex"]["distance"] == 0 and copy["simdex"]["similarity"] == 1.0
        assert [i["simdex"] for i in items if i["url"].endswith("c.html")] == [None]
    finally:
        server.kill()
        server.wait()


def test_the_middleware_and_the_pipeline_of_one_crawl_store_a_page_once(site, tmp_path):
    """With the pipeline beside the middleware, an item of a page the middleware checked is
    not checked or stored again (the index holds one entry per stored page) and goes by its
    page's outcome: a second crawl drops the items of the unchanged pages (revisits), never
    as near-duplicates of their own pages, and passes the too-short pages' items."""
    base, urls = site
    index = tmp_path / "both.simdex"
    both = {"ITEM_PIPELINES": {"simdex.scrapy.NearDuplicatePipeline": 300}}
    stats, items, _ = crawl(base, urls, index, tmp_path / "first.json", both)
    html_items = [i for i in items if not i["url"].endswith(".png")]
    assert stats["simdex/items/page_new"] == UNIQUE + PAIRS + 1 and stats["simdex/items/page_too_short"] == 2 == len(html_items) - UNIQUE - PAIRS - 1, stats
    assert "simdex/items/new" not in stats and "simdex/items/near_duplicates" not in stats, stats
    stats, items, _ = crawl(base, urls, index, tmp_path / "second.json", both)
    assert stats["simdex/items/page_revisit"] == UNIQUE + PAIRS + 1 and stats["simdex/items/page_too_short"] == 2, stats
    assert {i["url"].rsplit("/", 1)[1] for i in items} == {"tiny-1.html", "tiny-2.html", "logo.png"}
    with simdex.Index(index, read_only=True) as idx:
        assert len(idx.live_entries()) == UNIQUE + PAIRS + 1
