#!/usr/bin/env python3
"""How long a writer takes to stop (issue 45 item 1): two builds side by side, alternating.

    python3 benches/close_time.py --work DIR NAME=SIMDEX NAME=SIMDEX [--n 1500000,3000000]
        [--serve-n 4194304] [--rounds 2]

For each build, round by round (the builds alternating, so a noisy neighbour hits both):
  insert  `simdex insert DIR - --binary` fed N random fingerprints through a pipe; the clock
          starts when the pipe is closed (everything written) and stops when the process
          exits: the close (the baseline settles the live set there; a bounded close does not).
  serve   `simdex serve DIR`, N fingerprints inserted by `insert_many` in batches of 65,536
          (binary form, as the Python client sends them), then SIGTERM: the clock runs from
          the signal to the exit.
After each run: `simdex stats DIR --json` (segments, fingerprints; every insert is there, in
segments or left in the logs), whether a merge was left to resume (`merge.checkpoint`), and
the seconds of the next open and close (`simdex insert DIR /dev/null`: it replays what the
stop left in the logs). Prints a
markdown table. Standard library only; the fingerprints are seeded (the same for both).
"""

import argparse
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
import urllib.request


def fingerprints(n, seed):
    r = random.Random(seed)
    left = n
    while left > 0:
        k = min(left, 1 << 16)
        yield r.randbytes(8 * k)
        left -= k


def stats(simdex, d):
    out = subprocess.run([simdex, "stats", d, "--json"], capture_output=True, check=True, text=True).stdout
    s = json.loads(out)
    # replayed memtables a close left in the logs (`frozen`: builds since 5d375f4)
    frozen = s.get("frozen", {}).get("operations", 0)
    return len(s["segments"]), s["segment_fingerprints"] + s["memtable"]["inserts"] + frozen, s["memtable"]["inserts"] + frozen


def insert_close(simdex, d, n):
    p = subprocess.Popen([simdex, "insert", d, "-", "--binary"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    for chunk in fingerprints(n, 45):
        p.stdin.write(chunk)
    p.stdin.flush()
    t = time.perf_counter()
    p.stdin.close()
    rc = p.wait()
    return time.perf_counter() - t, rc


def serve_close(simdex, d, n):
    p = subprocess.Popen([simdex, "serve", d, "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    url = line.strip().split()[-1]
    next_id = 1
    for chunk in fingerprints(n, 45):
        count = len(chunk) // 8
        ids = struct.pack("<%dQ" % count, *range(next_id, next_id + count))
        next_id += count
        req = urllib.request.Request(url + "/v1/insert_many", data=chunk + ids, headers={"Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(req, timeout=600) as r:
            r.read()
    t = time.perf_counter()
    p.send_signal(signal.SIGTERM)
    rc = p.wait()
    return time.perf_counter() - t, rc


def reopen(simdex, d):
    """Seconds of `simdex insert DIR /dev/null` (an open that replays what the stop left in
    the logs, no insert, a close): what the next start pays."""
    t = time.perf_counter()
    subprocess.run([simdex, "insert", d, "/dev/null", "--binary"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", help="NAME=PATH of a simdex binary")
    ap.add_argument("--work", required=True)
    ap.add_argument("--n", default="1500000,3000000")
    ap.add_argument("--serve-n", type=int, default=1 << 22)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    builds = [b.split("=", 1) for b in a.builds]
    rows = []
    print(f"load before: {open('/proc/loadavg').read().split()[:3]}", file=sys.stderr)
    for rnd in range(a.rounds):
        order = builds if rnd % 2 == 0 else builds[::-1]
        for what, n in [("insert", int(x)) for x in a.n.split(",")] + [("serve", a.serve_n)]:
            for name, simdex in order:
                d = os.path.join(a.work, f"close-{name}")
                shutil.rmtree(d, ignore_errors=True)
                secs, rc = (insert_close if what == "insert" else serve_close)(simdex, d, n)
                segs, held, in_logs = stats(simdex, d)
                pending = os.path.exists(os.path.join(d, "merge.checkpoint"))
                again = reopen(simdex, d)
                rows.append((what, n, name, rnd + 1, secs, rc, segs, held, in_logs, pending, again))
                print(f"{what} {n} {name} round {rnd + 1}: {secs:.2f} s (exit {rc}), {segs} segments, {held} held, {in_logs} in logs, merge to resume: {pending}, next open+close {again:.2f} s", file=sys.stderr)
                shutil.rmtree(d, ignore_errors=True)
    print(f"load after: {open('/proc/loadavg').read().split()[:3]}", file=sys.stderr)
    print("| stop | fingerprints | build | round | seconds to exit | exit | segments left | held | left in logs | merge left to resume | next open + close, s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for what, n, name, rnd, secs, rc, segs, held, in_logs, pending, again in rows:
        stop = "close after the pipe's end" if what == "insert" else "SIGTERM"
        print(f"| {stop} | {n:,} | {name} | {rnd} | {secs:.2f} | {rc} | {segs} | {held:,} | {in_logs:,} | {'yes' if pending else 'no'} | {again:.2f} |")


if __name__ == "__main__":
    main()
