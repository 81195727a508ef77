"""Requests through a proxy: the CONNECT tunnel, and failures that name the proxy.

Which proxy a URL goes through is decided by :class:`objsdk._core.proxies.Proxies`. How:

* to an ``http://`` origin, each request goes to the proxy in absolute form (RFC 9112
  §3.2.2: ``GET http://host:port/path HTTP/1.1``) with ``Proxy-Authorization``, as
  urllib3 sends it; the authority is the signed ``Host``, so a proxy that rebuilds
  ``Host`` from it (RFC 9112 §3.2.2) sends what the signature covers;
* to an ``https://`` origin, through a tunnel (RFC 9110 §9.3.6): :func:`open_tunnel`
  sends ``CONNECT host:port`` once per connection, then TLS runs to the origin inside
  it, so the proxy sees neither the requests nor the answers.

A proxy that cannot be reached, or that refuses (a 407, a 403 to the tunnel), is a
:class:`ProxyFailure`, which :mod:`objsdk._transport.translate` turns into a
:class:`~objsdk.errors.ConnectError` (a refusal: :class:`~objsdk.errors.ProxyError`)
with its message: the proxy's URL without credentials, and what to do.
"""

from __future__ import annotations

import re
import socket
import ssl

import urllib3.exceptions

from objsdk._core import failure_chain
from objsdk._core.proxies import Proxy
from objsdk._transport.tls import handshake

__all__ = ["ProxyFailure", "failure_of", "open_tunnel", "refused", "through", "unreachable"]

# http.client's words for a tunnel the proxy refused (HTTPConnection._tunnel).
_TUNNEL_REFUSED = re.compile(r"Tunnel connection failed: (\d{3}) ?([\x20-\x7e]*)")
# A status line (RFC 9112 §4); the reason phrase is shown, so only printable ASCII of it.
_STATUS = re.compile(rb"HTTP/\d\.\d (\d{3})(?: ([\x20-\x7e]*))?\r?\n")
_MAX_HEAD = 64 * 1024


class ProxyFailure(urllib3.exceptions.ProxyError):
    """The proxy could not be reached, or refused to relay the request. ``str()`` names
    the proxy by its URL without credentials. ``error``: the failure to reach it (a
    connect error, retried as one), or None for a refusal (not retried)."""

    def __init__(self, proxy: Proxy, what: str, error: Exception | None = None) -> None:
        message = f"the proxy {proxy.url} (from {proxy.variable}) {what}"
        super().__init__(message, error)  # type: ignore[arg-type]  # None: a refusal
        self.proxy = proxy
        self.refused = error is None

    def __str__(self) -> str:
        return str(self.args[0])


def refused(proxy: Proxy, status: int, reason: str, what: str = "the request") -> ProxyFailure:
    """The proxy's refusal (``status`` and ``reason`` of its answer) of ``what``. A 5xx
    (the proxy could not reach the server, or is overloaded) fails like a connect error
    and is retried as one: nothing reached the server."""
    text = f"refused {what}: {status} {reason[:80]}".rstrip()
    if status >= 500:
        cause = urllib3.exceptions.NewConnectionError(None, text)  # type: ignore[arg-type]
        return ProxyFailure(proxy, text, cause)
    if status == 407:
        if proxy.authorization is None:
            text += (
                f"; it wants a user and password: give them in {proxy.variable} "
                "(http://user:password@host:port)"
            )
        else:
            text += f"; it did not accept the user and password given in {proxy.variable}"
    return ProxyFailure(proxy, text)


def unreachable(proxy: Proxy, error: Exception, cause: str) -> ProxyFailure:
    """The proxy could not be reached (``cause``: the innermost failure's type)."""
    what = f"cannot be reached ({cause})"
    if cause == "SSLCertVerificationError":
        what += (
            "; its certificate is not trusted here: name the CA bundle that signed it "
            "(verify=, AWS_CA_BUNDLE)"
        )
    return ProxyFailure(proxy, what, error)


def failure_of(proxy: Proxy, error: Exception) -> ProxyFailure:
    """What urllib3's ``ProxyError`` (as requests raises it) says of ``proxy``: the
    tunnel refused with a status, else the proxy not reached, named by the innermost
    failure's type (its message may hold the request's URL)."""
    inside = _inside(error)
    for inner in inside:
        match = _TUNNEL_REFUSED.match(str(inner)) if type(inner) is OSError else None
        if match is not None:
            return refused(proxy, int(match[1]), match[2], "the tunnel")
    return unreachable(proxy, error, type(inside[-1]).__name__)


def _inside(error: BaseException) -> list[BaseException]:
    """``error`` and what it wraps, outermost first: urllib3's ``reason``, requests'
    wrapped first argument, causes and contexts, short of the exception the caller was
    handling (:mod:`objsdk._core.failure_chain`)."""
    running = failure_chain.running_frames()
    found: list[BaseException] = []
    stack = [error]
    while stack:
        e = stack.pop(0)
        if any(e is f for f in found):
            continue
        found.append(e)
        reason = getattr(e, "reason", None)
        if isinstance(reason, BaseException):
            stack.append(reason)
        stack += [a for a in e.args if isinstance(a, BaseException)]
        stack += failure_chain.links(e, running)
    return found


def through(
    sock: socket.socket, proxy: Proxy, tunnel: str | None, context: ssl.SSLContext
) -> socket.socket:
    """``sock``, connected to ``proxy``, made ready for an origin's requests: TLS to an
    https proxy (verified with ``context``), then a tunnel to ``tunnel`` (``host:port``;
    None for an http origin, whose requests go to the proxy as they are). Failing to
    get the tunnel is failing to reach the proxy: nothing was sent to the origin."""
    if proxy.scheme == "https":
        try:
            sock = handshake(context, sock, proxy.host)
        except urllib3.exceptions.HTTPError as e:
            raise unreachable(proxy, e, type(e.__cause__ or e).__name__) from e
    if tunnel is not None:
        try:
            open_tunnel(sock, tunnel, proxy)
        except TimeoutError as e:
            error: Exception = urllib3.exceptions.ConnectTimeoutError(None, "CONNECT timed out")
            raise unreachable(proxy, error, type(e).__name__) from e
        except OSError as e:
            error = urllib3.exceptions.NewConnectionError(
                None,  # type: ignore[arg-type]
                f"failed to establish a tunnel: {type(e).__name__}",
            )
            raise unreachable(proxy, error, type(e).__name__) from e
    return sock


def open_tunnel(sock: socket.socket, authority: str, proxy: Proxy) -> None:
    """Ask the proxy on ``sock`` for a tunnel to ``authority`` (``host:port``, an IPv6
    host in brackets) and read its answer: a 2xx opens it (RFC 9110 §9.3.6), anything
    else is :func:`refused`. Timeouts and broken connections propagate as they are."""
    lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
    if proxy.authorization is not None:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    data = b""
    while b"\r\n\r\n" not in data and b"\n\n" not in data:
        if len(data) > _MAX_HEAD:
            raise urllib3.exceptions.ProtocolError(f"the proxy {proxy.url} sent an endless head")
        chunk = sock.recv(4096)
        if not chunk:
            raise urllib3.exceptions.ProtocolError(
                f"the proxy {proxy.url} closed the connection instead of answering CONNECT"
            )
        data += chunk
    match = _STATUS.match(data)
    if match is None:
        raise urllib3.exceptions.ProtocolError(
            f"the proxy {proxy.url} answered CONNECT with no status"
        )
    status = int(match[1])
    if not 200 <= status < 300:
        raise refused(proxy, status, (match[2] or b"").decode("ascii"), "the tunnel")
    ends = [i + n for i, n in ((data.find(b"\r\n\r\n"), 4), (data.find(b"\n\n"), 2)) if i >= 0]
    if data[min(ends) :]:
        # Nothing may come before the TLS handshake the client starts.
        raise urllib3.exceptions.ProtocolError(f"the proxy {proxy.url} sent bytes into the tunnel")
