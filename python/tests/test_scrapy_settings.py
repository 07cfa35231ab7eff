"""The Scrapy integration's start-up, as a user of the example project meets it with
``scrapy crawl site -s SETTING=VALUE``: a bad setting stops the crawl with one line naming it
and the values it takes, before any file is created and without the framework's traceback;
the refusals of an index (locked, a directory of other files, another expiry window) are one
line each too, naming the setting that changes them."""

import pathlib
import shutil
import subprocess
import sys

import pytest

import simdex

pytest.importorskip("scrapy")

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "scrapy"


@pytest.fixture()
def project(tmp_path):
    """examples/scrapy as shipped, in a folder of its own."""
    p = tmp_path / "project"
    shutil.copytree(EXAMPLE, p, ignore=shutil.ignore_patterns("__pycache__", "crawl.simdex*"))
    return p


def start(project, *settings):
    """``scrapy crawl site`` with ``-s`` settings, against a port nothing listens on (a
    crawl that started would log its requests failing): (exit status, stderr)."""
    scrapy = pathlib.Path(sys.executable).parent / "scrapy"
    args = [str(scrapy), "crawl", "site", "-a", "start=http://127.0.0.1:9/"]
    for s in settings:
        args += ["-s", s]
    p = subprocess.run(args, cwd=project, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stderr


def simdex_errors(log):
    return [line.split(" ERROR: ", 1)[1] for line in log.splitlines() if " ERROR: simdex: " in line]


def files(project):
    return sorted(p.name for p in project.iterdir())


SHIPPED = ["README.md", "crawler", "scrapy.cfg"]


@pytest.mark.parametrize(
    "setting, says",
    [
        ("SIMDEX_K=12", "simdex: SIMDEX_K = '12': k = 12: document near-duplicates are found within at most k = 8 bits; SIMDEX_K takes 0 to 8"),
        ("SIMDEX_K=abc", "simdex: SIMDEX_K = 'abc': not a whole number; SIMDEX_K takes 0 to 8; unset: the library's default"),
        ("SIMDEX_K=-1", "simdex: SIMDEX_K = '-1': k = -1: a distance in bits is not negative; SIMDEX_K takes 0 to 8"),
        ("SIMDEX_MIN_WORDS=many", "simdex: SIMDEX_MIN_WORDS = 'many': not a whole number; SIMDEX_MIN_WORDS takes a whole number of words, 0 or more"),
        ("SIMDEX_CONFIRM=maybe", "simdex: SIMDEX_CONFIRM = 'maybe': not a boolean; SIMDEX_CONFIRM takes True or False"),
        ("SIMDEX_ACTION=delete", "simdex: SIMDEX_ACTION = 'delete': unknown; SIMDEX_ACTION takes \"drop\" or \"flag\""),
        ("SIMDEX_DURABILITY=sometimes", "simdex: SIMDEX_DURABILITY = 'sometimes': unknown; SIMDEX_DURABILITY takes \"group\" or \"sync\" or \"nosync\""),
        ("SIMDEX_STATUSES=200,abc", "simdex: SIMDEX_STATUSES = '200,abc': not a list of whole numbers; SIMDEX_STATUSES takes HTTP statuses"),
        ("SIMDEX_EXPIRE_AFTER=30x", "simdex: SIMDEX_EXPIRE_AFTER = '30x': "),
        ("SIMDEX_LOG_INTERVAL=-5", "simdex: SIMDEX_LOG_INTERVAL = '-5': not a number of seconds"),
    ],
)
def test_a_bad_setting_stops_the_crawl_in_one_line_and_leaves_nothing(project, setting, says):
    status, log = start(project, setting)
    assert status != 0, log[-3000:]
    errors = simdex_errors(log)
    assert len(errors) == 1 and errors[0].startswith(says), (errors, log[-3000:])
    assert "Traceback" not in log and "Crawled" not in log, log[-3000:]
    assert files(project) == SHIPPED, "no index, no URL map"


def test_the_refusals_of_an_index_are_one_line_naming_what_to_change(project, tmp_path):
    # a directory of other files
    status, log = start(project, f"SIMDEX_INDEX={project / 'crawler'}")
    errors = simdex_errors(log)
    assert status != 0 and len(errors) == 1 and "Traceback" not in log, log[-3000:]
    assert "not a simdex index" in errors[0] and errors[0].endswith("set SIMDEX_CREATE_IN_NONEMPTY = True"), errors
    assert "--create-in-nonempty" not in errors[0] and "MANIFEST" not in files(project / "crawler")
    # locked by another process (this one)
    with simdex.Index(project / "crawl.simdex"):
        status, log = start(project)
    errors = simdex_errors(log)
    assert status != 0 and len(errors) == 1 and "Traceback" not in log, log[-3000:]
    assert errors[0].startswith(f"simdex: the index crawl.simdex is locked by another process"), errors
    # an existing index keeps its expiry window (none here): another is refused, named
    status, log = start(project, "SIMDEX_EXPIRE_AFTER=30d")
    errors = simdex_errors(log)
    assert status != 0 and len(errors) == 1 and "Traceback" not in log, log[-3000:]
    assert errors[0].startswith("simdex: SIMDEX_EXPIRE_AFTER = '30d' with SIMDEX_INDEX = crawl.simdex: ") and "expiry window" in errors[0], errors
    # a server nobody runs
    status, log = start(project, "SIMDEX_URL=http://127.0.0.1:9")
    errors = simdex_errors(log)
    assert status != 0 and len(errors) == 1 and "Traceback" not in log, log[-3000:]
    assert errors[0] == "simdex: SIMDEX_URL = http://127.0.0.1:9: no simdex server answers there (start one with `simdex serve DIR`)", errors
