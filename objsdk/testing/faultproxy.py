"""A fault-injecting HTTP/1.1 reverse proxy for S3 tests, for faults Toxiproxy cannot do.

Toxiproxy works on TCP bytes; some faults need HTTP: answer ``503 SlowDown`` to one
request of a multipart upload, let ``CompleteMultipartUpload`` reach the server and
lose its reply, strip or weaken the ``ETag``, ignore ``Range``... ::

    with FaultProxy(local_minio.endpoint) as proxy:
        proxy.add_rule(Action.SLOW_DOWN, method="POST", query=["uploadId"], times=1)
        client = Client(proxy.endpoint, access_key, secret_key)
        ...
        assert [r.status for r in proxy.requests(method="POST")] == [200, 503, 200]

Requests that match no rule (or whose rule is used up) are forwarded unchanged; the
``Host`` header is kept, so SigV4 signatures made for the proxy's address stay valid.
Bodies are streamed both ways in small chunks (a GiB object is never held in memory),
client connections are kept alive, and each one gets its own upstream connection. Only
plain HTTP upstreams are supported. Standard library only.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import hmac
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import parse_qsl, quote, unquote, urlsplit
from xml.sax.saxutils import escape

__all__ = ["Action", "FaultProxy", "FaultProxyError", "LoggedRequest", "Rule"]

_CHUNK = 64 * 1024
_MAX_HEAD = 64 * 1024
_JOIN_TIMEOUT = 5.0

Headers = list[tuple[str, str]]


class FaultProxyError(RuntimeError):
    """The proxy could not start, or was used wrongly."""


class Action(enum.Enum):
    """What a matching rule does to the request or to its response."""

    #: Answer 503 SlowDown (an S3 XML error body) without forwarding the request.
    SLOW_DOWN = "slow_down"
    #: Answer ``status``/``code`` (default 500 InternalError) without forwarding.
    ERROR = "error"
    #: Forward the request, read the server's whole reply, then send the client an error
    #: instead (default 503 SlowDown): the request took effect but its reply was lost.
    ERROR_AFTER_FORWARD = "error_after_forward"
    #: Forward the request, read the server's whole reply, then close the client
    #: connection without sending anything.
    DROP_AFTER_FORWARD = "drop_after_forward"
    #: Close the client connection without forwarding the request or answering.
    DROP = "drop"
    #: Remove the ``ETag`` header from the response.
    STRIP_ETAG = "strip_etag"
    #: Turn the response's ``ETag: "x"`` into ``ETag: W/"x"``.
    WEAK_ETAG = "weak_etag"
    #: Forward without ``Range`` (and ``If-Range``): the server answers 200 with the whole
    #: body. A SigV4 request that signed ``Range`` is re-signed, so the proxy needs the
    #: credentials (``FaultProxy(..., access_key=, secret_key=)``).
    IGNORE_RANGE = "ignore_range"
    #: Remove ``Content-Length`` from the response; a body is then delimited by closing
    #: the connection, as HTTP/1.1 allows.
    STRIP_CONTENT_LENGTH = "strip_content_length"
    #: Add (or replace) the response headers given as ``headers``.
    SET_HEADERS = "set_headers"
    #: Wait ``seconds`` before forwarding the request: a slow server.
    DELAY = "delay"
    #: Send the response headers and the first ``after`` body bytes, then close the
    #: connection: a body cut short (Toxiproxy's ``limit_data``, for one request).
    TRUNCATE_BODY = "truncate_body"


@dataclass
class Rule:
    """Which requests to fault, how, and how many times.

    A request matches when every given criterion does: ``method`` (exact, case
    insensitive), ``path`` (a regular expression searched in the percent-decoded path,
    e.g. ``r"/bucket/key$"``) and ``query`` (parameter names that must be present, or a
    mapping from name to required value, None meaning any value). ``times`` is how many
    matching requests the rule applies to (None: all of them); ``hits`` counts them.
    """

    action: Action
    method: str | None = None
    path: str | None = None
    query: Mapping[str, str | None] = field(default_factory=dict)
    times: int | None = 1
    status: int | None = None
    code: str | None = None
    retry_after: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    after: int = 0
    seconds: float = 0.0
    hits: int = 0

    def matches(self, method: str, path: str, query: Mapping[str, str]) -> bool:
        if self.method is not None and self.method.upper() != method.upper():
            return False
        if self.path is not None and re.search(self.path, path) is None:
            return False
        for name, value in self.query.items():
            if name not in query or (value is not None and query[name] != value):
                return False
        return True

    @property
    def used_up(self) -> bool:
        return self.times is not None and self.hits >= self.times


@dataclass(frozen=True)
class LoggedRequest:
    """One request the proxy handled, and what it sent back.

    ``status`` is the status the client got (None if the connection was dropped);
    ``upstream_status`` the one the server answered (None if it was not forwarded);
    ``actions`` the faults applied; ``body_bytes`` how many body bytes the client was sent
    (as framed on the wire: a chunked body counts its chunk headers).
    """

    method: str
    path: str
    query: dict[str, str]
    range: str | None
    status: int | None
    upstream_status: int | None
    actions: tuple[Action, ...]
    body_bytes: int
    time: float


class _Dropped(Exception):
    """The client connection is to be closed now, without a reply."""


class _Conn:
    """A socket with a read buffer: line, exact-length and read-until-close reads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def _fill(self) -> bool:
        data = self.sock.recv(_CHUNK)
        if not data:
            return False
        self.buf += data
        return True

    def readline(self, limit: int = _MAX_HEAD) -> bytes:
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


def _read_head(conn: _Conn) -> tuple[str, Headers] | None:
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
        if size > _MAX_HEAD:
            raise ConnectionError("header section too large")
        if not line:
            raise ConnectionError("connection closed inside the header section")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    return first.decode("latin-1").rstrip("\r\n"), headers


def _get(headers: Headers, name: str) -> str | None:
    lname = name.lower()
    for key, value in headers:
        if key.lower() == lname:
            return value
    return None


def _without(headers: Headers, *names: str) -> Headers:
    lnames = {n.lower() for n in names}
    return [(k, v) for k, v in headers if k.lower() not in lnames]


def _head_bytes(start: str, headers: Headers) -> bytes:
    lines = [start, *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _wants_close(headers: Headers) -> bool:
    value = _get(headers, "Connection") or ""
    return "close" in value.lower()


def _is_chunked(headers: Headers) -> bool:
    return "chunked" in (_get(headers, "Transfer-Encoding") or "").lower()


def _relay_body(
    src: _Conn, headers: Headers, sink: Callable[[bytes], None], *, until_close: bool
) -> None:
    """Copy one message body from ``src`` to ``sink``, as framed by ``headers``."""
    if _is_chunked(headers):
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
    length = _get(headers, "Content-Length")
    if length is not None:
        _relay_exact(src, int(length), sink)
    elif until_close:
        while True:
            data = src.read_some(_CHUNK)
            if not data:
                return
            sink(data)


def _relay_exact(src: _Conn, count: int, sink: Callable[[bytes], None]) -> None:
    while count > 0:
        data = src.read_some(min(count, _CHUNK))
        if not data:
            raise ConnectionError(f"connection closed with {count} body bytes to go")
        count -= len(data)
        sink(data)


def _discard(_: bytes) -> None:
    pass


def _error_response(
    status: int,
    code: str,
    resource: str,
    *,
    retry_after: float | None,
    close: bool,
    message: str = "injected by FaultProxy",
) -> bytes:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{escape(code)}</Code>"
        f"<Message>{escape(message)}</Message>"
        f"<Resource>{escape(resource)}</Resource>"
        f"<RequestId>faultproxy</RequestId></Error>"
    ).encode()
    reasons = {500: "Internal Server Error", 503: "Service Unavailable"}
    headers: Headers = [
        ("Content-Type", "application/xml"),
        ("Content-Length", str(len(body))),
        ("x-amz-request-id", "faultproxy"),
    ]
    if retry_after is not None:
        headers.append(("Retry-After", f"{retry_after:g}"))
    if close:
        headers.append(("Connection", "close"))
    return _head_bytes(f"HTTP/1.1 {status} {reasons.get(status, 'Error')}", headers) + body


@dataclass
class _Session:
    """One client connection and the upstream connection that serves it."""

    client: _Conn
    upstream: _Conn | None = None


def _no_body(method: str, status: int) -> bool:
    return method == "HEAD" or status < 200 or status in (204, 304)


class FaultProxy:
    """A reverse proxy to ``upstream`` (``http://host:port``) on a free loopback port.

    Start and stop it with ``with`` (or :meth:`start`/:meth:`stop`); point clients at
    :attr:`endpoint`. Every matching rule that is not used up applies (see
    :meth:`_take_rules` for the combinations), in the order added. Thread safe.
    """

    def __init__(
        self,
        upstream: str,
        *,
        host: str = "127.0.0.1",
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise FaultProxyError(f"upstream must be http://host:port, got {upstream!r}")
        self.upstream = (parts.hostname, parts.port)
        # Only to re-sign requests whose signed headers a rule removed; never logged.
        self._credentials = (
            (access_key, secret_key) if access_key is not None and secret_key is not None else None
        )
        self.host = host
        self.port: int | None = None
        self._lock = threading.Lock()
        # Signalled when an exchange ends, for requests() to wait for the log to settle.
        self._settled = threading.Condition(self._lock)
        self._active = 0
        self._rules: list[Rule] = []
        self._log: list[LoggedRequest] = []
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._sockets: set[socket.socket] = set()
        self._stopping = False
        #: How many client connections were accepted (keep-alive shows as few).
        self.connections = 0

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The proxy's URL, e.g. ``http://127.0.0.1:41234``."""
        if self.port is None:
            raise FaultProxyError("FaultProxy has not been started")
        return f"http://{self.host}:{self.port}"

    def start(self) -> FaultProxy:
        if self._listener is not None:
            return self
        listener = socket.create_server((self.host, 0), backlog=128)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._stopping = False
        thread = threading.Thread(target=self._accept_loop, name="faultproxy-accept", daemon=True)
        self._threads.append(thread)
        thread.start()
        return self

    def stop(self) -> None:
        """Close the listener and every connection, and join the threads; idempotent."""
        self._stopping = True
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(_JOIN_TIMEOUT)
        self._threads = []

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.endpoint if self.port is not None else "unstarted"
        return f"FaultProxy({where} -> {self.upstream[0]}:{self.upstream[1]})"

    # -- rules and log -----------------------------------------------------------------

    def add_rule(
        self,
        action: Action,
        *,
        method: str | None = None,
        path: str | None = None,
        query: Iterable[str] | Mapping[str, str | None] = (),
        times: int | None = 1,
        status: int | None = None,
        code: str | None = None,
        retry_after: float | None = None,
        headers: Mapping[str, str] | None = None,
        after: int = 0,
        seconds: float = 0.0,
    ) -> Rule:
        """Add a rule (see :class:`Rule`) and return it (its ``hits`` count live).

        ``status``/``code`` choose the error of ``ERROR`` and ``ERROR_AFTER_FORWARD``;
        ``retry_after`` adds a ``Retry-After`` header to an injected error; ``headers``
        are the ones ``SET_HEADERS`` sets; ``after`` is where ``TRUNCATE_BODY`` cuts;
        ``seconds`` how long ``DELAY`` waits.
        """
        if times is not None and times < 1:
            raise FaultProxyError(f"times must be a positive int or None, got {times!r}")
        if action is Action.SET_HEADERS and not headers:
            raise FaultProxyError("SET_HEADERS needs headers")
        wanted: dict[str, str | None] = (
            dict(query) if isinstance(query, Mapping) else dict.fromkeys(query, None)
        )
        rule = Rule(
            action=action,
            method=method,
            path=path,
            query=wanted,
            times=times,
            status=status,
            code=code,
            retry_after=retry_after,
            headers=dict(headers or {}),
            after=after,
            seconds=seconds,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear_rules(self) -> None:
        with self._lock:
            self._rules.clear()

    def requests(self, *, method: str | None = None, settle: float = 1.0) -> list[LoggedRequest]:
        """The requests handled so far, oldest first (only ``method`` ones if given).

        A client can have its whole reply a moment before the proxy logs it; this waits
        up to ``settle`` seconds for requests still being handled to be logged.
        """
        with self._settled:
            self._settled.wait_for(lambda: self._active == 0, timeout=settle)
            log = list(self._log)
        if method is None:
            return log
        return [r for r in log if r.method == method.upper()]

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    def _take_rules(self, method: str, path: str, query: Mapping[str, str]) -> list[Rule]:
        """The rules that apply to this request, their hits counted.

        An answer made here (SLOW_DOWN, ERROR, DROP) excludes everything else; of the
        rest, one lost-reply rule (ERROR/DROP_AFTER_FORWARD) and one TRUNCATE_BODY apply
        at most, and every request or header rule does.
        """
        with self._lock:
            matching = [r for r in self._rules if not r.used_up and r.matches(method, path, query)]
            here = [r for r in matching if r.action in _ANSWERED_HERE]
            if here:
                chosen = here[:1]
            else:
                chosen, seen = [], set()
                for rule in matching:
                    kind = "lost" if rule.action in _AFTER_FORWARD else rule.action
                    if kind in seen and kind in ("lost", Action.TRUNCATE_BODY):
                        continue
                    seen.add(kind)
                    chosen.append(rule)
            for rule in chosen:
                rule.hits += 1
            return chosen

    def _record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._log.append(entry)

    # -- serving -----------------------------------------------------------------------

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopping:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._track(sock)
            self.connections += 1
            thread = threading.Thread(
                target=self._serve_connection, args=(sock,), name="faultproxy-conn", daemon=True
            )
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(thread)
            thread.start()

    def _strip_signed(
        self, target: str, method: str, headers: Headers, names: tuple[str, ...]
    ) -> Headers:
        """``headers`` without ``names``; re-signed if the SigV4 signature covered them."""
        present = {k.lower() for k, _ in headers} & set(names)
        if not present:
            return headers
        headers = _without(headers, *names)
        auth = _get(headers, "Authorization")
        if auth is None or not auth.startswith(_ALGORITHM):
            return headers  # unsigned, or presigned (query auth signs only host)
        if self._credentials is None:
            raise FaultProxyError("re-signing a request needs access_key and secret_key")
        return _resign(target, method, headers, present, *self._credentials)

    def _connect_upstream(self) -> _Conn:
        sock = socket.create_connection(self.upstream, timeout=30)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._track(sock)
        return _Conn(sock)

    def _close(self, conn: _Conn | None) -> None:
        if conn is not None:
            self._untrack(conn.sock)
            conn.close()

    def _serve_connection(self, sock: socket.socket) -> None:
        session = _Session(_Conn(sock))
        try:
            while not self._stopping:
                head = _read_head(session.client)
                if head is None:
                    return
                with self._lock:
                    self._active += 1
                try:
                    keep = self._exchange(session, *head)
                finally:
                    with self._settled:
                        self._active -= 1
                        self._settled.notify_all()
                if not keep:
                    return
        except (_Dropped, OSError, ValueError):
            return
        finally:
            self._close(session.upstream)
            self._close(session.client)

    def _exchange(self, session: _Session, start: str, headers: Headers) -> bool:
        """Handle one request; return whether to keep the client connection open."""
        client = session.client
        method, target, _version = start.split(" ", 2)
        method = method.upper()
        split = urlsplit(target)
        path = unquote(split.path)
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        rules = self._take_rules(method, path, query)
        client_close = _wants_close(headers)
        requested_range = _get(headers, "Range")
        sent = 0

        def log(status: int | None, upstream_status: int | None) -> None:
            self._record(
                LoggedRequest(
                    method=method,
                    path=path,
                    query=query,
                    range=requested_range,
                    status=status,
                    upstream_status=upstream_status,
                    actions=tuple(r.action for r in rules),
                    body_bytes=sent,
                    time=time.time(),
                )
            )

        def first(*actions: Action) -> Rule | None:
            return next((r for r in rules if r.action in actions), None)

        expect = (_get(headers, "Expect") or "").lower() == "100-continue"
        if expect:
            # We answer the expectation ourselves and forward without it.
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            headers = _without(headers, "Expect")

        rule = first(*_ANSWERED_HERE)
        if rule is not None:
            _relay_body(client, headers, _discard, until_close=False)
            if rule.action is Action.DROP:
                log(None, None)
                raise _Dropped
            slow = rule.action is Action.SLOW_DOWN
            status = rule.status or (503 if slow else 500)
            code = rule.code or ("SlowDown" if slow else "InternalError")
            client.sendall(
                _error_response(
                    status, code, path, retry_after=rule.retry_after, close=client_close
                )
            )
            log(status, None)
            return not client_close

        if first(Action.IGNORE_RANGE) is not None:
            try:
                headers = self._strip_signed(target, method, headers, ("range", "if-range"))
            except FaultProxyError as e:
                # A test set-up mistake: answer with it rather than die in this thread.
                client.sendall(
                    _error_response(
                        500, "FaultProxyError", path, retry_after=None, close=True, message=str(e)
                    )
                )
                log(500, None)
                return False

        delay = first(Action.DELAY)
        if delay is not None:
            time.sleep(delay.seconds)

        if session.upstream is not None and not _alive(session.upstream):
            self._close(session.upstream)
            session.upstream = None
        if session.upstream is None:
            session.upstream = self._connect_upstream()
        upstream = session.upstream
        upstream.sendall(_head_bytes(start, headers))
        _relay_body(client, headers, upstream.sendall, until_close=False)

        resp = _read_head(upstream)
        while resp is not None and resp[0].split(" ")[1].startswith("1"):
            resp = _read_head(upstream)  # an interim response (we removed Expect)
        if resp is None:
            log(None, None)
            raise _Dropped  # the server closed without answering: so do we
        status_line, resp_headers = resp
        upstream_status = int(status_line.split(" ")[1])
        body_follows = not _no_body(method, upstream_status)
        upstream_close = _wants_close(resp_headers) or (
            body_follows
            and not _is_chunked(resp_headers)
            and not _get(resp_headers, "Content-Length")
        )

        rule = first(Action.ERROR_AFTER_FORWARD, Action.DROP_AFTER_FORWARD)
        if rule is not None:
            if body_follows:
                _relay_body(upstream, resp_headers, _discard, until_close=True)
            if upstream_close:
                self._close(upstream)
                session.upstream = None
            if rule.action is Action.DROP_AFTER_FORWARD:
                log(None, upstream_status)
                raise _Dropped
            status = rule.status or 503
            code = rule.code or ("SlowDown" if status == 503 else "InternalError")
            client.sendall(
                _error_response(
                    status, code, path, retry_after=rule.retry_after, close=client_close
                )
            )
            log(status, upstream_status)
            return not client_close

        server_headers = resp_headers
        close_after = client_close or upstream_close
        for rule in rules:
            if rule.action is Action.STRIP_ETAG:
                resp_headers = _without(resp_headers, "ETag")
            elif rule.action is Action.WEAK_ETAG:
                resp_headers = [
                    (k, f"W/{v}" if k.lower() == "etag" and not v.startswith("W/") else v)
                    for k, v in resp_headers
                ]
            elif rule.action is Action.STRIP_CONTENT_LENGTH:
                if body_follows and _get(resp_headers, "Content-Length") is not None:
                    # Without a length the body ends when the connection does.
                    close_after = True
                    resp_headers = [*_without(resp_headers, "Connection"), ("Connection", "close")]
                resp_headers = _without(resp_headers, "Content-Length")
            elif rule.action is Action.SET_HEADERS:
                resp_headers = [*_without(resp_headers, *rule.headers), *rule.headers.items()]

        truncate = first(Action.TRUNCATE_BODY)
        limit = truncate.after if truncate is not None and body_follows else None

        def to_client(data: bytes) -> None:
            nonlocal sent
            if limit is not None and sent + len(data) > limit:
                data = data[: limit - sent]
                client.sendall(data)
                sent += len(data)
                raise _Dropped
            client.sendall(data)
            sent += len(data)

        client.sendall(_head_bytes(status_line, resp_headers))
        if body_follows:
            # Framed by the server's headers, whatever we told the client.
            try:
                _relay_body(upstream, server_headers, to_client, until_close=True)
            except (_Dropped, OSError):
                # Cut here, or the client went away mid-body: logged with what it got.
                log(upstream_status, upstream_status)
                raise
        log(upstream_status, upstream_status)
        if upstream_close:
            self._close(upstream)
            session.upstream = None
        return not close_after


_ANSWERED_HERE = (Action.SLOW_DOWN, Action.ERROR, Action.DROP)
_AFTER_FORWARD = (Action.ERROR_AFTER_FORWARD, Action.DROP_AFTER_FORWARD)


_ALGORITHM = "AWS4-HMAC-SHA256"


def _resign(
    target: str, method: str, headers: Headers, removed: set[str], access_key: str, secret: str
) -> Headers:
    """Sign the request again (SigV4, header auth) without the ``removed`` headers,
    keeping its date, scope and payload hash."""
    fields = dict(
        part.strip().split("=", 1) for part in _headers_value(headers, "Authorization").split(",")
    )
    scope = fields[f"{_ALGORITHM} Credential"].split("/", 1)[1]
    signed = [h for h in fields["SignedHeaders"].split(";") if h not in removed]
    split = urlsplit(target)
    pairs = sorted(
        (quote(unquote(k), safe="-_.~"), quote(unquote(v), safe="-_.~"))
        for k, _, v in (p.partition("=") for p in split.query.split("&") if p)
    )
    canonical_headers = "".join(
        f"{name}:{' '.join(_headers_value(headers, name).split())}\n" for name in signed
    )
    canonical = "\n".join(
        [
            method,
            split.path or "/",
            "&".join(f"{k}={v}" for k, v in pairs),
            canonical_headers,
            ";".join(signed),
            _headers_value(headers, "x-amz-content-sha256"),
        ]
    )
    amz_date = _headers_value(headers, "x-amz-date")
    to_sign = "\n".join(
        [_ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{secret}".encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    auth = (
        f"{_ALGORITHM} Credential={access_key}/{scope}, "
        f"SignedHeaders={';'.join(signed)}, Signature={signature}"
    )
    return [*_without(headers, "Authorization"), ("Authorization", auth)]


def _headers_value(headers: Headers, name: str) -> str:
    """All values of header ``name``, joined by commas as SigV4 wants ('' if absent)."""
    lname = name.lower()
    return ",".join(v.strip() for k, v in headers if k.lower() == lname)


def _alive(conn: _Conn) -> bool:
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
