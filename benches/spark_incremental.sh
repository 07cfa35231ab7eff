#!/usr/bin/env bash
# Issue 38, item 6 (issue 48, item 4): a new batch of fingerprints against an existing index,
# on Spark (`python -m simdex.spark cluster NEW --against DIR --pairs`, local[2]): the batch's
# pairs among itself and with the stored fingerprints. For each stored size 2^S given (an
# index made by `simdex insert`, k = 3; not timed; kept in WORK and reused when KEEP=1) and
# each batch size 2^B of BATCHES (default 18 20; half near copies of stored fingerprints, 2
# bits flipped, half random), the wall time, the CPU time (user + sys of the process tree as
# reaped) and the load average before it, for each virtualenv of VENVS in turn (alternating
# builds in one run): the time should follow the batch, not the index.
#
#   benches/spark_incremental.sh 22 26
#   KEEP=1 WORK=/big/scratch VENVS="venv-main venv-new" benches/spark_incremental.sh 26 22
#
# env: SIMDEX (default target/release/simdex), venv (default target/spark-venv), VENVS
# (default $venv), WORK (scratch, default a new temporary folder; 2^26 needs about 8 GB),
# BATCHES, KEEP.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
simdex="${SIMDEX:-$target/release/simdex}"
venv="${venv:-$target/spark-venv}"
work="${WORK:-$(mktemp -d)}"
batches="${BATCHES:-18 20}"
trap '[ -n "${WORK:-}" ] || rm -rf "$work"' EXIT
export SPARK_LOCAL_DIRS="$work/spark-local"
mkdir -p "$SPARK_LOCAL_DIRS"
venvs="${VENVS:-$venv}"
# CPU of the whole process tree: perf stat counts every descendant (the JVM and its Python
# workers are not all reaped by the driver, so /usr/bin/time misses most of them)
if perf stat -x, -e task-clock -o /dev/null true 2> /dev/null; then
  cpu="perf stat -x, -e task-clock -o $work/cpu"
  cpu_seconds() { awk -F, '/task-clock/ {printf "%.1f", $1 / 1000}' "$work/cpu"; }
else
  cpu="/usr/bin/time -f %U,%S -o $work/cpu"
  cpu_seconds() { awk -F, '{printf "%.1f (reaped only)", $1 + $2}' "$work/cpu"; }
fi
printf '| stored | new batch | venv | seconds | CPU-s | pairs | load before |\n|---|---|---|---|---|---|---|\n'
for s in "$@"; do
  n=$((1 << s))
  idx="$work/idx$s"
  if [ "${KEEP:-}" != 1 ] || [ ! -d "$idx" ]; then
    rm -rf "$idx"
    "$simdex" bench generate -n "$n" --clusters $((n / 64)) --cluster-size 4 --flips 2 --with-ids > "$work/stored$s.txt"
    "$simdex" insert "$idx" "$work/stored$s.txt" > /dev/null 2>&1
    "$simdex" compact "$idx" > /dev/null 2>&1 || true
  fi
  for b in $batches; do
    m=$((1 << b))
    near="$work/near$s-$b.txt"
    if [ "${KEEP:-}" != 1 ] || [ ! -s "$near" ]; then
      "$simdex" bench generate -n $((m / 2)) --near "$work/stored$s.txt" --flips 2 --seed "$b" > "$near"
      "$simdex" bench generate -n $((m / 2)) --seed $((b + 100)) >> "$near"
    fi
    for v in $venvs; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      start=$(date +%s%N)
      PYSPARK_PYTHON="$v/bin/python" $cpu "$v/bin/python" -m simdex.spark cluster "$near" --against "$idx" --pairs "$work/pairs.tsv" --master 'local[2]' \
        --conf spark.driver.memory=6g 2> "$work/run.log" > /dev/null || { tail -30 "$work/run.log" >&2; exit 1; }
      end=$(date +%s%N)
      grep -h '^steps' "$work/run.log" | sed "s|^|2^$s stored, 2^$b new, $v: |" >&2
      printf '| 2^%s | 2^%s | %s | %s | %s | %s | %s |\n' "$s" "$b" "$(basename "$v")" "$(python3 -c "print(f'{($end - $start) / 1e9:.1f}')")" \
        "$(cpu_seconds)" "$(wc -l < "$work/pairs.tsv")" "$load"
    done
  done
done
[ "${KEEP:-}" = 1 ] || rm -rf "$work"/idx* "$work"/*.txt
rm -f "$work/pairs.tsv"
