#!/usr/bin/env python3
"""Run a command and report its wall time and peak memory, sampled from /proc/PID/status.

    python3 benches/peak_memory.py [--pipe FILE] -- simdex insert idx --binary -

With --pipe, FILE is written into the command's stdin through a pipe (as a crawler
would feed it), 1 MiB at a time, and the pipe is closed at the end.

Prints one JSON line on stderr: seconds, peak RssAnon (anonymous memory: heap, stacks;
mapped files are page cache and not counted), peak VmRSS and VmHWM (everything resident,
mapped segment pages included), all in MiB, sampled every 10 ms (a peak shorter than that,
or a process shorter than that, can be missed), and maxrss_mib, the kernel's exact peak of
everything resident (ru_maxrss of wait4).
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import time


def status(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("RssAnon", "VmRSS", "VmHWM"):
                    fields[key] = int(value.split()[0]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return fields


def main():
    args = sys.argv[1:]
    source = None
    if args[:1] == ["--pipe"]:
        source = args[1]
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    start = time.monotonic()
    proc = subprocess.Popen(args, stdin=subprocess.PIPE if source else None)
    if source:

        def feed():
            with open(source, "rb") as f, proc.stdin:
                try:
                    shutil.copyfileobj(f, proc.stdin, 1 << 20)
                except BrokenPipeError:
                    pass

        threading.Thread(target=feed, daemon=True).start()
    peak = {"RssAnon": 0.0, "VmRSS": 0.0, "VmHWM": 0.0}
    while True:
        pid, wait_status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        for key, value in status(proc.pid).items():
            peak[key] = max(peak[key], value)
        time.sleep(0.01)
    seconds = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(wait_status)
    report = {"exit": proc.returncode, "seconds": round(seconds, 3)}
    report.update({f"peak_{k}_mib": round(v, 1) for k, v in peak.items()})
    # The kernel's own high-water mark of everything resident (ru_maxrss, KiB), exact.
    report["maxrss_mib"] = round(usage.ru_maxrss / 1024, 1)
    print(json.dumps(report), file=sys.stderr)
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
