#!/usr/bin/env python3
"""A held-out corpus: a tree of symlinks to the HTML pages whose sampling group is NOT in a
tuning sample, for `../shared/eval/extract.py --root` (so no page of a group used to tune
is scored again, nor a copy of it under another root).

usage: python3 benches/heldout_tree.py --exclude TUNING/manifest.tsv --out TREE \
           [--group-sub REGEX] LABEL=DIR [LABEL=DIR ...]

The group key is extract.py's: the page's path relative to its root, REGEX deleted (the rust
preset's is '^(std|core|alloc)/'). Then: extract.py --root LABEL=TREE/LABEL ... --group-sub
REGEX --out DATA, groundtruth.py --data DATA, and benches/dedup_bands.py --data DATA.
"""

import argparse
import os
import re


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exclude", required=True, help="manifest.tsv of the tuning sample (id<TAB>path, id = LABEL/relative path)")
    ap.add_argument("--out", required=True, help="folder for the tree of symlinks (must not exist)")
    ap.add_argument("--group-sub", default=r"^(std|core|alloc)/", help="regex deleted from a relative path to form its group")
    ap.add_argument("roots", nargs="+", metavar="LABEL=DIR")
    a = ap.parse_args()
    key = lambda rel: re.sub(a.group_sub, "", rel) if a.group_sub else rel
    with open(a.exclude, encoding="utf-8") as f:
        tuning = {key(line.split("\t")[0].split("/", 1)[1]) for line in f}
    os.makedirs(a.out)
    linked = left_out = 0
    for label, root in (r.split("=", 1) for r in a.roots):
        for dirpath, _, files in os.walk(root):
            for name in files:
                if not name.endswith((".html", ".htm")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                if key(rel) in tuning:
                    left_out += 1
                    continue
                link = os.path.join(a.out, label, rel)
                os.makedirs(os.path.dirname(link), exist_ok=True)
                os.symlink(os.path.realpath(os.path.join(dirpath, name)), link)
                linked += 1
    print(f"{len(tuning)} tuning groups; {linked} pages linked, {left_out} left out (in a tuning group)")


if __name__ == "__main__":
    main()
