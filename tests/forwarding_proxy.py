"""A small forwarding HTTP proxy for tests, recording what it relays.

It takes what a corporate proxy takes: requests in absolute form (``GET
http://host:port/path HTTP/1.1``, RFC 9112 §3.2.2), forwarded to that origin with the
hop-by-hop fields dropped, and ``CONNECT host:port`` (RFC 9110 §9.3.6), answered 200 and
relayed byte for byte both ways. With ``credentials`` it answers 407 with
``Proxy-Authenticate`` to a request or CONNECT whose ``Proxy-Authorization`` is not
theirs. With ``tls`` (a server certificate and key) it is an https proxy. Every request
it saw is in :attr:`ForwardingProxy.seen`, in order, as a :class:`Relayed`.

::

    with ForwardingProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        ...
        assert [r.method for r in proxy.seen] == ["PUT", "GET"]
"""

from __future__ import annotations

import base64
import http.client
import select
import socket
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

# RFC 9110 §7.6.1: fields meant for the next hop only, never forwarded.
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


@dataclass(frozen=True)
class Relayed:
    """One request the proxy received: its method, its target as sent (an absolute
    URL, or ``host:port`` for CONNECT), its Host field, and whether it carried
    credentials the proxy accepted (``authorized``; True when none are required)."""

    method: str
    target: str
    host: str | None
    proxy_authorization: str | None
    authorized: bool


class ForwardingProxy:
    """The proxy on a free loopback port (see the module docstring); a context manager."""

    def __init__(
        self,
        *,
        credentials: tuple[str, str] | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.seen: list[Relayed] = []
        self._lock = threading.Lock()
        expected = None
        if credentials is not None:
            pair = f"{credentials[0]}:{credentials[1]}".encode("latin-1")
            expected = "Basic " + base64.b64encode(pair).decode("ascii")
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, expected))
        self._server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (https with ``tls``), without credentials."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def url_with(self, user: str, password: str) -> str:
        """The URL with ``user:password@`` (as given: percent-encode what needs it)."""
        return f"{self.scheme}://{user}:{password}@127.0.0.1:{self.port}"

    def methods(self) -> list[str]:
        with self._lock:
            return [r.method for r in self.seen]

    def record(self, relayed: Relayed) -> None:
        with self._lock:
            self.seen.append(relayed)

    def __enter__(self) -> ForwardingProxy:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _handler(proxy: ForwardingProxy, expected: str | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _admit(self) -> bool:
            given = self.headers.get("Proxy-Authorization")
            authorized = expected is None or given == expected
            proxy.record(
                Relayed(self.command, self.path, self.headers.get("Host"), given, authorized)
            )
            if authorized:
                return True
            # Read what the request carries, so the connection stays usable.
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            text = b"proxy credentials required"
            self.send_response_only(407, "Proxy Authentication Required")
            self.send_header("Proxy-Authenticate", 'Basic realm="test proxy"')
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(text)
            return False

        def do_CONNECT(self) -> None:
            if not self._admit():
                return
            host, _, port = self.path.rpartition(":")
            try:
                upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=30)
            except OSError:
                self.send_response_only(502, "Bad Gateway")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response_only(200, "Connection established")
            self.end_headers()
            self.wfile.flush()
            _relay(self.connection, upstream)
            self.close_connection = True

        def _forward(self) -> None:
            if not self._admit():
                return
            parts = urlsplit(self.path)
            if parts.scheme != "http" or not parts.hostname:
                self.send_error(400, "absolute-form http URL expected")
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=60)
            try:
                conn.putrequest(self.command, target, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        conn.putheader(name, value)
                conn.endheaders(body)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response_only(resp.status, resp.reason)
                for name, value in resp.getheaders():
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                if self.command == "HEAD":
                    length_out = resp.getheader("Content-Length")
                    if length_out is not None:
                        self.send_header("Content-Length", length_out)
                else:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

    return Handler


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    socks = [a, b]
    try:
        while True:
            # Bytes a TLS socket has decrypted already do not show to select.
            pending = [s for s in socks if isinstance(s, ssl.SSLSocket) and s.pending()]
            readable = pending or select.select(socks, [], [], 60)[0]
            if not readable:
                return
            for sock in readable:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                (b if sock is a else a).sendall(data)
    finally:
        b.close()
