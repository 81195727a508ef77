"""How a request travels: built and signed once per attempt, sent by a transport, retried
in one loop.

A transport (requests/urllib3, the sendfile PUT, the mock) only knows how to send one
signed request once and turn what happens into objsdk errors: an error answer is an
:class:`~objsdk.errors.S3Error`, a failure a :class:`~objsdk.errors.TransportError`
raised ``from`` the original. Everything else happens here, the same for all of them:

1. the checksum dialect drops the checksum headers the service is not sent
   (:class:`~objsdk._transport.dialect.ChecksumDialect`), and a client's server-side
   encryption setting adds its headers to every request they belong on
   (:mod:`objsdk._core.sse`: SSE-C's key on each part, each ranged GET, the HEAD before
   them, without any of those paths having to remember it);
2. the :class:`~objsdk._core.signing.Signer` signs the headers (a fresh date each
   attempt: a retry after a long backoff is not refused as stale) with the credentials
   in use now (refreshed first when they are due, :mod:`.credentials`);
3. the transport sends it (:data:`Attempt`);
4. a failure goes to the one classifier (:func:`~objsdk._transport.retry.next_policy`):
   retried under the policy, after a file body is rewound, or raised. A 400 refusing a
   checksum header is sent once more without it (and remembered, see the dialect).
   An answer saying the bucket is in another region (a 301/307, or a 400 naming the
   region expected) is sent once more, signed for that region and, on AWS, to its
   endpoint, which the bucket's requests use from then on
   (:mod:`objsdk._transport.routes`). An answer saying the credentials expired
   (``ExpiredToken``, 400 or 403; a HEAD's bodiless 400) refreshes credentials that
   come from a source and sends the request once more with the new ones. A throttling
   answer is also told to the thread's listener
   (:func:`~objsdk._transport.retry.hearing_throttles`).
"""

from __future__ import annotations

import copy
import http.client
import logging
import socket
import ssl
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, TypeVar

import urllib3.exceptions
from urllib3.util.retry import Retry

from objsdk import errors
from objsdk._core import failure_chain
from objsdk._core.addressing import Endpoint, Route
from objsdk._core.region_redirect import bucket_region
from objsdk._core.secret_headers import SecretHeaders
from objsdk._core.signing import UNSIGNED_PAYLOAD, Credentials, CurrentCredentials, Signer
from objsdk._core.sse import SSE, request_kind, sse_headers
from objsdk._transport import private_api
from objsdk._transport.answer_head import past_bound
from objsdk._transport.base import Body, FilePut, Response
from objsdk._transport.credentials import renew, say_signed_with, says_expired
from objsdk._transport.dialect import ChecksumDialect
from objsdk._transport.refusal import raise_body_error, retry_after_of, say_clock_skew
from objsdk._transport.retry import (
    is_throttle,
    next_policy,
    pause,
    retry_kind,
    throttle_heard,
)
from objsdk._transport.routes import ANY_STATUS, BucketRoutes, redirect_of
from objsdk._transport.translate import USER_AGENT, is_requests_error

__all__ = [
    "Attempt",
    "Pipeline",
    "PipelinedTransport",
    "Sending",
    "SignedRequest",
    "cannot_connect",
    "encrypting",
    "network_failure",
    "refused_past_bound",
    "rewinder",
    "utc_now",
]

log = logging.getLogger("objsdk")

T = TypeVar("T")


@dataclass(frozen=True)
class SignedRequest:
    """One attempt of a request, as it goes on the wire: ``url`` is exactly what was
    signed (percent-encoded once), ``headers`` carry the signature (a
    :class:`~objsdk._core.secret_headers.SecretHeaders`: the repr hides it)."""

    method: str
    url: str
    headers: Mapping[str, str]


#: Sends one attempt of the request with the body; raises S3Error for an error answer,
#: TransportError for a failure. The body is an argument, never captured by a closure:
#: a frame keeps its function, and the function its closure, so an error's traceback
#: would keep the caller's buffer exported (BytesIO.close() would fail).
Attempt = Callable[[SignedRequest, Body], T]


def utc_now() -> datetime:
    """The signing clock of real requests."""
    return datetime.now(timezone.utc)


class Pipeline:
    """The signer, retry policy, checksum dialect and encryption setting of one
    client's requests."""

    def __init__(
        self,
        endpoint: Endpoint,
        credentials: Credentials | CurrentCredentials | None,
        region: str,
        retry: Retry,
        dialect: ChecksumDialect | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.endpoint = endpoint
        self.signer = Signer(credentials, region, clock)
        self.retry = retry
        self.dialect = dialect if dialect is not None else ChecksumDialect()
        self.sse: SSE | None = None
        #: Where each bucket's requests go (shared by twins, see :meth:`with_sse`).
        self.routes = BucketRoutes(endpoint, region)

    def with_sse(self, sse: SSE | None) -> Pipeline:
        """The same signer, policy and dialect, adding ``sse``'s headers to the requests
        they belong on."""
        twin = copy.copy(self)
        twin.sse = sse
        return twin

    def headers(
        self,
        method: str,
        key: str | None,
        query: list[tuple[str, str]],
        headers: Mapping[str, str] | None,
    ) -> dict[str, str]:
        """The headers a request is sent with: the caller's, and the encryption
        setting's where they belong (:func:`~objsdk._core.sse.request_kind`), in a
        :class:`~objsdk._core.secret_headers.SecretHeaders` then (SSE-C's key)."""
        given = dict(headers or {})
        if self.sse is None:
            return given
        return SecretHeaders(
            {**given, **sse_headers(self.sse, request_kind(method, key, dict(query), given))}
        )

    def url(self, bucket: str | None, key: str | None, params: Iterable[tuple[str, str]]) -> str:
        return self.routes.route(bucket).endpoint.build_url(bucket, key, list(params))

    def sign(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        payload_hash: str,
        region: str | None = None,
    ) -> SignedRequest:
        """One attempt's request: ``headers`` (after the dialect) with a User-Agent and
        the signature for ``region`` (default: the client's)."""
        hdrs = SecretHeaders(self.dialect.outgoing(headers))  # SSE-C's key, maybe
        hdrs.setdefault("User-Agent", USER_AGENT)
        return SignedRequest(method, url, self.signer.sign(method, url, hdrs, payload_hash, region))

    def run(
        self,
        method: str,
        attempt: Attempt[T],
        *,
        operation: str,
        bucket: str | None,
        key: str | None,
        params: Iterable[tuple[str, str]] = (),
        headers: Mapping[str, str] | None = None,
        payload_hash: str | None = None,
        idempotent: bool | None = None,
        body: Body = None,
        on_retry: Callable[[errors.ObjsdkError], None] | None = None,
        locate: Callable[[str], str | None] | None = None,
    ) -> T:
        """Send the request by ``attempt`` until it succeeds or the classifier says
        stop; return what the successful attempt returned.

        A file ``body`` is put back where it started before each further attempt;
        ``on_retry(error)`` is told of each failure that is retried. ``idempotent``: see
        :func:`~objsdk._transport.retry.retry_kind`. ``locate(bucket)``: the bucket's
        region, asked of the service, for a redirect that does not name it.
        """
        query = list(params)
        routes = self.routes
        # BucketRoutes.route without the call; a bucket known already needs no confirm().
        known = routes.known.get(bucket or "")
        route = routes.home if known is None else known
        url = route.endpoint.build_url(bucket, key, query)
        kind = retry_kind(method, query, idempotent)
        wanted = self.headers(method, key, query, headers)
        payload = payload_hash or UNSIGNED_PAYLOAD
        rewind = rewinder(body)
        policy = self.retry
        # The code of the answer that refused checksum headers, once the one retry
        # without them was made.
        refused: str | None = None
        redirected = False  # the region is settled once per request, as botocore does
        # Whether the one retry after refreshing expired credentials was made.
        renewed = False
        while True:
            request = self.sign(method, url, wanted, payload, route.region)
            try:
                result = attempt(request, body)
            except errors.S3Error as e:
                # First: a HEAD's bodiless 400 may be expired credentials as well as a
                # refused checksum header or another region; new credentials tell.
                expired = not renewed and says_expired(e, method)
                if expired and renew(self.signer, request.headers, e):
                    renewed = True
                    if rewind is not None:
                        rewind()
                    continue
                moved = None if redirected else routes.moved(e, bucket, route, locate)
                redirected = redirected or redirect_of(e) is not None
                if moved is not None:
                    route = moved
                    url = route.endpoint.build_url(bucket, key, query)
                    if rewind is not None:
                        rewind()
                    continue
                without = (
                    None
                    if refused is not None
                    else self.dialect.retry_without(e, request.headers, method)
                )
                if without is not None:
                    if method != "HEAD":  # a HEAD's refusal holds once its retry succeeds
                        _log_refusal(operation, e.code, bucket, key)
                    refused = e.code
                    wanted = SecretHeaders((n, v) for n, v in wanted.items() if n in without)
                    if rewind is not None:
                        rewind()
                    continue
                throttled = is_throttle(e.status, e.code)
                if throttled:
                    throttle_heard()
                nxt = next_policy(policy, kind, status=e.status, code=e.code)
                if nxt is None:
                    say_clock_skew(e, self.signer.clock())
                    if isinstance(e, errors.AccessDenied):
                        say_signed_with(self.signer, e)
                    raise
                failed: errors.ObjsdkError = e
                retry_after = retry_after_of(e)
            except errors.TransportError as e:
                failure = network_failure(e)
                nxt = None if failure is None else next_policy(policy, kind, failure=failure)
                if nxt is None:
                    raise
                failed, retry_after, throttled = e, None, False
            else:
                if known is None:
                    routes.confirm(bucket, route)
                if refused is not None and method == "HEAD":
                    self.dialect.confirm_head_refusal()
                    _log_refusal(operation, refused, bucket, key)
                return result
            policy = nxt
            # An HTTP-date in Retry-After is counted on the signing clock.
            now = self.signer.clock() if retry_after else None
            seconds = pause(policy, retry_after, throttled=throttled, now=now)
            self._note(failed, len(policy.history), seconds, on_retry)
            watch = private_api.current_watch()
            if watch is None:
                time.sleep(seconds)
            elif watch.sleep(seconds):
                # Interrupted while waiting to retry (a reader closed, another part failed).
                raise errors.Cancelled(
                    f"{operation} cancelled before its retry (bucket {bucket!r}, key {key!r})"
                )
            if rewind is not None:
                rewind()

    @staticmethod
    def _note(
        e: errors.ObjsdkError,
        retry: int,
        seconds: float,
        on_retry: Callable[[errors.ObjsdkError], None] | None,
    ) -> None:
        # The message, not the error: a handler that keeps records (pytest's, a
        # MemoryHandler) would otherwise keep the error's frames, and with them the
        # caller's body buffer. The message names the operation, bucket and key.
        log.warning("%s; retrying in %.2f s (retry %d)", str(e), seconds, retry)
        # The failed attempt's frames hold the body; cleared now, they are freed at once
        # instead of by a later garbage collection (a BytesIO whose getbuffer() was sent
        # cannot be closed while they live).
        errors.drop_frame_locals(e)
        if on_retry is not None:
            on_retry(e)


@dataclass(frozen=True)
class Sending:
    """What a transport needs of a request beyond the signed request itself."""

    method: str
    operation: str
    bucket: str | None
    key: str | None
    stream: bool
    content_length: int | None
    ok: Collection[int]


class PipelinedTransport(ABC):
    """A transport whose requests all go through its :class:`Pipeline`: it implements
    :meth:`_attempt` (send one signed request once) and inherits
    :meth:`~objsdk._transport.base.Transport.request` and the rest."""

    pipeline: Pipeline

    @property
    def dialect(self) -> ChecksumDialect:
        return self.pipeline.dialect

    def with_sse(self, sse: SSE) -> PipelinedTransport:
        """This transport (its connections shared) for a client that encrypts with
        ``sse``: its pipeline adds ``sse``'s headers to every request they belong on."""
        twin = copy.copy(self)
        twin.pipeline = self.pipeline.with_sse(sse)
        return twin

    @abstractmethod
    def _send_file(self, put: FilePut) -> Mapping[str, str]:
        """Send ``put`` (retried by the pipeline); return the answer's headers."""

    def locate(self, bucket: str) -> Route:
        """See :meth:`objsdk._transport.base.Transport.locate`."""
        return self.pipeline.routes.locate(bucket, self.ask_region)

    def ask_region(self, bucket: str) -> str | None:
        """The region of ``bucket`` as the service names it in the answer to a HeadBucket
        (``x-amz-bucket-region``: S3 sends it whatever the status, 200, 301, 400 or
        403, and so does MinIO); None when the answer names none or none came: one
        attempt, and a failure is only logged."""
        pipeline = self.pipeline
        home = pipeline.routes.home
        url = home.endpoint.build_url(bucket)
        request = pipeline.sign("HEAD", url, {}, UNSIGNED_PAYLOAD, home.region)
        sending = Sending("HEAD", "bucket_region", bucket, None, False, None, ANY_STATUS)
        try:
            answer = self._attempt(sending, request, None)
        except errors.ObjsdkError as e:
            log.info("could not ask the region of bucket %r: %s", bucket, e)
            return None
        return bucket_region(answer.headers)

    def send_file(
        self,
        bucket: str,
        key: str,
        file: IO[bytes],
        *,
        offset: int,
        count: int,
        headers: Mapping[str, str],
        progress: Callable[[int], None] | None = None,
        operation: str = "upload",
        params: Iterable[tuple[str, str]] = (),
    ) -> Mapping[str, str]:
        """See :meth:`objsdk._transport.base.Transport.send_file`."""
        put = FilePut(bucket, key, file, offset, count, headers, progress, operation, tuple(params))
        return self._send_file(put)

    @abstractmethod
    def _attempt(self, sending: Sending, request: SignedRequest, body: Body) -> Response:
        """Send ``request`` once with ``body``; raise S3Error for an answer whose status
        is not in ``sending.ok``, TransportError for a failure."""

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
        payload_hash: str | None = None,
        stream: bool = False,
        content_length: int | None = None,
        ok: Collection[int] = (200,),
        idempotent: bool | None = None,
        body_errors: bool = False,
        on_retry: Callable[[errors.ObjsdkError], None] | None = None,
    ) -> Response:
        """See :meth:`objsdk._transport.base.Transport.request`."""
        sending = Sending(method, operation, bucket, key, stream, content_length, ok)

        def attempt(request: SignedRequest, body: Body) -> Response:
            answer = self._attempt(sending, request, body)
            if body_errors:
                raise_body_error(answer, operation, bucket, key)
            return answer

        return self.pipeline.run(
            method,
            attempt,
            operation=operation,
            bucket=bucket,
            key=key,
            params=params,
            headers=headers,
            payload_hash=payload_hash,
            idempotent=idempotent,
            body=body,
            on_retry=on_retry,
            locate=self.ask_region,
        )


def encrypting(transport: T, sse: SSE | None) -> T:
    """``transport`` itself without a setting, else its twin that sends ``sse``'s
    headers. Refuses SSE-C over plain HTTP (S3 does too: the key would travel in the
    clear), and a transport that has no request pipeline to add them in."""
    if sse is None:
        return transport
    if not isinstance(transport, PipelinedTransport):
        raise errors.InvalidArgument(
            f"server-side encryption needs a transport with a request pipeline, not "
            f"{type(transport).__name__}"
        )
    if sse.needs_tls and transport.pipeline.endpoint.scheme != "https":
        raise errors.InvalidArgument(
            f"SSE-C sends the encryption key with every request: it needs an https "
            f"endpoint, not {transport.pipeline.endpoint.url!r}"
        )
    twin: T = transport.with_sse(sse)  # type: ignore[assignment]
    return twin


def rewinder(body: object) -> Callable[[], None] | None:
    """For a file body: a function that puts it back where the first attempt found it
    (each attempt sends it from there). Bytes-like bodies need none."""
    if body is None or isinstance(body, (bytes, bytearray, memoryview)):
        return None
    seek, tell = getattr(body, "seek", None), getattr(body, "tell", None)
    if seek is None or tell is None:
        return None
    start = tell()
    return lambda: seek(start)


def _log_refusal(operation: str, code: str, bucket: str | None, key: str | None) -> None:
    """Say once that the client sends no more checksum headers (the dialect learned it)."""
    log.warning(
        "%s: the service refused a checksum header (%s); sending without checksum "
        "headers from now on (bucket %r, key %r)",
        operation,
        code,
        bucket,
        key,
    )


def network_failure(error: errors.TransportError) -> Exception | None:
    """What urllib3's ``Retry`` counts a transport failure as: a connect error
    (``ConnectTimeoutError``: the request never reached the server), a read error
    (``ReadTimeoutError``, ``ProtocolError``: it broke after it left), or None (TLS, an
    answer past a bound on what is held of it, :func:`refused_past_bound`, which the
    server would send again, or nothing known: not retried). Found from the original
    exception ``error`` was raised from; a failure with none (a mock's) by its class."""
    if refused_past_bound(error):
        return None
    for e in _chain(error.__cause__):
        if isinstance(e, urllib3.exceptions.ConnectTimeoutError):  # NewConnectionError too
            return e
        if isinstance(e, (ConnectionRefusedError, socket.gaierror)) or is_requests_error(
            e, "ConnectTimeout"
        ):
            connect = urllib3.exceptions.ConnectTimeoutError(str(e))
            connect.__cause__ = e  # the classifier tells a name that did not resolve
            return connect
        if isinstance(e, (urllib3.exceptions.SSLError, ssl.SSLError)) or is_requests_error(
            e, "SSLError"
        ):
            return None
        if isinstance(e, urllib3.exceptions.ReadTimeoutError):
            return e
        if isinstance(e, (TimeoutError, BlockingIOError)) or is_requests_error(e, "ReadTimeout"):
            return urllib3.exceptions.ReadTimeoutError(None, "", str(e))  # type: ignore[arg-type]
        if isinstance(e, urllib3.exceptions.ProtocolError):
            return e
        if isinstance(e, (http.client.HTTPException, ConnectionError)):
            return urllib3.exceptions.ProtocolError(str(e), e)
    if error.__cause__ is None:
        if isinstance(error, errors.ConnectError):
            return urllib3.exceptions.ConnectTimeoutError(str(error))
        if isinstance(error, (errors.Timeout, errors.ProtocolError)):
            return urllib3.exceptions.ProtocolError(str(error))
    elif isinstance(error, (errors.Timeout, errors.ProtocolError)):
        return urllib3.exceptions.ProtocolError(str(error))
    return None


def cannot_connect(error: errors.TransportError) -> bool:
    """Whether ``error`` is a failure to connect at all, the request never having
    reached a server: the connection refused, the host name not resolved, the TLS
    handshake failed (a :class:`~objsdk.errors.ConnectError` that :func:`network_failure`
    finds a connect error, or TLS). Not a connect timeout (a
    :class:`~objsdk.errors.Timeout`), nor a connection the server accepted and then
    reset or closed before answering: the server was reached (a ``ProtocolError``, on
    either path)."""
    if not isinstance(error, errors.ConnectError):
        return False
    failure = network_failure(error)
    return failure is None or isinstance(failure, urllib3.exceptions.ConnectTimeoutError)


def refused_past_bound(error: errors.TransportError) -> bool:
    """Whether ``error`` was raised from an answer refused for passing a bound on what is
    held of it (:func:`~objsdk._transport.answer_head.past_bound`)."""
    return any(past_bound(e) for e in _chain(error.__cause__))


def _chain(first: BaseException | None) -> Iterator[BaseException]:
    """``first`` and the exceptions inside it, outermost first: causes, contexts (up to
    the exception the caller was handling: see :mod:`~objsdk._core.failure_chain`),
    urllib3's ``reason`` and requests' wrapped first argument."""
    running = failure_chain.running_frames()
    seen: set[int] = set()
    stack = [first] if first is not None else []
    while stack:
        e = stack.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        inner: list[BaseException] = []
        reason = getattr(e, "reason", None)
        if isinstance(reason, BaseException):
            inner.append(reason)
        inner += [a for a in e.args if isinstance(a, BaseException)]
        inner += failure_chain.links(e, running)
        stack.extend(inner)
