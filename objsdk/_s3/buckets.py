"""Buckets: create, delete, exist, list, as the :class:`~objsdk.Client` methods
:class:`BucketsAPI` gives it."""

from __future__ import annotations

from objsdk import errors
from objsdk._core.addressing import check_bucket
from objsdk._core.s3xml import parse_list_buckets
from objsdk._core.signing import payload_sha256
from objsdk._transport.base import Transport
from objsdk.models import BucketInfo

__all__ = ["BucketsAPI"]


class BucketsAPI:
    """The :class:`~objsdk.Client` methods for buckets."""

    _transport: Transport
    region: str

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket`` (in the client's region)."""
        check_bucket(bucket)
        body = b""
        if self.region != "us-east-1":
            # us-east-1 is the default location and must not be named explicitly.
            body = (
                "<CreateBucketConfiguration><LocationConstraint>"
                f"{self.region}</LocationConstraint></CreateBucketConfiguration>"
            ).encode()
        self._transport.request(
            "PUT",
            operation="create_bucket",
            bucket=bucket,
            body=body,
            payload_hash=payload_sha256(body),
        )

    def delete_bucket(self, bucket: str) -> None:
        """Delete an empty bucket."""
        check_bucket(bucket)
        self._transport.request("DELETE", operation="delete_bucket", bucket=bucket, ok=(204, 200))

    def bucket_exists(self, bucket: str) -> bool:
        """True if ``bucket`` exists and is reachable; raises on access errors."""
        check_bucket(bucket)
        try:
            self._transport.request("HEAD", operation="bucket_exists", bucket=bucket)
        except errors.NoSuchBucket:
            return False
        return True

    def list_buckets(self) -> list[BucketInfo]:
        """All buckets the credentials can see."""
        resp = self._transport.request("GET", operation="list_buckets")
        return parse_list_buckets(resp.content)
