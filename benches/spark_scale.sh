#!/usr/bin/env bash
# Issue 38, item 7: `python -m simdex.spark cluster` against `simdex cluster` on the same
# planted fingerprints (2^P / 64 centres with 4 near copies each, 2 bits flipped, the rest
# random; with ids; k = 3, both commands' default), for each power P given: one machine
# (`simdex cluster SEG --pairs --out`, the segment built beforehand and not timed), Spark
# local[1], local[2], and a standalone cluster of two workers of one core each
# (tools/spark/standalone.sh, on this machine), each writing pairs and clusters. Wall time of
# the whole command (the JVM's start included); the runs of one round alternate, ROUNDS rounds;
# the load average (1 min) before each run is printed beside it. The pairs must equal the
# CLI's line for line and the cluster members the CLI's clusters, or the script fails.
#
#   benches/spark_scale.sh 22 24 26
#
# env: SIMDEX (default target/release/simdex), venv (a virtualenv with pyspark and the simdex
# wheel, default target/spark-venv), WORK (scratch folder, default a new temporary one; 2^26
# needs about 10 GB), ROUNDS (default 1), MODES (default "cli local2 local1 cluster").
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
simdex="${SIMDEX:-$target/release/simdex}"
venv="${venv:-$target/spark-venv}"
py="$venv/bin/python"
work="${WORK:-$(mktemp -d)}"
rounds="${ROUNDS:-1}"
modes="${MODES:-cli local2 local1 cluster}"
# shellcheck source=tools/spark/standalone.sh
source "$root/tools/spark/standalone.sh"
cleanup() {
  stop_standalone
  [ -n "${WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
export SPARK_LOCAL_DIRS="$work/spark-local" PYSPARK_PYTHON="$py"
mkdir -p "$SPARK_LOCAL_DIRS"
if [[ " $modes " == *" cluster "* ]]; then
  start_standalone "$work/standalone" 2 1 6g
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(free -g | awk '/Mem:/ {print $2}') GiB" >&2

# seconds of one run of "$@" (stderr to $log)
timed() {
  local s e
  s=$(date +%s%N)
  "$@" 2> "$log" > /dev/null || { tail -30 "$log" >&2; return 1; }
  e=$(date +%s%N)
  python3 -c "print(f'{($e - $s) / 1e9:.1f}')"
}

# the CLI's clusters as `fp<TAB>id<TAB>cluster` lines sorted as simdex.spark writes them
cli_members() {
  python3 - "$1" << 'EOF'
import json, sys
rows = []
for line in open(sys.argv[1]):
    members = json.loads(line)["members"]
    c = min(m["fingerprint"] for m in members)
    rows += [(c, m["fingerprint"], str(m["doc_id"])) for m in members]
rows.sort()
sys.stdout.write("".join(f"{f}\t{i}\t{c}\n" for c, f, i in rows))
EOF
}

# Spark's event log of every run goes to $work/events (its stages' task times: the per-row
# costs of a projection)
mkdir -p "$work/events"
spark() {
  local master="$1" out="$2"
  shift 2
  "$py" -m simdex.spark cluster "$work/fps.txt" --pairs "$out.tsv" --clusters "$out.clusters" --master "$master" \
    --conf spark.eventLog.enabled=true --conf spark.eventLog.compress=false --conf spark.eventLog.dir="file://$work/events" "$@"
}

# task seconds (run time, and the JVM's CPU time) per stage of the newest event log (Spark 4
# writes a folder of events_N_APP files, Spark 3 one file)
stage_times() {
  python3 - "$(ls -td "$work"/events/* | head -1)" << 'EOF'
import json, os, re, sys
log = sys.argv[1]
if os.path.isdir(log):
    files = sorted((f for f in os.listdir(log) if re.fullmatch(r"events_\d+_.*", f) and not f.endswith(".crc")), key=lambda f: int(f.split("_")[1]))
    lines = [line for f in files for line in open(os.path.join(log, f))]
else:
    lines = open(log)
stages = {}
for line in lines:
    e = json.loads(line)
    if e.get("Event") == "SparkListenerTaskEnd":
        m = e.get("Task Metrics") or {}
        s = stages.setdefault(e["Stage ID"], [0, 0.0, 0.0])
        s[0] += 1
        s[1] += m.get("Executor Run Time", 0) / 1e3
        s[2] += m.get("Executor CPU Time", 0) / 1e9
print("; ".join(f"stage {k}: {n} tasks, {run:.1f} task-s ({cpu:.1f} JVM CPU-s)" for k, (n, run, cpu) in sorted(stages.items())))
EOF
}

printf '| fingerprints | round | one machine (s) | local[1] (s) | local[2] (s) | cluster of 2 (s) | local[2] / one machine | local[2] speed-up over local[1] | cluster / local[2] | pairs |\n|---|---|---|---|---|---|---|---|---|---|\n'
for p in "$@"; do
  n=$((1 << p))
  "$simdex" bench generate -n "$n" --clusters $((n / 64)) --cluster-size 4 --flips 2 --with-ids > "$work/fps.txt"
  "$simdex" build --out "$work/seg.sdx" "$work/fps.txt" 2> /dev/null
  for round in $(seq "$rounds"); do
    declare -A took=()
    for mode in $modes; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      log="$work/$mode.log"
      case "$mode" in
        cli) took[$mode]=$(timed "$simdex" cluster "$work/seg.sdx" -k 3 --pairs "$work/cli.tsv" -o "$work/cli.jsonl") ;;
        local1) took[$mode]=$(timed spark 'local[1]' "$work/$mode" --conf spark.driver.memory=8g) ;;
        local2) took[$mode]=$(timed spark 'local[2]' "$work/$mode" --conf spark.driver.memory=8g) ;;
        cluster) took[$mode]=$(timed spark "$STANDALONE_MASTER" "$work/$mode" --conf spark.driver.memory=4g --conf spark.executor.memory=4g --conf spark.executor.cores=1) ;;
      esac
      echo "2^$p round $round $mode: ${took[$mode]} s (load before: $load)$( [ "$mode" = cli ] || grep -h '^steps' "$log" | sed 's/^/; /')" >&2
      [ "$mode" = cli ] || echo "  $(stage_times)" >&2
    done
    if [ "$round" = 1 ]; then
      cli_members "$work/cli.jsonl" > "$work/cli.clusters"
    fi
    for mode in $modes; do
      [ "$mode" = cli ] && continue
      cmp -s "$work/cli.tsv" "$work/$mode.tsv" || { echo "2^$p $mode: pairs differ from simdex cluster --pairs" >&2; exit 1; }
      cmp -s "$work/cli.clusters" "$work/$mode.clusters" || { echo "2^$p $mode: cluster members differ from simdex cluster's" >&2; exit 1; }
    done
    ratio() { [ -n "${took[$1]:-}" ] && [ -n "${took[$2]:-}" ] && python3 -c "print(f'{${took[$1]} / ${took[$2]}:.2f}x')" || echo -; }
    printf '| 2^%s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$p" "$round" "${took[cli]:--}" "${took[local1]:--}" "${took[local2]:--}" "${took[cluster]:--}" \
      "$(ratio local2 cli)" "$(ratio local1 local2)" "$(ratio cluster local2)" "$(wc -l < "$work/cli.tsv")"
    unset took
  done
  rm -f "$work"/fps.txt "$work"/seg.sdx "$work"/*.tsv "$work"/*.clusters "$work"/cli.jsonl
done
