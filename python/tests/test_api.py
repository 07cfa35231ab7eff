"""The Python API against the Rust CLI's answers and brute force."""

import os
import random

import numpy as np
import pytest

import simdex
from conftest import PAGES


def near(rng, fp, bits):
    for b in rng.sample(range(64), bits):
        fp ^= 1 << b
    return fp


def brute(pairs, q, k):
    return sorted(((fp, bin(fp ^ q).count("1"), i) for fp, i in pairs if bin(fp ^ q).count("1") <= k), key=lambda m: (m[1], m[0], m[2]))


@pytest.fixture
def stored():
    rng = random.Random(7)
    fps = [rng.getrandbits(64) for _ in range(3000)]
    fps += [near(rng, fps[i], rng.randint(0, 4)) for i in range(500)]
    ids = list(range(1, len(fps) + 1))
    return rng, list(zip(fps, ids))


def test_queries_equal_the_cli_and_brute_force(tmp_path, cli, stored):
    rng, pairs = stored
    path = tmp_path / "idx"
    with simdex.Index(path, k=3) as idx:
        assert idx.insert_many(np.array([p[0] for p in pairs], dtype=np.uint64), np.array([p[1] for p in pairs], dtype=np.uint64)) == len(pairs)
        idx.flush()
        idx.insert(pairs[0][0] ^ 0b11, 99999)
    pairs.append((pairs[0][0] ^ 0b11, 99999))
    queries = [near(rng, pairs[rng.randrange(len(pairs))][0], rng.randint(0, 4)) for _ in range(300)]
    queries += [rng.getrandbits(64) for _ in range(50)]
    out = cli("query", path, "-k", "3", *[f"{q:016x}" for q in queries])
    by_cli = {}
    for line in out.splitlines():
        q, m, d, i = line.split("\t")
        by_cli.setdefault(int(q, 16), []).append((int(m, 16), int(d), int(i)))
    with simdex.Index(path, read_only=True) as idx:
        for q in queries:
            got = idx.query(q)
            assert got == brute(pairs, q, 3)
            assert sorted(got) == sorted(by_cli.get(q, []))
            assert idx.query(q, k=1) == brute(pairs, q, 1)
        assert sorted(idx.live_entries()) == sorted(pairs)


def test_find_or_insert_is_check_then_add(tmp_path):
    with simdex.Index(tmp_path / "idx", durability="sync") as idx:
        assert idx.find_or_insert(0xFF00, 1) == []
        assert idx.find_or_insert(0xFF01, 2) == [(0xFF00, 1, 1)]
        assert idx.find_or_insert(0xFF0F, 3, k=1) == []
        assert idx.query(0xFF0F, k=0) == [(0xFF0F, 0, 3)]
        idx.delete(0xFF00, 1)
        assert idx.query(0xFF00, k=0) == []
        assert idx.stats()["last_seq"] == 3


def test_insert_many_accepts_sequences_and_assigns_sequence_numbers(tmp_path):
    with simdex.Index(tmp_path / "idx") as idx:
        idx.insert_many([5, 6, 2**64 - 1])
        assert idx.live_entries() == [(5, 1), (6, 2), (2**64 - 1, 3)]
        with pytest.raises(ValueError):
            idx.insert_many([1, 2], [1])
        with pytest.raises(ValueError):
            idx.insert_many([-1])
        with pytest.raises(ValueError):
            idx.insert_many(np.array([[1, 2]], dtype=np.uint64))
        with pytest.raises(ValueError):
            idx.insert_many(np.array([1.5]))


def test_fingerprinter_equals_the_cli(tmp_path, cli):
    files = sorted(PAGES.iterdir())[:40]
    out = cli("fingerprint", *files)
    want = {}
    for line in out.splitlines():
        name, hexfp = line.rsplit("\t", 1)
        want[os.path.basename(name)] = int(hexfp, 16)
    fp = simdex.Fingerprinter()
    for f in files:
        data = f.read_bytes()
        got = fp.fingerprint_html(data) if f.suffix == ".html" else fp.fingerprint_text(data.decode("utf-8", "replace"))
        assert got == want[f.name], f


def test_documents_use_the_recipe_dedup_pinned(tmp_path, cli):
    """dedup --index learns an IDF table and pins it; Python fingerprints with it."""
    path = tmp_path / "idx"
    cli("dedup", PAGES, "--index", path)
    with simdex.Index(path) as idx:
        assert idx.recipe is not None and "idf=-" not in idx.recipe
        stored = dict((i, fp) for fp, i in idx.live_entries())
        checked = 0
        for f in sorted(PAGES.iterdir()):
            i = simdex.doc_id(str(f))
            if i not in stored:
                continue
            html = f.suffix == ".html"
            assert idx.fingerprint_document(f.read_bytes(), html=html) == stored[i], f
            checked += 1
        assert checked > 300
        # the same page again is found at distance 0, and not stored twice
        page = sorted(PAGES.glob("*.html"))[0]
        fp, matches, words = idx.find_or_insert_document(page.read_bytes(), 12345)
        assert words > 0 and (fp, 0, simdex.doc_id(str(page)), 1.0) in matches
        assert idx.query(fp, k=0) == [(fp, 0, simdex.doc_id(str(page)))]


def test_document_fingerprints_are_the_same_in_every_process(tmp_path):
    page = b"<html><body><p>" + b" ".join(b"word%d" % i for i in range(200)) + b"</p></body></html>"
    with simdex.Index(tmp_path / "idx") as idx:
        fp = idx.insert_document(page, 1)
        assert idx.recipe.startswith("simdex-fp/2 features=w2")
        assert fp == simdex.Fingerprinter().fingerprint_html(page)
    with simdex.Index(tmp_path / "idx") as idx:
        # a match is (fingerprint, distance, doc_id, similarity): the same page's sketch is equal
        assert idx.find_or_insert_document(page, 2) == (fp, [(fp, 0, 1, 1.0)], 200)
        assert idx.find_or_insert_document(page.decode(), 3, html=True)[1] == [simdex.DocumentMatch(fp, 0, 1, 1.0)]


def test_errors_map_to_exceptions(tmp_path):
    path = tmp_path / "idx"
    idx = simdex.Index(path)
    with pytest.raises(simdex.LockedError, match="locked by another writer"):
        simdex.Index(path)
    with pytest.raises(simdex.EmptyDocumentError, match="empty"):
        idx.insert_document("two words", 1)
    with pytest.raises(simdex.EmptyDocumentError):
        idx.find_or_insert_document(b"<p>five words are here now</p>", 1, min_words=20)
    assert idx.live_entries() == []
    with pytest.raises(ValueError, match="k = 9"):
        idx.query(1, k=9)
    with pytest.raises(TypeError):
        idx.insert_document(12, 1)
    with pytest.raises(OverflowError):
        idx.insert(-1, 1)
    idx.close()
    idx.close()
    assert idx.closed
    with pytest.raises(ValueError, match="closed"):
        idx.query(1)
    with pytest.raises(ValueError, match="durability"):
        simdex.Index(path, durability="sometimes")
    with pytest.raises(simdex.Error, match="no simdex index"):
        simdex.Index(tmp_path / "none", read_only=True)
    # a damaged recipe is corruption, reported at open
    with simdex.Index(path) as idx:
        idx.insert_document(" ".join(f"w{i}" for i in range(30)), 1)
    recipe = path / "RECIPE"
    data = bytearray(recipe.read_bytes())
    data[20] ^= 1
    recipe.write_bytes(bytes(data))
    with pytest.raises(simdex.CorruptError, match="RECIPE"):
        simdex.Index(path)
    assert issubclass(simdex.CorruptError, simdex.Error) and issubclass(simdex.LockedError, simdex.Error)


def test_segment_is_read_only_and_answers_as_the_cli(tmp_path, cli, stored):
    rng, pairs = stored
    src = tmp_path / "fps.txt"
    src.write_text("".join(f"{fp:016x}\t{i}\n" for fp, i in pairs))
    seg = tmp_path / "s.sdx"
    cli("build", "--out", seg, src)
    s = simdex.Segment(seg)
    assert len(s) == len(pairs)
    for _ in range(100):
        q = near(rng, pairs[rng.randrange(len(pairs))][0], 2)
        assert s.query(q, k=3) == brute(pairs, q, 3)
    with pytest.raises(simdex.Error):
        simdex.Segment(src)


def test_the_gil_is_released_while_rust_works(tmp_path):
    import threading

    with simdex.Index(tmp_path / "idx", durability="nosync") as idx:
        fps = np.random.default_rng(3).integers(0, 2**64, size=2_000_000, dtype=np.uint64)
        t = threading.Thread(target=idx.insert_many, args=(fps,))
        import time

        start = last = time.perf_counter()
        gap = 0.0
        t.start()
        while t.is_alive():
            now = time.perf_counter()
            gap, last = max(gap, now - last), now
        t.join()
        lifetime = time.perf_counter() - start
        # a call holding the GIL would have kept this thread still for most of the insert
        assert lifetime > 0.1 and gap < 0.3 * lifetime, (gap, lifetime)
        assert idx.stats()["last_seq"] == 2_000_000


def _shingles(text):
    words = text.lower().split()
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def _planted_pair(tmp_path, vocab, words, variant, wanted, seeds):
    """The first (text, variant text, Jaccard of word 3-shingles, fingerprint distance) over
    seeds 0.. whose Jaccard and distance satisfy ``wanted``: a random text of ``words`` words
    from ``vocab`` and ``variant(rng, words)`` of it."""
    with simdex.Index(tmp_path / "probe", sketches=False) as probe:
        for seed in range(seeds):
            rng = random.Random(seed)
            a = [rng.choice(vocab) for _ in range(words)]
            ta, tb = " ".join(a), " ".join(variant(rng, a))
            sa, sb = _shingles(ta), _shingles(tb)
            jaccard = len(sa & sb) / len(sa | sb)
            distance = bin(probe.fingerprint_document(ta) ^ probe.fingerprint_document(tb)).count("1")
            if wanted(jaccard, distance):
                return ta, tb, jaccard, distance
    pytest.fail(f"no seed of {seeds} gives a pair as wanted")


def test_an_index_with_sketches_confirms_near_duplicates_by_resemblance(tmp_path):
    """A document within k of a stored one by fingerprint but far from it by exact Jaccard
    (the oracle: word 3-shingle sets computed here) is a match by fingerprint alone, and
    not once confirmed by the stored sketch; the same document again is a match either way."""
    vocab = [f"w{i}" for i in range(2000)]

    def variant(rng, a):
        b = list(a)
        for i in rng.sample(range(400), 20):
            b[i] = rng.choice(vocab)
        return b

    ta, tb, jaccard, distance = _planted_pair(tmp_path, vocab, 400, variant, lambda j, d: j < 0.8 and d <= 8, 300)
    with simdex.Index(tmp_path / "plain", sketches=False) as plain, simdex.Index(tmp_path / "sk") as sk:
        assert sk.sketches and not plain.sketches
        for idx in (plain, sk):
            idx.insert_document(ta, 1)
        _, found, _ = plain.find_or_insert_document(tb, 2, k=8, confirm=False)
        assert [m[2] for m in found] == [1], "fingerprints alone call it a near-duplicate"
        with pytest.warns(DeprecationWarning, match=r"Index.find_or_insert_document\(verify=...\) is deprecated: use confirm=..."):
            _, found, _ = sk.find_or_insert_document(tb, 2, k=8, verify=False)
        assert [m[2] for m in found] == [1], "verify=False (deprecated) is fingerprints alone"
        _, found, _ = sk.find_or_insert_document(tb, 2, k=8, confirm=False)
        assert [m[2] for m in found] == [1], "confirm=False (verify's new name) is fingerprints alone"
        _, found, _ = sk.find_or_insert_document(tb, 2, k=8)
        assert found == [], f"confirmed: Jaccard {jaccard:.3f} is below 0.9, so it is new (and stored)"
        _, found, _ = sk.find_or_insert_document(ta, 3, k=8)
        assert sorted(m[2] for m in found) == [1], "the same page again is confirmed"
    # Sketches are fixed at creation: reopening with sketches=False keeps them.
    with simdex.Index(tmp_path / "sk", sketches=False) as again:
        assert again.sketches


def test_document_calls_default_to_dedups_decision(tmp_path):
    """By default a document call makes `simdex dedup`'s decision (k = 8 confirmed by sketch at
    0.90): a page a few words from a stored one, 4 to 8 bits away and at Jaccard >= 0.9 of word
    3-shingles (the oracle, computed here), is caught; at k = 3 only as a band candidate (its
    sketch shares a band), and fingerprints alone let it through; an unrelated page is
    stored, not dropped. On an index without sketches fingerprints alone
    decide, within at most 3 unless confirm=False."""
    vocab = [f"w{i}" for i in range(3000)]

    def variant(rng, a):
        # a changed date line and a few words replaced, as sites do
        b = ["updated", f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"] + a
        for i in rng.sample(range(len(b)), 3):
            b[i] = rng.choice(vocab)
        return b

    ta, tb, jaccard, distance = _planted_pair(tmp_path, vocab, 600, variant, lambda j, d: j >= 0.9 and 4 <= d <= 8, 2000)
    other = " ".join(random.Random(99).choice(vocab) for _ in range(600))
    with simdex.Index(tmp_path / "default") as idx, simdex.Index(tmp_path / "k3") as k3, simdex.Index(tmp_path / "plain", sketches=False) as plain:
        for i in (idx, k3, plain):
            i.insert_document(ta, 1)
        _, found, _ = idx.find_or_insert_document(tb, 2)
        assert [m.doc_id for m in found] == [1], f"distance {distance}, Jaccard {jaccard:.3f}: caught by default"
        assert found[0].similarity is not None and found[0].similarity >= 0.9
        # beyond k = 3 the pair is an answer only as a band candidate: its sketch shares one
        # of the 16 bands with the page's (certain when they differ in at most 15 of 512
        # bits: an estimate >= 1 - 30/512) and the estimate clears 0.90 by the band margin
        similarity = found[0].similarity
        _, found, _ = k3.find_or_insert_document(tb, 2, k=3)
        assert similarity >= 1 - 30 / 512, f"the planted pair is a sure band candidate ({similarity})"
        assert [(m.doc_id, m.distance) for m in found] == [(1, distance)], f"distance {distance}: a band candidate beyond k = 3"
        _, found, _ = k3.find_or_insert_document(tb, 2, k=3, confirm=False)
        assert found == [], f"distance {distance} is beyond k = 3 for fingerprints alone"
        _, found, _ = idx.find_or_insert_document(other, 3)
        assert found == [], "an unrelated page is new"
        assert idx.query(idx.fingerprint_document(other), k=0) != [], "and stored"
        _, found, _ = plain.find_or_insert_document(tb, 2)
        assert found == [], f"without sketches fingerprints alone decide within 3 ({distance} bits)"
        _, found, _ = plain.find_or_insert_document(tb, 4, k=8, confirm=False)
        assert sorted(m.doc_id for m in found) == [1, 2], "confirm=False: fingerprints alone within 8 (ta, and tb stored above)"


def test_the_old_add_names_still_work_and_warn(tmp_path):
    """add, add_many and add_document are the deprecated names of insert, insert_many and
    insert_document: the same calls, with a DeprecationWarning."""
    with simdex.Index(str(tmp_path / "i")) as idx:
        with pytest.warns(DeprecationWarning, match="Index.insert_many"):
            assert idx.add_many([1, 2], [10, 20]) == 2
        with pytest.warns(DeprecationWarning, match="Index.insert"):
            idx.add(3, 30)
        with pytest.warns(DeprecationWarning, match="Index.insert_document"):
            fp = idx.add_document("the quick brown fox jumps over the lazy dog again and again", 40)
        assert [m[2] for m in idx.query(1, k=0)] == [10]
        assert [m[2] for m in idx.query(3, k=0)] == [30]
        assert [m[2] for m in idx.query(fp, k=0)] == [40]


def test_document_query_is_the_decision_the_document_calls_make(tmp_path):
    """simdex.DocumentQuery is the library's rule (the README's: k = 8 confirmed by sketch at
    0.90, fingerprints alone within 3): its check refuses exactly what the document calls
    refuse, with their message, and its decision is what they do on an index with and
    without sketches (the oracle: a planted pair at a known distance and exact Jaccard)."""
    q = simdex.DocumentQuery()
    assert (q.k, q.unconfirmed_k, q.min_similarity, q.confirm, q.min_words) == (8, 3, 0.9, True, 0)
    assert q.decision(True) == (8, 0.9) and q.decision(False) == (3, None)
    assert simdex.DocumentQuery(confirm=False).k == 3 and simdex.DocumentQuery(confirm=False).decision(True) == (3, None)
    assert simdex.DocumentQuery(k=5, confirm=False).decision(False) == (5, None)
    assert simdex.DocumentQuery(k=5).decision(False) == (3, None), "without sketches fingerprints alone decide within at most 3"
    assert simdex.DocumentQuery(k=2, min_similarity=0.5).decision(True) == (2, 0.5)
    assert simdex.DocumentQuery(k=4) == simdex.DocumentQuery(k=4) and "k=4" in repr(simdex.DocumentQuery(k=4))
    doc = " ".join(f"w{i}" for i in range(40))
    with simdex.Index(tmp_path / "i") as idx:
        for k in range(simdex.MAX_K + 3):
            for confirm in (True, False):
                query = simdex.DocumentQuery(k=k, confirm=confirm)
                try:
                    query.check()
                    refused = None
                except ValueError as e:
                    refused = str(e)
                try:
                    idx.find_or_insert_document(doc, 1, k=k, confirm=confirm)
                    call = None
                except ValueError as e:
                    call = str(e)
                assert (refused is None) == (call is None) == (k <= 8), (k, refused, call)
                if refused:
                    assert call.endswith(refused) and refused.startswith(f"k = {k}:"), (refused, call)
    for bad in (1.5, -0.1):
        with pytest.raises(ValueError, match="min_similarity"):
            simdex.DocumentQuery(min_similarity=bad).check()
    with pytest.raises(ValueError, match="k = -1: a distance in bits is not negative"):
        simdex.DocumentQuery(k=-1)


def test_k_is_a_distance_and_an_index_keeps_its_own(tmp_path):
    """A negative k is a ValueError (not an OverflowError), and nothing is created; an
    existing index opened with another k is refused with a message naming both (k=None, the
    default, opens it with its own), as another expiry window is."""
    with pytest.raises(ValueError, match="k = -1: a distance in bits is not negative"):
        simdex.Index(tmp_path / "neg", k=-1)
    assert not (tmp_path / "neg").exists()
    with simdex.Index(tmp_path / "five", k=5) as idx:
        assert idx.k == 5
        with pytest.raises(ValueError, match="k = -2"):
            idx.query(1, k=-2)
        with pytest.raises(ValueError, match="k = -2"):
            idx.find_or_insert_document("some words " * 20, 1, k=-2)
    with pytest.raises(ValueError, match=r"k = 3: the index .*five was created with k = 5, which it keeps"):
        simdex.Index(tmp_path / "five", k=3)
    with simdex.Index(tmp_path / "five") as idx:
        assert idx.k == 5, "k=None opens an index with its own (and the refused open left no lock behind)"
    with simdex.Index(tmp_path / "five", k=5, read_only=True) as idx:
        assert idx.k == 5
    with simdex.Index(tmp_path / "new") as idx:
        assert idx.k == 3, "a new index gets the library's default design"


def test_import_from_the_source_folder_says_where_to_stand():
    """Inside python/, where `cd python && maturin build` used to leave a reader, `import
    simdex` finds the source folder, which has no extension: the error says so and where to
    run Python instead (the README's build commands now run from the repository root)."""
    import pathlib
    import subprocess
    import sys

    here = pathlib.Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-c", "import simdex"], cwd=here, capture_output=True, text=True)
    assert p.returncode != 0 and "imported from its source folder" in p.stderr and "outside python/" in p.stderr, p.stderr[-2000:]
    p = subprocess.run([sys.executable, "-c", "import simdex; print(simdex.DocumentQuery().k)"], cwd=here.parent, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip().isdigit(), p.stderr[-2000:]
