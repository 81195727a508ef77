"""The part pool following an adaptive level, and read-ahead feeding it (no network)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from objsdk._core.adaptive import Adaptive
from objsdk._core.pin import VersionPin
from objsdk._io.pool import PartPool
from objsdk._io.range_reader import RangeReader
from objsdk._io.readahead import part_fetcher
from objsdk._io.shared_level import SharedLevel

MiB = 1 << 20


def test_a_raised_level_starts_its_parts_while_the_first_one_still_runs():
    level = SharedLevel(Adaptive(cap=4, window=MiB, min_seconds=1e-6), cpu=None)
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
        pool.run(range(4), work, level=level)
    assert level.current() == 4
    assert sorted(started) == [0, 1, 2, 3]


def test_the_level_changed_future_completes_on_a_change_and_is_none_once_settled():
    level = SharedLevel(Adaptive(cap=4, window=MiB, min_seconds=1e-6), cpu=None)
    changed = level.changed()
    assert changed is not None
    assert not changed.done()
    level.observe(MiB)
    level.observe(MiB)
    assert changed.done()
    assert level.current() == 4
    for _ in range(100):
        if level.settled:
            break
        time.sleep(0.001)
        level.observe(MiB)  # at the cap, or a step down and back: it settles
    assert level.settled
    assert level.changed() is None


def test_a_shared_level_weighs_the_cpu_clock_it_is_given():
    # One stream that keeps the client busy 60% of the time: four would need 2.4 cores.
    clock = {"cpu": 0.0}
    level = SharedLevel(Adaptive(cap=16, window=MiB, min_seconds=1e-6), cpu=lambda: clock["cpu"])
    time.sleep(0.01)
    clock["cpu"] = 0.6 * 0.01
    level.observe(MiB)
    time.sleep(0.01)
    clock["cpu"] += 0.6 * 0.01
    level.observe(MiB)
    assert level.settled
    assert level.current() == 1


def test_a_read_ahead_part_tells_the_level_of_its_start_its_bytes_as_they_arrive_and_its_end(
    client, bucket
):
    data = os.urandom(3 * MiB + 5)
    client.put_object(bucket, "k", data)
    events: list[object] = []

    class Recorder(SharedLevel):
        def part_started(self) -> None:
            events.append("start")

        def observe(self, nbytes: int) -> None:
            events.append(nbytes)

        def part_ended(self) -> None:
            events.append("end")

    pin = RangeReader(client.transport, bucket, "k", pin=VersionPin(size=len(data)), max_resume=0)
    fetch = part_fetcher(pin, level=Recorder(Adaptive(), begin=False))
    into = bytearray(len(data) - 5)
    result = fetch(5, len(data), memoryview(into), threading.Event())
    assert bytes(into) == data[5:]
    assert (events[0], events[-1]) == ("start", "end")
    ticks = events[1:-1]
    assert sum(ticks) == result.nbytes == len(into)  # type: ignore[arg-type]
    assert len(ticks) >= 12  # in slices of at most 256 KiB, not once at the end


def test_a_level_told_of_its_parts_judges_a_raised_level_only_once_all_deliver():
    a = Adaptive(cap=4, window=MiB, min_seconds=0.01)
    a.part_started()
    a.observe(MiB, 0.0)  # the first bytes open the first window
    a.observe(MiB, 0.02)  # one part: up to 4
    assert a.level == 4
    a.part_started()
    a.part_started()
    a.observe(64 * MiB, 0.03)  # three of four deliver: not counted
    a.part_started()
    a.observe(MiB, 0.04)  # all four: the window opens here
    a.observe(4 * MiB, 0.06)
    assert a.history[-1].level == 4
    assert a.history[-1].rate == pytest.approx(4 * MiB / 0.02)
