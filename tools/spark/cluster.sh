#!/usr/bin/env bash
# simdex.spark on a real Spark standalone cluster: starts a master and two workers (one core,
# 1 GiB each) on 127.0.0.1 from the pyspark install (spark-class ...deploy.master.Master and
# ...deploy.worker.Worker), submits `python -m simdex.spark dedup` with spark-submit, checks
# that its pairs equal `simdex dedup --pairs` on the same input, and stops the cluster (only
# the processes it started), also on failure.
#
# How the library reaches the executors: the wheel itself, copied to simdex.zip and shipped
# with `--archives simdex.zip#simdexlib` (every executor unpacks it in its work folder), put on
# the Python workers' path by `spark.executorEnv.PYTHONPATH=simdexlib`. The executors run a
# plain python3 with no simdex installed (checked below), so the shipped wheel is the only way
# they can import it. The driver runs a virtualenv with pyspark and the wheel installed.
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
executor_python="$("$venv/bin/python" -c 'import sys; print(sys._base_executable)')"
if "$executor_python" -c "import simdex" 2>/dev/null; then
  echo "warning: $executor_python imports simdex by itself: the shipped wheel is not what the executors use" >&2
fi
spark_home="$("$venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
export SPARK_HOME="$spark_home" SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR="$work/logs"
free_port() { "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port="$(free_port)"
master="spark://127.0.0.1:$port"
"$spark_home/bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$port" --webui-port "$(free_port)" > "$work/master.log" 2>&1 &
pids+=($!)
for i in 1 2; do
  mkdir -p "$work/worker$i"
  "$spark_home/bin/spark-class" org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores 1 --memory 1g \
    --work-dir "$work/worker$i" --webui-port "$(free_port)" "$master" > "$work/worker$i.log" 2>&1 &
  pids+=($!)
done
registered() { grep -c "Registering worker" "$work/master.log" 2> /dev/null || echo 0; }
for _ in $(seq 120); do
  if [ "$(registered)" -ge 2 ]; then break; fi
  sleep 0.5
done
if [ "$(registered)" -lt 2 ]; then
  echo "the two workers did not register with $master:" >&2
  tail -20 "$work"/*.log >&2
  exit 1
fi
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
