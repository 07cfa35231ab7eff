"""Corpus dedup on Spark: the paper's batch mode (its MapReduce section) as a Spark pipeline,
with the simdex library in every executor. ``pip install simdex[spark]`` adds pyspark.

From the command line (local mode, or ``--master spark://HOST:7077``; or ``spark-submit``
this package's ``__main__``), documents or bare fingerprints::

    python -m simdex.spark dedup corpus.jsonl --format jsonl --pairs pairs.tsv --clusters clusters.tsv
    python -m simdex.spark cluster fingerprints.txt --pairs pairs.tsv --clusters clusters.tsv

``cluster`` (``_cluster``) answers as ``simdex cluster`` does: the pairs within ``k`` of
fingerprints (``FINGERPRINT_HEX[<TAB>ID]`` lines, ``simdex insert --binary [--with-ids]``'s
little-endian u64 records with ``--format binary [--with-ids]``, or Parquet with a 64-bit
``fp`` column) and
their clusters, by the library's block-split join (see ``_cluster`` for its steps).

From Python::

    from simdex.spark import read_files, dedup
    found = dedup(spark, read_files(spark, ["corpus.jsonl"]), pairs="pairs.tsv", clusters="clusters.tsv")
    print(found.pairs, found.clusters)

The answers are ``simdex dedup``'s on the same input, found the same way, in at most three
Spark jobs (``_dedup`` has the details):

1. **read**: JSON lines (``id`` and ``text`` or ``html``), text or HTML files, Parquet or any
   DataFrame with ``id`` and ``text``/``html``, read by the library in the executors (a
   file's byte range or a run of files per task); every record gets the CLI's content hash
   and text. A record that is not a document (a bad JSON line) is counted and reported
   (``skipped``), never failing the job (``--fail-on-bad`` asks for that).
2. **learn IDF** (one job): the library's distinct features of every document, summed per
   feature by Spark in parts (ranges of feature hashes) that reduce tasks write as the
   table's part files with the library's weights; every process maps them (the table never
   passes through the driver): the recipe string is printed and written beside the output
   with the table (``OUT.recipe``, ``OUT.idf``: ``simdex dedup --idf OUT.idf`` gives the same
   fingerprints on one machine).
3. **fingerprint, scatter, join, confirm** (one job): in one pass the library fingerprints
   and sketches every document and sends it, with its sketch and id, to one partition of each
   of the block-split design's ``k + 1`` groups (``BlockSplit``, as ``cluster`` runs it); each
   partition forms the exact groups (by content hash: a page repeated 100,000 times has one
   representative, and its copies travel to one group only, without their sketch), joins the
   representatives' fingerprints and confirms each pair within k by the two sketches it
   holds. The driver takes the links and the members of clusters (the library's union-find)
   and writes the pairs and clusters files.
4. **kept** (one job, with ``--kept``): the documents read again, those the deduplicated
   corpus keeps written by the executors.

No step makes a Python object of a document, a feature, a fingerprint or a sketch: the
executors hand Arrow buffers to the library.

``dedup(..., index=IndexCheck(DIR, ...))`` (``--index DIR``) also checks every document
against an existing index and can insert the corpus into it (``--insert``). See
``_incremental`` for how.
"""

from ._dedup import Dedup, dedup
from ._read import Corpus, InputError, read_dataframe, read_files

__all__ = ["dedup", "Dedup", "Corpus", "read_files", "read_dataframe", "InputError", "dedup_against_index"]


def dedup_against_index(spark, corpus, index: str, matches=None, insert: bool = False, **options):
    """``dedup`` of ``corpus`` with the index's pinned recipe (learned from the corpus when it
    has none), every document also checked against the index: the matches written to
    ``matches`` (``id, index_doc_id, fingerprint, distance, similarity`` a line) and, with
    ``insert``, the corpus inserted afterwards. Returns ``(found, check)``: ``check.matches``
    and ``check.inserted`` count them."""
    from .._simdex import IndexReader
    from ._incremental import IndexCheck

    check = IndexCheck(index, matches, insert)
    found = dedup(spark, corpus, recipe=IndexReader(index).recipe(), index=check, **options)
    return found, check
