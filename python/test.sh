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
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
tools="$target/python-venv"
if [ ! -x "$tools/bin/maturin" ] || ! "$tools/bin/python" -c 'import ziglang' 2>/dev/null; then
  [ -x "$tools/bin/python" ] || python3 -m venv "$tools"
  "$tools/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2" "ziglang>=0.13"
fi
wheels="$target/python-wheels"
rm -rf "$wheels"
PATH="$tools/bin:$PATH" CARGO_TARGET_DIR="$target/python" "$tools/bin/maturin" build --quiet --release --zig --compatibility manylinux2014 --manifest-path "$here/Cargo.toml" -o "$wheels"
shopt -s nullglob
built=("$wheels"/*.whl)
if [ "${#built[@]}" -ne 1 ] || [[ "${built[0]}" != *-cp39-abi3-manylinux2014_x86_64* ]]; then
  echo "expected one cp39-abi3 manylinux2014 wheel in $wheels, found: ${built[*]:-none}" >&2
  exit 1
fi
wheel="${built[0]}"
echo "wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes)"
venv="$target/python-test-venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$wheel" pytest numpy "scrapy>=2.13" -r "$root/tools/spark/requirements.txt"
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
# the oldest Scrapy the middleware supports (issue 20): the real crawls again, on 2.13
old="$target/python-scrapy213-venv"
rm -rf "$old"
python3 -m venv "$old"
"$old/bin/pip" install --quiet --disable-pip-version-check "$wheel" pytest "scrapy==2.13.*"
echo "the Scrapy tests on Scrapy $("$old/bin/python" -c 'import scrapy; print(scrapy.__version__)')"
SIMDEX_TEST_INSTALLED="$old" "$old/bin/python" -m pytest -q -p no:cacheprovider python/tests/test_scrapy.py
