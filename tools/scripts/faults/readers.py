"""Category readers: verify and stats beside a running writer."""

from faults.common import *  # noqa: F401,F403 (the shared helpers and modules)


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
            cat.fail("the writer failed", 0, werr[:300], f"simdex insert vr big.txt --memtable-ops 20000")
        if quiet.rc != 0:
            cat.fail("index damaged after the writer finished", 0, quiet.out[-300:], "simdex verify vr")
        loop = "simdex insert vr big.txt --memtable-ops 20000 & while kill -0 $!; do simdex verify vr || echo FALSE; done"
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
