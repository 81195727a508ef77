"""The adaptive level: how many parts a transfer keeps in flight (pure, the clock passed in).

The *level* is the number of parts in flight. :class:`Adaptive` starts it at one and
moves it through named :class:`Phase` s, one method each, judging every level by the
aggregate rate measured over a window:

* :attr:`Phase.FIRST` judges the level it started at, over ``first_windows`` windows
  in a row, by the best of them: its fastest rate and its busiest CPU share (a window
  the server stalled in says what the network would give, not what a stream costs),
  or at the first window that shows the stream held back by its path: the caller
  waited for bytes at least ``min_wait`` of it (where that is measured), and the stream
  cost the client under ``1/cheap`` of ``cores`` (a stall would have to stop a stream
  that keeps a fifth of a core busy for most of the window to look that cheap).
  The next level is the cap, unless the client's CPU (where a clock is given) would
  not hold ``factor`` streams at the one stream's share within ``cores``, or the
  machine, where the server shares it (``host_cores`` given) and the stream costs
  the client more than ``1/host_costly`` of ``cores``, would not hold ``host_room``
  times the CPU it was busy with over those windows, or the
  caller (where that is measured) waited for bytes less than ``min_wait`` of every
  window: then it settles. A caller that hardly waits is slower than its stream:
  parts that delivered in no time would raise its rate by ``1 / (1 - wait)`` at most
  (1.33x at a quarter), at several times a stream's CPU per byte.
* :attr:`Phase.FIRST_STEP` judges that step as :attr:`Phase.CLIMBING` does, except
  that a step that pays, but by less than ``1/factor`` of what its parts would move at
  the first level's rate each, goes to :attr:`Phase.BELOW` first.
* :attr:`Phase.BELOW` judges the level one ``factor`` under that first step, once: the
  fewer parts are kept unless the more beat them by ``gain``.
* :attr:`Phase.CLIMBING` doubles the level while each step pays by ``gain``. A step
  that does not is undone, and the levels between the best and it are tried upwards.
* :attr:`Phase.SETTLED`: the best level measured holds; nothing is measured any more.

A throttling answer (429, 503 SlowDown: :meth:`Adaptive.throttled`) halves the level,
at least one part, whatever the phase, and settles it there: the server said how many
requests it takes, and no window of bytes outweighs that. (Multiplicative decrease, as
TCP's; with no increase after it, a transfer that was throttled stays at its lower
level to its end.)

Windows: after a change, bytes count only once the new level runs. Where parts are
reported (:meth:`Adaptive.part_started`, :meth:`Adaptive.part_ended`), a window opens
once ``level`` parts deliver after a raise, or no more than ``level`` after a step
down, or ``max_lag`` after the change, whichever comes first; where they are not, it
opens a lag after the change, the time the first request took to its first bytes
(at most ``max_lag``). A window is judged once it holds ``window`` bytes per part in
flight and ``min_seconds``; the first one over ``first_window`` bytes alone, if given.

A level held is at least ``1/gain`` as fast as any level measured. The measurements
behind the constants and the presets are in docs/design.md ("Adaptive parallelism").
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from objsdk import errors
from objsdk._core.sizes import ADAPTIVE_CAP, ADAPTIVE_FIRST_WINDOWS, ADAPTIVE_WINDOW

__all__ = ["Adaptive", "Clock", "Measurement", "Phase", "Preset"]


class Phase(enum.Enum):
    """Where the climb is: which judgement the next measured window gets."""

    FIRST = "first"
    FIRST_STEP = "first step"
    BELOW = "below"
    CLIMBING = "climbing"
    SETTLED = "settled"


class Clock(enum.Enum):
    """Which CPU time a level weighs before its first step (see :class:`Preset`)."""

    NONE = "none"  # the rate decides alone
    PROCESS = "process"  # the process's CPU time, against the cores it may run on
    READS = "reads"  # the CPU time of the reads the caller times, against one core,
    # and the time they waited for bytes


@dataclass(frozen=True)
class Measurement:
    """One measured level: parts in flight, the aggregate rate seen (bytes/s) and, if
    known, the client's CPU seconds per second meanwhile, the share of the window
    the caller spent waiting for bytes, and the CPU seconds per second the whole
    machine was busy (where the server shares it; the first level only)."""

    level: int
    rate: float
    cpu_share: float | None = None
    wait_share: float | None = None
    host_share: float | None = None


@dataclass(frozen=True)
class Preset:
    """What one kind of transfer measures: its window, how its bytes are seen, and the
    CPU clock its first step weighs. The reader, downloads and uploads each have one;
    :meth:`policy` builds the :class:`Adaptive` for it."""

    window: int = ADAPTIVE_WINDOW
    first_window: int | None = None
    first_windows: int = 1
    whole_parts: bool = False
    clock: Clock = Clock.NONE

    @classmethod
    def reader(cls) -> Preset:
        """``ObjectFile``'s read-ahead: bytes seen as they arrive; the CPU weighed is
        the reader's own network reads, in the caller's one thread, over the best of
        ``ADAPTIVE_FIRST_WINDOWS`` first windows."""
        return cls(first_windows=ADAPTIVE_FIRST_WINDOWS, clock=Clock.READS)

    @classmethod
    def download(cls) -> Preset:
        """Downloads: bytes seen as they arrive; the CPU weighed is the process's,
        against every core it may use (workers receive and write in parallel), over the
        best of ``ADAPTIVE_FIRST_WINDOWS`` first windows."""
        return cls(first_windows=ADAPTIVE_FIRST_WINDOWS, clock=Clock.PROCESS)

    @classmethod
    def upload(cls, part_size: int, probe: int | None = None) -> Preset:
        """Uploads: bytes seen only as whole parts end, so a level is judged over at
        least a part per part in flight, and the first over the ``probe`` part alone;
        the rate decides alone (the first window holds the start-up)."""
        return cls(window=max(part_size, ADAPTIVE_WINDOW), first_window=probe, whole_parts=True)

    def policy(self, cores: float = 1.0, host_cores: float | None = None) -> Adaptive:
        """A new climb for this kind of transfer, up to ``ADAPTIVE_CAP`` parts
        (``host_cores``: the machine's, where the server shares them)."""
        return Adaptive(
            cap=ADAPTIVE_CAP,
            window=self.window,
            first_window=self.first_window,
            first_windows=self.first_windows,
            whole_parts=self.whole_parts,
            cores=cores,
            host_cores=host_cores,
        )


@dataclass
class Adaptive:
    """The level to run at, moved through :class:`Phase` s by the bytes observed.

    ``cores``: the CPU the first step may need, ``min_wait`` the share of a window a
    caller must wait for bytes for it, ``host_cores``, ``host_room`` and
    ``host_costly`` the rule for a server on the client's machine, and
    ``first_windows`` the windows the start level is judged over, and ``cheap`` when
    one is enough (see :attr:`Phase.FIRST`). ``window``, ``min_seconds``,
    ``first_window`` and ``max_lag`` bound the windows (see the module).
    ``whole_parts``: bytes are seen only as whole parts end (an upload's), so the first
    window counts from :meth:`begin` even where parts are reported. ``history`` lists
    every window measured so far.
    """

    cap: int = 16
    gain: float = 1.1
    factor: int = 4
    window: int = 16 << 20
    min_seconds: float = 0.03
    max_lag: float = 0.25
    min_wait: float = 0.25
    first_window: int | None = None
    first_windows: int = 1
    whole_parts: bool = False
    cores: float = 1.0
    host_cores: float | None = None
    host_room: float = 2.0
    host_costly: float = 8.0
    cheap: float = 16.0
    start: int = 1
    level: int = field(init=False)
    phase: Phase = field(init=False, default=Phase.FIRST)
    history: list[Measurement] = field(init=False, default_factory=list)
    _best: Measurement | None = field(init=False, default=None)
    _ceiling: int | None = field(init=False, default=None)  # least level that did not pay
    _stepped: Measurement | None = field(init=False, default=None)  # looked under (BELOW)
    # The first request: when it started, the CPU time then, the time to its first bytes.
    _began: float | None = field(init=False, default=None)
    _cpu_began: float | None = field(init=False, default=None)
    # The first level's first counted bytes: when, and the machine's busy time then.
    _host_from: tuple[float, float | None] | None = field(init=False, default=None)
    _lag: float | None = field(init=False, default=None)
    # The window: None until it opens; the CPU time at its start; the bytes counted.
    _since: float | None = field(init=False, default=None)
    _cpu_since: float | None = field(init=False, default=None)
    _waited_since: float | None = field(init=False, default=None)
    _bytes: int = field(init=False, default=0)
    # Parts reported delivering (None: parts are not reported); a window opens by
    # ``_deadline`` whatever they do; the level before the last change.
    _delivering: int | None = field(init=False, default=None)
    _deadline: float = field(init=False, default=0.0)
    _previous: int = field(init=False, default=1)

    def __post_init__(self) -> None:
        if (
            self.cap < 1
            or self.start < 1
            or self.gain <= 1.0
            or self.factor < 2
            or self.first_windows < 1
            or not 0.0 <= self.min_wait < 1.0
        ):
            raise errors.InvalidArgument(
                "adaptive parallelism needs cap >= 1, start >= 1, gain > 1, factor >= 2, "
                f"first_windows >= 1 and 0 <= min_wait < 1; got cap={self.cap}, "
                f"start={self.start}, gain={self.gain}, factor={self.factor}, "
                f"first_windows={self.first_windows}, min_wait={self.min_wait}"
            )
        self.level = min(self.start, self.cap)
        if self.level >= self.cap:
            self.phase = Phase.SETTLED

    @property
    def settled(self) -> bool:
        """The level holds: nothing is measured any more."""
        return self.phase is Phase.SETTLED

    # -- what the caller reports ----------------------------------------------------------

    def begin(self, now: float, cpu: float | None = None) -> None:
        """The first request starts at ``now``; ``cpu``: the client's CPU time then, in
        seconds (optional, as in observe). Where parts are not reported, the first
        window starts here: the first bytes seen are then those of a whole part."""
        if self._began is None:
            self._began, self._cpu_began = now, cpu

    def part_started(self) -> None:
        """A part delivered its first bytes (an upload's: it started)."""
        self._delivering = (self._delivering or 0) + 1

    def part_ended(self) -> None:
        """A part that had started is over (done, failed or cancelled)."""
        self._delivering = max((self._delivering or 0) - 1, 0)

    def hold(self) -> None:
        """Nothing is left to start: the level can no longer change what runs, so it
        holds where it is (what the stats report) and measuring stops. A level judged
        later would be judged on parts it did not start."""
        self.phase = Phase.SETTLED

    def throttled(self) -> None:
        """A request was refused for load (429, 503 SlowDown): the level halves (at
        least one part) and holds for the rest of the transfer (see the module)."""
        self._previous = self.level
        self.level = max(1, self.level // 2)
        self.phase = Phase.SETTLED

    def observe(
        self,
        nbytes: int,
        now: float,
        cpu: float | None = None,
        waited: float | None = None,
        host: Callable[[], float | None] | None = None,
    ) -> None:
        """``nbytes`` more bytes arrived by ``now``; may change :attr:`level`. ``cpu``
        is the client's CPU time in seconds by ``now``, and ``waited`` the seconds the
        caller has spent waiting for bytes by ``now`` (each any origin, the same clock
        every call), if the caller measures them. ``host`` tells the CPU seconds the
        whole machine has been busy (None: unknown), where ``host_cores`` is given; it
        is asked twice, at the first level's first counted bytes and as that level is
        judged (reading it costs more than a clock)."""
        if self.phase is Phase.SETTLED:
            return
        if self._lag is None:
            began = now if self._began is None else self._began
            self._lag = min(max(now - began, 0.0), self.max_lag)
        if not self._counting(now, cpu, waited):
            return
        if self._host_from is None and host is not None and self.host_cores is not None:
            # From here, not from the request's start: a server's start-up (opening
            # the object, filling a proxy's buffers) is no cost of a stream.
            self._host_from = (now, host())
        assert self._since is not None
        self._bytes += nbytes
        elapsed = now - self._since
        # The first level over ``first_window`` alone, where given (see the module).
        first = self.first_window if self.phase is Phase.FIRST else None
        need = self.window * self.level if first is None else first
        least = self.min_seconds if first is None else 0.0
        if self._bytes < need or elapsed < least or elapsed <= 0:
            return
        share = wait = None
        if cpu is not None and self._cpu_since is not None:
            share = max(cpu - self._cpu_since, 0.0) / elapsed
        if waited is not None and self._waited_since is not None:
            wait = min(max(waited - self._waited_since, 0.0) / elapsed, 1.0)
        measured = Measurement(self.level, self._bytes / elapsed, share, wait)
        self.history.append(measured)
        if self.phase is Phase.FIRST:
            if len(self.history) < self.first_windows and not self._held_by_path(measured):
                # The same level runs on: the next window starts at once, no lag.
                self._since, self._cpu_since, self._waited_since = now, cpu, waited
                self._bytes = 0
                return
            measured = replace(_best_of(self.history), host_share=self._host_busy(now, host))
        judge = {
            Phase.FIRST: self._first,
            Phase.FIRST_STEP: self._first_step,
            Phase.BELOW: self._below,
            Phase.CLIMBING: self._climbing,
        }[self.phase]
        self._move(judge(measured), now)

    # -- the window ---------------------------------------------------------------------

    def _counting(self, now: float, cpu: float | None, waited: float | None) -> bool:
        """Whether bytes observed at ``now`` count for the level: opens the window when
        the level's parts run (see the module)."""
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
                        return False
                # The window starts here; these bytes were on their way before it.
                self._since, self._cpu_since, self._waited_since = now, cpu, waited
                return False
        if now < self._since:
            return False  # a new level's parts are still starting
        if self._cpu_since is None:
            self._cpu_since = cpu
        if self._waited_since is None:
            self._waited_since = waited
        return True

    def _held_by_path(self, measured: Measurement) -> bool:
        """Whether one window of the first level shows its stream held back by the path
        (see :attr:`Phase.FIRST`): then the windows left could only delay the step."""
        share, wait = measured.cpu_share, measured.wait_share
        waited = wait is None or wait >= self.min_wait
        return share is not None and share * self.cheap < self.cores and waited

    def _host_busy(self, now: float, host: Callable[[], float | None] | None) -> float | None:
        """The machine's busy CPU seconds per second over the first level's windows
        (None unless the server shares the machine and both ends are known)."""
        if self._host_from is None or host is None:
            return None
        (since, before), after = self._host_from, host()
        if before is None or after is None or now <= since:
            return None
        return max(after - before, 0.0) / (now - since)

    # -- one judgement per phase: each returns the level to try next -----------------------

    def _first(self, measured: Measurement) -> int:
        """The start level: up to the cap, if ``factor`` times its streams at its share
        of a core fit within ``cores`` (or the share is not known), the machine could
        hold ``host_room`` times its load where the server shares it and the stream
        is costly, and the caller waited for bytes long enough for a step to pay (or
        that is not known); else it holds."""
        self._best = measured
        self.phase = Phase.FIRST_STEP
        least = min(self.level * self.factor, self.cap)
        share = measured.cpu_share
        if share is not None and share * least > self.level * self.cores:
            return self.level  # one stream keeps the client busy: more only add CPU
        host, cores = measured.host_share, self.host_cores
        # A stream that costs the client little is held back by a link, however busy
        # the machine (a proxy on it fills its buffers as the stream starts).
        costly = share is None or share * self.host_costly > self.cores
        if costly and host is not None and cores is not None and host * self.host_room > cores:
            # The server's CPU is this machine's, which could not even double its
            # work: more streams would share the same cores, at their overhead.
            return self.level
        wait = measured.wait_share
        if wait is not None and wait < self.min_wait:
            return self.level  # the caller, not the stream, sets the pace
        return self.cap

    def _first_step(self, measured: Measurement) -> int:
        """The first step: as :meth:`_climbing`, but a step that pays less than
        ``1/factor`` of what its parts could (the server or client saturates well below
        it) is looked at once from one ``factor`` under it. (Not for less: a step down
        is measured while the parts of the step above still run, which flatters it.)"""
        first = self._best
        assert first is not None
        self.phase = Phase.CLIMBING
        if measured.rate >= first.rate * self.gain:
            self._best = measured
            if measured.rate * self.factor < first.rate * self.level:
                self._stepped = measured
                self.phase = Phase.BELOW
                return max(self.level // self.factor, first.level + 1)
            return min(self.level * 2, self.cap)
        return self._not_paid()

    def _below(self, measured: Measurement) -> int:
        """Under a first step that paid poorly: keep whichever does as well with fewer."""
        high, self._stepped = self._stepped, None
        assert high is not None
        self.phase = Phase.CLIMBING
        if measured.rate * self.gain > high.rate:
            self._best = measured
            self._ceiling = high.level
            return measured.level * 2
        self._best = high
        return high.level

    def _climbing(self, measured: Measurement) -> int:
        """Double while a step pays by ``gain``; else try the level between, once."""
        best = self._best
        assert best is not None
        if measured.rate >= best.rate * self.gain:
            self._best = measured
            return min(self.level * 2, self.cap)
        return self._not_paid()

    def _not_paid(self) -> int:
        assert self._best is not None
        self._ceiling = self.level  # this step did not pay
        return self._best.level * 2  # the level between, once

    def _move(self, nxt: int, now: float) -> None:
        """Run at ``nxt`` next, or settle at the best level where ``nxt`` adds nothing
        (at or under the best, at or over a level that did not pay)."""
        best = self._best
        assert best is not None
        self._previous = self.level
        ceiling = self._ceiling
        if self.phase is not Phase.BELOW and (
            nxt <= best.level or (ceiling is not None and nxt >= ceiling)
        ):
            self.level, self.phase = best.level, Phase.SETTLED
        else:
            self.level = nxt
        assert self._lag is not None
        if self._delivering is None:
            self._since = now + self._lag
        else:
            self._since, self._deadline = None, now + self.max_lag
        self._cpu_since, self._waited_since, self._bytes = None, None, 0

    def describe(self) -> str:
        """The levels tried and their rates, for stats and logs."""
        steps = ", ".join(f"{h.level}: {h.rate / (1 << 20):.0f} MiB/s" for h in self.history)
        return f"chose {self.level} ({steps})" if steps else f"at {self.level}"


def _best_of(windows: list[Measurement]) -> Measurement:
    """One level measured over several windows, as it runs when nothing holds it back:
    the fastest rate, the busiest CPU share and the longest wait seen (a window in
    which the server stalled shows neither what the link gives nor what a stream costs
    the client; one in which the caller was away, how long it waits when it reads)."""
    shares = [m.cpu_share for m in windows if m.cpu_share is not None]
    waits = [m.wait_share for m in windows if m.wait_share is not None]
    return Measurement(
        windows[0].level,
        max(m.rate for m in windows),
        max(shares) if shares else None,
        max(waits) if waits else None,
    )
