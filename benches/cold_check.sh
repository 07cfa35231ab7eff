#!/usr/bin/env bash
# Issue 39 goal 3: the crawler's check (k = 8 confirmed by sketch at 0.90) cold, with the page
# cache capped at a quarter of the index, for two builds side by side.
#
#   benches/cold_check.sh NAME=SIMDEX:INDEX_DIR NAME=SIMDEX:INDEX_DIR QUERIES [COUNT]
#
# Each INDEX_DIR is a `simdex bench index` directory (synthetic sketches), QUERIES a file of
# `bench generate --with-ids` lines (near copies are confirmed). For each build in turn, twice
# (the builds alternating): the caches are dropped, then one `simdex bench query DIR --verified
# -k 8 --no-warmup` process runs the first COUNT queries (default 400) in a cgroup v1 memory
# group capped at a quarter of that index's bytes (the page cache counts against the cap, as in
# benches/scale.sh), then a second process the next COUNT (the steady state: the cap full of
# what the first process read). Prints p50, p99 and the MiB read from the disk of each run.
# Needs root and cgroup v1 (memory.limit_in_bytes under /sys/fs/cgroup/memory).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
queries=${*: -1}
count=400
if [[ "${*: -1}" =~ ^[0-9]+$ ]]; then
    count=${*: -1}
    queries=${*: -2:1}
    set -- "${@:1:$#-2}"
else
    set -- "${@:1:$#-1}"
fi
[ "$(id -u)" = 0 ] || { echo "cold_check.sh: needs root (drop_caches, a memory cgroup)" >&2; exit 1; }
cgroot=/sys/fs/cgroup/memory
[ -f "$cgroot/memory.limit_in_bytes" ] || { echo "cold_check.sh: no cgroup v1 memory controller at $cgroot" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n "$count" "$queries" > "$work/first.txt"
sed -n "$((count + 1)),$((2 * count))p" "$queries" > "$work/second.txt"
disk=$(df -P "$(echo "$1" | cut -d: -f2)" | awk 'NR == 2 { print $1 }' | sed 's|^/dev/||')
read_mib() { awk -v d="$disk" 'BEGIN { v = 0 } $3 == d { v = int($6 * 512 / 1048576) } END { print v }' /proc/diskstats; }
echo "cold check: $count + $count queries from $queries; cgroup v1, cap a quarter of each index; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| build | round | index bytes | cap | first $count: p50 / p99 (MiB read) | next $count: p50 / p99 (MiB read) |"
echo "|---|---|---|---|---|---|"
for round in 1 2; do
    specs=("$@")
    if [ "$round" = 2 ]; then specs=($(printf '%s\n' "$@" | tac)); fi
    for spec in "${specs[@]}"; do
        name=${spec%%=*} rest=${spec#*=}
        simdex=${rest%%:*} dir=${rest#*:}
        bytes=$(du -sb "$dir" | cut -f1)
        cap=$((bytes / 4 > 64 << 20 ? bytes / 4 : 64 << 20))
        cg=$cgroot/simdex-cold-$$
        mkdir "$cg"
        echo "$cap" > "$cg/memory.limit_in_bytes"
        sync
        echo 3 > /proc/sys/vm/drop_caches
        run() {
            local before after
            before=$(read_mib)
            sh -c "echo \$\$ > $cg/cgroup.procs; exec $simdex bench query $dir --input $1 -k 8 --verified --no-warmup --json" |
                python3 -c 'import json, sys; r = json.load(sys.stdin); print("%.0f / %.0f us" % (r["p50_us"], r["p99_us"]), end="")'
            after=$(read_mib)
            echo " ($((after - before)))"
        }
        first=$(run "$work/first.txt")
        second=$(run "$work/second.txt")
        rmdir "$cg"
        echo "| $name | $round | $((bytes >> 20)) MiB | $((cap >> 20)) MiB | $first | $second |"
    done
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
