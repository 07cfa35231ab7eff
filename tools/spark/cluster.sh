#!/usr/bin/env bash
# simdex.spark on a real Spark standalone cluster: starts a master and two workers (one core,
# 1 GiB each) on 127.0.0.1 from the pyspark install (tools/spark/standalone.sh), submits
# `python -m simdex.spark dedup` with spark-submit and checks that its pairs equal `simdex
# dedup --pairs` on the same input, then `python -m simdex.spark cluster` on 200,000 planted
# fingerprints against `simdex cluster --pairs`, and stops the cluster (only the processes it
# started), also on failure.
#
# How the library reaches the executors: the wheel itself, copied to simdex.zip and shipped
# with `--archives simdex.zip#simdexlib` (every executor unpacks it in its work folder), put on
# the Python workers' path by `spark.executorEnv.PYTHONPATH=simdexlib`. The executors run a
# virtualenv of their own with pyarrow and pandas (mapInArrow needs them; the versions of
# requirements.txt) and no simdex (checked below), so the shipped wheel is the only way they
# can import it. The driver runs a virtualenv with pyspark and the wheel installed.
#
# usage: tools/spark/cluster.sh [INPUT [FORMAT]]   (default: fixtures/corpus/pages, auto)
# env: SIMDEX (the CLI, default $target/debug/simdex), WHEEL (default: the one wheel in
#      $target/python-wheels, as python/test.sh builds it), KEEP=1 keeps the work folder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
input="${1:-$root/fixtures/corpus/pages}"
format="${2:-auto}"
simdex="${SIMDEX:-$target/debug/simdex}"
shopt -s nullglob
wheels=("$target"/python-wheels/*.whl)
wheel="${WHEEL:-${wheels[0]:-}}"
if [ -z "$wheel" ] || [ ! -f "$wheel" ]; then
  echo "no wheel: run python/test.sh (it builds $target/python-wheels/*.whl) or set WHEEL" >&2
  exit 1
fi
if [ ! -x "$simdex" ]; then
  echo "no simdex CLI at $simdex: cargo build -p simdex-cli, or set SIMDEX" >&2
  exit 1
fi
venv="$target/spark-cluster-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import pyspark" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
executor_venv="$target/spark-executor-venv"
if [ ! -x "$executor_venv/bin/python" ] || ! "$executor_venv/bin/python" -c "import pyarrow, pandas" 2>/dev/null; then
  python3 -m venv "$executor_venv"
  grep -v '^pyspark' "$here/requirements.txt" | "$executor_venv/bin/pip" install --quiet --disable-pip-version-check -r /dev/stdin
fi
executor_python="$executor_venv/bin/python"
if "$executor_python" -c "import simdex" 2>/dev/null; then
  echo "warning: $executor_python imports simdex by itself: the shipped wheel is not what the executors use" >&2
fi
work="$(mktemp -d)"
# shellcheck source=tools/spark/standalone.sh
source "$here/standalone.sh"
cleanup() {
  stop_standalone
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
start_standalone "$work" 2 1 1g
master="$STANDALONE_MASTER"
echo "cluster: master $master, 2 workers (1 core, 1 GiB each); executors' python: $executor_python"
cp "$wheel" "$work/simdex.zip"
main="$("$venv/bin/python" -c 'import simdex.spark.__main__ as m; print(m.__file__)')"
start=$(date +%s%N)
"$venv/bin/spark-submit" --master "$master" \
  --conf spark.pyspark.python="$executor_python" --conf spark.pyspark.driver.python="$venv/bin/python" \
  --archives "$work/simdex.zip#simdexlib" --conf spark.executorEnv.PYTHONPATH=simdexlib \
  --conf spark.executor.cores=1 --conf spark.executor.memory=768m --conf spark.ui.showConsoleProgress=false \
  "$main" dedup "$input" --format "$format" --pairs "$work/spark.tsv" --clusters "$work/clusters.tsv" \
  2> "$work/submit.log" || { tail -40 "$work/submit.log" >&2; exit 1; }
end=$(date +%s%N)
grep -E "^(recipe|documents|representatives|pairs|clusters|done)" "$work/submit.log" || true
executors="$(cat "$work"/worker*.log | grep -c "Asked to launch executor" || true)"
"$simdex" dedup "$input" --format "$format" --pairs "$work/cli.tsv" > /dev/null
lines=$(wc -l < "$work/cli.tsv")
if [ "$lines" -lt 1 ]; then echo "simdex dedup found no pairs: not a meaningful comparison" >&2; exit 1; fi
if cmp -s <(sort "$work/cli.tsv") <(sort "$work/spark.tsv"); then
  printf 'cluster run: pairs equal simdex dedup --pairs (%s lines); spark-submit took %.1f s; executors launched: %s\n' "$lines" "$(( (end - start) / 1000000 ))e-3" "$executors"
else
  echo "cluster pairs differ from simdex dedup --pairs:" >&2
  diff <(sort "$work/cli.tsv") <(sort "$work/spark.tsv") | head -20 >&2
  exit 1
fi
"$simdex" bench generate -n 200000 --clusters 3000 --cluster-size 4 --flips 2 --with-ids > "$work/fps.txt"
"$simdex" build --out "$work/fps.sdx" "$work/fps.txt" 2> /dev/null
"$simdex" cluster "$work/fps.sdx" --pairs "$work/cli-fps.tsv" -o /dev/null 2> /dev/null
start=$(date +%s%N)
"$venv/bin/spark-submit" --master "$master" \
  --conf spark.pyspark.python="$executor_python" --conf spark.pyspark.driver.python="$venv/bin/python" \
  --archives "$work/simdex.zip#simdexlib" --conf spark.executorEnv.PYTHONPATH=simdexlib \
  --conf spark.executor.cores=1 --conf spark.executor.memory=768m --conf spark.ui.showConsoleProgress=false \
  "$main" cluster "$work/fps.txt" --pairs "$work/spark-fps.tsv" 2> "$work/submit-fps.log" || { tail -40 "$work/submit-fps.log" >&2; exit 1; }
end=$(date +%s%N)
if cmp -s "$work/cli-fps.tsv" "$work/spark-fps.tsv"; then
  printf 'cluster run: fingerprint pairs equal simdex cluster --pairs line for line (%s lines); spark-submit took %.1f s\n' "$(wc -l < "$work/cli-fps.tsv")" "$(( (end - start) / 1000000 ))e-3"
else
  echo "cluster fingerprint pairs differ from simdex cluster --pairs:" >&2
  diff "$work/cli-fps.tsv" "$work/spark-fps.tsv" | head -20 >&2
  exit 1
fi
