"""Each private-attribute trick of the transport, and the public fallback taken when it
is switched off: same bytes, same errors."""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from queue import Queue

import pytest
import urllib3.connection
from rawserver import RawServer, Request, http_response

import objsdk
import objsdk._transport.translate
from objsdk import Client
from objsdk._transport import private_api
from objsdk._transport.http import HTTPTransport
from objsdk._transport.private_api import _timeval
from objsdk._transport.wire import Wire

pytestmark = pytest.mark.integration

MiB = 1 << 20


def unpack(raw: bytes) -> tuple[int, int]:
    return struct.unpack("ll", raw)


def test_timeval_keeps_whole_seconds_and_microseconds():
    assert unpack(_timeval(1.5)) == (1, 500_000)


def test_timeval_never_rounds_a_positive_timeout_to_zero():
    # Zero means "no timeout" to the kernel: a sub-microsecond timeout must not become it.
    assert unpack(_timeval(1e-9)) == (0, 1)


def test_timeval_rounds_up_to_the_next_second():
    assert unpack(_timeval(0.9999999)) == (1, 0)


@pytest.fixture(scope="module")
def big(client: Client) -> Iterator[tuple[str, bytes]]:
    bucket = "private-api-" + os.urandom(4).hex()
    client.create_bucket(bucket)
    data = os.urandom(6 * MiB + 123)
    client.put_object(bucket, "big", data)
    yield bucket, data
    client.delete_object(bucket, "big")
    client.delete_bucket(bucket)


def read_all(client: Client, bucket: str, *, readinto: bool) -> bytes:
    out = bytearray()
    with client.open(bucket, "big") as f:
        if readinto:
            buf = bytearray(MiB)
            while n := f.readinto(buf):
                out += buf[:n]
        else:
            while chunk := f.read(MiB):
                out += chunk
    return bytes(out)


@pytest.mark.parametrize("flag", ["DIRECT_READS", "RAW_FP"])
@pytest.mark.parametrize("readinto", [False, True])
def test_reads_give_the_same_bytes_with_the_trick_off(client, big, monkeypatch, flag, readinto):
    bucket, data = big
    monkeypatch.setattr(private_api, flag, False)
    assert hashlib.sha256(read_all(client, bucket, readinto=readinto)).digest() == (
        hashlib.sha256(data).digest()
    )


def test_direct_reads_hand_the_connection_back_to_the_pool(big, local_minio, monkeypatch):
    # A body read straight from the socket is closed properly, so the next request
    # reuses its connection instead of opening a new one (no TIME_WAIT pile-up).
    bucket, data = big
    connects: list[object] = []
    real = urllib3.connection.HTTPConnection.connect

    def counting(self):  # type: ignore[no-untyped-def]
        connects.append(self)
        return real(self)

    monkeypatch.setattr(urllib3.connection.HTTPConnection, "connect", counting)
    with local_minio.client() as client:
        for _ in range(5):
            # One stream: parts read ahead would open connections of their own (the
            # adaptive level climbs or not with the machine's load).
            buf = bytearray(MiB)
            out = bytearray()
            with client.open(bucket, "big", readahead=0) as f:
                while n := f.readinto(buf):
                    out += buf[:n]
            assert out == data
    assert len(connects) == 1


def test_direct_reads_are_used_on_plain_http(client, big, monkeypatch, s3_features):
    bucket, data = big
    taken: list[int] = []
    real = private_api.DirectSocket.take

    def spy(raw, fp, view):  # type: ignore[no-untyped-def]
        taken.append(len(view))
        return real(raw, fp, view)

    monkeypatch.setattr(private_api.DirectSocket, "take", staticmethod(spy))
    assert read_all(client, bucket, readinto=True) == data
    # A server that closes every connection (moto) hands http.client the socket for the
    # body alone: objsdk then reads through http.client (correct, one copy more).
    assert bool(taken) == s3_features.keep_alive


def test_upload_without_connection_checkout_streams_the_file(client, big, tmp_path, monkeypatch):
    bucket, _ = big
    monkeypatch.setattr(private_api, "CHECKOUT", False)
    sent: list[object] = []
    monkeypatch.setattr(socket.socket, "sendfile", lambda *a, **k: sent.append(a))
    path = tmp_path / "f"
    data = os.urandom(3 * MiB)
    path.write_bytes(data)
    client.upload(bucket, "up", str(path))
    assert sent == []
    assert client.get_object(bucket, "up") == data
    client.delete_object(bucket, "up")


def test_close_without_the_watch_trick_still_stops_read_ahead(big, local_minio, monkeypatch):
    bucket, data = big
    monkeypatch.setattr(private_api, "WATCH", False)
    with local_minio.client() as client:
        before = set(threading.enumerate())
        with client.open(bucket, "big", readahead=3, part_size=MiB) as f:
            assert f.read(2 * MiB) == data[: 2 * MiB]
        assert set(threading.enumerate()) - before == set()


def test_a_kernel_timeout_on_a_direct_read_is_an_objsdk_timeout():
    err = objsdk._transport.translate.translate(BlockingIOError(11, "EAGAIN"), "read", "b", "k")
    assert isinstance(err, objsdk.Timeout)


@pytest.mark.parametrize("wire_requests", [False, True], ids=["urllib3", "wire"])
def test_interrupting_a_watch_spares_a_connection_it_gave_back(
    big, local_minio, monkeypatch, wire_requests
):
    # A shared client: a connection one thread released may already serve another, so
    # a later interrupt of the first thread's watch must leave it alone. Both pools:
    # urllib3's (every request when the wire is off) and the wire's (whole answers).
    bucket, data = big
    connects: list[object] = []
    monkeypatch.setattr(HTTPTransport, "wire_requests", wire_requests)
    if wire_requests:
        real_connect = Wire._connect

        def counting_wire(self, origin):  # type: ignore[no-untyped-def]
            connects.append(origin)
            return real_connect(self, origin)

        monkeypatch.setattr(Wire, "_connect", counting_wire)
    else:
        real = urllib3.connection.HTTPConnection.connect

        def counting(self):  # type: ignore[no-untyped-def]
            connects.append(self)
            return real(self)

        monkeypatch.setattr(urllib3.connection.HTTPConnection, "connect", counting)
    with (
        local_minio.client() as client,
        ThreadPoolExecutor(1) as other,
        client.transport.watch() as w,
    ):
        assert client.get_object(bucket, "big", length=10) == data[:10]
        w.interrupt()  # while this thread is still inside its watch
        second = other.submit(client.get_object, bucket, "big", offset=5, length=10)
        assert second.result() == data[5:15]
    assert len(connects) == 1


def test_a_big_read_of_a_body_is_whole_from_its_first_so_reads_stay_aligned(
    client, big, monkeypatch
):
    # The first direct read drains what http.client had buffered, which is short of what
    # was asked; returned as is, every later read(1 MiB) straddled two network chunks and
    # paid a join: twice the CPU of requests' raw.read for the same bytes.
    from objsdk._transport.streamed import StreamedResponse

    bucket, data = big
    asked: list[tuple[int, int]] = []
    real = StreamedResponse.read

    def spy(self, n):  # type: ignore[no-untyped-def]
        got = real(self, n)
        asked.append((n, len(got)))
        return got

    monkeypatch.setattr(StreamedResponse, "read", spy)
    out = bytearray()
    with client.open(bucket, "big", readahead=0) as f:
        while chunk := f.read(MiB):
            out += chunk
    assert out == data
    body_reads = [(n, got) for n, got in asked if n >= MiB // 2]
    assert body_reads
    assert all(got == n for n, got in body_reads[:-1]), body_reads


# -- an interrupt that comes while a request is being set up ---------------------------


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """An HTTP endpoint that takes connections (the kernel's backlog) and never answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as server:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def _held_connect(
    monkeypatch: pytest.MonkeyPatch, cls: type, name: str
) -> tuple[threading.Event, threading.Event]:
    """Make ``cls.name`` (a connect step) signal ``connecting`` and wait for ``go``."""
    connecting, go = threading.Event(), threading.Event()
    real = getattr(cls, name)

    def held(*args, **kwargs):  # type: ignore[no-untyped-def]
        connecting.set()
        assert go.wait(10)
        return real(*args, **kwargs)

    monkeypatch.setattr(cls, name, held)
    return connecting, go


def _request(client: Client, how: str, tmp: str) -> object:
    if how == "file PUT":
        with open(tmp, "rb") as f:
            return client.transport.send_file(
                "b", "k", f, offset=0, count=os.path.getsize(tmp), headers={}
            )
    return client.transport.request(
        "GET", operation="read", bucket="b", key="k", stream=how == "streamed GET"
    )


HOW = ["streamed GET", "whole GET", "file PUT"]


def run_watched(
    worker: ThreadPoolExecutor, client: Client, call: Callable[[], object]
) -> tuple[Future[object], private_api.Watch]:
    """``call()`` on ``worker`` under the transport's watch; the watch once it exists."""
    ready: Queue[private_api.Watch] = Queue()

    def watched() -> object:
        with client.transport.watch():
            w = private_api.current_watch()
            assert w is not None
            ready.put(w)
            return call()

    result = worker.submit(watched)
    return result, ready.get(timeout=10)


@pytest.mark.parametrize("how", HOW)
def test_an_interrupt_while_the_connection_is_made_ends_the_request_once_it_is(
    silent_endpoint, tmp_path, monkeypatch, how
):
    # The watch learns the connection before its socket exists (urllib3 connects inside
    # the request): an interrupt then has nothing to shut down, and the request must
    # notice it once connected instead of waiting out the read timeout.
    tmp = tmp_path / "body"
    tmp.write_bytes(os.urandom(MiB))
    if how == "whole GET":
        connecting, go = _held_connect(monkeypatch, Wire, "_connect")
    else:
        connecting, go = _held_connect(monkeypatch, urllib3.connection.HTTPConnection, "connect")
    with (
        Client(silent_endpoint, "AK", "SK", timeout=(2, 30), retries=0) as client,
        ThreadPoolExecutor(1) as worker,
    ):
        started = time.monotonic()
        result, watch = run_watched(worker, client, lambda: _request(client, how, str(tmp)))
        assert connecting.wait(10)
        watch.interrupt()
        go.set()
        with pytest.raises(objsdk.Cancelled):
            result.result(timeout=20)
        assert time.monotonic() - started < 10


def test_an_interrupt_cuts_a_stalled_file_put_short(silent_endpoint, tmp_path):
    # The body fills the socket's buffers and then waits for a server that never reads.
    tmp = tmp_path / "body"
    tmp.write_bytes(os.urandom(64 * MiB))
    with (
        Client(silent_endpoint, "AK", "SK", timeout=(2, 30), retries=0) as client,
        ThreadPoolExecutor(1) as worker,
    ):
        put = lambda: _request(client, "file PUT", str(tmp))  # noqa: E731
        result, watch = run_watched(worker, client, put)
        time.sleep(1)  # connected, head sent, body stalled
        started = time.monotonic()
        watch.interrupt()
        with pytest.raises((objsdk.Cancelled, objsdk.TransportError)):
            result.result(timeout=40)
        assert time.monotonic() - started < 10


def test_an_interrupt_ends_the_wait_before_a_retry(tmp_path):
    # Every answer is 503 SlowDown: the transport retries with a growing backoff. An
    # interrupt (a reader closed, another part failed) must end that wait at once.
    slow_down = http_response(
        503,
        {"Content-Type": "application/xml"},
        b"<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>",
    )

    def handler(request: Request, conn: socket.socket) -> None:
        conn.sendall(slow_down)

    with (
        RawServer(handler) as server,
        Client(server.url, "AK", "SK", timeout=(2, 5), retries=8) as client,
        ThreadPoolExecutor(1) as worker,
    ):
        get = lambda: client.transport.request(  # noqa: E731
            "GET", operation="get", bucket="b", key="k", idempotent=True
        )
        result, watch = run_watched(worker, client, get)
        deadline = time.monotonic() + 10
        while len(server.requests) < 5:  # the backoff before the next is ~1.7 s
            assert time.monotonic() < deadline, "the request was never retried"
            time.sleep(0.01)
        started = time.monotonic()
        watch.interrupt()
        with pytest.raises(objsdk.Cancelled, match=r"'b'.*'k'"):
            result.result(timeout=20)
        assert time.monotonic() - started < 1.0


# -- the low-water mark of direct receives ------------------------------------------------


@pytest.fixture
def marks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every ``SO_RCVLOWAT`` set on a socket: (the socket's id, the mark)."""
    set_marks: list[tuple[int, int]] = []
    real = socket.socket.setsockopt

    def spy(self, level, name, value, *rest):  # type: ignore[no-untyped-def]
        if (level, name) == (socket.SOL_SOCKET, socket.SO_RCVLOWAT):
            set_marks.append((id(self), value))
        return real(self, level, name, value, *rest)

    monkeypatch.setattr(socket.socket, "setsockopt", spy)
    return set_marks


def test_direct_receives_wait_for_a_slice_and_give_the_connection_back_at_the_default_mark(
    client, big, marks, s3_features
):
    # Each 256 KiB receive wakes once, not once per segment; the next answer's head is
    # read a line at a time, so the pooled connection must be back at 1.
    if not s3_features.keep_alive:
        pytest.skip("a server that closes every connection gets no direct reads")
    bucket, data = big
    assert read_all(client, bucket, readinto=True) == data
    assert any(mark >= private_api.MIN_LOWAT for _, mark in marks), marks
    last: dict[int, int] = {}
    for sock, mark in marks:
        last[sock] = mark
    assert set(last.values()) == {1}


def test_without_the_trick_no_mark_is_set(client, big, marks, monkeypatch):
    bucket, data = big
    monkeypatch.setattr(private_api, "LOWAT", False)
    assert read_all(client, bucket, readinto=True) == data
    assert marks == []


def test_the_end_of_a_body_arriving_late_is_received_at_once(marks):
    # The kernel compares the mark with the bytes queued, not with what a receive still
    # lacks: a receive that has copied part of its slice and waits for a tail shorter
    # than the mark would sleep until the read timeout (5 s here). The tail comes after
    # a pause, so the last receive (about 90 KB: the body is not a whole number of
    # 256 KiB slices) copies what came first and then waits for it.
    body = os.urandom(2 * MiB + 100_000)
    tail = 20_000

    def handler(request: Request, conn: socket.socket) -> None:
        head = http_response(200, {"ETag": '"e"', "Content-Length": str(len(body))})
        conn.sendall(head + body[:-tail])
        time.sleep(0.3)
        conn.sendall(body[-tail:])

    buf = bytearray(256 * 1024)
    out = bytearray()
    with RawServer(handler) as server, Client(server.url, "AK", "SK", timeout=(2, 5)) as c:
        started = time.monotonic()
        with c.open("b", "k", readahead=0, verify=False) as f:
            while n := f.readinto(buf):
                out += buf[:n]
        took = time.monotonic() - started
    assert out == body
    assert took < 2, took
    assert any(mark >= private_api.MIN_LOWAT for _, mark in marks), marks
