#!/usr/bin/env bash
# Builds the Python package into a virtualenv under the cargo target directory (created the
# first time, with maturin, pytest, numpy and scrapy) and runs python/tests with pytest.
# The tests use the simdex CLI as their oracle: $SIMDEX, else target/debug/simdex (built if
# missing). pytest's "no tests collected" (exit 5) counts as a failure.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
venv="$target/python-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import maturin, pytest, numpy, scrapy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2" pytest numpy "scrapy>=2.13"
fi
# the extension builds in its own target folder (release profile, its own workspace); the
# maturin build backend runs the `maturin` executable found on PATH
export PATH="$venv/bin:$PATH"
CARGO_TARGET_DIR="$target/python" "$venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps "$here"
export SIMDEX="${SIMDEX:-$target/debug/simdex}"
if [ ! -x "$SIMDEX" ]; then
  cargo build --quiet -p simdex-cli --manifest-path "$root/Cargo.toml"
fi
cd "$root"
set +e
"$venv/bin/pytest" -q python/tests "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
