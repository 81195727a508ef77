"""Buckets: CreateBucket, DeleteBucket, HeadBucket, ListBuckets."""

from __future__ import annotations

from objsdk import errors
from objsdk._core.s3xml import parse_list_buckets
from objsdk._core.signing import payload_sha256
from objsdk._transport.base import Transport
from objsdk.models import BucketInfo

__all__ = ["bucket_exists", "create_bucket", "delete_bucket", "list_buckets"]


def create_bucket(transport: Transport, bucket: str) -> None:
    """Create ``bucket`` in the transport's region."""
    body = b""
    if transport.region != "us-east-1":
        # us-east-1 is the default location and must not be named explicitly.
        body = (
            "<CreateBucketConfiguration><LocationConstraint>"
            f"{transport.region}</LocationConstraint></CreateBucketConfiguration>"
        ).encode()
    transport.request(
        "PUT",
        operation="create_bucket",
        bucket=bucket,
        body=body,
        payload_hash=payload_sha256(body),
    )


def delete_bucket(transport: Transport, bucket: str) -> None:
    """Delete an empty bucket."""
    transport.request("DELETE", operation="delete_bucket", bucket=bucket, ok=(204, 200))


def bucket_exists(transport: Transport, bucket: str) -> bool:
    """True if ``bucket`` exists and is reachable; raises on access errors."""
    try:
        transport.request("HEAD", operation="bucket_exists", bucket=bucket)
    except errors.NoSuchBucket:
        return False
    return True


def list_buckets(transport: Transport) -> list[BucketInfo]:
    """All buckets the credentials can see."""
    resp = transport.request("GET", operation="list_buckets")
    return parse_list_buckets(resp.content)
