#!/bin/sh
# Seeds corpus/<target>/ (gitignored) with the frozen v1 fixtures and a small learned IDF
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
cargo run -q --manifest-path "$root/Cargo.toml" -p simdex-cli -- fingerprint \
    --learn-idf corpus/idf_decode/learned.idf \
    "$root"/fixtures/corpus/pages/en-049.html "$root"/fixtures/corpus/pages/en-075.html >/dev/null
