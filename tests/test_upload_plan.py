"""An adaptive upload's plan: parts handed out as they are sent, made smaller once a
connection is cut, and the client's memory of cuts between uploads (no network)."""

from __future__ import annotations

from objsdk._core.parts import covers, plan_upload_probed
from objsdk._transfer.upload_plan import CutMemory, UploadPlan

MiB = 1 << 20
SIZE = MiB + 8 * 8 * MiB  # a 1 MiB probe and eight parts of 8 MiB


def _plan(memory: CutMemory | None = None) -> UploadPlan:
    parts = plan_upload_probed(SIZE, 8 * MiB, MiB)
    return UploadPlan(parts[0], parts[1:], memory)


def test_the_probe_is_handed_out_first_then_the_parts_in_order():
    parts = list(_plan())
    assert (parts[0].number, parts[0].length) == (10_000, MiB)
    assert [p.number for p in parts[1:]] == list(range(1, 9))
    assert all(p.length == 8 * MiB for p in parts[1:])


def test_a_cut_makes_the_parts_not_yet_handed_out_smaller():
    plan = _plan()
    handed = [next(it := iter(plan)), next(it), next(it)]  # the probe and two parts
    plan.cut()
    rest = list(it)
    assert [p.number for p in rest] == list(range(3, 3 + len(rest)))
    assert len(rest) == 48 * MiB // (5 * MiB)  # six parts' bytes in nine
    assert all(5 * MiB <= p.length < 6 * MiB for p in rest)
    assert covers(handed + rest, SIZE)


def test_a_second_cut_changes_nothing_more():
    plan = _plan()
    it = iter(plan)
    next(it)
    plan.cut()
    plan.cut()
    assert len(list(it)) == 64 * MiB // (5 * MiB)
    assert plan.cuts == 2


def test_a_cut_after_every_part_was_handed_out_is_remembered_for_the_next_upload():
    memory = CutMemory()
    plan = _plan(memory)
    list(plan)
    plan.cut()  # in the last round: nothing left to re-plan
    plan.finish()
    assert plan.cuts == 1
    assert memory.cut is True


def test_after_an_upload_with_a_cut_the_next_starts_with_the_smallest_parts():
    memory = CutMemory()
    first = _plan(memory)
    list(first)
    first.cut()
    first.finish()
    second = list(_plan(memory))
    assert all(5 * MiB <= p.length < 6 * MiB for p in second[1:])
    assert covers(second, SIZE)


def test_an_upload_without_a_cut_sets_the_memory_back_to_the_usual_parts():
    memory = CutMemory()
    memory.cut = True
    small = _plan(memory)
    list(small)
    small.finish()
    assert memory.cut is False
    assert all(p.length == 8 * MiB for p in list(_plan(memory))[1:])


def test_a_plan_without_memory_remembers_nothing():
    plan = _plan()
    plan.cut()
    plan.finish()  # nothing to tell
    assert all(p.length == 8 * MiB for p in list(_plan())[1:])
