"""Whole-object and ranged transfers of :class:`~objsdk.filesystem.ObjsdkFileSystem`:
``cat_file``/``cat_ranges``, ``get_file``/``put_file``/``pipe_file``, server-side
``cp_file``, and deletes (``rm``, batched). Every S3 error leaves as the OSError
:mod:`objsdk.filesystem.oserrors` decides."""

from __future__ import annotations

import contextlib
import errno
import mimetypes
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import fsspec  # type: ignore[import-untyped,unused-ignore]
from fsspec.callbacks import DEFAULT_CALLBACK  # type: ignore[import-untyped,unused-ignore]
from fsspec.core import has_magic  # type: ignore[import-untyped,unused-ignore]

from objsdk import ObjectSummary, errors
from objsdk._transfer.copy import MAX_SINGLE_COPY
from objsdk._transfer.download_file import make_directory, make_folder
from objsdk.filesystem.many import recording
from objsdk.filesystem.oserrors import as_oserror, translated

if TYPE_CHECKING:
    from objsdk import Client
    from objsdk.filesystem.options import Settings

__all__ = ["CAT_RANGES_PARALLEL", "Transfers"]

# Cat_ranges' ranges in flight when the storage options set no ``parallel``.
CAT_RANGES_PARALLEL = 8


class Transfers:
    """The transfer methods (a base of ObjsdkFileSystem)."""

    client: Client
    settings: Settings
    parallel: int | None

    if TYPE_CHECKING:

        def split_path(self, path: str) -> tuple[str, str, str | None]: ...
        def exists(self, path: str, **kwargs: Any) -> bool: ...
        def isdir(self, path: str) -> bool: ...
        def expand_path(self, path: Any, recursive: bool = ..., maxdepth: Any = ...) -> Any: ...
        def rmdir(self, path: str) -> None: ...
        def _strip_protocol(self, path: Any) -> Any: ...
        def _open(self, path: str, mode: str = ..., **kwargs: Any) -> Any: ...

    def _upload_options(self, key: str, given: dict[str, Any]) -> dict[str, Any]:
        """What every upload gets: parts in flight, a fixed part size when asked, what
        the storage options and the call (``ContentType``, ``Metadata``... in boto3's
        names, as s3fs takes them) say a write stores, and (as s3fs) a content type
        guessed from the key's name unless one is given."""
        from objsdk.filesystem.options import default_part_size, write_options

        given = dict(given)
        # s3fs's put_file/pipe_file keywords: part size and parts in flight.
        chunksize, concurrency = given.pop("chunksize", None), given.pop("max_concurrency", None)
        options: dict[str, Any] = {
            "parallel": concurrency or self.parallel,
            **self.settings.write,
            **write_options(given, "put/pipe"),
        }
        if chunksize is not None:
            options["part_size"] = chunksize
        guessed = mimetypes.guess_type(key)[0]
        if guessed and not options.get("content_type"):
            options["content_type"] = guessed
        part = default_part_size(self.settings)
        if part is not None:
            options.setdefault("part_size", part)
        return options

    def cat_file(
        self,
        path: str,
        start: int | None = None,
        end: int | None = None,
        version_id: str | None = None,
        **kwargs: Any,
    ) -> bytes:
        bucket, key, in_path = self.split_path(path)
        version_id = version_id or in_path
        try:
            if (start is not None and start < 0) or (end is not None and end < 0):
                size = self.client.head_object(bucket, key, version_id=version_id).size or 0
                start = None if start is None else (start if start >= 0 else max(0, size + start))
                end = None if end is None else (end if end >= 0 else max(0, size + end))
            offset = start or 0
            if end is not None and end <= offset:
                # Still report a missing file.
                self.client.head_object(bucket, key, version_id=version_id)
                return b""
            length = None if end is None else end - offset
            return self.client.get_object(
                bucket, key, offset=offset, length=length, version_id=version_id
            )
        except errors.InvalidRange:
            return b""
        except errors.S3Error as err:
            raise as_oserror(err, path) from err

    def cat_ranges(
        self,
        paths: list[str],
        starts: Any,
        ends: Any,
        max_gap: int | None = None,
        on_error: str = "return",
        **kwargs: Any,
    ) -> list[Any]:
        """Fetch the byte ranges in parallel (one ranged GET each, ``parallel`` at once)."""
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        if not isinstance(starts, list):
            starts = [starts] * len(paths)
        if not isinstance(ends, list):
            ends = [ends] * len(paths)
        if len(starts) != len(paths) or len(ends) != len(paths):
            raise ValueError("paths, starts and ends must have the same length")

        def one(args: tuple[str, int | None, int | None]) -> Any:
            try:
                return self.cat_file(*args)
            except Exception as e:
                if on_error == "return":
                    return e
                raise

        parallel = self.parallel or CAT_RANGES_PARALLEL
        with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(paths)))) as pool:
            return list(pool.map(one, zip(paths, starts, ends, strict=True)))

    def get_file(
        self,
        rpath: str,
        lpath: Any,
        callback: Any = DEFAULT_CALLBACK,
        outfile: Any = None,
        **kwargs: Any,
    ) -> None:
        plan = recording()
        if plan is not None:  # fsspec's get is naming the files: ManyFiles runs them
            plan.calls.append((rpath, lpath, kwargs))
            return
        bucket, key, version_id = self.split_path(rpath)
        if outfile is None and fsspec.utils.isfilelike(lpath):
            outfile = lpath
        if outfile is None and (
            not key or (version_id is None and _names_a_directory(lpath) and self.isdir(rpath))
        ):
            make_directory(os.fspath(lpath), bucket, key)
            return
        if outfile is not None:
            # The caller's file object: written from its position, left open.
            with self._open(rpath, "rb") as f:
                callback.set_size(f.size)
                while chunk := f.read(1 << 20):
                    outfile.write(chunk)
                    callback.relative_update(len(chunk))
            return
        try:
            self._get_object(rpath, os.fspath(lpath), callback, self.parallel)
        except OSError as e:
            # The download's HEAD found no object (or none this caller may read): a
            # directory (keys under the path) is made as one. Asking first would cost
            # every file a request.
            missing = (errors.NoSuchKey, errors.InvalidObjectName, errors.AccessDenied)
            no_object = version_id is None and isinstance(e.__cause__, missing)
            if not (no_object and self.isdir(rpath)):
                raise
            make_directory(os.fspath(lpath), bucket, key)

    def _get_object(self, rpath: str, lpath: str, callback: Any, parallel: int | None) -> None:
        """Download the object ``rpath`` to the file ``lpath``, its folder made as
        ``objsdk cp`` makes it (a file in the way is a ``NotADirectoryError`` naming it,
        a read-only filesystem a ``LocalWriteError``)."""
        bucket, key, version_id = self.split_path(rpath)
        make_folder(lpath, bucket, key)
        with translated(rpath):
            self.client.download(
                bucket,
                key,
                lpath,
                parallel=parallel,
                progress=_progress(callback),
                version_id=version_id,
            )

    def pipe_file(
        self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any
    ) -> dict[str, Any]:
        """Store ``value``; return the object's ``ETag`` and ``VersionId`` (as s3fs)."""
        if mode == "create" and self.exists(path):
            raise FileExistsError(errno.EEXIST, "the object exists", path)
        bucket, key, version_id = self.split_path(path)
        if version_id:
            raise ValueError(f"a version cannot be written: {path!r}")
        with translated(path):
            info = self.client.upload(bucket, key, value, **self._upload_options(key, kwargs))
        return {"ETag": info.etag, "VersionId": info.version_id}

    def put_file(
        self,
        lpath: str,
        rpath: str,
        callback: Any = DEFAULT_CALLBACK,
        mode: str = "overwrite",
        **kwargs: Any,
    ) -> None:
        plan = recording()
        if plan is not None:  # fsspec's put is naming the files: ManyFiles runs them
            plan.calls.append((lpath, rpath, {"mode": mode, **kwargs}))
            return
        if mode == "create" and self.exists(rpath):
            raise FileExistsError(errno.EEXIST, "the object exists", rpath)
        if os.path.isdir(lpath):
            return  # directories are implied by keys
        bucket, key, version_id = self.split_path(rpath)
        if not key:
            raise IsADirectoryError(errno.EISDIR, "a bucket: give a key to upload to", rpath)
        if version_id:
            raise ValueError(f"a version cannot be written: {rpath!r}")
        with translated(rpath):
            self.client.upload(
                bucket,
                key,
                os.fspath(lpath),
                progress=_progress(callback),
                **self._upload_options(key, kwargs),
            )

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Copy one object on the server. A directory is implied by its keys: nothing
        to copy, except its folder marker (``key/``) if it has one, which is copied as
        s3fs copies it (``copy(recursive=True)`` keeps empty folders)."""
        plan = recording()
        if plan is not None:  # fsspec's copy is naming the files: ManyFiles runs them
            plan.calls.append((path1, path2, kwargs))
            return
        b1, k1, version_id = self.split_path(path1)
        if not k1:
            return  # a bucket: its objects are copied by their own paths
        try:
            with translated(path1):
                size = self.client.head_object(b1, k1, version_id=version_id).size or 0
                self._copy_sized(path1, path2, size)
            return
        except FileNotFoundError:
            if version_id is not None or not self.isdir(path1):
                raise
        with contextlib.suppress(FileNotFoundError):
            self._copy_marker(path1, path2)

    def _copy_marker(self, path1: str, path2: str) -> None:
        """Copy the directory ``path1``'s marker object (``key/``) to ``path2``'s: one
        CopyObject (FileNotFoundError if it has none)."""
        b1, k1, _ = self.split_path(path1)
        b2, k2, _ = self.split_path(path2)
        if k1:  # a bucket has no marker
            with translated(path1):
                self.client.copy_object(b1, k1 + "/", b2, k2 + "/")

    def _copy_sized(self, path1: str, path2: str, size: int) -> None:
        """Copy the object ``path1`` of ``size`` bytes (as a HEAD or listing said) on the
        server; no byte passes through here, and its metadata and headers are kept.

        Up to 5 GiB, one CopyObject: the server copies whichever version is current,
        whole, so nothing needs pinning or asking again (s3fs sends the same request).
        Larger, ``Client.copy``: parts the server copies, pinned to the ETag its HEAD
        finds, the copy's size checked."""
        b1, k1, version_id = self.split_path(path1)
        b2, k2, _ = self.split_path(path2)
        with translated(path1):
            if size <= MAX_SINGLE_COPY:
                self.client.copy_object(b1, k1, b2, k2, version_id=version_id)
            else:
                self.client.copy(b1, k1, b2, k2, version_id=version_id)

    def rm_file(self, path: str) -> None:
        bucket, key, version_id = self.split_path(path)
        if key:
            with translated(path):
                self.client.delete_object(bucket, key, version_id=version_id)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> list[str]:
        """Delete files (``delete_objects``, 1000 per request; a path naming a version
        deletes that version); with ``recursive``, a bare bucket name also deletes the
        bucket once it is empty. Returns the paths deleted (as s3fs)."""
        if recursive and maxdepth is None and isinstance(path, str) and not has_magic(path):
            bucket, key, version_id = self.split_path(path)
            if not version_id:
                return self._rm_tree(bucket, key)
        paths = self.expand_path(path, recursive=recursive, maxdepth=maxdepth)
        by_bucket: dict[str, list[str]] = {}
        buckets: list[str] = []
        parents = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
        if recursive:
            parents |= {
                self._strip_protocol(p) for p in (path if isinstance(path, list) else [path])
            }
        for p in paths:
            bucket, key, version_id = self.split_path(p)
            if version_id:
                self.rm_file(p)
            elif key:
                by_bucket.setdefault(bucket, []).append(key)
                if p in parents:  # a "directory": its marker object too, if any
                    by_bucket[bucket].append(key + "/")
            else:
                buckets.append(bucket)
        for bucket, keys in by_bucket.items():
            _delete_all(self.client, bucket, keys, bucket)
        for bucket in buckets:
            self.rmdir(bucket)
        # The objects (and buckets) deleted: not the "directories" above them.
        return [p for p in paths if p not in parents or not self.split_path(p)[1]]

    def _rm_tree(self, bucket: str, key: str) -> list[str]:
        """``rm(recursive=True)`` of one path: every object a listing finds under it
        (folder markers too: the tree is gone, not just its files), then the bucket if
        the path is one. Only keys that exist are deleted, so a versioned bucket gets no
        delete markers for objects that never were."""
        path = f"{bucket}/{key}" if key else bucket
        with translated(path):
            keys = _rm_tree_keys(self.client, bucket, key)
        if not keys and key:
            raise FileNotFoundError(errno.ENOENT, "nothing to delete", path)
        if keys:
            _delete_all(self.client, bucket, keys, path)
        deleted = [f"{bucket}/{k}" for k in keys]
        if not key:
            self.rmdir(bucket)
            deleted.append(bucket)
        return deleted


def _delete_all(client: Client, bucket: str, keys: list[str], path: str) -> None:
    """Delete ``keys``; an OSError naming how many failed, and one of them, if any did."""
    with translated(path):
        failed = client.delete_objects(bucket, keys)
    if failed:
        first = failed[0]
        raise OSError(
            errno.EIO,
            f"could not delete {len(failed)} of {len(keys)} keys, e.g. {first.key!r}: {first.code}",
            bucket,
        )


def _rm_tree_keys(client: Client, bucket: str, key: str) -> list[str]:
    """The keys ``rm(recursive=True)`` of ``bucket/key`` deletes, as listed: the object
    at ``key`` and every one under ``key/``, folder markers (``a/b/``) included."""
    prefix = f"{key}/" if key else ""
    keys = [
        e.key for e in client.list_objects(bucket, prefix=prefix) if isinstance(e, ObjectSummary)
    ]
    if key:
        try:
            client.head_object(bucket, key)
        except errors.NoSuchKey:
            pass
        else:
            keys.insert(0, key)
    return keys


def _names_a_directory(lpath: Any) -> bool:
    """Whether the local ``lpath`` is a directory already, or ends with a separator:
    a download to it would be refused before its HEAD could say what ``rpath`` is."""
    path = os.fspath(lpath)
    return os.path.isdir(path) or path.endswith(("/", os.sep))


def _progress(callback: Any) -> Callable[[int, Any], None]:
    """An objsdk ``progress(done, total)`` reporting to an fsspec callback."""
    sized = False

    def report(done: int, total: Any) -> None:
        nonlocal sized
        if not sized and total is not None:
            callback.set_size(total)
            sized = True
        callback.absolute_update(done)

    return report
