"""A fault budget in time: how long a stream may go without progress (``max_stall`` on
Client.open and ShardDataset) instead of a count of resumes."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from datasets_helpers import make_shard
from rawserver import RawServer, Request, S3Object, object_reply, reset

import objsdk
from objsdk.datasets import ShardDataset, ShardError
from objsdk.datasets.dataset import DEFAULT_MAX_STALL


class Outage:
    """Serves ``obj``: the first answer breaks after 4 KiB, then every request is reset
    for ``seconds`` (forever if None), then answers are whole again."""

    def __init__(self, obj: S3Object, seconds: float | None) -> None:
        self.obj = obj
        self.seconds = seconds
        self.started: float | None = None
        self.lock = threading.Lock()

    def __call__(self, request: Request, conn: socket.socket) -> None:
        with self.lock:
            first = self.started is None
            if first:
                self.started = time.monotonic()
            assert self.started is not None
            down = self.seconds is None or time.monotonic() - self.started < self.seconds
        reply = object_reply(request, self.obj)
        if first:
            conn.sendall(reply.head + reply.body[:4096])
            reset(conn)
        elif down:
            reset(conn)
        else:
            reply.send(conn)


DATA = bytes(range(256)) * 400  # 100 KiB


def read_all(server: RawServer, **kw) -> tuple[bytes, objsdk.ReadStats]:
    with (
        objsdk.Client(server.url, "AKID", "SECRET", timeout=(1, 1)) as client,
        client.open("bkt", "key", readahead=0, **kw) as f,
    ):
        return f.read(), f.stats


def test_an_outage_longer_than_max_resume_allows_is_survived_within_max_stall():
    with RawServer(Outage(S3Object(DATA), 4.0)) as server, pytest.raises(objsdk.ResumeLimitError):
        read_all(server, max_resume=2)
    with RawServer(Outage(S3Object(DATA), 4.0)) as server:
        data, stats = read_all(server, max_resume=2, max_stall=15)
    assert data == DATA
    assert stats.resumes > 3


def test_max_stall_ends_a_read_that_makes_no_progress_within_the_budget():
    with RawServer(Outage(S3Object(DATA), None)) as server:
        started = time.monotonic()
        with pytest.raises(objsdk.ResumeLimitError, match=r"no progress for 3 s"):
            read_all(server, max_stall=3)
        elapsed = time.monotonic() - started
    assert 3 <= elapsed < 3 + 2  # never sleeps past the budget


@pytest.mark.parametrize("bad", [0, -1.0])
def test_max_stall_must_be_positive(bad):
    with pytest.raises(objsdk.errors.InvalidArgument, match="max_stall"):
        objsdk.Client("http://127.0.0.1:1", "A", "S").open("b", "k", max_stall=bad)


def test_shard_dataset_waits_out_an_outage_by_default_and_fails_past_max_stall():
    shard = make_shard(0, 20, size=5000)
    assert DEFAULT_MAX_STALL >= 120  # a one-minute outage is outlasted with room to spare
    with RawServer(Outage(S3Object(shard), 12.0)) as server:  # past max_resume's ~6 s
        client = objsdk.Client(server.url, "AKID", "SECRET", timeout=(1, 1))
        ds = ShardDataset(client, "bkt/s.tar", index=False, readahead=0)
        assert len(list(ds)) == 20
    with RawServer(Outage(S3Object(shard), None)) as server:
        client = objsdk.Client(server.url, "AKID", "SECRET", timeout=(1, 1))
        ds = ShardDataset(client, "bkt/s.tar", index=False, readahead=0, max_stall=2)
        with pytest.raises(ShardError, match="no progress for 2 s"):
            list(ds)
