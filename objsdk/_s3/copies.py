"""Server-side copies: CopyObject."""

from __future__ import annotations

from objsdk._core.s3xml import parse_copy_result
from objsdk._core.signing import encode_key_path
from objsdk._transport.base import Transport
from objsdk.models import ObjectInfo

__all__ = ["copy_object"]


def copy_object(
    transport: Transport, src_bucket: str, src_key: str, dst_bucket: str, dst_key: str
) -> ObjectInfo:
    """Copy one object on the server (up to 5 GiB, S3's single-copy limit). A 200 whose
    body is an error (CopyObject may fail after the server sent 200) is that error,
    retried like any failed PUT when S3 asks for it (InternalError, SlowDown)."""
    resp = transport.request(
        "PUT",
        operation=f"copy_object(from {src_bucket}/{src_key})",
        bucket=dst_bucket,
        key=dst_key,
        headers={"x-amz-copy-source": f"/{src_bucket}/{encode_key_path(src_key)}"},
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
