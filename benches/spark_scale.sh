#!/usr/bin/env bash
# Issue 22, item 5: `simdex cluster` of 2^P fingerprints on one machine against the Spark
# pipeline's pair and cluster steps (benches/spark_fingerprints.py) on the same fingerprints in
# local[2], for each power P given. Planted clusters: 2^P / 64 centres with 4 near copies
# each (2 bits flipped), the rest random; k = 3 (both commands' default).
#
#   benches/spark_scale.sh 18 20 22
#
# env: SIMDEX (default target/debug/simdex), PY (a python with pyspark and the simdex wheel,
# default target/spark-venv/bin/python), WORK (scratch folder, default a new temporary one;
# Spark's shuffle files go to WORK/spark-local: tens of GB at 2^26). Spark gets one shuffle
# partition per 2^19 fingerprints (at least 8). The load average before and after each size
# and the Spark job's step times go to stderr.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
simdex="${SIMDEX:-$target/debug/simdex}"
py="${PY:-$target/spark-venv/bin/python}"
work="${WORK:-$(mktemp -d)}"
trap '[ -n "${WORK:-}" ] || rm -rf "$work"' EXIT
export SPARK_LOCAL_DIRS="$work/spark-local"
mkdir -p "$SPARK_LOCAL_DIRS"
printf '| fingerprints | simdex cluster (s) | Spark local[2] (s) | ratio | pairs | clusters (CLI / Spark) |\n|---|---|---|---|---|---|\n'
for p in "$@"; do
  n=$((1 << p))
  parts=$((n >> 19 > 8 ? n >> 19 : 8))
  echo "2^$p: load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  "$simdex" bench generate -n "$n" --clusters $((n / 64)) --cluster-size 4 --flips 2 --with-ids > "$work/fps.txt"
  "$simdex" build --out "$work/seg.sdx" "$work/fps.txt" 2> /dev/null
  s=$(date +%s%N)
  "$simdex" cluster "$work/seg.sdx" -k 3 -o "$work/clusters.jsonl" 2> /dev/null
  e=$(date +%s%N)
  cli_s=$(python3 -c "print(f'{($e - $s) / 1e9:.2f}')")
  cli_clusters=$(wc -l < "$work/clusters.jsonl")
  out=$("$py" "$root/benches/spark_fingerprints.py" "$work/fps.txt" -k 3 --master 'local[2]' --partitions "$parts" 2> "$work/spark.log")
  echo "2^$p: $out" >&2
  echo "2^$p: load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  spark_s=$(sed -E 's/.*seconds: ([0-9.]+).*/\1/' <<< "$out")
  pairs=$(sed -E 's/.*pairs within 3: ([0-9]+).*/\1/' <<< "$out")
  spark_clusters=$(sed -E 's/.*clusters: ([0-9]+).*/\1/' <<< "$out")
  ratio=$(python3 -c "print(f'{$spark_s / $cli_s:.1f}x')")
  printf '| 2^%s | %s | %s | %s | %s | %s / %s |\n' "$p" "$cli_s" "$spark_s" "$ratio" "$pairs" "$cli_clusters" "$spark_clusters"
  rm -f "$work/fps.txt" "$work/seg.sdx" "$work/clusters.jsonl"
done
