"""The parts of an adaptive upload, handed out as they are sent, made smaller on a
network that cuts connections.

A connection that breaks during a part loses what was sent of that part: S3 keeps no
partial part ("UploadPart"), so the part goes again whole, and a cut costs half a part
on average. Smaller parts lose less to each cut, for a request each. So once a part's
connection breaks, the parts not yet handed out are re-planned at the smallest size S3
allows (``replan_smaller``), and a client whose last adaptive upload saw a cut starts
the next one that way: an upload is often only a round or two of parts (256 MiB over
16 connections is one), and a cut in the last round finds nothing left to re-plan. An
upload that sees no cut sets the client back to the usual parts.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator

from objsdk._core.parts import Part, replan_smaller

__all__ = ["CutMemory", "UploadPlan"]


class CutMemory:
    """Whether a client's last adaptive upload had a part's connection break."""

    __slots__ = ("cut",)

    def __init__(self) -> None:
        self.cut = False


class UploadPlan:
    """An adaptive upload's parts: the ``probe`` (the last part, sent first), then the
    ``body`` in order, each handed out when a sender is ready for it. Iterated by the
    thread that feeds the senders; :meth:`cut` is called by the senders."""

    def __init__(self, probe: Part, body: list[Part], memory: CutMemory | None = None) -> None:
        self._lock = threading.Lock()
        self._probe = probe
        self._memory = memory
        self._small = memory is not None and memory.cut
        self._pending = deque(replan_smaller(body) if self._small else body)
        self.cuts = 0

    def __iter__(self) -> Iterator[Part]:
        yield self._probe
        while True:
            with self._lock:
                if not self._pending:
                    return
                part = self._pending.popleft()
            yield part

    def cut(self) -> None:
        """A part's connection broke (before the part is sent again): the parts not yet
        handed out are re-planned smaller, once."""
        with self._lock:
            self.cuts += 1
            if not self._small:
                self._small = True
                self._pending = deque(replan_smaller(self._pending))

    def finish(self) -> None:
        """The upload is over, stored or not: the client remembers whether it saw a cut."""
        if self._memory is not None:
            self._memory.cut = self.cuts > 0
