"""Sending one signed S3 request and turning every failure into an objsdk error.

This is the only module that talks to ``requests``. Everything above it deals in
buckets, keys and :mod:`objsdk.errors`; nothing below it leaks out: transport failures
become :class:`~objsdk.errors.TransportError` subclasses raised ``from`` the original,
and S3 error bodies become :class:`~objsdk.errors.S3Error` subclasses.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import IO, Any

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.retry import Retry

from . import errors
from ._version import __version__
from .addressing import Endpoint
from .s3xml import parse_error
from .signing import UNSIGNED_PAYLOAD, Credentials, sign_request

__all__ = ["Body", "Transport", "Watch", "raise_error_body", "translate_errors", "watch"]

log = logging.getLogger("objsdk")

Body = bytes | bytearray | memoryview | IO[bytes] | None

USER_AGENT = f"objsdk/{__version__}"

# Error bodies are small XML documents; never buffer more than this of one.
_MAX_ERROR_BODY = 64 * 1024


@contextlib.contextmanager
def translate_errors(operation: str, bucket: str | None, key: str | None) -> Iterator[None]:
    """Re-raise requests/urllib3/socket failures as objsdk transport errors.

    The original stays attached as ``__cause__``; the message names the operation,
    bucket and key, never the URL (a presigned URL would carry a signature).
    """
    where: dict[str, Any] = {"operation": operation, "bucket": bucket, "key": key}
    try:
        yield
    except errors.ObjsdkError:
        raise
    except urllib3.exceptions.NewConnectionError as e:
        # A subclass of ConnectTimeoutError in urllib3, though "refused" is not a timeout.
        raise errors.ConnectError(f"cannot reach the server ({_cause(e)})", **where) from e
    except (requests.exceptions.ConnectTimeout, urllib3.exceptions.ConnectTimeoutError) as e:
        raise errors.Timeout("connect timed out", **where) from e
    except (
        requests.exceptions.ReadTimeout,
        urllib3.exceptions.ReadTimeoutError,
        TimeoutError,
    ) as e:
        raise errors.Timeout("read timed out", **where) from e
    except (requests.exceptions.SSLError, urllib3.exceptions.SSLError) as e:
        raise errors.ConnectError("TLS error", **where) from e
    except (
        requests.exceptions.ChunkedEncodingError,
        requests.exceptions.ContentDecodingError,
        urllib3.exceptions.ProtocolError,
        urllib3.exceptions.DecodeError,
    ) as e:
        raise errors.ProtocolError(f"connection broken ({_cause(e)})", **where) from e
    except (requests.exceptions.ConnectionError, ConnectionError) as e:
        raise errors.ConnectError(f"cannot reach the server ({_cause(e)})", **where) from e
    except requests.exceptions.RequestException as e:
        raise errors.TransportError(f"request failed ({type(e).__name__})", **where) from e


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
        if isinstance(seen, urllib3.exceptions.MaxRetryError) and seen.reason is not None:
            seen = seen.reason
    return type(seen).__name__


class Watch:
    """Lets another thread cut short the requests of the thread that opened it.

    Read-ahead workers run inside a watch, so closing a reader can wake a worker that
    is blocked on a stalled connection, whether it waits for headers or for the body.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: object | None = None
        self.interrupted = False
        self._done = False

    def attach(self, conn: object) -> None:
        with self._lock:
            if self.interrupted:
                # Not an OSError: urllib3 would retry that; this must end the request.
                raise errors.ReadError("request cancelled")
            self._conn = conn

    def interrupt(self) -> None:
        """Refuse further requests and shut down the connection in use (if any)."""
        with self._lock:
            self.interrupted = True
            conn, self._conn = (None if self._done else self._conn), None
        sock = getattr(conn, "sock", None)
        if isinstance(sock, socket.socket):
            # shutdown() wakes a recv() blocked in another thread; close() would not.
            # Should the connection already be back in the pool, its next user sees a
            # dropped connection, which urllib3 and ObjectFile recover from.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

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


class _Watched(HTTPConnectionPool):
    def _make_request(self, conn: Any, *args: Any, **kwargs: Any) -> Any:
        w = getattr(_local, "watch", None)
        if w is not None:
            w.attach(conn)
        return super()._make_request(conn, *args, **kwargs)


class _WatchedHTTPS(_Watched, HTTPSConnectionPool):
    pass


class Transport:
    """Signs and sends requests to one endpoint over a pooled ``requests.Session``."""

    def __init__(
        self,
        endpoint: Endpoint,
        credentials: Credentials | None,
        *,
        region: str,
        timeout: tuple[float, float],
        max_pool_connections: int,
        retry: Retry,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = credentials
        self.region = region
        self.timeout = timeout
        self.retry = retry
        self.max_pool_connections = max_pool_connections
        self.session = requests.Session()
        # The environment's proxies and .netrc must not silently re-route or re-authenticate
        # signed requests: the signature covers the Host we chose.
        self.session.trust_env = False
        adapter = HTTPAdapter(
            pool_connections=4, pool_maxsize=max_pool_connections, max_retries=retry
        )
        adapter.poolmanager.pool_classes_by_scheme = {"http": _Watched, "https": _WatchedHTTPS}
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def close(self) -> None:
        self.session.close()

    def request(
        self,
        method: str,
        *,
        operation: str,
        bucket: str | None = None,
        key: str | None = None,
        params: Iterable[tuple[str, str]] = (),
        headers: Mapping[str, str] | None = None,
        body: Body = None,
        payload_hash: str = UNSIGNED_PAYLOAD,
        stream: bool = False,
        content_length: int | None = None,
        ok: Collection[int] = (200,),
        timeout: tuple[float, float] | None = None,
    ) -> requests.Response:
        """Send one request; return the response if its status is in ``ok``, else raise.

        A file ``body`` must be seekable (urllib3 rewinds it before a retry) and comes
        with its ``content_length``. With ``stream=True`` the response body is left
        unread for the caller (who must close the response); otherwise it is read here,
        inside the error translation.
        """
        url = self.endpoint.build_url(bucket, key, params)
        hdrs = {"User-Agent": USER_AGENT, **(headers or {})}
        if self.credentials is not None:
            hdrs.update(
                sign_request(
                    method,
                    url,
                    hdrs,
                    credentials=self.credentials,
                    region=self.region,
                    now=datetime.now(timezone.utc),
                    payload_hash=payload_hash,
                )
            )
        prepared = requests.Request(method, self.endpoint.url, headers=hdrs).prepare()
        # Send exactly the URL that was signed: requests would re-quote it and urllib3
        # would collapse '.'/'..' segments (RFC 3986 §5.2.4), both of which change the key.
        prepared.url = url
        if body is not None:
            data, length = _as_requests_body(body, content_length)
            prepared.prepare_body(data, None)
            # Always a plain Content-Length: S3 refuses chunked transfer encoding on PUT.
            prepared.headers.pop("Transfer-Encoding", None)
            prepared.headers["Content-Length"] = str(length)
        with translate_errors(operation, bucket, key):
            resp = self.session.send(
                prepared, stream=True, timeout=timeout or self.timeout, allow_redirects=False
            )
            log.debug("%s %s/%s -> %s", method, bucket or "", key or "", resp.status_code)
            if resp.status_code not in ok:
                try:
                    raise self._error(resp, operation, bucket, key)
                finally:
                    resp.close()
            if not stream:
                try:
                    _ = resp.content
                finally:
                    resp.close()
        return resp

    def _error(
        self, resp: requests.Response, operation: str, bucket: str | None, key: str | None
    ) -> errors.S3Error:
        body = b""
        if resp.request.method != "HEAD":
            with contextlib.suppress(Exception):
                body = resp.raw.read(_MAX_ERROR_BODY, decode_content=True) or b""
        parsed = parse_error(body)
        # HEAD responses have no body; MinIO puts the code in a header instead.
        code = (
            parsed.code
            if parsed
            else resp.headers.get("x-minio-error-code")
            or errors.code_for_status(resp.status_code, has_key=key is not None)
        )
        message = parsed.message if parsed else resp.headers.get("x-minio-error-desc", "")
        cls = errors.error_class_for_code(code)
        return cls(
            resp.status_code,
            code,
            message.strip('"'),
            request_id=(parsed.request_id if parsed else None)
            or resp.headers.get("x-amz-request-id"),
            bucket=bucket,
            key=key,
            operation=operation,
        )


def raise_error_body(
    resp: requests.Response, *, operation: str, bucket: str | None, key: str | None
) -> None:
    """Raise the S3 error in a 200 response's body, if there is one.

    CopyObject and CompleteMultipartUpload may fail after the server has sent 200 and
    then report the error in the body (S3 API reference for both operations).
    """
    err = parse_error(resp.content)
    if err is not None:
        raise errors.error_class_for_code(err.code)(
            resp.status_code,
            err.code,
            err.message,
            request_id=err.request_id,
            bucket=bucket,
            key=key,
            operation=operation,
        )


def _as_requests_body(body: Body, content_length: int | None) -> tuple[Any, int]:
    """Hand a body to requests without copying it; return it with its length.

    A ``bytearray`` or ``memoryview`` goes as a flat byte memoryview, which urllib3
    sends with one ``sendall`` of the buffer itself.
    """
    if isinstance(body, (bytes, bytearray, memoryview)):
        view = memoryview(body)
        if view.nbytes == 0:
            return b"", 0
        if isinstance(body, bytes):
            return body, view.nbytes
        return (view if view.format == "B" and view.ndim == 1 else view.cast("B")), view.nbytes
    if content_length is None:
        raise ValueError("a file body needs its content_length")
    if content_length == 0:
        return b"", 0
    return body, content_length
