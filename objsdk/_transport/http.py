"""The :class:`~objsdk._transport.base.Transport` over requests and urllib3.

Everything below this module's interface stays here: transport failures become
:class:`~objsdk.errors.TransportError` subclasses raised ``from`` the original, S3 error
bodies become :class:`~objsdk.errors.S3Error` subclasses. Private attributes of the HTTP
libraries are used only through :mod:`objsdk._transport.private_api`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Collection, Mapping
from contextlib import AbstractContextManager
from typing import IO, Any, ClassVar

import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

from objsdk import errors
from objsdk._core.addressing import Endpoint
from objsdk._core.s3xml import error_from_response
from objsdk._core.signing import Credentials
from objsdk._transport import private_api
from objsdk._transport.base import Body, FilePut, Interruptible
from objsdk._transport.dialect import ChecksumDialect
from objsdk._transport.pipeline import (
    Pipeline,
    PipelinedTransport,
    Sending,
    SignedRequest,
    keep_retry_after,
)
from objsdk._transport.sendfile import CallbackError, put_file, put_window
from objsdk._transport.translate import _BROKEN, translate, translate_errors
from objsdk._transport.wire import Answer, Wire

__all__ = ["HTTPTransport"]

log = logging.getLogger("objsdk")

# Error bodies are small XML documents; never buffer more than this of one.
_MAX_ERROR_BODY = 64 * 1024


class _Response:
    """A :class:`~objsdk._transport.base.Response` over a streamed requests response."""

    def __init__(
        self, resp: requests.Response, operation: str, bucket: str | None, key: str | None
    ):
        self._resp = resp
        self._raw = resp.raw
        self._fp = private_api.http_client_response(resp.raw)
        self._direct: private_api.DirectSocket | None = None
        self._where = (operation, bucket, key)
        self._ended = False  # the body was read to its end
        self._body: bytes | None = None
        self.status = resp.status_code
        self.headers: Mapping[str, str] = resp.headers

    def _broken(self, e: BaseException) -> errors.ObjsdkError:
        return translate(e, *self._where)

    @property
    def content(self) -> bytes:
        # Stored bytes: never decoded, whatever Content-Encoding says.
        if self._body is None:
            try:
                self._body = bytes(self._raw.read(decode_content=False))
            except _BROKEN as e:
                raise self._broken(e) from e
            self._ended = True
        return self._body

    def read(self, n: int) -> bytes:
        try:
            if self._direct is not None:
                data = self._direct.recv(n, whole=True)
            elif n >= _DIRECT_MIN and private_api.DirectSocket.eligible(self._raw, self._fp):
                assert self._fp is not None
                self._direct, data = private_api.DirectSocket.take_bytes(self._raw, self._fp, n)
                if self._direct.left == 0:
                    self._direct.done()
                elif len(data) < n:
                    # What http.client had buffered is short of n: the rest now, so
                    # this read is whole like every other, and the reads after it stay
                    # aligned with the caller's (one join, once per body).
                    data += self._direct.recv(n - len(data), whole=True)
            elif self._fp is not None:
                data = self._fp.read(n)
            else:
                data = self._raw.read(n, decode_content=False)
        except _BROKEN as e:
            raise self._broken(e) from e
        self._note(len(data), n)
        return data

    def read1(self, n: int) -> bytes:
        try:
            if self._direct is not None:
                data = self._direct.recv(n, whole=False)
            elif self._fp is not None:
                data = self._fp.read1(n)
            else:
                data = self._raw.read1(n, decode_content=False)
        except _BROKEN as e:
            raise self._broken(e) from e
        self._note(len(data), n)
        return data

    def readinto(self, view: memoryview) -> int:
        try:
            if self._direct is not None:
                n = self._direct.recv_into(view, whole=True)
            elif len(view) >= _DIRECT_MIN and private_api.DirectSocket.eligible(
                self._raw, self._fp
            ):
                assert self._fp is not None
                self._direct, n = private_api.DirectSocket.take(self._raw, self._fp, view)
                if self._direct.left == 0:
                    self._direct.done()
            elif self._fp is not None:
                n = self._fp.readinto(view)
            else:
                n = self._raw.readinto(view)
        except _BROKEN as e:
            raise self._broken(e) from e
        self._note(n, len(view))
        return n

    def _note(self, got: int, asked: int) -> None:
        if (
            (asked and not got)
            or (self._direct is not None and self._direct.left == 0)
            or (self._fp is not None and self._fp.isclosed())
        ):
            self._ended = True

    def close(self) -> None:
        if self._ended and (self._fp is None or self._fp.isclosed()):
            # Read whole: the connection carries the next request.
            self._raw.release_conn()
            return
        if self._direct is not None:
            self._direct.restore()
        self._resp.close()


# Reads at least this large may switch a plain-HTTP body to direct socket reads.
_DIRECT_MIN = 256 * 1024


class _Adapter(HTTPAdapter):
    """requests' adapter, answering with the response and nothing else.

    ``build_response`` is the adapter's documented extension point. requests' own builds
    a case-insensitive copy of the headers and reads cookies into a jar; signed S3
    requests carry no cookies, and urllib3's headers are case-insensitive already.
    """

    def build_response(
        self, req: requests.PreparedRequest, resp: BaseHTTPResponse
    ) -> requests.Response:
        response = requests.Response()
        response.status_code = resp.status
        response.headers = resp.headers  # type: ignore[assignment]
        response.raw = resp
        response.reason = resp.reason or ""
        response.url = req.url or ""
        response.request = req
        response.connection = self
        return response


class HTTPTransport(PipelinedTransport):
    """Signs and sends requests to one endpoint.

    A request whose answer is read whole and whose body is in memory (HEAD, GET into
    memory, PUT of bytes, listings, deletes) goes over the transport's own kept-alive
    connections (:mod:`objsdk._transport.wire`); streamed answers and file bodies go
    through requests' pooled adapter. ``verify`` is True (requests' CA bundle), False, or
    a CA bundle path; TLS verification is on unless turned off.
    """

    #: False sends every request through requests' adapter, where requests-level mocks
    #: (``responses``, ``requests-mock``) see it; checked at each request.
    wire_requests: ClassVar[bool] = True

    def __init__(
        self,
        endpoint: Endpoint,
        credentials: Credentials | None,
        *,
        region: str,
        timeout: tuple[float, float],
        max_pool_connections: int,
        retry: Retry,
        verify: bool | str = True,
        dialect: ChecksumDialect | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = credentials
        self.region = region
        self.timeout = timeout
        self.retry = retry
        self.pipeline = Pipeline(endpoint, credentials, region, retry, dialect)
        self.max_pool_connections = max_pool_connections
        # TLS verification for every connection (requests' adapter takes it per send).
        self._verify = verify
        # urllib3 sends each attempt once and raises what broke it: the pipeline's loop
        # is the only one that retries.
        self.adapter = _Adapter(
            pool_connections=4,
            pool_maxsize=max_pool_connections,
            max_retries=Retry(total=False, redirect=False, raise_on_status=False),
        )
        private_api.install_watched_pools(self.adapter)
        self.wire = Wire(verify=verify, timeout=timeout, maxsize=max_pool_connections)

    @property
    def verify(self) -> bool | str:
        """TLS verification: True, False or a CA bundle path."""
        return self._verify

    def close(self) -> None:
        self.adapter.close()
        self.wire.close()

    def watch(self) -> AbstractContextManager[Interruptible]:
        return private_api.watch()

    def _prepare(
        self, request: SignedRequest, body: Body, content_length: int | None
    ) -> requests.PreparedRequest:
        # Built here rather than by requests.Request.prepare(): the URL is the one
        # signed (requests would re-quote it and urllib3 would collapse '.'/'..'
        # segments, RFC 3986 §5.2.4, both of which change the key), there are no
        # params, cookies or auth to merge, and the signer has already refused any
        # header value with a CR, LF or NUL (requests' own header check).
        prepared = requests.PreparedRequest()
        prepared.method = request.method
        prepared.url = request.url
        prepared.headers = CaseInsensitiveDict(request.headers)
        if body is not None:
            data, length = _as_requests_body(body, content_length)
            prepared.prepare_body(data, None)
            # Always a plain Content-Length: S3 refuses chunked transfer encoding on PUT.
            prepared.headers.pop("Transfer-Encoding", None)
            prepared.headers["Content-Length"] = str(length)
        return prepared

    def _attempt(self, sending: Sending, request: SignedRequest, body: Body) -> _Response | Answer:
        if (
            not sending.stream
            and (body is None or isinstance(body, (bytes, bytearray, memoryview)))
            and self.wire_requests
        ):
            return self._exchange(sending, request, body)
        prepared = self._prepare(request, body, sending.content_length)
        return self._send(
            prepared,
            sending.method,
            sending.operation,
            sending.bucket,
            sending.key,
            sending.stream,
            sending.ok,
        )

    def _send(
        self,
        prepared: requests.PreparedRequest,
        method: str,
        operation: str,
        bucket: str | None,
        key: str | None,
        stream: bool,
        ok: Collection[int],
    ) -> _Response:
        with translate_errors(operation, bucket, key):
            # The adapter itself, not a Session: no cookie jars, hooks or redirects (a
            # 3xx is answered as an error), and no proxies or .netrc from the
            # environment to re-route or re-authenticate a request whose signature
            # covers the Host we chose.
            resp = self.adapter.send(
                prepared, stream=True, timeout=self.timeout, verify=self._verify, proxies={}
            )
        log.debug("%s %s/%s -> %s", method, bucket or "", key or "", resp.status_code)
        answer = _Response(resp, operation, bucket, key)
        if resp.status_code not in ok:
            try:
                body = b""
                if method != "HEAD":
                    with contextlib.suppress(Exception):
                        body = resp.raw.read(_MAX_ERROR_BODY, decode_content=True) or b""
                raise _refusal(resp.status_code, resp.headers, body, operation, bucket, key)
            finally:
                resp.close()
        if not stream:
            try:
                _ = answer.content
            finally:
                answer.close()
        return answer

    def _exchange(
        self, sending: Sending, request: SignedRequest, body: bytes | bytearray | memoryview | None
    ) -> Answer:
        view = None if body is None else _flat(body)
        with translate_errors(sending.operation, sending.bucket, sending.key):
            answer = self.wire.exchange(request.method, request.url, request.headers, view)
        log.debug(
            "%s %s/%s -> %s", sending.method, sending.bucket or "", sending.key or "", answer.status
        )
        if answer.status not in sending.ok:
            raise _refusal(
                answer.status,
                answer.headers,
                answer.content[:_MAX_ERROR_BODY],
                sending.operation,
                sending.bucket,
                sending.key,
            )
        return answer

    def _send_file(self, put: FilePut) -> Mapping[str, str]:
        direct = self.direct_file_bodies and _is_regular(put.file)
        try:
            return (put_file if direct else put_window)(self, put)
        except CallbackError as e:
            error = e.error
        raise error  # outside the handler: the caller's exception, with its own context

    @property
    def direct_file_bodies(self) -> bool:
        # TLS has to see the bytes, and the body can go out on its own only when a
        # connection can be borrowed from requests' pool.
        return self.endpoint.scheme == "http" and private_api.CHECKOUT


def _is_regular(file: IO[bytes]) -> bool:
    try:
        return stat.S_ISREG(os.fstat(file.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):
        return False


def _as_requests_body(body: Body, content_length: int | None) -> tuple[Any, int]:
    """Hand a body to requests without copying it; return it with its length.

    A ``bytearray`` or ``memoryview`` goes as a flat byte memoryview, which urllib3
    sends with one ``sendall`` of the buffer itself.
    """
    if isinstance(body, (bytes, bytearray, memoryview)):
        view = _flat(body)
        if view.nbytes == 0:
            return b"", 0
        if isinstance(body, bytes):
            return body, view.nbytes
        return view, view.nbytes
    if content_length is None:
        raise errors.InvalidArgument("a file body needs its content_length")
    if content_length == 0:
        return b"", 0
    return body, content_length


def _flat(body: bytes | bytearray | memoryview) -> memoryview:
    """``body`` as a flat memoryview of bytes, over the caller's own memory."""
    view = memoryview(body)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _refusal(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    operation: str,
    bucket: str | None,
    key: str | None,
) -> errors.S3Error:
    """The error an answer of ``status`` is, remembering its ``Retry-After``."""
    return keep_retry_after(
        error_from_response(status, headers, body, operation=operation, bucket=bucket, key=key),
        headers,
    )
