#!/usr/bin/env python3
"""The shape check fails where it must: a tiny workspace in a temporary folder, with an import
circle, then without, then with a file over the limit, a wide API in either library crate,
too many public items, the library's rules restated in Python, a function over 120 lines (run
by .ci/run before the check)."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(root, *args):
    return subprocess.run([sys.executable, os.path.join(root, "tools/scripts/check-shape.py"), *args], capture_output=True, text=True)


def write(root, name, text):
    with open(os.path.join(root, name), "w", encoding="utf-8") as f:
        f.write(text)


def main():
    root = tempfile.mkdtemp()
    try:
        os.makedirs(os.path.join(root, "tools/scripts"))
        os.makedirs(os.path.join(root, "src/c"))
        shutil.copy(os.path.join(HERE, "check-shape.py"), os.path.join(root, "tools/scripts"))
        write(root, "Cargo.toml", "[package]\n")
        write(root, "src/lib.rs", "mod a;\nmod b;\nmod c;\n")
        write(root, "src/a.rs", "use crate::b::B;\npub struct A(B);\n")
        write(root, "src/b.rs", "pub struct B;\nfn f(_: &super::a::A) {}\n")
        # a facade re-exporting its children is not a circle; a parent that uses a child
        # which uses it back is
        write(root, "src/c/mod.rs", "mod d;\npub use d::D;\n")
        write(root, "src/c/d.rs", "pub struct D;\n")
        r = run(root)
        assert r.returncode == 1 and "src/a.rs <-> src/b.rs" in r.stdout and "src/c" not in r.stdout, r.stdout
        write(root, "src/c/mod.rs", "mod d;\nuse d::D;\npub struct C(D);\n")
        write(root, "src/c/d.rs", "pub struct D;\nfn g(_: &super::C) {}\n")
        r = run(root)
        assert r.returncode == 1 and "src/c/mod.rs <-> src/c/d.rs" in r.stdout, r.stdout
        write(root, "src/b.rs", "pub struct B;\n")
        write(root, "src/c/d.rs", "pub struct D;\n")
        r = run(root)
        assert r.returncode == 0 and "ok" in r.stdout, r.stdout
        write(root, "src/b.rs", "pub struct B;\n" + "// x\n" * 700)
        r = run(root)
        assert r.returncode == 1 and "src/b.rs has 701 lines" in r.stdout, r.stdout
        write(root, "src/b.rs", "pub struct B;\n")
        # the narrow API: six public modules, options that are not non-exhaustive
        write(root, "src/lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod e;\npub mod f;\n")
        write(root, "src/a.rs", "/// How.\n#[derive(Debug)]\npub struct AOptions { pub x: u32 }\n")
        r = run(root)
        assert r.returncode == 1 and "6 public modules" in r.stdout and "AOptions is not #[non_exhaustive]" in r.stdout, r.stdout
        write(root, "src/lib.rs", "mod a;\nmod b;\nmod c;\n")
        write(root, "src/a.rs", "/// How.\n#[derive(Debug)]\n#[non_exhaustive]\npub struct AOptions { pub x: u32 }\n")
        # the text crate: six public modules, one of them declared through the index crate's
        # internal_mod! (private, so not counted, but a module whose circle is found)
        os.makedirs(os.path.join(root, "tools/fingerprint/src"))
        write(root, "tools/fingerprint/Cargo.toml", "[package]\n")
        write(root, "tools/fingerprint/src/lib.rs", "".join(f"pub mod m{i};\n" for i in range(6)) + "simdex::internal_mod!(x);\n")
        for i in range(6):
            write(root, f"tools/fingerprint/src/m{i}.rs", "pub struct M;\n")
        write(root, "tools/fingerprint/src/x.rs", "use crate::m0::M;\npub struct X(M);\n")
        write(root, "tools/fingerprint/src/m0.rs", "pub struct M;\nfn f(_: &super::x::X) {}\n")
        r = run(root)
        assert r.returncode == 1 and "tools/fingerprint/src/lib.rs: 6 public modules" in r.stdout and "m0.rs <-> tools/fingerprint/src/x.rs" in r.stdout, r.stdout
        write(root, "tools/fingerprint/src/lib.rs", "".join(f"pub mod m{i};\n" for i in range(5)) + "mod m5;\nsimdex::internal_mod!(x);\n")
        write(root, "tools/fingerprint/src/m0.rs", "pub struct M;\n")
        r = run(root)
        assert r.returncode == 0 and "ok" in r.stdout, r.stdout
        # the public items cargo doc lists: at most 110 for the index crate
        for crate, n in (("simdex", 111), ("simdex_fingerprint", 200)):
            os.makedirs(os.path.join(root, "target/doc", crate))
            write(root, f"target/doc/{crate}/all.html", "".join(f'<li><a href="fn.f{i}.html">f{i}</a></li>' for i in range(n)))
        r = run(root, "--doc-items")
        assert r.returncode == 1 and "simdex has 111 public items (at most 110)" in r.stdout and "simdex_fingerprint: 200 public items" in r.stdout, r.stdout
        write(root, "target/doc/simdex/all.html", "".join(f'<li><a href="fn.f{i}.html">f{i}</a></li>' for i in range(110)))
        r = run(root, "--doc-items")
        assert r.returncode == 0 and "simdex: 110 public items" in r.stdout, r.stdout
        shutil.rmtree(os.path.join(root, "target"))
        # the Python package: an import circle, a library constant declared again
        os.makedirs(os.path.join(root, "python/simdex"))
        write(root, "python/simdex/__init__.py", "from .client import Client\nMAX_K = 8\n")
        write(root, "python/simdex/client.py", "def f():\n    from . import helper\n")
        r = run(root)
        assert r.returncode == 1 and "simdex <-> simdex.client" in r.stdout and "MAX_K is declared again" in r.stdout, r.stdout
        write(root, "python/simdex/__init__.py", "from .client import Client\nfrom ._simdex import MAX_K\n")
        write(root, "python/simdex/client.py", "from ._types import helper\n")
        write(root, "python/simdex/_types.py", "helper = 1\n")
        r = run(root)
        assert r.returncode == 0 and "ok" in r.stdout, r.stdout
        # what the review found restated in Python (spark/ at 2fc2d41), each named by line
        os.makedirs(os.path.join(root, "python/simdex/spark"))
        write(
            root,
            "python/simdex/spark/_rules.py",
            '"""Docs may say k <= 8 and 0.9."""\n'
            "UNSKETCHED_K = 3\n"
            "def dedup(path, threshold: float = 0.9, *, k=3):\n"
            "    if not 0 <= k <= 8:\n"
            "        raise ValueError(k)\n"
            "    return k > 1  # a comment: k <= 8\n"
            "def run(parser, args):\n"
            "    parser.add_argument('-k', type=int, default=3)\n"
            "    parser.add_argument('--confirm-threshold', type=float, default=0.8)\n"
            "    return args.k <= MAX_K or args.min_similarity == 0.9\n",
        )
        r = run(root)
        want = [
            "_rules.py: line 2: `UNSKETCHED_K = 3`",
            "_rules.py: line 3: the literal 0.9",
            "_rules.py: line 3: `threshold=0.9`: a default",
            "_rules.py: line 3: `k=3`: a default",
            "_rules.py: line 4: `0 <= k <= 8`: a range of k",
            "_rules.py: line 6: `k > 1`: a range of k",
            "_rules.py: line 8: `-k` default=3",
            "_rules.py: line 9: `--confirm-threshold` default=0.8",
            "_rules.py: line 10: the literal 0.9",
        ]
        assert r.returncode == 1 and all(w in r.stdout for w in want), r.stdout
        assert r.stdout.count("_rules.py") == len(want) and "line 1:" not in r.stdout and "line 10: `args.k <= MAX_K" not in r.stdout, r.stdout
        write(
            root,
            "python/simdex/spark/_rules.py",
            "from .. import DocumentQuery\n"
            "def dedup(path, threshold=None, *, k=None, partitions=8, ratio=0.5):\n"
            "    query = DocumentQuery(k=k, min_similarity=threshold)\n"
            "    query.check()\n"
            "    return query.k, partitions > 2\n"
            "def run(parser):\n"
            "    parser.add_argument('-k', type=int, default=None)\n"
            "    parser.add_argument('--partitions', type=int, default=8)\n",
        )
        r = run(root)
        assert r.returncode == 0 and "ok" in r.stdout, r.stdout
        # a function over 120 lines in src/ (a bench harness's is not held to it)
        write(root, "src/b.rs", "pub struct B;\nfn long() {\n" + "    let _ = 1;\n" * 119 + "}\nfn fits() {\n" + "    let _ = 1;\n" * 118 + "}\n")
        os.makedirs(os.path.join(root, "benches/peers/src"))
        write(root, "benches/peers/Cargo.toml", "[package]\n")
        write(root, "benches/peers/src/main.rs", "fn main() {\n" + "    let _ = 1;\n" * 200 + "}\n")
        r = run(root)
        assert r.returncode == 1 and "src/b.rs:2: fn long has 121 lines (at most 120 in src/)" in r.stdout and "fits" not in r.stdout and "benches" not in r.stdout, r.stdout
        write(root, "src/b.rs", "pub struct B;\n")
        r = run(root)
        assert r.returncode == 0 and "ok" in r.stdout, r.stdout
        # the results page: too long, a link to a missing file
        os.makedirs(os.path.join(root, "benches/history"))
        write(root, "benches/history/a.md", "x\n")
        write(root, "benches/RESULTS.md", "[a](history/a.md#run) [b](history/b.md) [w](https://x.org/c.md)\n" + "| x |\n" * 400)
        r = run(root)
        assert r.returncode == 1 and "RESULTS.md has 401 lines" in r.stdout and "links to history/b.md" in r.stdout and "history/a.md" not in r.stdout and "x.org" not in r.stdout, r.stdout
        write(root, "benches/RESULTS.md", "[a](history/a.md#run)\n")
        r = run(root)
        assert r.returncode == 0 and "ok" in r.stdout, r.stdout
        # the docs: a long README, a link out of the repository, a cited file it does not hold
        write(root, "README.md", "[p](../shared/PAPER.md) [d](docs/DESIGN.md)\n" + "x\n" * 250)
        write(root, "src/a.rs", "//! As PAPER.md section 1 says.\n")
        r = run(root)
        assert r.returncode == 1 and "README.md has 251 lines" in r.stdout and "links to ../shared/PAPER.md, outside the repository" in r.stdout, r.stdout
        assert "links to docs/DESIGN.md, which does not exist" in r.stdout and "src/a.rs names PAPER.md, which the repository does not hold" in r.stdout, r.stdout
        os.makedirs(os.path.join(root, "docs"))
        write(root, "docs/DESIGN.md", "x\n")
        write(root, "README.md", "[d](docs/DESIGN.md#fingerprints) as `docs/DESIGN.md` says\n")
        write(root, "src/a.rs", "//! As docs/DESIGN.md section 1 says.\n")
        r = run(root)
        assert r.returncode == 0 and "ok" in r.stdout, r.stdout
    finally:
        shutil.rmtree(root)
    print(
        "check-shape self-test ok (19 cases: a circle, a parent-child circle, none, a long file, a wide API, a wide text crate with a circle through internal_mod!, "
        "a narrow one, too many public items, few enough, a Python circle and constant, a clean package, the library's rules restated in Python, none, "
        "a long function, none, a long results page with a dead link, a clean one, "
        "docs that leave the repository, clean docs)"
    )


if __name__ == "__main__":
    main()
