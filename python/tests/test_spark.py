"""simdex.spark (issue 22) in local mode against the oracle, the `simdex dedup` CLI on the same
input: the same pairs (line for line), the same clusters, the same matches against an index,
a skewed corpus, bad records, and tasks that fail once and run again. One SparkSession
(local[2], two attempts per task) is shared by every test; skipped only without java."""

import json
import os
import pathlib
import pickle
import re
import shutil
import subprocess
import sys

import pytest

from conftest import PAGES, ROOT

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs java")


def run_spark(spark, *argv):
    from simdex.spark.__main__ import main

    assert main([str(a) for a in argv], spark=spark) == 0


def sorted_lines(path):
    return sorted(pathlib.Path(path).read_text().splitlines())


def cli_clusters(report):
    """Clusters from the CLI's JSON-lines report: near clusters, and exact groups outside them."""
    rows = [json.loads(line) for line in pathlib.Path(report).read_text().splitlines()]
    near = [frozenset(r["members"]) for r in rows if r["kind"] == "near"]
    exact = [frozenset(r["members"]) for r in rows if r["kind"] == "exact"]
    return set(near) | {g for g in exact if not any(g <= n for n in near)}


def spark_clusters(path):
    by = {}
    for line in sorted_lines(path):
        id_, cluster = line.split("\t")
        by.setdefault(cluster, set()).add(id_)
    for cluster, members in by.items():
        assert cluster in members, f"cluster {cluster} is named after a document outside it"
    return {frozenset(m) for m in by.values()}


def page_records():
    out = []
    for p in sorted(PAGES.iterdir()):
        body = p.read_text(encoding="utf-8", errors="replace")
        out.append({"id": p.name, "html" if p.suffix == ".html" else "text": body})
    return out


def write_jsonl(path, records, extra_lines=()):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
        for line in extra_lines:
            f.write(line + "\n")


def test_pairs_equal_simdex_dedup_on_the_bundled_corpus(spark, cli, tmp_path):
    summary = cli("dedup", PAGES, "--pairs", tmp_path / "cli.tsv", "--report", tmp_path / "cli.jsonl")
    run_spark(spark, "dedup", PAGES, "--pairs", tmp_path / "spark.tsv", "--clusters", tmp_path / "clusters.tsv", "--kept", tmp_path / "kept.jsonl")
    cli_pairs = sorted_lines(tmp_path / "cli.tsv")
    assert len(cli_pairs) >= 40
    assert sorted_lines(tmp_path / "spark.tsv") == cli_pairs
    recipe = (tmp_path / "spark.tsv.recipe").read_text().strip()
    assert f"recipe: {recipe}\n" in summary and "idf=-" not in recipe
    # the learned table, pinned, gives the CLI the same fingerprints (and so the same pairs)
    cli("dedup", PAGES, "--idf", tmp_path / "spark.tsv.idf", "--pairs", tmp_path / "pinned.tsv")
    assert sorted_lines(tmp_path / "pinned.tsv") == cli_pairs
    clusters = cli_clusters(tmp_path / "cli.jsonl")
    assert spark_clusters(tmp_path / "clusters.tsv") == clusters
    kept = [json.loads(line)["id"] for line in sorted_lines(tmp_path / "kept.jsonl")]
    assert len(kept) == len(list(PAGES.iterdir())) - sum(len(c) - 1 for c in clusters)
    assert all(sum(1 for i in kept if i in c) == 1 for c in clusters)


def planted_versions(path, pairs=200, words=200, most_changed=8, seed=7):
    """``pairs`` random texts of ``words`` words (a 3,000-word vocabulary) and a version of each
    with 1 to ``most_changed`` words replaced: pairs at word-3-shingle Jaccard about 0.85-0.99,
    many within the sketch's noise of 0.9, and a few whose fingerprints differ by more than k."""
    import random

    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(3000)]
    records = []
    for i in range(pairs):
        base = [rng.choice(vocab) for _ in range(words)]
        version = list(base)
        for _ in range(rng.randint(1, most_changed)):
            version[rng.randrange(words)] = rng.choice(vocab)
        records += [{"id": f"doc-{i:04d}", "text": " ".join(base)}, {"id": f"doc-{i:04d}-v", "text": " ".join(version)}]
    write_jsonl(path, records)


def test_band_candidates_and_the_second_look_give_simdex_dedups_pairs(spark, cli, tmp_path, capsys, monkeypatch):
    """Pairs beyond k found by a shared sketch band, and pairs whose estimate is within the
    sketch's noise of the threshold decided by exact Jaccard: simdex.spark's pairs (and their
    similarities) equal simdex dedup's, line for line."""
    corpus = tmp_path / "versions.jsonl"
    planted_versions(corpus)
    summary = cli("dedup", corpus, "--format", "jsonl", "--pairs", tmp_path / "cli.tsv")
    beyond = re.search(r"of them (\d+) beyond k", summary)
    looked = re.search(r"second look \(exact Jaccard\) at (\d+) pairs .*: (\d+) changed side", summary)
    # the corpus exercises both (else this test proves nothing)
    assert beyond and int(beyond.group(1)) >= 1, summary
    assert looked and int(looked.group(2)) >= 1, summary
    run_spark(spark, "dedup", corpus, "--format", "jsonl", "--pairs", tmp_path / "spark.tsv")
    assert sorted_lines(tmp_path / "spark.tsv") == sorted_lines(tmp_path / "cli.tsv")
    err = capsys.readouterr().err
    assert f"of them {beyond.group(1)} beyond k" in err, err
    assert f"second look (exact Jaccard) at {looked.group(1)} pairs" in err and f"{looked.group(2)} changed side" in err, err
    # the join's partitions bounded by records (as a large corpus's are): the band group and
    # every group of the split in many partitions, joined by many tasks, give the same pairs
    import simdex.spark._dedup as D

    monkeypatch.setattr(D, "RECORDS_PER_JOIN", 200)
    run_spark(spark, "dedup", corpus, "--format", "jsonl", "--pairs", tmp_path / "spark-split.tsv")
    assert sorted_lines(tmp_path / "spark-split.tsv") == sorted_lines(tmp_path / "cli.tsv")
    monkeypatch.undo()
    # without them, the estimate within k alone: what simdex dedup --no-band-candidates --no-second-look finds
    plain = cli("dedup", corpus, "--format", "jsonl", "--no-band-candidates", "--no-second-look", "--pairs", tmp_path / "plain.tsv")
    assert "beyond k" not in plain and sorted_lines(tmp_path / "plain.tsv") != sorted_lines(tmp_path / "cli.tsv")
    run_spark(spark, "dedup", corpus, "--format", "jsonl", "--no-band-candidates", "--no-second-look", "--pairs", tmp_path / "spark-plain.tsv")
    assert sorted_lines(tmp_path / "spark-plain.tsv") == sorted_lines(tmp_path / "plain.tsv")


def test_jsonl_bad_records_are_counted_and_retried_tasks_give_the_same_pairs(spark, cli, tmp_path, capsys):
    corpus = tmp_path / "docs.jsonl"
    short = [{"id": "short-1", "text": "two words"}, {"id": "short-2", "text": "two words"}]
    write_jsonl(corpus, page_records() + short, extra_lines=["{not json", '{"id": "no text"}'])
    cli("dedup", corpus, "--format", "jsonl", "--pairs", tmp_path / "cli-idf.tsv")
    sc = spark.sparkContext
    # every task of these steps fails once and runs again
    sc.setLocalProperty("simdex.test.fail_first_attempt", "fingerprint,confirm")
    try:
        run_spark(spark, "dedup", corpus, "--format", "jsonl", "--pairs", tmp_path / "spark.tsv", "--skipped", tmp_path / "skipped.tsv")
    finally:
        sc.setLocalProperty("simdex.test.fail_first_attempt", None)
    tracker = sc.statusTracker()
    stages = [tracker.getStageInfo(s) for j in tracker.getJobIdsForGroup("simdex dedup") for s in tracker.getJobInfo(j).stageIds]
    assert sum(s.numFailedTasks for s in stages if s is not None) > 0, "no task failed: the hook did not run"
    assert sorted_lines(tmp_path / "spark.tsv") == sorted_lines(tmp_path / "cli-idf.tsv")
    assert "short-1\tshort-2\t0\t1.0000" in sorted_lines(tmp_path / "cli-idf.tsv")
    skipped = sorted_lines(tmp_path / "skipped.tsv")
    assert len(skipped) == 4, skipped
    assert {s.split("\t")[0] for s in skipped} >= {"short-1", "short-2"}
    # the bad records named by their real line, as simdex dedup names them (issue 36)
    first_bad = len(page_records()) + len(short) + 1
    bad = sorted(s for s in skipped if s.startswith(f"{corpus}\t"))
    assert [b.split("\t")[1].split(":")[0] for b in bad] == [f"line {first_bad}", f"line {first_bad + 1}"], bad
    report = cli("dedup", corpus, "--format", "jsonl", "--json")
    cli_bad = sorted(f"{r['id']}\t{r['reason']}" for r in map(json.loads, report.splitlines()) if r.get("kind") == "skipped" and r["id"] == str(corpus))
    assert bad == cli_bad
    assert "4 skipped" in capsys.readouterr().err
    from simdex.spark.__main__ import main

    assert main(["dedup", str(corpus), "--format", "jsonl", "--fail-on-bad"], spark=spark) == 1
    assert "--fail-on-bad" in capsys.readouterr().err


def test_a_page_repeated_100000_times_is_one_representative(spark, cli, tmp_path, capsys):
    corpus = tmp_path / "skew.jsonl"
    boiler = "Cookie notice: this site uses cookies to improve your experience. " * 20
    records = page_records()
    copies = ({"id": f"boiler-{i:06d}", "text": boiler} for i in range(100_000))
    with open(corpus, "w", encoding="utf-8") as f:
        for n, r in enumerate(records):
            f.write(json.dumps(r) + "\n")
            if n == len(records) // 2:
                f.writelines(json.dumps(c) + "\n" for c in copies)
    summary = cli("dedup", corpus, "--format", "jsonl", "--report", tmp_path / "cli.jsonl")
    run_spark(spark, "dedup", corpus, "--format", "jsonl", "--clusters", tmp_path / "clusters.tsv")
    clusters = spark_clusters(tmp_path / "clusters.tsv")
    assert clusters == cli_clusters(tmp_path / "cli.jsonl")
    assert max(len(c) for c in clusters) == 100_000
    # the 100,000 copies were fingerprinted once: one representative per distinct content
    documents = int(re.search(r"documents: (\d+)", summary).group(1))
    redundant = int(re.search(r"\((\d+) redundant copies\)", summary).group(1))
    assert documents == len(records) + 100_000 and redundant >= 99_999
    assert f"representatives fingerprinted: {documents - redundant}\n" in capsys.readouterr().err


@pytest.mark.parametrize("start", ["new", "sketch-recipe-1"])
def test_incremental_against_an_index_matches_simdex_dedup_index(spark, cli, tmp_path, start):
    """``dedup --index`` (and ``--insert``) answers as ``simdex dedup --index``, on a new index
    and on one made before sketch recipe 2 (``fixtures/v4``: recipe 1, which the index keeps:
    the corpus is sketched with it, as the CLI does)."""
    records = page_records()
    a, b = records[::2], records[1::2] + [dict(r, id="again-" + r["id"]) for r in records[::2][:20]]
    write_jsonl(tmp_path / "a.jsonl", a)
    write_jsonl(tmp_path / "b.jsonl", b)
    if start == "sketch-recipe-1":
        from simdex._simdex import CorpusRecipe, IndexReader

        shutil.copytree(ROOT / "fixtures" / "v4" / "index-sketched", tmp_path / "idx")
        made = IndexReader(tmp_path / "idx").sketching(CorpusRecipe())
        assert made.sketch_recipe.startswith("simdex-sketch/1 ") and CorpusRecipe().sketch_recipe.startswith("simdex-sketch/2 "), made.sketch_recipe
        assert pickle.loads(pickle.dumps(made)).sketch_recipe == made.sketch_recipe
    cli("dedup", tmp_path / "a.jsonl", "--format", "jsonl", "--index", tmp_path / "idx")
    shutil.copytree(tmp_path / "idx", tmp_path / "idx-spark")
    cli("dedup", tmp_path / "b.jsonl", "--format", "jsonl", "--index", tmp_path / "idx", "--report", tmp_path / "b.jsonl.report", "--pairs", tmp_path / "cli.tsv")
    run_spark(spark, "dedup", tmp_path / "b.jsonl", "--format", "jsonl", "--index", tmp_path / "idx-spark", "--matches", tmp_path / "m.tsv", "--pairs", tmp_path / "p.tsv", "--insert")
    expected = set()
    for line in (tmp_path / "b.jsonl.report").read_text().splitlines():
        r = json.loads(line)
        if r["kind"] == "indexed":
            for m in r["matches"]:
                expected.add((r["member"], str(m["index_doc_id"]), m["fingerprint"], str(m["distance"]), "%.4f" % m["similarity"]))
    got = {tuple(line.split("\t")) for line in sorted_lines(tmp_path / "m.tsv")}
    assert len(expected) >= 20
    assert got == expected
    # (on the recipe-1 index, pairs whose recipe-1 estimate is within the noise of 0.9 are
    # settled by the second look, as simdex dedup settles them)
    assert sorted_lines(tmp_path / "p.tsv") == sorted_lines(tmp_path / "cli.tsv")
    import simdex

    with simdex.Index(tmp_path / "idx", read_only=True) as x, simdex.Index(tmp_path / "idx-spark", read_only=True) as y:
        assert sorted(y.live_entries()) == sorted(x.live_entries())


def test_user_errors_are_one_line_and_exit_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "simdex.spark", "dedup", tmp_path / "missing.jsonl", "--pairs", tmp_path / "p.tsv"], capture_output=True, text=True)
    assert p.returncode == 2 and "missing.jsonl" in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-m", "simdex.spark", "dedup", PAGES, "--pairs", tmp_path / "no" / "p.tsv"], capture_output=True, text=True)
    assert p.returncode == 2 and "--pairs" in p.stderr and "Traceback" not in p.stderr, p.stderr
    (tmp_path / "not-an-index").mkdir()
    p = subprocess.run([sys.executable, "-m", "simdex.spark", "dedup", PAGES, "--index", tmp_path / "not-an-index", "--master", "local[1]"], capture_output=True, text=True)
    assert p.returncode == 1 and "not-an-index" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_local_session_starts_lean_unless_told_otherwise(tmp_path, monkeypatch):
    """A command's local session gets the start-up settings (no web UI, the client compiler,
    the serial collector) only where nothing else names them: --conf, spark-defaults.conf,
    PYSPARK_SUBMIT_ARGS; a cluster's session gets none of them."""
    from simdex.spark.__main__ import LOCAL_DEFAULTS, _set_elsewhere, session_settings

    shuffle = {"spark.shuffle.compress": "false"}
    assert session_settings(True, {}, shuffle) == {**LOCAL_DEFAULTS, **shuffle}
    assert session_settings(False, {}, shuffle) == shuffle
    given = {"spark.driver.extraJavaOptions": "-Xss4m", "spark.executor.cores": "1"}
    got = session_settings(True, given, shuffle)
    assert got["spark.driver.extraJavaOptions"] == "-Xss4m" and got["spark.executor.cores"] == "1" and got["spark.ui.enabled"] == "false"
    (tmp_path / "spark-defaults.conf").write_text("# a comment\nspark.ui.enabled true\nspark.driver.memory=2g\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options -Dx=1 pyspark-shell")

    class Conf:
        def contains(self, key):
            return key == "spark.shuffle.compress"

    got = session_settings(True, {}, shuffle, _set_elsewhere(Conf()))
    assert got == {}, got
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    assert session_settings(True, {}, shuffle, _set_elsewhere(Conf())) == {"spark.driver.extraJavaOptions": LOCAL_DEFAULTS["spark.driver.extraJavaOptions"]}


def logged_events(folder):
    """The events of the one application logged in ``folder``, in order. Spark 4 writes a rolling
    event log: a folder ``eventlog_v2_APP`` holding ``events_N_APP`` files (N from 1; a codec
    suffix such as ``.zstd`` when compressed, which the run turns off), ``appstatus_APP``
    (``appstatus_APP.inprogress`` until the application ends) and their ``.crc`` checksums."""
    logs = list(folder.iterdir())
    assert len(logs) == 1 and logs[0].is_dir() and logs[0].name.startswith("eventlog_v2_"), logs
    names = [f.name for f in logs[0].iterdir()]
    app = logs[0].name[len("eventlog_v2_") :]
    assert f"appstatus_{app}" in names, f"the application did not end cleanly: {names}"
    parts = {}
    for name in names:
        m = re.fullmatch(r"events_(\d+)_" + re.escape(app) + r"(\.\w+)?", name)
        if m:
            assert m.group(2) is None, f"{name}: a compressed event log (spark.eventLog.compress=false was asked)"
            parts[int(m.group(1))] = logs[0] / name
    assert sorted(parts) == list(range(1, len(parts) + 1)), names
    return [json.loads(line)["Event"] for n in sorted(parts) for line in parts[n].read_text().splitlines() if line.strip()]


def test_a_whole_dedup_run_is_at_most_six_spark_jobs(cli, tmp_path):
    """Counted from Spark's event log of the command line (every output asked for), which
    must still give simdex dedup's pairs."""
    corpus = tmp_path / "docs.jsonl"
    short = [{"id": "short-1", "text": "two words"}, {"id": "short-2", "text": "two words"}]
    write_jsonl(corpus, page_records() + page_records()[:5] + short, extra_lines=["{not json"])
    events = tmp_path / "events"
    events.mkdir()
    out = {name: tmp_path / name for name in ("pairs.tsv", "clusters.tsv", "kept.jsonl", "skipped.tsv")}
    argv = [sys.executable, "-m", "simdex.spark", "dedup", corpus, "--format", "jsonl", "--master", "local[2]", "--conf", "spark.eventLog.enabled=true", "--conf", "spark.eventLog.compress=false", "--conf", f"spark.eventLog.dir={events.as_uri()}"]
    argv += ["--pairs", out["pairs.tsv"], "--clusters", out["clusters.tsv"], "--kept", out["kept.jsonl"], "--skipped", out["skipped.tsv"]]
    p = subprocess.run(argv, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    kinds = logged_events(events)
    assert kinds[0] == "SparkListenerLogStart" and kinds[-1] == "SparkListenerApplicationEnd", (kinds[:2], kinds[-2:])
    jobs = kinds.count("SparkListenerJobStart")
    assert 1 <= jobs <= 6, f"{jobs} Spark jobs"
    print(f"a dedup run with every output: {jobs} Spark jobs")
    cli("dedup", corpus, "--format", "jsonl", "--pairs", tmp_path / "cli.tsv")
    assert sorted_lines(out["pairs.tsv"]) == sorted_lines(tmp_path / "cli.tsv")
    assert len(sorted_lines(out["skipped.tsv"])) == 3


def test_the_first_local_run_writes_the_class_data_archive_and_the_next_maps_it(cli, tmp_path):
    """The command's local session writes the driver JVM's class-data archive when it finds
    none (under XDG_CACHE_HOME) and the next run's JVM loads Spark's classes from it (the
    JVM's own class-loading log says so: "shared objects file (top)"); both runs give simdex
    dedup's pairs, and so does a run told not to (SIMDEX_SPARK_CDS=0), which maps nothing."""
    corpus = tmp_path / "docs.jsonl"
    write_jsonl(corpus, page_records())
    cache, logs = tmp_path / "cache", tmp_path / "jvm"
    logs.mkdir()
    cli("dedup", corpus, "--format", "jsonl", "--pairs", tmp_path / "cli.tsv")

    def run(name, **env):
        # every JVM logs where each class came from, one file a process
        env = {**os.environ, "XDG_CACHE_HOME": str(cache), "JAVA_TOOL_OPTIONS": f"-Xlog:class+load=info:file={logs}/{name}-%p.log", **env}
        argv = [sys.executable, "-m", "simdex.spark", "dedup", corpus, "--format", "jsonl", "--master", "local[2]", "--pairs", tmp_path / f"{name}.tsv"]
        p = subprocess.run(argv, capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        assert sorted_lines(tmp_path / f"{name}.tsv") == sorted_lines(tmp_path / "cli.tsv")
        # the driver's JVM: the one that loaded Spark's context
        driver = [f for f in logs.glob(f"{name}-*.log") if "org.apache.spark.SparkContext " in f.read_text()]
        assert len(driver) == 1, driver
        return driver[0].read_text()

    first = run("first")
    made = list((cache / "simdex").iterdir())
    assert len(made) == 1 and made[0].suffix == ".jsa" and made[0].stat().st_size > 0, made
    assert "shared objects file (top)" not in first
    second = run("second")
    assert re.search(r"org\.apache\.spark\.SparkContext source: shared objects file \(top\)", second), "the second run did not map the archive"
    assert list((cache / "simdex").iterdir()) == made
    assert "shared objects file (top)" not in run("off", SIMDEX_SPARK_CDS="0")
