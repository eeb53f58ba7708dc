"""Shards of a run: a deterministic partition of its sources, for ``--shard i/n``.

A stand-in, kept simple (contiguous runs of near-equal count); the i20-shard branch's
version replaces it at the merge. Only ``partition`` and ``shard_of`` are its interface.
"""

from __future__ import annotations


def partition(sources: list, n: int) -> list[list]:
    """``sources`` in ``n`` disjoint contiguous runs, each in run order, whose union is all
    of them; the first ``len(sources) % n`` runs hold one source more than the rest."""
    size, extra = divmod(len(sources), n)
    shards, start = [], 0
    for i in range(n):
        end = start + size + (i < extra)
        shards.append(sources[start:end])
        start = end
    return shards


def shard_of(sources: list, i: int, n: int) -> list:
    """Shard ``i`` of ``n`` of ``sources`` (see :func:`partition`)."""
    return partition(sources, n)[i]
