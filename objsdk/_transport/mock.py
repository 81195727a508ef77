"""A transport whose answers come from a function: the seam for unit tests.

::

    def handler(request: Request) -> MockResponse:
        assert request.method == "GET"
        return MockResponse(200, {"ETag": '"x"'}, b"hello")

    client = Client("http://s3.test", "AK", "SK", transport=MockTransport(handler))

Requests are signed like real ones (``request.headers`` carries ``Authorization``), and
error answers become :mod:`objsdk.errors` exactly as over the network. A handler may
raise an objsdk :class:`~objsdk.errors.TransportError` to stand for a network failure.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from objsdk import errors
from objsdk._core.addressing import Endpoint
from objsdk._core.signing import Credentials, CurrentCredentials
from objsdk._transport.base import Body, FilePut, Interruptible
from objsdk._transport.dialect import ChecksumDialect
from objsdk._transport.pipeline import Pipeline, PipelinedTransport, Sending, SignedRequest
from objsdk._transport.refusal import refusal
from objsdk._transport.retry import Policy as Retry
from objsdk._transport.retry import default_retry

__all__ = ["MockResponse", "MockTransport", "Request"]


@dataclass(frozen=True)
class Request:
    """What the code under test sent."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes
    operation: str
    bucket: str | None
    key: str | None


class _Headers(dict[str, str]):
    """A case-insensitive header mapping (names compared lower-cased)."""

    def __init__(self, items: Mapping[str, str]) -> None:
        super().__init__({k.lower(): v for k, v in items.items()})

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(name.lower(), default)


@dataclass
class MockResponse:
    """An answer: status, headers, body (streamed out of memory)."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    _pos: int = 0

    def __post_init__(self) -> None:
        self.headers = _Headers(self.headers)
        if "content-length" not in self.headers:
            self.headers["content-length"] = str(len(self.body))

    @property
    def content(self) -> bytes:
        self._pos = len(self.body)
        return self.body

    def read(self, n: int) -> bytes:
        data = self.body[self._pos : self._pos + n]
        self._pos += len(data)
        return data

    def read1(self, n: int) -> bytes:
        return self.read(n)

    def readinto(self, view: memoryview) -> int:
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._pos = len(self.body)


_TEST_CREDENTIALS = Credentials("AKIDEXAMPLE", "test-secret")


class _Watch:
    def interrupt(self) -> None:
        pass


class MockTransport(PipelinedTransport):
    """Answers every request by calling ``handler(request)``; records what was sent."""

    def __init__(
        self,
        handler: Callable[[Request], MockResponse],
        *,
        endpoint: str = "http://s3.test",
        credentials: Credentials | CurrentCredentials | None = _TEST_CREDENTIALS,
        region: str = "us-east-1",
        direct_file_bodies: bool = False,
        retry: Retry | None = None,
        dialect: ChecksumDialect | None = None,
        addressing_style: str = "path",
    ) -> None:
        """``retry``: the policy of the request pipeline (default: no retries, so a
        test sees each answer); ``dialect``: which checksum headers are sent;
        ``addressing_style``: how URLs name the bucket (see :class:`~objsdk.Client`)."""
        self.handler = handler
        #: Whether callers may send parts straight from a file (see Transport).
        self.direct_file_bodies = direct_file_bodies
        self.endpoint = Endpoint.parse(endpoint, addressing_style=addressing_style)
        self.region = region
        self.pipeline = Pipeline(
            self.endpoint,
            credentials,
            region,
            retry if retry is not None else default_retry(0),
            dialect,
        )
        self.requests: list[Request] = []
        self._lock = threading.Lock()

    @property
    def credentials(self) -> Credentials | None:
        """The credentials the next request is signed with (None: unsigned)."""
        return self.pipeline.signer.credentials

    def _attempt(self, sending: Sending, signed: SignedRequest, body: Body) -> MockResponse:
        request = Request(
            sending.method,
            signed.url,
            dict(signed.headers),
            _read_body(body),
            sending.operation,
            sending.bucket,
            sending.key,
        )
        with self._lock:
            self.requests.append(request)
        resp = self.handler(request)
        if resp.status not in sending.ok:
            raise refusal(
                resp.status,
                resp.headers,
                resp.body,
                sending.operation,
                sending.bucket,
                sending.key,
            )
        return resp

    def _send_file(self, put: FilePut) -> Mapping[str, str]:
        try:
            # pread: parts of one file may be sent from several threads at once.
            data = os.pread(put.file.fileno(), put.count, put.offset)
        except (AttributeError, OSError, ValueError):  # a stream that is not a file
            put.file.seek(put.offset)
            data = put.file.read(put.count)
        if len(data) < put.count:
            raise errors.SourceChangedError(f"the file ended {put.count - len(data)} bytes early")
        resp = self.request(
            "PUT",
            operation=put.operation,
            bucket=put.bucket,
            key=put.key,
            params=put.params,
            headers=put.headers,
            body=data,
        )
        if put.progress is not None:
            put.progress(put.count)
        return resp.headers

    @contextlib.contextmanager
    def _watch(self) -> Iterator[Interruptible]:
        yield _Watch()

    def watch(self) -> AbstractContextManager[Interruptible]:
        return self._watch()

    def close(self) -> None:
        pass


def _read_body(body: Body) -> bytes:
    if body is None:
        return b""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    return body.read()
