#!/usr/bin/env bash
# Issue 12 item 1 with the real CLI: read-only opens (`simdex stats --json`) racing a writer
# that flushes and compacts. strace delays every openat of the reader by DELAY_US, which
# widens the window between reading the manifest and opening the files it names.
#
#   tools/scripts/reader-race.sh [SIMDEX] [ADDS] [PER_ADD] [DELAY_US] [READER]
#
# READER is the reader's subcommand: `stats` (default) or `verify` (issue 23: verify must
# never call a healthy index damaged beside a writer; exit 3, inconclusive, is counted
# apart and is not a failure).
# Defaults are the issue's: target/debug/simdex, 120 adds of 200,000 fingerprints, 100 ms.
# Prints the number of reader runs and of failures (a healthy index: the target is 0), and
# the start of each failure's stderr.
set -u
SIMDEX=${1:-target/debug/simdex}
ADDS=${2:-120}
PER_ADD=${3:-200000}
DELAY_US=${4:-100000}
READER_CMD=${5:-stats}
SIMDEX=$(realpath "$SIMDEX")
command -v strace >/dev/null || { echo "strace is not installed" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'kill "$READER" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/failures"
# At most 20 distinct input files, cycled (each add's pairs still differ: ids are sequence numbers).
FILES=$((ADDS < 20 ? ADDS : 20))
for i in $(seq 1 "$FILES"); do
    "$SIMDEX" bench generate --count "$PER_ADD" --seed "$i" > "$WORK/b$i.txt"
done
"$SIMDEX" add "$WORK/idx" "$WORK/b1.txt" > /dev/null 2>&1
(
    runs=0 fails=0 inconclusive=0
    while [ ! -e "$WORK/stop" ]; do
        runs=$((runs + 1))
        strace -f -qq -o /dev/null -e trace=openat -e inject=openat:delay_enter="$DELAY_US" \
            "$SIMDEX" "$READER_CMD" "$WORK/idx" --json > "$WORK/out" 2> "$WORK/err"
        rc=$?
        if [ "$rc" = 3 ] && [ "$READER_CMD" = verify ]; then
            inconclusive=$((inconclusive + 1))
        elif [ "$rc" != 0 ]; then
            fails=$((fails + 1))
            cat "$WORK/err" "$WORK/out" > "$WORK/failures/$runs.txt"
        fi
        echo "$runs $fails $inconclusive" > "$WORK/count"
    done
) &
READER=$!
start=$(date +%s)
for i in $(seq 2 "$ADDS"); do
    "$SIMDEX" add "$WORK/idx" "$WORK/b$(( (i - 1) % FILES + 1 )).txt" > /dev/null 2> "$WORK/add.err" || echo "add $i failed" >&2
done
touch "$WORK/stop"
wait "$READER"
end=$(date +%s)
read -r runs fails inconclusive < "$WORK/count"
segments=$("$SIMDEX" stats "$WORK/idx" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["segments"]))' 2>/dev/null || echo "?")
echo "reader=$READER_CMD adds=$ADDS per_add=$PER_ADD delay_us=$DELAY_US seconds=$((end - start)) reader_runs=$runs failures=$fails inconclusive=$inconclusive segments_at_end=$segments"
for f in "$WORK"/failures/*.txt; do [ -e "$f" ] && { echo "--- $f"; head -c 400 "$f"; echo; }; done
[ "$fails" -eq 0 ]
