"""Part buffers: zero-filled anonymous memory maps, populated at once when asked."""

from __future__ import annotations

import mmap

import pytest

from objsdk._io.buffers import PartBuffer, part_buffer

MiB = 1 << 20


@pytest.mark.parametrize("populate", [False, True])
def test_part_buffer_is_zero_filled_and_of_the_size_asked(populate: bool) -> None:
    buf = part_buffer(3 * MiB + 5, populate=populate)
    assert isinstance(buf, PartBuffer)
    assert len(buf) == 3 * MiB + 5
    assert buf[:] == bytes(3 * MiB + 5)


def test_part_buffer_is_writable_through_a_memoryview() -> None:
    buf = part_buffer(MiB)
    with memoryview(buf) as view:
        view[10:13] = b"abc"
    assert buf[8:15] == b"\0\0abc\0\0"


def test_part_buffer_maps_no_file() -> None:
    calls: list[int] = []
    real = mmap.mmap

    def spy(fileno: int, *a: object, **k: object) -> mmap.mmap:
        calls.append(fileno)
        return real(fileno, *a, **k)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mmap, "mmap", spy)
        part_buffer(MiB)
        part_buffer(MiB, populate=True)
    assert calls == [-1, -1]


@pytest.mark.skipif(not hasattr(mmap, "MAP_POPULATE"), reason="MAP_POPULATE is Linux's")
def test_populated_buffer_asks_for_every_page_at_creation() -> None:
    flags: list[int] = []
    real = mmap.mmap

    def spy(fileno: int, length: int, **k: int) -> mmap.mmap:
        flags.append(k.get("flags", 0))
        return real(fileno, length, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mmap, "mmap", spy)
        part_buffer(MiB, populate=True)
        part_buffer(MiB)
    assert flags[0] & mmap.MAP_POPULATE
    assert not flags[1] & mmap.MAP_POPULATE
