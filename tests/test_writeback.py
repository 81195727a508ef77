"""Early writeback: a download's file is flushed while it is received, and a flush that
fails in the background fails the download instead of being forgotten."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

import objsdk
from objsdk import Client
from objsdk._transfer import download as download_module
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
        def __init__(self, fd: int) -> None:
            super().__init__(fd, step=64 * 1024, flush=failing)

    monkeypatch.setattr(download_module, "Writeback", Small)
    dest = tmp_path / "out.bin"
    with pytest.raises(objsdk.LocalWriteError) as e:
        client.download(bucket, "k", str(dest), parallel=1)
    assert e.value.errno == errno.EIO
    assert not dest.exists()
    monkeypatch.undo()
    client.download(bucket, "k", str(dest))  # the next call completes
    assert dest.read_bytes() == data
