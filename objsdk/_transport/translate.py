"""requests/urllib3/socket failures as objsdk errors, in one place.

Every failure leaves the transport as a :class:`~objsdk.errors.TransportError` subclass
raised ``from`` the original (urllib3's ``response.py`` does the same for its own
layer). Messages name the operation, bucket and key, never the URL: a presigned URL
carries a signature.
"""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Iterator
from typing import Any

import requests
import urllib3.exceptions
from urllib3.exceptions import MaxRetryError

from objsdk import errors
from objsdk._version import __version__

__all__ = ["USER_AGENT", "translate", "translate_errors"]

USER_AGENT = f"objsdk/{__version__}"

# What a body read can raise when the connection breaks: socket errors (timeouts too),
# http.client's IncompleteRead for truncated or malformed chunked bodies, and the
# urllib3/requests wrappers of the same.
_BROKEN = (
    OSError,
    http.client.HTTPException,
    urllib3.exceptions.HTTPError,
    requests.exceptions.RequestException,
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

_MAP: dict[type[BaseException], tuple[type[errors.TransportError], str]] = {
    # A ConnectTimeoutError in urllib3, though "refused" is not a timeout.
    urllib3.exceptions.NewConnectionError: _CONNECT,
    requests.exceptions.ConnectTimeout: _CONNECT_TIMEOUT,
    urllib3.exceptions.ConnectTimeoutError: _CONNECT_TIMEOUT,
    requests.exceptions.ReadTimeout: _READ_TIMEOUT,
    urllib3.exceptions.ReadTimeoutError: _READ_TIMEOUT,
    TimeoutError: _READ_TIMEOUT,
    # SO_RCVTIMEO expiring on a blocking socket (direct reads): EAGAIN.
    BlockingIOError: _READ_TIMEOUT,
    requests.exceptions.SSLError: _TLS,
    urllib3.exceptions.SSLError: _TLS,
    requests.exceptions.ChunkedEncodingError: _CONNECTION_BROKEN,
    requests.exceptions.ContentDecodingError: _CONNECTION_BROKEN,
    urllib3.exceptions.ProtocolError: _CONNECTION_BROKEN,
    urllib3.exceptions.DecodeError: _CONNECTION_BROKEN,
    http.client.HTTPException: _CONNECTION_BROKEN,
    # Both a ConnectionResetError and an HTTPException: the server closed a connection
    # it had accepted (a kept-alive one, typically) before answering, so it is reachable.
    http.client.RemoteDisconnected: _CONNECTION_BROKEN,
    requests.exceptions.ConnectionError: _CONNECT,
    ConnectionError: _CONNECT,
    OSError: _CONNECTION_BROKEN,
}


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
    for cls in type(e).__mro__:
        mapped = _MAP.get(cls)
        if mapped is not None:
            error, message = mapped
            if "{cause}" in message:
                message = message.format(cause=_cause(e))
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
        if isinstance(e, requests.exceptions.RequestException):
            e.request = None
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
