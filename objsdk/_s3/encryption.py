"""``EncryptingTransport``: a transport that adds a server-side encryption setting's
headers to every request they belong on (which ones: :mod:`objsdk._core.sse`).

Wrapping the transport, rather than each operation, is what puts SSE-C's key on every
request of every path (each multipart part, each ranged GET of a read-ahead or a
parallel download, the HEAD before them) without each path having to remember it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import IO, Any

from objsdk import errors
from objsdk._core.addressing import Endpoint
from objsdk._core.signing import Credentials
from objsdk._core.sse import SSE, request_kind, sse_headers
from objsdk._transport.base import Body, Interruptible, Response, Transport
from objsdk._transport.dialect import ChecksumDialect

__all__ = ["EncryptingTransport", "encrypting"]


def encrypting(transport: Transport, sse: SSE | None) -> Transport:
    """``transport`` itself without a setting, else wrapped to send ``sse``'s headers.
    Refuses SSE-C over plain HTTP (S3 does too: the key would travel in the clear)."""
    if sse is None:
        return transport
    if sse.needs_tls and transport.endpoint.scheme != "https":
        raise errors.InvalidArgument(
            f"SSE-C sends the encryption key with every request: it needs an https "
            f"endpoint, not {transport.endpoint.url!r}"
        )
    return EncryptingTransport(transport, sse)


class EncryptingTransport:
    """A :class:`~objsdk._transport.base.Transport` adding ``sse``'s headers to the
    requests of ``inner`` they belong on; everything else is ``inner``'s."""

    def __init__(self, inner: Transport, sse: SSE) -> None:
        self.inner = inner
        self.sse = sse

    def __repr__(self) -> str:
        return f"EncryptingTransport({self.inner!r}, {self.sse!r})"

    @property
    def endpoint(self) -> Endpoint:
        return self.inner.endpoint

    @property
    def region(self) -> str:
        return self.inner.region

    @property
    def credentials(self) -> Credentials | None:
        return self.inner.credentials

    @property
    def direct_file_bodies(self) -> bool:
        return self.inner.direct_file_bodies

    @property
    def dialect(self) -> ChecksumDialect:
        return self.inner.dialect

    def _with(
        self,
        method: str,
        key: str | None,
        params: Iterable[tuple[str, str]],
        headers: Mapping[str, str] | None,
    ) -> tuple[list[tuple[str, str]], dict[str, str]]:
        query = list(params)
        given = dict(headers or {})
        kind = request_kind(method, key, dict(query), given)
        return query, {**given, **sse_headers(self.sse, kind)}

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
        query, hdrs = self._with(method, key, params, headers)
        return self.inner.request(
            method,
            operation=operation,
            bucket=bucket,
            key=key,
            params=query,
            headers=hdrs,
            body=body,
            payload_hash=payload_hash,
            stream=stream,
            content_length=content_length,
            ok=ok,
            idempotent=idempotent,
            body_errors=body_errors,
            on_retry=on_retry,
        )

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
        query, hdrs = self._with("PUT", key, params, headers)
        return self.inner.send_file(
            bucket,
            key,
            file,
            offset=offset,
            count=count,
            headers=hdrs,
            progress=progress,
            operation=operation,
            params=query,
        )

    def watch(self) -> AbstractContextManager[Interruptible]:
        return self.inner.watch()

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # Whatever else the wrapped transport offers (statistics, test hooks).
        return getattr(self.inner, name)
