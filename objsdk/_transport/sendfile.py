"""A single PUT whose body goes from a file to the socket inside the kernel.

``requests`` sends a file body by reading it into 16 KiB Python buffers and writing
each one: a copy per block and a trip through the interpreter. Here the request line
and the SigV4-signed headers are written on a connection borrowed from the client's
urllib3 pool, then the body follows with ``socket.sendfile`` (sendfile(2): page cache
to socket, no user-space copy). Plain http only: TLS has to see the bytes.

The response is read by the connection itself (``http.client``), S3 errors become
:mod:`objsdk.errors` exactly as in :class:`~objsdk._transport.http.HTTPTransport`, and
the request is signed and retried by the same pipeline
(:mod:`objsdk._transport.pipeline`), each attempt re-sending from the file offset
(sendfile takes an explicit offset, so nothing needs rewinding).
"""

from __future__ import annotations

import http.client
import logging
import os
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, cast
from urllib.parse import urlsplit

import requests
import urllib3.exceptions
from urllib3.connection import HTTPConnection
from urllib3.response import HTTPResponse

from objsdk._core.secret_headers import SecretHeaders
from objsdk._core.signing import UNSIGNED_PAYLOAD, host_header
from objsdk._transport import private_api
from objsdk._transport.base import FilePut
from objsdk._transport.pipeline import SignedRequest
from objsdk._transport.refusal import MAX_ERROR_BODY, refusal
from objsdk._transport.translate import translate_errors
from objsdk.errors import SourceChangedError

if TYPE_CHECKING:
    from objsdk._transport.http import HTTPTransport

__all__ = ["CallbackError", "put_file", "put_window"]

log = logging.getLogger("objsdk")

# One sendfile call per this many bytes, so progress is reported while the body goes out.
SEND_CHUNK = 16 << 20

# What a broken or timed-out connection raises, at each step of one attempt.
_NETWORK_ERRORS = (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError)


class _Broken(Exception):
    """One attempt failed on the network; ``error`` is it as urllib3's ``Retry`` sorts it."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


class CallbackError(BaseException):
    """Carries an exception raised by the caller's progress callback past the network
    error handling (which must not retry it or rename it) to be re-raised as it was."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def put_file(transport: HTTPTransport, put: FilePut) -> Mapping[str, str]:
    """Send ``put`` by sendfile; return the response headers (case-insensitive). Each
    read names its offset, so threads may share the file.

    The file must be a regular file and the endpoint plain http. The headers (content
    type, metadata, ``x-amz-checksum-crc32c``) are signed and sent as given.
    ``put.progress(sent)`` is called with the body bytes sent so far in the current
    attempt; what it raises comes out wrapped in :class:`CallbackError`.
    """
    return _put_file(transport, put)


def put_window(transport: HTTPTransport, put: FilePut) -> Mapping[str, str]:
    """The same PUT with the body streamed through requests (TLS, or no sendfile)."""
    body = _Window(put.file, put.offset, put.count, put.progress)
    resp = transport.request(
        "PUT",
        operation=put.operation,
        bucket=put.bucket,
        key=put.key,
        params=put.params,
        headers=put.headers,
        body=cast(IO[bytes], body),
        content_length=put.count,
    )
    return resp.headers


class _Window:
    """Bytes ``start`` to ``start + size`` of a seekable stream, as a file that ends
    there (a file that grows meanwhile must not overrun Content-Length). Positions are
    relative to ``start``; ``on_read(pos)`` follows the reads."""

    def __init__(
        self,
        stream: IO[bytes],
        start: int,
        size: int,
        on_read: Callable[[int], None] | None,
    ) -> None:
        self._stream = stream
        self._start = start
        self._size = size
        self._pos = 0
        self._on_read = on_read
        stream.seek(start)

    def read(self, n: int = -1) -> bytes:
        left = self._size - self._pos
        if n < 0 or n > left:
            n = left
        if n == 0:
            return b""
        data = self._stream.read(n)
        if not data:
            raise SourceChangedError(
                f"the stream ended {left} bytes early: it shrank while being uploaded"
            )
        self._pos += len(data)
        if self._on_read is not None:
            try:
                self._on_read(self._pos)
            except BaseException as e:
                # Through urllib3 and requests untouched, to be re-raised as it was.
                raise CallbackError(e) from e
        return data

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}[whence]
        self._pos = min(max(0, base + offset), self._size)
        self._stream.seek(self._start + self._pos)
        return self._pos


def _put_file(transport: HTTPTransport, put: FilePut) -> Mapping[str, str]:
    bucket, key, file, offset, count = put.bucket, put.key, put.file, put.offset, put.count
    headers, progress, operation, params = put.headers, put.progress, put.operation, put.params
    pipeline = transport.pipeline
    base = {
        # Signed as sent, so the signature covers exactly these bytes (and no proxy or
        # http.client default can add an Accept-Encoding behind its back). The Host is
        # the URL's, signed and sent as such (a region redirect may change the URL).
        "Accept-Encoding": "identity",
        "Content-Length": str(count),
        **headers,
    }

    def attempt(request: SignedRequest, _: object) -> Mapping[str, str]:
        parts = urlsplit(request.url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        sent = SecretHeaders({"Host": host_header(request.url), **request.headers})
        prepared = requests.Request("PUT", transport.endpoint.url).prepare()
        prepared.url = request.url
        with translate_errors(operation, bucket, key, request.url):
            pool, conn = private_api.checkout(transport.adapter, transport.verify, prepared)
            resp: HTTPResponse | None = None
            reusable = False
            watch = private_api.current_watch()
            try:
                if watch is not None:
                    watch.attach(conn)  # an interrupt now shuts a stalled send down
                try:
                    resp = _send(
                        conn,
                        target,
                        sent,
                        file,
                        offset,
                        count,
                        transport.timeout,
                        progress,
                    )
                    if 200 <= resp.status < 300:
                        _read(resp)
                        reusable = True
                        return resp.headers
                except _Broken as broken:
                    raise broken.error from broken.error.__cause__
                # Never a local: an error body may echo the signed request.
                raise refusal(
                    resp.status,
                    resp.headers,
                    resp.read(MAX_ERROR_BODY, decode_content=True) or b"",
                    operation,
                    bucket,
                    key,
                )
            finally:
                if watch is not None:
                    watch.detach(conn)
                if resp is not None:
                    resp.close()
                # The connection's state is unknown unless the answer was read whole
                # (body half sent, answer half read): then it is dropped.
                private_api.checkin(pool, conn, reusable=reusable)

    # Each attempt sends from the file offset (sendfile names it): nothing to rewind.
    return pipeline.run(
        "PUT",
        attempt,
        operation=operation,
        bucket=bucket,
        key=key,
        params=params,
        headers=base,
        payload_hash=UNSIGNED_PAYLOAD,
        locate=transport.ask_region,
    )


def _send(
    conn: HTTPConnection,
    target: str,
    headers: Mapping[str, str],
    file: IO[bytes],
    offset: int,
    count: int,
    timeout: tuple[float, float],
    progress: Callable[[int], None] | None,
) -> HTTPResponse:
    """One attempt: connect if needed, send the head, sendfile the body, read the
    status and headers. Network failures come out as :class:`_Broken`."""
    connect_timeout, read_timeout = timeout
    try:
        if conn.sock is None:
            conn.timeout = connect_timeout
            conn.connect()
        # A stalled send is as stuck as a stalled read: both wait read_timeout.
        conn.timeout = read_timeout
        conn.request(
            "PUT", target, body=None, headers=headers, preload_content=False, decode_content=False
        )
    except _NETWORK_ERRORS as e:
        raise _Broken(_classify(e)) from e
    sock = conn.sock
    assert sock is not None
    sent = 0
    cut: Exception | None = None
    while sent < count:
        try:
            n = sock.sendfile(file, offset + sent, min(SEND_CHUNK, count - sent))
        except (BrokenPipeError, ConnectionResetError) as e:
            # The server may have answered and closed without reading the whole body
            # (an auth error, say): read that answer, as urllib3 does.
            cut = e
            break
        except _NETWORK_ERRORS as e:
            raise _Broken(_classify(e)) from e
        if n == 0:
            raise SourceChangedError(
                f"the file ended {count - sent} bytes early: it shrank while being uploaded"
            )
        sent += n
        if progress is not None:
            try:
                progress(sent)
            except BaseException as e:
                raise CallbackError(e) from e
    try:
        resp = conn.getresponse()
    except _NETWORK_ERRORS as e:
        raise _Broken(_classify(cut or e)) from (cut or e)
    if cut is not None and resp.status < 300:
        # Success without the whole body cannot be trusted; treat it as the break it was.
        raise _Broken(_classify(cut)) from cut
    return resp


def _read(resp: HTTPResponse) -> None:
    """Read the (empty) body to its end, so the connection can carry the next request."""
    try:
        resp.read()
    except _NETWORK_ERRORS as e:
        raise _Broken(_classify(e)) from e


def _classify(e: BaseException) -> Exception:
    """``e`` as the urllib3 error its ``Retry`` counts: connect, read, or timeout."""
    if isinstance(e, urllib3.exceptions.HTTPError):
        return e
    if isinstance(e, TimeoutError):
        err: Exception = urllib3.exceptions.ReadTimeoutError(None, None, "Read timed out.")  # type: ignore[arg-type]
    else:
        err = urllib3.exceptions.ProtocolError("Connection aborted.", e)
    err.__cause__ = e
    return err
