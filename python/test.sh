#!/usr/bin/env bash
# Builds the abi3 wheel with maturin (release), for manylinux2014 (glibc 2.17: maturin --zig
# links with zig, from the `ziglang` package), installs it into a NEW virtualenv (with pytest,
# numpy, scrapy and pyspark, pinned by tools/spark/requirements.txt, from the registry; the
# Spark tests need java) and runs python/tests with pytest against the installed package,
# never the source tree (SIMDEX_TEST_INSTALLED makes a test check where `simdex`
# was imported from), then the Scrapy tests again on Scrapy 2.13 (the oldest supported) in a
# second new virtualenv. maturin lives in a tool virtualenv under the cargo target directory,
# created the first time; the extension builds in $target/python (its own workspace).
# The tests use the simdex CLI as their oracle: $SIMDEX, else target/debug/simdex (built, or
# brought up to date, first). pytest's "no tests collected" (exit 5) counts as a failure.
# SIMDEX_PY_STEPS picks the half to run (default both): "build" (the wheel and every new
# virtualenv with what it installs, `pip install simdex[spark]` and its numpy check included)
# or "test" (the tests, against the virtualenvs "build" left; .ci/run builds while the Rust
# suite compiles).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
steps=" ${SIMDEX_PY_STEPS:-build test} "
tools="$target/python-venv"
wheels="$target/python-wheels"
venv="$target/python-test-venv"
fresh="$target/python-spark-extra-venv"
old="$target/python-scrapy213-venv"
if [[ "$steps" == *" build "* ]]; then
  if [ ! -x "$tools/bin/maturin" ] || ! "$tools/bin/python" -c 'import ziglang' 2>/dev/null; then
    [ -x "$tools/bin/python" ] || python3 -m venv "$tools"
    "$tools/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2" "ziglang>=0.13"
  fi
  rm -rf "$wheels"
  PATH="$tools/bin:$PATH" CARGO_TARGET_DIR="$target/python" "$tools/bin/maturin" build --quiet --release --zig --compatibility manylinux2014 --manifest-path "$here/Cargo.toml" -o "$wheels"
fi
shopt -s nullglob
built=("$wheels"/*.whl)
if [ "${#built[@]}" -ne 1 ] || [[ "${built[0]}" != *-cp39-abi3-manylinux2014_x86_64* ]]; then
  echo "expected one cp39-abi3 manylinux2014 wheel in $wheels, found: ${built[*]:-none}" >&2
  exit 1
fi
wheel="${built[0]}"
if [[ "$steps" == *" build "* ]]; then
  echo "wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$wheel" pytest numpy "scrapy>=2.13" -r "$root/tools/spark/requirements.txt"
  if [ "$#" -eq 0 ]; then
    # `pip install "simdex[spark]"` as a user does it: the built wheel with its extra, from
    # the registry, into a NEW virtualenv that already has numpy 2 (which must stay where it
    # was); "test" runs the README's two commands in it
    rm -rf "$fresh"
    python3 -m venv "$fresh"
    "$fresh/bin/pip" install --quiet --disable-pip-version-check "numpy>=2"
    numpy_before="$("$fresh/bin/python" -c 'import numpy; print(numpy.__version__)')"
    "$fresh/bin/pip" install --quiet --disable-pip-version-check "$wheel[spark]"
    numpy_after="$("$fresh/bin/python" -c 'import numpy; print(numpy.__version__)')"
    if [ "$numpy_before" != "$numpy_after" ]; then
      echo "pip install simdex[spark] moved numpy from $numpy_before to $numpy_after" >&2
      exit 1
    fi
    echo "pip install simdex[spark] into a new virtualenv with numpy $numpy_before: pyspark $("$fresh/bin/python" -c 'import pyspark; print(pyspark.__version__)'), pyarrow $("$fresh/bin/python" -c 'import pyarrow; print(pyarrow.__version__)'), numpy left where it was"
    # the oldest Scrapy the middleware supports (issue 20): "test" runs the real crawls again
    rm -rf "$old"
    python3 -m venv "$old"
    "$old/bin/pip" install --quiet --disable-pip-version-check "$wheel" pytest "scrapy==2.13.*"
  fi
fi
if [[ "$steps" != *" test "* ]]; then
  exit 0
fi
if [ -z "${SIMDEX:-}" ]; then
  # always (cheap when up to date): a stale binary would be an oracle of other code
  cargo build --quiet -p simdex-cli --manifest-path "$root/Cargo.toml"
fi
export SIMDEX="${SIMDEX:-$target/debug/simdex}"
# from the repository root, where no `simdex` package is importable (it is python/simdex)
cd "$root"
set +e
SIMDEX_TEST_INSTALLED="$venv" "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
if [ "$rc" -ne 0 ] || [ "$#" -ne 0 ]; then
  exit "$rc"
fi
# both commands of the README, in the virtualenv of `pip install simdex[spark]`, on the bundled
# corpus and planted fingerprints, their answers checked against the CLI's
readme="$(mktemp -d)"
trap 'rm -rf "$readme"' EXIT
"$fresh/bin/python" - "$root/fixtures/corpus/pages" "$readme/corpus.jsonl" << 'PY'
import json, pathlib, sys
with open(sys.argv[2], "w", encoding="utf-8") as out:
    for p in sorted(pathlib.Path(sys.argv[1]).iterdir()):
        out.write(json.dumps({"id": p.name, "html" if p.suffix == ".html" else "text": p.read_text(encoding="utf-8", errors="replace")}) + "\n")
PY
"$SIMDEX" bench generate -n 20000 --clusters 300 --cluster-size 4 --flips 2 --with-ids > "$readme/fingerprints.txt"
(
  cd "$readme"
  env -u PYSPARK_PYTHON "$fresh/bin/python" -m simdex.spark dedup corpus.jsonl --format jsonl --pairs pairs.tsv --clusters clusters.tsv --kept kept.jsonl --master 'local[*]' 2> dedup.log || { cat dedup.log >&2; exit 1; }
  env -u PYSPARK_PYTHON "$fresh/bin/python" -m simdex.spark cluster fingerprints.txt --pairs fp-pairs.tsv --clusters fp-clusters.tsv --master 'local[*]' 2> cluster.log || { cat cluster.log >&2; exit 1; }
  "$SIMDEX" dedup corpus.jsonl --format jsonl --pairs cli.tsv > /dev/null
  cmp -s <(sort pairs.tsv) <(sort cli.tsv) || { echo "the README's dedup: pairs differ from simdex dedup's" >&2; exit 1; }
  "$SIMDEX" build --out fps.sdx fingerprints.txt 2> /dev/null
  "$SIMDEX" cluster fps.sdx --pairs cli-fp.tsv -o /dev/null 2> /dev/null
  cmp -s fp-pairs.tsv cli-fp.tsv || { echo "the README's cluster: pairs differ from simdex cluster's" >&2; exit 1; }
  echo "the README's two commands after pip install simdex[spark]: $(wc -l < pairs.tsv) and $(wc -l < fp-pairs.tsv) pairs, equal to the CLI's"
)
echo "the Scrapy tests on Scrapy $("$old/bin/python" -c 'import scrapy; print(scrapy.__version__)')"
SIMDEX_TEST_INSTALLED="$old" "$old/bin/python" -m pytest -q -p no:cacheprovider python/tests/test_scrapy.py
