"""requests/urllib3/socket failures as objsdk errors, in one place.

Every failure leaves the transport as a :class:`~objsdk.errors.TransportError` subclass
raised ``from`` the original (urllib3's ``response.py`` does the same for its own
layer). Messages name the operation, bucket and key, never the URL: a presigned URL
carries a signature.
"""

from __future__ import annotations

import contextlib
import http.client
import sys
from collections.abc import Iterator, Mapping
from typing import Any, cast

import urllib3.exceptions
from urllib3.exceptions import MaxRetryError

from objsdk import errors
from objsdk._version import __version__

__all__ = ["USER_AGENT", "is_requests_error", "translate", "translate_errors"]

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
# ("{cause}": the innermost exception's type name). An exception takes the entry of the
# nearest class in its MRO, so the most specific entry wins whatever the order here
# (httpx's map_httpcore_exceptions picks the most derived match the same way); a class
# that inherits from two entries' classes gets an entry of its own.
_CONNECT = (errors.ConnectError, "cannot reach the server ({cause})")
_TLS = (errors.ConnectError, "TLS error ({cause})")
_CONNECT_TIMEOUT = (errors.Timeout, "connect timed out")
_READ_TIMEOUT = (errors.Timeout, "read timed out")
_CONNECTION_BROKEN = (errors.ProtocolError, "connection broken ({cause})")

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
    e: BaseException, operation: str, bucket: str | None, key: str | None
) -> errors.ObjsdkError:
    """The objsdk error for a requests/urllib3/socket failure: an objsdk error is
    returned as it is; anything else maps by its most specific class in ``_MAP``, and
    what none covers is a plain :class:`~objsdk.errors.TransportError`.

    The message names the operation, bucket and key, never the URL (a presigned URL
    would carry a signature).
    """
    if isinstance(e, errors.ObjsdkError):
        return e
    where: dict[str, Any] = {"operation": operation, "bucket": bucket, "key": key}
    entries = _entries()
    for cls in type(e).__mro__:
        mapped = entries.get(cls)
        if mapped is not None:
            error, message = mapped
            if "{cause}" in message:
                cause = _cause(e)
                message = message.format(cause=cause)
                if mapped is _TLS and cause in _REMEDIES:
                    message += f"; {_REMEDIES[cause]}"
            return error(message, **where)
    return errors.TransportError(f"request failed ({type(e).__name__})", **where)


@contextlib.contextmanager
def translate_errors(operation: str, bucket: str | None, key: str | None) -> Iterator[None]:
    """Re-raise requests/urllib3/socket failures as objsdk errors (see :func:`translate`)."""
    try:
        yield
    except errors.ObjsdkError:
        raise
    except (*_BROKEN, ValueError) as e:
        # requests keeps the PreparedRequest (and so the caller's body buffer) on its
        # exceptions; the objsdk error chained to it must not hold that buffer.
        if is_requests_error(e, "RequestException"):
            cast(Any, e).request = None
        raise translate(e, operation, bucket, key) from e


def _cause(e: BaseException) -> str:
    """The innermost exception's type name: informative, and free of URLs."""
    seen = e
    while True:
        inner = seen.__cause__ or seen.__context__
        if inner is None and seen.args and isinstance(seen.args[0], BaseException):
            inner = seen.args[0]
        if inner is None or inner is seen:
            break
        seen = inner
        if isinstance(seen, MaxRetryError) and seen.reason is not None:
            seen = seen.reason
    return type(seen).__name__
