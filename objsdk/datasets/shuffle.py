"""A sample shuffle buffer with an initial fill, as WebDataset's ``shuffle``.

The buffer holds up to ``size`` items. Nothing comes out until ``initial`` items are in;
while the buffer is below ``size`` it takes two items per item given out, so it grows to
full size; a random item is given out each step; at the end the rest drains in random
order. All randomness comes from the ``random.Random`` passed in, so its state plus the
buffer's contents are the whole state.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from objsdk.errors import InvalidArgument

__all__ = ["ShuffleBuffer", "shuffled"]

T = TypeVar("T")


class ShuffleBuffer(Generic[T]):
    """The buffer's contents and random state (see the module docstring)."""

    def __init__(self, size: int, initial: int, rng: random.Random) -> None:
        if size < 0 or initial < 0:
            raise InvalidArgument(
                f"shuffle buffer size and initial fill must be >= 0, got {size}, {initial}"
            )
        self.size = size
        self.initial = min(initial, size)
        self.rng = rng
        self.items: list[T] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, item: T) -> None:
        self.items.append(item)

    def growing(self) -> bool:
        """Below full size: take one more item before giving one out."""
        return len(self.items) < self.size

    def ready(self) -> bool:
        """The initial fill is in: an item may be given out."""
        return len(self.items) >= max(self.initial, 1)

    def pick(self) -> T:
        """Remove and return a random item."""
        i = self.rng.randrange(len(self.items))
        items = self.items
        items[i], items[-1] = items[-1], items[i]
        return items.pop()


def shuffled(
    source: Iterator[T],
    buffer: ShuffleBuffer[T],
    on_step: Callable[[], None] | None = None,
) -> Iterator[T]:
    """Items of ``source`` through ``buffer`` (a pass-through when its size is 0).

    ``on_step`` runs before every item is given out: the moment at which the buffer's
    contents and the source's position describe exactly what is still to come.
    """
    if buffer.size == 0:
        for item in source:
            if on_step is not None:
                on_step()
            yield item
        return
    for item in source:
        buffer.add(item)
        if buffer.growing():
            extra = next(source, None)
            if extra is not None:
                buffer.add(extra)
        if buffer.ready():
            picked = buffer.pick()
            if on_step is not None:
                on_step()
            yield picked
    while buffer.items:
        picked = buffer.pick()
        if on_step is not None:
            on_step()
        yield picked
