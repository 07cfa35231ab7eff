#!/usr/bin/env python3
"""`simdex serve` side by side with Redis, the incumbent (issue 21, item 6).

One run starts a real ``redis-server`` (the scrapy-redis setup: default RDB snapshots
``save 3600 1 300 100 60 10000``, ``appendonly no``; and a durable peer, ``appendonly yes``
with ``appendfsync everysec``) and ``simdex serve`` (``--durability group``, the default; and
``--durability sync``), each on 127.0.0.1 in a temp dir of its own, and drives them from 1, 4
and 16 client processes (spawned, one connection each, released at once):

- single:  ``Client.find_or_insert(fp, id)``  against  ``r.sadd(key, fp)`` (scrapy-redis'
  ``RFPDupeFilter``), one call at a time;
- batch:   ``Client.find_or_insert_many`` of 1,000 (numpy uint64)  against  1,000 SADDs in
  ``pipeline(transaction=False)``.

Every cell sends the same random 64-bit values to both servers (process i of a cell its own
stream), runs ``--seconds`` from the release, and reports ops/s (ops / wall time from the
release to the last process' finish), p50/p99 per call or per batch, the server's CPU per
operation (utime+stime of /proc/PID/stat) and the clients' CPU per operation. For each client
count and mode the servers take turns (redis, simdex, redis-aof, simdex-sync), so a noisy
neighbour hits both. Then documents: 16 Scrapy-like processes send generated HTML pages
(3-6 KB, some near-duplicates) through ``Client.find_or_insert_document`` (and
``find_or_insert_documents`` by 100), against one process calling ``simdex.Index`` directly.

    python python/benches/serve_vs_redis.py                 # the full run (about 5 minutes)
    python python/benches/serve_vs_redis.py --quick         # a smoke run
    python python/benches/serve_vs_redis.py --clients 4 --seconds 10 --json out.json

Needs numpy, redis (redis-py), the simdex wheel with ``simdex.Client``, ``redis-server`` and a
release build of the ``simdex`` binary (``cargo build --release -p simdex-cli``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import pickle
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]
CLK_TCK = os.sysconf("SC_CLK_TCK")
REDIS_KEY = "bench:dupefilter"  # one set, as scrapy-redis keeps one per spider
GOAL_BATCH, GOAL_SINGLE, GOAL_P50 = 0.5, 0.5, 2.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def proc_cpu(pid: int) -> Dict[str, float]:
    """Seconds of CPU of a process (all its threads), and of its reaped children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ut, st, cut, cst = (int(x) for x in fields[11:15])  # fields 14-17 of proc(5)
    return {"self": (ut + st) / CLK_TCK, "children": (cut + cst) / CLK_TCK}


def machine_cpu() -> List[int]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = v[3] + v[4]
    return [sum(v[:8]) - idle, sum(v[:8])]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- servers ------------------------------------------------------------------------------------


class Server:
    def __init__(self, name: str, kind: str, proc: subprocess.Popen, address: str, note: str) -> None:
        self.name, self.kind, self.proc, self.address, self.note = name, kind, proc, address, note

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_redis(binary: str, root: Path, name: str, aof: bool) -> Server:
    d = root / name
    d.mkdir()
    port = free_port()
    conf = [
        "bind 127.0.0.1",
        f"port {port}",
        f"dir {d}",
        "daemonize no",
        "protected-mode yes",
        f"logfile {d / 'redis.log'}",
        "save 3600 1 300 100 60 10000",  # Redis' default snapshots, as scrapy-redis users run it
        f"appendonly {'yes' if aof else 'no'}",
        "appendfsync everysec",
    ]
    (d / "redis.conf").write_text("\n".join(conf) + "\n")
    proc = subprocess.Popen([binary, str(d / "redis.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = Server(name, "redis", proc, f"127.0.0.1:{port}", "AOF everysec + RDB" if aof else "RDB default saves")
    import redis

    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {proc.returncode}; see {d / 'redis.log'}")
        try:
            r = redis.Redis(host="127.0.0.1", port=port)
            if r.ping():
                saves = r.config_get("save")["save"]
                log(f"{name}: redis-server pid {proc.pid} on {server.address}, save {saves!r}, appendonly {r.config_get('appendonly')['appendonly']}")
                r.close()
                return server
        except redis.exceptions.ConnectionError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"redis-server on port {port} did not answer in 30 s")
        time.sleep(0.05)


def start_simdex(binary: str, root: Path, name: str, durability: str, extra: Optional[List[str]] = None) -> Server:
    d = root / name
    d.mkdir()
    err = open(d / "serve.log", "wb")
    proc = subprocess.Popen([binary, "serve", str(d / "idx"), "--listen", "127.0.0.1:0", "--durability", durability, *(extra or [])], stdout=subprocess.PIPE, stderr=err)
    lines: List[bytes] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(60)
    if not lines or not lines[0].startswith(b"listening on http://"):
        proc.kill()
        raise RuntimeError(f"simdex serve did not start: {lines!r}; see {d / 'serve.log'}")
    url = lines[0].decode().split()[-1]
    import simdex

    with simdex.Client(url) as c:
        c.stats()  # answers: the index is open
    log(f"{name}: simdex serve pid {proc.pid} at {url}, --durability {durability}")
    return Server(name, "simdex", proc, url, " ".join([f"--durability {durability}", *(extra or [])]))


# -- client processes ---------------------------------------------------------------------------


def values(seed: List[int]):
    """Blocks of random 64-bit values: the stream of one process of one cell."""
    import numpy as np

    rng = np.random.default_rng(seed)
    while True:
        yield rng.integers(0, 2**64, size=65536, dtype=np.uint64, endpoint=False)


def worker(idx: int, tasks: Any, results: Any, ready: Any, release: Any) -> None:
    """One client process: runs the cells it is sent, each released by `release`."""
    import numpy as np

    while True:
        task = tasks.get()
        if task is None:
            return
        said = []

        def go() -> None:  # ready, then wait for the release: called once per cell
            said.append(idx)
            ready.put(idx)
            release.wait()

        try:
            out = run_task(idx, task, go, np)
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            if not said:
                go()
            out = {"error": f"process {idx}: {type(e).__name__}: {e}"}
        results.put(out)


def run_task(idx: int, task: Dict[str, Any], go: Any, np: Any) -> Dict[str, Any]:
    kind, mode, batch = task["kind"], task["mode"], task["batch"]
    if task.get("docs"):
        return run_docs(idx, task, go)
    stream = values([task["seed"], idx])
    block = next(stream)
    pos, ids_next = 0, task["id_base"] + (idx << 36)
    lat: List[int] = []
    ops = new = 0
    if kind == "redis":
        import redis

        host, port = task["address"].split(":")
        conn = redis.Redis(host=host, port=int(port))
        conn.ping()
    else:
        import simdex

        conn = simdex.Client(task["address"])
        conn.query(0)
    go()
    t0, c0 = time.monotonic(), os.times()
    end_ns = time.perf_counter_ns() + int(task["seconds"] * 1e9)
    single = block.tolist() if mode == "single" else None
    while True:
        if pos + batch > len(block):
            block, pos = next(stream), 0
            single = block.tolist() if mode == "single" else None
        if mode == "single":
            v = single[pos]  # type: ignore[index]
            s = time.perf_counter_ns()
            if kind == "redis":
                new += conn.sadd(REDIS_KEY, v)
            else:
                new += not conn.find_or_insert(v, ids_next)
            e = time.perf_counter_ns()
            n = 1
        else:
            fps = block[pos : pos + batch]
            s = time.perf_counter_ns()
            if kind == "redis":
                p = conn.pipeline(transaction=False)
                for v in fps.tolist():
                    p.sadd(REDIS_KEY, v)
                new += sum(p.execute())
            else:
                ids = np.arange(ids_next, ids_next + batch, dtype=np.uint64)
                new += sum(1 for m in conn.find_or_insert_many(fps, ids) if not m)
            e = time.perf_counter_ns()
            n = batch
        lat.append(e - s)
        pos += n
        ids_next += n
        ops += n
        if e >= end_ns:
            break
    t1, c1 = time.monotonic(), os.times()
    conn.close()
    return {"ops": ops, "new": new, "start": t0, "end": t1, "cpu": (c1.user + c1.system) - (c0.user + c0.system), "lat": np.array(lat, dtype=np.int64).tobytes()}


class Pool:
    """`n` spawned client processes, kept for every cell of one client count."""

    def __init__(self, n: int) -> None:
        ctx = mp.get_context("spawn")
        self.n = n
        self.ready, self.results, self.release = ctx.Queue(), ctx.Queue(), ctx.Event()
        self.tasks = [ctx.Queue() for _ in range(n)]
        self.procs = [ctx.Process(target=worker, args=(i, self.tasks[i], self.results, self.ready, self.release), daemon=True) for i in range(n)]
        for p in self.procs:
            p.start()

    def run(self, task: Dict[str, Any], pid: int) -> Dict[str, Any]:
        """Sends `task` to every process, releases them together once all are ready, and
        gathers what they measured."""
        self.release.clear()
        for q in self.tasks:
            q.put(task)
        for _ in range(self.n):
            self.ready.get(timeout=600)
        cpu0, m0 = proc_cpu(pid), machine_cpu()
        t_release = time.monotonic()
        self.release.set()
        outs = [self.results.get(timeout=task.get("timeout", 600)) for _ in range(self.n)]
        cpu1, m1 = proc_cpu(pid), machine_cpu()
        self.release.clear()
        errors = [o["error"] for o in outs if "error" in o]
        if errors:
            raise RuntimeError("; ".join(errors))
        return {
            "outs": outs,
            "wall": max(o["end"] for o in outs) - t_release,
            "server_cpu": cpu1["self"] - cpu0["self"],
            "server_children_cpu": cpu1["children"] - cpu0["children"],
            "machine_busy": (m1[0] - m0[0]) / max(1, m1[1] - m0[1]),
        }

    def close(self) -> None:
        for q in self.tasks:
            q.put(None)
        for p in self.procs:
            p.join(30)
            if p.is_alive():
                p.terminate()


def cell(pool: Pool, server: Server, mode: str, seconds: float, batch: int, seed: int, id_base: int) -> Dict[str, Any]:
    import numpy as np

    task = {"kind": server.kind, "mode": mode, "address": server.address, "seconds": seconds, "batch": batch if mode == "batch" else 1, "seed": seed, "id_base": id_base}
    r = pool.run(task, server.pid)
    outs = r["outs"]
    ops = sum(o["ops"] for o in outs)
    lat = np.concatenate([np.frombuffer(o["lat"], dtype=np.int64) for o in outs]) / 1e3
    return {
        "server": server.name,
        "kind": server.kind,
        "config": server.note,
        "clients": pool.n,
        "mode": mode,
        "ops": ops,
        "new": sum(o["new"] for o in outs),
        "wall_s": r["wall"],
        "ops_per_s": ops / r["wall"],
        "p50_us": float(np.percentile(lat, 50)),
        "p99_us": float(np.percentile(lat, 99)),
        "server_cpu_us_per_op": r["server_cpu"] * 1e6 / ops,
        "server_children_cpu_s": r["server_children_cpu"],
        "client_cpu_us_per_op": sum(o["cpu"] for o in outs) * 1e6 / ops,
        "machine_busy": r["machine_busy"],
    }


# -- documents ----------------------------------------------------------------------------------

WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her "
    "she there been one all we their has would when if so no will more can about what out said up into some than them only other "
    "time new could these two may first then do any like my now over such our man me even most made after also did many before "
    "must through back years where much your way well down should because each just those people how too little state good very "
    "make world still own see men work long get here between both life being under never day same another know while last might "
    "us great old year off come since against go came right used take three states himself few house use during without again "
    "place american around however home small found thought went say part once general high upon school every does got united "
    "left number course war until always away something fact though water less public put think almost hand enough far took head "
    "yet government system better set told nothing night end why called did eyes find going look asked later knew point next city "
    "business give group toward young days let room president side social given present several order national possible rather "
    "second face per among form important often things looked early white case large become big need four within felt along "
    "children saw best church ever least power development light thing seemed family interest want members others mind country "
    "area done market price crawler index page search engine data report review season garden recipe travel music film health"
).split()
NAV = "Home News Sports Business Culture Travel Opinion Weather Contact About Privacy Terms Subscribe Archive"


def _paragraphs(seed: int, src: int) -> List[str]:
    """The article of original page `src`: paragraphs of Zipf-distributed words, 2.6-5.2 KB."""
    import numpy as np

    rng = np.random.default_rng([seed, src, 1])
    probs = 1.0 / np.arange(1, len(WORDS) + 1)
    words = [WORDS[k] for k in rng.choice(len(WORDS), size=1200, p=probs / probs.sum()).tolist()]
    paras, start, size, target = [], 0, 0, int(rng.integers(2600, 5200))
    while size < target:
        n = int(rng.integers(40, 110))
        text = " ".join(words[start : start + n]).capitalize() + "."
        paras.append(text)
        start, size = start + n, size + len(text) + 8
    return paras


def page(i: int, seed: int) -> bytes:
    """Page i of the site: 3-6 KB of HTML; every fifth a near-duplicate of an earlier original
    page (the same article with about 1 word in 150 changed, another date and related links)."""
    rng = random.Random(f"{seed}:{i}")
    src = rng.randrange(i) if i % 5 == 4 else i
    src -= src % 5 == 4 and src != i  # an original page's article
    paras = _paragraphs(seed, src)
    if src != i:  # about 1 word in 150 changed
        paras = [" ".join(w if rng.random() > 1 / 150 else rng.choice(WORDS) for w in p.split()) for p in paras]
    title = " ".join(random.Random(f"{seed}:{src}:t").choices(WORDS, k=6)).title()
    links = "".join(f'<li><a href="/p/{rng.randrange(10**6)}">{rng.choice(WORDS).title()}</a></li>' for _ in range(5))
    body = "\n".join(f"<p>{p}</p>" for p in paras)
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title><link rel="stylesheet" href="/s.css">'
        f'<script>var page={i};</script></head><body><nav>{" ".join(f"<a href=/{w.lower()}>{w}</a>" for w in NAV.split())}</nav>'
        f"<article><h1>{title}</h1><time>2026-{1 + i % 12:02d}-{1 + i % 28:02d}</time>\n{body}</article>"
        f"<aside><ul>{links}</ul></aside><footer>Copyright 2026 Example News. All rights reserved.</footer></body></html>"
    ).encode()


def run_docs(idx: int, task: Dict[str, Any], go: Any) -> Dict[str, Any]:
    import simdex

    with open(task["slices"][idx], "rb") as fh:
        mine, pages = pickle.load(fh)
    conn = simdex.Client(task["address"])
    conn.query(0)
    go()
    t0, c0 = time.monotonic(), os.times()
    dups, lat = 0, []
    b = task["batch"]
    for j in range(0, len(pages), b):
        s = time.perf_counter_ns()
        if b == 1:
            dups += bool(conn.find_or_insert_document(pages[j], mine[j], html=True)[1])
        else:
            dups += sum(not isinstance(r, Exception) and bool(r[1]) for r in conn.find_or_insert_documents(pages[j : j + b], mine[j : j + b], html=True))
        lat.append(time.perf_counter_ns() - s)
    t1, c1 = time.monotonic(), os.times()
    conn.close()
    import numpy as np

    return {"ops": len(pages), "new": len(pages) - dups, "start": t0, "end": t1, "cpu": (c1.user + c1.system) - (c0.user + c0.system), "lat": np.array(lat, dtype=np.int64).tobytes()}


def docs_phase(args: argparse.Namespace, root: Path, servers: List[Server]) -> List[Dict[str, Any]]:
    import numpy as np
    import simdex

    n, rows = args.doc_clients, []
    log(f"documents: generating {args.pages} pages")
    pages = [page(i, args.seed) for i in range(args.pages)]
    size = sum(map(len, pages)) / len(pages)
    slices = []
    for k in range(n):  # client k sends pages k, k + n, k + 2n, ...
        slices.append(str(root / f"pages-{k}.pickle"))
        with open(slices[-1], "wb") as fh:
            pickle.dump((list(range(k, len(pages), n)), pages[k::n]), fh)
    pool = Pool(n)
    try:
        for batch in (1, args.doc_batch):
            # in-process: one process, a fresh index, the same pages in order
            d = root / f"inproc-{batch}"
            with simdex.Index(d) as idx:
                c0, t0 = os.times(), time.perf_counter()
                if batch == 1:
                    dups = sum(bool(idx.find_or_insert_document(p, i, html=True)[1]) for i, p in enumerate(pages))
                else:
                    dups = sum(sum(not isinstance(r, Exception) and bool(r[1]) for r in idx.find_or_insert_documents(pages[j : j + batch], range(j, min(j + batch, len(pages))), html=True)) for j in range(0, len(pages), batch))
                t1, c1 = time.perf_counter(), os.times()
            rows.append({"where": "in-process Index", "clients": 1, "batch": batch, "pages": len(pages), "dups": dups, "wall_s": t1 - t0, "pages_per_s": len(pages) / (t1 - t0), "p50_ms": None, "process_cpu_s": (c1.user + c1.system) - (c0.user + c0.system), "server_cpu_us_per_page": None})
            log(f"documents in-process batch {batch}: {rows[-1]['pages_per_s']:.0f} pages/s, {dups} duplicates")
            shutil.rmtree(d, ignore_errors=True)
            srv = start_simdex(args.simdex, root, f"docs-{batch}", "group")
            servers.append(srv)
            try:
                task = {"docs": True, "kind": "simdex", "mode": "docs", "address": srv.address, "slices": slices, "batch": batch, "timeout": 3600}
                r = pool.run(task, srv.pid)
            finally:
                srv.stop()
            lat = np.concatenate([np.frombuffer(o["lat"], dtype=np.int64) for o in r["outs"]]) / 1e6
            got = sum(o["ops"] for o in r["outs"])
            rows.append({"where": f"simdex serve, {n} client processes", "clients": n, "batch": batch, "pages": got, "dups": got - sum(o["new"] for o in r["outs"]), "wall_s": r["wall"], "pages_per_s": got / r["wall"], "p50_ms": float(np.percentile(lat, 50)), "client_cpu_s": sum(o["cpu"] for o in r["outs"]), "server_cpu_us_per_page": r["server_cpu"] * 1e6 / got, "machine_busy": r["machine_busy"]})
            log(f"documents served batch {batch}: {rows[-1]['pages_per_s']:.0f} pages/s, {rows[-1]['dups']} duplicates")
    finally:
        pool.close()
    for row in rows:
        row["avg_page_bytes"] = size
    return rows


# -- the run ------------------------------------------------------------------------------------


def ratios(cells: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    by = {(c["server"], c["clients"], c["mode"]): c for c in cells}
    out = []
    for (simdex_name, redis_name) in (("simdex", "redis"), ("simdex-sync", "redis-aof")):
        for n in sorted({c["clients"] for c in cells}):
            s1, sb, r1, rb = by.get((simdex_name, n, "single")), by.get((simdex_name, n, "batch")), by.get((redis_name, n, "single")), by.get((redis_name, n, "batch"))
            row: Dict[str, Any] = {"pair": f"{simdex_name} / {redis_name}", "clients": n}
            if sb and rb:
                row["batch_ops_ratio"] = sb["ops_per_s"] / rb["ops_per_s"]
            if s1 and r1:
                row["single_ops_ratio"] = s1["ops_per_s"] / r1["ops_per_s"]
                row["single_p50_ratio"] = s1["p50_us"] / r1["p50_us"]
            if len(row) > 2:
                out.append(row)
    return out


def markdown(res: Dict[str, Any]) -> str:
    def f(x: Optional[float], fmt: str = ",.0f") -> str:
        return "-" if x is None else format(x, fmt)

    lines = [
        f"{res['cpu_model']}, {res['nproc']} CPUs; {res['seconds']} s per cell, batches of {res['batch']}; command: `{res['command']}`",
        "",
        "| clients | mode | server | config | ops/s | p50 | p99 (us) | server CPU us/op | client CPU us/op | machine busy |",
        "|---:|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in res["cells"]:
        unit = "us/call" if c["mode"] == "single" else "us/batch"
        lines.append(
            f"| {c['clients']} | {c['mode']} | {c['server']} | {c['config']} | {f(c['ops_per_s'])} | {f(c['p50_us'])} {unit} | {f(c['p99_us'])} | "
            f"{f(c['server_cpu_us_per_op'], '.2f')} | {f(c['client_cpu_us_per_op'], '.2f')} | {c['machine_busy']:.0%} |"
        )
    lines += ["", "| pair | clients | batch ops ratio (goal >= 0.5) | single ops ratio (goal >= 0.5) | single p50 ratio (goal <= 2) |", "|---|---:|---|---|---|"]

    def goal(x: Optional[float], ok: bool) -> str:
        return "-" if x is None else f"{x:.2f} {'met' if ok else '**missed**'}"

    for r in res["ratios"]:
        b, s, p = r.get("batch_ops_ratio"), r.get("single_ops_ratio"), r.get("single_p50_ratio")
        lines.append(f"| {r['pair']} | {r['clients']} | {goal(b, b is not None and b >= GOAL_BATCH)} | {goal(s, s is not None and s >= GOAL_SINGLE)} | {goal(p, p is not None and p <= GOAL_P50)} |")
    if res.get("docs"):
        lines += ["", f"Documents: {res['docs'][0]['pages']} generated HTML pages, {res['docs'][0]['avg_page_bytes']:,.0f} bytes on average, find_or_insert_document(s) on a fresh index each row", ""]
        lines += ["| where | batch | pages/s | p50 per call | duplicates found | server CPU us/page |", "|---|---:|---:|---:|---:|---:|"]
        for d in res["docs"]:
            lines.append(f"| {d['where']} | {d['batch']} | {f(d['pages_per_s'])} | {f(d['p50_ms'], '.2f') + ' ms' if d['p50_ms'] is not None else '-'} | {d['dups']} | {f(d['server_cpu_us_per_page'], '.1f')} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", help="client process counts (default 1,4,16)")
    ap.add_argument("--seconds", type=float, help="seconds per cell (default 5)")
    ap.add_argument("--batch", type=int, default=1000, help="batch size (default 1000)")
    ap.add_argument("--modes", default="single,batch")
    ap.add_argument("--no-durable", action="store_true", help="skip the redis appendonly and simdex --durability sync rows")
    ap.add_argument("--pages", type=int, help="HTML pages for the document rows (default 12000; 0: skip them)")
    ap.add_argument("--doc-clients", type=int, default=16)
    ap.add_argument("--doc-batch", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 1 and 4 clients, 1 s cells, 2,000 pages")
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--simdex", default=str(REPO / "target" / "release" / "simdex"), help="the simdex binary")
    ap.add_argument("--simdex-args", default="", help="more arguments of simdex serve (e.g. '--threads 1')")
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON ('-': stdout, the table then goes to stderr)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, indexes)")
    args = ap.parse_args()
    for name, full, quick in (("clients", "1,4,16", "1,4"), ("seconds", 5.0, 1.0), ("pages", 12000, 2000)):
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    clients = [int(x) for x in args.clients.split(",") if x]
    modes = [m for m in args.modes.split(",") if m]
    for path in (args.simdex, args.redis_server):
        if not os.access(path, os.X_OK):
            ap.error(f"{path}: not an executable (build with `cargo build --release -p simdex-cli`)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup below
    root = Path(tempfile.mkdtemp(prefix="serve-vs-redis-"))
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    log(f"load average at start {' '.join(load0)} (other work on this machine shows up as 'machine busy')")
    servers: List[Server] = []
    try:
        servers.append(start_redis(args.redis_server, root, "redis", aof=False))
        servers.append(start_simdex(args.simdex, root, "simdex", "group", args.simdex_args.split()))
        if not args.no_durable:
            servers.append(start_redis(args.redis_server, root, "redis-aof", aof=True))
            servers.append(start_simdex(args.simdex, root, "simdex-sync", "sync", args.simdex_args.split()))
        cells: List[Dict[str, Any]] = []
        for ci, n in enumerate(clients):
            pool = Pool(n)
            try:
                for mi, mode in enumerate(modes):
                    seed = args.seed * 1000 + ci * 10 + mi  # the same values for every server of this cell
                    for si, server in enumerate(servers):
                        c = cell(pool, server, mode, args.seconds, args.batch, seed, id_base=(ci * 10 + mi) << 44)
                        cells.append(c)
                        log(f"{n:>2} clients {mode:>6} {server.name:>11}: {c['ops_per_s']:>10,.0f} ops/s  p50 {c['p50_us']:>8,.0f} us  p99 {c['p99_us']:>8,.0f} us  server CPU {c['server_cpu_us_per_op']:.2f} us/op  clients {c['client_cpu_us_per_op']:.2f} us/op  ({c['new']}/{c['ops']} new)")
            finally:
                pool.close()
        for s in servers:
            if s.kind == "redis":
                import redis

                info = redis.Redis(host="127.0.0.1", port=int(s.address.split(":")[1])).info()
                log(f"{s.name}: used_memory {info['used_memory_human']}, rdb_bgsave ok {info['rdb_last_bgsave_status']}, forks {info['total_forks']}")
        docs = docs_phase(args, root, servers) if args.pages else []
        res = {
            "loadavg_at_start": load0,
            "loadavg_at_end": Path("/proc/loadavg").read_text().split()[:3],
            "cpu_model": next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("model name")), platform.processor()),
            "nproc": os.cpu_count(),
            "python": platform.python_version(),
            "redis": subprocess.run([args.redis_server, "--version"], capture_output=True, text=True).stdout.strip(),
            "command": " ".join(["python"] + sys.argv),
            "seconds": args.seconds,
            "batch": args.batch,
            "cells": cells,
            "ratios": ratios(cells),
            "docs": docs,
        }
        table = markdown(res)
        print(table, file=sys.stderr if args.json == "-" else sys.stdout)
        if args.json:
            text = json.dumps(res, indent=2)
            if args.json == "-":
                print(text)
            else:
                Path(args.json).write_text(text + "\n")
        return 0
    finally:
        for s in servers:
            s.stop()
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
