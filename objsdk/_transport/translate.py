"""requests/urllib3/socket failures as objsdk errors, in one place.

Every failure leaves the transport as a :class:`~objsdk.errors.TransportError` subclass
raised ``from`` the original (urllib3's ``response.py`` does the same for its own
layer). Messages name the operation, bucket and key; a failure to connect also names the
endpoint URL it was sent to, as ``aws`` does ("Could not connect to the endpoint URL"),
but only its scheme, host, port and path: never its query (a presigned URL's carries a
signature) or user info.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
import ssl
import sys
from collections.abc import Iterator, Mapping
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import urllib3.exceptions
from urllib3.exceptions import MaxRetryError

from objsdk import errors
from objsdk._core import failure_chain
from objsdk._transport.answer_head import past_bound
from objsdk._transport.proxy import ProxyFailure
from objsdk._version import __version__

__all__ = ["USER_AGENT", "endpoint_url", "is_requests_error", "translate", "translate_errors"]

USER_AGENT = f"objsdk/{__version__}"

# What a body read can raise when the connection breaks: socket errors (timeouts too),
# http.client's IncompleteRead for truncated or malformed chunked bodies, and the
# urllib3/requests wrappers of the same (requests' RequestException is an OSError).
_BROKEN = (
    OSError,
    http.client.HTTPException,
    urllib3.exceptions.HTTPError,
)


# The objsdk error for each requests/urllib3/socket failure, and its message
# ("{cause}": the innermost exception's type name; "{at}": the endpoint URL, where a
# connection could not be made). An exception takes the entry of the nearest class in
# its MRO, so the most specific entry wins whatever the order here (httpx's
# map_httpcore_exceptions picks the most derived match the same way); a class that
# inherits from two entries' classes gets an entry of its own.
_CONNECT = (errors.ConnectError, "cannot reach the server{at} ({cause})")
_TLS = (errors.ConnectError, "TLS error{at} ({cause})")
_CONNECT_TIMEOUT = (errors.Timeout, "connect timed out{at}")
_READ_TIMEOUT = (errors.Timeout, "read timed out")
_CONNECTION_BROKEN = (errors.ProtocolError, "connection broken ({cause})")
# Its own message: the proxy's URL without credentials, what it did, what to do.
_PROXY = (errors.ConnectError, "{proxy}")

_Entry = tuple[type[errors.TransportError], str]

# What to do about a TLS failure whose innermost cause is this, added to its message.
_REMEDIES = {
    "SSLCertVerificationError": (
        "the server's certificate is not trusted here: name the CA bundle that signed it "
        "(verify=, AWS_CA_BUNDLE)"
    ),
}

_MAP: dict[type[BaseException], _Entry] = {
    # A ConnectTimeoutError in urllib3, though "refused" is not a timeout.
    urllib3.exceptions.NewConnectionError: _CONNECT,
    urllib3.exceptions.ConnectTimeoutError: _CONNECT_TIMEOUT,
    urllib3.exceptions.ReadTimeoutError: _READ_TIMEOUT,
    TimeoutError: _READ_TIMEOUT,
    # SO_RCVTIMEO expiring on a blocking socket (direct reads): EAGAIN.
    BlockingIOError: _READ_TIMEOUT,
    urllib3.exceptions.SSLError: _TLS,
    ProxyFailure: _PROXY,
    urllib3.exceptions.ProtocolError: _CONNECTION_BROKEN,
    urllib3.exceptions.DecodeError: _CONNECTION_BROKEN,
    http.client.HTTPException: _CONNECTION_BROKEN,
    # Both a ConnectionResetError and an HTTPException: the server closed a connection
    # it had accepted (a kept-alive one, typically) before answering, so it is reachable.
    http.client.RemoteDisconnected: _CONNECTION_BROKEN,
    ConnectionError: _CONNECT,
    OSError: _CONNECTION_BROKEN,
}

# requests' own exceptions, by name: requests is imported only by the streamed side of
# the transport (objsdk._transport.streamed), so none of them exists before it is.
_REQUESTS_MAP: dict[str, _Entry] = {
    "ConnectTimeout": _CONNECT_TIMEOUT,
    "ReadTimeout": _READ_TIMEOUT,
    "SSLError": _TLS,
    "ChunkedEncodingError": _CONNECTION_BROKEN,
    "ContentDecodingError": _CONNECTION_BROKEN,
    "ConnectionError": _CONNECT,
}


def _requests_exceptions() -> Any:
    """``requests.exceptions`` once requests is loaded, else None."""
    return sys.modules.get("requests.exceptions")


def is_requests_error(e: BaseException, *names: str) -> bool:
    """Whether ``e`` is one of requests' exceptions ``names`` (``RequestException``
    for any); False while requests is not loaded, when none can have been raised."""
    module = _requests_exceptions()
    if module is None:
        return False
    classes = tuple(c for c in (getattr(module, n, None) for n in names) if c is not None)
    return bool(classes) and isinstance(e, classes)


def _entries() -> Mapping[type[BaseException], _Entry]:
    """``_MAP``, with requests' exceptions once requests is loaded."""
    module = _requests_exceptions()
    if module is None:
        return _MAP
    loaded = {getattr(module, name, None): entry for name, entry in _REQUESTS_MAP.items()}
    return {**_MAP, **{cls: entry for cls, entry in loaded.items() if cls is not None}}


def translate(
    e: BaseException,
    operation: str,
    bucket: str | None,
    key: str | None,
    url: str | None = None,
) -> errors.ObjsdkError:
    """The objsdk error for a requests/urllib3/socket failure: an objsdk error is
    returned as it is; anything else maps by its most specific class in ``_MAP``, and
    what none covers is a plain :class:`~objsdk.errors.TransportError`.

    The message names the operation, bucket and key; a failure to connect also the
    request's ``url`` as :func:`endpoint_url` gives it (never its query), the host a
    name lookup did not resolve, and why a TLS handshake most likely failed. A
    :class:`~objsdk.errors.ConnectError` carries the URL and that reason apart
    (``endpoint``, ``reason``), for a one-line report such as the CLI's.
    """
    if isinstance(e, errors.ObjsdkError):
        return e
    where: dict[str, Any] = {"operation": operation, "bucket": bucket, "key": key}
    entries = _entries()
    for cls in type(e).__mro__:
        mapped = entries.get(cls)
        if mapped is not None:
            if mapped is _CONNECT and _broke_once_connected(e):
                mapped = _CONNECTION_BROKEN
            error, message = mapped
            endpoint = endpoint_url(url) if url else None
            if mapped is _PROXY:
                refused = cast(ProxyFailure, e).refused
                kind = errors.ProxyError if refused else errors.ConnectError
                return kind(str(e), endpoint=endpoint, reason=str(e), **where)
            inner = _innermost(e)
            message = message.format(
                cause=type(inner).__name__,
                at=f' at the endpoint URL "{endpoint}"' if endpoint else "",
            )
            if past_bound(inner) and str(inner):
                # Which bound, in objsdk's or http.client's words, which hold no URL.
                message = f"answer past a bound ({inner})"
            reason = None
            if mapped is _CONNECT:
                if isinstance(inner, socket.gaierror):
                    reason = _unresolved(inner, endpoint)
                    message += f"; {reason}"
                else:
                    reason = _said(inner)
            if mapped is _TLS:
                reason = f"TLS error ({type(inner).__name__})"
                remedy = _tls_remedy(inner, endpoint)
                if remedy:
                    message += f"; {remedy}"
                    reason += f"; {remedy}"
            if error is errors.ConnectError:
                return errors.ConnectError(message, endpoint=endpoint, reason=reason, **where)
            return error(message, **where)
    return errors.TransportError(f"request failed ({type(e).__name__})", **where)


def _broke_once_connected(e: BaseException) -> bool:
    """Whether ``e`` is requests' ``ConnectionError`` around urllib3's ``ProtocolError``:
    requests' adapter raises it for a request or an answer that broke on a connection
    already made (a failure to make one is a ``NewConnectionError`` or a
    ``MaxRetryError``), which the wire raises as the ``ProtocolError`` itself."""
    return (
        is_requests_error(e, "ConnectionError")
        and bool(e.args)
        and isinstance(e.args[0], urllib3.exceptions.ProtocolError)
    )


def endpoint_url(url: str) -> str:
    """``url`` as a failure to connect names it: scheme, host, port and path, without
    its query (a presigned URL's holds a signature and the access key), fragment or
    user info."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path or "/", "", ""))


def _said(inner: BaseException) -> str:
    """What the system said of a failed connect (``Connection refused``), else the
    innermost exception's type name."""
    if isinstance(inner, OSError) and isinstance(inner.strerror, str) and inner.strerror:
        return inner.strerror
    return type(inner).__name__


def _unresolved(e: socket.gaierror, endpoint: str | None) -> str:
    """What a failed name lookup says: the host (from the endpoint) and the resolver's
    words (``Name or service not known``)."""
    host = urlsplit(endpoint).hostname if endpoint else None
    why = e.strerror or (str(e.args[1]) if len(e.args) > 1 else "")
    named = f"the host name {host!r}" if host else "the host name"
    return f"{named} could not be resolved" + (f" ({why})" if why else "")


# What OpenSSL says of a handshake answered in plain HTTP, whose first bytes ("HTTP/1.1")
# it read as a TLS record header: "wrong version number" (up to 3.1), "record layer
# failure" (3.2 on), "unknown protocol" (1.0). urllib3 reads the same phrases to tell an
# https:// proxy that speaks only HTTP (connection.py, _wrap_proxy_error).
_PLAIN_HTTP_PHRASES = ("wrong version number", "record layer failure", "unknown protocol")


def _tls_remedy(inner: BaseException, endpoint: str | None) -> str | None:
    """What to do about a TLS failure whose innermost cause is ``inner``."""
    remedy = _REMEDIES.get(type(inner).__name__)
    if remedy is not None:
        return remedy
    said = " ".join(re.split("[^a-z]+", str(inner).lower()))
    if isinstance(inner, ssl.SSLError) and any(p in said for p in _PLAIN_HTTP_PHRASES):
        likely = "the endpoint most likely answered plain HTTP to the TLS handshake"
        if endpoint and endpoint.startswith("https://"):
            origin = urlsplit(endpoint)._replace(scheme="http", path="")
            return f'{likely}: is it "{urlunsplit(origin)}"?'
        return f"{likely}: is it http://, not https://?"
    return None


@contextlib.contextmanager
def translate_errors(
    operation: str, bucket: str | None, key: str | None, url: str | None = None
) -> Iterator[None]:
    """Re-raise requests/urllib3/socket failures as objsdk errors (see :func:`translate`;
    ``url``: the request's)."""
    try:
        yield
    except errors.ObjsdkError:
        raise
    except (*_BROKEN, ValueError) as e:
        # requests keeps the PreparedRequest (and so the caller's body buffer) on its
        # exceptions; the objsdk error chained to it must not hold that buffer.
        if is_requests_error(e, "RequestException"):
            cast(Any, e).request = None
        # The frames it came through (urllib3's, http.client's, the wire's) hold the
        # request's head, signature and session token in their locals, which error
        # reporters show: cleared, the traceback kept.
        errors.drop_frame_locals(e)
        raise translate(e, operation, bucket, key, url) from e


def _innermost(e: BaseException) -> BaseException:
    """The innermost exception (up to the one the caller was handling: see
    :mod:`~objsdk._core.failure_chain`): its type name is informative and free of URLs."""
    running = failure_chain.running_frames()
    seen = e
    while True:
        inner = next(iter(failure_chain.links(seen, running)), None)
        if inner is None and seen.args and isinstance(seen.args[0], BaseException):
            inner = seen.args[0]
        if inner is None or inner is seen:
            break
        seen = inner
        if isinstance(seen, MaxRetryError) and seen.reason is not None:
            seen = seen.reason
    return seen


def _cause(e: BaseException) -> str:
    """The innermost exception's type name."""
    return type(_innermost(e)).__name__
