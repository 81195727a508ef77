"""Against a server that throttles: transfers at their defaults complete, small GETs never
fail, a failed upload leaves no multipart upload behind, and a transfer told to slow down
keeps fewer requests in flight.

The server is a MinIO of its own that takes ``MINIO_API_REQUESTS_MAX=4`` requests at once
and answers any more 429 TooManyRequests at once (with ``Retry-After: 60``), reached
through Toxiproxy at 8 MB/s per connection: more requests in flight would each be faster
in total, so the client wants more than the server admits. The SlowDown test answers
503 SlowDown from a :class:`~objsdk.testing.faultproxy.FaultProxy` instead, whose log
says when each request was in flight.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import pytest

from objsdk import Client
from objsdk._transfer.multipart_calls import list_multipart_uploads
from objsdk.testing import LocalMinio
from objsdk.testing.faultproxy import Action, FaultProxy, LoggedRequest
from objsdk.testing.toxiproxy import Proxy, Toxiproxy

pytestmark = pytest.mark.integration

MiB = 1 << 20
LIMIT = 4  # requests the server takes at once
RATE = 8000  # KB/s per connection (Toxiproxy's bandwidth toxic): 8 MB/s
# Eight parts of 8 MiB at the defaults: twice what the server admits at once.
SIZE = 64 * MiB


# -- the throttling server ----------------------------------------------------------------


@pytest.fixture(scope="module")
def limited_minio() -> Iterator[LocalMinio]:
    with LocalMinio(env={"MINIO_API_REQUESTS_MAX": str(LIMIT)}) as minio:
        yield minio


@pytest.fixture
def narrow(limited_minio: LocalMinio, toxiproxy: Toxiproxy) -> Iterator[Proxy]:
    """Toxiproxy in front of the throttling server, at ``RATE`` per connection each way."""
    proxy = toxiproxy.create_proxy(
        f"limited-{uuid.uuid4().hex[:12]}", f"{limited_minio.host}:{limited_minio.port}"
    )
    proxy.add_toxic("bandwidth", stream="downstream", rate=RATE)
    proxy.add_toxic("bandwidth", stream="upstream", rate=RATE)
    try:
        yield proxy
    finally:
        proxy.delete()


@pytest.fixture
def via(narrow: Proxy, limited_minio: LocalMinio) -> Iterator[Client]:
    """A client at its defaults, through the narrow proxy."""
    with Client(narrow.endpoint, limited_minio.access_key, limited_minio.secret_key) as c:
        yield c


@pytest.fixture
def direct(limited_minio: LocalMinio) -> Iterator[Client]:
    """A client straight to the throttling server, to set up and check."""
    with limited_minio.client() as c:
        yield c


@pytest.fixture
def bucket(direct: Client, fresh_bucket_name: str) -> Iterator[str]:
    direct.create_bucket(fresh_bucket_name)
    yield fresh_bucket_name
    for upload in list_multipart_uploads(direct.transport, fresh_bucket_name):
        direct.transport.request(
            "DELETE",
            operation="abort",
            bucket=fresh_bucket_name,
            key=upload.key,
            params=[("uploadId", upload.upload_id)],
            ok=(204,),
        )
    direct.delete_objects(
        fresh_bucket_name, [o.key for o in direct.list_objects(fresh_bucket_name)]
    )
    direct.delete_bucket(fresh_bucket_name)


@pytest.fixture(scope="module")
def data() -> bytes:
    return os.urandom(SIZE)


def throttled(caplog: pytest.LogCaptureFixture, operation: str = "") -> int:
    """How many 429 answers to ``operation`` (any, if empty) were retried."""
    return sum(
        1
        for r in caplog.records
        if "TooManyRequests (HTTP 429)" in r.getMessage()
        and "retrying" in r.getMessage()
        and r.getMessage().startswith(operation)
    )


# -- transfers at their defaults ------------------------------------------------------------


def _download(via: Client, direct: Client, bucket: str, tmp: Path, data: bytes) -> bytes:
    via.download(bucket, "obj", tmp / "out")
    return (tmp / "out").read_bytes()


def _read(via: Client, direct: Client, bucket: str, tmp: Path, data: bytes) -> bytes:
    with via.open(bucket, "obj") as f:
        return f.read()


def _upload(via: Client, direct: Client, bucket: str, tmp: Path, data: bytes) -> bytes:
    via.upload(bucket, "uploaded", data)
    return direct.get_object(bucket, "uploaded")  # straight from the server: quicker


Transfer = Callable[[Client, Client, str, Path, bytes], bytes]


@pytest.mark.parametrize(
    "transfer", [_download, _read, _upload], ids=["download", "read", "upload"]
)
def test_a_transfer_at_its_defaults_completes_byte_identical_while_the_server_throttles(
    via: Client,
    direct: Client,
    limited_minio: LocalMinio,
    bucket: str,
    data: bytes,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    transfer: Transfer,
) -> None:
    """Whatever level the transfer climbs to (how far depends on the machine), the
    server refuses its first requests: every slot is held for its first second."""
    direct.put_object(bucket, "obj", data)
    caplog.set_level(logging.WARNING, logger="objsdk")
    with contextlib.ExitStack() as slots:
        slots.enter_context(every_slot_taken(limited_minio, direct, bucket))
        timer = _release_in(1.0, slots)
        try:
            assert transfer(via, direct, bucket, tmp_path, data) == data
        finally:
            timer.join()
    assert throttled(caplog) > 0, "the server never throttled: nothing was tested"


def test_sixteen_threads_of_small_gets_fail_zero_times(
    via: Client, direct: Client, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    small = os.urandom(4096)
    direct.put_object(bucket, "small", small)
    caplog.set_level(logging.WARNING, logger="objsdk")
    failures: list[BaseException] = []
    wrong: list[int] = []
    done: list[int] = []
    stop = time.monotonic() + 5

    def loop() -> None:
        n = 0
        while time.monotonic() < stop:
            try:
                if via.get_object(bucket, "small") != small:
                    wrong.append(1)
            except Exception as e:
                failures.append(e)
            n += 1
        done.append(n)

    threads = [threading.Thread(target=loop) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert failures == []
    assert wrong == []
    assert sum(done) > 100
    assert throttled(caplog, "get_object") > 0, "the server never throttled: nothing was tested"


# -- a failed upload, while the server throttles its abort --------------------------------


@contextlib.contextmanager
def every_slot_taken(minio: LocalMinio, client: Client, bucket: str) -> Iterator[None]:
    """The server's ``LIMIT`` request slots held by GETs whose answers are never read
    (MinIO holds a slot while it writes the answer, and blocks once the socket buffers
    are full), so it refuses any other request at once, until the block ends."""
    client.put_object(bucket, "hold", bytes(32 * MiB))
    url = urlsplit(client.presign("GET", bucket, "hold", expires=600))
    request = f"GET {url.path}?{url.query} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode()
    holders: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while len(holders) < LIMIT:
            assert time.monotonic() < deadline, "could not take the server's slots"
            sock = socket.create_connection((minio.host, minio.port), timeout=10)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(request)
            head = sock.recv(12)
            if head.startswith(b"HTTP/1.1 200"):
                holders.append(sock)  # a slot, held while the answer is not read
            else:
                sock.close()  # refused (429): another request had the slot
                time.sleep(0.05)
        yield
    finally:
        for sock in holders:
            sock.close()


def _release_in(seconds: float, stack: contextlib.ExitStack) -> threading.Timer:
    timer = threading.Timer(seconds, stack.close)
    timer.start()
    return timer


def _uploads_left(direct: Client, bucket: str) -> list[str]:
    return [u.upload_id for u in list_multipart_uploads(direct.transport, bucket)]


def test_a_writer_whose_block_fails_leaves_no_upload_though_its_abort_is_throttled(
    via: Client,
    direct: Client,
    limited_minio: LocalMinio,
    bucket: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="objsdk")
    slots = contextlib.ExitStack()
    timers: list[threading.Timer] = []

    def write_then_die() -> None:
        with via.open_write(bucket, "w") as w:
            w.write(os.urandom(20 * MiB))  # a multipart upload, parts on their way
            assert _uploads_left(direct, bucket)
            slots.enter_context(every_slot_taken(limited_minio, direct, bucket))
            timers.append(_release_in(2.0, slots))  # slots free while the abort is retried
            raise KeyError("producer died")

    with pytest.raises(KeyError, match="producer died"):
        write_then_die()
    for timer in timers:
        timer.join()
    assert _uploads_left(direct, bucket) == []
    assert "w" not in [o.key for o in direct.list_objects(bucket)]
    assert throttled(caplog, "abort_multipart_upload") > 0, "the abort was never throttled"


class _DyingStream:
    """A stream that ends in an error after ``good`` bytes: the upload's source fails
    once parts are on their way, and ``before_failing()`` runs first."""

    def __init__(self, good: int, before_failing: object) -> None:
        self._left = good
        self._before_failing = before_failing

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            self._before_failing()  # type: ignore[operator]
            raise OSError("the producer died")
        n = self._left if n < 0 else min(n, self._left)
        self._left -= n
        return os.urandom(n)

    def readinto(self, view: memoryview) -> int:
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False


def test_a_stream_upload_whose_part_fails_leaves_no_upload_though_its_abort_is_throttled(
    via: Client,
    direct: Client,
    limited_minio: LocalMinio,
    bucket: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="objsdk")
    slots = contextlib.ExitStack()
    timers: list[threading.Timer] = []

    def take_the_slots() -> None:
        slots.enter_context(every_slot_taken(limited_minio, direct, bucket))
        timers.append(_release_in(2.0, slots))

    stream: BinaryIO = _DyingStream(20 * MiB, take_the_slots)  # type: ignore[assignment]
    with pytest.raises(OSError, match="the producer died"):
        via.upload(bucket, "s", stream)
    for timer in timers:
        timer.join()
    assert _uploads_left(direct, bucket) == []
    assert "s" not in [o.key for o in direct.list_objects(bucket)]
    assert throttled(caplog, "abort_multipart_upload") > 0, "the abort was never throttled"


# -- SlowDown halfway through a transfer --------------------------------------------------


def in_flight(log: list[LoggedRequest], at: float) -> int:
    """How many of the requests logged were in flight at the proxy at ``at``."""
    return sum(1 for r in log if r.started <= at < r.time)


@pytest.fixture
def slow_proxy(local_minio: LocalMinio, toxiproxy: Toxiproxy) -> Iterator[FaultProxy]:
    """A FaultProxy (which answers SlowDown) before Toxiproxy at 2 MB/s per connection
    before the session MinIO: each part is slow enough for many to be in flight."""
    tox = toxiproxy.create_proxy(
        f"slow-{uuid.uuid4().hex[:12]}", f"{local_minio.host}:{local_minio.port}"
    )
    tox.add_toxic("bandwidth", stream="downstream", rate=2000)
    try:
        with FaultProxy(tox.endpoint) as proxy:
            yield proxy
    finally:
        tox.delete()


@pytest.fixture
def plain_bucket(client: Client, fresh_bucket_name: str) -> Iterator[str]:
    """A bucket on the session MinIO, which takes any number of requests."""
    client.create_bucket(fresh_bucket_name)
    yield fresh_bucket_name
    client.delete_objects(
        fresh_bucket_name, [o.key for o in client.list_objects(fresh_bucket_name)]
    )
    client.delete_bucket(fresh_bucket_name)


def test_slow_down_halfway_halves_the_requests_in_flight_and_the_read_completes(
    slow_proxy: FaultProxy, local_minio: LocalMinio, client: Client, plain_bucket: str
) -> None:
    bucket = plain_bucket
    size, part = 64 * MiB, MiB
    data = os.urandom(size)
    client.put_object(bucket, "obj", data)
    got = bytearray()
    with (
        Client(slow_proxy.endpoint, local_minio.access_key, local_minio.secret_key) as via,
        via.open(bucket, "obj", part_size=part) as f,
    ):
        while len(got) < size // 2:
            got += f.read(part)
        slow_proxy.add_rule(Action.SLOW_DOWN, method="GET", times=None)
        timer = threading.Timer(1.5, slow_proxy.clear_rules)  # the storm passes
        timer.start()
        while chunk := f.read(part):
            got += chunk
        timer.join()
    assert bytes(got) == data
    log = sorted(slow_proxy.requests(method="GET"), key=lambda r: r.started)
    first = min(r.time for r in log if r.status == 503)
    level = max(in_flight(log, r.started) for r in log if r.started < first)
    assert level >= 4, f"only {level} requests were ever in flight: nothing to halve"
    answers = sorted(r.time for r in log if r.time > first)
    assert len(answers) > 2 * level, f"{len(answers)} answers after the first 503"
    settled = answers[2 * level - 1]  # the 2 x level-th answer after the first 503
    after = [settled] + [r.started for r in log if r.started > settled]
    most = max(in_flight(log, t) for t in after)
    assert most <= level // 2, f"{most} requests in flight after a SlowDown at {level}"
