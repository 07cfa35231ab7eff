"""Category badinput: bad input to every subcommand."""

from faults.common import *  # noqa: F401,F403 (the shared helpers and modules)


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
