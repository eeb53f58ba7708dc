"""``--shard i/n``: one of n disjoint parts of a run, for schedulers that launch processes
(SLURM arrays, GNU parallel) and for edgecli's own schedulers.

Every shard discovers the whole run's sources (so output names are checked across all of
them, as in a plain run) and keeps the contiguous stretch of them that :func:`partition`
assigns it. Each shard writes only its own sources' outputs, so n processes can write into
one folder at once, and together they write exactly what one plain run writes.
"""

from __future__ import annotations

import re

from ..errors import OptionError
from .numerals import WHOLE

_SHARD = re.compile(f"({WHOLE})/({WHOLE})")


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` as ``(i, n)``, with ``0 <= i < n``; OptionError naming the value otherwise."""
    match = _SHARD.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise OptionError(f"shard must be I/N with 0 <= I < N (e.g. 0/4), got {text!r}")
    index, count = int(match.group(1)), int(match.group(2))
    check_shard((index, count))
    return index, count


def check_shard(shard: object) -> None:
    """OptionError unless ``shard`` is a pair of integers ``(i, n)`` with ``0 <= i < n``."""
    if (
        not isinstance(shard, tuple)
        or len(shard) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) for v in shard)
    ):
        raise OptionError(f"shard must be a pair (i, n) of integers, got {shard!r}")
    index, count = shard
    if count < 1:
        raise OptionError(f"shard count must be >= 1, got {index}/{count}")
    if not 0 <= index < count:
        raise OptionError(f"shard index must be in 0..{count - 1}, got {index}/{count}")


def format_shard(shard: tuple[int, int] | None) -> str | None:
    return None if shard is None else f"{shard[0]}/{shard[1]}"


def _size(source) -> int:
    try:
        return source.path.stat().st_size
    except OSError:
        return 0  # unreadable: its shard reports it, as a plain run would


def partition(sources: list, n: int) -> list[list]:
    """``sources`` (in run order, as :func:`edgecli.inputs.sources.discover_inputs` returns them)
    cut into ``n`` contiguous, disjoint lists, each in run order, balanced by file size.

    A source goes to the shard that holds the middle of its bytes: source ``k``, whose bytes
    run from ``c`` (the sizes of the sources before it) to ``c + s``, is in shard
    ``floor(n * (c + s/2) / total)``. The cuts therefore fall where the cumulative size
    crosses each ``j * total / n``, runs of consecutive files stay together, and a shard holds
    at most ``total / n + max(s)`` bytes (half of its first source and half of its last may
    lie outside its ideal range). With more shards than sources, or one source far larger
    than the rest, some shards are empty.

    A video or multi-frame file counts as its file size and is kept whole: cutting one long
    video at keyframes comes with GPU decoding, which reads by keyframe. Only the order and
    the file sizes decide the cut (integer arithmetic; no hash, path, time or host), so every
    machine computes the same partition for the same inputs.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise OptionError(f"shard count must be an integer >= 1, got {n!r}")
    shards: list[list] = [[] for _ in range(n)]  # n lists: for one shard, see shard_of
    for source, k in _shard_indices(sources, n):
        shards[k].append(source)
    return shards


def _shard_indices(sources: list, n: int):
    """Each source with the index of its shard of ``n`` (see :func:`partition`), in order."""
    sizes = [_size(source) for source in sources]
    total = sum(sizes)
    if total == 0:  # only empty files: balance their count instead
        sizes = [1] * len(sources)
        total = len(sources)
    before = 0
    for source, size in zip(sources, sizes, strict=True):
        # floor(n * (before + size / 2) / total), in integers
        yield source, min(n * (2 * before + size) // (2 * total), n - 1)
        before += size


def shard_of(sources: list, i: int, n: int) -> list:
    """The sources of shard ``i`` of ``n``: ``partition(sources, n)[i]``, in time and memory
    that follow the sources, not ``n`` (a scheduler may ask for shard 0 of 10**30)."""
    check_shard((i, n))
    return [source for source, k in _shard_indices(sources, n) if k == i]
