"""``ReadSource``: where an :class:`~objsdk.ObjectFile`'s next bytes come from.

Either its one pinned stream (a :class:`~objsdk._io.range_reader.RangeReader`) or parts
read ahead in parallel (a :class:`~objsdk._io.readahead.PartStream`), chosen as reading
goes: parts once reading has been sequential for a part's worth, with ``readahead`` (a
fixed number of parts, or ``None``: the adaptive level, where a level of 1 is the single
stream); back to the single stream for good when parts do not pay, when the server
ignores Range, or when nothing pins parts to one version.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from objsdk._core.adaptive import Preset
from objsdk._core.sizes import ADAPTIVE_CAP, RECEIVE_SLICE
from objsdk._io.body import Observer
from objsdk._io.range_reader import SKIP_THRESHOLD, RangeIgnored, RangeReader
from objsdk._io.read_stats import ReadStats
from objsdk._io.readahead import PartResult, PartStream, Prefetcher
from objsdk._io.shared_level import InFlight, SharedLevel
from objsdk._transport import forks

__all__ = ["ReadSource"]

T = TypeVar("T")


class ReadSource:
    """The network side of one reader: :meth:`receive` runs a body read at an offset on
    the stream or the parts, whichever reading so far calls for.

    ``size()`` is the object's size (it may send a HEAD); ``observer`` sees every byte
    of the parts in object order (the reader's own stream has it already);
    ``from_start()`` is called before parts start at byte 0 (to prime verification).
    ``stats`` receives the parts' requests, resumes, waste and the level chosen.
    """

    def __init__(
        self,
        reader: RangeReader,
        *,
        readahead: int | None,
        part_size: int,
        stats: ReadStats,
        size: Callable[[], int],
        observer: Observer | None,
        from_start: Callable[[], None],
    ) -> None:
        self.reader = reader
        self.readahead = readahead
        self.part_size = part_size
        self.stats = stats
        self._size = size
        self._observer = observer
        self._from_start = from_start
        self._threads(readahead)
        self.parts: PartStream | None = None
        # Bytes read in sequence since the last far seek: read-ahead starts once a whole
        # part's worth has gone by, so random small reads do not fetch whole parts.
        # A fresh reader counts as sequential.
        self.run = part_size
        self.pos = 0  # where the last receive left off

    def _threads(self, readahead: int | None) -> None:
        """Make what this reader shares with its read-ahead workers, in this process."""
        self._forks = forks.generation
        self._stats_lock = threading.Lock()
        # readahead=None: parts in flight follow the rate (a level of 1 is one stream);
        # the CPU weighed is that of this reader's network reads, not the caller's work.
        self.level = SharedLevel.unless(
            readahead,
            preset=Preset.reader(),
            begin=False,
            endpoint=self.reader.transport.endpoint.url,
        )
        self._stream = InFlight(self.level)  # the single stream, the level's first part
        self._prefetcher: Prefetcher | None = None

    def _check_fork(self) -> None:
        """In a forked child, the read-ahead's workers do not exist and its parts are the
        parent's: they are dropped, never waited for or joined, and read-ahead starts
        again on this process's own threads with the next sequential read (an adaptive
        level measures again). The stream resumes on its own (RangeReader)."""
        if self._forks != forks.generation:
            self.parts = None
            self._threads(self.readahead)

    def fill_size(self, chunk: int) -> int:
        """The bytes a buffered fill of ``chunk`` asks the network for: at most a slice
        while the level still judges the single stream, which sees a fill's bytes only
        once it is whole (a window is 512 KiB and 30 ms; a 1 MiB fill at 25 MB/s takes
        43 ms, and three windows of them cost a slow link's first shard 0.17 s)."""
        level = self.level
        if level is None or level.settled or self.parts is not None:
            return chunk
        return min(chunk, RECEIVE_SLICE)

    def receive(self, op: Callable[[Any], T], empty: T, want: int) -> T:
        """Run one body read ``op`` at offset ``want``; ``empty`` at the end of the
        object. :attr:`pos` is then the next offset to receive."""
        self._check_fork()
        self.pos = want
        source = self._source(want)
        if source is None:
            return empty
        level = self.level
        climbing = level is not None and not level.settled
        if climbing and level is not None and source is self.reader:
            level.begin()
        start = source.pos
        # The single stream's throttling answers cut the level too (a part's are heard
        # by its worker).
        hearing = self._stream.hearing() if climbing and source is self.reader else None
        try:
            with (
                level.reading() if level is not None else contextlib.nullcontext(),
                hearing or contextlib.nullcontext(),
            ):
                result = op(source)
        except RangeIgnored:
            # Parts would each receive the object from byte 0: one stream is cheaper.
            self._one_stream_from_now()
            self.drop()
            return self.receive(op, empty, want)
        got = source.pos - start
        self.run += got
        self.pos = source.pos
        if climbing and source is self.reader:
            self._stream.observe(got)
        return result

    def seek(self, target: int) -> None:
        """The caller moved to ``target``: a far or backward move cancels the parts (or
        the stream reopens there lazily) and sequential reading starts over."""
        self._check_fork()
        parts = self.parts
        if parts is not None:
            if not 0 <= target - parts.pos <= SKIP_THRESHOLD:
                self.drop()  # far or backward: parts are cancelled
                self.run = 0
            # else the next receive skips forward through the parts
        elif not self.reader.seek(target):
            self.run = 0  # far or backward: reopened lazily at the new offset
            self.reader.jumped(target)

    def expect(self, n: int) -> None:
        """The caller wants ``n`` bytes from where it is (-1: all the rest): after a far
        seek, the single stream's next GET asks for that many (see
        :data:`~objsdk._io.range_reader.RANDOM_WINDOW`)."""
        self.reader.expect = n

    def settle(self, keep: bytes | memoryview) -> None:
        """Recycle read-ahead buffers no longer referenced, except ``keep``'s."""
        self._check_fork()
        if self.parts is not None:
            self.parts.settle(keep)

    def ahead(self) -> int:
        """Parts to read ahead now: the fixed number, or the adaptive level (a level of
        1 is the single stream)."""
        if self.level is not None:
            level = self.level.current()
            return level if level > 1 else 0
        return self.readahead or 0

    def settled(self) -> int | None:
        """The parts read ahead for good (0: one stream); None while the level climbs."""
        if self.level is None:
            return self.readahead or 0
        return self.ahead() if self.level.settled else None

    def _one_stream_from_now(self) -> None:
        if self.level is not None:
            self.level.hold()  # settled, at one stream (wakes wait_settled)
        self.level = None
        self.readahead = 0
        self.stats.readahead = 0

    def wait_settled(self, timeout: float | None) -> None:
        """Wait until :meth:`settled` is no longer None, at most ``timeout`` seconds, or
        until the reader closes."""
        level = self.level
        if level is not None:
            level.wait_settled(timeout)

    def _source(self, want: int) -> RangeReader | PartStream | None:
        parts = self.parts
        if parts is not None and self.level is not None and self.ahead() == 0:
            # More parts did not pay: back to the single stream, for good.
            self.drop()
            self._one_stream_from_now()
            parts = None
        if parts is None and self.ahead() and self.run >= self.part_size:
            if want >= self._size():  # HEAD if not known yet: parts need size and pin
                return None
            if self.reader.pinned:
                self.reader.drop()
                self._stream.end()
                parts = self._start_parts(want)
            else:
                # Nothing ties parallel parts to one version: stay on one stream.
                self._one_stream_from_now()
        if parts is not None:
            if parts.pos < want:
                skip = want - parts.pos
                parts.discard(skip)
                self.stats.bytes_discarded += skip
            return parts
        if self.reader.pos != want:
            self.reader.seek(want)
        return self.reader

    def _start_parts(self, want: int) -> PartStream:
        size = self._size()
        if want == 0:
            self._from_start()
        if self._prefetcher is None:
            workers = ADAPTIVE_CAP if self.level is not None else self.ahead()
            self._prefetcher = Prefetcher.pinned_like(
                self.reader,
                workers=workers,
                part_size=self.part_size,
                level=self.level,
                account=_accountant(self.stats, self._stats_lock),
            )
        self.stats.readahead = self.ahead()
        self.parts = PartStream(self._prefetcher, want, size, self._observer, self._count_part)
        return self.parts

    def _count_part(self, result: PartResult) -> None:
        with self._stats_lock:
            self.stats.requests += result.requests
            self.stats.resumes += result.resumes
        if self.level is not None:
            self.stats.readahead = self.ahead()

    def drop(self) -> None:
        """Close the open stream and cancel parts in flight; reopened lazily."""
        self._check_fork()
        self.reader.drop()
        if self.parts is not None:
            parts, self.parts = self.parts, None
            parts.close()

    def close(self) -> None:
        """Drop the network and join the read-ahead workers (counting what they wasted)."""
        self._check_fork()
        if self.level is not None:
            self.level.release()  # a wait for the level to settle ends here
        self.drop()
        if self._prefetcher is not None:
            self._prefetcher.close()  # joins the workers
            self.stats.bytes_wasted = self._prefetcher.wasted
            self._prefetcher = None


def _accountant(stats: ReadStats, lock: threading.Lock) -> Callable[[int, int], None]:
    """Adds a failed part's requests and resumes to ``stats`` (its resumes count even
    when its failure is what the caller sees). It holds the stats, not the reader:
    workers must not keep an unclosed file from being collected."""

    def account(requests: int, resumes: int) -> None:
        with lock:
            stats.requests += requests
            stats.resumes += resumes

    return account
