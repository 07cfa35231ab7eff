#!/usr/bin/env bash
# Runs the Spark batch job in local mode (local[2]) on chunks of a generated index and
# checks that its output equals the single-machine `simdex batch` output byte for byte.
# Installs pyspark (tools/spark/requirements.txt) into a virtualenv under the cargo target
# directory the first time. Needs python3, java (17) and the simdex binary ($SIMDEX).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
simdex="${SIMDEX:?set SIMDEX to the simdex binary}"
target="${CARGO_TARGET_DIR:-$root/target}"
venv="$target/spark-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import pyspark" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$simdex" bench generate -n 200000 --clusters 2000 --cluster-size 5 --flips 2 --with-ids > "$work/stored.txt"
"$simdex" bench generate -n 2000 --seed 9 > "$work/random.txt"
head -n 3000 "$work/stored.txt" | cut -f1 > "$work/near-src.txt"
"$simdex" bench generate -n 3000 --near "$work/near-src.txt" --flips 2 --seed 5 > "$work/near.txt"
cat "$work/random.txt" "$work/near.txt" > "$work/queries.txt"
"$simdex" build --out "$work/index.sdx" "$work/stored.txt" 2>/dev/null
"$simdex" split "$work/index.sdx" --parts 4 --out "$work/chunks" 2>/dev/null
"$simdex" batch "$work/index.sdx" --queries "$work/queries.txt" -k 3 > "$work/single.tsv" 2>/dev/null
export PYSPARK_PYTHON="$venv/bin/python"
"$venv/bin/python" "$here/simdex_batch.py" --master 'local[2]' --simdex "$simdex" --ship-binary \
  --queries "$work/queries.txt" -k 3 --out "$work/spark.tsv" "$work"/chunks/part-*.sdx 2> "$work/spark.log" \
  || { tail -30 "$work/spark.log" >&2; exit 1; }
lines=$(wc -l < "$work/single.tsv")
if [ "$lines" -lt 3000 ]; then echo "too few matches ($lines) to be a meaningful comparison" >&2; exit 1; fi
if cmp -s "$work/single.tsv" "$work/spark.tsv"; then
  echo "spark local[2] output equals simdex batch output ($lines lines, 4 chunks)"
else
  echo "spark output differs from simdex batch:" >&2
  diff "$work/single.tsv" "$work/spark.tsv" | head -20 >&2
  exit 1
fi
