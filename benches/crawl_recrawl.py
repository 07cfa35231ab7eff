"""Issue 36's crawler scenarios, before and after: run with the Python of a virtualenv where a
simdex wheel and scrapy are installed (the build under test), prints one table row per
scenario. `python benches/crawl_recrawl.py [--simdex PATH_TO_CLI]`.

- maintenance: ten pages that answer 503 with one maintenance page the first time, then the
  real page, and an index page linking them; robots.txt answers a 404 page. One crawl with the
  middleware at the place the build's README gives (``--priority``, 950 before issue 36, 540
  after) and ROBOTSTXT_OBEY: items that reach the spider (of 11), whether the maintenance body
  and the 404 body are in the index.
- recrawl: a site of 60 pages linking each other; two link-following crawls in new processes
  with the middleware and the pipeline (SIMDEX_ID_FIELD = "url"): items of the second crawl
  that the first produced, pages the second crawl's spider saw.
- snippets: the README's settings.py (SIMDEX_INDEX) with `-s SIMDEX_URL=` of a running
  `simdex serve`: does the crawl run.
- expiry: `simdex.Index(path, expire_after="30d")`; non-empty: `simdex.Index(dir of other files)`.
"""

import argparse
import http.server
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request

import simdex

CRAWL = textwrap.dedent(
    """
    import json, sys
    import scrapy
    from scrapy.crawler import CrawlerProcess
    base, index, out, settings = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    seen = []
    class Site(scrapy.Spider):
        name = "site"
        start_urls = [base + "index.html"]
        def parse(self, response):
            seen.append(response.url)
            yield {"url": response.url, "text": " ".join(response.css("p::text").getall())}
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href)
    process = CrawlerProcess(settings={"SIMDEX_INDEX": index, "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": False,
                                       "FEEDS": {out + ".items.jsonl": {"format": "jsonlines", "overwrite": True}}, **settings})
    crawler = process.create_crawler(Site)
    process.crawl(crawler)
    process.start()
    json.dump({"seen": seen, "stats": {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simdex/")}}, open(out, "w"))
    """
)


def words(rng, n):
    vocab = [f"{a}{b}" for a in "bcdfghklmnprstvz" for b in ["ar", "en", "il", "on", "us", "ey", "ow", "ix"]]
    return " ".join(rng.choice(vocab) for _ in range(n))


def page(title, body, links=()):
    anchors = "".join(f'<a href="{h}">{h}</a> ' for h in links)
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{body}</p>{anchors}</body></html>"


class Site:
    """A local site: ``pages`` (name -> HTML); names in ``flaky`` answer 503 with
    ``maintenance`` the first time; anything else is a 404 with ``missing``."""

    def __init__(self, pages, flaky=(), maintenance="", missing="not found"):
        self.pages, self.flaky, self.asked = pages, set(flaky), {}
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                name = self.path.lstrip("/")
                site.asked[name] = site.asked.get(name, 0) + 1
                if name in site.pages and not (name in site.flaky and site.asked[name] == 1):
                    status, body = 200, site.pages[name]
                elif name in site.pages:
                    status, body = 503, maintenance
                else:
                    status, body = 404, missing
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                if status == 503:
                    self.send_header("Retry-After", "0")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def crawl(base, index, out, settings):
    p = subprocess.run([sys.executable, "-c", CRAWL, base, index, out, json.dumps(settings)], capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or not os.path.exists(out):
        return None, [], p.stderr
    items = [json.loads(line) for line in open(out + ".items.jsonl")] if os.path.exists(out + ".items.jsonl") else []
    return json.load(open(out)), items, p.stderr


def maintenance(tmp, priority):
    rng = random.Random(36)
    pages = {f"page-{i}.html": page(f"page {i}", words(rng, 300)) for i in range(10)}
    pages["index.html"] = page("index", words(rng, 200), sorted(pages))
    down = page("down for maintenance", "we are down for maintenance please come back later " * 12)
    missing = page("not found", "the page you asked for is not here sorry " * 12)
    site = Site(pages, flaky=[n for n in pages if n.startswith("page-")], maintenance=down, missing=missing)
    try:
        index = os.path.join(tmp, "maint.simdex")
        result, items, log = crawl(site.base, index, os.path.join(tmp, "maint.json"), {"DOWNLOADER_MIDDLEWARES": {"simdex.scrapy.NearDuplicateMiddleware": priority}, "ROBOTSTXT_OBEY": True})
    finally:
        site.close()
    fp = simdex.Fingerprinter()
    with simdex.Index(index, read_only=True) as idx:
        stored = {f for f, _ in idx.live_entries()}
    return {
        "items reaching the spider (of 11)": len(items),
        "maintenance body stored": fp.fingerprint_html(down.encode()) in stored,
        "robots.txt 404 body stored": fp.fingerprint_html(missing.encode()) in stored,
        "simdex stats": result["stats"] if result else log[-500:],
    }


def recrawl(tmp, priority):
    rng = random.Random(20)
    names = [f"p{i}.html" for i in range(60)]
    pages = {n: page(n, words(rng, 250), rng.sample(names, 8)) for n in names}
    pages["index.html"] = page("index", words(rng, 200), names[:5])
    site = Site(pages)
    settings = {"DOWNLOADER_MIDDLEWARES": {"simdex.scrapy.NearDuplicateMiddleware": priority}, "ITEM_PIPELINES": {"simdex.scrapy.NearDuplicatePipeline": 300}, "SIMDEX_ID_FIELD": "url"}
    try:
        index = os.path.join(tmp, "recrawl.simdex")
        r1, items1, _ = crawl(site.base, index, os.path.join(tmp, "r1.json"), settings)
        r2, items2, _ = crawl(site.base, index, os.path.join(tmp, "r2.json"), settings)
    finally:
        site.close()
    first = {i["url"] for i in items1}
    return {
        "items, first crawl": len(items1),
        "items, second crawl": len(items2),
        "second-crawl items the first produced": sum(1 for i in items2 if i["url"] in first),
        "pages the spider saw, first / second crawl": f"{len(r1['seen'])} / {len(r2['seen'])}",
    }


SNIPPET_CRAWL = textwrap.dedent(
    """
    import json, sys
    import scrapy
    from scrapy.crawler import CrawlerProcess
    from scrapy.settings import Settings
    base, index, url = sys.argv[1:4]
    # settings.py's SIMDEX_INDEX at the project's priority, `-s SIMDEX_URL=` at the command line's
    st = Settings()
    st.setdict({"DOWNLOADER_MIDDLEWARES": {"simdex.scrapy.NearDuplicateMiddleware": 540}, "SIMDEX_INDEX": index, "TELNETCONSOLE_ENABLED": False}, priority="project")
    st.set("SIMDEX_URL", url, priority="cmdline")
    class Site(scrapy.Spider):
        name = "site"
        start_urls = [base + "index.html"]
        def parse(self, response):
            yield {"url": response.url}
    process = CrawlerProcess(settings=st)
    crawler = process.create_crawler(Site)
    process.crawl(crawler)
    process.start()
    print(json.dumps({k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simdex/")}))
    """
)


def snippets(tmp, cli):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    site = Site({"index.html": page("index", words(random.Random(1), 200))})
    server = subprocess.Popen([cli, "serve", os.path.join(tmp, "served.simdex"), "--listen", f"127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        server.stdout.readline()
        p = subprocess.run([sys.executable, "-c", SNIPPET_CRAWL, site.base, os.path.join(tmp, "local.simdex"), f"http://127.0.0.1:{port}"], capture_output=True, text=True, timeout=300)
        ok = p.returncode == 0 and '"simdex/new": 1' in p.stdout
        why = "crawled through the server" if ok else ("fails: " + ("SIMDEX_INDEX and SIMDEX_URL are both set" if "both set" in p.stderr or "both are set" in p.stderr else p.stderr[-300:]))
    finally:
        server.terminate()
        server.wait()
        site.close()
    return {"README settings.py + -s SIMDEX_URL": why}


def index_options(tmp):
    out = {}
    try:
        with simdex.Index(os.path.join(tmp, "news.simdex"), expire_after="30d") as idx:
            out['Index(path, expire_after="30d")'] = f"window {idx.expire_after} s"
    except TypeError as e:
        out['Index(path, expire_after="30d")'] = f"TypeError: {e}"
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    open(os.path.join(home, "thesis.tex"), "w").write("mine")
    try:
        simdex.Index(home).close()
        out["Index(dir of other files)"] = "turned into an index: " + ", ".join(sorted(os.listdir(home)))
    except simdex.Error as e:
        out["Index(dir of other files)"] = "refused: " + str(e)[:80] + "..."
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--priority", type=int, default=540, help="the middleware's place (the build's README: 950 before issue 36, 540 after)")
    ap.add_argument("--simdex", default="target/release/simdex", help="the CLI, for `simdex serve`")
    args = ap.parse_args()
    print(f"simdex from {os.path.dirname(simdex.__file__)}, middleware at {args.priority}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, f in (("maintenance", lambda: maintenance(tmp, args.priority)), ("recrawl", lambda: recrawl(tmp, args.priority)), ("snippets", lambda: snippets(tmp, args.simdex)), ("options", lambda: index_options(tmp))):
            t = time.monotonic()
            for k, v in f().items():
                print(f"| {name} | {k} | {v} |")
            print(f"| {name} | seconds | {time.monotonic() - t:.1f} |")


if __name__ == "__main__":
    main()
