"""``VersionPin``: which version of an object a reader is tied to (pure).

A read that takes more than one request (resumes, seeks, read-ahead parts, download
parts, a pickled file reopened elsewhere) must get every byte from one version. The pin
is what ties the requests together: the ETag, sent as ``If-Match`` (RFC 9110 §13.1.1);
when there is no strong ETag (``If-Match`` never matches a weak one), ``Last-Modified``,
sent as ``If-Unmodified-Since`` (§13.1.4, one-second resolution); the size, which every
answer must report again; and the version id (``versionId``), on a versioned bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from objsdk._core.continuation import is_strong_etag
from objsdk._core.s3xml import http_date
from objsdk.errors import InvalidArgument
from objsdk.models import ObjectInfo

__all__ = ["VersionPin", "pin_for"]


@dataclass(frozen=True)
class VersionPin:
    """The version a reader is tied to; a field is None until an answer tells it.

    ``etag`` keeps S3's quotes and ``last_modified`` is the HTTP date as the server sent
    it: both go back verbatim in conditions and are compared as received.
    """

    etag: str | None = None
    size: int | None = None
    version_id: str | None = None
    last_modified: str | None = None

    @classmethod
    def of(cls, info: ObjectInfo) -> VersionPin:
        """The version a HEAD answer (or an upload) described."""
        return cls(info.etag, info.size, info.version_id, http_date(info.last_modified))

    @classmethod
    def from_headers(cls, headers: Mapping[str, str], *, size: int | None) -> VersionPin:
        """The version a GET answer came from: its ``ETag``, ``Last-Modified`` and
        ``x-amz-version-id``; ``size`` is the object's total the caller read from the
        answer's status and ``Content-Range`` or ``Content-Length`` (None: not told)."""
        return cls(
            headers.get("ETag"), size, headers.get("x-amz-version-id"), headers.get("Last-Modified")
        )

    def filled(self, other: VersionPin) -> VersionPin:
        """This pin, with what it does not know yet taken from ``other``: the first
        answer pins a field, later ones never change it."""
        return VersionPin(
            self.etag or other.etag,
            self.size if self.size is not None else other.size,
            self.version_id or other.version_id,
            self.last_modified or other.last_modified,
        )

    @property
    def pinned(self) -> bool:
        """Can a later request be tied to this version (a strong ETag or a date)?"""
        return is_strong_etag(self.etag) or self.last_modified is not None

    def conditions(self) -> dict[str, str]:
        """The request headers that make a server refuse (412) any other version:
        ``If-Match`` with a strong ETag, else ``If-Unmodified-Since``; none if nothing
        pins the version."""
        if self.etag is not None and is_strong_etag(self.etag):
            return {"If-Match": self.etag}
        if self.last_modified:
            return {"If-Unmodified-Since": self.last_modified}
        return {}

    def params(self) -> list[tuple[str, str]]:
        """The query that names the version (``versionId``), if one is known."""
        return [("versionId", self.version_id)] if self.version_id else []


def pin_for(
    bucket: str, key: str, version_id: str | None, pin: ObjectInfo | VersionPin | None
) -> VersionPin:
    """What a reader of ``bucket``/``key`` starts pinned to: ``pin`` (an ObjectInfo from
    ``head_object``, or a VersionPin) and ``version_id``. Raises
    :class:`~objsdk.InvalidArgument` if ``pin`` describes another object or another
    version than ``version_id``."""
    if isinstance(pin, ObjectInfo):
        if (pin.bucket, pin.key) != (bucket, key):
            raise InvalidArgument(
                f"pin describes bucket {pin.bucket!r}, key {pin.key!r}, not the object "
                f"opened (bucket {bucket!r}, key {key!r})"
            )
        pin = VersionPin.of(pin)
    elif pin is None:
        pin = VersionPin()
    elif not isinstance(pin, VersionPin):
        raise InvalidArgument(
            f"pin must be the ObjectInfo head_object returned, got {type(pin).__name__} "
            f"(bucket {bucket!r}, key {key!r})"
        )
    if version_id is None or pin.version_id == version_id:
        return pin
    if pin.version_id is not None:
        raise InvalidArgument(
            f"version_id {version_id!r} is not the pinned version {pin.version_id!r} "
            f"(bucket {bucket!r}, key {key!r})"
        )
    return VersionPin(pin.etag, pin.size, version_id, pin.last_modified)
