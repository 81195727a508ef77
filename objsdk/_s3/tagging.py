"""Object tags: GetObjectTagging, PutObjectTagging and DeleteObjectTagging, as S3 calls
on a transport and as the :class:`~objsdk.Client` methods :class:`TaggingAPI` gives it.

S3 user guide, "Categorizing your storage using tags": at most 10 tags per object, keys
of 1 to 128 characters, values of at most 256, unique keys, made of letters, digits,
spaces and ``+ - = . _ : / @``.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping

from objsdk import errors
from objsdk._core.addressing import check_bucket, check_key
from objsdk._core.s3xml import xml_escape, xml_root
from objsdk._core.signing import payload_sha256
from objsdk._transport.base import Transport

__all__ = [
    "MAX_TAGS",
    "TaggingAPI",
    "build_tagging",
    "delete_object_tags",
    "get_object_tags",
    "parse_tagging",
    "put_object_tags",
]

MAX_TAGS = 10
_TAG_TEXT_RE = re.compile(r"^[\w\s+\-=.:/@]*$")


def build_tagging(bucket: str, key: str, tags: Mapping[str, str]) -> bytes:
    """The ``<Tagging>`` body for ``tags``, refusing what S3 would (naming the tag)."""
    if not isinstance(tags, Mapping):
        raise errors.InvalidArgument(
            f"tags must be a mapping of str to str, got {type(tags).__name__} "
            f"(bucket {bucket!r}, key {key!r})"
        )
    if len(tags) > MAX_TAGS:
        raise errors.InvalidArgument(
            f"an object has at most {MAX_TAGS} tags, got {len(tags)} "
            f"(bucket {bucket!r}, key {key!r})"
        )
    parts = []
    for name, value in tags.items():
        if not isinstance(name, str) or not 1 <= len(name) <= 128 or not _TAG_TEXT_RE.match(name):
            raise errors.InvalidArgument(
                f"tag key {name!r} must be 1 to 128 letters, digits, spaces or +-=._:/@ "
                f"(bucket {bucket!r}, key {key!r})"
            )
        if not isinstance(value, str) or len(value) > 256 or not _TAG_TEXT_RE.match(value):
            raise errors.InvalidArgument(
                f"the value of tag {name!r} must be at most 256 letters, digits, spaces or "
                "+-=._:/@ "
                f"(bucket {bucket!r}, key {key!r})"
            )
        parts.append(f"<Tag><Key>{xml_escape(name)}</Key><Value>{xml_escape(value)}</Value></Tag>")
    return (
        '<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet>'
        + "".join(parts)
        + "</TagSet></Tagging>"
    ).encode()


def parse_tagging(body: bytes) -> dict[str, str]:
    """A GetObjectTagging answer as a dict."""
    root = xml_root(body)
    tags = {}
    for tag in root.iterfind("{*}TagSet/{*}Tag"):
        name = tag.find("{*}Key")
        value = tag.find("{*}Value")
        if name is not None:
            tags[name.text or ""] = "" if value is None else (value.text or "")
    return tags


def _params(version_id: str | None) -> list[tuple[str, str]]:
    return [("tagging", "")] + ([("versionId", version_id)] if version_id else [])


def get_object_tags(
    transport: Transport, bucket: str, key: str, version_id: str | None = None
) -> dict[str, str]:
    check_bucket(bucket)
    check_key(key)
    resp = transport.request(
        "GET", operation="get_object_tags", bucket=bucket, key=key, params=_params(version_id)
    )
    return parse_tagging(resp.content)


def put_object_tags(
    transport: Transport,
    bucket: str,
    key: str,
    tags: Mapping[str, str],
    version_id: str | None = None,
) -> None:
    check_bucket(bucket)
    check_key(key)
    body = build_tagging(bucket, key, tags)
    transport.request(
        "PUT",
        operation="put_object_tags",
        bucket=bucket,
        key=key,
        params=_params(version_id),
        # PutObjectTagging requires an integrity header (S3 API reference).
        headers={"Content-MD5": base64.b64encode(hashlib.md5(body).digest()).decode()},
        body=body,
        payload_hash=payload_sha256(body),
    )


def delete_object_tags(
    transport: Transport, bucket: str, key: str, version_id: str | None = None
) -> None:
    check_bucket(bucket)
    check_key(key)
    transport.request(
        "DELETE",
        operation="delete_object_tags",
        bucket=bucket,
        key=key,
        params=_params(version_id),
        ok=(204, 200),
    )


class TaggingAPI:
    """The :class:`~objsdk.Client` methods for object tags."""

    _transport: Transport

    def get_object_tags(
        self, bucket: str, key: str, *, version_id: str | None = None
    ) -> dict[str, str]:
        """The object's tags (of ``version_id``, else the current version)."""
        return get_object_tags(self._transport, bucket, key, version_id)

    def put_object_tags(
        self, bucket: str, key: str, tags: Mapping[str, str], *, version_id: str | None = None
    ) -> None:
        """Replace the object's tags with ``tags`` (at most 10; keys of 1 to 128
        characters, values of at most 256)."""
        put_object_tags(self._transport, bucket, key, tags, version_id)

    def delete_object_tags(self, bucket: str, key: str, *, version_id: str | None = None) -> None:
        """Remove all of the object's tags."""
        delete_object_tags(self._transport, bucket, key, version_id)
