#!/usr/bin/env bash
# The crawler's loop at scale, end to end through the CLI (issue 14): N random fingerprints
# streamed into `simdex insert DIR --binary -`, a full compaction, the open cost, warm queries,
# cold queries with the page cache dropped and capped at a quarter of the index (at least
# 64 MiB; cgroup v1 or v2, root only), and a self-join (`simdex cluster DIR`). Prints one table; every figure is
# measured here, on this machine.
#
#   benches/scale.sh 22            # N = 2^22, the small version CI runs
#   benches/scale.sh 28 /work/big  # N = 2^28 in /work/big (about 20 GB free needed)
#
# Peak anonymous memory (RssAnon) is polled from /proc/PID/status every 50 ms, so a peak
# shorter than that can be missed. Needs python3 (to make the input); builds the CLI in
# release mode first (a no-op when it is up to date).
set -euo pipefail

power=${1:-22}
work=${2:-$(mktemp -d)}
n=$((1 << power))
here=$(cd "$(dirname "$0")/.." && pwd)
simdex="$here/target/release/simdex"
cargo build --quiet --release -p simdex-cli --manifest-path "$here/Cargo.toml" >&2
mkdir -p "$work"
dir="$work/idx"
rm -rf "$dir"
need=$((n * 70 / 1024 / 1024 + 100))
avail=$(df -Pm "$work" | awk 'NR == 2 { print $4 }')
if [ "$avail" -lt "$need" ]; then
    echo "scale.sh: $work has $avail MiB free; N = 2^$power needs about $need MiB" >&2
    exit 1
fi

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# Runs "$@" with stdin from $INPUT_CMD (if set), polling its RssAnon; sets PEAK_MIB and
# SECONDS_TAKEN.
measure() {
    local start pid peak=0 kb
    start=$(now)
    if [ -n "${INPUT_CMD:-}" ]; then
        "$@" < <(eval "$INPUT_CMD") > "$work/out.txt" &
    else
        "$@" > "$work/out.txt" &
    fi
    pid=$!
    while kill -0 "$pid" 2> /dev/null; do
        kb=$(awk '/^RssAnon:/ { print $2 }' "/proc/$pid/status" 2> /dev/null || echo 0)
        [ -n "$kb" ] && [ "$kb" -gt "$peak" ] && peak=$kb
        sleep 0.05
    done
    wait "$pid"
    SECONDS_TAKEN=$(secs "$start" "$(now)")
    PEAK_MIB=$((peak / 1024))
}

# N random fingerprints, written as a stream (the whole input never exists at once).
# Seeded, so that the queries below can be variants of stored fingerprints.
INPUT_CMD="python3 -c 'import random, sys
r = random.Random(2026)
n = $n
w = sys.stdout.buffer
while n > 0:
    k = min(n, 1 << 20)
    w.write(r.randbytes(8 * k))
    n -= k'"
measure "$simdex" add "$dir" --binary - --json
add_s=$SECONDS_TAKEN add_mib=$PEAK_MIB
INPUT_CMD=""
# The live set as `add` leaves it: the segment count and their sizes in millions, oldest first.
live_segments=$("$simdex" stats "$dir" --json | python3 -c 'import json, sys; s = [x["entries"] for x in json.load(sys.stdin)["segments"]]; print("%d (%s M)" % (len(s), " + ".join("%.2f" % (e / 1e6) for e in s)))')
# Queries: COUNT two-bit variants of stored fingerprints (from the input's first 1M) and
# COUNT random ones. q.txt (seed 7) for every measurement; q2.txt (seed 8, other queries)
# for cold queries once the block indexes are resident.
queries() {
python3 - "$1" "$n" "$2" "$3" << 'EOF'
import random, struct, sys
first = min(int(sys.argv[2]), 1 << 20)
stored = struct.unpack("<%dQ" % first, random.Random(2026).randbytes(8 * first))
r = random.Random(int(sys.argv[3]))
count = int(sys.argv[4])
out = []
for i in range(count):
    v = stored[r.randrange(first)] ^ (1 << r.randrange(64)) ^ (1 << r.randrange(64))
    out.append("%016x" % v)
for i in range(count):
    out.append("%016x" % r.getrandbits(64))
open(sys.argv[1], "w").write("\n".join(out) + "\n")
EOF
}
queries "$work/q.txt" 7 1000
queries "$work/q2.txt" 8 2500
head -2500 "$work/q2.txt" > "$work/q2-near.txt"
tail -2500 "$work/q2.txt" > "$work/q2-random.txt"
# Answers against brute force (benches/scale_oracle.py, up to N = 2^24: it holds the set
# in Python dictionaries): `check NAME [cgroup]` runs `simdex query` (in the cgroup when
# given) and keeps its answers; the oracle compares them all at the end.
oracle=$([ "$power" -le 24 ] && echo yes || echo no)
checks=()
check() {
    [ "$oracle" = yes ] || return 0
    local into="${2:+echo \$\$ > $2/cgroup.procs; }" out="$work/answers-${#checks[@]}.txt"
    sh -c "${into}exec $simdex query $dir --input $work/q.txt" > "$out"
    checks+=("$1=$out")
}
# Warm queries over the live set as `add` leaves it (several segments), then after a full
# compaction (one segment).
live_json=$("$simdex" bench query "$dir" --input "$work/q.txt" --json --rounds 2)
check "live set as insert left it"
live_warm=$(echo "$live_json" | python3 -c 'import json, sys; r = json.load(sys.stdin); print("p50 %.1f us, p99 %.1f us" % (r["p50_us"], r["p99_us"]))')
measure "$simdex" compact "$dir"
compact_s=$SECONDS_TAKEN compact_mib=$PEAK_MIB
stats=$("$simdex" stats "$dir" --json)
bytes=$(echo "$stats" | python3 -c 'import json, sys; print(json.load(sys.stdin)["segment_bytes"])')
segments=$(echo "$stats" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["segments"]))')

# Open cost: a read-only open and its stats, wall time and peak RSS.
open_ms=$(python3 -c '
import resource, subprocess, sys, time
t = time.perf_counter()
subprocess.run([sys.argv[1], "stats", sys.argv[2]], stdout=subprocess.DEVNULL, check=True)
print("%.0f ms, %.0f MiB RSS" % ((time.perf_counter() - t) * 1000, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
' "$simdex" "$dir")

warm_json=$("$simdex" bench query "$dir" --input "$work/q.txt" --json --rounds 2)
warm=$(echo "$warm_json" | python3 -c 'import json, sys; r = json.load(sys.stdin); print("p50 %.1f us, p99 %.1f us" % (r["p50_us"], r["p99_us"]))')
# Issues 13/14: the live set's p50 over the compacted segment's (targets 1.5x and 2x).
live_ratio=$(python3 -c 'import json, sys; print("%.2fx" % (json.loads(sys.argv[1])["p50_us"] / json.loads(sys.argv[2])["p50_us"]))' "$live_json" "$warm_json")

# Cold queries run in a child memory cgroup capped at a quarter of the index, but not below
# 64 MiB (the binary's own pages must fit): cgroup v1 (`memory.limit_in_bytes` under
# $SCALE_CGROUP_ROOT/memory) or v2 (`memory.max` under $SCALE_CGROUP_ROOT, the memory
# controller enabled for children). The page cache counts against either limit. Without
# root, or when no such group can be made, the benchmark says why and measures warm only.
# SCALE_CGROUP_ROOT (default /sys/fs/cgroup) exists to test those messages.
cap=$((bytes / 4 > 64 << 20 ? bytes / 4 : 64 << 20))
cgroot=${SCALE_CGROUP_ROOT:-/sys/fs/cgroup}
cg="" why=""
if [ "$(id -u)" != 0 ]; then
    why="needs root, for drop_caches and a memory cgroup"
elif [ -d "$cgroot/memory" ] && [ -f "$cgroot/memory/memory.limit_in_bytes" ]; then
    cg=$cgroot/memory/simdex-scale-$$
    if ! { mkdir "$cg" && echo $cap > "$cg/memory.limit_in_bytes"; } 2>/dev/null; then
        why="could not create the cgroup v1 group $cg with memory.limit_in_bytes = $cap"
        rmdir "$cg" 2>/dev/null || true
        cg=""
    fi
elif [ -f "$cgroot/cgroup.controllers" ] && grep -qw memory "$cgroot/cgroup.controllers"; then
    cg=$cgroot/simdex-scale-$$
    if ! { { grep -qw memory "$cgroot/cgroup.subtree_control" || echo +memory > "$cgroot/cgroup.subtree_control"; } && mkdir "$cg" && echo $cap > "$cg/memory.max"; } 2>/dev/null; then
        why="could not create the cgroup v2 group $cg with memory.max = $cap"
        rmdir "$cg" 2>/dev/null || true
        cg=""
    fi
else
    why="no memory cgroup at $cgroot (neither v1's memory/ nor v2 with the memory controller)"
fi
cold="not measured: $why; warm only"
if [ -n "$cg" ]; then
    sync
    echo 3 > /proc/sys/vm/drop_caches
    disk=$(df -P "$dir" | awk 'NR == 2 { print $1 }' | sed 's|^/dev/||')
    read_mib() { awk -v d="$disk" 'BEGIN { v = 0 } $3 == d { v = int($6 * 512 / 1048576) } END { print v }' /proc/diskstats; }
    # `cold_bench QUERIES`: one `bench query` process in the cgroup, no warm-up pass.
    cold_bench() {
        local before after
        before=$(read_mib)
        sh -c "echo \$\$ > $cg/cgroup.procs; exec $simdex bench query $dir --input $1 --json --no-warmup" | python3 -c 'import json, sys; r = json.load(sys.stdin); print("p50 %.0f us, p99 %.0f us, mean %.0f us" % (r["p50_us"], r["p99_us"], r["mean_us"]), end="")'
        after=$(read_mib)
        echo ", $((after - before)) MiB read"
    }
    # First the 2,000 queries right after the caches are dropped (they also wait for the
    # block indexes, read in the background from the open). Then the steady state a
    # long-running crawler sees: random queries until the cached pages fill the cap (a
    # query reads about one 4 KiB page per table; 1.2x the cap's pages over 10 tables, at
    # least 5,000 queries), and in new processes under the same cap 2,500 random queries
    # and 2,500 two bits from stored fingerprints (these also read the match's table-0
    # block and id page), none of them asked before.
    first=$(cold_bench "$work/q.txt")
    fill=$((cap / 4096 * 12 / 100 > 5000 ? cap / 4096 * 12 / 100 : 5000))
    python3 -c 'import random, sys; r = random.Random(9); sys.stdout.write("".join("%016x\n" % r.getrandbits(64) for _ in range(int(sys.argv[1]))))' "$fill" > "$work/fill.txt"
    filling=$(cold_bench "$work/fill.txt")
    cold="first 2,000: $first; $fill filling the cap: $filling; then 2,500 random: $(cold_bench "$work/q2-random.txt"); 2,500 near: $(cold_bench "$work/q2-near.txt"); cap $((cap / 1024 / 1024)) MiB"
    sync
    echo 3 > /proc/sys/vm/drop_caches
    check "cold, under the cap" "$cg"
    rmdir "$cg"
else
    echo "scale.sh: cold queries not measured: $why" >&2
    check "warm (no memory cap: $why)"
fi

measure "$simdex" cluster "$dir" --out /dev/null
cluster_s=$SECONDS_TAKEN cluster_mib=$PEAK_MIB

echo
echo "| N | add (s) | add peak RssAnon | segments after add | warm queries after add | live / compacted p50 | compact (s) | compact peak RssAnon | segments | bytes/fp | open | warm queries | cold queries | cluster (s) | cluster peak RssAnon |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
echo "| 2^$power | $add_s | $add_mib MiB | $live_segments | $live_warm | $live_ratio | $compact_s | $compact_mib MiB | $segments | $(awk -v b="$bytes" -v n="$n" 'BEGIN { printf "%.1f", b / n }') | $open_ms | $warm | $cold | $cluster_s | $cluster_mib MiB |"
if [ "$oracle" = yes ]; then
    python3 "$here/benches/scale_oracle.py" "$n" "$work/q.txt" "${checks[@]}"
else
    echo "answers not checked against brute force (N = 2^$power is above the oracle's 2^24)"
fi
[ -z "${2:-}" ] && rm -rf "$work"
exit 0
