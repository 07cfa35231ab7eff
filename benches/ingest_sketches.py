#!/usr/bin/env python3
"""What sketches cost ingest (issue 45 item 4): `simdex bench index` of the same fingerprints
with sketches and with `--no-sketches`, one build, alternating, round by round.

    python3 benches/ingest_sketches.py --work DIR --input FPS.txt SIMDEX [--rounds 2] [--live]
        [--env NAME=VALUE ...]

For each run: wall seconds, CPU seconds (user + system, every thread: `os.wait4`), the peak
RssAnon of the process (sampled every 50 ms from /proc/PID/status: the writer's own memory,
page cache and mapped files not counted), and the index's bytes on disk. `--live` leaves the
index as a crawl leaves it (`bench index --live`); without it the index is compacted to one
segment, as the issue's 3.4x figure was measured. Prints a markdown table and the ratios
(sketched / without) of wall and CPU per round. Standard library only.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def rss_anon_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def run(cmd, env):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    peak = 0
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, rss_anon_kib(p.pid))
        time.sleep(0.05)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)}: exit {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime, peak / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("simdex")
    ap.add_argument("--work", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--live", action="store_true")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for the runs")
    a = ap.parse_args()
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in a.env)
    kinds = [("sketched", []), ("without", ["--no-sketches"])]
    rows = []
    print(f"load before: {open('/proc/loadavg').read().split()[:3]}", file=sys.stderr)
    for rnd in range(a.rounds):
        for name, extra in kinds if rnd % 2 == 0 else kinds[::-1]:
            d = os.path.join(a.work, f"ingest-{name}")
            shutil.rmtree(d, ignore_errors=True)
            cmd = [a.simdex, "bench", "index", d, "--input", a.input] + extra + (["--live"] if a.live else [])
            wall, cpu, peak = run(cmd, env)
            size = du(d)
            rows.append((rnd + 1, name, wall, cpu, peak, size))
            print(f"round {rnd + 1} {name}: {wall:.1f} s wall, {cpu:.1f} s CPU, RssAnon peak {peak:.0f} MiB, {size / 2**20:.0f} MiB on disk", file=sys.stderr)
            shutil.rmtree(d, ignore_errors=True)
    print(f"load after: {open('/proc/loadavg').read().split()[:3]}", file=sys.stderr)
    print("| round | index | wall s | CPU s | peak RssAnon MiB | MiB on disk |")
    print("|---|---|---|---|---|---|")
    for rnd, name, wall, cpu, peak, size in rows:
        print(f"| {rnd} | {name} | {wall:.1f} | {cpu:.1f} | {peak:.0f} | {size / 2**20:.0f} |")
    for rnd in range(1, a.rounds + 1):
        r = {name: (wall, cpu) for x, name, wall, cpu, _, _ in rows if x == rnd}
        print(f"round {rnd}: sketched / without = {r['sketched'][0] / r['without'][0]:.2f}x wall, {r['sketched'][1] / r['without'][1]:.2f}x CPU")


if __name__ == "__main__":
    main()
