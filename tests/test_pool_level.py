"""The part pool following an adaptive level, and read-ahead feeding it (no network)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from objsdk._core.adaptive import Adaptive
from objsdk._io.objectfile import ObjectFile
from objsdk._io.pool import PartPool, SharedLevel
from objsdk._io.readahead import part_fetcher

MiB = 1 << 20


def test_a_raised_level_starts_its_parts_while_the_first_one_still_runs():
    level = SharedLevel(Adaptive(cap=4, window=MiB, min_seconds=1e-6))
    started: list[int] = []
    all_started = threading.Event()
    lock = threading.Lock()

    def work(item: int) -> int:
        with lock:
            started.append(item)
            if len(started) == 4:
                all_started.set()
        if item == 0:
            level.observe(MiB)  # the first bytes
            level.observe(MiB)  # level 1 judged: up to 4
            # Returns only once the raised level has started three more parts.
            assert all_started.wait(5), f"only {started} started"
        return item

    with PartPool(4, name="test") as pool:
        pool.run(range(4), work, in_flight=level)
    assert level.target() == 4
    assert sorted(started) == [0, 1, 2, 3]


def test_the_level_changed_future_completes_on_a_change_and_is_none_once_settled():
    level = SharedLevel(Adaptive(cap=4, window=MiB, min_seconds=1e-6))
    changed = level.changed()
    assert changed is not None
    assert not changed.done()
    level.observe(MiB)
    level.observe(MiB)
    assert changed.done()
    assert level.target() == 4
    for _ in range(100):
        if level.settled:
            break
        time.sleep(0.001)
        level.observe(MiB)  # at the cap, or a step down and back: it settles
    assert level.settled
    assert level.changed() is None


class _Clock:
    """Stands in for the time module in objectfile: wall and thread CPU time."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def monotonic(self) -> float:
        return self.wall

    def thread_time(self) -> float:
        return self.cpu


@pytest.mark.parametrize(
    ("cpu_share", "level", "afford"),
    [(0.01, 16, True), (0.2, 4, True), (0.3, 4, False), (0.5, 2, True), (0.6, 2, False)],
)
def test_more_parts_are_tried_only_if_level_times_the_streams_cpu_share_fits_a_core(
    monkeypatch, cpu_share, level, afford
):
    clock = _Clock()
    monkeypatch.setattr("objsdk._io.objectfile.time", clock)
    f = ObjectFile.__new__(ObjectFile)  # only the clock matters here
    f._stream_clock = (threading.get_ident(), 0.0, 0.0)
    clock.wall, clock.cpu = 1.0, cpu_share
    assert f._afford(level) is afford


def test_the_cpu_share_is_not_judged_over_too_short_a_time(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr("objsdk._io.objectfile.time", clock)
    f = ObjectFile.__new__(ObjectFile)
    f._stream_clock = (threading.get_ident(), 0.0, 0.0)
    clock.wall, clock.cpu = 0.001, 0.001  # all CPU, but over a millisecond
    assert f._afford(4)


def test_a_read_ahead_part_tells_of_its_bytes_as_they_arrive(client, bucket):
    data = os.urandom(3 * MiB + 5)
    client.put_object(bucket, "k", data)
    ticks: list[int] = []
    fetch = part_fetcher(
        client.transport,
        bucket,
        "k",
        etag=None,
        last_modified=None,
        size=len(data),
        version_id=None,
        max_resume=0,
        tick=ticks.append,
    )
    into = bytearray(len(data) - 5)
    result = fetch(5, len(data), memoryview(into), threading.Event())
    assert bytes(into) == data[5:]
    assert sum(ticks) == result.nbytes == len(into)
    assert len(ticks) >= 3  # in slices, not once at the end
