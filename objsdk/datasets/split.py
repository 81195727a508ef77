"""Which shards a (rank, worker) reads in an epoch, and how many samples it yields.

Pure functions of their arguments, so every process computes the same plan without
talking to the others. An epoch's shard order is a permutation drawn from
``(seed, epoch)``; rank ``r`` of ``W`` takes every W-th shard from position ``r``, and its
worker ``w`` of ``N`` every N-th of those. With ``even`` the order is first made a multiple
of ``W`` long, by repeating its first shards (``"wrap"``) or dropping its last ones
(``"drop"``), so every rank gets the same number of shards.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Literal, NamedTuple

from objsdk.errors import InvalidArgument

__all__ = [
    "Even",
    "Segment",
    "Slot",
    "epoch_order",
    "even_order",
    "normalise_even",
    "plan_samples",
    "plan_shards",
    "rank_from_env",
    "split_quota",
]

Even = Literal["wrap", "drop"] | None


@dataclass(frozen=True)
class Slot:
    """One reader of an epoch: worker ``worker`` of ``num_workers`` on rank ``rank``."""

    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise InvalidArgument(
                f"rank must be in [0, world_size), got rank={self.rank} "
                f"world_size={self.world_size}"
            )
        if self.num_workers < 1 or not 0 <= self.worker < self.num_workers:
            raise InvalidArgument(
                f"worker must be in [0, num_workers), got worker={self.worker} "
                f"num_workers={self.num_workers}"
            )

    @property
    def key(self) -> str:
        """``"rank/worker"``: how state dicts name this slot."""
        return f"{self.rank}/{self.worker}"


def normalise_even(even: bool | str) -> Even:
    """``True`` means ``"wrap"``; ``False`` means no equalising."""
    if even is True:
        return "wrap"
    if even is False or even is None:
        return None
    if even in ("wrap", "drop"):
        return even  # type: ignore[return-value]
    raise InvalidArgument(f"even must be True, False, 'wrap' or 'drop', got {even!r}")


def epoch_order(n: int, *, seed: int, epoch: int, shuffle: bool) -> list[int]:
    """Shard indices in the order of this epoch: a permutation from (seed, epoch)."""
    order = list(range(n))
    if shuffle:
        random.Random(f"objsdk-shards/{seed}/{epoch}").shuffle(order)
    return order


def even_order(order: list[int], world_size: int, even: Even) -> list[int]:
    """``order`` made a multiple of ``world_size`` long (or unchanged without ``even``).

    ``"wrap"`` appends the first shards again (each shard is read at least once,
    at most ``world_size - 1`` twice); ``"drop"`` leaves out the last ones (at most
    ``world_size - 1`` shards unread this epoch, different ones each epoch when shuffled).
    """
    if even is None or not order:
        return list(order)
    extra = len(order) % world_size
    if extra == 0:
        return list(order)
    if even == "drop":
        if len(order) < world_size:
            raise InvalidArgument(
                f"even='drop' with {len(order)} shards and {world_size} ranks would leave "
                "every rank without shards; use even='wrap' or more shards"
            )
        return order[: len(order) - extra]
    pad = world_size - extra
    return order + [order[i % len(order)] for i in range(pad)]


def plan_shards(
    n_shards: int,
    slot: Slot,
    *,
    seed: int = 0,
    epoch: int = 0,
    shuffle: bool = True,
    even: Even = "wrap",
) -> list[int]:
    """The shard indices ``slot`` reads this epoch, in reading order."""
    order = even_order(
        epoch_order(n_shards, seed=seed, epoch=epoch, shuffle=shuffle), slot.world_size, even
    )
    mine = order[slot.rank :: slot.world_size]
    return mine[slot.worker :: slot.num_workers]


def split_quota(total: int, num_workers: int, worker: int) -> int:
    """Worker ``worker``'s share of a rank's ``total`` samples (shares differ by <= 1)."""
    return total // num_workers + (1 if worker < total % num_workers else 0)


def rank_from_env(environ: dict[str, str] | None = None) -> tuple[int, int]:
    """``(rank, world_size)`` from ``RANK`` / ``WORLD_SIZE``, else ``(0, 1)``."""
    env = os.environ if environ is None else environ
    try:
        rank = int(env.get("RANK", "0"))
        world = int(env.get("WORLD_SIZE", "1"))
    except ValueError:
        raise InvalidArgument(
            f"RANK and WORLD_SIZE must be integers, got RANK={env.get('RANK')!r} "
            f"WORLD_SIZE={env.get('WORLD_SIZE')!r}"
        ) from None
    return rank, world


class Segment(NamedTuple):
    """Samples ``first`` to ``first + samples`` of shard ``shard`` (by index in the
    dataset's shard list); ``samples`` None: the whole shard from ``first`` on."""

    shard: int
    first: int = 0
    samples: int | None = None


def plan_samples(
    counts: list[int],
    slot: Slot,
    *,
    seed: int = 0,
    epoch: int = 0,
    shuffle: bool = True,
    even: Even = "wrap",
) -> list[Segment]:
    """The samples ``slot`` reads this epoch when every shard's sample count is known
    (an index), as runs of consecutive samples of one shard, in reading order.

    The epoch's samples are the shards' in the epoch's shard order. Rank ``r`` takes the
    ``r``-th of ``W`` equal consecutive runs of that sequence (``"wrap"``: ``ceil(T/W)``
    each, the sequence continued from its start, so at most ``W - 1`` samples are read
    twice; ``"drop"``: ``floor(T/W)``, at most ``W - 1`` unread; None: sizes differ by at
    most one), and worker ``w`` of ``N`` the ``w``-th of ``N`` consecutive parts of
    that (sizes differ by at most one). Consecutive runs keep reads sequential: a
    (rank, worker) starts at most one shard mid-way.
    """
    order = epoch_order(len(counts), seed=seed, epoch=epoch, shuffle=shuffle)
    total = sum(counts)
    world = slot.world_size
    if total == 0:
        return []
    if even == "wrap":
        per_rank = -(-total // world)
        start, stop = slot.rank * per_rank, (slot.rank + 1) * per_rank
    elif even == "drop":
        per_rank = total // world
        start, stop = slot.rank * per_rank, (slot.rank + 1) * per_rank
    else:
        start, stop = slot.rank * total // world, (slot.rank + 1) * total // world
    n = stop - start
    lo = start + slot.worker * n // slot.num_workers
    hi = start + (slot.worker + 1) * n // slot.num_workers
    out: list[Segment] = []
    # Positions past the end wrap to the start of the sequence.
    while lo < hi:
        at = lo % total
        take = min(hi - lo, total - at)
        out.extend(_segments(order, counts, at, at + take))
        lo += take
    return out


def _segments(order: list[int], counts: list[int], lo: int, hi: int) -> list[Segment]:
    """Positions ``[lo, hi)`` of the sequence of samples in shard ``order``."""
    out: list[Segment] = []
    base = 0
    for shard in order:
        n = counts[shard]
        a, b = max(lo, base), min(hi, base + n)
        if a < b:
            out.append(Segment(shard, a - base, b - a))
        base += n
        if base >= hi:
            break
    return out
