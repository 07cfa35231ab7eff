"""The batch calls (issue 20, item 4) against brute force and against the same calls made one
by one on a second index; the installed wheel (item 5)."""

import os
import pathlib
import random

import numpy as np
import pytest

import simdex
from conftest import ROOT


def popcount(x):
    return bin(x).count("1")


def brute(pairs, q, k):
    """The oracle: every stored (fp, id) within k of q, sorted as the index sorts."""
    return sorted(((fp, popcount(fp ^ q), i) for fp, i in pairs if popcount(fp ^ q) <= k), key=lambda m: (m[1], m[0], m[2]))


def near(rng, fp, bits):
    for b in rng.sample(range(64), bits):
        fp ^= 1 << b
    return fp


def test_the_package_under_test_is_the_installed_wheel():
    venv = os.environ.get("SIMDEX_TEST_INSTALLED")
    if not venv:
        pytest.skip("python/test.sh sets SIMDEX_TEST_INSTALLED to the virtualenv the wheel was installed into")
    where = pathlib.Path(simdex.__file__).resolve()
    assert pathlib.Path(venv).resolve() in where.parents and "site-packages" in where.parts, where
    assert (ROOT / "python") not in where.parents
    assert pathlib.Path(simdex._simdex.__file__).name.endswith(".abi3.so"), simdex._simdex.__file__


@pytest.fixture
def live(tmp_path):
    """An index holding segments, deletes and unflushed pairs; the pairs it holds."""
    rng = random.Random(20)
    fps = [rng.getrandbits(64) for _ in range(3000)]
    fps += [near(rng, fps[i], rng.randint(0, 6)) for i in range(600)]
    pairs = list(zip(fps, range(1, len(fps) + 1)))
    idx = simdex.Index(tmp_path / "idx", k=3)
    idx.insert_many(np.array([p[0] for p in pairs[:2500]], dtype=np.uint64), np.array([p[1] for p in pairs[:2500]], dtype=np.uint64))
    idx.flush()
    idx.insert_many([p[0] for p in pairs[2500:]], [p[1] for p in pairs[2500:]])
    for fp, i in pairs[100:130] + pairs[3000:3010]:
        idx.delete(fp, i)
    gone = set(pairs[100:130] + pairs[3000:3010])
    yield rng, idx, [p for p in pairs if p not in gone]
    idx.close()


def queries_for(rng, pairs, n):
    qs = [near(rng, pairs[rng.randrange(len(pairs))][0], rng.randint(0, 7)) for _ in range(n // 2)]
    qs += [rng.getrandbits(64) for _ in range(n - len(qs))]
    qs += qs[:5]  # the same query twice in one batch
    rng.shuffle(qs)
    return qs


# 120 queries against 3,600 stored take one probe per item; 2,000 take the merge join (a
# batch of at least 1,024 queries and one per 1,024 stored entries or more)
@pytest.mark.parametrize("n", [120, 2000])
@pytest.mark.parametrize("k", [3, 6])
def test_query_many_equals_brute_force(live, n, k):
    rng, idx, pairs = live
    qs = queries_for(rng, pairs, n)
    want = [brute(pairs, q, k) for q in qs]
    assert sum(map(len, want)) > n // 4, "the batch has matches to find"
    got = idx.query_many(np.array(qs, dtype=np.uint64), k=k)
    assert got == want
    assert idx.query_many(qs, k=k) == want, "a list of ints answers as an array does"
    assert [idx.query(q, k=k) for q in qs] == want


@pytest.mark.parametrize("n", [120, 2000])
def test_query_many_columns_equal_the_lists(live, n):
    rng, idx, pairs = live
    qs = queries_for(rng, pairs, n)
    cols = idx.query_many(np.array(qs, dtype=np.uint64), columnar=True)
    assert isinstance(cols, simdex.MatchColumns)
    assert (cols.query_index.dtype, cols.fingerprint.dtype, cols.doc_id.dtype, cols.distance.dtype) == (np.int64, np.uint64, np.uint64, np.uint32)
    rows = [(int(i), int(f), int(d), int(j)) for i, f, j, d in zip(cols.query_index, cols.fingerprint, cols.doc_id, cols.distance)]
    want = [(item, fp, d, i) for item, q in enumerate(qs) for fp, d, i in brute(pairs, q, idx.k)]
    assert rows == want and len(rows) > 0
    assert np.array_equal(cols.distance, [popcount(int(f) ^ qs[i]) for i, f in zip(cols.query_index, cols.fingerprint)])
    cols.distance[:1] = 0  # writable arrays, not views of immutable bytes


def test_query_many_of_nothing_and_bad_input(live):
    _, idx, _ = live
    assert idx.query_many([]) == []
    assert len(idx.query_many(np.array([], dtype=np.uint64), columnar=True).fingerprint) == 0
    with pytest.raises(ValueError):
        idx.query_many([-1])
    with pytest.raises(ValueError):
        idx.query_many(np.zeros((2, 2), dtype=np.uint64))
    with pytest.raises(ValueError):
        idx.query_many([1, 2], k=9)  # above 8 and the design: as query() refuses it


def simulate_find_or_insert(stored, fps, ids, k):
    """The oracle of one-by-one find_or_insert: matches among what is stored so far, else store."""
    out = []
    for fp, i in zip(fps, ids):
        found = brute(stored, fp, k)
        if not found:
            stored.append((fp, i))
        out.append(found)
    return out


@pytest.mark.parametrize("k", [None, 5])
def test_find_or_insert_many_behaves_as_one_by_one(tmp_path, k):
    rng = random.Random(4)
    base = [rng.getrandbits(64) for _ in range(1500)]
    fresh = [rng.getrandbits(64) for _ in range(300)]
    # near copies of stored and of earlier items of the same batch, and exact repeats
    batch = fresh + [near(rng, rng.choice(base), rng.randint(0, 6)) for _ in range(300)]
    batch += [near(rng, rng.choice(fresh), rng.randint(0, 6)) for _ in range(300)]
    batch += [fresh[0], fresh[0]]
    rng.shuffle(batch)
    new = rng.getrandbits(64)
    batch += [new, new]  # two equal new fingerprints: the first is inserted, the second matches it
    ids = list(range(10_000, 10_000 + len(batch)))
    with simdex.Index(tmp_path / "a", k=3) as a, simdex.Index(tmp_path / "b", k=3) as b:
        for idx in (a, b):
            idx.insert_many(base, range(1, len(base) + 1))
        got = a.find_or_insert_many(np.array(batch, dtype=np.uint64), np.array(ids, dtype=np.uint64), k=k)
        one_by_one = [b.find_or_insert(fp, i, k=k) for fp, i in zip(batch, ids)]
        want = simulate_find_or_insert(list(zip(base, range(1, len(base) + 1))), batch, ids, 3 if k is None else k)
        assert got == one_by_one == want
        assert got[-2] == [] and got[-1] == [(new, 0, ids[-2])]
        assert sum(1 for g in got if g) > 300 and sum(1 for g in got if not g) > 200
        assert a.live_entries() == b.live_entries()


def test_find_or_insert_many_columns(tmp_path):
    with simdex.Index(tmp_path / "a") as a:
        cols = a.find_or_insert_many([5, 5, 0xFFFF << 40, 5 ^ 0b11], [1, 2, 3, 4], columnar=True)
        assert cols.query_index.tolist() == [1, 3] and cols.fingerprint.tolist() == [5, 5]
        assert cols.doc_id.tolist() == [1, 1] and cols.distance.tolist() == [0, 2]
        with pytest.raises(ValueError):
            a.find_or_insert_many([1, 2], [1])


def pages(rng, n, words=300):
    vocab = [f"w{i}" for i in range(3000)]
    return [" ".join(rng.choice(vocab) for _ in range(words)) for _ in range(n)]


def edited(rng, text, changes):
    words = text.split()
    for i in rng.sample(range(len(words)), changes):
        words[i] = f"edit{rng.randrange(10**6)}"
    return " ".join(words)


def shingles(text):
    words = text.lower().split()
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def jaccard(a, b):
    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb)


def test_fingerprint_documents_equals_one_by_one(tmp_path):
    rng = random.Random(9)
    docs = pages(rng, 40) + [b"<html><body><p>" + " ".join(pages(rng, 1)).encode() + b"</p></body></html>"]
    with simdex.Index(tmp_path / "idx") as idx:
        fps = idx.fingerprint_documents(docs)
        assert fps.dtype == np.uint64 and fps.tolist() == [idx.fingerprint_document(d) for d in docs]
        assert idx.fingerprint_documents(docs[:1], html=True).tolist() == [idx.fingerprint_document(docs[0], html=True)]
        assert idx.recipe is None, "fingerprinting pins no recipe"
        with pytest.raises(simdex.EmptyDocumentError, match="^document 2: "):
            idx.fingerprint_documents(docs[:2] + ["too short"])


@pytest.mark.parametrize("sketches", [True, False])
def test_find_or_insert_documents_behaves_as_one_by_one(tmp_path, sketches):
    rng = random.Random(11)
    originals = pages(rng, 30)
    docs = list(originals)
    docs += [edited(rng, rng.choice(originals), rng.randint(1, 12)) for _ in range(30)]
    docs += [originals[3], "too short", b"\x00binary" + b"x" * 100, b"<p>" + originals[5].encode() + b"</p>"]
    rng.shuffle(docs)
    ids = list(range(1, len(docs) + 1))
    with simdex.Index(tmp_path / "a", sketches=sketches) as a, simdex.Index(tmp_path / "b", sketches=sketches) as b:
        got = a.find_or_insert_documents(docs, np.array(ids, dtype=np.uint64), k=8)
        want = []
        for d, i in zip(docs, ids):
            try:
                want.append(b.find_or_insert_document(d, i, k=8))
            except (simdex.EmptyDocumentError, simdex.BinaryDocumentError) as e:
                want.append(e)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(w, Exception):
                assert type(g) is type(w) and str(g) == str(w)
            else:
                assert g == w
        assert a.live_entries() == b.live_entries() and a.recipe == b.recipe
        found = [(d, g) for d, g in zip(docs, got) if not isinstance(g, Exception) and g[1]]
        assert len(found) >= 10, "the edited copies and the repeats are found"
        for d, (fp, matches, _) in found:
            for m in matches:
                assert isinstance(m, simdex.DocumentMatch) and m.distance == popcount(fp ^ m.fingerprint)
                # beyond k = 8 only as a band candidate: confirmed by sketch
                assert m.distance <= 8 or sketches, m
                if not sketches:
                    assert m.similarity is None
                    continue
                # the estimate against the exact Jaccard of word 3-shingles (512 one-bit
                # values: standard deviation about 0.02 near 0.9)
                exact = jaccard(plain_text(d), plain_text(docs[ids.index(m.doc_id)]))
                assert m.similarity >= 0.9 and abs(m.similarity - exact) < 0.08, (m, exact)


def plain_text(doc):
    return doc if isinstance(doc, str) else doc.decode().removeprefix("<p>").removesuffix("</p>")


def test_find_or_insert_documents_with_min_words_and_bad_lengths(tmp_path):
    rng = random.Random(12)
    docs = pages(rng, 3, words=50)
    with simdex.Index(tmp_path / "a") as a:
        got = a.find_or_insert_documents(docs, [1, 2, 3], min_words=60)
        assert all(isinstance(g, simdex.EmptyDocumentError) for g in got) and a.live_entries() == []
        with pytest.raises(ValueError):
            a.find_or_insert_documents(docs, [1, 2])
    with simdex.Index(tmp_path / "b") as b:
        assert b.find_or_insert_documents([], []) == [] and b.recipe is None, "nothing to store pins nothing"


@pytest.mark.parametrize("sketches", [True, False])
def test_regression_a_binary_page_raises_binary_document_error_with_sketches_too(tmp_path, sketches):
    # with sketches the document's text is extracted apart, and the refusal used to arrive as
    # a plain simdex.Error (an io::Error from the HTML tokenizer)
    with simdex.Index(tmp_path / "a", sketches=sketches) as a:
        with pytest.raises(simdex.BinaryDocumentError):
            a.find_or_insert_document(b"\x00\x01PNG" + b"x" * 200, 1)
        assert isinstance(a.find_or_insert_documents([b"\x00\x01PNG" + b"x" * 200], [1])[0], simdex.BinaryDocumentError)
        assert a.live_entries() == []
