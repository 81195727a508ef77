"""Deletes: DeleteObject, and DeleteObjects in batches of 1000 keys.

A key that an XML document cannot hold (a C0 control character other than tab, LF and
CR: XML 1.0 §2.2) cannot be named in a DeleteObjects body; such keys are deleted by
DeleteObject each, so one odd key does not fail the delete of a thousand others."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from itertools import islice

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_key
from objsdk._core.s3xml import build_delete_body, parse_delete_result, xml_carries
from objsdk._core.signing import payload_sha256
from objsdk._transport.base import Transport
from objsdk.models import DeleteError

__all__ = ["DELETE_BATCH", "DeletesAPI", "delete_object", "delete_objects"]

# DeleteObjects takes at most 1000 keys per request (S3 API reference, DeleteObjects).
DELETE_BATCH = 1000


def delete_object(
    transport: Transport, bucket: str, key: str, version_id: str | None = None
) -> None:
    """Delete ``key`` (S3 reports success for a key that does not exist); in a versioned
    bucket that adds a delete marker, and ``version_id`` deletes that version for good."""
    transport.request(
        "DELETE",
        operation="delete_object",
        bucket=bucket,
        key=key,
        params=[("versionId", version_id)] if version_id else (),
        ok=(204, 200),
    )


def delete_objects(transport: Transport, bucket: str, keys: Iterable[str]) -> list[DeleteError]:
    """Delete many keys, :data:`DELETE_BATCH` per request; return the keys that failed.

    Each batch is retried like any idempotent request (deleting a deleted key is a
    no-op): the retry classifier knows ``POST ?delete``. A key no XML body can name is
    deleted on its own; an S3 error answering it (but ``NoSuchBucket``) is reported
    like a batch's."""
    failures: list[DeleteError] = []
    it = iter(keys)
    while batch := list(islice(it, DELETE_BATCH)):
        for key in batch:
            check_key(key)
        named = [key for key in batch if xml_carries(key)]
        for key in (key for key in batch if not xml_carries(key)):
            try:
                delete_object(transport, bucket, key)
            except errors.NoSuchBucket:
                raise  # as a batch's answer would
            except errors.S3Error as e:
                failures.append(DeleteError(key=key, code=e.code, message=e.message))
        if not named:
            continue
        body = build_delete_body(named)
        resp = transport.request(
            "POST",
            operation="delete_objects",
            bucket=bucket,
            params=[("delete", "")],
            # DeleteObjects requires an integrity header (S3 API reference).
            headers={"Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode()},
            body=body,
            payload_hash=payload_sha256(body),
        )
        failures.extend(parse_delete_result(resp.content))
    return failures


class DeletesAPI:
    """The :class:`~objsdk.Client` methods that delete objects."""

    _transport: Transport

    def delete_object(self, bucket: str, key: str, *, version_id: str | None = None) -> None:
        """Delete ``key`` (S3 reports success for a key that does not exist); in a
        versioned bucket, that adds a delete marker, and ``version_id`` deletes that
        version for good."""
        check_bucket(bucket)
        check_key(key)
        delete_object(self._transport, bucket, key, version_id)

    def delete_objects(self, bucket: str, keys: Iterable[str]) -> list[DeleteError]:
        """Delete many keys, 1000 per request; return the keys that failed (empty if none).
        A str is refused, not taken as the keys of its characters."""
        check_bucket(bucket)
        if isinstance(keys, str | bytes | bytearray | memoryview):
            # Iterating "logs" names the keys "l", "o", "g" and "s": never what was meant.
            raise errors.InvalidArgument(
                f"delete_objects takes an iterable of keys, not one {type(keys).__name__} "
                f"({keys!r:.60}), for bucket {bucket!r}: pass [key], or call delete_object"
            )
        return delete_objects(self._transport, bucket, keys)
