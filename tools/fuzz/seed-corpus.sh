#!/bin/sh
# Seeds corpus/<target>/ (gitignored) with the frozen v1 and v2 fixtures (v2's sketched index:
# manifest and log version 2, a sketch column) and a small learned IDF
# table, so the fuzzers start from valid files (checksums included) and mutate from there.
# Run from tools/fuzz; needs the stable toolchain for the simdex CLI.
set -eu
root=../..
fixtures=$root/fixtures/v1
mkdir -p corpus/block_decode corpus/segment_open corpus/log_scan corpus/manifest_decode corpus/tombstone_decode corpus/idf_decode
cp "$fixtures"/*.sdx "$fixtures"/index/seg-*.sdx corpus/segment_open/
cp "$fixtures"/index/log-*.wal corpus/log_scan/
cp "$fixtures"/index/MANIFEST corpus/manifest_decode/
cp "$fixtures"/index/tomb-*.sdt corpus/tombstone_decode/
for d in "$root"/fixtures/v2/index "$root"/fixtures/v2/index-sketched; do
    tag=$(basename "$d")
    cp "$d"/seg-*.sdx "corpus/segment_open/v2-$tag.sdx"
    cp "$d"/log-*.wal "corpus/log_scan/v2-$tag.wal"
    cp "$d"/MANIFEST "corpus/manifest_decode/v2-$tag"
done
cargo run -q --manifest-path "$root/Cargo.toml" -p simdex-cli -- fingerprint \
    --learn-idf corpus/idf_decode/learned.idf \
    "$root"/fixtures/corpus/pages/en-049.html "$root"/fixtures/corpus/pages/en-075.html >/dev/null
