"""Object versions: ListObjectVersions and bucket versioning on and off, as S3 calls on a
transport and as the :class:`~objsdk.Client` methods :class:`VersionsAPI` gives it.

Reading, heading, deleting and copying one version are the usual calls with
``version_id=`` (``Client.open``, ``get_object``, ``head_object``, ``delete_object``,
``copy_object``). S3 user guide, "Using versioning in S3 buckets".
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote_plus

from objsdk import errors
from objsdk._core.addressing import check_bucket
from objsdk._core.pagination import Pagination
from objsdk._core.s3xml import date_field, size_field, xml_root, xml_text
from objsdk._core.signing import payload_sha256
from objsdk._transport.base import Transport
from objsdk.models import ObjectVersion

__all__ = [
    "VersionsAPI",
    "VersionsPage",
    "get_bucket_versioning",
    "list_object_versions",
    "parse_list_object_versions",
    "set_bucket_versioning",
]


@dataclass(frozen=True)
class VersionsPage:
    """One page of ListObjectVersions."""

    versions: list[ObjectVersion]
    is_truncated: bool
    next_key_marker: str | None
    next_version_id_marker: str | None


def parse_list_object_versions(body: bytes) -> VersionsPage:
    """A ListObjectVersions answer (``encoding-type=url``: keys are URL-decoded), its
    versions and delete markers in the order S3 gives (by key, newest first)."""
    root = xml_root(body)
    url = (xml_text(root, "EncodingType") or "") == "url"

    def key_of(text: str | None) -> str:
        return unquote_plus(text or "") if url else (text or "")

    versions = []
    for el in root:
        tag = el.tag.rsplit("}", 1)[-1]
        if tag not in ("Version", "DeleteMarker"):
            continue
        versions.append(
            ObjectVersion(
                key=key_of(xml_text(el, "Key")),
                version_id=xml_text(el, "VersionId") or "null",
                is_latest=(xml_text(el, "IsLatest") or "").lower() == "true",
                last_modified=date_field("LastModified", xml_text(el, "LastModified")),
                size=size_field("Size", xml_text(el, "Size")),
                etag=xml_text(el, "ETag"),
                storage_class=xml_text(el, "StorageClass"),
                delete_marker=tag == "DeleteMarker",
            )
        )
    marker = xml_text(root, "NextKeyMarker")
    return VersionsPage(
        versions=versions,
        is_truncated=(xml_text(root, "IsTruncated") or "").lower() == "true",
        next_key_marker=key_of(marker) if marker is not None else None,
        next_version_id_marker=xml_text(root, "NextVersionIdMarker"),
    )


def list_object_versions(
    transport: Transport, bucket: str, prefix: str = "", page_size: int = 1000
) -> Iterator[ObjectVersion]:
    """Every version and delete marker under ``prefix``, page by page as iterated."""
    check_bucket(bucket)
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 1000:
        raise errors.InvalidArgument(f"page_size must be 1..1000, got {page_size!r}")
    return _pages(transport, bucket, prefix, page_size)


def _pages(
    transport: Transport, bucket: str, prefix: str, page_size: int
) -> Iterator[ObjectVersion]:
    key_marker: str | None = None
    version_marker: str | None = None
    walk = Pagination("list_object_versions", bucket, prefix)
    while True:
        params = [
            ("versions", ""),
            ("max-keys", str(page_size)),
            ("encoding-type", "url"),
            ("prefix", prefix),
        ]
        if key_marker is not None:
            params.append(("key-marker", key_marker))
            if version_marker:
                params.append(("version-id-marker", version_marker))
        with errors.naming_prefix(prefix):
            resp = transport.request(
                "GET", operation="list_object_versions", bucket=bucket, params=params
            )
        page = walk.parse(parse_list_object_versions, resp.content)
        yield from page.versions
        if not page.is_truncated:
            return
        key_marker, version_marker = page.next_key_marker or "", page.next_version_id_marker
        walk.next_page(
            len(page.versions),
            [("key-marker", key_marker), ("version-id-marker", version_marker or "")],
        )


def get_bucket_versioning(transport: Transport, bucket: str) -> str | None:
    """``"Enabled"``, ``"Suspended"``, or None for a bucket never versioned."""
    check_bucket(bucket)
    resp = transport.request(
        "GET", operation="get_bucket_versioning", bucket=bucket, params=[("versioning", "")]
    )
    return xml_text(xml_root(resp.content), "Status") or None


def set_bucket_versioning(transport: Transport, bucket: str, enabled: bool) -> None:
    """Turn versioning on, or suspend it (S3 cannot turn it back off: versions already
    stored stay; new writes get the version id ``"null"``)."""
    check_bucket(bucket)
    if not isinstance(enabled, bool):
        raise errors.InvalidArgument(f"enabled must be True or False, got {enabled!r}")
    status = "Enabled" if enabled else "Suspended"
    body = (
        '<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Status>{status}</Status></VersioningConfiguration>"
    ).encode()
    transport.request(
        "PUT",
        operation="set_bucket_versioning",
        bucket=bucket,
        params=[("versioning", "")],
        # PutBucketVersioning requires an integrity header (S3 API reference).
        headers={"Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode()},
        body=body,
        payload_hash=payload_sha256(body),
    )


class VersionsAPI:
    """The :class:`~objsdk.Client` methods for versions and bucket versioning."""

    _transport: Transport

    def list_object_versions(
        self, bucket: str, prefix: str = "", *, page_size: int = 1000
    ) -> Iterator[ObjectVersion]:
        """Lazily list every version and delete marker of the keys under ``prefix``
        (ListObjectVersions), by key, newest version first. A bucket never versioned
        lists each object once, with version id ``"null"``."""
        return list_object_versions(self._transport, bucket, prefix, page_size)

    def get_bucket_versioning(self, bucket: str) -> str | None:
        """The bucket's versioning: ``"Enabled"``, ``"Suspended"``, or None (never on)."""
        return get_bucket_versioning(self._transport, bucket)

    def set_bucket_versioning(self, bucket: str, enabled: bool) -> None:
        """Turn the bucket's versioning on (``True``) or suspend it (``False``): S3 keeps
        the versions already stored, and new writes then replace the ``"null"`` version."""
        set_bucket_versioning(self._transport, bucket, enabled)
