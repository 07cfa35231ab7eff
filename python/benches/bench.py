"""Measures the issue-10 targets and prints a table (no assertions; run it by hand):

    target/python-test-venv/bin/python python/benches/bench.py [--only batch]

1. find_or_insert from Python vs the same calls in a Rust loop, on the same index;
2. add_many of a 1e7 numpy uint64 array;
3. the Scrapy middleware per page (a 50 KB HTML page fingerprinted, checked, stored);
4. (issue 20) query_many of 1M fingerprints against 1M stored, as lists and as numpy columns,
   against per-item `query` calls and the Rust batch path (`simdex batch`, release build:
   $SIMDEX_RELEASE, else target/release/simdex); find_or_insert_many against per-item calls;
   find_or_insert_documents against per-item find_or_insert_document.
"""

import os
import platform
import random
import subprocess
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
            idx.insert_many(rng.integers(0, 2**64, size=1_000_000, dtype=np.uint64))
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
            idx.insert_many(fps, ids)
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


def best(f, runs=3):
    """The fastest of `runs` timings of f() in seconds, and f's last result."""
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = f()
        times.append(time.perf_counter() - t)
    return min(times), result


def batch_rows():
    out = []
    rng = np.random.default_rng(20)
    n = 1_000_000
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cli = os.environ.get("SIMDEX_RELEASE") or os.path.join(root, "target", "release", "simdex")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "q")
        stored = rng.integers(0, 2**64, size=n, dtype=np.uint64)
        # half the queries are stored fingerprints with 0-3 bits flipped, half random
        near = stored[rng.integers(0, n, size=n // 2)].copy()
        for _ in range(3):
            flip = rng.integers(0, 64, size=near.size, dtype=np.uint64)
            near ^= (rng.integers(0, 2, size=near.size, dtype=np.uint64) << flip).astype(np.uint64)
        queries = np.concatenate([near, rng.integers(0, 2**64, size=n - near.size, dtype=np.uint64)])
        rng.shuffle(queries)
        with simdex.Index(path, k=3, durability="nosync") as idx:
            idx.insert_many(stored, np.arange(n, dtype=np.uint64))
            idx.compact()
            s_lists, lists = best(lambda: idx.query_many(queries))
            s_cols, cols = best(lambda: idx.query_many(queries, columnar=True))
            matches = len(cols.fingerprint)
            assert sum(map(len, lists)) == matches
            sample = [int(q) for q in queries[:100_000]]
            s_one, _ = best(lambda: [idx.query(q) for q in sample], runs=1)
            per_item_us = s_one / len(sample) * 1e6
        qfile = os.path.join(d, "queries.bin")
        queries.astype("<u8").tofile(qfile)
        cmd = [cli, "batch", path, "--queries", qfile, "--binary", "-k", "3"]
        s_rust, _ = best(lambda: subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True))
        out.append((f"Rust batch path: `simdex batch --binary -k 3` ({matches:,} matches, output to /dev/null)", f"{s_rust / n * 1e6:.3f} us/item", f"{s_rust:.2f} s for 1M"))
        out.append(("query_many 1M, numpy columns", f"{s_cols / n * 1e6:.3f} us/item", f"{s_cols / s_rust:.2f}x the Rust batch path (goal <= 1.5x)"))
        out.append(("query_many 1M, lists of tuples", f"{s_lists / n * 1e6:.3f} us/item", f"{s_lists / s_rust:.2f}x the Rust batch path"))
        out.append(("query, one call per item (100K of them)", f"{per_item_us:.3f} us/item", f"{per_item_us * n / 1e6 / s_cols:.1f}x query_many columns"))
        # find_or_insert_many vs one call per item, 200K new or near fingerprints each
        m = 200_000
        with simdex.Index(os.path.join(d, "f1"), durability="nosync") as a, simdex.Index(os.path.join(d, "f2"), durability="nosync") as b:
            for idx in (a, b):
                idx.insert_many(stored, np.arange(n, dtype=np.uint64))
                idx.compact()
            fps, ids = queries[:m], np.arange(n, n + m, dtype=np.uint64)
            s_many, _ = best(lambda: a.find_or_insert_many(fps, ids), runs=1)
            pairs = [(int(f), int(i)) for f, i in zip(fps, ids)]
            s_each, _ = best(lambda: [b.find_or_insert(f, i) for f, i in pairs], runs=1)
        out.append(("find_or_insert_many 200K (lists)", f"{s_many / m * 1e6:.3f} us/item", f"one call per item: {s_each / m * 1e6:.3f} us/item"))
        # documents: 2,000 pages of 2,000 words, with sketches (the default), half near copies
        r = random.Random(20)
        vocab = [f"w{i}" for i in range(20_000)]
        base = [" ".join(r.choice(vocab) for _ in range(2000)) for _ in range(1000)]
        docs = base + [" ".join(w if r.random() > 0.01 else "edit" for w in p.split()) for p in base]
        docs = [f"<html><body><p>{t}</p></body></html>".encode() for t in docs]
        doc_ids = list(range(len(docs)))
        with simdex.Index(os.path.join(d, "d1"), durability="nosync") as a, simdex.Index(os.path.join(d, "d2"), durability="nosync") as b:
            s_docs, got = best(lambda: a.find_or_insert_documents(docs, doc_ids, k=8), runs=1)
            s_doc, _ = best(lambda: [b.find_or_insert_document(p, i, k=8) for p, i in zip(docs, doc_ids)], runs=1)
            s_fp, _ = best(lambda: a.fingerprint_documents(docs))
        kb = sum(map(len, docs)) / len(docs) / 1024
        found = sum(1 for g in got if g[1])
        out.append((f"find_or_insert_documents, 2,000 pages of {kb:.0f} KB, k=8 ({found} found)", f"{s_docs / len(docs) * 1e3:.3f} ms/page", f"one call per page: {s_doc / len(docs) * 1e3:.3f} ms/page"))
        out.append(("fingerprint_documents, the same pages", f"{s_fp / len(docs) * 1e3:.3f} ms/page", ""))
    return out


def main():
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    table = batch_rows() if sys.argv[1:] == ["--only", "batch"] else rows() + batch_rows()
    w = max(len(r[0]) for r in table)
    for name, value, note in table:
        print(f"{name:<{w}}  {value:>16}  {note}")


if __name__ == "__main__":
    main()
