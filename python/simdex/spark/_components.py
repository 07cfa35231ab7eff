"""Connected components: on the driver by the library's union-find when the edges fit a
bound (``components_within``), else in Spark itself: large-star / small-star (Kiveris,
Lattanzi, Mirrokni, Rastogi, Vassilvitskii, "Connected Components in MapReduce and Beyond",
SoCC 2014).

Vertices are longs; every operation is a grouped minimum or a join, so no vertex's
neighbourhood is ever held in one task's memory. Each star (large, then small) first counts
every vertex's rows and takes their minimum (one grouped aggregation, combined map-side, so
a skewed key costs nothing there). A vertex with more than ``HUB_DEGREE`` rows is a **hub**:
its minimum goes to the executors in a broadcast map (a ``BroadcastHashJoin``, no shuffle of
its rows), and only the other vertices' rows go through the shuffle (sort-merge) join, so no
reduce task receives a hub's million rows. There are at most ``rows / HUB_DEGREE`` hubs, and
at most ``MAX_HUBS`` are broadcast (the most rows first; any others take the shuffle join,
which gives the same answers): 2^16 pairs of longs, 1 MiB. Each round is checkpointed (local
checkpoints) so the plan does not grow with the rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

HUB_DEGREE = 1 << 14  # a vertex with more rows than this in a star is a hub (broadcast)
MAX_HUBS = 1 << 16  # hubs broadcast per star at most, the most rows first (1 MiB of longs)


@dataclass
class Rounds:
    """What the Spark path did: its rounds and the hubs it looked up by broadcast."""

    rounds: int = 0
    # hubs over all stars and rounds (a vertex counted once per star it was a hub in), the rows
    # whose minimum came from the broadcast map, and the hub joins Spark planned as a
    # ``BroadcastHashJoin`` (from the physical plan)
    hubs: int = 0
    hub_rows: int = 0
    broadcast_joins: int = 0


def _with_minimum(rows, self_too: bool, stats: Rounds):
    """``rows`` (``u, v``) with ``m``, the smallest ``v`` of ``u``'s rows (or ``u`` itself when
    smaller and ``self_too``): hubs' from a broadcast map, the others' by the shuffle join.
    Also returns the per-vertex DataFrame it persisted (the caller unpersists it)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    per = rows.groupBy("u").agg(F.count(F.lit(1)).alias("d"), F.min("v").alias("m"))
    if self_too:
        per = per.select("u", "d", F.least(F.col("m"), F.col("u")).alias("m"))
    per = per.persist(StorageLevel.MEMORY_AND_DISK)
    hubs = per.where(F.col("d") > HUB_DEGREE).orderBy(F.col("d").desc()).limit(MAX_HUBS).collect()
    if not hubs:
        return rows.join(per.select("u", "m"), "u"), per
    stats.hubs += len(hubs)
    stats.hub_rows += sum(r["d"] for r in hubs)
    table = rows.sparkSession.createDataFrame([(r["u"], r["m"]) for r in hubs], "u long, m long")
    by_broadcast = rows.join(F.broadcast(table), "u")
    if "BroadcastHashJoin" in by_broadcast._jdf.queryExecution().executedPlan().toString():
        stats.broadcast_joins += 1
    hub = F.broadcast(table.select("u"))
    rest = rows.join(hub, "u", "left_anti").join(per.join(hub, "u", "left_anti").select("u", "m"), "u")
    return by_broadcast.unionByName(rest), per


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
        # large-star: every neighbour larger than u links to the smallest of u's neighbourhood
        both = e.union(e.select(F.col("v").alias("u"), F.col("u").alias("v")))
        joined, per_large = _with_minimum(both, True, stats)
        large = joined.where("v > u").select(F.col("v").alias("u"), F.col("m").alias("v")).where("u != v").distinct()
        large = large.persist(StorageLevel.MEMORY_AND_DISK)  # counted, then joined
        # small-star: u and its smaller neighbours all link to the smallest of them
        joined, per_small = _with_minimum(large, False, stats)
        small = (
            joined.select(F.col("v").alias("x"), "m")
            .union(per_small.select(F.col("u").alias("x"), "m"))
            .where("x != m")
            .select(F.col("x").alias("u"), F.col("m").alias("v"))
            .distinct()
        ).localCheckpoint()
        for kept in (per_large, large, per_small):
            kept.unpersist()
        # a forest of stars (no centre is itself a leaf) is one star per component
        if small.select("v").intersect(small.select("u")).limit(1).count() == 0:
            e = small
            break
        e = small
    else:
        raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")
    centres = e.select(F.col("v").alias("vertex"), F.col("v").alias("component")).distinct()
    return e.select(F.col("u").alias("vertex"), F.col("v").alias("component")).union(centres)
