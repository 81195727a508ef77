"""The S3 calls of a multipart upload: create, upload a part (from memory or a file) or
have the server copy one (UploadPartCopy), complete, abort and list.

Retries are the request pipeline's, as its classifier
(:func:`~objsdk._transport.retry.retry_kind`) sorts each call: parts are PUTs, retried
whole. CompleteMultipartUpload is documented as safe to retry with the same upload id
and part list (S3 API reference, CompleteMultipartUpload), so it is retried on network
failures, 5xx answers and 200-with-error answers; if a retry finds the upload gone
(NoSuchUpload) because an earlier attempt completed it and its reply was lost, a HEAD
checks that the object is there with the size and CRC32C we sent, and that counts as
success. CreateMultipartUpload is retried on 5xx answers only: an answer means no
upload was created, while a lost reply might hide one (the caller then gets the error).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import IO

from objsdk import errors
from objsdk._core.checksums import encode_crc32c
from objsdk._core.parts import Part
from objsdk._core.s3xml import (
    build_complete_body,
    parse_complete_result,
    parse_copy_result,
    parse_list_multipart_uploads,
    parse_upload_id,
)
from objsdk._core.signing import payload_sha256
from objsdk._transport.base import Body, Transport

__all__ = [
    "CompletedPart",
    "MultipartUpload",
    "abort_multipart_upload",
    "complete_multipart_upload",
    "create_multipart_upload",
    "list_multipart_uploads",
    "upload_part",
    "upload_part_copy",
    "upload_part_from_file",
    "with_crc",
]

log = logging.getLogger("objsdk")

# Servers' clocks may run behind ours: uploads initiated this much before our first
# attempt still count as possibly ours.
_CLOCK_SKEW = timedelta(seconds=2)


@dataclass(frozen=True)
class CompletedPart:
    """What S3 answered for one uploaded part."""

    number: int
    etag: str
    checksum_crc32c: str | None = None


@dataclass(frozen=True)
class MultipartUpload:
    """An upload in progress, as ListMultipartUploads reports it."""

    key: str
    upload_id: str
    initiated: datetime | None = None


def create_multipart_upload(
    transport: Transport, bucket: str, key: str, *, headers: Mapping[str, str] | None = None
) -> str:
    """Start an upload; return its upload id. ``headers`` carry content type,
    metadata and ``x-amz-checksum-algorithm``/``x-amz-checksum-type``.

    An attempt whose answer was lost (a 5xx from a proxy after the server created the
    upload, a connection dropped before the reply, an interruption while it was on its
    way) may have created an upload nobody knows the id of. So once attempts have failed
    or been interrupted, uploads of this key that were initiated since the first
    attempt, other than the one returned, are aborted (best effort; another writer of
    the same key in the same seconds would see its upload fail, never a torn object).
    """
    started = datetime.now(timezone.utc) - _CLOCK_SKEW
    retried: list[errors.ObjsdkError] = []
    try:
        # POST ?uploads: retried after an error answer (nothing was created), never
        # after a lost reply (see the retry classifier).
        resp = transport.request(
            "POST",
            operation="create_multipart_upload",
            bucket=bucket,
            key=key,
            params=[("uploads", "")],
            headers=headers,
            on_retry=retried.append,
        )
    except BaseException:
        # Also when interrupted (Ctrl-C, SIGTERM) while the answer was on its way: the
        # server may have created the upload already.
        _abort_lost(transport, bucket, key, started, keep=None)
        raise
    upload_id = parse_upload_id(resp.content)
    if not upload_id:
        raise errors.ProtocolError(
            "no UploadId in the answer", operation="create_multipart_upload", bucket=bucket, key=key
        )
    if retried:
        _abort_lost(transport, bucket, key, started, keep=upload_id)
    return upload_id


def _abort_lost(
    transport: Transport, bucket: str, key: str, since: datetime, *, keep: str | None
) -> None:
    """Abort uploads of ``key`` initiated since ``since`` but ``keep`` (a lost reply's)."""
    try:
        for up in list_multipart_uploads(transport, bucket, key):
            if up.key != key or up.upload_id == keep:
                continue
            if up.initiated is not None and up.initiated < since:
                continue
            abort_multipart_upload(transport, bucket, key, up.upload_id)
    except errors.ObjsdkError:
        log.warning(
            "could not look for uploads left by a lost CreateMultipartUpload reply "
            "(bucket %r, key %r)",
            bucket,
            key,
            exc_info=True,
        )


def upload_part(
    transport: Transport,
    bucket: str,
    key: str,
    upload_id: str,
    part: Part,
    body: Body,
    *,
    checksum_crc32c: str | None = None,
    payload_hash: str | None = None,
) -> CompletedPart:
    """Upload one part from ``body`` (bytes-like, or a seekable file positioned at the
    part's first byte), with its SHA-256 signed if ``payload_hash`` is given. PUT is
    idempotent, so the transport retries it whole."""
    headers = {}
    if checksum_crc32c:
        headers["x-amz-checksum-crc32c"] = checksum_crc32c
    resp = transport.request(
        "PUT",
        operation=f"upload_part({part.number})",
        bucket=bucket,
        key=key,
        params=[("partNumber", str(part.number)), ("uploadId", upload_id)],
        headers=headers,
        body=body,
        content_length=part.length,
        payload_hash=payload_hash,
    )
    return _completed(part, resp.headers, bucket, key)


def upload_part_from_file(
    transport: Transport,
    bucket: str,
    key: str,
    upload_id: str,
    part: Part,
    file: IO[bytes],
    offset: int,
    *,
    checksum_crc32c: str,
) -> CompletedPart:
    """Upload one part from a regular ``file`` at ``offset`` by ``Transport.send_file``.
    The server checks ``checksum_crc32c``: bytes changed since then fail the part."""
    answer = transport.send_file(
        bucket,
        key,
        file,
        offset=offset,
        count=part.length,
        headers={"x-amz-checksum-crc32c": checksum_crc32c},
        operation=f"upload_part({part.number})",
        params=[("partNumber", str(part.number)), ("uploadId", upload_id)],
    )
    return _completed(part, answer, bucket, key)


def upload_part_copy(
    transport: Transport,
    bucket: str,
    key: str,
    upload_id: str,
    part: Part,
    source: str,
    *,
    if_match: str,
) -> CompletedPart:
    """Have the server copy ``part``'s bytes of ``source`` (an ``x-amz-copy-source``)
    into the upload, while the source has the ETag ``if_match`` (a 412
    ``PreconditionFailed`` otherwise). Like CopyObject, it may fail after a 200: that
    body is the error. A PUT: the transport retries it whole."""
    resp = transport.request(
        "PUT",
        operation=f"upload_part_copy({part.number})",
        bucket=bucket,
        key=key,
        params=[("partNumber", str(part.number)), ("uploadId", upload_id)],
        headers={
            "x-amz-copy-source": source,
            "x-amz-copy-source-range": f"bytes={part.start}-{part.stop - 1}",
            "x-amz-copy-source-if-match": if_match,
        },
        body_errors=True,
    )
    etag, _ = parse_copy_result(resp.content)
    if not etag:
        raise errors.ProtocolError(
            f"no ETag for part {part.number}", operation="upload_part_copy", bucket=bucket, key=key
        )
    return CompletedPart(part.number, etag)


def with_crc(completed: CompletedPart, crc: int) -> CompletedPart:
    """The part's CRC32C as sent, where the server's answer did not repeat it."""
    if completed.checksum_crc32c:
        return completed
    return replace(completed, checksum_crc32c=encode_crc32c(crc))


def _completed(part: Part, headers: Mapping[str, str], bucket: str, key: str) -> CompletedPart:
    etag = headers.get("ETag")
    if not etag:
        raise errors.ProtocolError(
            f"no ETag for part {part.number}", operation="upload_part", bucket=bucket, key=key
        )
    return CompletedPart(part.number, etag, headers.get("x-amz-checksum-crc32c"))


def complete_multipart_upload(
    transport: Transport,
    bucket: str,
    key: str,
    upload_id: str,
    parts: Iterable[CompletedPart],
    *,
    headers: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Assemble the parts, retrying as the module says; return the answer's headers
    plus its ``ETag``, ``ChecksumCRC32C`` and ``ChecksumType`` fields."""
    body = build_complete_body((p.number, p.etag, p.checksum_crc32c) for p in parts)
    # POST ?uploadId is retried as idempotent, a 200 whose body is an error too.
    resp = transport.request(
        "POST",
        operation="complete_multipart_upload",
        bucket=bucket,
        key=key,
        params=[("uploadId", upload_id)],
        headers=headers,
        body=body,
        payload_hash=payload_sha256(body),
        body_errors=True,
    )
    result = dict(resp.headers)
    parsed = parse_complete_result(resp.content)
    for name, value in (
        ("ETag", parsed.etag),
        ("ChecksumCRC32C", parsed.checksum_crc32c),
        ("ChecksumType", parsed.checksum_type),
    ):
        if value:
            result[name] = value
    return result


def abort_multipart_upload(transport: Transport, bucket: str, key: str, upload_id: str) -> None:
    """Abandon an upload so its parts are freed (a missing upload is not an error)."""
    try:
        transport.request(
            "DELETE",
            operation="abort_multipart_upload",
            bucket=bucket,
            key=key,
            params=[("uploadId", upload_id)],
            ok=(204, 200),
        )
    except errors.S3Error as e:
        if e.code != "NoSuchUpload":
            raise


def list_multipart_uploads(
    transport: Transport, bucket: str, prefix: str = ""
) -> Iterator[MultipartUpload]:
    """Uploads started and neither completed nor aborted, under ``prefix``."""
    key_marker = upload_marker = ""
    while True:
        params = [("uploads", ""), ("prefix", prefix), ("encoding-type", "url")]
        if key_marker:
            params += [("key-marker", key_marker), ("upload-id-marker", upload_marker)]
        with errors.naming_prefix(prefix):
            resp = transport.request(
                "GET", operation="list_multipart_uploads", bucket=bucket, params=params
            )
        page = parse_list_multipart_uploads(resp.content)
        for key, upload_id, initiated in page.uploads:
            yield MultipartUpload(key, upload_id, initiated)
        if not page.next_key_marker:
            return
        key_marker = page.next_key_marker
        upload_marker = page.next_upload_id_marker or ""
