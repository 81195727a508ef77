"""Early writeback: a download's file is flushed while it is received, and a flush that
fails in the background fails the download instead of being forgotten."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import objsdk
from objsdk import Client
from objsdk._core.parts import Part
from objsdk._transfer import download_file as download_module
from objsdk._transfer.writeback import Writeback


class Flushes:
    """A flush function that records which thread called it, and can fail."""

    def __init__(self, fail: OSError | None = None) -> None:
        self.threads: list[str] = []
        self.fail = fail
        self.called = threading.Event()

    def __call__(self, fd: int) -> None:
        self.threads.append(threading.current_thread().name)
        self.called.set()
        if self.fail is not None:
            error, self.fail = self.fail, None
            raise error


def test_every_step_of_written_bytes_is_flushed_by_a_background_thread() -> None:
    flushes = Flushes()
    wb = Writeback(99, step=100, flush=flushes)
    wb.wrote(60)
    assert not flushes.called.wait(0.05)  # under one step: nothing yet
    wb.wrote(60)
    assert flushes.called.wait(5)
    wb.close()
    assert flushes.threads == ["objsdk-writeback"]


def test_sync_flushes_on_the_calling_thread() -> None:
    flushes = Flushes()
    wb = Writeback(99, step=100, flush=flushes)
    wb.sync()
    wb.close()
    assert flushes.threads == [threading.current_thread().name]


def test_an_error_met_in_the_background_is_raised_by_the_next_sync_once() -> None:
    # fdatasync reports a write-back error once per open file: had the background thread
    # swallowed it, the part's own flush would succeed over lost pages.
    flushes = Flushes(fail=OSError(errno.EIO, "Input/output error"))
    wb = Writeback(99, step=10, flush=flushes)
    wb.wrote(10)
    assert flushes.called.wait(5)
    wb.close()
    with pytest.raises(OSError, match="Input/output error") as e:
        wb.sync()
    assert e.value.errno == errno.EIO
    wb.sync()  # reported once, as the kernel does


def test_close_stops_the_thread_and_can_be_called_twice() -> None:
    wb = Writeback(99, step=10, flush=Flushes())
    wb.wrote(10)
    wb.close()
    wb.close()
    assert not [t for t in threading.enumerate() if t.name == "objsdk-writeback"]
    wb.wrote(10)  # after close: no new thread
    assert not [t for t in threading.enumerate() if t.name == "objsdk-writeback"]


# -- parts recorded in groups --------------------------------------------------------------


class Blocking:
    """A flush that waits for ``release`` (so a test can act while it runs)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, fd: int) -> None:
        self.started.set()
        assert self.release.wait(5)


def test_a_part_is_handed_on_only_by_a_flush_that_began_after_it_was_written() -> None:
    handed: list[list[Part]] = []
    flush = Blocking()
    wb = Writeback(99, step=10, flush=flush, on_durable=lambda parts: handed.append(list(parts)))
    wb.wrote(10)  # a background flush starts...
    assert flush.started.wait(5)
    wb.written(Part(0, 0, 10))  # ...before this part was written
    flush.release.set()
    wb.close()
    assert handed == []  # that flush may have missed the part's pages
    wb.sync()
    assert handed == [[Part(0, 0, 10)]]


def test_parts_are_handed_on_in_one_group_per_flush() -> None:
    handed: list[list[Part]] = []
    wb = Writeback(99, step=1 << 40, flush=lambda fd: None, on_durable=handed.append)
    for i in range(3):
        wb.written(Part(i, i * 10, i * 10 + 10))
    wb.sync()
    wb.sync()  # nothing new: nothing handed on
    assert [list(group) for group in handed] == [[Part(0, 0, 10), Part(1, 10, 20), Part(2, 20, 30)]]


def test_a_written_part_is_handed_on_within_commit_seconds_though_nothing_else_happens() -> None:
    # On a slow link bytes take long to reach a step: time bounds what a crash loses.
    handed: list[Part] = []
    wb = Writeback(
        99, step=1 << 40, flush=lambda fd: None, on_durable=handed.extend, commit_seconds=0.3
    )
    started = time.monotonic()
    wb.written(Part(0, 0, 10))
    time.sleep(0.1)
    assert handed == []  # sooner than commit_seconds: no flush yet
    while not handed and time.monotonic() - started < 5:
        time.sleep(0.01)
    waited = time.monotonic() - started
    wb.close()
    assert handed == [Part(0, 0, 10)]
    assert 0.3 <= waited < 5


def test_no_part_is_handed_on_after_a_flush_failed() -> None:
    # After a write-back error the kernel marks the lost pages clean: a later flush
    # succeeds over them, so success then proves nothing.
    handed: list[Part] = []
    flushes = Flushes(fail=OSError(errno.EIO, "Input/output error"))
    wb = Writeback(99, step=10, flush=flushes, on_durable=handed.extend)
    wb.written(Part(0, 0, 10))
    wb.wrote(10)
    assert flushes.called.wait(5)
    wb.close()
    with pytest.raises(OSError, match="Input/output error"):
        wb.sync()
    wb.written(Part(1, 10, 20))
    wb.sync()
    wb.keep()
    assert handed == []


def test_keep_hands_on_what_is_written_and_is_quiet_when_the_flush_fails() -> None:
    handed: list[Part] = []
    wb = Writeback(99, step=1 << 40, flush=lambda fd: None, on_durable=handed.extend)
    wb.written(Part(0, 0, 10))
    wb.keep()
    assert handed == [Part(0, 0, 10)]
    failing = Writeback(99, flush=Flushes(fail=OSError(errno.ENOSPC, "full")))
    failing.written(Part(0, 0, 10))
    failing.keep()  # the caller is raising its own error: this adds none


def test_a_record_that_fails_in_the_background_is_not_retried_in_a_loop_and_keep_makes_room() -> (
    None
):
    # A full disk: the data is flushed, but the record cannot be rewritten.
    flushes: list[int] = []
    attempts: list[int] = []
    room = threading.Event()
    handed: list[Part] = []

    def record(parts: Sequence[Part]) -> None:
        attempts.append(len(parts))
        if not room.is_set():
            raise OSError(errno.ENOSPC, "No space left on device")
        handed.extend(parts)

    wb = Writeback(99, step=10, flush=flushes.append, on_durable=record, commit_seconds=0.1)
    wb.written(Part(0, 0, 10))
    wb.wrote(10)
    deadline = time.monotonic() + 5
    while not attempts and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # five times commit_seconds
    assert attempts == [1]  # tried once, then left for the caller
    made: list[list[Part]] = []
    wb.keep(lambda waiting: (made.append(list(waiting)), room.set()))
    assert made == [[Part(0, 0, 10)]]
    assert handed == [Part(0, 0, 10)]


def test_finish_flushes_and_raises_a_flush_error_but_not_a_record_error() -> None:
    # Every byte is on disk; a last record rewrite that finds no room must not fail it.
    def full(parts: Sequence[Part]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    flushes: list[int] = []
    wb = Writeback(99, step=1 << 40, flush=flushes.append, on_durable=full)
    wb.written(Part(0, 0, 10))
    wb.finish()
    assert flushes == [99]
    failing = Writeback(99, flush=Flushes(fail=OSError(errno.EIO, "Input/output error")))
    failing.written(Part(0, 0, 10))
    with pytest.raises(OSError, match="Input/output error"):
        failing.finish()


@pytest.mark.integration
def test_a_download_whose_background_flush_fails_raises_and_leaves_no_file(
    client: Client, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(3 << 20)
    client.put_object(bucket, "k", data)
    flushes = Flushes(fail=OSError(errno.EIO, "Input/output error"))

    def failing(fd: int) -> None:
        if threading.current_thread().name == "objsdk-writeback":
            flushes(fd)
        else:
            os.fsync(fd)

    class Small(Writeback):
        def __init__(self, fd: int, **kwargs: Any) -> None:
            super().__init__(fd, step=64 * 1024, flush=failing, **kwargs)
            self.total = 0

        def wrote(self, n: int) -> None:
            super().wrote(n)
            self.total += n
            if self.total >= 64 * 1024:
                # The background flush runs before the download writes on: on a busy
                # machine it could otherwise first be scheduled after the last byte,
                # and the final flush on the caller's thread would find nothing wrong.
                flushes.called.wait(5)

    monkeypatch.setattr(download_module, "Writeback", Small)
    dest = tmp_path / "out.bin"
    with pytest.raises(objsdk.LocalWriteError) as e:
        # Parts of 1 MiB: an object of one part keeps no record and flushes only at the end.
        client.download(bucket, "k", str(dest), parallel=1, part_size=1 << 20)
    assert e.value.errno == errno.EIO
    assert not dest.exists()
    monkeypatch.undo()
    client.download(bucket, "k", str(dest))  # the next call completes
    assert dest.read_bytes() == data


@pytest.mark.integration
def test_a_download_completes_when_only_its_last_record_rewrite_finds_no_room(
    client: Client, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(3 << 20)
    client.put_object(bucket, "k", data)
    saved = download_module.save_state
    calls: list[int] = []

    def full_after_the_first(path: str, state: Any) -> None:
        calls.append(len(state.done))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        saved(path, state)

    monkeypatch.setattr(download_module, "save_state", full_after_the_first)
    dest = tmp_path / "out.bin"
    # Parts of 1 MiB: an object of one part keeps no record to rewrite.
    result = client.download(bucket, "k", str(dest), parallel=1, part_size=1 << 20)
    assert dest.read_bytes() == data
    assert result.parts_fetched == result.parts_total
    assert len(calls) == 2  # the record of a new download, then its parts' (refused)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]
