"""``SharedLevel``: the adaptive level, fed by worker threads and read by the pool.

:class:`~objsdk._core.adaptive.Adaptive` is the policy (pure, the clock passed in);
this is where it meets threads and clocks: a lock, the wall and CPU clocks its
:class:`~objsdk._core.adaptive.Preset` asks for, a future that wakes the pool when the
level changes, and :class:`InFlight`, the one way a part reports to it: its bytes, its
start and end, and the throttling answers its requests get
(:meth:`SharedLevel.throttled`: the level halves and holds).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future

from objsdk._core.adaptive import Adaptive, Clock, Preset
from objsdk._io import host_cpu
from objsdk._transport.retry import hearing_throttles

__all__ = ["InFlight", "SharedLevel"]


class SharedLevel:
    """An :class:`Adaptive` level that worker threads feed and the pool reads."""

    @classmethod
    def unless(
        cls,
        parallel: int | None,
        *,
        preset: Preset,
        begin: bool = True,
        endpoint: str | None = None,
    ) -> SharedLevel | None:
        """The level of ``preset`` where ``parallel`` is None (None otherwise: the
        caller's own number holds); the one way a transfer gets an adaptive level.

        Its CPU clock is the preset's: the process's CPU time (all threads) against the
        cores this process may run on, or the reads timed with :meth:`reading` against
        one core (with the time they waited for bytes), or none. With a clock, a server
        at ``endpoint`` on this host has the whole machine's busy time weighed too
        (:mod:`~objsdk._io.host_cpu`). ``begin=False``: the first request starts later
        (see :meth:`begin`)."""
        if parallel is not None:
            return None
        shared = (
            preset.clock is not Clock.NONE
            and endpoint is not None
            and host_cpu.server_on_this_host(endpoint)
            and host_cpu.measurable()
        )
        host = float(host_cpu.host_cores()) if shared else None
        if preset.clock is Clock.PROCESS:
            return cls(preset.policy(_usable_cores(), host), begin=begin, cpu=time.process_time)
        level = cls(preset.policy(host_cores=host), begin=False)
        if preset.clock is Clock.READS:
            level._cpu, level._waited = level._read_time, level._wait_time
        if begin:
            level.begin()
        return level

    def __init__(
        self,
        adaptive: Adaptive,
        *,
        begin: bool = True,
        cpu: Callable[[], float] | None = None,
    ) -> None:
        """``cpu``: the client's CPU time, in seconds, for the level's rule that one
        stream must leave room for more in the cores (no such rule without it)."""
        self._adaptive = adaptive
        self._lock = threading.Lock()
        self._changed: Future[None] = Future()
        # Set once the level holds for good; made by the first wait_settled (a reader is
        # opened per object, and most never wait).
        self._settled: threading.Event | None = None
        self._released = False  # release(): waiters return at once from now on
        self._cpu = cpu
        self._waited: Callable[[], float] | None = None
        self._reads = 0.0  # CPU seconds of the reads timed by reading()
        self._waits = 0.0  # seconds those reads spent off the CPU: waiting for bytes
        self._cuts = 0  # times a throttling answer cut the level
        if begin:
            self.begin()

    def begin(self) -> None:
        """The first request starts now (without ``begin=False``: at construction)."""
        with self._lock:
            self._adaptive.begin(time.monotonic(), self._cpu() if self._cpu else None)

    @property
    def settled(self) -> bool:
        return self._adaptive.settled

    @property
    def whole_parts(self) -> bool:
        """Bytes are seen only as whole parts end (see :class:`Adaptive`)."""
        return self._adaptive.whole_parts

    def observe(self, nbytes: int) -> None:
        with self._lock:
            if self._adaptive.settled:
                return
            before = self._adaptive.level
            cpu = self._cpu() if self._cpu is not None else None
            waited = self._waited() if self._waited is not None else None
            host = host_cpu.busy_seconds if self._adaptive.host_cores is not None else None
            self._adaptive.observe(nbytes, time.monotonic(), cpu, waited, host)
            if self._adaptive.settled and self._settled is not None:
                self._settled.set()
            if self._adaptive.level == before:
                return
            changed, self._changed = self._changed, Future()
        changed.set_result(None)

    @property
    def cuts(self) -> int:
        """How many times throttling answers cut the level so far."""
        return self._cuts

    def throttled(self, since: int) -> None:
        """A part that started after ``since`` cuts (:attr:`cuts` then) got a throttling
        answer: the level halves and holds (:meth:`Adaptive.throttled`), unless it was
        cut since that part started. Parts already in flight at a cut were sent at the
        level before it, and their answers, which come in a burst, say nothing of the
        level after it: one cut per round of parts, as TCP cuts once per round trip."""
        with self._lock:
            if since != self._cuts:
                return
            self._cuts += 1
            self._adaptive.throttled()
            if self._settled is not None:
                self._settled.set()
            changed, self._changed = self._changed, Future()
        changed.set_result(None)

    def hold(self) -> None:
        """The last part has been handed out: the level holds (see :meth:`Adaptive.hold`)."""
        with self._lock:
            self._adaptive.hold()
            if self._settled is not None:
                self._settled.set()

    def wait_settled(self, timeout: float | None = None) -> bool:
        """Wait until the level holds for good (:attr:`settled`), at most ``timeout``
        seconds, or until :meth:`release`; whether it holds."""
        with self._lock:
            if self._adaptive.settled or self._released:
                return self._adaptive.settled
            if self._settled is None:
                self._settled = threading.Event()
            settled = self._settled
        settled.wait(timeout)
        return self._adaptive.settled

    def release(self) -> None:
        """Wake every :meth:`wait_settled`, now and later (the level's reader closed)."""
        with self._lock:
            self._released = True
            if self._settled is not None:
                self._settled.set()

    def part_started(self) -> None:
        """A part delivers (see :class:`InFlight`, which calls this)."""
        with self._lock:
            self._adaptive.part_started()

    def part_ended(self) -> None:
        """A part that had started is over."""
        with self._lock:
            self._adaptive.part_ended()

    def current(self) -> int:
        """The level: parts to keep in flight now."""
        return self._adaptive.level

    def changed(self) -> Future[None] | None:
        """A future that completes when the level next changes (None once settled:
        it will not change again)."""
        with self._lock:
            return None if self._adaptive.settled else self._changed

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Count the calling thread's CPU time in the block toward :attr:`Clock.READS`,
        and the rest of the block's time as waiting for bytes (while the level still
        climbs; a read that raises is not counted)."""
        if self._adaptive.settled:
            yield
            return
        cpu, wall = time.thread_time(), time.perf_counter()
        yield
        used = time.thread_time() - cpu
        self._reads += used
        self._waits += max(time.perf_counter() - wall - used, 0.0)

    def _read_time(self) -> float:
        return self._reads

    def _wait_time(self) -> float:
        return self._waits


class InFlight:
    """One part in flight, as its level sees it::

        with InFlight(level) as part:
            ...
            part.observe(n)  # n more bytes arrived

    The part delivers from its first bytes (from its start where the level sees bytes
    only as whole parts end) until the block exits or :meth:`end`; it may deliver again
    after :meth:`end` (a stream that serves the level more than once). A throttling
    answer to a request the block's thread sends cuts the level (:meth:`hearing`). With
    no level (a fixed number in flight) it does nothing.
    """

    def __init__(self, level: SharedLevel | None) -> None:
        self._level = level
        self._started = False
        # The level's cuts when the part was made: its requests were sent at the level
        # after them (see SharedLevel.throttled).
        self._since = level.cuts if level is not None else 0
        self._hearing = contextlib.ExitStack()

    def __enter__(self) -> InFlight:
        if self._level is not None:
            self._hearing.enter_context(self.hearing())
            if self._level.whole_parts:
                self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()  # whatever ended it
        self._hearing.close()

    @contextlib.contextmanager
    def hearing(self) -> Iterator[None]:
        """Throttling answers to this thread's requests in the block cut the level, as
        answers to this part (:meth:`SharedLevel.throttled`: unless it was cut since
        the part was made)."""
        level, since = self._level, self._since
        if level is None:
            yield
            return
        with hearing_throttles(lambda: level.throttled(since)):
            yield

    def observe(self, nbytes: int) -> None:
        """``nbytes`` more bytes of this part arrived (0: none yet, but time went by)."""
        if self._level is None:
            return
        if nbytes and not self._started:
            self._start()
        self._level.observe(nbytes)

    def end(self) -> None:
        """The part is over (done, failed or cancelled)."""
        if self._started and self._level is not None:
            self._started = False
            self._level.part_ended()

    def _start(self) -> None:
        assert self._level is not None
        self._started = True
        self._level.part_started()


def _usable_cores() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return max(1, len(affinity(0)))
    return max(1, os.cpu_count() or 1)
