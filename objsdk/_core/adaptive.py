"""How many parts to keep in flight: a hill climb on the aggregate rate (pure).

Where a connection is limited by bandwidth-delay or the server's per-connection rate
(a bucket across a network), more connections move more bytes; on a fast local link
one stream already fills the pipe and more only add overhead. Nothing tells which case
holds, so :class:`Adaptive` measures. It starts at one. The first step goes straight
to the cap, unless one stream already keeps the client's CPU busy (below); each later
step doubles the level, while the aggregate rate keeps rising by at least ``gain`` per
step. A step that does not pay is undone; the levels between the best one and the one
that did not pay are tried upwards from twice the best, and the best level measured
holds from then on. A first step that pays, but by less than ``1/factor`` of
what its parts would move at the first level's rate each (the server or client
saturates well below it), is checked once against the level one ``factor`` under it,
and the fewer parts are kept unless the more pay by ``gain``. Every window spent below
the cap costs a transfer that needs the cap, and a window above a level that would do
costs little (the extra parts share the same rate), so the climb starts with its
biggest step.

After a change, the bytes of the next *lag* seconds are not counted, where the lag is
the time the first request took to its first bytes: new parts need that long (a
request and a round trip) before they add to the rate, and a window that counted
their wait would judge a level by its start-up and stop climbing early on the very
networks where more connections pay.

``gain`` (1.1) also bounds what holding a level can cost: a level is kept over another
only if that one did not beat it by ``gain``, so the level held is at least ``1/gain``
(0.91x) as fast as any level measured. A gain much nearer 1 would take steps on the
noise of a window (a few percent on a quiet link); 1.15 let uploads on a 100 MB/s link
settle at four parts, 0.88x of sixteen.

The CPU decides whether to climb at all: where the caller passes the client's CPU
time, the first step is taken only if ``factor`` streams at the single stream's CPU
share fit within ``cores`` (the cores the work can use: one for a reader whose caller's
thread copies every byte, all of them for a transfer whose workers receive and write in
parallel, since socket reads and file writes release the GIL); else the level stays at
one. More connections pay where each is held back by the network and the client mostly
waits; where one stream already keeps the client busy for a good part of its time (a
server on the same host), more streams only add CPU, which on a shared box the server
needs. The share does not size the step: measured over a few tens of milliseconds, it
holds the stream's start-up (a thread, a connection, the first request), and a step
sized by it stopped short of the cap on links where the cap paid, which then came one
window later. A step that overshoots is caught by the rate (the look one step down,
above). Later steps are not held to the CPU: a level that paid has shown what it costs.

The clock is passed in, so the policy is tested without threads or a network.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from objsdk import errors

__all__ = ["Adaptive", "Level"]


@dataclass(frozen=True)
class Level:
    """One measured level: parts in flight, the aggregate rate seen (bytes/s) and,
    if known, the client's CPU seconds per second meanwhile."""

    parallel: int
    rate: float
    cpu_share: float | None = None


@dataclass
class Adaptive:
    """The level to run at, adjusted from completed bytes.

    ``cores`` is how much CPU the first step may need (see the module's notes).

    ``window`` is the least number of bytes per part in flight (``min_seconds`` the
    least time) a level is measured over before it is judged, ``first_window`` (if
    given) the bytes the first level is judged over, however short their time: a
    caller that sizes the first window (an upload's small probe part, timed from its
    request) has chosen what one stream is judged by, and holding it to ``min_seconds``
    as well would judge the next, whole part alone instead; ``max_lag`` bounds the
    start-up not counted after a change. ``whole_parts``: bytes are seen only as whole
    parts end (an upload's), so the first window counts from :meth:`begin` even where
    parts are reported, as all of the first part's bytes went out after it.
    ``history`` lists the levels measured so far.

    A caller that reports each part's first bytes and end (:meth:`part_started`,
    :meth:`part_ended`) gets windows that open only once ``target`` parts are delivering
    after a raise, or no more than ``target`` after a step down (or ``max_lag`` after the
    change, whichever comes first): new
    connections can take longer than the first request to start (a handshake, a
    thread), and after a step down the parts of the level above still run for a while;
    neither belongs to the level measured.
    """

    cap: int = 16
    gain: float = 1.1
    factor: int = 4
    window: int = 16 << 20
    min_seconds: float = 0.03
    max_lag: float = 0.25
    first_window: int | None = None
    whole_parts: bool = False
    cores: float = 1.0
    start: int = 1
    level: int = field(init=False)
    settled: bool = field(init=False, default=False)
    history: list[Level] = field(init=False, default_factory=list)
    _best: Level | None = field(init=False, default=None)
    _ceiling: int | None = field(init=False, default=None)  # least level that did not pay
    _below: Level | None = field(init=False, default=None)  # a first step looked under
    _began: float | None = field(init=False, default=None)
    _cpu_began: float | None = field(init=False, default=None)
    _lag: float | None = field(init=False, default=None)  # first request to first bytes
    _since: float | None = field(init=False, default=None)  # the window's start
    _cpu_since: float | None = field(init=False, default=None)  # CPU time at its start
    _bytes: int = field(init=False, default=0)
    _delivering: int | None = field(init=False, default=None)  # None: not reported
    _deadline: float = field(init=False, default=0.0)  # a window opens by then anyway
    _previous: int = field(init=False, default=1)  # the level before the last change

    def __post_init__(self) -> None:
        if self.cap < 1 or self.start < 1 or self.gain <= 1.0 or self.factor < 2:
            raise errors.InvalidArgument(
                f"adaptive parallelism needs cap >= 1, start >= 1, gain > 1 and factor >= 2; "
                f"got cap={self.cap}, start={self.start}, gain={self.gain}, factor={self.factor}"
            )
        self.level = min(self.start, self.cap)
        self.settled = self.level >= self.cap

    @property
    def target(self) -> int:
        """Parts to keep in flight now."""
        return self.level

    def begin(self, now: float, cpu: float | None = None) -> None:
        """The first request starts at ``now``; ``cpu``: the client's CPU time then, in
        seconds (optional, as in observe). Where parts are not reported, the first
        window starts here: the first bytes seen are then those of a whole part."""
        if self._began is None:
            self._began, self._cpu_began = now, cpu

    def part_started(self) -> None:
        """A part delivered its first bytes."""
        self._delivering = (self._delivering or 0) + 1

    def part_ended(self) -> None:
        """A part that had started is over (done, failed or cancelled)."""
        self._delivering = max((self._delivering or 0) - 1, 0)

    def observe(self, nbytes: int, now: float, cpu: float | None = None) -> None:
        """``nbytes`` more bytes arrived by ``now``; may change :attr:`target`.
        ``cpu`` is the client's CPU time in seconds by ``now`` (any origin, the same
        clock every call), if the caller measures it."""
        if self.settled:
            return
        if self._lag is None:
            began = now if self._began is None else self._began
            self._lag = min(max(now - began, 0.0), self.max_lag)
        if self._since is None:
            unreported = self._delivering is None or self.whole_parts
            if unreported and not self.history and self._began is not None:
                # Whole parts are seen as they end: their bytes count from the start.
                self._since, self._cpu_since = self._began, self._cpu_began
            else:
                if self._delivering is not None and now < self._deadline:
                    # Parts of the level are still starting (after a raise), or parts
                    # of the level above are still running (after a step down).
                    raised = self.level > self._previous
                    if self._delivering < self.level if raised else self._delivering > self.level:
                        return
                # The window starts here; these bytes were on their way before it.
                self._since, self._cpu_since = now, cpu
                return
        if now < self._since:
            return  # a new level's parts are still starting
        if self._cpu_since is None:
            self._cpu_since = cpu
        self._bytes += nbytes
        elapsed = now - self._since
        first_window = self.first_window if self._best is None else None
        need = self.window * self.level if first_window is None else first_window
        least = self.min_seconds if first_window is None else 0.0
        if self._bytes < need or elapsed < least or elapsed <= 0:
            return
        share = None
        if cpu is not None and self._cpu_since is not None:
            share = max(cpu - self._cpu_since, 0.0) / elapsed
        measured = Level(self.level, self._bytes / elapsed, share)
        self.history.append(measured)
        best = self._best
        if self._below is not None:
            # Below a first step that paid poorly: keep whichever does as well with fewer.
            high, self._below = self._below, None
            if measured.rate * self.gain > high.rate:
                self._best = best = measured
                self._ceiling = high.parallel
                nxt = measured.parallel * 2
            else:
                self._best = best = high
                nxt = high.parallel
        elif best is None or measured.rate >= best.rate * self.gain:
            first = best
            self._best = best = measured
            if first is None:
                nxt = self._first_step(share)
            elif len(self.history) == 2 and measured.rate * self.factor < first.rate * self.level:
                # The first step paid, but less than 1/factor of what its parts could:
                # the server or the client saturates well below it. Look one step down,
                # once. (Not for less: a step down is measured while the parts of the
                # step above still run, which flatters it.)
                self._below = measured
                nxt = max(self.level // self.factor, first.parallel + 1)
            else:
                nxt = min(self.level * 2, self.cap)
        else:
            self._ceiling = self.level  # this step did not pay
            nxt = best.parallel * 2  # the level between, once
        self._previous = self.level
        if self._below is not None:
            self.level = nxt
        elif nxt <= best.parallel or (self._ceiling is not None and nxt >= self._ceiling):
            self.level, self.settled = best.parallel, True
        else:
            self.level = nxt
        if self._delivering is None:
            self._since = now + self._lag
        else:
            self._since, self._deadline = None, now + self.max_lag
        self._cpu_since, self._bytes = None, 0

    def hold(self) -> None:
        """Nothing is left to start: the level can no longer change what runs, so it
        holds where it is (what the stats report) and measuring stops. A level judged
        later would be judged on parts it did not start."""
        self.settled = True

    def _first_step(self, share: float | None) -> int:
        """The cap, if ``factor`` times this level's streams at ``share`` of a core
        each fit within ``cores`` (or the share is not known); else this level."""
        least = min(self.level * self.factor, self.cap)
        if share is not None and share * least > self.level * self.cores:
            return self.level  # one stream keeps the client busy: more only add CPU
        return self.cap

    def describe(self) -> str:
        """The levels tried and their rates, for stats and logs."""
        steps = ", ".join(f"{h.parallel}: {h.rate / (1 << 20):.0f} MiB/s" for h in self.history)
        return f"chose {self.level} ({steps})" if steps else f"at {self.level}"
