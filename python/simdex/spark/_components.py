"""Connected components: on the driver by the library's union-find when the edges fit a
bound (``components_within``), else in Spark itself: large-star / small-star (Kiveris,
Lattanzi, Mirrokni, Rastogi, Vassilvitskii, "Connected Components in MapReduce and Beyond",
SoCC 2014).

Vertices are longs; every operation is a grouped minimum or a join, so no vertex's
neighbourhood is ever held in one task's memory, and a vertex with a million neighbours is
one more skewed key of a sort-merge join (which spills). Each round is checkpointed (local
checkpoints) so the plan does not grow with the rounds.
"""

from __future__ import annotations


def components(edges, src: str = "a", dst: str = "b", max_rounds: int = 64):
    """``(vertex, component)`` for every vertex of an edge of ``edges``, the component being the
    smallest vertex connected to it (itself included)."""
    from pyspark.sql import functions as F

    e = edges.select(F.greatest(src, dst).alias("u"), F.least(src, dst).alias("v")).where("u != v").distinct()
    e = e.localCheckpoint()
    for _ in range(max_rounds):
        # large-star: every neighbour larger than u links to the smallest of u's neighbourhood
        both = e.union(e.select(F.col("v").alias("u"), F.col("u").alias("v")))
        m = both.groupBy("u").agg(F.least(F.min("v"), F.col("u")).alias("m"))
        large = both.join(m, "u").where("v > u").select(F.col("v").alias("u"), F.col("m").alias("v")).where("u != v").distinct()
        # small-star: u and its smaller neighbours all link to the smallest of them
        m = large.groupBy("u").agg(F.min("v").alias("m"))
        small = (
            large.join(m, "u")
            .select(F.col("v").alias("x"), "m")
            .union(m.select(F.col("u").alias("x"), "m"))
            .where("x != m")
            .select(F.col("x").alias("u"), F.col("m").alias("v"))
            .distinct()
        ).localCheckpoint()
        # a forest of stars (no centre is itself a leaf) is one star per component
        if small.select("v").intersect(small.select("u")).limit(1).count() == 0:
            e = small
            break
        e = small
    else:
        raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")
    centres = e.select(F.col("v").alias("vertex"), F.col("v").alias("component")).distinct()
    return e.select(F.col("u").alias("vertex"), F.col("v").alias("component")).union(centres)
