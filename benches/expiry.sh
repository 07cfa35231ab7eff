#!/usr/bin/env bash
# Issue 36's expiry window, measured from the command line under libfaketime (apt-get install
# faketime): DAYS daily batches of N random fingerprints are added to an index with an 8-day
# window (1-day slices), one `simdex insert` per faked day, and the same batches to an index
# without a window; then, DAYS + EXTRA days after the first batch, `simdex compact` is timed on
# both (the window's compaction drops the expired slices' segments whole; the other merges
# everything), and `simdex bench query` compares the query cost of the segments each keeps.
# Prints a table. Usage: benches/expiry.sh [SIMDEX] [N] [DAYS] [EXTRA]
set -euo pipefail
simdex="${1:-target/release/simdex}"
n="${2:-200000}"
days="${3:-12}"
extra="${4:-2}"
work="$(mktemp -d "${TMPDIR:-/tmp}/simdex-expiry.XXXXXX")"
trap 'rm -rf "$work"' EXIT
at() { date -u -d "2027-01-01 12:00 UTC $1 days" '+@%Y-%m-%d %H:%M:%S'; }
faked() { local when="$1"; shift; faketime -f "$(at "$when")" "$simdex" "$@"; }
secs() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>&1; t1=$(date +%s.%N); printf '%.3f' "$(echo "$t1 - $t0" | bc)"; }

for d in $(seq 0 $((days - 1))); do
  "$simdex" bench generate --count "$n" --seed $((d + 1)) > "$work/day$d.txt"
  faked "$d" add "$work/window" "$work/day$d.txt" --expire-after 8d > /dev/null
  "$simdex" add "$work/plain" "$work/day$d.txt" > /dev/null
done
"$simdex" bench generate --count 100000 --seed 99 > "$work/queries.txt"
now=$((days - 1 + extra))
segments() { faked "$now" stats "$1" --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print(len(s["segments"]), s["segment_fingerprints"])'; }
echo "| index | before compact: segments, fingerprints | compact (s) | after: segments, fingerprints | queries/s, p50 us (k = 3, 100,000 random) |"
echo "|---|---|---|---|---|"
for idx in window plain; do
  before=$(segments "$work/$idx")
  t=$(secs faked "$now" compact "$work/$idx")
  after=$(segments "$work/$idx")
  qps=$(faked "$now" bench query "$work/$idx" --input "$work/queries.txt" -k 3 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["qps"]), round(d["p50_us"], 1))')
  echo "| $idx ($days days of $n, window 8d, at day $now) | $before | $t | $after | $qps |"
done
