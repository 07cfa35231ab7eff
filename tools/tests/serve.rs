//! `simdex serve` end to end: the real binary on a free port, driven by a small HTTP/1.1
//! client of the tests' own (it must also send what no real client sends). Modules by area;
//! every test checks the server against an oracle of its own (a brute-force Hamming scan of
//! what was acknowledged, counts, status codes).

#[path = "serve/support.rs"]
mod support;
// (shared with the library's full-disk tests; these use no `resize`)
#[allow(dead_code)]
#[path = "../../tests/it/tmpfs.rs"]
mod tmpfs;

#[path = "serve/access.rs"]
mod access;
#[path = "serve/batches.rs"]
mod batches;
#[path = "serve/by_id.rs"]
mod by_id;
#[path = "serve/crash.rs"]
mod crash;
#[path = "serve/full_disk.rs"]
mod full_disk;
#[path = "serve/hostile.rs"]
mod hostile;
#[path = "serve/limits.rs"]
mod limits;
#[path = "serve/load.rs"]
mod load;
