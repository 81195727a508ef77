"""``copy``: one object to another on the server, of any size, by the cheapest route.

Up to ``multipart_threshold`` (5 GiB, the most one CopyObject takes, by default) one
CopyObject; above it, a multipart upload whose parts the server copies from the source
itself (UploadPartCopy, S3 API reference), ``parallel`` at a time: no byte of the object
crosses the network to this machine, as with ``aws s3 cp`` between buckets.

Either way the source is pinned to the ETag a HEAD found (``x-amz-copy-source-if-match``
on every request), so a source replaced mid-copy fails the copy with
:class:`~objsdk.ObjectChangedError` instead of splicing two versions, and the upload
is aborted on any failure or interruption: no parts are left behind. The copy keeps the
source's content type, metadata and standard headers, as CopyObject's ``COPY``
directive does, unless ``content_type``, ``metadata`` or a standard header is given:
then it has exactly those. The copy's size is checked against the source's.

One CopyObject gives the copy a full-object CRC32C the server computes. A copy made of
parts carries none (MinIO wants each part's CRC32C sent with an UploadPartCopy into an
upload that asks for one: every byte would have to be read here); reads of it are
checked against none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from objsdk import errors
from objsdk._core.addressing import check_count
from objsdk._core.object_headers import object_headers
from objsdk._core.parts import Part, plan_upload
from objsdk._core.sizes import GiB, MiB
from objsdk._io.pool import PartPool
from objsdk._s3.copies import REPLACED_HEADERS, copy_object, copy_source
from objsdk._s3.head import head_object
from objsdk._transfer.multipart_calls import (
    CompletedPart,
    abort_failed_upload,
    complete_multipart_upload,
    create_multipart_upload,
    upload_part_copy,
)
from objsdk._transfer.progress import Progress, ProgressTracker
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

__all__ = ["COPY_PARALLEL", "COPY_PART_SIZE", "MAX_SINGLE_COPY", "copy"]

# The largest object one CopyObject copies (S3 API reference, CopyObject).
MAX_SINGLE_COPY = 5 * GiB
# Parts the server copies: no bytes pass through this machine, so parts are large (a
# request each) and a few at a time keep the server busy.
COPY_PART_SIZE = 256 * MiB
COPY_PARALLEL = 8


def copy(
    transport: Transport,
    src_bucket: str,
    src_key: str,
    dst_bucket: str,
    dst_key: str,
    *,
    version_id: str | None = None,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    multipart_threshold: int = MAX_SINGLE_COPY,
    part_size: int | None = None,
    parallel: int | None = None,
    progress: Progress | None = None,
) -> ObjectInfo:
    """Copy ``src_key`` (its ``version_id``, else the current version) to ``dst_key``
    on the server, as the module says; return what the copy is (size, ETag, version,
    content type and metadata as stored). ``progress(done, total)`` follows
    :mod:`objsdk._transfer.progress`, called in the calling thread as each part is
    copied (once, at the end, for one CopyObject); an exception from it aborts the copy."""
    check_count("multipart_threshold", multipart_threshold, 0, src_bucket, src_key)
    if parallel is not None:
        check_count("parallel", parallel, 1, src_bucket, src_key)
    source = head_object(transport, src_bucket, src_key, version_id=version_id)
    size = source.size or 0
    tracker = ProgressTracker(progress, size)
    if source.etag is None:
        raise errors.ProtocolError(
            "HEAD answer has no ETag to pin the copy's source to",
            operation="copy",
            bucket=src_bucket,
            key=src_key,
        )
    if size <= min(multipart_threshold, MAX_SINGLE_COPY):
        with _changed_source(src_bucket, src_key, source):
            copy_object(
                transport,
                src_bucket,
                src_key,
                dst_bucket,
                dst_key,
                version_id=version_id,
                content_type=content_type,
                metadata=metadata,
                headers=headers,
                if_match=source.etag,
            )
    else:
        parts = plan_upload(size, part_size or max(COPY_PART_SIZE, -(-size // 10_000)))
        extra = dict(headers or {})
        replaces = (
            content_type is not None
            or metadata is not None
            or any(h.lower() in REPLACED_HEADERS for h in extra)
        )
        own = (
            object_headers(dst_bucket, dst_key, content_type, metadata)
            if replaces
            else _kept_headers(dst_bucket, dst_key, source)
        )
        hdrs = {**own, **extra}  # storage class, ACL: the copy's own either way
        with _changed_source(src_bucket, src_key, source):
            _copy_parts(
                transport,
                copy_source(src_bucket, src_key, version_id),
                source.etag,
                dst_bucket,
                dst_key,
                parts,
                hdrs,
                parallel or COPY_PARALLEL,
                tracker,
            )
    copied = head_object(transport, dst_bucket, dst_key)
    if copied.size != size:
        raise errors.IntegrityError(
            f"the copy holds {copied.size} bytes where its source held {size} "
            f"(s3://{src_bucket}/{src_key})",
            bucket=dst_bucket,
            key=dst_key,
        )
    tracker.finish(size)
    return copied


def _kept_headers(bucket: str, key: str, source: ObjectInfo) -> dict[str, str]:
    """The headers a CopyObject with the ``COPY`` directive would have kept."""
    kept = object_headers(bucket, key, source.content_type, source.metadata)
    for name, value in (
        ("Cache-Control", source.cache_control),
        ("Content-Encoding", source.content_encoding),
        ("Content-Disposition", source.content_disposition),
    ):
        if value:
            kept[name] = value
    return kept


def _copy_parts(
    transport: Transport,
    source: str,
    etag: str,
    bucket: str,
    key: str,
    parts: list[Part],
    headers: Mapping[str, str],
    parallel: int,
    tracker: ProgressTracker,
) -> None:
    """One multipart upload of ``parts``, each copied by the server from ``source``."""
    upload_id = create_multipart_upload(transport, bucket, key, headers=headers)
    try:
        done: dict[int, CompletedPart] = {}

        def send(part: Part) -> CompletedPart:
            return upload_part_copy(transport, bucket, key, upload_id, part, source, if_match=etag)

        def keep(part: Part, completed: CompletedPart) -> None:
            done[part.number] = completed
            tracker.add(part.length)

        with PartPool(min(parallel, len(parts)), name="copy", watch=transport.watch) as pool:
            pool.run(parts, send, on_done=keep)
        complete_multipart_upload(
            transport, bucket, key, upload_id, [done[p.number] for p in parts]
        )
    except BaseException as e:
        # The failure is what the caller needs; an abort that fails too is named on it.
        abort_failed_upload(transport, bucket, key, upload_id, e)
        raise


@contextlib.contextmanager
def _changed_source(bucket: str, key: str, source: ObjectInfo) -> Iterator[None]:
    """A failed ``if-match`` on the source, raised as the source having changed."""
    try:
        yield
    except errors.PreconditionFailed as e:
        raise errors.ObjectChangedError(
            f"object changed while being copied: it no longer has the ETag {source.etag}",
            bucket=bucket,
            key=key,
        ) from e
