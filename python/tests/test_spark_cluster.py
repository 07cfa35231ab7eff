"""``python -m simdex.spark cluster`` (issue 38) against its oracle, ``simdex cluster --pairs``
on a segment of the same fingerprints: the pairs line for line and the clusters' members, on
planted sets with skew (one fingerprint stored 10,000 times, 10,000 templated fingerprints
within 2 bits of one centre), bad lines named by file and line number, byte ranges that cut
lines, Parquet input, a task that fails once, and the components past the driver's bound."""

import json
import pathlib
import random
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs java")

HOT = 0x0123456789ABCDEF
CENTRE = 0xFEDCBA9876543210


def planted(cli, dir: pathlib.Path):
    """Two fingerprint files with ids, their union for the CLI, and the bad lines planted in
    the second (file, line number) for the Spark run."""
    gen = cli("bench", "generate", "-n", "8000", "--clusters", "300", "--cluster-size", "4", "--flips", "2", "--with-ids", "--seed", "38")
    lines = gen.splitlines()
    rng = random.Random(38)
    next_id = 10_000_000
    extra = []
    for _ in range(10_000):
        extra.append(f"{HOT:016x}\t{next_id}")
        next_id += 1
    for _ in range(10_000):
        fp = CENTRE
        for _ in range(rng.randrange(3)):
            fp ^= 1 << rng.randrange(64)
        extra.append(f"{fp:016x}\t{next_id}")
        next_id += 1
    rng.shuffle(extra)
    first, second = lines[:5_000], lines[5_000:] + extra
    (dir / "in").mkdir()
    (dir / "in" / "a.txt").write_text("\n".join(first) + "\n")
    # bad lines in the second file: the line numbers a reader must name
    bad_at = {}
    out = []
    for i, line in enumerate(second):
        if i in (5, 4000, 20_000):
            bad = {5: "xyz", 4000: f"{HOT:015x}\t1", 20_000: f"{HOT:016x}\tnot-a-number"}[i]
            out.append(bad)
            bad_at[len(out)] = bad
        out.append(line)
    (dir / "in" / "b.txt").write_text("\n".join(out) + "\n")
    (dir / "all.txt").write_text("\n".join(first + second) + "\n")
    return dir / "in", dir / "all.txt", bad_at


def cli_members(path):
    """``fp<TAB>id<TAB>cluster`` lines of ``simdex cluster``'s JSON clusters (cluster: the
    smallest fingerprint of its members)."""
    out = []
    for line in pathlib.Path(path).read_text().splitlines():
        members = json.loads(line)["members"]
        cluster = min(m["fingerprint"] for m in members)
        out += [f"{m['fingerprint']}\t{m['doc_id']}\t{cluster}" for m in members]
    return sorted(out)


def lines(path):
    return pathlib.Path(path).read_text().splitlines()


@pytest.fixture(scope="module")
def oracle(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    inputs, whole, bad_at = planted(cli, d)
    cli("build", "--out", d / "seg.sdx", whole)
    out = {}
    for k in (3, 4):
        cli("cluster", d / "seg.sdx", "-k", k, "--pairs", d / f"cli-{k}.tsv", "-o", d / f"cli-{k}.jsonl")
        out[k] = (lines(d / f"cli-{k}.tsv"), cli_members(d / f"cli-{k}.jsonl"))
        out[f"clusters-{k}"] = len(lines(d / f"cli-{k}.jsonl"))
    return inputs, out, bad_at


def run(spark, *argv):
    from simdex.spark.__main__ import main

    return main([str(a) for a in argv], spark=spark)


def test_cluster_pairs_and_members_equal_simdex_cluster(spark, oracle, tmp_path, capsys):
    inputs, cli, bad_at = oracle
    pairs, members = cli[3]
    assert len(pairs) > 100_000 and sum(1 for m in members if m.startswith(f"{HOT:016x}")) == 10_000
    # byte ranges of 64 KiB: lines cut at every range's edges, bad lines past the first
    assert run(spark, "cluster", inputs, "--pairs", tmp_path / "p.tsv", "--clusters", tmp_path / "c.tsv", "--split-bytes", 65536) == 0
    assert lines(tmp_path / "p.tsv") == pairs
    assert sorted(lines(tmp_path / "c.tsv")) == members
    err = capsys.readouterr().err
    name = str(inputs / "b.txt")
    for line_no, text in bad_at.items():
        assert f"bad line {name}:{line_no}: " in err, (line_no, text, err)
    assert "(3 bad lines or records skipped)" in err and "sent to 4 of" in err
    # the summary counts as simdex cluster's: N clusters holding M entries (the lines written)
    assert f"{cli['clusters-3']} clusters holding {len(members)} entries" in err, err
    (tmp_path / "bad.txt").write_text(f"{HOT:016x}\nnot a fingerprint\n")
    assert run(spark, "cluster", tmp_path / "bad.txt", "--fail-on-bad") == 1
    assert f"bad line {tmp_path / 'bad.txt'}:2: " in capsys.readouterr().err


def test_cluster_past_the_driver_bound_at_another_k(spark, oracle, tmp_path):
    inputs, cli, _ = oracle
    pairs, members = cli[4]
    # Spark sorts the pairs and finds the components itself (large-star/small-star)
    assert run(spark, "cluster", inputs, "-k", 4, "--driver-pairs", 1000, "--pairs", tmp_path / "p.tsv", "--clusters", tmp_path / "c.tsv") == 0
    assert lines(tmp_path / "p.tsv") == pairs
    assert sorted(lines(tmp_path / "c.tsv")) == members


def moved_before_members(monkeypatch, write, source, copy, gone):
    """A copy of ``source`` at ``copy`` that is moved to ``gone`` just before the members'
    step (``_cluster._write_members``, patched to call ``write`` after the move): a run that
    read its input again for the members would fail."""
    from simdex.spark import _cluster

    shutil.copytree(source, copy)

    def moved_first(*args, **kwargs):
        copy.rename(gone)
        return write(*args, **kwargs)

    monkeypatch.setattr(_cluster, "_write_members", moved_first)
    return copy


def test_cluster_members_come_from_the_read_pass_not_a_second_read(spark, oracle, tmp_path, monkeypatch):
    """The members are the entries the read tasks kept (binary, in ``--clusters``'s work
    folder), not the input read again: the input is moved away before the members' step, and
    the members are still ``simdex cluster``'s, found on the driver and in Spark; the work
    folder is gone after."""
    from simdex.spark import _cluster

    inputs, cli, _ = oracle
    write = _cluster._write_members
    for k, more in ((3, []), (4, ["--driver-pairs", 1000])):
        copy = moved_before_members(monkeypatch, write, inputs, tmp_path / f"in-{k}", tmp_path / f"gone-{k}")
        c = tmp_path / f"c-{k}.tsv"
        assert run(spark, "cluster", copy, "-k", k, "--pairs", tmp_path / f"p-{k}.tsv", "--clusters", c, "--split-bytes", 65536, *more) == 0
        assert not copy.exists() and (tmp_path / f"gone-{k}").exists()
        assert lines(tmp_path / f"p-{k}.tsv") == cli[k][0]
        assert sorted(lines(c)) == cli[k][1]
        assert not pathlib.Path(f"{c}.work").exists()


def test_the_driver_merges_the_joins_sorted_runs_and_collects_no_pairs(spark, oracle, tmp_path, monkeypatch):
    """The driver's part streamed: no pair reaches the driver through Spark (its Arrow collect
    refused here); each join task wrote its pairs as a sorted run, and the driver's merge of
    the runs gives ``simdex cluster``'s pairs and members."""
    import struct

    from simdex.spark import _cluster

    inputs, cli, _ = oracle
    DataFrame = type(spark.range(1))  # (pyspark 4: the classic DataFrame, not the base)

    def refused(*args, **kwargs):
        raise AssertionError("pairs collected to the driver")

    for name in ("_collect_as_arrow", "toLocalIterator", "toPandas", "toArrow"):
        if hasattr(DataFrame, name):
            monkeypatch.setattr(DataFrame, name, refused)
    merge, seen = _cluster.merge_pair_runs, {}

    def recorded(runs, pairs_path=None):
        for run in runs:
            data = pathlib.Path(run).read_bytes()
            records = [struct.unpack_from("<QQ", data, at) for at in range(0, len(data), 16)]
            assert records == sorted(set(records)), run
            seen[run] = records
        return merge(runs, pairs_path)

    monkeypatch.setattr(_cluster, "merge_pair_runs", recorded)
    assert run(spark, "cluster", inputs, "--pairs", tmp_path / "p.tsv", "--clusters", tmp_path / "c.tsv") == 0
    assert lines(tmp_path / "p.tsv") == cli[3][0]
    assert sorted(lines(tmp_path / "c.tsv")) == cli[3][1]
    pairs = [r for records in seen.values() for r in records if r[0] != r[1]]
    assert len(seen) > 1 and len(pairs) == len(cli[3][0])  # each pair in one run only
    assert not pathlib.Path(f"{tmp_path / 'c.tsv'}.work").exists()


def test_the_merge_of_pair_runs_equals_brute_force(tmp_path):
    """``merge_pair_runs`` against a Python oracle: runs that share pairs (as a batch's join
    and its index runs do) and repeated fingerprints; the pairs once, sorted, as lines, and
    the components by a plain union-find."""
    from simdex._simdex import merge_pair_runs, write_pair_run

    rng = random.Random(12)
    base = [rng.getrandbits(64) for _ in range(300)]
    fps = base + [f ^ (1 << rng.randrange(64)) for f in base[:200]] + [f ^ (3 << rng.randrange(63)) for f in base[100:250]]
    distinct = sorted(set(fps))
    near = [(a, b) for i, a in enumerate(distinct) for b in distinct[i + 1 :] if bin(a ^ b).count("1") <= 3]
    repeated = rng.sample(distinct, 20)
    runs = []
    for r in range(5):
        part = [p for p in near if rng.random() < 0.4]
        pack = lambda xs: b"".join(x.to_bytes(8, "little") for x in xs)  # noqa: E731
        reps = repeated[r::5]
        runs.append(str(tmp_path / f"run-{r}.bin"))
        assert write_pair_run(runs[-1], pack(a for a, _ in part), pack(b for _, b in part), pack(reps)) == len(set(part)) + len(set(reps))
    used = set()
    for r in range(5):
        data = pathlib.Path(runs[r]).read_bytes()
        used |= {(int.from_bytes(data[at : at + 8], "little"), int.from_bytes(data[at + 8 : at + 16], "little")) for at in range(0, len(data), 16)}
    want_pairs = sorted(p for p in used if p[0] != p[1])
    vertices, clusters, n = merge_pair_runs(runs, str(tmp_path / "p.tsv"))
    assert n == len(want_pairs) and len(want_pairs) > 50
    assert lines(tmp_path / "p.tsv") == [f"{a:016x}\t{b:016x}\t{bin(a ^ b).count('1')}" for a, b in want_pairs]
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, b in used:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    # the root is the smallest of each component (roots linked smaller-wins)
    want = sorted((v, find(v)) for v in parent)
    got = list(zip(*(struct_u64s(x) for x in (vertices, clusters))))
    assert got == want


def struct_u64s(data):
    return [int.from_bytes(data[at : at + 8], "little") for at in range(0, len(data), 8)]


def test_cluster_reads_parquet_and_tasks_that_fail_once_give_the_same_answers(spark, oracle, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    inputs, cli, _ = oracle
    fps, ids = [], []
    for path in sorted(inputs.iterdir()):
        for line in lines(path):
            parts = line.split("\t")
            if len(parts) == 2 and len(parts[0]) == 16 and parts[1].isdigit():
                fps.append(int(parts[0], 16))
                ids.append(int(parts[1]))
    # unsigned (Spark reads it as decimal(20, 0)), and signed on a small sample
    (tmp_path / "u").mkdir()
    pq.write_table(pa.table({"fp": pa.array(fps, pa.uint64()), "id": pa.array(ids, pa.int64())}), tmp_path / "u" / "part.parquet")
    sc = spark.sparkContext
    sc.setLocalProperty("simdex.test.fail_first_attempt", "join")
    try:
        assert run(spark, "cluster", tmp_path / "u", "--format", "parquet", "--pairs", tmp_path / "p.tsv", "--clusters", tmp_path / "c.tsv") == 0
    finally:
        sc.setLocalProperty("simdex.test.fail_first_attempt", None)
    tracker = sc.statusTracker()
    stages = [tracker.getStageInfo(s) for j in tracker.getJobIdsForGroup("simdex dedup") for s in tracker.getJobInfo(j).stageIds]
    assert sum(s.numFailedTasks for s in stages if s is not None) > 0, "no task failed: the hook did not run"
    assert lines(tmp_path / "p.tsv") == cli[3][0]
    assert sorted(lines(tmp_path / "c.tsv")) == cli[3][1]
    near = [(int(a, 16), int(b, 16)) for a, b, _ in (p.split("\t") for p in cli[3][0][:50])]
    sample = sorted({f for p in near for f in p})
    (tmp_path / "s").mkdir()
    pq.write_table(pa.table({"fp": pa.array([f - (1 << 64) if f >= 1 << 63 else f for f in sample], pa.int64())}), tmp_path / "s" / "part.parquet")
    assert run(spark, "cluster", tmp_path / "s", "--format", "parquet", "--pairs", tmp_path / "s.tsv") == 0
    want = sorted(f"{a:016x}\t{b:016x}\t{bin(a ^ b).count('1')}" for i, a in enumerate(sample) for b in sample[i + 1 :] if bin(a ^ b).count("1") <= 3)
    assert lines(tmp_path / "s.tsv") == want


def entries(inputs):
    """``(fp, id)`` of every good line of the planted text files, in order."""
    out = []
    for path in sorted(inputs.iterdir()):
        for line in lines(path):
            parts = line.split("\t")
            if len(parts) == 2 and len(parts[0]) == 16 and parts[1].isdigit():
                out.append((int(parts[0], 16), int(parts[1])))
    return out


def test_cluster_reads_binary_records_and_keeps_members_from_the_read_pass(spark, cli, oracle, tmp_path, monkeypatch):
    """``--format binary`` (``simdex insert --binary [--with-ids]``'s records: little-endian
    u64 fingerprint, then u64 id): the pairs and members are those of ``simdex build --binary
    --with-ids`` then ``simdex cluster`` on the same bytes, in byte ranges of whole records
    (the range asked for is not a multiple of 16), on the driver and past its bound; the
    input (binary, and Parquet) is moved away before the members' step, so they come from
    the read pass. Without ids, the members are the same without the id column."""
    import struct

    import pyarrow as pa
    import pyarrow.parquet as pq

    from simdex.spark import _cluster

    inputs, _, _ = oracle
    pairs_of = entries(inputs)
    (tmp_path / "bin").mkdir()
    (tmp_path / "fps").mkdir()
    half = len(pairs_of) // 2
    for name, chunk in (("a.bin", pairs_of[:half]), ("b.bin", pairs_of[half:])):
        (tmp_path / "bin" / name).write_bytes(b"".join(struct.pack("<QQ", f, i) for f, i in chunk))
        (tmp_path / "fps" / name).write_bytes(b"".join(struct.pack("<Q", f) for f, _ in chunk))
    (tmp_path / "all.bin").write_bytes((tmp_path / "bin" / "a.bin").read_bytes() + (tmp_path / "bin" / "b.bin").read_bytes())
    cli("build", "--binary", "--with-ids", "--out", tmp_path / "seg.sdx", tmp_path / "all.bin")
    (tmp_path / "pq").mkdir()
    pq.write_table(pa.table({"fp": pa.array([f for f, _ in pairs_of], pa.uint64()), "id": pa.array([i for _, i in pairs_of], pa.int64())}), tmp_path / "pq" / "part.parquet", row_group_size=4096)
    want = {}
    for k in (3, 4):
        cli("cluster", tmp_path / "seg.sdx", "-k", k, "--pairs", tmp_path / f"cli-{k}.tsv", "-o", tmp_path / f"cli-{k}.jsonl")
        want[k] = (lines(tmp_path / f"cli-{k}.tsv"), cli_members(tmp_path / f"cli-{k}.jsonl"))
        assert want[k] == oracle[1][k]  # (the text input's answers too)
    write = _cluster._write_members
    for source, format in ((tmp_path / "bin", ["--format", "binary", "--with-ids"]), (tmp_path / "pq", ["--format", "parquet"])):
        for k, more in ((3, []), (4, ["--driver-pairs", 1000])):
            copy = moved_before_members(monkeypatch, write, source, tmp_path / f"in-{source.name}-{k}", tmp_path / f"gone-{source.name}-{k}")
            c = tmp_path / f"c-{source.name}-{k}.tsv"
            assert run(spark, "cluster", copy, *format, "-k", k, "--pairs", tmp_path / "p.tsv", "--clusters", c, "--split-bytes", 65544, *more) == 0
            assert not copy.exists(), (source, k)
            assert lines(tmp_path / "p.tsv") == want[k][0], (source, k)
            assert sorted(lines(c)) == want[k][1], (source, k)
            assert not pathlib.Path(f"{c}.work").exists()
    monkeypatch.setattr(_cluster, "_write_members", write)
    assert run(spark, "cluster", tmp_path / "fps", "--format", "binary", "--pairs", tmp_path / "p.tsv", "--clusters", tmp_path / "c.tsv", "--split-bytes", 65540) == 0
    assert lines(tmp_path / "p.tsv") == want[3][0]
    assert sorted(lines(tmp_path / "c.tsv")) == sorted(f"{m.split(chr(9))[0]}\t{m.split(chr(9))[2]}" for m in want[3][1])


def test_cluster_refuses_a_binary_file_that_ends_inside_a_record(spark, tmp_path):
    """A binary file whose length is not a multiple of the record is refused before Spark
    starts, named with its byte offset (as ``simdex insert --binary`` names it)."""
    from simdex.spark import _cluster
    from simdex.spark._read import InputError

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.bin").write_bytes(bytes(16 * 3))
    (tmp_path / "in" / "b.bin").write_bytes(bytes(16 * 5 + 8))
    message = f"{tmp_path / 'in' / 'b.bin'}: 88 bytes is not a multiple of 16 (u64 fingerprint and u64 id per record): the input is truncated at byte offset 80"
    p = subprocess.run([sys.executable, "-m", "simdex.spark", "cluster", tmp_path / "in", "--format", "binary", "--with-ids"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr, p.stderr
    with pytest.raises(InputError, match="b.bin: 88 bytes .* truncated at byte offset 80"):
        _cluster.cluster(spark, [str(tmp_path / "in")], "binary-ids")
    # as 8-byte records both files are whole: 17 fingerprints, all zero (one stored 17 times)
    found = _cluster.cluster(spark, [str(tmp_path / "in")], "binary", 3, None, str(tmp_path / "c.tsv"))
    assert found.fingerprints == 17 and found.pairs == 0 and found.members == 17
    assert lines(tmp_path / "c.tsv") == [f"{0:016x}\t{0:016x}"] * 17
    p = subprocess.run([sys.executable, "-m", "simdex.spark", "cluster", tmp_path / "in", "--with-ids"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--with-ids needs --format binary" in p.stderr, p.stderr


def test_cluster_refuses_bad_arguments_before_spark_starts(tmp_path):
    (tmp_path / "f.txt").write_text(f"{HOT:016x}\n")
    (tmp_path / "out").mkdir()
    for argv, what in [
        ([tmp_path / "missing.txt"], "missing.txt"),
        ([tmp_path / "f.txt", "--pairs", tmp_path / "no" / "p.tsv"], "--pairs"),
        ([tmp_path / "f.txt", "--clusters", tmp_path / "out"], "is a folder"),
        ([tmp_path / "f.txt", "-k", "9"], "-k 9"),
    ]:
        p = subprocess.run([sys.executable, "-m", "simdex.spark", "cluster", *map(str, argv)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and what in p.stderr and "Traceback" not in p.stderr, p.stderr


def new_batch(cli, dir: pathlib.Path):
    """An index of 6,000 stored fingerprints at ``dir/idx`` and a new batch of 3,150 at
    ``dir/new.txt`` (near copies of stored ones, stored ones, random ones, repeats); returns
    the batch, the stored fingerprints and the ``--pairs`` lines brute force finds over both
    (the pairs with at least one fingerprint of the batch)."""
    stored = cli("bench", "generate", "-n", "6000", "--clusters", "200", "--cluster-size", "4", "--flips", "2", "--with-ids", "--seed", "7")
    (dir / "stored.txt").write_text(stored)
    cli("insert", dir / "idx", dir / "stored.txt")
    rng = random.Random(7)
    old = [int(line.split("\t")[0], 16) for line in stored.splitlines()]
    new = [rng.choice(old) ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)) for _ in range(1500)]
    new += [rng.choice(old) for _ in range(100)] + [rng.getrandbits(64) for _ in range(1500)]
    new += new[:50]
    (dir / "new.txt").write_text("".join(f"{f:016x}\t{i}\n" for i, f in enumerate(new)))
    batch, both = set(new), set(new) | set(old)
    want = sorted({(min(a, b), max(a, b)) for a in batch for b in both if a != b and bin(a ^ b).count("1") <= 3})
    assert len(want) > 1500
    return new, old, [f"{a:016x}\t{b:016x}\t{bin(a ^ b).count('1')}" for a, b in want]


def test_cluster_of_a_new_batch_against_an_index(spark, cli, tmp_path):
    """``--against``: the pairs with at least one fingerprint of the new batch, the other of
    the batch or stored in the index, as brute force finds them over both."""
    new, old, want_lines = new_batch(cli, tmp_path)
    assert run(spark, "cluster", tmp_path / "new.txt", "--against", tmp_path / "idx", "--pairs", tmp_path / "p.tsv", "--clusters", tmp_path / "c.tsv") == 0
    batch = set(new)
    want = [tuple(int(x, 16) for x in line.split("\t")[:2]) for line in want_lines]
    assert lines(tmp_path / "p.tsv") == want_lines
    members = lines(tmp_path / "c.tsv")
    # every batch entry with a pair, or stored twice (in the batch or the index), is listed once
    paired = {f for p in want for f in p}
    counts = {f: new.count(f) + (f in set(old)) for f in batch}
    assert sorted(int(m.split("\t")[1]) for m in members) == sorted(i for i, f in enumerate(new) if f in paired or counts[f] > 1)
    p = subprocess.run([sys.executable, "-m", "simdex.spark", "cluster", tmp_path / "new.txt", "--against", tmp_path / "nope"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--against" in p.stderr, p.stderr


def test_the_index_check_in_one_call_per_task_or_in_many_gives_the_same_pairs(spark, cli, tmp_path, monkeypatch):
    """``--against`` hands each task's whole share of the batch to the library's batch mode
    (one task for the whole batch by default: the merge join with the stored tables; many
    small tasks: a probe per fingerprint), from text cut into many byte ranges and from
    Parquet: the pairs are brute force's every time, and those of the batch joined with the
    index by ``simdex batch`` (the one-machine batch mode) plus the batch's own."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from simdex.spark import _cluster

    new, old, want = new_batch(cli, tmp_path)
    # the one-machine oracle: `simdex batch` of the batch against the index, and the batch's own pairs
    found = cli("batch", tmp_path / "idx", "-q", tmp_path / "new.txt", "-k", "3")
    with_index = {(min(a, b), max(a, b)) for a, b in ((int(x[0], 16), int(x[1], 16)) for x in (line.split("\t")[1:3] for line in found.splitlines())) if a != b}
    distinct = sorted(set(new))
    own = {(a, b) for i, a in enumerate(distinct) for b in distinct[i + 1 :] if bin(a ^ b).count("1") <= 3}
    assert [f"{a:016x}\t{b:016x}\t{bin(a ^ b).count('1')}" for a, b in sorted(with_index | own)] == want
    (tmp_path / "pq").mkdir()
    pq.write_table(pa.table({"fp": pa.array(new, pa.uint64())}), tmp_path / "pq" / "part.parquet", row_group_size=500)
    for task_fps in (None, 700):
        monkeypatch.setattr(_cluster, "INDEX_TASK_FPS", task_fps or (1 << 24))
        assert run(spark, "cluster", tmp_path / "new.txt", "--against", tmp_path / "idx", "--pairs", tmp_path / "p.tsv", "--split-bytes", 4096) == 0
        assert lines(tmp_path / "p.tsv") == want, task_fps
        assert run(spark, "cluster", tmp_path / "pq", "--format", "parquet", "--against", tmp_path / "idx", "--pairs", tmp_path / "q.tsv") == 0
        assert lines(tmp_path / "q.tsv") == want, task_fps


def test_the_driver_computes_sparks_partition_hash(spark):
    """The join's partition numbers are chosen on the driver with Spark's hash of a long (no
    job): it must be Spark's own."""
    from simdex.spark._cluster import spark_hash

    values = [0, 1, -1, 7, 1 << 40, -(1 << 63), (1 << 63) - 1, 123456789, -987654321987]
    rows = spark.createDataFrame([(v,) for v in values], "v long").selectExpr("v", "hash(v) as h").collect()
    assert [spark_hash(r.v) for r in rows] == [r.h for r in rows]


def skewed(cli, dir: pathlib.Path):
    """A skewed pair graph at k = 3, as ``fp<TAB>id`` lines in ``dir/skewed.txt``: a hub with
    5,000 leaves (its fingerprint with 3 of bits 0-47 flipped), joined (1 bit apart) to a
    second hub with 455 leaves (3 of bits 48-62), five chains of 26 (2 new bits a step: only
    neighbours are within 3), 200 small planted clusters among 3,000 others, and repeats (a
    hub, leaves, a chain's end stored twice)."""
    import itertools

    rng = random.Random(48)
    hub = rng.getrandbits(63)
    other = hub ^ (1 << 63)
    fps = [hub, other]
    fps += [hub ^ sum(1 << b for b in m) for m in rng.sample(list(itertools.combinations(range(48), 3)), 5_000)]
    fps += [other ^ sum(1 << b for b in m) for m in itertools.combinations(range(48, 63), 3)]
    for _ in range(5):
        bits, fp = rng.sample(range(64), 64), rng.getrandbits(64)
        fps.append(fp)
        for i in range(25):
            fp ^= (1 << bits[2 * i]) | (1 << bits[2 * i + 1])
            fps.append(fp)
    fps += [hub] + fps[10:20] + [fps[-1]]
    small = cli("bench", "generate", "-n", "3000", "--clusters", "200", "--cluster-size", "4", "--flips", "2", "--seed", "48")
    fps += [int(line.split("\t")[0], 16) for line in small.splitlines()]
    rng.shuffle(fps)
    (dir / "skewed.txt").write_text("".join(f"{f:016x}\t{i}\n" for i, f in enumerate(fps)))
    return dir / "skewed.txt"


def test_cluster_past_the_driver_bound_broadcasts_the_hubs(spark, cli, tmp_path, monkeypatch):
    """Large-star/small-star with hubs broadcast: on a skewed graph (a hub of 5,000 leaves
    joined to another hub, chains, small clusters), the vertices past the degree bound (lowered
    here) take their minimum from a broadcast map, a ``BroadcastHashJoin`` in Spark's physical
    plan (Spark's own broadcasts turned off, so the hint is the only one), the others the
    shuffle join; the pairs and members are ``simdex cluster``'s, as with no hub at all."""
    from simdex.spark import _cluster, _components

    whole = skewed(cli, tmp_path)
    cli("build", "--out", tmp_path / "seg.sdx", whole)
    cli("cluster", tmp_path / "seg.sdx", "-k", 3, "--pairs", tmp_path / "cli.tsv", "-o", tmp_path / "cli.jsonl")
    pairs, members = lines(tmp_path / "cli.tsv"), cli_members(tmp_path / "cli.jsonl")
    assert len(pairs) > 5_455 and len(lines(tmp_path / "cli.jsonl")) > 200
    monkeypatch.setattr(_components, "HUB_DEGREE", 300)
    old = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        found = _cluster.cluster(spark, [str(whole)], "fingerprints", 3, str(tmp_path / "p.tsv"), str(tmp_path / "c.tsv"), driver_pairs=1000)
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", old)
    assert not found.on_driver
    assert lines(tmp_path / "p.tsv") == pairs
    assert sorted(lines(tmp_path / "c.tsv")) == members
    assert found.clusters == len(lines(tmp_path / "cli.jsonl")) and found.members == len(members)
    r = found.components
    # both hubs in the first round (5,001 and 456 rows), then the stars' centres; each round
    # with hubs looks them up by a BroadcastHashJoin in both stars
    assert r.hubs >= 2 and r.hub_rows >= 5_001 + 456, r
    assert 2 <= r.broadcast_joins <= 2 * r.rounds, r
