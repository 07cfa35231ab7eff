"""Category diskfull: add, compact, recover and build into a tiny tmpfs."""

from faults.common import *  # noqa: F401,F403 (the shared helpers and modules)


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
            _full_check(sim, cat, a2, "add (its close merges)", mnt, f"tmpfs 8m; simdex insert M/cidx ({cut} pairs); simdex insert M/cidx (20000 pairs) --no-space-check")
            st = sim.run(["stats", idx, "--json"])
            try:
                pairs_in = [p for p in pairs]  # what the adds acknowledged (exit 0) is checked below
                nseg = len(json.loads(st.out)["segments"])
            except ValueError:
                nseg = 0
            before = snapshot(idx)
            q0, got0 = query_pairs(sim, idx, [a for a, _ in pairs_in], work)
            res = sim.run(["compact", idx], timeout=300)
            repro = f"tmpfs 8m; simdex insert M/cidx ({cut} pairs); simdex insert M/cidx (20000 pairs) --no-space-check; simdex compact M/cidx ({nseg} segments)"
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
