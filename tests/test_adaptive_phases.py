"""The adaptive level's phases and presets as a specification: which judgement each
measured window gets, and what each kind of transfer measures (clock passed in)."""

from __future__ import annotations

import pytest

from objsdk._core.adaptive import Adaptive, Clock, Phase, Preset
from objsdk._core.sizes import ADAPTIVE_CAP, ADAPTIVE_WINDOW

MiB = 1 << 20


def judge(a: Adaptive, rate: float, now: float) -> float:
    """Feed one window of ``a``'s current level at ``rate`` bytes/s; the time after."""
    nbytes = a.window * a.level
    now += nbytes / rate
    a.observe(nbytes, now)
    return now


def started(cap: int = 16) -> tuple[Adaptive, float]:
    """A climb whose windows open as soon as its level changes (no lag counted out)."""
    a = Adaptive(cap=cap, window=MiB, min_seconds=0.0, max_lag=0.0)
    a.begin(0.0)
    return a, 0.0


def test_a_climb_starts_in_the_first_phase_at_one_part():
    a = Adaptive()
    assert (a.phase, a.level, a.settled) == (Phase.FIRST, 1, False)


def test_a_climb_that_starts_at_its_cap_is_settled_from_the_start():
    assert Adaptive(cap=4, start=4).phase is Phase.SETTLED


def test_the_first_judgement_steps_to_the_cap_and_then_judges_that_step():
    a, now = started()
    judge(a, 25e6, now)
    assert (a.phase, a.level) == (Phase.FIRST_STEP, 16)


def test_a_first_level_that_keeps_the_cpu_busy_settles_in_the_first_phase():
    a = Adaptive(cap=16, window=MiB, min_seconds=0.0)
    a.begin(0.0, 0.0)
    a.observe(MiB, 0.01, 0.005)  # half a core: four streams would need two
    assert (a.phase, a.level) == (Phase.SETTLED, 1)


def test_a_first_step_that_pays_well_holds_the_cap():
    a, now = started(cap=32)
    now = judge(a, 25e6, now)  # 1 judged: up to the cap, 32
    judge(a, 25e6 * 16, now)  # 32 at sixteen times one: more than a quarter of 32
    assert (a.phase, a.level) == (Phase.SETTLED, 32)


def test_a_first_step_that_pays_less_than_a_quarter_of_its_parts_looks_below():
    a, now = started()
    now = judge(a, 25e6, now)  # up to 16
    judge(a, 50e6, now)  # 16 parts at twice one: paid, but poorly
    assert (a.phase, a.level) == (Phase.BELOW, 4)


def test_below_keeps_the_fewer_parts_unless_the_more_beat_them_by_the_gain():
    a, now = started()
    now = judge(a, 25e6, now)
    now = judge(a, 50e6, now)  # BELOW, at 4
    judge(a, 48e6, now)  # four do as well within the gain: they climb from 4
    assert (a.phase, a.level) == (Phase.CLIMBING, 8)

    a, now = started()
    now = judge(a, 25e6, now)
    now = judge(a, 50e6, now)
    judge(a, 30e6, now)  # four are well below sixteen: sixteen hold
    assert (a.phase, a.level) == (Phase.SETTLED, 16)


def test_a_first_step_that_does_not_pay_tries_the_level_between_once():
    a, now = started()
    now = judge(a, 25e6, now)  # up to 16
    now = judge(a, 26e6, now)  # no better: 16 is the ceiling, 2 next
    assert (a.phase, a.level) == (Phase.CLIMBING, 2)
    now = judge(a, 50e6, now)  # 2 pays: 4 next, under the ceiling
    assert (a.phase, a.level) == (Phase.CLIMBING, 4)
    judge(a, 51e6, now)  # 4 does not: 2 holds
    assert (a.phase, a.level) == (Phase.SETTLED, 2)


def test_a_held_climb_is_settled_in_any_phase():
    a, now = started()
    judge(a, 25e6, now)
    a.hold()
    assert (a.phase, a.level) == (Phase.SETTLED, 16)


def test_each_measurement_records_the_level_it_measured_under_one_name():
    a, now = started()
    judge(a, 25e6, now)
    assert a.history[0].level == 1
    assert not hasattr(a.history[0], "parallel")


@pytest.mark.parametrize(
    ("preset", "clock"),
    [(Preset.reader(), Clock.READS), (Preset.download(), Clock.PROCESS)],
)
def test_reads_and_downloads_see_bytes_as_they_arrive_and_weigh_a_cpu_clock(preset, clock):
    a = preset.policy()
    assert (preset.clock, preset.window, a.window, a.whole_parts) == (
        clock,
        ADAPTIVE_WINDOW,
        ADAPTIVE_WINDOW,
        False,
    )
    assert (a.cap, a.first_window, a.level) == (ADAPTIVE_CAP, None, 1)


def test_a_download_policy_may_use_the_cores_it_is_given():
    assert Preset.download().policy(cores=4).cores == 4


def test_uploads_are_judged_over_whole_parts_and_first_over_the_probe_alone():
    preset = Preset.upload(8 * MiB, probe=MiB)
    a = preset.policy()
    assert (a.window, a.first_window, a.whole_parts, preset.clock) == (
        8 * MiB,
        MiB,
        True,
        Clock.NONE,
    )


def test_an_upload_of_small_parts_is_still_judged_over_the_least_window():
    assert Preset.upload(1, probe=None).window == ADAPTIVE_WINDOW


@pytest.mark.parametrize(("level", "halved"), [(16, 8), (5, 2), (2, 1), (1, 1)])
def test_a_throttling_answer_halves_the_level_and_settles_it_in_any_phase(level, halved):
    a = Adaptive(cap=16, start=level)
    a.throttled()
    assert (a.phase, a.level) == (Phase.SETTLED, halved)


def test_a_throttled_level_climbs_no_more_whatever_the_bytes_say():
    a, now = started()
    judge(a, 25e6, now)
    assert a.level == 16
    a.throttled()
    a.throttled()  # the level itself cuts every time it is told (parts are judged above)
    for _ in range(5):
        now = judge(a, 1e9, now)
    assert (a.phase, a.level) == (Phase.SETTLED, 4)
