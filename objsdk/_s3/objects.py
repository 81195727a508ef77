"""One object whole: PutObject (bytes-like data or a seekable file: ``Client.put_object``
and the small cases of ``upload()`` and ``ObjectWriter``) and GetObject into memory."""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, cast

from objsdk import errors
from objsdk._core.bytes_like import flat_view, is_bytes_like
from objsdk._core.checksums import crc32c_b64, encode_crc32c
from objsdk._core.object_headers import object_headers, upload_info
from objsdk._core.signing import UNSIGNED_PAYLOAD, payload_sha256
from objsdk._core.streams import SMALL_FILE_PUT, fill, refuse_text, stream_crc32c
from objsdk._transport.base import Body, Transport
from objsdk.models import ObjectInfo

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = ["put_bytes", "put_object"]


def put_bytes(
    transport: Transport,
    bucket: str,
    key: str,
    data: bytes | bytearray | memoryview,
    *,
    headers: Mapping[str, str],
    content_type: str | None,
    metadata: Mapping[str, str],
) -> ObjectInfo:
    """PUT ``data`` from its own buffer, without a copy, with its SHA-256 signed and a
    CRC32C the server checks and stores (so every later read can be verified)."""
    hdrs = {**headers, "x-amz-checksum-crc32c": crc32c_b64(data)}
    return _put(
        transport,
        bucket,
        key,
        data,
        memoryview(data).nbytes,
        payload_sha256(data),
        hdrs,
        content_type,
        metadata,
    )


def put_object(
    transport: Transport,
    bucket: str,
    key: str,
    data: ReadableBuffer | IO[bytes],
    *,
    content_type: str | None,
    metadata: Mapping[str, str] | None,
    extra_headers: Mapping[str, str] | None = None,
) -> ObjectInfo:
    """PUT bytes-like data (see :func:`put_bytes`) or a seekable binary file from its
    position to its end: up to ``SMALL_FILE_PUT`` read and sent as bytes, a larger one
    read once for its CRC32C, then streamed (never read whole; a retry rewinds it).
    ``extra_headers`` (Cache-Control, storage class...) go with it."""
    headers = {**object_headers(bucket, key, content_type, metadata), **(extra_headers or {})}
    meta = dict(metadata or {})
    if is_bytes_like(data):
        with flat_view(data, "put_object", bucket, key) as view:
            return put_bytes(
                transport,
                bucket,
                key,
                view,
                headers=headers,
                content_type=content_type,
                metadata=meta,
            )
    # Not bytes-like: a file, or what _span refuses.
    f = cast("IO[bytes]", data)
    start, length = _span(f, bucket, key)
    if length <= SMALL_FILE_PUT:
        # Read whole: sent from memory, its SHA-256 signed and its CRC32C from the very
        # bytes sent, for less CPU than a pass, a rewind and a file body.
        view = memoryview(bytearray(length))
        got = fill(f, view)
        if got != length:
            raise errors.SourceChangedError(
                f"the file ended {length - got} bytes early (bucket {bucket!r}, key {key!r})"
            )
        return put_bytes(
            transport, bucket, key, view, headers=headers, content_type=content_type, metadata=meta
        )
    # The server checks the bytes that arrive against the CRC32C read first (a file
    # that changes meanwhile is refused, not stored); the body is then streamed.
    crc = stream_crc32c(f, start, length)
    headers["x-amz-checksum-crc32c"] = encode_crc32c(crc)
    return _put(transport, bucket, key, f, length, UNSIGNED_PAYLOAD, headers, content_type, meta)


def _put(
    transport: Transport,
    bucket: str,
    key: str,
    body: Body,
    length: int,
    payload_hash: str,
    headers: Mapping[str, str],
    content_type: str | None,
    metadata: Mapping[str, str],
) -> ObjectInfo:
    resp = transport.request(
        "PUT",
        operation="put_object",
        bucket=bucket,
        key=key,
        headers=headers,
        body=body,
        content_length=length,
        payload_hash=payload_hash,
    )
    return upload_info(bucket, key, length, resp.headers, content_type, metadata)


def _span(f: IO[bytes], bucket: str, key: str) -> tuple[int, int]:
    """The file's position and the bytes from there to its end; refuses text files and
    streams that cannot rewind."""
    refuse_text(f, "put_object data", bucket, key)
    try:
        if not f.seekable():
            raise io.UnsupportedOperation
        pos = f.tell()
        end = f.seek(0, os.SEEK_END)
        f.seek(pos)
    except (AttributeError, OSError, io.UnsupportedOperation):
        raise errors.InvalidArgument(
            "put_object needs bytes-like data or a seekable binary file (so a retry can rewind "
            "it); "
            f"got {type(f).__name__} for bucket {bucket!r}, key {key!r}"
        ) from None
    return pos, max(0, end - pos)
