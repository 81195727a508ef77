"""A fault budget in time: how long a stream may go without progress (``max_stall`` on
Client.open and ShardDataset) instead of a count of resumes; and what it does not
cover: an endpoint a dataset has never reached."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest
from datasets_helpers import expected_samples, make_shard
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


def test_a_first_shard_that_cannot_connect_fails_within_seconds_naming_the_endpoint(
    unused_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Nothing listens: the endpoint is wrong or down, not an outage to wait out for
    # max_stall (180 s by default, which this took before).
    endpoint = f"http://127.0.0.1:{unused_port}"
    client = objsdk.Client(endpoint, "AKID", "SECRET")
    ds = ShardDataset(client, ["bkt/a.tar", "bkt/b.tar"], index=False, shuffle_shards=False)
    assert ds.max_stall == DEFAULT_MAX_STALL
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, "objsdk"), pytest.raises(ShardError) as info:
        next(iter(ds))
    elapsed = time.monotonic() - started
    cause = info.value.__cause__
    assert isinstance(cause, objsdk.ConnectError)
    assert cause.endpoint == f"{endpoint}/bkt/a.tar"
    assert f'"{endpoint}/bkt/a.tar"' in str(info.value)
    assert not [r for r in caplog.records if "resuming" in r.getMessage()]
    assert elapsed < 10


def test_a_server_restart_between_shards_is_waited_out_like_one_inside_a_shard() -> None:
    # The endpoint answered the first shard (sent whole): when the next one is first
    # asked for (its prefetch), the server goes away for 3 s (connections closed, then
    # refused, as while it restarts), and the next shard is opened again, and read,
    # meanwhile. That is an outage, not an endpoint never reached: it is waited out.
    shards = {"/bkt/a.tar": make_shard(0, 20), "/bkt/b.tar": make_shard(1, 20)}
    a_sent, restarted = threading.Event(), threading.Event()

    def restart_when_b_is_asked_for(request: Request, conn: socket.socket) -> None:
        if request.path == "/bkt/b.tar" and not restarted.is_set():
            assert a_sent.wait(5)
            restarted.set()
            server.refuse_for(3.0)
            return
        object_reply(request, S3Object(shards[request.path])).send(conn)
        if request.path == "/bkt/a.tar":
            a_sent.set()

    with RawServer(restart_when_b_is_asked_for) as server:
        client = objsdk.Client(server.url, "AKID", "SECRET", timeout=(1, 1), retries=0)
        ds = ShardDataset(
            client, ["bkt/a.tar", "bkt/b.tar"], index=False, readahead=0, shuffle_shards=False
        )
        samples = {s["__key__"]: s["jpg"] for s in ds}
    assert restarted.is_set()
    assert samples == expected_samples(2, 20)
