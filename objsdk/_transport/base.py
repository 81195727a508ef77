"""The transport seam: what the layers above need from HTTP, as two protocols.

A :class:`Transport` sends one request through its pipeline
(:mod:`objsdk._transport.pipeline`: signed, its checksum headers chosen, retried) and
hands back a :class:`Response` whose body streams (``read``/``readinto``) or is read
whole (``content``). Every failure leaves it as an :mod:`objsdk.errors` exception
raised ``from`` the original: transport failures as
:class:`~objsdk.errors.TransportError`, S3 error answers as
:class:`~objsdk.errors.S3Error`. Nothing above this package sees ``requests``,
``urllib3`` or ``http.client``.

Implementations: :class:`~objsdk._transport.http.HTTPTransport` (requests/urllib3) and
:class:`~objsdk._transport.mock.MockTransport` (a function answers, for unit tests).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, Protocol

from objsdk._core.addressing import Endpoint, Route
from objsdk._core.signing import Credentials
from objsdk._transport.dialect import ChecksumDialect
from objsdk.errors import ObjsdkError

__all__ = [
    "Body",
    "FilePut",
    "Interruptible",
    "Response",
    "Transport",
    "flat_body",
]

Body = bytes | bytearray | memoryview | IO[bytes] | None


def flat_body(body: bytes | bytearray | memoryview) -> memoryview:
    """``body`` as a flat memoryview of bytes, over the caller's own memory."""
    view = memoryview(body)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


@dataclass(frozen=True)
class FilePut:
    """A PUT whose body is ``count`` bytes of ``file`` from ``offset`` (see
    :meth:`Transport.send_file`)."""

    bucket: str
    key: str
    file: IO[bytes]
    offset: int
    count: int
    headers: Mapping[str, str]
    progress: Callable[[int], None] | None = None
    operation: str = "upload"
    params: tuple[tuple[str, str], ...] = ()


class Response(Protocol):
    """One HTTP answer. Body reads raise :class:`~objsdk.errors.TransportError` when the
    connection breaks; reading past the end returns ``b""`` / 0."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]:
        """Case-insensitive."""
        ...

    @property
    def content(self) -> bytes:
        """The whole (rest of the) body."""
        ...

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes, fewer only at the end of the body."""
        ...

    def read1(self, n: int) -> bytes:
        """Up to ``n`` bytes with at most one receive from the network."""
        ...

    def readinto(self, view: memoryview) -> int:
        """Fill ``view`` straight from the network; fewer bytes only at the end."""
        ...

    def close(self) -> None:
        """Release the connection: back to the pool if the body was read to its end,
        else dropped."""
        ...


class Interruptible(Protocol):
    """Something a worker is blocked on that another thread may cut short."""

    def interrupt(self) -> None: ...


class Transport(Protocol):
    """Sends signed requests to one endpoint."""

    @property
    def endpoint(self) -> Endpoint: ...

    @property
    def region(self) -> str: ...

    @property
    def credentials(self) -> Credentials | None: ...

    @property
    def dialect(self) -> ChecksumDialect:
        """Which checksum headers requests carry (the pipeline drops the others)."""
        ...

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
        on_retry: Callable[[ObjsdkError], None] | None = None,
    ) -> Response:
        """Send one request; return the response if its status is in ``ok``, else raise
        its S3 error. With ``stream=False`` the body is read before returning.

        A file ``body`` must be seekable and come with its ``content_length``.
        ``payload_hash`` is the body's SHA-256 (hex) if known, else it is sent unsigned.
        Retries are the request pipeline's (:mod:`objsdk._transport.pipeline`): its
        classifier retries GET, HEAD, PUT, DELETE and the idempotent POSTs
        (DeleteObjects, CompleteMultipartUpload) after any failure, and
        CreateMultipartUpload after an error answer; ``idempotent=True`` says this
        request is safe to repeat whatever its method, ``False`` retries it only while
        it provably never left (connect errors), for a caller that runs its own retry
        policy (so that retries of timeouts never nest). ``body_errors``: a 200 whose
        body is an S3 error (CompleteMultipartUpload, CopyObject) is that error.
        ``on_retry(error)`` is told of each failure retried.
        """
        ...

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
        """PUT ``count`` bytes of a regular file from ``offset``; return the answer's
        headers. ``progress(sent)`` follows the body bytes of the current attempt. The
        file must not shrink meanwhile (:class:`~objsdk.errors.SourceChangedError`).
        ``params``: the query (``partNumber`` and ``uploadId`` for UploadPart). With
        :attr:`direct_file_bodies`, threads may send from one file at once: every read
        names its own offset."""
        ...

    def locate(self, bucket: str) -> Route:
        """Where ``bucket``'s requests go and the region they are signed for: the route a
        region redirect taught this transport, else the one the service names when asked
        (one HeadBucket, remembered; the client's own if it names none). For what sends
        no request of its own: presigned URLs."""
        ...

    @property
    def direct_file_bodies(self) -> bool:
        """Whether :meth:`send_file` hands a file's bytes to the socket inside the kernel
        (sendfile(2)), so that a body sent from a file needs no buffer of its own."""
        ...

    def watch(self) -> AbstractContextManager[Interruptible]:
        """Run this thread's requests so that another thread may interrupt them."""
        ...

    def close(self) -> None:
        """Release pooled connections."""
        ...
