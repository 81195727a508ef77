"""The zero-copy PUT (objsdk._transport.sendfile.put_file) against a raw-socket server.

The server keeps every request's head and body, so each test can check what went on
the wire byte for byte, and it can answer early, cut the connection or stall. No MinIO
needed; test_upload_minio.py checks the same path against a real server.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import selectors
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

import pytest

import objsdk
import objsdk._transport.sendfile
from objsdk._core.checksums import crc32c_b64
from objsdk._core.signing import Credentials, encode_key_path, sign_request
from objsdk._transport.http import HTTPTransport
from objsdk._transport.sendfile import SourceChangedError

AK, SK = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
BUCKET, KEY = "bkt", "dir/obj.bin"
DATA = hashlib.shake_256(b"sendfile").digest(3 << 20)  # 3 MiB, reproducible


# -- a server that keeps bodies ------------------------------------------------------------


@dataclass
class Seen:
    """One request as received: head lines in order, and as much body as was read."""

    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    connection: int

    def header(self, name: str) -> str:
        (value,) = [v for n, v in self.headers if n.lower() == name.lower()]
        return value


class Conn:
    """One accepted connection, for handlers: read the body, answer, cut, stall."""

    def __init__(self, sock: socket.socket, number: int) -> None:
        self.sock = sock
        self.number = number
        self.buf = bytearray()

    def recv_more(self) -> None:
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError
        self.buf += data

    def read_head(self) -> tuple[str, str, list[tuple[str, str]]]:
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self.recv_more()
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        del self.buf[: end + 4]
        method, target, _ = lines[0].split(" ", 2)
        pairs = (line.partition(":") for line in lines[1:])
        headers = [(name.strip(), value.strip()) for name, _, value in pairs]
        return method, target, headers

    def read_body(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.recv_more()
        body = bytes(self.buf[:n])
        del self.buf[:n]
        return body

    def answer(self, status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    def reset(self) -> None:
        """Abort with a TCP RST (SO_LINGER 0, then close)."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()


# handler(index of the request, its head, the connection) -> the Seen body it read
Handler = Callable[[int, Seen, Conn], None]


def ok(index: int, seen: Seen, conn: Conn) -> None:
    """A correct server: read the whole body, answer 200 with an ETag."""
    seen.body = conn.read_body(int(seen.header("Content-Length")))
    conn.answer(200, {"ETag": '"etag"', "x-amz-checksum-crc32c": crc32c_b64(seen.body)})


def error_xml(code: str) -> bytes:
    return f"<Error><Code>{code}</Code><Message>{code}!</Message></Error>".encode()


@dataclass
class Server:
    handler: Handler
    seen: list[Seen] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    connections: int = 0

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self.listener, selectors.EVENT_READ)
            while not self._stop.is_set():
                if sel.select(0.05):
                    sock, _ = self.listener.accept()
                    sock.setblocking(True)
                    self.connections += 1
                    self._socks.append(sock)
                    t = threading.Thread(
                        target=self._serve, args=(Conn(sock, self.connections),), daemon=True
                    )
                    self._threads.append(t)
                    t.start()

    def _serve(self, conn: Conn) -> None:
        try:
            while conn.sock.fileno() != -1:
                method, target, headers = conn.read_head()
                seen = Seen(method, target, headers, b"", conn.number)
                self.seen.append(seen)
                self.handler(len(self.seen) - 1, seen, conn)
        except (EOFError, OSError):
            pass
        except BaseException as e:
            self.errors.append(e)

    def close(self) -> None:
        self._stop.set()
        self._threads[0].join(5)
        self.listener.close()
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for t in self._threads[1:]:
            t.join(5)
        for sock in self._socks:
            sock.close()
        if self.errors:
            raise self.errors[0]


Serve = Callable[..., tuple[Server, objsdk.Client]]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(handler, **client_kwargs)``: a server and a client for it, closed after
    the test (client first, then the server, which re-raises handler errors)."""
    with contextlib.ExitStack() as stack:

        def start(handler: Handler, **kwargs: object) -> tuple[Server, objsdk.Client]:
            server = Server(handler)
            stack.callback(server.close)
            kwargs = {"retries": 0, "timeout": (2.0, 2.0), **kwargs}
            client = objsdk.Client(server.url, AK, SK, **kwargs)  # type: ignore[arg-type]
            return server, stack.enter_context(client)

        yield start


@pytest.fixture
def datafile(tmp_path: Path) -> Iterator[BinaryIO]:
    path = tmp_path / "data.bin"
    path.write_bytes(DATA)
    with path.open("rb") as f:
        yield f


@pytest.fixture
def sendfile_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every ``socket.sendfile`` call as (offset, count), still doing the real thing."""
    calls: list[tuple[int, int]] = []
    real = socket.socket.sendfile

    def spy(self: socket.socket, file: BinaryIO, offset: int = 0, count: int | None = None) -> int:
        calls.append((offset, count or 0))
        return real(self, file, offset, count)

    monkeypatch.setattr(socket.socket, "sendfile", spy)
    return calls


def put(client: objsdk.Client, f: BinaryIO, **kwargs: object) -> object:
    args: dict[str, object] = {"offset": 0, "count": len(DATA), "headers": {}, **kwargs}
    key = args.pop("key", KEY)
    return client.transport.send_file(BUCKET, key, f, **args)  # type: ignore[arg-type]


def resigned(server: Server, seen: Seen) -> str:
    """The Authorization of what arrived, signed again at the time it carries."""
    when = datetime.strptime(seen.header("x-amz-date"), "%Y%m%dT%H%M%SZ")
    return sign_request(
        "PUT",
        f"{server.url}{seen.target}",
        {n: v for n, v in seen.headers if n.lower() != "authorization"},
        credentials=Credentials(AK, SK),
        region="us-east-1",
        now=when.replace(tzinfo=timezone.utc),
        payload_hash="UNSIGNED-PAYLOAD",
    )["Authorization"]


# -- what goes on the wire -------------------------------------------------------------------


def test_body_goes_through_socket_sendfile_from_the_given_offset(serve, datafile, sendfile_calls):
    server, client = serve(ok)
    put(client, datafile, offset=1000, count=len(DATA) - 1500)
    (seen,) = server.seen
    assert seen.body == DATA[1000:-500]
    assert seen.header("Content-Length") == str(len(DATA) - 1500)
    assert sendfile_calls
    assert sendfile_calls[0][0] == 1000
    assert sum(count for _, count in sendfile_calls) == len(DATA) - 1500


def test_every_header_sent_but_user_agent_is_signed_and_the_signature_verifies(serve, datafile):
    server, client = serve(ok)
    put(client, datafile, headers={"Content-Type": "text/plain", "x-amz-meta-a": "b"})
    (seen,) = server.seen
    assert (seen.method, seen.target) == ("PUT", f"/{BUCKET}/{KEY}")
    auth = seen.header("Authorization")
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    sent = {n.lower() for n, _ in seen.headers} - {"authorization", "user-agent"}
    assert sorted(sent) == signed
    assert seen.header("Host") == server.url.removeprefix("http://")
    assert seen.header("x-amz-content-sha256") == "UNSIGNED-PAYLOAD"
    # Re-sign what arrived, at the time it carries: the same Authorization comes out.
    assert resigned(server, seen) == auth


def test_awkward_key_is_sent_on_the_request_line_as_s3_encodes_it(serve, datafile):
    server, client = serve(ok)
    key = "uni/räksmörgås with space+%?#&=~*"
    put(client, datafile, key=key)
    (seen,) = server.seen
    assert seen.target == f"/{BUCKET}/{encode_key_path(key)}"
    assert seen.body == DATA


def test_upload_part_query_is_on_the_request_line_and_in_the_signature(serve, datafile):
    server, client = serve(ok)
    put(client, datafile, params=[("partNumber", "7"), ("uploadId", "a/b+c")])
    (seen,) = server.seen
    assert seen.target == f"/{BUCKET}/{KEY}?partNumber=7&uploadId=a%2Fb%2Bc"
    assert seen.body == DATA
    assert resigned(server, seen) == seen.header("Authorization")


def test_anonymous_client_sends_no_authorization(datafile):
    server = Server(ok)
    try:
        with objsdk.Client(server.url, anonymous=True) as client:
            put(client, datafile)
    finally:
        server.close()
    (seen,) = server.seen
    assert "authorization" not in {n.lower() for n, _ in seen.headers}
    assert seen.body == DATA


def test_empty_body_sends_only_the_head(serve, datafile, sendfile_calls):
    server, client = serve(ok)
    put(client, datafile, count=0)
    (seen,) = server.seen
    assert seen.header("Content-Length") == "0"
    assert seen.body == b""
    assert sendfile_calls == []


def test_response_headers_are_returned_case_insensitively(serve, datafile):
    _, client = serve(ok)
    headers = put(client, datafile)
    assert headers["etag"] == '"etag"'  # type: ignore[index]
    assert headers["X-Amz-Checksum-Crc32c"] == crc32c_b64(DATA)  # type: ignore[index]


def test_connection_goes_back_to_the_pool_and_is_reused(serve, datafile, monkeypatch):
    # A PUT of bytes through requests' adapter (not the wire's own connections).
    monkeypatch.setattr(HTTPTransport, "wire_requests", False)
    server, client = serve(ok)
    put(client, datafile)
    put(client, datafile)
    client.put_object(BUCKET, "small", b"x")  # requests takes the same pooled connection
    assert [s.connection for s in server.seen] == [1, 1, 1]


def test_progress_reports_body_bytes_sent_up_to_the_whole(serve, datafile, monkeypatch):
    monkeypatch.setattr("objsdk._transport.sendfile.SEND_CHUNK", 1 << 20)
    _, client = serve(ok)
    calls: list[int] = []
    put(client, datafile, progress=calls.append)
    assert calls == [1 << 20, 2 << 20, 3 << 20]


# -- failures --------------------------------------------------------------------------------


def test_cut_mid_body_is_retried_from_the_start_offset(serve, datafile, caplog):
    def cut_first(index: int, seen: Seen, conn: Conn) -> None:
        if index == 0:
            seen.body = conn.read_body(100_000)
            conn.reset()
        else:
            ok(index, seen, conn)

    server, client = serve(cut_first, retries=3)
    caplog.set_level(logging.WARNING, logger="objsdk")
    put(client, datafile, offset=7, count=len(DATA) - 7)
    first, second = server.seen
    assert first.body == DATA[7:100_007]
    assert second.body == DATA[7:]
    assert second.connection == 2
    assert any("retrying" in r.getMessage() and KEY in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_retryable_status_is_retried_with_the_whole_body(serve, datafile, status):
    def fail_first(index: int, seen: Seen, conn: Conn) -> None:
        if index == 0:
            seen.body = conn.read_body(len(DATA))
            conn.answer(status, {}, error_xml("InternalError"))
        else:
            ok(index, seen, conn)

    server, client = serve(fail_first, retries=2)
    put(client, datafile)
    assert [s.body == DATA for s in server.seen] == [True, True]


def test_5xx_after_the_last_retry_is_raised_as_the_s3_error(serve, datafile):
    def always_slow_down(index: int, seen: Seen, conn: Conn) -> None:
        seen.body = conn.read_body(len(DATA))
        conn.answer(503, {"x-amz-request-id": "R1"}, error_xml("SlowDown"))

    server, client = serve(always_slow_down, retries=2)
    with pytest.raises(objsdk.SlowDown) as info:
        put(client, datafile)
    assert len(server.seen) == 3
    assert (info.value.status, info.value.bucket, info.value.key) == (503, BUCKET, KEY)
    assert info.value.request_id == "R1"


def test_4xx_is_not_retried_and_maps_like_every_other_request(serve, datafile):
    def no_bucket(index: int, seen: Seen, conn: Conn) -> None:
        seen.body = conn.read_body(len(DATA))
        conn.answer(404, {}, error_xml("NoSuchBucket"))

    server, client = serve(no_bucket, retries=3)
    with pytest.raises(objsdk.NoSuchBucket, match=BUCKET):
        put(client, datafile)
    assert len(server.seen) == 1


def test_error_answered_before_the_body_is_read_is_reported(serve, tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(32 << 20))

    def deny_at_once(index: int, seen: Seen, conn: Conn) -> None:
        conn.answer(403, {}, error_xml("SignatureDoesNotMatch"))
        conn.reset()

    server, client = serve(deny_at_once, retries=3)
    with big.open("rb") as f, pytest.raises(objsdk.AccessDenied, match="SignatureDoesNotMatch"):
        client.transport.send_file(BUCKET, KEY, f, offset=0, count=32 << 20, headers={})
    assert len(server.seen) == 1


def test_refused_connection_is_a_connect_error_after_retries(unused_port, datafile, caplog):
    caplog.set_level(logging.WARNING, logger="objsdk")
    client = objsdk.Client(f"http://127.0.0.1:{unused_port}", AK, SK, retries=1)
    with client, pytest.raises(objsdk.ConnectError, match="ConnectionRefusedError") as info:
        put(client, datafile)
    assert info.value.key == KEY
    assert SK not in str(info.value)
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 1


def test_server_that_never_answers_is_a_timeout(serve, datafile):
    def stall(index: int, seen: Seen, conn: Conn) -> None:
        seen.body = conn.read_body(len(DATA))
        with contextlib.suppress(OSError, EOFError):
            conn.recv_more()  # until the client gives up and hangs up

    _, client = serve(stall, timeout=(1.0, 0.3))
    with pytest.raises(objsdk.Timeout, match="read timed out"):
        put(client, datafile)


def test_exception_from_progress_is_raised_unchanged_and_not_retried(serve, datafile):
    server, client = serve(ok, retries=3)

    def progress(sent: int) -> None:
        raise OSError("the caller's own error")

    with pytest.raises(OSError, match="the caller's own error") as info:
        put(client, datafile, progress=progress)
    assert type(info.value) is OSError
    assert len(server.seen) <= 1


def test_file_shorter_than_count_raises_source_changed(serve, datafile):
    _, client = serve(ok)
    with pytest.raises(SourceChangedError, match="shrank"):
        put(client, datafile, count=len(DATA) + 10)


def test_https_endpoint_streams_the_body_instead_of_sendfile(monkeypatch, sendfile_calls):
    streamed: list[tuple[int, int]] = []

    def fake_window(transport, put):
        streamed.append((put.offset, put.count))
        return {"ETag": '"e"'}

    monkeypatch.setattr(objsdk._transport.sendfile, "put_window", fake_window)
    client = objsdk.Client("https://s3.test", AK, SK)
    with client, Path(__file__).open("rb") as f:
        client.transport.send_file(BUCKET, KEY, f, offset=0, count=1, headers={})
    assert streamed == [(0, 1)]
    assert sendfile_calls == []
