"""A page that keeps changing under one URL, crawled by Scrapy through the middleware: the
index keeps one entry for it (what the URL stored now), with a local index and through a
server, with no URL map; and how log lines name the page a near-duplicate copies, with the
optional SIMDEX_URLS map and without it."""

import http.server
import json
import random
import subprocess
import sys
import textwrap
import threading

import pytest

import simdex

pytest.importorskip("scrapy")

from test_client import Server  # noqa: E402
from test_scrapy import crawl, page, serve, words  # noqa: E402

VERSIONS = 100

# One spider asking for one URL again and again, each request sent once the previous answer
# reached the spider (a revisit reaches it; a near-duplicate would end the chain).
REFETCH = textwrap.dedent(
    """
    import json, sys
    import scrapy
    from scrapy.crawler import CrawlerProcess

    url, times, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    settings = json.loads(sys.argv[4])

    class Again(scrapy.Spider):
        name = "again"
        fetched = 0

        async def start(self):
            yield scrapy.Request(url, dont_filter=True)

        def parse(self, response):
            self.fetched += 1
            yield {"n": self.fetched, "flags": response.flags, "simdex": response.meta.get("simdex")}
            if self.fetched < times:
                yield scrapy.Request(url, dont_filter=True)

    process = CrawlerProcess(settings={
        "DOWNLOADER_MIDDLEWARES": {"simdex.scrapy.NearDuplicateMiddleware": 540},
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "FEEDS": {out: {"format": "jsonlines"}},
        **settings,
    })
    crawler = process.create_crawler(Again)
    process.crawl(crawler)
    process.start()
    print(json.dumps({k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simdex/")}))
    """
)


class ChangingPage:
    """An HTTP server on 127.0.0.1 whose /page.html is a new version every second request
    (version v answers requests 2v and 2v + 1: each change is seen, then seen again
    unchanged); ``served`` holds every body it sent, in order."""

    def __init__(self):
        self.served = []
        lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                if self.path != "/page.html":
                    self.send_error(404)
                    return
                with lock:
                    v = len(outer.served) // 2
                    body = page(f"version {v}", words(random.Random(v), 300)).encode()
                    outer.served.append(body)
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/page.html"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def refetch(url, times, out, settings):
    """REFETCH in a new process: (simdex stats, items in the order the spider made them, stderr)."""
    p = subprocess.run([sys.executable, "-c", REFETCH, url, str(times), str(out), json.dumps(settings)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    items = sorted((json.loads(line) for line in open(out)), key=lambda i: i["n"])
    return json.loads(p.stdout.strip().splitlines()[-1]), items, p.stderr


@pytest.mark.parametrize("where", ["local", "server"])
def test_a_page_changed_100_times_leaves_one_entry(tmp_path, where):
    """100 versions of one URL, each fetched twice in a row, through Scrapy: the first is new,
    each later one replaces what the URL stored (changed), each second fetch is a revisit; the
    index then holds one entry, the last version's fingerprint (the oracle: the served bytes
    fingerprinted apart from the index). No SIMDEX_URLS: the index alone knows the URL's page."""
    site = ChangingPage()
    server = Server(tmp_path / "served.simdex") if where == "server" else None
    settings = {"SIMDEX_URL": server.url} if server else {"SIMDEX_INDEX": str(tmp_path / "crawl.simdex")}
    try:
        stats, items, log = refetch(site.url, 2 * VERSIONS, tmp_path / "items.jsonl", settings)
        assert len(site.served) == 2 * VERSIONS and len(items) == 2 * VERSIONS, (len(site.served), stats)
        assert stats == {"simdex/new": 1, "simdex/changed": VERSIONS - 1, "simdex/revisit": VERSIONS}, stats
        assert [i["simdex"]["outcome"] for i in items] == ["new", "revisit"] + ["changed", "revisit"] * (VERSIONS - 1)
        assert all(f"simdex:{i['simdex']['outcome']}" in i["flags"] for i in items if i["simdex"]["outcome"] != "new")
        fingerprinter = simdex.Fingerprinter()
        served = [fingerprinter.fingerprint_html(b) for b in site.served]
        assert [i["simdex"]["fingerprint"] for i in items] == served, "each check fingerprinted the body served"
        assert len(set(served)) == VERSIONS
        doc = simdex.doc_id(site.url)
        if server:
            with simdex.Client(server.url) as c:
                assert c.fingerprints_of(doc) == [served[-1]]
                assert c.live_entries() == [(served[-1], doc)]
        else:
            with simdex.Index(tmp_path / "crawl.simdex", read_only=True) as idx:
                assert idx.fingerprints_of(doc) == [served[-1]]
                assert idx.live_entries() == [(served[-1], doc)]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["items.jsonl", "served.simdex" if server else "crawl.simdex"]), "no side file"
    finally:
        site.stop()
        if server:
            server.stop()


def test_log_lines_name_the_copied_page_by_url_with_the_map_and_in_words_without(tmp_path):
    """A near-duplicate's log line names the page it copies: by its URL when this process
    stored it or the SIMDEX_URLS map knows it, otherwise in words with its doc id (never a
    bare ``<doc id N>``); meta["simdex"]["duplicate_of"] is the URL or None, ``doc_id`` the id."""
    rng = random.Random(12)
    root = tmp_path / "site"
    root.mkdir()
    body = page("a", words(rng, 300))
    for name in ("a.html", "copy-1.html", "copy-2.html"):
        (root / name).write_text(body)
    base, server = serve(root)
    original = simdex.doc_id(base + "a.html")
    try:
        for mapped in (False, True):
            settings = {"SIMDEX_ACTION": "flag", "CONCURRENT_REQUESTS": 1}
            if mapped:
                settings["SIMDEX_URLS"] = str(tmp_path / "urls.sqlite3")
            index = tmp_path / f"idx-{mapped}"
            # one process: a.html stored, its copy named by URL (this process stored it)
            stats, items, log = crawl(base, ["a.html"], index, tmp_path / f"1-{mapped}.json", settings)
            stats, items, log = crawl(base, ["copy-1.html"], index, tmp_path / f"2-{mapped}.json", settings)
            assert stats == {"simdex/near_duplicates": 1}, stats
            found = items[0]["simdex"]
            assert found["doc_id"] == original and found["distance"] == 0
            if mapped:
                assert found["duplicate_of"] == base + "a.html"
                assert f"simdex: {base}copy-1.html is a near-duplicate of {base}a.html (distance 0)" in log, log[-3000:]
            else:
                assert found["duplicate_of"] is None
                said = f"is a near-duplicate of a page stored by an earlier crawl or another process (doc id {original}; SIMDEX_URLS keeps URLs across crawls) (distance 0)"
                assert f"simdex: {base}copy-1.html {said}" in log, log[-3000:]
        # in one process without a map, a page stored earlier in that process is named by URL
        stats, items, log = crawl(base, ["a.html", "copy-2.html"], tmp_path / "idx-one", tmp_path / "3.json", {"CONCURRENT_REQUESTS": 1})
        assert stats == {"simdex/new": 1, "simdex/near_duplicates": 1}, stats
        first, second = (base + "a.html", base + "copy-2.html") if f"{base}copy-2.html is a near-duplicate" in log else (base + "copy-2.html", base + "a.html")
        assert f"simdex: {second} is a near-duplicate of {first} (distance 0)" in log, log[-3000:]
        assert not (tmp_path / "idx-one.urls.sqlite3").exists()
    finally:
        server.kill()
        server.wait()
