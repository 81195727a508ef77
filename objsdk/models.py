"""Plain values the client returns: what S3 says about buckets and objects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime

__all__ = [
    "BucketInfo",
    "DeleteError",
    "MultipartUpload",
    "ObjectInfo",
    "ObjectSummary",
    "ObjectVersion",
    "Prefix",
    "UploadInfo",
]


@dataclass(frozen=True)
class BucketInfo:
    """One bucket from ``list_buckets()``."""

    name: str
    creation_date: datetime | None = None


@dataclass(frozen=True)
class ObjectInfo:
    """What ``head_object`` (or an upload) learned about one object.

    ``etag`` keeps S3's quotes (``'"9b2c..."'``): it is sent back verbatim in
    ``If-Match``. ``checksums`` maps an algorithm (``"crc32c"``, ``"sha256"``...) to
    the base64 value the server stores. ``cache_control``, ``content_encoding``,
    ``content_disposition`` and ``storage_class`` are the stored headers (S3 leaves out
    ``x-amz-storage-class`` for STANDARD; None when not told).
    """

    bucket: str
    key: str
    size: int | None = None
    etag: str | None = None
    last_modified: datetime | None = None
    content_type: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    version_id: str | None = None
    checksums: Mapping[str, str] = field(default_factory=dict)
    checksum_type: str | None = None
    cache_control: str | None = None
    content_encoding: str | None = None
    content_disposition: str | None = None
    storage_class: str | None = None


@dataclass(frozen=True)
class UploadInfo(ObjectInfo):
    """What an upload stored (an :class:`ObjectInfo`) and how it went: the object was
    sent in ``parts`` parts (1: one PUT), ``parallel`` of them in flight at the end
    (what ``parallel=None`` settled on), and ``cuts`` times a connection broke under a
    part (or the PUT), which was then sent again. ``bytes_reused``: of a resumed upload
    of a file, the bytes an earlier run had stored, which were not sent again."""

    parts: int = 1
    parallel: int = 1
    cuts: int = 0
    bytes_reused: int = 0

    @classmethod
    def of(
        cls, info: ObjectInfo, *, parts: int, parallel: int, cuts: int, bytes_reused: int = 0
    ) -> UploadInfo:
        """``info``, with how the upload went."""
        known = {f.name: getattr(info, f.name) for f in fields(ObjectInfo)}
        return cls(**known, parts=parts, parallel=parallel, cuts=cuts, bytes_reused=bytes_reused)


@dataclass(frozen=True)
class ObjectSummary:
    """One object from ``list_objects()``."""

    key: str
    size: int
    etag: str | None = None
    last_modified: datetime | None = None
    storage_class: str | None = None


@dataclass(frozen=True)
class ObjectVersion:
    """One version of an object, or a delete marker, from ``list_object_versions()``.

    ``version_id`` is ``"null"`` for an object stored while versioning was off.
    """

    key: str
    version_id: str
    is_latest: bool = False
    last_modified: datetime | None = None
    size: int = 0
    etag: str | None = None
    storage_class: str | None = None
    delete_marker: bool = False


@dataclass(frozen=True)
class Prefix:
    """A common prefix from ``list_objects(delimiter=...)``: a "directory"."""

    prefix: str

    @property
    def key(self) -> str:
        """The prefix, so listing entries of both kinds sort and print by ``.key``."""
        return self.prefix


@dataclass(frozen=True)
class MultipartUpload:
    """A multipart upload started and neither completed nor aborted, as
    ``list_multipart_uploads()`` reports it: its parts are stored (and billed) until
    it is."""

    key: str
    upload_id: str
    initiated: datetime | None = None
    #: Who started it: the ``Initiator``'s (ID, DisplayName); None if not given.
    initiator: tuple[str, str] | None = None


@dataclass(frozen=True)
class DeleteError:
    """A key that ``delete_objects`` could not delete."""

    key: str
    code: str
    message: str = ""
    version_id: str | None = None
