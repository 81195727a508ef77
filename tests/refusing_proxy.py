"""A forwarding proxy in front of a real server that behaves like a service without S3
checksums (Backblaze B2, older gateways): any ``x-amz-checksum-*`` request header is
answered 400 InvalidArgument "Unsupported header" (a HEAD: 400 without a body), and no
answer carries an ``x-amz-checksum-*`` header. Everything else is forwarded as it came,
so signatures stay valid."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

REFUSAL = (
    "<Error><Code>InvalidArgument</Code><Message>Unsupported header '{}' received for this "
    "API call.</Message></Error>"
)


class Refusals:
    """What the proxy refused (header names), in order."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.lock = threading.Lock()


def _handler(upstream: tuple[str, int], refusals: Refusals) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            named = [n for n in self.headers if n.lower().startswith("x-amz-checksum")]
            if named:
                with refusals.lock:
                    refusals.names.append(named[0].lower())
                text = b"" if self.command == "HEAD" else REFUSAL.format(named[0]).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)
                return
            conn = http.client.HTTPConnection(*upstream, timeout=60)
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    conn.putheader(name, value)
                conn.endheaders(body or None)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for name, value in resp.getheaders():
                    low = name.lower()
                    if low.startswith("x-amz-checksum") or low in (
                        "transfer-encoding",
                        "connection",
                    ):
                        continue
                    if low == "content-length":
                        continue
                    self.send_header(name, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(data)))
                else:
                    self.send_header("Content-Length", resp.getheader("Content-Length") or "0")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

    return Handler


@contextmanager
def refusing_proxy(upstream: str) -> Iterator[tuple[str, Refusals]]:
    """Start the proxy in front of ``upstream`` (http://host:port); yield its endpoint
    and the record of what it refused."""
    parts = urlsplit(upstream)
    assert parts.hostname is not None
    assert parts.port is not None
    refusals = Refusals()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler((parts.hostname, parts.port), refusals))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", refusals
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
