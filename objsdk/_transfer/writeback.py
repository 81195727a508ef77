"""Early writeback: a download's pages go to disk while the rest of it is received.

A download is durable when it returns (each part is flushed before its record claims it,
and the file before its rename). Flushed only then, a 1 GiB file waits for the disk
after the network is done; flushed as it goes, the last flush finds little left. Every
``step`` bytes written, a background thread calls ``fdatasync`` on the file, so the disk
works while the network does.

``fdatasync`` reports a write-back error once per open file description (Linux
``errseq``; fsync(2)): an error the background flush sees is kept and raised by the next
:meth:`Writeback.sync`, so a part is never recorded as on disk when it is not.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

__all__ = ["WRITEBACK_STEP", "Writeback", "sync_data"]

# Bytes written between background flushes: large enough that a flush is one long
# sequential write, small enough that the final one has little left to do.
WRITEBACK_STEP = 32 * 1024 * 1024

# fdatasync is enough (the file's size is set before any part is written); macOS lacks it.
sync_data: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)


class Writeback:
    """Flushes ``fd`` in the background every ``step`` bytes :meth:`wrote` reports.

    Thread-safe: parts written by several threads report here. :meth:`sync` is the
    durable flush a part ends with; :meth:`close` stops the thread (idempotent).
    """

    def __init__(
        self, fd: int, *, step: int = WRITEBACK_STEP, flush: Callable[[int], None] = sync_data
    ) -> None:
        self._fd = fd
        self._step = step
        self._flush = flush
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._unflushed = 0
        self._requested = False
        self._closed = False
        self._error: OSError | None = None
        self._thread: threading.Thread | None = None

    def wrote(self, n: int) -> None:
        """``n`` more bytes were written to the file."""
        with self._lock:
            self._unflushed += n
            if self._unflushed < self._step or self._closed:
                return
            self._unflushed = 0
            self._requested = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="objsdk-writeback", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not (self._requested or self._closed):
                    self._wake.wait()
                if self._closed:
                    return
                self._requested = False
            try:
                self._flush(self._fd)
            except OSError as e:
                with self._lock:
                    self._error = self._error or e

    def sync(self) -> None:
        """Flush the file now; raise what a background flush met, if anything did."""
        self.check()
        self._flush(self._fd)

    def check(self) -> None:
        """Raise the error a background flush met since the last check, if any."""
        with self._lock:
            error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self) -> None:
        """Stop the background thread (after its flush in progress, if any). Call
        :meth:`check` after it before trusting the file to be on disk."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
            self._wake.notify()
        if thread is not None:
            thread.join()
