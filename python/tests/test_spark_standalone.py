"""simdex.spark dedup on a real Spark standalone cluster (issue 48 item 1): a master and two
workers on 127.0.0.1, started from the pyspark install, executors of 1 GiB
(``spark.executor.memory=1g``, Spark's default, said out loud), the command line as a user
runs it (``--master spark://...``); its pairs must equal the oracle's, ``simdex dedup``'s, and
the work must have run in the workers' executors. Skipped only without java."""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time

import pytest

from test_spark import page_records, planted_versions, sorted_lines, write_jsonl

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs java")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def standalone(tmp_path):
    """A master and two workers (one core, 1 GiB each) on 127.0.0.1; yields the master's URL
    and the folder of their logs; stops exactly the processes it started."""
    pyspark = pytest.importorskip("pyspark")
    home = os.path.dirname(pyspark.__file__)
    logs = tmp_path / "standalone"
    logs.mkdir()
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(logs)}
    port = free_port()
    master = f"spark://127.0.0.1:{port}"
    klass = os.path.join(home, "bin", "spark-class")
    procs = []
    try:
        with open(logs / "master.log", "wb") as out:
            procs.append(subprocess.Popen([klass, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port())], stdout=out, stderr=subprocess.STDOUT, env=env))
        for i in (1, 2):
            work = logs / f"worker{i}"
            work.mkdir()
            with open(logs / f"worker{i}.log", "wb") as out:
                argv = [klass, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--work-dir", str(work), "--webui-port", str(free_port()), master]
                procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env))
        deadline = time.monotonic() + 300
        while (logs / "master.log").read_text(errors="replace").count("Registering worker") < 2:
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "the workers did not register:\n" + "\n".join(f.read_text(errors="replace")[-2000:] for f in sorted(logs.glob("*.log")))
            time.sleep(0.5)
        yield master, logs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_dedup_on_a_standalone_cluster_with_1g_executors_equals_simdex_dedup(standalone, cli, tmp_path):
    master, logs = standalone
    corpus = tmp_path / "docs.jsonl"
    planted_versions(tmp_path / "planted.jsonl", pairs=150)
    write_jsonl(corpus, page_records() + [json.loads(line) for line in (tmp_path / "planted.jsonl").read_text().splitlines()])
    out = tmp_path / "spark.tsv"
    argv = [sys.executable, "-m", "simdex.spark", "dedup", corpus, "--format", "jsonl", "--master", master, "--pairs", out, "--clusters", tmp_path / "clusters.tsv", "--kept", tmp_path / "kept.jsonl"]
    argv += ["--conf", "spark.executor.memory=1g", "--conf", "spark.executor.cores=1", "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.ui.showConsoleProgress=false"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr[-4000:]
    launched = sum(f.read_text(errors="replace").count("Asked to launch executor") for f in logs.glob("worker*.log"))
    assert launched >= 1, "no executor ran on the standalone workers"
    # the executors' JVMs got 1 GiB of heap (the workers log each executor's launch command)
    commands = [line for f in logs.glob("worker*.log") for line in f.read_text(errors="replace").splitlines() if "Launch command" in line]
    assert commands and all("-Xmx1024M" in line for line in commands), commands
    cli("dedup", corpus, "--format", "jsonl", "--pairs", tmp_path / "cli.tsv")
    cli_pairs = sorted_lines(tmp_path / "cli.tsv")
    assert len(cli_pairs) >= 100
    assert sorted_lines(out) == cli_pairs
    assert pathlib.Path(tmp_path / "kept.jsonl").stat().st_size > 0
