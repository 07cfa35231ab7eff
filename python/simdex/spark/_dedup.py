"""``dedup``: documents in, near-duplicate pairs, clusters and the kept documents out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .._simdex import CorpusRecipe, corpus_options
from . import _pipeline as P
from ._cluster import fingerprint_pairs
from ._components import components_within


@dataclass
class Dedup:
    """What ``dedup`` found. The DataFrames are lazy and persisted where reused; nothing of the
    corpus is held by the driver.

    * ``pairs``: ``id_a, id_b, distance, similarity`` (a string, as ``simdex dedup --pairs``
      writes it) and ``ord_a, ord_b`` (the documents' places in the corpus), every pair of
      near-duplicate documents, exact copies included (distance 0, similarity 1.0000);
    * ``clusters``: ``id, cluster`` for every document in a cluster of two or more (exact
      copies and near-duplicates, transitively), ``cluster`` the id of its first document in
      corpus order;
    * ``kept``: ``id, text`` of the deduplicated corpus: every document that is alone, and the
      first document (corpus order) of every cluster;
    * ``skipped``: ``id, reason`` of the records that are not documents (a bad JSON line) and of
      the documents that got no fingerprint (too few words, unreadable text): counted and
      reported, never failing the job;
    * ``fingerprinted``: ``ord, fp, short, error, sketch`` of every representative (one per
      distinct content) with a text;
    * ``new_documents``: ``ord, id, fp, sketch`` of every document with a fingerprint;
    * ``recipe``: the pinned recipe (``recipe.recipe`` is its descriptor, ``recipe.idf_table()``
      the learned table's bytes, which ``simdex dedup --idf FILE`` reads).
    """

    pairs: object
    clusters: object
    kept: object
    skipped: object
    recipe: CorpusRecipe
    k: int
    threshold: Optional[float]
    documents: object
    links: object
    new_documents: object
    fingerprinted: object


def dedup(spark, docs, k: Optional[int] = None, confirm: bool = True, threshold: Optional[float] = None, preset: str = "pages", recipe: Optional[CorpusRecipe] = None) -> Dedup:
    """``simdex dedup``'s answer for ``docs`` (a DataFrame from ``read_files`` or
    ``read_dataframe``): the library's corpus options decide k (8 confirmed by sketch at
    ``threshold``, default 0.9; 3 with ``confirm=False``; at most 8, one message for every
    front); the IDF table is learned from the corpus unless ``recipe`` is given (one already
    pinned, e.g. an index's)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    sc = spark.sparkContext
    k, threshold = corpus_options(k, confirm, threshold)
    level = StorageLevel.MEMORY_AND_DISK
    docs = docs.persist(level)
    good = docs.where("content is not null")
    with P.step(sc, "exact duplicates (group by content hash)"):
        # min and count combine map-side: a page repeated 100,000 times is one row per task
        groups = good.groupBy("content").agg(F.min("ord").alias("rep"), F.count(F.lit(1)).alias("size"))
        members = good.join(groups, "content").select("ord", "id", "content", "rep", "size").persist(level)
        reps = good.join(groups.select(F.col("rep").alias("ord"), "size"), "ord").select("ord", "text", "size").where("text is not null").persist(level)
    if recipe is None:
        recipe = CorpusRecipe(preset)
        with P.step(sc, "learn IDF (document frequencies)"):
            readable = good.where("text is not null").count()
            recipe = P.learn_idf(spark, reps, readable, recipe)
    with P.step(sc, "fingerprint and sketch"):
        fped = P.fingerprint(spark, reps, recipe, confirm).persist(level)
    with_fp = fped.where("fp is not null").select("ord", "fp")
    with P.step(sc, "candidate pairs (block-split join)"):
        fp_pairs = fingerprint_pairs(spark, with_fp, k, fped.count())
        ra, rb = with_fp.toDF("a", "fa"), with_fp.toDF("b", "fb")
        near = fp_pairs.join(ra, "fa").join(rb, "fb").select("a", "b", F.bit_count(F.col("fa").bitwiseXOR(F.col("fb"))).cast("int").alias("distance"))
        same = ra.join(rb, (F.col("fa") == F.col("fb")) & (F.col("a") < F.col("b"))).select("a", "b", F.lit(0).alias("distance"))
        candidates = near.union(same)
    with P.step(sc, "confirm by sketch"):
        links = P.confirm(spark, candidates, fped, threshold).persist(level)
    with P.step(sc, "clusters (union-find on the driver, or large-star/small-star)"):
        comp = components_within(spark, links)
        cl = members.join(comp.withColumnRenamed("vertex", "rep"), "rep", "left").select("ord", "id", F.coalesce("component", "rep").alias("cluster_ord"))
        sizes = cl.groupBy("cluster_ord").agg(F.count(F.lit(1)).alias("cluster_size"))
        cl = cl.join(sizes, "cluster_ord").persist(level)
    names = members.select(F.col("ord").alias("cluster_ord"), F.col("id").alias("cluster"))
    clusters = cl.where("cluster_size > 1").join(names, "cluster_ord").select("id", "cluster", "ord", "cluster_ord")
    kept = cl.where("ord = cluster_ord").join(good.select("ord", "text"), "ord").select("id", "text", "ord")
    x = members.select(F.col("ord").alias("ord_a"), F.col("id").alias("id_a"), F.col("rep").alias("a"), F.col("content").alias("ca"))
    y = members.select(F.col("ord").alias("ord_b"), F.col("id").alias("id_b"), F.col("rep").alias("b"), F.col("content").alias("cb"))
    columns = ["id_a", "id_b", "distance", "similarity", "ord_a", "ord_b"]
    exact = x.join(y, (F.col("ca") == F.col("cb")) & (F.col("ord_a") < F.col("ord_b"))).select("id_a", "id_b", F.lit(0).alias("distance"), F.lit("1.0000").alias("similarity"), "ord_a", "ord_b")
    expanded = links.join(x, "a").join(y, "b").select("id_a", "id_b", "distance", F.col("similarity_text").alias("similarity"), "ord_a", "ord_b")
    pairs = exact.select(*columns).union(expanded.select(*columns))
    skipped = docs.where("content is null").select("id", F.col("error").alias("reason")).union(
        members.join(fped.where("fp is null").select(F.col("ord").alias("rep"), "error"), "rep").select("id", F.col("error").alias("reason"))
    ).union(good.where("text is null").select("id", F.col("error").alias("reason")))
    new_documents = members.join(fped.where("fp is not null").select(F.col("ord").alias("rep"), "fp", "sketch"), "rep").select("ord", "id", "fp", "sketch")
    return Dedup(fingerprinted=fped, new_documents=new_documents, pairs=pairs, clusters=clusters, kept=kept, skipped=skipped, recipe=recipe, k=k, threshold=threshold, documents=good, links=links)
