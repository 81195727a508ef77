"""HEAD of one object: what every reader and transfer asks before it plans."""

from __future__ import annotations

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_key
from objsdk._core.object_headers import object_info_from_headers
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

__all__ = ["HeadAPI", "head_object"]


def head_object(
    transport: Transport, bucket: str, key: str, *, version_id: str | None = None
) -> ObjectInfo:
    """Size, ETag, dates, type, metadata, version and stored checksums of an object."""
    params = [("versionId", version_id)] if version_id else []
    resp = transport.request(
        "HEAD",
        operation="head_object",
        bucket=bucket,
        key=key,
        params=params,
        # Without this S3 omits the x-amz-checksum-* headers (HeadObject, ChecksumMode).
        headers={"x-amz-checksum-mode": "ENABLED"},
    )
    info = object_info_from_headers(bucket, key, resp.headers)
    if info.size is None:
        # Never a silent empty read: what a size-less answer means is unknown.
        length = resp.headers.get("Content-Length")
        what = "no Content-Length" if length is None else f"Content-Length {length!r}"
        raise errors.ProtocolError(
            f"HEAD answer has {what}, not a byte count",
            operation="head_object",
            bucket=bucket,
            key=key,
        )
    return info


class HeadAPI:
    """The :class:`~objsdk.Client` method for an object's description."""

    _transport: Transport

    def head_object(self, bucket: str, key: str, *, version_id: str | None = None) -> ObjectInfo:
        """Size, ETag, dates, type, metadata, version and stored checksums of an object."""
        check_bucket(bucket)
        check_key(key)
        return head_object(self._transport, bucket, key, version_id=version_id)
