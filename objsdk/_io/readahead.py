"""Parallel read-ahead: the next parts of an object fetched on worker threads.

Socket reads release the GIL, so a few threads keep several ranged GETs in flight while
the caller works on earlier bytes. Parts land in preallocated buffers (``readinto``,
no intermediate objects) and are handed out strictly in order. At most
``max(workers + 1, 4)`` part buffers ever exist, whatever the caller does.

Buffer ownership: a part's buffer goes back to the pool as soon as its bytes have been
copied out, except for a part handed out as a view (:meth:`PartStream.fill_view`), which
waits for :meth:`PartStream.settle` at the end of the caller's operation. The caller
holds at most three buffers at a moment it waits for a new one (a part being joined
and two views), so with four or more one is always free or on its way back.

:class:`PartStream` has the reading interface of :class:`~objsdk._io.range_reader.RangeReader`,
so :class:`~objsdk.ObjectFile`'s buffering, seeking and checksum logic serves both.
Each part is itself fetched by a ``RangeReader`` window on a :class:`PartPool` worker.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any

from objsdk import errors
from objsdk._core.sizes import RECEIVE_SLICE
from objsdk._io.buffers import PartBuffer, part_buffer
from objsdk._io.pool import PartPool, Task, WatchFactory
from objsdk._io.range_reader import RangeReader
from objsdk._io.read_stats import ReadStats
from objsdk._io.shared_level import InFlight, SharedLevel

__all__ = ["Fetch", "PartStream", "Prefetcher", "part_fetcher"]

Observer = Callable[[int, "bytes | memoryview"], None]


@dataclass
class PartResult:
    """What a worker reports for a part: bytes fetched and request counts."""

    nbytes: int
    requests: int = 0
    resumes: int = 0


# fetch(start, stop, into, cancel) fills `into` with bytes [start, stop).
Fetch = Callable[[int, int, memoryview, threading.Event], PartResult]


# account(requests, resumes): what a failed part cost, from its worker's thread.
Account = Callable[[int, int], None]


def part_fetcher(
    pin: RangeReader, *, level: SharedLevel | None = None, account: Account | None = None
) -> Fetch:
    """How a worker fetches one part: a window of ``pin`` (:meth:`RangeReader.window`),
    pinned to its version, with the same resume rules and errors (verification is the
    owner's, over the whole object in order). An adaptive ``level`` is told of the
    part's bytes as they arrive, and of its start and end (from the worker's thread).
    ``account`` hears the requests and resumes of every part that fails, unless it was
    cancelled (a part that succeeds reports them in its :class:`PartResult`)."""
    # A copy of the pin alone: the workers must not keep the owner's reader (and through
    # its observer, the owner) alive, or an unclosed reader could never be collected.
    pin = pin.window(None)
    bucket, key = pin.bucket, pin.key

    def fetch(start: int, stop: int, into: memoryview, cancel: threading.Event) -> PartResult:
        stats = ReadStats()
        # strict_range: a server that ignores Range is the owner's to handle (it falls
        # back to one stream instead).
        reader = pin.window(stop, cancel=cancel, stats=stats, strict_range=True)
        n = 0
        with InFlight(level) as part:
            try:
                reader.seek(start)
                # A slice per socket read: cancellation is checked, and the level
                # told of the bytes, within a few round trips on a slow connection.
                while n < len(into) and not cancel.is_set():
                    k = reader.readinto(into[n : n + RECEIVE_SLICE])
                    if k == 0:
                        raise errors.ProtocolError(
                            f"part {start}-{stop} ended after {n} bytes",
                            operation="read",
                            bucket=bucket,
                            key=key,
                        )
                    part.observe(k)
                    n += k
                return PartResult(n, stats.requests, stats.resumes)
            except Exception:
                # A failed part returns no PartResult: its cost is told here instead. A
                # part cancelled (a seek, a close) did not fail: it is waste, not counted.
                if account is not None and not cancel.is_set():
                    account(stats.requests, stats.resumes)
                raise
            finally:
                reader.close()

    return fetch


@dataclass(eq=False)
class _Part:
    start: int
    stop: int
    buf: PartBuffer
    cancel: threading.Event = field(default_factory=threading.Event)
    task: Task[PartResult] | None = None
    counted: bool = False
    viewed: bool = False

    @property
    def view(self) -> memoryview:
        return memoryview(self.buf)[: self.stop - self.start]


class Prefetcher:
    """Worker threads and part buffers shared by the part streams of one reader."""

    def __init__(
        self,
        fetch: Fetch,
        *,
        workers: int,
        part_size: int,
        watch: WatchFactory | None = None,
        level: SharedLevel | None = None,
    ) -> None:
        self.fetch = fetch
        self.workers = workers
        # How many parts to keep in flight ahead of the reader (all buffers allow if None).
        self.level = level
        self.part_size = part_size
        self.limit = max(workers + 1, 4)
        self._made = 0
        self._free: queue.SimpleQueue[PartBuffer] = queue.SimpleQueue()
        self._pool = PartPool(workers, name="readahead", watch=watch)
        self.lock = threading.Lock()
        self.wasted = 0  # bytes fetched but never delivered (cancelled or unread parts)

    @classmethod
    def pinned_like(
        cls,
        reader: RangeReader,
        *,
        workers: int,
        part_size: int,
        level: SharedLevel | None,
        account: Account | None = None,
    ) -> Prefetcher:
        """Workers fetching parts of the version ``reader`` is pinned to, with its
        transport and resume limit; ``account`` hears what each part cost."""
        fetch = part_fetcher(reader, level=level, account=account)
        watch = reader.transport.watch
        return cls(fetch, workers=workers, part_size=part_size, watch=watch, level=level)

    def take_buffer(self, *, block: bool) -> PartBuffer | None:
        """A free part buffer; a new one while under the limit; else wait or None."""
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        if self._made < self.limit:
            self._made += 1
            # Not populated: the workers' socket reads fault its pages in, in parallel.
            return part_buffer(self.part_size)
        if not block:
            return None
        return self._free.get()

    def give_back(self, buf: PartBuffer) -> None:
        self._free.put(buf)

    def submit(self, part: _Part) -> None:
        part.task = self._pool.submit(self.fetch, part.start, part.stop, part.view, part.cancel)

    def close(self) -> None:
        """Stop the workers (their parts were cancelled by their streams) and join them."""
        self._pool.close()
        while True:
            try:
                self._free.get_nowait()
            except queue.Empty:
                break


class PartStream:
    """The object's bytes from ``pos`` to ``end``, served from parts fetched ahead."""

    def __init__(
        self,
        pool: Prefetcher,
        start: int,
        end: int,
        observer: Observer | None,
        on_part: Callable[[PartResult], None],
    ) -> None:
        self.pool = pool
        self.pos = start
        self.end = end
        self.observer = observer
        self._on_part = on_part
        self._next = start
        self._parts: deque[_Part] = deque()  # scheduled, in order; read-past ones at the head
        self._viewed: list[_Part] = []  # read past, handed out as views: wait for settle()
        self._closed = False
        self._schedule()

    @property
    def done(self) -> bool:
        return self.pos >= self.end

    def _schedule(self, *, block: bool = False) -> None:
        """Keep parts in flight ahead of ``pos``, as many as free buffers (and the
        pool's adaptive level) allow."""
        while self._next < self.end:
            level = self.pool.level
            if not block and level is not None:
                pending = sum(1 for p in self._parts if p.stop > self.pos)
                if pending >= max(1, level.current()):
                    return
            buf = self.pool.take_buffer(block=block)
            if buf is None:
                return
            block = False
            stop = min(self._next + self.pool.part_size, self.end)
            part = _Part(self._next, stop, buf)
            self.pool.submit(part)
            self._parts.append(part)
            self._next = stop
        level = self.pool.level
        if self._next >= self.end and level is not None and not level.settled:
            # The last part is handed out: nothing is left for the level to start, and
            # a window judged from now on would judge parts it did not start.
            level.hold()

    def _current(self) -> _Part:
        """The part holding ``pos``, fetched (waits for it; re-raises its failure)."""
        part = next((p for p in self._parts if p.stop > self.pos), None)
        if part is None:
            self._schedule(block=True)
            part = self._parts[-1]
        assert part.task is not None
        future = part.task.future
        level = self.pool.level
        while level is not None and not future.done():
            # A level raised while this part is on its way starts its parts now, not
            # when this one arrives.
            changed = level.changed()
            if changed is None:
                break
            waiting: list[Future[Any]] = [future, changed]
            wait(waiting, return_when=FIRST_COMPLETED)
            self._schedule()
        result = future.result()
        if not part.counted:
            part.counted = True
            self._on_part(result)
        return part

    def _retire(self) -> None:
        """Release the buffers of parts read past (views wait for settle())."""
        while self._parts and self._parts[0].stop <= self.pos:
            part = self._parts.popleft()
            if part.viewed:
                self._viewed.append(part)
            else:
                self.pool.give_back(part.buf)
        self._schedule()

    def _take(self, n: int) -> memoryview:
        """A view of up to ``n`` bytes at ``pos`` (within one part); advances."""
        part = self._current()
        off = self.pos - part.start
        view = part.view[off : off + min(n, part.stop - self.pos)]
        if self.observer is not None:
            self.observer(self.pos, view)
        self.pos += len(view)
        return view

    def read(self, n: int) -> bytes:
        n = min(n, self.end - self.pos)
        if n > self.pool.part_size:
            # Spanning many parts: land them in one buffer, releasing each as it goes.
            out = bytearray(n)
            self.readinto(memoryview(out))
            return bytes(out)
        chunks = []
        while n > 0:
            view = self._take(n)
            chunks.append(view)
            n -= len(view)
        data = b"".join(chunks)  # the one copy
        self._retire()
        return data

    def read1(self, n: int) -> bytes:
        if self.pos >= self.end or n <= 0:
            return b""
        data = bytes(self._take(n))
        self._retire()
        return data

    def readinto(self, into: memoryview) -> int:
        n = 0
        while n < len(into) and self.pos < self.end:
            view = self._take(len(into) - n)
            into[n : n + len(view)] = view  # the one copy
            n += len(view)
            self._retire()
        return n

    def discard(self, n: int) -> None:
        while n > 0 and self.pos < self.end:
            n -= len(self._take(n))
            self._retire()

    def fill_view(self, n: int) -> tuple[memoryview, int]:
        """The rest of the current part as (view of the whole part, offset of ``pos``),
        without copying; the buffer stays valid until :meth:`settle` releases it."""
        if self.pos >= self.end:
            return memoryview(b""), 0
        part = self._current()
        off = self.pos - part.start
        whole = part.view
        if self.observer is not None:
            self.observer(self.pos, whole[off:])
        self.pos = part.stop
        part.viewed = True
        self._retire()
        return whole, off

    def settle(self, keep: object) -> None:
        """Recycle viewed buffers, except the one ``keep`` (the caller's buffer) views."""
        kept = []
        for part in self._viewed:
            if getattr(keep, "obj", None) is part.buf:
                kept.append(part)
            else:
                self.pool.give_back(part.buf)
        self._viewed = kept
        self._schedule()

    def close(self) -> None:
        """Cancel parts not yet delivered and interrupt their transfers."""
        if self._closed:
            return
        self._closed = True
        for part in self._viewed:
            self.pool.give_back(part.buf)
        self._viewed = []
        for part in self._parts:
            part.cancel.set()
            task = part.task
            assert task is not None
            task.interrupt()  # never started, or its connection is shut down
            delivered = max(0, min(self.pos, part.stop) - part.start)
            task.future.add_done_callback(self._recycler(part, delivered))
        self._parts.clear()

    def _recycler(self, part: _Part, delivered: int) -> Callable[[Future[PartResult]], None]:
        pool = self.pool

        def recycle(future: Future[PartResult]) -> None:
            # exception(), not result(): re-raising the part's failure here would hang
            # this frame, and the frames that closed the reader, on its traceback, in a
            # cycle through the future that only a garbage collection breaks.
            failed = future.cancelled() or future.exception() is not None
            fetched = 0 if failed else future.result().nbytes
            with pool.lock:
                pool.wasted += max(0, fetched - delivered)
            pool.give_back(part.buf)

        return recycle
