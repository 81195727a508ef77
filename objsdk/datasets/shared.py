"""What a ShardDataset shares with its DataLoader workers: the epoch, the skip count, and
the client's secret key.

A DataLoader copies the dataset into every worker (fork: a copy of memory; spawn and
forkserver: a pickle), and persistent workers keep their copy from one epoch to the
next, so what the main process changes after the workers started (``set_epoch``) and
what the workers count (skipped shards) must live in memory both sides map. The cells are
a ``multiprocessing.RawArray``: anonymous shared memory that a child receives as an
inherited file descriptor, which the standard library allows only while a process is
being started (``get_spawning_popen()``); any other pickle carries the values instead.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import get_spawning_popen
from typing import Any

__all__ = ["SecretBox", "SharedState", "spawning"]

# Skip counters: one per process, so each cell has one writer (no lock): the process that
# owns the dataset uses cell 0, worker w cell 1 + w % (_COUNTERS - 1).
_COUNTERS = 256
_EPOCH, _EXPLICIT, _WORKERS_READ = 0, 1, 2
_FIRST_COUNTER = 3


def spawning() -> bool:
    """Whether this pickle is starting a child process (spawn or forkserver)."""
    return get_spawning_popen() is not None


class SharedState:
    """The epoch (and whether ``set_epoch`` chose it), the epoch DataLoader workers last
    read in, and the shards skipped in every process."""

    def __init__(self, epoch: int = 0) -> None:
        self._cells: Any = multiprocessing.RawArray("q", _FIRST_COUNTER + _COUNTERS)
        self._cells[_EPOCH] = epoch

    @property
    def epoch(self) -> int:
        return int(self._cells[_EPOCH])

    def set_epoch(self, epoch: int, *, explicit: bool) -> None:
        self._cells[_EPOCH] = epoch
        if explicit:
            self._cells[_EXPLICIT] = 1

    @property
    def explicit(self) -> bool:
        """``set_epoch`` was called: a loaded state does not change the epoch."""
        return bool(self._cells[_EXPLICIT])

    def worker_reads(self, epoch: int) -> None:
        self._cells[_WORKERS_READ] = epoch + 1

    def workers_read(self, epoch: int) -> bool:
        """A DataLoader worker started reading ``epoch``."""
        return bool(self._cells[_WORKERS_READ] == epoch + 1)

    def count_skip(self, worker: int | None) -> None:
        cell = _FIRST_COUNTER + (0 if worker is None else 1 + worker % (_COUNTERS - 1))
        self._cells[cell] += 1

    @property
    def skipped(self) -> int:
        return int(sum(self._cells[_FIRST_COUNTER:]))

    def __getstate__(self) -> dict[str, Any]:
        if spawning():
            return {"cells": self._cells}
        return {"values": list(self._cells)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "cells" in state:
            self._cells = state["cells"]
        else:
            self._cells = multiprocessing.RawArray("q", _FIRST_COUNTER + _COUNTERS)
            self._cells[:] = state["values"]


class SecretBox:
    """A secret key and session token handed to spawned workers through shared memory:
    the pickle holds a file descriptor, not the secret, and an ordinary pickle (to a file,
    over a socket) holds nothing."""

    def __init__(self, secret_key: str, session_token: str | None) -> None:
        data = "\0".join([secret_key, session_token or ""]).encode()
        self._cells: Any = multiprocessing.RawArray("c", len(data) or 1)
        self._cells.raw = data
        self._size = len(data)

    def open(self) -> tuple[str | None, str | None]:
        """``(secret_key, session_token)``, or Nones where the box did not travel."""
        if self._cells is None:
            return None, None
        secret, _, token = bytes(self._cells.raw[: self._size]).decode().partition("\0")
        return secret, token or None

    def __repr__(self) -> str:
        return "SecretBox(<hidden>)"

    def __getstate__(self) -> dict[str, Any]:
        return {"cells": self._cells if spawning() else None, "size": self._size}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._cells, self._size = state["cells"], state["size"]
