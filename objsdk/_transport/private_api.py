"""Every use of a private attribute of requests, urllib3 or http.client, in one place.

Each trick saves copies or system calls on the hot path, or lets another thread cut a
stalled request short. Each one sits behind a capability flag, computed at import from
what is actually there (``CHECKOUT`` on first use: it looks at requests, loaded only for
streamed answers and file bodies), with a public-API fallback that the callers take
automatically when the flag is off (non-Linux, TLS, an attribute missing in a newer release). Tests
switch each flag off to prove the fallback.

* ``WATCH``: urllib3's ``HTTPConnectionPool._make_request`` is wrapped so a
  :class:`Watch` learns the connection a request uses, and ``interrupt()`` can shut it
  down from another thread; the pools' connections check the watch once connected, for
  an interrupt that came before their socket existed. Fallback: interrupt only refuses
  further requests. The same pools send a request in absolute form (to an http proxy)
  with its URL as signed, where ``urlopen`` would collapse its ``.``/``..`` segments.
* ``RAW_FP``: ``urllib3.response.HTTPResponse._fp`` is http.client's response, whose
  ``readinto`` receives straight into the caller's buffer (urllib3's own goes through a
  temporary ``bytes``). Fallback: urllib3's ``read``/``readinto``.
* ``DIRECT_READS``: after http.client's buffer is drained, a plain-HTTP body of known
  length is read from the socket itself with ``MSG_WAITALL``, one system call per
  buffer. The socket must block for that, so the read timeout moves into the kernel as
  ``SO_RCVTIMEO`` (``struct timeval`` packed as two C longs: right on 64-bit Linux
  only). When the body is read whole the timeout is put back and http.client is told
  the body is done, so the connection returns to the pool.
* ``SO_RCVLOWAT`` (socket(7)) tells Linux how many bytes to gather before it wakes a
  direct receive: without it the reader wakes as each segment arrives, ``MSG_WAITALL``
  or not, three times per 256 KiB on loopback. The kernel compares the mark with what
  is queued, not with what the receive still lacks after copying part of it, so a mark
  is set only while at least that many body bytes remain beyond the receive (they
  arrive and reach it); near the body's end it is 1, as it is whenever the connection
  returns to the pool. Fallback: the mark stays at 1.
* ``INTERIM``: the pools' connections build http.client's response as a subclass that
  counts the status lines ``HTTPResponse._read_status`` reads and hands ``begin`` any
  interim answer (103 Early Hints too) as the 100 Continue it skips for as long as they
  come, and the subclass refuses the answer
  after more than :data:`~objsdk._transport.answer_head.MAX_INTERIM`. Fallback (or with
  ``WATCH`` off, whose pools these are): http.client reads interim answers without end,
  though it holds no more than one of them.
* ``CHECKOUT``: a connection is borrowed from requests' pool
  (``HTTPAdapter.get_connection_with_tls_context``, ``HTTPConnectionPool._get_conn`` /
  ``_put_conn``) to send a file body with ``socket.sendfile``. Fallback: the body is
  streamed through requests.
"""

from __future__ import annotations

import contextlib
import http.client
import math
import socket
import struct
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.poolmanager import PoolManager
from urllib3.response import BaseHTTPResponse

from objsdk import errors
from objsdk._core.sizes import RECEIVE_SLICE
from objsdk._transport.answer_head import MAX_INTERIM, HeadTooLarge

if TYPE_CHECKING:
    import requests
    from requests.adapters import HTTPAdapter

__all__ = [
    "CHECKOUT",
    "DIRECT_READS",
    "INTERIM",
    "LOWAT",
    "MAX_LOWAT",
    "MIN_LOWAT",
    "RAW_FP",
    "WATCH",
    "DirectSocket",
    "Watch",
    "checkin",
    "checkout",
    "http_client_response",
    "install_watched_pools",
    "watch",
]

WATCH = hasattr(HTTPConnectionPool, "_make_request")
RAW_FP = True  # checked per response: the attribute must hold an http.client response
DIRECT_READS = (
    sys.platform.startswith("linux")
    and struct.calcsize("l") == 8  # struct timeval is two 64-bit longs
    and hasattr(socket, "MSG_WAITALL")
    and hasattr(socket, "SO_RCVTIMEO")
)
INTERIM = hasattr(http.client.HTTPResponse, "_read_status")
LOWAT = DIRECT_READS and hasattr(socket, "SO_RCVLOWAT")
# The low-water marks a direct receive sets: at most a slice (what one receive asks
# for), and none below 64 KiB (one loopback segment: no wake-up saved).
MAX_LOWAT = RECEIVE_SLICE
MIN_LOWAT = 64 * 1024
CHECKOUT: bool  # see __getattr__


def __getattr__(name: str) -> Any:
    # CHECKOUT is computed on first use, not at import: it looks at requests' adapter,
    # and requests is loaded only with the streamed side of the transport
    # (objsdk._transport.streamed), which a file body's PUT, CHECKOUT's one user, needs.
    if name == "CHECKOUT":
        from requests.adapters import HTTPAdapter

        checkout = hasattr(HTTPAdapter, "get_connection_with_tls_context") and hasattr(
            HTTPConnectionPool, "_get_conn"
        )
        globals()["CHECKOUT"] = checkout
        return checkout
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- watch: interrupt another thread's request ------------------------------------------


class Watch:
    """Lets another thread cut short the requests of the thread that opened it.

    Read-ahead and download workers run inside a watch, so closing a reader (or a
    failure in another part) wakes a worker that is blocked on a stalled connection,
    whether it waits for headers or for the body.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: object | None = None
        self.interrupted = False
        self._done = False
        self._woken = threading.Event()

    def attach(self, conn: object) -> None:
        with self._lock:
            if self.interrupted:
                # Not an OSError: urllib3 would retry that; this must end the request.
                raise errors.Cancelled("request cancelled")
            self._conn = conn

    def connected(self) -> None:
        """This thread's connection has just got its socket. An interrupt that came while
        it was being made found no socket to shut down: it ends the request here."""
        with self._lock:
            if self.interrupted:
                raise errors.Cancelled("request cancelled")

    def detach(self, conn: object) -> None:
        """``conn`` went back to the pool: another thread may take it, so this watch
        must never shut it down."""
        with self._lock:
            if self._conn is conn:
                self._conn = None

    def interrupt(self) -> None:
        """Refuse further requests and shut down the connection in use (if any)."""
        with self._lock:
            self.interrupted = True
            conn, self._conn = (None if self._done else self._conn), None
        self._woken.set()
        sock = getattr(conn, "sock", None)
        if isinstance(sock, socket.socket):
            # shutdown() wakes a recv() blocked in another thread; close() would not.
            # The connection is still this thread's (a released one was detached), and
            # is never reused: its response is closed, not released.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True (at once) if interrupted meanwhile."""
        return self._woken.wait(seconds)

    def finish(self) -> None:
        with self._lock:
            self._done = True
            self._conn = None


_local = threading.local()


@contextlib.contextmanager
def watch() -> Iterator[Watch]:
    """Run this thread's requests under a :class:`Watch`."""
    w = Watch()
    previous = getattr(_local, "watch", None)
    _local.watch = w
    try:
        yield w
    finally:
        w.finish()
        _local.watch = previous


def current_watch() -> Watch | None:
    """The watch this thread runs under, if any."""
    w: Watch | None = getattr(_local, "watch", None)
    return w


def _connected() -> None:
    # urllib3 connects inside the request, after the watch has learnt the connection.
    w = current_watch()
    if w is not None:
        w.connected()


class _BoundedResponse(http.client.HTTPResponse):
    """http.client's response, skipping every interim answer and refusing an answer
    after more than MAX_INTERIM of them (``INTERIM``)."""

    _status_lines = 0

    def _read_status(self) -> Any:
        self._status_lines += 1
        if self._status_lines > MAX_INTERIM + 1:
            raise HeadTooLarge(f"more than {MAX_INTERIM} interim answers")
        version, status, reason = cast(Any, super())._read_status()
        # Every 1xx but 101 is interim (RFC 9110 §15.2): 103 Early Hints from a CDN or
        # proxy in front of the service is followed by the answer itself. http.client
        # skips only 100; told 100, ``begin`` skips the fields of any of them.
        if 100 < status < 200 and status != 101:
            status = http.client.CONTINUE
        return version, status, reason


_RESPONSE = _BoundedResponse if INTERIM else http.client.HTTPResponse


class _WatchedConnection(HTTPConnection):
    response_class = _RESPONSE

    def connect(self) -> None:
        super().connect()
        _connected()


class _WatchedHTTPSConnection(HTTPSConnection):
    response_class = _RESPONSE

    def connect(self) -> None:
        super().connect()
        _connected()


class _WatchedPool(HTTPConnectionPool):
    ConnectionCls: type[HTTPConnection] = _WatchedConnection

    def urlopen(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if self.proxy is None or url.startswith("/"):
            return super().urlopen(method, url, *args, **kwargs)
        # The absolute form, to an http proxy: urlopen would send the URL with its '.'
        # and '..' segments collapsed (parse_url, RFC 3986 §5.2.4), another key than
        # the one signed. _make_request sends it as it came.
        _local.target = url
        try:
            return super().urlopen(method, url, *args, **kwargs)
        finally:
            _local.target = None

    def _make_request(self, conn: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        w = current_watch()
        if w is not None:
            w.attach(conn)
        target = getattr(_local, "target", None)
        return super()._make_request(conn, method, target or url, *args, **kwargs)

    def _put_conn(self, conn: Any) -> None:
        w = current_watch()
        if w is not None:
            w.detach(conn)
        super()._put_conn(conn)


class _WatchedHTTPSPool(_WatchedPool, HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


def install_watched_pools(manager: PoolManager) -> None:
    """Make the pools of ``manager`` (an adapter's pool manager, or one of its proxy
    managers) report their connections to this thread's watch."""
    if WATCH:
        manager.pool_classes_by_scheme = {
            "http": _WatchedPool,
            "https": _WatchedHTTPSPool,
        }


def close_pooled_sockets(adapter: HTTPAdapter) -> None:
    """Close the sockets of ``adapter``'s idle pooled connections, taking none of
    urllib3's locks: in a forked child, a parent thread may have held one at the fork.
    (``PoolManager.pools`` is a ``RecentlyUsedContainer`` over ``_container``; a pool's
    idle connections wait in the ``LifoQueue`` ``pool``, whose items are in ``queue``;
    the proxy managers, one per proxy, are in the adapter's ``proxy_manager``.)"""
    managers = [adapter.poolmanager, *getattr(adapter, "proxy_manager", {}).values()]
    pools = [
        pool
        for manager in managers
        for pool in list(getattr(getattr(manager, "pools", None), "_container", {}).values())
    ]
    for pool in pools:
        for conn in list(getattr(getattr(pool, "pool", None), "queue", ())):
            sock = getattr(conn, "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()


# -- http.client's response under urllib3's ---------------------------------------------


def http_client_response(raw: BaseHTTPResponse) -> http.client.HTTPResponse | None:
    """http.client's response inside urllib3's, if this urllib3 has one there."""
    if not RAW_FP:
        return None
    fp = getattr(raw, "_fp", None)
    return fp if isinstance(fp, http.client.HTTPResponse) else None


class DirectSocket:
    """Reads the rest of a plain-HTTP body straight from the socket (see ``DIRECT_READS``).

    Built by :meth:`take` once http.client's buffer is drained; ``left`` is the number of
    body bytes still on the wire. :meth:`done` hands the connection back in a reusable
    state once they have all been read.
    """

    def __init__(self, sock: socket.socket, fp: http.client.HTTPResponse, left: int) -> None:
        self.sock = sock
        self._fp = fp
        self.left = left
        self._timeout = sock.gettimeout()
        self._lowat = 1  # the socket's SO_RCVLOWAT (1: the kernel's default)
        if self._timeout:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(self._timeout))
        sock.settimeout(None)  # blocking: MSG_WAITALL then fills the whole buffer

    @staticmethod
    def eligible(raw: BaseHTTPResponse, fp: http.client.HTTPResponse | None) -> bool:
        """Can this response's body be read directly? Plain HTTP, known length."""
        if not DIRECT_READS or fp is None or fp.fp is None or fp.chunked or fp.length is None:
            return False
        sock = getattr(getattr(raw, "connection", None), "sock", None)
        return type(sock) is socket.socket  # not an SSLSocket

    @classmethod
    def take(
        cls, raw: BaseHTTPResponse, fp: http.client.HTTPResponse, view: memoryview
    ) -> tuple[DirectSocket, int]:
        """Drain http.client's buffer into ``view`` (one ``readinto1``: afterwards it
        stays empty); return the direct reader and how many bytes landed."""
        assert fp.fp is not None
        assert fp.length is not None
        length = fp.length
        n = fp.fp.readinto1(view[:length])
        sock = raw.connection.sock  # type: ignore[union-attr]
        return cls(sock, fp, length - n), n

    @classmethod
    def take_bytes(
        cls, raw: BaseHTTPResponse, fp: http.client.HTTPResponse, n: int
    ) -> tuple[DirectSocket, bytes]:
        """Like :meth:`take`, returning the drained bytes (at most ``n``)."""
        assert fp.fp is not None
        assert fp.length is not None
        length = fp.length
        data = fp.fp.read1(min(n, length))
        sock = raw.connection.sock  # type: ignore[union-attr]
        return cls(sock, fp, length - len(data)), data

    def _wake_at(self, want: int) -> None:
        """Set the low-water mark for a receive of ``want`` bytes waiting for them all
        (see ``SO_RCVLOWAT`` above; 0: a receive that takes what is there)."""
        lowat = min(want, MAX_LOWAT, self.left - want)
        if lowat < MIN_LOWAT or not LOWAT:
            lowat = 1
        if lowat != self._lowat:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, lowat)
            self._lowat = lowat

    def recv_into(self, view: memoryview, *, whole: bool) -> int:
        want = min(len(view), self.left)
        if want == 0:
            return 0
        self._wake_at(want if whole else 0)
        n = self.sock.recv_into(view, want, socket.MSG_WAITALL if whole else 0)
        self.left -= n
        if n == 0:
            raise errors.ProtocolError(f"connection closed {self.left} bytes before the end")
        if self.left == 0:
            self.done()
        return n

    def recv(self, n: int, *, whole: bool) -> bytes:
        want = min(n, self.left)
        if want == 0:
            return b""
        self._wake_at(want if whole else 0)
        data = self.sock.recv(want, socket.MSG_WAITALL if whole else 0)
        self.left -= len(data)
        if not data:
            raise errors.ProtocolError(f"connection closed {self.left} bytes before the end")
        if self.left == 0:
            self.done()
        return data

    def done(self) -> None:
        """The body is read whole: restore the socket and close http.client's response,
        so urllib3 can put the connection back in its pool."""
        self.restore()
        self._fp.length = 0
        self._fp._close_conn()  # type: ignore[attr-defined]  # as http.client does at a body's end

    def restore(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_at(0)  # http.client reads the next answer's head a line at a time
            if self._timeout:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(0))
            self.sock.settimeout(self._timeout)


def _timeval(seconds: float) -> bytes:
    """``struct timeval`` for ``seconds``; a positive timeout never rounds to 0 (which
    the kernel reads as "no timeout")."""
    whole = int(seconds)
    micros = math.ceil((seconds - whole) * 1_000_000)
    if micros >= 1_000_000:
        whole, micros = whole + 1, 0
    if seconds > 0 and whole == 0 and micros == 0:
        micros = 1
    return struct.pack("ll", whole, micros)


# -- borrowing a pooled connection --------------------------------------------------------


def checkout(
    adapter: HTTPAdapter, verify: bool | str, prepared: requests.PreparedRequest
) -> tuple[HTTPConnectionPool, HTTPConnection]:
    """A connection from ``adapter``'s pool for ``prepared.url`` (see ``CHECKOUT``)."""
    assert prepared.url is not None
    pool = adapter.get_connection_with_tls_context(prepared, verify=verify)
    if not isinstance(pool, HTTPConnectionPool):  # pragma: no cover
        raise TypeError(f"unexpected connection pool {type(pool).__name__}")
    conn = pool._get_conn()
    if not isinstance(conn, HTTPConnection):  # pragma: no cover - urllib3 on emscripten
        pool._put_conn(conn)
        raise TypeError(f"unexpected connection type {type(conn).__name__}")
    return pool, conn


def checkin(pool: HTTPConnectionPool, conn: HTTPConnection, *, reusable: bool) -> None:
    """Give a borrowed connection back; one in an unknown state is closed first."""
    if reusable:
        pool._put_conn(conn)
    else:
        conn.close()
        pool._put_conn(None)  # frees its slot
