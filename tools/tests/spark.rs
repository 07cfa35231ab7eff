//! The Spark job (tools/spark/simdex_batch.py) in local[2] mode gives exactly the output of
//! `simdex batch` on the whole index. The script installs pyspark into a virtualenv under
//! the target directory on first use (network access to PyPI), and needs java on PATH.

use std::process::Command;

#[test]
fn spark_local_mode_matches_single_machine_batch() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/spark/test_local.sh");
    let out = Command::new("bash").arg(script).env("SIMDEX", env!("CARGO_BIN_EXE_simdex")).output().expect("run tools/spark/test_local.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "spark test failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("equals simdex batch output"), "{stdout}");
}
