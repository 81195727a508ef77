"""Deletes: DeleteObject, and DeleteObjects in batches of 1000 keys."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from itertools import islice

from objsdk._core.addressing import check_key
from objsdk._core.s3xml import build_delete_body, parse_delete_result
from objsdk._core.signing import payload_sha256
from objsdk._transport.base import Transport
from objsdk.models import DeleteError

__all__ = ["DELETE_BATCH", "delete_object", "delete_objects"]

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
    no-op): the retry classifier knows ``POST ?delete``."""
    failures: list[DeleteError] = []
    it = iter(keys)
    while batch := list(islice(it, DELETE_BATCH)):
        for key in batch:
            check_key(key)
        body = build_delete_body(batch)
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
