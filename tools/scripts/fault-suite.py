#!/usr/bin/env python3
"""Issue 23's reproducible fault suite: the `simdex` CLI under the faults a user meets.

    python3 tools/scripts/fault-suite.py --simdex target/debug/simdex \
        [--it-bin target/debug/deps/it-HASH] [--seed 23] [--budget-seconds 600] \
        [--only kill|damage|readers|diskfull|badinput] [--keep] [--verbose]

Python 3, standard library only. Every random choice comes from --seed (one generator per
category, seeded from it), and every category gets a share of --budget-seconds (kill 25 %,
damage 43 %, readers 20 %, disk full 7 %, bad input 5 %; with --only the whole budget), so a
run is reproducible in what it tries and bounded in time (it stops starting cases when its
share is spent; a case in flight finishes, each command has a timeout).

Categories (a failure is anything issue 23 says must not happen):
  kill      `simdex add DIR - --acks` fed through a pipe, killed (SIGKILL) at random instants,
            then `verify` (must exit 0) and `query -k 0` (every acknowledged pair present, no
            pair never sent); `simdex compact` killed at random instants (deleted pairs must
            stay deleted). With --it-bin the compaction input is that binary's ignored test
            `engine_compaction_kills::build_segments_for_the_kill_loop` (8 segments), else
            what add/delete/a killed add leave.
  damage    an index with segments, a tombstone file and a sealed log holding records (an add
            killed after its acks, then a writable open killed after it rewrote the manifest),
            and a `dedup --index` index with a RECIPE: per file type, bit flips, truncations,
            a log cut at a record boundary, zeroed ranges, deletion. Checks: `verify` exits
            non-zero when acknowledged data is not all readable; `query` answers exactly or
            fails with a named error; `recover --json` accounts for every live pair it lost
            (segment_entries_lost + log_operations_lost + log_operations_possibly_lost >= lost;
            equal is counted as exact, more as a bound) and brings no deleted pair back unless
            deletes_possibly_undone covers it; a writer opening a cut log
            (`add --log-recovery point-in-time` when the binary has it) hands out no sequence
            number (= document id) twice.
  readers   tools/scripts/reader-race.sh with READER=verify and stats, and issue 23's loop
            (`simdex add vr big.txt --memtable-ops 20000 &` while `simdex verify vr` runs):
            exit 1/2 beside the writer on an index that verifies clean afterwards is a false
            DAMAGED; exit 3 (inconclusive) is counted apart and is not a failure.
  diskfull  add / compact / recover / build into an 8 MiB tmpfs (root only; skipped with a
            note otherwise): non-zero exit with a named error, nothing acknowledged lost, no
            leftover temporary files, the index still verifies.
  badinput  every subcommand (from `simdex --help`) with missing, directory, empty, non-UTF-8,
            malformed and garbage inputs, and NaN/negative/overflowing/non-numeric values for
            every option that takes a value: exit 2, a message naming the argument or file, no
            panic, and the scratch directory left byte for byte as it was.

Prints a markdown table (one row per category: cases, failures, what the failures cost) and,
below it, each failure with the commands that reproduce it. Exit 0 when nothing failed, 1
otherwise. The binary may be older than the suite: flags it lacks (`--log-recovery`) are
left out, JSON fields it lacks count as 0.
"""
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
HERE = os.path.dirname(os.path.abspath(__file__))
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
    """Runs `simdex add DIR - --acks --json ...`, feeding lines through a pipe in chunks with
    pauses (so group commits are many), reading the acknowledgements as they come."""

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
def cat_kill(sim, cat, rng, budget, work, it_bin):
    deadline = time.monotonic() + budget
    idx = os.path.join(work, "kidx")
    used, acked = set(), {}   # fp -> id of every acknowledged pair
    sent = set()
    next_id = 1
    cycle = 0
    add_deadline = time.monotonic() + budget * 0.55
    while time.monotonic() < add_deadline and cycle < 400:
        cycle += 1
        n = rng.randint(2000, 12000)
        mem = rng.choice([1000, 3000, 10000, 100000])
        fps = new_fps(rng, n, used)
        pairs = [(fp, next_id + i) for i, fp in enumerate(fps)]
        next_id += n
        lines = [f"{fp:016x}\t{i}\n" for fp, i in pairs]
        sent.update(fps)
        args = ["add", idx, "-", "--acks", "--json", "--memtable-ops", str(mem)]
        # the feed lasts about n / 410 * 6 ms; the kill lands anywhere in it (or in the idle time after)
        feed = n / 410 * 0.006
        kill_at = rng.uniform(0.01, feed * 1.2)
        f = Feeder(sim, args, lines, rng, pause=(0.0, 0.012), hold_open=feed)
        time.sleep(kill_at)
        rc = f.kill()
        cat.cases += 1
        cat.current = cat.cases
        err = f.err.decode("utf-8", "replace")
        repro = f"seed case kill/add cycle {cycle}: {shlex.join(args)} (pipe of {n} `HEX<TAB>ID` lines) killed after {kill_at:.3f}s"
        if rc not in (-9, 0):
            if rc == 101 or "panicked" in err:
                cat.fail("panic in add", 0, err[:300], repro)
            else:
                cat.fail("add failed before the kill", 0, f"exit {rc}: {err[:300]}", repro)
        if rc == 0:
            cat.counters["add finished before the kill"] += 1
        for fp, i in pairs[:f.acked_lines]:
            acked[fp] = i
        v = sim.run(["verify", idx], timeout=120)
        if v.timed_out:
            cat.fail("verify hang after kill -9", 0, "", repro)
        elif v.panicked:
            cat.fail("panic in verify", 0, v.err[:300], repro)
        elif v.rc != 0:
            cat.fail("verify DAMAGED after kill -9", 0, (v.out + v.err)[-400:], repro + "; then " + v.cmd())
        # this cycle's acknowledged pairs, plus a sample of the earlier ones
        mine = [fp for fp, _ in pairs[:f.acked_lines]]
        mineset = set(mine)
        older = [fp for fp in acked if fp not in mineset]
        sample = mine + rng.sample(older, min(len(older), 3000))
        q, got = query_pairs(sim, idx, sample + [fp for fp, _ in pairs[f.acked_lines:f.acked_lines + 500]], work)
        if q.rc != 0:
            cat.fail("query fails after kill -9", 0, q.err[:300], repro)
            continue
        gotd = collections.defaultdict(set)
        for fp, i in got:
            gotd[fp].add(i)
        lost = [fp for fp in sample if acked[fp] not in gotd.get(fp, ())]
        if lost:
            cat.fail("acknowledged writes lost silently", len(lost),
                     f"{len(lost)} of {len(sample)} acknowledged pairs missing, e.g. {lost[0]:016x}", repro)
        phantom = [fp for fp in gotd if fp not in sent]
        if phantom:
            cat.fail("pairs never sent appear", len(phantom), "", repro)
        cat.counters["acked pairs checked"] += len(sample)
        log(f"kill/add cycle {cycle}: rc={rc} acked {f.acked_lines}/{n} verify={v.rc} lost={len(lost)}")
    # a clean writable open then the whole oracle
    if acked:
        r = sim.run(["add", idx, os.devnull], timeout=120)
        if r.rc != 0:
            cat.fail("writable open after kill loop fails", 0, r.err[:300], r.cmd())
        left = tmp_files(idx)
        if left:
            cat.fail("leftover files after a clean open", len(left), ", ".join(left[:5]), r.cmd())
        q, got = query_pairs(sim, idx, list(acked), work)
        gotd = collections.defaultdict(set)
        for fp, i in got:
            gotd[fp].add(i)
        lost = [fp for fp in acked if acked[fp] not in gotd.get(fp, ())]
        if q.rc != 0 or lost:
            cat.fail("acknowledged writes lost silently", len(lost), f"final check: rc {q.rc}", "kill/add final")
        cat.notes.append(f"add: {cycle} kills, {len(acked):,} acknowledged pairs all checked at the end")
    shutil.rmtree(idx, ignore_errors=True)
    compact_kills(sim, cat, rng, deadline, work, it_bin)


def prepare_compaction_index(sim, rng, work, it_bin, d):
    """An index with several segments, a tombstone file and deletes. Returns (live, deleted)."""
    used = set()
    pairs = []
    if it_bin:
        env = dict(os.environ, SIMDEX_BUILD_DIR=d, SIMDEX_BUILD_SEGMENTS="8", SIMDEX_BUILD_PER_SEGMENT="40000")
        subprocess.run([it_bin, "--exact", "engine_compaction_kills::build_segments_for_the_kill_loop",
                        "--ignored", "-q"], env=env, capture_output=True, timeout=300)
        for name in sorted(os.listdir(d)):
            if name.startswith("seg-"):
                r = sim.run(["dump", os.path.join(d, name)], timeout=120)
                for line in r.out.splitlines():
                    a = line.split("\t")
                    pairs.append((int(a[0], 16), int(a[1]) if len(a) > 1 else None))
    else:
        # an add that closes (one segment), deletes (a tombstone file), then an add through a pipe with a
        # small memtable killed once all is acknowledged: its flushes are segments no close merged
        fps = new_fps(rng, 90000, used)
        pairs = [(fp, 10_000_000 + i) for i, fp in enumerate(fps)]
        f = os.path.join(work, "cprep.txt")
        write_pairs(f, pairs[:30000])
        sim.run(["add", d, f], timeout=300)
        os.unlink(f)
    deleted = []
    if not it_bin:
        deleted = rng.sample(pairs[:30000], 2000)
        f = os.path.join(work, "cdel.txt")
        write_pairs(f, deleted)
        sim.run(["delete", d, f], timeout=300)
        os.unlink(f)
        fd = Feeder(sim, ["add", d, "-", "--acks", "--json", "--memtable-ops", "6000"],
                    [f"{a:016x}\t{b}\n" for a, b in pairs[30000:]], rng, chunk=(2000, 6000), pause=(0.0, 0.005), hold_open=60)
        t0 = time.monotonic()
        while fd.acked_lines < 60000 and time.monotonic() - t0 < 60 and fd.p.poll() is None:
            time.sleep(0.02)
        time.sleep(0.3)
        fd.kill()
        pairs = pairs[:30000] + pairs[30000:30000 + fd.acked_lines]
    # a log with records: an add killed after its acknowledgements
    more = [(fp, 20_000_000 + i) for i, fp in enumerate(new_fps(rng, 5000, set(p[0] for p in pairs)))]
    fd = Feeder(sim, ["add", d, "-", "--acks", "--json"], [f"{a:016x}\t{b}\n" for a, b in more], rng, hold_open=30)
    t0 = time.monotonic()
    while fd.acked_lines < len(more) and time.monotonic() - t0 < 30 and fd.p.poll() is None:
        time.sleep(0.02)
    fd.kill()
    pairs += more[:fd.acked_lines]
    dset = set(deleted)
    live = [p for p in pairs if p not in dset]
    return live, deleted


def compact_kills(sim, cat, rng, deadline, work, it_bin):
    pristine = os.path.join(work, "cpristine")
    live, deleted = prepare_compaction_index(sim, rng, work, it_bin, pristine)
    st = sim.run(["stats", pristine, "--json"])
    try:
        nseg = len(json.loads(st.out)["segments"])
    except ValueError:
        nseg = "?"
    trial = os.path.join(work, "ctrial")
    shutil.copytree(pristine, trial)
    t = sim.run(["compact", trial], timeout=600)
    full = max(t.seconds, 0.05)
    shutil.rmtree(trial)
    cat.notes.append(f"compact: input {nseg} segments, {len(live):,} live pairs, {len(deleted):,} deleted; "
                     f"a full compact takes {full:.2f}s")
    idx = os.path.join(work, "cidx")
    rounds = kills = finished = 0
    has_mme = sim.has_flag("compact", "--max-merge-entries")
    livemap = dict(live)
    while time.monotonic() < deadline:
        rounds += 1
        shutil.rmtree(idx, ignore_errors=True)
        shutil.copytree(pristine, idx)
        for attempt in range(1, 30):
            if time.monotonic() >= deadline:
                break
            extra = []
            if has_mme and rng.random() < 0.3:
                extra = ["--max-merge-entries", str(rng.choice([50000, 100000, 200000]))]
            kill_at = rng.uniform(0.0, full * 1.1)
            argv = [sim.path, "compact", idx] + extra
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                p.wait(timeout=kill_at)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
            rc = p.wait()
            err = p.stderr.read().decode("utf-8", "replace")
            cat.cases += 1
            cat.current = cat.cases
            repro = f"compact round {rounds} attempt {attempt}: {shlex.join(argv[1:])} killed after {kill_at:.3f}s"
            if rc == -9:
                kills += 1
            elif rc == 0:
                finished += 1
            elif rc == 101 or "panicked" in err:
                cat.fail("panic in compact", 0, err[:300], repro)
            else:
                cat.fail("compact fails after earlier kills", 0, f"exit {rc}: {err[:300]}", repro)
            v = sim.run(["verify", idx], timeout=120)
            if v.rc != 0:
                cat.fail("verify DAMAGED after kill -9 of compact", 0, (v.out + v.err)[-400:], repro)
            sample = rng.sample(live, min(3000, len(live)))
            dsample = rng.sample(deleted, min(1000, len(deleted)))
            q, got = query_pairs(sim, idx, [fp for fp, _ in sample + dsample], work)
            if q.rc != 0:
                cat.fail("query fails after kill -9 of compact", 0, q.err[:300], repro)
            else:
                lost = [p for p in sample if p not in got]
                back = [p for p in dsample if p in got and p not in set(live)]
                if lost:
                    cat.fail("acknowledged writes lost silently", len(lost), f"e.g. {lost[0][0]:016x}", repro)
                if back:
                    cat.fail("deleted pairs came back", len(back), f"e.g. {back[0][0]:016x}", repro)
            if rc == 0:
                left = tmp_files(idx)
                if left:
                    cat.fail("leftover files after a finished compact", len(left), ", ".join(left[:5]), repro)
                break
    shutil.rmtree(idx, ignore_errors=True)
    shutil.rmtree(pristine, ignore_errors=True)
    cat.notes.append(f"compact: {rounds} rounds, {kills} kills, {finished} compactions finished")
    del livemap


# ----------------------------------------------------------------------------- 2. damage
def build_damage_index(sim, rng, work, d):
    """Segments, a tombstone file, a sealed log with records. Returns the oracle."""
    used = set()
    a = [(fp, 1_000_000 + i) for i, fp in enumerate(new_fps(rng, 9000, used))]
    f = os.path.join(work, "dprep.txt")
    write_pairs(f, a)
    sim.run(["add", d, f, "--memtable-ops", "3000"], timeout=300)
    dele = rng.sample(a, 700)
    write_pairs(f, dele)
    sim.run(["delete", d, f], timeout=300)
    a2 = [(fp, 2_000_000 + i) for i, fp in enumerate(new_fps(rng, 2000, used))]
    write_pairs(f, a2)
    sim.run(["add", d, f], timeout=300)
    os.unlink(f)
    # an add through a pipe (ids = sequence numbers), killed once everything is acknowledged
    bf = new_fps(rng, 4000, used)
    fd = Feeder(sim, ["add", d, "-", "--acks", "--json"], [f"{x:016x}\n" for x in bf], rng,
                chunk=(50, 600), pause=(0.002, 0.01), hold_open=30)
    t0 = time.monotonic()
    while fd.acked_lines < len(bf) and time.monotonic() - t0 < 30 and fd.p.poll() is None:
        time.sleep(0.02)
    fd.kill()
    b = [(fp, fd.first_seq + i) for i, fp in enumerate(bf[:fd.acked_lines])] if fd.first_seq else []
    # a writable open that seals the log it replays, killed once it rewrote the manifest
    m0 = manifest_number(d)
    p = subprocess.Popen([sim.path, "add", d, "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    while manifest_number(d) == m0 and time.monotonic() - t0 < 3:
        time.sleep(0.01)
    time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    p.stdin.close()
    inserted = a + a2 + b
    dset = set(dele)
    live = set(p for p in inserted if p not in dset)
    return {"live": live, "deleted": dset, "inserted": set(inserted), "max_seq": fd.last_seq or 0,
            "live_fps": {p[0] for p in live}, "deleted_fps": {p[0] for p in dset},
            "inserted_fps": {p[0] for p in inserted},
            "sealed": manifest_number(d) != m0, "log_ops": len(b)}


def log_record_boundaries(path):
    """Offsets where a record ends (after the 32-byte header), read from the headers."""
    with open(path, "rb") as f:
        data = f.read()
    out, o = [], 32
    while o + 24 <= len(data):
        count = struct.unpack_from("<I", data, o + 20)[0]
        sk = struct.unpack_from("<H", data, o + 17)[0]
        end = o + 24 + (16 + sk) * count + 4
        if end > len(data) or count == 0:
            break
        out.append(end)
        o = end
    return data, out


def damage(rng, path, kind):
    """Applies one damage to path; returns a description, or None when it changed nothing."""
    with open(path, "rb") as f:
        data = f.read()
    n = len(data)
    if kind == "delete":
        os.unlink(path)
        return "deleted"
    if n == 0:
        return None
    if kind == "bitflip":
        off, bit = rng.randrange(n), rng.randrange(8)
        b = bytearray(data)
        b[off] ^= 1 << bit
        new, desc = bytes(b), f"bit {bit} of byte {off} flipped (of {n})"
    elif kind == "truncate":
        off = rng.randrange(n)
        new, desc = data[:off], f"truncated to {off} bytes (of {n})"
    elif kind == "cut-at-record":
        _, ends = log_record_boundaries(path)
        ends = [e for e in ends if e < n] + [32]
        off = rng.choice(ends)
        new, desc = data[:off], f"cut at the record boundary {off} (of {n})"
    elif kind == "zero":
        ln = rng.choice([1, 8, 64, 512, 4096])
        off = rng.randrange(n)
        b = bytearray(data)
        b[off:off + ln] = bytes(len(b[off:off + ln]))
        new, desc = bytes(b), f"bytes {off}..{min(n, off + ln)} zeroed (of {n})"
    else:
        raise ValueError(kind)
    if new == data:
        return None
    with open(path, "wb") as f:
        f.write(new)
    return desc


def check_damage_case(sim, cat, rng, work, pristine, oracle, ftype, kind, case_no, all_fps):
    case = os.path.join(work, "dcase")
    shutil.rmtree(case, ignore_errors=True)
    shutil.copytree(pristine, case)
    files = sorted(f for f in os.listdir(case) if
                   (ftype == "MANIFEST" and f == "MANIFEST") or (ftype == "RECIPE" and f == "RECIPE") or
                   (ftype == "seg" and f.startswith("seg-")) or (ftype == "tomb" and f.startswith("tomb-")) or
                   (ftype == "log" and f.startswith("log-")))
    if ftype == "log":
        # damage the log that holds records (the newest one, a writable open appended nothing)
        files = [f for f in files if os.path.getsize(os.path.join(case, f)) > 32] or files
    if not files:
        return False
    target = rng.choice(files)
    desc = damage(rng, os.path.join(case, target), kind)
    if desc is None:
        return False
    cat.cases += 1
    cat.current = cat.cases
    cat.counters[f"{ftype}/{kind}"] += 1
    what = f"damage case {case_no}: {target} {desc}"
    repro = f"cp -a PRISTINE C; damage C/{target}: {desc}"
    live, deleted, inserted = oracle["live"], oracle["deleted"], oracle["inserted"]
    # verify
    v = sim.run(["verify", case], timeout=120)
    if v.panicked:
        cat.fail("panic in verify", 0, what, repro + "; simdex verify C")
    elif v.timed_out:
        cat.fail("verify hangs", 0, what, repro + "; simdex verify C")
    # query
    q, got = query_pairs(sim, case, all_fps, work)
    visible_loss = 0
    if q.timed_out:
        cat.fail("query hangs", 0, what, repro)
    elif q.panicked:
        cat.fail("panic in query", 0, what + ": " + q.err[:200], repro + "; simdex query C -k 0 --input ALL")
    elif q.rc != 0:
        visible_loss = -1
        if not q.named_error:
            cat.fail("unnamed error from query", 0, what + ": " + q.err[:200], repro)
    else:
        missing = live - got
        back = (got & deleted) - live
        extra = {p for p in got - live - deleted if p[0] not in oracle["inserted_fps"]}
        visible_loss = len(missing)
        if missing:
            cat.fail("query answers without acknowledged pairs (silent loss)", len(missing),
                     what + f": {len(missing)} live pairs missing, exit 0", repro + "; simdex query C -k 0 --input ALL")
        if back:
            cat.fail("query returns deleted pairs", len(back), what, repro + "; simdex query C -k 0 --input ALL")
        if extra:
            cat.fail("query returns pairs never inserted", len(extra), what, repro)
    # recover
    out = os.path.join(work, "drec", "new")
    shutil.rmtree(os.path.dirname(out), ignore_errors=True)
    os.makedirs(os.path.dirname(out))
    r = sim.run(["recover", case, "--out", out, "--json"], timeout=300)
    rec_missing = None
    if r.panicked:
        cat.fail("panic in recover", 0, what + ": " + r.err[:200], repro + "; simdex recover C --out N --json")
    elif r.timed_out:
        cat.fail("recover hangs", 0, what, repro)
    elif r.rc != 0:
        cat.counters["recover refused"] += 1
        if not r.named_error:
            cat.fail("unnamed error from recover", 0, what + ": " + r.err[:200], repro)
        left = os.listdir(os.path.dirname(out))
        if left:
            cat.fail("leftover files after a failed recover", len(left), what + ": " + ", ".join(left), repro)
    else:
        try:
            rep = json.loads(r.out)
        except ValueError:
            rep = {}
        reported = sum(int(rep.get(k) or 0) for k in
                       ("segment_entries_lost", "log_operations_lost", "log_operations_possibly_lost"))
        undone = int(rep.get("deletes_possibly_undone") or 0)
        rq, rgot = query_pairs(sim, out, all_fps, work)
        if rq.rc != 0:
            cat.fail("recovered index does not answer", 0, what + ": " + rq.err[:200], repro)
        else:
            rmissing = live - rgot
            rec_missing = len(rmissing)
            idless = {p for p in rmissing if (p[0], MAX_ID) in rgot}
            gone = rmissing - idless
            ids_reported = 0
            for x in rep.get("lost", []):
                dt = str(x.get("detail", ""))
                m = re.search(r"document ids of (?:all )?(\d+) entries", dt)
                ids_reported += int(m.group(1)) if m else ("document id is unreadable" in dt)
            back = (rgot & deleted) - live
            back_fp = {p for p in rgot if p[1] == MAX_ID and p[0] in oracle["deleted_fps"]
                       and p[0] not in oracle["live_fps"]}
            nback = len(back) + len(back_fp)
            rc_ = repro + "; simdex recover C --out N --json; simdex query N -k 0 --input ALL"
            if rmissing and reported == 0 and ids_reported == 0:
                cat.fail("recover loses pairs and reports 0 lost", len(rmissing),
                         what + f": {len(rmissing)} live pairs not recovered ({len(idless)} kept only under id 2^64-1), report: 0 lost", rc_)
            elif len(gone) > reported:
                cat.fail("recover undercounts its loss", len(gone) - reported,
                         what + f": {len(gone)} live pairs not recovered, {reported} reported", rc_)
            elif len(idless) > ids_reported:
                cat.fail("recover undercounts lost document ids", len(idless) - ids_reported,
                         what + f": {len(idless)} live pairs kept only under id 2^64-1, {ids_reported} reported", rc_)
            elif len(gone) == reported and len(idless) == ids_reported:
                cat.counters["recover exact"] += 1
            else:
                cat.counters["recover over-reports (bound)"] += 1
                cat.counters[f"recover over-reports (bound) on {ftype}/{kind}"] += 1
            if idless:
                cat.counters["document ids lost, listed entry by entry (summary line says lost: 0)"] += len(idless)
            if nback > undone:
                cat.fail("recover brings deleted pairs back unreported", nback - undone,
                         what + f": {nback} deleted pairs back, deletes_possibly_undone = {undone}", rc_)
        left = [x for x in os.listdir(os.path.dirname(out)) if x != "new"]
        if left:
            cat.fail("leftover files after recover", len(left), what + ": " + ", ".join(left), repro)
    # verify must not call an index clean that lost acknowledged data
    lossy = visible_loss != 0 or (rec_missing or 0) > 0
    if v.rc == 0 and lossy:
        n = visible_loss if visible_loss > 0 else (rec_missing or 0)
        cat.fail("verify says ok while acknowledged pairs are unreadable", n,
                 what + f": query exit {q.rc}, {n} live pairs missing", repro + "; simdex verify C")
    elif v.rc == 0:
        cat.counters["verify ok, nothing lost (harmless damage)"] += 1
    # a writer opening a cut log must not hand a sequence number out twice
    if ftype == "log" and oracle["max_seq"]:
        newfps = new_fps(rng, 50, {p[0] for p in inserted})
        nf = os.path.join(work, "dnew.txt")
        write_fps(nf, newfps)
        args = ["add", case, nf]
        if sim.has_flag("add", "--log-recovery"):
            args += ["--log-recovery", "point-in-time"]
        a = sim.run(args, timeout=120)
        if a.panicked:
            cat.fail("panic in add", 0, what, repro + "; " + shlex.join(args[:1]) + " C NEW")
        elif a.rc == 0:
            aq, agot = query_pairs(sim, case, newfps, work)
            reused = [p for p in agot if p[1] <= oracle["max_seq"]]
            if reused:
                cat.fail("sequence numbers (document ids) handed out twice", len(reused),
                         what + f": new ids from {min(p[1] for p in reused)}, acknowledged ids reach {oracle['max_seq']}",
                         repro + "; simdex add C NEW.txt" + (" --log-recovery point-in-time" if len(args) > 3 else ""))
        os.unlink(nf)
    shutil.rmtree(case, ignore_errors=True)
    shutil.rmtree(os.path.dirname(out), ignore_errors=True)
    return True


def recipe_cases(sim, cat, rng, work, deadline, corpus):
    """A `dedup --index` index's RECIPE damaged: verify must notice, dedup must refuse."""
    if not os.path.isdir(corpus):
        cat.notes.append("RECIPE: no corpus at " + corpus + ", skipped")
        return
    docs = os.path.join(work, "rdocs")
    os.makedirs(docs, exist_ok=True)
    for name in sorted(os.listdir(corpus))[:40]:
        shutil.copy(os.path.join(corpus, name), docs)
    pristine = os.path.join(work, "rpristine")
    r = sim.run(["dedup", docs, "--index", pristine], timeout=300)
    if r.rc != 0 or not os.path.exists(os.path.join(pristine, "RECIPE")):
        cat.notes.append(f"RECIPE: dedup --index made none (exit {r.rc}), skipped")
        return
    kinds = ["delete"] + ["bitflip", "truncate", "zero"] * 4
    n = 0
    while time.monotonic() < deadline and n < len(kinds):
        kind = kinds[n]
        n += 1
        case = os.path.join(work, "rcase")
        shutil.rmtree(case, ignore_errors=True)
        shutil.copytree(pristine, case)
        desc = damage(rng, os.path.join(case, "RECIPE"), kind)
        if desc is None:
            continue
        cat.cases += 1
        cat.current = cat.cases
        cat.counters[f"RECIPE/{kind}"] += 1
        what = f"RECIPE {desc}"
        repro = f"simdex dedup DOCS --index P; cp -a P C; damage C/RECIPE: {desc}"
        v = sim.run(["verify", case], timeout=60)
        d = sim.run(["dedup", docs, "--index", case], timeout=300)
        for res, name in ((v, "verify"), (d, "dedup")):
            if res.panicked:
                cat.fail(f"panic in {name}", 0, what, repro)
        if kind != "delete" and v.rc == 0:
            cat.fail("verify says ok on a damaged RECIPE", 0, what, repro + "; simdex verify C")
        if d.rc == 0 and kind == "delete" and v.rc == 0:
            cat.fail("RECIPE deleted: verify ok, dedup --index re-pins a new recipe silently", 0, what,
                     repro + "; simdex verify C; simdex dedup DOCS --index C")
        elif d.rc == 0:
            # dedup went on: with a recipe it could not read it fingerprints with another one
            cat.fail("dedup --index accepts a damaged RECIPE", 0, what + ": exit 0", repro + "; simdex dedup DOCS --index C")
        elif not d.named_error:
            cat.fail("unnamed error from dedup", 0, what + ": " + d.err[:200], repro)
        shutil.rmtree(case, ignore_errors=True)


def cat_damage(sim, cat, rng, budget, work, corpus):
    deadline = time.monotonic() + budget
    pristine = os.path.join(work, "dpristine")
    oracle = build_damage_index(sim, rng, work, pristine)
    st = sim.run(["stats", pristine, "--json"])
    try:
        sj = json.loads(st.out)
        shape = (f"{len(sj['segments'])} segments, {sj.get('tombstone_files', '?')} tombstone files, "
                 f"logs holding {sum(l.get('operations', 0) for l in sj.get('logs', []))} operations")
    except (ValueError, KeyError):
        shape = "stats failed: " + st.err[:100]
    cat.notes.append(f"index: {len(oracle['live']):,} live pairs, {len(oracle['deleted'])} deleted, {shape}, "
                     f"log sealed by a writable open: {'yes' if oracle['sealed'] else 'no'}")
    all_fps = sorted({p[0] for p in oracle["inserted"]})
    v = sim.run(["verify", pristine])
    q, got = query_pairs(sim, pristine, all_fps, work)
    if v.rc != 0 or got != oracle["live"]:
        cat.fail("the undamaged index is wrong", abs(len(got) - len(oracle["live"])),
                 f"verify {v.rc}, query {len(got)} pairs, oracle {len(oracle['live'])}", "setup")
    combos = [(t, k) for t in ("MANIFEST", "seg", "tomb", "log")
              for k in ("bitflip", "truncate", "zero", "delete") + (("cut-at-record",) if t == "log" else ())]
    recipe_share = deadline - (time.monotonic() + (deadline - time.monotonic()) * 0.1)
    main_deadline = time.monotonic() + (deadline - time.monotonic()) * 0.9
    i = 0
    while time.monotonic() < main_deadline and i < 2000:
        t, k = combos[i % len(combos)]
        i += 1
        # deletion is one case per file, not worth repeating as often as random offsets
        if k == "delete" and cat.counters[f"{t}/{k}"] >= 3:
            continue
        check_damage_case(sim, cat, rng, work, pristine, oracle, t, k, i, all_fps)
    del recipe_share
    recipe_cases(sim, cat, rng, work, deadline, corpus)
    shutil.rmtree(pristine, ignore_errors=True)


# ----------------------------------------------------------------------------- 3. readers beside a writer
def cat_readers(sim, cat, rng, budget, work):
    deadline = time.monotonic() + budget
    script = os.path.join(HERE, "reader-race.sh")
    has_strace = shutil.which("strace") is not None
    race_share = budget * 0.25
    for reader in ("verify", "stats"):
        if not has_strace or not os.path.exists(script):
            cat.notes.append("reader-race.sh: strace or the script missing, skipped")
            break
        # one add of 100,000 takes about 0.65 s here (each closes with a flush and the policy's merges)
        adds, per, delay = max(4, int(race_share / 2 / 0.65)), 100000, 5000
        argv = ["bash", script, sim.path, str(adds), str(per), str(delay), reader]
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=race_share + 60)
            outp = p.stdout
        except subprocess.TimeoutExpired as e:
            outp = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        m = re.search(r"reader_runs=(\d+) failures=(\d+) inconclusive=(\d+)", outp)
        cmd = f"tools/scripts/reader-race.sh SIMDEX {adds} {per} {delay} {reader}"
        if not m:
            cat.fail("reader-race.sh gave no result", 0, outp[-300:], cmd)
            continue
        runs, fails, inc = map(int, m.groups())
        cat.cases += runs
        cat.counters[f"{reader} inconclusive (exit 3)"] += inc
        cat.notes.append(f"reader-race.sh {reader}: {runs} runs, {fails} failures, {inc} inconclusive")
        first = outp.split("--- ", 1)[1][:300] if "--- " in outp else ""
        for _ in range(fails):
            cat.fail(f"false DAMAGED ({reader} beside a writer, reader-race.sh)" if reader == "verify"
                     else f"{reader} fails beside a writer", 1, first, cmd)
    # issue 23's loop
    big = os.path.join(work, "big.txt")
    with open(big, "w") as f:
        rr = random.Random(rng.getrandbits(64))
        f.writelines(f"{rr.getrandbits(64):016x}\n" for _ in range(600000))
    rounds = runs = false = inc = 0
    while time.monotonic() < deadline:
        rounds += 1
        vr = os.path.join(work, "vr")
        shutil.rmtree(vr, ignore_errors=True)
        w = subprocess.Popen([sim.path, "add", vr, big, "--memtable-ops", "20000"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        fails_here, creating = [], []
        while w.poll() is None:
            existed = os.path.isdir(vr)
            had_manifest = os.path.exists(os.path.join(vr, "MANIFEST"))
            r = sim.run(["verify", vr], timeout=120)
            if not existed:
                continue            # no index yet: exit 2 "No such file" is the truth
            runs += 1
            if r.rc == 3:
                inc += 1
            elif r.rc != 0:
                (fails_here if had_manifest else creating).append(r)
        werr = w.stderr.read().decode("utf-8", "replace")
        quiet = sim.run(["verify", vr], timeout=120)
        if w.returncode != 0:
            cat.fail("the writer failed", 0, werr[:300], f"simdex add vr big.txt --memtable-ops 20000")
        if quiet.rc != 0:
            cat.fail("index damaged after the writer finished", 0, quiet.out[-300:], "simdex verify vr")
        loop = "simdex add vr big.txt --memtable-ops 20000 & while kill -0 $!; do simdex verify vr || echo FALSE; done"
        for r in creating:
            first = (r.out + r.err).strip().splitlines()
            if r.rc == 2 and r.named_error and not r.panicked:
                # "no index here yet" (exit 2: nothing to read) is the truth while add creates it
                cat.counters["verify exit 2 (no index yet) while add creates the index"] += 1
                continue
            cat.fail("false DAMAGED while add creates the index (no MANIFEST yet)", 1,
                     f"exit {r.rc}: " + (first[0] if first else ""), loop + " (the first runs, before MANIFEST exists)")
        false -= sum(1 for r in creating if r.rc == 2 and r.named_error and not r.panicked)
        for r in fails_here:
            kind = ("panic in verify" if r.panicked else "verify hangs" if r.timed_out else
                    "false DAMAGED (verify beside a writer)")
            first = (r.out + r.err).strip().splitlines()
            cat.fail(kind, 1, f"exit {r.rc}: " + next((l for l in first if "damage" in l.lower() or "error" in l.lower()), first[-1] if first else ""),
                     loop)
        false += len(creating)
        false += len(fails_here)
    cat.cases += runs
    cat.counters["verify inconclusive (exit 3), issue loop"] += inc
    cat.notes.append(f"issue loop: {rounds} adds of 600,000 (memtable 20,000), {runs} verify runs, "
                     f"{false} false DAMAGED, {inc} inconclusive")
    shutil.rmtree(os.path.join(work, "vr"), ignore_errors=True)
    os.unlink(big)


# ----------------------------------------------------------------------------- 4. disk full
def cat_diskfull(sim, cat, rng, budget, work):
    deadline = time.monotonic() + budget
    mnt = os.path.join(work, "full")
    os.makedirs(mnt)
    if os.geteuid() != 0:
        cat.skipped = "not root (mount -t tmpfs needs it)"
        return
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt], capture_output=True, text=True)
    if r.returncode != 0:
        cat.skipped = "mount -t tmpfs failed: " + r.stderr.strip()[:100]
        return
    try:
        _diskfull_cases(sim, cat, rng, deadline, work, mnt)
    finally:
        subprocess.run(["umount", mnt])
        os.rmdir(mnt)


def _clear(d):
    for x in os.listdir(d):
        p = os.path.join(d, x)
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)


def _full_check(sim, cat, res, what, mnt, repro, expect_fail=True):
    first = res.err.strip().splitlines()[-1][:160] if res.err.strip() else ""
    log(f"diskfull {what}: exit {res.rc}: {first}")
    if res.rc != 0:
        cat.counters[f"{what}: exit {res.rc}"] += 1
    if res.panicked:
        cat.fail("panic on a full disk", 0, what + ": " + res.err[:200], repro)
    elif res.timed_out:
        cat.fail("hang on a full disk", 0, what, repro)
    elif res.rc == 0 and expect_fail:
        cat.counters[what + ": fit"] += 1
    elif res.rc != 0 and not res.named_error:
        cat.fail("unnamed error on a full disk", 0, what + ": " + res.err[:200], repro)
    left = tmp_files(mnt)
    if left:
        cat.fail("leftover files after a full disk", len(left), what + ": " + ", ".join(os.path.relpath(x, mnt) for x in left[:5]), repro)


def _diskfull_cases(sim, cat, rng, deadline, work, mnt):
    n_case = 0
    used = set()
    while time.monotonic() < deadline and n_case < 40:
        kind = ["add", "add-nocheck", "compact", "recover", "build"][n_case % 5]
        n_case += 1
        _clear(mnt)
        cat.cases += 1
        cat.current = cat.cases
        cat.counters[kind] += 1
        if kind in ("add", "add-nocheck"):
            n = rng.randint(150000, 400000)
            pairs = [(fp, i + 1) for i, fp in enumerate(new_fps(rng, n, used))]
            idx = os.path.join(mnt, "idx")
            args = ["add", idx, "-", "--acks", "--json", "--memtable-ops", str(rng.choice([20000, 100000]))]
            if kind == "add-nocheck":
                args.append("--no-space-check")
            f = Feeder(sim, args, [f"{a:016x}\t{b}\n" for a, b in pairs], rng, chunk=(2000, 20000), pause=(0, 0.002))
            rc = f.finish(timeout=120)
            err = f.err.decode("utf-8", "replace")
            repro = f"mount -t tmpfs -o size=8m tmpfs M; {n} pairs | simdex {shlex.join(args[:1] + ['M/idx'] + args[2:])}"
            res = Res([sim.path] + args, rc, "", err, False, 0)
            _full_check(sim, cat, res, kind, mnt, repro)
            if rc not in (0, 2) and rc != 101:
                cat.fail("full disk: exit code is not 2", 0, f"{kind}: exit {rc}: {err[:200]}", repro)
            acked = pairs[:f.acked_lines]
            if not os.path.exists(idx):
                if acked:
                    cat.fail("acknowledged writes lost on a full disk", len(acked), "index gone", repro)
                continue
            if rc != 0 and not acked and kind == "add":
                # refused up front: it must leave nothing behind
                if os.listdir(mnt):
                    cat.fail("a refused add leaves files", 0, ", ".join(os.listdir(mnt)), repro)
            q, got = query_pairs(sim, idx, [a for a, _ in acked], work)
            lost = [p for p in acked if p not in got]
            if q.rc != 0:
                cat.fail("full disk: the index does not open afterwards", 0, q.err[:200], repro + "; simdex query M/idx")
            elif lost:
                cat.fail("acknowledged writes lost on a full disk", len(lost), f"{len(lost)} of {len(acked)}", repro)
            v = sim.run(["verify", idx])
            if v.rc != 0:
                cat.fail("full disk leaves a damaged index", 0, (v.out + v.err)[-300:], repro + "; simdex verify M/idx")
        elif kind == "compact":
            idx = os.path.join(mnt, "cidx")
            n = rng.randint(125000, 140000)
            pairs = [(fp, i + 1) for i, fp in enumerate(new_fps(rng, n, used))]
            pf = os.path.join(work, "fullp.txt")
            cut = n - 20000
            write_pairs(pf, pairs[:cut])
            sim.run(["add", idx, pf, "--no-space-check", "--memtable-ops", "1000000"], timeout=120)
            write_pairs(pf, pairs[cut:])
            a2 = sim.run(["add", idx, pf, "--no-space-check", "--memtable-ops", "100000"], timeout=120)
            _full_check(sim, cat, a2, "add (its close merges)", mnt, f"tmpfs 8m; simdex add M/cidx ({cut} pairs); simdex add M/cidx (20000 pairs) --no-space-check")
            st = sim.run(["stats", idx, "--json"])
            try:
                pairs_in = [p for p in pairs]  # what the adds acknowledged (exit 0) is checked below
                nseg = len(json.loads(st.out)["segments"])
            except ValueError:
                nseg = 0
            before = snapshot(idx)
            q0, got0 = query_pairs(sim, idx, [a for a, _ in pairs_in], work)
            res = sim.run(["compact", idx], timeout=300)
            repro = f"tmpfs 8m; simdex add M/cidx ({cut} pairs); simdex add M/cidx (20000 pairs) --no-space-check; simdex compact M/cidx ({nseg} segments)"
            _full_check(sim, cat, res, "compact", mnt, repro)
            q, got = query_pairs(sim, idx, [a for a, _ in pairs_in], work)
            lost = got0 - got
            if q.rc != 0:
                cat.fail("full disk: the index does not open afterwards", 0, q.err[:200], repro)
            elif lost:
                cat.fail("acknowledged writes lost on a full disk", len(lost), "compact", repro)
            v = sim.run(["verify", idx])
            if v.rc != 0:
                cat.fail("full disk leaves a damaged index", 0, (v.out + v.err)[-300:], repro)
            if res.rc != 0 and snapshot(idx) != before:
                a_, r_, c_ = snap_diff(before, snapshot(idx))
                cat.counters["failed compact changed the index (allowed: a flush)"] += 1
            os.unlink(pf)
        elif kind == "recover":
            src = os.path.join(work, "fullsrc")
            if not os.path.exists(src):
                pf = os.path.join(work, "fullp.txt")
                write_pairs(pf, [(fp, i + 1) for i, fp in enumerate(new_fps(rng, 350000, used))])
                sim.run(["add", src, pf], timeout=300)
                os.unlink(pf)
            res = sim.run(["recover", src, "--out", os.path.join(mnt, "rec"), "--json"], timeout=300)
            repro = "simdex recover SRC(350,000 pairs) --out M/rec (tmpfs 8m)"
            _full_check(sim, cat, res, "recover", mnt, repro)
            if res.rc != 0 and os.listdir(mnt):
                cat.fail("leftover files after a failed recover", len(os.listdir(mnt)), ", ".join(os.listdir(mnt)), repro)
        elif kind == "build":
            n = rng.randint(300000, 600000)
            pf = os.path.join(work, "fullb.txt")
            write_fps(pf, new_fps(rng, n, used))
            res = sim.run(["build", "--out", os.path.join(mnt, "out.sdx"), pf], timeout=300)
            repro = f"simdex build --out M/out.sdx ({n} fingerprints) (tmpfs 8m)"
            _full_check(sim, cat, res, "build", mnt, repro)
            if res.rc != 0 and os.listdir(mnt):
                cat.fail("leftover files after a failed build", len(os.listdir(mnt)), ", ".join(os.listdir(mnt)), repro)
            os.unlink(pf)
    shutil.rmtree(os.path.join(work, "fullsrc"), ignore_errors=True)


# ----------------------------------------------------------------------------- 5. bad input
OPT_RE = re.compile(r"^\s+(?:-(\w), )?--([\w-]+)(?: <([^>]+)>)?")
PATHY = {"FILE", "OUT", "INPUT", "QUERIES", "SPILL_DIR", "NAMES", "FILE.svg", "DIR", "NEAR", "INDEX"}
BAD_NUMBERS = ["nan", "-1", "abc", "1e999", "18446744073709551616", "", "inf"]


def scratch_fixture(sim, root, corpus):
    os.makedirs(root)
    rr = random.Random(5)
    fps = [rr.getrandbits(64) for _ in range(300)]
    write_fps(os.path.join(root, "fps.txt"), fps)
    write_pairs(os.path.join(root, "pairs.txt"), [(fp, i + 1) for i, fp in enumerate(fps)])
    sim.run(["build", "--out", os.path.join(root, "seg.sdx"), os.path.join(root, "pairs.txt")])
    sim.run(["add", os.path.join(root, "idx"), os.path.join(root, "pairs.txt")])
    docs = os.path.join(root, "docs")
    os.makedirs(docs)
    if os.path.isdir(corpus):
        for name in sorted(os.listdir(corpus))[:12]:
            shutil.copy(os.path.join(corpus, name), docs)
    else:
        for i in range(6):
            with open(os.path.join(docs, f"d{i}.txt"), "w") as f:
                f.write(" ".join(f"word{j % (7 + i)}" for j in range(300)))
    with open(os.path.join(root, "empty.txt"), "w"):
        pass
    # the fault on the first line: a command that stops there has acknowledged nothing
    with open(os.path.join(root, "nonutf8.txt"), "wb") as f:
        f.write(b"\xff\xfe\xfd\x80garbage\n0123456789abcdef\n")
    with open(os.path.join(root, "malformed.txt"), "w") as f:
        f.write("not-a-fingerprint\n0123456789abcdef\n0123456789abcdeg\t12\n")
    with open(os.path.join(root, "garbage.bin"), "wb") as f:
        f.write(bytes(rr.getrandbits(8) for _ in range(5000)))
    os.makedirs(os.path.join(root, "adir"))


# subcommand -> (valid invocation, positional slots {name: index in argv} that take files)
BASES = {
    "plan": (["plan", "--count", "1000"], {}),
    "build": (["build", "--out", "out.sdx", "pairs.txt"], {"INPUT": 3}),
    "query": (["query", "seg.sdx", "-k", "3", "--input", "fps.txt"], {"FILE": 1}),
    "inspect": (["inspect", "seg.sdx"], {"FILE": 1}),
    "verify": (["verify", "seg.sdx"], {"FILE": 1}),
    "dump": (["dump", "seg.sdx"], {"FILE": 1}),
    "bench query": (["bench", "query", "seg.sdx", "--input", "fps.txt", "--rounds", "1"], {"FILE": 2}),
    "bench generate": (["bench", "generate", "--count", "10"], {}),
    "batch": (["batch", "seg.sdx", "--queries", "fps.txt"], {"INDEX": 1}),
    "cluster": (["cluster", "seg.sdx", "--out", "cl.jsonl"], {"INDEX": 1}),
    "split": (["split", "seg.sdx", "--parts", "2", "--out", "chunks"], {"INDEX": 1}),
    "fingerprint": (["fingerprint", "docs"], {"INPUTS": 1}),
    "dedup": (["dedup", "docs"], {"INPUTS": 1}),
    "add": (["add", "newidx", "pairs.txt"], {"INPUT": 2}),
    "add existing": (["add", "idx", "pairs.txt"], {"INPUT": 2, "DIR": 1}),
    "delete": (["delete", "idx", "pairs.txt"], {"DIR": 1, "INPUT": 2}),
    "compact": (["compact", "idx"], {"DIR": 1}),
    "stats": (["stats", "idx"], {"DIR": 1}),
    "dump-log": (["dump-log", "idx"], {"DIR": 1}),
    "recover": (["recover", "idx", "--out", "rec"], {"DIR": 1}),
    "tune": (["tune", "docs", "--sample", "50"], {"INPUTS": 1}),
}
BAD_FILES = {"missing": "nope/missing.txt", "directory": "adir", "empty": "empty.txt", "non-UTF-8": "nonutf8.txt",
             "malformed": "malformed.txt", "garbage": "garbage.bin"}
# positional inputs where some of these are valid: documents (any bytes, a folder), an index directory that
# `add` creates, an empty list of fingerprints (an empty segment, an empty index)
VALID_FILE_CASES = {("fingerprint", "INPUTS"): {"directory", "empty", "non-UTF-8", "malformed", "garbage"},
                    ("dedup", "INPUTS"): {"directory", "empty", "non-UTF-8", "malformed", "garbage"},
                    ("tune", "INPUTS"): {"directory", "empty", "non-UTF-8", "malformed", "garbage"},
                    ("add", "INPUT"): {"empty"}, ("add existing", "INPUT"): {"empty"},
                    ("build", "INPUT"): {"empty"},
                    ("add existing", "DIR"): {"missing", "directory"}}
# options taking a path: inputs get a missing file, a directory and garbage; outputs that are files get an
# existing directory; outputs that are directories get an existing file (created when missing: valid)
PATH_INPUT_OPTS = {"--input", "--queries", "--near", "--idf"}
PATH_OUT_FILE_OPTS = {"--report", "--pairs", "--plot", "--learn-idf", "--for-index"}
PATH_OUT_DIR_OPTS = {"--index"}
OUT_BY_COMMAND = {"build": "file", "cluster": "file", "split": "dir", "recover": "dir"}
# verify and dump-log exit 1 for "damage found": a non-index input named as such is accepted with 1
EXIT1_OK = {"verify", "dump-log"}


def subcommands(sim):
    out = []
    top = sim.help()
    sec = top.split("Commands:", 1)[1].split("Options:", 1)[0]
    for line in sec.splitlines():
        m = re.match(r"^\s{2}([\w-]+)\s", line)
        if m and m.group(1) != "help":
            out.append(m.group(1))
    return out


def badinput_cases(sim, corpus):
    subs = subcommands(sim)
    cases = []
    names = []
    for s in subs:
        if s == "bench":
            names += ["bench query", "bench generate"]
        elif s == "add":
            names += ["add", "add existing"]
        else:
            names.append(s)
    for name in names:
        if name not in BASES:
            cases.append((name, "no base invocation known", None, None))
            continue
        base, slots = BASES[name]
        for slot, pos in slots.items():
            for what, path in BAD_FILES.items():
                if what in VALID_FILE_CASES.get((name, slot), ()):
                    continue
                if slot == "DIR" and what in ("non-UTF-8", "malformed"):
                    continue
                argv = list(base)
                argv[pos] = path
                cases.append((name, f"{slot} {what}", argv, [path]))
        helptext = sim.help(*name.split()[:2]) if name.startswith("bench") else sim.help(name.split()[0])
        o = helptext.find("Options:")
        helptext = helptext[o:].split("\nExamples", 1)[0] if o >= 0 else helptext
        for line in helptext.splitlines():
            m = OPT_RE.match(line)
            if not m or not m.group(3):
                continue
            short, longname, val = m.groups()
            opt = "--" + longname
            if val in PATHY:
                kind = ("in" if opt in PATH_INPUT_OPTS else "file" if opt in PATH_OUT_FILE_OPTS else
                        "dir" if opt in PATH_OUT_DIR_OPTS else OUT_BY_COMMAND.get(name) if opt == "--out" else None)
                tries = {"in": (("missing", "nope/x"), ("directory", "adir"), ("garbage", "garbage.bin")),
                         "file": (("an existing directory", "adir"),),
                         "dir": (("an existing file", "garbage.bin"),)}.get(kind, ())
                for what, path in tries:
                    argv = _with_opt(base, opt, path)
                    cases.append((name, f"{opt} {what}", argv, [opt, path, "nope", "adir", "garbage"]))
            else:
                for bad in BAD_NUMBERS:
                    argv = _with_opt(base, opt, bad)
                    shown = [f"'{bad}'", f"`{bad}`", f'"{bad}"'] if bad else ["''", "``", '""', "empty"]
                    cases.append((name, f"{opt} {bad!r}", argv, [opt] + shown + (["-" + short] if short else [])))
    return cases


def _with_opt(base, opt, val):
    argv = list(base)
    if opt in argv:
        i = argv.index(opt)
        argv[i + 1] = val
        return argv
    for short_long in (("-k", "--k"), ("-o", "--out"), ("-i", "--input")):
        if opt == short_long[1] and short_long[0] in argv:
            i = argv.index(short_long[0])
            argv[i + 1] = val
            return argv
    return argv + [opt + "=" + val] if val.startswith("-") or val == "" else argv + [opt, val]


def cat_badinput(sim, cat, rng, budget, work, corpus):
    deadline = time.monotonic() + budget
    pristine = os.path.join(work, "bscratch")
    scratch_fixture(sim, pristine, corpus)
    base_snap = snapshot(pristine)
    cases = badinput_cases(sim, corpus)
    rng.shuffle(cases)
    tried = 0
    for name, what, argv, mentions in cases:
        if time.monotonic() >= deadline:
            cat.notes.append(f"budget spent after {tried} of {len(cases)} cases")
            break
        if argv is None:
            cat.notes.append(f"{name}: {what}")
            continue
        tried += 1
        case = os.path.join(work, "bcase")
        shutil.rmtree(case, ignore_errors=True)
        shutil.copytree(pristine, case)
        res = sim.run(argv, timeout=30, cwd=case)
        cat.cases += 1
        cat.current = cat.cases
        cat.counters[name] += 1
        repro = f"(in a scratch dir) simdex {shlex.join(argv)}"
        label = f"{name}, {what}"
        if res.timed_out:
            cat.fail("hang (30 s)", 0, label, repro)
        elif res.panicked:
            cat.fail("panic", 0, label + ": " + res.err[:200], repro)
        elif res.rc == 0:
            cat.fail("bad input accepted (exit 0)", 0, label + ": " + (res.err or res.out)[:200], repro)
        elif res.rc == 1 and name in EXIT1_OK and any(m and m.lower() in (res.out + res.err).lower() for m in mentions):
            cat.counters[f"{name}: exit 1 (damage found) for a non-index input"] += 1
        elif res.rc != 2:
            cat.fail(f"exit {res.rc}, not 2", 0, label + ": " + (res.err or res.out)[:200], repro)
        elif (not any(m and m.lower() in res.err.lower() for m in mentions)
              and not any(m and m.startswith("--") and len(m) > 4 and re.search(r"\b%s\b" % re.escape(m[2:]), res.err)
                          for m in mentions)
              and not re.search(r"line \d|offset \d", res.err)):
            cat.fail("message names neither the argument nor the file", 0, label + ": " + res.err.strip()[:200], repro)
        if not res.timed_out:
            a, r, c = snap_diff(base_snap, snapshot(case))
            if a or r or c:
                cat.fail("files left behind or changed by a failed command" if res.rc != 0 else
                         "files written for bad input", len(a) + len(r) + len(c),
                         label + f": added {a[:4]}, removed {r[:4]}, changed {c[:4]}", repro)
    shutil.rmtree(os.path.join(work, "bcase"), ignore_errors=True)
    shutil.rmtree(pristine, ignore_errors=True)


# ----------------------------------------------------------------------------- main
def main():
    global VERBOSE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simdex", default="target/debug/simdex")
    ap.add_argument("--it-bin", default=None, help="integration-test binary (compaction kill input)")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--budget-seconds", type=float, default=600)
    ap.add_argument("--only", choices=ORDER, action="append")
    ap.add_argument("--corpus", default=os.path.join(HERE, "..", "..", "fixtures", "corpus", "pages"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    VERBOSE = a.verbose
    sim = Simdex(a.simdex)
    if not os.access(sim.path, os.X_OK):
        sys.exit(f"fault-suite: {a.simdex}: not an executable")
    only = a.only or ORDER
    total_share = sum(SHARES[c] for c in only)
    work = tempfile.mkdtemp(prefix="simdex-faults-")
    titles = {"kill": "kill -9 loops (add, compact)", "damage": "damage per file type",
              "readers": "readers beside a writer", "diskfull": "disk full (8 MiB tmpfs)",
              "badinput": "bad input to every subcommand"}
    cats = []
    t_all = time.monotonic()
    try:
        for i, name in enumerate(only):
            cat = Category(name, titles[name])
            cats.append(cat)
            rng = random.Random(f"{a.seed}/{name}")
            random.seed(f"{a.seed}/{name}/names")
            budget = a.budget_seconds * SHARES[name] / total_share
            d = os.path.join(work, name)
            os.makedirs(d)
            t0 = time.monotonic()
            print(f"fault-suite: {name} (budget {budget:.0f} s) ...", file=sys.stderr, flush=True)
            try:
                if name == "kill":
                    cat_kill(sim, cat, rng, budget, d, a.it_bin)
                elif name == "damage":
                    cat_damage(sim, cat, rng, budget, d, os.path.abspath(a.corpus))
                elif name == "readers":
                    cat_readers(sim, cat, rng, budget, d)
                elif name == "diskfull":
                    cat_diskfull(sim, cat, rng, budget, d)
                elif name == "badinput":
                    cat_badinput(sim, cat, rng, budget, d, os.path.abspath(a.corpus))
            except Exception as e:  # a suite bug must not hide the other categories
                import traceback
                cat.fail("suite error", 0, repr(e), traceback.format_exc()[-600:])
            cat.seconds = time.monotonic() - t0
            if not a.keep:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(cats, a, sim, time.monotonic() - t_all)
    sys.exit(1 if any(c.failures for c in cats) else 0)


def report(cats, a, sim, seconds):
    ver = subprocess.run([sim.path, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"\nsimdex fault suite: `{ver}` ({a.simdex}), seed {a.seed}, budget {a.budget_seconds:.0f} s, "
          f"ran {seconds:.0f} s\n")
    print("| category | cases | failed cases | what the failures cost (failures of each kind, and what they add up to) | s |")
    print("|---|---:|---:|---|---:|")
    for c in cats:
        print(f"| {c.title} | {c.cases:,} | {len(c.failed_cases):,} | {c.cost()} | {c.seconds:.0f} |")
    print()
    for c in cats:
        extra = [f"{k}: {v:,}" for k, v in sorted(c.counters.items())]
        if c.notes or extra:
            print(f"- **{c.name}**: " + "; ".join(c.notes + extra))
    for c in cats:
        if not c.failures:
            continue
        print(f"\n### {c.name}: failures")
        seen = collections.Counter()
        for kind, qty, detail, repro in c.failures:
            seen[kind] += 1
            if seen[kind] > 3:
                continue
            print(f"- {kind}" + (f" ({qty:,})" if qty else "") + f": {detail}\n  repro: {repro}")
        for kind, n in seen.items():
            if n > 3:
                print(f"- ... and {n - 3} more '{kind}'")


if __name__ == "__main__":
    main()
