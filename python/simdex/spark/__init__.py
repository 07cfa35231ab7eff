"""Corpus dedup on Spark: the paper's batch mode (its MapReduce section) as a Spark pipeline,
with the simdex library in every executor. ``pip install simdex[spark]`` adds pyspark.

From the command line (local mode, or ``--master spark://HOST:7077``; or ``spark-submit``
this package's ``__main__``), documents or bare fingerprints::

    python -m simdex.spark dedup corpus.jsonl --format jsonl --pairs pairs.tsv --clusters clusters.tsv
    python -m simdex.spark cluster fingerprints.txt --pairs pairs.tsv --clusters clusters.tsv

``cluster`` (``_cluster``) answers as ``simdex cluster`` does: the pairs within ``k`` of
fingerprints (``FINGERPRINT_HEX[<TAB>ID]`` lines, or Parquet with a 64-bit ``fp`` column) and
their clusters, by the library's block-split join (see ``_cluster`` for its steps).

From Python::

    from simdex.spark import read_files, dedup
    result = dedup(spark, read_files(spark, ["corpus.jsonl"]))
    result.pairs.show()

The answers are ``simdex dedup``'s on the same input, found the same way, step by step
(each step names its Spark jobs and stages):

1. **read documents**: JSON lines (``id`` and ``text`` or ``html``), text or HTML files, Parquet
   or any DataFrame with ``id`` and ``text``/``html``; every record gets the CLI's content hash
   and text. A record that is not a document (a bad JSON line) is counted and reported
   (``skipped``), never failing the job (``--fail-on-bad`` asks for that).
2. **exact duplicates**: documents grouped by content hash; each group's first document in
   corpus order represents it. Everything after works on representatives, so a boilerplate
   page repeated 100,000 times is one row from here on (its copies are one skewed key of two
   sort-merge joins, which stream and spill, never one task's list).
3. **learn IDF**: the distinct features of every representative, weighted by its copies,
   summed per feature on the executors; the driver builds the table from the counts (one row
   per distinct feature) and pins it: the recipe string is printed and written beside the
   output with the table (``OUT.recipe``, ``OUT.idf``: ``simdex dedup --idf OUT.idf`` gives the
   same fingerprints on one machine).
4. **fingerprint and sketch** in the executors, by the library, with the broadcast recipe.
5. **candidate pairs**: the library's block-split join (``BlockSplit``, as ``cluster`` runs
   it): each distinct fingerprint sent, packed 8 bytes a value, to one partition of each of
   the design's ``k + 1`` groups, each partition joined in Rust; every pair comes out once.
6. **confirm by sketch**: pairs within k kept when the sketches estimate a resemblance of at
   least 0.90 (``simdex dedup``'s default), expanded to every pair of their exact copies.
7. **clusters**: connected components of the confirmed pairs by the library's union-find on
   the driver (up to 2^26 pairs), past it by large-star/small-star in Spark (no JVM
   package); ``cluster`` is the id of the cluster's first document in corpus order, which is
   the one ``kept`` keeps (plus every document that is alone).

Steps 3, 4 and 6 hand each Arrow batch's buffers to the library (``mapInArrow``): no
document, feature or sketch is a Python object there.

``dedup_against_index`` (``--index DIR``) also checks every document against an existing
index and can insert the corpus into it (``--insert``). See ``_incremental`` for how.
"""

from ._dedup import Dedup, dedup
from ._read import InputError, read_dataframe, read_files

__all__ = ["dedup", "Dedup", "read_files", "read_dataframe", "InputError", "dedup_against_index"]


def dedup_against_index(spark, docs, index: str, k=None, confirm: bool = True, threshold: float = 0.9):
    """``dedup`` of ``docs`` with the index's pinned recipe (learned from ``docs`` when it has
    none), plus ``matches``: every document's confirmed matches among the entries stored in
    the index (``id, index_doc_id, fingerprint, distance, similarity``). Returns
    ``(result, matches)``; ``_incremental.insert_new_documents(result, index)`` writes back."""
    from .._simdex import IndexReader
    from ._incremental import index_matches

    recipe = IndexReader(index).recipe()
    result = dedup(spark, docs, k=k, confirm=confirm, threshold=threshold, recipe=recipe)
    return result, index_matches(spark, result, index, result.k, confirm, threshold)
