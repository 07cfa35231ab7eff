"""Measures the issue-10 targets and prints a table (no assertions; run it by hand):

    target/python-venv/bin/python python/benches/bench.py

1. find_or_insert from Python vs the same calls in a Rust loop, on the same index;
2. add_many of a 1e7 numpy uint64 array;
3. the Scrapy middleware per page (a 50 KB HTML page fingerprinted, checked, stored).
"""

import os
import platform
import random
import sys
import tempfile
import time

import numpy as np

import simdex


def rows():
    out = []
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as d:
        # 1. find_or_insert, Python vs Rust, both into a 1M-pair index (nosync: the call, not the disk)
        with simdex.Index(os.path.join(d, "a"), durability="nosync") as idx:
            idx.add_many(rng.integers(0, 2**64, size=1_000_000, dtype=np.uint64))
            idx.flush()
            n = 200_000
            py_fps = [int(x) for x in rng.integers(0, 2**64, size=n, dtype=np.uint64)]
            rust_fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
            # alternate chunks, so that both see the same index sizes
            py_s = rust_s = 0.0
            for c in range(0, n, 10_000):
                t = time.perf_counter()
                for i, f in enumerate(py_fps[c : c + 10_000]):
                    idx.find_or_insert(f, c + i)
                py_s += time.perf_counter() - t
                rust_s += idx._bench_find_or_insert(rust_fps[c : c + 10_000].tobytes(), 10**9 + c)
            py_us, rust_us = py_s / n * 1e6, rust_s / n * 1e6
            out.append(("find_or_insert, 1M stored, k=3 (Python)", f"{py_us:.2f} us/call", "target: within 5 us of Rust"))
            out.append(("find_or_insert, same index (Rust loop)", f"{rust_us:.2f} us/call", f"difference {py_us - rust_us:+.2f} us"))
            t = time.perf_counter()
            for f in py_fps[:100_000]:
                idx.query(f)
            out.append(("query, k=3 (Python)", f"{(time.perf_counter() - t) / 100_000 * 1e6:.2f} us/call", ""))
        # 2. add_many of 1e7
        with simdex.Index(os.path.join(d, "b"), durability="group") as idx:
            fps = rng.integers(0, 2**64, size=10_000_000, dtype=np.uint64)
            ids = np.arange(10_000_000, dtype=np.uint64)
            t = time.perf_counter()
            idx.add_many(fps, ids)
            idx.sync()
            s = time.perf_counter() - t
            out.append(("add_many 1e7 numpy uint64 (+ sync)", f"{1e7 / s / 1e6:.2f} M fps/s", "target: >= 2 M/s"))
        # 3. the middleware, per page
        from scrapy.http import HtmlResponse, Request
        from scrapy.utils.test import get_crawler

        import simdex.scrapy as sx

        crawler = get_crawler(settings_dict={"SIMDEX_INDEX": os.path.join(d, "c")})
        mw = sx.NearDuplicateMiddleware.from_crawler(crawler)
        r = random.Random(5)
        vocab = [f"w{i}" for i in range(20_000)]

        def page_html():
            paras = "".join("<p>" + " ".join(r.choice(vocab) for _ in range(100)) + "</p>\n" for _ in range(70))
            return f"<html><head><title>t</title><script>var x = 1;</script></head><body><nav>home about</nav>{paras}</body></html>".encode()

        pages = [page_html() for _ in range(300)]
        size = sum(map(len, pages)) / len(pages)
        responses = [HtmlResponse(url=f"http://x/{i}", body=b, request=Request(f"http://x/{i}"), headers={"Content-Type": "text/html"}) for i, b in enumerate(pages)]

        class Spider:
            logger = __import__("logging").getLogger("bench")

        t = time.perf_counter()
        for resp in responses:
            mw.process_response(resp.request, resp, Spider())
        ms = (time.perf_counter() - t) / len(responses) * 1e3
        out.append((f"middleware per new page ({size / 1024:.0f} KB HTML)", f"{ms:.3f} ms/page", "target: < 1 ms"))
        mw.spider_closed(None)
    return out


def main():
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    table = rows()
    w = max(len(r[0]) for r in table)
    for name, value, note in table:
        print(f"{name:<{w}}  {value:>16}  {note}")


if __name__ == "__main__":
    main()
