"""Early writeback: a download's pages go to disk while the rest of it is received, and
its parts are recorded as done once a flush has put them there.

A download is durable when it returns (each part is flushed before its record claims it,
and the file before its rename). Flushed only then, a 1 GiB file waits for the disk
after the network is done; flushed as it goes, the last flush finds little left. Every
``step`` bytes written, a background thread calls ``fdatasync`` on the file, so the disk
works while the network does.

Parts are recorded in groups, as a database commits: a part whose bytes are all written
is handed to :meth:`Writeback.written`, and to ``on_durable`` after the next flush that
*starts* after that call returns (``fdatasync`` covers every write completed before it is
called). No part waits for the disk before the next one is received, and the record is
rewritten once per flush, not once per part. A flush comes every ``step`` bytes, and
``COMMIT_SECONDS`` at the latest after a part is written, so on a slow link too a crash
(SIGKILL, power) loses at most the parts of the last ``step`` bytes or the last
``COMMIT_SECONDS``, whichever is less; an interrupted download that returns through
:meth:`Writeback.keep` loses none.

``fdatasync`` reports a write-back error once per open file description (Linux
``errseq``; fsync(2)): an error the background flush sees is kept and raised by the next
:meth:`Writeback.sync`, so a part is never recorded as on disk when it is not.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable, Sequence

from objsdk._core.parts import Part

__all__ = ["COMMIT_SECONDS", "WRITEBACK_STEP", "Writeback", "sync_data"]

# Bytes written between background flushes: large enough that a flush is one long
# sequential write, small enough that the final one has little left to do.
WRITEBACK_STEP = 32 * 1024 * 1024
# The longest a written part waits to be recorded (past the flush itself), where
# WRITEBACK_STEP takes longer to arrive (below 64 MiB/s): a flush and a record rewrite
# per half second cost nothing at such rates.
COMMIT_SECONDS = 0.5

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)

# fdatasync is enough (the file's size is set before any part is written); macOS lacks it.
sync_data: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)


class Writeback:
    """Flushes ``fd`` in the background every ``step`` bytes :meth:`wrote` reports, and
    hands the parts :meth:`written` named before each flush to ``on_durable`` after it.

    Thread-safe: parts written by several threads report here. :meth:`sync` is a
    durable flush now; :meth:`close` stops the thread (idempotent). A part whose flush
    failed is never handed on: after a write-back error the kernel marks the lost pages
    clean, so a later flush would succeed over them (fsync(2)). ``on_durable`` runs on
    whichever thread flushed; an error it raises is kept and raised like a flush's.
    """

    def __init__(
        self,
        fd: int,
        *,
        step: int = WRITEBACK_STEP,
        flush: Callable[[int], None] = sync_data,
        on_durable: Callable[[Sequence[Part]], None] | None = None,
        commit_seconds: float = COMMIT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fd = fd
        self._commit_seconds = commit_seconds
        self._clock = clock
        self._oldest = 0.0  # when the first part now waiting was written
        self._step = step
        self._flush = flush
        self._on_durable = on_durable
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._unflushed = 0
        self._requested = False
        self._closed = False
        self._error: BaseException | None = None
        self._failed = False  # a flush failed: nothing is handed on any more
        self._written: list[Part] = []
        self._thread: threading.Thread | None = None

    def wrote(self, n: int) -> None:
        """``n`` more bytes were written to the file."""
        with self._lock:
            self._unflushed += n
            if self._unflushed >= self._step:
                self._request()

    def written(self, part: Part) -> None:
        """Every byte of ``part`` is written: hand it on after the next flush, which
        comes within ``commit_seconds``."""
        with self._lock:
            if not self._written:
                self._oldest = self._clock()
            self._written.append(part)
            if not self._closed:
                self._start()
                self._wake.notify()

    def _request(self) -> None:
        """Wake the background thread for a flush; the lock is held."""
        if self._closed:
            return
        self._unflushed = 0
        self._requested = True
        self._start()
        self._wake.notify()

    def _start(self) -> None:
        """The background thread, started on first use; the lock is held."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="objsdk-writeback", daemon=True)
            self._thread.start()

    def _due(self) -> float | None:
        """Seconds until a flush is due (0: now), None if none is; the lock is held."""
        if self._error is not None:
            return None  # not again until the caller has seen it (no retry in a loop)
        if self._requested:
            return 0.0
        if not self._written:
            return None
        return max(0.0, self._oldest + self._commit_seconds - self._clock())

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._closed and (due := self._due()) != 0.0:
                    self._wake.wait(due)
                if self._closed:
                    return
                self._requested = False
            try:
                self._commit()
            except Exception as e:  # kept for the caller's next check or sync
                with self._lock:
                    self._error = self._error or e

    def _commit(self, *, record_errors: bool = True) -> None:
        """Flush, then hand on the parts written before the flush began (kept for the
        next commit if ``on_durable`` fails: they are on disk, only not recorded; its
        error is raised unless ``record_errors`` is false)."""
        with self._lock:
            parts, self._written = self._written, []
        try:
            self._flush(self._fd)
        except BaseException:
            with self._lock:
                self._failed = True
            raise
        with self._lock:
            if self._failed:
                return  # an earlier flush lost pages this one may not have seen
        if parts and self._on_durable is not None:
            try:
                self._on_durable(parts)
            except BaseException as e:
                with self._lock:
                    self._written[:0] = parts
                if record_errors or not isinstance(e, Exception):
                    raise

    def sync(self) -> None:
        """Flush the file now and hand on every part written so far; raise what a
        background flush met, if anything did."""
        self.check()
        self._commit()

    def finish(self) -> None:
        """The download is all written: stop the thread and flush; raise what a flush
        met. The parts are handed on too, but an error doing so is not raised: the
        record only matters if what follows fails, and a disk with room for every byte
        but not for a last record rewrite must not fail a complete download."""
        self.close()
        self.check()
        self._commit(record_errors=False)

    def keep(self, make_room: Callable[[Sequence[Part]], None] | None = None) -> None:
        """After a failure: put what is written on disk and hand on its parts, so a
        later call resumes from them; quietly nothing if that fails (the caller is
        already raising its own error).

        Where ``on_durable`` finds no space (a download that filled the disk cannot
        rewrite its record), ``make_room`` is called with the parts waiting to be
        handed on, to free what is not theirs, and ``on_durable`` is tried once more.
        """
        self.close()
        with self._lock:
            if self._failed:
                return  # pages may be lost: nothing more is handed on
        with contextlib.suppress(Exception):
            try:
                self._commit()
            except OSError as e:
                if make_room is None or e.errno not in _NO_SPACE:
                    raise
                with self._lock:
                    waiting = list(self._written)
                make_room(waiting)
                self._commit()

    def check(self) -> None:
        """Raise the error a background flush (or ``on_durable``) met since the last
        check, if any."""
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
