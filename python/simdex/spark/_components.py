"""Connected components: on the driver by the library's union-find when the edges fit a
bound (``components_within``), else in Spark itself: large-star / small-star (Kiveris,
Lattanzi, Mirrokni, Rastogi, Vassilvitskii, "Connected Components in MapReduce and Beyond",
SoCC 2014).

Vertices are longs; every operation is a grouped minimum or a join, so no vertex's
neighbourhood is ever held in one task's memory. Each round first counts every vertex's
rows and takes their minimum (one grouped aggregation over the checkpointed edges, combined
map-side, so a skewed key costs nothing there; one job). A vertex with more than
``HUB_DEGREE`` rows is a **hub**: in both stars its minimum goes to the executors in a
broadcast map (a ``BroadcastHashJoin``, no shuffle of its rows), and only the other vertices'
rows go through the shuffle (sort-merge) join, so no reduce task receives a hub's million
rows (a vertex has no more rows in the small star than in the round's edges). There are at
most ``rows / HUB_DEGREE`` hubs, and at most ``MAX_HUBS`` are broadcast (the most rows first;
any others take the shuffle join, which gives the same answers): 2^16 pairs of longs, 1 MiB.
A round without hubs runs the two stars as plain joins. Each round is checkpointed (local
checkpoints) so the plan does not grow with the rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

HUB_DEGREE = 1 << 14  # a vertex with more rows than this in a round's edges is a hub (broadcast)
MAX_HUBS = 1 << 16  # hubs broadcast per round at most, the most rows first (1 MiB of longs)


@dataclass
class Rounds:
    """What the Spark path did: its rounds and the hubs it looked up by broadcast."""

    rounds: int = 0
    # hubs over all rounds (a vertex counted once per round it was a hub in), their rows in
    # the rounds' edges, and the hub lookups (two a round with hubs: one a star) Spark planned
    # as a ``BroadcastHashJoin`` (from the physical plan)
    hubs: int = 0
    hub_rows: int = 0
    broadcast_joins: int = 0


def _hub_lookup(rows, table, per, stats: Rounds):
    """``rows`` (``u, v``) with ``m``: the hubs' (``table``: ``u, m``, broadcast) by a
    broadcast join, the other vertices' from ``per`` (``u, m``) by the shuffle join."""
    from pyspark.sql import functions as F

    by_broadcast = rows.join(F.broadcast(table), "u")
    if "BroadcastHashJoin" in by_broadcast._jdf.queryExecution().executedPlan().toString():
        stats.broadcast_joins += 1
    hub = F.broadcast(table.select("u"))
    return by_broadcast.unionByName(rows.join(hub, "u", "left_anti").join(per.join(hub, "u", "left_anti"), "u"))


def components(edges, src: str = "a", dst: str = "b", max_rounds: int = 64, stats: Rounds = None):
    """``(vertex, component)`` for every vertex of an edge of ``edges``, the component being the
    smallest vertex connected to it (itself included). ``stats`` (a ``Rounds``), when given,
    counts the rounds and the hubs."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    stats = Rounds() if stats is None else stats
    e = edges.select(F.greatest(src, dst).alias("u"), F.least(src, dst).alias("v")).where("u != v").distinct()
    e = e.localCheckpoint()
    for _ in range(max_rounds):
        stats.rounds += 1
        both = e.union(e.select(F.col("v").alias("u"), F.col("u").alias("v")))
        # each vertex's rows and smallest neighbour (itself included); the hubs: more rows than
        # HUB_DEGREE (one job over the checkpointed edges). A vertex has at most as many rows in
        # the large star's output as here, so these hubs serve the small star too.
        per = both.groupBy("u").agg(F.count(F.lit(1)).alias("d"), F.least(F.min("v"), F.col("u")).alias("m"))
        hubs = per.where(F.col("d") > HUB_DEGREE).orderBy(F.col("d").desc()).limit(MAX_HUBS).collect()
        per = per.select("u", "m")
        kept = []
        # large-star: every neighbour larger than u links to the smallest of u's neighbourhood
        if hubs:
            stats.hubs += len(hubs)
            stats.hub_rows += sum(r["d"] for r in hubs)
            table = e.sparkSession.createDataFrame([(r["u"], r["m"]) for r in hubs], "u long, m long")
            joined = _hub_lookup(both, table, per, stats)
        else:
            joined = both.join(per, "u")
        large = joined.where("v > u").select(F.col("v").alias("u"), F.col("m").alias("v")).where("u != v").distinct()
        # small-star: u and its smaller neighbours all link to the smallest of them
        m = large.groupBy("u").agg(F.min("v").alias("m"))
        if hubs:
            large = large.persist(StorageLevel.MEMORY_AND_DISK)
            m = m.persist(StorageLevel.MEMORY_AND_DISK)
            kept = [large, m]
            # the hubs' smallest neighbours in the large star, broadcast (hubs without rows there drop out)
            joined = _hub_lookup(large, m.join(F.broadcast(table.select("u")), "u"), m, stats)
        else:
            joined = large.join(m, "u")
        small = (
            joined.select(F.col("v").alias("x"), "m")
            .union(m.select(F.col("u").alias("x"), "m"))
            .where("x != m")
            .select(F.col("x").alias("u"), F.col("m").alias("v"))
            .distinct()
        ).localCheckpoint()
        for df in kept:
            df.unpersist()
        # a forest of stars (no centre is itself a leaf) is one star per component
        if small.select("v").intersect(small.select("u")).limit(1).count() == 0:
            e = small
            break
        e = small
    else:
        raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")
    centres = e.select(F.col("v").alias("vertex"), F.col("v").alias("component")).distinct()
    return e.select(F.col("u").alias("vertex"), F.col("v").alias("component")).union(centres)
