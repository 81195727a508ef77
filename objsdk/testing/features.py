"""What an S3 service does where services differ, for tests that hold on any of them.

A server-neutral test asks ``s3_server.features`` instead of assuming MinIO: where the
service stores no checksum, for one, it asserts that objsdk reads the object unverified
(and says so) rather than that it was verified. docs/compatibility.md has the same table.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

__all__ = ["AWS", "MINIO", "MOTO", "S3Features", "features_from_env", "features_of"]


@dataclass(frozen=True)
class S3Features:
    """Where a service is known to differ from another.

    ``stores_put_checksum``: a single PUT's ``x-amz-checksum-crc32c`` is stored and
    returned (HEAD, GET with checksum mode), so later reads are verified.
    ``checks_checksums``: an UploadPart or PUT whose bytes do not match the checksum
    sent with them is refused (and a CompleteMultipartUpload whose full-object checksum
    does not match).
    ``refuses_own_bucket``: CreateBucket of a bucket the caller already owns fails
    (``BucketAlreadyOwnedByYou``); in AWS's us-east-1 it succeeds again.
    ``refuses_dot_segment_keys``: keys with empty, ``.`` or ``..`` segments, or a
    segment over 255 bytes, are refused (a file-system backed store).
    ``keep_alive``: connections are kept alive between requests.
    ``checks_signatures``: a request signed with wrong keys is refused.
    ``subsecond_last_modified``: ``LastModified`` keeps fractions of a second (a file's
    mtime can equal it).
    ``applies_acls``: a canned ACL sent with a write (``x-amz-acl: public-read``) is
    applied and read back by GetObjectAcl; MinIO accepts and ignores it, and a new AWS
    bucket enforces object ownership (ACLs disabled).
    ``stores_line_feed_keys``: a key holding a line feed can be written.
    ``checks_copy_source_if_match``: an UploadPartCopy whose source no longer has the
    ETag ``x-amz-copy-source-if-match`` names is refused (412).
    ``archives_objects``: an object written in the GLACIER or DEEP_ARCHIVE storage class
    is archived: GETs and copies of it are refused until a RestoreObject (MinIO refuses
    those classes unless tiering is set up).
    ``dates_uploads``: ListMultipartUploads says when each upload was initiated (moto
    gives every upload the same date in 2010).
    """

    stores_put_checksum: bool = True
    checks_checksums: bool = True
    refuses_own_bucket: bool = True
    refuses_dot_segment_keys: bool = False
    keep_alive: bool = True
    checks_signatures: bool = True
    subsecond_last_modified: bool = False
    applies_acls: bool = False
    stores_line_feed_keys: bool = True
    checks_copy_source_if_match: bool = True
    archives_objects: bool = True
    dates_uploads: bool = True


#: MinIO (the local one, single drive).
MINIO = S3Features(
    refuses_dot_segment_keys=True, subsecond_last_modified=True, archives_objects=False
)
#: moto's standalone server (5.x): it ignores checksums on PUT and UploadPart, in
#: us-east-1 lets CreateBucket succeed again, closes every connection, accepts any
#: signature, answers a PUT of a key holding a line feed with 404 NoSuchKey, copies
#: parts of whatever the source is now, whatever ETag the copy names, and dates every
#: multipart upload in 2010.
MOTO = S3Features(
    stores_put_checksum=False,
    checks_checksums=False,
    refuses_own_bucket=False,
    keep_alive=False,
    checks_signatures=False,
    applies_acls=True,
    stores_line_feed_keys=False,
    checks_copy_source_if_match=False,
    dates_uploads=False,
)
#: AWS S3 in us-east-1, the assumption for an endpoint that says nothing else.
AWS = S3Features(refuses_own_bucket=False)


def features_from_env(
    base: S3Features = AWS, environ: Mapping[str, str] | None = None
) -> S3Features:
    """``base`` with the changes ``OBJSDK_TEST_FEATURES`` lists, e.g.
    ``stores_put_checksum=0,keep_alive=1``."""
    env = os.environ if environ is None else environ
    spec = env.get("OBJSDK_TEST_FEATURES", "").strip()
    if not spec:
        return base
    known = {f.name for f in fields(S3Features)}
    changes: dict[str, bool] = {}
    for item in spec.split(","):
        name, _, value = item.strip().partition("=")
        if name not in known or value not in ("0", "1"):
            raise ValueError(
                f"OBJSDK_TEST_FEATURES: {item.strip()!r} is not NAME=0 or NAME=1 with NAME "
                f"one of {sorted(known)}"
            )
        changes[name] = value == "1"
    return replace(base, **changes)


def features_of(server: str, environ: Mapping[str, str] | None = None) -> S3Features:
    """The features of the suite's service by its name: ``minio``, ``moto`` or
    ``endpoint`` (AWS's, changed by ``OBJSDK_TEST_FEATURES``)."""
    if server == "minio":
        return MINIO
    if server == "moto":
        return MOTO
    return features_from_env(AWS, environ)
