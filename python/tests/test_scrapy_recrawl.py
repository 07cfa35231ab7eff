"""Issue 36 in real Scrapy crawls of local sites: error and maintenance pages are never
stored (and the middleware's place among Scrapy's downloader middlewares), no item twice
across re-crawls, the expiry window from Scrapy and Python, a directory of other files
refused, and the README's Scrapy snippets run together."""

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from datetime import timedelta

import pytest

import simdex

pytest.importorskip("scrapy")

from test_scrapy import CRAWL, crawl, page, serve, words  # noqa: E402

import random  # noqa: E402

PAGES = 10

# Ten pages that answer 503 with one maintenance page the first time each is asked for, then
# the real page; robots.txt is a 404 with a page of words (fingerprintable if it were looked at).
MAINTENANCE_SERVER = textwrap.dedent(
    """
    import http.server, json, sys, threading
    port, pages = int(sys.argv[1]), json.loads(sys.argv[2])
    maintenance, missing = sys.argv[3].encode(), sys.argv[4].encode()
    asked, lock = {}, threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            name = self.path.lstrip("/")
            with lock:
                asked[name] = asked.get(name, 0) + 1
                first = asked[name] == 1
            if name in pages and (not name.startswith("page-") or not first):
                status, body = 200, pages[name].encode()
            elif name in pages:
                status, body = 503, maintenance
            else:
                status, body = 404, missing
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            if status == 503:
                self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url):
    for _ in range(100):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)


@pytest.fixture()
def maintenance_site():
    rng = random.Random(36)
    pages = {f"page-{i}.html": page(f"page {i}", words(rng, 300)) for i in range(PAGES)}
    pages["index.html"] = page("site index", words(rng, 200)).replace("</body>", "".join(f'<a href="{n}">{n}</a> ' for n in sorted(pages)) + "</body>")
    maintenance = page("down for maintenance", ["we", "are", "down", "for", "maintenance", "please", "come", "back", "later"] * 12)
    missing = page("not found", ["the", "page", "you", "asked", "for", "is", "not", "here", "sorry"] * 12)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", MAINTENANCE_SERVER, str(port), json.dumps(pages), maintenance, missing])
    base = f"http://127.0.0.1:{port}/"
    wait_for(base + "index.html")
    yield base, pages, maintenance, missing
    server.kill()
    server.wait()


@pytest.mark.parametrize("priority", [540, 950])
def test_error_and_maintenance_pages_are_never_stored_and_every_real_page_reaches_the_spider(maintenance_site, tmp_path, priority):
    """Only 2xx responses are fingerprinted: every page's first answer, a 503 maintenance page,
    passes on untouched, RetryMiddleware retries it, and the real page reaches the spider (11
    items, as without simdex); robots.txt's 404 is never fingerprinted. At the documented place
    (540) the middleware runs after RetryMiddleware, HttpCompressionMiddleware and
    RedirectMiddleware, so the 503s never reach it; at 950 (before them) they do, pass on
    untouched all the same, and the crawl's start warns of the place."""
    base, pages, maintenance, missing = maintenance_site
    index = tmp_path / "crawl.simdex"
    settings = {"DOWNLOADER_MIDDLEWARES": {"simdex.scrapy.NearDuplicateMiddleware": priority}, "ROBOTSTXT_OBEY": True, "RETRY_TIMES": 2}
    extra = {}
    stats, items, log = crawl(base, ["index.html"], index, tmp_path / "out.json", settings, extra=extra)
    got = sorted(i["url"].rsplit("/", 1)[1] for i in items)
    assert got == sorted(pages), got
    assert stats["simdex/new"] == PAGES + 1 and "simdex/near_duplicates" not in stats, stats
    # robots.txt's 404, and at 950 the ten 503s as well, passed on untouched
    assert stats["simdex/other_status"] == (1 if priority == 540 else 1 + PAGES), stats
    fp = simdex.Fingerprinter()
    with simdex.Index(index, read_only=True) as idx:
        stored = {f for f, _ in idx.live_entries()}
    assert stored == {fp.fingerprint_html(p.encode()) for p in pages.values()}
    assert fp.fingerprint_html(maintenance.encode()) not in stored and fp.fingerprint_html(missing.encode()) not in stored
    order = extra["process_response order"]
    ours = order.index("NearDuplicateMiddleware")
    first = {"RetryMiddleware", "HttpCompressionMiddleware", "RedirectMiddleware"}
    if priority == 540:
        assert first <= set(order[:ours]), order
        assert "simdex: NearDuplicateMiddleware is at" not in log
    else:
        assert not first & set(order[:ours]), order
        assert "simdex: NearDuplicateMiddleware is at 950, so it sees responses before RetryMiddleware (550)" in log, log[-3000:]


def test_a_recrawl_produces_no_item_twice_and_every_page_still_reaches_the_spider(tmp_path):
    """Two link-following crawls in new processes with the middleware and the pipeline: the
    second follows every link the first did (every page reaches the spider) but produces items
    only for what changed (one page edited, the index page that now links a new page, the new
    page): no URL has an unchanged item twice. With SIMDEX_REVISIT_ITEMS = "pass" the revisits'
    items pass again."""
    rng = random.Random(20)
    root = tmp_path / "site"
    root.mkdir()
    names = [f"p{i}.html" for i in range(12)]
    for n in names:
        (root / n).write_text(page(n, words(rng, 250)).replace("</body>", "".join(f'<a href="{m}">{m}</a> ' for m in names) + "</body>"))
    (root / "index.html").write_text(page("index", words(rng, 200)).replace("</body>", '<a href="p0.html">start</a></body>'))
    base, server = serve(root)
    both = {"ITEM_PIPELINES": {"simdex.scrapy.NearDuplicatePipeline": 300}, "SIMDEX_ID_FIELD": "url"}
    try:
        index = tmp_path / "idx"
        first, second = {}, {}
        stats1, items1, _ = crawl(base, ["index.html"], index, tmp_path / "1.json", both, extra=first)
        assert sorted(i["url"] for i in items1) == sorted(base + n for n in names + ["index.html"])
        # between the crawls: p3 is rewritten, the index links a new page
        (root / "p3.html").write_text(page("p3", words(rng, 250)))
        (root / "new.html").write_text(page("new", words(rng, 250)))
        (root / "index.html").write_text(page("index", words(rng, 200)).replace("</body>", '<a href="p0.html">start</a> <a href="new.html">new</a></body>'))
        stats2, items2, _ = crawl(base, ["index.html"], index, tmp_path / "2.json", both, extra=second)
        assert set(second["visited"]) >= set(first["visited"]), "every page of the first crawl reaches the spider again"
        assert sorted(i["url"] for i in items2) == sorted(base + n for n in ["index.html", "p3.html", "new.html"])
        per_url = {}
        for i in items1 + items2:
            per_url[i["url"]] = per_url.get(i["url"], 0) + 1
        assert {u for u, n in per_url.items() if n > 1} == {base + "index.html", base + "p3.html"}, "only changed pages give a second item"
        assert stats2["simdex/items/page_revisit"] == len(names) - 1 and stats2["simdex/items/page_changed"] == 2 and stats2["simdex/items/page_new"] == 1, stats2
        # passing revisits' items on instead (the spider sees the simdex:revisit flag)
        stats3, items3, _ = crawl(base, ["index.html"], index, tmp_path / "3.json", dict(both, SIMDEX_REVISIT_ITEMS="pass"))
        assert len(items3) == len(names) + 2 and all("simdex:revisit" in i["flags"] for i in items3), stats3
    finally:
        server.kill()
        server.wait()


def test_the_expiry_window_from_scrapy_and_python(tmp_path):
    """SIMDEX_EXPIRE_AFTER pins a window in a new index; a bad one stops the crawl naming it,
    with nothing written; Python takes a str, seconds or a timedelta; an existing index keeps
    its own window (another is refused)."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "a.html").write_text(page("a", words(random.Random(1), 200)))
    base, server = serve(root)
    try:
        stats, _, log = crawl(base, ["a.html"], tmp_path / "news", tmp_path / "1.json", {"SIMDEX_EXPIRE_AFTER": "30d"})
        assert stats == {"simdex/new": 1} and "pages stored more than 30d ago are new again" in log
        for bad in ("30x", "0d", "-1d"):
            out = tmp_path / f"bad-{bad}.json"
            p = subprocess.run([sys.executable, "-c", CRAWL, base, str(tmp_path / f"bad-{bad}"), str(out), json.dumps(["a.html"]), json.dumps({"SIMDEX_EXPIRE_AFTER": bad})], capture_output=True, text=True, timeout=300)
            assert f'expiry window "{bad}"' in p.stderr and "Crawled (200)" not in p.stderr, p.stderr[-2000:]
            assert not (tmp_path / f"bad-{bad}").exists()
    finally:
        server.kill()
        server.wait()
    with simdex.Index(tmp_path / "news", read_only=True) as idx:
        assert idx.expire_after == 30 * 86400
        assert idx.stats()["expire_granularity_secs"] == 324000 and idx.stats()["oldest_live_secs"] <= time.time()
    for value, secs in (("12h", 43200), (3600, 3600), (timedelta(days=7), 604800)):
        with simdex.Index(tmp_path / f"w-{secs}", expire_after=value) as idx:
            assert idx.expire_after == secs
    for bad in (0, -5, 1.5, "30x"):
        with pytest.raises(ValueError):
            simdex.Index(tmp_path / "never", expire_after=bad)
    assert not (tmp_path / "never").exists()
    with pytest.raises(ValueError, match="30d"):
        simdex.Index(tmp_path / "news", expire_after="7d")
    with simdex.Index(tmp_path / "plain") as idx:
        assert idx.expire_after is None and idx.stats()["expire_after_secs"] is None


def test_a_directory_of_other_files_is_refused_unless_asked(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("mine")
    with pytest.raises(simdex.Error, match="not a simdex index"):
        simdex.Index(home)
    assert os.listdir(home) == ["thesis.tex"], "nothing written"
    with simdex.Index(home, create_in_nonempty=True):
        pass
    assert "MANIFEST" in os.listdir(home)


def test_the_readme_scrapy_snippets_run_together(maintenance_site, tmp_path):
    """The Python guide's settings.py (python/README.md), as pasted, in a project with the example spider; then its
    shared-server commands (`simdex serve crawl.simdex`, `scrapy crawl site -s SIMDEX_URL=...`,
    with a free port instead of 7878): the command line's SIMDEX_URL outranks settings.py's
    SIMDEX_INDEX, the crawl goes to the server, and the maintenance pages are never stored."""
    base, pages, maintenance, _ = maintenance_site
    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    snippet = re.search(r"```python\n(# settings\.py\n.*?)```", readme, re.S).group(1)
    commands = re.search(r"```sh\n(simdex serve crawl\.simdex .*?)```", readme, re.S).group(1).splitlines()
    example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "scrapy"
    project = tmp_path / "project"
    (project / "crawler" / "spiders").mkdir(parents=True)
    (project / "scrapy.cfg").write_text((example / "scrapy.cfg").read_text())
    (project / "crawler" / "__init__.py").write_text("")
    (project / "crawler" / "spiders" / "__init__.py").write_text("")
    (project / "crawler" / "spiders" / "site.py").write_text((example / "crawler" / "spiders" / "site.py").read_text())
    (project / "crawler" / "settings.py").write_text('BOT_NAME = "crawler"\nSPIDER_MODULES = ["crawler.spiders"]\nTELNETCONSOLE_ENABLED = False\n' + snippet)
    exe = os.environ.get("SIMDEX") or str(pathlib.Path(__file__).resolve().parents[2] / "target" / "debug" / "simdex")
    port = free_port()
    serve_cmd = commands[0].split("#")[0].split()
    assert serve_cmd == ["simdex", "serve", "crawl.simdex"]
    server = subprocess.Popen([exe, *serve_cmd[1:], "--listen", f"127.0.0.1:{port}"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().startswith("listening on"), server.stderr.read()
        crawl_cmd = commands[1].split("#")[0].split()
        assert crawl_cmd == ["scrapy", "crawl", "site", "-s", "SIMDEX_URL=http://127.0.0.1:7878"]
        crawl_cmd[-1] = f"SIMDEX_URL=http://127.0.0.1:{port}"
        scrapy_exe = pathlib.Path(sys.executable).parent / "scrapy"
        p = subprocess.run([str(scrapy_exe), *crawl_cmd[1:], "-a", f"start={base}index.html", "-O", str(tmp_path / "items.jsonl")], cwd=project, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0 and "SIMDEX_URL overrides SIMDEX_INDEX = crawl.simdex" in p.stderr, p.stderr[-3000:]
        assert f"'simdex/new': {PAGES + 1}" in p.stderr, p.stderr[-3000:]
        items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
        assert sorted(i["url"].rsplit("/", 1)[1] for i in items) == sorted(pages)
        with simdex.Client(f"http://127.0.0.1:{port}") as client:
            assert client.expire_after is None
            assert len(client.live_entries()) == PAGES + 1
    finally:
        server.terminate()
        server.wait()
    # the crawl used the server's index (crawl.simdex, created by `simdex serve`), nothing else
    assert sorted(os.listdir(project)) == ["crawl.simdex", "crawler", "scrapy.cfg"]


def test_fingerprints_alone_beyond_3_only_when_asked(tmp_path):
    """On an index without sketches (what `simdex tune` recommends when fingerprints alone do
    best), SIMDEX_K = 4 matches within 3 unless SIMDEX_CONFIRM = False asks for 4, and the
    start line says which: a copy 4 bits away is new in the first crawl, dropped in the second."""
    rng = random.Random(4)
    fp = simdex.Fingerprinter()
    body = words(rng, 300)
    a = page("a", body)
    for at in range(len(body)):
        b = page("a", body[:at] + ["changedword", "another"] + body[at + 2 :])
        if bin(fp.fingerprint_html(a.encode()) ^ fp.fingerprint_html(b.encode())).count("1") == 4:
            break
    else:
        pytest.fail("no copy 4 bits away")
    root = tmp_path / "site"
    root.mkdir()
    (root / "a.html").write_text(a)
    (root / "b.html").write_text(b)
    base, server = serve(root)
    try:
        for run, confirm in (("asked", False), ("default", True)):
            index = tmp_path / f"idx-{run}"
            simdex.Index(index, k=4, sketches=False).close()
            settings = {"SIMDEX_K": 4, "CONCURRENT_REQUESTS": 1}
            if not confirm:
                settings["SIMDEX_CONFIRM"] = False
            stats, _, log = crawl(base, ["a.html", "b.html"], index, tmp_path / f"{run}.json", settings)
            if confirm:
                assert "within k = 3 by fingerprints alone (SIMDEX_K = 4, but the index has no sketches" in log, log[-2000:]
                assert stats == {"simdex/new": 2}, stats
            else:
                assert "within k = 4 by fingerprints alone (SIMDEX_CONFIRM = False)" in log, log[-2000:]
                assert stats == {"simdex/new": 1, "simdex/near_duplicates": 1}, stats
    finally:
        server.kill()
        server.wait()


def test_the_server_serves_its_index_window_by_the_system_clock(tmp_path, cli):
    """`simdex serve --expire-after` pins a window in the index it creates and its clients see
    it; what is older than the window stops matching through the server. The server runs
    under libfaketime at 60x (a 60 s window, 6 s slices, passes in about a second); skipped
    without faketime (apt-get install faketime)."""
    if shutil.which("faketime") is None or subprocess.run(["faketime", "-f", "+0 x60", "true"], capture_output=True).returncode != 0:
        pytest.skip("faketime is not installed")
    exe = os.environ.get("SIMDEX") or str(pathlib.Path(__file__).resolve().parents[2] / "target" / "debug" / "simdex")
    port = free_port()
    # only the wall clock runs fast (the server's timers use the monotonic clock)
    env = dict(os.environ, FAKETIME_DONT_FAKE_MONOTONIC="1")
    # faketime runs the server as its child: a session of their own, so that both are stopped
    server = subprocess.Popen(
        ["faketime", "-f", "+0 x60", exe, "serve", str(tmp_path / "served"), "--listen", f"127.0.0.1:{port}", "--expire-after", "60s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert server.stdout.readline().startswith("listening on"), server.stderr.read()
        with simdex.Client(f"http://127.0.0.1:{port}") as client:
            assert client.expire_after == 60 and client.stats()["expire_granularity_secs"] == 6
            client.insert(0x0123456789ABCDEF, 7)
            assert [m[2] for m in client.query(0x0123456789ABCDEF, k=0)] == [7]
            # 2 s of real time: 120 s on the server's clock, past 60 s + 6 s
            time.sleep(2)
            assert client.query(0x0123456789ABCDEF, k=0) == []
            assert client.find_or_insert(0x0123456789ABCDEF, 8) == []
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()
