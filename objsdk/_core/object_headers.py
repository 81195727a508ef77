"""Object headers both ways: metadata and content type into request headers, response
headers into :class:`~objsdk.models.ObjectInfo` (pure)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

from objsdk import errors
from objsdk._core.ranges import parse_content_length
from objsdk._core.s3xml import parse_http_date
from objsdk.models import ObjectInfo

__all__ = [
    "CHECKSUM_ALGORITHMS",
    "multipart_etag",
    "object_headers",
    "object_info_from_headers",
    "stored_checksums",
    "upload_info",
]

# Checksum algorithms S3 may store and return as x-amz-checksum-<name>.
CHECKSUM_ALGORITHMS = ("crc32", "crc32c", "crc64nvme", "sha1", "sha256")

# Header names are RFC 9110 tokens; S3 stores user metadata keys lower-cased.
_META_KEY_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
_META_VALUE_RE = re.compile(r"^[\x20-\x7e]*$")
_MD5_RE = re.compile(r"^[0-9a-fA-F]{32}$")


def object_headers(
    bucket: str, key: str, content_type: str | None, metadata: Mapping[str, str] | None
) -> dict[str, str]:
    """``Content-Type`` and ``x-amz-meta-*`` headers, refusing what S3 would mangle: a
    value outside printable ASCII, and two metadata keys that differ only in case (S3
    stores one, lower-cased: the other value would be lost)."""
    headers = {}
    if content_type:
        if not isinstance(content_type, str) or not _META_VALUE_RE.match(content_type):
            # Sent as it is, a non-ASCII value fails the signature check on the server:
            # a 403 SignatureDoesNotMatch that says nothing of the content type.
            raise errors.InvalidArgument(
                f"content_type must be a string of printable ASCII, got {content_type!r} "
                f"(bucket {bucket!r}, key {key!r})"
            )
        headers["Content-Type"] = content_type
    given: dict[str, str] = {}
    for name, value in (metadata or {}).items():
        # S3 sends metadata as raw HTTP headers: anything outside printable ASCII is
        # mangled or refused by servers, so refuse it here with a clear message.
        if not isinstance(name, str) or not _META_KEY_RE.match(name):
            raise errors.InvalidArgument(
                f"metadata key {name!r} must be ASCII letters, digits or -_.!#$%&'*+^`|~ "
                f"(bucket {bucket!r}, key {key!r})"
            )
        if not isinstance(value, str) or not _META_VALUE_RE.match(value):
            raise errors.InvalidArgument(
                f"metadata value for {name!r} must be printable ASCII "
                f"(bucket {bucket!r}, key {key!r})"
            )
        if (same := given.setdefault(name.lower(), name)) != name:
            raise errors.InvalidArgument(
                f"metadata keys {same!r} and {name!r} are one key: S3 stores metadata keys "
                f"lower-cased (bucket {bucket!r}, key {key!r})"
            )
        headers[f"x-amz-meta-{name.lower()}"] = value
    return headers


def stored_checksums(headers: Mapping[str, str]) -> dict[str, str]:
    """The ``x-amz-checksum-<algorithm>`` values in ``headers``, by algorithm."""
    found = {}
    for algo in CHECKSUM_ALGORITHMS:
        value = headers.get(f"x-amz-checksum-{algo}")
        if value:
            found[algo] = value
    return found


def object_info_from_headers(bucket: str, key: str, headers: Mapping[str, str]) -> ObjectInfo:
    """An :class:`ObjectInfo` from the (case-insensitive) headers of a HEAD or GET; its
    ``size`` is None if ``Content-Length`` is absent or not a byte count."""
    try:
        size = parse_content_length(headers.get("Content-Length"))
    except ValueError:
        size = None
    return ObjectInfo(
        bucket=bucket,
        key=key,
        size=size,
        etag=headers.get("ETag"),
        last_modified=parse_http_date(headers.get("Last-Modified")),
        content_type=headers.get("Content-Type"),
        metadata={
            name[len("x-amz-meta-") :].lower(): value
            for name, value in headers.items()
            if name.lower().startswith("x-amz-meta-")
        },
        version_id=headers.get("x-amz-version-id"),
        checksums=stored_checksums(headers),
        checksum_type=headers.get("x-amz-checksum-type"),
        cache_control=headers.get("Cache-Control"),
        content_encoding=headers.get("Content-Encoding"),
        content_disposition=headers.get("Content-Disposition"),
        storage_class=headers.get("x-amz-storage-class"),
    )


def upload_info(
    bucket: str,
    key: str,
    size: int,
    answer: Mapping[str, str],
    content_type: str | None,
    metadata: Mapping[str, str],
) -> ObjectInfo:
    """What an upload of ``size`` bytes stored, from its answer's headers (or Complete's
    fields). Only the checksums the service confirmed (echoed) are reported: moto and
    s3rver, for one, ignore the checksum header of a PUT, and a checksum claimed but not
    stored would leave later reads silently unverified."""
    found = {k.lower(): v for k, v in answer.items()}
    checksums = stored_checksums(found)
    if "checksumcrc32c" in found:  # CompleteMultipartUpload's XML
        checksums.setdefault("crc32c", found["checksumcrc32c"])
    checksum_type = found.get("checksumtype") or found.get("x-amz-checksum-type")
    return ObjectInfo(
        bucket=bucket,
        key=key,
        size=size,
        etag=found.get("etag"),
        version_id=found.get("x-amz-version-id"),
        content_type=content_type,
        metadata=dict(metadata),
        checksums=checksums,
        checksum_type=(checksum_type or "FULL_OBJECT") if checksums else None,
    )


def multipart_etag(part_etags: Iterable[str]) -> str | None:
    """The ETag S3 gives a multipart object of parts with these ETags: the MD5 of their
    MD5s, then ``-`` and the number of parts (quoted); None if a part's ETag is not an
    MD5 (SSE-KMS, other services)."""
    digests = []
    for etag in part_etags:
        text = etag.strip().strip('"')
        if not _MD5_RE.match(text):
            return None
        digests.append(bytes.fromhex(text))
    return f'"{hashlib.md5(b"".join(digests)).hexdigest()}-{len(digests)}"'
