"""The :class:`~objsdk._transport.base.Transport` over HTTP: answers read whole on its own
connections (:mod:`objsdk._transport.wire`), streamed answers and file bodies through
requests' adapter (:mod:`objsdk._transport.streamed`, imported on first use).

Everything below this module's interface stays here: transport failures become
:class:`~objsdk.errors.TransportError` subclasses raised ``from`` the original, S3 error
bodies become :class:`~objsdk.errors.S3Error` subclasses. Private attributes of the HTTP
libraries are used only through :mod:`objsdk._transport.private_api`.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import IO, TYPE_CHECKING, ClassVar

from urllib3.util.retry import Retry

from objsdk._core.addressing import Endpoint
from objsdk._core.proxies import Proxies
from objsdk._core.signing import Credentials, CurrentCredentials
from objsdk._transport import forks, private_api
from objsdk._transport.base import Body, FilePut, Interruptible, flat_body
from objsdk._transport.dialect import ChecksumDialect
from objsdk._transport.pipeline import Pipeline, PipelinedTransport, Sending, SignedRequest
from objsdk._transport.proxy import refused
from objsdk._transport.refusal import MAX_ERROR_BODY, refusal
from objsdk._transport.translate import translate, translate_errors
from objsdk._transport.wire import Answer, Wire

if TYPE_CHECKING:
    from requests.adapters import HTTPAdapter

    from objsdk._transport.streamed import Streamed, StreamedResponse

__all__ = ["HTTPTransport"]

log = logging.getLogger("objsdk")


class HTTPTransport(PipelinedTransport):
    """Signs and sends requests to one endpoint.

    A request whose answer is read whole and whose body is in memory (HEAD, GET into
    memory, PUT of bytes, listings, deletes) goes over the transport's own kept-alive
    connections (:mod:`objsdk._transport.wire`); streamed answers and file bodies go
    through requests' pooled adapter. ``verify`` is True (requests' CA bundle), False, or
    a CA bundle path; TLS verification is on unless turned off. ``proxies``: the proxies
    requests go through (:class:`~objsdk._core.proxies.Proxies`; none if None), chosen
    per origin the same way on both sides.
    """

    #: False sends every request through requests' adapter, where requests-level mocks
    #: (``responses``, ``requests-mock``) see it; checked at each request.
    wire_requests: ClassVar[bool] = True

    def __init__(
        self,
        endpoint: Endpoint,
        credentials: Credentials | CurrentCredentials | None,
        *,
        region: str,
        timeout: tuple[float, float],
        max_pool_connections: int,
        retry: Retry,
        verify: bool | str = True,
        dialect: ChecksumDialect | None = None,
        proxies: Proxies | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.region = region
        self.timeout = timeout
        self.retry = retry
        self.pipeline = Pipeline(endpoint, credentials, region, retry, dialect)
        self.max_pool_connections = max_pool_connections
        # TLS verification for every connection (requests' adapter takes it per send).
        self._verify = verify
        self.proxies = proxies or None
        self.wire = Wire(
            verify=verify, timeout=timeout, maxsize=max_pool_connections, proxies=self.proxies
        )
        # requests' adapter, made (and requests imported) on the first streamed answer
        # or file body: see objsdk._transport.streamed.
        self._streamed: Streamed | None = None
        self._streamed_lock = threading.Lock()
        forks.register(self)

    def after_fork_in_child(self) -> None:
        # requests' pools hold the parent's sockets, and their locks may be held by a
        # parent thread: the child drops them and makes its own on first use.
        self._streamed_lock = threading.Lock()
        streamed, self._streamed = self._streamed, None
        if streamed is not None:
            streamed.abandon()

    @property
    def credentials(self) -> Credentials | None:
        """The credentials the next request is signed with (None: unsigned)."""
        return self.pipeline.signer.credentials

    @property
    def verify(self) -> bool | str:
        """TLS verification: True, False or a CA bundle path."""
        return self._verify

    @property
    def streamed(self) -> Streamed:
        """requests' pooled adapter for streamed answers and file bodies (made once)."""
        streamed = self._streamed
        if streamed is None:
            # Imported before the lock is taken: the import takes tens of milliseconds,
            # and a process forked meanwhile must not inherit the lock held.
            from objsdk._transport.streamed import Streamed

            with self._streamed_lock:
                if self._streamed is None:
                    self._streamed = Streamed(
                        max_pool_connections=self.max_pool_connections,
                        verify=self._verify,
                        timeout=self.timeout,
                        proxies=self.proxies,
                    )
                streamed = self._streamed
        return streamed

    @property
    def adapter(self) -> HTTPAdapter:
        """requests' adapter (see :attr:`streamed`)."""
        return self.streamed.adapter

    def close(self) -> None:
        if self._streamed is not None:
            self._streamed.close()
        self.wire.close()

    def watch(self) -> AbstractContextManager[Interruptible]:
        return private_api.watch()

    def _attempt(
        self, sending: Sending, request: SignedRequest, body: Body
    ) -> StreamedResponse | Answer:
        if (
            not sending.stream
            and (body is None or isinstance(body, (bytes, bytearray, memoryview)))
            and self.wire_requests
        ):
            return self._exchange(sending, request, body)
        streamed = self.streamed
        return streamed.send(
            streamed.prepare(request, body, sending.content_length),
            sending.method,
            sending.operation,
            sending.bucket,
            sending.key,
            sending.stream,
            sending.ok,
        )

    def _exchange(
        self, sending: Sending, request: SignedRequest, body: bytes | bytearray | memoryview | None
    ) -> Answer:
        view = None if body is None else flat_body(body)
        with translate_errors(sending.operation, sending.bucket, sending.key, request.url):
            answer = self.wire.exchange(request.method, request.url, request.headers, view)
        log.debug(
            "%s %s/%s -> %s", sending.method, sending.bucket or "", sending.key or "", answer.status
        )
        if answer.status not in sending.ok:
            proxy = self.wire.proxy_for(request.url) if answer.status == 407 else None
            if proxy is not None:
                # The proxy's answer, not the server's (RFC 9110 §15.5.8).
                failure = refused(proxy, 407, "Proxy Authentication Required")
                raise translate(
                    failure, sending.operation, sending.bucket, sending.key
                ) from failure
            raise refusal(
                answer.status,
                answer.headers,
                answer.content[:MAX_ERROR_BODY],
                sending.operation,
                sending.bucket,
                sending.key,
            )
        return answer

    def _send_file(self, put: FilePut) -> Mapping[str, str]:
        from objsdk._transport.sendfile import CallbackError, put_file, put_window

        direct = self.direct_file_bodies and _is_regular(put.file) and not self._proxied(put)
        try:
            return (put_file if direct else put_window)(self, put)
        except CallbackError as e:
            error = e.error
        raise error  # outside the handler: the caller's exception, with its own context

    def _proxied(self, put: FilePut) -> bool:
        # A file body to a proxied origin streams through requests, whose proxy pool
        # sends it in absolute form with the proxy's credentials: the sendfile PUT
        # writes on a connection to the origin.
        return self.proxies is not None and (
            self.proxies.for_url(self.pipeline.url(put.bucket, put.key, put.params)) is not None
        )

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
