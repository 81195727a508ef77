"""A tiny threaded raw-socket HTTP/1.1 server for fault-injection tests.

In the spirit of urllib3's ``dummyserver``: the test supplies a ``handler(request, conn)``
that gets the parsed request and the raw connected socket, and writes whatever bytes it
likes, well-formed or not; it may also close, reset or stall the connection. Helpers
build ordinary responses (:func:`http_response`), serve an object the way S3 does
(:func:`object_reply`: ``Range``, ``ETag``, ``If-Match``) and inject the usual faults
(:func:`send_truncated`, :func:`reset`, :func:`hang`), so most handlers read "a correct
server, except for one fault on request #i".

Every connection runs in its own thread (an HTTP client may hold an idle pooled
connection while it opens another). Leaving the ``with`` block shuts everything down:
the listening socket is closed, client connections are shut down (waking handlers blocked
in :func:`hang` or in ``sendall``) and every thread is joined. An exception other than a
socket error raised by a handler is re-raised there, so a broken handler fails the test
instead of disappearing into a thread.
"""

from __future__ import annotations

import contextlib
import http
import selectors
import socket
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType

from requests.structures import CaseInsensitiveDict

__all__ = [
    "RawServer",
    "Reply",
    "Request",
    "S3Object",
    "chunked_body",
    "hang",
    "http_response",
    "object_reply",
    "reset",
    "send_truncated",
]

_MAX_HEAD = 64 * 1024
_JOIN_TIMEOUT = 5.0


@dataclass
class Request:
    """One parsed request: request line, headers and its 0-based index on the server."""

    method: str
    path: str
    version: str
    headers: CaseInsensitiveDict[str]
    index: int = -1

    @property
    def range_start(self) -> int | None:
        """The first byte of a ``Range: bytes=N-`` / ``bytes=N-M`` header, else None."""
        value = self.headers.get("Range")
        if not value or not value.startswith("bytes="):
            return None
        first, _, _ = value[len("bytes=") :].partition("-")
        return int(first) if first.isdigit() else None


Handler = Callable[[Request, socket.socket], None]


class _ClientGone(Exception):
    """The client closed the connection (or it broke) between requests."""


class _Connection:
    """Reads requests off one accepted socket; keeps the bytes read past a request head."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()

    def _recv(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise _ClientGone
        return data

    def read_request(self) -> Request:
        while (end := self._buf.find(b"\r\n\r\n")) < 0:
            if len(self._buf) > _MAX_HEAD:
                raise ValueError("request head too large")
            self._buf += self._recv()
        head = bytes(self._buf[:end]).decode("latin-1")
        del self._buf[: end + 4]
        request_line, *header_lines = head.split("\r\n")
        method, path, version = request_line.split(" ", 2)
        headers: CaseInsensitiveDict[str] = CaseInsensitiveDict()
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip()] = value.strip()
        # Bodies are not needed by any handler: read and drop them.
        remaining = int(headers.get("Content-Length") or 0)
        while remaining > len(self._buf):
            remaining -= len(self._buf)
            self._buf.clear()
            self._buf += self._recv()
        del self._buf[:remaining]
        return Request(method, path, version, headers)


class RawServer:
    """``with RawServer(handler) as server:`` listens on 127.0.0.1 (``server.port``,
    ``server.url``); ``server.requests`` lists every request received, in order."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        # refuse_for's request to the accept loop: how long, and what to set once the
        # port refuses.
        self._outage: tuple[float, threading.Event] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def connections(self) -> int:
        """Connections accepted so far."""
        with self._lock:
            return len(self._threads)

    def __enter__(self) -> RawServer:
        self._listener = self._listen(0)
        self.port = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"rawserver-{self.port}", daemon=True
        )
        self._acceptor.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if exc_type is None and self.errors:
            raise self.errors[0]

    def refuse_for(self, seconds: float) -> None:
        """Go away for ``seconds``, as a server restarting: the connections open are
        closed (FIN: shut down, as the kernel ends a killed server's) and a connect to the
        port is refused meanwhile (nothing listens); then it listens again. Returns once
        the port refuses; safe to call from a handler (whose connection is closed too)."""
        refusing = threading.Event()
        with self._lock:
            self._outage = (seconds, refusing)
        if not refusing.wait(_JOIN_TIMEOUT):
            raise RuntimeError("the accept loop did not stop listening")

    @staticmethod
    def _listen(port: int) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen(16)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            raise
        return listener

    def stop(self) -> None:
        """Stop accepting, shut down every connection and join every thread."""
        self._stop.set()
        if self._acceptor is not None:
            self._acceptor.join(_JOIN_TIMEOUT)
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            conns = list(self._conns)
            threads = list(self._threads)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(_JOIN_TIMEOUT)
        for conn in conns:
            conn.close()
        alive = [t.name for t in [self._acceptor, *threads] if t is not None and t.is_alive()]
        if alive:
            self.errors.append(RuntimeError(f"server threads did not stop: {alive}"))

    # -- threads -----------------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._listener is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self._listener, selectors.EVENT_READ)
            while not self._stop.is_set():
                with self._lock:
                    outage, self._outage = self._outage, None
                if outage is not None:
                    self._refuse(sel, *outage)
                    continue
                if not sel.select(timeout=0.05):
                    continue
                try:
                    conn, _ = self._listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                conn.setblocking(True)
                thread = threading.Thread(
                    target=self._serve, args=(conn,), name=f"rawserver-conn-{conn.fileno()}"
                )
                thread.daemon = True
                with self._lock:
                    if self._stop.is_set():
                        conn.close()
                        break
                    self._conns.add(conn)
                    self._threads.append(thread)
                thread.start()

    def _refuse(
        self, sel: selectors.BaseSelector, seconds: float, refusing: threading.Event
    ) -> None:
        """From the accept loop: close the listening socket and the connections, wait,
        listen again."""
        assert self._listener is not None
        sel.unregister(self._listener)
        self._listener.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # their handlers see the client gone, and end
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        refusing.set()
        if self._stop.wait(seconds):
            return
        self._listener = self._listen(self.port)
        sel.register(self._listener, selectors.EVENT_READ)

    def _serve(self, sock: socket.socket) -> None:
        conn = _Connection(sock)
        try:
            # Keep-alive: serve requests until the handler closes the socket or the
            # client goes away.
            while not self._stop.is_set() and sock.fileno() != -1:
                request = conn.read_request()
                with self._lock:
                    request.index = len(self.requests)
                    self.requests.append(request)
                self.handler(request, sock)
        except (_ClientGone, OSError):
            pass  # the client hung up or reset, or the handler closed the socket
        except BaseException as e:
            with self._lock:
                self.errors.append(e)
        finally:
            with self._lock:
                self._conns.discard(sock)
            sock.close()


# -- building responses ----------------------------------------------------------------


def http_response(status: int, headers: Mapping[str, str], body: bytes = b"") -> bytes:
    """A complete HTTP/1.1 response as bytes.

    ``Content-Length: len(body)`` is added unless ``headers`` already has a
    Content-Length (which may lie, on purpose) or a Transfer-Encoding.
    """
    names = {name.lower() for name in headers}
    lines = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if "content-length" not in names and "transfer-encoding" not in names:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked_body(body: bytes, chunk_size: int) -> bytes:
    """``body`` in ``Transfer-Encoding: chunked`` framing, with the final 0-chunk."""
    out = bytearray()
    for i in range(0, len(body), chunk_size):
        piece = body[i : i + chunk_size]
        out += b"%x\r\n" % len(piece) + piece + b"\r\n"
    return bytes(out + b"0\r\n\r\n")


@dataclass
class Reply:
    """A response about to be sent; handlers alter it to inject a fault."""

    status: int
    headers: dict[str, str]
    body: bytes = b""

    def to_bytes(self) -> bytes:
        return http_response(self.status, self.headers, self.body)

    @property
    def head(self) -> bytes:
        """Status line and headers (Content-Length as for the whole body), no body."""
        return http_response(
            self.status, {"Content-Length": str(len(self.body)), **self.headers}, b""
        )

    def send(self, conn: socket.socket) -> None:
        conn.sendall(self.to_bytes())


@dataclass
class S3Object:
    """An object as the server stores it. ``headers`` go on full (200) answers only, and
    only when the request says ``x-amz-checksum-mode: ENABLED`` for ``x-amz-checksum-*``
    ones (as S3 does)."""

    data: bytes
    etag: str = '"0123456789abcdef0123456789abcdef"'
    headers: dict[str, str] = field(default_factory=dict)


def object_reply(request: Request, obj: S3Object, *, honour_if_match: bool = True) -> Reply:
    """What a correct S3 server answers to a GET of ``obj``.

    ``If-Match`` with another ETag -> 412; ``Range: bytes=N-`` (or ``N-M``) -> 206 with
    ``Content-Range`` (416 past the end); no Range -> 200 with the whole body.
    """
    size = len(obj.data)
    base = {"ETag": obj.etag, "Accept-Ranges": "bytes", "Last-Modified": _LAST_MODIFIED}
    if_match = request.headers.get("If-Match")
    if honour_if_match and if_match is not None and if_match not in ("*", obj.etag):
        return Reply(412, {"Content-Type": "application/xml"}, _error_xml("PreconditionFailed"))
    value = request.headers.get("Range")
    if value is None:
        checksum_mode = request.headers.get("x-amz-checksum-mode", "").upper() == "ENABLED"
        extra = {
            name: v
            for name, v in obj.headers.items()
            if checksum_mode or not name.lower().startswith("x-amz-checksum-")
        }
        return Reply(200, {**base, **extra}, obj.data)
    assert value.startswith("bytes="), value
    first_s, _, last_s = value[len("bytes=") :].partition("-")
    first = int(first_s)
    last = min(int(last_s), size - 1) if last_s else size - 1
    if first >= size:
        return Reply(
            416,
            {"Content-Type": "application/xml", "Content-Range": f"bytes */{size}"},
            _error_xml("InvalidRange"),
        )
    return Reply(
        206, {**base, "Content-Range": f"bytes {first}-{last}/{size}"}, obj.data[first : last + 1]
    )


_LAST_MODIFIED = "Mon, 01 Jan 2024 00:00:00 GMT"


def _error_xml(code: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        f"<Message>{code}</Message><RequestId>0</RequestId></Error>"
    ).encode()


# -- faults ------------------------------------------------------------------------------


def send_truncated(conn: socket.socket, reply: Reply, keep: int) -> None:
    """Send ``reply`` with its full Content-Length but only ``keep`` body bytes, then close
    cleanly (FIN): the client sees the body end early."""
    conn.sendall(reply.head + reply.body[:keep])
    conn.close()


def reset(conn: socket.socket) -> None:
    """Abort the connection: SO_LINGER 0 then close sends a TCP RST."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def hang(conn: socket.socket) -> None:
    """Stall: send nothing more and wait until the client hangs up (or the server stops),
    draining anything the client sends meanwhile."""
    with contextlib.suppress(OSError):
        while conn.recv(65536):
            pass
    conn.close()
