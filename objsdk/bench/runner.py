"""Timing: warm-up, interleaved runs, medians, ratios to a baseline, client CPU per GiB.

A :class:`Group` is a set of :class:`Case` s measured together: each case runs once
untimed (warm-up), then ``runs`` times interleaved, in orders where every case takes
every place and follows every other case equally often (:func:`balanced_orders`), so
slow drift of the machine and the wake of the case before hit every case alike. Every
run records wall seconds and the client's CPU seconds: this process's user+system time
(all threads) plus that of child processes reaped during the run (``RUSAGE_CHILDREN``,
how ``curl`` is counted).
"""

from __future__ import annotations

import re
import resource
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "Case",
    "CaseResult",
    "GiB",
    "Group",
    "GroupResult",
    "MiB",
    "Sample",
    "Stats",
    "balanced_orders",
    "baseline_or_first",
    "children_cpu",
    "measure",
    "run_group",
    "summarize",
]

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class Sample:
    """One timed run of a case."""

    seconds: float
    cpu_seconds: float
    nbytes: int

    @property
    def mib_per_s(self) -> float:
        return self.nbytes / MiB / self.seconds if self.seconds > 0 else float("inf")

    @property
    def cpu_per_gib(self) -> float:
        return self.cpu_seconds / (self.nbytes / GiB) if self.nbytes else 0.0


@dataclass(frozen=True)
class Stats:
    """Median, min and max throughput of a case's runs, and its median CPU per GiB."""

    runs: int
    median_mib_s: float
    min_mib_s: float
    max_mib_s: float
    cpu_s_per_gib: float


def summarize(samples: Sequence[Sample]) -> Stats:
    """The statistics of a case's timed runs (at least one)."""
    if not samples:
        raise ValueError("summarize needs at least one sample")
    rates = [s.mib_per_s for s in samples]
    return Stats(
        runs=len(samples),
        median_mib_s=statistics.median(rates),
        min_mib_s=min(rates),
        max_mib_s=max(rates),
        cpu_s_per_gib=statistics.median(s.cpu_per_gib for s in samples),
    )


@dataclass
class Case:
    """One thing to time: ``run()`` moves ``nbytes`` bytes and returns how many it moved.

    ``connections`` places the case on a scaling curve (None: not part of one).
    """

    client: str
    variant: str
    run: Callable[[], int]
    nbytes: int
    connections: int | None = None

    @property
    def label(self) -> str:
        return f"{self.client}: {self.variant}"


@dataclass
class Group:
    """Cases measured together and compared with ``baseline`` (a case label)."""

    benchmark: str
    profile: str
    title: str
    cases: list[Case]
    baseline: str
    size: int = 0
    notes: list[str] = field(default_factory=list)
    settle: Callable[[], None] | None = None  # untimed, before every run


@dataclass
class CaseResult:
    case: Case
    samples: list[Sample]
    stats: Stats
    ratio: float | None  # median throughput / the baseline's, None without a baseline
    cpu_ratio: float | None  # CPU per GiB / the baseline's


@dataclass
class GroupResult:
    group: Group
    results: list[CaseResult]
    notes: list[str]  # from the run (failures); see all_notes
    baseline_label: str = ""  # what the ratios are to (the group's, unless it failed)

    @property
    def all_notes(self) -> list[str]:
        return [*self.group.notes, *self.notes]

    @property
    def baseline(self) -> CaseResult | None:
        """The case the ratios are to: the group's baseline, else the first measured."""
        return next((r for r in self.results if r.case.label == self.baseline_label), None)


def baseline_or_first(cases: Sequence[Case], wanted: str) -> str:
    """``wanted`` if a case has that label (its peer may be missing), else the first."""
    labels = [c.label for c in cases]
    return wanted if wanted in labels or not labels else labels[0]


def children_cpu() -> float:
    """User+system CPU seconds of this process's reaped children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(run: Callable[[], int]) -> Sample:
    """Run once; wall time, client CPU (this process and reaped children), bytes moved."""
    cpu0, child0 = time.process_time(), children_cpu()
    t0 = time.perf_counter()
    nbytes = run()
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0 + children_cpu() - child0
    return Sample(seconds, cpu, nbytes)


def balanced_orders(n: int, runs: int) -> list[list[int]]:
    """The order of case indexes in each run: the rows of a Williams design.

    Every case runs in every place once per ``n`` runs, and follows every other case
    equally often (once per ``n`` runs for an even ``n``; twice per ``2n`` for an odd
    one, whose design adds each row reversed). A plain rotation (0 1 2, 1 2 0, ...) puts
    each case after the same one every run, and a case can carry the wake of the one
    before it (threads still exiting, the server closing its connections): balanced
    neighbours spread that over all cases instead of charging it to one.
    """
    if n == 0:
        return []
    first, low, high = [0], 1, n - 1  # 0, 1, n-1, 2, n-2, ...
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = [[(c + r) % n for c in first] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return [rows[r % len(rows)] for r in range(runs)]


_QUERY = re.compile(r"(https?://[^\s'\"?]*)\?[^\s'\"]*")


def hide_queries(text: str) -> str:
    """``text`` with URL query strings (presigned signatures) replaced by ``?...``."""
    return _QUERY.sub(r"\1?...", text)


def _failed(case: Case, exc: BaseException) -> str:
    detail = hide_queries("".join(traceback.format_exception_only(type(exc), exc)).strip())
    return f"{case.label}: failed, dropped from the results ({detail})"


def run_group(
    group: Group,
    runs: int,
    *,
    warmup: bool = True,
    log: Callable[[str], None] | None = None,
) -> GroupResult:
    """Warm up, then time every case ``runs`` times interleaved; summarize.

    A case that raises or moves the wrong number of bytes is dropped with a note, so
    one broken peer does not sink the suite.
    """
    say = log or (lambda msg: print(msg, file=sys.stderr))
    notes: list[str] = []  # the group's own notes stay in group.notes
    alive = list(range(len(group.cases)))
    samples: dict[int, list[Sample]] = {i: [] for i in alive}

    def attempt(i: int) -> Sample | None:
        case = group.cases[i]
        if group.settle is not None:
            group.settle()
        try:
            sample = measure(case.run)
        except Exception as exc:
            notes.append(_failed(case, exc))
            say(notes[-1])
            return None
        if sample.nbytes != case.nbytes:
            notes.append(
                f"{case.label}: moved {sample.nbytes} bytes, expected {case.nbytes}; dropped"
            )
            say(notes[-1])
            return None
        return sample

    if warmup:
        for i in list(alive):
            if attempt(i) is None:
                alive.remove(i)
    for order in balanced_orders(len(group.cases), runs):
        for i in order:
            if i not in alive:
                continue
            sample = attempt(i)
            if sample is None:
                alive.remove(i)
            else:
                samples[i].append(sample)
    if group.settle is not None:
        group.settle()
    stats = {i: summarize(samples[i]) for i in alive if samples[i]}
    label = group.baseline
    base = next((stats[i] for i in stats if group.cases[i].label == label), None)
    if base is None and stats:
        first = next(iter(stats))
        base = stats[first]
        label = group.cases[first].label
        notes.append(
            f"baseline {group.baseline!r} was not measured; ratios are to "
            f"{group.cases[first].label!r}"
        )
    results = []
    for i, st in stats.items():
        ratio = cpu_ratio = None
        if base is not None:
            ratio = st.median_mib_s / base.median_mib_s if base.median_mib_s else None
            cpu_ratio = st.cpu_s_per_gib / base.cpu_s_per_gib if base.cpu_s_per_gib else None
        results.append(CaseResult(group.cases[i], samples[i], st, ratio, cpu_ratio))
    return GroupResult(group, results, notes, label if base is not None else "")
