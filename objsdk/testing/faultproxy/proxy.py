"""The proxy server: a listener thread, one thread per client connection, and the
exchange of one request (rules chosen, faults applied, bodies streamed both ways)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from objsdk.testing.lifecycle import StartStop

from .http import (
    Conn,
    Headers,
    discard,
    error_response,
    get_header,
    has_no_body,
    head_bytes,
    is_alive,
    is_chunked,
    read_head,
    relay_body,
    wants_close,
    without,
)
from .rules import (
    ANSWERED_HERE,
    NON_MD5_PREFIX,
    Action,
    FaultProxyError,
    LoggedRequest,
    Rule,
    checksum_header,
    choose_rules,
)
from .sigv4 import ALGORITHM, resign

__all__ = ["FaultProxy", "Refusal"]

_JOIN_TIMEOUT = 5.0

#: ``refuse(method, path, query, headers)``: ``(status, code, message)`` to answer the
#: request with instead of forwarding it, or None.
Refusal = Callable[[str, str, Mapping[str, str], Headers], "tuple[int, str, str] | None"]


class _Dropped(Exception):
    """The client connection is to be closed now, without a reply."""


@dataclass
class _Session:
    """One client connection and the upstream connection that serves it."""

    client: Conn
    upstream: Conn | None = None


class FaultProxy(StartStop):
    """A reverse proxy to ``upstream`` (``http://host:port``) on a free loopback port.

    Start and stop it with ``with`` (or :meth:`start`/:meth:`stop`); point clients at
    :attr:`endpoint`. Every matching rule that is not used up applies (see
    :func:`~objsdk.testing.faultproxy.rules.choose_rules`
    for the combinations), in the order added. Thread safe.
    """

    name = "FaultProxy"
    error = FaultProxyError

    def __init__(
        self,
        upstream: str,
        *,
        host: str = "127.0.0.1",
        access_key: str | None = None,
        secret_key: str | None = None,
        refuse: Refusal | None = None,
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
        #: Asked first about every request: an answer ``(status, code, message)`` is
        #: sent instead of forwarding it (an ``ExpiredToken`` for credentials past the
        #: expiry a test declared, say).
        self.refuse = refuse
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
        return self._http_url()

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
        are the ones ``SET_HEADERS`` sets, and the ones ``ERROR`` and ``SLOW_DOWN`` add
        to their answer (``{"x-amz-bucket-region": "eu-west-1"}`` with a 301, say); an
        answer to a HEAD has no body; ``after`` is where ``TRUNCATE_BODY`` cuts
        and which body byte ``FLIP_BYTE`` flips;
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

    def _take_rules(
        self, method: str, path: str, query: Mapping[str, str], headers: Headers
    ) -> list[Rule]:
        """The rules that apply to this request, their hits counted (see
        :func:`~objsdk.testing.faultproxy.rules.choose_rules`)."""
        with self._lock:
            return choose_rules(self._rules, method, path, query, headers)

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
        headers = without(headers, *names)
        auth = get_header(headers, "Authorization")
        if auth is None or not auth.startswith(ALGORITHM):
            return headers  # unsigned, or presigned (query auth signs only host)
        if self._credentials is None:
            raise FaultProxyError("re-signing a request needs access_key and secret_key")
        return resign(target, method, headers, present, *self._credentials)

    def _real_etags(self, target: str, method: str, headers: Headers) -> Headers:
        """``If-Match``/``If-None-Match`` with NON_MD5_ETAG's rewriting undone (re-signed
        if they were signed)."""
        changed: Headers = []
        for name, value in headers:
            if name.lower() in ("if-match", "if-none-match"):
                value = value.replace(f'"{NON_MD5_PREFIX}', '"')
            changed.append((name, value))
        if changed == headers:
            return headers
        auth = get_header(changed, "Authorization")
        if auth is None or not auth.startswith(ALGORITHM):
            return changed
        if self._credentials is None:
            raise FaultProxyError("re-signing a request needs access_key and secret_key")
        return resign(target, method, changed, set(), *self._credentials)

    def _connect_upstream(self) -> Conn:
        sock = socket.create_connection(self.upstream, timeout=30)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._track(sock)
        return Conn(sock)

    def _close(self, conn: Conn | None) -> None:
        if conn is not None:
            self._untrack(conn.sock)
            conn.close()

    def _serve_connection(self, sock: socket.socket) -> None:
        session = _Session(Conn(sock))
        try:
            while not self._stopping:
                head = read_head(session.client)
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
        rules = self._take_rules(method, path, query, headers)
        client_close = wants_close(headers)
        requested_range = get_header(headers, "Range")
        sent = 0
        started = time.time()
        received = 0

        def from_client(sink: Callable[[bytes], None]) -> Callable[[bytes], None]:
            def take(data: bytes) -> None:
                nonlocal received
                received += len(data)
                sink(data)

            return take

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
                    started=started,
                    request_bytes=received,
                )
            )

        def first(*actions: Action) -> Rule | None:
            return next((r for r in rules if r.action in actions), None)

        expect = (get_header(headers, "Expect") or "").lower() == "100-continue"
        if expect:
            # We answer the expectation ourselves and forward without it.
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            headers = without(headers, "Expect")

        refused = None if self.refuse is None else self.refuse(method, path, query, headers)
        if refused is not None:
            relay_body(client, headers, discard, until_close=False)
            status, code, message = refused
            client.sendall(
                error_response(
                    status,
                    code,
                    path,
                    retry_after=None,
                    close=client_close,
                    message=message,
                    bodiless=method == "HEAD",
                )
            )
            log(status, None)
            return not client_close

        rule = first(*ANSWERED_HERE)
        if rule is not None:
            relay_body(client, headers, from_client(discard), until_close=False)
            if rule.action is Action.DROP:
                log(None, None)
                raise _Dropped
            if rule.action is Action.REJECT_CHECKSUM_HEADERS:
                # Backblaze B2's words for a header it does not implement.
                name = checksum_header(headers)
                message = f"Unsupported header '{name}' received for this API call."
                client.sendall(
                    error_response(
                        400,
                        "InvalidArgument",
                        path,
                        retry_after=None,
                        close=client_close,
                        message=message,
                    )
                )
                log(400, None)
                return not client_close
            slow = rule.action is Action.SLOW_DOWN
            status = rule.status or (503 if slow else 500)
            code = rule.code or ("SlowDown" if slow else "InternalError")
            client.sendall(
                error_response(
                    status,
                    code,
                    path,
                    retry_after=rule.retry_after,
                    close=client_close,
                    extra=rule.headers,
                    bodiless=method == "HEAD",
                )
            )
            log(status, None)
            return not client_close

        strip: tuple[str, ...] = ()
        if first(Action.IGNORE_RANGE) is not None:
            strip += ("range", "if-range")
        if first(Action.IGNORE_IF_MATCH) is not None:
            strip += ("if-match",)
        if strip or first(Action.NON_MD5_ETAG) is not None:
            try:
                headers = self._strip_signed(target, method, headers, strip)
                if first(Action.NON_MD5_ETAG) is not None:
                    headers = self._real_etags(target, method, headers)
            except FaultProxyError as e:
                # A test set-up mistake: answer with it rather than die in this thread.
                client.sendall(
                    error_response(
                        500, "FaultProxyError", path, retry_after=None, close=True, message=str(e)
                    )
                )
                log(500, None)
                return False

        delay = first(Action.DELAY)
        if delay is not None:
            time.sleep(delay.seconds)

        if session.upstream is not None and not is_alive(session.upstream):
            self._close(session.upstream)
            session.upstream = None
        if session.upstream is None:
            session.upstream = self._connect_upstream()
        upstream = session.upstream
        upstream.sendall(head_bytes(start, headers))
        try:
            relay_body(client, headers, from_client(upstream.sendall), until_close=False)
        except OSError:
            log(None, None)  # the client went away mid-body: logged with what arrived
            raise

        resp = read_head(upstream)
        while resp is not None and resp[0].split(" ")[1].startswith("1"):
            resp = read_head(upstream)  # an interim response (we removed Expect)
        if resp is None:
            log(None, None)
            raise _Dropped  # the server closed without answering: so do we
        status_line, resp_headers = resp
        upstream_status = int(status_line.split(" ")[1])
        body_follows = not has_no_body(method, upstream_status)
        upstream_close = wants_close(resp_headers) or (
            body_follows
            and not is_chunked(resp_headers)
            and not get_header(resp_headers, "Content-Length")
        )

        rule = first(Action.ERROR_AFTER_FORWARD, Action.DROP_AFTER_FORWARD)
        if rule is not None:
            if body_follows:
                relay_body(upstream, resp_headers, discard, until_close=True)
            if upstream_close:
                self._close(upstream)
                session.upstream = None
            if rule.action is Action.DROP_AFTER_FORWARD:
                log(None, upstream_status)
                raise _Dropped
            status = rule.status or 503
            code = rule.code or ("SlowDown" if status == 503 else "InternalError")
            client.sendall(
                error_response(status, code, path, retry_after=rule.retry_after, close=client_close)
            )
            log(status, upstream_status)
            return not client_close

        server_headers = resp_headers
        close_after = client_close or upstream_close
        for rule in rules:
            if rule.action is Action.STRIP_ETAG:
                resp_headers = without(resp_headers, "ETag")
            elif rule.action is Action.WEAK_ETAG:
                resp_headers = [
                    (k, f"W/{v}" if k.lower() == "etag" and not v.startswith("W/") else v)
                    for k, v in resp_headers
                ]
            elif rule.action is Action.STRIP_CONTENT_LENGTH:
                if body_follows and get_header(resp_headers, "Content-Length") is not None:
                    # Without a length the body ends when the connection does.
                    close_after = True
                    resp_headers = [*without(resp_headers, "Connection"), ("Connection", "close")]
                resp_headers = without(resp_headers, "Content-Length")
            elif rule.action is Action.SET_HEADERS:
                resp_headers = [*without(resp_headers, *rule.headers), *rule.headers.items()]
            elif rule.action is Action.STRIP_CHECKSUMS:
                resp_headers = [
                    (k, v) for k, v in resp_headers if not k.lower().startswith("x-amz-checksum-")
                ]
            elif rule.action is Action.NON_MD5_ETAG:
                resp_headers = [
                    (k, _non_md5(v) if k.lower() == "etag" else v) for k, v in resp_headers
                ]

        truncate = first(Action.TRUNCATE_BODY)
        limit = truncate.after if truncate is not None and body_follows else None
        flip = first(Action.FLIP_BYTE)
        flip_at = flip.after if flip is not None and body_follows else None

        def to_client(data: bytes) -> None:
            nonlocal sent
            if flip_at is not None and sent <= flip_at < sent + len(data):
                i = flip_at - sent
                data = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1 :]
            if limit is not None and sent + len(data) > limit:
                data = data[: limit - sent]
                client.sendall(data)
                sent += len(data)
                raise _Dropped
            client.sendall(data)
            sent += len(data)

        client.sendall(head_bytes(status_line, resp_headers))
        if body_follows:
            # Framed by the server's headers, whatever we told the client.
            try:
                relay_body(upstream, server_headers, to_client, until_close=True)
            except (_Dropped, OSError):
                # Cut here, or the client went away mid-body: logged with what it got.
                log(upstream_status, upstream_status)
                raise
        log(upstream_status, upstream_status)
        if upstream_close:
            self._close(upstream)
            session.upstream = None
        return not close_after


def _non_md5(etag: str) -> str:
    """``"x"`` as NON_MD5_ETAG sends it: ``"nomd5-x"`` (``W/`` kept)."""
    prefix = "W/" if etag.startswith("W/") else ""
    rest = etag.removeprefix("W/")
    if rest.startswith('"') and not rest.startswith(f'"{NON_MD5_PREFIX}'):
        rest = f'"{NON_MD5_PREFIX}{rest[1:]}'
    return prefix + rest
