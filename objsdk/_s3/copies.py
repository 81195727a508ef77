"""Server-side copies: CopyObject, of one object or one version of it, keeping or
replacing its metadata and standard headers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from objsdk._core.addressing import check_bucket, check_key
from objsdk._core.metadata import ObjectHeaders, standard_headers
from objsdk._core.object_headers import object_headers
from objsdk._core.s3xml import parse_copy_result
from objsdk._core.signing import encode_key_path
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["REPLACED_HEADERS", "CopiesAPI", "check_copy_names", "copy_object", "copy_source"]

# The headers that S3 copies from the source unless the request replaces them all
# (x-amz-metadata-directive: REPLACE, CopyObject in the S3 API reference). The storage
# class and encryption are the copy's own whatever the directive.
REPLACED_HEADERS = ("content-type", "cache-control", "content-encoding", "content-disposition")


def copy_object(
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
    if_match: str | None = None,
) -> ObjectInfo:
    """Copy ``src_key`` (``version_id`` of it, else the current version) to ``dst_key``
    on the server (up to 5 GiB, S3's single-copy limit), with a full-object CRC32C the
    server computes for the copy; with ``if_match``, only while the source has that
    ETag (412 ``PreconditionFailed`` otherwise).

    Metadata and the standard headers come from the source, unless any of
    ``content_type``, ``metadata`` or a replaced header (Cache-Control,
    Content-Encoding, Content-Disposition) is given: then the copy has exactly those.
    A 200 whose body is an error (CopyObject may fail after the server sent 200) is that
    error, retried like any failed PUT when S3 asks for it (InternalError, SlowDown).
    """
    hdrs = {**object_headers(dst_bucket, dst_key, content_type, metadata), **(headers or {})}
    replace = metadata is not None or any(h.lower() in REPLACED_HEADERS for h in hdrs)
    hdrs["x-amz-copy-source"] = copy_source(src_bucket, src_key, version_id)
    # The copy gets a CRC32C of its own, computed by the server, as every object objsdk
    # writes: a source's checksum may not describe the copy as a whole (moto carries a
    # multipart source's composite CRC over to the single-part copy as if it were one).
    hdrs["x-amz-checksum-algorithm"] = "CRC32C"
    if if_match is not None:
        hdrs["x-amz-copy-source-if-match"] = if_match
    if replace:
        hdrs["x-amz-metadata-directive"] = "REPLACE"
    resp = transport.request(
        "PUT",
        operation=f"copy_object(from {src_bucket}/{src_key})",
        bucket=dst_bucket,
        key=dst_key,
        headers=hdrs,
        body_errors=True,
    )
    etag, last_modified = parse_copy_result(resp.content)
    return ObjectInfo(
        bucket=dst_bucket,
        key=dst_key,
        etag=etag,
        last_modified=last_modified,
        version_id=resp.headers.get("x-amz-version-id"),
    )


def check_copy_names(src_bucket: str, src_key: str, dst_bucket: str, dst_key: str) -> None:
    """Refuse a bad bucket or key at either end of a copy, before any request."""
    for bucket, key in ((src_bucket, src_key), (dst_bucket, dst_key)):
        check_bucket(bucket)
        check_key(key)


def copy_source(bucket: str, key: str, version_id: str | None) -> str:
    """The ``x-amz-copy-source`` naming an object, or one version of it (CopyObject,
    UploadPartCopy: the key URL-encoded, the version id a query)."""
    source = f"/{bucket}/{encode_key_path(key)}"
    if version_id:
        source += f"?versionId={quote(version_id, safe='')}"
    return source


class CopiesAPI:
    """The :class:`~objsdk.Client` method for server-side copies."""

    _transport: Transport

    def copy_object(
        self,
        src_bucket: str,
        src_key: str,
        dst_bucket: str,
        dst_key: str,
        *,
        version_id: str | None = None,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        **headers: Unpack[ObjectHeaders],
    ) -> ObjectInfo:
        """Server-side copy of one object (up to 5 GiB, S3's single-copy limit), of its
        ``version_id`` if given. The copy keeps the source's metadata and headers unless
        ``content_type``, ``metadata`` or a standard header (as :meth:`upload`) is given:
        then it has exactly those. See :func:`objsdk._s3.copies.copy_object`."""
        check_copy_names(src_bucket, src_key, dst_bucket, dst_key)
        return copy_object(
            self._transport,
            src_bucket,
            src_key,
            dst_bucket,
            dst_key,
            version_id=version_id,
            content_type=content_type,
            metadata=metadata,
            headers=standard_headers(dst_bucket, dst_key, **headers),
        )
