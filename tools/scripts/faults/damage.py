"""Category damage: every damage kind per file type, checked through verify, query, recover and a writer."""

from faults.common import *  # noqa: F401,F403 (the shared helpers and modules)


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
                cat.counters["document ids lost (kept under id 2^64-1, one line per id page, merges counted)"] += len(idless)
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
                         repro + "; simdex insert C NEW.txt" + (" --log-recovery point-in-time" if len(args) > 3 else ""))
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
