#!/usr/bin/env bash
# instructions.sh SIMDEX_BINARY [WORKDIR]
#
# Counts the instructions (callgrind's Ir) of simdex's query path and decode loop, so that
# two binaries (before / after a restructuring) can be compared on identical inputs.
#
#   (a) query:  simdex query SEG --binary --input queries.bin -k 3 > /dev/null
#               10,000 queries at k = 3 (5,000 random, 2,500 near copies of stored
#               fingerprints with 2 bits flipped, 2,500 with 3 flipped).
#               `simdex query` is used, not `simdex bench query`: the bench times every
#               query and sorts the latencies, whose order (and so sort_unstable's
#               instruction count) changes from run to run.
#   (b) decode: simdex dump SEG > /dev/null
#               decodes every block of table 0 (all N entries, in fingerprint order) and
#               prints each entry as hex; then `dump --table T` for every table T (all
#               blocks of the segment; ALL_TABLES=0 skips these runs). Formatting the hex
#               lines costs most of a dump's instructions, so the inclusive Ir of
#               TableEntries::next (the decode loop, per entry) is reported as well.
#   start-up runs (not counted per item): (a) the same command with a 1-query file;
#               (b) `dump --table 999999 SEG`, which opens the same segment and exits with
#               an error before decoding anything. Ir per query = (a - a0) / 9,999;
#               Ir per entry = (b - b0) / N.
#
# Inputs (under WORKDIR/seed-$SEED, WORKDIR defaults to target/instructions, SEED to 1):
#   stored.txt    N = 1,000,000 random fingerprints   (bench generate --seed SEED)
#   segment.sdx   simdex build -k 3 of stored.txt
#   queries.bin   the 10,000 queries (seeds SEED+1, SEED+2, SEED+3), little-endian u64
#   query1.bin    the first of them (the start-up run)
# They are made ONCE, by the first binary this script runs with, and reused as they are
# by every later binary (the generator and the segment file format do not change in a
# restructuring; built-by.txt records which binary made them). Delete the directory to
# regenerate.
#
# Repeatability: every valgrind run gets the same small environment (env -i), runs the
# binary through a symlink of fixed-length path, and sets SIMDEX_MMAP_ADVICE=0 (the
# documented diagnostic switch that maps segments without read advice). Without it a
# query times how long its first blocks take to touch and, when that is over 50 us, which
# under valgrind happens at random, issues madvise(WILLNEED) for the next 256 queries: a
# count that changes from run to run. Set MMAP_ADVICE=1 to measure with the advice anyway.
# The counts are those of the code paths valgrind's CPU offers: valgrind 3.19 emulates
# BMI1/BMI2/POPCNT/AVX2 but not AVX-512, so the BMI2 query loop (the one the query path
# uses on this CPU natively too) is what is counted.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 SIMDEX_BINARY [WORKDIR]" >&2
    exit 64
fi
BIN=$(readlink -f "$1")
WORKDIR=${2:-target/instructions}
SEED=${SEED:-1}
N=1000000
NQ_RANDOM=5000
NQ_NEAR2=2500
NQ_NEAR3=2500
NQ=$((NQ_RANDOM + NQ_NEAR2 + NQ_NEAR3))
K=3
TOP=${TOP:-5}
ALL_TABLES=$([[ ${ALL_TABLES:-1} == 0 ]] && echo 0 || echo 1)
# functions whose inclusive Ir is reported (substrings of the symbol, so that a module move
# does not lose them; override if a restructuring renames them)
QUERY_FN=${QUERY_FN:-::query_into}  # the largest inclusive match: the segment's (its module path changes with the layout)
DECODE_FN=${DECODE_FN:-TableEntries as core::iter::traits::iterator::Iterator>::next}
ADVICE=$([[ ${MMAP_ADVICE:-0} == 1 ]] && echo 1 || echo 0)

[[ -x $BIN ]] || { echo "$BIN: not an executable" >&2; exit 66; }
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 69; }

DATA=$WORKDIR/seed-$SEED
mkdir -p "$DATA"
WORKDIR=$(readlink -f "$WORKDIR")
DATA=$WORKDIR/seed-$SEED

# ---- inputs: made once (under a lock, so two concurrent runs do not race) ----
exec 9>"$DATA/.lock"
flock 9
if [[ ! -s $DATA/segment.sdx || ! -s $DATA/queries.bin || ! -s $DATA/entries ]]; then
    echo "generating inputs in $DATA with $BIN (seed $SEED)" >&2
    tmp=$DATA/.gen
    rm -rf "$tmp"; mkdir "$tmp"
    "$BIN" bench generate -n $N --seed "$SEED" > "$tmp/stored.txt"
    "$BIN" build -k $K --out "$tmp/segment.sdx" "$tmp/stored.txt"
    {
        "$BIN" bench generate -n $NQ_RANDOM --seed $((SEED + 1)) --binary
        "$BIN" bench generate -n $NQ_NEAR2 --seed $((SEED + 2)) --near "$tmp/stored.txt" --flips 2 --binary
        "$BIN" bench generate -n $NQ_NEAR3 --seed $((SEED + 3)) --near "$tmp/stored.txt" --flips 3 --binary
    } > "$tmp/queries.bin"
    head -c 8 "$tmp/queries.bin" > "$tmp/query1.bin"
    [[ $(stat -c %s "$tmp/queries.bin") -eq $((8 * NQ)) ]] || { echo "queries.bin: wrong size" >&2; exit 70; }
    # entries decoded by `dump` (N unless the generator repeated a fingerprint)
    "$BIN" dump "$tmp/segment.sdx" | wc -l > "$tmp/entries"
    { echo "binary: $BIN"; echo "date: $(date -u +%FT%TZ)"; echo "seed: $SEED"; (cd "$tmp" && sha256sum stored.txt segment.sdx queries.bin query1.bin entries); } > "$tmp/built-by.txt.new"
    mv "$tmp/built-by.txt.new" "$tmp/built-by.txt"
    mv "$tmp"/* "$DATA"/
    rmdir "$tmp"
fi
flock -u 9
SEG=$DATA/segment.sdx
ENTRIES=$(cat "$DATA/entries")
TABLES=$("$BIN" dump --table 999999 "$SEG" 2>&1 >/dev/null | sed -n 's/.*tables 0\.\.\([0-9]*\).*/\1/p' || true)
[[ -n $TABLES ]] || { echo "could not read the number of tables of $SEG" >&2; exit 70; }

# ---- callgrind runs ----
RUN=$(mktemp -d "$WORKDIR/run.XXXXXXXX")
trap 'rm -rf "$RUN"' EXIT
ln -s "$BIN" "$RUN/simdex"

# cg NAME ARGS... : runs `simdex ARGS` under callgrind (stdout to /dev/null); echoes nothing.
cg() {
    local name=$1; shift
    local rc=0
    env -i PATH=/usr/bin:/bin LC_ALL=C SIMDEX_MMAP_ADVICE=$ADVICE \
        valgrind --tool=callgrind --callgrind-out-file="$RUN/$name.cg" --log-file="$RUN/$name.vg" \
        "$RUN/simdex" "$@" > /dev/null 2> "$RUN/$name.err" || rc=$?
    echo "$rc" > "$RUN/$name.rc"
}
# total Ir of a run
ir() { awk '/^(summary|totals):/ { print $2; exit }' "$RUN/$1.cg"; }
# annotate RUN INCLUSIVE: callgrind_annotate's "Ir file:function" lines as "Ir<TAB>function"
# (the source file of inlined code and the object file dropped)
annotate() {
    callgrind_annotate --inclusive="$2" --threshold=100 --auto=no "$RUN/$1.cg" 2>/dev/null |
        sed -n 's/^ *\([0-9,][0-9,]*\) ([ 0-9.]*%)  \([^=<> ][^:]*\):\(.*\)$/\1\t\3/p' |
        sed 's/ \[[^]]*\]$//' | tr -d ','
}
# top functions by self Ir, summed over the source files callgrind splits a function into
# (inlined code is counted under the function it is inlined in, per file)
top() {
    annotate "$1" no |
        awk -F'\t' '{ ir[$2] += $1 } END { for (f in ir) printf "%d\t%s\n", ir[f], f }' |
        sort -t$'\t' -k1,1nr | awk -v top="$TOP" 'NR <= top' |
        while IFS=$'\t' read -r n f; do printf "  %15s %6s  %s\n" "$(commas "$n")" "$(awk -v n="$n" -v t="$(ir "$1")" 'BEGIN { printf "%.1f%%", 100 * n / t }')" "$f"; done
}
# inclusive Ir of the functions whose name contains PATTERN (the largest of their
# file:function entries: the one that holds the calls)
incl() {
    annotate "$1" yes | awk -F'\t' -v p="$2" 'index($2, p) && $1 > m { m = $1 } END { print m + 0 }'
}
check() { # the runs that must succeed
    local name
    for name in "$@"; do
        if [[ $(cat "$RUN/$name.rc") != 0 ]]; then
            echo "run $name failed (rc $(cat "$RUN/$name.rc")):" >&2; cat "$RUN/$name.err" >&2; exit 1
        fi
    done
}

cg query0 query "$SEG" --binary --input "$DATA/query1.bin" -k $K
cg query  query "$SEG" --binary --input "$DATA/queries.bin" -k $K
cg dump0  dump --table 999999 "$SEG"   # exits 2 ("the segment has tables 0..T") after opening
cg dump   dump "$SEG"
check query0 query dump
grep -q 'the segment has tables' "$RUN/dump0.err" || { echo "dump0 did not stop where expected:" >&2; cat "$RUN/dump0.err" >&2; exit 1; }
if [[ $ALL_TABLES == 1 ]]; then
    for ((t = 0; t < TABLES; t++)); do cg "table$t" dump --table $t "$SEG"; check "table$t"; done
fi

# ---- report ----
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f", (a - b) / n }'; }
commas() { echo "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta'; }
q0=$(ir query0); q=$(ir query); d0=$(ir dump0); d=$(ir dump)

echo "simdex instruction counts (callgrind Ir)"
echo "binary:   $BIN"
echo "          sha256 $(sha256sum "$BIN" | cut -c1-16)..., $(stat -c '%s bytes, modified %y' "$BIN" | cut -d. -f1)"
echo "inputs:   $DATA (seed $SEED; made by $(sed -n 's/^binary: //p' "$DATA/built-by.txt"))"
echo "segment:  $ENTRIES entries, $TABLES tables, $(stat -c %s "$SEG") bytes; $NQ queries at k = $K; SIMDEX_MMAP_ADVICE=$ADVICE"
echo "valgrind: $(valgrind --version); cpu: $(lscpu | sed -n 's/^Model name: *//p')"
echo
row() { printf "%-46s %15s  %s\n" "$@"; }
row "run" "Ir" "Ir per item"
row "(a0) query, 1 query (start-up)" "$(commas "$q0")" ""
row "(a)  query, $NQ queries, k = $K" "$(commas "$q")" "$(per "$q" "$q0" $((NQ - 1))) per query, start-up subtracted"
row "     in $QUERY_FN (inclusive)" "$(commas "$(incl query "$QUERY_FN")")" "$(per "$(incl query "$QUERY_FN")" 0 $NQ) per query"
row "(b0) dump --table 999999 (open, no decode)" "$(commas "$d0")" ""
row "(b)  dump (table 0, $ENTRIES entries)" "$(commas "$d")" "$(per "$d" "$d0" "$ENTRIES") per entry, start-up subtracted"
row "     in TableEntries::next (inclusive)" "$(commas "$(incl dump "$DECODE_FN")")" "$(per "$(incl dump "$DECODE_FN")" 0 "$ENTRIES") per entry (the decode loop)"
if [[ $ALL_TABLES == 1 ]]; then
    for ((t = 0; t < TABLES; t++)); do
        x=$(ir "table$t"); y=$(incl "table$t" "$DECODE_FN")
        row "(b.$t) dump --table $t" "$(commas "$x")" "$(per "$x" "$d0" "$ENTRIES") per entry, start-up subtracted"
        row "     in TableEntries::next (inclusive)" "$(commas "$y")" "$(per "$y" 0 "$ENTRIES") per entry (the decode loop)"
    done
fi
echo
echo "matches written by (a) (counted natively): $("$BIN" query "$SEG" --binary --input "$DATA/queries.bin" -k $K | wc -l)"
runs=(query0 query dump0 dump)
if [[ $ALL_TABLES == 1 ]]; then for ((t = 0; t < TABLES; t++)); do runs+=("table$t"); done; fi
for run in "${runs[@]}"; do
    echo
    echo "top $TOP functions by self Ir, $run:"
    top "$run"
done
