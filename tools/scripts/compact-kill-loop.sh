#!/usr/bin/env bash
# Issue 12 item 5: a full compaction killed (kill -9) every 1 to 3 seconds, run again after
# each kill, until it finishes or CYCLES kills have happened. Prints the live segment count
# after every cycle, the peak RssAnon of the compacting process, and checks at the end that
# the index verifies and still holds every fingerprint.
#
#   tools/scripts/compact-kill-loop.sh IT_BIN SIMDEX SEGMENTS PER_SEGMENT MAX_MERGE [CYCLES] [SEED]
#
# IT_BIN is the integration-test binary (target/debug/deps/it-*), whose ignored test
# `engine_compaction_kills::build_segments_for_the_kill_loop` builds SEGMENTS segments of
# PER_SEGMENT random fingerprints without compaction. MAX_MERGE is passed to
# `simdex compact --max-merge-entries` (0: unbounded, one merge).
set -u
IT_BIN=$(realpath "$1"); SIMDEX=$(realpath "$2"); SEGMENTS=$3; PER=$4; MAX_MERGE=$5
CYCLES=${6:-100}; RANDOM=${7:-1}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
SIMDEX_BUILD_DIR="$WORK/idx" SIMDEX_BUILD_SEGMENTS=$SEGMENTS SIMDEX_BUILD_PER_SEGMENT=$PER \
    "$IT_BIN" --exact engine_compaction_kills::build_segments_for_the_kill_loop --ignored -q > /dev/null 2>&1 || { echo "build failed" >&2; exit 2; }
segments() { "$SIMDEX" stats "$WORK/idx" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["segments"]), d["segment_fingerprints"])'; }
extra=(); [ "$MAX_MERGE" != 0 ] && extra=(--max-merge-entries "$MAX_MERGE")
echo "start: $(segments) (segments, fingerprints); max_merge=$MAX_MERGE"
peak=0 finished=0 counts=""
start=$(date +%s.%N)
for cycle in $(seq 1 "$CYCLES"); do
    "$SIMDEX" compact "$WORK/idx" "${extra[@]}" > /dev/null 2>&1 &
    pid=$!
    deadline_ms=$((1000 + RANDOM % 2001))
    waited=0
    while [ "$waited" -lt "$deadline_ms" ] && kill -0 "$pid" 2>/dev/null; do
        anon=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        [ -n "$anon" ] && [ "$anon" -gt "$peak" ] && peak=$anon
        sleep 0.05
        waited=$((waited + 50))
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -9 "$pid"; wait "$pid" 2>/dev/null
        outcome=killed
    else
        wait "$pid"; rc=$?
        outcome="exited $rc"
        [ "$rc" -eq 0 ] && finished=1
    fi
    read -r n fps < <(segments)
    counts="$counts $n"
    echo "cycle $cycle: $outcome after <= ${deadline_ms} ms; $n segments, $fps fingerprints"
    [ "$finished" -eq 1 ] && break
done
end=$(date +%s.%N)
"$SIMDEX" verify "$WORK/idx" > /dev/null 2>&1 && verified=clean || verified=DAMAGED
read -r n fps < <(segments)
echo "max_merge=$MAX_MERGE cycles=$cycle finished=$finished segment_counts=[$counts ] final_fingerprints=$fps expected=$((SEGMENTS * PER)) verify=$verified peak_rss_anon_kib=$peak seconds=$(echo "$end - $start" | bc)"
