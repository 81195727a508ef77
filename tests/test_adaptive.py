"""The adaptive level as a specification: a hill climb on the aggregate rate, clock
passed in (no threads, no network)."""

from __future__ import annotations

import random

import pytest

import objsdk
from objsdk._core.adaptive import Adaptive, Preset
from objsdk._core.sizes import ADAPTIVE_CAP, ADAPTIVE_FIRST_WINDOWS

MiB = 1 << 20


def run(adaptive: Adaptive, rate_of: dict[int, float], seconds: float = 10.0) -> Adaptive:
    """Feed ``adaptive`` 1 MiB completions at the rate its current level gets."""
    now = 0.0
    adaptive.begin(now)
    while now < seconds and not adaptive.settled:
        now += MiB / rate_of[adaptive.level]
        adaptive.observe(MiB, now)
    return adaptive


def test_it_starts_with_one_part():
    assert Adaptive().level == 1


def test_more_parts_are_added_while_the_rate_keeps_rising_up_to_the_cap():
    # A network where each connection gets 25 MB/s and nothing else limits.
    a = run(Adaptive(cap=16, window=2 * MiB), {n: 25e6 * n for n in (1, 2, 4, 8, 16)})
    assert (a.level, a.settled) == (16, True)


def test_a_step_that_does_not_pay_is_undone_the_level_between_tried_and_the_best_held():
    # One stream already fills the pipe (loopback): more are no faster.
    a = run(Adaptive(cap=16, window=2 * MiB), {1: 1e9, 2: 1.05e9, 16: 1.05e9})
    assert (a.level, a.settled) == (1, True)
    assert [m.level for m in a.history] == [1, 16, 2]


def test_the_first_step_goes_straight_to_the_cap_and_holds_where_every_part_pays():
    a = run(Adaptive(cap=16, window=2 * MiB), {n: 25e6 * n for n in (1, 16)})
    assert [m.level for m in a.history] == [1, 16]
    assert (a.level, a.settled) == (16, True)


def test_the_levels_between_are_tried_upwards_and_the_best_kept():
    # A server that serves two connections well and chokes on four or more.
    a = run(Adaptive(cap=16, window=2 * MiB), {1: 25e6, 2: 50e6, 4: 26e6, 16: 26e6})
    assert [m.level for m in a.history] == [1, 16, 2, 4]
    assert (a.level, a.settled) == (2, True)


def test_a_first_step_that_pays_poorly_is_checked_one_step_down():
    # Saturated at four: sixteen are no faster, so four are kept.
    rates = {1: 25e6, 4: 100e6, 8: 90e6, 16: 90e6}
    a = run(Adaptive(cap=16, window=2 * MiB), rates)
    assert [m.level for m in a.history] == [1, 16, 4, 8]
    assert (a.level, a.settled) == (4, True)


def test_a_first_step_that_pays_poorly_is_kept_if_it_beats_the_step_down():
    rates = {1: 25e6, 4: 60e6, 16: 95e6}
    a = run(Adaptive(cap=16, window=2 * MiB), rates)
    assert [m.level for m in a.history] == [1, 16, 4]
    assert (a.level, a.settled) == (16, True)


def test_a_first_step_is_kept_over_the_step_down_where_it_pays_by_more_than_a_ninth():
    # Uploads on the lan profile: four parts move 264 MiB/s, sixteen 299 (1.13x). Four
    # would be 0.88x of the best measured, under the 0.9x the defaults promise.
    rates = {1: 79 * MiB, 4: 264 * MiB, 16: 299 * MiB}
    a = run(Adaptive(cap=16, window=2 * MiB), rates)
    assert [m.level for m in a.history] == [1, 16, 4]
    assert (a.level, a.settled) == (16, True)


def test_a_step_up_that_pays_by_more_than_a_ninth_is_taken():
    # Sixteen choke the server; eight move 1.13x what four do.
    rates = {1: 100e6, 2: 200e6, 4: 300e6, 8: 340e6, 16: 100e6}
    a = run(Adaptive(cap=16, window=16 * MiB), rates, seconds=100.0)
    assert [m.level for m in a.history] == [1, 16, 2, 4, 8]
    assert (a.level, a.settled) == (8, True)


@pytest.mark.parametrize("seed", range(300))
def test_the_level_held_is_at_least_nine_tenths_as_fast_as_any_level_measured(seed):
    # Whatever the rates, a level is kept only over levels it is within 1/gain of.
    rng = random.Random(seed)
    rates = {n: rng.uniform(1e6, 1e9) for n in (1, 2, 4, 8, 16)}
    a = run(Adaptive(cap=16, window=2 * MiB), rates, seconds=1000.0)
    assert a.settled
    held = max(m.rate for m in a.history if m.level == a.level)
    assert held >= 0.9 * max(level.rate for level in a.history)


def test_a_server_that_chokes_on_many_connections_gets_fewer():
    rates = {1: 25e6, 2: 50e6, 4: 100e6, 8: 70e6, 16: 60e6}
    a = run(Adaptive(cap=16, window=2 * MiB), rates)
    assert (a.level, a.settled) == (4, True)


def test_a_level_is_judged_only_after_its_window_of_bytes_and_time():
    a = Adaptive(window=8 * MiB, min_seconds=0.5)
    a.begin(0.0)
    a.observe(16 * MiB, 0.1)  # enough bytes, too little time
    assert a.history == []
    a.observe(MiB, 0.6)
    assert len(a.history) == 1


def test_a_first_window_sized_by_the_caller_is_judged_however_short_its_time():
    # An upload's 1 MiB probe part, done 15 ms after its request on a fast link.
    a = Adaptive(window=8 * MiB, min_seconds=0.03, first_window=MiB)
    a.begin(0.0)
    a.observe(MiB, 0.015)
    assert [m.level for m in a.history] == [1]
    assert a.level == 16


def test_later_windows_still_need_their_least_time():
    a = Adaptive(window=MiB, min_seconds=0.03, first_window=MiB)
    a.begin(0.0)
    a.observe(MiB, 0.015)
    a.observe(16 * MiB, 0.030)  # the window opens here (after the raise, its lag)
    a.observe(16 * MiB, 0.040)  # enough bytes, too little time
    assert len(a.history) == 1


def test_whole_parts_reported_count_the_first_window_from_begin():
    # An upload reports its parts, but sees their bytes only as they end.
    a = Adaptive(window=MiB, min_seconds=0.0, first_window=MiB, whole_parts=True)
    a.begin(0.0)
    a.part_started()
    a.part_ended()
    a.observe(MiB, 0.02)
    assert a.history[0].rate == pytest.approx(MiB / 0.02)


def test_reported_whole_parts_of_a_level_above_do_not_count_for_the_step_down():
    a = Adaptive(cap=16, window=MiB, min_seconds=0.0, whole_parts=True, first_window=MiB)
    a.begin(0.0)
    a.part_started()
    a.part_ended()
    a.observe(MiB, 0.01)  # the probe, 100 MiB/s: the first step goes to 16
    for _ in range(16):
        a.part_started()
    now = 0.02
    a.observe(0, now)  # sixteen under way: the window opens
    for _ in range(16):  # each part that ends is followed by another
        now += 0.005
        a.part_ended()
        a.observe(MiB, now)
        a.part_started()
    # 200 MiB/s: it paid, but poorly (under a quarter of sixteen streams at 100).
    assert a.level == 4
    for _ in range(12):  # the parts of sixteen end; none is four's
        now += 0.001
        a.part_ended()
        a.observe(8 * MiB, now)
    for _ in range(4):  # four's own parts, at 150 MiB/s
        now += 1 / 150
        a.part_ended()
        a.observe(MiB, now)
        a.part_started()
    assert [m.level for m in a.history] == [1, 16, 4]
    assert a.history[2].rate == pytest.approx(150 * MiB)


def test_a_held_level_stops_measuring_and_keeps_its_target():
    a = Adaptive(cap=16, window=MiB, min_seconds=0.01)
    a.begin(0.0)
    a.observe(MiB, 0.05)  # level 1 judged: up to 16
    assert a.level == 16
    a.hold()
    a.observe(MiB, 1.0)
    a.observe(MiB, 9.0)  # sixteen no faster than one: would step down, were it measuring
    assert (a.level, a.settled, len(a.history)) == (16, True, 1)


def test_settings_that_cannot_work_are_refused():
    with pytest.raises(objsdk.InvalidArgument, match="cap"):
        Adaptive(cap=0)


def test_after_a_change_the_bytes_of_the_first_requests_lag_are_not_counted():
    # The first request took 0.2 s to its first bytes; new parts need as long, so the
    # next level's window starts 0.2 s after the change.
    a = Adaptive(cap=4, window=MiB, min_seconds=0.05)
    a.begin(0.0)
    a.observe(MiB, 0.2)  # first bytes, 0.2 s after the request: level 1 judged, up to 4
    assert a.level == 4
    a.observe(64 * MiB, 0.35)  # within the lag: not counted
    assert len(a.history) == 1
    a.observe(4 * MiB, 0.46)  # 4 MiB over the 0.06 s since the lag ended
    assert [m.level for m in a.history] == [1, 4]
    assert a.history[1].rate == pytest.approx(4 * MiB / 0.06)


def test_the_lag_counted_out_is_bounded():
    a = Adaptive(cap=4, window=MiB, min_seconds=0.05, max_lag=0.1)
    a.begin(0.0)
    a.observe(MiB, 5.0)  # a very slow first byte: level 1 judged, up to 4
    assert a.level == 4
    a.observe(4 * MiB, 5.1)  # 0.1 s after the change the window is already open
    a.observe(4 * MiB, 5.16)
    assert len(a.history) == 2


def run_with_cpu(
    adaptive: Adaptive, rate_of: dict[int, float], share_of: dict[int, float]
) -> Adaptive:
    """As run(), with the client's CPU time growing at ``share_of[level]`` per second."""
    now = cpu = 0.0
    adaptive.begin(now, cpu)
    while now < 10.0 and not adaptive.settled:
        dt = MiB / rate_of[adaptive.level]
        now, cpu = now + dt, cpu + dt * share_of[adaptive.level]
        adaptive.observe(MiB, now, cpu)
    return adaptive


def test_one_stream_that_keeps_the_client_busy_is_not_left():
    # A server on the same host: one stream costs 40% of a core; four would need 1.6.
    a = run_with_cpu(Adaptive(window=2 * MiB), {1: 1e9, 4: 1.2e9}, {1: 0.4, 4: 1.0})
    assert (a.level, a.settled) == (1, True)
    assert a.history[0].cpu_share == pytest.approx(0.4)


def test_a_stream_that_leaves_room_for_four_in_a_core_steps_straight_to_the_cap():
    # One stream at 10% of a core: four fit in one. The share does not size the step
    # (16 would need 1.6 cores): measured over the first window, it holds start-up.
    rates = {n: 25e6 * n for n in (1, 16)}
    a = run_with_cpu(Adaptive(window=2 * MiB), rates, {1: 0.1, 16: 1.6})
    assert [m.level for m in a.history] == [1, 16]
    assert (a.level, a.settled) == (16, True)


def test_a_stream_that_leaves_no_room_for_four_in_a_core_is_not_left():
    # 30% of a core: four would need 1.2 cores, more than a reader's one.
    a = run_with_cpu(Adaptive(window=2 * MiB), {1: 25e6, 16: 4e8}, {1: 0.3, 16: 1.0})
    assert (a.level, a.settled) == (1, True)


def test_a_stream_held_back_by_the_network_climbs_whatever_the_later_cpu():
    # One stream at 2% of a core: 16 fit; what they cost then is not held against them.
    rates = {n: 25e6 * n for n in (1, 16)}
    a = run_with_cpu(Adaptive(window=2 * MiB), rates, {1: 0.02, 16: 1.2})
    assert (a.level, a.settled) == (16, True)


def test_without_a_cpu_clock_only_the_rate_decides():
    a = run(Adaptive(window=2 * MiB), {n: 25e6 * n for n in (1, 4, 16)})
    assert a.level == 16
    assert a.history[0].cpu_share is None


def test_a_transfer_that_may_use_two_cores_steps_where_four_streams_fit_in_both():
    # 30% of a core: four need 1.2 cores, which two cores have.
    rates = {n: 25e6 * n for n in (1, 16)}
    a = run_with_cpu(Adaptive(window=2 * MiB, cores=2), rates, {1: 0.3, 16: 1.9})
    assert [m.level for m in a.history] == [1, 16]


def test_a_first_step_the_link_cannot_feed_is_brought_back_by_the_rate():
    # The CPU lets the level go to the cap, but the link gives no more than 3 streams'
    # worth: the look one step down keeps 4, and 8 does not pay.
    rates = {1: 25e6, 4: 75e6, 8: 75e6, 16: 75e6}
    shares = {1: 0.1, 4: 0.3, 8: 0.4, 16: 0.6}
    a = run_with_cpu(Adaptive(window=2 * MiB), rates, shares)
    assert [m.level for m in a.history] == [1, 16, 4, 8]
    assert (a.level, a.settled) == (4, True)


def test_after_a_step_down_the_window_waits_for_the_parts_above_to_end():
    a = Adaptive(cap=16, window=MiB, min_seconds=0.01)
    a.part_started()
    a.observe(MiB, 0.0)
    a.observe(MiB, 0.02)  # up to 16
    for _ in range(15):
        a.part_started()
    a.observe(MiB, 0.03)  # all 16 deliver: the window opens
    a.observe(16 * MiB, 0.35)  # 16 are no faster than one: the level between, 2, next
    assert a.level == 2
    a.observe(64 * MiB, 0.36)  # 16 still deliver: not counted
    for _ in range(14):
        a.part_ended()
    a.observe(MiB, 0.37)  # two left: the window opens here
    a.observe(2 * MiB, 0.39)
    assert a.history[-1].level == 2
    assert a.history[-1].rate == pytest.approx(2 * MiB / 0.02)


def run_windows(
    adaptive: Adaptive, windows: list[tuple[float, float]] | list[tuple[float, float, float]]
) -> Adaptive:
    """Feed ``adaptive`` its start level's windows one after another, the n-th at
    ``windows[n]`` (rate in bytes/s, CPU share, and the share of the time the caller
    waits for bytes where given), in 64 KiB receives, until it moves."""
    now = cpu = waited = 0.0
    adaptive.begin(now, cpu)
    while adaptive.level == 1 and not adaptive.settled:
        rate, share, *wait = windows[len(adaptive.history)]
        dt = 64 * 1024 / rate
        now, cpu, waited = now + dt, cpu + dt * share, waited + dt * (wait[0] if wait else 0)
        adaptive.observe(64 * 1024, now, cpu, waited if wait else None)
    return adaptive


def test_a_reader_whose_server_stalls_in_the_first_window_does_not_leave_one_stream():
    # A server on the client's host: one window in which the server stalled (100 MiB/s,
    # 7% of a core) makes one stream look cheap; the windows after it show one stream
    # at 1 GiB/s keeping 40% of the reader's core busy, so four would not fit.
    a = run_windows(Preset.reader().policy(), [(100 * MiB, 0.07)] + [(1024 * MiB, 0.4)] * 2)
    assert a.level == 1
    assert [m.level for m in a.history] == [1] * ADAPTIVE_FIRST_WINDOWS
    assert a.settled


def test_a_download_is_judged_over_the_best_of_its_first_windows_too():
    windows = [(1024 * MiB, 0.4), (100 * MiB, 0.07), (1024 * MiB, 0.4)]
    a = run_windows(Preset.download().policy(cores=1), windows)
    assert (a.level, a.settled) == (1, True)


def test_a_stream_held_back_by_the_network_climbs_after_its_first_window():
    # 25 MB/s at 2% of a core while the caller waits: no stall makes a stream that
    # cheap (one on this host's server keeps 18-39% of a core busy in every window), so
    # the windows left would only delay the step by 60 ms.
    a = run_windows(Preset.reader().policy(), [(25e6, 0.02, 0.9)] * ADAPTIVE_FIRST_WINDOWS)
    assert a.level == ADAPTIVE_CAP
    assert len(a.history) == 1


def test_a_download_held_back_by_the_network_climbs_after_its_first_window():
    # Downloads do not time the caller's waits; their share is of every core they use.
    a = run_windows(Preset.download().policy(cores=2), [(25e6, 0.1)] * ADAPTIVE_FIRST_WINDOWS)
    assert (a.level, len(a.history)) == (ADAPTIVE_CAP, 1)


def test_a_cheap_window_the_caller_hardly_waited_in_judges_nothing_alone():
    # A shard's first bytes fetched ahead while the caller read the shard before: cheap,
    # but it says nothing of how long the caller waits for bytes.
    windows = [(25e6, 0.02, 0.0)] * ADAPTIVE_FIRST_WINDOWS
    a = run_windows(Preset.reader().policy(), windows)
    assert len(a.history) == ADAPTIVE_FIRST_WINDOWS
    assert (a.level, a.settled) == (1, True)


def test_a_window_at_a_sixteenth_of_a_core_is_not_cheap_enough_to_judge_alone():
    # A stall halves what a stream on this host costs in a window (docs/design.md);
    # the windows after it must be seen.
    windows = [(200 * MiB, 1 / 16, 0.9)] + [(1024 * MiB, 0.4, 0.9)] * 2
    a = run_windows(Preset.reader().policy(), windows)
    assert len(a.history) == ADAPTIVE_FIRST_WINDOWS
    assert (a.level, a.settled) == (1, True)


def test_the_start_level_is_judged_by_its_fastest_window():
    # A stall on the way: the step to the cap must beat the fastest window, not the
    # slowest, so at 1.5x the stalled window's rate it does not pay.
    a = Adaptive(window=MiB, min_seconds=0.01, first_windows=2)
    a.begin(0.0)
    a.observe(MiB, 0.05)  # 20 MiB/s over the first window
    assert (a.level, len(a.history)) == (1, 1)
    a.observe(MiB, 0.15)  # 10 MiB/s: both windows seen, judged by the faster
    assert a.level == 16
    assert a.history[-1].rate == pytest.approx(10 * MiB)
    a.observe(MiB, 0.2)  # the lag the first request took: counted out
    a.observe(16 * MiB, 0.2 + 16 / 15)  # 15 MiB/s: pays against 10, not against 20
    assert a.level == 2
    assert a.history[-1].level == 16


def test_the_windows_of_the_first_judgement_cannot_be_none():
    with pytest.raises(objsdk.InvalidArgument, match="first_windows"):
        Adaptive(first_windows=0)


def test_a_caller_slower_than_its_stream_keeps_one_stream_however_cheap_the_reads():
    # A DataLoader worker on a loopback server: its reads cost 5% of a core, but it
    # waits for bytes 5% of the time; even parts that delivered in no time would make
    # it at most 1/0.95 as fast. (It climbed to 16 parts, 1.7x slower at 1.6x the CPU.)
    a = run_windows(Preset.reader().policy(), [(80 * MiB, 0.05, 0.05)] * ADAPTIVE_FIRST_WINDOWS)
    assert (a.level, a.settled) == (1, True)
    assert [m.wait_share for m in a.history] == [pytest.approx(0.05, abs=0.005)] * 3


def test_a_caller_that_waits_for_the_network_climbs():
    a = run_windows(Preset.reader().policy(), [(25e6, 0.02, 0.9)] * ADAPTIVE_FIRST_WINDOWS)
    assert a.level == ADAPTIVE_CAP


def test_a_window_in_which_the_caller_was_away_does_not_hide_its_waits():
    # A shard opened and its first bytes fetched ahead, while the caller still reads
    # the shard before: the first window holds no reads and no waits.
    windows = [(2 * MiB, 0.0, 0.0), (25e6, 0.02, 0.9), (25e6, 0.02, 0.9)]
    a = run_windows(Preset.reader().policy(), windows)
    assert a.level == ADAPTIVE_CAP


def test_the_least_wait_for_a_climb_is_a_setting():
    windows = [(80 * MiB, 0.05, 0.05)] * 3
    assert run_windows(Adaptive(first_windows=3, min_wait=0.0), windows).level == 16
    with pytest.raises(objsdk.InvalidArgument, match="min_wait"):
        Adaptive(min_wait=1.0)


# -- a server that shares the client's machine ---------------------------------------------


def run_on_host(
    adaptive: Adaptive,
    busy: float,
    asked: list[float] | None = None,
    start_up: float = 0.0,
    share: float = 0.2,
) -> Adaptive:
    """A reader's first windows at 1 GiB/s, its reads at ``share`` of a core and
    waiting for bytes 80% of the time, while the whole machine is busy ``busy`` CPU
    seconds per second (``start_up`` more before the first bytes); every time the
    machine's clock is read is added to ``asked``."""
    asked = [] if asked is None else asked
    now = cpu = waited = 0.0

    def host() -> float:
        asked.append(now)
        return start_up + now * busy

    adaptive.begin(now, cpu)
    while adaptive.level == 1 and not adaptive.settled:
        dt = 64 * 1024 / (1024 * MiB)
        now, cpu, waited = now + dt, cpu + dt * share, waited + dt * 0.8
        adaptive.observe(64 * 1024, now, cpu, waited, host)
    return adaptive


def test_a_server_on_this_host_that_keeps_the_machine_busy_keeps_one_stream():
    # MinIO on the client's two cores: one stream takes 20% of a core on the client's
    # side (a reader that waits on a low-water mark), the server most of another; the
    # machine could not double that work. (It climbed to 16 parts: 1.5x slower at 3x
    # the CPU.)
    a = run_on_host(Preset.reader().policy(host_cores=2), busy=1.2)
    assert (a.level, a.settled) == (1, True)
    unshared = run_on_host(Preset.reader().policy(), busy=1.2)
    assert unshared.level == ADAPTIVE_CAP  # the same stream, the server elsewhere


def test_a_server_on_this_host_with_room_to_double_its_work_climbs():
    # A proxy on this host in front of a slow link: the machine is a third busy.
    a = run_on_host(Preset.reader().policy(host_cores=2), busy=0.35)
    assert a.level == ADAPTIVE_CAP


def test_the_machine_is_weighed_from_the_first_bytes_not_from_the_request():
    # A server busy before its first bytes (opening the object, filling a proxy's
    # buffers) is not busy with the stream: the same climb as without it.
    a = run_on_host(Preset.reader().policy(host_cores=2), busy=0.35, start_up=5.0)
    assert a.level == ADAPTIVE_CAP


def test_a_stream_that_costs_the_client_little_is_held_back_by_the_link_not_the_machine():
    # A proxy on this host shaping a 100 MB/s link fills its buffers as the stream
    # starts: the machine looks busy over the first windows (0.6-1.3 cores of two),
    # while the reads cost the client 4-6% of a core. Sixteen parts are 2.5x faster.
    a = run_on_host(Preset.reader().policy(host_cores=2), busy=1.2, share=0.05)
    assert a.level == ADAPTIVE_CAP


def test_a_download_weighs_the_machine_against_every_core_of_it():
    # Twice 1.2 busy cores fit in 8 cores, not in 2; a download's stream is costly at
    # an eighth of the cores the client may use (here one).
    download = Preset.download()
    assert run_on_host(download.policy(1, 8), busy=1.2).level == ADAPTIVE_CAP
    assert run_on_host(download.policy(1, 2), busy=1.2).level == 1
    assert run_on_host(download.policy(2, 2), busy=1.2).level == ADAPTIVE_CAP  # 10% of 2


def test_the_machine_is_read_at_the_first_bytes_and_as_the_first_level_is_judged():
    asked: list[float] = []
    a = run_on_host(Preset.reader().policy(host_cores=2), busy=1.2, asked=asked)
    assert a.settled
    assert len(asked) == 2
    assert 0 < asked[0] < asked[1]


def test_a_machine_that_cannot_be_read_leaves_the_rule_out():
    a = Preset.reader().policy(host_cores=2)
    a.begin(0.0, 0.0)
    now = cpu = waited = 0.0
    while not a.settled and a.level == 1:
        dt = 64 * 1024 / (1024 * MiB)
        now, cpu, waited = now + dt, cpu + dt * 0.2, waited + dt * 0.8
        a.observe(64 * 1024, now, cpu, waited, lambda: None)
    assert a.level == ADAPTIVE_CAP
