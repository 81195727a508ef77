"""objsdk's own HTTP/1.1 exchanges (objsdk._transport.wire), against a raw-socket server.

What goes out is exactly what was signed; an answer is taken whole, framed as RFC 9112
says, or refused with the urllib3 exception urllib3 raises for the same failure; a
connection is reused only when nothing about it is in doubt.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import warnings
from collections.abc import Iterator

import pytest
import urllib3.exceptions

from objsdk import Client, errors
from objsdk._transport import private_api
from objsdk._transport import wire as wire_module
from objsdk._transport.http import HTTPTransport
from objsdk._transport.wire import Fields, Wire
from tests.rawserver import RawServer, Request, chunked_body, hang, http_response


def wire(timeout: tuple[float, float] = (2.0, 2.0), maxsize: int = 4) -> Wire:
    return Wire(verify=True, timeout=timeout, maxsize=maxsize)


def answer_with(raw: bytes):  # type: ignore[no-untyped-def]
    def handler(request: Request, conn: socket.socket) -> None:
        conn.sendall(raw)

    return handler


def connections(server: RawServer) -> int:
    return len(server._threads)


@pytest.fixture
def w() -> Iterator[Wire]:
    the_wire = wire()
    yield the_wire
    the_wire.close()


# -- what goes out -----------------------------------------------------------------------


def test_the_request_goes_out_as_signed(w: Wire) -> None:
    with RawServer(answer_with(http_response(200, {}, b"ok"))) as server:
        url = f"{server.url}/b/a%20key%2Bx?versionId=v%2F1"
        answer = w.exchange("GET", url, {"Authorization": "AWS4 sig", "x-amz-date": "D"}, None)
    assert answer.status == 200
    assert answer.content == b"ok"
    (req,) = server.requests
    assert (req.method, req.path, req.version) == (
        "GET",
        "/b/a%20key%2Bx?versionId=v%2F1",
        "HTTP/1.1",
    )
    assert req.headers["Host"] == f"127.0.0.1:{server.port}"
    assert req.headers["Authorization"] == "AWS4 sig"
    assert req.headers["Accept-Encoding"] == "identity"
    assert "Content-Length" not in req.headers


def test_a_body_goes_with_its_length_and_an_empty_put_says_zero(w: Wire) -> None:
    with RawServer(answer_with(http_response(200, {}))) as server:
        w.exchange("PUT", f"{server.url}/b/k", {"Content-Length": "99"}, memoryview(b"hello"))
        w.exchange("PUT", f"{server.url}/b/e", {}, None)
    first, second = server.requests
    assert first.headers["Content-Length"] == "5"
    assert second.headers["Content-Length"] == "0"


def test_a_default_port_is_left_out_of_host() -> None:
    from objsdk._core.signing import host_header

    assert host_header("http://example.com:80/b") == "example.com"
    assert host_header("https://example.com:9000/b") == "example.com:9000"


@pytest.mark.parametrize(
    "headers",
    [
        {"x-amz-meta-a": "1\r\nX-Injected: 1"},
        {"x-amz-meta-a": "1\n"},
        {"bad name": "1"},
        {"a:b": "1"},
    ],
)
def test_a_header_that_would_change_the_message_is_refused(
    w: Wire, headers: dict[str, str]
) -> None:
    with (
        RawServer(answer_with(http_response(200, {}))) as server,
        pytest.raises(ValueError, match=r"invalid header name|holds CR, LF or NUL"),
    ):
        w.exchange("GET", f"{server.url}/b/k", headers, None)
    assert server.requests == []


# -- connections -------------------------------------------------------------------------


def test_one_connection_carries_request_after_request(w: Wire) -> None:
    with RawServer(answer_with(http_response(200, {}, b"x" * 5000))) as server:
        for _ in range(5):
            assert w.exchange("GET", f"{server.url}/b/k", {}, None).content == b"x" * 5000
        assert connections(server) == 1


def test_connection_close_is_honoured(w: Wire) -> None:
    with RawServer(answer_with(http_response(200, {"Connection": "close"}, b"x"))) as server:
        w.exchange("GET", f"{server.url}/b/k", {}, None)
        w.exchange("GET", f"{server.url}/b/k", {}, None)
        assert connections(server) == 2


def test_an_idle_connection_the_server_closed_is_replaced(w: Wire) -> None:
    def close_after_answer(request: Request, conn: socket.socket) -> None:
        conn.sendall(http_response(200, {}, b"x"))
        if request.index == 0:
            conn.shutdown(socket.SHUT_RDWR)

    with RawServer(close_after_answer) as server:
        w.exchange("GET", f"{server.url}/b/k", {}, None)
        time.sleep(0.05)
        assert w.exchange("GET", f"{server.url}/b/k", {}, None).content == b"x"
        assert connections(server) == 2


def test_bytes_after_the_answer_keep_its_connection_from_being_reused(w: Wire) -> None:
    extra = http_response(200, {}, b"x") + b"HTTP/1.1 200 OK\r\n"
    with RawServer(answer_with(extra)) as server:
        assert w.exchange("GET", f"{server.url}/b/k", {}, None).content == b"x"
        assert w.exchange("GET", f"{server.url}/b/k", {}, None).content == b"x"
        assert connections(server) == 2


def test_a_forked_child_does_not_use_its_parents_connections(w: Wire) -> None:
    with RawServer(answer_with(http_response(200, {}, b"x"))) as server:
        w.exchange("GET", f"{server.url}/b/k", {}, None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # 3.12: a fork with threads
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                w.exchange("GET", f"{server.url}/b/k", {}, None)
            except BaseException:
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert connections(server) == 2
        w.exchange("GET", f"{server.url}/b/k", {}, None)  # the parent's is still good
        assert connections(server) == 2


def test_idle_connections_beyond_maxsize_are_closed() -> None:
    w = wire(maxsize=1)
    gate = threading.Barrier(2)

    def slow(request: Request, conn: socket.socket) -> None:
        time.sleep(0.2)
        conn.sendall(http_response(200, {}, b"x"))

    with RawServer(slow) as server:
        threads = [
            threading.Thread(
                target=lambda: (gate.wait(), w.exchange("GET", f"{server.url}/b/k", {}, None))
            )
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert connections(server) == 2
        assert sum(len(v) for v in w._idle.values()) == 1
    w.close()


# -- answers -----------------------------------------------------------------------------


def test_a_head_answer_ends_with_its_head_whatever_its_content_length(w: Wire) -> None:
    head = b'HTTP/1.1 200 OK\r\nContent-Length: 4096\r\nETag: "e"\r\n\r\n'
    with RawServer(answer_with(head)) as server:
        for _ in range(2):
            answer = w.exchange("HEAD", f"{server.url}/b/k", {}, None)
            assert (answer.status, answer.headers["etag"], answer.content) == (200, '"e"', b"")
        assert connections(server) == 1


def test_a_chunked_answer_is_decoded(w: Wire) -> None:
    body = bytes(range(256)) * 40
    raw = http_response(200, {"Transfer-Encoding": "chunked"}) + chunked_body(body, 1000)
    with RawServer(answer_with(raw)) as server:
        assert w.exchange("GET", f"{server.url}/b/k", {}, None).content == body
        assert w.exchange("GET", f"{server.url}/b/k", {}, None).content == body
        assert connections(server) == 1


def test_an_answer_delimited_by_the_connections_end_is_read_to_it(w: Wire) -> None:
    def until_close(request: Request, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + b"y" * 10_000)
        conn.close()

    with RawServer(until_close) as server:
        assert w.exchange("GET", f"{server.url}/b/k", {}, None).content == b"y" * 10_000


def test_an_interim_answer_is_skipped(w: Wire) -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\n" + http_response(200, {"ETag": "e"}, b"z")
    with RawServer(answer_with(raw)) as server:
        answer = w.exchange("PUT", f"{server.url}/b/k", {}, memoryview(b"z"))
    assert (answer.status, answer.headers["ETag"], answer.content) == (200, "e", b"z")


def test_a_large_body_arrives_whole(w: Wire) -> None:
    body = bytes(range(256)) * 40_000  # 10 MB, many reads
    with RawServer(answer_with(http_response(200, {}, body))) as server:
        assert w.exchange("GET", f"{server.url}/b/k", {}, None).content == body


def test_fields_are_found_in_any_case_and_listed_as_sent() -> None:
    fields = Fields([(b"ETag", b'"e"'), (b"X-Amz-Meta-A", b"1"), (b"x-amz-meta-a", b"2")])
    assert fields["etag"] == fields["ETAG"] == '"e"'
    assert fields.get("X-AMZ-META-A") == "1, 2"
    assert "etag" in fields
    assert "Content-Length" not in fields
    assert 3 not in fields
    assert list(fields) == ["ETag", "X-Amz-Meta-A"]
    assert dict(fields) == {"ETag": '"e"', "X-Amz-Meta-A": "1, 2"}
    assert list(fields.items()) == [("ETag", '"e"'), ("X-Amz-Meta-A", "1, 2")]
    assert ("x-amz-meta-a", "1, 2") in fields.items()
    assert len(fields.items()) == 2


# -- failures ----------------------------------------------------------------------------


def test_an_answer_cut_short_is_a_protocol_error(w: Wire) -> None:
    def truncated(request: Request, conn: socket.socket) -> None:
        conn.sendall(http_response(200, {"Content-Length": "100"}, b"x" * 40))
        conn.close()

    with RawServer(truncated) as server, pytest.raises(urllib3.exceptions.ProtocolError):
        w.exchange("GET", f"{server.url}/b/k", {}, None)


def test_a_connection_closed_without_an_answer_is_a_remote_disconnect(w: Wire) -> None:
    def close(request: Request, conn: socket.socket) -> None:
        conn.close()

    with RawServer(close) as server, pytest.raises(urllib3.exceptions.ProtocolError) as caught:
        w.exchange("GET", f"{server.url}/b/k", {}, None)
    assert type(caught.value.__cause__).__name__ == "RemoteDisconnected"


@pytest.mark.parametrize(
    "raw",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_a_malformed_answer_is_a_protocol_error(w: Wire, raw: bytes) -> None:
    def bad(request: Request, conn: socket.socket) -> None:
        conn.sendall(raw)
        conn.close()

    with RawServer(bad) as server, pytest.raises(urllib3.exceptions.ProtocolError):
        w.exchange("GET", f"{server.url}/b/k", {}, None)


def test_a_silent_server_is_a_read_timeout() -> None:
    w = wire(timeout=(2.0, 0.2))
    with (
        RawServer(lambda request, conn: hang(conn)) as server,
        pytest.raises(urllib3.exceptions.ReadTimeoutError),
    ):
        w.exchange("GET", f"{server.url}/b/k", {}, None)
    w.close()


@pytest.mark.parametrize("sent", [10, 1 << 20], ids=["small body", "large body"])
def test_a_body_that_stalls_is_a_read_timeout_in_time(sent: int) -> None:
    # A large body is read straight into its buffer, a small one chunk by chunk: both
    # must time out, after the read timeout and not much later.
    def stalls(request: Request, conn: socket.socket) -> None:
        conn.sendall(http_response(200, {"Content-Length": str(4 << 20)}, b"x" * sent))
        hang(conn)

    w = wire(timeout=(2.0, 0.3))
    with RawServer(stalls) as server:
        started = time.monotonic()
        with pytest.raises(urllib3.exceptions.ReadTimeoutError):
            w.exchange("GET", f"{server.url}/b/k", {}, None)
        assert 0.25 < time.monotonic() - started < 2
    w.close()


def test_a_server_that_never_reads_the_body_is_a_write_timeout() -> None:
    w = wire(timeout=(2.0, 0.3))
    body = memoryview(bytes(128 << 20))  # more than the socket buffers hold (36 MiB here)
    # Connections wait in the listening socket's backlog, never accepted, never read.
    with socket.create_server(("127.0.0.1", 0), backlog=4) as server:
        started = time.monotonic()
        with pytest.raises(urllib3.exceptions.ReadTimeoutError, match="write timed out"):
            w.exchange("PUT", f"http://127.0.0.1:{server.getsockname()[1]}/b/k", {}, body)
        assert time.monotonic() - started < 5
    w.close()


@pytest.mark.parametrize("kernel_timeouts", [True, False], ids=["kernel", "python"])
def test_a_body_that_keeps_moving_is_sent_however_long_it_takes(
    kernel_timeouts: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The read timeout bounds a wait without progress, not the whole send: a large PUT
    # over a slow link takes longer than it and must not fail.
    monkeypatch.setattr(wire_module, "_KERNEL_TIMEOUTS", kernel_timeouts)
    body = memoryview(os.urandom(24 << 20))
    got = bytearray()

    def slow_reader(listener: socket.socket) -> None:
        conn, _ = listener.accept()
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(1)
            while len(got) < len(body):
                got.extend(conn.recv(64 * 1024))
                time.sleep(0.0075)  # about 8 MiB/s: 3 s for the body
            conn.sendall(http_response(200, {}))

    with socket.socket() as listener:
        # A small receive buffer, so the send cannot finish into the kernel's buffers.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        server = threading.Thread(target=slow_reader, args=(listener,))
        server.start()
        w = wire(timeout=(2.0, 1.0))
        try:
            started = time.monotonic()
            url = f"http://127.0.0.1:{listener.getsockname()[1]}/b/k"
            answer = w.exchange("PUT", url, {}, body)
            assert time.monotonic() - started > 1.5  # longer than the read timeout
        finally:
            w.close()
            server.join(30)
    assert answer.status == 200
    assert got == body


def test_a_refused_connection_is_a_new_connection_error(w: Wire) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(urllib3.exceptions.NewConnectionError) as caught:
        w.exchange("GET", f"http://127.0.0.1:{port}/b/k", {}, None)
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)


def test_a_watch_interrupts_an_exchange_blocked_on_a_stalled_server() -> None:
    w = wire(timeout=(2.0, 30.0))
    failed: list[BaseException] = []
    watching: list[private_api.Watch] = []
    ready = threading.Event()

    def worker(url: str) -> None:
        with private_api.watch() as watch:
            watching.append(watch)
            ready.set()
            try:
                w.exchange("GET", url, {}, None)
            except BaseException as e:
                failed.append(e)

    with RawServer(lambda request, conn: hang(conn)) as server:
        thread = threading.Thread(target=worker, args=(f"{server.url}/b/k",))
        started = time.monotonic()
        thread.start()
        ready.wait()
        time.sleep(0.2)  # blocked in recv by now
        watching[0].interrupt()
        thread.join(5)
    assert time.monotonic() - started < 5
    assert len(failed) == 1
    assert isinstance(failed[0], urllib3.exceptions.ProtocolError)


# -- through the transport ----------------------------------------------------------------


def test_the_client_sends_whole_answer_requests_on_the_wire() -> None:
    def s3(request: Request, conn: socket.socket) -> None:
        if request.method == "HEAD" and request.path.endswith("/missing"):
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        elif request.method == "HEAD":
            conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 4\r\nETag: "e"\r\n\r\n')
        else:
            conn.sendall(http_response(200, {"ETag": '"e"'}, b"data"))

    with RawServer(s3) as server, Client(server.url, "AK", "SK", retries=0) as client:
        assert client.get_object("b", "k", verify=False) == b"data"
        assert client.head_object("b", "k").size == 4
        with pytest.raises(errors.NoSuchKey) as caught:
            client.head_object("b", "missing")
        assert connections(server) == 1
    assert (caught.value.bucket, caught.value.key) == ("b", "missing")


def test_a_broken_exchange_is_an_objsdk_error_naming_the_object() -> None:
    def truncated(request: Request, conn: socket.socket) -> None:
        conn.sendall(http_response(200, {"Content-Length": "100"}, b"x" * 40))
        conn.close()

    with (
        RawServer(truncated) as server,
        Client(server.url, "AK", "SK", retries=0) as client,
        pytest.raises(errors.ProtocolError) as caught,
    ):
        client.get_object("b", "k", verify=False)
    assert (caught.value.bucket, caught.value.key) == ("b", "k")
    assert "connection broken" in str(caught.value)


def test_requests_level_mocks_see_every_request_when_the_wire_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import responses

    monkeypatch.setattr(HTTPTransport, "wire_requests", False)
    with responses.RequestsMock() as rsps, Client("http://s3.test", "AK", "SK") as client:
        rsps.get("http://s3.test/b/k", body=b"mocked", headers={"Content-Length": "6"})
        assert client.get_object("b", "k", verify=False) == b"mocked"


@contextlib.contextmanager
def answering_early(answer: bytes) -> Iterator[str]:
    """A server that reads a request's head only, sends ``answer`` and closes the
    connection with the body still arriving (RFC 9112 §9.6); yields its URL."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            conn.sendall(answer)
        listener.close()

    server = threading.Thread(target=serve)
    server.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.join()


def test_a_refusal_sent_before_the_body_is_all_in_is_the_answer(w: Wire) -> None:
    # A server may refuse a large PUT early and close; the refusal, not the broken pipe,
    # is what the caller needs to see.
    refusal = http_response(403, {}, b"<Error><Code>AccessDenied</Code></Error>")
    with answering_early(refusal) as url:
        answer = w.exchange("PUT", f"{url}/b/k", {}, memoryview(bytes(64 << 20)))
    assert answer.status == 403
    assert b"AccessDenied" in answer.content


def test_a_success_sent_before_the_body_is_all_in_is_not_believed(w: Wire) -> None:
    with (
        answering_early(http_response(200, {"ETag": '"e"'})) as url,
        pytest.raises(urllib3.exceptions.ProtocolError),
    ):
        w.exchange("PUT", f"{url}/b/k", {}, memoryview(bytes(64 << 20)))


def test_a_large_body_is_held_once_while_it_arrives(w: Wire) -> None:
    # Chunks and their join would hold it twice at the end; it lands in one object.
    import tracemalloc

    body = bytes(range(256)) * 80_000  # 20 MB
    with RawServer(answer_with(http_response(200, {}, body))) as server:
        w.exchange("GET", f"{server.url}/b/k", {}, None)  # connected, warm
        tracemalloc.start()
        try:
            content = w.exchange("GET", f"{server.url}/b/k", {}, None).content
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert content == body
    assert peak < 1.2 * len(body)


def test_a_large_body_cut_short_is_a_protocol_error(w: Wire) -> None:
    def truncated(request: Request, conn: socket.socket) -> None:
        conn.sendall(http_response(200, {"Content-Length": str(10 << 20)}, b"x" * (3 << 20)))
        conn.close()

    with RawServer(truncated) as server, pytest.raises(urllib3.exceptions.ProtocolError):
        w.exchange("GET", f"{server.url}/b/k", {}, None)


@pytest.mark.parametrize("declared", [10**13, 2**62], ids=["10TB", "past-any-address-space"])
@pytest.mark.parametrize("ranged", [False, True], ids=["whole", "ranged"])
def test_a_declared_length_no_memory_holds_is_a_protocol_error_when_the_body_ends_short(
    declared: int, ranged: bool
) -> None:
    """A success answer claiming more bytes than memory can hold is not allocated before
    they arrive: the body grows as it comes, and when the connection ends short it is a
    ProtocolError naming the object, never a MemoryError."""

    def lying(request: Request, conn: socket.socket) -> None:
        status = "206 Partial Content" if ranged else "200 OK"
        extra = f"Content-Range: bytes 0-{declared - 1}/{declared}\r\n" if ranged else ""
        head = f"HTTP/1.1 {status}\r\nContent-Length: {declared}\r\n{extra}\r\n"
        conn.sendall(head.encode() + b"x" * (200 << 10))
        conn.close()

    with (
        RawServer(lying) as server,
        Client(server.url, "AK", "SK", retries=0) as client,
        pytest.raises(errors.ProtocolError) as caught,
    ):
        client.get_object("b", "k", length=10 if ranged else None, verify=False)
    assert (caught.value.bucket, caught.value.key) == ("b", "k")
    assert "connection broken" in str(caught.value)


def test_a_body_longer_than_what_is_allocated_ahead_arrives_whole_held_once(
    w: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past what is allocated before the bytes arrive, a body grows as it comes, in one
    buffer that becomes the content: it is not held twice."""
    import tracemalloc

    monkeypatch.setattr(wire_module, "_PREALLOCATE", 1 << 20)
    body = bytes(range(256)) * 80_000  # 20 MB
    with RawServer(answer_with(http_response(200, {}, body))) as server:
        w.exchange("GET", f"{server.url}/b/k", {}, None)  # connected, warm
        tracemalloc.start()
        try:
            content = w.exchange("GET", f"{server.url}/b/k", {}, None).content
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert content == body
    assert peak < 1.3 * len(body)


# -- error answers --------------------------------------------------------------------------

HUGE = 64 << 20  # an error body far larger than what is kept of one
PIECE = 1 << 20


def huge_error(status: int, code: str, framing: str):  # type: ignore[no-untyped-def]
    """A server answering every request with ``status``: S3's XML error naming ``code``,
    then whitespace (still a well-formed document) up to HUGE bytes, framed by
    Content-Length, chunked, or by the connection's end; the connection is kept open
    for another request when the framing allows it."""
    xml = f"<Error><Code>{code}</Code><Message>it is {code}</Message></Error>".encode()
    piece = b" " * PIECE

    framed = {"length": f"Content-Length: {HUGE}", "chunked": "Transfer-Encoding: chunked"}
    head = f"HTTP/1.1 {status} Error\r\n{framed.get(framing, 'Connection: close')}\r\n\r\n"

    def handler(request: Request, conn: socket.socket) -> None:
        conn.sendall(head.encode())
        sent = len(xml)
        conn.sendall(b"%x\r\n%s\r\n" % (len(xml), xml) if framing == "chunked" else xml)
        while sent < HUGE:  # ends early if the client hangs up (the handler's OSError)
            n = min(PIECE, HUGE - sent)
            conn.sendall(b"%x\r\n%s\r\n" % (n, piece[:n]) if framing == "chunked" else piece[:n])
            sent += n
        if framing == "chunked":
            conn.sendall(b"0\r\n\r\n")
        elif framing == "close":
            conn.close()

    return handler


@pytest.mark.parametrize(
    ("status", "code", "framing"),
    [
        (404, "NoSuchBucket", "length"),
        (500, "InternalError", "chunked"),
        (403, "SignatureDoesNotMatch", "close"),
    ],
)
def test_an_error_answer_is_read_no_further_than_what_is_kept_of_it(
    status: int, code: str, framing: str
) -> None:
    """A huge error body costs the client no more memory than the error keeps
    (MAX_ERROR_BODY), whatever its framing; the error still names the S3 code its XML
    says, and the connection left in mid-body is not reused."""
    import tracemalloc

    with (
        RawServer(huge_error(status, code, framing)) as server,
        Client(server.url, "AK", "SK", retries=0) as client,
    ):
        tracemalloc.start()
        try:
            with pytest.raises(errors.S3Error) as caught:
                client.get_object("b", "k", verify=False)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 2 << 20
        with pytest.raises(errors.S3Error):
            client.get_object("b", "k", verify=False)
        assert connections(server) == 2
    assert (caught.value.status, caught.value.code) == (status, code)
    assert caught.value.message == f"it is {code}"
