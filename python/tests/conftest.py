"""Shared fixtures: the simdex CLI (the oracle), the repository's corpus."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = ROOT / "fixtures" / "corpus" / "pages"


@pytest.fixture(scope="session", autouse=True)
def cache_home(tmp_path_factory):
    """The commands' caches (simdex.spark's class-data archive) in a folder of the test run,
    not the user's."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


@pytest.fixture(scope="session")
def cli():
    """Runs the `simdex` binary ($SIMDEX, else target/debug/simdex); returns stdout."""
    exe = os.environ.get("SIMDEX") or str(ROOT / "target" / "debug" / "simdex")
    if not os.path.exists(exe):
        pytest.fail(f"the simdex CLI is needed as the oracle: build it (cargo build -p simdex-cli) or set SIMDEX ({exe} missing)")

    def run(*args, stdin=None):
        p = subprocess.run([exe, *map(str, args)], input=stdin, capture_output=True)
        assert p.returncode == 0, p.stderr.decode()
        return p.stdout.decode()

    return run


@pytest.fixture(scope="session")
def spark():
    """One SparkSession (local[2], two attempts per task) for every Spark test."""
    pyspark = pytest.importorskip("pyspark.sql")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers import the wheel under test
    s = (
        pyspark.SparkSession.builder.master("local[2,2]")
        .appName("simdex tests")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()
