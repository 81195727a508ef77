"""HTTP/1.1 messages on a socket: reading a head, streaming a body as its headers frame
it, header-list helpers, and the S3 XML error replies the proxy makes up."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Mapping
from xml.sax.saxutils import escape

__all__ = [
    "CHUNK",
    "Conn",
    "Headers",
    "discard",
    "error_response",
    "get_header",
    "has_no_body",
    "head_bytes",
    "is_alive",
    "is_chunked",
    "read_head",
    "relay_body",
    "wants_close",
    "without",
]

CHUNK = 64 * 1024
MAX_HEAD = 64 * 1024

Headers = list[tuple[str, str]]


class Conn:
    """A socket with a read buffer: line, exact-length and read-until-close reads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def _fill(self) -> bool:
        data = self.sock.recv(CHUNK)
        if not data:
            return False
        self.buf += data
        return True

    def readline(self, limit: int = MAX_HEAD) -> bytes:
        while True:
            end = self.buf.find(b"\n")
            if end >= 0:
                line = bytes(self.buf[: end + 1])
                del self.buf[: end + 1]
                return line
            if len(self.buf) > limit:
                raise ConnectionError("header line too long")
            if not self._fill():
                line = bytes(self.buf)
                self.buf.clear()
                return line

    def read_some(self, limit: int) -> bytes:
        if not self.buf and not self._fill():
            return b""
        data = bytes(self.buf[:limit])
        del self.buf[:limit]
        return data

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def read_head(conn: Conn) -> tuple[str, Headers] | None:
    """The start line and header fields; None on a clean EOF before any byte."""
    first = conn.readline()
    while first in (b"\r\n", b"\n"):  # RFC 9112 §2.2: ignore leading empty lines
        first = conn.readline()
    if not first:
        return None
    headers: Headers = []
    size = len(first)
    while True:
        line = conn.readline()
        size += len(line)
        if size > MAX_HEAD:
            raise ConnectionError("header section too large")
        if not line:
            raise ConnectionError("connection closed inside the header section")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    return first.decode("latin-1").rstrip("\r\n"), headers


def get_header(headers: Headers, name: str) -> str | None:
    lname = name.lower()
    for key, value in headers:
        if key.lower() == lname:
            return value
    return None


def without(headers: Headers, *names: str) -> Headers:
    lnames = {n.lower() for n in names}
    return [(k, v) for k, v in headers if k.lower() not in lnames]


def head_bytes(start: str, headers: Headers) -> bytes:
    lines = [start, *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def wants_close(headers: Headers) -> bool:
    value = get_header(headers, "Connection") or ""
    return "close" in value.lower()


def is_chunked(headers: Headers) -> bool:
    return "chunked" in (get_header(headers, "Transfer-Encoding") or "").lower()


def relay_body(
    src: Conn, headers: Headers, sink: Callable[[bytes], None], *, until_close: bool
) -> None:
    """Copy one message body from ``src`` to ``sink``, as framed by ``headers``."""
    if is_chunked(headers):
        while True:
            size_line = src.readline()
            if not size_line:
                raise ConnectionError("connection closed inside a chunked body")
            sink(size_line)
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailer fields, then the empty line
                    line = src.readline()
                    if not line:
                        raise ConnectionError("connection closed inside the trailer")
                    sink(line)
                    if line in (b"\r\n", b"\n"):
                        return
            _relay_exact(src, size + 2, sink)  # the chunk and its CRLF
    length = get_header(headers, "Content-Length")
    if length is not None:
        _relay_exact(src, int(length), sink)
    elif until_close:
        while True:
            data = src.read_some(CHUNK)
            if not data:
                return
            sink(data)


def _relay_exact(src: Conn, count: int, sink: Callable[[bytes], None]) -> None:
    while count > 0:
        data = src.read_some(min(count, CHUNK))
        if not data:
            raise ConnectionError(f"connection closed with {count} body bytes to go")
        count -= len(data)
        sink(data)


def discard(_: bytes) -> None:
    """A body sink that drops what it is given."""


def error_response(
    status: int,
    code: str,
    resource: str,
    *,
    retry_after: float | None,
    close: bool,
    message: str = "injected by FaultProxy",
    extra: Mapping[str, str] | None = None,
    bodiless: bool = False,
) -> bytes:
    """A whole S3 error reply (head and XML body), as the proxy's own answer, with the
    ``extra`` headers; ``bodiless``: the head only, as the answer to a HEAD is."""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{escape(code)}</Code>"
        f"<Message>{escape(message)}</Message>"
        f"<Resource>{escape(resource)}</Resource>"
        f"<RequestId>faultproxy</RequestId></Error>"
    ).encode()
    reasons = {
        301: "Moved Permanently",
        307: "Temporary Redirect",
        400: "Bad Request",
        500: "Internal Server Error",
        503: "Service Unavailable",
    }
    headers: Headers = [
        ("Content-Type", "application/xml"),
        ("Content-Length", str(len(body))),
        ("x-amz-request-id", "faultproxy"),
    ]
    if retry_after is not None:
        headers.append(("Retry-After", f"{retry_after:g}"))
    if close:
        headers.append(("Connection", "close"))
    headers += (extra or {}).items()
    head = head_bytes(f"HTTP/1.1 {status} {reasons.get(status, 'Error')}", headers)
    return head if bodiless else head + body


def has_no_body(method: str, status: int) -> bool:
    """True when a response to ``method`` with ``status`` has no body, whatever its headers."""
    return method == "HEAD" or status < 200 or status in (204, 304)


def is_alive(conn: Conn) -> bool:
    """False if the server closed this idle connection (EOF or error pending)."""
    if conn.buf:
        return False
    try:
        conn.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True  # nothing to read: still open
    except OSError:
        return False
    # EOF, or stray bytes from a server that owes us nothing: do not reuse it.
    return False
