"""What a completed multipart upload stored, confirmed against the client's own CRC32C.

A service that checks the checksums it is sent (S3, MinIO) refuses a part or a
CompleteMultipartUpload whose bytes do not match, and echoes the object's CRC32C in
Complete's answer. A service that checks none (moto's server) stores whatever bytes
arrived, so a part changed after its CRC32C was computed is stored changed while the
client believes its checksum. Such a service may still compute the object's checksum
from the bytes it assembled and return it on a HEAD with ``x-amz-checksum-mode``
(moto does): when Complete's answer names no CRC32C, one HEAD asks for it. A different
CRC32C on the object Complete made (same ETag) is a stored corruption: the object
is deleted and :class:`~objsdk.errors.IntegrityError` raised. No checksum in the
HEAD either means the service keeps none: nothing is claimed (reads will be
unverified, and say so). An object replaced between Complete and the HEAD (another
ETag) cannot be checked; nothing is claimed for it either.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from objsdk import errors
from objsdk._s3.deletes import delete_object
from objsdk._s3.head import head_object
from objsdk._transport.base import Transport

__all__ = ["confirm_completed"]

log = logging.getLogger("objsdk")


def confirm_completed(
    transport: Transport, bucket: str, key: str, crc32c: str, answer: Mapping[str, str]
) -> dict[str, str]:
    """Complete's ``answer`` (headers plus its XML fields), with the object's CRC32C as
    the service reports it; raises IntegrityError (after deleting the object) when the
    service reports a CRC32C other than ``crc32c`` (base64) for the object."""
    found = {k.lower(): v for k, v in answer.items()}
    reported = found.get("checksumcrc32c") or found.get("x-amz-checksum-crc32c")
    result = dict(answer)
    version = found.get("x-amz-version-id")
    version = None if version in (None, "", "null") else version
    if reported is None:
        try:
            head = head_object(transport, bucket, key, version_id=version)
        except errors.ObjsdkError:
            return result  # cannot confirm: nothing more is claimed
        if head.etag != found.get("etag") or "crc32c" not in head.checksums:
            return result
        reported = head.checksums["crc32c"]
        result["x-amz-checksum-crc32c"] = reported
        result.setdefault("x-amz-checksum-type", head.checksum_type or "FULL_OBJECT")
    if reported == crc32c:
        return result
    try:
        delete_object(transport, bucket, key, version)
        fate = "it was deleted"
    except errors.ObjsdkError:
        log.warning("could not delete corrupt object (bucket %r, key %r)", bucket, key)
        fate = "it could not be deleted: delete it"
    raise errors.IntegrityError(
        f"complete_multipart_upload: the service stored an object whose CRC32C is "
        f"{reported}, the bytes sent give {crc32c}; {fate}",
        bucket=bucket,
        key=key,
    )
