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
upload was created, while a lost reply might hide one (the caller then gets the error);
:func:`create_multipart_upload` says how such an upload is found and aborted. Any call
is retried after a throttling answer (429, SlowDown), which the server sends before it
does anything. The abort of an upload that failed goes on being retried for
:data:`ABORT_DEADLINE` (:func:`abort_failed_upload`): a server that throttles the upload
throttles its abort too.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import IO

from objsdk import errors
from objsdk._core.checksums import encode_crc32c
from objsdk._core.pagination import Pagination
from objsdk._core.parts import Part
from objsdk._core.s3xml import (
    PartListPage,
    UploadListPage,
    build_complete_body,
    parse_complete_result,
    parse_copy_result,
    parse_http_date,
    parse_list_multipart_uploads,
    parse_list_parts,
    parse_upload_id,
)
from objsdk._core.signing import payload_sha256
from objsdk._core.upload_record import ListedPart, abort_command
from objsdk._transport.base import Body, Transport
from objsdk._transport.pipeline import network_failure
from objsdk._transport.retry import RetryKind, retried
from objsdk.models import MultipartUpload

__all__ = [
    "ABORT_DEADLINE",
    "CompletedPart",
    "MultipartUpload",
    "abort_failed_upload",
    "abort_multipart_upload",
    "complete_multipart_upload",
    "create_multipart_upload",
    "list_multipart_uploads",
    "list_parts",
    "upload_part",
    "upload_part_copy",
    "upload_part_from_file",
    "uploads_older_than",
    "uploads_under",
    "with_crc",
]

log = logging.getLogger("objsdk")

# The window in which a lost CreateMultipartUpload reply's upload was initiated is
# measured on the server's clock: the listing's Date less the time since the first
# attempt. Date is in whole seconds (RFC 9110 §5.6.7), and so is Initiated on some
# services, perhaps stamped by another of their nodes: uploads initiated this much
# before the window still count.
_SERVER_CLOCK_SLACK = timedelta(seconds=1)

# How long the abort of an upload that failed, and will not be resumed, goes on being
# sent (each time retried by the transport as any DELETE) while it fails in a way that
# may pass: a throttling or server error answer, a network failure. Until it succeeds
# the parts stay on the server, billed; a minute outlasts a burst of throttling (S3
# scales a prefix up within minutes, "Best practices design patterns: optimizing
# Amazon S3 performance") without holding a failed upload's caller for long.
ABORT_DEADLINE = 60.0
# The pause before the abort is sent again once the transport's retries are spent:
# doubling from the first up to the last.
_ABORT_PAUSES = (1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class CompletedPart:
    """What S3 answered for one uploaded part. ``opaque``: the answer said the part is
    encrypted with SSE-KMS or SSE-C, whose ETags are not an MD5 of the bytes ("Checking
    object integrity": the ETag of an object encrypted so is not its MD5)."""

    number: int
    etag: str
    checksum_crc32c: str | None = None
    opaque: bool = False


def create_multipart_upload(
    transport: Transport, bucket: str, key: str, *, headers: Mapping[str, str] | None = None
) -> str:
    """Start an upload; return its upload id. ``headers`` carry content type,
    metadata and ``x-amz-checksum-algorithm``/``x-amz-checksum-type``.

    An attempt whose reply was lost (a 5xx from a proxy after the server created the
    upload, a connection dropped before the reply, an interruption while it was on its
    way) may have created an upload nobody knows the id of. So once an attempt has
    failed that way, the key's uploads are listed and the one it left is aborted (best
    effort): an upload of the key, other than the one returned, initiated since the
    first attempt as the server's clock tells (the listing's ``Date`` less the
    monotonic time since then: the local clock may be minutes off), by the initiator
    of the upload returned. If more than one qualifies, none is aborted and their ids
    are logged: an upload this client cannot tell is its own is never aborted. An
    error answer (a 403, say) with no failed attempt before it is a refusal, not a
    lost reply: nothing is listed.
    """
    started = time.monotonic()
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
    except errors.S3Error as e:
        # A 5xx may be a proxy's after the server created the upload; a 4xx (a 403 under
        # a policy without s3:PutObject, say) is the server's refusal: nothing was
        # created, unless an earlier attempt's reply was lost.
        if retried or e.status >= 500:
            _abort_lost(transport, bucket, key, started, keep=None)
        raise
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
    transport: Transport, bucket: str, key: str, started: float, *, keep: str | None
) -> None:
    """Abort the upload of ``key`` a lost reply left, if it can be told (see
    :func:`create_multipart_upload`); ``started`` is the first attempt's
    ``time.monotonic()``, ``keep`` the upload id the Create returned, if any."""
    try:
        uploads, since = _uploads_of(transport, bucket, key, started)
    except errors.ObjsdkError as e:
        log.warning(
            "could not look for an upload left by a lost CreateMultipartUpload reply "
            "(bucket %r, key %r): %s",
            bucket,
            key,
            e,
        )
        return
    lost = _lost_uploads(uploads, keep, since)
    if lost is not None and len(lost) == 1:
        abort_multipart_upload(transport, bucket, key, lost[0].upload_id)
        return
    candidates = [up for up in uploads if up.upload_id != keep] if lost is None else lost
    if candidates:
        log.warning(
            "CreateMultipartUpload of key %r in bucket %r lost a reply, and which of the "
            "uploads %s it left cannot be told: none is aborted",
            key,
            bucket,
            ", ".join(up.upload_id for up in candidates),
        )


def _lost_uploads(
    uploads: list[MultipartUpload], keep: str | None, since: datetime | None
) -> list[MultipartUpload] | None:
    """The uploads among ``uploads`` (all of one key) that a lost Create may have left:
    initiated since ``since`` (the first attempt, on the server's clock), by ``keep``'s
    initiator if ``keep`` is given. None if that cannot be judged: no ``since``, an
    upload without its ``Initiated`` time, or ``keep`` not among ``uploads``."""
    if since is None or any(up.initiated is None for up in uploads):
        return None
    since -= _SERVER_CLOCK_SLACK
    mine = [up for up in uploads if up.upload_id == keep]
    if keep is not None and not mine:
        return None
    return [
        up
        for up in uploads
        if up.upload_id != keep
        and (not mine or up.initiator == mine[0].initiator)
        and up.initiated is not None
        and up.initiated >= since
    ]


def _uploads_of(
    transport: Transport, bucket: str, key: str, started: float
) -> tuple[list[MultipartUpload], datetime | None]:
    """The uploads of ``key`` in progress, and the server's time at ``started`` (a
    ``time.monotonic()``): the first page's ``Date`` less the time from ``started`` to
    its arrival. None without a ``Date``."""
    uploads: list[MultipartUpload] = []
    since: datetime | None = None
    for n, (page, headers) in enumerate(_upload_pages(transport, bucket, key)):
        if n == 0:
            date = parse_http_date(headers.get("Date"))
            if date is not None:
                since = date - timedelta(seconds=time.monotonic() - started)
        uploads.extend(up for up in page if up.key == key)
    return uploads, since


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
    sse = (headers.get("x-amz-server-side-encryption") or "").lower()
    opaque = sse.startswith("aws:kms") or bool(
        headers.get("x-amz-server-side-encryption-customer-algorithm")
    )
    return CompletedPart(part.number, etag, headers.get("x-amz-checksum-crc32c"), opaque)


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


def abort_multipart_upload(
    transport: Transport, bucket: str, key: str, upload_id: str, *, deadline: float = 0.0
) -> None:
    """Abandon an upload so its parts are freed (a missing upload is not an error).

    The DELETE is retried by the transport as any; with ``deadline`` (seconds), once
    those retries are spent on a failure that may pass (one the classifier retries for
    a DELETE: a throttling or server error answer, a network failure), it is sent again
    after a pause, until ``deadline`` seconds after the first attempt. A refusal (403)
    is raised at once. Errors name the upload id (the operation is
    ``abort_multipart_upload(<id>)``), so it can be aborted by hand.
    """
    started = time.monotonic()
    for attempt in itertools.count():
        try:
            transport.request(
                "DELETE",
                operation=f"abort_multipart_upload({upload_id})",
                bucket=bucket,
                key=key,
                params=[("uploadId", upload_id)],
                ok=(204, 200),
            )
            return
        except errors.S3Error as e:
            if e.code == "NoSuchUpload":
                return
            if not retried(RetryKind.ALWAYS, status=e.status, code=e.code):
                raise
            left = started + deadline - time.monotonic()
            if left <= 0:
                raise
        except errors.TransportError as e:
            failure = network_failure(e)
            if failure is None or not retried(RetryKind.ALWAYS, failure=failure):
                raise
            left = started + deadline - time.monotonic()
            if left <= 0:
                raise
        time.sleep(min(_ABORT_PAUSES[min(attempt, len(_ABORT_PAUSES) - 1)], left))


def abort_failed_upload(
    transport: Transport,
    bucket: str,
    key: str,
    upload_id: str,
    failure: BaseException | None,
) -> None:
    """Abort an upload that failed and will not be resumed, retrying the abort for
    :data:`ABORT_DEADLINE`. If it still fails, a warning names the upload id, and so
    does ``failure``, the error that ended the upload, which the caller raises (as a
    note: PEP 678, Python 3.11 and later); with no ``failure`` (an abort asked for, or
    a writer collected unclosed) the abort's own error is raised, which names it. A
    bucket gone takes its uploads with it: that is no failure."""
    try:
        abort_multipart_upload(transport, bucket, key, upload_id, deadline=ABORT_DEADLINE)
    except errors.NoSuchBucket:
        pass
    except Exception as e:
        text = (
            f"the multipart upload {upload_id} of bucket {bucket!r}, key {key!r} could not be "
            f"aborted ({e}): its parts stay, billed, until it is aborted by hand "
            f"(`{abort_command(bucket, key, upload_id)}`) or a lifecycle rule removes it"
        )
        log.warning("%s", text)
        if failure is None:
            raise
        add_note = getattr(failure, "add_note", None)
        if add_note is not None:
            add_note(text)


def list_multipart_uploads(
    transport: Transport, bucket: str, prefix: str = ""
) -> Iterator[MultipartUpload]:
    """Uploads started and neither completed nor aborted, under ``prefix``."""
    for page, _headers in _upload_pages(transport, bucket, prefix):
        yield from page


def uploads_under(
    transport: Transport, bucket: str, prefix: str = "", *, exact: bool = False
) -> Iterator[MultipartUpload]:
    """The uploads in progress whose key starts with ``prefix`` (``exact``: whose key
    is ``prefix``). MinIO matches ListMultipartUploads' ``prefix`` against whole keys
    only: a prefix it lists no other key under (none, or only uploads of the key
    ``prefix`` itself) is listed again as the whole bucket, filtered here."""
    for page, _headers in _pages(transport, bucket, prefix, exact):
        yield from page


def _pages(
    transport: Transport, bucket: str, prefix: str, exact: bool
) -> Iterator[tuple[list[MultipartUpload], Mapping[str, str]]]:
    if not exact:
        yield from _pages_under(transport, bucket, prefix)
        return
    # Every service lists the uploads of the key among those its prefix names.
    for page, headers in _upload_pages(transport, bucket, prefix):
        yield [up for up in page if up.key == prefix], headers


def _pages_under(
    transport: Transport, bucket: str, prefix: str
) -> Iterator[tuple[list[MultipartUpload], Mapping[str, str]]]:
    seen: set[tuple[str, str]] = set()
    for page, headers in _upload_pages(transport, bucket, prefix):
        seen.update((up.key, up.upload_id) for up in page)
        yield page, headers
    if prefix and all(key == prefix for key, _ in seen):
        # (S3 itself listed every key under the prefix: then there is none but it.)
        for page, headers in _upload_pages(transport, bucket, ""):
            more = [up for up in page if up.key.startswith(prefix)]
            yield [up for up in more if (up.key, up.upload_id) not in seen], headers


def uploads_older_than(
    transport: Transport, bucket: str, prefix: str, age: timedelta | None, *, exact: bool = False
) -> list[MultipartUpload]:
    """The uploads under ``prefix`` (``exact``: of the key ``prefix``) initiated more
    than ``age`` ago (None: all of them), as the server's clock tells: its first
    answer's ``Date`` (else this machine's clock), so a local clock that is off ages no
    upload wrongly. An upload listed without its ``Initiated`` time is never old enough."""
    found: list[MultipartUpload] = []
    cutoff: datetime | None = None
    for n, (page, headers) in enumerate(_pages(transport, bucket, prefix, exact)):
        if n == 0 and age is not None:
            now = parse_http_date(headers.get("Date")) or datetime.now(timezone.utc)
            cutoff = now - age
        found += [
            up
            for up in page
            if cutoff is None or (up.initiated is not None and up.initiated <= cutoff)
        ]
    return found


def _upload_pages(
    transport: Transport, bucket: str, prefix: str
) -> Iterator[tuple[list[MultipartUpload], Mapping[str, str]]]:
    """ListMultipartUploads page by page: each page's uploads and answer headers."""
    key_marker = upload_marker = ""
    walk = Pagination("list_multipart_uploads", bucket, prefix)
    while True:
        params = [("uploads", ""), ("prefix", prefix), ("encoding-type", "url")]
        if key_marker:
            params += [("key-marker", key_marker), ("upload-id-marker", upload_marker)]
        with errors.naming_prefix(prefix):
            resp = transport.request(
                "GET", operation="list_multipart_uploads", bucket=bucket, params=params
            )
        page: UploadListPage = walk.parse(parse_list_multipart_uploads, resp.content)
        yield [MultipartUpload(*up) for up in page.uploads], resp.headers
        if not page.is_truncated:
            return
        key_marker = page.next_key_marker or ""
        upload_marker = page.next_upload_id_marker or ""
        walk.next_page(
            len(page.uploads), [("key-marker", key_marker), ("upload-id-marker", upload_marker)]
        )


def list_parts(transport: Transport, bucket: str, key: str, upload_id: str) -> Iterator[ListedPart]:
    """The parts the service stored for an upload (ListParts), page by page: a page
    holds up to 1,000 parts (S3's default ``max-parts``), so an upload of 10,000 parts
    costs ten requests at most. ``NoSuchUpload`` if the upload is gone."""
    marker = ""
    walk = Pagination("list_parts", bucket)
    while True:
        params = [("uploadId", upload_id)]
        if marker:
            params.append(("part-number-marker", marker))
        resp = transport.request(
            "GET", operation="list_parts", bucket=bucket, key=key, params=params
        )
        page: PartListPage = parse_list_parts(resp.content)
        for number, size, etag, crc in page.parts:
            yield ListedPart(number, size, etag, crc)
        if not page.is_truncated:
            return
        marker = page.next_marker or ""
        walk.next_page(len(page.parts), [("part-number-marker", marker)])
