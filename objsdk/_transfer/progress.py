"""The one progress contract of uploads, downloads, the writer (and the CLI on top).

A progress callback is ``progress(done, total)``: ``done`` bytes transferred so far,
``total`` the size if known, else None. Calls never overlap (one at a time, whatever
thread makes them), ``done`` never decreases (a retried part does not count twice), and
a transfer that succeeds ends with a call ``(size, size)``. Keep it quick: it runs on
the transfer's threads. An exception it raises stops the transfer and is re-raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Progress", "ProgressTracker"]

Progress = Callable[[int, "int | None"], None]


class ProgressTracker:
    """Counts bytes done and reports growth to a :data:`Progress` callback."""

    def __init__(
        self, callback: Progress | None, total: int | None, *, done: int = 0, announce: bool = False
    ) -> None:
        self._callback = callback
        self._lock = threading.Lock()
        self.total = total
        self.done = done
        self._last: tuple[int, int | None] | None = None
        if announce:
            with self._lock:
                self._call()

    def add(self, n: int) -> None:
        """``n`` more bytes are done."""
        with self._lock:
            self.done += n
            self._call()

    def reached(self, done: int) -> None:
        """``done`` bytes are done, if that is more than before."""
        with self._lock:
            if done > self.done:
                self.done = done
                self._call()

    def set_total(self, total: int) -> None:
        with self._lock:
            self.total = total

    def finish(self, size: int) -> None:
        """The transfer succeeded with ``size`` bytes: the last call is ``(size, size)``."""
        with self._lock:
            self.done = self.total = size
            if self._last != (size, size):
                self._call()

    def _call(self) -> None:
        if self._callback is not None:
            self._last = (self.done, self.total)
            self._callback(self.done, self.total)
