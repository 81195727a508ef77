"""The shared level as a specification: built from a preset where no number is given,
its clocks, and InFlight, the one way a part tells it of its start, bytes and end."""

from __future__ import annotations

import threading
import time

import pytest

from objsdk._core.adaptive import Adaptive, Preset
from objsdk._io.shared_level import InFlight, SharedLevel, _usable_cores
from objsdk._transport.retry import throttle_heard

MiB = 1 << 20


class Recorder(SharedLevel):
    def __init__(self, adaptive: Adaptive) -> None:
        super().__init__(adaptive, begin=False)
        self.events: list[object] = []

    def part_started(self) -> None:
        self.events.append("start")

    def observe(self, nbytes: int) -> None:
        self.events.append(nbytes)

    def part_ended(self) -> None:
        self.events.append("end")


@pytest.mark.parametrize(
    "preset", [Preset.reader(), Preset.download(), Preset.upload(8 * MiB, MiB)]
)
def test_a_number_given_means_no_level(preset):
    assert SharedLevel.unless(4, preset=preset) is None


def test_a_download_level_may_use_every_core_the_process_may_run_on():
    level = SharedLevel.unless(None, preset=Preset.download())
    assert level is not None
    assert level._adaptive.cores == _usable_cores()


def test_reader_and_upload_levels_weigh_one_core():
    for preset in (Preset.reader(), Preset.upload(8 * MiB, MiB)):
        level = SharedLevel.unless(None, preset=preset, begin=False)
        assert level is not None
        assert level._adaptive.cores == 1


def test_a_reader_level_weighs_the_cpu_of_the_reads_it_timed_and_no_other():
    level = SharedLevel.unless(None, preset=Preset.reader(), begin=False)
    assert level is not None
    sum(range(200_000))  # the caller's own work: not a read
    assert level._read_time() == 0.0
    with level.reading():
        sum(range(200_000))
    assert level._read_time() > 0.0


def test_a_reader_level_counts_the_time_reads_spend_off_the_cpu_as_waiting():
    level = SharedLevel.unless(None, preset=Preset.reader(), begin=False)
    assert level is not None
    time.sleep(0.02)  # the caller away: not waiting for bytes
    assert level._wait_time() == 0.0
    with level.reading():
        time.sleep(0.05)  # a receive blocked on the network
    assert level._wait_time() >= 0.04
    assert level._read_time() < 0.01


def test_a_read_that_raises_is_not_timed():
    level = SharedLevel.unless(None, preset=Preset.reader(), begin=False)
    assert level is not None

    def read() -> None:
        with level.reading():
            sum(range(200_000))
            raise ValueError("cut")

    with pytest.raises(ValueError, match="cut"):
        read()
    assert level._read_time() == 0.0


def test_a_settled_level_times_no_reads():
    level = SharedLevel(Adaptive(cap=2, start=2), begin=False)
    with level.reading():
        sum(range(200_000))
    assert level._read_time() == 0.0


def test_an_upload_level_has_no_cpu_clock():
    level = SharedLevel.unless(None, preset=Preset.upload(8 * MiB, MiB), begin=False)
    assert level is not None
    assert level._cpu is None


def test_a_part_delivers_from_its_first_bytes_and_ends_with_its_block():
    level = Recorder(Adaptive())
    with InFlight(level) as part:
        part.observe(0)  # time went by, no bytes yet
        part.observe(5)
        part.observe(7)
    assert level.events == [0, "start", 5, 7, "end"]


def test_a_part_that_never_delivered_does_not_end():
    level = Recorder(Adaptive())
    with pytest.raises(OSError, match="refused"), InFlight(level):
        raise OSError("refused")
    assert level.events == []


def test_a_part_seen_only_as_a_whole_delivers_from_its_start_and_ends_on_failure():
    level = Recorder(Adaptive(whole_parts=True))
    with pytest.raises(OSError, match="reset"), InFlight(level):
        raise OSError("reset")
    assert level.events == ["start", "end"]


def test_a_stream_that_ended_delivers_again_from_its_next_bytes():
    level = Recorder(Adaptive())
    stream = InFlight(level)
    stream.observe(3)
    stream.end()
    stream.end()  # ended once only
    stream.observe(4)
    assert level.events == ["start", 3, "end", "start", 4]


def test_a_part_with_no_level_does_nothing():
    with InFlight(None) as part:
        part.observe(5)
    part.end()


def test_parts_in_flight_hold_a_raised_level_s_window_until_all_deliver():
    level = SharedLevel(Adaptive(cap=4, window=MiB, min_seconds=1e-6), cpu=None)
    first = InFlight(level)
    first.observe(MiB)
    time.sleep(0.002)
    first.observe(MiB)  # one part judged: up to 4
    assert level.current() == 4
    others = [InFlight(level) for _ in range(2)]
    for part in others * 2:
        part.observe(64 * MiB)  # three of four deliver: not counted, nothing judged
    assert len(level._adaptive.history) == 1
    fourth = InFlight(level)
    fourth.observe(MiB)  # all four deliver: the window opens here
    time.sleep(0.002)
    first.observe(4 * MiB)
    assert [m.level for m in level._adaptive.history] == [1, 4]


def test_a_waiter_for_the_settled_level_wakes_when_it_holds():
    level = SharedLevel(Adaptive(), begin=False)
    assert not level.wait_settled(0.01)
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(level.wait_settled(5)))
    waiter.start()
    level.hold()
    waiter.join(5)
    assert woke == [True]


def test_a_waiter_wakes_when_a_measured_window_settles_the_level():
    level = SharedLevel(Adaptive(cap=1), begin=False)  # at its cap from the start
    assert level.wait_settled(0)
    cpu = iter([0.0, 10.0]).__next__  # the stream keeps ten cores busy
    busy = SharedLevel(Adaptive(window=MiB, min_seconds=0.0), cpu=cpu)
    assert not busy.wait_settled(0)
    busy.observe(MiB)  # the first window: one stream holds
    assert busy.settled
    assert busy.wait_settled(0)


def test_a_released_level_wakes_its_waiters_now_and_later_without_settling():
    level = SharedLevel(Adaptive(), begin=False)
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(level.wait_settled(5)))
    waiter.start()
    time.sleep(0.05)
    started = time.monotonic()
    level.release()  # its reader closed
    waiter.join(5)
    assert woke == [False]
    assert time.monotonic() - started < 1
    assert level.wait_settled(5) is False  # at once
    assert not level.settled


def _throttled_request() -> None:
    """What the request pipeline does at a throttling answer (429, 503 SlowDown)."""
    throttle_heard()


def test_a_throttling_answer_to_a_parts_request_halves_the_level_and_settles_it():
    level = SharedLevel(Adaptive(cap=16, start=8), begin=False)
    changed = level.changed()
    with InFlight(level):
        _throttled_request()
    assert (level.current(), level.settled, level.cuts) == (4, True, 1)
    assert changed is not None
    assert changed.done()  # a waiting pool re-reads the level
    assert level.wait_settled(0)


def test_answers_to_parts_already_in_flight_at_a_cut_do_not_cut_it_again():
    level = SharedLevel(Adaptive(cap=16, start=16), begin=False)
    sent_at_16 = [InFlight(level) for _ in range(3)]

    def refused(part: InFlight) -> None:  # each part's requests are heard on its thread
        with part.hearing():
            _throttled_request()

    burst = [threading.Thread(target=refused, args=(part,)) for part in sent_at_16]
    for thread in burst:  # a burst of refusals: one cut
        thread.start()
    for thread in burst:
        thread.join(5)
    assert (level.current(), level.cuts) == (8, 1)
    with InFlight(level):  # a part started at 8: its refusal cuts again
        _throttled_request()
    assert (level.current(), level.cuts) == (4, 2)
    refused(sent_at_16[0])  # a late answer to a part sent at 16
    assert (level.current(), level.cuts) == (4, 2)


def test_a_throttling_answer_outside_a_parts_block_leaves_the_level_alone():
    level = SharedLevel(Adaptive(cap=16, start=8), begin=False)
    with InFlight(level):
        pass
    _throttled_request()
    with InFlight(None):  # a fixed number in flight: nothing to cut
        _throttled_request()
    assert (level.current(), level.cuts) == (8, 0)
