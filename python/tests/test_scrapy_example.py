"""examples/scrapy as shipped (copied file for file, nothing added), crawled with the command
its README gives, in new processes, against a local site with a page that changes and a link
to a missing page: the first crawl gives every page's item, a re-crawl none, a crawl after a
change only the changed page's item, and the next re-crawl none again."""

import json
import pathlib
import random
import re
import shutil
import subprocess
import sys

import pytest

import simdex

pytest.importorskip("scrapy")

from test_scrapy import page, serve, words  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "scrapy"
PAGES = 12


def readme_command():
    """The crawl command of the example's README, as a list of arguments."""
    text = (EXAMPLE / "README.md").read_text()
    line = next(line for line in text.splitlines() if line.strip().startswith("scrapy crawl"))
    return line.split("#")[0].split()


def crawl(project, base, out):
    """The README's command with the local site as start and the items written to ``out``
    (-O): (items, stats line, stderr)."""
    cmd = readme_command()
    assert cmd[:3] == ["scrapy", "crawl", "site"] and cmd[3] == "-a" and cmd[4].startswith("start="), cmd
    cmd[4] = f"start={base}"
    scrapy = pathlib.Path(sys.executable).parent / "scrapy"
    p = subprocess.run([str(scrapy), *cmd[1:], "-O", str(out)], cwd=project, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    items = json.loads(out.read_text() or "[]")
    stats = re.search(r"Dumping Scrapy stats:\n(\{.*?\})\n", p.stderr, re.S)
    assert stats, p.stderr[-3000:]
    return items, stats.group(1), p.stderr


def test_the_example_project_as_shipped_gives_no_item_twice(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "crawl.simdex*"))
    rng = random.Random(44)
    site = tmp_path / "site"
    site.mkdir()
    names = [f"p{i}.html" for i in range(PAGES)]
    links = "".join(f'<a href="{n}">{n}</a> ' for n in names) + '<a href="missing.html">gone</a>'
    for n in names:
        (site / n).write_text(page(n, words(rng, 250)).replace("</body>", links + "</body>"))
    (site / "index.html").write_text(page("index", words(rng, 200)).replace("</body>", links + "</body>"))
    base, server = serve(site)
    every = sorted([base] + [base + n for n in names])
    try:
        items, stats, log = crawl(project, base, tmp_path / "1.json")
        assert sorted(i["url"] for i in items) == every, "every page's item, the 404's none"
        assert "'simdex/new': 13" in stats and "'simdex/items/page_new': 13" in stats, stats
        assert "within k = 8 confirmed by sketch" in log and log.count("simdex: near-duplicates within k") == 1, "one start line"
        for run in ("2", "3"):
            items, stats, _ = crawl(project, base, tmp_path / f"{run}.json")
            assert items == [], f"re-crawl {run}: no item twice ({[i['url'] for i in items]})"
            assert "'simdex/revisit': 13" in stats and "'simdex/items/page_revisit': 13" in stats, stats
        # p3 rewritten: its item once more, no other
        (site / "p3.html").write_text(page("p3", words(rng, 250)).replace("</body>", links + "</body>"))
        items, stats, _ = crawl(project, base, tmp_path / "4.json")
        assert [i["url"] for i in items] == [base + "p3.html"], stats
        assert "simdex:changed" in items[0]["flags"] and "'simdex/changed': 1" in stats, stats
        items, stats, _ = crawl(project, base, tmp_path / "5.json")
        assert items == [], stats
    finally:
        server.kill()
        server.wait()
    # the index holds one entry per live page (the changed page's old version replaced),
    # the 404 none: the oracle is the fingerprints of the pages served now
    fp = simdex.Fingerprinter()
    served = {fp.fingerprint_html((site / n).read_bytes()) for n in names + ["index.html"]}
    with simdex.Index(project / "crawl.simdex", read_only=True) as idx:
        assert sorted(f for f, _ in idx.live_entries()) == sorted(served)
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "crawl.simdex", "crawler", "scrapy.cfg"], "the index, nothing beside it"
