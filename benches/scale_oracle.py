#!/usr/bin/env python3
"""Brute-force oracle for benches/scale.sh: checks `simdex query` answers against the input.

    scale_oracle.py N QUERIES [LABEL=]ANSWERS...

N is the number of fingerprints scale.sh streamed (its seeded generator is repeated here, so
the stored set is known without reading the index); QUERIES holds one 16-hex-digit query per
line; each ANSWERS file is what `simdex query DIR --input QUERIES` printed (`query<TAB>match
<TAB>distance<TAB>id`, ids being the 1-based input positions `add` assigns), and LABEL names
it in the report (one line per file, "LABEL: ..."). Every stored
fingerprint within 3 bits of a query must be reported with its id and distance, and nothing
else. Independent of the index's code: four dictionaries keyed by the fingerprint's 16-bit
quarters (a fingerprint within 3 bits of a query agrees with it on at least one quarter,
the pigeonhole principle), each candidate checked by popcount. Exits 1 with the first
differences when any file differs. Memory: about 300 bytes per stored fingerprint, so scale.sh runs
it up to N = 2^24.
"""
import random
import struct
import sys

K = 3


def stored(n):
    """The fingerprints scale.sh's INPUT_CMD writes, in order (keep in step with it)."""
    r = random.Random(2026)
    while n > 0:
        k = min(n, 1 << 20)
        yield from struct.unpack("<%dQ" % k, r.randbytes(8 * k))
        n -= k


def compare(label, path, expected, n):
    """True when the answers in `path` are exactly `expected`; reports either way."""
    got = [line.rstrip("\n") for line in open(path) if line.strip()]
    got_set = set(got)
    missing = sorted(expected - got_set)
    extra = sorted(got_set - expected)
    repeated = len(got) - len(got_set)
    if missing or extra or repeated:
        print("scale_oracle: %s (%s) differs from brute force over %d fingerprints: %d missing, %d extra, %d repeated"
              % (label, path, n, len(missing), len(extra), repeated), file=sys.stderr)
        for line in missing[:5]:
            print("  missing: " + line, file=sys.stderr)
        for line in extra[:5]:
            print("  extra:   " + line, file=sys.stderr)
        print("%s: DIFFERS from brute force" % label)
        return False
    print("%s: %d matches, equal to brute force" % (label, len(expected)))
    return True


def main():
    n, queries_path, answers = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    quarters = [dict() for _ in range(4)]
    for position, fp in enumerate(stored(n), start=1):
        for i, table in enumerate(quarters):
            table.setdefault((fp >> (16 * i)) & 0xFFFF, []).append((fp, position))
    expected = set()
    queries = [int(line, 16) for line in open(queries_path) if line.strip()]
    for q in queries:
        for i, table in enumerate(quarters):
            for fp, position in table.get((q >> (16 * i)) & 0xFFFF, ()):
                d = (fp ^ q).bit_count()
                if d <= K:
                    expected.add("%016x\t%016x\t%d\t%d" % (q, fp, d, position))
    ok = True
    for arg in answers:
        label, _, path = arg.rpartition("=")
        ok = compare(label or path, path, expected, n) and ok
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
