"""s3fs's methods beyond fsspec's, on objsdk: user metadata as extended attributes
(``getxattr``/``setxattr``/``metadata``), object tags (``get_tags``/``put_tags``),
presigned URLs (``url``, ``sign``), and versions (``object_version_info``,
``is_bucket_versioned``, ``make_bucket_versioned``). Same names, arguments and answers
as s3fs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from objsdk.filesystem.oserrors import translated

if TYPE_CHECKING:
    from objsdk import Client

__all__ = ["S3fsExtras"]

# s3fs's url(client_method=...) names, as the HTTP method presigned.
_PRESIGN_METHODS = {
    "get_object": "GET",
    "put_object": "PUT",
    "head_object": "HEAD",
    "delete_object": "DELETE",
}


class S3fsExtras:
    """s3fs's extra methods (a base of ObjsdkFileSystem)."""

    client: Client
    version_aware: bool

    if TYPE_CHECKING:

        def split_path(self, path: str) -> tuple[str, str, str | None]: ...

    def _object(self, path: str) -> tuple[str, str, str | None]:
        bucket, key, version_id = self.split_path(path)
        if not key:
            raise ValueError(f"{path!r} names a bucket, not an object")
        return bucket, key, version_id

    # -- user metadata ---------------------------------------------------------------

    def metadata(self, path: str, refresh: bool = False, **kwargs: Any) -> dict[str, str]:
        """The object's user metadata (``x-amz-meta-*``, names lower-cased)."""
        bucket, key, version_id = self._object(path)
        with translated(path):
            return dict(self.client.head_object(bucket, key, version_id=version_id).metadata)

    def getxattr(self, path: str, attr_name: str, **kwargs: Any) -> str | None:
        """One user metadata value, or None."""
        return self.metadata(path).get(attr_name.lower())

    def setxattr(
        self, path: str, copy_kwargs: dict[str, Any] | None = None, **kw_args: Any
    ) -> None:
        """Set user metadata values (a None value removes the name), keeping the others
        and the object's type and standard headers: a server-side copy onto itself.
        ``copy_kwargs`` may change ``ContentType``, ``CacheControl``... (boto3's names)."""
        from objsdk.filesystem.options import write_options

        bucket, key, version_id = self._object(path)
        if version_id:
            raise ValueError("setxattr changes the current version; give a path without one")
        changes = write_options(dict(copy_kwargs or {}), "setxattr(copy_kwargs=...)")
        with translated(path):
            head = self.client.head_object(bucket, key)
            metadata = {**head.metadata, **{k.lower(): v for k, v in kw_args.items()}}
            kept = {
                "content_type": head.content_type,
                "cache_control": head.cache_control,
                "content_encoding": head.content_encoding,
                "content_disposition": head.content_disposition,
            }
            options = {k: v for k, v in {**kept, **changes}.items() if v is not None}
            options.pop("metadata", None)
            self.client.copy_object(
                bucket,
                key,
                bucket,
                key,
                metadata={k: str(v) for k, v in metadata.items() if v is not None},
                **options,
            )

    # -- tags ------------------------------------------------------------------------

    def get_tags(self, path: str) -> dict[str, str]:
        """The object's tags."""
        bucket, key, version_id = self._object(path)
        with translated(path):
            return self.client.get_object_tags(bucket, key, version_id=version_id)

    def put_tags(self, path: str, tags: dict[str, str], mode: str = "o") -> None:
        """Set the object's tags: ``mode="o"`` replaces them, ``"m"`` merges into them."""
        if mode not in ("o", "m"):
            raise ValueError(f"mode must be 'o' (overwrite) or 'm' (merge), got {mode!r}")
        bucket, key, version_id = self._object(path)
        with translated(path):
            if mode == "m":
                tags = {**self.client.get_object_tags(bucket, key, version_id=version_id), **tags}
            self.client.put_object_tags(bucket, key, tags, version_id=version_id)

    # -- URLs --------------------------------------------------------------------------

    def url(
        self, path: str, expires: int = 3600, client_method: str = "get_object", **kwargs: Any
    ) -> str:
        """A presigned URL (SigV4) for ``client_method`` on the object, valid ``expires``
        seconds. It carries a signature: treat it as a secret."""
        if kwargs:
            raise TypeError(f"url() got unknown arguments: {sorted(kwargs)}")
        method = _PRESIGN_METHODS.get(client_method)
        if method is None:
            raise ValueError(
                f"client_method must be one of {sorted(_PRESIGN_METHODS)}, got {client_method!r}"
            )
        bucket, key, version_id = self._object(path)
        if version_id:
            raise ValueError("presigned URLs name the current version; give a path without one")
        return self.client.presign(method, bucket, key, expires=expires)

    def sign(self, path: str, expiration: int = 100, **kwargs: Any) -> str:
        """fsspec's ``sign``: a presigned URL (``method="GET"`` unless given)."""
        bucket, key, _ = self._object(path)
        return self.client.presign(kwargs.get("method", "GET"), bucket, key, expires=expiration)

    # -- versions --------------------------------------------------------------------

    def object_version_info(self, path: str, **kwargs: Any) -> list[dict[str, Any]]:
        """Every version of the object, newest first, as s3fs gives them (boto3's keys:
        ``Key``, ``VersionId``, ``IsLatest``, ``LastModified``, ``ETag``, ``Size``,
        ``StorageClass``); delete markers are left out. Needs ``version_aware=True``."""
        if not self.version_aware:
            raise ValueError(
                "object_version_info needs a filesystem made with version_aware=True (as s3fs)"
            )
        bucket, key, _ = self._object(path)
        with translated(path):
            return [
                {
                    "Key": v.key,
                    "VersionId": v.version_id,
                    "IsLatest": v.is_latest,
                    "LastModified": v.last_modified,
                    "ETag": v.etag,
                    "Size": v.size,
                    "StorageClass": v.storage_class or "STANDARD",
                }
                for v in self.client.list_object_versions(bucket, key)
                if v.key == key and not v.delete_marker
            ]

    def is_bucket_versioned(self, bucket: str) -> bool:
        """True if the bucket keeps versions (its versioning is ``"Enabled"``)."""
        name = self.split_path(bucket)[0]
        with translated(bucket):
            return self.client.get_bucket_versioning(name) == "Enabled"

    def make_bucket_versioned(self, bucket: str, versioned: bool = True) -> None:
        """Turn the bucket's versioning on, or suspend it (``versioned=False``)."""
        name = self.split_path(bucket)[0]
        with translated(bucket):
            self.client.set_bucket_versioning(name, versioned)
