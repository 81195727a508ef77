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


def translate(
    e: BaseException, operation: str, bucket: str | None, key: str | None
) -> errors.ObjsdkError:
    """The objsdk error for a requests/urllib3/socket failure.

    The message names the operation, bucket and key, never the URL (a presigned URL
    would carry a signature).
    """
    where: dict[str, Any] = {"operation": operation, "bucket": bucket, "key": key}
    if isinstance(e, errors.ObjsdkError):
        return e
    if isinstance(e, urllib3.exceptions.NewConnectionError):
        # A subclass of ConnectTimeoutError in urllib3, though "refused" is not a timeout.
        return errors.ConnectError(f"cannot reach the server ({_cause(e)})", **where)
    if isinstance(e, (requests.exceptions.ConnectTimeout, urllib3.exceptions.ConnectTimeoutError)):
        return errors.Timeout("connect timed out", **where)
    if isinstance(
        e,
        (
            requests.exceptions.ReadTimeout,
            urllib3.exceptions.ReadTimeoutError,
            TimeoutError,
            # SO_RCVTIMEO expiring on a blocking socket (direct reads): EAGAIN.
            BlockingIOError,
        ),
    ):
        return errors.Timeout("read timed out", **where)
    if isinstance(e, (requests.exceptions.SSLError, urllib3.exceptions.SSLError)):
        return errors.ConnectError(f"TLS error ({_cause(e)})", **where)
    if isinstance(
        e,
        (
            requests.exceptions.ChunkedEncodingError,
            requests.exceptions.ContentDecodingError,
            urllib3.exceptions.ProtocolError,
            urllib3.exceptions.DecodeError,
            http.client.HTTPException,
        ),
    ):
        return errors.ProtocolError(f"connection broken ({_cause(e)})", **where)
    if isinstance(e, (requests.exceptions.ConnectionError, ConnectionError)):
        return errors.ConnectError(f"cannot reach the server ({_cause(e)})", **where)
    if isinstance(e, OSError):
        return errors.ProtocolError(f"connection broken ({_cause(e)})", **where)
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
