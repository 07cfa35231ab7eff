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
  kill      `simdex insert DIR - --acks` fed through a pipe, killed (SIGKILL) at random instants,
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
            (`simdex insert vr big.txt --memtable-ops 20000 &` while `simdex verify vr` runs):
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

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import faults.common as common  # noqa: E402
from faults.common import *  # noqa: E402,F401,F403
from faults.kill import cat_kill  # noqa: E402
from faults.damage import cat_damage  # noqa: E402
from faults.readers import cat_readers  # noqa: E402
from faults.diskfull import cat_diskfull  # noqa: E402
from faults.badinput import cat_badinput  # noqa: E402


def main():
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
    common.VERBOSE = a.verbose
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
