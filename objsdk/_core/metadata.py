"""The standard object headers an upload or a copy may set, by their Python names (pure).

``upload``, ``open_write`` and ``copy_object`` take them as keyword arguments (with
``content_type`` and ``metadata``, which :func:`objsdk._core.object_headers.object_headers`
handles): ``cache_control``, ``content_encoding``, ``content_disposition``,
``storage_class`` and ``acl``. S3 stores the first three and returns them on GET and HEAD
(PutObject, "System-defined object metadata" in the S3 user guide); ``acl`` is a canned
ACL (``x-amz-acl``, "Canned ACL" in the S3 user guide), such as
``bucket-owner-full-control`` for a write into another account's bucket.
"""

from __future__ import annotations

import re
from typing import TypedDict

from objsdk import errors

__all__ = ["CANNED_ACLS", "HEADER_NAMES", "ObjectHeaders", "standard_headers"]


class ObjectHeaders(TypedDict, total=False):
    """The standard headers, as keyword arguments."""

    cache_control: str
    content_encoding: str
    content_disposition: str
    storage_class: str
    acl: str


#: Keyword -> the HTTP header that carries it.
HEADER_NAMES: dict[str, str] = {
    "cache_control": "Cache-Control",
    "content_encoding": "Content-Encoding",
    "content_disposition": "Content-Disposition",
    "storage_class": "x-amz-storage-class",
    "acl": "x-amz-acl",
}

#: The canned ACLs an object takes (S3 user guide, "Canned ACL"; ``log-delivery-write``
#: is a bucket's only). Checked here: MinIO accepts any value and applies none.
CANNED_ACLS = (
    "private",
    "public-read",
    "public-read-write",
    "aws-exec-read",
    "authenticated-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
)

# A header value is sent as it is: printable ASCII only, so no value can end the header
# early or add another (RFC 9110 §5.5 field values; S3 refuses the rest anyway).
_VALUE_RE = re.compile(r"^[\x20-\x7e]*$")
_STORAGE_CLASS_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def standard_headers(
    bucket: str,
    key: str,
    *,
    cache_control: str | None = None,
    content_encoding: str | None = None,
    content_disposition: str | None = None,
    storage_class: str | None = None,
    acl: str | None = None,
) -> dict[str, str]:
    """The headers for the given keywords (None: not sent). Refuses, naming the keyword,
    a value S3 would mangle: non-ASCII or control characters, a malformed storage class
    (``STANDARD``, ``REDUCED_REDUNDANCY``, ``GLACIER_IR``...), an ACL that is not one of
    :data:`CANNED_ACLS`."""
    given = {
        "cache_control": cache_control,
        "content_encoding": content_encoding,
        "content_disposition": content_disposition,
        "storage_class": storage_class,
        "acl": acl,
    }
    headers = {}
    for name, value in given.items():
        if value is None:
            continue
        if not isinstance(value, str) or not _VALUE_RE.match(value):
            raise errors.InvalidArgument(
                f"{name} must be a string of printable ASCII, got {value!r} "
                f"(bucket {bucket!r}, key {key!r})"
            )
        if name == "storage_class" and not _STORAGE_CLASS_RE.match(value):
            raise errors.InvalidArgument(
                f"storage_class must be an S3 storage class such as 'STANDARD', got "
                f"{value!r} (bucket {bucket!r}, key {key!r})"
            )
        if name == "acl" and value not in CANNED_ACLS:
            raise errors.InvalidArgument(
                f"acl must be a canned ACL ({', '.join(CANNED_ACLS)}), got {value!r} "
                f"(bucket {bucket!r}, key {key!r})"
            )
        headers[HEADER_NAMES[name]] = value
    return headers
