"""Buckets: CreateBucket, DeleteBucket, HeadBucket, ListBuckets, as S3 calls on a transport
and as the :class:`~objsdk.Client` methods :class:`BucketsAPI` gives it."""

from __future__ import annotations

from objsdk import errors
from objsdk._core.addressing import check_bucket
from objsdk._core.s3xml import parse_list_buckets
from objsdk._core.signing import payload_sha256
from objsdk._transport.base import Transport
from objsdk.models import BucketInfo

__all__ = ["BucketsAPI", "bucket_exists", "create_bucket", "delete_bucket", "list_buckets"]


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


class BucketsAPI:
    """The :class:`~objsdk.Client` methods for buckets."""

    _transport: Transport

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket`` (in the client's region)."""
        check_bucket(bucket)
        create_bucket(self._transport, bucket)

    def delete_bucket(self, bucket: str) -> None:
        """Delete an empty bucket."""
        check_bucket(bucket)
        delete_bucket(self._transport, bucket)

    def bucket_exists(self, bucket: str) -> bool:
        """True if ``bucket`` exists and is reachable; raises on access errors."""
        check_bucket(bucket)
        return bucket_exists(self._transport, bucket)

    def list_buckets(self) -> list[BucketInfo]:
        """All buckets the credentials can see."""
        return list_buckets(self._transport)
