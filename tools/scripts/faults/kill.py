"""Category kill: add and compact killed (SIGKILL) at random instants."""

from faults.common import *  # noqa: F401,F403 (the shared helpers and modules)


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
                # a finished compact leaves neither temporary files nor a merge's checkpoint
                left = tmp_files(idx) + [f for f in os.listdir(idx) if f.startswith("merge.")]
                if left:
                    cat.fail("leftover files after a finished compact", len(left), ", ".join(left[:5]), repro)
                break
    shutil.rmtree(idx, ignore_errors=True)
    shutil.rmtree(pristine, ignore_errors=True)
    cat.notes.append(f"compact: {rounds} rounds, {kills} kills, {finished} compactions finished")
    del livemap


# ----------------------------------------------------------------------------- 2. damage
