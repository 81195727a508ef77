"""HTTP/1.1 exchanges whose answer is read whole, on objsdk's own kept-alive connections.

Most S3 calls carry little: a HEAD, a GET of a small object, a PUT of bytes, a listing, a
delete. Through requests and urllib3 such a call costs several times the client CPU of
its signature, most of it in http.client's header parsing and urllib3's request writing
(docs/perf.md, "Client CPU per small request"). Here a request goes out in one
``sendall`` and its answer is parsed by httptools (llhttp, Node.js's HTTP parser, in C);
docs/design.md says why that library.

Contract of :meth:`Wire.exchange`: the request is sent exactly as signed (the URL's path
and query as they are, the given headers, ``Host`` derived from the URL as the signer
derived it) and the whole answer is returned, except that of an error answer (status 300
or more) at most ``MAX_ERROR_BODY`` of the body is read, and that a head, or a chunked
body's trailer section, past what :mod:`objsdk._transport.answer_head` bounds (its
bytes, its fields, its interim answers) is a ``ProtocolError`` from
:class:`~objsdk._transport.answer_head.HeadTooLarge` (of an error answer, the error). A
failure raises the urllib3 exception urllib3 raises for the same failure, so
:mod:`objsdk._transport.translate` and the retry classifier
(:func:`~objsdk._transport.pipeline.network_failure`) treat both paths alike:
``NewConnectionError``/``ConnectTimeoutError`` (nothing was sent), ``SSLError``,
``ReadTimeoutError`` and ``ProtocolError`` (the request may have reached the server).

A connection goes back to its pool only after an answer that was read to where its
framing says it ends (RFC 9112 §6.3) and did not ask to close; one that became readable while
idle (the server closed it, or sent something unasked) is never reused.

An origin's connections all go one way, directly or through the proxy
:class:`~objsdk._core.proxies.Proxies` names for it (see :mod:`objsdk._transport.proxy`),
decided once: a pool holds one origin's connections through one proxy, and a request
without a proxy looks at one attribute of its origin.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import re
import select
import socket
import ssl
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httptools
import urllib3.exceptions
from urllib3.util import parse_url

from objsdk._core.proxies import Proxies, Proxy
from objsdk._core.secret_headers import SecretHeaders
from objsdk._core.signing import host_header
from objsdk._transport import forks, private_api
from objsdk._transport.answer import Answer, Fields, Reader
from objsdk._transport.proxy import through, unreachable
from objsdk._transport.refusal import MAX_ERROR_BODY
from objsdk._transport.tls import context_for, handshake

__all__ = ["Answer", "Fields", "Wire"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 9110 §5.1: a field name is a token.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
# http.client sends this unless told otherwise (urllib3 does not tell it): stored bytes,
# never compressed on the fly.
_IDENTITY = "Accept-Encoding: identity\r\n"
# RFC 9110 §9.3: the methods whose requests carry content, so an empty one still says
# Content-Length: 0 (as urllib3 sends it).
_CONTENT_METHODS = frozenset({"PUT", "POST", "PATCH"})
# A request this small goes out with its head in one send (one segment on the wire).
_JOIN_BODY = 64 * 1024
_SEND_SLICE = 1 << 20
# The most one recv asks for. Python allocates what it asks for before it knows how much
# arrives, and glibc maps 128 KiB or more afresh (M_MMAP_THRESHOLD, mallopt(3)): a recv of
# 256 KiB for a 1 KiB answer cost an mmap, page faults, an mremap and an munmap, 17 µs
# against 3 µs for 64 KiB, which comes from the heap. A larger body is read into one
# bytes object of its length (Wire._sized), whatever this is.
_RECV = 64 * 1024
# The most of a body's declared length allocated before its bytes arrive. A server may
# declare any Content-Length (10 TB): one allocation of it would fail with MemoryError
# before a byte came, where the answer's ending short is the error. A body declared
# longer grows as it arrives, _GROW bytes a read (Wire._grown).
_PREALLOCATE = 64 << 20
_GROW = 1 << 20
# Read and write timeouts kept by the kernel on plain-HTTP sockets (see Wire._connect):
# the same conditions as private_api's direct reads (Linux, a 64-bit struct timeval).
_KERNEL_TIMEOUTS = private_api.DIRECT_READS


class _Connection:
    """One socket to one origin; ``sock`` is what a
    :class:`~objsdk._transport.private_api.Watch` shuts down to interrupt it."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def dropped(self) -> bool:
        # An idle kept-alive connection has nothing to read; if it has, the server closed
        # it (EOF) or sent something unasked, and either way it cannot carry a request
        # (urllib3's is_connection_dropped decides the same way).
        try:
            return bool(select.select([self.sock], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


@dataclass(frozen=True)
class _Origin:
    scheme: str
    host: str
    port: int
    host_header: str
    # Through a proxy: ``forward``, the absolute form's ``http://host`` for an http
    # origin (with the proxy's ``authorization``), else ``tunnel``, the CONNECT target.
    proxy: Proxy | None = None
    forward: str = ""
    authorization: str | None = None
    tunnel: str | None = None


class Wire:
    """Kept-alive connections to the origins of one transport, at most ``maxsize`` idle
    per origin; thread-safe. ``verify``: True (requests' CA bundle), False, or a CA
    bundle file or directory, as requests takes it. ``timeout``: (connect, read).
    ``proxies``: which origins go through which proxy (see :meth:`direct`)."""

    def __init__(
        self,
        *,
        verify: bool | str,
        timeout: tuple[float, float],
        maxsize: int,
        proxies: Proxies | None = None,
    ) -> None:
        self.verify = verify
        self.timeout = timeout
        self.maxsize = maxsize
        self.proxies = proxies or None
        self._direct: Wire | None = None
        self._idle: dict[str, list[_Connection]] = {}
        self._origins: dict[str, _Origin] = {}
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None
        # A transport dropped without close() still closes its idle connections (urllib3
        # 2's pools do the same): the finalizer holds the dict, not the Wire. No lock:
        # nothing else can reach a Wire that is being collected.
        weakref.finalize(self, _close_all, self._idle)
        forks.register(self)

    def after_fork_in_child(self) -> None:
        # The parent's sockets: using one would interleave two processes' requests and
        # answers on one connection. Closed here, in the child only (no shutdown); the
        # lock anew, since a parent thread may have held it at the fork.
        self._lock = threading.Lock()
        _close_all(self._idle)

    def close(self) -> None:
        _close_idle(self._idle, self._lock)
        if self._direct is not None:
            self._direct.close()

    def direct(self) -> Wire:
        """This wire without its proxies (made once), for a request that must reach its
        host directly, such as the instance metadata service's or the container
        credentials endpoint's (on loopback too, where NO_PROXY may not say so)."""
        if self.proxies is None:
            return self
        with self._lock:
            if self._direct is None:
                self._direct = Wire(verify=self.verify, timeout=self.timeout, maxsize=self.maxsize)
            return self._direct

    def proxy_for(self, url: str) -> Proxy | None:
        """The proxy requests to ``url`` go through, if any."""
        scheme, _, rest = url.partition("://")
        return self._origin(scheme, rest.partition("/")[0]).proxy

    def exchange(
        self, method: str, url: str, headers: Mapping[str, str], body: memoryview | None
    ) -> Answer:
        """Send one request and return its whole answer (see the module docstring)."""
        scheme, _, rest = url.partition("://")
        netloc, slash, tail = rest.partition("/")
        origin = self._origin(scheme, netloc)
        target = slash + tail if slash else "/"
        if origin.forward:
            # To an http origin through a proxy: the absolute form (RFC 9112 §3.2.2),
            # the proxy's credentials beside the signed headers.
            target = origin.forward + target
            if origin.authorization is not None:
                headers = SecretHeaders(headers, **{"Proxy-Authorization": origin.authorization})
        # A memoryview, whose repr shows no bytes: the head holds the signature and the
        # session token, and this frame's locals may be shown with a traceback.
        head = memoryview(_head(method, target, origin.host_header, headers, body))
        conn = self._checkout(netloc, origin)
        watch = private_api.current_watch()
        try:
            if watch is not None:
                watch.attach(conn)
            try:
                self._send(conn, head, body)
            except urllib3.exceptions.ProtocolError as broken:
                answer = self._early_answer(conn, method == "HEAD", broken)
                reusable = False
            else:
                answer, reusable = self._receive(conn, method == "HEAD")
        except BaseException:
            conn.close()
            raise
        finally:
            if watch is not None:
                watch.detach(conn)
        if reusable:
            self._checkin(netloc, conn)
        else:
            conn.close()
        return answer

    def _early_answer(
        self, conn: _Connection, head_only: bool, broken: urllib3.exceptions.ProtocolError
    ) -> Answer:
        """The answer a server sent before it stopped reading the body (RFC 9112 §9.6:
        it may answer early and close, typically a refusal of a large PUT), else the
        failure to send. Only a refusal counts: a success for a body that did not all
        arrive would be a lie."""
        try:
            answer, _ = self._receive(conn, head_only)
        except (urllib3.exceptions.HTTPError, OSError):
            answer = None
        if answer is None or answer.status < 300:
            raise broken from broken.__cause__
        return answer

    # -- connections ------------------------------------------------------------------

    def _origin(self, scheme: str, netloc: str) -> _Origin:
        origin = self._origins.get(netloc)
        if origin is None:
            parts = parse_url(f"{scheme}://{netloc}")
            if scheme not in _DEFAULT_PORTS or not parts.host:
                raise ValueError(f"not an http(s) origin: {scheme}://{netloc}")
            host = parts.host.strip("[]")  # an IPv6 literal connects without brackets
            port = parts.port or _DEFAULT_PORTS[scheme]
            signed_host = host_header(f"{scheme}://{netloc}/")
            proxy = None if self.proxies is None else self.proxies.for_url(f"{scheme}://{netloc}/")
            if proxy is None:
                origin = _Origin(scheme, host, port, signed_host)
            elif scheme == "http":
                # The authority is the signed Host: a proxy rebuilds Host from it.
                forward = f"http://{signed_host}"
                origin = _Origin(
                    scheme, host, port, signed_host, proxy, forward, proxy.authorization
                )
            else:
                authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
                origin = _Origin(scheme, host, port, signed_host, proxy, tunnel=authority)
            self._origins[netloc] = origin
        return origin

    def _checkout(self, netloc: str, origin: _Origin) -> _Connection:
        while True:
            with self._lock:
                idle = self._idle.get(netloc)
                conn = idle.pop() if idle else None
            if conn is None:
                return self._connect(origin)
            if not conn.dropped():
                return conn
            conn.close()

    def _checkin(self, netloc: str, conn: _Connection) -> None:
        with self._lock:
            idle = self._idle.setdefault(netloc, [])
            if len(idle) < self.maxsize:
                idle.append(conn)
                return
        conn.close()

    def _connect(self, origin: _Origin) -> _Connection:
        connect_timeout, read_timeout = self.timeout
        proxy = origin.proxy
        host, port = (origin.host, origin.port) if proxy is None else (proxy.host, proxy.port)
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as e:
            if isinstance(e, TimeoutError):
                error: Exception = urllib3.exceptions.ConnectTimeoutError(
                    None, f"connection to {host} timed out"
                )
            else:
                error = urllib3.exceptions.NewConnectionError(
                    None,  # type: ignore[arg-type]
                    f"failed to establish a new connection: {type(e).__name__}",
                )
            raise (error if proxy is None else unreachable(proxy, error, type(e).__name__)) from e
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxy is not None:
                sock = through(sock, proxy, origin.tunnel, self._context())
            if origin.scheme == "https":
                sock = handshake(self._context(), sock, origin.host)
            if type(sock) is not socket.socket:  # TLS, to the origin or the proxy
                sock.settimeout(read_timeout)
            elif _KERNEL_TIMEOUTS and read_timeout:
                # A socket with a Python timeout polls before every send and recv: two
                # system calls, and two hand-offs of the GIL among the threads, for each.
                # Blocking, with the timeout kept by the kernel (socket(7): SO_RCVTIMEO,
                # SO_SNDTIMEO), each is one call; a timeout then fails it with EAGAIN.
                timeval = private_api._timeval(read_timeout)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
                sock.settimeout(None)
            else:
                sock.settimeout(read_timeout)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock)

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = context_for(self.verify)
        return self._tls

    # -- one exchange -----------------------------------------------------------------

    @staticmethod
    def _send(conn: _Connection, head: memoryview, body: memoryview | None) -> None:
        try:
            if body is not None and 0 < body.nbytes <= _JOIN_BODY:
                conn.sock.sendall(b"".join((head, body)))
            else:
                conn.sock.sendall(head)
                if body is not None:
                    # The read timeout bounds a wait without progress. A socket with a
                    # Python timeout holds it over a whole sendall (since Python 3.5), so
                    # a body that takes longer to go out over a slow link would fail:
                    # each slice gets the whole timeout.
                    for start in range(0, body.nbytes, _SEND_SLICE):
                        conn.sock.sendall(body[start : start + _SEND_SLICE])
        except (TimeoutError, BlockingIOError) as e:
            raise urllib3.exceptions.ReadTimeoutError(None, "", "write timed out") from e  # type: ignore[arg-type]
        except OSError as e:
            raise urllib3.exceptions.ProtocolError("Connection aborted.", e) from e

    def _receive(self, conn: _Connection, head_only: bool) -> tuple[Answer, bool]:
        reader = Reader()
        parser = reader.parser
        try:
            while not reader.head_done:
                data = conn.sock.recv(_RECV)
                if not data:
                    raise _ended(reader)
                reader.head(data)
            status = reader.status
            fields = Fields(reader.fields)
            keep = _persists(parser.get_http_version(), fields)
            if head_only or status in (204, 304):
                # RFC 9112 §6.3: no content, whatever Content-Length says.
                return Answer(status, fields, b""), keep and not (reader.got or reader.extra)
            if status >= 300:
                return self._error_body(conn, reader, status, fields, keep)
            length = fields.get("Content-Length")
            if length is not None and "Transfer-Encoding" not in fields:
                return self._sized(conn, reader, status, fields, int(length), keep)
            while not reader.done:
                data = conn.sock.recv(_RECV)
                if not data:
                    if "Transfer-Encoding" not in fields and length is None:
                        # Delimited by the connection's end (RFC 9112 §6.3, 8.).
                        return Answer(status, fields, b"".join(reader.body)), False
                    raise _ended(reader)
                past = reader.rest(data)
                if past is not None:
                    raise past
            return Answer(status, fields, b"".join(reader.body)), keep and not reader.extra
        except (TimeoutError, BlockingIOError) as e:
            raise urllib3.exceptions.ReadTimeoutError(None, "", "read timed out") from e  # type: ignore[arg-type]
        except httptools.HttpParserError as e:
            raise urllib3.exceptions.ProtocolError("invalid HTTP answer", e) from e
        except (OSError, http.client.HTTPException) as e:
            raise urllib3.exceptions.ProtocolError("Connection broken", e) from e
        except ValueError as e:  # a Content-Length that is not a number
            raise urllib3.exceptions.ProtocolError("invalid HTTP answer", e) from e

    @staticmethod
    def _error_body(
        conn: _Connection, reader: Reader, status: int, fields: Fields, keep: bool
    ) -> tuple[Answer, bool]:
        # An error document (S3's XML, a proxy's page) is kept up to MAX_ERROR_BODY: no
        # more is received, however long the body says it is (a 400 MiB one would be held
        # whole), and a connection left in mid-body is dropped, never reused.
        framed = "Content-Length" in fields or "Transfer-Encoding" in fields
        while not reader.done and reader.got < MAX_ERROR_BODY:
            data = conn.sock.recv(min(_RECV, MAX_ERROR_BODY - reader.got))
            if not data:
                if not framed:
                    break  # delimited by the connection's end (RFC 9112 §6.3, 8.)
                raise _ended(reader)
            if reader.rest(data) is not None:
                break  # trailers without end: the error is what was read of it
        content = b"".join(reader.body)[:MAX_ERROR_BODY]
        return Answer(status, fields, content), keep and reader.done and not reader.extra

    @staticmethod
    def _sized(
        conn: _Connection,
        reader: Reader,
        status: int,
        fields: Fields,
        length: int,
        keep: bool,
    ) -> tuple[Answer, bool]:
        # The rest of a body of known length straight from the socket: the parser
        # would copy every chunk once more on its way to on_body.
        chunks, got = reader.body, reader.got
        if length - got > _RECV:
            # A large body lands in one bytes object of its length, read into directly
            # (as http.client's buffered read does): chunks and their join would hold it
            # twice.
            body = _Body(conn.sock, b"".join(chunks), length)
            if length <= _PREALLOCATE:
                content = io.BufferedReader(body, _RECV).read(length)
            else:
                content = Wire._grown(body)
            if len(content) < length:
                raise http.client.IncompleteRead(content, length - len(content))
            return Answer(status, fields, content), keep and not reader.extra
        while got < length:
            data = conn.sock.recv(min(length - got, _RECV))
            if not data:
                raise http.client.IncompleteRead(b"", length - got)
            chunks.append(data)
            got += len(data)
        content = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return Answer(status, fields, content), keep and not reader.extra

    @staticmethod
    def _grown(body: _Body) -> bytes:
        """``body`` to its end or the connection's, in a buffer that grows as the bytes
        arrive (by reallocation, which moves pages rather than copying them) and becomes
        the content: held once, as a preallocated body is, plus one read's worth."""
        out = io.BytesIO()
        scratch = memoryview(bytearray(_GROW))
        while n := body.readinto(scratch):
            out.write(scratch[:n])
        return out.getvalue()


class _Body(io.RawIOBase):
    """A body of ``length`` bytes: ``first`` (already received), then the socket, never
    a byte past the body (what follows belongs to no one)."""

    def __init__(self, sock: socket.socket, first: bytes, length: int) -> None:
        self._sock = sock
        self._first = memoryview(first)
        self._left = length

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")[: self._left]
        if self._first:
            n = min(len(view), len(self._first))
            view[:n] = self._first[:n]
            self._first = self._first[n:]
        else:
            try:
                n = self._sock.recv_into(view) if view else 0
            except BlockingIOError as e:  # the kernel's timeout: a read timeout, not EOF
                raise TimeoutError("read timed out") from e
        self._left -= n
        return n


def _head(
    method: str, target: str, host: str, headers: Mapping[str, str], body: memoryview | None
) -> bytes:
    lines = [f"{method} {target} HTTP/1.1\r\n"]
    given = {name.lower() for name in headers}
    if "host" not in given:
        lines.append(f"Host: {host}\r\n")
    if "accept-encoding" not in given:
        lines.append(_IDENTITY)
    for name, value in headers.items():
        low = name.lower()
        if low in ("content-length", "transfer-encoding"):
            continue  # set below: S3 takes a plain Content-Length, never chunked PUTs
        if not _TOKEN.match(name):
            raise ValueError(f"invalid header name {name!r}")
        lines.append(f"{name}: {value}\r\n")
    if body is not None and body.nbytes:
        lines.append(f"Content-Length: {body.nbytes}\r\n")
    elif method in _CONTENT_METHODS:
        lines.append("Content-Length: 0\r\n")
    lines.append("\r\n")
    text = "".join(lines)
    # One CR and one LF per line, none inside a value (RFC 9112 §2.2: no bare CR or LF;
    # a value carrying CRLF would add a header the signature never covered).
    if text.count("\n") != len(lines) or text.count("\r") != len(lines) or "\0" in text:
        raise ValueError("a header value holds CR, LF or NUL")
    if " " in target or "\n" in target:
        raise ValueError("the request target holds a space or LF")
    return text.encode("latin-1")


def _close_idle(idle: dict[str, list[_Connection]], lock: threading.Lock) -> None:
    with lock:
        conns = _take_all(idle)
    for conn in conns:
        conn.close()


def _close_all(idle: dict[str, list[_Connection]]) -> None:
    """:func:`_close_idle` where no other thread can reach ``idle``."""
    for conn in _take_all(idle):
        conn.close()


def _take_all(idle: dict[str, list[_Connection]]) -> list[_Connection]:
    conns = [conn for pool in idle.values() for conn in pool]
    idle.clear()
    return conns


def _persists(version: str, fields: Mapping[str, str]) -> bool:
    """Whether the connection stays open after this answer (RFC 9112 §9.3)."""
    value = fields.get("Connection")
    if value is None:  # most answers: nothing to split
        return version == "1.1"
    tokens = {t.strip().lower() for t in value.split(",")}
    if "close" in tokens:
        return False
    return version == "1.1" or "keep-alive" in tokens


def _ended(reader: Reader) -> Exception:
    """What an answer cut short by the connection's end is, as http.client names it."""
    if not reader.fields and not reader.status:
        return http.client.RemoteDisconnected("Remote end closed connection without response")
    return http.client.IncompleteRead(b"".join(reader.body))
