#!/usr/bin/env python3
"""The review of ``simdex serve`` (issue 37) as figures, for a before/after table: run it
once with the binary (and client) of each build.

- lost answers: a proxy drops the answer to one call of each write of ``simdex.Client``
  (the server did it); the table counts the writes the server then did twice;
- memory: four concurrent 60 MiB JSON bodies of zeros (``--max-in-flight 1``): the
  server's peak resident memory;
- descriptors: under ``ulimit -n 256``, 371 idle connections, then writes, a flush and
  stats on a connection opened before them;
- full disk: a 392,000-operation log, the disk filled, a batch written after every 5
  queries (50 rounds): queries and writes answered, reopens;
- batch: a ``find_or_insert_many`` of 200 items meeting a full disk: what its answer says
  against what was stored;
- gauge, backlog and sketches: the in-flight gauge after clients went away mid-request, the
  listen backlog, and the disk of 200,000 fingerprint-only inserts with and without sketches;
- budget (not in the default run): what one request holds, per byte of body and per item,
  for each fingerprint batch and document shape (the memory budget's factors).

    python python/benches/serve_review.py --simdex target/release/simdex [--client PATH]

``--client`` names another ``client.py`` to load as ``simdex.Client`` (the baseline's).
Needs root (tmpfs mounts and ``ulimit -Hn``), ``ss``, numpy and the simdex wheel.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def start(binary, directory, *args, ulimit=None):
    cmd = [binary, "serve", str(directory), "--listen", "127.0.0.1:0", *map(str, args)]
    if ulimit:
        cmd = ["sh", "-c", f"ulimit -Sn {ulimit} && ulimit -Hn {ulimit} && exec \"$0\" \"$@\"", *cmd]
    err = open(str(directory) + ".log", "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    line = proc.stdout.readline()
    if not line.startswith("listening on"):
        raise RuntimeError(f"no server: {line!r} {open(str(directory) + '.log').read()[-2000:]}")
    return proc, line.split()[-1]


def stop(proc):
    proc.kill()
    proc.wait()


def status_kb(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def metric(url, name):
    import urllib.request

    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def post(url, op, body, ctype="application/json", timeout=120):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"{url}/v1/{op}", data=body, headers={"Content-Type": ctype}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError as e:
        return None, str(e).encode()


def le(values):
    import numpy as np

    return np.asarray(values, dtype="<u8").tobytes()


def mount(size):
    d = tempfile.mkdtemp(prefix="serve-review-disk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", d], check=True)
    return Path(d)


def umount(d):
    subprocess.run(["umount", "-l", str(d)])
    shutil.rmtree(d, ignore_errors=True)


def fill(path):
    f = open(path, "wb", buffering=0)
    for size in (1 << 20, 4096, 1):
        chunk = b"\xa5" * size
        while True:
            try:
                f.write(chunk)
            except OSError:
                break
    return f


def lost_answers(binary, root, Client):
    from test_client_lost import DroppingProxy, target

    import simdex

    proc, url = start(binary, root / "lost")
    try:
        direct = simdex.Client(url)
        proxy = DroppingProxy(target(url))
        c = Client(proxy.url)
        fps = [0x2222_0000_0000_0000 + i * 0x0101_0101_0101 for i in range(40)]
        c.add(fps[0], 1)
        doc = lambda n: " ".join(f"word{(n * 7919 + i * 104729) % 5000} term{i % 97}" for i in range(120))  # noqa: E731
        writes = [
            ("add", 1, lambda: c.add(fps[1], 2)),
            ("add_many", 4, lambda: c.insert_many(fps[5:9])),
            ("find_or_insert", 1, lambda: c.find_or_insert(fps[9], 10)),
            ("find_or_insert_many", 5, lambda: c.find_or_insert_many(fps[10:15], list(range(11, 16)))),
            ("delete", 1, lambda: c.delete(fps[0], 1)),
            ("add_document", 1, lambda: c.insert_document(doc(1), 101)),
            ("find_or_insert_document", 1, lambda: c.find_or_insert_document(doc(2), 102)),
            ("find_or_insert_documents", 3, lambda: c.find_or_insert_documents([doc(3), doc(4), doc(5)], [103, 104, 105])),
        ]
        out = {}
        for name, ops, call in writes:
            before = direct.stats()["last_seq"]
            proxy.drop()
            try:
                answer = call()
                what = f"answered {answer!r}"[:60]
            except Exception as e:  # noqa: BLE001
                what = type(e).__name__
            done = direct.stats()["last_seq"] - before
            out[name] = {"outcome": what, "done_times": done / ops}
        return out
    finally:
        stop(proc)


def memory(binary, root):
    body = b'{"fps":[' + b",".join([b"0"] * (30 << 20)) + b'],"x":1}'
    proc, url = start(binary, root / "mem", "--max-in-flight", 1)
    try:
        post(url, "query", b'{"fp": 1}')
        before = status_kb(proc.pid, "VmRSS")
        statuses = []
        threads = [threading.Thread(target=lambda: statuses.append(post(url, "query_many", body)[0])) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"body_mib": len(body) / 2**20, "statuses": sorted(map(str, statuses)), "rss_before_mib": before / 1024, "peak_mib": status_kb(proc.pid, "VmHWM") / 1024}
    finally:
        stop(proc)


def descriptors(binary, root):
    proc, url = start(binary, root / "fd", "--header-timeout", 60, ulimit=256)
    try:
        host, port = url.split("//")[1].split(":")
        writer = socket.create_connection((host, int(port)))

        def call(op, body=b"{}", ctype="application/json"):
            writer.sendall(f"POST /v1/{op} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            f = writer.makefile("rb")
            line = f.readline()
            length = 0
            while True:
                h = f.readline()
                if h in (b"\r\n", b""):
                    break
                if h.lower().startswith(b"content-length:"):
                    length = int(h.split(b":")[1])
            data = f.read(length)
            return (int(line.split()[1]) if line else None), data

        idle = []
        for _ in range(371):
            try:
                idle.append(socket.create_connection((host, int(port)), timeout=2))
            except OSError:
                break
        time.sleep(0.5)
        out = {"idle_opened": len(idle)}
        import numpy as np

        statuses = []
        for r in range(3):
            fps = np.random.default_rng(r).integers(0, 2**63, 2000, dtype=np.uint64)
            statuses.append(call("add_many", le(fps) + le(np.arange(2000) + r * 2000), "application/octet-stream")[0])
            statuses.append(call("flush")[0])
        s, stats = call("stats")
        out["writes_and_flushes"] = statuses
        out["stats"] = s
        out["stats_maintenance_error"] = json.loads(stats).get("maintenance_error") if s == 200 else stats[:200].decode("utf-8", "replace")
        for sock in idle:
            sock.close()
        time.sleep(1)
        out["new_client_after"] = post(url, "stats", b"{}")[0]
        return out
    finally:
        stop(proc)


def full_disk(binary, root):
    import numpy as np

    disk = mount(48 << 20)
    try:
        proc, url = start(binary, disk / "idx")
        try:
            rng = np.random.default_rng(392)
            stored = []
            for _ in range(8):
                fps = rng.integers(0, 2**63, 49_000, dtype=np.uint64)
                ids = rng.integers(0, 2**62, 49_000, dtype=np.uint64)
                assert post(url, "add_many", le(fps) + le(ids), "application/octet-stream")[0] == 200
                stored += list(zip(fps.tolist(), ids.tolist()))
            f = fill(disk / "filler")
            queries_ok = writes = 0
            write_statuses = {}
            for r in range(50):
                for q in range(5):
                    fp, _ = stored[(r * 5 + q) * 1543 % len(stored)]
                    queries_ok += post(url, "query", json.dumps({"fp": fp, "k": 0}).encode())[0] == 200
                fps = rng.integers(0, 2**63, 200, dtype=np.uint64)
                s = post(url, "find_or_insert_many", le(fps) + le(fps >> 1), "application/octet-stream")[0]
                write_statuses[str(s)] = write_statuses.get(str(s), 0) + 1
                writes += 1
            reopens = metric(url, "simdex_index_reopens_total")
            f.close()
            os.remove(disk / "filler")
            t0 = time.monotonic()
            while post(url, "add", b'{"fp": 5, "doc_id": 5}')[0] != 200 and time.monotonic() - t0 < 30:
                time.sleep(0.1)
            return {"queries_answered": f"{queries_ok} of 250", "writes": write_statuses, "reopens": reopens, "writes_back_after_s": round(time.monotonic() - t0, 2)}
        finally:
            stop(proc)
    finally:
        umount(disk)


def batch_prefix(binary, root):
    import numpy as np

    disk = mount(8 << 20)
    try:
        proc, url = start(binary, disk / "idx")
        try:
            f = fill(disk / "filler")
            f.truncate(os.path.getsize(disk / "filler") - 3 * 4096)
            f.close()
            rng = np.random.default_rng(200)
            for _ in range(5):
                fps = rng.integers(0, 2**63, 2000, dtype=np.uint64)
                ids = fps >> 1
                s, body = post(url, "find_or_insert_many", le(fps) + le(ids), "application/octet-stream")
                if s == 200:
                    continue
                err = json.loads(body).get("error", {})
                _, got = post(url, "query_many", le(fps), "application/octet-stream")
                n, m = int.from_bytes(got[:8], "little"), int.from_bytes(got[8:16], "little")
                stored_items = sorted(set(np.frombuffer(got[16 : 16 + 8 * m], dtype="<u8").tolist()))
                prefix = stored_items == list(range(len(stored_items)))
                return {"status": s, "kind": err.get("kind"), "answer_says_done": err.get("done"), "stored": len(stored_items), "stored_are_a_prefix": prefix, "of": n}
            return {"status": 200}
        finally:
            stop(proc)
    finally:
        umount(disk)


def small_leaks(binary, root):
    import numpy as np

    out = {}
    proc, url = start(binary, root / "gauge")
    try:
        host, port = url.split("//")[1].split(":")
        n = 100_000
        body = le(np.random.default_rng(1).integers(0, 2**63, n, dtype=np.uint64)) + le(np.arange(n))
        for _ in range(5):
            s = socket.create_connection((host, int(port)))
            s.sendall(f"POST /v1/find_or_insert_many HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(0.05)
            s.close()
        time.sleep(3)
        out["in_flight_after_disconnects"] = metric(url, "simdex_in_flight_requests")
        ss = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout.split()
        out["backlog"] = int(ss[2]) if len(ss) > 2 else None
    finally:
        stop(proc)
    fps = np.random.default_rng(2).integers(0, 2**63, 200_000, dtype=np.uint64)
    for name, args in (("with_sketches", []), ("no_sketches", ["--no-sketches"])):
        d = root / f"sk-{name}"
        proc, url = start(binary, d, *args)
        try:
            post(url, "add_many", le(fps) + le(np.arange(len(fps))), "application/octet-stream")
            post(url, "flush", b"{}")
            out[f"segment_bytes_{name}"] = sum(p.stat().st_size for p in d.glob("*.sdx"))
        finally:
            stop(proc)
    return out


def budget(binary, root, n=2_000_000):
    """Peak resident growth of one request at a time against a fresh server, per shape."""
    import random

    import numpy as np

    rng = np.random.default_rng(1)
    fps, ids = rng.integers(0, 2**63, n, dtype=np.uint64), np.arange(n, dtype=np.uint64)
    zeros = b"[" + b",".join([b"0"] * n) + b"]"
    words = random.Random(1)
    vocab = [f"x{i}" for i in range(1_000_000)]
    page = " ".join(words.choice(vocab) for _ in range(3_000_000))
    shapes = {
        "add_many json zeros no ids": ("add_many", b'{"fps":' + zeros + b"}", "application/json", n),
        "add_many json zeros ids": ("add_many", b'{"fps":' + zeros + b',"doc_ids":' + zeros + b"}", "application/json", n),
        "add_many binary": ("add_many", le(fps) + le(ids), "application/octet-stream", n),
        "delete_many binary": ("delete_many", le(fps) + le(ids), "application/octet-stream", n),
        "find_or_insert_many binary": ("find_or_insert_many", le(fps) + le(ids), "application/octet-stream", n),
        "find_or_insert_many json zeros": ("find_or_insert_many", b'{"fps":' + zeros + b',"doc_ids":' + zeros + b"}", "application/json", n),
        "query_many binary": ("query_many", le(fps), "application/octet-stream", n),
        "query_many json zeros": ("query_many", b'{"fps":' + zeros + b"}", "application/json", n),
        "find_or_insert_document, one page of distinct words": ("find_or_insert_document", json.dumps({"doc": {"text": page}, "doc_id": 1}).encode(), "application/json", 0),
    }
    out = {}
    for name, (op, body, ctype, items) in shapes.items():
        d = root / f"budget-{len(out)}"
        proc, url = start(binary, d, "--max-memory-mib", 100_000, "--max-body-mib", 1024)
        try:
            post(url, "query", b'{"fp": 1}')
            before = status_kb(proc.pid, "VmRSS")
            status = post(url, op, body, ctype)[0]
            grown = (status_kb(proc.pid, "VmHWM") - before) * 1024
        finally:
            stop(proc)
        out[name] = {"status": status, "body_mib": round(len(body) / 2**20, 1), "peak_growth_mib": round(grown / 2**20, 1), "per_body_byte": round(grown / len(body), 1), "per_item": round(grown / items, 1) if items else None}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simdex", required=True)
    ap.add_argument("--client", help="a client.py to use as simdex.Client (default: the installed one)")
    ap.add_argument("--only", help="comma-separated parts (lost,memory,descriptors,full_disk,batch,leaks; budget)")
    args = ap.parse_args()
    import simdex

    Client = simdex.Client
    if args.client:
        spec = importlib.util.spec_from_file_location("simdex._review_client", args.client, submodule_search_locations=None)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["simdex._review_client"] = mod
        spec.loader.exec_module(mod)
        Client = mod.Client
    root = Path(tempfile.mkdtemp(prefix="serve-review-"))
    parts = {"lost": lambda: lost_answers(args.simdex, root, Client), "memory": lambda: memory(args.simdex, root), "descriptors": lambda: descriptors(args.simdex, root),
             "full_disk": lambda: full_disk(args.simdex, root), "batch": lambda: batch_prefix(args.simdex, root), "leaks": lambda: small_leaks(args.simdex, root),
             "budget": lambda: budget(args.simdex, root)}
    only = args.only.split(",") if args.only else [p for p in parts if p != "budget"]
    res = {"binary": args.simdex, "client": args.client or "installed", "loadavg": open("/proc/loadavg").read().split()[:3]}
    try:
        for name in only:
            t = time.monotonic()
            res[name] = parts[name]()
            print(f"{name} ({time.monotonic() - t:.0f} s): {json.dumps(res[name])}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
