"""The dicts ``info()``, ``ls(detail=True)`` and ``find(detail=True)`` return: fsspec's
keys (``name``, ``size``, ``type``) alongside s3fs's (``Key``, ``Size``,
``StorageClass``, ``VersionId``, ``ETag``, ``LastModified``...), so code written for
either reads them unchanged.

As in s3fs, ``Key`` is the full path (``bucket/key``), a directory's ``StorageClass`` is
``"DIRECTORY"`` and a bucket's ``"BUCKET"``, and listings say ``"STANDARD"`` when the
server names no class.
"""

from __future__ import annotations

from typing import Any

from objsdk.models import BucketInfo, ObjectInfo, ObjectSummary, ObjectVersion

__all__ = ["bucket_entry", "dir_entry", "head_entry", "listed_entry", "version_entry"]


def _file(
    name: str, size: int, listed: ObjectSummary | ObjectVersion | ObjectInfo, **s3: Any
) -> dict[str, Any]:
    """A file's entry: fsspec's keys, what a listing says of it (``listed``'s ETag, date
    and storage class, ``"STANDARD"`` when the server names none), then ``s3``."""
    return {
        "name": name,
        "size": size,
        "type": "file",
        "Key": name,
        "Size": size,
        "ETag": listed.etag,
        "LastModified": listed.last_modified,
        "mtime": listed.last_modified,
        "StorageClass": listed.storage_class or "STANDARD",
        **s3,
    }


def listed_entry(bucket: str, obj: ObjectSummary) -> dict[str, Any]:
    """An object from a listing."""
    return _file(f"{bucket}/{obj.key}", obj.size, obj)


def version_entry(bucket: str, v: ObjectVersion) -> dict[str, Any]:
    """One version from ``list_object_versions`` (``ls(..., versions=True)``)."""
    return _file(f"{bucket}/{v.key}", v.size, v, VersionId=v.version_id, IsLatest=v.is_latest)


def head_entry(path: str, head: ObjectInfo) -> dict[str, Any]:
    """An object from its HEAD: what a listing says, and its type, headers, metadata,
    version and stored checksums."""
    return _file(
        path,
        head.size or 0,
        head,
        VersionId=head.version_id,
        ContentType=head.content_type,
        ContentEncoding=head.content_encoding,
        ContentDisposition=head.content_disposition,
        CacheControl=head.cache_control,
        Metadata=dict(head.metadata),
        checksums=dict(head.checksums),
    )


def dir_entry(name: str) -> dict[str, Any]:
    """A "directory": a common prefix."""
    name = name.rstrip("/")
    return {
        "name": name,
        "size": 0,
        "type": "directory",
        "Key": name,
        "Size": 0,
        "StorageClass": "DIRECTORY",
    }


def bucket_entry(b: BucketInfo) -> dict[str, Any]:
    """A bucket from ``list_buckets``."""
    return {**dir_entry(b.name), "StorageClass": "BUCKET", "CreationDate": b.creation_date}
