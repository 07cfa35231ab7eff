#!/usr/bin/env bash
# Issue 38, item 6: a new batch of fingerprints against an existing index, on Spark
# (`python -m simdex.spark cluster NEW --against DIR --pairs`, local[2]): the batch's pairs
# among itself and with the stored fingerprints. For each stored size 2^S given (an index
# made by `simdex insert`, k = 3; not timed) and each batch size 2^B of BATCHES (default 18 20;
# half near copies of stored fingerprints, 2 bits flipped, half random), the wall time and
# the load average before it: the time should follow the batch, not the index.
#
#   benches/spark_incremental.sh 22 26
#
# env: SIMDEX (default target/release/simdex), venv (default target/spark-venv), WORK
# (scratch, default a new temporary folder; 2^26 needs about 8 GB), BATCHES.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
simdex="${SIMDEX:-$target/release/simdex}"
venv="${venv:-$target/spark-venv}"
work="${WORK:-$(mktemp -d)}"
batches="${BATCHES:-18 20}"
trap '[ -n "${WORK:-}" ] || rm -rf "$work"' EXIT
export SPARK_LOCAL_DIRS="$work/spark-local" PYSPARK_PYTHON="$venv/bin/python"
mkdir -p "$SPARK_LOCAL_DIRS"
printf '| stored | new batch | seconds | pairs | load before |\n|---|---|---|---|---|\n'
for s in "$@"; do
  n=$((1 << s))
  rm -rf "$work/idx"
  "$simdex" bench generate -n "$n" --clusters $((n / 64)) --cluster-size 4 --flips 2 --with-ids > "$work/stored.txt"
  "$simdex" insert "$work/idx" "$work/stored.txt" > /dev/null 2>&1
  "$simdex" compact "$work/idx" > /dev/null 2>&1 || true
  for b in $batches; do
    m=$((1 << b))
    "$simdex" bench generate -n $((m / 2)) --near "$work/stored.txt" --flips 2 --seed "$b" > "$work/near.txt"
    "$simdex" bench generate -n $((m / 2)) --seed $((b + 100)) >> "$work/near.txt"
    load=$(cut -d' ' -f1 /proc/loadavg)
    start=$(date +%s%N)
    "$venv/bin/python" -m simdex.spark cluster "$work/near.txt" --against "$work/idx" --pairs "$work/pairs.tsv" --master 'local[2]' \
      --conf spark.driver.memory=6g 2> "$work/run.log" > /dev/null || { tail -30 "$work/run.log" >&2; exit 1; }
    end=$(date +%s%N)
    grep -h '^steps' "$work/run.log" | sed "s/^/2^$s stored, 2^$b new: /" >&2
    printf '| 2^%s | 2^%s | %s | %s | %s |\n' "$s" "$b" "$(python3 -c "print(f'{($end - $start) / 1e9:.1f}')")" "$(wc -l < "$work/pairs.tsv")" "$load"
  done
done
rm -rf "$work/idx" "$work"/*.txt "$work/pairs.tsv"
