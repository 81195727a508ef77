"""An answer's head is bounded: a server that sends header lines without end, one header
line without end, or interim (1xx) answers without end never goes quiet, so the read
timeout never fires; the client stops it with a ProtocolError naming the object once a
bounded number of bytes has arrived, and drops the connection, on the transport's own
connections and through requests alike, without retrying or resuming. A chunked body's
trailer fields are bounded as a head is. Any head S3 sends is taken whole.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import pytest
import urllib3.util.connection
from rawserver import RawServer, Request, http_response

import objsdk
from objsdk._transport.answer_head import MAX_FIELDS, MAX_HEAD, MAX_INTERIM
from objsdk._transport.http import HTTPTransport

BUCKET, KEY = "bkt", "dir/obj.bin"

# What a flooding server sends at most before it gives up and closes: far past any
# bound, so a client without one reads all of it (and fails only when it closes).
CAP = 16 << 20
# The client's sockets' receive buffer here. Linux grows one as its reader keeps up
# (tcp_rmem, up to 32 MiB on some machines), and what it held would hide what the
# client itself took: so it is pinned, as the server's send buffer is.
RECEIVE_BUFFER = 64 << 10
# What may have been sent when a client with a bound closes: its bound, one receive
# past it, and what the two sockets' buffers held (each twice its setting, socket(7)).
SENT_AT_MOST = MAX_HEAD + (1 << 20)


@pytest.fixture(autouse=True)
def pinned_receive_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every connection the client makes (on the wire, and urllib3's under requests)
    keeps a receive buffer of RECEIVE_BUFFER."""

    def pinned(create: Callable[..., socket.socket]) -> Callable[..., socket.socket]:
        def create_connection(*args: Any, **kwargs: Any) -> socket.socket:
            sock = create(*args, **kwargs)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
            return sock

        return create_connection

    monkeypatch.setattr(socket, "create_connection", pinned(socket.create_connection))
    urllib3_connect = urllib3.util.connection.create_connection
    monkeypatch.setattr(urllib3.util.connection, "create_connection", pinned(urllib3_connect))


Handler = Callable[[Request, socket.socket], None]


class Serve(Protocol):
    def __call__(self, handler: Handler, retries: Any = 0) -> tuple[RawServer, objsdk.Client]: ...


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Starts a server with ``handler`` and a client of it (no retries unless told)."""
    with contextlib.ExitStack() as stack:

        def start(handler: Handler, retries: Any = 0) -> tuple[RawServer, objsdk.Client]:
            server = stack.enter_context(RawServer(handler))
            client = objsdk.Client(server.url, "AKID", "SECRET", retries=retries, timeout=(2, 2))
            return server, stack.enter_context(client)

        yield start


class Flood:
    """A server's handler that answers every request with ``opening`` and then
    ``piece`` again and again, until the client closes or CAP bytes have gone;
    ``sent`` lists, per request, the bytes sent whole before it stopped."""

    def __init__(self, opening: bytes, piece: bytes) -> None:
        self.opening = opening
        self.piece = piece
        self.sent: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, request: Request, conn: socket.socket) -> None:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 << 10)
        sent = 0
        try:
            conn.sendall(self.opening)
            sent += len(self.opening)
            while sent < CAP:
                conn.sendall(self.piece)
                sent += len(self.piece)
        except OSError:
            pass  # the client closed the connection
        finally:
            with self._lock:
                self.sent.append(sent)
            conn.close()


FIELD = b"x-amz-meta-field: " + b"v" * 1000 + b"\r\n"
FLOODS = {
    # Header lines without end.
    "fields": lambda: Flood(b"HTTP/1.1 200 OK\r\n", FIELD * 64),
    # One header line without end.
    "line": lambda: Flood(b"HTTP/1.1 200 OK\r\nx-amz-meta-line: ", b"v" * (64 << 10)),
    # Interim answers without end, never the final one.
    "interim": lambda: Flood(b"", b"HTTP/1.1 100 Continue\r\n\r\n" * 2500),
}


def get_small_object(client: objsdk.Client) -> object:
    return client.get_object(BUCKET, KEY, verify=False)


def head_object(client: objsdk.Client) -> object:
    return client.head_object(BUCKET, KEY)


WIRE_PATHS = [get_small_object, head_object]


@pytest.mark.parametrize("read", WIRE_PATHS)
@pytest.mark.parametrize("flood", list(FLOODS))
def test_a_head_without_end_is_a_protocol_error_within_a_bounded_number_of_bytes(
    serve: Serve, flood: str, read: Callable[[objsdk.Client], object]
) -> None:
    """However the head goes on (fields, one line, interim answers), the client stops
    reading it within a bounded number of bytes, with a ProtocolError naming the object,
    and closes the connection: the server's sending fails long before it gives up."""
    assert_stopped(serve, FLOODS[flood](), read)


@pytest.mark.parametrize("read", WIRE_PATHS)
@pytest.mark.parametrize("flood", list(FLOODS))
def test_a_head_without_end_through_requests_is_the_same_protocol_error(
    serve: Serve,
    monkeypatch: pytest.MonkeyPatch,
    flood: str,
    read: Callable[[objsdk.Client], object],
) -> None:
    """Through requests (the transport's other path), http.client's bounds stop the head
    (and objsdk's, of interim answers, which http.client would read without end): the
    same ProtocolError naming the object, within a bounded number of bytes."""
    monkeypatch.setattr(HTTPTransport, "wire_requests", False)
    assert_stopped(serve, FLOODS[flood](), read)


def read_file(client: objsdk.Client) -> object:
    with client.open(BUCKET, KEY) as f:
        return f.read()


@pytest.mark.parametrize("flood", list(FLOODS))
def test_a_head_without_end_stops_a_streamed_read_at_once(serve: Serve, flood: str) -> None:
    """A reader resumes a stream that broke, but a head past a bound is the server's
    answer, which it would send again: open().read() stops at the first, with the
    ProtocolError naming the object, within a bounded number of bytes."""
    server = assert_stopped(serve, FLOODS[flood](), read_file)
    assert len(server.requests) == 1


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "requests"])
@pytest.mark.parametrize("read", WIRE_PATHS)
def test_a_head_past_a_bound_is_not_sent_again(
    serve: Serve,
    monkeypatch: pytest.MonkeyPatch,
    wire: bool,
    read: Callable[[objsdk.Client], object],
) -> None:
    """A GET or HEAD that broke is retried, but not for a head past a bound: the server
    would send it again."""
    monkeypatch.setattr(HTTPTransport, "wire_requests", wire)
    retries = objsdk.default_retry(3).new(backoff_factor=0.001, backoff_max=0.01)
    server = assert_stopped(serve, FLOODS["fields"](), read, retries=retries)
    assert len(server.requests) == 1


def assert_stopped(
    serve: Serve, handler: Flood, read: Callable[[objsdk.Client], object], retries: Any = 0
) -> RawServer:
    """``read`` against ``handler`` is a ProtocolError naming the object, and the client
    closed each connection within SENT_AT_MOST bytes; returns the stopped server."""
    server, client = serve(handler, retries=retries)
    with pytest.raises(objsdk.ProtocolError) as caught:
        read(client)
    server.stop()  # waits for the handlers, which have recorded what they sent
    assert (caught.value.bucket, caught.value.key) == (BUCKET, KEY)
    assert "answer past a bound (" in str(caught.value)  # and which, in its own words
    assert handler.sent
    assert max(handler.sent) < SENT_AT_MOST
    return server


CHUNKED = b"Transfer-Encoding: chunked\r\n\r\n"
ERROR_XML = b"<Error><Code>NoSuchKey</Code><Message>none</Message></Error>"
# A chunked body, whole but for its trailer section, which then goes on without end.
TRAILERS = {
    "fields": lambda status, body: Flood(
        status + CHUNKED + b"%x\r\n%s\r\n0\r\n" % (len(body), body), FIELD * 64
    ),
    "line": lambda status, body: Flood(
        status + CHUNKED + b"%x\r\n%s\r\n0\r\nx-amz-meta-line: " % (len(body), body),
        b"v" * (64 << 10),
    ),
}


@pytest.mark.parametrize("trailers", list(TRAILERS))
def test_trailer_fields_without_end_are_a_protocol_error_within_a_bounded_number_of_bytes(
    serve: Serve, trailers: str
) -> None:
    """A chunked answer's trailer fields (RFC 9112 §7.1.2) are held as a head's are, so
    they are bounded as a head is: trailers without end after a whole body are a
    ProtocolError naming the object, within a bounded number of bytes."""
    assert_stopped(serve, TRAILERS[trailers](b"HTTP/1.1 200 OK\r\n", b"data"), get_small_object)


def test_a_chunked_body_of_tiny_chunks_and_its_trailer_fields_are_taken_whole(
    serve: Serve,
) -> None:
    """Framing is bounded only where no body comes between: a body of a byte a chunk,
    whose framing is five times its bytes and far past MAX_HEAD in all, is read whole,
    and so is a trailer section of a few fields."""
    body = bytes(range(256)) * 1200  # 300 KiB
    framed = b"".join(b"1\r\n%s\r\n" % body[i : i + 1] for i in range(len(body)))
    trailer = b"".join(b"x-amz-meta-t%d: v\r\n" % i for i in range(20))
    chunked = b"HTTP/1.1 200 OK\r\n" + CHUNKED + framed + b"0\r\n" + trailer + b"\r\n"
    assert len(framed) > 4 * MAX_HEAD
    _, client = serve(answer(chunked))
    assert client.get_object(BUCKET, KEY, verify=False) == body


@pytest.mark.parametrize("trailers", list(TRAILERS))
def test_an_error_answer_whose_trailers_go_on_without_end_is_still_its_error(
    serve: Serve, trailers: str
) -> None:
    """Of an error answer the client keeps its document, as it keeps no more of a long
    one: the S3 error it names, once a bounded number of bytes has come after it."""
    handler = TRAILERS[trailers](b"HTTP/1.1 404 Not Found\r\n", ERROR_XML)
    server, client = serve(handler)
    with pytest.raises(objsdk.NoSuchKey) as caught:
        get_small_object(client)
    server.stop()
    assert (caught.value.bucket, caught.value.key) == (BUCKET, KEY)
    assert max(handler.sent) < SENT_AT_MOST


def answer(head: bytes, body: bytes = b"") -> Handler:
    def handler(request: Request, conn: socket.socket) -> None:
        conn.sendall(head + (b"" if request.method == "HEAD" else body))

    return handler


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "requests"])
def test_a_whole_head_of_too_many_fields_is_a_protocol_error(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, wire: bool
) -> None:
    """A head that ends, small in bytes, but with more fields than the client takes is
    refused too (each field costs the client far more memory than its bytes), and its
    connection is not used again."""
    monkeypatch.setattr(HTTPTransport, "wire_requests", wire)
    fields = b"".join(b"x-amz-meta-f%d: v\r\n" % i for i in range(MAX_FIELDS + 1))
    head = b"HTTP/1.1 200 OK\r\n" + fields + b"Content-Length: 4\r\n\r\n"
    assert len(head) < MAX_HEAD
    server, client = serve(answer(head, b"data"))
    for read in WIRE_PATHS:
        with pytest.raises(objsdk.ProtocolError) as caught:
            read(client)
        assert (caught.value.bucket, caught.value.key) == (BUCKET, KEY)
    assert server.connections == 2  # the first was closed, though its answer ended


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "requests"])
def test_too_many_interim_answers_before_the_final_one_are_a_protocol_error(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, wire: bool
) -> None:
    monkeypatch.setattr(HTTPTransport, "wire_requests", wire)
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" * (MAX_INTERIM + 1)
    _, client = serve(answer(interim + b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n", b"data"))
    for read in WIRE_PATHS:
        with pytest.raises(objsdk.ProtocolError) as caught:
            read(client)
        assert (caught.value.bucket, caught.value.key) == (BUCKET, KEY)


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "requests"])
def test_interim_answers_other_than_100_continue_are_skipped_on_every_path(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, wire: bool
) -> None:
    """A CDN or proxy in front of the service may send 103 Early Hints (or 102) before
    the answer: interim answers (RFC 9110 §15.2), skipped as 100 Continue is, by
    get_object, head_object and open().read()."""
    monkeypatch.setattr(HTTPTransport, "wire_requests", wire)
    interim = (
        b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
        b"HTTP/1.1 102 Processing\r\n\r\n"
    )
    head = http_response(200, {"ETag": '"e"', "Content-Length": "4"})
    _, client = serve(answer(interim + head, b"data"))
    assert client.get_object(BUCKET, KEY, verify=False) == b"data"
    assert client.head_object(BUCKET, KEY).size == 4
    assert read_file(client) == b"data"


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "requests"])
def test_the_largest_head_s3_sends_is_taken_whole(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, wire: bool
) -> None:
    """S3 limits an object's user metadata to 2 KB in all; an answer carrying that as
    80 fields, beside S3's own fields and after interim answers, is well within every
    bound, on either path, and read whole: get_object, head_object and open().read()."""
    monkeypatch.setattr(HTTPTransport, "wire_requests", wire)
    metadata = {f"m{i:02d}": "v" * 22 for i in range(80)}  # 2 KB, names included
    s3_fields = {
        "ETag": '"0123456789abcdef0123456789abcdef"',
        "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT",
        "Accept-Ranges": "bytes",
        "Content-Type": "application/octet-stream",
        "x-amz-request-id": "0" * 16,
        "x-amz-id-2": "x" * 76,
        "x-amz-version-id": "v" * 32,
        "x-amz-server-side-encryption": "AES256",
    }
    headers = {**s3_fields, **{f"x-amz-meta-{k}": v for k, v in metadata.items()}}
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" * MAX_INTERIM
    head = http_response(200, {**headers, "Content-Length": "4"})
    _, client = serve(answer(interim + head, b"data"))
    assert client.get_object(BUCKET, KEY, verify=False) == b"data"
    assert client.head_object(BUCKET, KEY).metadata == metadata
    assert read_file(client) == b"data"
