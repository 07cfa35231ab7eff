"""What every category of the fault suite shares: the simdex runner, results, snapshots of
directories, pair files and the add feeder (`fault-suite.py` documents the suite)."""

import argparse
import collections
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

MAX_ID = (1 << 64) - 1
SHARES = {"kill": 0.25, "damage": 0.43, "readers": 0.20, "diskfull": 0.07, "badinput": 0.05}
ORDER = ["kill", "damage", "readers", "diskfull", "badinput"]
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERBOSE = False


def log(*a):
    if VERBOSE:
        print("  [suite]", *a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- running simdex
class Res:
    def __init__(self, argv, rc, out, err, timed_out, seconds):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err
        self.timed_out, self.seconds = timed_out, seconds

    @property
    def panicked(self):
        return self.rc == 101 or "panicked" in self.err

    @property
    def named_error(self):
        """A non-zero exit whose stderr says what went wrong (not empty, not a bare code)."""
        e = self.err.strip()
        return self.rc != 0 and len(e) >= 12 and ("error" in e.lower() or "damage" in e.lower()
                                                  or "corrupt" in e.lower() or "refus" in e.lower())

    def cmd(self):
        return " ".join(shlex.quote(a) for a in self.argv)


class Simdex:
    def __init__(self, path):
        self.path = os.path.abspath(path)
        self._help = {}

    def help(self, *sub):
        if sub not in self._help:
            r = subprocess.run([self.path, *sub, "--help"], capture_output=True, text=True)
            self._help[sub] = r.stdout
        return self._help[sub]

    def has_flag(self, sub, flag):
        return flag in self.help(*sub.split())

    def run(self, args, timeout=60, stdin=None, input_bytes=None, cwd=None, env=None):
        argv = [self.path] + [str(a) for a in args]
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, input=input_bytes, stdin=None if input_bytes is not None else (stdin or subprocess.DEVNULL),
                               capture_output=True, timeout=timeout, cwd=cwd, env=env)
            out, err, rc, to = p.stdout, p.stderr, p.returncode, False
        except subprocess.TimeoutExpired as e:
            out, err, rc, to = e.stdout or b"", e.stderr or b"", None, True
        return Res(argv, rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), to,
                   time.monotonic() - t0)


# ----------------------------------------------------------------------------- bookkeeping
class Category:
    def __init__(self, name, title):
        self.name, self.title = name, title
        self.cases = 0
        self.failures = []          # (kind, quantity, detail, repro)
        self.notes = []
        self.counters = collections.Counter()
        self.skipped = None
        self.seconds = 0.0
        self.current = None         # the case failures are charged to (None: each failure is a case)
        self.failed_cases = set()

    def fail(self, kind, qty, detail, repro):
        self.failures.append((kind, qty, detail, repro))
        self.failed_cases.add(self.current if self.current is not None else ("own", len(self.failures)))
        log("FAIL", self.name, kind, qty, detail)

    def cost(self):
        if self.skipped:
            return "skipped: " + self.skipped
        if not self.failures:
            return "none"
        agg = collections.OrderedDict()
        for kind, qty, _, _ in self.failures:
            n, q = agg.get(kind, (0, 0))
            agg[kind] = (n + 1, q + (qty or 0))
        parts = []
        for kind, (n, q) in agg.items():
            parts.append(f"{n}x {kind}" + (f" ({q:,} in all)" if q else ""))
        return "; ".join(parts)


def snapshot(root):
    """Every path under root with its size and content hash (not mtimes)."""
    snap = {}
    for dp, dns, fns in os.walk(root):
        for d in dns:
            snap[os.path.relpath(os.path.join(dp, d), root) + "/"] = "dir"
        for f in fns:
            p = os.path.join(dp, f)
            try:
                with open(p, "rb") as fh:
                    h = hashlib.sha1(fh.read()).hexdigest()
            except OSError:
                h = "unreadable"
            snap[os.path.relpath(p, root)] = h
    return snap


def snap_diff(a, b):
    added = sorted(set(b) - set(a))
    removed = sorted(set(a) - set(b))
    changed = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    return added, removed, changed


def tmp_files(d):
    out = []
    for dp, dns, fns in os.walk(d):
        for f in fns + dns:
            if f.endswith(".tmp") or ".recovering" in f or f.endswith(".tmp.sdx"):
                out.append(os.path.join(dp, f))
    return out


def write_pairs(path, pairs):
    with open(path, "w") as f:
        f.writelines(f"{fp:016x}\t{i}\n" for fp, i in pairs)


def write_fps(path, fps):
    with open(path, "w") as f:
        f.writelines(f"{fp:016x}\n" for fp in fps)


def new_fps(rng, n, used):
    out = []
    while len(out) < n:
        fp = rng.getrandbits(64)
        if fp and fp not in used:
            used.add(fp)
            out.append(fp)
    return out


def query_pairs(sim, target, fps, work, timeout=120):
    """(Res, set of (fp, id)) for `simdex query TARGET -k 0 --input` over fps."""
    qf = os.path.join(work, "q-%d.txt" % random.getrandbits(32))
    write_fps(qf, fps)
    r = sim.run(["query", target, "-k", "0", "--input", qf], timeout=timeout)
    os.unlink(qf)
    got = set()
    if r.rc == 0:
        for line in r.out.splitlines():
            parts = line.split("\t")
            if len(parts) >= 3:
                got.add((int(parts[1], 16), int(parts[3]) if len(parts) > 3 else None))
    return r, got


def manifest_number(d):
    try:
        with open(os.path.join(d, "MANIFEST"), "rb") as f:
            b = f.read(24)
        return struct.unpack_from("<Q", b, 16)[0]
    except (OSError, struct.error):
        return None


class Feeder:
    """Runs `simdex insert DIR - --acks --json ...`, feeding lines through a pipe in chunks with
    pauses (so synced groups are many), reading the acknowledgements as they come."""

    def __init__(self, sim, args, lines, rng, chunk=(20, 800), pause=(0.0, 0.012), hold_open=0.0):
        self.lines = lines
        self.acked_lines = 0
        self.last_seq = None
        self.first_seq = None
        self.p = subprocess.Popen([sim.path] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.err = b""
        plan, i = [], 0
        while i < len(lines):
            n = rng.randint(*chunk)
            plan.append((i, min(len(lines), i + n), rng.uniform(*pause)))
            i += n
        self.hold_open = hold_open
        self.tw = threading.Thread(target=self._write, args=(plan,), daemon=True)
        self.tr = threading.Thread(target=self._read, daemon=True)
        self.te = threading.Thread(target=self._readerr, daemon=True)
        self.tw.start(), self.tr.start(), self.te.start()

    def _write(self, plan):
        try:
            for a, b, pause in plan:
                self.p.stdin.write("".join(self.lines[a:b]).encode())
                self.p.stdin.flush()
                if pause:
                    time.sleep(pause)
            if self.hold_open:
                time.sleep(self.hold_open)
            self.p.stdin.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def _read(self):
        for line in self.p.stdout:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if "acked" in d and "input_lines" in d:
                self.acked_lines = max(self.acked_lines, d["input_lines"])
                self.last_seq = d.get("last_seq", self.last_seq)
                if self.first_seq is None and d.get("last_seq") is not None:
                    self.first_seq = d["last_seq"] - d["acked"] + 1

    def _readerr(self):
        self.err = self.p.stderr.read()

    def kill(self):
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)
        return self.finish()

    def finish(self, timeout=120):
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.p.pid, signal.SIGKILL)
            rc = self.p.wait()
            self.timed_out = True
        self.tr.join(5)
        self.te.join(5)
        self.tw.join(5)
        return rc


# ----------------------------------------------------------------------------- 1. kill -9 loops
